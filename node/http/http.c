/* The HTTP server: set-up and limits, routing, conditional requests,
 * replies and their metrics. The documents are node/render's (render.h),
 * POST /events is in http_post.c. */
#include "http.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "config.h"
#include "http_int.h"
#include "json.h"
#include "log.h"
#include "wire.h"

#define ACCEPT_PAUSE_MS 200 /* after accept() fails (out of descriptors) */

int64_t http_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *const route_names[RENDER_NROUTES] = {
	"page", "record", "bundle", "well_known_bundle", "state", "events", "graph",
	"resolve", "mirrors", "post_events", "metrics", "healthz", "changes", "signing_key", "home",
	"list", "records_api", "search", "search_api", "bib", "root", "event", "bundle_hash", "other",
};

const char *http_route_name(render_route_t r)
{
	return r < RENDER_NROUTES ? route_names[r] : "other";
}

/* Status codes counted on their own; index HTTP_NCODES - 1 is "other". */
static const int counted_codes[HTTP_NCODES - 1] = {
	200, 202, 204, 302, 304, 400, 404, 405, 406, 413, 414, 431, 500, 503, 501,
};

static const char *status_phrase(int s)
{
	switch (s) {
	case 200: return "OK";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 302: return "Found";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}

/* ---- replies ------------------------------------------------------------------ */

const char *http_header(http_ctx_t *c, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(c->req), name);
}

static size_t code_index(int status)
{
	for (size_t i = 0; i < HTTP_NCODES - 1; i++)
		if (counted_codes[i] == status)
			return i;
	return HTTP_NCODES - 1;
}

static void count_reply(http_t *h, render_route_t route, int status, int64_t t0_us, size_t bytes)
{
	size_t ci = code_index(status);
	metric_t **slot = &h->req_count[route][ci];
	if (!*slot) {
		char labels[96];
		if (ci == HTTP_NCODES - 1)
			snprintf(labels, sizeof(labels), "route=\"%s\",code=\"other\"", route_names[route]);
		else
			snprintf(labels, sizeof(labels), "route=\"%s\",code=\"%d\"", route_names[route],
				 status);
		*slot = metrics_counter(h->metrics, "pith_http_requests_total",
					"HTTP requests answered, by route and status code", labels);
	}
	metric_inc(*slot);
	metric_hist_observe(h->latency[route], (double)(http_now_us() - t0_us) / 1e6);
	metric_add(h->bytes_out, bytes);
}

/* ---- gzip ------------------------------------------------------------------------- */

static int ctype_compressible(const char *ct)
{
	return ct && (!strncmp(ct, "application/json", 16) || !strncmp(ct, "application/ld+json", 19) ||
		      !strncmp(ct, "text/html", 9) || !strncmp(ct, "application/x-bibtex", 20));
}

/* Whether an Accept-Encoding header accepts gzip (RFC 9110 12.5.3): "gzip",
 * "x-gzip" or "*" listed without q=0 (an explicit gzip entry wins over
 * "*"). */
int http_accepts_gzip(const char *ae)
{
	int gzip = -1, star = -1;
	const char *p = ae, *s;
	size_t n;
	double q;
	while (p && render_list_next(&p, &s, &n, &q)) {
		if ((n == 4 && !strncasecmp(s, "gzip", 4)) || (n == 6 && !strncasecmp(s, "x-gzip", 6)))
			gzip = q > 0;
		else if (n == 1 && *s == '*')
			star = q > 0;
	}
	return gzip >= 0 ? gzip : star > 0;
}

/* Gzipped bodies by their tag: the documents with a tag are named by
 * their bytes (a SHA-256 of the body, or the state hash), and a record's
 * documents are read far more often than they change, so each is
 * compressed once, not per request. A direct-mapped table: a collision
 * replaces the slot; at most GZ_CACHE_MAX bytes held. */
#define GZ_SLOTS 4096
#define GZ_CACHE_MAX (32u << 20)
#define GZ_ENTRY_MAX (1u << 20)

typedef struct gz_slot {
	char tag[72];
	size_t in_len;
	uint8_t *data;
	size_t len;
} gz_slot_t;

static gz_slot_t *gz_slot_of(http_t *h, const char *tag)
{
	if (!h->gzc && !(h->gzc = calloc(GZ_SLOTS, sizeof(*h->gzc))))
		return NULL;
	uint64_t x = 1469598103934665603ull;
	for (const char *p = tag; *p; p++)
		x = (x ^ (uint8_t)*p) * 1099511628211ull;
	return &h->gzc[x % GZ_SLOTS];
}

/* The gzipped bytes of body under tag: from the cache, or compressed now
 * (and kept). 0 with *out set (valid until the next call), or -1. */
