/* store_t's insides, shared by the store's own files only. */
#ifndef PITH_STORE_INT_H
#define PITH_STORE_INT_H

#include <pthread.h>
#include <rocksdb/c.h>

#include "buf.h"
#include "keys.h"
#include "hmap.h"
#include "store.h"
#include "store_pool.h"

/* Write-ahead logs kept at most (RocksDB's max_total_wal_size): bounds the
 * disk they take and the replay at the next open (4 s for 0.9 GB after a
 * kill -9, docs/store.md). Past it RocksDB flushes every family with data
 * in the oldest log, however little: at 256 MiB the small families were
 * flushed as 5 MB files in a catch-up, and compacted four times as often
 * as their 16 MiB memtables call for (docs/performance.md, issue 17). */
#define STORE_MAX_WAL_BYTES (1u << 30)

#define STORE_NSIDE 3 /* side families: states.bulk, aliases.bulk, events.bulk (side.c) */

struct store {
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_options_t *cf_opts[STORE_NCF];
	rocksdb_block_based_table_options_t *table[STORE_NCF];
	rocksdb_cache_t *cache;
	rocksdb_column_family_handle_t *cf[STORE_NCF];
	rocksdb_writeoptions_t *wo; /* the commits': wo_log, or wo_nolog while unlogged */
	rocksdb_writeoptions_t *wo_log;   /* sync = 1: the WAL is fsynced per commit */
	rocksdb_writeoptions_t *wo_nolog; /* no WAL (store_unlogged_begin) */
	rocksdb_readoptions_t *ro;
	pthread_mutex_t wmu;        /* serialises writers (batch commits) */
	store_counts_t counts;      /* as written by the last commit (written
				     * under wmu by store_counts_set, read by
				     * store_counts_get without it) */
	uint64_t counts_seq;        /* counts' seqlock: odd while being written */
	int read_only;
	int unlogged;               /* commits skip the WAL (store_opts_t's, or
				     * store_unlogged_begin; written under wmu,
				     * read atomically) */
	int atomic_flush;           /* opened with RocksDB's atomic_flush */
	int unsorted_write_only;    /* store_opts_t's */
	int fresh_on;               /* store_opts_t.fresh_records in effect: the
				     * store held no record when opened, and
				     * fresh has every record written since
				     * (written under wmu, read atomically) */
	int fresh_stop;             /* store_bulk_end asks the next commit to
				     * turn it off (atomic) */
	fpset_t fresh;              /* under wmu */
	int nolog_dirty;            /* commits without the WAL since the last
				     * flush (under wmu) */
	uint64_t changes_durable;   /* UINT64_MAX, or while unlogged the change
				     * log's last number known flushed
				     * (written under wmu, read atomically) */
	int schema;                 /* as found: older ones are read as they are (read-only) */
	void (*notice)(void *arg, const char *line); /* store_opts_t's */
	void *notice_arg;
	const pith_trust_t *registry; /* for pith_merge_ex */
	char *dir;                  /* where the database is (store_usage_get) */
	uint64_t changes_seq;       /* the change log's last sequence number (written
				     * under wmu, read atomically) */
	struct store_seq_slot *seqs; /* change numbers read (changes.c,
				      * store_change_seq_get); allocated at the first */
	void (*on_error)(void *arg, int what, const char *line); /* store_opts_t's */
	void *on_error_arg;
	pthread_mutex_t emu;        /* guards errors */
	store_errors_t errors;
	/* the side families (side.c; store_opts_t.bulk_side): while side_on,
	 * cf[store_side_cf(i)] is side[i] and side_main[i] the family it
	 * stands in for, which is empty */
	int bulk_side;              /* store_opts_t's */
	int side_want;              /* store_side_want asks the next commit (atomic) */
	int side_on;                /* written under wmu, read atomically */
	rocksdb_column_family_handle_t *side[STORE_NSIDE];
	rocksdb_column_family_handle_t *side_main[STORE_NSIDE];
	int side_track;             /* under wmu: commits log the keys they write
				     * to side families (store_side_note) while
				     * store_side_end writes them out */
	int side_log_lost;          /* a key could not be logged (under wmu) */
	pith_buf_t side_log[STORE_NSIDE]; /* those keys: 2-byte length, bytes */
	int side_stop;              /* store_side_stop (atomic) */
	int side_main_dirty[STORE_NSIDE]; /* a move's files went into the family
				     * and the move failed after: the next one
				     * empties it first (under wmu) */
	int bulk_on;                /* store_bulk_begin .. store_bulk_end */
	enum store_bulk_mode bulk_mode;
	/* readers of cf[] outside wmu hold one of two counts while they use
	 * a handle (store_cf_enter, store_cf_leave), so that a side family's
	 * handle, once swapped out of cf[], is destroyed only after every
	 * reader that could have taken it is done (store_cf_quiesce) */
	unsigned cf_epoch;
	unsigned cf_readers[2];
	/* what cf[] held when store_open returned: handles destroyed only by
	 * store_close, so a reader that finds one in cf[] is not counted
	 * (outside a first catch-up, every read) */
	rocksdb_column_family_handle_t *cf_open[STORE_NCF];
};

