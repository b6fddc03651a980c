/* The HTTP server's insides, shared by node/http*.c only.
 *
 * http.c      server set-up, limits, routing, conditional requests, replies,
 *             per-route metrics
 * http_uri.c  the strict request-target parser (no I/O; unit-tested and
 *             fuzzed on its own)
 * http_render.c what the views share with render-only contexts (no
 *             libevent): errors, ETags, gzip, routing, the documents'
 *             dispatch, http_render() (http_render.h)
 * http_accept.c Accept and Accept-Encoding: weighted lists (fuzzed)
 * http_views.c, http_page.c, http_browse.c, http_doc.c, http_bib.c
 *             the documents, built from the store: pithd serves them and
 *             `pithctl export --site` writes them (the same bytes)
 * http_resolve.c identifiers through the body cache and read-through,
 *             resolve, /healthz, /metrics: the server's alone
 * http_post.c POST /events through the submit hook
 * http_pool.c the render pool, and http_set_identity (which reaches its
 *             threads) */
#ifndef PITH_NODE_HTTP_INT_H
#define PITH_NODE_HTTP_INT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "http.h"
#include "http_render.h"
#include "idmap.h"
#include "ids.h"
#include "json.h"

struct evhttp;
struct evhttp_request;
struct evhttp_bound_socket;
struct event;

/* ---- the request target (http_uri.c) -------------------------------------- */
#define HTTP_TARGET_MAX 4096 /* bytes of the raw request target; over: 414 */
#define HTTP_SEGS_MAX 8
#define HTTP_QUERY_MAX 16

typedef struct http_target {
	const char *seg[HTTP_SEGS_MAX]; /* decoded, NUL-terminated, into buf */
	size_t nseg;
	int trailing_slash;             /* the path ended with '/' */
	unsigned enc_slash;             /* bit i: segment i holds an encoded '/'
					 * (only an {ID} segment may: a pasted URL
					 * or DOI; http.c refuses it elsewhere) */
	struct {
		const char *key, *val;
	} q[HTTP_QUERY_MAX];
	size_t nq;
	/* the first query value that is not text (invalid UTF-8, a control
	 * character, NUL): its key and why, else NULL. Only the search views
	 * read such a value (to say why in their page); http.c answers 400
	 * for it on every other route */
	const char *bad_key, *bad_why;
	/* decoding never grows text; every piece adds at most two NULs */
	char buf[2 * HTTP_TARGET_MAX + 8];
} http_target_t;

enum {
	HTTP_TARGET_OK = 0,
	HTTP_TARGET_BAD = -1,     /* 400 */
	HTTP_TARGET_TOO_LONG = -2 /* 414 */
};

/* Parses uri[0..len) (origin form only). *why gets a static phrase when
 * the target is refused. */
int http_target_parse(const char *uri, size_t len, http_target_t *t, const char **why);
/* The first value of query parameter key, or NULL; *count (may be NULL)
 * gets how many times it appears. */
const char *http_target_query(const http_target_t *t, const char *key, int *count);

/* ---- routes ------------------------------------------------------------------ */
typedef enum http_route {
	ROUTE_PAGE = 0,     /* /pith/{ID}: HTML or JSON-LD */
	ROUTE_RECORD,       /* /pith/{ID}.json */
	ROUTE_BUNDLE,       /* /pith/{ID}/bundle.json */
	ROUTE_WELL_KNOWN,   /* /.well-known/pith/{ID}/bundle.json */
	ROUTE_STATE,        /* /pith/{ID}/state.json */
	ROUTE_EVENTS,       /* /api/pith-number/{ID}/events.json */
	ROUTE_GRAPH,        /* /api/pith-number/{ID}/graph.json */
	ROUTE_RESOLVE,      /* /api/pith-number/resolve */
	ROUTE_MIRRORS,      /* /pith-mirrors.json */
	ROUTE_POST_EVENTS,  /* POST /events */
	ROUTE_METRICS,      /* /metrics */
	ROUTE_HEALTHZ,      /* /healthz */
	ROUTE_CHANGES,      /* /api/changes: the change feed */
	ROUTE_SIGNING_KEY,  /* /pith-signing-key.json */
	ROUTE_HOME,         /* /: what this mirror is */
	ROUTE_LIST,         /* /pith/: every record, newest first (HTML) */
	ROUTE_RECORDS,      /* /api/records: the same in JSON */
	ROUTE_SEARCH,       /* /search?q=: the search index (HTML) */
	ROUTE_SEARCH_API,   /* /api/search?q=: the same in JSON */
	ROUTE_BIB,          /* /pith/{ID}.bib: the record's BibTeX entry */
	ROUTE_OTHER,        /* unrouted: 400, 404, 414, 431 */
	HTTP_NROUTES
} http_route_t;

