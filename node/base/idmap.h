/* Maps and caches keyed by 32-byte ids (event ids, bundle hashes).
 *
 * Ids come from peers, who choose them freely, so slots are picked with a
 * keyed hash (SipHash, a random key per process): no peer can aim ids at
 * one chain of the table.
 *
 * The node's one id map (the follower, the relay, the HTTP side, the
 * peers and the validator cache use it). store/hmap.h is the other map of
 * the tree, kept apart on purpose (issue 52; its header says why): a
 * batch-long map of short keys to ints on the store's hot path, cleared
 * between batches, with nothing removed; store/ is below node/base and
 * cannot call this one. */
#ifndef PITH_NODE_IDMAP_H
#define PITH_NODE_IDMAP_H

#include <stddef.h>
#include <stdint.h>

/* The key of a map keyed by a number (a serial, a pointer): v in the first
 * 8 bytes, zeros after. */
void idmap_key_u64(uint64_t v, uint8_t key[static 32]);

/* Call once before any other function here (picks the hash key). */
void idmap_init(void);

/* ---- idmap: id -> pointer, open addressing ---------------------------------- */
typedef struct idmap idmap_t;

idmap_t *idmap_new(void);
/* Frees the table (not the values). NULL-tolerant. */
void idmap_free_(idmap_t *m);
#define idmap_free(m) do { idmap_free_(m); (m) = NULL; } while (0)

void *idmap_get(const idmap_t *m, const uint8_t id[static 32]);
/* Adds id (copied) -> val (non-NULL). 0, PITH_EEXIST or PITH_ENOMEM. */
int idmap_put(idmap_t *m, const uint8_t id[static 32], void *val);
/* Removes id; returns its value or NULL. */
void *idmap_del(idmap_t *m, const uint8_t id[static 32]);
size_t idmap_count(const idmap_t *m);

/* Calls fn for every entry; fn returns 0 to keep it, 1 to remove it (the
 * map forgets the value; fn frees it if it must). Do not add to m from fn. */
typedef int (*idmap_fn)(void *arg, const uint8_t id[32], void *val);
void idmap_each(idmap_t *m, idmap_fn fn, void *arg);

/* ---- idcache: "recently seen" with a fixed memory cost ----------------------
 * A direct-mapped table of 64-bit fingerprints. A later id that lands in
 * the same slot evicts the earlier one, so has() may forget (never the
 * other way round but with odds of 2^-64). */
typedef struct idcache {
	uint64_t *slots;
	size_t mask;
} idcache_t;

/* 2^bits slots (8 bytes each). 0 or PITH_ENOMEM. */
int idcache_init(idcache_t *c, unsigned bits);
void idcache_release(idcache_t *c);
void idcache_add(idcache_t *c, const uint8_t id[static 32]);
int idcache_has(const idcache_t *c, const uint8_t id[static 32]);

/* ---- idbloom: "surely not in the set" for a growing set of ids ------------
 * A blocked Bloom filter (one 64-byte line per id, 6 bits in it; 10 bits
 * an id at capacity: about 1% false positives). has() == 0 means the id
 * was never added; 1 means it may have been. Ids are event ids (SHA-256
 * outputs) and the line and bits come from their first 16 bytes mixed
 * with a per-process key (ids that differ only after those get the same
 * answer); a peer that crafts ids to collide only turns a "no" into a
 * "maybe", which the caller must answer the slow way anyway. */
typedef struct idbloom {
	uint64_t *words;  /* nlines * 8 */
	size_t nlines;
	size_t count;     /* ids added */
	size_t capacity;  /* ids it was sized for */
} idbloom_t;

/* An empty filter sized for capacity ids. 0 or PITH_ENOMEM (b untouched). */
int idbloom_init(idbloom_t *b, size_t capacity);
void idbloom_release(idbloom_t *b);
void idbloom_add(idbloom_t *b, const uint8_t id[static 32]);
int idbloom_has(const idbloom_t *b, const uint8_t id[static 32]);

/* ---- idq: a FIFO of ids, growing up to a cap ------------------------------- */
typedef struct idq {
	uint8_t *ids;  /* cap * 32 bytes */
	size_t cap, head, n, max;
} idq_t;

/* An empty queue that will hold at most max ids. */
void idq_init(idq_t *q, size_t max);
void idq_release(idq_t *q);
/* 0, or PITH_ETOOBIG when full, PITH_ENOMEM. */
int idq_push(idq_t *q, const uint8_t id[static 32]);
/* 1 with out filled, or 0 when empty. */
int idq_pop(idq_t *q, uint8_t out[static 32]);

#endif
