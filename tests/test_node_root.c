/* The node's state root (node/daemon/node_root.h, docs/state-root.md "In
 * pithd") over a real store: after any sequence of commits (events of new
 * and known records, in batches of every size, a bundle) the root the
 * node keeps by following the change log equals the root rebuilt from
 * scratch from the records, and each leaf's state is the state.json's
 * state_sha256; /api/proof's answer verifies against the signed root and
 * a tampered one fails; /api/root/range answers check; the history keeps
 * the last N. */
#include <sodium.h>

#include "node_root.h"
#include "test_store_util.h"

/* The root from scratch: every record's leaf, sorted, hashed. */
static int scratch_root(store_t *st, uint8_t out[32], size_t *n)
{
	pith_sr_leaf_t *l = NULL;
	pith_err_t err = {0};
	int rc = store_sr_leaves(st, &l, n, &err);
	uint8_t (*k)[PITH_SR_KEY_BYTES] = rc ? NULL : malloc((*n + 1) * PITH_SR_KEY_BYTES);
	if (!rc && !k)
		rc = PITH_ENOMEM;
	for (size_t i = 0; !rc && i < *n; i++)
		pith_sr_key(l[i].pith, k[i]);
	if (!rc)
		pith_sr_hash_sorted(l, (const uint8_t (*)[PITH_SR_KEY_BYTES])k, *n, out);
	free(k);
	free(l);
	return rc;
}

/* Every leaf's state is what state.json says. */
static int leaves_are_states(store_t *st)
{
	pith_sr_leaf_t *l = NULL;
	size_t n = 0;
	pith_err_t err = {0};
	if (store_sr_leaves(st, &l, &n, &err))
		return 0;
	int ok = 1;
	for (size_t i = 0; i < n && ok; i++) {
		pith_buf_t s = PITH_BUF_INIT;
		state_of(st, l[i].pith, &s);
		json_doc_t *d = parse(s.data, s.len);
		const char *h = d ? json_get_str(json_doc_root(d), "state_sha256") : NULL;
		char hex[65];
		pith_hex_encode(l[i].state, 32, hex);
		ok = h && !strcmp(h, hex);
		json_doc_free(d);
		pith_buf_release(&s);
	}
	free(l);
	return ok;
}

static int commit_range(store_t *st, const evset_t *s, size_t lo, size_t hi)
{
	store_batch_t *b = store_batch_new(st);
	pith_err_t err = {0};
	int rc = b ? 0 : PITH_ENOMEM;
	for (size_t i = lo; !rc && i < hi; i++) {
		pith_event_t *ev = NULL;
		rc = pith_event_parse(s->b[i].data, s->b[i].len, trust, &ev, NULL, &err);
		if (!rc && (rc = store_batch_add_event(b, ev, NULL, &err)) > 0)
			rc = 0;
	}
	if (!rc)
		rc = store_batch_commit(b, NULL, &err);
	if (rc)
		fprintf(stderr, "commit: %s\n", err.msg);
	store_batch_free(b);
	return rc;
}

static uint8_t pk[32], sk[64];

TEST(root_follows_changes, "after random batches of commits (new records, more events of known ones, a bundle) the kept root equals the root rebuilt from the records, and its leaves are the states")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	evset_t s;
	gen_set(&s, 60); /* 60 records, 11 events each */
	/* events in an order that mixes records: record i's events at
	 * positions i, i + 60, ...; record_created first for each */
	size_t *ord = malloc(s.n * sizeof(*ord)), k = 0;
	for (size_t e = 0; e < 11; e++)
		for (size_t r = 0; r < 60; r++)
			ord[k++] = r * 11 + e;
	evset_t m = s;
	m.b = malloc(s.n * sizeof(*m.b));
	for (size_t i = 0; i < s.n; i++)
		m.b[i] = s.b[ord[i]];
	noderoot_opts_t o = {.interval_s = 1, .history = 4, .bucket = 2};
	pith_err_t err = {0};
	noderoot_t *r = noderoot_new(st, pk, sk, &o, &err);
	CHECK(r != NULL);
	uint64_t rs = 99;
	int bad = 0;
	for (size_t i = 0; i < m.n && !bad;) {
		size_t step = 1 + tg_rand(&rs) % 40;
		if (i + step > m.n)
			step = m.n - i;
		CHECK(!commit_range(st, &m, i, i + step));
		i += step;
		/* sometimes several commits before the root is read */
		if (tg_rand(&rs) % 3 == 0 && i < m.n)
			continue;
		uint8_t a[32], b[32];
		uint64_t count, cursor;
		size_t n;
		if (noderoot_current(r, a, &count, &cursor, &err) || scratch_root(st, b, &n) ||
		    memcmp(a, b, 32) || count != n || cursor != store_changes_last(st)) {
			test_fail_(__FILE__, __LINE__, "after %zu events: the kept root differs from a rebuild",
				   i);
			bad = 1;
		}
	}
	CHECK(!bad);
	/* a bundle changes AR7B's state */
	store_bundle_outcome_t bo;
	CHECK(!put_bundle(st, &bundle_bytes, &bo, NULL));
	uint8_t a[32], b[32];
	size_t n;
	CHECK(!noderoot_current(r, a, NULL, NULL, &err) && !scratch_root(st, b, &n) && !memcmp(a, b, 32));
	CHECK(n == 61);
	CHECK(leaves_are_states(st));
	noderoot_stats_t ns;
	noderoot_stats_get(r, &ns);
	CHECK(ns.rebuilds == 1); /* followed, never rebuilt */
	/* a node started over the same store builds the same root */
	noderoot_t *r2 = noderoot_new(st, pk, sk, &o, &err);
	uint8_t c[32];
	CHECK(r2 && !noderoot_current(r2, c, NULL, NULL, &err) && !memcmp(a, c, 32));
	noderoot_free(r2);
	noderoot_free(r);
	free(m.b);
	free(ord);
	set_free(&s);
	store_close(st);
	rmdir_rf(dir);
}

