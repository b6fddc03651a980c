/* The state root (proto/stateroot.h, docs/state-root.md): the tree after
 * random changes against the tree built from scratch, proofs and their
 * tampering, the descent between two trees, the signed root document,
 * and the conformance corpus in tests/conformance/state-root/.
 *
 *   test_stateroot                   run the cases
 *   test_stateroot --write-documents FILE
 *                                    write the corpus's signed documents
 *                                    (deterministic: a fixed seed key) */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"
#include "sr_leafset.h"
#include "stateroot.h"
#include "test_util.h"

#ifndef PITH_CONFORMANCE
#define PITH_CONFORMANCE "tests/conformance"
#endif

static pith_sr_leaf_t *scratch_leaves(const sr_leafset_t *ls, size_t *n)
{
	pith_sr_leaf_t *l = malloc((ls->present + 1) * sizeof(*l));
	*n = l ? sr_leafset_collect(ls, l) : 0;
	return l;
}

/* The root of the present leaves, from scratch (pith_sr_build) and from
 * the leaves alone (pith_sr_hash_sorted): both must be want. */
static int root_matches(const sr_leafset_t *ls, const uint8_t want[32], unsigned bucket)
{
	size_t n;
	pith_sr_leaf_t *l = scratch_leaves(ls, &n);
	uint8_t (*keys)[PITH_SR_KEY_BYTES] = malloc((n + 1) * PITH_SR_KEY_BYTES);
	pith_sr_t *t = pith_sr_new(bucket, sr_leafset_list, (void *)ls);
	uint8_t a[32], b[32];
	int ok = l && keys && t && !pith_sr_build(t, l, n, NULL);
	if (ok) {
		for (size_t i = 0; i < n; i++)
			pith_sr_key(l[i].pith, keys[i]);
		ok = !pith_sr_root(t, a);
		pith_sr_hash_sorted(l, (const uint8_t (*)[PITH_SR_KEY_BYTES])keys, n, b);
		ok = ok && !memcmp(a, want, 32) && !memcmp(b, want, 32) && pith_sr_count(t) == n;
	}
	pith_sr_free(t);
	free(keys);
	free(l);
	return ok;
}

TEST(random_changes_match_rebuild,
     "after random inserts, updates and deletes (80 seeds, buckets 1 to 16) the root is the one built from scratch")
{
	static const unsigned buckets[] = {1, 2, 3, 4, 16};
	for (uint64_t seed = 1; seed <= 80; seed++) {
		sr_leafset_t ls;
		unsigned bucket = buckets[seed % 5];
		size_t universe = 40 + (size_t)(seed * 37 % 400);
		CHECK(!sr_leafset_init(&ls, universe, seed));
		pith_sr_t *t = pith_sr_new(bucket, sr_leafset_list, &ls);
		uint64_t rs = seed * 1000003;
		int bad = 0;
		for (int op = 0; op < 1500 && !bad; op++) {
			size_t i = sr_rand(&rs) % ls.n;
			sr_entry_t *e = &ls.e[i];
			int rc;
			if (!e->present) {
				sr_leafset_set(&ls, i, 1);
				rc = pith_sr_insert(t, e->leaf.pith);
			} else if (sr_rand(&rs) & 1) {
				sr_rand_bytes(&rs, e->leaf.state, 32);
				rc = pith_sr_update(t, e->leaf.pith);
			} else {
				sr_leafset_set(&ls, i, 0);
				rc = pith_sr_delete(t, e->leaf.pith);
			}
			if (rc) {
				test_fail_(__FILE__, __LINE__, "seed %llu op %d: %s", (unsigned long long)seed,
					   op, pith_err_name(rc));
				bad = 1;
			}
			if (pith_sr_count(t) != ls.present)
				bad = 1;
			if (op % 7 == 0 || op == 1499) {
				uint8_t r[32];
				if (pith_sr_root(t, r) || !root_matches(&ls, r, bucket)) {
					test_fail_(__FILE__, __LINE__, "seed %llu op %d: root differs from a rebuild",
						   (unsigned long long)seed, op);
					bad = 1;
				}
			}
		}
		CHECK(!bad);
		pith_sr_free(t);
		sr_leafset_free(&ls);
	}
}