#define STORE_CF_UNCOUNTED 2u /* a slot: the reader took a handle of cf_open[] */

/* The handle of family cf for a read outside wmu; store_cf_leave(st, *slot)
 * once RocksDB is done with it (after the call, for a read; after the
 * iterator's creation, which holds the family itself from then on). A
 * handle found in cf[] that is not the one open left there (a side
 * family's) is taken again after the reader counts itself, so that either
 * it was still in cf[] after the count (and store_cf_quiesce waits for the
 * reader) or it is the one back in its place. */
static inline rocksdb_column_family_handle_t *store_cf_enter(store_t *st, int cf, unsigned *slot)
{
	rocksdb_column_family_handle_t *h = __atomic_load_n(&st->cf[cf], __ATOMIC_ACQUIRE);
	if (h == st->cf_open[cf]) {
		*slot = STORE_CF_UNCOUNTED;
		return h;
	}
	*slot = __atomic_load_n(&st->cf_epoch, __ATOMIC_SEQ_CST) & 1;
	__atomic_add_fetch(&st->cf_readers[*slot], 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&st->cf[cf], __ATOMIC_SEQ_CST);
}

static inline void store_cf_leave(store_t *st, unsigned slot)
{
	if (slot != STORE_CF_UNCOUNTED)
		__atomic_sub_fetch(&st->cf_readers[slot], 1, __ATOMIC_RELEASE);
}

/* Returns once every reader that entered before the call has left: a handle
 * taken out of cf[] before it can then be destroyed (side.c). */
void store_cf_quiesce(store_t *st);

/* side.c */
const char *store_side_name(int i);
int store_side_cf(int i);
rocksdb_options_t *store_side_opts(store_t *st, int i, int vector);
/* Under wmu, at a commit's start when store_side_want asked: makes the
 * side families if the store holds nothing. */
void store_side_begin_locked(store_t *st);
/* At a read-write open: moves side families found (an interrupted
 * catch-up's). */
int store_side_open_end(store_t *st, pith_err_t *err);
/* At close: destroys the side families' handles. */
void store_side_close(store_t *st);
/* Under wmu, for every put or delete of family cf while st->side_track. */
void store_side_note(store_t *st, int cf, const char *k, size_t kl);
/* store_side_end, calling hook(arg) between writing the side families out
 * and taking the write lock to put them in place (tests commit there). */
typedef void (*store_side_hook_t)(void *arg);
int store_side_end_ex(store_t *st, store_side_hook_t hook, void *arg, pith_err_t *err);

/* The families' level-0 triggers and level base, at open and outside
 * bulk mode (store_open.c, store_bulk.c). */
