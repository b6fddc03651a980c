/* Open-addressing id map (linear probing, backward-shift removal), and
 * the fingerprint cache. */
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

/* Linear probing without tombstones: a removal shifts the entries after
 * it back (each slot keeps its id's hash, so none is hashed again). A
 * lookup of an id that is absent, the common case (a node asks for each
 * id a peer offers whether it is already fetching it), ends at the first
 * empty slot, however many entries came and went before. */
typedef struct slot {
	uint8_t id[32];
	void *val;  /* NULL: empty (values are never NULL) */
	uint64_t h; /* id_hash(id) */
} slot_t;

struct idmap {
	slot_t *slots;
	size_t cap;   /* a power of two */
	size_t count; /* full slots */
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

/* The slot holding id (hash h), or the empty one where it would go. */
static slot_t *find(const idmap_t *m, const uint8_t id[32], uint64_t h)
{
	for (size_t i = (size_t)h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		slot_t *s = &m->slots[i];
		if (!s->val || (s->h == h && !memcmp(s->id, id, 32)))
			return s;
	}
}

static int grow(idmap_t *m)
{
	size_t cap = m->cap * 2;
	slot_t *old = m->slots, *ns = calloc(cap, sizeof(slot_t));
	if (!ns)
		return PITH_ENOMEM;
	size_t oldcap = m->cap;
	m->slots = ns;
	m->cap = cap;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].val)
			*find(m, old[i].id, old[i].h) = old[i];
	free(old);
	return 0;
}

void *idmap_get(const idmap_t *m, const uint8_t id[static 32])
{
	return find(m, id, id_hash(id))->val;
}

int idmap_put(idmap_t *m, const uint8_t id[static 32], void *val)
{
	if ((m->count + 1) * 10 > m->cap * 7 && grow(m))
		return PITH_ENOMEM;
	uint64_t h = id_hash(id);
	slot_t *s = find(m, id, h);
	if (s->val)
		return PITH_EEXIST;
	memcpy(s->id, id, 32);
	s->val = val;
	s->h = h;
	m->count++;
	return 0;
}

/* Empties slot i and shifts back the entries after it that may move:
 * an entry stays where it is when its home slot lies cyclically in
 * (i, j], else it fills the hole, which moves to j. */
static void slot_clear(idmap_t *m, size_t i)
{
	size_t mask = m->cap - 1;
	for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		slot_t *s = &m->slots[j];
		if (!s->val)
			break;
		size_t home = (size_t)s->h & mask;
		if (((j - home) & mask) < ((j - i) & mask))
			continue; /* home in (i, j]: it stays */
		m->slots[i] = *s;
		i = j;
	}
	memset(&m->slots[i], 0, sizeof(slot_t));
	m->count--;
}

void *idmap_del(idmap_t *m, const uint8_t id[static 32])
{
	slot_t *s = find(m, id, id_hash(id));
	void *v = s->val;
	if (v)
		slot_clear(m, (size_t)(s - m->slots));
	return v;
}

void idmap_each(idmap_t *m, idmap_fn fn, void *arg)
{
	/* from just after an empty slot (there is one: the load stays under
	 * 0.7), once round: a removal only shifts entries not visited yet
	 * into the slot being visited, which is then looked at again */
	size_t mask = m->cap - 1, start = 0;
	while (m->slots[start].val)
		start++;
	for (size_t n = 0; n < m->cap;) {
		size_t i = (start + 1 + n) & mask;
		slot_t *s = &m->slots[i];
		if (s->val && fn(arg, s->id, s->val) == 1) {
			slot_clear(m, i);
			continue;
		}
		n++;
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

int idbloom_init(idbloom_t *b, size_t capacity)
{
	size_t lines = capacity / 51 + 1; /* 512 bits a line, 10 bits an id */
	uint64_t *w = calloc(lines, 64);
	if (!w)
		return PITH_ENOMEM;
	*b = (idbloom_t){.words = w, .nlines = lines, .capacity = capacity};
	return 0;
}

void idbloom_release(idbloom_t *b)
{
	free(b->words);
	memset(b, 0, sizeof(*b));
}

/* The id's line, and 6 bit positions (9 bits each) in h. */
static uint64_t *bloom_line(const idbloom_t *b, const uint8_t id[32], uint64_t *h)
{
	uint64_t w0, w1;
	memcpy(&w0, id, 8);
	memcpy(&w1, id + 8, 8);
	uint64_t k0, k1;
	memcpy(&k0, hash_key, 8);
	memcpy(&k1, hash_key + 8, 8);
	uint64_t x = (w0 ^ k0) * UINT64_C(0x9e3779b97f4a7c15);
	uint64_t y = (w1 ^ k1 ^ (x >> 29)) * UINT64_C(0xbf58476d1ce4e5b9);
	*h = y ^ (y >> 31);
	size_t line = (size_t)(((unsigned __int128)x * b->nlines) >> 64);
	return b->words + 8 * line;
}

void idbloom_add(idbloom_t *b, const uint8_t id[static 32])
{
	uint64_t h, *l = bloom_line(b, id, &h);
	for (int i = 0; i < 6; i++, h >>= 9)
		l[(h >> 6) & 7] |= UINT64_C(1) << (h & 63);
	b->count++;
}

int idbloom_has(const idbloom_t *b, const uint8_t id[static 32])
{
	uint64_t h;
	const uint64_t *l = bloom_line(b, id, &h);
	for (int i = 0; i < 6; i++, h >>= 9)
		if (!(l[(h >> 6) & 7] & UINT64_C(1) << (h & 63)))
			return 0;
	return 1;
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
