/* The side families of a new node's first catch-up (store_opts_t.bulk_side,
 * docs/store.md "Bulk loading"): states, alias claims and the index of
 * events by id go to families of their own whose memtables are unsorted
 * vectors, sorted once at the flush, and are moved into `states`,
 * `aliases` and `events` as sorted table files when the catch-up ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

/* The families that have side families, by side index. */
static const int side_cfs[STORE_NSIDE] = {STORE_CF_STATES, STORE_CF_ALIASES, STORE_CF_EVENTS};
static const char *const side_names[STORE_NSIDE] = {"states.bulk", "aliases.bulk", "events.bulk"};

#define MOVE_DIR "bulk-move"           /* the move's table files, in the store's directory */
#define MOVE_FILE_BYTES (256ull << 20) /* keys and values per table file moved */
#define QUIESCE_POLL_NS 1000000        /* between looks at the readers' counts */
/* Per table file read by a move: a side family has up to 1,024 level-0
 * files (some 250 after a 10M-event catch-up), all read at once, each
 * through an iterator of its own with a buffer of this size (at 2 MiB,
 * some 500 MiB a family at 10M; docs/performance.md, issue 17, session 29) */
#define SIDE_READAHEAD (256u << 10)

const char *store_side_name(int i)
{
	return side_names[i];
}

int store_side_cf(int i)
{
	return side_cfs[i];
}

/* The options of side family i: its family's, with a vector memtable
 * (vector: a new one; else for a family found at open, which is only
 * moved) and a whole-key memtable filter, so that a read of a record not
 * in the memtable does not sort a copy of it. */
rocksdb_options_t *store_side_opts(store_t *st, int i, int vector)
{
	rocksdb_options_t *o = rocksdb_options_create_copy(st->cf_opts[side_cfs[i]]);
	if (vector) {
		rocksdb_options_set_memtable_vector_rep(o);
		rocksdb_options_set_memtable_prefix_bloom_size_ratio(o, 0.02);
		rocksdb_options_set_memtable_whole_key_filtering(o, 1);
	}
	return o;
}

void store_side_begin_locked(store_t *st)
{
	__atomic_store_n(&st->side_want, 0, __ATOMIC_RELAXED);
	if (st->side_on || !st->bulk_side || st->read_only)
		return;
	/* only into a store that holds nothing: the main families stay empty
	 * while the side ones are in use, so that reads take either */
	if (st->counts.events || st->counts.records || st->counts.bundles)
		return;
	rocksdb_column_family_handle_t *h[STORE_NSIDE] = {0};
	for (int i = 0; i < STORE_NSIDE; i++) {
		rocksdb_options_t *o = store_side_opts(st, i, 1);
		char *e = NULL;
		h[i] = rocksdb_create_column_family(st->db, o, side_names[i], &e);
		rocksdb_options_destroy(o);
		if (e || !h[i]) {
			store_say(st, "store %s: cannot create %s (%s): states, claims and "
				     "event ids go to their own families", st->dir, side_names[i],
				  e ? e : "?");
			rocksdb_free(e);
			h[i] = NULL;
			break;
		}
	}
	if (!h[STORE_NSIDE - 1]) {
		/* a family made before the failure is dropped; a crash between
		 * the two leaves it for the next open to move (it is empty) */
		for (int i = 0; i < STORE_NSIDE; i++) {
			if (!h[i])
				continue;
			char *e = NULL;
			rocksdb_drop_column_family(st->db, h[i], &e);
			rocksdb_free(e);
			rocksdb_column_family_handle_destroy(h[i]);
		}
		return;
	}
	for (int i = 0; i < STORE_NSIDE; i++) {
		st->side[i] = h[i];
		st->side_main[i] = st->cf[side_cfs[i]];
		__atomic_store_n(&st->cf[side_cfs[i]], h[i], __ATOMIC_RELEASE);
	}
	__atomic_store_n(&st->side_on, 1, __ATOMIC_RELEASE);
	store_l0_reset(st); /* the bulk mode's triggers for the new families */
	store_say(st, "store %s: states, claims and event ids go to side families until the catch-up "
		  "ends (docs/store.md, \"Bulk loading\")", st->dir);
}

void store_side_want(store_t *st)
{
	if (st->bulk_side && !st->read_only)
		__atomic_store_n(&st->side_want, 1, __ATOMIC_RELAXED);
}

int store_side_active(store_t *st)
{
	return __atomic_load_n(&st->side_on, __ATOMIC_ACQUIRE);
}

static void remove_move_dir(const store_t *st)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/" MOVE_DIR, st->dir);
	store_remove_files_dir(dir);
}

