/* The HTTP server's insides, shared by the files of node/http only. The documents
 * are node/render's (render.h): the server parses, routes, resolves and
 * sends; render builds what it sends.
 *
 * http.c         server set-up, limits, routing, conditional requests,
 *                replies, per-route metrics
 * http_dates.c   the table Last-Modified dates come from
 * http_cache.c   Cache-Control by route and status, the cache tag
 * http_conn.c    connections: the cap, the request timeout, body budgets
 * http_bodies.c  the body cache: a record's body -> its year
 * http_resolve.c identifiers through the body cache and read-through,
 *                resolve, /healthz, /metrics: the server's alone
 * http_post.c    POST /events through the submit hook
 * http_want.c    read-through: requests waiting for an upstream
 * http_pool.c    the render pool, and http_set_identity (which reaches its
 *                threads)
 * http_loops.c   serving loops: more loops than the node's own answering
 *                the public port (http_opts_t.loops)
 * http_relay.c   what a serving loop hands to the node's loop: a request
 *                relayed to its private listener, and the client address
 *                a relayed request carries */
#ifndef PITH_NODE_HTTP_INT_H
#define PITH_NODE_HTTP_INT_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include "buf.h"
#include "http.h"
#include "idmap.h"
#include "ids.h"
#include "render.h"

struct evhttp;
struct evhttp_request;
struct evhttp_bound_socket;
struct event;

/* Status codes with a counter of their own; others count as "other". */
#define HTTP_NCODES 16

/* One request being handled (lives on the stack of the request callback,
 * or in a post_t for POST /events). */
typedef struct http_ctx {
	render_ctx_t v;        /* what the views read and fill: the loop's
				* render context, the target, Accept, the
				* route, the reply, the body (the server's
				* scratch body buffer) */
	http_t *h;
	struct evhttp_request *req;
	int64_t t0_us;
	int head;              /* HEAD: headers only (evhttp drops the body) */
	http_want_answer_t rerun; /* served again after a read-through (0: first time) */
	const char *rerun_msg; /* what the read-through said, for a 502 */
	int absent;            /* handed back by the render pool, whose worker
				* found no record for the identifier: the loop
				* answers without reading the store again */
} http_ctx_t;

/* A row of the date table (http_dates.c): the change log had reached seq
 * by the second t. */
typedef struct http_date_row {
	uint64_t seq;
	int64_t t;
} http_date_row_t;
#define HTTP_DATES_MAX 4096

typedef struct post post_t;
typedef struct hconn hconn_t;
typedef struct http_pool http_pool_t;
typedef struct http_loops http_loops_t;

/* The relay's header: "<secret> <client address>" (http_relay.c). */
#define HTTP_RELAY_HEADER "X-Pith-Relay"
#define HTTP_RELAY_SECRET_LEN 32 /* hex characters */

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
	http_opts_t o;          /* listen and public_url cleared */
	render_t *rd;           /* the loop's render context: who the mirror is,
				 * its base URL, the mirror list */
	char base_url[RENDER_URL_MAX + 1]; /* public URL without a trailing slash */
	char listen_str[80];
	uint16_t port;
	int draining;
	int stopping;           /* shutdown: accepts no more connections (http_stop_wait) */
	int stop_refused;       /* and the pool's pending requests were answered 503 */
	int64_t stop_until_us;  /* how long http_stop_wait waits still */

	struct http_bodies *bodies; /* resolved bodies -> year (http_bodies.c) */

	/* serving loops (http_loops.c). The node's server (main NULL) with
	 * loops: its evhttp listens on a private loopback port (relay_port)
	 * for what the serving loops relay; the public port is theirs. A
	 * serving loop's server: main is the node's, which it reads only
	 * where http_loops.c says (opts, relay_port, draining, the date
	 * table, the secret). */
	http_t *main;
	http_loops_t *loops;
	uint16_t relay_port;
	char relay_secret[HTTP_RELAY_SECRET_LEN + 1];
	size_t relays;          /* relayed requests not yet answered (a serving loop's) */
	struct http_relay *relay_list;
	uint64_t ident_gen;     /* a serving loop's: the identity its render context holds */
	size_t nconns_seen;     /* nconns, written by its own loop for the node's /metrics
				 * (atomic accesses) */

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

	http_date_row_t *dates; /* change log number -> date (http_dates.c); the
				 * first row is the server's start. A serving
				 * loop has none: it uses the node's, under
				 * dates_mu (one date for one change, whichever
				 * loop answers) */
	size_t ndates;
	int64_t dates_floor;    /* no record document dates before it (http_dates_restart) */
	pthread_mutex_t dates_mu;
	int dates_mu_init;

	/* scratch, reused by every request on the loop thread */
	pith_buf_t body;
	pith_buf_t gz;          /* the gzipped body being sent */
	struct gz_slot *gzc;    /* gzipped bodies by their tag (http.c, gz_cached) */
	size_t gzc_bytes;
	render_target_t target;

	/* metrics */
	metric_t *req_count[RENDER_NROUTES][HTTP_NCODES];
	metric_hist_t *latency[RENDER_NROUTES];
	metric_t *bytes_out;
	metric_t *post_outcome[4];       /* stored, duplicate, resigned, rejected */
	metric_t *post_busy;
	metric_t *conns_total, *conns_cut, *conns_full, *body_waits;
};

