/* The read views: every body is built from what the local store holds -
 * the node's own merged state, the newest verified registry bundle, the
 * stored events. Nothing is fetched from elsewhere and nothing a peer
 * wrote reaches an HTML page unescaped. docs/http.md describes each
 * document. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_int.h"
#include "json.h"
#include "log.h"
#include "trust.h"

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
static int read_doc(render_ctx_t *c, store_doc_fn get, const char *pith, const char *what)
{
	pith_err_t err = {0};
	pith_buf_reset(c->body);
	int rc = get(c->rd->store, pith, c->body, &err);
	if (rc == PITH_ENOTFOUND) {
		render_error(c, 404, "no %s of %s on this mirror", what, pith);
		return rc;
	}
	if (rc) {
		log_warn("http: %s of %s: %s", what, pith, err.msg);
		render_error(c, 500, "store error");
		return rc;
	}
	c->r.ctype = "application/json";
	c->r.cors = 1;
	return 0;
}

void render_view_state(render_ctx_t *c, const char *pith)
{
	if (read_doc(c, store_state_get, pith, "state"))
		return;
	const char *hex = state_hash_in(c->body->data, c->body->len);
	if (hex)
		render_etag_hex(c, hex);
	else
		render_etag_body(c);
}

void render_view_bundle(render_ctx_t *c, const char *pith)
{
	if (!read_doc(c, store_bundle_get, pith, "verified registry bundle"))
		render_etag_body(c);
}

/* ---- /pith/{ID}.json: the record view --------------------------------------------------- */


/* Events other than the record's creation and its graph snapshots, as a
 * list of short summaries, and their count per type. */
static void other_events(render_jb_t *b, const render_rec_t *r, json_value_t **list, json_value_t **summary)
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
	*list = render_jb_arr(b);
	*summary = render_jb_obj(b);
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		const json_value_t *a = json_get_type(r->cur, lists[i][0], JSON_ARRAY);
		if (!a || !a->len)
			continue;
		render_jb_set(b, *summary, lists[i][1], render_jb_int(b, (int64_t)a->len));
		for (size_t k = 0; k < a->len; k++) {
			const json_value_t *p = a->u.items[k];
			json_value_t *e = render_jb_obj(b);
			render_jb_set(b, e, "event_type", render_jb_str(b, lists[i][1]));
			render_jb_set(b, e, "event_id", json_get(p, "event_id"));
			render_jb_set(b, e, "created_at", json_get(p, "created_at"));
			render_jb_set(b, e, "target", json_get(p, "target"));
			render_jb_set(b, e, "signer_id", json_get(json_get(p, "signer"), "signer_id"));
			render_jb_push(b, *list, e);
		}
	}
}

