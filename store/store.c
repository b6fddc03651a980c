/* The store's errors and health, raw access and iterators, the helpers
 * batch.c and check.c share, iteration, counts and usage. Opening is in
 * store_open.c, lookups and resolution in store_get.c, flushing and bulk
 * mode in store_bulk.c, ingest in batch.c, the audit in check.c. */
#include "store_int.h"

#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bundle.h"
#include "ids.h"
#include "store_file.h"

/* RocksDB reports errors as malloc'd strings; this turns one into err. */
int store_db_error(pith_err_t *err, char *msg, const char *what)
{
	int rc = pith_err_set(err, PITH_EIO, "store: %s: %s", what, msg ? msg : "unknown error");
	rocksdb_free(msg);
	return rc;
}

static int64_t wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Counts the error, keeps its message, tells the hook. A corrupted block
 * fails every read of it and a full disk every commit: the hook (the
 * node's log) rate-limits, the counters count them all. */
int store_op_error(store_t *st, int op, pith_err_t *err, char *msg, const char *what)
{
	char line[sizeof(st->errors.last_error)];
	snprintf(line, sizeof(line), "store: %s: %s", what, msg ? msg : "unknown error");
	rocksdb_free(msg);
	pthread_mutex_lock(&st->emu);
	if (op == STORE_OP_WRITE) {
		st->errors.write_errors++;
		st->errors.last_write_us = wall_us();
		st->errors.writable = 0;
	} else {
		st->errors.read_errors++;
		st->errors.last_read_us = wall_us();
	}
	memcpy(st->errors.last_error, line, sizeof(line));
	pthread_mutex_unlock(&st->emu);
	if (st->on_error)
		st->on_error(st->on_error_arg, op, line);
	return pith_err_set(err, PITH_EIO, "%s", line);
}

void store_write_ok(store_t *st)
{
	pthread_mutex_lock(&st->emu);
	st->errors.writable = !st->read_only;
	pthread_mutex_unlock(&st->emu);
}

void store_errors_get(store_t *st, store_errors_t *out)
{
	pthread_mutex_lock(&st->emu);
	*out = st->errors;
	pthread_mutex_unlock(&st->emu);
}

int store_is_healthy(store_t *st, int64_t window_us, char *why, size_t whylen)
{
	store_errors_t e;
	int64_t now = wall_us();
	store_errors_get(st, &e);
	int write_ok = e.writable || st->read_only;
	int read_ok = !e.last_read_us || now - e.last_read_us >= window_us;
	if (why && whylen) {
		if (!write_ok)
			snprintf(why, whylen, "the store does not take writes: %s", e.last_error);
		else if (!read_ok)
			snprintf(why, whylen,
				 "a store read failed %.0f s ago (%llu read errors): %s",
				 (double)(now - e.last_read_us) / 1e6,
				 (unsigned long long)e.read_errors, e.last_error);
		else
			why[0] = 0;
	}
	return write_ok && read_ok;
}

int store_write_probe(store_t *st, pith_err_t *err)
{
	if (st->read_only)
		return pith_err_set(err, PITH_EINVAL, "store: opened read-only");
	/* a commit under way will tell by itself, and it can hold the lock
	 * for its merges: the caller (an event loop) does not wait for it */
	if (pthread_mutex_trylock(&st->wmu))
		return pith_err_set(err, PITH_EIO, "store: write probe: a commit is under way");
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	char *e = NULL;
	store_perf_off();
	rocksdb_write(st->db, st->wo, wb, &e);
	pthread_mutex_unlock(&st->wmu);
	rocksdb_writebatch_destroy(wb);
	if (e) {
		/* not counted again: the store is known not to take writes */
		int rc = pith_err_set(err, PITH_EIO, "store: write probe: %s", e);
		rocksdb_free(e);
		return rc;
	}
	store_write_ok(st);
	return 0;
}

const char *store_rocksdb_version(void)
{
	return PITH_ROCKSDB_VERSION;
}

const char *store_outcome_name(store_outcome_t o)
{
	switch (o) {
	case STORE_STORED: return "stored";
	case STORE_DUPLICATE: return "duplicate";
	case STORE_RESIGNED: return "resigned";
	default: return "pending";
	}
}

/* ---- raw access ----------------------------------------------------------- */

int store_get_raw(store_t *st, int cf, const uint8_t *key, size_t klen, char **val,
		  size_t *vlen, pith_err_t *err)
{
	return store_get_raw_ro(st, st->ro, cf, key, klen, val, vlen, err);
}

int store_get_raw_ro(store_t *st, const rocksdb_readoptions_t *ro, int cf, const uint8_t *key,
		     size_t klen, char **val, size_t *vlen, pith_err_t *err)
{
	char *e = NULL;
	*vlen = 0;
	store_perf_off();
	unsigned slot;
	rocksdb_column_family_handle_t *h = store_cf_enter(st, cf, &slot);
	*val = rocksdb_get_cf(st->db, ro, h, (const char *)key, klen, vlen, &e);
	store_cf_leave(st, slot);
	if (e) {
		*val = NULL;
		return store_op_error(st, STORE_OP_READ, err, e, store_cf_names[cf]);
	}
	return 0;
}

static int iter_open(store_t *st, int cf, const uint8_t *lo, size_t lo_len, const uint8_t *hi,
		     size_t hi_len, int scan, store_iter_t *out, pith_err_t *err)
{
	memset(out, 0, sizeof(*out));
	out->st = st;
	if (lo_len > sizeof(out->lo) || hi_len > sizeof(out->hi))
		return pith_err_set(err, PITH_EINVAL, "store: iterator bound too long");
	out->ro = rocksdb_readoptions_create();
	if (scan > 0) {
		/* one pass over all of it: keep the cache for the point reads */
		rocksdb_readoptions_set_fill_cache(out->ro, 0);
		rocksdb_readoptions_set_readahead_size(out->ro, 2u << 20);
	}
	if (lo_len) {
		memcpy(out->lo, lo, lo_len);
		out->lo_len = lo_len;
		rocksdb_readoptions_set_iterate_lower_bound(out->ro, (const char *)out->lo, lo_len);
	}
	if (hi_len) {
		memcpy(out->hi, hi, hi_len);
		out->hi_len = hi_len;
		rocksdb_readoptions_set_iterate_upper_bound(out->ro, (const char *)out->hi, hi_len);
	}
	store_perf_off();
	unsigned slot;
	out->it = rocksdb_create_iterator_cf(st->db, out->ro, store_cf_enter(st, cf, &slot));
	store_cf_leave(st, slot);
	if (scan < 0)
		rocksdb_iter_seek_to_last(out->it);
	else if (lo_len)
		rocksdb_iter_seek(out->it, (const char *)out->lo, lo_len);
	else
		rocksdb_iter_seek_to_first(out->it);
	return 0;
}

int store_iter_open(store_t *st, int cf, const uint8_t *lo, size_t lo_len,
		    const uint8_t *hi, size_t hi_len, store_iter_t *out, pith_err_t *err)
{
	return iter_open(st, cf, lo, lo_len, hi, hi_len, 0, out, err);
}

/* Positioned at the last key below hi, without the forward seek to lo
 * first: in the change log that seek stepped over every deleted entry
 * from lo on (all the superseded changes of the first import) before the
 * walk even began, on every page (docs/store.md, "The change log"). */
int store_iter_open_last(store_t *st, int cf, const uint8_t *lo, size_t lo_len,
			 const uint8_t *hi, size_t hi_len, store_iter_t *out, pith_err_t *err)
{
	return iter_open(st, cf, lo, lo_len, hi, hi_len, -1, out, err);
}

int store_iter_scan(store_t *st, int cf, store_iter_t *out, pith_err_t *err)
{
	return iter_open(st, cf, NULL, 0, NULL, 0, 1, out, err);
}

int store_iter_prefix(store_t *st, int cf, const uint8_t *prefix, size_t len,
		      store_iter_t *out, pith_err_t *err)
{
	uint8_t hi[256];
	size_t hl = len;
	if (len > sizeof(hi))
		return pith_err_set(err, PITH_EINVAL, "store: prefix too long");
	memcpy(hi, prefix, len);
	/* the smallest key greater than every key with this prefix */
	while (hl > 0 && hi[hl - 1] == 0xff)
		hl--;
	if (hl > 0)
		hi[hl - 1]++;
	return store_iter_open(st, cf, prefix, len, hi, hl, out, err);
}

int store_iter_valid(store_iter_t *it)
{
	return rocksdb_iter_valid(it->it);
}

void store_iter_seek(store_iter_t *it, const uint8_t *key, size_t len)
{
	rocksdb_iter_seek(it->it, (const char *)key, len);
}

const uint8_t *store_iter_key(store_iter_t *it, size_t *len)
{
	return (const uint8_t *)rocksdb_iter_key(it->it, len);
}

const uint8_t *store_iter_value(store_iter_t *it, size_t *len)
{
	return (const uint8_t *)rocksdb_iter_value(it->it, len);
}

void store_iter_next(store_iter_t *it)
{
	rocksdb_iter_next(it->it);
}

void store_iter_last(store_iter_t *it)
{
	rocksdb_iter_seek_to_last(it->it);
}

void store_iter_prev(store_iter_t *it)
{
	rocksdb_iter_prev(it->it);
}

int store_iter_status(store_iter_t *it, pith_err_t *err)
{
	char *e = NULL;
	rocksdb_iter_get_error(it->it, &e);
	return e ? store_op_error(it->st, STORE_OP_READ, err, e, "iterating") : 0;
}

void store_iter_close(store_iter_t *it)
{
	if (it->it)
		rocksdb_iter_destroy(it->it);
	if (it->ro)
		rocksdb_readoptions_destroy(it->ro);
	memset(it, 0, sizeof(*it));
}

/* ---- helpers shared with batch.c and check.c --------------------------- */

void store_events_free(pith_event_t **evs, size_t n)
{
	if (!evs)
		return;
	for (size_t i = 0; i < n; i++)
		pith_event_free(evs[i]);
	free(evs);
}

/* The document a subj key names, appended to out: straight from its time
 * key in docs (the key has created_at and the id), or by id in an older
 * schema. */
static int subj_doc_get(store_t *st, const uint8_t k[STORE_SUBJ_KEY_LEN], pith_buf_t *out,
			pith_err_t *err)
{
	const uint8_t *id = k + STORE_SUBJ_KEY_LEN - STORE_ID_LEN;
	char created[STORE_CREATED_LEN + 1], hex[65];
	int64_t us;
	int rc;
	memcpy(created, k + STORE_SKEY_LEN, STORE_CREATED_LEN);
	created[STORE_CREATED_LEN] = 0;
	if (st->schema < 4 || pith_time_parse(created, &us)) {
		rc = store_doc_get(st, id, out, err);
	} else {
		uint8_t tk[STORE_TIME_KEY_LEN];
		store_time_key_make(us, id, tk);
		rc = store_get_into(st, STORE_CF_DOCS, tk, sizeof(tk), out, err);
	}
	if (rc != PITH_ENOTFOUND)
		return rc;
	pith_hex_encode(id, STORE_ID_LEN, hex);
	return pith_err_set(err, PITH_EIO, "store: subj entry for sha256:%s without its event", hex);
}

int store_subj_event_load(store_t *st, const uint8_t k[STORE_SUBJ_KEY_LEN], pith_buf_t *doc,
			  pith_event_t **ev, pith_err_t *err)
{
	doc->len = 0;
	int rc = subj_doc_get(st, k, doc, err);
	if (rc)
		return rc;
	return pith_event_parse_own(doc->data, doc->len, k + STORE_SUBJ_KEY_LEN - STORE_ID_LEN, ev,
				    err);
}

int store_subject_load(store_t *st, const uint8_t skey[STORE_SKEY_LEN], pith_event_t ***out,
		       size_t *n, pith_err_t *err)
{
	store_iter_t it;
	pith_event_t **evs = NULL;
	pith_buf_t doc = PITH_BUF_INIT;
	size_t cnt = 0, cap = 0;
	int rc = store_iter_prefix(st, STORE_CF_SUBJ, skey, STORE_SKEY_LEN, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl != STORE_SUBJ_KEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: subj key of %zu bytes", kl);
			break;
		}
		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 16;
			pith_event_t **p = realloc(evs, nc * sizeof(*p));
			if (!p) {
				rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
				break;
			}
			evs = p;
			cap = nc;
		}
		if ((rc = store_subj_event_load(st, k, &doc, &evs[cnt], err)))
			break;
		cnt++;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	pith_buf_release(&doc);
	if (rc) {
		store_events_free(evs, cnt);
		return rc;
	}
	*out = evs;
	*n = cnt;
	return 0;
}

