/* The read views: every body is built from what the local store holds -
 * the node's own merged state, the newest verified registry bundle, the
 * stored events. Nothing is fetched from elsewhere and nothing a peer
 * wrote reaches an HTML page unescaped. docs/http.md describes each
 * document. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "json.h"
#include "log.h"
#include "trust.h"

/* ---- identifiers -------------------------------------------------------------------- */

/* Bodies resolved before: body -> year. The registry's URLs name records by
 * their 26-character body, and finding the year is a prefix scan of the
 * store (an iterator: a third of a state.json request's time). A stored
 * record is never removed, so a cached answer stays right; the one thing a
 * cached body can miss is a later, second subject with the same body and
 * another year (necessarily bogus), which would make the body ambiguous:
 * such a body keeps naming the record it named first until the cache is
 * cleared (when full, or at restart). Only resolutions that succeeded are
 * cached, so clients cannot fill it with made-up bodies. */
#define BODY_CACHE_MAX 262144

static void body_key(const char *body, uint8_t key[32])
{
	memset(key, 0, 32);
	memcpy(key, body, PITH_BODY_LEN);
}

static int body_cache_get(http_t *h, const char *body, char pith[static PITH_NUMBER_LEN + 1])
{
	uint8_t key[32];
	body_key(body, key);
	uintptr_t v = (uintptr_t)idmap_get(h->bodies, key);
	if (!v)
		return 0;
	char year[5];
	uint32_t y = (uint32_t)v;
	memcpy(year, &y, 4);
	year[4] = 0;
	snprintf(pith, PITH_NUMBER_LEN + 1, "pith:%s:%.26s", year, body);
	return 1;
}

static void body_cache_put(http_t *h, const char *pith)
{
	uint8_t key[32];
	uint32_t y;
	if (idmap_count(h->bodies) >= BODY_CACHE_MAX) {
		idmap_free(h->bodies);
		h->bodies = idmap_new();
		if (!h->bodies)
			return;
	}
	body_key(pith + PITH_NUMBER_LEN - PITH_BODY_LEN, key);
	memcpy(&y, pith + 5, 4); /* four digits: never zero */
	idmap_put(h->bodies, key, (void *)(uintptr_t)y);
}

int http_resolve_id(http_ctx_t *c, const char *id, char pith[static PITH_NUMBER_LEN + 1])
{
	pith_id_t pid;
	pith_err_t err = {0};
	if (!id || !*id) {
		http_error(c, 400, "no identifier");
		return -1;
	}
	if (strlen(id) > 200 || pith_id_parse(id, &pid, &err)) {
		/* pith_id_parse's message names the identifier itself */
		http_error(c, 400, "%s", err.msg[0] ? err.msg : "identifier: longer than 200 bytes");
		return -1;
	}
	/* a full number names its record exactly: the view's own read says
	 * whether it is stored */
	if (pid.number[0]) {
		memcpy(pith, pid.number, PITH_NUMBER_LEN + 1);
		store_record_info_t info;
		if (c->h->hooks.want && !c->rerun &&
		    store_record_get(c->h->store, pith, &info, &err) == PITH_ENOTFOUND) {
			int w = http_want(c, id);
			if (w)
				return w;
		}
		return 0;
	}
	int is_body = pid.kind == PITH_ID_FULL && strlen(pid.value) == PITH_BODY_LEN;
	if (is_body && c->h->bodies && body_cache_get(c->h, pid.value, pith))
		return 0;
	int rc = store_resolve(c->h->store, id, pith, &err);
	if (rc == PITH_ENOTFOUND) {
		int w = http_want(c, id);
		if (w)
			return w;
		if (c->rerun == HTTP_WANT_NOT_FOUND)
			http_error(c, 404, "no record for %s on this mirror nor its upstreams", id);
		else if (c->rerun == HTTP_WANT_FAILED)
			http_error(c, 502, "no record for %s on this mirror, and its upstreams failed: %s", id,
				   c->rerun_msg ? c->rerun_msg : "see the node's status");
		else
			http_error(c, 404, "no record for %s on this mirror", id);
		return -1;
	}
	if (rc == PITH_EINVAL) {
		http_error(c, 400, "%s", err.msg);
		return -1;
	}
	if (rc) {
		log_warn("http: resolving %s: %s", id, err.msg);
		http_error(c, 500, "store error");
		return -1;
	}
	if (is_body && c->h->bodies)
		body_cache_put(c->h, pith);
	return 0;
}

