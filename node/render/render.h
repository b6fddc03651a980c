/* The documents of a mirror rendered without a server: the registry's
 * read URLs (records, bundles, states, events, graphs, the pages to
 * browse, the search pages, pith-mirrors.json, the signing key, the
 * change feed) built from a store into a buffer. pithd's server
 * (node/http) and `pithctl export --site` (node/site) run this one copy,
 * so that a static site holds the very bytes pithd answers
 * (docs/site.md).
 *
 * No sockets, no event loop, nothing of a server: a request comes in as
 * a description of its own (the target, the Accept header) and goes out
 * as a document (status, the headers' facts, body). Not thread-safe: one
 * render_t per thread (the store and the search index may be shared;
 * render_clone makes another for a thread). */
#ifndef PITH_NODE_RENDER_H
#define PITH_NODE_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "store.h"

struct search;

typedef struct render render_t;

/* ---- a render context ----------------------------------------------------------- */

/* What "/" says of the node beyond the store (render_opts_t.about):
 * filled on the renderer's thread; the strings must stay valid until the
 * page is built (the node's own configuration). */
typedef struct render_about {
	size_t peers;              /* peers connected (ready) now */
	const char *upstreams[16]; /* HTTP(S) upstreams followed (the first 16) */
	size_t nupstreams;
} render_about_t;

typedef struct render_opts {
	const char *base_url;   /* the public URL the documents link to (a plain
				 * http(s) URL: render_url_trim) */
	const char *name;       /* this mirror's name (NULL or "": "pith-mirror") */
	const char *operator_name, *contact; /* who runs it, how to reach them
				 * (NULL or "": not shown) */
	const char *search_url; /* base URL of a node whose /search the pages'
				 * search box submits to (a plain http(s) URL;
				 * NULL or "": the pages have no search box) */
	const char *mirrors_at; /* generated_at of pith-mirrors.json (NULL: now) */
	int list_registry;      /* list pith.science in pith-mirrors.json */
	int files_only;         /* for a tree of files: no link to what files
				 * cannot answer (resolve, the change feed,
				 * /healthz) */
	const char *node_id, *network_id; /* shown on "/" (copied; NULL: not) */
	size_t events_page_max; /* events in one events.json page (0: 1000) */
	struct search *search;  /* the search index (search.h), borrowed: /search,
				 * /api/search and the record page's "Cited by";
				 * NULL: those answer 503 / are left out */
	int64_t started;        /* when the renderer started (unix seconds): the
				 * signing key's date; 0: none */
	void (*about)(void *arg, render_about_t *out); /* "/" asks (NULL: not shown) */
	void *about_arg;
} render_opts_t;

/* A context over store (borrowed: it must outlive the context).
 * PITH_EINVAL if the base URL or the search URL is not a plain http(s)
 * URL. */
int render_new(store_t *store, const render_opts_t *o, render_t **out, pith_err_t *err);
void render_free_(render_t *rd);
#define render_free(x) do { render_free_(x); (x) = NULL; } while (0)
/* Another context rendering what rd renders (the same store, search
 * index, names and base URL; no list cache, no mirror list, no about
 * hook; scratch of its own), for another thread; NULL (out of memory). */
render_t *render_clone(const render_t *rd);

/* u without trailing slashes into out, if it is then a plain http(s) URL
 * (wire_http_url_is_valid) of at most RENDER_URL_MAX bytes: 1, else 0. */
#define RENDER_URL_MAX 200
int render_url_trim(const char *u, char out[static RENDER_URL_MAX + 1]);
/* The public base URL (no trailing slash). */
const char *render_base_url(const render_t *rd);

/* Who this mirror is: the pages' header and title and
 * pith-mirrors.json. Copied, each cut to RENDER_NAME_MAX (the contact
 * RENDER_CONTACT_MAX) bytes at a character boundary; name NULL or ""
 * means "pith-mirror", the others NULL or "" are not shown. */
#define RENDER_NAME_MAX 127
#define RENDER_CONTACT_MAX 255
void render_identity_set(render_t *rd, const char *name, const char *operator_name,
			 const char *contact);
/* What render_identity_set kept (valid until the next call). */
void render_identity(const render_t *rd, const char **name, const char **operator_name,
		     const char **contact);

/* The HTTP mirrors pith-mirrors.json lists: replaces the list (copied).
 * Entries whose base_url does not pass render_url_trim are skipped;
 * names are kept as printable ASCII. generated_at moves only if the kept
 * list differs from the last one. How many were kept, or PITH_ENOMEM. */
