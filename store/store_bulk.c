/* Flushing and the modes of a bulk load (store.h): the memtables flushed
 * through a checkpoint, commits without the log and back, the level-0
 * triggers a bulk load raises; a checkpoint, a full compaction. */
#include "store_int.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLUSH_DIR "flush-checkpoint" /* store_flush_locked's, in the store's directory */

/* Removes a directory of files (hard links to table files and copies). */
void store_remove_files_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[4096 + 256];
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Removes the checkpoint store_flush_locked made, and the directory
 * RocksDB builds it in (DIR.tmp, renamed at its end), either of which a
 * crash may leave: their hard links would keep table files on disk. */
void store_remove_flush_dir(store_t *st)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/" FLUSH_DIR, st->dir);
	store_remove_files_dir(dir);
	snprintf(dir, sizeof(dir), "%s/" FLUSH_DIR ".tmp", st->dir);
	store_remove_files_dir(dir);
}

/* RocksDB 7.8's C API flushes one family per call (rocksdb_flush_cfs came
 * with 8.x); a checkpoint with log_size_for_flush 0 is documented to
 * flush all of them first, which with atomic_flush is one atomic group.
 * The checkpoint itself (hard links, a copy of the manifest) goes at once. */
int store_flush_locked(store_t *st, pith_err_t *err)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/" FLUSH_DIR, st->dir);
	store_remove_flush_dir(st); /* a crash's leftover */
	int rc = store_checkpoint(st, dir, err);
	store_remove_flush_dir(st);
	if (rc)
		return rc;
	st->nolog_dirty = 0;
	if (st->unlogged)
		__atomic_store_n(&st->changes_durable, st->changes_seq, __ATOMIC_RELEASE);
	return 0;
}

int store_flush(store_t *st, pith_err_t *err)
{
	if (st->read_only)
		return pith_err_set(err, PITH_EINVAL, "store: opened read-only");
	if (st->atomic_flush) {
		pthread_mutex_lock(&st->wmu);
		int rc = store_flush_locked(st, err);
		pthread_mutex_unlock(&st->wmu);
		return rc;
	}
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(fo, 1);
	char *e = NULL;
	for (int cf = 0; cf < STORE_NCF && !e; cf++)
		rocksdb_flush_cf(st->db, fo, st->cf[cf], &e);
	rocksdb_flushoptions_destroy(fo);
	return e ? store_op_error(st, STORE_OP_WRITE, err, e, "flushing") : 0;
}

int store_unlogged_begin(store_t *st, pith_err_t *err)
{
	if (st->read_only)
		return pith_err_set(err, PITH_EINVAL, "store: opened read-only");
	if (!st->atomic_flush)
		return pith_err_set(err, PITH_EINVAL, "store %s: commits without the log need a store "
				    "opened with atomic_flush", st->dir);
	pthread_mutex_lock(&st->wmu);
	if (!st->unlogged) {
		__atomic_store_n(&st->changes_durable, st->changes_seq, __ATOMIC_RELEASE);
		__atomic_store_n(&st->unlogged, 1, __ATOMIC_RELEASE);
		st->wo = st->wo_nolog;
	}
	pthread_mutex_unlock(&st->wmu);
	return 0;
}

