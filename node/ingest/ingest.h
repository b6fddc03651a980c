/* pithd's ingest pipeline: the shared pipeline (ingest_core.h: validation
 * off the event loop, then durable writes) with its results handed back
 * on the loop.
 *
 *   loop --submit--> validation pool (N threads: parse, hashes, trust,
 *                    Ed25519, canonical bytes)
 *        --valid---> writer thread (one store batch per wake-up: group
 *                    commit, synced WAL)
 *        --done----> loop (on_done, via loop_wake_fire, wake.h)
 *
 * Invalid items skip the writer. A job reaches on_done exactly once, after
 * its outcome is durable (or known to have failed); the loop may then
 * announce it. Only the loop thread submits and receives jobs. The jobs,
 * their results and ingest_job_new/ingest_job_free are ingest_core.h's. */
#ifndef PITH_NODE_INGEST_H
#define PITH_NODE_INGEST_H

#include "ingest_core.h"

struct event_base;

typedef struct ingest ingest_t;

/* Starts nthreads validators and the writer, each at worker_nice nice
 * steps below the calling thread's priority (prio_lower_thread; 0: the
 * same). trust and st are borrowed and must outlive the pipeline. trace (may be NULL) gets a line
 * "UNIX_US EVENT_ID_HEX" per newly stored event, written right after its
 * commit. on_done gets each job back on base's loop. NULL on failure. */
ingest_t *ingest_new(struct event_base *base, const pith_trust_t *trust, store_t *st,
		     int nthreads, int worker_nice, size_t max_bundle_bytes, const char *trace_path,
		     ingest_done_fn on_done, void *arg);

/* Hands job to the validators (the pipeline owns it until on_done). */
void ingest_submit(ingest_t *in, ingest_job_t *job);

/* Hands jobs[0..n) (n >= 1) to the validators as one group, g
 * (ingest_core_submit_group): the valid ones are committed as one store
 * batch of their own and all n come back through on_done together once it
 * is done; an invalid job skips the writer without failing the others. g
 * is the caller's and must stay put until its last job is back. Once a
 * group's commit failed, no later group is committed: their valid jobs
 * come back with fail INGEST_FAIL_COMMIT (and g->rc, g->msg say why). */
void ingest_submit_group(ingest_t *in, ingest_group_t *g, ingest_job_t *const *jobs, size_t n);

/* Jobs submitted and not yet handed back. */
size_t ingest_in_flight(const ingest_t *in);
/* ingest_core_set_trust and ingest_core_trust_retired (ingest_core.h):
 * a reload's new trust store, and when the one it replaced may go. */
void ingest_set_trust(ingest_t *in, const pith_trust_t *trust);
int ingest_trust_retired(ingest_t *in);
void ingest_stats_get(ingest_t *in, ingest_stats_t *out);

/* Stops the pipeline: validators drop what they have not started, the
 * writer commits everything already validated, and every job still held
 * is handed back through on_done (rc PITH_EIO, reason "shutdown" for the
 * dropped ones) before this returns. Then frees it. NULL-tolerant. */
void ingest_free_(ingest_t *in);
#define ingest_free(i) do { ingest_free_(i); (i) = NULL; } while (0)

#endif
