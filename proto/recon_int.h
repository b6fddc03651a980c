/* Internals shared by recon_set.c, recon.c and recon_codec.c; not for
 * other modules. */
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

/* ---- the session's messages (recon.c, recon_codec.c) ---- */

/* Ids of one kind in one range of an incoming message, and in any range
 * we produce (bounds list_max and reply_max). */
#define RANGE_IDS_MAX 1024

/* A range's mode (docs/sync.md); CELLS and CREPLY are version 2's. */
enum { M_SKIP = 0, M_FP = 1, M_LIST = 2, M_REPLY = 3, M_IDS = 4, M_CELLS = 5, M_CREPLY = 6,
       M_COUNT };
#define M_COUNT_V1 (M_IDS + 1)

/* A range bound: (ts, id), or infinity. */
typedef struct bound {
	uint64_t ts;
	uint8_t id[RECON_ID_LEN];
	int inf;
} bound_t;

static inline int recon_bound_cmp(const bound_t *a, const bound_t *b)
{
	if (a->inf || b->inf)
		return a->inf - b->inf;
	return item_cmp(a->ts, a->id, b->ts, b->id);
}

/* The reader of one incoming message. */
typedef struct rd {
	const uint8_t *p;
	size_t len, off;
} rd_t;

/* The writer of one outgoing message. */
typedef struct wr {
	pith_buf_t *out;
	bound_t pos;      /* upper bound of the last range written */
	int any;          /* a non-SKIP range was written */
	int demands;      /* the message asks the peer for an answer */
} wr_t;

/* recon_codec.c. Readers: 0, or PITH_ETRUNC / PITH_EINVAL / PITH_ETOOBIG
 * with what and the byte offset in err. Writers: 0 or PITH_ENOMEM. */
int recon_put_varint(pith_buf_t *b, uint64_t v);
int recon_rd_varint(rd_t *r, uint64_t *v, const char *what, pith_err_t *err);
/* n bytes at *out, from the message itself. */
int recon_rd_bytes(rd_t *r, size_t n, const uint8_t **out, const char *what, pith_err_t *err);
/* A count of items of unit bytes each: at most RANGE_IDS_MAX, and that
 * many bytes must follow. */
int recon_read_count(rd_t *r, size_t unit, const char *what, size_t *n, pith_err_t *err);
/* The same with the limit max instead of RANGE_IDS_MAX. */
int recon_read_count_max(rd_t *r, size_t unit, size_t max, const char *what, size_t *n,
			 pith_err_t *err);
/* Reads one bound after prev (strictly above it), and its range's mode. */
int recon_read_bound(rd_t *r, const bound_t *prev, bound_t *b, int *mode, pith_err_t *err);
/* Starts a range [lo, hi) with an exact upper bound; a SKIP range first
 * fills any gap since the last range written. */
int recon_wr_range(wr_t *w, const bound_t *lo, const bound_t *hi, int mode);
/* Starts a range [lo, b) whose upper bound b is ours to choose anywhere
 * in (p, q], p < q being consecutive items of our set: the shortest one. */
int recon_wr_range_gap(wr_t *w, const bound_t *lo, const recon_item_t *p,
		       const recon_item_t *q, int mode, bound_t *chosen);
/* Ends the message: an infinite SKIP bound if the last range left one. */
int recon_wr_finish(wr_t *w);

/* ---- version 2: coded cells (recon_cells.c) ---- */

/* Cells per CELLS range, at most; a decoded range's answer (at most one
 * 32-byte id a cell) fits the smallest message. */
#define CELLS_MAX 1536
#define CELLS_K 3
/* count (1 byte), key sum (8), check sum (4) */
#define CELL_BYTES 13
/* Cells for e expected differences: SLOPE e + SQRT sqrt(e) + BASE. */
#define CELLS_SLOPE 1.45
#define CELLS_SQRT 2.5
#define CELLS_BASE 3.0
/* A span coded in one CELLS range expects at most this many differences
 * (so its cells stay under CELLS_MAX). */
