/* The render pool: the record documents resolved and rendered off the
 * loop thread.
 *
 * The loop parses and routes a request as before and checks its
 * identifier's syntax (http_resolve_plan: the 400s, and a bare body found
 * in the body cache), then hands the rest to one of a fixed number of
 * worker threads, each with its own render-only context (scratch buffers,
 * parsed target): the identifier's resolution in the store (a prefix
 * scan, most of a state.json request's time when the cache misses) and
 * the record's view (the store reads and the body building: the same
 * code `pithctl export --site --jobs N` runs in several threads). The
 * worker renders into the job's own buffer and queues the job as done; a
 * loop_wake (wake.h) wakes the loop, which sends the reply exactly as an inline
 * render would (http_send: 304, ETag, gzip and its cache, headers,
 * metrics). Workers never touch an evhttp object, the body cache, the
 * read-through or the metrics: those stay on the loop. So a job whose
 * record is not stored (an unknown identifier, or a full number not
 * stored while upstreams could be asked) comes back unrendered, and the
 * loop answers it anew as it would with no pool (http_handle_again); an
 * ambiguous identifier or a store error is answered by the worker (400,
 * 500: http_resolve_fail, as the loop would), not resolved again on the
 * loop, so a failed store read is made and counted once. A body the
 * worker found is added to the body cache when the loop sends the
 * reply.
 *
 * Bounded: at most HTTP_POOL_JOBS_PER_THREAD jobs per thread outstanding
 * (queued, rendering or done and not yet sent); past that the loop
 * renders inline, as with no pool, so a burst slows the loop down rather
 * than growing a queue or refusing requests. The costly documents of no
 * record (search, the change feed, the record lists: http_pool_is_costly)
 * come here too, so that a search running into its time budget holds a
 * worker, not the loop; they are bounded apart, per client address and
 * in total, and past that refused (503, Retry-After), never rendered on
 * the loop.
 *
 * At shutdown the node keeps its loop running until the requests it
 * accepted are answered (http_stop_wait): a job's reply is sent as
 * rendered; past the wait's bound, the jobs still waiting or rendering
 * are answered 503 at once (http_pool_refuse) and the workers' renders
 * of them are thrown away. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http_int.h"
#include "config.h"
#include "log.h"
#include "prio.h"
#include "store_pool.h"
#include "wake.h"

#define HTTP_POOL_JOBS_PER_THREAD 64
#define HTTP_POOL_THREADS_MAX 64
#define HTTP_POOL_KEEP_BUF (256u << 10) /* a recycled job keeps a body buffer this big */
/* Costly documents of no record (search, the change feed, the record
 * list) outstanding at once per thread in total (per client address:
 * http_opts_t.costly_per_addr; docs/http.md, "Limits"). */
#define HTTP_POOL_COSTLY_PER_THREAD 2
#define HTTP_POOL_PEER_MAX 64
/* The costly documents have a thread of their own ("pith-costly"), this
 * many nice steps below the loop, so that a search running into its time
 * budget takes neither a record document's thread nor the loop's CPU. */
#define HTTP_POOL_COSTLY_NICE 10

typedef struct render_job render_job_t;
struct render_job {
	render_job_t *next;
	render_job_t *oprev, *onext; /* outstanding jobs (the loop's list) */
	struct evhttp_request *req; /* the loop thread's only; NULL once refused */
	render_route_t route;
	int head;
	int64_t t0_us;
	http_want_answer_t rerun;   /* as the request's http_ctx_t */
	http_id_plan_t plan;        /* what the worker resolves */
	char pith[PITH_NUMBER_LEN + 1]; /* what it resolved to */
	int back;                   /* not resolved: the loop answers it anew */
	int costly;                 /* a document of no record (http_pool_submit_costly) */
	char peer[HTTP_POOL_PEER_MAX]; /* its client's address (costly only) */
	pith_buf_t in;              /* the request target, NUL, the Accept header, NUL */
	size_t accept_off;          /* 0: no Accept header */
	render_resp_t r;            /* what the view set */
	pith_buf_t body;            /* what it rendered */
};

typedef struct pool_worker {
	http_pool_t *pool;
	render_t *ctx;              /* this thread's render context */
	render_target_t target;     /* its parse of a job's target */
	uint64_t ident_gen;         /* the pool's ident_gen its context holds */
	int costly;                 /* takes the costly jobs only (the last worker) */
} pool_worker_t;