static int gz_cached(http_t *h, const char *tag, const pith_buf_t *body, pith_buf_t *out)
{
	gz_slot_t *sl = tag[0] ? gz_slot_of(h, tag) : NULL;
	if (sl && sl->data && sl->in_len == body->len && !strcmp(sl->tag, tag)) {
		*out = (pith_buf_t){.data = sl->data, .len = sl->len, .cap = sl->len};
		return 0;
	}
	if (render_gzip(&h->gz, body->data, body->len))
		return -1;
	*out = h->gz;
	if (!sl || h->gz.len > GZ_ENTRY_MAX)
		return 0;
	h->gzc_bytes -= sl->data ? sl->len : 0;
	free(sl->data);
	sl->data = NULL;
	if (h->gzc_bytes + h->gz.len > GZ_CACHE_MAX || !(sl->data = malloc(h->gz.len)))
		return 0;
	memcpy(sl->data, h->gz.data, h->gz.len);
	sl->len = h->gz.len;
	sl->in_len = body->len;
	snprintf(sl->tag, sizeof(sl->tag), "%s", tag);
	h->gzc_bytes += sl->len;
	return 0;
}

static void gz_cache_free(http_t *h)
{
	for (size_t i = 0; h->gzc && i < GZ_SLOTS; i++)
		free(h->gzc[i].data);
	free(h->gzc);
	h->gzc = NULL;
	h->gzc_bytes = 0;
}

/* Response headers a script on another origin may read besides the
 * safelisted ones, and request headers it may send (a preflight's
 * answer): the conditional requests' and POST's. */
#define HTTP_CORS_EXPOSE \
	"ETag, Last-Modified, Retry-After, Location, Allow, Content-Encoding, Cache-Tag"
#define HTTP_CORS_ALLOW_HEADERS \
	"Accept, Accept-Language, Content-Type, If-None-Match, If-Modified-Since, Cache-Control"

static int cmd_is_options(struct evhttp_request *req)
{
	return evhttp_request_get_command(req) == EVHTTP_REQ_OPTIONS;
}

void http_send(http_ctx_t *c)
{
	http_t *h = c->h;
	struct evhttp_request *req = c->req;
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	render_resp_t *r = &c->v.r;
	int status = r->status ? r->status : 200;
	/* gzip: decided before the conditional check, since the compressed
	 * bytes have a tag of their own ("<hash>-gzip": different bytes,
	 * different tag, RFC 9110 8.8.3) */
	int compressible = (status == 200 || status >= 400) && ctype_compressible(r->ctype) &&
			   c->v.body->len >= RENDER_GZIP_MIN;
	int gz = compressible && http_accepts_gzip(http_header(c, "Accept-Encoding"));
	if (gz && r->etag[0]) {
		size_t el = strlen(r->etag);
		if (el >= 2 && el + 5 < sizeof(r->etag))
			memcpy(r->etag + el - 1, "-gzip\"", 7);
	}
	int64_t lm = status == 200 ? http_date_of(h, r) : 0;
	if (status == 200 && render_is_not_modified(r->etag, lm, http_header(c, "If-None-Match"),
						    http_header(c, "If-Modified-Since")))
		status = 304;
	int has_body = status != 304 && status != 204;
	if (r->etag[0])
		evhttp_add_header(oh, "ETag", r->etag);
	if (lm) {
		char d[RENDER_DATE_LEN + 1];
		render_date_format(lm, d);
		evhttp_add_header(oh, "Last-Modified", d);
	}
	if (has_body && r->ctype)
		evhttp_add_header(oh, "Content-Type", r->ctype);
	http_cache_headers(h, c->v.route, status, r, oh);
	evhttp_add_header(oh, "X-Content-Type-Options", "nosniff");
	/* every answer, errors included, is public and for any origin: no
	 * credentials, so "*" (docs/http.md, "CORS") */
	evhttp_add_header(oh, "Access-Control-Allow-Origin", "*");
	evhttp_add_header(oh, "Access-Control-Expose-Headers", HTTP_CORS_EXPOSE);
	if (cmd_is_options(req) && status == 204 && r->allow) {
		/* a preflight: what a script may send, remembered for a day */
		evhttp_add_header(oh, "Access-Control-Allow-Methods", r->allow);
		evhttp_add_header(oh, "Access-Control-Allow-Headers", HTTP_CORS_ALLOW_HEADERS);
		evhttp_add_header(oh, "Access-Control-Max-Age", "86400");
	}
	if (r->vary_accept || compressible)
		evhttp_add_header(oh, "Vary", r->vary_accept && compressible ? "Accept, Accept-Encoding"
					   : r->vary_accept ? "Accept" : "Accept-Encoding");
	if (r->is_html)
		evhttp_add_header(oh, "Content-Security-Policy",
				  "default-src 'none'; style-src 'unsafe-inline'; "
				  "frame-ancestors 'none'");
	if (r->allow)
		evhttp_add_header(oh, "Allow", r->allow);
	if (status == 302 && r->location[0])
		evhttp_add_header(oh, "Location", r->location);
	if (r->retry_after) {
		char ra[16];
		snprintf(ra, sizeof(ra), "%d", r->retry_after);
		evhttp_add_header(oh, "Retry-After", ra);
	}
	if (http_draining(h) || r->close)
		evhttp_add_header(oh, "Connection", "close");
	size_t sent = 0;
	pith_buf_t *body = c->v.body, gzbody;
	if (has_body && gz) {
		if (!gz_cached(h, r->etag, c->v.body, &gzbody)) {
			body = &gzbody;
			evhttp_add_header(oh, "Content-Encoding", "gzip");
		} else if (r->etag[0]) {
			/* out of memory: the identity bytes, under their own tag */
			size_t el = strlen(r->etag); /* "<hash>-gzip" */
			memcpy(r->etag + el - 6, "\"", 2);
			evhttp_remove_header(oh, "ETag");
			evhttp_add_header(oh, "ETag", r->etag);
		}
	}
	if (has_body && body->len) {
		if (c->head) {
			/* evhttp sends no body for HEAD, and no length either */
			char len[24];
			snprintf(len, sizeof(len), "%zu", body->len);
			evhttp_add_header(oh, "Content-Length", len);
		} else {
			evbuffer_add(evhttp_request_get_output_buffer(req), body->data, body->len);
			sent = body->len;
		}
	}
	evhttp_send_reply(req, status, status_phrase(status), NULL);
	if (h->gz.cap > (8u << 20))
		pith_buf_release(&h->gz);
	count_reply(h, c->v.route, status, c->t0_us, sent);
}

