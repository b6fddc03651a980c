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

#define STATE_PARSE_MAX (64u << 20)

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
		http_error(c, 400, "malformed identifier: %s", err.msg[0] ? err.msg : "too long");
		return -1;
	}
	/* a full number names its record exactly: the view's own read says
	 * whether it is stored */
	if (pith_number_is_valid(id)) {
		snprintf(pith, PITH_NUMBER_LEN + 1, "%s", id);
		return 0;
	}
	int is_body = pid.kind == PITH_ID_FULL && strlen(pid.value) == PITH_BODY_LEN;
	if (is_body && c->h->bodies && body_cache_get(c->h, pid.value, pith))
		return 0;
	int rc = store_resolve(c->h->store, id, pith, &err);
	if (rc == PITH_ENOTFOUND) {
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

/* ---- a small JSON builder wrapper: one sticky out-of-memory flag ---------------------- */

typedef struct jb {
	json_doc_t *d;
	int oom;
} jb_t;

static json_value_t *jb_chk(jb_t *b, json_value_t *v)
{
	if (!v)
		b->oom = 1;
	return v;
}

static json_value_t *jstr(jb_t *b, const char *s)
{
	return jb_chk(b, s ? json_new_string(b->d, s) : json_new_null(b->d));
}

static json_value_t *jint(jb_t *b, int64_t v)
{
	return jb_chk(b, json_new_int(b->d, v));
}

static json_value_t *jbool(jb_t *b, int v)
{
	return jb_chk(b, json_new_bool(b->d, v));
}

static json_value_t *jobj(jb_t *b)
{
	return jb_chk(b, json_new_object(b->d));
}

static json_value_t *jarr(jb_t *b)
{
	return jb_chk(b, json_new_array(b->d));
}

/* Sets o[k] = v; a NULL v (absent in the state) becomes null. */
static void jset(jb_t *b, json_value_t *o, const char *k, const json_value_t *v)
{
	if (!v)
		v = json_new_null(b->d);
	if (!o || !v || json_object_set(b->d, o, k, (json_value_t *)v))
		b->oom = 1;
}

static void jpush(jb_t *b, json_value_t *a, const json_value_t *v)
{
	if (!a || !v || json_array_push(b->d, a, (json_value_t *)v))
		b->oom = 1;
}

/* "BASE" + path formatted. */
static json_value_t *jurl(jb_t *b, http_t *h, const char *fmt, const char *arg)
{
	char path[512], url[800];
	snprintf(path, sizeof(path), fmt, arg);
	snprintf(url, sizeof(url), "%s%s", h->base_url, path);
	return jstr(b, url);
}

/* ---- a record, as the store knows it ---------------------------------------------- */

typedef struct rec {
	json_doc_t *doc;                /* the parsed state */
	const json_value_t *state, *cur;
	const json_value_t *record;     /* canonical_record or NULL */
	const json_value_t *rc;         /* record_created projection or NULL */
	const json_value_t *payload;    /* its payload */
	const json_value_t *receipt;
	const json_value_t *snap;       /* newest graph snapshot projection */
	const json_value_t *graph;      /* its payload's graph_snapshot */
	const json_value_t *paper;      /* graph.paper */
	const json_value_t *source;     /* canonical_record.source */
	const json_value_t *aliases;    /* current.source_aliases */
	char pith[PITH_NUMBER_LEN + 1];
	const char *body;               /* 26 characters, in pith */
	char short_num[14];             /* "pith:" + 8 */
	const char *canon_hex;          /* NULL without a record_created */
	const char *state_sha;
	/* derived aliases when no bundle listed any */
	pith_alias_t derived[6];
	int nderived;
} rec_t;

static void rec_release(rec_t *r)
{
	json_doc_free(r->doc);
}

static size_t list_len(const rec_t *r, const char *key)
{
	const json_value_t *a = json_get_type(r->cur, key, JSON_ARRAY);
	return a ? a->len : 0;
}

/* Loads and parses the record's state. Sets the error reply on failure. */
static int rec_load(http_ctx_t *c, const char *pith, rec_t *r)
{
	memset(r, 0, sizeof(*r));
	pith_err_t err = {0};
	pith_buf_t *raw = &c->h->tmp;
	pith_buf_reset(raw);
	int rc = store_state_get(c->h->store, pith, raw, &err);
	if (rc == PITH_ENOTFOUND) {
		http_error(c, 404, "no state for %s", pith);
		return -1;
	}
	json_limits_t lim = {STATE_PARSE_MAX, JSON_MAX_DEPTH_DEFAULT, JSON_MAX_INT_DIGITS};
	if (rc || json_parse(&r->doc, raw->data, raw->len, &lim, &err)) {
		log_warn("http: the state of %s: %s", pith, err.msg);
		http_error(c, 500, "cannot read the state of %s", pith);
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
static const char *rec_alias(const rec_t *r, const char *kind)
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

static const char *paper_str(const rec_t *r, const char *key)
{
	return json_get_str(r->paper, key);
}

/* The canonical bytes of v into the body, ETag from them. */
static void send_json_value(http_ctx_t *c, const json_value_t *v, const char *ctype)
{
	pith_buf_reset(c->body);
	if (json_canon_write(v, c->body) || c->body->oom) {
		http_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = ctype;
	c->r.cors = 1;
	http_set_etag_body(c);
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

static json_value_t *links_object(jb_t *b, http_t *h, const rec_t *r)
{
	json_value_t *l = jobj(b);
	jset(b, l, "html", jurl(b, h, "/pith/%s", r->body));
	jset(b, l, "json", jurl(b, h, "/pith/%s.json", r->body));
	jset(b, l, "bundle", jurl(b, h, "/pith/%s/bundle.json", r->body));
	jset(b, l, "state", jurl(b, h, "/pith/%s/state.json", r->body));
	jset(b, l, "well_known_bundle", jurl(b, h, "/.well-known/pith/%s/bundle.json", r->body));
	jset(b, l, "graph_json", jurl(b, h, "/api/pith-number/%s/graph.json", r->body));
	jset(b, l, "events_json", jurl(b, h, "/api/pith-number/%s/events.json", r->body));
	return l;
}

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
	*list = jarr(b);
	*summary = jobj(b);
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		const json_value_t *a = json_get_type(r->cur, lists[i][0], JSON_ARRAY);
		if (!a || !a->len)
			continue;
		jset(b, *summary, lists[i][1], jint(b, (int64_t)a->len));
		for (size_t k = 0; k < a->len; k++) {
			const json_value_t *p = a->u.items[k];
			json_value_t *e = jobj(b);
			jset(b, e, "event_type", jstr(b, lists[i][1]));
			jset(b, e, "event_id", json_get(p, "event_id"));
			jset(b, e, "created_at", json_get(p, "created_at"));
			jset(b, e, "target", json_get(p, "target"));
			jset(b, e, "signer_id", json_get(json_get(p, "signer"), "signer_id"));
			jpush(b, *list, e);
		}
	}
}

void view_record(http_ctx_t *c, const char *pith)
{
	http_t *h = c->h;
	rec_t r;
	if (rec_load(c, pith, &r))
		return;
	jb_t b = {json_doc_new(), 0};
	if (!b.d) {
		rec_release(&r);
		http_error(c, 500, "out of memory");
		return;
	}
	json_value_t *o = jobj(&b);
	jset(&b, o, "record_type", jstr(&b, "pith_number_record"));
	jset(&b, o, "schema_url", jstr(&b, "https://pith.science/schemas/pith-number/v1.json"));
	jset(&b, o, "schema_version", jstr(&b, "1.0"));
	jset(&b, o, "pith_number", jstr(&b, r.pith));
	jset(&b, o, "short_pith_number", jstr(&b, r.short_num));
	jset(&b, o, "canonical_sha256", jstr(&b, r.canon_hex));
	jset(&b, o, "source", r.source);
	jset(&b, o, "attestation_state", json_get(r.payload, "attestation_state"));
	jset(&b, o, "paper", r.paper);
	jset(&b, o, "canonical_record", r.record);
	jset(&b, o, "receipt", r.receipt);
	jset(&b, o, "graph_snapshot", r.graph);
	jset(&b, o, "paper_claims", json_get(json_get(r.graph, "claims"), "items"));
	if (r.aliases && r.aliases->len) {
		jset(&b, o, "aliases", r.aliases);
	} else {
		json_value_t *al = jarr(&b);
		for (int i = 0; i < r.nderived; i++) {
			json_value_t *a = jobj(&b);
			jset(&b, a, "alias_kind", jstr(&b, r.derived[i].kind));
			jset(&b, a, "alias_value", jstr(&b, r.derived[i].value));
			jpush(&b, al, a);
		}
		jset(&b, o, "aliases", al);
	}
	json_value_t *vs = jobj(&b);
	jset(&b, vs, "content_addressed", jbool(&b, r.record != NULL));
	jset(&b, vs, "pith_receipt", jbool(&b, r.receipt != NULL));
	jset(&b, vs, "author_attested", jbool(&b, list_len(&r, "author_attestations") > 0));
	jset(&b, vs, "externally_anchored", jbool(&b, list_len(&r, "timestamp_anchors") > 0));
	jset(&b, vs, "storage_verified", jbool(&b, list_len(&r, "storage_attestations") > 0));
	jset(&b, vs, "citation_signatures", jint(&b, (int64_t)list_len(&r, "citation_signatures")));
	jset(&b, vs, "replication_records", jint(&b, (int64_t)list_len(&r, "replication_records")));
	jset(&b, vs, "corrections", jint(&b, (int64_t)list_len(&r, "corrections")));
	jset(&b, vs, "graph_snapshot", jbool(&b, r.snap != NULL));
	jset(&b, o, "verification_status", vs);
	json_value_t *evs, *sum;
	other_events(&b, &r, &evs, &sum);
	jset(&b, o, "events", evs);
	jset(&b, o, "event_summary", sum);
	jset(&b, o, "links", links_object(&b, h, &r));
	json_value_t *aa = jobj(&b);
	jset(&b, aa, "view_html", jurl(&b, h, "/pith/%s", r.body));
	jset(&b, aa, "download_json", jurl(&b, h, "/pith/%s.json", r.body));
	const char *arxiv = rec_alias(&r, "arxiv");
	if (arxiv)
		jset(&b, aa, "resolve_alias",
		     jurl(&b, h, "/api/pith-number/resolve?arxiv=%s&json=true", arxiv));
	jset(&b, aa, "fetch_graph", jurl(&b, h, "/api/pith-number/%s/graph.json", r.body));
	jset(&b, aa, "fetch_events", jurl(&b, h, "/api/pith-number/%s/events.json", r.body));
	jset(&b, o, "agent_actions", aa);
	jset(&b, o, "created_at", json_get(r.rc, "created_at"));
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
	jset(&b, o, "updated_at", jstr(&b, updated));
	jset(&b, o, "state_sha256", jstr(&b, r.state_sha));
	jset(&b, o, "event_count", json_get(r.state, "event_count"));
	if (b.oom)
		http_error(c, 500, "out of memory");
	else
		send_json_value(c, o, "application/json");
	json_doc_free(b.d);
	rec_release(&r);
}

/* ---- /pith/{ID}: JSON-LD or HTML --------------------------------------------------- */

/* Quality of a media type in an Accept header (0 when not listed, 1 when
 * no q is given). */
static double accept_q(const char *accept, const char *type)
{
	double best = 0;
	size_t tl = strlen(type);
	const char *p = accept;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *s = p;
		while (*p && *p != ',' && *p != ';' && *p != ' ')
			p++;
		size_t n = (size_t)(p - s);
		double q = 1;
		while (*p && *p != ',') {
			if (*p == ';') {
				p++;
				while (*p == ' ')
					p++;
				if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=')
					q = strtod(p + 2, NULL);
			} else {
				p++;
			}
		}
		if (n == tl && !strncasecmp(s, type, n) && q > best)
			best = q;
	}
	return best;
}

/* JSON-LD when the client prefers application/ld+json (or plain JSON)
 * to HTML; a browser's Accept asks for text/html first. */
static int wants_ld(http_ctx_t *c)
{
	const char *a = http_header(c, "Accept");
	if (!a)
		return 0;
	double ld = accept_q(a, "application/ld+json");
	double js = accept_q(a, "application/json");
	if (js > ld)
		ld = js;
	double html = accept_q(a, "text/html");
	double any = accept_q(a, "*/*");
	if (any > html)
		html = any;
	return ld > 0 && ld >= html;
}

static void view_page_ld(http_ctx_t *c, const rec_t *r)
{
	http_t *h = c->h;
	jb_t b = {json_doc_new(), 0};
	if (!b.d) {
		http_error(c, 500, "out of memory");
		return;
	}
	json_value_t *o = jobj(&b);
	jset(&b, o, "@context", jstr(&b, "https://schema.org"));
	jset(&b, o, "@type", jstr(&b, "ScholarlyArticle"));
	jset(&b, o, "@id", jurl(&b, h, "/pith/%s", r->body));
	jset(&b, o, "url", jurl(&b, h, "/pith/%s", r->body));
	json_value_t *ids = jarr(&b);
	struct {
		const char *prop, *val;
	} idv[] = {
		{"pith", r->pith},
		{"pith_short", r->short_num},
		{"arxiv", rec_alias(r, "arxiv")},
		{"doi", rec_alias(r, "doi")},
	};
	for (size_t i = 0; i < sizeof(idv) / sizeof(idv[0]); i++) {
		if (!idv[i].val)
			continue;
		json_value_t *pv = jobj(&b);
		jset(&b, pv, "@type", jstr(&b, "PropertyValue"));
		jset(&b, pv, "propertyID", jstr(&b, idv[i].prop));
		jset(&b, pv, "value", jstr(&b, idv[i].val));
		jpush(&b, ids, pv);
	}
	jset(&b, o, "identifier", ids);
	if (paper_str(r, "title"))
		jset(&b, o, "name", json_get(r->paper, "title"));
	const char *authors = paper_str(r, "authors_text");
	if (authors && *authors) {
		json_value_t *al = jarr(&b);
		const char *p = authors;
		while (*p) {
			const char *e = strstr(p, ", ");
			size_t n = e ? (size_t)(e - p) : strlen(p);
			if (n) {
				json_value_t *a = jobj(&b);
				jset(&b, a, "@type", jstr(&b, "Person"));
				jset(&b, a, "name", jb_chk(&b, json_new_stringn(b.d, p, n)));
				jpush(&b, al, a);
			}
			p += n;
			if (e)
				p += 2;
		}
		jset(&b, o, "author", al);
	}
	const json_value_t *md = json_get_type(r->record, "metadata", JSON_OBJECT);
	if (json_get_str(md, "submitted_at"))
		jset(&b, o, "datePublished", json_get(md, "submitted_at"));
	if (json_get_str(md, "license"))
		jset(&b, o, "license", json_get(md, "license"));
	const char *arxiv = rec_alias(r, "arxiv_version");
	if (!arxiv)
		arxiv = rec_alias(r, "arxiv");
	const char *doi = rec_alias(r, "doi");
	if (arxiv || doi) {
		json_value_t *same = jarr(&b);
		char u[300];
		if (arxiv) {
			snprintf(u, sizeof(u), "https://arxiv.org/abs/%s", arxiv);
			jpush(&b, same, jstr(&b, u));
		}
		if (doi) {
			snprintf(u, sizeof(u), "https://doi.org/%s", doi);
			jpush(&b, same, jstr(&b, u));
		}
		jset(&b, o, "sameAs", same);
	}
	jset(&b, o, "pith_number", jstr(&b, r->pith));
	jset(&b, o, "short_pith_number", jstr(&b, r->short_num));
	jset(&b, o, "canonical_sha256", jstr(&b, r->canon_hex));
	jset(&b, o, "canonical_record", r->record);
	jset(&b, o, "receipt", r->receipt);
	jset(&b, o, "state_sha256", jstr(&b, r->state_sha));
	jset(&b, o, "links", links_object(&b, h, r));
	if (b.oom)
		http_error(c, 500, "out of memory");
	else
		send_json_value(c, o, "application/ld+json");
	json_doc_free(b.d);
}

/* ---- HTML ------------------------------------------------------------------------ */

/* Length of a valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

void html_escape(pith_buf_t *out, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		unsigned char ch = p[i];
		switch (ch) {
		case '&': pith_buf_puts(out, "&amp;"); i++; continue;
		case '<': pith_buf_puts(out, "&lt;"); i++; continue;
		case '>': pith_buf_puts(out, "&gt;"); i++; continue;
		case '"': pith_buf_puts(out, "&quot;"); i++; continue;
		case '\'': pith_buf_puts(out, "&#39;"); i++; continue;
		default: break;
		}
		if (ch < 0x20 && ch != '\n' && ch != '\t') {
			i++; /* controls: dropped */
			continue;
		}
		if (ch == 0x7f) {
			i++;
			continue;
		}
		size_t l = utf8_len(p + i, n - i);
		if (!l) {
			pith_buf_puts(out, "\xef\xbf\xbd");
			i++;
			continue;
		}
		pith_buf_append(out, p + i, l);
		i += l;
	}
}

