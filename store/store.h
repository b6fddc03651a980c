/* The event store: one RocksDB database per node, behind an opaque store_t.
 *
 * It keeps every verified event, the newest verified registry bundle of
 * each record, the aliases of records, and the merged state of each record
 * (pith-open-graph-merge-v1, proto/merge.h), recomputed per subject on
 * ingest. The key schema is in store/keys.h; docs/store.md describes the
 * atomicity and durability contracts.
 *
 * Contracts shared by every function here:
 * - Callers verify before they ingest: events with pith_event_parse (or
 *   pith_event_verify_value) against a trust store, bundles with
 *   pith_bundle_verify. The store re-checks hashes but not signatures.
 * - Every ingest is one atomic RocksDB WriteBatch written with the WAL and
 *   synced before the call returns 0: an event reported stored survives a
 *   crash, and a crash leaves either all of a batch or none of it.
 * - Writers are serialised by a mutex inside store_t; readers need none.
 *   Only one process may open a store directory at a time (RocksDB's
 *   lock file); a second store_open fails with PITH_EIO.
 * - Functions return 0 or a negative PITH_E* code and fill err (may be NULL)
 *   with one line saying what failed. */
#ifndef PITH_STORE_H
#define PITH_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "stateroot.h"
#include "event.h"
#include "json.h"
#include "trust.h"

typedef struct store store_t;

typedef struct store_opts {
	int create;    /* create the database if the directory has none */
	int read_only; /* open without the write lock; every put fails */
	/* Registry keys for the merge (pith_merge_ex): borrowed, must outlive
	 * the store; NULL for the built-in registry key only. Cached states are
	 * computed with these keys, so open a store with the same registry keys
	 * every time (store_check reports states that differ). */
	const pith_trust_t *registry;
	/* Bytes of the block cache all column families share (uncompressed
	 * blocks, index and filter blocks); 0 for 64 MiB. Random reads (an
	 * event by id, the HTTP views) decompress a whole block per miss;
	 * catch-up reads documents in time order (docs/store.md). */
	size_t cache_bytes;
	/* Bytes of write-ahead log kept at most before RocksDB flushes the
	 * column families holding the oldest log (all of them with
	 * atomic_flush); 0 for 1 GiB (docs/store.md,
	 * Durability). */
	size_t wal_bytes;
	/* Commits without the write-ahead log (a bulk import, docs/store.md
	 * "Durability"): a commit is then durable only once RocksDB has
	 * flushed it, which it does for every column family at once
	 * (atomic_flush) whenever a memtable fills, at store_flush and
	 * store_unlogged_end, and when the store is closed. store_counts_durable says how far that is. Every point of
	 * the store stays consistent after a crash (each flush is one atomic
	 * group of all families); what was committed after the last flush is
	 * lost. Ignored with read_only. */
	int unlogged;
	/* Opens with RocksDB's atomic_flush (implied by unlogged): every
	 * flush, RocksDB's own or store_flush's, writes the memtables of all
	 * column families as one group. Needed by store_unlogged_begin, which
	 * a node uses for a catch-up. */
	int atomic_flush;
	/* For a process that writes a bulk of records and reads none of their
	 * states or alias claims meanwhile (`pithctl import`): the families
	 * a commit only writes (states, alias claims) keep their memtables as
	 * unsorted vectors, sorted once when flushed (RocksDB's VectorRep),
	 * instead of skip lists that cost a descent through cold memory per
	 * insert. A read of those families that reaches a memtable then
	 * sorts a copy of it: correct, but slow, so never for a node that
	 * serves reads while it writes. Ignored with read_only. */
	int unsorted_write_only;
	/* For a node: a catch-up that store_side_want marks, into a store
	 * that holds nothing, writes states and alias claims into side
	 * families with unsorted vector memtables (as unsorted_write_only,
	 * plus a whole-key memtable filter so that a read of a record not in
	 * the memtable sorts nothing), and store_side_end moves them into
	 * place as sorted table files (docs/store.md, "Bulk loading"). Every
	 * read meanwhile goes to the side families. Ignored with read_only. */
	int bulk_side;
	/* For a process that fills a store that holds no record when opened
	 * (`pithctl import` into a new store, a new node's first catch-up):
	 * the store keeps in memory a
	 * fingerprint of every record it writes (8 bytes a slot: some 64 MiB
	 * for 5 million records), so a commit knows that any other record is
	 * new without reading `records`, and then reads nothing at all for it;
	 * in bulk mode (either) the index families a commit reads
	 * only by key then wait for level 0 to hold STORE_BULK_L0_WRITTEN
	 * files, like states and claims (docs/store.md, "Bulk loading").
	 * Ignored with read_only or when the store holds a record. */
	int fresh_records;
	/* Told (if not NULL) before and after a read-write open upgrades an
	 * older store, which can take minutes for millions of events: one
	 * line each, for the log or stderr; and, upgrading a schema-5 store,
	 * a line for each event or bundle removed as outside the timestamp
	 * rule (the first 20 of each, then how many more). */
	void (*notice)(void *arg, const char *line);
	void *notice_arg;
	/* Told (if not NULL) of every database error as it happens, from
	 * whichever thread met it (store_errors_get counts them): what is
	 * STORE_OP_READ or STORE_OP_WRITE, line says what failed. Runs
	 * without the store's locks; it must not call back into the store
	 * and should rate-limit what it logs (a corrupted block fails every
	 * read of it, a full disk every commit). */
	void (*on_error)(void *arg, int what, const char *line);
	void *on_error_arg;
} store_opts_t;