/* Status codes with a counter of their own; others count as "other". */
#define HTTP_NCODES 16

/* ---- a reply being built ------------------------------------------------------ */
typedef struct http_resp {
	int status;
	const char *ctype;     /* static */
	char etag[72];         /* quoted, or "" */
	char location[512];    /* 302 */
	const char *allow;     /* 405 / OPTIONS: static */
	int vary_accept;
	int cors;              /* Access-Control-Allow-Origin: * */
	int no_store;          /* Cache-Control: no-store instead of no-cache */
	int retry_after;       /* seconds, 503 */
	int is_html;           /* adds a restrictive Content-Security-Policy */
	int close;             /* a protocol error: close after the reply */
	/* Last-Modified (http_date.c): the change log number the document's
	 * date is taken from and when it was read, or a date of its own */
	uint64_t lm_seq;       /* 0: none */
	int64_t lm_read;       /* wall seconds when lm_seq was read */
	int64_t lm_fixed;      /* unix seconds (a bundle's built_at), 0: none */
	char message[400];     /* http_error's message, for a view that shows it in a page of its own */
} http_resp_t;

/* One request being handled (lives on the stack of the request callback,
 * or in a post_t for POST /events). */
typedef struct http_ctx {
	http_t *h;
	struct evhttp_request *req; /* NULL when rendering without a server */
	const char *accept;    /* the request's Accept header, or NULL */
	http_route_t route;
	int64_t t0_us;
	int head;              /* HEAD: headers only (evhttp drops the body) */
	http_target_t *t;
	http_resp_t r;
	pith_buf_t *body;      /* the server's scratch body buffer */
	http_want_answer_t rerun; /* served again after a read-through (0: first time) */
	const char *rerun_msg; /* what the read-through said, for a 502 */
	int absent;            /* handed back by the render pool, whose worker
				* found no record for the identifier: the loop
				* answers without reading the store again */
} http_ctx_t;

typedef struct http_mirror_entry {
	char name[128];
	char base_url[208];
} http_mirror_entry_t;

/* A row of the date table (http_date.c): the change log had reached seq
 * by the second t. */
typedef struct http_date_row {
	uint64_t seq;
	int64_t t;
} http_date_row_t;
#define HTTP_DATES_MAX 4096

typedef struct post post_t;
typedef struct hconn hconn_t;
typedef struct http_pool http_pool_t;

struct http {
	struct event_base *base;
	struct evhttp *evh;
	struct evhttp_bound_socket *bound;
	struct event *accept_resume_ev;
	struct event *dates_ev; /* http_dates_tick, once a second */
	int accept_error_pause; /* accept() failed: paused for a moment */
	int accepting;          /* the listener is enabled */
	store_t *store;
	metrics_t *metrics;
	int own_metrics;
	http_hooks_t hooks;
	http_opts_t o;          /* strings below point into name/base_url */
	char name[HTTP_NAME_MAX + 1];          /* who this mirror is (http_set_identity) */
	char operator_name[HTTP_NAME_MAX + 1]; /* "": not shown */
	char contact[HTTP_CONTACT_MAX + 1];    /* "": not shown */
	char base_url[256];     /* public URL without a trailing slash */
	int files_only;         /* a render context for a tree of files (http_render_new):
				 * no link to what files cannot answer (resolve, the
				 * change feed, /healthz) */
	char search_url[256];   /* where the pages' search box submits (BASE/search):
				 * the server's base URL; a render context's
				 * search_url option; "": no search box */
	char node_id[72], network_id[72]; /* shown on "/" */
	char listen_str[80];
	uint16_t port;
	int draining;
	int stopping;           /* shutdown: accepts no more connections (http_stop_wait) */
	int stop_refused;       /* and the pool's pending requests were answered 503 */
	int64_t stop_until_us;  /* how long http_stop_wait waits still */