int store_unlogged_end(store_t *st, pith_err_t *err)
{
	int rc = 0;
	pthread_mutex_lock(&st->wmu);
	if (st->unlogged && !(rc = store_flush_locked(st, err))) {
		__atomic_store_n(&st->unlogged, 0, __ATOMIC_RELEASE);
		st->wo = st->wo_log;
		__atomic_store_n(&st->changes_durable, UINT64_MAX, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&st->wmu);
	return rc;
}

int store_is_unlogged(store_t *st)
{
	/* written under wmu, read without it: a commit can hold wmu long */
	return __atomic_load_n(&st->unlogged, __ATOMIC_ACQUIRE);
}

/* Whether family cf's compactions wait like the write-only families'
 * (STORE_BULK_L0_WRITTEN files, the bulk level base) in bulk mode: every
 * index family does too while the store is being filled from empty
 * (store_opts_t.fresh_records), in an import and a node's catch-up alike,
 * since a commit then reads nothing of a record it has not written. That
 * includes `subj`, read by prefix scans that no bloom filter spares a
 * level-0 file, but only for a record whose events straddle two commits
 * (at the registry's shape, one record in about two commits); its
 * compactions at STORE_BULK_L0_INDEX files each rewrote the whole family
 * (random keys) and grew with the store: 1.1 us an event in a 4M
 * catch-up, 1.9 at 10M (docs/performance.md, issue 17, session 36). */
static int l0_waits(const store_t *st, int cf)
{
	return store_cf_write_only(cf) ||
	       (store_cf_is_index(cf) && __atomic_load_n(&st->fresh_on, __ATOMIC_RELAXED));
}

/* Whether st->cf[cf] is a side family now (side.c). */
static int side_in_use(const store_t *st, int cf)
{
	for (int i = 0; i < STORE_NSIDE; i++)
		if (store_side_cf(i) == cf && st->side[i])
			return 1;
	return 0;
}

/* Level 0's triggers of family cf (compaction, slowdown, stop) for a
 * bulk mode, or the usual ones when !bulk; side: of the side family
 * standing in for it, if one does. */
static void l0_triggers(const store_t *st, int cf, int bulk, enum store_bulk_mode mode, int side,
			int v[3])
{
	if (!bulk) {
		v[0] = STORE_L0_TRIGGER, v[1] = STORE_L0_SLOWDOWN, v[2] = STORE_L0_STOP;
		return;
	}
	int wide = mode == STORE_BULK_IMPORT ? 2 : 1;
	if (side && side_in_use(st, cf))
		v[0] = STORE_BULK_L0_SIDE;
	else if (l0_waits(st, cf))
		v[0] = STORE_BULK_L0_WRITTEN;
	else
		v[0] = wide * (store_cf_is_index(cf) ? STORE_BULK_L0_INDEX : STORE_BULK_L0_DOCS);
	/* slowing and stopping writes: 24 and 48 files past the trigger,
	 * except for the document families in a node's catch-up, which keep
	 * the usual ones (RocksDB raises any below the trigger to it) */
	int usual = mode == STORE_BULK_SYNC && !store_cf_is_index(cf) && !store_cf_write_only(cf);
	v[1] = usual ? STORE_L0_SLOWDOWN : v[0] + 24;
	v[2] = usual ? STORE_L0_STOP : v[0] + 48;
}

/* Each level's compression of family cf as SetOptions writes it: cf_tune's
 * (LZ4, the index families' last level ZSTD), but level 0 none in bulk
 * mode. A flush then skips LZ4 and the compaction that takes level 0 in
 * skips its decompression; the files it writes are compressed as usual
 * (with dynamic level bytes, a compaction's output takes the entry of its
 * level counted from the base level, 1 or more, never entry 0). */
static void levels_compression(int cf, int bulk, char *out, size_t cap)
{
	snprintf(out, cap, "%s:kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:"
			   "kLZ4Compression:%s",
		 bulk ? "kNoCompression" : "kLZ4Compression",
		 store_cf_is_index(cf) ? "kZSTD" : "kLZ4Compression");
}

/* Sets the L0 triggers of family handle h (l0_triggers: v) and its levels'
 * compression (levels_compression; cf: the family h is or stands for). */
static int l0_set_one(store_t *st, rocksdb_column_family_handle_t *h, int cf, int bulk, int waits,
		      const int v[3], pith_err_t *err)
{
	static const char *keys[5] = {"level0_file_num_compaction_trigger",
				      "level0_slowdown_writes_trigger", "level0_stop_writes_trigger",
				      "compression_per_level", "max_bytes_for_level_base"};
	char vals[5][192];
	const char *vp[5];
	for (int i = 0; i < 3; i++)
		snprintf(vals[i], sizeof(vals[i]), "%d", v[i]);
	levels_compression(cf, bulk, vals[3], sizeof(vals[3]));
	snprintf(vals[4], sizeof(vals[4]), "%llu", bulk ? STORE_LEVEL_BASE_BYTES_BULK_WRITTEN : STORE_LEVEL_BASE_BYTES);
	for (int i = 0; i < 5; i++)
		vp[i] = vals[i];
	/* one SetOptions per family (each rewrites the OPTIONS file); the
	 * level base only for the families whose compaction waits, and back
	 * for all at the end */
	char *e = NULL;
	rocksdb_set_options_cf(st->db, h, !bulk || waits ? 5 : 4, keys, vp, &e);
	return e ? store_db_error(err, e, "setting the level-0 triggers") : 0;
}

/* Sets the L0 triggers of every family (l0_triggers), and of the family a
 * side family stands in for, for when it is back. */
static int l0_set(store_t *st, int bulk, enum store_bulk_mode mode, pith_err_t *err)
{
	for (int cf = 0; cf < STORE_NCF; cf++) {
		if (!st->cf[cf])
			continue;
		int v[3], rc;
		l0_triggers(st, cf, bulk, mode, 1, v);
		if ((rc = l0_set_one(st, st->cf[cf], cf, bulk, l0_waits(st, cf), v, err)))
			return rc;
		for (int i = 0; i < STORE_NSIDE; i++) {
			if (store_side_cf(i) != cf || !st->side[i] || !st->side_main[i])
				continue;
			l0_triggers(st, cf, bulk, mode, 0, v);
			if ((rc = l0_set_one(st, st->side_main[i], cf, bulk, l0_waits(st, cf), v, err)))
				return rc;
		}
	}
	return 0;
}

void store_l0_reset(store_t *st)
{
	pith_err_t err = {0};
	if (st->bulk_on && l0_set(st, 1, st->bulk_mode, &err))
		store_say(st, "%s", err.msg);
}

int store_bulk_begin(store_t *st, enum store_bulk_mode mode, pith_err_t *err)
{
	if (st->read_only)
		return pith_err_set(err, PITH_EINVAL, "store: opened read-only");
	st->bulk_mode = mode;
	st->bulk_on = 1;
	return l0_set(st, 1, mode, err);
}

int store_cf_property(store_t *st, int cf, const char *name, uint64_t *v)
{
	unsigned slot;
	rocksdb_column_family_handle_t *h = store_cf_enter(st, cf, &slot);
	if (!rocksdb_property_int_cf(st->db, h, name, v)) {
		store_cf_leave(st, slot);
		return 0;
	}
	/* some (num-files-at-levelN) are only given as text */
	char *t = rocksdb_property_value_cf(st->db, h, name), *end = NULL;
	store_cf_leave(st, slot);
	int rc = -1;
	if (t) {
		unsigned long long n = strtoull(t, &end, 10);
		if (end != t && !*end) {
			*v = n;
			rc = 0;
		}
		rocksdb_free(t);
	}
	return rc;
}

/* Is RocksDB flushing or compacting, or does a family want a compaction? */
int store_compaction_busy(store_t *st)
{
	uint64_t v = 0;
	if (!rocksdb_property_int(st->db, "rocksdb.num-running-compactions", &v) && v)
		return 1;
	if (!rocksdb_property_int(st->db, "rocksdb.num-running-flushes", &v) && v)
		return 1;
	for (int cf = 0; cf < STORE_NCF; cf++) {
		unsigned slot;
		rocksdb_column_family_handle_t *h = store_cf_enter(st, cf, &slot);
		int pending = h && !rocksdb_property_int_cf(st->db, h, "rocksdb.compaction-pending", &v) &&
			      v;
		store_cf_leave(st, slot);
		if (pending)
			return 1;
	}
	return 0;
}

int store_bulk_end(store_t *st, int settle, pith_err_t *err)
{
	st->bulk_on = 0;
	int rc = l0_set(st, 0, STORE_BULK_SYNC, err);
	/* the bulk is in: the next commit turns store_opts_t.fresh_records
	 * off and frees its set (not here: a node ends its bulk mode on the
	 * event loop, which must not wait for a commit) */
	__atomic_store_n(&st->fresh_stop, 1, __ATOMIC_RELEASE);
	/* setting the options scheduled the compactions they now call for;
	 * they run on RocksDB's threads: poll until none is left */
	while (!rc && settle && store_compaction_busy(st)) {
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return rc;
}

int store_checkpoint(store_t *st, const char *dir, pith_err_t *err)
{
	char *e = NULL;
	rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(st->db, &e);
	if (e || !cp)
		return store_db_error(err, e, "checkpoint");
	/* log_size_for_flush 0: flush the memtables first, so the copy does
	 * not depend on replaying a write-ahead log */
	rocksdb_checkpoint_create(cp, dir, 0, &e);
	rocksdb_checkpoint_object_destroy(cp);
	if (e) {
		int rc = pith_err_set(err, PITH_EIO, "store: checkpoint into %s: %s", dir, e);
		rocksdb_free(e);
		return rc;
	}
	return 0;
}

int store_compact(store_t *st, pith_err_t *err)
{
	int rc = store_flush(st, err);
	if (rc)
		return rc;
	for (int cf = 0; cf < STORE_NCF; cf++)
		rocksdb_compact_range_cf(st->db, st->cf[cf], NULL, 0, NULL, 0);
	return 0;
}