/* ---- routing --------------------------------------------------------------------- */

/* Bytes of the request line and headers as received (near enough:
 * "NAME: VALUE\r\n" per header). */
static size_t header_bytes(struct evhttp_request *req, size_t uri_len)
{
	size_t n = uri_len + 16;
	const struct evkeyvalq *hs = evhttp_request_get_input_headers(req);
	for (const struct evkeyval *kv = hs->tqh_first; kv; kv = kv->next.tqe_next)
		if (!http_is_relay_header(kv->key))
			n += strlen(kv->key) + strlen(kv->value) + 4;
	return n;
}

/* Runs the route's view; returns 1 if the reply is deferred. The
 * documents are rendered by the shared views (node/render), exactly as
 * `pithctl export --site` renders them; what needs the server (resolve's
 * read-through, POST, metrics, health) is handled here. A record route's
 * identifier is resolved by the pool's worker with its rendering, unless
 * use_pool is 0 (a request the pool handed back) or the pool is full. */
/* A record read the pool has no room for, while the store's side families
 * are in use (a new node's first catch-up, docs/store.md "Bulk loading"):
 * there a read of a record just written, and every resolve, sorts a copy
 * of a memtable (tens of ms), and the loop carries the catch-up, so it
 * does not take the read itself as it would otherwise: 503, Retry-After. */
static int pool_full_in_catch_up(http_ctx_t *c)
{
	if (!c->h->pool || !c->h->store || !store_side_active(c->h->store))
		return 0;
	render_error(&c->v, 503, "this mirror is in its first catch-up and its readers are busy; "
		   "try again shortly");
	c->v.r.retry_after = 1;
	return 1;
}

/* On a serving loop (http_loops.c), what it answers itself: the record
 * documents (a record not stored, with upstreams to ask, is relayed from
 * http_want), resolve, and the immutable documents by hash. The rest
 * needs the node's loop (POST /events, /metrics, /healthz, the state root,
 * "/", /pith-mirrors.json, the costly documents and their per-client
 * bounds) and is relayed to it. */
static int served_here(render_route_t r)
{
	return http_pool_is_route(r) || r == RENDER_ROUTE_RESOLVE || r == RENDER_ROUTE_EVENT_ID ||
	       r == RENDER_ROUTE_BUNDLE_HASH;
}