typedef struct render_mirror {
	const char *name;
	const char *base_url;
} render_mirror_t;
int render_mirrors_set(render_t *rd, const render_mirror_t *m, size_t n);
size_t render_mirrors_count(const render_t *rd);

/* The node's latest signed state root (docs/state-root.md), shown in
 * pith-mirrors.json's own entry as "state_root" with the node key it is
 * signed with: copied; NULL clears it. generated_at moves when it
 * changes. */
typedef struct render_root {
	char root_sha256[65];
	uint64_t record_count;
	char feed_cursor[32];  /* "": null */
	char signed_at[32];
	char key_id[72];
	char public_key_hex[65];
	char fingerprint[40];
} render_root_t;
void render_root_set(render_t *rd, const render_root_t *r);

/* What the record lists (/, /pith/, /api/records) show of a listed
 * record besides the change log's own fields: read from its merged
 * state. NULL: the state has none. */
typedef struct render_list_facts {
	const char *title, *first_author, *primary_cat, *submitted_at, *created_at;
	uint64_t seq; /* put: the change log number the list shows it at */
	int unread;   /* put: its state could not be read (no facts; get it again) */
} render_list_facts_t;

/* A cache of those facts the lists read instead of each record's state
 * (the static site keeps one between runs): get fills *f and returns 0
 * (strings valid until the next call), or nonzero when it does not know
 * pith; put is told the facts the lists read from a state (strings valid
 * during the call). The owner drops a record's entry when the record
 * changes. */
typedef struct render_list_cache {
	int (*get)(void *arg, const char *pith, render_list_facts_t *f);
	void (*put)(void *arg, const char *pith, const render_list_facts_t *f);
	void *arg;
} render_list_cache_t;

/* Sets (or with NULL clears) the list cache of a context. */
void render_set_list_cache(render_t *rd, const render_list_cache_t *c);

/* ---- a request and its document --------------------------------------------------- */

/* What a request asks for. */
typedef struct render_req {
	const char *target; /* origin form: path and query, as a client sends it */
	const char *accept; /* the Accept header (NULL: none; it picks JSON-LD or
			     * HTML for /pith/{ID}) */
	const char *if_none_match, *if_modified_since; /* conditional headers
			     * (NULL: not sent): a 200 they match is a 304 */
} render_req_t;

/* A rendered document. body points into the context's buffer: valid
 * until the next render_get on it. */
typedef struct render_doc {
	int status;             /* 200, or the error status the server sends */
	const char *ctype;      /* static */
	const uint8_t *body;
	size_t len;
	char etag[72];          /* the identity ETag pithd sends, quoted, or "" */
	int64_t last_modified;  /* unix seconds, 0: none (a render context keeps
				 * no date table: only a document's own date) */
	int cors, is_html, vary_accept;
} render_doc_t;

/* Renders what a GET of req answers (304 with no body when its
 * conditional headers match). Only the documents of the store are
 * rendered; anything else is a 404. Returns 0 with *out filled
 * (out->status may be an error status, as the server's), or
 * PITH_ENOMEM. */
int render_get(render_t *rd, const render_req_t *req, render_doc_t *out);

/* ---- what a server that adds views of its own uses ------------------------------------ */

/* The request target (render_target.c: the strict parser, no I/O). */
#define RENDER_TARGET_MAX 4096 /* bytes of the raw request target; over: 414 */
#define RENDER_SEGS_MAX 8
#define RENDER_QUERY_MAX 16

typedef struct render_target {
	const char *seg[RENDER_SEGS_MAX]; /* decoded, NUL-terminated, into buf */
	size_t nseg;
	int trailing_slash;             /* the path ended with '/' */
	unsigned enc_slash;             /* bit i: segment i holds an encoded '/'
					 * (only an {ID} segment may: a pasted URL
					 * or DOI; the server refuses it elsewhere) */
	struct {
		const char *key, *val;
	} q[RENDER_QUERY_MAX];
	size_t nq;
	/* the first query value that is not text (invalid UTF-8, a control
	 * character, NUL): its key and why, else NULL. Only the search views
	 * read such a value (to say why in their page); the server answers
	 * 400 for it on every other route */
	const char *bad_key, *bad_why;
	/* decoding never grows text; every piece adds at most two NULs */
	char buf[2 * RENDER_TARGET_MAX + 8];
} render_target_t;

enum {
	RENDER_TARGET_OK = 0,
	RENDER_TARGET_BAD = -1,     /* 400 */
	RENDER_TARGET_TOO_LONG = -2 /* 414 */
};

