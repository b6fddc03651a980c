/* recon_set_t: an in-memory B+tree of (ts, id) items with per-subtree
 * counts and 256-bit id sums, so that the count and the id sum of any
 * prefix of the order (and so of any range) take one O(log n) descent.
 *
 * Inner nodes route by separators: sep[i] is <= every key in child i and
 * greater than every key in child i-1 (sep[0] is unused, i.e. -inf).
 * Removal is lazy: nodes are freed when they empty, never merged, so
 * separators stay valid lower bounds and depth never grows on removal
 * (events are practically never removed; see docs/sync.md). */
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

static leaf_t *leaf_alloc(recon_set_t *s)
{
	leaf_t *l = calloc(1, sizeof(*l));
	if (l)
		s->mem += sizeof(*l);
	return l;
}

static inner_t *inner_alloc(recon_set_t *s)
{
	inner_t *in = calloc(1, sizeof(*in));
	if (in)
		s->mem += sizeof(*in);
	return in;
}

static void node_free(recon_set_t *s, void *node, int h)
{
	if (!node)
		return;
	if (h > 0) {
		inner_t *in = node;
		for (uint32_t i = 0; i < in->n; i++)
			node_free(s, in->child[i], h - 1);
		s->mem -= sizeof(*in);
	} else {
		s->mem -= sizeof(leaf_t);
	}
	free(node);
}

recon_set_t *recon_set_new(void)
{
	recon_set_t *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->root = leaf_alloc(s);
	if (!s->root) {
		free(s);
		return NULL;
	}
	s->first = s->root;
	return s;
}

void recon_set_free_(recon_set_t *s)
{
	if (!s)
		return;
	node_free(s, s->root, s->height);
	node_free(s, s->spare_leaf, 0);
	for (uint32_t i = 0; i < s->n_spare_inner; i++) {
		s->spare_inner[i]->n = 0;
		node_free(s, s->spare_inner[i], 1);
	}
	free(s);
}

size_t recon_set_count(const recon_set_t *s)
{
	return s->count;
}

size_t recon_set_memory(const recon_set_t *s)
{
	return s->mem + sizeof(*s);
}

static void leaf_agg(const leaf_t *l, uint32_t from, uint32_t to, sum256_t *sum)
{
	sum256_zero(sum);
	for (uint32_t i = from; i < to; i++)
		sum256_add_id(sum, l->it[i].id);
}

static void inner_agg(const inner_t *in, uint32_t from, uint32_t to, uint64_t *cnt,
		      sum256_t *sum)
{
	*cnt = 0;
	sum256_zero(sum);
	for (uint32_t i = from; i < to; i++) {
		*cnt += in->cnt[i];
		sum256_add(sum, &in->sum[i]);
	}
}

