/* The pipeline: validator threads, the writer, and the hand-back. Three
 * queues under one mutex: FIFOs to the validators and back to the
 * deliverer, and the validated jobs in submission order for the writer. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "ingest_core.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "prio.h"
#include "store_pool.h"

#define WRITER_BATCH_MAX 2048 /* single jobs per commit */

typedef struct jq {
	ingest_job_t *head, *tail;
	size_t n;
} jq_t;

static void jq_push(jq_t *q, ingest_job_t *j)
{
	j->next = NULL;
	j->prev = q->tail;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->n++;
}

/* Puts j into q, which is kept in seq order: from the tail, where it
 * nearly always goes (validators finish nearly in submission order). */
static void jq_insert_seq(jq_t *q, ingest_job_t *j)
{
	ingest_job_t *after = q->tail;
	while (after && after->seq > j->seq)
		after = after->prev;
	j->prev = after;
	j->next = after ? after->next : q->head;
	if (j->next)
		j->next->prev = j;
	else
		q->tail = j;
	if (after)
		after->next = j;
	else
		q->head = j;
	q->n++;
}

static ingest_job_t *jq_pop(jq_t *q)
{
	ingest_job_t *j = q->head;
	if (j) {
		q->head = j->next;
		if (q->head)
			q->head->prev = NULL;
		else
			q->tail = NULL;
		q->n--;
		j->next = j->prev = NULL;
	}
	return j;
}

struct ingest_core {
	ingest_opts_t o;        /* but trace_path */
	FILE *trace;
	store_batch_t *batch;   /* the writer's, reused commit after commit */

	pthread_mutex_t mu;     /* guards the three queues, stop flags, stats */
	pthread_cond_t vwake;   /* validators */
	pthread_cond_t wwake;   /* writer */
	pthread_cond_t dwake;   /* ingest_core_wait */
	jq_t vq, wq, dq;        /* wq: in seq order, rejected jobs too */
	uint64_t submitted_seq; /* the next job's seq */
	uint64_t write_seq;     /* the writer takes that seq next */
	int stop_validators, stop_writer;
	int group_failed;       /* a group's commit failed: commit no later one */
	int writing;            /* the writer is committing */
	store_pool_t validators; /* running validator_main */
	pthread_t wth;          /* the one writer: a thread of its own role */
	int writer_started;
	size_t in_flight;       /* delivering thread only */
	/* validations running with o.trust, and with trust stores that
	 * ingest_core_set_trust replaced (which their owner frees once this
	 * is 0: ingest_core_trust_retired) */
	size_t trust_users, retired_users;
	ingest_stats_t stats;
	int64_t delay_us_per_kib; /* test only: PITH_TEST_VALIDATE_US_PER_KIB */
};

/* ---- validation (validator threads, and a waiting submitter) ----------------- */

/* Names the calling worker thread (top -H, /proc) and lowers its CPU
 * priority nice steps below the submitter's (docs/pithd.md, worker_nice). */
static void worker_start(ingest_core_t *c, const char *name, int nice)
{
	pthread_setname_np(pthread_self(), name);
	if (prio_lower_thread(0, nice))
		log_warn("cannot lower the priority of the %s thread: %s", name, strerror(errno));
}

/* Takes up to INGEST_VALIDATE_BATCH jobs off the validators' queue: a lone
 * event is not held back to wait for others, and the other validators take
 * what arrives meanwhile (taking only a fair share of the queue made smaller
 * batches and a slower sync, docs/performance.md at 262f3c4). Lock held. */
static size_t take_to_validate(ingest_core_t *c, ingest_job_t **js)
{
	size_t n = 0;
	while (n < INGEST_VALIDATE_BATCH && c->vq.head)
		js[n++] = jq_pop(&c->vq);
	return n;
}

/* Validates js unlocked, then queues them for the writer, rejected ones
 * too: it takes jobs in submission order and must see every seq go by.
 * Called and returns with the lock held. */