/* Opens (or with opts->create, creates) the store in dir. opts may be NULL
 * (create, read-write). *out is owned by the caller: store_close it. */
int store_open(const char *dir, const store_opts_t *opts, store_t **out, pith_err_t *err);
/* Flushes and closes; NULL-tolerant. */
void store_close_(store_t *st);
#define store_close(s) do { store_close_(s); (s) = NULL; } while (0)

/* What happened to one event handed to the store. */
typedef enum store_outcome {
	STORE_PENDING = 0, /* added to a batch that is not committed yet */
	STORE_STORED,      /* a new event, now stored */
	STORE_DUPLICATE,   /* already stored (or earlier in the batch); kept as is */
	STORE_RESIGNED,    /* already stored with a signature block that lost to
			    * this copy's (pith_merge_sigblock_cmp); the stored
			    * bytes now carry this block; the state is unchanged */
} store_outcome_t;

/* What happened to a bundle. */
typedef enum store_bundle_outcome {
	STORE_BUNDLE_PENDING = 0,
	STORE_BUNDLE_NEWER, /* now the record's newest bundle: its aliases apply */
	STORE_BUNDLE_OLDER, /* a newer one is kept; its events were still ingested */
	STORE_BUNDLE_SAME,  /* this very bundle is the one kept (same built_at and
			     * bundle_sha256): nothing changed. Counted with the
			     * older ones in store_commit_stats_t */
} store_bundle_outcome_t;

const char *store_outcome_name(store_outcome_t o);

/* The RocksDB version the store was built against ("7.8.3"): RocksDB's C
 * API has no run-time version, and the library's soname pins the minor
 * version (`--version` prints it). Static text. */
const char *store_rocksdb_version(void);

/* ---- Ingest in batches ---------------------------------------------------
 * A batch gathers events and bundles and commits them as ONE WriteBatch:
 * the events, their subj and time index entries, each touched record's
 * state recomputed once from all of its events, its summary, its aliases
 * and the meta counters. Duplicates are decided at commit time, under the
 * store's write lock, against the database and the rest of the batch. */
typedef struct store_batch store_batch_t;

/* A new empty batch for st (which must outlive it). NULL on OOM. */
store_batch_t *store_batch_new(store_t *st);
/* Discards whatever was not committed. NULL-tolerant. */
void store_batch_free_(store_batch_t *b);
#define store_batch_free(b) do { store_batch_free_(b); (b) = NULL; } while (0)

/* Lets n threads (the committing one and n - 1 helpers, started here
 * with the calling thread's priority, named pith-lane) compute the states of a commit's records in parallel; the writes stay
 * in the order and bytes of a commit without them. n <= 1 stops the
 * helpers. 0, or a negative code (then none run). */
int store_batch_set_lanes(store_batch_t *b, int n, pith_err_t *err);

/* Adds a verified event; the batch takes ownership of ev in every case.
 * canon, if non-NULL, holds the event's canonical bytes (pith_event_canon)
 * computed by the caller, e.g. on a worker thread; the batch takes its
 * buffer and resets *canon. Returns the entry's index (>= 0) for
 * store_batch_outcome, or a negative code. */
int store_batch_add_event(store_batch_t *b, pith_event_t *ev, pith_buf_t *canon,
			  pith_err_t *err);

