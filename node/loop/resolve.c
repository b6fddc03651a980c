/* HOST:PORT to a socket address without blocking the loop. See resolve.h.
 *
 * Ownership of a request (resolve_req_t):
 *   - the loop thread creates it, fills host/port, starts its thread, and
 *     keeps it on r->live until the thread has posted it back;
 *   - the worker thread writes only the result fields (gai, addr), then
 *     posts the request on the hub's done list under the hub's mutex and,
 *     still under it, fires the resolver's wake (wake.h);
 *   - the loop thread, woken, takes the done list, and for each
 *     request calls back (unless it was cancelled or timed out) and frees it.
 * The hub outlives the resolver while threads run: resolver_free marks it
 * dead, and from then on each thread frees its own request and the last
 * one out frees the hub. Loop-only fields (state, timer, live links) are
 * never touched by a worker. */
#define _GNU_SOURCE
#include "resolve.h"

#include "config.h"
#include "wake.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum {
	REQ_WAITING = 0, /* the callback will run */
	REQ_DROPPED,     /* cancelled or timed out: free it when it comes back */
} req_state_t;

typedef struct hub {
	pthread_mutex_t mu;
	unsigned refs;       /* the resolver, plus one per running thread */
	int dead;            /* resolver_free ran: threads free their own requests */
	resolve_req_t *done; /* posted by threads, taken by the loop */
	loop_wake_t *wake;   /* the resolver's, fired under mu while !dead */
} hub_t;

struct resolve_req {
	/* set before the thread starts, read-only after */
	hub_t *hub;
	char host[256];
	char port[8];
	int (*gai)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
	/* written by the worker, read by the loop after the post */
	int gai_rc;
	resolve_addr_t addr;
	resolve_req_t *done_next; /* hub->done, under hub->mu */
	/* loop thread only */
	resolver_t *r;
	req_state_t state;
	resolve_cb cb;
	void *arg;
	struct event *timer;
	resolve_req_t *prev, *next; /* r->live */
};

struct resolver {
	struct event_base *base;
	resolve_limits_t lim;
	hub_t *hub;
	loop_wake_t *wake;
	resolve_req_t *live; /* every request whose thread has not been seen back */
	unsigned inflight;
	int dispatching;  /* in on_wake's callbacks */
	int free_pending; /* resolver_free was called from a callback */
};

/* The first IPv4 address of res, else its first: loopback meshes and most
 * peers listen on IPv4, and that is what addrbook_add_hostport picked. */
static void pick_addr(const struct addrinfo *res, resolve_addr_t *out)
{
	const struct addrinfo *pick = res;
	for (const struct addrinfo *a = res; a; a = a->ai_next)
		if (a->ai_family == AF_INET) {
			pick = a;
			break;
		}
	memset(out, 0, sizeof(*out));
	memcpy(&out->ss, pick->ai_addr, pick->ai_addrlen);
	out->len = pick->ai_addrlen;
}

/* getaddrinfo's hints as the node always used them: any family, a stream
 * socket, the port as digits. */
static int lookup(int (*gai)(const char *, const char *, const struct addrinfo *,
                             struct addrinfo **),
                  const char *host, const char *port, int numeric, resolve_addr_t *out)
{
	struct addrinfo hints = {0}, *res = NULL;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (numeric ? AI_NUMERICHOST : 0);
	int g = gai(host, port, &hints, &res);
	if (!g && !res)
		g = EAI_NONAME;
	if (!g)
		pick_addr(res, out);
	if (res)
		freeaddrinfo(res);
	return g;
}

/* ---- the hub, shared with the threads ------------------------------------ */

static void hub_unref(hub_t *h)
{
	pthread_mutex_lock(&h->mu);
	int last = --h->refs == 0;
	pthread_mutex_unlock(&h->mu);
	if (!last)
		return;
	pthread_mutex_destroy(&h->mu);
	free(h);
}

