/* Open-addressing id map with tombstones, and the fingerprint cache. */
#include "idmap.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

static uint8_t hash_key[crypto_shorthash_KEYBYTES];

void idmap_init(void)
{
	randombytes_buf(hash_key, sizeof(hash_key));
}

static uint64_t id_hash(const uint8_t id[32])
{
	uint8_t h[crypto_shorthash_BYTES];
	crypto_shorthash(h, id, 32, hash_key);
	uint64_t v;
	memcpy(&v, h, 8);
	return v;
}

enum { SLOT_EMPTY = 0, SLOT_FULL, SLOT_DEAD };

typedef struct slot {
	uint8_t id[32];
	void *val;
	uint8_t state;
} slot_t;

struct idmap {
	slot_t *slots;
	size_t cap;   /* a power of two */
	size_t count; /* full slots */
	size_t used;  /* full + dead */
};

idmap_t *idmap_new(void)
{
	idmap_t *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->cap = 64;
	m->slots = calloc(m->cap, sizeof(slot_t));
	if (!m->slots) {
		free(m);
		return NULL;
	}
	return m;
}

void idmap_free_(idmap_t *m)
{
	if (!m)
		return;
	free(m->slots);
	free(m);
}

size_t idmap_count(const idmap_t *m)
{
	return m->count;
}

/* The slot holding id, or (insert) the first free one on its probe path. */
static slot_t *find(const idmap_t *m, const uint8_t id[32], int insert)
{
	size_t i = (size_t)id_hash(id) & (m->cap - 1);
	slot_t *first_dead = NULL;
	for (;;) {
		slot_t *s = &m->slots[i];
		if (s->state == SLOT_EMPTY)
			return insert ? (first_dead ? first_dead : s) : NULL;
		if (s->state == SLOT_DEAD) {
			if (!first_dead)
				first_dead = s;
		} else if (!memcmp(s->id, id, 32)) {
			return s;
		}
		i = (i + 1) & (m->cap - 1);
	}
}

static int grow(idmap_t *m)
{
	size_t cap = m->count * 4 > m->cap ? m->cap * 2 : m->cap; /* else just purge tombstones */
	slot_t *old = m->slots;
	size_t oldcap = m->cap;
	slot_t *ns = calloc(cap, sizeof(slot_t));
	if (!ns)
		return PITH_ENOMEM;
	m->slots = ns;
	m->cap = cap;
	m->used = m->count;
	for (size_t i = 0; i < oldcap; i++) {
		if (old[i].state != SLOT_FULL)
			continue;
		slot_t *s = find(m, old[i].id, 1);
		*s = old[i];
	}
	free(old);
	return 0;
}

void *idmap_get(const idmap_t *m, const uint8_t id[static 32])
{
	slot_t *s = find(m, id, 0);
	return s && s->state == SLOT_FULL ? s->val : NULL;
}

int idmap_put(idmap_t *m, const uint8_t id[static 32], void *val)
{
	if ((m->used + 1) * 10 > m->cap * 7 && grow(m))
		return PITH_ENOMEM;
	slot_t *s = find(m, id, 1);
	if (s->state == SLOT_FULL)
		return PITH_EEXIST;
	if (s->state == SLOT_EMPTY)
		m->used++;
	memcpy(s->id, id, 32);
	s->val = val;
	s->state = SLOT_FULL;
	m->count++;
	return 0;
}

void *idmap_del(idmap_t *m, const uint8_t id[static 32])
{
	slot_t *s = find(m, id, 0);
	if (!s || s->state != SLOT_FULL)
		return NULL;
	void *v = s->val;
	s->state = SLOT_DEAD;
	s->val = NULL;
	m->count--;
	return v;
}

void idmap_each(idmap_t *m, idmap_fn fn, void *arg)
{
	for (size_t i = 0; i < m->cap; i++) {
		slot_t *s = &m->slots[i];
		if (s->state != SLOT_FULL)
			continue;
		if (fn(arg, s->id, s->val) == 1) {
			s->state = SLOT_DEAD;
			s->val = NULL;
			m->count--;
		}
	}
}

int idcache_init(idcache_t *c, unsigned bits)
{
	c->slots = calloc((size_t)1 << bits, sizeof(uint64_t));
	c->mask = ((size_t)1 << bits) - 1;
	return c->slots ? 0 : PITH_ENOMEM;
}

void idcache_release(idcache_t *c)
{
	free(c->slots);
	c->slots = NULL;
}

static uint64_t fingerprint(const uint8_t id[32])
{
	uint64_t h = id_hash(id);
	return h ? h : 1; /* 0 marks an empty slot */
}

void idcache_add(idcache_t *c, const uint8_t id[static 32])
{
	uint64_t f = fingerprint(id);
	c->slots[(f >> 7) & c->mask] = f;
}

int idcache_has(const idcache_t *c, const uint8_t id[static 32])
{
	uint64_t f = fingerprint(id);
	return c->slots[(f >> 7) & c->mask] == f;
}

void idq_init(idq_t *q, size_t max)
{
	memset(q, 0, sizeof(*q));
	q->max = max;
}

void idq_release(idq_t *q)
{
	free(q->ids);
	memset(q, 0, sizeof(*q));
}

int idq_push(idq_t *q, const uint8_t id[static 32])
{
	if (q->n >= q->max)
		return PITH_ETOOBIG;
	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 256;
		if (cap > q->max)
			cap = q->max;
		uint8_t *nb = malloc(cap * 32);
		if (!nb)
			return PITH_ENOMEM;
		/* unwrap into the new buffer */
		for (size_t i = 0; i < q->n; i++)
			memcpy(nb + i * 32, q->ids + ((q->head + i) % q->cap) * 32, 32);
		free(q->ids);
		q->ids = nb;
		q->cap = cap;
		q->head = 0;
	}
	memcpy(q->ids + ((q->head + q->n) % q->cap) * 32, id, 32);
	q->n++;
	return 0;
}

int idq_pop(idq_t *q, uint8_t out[static 32])
{
	if (!q->n)
		return 0;
	memcpy(out, q->ids + q->head * 32, 32);
	q->head = (q->head + 1) % q->cap;
	q->n--;
	if (!q->n) {
		/* give the memory back once a burst is over */
		if (q->cap > 4096) {
			free(q->ids);
			q->ids = NULL;
			q->cap = 0;
		}
		q->head = 0;
	}
	return 1;
}

void idmap_key_u64(uint64_t v, uint8_t key[static 32])
{
	memset(key, 0, 32);
	memcpy(key, &v, sizeof(v));
}