void render_view_record(render_ctx_t *c, const char *pith)
{
	render_t *h = c->rd;
	render_rec_t r;
	render_jb_t b;
	if (render_rec_doc_begin(c, pith, &r, &b))
		return;
	json_value_t *o = render_jb_obj(&b);
	render_jb_set(&b, o, "record_type", render_jb_str(&b, "pith_number_record"));
	render_jb_set(&b, o, "schema_url", render_jb_str(&b, "https://pith.science/schemas/pith-number/v1.json"));
	render_jb_set(&b, o, "schema_version", render_jb_str(&b, "1.0"));
	render_jb_set(&b, o, "pith_number", render_jb_str(&b, r.pith));
	render_jb_set(&b, o, "short_pith_number", render_jb_str(&b, r.short_num));
	render_jb_set(&b, o, "canonical_sha256", render_jb_str(&b, r.canon_hex));
	render_jb_set(&b, o, "source", r.source);
	render_jb_set(&b, o, "attestation_state", json_get(r.payload, "attestation_state"));
	render_jb_set(&b, o, "paper", r.paper);
	render_jb_set(&b, o, "canonical_record", r.record);
	render_jb_set(&b, o, "receipt", r.receipt);
	render_jb_set(&b, o, "graph_snapshot", r.graph);
	render_jb_set(&b, o, "paper_claims", json_get(json_get(r.graph, "claims"), "items"));
	if (r.aliases && r.aliases->len) {
		render_jb_set(&b, o, "aliases", r.aliases);
	} else {
		json_value_t *al = render_jb_arr(&b);
		for (int i = 0; i < r.nderived; i++) {
			json_value_t *a = render_jb_obj(&b);
			render_jb_set(&b, a, "alias_kind", render_jb_str(&b, r.derived[i].kind));
			render_jb_set(&b, a, "alias_value", render_jb_str(&b, r.derived[i].value));
			render_jb_push(&b, al, a);
		}
		render_jb_set(&b, o, "aliases", al);
	}
	json_value_t *vs = render_jb_obj(&b);
	render_jb_set(&b, vs, "content_addressed", render_jb_bool(&b, r.record != NULL));
	render_jb_set(&b, vs, "pith_receipt", render_jb_bool(&b, r.receipt != NULL));
	render_jb_set(&b, vs, "author_attested", render_jb_bool(&b, render_rec_list_len(&r, "author_attestations") > 0));
	render_jb_set(&b, vs, "externally_anchored", render_jb_bool(&b, render_rec_list_len(&r, "timestamp_anchors") > 0));
	render_jb_set(&b, vs, "storage_verified", render_jb_bool(&b, render_rec_list_len(&r, "storage_attestations") > 0));
	render_jb_set(&b, vs, "citation_signatures", render_jb_int(&b, (int64_t)render_rec_list_len(&r, "citation_signatures")));
	render_jb_set(&b, vs, "replication_records", render_jb_int(&b, (int64_t)render_rec_list_len(&r, "replication_records")));
	render_jb_set(&b, vs, "corrections", render_jb_int(&b, (int64_t)render_rec_list_len(&r, "corrections")));
	render_jb_set(&b, vs, "graph_snapshot", render_jb_bool(&b, r.snap != NULL));
	render_jb_set(&b, o, "verification_status", vs);
	json_value_t *evs, *sum;
	other_events(&b, &r, &evs, &sum);
	render_jb_set(&b, o, "events", evs);
	render_jb_set(&b, o, "event_summary", sum);
	render_jb_set(&b, o, "links", render_rec_links(&b, h, &r));
	json_value_t *aa = render_jb_obj(&b);
	render_jb_set(&b, aa, "view_html", render_jb_url(&b, h, "/pith/%s", r.body));
	render_jb_set(&b, aa, "download_json", render_jb_url(&b, h, "/pith/%s.json", r.body));
	const char *arxiv = render_rec_alias(&r, "arxiv");
	if (arxiv)
		render_jb_set(&b, aa, "resolve_alias",
		     render_jb_url(&b, h, "/api/pith-number/resolve?arxiv=%s&json=true", arxiv));
	render_jb_set(&b, aa, "fetch_graph", render_jb_url(&b, h, "/api/pith-number/%s/graph.json", r.body));
	render_jb_set(&b, aa, "fetch_events", render_jb_url(&b, h, "/api/pith-number/%s/events.json", r.body));
	render_jb_set(&b, o, "agent_actions", aa);
	render_jb_set(&b, o, "created_at", json_get(r.rc, "created_at"));
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
	render_jb_set(&b, o, "updated_at", render_jb_str(&b, updated));
	render_jb_set(&b, o, "state_sha256", render_jb_str(&b, r.state_sha));
	render_jb_set(&b, o, "event_count", json_get(r.state, "event_count"));
	render_jb_finish(c, &b, o, "application/json");
	render_rec_release(&r);
}

/* ---- /api/pith-number/{ID}/graph.json ------------------------------------------------ */