/* Adds a bundle verified with pith_bundle_verify, and its events; the batch
 * takes ownership of doc in every case. Returns the bundle's index, for
 * store_batch_bundle_outcome, or a negative code (the bundle is malformed
 * in a way verification should have caught; nothing of it is added). */
int store_batch_add_bundle(store_batch_t *b, json_doc_t *doc, pith_err_t *err);

/* Number of events (bundle events included) added since the last commit. */
size_t store_batch_count(const store_batch_t *b);

typedef struct store_counts {
	uint64_t events, records, bundles;
} store_counts_t;

typedef struct store_commit_stats {
	size_t stored, duplicate, resigned;   /* events */
	size_t bundles_newer, bundles_older;  /* bundles */
	size_t records_touched;               /* states recomputed */
	store_counts_t counts;                /* the store's counters as the commit left them */
} store_commit_stats_t;

/* Writes the batch atomically and durably (synced WAL). On success the
 * outcomes of its entries can be read until the next add, and the batch is
 * otherwise empty again. On failure nothing was written and the batch is
 * empty. stats may be NULL. */
int store_batch_commit(store_batch_t *b, store_commit_stats_t *stats, pith_err_t *err);
/* The next commit of b must outlive a crash although the store commits
 * without the log (store_unlogged_begin): someone is told it is stored.
 * That commit first flushes what earlier commits left in the memtables,
 * then goes through the log. No effect on a logged store. */
void store_batch_need_durable(store_batch_t *b);

/* Outcome of the entry with this index after the last commit. */
store_outcome_t store_batch_outcome(const store_batch_t *b, int index);
store_bundle_outcome_t store_batch_bundle_outcome(const store_batch_t *b, int index);

/* ---- Ingest one item ----------------------------------------------------- */

/* Stores one verified event (borrowed: the caller still owns ev) in its own
 * batch. *out (may be NULL) gets the outcome. */
int store_event_put(store_t *st, const pith_event_t *ev, store_outcome_t *out,
		    pith_err_t *err);

/* Stores one verified bundle (borrowed) and its events in one batch. */
int store_bundle_put(store_t *st, const json_value_t *bundle,
		     store_bundle_outcome_t *out, store_commit_stats_t *stats,
		     pith_err_t *err);

/* ---- Reading --------------------------------------------------------------
 * Lookups append to out (a caller-owned buffer) and return PITH_ENOTFOUND
 * if there is nothing to return. */

/* Canonical bytes of the stored event with this id digest. */
int store_event_get(store_t *st, const uint8_t id[static 32], pith_buf_t *out,
		    pith_err_t *err);
/* Whether the event is stored: 1, 0, or a negative code; or
 * STORE_HAS_UNKNOWN while a new node's first catch-up writes the index of
 * events by id aside (store_opts_t.bulk_side), where finding an id would
 * sort a memtable of hundreds of thousands of ids (docs/store.md, "Bulk
 * loading"): by time, store_event_has_at knows. */
#define STORE_HAS_UNKNOWN 2
int store_event_has(store_t *st, const uint8_t id[static 32], pith_err_t *err);
/* The same for an event created at created_us (µs, as pith_event_t has
 * it): 1, 0 or a negative code, read from its document's key while the
 * index of events is aside. */
int store_event_has_at(store_t *st, const uint8_t id[static 32], int64_t created_us,
		       pith_err_t *err);
/* Whether the index of events by id is aside now (then store_event_has
 * answers STORE_HAS_UNKNOWN and store_events_get_many_at finds only the
 * ids given with their times). */
int store_events_aside(store_t *st);

/* "sha256:HEX" or bare HEX (64 lower-case hex) to the id digest. */
int store_event_id_parse(const char *s, uint8_t id[static 32], pith_err_t *err);

/* Canonical state, newest bundle, by full pith number ("pith:YYYY:BODY"). */
int store_state_get(store_t *st, const char *pith_number, pith_buf_t *out,
		    pith_err_t *err);
int store_bundle_get(store_t *st, const char *pith_number, pith_buf_t *out,
		     pith_err_t *err);

/* Resolves an identifier in any form pith_id_parse accepts (full pith
 * number, 26-character body, pith:SHORT or a bare prefix of 8 to 25
 * characters, arxiv:ID, doi:DOI) to the full pith number of a stored
 * record. PITH_ENOTFOUND if none, PITH_EINVAL if malformed or if a prefix
 * names more than one record. */
