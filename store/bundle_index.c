/* The bundle index (keys.h, bundle_index): each record's newest bundle by
 * (built_at, bundle_sha256) and by hash, for bundle reconciliation. Kept
 * current by batch.c in the commit that stores a newer bundle; built here
 * when a schema-2 store is opened read-write; audited by store_check. */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void time_key(int64_t us, const uint8_t sha[32], uint8_t k[STORE_BIDX_TIME_LEN])
{
	k[0] = STORE_BIDX_TIME;
	store_time_put(k + 1, us);
	memcpy(k + 9, sha, 32);
}

static void hash_key(const uint8_t sha[32], uint8_t k[STORE_BIDX_HASH_LEN])
{
	k[0] = STORE_BIDX_HASH;
	memcpy(k + 1, sha, 32);
}

static int index_ready(store_t *st, pith_err_t *err)
{
	if (!st->cf[STORE_CF_BUNDLE_INDEX])
		return pith_err_set(err, PITH_EINVAL, "store: no bundle index in this schema-%s "
				    "store (open it read-write once to build it)", STORE_SCHEMA_2);
	return 0;
}

static void index_put(store_wsink_t *ws, const uint8_t skey[STORE_SKEY_LEN], int64_t us,
		      const uint8_t sha[32])
{
	uint8_t tk[STORE_BIDX_TIME_LEN], hk[STORE_BIDX_HASH_LEN], hv[STORE_BIDX_HASH_VAL_LEN];
	time_key(us, sha, tk);
	hash_key(sha, hk);
	store_time_put(hv, us);
	memcpy(hv + 8, skey, STORE_SKEY_LEN);
	ws->put(ws, STORE_CF_BUNDLE_INDEX, tk, sizeof(tk), skey, STORE_SKEY_LEN);
	ws->put(ws, STORE_CF_BUNDLE_INDEX, hk, sizeof(hk), hv, sizeof(hv));
}

void store_bundle_index_write(store_wsink_t *ws, const uint8_t skey[STORE_SKEY_LEN], int64_t new_us,
			      const char *new_sha, int64_t old_us, const char *old_sha)
{
	uint8_t sha[32];
	if (old_sha && !pith_hex_decode(old_sha, 64, sha, 32)) {
		uint8_t tk[STORE_BIDX_TIME_LEN], hk[STORE_BIDX_HASH_LEN];
		time_key(old_us, sha, tk);
		hash_key(sha, hk);
		ws->del(ws, STORE_CF_BUNDLE_INDEX, tk, sizeof(tk));
		ws->del(ws, STORE_CF_BUNDLE_INDEX, hk, sizeof(hk));
	}
	if (new_sha && !pith_hex_decode(new_sha, 64, sha, 32))
		index_put(ws, skey, new_us, sha);
}

/* Reads (built_us, sha) of a stored bundle's JSON. */
static int bundle_value_ident(const uint8_t *v, size_t vl, int64_t *us, uint8_t sha[32],
			      pith_err_t *err)
{
	json_doc_t *d = NULL;
	char hex[65];
	int rc = json_parse(&d, v, vl, NULL, err);
	if (!rc)
		rc = store_bundle_ident(json_doc_root(d), us, hex, err);
	json_doc_free(d);
	if (!rc)
		pith_hex_decode(hex, 64, sha, 32);
	return rc;
}

/* Puts only: the index cannot hold anything else yet (no commit runs
 * before the build ends), so a build cut short by a crash is simply done
 * again, over the entries it had written. */
static int index_one(void *arg, rocksdb_writebatch_t *wb, const uint8_t *k, size_t kl,
		     const uint8_t *v, size_t vl, pith_err_t *err)
{
	int64_t us;
	uint8_t sha[32];
	if (kl != STORE_SKEY_LEN)
		return pith_err_set(err, PITH_EIO, "store: bundles key of %zu bytes", kl);
	pith_err_t e = {0};
	if (bundle_value_ident(v, vl, &us, sha, &e))
		return pith_err_set(err, PITH_EIO, "store: stored bundle of %.26s: %s", (const char *)k,
				    e.msg);
	store_wsink_t ws;
	store_wsink_wb(&ws, wb, arg);
	index_put(&ws, k, us, sha);
	return 1;
}

int store_bundle_index_build(store_t *st, size_t *built, pith_err_t *err)
{
	/* "3" only once every bundle has its entries */
	uint64_t n = 0;
	int rc = store_upgrade_walk(st, STORE_CF_BUNDLES, index_one, st, STORE_SCHEMA_3,
				    "writing the bundle index", &n, err);
	if (!rc && built)
		*built = (size_t)n;
	return rc;
}

