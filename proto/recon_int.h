/* Internals shared by recon_set.c and recon.c; not for other modules. */
#ifndef PITH_RECON_INT_H
#define PITH_RECON_INT_H

#include <stdint.h>
#include <string.h>

#include "recon.h"

#define LEAF_MAX 64
#define INNER_MAX 64
/* Bulk-built nodes are 7/8 full, leaving room for late arrivals. */
#define LEAF_BULK 56
#define INNER_BULK 56
/* Spare inner nodes kept for the worst-case insert: one per level plus a
 * new root. Nodes split at least in half, so 2^64 items need < 20 levels. */
#define RSET_MAX_SPARE 24

/* A 256-bit unsigned integer, little-endian 64-bit words. */
typedef struct sum256 {
	uint64_t w[4];
} sum256_t;

typedef struct leaf {
	uint32_t n;
	struct leaf *prev, *next;
	recon_item_t it[LEAF_MAX];
} leaf_t;

typedef struct inner {
	uint32_t n;
	void *child[INNER_MAX];
	uint64_t cnt[INNER_MAX];
	sum256_t sum[INNER_MAX];
	recon_item_t sep[INNER_MAX];
} inner_t;

struct recon_set {
	void *root;
	int height;           /* 0: the root is a leaf */
	size_t count;
	sum256_t total;       /* sum of every id, mod 2^256 */
	recon_item_t last;    /* greatest item (valid when count > 0) */
	leaf_t *first;
	size_t mem;
	int tail_split;       /* set during an insert past the last item */
	leaf_t *spare_leaf;
	inner_t *spare_inner[RSET_MAX_SPARE];
	uint32_t n_spare_inner;
};

static inline uint64_t rd_le64(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
	       (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
	       (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline void wr_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sum256_zero(sum256_t *a)
{
	a->w[0] = a->w[1] = a->w[2] = a->w[3] = 0;
}

static inline void sum256_add(sum256_t *a, const sum256_t *b)
{
	unsigned __int128 c = 0;
	for (int i = 0; i < 4; i++) {
		c += (unsigned __int128)a->w[i] + b->w[i];
		a->w[i] = (uint64_t)c;
		c >>= 64;
	}
}

static inline void sum256_sub(sum256_t *a, const sum256_t *b)
{
	uint64_t borrow = 0;
	for (int i = 0; i < 4; i++) {
		uint64_t x = a->w[i], y = b->w[i];
		uint64_t d = x - y - borrow;
		borrow = (x < y) || (x == y && borrow) ? 1 : 0;
		a->w[i] = d;
	}
}

/* The id read as a little-endian 256-bit number. */
static inline void sum256_of_id(sum256_t *a, const uint8_t *id)
{
	for (int i = 0; i < 4; i++)
		a->w[i] = rd_le64(id + 8 * i);
}

static inline void sum256_add_id(sum256_t *a, const uint8_t *id)
{
	sum256_t b;
	sum256_of_id(&b, id);
	sum256_add(a, &b);
}

static inline void sum256_sub_id(sum256_t *a, const uint8_t *id)
{
	sum256_t b;
	sum256_of_id(&b, id);
	sum256_sub(a, &b);
}

static inline int item_cmp(uint64_t ats, const uint8_t *aid, uint64_t bts, const uint8_t *bid)
{
	if (ats != bts)
		return ats < bts ? -1 : 1;
	return memcmp(aid, bid, RECON_ID_LEN);
}

/* Leaf and position of the item at rank (NULL leaf if rank >= count) and,
 * if sum is not NULL, the sum of the ids of the items before it. */
void rset_seek(const recon_set_t *s, size_t rank, const leaf_t **leaf, uint32_t *pos,
	       sum256_t *sum);
/* Number of items below (ts, id) and the sum of their ids. */
void rset_locate(const recon_set_t *s, uint64_t ts, const uint8_t *id, size_t *rank,
		 sum256_t *sum);

#endif
