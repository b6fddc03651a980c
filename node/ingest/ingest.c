/* The libevent side of pithd's ingest: the writer's "jobs are done" wakes
 * the loop (loop_wake, wake.h) from the writer thread, and its callback
 * delivers them there. The rest is ingest_core.c. */
#include "ingest.h"

#include <event2/event.h>
#include <stdlib.h>

#include "prio.h"
#include "wake.h"

struct ingest {
	ingest_core_t *core;
	loop_wake_t *done;
};

/* On the writer thread: only wakes the loop. */
static void wake_loop(void *arg)
{
	loop_wake_fire(arg);
}

static void done_cb(void *arg)
{
	ingest_t *in = arg;
	ingest_core_deliver(in->core);
}

ingest_t *ingest_new(struct event_base *base, const pith_trust_t *trust, store_t *st,
		     int nthreads, int worker_nice, size_t max_bundle_bytes, const char *trace_path,
		     ingest_done_fn on_done, void *arg)
{
	ingest_t *in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->done = loop_wake_new(base, done_cb, in);
	if (!in->done)
		goto fail;
	ingest_opts_t o = {
		.trust = trust, .st = st, .nthreads = nthreads, .worker_nice = worker_nice,
		.max_bundle_bytes = max_bundle_bytes, .trace_path = trace_path,
		/* lowered workers: the validators below the writer */
		.validator_nice = prio_below_writer(worker_nice),
		.notify = wake_loop, .notify_arg = in->done, .on_done = on_done, .done_arg = arg,
	};
	if (!(in->core = ingest_core_new(&o)))
		goto fail;
	return in;
fail:
	ingest_free(in);
	return NULL;
}

void ingest_submit(ingest_t *in, ingest_job_t *job)
{
	ingest_core_submit(in->core, job);
}

void ingest_submit_group(ingest_t *in, ingest_group_t *g, ingest_job_t *const *jobs, size_t n)
{
	ingest_core_submit_group(in->core, g, jobs, n);
}

size_t ingest_in_flight(const ingest_t *in)
{
	return ingest_core_in_flight(in->core);
}

void ingest_set_trust(ingest_t *in, const pith_trust_t *trust)
{
	ingest_core_set_trust(in->core, trust);
}

int ingest_trust_retired(ingest_t *in)
{
	return ingest_core_trust_retired(in->core);
}

void ingest_stats_get(ingest_t *in, ingest_stats_t *out)
{
	ingest_core_stats_get(in->core, out);
}

void ingest_free_(ingest_t *in)
{
	if (!in)
		return;
	/* joins the writer, the only thread that fires done */
	ingest_core_free(in->core);
	loop_wake_free(in->done);
	free(in);
}