static void hesc(pith_buf_t *out, const char *s)
{
	if (s)
		html_escape(out, s, strlen(s));
}

/* Canonical JSON re-indented two spaces a level (string contents are
 * copied as they are). */
static void json_indent(pith_buf_t *out, const uint8_t *p, size_t n)
{
	int depth = 0, in_str = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t ch = p[i];
		if (in_str) {
			pith_buf_putc(out, ch);
			if (ch == '\\' && i + 1 < n)
				pith_buf_putc(out, p[++i]);
			else if (ch == '"')
				in_str = 0;
			continue;
		}
		switch (ch) {
		case '"':
			in_str = 1;
			pith_buf_putc(out, ch);
			break;
		case '{':
		case '[':
			pith_buf_putc(out, ch);
			if (i + 1 < n && (p[i + 1] == '}' || p[i + 1] == ']')) {
				pith_buf_putc(out, p[++i]);
				break;
			}
			depth++;
			pith_buf_printf(out, "\n%*s", 2 * depth, "");
			break;
		case '}':
		case ']':
			depth--;
			pith_buf_printf(out, "\n%*s%c", 2 * (depth > 0 ? depth : 0), "", ch);
			break;
		case ',':
			pith_buf_printf(out, ",\n%*s", 2 * depth, "");
			break;
		case ':':
			pith_buf_puts(out, ": ");
			break;
		default:
			pith_buf_putc(out, ch);
		}
	}
}