/* The JSON member key's object of a document, canonical, into out. */
static int member(const pith_buf_t *doc, const char *key, pith_buf_t *out)
{
	json_doc_t *d = parse(doc->data, doc->len);
	const json_value_t *v = d ? json_get(json_doc_root(d), key) : NULL;
	int rc = v && v->type == JSON_OBJECT ? json_canon_write(v, out) : -1;
	json_doc_free(d);
	return rc;
}

TEST(proofs_and_history, "/api/proof verifies against the signed /api/root, a tampered proof fails, absence is proved; /api/root/range answers check; the history keeps the last N, by cursor")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	evset_t s;
	gen_set(&s, 40);
	noderoot_opts_t o = {.interval_s = 60, .history = 3};
	pith_err_t err = {0};
	noderoot_t *r = noderoot_new(st, pk, sk, &o, &err);
	CHECK(r != NULL);
	char etag[65], why[300];
	/* five signings at five moments of the store */
	for (int round = 0; round < 5; round++) {
		CHECK(!commit_range(st, &s, (size_t)round * s.n / 5, (size_t)(round + 1) * s.n / 5));
		CHECK(noderoot_sign(r, 1796000000000000LL + round * 1000000LL, 0, &err) == 1);
	}
	CHECK(noderoot_sign(r, 1796000009000000LL, 0, &err) == 0); /* nothing changed */
	pith_buf_t doc = PITH_BUF_INIT, body = PITH_BUF_INIT, pj = PITH_BUF_INIT;
	CHECK(noderoot_answer(r, NODEROOT_LATEST, NULL, 0, &doc, etag, why, sizeof(why)) == 200);
	pith_key_t key = {0};
	memcpy(key.pk, pk, 32);
	pith_key_fingerprint(pk, key.fp);
	snprintf(key.key_id, sizeof(key.key_id), "node-%s", key.fp);
	pith_sr_doc_t d;
	CHECK(!pith_sr_doc_verify(doc.data, doc.len - 1, &key, &d, &err));
	CHECK(d.count == 40);
	/* a present record's proof, against the signed root */
	CHECK(noderoot_answer(r, NODEROOT_PROOF, s.pith[7], 0, &body, etag, why, sizeof(why)) == 200);
	CHECK(!member(&body, "proof", &pj));
	pith_sr_proof_t p;
	int present = 0;
	CHECK(!pith_sr_proof_parse(pj.data, pj.len, &p, &err));
	CHECK(!pith_sr_proof_check(&p, d.root, &present, &err) && present);
	/* tampered: a sibling's bit, the leaf's state */
	pith_sr_proof_t q = p;
	q.path[q.n / 2].sib[3] ^= 0x10;
	CHECK(pith_sr_proof_check(&q, d.root, &present, &err) != 0);
	q = p;
	q.leaf.state[0] ^= 1;
	CHECK(pith_sr_proof_check(&q, d.root, &present, &err) != 0);
	/* an absent record (a full number): proved absent */
	pith_buf_reset(&body);
	pith_buf_reset(&pj);
	CHECK(noderoot_answer(r, NODEROOT_PROOF, "pith:2024:ZZZZZZZZZZZZZZZZZZZZZZZZZZ", 0, &body, etag,
			      why, sizeof(why)) == 200);
	CHECK(!member(&body, "proof", &pj) && !pith_sr_proof_parse(pj.data, pj.len, &p, &err));
	CHECK(!pith_sr_proof_check(&p, d.root, &present, &err) && !present);
	/* a short id that names nothing: 404; garbage: 400 */
	pith_buf_reset(&body);
	CHECK(noderoot_answer(r, NODEROOT_PROOF, "ZZZZZZZZZZ", 0, &body, etag, why, sizeof(why)) == 404);
	CHECK(noderoot_answer(r, NODEROOT_PROOF, "no such thing!", 0, &body, etag, why, sizeof(why)) == 400);
	/* range answers: checked as a reader would */
	static const char *const prefixes[] = {"", "0", "1", "01", "0110", "111111111111"};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		pith_buf_reset(&body);
		CHECK(noderoot_answer(r, NODEROOT_RANGE, prefixes[i], 0, &body, etag, why, sizeof(why)) == 200);
		pith_sr_range_t *rg = malloc(sizeof(*rg));
		CHECK(!pith_sr_range_parse(body.data, body.len - 1, rg, &err) && !pith_sr_range_check(rg, &err));
		CHECK(!memcmp(rg->root, d.root, 32));
		free(rg);
	}
	CHECK(noderoot_answer(r, NODEROOT_RANGE, "012", 0, &body, etag, why, sizeof(why)) == 400);
	/* history: the last 3 of the 5, newest first; by cursor */
	pith_buf_reset(&body);
	CHECK(noderoot_answer(r, NODEROOT_HISTORY, NULL, 0, &body, etag, why, sizeof(why)) == 200);
	json_doc_t *h = parse(body.data, body.len);
	const json_value_t *roots = h ? json_get(json_doc_root(h), "roots") : NULL;
	CHECK(roots && roots->type == JSON_ARRAY && roots->len == 3);
	const char *oldest = roots ? json_get_str(roots->u.items[2], "feed_cursor") : NULL;
	const char *newest = roots ? json_get_str(roots->u.items[0], "feed_cursor") : NULL;
	CHECK(oldest && newest && strtoull(oldest, NULL, 10) < strtoull(newest, NULL, 10));
	pith_buf_reset(&body);
	CHECK(noderoot_answer(r, NODEROOT_LATEST, oldest, 0, &body, etag, why, sizeof(why)) == 200);
	CHECK(!pith_sr_doc_verify(body.data, body.len - 1, &key, &d, &err) && !strcmp(d.cursor, oldest));
	char below[32];
	snprintf(below, sizeof(below), "%llu", (unsigned long long)strtoull(oldest, NULL, 10) - 1);
	CHECK(noderoot_answer(r, NODEROOT_LATEST, below, 0, &body, etag, why, sizeof(why)) == 404);
	CHECK(noderoot_answer(r, NODEROOT_LATEST, "x1", 0, &body, etag, why, sizeof(why)) == 400);
	json_doc_free(h);
	pith_buf_release(&doc);
	pith_buf_release(&body);
	pith_buf_release(&pj);
	noderoot_free(r);
	set_free(&s);
	store_close(st);
	rmdir_rf(dir);
}

