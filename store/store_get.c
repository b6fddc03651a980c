/* Lookups (store.h): events by id, one or many at once, states, bundles
 * and records by pith number, and the resolution of what a user typed
 * (a pith number, a prefix, an alias) to a record. */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ids.h"

/* ---- lookups ------------------------------------------------------------ */

/* Appends the value under key to out through a pinned slice (no copy of
 * its own, no malloc of the value). PITH_ENOTFOUND without touching err:
 * the caller names what was missing, so that a hit formats nothing. */
int store_get_into(store_t *st, int cf, const uint8_t *key, size_t klen, pith_buf_t *out,
		   pith_err_t *err)
{
	char *e = NULL;
	store_perf_off();
	unsigned slot;
	rocksdb_pinnableslice_t *v = rocksdb_get_pinned_cf(st->db, st->ro, store_cf_enter(st, cf, &slot),
							   (const char *)key, klen, &e);
	store_cf_leave(st, slot);
	if (e) {
		rocksdb_pinnableslice_destroy(v);
		return store_op_error(st, STORE_OP_READ, err, e, store_cf_names[cf]);
	}
	if (!v)
		return PITH_ENOTFOUND;
	size_t len = 0;
	const char *val = rocksdb_pinnableslice_value(v, &len);
	int rc = pith_buf_append(out, val, len) ? pith_err_set(err, PITH_ENOMEM, "store: out of memory") : 0;
	rocksdb_pinnableslice_destroy(v);
	return rc;
}

int store_event_get(store_t *st, const uint8_t id[static 32], pith_buf_t *out, pith_err_t *err)
{
	int rc = store_doc_get(st, id, out, err);
	if (rc == PITH_ENOTFOUND) {
		char hex[65];
		pith_hex_encode(id, 32, hex);
		pith_err_set(err, PITH_ENOTFOUND, "event sha256:%s: not in the store", hex);
	}
	return rc;
}

/* One id of a MultiGet that failed: counted, told, and the first
 * message kept in err. */
static void get_many_failed(store_t *st, const uint8_t id[32], char *e, const char *cf,
			    size_t *bad, pith_err_t *err)
{
	char hex[65], what[120];
	pith_hex_encode(id, 32, hex);
	snprintf(what, sizeof(what), "%s: reading event sha256:%s", cf, hex);
	if (!e) { /* indexed without its document */
		const char m[] = "indexed, but its document is missing";
		e = malloc(sizeof(m));
		if (e)
			memcpy(e, m, sizeof(m));
	}
	store_op_error(st, STORE_OP_READ, *bad ? NULL : err, e, what);
	(*bad)++;
}

/* One key of docs for a batched MultiGet: the document of id created at
 * the time in tk (filled by the caller), read into slot n. */
static void docs_slot(const uint8_t *tk, size_t n, const char **keys, size_t *sizes,
		      rocksdb_pinnableslice_t **vals, char **errs)
{
	keys[n] = (const char *)tk;
	sizes[n] = STORE_TIME_KEY_LEN;
	vals[n] = NULL;
	errs[n] = NULL;
}

/* Up to STORE_GET_MANY ids. Those with a time (times[i] != STORE_TIME_NONE):
 * their documents in one batched MultiGet of docs. The others, and those
 * not found where their time said: their events values in one batched
 * MultiGet, then the documents the 8-byte ones point to in a second (in
 * time order, so a peer asking for events in the order it learnt them
 * reads each block of docs once); longer values are documents (schemas 2
 * and 3). While the index of events is aside, the others are not found.
 * Returns how many could not be read. */