int store_bundle_ident(const json_value_t *bundle, int64_t *built_us, char sha[65],
		       pith_err_t *err)
{
	const char *built = json_get_str(bundle, "built_at");
	if (!built || pith_time_parse(built, built_us))
		return pith_err_set(err, PITH_EINVAL, "bundle: built_at missing or not a timestamp");
	uint8_t h[32];
	if (pith_bundle_hash(bundle, h))
		return pith_err_set(err, PITH_EINVAL, "bundle: cannot hash");
	pith_hex_encode(h, 32, sha);
	return 0;
}

int store_bundle_order(int64_t a_us, const uint8_t a_sha[static 32], int64_t b_us,
		       const uint8_t b_sha[static 32])
{
	if (a_us != b_us)
		return a_us > b_us ? 1 : -1;
	/* docs/merge.md: ties go to the smaller bundle_sha256 */
	int c = memcmp(b_sha, a_sha, 32);
	return c > 0 ? 1 : c < 0 ? -1 : 0;
}

int store_bundle_newer(int64_t a_us, const char *a_sha, int64_t b_us, const char *b_sha)
{
	/* lower-case hex sorts as the bytes do; one rule: store_bundle_order */
	uint8_t a[32] = {0}, b[32] = {0};
	pith_hex_decode(a_sha, 64, a, 32);
	pith_hex_decode(b_sha, 64, b, 32);
	return store_bundle_order(a_us, a, b_us, b);
}