/* A pass over a side family: read ahead, not kept in the block cache. */
static rocksdb_readoptions_t *side_read_options(void)
{
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_fill_cache(ro, 0);
	rocksdb_readoptions_set_readahead_size(ro, SIDE_READAHEAD);
	return ro;
}

/* The files written for side family i, and its keys. */
typedef struct move_out {
	char **files;
	int n;
	uint64_t keys;
} move_out_t;

static void move_out_free(move_out_t *o)
{
	for (int f = 0; f < o->n; f++)
		free(o->files[f]);
	free(o->files);
	memset(o, 0, sizeof(*o));
}

/* Writes side family i as iterator it sees it, in key order, as table
 * files of its family's options (at most MOVE_FILE_BYTES of keys and
 * values each) into the move directory. Stops with PITH_ENOTSUP when
 * store_side_stop asks. */
static int move_write(store_t *st, int i, rocksdb_iterator_t *it, move_out_t *out,
		      pith_err_t *err)
{
	int cf = side_cfs[i], rc = 0;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/" MOVE_DIR, st->dir);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return pith_err_set(err, PITH_EIO, "store %s: cannot make %s: %s", st->dir, dir,
				    strerror(errno));
	rocksdb_envoptions_t *eo = rocksdb_envoptions_create();
	rocksdb_sstfilewriter_t *w = NULL;
	uint64_t bytes = 0;
	char *e = NULL;
	for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it) && !e; rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);
		if (!(out->keys & 4095) && __atomic_load_n(&st->side_stop, __ATOMIC_RELAXED)) {
			rc = pith_err_set(err, PITH_ENOTSUP, "store %s: moving %s stopped (the next "
					  "open moves it)", st->dir, side_names[i]);
			break;
		}
		if (!w) {
			char **nf = realloc(out->files, (size_t)(out->n + 1) * sizeof(*nf));
			char *name = malloc(strlen(dir) + 32);
			if (nf)
				out->files = nf;
			if (!nf || !name) {
				free(name);
				rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
				break;
			}
			sprintf(name, "%s/%d-%d.sst", dir, i, out->n);
			out->files[out->n++] = name;
			w = rocksdb_sstfilewriter_create(eo, st->cf_opts[cf]);
			rocksdb_sstfilewriter_open(w, name, &e);
			bytes = 0;
			if (e)
				break;
		}
		rocksdb_sstfilewriter_put(w, k, kl, v, vl, &e);
		out->keys++;
		if ((bytes += kl + vl) >= MOVE_FILE_BYTES && !e) {
			rocksdb_sstfilewriter_finish(w, &e);
			rocksdb_sstfilewriter_destroy(w);
			w = NULL;
		}
	}
	if (!e && !rc)
		rocksdb_iter_get_error(it, &e);
	if (w) {
		if (!e && !rc)
			rocksdb_sstfilewriter_finish(w, &e);
		rocksdb_sstfilewriter_destroy(w);
	}
	rocksdb_envoptions_destroy(eo);
	if (e && !rc)
		rc = store_op_error(st, STORE_OP_WRITE, err, e, side_names[i]);
	else
		rocksdb_free(e);
	return rc;
}

void store_side_note(store_t *st, int cf, const char *k, size_t kl)
{
	for (int i = 0; i < STORE_NSIDE; i++) {
		if (side_cfs[i] != cf)
			continue;
		uint8_t len[2] = {(uint8_t)(kl >> 8), (uint8_t)kl};
		if (kl > 0xffff || pith_buf_append(&st->side_log[i], len, 2) ||
		    pith_buf_append(&st->side_log[i], k, kl))
			st->side_log_lost = 1;
	}
}

/* Ingests out's files into the family side family i stands in for, then
 * writes there what commits changed in the side family since the files'
 * snapshot (the keys store_side_note logged: each as the side family has
 * it now, or deleted), points the store's table back at the family, and
 * drops the side family (its handle into *old). Under wmu. */
