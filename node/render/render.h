/* The read views rendered without a server: the same code that answers
 * GET requests in pithd (node/http/http.c), run over a store into a buffer.
 * `pithctl export --site` publishes a mirror as a static tree with it, so
 * that a web server serves the very bytes pithd would (docs/site.md).
 *
 * No sockets, no event loop: a render context is an http_t that never
 * listens. Not thread-safe: one context per thread (the store may be
 * shared). */
#ifndef PITH_NODE_HTTP_RENDER_H
#define PITH_NODE_HTTP_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "http.h"
#include "store.h"

typedef struct http_render_opts {
	const char *base_url;   /* the public URL the documents link to (a plain
				 * http(s) URL, as http_opts_t.public_url) */
	const char *name;       /* this mirror's name (NULL: "pith-mirror") */
	const char *operator_name, *contact; /* as http_opts_t's (NULL: not shown) */
	const char *search_url; /* base URL of a live node whose /search the pages'
				 * search box submits to (a plain http(s) URL;
				 * NULL or "": the pages have no search box, since
				 * a tree of files answers no search) */
	const char *mirrors_at; /* generated_at of pith-mirrors.json (NULL: now) */
	int list_registry;      /* list pith.science in pith-mirrors.json */
} http_render_opts_t;

/* A rendered document. body points into the context's buffer: valid
 * until the next http_render call on it. */
typedef struct http_doc {
	int status;             /* 200, or the error status the server sends */
	const char *ctype;      /* static */
	const uint8_t *body;
	size_t len;
	char etag[72];          /* the identity ETag pithd sends, quoted, or "" */
	int cors, is_html, vary_accept;
} http_doc_t;

/* A context over store (borrowed: it must outlive the context).
 * PITH_EINVAL if the base URL is not a plain http(s) URL. */
int http_render_new(store_t *store, const http_render_opts_t *o, http_t **out, pith_err_t *err);
void http_render_free_(http_t *h);
#define http_render_free(x) do { http_render_free_(x); (x) = NULL; } while (0)

/* Renders what a GET of target (origin form: path and query, as a client
 * sends it) answers, with accept as the request's Accept header (NULL:
 * none; it picks JSON-LD or HTML for /pith/{ID}). Only the documents of
 * the store are rendered (records, bundles, states, events, graphs, the
 * browse pages, pith-mirrors.json, pith-signing-key.json, the change
 * feed); anything else is a 404. Returns 0 with *out filled (out->status
 * may be an error status, as the server's), or PITH_ENOMEM. */
int http_render(http_t *h, const char *target, const char *accept, http_doc_t *out);

/* What the record lists (/, /pith/, /api/records) show of a listed
 * record besides the change log's own fields: read from its merged
 * state. NULL: the state has none. */
typedef struct http_list_facts {
	const char *title, *first_author, *primary_cat, *submitted_at, *created_at;
} http_list_facts_t;

/* A cache of those facts the lists read instead of each record's state
 * (the static site keeps one between runs, site.c): get fills *f and
 * returns 0 (strings valid until the next call), or nonzero when it does
 * not know pith; put is told the facts the lists read from a state
 * (strings valid during the call). The owner drops a record's entry when
 * the record changes. */
typedef struct http_list_cache {
	int (*get)(void *arg, const char *pith, http_list_facts_t *f);
	void (*put)(void *arg, const char *pith, const http_list_facts_t *f);
	void *arg;
} http_list_cache_t;

/* Sets (or with NULL clears) the list cache of a render context. */
void http_render_set_list_cache(http_t *h, const http_list_cache_t *c);

/* Copies the C string s (NULL: "") into out[0..cap), cap >= 1, cut at a
 * UTF-8 character boundary when it does not fit: how the names shown on
 * pages are kept. */
void http_text_copy(char *out, size_t cap, const char *s);

/* Compresses in[0..n) as one gzip member (zlib level 5, as the server
 * compresses its answers) into out. 0, or -1 (out of memory). */
int http_gzip(pith_buf_t *out, const uint8_t *in, size_t n);
/* Frees the calling thread's deflate state (http_gzip keeps one per
 * thread for the thread's life): a thread that compressed calls it
 * before it ends. */
void http_gzip_thread_end(void);
/* Bodies shorter than this go out uncompressed. */
#define HTTP_GZIP_MIN 256

#endif
