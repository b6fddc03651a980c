/* A stand-in for the store's leaves, for the state root's test and
 * benchmark: a universe of random pith numbers sorted by key, each present
 * or not, with the list callback proto/stateroot.h asks for. Inserting
 * marks a key present, so no change moves memory (the benchmark's 10M
 * leaves stay put). */
#ifndef PITH_SR_LEAFSET_H
#define PITH_SR_LEAFSET_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stateroot.h"

typedef struct sr_entry {
	pith_sr_leaf_t leaf;
	uint8_t key[PITH_SR_KEY_BYTES];
	uint8_t present;
} sr_entry_t;

typedef struct sr_leafset {
	sr_entry_t *e;
	size_t n;
	size_t present;
} sr_leafset_t;

static inline uint64_t sr_rand(uint64_t *s)
{
	/* splitmix64: reproducible from a seed */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void sr_rand_bytes(uint64_t *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = sr_rand(s);
		memcpy(out + i, &v, n - i < 8 ? n - i : 8);
	}
}

/* A random pith number (year 2024) with a random state. */
static inline void sr_random_leaf(uint64_t *s, pith_sr_leaf_t *l)
{
	uint8_t d[32];
	sr_rand_bytes(s, d, 32);
	pith_number_make(d, "2024", l->pith);
	sr_rand_bytes(s, l->state, 32);
}

static inline int sr_entry_cmp(const void *a, const void *b)
{
	return memcmp(((const sr_entry_t *)a)->key, ((const sr_entry_t *)b)->key, PITH_SR_KEY_BYTES);
}

/* n random keys, none present. 0 or -1 (OOM). */
static inline int sr_leafset_init(sr_leafset_t *ls, size_t n, uint64_t seed)
{
	memset(ls, 0, sizeof(*ls));
	ls->e = calloc(n ? n : 1, sizeof(*ls->e));
	if (!ls->e)
		return -1;
	for (size_t i = 0; i < n; i++) {
		sr_random_leaf(&seed, &ls->e[i].leaf);
		pith_sr_key(ls->e[i].leaf.pith, ls->e[i].key);
	}
	qsort(ls->e, n, sizeof(*ls->e), sr_entry_cmp);
	size_t w = 0; /* drop repeats (130 random bits: never, but be sure) */
	for (size_t i = 0; i < n; i++)
		if (!w || memcmp(ls->e[w - 1].key, ls->e[i].key, PITH_SR_KEY_BYTES))
			ls->e[w++] = ls->e[i];
	ls->n = w;
	return 0;
}

static inline void sr_leafset_free(sr_leafset_t *ls)
{
	free(ls->e);
	memset(ls, 0, sizeof(*ls));
}

static inline void sr_leafset_set(sr_leafset_t *ls, size_t i, int present)
{
	ls->present += (size_t)present - (size_t)ls->e[i].present;
	ls->e[i].present = (uint8_t)present;
}

/* The present leaves in key order, into out (room for ls->present). */
static inline size_t sr_leafset_collect(const sr_leafset_t *ls, pith_sr_leaf_t *out)
{
	size_t k = 0;
	for (size_t i = 0; i < ls->n; i++)
		if (ls->e[i].present)
			out[k++] = ls->e[i].leaf;
	return k;
}

/* pith_sr_list_fn over a leafset (ctx). */
static inline int sr_leafset_list(void *ctx, const uint8_t key[PITH_SR_KEY_BYTES], unsigned plen,
				  pith_sr_leaf_t *out, size_t cap, size_t *n)
{
	const sr_leafset_t *ls = ctx;
	uint8_t lo[PITH_SR_KEY_BYTES];
	memcpy(lo, key, sizeof(lo));
	for (unsigned b = plen; b < PITH_SR_KEY_BYTES * 8; b++)
		lo[b >> 3] &= (uint8_t)~(0x80u >> (b & 7));
	size_t a = 0, z = ls->n;
	while (a < z) {
		size_t m = a + (z - a) / 2;
		if (memcmp(ls->e[m].key, lo, sizeof(lo)) < 0)
			a = m + 1;
		else
			z = m;
	}
	*n = 0;
	for (size_t i = a; i < ls->n && pith_sr_common(ls->e[i].key, lo, plen) >= plen; i++) {
		if (!ls->e[i].present)
			continue;
		if (*n == cap)
			return PITH_ETOOBIG;
		out[(*n)++] = ls->e[i].leaf;
	}
	return 0;
}

#endif