static void validate_and_pass(ingest_core_t *c, ingest_job_t **js, size_t n)
{
	/* the trust store of this batch, held until it is validated (a reload
	 * may replace it meanwhile: ingest_core_set_trust) */
	const pith_trust_t *trust = c->o.trust;
	c->trust_users++;
	pthread_mutex_unlock(&c->mu);
	if (c->delay_us_per_kib) {
		size_t bytes = 0;
		for (size_t i = 0; i < n; i++)
			bytes += js[i]->len;
		int64_t us = (int64_t)(bytes >> 10) * c->delay_us_per_kib;
		struct timespec ts = {us / 1000000, us % 1000000 * 1000};
		nanosleep(&ts, NULL);
	}
	ingest_validate(trust, c->o.max_bundle_bytes, js, n);
	pthread_mutex_lock(&c->mu);
	if (trust == c->o.trust)
		c->trust_users--;
	else
		c->retired_users--;
	c->stats.validate_batches++;
	int wake = 0;
	for (size_t i = 0; i < n; i++) {
		ingest_job_t *j = js[i];
		if (j->rc)
			c->stats.invalid++;
		else
			c->stats.validated++;
		jq_insert_seq(&c->wq, j);
		/* a group is written whole: the writer waits for its last job */
		if (!j->group || ++j->group->validated == j->group->n)
			wake = 1;
	}
	if (wake)
		pthread_cond_signal(&c->wwake);
}

static void *validator_main(void *arg)
{
	ingest_core_t *c = arg;
	worker_start(c, "pith-validate", c->o.worker_nice + c->o.validator_nice);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->vq.head && !c->stop_validators)
			pthread_cond_wait(&c->vwake, &c->mu);
		if (c->stop_validators)
			break;
		ingest_job_t *js[INGEST_VALIDATE_BATCH];
		size_t n = take_to_validate(c, js);
		validate_and_pass(c, js, n);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---- the writer --------------------------------------------------------------- */