static int route_run(http_ctx_t *c, const char *id, int use_pool)
{
	char pith[PITH_NUMBER_LEN + 1];
	if (c->h->main && !served_here(c->v.route)) {
		/* the costly documents' bound on replies queued (below) holds
		 * for the serving loop's own connections too: the page comes
		 * back through them */
		if (http_pool_is_costly(c->v.route) && http_conn_queued(c->h) > c->h->o.max_queued_out) {
			render_error(&c->v, 503, "this mirror has too many replies queued for "
				     "its readers; try again shortly");
			c->v.r.retry_after = 1;
			return 0;
		}
		return http_relay(c);
	}
	switch (c->v.route) {
	case RENDER_ROUTE_RESOLVE:
		if (use_pool && http_pool_has_room(c->h)) {
			http_id_plan_t plan;
			if (http_view_resolve_plan(c, &plan))
				return 0; /* a 400 */
			if (!http_pool_submit(c, &plan))
				return 1; /* answered by the pool, sent from done_cb */
		} else if (use_pool && pool_full_in_catch_up(c)) {
			return 0;
		}
		return http_view_resolve(c);
	case RENDER_ROUTE_METRICS: http_view_metrics(c); return 0;
	case RENDER_ROUTE_HEALTHZ: http_view_healthz(c); return 0;
	case RENDER_ROUTE_ROOT: http_view_root(c, id); return 0;
	case RENDER_ROUTE_POST_EVENTS: http_post_events(c); return 1;
	default: break;
	}
	if (http_pool_is_costly(c->v.route)) {
		/* a big page queued for a client that does not read stays in
		 * memory: past the budget of replies queued, none is added */
		if (http_conn_queued(c->h) > c->h->o.max_queued_out) {
			render_error(&c->v, 503, "this mirror has too many replies queued for "
				     "its readers; try again shortly");
			c->v.r.retry_after = 1;
			return 0;
		}
		if (use_pool) {
			int rc = http_pool_submit_costly(c);
			if (rc >= 0)
				return rc == 0; /* 0: sent from done_cb; 1: a 503 is set */
		}
	}
	if (render_view_run_global(&c->v))
		return 0;
	if (use_pool && http_pool_is_route(c->v.route)) {
		if (http_pool_has_room(c->h)) {
			http_id_plan_t plan;
			if (http_resolve_plan(c, id, &plan))
				return 0; /* a 400, as http_resolve_id's */
			if (!http_pool_submit(c, &plan))
				return 1; /* resolved and rendered by the pool, sent from done_cb */
		} else if (pool_full_in_catch_up(c)) {
			return 0;
		}
	}
	int rc = http_resolve_id(c, id, pith);
	if (rc)
		return rc > 0;
	render_view_run(&c->v, pith);
	return 0;
}

/* http_handle's body; again: a request handed back by the pool (already
 * counted as started, not for the pool again). */
static void handle(http_t *h, struct evhttp_request *req, int64_t t0_us, http_want_answer_t rerun,
		   int again)
{
	http_ctx_t c = {.v = {.rd = h->rd, .route = RENDER_ROUTE_OTHER}, .h = h, .req = req,
			.t0_us = t0_us, .rerun = rerun, .absent = again};
	c.v.t = &h->target;
	c.v.body = &h->body;
	if (h->main)
		http_loops_identity_sync(h);
	pith_buf_reset(c.v.body);
	if (c.v.body->cap > (8u << 20))
		pith_buf_release(c.v.body); /* one huge events.json must not pin its buffer */
	if (!rerun && !again)
		http_conn_request_started(h, req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	c.head = cmd == EVHTTP_REQ_HEAD;
	c.v.accept = http_header(&c, "Accept");
	const char *uri = evhttp_request_get_uri(req);
	size_t ulen = strlen(uri);
	const char *why = "";
	char id[256];
	/* after a protocol error the rest of the stream cannot be trusted:
	 * these replies close the connection */
	/* a target too long says so (a pasted 10 KB query), before the
	 * headers it counts towards */
	int rc = ulen > RENDER_TARGET_MAX ? RENDER_TARGET_TOO_LONG : RENDER_TARGET_OK;
	if (rc == RENDER_TARGET_OK && header_bytes(req, ulen) > h->o.max_header_bytes) {
		render_error(&c.v, 431, "request headers over %zu bytes", h->o.max_header_bytes);
		c.v.r.close = 1;
		goto send;
	}
	if (rc == RENDER_TARGET_OK)
		rc = render_target_parse(uri, ulen, c.v.t, &why);
	if (rc == RENDER_TARGET_TOO_LONG) {
		render_error(&c.v, 414, "request target over %d bytes", RENDER_TARGET_MAX);
		c.v.r.close = 1;
		goto send;
	}
	if (rc) {
		render_error(&c.v, 400, "malformed request target: %s", why);
		c.v.r.close = 1;
		goto send;
	}
	int id_seg;
	c.v.route = render_route_match(c.v.t, id, sizeof(id), &id_seg);
	if (c.v.t->enc_slash & ~(id_seg >= 0 ? 1u << id_seg : 0u)) {
		/* only an identifier may hold one (a pasted URL or DOI) */
		render_error(&c.v, 400, "malformed request target: an encoded slash");
		c.v.route = RENDER_ROUTE_OTHER;
		c.v.r.close = 1;
		goto send;
	}
	if (c.v.t->bad_why && c.v.route != RENDER_ROUTE_SEARCH && c.v.route != RENDER_ROUTE_SEARCH_API) {
		/* a query value that is not text: only the search views take
		 * one, to say why in their own page (render_target.c) */
		render_error(&c.v, 400, "malformed request target: %s in %s=", c.v.t->bad_why,
			   c.v.t->bad_key);
		c.v.route = RENDER_ROUTE_OTHER;
		c.v.r.close = 1;
		goto send;
	}
	if (c.v.route == RENDER_ROUTE_OTHER) {
		render_error(&c.v, 404, "no such resource");
		goto send;
	}
	int is_post = c.v.route == RENDER_ROUTE_POST_EVENTS;
	const char *allow = is_post ? "POST, OPTIONS" : "GET, HEAD, OPTIONS";
	if (cmd == EVHTTP_REQ_OPTIONS) {
		/* OPTIONS, and a browser's preflight (http_send adds the
		 * Access-Control-Allow-* headers) */
		c.v.r.status = 204;
		c.v.r.allow = allow;
		c.v.r.cors = 1;
		goto send;
	}
	if (is_post ? cmd != EVHTTP_REQ_POST : (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD)) {
		render_error(&c.v, 405, "%s takes %s", route_names[c.v.route], is_post ? "POST" : "GET or HEAD");
		c.v.r.allow = allow;
		goto send;
	}
	if (!is_post && evbuffer_get_length(evhttp_request_get_input_buffer(req))) {
		render_error(&c.v, 400, "a %s request carries no body", c.head ? "HEAD" : "GET");
		c.v.r.close = 1;
		goto send;
	}
	c.v.r.status = 200;
	if (route_run(&c, id, !again))
		return; /* POST /events, read-through, the render pool: answered later */
send:
	http_send(&c);
}

void http_handle(http_t *h, struct evhttp_request *req, int64_t t0_us, http_want_answer_t rerun)
{
	handle(h, req, t0_us, rerun, 0);
}

void http_handle_again(http_t *h, struct evhttp_request *req, int64_t t0_us,
		       http_want_answer_t rerun)
{
	handle(h, req, t0_us, rerun, 1);
}

static void request_cb(struct evhttp_request *req, void *arg)
{
	http_handle(arg, req, http_now_us(), 0);
}

static void http_reg_set(const struct evhttp *evh, http_t *h);

int http_evh_new(http_t *h)
{
	const http_opts_t *opts = &h->o;
	h->evh = evhttp_new(h->base);
	if (!h->evh)
		return -1;
	http_reg_set(h->evh, h);
	evhttp_set_allowed_methods(h->evh, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
						   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						   EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH |
						   EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT);
	/* Our own check answers 431 above max_header_bytes; evhttp's hard cap
	 * (413, connection closed) bounds what one connection can make us
	 * buffer before that check can run. */
	evhttp_set_max_headers_size(h->evh, (ev_ssize_t)(4 * opts->max_header_bytes));
	evhttp_set_max_body_size(h->evh, (ev_ssize_t)opts->max_body_bytes);
	evhttp_set_timeout(h->evh, opts->timeout_s);
	evhttp_set_default_content_type(h->evh, "application/json");
	evhttp_set_gencb(h->evh, request_cb, h);
	return 0;
}

static void accept_error_cb(struct evconnlistener *l, void *arg);

void http_accept_errors(http_t *h)
{
	evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(h->bound), accept_error_cb);
}