static int move_finish(store_t *st, int i, const move_out_t *out,
		       rocksdb_column_family_handle_t **old, pith_err_t *err)
{
	char *e = NULL;
	if (st->side_main_dirty[i]) {
		/* an earlier move's files, then a failure: keys the side family
		 * deleted since may be there (the side family has it all) */
		rocksdb_delete_range_cf(st->db, st->wo_log, st->side_main[i], "", 0, "\xff\xff", 2, &e);
		if (e)
			return store_op_error(st, STORE_OP_WRITE, err, e, store_cf_names[side_cfs[i]]);
	}
	if (out->n) {
		rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
		rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
		rocksdb_ingestexternalfileoptions_set_allow_blocking_flush(io, 1);
		rocksdb_ingest_external_file_cf(st->db, st->side_main[i], (const char *const *)out->files,
						(size_t)out->n, io, &e);
		rocksdb_ingestexternalfileoptions_destroy(io);
		if (e)
			return store_op_error(st, STORE_OP_WRITE, err, e, side_names[i]);
		st->side_main_dirty[i] = 1; /* until the side family is dropped */
	}
	const pith_buf_t *lg = &st->side_log[i];
	if (lg->len) {
		rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
		for (size_t at = 0; at + 2 <= lg->len && !e;) {
			size_t kl = (size_t)lg->data[at] << 8 | lg->data[at + 1];
			const char *k = (const char *)lg->data + at + 2;
			at += 2 + kl;
			size_t vl = 0;
			char *v = rocksdb_get_cf(st->db, st->ro, st->side[i], k, kl, &vl, &e);
			if (v)
				rocksdb_writebatch_put_cf(wb, st->side_main[i], k, kl, v, vl);
			else if (!e)
				rocksdb_writebatch_delete_cf(wb, st->side_main[i], k, kl);
			rocksdb_free(v);
		}
		if (!e)
			rocksdb_write(st->db, st->wo, wb, &e);
		rocksdb_writebatch_destroy(wb);
		if (e)
			return store_op_error(st, STORE_OP_WRITE, err, e, side_names[i]);
	}
	__atomic_store_n(&st->cf[side_cfs[i]], st->side_main[i], __ATOMIC_RELEASE);
	rocksdb_drop_column_family(st->db, st->side[i], &e);
	if (e)
		/* moved: the reads are the family's already; the next open
		 * moves it again (over a family it empties first) */
		store_say(st, "store %s: dropping %s: %s", st->dir, side_names[i], e);
	rocksdb_free(e);
	*old = st->side[i];
	st->side[i] = NULL;
	st->side_main_dirty[i] = 0;
	return 0;
}

static void side_log_reset(store_t *st)
{
	st->side_track = 0;
	st->side_log_lost = 0;
	for (int i = 0; i < STORE_NSIDE; i++)
		pith_buf_release(&st->side_log[i]);
}

static long long ms_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (long long)((t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000);
}

/* Two rounds, each turning new readers to the other count and waiting for
 * the one they left to empty: a reader that read the epoch before the first
 * turn but counts itself only after it lands in a count waited for by one of
 * the two rounds (and a reader counted after a handle left cf[] reads cf[]
 * after, so never takes that handle). */