TEST(upserts_match_rebuild,
     "after random upserts (new or changed records, not told which), some in bursts between flushes, and deletes, the root is the one built from scratch")
{
	static const unsigned buckets[] = {1, 2, 4, 8, 16};
	for (uint64_t seed = 1; seed <= 60; seed++) {
		sr_leafset_t ls;
		unsigned bucket = buckets[seed % 5];
		size_t universe = 40 + (size_t)(seed * 53 % 600);
		CHECK(!sr_leafset_init(&ls, universe, seed + 500));
		pith_sr_t *t = pith_sr_new(bucket, sr_leafset_list, &ls);
		uint64_t rs = seed * 7919;
		int bad = 0;
		/* every 5th seed starts from a build over a third of them */
		if (seed % 5 == 0) {
			for (size_t i = 0; i < ls.n; i += 3)
				sr_leafset_set(&ls, i, 1);
			size_t n;
			pith_sr_leaf_t *l = scratch_leaves(&ls, &n);
			CHECK(l && !pith_sr_build(t, l, n, NULL));
			free(l);
		}
		unsigned flush_every = 1 + (unsigned)(seed % 4) * 60; /* bursts of 1 to 181 */
		for (unsigned op = 0; op < 1200 && !bad; op++) {
			size_t i = sr_rand(&rs) % ls.n;
			sr_entry_t *e = &ls.e[i];
			int rc;
			if (e->present && sr_rand(&rs) % 8 == 0) {
				rc = pith_sr_flush(t); /* before the leaf goes */
				if (rc)
					test_fail_(__FILE__, __LINE__, "flush %s", pith_err_name(rc));
				sr_leafset_set(&ls, i, 0);
				rc = pith_sr_delete(t, e->leaf.pith);
			} else {
				if (e->present)
					sr_rand_bytes(&rs, e->leaf.state, 32);
				sr_leafset_set(&ls, i, 1);
				rc = pith_sr_upsert(t, e->leaf.pith);
			}
			if (rc) {
				test_fail_(__FILE__, __LINE__, "seed %llu op %u (%s): %s", (unsigned long long)seed,
					   op, e->present ? "upsert" : "delete", pith_err_name(rc));
				bad = 1;
			}
			if (op % flush_every == 0 || op == 1199) {
				uint8_t r[32];
				if (pith_sr_root(t, r) || pith_sr_count(t) != ls.present ||
				    !root_matches(&ls, r, bucket)) {
					test_fail_(__FILE__, __LINE__, "seed %llu op %u: root differs from a rebuild",
						   (unsigned long long)seed, op);
					bad = 1;
				}
			}
		}
		CHECK(!bad);
		pith_sr_free(t);
		sr_leafset_free(&ls);
	}
}

/* A list callback that must not be called (counts the calls). */
static int no_list(void *ctx, const uint8_t key[PITH_SR_KEY_BYTES], unsigned plen,
		   pith_sr_leaf_t *out, size_t cap, size_t *n)
{
	(void)key, (void)plen, (void)out, (void)cap;
	(*(int *)ctx)++;
	*n = 0;
	return PITH_EIO;
}

TEST(told_leaves_match_rebuild,
     "after random upserts of told leaves (pith_sr_upsert_leaf, no listing) from a build or empty, the root is the one built from scratch")
{
	static const unsigned buckets[] = {1, 2, 4, 8, 16};
	for (uint64_t seed = 1; seed <= 40; seed++) {
		sr_leafset_t ls;
		unsigned bucket = buckets[seed % 5];
		int calls = 0;
		CHECK(!sr_leafset_init(&ls, 40 + (size_t)(seed * 61 % 700), seed + 900));
		pith_sr_t *t = pith_sr_new(bucket, no_list, &calls);
		uint64_t rs = seed * 104729;
		int bad = 0;
		if (seed % 2 == 0) {
			for (size_t i = 0; i < ls.n; i += 2)
				sr_leafset_set(&ls, i, 1);
			size_t n;
			pith_sr_leaf_t *l = scratch_leaves(&ls, &n);
			CHECK(l && !pith_sr_build(t, l, n, NULL));
			free(l);
		}
		for (unsigned op = 0; op < 1000 && !bad; op++) {
			sr_entry_t *e = &ls.e[sr_rand(&rs) % ls.n];
			if (e->present)
				sr_rand_bytes(&rs, e->leaf.state, 32);
			sr_leafset_set(&ls, (size_t)(e - ls.e), 1);
			if (pith_sr_upsert_leaf(t, &e->leaf) || pith_sr_count(t) != ls.present)
				bad = 1;
			if (op % (1 + seed % 3 * 50) == 0 || op == 999) {
				uint8_t r[32];
				if (pith_sr_root(t, r) || !root_matches(&ls, r, bucket))
					bad = 1;
			}
		}
		if (bad)
			test_fail_(__FILE__, __LINE__, "seed %llu: root differs from a rebuild",
				   (unsigned long long)seed);
		CHECK(!bad && calls == 0);
		pith_sr_free(t);
		sr_leafset_free(&ls);
	}
}

