/* Serving loops (http_opts_t.loops; pithd's http_loops): more event loops
 * than the node's own answering the public HTTP port, each on a thread of
 * its own, so that the documents readers ask for most are served on every
 * core without a hand-off between threads (issue 56).
 *
 * Each serving loop is a server of its own (an http_t with main set): its
 * evhttp accepts on the public socket, which all of them share (one
 * listening socket, a descriptor each: whichever loop is idle takes the
 * next connection), with its own connections and their bounds (the
 * connection cap and max_buffered_bytes divided among the loops), its own
 * body cache and gzip cache, and a render context of its own. It answers
 * the record documents, resolve and the immutable documents by hash
 * itself, reading the store (thread-safe) and rendering on its own thread,
 * exactly as the node's loop would (the same http_handle). Everything
 * else needs the node's loop (POST /events and its pipeline, the
 * read-through's upstreams, /metrics and /healthz, the state root, "/",
 * /pith-mirrors.json, the costly documents and their per-client bounds):
 * that request is relayed to the node's server over a private loopback
 * listener (http_relay.c), which answers it as it answers any request,
 * and the serving loop sends that answer on.
 *
 * What a serving loop reads of the node's server, and how: its opts and
 * relay port and secret (set before the loops start, never changed), its
 * draining flag (atomic), its date table (under dates_mu: one change gets
 * one Last-Modified whichever loop answers), the identity the node sets
 * (here, under mu, with a generation read atomically before each
 * request), and the metrics registry (atomic counters).
 *
 * Stopping: http_stop_wait first tells each serving loop to stop
 * accepting and waits until each has answered what it owes (bounded as
 * the node's own wait is), while the node's loop keeps answering relays;
 * http_free then ends their loops, joins the threads and frees them. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http_int.h"
#include "log.h"
#include "store_pool.h"
#include "wake.h"

#define STOP_POLL_MS 20

typedef struct serving {
	http_loops_t *ls;
	http_t *h;                 /* its server */
	struct event_base *base;
	loop_wake_t *wake;         /* the node asks it to stop, or to end */
	struct event *stop_ev;     /* polls its http_stop_wait */
	int ask;                   /* 1: stop accepting; 2: end the loop (atomic) */
	int done;                  /* stopped and owes nothing (atomic) */
} serving_t;

struct http_loops {
	http_t *main;
	serving_t *s;
	size_t n;
	store_pool_t threads;
	int stopping;              /* the node's loop's */
	pthread_mutex_t mu;
	uint64_t ident_gen;        /* written under mu, read atomically */
	char name[HTTP_NAME_MAX + 1], operator_name[HTTP_NAME_MAX + 1];
	char contact[HTTP_CONTACT_MAX + 1];
};

/* ---- on a serving loop's thread ----------------------------------------------------- */

static void stop_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	serving_t *s = arg;
	if (__atomic_load_n(&s->done, __ATOMIC_ACQUIRE))
		return;
	if (!http_stop_wait(s->h)) {
		__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
		event_del(s->stop_ev);
	}
}

static void serving_wake(void *arg)
{
	serving_t *s = arg;
	int ask = __atomic_load_n(&s->ask, __ATOMIC_ACQUIRE);
	if (ask >= 2) {
		event_base_loopbreak(s->base);
		return;
	}
	if (ask == 1 && !s->stop_ev) {
		s->stop_ev = event_new(s->base, -1, EV_PERSIST, stop_tick, s);
		if (!s->stop_ev) {
			__atomic_store_n(&s->done, 1, __ATOMIC_RELEASE); /* out of memory: end */
			return;
		}
		struct timeval tv = {0, STOP_POLL_MS * 1000};
		event_add(s->stop_ev, &tv);
		stop_tick(-1, 0, s);
	}
}

static void *serving_main(void *arg)
{
	serving_t *s = arg;
	char name[16];
	snprintf(name, sizeof(name), "pith-http%zu", (size_t)(s - s->ls->s));
	pthread_setname_np(pthread_self(), name);
	event_base_dispatch(s->base);
	render_gzip_thread_end();
	return NULL;
}

void http_loops_identity_sync(http_t *h)
{
	http_loops_t *ls = h->main->loops;
	if (!ls || __atomic_load_n(&ls->ident_gen, __ATOMIC_ACQUIRE) == h->ident_gen)
		return;
	pthread_mutex_lock(&ls->mu);
	render_identity_set(h->rd, ls->name, ls->operator_name, ls->contact);
	h->ident_gen = ls->ident_gen;
	pthread_mutex_unlock(&ls->mu);
}

/* ---- on the node's loop ------------------------------------------------------------- */