void store_cf_quiesce(store_t *st)
{
	for (int round = 0; round < 2; round++) {
		unsigned old = __atomic_fetch_add(&st->cf_epoch, 1, __ATOMIC_SEQ_CST) & 1;
		while (__atomic_load_n(&st->cf_readers[old], __ATOMIC_SEQ_CST)) {
			struct timespec ts = {0, QUIESCE_POLL_NS};
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
	}
}

/* The handles of dropped side families, out of cf[] already: destroyed
 * once no reader can still be using them (with them go the families'
 * files). */
static void side_release(store_t *st, rocksdb_column_family_handle_t *old[STORE_NSIDE])
{
	int any = 0;
	for (int i = 0; i < STORE_NSIDE; i++)
		any |= old[i] != NULL;
	if (!any)
		return;
	store_cf_quiesce(st);
	for (int i = 0; i < STORE_NSIDE; i++)
		if (old[i])
			rocksdb_column_family_handle_destroy(old[i]);
}

int store_side_end_ex(store_t *st, store_side_hook_t hook, void *arg, pith_err_t *err)
{
	if (st->read_only || !store_side_active(st))
		return 0;
	move_out_t out[STORE_NSIDE] = {0};
	rocksdb_column_family_handle_t *old[STORE_NSIDE] = {0};
	struct timespec t0, th;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* 1. everything committed so far reaches the table files (the move
	 * must not make states durable ahead of their events), and from
	 * here on, commits log the keys they write aside */
	pthread_mutex_lock(&st->wmu);
	int rc = st->atomic_flush ? store_flush_locked(st, err) : 0;
	/* iterators, not a snapshot: each reads the family as it is now, and
	 * releasing a snapshot makes RocksDB rewrite every last-level file of
	 * every family whose keys still carry sequence numbers ("bottommost
	 * files" compactions: a catch-up's documents, moved down untouched,
	 * all rewritten; docs/performance.md, issue 17, session 28) */
	rocksdb_readoptions_t *ro[STORE_NSIDE] = {0};
	rocksdb_iterator_t *it[STORE_NSIDE] = {0};
	for (int i = 0; !rc && i < STORE_NSIDE; i++) {
		if (!st->side[i])
			continue;
		ro[i] = side_read_options();
		it[i] = rocksdb_create_iterator_cf(st->db, ro[i], st->side[i]);
	}
	if (!rc) {
		side_log_reset(st);
		st->side_track = 1;
	}
	pthread_mutex_unlock(&st->wmu);
	/* 2. the side families as the iterators see them, into table files, while
	 * commits go on */
	for (int i = 0; !rc && i < STORE_NSIDE; i++) {
		if (!st->side[i])
			continue;
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (!(rc = move_write(st, i, it[i], &out[i], err)))
			store_say(st, "store %s: %s written out: %llu keys in %lld ms", st->dir,
				  side_names[i], (unsigned long long)out[i].keys, ms_since(&t1));
		/* its buffers go before the next family's are filled */
		rocksdb_iter_destroy(it[i]);
		it[i] = NULL;
	}
	if (!rc && hook)
		hook(arg);
	/* done with them before the ingestion */
	for (int i = 0; i < STORE_NSIDE; i++) {
		if (it[i])
			rocksdb_iter_destroy(it[i]);
		if (ro[i])
			rocksdb_readoptions_destroy(ro[i]);
	}
	/* 3. the files into the families, then what commits changed since */
	pthread_mutex_lock(&st->wmu);
	clock_gettime(CLOCK_MONOTONIC, &th);
	uint64_t keys = 0, late = 0;
	if (!rc && st->side_log_lost)
		rc = pith_err_set(err, PITH_ENOMEM, "store %s: out of memory logging the keys "
				  "written during the move (tried again later)", st->dir);
	for (int i = 0; !rc && i < STORE_NSIDE; i++) {
		if (!st->side[i])
			continue;
		late += st->side_log[i].len;
		if (!(rc = move_finish(st, i, &out[i], &old[i], err)))
			keys += out[i].keys;
	}
	int all = 1;
	for (int i = 0; i < STORE_NSIDE; i++)
		all &= st->side[i] == NULL;
	if (all)
		__atomic_store_n(&st->side_on, 0, __ATOMIC_RELEASE);
	side_log_reset(st);
	long long held = ms_since(&th);
	pthread_mutex_unlock(&st->wmu);
	for (int i = 0; i < STORE_NSIDE; i++)
		move_out_free(&out[i]);
	remove_move_dir(st);
	if (!rc)
		store_say(st, "store %s: states, claims and event ids in place: %llu keys moved in %lld ms, "
			  "commits held %lld ms (%llu bytes of keys written meanwhile)", st->dir,
			  (unsigned long long)keys, ms_since(&t0), held, (unsigned long long)late);
	side_release(st, old);
	return rc;
}

int store_side_end(store_t *st, pith_err_t *err)
{
	return store_side_end_ex(st, NULL, NULL, err);
}

void store_side_stop(store_t *st)
{
	__atomic_store_n(&st->side_stop, 1, __ATOMIC_RELAXED);
}

int store_side_open_end(store_t *st, pith_err_t *err)
{
	remove_move_dir(st);
	if (!st->side_on)
		return 0;
	store_say(st, "store %s: moving the states, claims and event ids of an interrupted catch-up "
		  "into place", st->dir);
	/* a crash between an ingestion and the write of what commits changed
	 * after it may have left the family with keys the side family has
	 * since deleted: move_finish empties it first (the side family has
	 * it all), as after a failed move */
	for (int i = 0; i < STORE_NSIDE; i++)
		st->side_main_dirty[i] = st->side[i] != NULL;
	rocksdb_column_family_handle_t *old[STORE_NSIDE] = {0};
	int rc = 0;
	for (int i = 0; !rc && i < STORE_NSIDE; i++) {
		move_out_t out = {0};
		if (st->side[i]) {
			rocksdb_readoptions_t *ro = side_read_options();
			rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, ro, st->side[i]);
			if (!(rc = move_write(st, i, it, &out, err)))
				rc = move_finish(st, i, &out, &old[i], err);
			rocksdb_iter_destroy(it);
			rocksdb_readoptions_destroy(ro);
		}
		move_out_free(&out);
	}
	remove_move_dir(st);
	if (!rc)
		st->side_on = 0;
	side_release(st, old);
	return rc;
}

void store_side_close(store_t *st)
{
	side_log_reset(st);
	for (int i = 0; i < STORE_NSIDE; i++) {
		if (!st->side[i])
			continue;
		/* st->cf holds it: give the main family back to be destroyed
		 * there, and destroy this one here */
		st->cf[side_cfs[i]] = st->side_main[i];
		rocksdb_column_family_handle_destroy(st->side[i]);
		st->side[i] = NULL;
	}
}
