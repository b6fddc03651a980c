/* The ingest pipeline (library pith_ingest): validation of events and
 * bundles on worker threads, then durable writes in submission order.
 * pithd (through its libevent adapter, ingest.h) and `pithctl import` both
 * run it.
 *
 *   submitter --submit--> validators (N threads: parse, hashes, trust,
 *                         Ed25519 batched, canonical bytes, receipt precheck)
 *             --valid---> writer thread (group commit through store_batch_*)
 *             --done----> notify(), then ingest_core_deliver() on the
 *                         submitter's thread hands each job to on_done
 *
 * Invalid items skip the writer but pass it in order. A job reaches on_done
 * exactly once, after its outcome is durable (or known to have failed).
 * Nothing here knows libevent: the user says how its own thread is woken
 * (notify) and delivers there. One thread submits and delivers. */
#ifndef PITH_NODE_INGEST_CORE_H
#define PITH_NODE_INGEST_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "ids.h"
#include "store.h"
#include "trust.h"

typedef enum ingest_kind {
	INGEST_EVENT = 1,
	INGEST_BUNDLE,
	/* an item of a file, as `pithctl import` takes it: a bundle if it
	 * names itself one, else one event of at most PITH_EVENT_MAX_BYTES;
	 * EVENT or BUNDLE once validated. A failed bundle's msg lists every
	 * failed check. */
	INGEST_ANY,
} ingest_kind_t;

/* Why a job failed, for each front end to name in its own words. */
typedef enum ingest_fail {
	INGEST_FAIL_NONE = 0,
	INGEST_FAIL_CHECK,       /* an event check: check names it; for
				  * PITH_CHECK_JSON, rc is json_parse's code */
	INGEST_FAIL_JSON,        /* a bundle's JSON; rc is json_parse's code */
	INGEST_FAIL_TOO_BIG,     /* over the item's size limit */
	INGEST_FAIL_NOT_BUNDLE,  /* JSON, but not a pith_open_graph_bundle */
	INGEST_FAIL_BUNDLE,      /* a bundle check failed */
	INGEST_FAIL_UNTRUSTED,   /*   only because of keys not trusted here */
	INGEST_FAIL_SHAPE,       /* a bundle without pith_number or built_at */
	INGEST_FAIL_ID_MISMATCH, /* not the item it was sent as (has_claim) */
	INGEST_FAIL_OOM,
	INGEST_FAIL_STORE,       /* verified, yet the store refused it */
	INGEST_FAIL_COMMIT,      /* its batch's commit failed */
	INGEST_FAIL_SHUTDOWN,    /* the pipeline stopped before it was done */
} ingest_fail_t;

struct ingest_group;

