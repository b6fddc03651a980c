/* A small open-addressing hash map from fixed-size byte keys (at most
 * HMAP_KEY_MAX bytes, the same size for every key of one map) to ints.
 * Private to store/: batches use it to find duplicates and group events by
 * subject. Keys are copied in. */
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

#endif