/* ---- /pith/{ID}/state.json and bundle.json ------------------------------------------ */

/* The top-level state_sha256 of a canonical state: the last occurrence of
 * the key, since everything after it in key order (state_type,
 * state_version, valid_event_count) has a fixed form. */
static const char *state_hash_in(const uint8_t *p, size_t n)
{
	static const char key[] = "\"state_sha256\":\"";
	size_t k = sizeof(key) - 1;
	if (n < k + 64)
		return NULL;
	for (size_t i = n - k - 64 + 1; i-- > 0;)
		if (p[i] == '"' && !memcmp(p + i, key, k))
			return (const char *)p + i + k;
	return NULL;
}

typedef int (*store_doc_fn)(store_t *st, const char *pith, pith_buf_t *out, pith_err_t *err);

/* Reads a stored document into the body as it is; the error reply on
 * failure. */
static int read_doc(http_ctx_t *c, store_doc_fn get, const char *pith, const char *what)
{
	pith_err_t err = {0};
	pith_buf_reset(c->body);
	int rc = get(c->h->store, pith, c->body, &err);
	if (rc == PITH_ENOTFOUND) {
		http_error(c, 404, "no %s of %s on this mirror", what, pith);
		return rc;
	}
	if (rc) {
		log_warn("http: %s of %s: %s", what, pith, err.msg);
		http_error(c, 500, "store error");
		return rc;
	}
	c->r.ctype = "application/json";
	c->r.cors = 1;
	return 0;
}

void view_state(http_ctx_t *c, const char *pith)
{
	if (read_doc(c, store_state_get, pith, "state"))
		return;
	const char *hex = state_hash_in(c->body->data, c->body->len);
	if (hex)
		http_set_etag_hex(c, hex);
	else
		http_set_etag_body(c);
}

void view_bundle(http_ctx_t *c, const char *pith)
{
	if (!read_doc(c, store_bundle_get, pith, "verified registry bundle"))
		http_set_etag_body(c);
}

/* ---- /pith/{ID}.json: the record view --------------------------------------------------- */


/* Events other than the record's creation and its graph snapshots, as a
 * list of short summaries, and their count per type. */
static void other_events(jb_t *b, const rec_t *r, json_value_t **list, json_value_t **summary)
{
	static const char *const lists[][2] = {
		{"author_attestations", "author_attestation"},
		{"timestamp_anchors", "timestamp_anchor"},
		{"storage_attestations", "storage_attestation"},
		{"citation_signatures", "citation_signature"},
		{"replication_records", "replication_record"},
		{"corrections", "correction"},
		{"mirror_hints", "mirror_hint"},
	};
	*list = jb_arr(b);
	*summary = jb_obj(b);
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		const json_value_t *a = json_get_type(r->cur, lists[i][0], JSON_ARRAY);
		if (!a || !a->len)
			continue;
		jb_set(b, *summary, lists[i][1], jb_int(b, (int64_t)a->len));
		for (size_t k = 0; k < a->len; k++) {
			const json_value_t *p = a->u.items[k];
			json_value_t *e = jb_obj(b);
			jb_set(b, e, "event_type", jb_str(b, lists[i][1]));
			jb_set(b, e, "event_id", json_get(p, "event_id"));
			jb_set(b, e, "created_at", json_get(p, "created_at"));
			jb_set(b, e, "target", json_get(p, "target"));
			jb_set(b, e, "signer_id", json_get(json_get(p, "signer"), "signer_id"));
			jb_push(b, *list, e);
		}
	}
}

