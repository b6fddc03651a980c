/* The state root's tree (docs/state-root.md): a crit-bit trie whose nodes
 * with more than `bucket` leaves are kept, with their children; smaller
 * subtrees (buckets) keep only their hash, count and prefix and are
 * rehashed from the caller's leaves when one of theirs changes. */
#include "stateroot.h"

#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX
#define F_DIRTY 1 /* hash stale; a bucket's bits maybe shorter than its leaves share */

/* 64 bytes. child[0] == NIL marks a bucket; free nodes chain through
 * child[0] too, with count 0. */
typedef struct node {
	uint8_t hash[32];
	uint8_t key[PITH_SR_KEY_BYTES]; /* some leaf's key: its first `bits` bits are the node's prefix */
	uint8_t bits;                   /* common prefix length of the node's leaves (130: one leaf) */
	uint8_t flags;                  /* F_DIRTY */
	uint8_t pad;
	uint32_t count;
	uint32_t child[2];
} node_t;

struct pith_sr {
	node_t *n;
	uint32_t cap, used, freelist;
	uint32_t root;
	unsigned bucket;
	pith_sr_list_fn list;
	void *ctx;
	struct ent **lc; /* per node: a bucket's leaves (NULL for an inner node) */
	/* one listing: bucket + 1 leaves at most */
	pith_sr_leaf_t *leaves;
	uint8_t (*keys)[PITH_SR_KEY_BYTES];
	struct ent *scratch; /* bucket + 1 entries: a bucket that splits or takes a delete */
};

/* ---- encoding ---- */

static int b32val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= '2' && c <= '7')
		return c - '2' + 26;
	return -1;
}

int pith_sr_key(const char *pith, uint8_t key[PITH_SR_KEY_BYTES])
{
	if (!pith || strlen(pith) != PITH_NUMBER_LEN || !pith_number_is_valid(pith))
		return PITH_EINVAL;
	memset(key, 0, PITH_SR_KEY_BYTES);
	const char *body = pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	unsigned bit = 0;
	for (unsigned i = 0; i < PITH_BODY_LEN; i++) {
		int v = b32val(body[i]);
		if (v < 0)
			return PITH_EINVAL;
		for (int j = 4; j >= 0; j--, bit++)
			if ((v >> j) & 1)
				key[bit >> 3] |= (uint8_t)(0x80u >> (bit & 7));
	}
	return 0;
}

unsigned pith_sr_common(const uint8_t *a, const uint8_t *b, unsigned max)
{
	for (unsigned i = 0; i < PITH_SR_KEY_BYTES && i * 8 < max; i++) {
		unsigned x = a[i] ^ b[i];
		if (x) {
			unsigned d = i * 8 + (unsigned)__builtin_clz(x) - 24;
			return d < max ? d : max;
		}
	}
	return max;
}

void pith_sr_leaf_hash(const pith_sr_leaf_t *leaf, uint8_t out[32])
{
	uint8_t m[1 + PITH_NUMBER_LEN + 32];
	m[0] = 0x00;
	memcpy(m + 1, leaf->pith, PITH_NUMBER_LEN);
	memcpy(m + 1 + PITH_NUMBER_LEN, leaf->state, 32);
	pith_sha256(m, sizeof(m), out);
}

void pith_sr_node_hash(unsigned bit, const uint8_t left[32], const uint8_t right[32],
		       uint8_t out[32])
{
	uint8_t m[2 + 64];
	m[0] = 0x01;
	m[1] = (uint8_t)bit;
	memcpy(m + 2, left, 32);
	memcpy(m + 34, right, 32);
	pith_sha256(m, sizeof(m), out);
}

void pith_sr_empty_root(uint8_t out[32])
{
	pith_sha256("", 0, out);
}

/* The first index in [lo, hi) whose key has bit set; keys are sorted and
 * share every bit before it, so those without come first. */
static size_t split_at(const uint8_t (*keys)[PITH_SR_KEY_BYTES], size_t lo, size_t hi,
		       unsigned bit)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pith_sr_bit(keys[mid], bit))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Common prefix length of the sorted keys [lo, hi): that of the first and last. */
static unsigned range_bits(const uint8_t (*keys)[PITH_SR_KEY_BYTES], size_t lo, size_t hi)
{
	return hi - lo == 1 ? PITH_SR_KEY_BITS
			    : pith_sr_common(keys[lo], keys[hi - 1], PITH_SR_KEY_BITS);
}

static void hash_range(const pith_sr_leaf_t *leaves, const uint8_t (*keys)[PITH_SR_KEY_BYTES],
		       size_t lo, size_t hi, uint8_t out[32])
{
	if (hi - lo == 1) {
		pith_sr_leaf_hash(&leaves[lo], out);
		return;
	}
	unsigned bit = range_bits(keys, lo, hi);
	size_t m = split_at(keys, lo, hi, bit);
	uint8_t l[32], r[32];
	hash_range(leaves, keys, lo, m, l);
	hash_range(leaves, keys, m, hi, r);
	pith_sr_node_hash(bit, l, r, out);
}

void pith_sr_hash_sorted(const pith_sr_leaf_t *leaves, const uint8_t (*keys)[PITH_SR_KEY_BYTES],
			 size_t n, uint8_t out[32])
{
	if (!n)
		pith_sr_empty_root(out);
	else
		hash_range(leaves, keys, 0, n, out);
}

