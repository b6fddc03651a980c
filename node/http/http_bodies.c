/* The body cache: a record's 26-character body -> its year, so that the
 * registry's URLs (/pith/{BODY}/...) name a record without a prefix scan
 * of the store (an iterator create and seek: about as much CPU as the
 * document's own read, docs/performance.md "pithd against nginx").
 *
 * A table of 32-byte slots (the body and the four digits of the year),
 * open addressing with linear probing, grown by doubling once half full
 * (or sooner, when a probe runs HTTP_BODIES_PROBE slots without a free
 * one), up to HTTP_BODIES_SLOTS_MAX slots (64 MiB: a million records held
 * at half load). Past that size a new body whose probe finds no free slot
 * takes its home slot's place: an old entry is forgotten, never a wrong
 * year given, and no slot ever becomes free again, so a probe never stops
 * early. What
 * goes in was resolved in the store (http_resolve.c says why a cached
 * answer stays right), so clients cannot fill it with made-up bodies.
 * The loop thread's only. */
#include <stdlib.h>
#include <string.h>

#include "http_int.h"

#define HTTP_BODIES_SLOTS_MIN 4096
#define HTTP_BODIES_SLOTS_MAX (1u << 21)
#define HTTP_BODIES_PROBE 16

typedef struct body_slot {
	char body[PITH_BODY_LEN]; /* base32: never NUL; body[0] == 0 is a free slot */
	char year[4];
	char pad[2];
} body_slot_t;

struct http_bodies {
	body_slot_t *s;
	size_t cap;   /* a power of two */
	size_t count; /* slots in use */
};

_Static_assert(sizeof(body_slot_t) == 32, "a body slot is 32 bytes");

/* The body's home slot: sixteen of its characters, mixed. */
static size_t home(const char *body, size_t cap)
{
	uint64_t x, y;
	memcpy(&x, body, sizeof(x));
	memcpy(&y, body + 8, sizeof(y));
	x = (x ^ (y * UINT64_C(0xff51afd7ed558ccd))) * UINT64_C(0x9e3779b97f4a7c15);
	return (size_t)(x >> 32) & (cap - 1); /* cap <= 2^21 */
}

http_bodies_t *http_bodies_new(void)
{
	http_bodies_t *b = calloc(1, sizeof(*b));
	if (b && !(b->s = calloc(HTTP_BODIES_SLOTS_MIN, sizeof(body_slot_t)))) {
		free(b);
		return NULL;
	}
	if (b)
		b->cap = HTTP_BODIES_SLOTS_MIN;
	return b;
}

void http_bodies_free(http_bodies_t *b)
{
	if (!b)
		return;
	free(b->s);
	free(b);
}

size_t http_bodies_count(const http_bodies_t *b)
{
	return b ? b->count : 0;
}

/* Puts body -> year into s (cap slots): 1 if it took a free slot, 0 if
 * the body was there; -1 if HTTP_BODIES_PROBE slots from its home hold
 * others, when the home slot is replaced if evict (else nothing is
 * changed). */
static int place(body_slot_t *s, size_t cap, const char *body, const char year[4], int evict)
{
	size_t h = home(body, cap);
	for (size_t i = 0; i < HTTP_BODIES_PROBE; i++) {
		body_slot_t *x = &s[(h + i) & (cap - 1)];
		if (!x->body[0] || !memcmp(x->body, body, PITH_BODY_LEN)) {
			int fresh = !x->body[0];
			memcpy(x->body, body, PITH_BODY_LEN);
			memcpy(x->year, year, 4);
			return fresh;
		}
	}
	if (evict) {
		memcpy(s[h].body, body, PITH_BODY_LEN);
		memcpy(s[h].year, year, 4);
	}
	return -1;
}

/* Doubles the table (out of memory: stays as it is, and keeps working). */
static void grow(http_bodies_t *b)
{
	size_t cap = b->cap * 2;
	body_slot_t *s = calloc(cap, sizeof(*s));
	if (!s)
		return;
	size_t n = 0;
	for (size_t i = 0; i < b->cap; i++)
		if (b->s[i].body[0] && place(s, cap, b->s[i].body, b->s[i].year, 1) > 0)
			n++;
	free(b->s);
	b->s = s;
	b->cap = cap;
	b->count = n;
}

void http_bodies_put(http_bodies_t *b, const char *pith)
{
	if (!b || strlen(pith) != PITH_NUMBER_LEN)
		return;
	if (b->count >= b->cap / 2 && b->cap < HTTP_BODIES_SLOTS_MAX)
		grow(b);
	/* "pith:YYYY:" then the body; a long probe grows the table while it may */
	const char *body = pith + PITH_NUMBER_LEN - PITH_BODY_LEN, *year = pith + 5;
	int rc;
	while ((rc = place(b->s, b->cap, body, year, 0)) < 0 && b->cap < HTTP_BODIES_SLOTS_MAX) {
		size_t cap = b->cap;
		grow(b);
		if (b->cap == cap)
			break; /* out of memory */
	}
	if (rc < 0)
		rc = place(b->s, b->cap, body, year, 1);
	b->count += rc > 0;
}

int http_bodies_get(const http_bodies_t *b, const char *body, char pith[static PITH_NUMBER_LEN + 1])
{
	if (!b)
		return 0;
	size_t h = home(body, b->cap);
	for (size_t i = 0; i < HTTP_BODIES_PROBE; i++) {
		const body_slot_t *x = &b->s[(h + i) & (b->cap - 1)];
		if (!x->body[0])
			return 0;
		if (!memcmp(x->body, body, PITH_BODY_LEN)) {
			memcpy(pith, "pith:", 5);
			memcpy(pith + 5, x->year, 4);
			pith[9] = ':';
			memcpy(pith + 10, x->body, PITH_BODY_LEN);
			pith[PITH_NUMBER_LEN] = 0;
			return 1;
		}
	}
	return 0;
}