TEST(errors_leave_tree_unchanged, "a change the leaves do not show is found (by the change or the flush); refused input leaves the root")
{
	sr_leafset_t ls;
	CHECK(!sr_leafset_init(&ls, 200, 77));
	for (size_t i = 0; i < ls.n; i += 2)
		sr_leafset_set(&ls, i, 1);
	size_t n;
	pith_sr_leaf_t *l = scratch_leaves(&ls, &n);
	pith_sr_t *t = pith_sr_new(4, sr_leafset_list, &ls);
	CHECK(!pith_sr_build(t, l, n, NULL));
	uint8_t before[32], after[32];
	CHECK(!pith_sr_root(t, before));
	/* told of an insert the leaves do not show: found at once or by the flush */
	CHECK(pith_sr_insert(t, ls.e[1].leaf.pith) != 0 || pith_sr_root(t, after) == PITH_EMISMATCH);
	CHECK(!pith_sr_build(t, l, n, NULL) && !pith_sr_root(t, after) && !memcmp(before, after, 32));
	/* told of a delete of a leaf still there */
	CHECK(pith_sr_delete(t, ls.e[0].leaf.pith) != 0 || pith_sr_root(t, after) == PITH_EMISMATCH);
	CHECK(!pith_sr_build(t, l, n, NULL));
	/* an insert of a key the tree has */
	CHECK(pith_sr_insert(t, ls.e[0].leaf.pith) != 0 || pith_sr_root(t, after) == PITH_EMISMATCH);
	CHECK(!pith_sr_build(t, l, n, NULL));
	/* refused outright: the tree stays */
	CHECK(pith_sr_update(t, "pith:2024:AAAA") == PITH_EINVAL);
	CHECK(!pith_sr_root(t, after) && !memcmp(before, after, 32));
	CHECK(pith_sr_count(t) == n);
	/* out of order: refused */
	pith_sr_leaf_t two[2] = {l[1], l[0]};
	CHECK(pith_sr_build(t, two, 2, NULL) == PITH_EINVAL);
	CHECK(!pith_sr_root(t, after));
	CHECK(!memcmp(before, after, 32));
	pith_sr_free(t);
	free(l);
	sr_leafset_free(&ls);
}

/* A proof through JSON and back. */
static int proof_roundtrip(const pith_sr_proof_t *p, pith_sr_proof_t *q)
{
	pith_buf_t b = PITH_BUF_INIT;
	int rc = pith_sr_proof_json(p, &b);
	if (!rc)
		rc = pith_sr_proof_parse(b.data, b.len, q, NULL);
	pith_buf_release(&b);
	return rc;
}

static int proof_ok(const pith_sr_proof_t *p, const uint8_t root[32], int *present)
{
	return pith_sr_proof_check(p, root, present, NULL) == 0;
}

TEST(proofs_verify_and_tampered_fail,
     "proofs of presence and absence verify; a flipped bit, wrong sibling, truncated path or swapped leaf fails")
{
	for (unsigned bucket = 1; bucket <= 16; bucket *= 4) {
		sr_leafset_t ls;
		CHECK(!sr_leafset_init(&ls, 600, 900 + bucket));
		for (size_t i = 0; i < ls.n; i++)
			sr_leafset_set(&ls, i, i % 3 != 0);
		size_t n;
		pith_sr_leaf_t *l = scratch_leaves(&ls, &n);
		pith_sr_t *t = pith_sr_new(bucket, sr_leafset_list, &ls);
		CHECK(!pith_sr_build(t, l, n, NULL));
		uint8_t root[32];
		CHECK(!pith_sr_root(t, root));
		uint64_t rs = bucket;
		for (size_t i = 0; i < ls.n; i++) {
			pith_sr_proof_t p, q, x;
			int present = -1;
			CHECK(!pith_sr_prove(t, ls.e[i].leaf.pith, &p));
			CHECK(!proof_roundtrip(&p, &q));
			CHECK(proof_ok(&q, root, &present));
			CHECK(present == ls.e[i].present);
			if (ls.e[i].present)
				CHECK(!memcmp(q.leaf.state, ls.e[i].leaf.state, 32));
			CHECK(q.n == p.n && !memcmp(q.path, p.path, p.n * sizeof(p.path[0])));
			/* a flipped bit anywhere in a sibling or the leaf's state */
			x = p;
			if (x.n) {
				unsigned s = (unsigned)(sr_rand(&rs) % x.n);
				x.path[s].sib[sr_rand(&rs) % 32] ^= (uint8_t)(1u << (sr_rand(&rs) % 8));
				CHECK(!proof_ok(&x, root, &present));
				/* a wrong sibling: another step's */
				x = p;
				if (x.n >= 2) {
					memcpy(x.path[0].sib, x.path[1].sib, 32);
					CHECK(!proof_ok(&x, root, &present));
				}
				/* a truncated path, either end */
				x = p;
				x.n--;
				CHECK(!proof_ok(&x, root, &present));
				x = p;
				memmove(x.path, x.path + 1, (x.n - 1) * sizeof(x.path[0]));
				x.n--;
				CHECK(!proof_ok(&x, root, &present));
				/* a step's bit changed */
				x = p;
				x.path[x.n - 1].bit ^= 1;
				CHECK(!proof_ok(&x, root, &present) || present != ls.e[i].present);
			}
			x = p;
			x.leaf.state[sr_rand(&rs) % 32] ^= 0x10;
			CHECK(!proof_ok(&x, root, &present));
			/* a leaf swapped: another present record's leaf and state */
			size_t j = (i + 1 + sr_rand(&rs) % (ls.n - 1)) % ls.n;
			if (ls.e[j].present && strcmp(ls.e[j].leaf.pith, p.leaf.pith)) {
				x = p;
				x.leaf = ls.e[j].leaf;
				CHECK(!proof_ok(&x, root, &present));
				/* another record's whole proof, asked for this one: if
				 * this one is present it must not verify, and never as
				 * present */
				pith_sr_proof_t o;
				CHECK(!pith_sr_prove(t, ls.e[j].leaf.pith, &o));
				memcpy(o.asked, ls.e[i].leaf.pith, sizeof(o.asked));
				int ok = proof_ok(&o, root, &present);
				CHECK(!(ok && present));
				if (ls.e[i].present)
					CHECK(!ok);
			}
			/* against another root */
			uint8_t other[32];
			memcpy(other, root, 32);
			other[5] ^= 1;
			CHECK(!proof_ok(&p, other, &present));
		}
		pith_sr_free(t);
		free(l);
		sr_leafset_free(&ls);
	}
	/* the empty tree: absence with no leaf and no path */
	sr_leafset_t ls;
	CHECK(!sr_leafset_init(&ls, 1, 5));
	pith_sr_t *t = pith_sr_new(0, sr_leafset_list, &ls);
	pith_sr_proof_t p, q;
	uint8_t root[32];
	int present = -1;
	CHECK(!pith_sr_root(t, root));
	CHECK(!pith_sr_prove(t, ls.e[0].leaf.pith, &p));
	CHECK(!proof_roundtrip(&p, &q));
	CHECK(proof_ok(&q, root, &present) && present == 0 && !q.has_leaf);
	root[0] ^= 1;
	CHECK(!proof_ok(&q, root, &present));
	pith_sr_free(t);
	sr_leafset_free(&ls);
}