static void *worker_main(void *p)
{
	resolve_req_t *q = p;
	hub_t *h = q->hub;
	pthread_setname_np(pthread_self(), "pith-resolve");
	q->gai_rc = lookup(q->gai, q->host, q->port, 0, &q->addr);
	pthread_mutex_lock(&h->mu);
	if (h->dead) {
		pthread_mutex_unlock(&h->mu);
		free(q);
	} else {
		int wake = !h->done;
		q->done_next = h->done;
		h->done = q;
		/* under mu: resolver_destroy frees the wake only once dead is set */
		if (wake)
			loop_wake_fire(h->wake);
		pthread_mutex_unlock(&h->mu);
	}
	hub_unref(h);
	return NULL;
}

/* ---- the loop side ------------------------------------------------------- */

static void live_remove(resolver_t *r, resolve_req_t *q)
{
	if (q->prev)
		q->prev->next = q->next;
	else
		r->live = q->next;
	if (q->next)
		q->next->prev = q->prev;
	q->prev = q->next = NULL;
	r->inflight--;
}

/* Takes q off the loop's books; its callback will not run. The thread may
 * still hold it. */
static void req_drop(resolve_req_t *q)
{
	if (q->timer) {
		event_free(q->timer);
		q->timer = NULL;
	}
	q->state = REQ_DROPPED;
}

static void finish(resolve_req_t *q)
{
	resolve_cb cb = q->cb;
	void *arg = q->arg;
	int waiting = q->state == REQ_WAITING;
	resolve_addr_t addr = q->addr;
	pith_err_t err = {0};
	if (waiting && q->gai_rc)
		pith_err_set(&err, PITH_EINVAL, "cannot resolve %s: %s", q->host,
		             gai_strerror(q->gai_rc));
	int gai_rc = q->gai_rc;
	if (q->timer)
		event_free(q->timer);
	free(q);
	if (waiting)
		cb(arg, gai_rc ? NULL : &addr, gai_rc ? &err : NULL);
}

static void resolver_destroy(resolver_t *r);

/* Threads have posted answers: hand each to its requester. */
static void dispatch_done(resolver_t *r)
{
	pthread_mutex_lock(&r->hub->mu);
	resolve_req_t *list = r->hub->done;
	r->hub->done = NULL;
	pthread_mutex_unlock(&r->hub->mu);
	r->dispatching = 1;
	while (list) {
		resolve_req_t *q = list;
		list = q->done_next;
		live_remove(r, q);
		if (r->free_pending)
			req_drop(q); /* a callback freed the resolver: no more callbacks */
		finish(q);
	}
	r->dispatching = 0;
	if (r->free_pending)
		resolver_destroy(r);
}

static void on_wake(void *arg)
{
	dispatch_done(arg);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	resolve_req_t *q = arg;
	resolve_cb cb = q->cb;
	void *cbarg = q->arg;
	pith_err_t err = {0};
	pith_err_set(&err, PITH_EIO, "cannot resolve %s: timed out after %u ms", q->host,
	             q->r->lim.timeout_ms);
	req_drop(q); /* stays on r->live, and counted, until its thread is back */
	cb(cbarg, NULL, &err);
}

resolver_t *resolver_new(struct event_base *base, const resolve_limits_t *lim)
{
	resolver_t *r = calloc(1, sizeof(*r));
	hub_t *h = calloc(1, sizeof(*h));
	if (!r || !h)
		goto fail;
	pthread_mutex_init(&h->mu, NULL);
	h->refs = 1;
	r->hub = h;
	r->base = base;
	if (lim)
		r->lim = *lim;
	if (!r->lim.max_inflight)
		r->lim.max_inflight = RESOLVE_MAX_INFLIGHT_DEFAULT;
	if (!r->lim.timeout_ms)
		r->lim.timeout_ms = RESOLVE_TIMEOUT_MS_DEFAULT;
	if (!r->lim.gai)
		r->lim.gai = getaddrinfo;
	r->wake = h->wake = loop_wake_new(base, on_wake, r);
	if (!r->wake)
		goto fail;
	return r;
fail:
	if (r && r->hub)
		hub_unref(h);
	else
		free(h);
	free(r);
	return NULL;
}