int store_resolve(store_t *st, const char *id, char out[static PITH_NUMBER_LEN + 1],
		  pith_err_t *err);

typedef struct store_record_info {
	char pith_number[PITH_NUMBER_LEN + 1];
	uint64_t event_count;
	uint8_t state_hash[32];
	int has_bundle;
} store_record_info_t;

/* Summary of one record. */
int store_record_get(store_t *st, const char *pith_number, store_record_info_t *out,
		     pith_err_t *err);

/* Iteration callbacks return 0 to go on, anything else to stop (the
 * iteration then returns that value). Pointers are valid during the call. */
typedef int (*store_record_fn)(void *arg, const store_record_info_t *rec);
typedef int (*store_event_fn)(void *arg, const uint8_t id[32], const uint8_t *bytes,
			      size_t len);
typedef int (*store_time_fn)(void *arg, int64_t created_us, const uint8_t id[32]);

/* Stored events by id, STORE_GET_MANY at a time through RocksDB's batched
 * MultiGet (one pass over each file for all the keys): fn is called for
 * each id in the order given, with its canonical bytes, or with NULL and
 * 0 when it is not stored or could not be read; its return value is
 * ignored. The bytes are valid during the call only. Returns how many
 * could not be read (a database error, such as a corrupted block: counted
 * in store_errors_get and told to store_opts_t.on_error, the first one's
 * message in err), 0 when every id was either read or not stored. */
#define STORE_GET_MANY 64
size_t store_events_get_many(store_t *st, const uint8_t (*ids)[32], size_t n,
			     store_event_fn fn, void *arg, pith_err_t *err);
/* The same, where the caller may know when each event was created
 * (created_us[i], microseconds as the time index has them, or
 * STORE_TIME_NONE): a known one's document is read straight from docs by
 * its time and id, without the lookup of the id in events (one random
 * block of a large family per event, which a peer serving a catch-up of
 * millions of events read from the page cache and decompressed for each;
 * docs/store.md). A time that finds nothing is only a wrong guess: that
 * id is then looked up by id as without it. Same answers as
 * store_events_get_many, whatever the times say, except while the index
 * of events is aside (store_events_aside): then an id is found only at
 * the time given with it. */
#define STORE_TIME_NONE INT64_MIN
size_t store_events_get_many_at(store_t *st, const uint8_t (*ids)[32],
				const int64_t *created_us, size_t n, store_event_fn fn,
				void *arg, pith_err_t *err);

/* ---- The state root's leaves (proto/stateroot.h; stateroot_leaves.c) ----
 * Each record's (pith number, state hash), read from the records family. */

/* pith_sr_list_fn over a store (ctx: the store_t): the records whose key
 * begins with the first plen bits of key, in key order (one or two short
 * scans). */
int store_sr_list(void *ctx, const uint8_t key[PITH_SR_KEY_BYTES], unsigned plen,
		  pith_sr_leaf_t *out, size_t cap, size_t *n);
/* The same through a reader: one iterator over the records for many
 * listings (a flush's), which sees the family as it was when the reader
 * was made (RocksDB's implicit snapshot), and saves making an iterator
 * for each. rd NULL: as store_sr_list. */
typedef struct store_sr_reader store_sr_reader_t;
store_sr_reader_t *store_sr_reader_new(store_t *st, pith_err_t *err);
void store_sr_reader_free_(store_sr_reader_t *rd);
#define store_sr_reader_free(x) do { store_sr_reader_free_(x); (x) = NULL; } while (0)
int store_sr_list_in(store_t *st, store_sr_reader_t *rd, const uint8_t key[PITH_SR_KEY_BYTES],
		     unsigned plen, pith_sr_leaf_t *out, size_t cap, size_t *n);
/* Every record's leaf in key order (one scan, then a sort), for
 * pith_sr_build: *out (malloc'd, the caller frees) and its count. One
 * caller at a time (the sort's comparison has a static). About 93 bytes a
 * record while it runs (the leaves, their keys, an index; sorted in
 * place). */
int store_sr_leaves(store_t *st, pith_sr_leaf_t **out, size_t *n, pith_err_t *err);

/* Every record, in subject-key order (body, then year). */
int store_records_each(store_t *st, store_record_fn fn, void *arg, pith_err_t *err);
/* Merged states (state.json's bytes) in subject-key order, of the records
 * after the one named by after (NULL or "": from the first), at most
 * limit of them (0: no limit), in one forward pass that reads each table
 * block once and leaves the block cache to the point reads: for building
 * something from every state (the search index's first pass), where a
 * read per record at random would load a whole block each time. last
 * (may be NULL) gets the last record listed, "" when none was. The
 * callback's pointers are valid during the call. */