/* ---- the descent ---- */

typedef struct two {
	pith_sr_t *t[2];
	int json; /* answers through JSON and back */
	uint8_t (*found)[PITH_SR_KEY_BYTES];
	size_t nfound, cap;
} two_t;

static int fetch_two(void *ctx, int side, const uint8_t prefix[PITH_SR_KEY_BYTES], unsigned plen,
		     pith_sr_range_t *out)
{
	two_t *w = ctx;
	int rc = pith_sr_range(w->t[side], prefix, plen, out);
	if (rc || !w->json)
		return rc;
	pith_buf_t b = PITH_BUF_INIT;
	rc = pith_sr_range_json(out, &b);
	if (!rc)
		rc = pith_sr_range_parse(b.data, b.len, out, NULL);
	pith_buf_release(&b);
	return rc;
}

static int found_one(void *ctx, const char *pith, const uint8_t *s0, const uint8_t *s1)
{
	two_t *w = ctx;
	(void)s0;
	(void)s1;
	if (w->nfound == w->cap)
		return PITH_ETOOBIG;
	pith_sr_key(pith, w->found[w->nfound++]);
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, PITH_SR_KEY_BYTES);
}

static unsigned log2_ceil(size_t n)
{
	unsigned l = 0;
	while (((size_t)1 << l) < n)
		l++;
	return l;
}

/* Two trees over n leaves, side 1 with k of them changed (updated,
 * missing or extra); the descent must name exactly those k in at most
 * 2 k log2(n) requests. */
static void descent_case(size_t n, size_t k, uint64_t seed, unsigned bucket, int json)
{
	sr_leafset_t a, b;
	CHECK(!sr_leafset_init(&a, n + k, seed));
	CHECK(!sr_leafset_init(&b, n + k, seed));
	uint64_t rs = seed ^ 0x5eed;
	/* n + k random keys: k of them, at random, absent from side 0 */
	for (size_t i = 0; i < a.n; i++)
		sr_leafset_set(&a, i, 1);
	size_t absent = 0;
	while (absent < k) {
		size_t i = sr_rand(&rs) % a.n;
		if (a.e[i].present) {
			sr_leafset_set(&a, i, 0);
			absent++;
		}
	}
	for (size_t i = 0; i < a.n; i++)
		sr_leafset_set(&b, i, a.e[i].present);
	uint8_t (*want)[PITH_SR_KEY_BYTES] = malloc((k + 1) * PITH_SR_KEY_BYTES);
	for (size_t d = 0; d < k;) {
		size_t i = sr_rand(&rs) % b.n;
		int dup = 0;
		for (size_t j = 0; j < d; j++)
			dup |= !memcmp(want[j], b.e[i].key, PITH_SR_KEY_BYTES);
		if (dup)
			continue;
		unsigned what = (unsigned)(sr_rand(&rs) % 3);
		if (!b.e[i].present)
			sr_leafset_set(&b, i, 1); /* extra on side 1 */
		else if (what == 0)
			sr_leafset_set(&b, i, 0); /* missing on side 1 */
		else
			b.e[i].leaf.state[0] ^= 0xff; /* another state */
		memcpy(want[d++], b.e[i].key, PITH_SR_KEY_BYTES);
	}
	size_t na, nb;
	pith_sr_leaf_t *la = scratch_leaves(&a, &na), *lb = scratch_leaves(&b, &nb);
	two_t w = {{pith_sr_new(bucket, sr_leafset_list, &a), pith_sr_new(bucket, sr_leafset_list, &b)},
		   json, malloc((k + 1) * PITH_SR_KEY_BYTES), 0, k + 1};
	CHECK(!pith_sr_build(w.t[0], la, na, NULL) && !pith_sr_build(w.t[1], lb, nb, NULL));
	pith_sr_diff_stats_t st;
	pith_err_t err = {0};
	uint64_t bound = 2 * (uint64_t)k * log2_ceil(na > nb ? na : nb);
	int rc = pith_sr_diff(fetch_two, found_one, &w, 0, &st, &err);
	if (rc)
		test_fail_(__FILE__, __LINE__, "descent: %s", err.msg);
	CHECK_INT_EQ(w.nfound, k);
	qsort(want, k, PITH_SR_KEY_BYTES, key_cmp);
	qsort(w.found, w.nfound, PITH_SR_KEY_BYTES, key_cmp);
	CHECK(w.nfound == k && !memcmp(want, w.found, k * PITH_SR_KEY_BYTES));
	if (st.requests > bound)
		test_fail_(__FILE__, __LINE__, "n %zu k %zu: %llu requests, more than 2 k log2 n = %llu", n, k,
			   (unsigned long long)st.requests, (unsigned long long)bound);
	printf("# descent n %zu k %zu bucket %u: %llu requests (bound %llu)\n", n, k, bucket,
	       (unsigned long long)st.requests, (unsigned long long)bound);
	pith_sr_free(w.t[0]);
	pith_sr_free(w.t[1]);
	free(w.found);
	free(want);
	free(la);
	free(lb);
	sr_leafset_free(&a);
	sr_leafset_free(&b);
}

