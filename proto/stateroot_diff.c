/* Where two state-root trees differ (docs/state-root.md, "Finding the
 * differences"): a depth-first descent over range answers, asking only
 * about prefixes whose subtrees differ. */
#include "stateroot.h"

#include <stdlib.h>
#include <string.h>

typedef struct item {
	uint8_t prefix[PITH_SR_KEY_BYTES];
	uint8_t plen;
	uint8_t sides; /* 1: side 0 only, 2: side 1 only, 3: both */
} item_t;

typedef struct descent {
	pith_sr_fetch_fn fetch;
	pith_sr_diff_fn report;
	void *ctx;
	uint64_t max;
	pith_sr_diff_stats_t *st;
	pith_err_t *err;
	item_t *stack;
	size_t n, cap;
} descent_t;

static int push(descent_t *d, const uint8_t *key, unsigned bits, int turn, unsigned sides)
{
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		item_t *ns = realloc(d->stack, nc * sizeof(*ns));
		if (!ns)
			return PITH_ENOMEM;
		d->stack = ns;
		d->cap = nc;
	}
	item_t *it = &d->stack[d->n++];
	memcpy(it->prefix, key, PITH_SR_KEY_BYTES);
	for (unsigned b = bits; b < PITH_SR_KEY_BYTES * 8; b++)
		it->prefix[b >> 3] &= (uint8_t)~(0x80u >> (b & 7));
	if (turn)
		it->prefix[bits >> 3] |= (uint8_t)(0x80u >> (bits & 7));
	it->plen = (uint8_t)(bits + 1);
	it->sides = (uint8_t)sides;
	return 0;
}

static int ask(descent_t *d, int side, const item_t *it, pith_sr_range_t *r)
{
	if (d->max && d->st->requests >= d->max)
		return pith_err_set(d->err, PITH_ETOOBIG, "state root descent: more than %llu requests",
				    (unsigned long long)d->max);
	d->st->requests++;
	int rc = d->fetch(d->ctx, side, it->prefix, it->plen, r);
	if (rc)
		return pith_err_set(d->err, rc, "state root descent: side %d: range %u bits: %s", side,
				    it->plen, pith_err_name(rc));
	if (r->plen != it->plen || memcmp(r->prefix, it->prefix, PITH_SR_KEY_BYTES))
		return pith_err_set(d->err, PITH_EINVAL, "state root descent: side %d answered another prefix",
				    side);
	return pith_sr_range_check(r, d->err);
}

static int report(descent_t *d, const char *pith, const uint8_t *s0, const uint8_t *s1)
{
	d->st->differences++;
	return d->report(d->ctx, pith, s0, s1);
}

/* Everything under r, which the other side lacks. */
static int one_side(descent_t *d, int side, const pith_sr_range_t *r)
{
	if (!r->node.count)
		return 0;
	if (r->node.count <= PITH_SR_RANGE_LEAVES) {
		for (size_t i = 0; i < r->nleaves; i++) {
			const uint8_t *s = r->leaves[i].state;
			int rc = report(d, r->leaves[i].pith, side ? NULL : s, side ? s : NULL);
			if (rc)
				return rc;
		}
		return 0;
	}
	unsigned sides = side ? 2 : 1;
	int rc = push(d, r->node.key, r->node.bits, 0, sides);
	return rc ? rc : push(d, r->node.key, r->node.bits, 1, sides);
}