int store_bundle_ref_get(store_t *st, const uint8_t sha[static 32], int64_t *built_us,
			 char pith[static PITH_NUMBER_LEN + 1], pith_err_t *err)
{
	uint8_t hk[STORE_BIDX_HASH_LEN];
	char *val;
	size_t vl;
	int rc = index_ready(st, err);
	if (rc)
		return rc;
	hash_key(sha, hk);
	if ((rc = store_get_raw(st, STORE_CF_BUNDLE_INDEX, hk, sizeof(hk), &val, &vl, err)))
		return rc;
	if (!val)
		return pith_err_set(err, PITH_ENOTFOUND, "bundle: no stored newest bundle has this hash");
	if (vl != STORE_BIDX_HASH_VAL_LEN) {
		rocksdb_free(val);
		return pith_err_set(err, PITH_EIO, "store: bundle index value of %zu bytes", vl);
	}
	*built_us = store_time_get((const uint8_t *)val);
	store_skey_pith((const uint8_t *)val + 8, pith);
	rocksdb_free(val);
	return 0;
}

int store_bundle_refs_each(store_t *st, store_bundle_ref_fn fn, void *arg, pith_err_t *err)
{
	uint8_t lo = STORE_BIDX_TIME, hi = STORE_BIDX_TIME + 1;
	store_iter_t it;
	int rc = index_ready(st, err);
	if (rc || (rc = store_iter_open(st, STORE_CF_BUNDLE_INDEX, &lo, 1, &hi, 1, &it, err)))
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		char pith[PITH_NUMBER_LEN + 1];
		if (kl != STORE_BIDX_TIME_LEN || vl != STORE_SKEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: bundle index entry of %zu/%zu bytes",
					  kl, vl);
			break;
		}
		store_skey_pith(v, pith);
		if ((rc = fn(arg, store_time_get(k + 1), k + 9, pith)))
			break;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}

/* ---- the audit ------------------------------------------------------------ */

static int entry_is(store_t *st, const uint8_t *k, size_t kl, const uint8_t *want, size_t wl,
		    int *ok, pith_err_t *err)
{
	char *val;
	size_t vl;
	int rc = store_get_raw(st, STORE_CF_BUNDLE_INDEX, k, kl, &val, &vl, err);
	*ok = val && vl == wl && !memcmp(val, want, wl);
	rocksdb_free(val);
	return rc;
}

int store_bundle_index_audit(store_t *st, void (*problem)(void *arg, const char *line),
			     void *arg, pith_err_t *err)
{
	store_iter_t it;
	uint64_t nbundles = 0;
	char line[200];
	if (!st->cf[STORE_CF_BUNDLE_INDEX])
		return 0; /* a schema-2 store opened read-only: built at its next read-write open */
	int rc = store_iter_open(st, STORE_CF_BUNDLES, NULL, 0, NULL, 0, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it) && !rc; store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		int64_t us;
		uint8_t sha[32], tk[STORE_BIDX_TIME_LEN], hk[STORE_BIDX_HASH_LEN];
		uint8_t hv[STORE_BIDX_HASH_VAL_LEN];
		pith_err_t e = {0};
		int tok = 0, hok = 0;
		nbundles++;
		if (kl != STORE_SKEY_LEN || bundle_value_ident(v, vl, &us, sha, &e))
			continue; /* the bundles audit reports those */
		time_key(us, sha, tk);
		hash_key(sha, hk);
		store_time_put(hv, us);
		memcpy(hv + 8, k, STORE_SKEY_LEN);
		if ((rc = entry_is(st, tk, sizeof(tk), k, STORE_SKEY_LEN, &tok, err)) ||
		    (rc = entry_is(st, hk, sizeof(hk), hv, sizeof(hv), &hok, err)))
			break;
		if (!tok || !hok) {
			snprintf(line, sizeof(line), "bundle_index: the bundle of %.26s lacks its %s entry",
				 (const char *)k, !tok ? "time" : "hash");
			problem(arg, line);
		}
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	if (rc)
		return rc;
	/* every bundle has its two entries (checked above): equal counts mean
	 * none is left of a replaced bundle */
	const store_key_kind_t kinds[2] = {{STORE_BIDX_TIME, STORE_BIDX_TIME_LEN, "time"},
					   {STORE_BIDX_HASH, STORE_BIDX_HASH_LEN, "hash"}};
	return store_audit_key_kinds(st, STORE_CF_BUNDLE_INDEX, kinds, nbundles, "bundles", problem,
				     arg, err);
}