/* A listening socket on host:port (the serving loops share it), or -1
 * with err set. */
int http_listen_fd(const char *host, uint16_t port, const char *what, pith_err_t *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", port);
	int gr = getaddrinfo(host[0] ? host : NULL, ps, &hints, &ai);
	if (gr || !ai) {
		pith_err_set(err, PITH_EIO, "http: cannot listen on %s: %s", what, gai_strerror(gr));
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, SOMAXCONN)) {
		pith_err_set(err, PITH_EIO, "http: cannot listen on %s: %s", what, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* ---- accept errors ---------------------------------------------------------------- */

static void accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	http_t *h = arg;
	h->accept_error_pause = 0;
	http_conn_listener_update(h);
}

/* The servers by their evhttp: evhttp gives its listener's callbacks the
 * struct evhttp, not ours (evhttp_bind_listener sets the argument), so
 * the error callback finds its server here. Registered at set-up, removed
 * at free; read only on accept errors. */
#define HTTP_REG_MAX 256
static struct {
	const struct evhttp *evh;
	http_t *h;
} http_reg[HTTP_REG_MAX];
static pthread_mutex_t http_reg_mu = PTHREAD_MUTEX_INITIALIZER;

static void http_reg_set(const struct evhttp *evh, http_t *h)
{
	pthread_mutex_lock(&http_reg_mu);
	for (size_t i = 0; i < HTTP_REG_MAX; i++) {
		if (h ? !http_reg[i].evh : http_reg[i].evh == evh) {
			http_reg[i].evh = h ? evh : NULL;
			http_reg[i].h = h;
			break;
		}
	}
	pthread_mutex_unlock(&http_reg_mu);
}

static http_t *http_reg_get(const void *evh)
{
	http_t *h = NULL;
	pthread_mutex_lock(&http_reg_mu);
	for (size_t i = 0; i < HTTP_REG_MAX && !h; i++)
		if (http_reg[i].evh == evh)
			h = http_reg[i].h;
	pthread_mutex_unlock(&http_reg_mu);
	return h;
}

/* Out of descriptors: evhttp's listener would spin on the ready socket.
 * Pause accepting a little instead; the kernel keeps the backlog. */
static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	static log_rl_t rl;
	http_t *h = http_reg_get(arg); /* arg: the struct evhttp */
	int e = EVUTIL_SOCKET_ERROR();
	if (!h) {
		/* not registered (more servers than the table): pause the
		 * listener alone, it is enabled again at the next connection
		 * closed (http_conn_listener_update) */
		evconnlistener_disable(l);
		return;
	}
	log_rl(&rl, LOG_WARN, "http: accept failed: %s; pausing %d ms",
	       evutil_socket_error_to_string(e), ACCEPT_PAUSE_MS);
	(void)l;
	h->accept_error_pause = 1;
	http_conn_listener_update(h);
	if (!h->accept_resume_ev)
		h->accept_resume_ev = evtimer_new(h->base, accept_resume_cb, h);
	struct timeval tv = {0, ACCEPT_PAUSE_MS * 1000};
	if (h->accept_resume_ev)
		evtimer_add(h->accept_resume_ev, &tv);
}