static void html_link(pith_buf_t *b, http_t *h, const char *path_fmt, const char *body,
		      const char *text)
{
	char path[300];
	snprintf(path, sizeof(path), path_fmt, body);
	pith_buf_puts(b, "<a href=\"");
	hesc(b, h->base_url);
	hesc(b, path);
	pith_buf_puts(b, "\">");
	hesc(b, text);
	pith_buf_puts(b, "</a>");
}

static void view_page_html(http_ctx_t *c, const rec_t *r)
{
	http_t *h = c->h;
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	const char *title = paper_str(r, "title");
	pith_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
			 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
			 "<title>");
	if (title && *title) {
		hesc(b, title);
		pith_buf_puts(b, " &middot; ");
	}
	hesc(b, r->short_num);
	pith_buf_puts(b, "</title>\n<style>body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;"
			 "margin:2rem auto;padding:0 1rem;color:#222}code,pre{font:14px ui-monospace,"
			 "monospace}pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;"
			 "padding:.75rem}dt{font-weight:600}.muted{color:#666}</style></head>\n<body>\n"
			 "<p class=\"muted\">Pith Number</p>\n<h1>");
	hesc(b, r->short_num);
	pith_buf_puts(b, "</h1>\n<p><code>");
	hesc(b, r->pith);
	pith_buf_puts(b, "</code></p>\n");
	if (title && *title) {
		pith_buf_puts(b, "<h2>");
		hesc(b, title);
		pith_buf_puts(b, "</h2>\n");
	}
	const char *authors = paper_str(r, "authors_text");
	if (authors && *authors) {
		pith_buf_puts(b, "<p>");
		hesc(b, authors);
		pith_buf_puts(b, "</p>\n");
	}
	const json_value_t *md = json_get_type(r->record, "metadata", JSON_OBJECT);
	const char *kind = json_get_str(r->source, "kind"), *sid = json_get_str(r->source, "id");
	if (kind && sid) {
		pith_buf_puts(b, "<p>");
		hesc(b, kind);
		pith_buf_puts(b, ":");
		hesc(b, sid);
		const json_value_t *ver = json_get_type(r->source, "version", JSON_INT);
		if (ver) {
			pith_buf_puts(b, " v");
			hesc(b, ver->u.str);
		}
		const char *sub = json_get_str(md, "submitted_at");
		if (sub && strlen(sub) >= 10) {
			pith_buf_puts(b, " &middot; ");
			html_escape(b, sub, 10);
		}
		const char *cat = json_get_str(md, "primary_cat");
		if (cat) {
			pith_buf_puts(b, " &middot; ");
			hesc(b, cat);
		}
		const json_value_t *cc = json_get_type(md, "cross_cats_sorted", JSON_ARRAY);
		for (size_t i = 0; cc && i < cc->len && i < 32; i++)
			if (json_is(cc->u.items[i], JSON_STRING)) {
				pith_buf_puts(b, " &middot; ");
				hesc(b, cc->u.items[i]->u.str);
			}
		pith_buf_puts(b, "</p>\n");
	}
	pith_buf_puts(b, "<p>");
	html_link(b, h, "/pith/%s.json", r->body, "JSON");
	pith_buf_puts(b, " &middot; ");
	html_link(b, h, "/pith/%s/bundle.json", r->body, "Open Graph bundle");
	pith_buf_puts(b, " &middot; ");
	html_link(b, h, "/pith/%s/state.json", r->body, "Merged state");
	pith_buf_puts(b, " &middot; ");
	html_link(b, h, "/api/pith-number/%s/events.json", r->body, "Events JSON");
	pith_buf_puts(b, " &middot; ");
	html_link(b, h, "/api/pith-number/%s/graph.json", r->body, "Graph JSON");
	pith_buf_puts(b, "</p>\n<h3>Record completeness</h3>\n<ul>\n");
	static const char *const lists[][2] = {
		{"timestamp_anchors", "Timestamp anchors"},
		{"storage_attestations", "Storage attestations"},
		{"author_attestations", "Author attestations"},
		{"citation_signatures", "Citation signatures"},
		{"replication_records", "Replication records"},
		{"corrections", "Corrections"},
		{"graph_snapshots", "Graph snapshots"},
		{"mirror_hints", "Mirror hints"},
	};
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		pith_buf_printf(b, "<li>%s: %zu</li>\n", lists[i][1], list_len(r, lists[i][0]));
	pith_buf_puts(b, "</ul>\n");
	if (r->receipt) {
		pith_buf_puts(b, "<h3>Receipt and verification</h3>\n<dl>");
		static const char *const rk[][2] = {
			{"first_computed_at", "First computed"},
			{"builder_version", "Builder"},
			{"key_id", "Signing key"},
			{"signature_status", "Signature status"},
		};
		for (size_t i = 0; i < sizeof(rk) / sizeof(rk[0]); i++) {
			const char *v = json_get_str(r->receipt, rk[i][0]);
			if (!v)
				continue;
			pith_buf_printf(b, "<dt>%s</dt><dd><code>", rk[i][1]);
			hesc(b, v);
			pith_buf_puts(b, "</code></dd>");
		}
		pith_buf_puts(b, "</dl>\n");
	}
	if (r->canon_hex) {
		pith_buf_puts(b, "<h3>Canonical hash</h3>\n<p><code>");
		hesc(b, r->canon_hex);
		pith_buf_puts(b, "</code></p>\n");
	}
	pith_buf_puts(b, "<h3>Aliases</h3>\n<p>");
	int first = 1;
	if (r->aliases && r->aliases->len) {
		for (size_t i = 0; i < r->aliases->len && i < 64; i++) {
			const char *k = json_get_str(r->aliases->u.items[i], "alias_kind");
			const char *v = json_get_str(r->aliases->u.items[i], "alias_value");
			if (!k || !v)
				continue;
			pith_buf_puts(b, first ? "" : " &middot; ");
			first = 0;
			hesc(b, k);
			pith_buf_puts(b, ": ");
			hesc(b, v);
		}
	} else {
		for (int i = 0; i < r->nderived; i++) {
			pith_buf_puts(b, first ? "" : " &middot; ");
			first = 0;
			hesc(b, r->derived[i].kind);
			pith_buf_puts(b, ": ");
			hesc(b, r->derived[i].value);
		}
	}
	pith_buf_puts(b, first ? "none known</p>\n" : "</p>\n");
	pith_buf_puts(b, "<h3>Merged state on this mirror</h3>\n<p><code>");
	hesc(b, r->state_sha);
	const json_value_t *ec = json_get_type(r->state, "event_count", JSON_INT);
	const json_value_t *iv = json_get_type(r->state, "invalid_event_count", JSON_INT);
	const json_value_t *eq = json_get_type(r->state, "equivocation_count", JSON_INT);
	pith_buf_puts(b, "</code><br>events: ");
	hesc(b, ec ? ec->u.str : "?");
	pith_buf_puts(b, ", invalid: ");
	hesc(b, iv ? iv->u.str : "?");
	pith_buf_puts(b, ", equivocations: ");
	hesc(b, eq ? eq->u.str : "?");
	pith_buf_puts(b, "</p>\n");
	if (r->record) {
		pith_buf_puts(b, "<h3>Verify this Pith Number yourself</h3>\n<pre>curl -sH "
				 "'Accept: application/ld+json' ");
		hesc(b, h->base_url);
		pith_buf_puts(b, "/pith/");
		hesc(b, r->body);
		pith_buf_puts(b, " \\\n  | jq -c '.canonical_record' \\\n  | python3 -c \"import sys,json,"
				 "hashlib; b=json.dumps(json.loads(sys.stdin.read()), sort_keys=True, "
				 "separators=(',',':'), ensure_ascii=False).encode(); "
				 "print(hashlib.sha256(b).hexdigest())\"\n# expect: ");
		hesc(b, r->canon_hex);
		pith_buf_puts(b, "</pre>\n<h3>Canonical record JSON</h3>\n<pre>");
		pith_buf_t *t = &h->tmp2;
		pith_buf_reset(t);
		pith_buf_t *ind = &h->tmp;
		pith_buf_reset(ind);
		if (!json_canon_write(r->record, t)) {
			json_indent(ind, t->data, t->len);
			html_escape(b, (const char *)ind->data, ind->len);
		}
		pith_buf_puts(b, "</pre>\n");
	}
	pith_buf_puts(b, "<p class=\"muted\">Served by the mirror ");
	hesc(b, h->name);
	pith_buf_puts(b, " from its own store: the state above is its own deterministic merge of "
			 "the signed events it holds.</p>\n</body></html>\n");
	if (b->oom) {
		http_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "text/html; charset=utf-8";
	c->r.is_html = 1;
	http_set_etag_body(c);
}