void view_record(http_ctx_t *c, const char *pith)
{
	http_t *h = c->h;
	rec_t r;
	jb_t b;
	if (rec_doc_begin(c, pith, &r, &b))
		return;
	json_value_t *o = jb_obj(&b);
	jb_set(&b, o, "record_type", jb_str(&b, "pith_number_record"));
	jb_set(&b, o, "schema_url", jb_str(&b, "https://pith.science/schemas/pith-number/v1.json"));
	jb_set(&b, o, "schema_version", jb_str(&b, "1.0"));
	jb_set(&b, o, "pith_number", jb_str(&b, r.pith));
	jb_set(&b, o, "short_pith_number", jb_str(&b, r.short_num));
	jb_set(&b, o, "canonical_sha256", jb_str(&b, r.canon_hex));
	jb_set(&b, o, "source", r.source);
	jb_set(&b, o, "attestation_state", json_get(r.payload, "attestation_state"));
	jb_set(&b, o, "paper", r.paper);
	jb_set(&b, o, "canonical_record", r.record);
	jb_set(&b, o, "receipt", r.receipt);
	jb_set(&b, o, "graph_snapshot", r.graph);
	jb_set(&b, o, "paper_claims", json_get(json_get(r.graph, "claims"), "items"));
	if (r.aliases && r.aliases->len) {
		jb_set(&b, o, "aliases", r.aliases);
	} else {
		json_value_t *al = jb_arr(&b);
		for (int i = 0; i < r.nderived; i++) {
			json_value_t *a = jb_obj(&b);
			jb_set(&b, a, "alias_kind", jb_str(&b, r.derived[i].kind));
			jb_set(&b, a, "alias_value", jb_str(&b, r.derived[i].value));
			jb_push(&b, al, a);
		}
		jb_set(&b, o, "aliases", al);
	}
	json_value_t *vs = jb_obj(&b);
	jb_set(&b, vs, "content_addressed", jb_bool(&b, r.record != NULL));
	jb_set(&b, vs, "pith_receipt", jb_bool(&b, r.receipt != NULL));
	jb_set(&b, vs, "author_attested", jb_bool(&b, rec_list_len(&r, "author_attestations") > 0));
	jb_set(&b, vs, "externally_anchored", jb_bool(&b, rec_list_len(&r, "timestamp_anchors") > 0));
	jb_set(&b, vs, "storage_verified", jb_bool(&b, rec_list_len(&r, "storage_attestations") > 0));
	jb_set(&b, vs, "citation_signatures", jb_int(&b, (int64_t)rec_list_len(&r, "citation_signatures")));
	jb_set(&b, vs, "replication_records", jb_int(&b, (int64_t)rec_list_len(&r, "replication_records")));
	jb_set(&b, vs, "corrections", jb_int(&b, (int64_t)rec_list_len(&r, "corrections")));
	jb_set(&b, vs, "graph_snapshot", jb_bool(&b, r.snap != NULL));
	jb_set(&b, o, "verification_status", vs);
	json_value_t *evs, *sum;
	other_events(&b, &r, &evs, &sum);
	jb_set(&b, o, "events", evs);
	jb_set(&b, o, "event_summary", sum);
	jb_set(&b, o, "links", rec_links(&b, h, &r));
	json_value_t *aa = jb_obj(&b);
	jb_set(&b, aa, "view_html", jb_url(&b, h, "/pith/%s", r.body));
	jb_set(&b, aa, "download_json", jb_url(&b, h, "/pith/%s.json", r.body));
	const char *arxiv = rec_alias(&r, "arxiv");
	if (arxiv)
		jb_set(&b, aa, "resolve_alias",
		     jb_url(&b, h, "/api/pith-number/resolve?arxiv=%s&json=true", arxiv));
	jb_set(&b, aa, "fetch_graph", jb_url(&b, h, "/api/pith-number/%s/graph.json", r.body));
	jb_set(&b, aa, "fetch_events", jb_url(&b, h, "/api/pith-number/%s/events.json", r.body));
	jb_set(&b, o, "agent_actions", aa);
	jb_set(&b, o, "created_at", json_get(r.rc, "created_at"));
	/* the newest created_at among applied events: the last entry of each
	 * time-ordered list */
	const char *updated = NULL;
	for (size_t i = 0; r.cur && i < r.cur->len; i++) {
		const json_value_t *a = r.cur->u.members[i].value;
		const json_value_t *last = json_is(a, JSON_ARRAY) && a->len ? a->u.items[a->len - 1]
			: json_is(a, JSON_OBJECT) && !strcmp(r.cur->u.members[i].key, "record_created") ? a
			: NULL;
		const char *t = json_get_str(last, "created_at");
		if (t && strcmp(r.cur->u.members[i].key, "source_aliases") &&
		    (!updated || strcmp(t, updated) > 0))
			updated = t;
	}
	jb_set(&b, o, "updated_at", jb_str(&b, updated));
	jb_set(&b, o, "state_sha256", jb_str(&b, r.state_sha));
	jb_set(&b, o, "event_count", json_get(r.state, "event_count"));
	jb_finish(c, &b, o, "application/json");
	rec_release(&r);
}

