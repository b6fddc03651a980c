/* The state root's routes (docs/state-root.md, "In pithd"; docs/http.md):
 * /api/root[?cursor=C], /api/root/history, /api/root/range?prefix=BITS
 * and /api/proof/{ID}, answered by the node through http_hooks_t.root on
 * the loop thread. */
#include <string.h>

#include "http_int.h"

/* The value of query key k (the first), or NULL; 1 in *twice when given
 * more than once. */
static const char *query(const render_target_t *t, const char *k, int *twice)
{
	const char *v = NULL;
	for (size_t i = 0; i < t->nq; i++)
		if (!strcmp(t->q[i].key, k)) {
			if (v)
				*twice = 1;
			else
				v = t->q[i].val;
		}
	return v;
}

void http_view_root(http_ctx_t *c, const char *id)
{
	const render_target_t *t = c->v.t;
	int what, twice = 0;
	const char *arg = NULL;
	if (!strcmp(t->seg[1], "proof")) {
		what = HTTP_ROOT_PROOF;
		arg = id;
	} else if (t->nseg == 2) {
		what = HTTP_ROOT_LATEST;
		arg = query(t, "cursor", &twice);
	} else if (!strcmp(t->seg[2], "history")) {
		what = HTTP_ROOT_HISTORY;
	} else if (!strcmp(t->seg[2], "range")) {
		what = HTTP_ROOT_RANGE;
		arg = query(t, "prefix", &twice);
		if (!arg && !twice)
			arg = "";
	} else {
		render_error(&c->v, 404, "no such document: /api/root, /api/root/history, "
			     "/api/root/range?prefix=BITS and /api/proof/{ID} are");
		return;
	}
	if (twice) {
		render_error(&c->v, 400, "a query parameter is given twice");
		return;
	}
	if (!c->h->hooks.root) {
		render_error(&c->v, 404, "this server keeps no state root");
		return;
	}
	char etag[65], why[300];
	pith_buf_reset(c->v.body);
	int status = c->h->hooks.root(c->h->hooks.arg, what, arg, c->v.body, etag, why, sizeof(why));
	if (status != 200) {
		render_error(&c->v, status, "%s", why);
		if (status == 503)
			c->v.r.retry_after = 1;
		return;
	}
	c->v.r.status = 200;
	c->v.r.ctype = "application/json";
	c->v.r.cors = 1;
	if (etag[0])
		render_etag_hex(&c->v, etag);
	else
		c->v.r.no_store = 1; /* of the moment: a range or a proof of the tree now */
}
