/* The HTTP views of a mirror: the registry's read URLs served from the
 * local store, POST /events, /metrics and /healthz. docs/http.md lists
 * every route, status code and limit.
 *
 * One evhttp server on the caller's event base; every callback runs on
 * that base's thread. GET views read the store directly (RocksDB point
 * reads and short scans); POST /events hands each event to a validation
 * pipeline through the submit hook (pithd: its ingest worker pool) and
 * answers once every outcome is durable, so signature checks never run
 * on the loop thread.
 *
 * Embeddable: pithd starts it with --http; tests/http_serve.c runs it
 * over a bare store for tests and benchmarks. */
#ifndef PITH_NODE_HTTP_H
#define PITH_NODE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "ingest.h"
#include "metrics.h"
#include "render.h"
#include "store.h"

struct event_base;

typedef struct http http_t;

#define HTTP_LOOPS_MAX 64

typedef struct http_opts {
	const char *listen;        /* HOST:PORT or [V6]:PORT; port 0 picks a free one */
	const char *public_url;    /* how clients reach this mirror, e.g.
				    * "https://mirror.example.org"; NULL or "" =
				    * "http://" + the bound address */
	const char *name;          /* this mirror's name: every page's header and
				    * title, /pith-mirrors.json (see
				    * http_set_identity; NULL: "pith-mirror") */
	const char *operator_name; /* who runs it, shown beside the name (NULL, "": not) */
	const char *contact;       /* how to reach them: an e-mail address or an
				    * http(s) URL (NULL, "": not shown) */
	size_t max_header_bytes;   /* request line + headers: over it 431 (and
				    * past 4x of it evhttp itself answers 413
				    * and closes, without reading more) */
	size_t max_body_bytes;     /* request bodies (POST /events): over it 413 */
	size_t max_post_events;    /* events in one POST: over it 413 */
	size_t max_inflight;       /* HTTP-submitted events in validation at once:
				    * over it 503 with Retry-After */
	size_t max_buffered_bytes; /* request bodies being received (each counted
				    * at max_body_bytes) plus POSTed events in
				    * validation: connections with a body coming
				    * take turns to keep under it (and POSTs that
				    * would pass it get 503) */
	int timeout_s;             /* per-connection read/write inactivity timeout */
	int request_timeout_s;     /* a whole request must arrive within this of the
				    * connection's accept or previous reply; else
				    * the connection is cut (slow clients) */
	size_t max_connections;    /* open at once; at the cap accepting pauses
				    * (lowered to half the descriptor limit) */
	size_t events_page_max;    /* events in one events.json page */
	size_t max_queued_out;     /* replies queued for all connections, not yet
				    * taken by the kernel, past which no costly
				    * document is rendered (503, Retry-After) */
	size_t costly_per_addr;    /* costly documents (search, change feed, lists)
				    * outstanding per client address: over it 503 */
	int list_registry;         /* list the registry itself in /pith-mirrors.json */
	int cache_max_age;         /* seconds a shared cache may serve a record's
				    * documents unasked (Cache-Control max-age;
				    * docs/http.md "Caching"); 0: no-cache */
	int readthrough_ms;        /* with a want hook: how long a read of a missing
				    * record waits for it (0: the hook is not asked) */
	int render_threads;        /* threads rendering the record documents off
				    * the loop (http_pool.c); 0: the loop renders */
	int loops;                 /* serving loops (http_loops.c): threads with an
				    * event loop each that share the public port
				    * and answer the record documents, resolve and
				    * the immutable documents themselves, relaying
				    * the rest to the caller's loop; 0: the
				    * caller's loop serves the port, as before.
				    * At most HTTP_LOOPS_MAX */
	const char *node_id;       /* shown on "/" (copied; NULL: not shown) */
	const char *network_id;    /* the same */
	struct search *search;     /* the search index (search.h), borrowed: /search,
				    * /api/search and the record page's "Cited
				    * by"; NULL: those answer 503 / are left out */
} http_opts_t;

/* What "/" says of the node beyond the store (http_hooks_t.about): filled
 * on the loop thread; the strings must stay valid until the page is
 * built (the node's own configuration). The renderer's (render.h). */
typedef render_about_t http_about_t;

/* The defaults (docs/http.md, "Limits"); listen is NULL: set it. */
void http_opts_default(http_opts_t *o);

typedef struct http_hooks {
	/* Validation and storage for POST /events. submit takes ownership of
	 * job (INGEST_EVENT, peer = ctl = 0) and must hand it back through
	 * http_job_done on the loop thread exactly once, after its outcome is
	 * durable (the contract of ingest.h's on_done). NULL: POST /events
	 * answers 503. */
	void (*submit)(void *arg, ingest_job_t *job);
	/* Read-through (docs/upstream.md): a record view found no record for
	 * id (as the client wrote it, or the full number). 0: the hook asked
	 * for it and answers through http_want_done(token) (never inside this
	 * call); the request waits up to readthrough_ms, then gets 503 with
	 * Retry-After saying the record is being fetched. PITH_ENOTFOUND: 404
	 * now. Other errors: 503 now. NULL: 404 now. */
	int (*want)(void *arg, const char *id, uint64_t token);
	/* A read-through answered HTTP_WANT_RETRY: in how many seconds to try
	 * again, from the upstreams' own Retry-After and backoff (the loop
	 * thread; -1 or NULL: 5 s; bounded to 1..300 here). */
	int64_t (*want_retry_s)(void *arg);
	/* The state root's documents (docs/state-root.md, "In pithd"):
	 * what is HTTP_ROOT_*, arg the cursor, prefix or {ID} as the client
	 * wrote it (NULL: none given). Fills body (JSON), returns the
	 * status; why says what went wrong for another than 200; etag (65
	 * bytes) a hex ETag or "". NULL: those routes answer 404. */
	int (*root)(void *arg, int what, const char *targ, pith_buf_t *body, char etag[65], char *why,
		    size_t whylen);
	/* "/" asks what the node is connected to (NULL: not shown). */
	void (*about)(void *arg, http_about_t *out);
	void *arg;
} http_hooks_t;