	http_mirror_entry_t *mirrors;
	size_t nmirrors;
	char mirrors_at[32];    /* when the list last changed: generated_at */

	idmap_t *bodies;        /* resolved bodies -> year (http_views.c) */
	http_list_cache_t list_cache; /* render contexts only (http_render.h) */

	/* connections (http_conn.c) */
	idmap_t *conns;         /* bufferevent pointer -> hconn_t */
	hconn_t *conn_list;
	size_t nconns;
	struct event *sweep_ev;

	/* read-through (http_want.c) */
	idmap_t *waits;         /* token -> want_t */
	uint64_t next_token;
	size_t nwaits;

	/* POST /events */
	idmap_t *jobs;          /* job pointer -> post_t slot (see http_post.c) */
	size_t inflight;        /* events submitted, not yet back */
	size_t inflight_bytes;  /* and their bytes */
	size_t admitted;        /* connections that may read a body (http_conn.c) */
	size_t body_waiting;    /* connections waiting for a turn to send one */
	post_t *posts;          /* requests waiting for their events */

	http_pool_t *pool;      /* the render pool (http_pool.c), or NULL */

	http_date_row_t *dates; /* change log number -> date (http_date.c); the
				 * first row is the server's start */
	size_t ndates;
	int64_t dates_floor;    /* no record document dates before it (http_dates_restart) */

	/* scratch, reused by every request on the loop thread */
	pith_buf_t body, tmp, tmp2;
	pith_buf_t gz;          /* the gzipped body being sent */
	struct gz_slot *gzc;    /* gzipped bodies by their tag (http.c, gz_cached) */
	size_t gzc_bytes;
	http_target_t target;

	/* metrics */
	metric_t *req_count[HTTP_NROUTES][HTTP_NCODES];
	metric_hist_t *latency[HTTP_NROUTES];
	metric_t *bytes_out;
	metric_t *post_outcome[4];       /* stored, duplicate, resigned, rejected */
	metric_t *post_busy;
	metric_t *conns_total, *conns_cut, *conns_full, *body_waits;
};

/* ---- http_render.c: shared with render-only contexts -------------------------------- */
/* Picks the route for the parsed target; id gets the {ID} segment ("" if
 * none) and *id_seg its index (-1). ROUTE_OTHER for a path no route serves. */
http_route_t http_route_match(const http_target_t *t, char *id, size_t idcap, int *id_seg);
/* Runs the view of a route without an {ID} that renders a document (home,
 * list, records, mirrors, signing key, changes): 1, else 0. */
int http_view_run_global(http_ctx_t *c);
/* Runs the view of a record route for the stored record pith. */
void http_view_run(http_ctx_t *c, const char *pith);
/* A render-only context for another thread that renders what srv's
 * record routes render (the same store, search index, names and base
 * URL; scratch buffers of its own), or NULL (out of memory). Free it with
 * http_render_free. */
http_t *http_render_ctx_of(const http_t *srv);

/* ---- http.c --------------------------------------------------------------------- */
int64_t http_now_us(void);
/* Serves req (rerun: the answer of a read-through it waited for, else 0). */
void http_handle(http_t *h, struct evhttp_request *req, int64_t t0_us, http_want_answer_t rerun);
/* Answers a request the pool handed back (its identifier needs the loop:
 * a record not found, maybe to ask the upstreams): as http_handle, but the
 * request is not counted as started again and is not given to the pool. */
void http_handle_again(http_t *h, struct evhttp_request *req, int64_t t0_us,
		       http_want_answer_t rerun);