struct http_pool {
	http_t *h;
	pool_worker_t *w;
	size_t nw;                  /* the record documents' threads */
	size_t nall;                /* and the costly documents' one */
	store_pool_t threads;       /* thread i runs worker_main(&w[i]) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	render_job_t *head, *tail; /* waiting for a worker (under mu) */
	render_job_t *chead, *ctail; /* costly, waiting for theirs (under mu) */
	pthread_cond_t ccv;         /* signals the costly worker */
	render_job_t *done;         /* rendered, for the loop (under mu) */
	int signalled;              /* done was fired, not yet taken (under mu) */
	int stop;                   /* under mu */
	/* who the mirror is, for the workers' contexts (http_set_identity):
	 * a worker that took a job copies it when ident_gen moved (under mu) */
	uint64_t ident_gen;
	char name[HTTP_NAME_MAX + 1], operator_name[HTTP_NAME_MAX + 1];
	char contact[HTTP_CONTACT_MAX + 1];
	int64_t delay_us;           /* test only: PITH_TEST_RENDER_DELAY_MS before each job */
	loop_wake_t *done_wake;
	/* the loop thread's */
	size_t outstanding, max_outstanding;
	size_t costly, max_costly;  /* costly jobs outstanding, and their cap */
	render_job_t *out;          /* the outstanding jobs */
	int refused;                /* shutting down: takes no more jobs (http_pool_refuse) */
	uint64_t jobs, full, back; /* handed to the pool; turned away full; sent back */
	render_job_t *spare;        /* recycled jobs */
	size_t nspare;
};

static void job_free(render_job_t *j)
{
	if (!j)
		return;
	pith_buf_release(&j->in);
	pith_buf_release(&j->body);
	free(j);
}

/* ---- the workers ----------------------------------------------------------------- */

/* Resolves the job's identifier and renders what render_view_run renders
 * for it, into its buffer; or marks it back for the loop. The target was
 * parsed on the loop already; parsing it again here gives this thread its
 * own copy (the parsed form points into itself). */
static void job_render(pool_worker_t *w, render_job_t *j)
{
	pith_err_t err = {0};
	http_t *h = w->pool->h; /* only what does not change once it serves */
	int rc = j->costly ? 0 : http_resolve_plan_run(h->store, &j->plan, j->pith, &err);
	j->back = rc == PITH_ENOTFOUND;
	if (j->back)
		return;
	if (rc)
		j->pith[0] = 0; /* nothing for the body cache */
	const char *uri = (const char *)j->in.data, *why = "";
	http_ctx_t c = {.v = {.rd = w->ctx, .route = j->route}, .h = h, .t0_us = j->t0_us,
			.head = j->head};
	c.v.accept = j->accept_off ? uri + j->accept_off : NULL;
	c.v.t = &w->target;
	c.v.body = &j->body;
	pith_buf_reset(c.v.body);
	if (render_target_parse(uri, strlen(uri), c.v.t, &why)) {
		render_error(&c.v, 500, "request target: %s", why); /* the loop parsed it: cannot happen */
	} else if (rc) {
		http_resolve_fail(&c, j->plan.id, rc, &err);
	} else {
		c.v.r.status = 200;
		if (j->costly)
			render_view_run_global(&c.v);
		else if (j->route == RENDER_ROUTE_RESOLVE)
			http_view_resolve_answer(&c, j->pith);
		else
			render_view_run(&c.v, j->pith);
	}
	j->r = c.v.r;
}

static void *worker_main(void *arg)
{
	pool_worker_t *me = arg;
	http_pool_t *p = me->pool;
	char name[32]; /* < HTTP_POOL_THREADS_MAX workers: at most 15 bytes */
	if (me->costly)
		snprintf(name, sizeof(name), "pith-costly");
	else
		snprintf(name, sizeof(name), "pith-render%zu", (size_t)(me - p->w));
	pthread_setname_np(pthread_self(), name);
	if (me->costly)
		prio_lower_thread(0, HTTP_POOL_COSTLY_NICE); /* best effort */
	render_job_t **qh = me->costly ? &p->chead : &p->head;
	render_job_t **qt = me->costly ? &p->ctail : &p->tail;
	pthread_cond_t *cv = me->costly ? &p->ccv : &p->cv;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && !*qh)
			pthread_cond_wait(cv, &p->mu);
		if (p->stop)
			break;
		render_job_t *j = *qh;
		*qh = j->next;
		if (!*qh)
			*qt = NULL;
		if (me->ident_gen != p->ident_gen) {
			render_identity_set(me->ctx, p->name, p->operator_name, p->contact);
			me->ident_gen = p->ident_gen;
		}
		pthread_mutex_unlock(&p->mu);
		if (p->delay_us) {
			struct timespec ts = {p->delay_us / 1000000, p->delay_us % 1000000 * 1000};
			nanosleep(&ts, NULL);
		}
		job_render(me, j);
		pthread_mutex_lock(&p->mu);
		j->next = p->done;
		p->done = j;
		if (!p->signalled) {
			p->signalled = 1;
			loop_wake_fire(p->done_wake);
		}
	}
	pthread_mutex_unlock(&p->mu);
	render_gzip_thread_end();
	return NULL;
}