int store_bundle_newest(store_t *st, const char *pith_number, int64_t *built_us,
			uint8_t sha[static 32], pith_err_t *err)
{
	pith_buf_t buf = PITH_BUF_INIT;
	json_doc_t *doc = NULL;
	char hex[65];
	pith_err_t e = {0};
	int rc = store_bundle_get(st, pith_number, &buf, &e);
	if (!rc)
		rc = json_parse(&doc, buf.data, buf.len, NULL, &e);
	if (!rc)
		rc = store_bundle_ident(json_doc_root(doc), built_us, hex, &e);
	if (!rc)
		pith_hex_decode(hex, 64, sha, 32);
	else if (rc == PITH_ENOTFOUND || rc == PITH_EIO)
		pith_err_set(err, rc, "%s", e.msg);
	else
		rc = pith_err_set(err, PITH_EIO, "store: stored bundle of %s: %s", pith_number, e.msg);
	json_doc_free(doc);
	pith_buf_release(&buf);
	return rc;
}

int store_bundle_is_newer(store_t *st, const char *pith_number, int64_t built_us,
			  const uint8_t sha[static 32], pith_err_t *err)
{
	int64_t us;
	uint8_t have[32];
	int rc = store_bundle_newest(st, pith_number, &us, have, err);
	if (rc == PITH_ENOTFOUND)
		return 1;
	if (rc)
		return rc;
	return store_bundle_order(built_us, sha, us, have) > 0;
}