typedef struct ingest_job {
	/* ---- private, first: the writer walks 2,048 jobs a commit, a few
	 * times, just after a validator on the other core wrote them; these
	 * and rc, durable, outcome share the jobs' first cache lines
	 * (docs/performance.md at 262f3c4, issue 17, session 32) ---- */
	struct ingest_job *next, *prev;
	uint64_t seq;            /* submission order */
	struct ingest_group *group;
	pith_event_t *ev;
	json_doc_t *doc;
	pith_buf_t canon;
	int index;               /* in the writer's batch */
	int block;               /* ingest_job_new's block of the cached size */
	/* ---- results the writer reads and sets ---- */
	int rc;                  /* 0 valid and written; else negative */
	int durable;             /* (set by the submitter) someone will be told
				  * it is stored (a client's write, a
				  * follower's saved cursor): its commit must
				  * outlive a crash even while the store skips
				  * the log (store_batch_need_durable) */
	store_outcome_t outcome;
	ingest_kind_t kind;
	/* ---- set by the submitter ---- */
	uint8_t *bytes;          /* the item's JSON (ingest_job_new: in the job's block) */
	size_t len;
	int has_claim;           /* the sender named what this is: */
	uint8_t claimed_id[32];  /*   the event id digest (EVENT) */
	char claimed_pith[PITH_NUMBER_LEN + 1]; /* the pith number (BUNDLE), or
				    its 26-character body alone */
	uint64_t peer;           /* serial of the peer that sent it, 0 if none */
	uint64_t ctl;            /* serial of the control request, 0 if none */
	uint64_t follow;         /* serial of the follower's fetch (follower.c), 0 if none */
	/* ---- results ---- */
	ingest_fail_t fail;      /* why not */
	const char *reason;      /* static, the node's name for fail: "signature",
				  * "content_hash", ... "store" */
	pith_event_check_t check;
	char msg[400];
	uint8_t id[32];          /* event id digest (events) */
	int64_t created_us;      /* the event's created_at (for the reconciliation set) */
	char subject[PITH_NUMBER_LEN + 1];
	int is_record_created;
	store_bundle_outcome_t bundle_outcome;
	int64_t built_us;        /* bundles: built_at */
	uint8_t sha[32];         /*   bundle_sha256 (also of one refused as untrusted_key) */
	int has_sha;             /*   sha is set */
	int bundle_replaced;     /*   NEWER over a stored bundle: */
	int64_t old_built_us;    /*     that one's built_at */
	uint8_t old_sha[32];     /*     and bundle_sha256 */
	uint8_t *event_ids;      /*   ids of its events, n_event_ids * 32 bytes */
	int64_t *event_created_us; /*   and their created_at, n_event_ids of them */
	size_t n_event_ids;
} ingest_job_t;

/* Jobs submitted together (ingest_core_submit_group): committed as one
 * store batch of their own, never split nor joined to other jobs, and
 * handed back together once it is done. Groups commit in submission
 * order, and once a group's commit failed no later group is committed:
 * what is stored is always a prefix of the groups. */
typedef struct ingest_group {
	/* ---- results, set before its jobs are handed back ---- */
	int rc;                      /* 0 committed; else negative (msg says why) */
	char msg[240];
	store_commit_stats_t stats;  /* of its commit */
	/* ---- private ---- */
	size_t n, validated;
} ingest_group_t;

typedef struct ingest_core ingest_core_t;
typedef void (*ingest_done_fn)(void *arg, ingest_job_t *job);

typedef struct ingest_stats {
	uint64_t submitted, validated, invalid, committed_batches, written, store_errors;
	uint64_t states; /* record states recomputed by the commits */
	uint64_t validate_batches; /* validators' takes: (validated + invalid) / this
				    * is their batch, the size of their
				    * signature batches (up to INGEST_VALIDATE_BATCH) */
	size_t queued_validate, queued_write; /* right now */
} ingest_stats_t;

typedef struct ingest_opts {
	const pith_trust_t *trust;  /* borrowed: must outlive the pipeline */
	store_t *st;                /* borrowed, likewise */
	int nthreads;               /* validator threads */
	int merge_lanes;            /* threads computing a commit's states, the
				     * writer included (store_batch_set_lanes);
				     * 0: as many as validators */
	int worker_nice;            /* nice steps below the creating thread
				     * (prio_lower_thread; 0: the same) */
	int validator_nice;         /* further steps below for the validators
				     * only, so that the writer, which every
				     * job waits for, gets the cores first
				     * when both want them (pithctl import) */
	size_t max_bundle_bytes;    /* JSON limit of an INGEST_BUNDLE */
	const char *trace_path;     /* NULL, or a file that gets "UNIX_US
				     * EVENT_ID_HEX" per newly stored event,
				     * right after its commit */
	/* Called on the writer thread, under the pipeline's lock, whenever
	 * jobs are ready to hand back: it must only wake the delivering
	 * thread (which then calls ingest_core_deliver). May be NULL for a
	 * user that waits in ingest_core_wait. */
	void (*notify)(void *arg);
	void *notify_arg;
	ingest_done_fn on_done;     /* gets each job back, on the delivering thread */
	void *done_arg;
} ingest_opts_t;

/* Starts the validators and the writer. NULL on failure. */
ingest_core_t *ingest_core_new(const ingest_opts_t *opts);