void view_page(http_ctx_t *c, const char *pith)
{
	rec_t r;
	c->r.vary_accept = 1;
	if (rec_load(c, pith, &r))
		return;
	if (wants_ld(c))
		view_page_ld(c, &r);
	else
		view_page_html(c, &r);
	c->r.vary_accept = 1;
	rec_release(&r);
}

/* ---- /api/pith-number/{ID}/graph.json ------------------------------------------------ */

void view_graph(http_ctx_t *c, const char *pith)
{
	rec_t r;
	if (rec_load(c, pith, &r))
		return;
	jb_t b = {json_doc_new(), 0};
	if (!b.d) {
		rec_release(&r);
		http_error(c, 500, "out of memory");
		return;
	}
	json_value_t *o = jobj(&b);
	jset(&b, o, "graph_type", jstr(&b, "pith_open_graph_view"));
	jset(&b, o, "pith_number", jstr(&b, r.pith));
	jset(&b, o, "short_pith_number", jstr(&b, r.short_num));
	jset(&b, o, "merge_version", json_get(r.state, "merge_version"));
	jset(&b, o, "state_sha256", jstr(&b, r.state_sha));
	jset(&b, o, "graph_snapshot", r.graph);
	json_value_t *meta = NULL;
	if (r.snap) {
		meta = jobj(&b);
		jset(&b, meta, "event_id", json_get(r.snap, "event_id"));
		jset(&b, meta, "created_at", json_get(r.snap, "created_at"));
		jset(&b, meta, "signer", json_get(r.snap, "signer"));
	}
	jset(&b, o, "graph_snapshot_event", meta);
	jset(&b, o, "graph_snapshot_count", jint(&b, (int64_t)list_len(&r, "graph_snapshots")));
	static const char *const lists[] = {
		"author_attestations", "timestamp_anchors", "storage_attestations",
		"citation_signatures", "replication_records", "corrections", "mirror_hints",
	};
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		const json_value_t *a = json_get_type(r.cur, lists[i], JSON_ARRAY);
		jset(&b, o, lists[i], a ? a : jarr(&b));
	}
	jset(&b, o, "links", links_object(&b, c->h, &r));
	if (b.oom)
		http_error(c, 500, "out of memory");
	else
		send_json_value(c, o, "application/json");
	json_doc_free(b.d);
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