/* ---- /api/pith-number/{ID}/graph.json ------------------------------------------------ */

void view_graph(http_ctx_t *c, const char *pith)
{
	rec_t r;
	jb_t b;
	if (rec_doc_begin(c, pith, &r, &b))
		return;
	json_value_t *o = jb_obj(&b);
	jb_set(&b, o, "graph_type", jb_str(&b, "pith_open_graph_view"));
	jb_set(&b, o, "pith_number", jb_str(&b, r.pith));
	jb_set(&b, o, "short_pith_number", jb_str(&b, r.short_num));
	jb_set(&b, o, "merge_version", json_get(r.state, "merge_version"));
	jb_set(&b, o, "state_sha256", jb_str(&b, r.state_sha));
	jb_set(&b, o, "graph_snapshot", r.graph);
	json_value_t *meta = NULL;
	if (r.snap) {
		meta = jb_obj(&b);
		jb_set(&b, meta, "event_id", json_get(r.snap, "event_id"));
		jb_set(&b, meta, "created_at", json_get(r.snap, "created_at"));
		jb_set(&b, meta, "signer", json_get(r.snap, "signer"));
	}
	jb_set(&b, o, "graph_snapshot_event", meta);
	jb_set(&b, o, "graph_snapshot_count", jb_int(&b, (int64_t)rec_list_len(&r, "graph_snapshots")));
	static const char *const lists[] = {
		"author_attestations", "timestamp_anchors", "storage_attestations",
		"citation_signatures", "replication_records", "corrections", "mirror_hints",
	};
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		const json_value_t *a = json_get_type(r.cur, lists[i], JSON_ARRAY);
		jb_set(&b, o, lists[i], a ? a : jb_arr(&b));
	}
	jb_set(&b, o, "links", rec_links(&b, c->h, &r));
	jb_finish(c, &b, o, "application/json");
	rec_release(&r);
}

/* ---- /api/pith-number/{ID}/events.json ------------------------------------------------ */

typedef struct ev_page {
	pith_buf_t *out;
	uint64_t skip, left, n;
} ev_page_t;

static int ev_page_add(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	(void)id;
	ev_page_t *p = arg;
	if (p->skip) {
		p->skip--;
		return 0;
	}
	if (!p->left)
		return 1;
	pith_buf_puts(p->out, p->n ? "," : "");
	pith_buf_append(p->out, bytes, len);
	p->n++;
	p->left--;
	return p->out->oom ? -1 : 0;
}

/* A non-negative decimal query parameter; def when absent. -1 malformed. */
static int64_t query_u64(http_ctx_t *c, const char *key, int64_t def)
{
	int count;
	const char *v = http_target_query(c->t, key, &count);
	if (!v)
		return def;
	if (count > 1 || !*v || strlen(v) > 12)
		return -1;
	int64_t x = 0;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		x = x * 10 + (*p - '0');
	}
	return x;
}

