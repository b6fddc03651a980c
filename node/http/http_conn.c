/* Connections: a cap on how many are open, and a deadline for each request.
 *
 * evhttp's own timeout is an inactivity timeout: a client that sends one
 * byte every few seconds keeps its connection (and a descriptor) for ever,
 * and enough of them take every descriptor the process has. evhttp 2.1
 * has no hook for new or closed connections, so this module follows them
 * through the one hook it has, the bufferevent factory (evhttp_set_bevcb):
 *
 * - Each connection's bufferevent gets an extra reference, so that our
 *   record of it never points at freed memory. We drop that reference
 *   when evhttp frees the connection: through the connection's close
 *   callback once a request of it reached us (at once), or, for a
 *   connection that never completed a request, when the sweep sees that
 *   evhttp cleared its callbacks (bufferevent_free does; within
 *   SWEEP_MS).
 * - A connection that has not completed a request within request_timeout_s
 *   of being accepted or of its previous reply being written is cut:
 *   shutdown(2) on its socket, which evhttp reads as the client leaving.
 *   Connections we owe a reply (a request being handled, a reply being
 *   written) are never cut here; evhttp's write timeout covers readers
 *   that stop reading.
 * - At max_connections the listener stops accepting (the kernel's backlog
 *   holds newcomers) until one closes. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "http_int.h"
#include "log.h"

#define SWEEP_MS 100
/* Input a connection may hold unread, beyond the largest body: bounds
 * what a client can push at a connection evhttp has already let go and we
 * have not yet released. (evhttp waits for a whole chunk of a chunked body
 * in the input, and refuses chunks past max_body_bytes.) */
#define CONN_READ_SLACK (64u << 10)

struct hconn {
	struct bufferevent *bev;
	int64_t since_us;     /* accepted, or its last reply written */
	int busy;             /* a request dispatched, its reply not yet written */
	int has_closecb;
	int cut;              /* shut down by the deadline */
	int admitted;         /* may read a body (http_conn_budget) */
	hconn_t *prev, *next;
};

/* Accept while below the cap and not paused by an accept error. */
void http_conn_listener_update(http_t *h)
{
	if (!h->bound)
		return;
	struct evconnlistener *l = evhttp_bound_socket_get_listener(h->bound);
	int want = !h->accept_error_pause && !h->stopping && h->nconns < h->o.max_connections;
	if (want && !h->accepting) {
		evconnlistener_enable(l);
		h->accepting = 1;
	} else if (!want && h->accepting) {
		evconnlistener_disable(l);
		h->accepting = 0;
		if (h->nconns >= h->o.max_connections)
			metric_inc(h->conns_full);
	}
}

static void conn_release(http_t *h, hconn_t *c)
{
	uint8_t key[32];
	idmap_key_u64((uintptr_t)c->bev, key);
	idmap_del(h->conns, key);
	if (c->prev)
		c->prev->next = c->next;
	else
		h->conn_list = c->next;
	if (c->next)
		c->next->prev = c->prev;
	h->nconns--;
	__atomic_store_n(&h->nconns_seen, h->nconns, __ATOMIC_RELAXED);
	if (c->admitted)
		h->admitted--;
	bufferevent_decref(c->bev);
	free(c);
	http_conn_listener_update(h);
}

static size_t conn_read_wm(const http_t *h)
{
	return h->o.max_body_bytes + 4 * h->o.max_header_bytes + CONN_READ_SLACK;
}

/* What a connection reads before it is admitted to send a body: a request
 * line and headers (evhttp's own cap is 4x max_header_bytes). */
static size_t conn_idle_wm(const http_t *h)
{
	return 4 * h->o.max_header_bytes + 1024;
}

static void conn_admit(http_t *h, hconn_t *c, int admit)
{
	if (c->admitted == admit)
		return;
	c->admitted = admit;
	h->admitted += admit ? 1 : (size_t)-1;
	bufferevent_setwatermark(c->bev, EV_READ, 0, admit ? conn_read_wm(h) : conn_idle_wm(h));
}

/* Bodies are read by at most as many connections at once as fit in
 * max_buffered_bytes with the POSTed events in validation; a connection
 * whose input reached the idle watermark (a body is coming) waits, in
 * TCP, for a turn, oldest first. Requests without a body never wait. */
void http_conn_budget(http_t *h)
{
	size_t per = conn_read_wm(h);
	size_t waiting = 0;
	for (hconn_t *c = h->conn_list; c; c = c->next) {
		if (c->admitted || c->cut ||
		    evbuffer_get_length(bufferevent_get_input(c->bev)) < conn_idle_wm(h))
			continue;
		if (h->inflight_bytes + (h->admitted + 1) * per <= h->o.max_buffered_bytes ||
		    !h->admitted)
			conn_admit(h, c, 1);
		else
			waiting++;
	}
	if (waiting && !h->body_waiting)
		metric_inc(h->body_waits);
	h->body_waiting = waiting;
}