/* http_hooks_t.root's what. */
enum { HTTP_ROOT_LATEST = 0, HTTP_ROOT_HISTORY, HTTP_ROOT_RANGE, HTTP_ROOT_PROOF };

/* The node's latest signed state root for /pith-mirrors.json (NULL:
 * none); loop thread. */
typedef render_root_t http_root_t;
void http_root_set(http_t *h, const http_root_t *r);

/* What became of a read-through (http_hooks_t.want). */
typedef enum http_want_answer {
	HTTP_WANT_FOUND = 1,     /* stored now: the view is served */
	HTTP_WANT_NOT_FOUND,     /* no upstream knows it: 404 */
	HTTP_WANT_FAILED,        /* upstreams sent what was refused: 502 */
	HTTP_WANT_RETRY,         /* an upstream failed or rests: 503, Retry-After */
} http_want_answer_t;

/* The answer to read-through token (unknown or expired tokens are
 * ignored). */
void http_want_done(http_t *h, uint64_t token, http_want_answer_t answer);

/* Binds and starts serving on base. store (and metrics, when non-NULL)
 * are borrowed and must outlive the server; with metrics NULL the server
 * keeps a registry of its own. hooks may be NULL. */
int http_new(struct event_base *base, store_t *store, metrics_t *metrics,
	     const http_opts_t *opts, const http_hooks_t *hooks, http_t **out, pith_err_t *err);

/* Stops serving and frees. Requests still waiting for submitted events are
 * dropped (their jobs, when they come back, are no longer recognised).
 * NULL-tolerant. */
void http_free_(http_t *h);
#define http_free(x) do { http_free_(x); (x) = NULL; } while (0)

/* The bound address as "ip:port", and the port. */
const char *http_listen_str(const http_t *h);
uint16_t http_port(const http_t *h);
/* The public base URL (no trailing slash). */
const char *http_base_url(const http_t *h);
/* The registry /metrics renders (the caller's or the server's own). */
metrics_t *http_metrics(http_t *h);

/* An ingest job came back. Returns 1 if it was one of this server's (the
 * server keeps the job's results, the caller still frees the job), 0 if
 * not. */
int http_job_done(http_t *h, const ingest_job_t *job);

/* The HTTP mirrors this node's peers announce, for /pith-mirrors.json:
 * replaces the list (names and URLs are copied). Entries whose base_url,
 * without trailing slashes, is not a plain http(s) URL
 * (wire_http_url_is_valid: host, optional port and path; no query,
 * fragment or credentials; at most 200 bytes) are skipped. generated_at
 * moves only if the kept list differs from the last one. Returns how many
 * were kept, or PITH_ENOMEM. */
typedef render_mirror_t http_mirror_t;
int http_mirrors_set(http_t *h, const http_mirror_t *mirrors, size_t n);

/* Sets who this mirror is (http_opts_t.name, operator_name, contact):
 * what the pages' header and title and /pith-mirrors.json say from the
 * next request on, the render pool's threads included. Callable at any
 * time on the loop thread (a reload). The strings are copied; name NULL
 * or "" means "pith-mirror", operator_name and contact NULL or "" are not
 * shown. Each is cut to what the server keeps (HTTP_NAME_MAX bytes, at a
 * character boundary); the caller validates them first
 * (config_text_why: no control characters), and they are escaped
 * wherever they are shown. */
#define HTTP_NAME_MAX RENDER_NAME_MAX
#define HTTP_CONTACT_MAX RENDER_CONTACT_MAX
void http_set_identity(http_t *h, const char *name, const char *operator_name,
		       const char *contact);

/* Draining: /healthz answers 503 so balancers move away, every response
 * carries Connection: close. For a node shutting down. */
void http_set_draining(http_t *h, int draining);

/* The pages' look changed while running (a reload that renames the
 * mirror, say): every record document and list is dated from now on, so
 * that clients revalidating by If-Modified-Since fetch them once more
 * (docs/http.md, "Conditional requests"). Loop thread. */
void http_dates_restart(http_t *h);

/* Shutdown, once draining has run a while: call until it returns 0, then
 * leave the loop. The first call stops accepting connections; it returns
 * 1 while requests already read are being answered (the render pool's,
 * POSTs, read-throughs) or replies are not yet written, for at most
 * HTTP_STOP_WAIT_MS; then the render pool's requests still pending are
 * answered 503 (Connection: close) and their replies get at most
 * HTTP_STOP_FLUSH_MS more to be written. What is still owed after that
 * (a POST's events, a read-through) is dropped with its connection by
 * http_free. */
#define HTTP_STOP_WAIT_MS 5000
#define HTTP_STOP_FLUSH_MS 500
int http_stop_wait(http_t *h);

#endif
