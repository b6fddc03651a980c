#include "hmap.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

static uint64_t hash(const uint8_t *k, size_t n)
{
	uint64_t h = UINT64_C(1469598103934665603);
	for (size_t i = 0; i < n; i++)
		h = (h ^ k[i]) * UINT64_C(1099511628211);
	return h ^ (h >> 29);
}

void hmap_init(hmap_t *m, size_t klen)
{
	memset(m, 0, sizeof(*m));
	m->klen = klen;
}

void hmap_release(hmap_t *m)
{
	free(m->slots);
	hmap_init(m, m->klen);
}

void hmap_clear(hmap_t *m)
{
	if (m->slots)
		memset(m->slots, 0, m->cap * sizeof(*m->slots));
	m->n = 0;
}

static hmap_slot_t *find(const hmap_t *m, const uint8_t *key)
{
	size_t mask = m->cap - 1;
	for (size_t i = hash(key, m->klen) & mask;; i = (i + 1) & mask) {
		hmap_slot_t *s = &m->slots[i];
		if (!s->used || !memcmp(s->key, key, m->klen))
			return s;
	}
}

int hmap_get(const hmap_t *m, const uint8_t *key)
{
	if (!m->cap)
		return -1;
	const hmap_slot_t *s = find(m, key);
	return s->used ? s->value : -1;
}

static int grow(hmap_t *m)
{
	size_t nc = m->cap ? m->cap * 2 : 64;
	hmap_slot_t *old = m->slots, *ns = calloc(nc, sizeof(*ns));
	size_t ocap = m->cap;
	if (!ns)
		return PITH_ENOMEM;
	m->slots = ns;
	m->cap = nc;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].used)
			*find(m, old[i].key) = old[i];
	free(old);
	return 0;
}

int hmap_put(hmap_t *m, const uint8_t *key, int value)
{
	if ((m->n + 1) * 4 > m->cap * 3 && grow(m))
		return PITH_ENOMEM;
	hmap_slot_t *s = find(m, key);
	if (!s->used) {
		memcpy(s->key, key, m->klen);
		s->used = 1;
		m->n++;
	}
	s->value = value;
	return 0;
}

/* ---- fingerprint sets ---------------------------------------------------- */

static uint64_t fingerprint(const uint8_t *k, size_t n)
{
	uint64_t h = hash(k, n);
	h *= UINT64_C(0x9e3779b97f4a7c15);
	return (h ^ (h >> 32)) | 1; /* never 0, the empty slot */
}

static uint64_t *fp_find(uint64_t *slots, size_t cap, uint64_t fp)
{
	size_t mask = cap - 1;
	for (size_t i = (fp >> 7) & mask;; i = (i + 1) & mask)
		if (!slots[i] || slots[i] == fp)
			return &slots[i];
}

void fpset_release(fpset_t *s)
{
	free(s->slots);
	memset(s, 0, sizeof(*s));
}

int fpset_add(fpset_t *s, const uint8_t *key, size_t len)
{
	if ((s->n + 1) * 4 > s->cap * 3) {
		size_t nc = s->cap ? s->cap * 2 : 1024;
		uint64_t *ns = calloc(nc, sizeof(*ns));
		if (!ns)
			return PITH_ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slots[i])
				*fp_find(ns, nc, s->slots[i]) = s->slots[i];
		free(s->slots);
		s->slots = ns;
		s->cap = nc;
	}
	uint64_t fp = fingerprint(key, len);
	uint64_t *slot = fp_find(s->slots, s->cap, fp);
	if (!*slot) {
		*slot = fp;
		s->n++;
	}
	return 0;
}

int fpset_maybe(const fpset_t *s, const uint8_t *key, size_t len)
{
	if (!s->cap)
		return 0;
	return *fp_find(s->slots, s->cap, fingerprint(key, len)) != 0;
}