/* ---- set-up ------------------------------------------------------------------------- */

static void dates_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	http_dates_tick(arg);
}

/* The date table and its timer (http_dates.c): 0, or -1 (out of memory). */
static int dates_start(http_t *h)
{
	struct timeval tv = {1, 0};
	if (http_dates_init(h) || !(h->dates_ev = event_new(h->base, -1, EV_PERSIST, dates_tick_cb, h)))
		return -1;
	return evtimer_add(h->dates_ev, &tv);
}

void http_metrics_init(http_t *h)
{
	for (int r = 0; r < RENDER_NROUTES; r++) {
		char labels[64];
		snprintf(labels, sizeof(labels), "route=\"%s\"", route_names[r]);
		h->latency[r] = metrics_histogram(
			h->metrics, "pith_http_request_duration_seconds",
			"Time from a request's headers being read to its reply being queued, by route",
			labels, metrics_latency_bounds, metrics_latency_nbounds);
	}
	h->bytes_out = metrics_counter(h->metrics, "pith_http_response_body_bytes_total",
				       "Bytes of response bodies queued", NULL);
	h->conns_total = metrics_counter(h->metrics, "pith_http_connections_total",
					 "HTTP connections accepted", NULL);
	h->conns_cut = metrics_counter(h->metrics, "pith_http_connections_cut_total",
				       "HTTP connections cut for not completing a request in time",
				       NULL);
	h->conns_full = metrics_counter(h->metrics, "pith_http_accept_paused_total",
					"Times accepting paused at the connection cap", NULL);
	h->body_waits = metrics_counter(h->metrics, "pith_http_body_waits_total",
				      "Times request bodies had to wait for a turn (max_buffered_bytes)",
				      NULL);
	http_post_metrics_init(h);
}

/* The store's totals and the POST backlog, at scrape time. */
static void collect(void *arg, metrics_out_t *o)
{
	http_t *h = arg;
	store_counts_t sc;
	store_counts_get(h->store, &sc);
	metrics_out_family(o, "pith_store_events", METRIC_GAUGE, "Events in the store");
	metrics_out_sample_u64(o, "pith_store_events", NULL, sc.events);
	metrics_out_family(o, "pith_store_records", METRIC_GAUGE, "Records in the store");
	metrics_out_sample_u64(o, "pith_store_records", NULL, sc.records);
	metrics_out_family(o, "pith_store_bundles", METRIC_GAUGE,
			   "Records with a verified registry bundle");
	metrics_out_sample_u64(o, "pith_store_bundles", NULL, sc.bundles);
	metrics_out_family(o, "pith_http_connections_open", METRIC_GAUGE, "HTTP connections open now");
	metrics_out_sample_u64(o, "pith_http_connections_open", NULL,
			       (h->loops ? 0 : h->nconns) + http_loops_conns(h));
	metrics_out_family(o, "pith_http_post_events_inflight", METRIC_GAUGE,
			   "Events from POST /events in validation now");
	metrics_out_sample_u64(o, "pith_http_post_events_inflight", NULL, h->inflight);
	metrics_out_family(o, "pith_http_mirrors_listed", METRIC_GAUGE,
			   "Peer HTTP mirrors listed in /pith-mirrors.json");
	metrics_out_sample_u64(o, "pith_http_mirrors_listed", NULL, render_mirrors_count(h->rd));
	http_pool_stats_t ps;
	http_pool_stats(h, &ps);
	const struct {
		const char *name, *help;
		int type;
		uint64_t v;
	} pool[] = {
		{"pith_http_render_threads",
		 "Threads rendering record documents and resolves off the loop (http_render_threads)",
		 METRIC_GAUGE,
		 ps.threads},
		{"pith_http_render_outstanding",
		 "Record documents and resolves handed to the render threads and not yet sent",
		 METRIC_GAUGE,
		 ps.outstanding},
		{"pith_http_render_jobs_total",
		 "Record documents and resolves handed to the render threads",
		 METRIC_COUNTER, ps.jobs},
		{"pith_http_render_full_total",
		 "Record documents and resolves the loop answered itself because the render threads "
		 "were full",
		 METRIC_COUNTER, ps.full},
		{"pith_http_render_back_total",
		 "Record requests the render threads handed back to the loop unresolved",
		 METRIC_COUNTER, ps.back},
	};
	for (size_t i = 0; i < sizeof(pool) / sizeof(pool[0]); i++) {
		metrics_out_family(o, pool[i].name, pool[i].type, pool[i].help);
		metrics_out_sample_u64(o, pool[i].name, NULL, pool[i].v);
	}
}