int store_bundle_aliases_load(store_t *st, const uint8_t skey[STORE_SKEY_LEN],
			      json_doc_t **doc, const json_value_t **aliases, int64_t *built_us,
			      pith_err_t *err)
{
	char *val;
	size_t len;
	*doc = NULL;
	*aliases = NULL;
	*built_us = 0;
	int rc = store_get_raw(st, STORE_CF_BUNDLES, skey, STORE_SKEY_LEN, &val, &len, err);
	if (rc || !val)
		return rc;
	rc = store_bundle_aliases_parse((const uint8_t *)val, len, doc, aliases, built_us, err);
	rocksdb_free(val);
	return rc;
}

int store_bundle_aliases_parse(const uint8_t *val, size_t len, json_doc_t **doc,
			       const json_value_t **aliases, int64_t *built_us, pith_err_t *err)
{
	int rc = json_parse(doc, val, len, NULL, err);
	if (rc)
		return rc;
	*aliases = json_get_type(json_doc_root(*doc), "source_aliases", JSON_ARRAY);
	const char *built = json_get_str(json_doc_root(*doc), "built_at");
	if (!built || pith_time_parse(built, built_us))
		return pith_err_set(err, PITH_EIO, "store: stored bundle without a valid built_at");
	return 0;
}

size_t store_alias_key(const char *kind, const char *value, uint8_t out[STORE_ALIAS_KEY_MAX])
{
	size_t kl = strlen(kind), vl = strlen(value);
	if (kl == 0 || kl + 1 + vl > STORE_ALIAS_KEY_MAX)
		return 0;
	memcpy(out, kind, kl);
	out[kl] = 0;
	memcpy(out + kl + 1, value, vl);
	if (!strcmp(kind, "doi"))
		for (size_t i = kl + 1; i < kl + 1 + vl; i++)
			out[i] = (uint8_t)tolower(out[i]);
	return kl + 1 + vl;
}

