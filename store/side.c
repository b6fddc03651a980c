/* The side families of a new node's first catch-up (store_opts_t.bulk_side,
 * docs/store.md "Bulk loading"): states and alias claims go to families of
 * their own whose memtables are unsorted vectors, sorted once at the flush,
 * and are moved into `states` and `aliases` as sorted table files when the
 * catch-up ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

/* The families that have side families, by side index. */
static const int side_cfs[STORE_NSIDE] = {STORE_CF_STATES, STORE_CF_ALIASES};
static const char *const side_names[STORE_NSIDE] = {"states.bulk", "aliases.bulk"};

#define MOVE_DIR "bulk-move"             /* the move's table files, in the store's directory */
#define MOVE_FILE_BYTES (256ull << 20)    /* keys and values per table file moved */
#define SIDE_GRACE_NS (2ull * 1000000000) /* before a dropped family's handle goes */

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
			store_say(st, "store %s: cannot create %s (%s): states and claims go "
				     "to their own families", st->dir, side_names[i], e ? e : "?");
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
	st->side_on = 1;
	store_l0_reset(st); /* the bulk mode's triggers for the new families */
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

/* Writes side family i, in key order, as table files of its family's
 * options into the move directory and ingests them into the family
 * (moved, not copied: the files are hard-linked into the store). */
static int move_one(store_t *st, int i, uint64_t *keys, pith_err_t *err)
{
	int cf = side_cfs[i], rc = 0, nfiles = 0;
	char dir[4096], **files = NULL;
	snprintf(dir, sizeof(dir), "%s/" MOVE_DIR, st->dir);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return pith_err_set(err, PITH_EIO, "store %s: cannot make %s: %s", st->dir, dir,
				    strerror(errno));
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_fill_cache(ro, 0);
	rocksdb_readoptions_set_readahead_size(ro, 2u << 20);
	rocksdb_iterator_t *it = rocksdb_create_iterator_cf(st->db, ro, st->side[i]);
	rocksdb_envoptions_t *eo = rocksdb_envoptions_create();
	rocksdb_sstfilewriter_t *w = NULL;
	uint64_t bytes = 0;
	char *e = NULL;
	for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it) && !e; rocksdb_iter_next(it)) {
		size_t kl, vl;
		const char *k = rocksdb_iter_key(it, &kl), *v = rocksdb_iter_value(it, &vl);
		if (!w) {
			char **nf = realloc(files, (size_t)(nfiles + 1) * sizeof(*files));
			if (!nf) {
				rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
				break;
			}
			files = nf;
			if (!(files[nfiles] = malloc(strlen(dir) + 32))) {
				rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
				break;
			}
			sprintf(files[nfiles], "%s/%d-%d.sst", dir, i, nfiles);
			nfiles++;
			w = rocksdb_sstfilewriter_create(eo, st->cf_opts[cf]);
			rocksdb_sstfilewriter_open(w, files[nfiles - 1], &e);
			bytes = 0;
			if (e)
				break;
		}
		rocksdb_sstfilewriter_put(w, k, kl, v, vl, &e);
		(*keys)++;
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
	rocksdb_iter_destroy(it);
	rocksdb_readoptions_destroy(ro);
	rocksdb_envoptions_destroy(eo);
	if (!e && !rc && nfiles) {
		rocksdb_ingestexternalfileoptions_t *io = rocksdb_ingestexternalfileoptions_create();
		rocksdb_ingestexternalfileoptions_set_move_files(io, 1);
		rocksdb_ingestexternalfileoptions_set_allow_blocking_flush(io, 1);
		rocksdb_ingest_external_file_cf(st->db, st->side_main[i], (const char *const *)files,
						(size_t)nfiles, io, &e);
		rocksdb_ingestexternalfileoptions_destroy(io);
	}
	if (e && !rc)
		rc = store_op_error(st, STORE_OP_WRITE, err, e, side_names[i]);
	else
		rocksdb_free(e);
	for (int f = 0; f < nfiles; f++)
		free(files[f]);
	free(files);
	remove_move_dir(st);
	return rc;
}

