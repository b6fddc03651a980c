/* Building the views' JSON documents: a thin wrapper over proto/json.h's
 * builder with one sticky out-of-memory flag, and a record as the store
 * knows it (its merged state, parsed, with the parts the views use). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_int.h"
#include "log.h"

#define STATE_PARSE_MAX (64u << 20)

/* ---- a small JSON builder wrapper: one sticky out-of-memory flag ---------------------- */

json_value_t *render_jb_chk(render_jb_t *b, json_value_t *v)
{
	if (!v)
		b->oom = 1;
	return v;
}

json_value_t *render_jb_str(render_jb_t *b, const char *s)
{
	return render_jb_chk(b, s ? json_new_string(b->d, s) : json_new_null(b->d));
}

json_value_t *render_jb_int(render_jb_t *b, int64_t v)
{
	return render_jb_chk(b, json_new_int(b->d, v));
}

json_value_t *render_jb_bool(render_jb_t *b, int v)
{
	return render_jb_chk(b, json_new_bool(b->d, v));
}

json_value_t *render_jb_obj(render_jb_t *b)
{
	return render_jb_chk(b, json_new_object(b->d));
}

json_value_t *render_jb_arr(render_jb_t *b)
{
	return render_jb_chk(b, json_new_array(b->d));
}

/* Sets o[k] = v; a NULL v (absent in the state) becomes null. */
void render_jb_set(render_jb_t *b, json_value_t *o, const char *k, const json_value_t *v)
{
	if (!v)
		v = json_new_null(b->d);
	if (!o || !v || json_object_set(b->d, o, k, (json_value_t *)v))
		b->oom = 1;
}

void render_jb_push(render_jb_t *b, json_value_t *a, const json_value_t *v)
{
	if (!a || !v || json_array_push(b->d, a, (json_value_t *)v))
		b->oom = 1;
}

/* "BASE" + path formatted. */
json_value_t *render_jb_url(render_jb_t *b, render_t *h, const char *fmt, const char *arg)
{
	char path[512], url[800];
	snprintf(path, sizeof(path), fmt, arg);
	snprintf(url, sizeof(url), "%s%s", h->base_url, path);
	return render_jb_str(b, url);
}

/* ---- a record, as the store knows it ---------------------------------------------- */

void render_rec_release(render_rec_t *r)
{
	json_doc_free(r->doc);
}

size_t render_rec_list_len(const render_rec_t *r, const char *key)
{
	const json_value_t *a = json_get_type(r->cur, key, JSON_ARRAY);
	return a ? a->len : 0;
}

/* Loads and parses the record's state. Sets the error reply on failure. */
int render_rec_doc_begin(render_ctx_t *c, const char *pith, render_rec_t *r, render_jb_t *b)
{
	if (render_rec_load(c, pith, r))
		return -1;
	if (render_jb_begin(c, b)) {
		render_rec_release(r);
		return -1;
	}
	return 0;
}