void view_events(http_ctx_t *c, const char *pith)
{
	http_t *h = c->h;
	pith_err_t err = {0};
	int64_t offset = query_u64(c, "offset", 0);
	int64_t limit = query_u64(c, "limit", (int64_t)h->o.events_page_max);
	if (offset < 0 || limit < 0) {
		http_error(c, 400, "offset and limit are non-negative integers");
		return;
	}
	if (limit > (int64_t)h->o.events_page_max)
		limit = (int64_t)h->o.events_page_max;
	store_record_info_t info;
	int rc = store_record_get(h->store, pith, &info, &err);
	if (rc) {
		http_error(c, rc == PITH_ENOTFOUND ? 404 : 500, "no record %s", pith);
		return;
	}
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	char hex[65];
	pith_hex_encode(info.state_hash, 32, hex);
	/* keys in canonical order, so the document is canonical JSON */
	pith_buf_printf(b, "{\"event_count\":%llu,\"events\":[", (unsigned long long)info.event_count);
	ev_page_t p = {b, (uint64_t)offset, (uint64_t)limit, 0};
	rc = store_events_each(h->store, pith, ev_page_add, &p, &err);
	if (rc < 0 || b->oom) {
		log_warn("http: events of %s: %s", pith, err.msg);
		http_error(c, 500, "store error");
		return;
	}
	uint64_t next = (uint64_t)offset + p.n;
	pith_buf_printf(b, "],\"limit\":%lld,\"next_offset\":", (long long)limit);
	if (next < info.event_count && p.n)
		pith_buf_printf(b, "%llu", (unsigned long long)next);
	else
		pith_buf_puts(b, "null");
	pith_buf_printf(b, ",\"offset\":%lld,\"pith_number\":\"%s\",\"state_sha256\":\"%s\"}",
			(long long)offset, pith, hex);
	if (b->oom) {
		http_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "application/json";
	c->r.cors = 1;
	http_set_etag_body(c);
}

/* ---- /api/pith-number/resolve -------------------------------------------------------- */

int view_resolve(http_ctx_t *c)
{
	http_t *h = c->h;
	static const char *const keys[] = {"arxiv", "doi", "pith", "id"};
	const char *key = NULL, *val = NULL;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		int count;
		const char *v = http_target_query(c->t, keys[i], &count);
		if (!v)
			continue;
		if (key || count > 1) {
			http_error(c, 400, "give exactly one of arxiv=, doi=, pith=, id=");
			return 0;
		}
		key = keys[i];
		val = v;
	}
	if (!key || !*val) {
		http_error(c, 400, "give one of arxiv=, doi=, pith=, id=");
		return 0;
	}
	const char *js = http_target_query(c->t, "json", NULL);
	int want_json = js && (!strcmp(js, "true") || !strcmp(js, "1"));
	char q[256];
	if (!strcmp(key, "arxiv") && strncmp(val, "arxiv:", 6))
		snprintf(q, sizeof(q), "arxiv:%s", val);
	else if (!strcmp(key, "doi") && strncmp(val, "doi:", 4))
		snprintf(q, sizeof(q), "doi:%s", val);
	else
		snprintf(q, sizeof(q), "%s", val);
	char pith[PITH_NUMBER_LEN + 1];
	int rc = http_resolve_id(c, q, pith);
	if (rc)
		return rc > 0;
	const char *body = pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	if (!want_json) {
		c->r.status = 302;
		snprintf(c->r.location, sizeof(c->r.location), "%s/pith/%s", h->base_url, body);
		pith_buf_reset(c->body);
		c->r.ctype = NULL;
		return 0;
	}
	store_record_info_t info;
	pith_err_t err = {0};
	if (store_record_get(h->store, pith, &info, &err)) {
		http_error(c, 500, "store error");
		return 0;
	}
	char hex[65];
	pith_hex_encode(info.state_hash, 32, hex);
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	/* canonical key order again */
	pith_buf_printf(b, "{\"bundle_url\":\"%s/pith/%s/bundle.json\",\"event_count\":%llu,"
			   "\"events_url\":\"%s/api/pith-number/%s/events.json\",\"found\":true,"
			   "\"graph_url\":\"%s/api/pith-number/%s/graph.json\",\"has_bundle\":%s,"
			   "\"json_url\":\"%s/pith/%s.json\",\"pith_number\":\"%s\",\"query\":{",
			h->base_url, body, (unsigned long long)info.event_count, h->base_url, body,
			h->base_url, body, info.has_bundle ? "true" : "false", h->base_url, body, pith);
	json_write_string(b, key, strlen(key));
	pith_buf_puts(b, ":");
	json_write_string(b, val, strlen(val));
	pith_buf_printf(b, "},\"short_pith_number\":\"pith:%.8s\",\"state_sha256\":\"%s\","
			   "\"state_url\":\"%s/pith/%s/state.json\",\"url\":\"%s/pith/%s\"}",
			body, hex, h->base_url, body, h->base_url, body);
	if (b->oom) {
		http_error(c, 500, "out of memory");
		return 0;
	}
	c->r.ctype = "application/json";
	c->r.cors = 1;
	http_set_etag_body(c);
	return 0;
}

/* ---- /pith-mirrors.json ----------------------------------------------------------------- */

/* changes: whether the mirror serves the change feed (only this one is
 * known to: a peer's HELLO says nothing of it). */