static size_t get_many_chunk(store_t *st, const uint8_t (*ids)[32], const int64_t *times,
			     size_t k, store_event_fn fn, void *arg, size_t bad, pith_err_t *err)
{
	enum { G = STORE_GET_MANY };
	const char *keys[G], *dkeys[G], *hkeys[G];
	size_t sizes[G], dsizes[G], hsizes[G];
	rocksdb_pinnableslice_t *vals[G], *docs[G], *hdocs[G];
	char *errs[G], *derrs[G], *herrs[G];
	uint8_t tks[G][STORE_TIME_KEY_LEN], hks[G][STORE_TIME_KEY_LEN];
	int hat[G];   /* index into hdocs (read by time), -1, or -2: not read (aside) */
	int lat[G];   /* index into vals (looked up by id), or -1 */
	int at[G];    /* for each lookup by id: index into docs, or -1 */
	size_t look[G];
	size_t nh = 0, nl = 0, nd = 0;
	store_perf_off();
	for (size_t i = 0; i < k; i++) {
		hat[i] = lat[i] = -1;
		if (!times || times[i] == STORE_TIME_NONE || !st->cf[STORE_CF_DOCS])
			continue;
		store_time_key_make(times[i], ids[i], hks[nh]);
		docs_slot(hks[nh], nh, hkeys, hsizes, hdocs, herrs);
		hat[i] = (int)nh++;
	}
	if (nh)
		rocksdb_batched_multi_get_cf(st->db, st->ro, st->cf[STORE_CF_DOCS], nh, hkeys,
					     hsizes, hdocs, herrs, 0);
	/* while a first catch-up writes events aside, an id is not looked up
	 * by id (each found would sort the side family's memtable): not found */
	int aside = store_events_aside(st);
	for (size_t i = 0; i < k; i++) {
		int h = hat[i];
		if (h >= 0 && (hdocs[h] || herrs[h]))
			continue;
		if (aside) {
			hat[i] = -2; /* nothing read: not found */
			continue;
		}
		keys[nl] = (const char *)ids[i];
		sizes[nl] = 32;
		vals[nl] = NULL;
		errs[nl] = NULL;
		look[nl] = i;
		lat[i] = (int)nl++;
	}
	if (nl) {
		unsigned slot;
		rocksdb_column_family_handle_t *h = store_cf_enter(st, STORE_CF_EVENTS, &slot);
		rocksdb_batched_multi_get_cf(st->db, st->ro, h, nl, keys, sizes, vals, errs, 0);
		store_cf_leave(st, slot);
	}
	for (size_t j = 0; j < nl; j++) {
		size_t len = 0;
		const char *v = vals[j] && !errs[j] ? rocksdb_pinnableslice_value(vals[j], &len) : NULL;
		at[j] = -1;
		if (v && st->cf[STORE_CF_DOCS] && store_doc_key(v, len, ids[look[j]], tks[nd])) {
			docs_slot(tks[nd], nd, dkeys, dsizes, docs, derrs);
			at[j] = (int)nd++;
		}
	}
	if (nd)
		rocksdb_batched_multi_get_cf(st->db, st->ro, st->cf[STORE_CF_DOCS], nd, dkeys, dsizes,
					     docs, derrs, 0);
	for (size_t i = 0; i < k; i++) {
		size_t len = 0;
		const char *v = NULL;
		int h = hat[i], j = lat[i];
		if (h == -2) {
			/* not looked up */
		} else if (j < 0) {
			if (hdocs[h])
				v = rocksdb_pinnableslice_value(hdocs[h], &len);
			else
				get_many_failed(st, ids[i], herrs[h], "docs", &bad, err);
			herrs[h] = NULL;
		} else if (errs[j]) {
			get_many_failed(st, ids[i], errs[j], "events", &bad, err);
			errs[j] = NULL;
		} else if (at[j] >= 0) {
			int d = at[j];
			if (docs[d] && !derrs[d])
				v = rocksdb_pinnableslice_value(docs[d], &len);
			else
				get_many_failed(st, ids[i], derrs[d], "docs", &bad, err);
			derrs[d] = NULL;
		} else if (vals[j]) {
			v = rocksdb_pinnableslice_value(vals[j], &len);
		}
		fn(arg, ids[i], (const uint8_t *)v, len);
	}
	for (size_t h = 0; h < nh; h++)
		rocksdb_pinnableslice_destroy(hdocs[h]);
	for (size_t j = 0; j < nl; j++)
		rocksdb_pinnableslice_destroy(vals[j]);
	for (size_t d = 0; d < nd; d++)
		rocksdb_pinnableslice_destroy(docs[d]);
	return bad;
}