/* Parses uri[0..len) (origin form only). *why gets a static phrase when
 * the target is refused. */
int render_target_parse(const char *uri, size_t len, render_target_t *t, const char **why);
/* The first value of query parameter key, or NULL; *count (may be NULL)
 * gets how many times it appears. */
const char *render_target_query(const render_target_t *t, const char *key, int *count);

/* The routes of the URL space (docs/http.md): render renders the
 * documents; resolve, POST /events, /metrics and /healthz are a server's. */
typedef enum render_route {
	RENDER_ROUTE_PAGE = 0,     /* /pith/{ID}: HTML or JSON-LD */
	RENDER_ROUTE_RECORD,       /* /pith/{ID}.json */
	RENDER_ROUTE_BUNDLE,       /* /pith/{ID}/bundle.json */
	RENDER_ROUTE_WELL_KNOWN,   /* /.well-known/pith/{ID}/bundle.json */
	RENDER_ROUTE_STATE,        /* /pith/{ID}/state.json */
	RENDER_ROUTE_EVENTS,       /* /api/pith-number/{ID}/events.json */
	RENDER_ROUTE_GRAPH,        /* /api/pith-number/{ID}/graph.json */
	RENDER_ROUTE_RESOLVE,      /* /api/pith-number/resolve */
	RENDER_ROUTE_MIRRORS,      /* /pith-mirrors.json */
	RENDER_ROUTE_POST_EVENTS,  /* POST /events */
	RENDER_ROUTE_METRICS,      /* /metrics */
	RENDER_ROUTE_HEALTHZ,      /* /healthz */
	RENDER_ROUTE_CHANGES,      /* /api/changes: the change feed */
	RENDER_ROUTE_SIGNING_KEY,  /* /pith-signing-key.json */
	RENDER_ROUTE_HOME,         /* /: what this mirror is */
	RENDER_ROUTE_LIST,         /* /pith/: every record, newest first (HTML) */
	RENDER_ROUTE_RECORDS,      /* /api/records: the same in JSON */
	RENDER_ROUTE_SEARCH,       /* /search?q=: the search index (HTML) */
	RENDER_ROUTE_SEARCH_API,   /* /api/search?q=: the same in JSON */
	RENDER_ROUTE_BIB,          /* /pith/{ID}.bib: the record's BibTeX entry */
	RENDER_ROUTE_ROOT,         /* /api/root, /api/root/history, /api/root/range, /api/proof/{ID} */
	RENDER_ROUTE_EVENT_ID,     /* /api/event/{EVENT_ID}: immutable */
	RENDER_ROUTE_BUNDLE_HASH,  /* /api/bundle/{BUNDLE_SHA256}: immutable */
	RENDER_ROUTE_OTHER,        /* unrouted: 400, 404, 414, 431 */
	RENDER_NROUTES
} render_route_t;

/* Picks the route for the parsed target; id gets the {ID} segment ("" if
 * none) and *id_seg its index (-1). RENDER_ROUTE_OTHER for a path no
 * route serves. */
render_route_t render_route_match(const render_target_t *t, char *id, size_t idcap, int *id_seg);

/* A reply being built: the document's status and the facts its headers
 * are made of. */
typedef struct render_resp {
	int status;
	const char *ctype;     /* static */
	char etag[72];         /* quoted, or "" */
	char location[512];    /* 302 */
	const char *allow;     /* 405 / OPTIONS: static */
	int vary_accept;
	int cors;              /* Access-Control-Allow-Origin: * */
	int no_store;          /* Cache-Control: no-store (per node or per request) */
	char tag[40];          /* the cache tag: "pith-BODY" on a record's
				* documents, "pith-lists" on the lists; or "" */
	int retry_after;       /* seconds, 503 */
	int is_html;           /* adds a restrictive Content-Security-Policy */
	int close;             /* a protocol error: close after the reply */
	/* Last-Modified (render_date.c): the change log number the document's
	 * date is taken from and when it was read, or a date of its own */
	uint64_t lm_seq;       /* 0: none */
	int64_t lm_read;       /* wall seconds when lm_seq was read */
	int64_t lm_fixed;      /* unix seconds (a bundle's built_at), 0: none */
	char message[400];     /* render_error's message, for a view that shows it in a page of its own */
} render_resp_t;

/* One request being rendered: what the views read (the context, the
 * parsed target, the Accept header, the route) and what they fill (the
 * reply, the body). A server keeps one inside its own request state. */