const char *http_route_name(http_route_t r);
/* (http_render.c) Copies who a mirror is into h's name, operator_name and
 * contact (NULL or "" name: "pith-mirror"; each cut at a character
 * boundary to fit), and points h->o.name at it. Only the thread that
 * renders with h. */
void http_identity_copy(http_t *h, const char *name, const char *operator_name,
			const char *contact);
/* (http_accept.c) One element of a comma-separated list with weights (Accept,
 * Accept-Encoding): tok[0..*n) the token (up to a ';' or a space), *q its
 * weight (1 when not given; a malformed or out-of-range q counts as 0).
 * 1 with *cursor moved past it; 0 at the end of the list. */
int http_list_next(const char **cursor, const char **tok, size_t *n, double *q);
/* The quality an Accept header (NULL: none) gives a media type
 * "type/subtype": that of the most specific range listing it (the type
 * itself, then its type with any subtype, then any type: RFC 9110
 * 12.5.1), or 0 when none does;
 * explicit: only the type itself counts. Malformed q values count as 0. */
double http_accept_q(const char *accept, const char *type, int explicit_only);
/* Whether a client with this Accept header gets HTML rather than JSON
 * where a route has both (errors): text/html is given a higher quality
 * than application/json and application/ld+json. A browser's navigation
 * does; no header, the wildcard alone (curl, fetch()) and JSON clients
 * do not. */
int http_prefers_html(const char *accept);
/* (http_render.c) Sets an error reply: JSON {"error": code_name, "message": msg},
 * or, for a client that prefers HTML (http_prefers_html), a page saying
 * the same with the mirror's header (Vary: Accept either way). */