typedef int (*store_state_fn)(void *arg, const char *pith_number, const uint8_t *bytes,
			      size_t len);
int store_states_each(store_t *st, const char *after, size_t limit, store_state_fn fn, void *arg,
		      char *last, pith_err_t *err);
/* Every event of one record (pith_number non-NULL) or of all records,
 * grouped by record and in (created_at, event id) order within each. */
int store_events_each(store_t *st, const char *pith_number, store_event_fn fn, void *arg,
		      pith_err_t *err);
/* The time index: event ids with from_us <= created_at < to_us, in
 * (created_at, event id) order. */
int store_time_each(store_t *st, int64_t from_us, int64_t to_us, store_time_fn fn,
		    void *arg, pith_err_t *err);

/* The same from a cursor: ids strictly after (after_us, after_id) in
 * that order, with created_at < to_us. after_id NULL: every id with
 * created_at >= after_us (as store_time_each). For paging: pass the last
 * (created_us, id) a callback saw to resume right after it. */
int store_time_each_after(store_t *st, int64_t after_us, const uint8_t *after_id, int64_t to_us,
			  store_time_fn fn, void *arg, pith_err_t *err);

/* ---- Bundle order --------------------------------------------------------
 * Which of two registry bundles of a record is the newer one
 * (docs/merge.md): the greater built_at, ties to the smaller bundle_sha256.
 * The store keeps only the newest; peers compare before they fetch. */

/* > 0 if (a_us, a_sha) is newer than (b_us, b_sha), < 0 if older, 0 if
 * they are the same bundle. */
int store_bundle_order(int64_t a_us, const uint8_t a_sha[static 32], int64_t b_us,
		       const uint8_t b_sha[static 32]);

/* built_at (µs) and bundle_sha256 of the newest stored bundle of
 * pith_number. PITH_ENOTFOUND if the record has none. */
int store_bundle_newest(store_t *st, const char *pith_number, int64_t *built_us,
			uint8_t sha[static 32], pith_err_t *err);

/* Would a bundle (built_us, sha) of pith_number replace the stored one?
 * 1 if so (or if none is stored), 0 if the stored one is as new or newer,
 * negative on a database error. */
int store_bundle_is_newer(store_t *st, const char *pith_number, int64_t built_us,
			  const uint8_t sha[static 32], pith_err_t *err);

/* ---- The bundle index -------------------------------------------------------
 * Each record's newest bundle as (built_at, bundle_sha256), kept current in
 * the commit that stores a newer one: the items of bundle reconciliation
 * (docs/sync.md). A store opened read-only before it was ever opened by
 * this version has none: these return PITH_EINVAL then. */

/* The record whose newest stored bundle has this hash, and its built_at.
 * PITH_ENOTFOUND if no record's newest bundle has it (any more). */
int store_bundle_ref_get(store_t *st, const uint8_t sha[static 32], int64_t *built_us,
			 char pith[static PITH_NUMBER_LEN + 1], pith_err_t *err);

/* Every record's newest bundle, in (built_at, bundle_sha256) order. */
typedef int (*store_bundle_ref_fn)(void *arg, int64_t built_us, const uint8_t sha[32],
				   const char *pith_number);
int store_bundle_refs_each(store_t *st, store_bundle_ref_fn fn, void *arg, pith_err_t *err);

/* After a commit: if the bundle with this index became its record's newest
 * and replaced a stored one, 1 with that one's built_at and hash (what
 * leaves the reconciliation set); else 0. */
int store_batch_bundle_replaced(const store_batch_t *b, int index, int64_t *built_us,
				uint8_t sha[static 32]);

/* ---- The change log ---------------------------------------------------------
 * Every commit that changes a record (a new event of it stored, or a newer
 * bundle of it) logs the record under the next number of a persistent,
 * increasing sequence, in the same WriteBatch, and drops its earlier entry:
 * each record is listed once, at its latest change, in commit order. A
 * re-signed copy of a stored event or an older bundle changes nothing and
 * is not logged. The node serves it as GET /api/changes (docs/http.md).
 * A store opened read-only before it was ever opened by a version with
 * the log has none: these return PITH_EINVAL then. */

/* Bytes of a bundle's built_at text: "YYYY-MM-DDTHH:MM:SS.fffffffff+00:00"
 * is 35, the longest pith_time_parse takes. */
