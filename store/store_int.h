/* store_t's insides, shared by the store's own files only. */
#ifndef PITH_STORE_INT_H
#define PITH_STORE_INT_H

#include <pthread.h>
#include <rocksdb/c.h>

#include "keys.h"
#include "store.h"

struct store {
	rocksdb_t *db;
	rocksdb_options_t *opts;
	rocksdb_options_t *cf_opts[STORE_NCF];
	rocksdb_block_based_table_options_t *table[STORE_NCF];
	rocksdb_cache_t *cache;
	rocksdb_column_family_handle_t *cf[STORE_NCF];
	rocksdb_writeoptions_t *wo; /* sync = 1: the WAL is fsynced per commit */
	rocksdb_readoptions_t *ro;
	pthread_mutex_t wmu;        /* serialises writers (batch commits) */
	store_counts_t counts;      /* as written by the last commit */
	int read_only;
	const pith_trust_t *registry; /* for pith_merge_ex */
};

/* A bounded iterator over [lo, hi) of one column family (hi_len 0: to the
 * end). The bounds are copied into the iterator. */
typedef struct store_iter {
	rocksdb_readoptions_t *ro;
	rocksdb_iterator_t *it;
	uint8_t lo[256], hi[256];
	size_t lo_len, hi_len;
} store_iter_t;

int store_iter_open(store_t *st, int cf, const uint8_t *lo, size_t lo_len,
		    const uint8_t *hi, size_t hi_len, store_iter_t *out, pith_err_t *err);
/* The same, over all keys starting with prefix. */
int store_iter_prefix(store_t *st, int cf, const uint8_t *prefix, size_t len,
		      store_iter_t *out, pith_err_t *err);
int store_iter_valid(store_iter_t *it);
const uint8_t *store_iter_key(store_iter_t *it, size_t *len);
const uint8_t *store_iter_value(store_iter_t *it, size_t *len);
void store_iter_next(store_iter_t *it);
/* 0, or PITH_EIO (with err filled) if the iteration stopped on an error. */
int store_iter_status(store_iter_t *it, pith_err_t *err);
void store_iter_close(store_iter_t *it);

/* Get: *val is malloc'd by RocksDB (free with rocksdb_free) or NULL when
 * absent. Returns 0 or PITH_EIO. */
int store_get_raw(store_t *st, int cf, const uint8_t *key, size_t klen, char **val,
		  size_t *vlen, pith_err_t *err);

/* Parses the stored events of one subject into a new array (*out, *n);
 * each event owns its doc. Free with store_events_free. */
int store_subject_load(store_t *st, const uint8_t skey[STORE_SKEY_LEN], pith_event_t ***out,
		       size_t *n, pith_err_t *err);
void store_events_free(pith_event_t **evs, size_t n);

/* The source_aliases of the stored bundle of skey, in a new doc (*doc, may
 * be NULL with *aliases NULL when there is no bundle). */
int store_bundle_aliases_load(store_t *st, const uint8_t skey[STORE_SKEY_LEN],
			      json_doc_t **doc, const json_value_t **aliases, pith_err_t *err);

/* Alias key of (kind, value): kind '\0' value, DOIs in lower case.
 * Returns the key length, or 0 if it does not fit. */
size_t store_alias_key(const char *kind, const char *value,
		       uint8_t out[STORE_ALIAS_KEY_MAX]);

/* Newest-bundle order: greater built_at, then greater bundle_sha256 hex.
 * > 0 if (a_us, a_sha) is newer than (b_us, b_sha). */
int store_bundle_newer(int64_t a_us, const char *a_sha, int64_t b_us, const char *b_sha);

/* built_at (µs) and bundle_sha256 (hex) of a bundle object. */
int store_bundle_ident(const json_value_t *bundle, int64_t *built_us, char sha[65],
		       pith_err_t *err);

/* The record summary value (STORE_REC_LEN bytes). */
void store_rec_encode(uint8_t out[STORE_REC_LEN], uint64_t events, const uint8_t hash[32],
		      int has_bundle);

#endif