/* ---- a bucket's leaves in memory ---- */

/* One leaf as the tree keeps it (49 bytes): its key and its leaf hash.
 * Every bucket holds its leaves' entries, in key order, in an array of
 * its own (t->lc[i], exactly count of them). */
typedef struct ent {
	uint8_t key[PITH_SR_KEY_BYTES];
	uint8_t h[32];
} ent_t;

/* The first index in [lo, hi) whose key has bit set (as split_at). */
static size_t e_split(const ent_t *e, size_t lo, size_t hi, unsigned bit)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pith_sr_bit(e[mid].key, bit))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static unsigned e_bits(const ent_t *e, size_t lo, size_t hi)
{
	return hi - lo == 1 ? PITH_SR_KEY_BITS : pith_sr_common(e[lo].key, e[hi - 1].key, PITH_SR_KEY_BITS);
}

/* The hash of the subtree over entries [lo, hi): the same bytes as
 * hash_range over their leaves. */
static void e_hash(const ent_t *e, size_t lo, size_t hi, uint8_t out[32])
{
	if (hi - lo == 1) {
		memcpy(out, e[lo].h, 32);
		return;
	}
	unsigned bit = e_bits(e, lo, hi);
	size_t m = e_split(e, lo, hi, bit);
	uint8_t l[32], r[32];
	e_hash(e, lo, m, l);
	e_hash(e, m, hi, r);
	pith_sr_node_hash(bit, l, r, out);
}