#define STORE_BUILT_AT_MAX 40

typedef struct store_change {
	uint64_t seq;                             /* > 0 */
	char pith_number[PITH_NUMBER_LEN + 1];
	uint8_t state_hash[32];                   /* state.json's state_sha256 */
	int has_bundle;                           /* the record's newest bundle: */
	uint8_t bundle_sha[32];                   /*   its bundle_sha256 */
	char built_at[STORE_BUILT_AT_MAX + 1];    /*   its built_at, as the bundle has it */
} store_change_t;

typedef int (*store_change_fn)(void *arg, const store_change_t *ch);

/* The records changed after sequence number after (0: from the start), in
 * sequence order, at most limit of them (0: no limit). *next (may be NULL)
 * gets the sequence number of the last one listed, or after when none
 * was. The callback's pointer is valid during the call. */
int store_changes_each(store_t *st, uint64_t after, size_t limit, store_change_fn fn, void *arg,
		       uint64_t *next, pith_err_t *err);

/* The same newest first: the records whose latest change is numbered
 * below before (0: from the newest), in descending sequence order, at most
 * limit (0: no limit). *next (may be NULL) gets the sequence number of the
 * last one listed (pass it back as before for the next page), or 0 when
 * none was. A record changed while a client pages moves to the front: it
 * is never listed twice on later pages. */
int store_changes_each_before(store_t *st, uint64_t before, size_t limit, store_change_fn fn,
			      void *arg, uint64_t *next, pith_err_t *err);

/* The built_at of the record's newest stored bundle, as the bundle has it
 * (its change log entry: no bundle read). PITH_ENOTFOUND without one. */
int store_built_at_get(store_t *st, const char *pith_number, char out[static STORE_BUILT_AT_MAX + 1],
		       pith_err_t *err);

/* The sequence number of the record's latest change (its change log
 * entry: one point read, none while no commit has happened since the
 * record's was last read: kept in 16 MiB of the store's, changes.c), for
 * the HTTP views' Last-Modified (docs/http.md). PITH_ENOTFOUND without
 * an entry. Any thread. */
int store_change_seq_get(store_t *st, const char *pith_number, uint64_t *seq, pith_err_t *err);

/* The greatest sequence number given so far (0: none), as of the last
 * commit; while the store is unlogged, as of the last flush. */
uint64_t store_changes_last(store_t *st);

/* The meta counters, as of the last commit. */
void store_counts_get(store_t *st, store_counts_t *out);
/* The meta counters as they are on disk: for a store committing without
 * the log, as of the last flush (the commits after it would be lost by
 * a crash); otherwise as of the last commit (every commit is synced). */
int store_counts_durable(store_t *st, store_counts_t *out, pith_err_t *err);

/* What the store takes, for status and metrics: table files (all column
 * families), write-ahead logs (bounded by store_opts_t.wal_bytes), the
 * memtables' memory, and RocksDB's estimate of the bytes compaction still
 * has to rewrite. Reads RocksDB properties and lists the directory. */
typedef struct store_usage {
	uint64_t sst_bytes, wal_bytes, memtable_bytes, pending_compaction_bytes;
	int compacting; /* RocksDB is flushing or compacting, or wants to */
} store_usage_t;

void store_usage_get(store_t *st, store_usage_t *out);

/* ---- The page cache at start ------------------------------------------------
 * Reads the table files of the families the HTTP read side looks records
 * up in (records, aliases, states: a record's documents and a resolve)
 * once, front to back, so that the kernel's page cache holds them and
 * random reads of a store far larger than the block cache stop waiting on
 * the disk (docs/store.md, "The page cache at start"). Families are taken
 * smallest first, files that would take the total past budget bytes are
 * left out. Stops early when *stop (may be NULL) becomes nonzero. For a
 * thread of its own: it reads for as long as the disk takes (a 10M-event
 * store's 5.7 GB: 1-14 s on this machine). Files a compaction removed in the
 * meantime are counted as missing, not errors. */
typedef struct store_warm {
	uint64_t total;   /* bytes of those families' table files */
	uint64_t planned; /* of them, within the budget */
	uint64_t bytes;   /* read */
	uint32_t files, missing, skipped;
} store_warm_t;

int store_warm(store_t *st, uint64_t budget, const atomic_int *stop, store_warm_t *out,
	       pith_err_t *err);