/* Index of the child of in whose key range holds (ts, id). */
static uint32_t inner_route(const inner_t *in, uint64_t ts, const uint8_t *id)
{
	uint32_t lo = 1, hi = in->n; /* first i >= 1 with sep[i] > key */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (item_cmp(in->sep[mid].ts, in->sep[mid].id, ts, id) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

/* First position in l whose item is >= (ts, id). */
static uint32_t leaf_lower(const leaf_t *l, uint64_t ts, const uint8_t *id)
{
	uint32_t lo = 0, hi = l->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (item_cmp(l->it[mid].ts, l->it[mid].id, ts, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- insertion -------------------------------------------------------- */

static leaf_t *spare_leaf(recon_set_t *s);
static inner_t *spare_inner(recon_set_t *s);

typedef struct split {
	void *right;        /* new right sibling, or NULL */
	recon_item_t sep;   /* its first key */
	uint64_t cnt;       /* its count and sum */
	sum256_t sum;
} split_t;

static int leaf_insert(recon_set_t *s, leaf_t *l, const recon_item_t *it, split_t *sp)
{
	uint32_t pos = leaf_lower(l, it->ts, it->id);
	if (pos < l->n && item_cmp(l->it[pos].ts, l->it[pos].id, it->ts, it->id) == 0)
		return PITH_EEXIST;
	if (l->n < LEAF_MAX) {
		memmove(&l->it[pos + 1], &l->it[pos], (l->n - pos) * sizeof(recon_item_t));
		l->it[pos] = *it;
		l->n++;
		return 0;
	}
	leaf_t *r = spare_leaf(s);
	/* Appending past the last item of the set keeps the left leaf full:
	 * new events mostly arrive in time order, and half-empty leaves
	 * behind the tail would double the memory. */
	uint32_t keep = (pos == LEAF_MAX && s->tail_split) ? LEAF_MAX : LEAF_MAX / 2;
	r->n = LEAF_MAX - keep;
	memcpy(r->it, &l->it[keep], r->n * sizeof(recon_item_t));
	l->n = keep;
	leaf_t *dst = pos < keep ? l : r;
	uint32_t dpos = dst == l ? pos : pos - keep;
	memmove(&dst->it[dpos + 1], &dst->it[dpos], (dst->n - dpos) * sizeof(recon_item_t));
	dst->it[dpos] = *it;
	dst->n++;
	r->next = l->next;
	r->prev = l;
	if (l->next)
		l->next->prev = r;
	l->next = r;
	sp->right = r;
	sp->sep = r->it[0];
	sp->cnt = r->n;
	leaf_agg(r, 0, r->n, &sp->sum);
	return 0;
}

static void inner_put(inner_t *in, uint32_t at, const split_t *sp)
{
	uint32_t tail = in->n - at;
	memmove(&in->child[at + 1], &in->child[at], tail * sizeof(in->child[0]));
	memmove(&in->cnt[at + 1], &in->cnt[at], tail * sizeof(in->cnt[0]));
	memmove(&in->sum[at + 1], &in->sum[at], tail * sizeof(in->sum[0]));
	memmove(&in->sep[at + 1], &in->sep[at], tail * sizeof(in->sep[0]));
	in->child[at] = sp->right;
	in->cnt[at] = sp->cnt;
	in->sum[at] = sp->sum;
	in->sep[at] = sp->sep;
	in->n++;
}

static int node_insert(recon_set_t *s, void *node, int h, const recon_item_t *it,
		       const sum256_t *isum, split_t *sp)
{
	if (h == 0)
		return leaf_insert(s, node, it, sp);
	inner_t *in = node;
	uint32_t i = inner_route(in, it->ts, it->id);
	split_t csp = {0};
	int rc = node_insert(s, in->child[i], h - 1, it, isum, &csp);
	if (rc)
		return rc;
	in->cnt[i]++;
	sum256_add(&in->sum[i], isum);
	if (!csp.right)
		return 0;
	in->cnt[i] -= csp.cnt;
	sum256_sub(&in->sum[i], &csp.sum);
	if (in->n < INNER_MAX) {
		inner_put(in, i + 1, &csp);
		return 0;
	}
	inner_t *r = spare_inner(s);
	uint32_t keep = (i + 1 == INNER_MAX && s->tail_split) ? INNER_MAX : INNER_MAX / 2;
	r->n = INNER_MAX - keep;
	memcpy(r->child, &in->child[keep], r->n * sizeof(in->child[0]));
	memcpy(r->cnt, &in->cnt[keep], r->n * sizeof(in->cnt[0]));
	memcpy(r->sum, &in->sum[keep], r->n * sizeof(in->sum[0]));
	memcpy(r->sep, &in->sep[keep], r->n * sizeof(in->sep[0]));
	in->n = keep;
	if (i + 1 < keep)
		inner_put(in, i + 1, &csp);
	else
		inner_put(r, i + 1 - keep, &csp);
	sp->right = r;
	sp->sep = r->sep[0];
	inner_agg(r, 0, r->n, &sp->cnt, &sp->sum);
	return 0;
}

/* A split cannot be rolled back cheaply, so the nodes an insert may need
 * (one leaf, one inner node per level and a new root) are allocated before
 * the tree is touched; an insert then either fails up front with
 * PITH_ENOMEM or completes. */
static int reserve_spares(recon_set_t *s)
{
	if (!s->spare_leaf) {
		s->spare_leaf = leaf_alloc(s);
		if (!s->spare_leaf)
			return PITH_ENOMEM;
	}
	while (s->n_spare_inner < (uint32_t)s->height + 1) {
		if (s->n_spare_inner >= RSET_MAX_SPARE)
			return PITH_ETOOBIG;
		inner_t *in = inner_alloc(s);
		if (!in)
			return PITH_ENOMEM;
		s->spare_inner[s->n_spare_inner++] = in;
	}
	return 0;
}

static leaf_t *spare_leaf(recon_set_t *s)
{
	leaf_t *l = s->spare_leaf;
	s->spare_leaf = NULL;
	return l;
}

static inner_t *spare_inner(recon_set_t *s)
{
	return s->spare_inner[--s->n_spare_inner];
}

int recon_set_add(recon_set_t *s, uint64_t ts, const uint8_t id[static RECON_ID_LEN])
{
	if (ts > RECON_TS_MAX)
		return PITH_EINVAL;
	int rc = reserve_spares(s);
	if (rc)
		return rc;
	recon_item_t it;
	it.ts = ts;
	memcpy(it.id, id, RECON_ID_LEN);
	sum256_t isum;
	sum256_zero(&isum);
	sum256_add_id(&isum, id);
	/* a split at the right edge of a node on the rightmost path keeps the
	 * left node full (appends in time order) */
	s->tail_split = s->count == 0 ||
			item_cmp(ts, id, s->last.ts, s->last.id) > 0;
	split_t sp = {0};
	rc = node_insert(s, s->root, s->height, &it, &isum, &sp);
	if (rc)
		return rc;
	if (sp.right) {
		inner_t *root = spare_inner(s);
		root->n = 2;
		root->child[0] = s->root;
		root->child[1] = sp.right;
		root->cnt[0] = s->count + 1 - sp.cnt;
		root->sum[0] = s->total;
		sum256_add(&root->sum[0], &isum);
		sum256_sub(&root->sum[0], &sp.sum);
		root->cnt[1] = sp.cnt;
		root->sum[1] = sp.sum;
		root->sep[1] = sp.sep;
		s->root = root;
		s->height++;
	}
	s->count++;
	sum256_add(&s->total, &isum);
	if (s->tail_split)
		s->last = it;
	return 0;
}

/* ---- removal ---------------------------------------------------------- */

/* Returns 0 or PITH_ENOTFOUND; *emptied when node has no items left. */
static int node_remove(recon_set_t *s, void *node, int h, uint64_t ts, const uint8_t *id,
		       const sum256_t *isum, int *emptied)
{
	if (h == 0) {
		leaf_t *l = node;
		uint32_t pos = leaf_lower(l, ts, id);
		if (pos >= l->n || item_cmp(l->it[pos].ts, l->it[pos].id, ts, id) != 0)
			return PITH_ENOTFOUND;
		memmove(&l->it[pos], &l->it[pos + 1], (l->n - pos - 1) * sizeof(recon_item_t));
		l->n--;
		*emptied = l->n == 0;
		return 0;
	}
	inner_t *in = node;
	uint32_t i = inner_route(in, ts, id);
	int child_empty = 0;
	int rc = node_remove(s, in->child[i], h - 1, ts, id, isum, &child_empty);
	if (rc)
		return rc;
	in->cnt[i]--;
	sum256_sub(&in->sum[i], isum);
	if (child_empty) {
		if (h == 1) {
			leaf_t *l = in->child[i];
			if (l->prev)
				l->prev->next = l->next;
			else
				s->first = l->next;
			if (l->next)
				l->next->prev = l->prev;
		}
		node_free(s, in->child[i], h - 1);
		uint32_t tail = in->n - i - 1;
		memmove(&in->child[i], &in->child[i + 1], tail * sizeof(in->child[0]));
		memmove(&in->cnt[i], &in->cnt[i + 1], tail * sizeof(in->cnt[0]));
		memmove(&in->sum[i], &in->sum[i + 1], tail * sizeof(in->sum[0]));
		memmove(&in->sep[i], &in->sep[i + 1], tail * sizeof(in->sep[0]));
		in->n--;
	}
	*emptied = in->n == 0;
	return 0;
}

int recon_set_remove(recon_set_t *s, uint64_t ts, const uint8_t id[static RECON_ID_LEN])
{
	if (!s->spare_leaf) {
		s->spare_leaf = leaf_alloc(s);
		if (!s->spare_leaf)
			return PITH_ENOMEM;
	}
	sum256_t isum;
	sum256_zero(&isum);
	sum256_add_id(&isum, id);
	int emptied = 0;
	int rc = node_remove(s, s->root, s->height, ts, id, &isum, &emptied);
	if (rc)
		return rc;
	s->count--;
	sum256_sub(&s->total, &isum);
	if (emptied && s->height > 0) {
		/* every leaf is gone: start again from one empty leaf (reserved
		 * before anything was changed) */
		node_free(s, s->root, s->height);
		leaf_t *l = spare_leaf(s);
		l->n = 0;
		l->prev = l->next = NULL;
		s->root = l;
		s->height = 0;
		s->first = l;
	}
	while (s->height > 0 && ((inner_t *)s->root)->n == 1) {
		inner_t *old = s->root;
		s->root = old->child[0];
		s->height--;
		s->mem -= sizeof(*old);
		free(old);
	}
	if (s->count > 0 && item_cmp(ts, id, s->last.ts, s->last.id) == 0)
		recon_set_item_at(s, s->count - 1, &s->last);
	return 0;
}

bool recon_set_has(const recon_set_t *s, uint64_t ts, const uint8_t id[static RECON_ID_LEN])
{
	const void *node = s->root;
	for (int h = s->height; h > 0; h--) {
		const inner_t *in = node;
		node = in->child[inner_route(in, ts, id)];
	}
	const leaf_t *l = node;
	uint32_t pos = leaf_lower(l, ts, id);
	return pos < l->n && item_cmp(l->it[pos].ts, l->it[pos].id, ts, id) == 0;
}

/* ---- bulk build ------------------------------------------------------- */

typedef struct lvl_ent {
	void *node;
	uint64_t cnt;
	sum256_t sum;
	recon_item_t first;
} lvl_ent_t;

int recon_set_new_sorted(recon_set_t **out, const recon_item_t *items, size_t n,
			 pith_err_t *err)
{
	*out = NULL;
	for (size_t i = 0; i < n; i++) {
		if (items[i].ts > RECON_TS_MAX)
			return pith_err_set(err, PITH_EINVAL,
					    "recon: item %zu has ts %llu above the maximum", i,
					    (unsigned long long)items[i].ts);
		if (i > 0 && item_cmp(items[i - 1].ts, items[i - 1].id, items[i].ts,
				      items[i].id) >= 0)
			return pith_err_set(err, PITH_EINVAL,
					    "recon: item %zu is not above item %zu", i, i - 1);
	}
	recon_set_t *s = recon_set_new();
	if (!s)
		return pith_err_set(err, PITH_ENOMEM, "recon: out of memory");
	if (n == 0) {
		*out = s;
		return 0;
	}
	node_free(s, s->root, 0);
	s->root = NULL;
	s->first = NULL;

	size_t nl = (n + LEAF_BULK - 1) / LEAF_BULK;
	lvl_ent_t *lv = calloc(nl, sizeof(*lv));
	if (!lv)
		goto oom;
	leaf_t *prev = NULL;
	for (size_t k = 0; k < nl; k++) {
		/* spread items evenly so that no leaf is nearly empty */
		size_t from = n * k / nl, to = n * (k + 1) / nl;
		leaf_t *l = leaf_alloc(s);
		if (!l)
			goto oom_lv;
		l->n = (uint32_t)(to - from);
		memcpy(l->it, &items[from], l->n * sizeof(recon_item_t));
		l->prev = prev;
		if (prev)
			prev->next = l;
		else
			s->first = l;
		prev = l;
		lv[k].node = l;
		lv[k].cnt = l->n;
		leaf_agg(l, 0, l->n, &lv[k].sum);
		lv[k].first = l->it[0];
	}
	int h = 0;
	size_t cur = nl;
	while (cur > 1) {
		size_t np = (cur + INNER_BULK - 1) / INNER_BULK;
		for (size_t k = 0; k < np; k++) {
			size_t from = cur * k / np, to = cur * (k + 1) / np;
			inner_t *in = inner_alloc(s);
			if (!in) {
				/* parents built so far own their children; the
				 * children from `from` on are still loose */
				for (size_t j = 0; j < k; j++)
					node_free(s, lv[j].node, h + 1);
				for (size_t j = from; j < cur; j++)
					node_free(s, lv[j].node, h);
				free(lv);
				recon_set_free_(s);
				return pith_err_set(err, PITH_ENOMEM, "recon: out of memory");
			}
			in->n = (uint32_t)(to - from);
			for (size_t j = from; j < to; j++) {
				in->child[j - from] = lv[j].node;
				in->cnt[j - from] = lv[j].cnt;
				in->sum[j - from] = lv[j].sum;
				in->sep[j - from] = lv[j].first;
			}
			lvl_ent_t e;
			e.node = in;
			inner_agg(in, 0, in->n, &e.cnt, &e.sum);
			e.first = lv[from].first;
			lv[k] = e;
		}
		cur = np;
		h++;
	}
	s->root = lv[0].node;
	s->height = h;
	s->count = n;
	s->total = lv[0].sum;
	s->last = items[n - 1];
	free(lv);
	*out = s;
	return 0;
oom_lv:
	for (size_t k = 0; k < nl && lv[k].node; k++)
		node_free(s, lv[k].node, 0);
	free(lv);
oom:
	recon_set_free_(s);
	return pith_err_set(err, PITH_ENOMEM, "recon: out of memory");
}

/* ---- order statistics ------------------------------------------------- */

int recon_set_each(const recon_set_t *s, int (*fn)(void *arg, const recon_item_t *it), void *arg)
{
	for (const leaf_t *l = s->count ? s->first : NULL; l; l = l->next)
		for (uint32_t i = 0; i < l->n; i++) {
			int rc = fn(arg, &l->it[i]);
			if (rc)
				return rc;
		}
	return 0;
}

int recon_set_item_at(const recon_set_t *s, size_t rank, recon_item_t *out)
{
	if (rank >= s->count)
		return PITH_ENOTFOUND;
	const leaf_t *l;
	uint32_t pos;
	rset_seek(s, rank, &l, &pos, NULL);
	*out = l->it[pos];
	return 0;
}

/* Adds to acc the sum of entries [0, i) of a node whose entries sum to
 * total, summing whichever side of i is shorter. */
static void inner_left_sum(const inner_t *in, uint32_t i, const sum256_t *total,
			   sum256_t *acc)
{
	if (i <= in->n / 2) {
		for (uint32_t j = 0; j < i; j++)
			sum256_add(acc, &in->sum[j]);
	} else {
		sum256_add(acc, total);
		for (uint32_t j = i; j < in->n; j++)
			sum256_sub(acc, &in->sum[j]);
	}
}

static void leaf_left_sum(const leaf_t *l, uint32_t i, const sum256_t *total, sum256_t *acc)
{
	if (i <= l->n / 2) {
		for (uint32_t j = 0; j < i; j++)
			sum256_add_id(acc, l->it[j].id);
	} else {
		sum256_add(acc, total);
		for (uint32_t j = i; j < l->n; j++)
			sum256_sub_id(acc, l->it[j].id);
	}
}

void rset_seek(const recon_set_t *s, size_t rank, const leaf_t **leaf, uint32_t *pos,
	       sum256_t *sum)
{
	if (sum)
		sum256_zero(sum);
	if (rank >= s->count) {
		if (sum)
			*sum = s->total;
		*leaf = NULL;
		*pos = 0;
		return;
	}
	const void *node = s->root;
	sum256_t total = s->total;
	uint64_t r = rank;
	for (int h = s->height; h > 0; h--) {
		const inner_t *in = node;
		uint32_t i = 0;
		while (i + 1 < in->n && r >= in->cnt[i]) {
			r -= in->cnt[i];
			i++;
		}
		if (sum) {
			inner_left_sum(in, i, &total, sum);
			total = in->sum[i];
		}
		node = in->child[i];
	}
	*leaf = node;
	*pos = (uint32_t)r;
	if (sum)
		leaf_left_sum(node, (uint32_t)r, &total, sum);
}

void rset_locate(const recon_set_t *s, uint64_t ts, const uint8_t *id, size_t *rank,
		 sum256_t *sum)
{
	sum256_zero(sum);
	const void *node = s->root;
	sum256_t total = s->total;
	uint64_t r = 0;
	for (int h = s->height; h > 0; h--) {
		const inner_t *in = node;
		uint32_t i = inner_route(in, ts, id);
		for (uint32_t j = 0; j < i; j++)
			r += in->cnt[j];
		inner_left_sum(in, i, &total, sum);
		total = in->sum[i];
		node = in->child[i];
	}
	const leaf_t *l = node;
	uint32_t pos = leaf_lower(l, ts, id);
	leaf_left_sum(l, pos, &total, sum);
	*rank = (size_t)(r + pos);
}
