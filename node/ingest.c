/* Validators, the writer, and the hand-back to the loop. Three queues
 * under one mutex: FIFOs to the validators and back to the loop, and the
 * validated jobs in submission order for the writer. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "ingest.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "bundle.h"
#include "log.h"
#include "prio.h"

#define WRITER_BATCH_MAX 2048 /* items per commit */

typedef struct jq {
	ingest_job_t *head, *tail;
	size_t n;
} jq_t;

#define VALIDATE_BATCH 16 /* jobs a validator takes at once */

static void jq_push(jq_t *q, ingest_job_t *j)
{
	j->next = NULL;
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

struct ingest {
	const pith_trust_t *trust;
	store_t *st;
	size_t max_bundle_bytes;
	FILE *trace;
	int worker_nice;        /* added to the loop's nice value in every thread here */
	ingest_done_fn on_done;
	void *arg;

	pthread_mutex_t mu;     /* guards the three queues, stop flags, stats */
	pthread_cond_t vwake;   /* validators */
	pthread_cond_t wwake;   /* writer */
	jq_t vq, wq, dq;        /* wq: in seq order, rejected jobs too */
	uint64_t submitted_seq; /* the next job's seq */
	uint64_t write_seq;     /* the writer takes that seq next */
	int stop_validators, stop_writer;
	pthread_t *vth;
	int nv;
	pthread_t wth;
	int writer_started;
	struct event *done_ev;
	size_t in_flight;       /* loop thread only */
	ingest_stats_t stats;
};

ingest_job_t *ingest_job_new(ingest_kind_t kind, const uint8_t *bytes, size_t len)
{
	ingest_job_t *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->kind = kind;
	j->bytes = malloc(len ? len : 1);
	if (!j->bytes) {
		free(j);
		return NULL;
	}
	memcpy(j->bytes, bytes, len);
	j->len = len;
	return j;
}

void ingest_job_free_(ingest_job_t *j)
{
	if (!j)
		return;
	free(j->bytes);
	free(j->event_ids);
	free(j->event_created_us);
	pith_event_free(j->ev);
	pith_buf_release(&j->canon);
	json_doc_free(j->doc);
	free(j);
}

/* ---- validation (validator threads) ----------------------------------------- */

static void job_reject(ingest_job_t *j, int rc, const char *reason, const char *msg)
{
	j->rc = rc ? rc : PITH_EINVAL;
	j->reason = reason;
	snprintf(j->msg, sizeof(j->msg), "%s", msg);
}

static const char *check_reason(pith_event_check_t c)
{
	switch (c) {
	case PITH_CHECK_JSON: return "json";
	case PITH_CHECK_SHAPE: return "shape";
	case PITH_CHECK_CONTENT_HASH: return "content_hash";
	case PITH_CHECK_EVENT_ID: return "event_id";
	case PITH_CHECK_KEY: return "untrusted_key";
	case PITH_CHECK_ROTATED: return "rotated_key";
	case PITH_CHECK_SIGNATURE: return "signature";
	default: return "invalid";
	}
}

/* Parses and checks an event but its signature, which it prepares in
 * *sc. 1 when the signature is left to check, 0 when the job is done
 * (rejected). */
static int validate_event_begin(ingest_t *in, ingest_job_t *j, pith_sig_check_t *sc)
{
	pith_err_t err = {0};
	pith_event_check_t failed = PITH_CHECK_OK;
	int rc = pith_event_parse_deferred(j->bytes, j->len, in->trust, &j->ev, &failed, &err, sc);
	if (rc) {
		j->check = failed;
		job_reject(j, rc, check_reason(failed), err.msg);
		return 0;
	}
	return 1;
}

/* The rest, once the signature check has run. */
static void validate_event_end(ingest_t *in, ingest_job_t *j, const pith_sig_check_t *sc)
{
	pith_err_t err = {0};
	pith_event_check_t failed = PITH_CHECK_OK;
	int rc = pith_event_sig_result(j->ev, sc, &failed, &err);
	if (rc) {
		j->check = failed;
		job_reject(j, rc, check_reason(failed), err.msg);
		pith_event_free(j->ev);
		return;
	}
	memcpy(j->id, j->ev->content_hash, 32);
	if (j->has_claim && memcmp(j->id, j->claimed_id, 32)) {
		job_reject(j, PITH_EMISMATCH, "id_mismatch",
			   "the event's id is not the one it was sent as");
		pith_event_free(j->ev);
		return;
	}
	snprintf(j->subject, sizeof(j->subject), "%s", j->ev->subject);
	j->created_us = j->ev->created_us;
	j->is_record_created = !strcmp(j->ev->event_type, "record_created");
	if (j->is_record_created)
		pith_receipt_precheck(j->ev, in->trust);
	if (pith_event_canon(j->ev, &j->canon)) {
		job_reject(j, PITH_ENOMEM, "oom", "out of memory writing canonical bytes");
		pith_event_free(j->ev);
	}
}

static void validate_bundle(ingest_t *in, ingest_job_t *j)
{
	pith_err_t err = {0};
	json_limits_t lim = {in->max_bundle_bytes, PITH_EVENT_MAX_DEPTH + 8, JSON_MAX_INT_DIGITS};
	if (json_parse(&j->doc, j->bytes, j->len, &lim, &err)) {
		job_reject(j, err.code, "json", err.msg);
		return;
	}
	const json_value_t *root = json_doc_root(j->doc);
	if (pith_doc_kind(root) != PITH_DOC_BUNDLE) {
		job_reject(j, PITH_EINVAL, "not_a_bundle", "not a pith_open_graph_bundle");
		return;
	}
	pith_report_t rep = {0};
	if (pith_bundle_verify(root, in->trust, &rep)) {
		const char *first = "?";
		for (size_t i = 0; i < rep.n; i++)
			if (!rep.checks[i].ok) {
				first = rep.checks[i].name;
				break;
			}
		char m[240];
		snprintf(m, sizeof(m), "bundle check %s failed (%zu failed)", first, rep.failed);
		/* signed by keys this node does not trust: a configuration
		 * difference, as for events (relay.c remembers the hash) */
		int untrusted = pith_report_is_untrusted_only(&rep);
		pith_report_release(&rep);
		job_reject(j, PITH_EMISMATCH, untrusted ? "untrusted_key" : "bundle", m);
		if (untrusted)
			j->has_sha = pith_bundle_hash(root, j->sha) == 0;
		return;
	}
	pith_report_release(&rep);
	const char *pith = json_get_str(root, "pith_number");
	const char *built = json_get_str(root, "built_at");
	if (!pith || !pith_number_is_valid(pith) || !built || pith_time_parse(built, &j->built_us)) {
		job_reject(j, PITH_EINVAL, "shape", "bundle without a pith_number or built_at");
		return;
	}
	snprintf(j->subject, sizeof(j->subject), "%s", pith);
	if (j->has_claim && strcmp(pith, j->claimed_pith)) {
		job_reject(j, PITH_EMISMATCH, "id_mismatch",
			   "the bundle is not for the pith number it was sent as");
		return;
	}
	pith_bundle_hash(root, j->sha);
	j->has_sha = 1;
	const json_value_t *evs = json_get_type(root, "events", JSON_ARRAY);
	size_t n = evs ? evs->len : 0;
	j->event_ids = malloc(n ? n * 32 : 1);
	j->event_created_us = malloc(n ? n * sizeof(int64_t) : 1);
	if (!j->event_ids || !j->event_created_us) {
		job_reject(j, PITH_ENOMEM, "oom", "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *id = json_get_str(evs->u.items[i], "event_id");
		const char *created = json_get_str(evs->u.items[i], "created_at");
		int64_t us = 0;
		/* verified above: "sha256:" + 64 hex, and a valid created_at */
		if (id && strlen(id) == PITH_EVENT_ID_LEN && created && !pith_time_parse(created, &us) &&
		    !pith_hex_decode(id + 7, 64, j->event_ids + 32 * j->n_event_ids, 32))
			j->event_created_us[j->n_event_ids++] = us;
	}
}

/* Names the calling worker thread (top -H, /proc) and lowers its CPU
 * priority below the loop's (docs/pithd.md, worker_nice). */
static void worker_start(ingest_t *in, const char *name)
{
	pthread_setname_np(pthread_self(), name);
	if (prio_lower_thread(0, in->worker_nice))
		log_warn("cannot lower the priority of the %s thread: %s", name, strerror(errno));
}

/* Validates a handful of jobs: events' signatures are checked together
 * (pith_sig_check_many), which shares the last step of each verification. */
static void validate_jobs(ingest_t *in, ingest_job_t **js, size_t n)
{
	pith_sig_check_t sc[VALIDATE_BATCH];
	ingest_job_t *pending[VALIDATE_BATCH];
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (js[i]->kind != INGEST_EVENT)
			validate_bundle(in, js[i]);
		else if (validate_event_begin(in, js[i], &sc[m]))
			pending[m++] = js[i];
	}
	pith_sig_check_many(sc, m);
	for (size_t i = 0; i < m; i++)
		validate_event_end(in, pending[i], &sc[i]);
}

static void *validator_main(void *arg)
{
	ingest_t *in = arg;
	worker_start(in, "pith-validate");
	pthread_mutex_lock(&in->mu);
	for (;;) {
		while (!in->vq.head && !in->stop_validators)
			pthread_cond_wait(&in->vwake, &in->mu);
		if (in->stop_validators)
			break;
		/* up to VALIDATE_BATCH at once: a lone event is not held back
		 * to wait for others, and the other validators take what
		 * arrives meanwhile (taking only a fair share of the queue made
		 * smaller batches and a slower sync, docs/performance.md) */
		ingest_job_t *js[VALIDATE_BATCH];
		size_t n = 0;
		while (n < VALIDATE_BATCH && in->vq.head)
			js[n++] = jq_pop(&in->vq);
		pthread_mutex_unlock(&in->mu);
		validate_jobs(in, js, n);
		pthread_mutex_lock(&in->mu);
		/* rejected ones too: the writer takes jobs in submission
		 * order and must see every seq go by */
		for (size_t i = 0; i < n; i++) {
			ingest_job_t *j = js[i];
			if (j->rc)
				in->stats.invalid++;
			else
				in->stats.validated++;
			jq_insert_seq(&in->wq, j);
		}
		pthread_cond_signal(&in->wwake);
	}
	pthread_mutex_unlock(&in->mu);
	return NULL;
}

/* ---- the writer --------------------------------------------------------------- */

static int64_t now_us(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* Commits jobs (a list) as one batch; fills their outcomes. */
static void write_batch(ingest_t *in, ingest_job_t *jobs)
{
	pith_err_t err = {0};
	store_batch_t *b = store_batch_new(in->st);
	int rc = b ? 0 : PITH_ENOMEM;
	for (ingest_job_t *j = jobs; j && !rc; j = j->next) {
		int idx;
		if (j->kind == INGEST_EVENT) {
			idx = store_batch_add_event(b, j->ev, &j->canon, &err);
			j->ev = NULL; /* the batch owns it now */
		} else {
			idx = store_batch_add_bundle(b, j->doc, &err);
			j->doc = NULL;
		}
		if (idx < 0) {
			/* verified input the store still refuses: this item only */
			j->rc = idx;
			j->reason = "store";
			snprintf(j->msg, sizeof(j->msg), "%s", err.msg);
		}
		j->index = idx;
	}
	store_commit_stats_t stats = {0};
	if (!rc)
		rc = store_batch_commit(b, &stats, &err);
	int64_t t = now_us();
	for (ingest_job_t *j = jobs; j; j = j->next) {
		if (j->rc)
			continue;
		int idx = j->index;
		if (rc) {
			j->rc = rc;
			j->reason = "store";
			snprintf(j->msg, sizeof(j->msg), "%s", err.msg);
			continue;
		}
		if (j->kind == INGEST_EVENT) {
			j->outcome = store_batch_outcome(b, idx);
			if (j->outcome == STORE_STORED && in->trace) {
				char hex[65];
				pith_hex_encode(j->id, 32, hex);
				fprintf(in->trace, "%lld %s\n", (long long)t, hex);
			}
		} else {
			j->outcome = STORE_STORED;
			j->bundle_outcome = store_batch_bundle_outcome(b, idx);
			j->bundle_replaced = store_batch_bundle_replaced(b, idx, &j->old_built_us,
									 j->old_sha);
		}
	}
	if (rc)
		log_error("store: a batch commit failed: %s", err.msg);
	if (in->trace)
		fflush(in->trace);
	store_batch_free(b);
	pthread_mutex_lock(&in->mu);
	in->stats.committed_batches++;
	if (rc)
		in->stats.store_errors++;
	in->stats.written += rc ? 0 : stats.stored;
	in->stats.states += rc ? 0 : stats.records_touched;
	pthread_mutex_unlock(&in->mu);
}

static void *writer_main(void *arg)
{
	ingest_t *in = arg;
	worker_start(in, "pith-writer");
	pthread_mutex_lock(&in->mu);
	for (;;) {
		/* jobs in submission order: a node catching up is sent events
		 * in time order, and keeping it lets RocksDB move the flushed
		 * documents down instead of rewriting them (docs/store.md). At
		 * shutdown the validators leave jobs unvalidated: the rest is
		 * taken as it is. */
		while (!in->stop_writer && !(in->wq.head && in->wq.head->seq == in->write_seq))
			pthread_cond_wait(&in->wwake, &in->mu);
		if (!in->wq.head && in->stop_writer)
			break;
		/* take what is queued: a group commit of everything that arrived
		 * while the last commit was syncing; rejected jobs go back */
		ingest_job_t *first = NULL, *last = NULL;
		size_t n = 0, rejected = 0;
		while (in->wq.head && n < WRITER_BATCH_MAX &&
		       (in->wq.head->seq == in->write_seq || in->stop_writer)) {
			ingest_job_t *j = jq_pop(&in->wq);
			in->write_seq = j->seq + 1;
			if (j->rc) {
				jq_push(&in->dq, j);
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
			event_active(in->done_ev, EV_READ, 0);
		if (!first)
			continue;
		pthread_mutex_unlock(&in->mu);
		write_batch(in, first);
		pthread_mutex_lock(&in->mu);
		for (ingest_job_t *j = first; j;) {
			ingest_job_t *nx = j->next;
			jq_push(&in->dq, j);
			j = nx;
		}
		event_active(in->done_ev, EV_READ, 0);
	}
	pthread_mutex_unlock(&in->mu);
	return NULL;
}

/* ---- back on the loop ---------------------------------------------------------- */

static void deliver(ingest_t *in)
{
	pthread_mutex_lock(&in->mu);
	jq_t q = in->dq;
	in->dq = (jq_t){0};
	pthread_mutex_unlock(&in->mu);
	ingest_job_t *j;
	while ((j = jq_pop(&q))) {
		in->in_flight--;
		in->on_done(in->arg, j);
	}
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	deliver(arg);
}

ingest_t *ingest_new(struct event_base *base, const pith_trust_t *trust, store_t *st,
		     int nthreads, int worker_nice, size_t max_bundle_bytes, const char *trace_path,
		     ingest_done_fn on_done, void *arg)
{
	ingest_t *in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->worker_nice = worker_nice;
	in->trust = trust;
	in->st = st;
	in->max_bundle_bytes = max_bundle_bytes;
	in->on_done = on_done;
	in->arg = arg;
	pthread_mutex_init(&in->mu, NULL);
	pthread_cond_init(&in->vwake, NULL);
	pthread_cond_init(&in->wwake, NULL);
	in->done_ev = event_new(base, -1, 0, done_cb, in);
	in->vth = calloc((size_t)nthreads, sizeof(pthread_t));
	if (!in->done_ev || !in->vth)
		goto fail;
	if (trace_path && *trace_path) {
		in->trace = fopen(trace_path, "a");
		if (!in->trace) {
			log_error("cannot open trace file %s", trace_path);
			goto fail;
		}
	}
	for (; in->nv < nthreads; in->nv++)
		if (pthread_create(&in->vth[in->nv], NULL, validator_main, in))
			goto fail;
	if (pthread_create(&in->wth, NULL, writer_main, in))
		goto fail;
	in->writer_started = 1;
	return in;
fail:
	ingest_free(in);
	return NULL;
}

void ingest_submit(ingest_t *in, ingest_job_t *job)
{
	in->in_flight++;
	pthread_mutex_lock(&in->mu);
	in->stats.submitted++;
	job->seq = in->submitted_seq++;
	jq_push(&in->vq, job);
	pthread_cond_signal(&in->vwake);
	pthread_mutex_unlock(&in->mu);
}

size_t ingest_in_flight(const ingest_t *in)
{
	return in->in_flight;
}

void ingest_stats_get(ingest_t *in, ingest_stats_t *out)
{
	pthread_mutex_lock(&in->mu);
	*out = in->stats;
	out->queued_validate = in->vq.n;
	out->queued_write = in->wq.n;
	pthread_mutex_unlock(&in->mu);
}

void ingest_free_(ingest_t *in)
{
	if (!in)
		return;
	pthread_mutex_lock(&in->mu);
	in->stop_validators = 1;
	pthread_cond_broadcast(&in->vwake);
	pthread_mutex_unlock(&in->mu);
	for (int i = 0; i < in->nv; i++)
		pthread_join(in->vth[i], NULL);
	/* validators are gone: the writer drains what they passed on */
	pthread_mutex_lock(&in->mu);
	in->stop_writer = 1;
	pthread_cond_signal(&in->wwake);
	pthread_mutex_unlock(&in->mu);
	if (in->writer_started)
		pthread_join(in->wth, NULL);
	/* never started: hand back as dropped */
	ingest_job_t *j;
	while ((j = jq_pop(&in->vq))) {
		j->rc = PITH_EIO;
		j->reason = "shutdown";
		snprintf(j->msg, sizeof(j->msg), "the node shut down before validating it");
		jq_push(&in->dq, j);
	}
	if (in->on_done)
		deliver(in);
	if (in->done_ev)
		event_free(in->done_ev);
	if (in->trace)
		fclose(in->trace);
	free(in->vth);
	pthread_cond_destroy(&in->vwake);
	pthread_cond_destroy(&in->wwake);
	pthread_mutex_destroy(&in->mu);
	free(in);
}