TEST(descent_finds_exactly_the_differences,
     "two trees with k differing leaves: the descent names exactly those k in at most 2 k log2 N requests")
{
	descent_case(20000, 1, 1, 16, 1);
	descent_case(20000, 3, 2, 16, 1);
	descent_case(20000, 10, 3, 16, 1);
	descent_case(20000, 100, 4, 16, 0);
	descent_case(5000, 1000, 5, 16, 0);
	descent_case(300, 3, 6, 1, 1);
	descent_case(300, 50, 7, 4, 1);
	descent_case(40, 40, 8, 16, 1);
}

TEST(descent_disjoint_trees, "two trees with no leaf in common: every leaf of both is named")
{
	sr_leafset_t a, b;
	CHECK(!sr_leafset_init(&a, 500, 31));
	CHECK(!sr_leafset_init(&b, 500, 32));
	for (size_t i = 0; i < 500; i++) {
		sr_leafset_set(&a, i, 1);
		sr_leafset_set(&b, i, 1);
	}
	size_t na, nb;
	pith_sr_leaf_t *la = scratch_leaves(&a, &na), *lb = scratch_leaves(&b, &nb);
	two_t w = {{pith_sr_new(0, sr_leafset_list, &a), pith_sr_new(0, sr_leafset_list, &b)}, 1,
		   malloc(1001 * PITH_SR_KEY_BYTES), 0, 1001};
	CHECK(!pith_sr_build(w.t[0], la, na, NULL) && !pith_sr_build(w.t[1], lb, nb, NULL));
	pith_sr_diff_stats_t st;
	CHECK(!pith_sr_diff(fetch_two, found_one, &w, 0, &st, NULL));
	CHECK_INT_EQ(w.nfound, 1000);
	/* and against an empty tree */
	pith_sr_free(w.t[1]);
	sr_leafset_t e;
	CHECK(!sr_leafset_init(&e, 0, 1));
	w.t[1] = pith_sr_new(0, sr_leafset_list, &e);
	w.nfound = 0;
	CHECK(!pith_sr_diff(fetch_two, found_one, &w, 0, &st, NULL));
	CHECK_INT_EQ(w.nfound, 500);
	/* a request limit is kept */
	w.nfound = 0;
	CHECK(pith_sr_diff(fetch_two, found_one, &w, 5, &st, NULL) == PITH_ETOOBIG);
	pith_sr_free(w.t[0]);
	pith_sr_free(w.t[1]);
	free(w.found);
	free(la);
	free(lb);
	sr_leafset_free(&a);
	sr_leafset_free(&b);
	sr_leafset_free(&e);
}