#define STORE_L0_TRIGGER 4
#define STORE_L0_SLOWDOWN 20
#define STORE_L0_STOP 36
/* RocksDB's default, set so that store_bulk_end puts back exactly it */
#define STORE_LEVEL_BASE_BYTES (256ull << 20)
/* The level base of the families commits only write
 * (store_cf_write_only) in bulk mode: RocksDB also compacts level 0 once
 * its bytes reach the level base (whatever the file count), so deferring
 * their compactions takes both */
#define STORE_LEVEL_BASE_BYTES_BULK_WRITTEN (64ull << 30)

/* The families keyed by something random (ids, pith numbers, aliases)
 * and small entries, which RocksDB's leveled compaction rewrites most
 * often per byte: every L0 compaction of a family still smaller than a
 * level's base goes straight into its last level and rewrites all of it. */
static inline int store_cf_is_index(int cf)
{
	return cf != STORE_CF_DOCS && cf != STORE_CF_STATES && cf != STORE_CF_BUNDLES;
}

/* The families a commit writes and never reads (it reads summaries,
 * stored events and change log entries): states and alias claims. */
static inline int store_cf_write_only(int cf)
{
	return cf == STORE_CF_STATES || cf == STORE_CF_ALIASES;
}

/* store_open.c, store_bulk.c, for side.c */
void store_say(store_t *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void store_remove_files_dir(const char *dir);
/* Removes the checkpoint store_flush_locked makes, and the directory
 * RocksDB builds it in, if a crash left them (store_bulk.c). */
void store_remove_flush_dir(store_t *st);
/* Sets the bulk mode's level-0 triggers again (for families made since). */
void store_l0_reset(store_t *st);

/* RocksDB counts every key comparison, read and write in a thread-local
 * perf context unless the calling thread's perf level says not to (its
 * default counts). Nothing here reads those counts, and keeping them was
 * a tenth of the writer's CPU in an import (the memtable's comparisons
 * each reached the thread-local block twice; docs/performance.md, issue
 * 17, session 12). Called at the store's read and write entry points: the
 * first call on a thread turns the counting off for that thread. RocksDB's
 * own flush and compaction threads keep its default. */
static inline void store_perf_off(void)
{
	static __thread int off;
	if (!off) {
		rocksdb_set_perf_level(rocksdb_disable);
		off = 1;
	}
}

/* A bounded iterator over [lo, hi) of one column family (hi_len 0: to the
 * end). The bounds are copied into the iterator. */
typedef struct store_iter {
	store_t *st;                /* for store_iter_status's error count */
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *it;
	uint8_t lo[256], hi[256];
	size_t lo_len, hi_len;
} store_iter_t;

int store_iter_open(store_t *st, int cf, const uint8_t *lo, size_t lo_len,
		    const uint8_t *hi, size_t hi_len, store_iter_t *out, pith_err_t *err);
/* The same, positioned at the last key below hi (for a walk backwards),
 * without first seeking forward to lo. */
int store_iter_open_last(store_t *st, int cf, const uint8_t *lo, size_t lo_len,
			 const uint8_t *hi, size_t hi_len, store_iter_t *out, pith_err_t *err);
/* Over all of cf, for a single pass in key order (the audit's): its
 * blocks are read ahead and not kept in the block cache. */
int store_iter_scan(store_t *st, int cf, store_iter_t *out, pith_err_t *err);
/* The same, over all keys starting with prefix. */
int store_iter_prefix(store_t *st, int cf, const uint8_t *prefix, size_t len,
		      store_iter_t *out, pith_err_t *err);
int store_iter_valid(store_iter_t *it);
/* To the first key at or after key (within the iterator's bounds). */
void store_iter_seek(store_iter_t *it, const uint8_t *key, size_t len);
const uint8_t *store_iter_key(store_iter_t *it, size_t *len);
const uint8_t *store_iter_value(store_iter_t *it, size_t *len);
void store_iter_next(store_iter_t *it);
/* Backwards: to the last key below hi, then to the one before. */
void store_iter_last(store_iter_t *it);
void store_iter_prev(store_iter_t *it);
/* 0, or PITH_EIO (with err filled) if the iteration stopped on an error. */
int store_iter_status(store_iter_t *it, pith_err_t *err);
void store_iter_close(store_iter_t *it);

/* PITH_EIO with "store: what: msg" in err; frees msg (RocksDB's). */
int store_db_error(pith_err_t *err, char *msg, const char *what);
/* The same for an error of st's database met while reading (what
 * STORE_OP_READ) or writing (STORE_OP_WRITE): also counted in st->errors
 * and told to the on_error hook; a write error marks st not writable. */
int store_op_error(store_t *st, int op, pith_err_t *err, char *msg, const char *what);
/* Flushes every family as one group (st->atomic_flush), with wmu held:
 * the commits so far, with the log or without, are in table files. */
int store_flush_locked(store_t *st, pith_err_t *err);
/* A write succeeded: st is writable again. */
void store_write_ok(store_t *st);
/* Publishes the meta counters a commit wrote (wmu held): readers
 * (store_counts_get) never wait for a commit or a flush holding wmu. */
void store_counts_set(store_t *st, const store_counts_t *c);

/* Appends the value under key to out (a pinned read, no copy of its own).
 * PITH_ENOTFOUND without touching err when there is none. */
int store_get_into(store_t *st, int cf, const uint8_t *key, size_t klen, pith_buf_t *out,
		   pith_err_t *err);

/* Get: *val is malloc'd by RocksDB (free with rocksdb_free) or NULL when
 * absent. Returns 0 or PITH_EIO. */
int store_get_raw(store_t *st, int cf, const uint8_t *key, size_t klen, char **val,
		  size_t *vlen, pith_err_t *err);
/* The same through read options ro (the store's, or ones that read only
 * the table files: store_counts_durable). */
int store_get_raw_ro(store_t *st, const rocksdb_readoptions_t *ro, int cf, const uint8_t *key,
		     size_t klen, char **val, size_t *vlen, pith_err_t *err);
/* The meta counters, read through ro (store_open.c). */
int store_meta_counts_get(store_t *st, const rocksdb_readoptions_t *ro, store_counts_t *out,
			  pith_err_t *err);
/* The subject key of a full pith number; PITH_EINVAL if it is not one
 * (store_get.c). */
int store_skey_of(const char *pith_number, uint8_t skey[STORE_SKEY_LEN], pith_err_t *err);
/* Is RocksDB flushing or compacting, or does a family want a compaction?
 * (store_bulk.c) */
int store_compaction_busy(store_t *st);

/* The document of event id appended to out, wherever the schema keeps it
 * (keys.h: an 8-byte events value points into docs; a longer one is the
 * document itself, as schemas 2 and 3 kept it). PITH_ENOTFOUND without
 * touching err when the store lacks the event. */
int store_doc_get(store_t *st, const uint8_t id[STORE_ID_LEN], pith_buf_t *out, pith_err_t *err);

/* One schema upgrade step: fn sees every (key, value) of column family
 * cf and adds what it writes to wb (returning how many items it added, or
 * <0 with err set); the writes go in synced chunks, and the last one also
 * sets the schema version to schema, so that a step cut short by a crash
 * is done again at the next open. Steps must be idempotent (puts of what
 * they would write anyway). *n counts the items written. what names the
 * step in errors. */
typedef int (*store_upgrade_fn)(void *arg, rocksdb_writebatch_t *wb, const uint8_t *k, size_t kl,
				const uint8_t *v, size_t vl, pith_err_t *err);
int store_upgrade_walk(store_t *st, int cf, store_upgrade_fn fn, void *arg, const char *schema,
		       const char *what, uint64_t *n, pith_err_t *err);

/* Moves the documents of a schema-3 store into docs and writes schema 4;
 * *moved (if not NULL) counts them. Resumes one cut short. */
int store_docs_upgrade(store_t *st, uint64_t *moved, pith_err_t *err);

/* Parses the stored events of one subject into a new array (*out, *n);
 * each event owns its doc. Free with store_events_free. */
int store_subject_load(store_t *st, const uint8_t skey[STORE_SKEY_LEN], pith_event_t ***out,
		       size_t *n, pith_err_t *err);
void store_events_free(pith_event_t **evs, size_t n);
/* The event a subj key k names, its document read into doc (reset
 * first), parsed into a new *ev that owns its own copy. */
int store_subj_event_load(store_t *st, const uint8_t k[STORE_SUBJ_KEY_LEN], pith_buf_t *doc,
			  pith_event_t **ev, pith_err_t *err);

/* The source_aliases and built_at of the stored bundle of skey, in a new
 * doc (*doc, may be NULL with *aliases NULL when there is no bundle). */
int store_bundle_aliases_load(store_t *st, const uint8_t skey[STORE_SKEY_LEN],
			      json_doc_t **doc, const json_value_t **aliases, int64_t *built_us,
			      pith_err_t *err);
/* The same from the bundle's stored bytes val (a bundles value). */
int store_bundle_aliases_parse(const uint8_t *val, size_t len, json_doc_t **doc,
			       const json_value_t **aliases, int64_t *built_us, pith_err_t *err);

/* Alias key of (kind, value): kind '\0' value, DOIs in lower case.
 * Returns the key length, or 0 if it does not fit. */
size_t store_alias_key(const char *kind, const char *value,
		       uint8_t out[STORE_ALIAS_KEY_MAX]);

/* store_bundle_order (store.h) over bundle_sha256 in hex.
 * > 0 if (a_us, a_sha) is newer than (b_us, b_sha). */
int store_bundle_newer(int64_t a_us, const char *a_sha, int64_t b_us, const char *b_sha);

/* built_at (µs) and bundle_sha256 (hex) of a bundle object. */
int store_bundle_ident(const json_value_t *bundle, int64_t *built_us, char sha[65],
		       pith_err_t *err);

/* ---- audits (check.c) ---- */

/* Keys of one kind in an index: first byte and length; name for messages. */
typedef struct store_key_kind {
	uint8_t first;
	size_t len;
	const char *name;
} store_key_kind_t;

/* Counts the keys of cf of the two kinds, reporting any other key; then
 * reports it if either count is not want (how many items, say, "records",
 * each kind has one entry per). */
int store_audit_key_kinds(store_t *st, int cf, const store_key_kind_t kinds[2], uint64_t want,
			  const char *items, void (*problem)(void *arg, const char *line), void *arg,
			  pith_err_t *err);

/* ---- where a record's entries go (batch.c) ---- */

/* The helpers below that add a record's entries to a write (its alias
 * claims, its change log entries, its bundle index entries) write through
 * a sink: a WriteBatch, in the order they come (store_wsink_wb), or a
 * commit's queue, which sorts every put and delete by family and key
 * before they reach its batch (batch.c: RocksDB then inserts each
 * memtable's share in ascending order, each insert a short walk from the
 * previous one instead of a descent from the top of the skip list). A
 * queue's failure (out of memory) is kept in rc, the first one. */
typedef struct store_wsink store_wsink_t;
struct store_wsink {
	void (*put)(store_wsink_t *s, int cf, const void *k, size_t kl, const void *v, size_t vl);
	void (*del)(store_wsink_t *s, int cf, const void *k, size_t kl);
	rocksdb_writebatch_t *wb; /* store_wsink_wb's */
	store_t *st;
	int rc;
};

/* s, writing straight into wb. */
void store_wsink_wb(store_wsink_t *s, rocksdb_writebatch_t *wb, store_t *st);

/* ---- the bundle index (bundle_index.c) ---- */

/* Adds to ws the entries of skey's new newest bundle (new_us, new_sha hex;
 * NULL: none, the record loses its bundle) and the deletes of the old
 * one's (old_sha NULL: there was none). */
void store_bundle_index_write(store_wsink_t *ws, const uint8_t skey[STORE_SKEY_LEN], int64_t new_us,
			      const char *new_sha, int64_t old_us, const char *old_sha);

/* Builds the index from the bundles (a schema-2 store) and writes schema
 * version 3 with its last chunk. *built (may be NULL) gets the count. */
int store_bundle_index_build(store_t *st, size_t *built, pith_err_t *err);

/* store_check's part: every bundle has its two entries, and no others. */
int store_bundle_index_audit(store_t *st, void (*problem)(void *arg, const char *line),
			     void *arg, pith_err_t *err);

/* ---- the change log (changes.c) ---- */

/* What a change entry says of a record's bundle; has 0 when none. */
typedef struct store_chg_bundle {
	int has;
	uint8_t sha[32];
	char built_at[STORE_BUILT_AT_MAX + 1];
} store_chg_bundle_t;

/* The record's current entry: 1 with its sequence number and bundle part
 * (*bundle), 0 if it has none, or a negative code. */
int store_change_get(store_t *st, const uint8_t skey[STORE_SKEY_LEN], uint64_t *seq,
		     store_chg_bundle_t *bundle, pith_err_t *err);

/* Adds to ws the entries of skey's change number seq (state hash, bundle)
 * and the delete of its previous entry old_seq (0: none). */
void store_change_write(store_wsink_t *ws, const uint8_t skey[STORE_SKEY_LEN], uint64_t seq,
			uint64_t old_seq, const uint8_t state_hash[32],
			const store_chg_bundle_t *bundle);

/* Adds to ws the deletes of skey's entries, its change number seq: the
 * record is gone (a schema-6 upgrade removed all it had). */
void store_change_delete(store_wsink_t *ws, const uint8_t skey[STORE_SKEY_LEN], uint64_t seq);

/* A bundle's part of a change entry: its hash and built_at text. */
int store_chg_bundle_of(const json_value_t *bundle, store_chg_bundle_t *out, pith_err_t *err);

/* Logs every record of a schema-4 store, in SKEY order, numbered from 1,
 * and writes schema version 5 with the last chunk; *logged (may be NULL)
 * counts them. Starts by clearing the log, so a build cut short is done
 * again from scratch. */
int store_changes_build(store_t *st, uint64_t *logged, pith_err_t *err);

/* At open: the sequence number from the greatest 's' key. */
int store_changes_recover(store_t *st, pith_err_t *err);

/* store_check's part, for one record (key k, summary v): it has its
 * entry, 's' and 'p' agree, with the record's state hash and newest
 * bundle. Nothing to do (0) when the store has no change log. */
int store_changes_audit_record(store_t *st, const uint8_t *k, const uint8_t *v, size_t vl,
			       void (*problem)(void *arg, const char *line), void *arg,
			       pith_err_t *err);
/* And for the whole log: no entries but those of the nrec records. */
int store_changes_audit(store_t *st, uint64_t nrec,
			void (*problem)(void *arg, const char *line), void *arg, pith_err_t *err);

/* ---- the timestamp rule (time_rule.c) ---- */

/* NULL if every timestamp of the event object ev passes the rule
 * (docs/merge.md, T-*: created_at by pith_time_parse_valid's
 * PITH_TIME_SECONDS, signature.signed_at by PITH_TIME_FRACTION), else the
 * name of the first that fails (absent or not a string fails too). */
const char *store_event_time_fault(const json_value_t *ev);

/* The same for a bundle object: built_at, bundle_signature.signed_at if
 * it is a string (B-SIGNATURE), and each of its events' (B-EVENTS).
 * Writes the failing field's name, e.g. "events[3].created_at", to what. */
int store_bundle_time_fault(const json_value_t *bundle, char *what, size_t whatlen);

/* What the schema-6 upgrade did. */
typedef struct store_time_rule_stats {
	uint64_t events, bundles; /* removed */
	uint64_t records;         /* recomputed (and logged) */
	uint64_t records_gone;    /* of those, left with nothing: removed */
} store_time_rule_stats_t;

/* Opens of a schema-5 store (read-write): removes every event and bundle
 * outside the timestamp rule with all that indexes or counts them,
 * recomputes each affected record's state, summary and alias claims as a
 * commit would, logs it in the change log (or removes a record left with
 * no event and no bundle), one synced WriteBatch per few records, each
 * record whole in one; then writes schema version 6. A step cut short
 * finds the items still left at the next open. Needs the counters and
 * the change log's sequence loaded. The store's notice hook is told of
 * each removed event and bundle (the first STORE_TIME_RULE_SAY of each). */
#define STORE_TIME_RULE_SAY 20
int store_time_rule_upgrade(store_t *st, store_time_rule_stats_t *out, pith_err_t *err);

/* store_check's part for bundles: each stored bundle passes the rule. */
int store_time_rule_audit_bundles(store_t *st, void (*problem)(void *arg, const char *line),
				  void *arg, pith_err_t *err);

/* ---- alias claims and record summaries (alias.c) ---- */

typedef struct store_claim {
	uint8_t key[STORE_ALIAS_KEY_MAX]; /* kind '\0' value */
	size_t klen;
	uint8_t rank[STORE_ALIAS_RANK_LEN]; /* source, built_at: greater wins */
} store_claim_t;

typedef struct store_claims {
	store_claim_t *c;
	size_t n, cap;
} store_claims_t;

/* The aliases a record claims: those of its newest bundle (bundle_aliases,
 * may be NULL; ranked by the bundle's built_us) and those derived from its
 * canonical record (may be NULL). Sorted, one claim per alias. */
int store_claims_make(store_claims_t *out, const json_value_t *bundle_aliases, int64_t built_us,
		      const json_value_t *record, const char *pith);
void store_claims_release(store_claims_t *c);

/* The aliases entry key of one claim: akey '\0' pith. */
size_t store_alias_entry_key(const uint8_t *akey, size_t klen, const char *pith,
			     uint8_t out[STORE_ALIAS_ENTRY_MAX]);

/* A decoded record summary; claims point into the value. */
typedef struct store_rec {
	uint64_t events;
	uint8_t hash[32];
	int has_bundle;
	size_t nclaims;
	const uint8_t *claims, *claims_end;
} store_rec_t;

int store_rec_encode(pith_buf_t *out, uint64_t events, const uint8_t hash[32], int has_bundle,
		     const store_claims_t *claims);
/* 0, or PITH_EIO if v is not a well-formed summary. */
int store_rec_decode(const uint8_t *v, size_t vl, store_rec_t *out);
/* A records entry (key k, summary v) as a store_record_info_t; PITH_EIO
 * (with err) if malformed. */
int store_record_info_decode(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
			     store_record_info_t *r, pith_err_t *err);
/* Walks the claimed aliases of a summary: 1 with the next, 0 at the end. */
int store_rec_claim_next(const uint8_t **p, const uint8_t *end, const uint8_t **key, size_t *klen);

/* Adds to ws the puts of now's claims for pith and the deletes of the
 * claims in old (the previous summary, or NULL) that now lacks. With
 * same_ranks (the record's bundle did not change, so a claim it had keeps
 * its rank) the claims old already has are not written again. */
void store_claims_write(store_wsink_t *ws, const char *pith, const store_rec_t *old,
			const store_claims_t *now, int same_ranks);

#endif