/* Both sides list their leaves: a merge of the two sorted lists. */
static int both_listed(descent_t *d, const pith_sr_range_t *a, const pith_sr_range_t *b)
{
	size_t i = 0, j = 0;
	uint8_t ka[PITH_SR_KEY_BYTES], kb[PITH_SR_KEY_BYTES];
	while (i < a->nleaves || j < b->nleaves) {
		int c;
		if (i == a->nleaves)
			c = 1;
		else if (j == b->nleaves)
			c = -1;
		else {
			pith_sr_key(a->leaves[i].pith, ka);
			pith_sr_key(b->leaves[j].pith, kb);
			c = memcmp(ka, kb, sizeof(ka));
			/* one key, two pith numbers (years): two records */
			if (!c && strcmp(a->leaves[i].pith, b->leaves[j].pith))
				c = strcmp(a->leaves[i].pith, b->leaves[j].pith);
		}
		int rc = 0;
		if (c < 0) {
			rc = report(d, a->leaves[i].pith, a->leaves[i].state, NULL);
			i++;
		} else if (c > 0) {
			rc = report(d, b->leaves[j].pith, NULL, b->leaves[j].state);
			j++;
		} else {
			if (memcmp(a->leaves[i].state, b->leaves[j].state, 32))
				rc = report(d, a->leaves[i].pith, a->leaves[i].state, b->leaves[j].state);
			i++;
			j++;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int both(descent_t *d, const item_t *it, pith_sr_range_t *ra, pith_sr_range_t *rb)
{
	int rc;
	if ((rc = ask(d, 0, it, ra)) || (rc = ask(d, 1, it, rb)))
		return rc;
	const pith_sr_sub_t *a = &ra->node, *b = &rb->node;
	if (a->count == b->count && (!a->count || !memcmp(a->hash, b->hash, 32)))
		return 0;
	if (a->count <= PITH_SR_RANGE_LEAVES && b->count <= PITH_SR_RANGE_LEAVES)
		return both_listed(d, ra, rb);
	if (!a->count || !b->count)
		return one_side(d, a->count ? 0 : 1, a->count ? ra : rb);
	unsigned lo = a->bits < b->bits ? a->bits : b->bits;
	unsigned c = pith_sr_common(a->key, b->key, lo);
	if (c < lo) { /* the two sides' keys part before either splits: disjoint */
		if ((rc = one_side(d, 0, ra)))
			return rc;
		return one_side(d, 1, rb);
	}
	if (a->bits == b->bits) { /* the same split: compare the children */
		for (int i = 0; i < 2; i++)
			if (memcmp(ra->child[i].hash, rb->child[i].hash, 32) ||
			    ra->child[i].count != rb->child[i].count)
				if ((rc = push(d, a->key, a->bits, i, 3)))
					return rc;
		return 0;
	}
	/* one side splits first: the other's keys all lie in one of its halves */
	const pith_sr_range_t *early = a->bits < b->bits ? ra : rb, *late = early == ra ? rb : ra;
	int eside = early == ra ? 0 : 1;
	unsigned turn = pith_sr_bit(late->node.key, early->node.bits);
	if (memcmp(early->child[turn].hash, late->node.hash, 32) ||
	    early->child[turn].count != late->node.count)
		if ((rc = push(d, early->node.key, early->node.bits, (int)turn, 3)))
			return rc;
	return push(d, early->node.key, early->node.bits, (int)!turn, eside ? 2 : 1);
}

int pith_sr_diff(pith_sr_fetch_fn fetch, pith_sr_diff_fn rep, void *ctx, uint64_t max_requests,
		 pith_sr_diff_stats_t *stats, pith_err_t *err)
{
	pith_sr_diff_stats_t local = {0};
	descent_t d = {fetch, rep, ctx, max_requests, stats ? stats : &local, err, NULL, 0, 0};
	memset(d.st, 0, sizeof(*d.st));
	pith_sr_range_t *r = malloc(2 * sizeof(*r));
	if (!r)
		return PITH_ENOMEM;
	/* the root: the empty prefix (plen 0); push() makes children, so the
	 * root item is written by hand */
	int rc = 0;
	item_t root = {{0}, 0, 3};
	rc = both(&d, &root, &r[0], &r[1]);
	while (!rc && d.n) {
		item_t it = d.stack[--d.n];
		if (it.sides == 3)
			rc = both(&d, &it, &r[0], &r[1]);
		else if (!(rc = ask(&d, it.sides == 2, &it, &r[0])))
			rc = one_side(&d, it.sides == 2, &r[0]);
	}
	free(d.stack);
	free(r);
	return rc;
}