/* The root_sha256 of a range answer of the whole tree. */
static int range_root(noderoot_t *r, uint8_t out[32])
{
	pith_buf_t body = PITH_BUF_INIT;
	char etag[65], why[300];
	pith_err_t err = {0};
	int rc = noderoot_answer(r, NODEROOT_RANGE, "", 0, &body, etag, why, sizeof(why)) == 200 ? 0 : -1;
	pith_sr_range_t *rg = malloc(sizeof(*rg));
	if (!rc && !pith_sr_range_parse(body.data, body.len - 1, rg, &err))
		memcpy(out, rg->root, 32);
	else
		rc = -1;
	free(rg);
	pith_buf_release(&body);
	return rc;
}

TEST(readers_share_a_view, "range answers and proofs within a second of a hash are of that tree, however the store moves meanwhile; after it the tree catches up")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	evset_t s;
	gen_set(&s, 30);
	pith_err_t err = {0};
	CHECK(!commit_range(st, &s, 0, s.n / 2));
	noderoot_t *r = noderoot_new(st, pk, sk, NULL, &err);
	uint8_t r1[32], r2[32], fresh[32];
	size_t n;
	CHECK(r && !range_root(r, r1) && !scratch_root(st, fresh, &n) && !memcmp(r1, fresh, 32));
	CHECK(!commit_range(st, &s, s.n / 2, s.n)); /* the other half's records */
	CHECK(noderoot_catch_up(r, 0, &err) == 0);  /* the view holds */
	CHECK(!range_root(r, r2) && !memcmp(r1, r2, 32));
	usleep(1100 * 1000);
	CHECK(noderoot_catch_up(r, 0, &err) > 0); /* the view is old: the tree is told */
	CHECK(!range_root(r, r2) && !scratch_root(st, fresh, &n) && !memcmp(r2, fresh, 32));
	CHECK(memcmp(r1, r2, 32) != 0 && n == 30);
	/* a record of the second half: in the proof, against that root */
	pith_buf_t body = PITH_BUF_INIT, pj = PITH_BUF_INIT;
	char etag[65], why[300];
	CHECK(noderoot_answer(r, NODEROOT_PROOF, s.pith[29], 0, &body, etag, why, sizeof(why)) == 200);
	pith_sr_proof_t p;
	int present = 0;
	CHECK(!member(&body, "proof", &pj) && !pith_sr_proof_parse(pj.data, pj.len, &p, &err));
	CHECK(!pith_sr_proof_check(&p, r2, &present, &err) && present);
	pith_buf_release(&body);
	pith_buf_release(&pj);
	noderoot_free(r);
	set_free(&s);
	store_close(st);
	rmdir_rf(dir);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	setup();
	crypto_sign_keypair(pk, sk);
	RUN(root_follows_changes);
	RUN(proofs_and_history);
	RUN(readers_share_a_view);
	return test_done();
}