static void mirror_entry(jb_t *b, json_value_t *list, const char *name, const char *type,
			 const char *base, const char *status, const json_value_t *key, int changes)
{
	char u[400];
	json_value_t *m = jb_obj(b);
	jb_set(b, m, "name", jb_str(b, name));
	if (changes) {
		snprintf(u, sizeof(u), "%s" HTTP_CHANGES_PATH, base);
		jb_set(b, m, "changes_url", jb_str(b, u));
	}
	jb_set(b, m, "mirror_type", jb_str(b, type));
	jb_set(b, m, "base_url", jb_str(b, base));
	snprintf(u, sizeof(u), "%s/pith/{suffix}/bundle.json", base);
	jb_set(b, m, "bundle_pattern", jb_str(b, u));
	snprintf(u, sizeof(u), "%s/pith/{suffix}/state.json", base);
	jb_set(b, m, "state_pattern", jb_str(b, u));
	snprintf(u, sizeof(u), "%s/.well-known/pith/{suffix}/bundle.json", base);
	jb_set(b, m, "well_known_pattern", jb_str(b, u));
	if (key)
		jb_set(b, m, "public_key", key);
	jb_set(b, m, "status", jb_str(b, status));
	jb_push(b, list, m);
}

/* The registry's signing key block, as its manifest publishes it. */
static json_value_t *registry_key(jb_t *b)
{
	json_value_t *k = jb_obj(b);
	jb_set(b, k, "key_id", jb_str(b, PITH_REGISTRY_KEY_ID));
	jb_set(b, k, "algorithm", jb_str(b, "ed25519"));
	jb_set(b, k, "format", jb_str(b, "raw"));
	jb_set(b, k, "public_key_hex", jb_str(b, PITH_REGISTRY_KEY_HEX));
	jb_set(b, k, "public_key_b64", jb_str(b, "stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM="));
	jb_set(b, k, "fingerprint_sha256_hex", jb_str(b, "8d4b5ee74e4693bcd1df2446408b0d54"));
	jb_set(b, k, "fingerprint_sha256_b32_first128bits", jb_str(b, "RVFV5Z2OI2J3ZUO7ERDEBCYNKS"));
	jb_set(b, k, "rotates_at", NULL);
	jb_set(b, k, "url", jb_str(b, "https://pith.science/pith-signing-key.json"));
	jb_set(b, k, "notes",
	     jb_str(b, "Pith uses this Ed25519 key to sign canonical record SHA-256 digests. Verify "
		     "with: ed25519_verify(public_key, message=canonical_sha256_bytes, "
		     "signature=base64decode(signature_b64))."));
	return k;
}

void view_signing_key(http_ctx_t *c)
{
	jb_t b;
	if (jb_begin(c, &b))
		return;
	jb_finish(c, &b, registry_key(&b), "application/json");
}

static const char *scheme_type(const char *url)
{
	return strncmp(url, "https://", 8) ? "http" : "https";
}

void view_mirrors(http_ctx_t *c)
{
	http_t *h = c->h;
	jb_t b;
	if (jb_begin(c, &b))
		return;
	json_value_t *o = jb_obj(&b);
	jb_set(&b, o, "manifest_type", jb_str(&b, "pith_mirror_manifest"));
	jb_set(&b, o, "manifest_version", jb_str(&b, "1.0"));
	jb_set(&b, o, "generated_at", jb_str(&b, h->mirrors_at));
	jb_set(&b, o, "merge_version", jb_str(&b, "pith-open-graph-merge-v1"));
	json_value_t *list = jb_arr(&b);
	json_value_t *key = registry_key(&b);
	mirror_entry(&b, list, h->name, scheme_type(h->base_url), h->base_url, "self", key, 1);
	for (size_t i = 0; i < h->nmirrors; i++)
		mirror_entry(&b, list, h->mirrors[i].name, scheme_type(h->mirrors[i].base_url),
			     h->mirrors[i].base_url, "peer", key, 0);
	if (h->o.list_registry)
		mirror_entry(&b, list, "Pith Resolver", "https", "https://pith.science", "primary", key, 0);
	jb_set(&b, o, "mirrors", list);
	jb_set(&b, o, "notes",
	     jb_str(&b, "Any conforming mirror may host the same Pith Open Graph bundles. Current "
		      "state is computed by deterministic merge, not by trusting this manifest. "
		      "Peer entries are what this mirror's peers announced; they are not vouched for."));
	jb_finish(c, &b, o, "application/json");
}

/* ---- /api/changes: the change feed ---------------------------------------------------- */

/* The cursor a client passes back: the decimal sequence number a "cursor"
 * or "next" said (any u64; 0 is the start). 0 or -1 if malformed. */