#define SPAN_EXPECT 900.0
/* A range is coded only if it holds at most this many items per expected
 * difference (coding scans them); else it is split first, as version 1
 * splits, so a small difference in a big set costs few scans. */
#define SCAN_PER_DIFF 4096.0

/* An invertible table of m cells; k0, k1 key where an item goes. */
typedef struct recon_cells {
	uint32_t m;
	uint8_t *cnt;
	uint64_t *key;
	uint32_t *chk;
	uint64_t k0, k1;
	uint32_t k;                /* cells a key goes to: min(m, CELLS_K) */
	uint32_t base[CELLS_K];    /* where each part starts */
	uint32_t width[CELLS_K];   /* and how many cells it has */
} recon_cells_t;

/* An item's 8-byte key: the first 8 bytes of its id (little-endian). */
static inline uint64_t recon_cells_key(const uint8_t *id)
{
	return rd_le64(id);
}

/* A bijective 64-bit mixer (the SplitMix64 finaliser). */
static inline uint64_t recon_cells_mix(uint64_t z)
{
	z ^= z >> 30;
	z *= UINT64_C(0xbf58476d1ce4e5b9);
	z ^= z >> 27;
	z *= UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* The cells a key goes to (min(m, 3), one in each third) and its check. */
static inline int recon_cells_where(const recon_cells_t *c, uint64_t key,
				    uint32_t idx[CELLS_K], uint32_t *check)
{
	uint64_t h1 = recon_cells_mix(key ^ c->k0), h2 = recon_cells_mix(key ^ c->k1);
	uint32_t part[CELLS_K] = {(uint32_t)h1, (uint32_t)(h1 >> 32), (uint32_t)h2};
	for (uint32_t j = 0; j < c->k; j++)
		idx[j] = c->base[j] + (uint32_t)(((uint64_t)part[j] * c->width[j]) >> 32);
	*check = (uint32_t)(h2 >> 32);
	return (int)c->k;
}

/* Adds (sign 1) or subtracts (-1) a key. */
static inline void recon_cells_toggle(recon_cells_t *c, uint64_t key, int sign)
{
	uint32_t idx[CELLS_K], chk;
	int k = recon_cells_where(c, key, idx, &chk);
	for (int j = 0; j < k; j++) {
		c->cnt[idx[j]] = (uint8_t)(c->cnt[idx[j]] + sign);
		c->key[idx[j]] ^= key;
		c->chk[idx[j]] ^= chk;
	}
}
/* 0, PITH_EINVAL (m not in 1..CELLS_MAX) or PITH_ENOMEM. */
int recon_cells_init(recon_cells_t *c, uint32_t m, uint64_t k0, uint64_t k1);
void recon_cells_release(recon_cells_t *c);
/* m * CELL_BYTES bytes out or in. */
void recon_cells_put(const recon_cells_t *c, uint8_t *p);
void recon_cells_get(recon_cells_t *c, const uint8_t *p);
/* Peels the table (the sender's cells minus ours): keys with count +1
 * (the sender's, we lack) into plus, -1 (ours) into minus, each array of
 * room m. At most m peels and 4 m cell visits. 0, or PITH_EINVAL if it
 * does not peel to empty (too many differences for the cells, or not a
 * coding), PITH_ENOMEM. The table is consumed. */
int recon_cells_decode(recon_cells_t *c, uint64_t *plus, uint32_t *nplus, uint64_t *minus,
		       uint32_t *nminus, uint64_t *work);
/* Cells for e expected differences (at most CELLS_MAX). */
uint32_t recon_cells_for(double e);
/* Expected differences in a range that differs, if it expects lambda. */
double recon_cells_expect(double lambda);

/* One FP range of an estimating first message: our items in it, and
 * whether the fingerprint differed. */
typedef struct recon_sample {
	uint64_t items;
	int differ;
} recon_sample_t;
/* The most likely number of differences between two sets of about items
 * items, given samples: 0 if none differs. */
double recon_estimate(const recon_sample_t *smp, size_t n, double items);

#endif