/* Where key is, or would go, among n sorted entries; *found 1 if there. */
static size_t e_find(const ent_t *e, size_t n, const uint8_t *key, int *found)
{
	size_t lo = 0, hi = n;
	*found = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = memcmp(e[mid].key, key, PITH_SR_KEY_BYTES);
		if (!c) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- the node pool ---- */

static uint32_t node_alloc(pith_sr_t *t)
{
	if (t->freelist != NIL) {
		uint32_t i = t->freelist;
		t->freelist = t->n[i].child[0];
		return i;
	}
	if (t->used == t->cap) {
		if (t->cap >= NIL / 2)
			return NIL;
		/* by an eighth: at 10M records the pool is a fifth of the
		 * tree's memory, and what it grows by stays unused a while */
		uint32_t nc = t->cap + t->cap / 8 + 64; /* + 64: a pool fitted to 1 node grows too */
		ent_t **nl = realloc(t->lc, (size_t)nc * sizeof(*nl));
		if (!nl)
			return NIL;
		t->lc = nl;
		node_t *nn = realloc(t->n, (size_t)nc * sizeof(node_t));
		if (!nn)
			return NIL;
		t->n = nn;
		t->cap = nc;
	}
	t->lc[t->used] = NULL;
	return t->used++;
}

static void node_release(pith_sr_t *t, uint32_t i)
{
	free(t->lc[i]);
	t->lc[i] = NULL;
	t->n[i].count = 0;
	t->n[i].child[0] = t->freelist;
	t->freelist = i;
}

static void subtree_free(pith_sr_t *t, uint32_t i)
{
	if (i == NIL)
		return;
	uint32_t c0 = t->n[i].child[0], c1 = t->n[i].child[1];
	if (c0 != NIL) {
		subtree_free(t, c0);
		subtree_free(t, c1);
	}
	node_release(t, i);
}

/* Frees a pool's bucket arrays and the pool. */
static void pool_free(node_t *n, ent_t **lc, uint32_t used)
{
	for (uint32_t i = 0; lc && i < used; i++)
		free(lc[i]);
	free(lc);
	free(n);
}

static void node_rehash(pith_sr_t *t, uint32_t i)
{
	node_t *x = &t->n[i];
	pith_sr_node_hash(x->bits, t->n[x->child[0]].hash, t->n[x->child[1]].hash, x->hash);
}

/* Makes node i a bucket over entries e[0, n) (copied), hashed. */
static int bucket_set(pith_sr_t *t, uint32_t i, const ent_t *e, size_t n)
{
	ent_t *c = malloc(n * sizeof(*c));
	if (!c)
		return PITH_ENOMEM;
	memcpy(c, e, n * sizeof(*c));
	free(t->lc[i]);
	t->lc[i] = c;
	node_t *x = &t->n[i];
	memcpy(x->key, e[0].key, PITH_SR_KEY_BYTES);
	x->bits = (uint8_t)e_bits(e, 0, n);
	x->count = (uint32_t)n;
	x->child[0] = x->child[1] = NIL;
	e_hash(e, 0, n, x->hash);
	x->flags = 0;
	return 0;
}

/* Builds the kept part over sorted entries [lo, hi) and returns its top
 * node, or NIL on OOM (nothing left allocated). */
static uint32_t build_range(pith_sr_t *t, const ent_t *e, size_t lo, size_t hi)
{
	uint32_t i = node_alloc(t);
	if (i == NIL)
		return NIL;
	if (hi - lo <= t->bucket) {
		if (bucket_set(t, i, e + lo, hi - lo)) {
			node_release(t, i);
			return NIL;
		}
		return i;
	}
	unsigned bits = e_bits(e, lo, hi);
	size_t m = e_split(e, lo, hi, bits);
	uint32_t c0 = build_range(t, e, lo, m);
	uint32_t c1 = c0 == NIL ? NIL : build_range(t, e, m, hi);
	if (c1 == NIL) {
		subtree_free(t, c0);
		node_release(t, i);
		return NIL;
	}
	node_t *x = &t->n[i]; /* after the children: the pool may have moved */
	memcpy(x->key, e[lo].key, PITH_SR_KEY_BYTES);
	x->bits = (uint8_t)bits;
	x->flags = 0;
	x->count = (uint32_t)(hi - lo);
	x->child[0] = c0;
	x->child[1] = c1;
	node_rehash(t, i);
	return i;
}

pith_sr_t *pith_sr_new(unsigned bucket, pith_sr_list_fn list, void *ctx)
{
	if (!bucket)
		bucket = PITH_SR_BUCKET_DEFAULT;
	if (bucket > PITH_SR_BUCKET_MAX || !list)
		return NULL;
	pith_sr_t *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->bucket = bucket;
	t->list = list;
	t->ctx = ctx;
	t->root = NIL;
	t->freelist = NIL;
	t->leaves = calloc(bucket + 1, sizeof(*t->leaves));
	t->keys = calloc(bucket + 1, sizeof(*t->keys));
	t->scratch = calloc(bucket + 1, sizeof(*t->scratch));
	if (!t->leaves || !t->keys || !t->scratch) {
		pith_sr_free_(t);
		return NULL;
	}
	return t;
}

void pith_sr_free_(pith_sr_t *t)
{
	if (!t)
		return;
	pool_free(t->n, t->lc, t->used);
	free(t->leaves);
	free(t->keys);
	free(t->scratch);
	free(t);
}

/* Keys of n listed leaves into keys, checking that they are well formed,
 * strictly increasing and all begin with the first plen bits of prefix. */
static int keys_of(const pith_sr_leaf_t *leaves, size_t n, uint8_t (*keys)[PITH_SR_KEY_BYTES],
		   const uint8_t *prefix, unsigned plen)
{
	for (size_t i = 0; i < n; i++) {
		if (pith_sr_key(leaves[i].pith, keys[i]))
			return PITH_EMISMATCH;
		if (i && memcmp(keys[i - 1], keys[i], PITH_SR_KEY_BYTES) >= 0)
			return PITH_EMISMATCH;
		if (prefix && pith_sr_common(keys[i], prefix, plen) < plen)
			return PITH_EMISMATCH;
	}
	return 0;
}

/* Lists the leaves under a prefix into t's scratch; their number must be
 * expect. */
static int list_expect(pith_sr_t *t, const uint8_t *prefix, unsigned plen, size_t expect)
{
	size_t n = 0;
	if (expect > t->bucket + 1)
		return PITH_EMISMATCH;
	int rc = t->list(t->ctx, prefix, plen, t->leaves, t->bucket + 1, &n);
	if (rc == PITH_ETOOBIG || (!rc && n != expect))
		return PITH_EMISMATCH;
	if (rc)
		return rc;
	return keys_of(t->leaves, n, t->keys, prefix, plen);
}

int pith_sr_build(pith_sr_t *t, const pith_sr_leaf_t *leaves, size_t n, pith_err_t *err)
{
	if (n > UINT32_MAX / 4)
		return pith_err_set(err, PITH_ETOOBIG, "state root: %zu leaves, more than a tree holds", n);
	ent_t *e = n ? malloc(n * sizeof(*e)) : NULL;
	if (n && !e)
		return pith_err_set(err, PITH_ENOMEM, "state root: out of memory for %zu keys", n);
	for (size_t i = 0; i < n; i++) {
		if (pith_sr_key(leaves[i].pith, e[i].key)) {
			free(e);
			return pith_err_set(err, PITH_EINVAL, "state root: leaf %zu: not a pith number", i);
		}
		if (i && memcmp(e[i - 1].key, e[i].key, PITH_SR_KEY_BYTES) >= 0) {
			free(e);
			return pith_err_set(err, PITH_EINVAL,
					    "state root: leaf %zu (%s) not after the one before it in key order",
					    i, leaves[i].pith);
		}
		pith_sr_leaf_hash(&leaves[i], e[i].h);
	}
	/* the new tree goes into a pool of its own, so that the old one
	 * stays whole if memory runs out */
	pith_sr_t nt = *t;
	nt.n = NULL;
	nt.lc = NULL;
	nt.cap = nt.used = 0;
	nt.freelist = NIL;
	uint32_t root = n ? build_range(&nt, e, 0, n) : NIL;
	free(e);
	if (n && root == NIL) {
		pool_free(nt.n, nt.lc, nt.used);
		return pith_err_set(err, PITH_ENOMEM, "state root: out of memory building %zu leaves", n);
	}
	pool_free(t->n, t->lc, t->used);
	/* no room past what was built: the next change grows it by half */
	node_t *fit = nt.used ? realloc(nt.n, (size_t)nt.used * sizeof(node_t)) : NULL;
	if (fit) { /* (lc may stay longer than cap: harmless) */
		nt.n = fit;
		ent_t **lfit = realloc(nt.lc, (size_t)nt.used * sizeof(*lfit));
		if (lfit)
			nt.lc = lfit;
		nt.cap = nt.used;
	}
	t->n = nt.n;
	t->lc = nt.lc;
	t->cap = nt.cap;
	t->used = nt.used;
	t->freelist = NIL;
	t->root = root;
	return 0;
}

/* The path taken down from the root: the inner nodes and the turn at each. */
typedef struct path {
	unsigned depth;
	uint32_t node[PITH_SR_KEY_BITS + 1];
	uint8_t dir[PITH_SR_KEY_BITS + 1];
} path_t;

static void path_push(path_t *p, const pith_sr_t *t, uint32_t i, const uint8_t *key)
{
	p->node[p->depth] = i;
	p->dir[p->depth] = (uint8_t)pith_sr_bit(key, t->n[i].bits);
	p->depth++;
}

/* Puts repl where the path's last turn led (or at the root), and updates
 * the counts (by delta) of every node on the path and marks them dirty:
 * hashes wait for pith_sr_flush. */
static void path_attach(pith_sr_t *t, const path_t *p, unsigned depth, uint32_t repl, int delta)
{
	if (!depth)
		t->root = repl;
	else
		t->n[p->node[depth - 1]].child[p->dir[depth - 1]] = repl;
	for (unsigned i = depth; i-- > 0;) {
		node_t *x = &t->n[p->node[i]];
		x->count = (uint32_t)((int64_t)x->count + delta);
		x->flags |= F_DIRTY;
	}
}

/* A new dirty bucket of one leaf, or NIL on OOM. */
static uint32_t leaf_new(pith_sr_t *t, const ent_t *e)
{
	uint32_t i = node_alloc(t);
	if (i == NIL)
		return NIL;
	if (bucket_set(t, i, e, 1)) {
		node_release(t, i);
		return NIL;
	}
	t->n[i].flags = F_DIRTY;
	return i;
}

/* Bucket i's entries with e put in at pos into t->scratch (count + 1). */
static void with_entry(pith_sr_t *t, uint32_t i, size_t pos, const ent_t *e)
{
	size_t n = t->n[i].count;
	memcpy(t->scratch, t->lc[i], pos * sizeof(ent_t));
	t->scratch[pos] = *e;
	memcpy(t->scratch + pos + 1, t->lc[i] + pos, (n - pos) * sizeof(ent_t));
}

enum { SET_INSERT, SET_UPDATE, SET_UPSERT };

/* Puts leaf e into the tree: O(log n) steps and no hashing, but for the
 * split of a full bucket (from its entries, 2 x bucket hashes). */
static int set_leaf(pith_sr_t *t, const ent_t *e, int mode)
{
	const uint8_t *key = e->key;
	path_t p = {0};
	uint32_t i = t->root, repl = NIL;
	int delta = 1;
	if (i == NIL) {
		if (mode == SET_UPDATE)
			return PITH_ENOTFOUND;
		if ((repl = leaf_new(t, e)) == NIL)
			return PITH_ENOMEM;
		t->root = repl;
		return 0;
	}
	for (;;) {
		node_t *x = &t->n[i];
		unsigned d = pith_sr_common(key, x->key, x->bits);
		int found = 0;
		size_t pos = 0;
		if (d >= x->bits && x->child[0] != NIL) {
			path_push(&p, t, i, key);
			i = x->child[p.dir[p.depth - 1]];
			continue;
		}
		if (mode == SET_UPDATE && d < x->bits)
			return PITH_ENOTFOUND;
		if (x->child[0] == NIL) {
			pos = e_find(t->lc[i], x->count, key, &found);
			if (found && mode == SET_INSERT)
				return PITH_EEXIST;
			if (!found && mode == SET_UPDATE)
				return PITH_ENOTFOUND;
		}
		if (found) { /* a new state: the leaf's hash, hashed up at the flush */
			memcpy(t->lc[i][pos].h, e->h, 32);
			x->flags |= F_DIRTY;
			repl = i;
			delta = 0;
			break;
		}
		if (x->child[0] == NIL && (x->count < t->bucket || d >= x->bits)) {
			/* into this bucket (wider if d < bits); split if it
			 * then holds more than a bucket */
			with_entry(t, i, pos, e);
			size_t n = (size_t)x->count + 1;
			if (n <= t->bucket) {
				if (bucket_set(t, i, t->scratch, n))
					return PITH_ENOMEM;
				t->n[i].flags = F_DIRTY;
				repl = i;
			} else {
				if ((repl = build_range(t, t->scratch, 0, n)) == NIL)
					return PITH_ENOMEM;
				subtree_free(t, i);
			}
			break;
		}
		/* a new node splitting at d, over this one and the leaf */
		uint32_t cnt = x->count + 1;
		uint32_t leaf = leaf_new(t, e), m = leaf == NIL ? NIL : node_alloc(t);
		if (m == NIL) {
			if (leaf != NIL)
				node_release(t, leaf);
			return PITH_ENOMEM;
		}
		node_t *y = &t->n[m];
		unsigned side = pith_sr_bit(key, d);
		memcpy(y->key, key, PITH_SR_KEY_BYTES);
		y->bits = (uint8_t)d;
		y->count = cnt;
		y->flags = F_DIRTY;
		y->child[side] = leaf;
		y->child[!side] = i;
		repl = m;
		break;
	}
	path_attach(t, &p, p.depth, repl, delta);
	return 0;
}

/* The leaf of pith as the list callback has it, as an entry. 0,
 * PITH_EINVAL, PITH_EMISMATCH (listed but want 0, or not listed and want
 * 1), or the callback's error. */
static int fetch_leaf(pith_sr_t *t, const char *pith, ent_t *e, size_t want)
{
	if (pith_sr_key(pith, e->key))
		return PITH_EINVAL;
	int rc = list_expect(t, e->key, PITH_SR_KEY_BITS, want);
	if (!rc && want)
		pith_sr_leaf_hash(&t->leaves[0], e->h);
	return rc;
}

/* A change named by its pith number alone: its leaf read, then set. */
static int set_named(pith_sr_t *t, const char *pith, int mode)
{
	ent_t e;
	int rc = fetch_leaf(t, pith, &e, 1);
	return rc ? rc : set_leaf(t, &e, mode);
}

int pith_sr_insert(pith_sr_t *t, const char *pith)
{
	return set_named(t, pith, SET_INSERT);
}

int pith_sr_update(pith_sr_t *t, const char *pith)
{
	return set_named(t, pith, SET_UPDATE);
}

int pith_sr_upsert(pith_sr_t *t, const char *pith)
{
	return set_named(t, pith, SET_UPSERT);
}

int pith_sr_upsert_leaf(pith_sr_t *t, const pith_sr_leaf_t *leaf)
{
	ent_t e;
	if (pith_sr_key(leaf->pith, e.key))
		return PITH_EINVAL;
	pith_sr_leaf_hash(leaf, e.h);
	return set_leaf(t, &e, SET_UPSERT);
}

/* Walks down to the node holding key's leaf: the first with at most
 * `stop` leaves (a bucket at the latest). PITH_ENOTFOUND if the key
 * leaves the prefix of a node on the way. */
static int walk_to(const pith_sr_t *t, const uint8_t key[PITH_SR_KEY_BYTES], uint32_t stop,
		   path_t *p, uint32_t *at)
{
	uint32_t i = t->root;
	while (i != NIL) {
		const node_t *x = &t->n[i];
		if (pith_sr_common(key, x->key, x->bits) < x->bits)
			return PITH_ENOTFOUND;
		if (x->child[0] == NIL || x->count <= stop) {
			*at = i;
			return 0;
		}
		path_push(p, t, i, key);
		i = x->child[p->dir[p->depth - 1]];
	}
	return PITH_ENOTFOUND;
}

/* The entries under node i (at most bucket + 1 of them), in key order,
 * appended to out at *n. */
static void gather(const pith_sr_t *t, uint32_t i, ent_t *out, size_t *n)
{
	const node_t *x = &t->n[i];
	if (x->child[0] != NIL) {
		gather(t, x->child[0], out, n);
		gather(t, x->child[1], out, n);
		return;
	}
	memcpy(out + *n, t->lc[i], x->count * sizeof(ent_t));
	*n += x->count;
}

int pith_sr_delete(pith_sr_t *t, const char *pith)
{
	ent_t e;
	path_t p = {0};
	uint32_t i;
	int rc = fetch_leaf(t, pith, &e, 0); /* it must be gone from the leaves */
	if (rc)
		return rc;
	/* the topmost node that will hold at most `bucket` leaves after: it
	 * becomes a bucket (or goes, with its parent, if it was the leaf) */
	if ((rc = walk_to(t, e.key, t->bucket + 1, &p, &i)))
		return rc;
	node_t *x = &t->n[i];
	if (x->count == 1) {
		if (memcmp(t->lc[i][0].key, e.key, PITH_SR_KEY_BYTES))
			return PITH_ENOTFOUND;
		if (!p.depth) {
			subtree_free(t, i);
			t->root = NIL;
			return 0;
		}
		uint32_t parent = p.node[p.depth - 1];
		uint32_t sib = t->n[parent].child[!p.dir[p.depth - 1]];
		subtree_free(t, i);
		node_release(t, parent);
		path_attach(t, &p, p.depth - 1, sib, -1);
		return 0;
	}
	size_t n = 0;
	gather(t, i, t->scratch, &n);
	int found;
	size_t pos = e_find(t->scratch, n, e.key, &found);
	if (!found)
		return PITH_ENOTFOUND;
	memmove(t->scratch + pos, t->scratch + pos + 1, (n - pos - 1) * sizeof(ent_t));
	uint32_t c0 = x->child[0], c1 = x->child[1];
	if ((rc = bucket_set(t, i, t->scratch, n - 1)))
		return rc;
	if (c0 != NIL) {
		subtree_free(t, c0);
		subtree_free(t, c1);
	}
	t->n[i].flags = F_DIRTY;
	path_attach(t, &p, p.depth, i, -1);
	return 0;
}

/* Rehashes the dirty nodes under i, buckets from their entries. */
static void flush_node(pith_sr_t *t, uint32_t i)
{
	node_t *x = &t->n[i];
	if (!(x->flags & F_DIRTY))
		return;
	if (x->child[0] == NIL) {
		e_hash(t->lc[i], 0, x->count, x->hash);
	} else {
		flush_node(t, x->child[0]);
		flush_node(t, x->child[1]);
		node_rehash(t, i);
	}
	x->flags &= (uint8_t)~F_DIRTY;
}

int pith_sr_flush(pith_sr_t *t)
{
	if (t->root != NIL)
		flush_node(t, t->root);
	return 0;
}

int pith_sr_root(pith_sr_t *t, uint8_t out[32])
{
	int rc = pith_sr_flush(t);
	if (rc)
		return rc;
	if (t->root == NIL)
		pith_sr_empty_root(out);
	else
		memcpy(out, t->n[t->root].hash, 32);
	return 0;
}

uint64_t pith_sr_count(const pith_sr_t *t)
{
	return t->root == NIL ? 0 : t->n[t->root].count;
}

size_t pith_sr_mem_bytes(const pith_sr_t *t)
{
	size_t b = sizeof(*t) + (size_t)t->cap * (sizeof(node_t) + sizeof(*t->lc)) +
		   (t->bucket + 1) * (sizeof(*t->leaves) + sizeof(*t->keys) + sizeof(*t->scratch));
	/* each bucket's array, with malloc's 16 bytes of rounding and header */
	for (uint32_t i = 0; i < t->used; i++)
		if (t->lc[i])
			b += ((size_t)t->n[i].count * sizeof(ent_t) + 8 + 15) / 16 * 16;
	return b;
}

/* ---- proofs ---- */

int pith_sr_prove(pith_sr_t *t, const char *pith, pith_sr_proof_t *out)
{
	uint8_t key[PITH_SR_KEY_BYTES];
	memset(out, 0, sizeof(*out));
	if (pith_sr_key(pith, key))
		return PITH_EINVAL;
	memcpy(out->asked, pith, PITH_NUMBER_LEN + 1);
	int rc = pith_sr_root(t, out->root);
	if (rc)
		return rc;
	out->count = pith_sr_count(t);
	uint32_t i = t->root;
	if (i == NIL)
		return 0;
	/* the kept nodes: turn the key's way at each */
	while (t->n[i].child[0] != NIL) {
		const node_t *x = &t->n[i];
		unsigned dir = pith_sr_bit(key, x->bits);
		out->path[out->n].bit = x->bits;
		memcpy(out->path[out->n].sib, t->n[x->child[!dir]].hash, 32);
		out->n++;
		i = x->child[dir];
	}
	/* then inside the bucket, from its entries */
	const ent_t *e = t->lc[i];
	size_t lo = 0, hi = t->n[i].count;
	while (hi - lo > 1) {
		unsigned bit = e_bits(e, lo, hi);
		size_t m = e_split(e, lo, hi, bit);
		unsigned dir = pith_sr_bit(key, bit);
		out->path[out->n].bit = (uint8_t)bit;
		if (dir) {
			e_hash(e, lo, m, out->path[out->n].sib);
			lo = m;
		} else {
			e_hash(e, m, hi, out->path[out->n].sib);
			hi = m;
		}
		out->n++;
	}
	/* and the leaf itself (its pith number and state) from the callback:
	 * it must be the one the tree holds */
	uint8_t lk[PITH_SR_KEY_BYTES], h[32];
	memcpy(lk, e[lo].key, sizeof(lk));
	if ((rc = list_expect(t, lk, PITH_SR_KEY_BITS, 1)))
		return rc;
	pith_sr_leaf_hash(&t->leaves[0], h);
	if (memcmp(h, t->lc[i][lo].h, 32))
		return PITH_EMISMATCH;
	out->has_leaf = 1;
	out->leaf = t->leaves[0];
	return 0;
}

int pith_sr_proof_check(const pith_sr_proof_t *p, const uint8_t root[32], int *present,
			pith_err_t *err)
{
	uint8_t asked[PITH_SR_KEY_BYTES], lk[PITH_SR_KEY_BYTES], h[32];
	*present = 0;
	if (pith_sr_key(p->asked, asked))
		return pith_err_set(err, PITH_EINVAL, "proof: pith_number is not a full pith number");
	if (!p->has_leaf) {
		pith_sr_empty_root(h);
		if (p->n || memcmp(h, root, 32))
			return pith_err_set(err, PITH_EMISMATCH,
					    "proof: no leaf, but the root is not the empty tree's");
		return 0;
	}
	if (pith_sr_key(p->leaf.pith, lk))
		return pith_err_set(err, PITH_EINVAL, "proof: leaf.pith_number is not a full pith number");
	if (p->n > PITH_SR_KEY_BITS)
		return pith_err_set(err, PITH_EINVAL, "proof: path longer than %d", PITH_SR_KEY_BITS);
	for (unsigned i = 0; i < p->n; i++) {
		unsigned b = p->path[i].bit;
		if (b >= PITH_SR_KEY_BITS || (i && b <= p->path[i - 1].bit))
			return pith_err_set(err, PITH_EINVAL,
					    "proof: path step %u: bit %u not above the step before it", i, b);
		if (pith_sr_bit(asked, b) != pith_sr_bit(lk, b))
			return pith_err_set(err, PITH_EMISMATCH,
					    "proof: path step %u: the asked key turns the other way at bit %u", i, b);
	}
	pith_sr_leaf_hash(&p->leaf, h);
	for (unsigned i = p->n; i-- > 0;) {
		unsigned b = p->path[i].bit;
		if (pith_sr_bit(lk, b))
			pith_sr_node_hash(b, p->path[i].sib, h, h);
		else
			pith_sr_node_hash(b, h, p->path[i].sib, h);
	}
	if (memcmp(h, root, 32))
		return pith_err_set(err, PITH_EMISMATCH, "proof: the path does not hash to the root");
	*present = !strcmp(p->leaf.pith, p->asked);
	return 0;
}

/* ---- range answers ---- */

static void sub_mask(pith_sr_sub_t *s)
{
	for (unsigned b = s->bits; b < PITH_SR_KEY_BYTES * 8; b++)
		s->key[b >> 3] &= (uint8_t)~(0x80u >> (b & 7));
}

static void sub_of_range(pith_sr_sub_t *s, const pith_sr_leaf_t *leaves,
			 const uint8_t (*keys)[PITH_SR_KEY_BYTES], size_t lo, size_t hi)
{
	s->count = hi - lo;
	s->bits = range_bits(keys, lo, hi);
	memcpy(s->key, keys[lo], PITH_SR_KEY_BYTES);
	sub_mask(s);
	hash_range(leaves, keys, lo, hi, s->hash);
}

static void sub_of_node(pith_sr_sub_t *s, const node_t *x)
{
	s->count = x->count;
	s->bits = x->bits;
	memcpy(s->key, x->key, PITH_SR_KEY_BYTES);
	memcpy(s->hash, x->hash, 32);
	sub_mask(s);
}

/* An answer computed from n sorted leaves (with their keys). */
static void range_from_leaves(pith_sr_range_t *r, const pith_sr_leaf_t *leaves,
			      const uint8_t (*keys)[PITH_SR_KEY_BYTES], size_t n)
{
	if (!n)
		return;
	sub_of_range(&r->node, leaves, keys, 0, n);
	if (n >= 2) {
		size_t m = split_at(keys, 0, n, r->node.bits);
		r->has_children = 1;
		sub_of_range(&r->child[0], leaves, keys, 0, m);
		sub_of_range(&r->child[1], leaves, keys, m, n);
	}
	if (n <= PITH_SR_RANGE_LEAVES) {
		memcpy(r->leaves, leaves, n * sizeof(*leaves));
		r->nleaves = n;
	}
}

/* A range answer listed from bucket i's leaves (under the first plen
 * bits of pre) hashes as the bucket's entries there do: the leaves are
 * the ones the tree holds. 0 or PITH_EMISMATCH. */
static int range_agrees(const pith_sr_t *t, uint32_t i, const uint8_t *pre, unsigned plen,
			const pith_sr_range_t *out)
{
	const ent_t *e = t->lc[i];
	size_t n = t->n[i].count, lo = 0;
	while (lo < n && pith_sr_common(e[lo].key, pre, plen) < plen)
		lo++;
	size_t hi = lo;
	while (hi < n && pith_sr_common(e[hi].key, pre, plen) >= plen)
		hi++;
	if (hi - lo != out->node.count)
		return PITH_EMISMATCH;
	uint8_t h[32];
	if (hi > lo) {
		e_hash(e, lo, hi, h);
		if (memcmp(h, out->node.hash, 32))
			return PITH_EMISMATCH;
	}
	return 0;
}

int pith_sr_range(pith_sr_t *t, const uint8_t prefix[PITH_SR_KEY_BYTES], unsigned plen,
		  pith_sr_range_t *out)
{
	memset(out, 0, sizeof(*out));
	if (plen > PITH_SR_KEY_BITS)
		return PITH_EINVAL;
	memcpy(out->prefix, prefix, PITH_SR_KEY_BYTES);
	for (unsigned b = plen; b < PITH_SR_KEY_BYTES * 8; b++)
		out->prefix[b >> 3] &= (uint8_t)~(0x80u >> (b & 7));
	out->plen = plen;
	int rc = pith_sr_root(t, out->root);
	if (rc)
		return rc;
	out->total = pith_sr_count(t);
	const uint8_t (*keys)[PITH_SR_KEY_BYTES] = (const uint8_t (*)[PITH_SR_KEY_BYTES])t->keys;
	for (uint32_t i = t->root; i != NIL;) {
		const node_t *x = &t->n[i];
		unsigned m = plen < x->bits ? plen : x->bits;
		if (pith_sr_common(out->prefix, x->key, m) < m)
			return 0; /* nothing under the prefix */
		if (x->child[0] == NIL) { /* a bucket: from its leaves under the prefix */
			unsigned under = plen > x->bits ? plen : x->bits;
			const uint8_t *pre = plen > x->bits ? out->prefix : x->key;
			size_t n = 0;
			rc = t->list(t->ctx, pre, under, t->leaves, t->bucket + 1, &n);
			if (rc == PITH_ETOOBIG || (!rc && n > x->count) || (!rc && under == x->bits && n != x->count))
				return PITH_EMISMATCH;
			if (rc || (rc = keys_of(t->leaves, n, t->keys, pre, under)))
				return rc;
			range_from_leaves(out, t->leaves, keys, n);
			return range_agrees(t, i, pre, under, out);
		}
		if (x->bits >= plen) { /* a kept inner node */
			sub_of_node(&out->node, x);
			out->has_children = 1;
			sub_of_node(&out->child[0], &t->n[x->child[0]]);
			sub_of_node(&out->child[1], &t->n[x->child[1]]);
			if (x->count <= PITH_SR_RANGE_LEAVES) {
				uint8_t pre[PITH_SR_KEY_BYTES];
				memcpy(pre, x->key, sizeof(pre));
				size_t n = 0;
				rc = t->list(t->ctx, pre, x->bits, out->leaves, PITH_SR_RANGE_LEAVES, &n);
				if (rc == PITH_ETOOBIG || (!rc && n != x->count))
					return PITH_EMISMATCH;
				if (rc)
					return rc;
				out->nleaves = n;
			}
			return 0;
		}
		i = x->child[pith_sr_bit(out->prefix, x->bits)];
	}
	return 0;
}

static int sub_eq(const pith_sr_sub_t *a, const pith_sr_sub_t *b)
{
	return a->count == b->count && a->bits == b->bits && !memcmp(a->hash, b->hash, 32) &&
	       !memcmp(a->key, b->key, PITH_SR_KEY_BYTES);
}

static int sub_check(const pith_sr_sub_t *s, const char *what, pith_err_t *err)
{
	if (s->bits > PITH_SR_KEY_BITS || (s->count == 1) != (s->bits == PITH_SR_KEY_BITS))
		return pith_err_set(err, PITH_EINVAL, "range: %s: %u bits for %llu leaves", what,
				    s->bits, (unsigned long long)s->count);
	pith_sr_sub_t m = *s;
	sub_mask(&m);
	if (memcmp(m.key, s->key, PITH_SR_KEY_BYTES))
		return pith_err_set(err, PITH_EINVAL, "range: %s: key bits past its prefix", what);
	return 0;
}

int pith_sr_range_check(const pith_sr_range_t *r, pith_err_t *err)
{
	const pith_sr_sub_t *s = &r->node;
	int rc;
	if (r->plen > PITH_SR_KEY_BITS)
		return pith_err_set(err, PITH_EINVAL, "range: prefix of %u bits", r->plen);
	if (!s->count) {
		if (r->has_children || r->nleaves)
			return pith_err_set(err, PITH_EINVAL, "range: children or leaves under an empty prefix");
		return 0;
	}
	if ((rc = sub_check(s, "node", err)))
		return rc;
	if (s->bits < r->plen || pith_sr_common(s->key, r->prefix, r->plen) < r->plen)
		return pith_err_set(err, PITH_EINVAL, "range: the node is not under the prefix asked");
	if (s->count == 1) {
		uint8_t k[PITH_SR_KEY_BYTES], h[32];
		if (r->has_children || r->nleaves != 1 || pith_sr_key(r->leaves[0].pith, k) ||
		    memcmp(k, s->key, sizeof(k)))
			return pith_err_set(err, PITH_EINVAL, "range: one leaf, not listed as it should be");
		pith_sr_leaf_hash(&r->leaves[0], h);
		if (memcmp(h, s->hash, 32))
			return pith_err_set(err, PITH_EMISMATCH, "range: the leaf does not hash to the node");
		return 0;
	}
	if (!r->has_children)
		return pith_err_set(err, PITH_EINVAL, "range: an inner node without its children");
	uint8_t h[32];
	for (int i = 0; i < 2; i++) {
		const pith_sr_sub_t *c = &r->child[i];
		if (!c->count || (rc = sub_check(c, i ? "child 1" : "child 0", err)))
			return rc ? rc : pith_err_set(err, PITH_EINVAL, "range: an empty child");
		if (c->bits <= s->bits || pith_sr_common(c->key, s->key, s->bits) < s->bits ||
		    pith_sr_bit(c->key, s->bits) != (unsigned)i)
			return pith_err_set(err, PITH_EINVAL, "range: child %d does not extend the node by bit %d",
					    i, i);
	}
	if (r->child[0].count > s->count || r->child[1].count != s->count - r->child[0].count)
		return pith_err_set(err, PITH_EINVAL, "range: the children's counts do not add up");
	pith_sr_node_hash(s->bits, r->child[0].hash, r->child[1].hash, h);
	if (memcmp(h, s->hash, 32))
		return pith_err_set(err, PITH_EMISMATCH, "range: the children do not hash to the node");
	if ((s->count <= PITH_SR_RANGE_LEAVES) != (r->nleaves != 0) ||
	    (r->nleaves && r->nleaves != s->count))
		return pith_err_set(err, PITH_EINVAL, "range: %zu leaves listed for %llu", r->nleaves,
				    (unsigned long long)s->count);
	if (r->nleaves) {
		uint8_t keys[PITH_SR_RANGE_LEAVES][PITH_SR_KEY_BYTES];
		pith_sr_range_t again = {0};
		if (keys_of(r->leaves, r->nleaves, keys, r->prefix, r->plen))
			return pith_err_set(err, PITH_EINVAL, "range: listed leaves out of order or not under the prefix");
		range_from_leaves(&again, r->leaves, (const uint8_t (*)[PITH_SR_KEY_BYTES])keys, r->nleaves);
		if (!sub_eq(&again.node, &r->node) || !sub_eq(&again.child[0], &r->child[0]) ||
		    !sub_eq(&again.child[1], &r->child[1]))
			return pith_err_set(err, PITH_EMISMATCH, "range: the listed leaves do not hash to the node");
	}
	return 0;
}
