/* A small open-addressing hash map from fixed-size byte keys (at most
 * HMAP_KEY_MAX bytes, the same size for every key of one map) to ints.
 * Private to store/: batches use it to find duplicates and group events by
 * subject. Keys are copied in. *
 * Why a second map beside node/base/idmap.h (issue 52 asks for one, and
 * these two are kept apart on purpose): this one lives a batch long and is
 * cleared, not freed, between batches (hmap_clear keeps the slots); its
 * keys are of the map's own length (a subject key is 30 bytes), its values
 * small ints (indexes into the batch's arrays), nothing is ever removed,
 * and it hashes with an unkeyed FNV-1a inline: the ingest's hot path,
 * where idmap's SipHash per lookup and pointer values would cost, over
 * keys the batch's own hashes made (content ids checked already). idmap
 * lives for the node's life, removes (backward shift), and keys its hash
 * per process because peers choose its ids freely; it sits in node/base,
 * above store/, which may not call it. */
#ifndef PITH_STORE_HMAP_H
#define PITH_STORE_HMAP_H

#include <stddef.h>
#include <stdint.h>

#define HMAP_KEY_MAX 32

typedef struct hmap_slot {
	uint8_t key[HMAP_KEY_MAX];
	int value;
	int used;
} hmap_slot_t;

typedef struct hmap {
	hmap_slot_t *slots;
	size_t cap, n, klen;
} hmap_t;

/* An empty map for keys of klen bytes (1..HMAP_KEY_MAX). */
void hmap_init(hmap_t *m, size_t klen);
void hmap_release(hmap_t *m);
/* Forgets every key, keeps the memory. */
void hmap_clear(hmap_t *m);
/* The value of key, or -1 if absent. */
int hmap_get(const hmap_t *m, const uint8_t *key);
/* Sets key to value (>= 0). Returns 0 or PITH_ENOMEM. */
int hmap_put(hmap_t *m, const uint8_t *key, int value);

/* A set of 64-bit fingerprints of byte keys: asked about a key, it can
 * answer "maybe" for one never added (two keys with one fingerprint) but
 * never "no" for one that was. 8 bytes a slot, at most 3/4 full. */
typedef struct fpset {
	uint64_t *slots; /* 0: empty */
	size_t cap, n;
} fpset_t;

void fpset_release(fpset_t *s);
/* Returns 0 or PITH_ENOMEM (then the set is as it was). */
int fpset_add(fpset_t *s, const uint8_t *key, size_t len);
/* 0 if key was never added; 1 if it may have been. */
int fpset_maybe(const fpset_t *s, const uint8_t *key, size_t len);

#endif