/* Moves and drops every side family in use. Under wmu; the handles of the
 * dropped families are left in old[] for the caller to destroy. */
static int side_end_locked(store_t *st, rocksdb_column_family_handle_t *old[STORE_NSIDE],
			   uint64_t *keys, pith_err_t *err)
{
	int rc = 0;
	if (!st->side_on)
		return 0;
	/* everything the side families hold reaches the table files with the
	 * rest of its commits first: the move makes it durable on its own */
	if (st->atomic_flush)
		rc = store_flush_locked(st, err);
	for (int i = 0; !rc && i < STORE_NSIDE; i++) {
		if (!st->side[i])
			continue;
		struct timespec t0, t1;
		uint64_t n = 0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if ((rc = move_one(st, i, &n, err)))
			break;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		*keys += n;
		store_say(st, "store %s: %s moved into %s: %llu keys in %lld ms", st->dir,
			  side_names[i], store_cf_names[side_cfs[i]], (unsigned long long)n,
			  (long long)((t1.tv_sec - t0.tv_sec) * 1000 +
				      (t1.tv_nsec - t0.tv_nsec) / 1000000));
		__atomic_store_n(&st->cf[side_cfs[i]], st->side_main[i], __ATOMIC_RELEASE);
		char *e = NULL;
		rocksdb_drop_column_family(st->db, st->side[i], &e);
		if (e)
			/* moved: the reads are the main family's already; the next
			 * open moves it again (the same keys and values) */
			store_say(st, "store %s: dropping %s: %s", st->dir, side_names[i], e);
		rocksdb_free(e);
		old[i] = st->side[i];
		st->side[i] = NULL;
	}
	if (!rc)
		__atomic_store_n(&st->side_on, 0, __ATOMIC_RELEASE);
	return rc;
}

/* A reader took the side family's handle from st->cf just before the swap
 * and is inside RocksDB with it: RocksDB holds the family itself once a
 * read or an iterator has begun, so the handle waits a moment, and then
 * goes (with it the dropped family's files). */
static void side_release(rocksdb_column_family_handle_t *old[STORE_NSIDE], int wait)
{
	int any = 0;
	for (int i = 0; i < STORE_NSIDE; i++)
		any |= old[i] != NULL;
	if (!any)
		return;
	if (wait) {
		struct timespec ts = {SIDE_GRACE_NS / 1000000000, SIDE_GRACE_NS % 1000000000};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	for (int i = 0; i < STORE_NSIDE; i++)
		if (old[i])
			rocksdb_column_family_handle_destroy(old[i]);
}

int store_side_end(store_t *st, pith_err_t *err)
{
	if (st->read_only || !store_side_active(st))
		return 0;
	rocksdb_column_family_handle_t *old[STORE_NSIDE] = {0};
	uint64_t keys = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_mutex_lock(&st->wmu);
	int rc = side_end_locked(st, old, &keys, err);
	pthread_mutex_unlock(&st->wmu);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!rc)
		store_say(st, "store %s: states and claims in place: %llu keys moved, commits held "
			  "%lld ms", st->dir, (unsigned long long)keys,
			  (long long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	side_release(old, 1);
	return rc;
}

int store_side_open_end(store_t *st, pith_err_t *err)
{
	remove_move_dir(st);
	rocksdb_column_family_handle_t *old[STORE_NSIDE] = {0};
	uint64_t keys = 0;
	if (!st->side_on)
		return 0;
	store_say(st, "store %s: moving the states and claims of an interrupted catch-up "
		     "into place", st->dir);
	int rc = side_end_locked(st, old, &keys, err);
	side_release(old, 0); /* no reader yet */
	if (!rc)
		store_say(st, "store %s: states and claims in place: %llu keys moved", st->dir,
			  (unsigned long long)keys);
	return rc;
}

void store_side_close(store_t *st)
{
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
