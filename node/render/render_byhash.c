/* The documents named by their content hash (docs/http.md, "Routes" and
 * "Caching"): /api/event/{EVENT_ID}, a stored event's canonical bytes, and
 * /api/bundle/{BUNDLE_SHA256}, a record's newest verified bundle while it
 * is the newest. The bytes a URL names never change (the id and the hash
 * cover everything but the signature block, which only another valid
 * block replaces), so a cache may keep them for good: immutable. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "render_int.h"
#include "log.h"

/* The hash segment: "sha256:" and 64 lower-case hex digits, or the hex
 * alone; else a 400 naming what. */
static int hash_arg(render_ctx_t *c, const char *what, uint8_t out[static 32])
{
	const char *s = c->t->nseg == 3 ? c->t->seg[2] : "";
	pith_err_t err = {0};
	if (store_event_id_parse(s, out, &err)) {
		render_error(c, 400, "%s '%.80s' is not sha256: and 64 lower-case hex digits", what, s);
		return -1;
	}
	return 0;
}

static void json_reply(render_ctx_t *c)
{
	c->r.ctype = "application/json";
	c->r.cors = 1;
	render_etag_body(c);
}

void render_view_event_by_id(render_ctx_t *c)
{
	uint8_t id[32];
	if (hash_arg(c, "event id", id))
		return;
	store_t *st = c->rd->store;
	if (store_events_aside(st)) {
		/* a new node's first catch-up: a read by id would sort a
		 * memtable of the index written aside (docs/store.md) */
		render_error(c, 503, "this mirror is in its first catch-up; try again shortly");
		c->r.retry_after = 1;
		return;
	}
	pith_err_t err = {0};
	pith_buf_reset(c->body);
	int rc = store_event_get(st, id, c->body, &err);
	if (rc == PITH_ENOTFOUND) {
		render_error(c, 404, "no event %s on this mirror", c->t->seg[2]);
		return;
	}
	if (rc) {
		log_warn("http: event %s: %s", c->t->seg[2], err.msg);
		render_error(c, 500, "store error");
		return;
	}
	json_reply(c);
}

void render_view_bundle_by_hash(render_ctx_t *c)
{
	uint8_t sha[32], now_sha[32];
	if (hash_arg(c, "bundle hash", sha))
		return;
	store_t *st = c->rd->store;
	char pith[PITH_NUMBER_LEN + 1];
	int64_t built_us = 0, now_us = 0;
	pith_err_t err = {0};
	int rc = store_bundle_ref_get(st, sha, &built_us, pith, &err);
	if (!rc) {
		pith_buf_reset(c->body);
		rc = store_bundle_get(st, pith, c->body, &err);
	}
	/* a newer bundle stored meanwhile: not the bytes asked for */
	if (!rc)
		rc = store_bundle_newest(st, pith, &now_us, now_sha, &err);
	if (!rc && memcmp(sha, now_sha, 32))
		rc = PITH_ENOTFOUND;
	if (rc == PITH_ENOTFOUND || rc == PITH_EINVAL) { /* EINVAL: a store with no bundle index */
		render_error(c, 404, "no record's newest verified bundle has hash %s on this mirror",
			     c->t->seg[2]);
		return;
	}
	if (rc) {
		log_warn("http: bundle %s: %s", c->t->seg[2], err.msg);
		render_error(c, 500, "store error");
		return;
	}
	if (built_us > 0 && built_us / 1000000 < (int64_t)time(NULL))
		c->r.lm_fixed = built_us / 1000000;
	json_reply(c);
}