TEST(range_answers_checked, "a range answer that does not hash up, or lies about its prefix, is refused")
{
	sr_leafset_t ls;
	CHECK(!sr_leafset_init(&ls, 300, 44));
	for (size_t i = 0; i < ls.n; i++)
		sr_leafset_set(&ls, i, 1);
	size_t n;
	pith_sr_leaf_t *l = scratch_leaves(&ls, &n);
	pith_sr_t *t = pith_sr_new(0, sr_leafset_list, &ls);
	CHECK(!pith_sr_build(t, l, n, NULL));
	pith_sr_range_t r, x;
	uint8_t pre[PITH_SR_KEY_BYTES];
	unsigned plen;
	CHECK(!pith_sr_bits_parse("", 0, pre, &plen));
	CHECK(!pith_sr_range(t, pre, plen, &r) && !pith_sr_range_check(&r, NULL));
	CHECK(r.node.count == n && !memcmp(r.node.hash, r.root, 32) && r.has_children);
	x = r;
	x.child[0].hash[3] ^= 1;
	CHECK(pith_sr_range_check(&x, NULL));
	x = r;
	x.child[1].count++;
	CHECK(pith_sr_range_check(&x, NULL));
	/* a deep prefix inside a bucket: listed leaves, which must hash up */
	CHECK(!pith_sr_bits_parse("0110", 4, pre, &plen));
	memcpy(pre, ls.e[7].key, sizeof(pre));
	CHECK(!pith_sr_range(t, pre, 9, &r) && !pith_sr_range_check(&r, NULL));
	CHECK(r.node.count >= 1 && r.nleaves == r.node.count);
	x = r;
	x.leaves[0].state[0] ^= 1;
	CHECK(pith_sr_range_check(&x, NULL));
	x = r;
	x.prefix[0] ^= 0x80; /* another prefix than the node's */
	CHECK(pith_sr_range_check(&x, NULL));
	/* JSON round trip, and junk */
	pith_buf_t b = PITH_BUF_INIT;
	CHECK(!pith_sr_range_json(&r, &b) && !pith_sr_range_parse(b.data, b.len, &x, NULL));
	CHECK(x.node.count == r.node.count && !memcmp(x.node.hash, r.node.hash, 32));
	CHECK(pith_sr_range_parse((const uint8_t *)"{}", 2, &x, NULL) == PITH_EINVAL);
	CHECK(pith_sr_bits_parse("012", 3, pre, &plen) == PITH_EINVAL);
	pith_buf_release(&b);
	pith_sr_free(t);
	free(l);
	sr_leafset_free(&ls);
}

/* ---- the signed root document ---- */

static void fixed_key(pith_key_t *k, uint8_t sk[64], uint8_t seedbyte)
{
	uint8_t seed[32];
	memset(seed, seedbyte, 32);
	memset(k, 0, sizeof(*k));
	crypto_sign_seed_keypair(k->pk, sk, seed);
	snprintf(k->key_id, sizeof(k->key_id), "mirror-test-%u", seedbyte);
	pith_key_fingerprint(k->pk, k->fp);
	k->rotates_at_us = PITH_NO_ROTATION;
}

TEST(signed_document_verifies, "a signed root document verifies; a tampered one or another key's fails")
{
	pith_key_t k, other;
	uint8_t sk[64], osk[64];
	fixed_key(&k, sk, 7);
	fixed_key(&other, osk, 8);
	pith_sr_doc_t d = {0}, got;
	memset(d.root, 0xab, 32);
	d.count = 1234567;
	snprintf(d.cursor, sizeof(d.cursor), "987654");
	snprintf(d.signed_at, sizeof(d.signed_at), "2026-12-07T08:30:00.123456Z");
	pith_buf_t b = PITH_BUF_INIT;
	CHECK(!pith_sr_doc_sign(&d, &k, sk, &b, NULL));
	CHECK(!pith_sr_doc_verify(b.data, b.len, &k, &got, NULL));
	CHECK(!memcmp(got.root, d.root, 32) && got.count == d.count && !strcmp(got.cursor, "987654"));
	CHECK(!memcmp(got.doc_sha256, d.doc_sha256, 32));
	CHECK(pith_sr_doc_verify(b.data, b.len, &other, &got, NULL) == PITH_EUNTRUSTED);
	/* every byte of the root hash's hex, changed, fails */
	const char *at = strstr((const char *)b.data, "\"root_sha256\":\"");
	CHECK(at != NULL);
	if (at) {
		size_t off = (size_t)(at - (const char *)b.data) + 15;
		for (size_t i = 0; i < 64; i++) {
			uint8_t save = b.data[off + i];
			b.data[off + i] = save == 'a' ? 'b' : 'a';
			CHECK(pith_sr_doc_verify(b.data, b.len, &k, &got, NULL) == PITH_EMISMATCH);
			b.data[off + i] = save;
		}
	}
	/* a re-signed change by another key, claimed as k's: bad signature */
	pith_sr_doc_t e = d;
	e.count++;
	pith_buf_t c = PITH_BUF_INIT;
	pith_key_t liar = other;
	memcpy(liar.key_id, k.key_id, sizeof(liar.key_id));
	memcpy(liar.fp, k.fp, sizeof(liar.fp));
	CHECK(!pith_sr_doc_sign(&e, &liar, osk, &c, NULL));
	CHECK(pith_sr_doc_verify(c.data, c.len, &k, &got, NULL) == PITH_EBADSIG);
	/* no cursor: null */
	pith_buf_reset(&c);
	e.cursor[0] = 0;
	CHECK(!pith_sr_doc_sign(&e, &k, sk, &c, NULL));
	CHECK(strstr((const char *)c.data, "\"feed_cursor\":null") != NULL);
	CHECK(!pith_sr_doc_verify(c.data, c.len, &k, &got, NULL) && !got.cursor[0]);
	snprintf(e.signed_at, sizeof(e.signed_at), "2026-13-07T08:30:00Z");
	CHECK(pith_sr_doc_sign(&e, &k, sk, &c, NULL) == PITH_EINVAL);
	pith_buf_release(&b);
	pith_buf_release(&c);
}