int render_rec_load(render_ctx_t *c, const char *pith, render_rec_t *r)
{
	memset(r, 0, sizeof(*r));
	pith_err_t err = {0};
	pith_buf_t *raw = &c->rd->tmp;
	pith_buf_reset(raw);
	int rc = store_state_get(c->rd->store, pith, raw, &err);
	if (rc == PITH_ENOTFOUND) {
		render_error(c, 404, "no state for %s", pith);
		return -1;
	}
	json_limits_t lim = {STATE_PARSE_MAX, JSON_MAX_DEPTH_DEFAULT, JSON_MAX_INT_DIGITS};
	if (rc || json_parse(&r->doc, raw->data, raw->len, &lim, &err)) {
		log_warn("http: the state of %s: %s", pith, err.msg);
		render_error(c, 500, "cannot read the state of %s", pith);
		return -1;
	}
	snprintf(r->pith, sizeof(r->pith), "%s", pith);
	r->body = r->pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	snprintf(r->short_num, sizeof(r->short_num), "pith:%.8s", r->body);
	r->state = json_doc_root(r->doc);
	r->cur = json_get_type(r->state, "current", JSON_OBJECT);
	r->state_sha = json_get_str(r->state, "state_sha256");
	r->record = json_get_type(r->cur, "canonical_record", JSON_OBJECT);
	r->rc = json_get_type(r->cur, "record_created", JSON_OBJECT);
	r->payload = json_get_type(r->rc, "payload", JSON_OBJECT);
	r->receipt = json_get_type(r->payload, "receipt", JSON_OBJECT);
	r->canon_hex = json_get_str(r->payload, "canonical_sha256");
	r->source = json_get_type(r->record, "source", JSON_OBJECT);
	r->aliases = json_get_type(r->cur, "source_aliases", JSON_ARRAY);
	const json_value_t *snaps = json_get_type(r->cur, "graph_snapshots", JSON_ARRAY);
	if (snaps && snaps->len) {
		r->snap = snaps->u.items[snaps->len - 1];
		r->graph = json_get_type(json_get_type(r->snap, "payload", JSON_OBJECT), "graph_snapshot",
					 JSON_OBJECT);
		r->paper = json_get_type(r->graph, "paper", JSON_OBJECT);
	}
	if (r->record && (!r->aliases || !r->aliases->len)) {
		int n = pith_record_aliases(r->record, r->pith, r->derived);
		r->nderived = n > 0 ? n : 0;
	}
	return 0;
}

/* An alias value of a kind ("arxiv", "doi"...), from the bundle's list or
 * derived from the record. */
const char *render_rec_alias(const render_rec_t *r, const char *kind)
{
	if (r->aliases)
		for (size_t i = 0; i < r->aliases->len; i++) {
			const json_value_t *a = r->aliases->u.items[i];
			const char *k = json_get_str(a, "alias_kind");
			if (k && !strcmp(k, kind))
				return json_get_str(a, "alias_value");
		}
	for (int i = 0; i < r->nderived; i++)
		if (!strcmp(r->derived[i].kind, kind))
			return r->derived[i].value;
	return NULL;
}

const char *render_rec_paper_str(const render_rec_t *r, const char *key)
{
	return json_get_str(r->paper, key);
}

/* The canonical bytes of v into the body, ETag from them. */
void render_view_send_json(render_ctx_t *c, const json_value_t *v, const char *ctype)
{
	pith_buf_reset(c->body);
	if (json_canon_write(v, c->body) || c->body->oom) {
		render_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = ctype;
	c->r.cors = 1;
	render_etag_body(c);
}

int render_jb_begin(render_ctx_t *c, render_jb_t *b)
{
	b->oom = 0;
	b->d = json_doc_new();
	if (!b->d) {
		render_error(c, 500, "out of memory");
		return -1;
	}
	return 0;
}

void render_jb_finish(render_ctx_t *c, render_jb_t *b, const json_value_t *root, const char *ctype)
{
	if (b->oom)
		render_error(c, 500, "out of memory");
	else
		render_view_send_json(c, root, ctype);
	json_doc_free(b->d);
}

json_value_t *render_rec_links(render_jb_t *b, render_t *h, const render_rec_t *r)
{
	json_value_t *l = render_jb_obj(b);
	render_jb_set(b, l, "html", render_jb_url(b, h, "/pith/%s", r->body));
	render_jb_set(b, l, "json", render_jb_url(b, h, "/pith/%s.json", r->body));
	render_jb_set(b, l, "bundle", render_jb_url(b, h, "/pith/%s/bundle.json", r->body));
	render_jb_set(b, l, "state", render_jb_url(b, h, "/pith/%s/state.json", r->body));
	render_jb_set(b, l, "well_known_bundle", render_jb_url(b, h, "/.well-known/pith/%s/bundle.json", r->body));
	render_jb_set(b, l, "graph_json", render_jb_url(b, h, "/api/pith-number/%s/graph.json", r->body));
	render_jb_set(b, l, "events_json", render_jb_url(b, h, "/api/pith-number/%s/events.json", r->body));
	return l;
}
