/* Alias claims and the record summary that lists them.
 *
 * Each record claims the aliases of its newest bundle and those derived
 * from its applied record_created. A claim is an entry of the aliases
 * column family, (alias, record) -> rank; the record's summary lists the
 * aliases it claims, so that a recomputation can withdraw the claims that
 * no longer hold. Resolution picks the best rank among the claims on an
 * alias. The claims are a function of each record's own data, so the
 * answer depends on what is stored, never on arrival order. */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

void store_claims_release(store_claims_t *c)
{
	free(c->c);
	memset(c, 0, sizeof(*c));
}

static int claim_cmp(const void *a, const void *b)
{
	const store_claim_t *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int r = memcmp(x->key, y->key, n);
	return r ? r : (x->klen > y->klen) - (x->klen < y->klen);
}

static int claims_add(store_claims_t *c, const char *kind, const char *value, int source,
		      int64_t built_us)
{
	if (c->n == STORE_MAX_CLAIMS)
		return 0; /* more are not indexed (docs/store.md) */
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 16;
		store_claim_t *p = realloc(c->c, nc * sizeof(*p));
		if (!p)
			return PITH_ENOMEM;
		c->c = p;
		c->cap = nc;
	}
	store_claim_t *x = &c->c[c->n];
	x->klen = store_alias_key(kind, value, x->key);
	if (!x->klen)
		return 0; /* too long or empty: not a real alias, not indexed */
	x->rank[0] = (uint8_t)source;
	store_time_put(x->rank + 1, built_us);
	c->n++;
	return 0;
}

int store_claims_make(store_claims_t *out, const json_value_t *bundle_aliases, int64_t built_us,
		      const json_value_t *record, const char *pith)
{
	memset(out, 0, sizeof(*out));
	int rc = 0;
	for (size_t i = 0; json_is(bundle_aliases, JSON_ARRAY) && i < bundle_aliases->len && !rc; i++) {
		const char *kind = json_get_str(bundle_aliases->u.items[i], "alias_kind");
		const char *value = json_get_str(bundle_aliases->u.items[i], "alias_value");
		if (kind && value)
			rc = claims_add(out, kind, value, STORE_ALIAS_BUNDLE, built_us);
	}
	if (json_is(record, JSON_OBJECT) && !rc) {
		pith_alias_t al[6];
		int n = pith_record_aliases(record, pith, al);
		for (int i = 0; i < n && !rc; i++)
			rc = claims_add(out, al[i].kind, al[i].value, STORE_ALIAS_DERIVED, 0);
	}
	if (rc) {
		store_claims_release(out);
		return rc;
	}
	/* sorted by alias, one claim per alias: the better rank */
	if (out->n > 1)
		qsort(out->c, out->n, sizeof(*out->c), claim_cmp);
	size_t m = 0;
	for (size_t i = 0; i < out->n; i++) {
		if (m && !claim_cmp(&out->c[m - 1], &out->c[i])) {
			if (memcmp(out->c[i].rank, out->c[m - 1].rank, STORE_ALIAS_RANK_LEN) > 0)
				out->c[m - 1] = out->c[i];
			continue;
		}
		out->c[m++] = out->c[i];
	}
	out->n = m;
	return 0;
}

size_t store_alias_entry_key(const uint8_t *akey, size_t klen, const char *pith,
			     uint8_t out[STORE_ALIAS_ENTRY_MAX])
{
	memcpy(out, akey, klen);
	out[klen] = 0;
	memcpy(out + klen + 1, pith, PITH_NUMBER_LEN);
	return klen + 1 + PITH_NUMBER_LEN;
}

int store_rec_encode(pith_buf_t *out, uint64_t events, const uint8_t hash[32], int has_bundle,
		     const store_claims_t *claims)
{
	uint8_t h[STORE_REC_LEN];
	store_be64_put(h, events);
	memcpy(h + 8, hash, 32);
	h[40] = has_bundle ? 1 : 0;
	h[41] = (uint8_t)(claims->n >> 8);
	h[42] = (uint8_t)claims->n;
	pith_buf_reset(out);
	int rc = pith_buf_append(out, h, sizeof(h));
	for (size_t i = 0; i < claims->n && !rc; i++)
		rc = pith_buf_putc(out, (uint8_t)claims->c[i].klen) ||
		     pith_buf_append(out, claims->c[i].key, claims->c[i].klen);
	return rc ? PITH_ENOMEM : 0;
}

int store_rec_decode(const uint8_t *v, size_t vl, store_rec_t *out)
{
	if (vl < STORE_REC_LEN)
		return PITH_EIO;
	out->events = store_be64_get(v);
	memcpy(out->hash, v + 8, 32);
	out->has_bundle = v[40] != 0;
	out->nclaims = (size_t)v[41] << 8 | v[42];
	out->claims = v + STORE_REC_LEN;
	out->claims_end = v + vl;
	/* the claim list must be exactly what the count says */
	const uint8_t *p = out->claims;
	for (size_t i = 0; i < out->nclaims; i++) {
		if (p >= out->claims_end || (size_t)(out->claims_end - p - 1) < p[0] || p[0] == 0)
			return PITH_EIO;
		p += 1 + p[0];
	}
	return p == out->claims_end ? 0 : PITH_EIO;
}

int store_rec_claim_next(const uint8_t **p, const uint8_t *end, const uint8_t **key, size_t *klen)
{
	if (*p >= end)
		return 0;
	*klen = (*p)[0];
	*key = *p + 1;
	*p += 1 + *klen;
	return 1;
}

void store_claims_write(store_wsink_t *ws, const char *pith, const store_rec_t *old,
			const store_claims_t *now, int same_ranks)
{
	uint8_t ek[STORE_ALIAS_ENTRY_MAX];
	uint8_t had[STORE_MAX_CLAIMS] = {0}; /* now->c[i] is in old */
	if (old) {
		const uint8_t *p = old->claims, *k;
		size_t kl;
		while (store_rec_claim_next(&p, old->claims_end, &k, &kl)) {
			int kept = 0;
			for (size_t i = 0; i < now->n && !kept; i++)
				if (now->c[i].klen == kl && !memcmp(now->c[i].key, k, kl))
					kept = had[i] = 1;
			if (!kept) {
				size_t n = store_alias_entry_key(k, kl, pith, ek);
				ws->del(ws, STORE_CF_ALIASES, ek, n);
			}
		}
	}
	for (size_t i = 0; i < now->n; i++) {
		if (same_ranks && had[i])
			continue;
		size_t n = store_alias_entry_key(now->c[i].key, now->c[i].klen, pith, ek);
		ws->put(ws, STORE_CF_ALIASES, ek, n, now->c[i].rank, STORE_ALIAS_RANK_LEN);
	}
}