size_t store_events_get_many_at(store_t *st, const uint8_t (*ids)[32],
				const int64_t *created_us, size_t n, store_event_fn fn,
				void *arg, pith_err_t *err)
{
	size_t bad = 0;
	while (n) {
		size_t k = n < STORE_GET_MANY ? n : STORE_GET_MANY;
		bad = get_many_chunk(st, ids, created_us, k, fn, arg, bad, err);
		ids += k;
		if (created_us)
			created_us += k;
		n -= k;
	}
	return bad;
}

size_t store_events_get_many(store_t *st, const uint8_t (*ids)[32], size_t n,
			     store_event_fn fn, void *arg, pith_err_t *err)
{
	return store_events_get_many_at(st, ids, NULL, n, fn, arg, err);
}

int store_events_aside(store_t *st)
{
	/* a side family made by this process: one found at open is only read
	 * from its table files (read-only) or moved before store_open returns */
	return __atomic_load_n(&st->cf[STORE_CF_EVENTS], __ATOMIC_ACQUIRE) !=
	       st->cf_open[STORE_CF_EVENTS];
}

int store_event_has_at(store_t *st, const uint8_t id[static 32], int64_t created_us,
		       pith_err_t *err)
{
	if (!store_events_aside(st) || st->schema < 4)
		return store_event_has(st, id, err);
	uint8_t tk[STORE_TIME_KEY_LEN];
	char *val;
	size_t len;
	store_time_key_make(created_us, id, tk);
	int rc = store_get_raw(st, STORE_CF_DOCS, tk, sizeof(tk), &val, &len, err);
	if (rc)
		return rc;
	rocksdb_free(val);
	return val != NULL;
}

int store_event_has(store_t *st, const uint8_t id[static 32], pith_err_t *err)
{
	if (store_events_aside(st))
		return STORE_HAS_UNKNOWN;
	char *val;
	size_t len;
	int rc = store_get_raw(st, STORE_CF_EVENTS, id, 32, &val, &len, err);
	if (rc)
		return rc;
	rocksdb_free(val);
	return val != NULL;
}

int store_event_id_parse(const char *s, uint8_t id[static 32], pith_err_t *err)
{
	const char *h = strncmp(s, "sha256:", 7) ? s : s + 7;
	if (strlen(h) != 64 || pith_hex_decode(h, 64, id, 32))
		return pith_err_set(err, PITH_EINVAL,
				    "event id '%.80s' is not sha256: and 64 lower-case hex digits", s);
	return 0;
}

int store_skey_of(const char *pith_number, uint8_t skey[STORE_SKEY_LEN], pith_err_t *err)
{
	if (!pith_number_is_valid(pith_number))
		return pith_err_set(err, PITH_EINVAL, "'%.60s' is not a full pith number", pith_number);
	store_skey_make(pith_number, skey);
	return 0;
}

int store_state_get(store_t *st, const char *pith_number, pith_buf_t *out, pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	int rc = store_skey_of(pith_number, skey, err);
	if (!rc)
		rc = store_get_into(st, STORE_CF_STATES, skey, sizeof(skey), out, err);
	if (rc == PITH_ENOTFOUND)
		pith_err_set(err, rc, "state of %s: not in the store", pith_number);
	return rc;
}

int store_bundle_get(store_t *st, const char *pith_number, pith_buf_t *out, pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	int rc = store_skey_of(pith_number, skey, err);
	if (!rc)
		rc = store_get_into(st, STORE_CF_BUNDLES, skey, sizeof(skey), out, err);
	if (rc == PITH_ENOTFOUND)
		pith_err_set(err, rc, "bundle of %s: not in the store", pith_number);
	return rc;
}