static int64_t now_us(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* Wakes whoever delivers. Lock held. */
static void notify(ingest_core_t *c)
{
	if (c->o.notify)
		c->o.notify(c->o.notify_arg);
	pthread_cond_broadcast(&c->dwake);
}

/* Fills the outcomes of the jobs (a list) that were not rejected after
 * batch b committed (rc 0) or failed to (rc, err). */
static void read_outcomes(ingest_core_t *c, ingest_job_t *jobs, int rc, const pith_err_t *err)
{
	int64_t t = now_us();
	for (ingest_job_t *j = jobs; j; j = j->next) {
		if (j->rc)
			continue;
		int idx = j->index;
		if (rc) {
			ingest_job_reject(j, INGEST_FAIL_COMMIT, rc, err->msg);
		} else if (j->kind == INGEST_EVENT) {
			j->outcome = store_batch_outcome(c->batch, idx);
			if (j->outcome == STORE_STORED && c->trace) {
				char hex[65];
				pith_hex_encode(j->id, 32, hex);
				fprintf(c->trace, "%lld %s\n", (long long)t, hex);
			}
		} else {
			j->outcome = STORE_STORED;
			j->bundle_outcome = store_batch_bundle_outcome(c->batch, idx);
			j->bundle_replaced = store_batch_bundle_replaced(c->batch, idx, &j->old_built_us,
									 j->old_sha);
		}
	}
	if (c->trace)
		fflush(c->trace);
}

static size_t count_valid(const ingest_job_t *jobs)
{
	size_t n = 0;
	for (; jobs; jobs = jobs->next)
		n += !jobs->rc;
	return n;
}

/* Commits the valid jobs of a list (a group g, or single jobs when g is
 * NULL) as one batch; fills their outcomes, and g's. */
static void write_batch(ingest_core_t *c, ingest_job_t *jobs, ingest_group_t *g)
{
	pith_err_t err = {0};
	int rc = 0;
	if (g && c->group_failed)
		rc = pith_err_set(&err, PITH_EIO, "not committed: an earlier group failed to commit");
	for (ingest_job_t *j = jobs; j && !rc; j = j->next) {
		if (j->rc)
			continue;
		if (j->durable)
			store_batch_need_durable(c->batch);
		int idx;
		if (j->ev) {
			idx = store_batch_add_event(c->batch, j->ev, &j->canon, &err);
			j->ev = NULL; /* the batch owns it now */
		} else {
			idx = store_batch_add_bundle(c->batch, j->doc, &err);
			j->doc = NULL;
		}
		if (idx < 0) /* verified input the store still refuses: this item only */
			ingest_job_reject(j, INGEST_FAIL_STORE, idx, err.msg);
		j->index = idx;
	}
	store_commit_stats_t stats = {0};
	size_t nvalid = count_valid(jobs);
	if (!rc)
		rc = store_batch_commit(c->batch, &stats, &err);
	read_outcomes(c, jobs, rc, &err);
	if (g) {
		/* the group's owner reports its failure */
		g->rc = rc;
		snprintf(g->msg, sizeof(g->msg), "%s", rc ? err.msg : "");
		g->stats = stats;
		if (rc)
			c->group_failed = 1;
	} else if (rc) {
		/* a full disk fails every commit until space returns: the jobs
		 * fail (their submitters are told; peers' events come again by
		 * sync), the store counts each failure, the log says it now
		 * and then (docs/store.md, "Failures") */
		static log_rl_t rl;
		log_rl(&rl, LOG_ERROR, "store: a batch commit failed (%zu jobs not stored): %s",
		       nvalid, err.msg);
	}
	pthread_mutex_lock(&c->mu);
	c->stats.committed_batches++;
	if (rc)
		c->stats.store_errors++;
	c->stats.written += rc ? 0 : stats.stored;
	c->stats.states += rc ? 0 : stats.records_touched;
	pthread_mutex_unlock(&c->mu);
}

/* Is the writer's next job validated, and all of its group? Lock held. */
static int write_ready(const ingest_core_t *c)
{
	const ingest_job_t *h = c->wq.head;
	return h && h->seq == c->write_seq && (!h->group || h->group->validated == h->group->n);
}

/* Takes the jobs of the group at the head of the writer's queue: all of
 * it when it is ready, what is there at shutdown. Lock held. */
static ingest_job_t *take_group(ingest_core_t *c, ingest_group_t *g)
{
	ingest_job_t *first = NULL, *last = NULL;
	while (c->wq.head && c->wq.head->group == g) {
		ingest_job_t *j = jq_pop(&c->wq);
		c->write_seq = j->seq + 1;
		if (last)
			last->next = j;
		else
			first = j;
		last = j;
	}
	return first;
}

/* Takes single jobs in submission order (at shutdown, whatever is there)
 * for one commit: a group commit of everything that arrived while the last
 * commit was syncing. Rejected ones go straight back. Lock held. */
static ingest_job_t *take_singles(ingest_core_t *c)
{
	ingest_job_t *first = NULL, *last = NULL;
	size_t n = 0, rejected = 0;
	while (c->wq.head && !c->wq.head->group && n < WRITER_BATCH_MAX &&
	       (c->wq.head->seq == c->write_seq || c->stop_writer)) {
		ingest_job_t *j = jq_pop(&c->wq);
		c->write_seq = j->seq + 1;
		if (j->rc) {
			jq_push(&c->dq, j);
			rejected++;
			continue;
		}
		if (last)
			last->next = j;
		else
			first = j;
		last = j;
		n++;
	}
	if (rejected)
		notify(c);
	return first;
}

/* Puts a list on the queue back to the deliverer. Lock held. */
static void hand_back(ingest_core_t *c, ingest_job_t *jobs)
{
	for (ingest_job_t *j = jobs; j;) {
		ingest_job_t *nx = j->next;
		jq_push(&c->dq, j);
		j = nx;
	}
	notify(c);
}

static void drop_group(ingest_job_t *jobs, ingest_group_t *g)
{
	for (ingest_job_t *j = jobs; j; j = j->next)
		if (!j->rc)
			ingest_job_reject(j, INGEST_FAIL_SHUTDOWN, PITH_EIO,
					  "the pipeline stopped before committing it");
	g->rc = PITH_EIO;
	snprintf(g->msg, sizeof(g->msg), "the pipeline stopped before committing it");
}

static void *writer_main(void *arg)
{
	ingest_core_t *c = arg;
	worker_start(c, "pith-writer", c->o.worker_nice);
	/* the lanes take the writer's lowered priority: started from here */
	pith_err_t err = {0};
	int lanes = c->o.merge_lanes ? c->o.merge_lanes : c->o.nthreads;
	if (store_batch_set_lanes(c->batch, lanes, &err))
		log_warn("the writer merges alone: %s", err.msg);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		/* jobs in submission order: a node catching up is sent events
		 * in time order, and keeping it lets RocksDB move the flushed
		 * documents down instead of rewriting them (docs/store.md). At
		 * shutdown the validators leave jobs unvalidated: the rest is
		 * taken as it is. */
		while (!c->stop_writer && !write_ready(c))
			pthread_cond_wait(&c->wwake, &c->mu);
		if (!c->wq.head && c->stop_writer)
			break;
		ingest_group_t *g = c->wq.head->group;
		int whole = g && !c->stop_writer && write_ready(c);
		ingest_job_t *jobs = g ? take_group(c, g) : take_singles(c);
		if (!jobs)
			continue;
		if (g && !whole) {
			drop_group(jobs, g);
		} else {
			c->writing = 1;
			pthread_mutex_unlock(&c->mu);
			write_batch(c, jobs, g);
			pthread_mutex_lock(&c->mu);
			c->writing = 0;
		}
		hand_back(c, jobs);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---- the submitter's side ------------------------------------------------------- */

ingest_core_t *ingest_core_new(const ingest_opts_t *opts)
{
	ingest_core_t *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->o = *opts;
	c->o.trace_path = NULL;
	/* test only (adversarial_relay): validators slower than any sender,
	 * so that the validation budget's hold is seen on every machine */
	c->delay_us_per_kib = config_test_knob("PITH_TEST_VALIDATE_US_PER_KIB", 100000);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->vwake, NULL);
	pthread_cond_init(&c->wwake, NULL);
	pthread_cond_init(&c->dwake, NULL);
	c->batch = store_batch_new(opts->st);
	if (!c->batch)
		goto fail;
	if (opts->trace_path && *opts->trace_path) {
		c->trace = fopen(opts->trace_path, "a");
		if (!c->trace) {
			log_error("cannot open trace file %s", opts->trace_path);
			goto fail;
		}
	}
	size_t nv = opts->nthreads > 0 ? (size_t)opts->nthreads : 0;
	if (store_pool_start(&c->validators, nv, validator_main, c, 0) < nv)
		goto fail;
	if (pthread_create(&c->wth, NULL, writer_main, c))
		goto fail;
	c->writer_started = 1;
	return c;
fail:
	ingest_core_free(c);
	return NULL;
}

/* Lock held. */
static void submit_locked(ingest_core_t *c, ingest_job_t *j)
{
	j->seq = c->submitted_seq++;
	jq_push(&c->vq, j);
}

void ingest_core_submit(ingest_core_t *c, ingest_job_t *job)
{
	c->in_flight++;
	job->group = NULL;
	pthread_mutex_lock(&c->mu);
	c->stats.submitted++;
	submit_locked(c, job);
	pthread_cond_signal(&c->vwake);
	pthread_mutex_unlock(&c->mu);
}

void ingest_core_submit_group(ingest_core_t *c, ingest_group_t *g, ingest_job_t *const *jobs,
			      size_t n)
{
	memset(g, 0, sizeof(*g));
	g->n = n;
	c->in_flight += n;
	for (size_t i = 0; i < n; i++)
		jobs[i]->group = g;
	pthread_mutex_lock(&c->mu);
	c->stats.submitted += n;
	for (size_t i = 0; i < n; i++)
		submit_locked(c, jobs[i]);
	pthread_cond_broadcast(&c->vwake);
	pthread_mutex_unlock(&c->mu);
}

size_t ingest_core_deliver(ingest_core_t *c)
{
	pthread_mutex_lock(&c->mu);
	jq_t q = c->dq;
	c->dq = (jq_t){0};
	pthread_mutex_unlock(&c->mu);
	size_t n = 0;
	ingest_job_t *j;
	while ((j = jq_pop(&q))) {
		c->in_flight--;
		n++;
		c->o.on_done(c->o.done_arg, j);
	}
	return n;
}

void ingest_core_wait(ingest_core_t *c)
{
	pthread_mutex_lock(&c->mu);
	while (!c->dq.head) {
		/* not while the writer commits: the commit is the slowest
		 * stage when records are small (docs/performance.md at 262f3c4, issue 13),
		 * and a third busy thread would take a share of its core */
		ingest_job_t *js[INGEST_VALIDATE_BATCH];
		size_t n = c->writing ? 0 : take_to_validate(c, js);
		if (n)
			validate_and_pass(c, js, n);
		else
			pthread_cond_wait(&c->dwake, &c->mu);
	}
	pthread_mutex_unlock(&c->mu);
}

size_t ingest_core_in_flight(const ingest_core_t *c)
{
	return c->in_flight;
}

void ingest_core_set_trust(ingest_core_t *c, const pith_trust_t *trust)
{
	pthread_mutex_lock(&c->mu);
	if (trust != c->o.trust) {
		c->o.trust = trust;
		c->retired_users += c->trust_users;
		c->trust_users = 0;
	}
	pthread_mutex_unlock(&c->mu);
}

int ingest_core_trust_retired(ingest_core_t *c)
{
	pthread_mutex_lock(&c->mu);
	int done = c->retired_users == 0;
	pthread_mutex_unlock(&c->mu);
	return done;
}

void ingest_core_stats_get(ingest_core_t *c, ingest_stats_t *out)
{
	pthread_mutex_lock(&c->mu);
	*out = c->stats;
	out->queued_validate = c->vq.n;
	out->queued_write = c->wq.n;
	pthread_mutex_unlock(&c->mu);
}

void ingest_core_free_(ingest_core_t *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop_validators = 1;
	pthread_cond_broadcast(&c->vwake);
	pthread_mutex_unlock(&c->mu);
	store_pool_join(&c->validators);
	/* validators are gone: the writer drains what they passed on */
	pthread_mutex_lock(&c->mu);
	c->stop_writer = 1;
	pthread_cond_signal(&c->wwake);
	pthread_mutex_unlock(&c->mu);
	if (c->writer_started)
		pthread_join(c->wth, NULL);
	/* never started: hand back as dropped */
	ingest_job_t *j;
	while ((j = jq_pop(&c->vq))) {
		if (!j->rc)
			ingest_job_reject(j, INGEST_FAIL_SHUTDOWN, PITH_EIO,
					  "the node shut down before validating it");
		if (j->group && !j->group->rc) {
			j->group->rc = PITH_EIO;
			snprintf(j->group->msg, sizeof(j->group->msg), "the pipeline stopped");
		}
		jq_push(&c->dq, j);
	}
	if (c->o.on_done)
		ingest_core_deliver(c);
	if (c->trace)
		fclose(c->trace);
	store_batch_free(c->batch);
	pthread_cond_destroy(&c->vwake);
	pthread_cond_destroy(&c->wwake);
	pthread_cond_destroy(&c->dwake);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