/* ---- http.c --------------------------------------------------------------------- */
int64_t http_now_us(void);
/* Serves req (rerun: the answer of a read-through it waited for, else 0). */
void http_handle(http_t *h, struct evhttp_request *req, int64_t t0_us, http_want_answer_t rerun);
/* Answers a request the pool handed back (its identifier needs the loop:
 * a record not found, maybe to ask the upstreams): as http_handle, but the
 * request is not counted as started again and is not given to the pool. */
void http_handle_again(http_t *h, struct evhttp_request *req, int64_t t0_us,
		       http_want_answer_t rerun);
const char *http_route_name(render_route_t r);
/* Sends c's reply (304 if the request's If-None-Match matches the ETag),
 * counts it. */
void http_send(http_ctx_t *c);
/* A request header, or NULL. */
const char *http_header(http_ctx_t *c, const char *name);
/* Whether an Accept-Encoding value (NULL: none) accepts gzip. */
int http_accepts_gzip(const char *accept_encoding);

/* A server's evhttp with the opts' limits and the request callback (h->base,
 * h->o set): 0 or -1 (out of memory). */
int http_evh_new(http_t *h);
/* The accept error callback on h->bound's listener. */
void http_accept_errors(http_t *h);
/* A listening socket on host:port, or -1 with err set (listen: for it). */
int http_listen_fd(const char *host, uint16_t port, const char *what, pith_err_t *err);
/* The per-route and connection metrics (the same series for every loop). */
void http_metrics_init(http_t *h);
/* The server's render context (base_url set): 0 or an error. */
int http_render_start(http_t *h, const http_opts_t *opts, int64_t started, pith_err_t *err);
/* A new random relay secret (HTTP_RELAY_SECRET_LEN hex, NUL): 0, or -1
 * when the kernel gives no random bytes. */
int http_relay_secret_new(char out[static HTTP_RELAY_SECRET_LEN + 1]);
/* Whether the server's node is draining (a serving loop reads the node's). */
int http_draining(const http_t *h);

/* ---- http_loops.c: serving loops ------------------------------------------------- */
/* Starts opts->loops serving loops on the public socket fd (taken: closed
 * here, on failure too). 0 or an error. */
int http_loops_start(http_t *h, int fd, const http_opts_t *opts, pith_err_t *err);
/* The node's stop_wait for its serving loops: 1 while one still owes a
 * reply (the first call tells them to stop accepting). */
int http_loops_stop_wait(http_t *h);
/* Stops, joins and frees the serving loops (NULL-tolerant: none). */
void http_loops_free(http_t *h);
/* A new identity for the serving loops' render contexts (http_set_identity). */
void http_loops_identity(http_t *h, const char *name, const char *operator_name,
			 const char *contact);
/* On a serving loop, before each request: its render context's identity
 * brought up to the node's. */
void http_loops_identity_sync(http_t *h);
/* Connections open on the serving loops (for /metrics). */
size_t http_loops_conns(const http_t *h);

/* ---- http_relay.c ------------------------------------------------------------------ */
/* On a serving loop: hands c's request to the node's loop over its private
 * listener and sends its answer when it comes. 1 (deferred), or 0 with an
 * error set in c (nothing relayed). */
int http_relay(http_ctx_t *c);
/* The address of req's client: the relay header's when it carries the
 * node's secret, else the connection's peer ("" when none). */
const char *http_client_addr(const http_t *h, struct evhttp_request *req);
/* Drops the relays not yet answered (before the server's evhttp is freed). */
void http_relay_drop_all(http_t *h);
/* Whether a header is the relay's (left out of the header budget). */
int http_is_relay_header(const char *name);

/* ---- http_cache.c: what a shared cache may do (docs/http.md, "Caching") ----------- */
/* The Cache-Control of an answer of route with status (the 304 of a 200
 * gets the 200's), max_age the opts' cache_max_age. */
void http_cache_control(render_route_t route, int status, const render_resp_t *r, int max_age,
			char *out, size_t cap);