/* ---- the loop's side ------------------------------------------------------------- */

static void job_recycle(http_pool_t *p, render_job_t *j)
{
	if (p->nspare >= p->max_outstanding) {
		job_free(j);
		return;
	}
	if (j->body.cap > HTTP_POOL_KEEP_BUF)
		pith_buf_release(&j->body);
	pith_buf_reset(&j->body);
	pith_buf_reset(&j->in);
	j->req = NULL;
	j->next = p->spare;
	p->spare = j;
	p->nspare++;
}

/* Sends a rendered job's reply, as http_handle sends an inline render's. A
 * client that left meanwhile: evhttp_send_reply frees its request (and so
 * does the inline answer of a job handed back, once it is sent). */
static void job_finish(http_pool_t *p, render_job_t *j)
{
	p->outstanding--;
	if (j->costly)
		p->costly--;
	if (j->oprev)
		j->oprev->onext = j->onext;
	else
		p->out = j->onext;
	if (j->onext)
		j->onext->oprev = j->oprev;
	if (!j->req) {
		job_recycle(p, j); /* refused: answered already */
		return;
	}
	if (j->back) {
		p->back++;
		struct evhttp_request *req = j->req;
		int64_t t0 = j->t0_us;
		http_want_answer_t rerun = j->rerun;
		job_recycle(p, j);
		http_handle_again(p->h, req, t0, rerun);
		return;
	}
	if (j->plan.cache && j->pith[0])
		http_body_cache_add(p->h, j->pith);
	http_ctx_t c = {.v = {.rd = p->h->rd, .route = j->route, .r = j->r, .body = &j->body},
			.h = p->h, .req = j->req, .t0_us = j->t0_us, .head = j->head};
	http_send(&c);
	job_recycle(p, j);
}

/* Sends the replies of the jobs rendered so far. */
static void done_take(http_pool_t *p)
{
	/* the wake was taken before this call: a job queued after it either
	 * finds signalled still set (and is in the list taken below) or wakes
	 * us again */
	pthread_mutex_lock(&p->mu);
	render_job_t *j = p->done;
	p->done = NULL;
	p->signalled = 0;
	pthread_mutex_unlock(&p->mu);
	while (j) {
		render_job_t *nx = j->next;
		job_finish(p, j);
		j = nx;
	}
}

static void done_cb(void *arg)
{
	done_take(arg);
}

static int has_room(const http_pool_t *p)
{
	return p && !p->refused && p->outstanding < p->max_outstanding;
}

int http_pool_has_room(http_t *h)
{
	if (h->pool && !has_room(h->pool))
		h->pool->full++;
	return has_room(h->pool);
}

void http_pool_stats(const http_t *h, http_pool_stats_t *out)
{
	const http_pool_t *p = h->pool;
	memset(out, 0, sizeof(*out));
	if (!p)
		return;
	out->threads = p->nw;
	out->outstanding = p->outstanding;
	out->jobs = p->jobs;
	out->full = p->full;
	out->back = p->back;
}