void view_resolve(http_ctx_t *c)
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
			return;
		}
		key = keys[i];
		val = v;
	}
	if (!key || !*val) {
		http_error(c, 400, "give one of arxiv=, doi=, pith=, id=");
		return;
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
	if (http_resolve_id(c, q, pith))
		return;
	const char *body = pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	if (!want_json) {
		c->r.status = 302;
		snprintf(c->r.location, sizeof(c->r.location), "%s/pith/%s", h->base_url, body);
		pith_buf_reset(c->body);
		c->r.ctype = NULL;
		return;
	}
	store_record_info_t info;
	pith_err_t err = {0};
	if (store_record_get(h->store, pith, &info, &err)) {
		http_error(c, 500, "store error");
		return;
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
		return;
	}
	c->r.ctype = "application/json";
	c->r.cors = 1;
	http_set_etag_body(c);
}

/* ---- /pith-mirrors.json ----------------------------------------------------------------- */

static void mirror_entry(jb_t *b, json_value_t *list, const char *name, const char *type,
			 const char *base, const char *status, const json_value_t *key)
{
	char u[400];
	json_value_t *m = jobj(b);
	jset(b, m, "name", jstr(b, name));
	jset(b, m, "mirror_type", jstr(b, type));
	jset(b, m, "base_url", jstr(b, base));
	snprintf(u, sizeof(u), "%s/pith/{suffix}/bundle.json", base);
	jset(b, m, "bundle_pattern", jstr(b, u));
	snprintf(u, sizeof(u), "%s/pith/{suffix}/state.json", base);
	jset(b, m, "state_pattern", jstr(b, u));
	snprintf(u, sizeof(u), "%s/.well-known/pith/{suffix}/bundle.json", base);
	jset(b, m, "well_known_pattern", jstr(b, u));
	if (key)
		jset(b, m, "public_key", key);
	jset(b, m, "status", jstr(b, status));
	jpush(b, list, m);
}