/* Adds Cache-Control and, for a record's documents and the lists, the
 * cache tag (Cache-Tag, Surrogate-Key). */
struct evkeyvalq;
void http_cache_headers(http_t *h, render_route_t route, int status, const render_resp_t *r,
			struct evkeyvalq *oh);

/* ---- http_dates.c: Last-Modified ------------------------------------------------- */
/* Starts the date table at the server's start: 0, or -1 (out of memory). */
int http_dates_init(http_t *h);
/* Once a second (the loop): a row for what the log reached, if it moved. */
void http_dates_tick(http_t *h);
/* The Last-Modified of a reply from its notes (unix seconds), or 0 for
 * none. The loop only (the table grows here). */
int64_t http_date_of(http_t *h, const render_resp_t *r);

/* ---- http_conn.c --------------------------------------------------------------- */
/* Starts tracking connections (evhttp_set_bevcb) and the sweep timer. */
int http_conn_init(http_t *h);
/* A request of a tracked connection reached the handler. */
void http_conn_request_started(http_t *h, struct evhttp_request *req);
/* Admits connections with a body coming while the bodies fit in
 * max_buffered_bytes with the POSTed events in validation. */
void http_conn_budget(http_t *h);
/* Enables or disables the listener for the cap and accept errors. */
void http_conn_listener_update(http_t *h);
void http_conn_stop_sweep(http_t *h);
/* Connections with a request being handled or a reply not yet written. */
size_t http_conn_owed(const http_t *h);
/* The bytes of replies queued for every connection, not yet taken by the
 * kernel (a client that does not read keeps its reply here). */
size_t http_conn_queued(const http_t *h);
/* After evhttp_free: drops the last references. */
void http_conn_free_all(http_t *h);
/* ---- http_bodies.c: the body cache (the loop's only) ------------------------------ */
typedef struct http_bodies http_bodies_t;
http_bodies_t *http_bodies_new(void);
void http_bodies_free(http_bodies_t *b); /* NULL-tolerant */
/* Whether body (PITH_BODY_LEN characters) is cached: 1 with pith set to
 * its full number, else 0 (b NULL: 0). */
int http_bodies_get(const http_bodies_t *b, const char *body, char pith[static PITH_NUMBER_LEN + 1]);
/* Caches a stored record's full number (b NULL, or not a full number:
 * nothing). Bounded: past its size an older body is forgotten. */
void http_bodies_put(http_bodies_t *b, const char *pith);
size_t http_bodies_count(const http_bodies_t *b);
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
int http_view_resolve(http_ctx_t *c);
/* /api/pith-number/resolve in the render pool: the loop checks the query
 * and plans its identifier (-1: a 400 is set), the worker answers for the
 * number the plan resolved to (any thread); a record not stored goes back
 * to the loop's http_view_resolve, which has the read-through. */
int http_view_resolve_plan(http_ctx_t *c, http_id_plan_t *plan);
void http_view_resolve_answer(http_ctx_t *c, const char *pith);
void http_view_healthz(http_ctx_t *c);
/* http_root.c: the state root's routes, answered by the root hook. */
void http_view_root(http_ctx_t *c, const char *id);
void http_view_metrics(http_ctx_t *c);

/* ---- http_post.c --------------------------------------------------------------- */
/* Handles POST /events; replies now (errors) or when the events are back. */
void http_post_events(http_ctx_t *c);
/* Drops every waiting request (server shutting down). */
void http_post_drop_all(http_t *h);

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
int http_pool_is_route(render_route_t r);
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
/* A costly document of no record (http_pool_is_costly: search, the
 * change feed, the record list) for the pool: 0, sent later from the
 * loop; 1, refused with a 503 and Retry-After set in c (the client's
 * address has http_opts_t.costly_per_addr of them outstanding already, or
 * the pool has its share of costly jobs, HTTP_POOL_COSTLY_PER_THREAD a
 * thread); -1 (no pool, out of memory): the caller renders inline. */
int http_pool_submit_costly(http_ctx_t *c);
/* Whether route r is a costly document of no record the pool renders. */
int http_pool_is_costly(render_route_t r);

/* ---- http_want.c: read-through ------------------------------------------------------ */
/* A record view found nothing for id: 1 if the request now waits for the
 * want hook (the caller replies nothing), 0 if the caller answers 404,
 * -1 if an error reply is set. */
int http_want(http_ctx_t *c, const char *id);
/* Drops every waiting request (the server is going away). */
void http_want_drop_all(http_t *h);
/* Registers the POST metrics. */
void http_post_metrics_init(http_t *h);

#endif