/* A new job for kind with a copy of bytes, in one block; NULL on OOM. */
ingest_job_t *ingest_job_new(ingest_kind_t kind, const uint8_t *bytes, size_t len);
/* Frees job (with its bytes) and what validation left in it.
 * NULL-tolerant. A block whose bytes were small (nearly every event) waits
 * in a cache of the calling thread, at most INGEST_JOB_CACHE_MAX of them
 * (under 6 MiB), for that thread's next ingest_job_new. */
void ingest_job_free_(ingest_job_t *job);
#define ingest_job_free(j) do { ingest_job_free_(j); (j) = NULL; } while (0)
#define INGEST_JOB_INLINE 2048
#define INGEST_JOB_CACHE_MAX 2048
/* Frees the calling thread's cached blocks (at its end: pithd's loop). */
void ingest_job_cache_release(void);

/* Prepares a job the caller allocated, over bytes it lends (they must stay
 * put until the job is handed back); ingest_job_clear releases what the
 * pipeline left in it. */
void ingest_job_init(ingest_job_t *job, ingest_kind_t kind, uint8_t *bytes, size_t len);
void ingest_job_clear(ingest_job_t *job);

/* Marks job failed (before it is submitted, e.g. input the submitter could
 * not read whole): it then passes the pipeline in order, unvalidated. */
void ingest_job_reject(ingest_job_t *job, ingest_fail_t fail, int rc, const char *msg);

#define INGEST_VALIDATE_BATCH 16 /* jobs a validator takes at once */

/* Validates js[0..n) (n <= INGEST_VALIDATE_BATCH) on the calling thread,
 * the events' signatures together (pith_sig_check_many): a valid job holds
 * its parsed item and canonical bytes for the writer, a failed one its rc,
 * fail, reason and msg. Jobs already failed are left as they are. What a
 * validator thread runs; public for tests and fuzzing. */
void ingest_validate(const pith_trust_t *trust, size_t max_bundle_bytes, ingest_job_t **js,
		     size_t n);

/* Hands job to the validators; the pipeline holds it until on_done. */
void ingest_core_submit(ingest_core_t *c, ingest_job_t *job);
/* Hands *jobs[0..n) (n >= 1) to the validators as one group, g (which the
 * caller owns and keeps until the jobs are back). */
void ingest_core_submit_group(ingest_core_t *c, ingest_group_t *g, ingest_job_t *const *jobs,
			      size_t n);

/* Hands every job that is done to on_done, on the calling thread, in the
 * order the writer finished them. Returns how many. */
size_t ingest_core_deliver(ingest_core_t *c);
/* Waits until a job is ready to deliver, validating queued jobs on the
 * calling thread meanwhile (while the writer is not committing) rather
 * than sleeping. */
void ingest_core_wait(ingest_core_t *c);

/* Jobs submitted and not yet handed back. */
size_t ingest_core_in_flight(const ingest_core_t *c);
/* Validates jobs taken from now on with trust (borrowed, as opts.trust;
 * pithd's reload). Batches already being validated keep the store they
 * started with: the caller frees a replaced store only once
 * ingest_core_trust_retired says none is in use. */
void ingest_core_set_trust(ingest_core_t *c, const pith_trust_t *trust);
/* 1 when no validation runs with a trust store set_trust replaced. */
int ingest_core_trust_retired(ingest_core_t *c);
void ingest_core_stats_get(ingest_core_t *c, ingest_stats_t *out);

/* Stops the pipeline: validators drop what they have not started; the
 * writer commits every job already validated that is not in a group (a
 * group not yet committing is dropped whole); every job still held is
 * handed to on_done (rc PITH_EIO, fail INGEST_FAIL_SHUTDOWN, reason
 * "shutdown" for the dropped ones) before this returns. Then frees it.
 * NULL-tolerant. */
void ingest_core_free_(ingest_core_t *c);
#define ingest_core_free(c) do { ingest_core_free_(c); (c) = NULL; } while (0)

#endif
