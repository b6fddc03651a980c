/* A batch's insides (store_batch_t, store.h), shared by batch.c (a batch
 * built: items added, outcomes read; one item put), batch_commit.c (the
 * commit) and batch_lanes.c (the merge lanes) only. */
#ifndef PITH_STORE_BATCH_INT_H
#define PITH_STORE_BATCH_INT_H

#include <pthread.h>

#include "hmap.h"
#include "merge.h"
#include "store_int.h"
#include "store_pool.h"

typedef struct entry {
	pith_event_t *ev;          /* owned by the batch */
	pith_buf_t canon;          /* canonical bytes, computed on demand */
	store_outcome_t outcome;
	int win;                   /* first copy of an id: the copy whose block wins */
	int primary;               /* the first copy of its id in the batch */
} entry_t;

typedef struct bentry {
	json_doc_t *doc;           /* owned, or NULL when the caller lends root */
	const json_value_t *root;
	uint8_t skey[STORE_SKEY_LEN];
	char pith[PITH_NUMBER_LEN + 1];
	int64_t built_us;
	char sha[65];
	store_bundle_outcome_t outcome;
	int replaced;              /* NEWER over a stored bundle: */
	int64_t old_us;            /*   its built_at */
	char old_sha[65];          /*   and bundle_sha256 */
} bentry_t;

/* The records a commit touches. */
typedef struct group {
	uint8_t skey[STORE_SKEY_LEN];
	char pith[PITH_NUMBER_LEN + 1];
	int *news;                 /* new events (entry indices) */
	size_t nnew, capnew;
	int bundle;                /* newest bundle of the batch, or -1 */
	int bundle_newer;          /* ... and it beats the stored one */
	int exists;                /* the store has a summary of this record */
	int stored_bundle;         /* ... and a bundle */
	uint8_t *old_rec;          /* that summary (malloc'd), or NULL */
	size_t old_rec_len;
	/* what store_batch_group_merge computed (a lane), for commit_group (the writer) */
	int merged;                /* state and claims hold results */
	int mrc;                   /* store_batch_group_merge's code; merr says why */
	pith_err_t merr;
	pith_state_t state;
	store_claims_t claims;
	json_doc_t *bdoc;          /* the stored bundle, when it was loaded */
	int has_bundle;
	size_t nevents;            /* stored and new */
} group_t;

/* Helper threads that compute the states of a commit's records in
 * parallel with the writer (store_batch_set_lanes): the records are split
 * among them, one record wholly in one lane, and the writer then writes
 * the results in the order it always did. */
typedef struct lanes {
	pthread_mutex_t mu;
	pthread_cond_t go, idle;
	store_pool_t threads;      /* running lane_main */
	int n;                     /* helper threads running */
	int stop;
	uint64_t gen;              /* a new window to work on */
	struct store_batch *b;
	size_t next, end;          /* groups [next, end) not yet taken */
	int busy;                  /* helpers still working on the window */
} lanes_t;

struct store_batch {
	store_t *st;
	entry_t *e;
	size_t n, cap;
	bentry_t *b;
	size_t nb, capb;
	int committed;             /* outcomes readable; the next add starts afresh */
	int need_durable;          /* store_batch_need_durable, for the next commit */
	hmap_t ids, subjects;
	group_t *g;
	size_t ng, capg;
	lanes_t *lanes;            /* NULL: the writer merges alone */
	/* a commit's WriteBatch, puts and arena, kept for the next one: a
	 * writer's steady commits reuse their memory instead of growing it
	 * afresh each time (up to BATCH_KEEP_BYTES) */
	rocksdb_writebatch_t *wb;
	struct pput *puts;
	size_t capputs;
	pith_buf_t arena;
};

/* Groups a window's merges take at a time: bounds the states held at once
 * (each up to hundreds of kilobytes for a record of many events). */
#define LANES_WINDOW 256

/* batch.c */
/* Drops b's items (the events and bundles it owns) and their index. */
void store_batch_drop_items(store_batch_t *b);
/* Empties b's groups (the records of the last commit). */
void store_batch_groups_reset(store_batch_t *b);
/* A committed batch starts afresh at the next add or commit. */
void store_batch_restart_if_committed(store_batch_t *b);
/* Frees what store_batch_group_merge left in g. */
void store_batch_group_merge_release(group_t *g);

/* batch_commit.c */
/* Step 3a for one record: its state and claims computed again from its
 * stored and new events (and bundle) into g; on a lane or the writer. */
void store_batch_group_merge(store_batch_t *b, group_t *g);
/* Whether store_batch_group_merge has work in g. */
int store_batch_group_needs_merge(const group_t *g);

/* batch_lanes.c */
/* Merges the groups [from, to) in the lanes and on the calling thread;
 * returns once every one is done. */
void store_batch_lanes_run(store_batch_t *b, size_t from, size_t to);
/* Stops and frees b's lanes, if any. */
void store_batch_lanes_stop(store_batch_t *b);

#endif