struct bufferevent *http_conn_bev_cb(struct event_base *base, void *arg)
{
	http_t *h = arg;
	struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!bev)
		return NULL; /* evhttp makes one itself: untracked, but served */
	hconn_t *c = calloc(1, sizeof(*c));
	uint8_t key[32];
	idmap_key_u64((uintptr_t)bev, key);
	if (!c || idmap_put(h->conns, key, c)) {
		free(c);
		return bev;
	}
	bufferevent_incref(bev);
	bufferevent_setwatermark(bev, EV_READ, 0, conn_idle_wm(h));
	c->bev = bev;
	c->since_us = http_now_us();
	c->next = h->conn_list;
	if (h->conn_list)
		h->conn_list->prev = c;
	h->conn_list = c;
	h->nconns++;
	__atomic_store_n(&h->nconns_seen, h->nconns, __ATOMIC_RELAXED);
	metric_inc(h->conns_total);
	http_conn_listener_update(h);
	return bev;
}

static hconn_t *conn_of(http_t *h, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	if (!evcon)
		return NULL;
	uint8_t key[32];
	idmap_key_u64((uintptr_t)(evhttp_connection_get_bufferevent(evcon)), key);
	return idmap_get(h->conns, key);
}

static void conn_close_cb(struct evhttp_connection *evcon, void *arg)
{
	http_t *h = arg;
	uint8_t key[32];
	idmap_key_u64((uintptr_t)(evhttp_connection_get_bufferevent(evcon)), key);
	hconn_t *c = idmap_get(h->conns, key);
	if (c)
		conn_release(h, c); /* evhttp's own bufferevent_free follows */
}

static void conn_complete_cb(struct evhttp_request *req, void *arg)
{
	http_t *h = arg;
	hconn_t *c = conn_of(h, req);
	if (c) {
		c->busy = 0;
		c->since_us = http_now_us();
		conn_admit(h, c, 0); /* its next body waits for a turn again */
		http_conn_budget(h);
	}
}

void http_conn_request_started(http_t *h, struct evhttp_request *req)
{
	hconn_t *c = conn_of(h, req);
	if (!c)
		return;
	if (!c->has_closecb) {
		evhttp_connection_set_closecb(evhttp_request_get_connection(req), conn_close_cb, h);
		c->has_closecb = 1;
	}
	c->busy = 1;
	evhttp_request_set_on_complete_cb(req, conn_complete_cb, h);
}

static void sweep(http_t *h)
{
	http_conn_budget(h);
	int64_t now = http_now_us(), limit = (int64_t)h->o.request_timeout_s * 1000000;
	for (hconn_t *c = h->conn_list, *nx; c; c = nx) {
		nx = c->next;
		bufferevent_event_cb ev = NULL;
		bufferevent_getcb(c->bev, NULL, NULL, &ev, NULL);
		if (!ev) {
			conn_release(h, c); /* evhttp let it go */
			continue;
		}
		if (!c->busy && !c->cut && now - c->since_us > limit) {
			evutil_socket_t fd = bufferevent_getfd(c->bev);
			if (fd >= 0) {
				shutdown(fd, SHUT_RDWR);
				c->cut = 1;
				metric_inc(h->conns_cut);
			}
		}
	}
}

static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sweep(arg);
}

int http_conn_init(http_t *h)
{
	/* leave descriptors for the store, peers and the rest of the node */
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    h->o.max_connections > rl.rlim_cur / 2) {
		log_warn("http: max connections %zu lowered to %llu (half the descriptor limit)",
			 h->o.max_connections, (unsigned long long)(rl.rlim_cur / 2));
		h->o.max_connections = rl.rlim_cur / 2;
	}
	h->conns = idmap_new();
	h->sweep_ev = event_new(h->base, -1, EV_PERSIST, sweep_cb, h);
	if (!h->conns || !h->sweep_ev)
		return PITH_ENOMEM;
	struct timeval tv = {0, SWEEP_MS * 1000};
	event_add(h->sweep_ev, &tv);
	h->accepting = 1;
	evhttp_set_bevcb(h->evh, http_conn_bev_cb, h);
	return 0;
}

size_t http_conn_queued(const http_t *h)
{
	size_t n = 0;
	for (const hconn_t *c = h->conn_list; c; c = c->next)
		n += evbuffer_get_length(bufferevent_get_output(c->bev));
	return n;
}

size_t http_conn_owed(const http_t *h)
{
	size_t n = 0;
	for (const hconn_t *c = h->conn_list; c; c = c->next)
		n += c->busy && !c->cut;
	return n;
}

void http_conn_stop_sweep(http_t *h)
{
	if (h->sweep_ev) {
		event_free(h->sweep_ev);
		h->sweep_ev = NULL;
	}
}

void http_conn_free_all(http_t *h)
{
	/* evhttp_free has freed every connection: ours are the last references */
	while (h->conn_list)
		conn_release(h, h->conn_list);
	idmap_free(h->conns);
}