/* ---- Failures ---------------------------------------------------------------
 * A database error is never taken for "not found": reads that fail
 * (RocksDB's Corruption or IOError: a block whose checksum does not
 * match, a file that cannot be read) return PITH_EIO with the message,
 * iterations check the iterator's status, and every such error is counted
 * here and told to store_opts_t.on_error. A failed write (a commit, a
 * flush) marks the store not writable until a write succeeds again:
 * after a full disk RocksDB refuses every write until it has recovered by
 * itself, which it does once enough space is free (docs/store.md,
 * "Failures"); store_write_probe tells when. */
enum { STORE_OP_READ = 1, STORE_OP_WRITE = 2 };

typedef struct store_errors {
	uint64_t read_errors, write_errors; /* since the open */
	int writable;             /* 0 from a failed write until one succeeds */
	int64_t last_read_us;     /* wall clock (µs) of the last read error, 0 none */
	int64_t last_write_us;    /* and of the last write error */
	char last_error[256];     /* the last error's message ("" none) */
} store_errors_t;

void store_errors_get(store_t *st, store_errors_t *out);

/* How long a failed read keeps the store unhealthy (store_is_healthy):
 * a corrupted block fails again whenever it is read, so a node serving
 * it stays reported for as long as something reads it, and a one-off
 * error is forgotten after a minute. */
#define STORE_READ_ERROR_WINDOW_US (60 * 1000000LL)

/* 1 if the store takes writes and no read failed in the last window_us
 * (wall clock), else 0 with why (may be NULL) saying which, and the last
 * error's message. What /healthz answers (docs/http.md). */
int store_is_healthy(store_t *st, int64_t window_us, char *why, size_t whylen);

/* An empty synced write, under the write lock, to learn whether the
 * store takes writes again (RocksDB refuses every write, even an empty
 * one, while it is in its background-error state). 0 if it did (the
 * store is writable again), else PITH_EIO with err filled; also PITH_EIO
 * without trying when a commit holds the write lock (it will tell).
 * Costs one log sync: call it now and then while store_errors_get says
 * not writable. */
int store_write_probe(store_t *st, pith_err_t *err);

/* ---- Maintenance ---------------------------------------------------------- */

/* Audits the whole store: every event parses and hashes to its key; every
 * event has exactly its subj and time entries and every index entry its
 * event; every cached state, record summary and counter equals a fresh
 * recomputation; every alias names a stored record; every bundle has its
 * two bundle_index entries and there are no others; every record has
 * exactly one change log entry, with its state hash and newest bundle;
 * every event's and bundle's timestamps pass the rule of docs/merge.md
 * (T-*; a schema-5 store opened read-only may still hold some: its next
 * read-write open removes them). report (may be NULL)
 * gets one line per problem. *problems gets the count. Returns 0 when the
 * audit ran (whatever it found), negative on a database error. */
typedef void (*store_report_fn)(void *arg, const char *line);
int store_check(store_t *st, store_report_fn report, void *arg, size_t *problems,
		pith_err_t *err);
/* The same on threads worker threads (0: one per core). The report is
 * the same whatever the number: problems come in key order. */
int store_check_threads(store_t *st, int threads, store_report_fn report, void *arg,
			size_t *problems, pith_err_t *err);

/* Writes the memtables out as (compressed) table files and waits, so the
 * write-ahead log holding the same bytes uncompressed can be dropped; for
 * the end of a bulk import. A logged store's durability does not depend on
 * it; an unlogged one's commits are durable once it returns. With
 * atomic_flush the families are written as one group (a checkpoint's
 * flush, the one call of RocksDB 7.8's C API that flushes every family
 * together; the checkpoint is removed at once), otherwise one by one. */
int store_flush(store_t *st, pith_err_t *err);

/* Commits without the write-ahead log from now on, for a catch-up whose
 * events can be fetched again (docs/store.md "Durability"): a crash keeps
 * every commit up to the last flush, RocksDB's own (a memtable filled:
 * every family at once) or store_flush's, and loses the rest, leaving a
 * consistent store. While unlogged, the change log is read only up to
 * the last change known flushed (store_changes_each and _last), so that
 * a follower never holds a sequence number a crash could give to
 * another change; and a commit that must outlive a crash
 * (store_batch_need_durable) flushes the store first, then goes through
 * the log. Needs atomic_flush; PITH_EINVAL otherwise. */
int store_unlogged_begin(store_t *st, pith_err_t *err);
/* Flushes (store_flush), then commits through the log again. A no-op on a
 * logged store. */