int store_record_info_decode(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
			     store_record_info_t *r, pith_err_t *err)
{
	store_rec_t rec;
	if (kl != STORE_SKEY_LEN || store_rec_decode(v, vl, &rec))
		return pith_err_set(err, PITH_EIO, "store: malformed record summary (%zu/%zu bytes)",
				    kl, vl);
	store_skey_pith(k, r->pith_number);
	r->event_count = rec.events;
	memcpy(r->state_hash, rec.hash, 32);
	r->has_bundle = rec.has_bundle;
	return 0;
}

/* ---- iteration ---------------------------------------------------------- */

int store_records_each(store_t *st, store_record_fn fn, void *arg, pith_err_t *err)
{
	store_iter_t it;
	int rc = store_iter_open(st, STORE_CF_RECORDS, NULL, 0, NULL, 0, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		store_record_info_t r;
		if ((rc = store_record_info_decode(k, kl, v, vl, &r, err)) || (rc = fn(arg, &r)))
			break;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}

int store_states_each(store_t *st, const char *after, size_t limit, store_state_fn fn, void *arg,
		      char *last, pith_err_t *err)
{
	uint8_t lo[STORE_SKEY_LEN];
	size_t lo_len = 0, n = 0;
	store_iter_t it;
	int rc;
	if (last)
		last[0] = 0;
	if (after && after[0]) {
		if ((rc = store_skey_of(after, lo, err)))
			return rc;
		lo_len = sizeof(lo);
	}
	if ((rc = iter_open(st, STORE_CF_STATES, lo, lo_len, NULL, 0, 1, &it, err)))
		return rc;
	for (; store_iter_valid(&it) && (!limit || n < limit); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		if (kl != STORE_SKEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: state key of %zu bytes", kl);
			break;
		}
		if (lo_len && !memcmp(k, lo, sizeof(lo)))
			continue; /* after itself */
		char pith[PITH_NUMBER_LEN + 1];
		store_skey_pith(k, pith);
		if ((rc = fn(arg, pith, v, vl)))
			break;
		if (last)
			memcpy(last, pith, sizeof(pith));
		n++;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}

int store_events_each(store_t *st, const char *pith_number, store_event_fn fn, void *arg,
		      pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	store_iter_t it;
	int rc;
	if (pith_number) {
		if ((rc = store_skey_of(pith_number, skey, err)) ||
		    (rc = store_iter_prefix(st, STORE_CF_SUBJ, skey, sizeof(skey), &it, err)))
			return rc;
	} else if ((rc = store_iter_open(st, STORE_CF_SUBJ, NULL, 0, NULL, 0, &it, err))) {
		return rc;
	}
	pith_buf_t doc = PITH_BUF_INIT;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl != STORE_SUBJ_KEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: subj key of %zu bytes", kl);
			break;
		}
		doc.len = 0;
		if ((rc = subj_doc_get(st, k, &doc, err)) ||
		    (rc = fn(arg, k + kl - STORE_ID_LEN, doc.data, doc.len)))
			break;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	pith_buf_release(&doc);
	return rc;
}

int store_time_each(store_t *st, int64_t from_us, int64_t to_us, store_time_fn fn, void *arg,
		    pith_err_t *err)
{
	return store_time_each_after(st, from_us, NULL, to_us, fn, arg, err);
}

int store_time_each_after(store_t *st, int64_t after_us, const uint8_t *after_id, int64_t to_us,
			  store_time_fn fn, void *arg, pith_err_t *err)
{
	/* the lower bound (us, id, 0x00) is the first 41-byte string after the
	 * cursor's 40-byte key, so every key strictly after it, and no other,
	 * is at or above it */
	uint8_t lo[STORE_TIME_KEY_LEN + 1], hi[8];
	size_t lo_len = 8;
	store_iter_t it;
	if (to_us <= after_us)
		return 0;
	store_time_put(lo, after_us);
	if (after_id) {
		memcpy(lo + 8, after_id, STORE_ID_LEN);
		lo[STORE_TIME_KEY_LEN] = 0;
		lo_len = sizeof(lo);
	}
	store_time_put(hi, to_us);
	/* the whole index (the reconciliation set's load at start, 10
	 * million keys in a large store) is one pass: read ahead, and keep
	 * the block cache for the point reads that serve */
	int whole = after_us == INT64_MIN && !after_id && to_us == INT64_MAX;
	int rc = iter_open(st, STORE_CF_TIME, lo, lo_len, hi, 8, whole, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl != STORE_TIME_KEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: time key of %zu bytes", kl);
			break;
		}
		if ((rc = fn(arg, store_time_get(k), k + 8)))
			break;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}

/* A seqlock: the writer makes counts_seq odd, writes, makes it even
 * again; a reader retries while it is odd or changed under it. status
 * and metrics read the counters on the event loop, and wmu may be held
 * by a commit or by a flush for most of a second. */
void store_counts_set(store_t *st, const store_counts_t *c)
{
	uint64_t s = st->counts_seq;
	__atomic_store_n(&st->counts_seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&st->counts.events, c->events, __ATOMIC_RELAXED);
	__atomic_store_n(&st->counts.records, c->records, __ATOMIC_RELAXED);
	__atomic_store_n(&st->counts.bundles, c->bundles, __ATOMIC_RELAXED);
	__atomic_store_n(&st->counts_seq, s + 2, __ATOMIC_RELEASE);
}

void store_counts_get(store_t *st, store_counts_t *out)
{
	for (;;) {
		uint64_t s = __atomic_load_n(&st->counts_seq, __ATOMIC_ACQUIRE);
		if (s & 1) {
			sched_yield();
			continue;
		}
		out->events = __atomic_load_n(&st->counts.events, __ATOMIC_RELAXED);
		out->records = __atomic_load_n(&st->counts.records, __ATOMIC_RELAXED);
		out->bundles = __atomic_load_n(&st->counts.bundles, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&st->counts_seq, __ATOMIC_RELAXED) == s)
			return;
	}
}

