/* The state root's leaves (proto/stateroot.h, docs/state-root.md section
 * 12) read from the records family: every record's pith number (its
 * SKEY) and state hash (its summary), in the tree's key order. The
 * family is in ASCII order of the body, not key order: a bit prefix fixes
 * its first whole characters and leaves the next a contiguous range of
 * 5-bit values, which is one or two contiguous ranges of characters
 * (A-Z are 0-25, 2-7 are 26-31 and sort before A). */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

static char b32char(unsigned v)
{
	return v < 26 ? (char)('A' + v) : (char)('2' + v - 26);
}

struct store_sr_reader {
	store_iter_t it; /* over all of the records family, as it was when made */
};

store_sr_reader_t *store_sr_reader_new(store_t *st, pith_err_t *err)
{
	store_sr_reader_t *rd = calloc(1, sizeof(*rd));
	if (!rd) {
		pith_err_set(err, PITH_ENOMEM, "store: out of memory");
		return NULL;
	}
	if (store_iter_open(st, STORE_CF_RECORDS, NULL, 0, NULL, 0, &rd->it, err)) {
		free(rd);
		return NULL;
	}
	return rd;
}

void store_sr_reader_free_(store_sr_reader_t *rd)
{
	if (!rd)
		return;
	store_iter_close(&rd->it);
	free(rd);
}

/* Appends the records whose SKEY lies in [lo, hi) (prefixes of len
 * bytes) to out[*n..cap); PITH_ETOOBIG past cap. Through rd's iterator
 * when given, else one of its own. */
static int scan_range(store_t *st, store_sr_reader_t *rd, const uint8_t *lo, const uint8_t *hi,
		      size_t len, pith_sr_leaf_t *out, size_t cap, size_t *n)
{
	store_iter_t own, *it = rd ? &rd->it : &own;
	pith_err_t err = {0};
	int rc = 0;
	if (rd)
		store_iter_seek(it, lo, len);
	else if ((rc = store_iter_open(st, STORE_CF_RECORDS, lo, len, hi, len, &own, &err)))
		return rc;
	for (; store_iter_valid(it); store_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(it, &kl), *v = store_iter_value(it, &vl);
		if (kl < len || memcmp(k, hi, len) >= 0)
			break; /* past the range (a reader's iterator has no bound) */
		store_record_info_t r;
		if ((rc = store_record_info_decode(k, kl, v, vl, &r, &err)))
			break;
		if (*n == cap) {
			rc = PITH_ETOOBIG;
			break;
		}
		memcpy(out[*n].pith, r.pith_number, sizeof(out[*n].pith));
		memcpy(out[*n].state, r.state_hash, 32);
		(*n)++;
	}
	if (!rc)
		rc = store_iter_status(it, &err);
	if (!rd)
		store_iter_close(&own);
	return rc;
}

/* Sorts a few leaves by key (insertion: a listing is at most a bucket). */
static void sort_few(pith_sr_leaf_t *l, size_t n)
{
	uint8_t (*k)[PITH_SR_KEY_BYTES] = malloc((n + 1) * PITH_SR_KEY_BYTES);
	if (!k)
		return; /* the tree's check of the order says so */
	for (size_t i = 0; i < n; i++)
		pith_sr_key(l[i].pith, k[i]);
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && memcmp(k[j - 1], k[j], PITH_SR_KEY_BYTES) > 0; j--) {
			pith_sr_leaf_t t = l[j];
			l[j] = l[j - 1];
			l[j - 1] = t;
			uint8_t tk[PITH_SR_KEY_BYTES];
			memcpy(tk, k[j], sizeof(tk));
			memcpy(k[j], k[j - 1], sizeof(tk));
			memcpy(k[j - 1], tk, sizeof(tk));
		}
	free(k);
}

int store_sr_list(void *ctx, const uint8_t key[PITH_SR_KEY_BYTES], unsigned plen,
		  pith_sr_leaf_t *out, size_t cap, size_t *n)
{
	return store_sr_list_in(ctx, NULL, key, plen, out, cap, n);
}

