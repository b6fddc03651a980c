/* The ingest pipeline: validation off the event loop, then durable writes,
 * then the result back on the loop.
 *
 *   loop --submit--> validation pool (N threads: parse, hashes, trust,
 *                    Ed25519, canonical bytes)
 *        --valid---> writer thread (one store batch per wake-up: group
 *                    commit, synced WAL)
 *        --done----> loop (on_done, via event_active)
 *
 * Invalid items skip the writer. A job reaches on_done exactly once, after
 * its outcome is durable (or known to have failed); the loop may then
 * announce it. Only the loop thread submits and receives jobs. */
#ifndef PITH_NODE_INGEST_H
#define PITH_NODE_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "ids.h"
#include "store.h"
#include "trust.h"

struct event_base;

typedef enum ingest_kind {
	INGEST_EVENT = 1,
	INGEST_BUNDLE,
} ingest_kind_t;

typedef struct ingest_job {
	ingest_kind_t kind;
	/* ---- set by the submitter ---- */
	uint8_t *bytes;          /* the item's JSON, owned by the job */
	size_t len;
	int has_claim;           /* the sender named what this is: */
	uint8_t claimed_id[32];  /*   the event id digest (EVENT) */
	char claimed_pith[PITH_NUMBER_LEN + 1]; /* the pith number (BUNDLE) */
	uint64_t peer;           /* serial of the peer that sent it, 0 if none */
	uint64_t ctl;            /* serial of the control request, 0 if none */
	/* ---- results ---- */
	int rc;                  /* 0 valid and written; else negative */
	const char *reason;      /* static: "signature", "content_hash", ... "store" */
	pith_event_check_t check;
	char msg[240];
	uint8_t id[32];          /* event id digest (events) */
	int64_t created_us;      /* the event's created_at (for the reconciliation set) */
	char subject[PITH_NUMBER_LEN + 1];
	int is_record_created;
	store_outcome_t outcome;
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
	/* ---- private ---- */
	uint64_t seq;            /* submission order */
	int index;               /* in the writer's batch */
	pith_event_t *ev;
	pith_buf_t canon;
	json_doc_t *doc;
	struct ingest_job *next, *prev;
} ingest_job_t;

typedef struct ingest ingest_t;
typedef void (*ingest_done_fn)(void *arg, ingest_job_t *job);

typedef struct ingest_stats {
	uint64_t submitted, validated, invalid, committed_batches, written, store_errors;
	uint64_t states; /* record states recomputed by the commits */
	size_t queued_validate, queued_write; /* right now */
} ingest_stats_t;

/* Starts nthreads validators and the writer, each at worker_nice nice
 * steps below the calling thread's priority (prio_lower_thread; 0: the
 * same). trust and st are borrowed and must outlive the pipeline. trace (may be NULL) gets a line
 * "UNIX_US EVENT_ID_HEX" per newly stored event, written right after its
 * commit. NULL on failure. */
ingest_t *ingest_new(struct event_base *base, const pith_trust_t *trust, store_t *st,
		     int nthreads, int worker_nice, size_t max_bundle_bytes, const char *trace_path,
		     ingest_done_fn on_done, void *arg);

/* A new job for kind with a copy of bytes; NULL on OOM. */
ingest_job_t *ingest_job_new(ingest_kind_t kind, const uint8_t *bytes, size_t len);
void ingest_job_free_(ingest_job_t *job);
#define ingest_job_free(j) do { ingest_job_free_(j); (j) = NULL; } while (0)

/* Hands job to the validators (the pipeline owns it until on_done). */
void ingest_submit(ingest_t *in, ingest_job_t *job);

/* Jobs submitted and not yet handed back. */
size_t ingest_in_flight(const ingest_t *in);
void ingest_stats_get(ingest_t *in, ingest_stats_t *out);

/* Stops the pipeline: validators drop what they have not started, the
 * writer commits everything already validated, and every job still held
 * is handed back through on_done (rc PITH_EIO, reason "shutdown" for the
 * dropped ones) before this returns. Then frees it. NULL-tolerant. */
void ingest_free_(ingest_t *in);
#define ingest_free(i) do { ingest_free_(i); (i) = NULL; } while (0)

#endif