static int cursor_parse(const char *v, uint64_t *out)
{
	uint64_t x = 0;
	size_t n = strlen(v);
	if (!n || n > 20)
		return -1;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		uint64_t d = (uint64_t)(*p - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	*out = x;
	return 0;
}

typedef struct feed_page {
	pith_buf_t *out;
	size_t n;
} feed_page_t;

static int feed_add(void *arg, const store_change_t *ch)
{
	feed_page_t *p = arg;
	char state[65], sha[65];
	pith_hex_encode(ch->state_hash, 32, state);
	/* keys in canonical order */
	pith_buf_puts(p->out, p->n++ ? ",{\"built_at\":" : "{\"built_at\":");
	if (ch->has_bundle) {
		pith_hex_encode(ch->bundle_sha, 32, sha);
		json_write_string(p->out, ch->built_at, strlen(ch->built_at));
		pith_buf_printf(p->out, ",\"bundle_sha256\":\"%s\"", sha);
	} else {
		pith_buf_puts(p->out, "null,\"bundle_sha256\":null");
	}
	pith_buf_printf(p->out, ",\"cursor\":\"%llu\",\"pith_number\":\"%s\",\"state_sha256\":\"%s\"}",
			(unsigned long long)ch->seq, ch->pith_number, state);
	return p->out->oom ? -1 : 0;
}

void view_changes(http_ctx_t *c)
{
	int count = 0;
	uint64_t after = 0, next = 0;
	const char *a = http_target_query(c->t, "after", &count);
	if (a && (count > 1 || cursor_parse(a, &after))) {
		http_error(c, 400, "after: not a cursor of this feed (give back a \"cursor\" or \"next\" "
			   "it served, or leave it out to start from the beginning)");
		return;
	}
	int64_t limit = query_u64(c, "limit", HTTP_CHANGES_DEFAULT);
	if (limit < 1) {
		http_error(c, 400, "limit: a whole number from 1 (at most %d are served)", HTTP_CHANGES_MAX);
		return;
	}
	if (limit > HTTP_CHANGES_MAX)
		limit = HTTP_CHANGES_MAX;
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	pith_buf_puts(b, "{\"changes\":[");
	feed_page_t p = {b, 0};
	pith_err_t err = {0};
	int rc = store_changes_each(c->h->store, after, (size_t)limit, feed_add, &p, &next, &err);
	if (rc || b->oom) {
		log_warn("http: change feed after %llu: %s", (unsigned long long)after,
			 rc ? err.msg : "out of memory");
		http_error(c, rc == PITH_EINVAL ? 503 : 500, "%s",
			   rc == PITH_EINVAL ? "this store has no change log yet" : "store error");
		return;
	}
	pith_buf_printf(b, "],\"next\":\"%llu\"}", (unsigned long long)next);
	if (b->oom) {
		http_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "application/json";
	c->r.cors = 1;
}

/* ---- /healthz and /metrics --------------------------------------------------------------- */

void view_healthz(http_ctx_t *c)
{
	store_counts_t sc;
	store_errors_t se;
	char why[400];
	store_counts_get(c->h->store, &sc);
	store_errors_get(c->h->store, &se);
	/* 503 while draining, while the store does not take writes, and for
	 * a while after a read failed (docs/http.md) */
	int store_ok = store_is_healthy(c->h->store, STORE_READ_ERROR_WINDOW_US, why, sizeof(why));
	int ok = !c->h->draining && store_ok;
	pith_buf_reset(c->body);
	pith_buf_printf(c->body, "{\"ok\":%s,", ok ? "true" : "false");
	if (!ok) {
		const char *r = c->h->draining ? "shutting down" : why;
		pith_buf_puts(c->body, "\"reason\":");
		json_write_string(c->body, r, strlen(r));
		pith_buf_puts(c->body, ",");
	}
	pith_buf_printf(c->body, "\"store\":{\"bundles\":%llu,\"events\":%llu,\"records\":%llu,"
			"\"writable\":%s,\"read_errors\":%llu,\"write_errors\":%llu}}\n",
			(unsigned long long)sc.bundles, (unsigned long long)sc.events,
			(unsigned long long)sc.records, se.writable ? "true" : "false",
			(unsigned long long)se.read_errors, (unsigned long long)se.write_errors);
	c->r.status = ok ? 200 : 503;
	c->r.ctype = "application/json";
	c->r.no_store = 1;
}

void view_metrics(http_ctx_t *c)
{
	pith_buf_reset(c->body);
	if (metrics_render(c->h->metrics, c->body)) {
		http_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "text/plain; version=0.0.4; charset=utf-8";
	c->r.no_store = 1;
}