/* Each byte of text changed in turn (and cut at every length): the
 * parser must refuse or accept, never crash (run under ASan). Returns how
 * many mutants were accepted. */
static size_t mutate_all(const pith_buf_t *text, int (*parse)(const uint8_t *, size_t, void *), void *out)
{
	size_t accepted = 0;
	uint8_t *m = malloc(text->len + 1);
	for (size_t i = 0; m && i < text->len; i++) {
		memcpy(m, text->data, text->len);
		m[i] ^= (uint8_t)(1u << (i % 8));
		accepted += parse(m, text->len, out) == 0;
		accepted += parse(text->data, i, out) == 0;
	}
	free(m);
	return accepted;
}

static int parse_proof(const uint8_t *b, size_t n, void *out)
{
	return pith_sr_proof_parse(b, n, out, NULL);
}

static int parse_range(const uint8_t *b, size_t n, void *out)
{
	return pith_sr_range_parse(b, n, out, NULL);
}

static pith_key_t mut_key;

static int parse_doc(const uint8_t *b, size_t n, void *out)
{
	return pith_sr_doc_verify(b, n, &mut_key, out, NULL);
}

static void fixed_key(pith_key_t *k, uint8_t sk[64], uint8_t seedbyte);

TEST(mutated_documents_refused, "every one-bit change or cut of a proof, range answer or root document is refused or harmless")
{
	sr_leafset_t ls;
	CHECK(!sr_leafset_init(&ls, 100, 3));
	for (size_t i = 0; i < ls.n; i++)
		sr_leafset_set(&ls, i, 1);
	size_t n;
	pith_sr_leaf_t *l = scratch_leaves(&ls, &n);
	pith_sr_t *t = pith_sr_new(0, sr_leafset_list, &ls);
	CHECK(!pith_sr_build(t, l, n, NULL));
	pith_sr_proof_t *p = malloc(sizeof(*p)), *q = malloc(sizeof(*q));
	pith_sr_range_t *r = malloc(sizeof(*r)), *x = malloc(sizeof(*x));
	pith_buf_t b = PITH_BUF_INIT;
	uint8_t root[32], sk[64], pre[PITH_SR_KEY_BYTES] = {0};
	CHECK(!pith_sr_root(t, root));
	/* a proof: a mutant that parses must not verify as anything else */
	CHECK(!pith_sr_prove(t, ls.e[5].leaf.pith, p) && !pith_sr_proof_json(p, &b));
	mutate_all(&b, parse_proof, q);
	for (size_t i = 0; i < b.len; i++) {
		b.data[i] ^= (uint8_t)(1u << (i % 8));
		int present = 0;
		if (!pith_sr_proof_parse(b.data, b.len, q, NULL) && !pith_sr_proof_check(q, root, &present, NULL))
			CHECK(!present || (!strcmp(q->asked, p->asked) && !memcmp(q->leaf.state, p->leaf.state, 32)));
		b.data[i] ^= (uint8_t)(1u << (i % 8));
	}
	/* a range answer (the root's and a small one with leaves) */
	for (unsigned plen = 0; plen <= 6; plen += 6) {
		pith_buf_reset(&b);
		memcpy(pre, ls.e[9].key, sizeof(pre));
		CHECK(!pith_sr_range(t, pre, plen, r) && !pith_sr_range_json(r, &b));
		mutate_all(&b, parse_range, x);
	}
	/* a signed root document: no mutant verifies but those that change
	 * nothing signed (none: every member is hashed or is the signature) */
	pith_sr_doc_t d = {0}, got;
	fixed_key(&mut_key, sk, 9);
	memcpy(d.root, root, 32);
	d.count = n;
	snprintf(d.signed_at, sizeof(d.signed_at), "2026-12-07T09:10:00Z");
	pith_buf_reset(&b);
	CHECK(!pith_sr_doc_sign(&d, &mut_key, sk, &b, NULL));
	CHECK_INT_EQ(mutate_all(&b, parse_doc, &got), 0);
	pith_buf_release(&b);
	free(p);
	free(q);
	free(r);
	free(x);
	pith_sr_free(t);
	free(l);
	sr_leafset_free(&ls);
}

/* ---- the conformance corpus ---- */

static json_doc_t *read_json(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/state-root/%s", PITH_CONFORMANCE, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		test_fail_(__FILE__, __LINE__, "%s: cannot open", path);
		return NULL;
	}
	pith_buf_t b = PITH_BUF_INIT;
	uint8_t chunk[65536];
	size_t got;
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		pith_buf_append(&b, chunk, got);
	fclose(f);
	json_doc_t *d = NULL;
	pith_err_t err = {0};
	if (json_parse(&d, b.data, b.len, NULL, &err))
		test_fail_(__FILE__, __LINE__, "%s: %s", path, err.msg);
	pith_buf_release(&b);
	return d;
}

static void corpus_fail(void *arg, const char *name, const char *what)
{
	test_fail_(__FILE__, __LINE__, "%s: %s: %s", (const char *)arg, name, what);
}