/* The registry's signing key block, as its manifest publishes it. */
static json_value_t *registry_key(jb_t *b)
{
	json_value_t *k = jobj(b);
	jset(b, k, "key_id", jstr(b, PITH_REGISTRY_KEY_ID));
	jset(b, k, "algorithm", jstr(b, "ed25519"));
	jset(b, k, "format", jstr(b, "raw"));
	jset(b, k, "public_key_hex", jstr(b, PITH_REGISTRY_KEY_HEX));
	jset(b, k, "public_key_b64", jstr(b, "stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM="));
	jset(b, k, "fingerprint_sha256_hex", jstr(b, "8d4b5ee74e4693bcd1df2446408b0d54"));
	jset(b, k, "fingerprint_sha256_b32_first128bits", jstr(b, "RVFV5Z2OI2J3ZUO7ERDEBCYNKS"));
	jset(b, k, "rotates_at", NULL);
	jset(b, k, "url", jstr(b, "https://pith.science/pith-signing-key.json"));
	jset(b, k, "notes",
	     jstr(b, "Pith uses this Ed25519 key to sign canonical record SHA-256 digests. Verify "
		     "with: ed25519_verify(public_key, message=canonical_sha256_bytes, "
		     "signature=base64decode(signature_b64))."));
	return k;
}