int store_record_get(store_t *st, const char *pith_number, store_record_info_t *out,
		     pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	char *val;
	size_t len;
	int rc = store_skey_of(pith_number, skey, err);
	if (rc || (rc = store_get_raw(st, STORE_CF_RECORDS, skey, sizeof(skey), &val, &len, err)))
		return rc;
	if (!val)
		return pith_err_set(err, PITH_ENOTFOUND, "record %s: not in the store", pith_number);
	rc = store_record_info_decode(skey, sizeof(skey), (const uint8_t *)val, len, out, err);
	rocksdb_free(val);
	return rc;
}

/* Records whose body starts with prefix (upper-case base32, 1..26 chars).
 * Exactly one: its pith number in out. */
static int resolve_prefix(store_t *st, const char *prefix, const char *typed,
			  char out[static PITH_NUMBER_LEN + 1], pith_err_t *err)
{
	store_iter_t it;
	size_t found = 0;
	char first[PITH_NUMBER_LEN + 1] = "", second[PITH_NUMBER_LEN + 1] = "";
	int rc = store_iter_prefix(st, STORE_CF_RECORDS, (const uint8_t *)prefix, strlen(prefix),
				   &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it) && found < 2; store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl != STORE_SKEY_LEN)
			continue;
		store_skey_pith(k, found ? second : first);
		found++;
	}
	rc = store_iter_status(&it, err);
	store_iter_close(&it);
	if (rc)
		return rc;
	if (found == 0)
		return pith_err_set(err, PITH_ENOTFOUND, "%s: no stored record", typed);
	if (found > 1)
		return pith_err_set(err, PITH_EINVAL, "%s: ambiguous, names %s, %s and maybe more",
				    typed, first, second);
	memcpy(out, first, PITH_NUMBER_LEN + 1);
	return 0;
}

/* The record with the best claim on (kind, value): the greater rank
 * (bundle over derived, then the later built_at), then the smaller pith
 * number. PITH_ENOTFOUND if no record claims it. */
static int resolve_alias(store_t *st, const char *kind, const char *value,
			 char out[static PITH_NUMBER_LEN + 1], pith_err_t *err)
{
	uint8_t key[STORE_ALIAS_KEY_MAX + 1], best[STORE_ALIAS_RANK_LEN];
	size_t kl = store_alias_key(kind, value, key);
	store_iter_t it;
	int found = 0;
	if (!kl)
		return PITH_ENOTFOUND;
	key[kl++] = 0;
	int rc = store_iter_prefix(st, STORE_CF_ALIASES, key, kl, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t ekl, vl;
		const uint8_t *k = store_iter_key(&it, &ekl), *v = store_iter_value(&it, &vl);
		if (ekl != kl + PITH_NUMBER_LEN || vl != STORE_ALIAS_RANK_LEN)
			continue;
		/* entries come in pith number order: on equal rank the first stays */
		if (found && memcmp(v, best, STORE_ALIAS_RANK_LEN) <= 0)
			continue;
		memcpy(best, v, STORE_ALIAS_RANK_LEN);
		memcpy(out, k + kl, PITH_NUMBER_LEN);
		out[PITH_NUMBER_LEN] = 0;
		found = 1;
	}
	rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc ? rc : found ? 0 : PITH_ENOTFOUND;
}

int store_resolve(store_t *st, const char *text, char out[static PITH_NUMBER_LEN + 1],
		  pith_err_t *err)
{
	pith_id_t id;
	int rc = pith_id_parse(text, &id, err);
	if (rc)
		return rc;
	if (id.kind == PITH_ID_FULL) {
		if (id.number[0]) {
			/* exact year given: that record or nothing */
			store_record_info_t r;
			if ((rc = store_record_get(st, id.number, &r, err)))
				return rc;
			memcpy(out, r.pith_number, PITH_NUMBER_LEN + 1);
			return 0;
		}
		return resolve_prefix(st, id.value, text, out, err);
	}
	if (id.alias_kind[0]) {
		if ((rc = resolve_alias(st, id.alias_kind, id.value, out, err)) != PITH_ENOTFOUND)
			return rc;
	}
	if (id.kind == PITH_ID_SHORT)
		return resolve_prefix(st, id.value, text, out, err);
	return pith_err_set(err, PITH_ENOTFOUND, "%s: no stored record has this alias", text);
}