/* A corpus file through pith_conform_check, as `pithctl conformance` runs it. */
static void corpus_file(const char *file, size_t min_cases)
{
	json_doc_t *d = read_json(file);
	size_t cases = 0, failed = 0;
	pith_err_t err = {0};
	if (d && pith_conform_check(json_doc_root(d), corpus_fail, (void *)file, &cases, &failed, &err))
		test_fail_(__FILE__, __LINE__, "%s: %s", file, err.msg);
	if (cases < min_cases)
		test_fail_(__FILE__, __LINE__, "%s: %zu cases, expected at least %zu", file, cases, min_cases);
	json_doc_free(d);
}

TEST(conformance_corpus,
     "tests/conformance/state-root/: every root, proof and signed document answers as the corpus expects")
{
	corpus_file("roots.json", 10);
	corpus_file("proofs.json", 10);
	corpus_file("documents.json", 4);
}

/* Writes documents.json: one key from a fixed seed, a valid document and
 * tampered ones. Ed25519 signatures are deterministic, so the file is the
 * same on every run. */
static int write_documents(const char *path)
{
	pith_key_t k;
	uint8_t sk[64];
	fixed_key(&k, sk, 0x57);
	uint8_t root[32];
	pith_sha256("state-root conformance", 22, root); /* any root: the document signs it */
	pith_sr_doc_t d = {0};
	memcpy(d.root, root, 32);
	d.count = 3;
	snprintf(d.cursor, sizeof(d.cursor), "42");
	snprintf(d.signed_at, sizeof(d.signed_at), "2026-12-07T09:00:00Z");
	pith_buf_t good = PITH_BUF_INIT, nul = PITH_BUF_INIT, out = PITH_BUF_INIT;
	if (pith_sr_doc_sign(&d, &k, sk, &good, NULL) || pith_buf_cstr(&good))
		return 1;
	pith_sr_doc_t e = d;
	e.cursor[0] = 0;
	pith_sr_empty_root(e.root);
	e.count = 0;
	if (pith_sr_doc_sign(&e, &k, sk, &nul, NULL) || pith_buf_cstr(&nul))
		return 1;
	char pkhex[65], roothex[65], emptyhex[65];
	pith_hex_encode(k.pk, 32, pkhex);
	pith_hex_encode(d.root, 32, roothex);
	pith_hex_encode(e.root, 32, emptyhex);
	/* tampered copies: a count changed, the hash's claim, the signature */
	char *count = strdup((char *)good.data), *sig = strdup((char *)good.data);
	char *p = strstr(count, "\"record_count\":3");
	if (p)
		p[15] = '4';
	p = strstr(sig, "\"signature_b64\":\"");
	if (p)
		p[17] = p[17] == 'A' ? 'B' : 'A';
	pith_buf_puts(&out, "{\n\"kind\": \"state_root_document\",\n"
			    "\"description\": \"signed root documents (docs/state-root.md, section 5) verified against "
			    "the key given; null: refused\",\n\"cases\": [\n");
	const char *names[] = {"valid", "valid-empty-tree-no-cursor", "count-changed", "signature-changed"};
	const char *texts[] = {(char *)good.data, (char *)nul.data, count, sig};
	for (int i = 0; i < 4; i++) {
		pith_buf_printf(&out, "{\"name\": \"%s\", \"rule\": \"SR-DOC\", \"key_id\": \"%s\", "
				      "\"public_key_hex\": \"%s\",\n \"expect\": ", names[i], k.key_id, pkhex);
		if (i == 0)
			pith_buf_printf(&out, "{\"feed_cursor\": \"42\", \"record_count\": 3, \"root_sha256\": \"%s\"}",
					roothex);
		else if (i == 1)
			pith_buf_printf(&out, "{\"feed_cursor\": null, \"record_count\": 0, \"root_sha256\": \"%s\"}",
					emptyhex);
		else
			pith_buf_puts(&out, "null");
		pith_buf_puts(&out, ",\n \"text\": ");
		json_write_string(&out, texts[i], strlen(texts[i]));
		pith_buf_puts(&out, i < 3 ? "},\n" : "}\n");
	}
	pith_buf_puts(&out, "]\n}\n");
	FILE *f = fopen(path, "wb");
	int rc = !f || fwrite(out.data, 1, out.len, f) != out.len;
	if (f && fclose(f))
		rc = 1;
	free(count);
	free(sig);
	pith_buf_release(&good);
	pith_buf_release(&nul);
	pith_buf_release(&out);
	return rc;
}

int main(int argc, char **argv)
{
	if (sodium_init() < 0)
		return 1;
	if (argc == 3 && !strcmp(argv[1], "--write-documents"))
		return write_documents(argv[2]);
	RUN(random_changes_match_rebuild);
	RUN(upserts_match_rebuild);
	RUN(told_leaves_match_rebuild);
	RUN(errors_leave_tree_unchanged);
	RUN(proofs_verify_and_tampered_fail);
	RUN(descent_finds_exactly_the_differences);
	RUN(descent_disjoint_trees);
	RUN(range_answers_checked);
	RUN(signed_document_verifies);
	RUN(mutated_documents_refused);
	RUN(conformance_corpus);
	return test_done();
}