int store_counts_durable(store_t *st, store_counts_t *out, pith_err_t *err)
{
	if (!store_is_unlogged(st)) {
		store_counts_get(st, out);
		return 0;
	}
	/* kPersistedTier: the table files only, not the memtables (RocksDB
	 * skips them for a Get while writes without the log are unflushed) */
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_read_tier(ro, 2); /* kPersistedTier */
	int rc = store_meta_counts_get(st, ro, out, err);
	rocksdb_readoptions_destroy(ro);
	return rc;
}

void store_usage_get(store_t *st, store_usage_t *out)
{
	memset(out, 0, sizeof(*out));
	out->compacting = store_compaction_busy(st);
	for (int cf = 0; cf < STORE_NCF; cf++) {
		uint64_t v;
		unsigned slot;
		rocksdb_column_family_handle_t *h = store_cf_enter(st, cf, &slot);
		if (h && !rocksdb_property_int_cf(st->db, h, "rocksdb.total-sst-files-size", &v))
			out->sst_bytes += v;
		if (h && !rocksdb_property_int_cf(st->db, h, "rocksdb.cur-size-all-mem-tables", &v))
			out->memtable_bytes += v;
		if (h && !rocksdb_property_int_cf(st->db, h, "rocksdb.estimate-pending-compaction-bytes",
						  &v))
			out->pending_compaction_bytes += v;
		store_cf_leave(st, slot);
	}
	DIR *d = opendir(st->dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[4096];
		struct stat sb;
		size_t l = strlen(e->d_name);
		if (l <= 4 || strcmp(e->d_name + l - 4, ".log"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", st->dir, e->d_name);
		if (!stat(p, &sb) && S_ISREG(sb.st_mode))
			out->wal_bytes += (uint64_t)sb.st_size;
	}
	if (d)
		closedir(d);
}