int store_unlogged_end(store_t *st, pith_err_t *err);
/* 1 while commits skip the log. */
int store_is_unlogged(store_t *st);

/* A RocksDB integer property of column family cf ("rocksdb.num-files-at-
 * level0", ...): 0, or -1 when RocksDB has no such property. */
int store_cf_property(store_t *st, int cf, const char *name, uint64_t *v);

/* Bulk loading (docs/store.md, "Bulk loading"): between begin and end,
 * level 0 of the index families (ids, pith numbers, aliases: small
 * entries at random keys) may hold up to STORE_BULK_L0_INDEX table files
 * before RocksDB compacts them, the document families
 * STORE_BULK_L0_DOCS, so each compaction takes in 4 and 2 times as much
 * as it otherwise would: fewer rewrites of the last level, the cost
 * that grew with the store's size. STORE_BULK_IMPORT doubles both and
 * slows writes 24 files past the trigger, stopping them 48 past it: for a
 * caller that settles at its end anyway (pithctl import), it saves more
 * compaction in all; a node catching up, which serves on while the put-off
 * compactions run, uses STORE_BULK_SYNC. Reads meanwhile look at more
 * files. end puts back the usual triggers, which schedules the
 * compactions they call for; settle: waits until RocksDB has none left to
 * do, so the store is left as it would have been without. Nothing about
 * durability changes. A process killed in between leaves the extra files
 * to the next open's compactions. */
#define STORE_BULK_L0_INDEX 16
#define STORE_BULK_L0_DOCS 8
/* The states and aliases families are never read by a commit (it reads
 * summaries, stored events and change log entries, and writes states and
 * alias claims), so in both modes their level 0 is left to grow to this
 * many files (a catch-up writes both at random keys: every compaction
 * rewrote all that was below) and compacted once, or once per 128
 * flushes in a larger catch-up (states flush 23 times per million events
 * at the registry's shape: some 5.5 million events); only HTTP's state reads
 * and resolves (and the search index, held for a catch-up) look at the
 * files meanwhile (docs/store.md, "Bulk loading"). Bounded so that the
 * table files held open stay well under a 1,024-descriptor limit. */
#define STORE_BULK_L0_WRITTEN 128
/* The side families of a new node's first catch-up (store_opts_t.bulk_side)
 * are rewritten whole by their move at its end, so any compaction of them
 * before is wasted: their level 0 waits for this many files (a 10M-event
 * catch-up at the registry's shape flushes some 250 times; pithd raises
 * its descriptor limit to 65,536 and RocksDB keeps a quarter of it open,
 * closing the least used table files beyond). */
#define STORE_BULK_L0_SIDE 1024
enum store_bulk_mode { STORE_BULK_SYNC, STORE_BULK_IMPORT };
int store_bulk_begin(store_t *st, enum store_bulk_mode mode, pith_err_t *err);
int store_bulk_end(store_t *st, int settle, pith_err_t *err);
/* With store_opts_t.bulk_side: the next commit, if the store then holds
 * nothing, puts states and alias claims into side families until
 * store_side_end. From any thread; does not wait. */
void store_side_want(store_t *st);
/* Whether side families are in use. */
int store_side_active(store_t *st);
/* Flushes the store, then writes each side family as of that moment as
 * sorted table files (some seconds per million records; commits go on,
 * into the side families, their keys logged), then under the write lock
 * ingests the files into its family (states, aliases), writes there
 * what the commits since changed, and drops it; 0 at once if none is in
 * use. Call it off the event loop; it sleeps 2 s before releasing the
 * dropped families. A read-write open does the same with side families
 * an interrupted catch-up left. */
int store_side_end(store_t *st, pith_err_t *err);
/* Makes a store_side_end under way, or any later one, stop early with an
 * error (a node's stop; the next read-write open moves the side
 * families). From any thread. */
void store_side_stop(store_t *st);

/* Flushes, then compacts every column family into its last level. */
int store_compact(store_t *st, pith_err_t *err);

/* Writes a consistent copy of the open store to dir (a RocksDB
 * checkpoint: memtables flushed, table files hard-linked when dir is on
 * the same filesystem, copied otherwise), while other threads keep
 * reading and writing. dir must not exist; its parent must. The copy
 * opens with store_open like any store. Blocks for the flush and the
 * links: call it off an event loop. */
int store_checkpoint(store_t *st, const char *dir, pith_err_t *err);

#endif