int store_sr_list_in(store_t *st, store_sr_reader_t *rd, const uint8_t key[PITH_SR_KEY_BYTES],
		     unsigned plen, pith_sr_leaf_t *out, size_t cap, size_t *n)
{
	*n = 0;
	if (plen > PITH_SR_KEY_BITS)
		return PITH_EINVAL;
	unsigned whole = plen / 5, rest = plen % 5;
	uint8_t lo[PITH_BODY_LEN + 1], hi[PITH_BODY_LEN + 1];
	for (unsigned c = 0; c < whole; c++) {
		unsigned v = 0;
		for (unsigned b = 0; b < 5; b++)
			v = v << 1 | pith_sr_bit(key, c * 5 + b);
		lo[c] = hi[c] = (uint8_t)b32char(v);
	}
	int rc;
	if (whole == PITH_BODY_LEN) { /* a whole key: one body, any year */
		hi[whole - 1]++;
		rc = scan_range(st, rd, lo, hi, whole, out, cap, n);
	} else {
		/* the next character's values [v0, v1] */
		unsigned pre = 0;
		for (unsigned b = 0; b < rest; b++)
			pre = pre << 1 | pith_sr_bit(key, whole * 5 + b);
		unsigned v0 = pre << (5 - rest), v1 = v0 | ((1u << (5 - rest)) - 1);
		rc = 0;
		/* 2-7 first: ASCII order, and the tree's sort follows anyway */
		if (v1 >= 26) {
			lo[whole] = (uint8_t)b32char(v0 > 26 ? v0 : 26);
			hi[whole] = (uint8_t)(b32char(v1) + 1);
			rc = scan_range(st, rd, lo, hi, whole + 1, out, cap, n);
		}
		if (!rc && v0 < 26) {
			lo[whole] = (uint8_t)b32char(v0);
			hi[whole] = (uint8_t)(b32char(v1 < 25 ? v1 : 25) + 1);
			rc = scan_range(st, rd, lo, hi, whole + 1, out, cap, n);
		}
	}
	if (!rc)
		sort_few(out, *n);
	return rc;
}

typedef struct all_ctx {
	pith_sr_leaf_t *l;
	uint8_t (*k)[PITH_SR_KEY_BYTES];
	size_t n, cap;
} all_ctx_t;

static int grow(all_ctx_t *a, size_t want)
{
	size_t nc = a->cap ? a->cap + a->cap / 4 : want;
	pith_sr_leaf_t *l = realloc(a->l, nc * sizeof(*l));
	if (!l)
		return PITH_ENOMEM;
	a->l = l;
	uint8_t (*k)[PITH_SR_KEY_BYTES] = realloc(a->k, nc * sizeof(*k));
	if (!k)
		return PITH_ENOMEM;
	a->k = k;
	a->cap = nc;
	return 0;
}

static const uint8_t (*sort_keys)[PITH_SR_KEY_BYTES];

static int by_key(const void *a, const void *b)
{
	return memcmp(sort_keys[*(const uint32_t *)a], sort_keys[*(const uint32_t *)b],
		      PITH_SR_KEY_BYTES);
}

int store_sr_leaves(store_t *st, pith_sr_leaf_t **out, size_t *n, pith_err_t *err)
{
	all_ctx_t a = {0};
	store_iter_t it;
	*out = NULL;
	*n = 0;
	/* room for the records the counters say, a few more */
	store_counts_t sc;
	store_counts_get(st, &sc);
	size_t hint = (size_t)sc.records + 4096;
	int rc = store_iter_scan(st, STORE_CF_RECORDS, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		store_record_info_t r;
		if ((rc = store_record_info_decode(k, kl, v, vl, &r, err)))
			break;
		if (a.n == a.cap && (rc = grow(&a, hint))) {
			pith_err_set(err, rc, "store: out of memory listing the state root's leaves");
			break;
		}
		memcpy(a.l[a.n].pith, r.pith_number, sizeof(a.l[a.n].pith));
		memcpy(a.l[a.n].state, r.state_hash, 32);
		if (pith_sr_key(r.pith_number, a.k[a.n])) {
			rc = pith_err_set(err, PITH_EIO, "store: record %s: not a pith number", r.pith_number);
			break;
		}
		a.n++;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	uint32_t *ix = rc || !a.n ? NULL : malloc(a.n * sizeof(*ix));
	if (!rc && a.n && !ix)
		rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory sorting %zu leaves", a.n);
	if (!rc && a.n) {
		/* ASCII order to key order (one thread: the loop's, at start) */
		for (size_t i = 0; i < a.n; i++)
			ix[i] = (uint32_t)i;
		sort_keys = (const uint8_t (*)[PITH_SR_KEY_BYTES])a.k;
		qsort(ix, a.n, sizeof(*ix), by_key);
		sort_keys = NULL;
		free(a.k);
		a.k = NULL;
		/* the leaves into that order in place, cycle by cycle (slot i
		 * takes leaf ix[i]; a done slot is marked UINT32_MAX) */
		for (size_t i = 0; i < a.n; i++) {
			if (ix[i] == UINT32_MAX || ix[i] == i) {
				ix[i] = UINT32_MAX;
				continue;
			}
			pith_sr_leaf_t first = a.l[i];
			size_t j = i;
			while (ix[j] != i) {
				size_t from = ix[j];
				a.l[j] = a.l[from];
				ix[j] = UINT32_MAX;
				j = from;
			}
			a.l[j] = first;
			ix[j] = UINT32_MAX;
		}
		pith_sr_leaf_t *fit = realloc(a.l, a.n * sizeof(*a.l));
		*out = fit ? fit : a.l;
		*n = a.n;
		a.l = NULL;
	}
	free(ix);
	free(a.l);
	free(a.k);
	return rc;
}