static const char *scheme_type(const char *url)
{
	return strncmp(url, "https://", 8) ? "http" : "https";
}

void view_mirrors(http_ctx_t *c)
{
	http_t *h = c->h;
	jb_t b = {json_doc_new(), 0};
	if (!b.d) {
		http_error(c, 500, "out of memory");
		return;
	}
	json_value_t *o = jobj(&b);
	jset(&b, o, "manifest_type", jstr(&b, "pith_mirror_manifest"));
	jset(&b, o, "manifest_version", jstr(&b, "1.0"));
	jset(&b, o, "generated_at", jstr(&b, h->mirrors_at));
	jset(&b, o, "merge_version", jstr(&b, "pith-open-graph-merge-v1"));
	json_value_t *list = jarr(&b);
	json_value_t *key = registry_key(&b);
	mirror_entry(&b, list, h->name, scheme_type(h->base_url), h->base_url, "self", key);
	for (size_t i = 0; i < h->nmirrors; i++)
		mirror_entry(&b, list, h->mirrors[i].name, scheme_type(h->mirrors[i].base_url),
			     h->mirrors[i].base_url, "peer", key);
	if (h->o.list_registry)
		mirror_entry(&b, list, "Pith Resolver", "https", "https://pith.science", "primary", key);
	jset(&b, o, "mirrors", list);
	jset(&b, o, "notes",
	     jstr(&b, "Any conforming mirror may host the same Pith Open Graph bundles. Current "
		      "state is computed by deterministic merge, not by trusting this manifest. "
		      "Peer entries are what this mirror's peers announced; they are not vouched for."));
	if (b.oom)
		http_error(c, 500, "out of memory");
	else
		send_json_value(c, o, "application/json");
	json_doc_free(b.d);
}

/* ---- /healthz and /metrics --------------------------------------------------------------- */

void view_healthz(http_ctx_t *c)
{
	store_counts_t sc;
	store_counts_get(c->h->store, &sc);
	pith_buf_reset(c->body);
	pith_buf_printf(c->body, "{\"ok\":%s,\"store\":{\"bundles\":%llu,\"events\":%llu,\"records\":%llu}}\n",
			c->h->draining ? "false" : "true", (unsigned long long)sc.bundles,
			(unsigned long long)sc.events, (unsigned long long)sc.records);
	c->r.status = c->h->draining ? 503 : 200;
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