typedef struct render_ctx {
	render_t *rd;
	const char *accept;    /* the request's Accept header, or NULL */
	render_route_t route;
	render_target_t *t;
	render_resp_t r;
	pith_buf_t *body;      /* the body being built (the caller's buffer) */
} render_ctx_t;

/* Runs the view of a route without an {ID} that renders a document (home,
 * list, records, mirrors, signing key, changes, search, an event by its id,
 * a bundle by its hash): 1, else 0. */
int render_view_run_global(render_ctx_t *c);
/* The cache tag of a record's documents (docs/http.md, "Caching"):
 * "pith-" and the body of the full number pith; the lists' is
 * RENDER_CACHE_TAG_LISTS. The change feed names both. */
#define RENDER_CACHE_TAG_LEN 31
#define RENDER_CACHE_TAG_LISTS "pith-lists"
void render_cache_tag(const char *pith, char tag[static RENDER_CACHE_TAG_LEN + 1]);
/* Runs the view of a record route for the stored record pith. */
void render_view_run(render_ctx_t *c, const char *pith);

/* Sets an error reply: JSON {"error": code_name, "message": msg}, or,
 * for a client that prefers HTML (render_prefers_html), a page saying the
 * same with the mirror's header (Vary: Accept either way). */
void render_error(render_ctx_t *c, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Sets r.etag to "\"" + hex + "\"". */
void render_etag_hex(render_ctx_t *c, const char *hex64);
/* ETag = SHA-256 of the body built so far. */
void render_etag_body(render_ctx_t *c);

/* (render_accept.c) One element of a comma-separated list with weights
 * (Accept, Accept-Encoding): tok[0..*n) the token (up to a ';' or a
 * space), *q its weight (1 when not given; a malformed or out-of-range q
 * counts as 0). 1 with *cursor moved past it; 0 at the end of the list. */
int render_list_next(const char **cursor, const char **tok, size_t *n, double *q);
/* The quality an Accept header (NULL: none) gives a media type
 * "type/subtype": that of the most specific range listing it (the type
 * itself, then its type with any subtype, then any type: RFC 9110
 * 12.5.1), or 0 when none does; explicit: only the type itself counts.
 * Malformed q values count as 0. */
double render_accept_q(const char *accept, const char *type, int explicit_only);
/* Whether a client with this Accept header gets HTML rather than JSON
 * where a route has both (errors): text/html is given a higher quality
 * than application/json and application/ld+json. A browser's navigation
 * does; no header, the wildcard alone (curl, fetch()) and JSON clients
 * do not. */
int render_prefers_html(const char *accept);

/* HTTP-dates (render_date.c). */
#define RENDER_DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */
/* t (unix seconds) as an IMF-fixdate. */
void render_date_format(int64_t t, char out[static RENDER_DATE_LEN + 1]);
/* An HTTP-date in any of RFC 9110's three forms to unix seconds: 0, or -1
 * if s is not one. */
int render_date_parse(const char *s, int64_t *out);

/* Conditional requests (render_date.c, docs/http.md "Conditional
 * requests"): whether a 200 with this ETag (quoted; "": none, never
 * matched) and Last-Modified (unix seconds, 0: none) is answered 304 for
 * the request's If-None-Match and If-Modified-Since (NULL: not sent).
 * If-None-Match, when sent, decides alone (weak comparison, "*"). */
int render_is_not_modified(const char *etag, int64_t last_modified, const char *if_none_match,
			   const char *if_modified_since);
/* The date a document has of its own (r->lm_fixed: a bundle's built_at,
 * the mirror list's generated_at, the renderer's start), if that second
 * has ended by now, else 0. */
int64_t render_date_own(const render_resp_t *r, int64_t now);

/* Copies the C string s (NULL: "") into out[0..cap), cap >= 1, cut at a
 * UTF-8 character boundary when it does not fit: how the names shown on
 * pages are kept. */
void render_text_copy(char *out, size_t cap, const char *s);

/* Compresses in[0..n) as one gzip member (zlib level 5, as the server
 * compresses its answers) into out. 0, or -1 (out of memory). */
int render_gzip(pith_buf_t *out, const uint8_t *in, size_t n);
/* Frees the calling thread's deflate state (render_gzip keeps one per
 * thread for the thread's life): a thread that compressed calls it
 * before it ends. */
void render_gzip_thread_end(void);
/* Bodies shorter than this go out uncompressed. */
#define RENDER_GZIP_MIN 256

#endif