void http_opts_default(http_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->name = "pith-mirror";
	o->max_header_bytes = 8192;
	o->max_body_bytes = 4u << 20;
	o->max_post_events = 2000;
	o->max_inflight = 8192;
	o->max_buffered_bytes = 64u << 20;
	o->timeout_s = 10;
	o->request_timeout_s = 30;
	o->max_connections = 4096;
	o->events_page_max = 1000;
	o->max_queued_out = 32u << 20;
	o->costly_per_addr = 4;
	o->list_registry = 1;
	o->cache_max_age = 60;
}

/* "/" asks the hook what the node is connected to (render_opts_t.about). */
static void about_cb(void *arg, render_about_t *out)
{
	http_t *h = arg;
	h->hooks.about(h->hooks.arg, out);
}

/* The loop's render context, once the base URL is known. 0 or an error. */
int http_render_start(http_t *h, const http_opts_t *opts, int64_t started, pith_err_t *err)
{
	render_opts_t ro = {
		.base_url = h->base_url,
		.name = opts->name,
		.operator_name = opts->operator_name,
		.contact = opts->contact,
		.search_url = h->base_url, /* it answers /search itself */
		.list_registry = opts->list_registry,
		.node_id = opts->node_id,
		.network_id = opts->network_id,
		.events_page_max = opts->events_page_max,
		.search = opts->search,
		.started = started,
		.about = h->hooks.about ? about_cb : NULL,
		.about_arg = h,
	};
	return render_new(h->store, &ro, &h->rd, err);
}

int http_new(struct event_base *base, store_t *store, metrics_t *metrics, const http_opts_t *opts,
	     const http_hooks_t *hooks, http_t **out, pith_err_t *err)
{
	*out = NULL;
	char host[256];
	uint16_t port;
	if (!opts->listen || config_split_hostport(opts->listen, host, &port, 1))
		return pith_err_set(err, PITH_EINVAL, "http: '%s' is not HOST:PORT",
				    opts->listen ? opts->listen : "");
	if (opts->max_header_bytes < 1024 || opts->max_body_bytes < 1024 || !opts->max_post_events ||
	    !opts->max_inflight || opts->timeout_s < 1 || !opts->events_page_max ||
	    opts->request_timeout_s < 1 || opts->max_connections < 1 || opts->cache_max_age < 0 ||
	    opts->cache_max_age > 86400)
		return pith_err_set(err, PITH_EINVAL, "http: a limit is out of range");
	char pub[RENDER_URL_MAX + 1] = "";
	if (opts->public_url && *opts->public_url && !render_url_trim(opts->public_url, pub))
		return pith_err_set(err, PITH_EINVAL,
				    "http: public URL '%.200s' is not a plain http(s) URL of at most %d "
				    "bytes (host, optional port and path; no credentials, query or "
				    "fragment)", opts->public_url, WIRE_HTTP_URL_MAX);

	http_t *h = calloc(1, sizeof(*h));
	if (!h)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	int rc = 0;
	h->base = base;
	h->store = store;
	h->o = *opts;
	h->o.listen = NULL;
	h->o.public_url = NULL;
	h->o.name = h->o.operator_name = h->o.contact = NULL; /* the render context's */
	h->o.node_id = h->o.network_id = NULL;
	if (hooks)
		h->hooks = *hooks;
	h->metrics = metrics;
	if (!h->metrics) {
		h->metrics = metrics_new();
		h->own_metrics = 1;
	}
	h->jobs = idmap_new();
	h->waits = idmap_new();
	h->bodies = http_bodies_new();
	if (!h->metrics || !h->jobs || !h->waits || !h->bodies || http_evh_new(h)) {
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	/* with serving loops the public socket is theirs (http_loops.c), and
	 * this loop listens on a private loopback port for what they relay */
	int pub_fd = -1;
	if (opts->loops > 0) {
		if ((pub_fd = http_listen_fd(host, port, opts->listen, err)) < 0) {
			rc = err->code ? err->code : PITH_EIO;
			goto fail;
		}
		h->bound = evhttp_bind_socket_with_handle(h->evh, "127.0.0.1", 0);
		if (!h->bound) {
			close(pub_fd);
			rc = pith_err_set(err, PITH_EIO, "http: cannot listen on 127.0.0.1 for the "
					  "serving loops' relays: %s", strerror(errno));
			goto fail;
		}
		struct sockaddr_in rs;
		socklen_t rl = sizeof(rs);
		getsockname(evhttp_bound_socket_get_fd(h->bound), (struct sockaddr *)&rs, &rl);
		h->relay_port = ntohs(rs.sin_port);
		if (http_relay_secret_new(h->relay_secret)) {
			close(pub_fd);
			rc = pith_err_set(err, PITH_EIO, "http: no random bytes for the serving loops' "
					  "relay secret (getrandom: %s)", strerror(errno));
			goto fail;
		}
	} else {
		h->bound = evhttp_bind_socket_with_handle(h->evh, host, port);
		if (!h->bound) {
			rc = pith_err_set(err, PITH_EIO, "http: cannot listen on %s: %s", opts->listen,
					  strerror(errno));
			goto fail;
		}
	}
	http_accept_errors(h);
	if (http_conn_init(h)) {
		if (pub_fd >= 0)
			close(pub_fd);
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(pub_fd >= 0 ? pub_fd : evhttp_bound_socket_get_fd(h->bound), (struct sockaddr *)&ss,
		    &sl);
	char ip[INET6_ADDRSTRLEN] = "?";
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		evutil_inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		h->port = ntohs(s6->sin6_port);
		snprintf(h->listen_str, sizeof(h->listen_str), "[%s]:%u", ip, h->port);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		evutil_inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		h->port = ntohs(s4->sin_port);
		snprintf(h->listen_str, sizeof(h->listen_str), "%s:%u", ip, h->port);
	}
	if (pub[0])
		snprintf(h->base_url, sizeof(h->base_url), "%s", pub);
	else
		snprintf(h->base_url, sizeof(h->base_url), "http://%s", h->listen_str);
	http_metrics_init(h);
	if (dates_start(h) || metrics_add_collector(h->metrics, collect, h)) {
		if (pub_fd >= 0)
			close(pub_fd);
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = http_render_start(h, opts, h->dates[0].t, err))) {
		if (pub_fd >= 0)
			close(pub_fd);
		goto fail;
	}
	/* last: the render contexts copy the names and base URL set above */
	if ((rc = http_pool_start(h, opts->render_threads, err))) {
		if (pub_fd >= 0)
			close(pub_fd);
		goto fail;
	}
	if (pub_fd >= 0 && (rc = http_loops_start(h, pub_fd, opts, err)))
		goto fail; /* pub_fd closed there */
	*out = h;
	return 0;
fail:
	http_free(h);
	return rc;
}