void http_error(http_ctx_t *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sets r.etag to "\"" + hex + "\"". */
void http_set_etag_hex(http_ctx_t *c, const char *hex64);
/* ETag = SHA-256 of the body built so far. */
void http_set_etag_body(http_ctx_t *c);
/* Sends c's reply (304 if the request's If-None-Match matches the ETag),
 * counts it. */
void http_send(http_ctx_t *c);
/* A request header, or NULL. */
const char *http_header(http_ctx_t *c, const char *name);
/* Whether an Accept-Encoding value (NULL: none) accepts gzip. */
int http_accepts_gzip(const char *accept_encoding);

/* ---- http_date.c: Last-Modified ------------------------------------------------------ */
#define HTTP_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */
/* t (unix seconds) as an IMF-fixdate. */
void http_date_format(int64_t t, char out[static HTTP_DATE_LEN + 1]);
/* An HTTP-date in any of RFC 9110's three forms to unix seconds: 0, or -1
 * if s is not one. */
int http_date_parse(const char *s, int64_t *out);
/* The views' notes, any thread: the document's date is that of change
 * log number seq (read now); or, for a record's documents, of the
 * record's latest change (a bundle: its built_at). */
void http_date_note_seq(http_ctx_t *c, uint64_t seq);
void http_date_note_record(http_ctx_t *c, const char *pith);
/* Starts the date table at the server's start: 0, or -1 (out of memory). */
int http_dates_init(http_t *h);
/* Once a second (the loop): a row for what the log reached, if it moved. */
void http_dates_tick(http_t *h);
/* The Last-Modified of a reply from its notes (unix seconds), or 0 for
 * none. The loop only (the table grows here). */
int64_t http_date_of(http_t *h, const http_resp_t *r);

/* ---- http_conn.c --------------------------------------------------------------- */
/* Starts tracking connections (evhttp_set_bevcb) and the sweep timer. */
int conn_init(http_t *h);
/* A request of a tracked connection reached the handler. */
void conn_request_started(http_t *h, struct evhttp_request *req);
/* Admits connections with a body coming while the bodies fit in
 * max_buffered_bytes with the POSTed events in validation. */
void conn_budget(http_t *h);
/* Enables or disables the listener for the cap and accept errors. */
void conn_listener_update(http_t *h);
void conn_stop_sweep(http_t *h);
/* Connections with a request being handled or a reply not yet written. */
size_t conn_owed(const http_t *h);
/* After evhttp_free: drops the last references. */
void conn_free_all(http_t *h);

/* ---- http_doc.c: building documents ------------------------------------------ */
/* A document being built: every helper below sets oom instead of failing,
 * jb_finish turns it into a 500. */
typedef struct jb {
	json_doc_t *d;
	int oom;
} jb_t;

/* Starts a document; on OOM sets the 500 reply and returns -1. */
int jb_begin(http_ctx_t *c, jb_t *b);
/* Sends root's canonical bytes (ETag from them), or a 500 if anything
 * failed; frees the document. */
void jb_finish(http_ctx_t *c, jb_t *b, const json_value_t *root, const char *ctype);
json_value_t *jb_chk(jb_t *b, json_value_t *v);
/* NULL s gives null. */
json_value_t *jb_str(jb_t *b, const char *s);
json_value_t *jb_int(jb_t *b, int64_t v);
json_value_t *jb_bool(jb_t *b, int v);
json_value_t *jb_obj(jb_t *b);
json_value_t *jb_arr(jb_t *b);
/* o[k] = v, linking v (which may belong to another live doc); NULL v gives null. */
void jb_set(jb_t *b, json_value_t *o, const char *k, const json_value_t *v);
void jb_push(jb_t *b, json_value_t *a, const json_value_t *v);
/* The server's base URL + fmt formatted with arg. */
json_value_t *jb_url(jb_t *b, http_t *h, const char *fmt, const char *arg);

/* A record as the store knows it: its merged state, parsed, and the parts
 * the views use (pointers into the state; NULL when absent). */
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

/* Reads and parses the record's state; on failure sets the error reply
 * (404, 500) and returns -1. rec_release in every case it returned 0. */
int rec_load(http_ctx_t *c, const char *pith, rec_t *r);
void rec_release(rec_t *r);
/* rec_load, then jb_begin: a view of the record about to be built. On
 * failure the error reply is set, nothing is held, and it returns -1. */
int rec_doc_begin(http_ctx_t *c, const char *pith, rec_t *r, jb_t *b);
/* Entries in one of current's lists. */
size_t rec_list_len(const rec_t *r, const char *key);
/* An alias value of a kind ("arxiv", "doi"...): the bundle's, or derived
 * from the record when no bundle listed any. */
const char *rec_alias(const rec_t *r, const char *kind);
const char *rec_paper_str(const rec_t *r, const char *key);
/* This mirror's URLs of the record's documents. */
json_value_t *rec_links(jb_t *b, http_t *h, const rec_t *r);
/* v's canonical bytes as the body, with its ETag and CORS. */
void view_send_json(http_ctx_t *c, const json_value_t *v, const char *ctype);

/* ---- http_page.c: /pith/{ID} ------------------------------------------------------ */
void view_page(http_ctx_t *c, const char *pith);
/* Copies s[0..n) into out with each ASCII byte that esc names replaced by
 * its string, the other ASCII controls (and DEL) dropped, invalid UTF-8
 * as U+FFFD, and valid UTF-8 as it is: the escaper of HTML and BibTeX. */
void text_escape(pith_buf_t *out, const char *s, size_t n, const char *const esc[128]);
/* HTML-escapes s[0..n) into out (&, <, >, ", '); invalid UTF-8 becomes
 * U+FFFD, controls but line breaks and tabs are dropped. */
void html_escape(pith_buf_t *out, const char *s, size_t n);
/* The same for a C string; NULL writes nothing. */
void html_text(pith_buf_t *out, const char *s);

/* ---- http_bib.c: for reference managers ----------------------------------------------- */
/* The next author of an authors_text list ("A, B, C"): 1 with s[0..*n)
 * the name and *cursor moved past it; 0 at the end (or cursor at NULL). */
int rec_author_next(const char **cursor, const char **s, size_t *n);
/* The record's BibTeX entry (docs/http.md, "BibTeX"), appended to out. */
void bib_entry(pith_buf_t *out, http_t *h, const rec_t *r);
/* /pith/{ID}.bib: application/x-bibtex; charset=utf-8. */
void view_bib(http_ctx_t *c, const char *pith);
/* The citation_* meta tags of the record page (title, one per author,
 * publication date, arXiv id, DOI: those known), for a page's head. */
void html_citation_meta(pith_buf_t *b, const rec_t *r);

/* ---- http_resolve.c ------------------------------------------------------------ */
/* Resolves an {ID} path segment or query value to a stored record's full
 * pith number: 0; -1 with the error reply set (400 malformed or
 * ambiguous, 404 unknown); 1 when the request waits for a read-through of
 * it (http_want). */
int http_resolve_id(http_ctx_t *c, const char *id, char pith[static PITH_NUMBER_LEN + 1]);

/* An identifier as the loop hands it to a render worker: either resolved
 * already (pith set) or to be resolved by the worker from the store. */
typedef struct http_id_plan {
	char pith[PITH_NUMBER_LEN + 1]; /* the full number, or "" (resolve id) */
	char id[201];                   /* the identifier as given (<= 200 bytes) */
	int check;                      /* a full number, a want hook: check it is stored */
	int cache;                      /* a bare body: the loop caches its number */
} http_id_plan_t;
/* The loop's share of resolving id for a worker: the syntax checks
 * (their 400s are the ones http_resolve_id gives) and the body cache.
 * 0 with *plan set, or -1 with the error reply set. */
int http_resolve_plan(http_ctx_t *c, const char *id, http_id_plan_t *plan);
/* The worker's share, any thread: the store reads of http_resolve_id. 0
 * with pith set; PITH_ENOTFOUND if the record is not stored (the loop
 * must then answer with http_resolve_id, which may ask the upstreams);
 * another error (ambiguous, a store error) with err set, for
 * http_resolve_fail: answered where it was found, so that a failed store
 * read is not read (and counted) again on the loop. */
int http_resolve_plan_run(store_t *st, const http_id_plan_t *plan,
			  char pith[static PITH_NUMBER_LEN + 1], pith_err_t *err);
/* Sets the reply for id's resolution failing with rc, other than
 * PITH_ENOTFOUND: 400 with err's message (ambiguous), else 500 (logged).
 * Any thread. */
void http_resolve_fail(http_ctx_t *c, const char *id, int rc, const pith_err_t *err);
/* Adds a resolved body's number to the body cache (the loop's only). */
void http_body_cache_add(http_t *h, const char *pith);
/* 1 when the reply waits for a read-through */
int view_resolve(http_ctx_t *c);
/* /api/pith-number/resolve in the render pool: the loop checks the query
 * and plans its identifier (-1: a 400 is set), the worker answers for the
 * number the plan resolved to (any thread); a record not stored goes back
 * to the loop's view_resolve, which has the read-through. */
int view_resolve_plan(http_ctx_t *c, http_id_plan_t *plan);
void view_resolve_answer(http_ctx_t *c, const char *pith);
void view_healthz(http_ctx_t *c);
void view_metrics(http_ctx_t *c);

/* ---- http_views.c ------------------------------------------------------------- */
void view_record(http_ctx_t *c, const char *pith);
void view_bundle(http_ctx_t *c, const char *pith);
void view_state(http_ctx_t *c, const char *pith);
void view_events(http_ctx_t *c, const char *pith);
void view_graph(http_ctx_t *c, const char *pith);
void view_mirrors(http_ctx_t *c);
/* /pith-signing-key.json: the registry key block the manifest carries. */
void view_signing_key(http_ctx_t *c);
/* GET /api/changes?after=CURSOR&limit=N: the store's change log, at most
 * limit entries (default HTTP_CHANGES_DEFAULT, more is cut to
 * HTTP_CHANGES_MAX). */
#define HTTP_CHANGES_DEFAULT 1000
#define HTTP_CHANGES_MAX 10000
#define HTTP_CHANGES_PATH "/api/changes"
void view_changes(http_ctx_t *c);

/* ---- http_browse.c: pages to browse ---------------------------------------------- */
/* "/": what this mirror is, the records changed last, the search box. */
void view_home(http_ctx_t *c);
/* /pith/ (HTML) and /api/records (JSON): every record, newest change
 * first, paged by ?after=CURSOR&limit=N. */
void view_records_html(http_ctx_t *c);
void view_records_json(http_ctx_t *c);
/* The start of every page for people: html_begin writes the doctype and
 * the head up to the title ("TITLE · MIRROR NAME", or the name alone
 * when title is NULL), where a page may add its own meta tags;
 * html_body ends the head (one style sheet, readable at 360 px) and
 * writes the header every page has: the mirror's name linking home, its
 * operator and contact, the navigation and the search box (with q as
 * its value; none when the context has no search URL); then <main>.
 * html_head is both. */
void html_begin(http_ctx_t *c, const char *title);
void html_body(http_ctx_t *c, const char *q);
void html_head(http_ctx_t *c, const char *title, const char *q);
/* Query parameter key as a count: dflt when absent, cut to max; 400 (and
 * -1) when given twice, not digits, or below min. */
int http_arg_count(http_ctx_t *c, const char *key, size_t dflt, size_t min, size_t max,
		   size_t *out);
/* Ends a page begun with html_head (</main>): the ETag, or a 500 on OOM. */
void html_done(http_ctx_t *c);

/* ---- http_search.c: /search and /api/search ----------------------------------------- */
void view_search_html(http_ctx_t *c);
void view_search_json(http_ctx_t *c);

/* ---- http_post.c --------------------------------------------------------------- */
/* Handles POST /events; replies now (errors) or when the events are back. */
void post_events(http_ctx_t *c);
/* Drops every waiting request (server shutting down). */
void post_drop_all(http_t *h);

/* ---- http_pool.c: the render pool ------------------------------------------------------ */
/* Starts nthreads render threads (0: none, the loop renders). 0, or an
 * error (call http_pool_stop to undo what was started). */
int http_pool_start(http_t *h, int nthreads, pith_err_t *err);
/* Stops the threads (joining them) and drops the jobs not yet sent: their
 * requests are freed here if their client left, else by evhttp_free with
 * their connection (none is left after http_pool_refuse, unless the loop
 * was left before). Call before evhttp_free. NULL-tolerant (no pool). */
void http_pool_stop(http_t *h);
/* Shutdown, when waiting is over: sends what is rendered, answers every
 * other request the pool holds 503 with Connection: close (a worker's
 * render of it is thrown away when it is back), and takes no more jobs
 * (the loop renders what comes after). NULL-tolerant. */
void http_pool_refuse(http_t *h);
/* How many of the pool's requests are not yet answered (loop thread). */
size_t http_pool_owed(const http_t *h);
/* Whether route r's document may be rendered by the pool (the record
 * routes: their views read only the store, the search index and the
 * context's own scratch). */
int http_pool_is_route(http_route_t r);
/* Whether the pool would take a job now (there is one, not full); a
 * pool that is full counts it (the loop then renders inline). */
int http_pool_has_room(http_t *h);
typedef struct http_pool_stats {
	size_t threads, outstanding;
	uint64_t jobs, full, back;
} http_pool_stats_t;
/* The pool's counts, for /metrics (loop thread); zeros without a pool. */
void http_pool_stats(const http_t *h, http_pool_stats_t *out);
/* Hands the resolution (if the plan leaves one) and the rendering of c's
 * record view to the pool: 0, and the reply is sent later from the loop
 * (if the worker's resolution does not find the record, the loop answers
 * the request anew with http_handle_again); -1 (no pool, the pool is
 * full, out of memory): the caller resolves and renders inline. */
int http_pool_submit(http_ctx_t *c, const http_id_plan_t *plan);

/* ---- http_want.c: read-through ------------------------------------------------------ */
/* A record view found nothing for id: 1 if the request now waits for the
 * want hook (the caller replies nothing), 0 if the caller answers 404,
 * -1 if an error reply is set. */
int http_want(http_ctx_t *c, const char *id);
/* Drops every waiting request (the server is going away). */
void want_drop_all(http_t *h);
/* Registers the POST metrics. */
void post_metrics_init(http_t *h);

#endif