static void resolver_destroy(resolver_t *r)
{
	/* requests whose thread still runs: the thread frees them now */
	for (resolve_req_t *q = r->live; q; q = q->next)
		req_drop(q);
	pthread_mutex_lock(&r->hub->mu);
	r->hub->dead = 1;
	resolve_req_t *list = r->hub->done;
	r->hub->done = NULL;
	pthread_mutex_unlock(&r->hub->mu);
	/* posted but not dispatched: their threads are done with them */
	while (list) {
		resolve_req_t *q = list;
		list = q->done_next;
		free(q);
	}
	/* dead is set: no thread fires it any more */
	r->hub->wake = NULL;
	loop_wake_free(r->wake);
	hub_unref(r->hub);
	free(r);
}

void resolver_free_(resolver_t *r)
{
	if (!r)
		return;
	if (r->dispatching) {
		r->free_pending = 1; /* dispatch_done finishes the job */
		return;
	}
	resolver_destroy(r);
}

unsigned resolve_inflight(const resolver_t *r)
{
	return r->inflight;
}

/* Starts q's thread, detached, with every signal blocked: signals belong to
 * the loop thread (libevent's signal events). */
static int start_thread(resolve_req_t *q)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;
	if (pthread_attr_init(&attr))
		return -1;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&th, &attr, worker_main, q);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return rc ? -1 : 0;
}

int resolve_numeric(const char *hostport, resolve_addr_t *out)
{
	char host[256], port[8];
	uint16_t pnum;
	if (config_split_hostport(hostport, host, &pnum, 0))
		return PITH_EINVAL;
	snprintf(port, sizeof(port), "%u", pnum);
	return lookup(getaddrinfo, host, port, 1, out) ? PITH_EINVAL : 0;
}

int resolve_hostport(resolver_t *r, const char *hostport, resolve_addr_t *now, resolve_cb cb,
                     void *arg, resolve_req_t **req, pith_err_t *err)
{
	char host[256], port[8];
	uint16_t pnum;
	*req = NULL;
	if (config_split_hostport(hostport, host, &pnum, 0))
		return pith_err_set(err, PITH_EINVAL, "'%s' is not HOST:PORT", hostport);
	snprintf(port, sizeof(port), "%u", pnum);
	/* numeric: getaddrinfo parses it and does no I/O */
	int g = lookup(getaddrinfo, host, port, 1, now);
	if (!g)
		return RESOLVE_DONE;
	if (g != EAI_NONAME)
		return pith_err_set(err, PITH_EINVAL, "cannot resolve %s: %s", host,
		                    gai_strerror(g));
	if (r->inflight >= r->lim.max_inflight)
		return pith_err_set(err, PITH_ETOOBIG, "too many name lookups in flight (%u)",
		                    r->inflight);
	resolve_req_t *q = calloc(1, sizeof(*q));
	if (!q)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	q->hub = r->hub;
	memcpy(q->host, host, sizeof(host));
	memcpy(q->port, port, sizeof(port));
	q->gai = r->lim.gai;
	q->r = r;
	q->cb = cb;
	q->arg = arg;
	q->timer = evtimer_new(r->base, on_timeout, q);
	struct timeval tv = {r->lim.timeout_ms / 1000, (r->lim.timeout_ms % 1000) * 1000};
	if (!q->timer || evtimer_add(q->timer, &tv)) {
		if (q->timer)
			event_free(q->timer);
		free(q);
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&r->hub->mu);
	r->hub->refs++;
	pthread_mutex_unlock(&r->hub->mu);
	if (start_thread(q)) {
		event_free(q->timer);
		free(q);
		hub_unref(r->hub);
		return pith_err_set(err, PITH_EIO, "cannot start a thread to resolve %s", host);
	}
	q->next = r->live;
	if (r->live)
		r->live->prev = q;
	r->live = q;
	r->inflight++;
	*req = q;
	return 0;
}

void resolve_cancel_(resolve_req_t *req)
{
	if (req)
		req_drop(req);
}