void http_free_(http_t *h)
{
	if (!h)
		return;
	http_loops_free(h); /* first: their servers read this one */
	/* before evhttp_free: it frees the requests our posts and render
	 * jobs point to */
	http_pool_stop(h);
	http_relay_drop_all(h);
	http_post_drop_all(h);
	http_want_drop_all(h);
	http_conn_stop_sweep(h);
	h->bound = NULL; /* evhttp_free frees it before the connections */
	if (h->evh) {
		http_reg_set(h->evh, NULL);
		evhttp_free(h->evh);
	}
	http_conn_free_all(h);
	if (h->accept_resume_ev)
		event_free(h->accept_resume_ev);
	if (h->dates_ev)
		event_free(h->dates_ev);
	idmap_free(h->jobs);
	idmap_free(h->waits);
	http_bodies_free(h->bodies);
	if (h->own_metrics)
		metrics_free(h->metrics);
	gz_cache_free(h);
	free(h->dates);
	if (h->dates_mu_init)
		pthread_mutex_destroy(&h->dates_mu);
	render_free(h->rd);
	pith_buf_release(&h->body);
	pith_buf_release(&h->gz);
	free(h);
}

const char *http_base_url(const http_t *h)
{
	return h->base_url;
}

const char *http_listen_str(const http_t *h)
{
	return h->listen_str;
}

uint16_t http_port(const http_t *h)
{
	return h->port;
}

metrics_t *http_metrics(http_t *h)
{
	return h->metrics;
}

void http_set_draining(http_t *h, int draining)
{
	__atomic_store_n(&h->draining, draining, __ATOMIC_RELAXED);
}

int http_draining(const http_t *h)
{
	return __atomic_load_n(&(h->main ? h->main : h)->draining, __ATOMIC_RELAXED);
}

int http_stop_wait(http_t *h)
{
	/* the serving loops first: what they owe may be relayed here */
	if (http_loops_stop_wait(h))
		return 1;
	int64_t now = http_now_us();
	if (!h->stopping) {
		h->stopping = 1;
		h->stop_until_us = now + HTTP_STOP_WAIT_MS * INT64_C(1000);
		http_conn_listener_update(h);
	}
	if (!http_conn_owed(h) && !http_pool_owed(h))
		return 0;
	if (now < h->stop_until_us)
		return 1;
	if (h->stop_refused)
		return 0;
	h->stop_refused = 1;
	http_pool_refuse(h);
	h->stop_until_us = now + HTTP_STOP_FLUSH_MS * INT64_C(1000);
	return 1;
}

int http_mirrors_set(http_t *h, const http_mirror_t *m, size_t n)
{
	return render_mirrors_set(h->rd, m, n);
}

void http_root_set(http_t *h, const http_root_t *r)
{
	render_root_set(h->rd, r);
}