void render_view_graph(render_ctx_t *c, const char *pith)
{
	render_rec_t r;
	render_jb_t b;
	if (render_rec_doc_begin(c, pith, &r, &b))
		return;
	json_value_t *o = render_jb_obj(&b);
	render_jb_set(&b, o, "graph_type", render_jb_str(&b, "pith_open_graph_view"));
	render_jb_set(&b, o, "pith_number", render_jb_str(&b, r.pith));
	render_jb_set(&b, o, "short_pith_number", render_jb_str(&b, r.short_num));
	render_jb_set(&b, o, "merge_version", json_get(r.state, "merge_version"));
	render_jb_set(&b, o, "state_sha256", render_jb_str(&b, r.state_sha));
	render_jb_set(&b, o, "graph_snapshot", r.graph);
	json_value_t *meta = NULL;
	if (r.snap) {
		meta = render_jb_obj(&b);
		render_jb_set(&b, meta, "event_id", json_get(r.snap, "event_id"));
		render_jb_set(&b, meta, "created_at", json_get(r.snap, "created_at"));
		render_jb_set(&b, meta, "signer", json_get(r.snap, "signer"));
	}
	render_jb_set(&b, o, "graph_snapshot_event", meta);
	render_jb_set(&b, o, "graph_snapshot_count", render_jb_int(&b, (int64_t)render_rec_list_len(&r, "graph_snapshots")));
	static const char *const lists[] = {
		"author_attestations", "timestamp_anchors", "storage_attestations",
		"citation_signatures", "replication_records", "corrections", "mirror_hints",
	};
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		const json_value_t *a = json_get_type(r.cur, lists[i], JSON_ARRAY);
		render_jb_set(&b, o, lists[i], a ? a : render_jb_arr(&b));
	}
	render_jb_set(&b, o, "links", render_rec_links(&b, c->rd, &r));
	render_jb_finish(c, &b, o, "application/json");
	render_rec_release(&r);
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
static int64_t query_u64(render_ctx_t *c, const char *key, int64_t def)
{
	int count;
	const char *v = render_target_query(c->t, key, &count);
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

void render_view_events(render_ctx_t *c, const char *pith)
{
	render_t *h = c->rd;
	pith_err_t err = {0};
	int64_t offset = query_u64(c, "offset", 0);
	int64_t limit = query_u64(c, "limit", (int64_t)h->events_page_max);
	if (offset < 0 || limit < 0) {
		render_error(c, 400, "offset and limit are non-negative integers");
		return;
	}
	if (limit > (int64_t)h->events_page_max)
		limit = (int64_t)h->events_page_max;
	store_record_info_t info;
	int rc = store_record_get(h->store, pith, &info, &err);
	if (rc) {
		render_error(c, rc == PITH_ENOTFOUND ? 404 : 500, "no record %s", pith);
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
		render_error(c, 500, "store error");
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
		render_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "application/json";
	c->r.cors = 1;
	render_etag_body(c);
}

/* ---- /pith-mirrors.json ----------------------------------------------------------------- */

/* changes: whether the mirror serves the change feed (only this one is
 * known to: a peer's HELLO says nothing of it). Returns the entry, for
 * this mirror's own members. */
static json_value_t *mirror_entry(render_jb_t *b, json_value_t *list, const char *name, const char *type,
			 const char *base, const char *status, const json_value_t *key, int changes)
{
	char u[400];
	json_value_t *m = render_jb_obj(b);
	render_jb_set(b, m, "name", render_jb_str(b, name));
	if (changes) {
		snprintf(u, sizeof(u), "%s" HTTP_CHANGES_PATH, base);
		render_jb_set(b, m, "changes_url", render_jb_str(b, u));
	}
	render_jb_set(b, m, "mirror_type", render_jb_str(b, type));
	render_jb_set(b, m, "base_url", render_jb_str(b, base));
	snprintf(u, sizeof(u), "%s/pith/{suffix}/bundle.json", base);
	render_jb_set(b, m, "bundle_pattern", render_jb_str(b, u));
	snprintf(u, sizeof(u), "%s/pith/{suffix}/state.json", base);
	render_jb_set(b, m, "state_pattern", render_jb_str(b, u));
	snprintf(u, sizeof(u), "%s/.well-known/pith/{suffix}/bundle.json", base);
	render_jb_set(b, m, "well_known_pattern", render_jb_str(b, u));
	if (key)
		render_jb_set(b, m, "public_key", key);
	render_jb_set(b, m, "status", render_jb_str(b, status));
	render_jb_push(b, list, m);
	return m;
}

/* The registry's signing key block, as its manifest publishes it. */
static json_value_t *registry_key(render_jb_t *b)
{
	json_value_t *k = render_jb_obj(b);
	render_jb_set(b, k, "key_id", render_jb_str(b, PITH_REGISTRY_KEY_ID));
	render_jb_set(b, k, "algorithm", render_jb_str(b, "ed25519"));
	render_jb_set(b, k, "format", render_jb_str(b, "raw"));
	render_jb_set(b, k, "public_key_hex", render_jb_str(b, PITH_REGISTRY_KEY_HEX));
	render_jb_set(b, k, "public_key_b64", render_jb_str(b, "stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM="));
	render_jb_set(b, k, "fingerprint_sha256_hex", render_jb_str(b, "8d4b5ee74e4693bcd1df2446408b0d54"));
	render_jb_set(b, k, "fingerprint_sha256_b32_first128bits", render_jb_str(b, "RVFV5Z2OI2J3ZUO7ERDEBCYNKS"));
	render_jb_set(b, k, "rotates_at", NULL);
	render_jb_set(b, k, "url", render_jb_str(b, "https://pith.science/pith-signing-key.json"));
	render_jb_set(b, k, "notes",
	     render_jb_str(b, "Pith uses this Ed25519 key to sign canonical record SHA-256 digests. Verify "
		     "with: ed25519_verify(public_key, message=canonical_sha256_bytes, "
		     "signature=base64decode(signature_b64))."));
	return k;
}

void render_view_signing_key(render_ctx_t *c)
{
	render_jb_t b;
	if (render_jb_begin(c, &b))
		return;
	render_jb_finish(c, &b, registry_key(&b), "application/json");
}

static const char *scheme_type(const char *url)
{
	return strncmp(url, "https://", 8) ? "http" : "https";
}

/* The self entry's "state_root": the latest signed root's summary, where
 * to get it, and the node key it is signed with. */
static json_value_t *root_entry(render_jb_t *b, render_t *h)
{
	const render_root_t *r = &h->root;
	json_value_t *o = render_jb_obj(b), *k = render_jb_obj(b);
	render_jb_set(b, o, "root_sha256", render_jb_str(b, r->root_sha256));
	render_jb_set(b, o, "record_count", render_jb_int(b, (int64_t)r->record_count));
	render_jb_set(b, o, "feed_cursor", render_jb_str(b, r->feed_cursor[0] ? r->feed_cursor : NULL));
	render_jb_set(b, o, "signed_at", render_jb_str(b, r->signed_at));
	render_jb_set(b, o, "root_url", render_jb_url(b, h, "/api/root%s", ""));
	render_jb_set(b, k, "key_id", render_jb_str(b, r->key_id));
	render_jb_set(b, k, "public_key_hex", render_jb_str(b, r->public_key_hex));
	render_jb_set(b, k, "public_key_fingerprint", render_jb_str(b, r->fingerprint));
	render_jb_set(b, o, "node_key", k);
	return o;
}

void render_view_mirrors(render_ctx_t *c)
{
	render_t *h = c->rd;
	render_jb_t b;
	if (render_jb_begin(c, &b))
		return;
	json_value_t *o = render_jb_obj(&b);
	render_jb_set(&b, o, "manifest_type", render_jb_str(&b, "pith_mirror_manifest"));
	render_jb_set(&b, o, "manifest_version", render_jb_str(&b, "1.0"));
	render_jb_set(&b, o, "generated_at", render_jb_str(&b, h->mirrors_at));
	render_jb_set(&b, o, "merge_version", render_jb_str(&b, "pith-open-graph-merge-v1"));
	json_value_t *list = render_jb_arr(&b);
	json_value_t *key = registry_key(&b);
	json_value_t *self = mirror_entry(&b, list, h->name, scheme_type(h->base_url), h->base_url,
					  "self", key, 1);
	/* who runs it, when the operator said (members the registry's
	 * manifest does not have, as changes_url) */
	if (h->operator_name[0])
		render_jb_set(&b, self, "operator", render_jb_str(&b, h->operator_name));
	if (h->contact[0])
		render_jb_set(&b, self, "contact", render_jb_str(&b, h->contact));
	if (h->has_root)
		render_jb_set(&b, self, "state_root", root_entry(&b, h));
	for (size_t i = 0; i < h->nmirrors; i++)
		mirror_entry(&b, list, h->mirrors[i].name, scheme_type(h->mirrors[i].base_url),
			     h->mirrors[i].base_url, "peer", key, 0);
	if (h->list_registry)
		mirror_entry(&b, list, "Pith Resolver", "https", "https://pith.science", "primary", key, 0);
	render_jb_set(&b, o, "mirrors", list);
	render_jb_set(&b, o, "notes",
	     render_jb_str(&b, "Any conforming mirror may host the same Pith Open Graph bundles. Current "
		      "state is computed by deterministic merge, not by trusting this manifest. "
		      "Peer entries are what this mirror's peers announced; they are not vouched for."));
	render_jb_finish(c, &b, o, "application/json");
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
	/* what a cache in front of this node purges (docs/http.md, "Caching") */
	char tag[RENDER_CACHE_TAG_LEN + 1];
	render_cache_tag(ch->pith_number, tag);
	pith_buf_printf(p->out,
			",\"cache_tag\":\"%s\",\"cursor\":\"%llu\",\"pith_number\":\"%s\","
			"\"state_sha256\":\"%s\"}",
			tag, (unsigned long long)ch->seq, ch->pith_number, state);
	return p->out->oom ? -1 : 0;
}

void render_view_changes(render_ctx_t *c)
{
	int count = 0;
	uint64_t after = 0, next = 0;
	const char *a = render_target_query(c->t, "after", &count);
	if (a && (count > 1 || cursor_parse(a, &after))) {
		render_error(c, 400, "after: not a cursor of this feed (give back a \"cursor\" or \"next\" "
			   "it served, or leave it out to start from the beginning)");
		return;
	}
	int64_t limit = query_u64(c, "limit", HTTP_CHANGES_DEFAULT);
	if (limit < 1) {
		render_error(c, 400, "limit: a whole number from 1 (at most %d are served)", HTTP_CHANGES_MAX);
		return;
	}
	if (limit > HTTP_CHANGES_MAX)
		limit = HTTP_CHANGES_MAX;
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	pith_buf_puts(b, "{\"changes\":[");
	feed_page_t p = {b, 0};
	pith_err_t err = {0};
	int rc = store_changes_each(c->rd->store, after, (size_t)limit, feed_add, &p, &next, &err);
	if (rc || b->oom) {
		log_warn("http: change feed after %llu: %s", (unsigned long long)after,
			 rc ? err.msg : "out of memory");
		render_error(c, rc == PITH_EINVAL ? 503 : 500, "%s",
			   rc == PITH_EINVAL ? "this store has no change log yet" : "store error");
		return;
	}
	pith_buf_printf(b, "],\"next\":\"%llu\"}", (unsigned long long)next);
	if (b->oom) {
		render_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "application/json";
	c->r.cors = 1;
}