static int submit(http_ctx_t *c, const http_id_plan_t *plan, const char *peer)
{
	http_t *h = c->h;
	http_pool_t *p = h->pool;
	render_job_t *j = p->spare;
	if (j) {
		p->spare = j->next;
		p->nspare--;
	} else if (!(j = calloc(1, sizeof(*j)))) {
		return -1;
	}
	const char *uri = evhttp_request_get_uri(c->req);
	pith_buf_puts(&j->in, uri);
	pith_buf_putc(&j->in, 0);
	j->accept_off = 0;
	if (c->v.accept) {
		j->accept_off = j->in.len;
		pith_buf_puts(&j->in, c->v.accept);
		pith_buf_putc(&j->in, 0);
	}
	if (j->in.oom) {
		job_free(j);
		return -1;
	}
	j->req = c->req;
	j->route = c->v.route;
	j->head = c->head;
	j->t0_us = c->t0_us;
	j->rerun = c->rerun;
	j->plan = *plan;
	j->pith[0] = 0;
	j->back = 0;
	j->costly = peer != NULL;
	if (peer)
		snprintf(j->peer, sizeof(j->peer), "%s", peer);
	p->costly += j->costly;
	j->next = NULL;
	j->oprev = NULL;
	j->onext = p->out;
	if (p->out)
		p->out->oprev = j;
	p->out = j;
	p->outstanding++;
	p->jobs++;
	pthread_mutex_lock(&p->mu);
	render_job_t **qh = j->costly ? &p->chead : &p->head;
	render_job_t **qt = j->costly ? &p->ctail : &p->tail;
	if (*qt)
		(*qt)->next = j;
	else
		*qh = j;
	*qt = j;
	pthread_cond_signal(j->costly ? &p->ccv : &p->cv);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int http_pool_submit(http_ctx_t *c, const http_id_plan_t *plan)
{
	if (!has_room(c->h->pool) || !c->req)
		return -1;
	return submit(c, plan, NULL);
}

int http_pool_is_costly(render_route_t r)
{
	switch (r) {
	case RENDER_ROUTE_SEARCH: case RENDER_ROUTE_SEARCH_API: case RENDER_ROUTE_CHANGES:
	case RENDER_ROUTE_RECORDS: case RENDER_ROUTE_LIST: return 1;
	default: return 0;
	}
}

static int costly_refuse(http_ctx_t *c, const char *why)
{
	render_error(&c->v, 503, "%s; try again shortly", why);
	c->v.r.retry_after = 1;
	return 1;
}

int http_pool_submit_costly(http_ctx_t *c)
{
	http_pool_t *p = c->h->pool;
	if (!p || p->refused || !c->req)
		return -1;
	const char *peer = http_client_addr(c->h, c->req); /* a serving loop's client's, relayed */
	if (p->costly >= p->max_costly || p->outstanding >= p->max_outstanding) {
		p->full++;
		return costly_refuse(c, "this mirror's readers are busy with costly requests");
	}
	size_t mine = 0;
	for (const render_job_t *j = p->out; j; j = j->onext)
		mine += j->costly && j->req && !strcmp(j->peer, peer);
	if (mine >= c->h->o.costly_per_addr) {
		p->full++;
		return costly_refuse(c, "too many costly requests from this address at once");
	}
	http_id_plan_t plan = {0};
	return submit(c, &plan, peer) ? -1 : 0;
}

/* Answers a job's request 503 now, whatever its worker does with it. */
static void job_refuse(http_pool_t *p, render_job_t *j)
{
	http_ctx_t c = {.v = {.rd = p->h->rd, .route = j->route, .body = &p->h->body},
			.h = p->h, .req = j->req, .t0_us = j->t0_us, .head = j->head};
	render_error(&c.v, 503, "shutting down");
	c.v.r.close = 1;
	http_send(&c);
	j->req = NULL;
}

void http_pool_refuse(http_t *h)
{
	http_pool_t *p = h->pool;
	if (!p || p->refused)
		return;
	p->refused = 1;
	done_take(p); /* what is rendered goes out as rendered */
	pthread_mutex_lock(&p->mu);
	render_job_t *q = p->head, *cq = p->chead;
	p->head = p->tail = NULL;
	p->chead = p->ctail = NULL;
	pthread_mutex_unlock(&p->mu);
	size_t n = 0;
	for (int k = 0; k < 2; k++) {
		for (render_job_t *j = k ? cq : q, *nx; j; j = nx) {
			nx = j->next;
			job_refuse(p, j);
			job_finish(p, j); /* no worker has it */
			n++;
		}
	}
	for (render_job_t *j = p->out; j; j = j->onext) {
		if (j->req) {
			job_refuse(p, j); /* being rendered: recycled when it is back */
			n++;
		}
	}
	if (n)
		log_warn("http: shutting down: %zu record documents not rendered in time, answered 503",
			 n);
}

size_t http_pool_owed(const http_t *h)
{
	size_t n = 0;
	for (const render_job_t *j = h->pool ? h->pool->out : NULL; j; j = j->onext)
		n += j->req != NULL;
	return n;
}

int http_pool_is_route(render_route_t r)
{
	switch (r) {
	case RENDER_ROUTE_PAGE: case RENDER_ROUTE_RECORD: case RENDER_ROUTE_BUNDLE: case RENDER_ROUTE_WELL_KNOWN:
	case RENDER_ROUTE_STATE: case RENDER_ROUTE_EVENTS: case RENDER_ROUTE_GRAPH: case RENDER_ROUTE_BIB: return 1;
	default: return 0;
	}
}

/* ---- start and stop --------------------------------------------------------------- */

int http_pool_start(http_t *h, int nthreads, pith_err_t *err)
{
	if (nthreads <= 0)
		return 0;
	if (nthreads > HTTP_POOL_THREADS_MAX)
		nthreads = HTTP_POOL_THREADS_MAX;
	http_pool_t *p = calloc(1, sizeof(*p));
	if (!p)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	p->h = h;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	pthread_cond_init(&p->ccv, NULL);
	p->delay_us = config_test_knob("PITH_TEST_RENDER_DELAY_MS", 60000) * 1000;
	h->pool = p; /* from here on http_pool_stop undoes what was done */
	p->max_outstanding = (size_t)nthreads * HTTP_POOL_JOBS_PER_THREAD;
	p->max_costly = (size_t)nthreads * HTTP_POOL_COSTLY_PER_THREAD;
	p->done_wake = loop_wake_new(h->base, done_cb, p);
	if (!p->done_wake)
		return pith_err_set(err, PITH_EIO, "http: render pool: a wake: %s", strerror(errno));
	p->w = calloc((size_t)nthreads + 1, sizeof(*p->w));
	if (!p->w)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	p->nw = (size_t)nthreads;
	p->nall = p->nw + 1;
	for (size_t i = 0; i < p->nall; i++) {
		pool_worker_t *w = &p->w[i];
		w->pool = p;
		w->costly = i == p->nw;
		if (!(w->ctx = render_clone(h->rd)))
			return pith_err_set(err, PITH_ENOMEM, "out of memory");
	}
	if (store_pool_start(&p->threads, p->nall, worker_main, p->w, sizeof(*p->w)) < p->nall)
		return pith_err_set(err, PITH_EIO, "http: render pool: cannot start its threads");
	return 0;
}

/* Here rather than in http.c because the pool's threads are what make it
 * more than a copy: each worker's context has its own copy of the names,
 * refreshed from the pool's under its lock when the worker takes its next
 * job, so a reload never writes a string a worker is reading. */
void http_set_identity(http_t *h, const char *name, const char *operator_name,
		       const char *contact)
{
	render_identity_set(h->rd, name, operator_name, contact);
	const char *nm, *op, *ct; /* as the loop's context cut them */
	render_identity(h->rd, &nm, &op, &ct);
	http_loops_identity(h, nm, op, ct);
	http_pool_t *p = h->pool;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	snprintf(p->name, sizeof(p->name), "%s", nm);
	snprintf(p->operator_name, sizeof(p->operator_name), "%s", op);
	snprintf(p->contact, sizeof(p->contact), "%s", ct);
	p->ident_gen++;
	pthread_mutex_unlock(&p->mu);
}

/* A job never sent: its request is evhttp's to free with the connection,
 * unless the client left (then it is ours, as in http_post_drop_all). */
static void job_drop(render_job_t *j)
{
	if (j->req && !evhttp_request_get_connection(j->req))
		evhttp_request_free(j->req);
	job_free(j);
}

void http_pool_stop(http_t *h)
{
	http_pool_t *p = h->pool;
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_cond_broadcast(&p->ccv);
	pthread_mutex_unlock(&p->mu);
	store_pool_join(&p->threads);
	for (size_t i = 0; i < p->nall; i++)
		render_free_(p->w[i].ctx);
	/* every job is now waiting or done: neither will be sent (after
	 * http_pool_refuse none has a request: all were answered) */
	for (render_job_t *j = p->head, *nx; j; j = nx) {
		nx = j->next;
		job_drop(j);
	}
	for (render_job_t *j = p->chead, *nx; j; j = nx) {
		nx = j->next;
		job_drop(j);
	}
	for (render_job_t *j = p->done, *nx; j; j = nx) {
		nx = j->next;
		job_drop(j);
	}
	for (render_job_t *j = p->spare, *nx; j; j = nx) {
		nx = j->next;
		job_free(j);
	}
	loop_wake_free(p->done_wake);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	pthread_cond_destroy(&p->ccv);
	free(p->w);
	free(p);
	h->pool = NULL;
}