/* A serving loop's server on base, accepting on fd (taken). */
static http_t *serving_new(http_t *m, struct event_base *base, int fd, size_t n,
			   const http_opts_t *opts, pith_err_t *err)
{
	http_t *h = calloc(1, sizeof(*h));
	if (!h) {
		close(fd);
		pith_err_set(err, PITH_ENOMEM, "out of memory");
		return NULL;
	}
	h->main = m;
	h->base = base;
	h->store = m->store;
	h->o = m->o;
	h->o.render_threads = 0;
	h->o.loops = 0;
	/* the node's bounds, shared out */
	h->o.max_connections = m->o.max_connections / n ? m->o.max_connections / n : 1;
	h->o.max_buffered_bytes = m->o.max_buffered_bytes / n;
	if (h->o.max_buffered_bytes < h->o.max_body_bytes)
		h->o.max_buffered_bytes = h->o.max_body_bytes;
	h->o.max_queued_out = m->o.max_queued_out / n;
	/* only whether a read-through may be asked (http_resolve.c): the
	 * asking is relayed (http_want.c), no hook is called here */
	h->hooks.want = m->hooks.want;
	h->metrics = m->metrics;
	memcpy(h->relay_secret, m->relay_secret, sizeof(h->relay_secret));
	snprintf(h->listen_str, sizeof(h->listen_str), "%s", m->listen_str);
	snprintf(h->base_url, sizeof(h->base_url), "%s", m->base_url);
	h->port = m->port;
	h->jobs = idmap_new();
	h->waits = idmap_new();
	h->bodies = http_bodies_new();
	if (!h->jobs || !h->waits || !h->bodies || http_evh_new(h)) {
		close(fd);
		pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	h->bound = evhttp_accept_socket_with_handle(h->evh, fd); /* closes fd when freed */
	if (!h->bound) {
		close(fd);
		pith_err_set(err, PITH_EIO, "http: a serving loop cannot accept on %s", m->listen_str);
		goto fail;
	}
	http_accept_errors(h);
	if (http_conn_init(h)) {
		pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	http_metrics_init(h); /* the node's series: the registry finds them by name */
	http_opts_t ro = *opts;
	render_identity(m->rd, &ro.name, &ro.operator_name, &ro.contact);
	if (http_render_start(h, &ro, m->dates[0].t, err))
		goto fail;
	return h;
fail:
	http_free_(h);
	return NULL;
}

int http_loops_start(http_t *m, int fd, const http_opts_t *opts, pith_err_t *err)
{
	size_t n = (size_t)opts->loops;
	if (n > HTTP_LOOPS_MAX) {
		close(fd);
		return pith_err_set(err, PITH_EINVAL, "http: %zu serving loops, at most %d", n,
				    HTTP_LOOPS_MAX);
	}
	http_loops_t *ls = calloc(1, sizeof(*ls));
	if (!ls || !(ls->s = calloc(n, sizeof(*ls->s))) || pthread_mutex_init(&ls->mu, NULL)) {
		if (ls)
			free(ls->s);
		free(ls);
		close(fd);
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	}
	ls->main = m;
	m->loops = ls;
	int rc = 0;
	for (size_t k = 0; k < n; k++) {
		serving_t *s = &ls->s[k];
		s->ls = ls;
		int fk = dup(fd);
		if (fk < 0 || !(s->base = event_base_new())) {
			if (fk >= 0)
				close(fk);
			rc = pith_err_set(err, PITH_EIO, "http: cannot start serving loop %zu", k);
			break;
		}
		ls->n = k + 1;
		if (!(s->h = serving_new(m, s->base, fk, n, opts, err))) {
			rc = err->code ? err->code : PITH_EIO;
			break;
		}
		if (!(s->wake = loop_wake_new(s->base, serving_wake, s))) {
			rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
			break;
		}
	}
	close(fd);
	if (rc)
		return rc; /* http_free frees what was made */
	if (store_pool_start(&ls->threads, n, serving_main, ls->s, sizeof(serving_t)) != n)
		return pith_err_set(err, PITH_EIO, "http: cannot start %zu serving loop threads", n);
	log_info("http: %zu serving loops on %s", n, m->listen_str);
	return 0;
}

int http_loops_stop_wait(http_t *m)
{
	http_loops_t *ls = m->loops;
	if (!ls)
		return 0;
	if (!ls->stopping) {
		ls->stopping = 1;
		for (size_t k = 0; k < ls->n; k++) {
			if (!ls->s[k].wake) {
				ls->s[k].done = 1;
				continue;
			}
			__atomic_store_n(&ls->s[k].ask, 1, __ATOMIC_RELEASE);
			loop_wake_fire(ls->s[k].wake);
		}
	}
	for (size_t k = 0; k < ls->n; k++)
		if (!__atomic_load_n(&ls->s[k].done, __ATOMIC_ACQUIRE))
			return 1;
	return 0;
}

void http_loops_free(http_t *m)
{
	http_loops_t *ls = m->loops;
	if (!ls)
		return;
	for (size_t k = 0; k < ls->n; k++) {
		if (!ls->s[k].wake)
			continue;
		__atomic_store_n(&ls->s[k].ask, 2, __ATOMIC_RELEASE);
		loop_wake_fire(ls->s[k].wake);
	}
	store_pool_join(&ls->threads);
	for (size_t k = 0; k < ls->n; k++) {
		serving_t *s = &ls->s[k];
		if (s->stop_ev)
			event_free(s->stop_ev);
		http_free_(s->h);
		loop_wake_free(s->wake);
		if (s->base)
			event_base_free(s->base);
	}
	pthread_mutex_destroy(&ls->mu);
	free(ls->s);
	free(ls);
	m->loops = NULL;
}

void http_loops_identity(http_t *m, const char *name, const char *operator_name,
			 const char *contact)
{
	http_loops_t *ls = m->loops;
	if (!ls)
		return;
	pthread_mutex_lock(&ls->mu);
	snprintf(ls->name, sizeof(ls->name), "%s", name);
	snprintf(ls->operator_name, sizeof(ls->operator_name), "%s", operator_name);
	snprintf(ls->contact, sizeof(ls->contact), "%s", contact);
	__atomic_store_n(&ls->ident_gen, ls->ident_gen + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ls->mu);
}

size_t http_loops_conns(const http_t *m)
{
	const http_loops_t *ls = m->loops;
	size_t n = 0;
	for (size_t k = 0; ls && k < ls->n; k++)
		if (ls->s[k].h)
			n += __atomic_load_n(&ls->s[k].h->nconns_seen, __ATOMIC_RELAXED);
	return n;
}
