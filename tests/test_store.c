/* The store (store/store.h): ingest of the registry bundle and of generated
 * events, resolution, duplicates and re-signed copies, order independence
 * across stores, the indexes, reopening, and the consistency audit. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "store_test_util.h"
#include "bundle.h"
#include "hmap.h"
#include "merge.h"
#include "store.h"
#include "store_int.h"
#include "test_util.h"
#include "testgen.h"

#define AR7B "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
#define AR7B_STATE_SHA "3facdc2aeec0c5e2ff45dd750211a965091b49387ad1b15346dff0bb9a58c999"

static tg_key_t reg, op;
static pith_trust_t *trust;
static pith_buf_t bundle_bytes;

/* ---- helpers ------------------------------------------------------------- */

static char *tmpdir(void)
{
	return stu_tmpdir("test_store");
}

static void rmdir_rf(char *d)
{
	stu_rmdir_rf(d);
}

static store_t *open_store(const char *dir)
{
	return stu_open_store(dir, trust);
}

static json_doc_t *parse(const uint8_t *p, size_t n)
{
	json_doc_t *d = NULL;
	pith_err_t err = {0};
	if (json_parse(&d, p, n, NULL, &err))
		fprintf(stderr, "parse: %s\n", err.msg);
	return d;
}

static int put_bytes(store_t *st, const pith_buf_t *b, store_outcome_t *out)
{
	pith_event_t *ev = NULL;
	pith_err_t err = {0};
	int rc = pith_event_parse(b->data, b->len, trust, &ev, NULL, &err);
	if (rc) {
		fprintf(stderr, "event does not verify: %s\n", err.msg);
		return rc;
	}
	rc = store_event_put(st, ev, out, &err);
	if (rc)
		fprintf(stderr, "store_event_put: %s\n", err.msg);
	pith_event_free(ev);
	return rc;
}

static int put_bundle(store_t *st, const pith_buf_t *b, store_bundle_outcome_t *out,
		      store_commit_stats_t *stats)
{
	json_doc_t *d = parse(b->data, b->len);
	pith_err_t err = {0};
	int rc = d ? store_bundle_put(st, json_doc_root(d), out, stats, &err) : -1;
	if (rc && d)
		fprintf(stderr, "store_bundle_put: %s\n", err.msg);
	json_doc_free(d);
	return rc;
}

static size_t check_problems(store_t *st)
{
	size_t problems = 99;
	pith_err_t err = {0};
	if (store_check(st, NULL, NULL, &problems, &err))
		fprintf(stderr, "store_check: %s\n", err.msg);
	return problems;
}

/* The state's bytes, NUL-terminated. */
static void state_of(store_t *st, const char *pith, pith_buf_t *out)
{
	pith_err_t err = {0};
	pith_buf_reset(out);
	if (store_state_get(st, pith, out, &err))
		fprintf(stderr, "store_state_get %s: %s\n", pith, err.msg);
	pith_buf_cstr(out);
}

/* A set of generated events over nrec records: all kinds, supersedes,
 * an equivocation and an unknown type. */
typedef struct evset {
	pith_buf_t *b;
	size_t n, cap;
	char pith[600][PITH_NUMBER_LEN + 1]; /* lanes_many_records: three windows */
	size_t nrec;
} evset_t;

static pith_buf_t *set_next(evset_t *s)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->b = realloc(s->b, s->cap * sizeof(*s->b));
	}
	memset(&s->b[s->n], 0, sizeof(s->b[0]));
	return &s->b[s->n++];
}

static void gen_set_from(evset_t *s, size_t nrec, unsigned base)
{
	static const char *const types[] = {
		"graph_snapshot", "author_attestation", "timestamp_anchor", "storage_attestation",
		"citation_signature", "replication_record", "correction", "mirror_hint",
	};
	memset(s, 0, sizeof(*s));
	if (nrec > sizeof(s->pith) / sizeof(s->pith[0])) {
		fprintf(stderr, "gen_set_from: %zu records, at most %zu\n", nrec,
			sizeof(s->pith) / sizeof(s->pith[0]));
		abort();
	}
	s->nrec = nrec;
	for (size_t r = 0; r < nrec; r++) {
		pith_buf_t rec = PITH_BUF_INIT;
		tg_record((unsigned)(base + r), &rec, s->pith[r]);
		pith_buf_release(&rec);
	}
	for (size_t r = 0; r < nrec; r++) {
		char id[PITH_EVENT_ID_LEN + 1], first[PITH_EVENT_ID_LEN + 1], at[32];
		tg_event(set_next(s), &reg, "record_created", s->pith[r], "record", "2026-01-01T00:00:00Z",
			 NULL, NULL, NULL, 0, (int)(base + r), id);
		for (size_t k = 0; k < 8; k++) {
			const char *sup[1] = {first};
			snprintf(at, sizeof(at), "2026-01-0%uT00:00:%02uZ", (unsigned)(1 + k % 5), (unsigned)(r % 60));
			tg_event(set_next(s), k % 2 ? &op : &reg, types[k], s->pith[r],
				 k == 4 ? s->pith[(r + 1) % nrec] : "t", at, "{\"n\":1}", NULL,
				 k == 6 ? sup : NULL, k == 6 ? 1 : 0, -1, id);
			if (k == 0)
				memcpy(first, id, sizeof(id));
		}
		/* an equivocation (same slot as the mirror hint) and an unknown type */
		tg_event(set_next(s), &op, "mirror_hint", s->pith[r], "t", "2026-01-09T00:00:00Z",
			 "{\"n\":2}", NULL, NULL, 0, -1, id);
		tg_event(set_next(s), &reg, "future_kind", s->pith[r], "x", "2026-01-09T00:00:01Z",
			 "{}", NULL, NULL, 0, -1, id);
	}
}

static void gen_set(evset_t *s, size_t nrec)
{
	gen_set_from(s, nrec, 100);
}

/* A new store in dir holding every event of s, one commit each. */
static store_t *filled_store(const char *dir, const evset_t *s)
{
	store_t *st = open_store(dir);
	for (size_t i = 0; st && i < s->n; i++)
		put_bytes(st, &s->b[i], NULL);
	return st;
}

static void set_free(evset_t *s)
{
	for (size_t i = 0; i < s->n; i++)
		pith_buf_release(&s->b[i]);
	free(s->b);
	memset(s, 0, sizeof(*s));
}

static void setup(void)
{
	trust = tg_trust_pair(&reg, &op);
	stu_read_file(PITH_TEST_DATA "/bundle-AR7B3DEV.json", &bundle_bytes);
}

/* ---- cases --------------------------------------------------------------- */

TEST(registry_bundle_state, "imports the registry bundle and reproduces its published state_sha256")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	json_doc_t *d = parse(bundle_bytes.data, bundle_bytes.len);
	pith_report_t rep = {0};
	CHECK(d && pith_bundle_verify(json_doc_root(d), trust, &rep) == 0);
	pith_report_release(&rep);
	json_doc_free(d);
	store_bundle_outcome_t bo;
	store_commit_stats_t s;
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, &bo, &s), 0);
	CHECK_INT_EQ(bo, STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(s.stored, 2);

	pith_buf_t b = PITH_BUF_INIT;
	state_of(st, AR7B, &b);
	json_doc_t *sd = parse(b.data, b.len);
	CHECK_STR_EQ(json_get_str(json_doc_root(sd), "state_sha256"), AR7B_STATE_SHA);
	/* the hash is of the state without state_sha256, as the registry does */
	pith_buf_t c = PITH_BUF_INIT;
	static const char *const skip[] = {"state_sha256"};
	uint8_t h[32];
	char hex[65];
	json_canon_write_skip(json_doc_root(sd), skip, 1, &c);
	pith_sha256(c.data, c.len, h);
	pith_hex_encode(h, 32, hex);
	CHECK_STR_EQ(hex, AR7B_STATE_SHA);
	/* and the state is the one the bundle publishes */
	json_doc_t *bd = parse(bundle_bytes.data, bundle_bytes.len);
	CHECK(json_equal(json_get(json_doc_root(bd), "state"), json_doc_root(sd)));
	store_record_info_t ri;
	CHECK_INT_EQ(store_record_get(st, AR7B, &ri, NULL), 0);
	CHECK_INT_EQ(ri.event_count, 2);
	CHECK(ri.has_bundle);
	CHECK_MEM_EQ(ri.state_hash, 32, h, 32);
	store_counts_t n;
	store_counts_get(st, &n);
	CHECK_INT_EQ(n.events, 2);
	CHECK_INT_EQ(n.records, 1);
	CHECK_INT_EQ(n.bundles, 1);
	CHECK_INT_EQ(check_problems(st), 0);
	json_doc_free(bd);
	json_doc_free(sd);
	pith_buf_release(&b);
	pith_buf_release(&c);
	store_close(st);
	rmdir_rf(dir);
}

TEST(resolve_forms, "resolves arxiv, arxiv_version, doi, pith short 8/12/16, a body prefix, the body and the full number")
{
	static const char *const forms[] = {
		"arxiv:2401.14489", "2401.14489", "arxiv:2401.14489v2", "doi:10.48550/arxiv.2401.14489",
		"doi:10.48550/ARXIV.2401.14489", "10.48550/arxiv.2401.14489", "pith:AR7B3DEV",
		"pith:AR7B3DEVMOTS", "pith:AR7B3DEVMOTSBRCC", "AR7B3DEVMO", "ar7b3devmotsbrccvxuclysrre",
		"AR7B3DEVMOTSBRCCVXUCLYSRRE", AR7B,
	};
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		char out[PITH_NUMBER_LEN + 1] = "";
		pith_err_t err = {0};
		if (store_resolve(st, forms[i], out, &err))
			fprintf(stderr, "#   %s: %s\n", forms[i], err.msg);
		CHECK_STR_EQ(out, AR7B);
	}
	char out[PITH_NUMBER_LEN + 1];
	pith_err_t err = {0};
	CHECK_INT_EQ(store_resolve(st, "arxiv:2401.99999", out, &err), PITH_ENOTFOUND);
	CHECK_INT_EQ(store_resolve(st, "pith:2025:AR7B3DEVMOTSBRCCVXUCLYSRRE", out, &err), PITH_ENOTFOUND);
	CHECK_INT_EQ(store_resolve(st, "pith:ZZZZZZZZ", out, &err), PITH_ENOTFOUND);
	CHECK_INT_EQ(store_resolve(st, "nonsense!", out, &err), PITH_EINVAL);
	store_close(st);
	rmdir_rf(dir);
}

TEST(bundle_twice, "a second import of the same bundle changes nothing")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	pith_buf_t a = PITH_BUF_INIT, b = PITH_BUF_INIT;
	store_bundle_outcome_t bo;
	store_commit_stats_t s;
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	state_of(st, AR7B, &a);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, &bo, &s), 0);
	CHECK_INT_EQ(bo, STORE_BUNDLE_SAME);
	CHECK_INT_EQ(s.stored, 0);
	CHECK_INT_EQ(s.duplicate, 2);
	CHECK_INT_EQ(s.records_touched, 0);
	state_of(st, AR7B, &b);
	CHECK_MEM_EQ(b.data, b.len, a.data, a.len);
	store_counts_t n;
	store_counts_get(st, &n);
	CHECK_INT_EQ(n.events, 2);
	CHECK_INT_EQ(n.bundles, 1);
	CHECK_INT_EQ(check_problems(st), 0);
	pith_buf_release(&a);
	pith_buf_release(&b);
	store_close(st);
	rmdir_rf(dir);
}

/* The registry's first event with another signed_at: still valid (the
 * signature block is outside the hash), a re-signed copy. */
static void resigned_copy(pith_buf_t *orig, pith_buf_t *copy, const char *signed_at)
{
	json_doc_t *d = parse(bundle_bytes.data, bundle_bytes.len);
	const json_value_t *events = json_get(json_doc_root(d), "events");
	json_value_t *ev = events->u.items[0];
	json_canon_write(ev, orig);
	json_value_t *sig = (json_value_t *)json_get(ev, "signature");
	json_object_set(d, sig, "signed_at", json_new_string(d, signed_at));
	json_canon_write(ev, copy);
	json_doc_free(d);
}

TEST(resigned_deterministic, "keeps one deterministic signature block for a re-signed event, whatever arrives first")
{
	pith_buf_t orig = PITH_BUF_INIT, copy = PITH_BUF_INIT, x = PITH_BUF_INIT, y = PITH_BUF_INIT;
	resigned_copy(&orig, &copy, "2026-09-01T00:00:00.000001Z");
	json_doc_t *od = parse(orig.data, orig.len), *cd = parse(copy.data, copy.len);
	int orig_wins = pith_merge_sigblock_cmp(json_get(json_doc_root(od), "signature"),
						json_get(json_doc_root(cd), "signature")) < 0;
	const pith_buf_t *winner = orig_wins ? &orig : &copy;
	char *d1 = tmpdir(), *d2 = tmpdir();
	store_t *a = open_store(d1), *b = open_store(d2);
	store_outcome_t o1, o2, o3, o4;
	CHECK_INT_EQ(put_bytes(a, &orig, &o1), 0);
	CHECK_INT_EQ(put_bytes(a, &copy, &o2), 0);
	CHECK_INT_EQ(put_bytes(b, &copy, &o3), 0);
	CHECK_INT_EQ(put_bytes(b, &orig, &o4), 0);
	CHECK_INT_EQ(o1, STORE_STORED);
	CHECK_INT_EQ(o3, STORE_STORED);
	CHECK_INT_EQ(o2, orig_wins ? STORE_DUPLICATE : STORE_RESIGNED);
	CHECK_INT_EQ(o4, orig_wins ? STORE_RESIGNED : STORE_DUPLICATE);
	pith_event_t *ev = NULL;
	pith_event_parse(orig.data, orig.len, trust, &ev, NULL, NULL);
	CHECK(ev != NULL);
	if (ev) {
		CHECK_INT_EQ(store_event_get(a, ev->content_hash, &x, NULL), 0);
		CHECK_INT_EQ(store_event_get(b, ev->content_hash, &y, NULL), 0);
		CHECK_MEM_EQ(x.data, x.len, winner->data, winner->len);
		CHECK_MEM_EQ(y.data, y.len, winner->data, winner->len);
	}
	/* a third copy arriving later changes nothing more */
	store_outcome_t o5;
	CHECK_INT_EQ(put_bytes(a, &orig, &o5), 0);
	CHECK_INT_EQ(o5, STORE_DUPLICATE);
	store_counts_t n;
	store_counts_get(a, &n);
	CHECK_INT_EQ(n.events, 1);
	CHECK_INT_EQ(check_problems(a), 0);
	CHECK_INT_EQ(check_problems(b), 0);
	pith_event_free(ev);
	json_doc_free(od);
	json_doc_free(cd);
	store_close(a);
	store_close(b);
	rmdir_rf(d1);
	rmdir_rf(d2);
	pith_buf_release(&orig);
	pith_buf_release(&copy);
	pith_buf_release(&x);
	pith_buf_release(&y);
}

TEST(batch_duplicates, "stores an event given three times in one batch once, with the winning block")
{
	pith_buf_t orig = PITH_BUF_INIT, c1 = PITH_BUF_INIT, c2 = PITH_BUF_INIT, got = PITH_BUF_INIT;
	resigned_copy(&orig, &c1, "2026-09-01T00:00:00Z");
	pith_buf_reset(&orig);
	resigned_copy(&orig, &c2, "2026-10-01T00:00:00Z");
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	store_batch_t *b = store_batch_new(st);
	const pith_buf_t *copies[3] = {&c1, &orig, &c2};
	int idx[3];
	pith_buf_t *best = NULL;
	json_doc_t *docs[3];
	for (int i = 0; i < 3; i++) {
		pith_event_t *ev = NULL;
		pith_event_parse(copies[i]->data, copies[i]->len, trust, &ev, NULL, NULL);
		docs[i] = parse(copies[i]->data, copies[i]->len);
		idx[i] = store_batch_add_event(b, ev, NULL, NULL);
		CHECK(idx[i] >= 0);
	}
	/* the smallest block by pith_merge_sigblock_cmp */
	int w = 0;
	for (int i = 1; i < 3; i++)
		if (pith_merge_sigblock_cmp(json_get(json_doc_root(docs[i]), "signature"),
					    json_get(json_doc_root(docs[w]), "signature")) < 0)
			w = i;
	best = (pith_buf_t *)copies[w];
	store_commit_stats_t s;
	CHECK_INT_EQ(store_batch_commit(b, &s, NULL), 0);
	CHECK_INT_EQ(s.stored, 1);
	CHECK_INT_EQ(s.duplicate, 2);
	CHECK_INT_EQ(store_batch_outcome(b, idx[0]), STORE_STORED);
	CHECK_INT_EQ(store_batch_outcome(b, idx[1]), STORE_DUPLICATE);
	pith_event_t *ev = NULL;
	pith_event_parse(orig.data, orig.len, trust, &ev, NULL, NULL);
	CHECK_INT_EQ(store_event_get(st, ev->content_hash, &got, NULL), 0);
	CHECK_MEM_EQ(got.data, got.len, best->data, best->len);
	CHECK_INT_EQ(check_problems(st), 0);
	pith_event_free(ev);
	for (int i = 0; i < 3; i++)
		json_doc_free(docs[i]);
	store_batch_free(b);
	store_close(st);
	rmdir_rf(dir);
	pith_buf_release(&orig);
	pith_buf_release(&c1);
	pith_buf_release(&c2);
	pith_buf_release(&got);
}

/* Every record's state in st, concatenated. */
static void all_states(store_t *st, const evset_t *s, pith_buf_t *out)
{
	pith_buf_reset(out);
	for (size_t r = 0; r < s->nrec; r++) {
		pith_err_t err = {0};
		if (store_state_get(st, s->pith[r], out, &err))
			fprintf(stderr, "#   state %s: %s\n", s->pith[r], err.msg);
		pith_buf_putc(out, '\n');
	}
}

static int copy_event(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	(void)id;
	pith_buf_t b = PITH_BUF_INIT;
	pith_buf_append(&b, bytes, len);
	int rc = put_bytes(arg, &b, NULL);
	pith_buf_release(&b);
	return rc;
}

TEST(order_independent, "gives byte-identical states for any order, batching, duplication or split of one event set")
{
	evset_t s;
	gen_set(&s, 6);
	size_t n = s.n;
	char *dirs[4];
	store_t *st[4];
	for (int i = 0; i < 4; i++)
		st[i] = open_store(dirs[i] = tmpdir());
	/* 0: one event at a time, in order */
	for (size_t i = 0; i < n; i++)
		put_bytes(st[0], &s.b[i], NULL);
	/* 1: all in one batch, reversed, every event twice */
	store_batch_t *b = store_batch_new(st[1]);
	for (size_t k = 0; k < 2 * n; k++) {
		size_t i = n - 1 - k % n;
		pith_event_t *ev = NULL;
		pith_event_parse(s.b[i].data, s.b[i].len, trust, &ev, NULL, NULL);
		store_batch_add_event(b, ev, NULL, NULL);
	}
	store_commit_stats_t cs;
	CHECK_INT_EQ(store_batch_commit(b, &cs, NULL), 0);
	CHECK_INT_EQ(cs.stored, n);
	CHECK_INT_EQ(cs.duplicate, n);
	store_batch_free(b);
	/* 2 and 3: a shuffled split into two stores, batches of 7, then an
	 * exchange of everything each has */
	uint64_t rng = 42;
	size_t *perm = malloc(n * sizeof(*perm));
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = tg_rand(&rng) % (i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (int half = 0; half < 2; half++) {
		b = store_batch_new(st[2 + half]);
		for (size_t k = half; k < n; k += 2) {
			pith_event_t *ev = NULL;
			pith_event_parse(s.b[perm[k]].data, s.b[perm[k]].len, trust, &ev, NULL, NULL);
			store_batch_add_event(b, ev, NULL, NULL);
			if (store_batch_count(b) == 7)
				CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
		}
		CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
		store_batch_free(b);
	}
	CHECK_INT_EQ(store_events_each(st[2], NULL, copy_event, st[3], NULL), 0);
	CHECK_INT_EQ(store_events_each(st[3], NULL, copy_event, st[2], NULL), 0);

	pith_buf_t ref = PITH_BUF_INIT, got = PITH_BUF_INIT;
	all_states(st[0], &s, &ref);
	CHECK(ref.len > 1000);
	for (int i = 0; i < 4; i++) {
		store_counts_t c;
		store_counts_get(st[i], &c);
		CHECK_INT_EQ(c.events, n);
		CHECK_INT_EQ(c.records, s.nrec);
		all_states(st[i], &s, &got);
		CHECK_MEM_EQ(got.data, got.len, ref.data, ref.len);
		CHECK_INT_EQ(check_problems(st[i]), 0);
		store_close(st[i]);
		rmdir_rf(dirs[i]);
	}
	/* the merge itself agrees with the store: each state is a fresh merge */
	CHECK(strstr((char *)ref.data, "\"equivocation_count\":1") != NULL);
	CHECK(strstr((char *)ref.data, "unknown_event_type") != NULL);
	free(perm);
	pith_buf_release(&ref);
	pith_buf_release(&got);
	set_free(&s);
}

/* Closes and removes a test's reference store and its store under test,
 * with their states' buffers and the event set. */
static void pair_done(store_t *ref_st, store_t *st, char *d0, char *d1, pith_buf_t *ref,
		      pith_buf_t *got, evset_t *s)
{
	store_close(ref_st);
	store_close(st);
	rmdir_rf(d0);
	rmdir_rf(d1);
	pith_buf_release(ref);
	pith_buf_release(got);
	set_free(s);
}

/* Adds every event of s twice, in reverse, committing batches of 5 for
 * the first `batched` of them and the rest in one last commit; 0 or the
 * first commit's error. */
static int commit_reversed_twice(store_batch_t *b, const evset_t *s, size_t batched)
{
	int rc = 0;
	for (size_t k = 0; k < 2 * s->n && !rc; k++) {
		size_t i = s->n - 1 - k % s->n;
		pith_event_t *ev = NULL;
		pith_event_parse(s->b[i].data, s->b[i].len, trust, &ev, NULL, NULL);
		store_batch_add_event(b, ev, NULL, NULL);
		if (k < batched && store_batch_count(b) == 5)
			rc = store_batch_commit(b, NULL, NULL);
	}
	return rc ? rc : store_batch_commit(b, NULL, NULL);
}

TEST(lanes_same_states, "gives byte-identical states with merge lanes, for new and for stored records")
{
	evset_t s;
	gen_set(&s, 12);
	size_t n = s.n;
	char *d0 = tmpdir(), *d1 = tmpdir();
	store_t *ref_st = filled_store(d0, &s), *st = open_store(d1);
	store_batch_t *b = store_batch_new(st);
	CHECK_INT_EQ(store_batch_set_lanes(b, 3, NULL), 0);
	/* batches of 5 in reverse: later batches add to records stored by
	 * earlier ones; the last commit has every event again (duplicates) */
	CHECK_INT_EQ(commit_reversed_twice(b, &s, n), 0);
	CHECK_INT_EQ(store_batch_set_lanes(b, 1, NULL), 0);
	store_batch_free(b);
	pith_buf_t ref = PITH_BUF_INIT, got = PITH_BUF_INIT;
	all_states(ref_st, &s, &ref);
	all_states(st, &s, &got);
	CHECK(ref.len > 1000);
	CHECK_MEM_EQ(got.data, got.len, ref.data, ref.len);
	CHECK_INT_EQ(check_problems(st), 0);
	pair_done(ref_st, st, d0, d1, &ref, &got, &s);
}

TEST(lanes_many_records, "gives byte-identical states with lanes when one commit holds more records than two windows of theirs")
{
	evset_t s;
	gen_set(&s, 600);
	for (int lanes = 2; lanes <= 3; lanes++) {
		char *d0 = tmpdir(), *d1 = tmpdir();
		store_t *ref_st = open_store(d0), *st = open_store(d1);
		store_batch_t *rb = store_batch_new(ref_st), *b = store_batch_new(st);
		CHECK_INT_EQ(store_batch_set_lanes(b, lanes, NULL), 0);
		/* all 5,400 events twice in one commit: 600 records, each merged
		 * once, three windows of the lanes (256 records each) */
		CHECK_INT_EQ(commit_reversed_twice(rb, &s, 0), 0);
		CHECK_INT_EQ(commit_reversed_twice(b, &s, 0), 0);
		store_batch_free(rb);
		store_batch_free(b);
		pith_buf_t ref = PITH_BUF_INIT, got = PITH_BUF_INIT;
		all_states(ref_st, &s, &ref);
		all_states(st, &s, &got);
		CHECK(ref.len > 600 * 1000);
		CHECK_MEM_EQ(got.data, got.len, ref.data, ref.len);
		CHECK_INT_EQ(check_problems(st), 0);
		store_close(ref_st);
		store_close(st);
		rmdir_rf(d0);
		rmdir_rf(d1);
		pith_buf_release(&ref);
		pith_buf_release(&got);
	}
	set_free(&s);
}

/* Fills st in batches of 5 in reverse, each event twice (records stored
 * by earlier batches get more events, claims are rewritten), then gives
 * it and ref_st (filled with s) the registry bundle; ref gets ref_st's
 * states. */
static void reversed_with_bundle(store_t *st, store_t *ref_st, const evset_t *s, pith_buf_t *ref)
{
	store_batch_t *b = store_batch_new(st);
	CHECK_INT_EQ(commit_reversed_twice(b, s, 2 * s->n), 0);
	store_batch_free(b);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(ref_st, &bundle_bytes, NULL, NULL), 0);
	all_states(ref_st, s, ref);
	CHECK(ref->len > 1000);
}

TEST(unsorted_write_only, "opened as an import opens it (unsorted memtables of states and claims): the same states, claims and resolution, before and after a reopen")
{
	evset_t s;
	gen_set(&s, 12);
	char *d0 = tmpdir(), *d1 = tmpdir();
	store_t *ref_st = filled_store(d0, &s), *st = NULL;
	store_opts_t o = {.create = 1, .registry = trust, .unsorted_write_only = 1};
	pith_err_t err = {0};
	CHECK_INT_EQ(store_open(d1, &o, &st, &err), 0);
	pith_buf_t ref = PITH_BUF_INIT, got = PITH_BUF_INIT;
	reversed_with_bundle(st, ref_st, &s, &ref);
	/* read while the memtables are unsorted, then from the table files
	 * of a usual open */
	for (int round = 0; round < 2; round++) {
		all_states(st, &s, &got);
		CHECK_MEM_EQ(got.data, got.len, ref.data, ref.len);
		char out[PITH_NUMBER_LEN + 1] = "";
		CHECK_INT_EQ(store_resolve(st, "arxiv:2401.14489", out, &err), 0);
		CHECK_STR_EQ(out, AR7B);
		CHECK_INT_EQ(check_problems(st), 0);
		if (!round) {
			store_close(st);
			st = open_store(d1);
		}
	}
	pair_done(ref_st, st, d0, d1, &ref, &got, &s);
}

/* store_side_end_ex's hook: the registry bundle, committed while the
 * side families are being written out. */
static void bundle_hook(void *arg)
{
	store_t *st = arg;
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	/* its state and claims went aside, their keys logged for the move */
	CHECK(st->side_log[0].len > 0 && st->side_log[1].len > 0);
}

/* The same states, claims and resolution as ref, and a clean audit. */
static void same_as_ref(store_t *st, const evset_t *s, const pith_buf_t *ref)
{
	pith_buf_t got = PITH_BUF_INIT;
	pith_err_t err = {0};
	all_states(st, s, &got);
	CHECK_MEM_EQ(got.data, got.len, ref->data, ref->len);
	char out[PITH_NUMBER_LEN + 1] = "";
	CHECK_INT_EQ(store_resolve(st, "arxiv:2401.14489", out, &err), 0);
	CHECK_STR_EQ(out, AR7B);
	CHECK_INT_EQ(check_problems(st), 0);
	pith_buf_release(&got);
}

static int found_one(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	(void)id;
	(void)len;
	*(int *)arg += bytes != NULL;
	return 0;
}

/* Reads of s's first event by id: while the index of events is aside, the
 * store does not say from the id alone (store_event_has, and
 * store_events_get_many_at without its time), but does with its time, and
 * store_event_get (which may sort a memtable) finds it; after, all do. */
static void event_reads(store_t *st, const evset_t *s, int aside)
{
	pith_event_t *ev = NULL;
	pith_err_t err = {0};
	pith_buf_t doc = PITH_BUF_INIT;
	CHECK_INT_EQ(pith_event_parse(s->b[0].data, s->b[0].len, trust, &ev, NULL, NULL), 0);
	if (!ev)
		return;
	const uint8_t *id = ev->content_hash;
	CHECK_INT_EQ(store_events_aside(st), aside);
	CHECK_INT_EQ(store_event_has(st, id, &err), aside ? STORE_HAS_UNKNOWN : 1);
	CHECK_INT_EQ(store_event_has_at(st, id, ev->created_us, &err), 1);
	if (aside) /* the time is part of the key read */
		CHECK_INT_EQ(store_event_has_at(st, id, ev->created_us + 1, &err), 0);
	CHECK_INT_EQ(store_event_get(st, id, &doc, &err), 0);
	int64_t at = ev->created_us, none = STORE_TIME_NONE;
	int found = 0;
	CHECK_INT_EQ((int)store_events_get_many_at(st, (const uint8_t(*)[32])id, &at, 1, found_one,
						   &found, &err), 0);
	CHECK_INT_EQ((int)store_events_get_many_at(st, (const uint8_t(*)[32])id, &none, 1, found_one,
						   &found, &err), 0);
	CHECK_INT_EQ(found, aside ? 1 : 2);
	pith_buf_release(&doc);
	pith_event_free(ev);
}

/* store_cf_quiesce waits for a reader that entered before it, and for one
 * that entered during its first round (which may have read the epoch
 * before it began), then returns. Readers count themselves only while they
 * may take a side family's handle: a store in its first catch-up here, and
 * the same reads once it has ended are not counted. */
static void *quiesce_main(void *arg)
{
	store_t *st = arg;
	store_cf_quiesce(st);
	return NULL;
}

static int joined_within(pthread_t t, int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return !pthread_timedjoin_np(t, NULL, &ts);
}

TEST(cf_quiesce, "a dropped family's handle waits for every reader that could have taken it")
{
	evset_t s;
	gen_set(&s, 4);
	char *d = tmpdir();
	store_opts_t o = {.create = 1, .registry = trust, .atomic_flush = 1, .bulk_side = 1};
	pith_err_t err = {0};
	store_t *st = NULL;
	CHECK_INT_EQ(store_open(d, &o, &st, &err), 0);
	CHECK_INT_EQ(store_bulk_begin(st, STORE_BULK_SYNC, &err), 0);
	CHECK_INT_EQ(store_unlogged_begin(st, &err), 0);
	store_side_want(st);
	store_batch_t *b = store_batch_new(st);
	CHECK_INT_EQ(commit_reversed_twice(b, &s, 0), 0);
	store_batch_free(b);
	CHECK_INT_EQ(store_side_active(st), 1);
	unsigned s1, s2;
	CHECK(store_cf_enter(st, STORE_CF_STATES, &s1) == st->cf[STORE_CF_STATES]);
	CHECK(st->cf[STORE_CF_STATES] != st->cf_open[STORE_CF_STATES]);
	CHECK(s1 != STORE_CF_UNCOUNTED);
	pthread_t q;
	CHECK_INT_EQ(pthread_create(&q, NULL, quiesce_main, st), 0);
	CHECK_INT_EQ(joined_within(q, 100), 0); /* the reader is still in */
	(void)store_cf_enter(st, STORE_CF_ALIASES, &s2); /* in the first round */
	store_cf_leave(st, s1);
	CHECK_INT_EQ(joined_within(q, 100), 0); /* the second round waits for it */
	store_cf_leave(st, s2);
	int done = joined_within(q, 5000);
	CHECK_INT_EQ(done, 1);
	if (!done)
		pthread_join(q, NULL);
	/* with no reader in, at once */
	CHECK_INT_EQ(pthread_create(&q, NULL, quiesce_main, st), 0);
	CHECK_INT_EQ(joined_within(q, 5000), 1);
	/* the catch-up ends: the handles open left are back, and uncounted */
	CHECK_INT_EQ(store_unlogged_end(st, &err), 0);
	CHECK_INT_EQ(store_side_end(st, &err), 0);
	CHECK_INT_EQ(store_bulk_end(st, 0, &err), 0);
	CHECK(store_cf_enter(st, STORE_CF_STATES, &s1) == st->cf_open[STORE_CF_STATES]);
	CHECK(s1 == STORE_CF_UNCOUNTED);
	CHECK_INT_EQ(pthread_create(&q, NULL, quiesce_main, st), 0);
	CHECK_INT_EQ(joined_within(q, 5000), 1); /* it does not wait for such a reader */
	store_cf_leave(st, s1);
	store_close(st);
	rmdir_rf(d);
	set_free(&s);
}

TEST(bulk_side, "a new node's catch-up into side families: the same states, claims and resolution while they are in use, after they are moved into place, with commits during the move, after more commits, and after a move cut short by a close")
{
	evset_t s;
	gen_set(&s, 12);
	char *d0 = tmpdir(), *d1 = tmpdir(), *d2 = tmpdir();
	store_t *ref_st = filled_store(d0, &s), *st = NULL;
	store_opts_t o = {.create = 1, .registry = trust, .atomic_flush = 1, .bulk_side = 1};
	pith_err_t err = {0};
	pith_buf_t ref = PITH_BUF_INIT;
	CHECK_INT_EQ(store_open(d1, &o, &st, &err), 0);
	CHECK_INT_EQ(store_bulk_begin(st, STORE_BULK_SYNC, &err), 0);
	CHECK_INT_EQ(store_unlogged_begin(st, &err), 0);
	store_side_want(st);
	CHECK_INT_EQ(store_side_active(st), 0); /* the next commit makes them */
	reversed_with_bundle(st, ref_st, &s, &ref);
	CHECK_INT_EQ(store_side_active(st), 1);
	same_as_ref(st, &s, &ref); /* read from the unsorted memtables */
	event_reads(st, &s, 1);
	CHECK_INT_EQ(store_unlogged_end(st, &err), 0);
	same_as_ref(st, &s, &ref); /* from the side families' table files */
	event_reads(st, &s, 1);
	CHECK_INT_EQ(store_side_end(st, &err), 0);
	CHECK_INT_EQ(store_side_active(st), 0);
	CHECK_INT_EQ(store_bulk_end(st, 0, &err), 0);
	same_as_ref(st, &s, &ref);
	event_reads(st, &s, 0);
	/* commits after the move write the families themselves */
	store_batch_t *b = store_batch_new(st);
	CHECK_INT_EQ(commit_reversed_twice(b, &s, 0), 0);
	store_batch_free(b);
	CHECK_INT_EQ(store_side_active(st), 0);
	same_as_ref(st, &s, &ref);
	/* a store that holds something gets no side families */
	store_side_want(st);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	CHECK_INT_EQ(store_side_active(st), 0);
	store_close(st);
	st = open_store(d1);
	CHECK_INT_EQ(store_side_active(st), 0);
	same_as_ref(st, &s, &ref);
	store_close(st);

	/* commits while the side families are written out: the bundle comes
	 * then, and withdraws derived claims the files hold */
	char *d3 = tmpdir();
	CHECK_INT_EQ(store_open(d3, &o, &st, &err), 0);
	store_side_want(st);
	store_batch_t *b3 = store_batch_new(st);
	CHECK_INT_EQ(commit_reversed_twice(b3, &s, 2 * s.n), 0);
	store_batch_free(b3);
	CHECK_INT_EQ(store_side_active(st), 1);
	/* the second copies came in later commits: duplicates, found by
	 * their documents' keys while the index of events is aside */
	store_counts_t cn;
	store_counts_get(st, &cn);
	CHECK_INT_EQ((int)cn.events, (int)s.n);
	CHECK_INT_EQ(store_side_end_ex(st, bundle_hook, st, &err), 0);
	CHECK_INT_EQ(store_side_active(st), 0);
	same_as_ref(st, &s, &ref);
	event_reads(st, &s, 0);
	store_close(st);
	st = open_store(d3);
	same_as_ref(st, &s, &ref);
	event_reads(st, &s, 0);
	store_close(st);
	rmdir_rf(d3);

	/* closed while in use (a node stopped in its catch-up): a read-only
	 * open reads the side families, a read-write open moves them */
	CHECK_INT_EQ(store_open(d2, &o, &st, &err), 0);
	store_side_want(st);
	b = store_batch_new(st);
	CHECK_INT_EQ(commit_reversed_twice(b, &s, 2 * s.n), 0);
	store_batch_free(b);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	CHECK_INT_EQ(store_side_active(st), 1);
	store_close(st);
	store_opts_t ro = {.read_only = 1, .registry = trust};
	CHECK_INT_EQ(store_open(d2, &ro, &st, &err), 0);
	CHECK_INT_EQ(store_side_active(st), 1);
	same_as_ref(st, &s, &ref);
	event_reads(st, &s, 0); /* read-only: from the side family's files */
	store_close(st);
	st = open_store(d2);
	CHECK_INT_EQ(store_side_active(st), 0);
	same_as_ref(st, &s, &ref);
	event_reads(st, &s, 0);
	store_close(st);
	rmdir_rf(d2);
	pith_buf_t none = PITH_BUF_INIT;
	pair_done(ref_st, NULL, d0, d1, &ref, &none, &s);
}

TEST(fpset, "a fingerprint set never answers no for a key it was given, and rarely maybe for another")
{
	fpset_t fs = {0};
	uint64_t x = 7;
	uint8_t k[STORE_SKEY_LEN] = {0};
	CHECK_INT_EQ(fpset_maybe(&fs, k, sizeof(k)), 0);
	for (int round = 0; round < 2; round++) {
		/* round 0 adds 200,000 keys (the set grows from empty), round 1
		 * asks for them and for as many others */
		x = 7;
		size_t missed = 0, others = 0;
		for (int i = 0; i < 200000; i++) {
			for (size_t j = 0; j < sizeof(k); j++)
				k[j] = (uint8_t)test_xorshift(&x);
			if (!round)
				CHECK_INT_EQ(fpset_add(&fs, k, sizeof(k)), 0);
			else
				missed += !fpset_maybe(&fs, k, sizeof(k));
			k[0] ^= 0x80;
			if (round)
				others += fpset_maybe(&fs, k, sizeof(k));
		}
		CHECK_INT_EQ(missed, 0);
		CHECK(others < 5);
	}
	CHECK_INT_EQ(fs.n, 200000);
	CHECK(fs.cap * 3 >= fs.n * 4);
	fpset_release(&fs);
}

/* Opened as pithctl import opens a store (store_opts_t.fresh_records). */
static store_t *open_fresh(const char *dir)
{
	store_opts_t o = {.create = 1, .registry = trust, .unsorted_write_only = 1, .fresh_records = 1};
	store_t *st = NULL;
	pith_err_t err = {0};
	if (store_open(dir, &o, &st, &err))
		fprintf(stderr, "#   open %s: %s\n", dir, err.msg);
	return st;
}

TEST(fresh_records, "filled from empty without reading unknown records: the same states, also for records written again and after a reopen with records")
{
	evset_t s;
	gen_set(&s, 12);
	char *d0 = tmpdir(), *d1 = tmpdir(), *d2 = tmpdir();
	store_t *ref_st = filled_store(d0, &s), *st = open_fresh(d1);
	pith_buf_t ref = PITH_BUF_INIT, got = PITH_BUF_INIT;
	reversed_with_bundle(st, ref_st, &s, &ref);
	all_states(st, &s, &got);
	CHECK_MEM_EQ(got.data, got.len, ref.data, ref.len);
	CHECK_INT_EQ(check_problems(st), 0);
	store_close(st);
	/* every other event, then a reopen (the store now holds records: a
	 * record not written since the open may be there) and the rest */
	st = open_fresh(d2);
	for (int half = 0; half < 2; half++) {
		for (size_t i = half; i < s.n; i += 2)
			put_bytes(st, &s.b[i], NULL);
		if (!half) {
			store_close(st);
			st = open_fresh(d2);
		}
	}
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	all_states(st, &s, &got);
	CHECK_MEM_EQ(got.data, got.len, ref.data, ref.len);
	CHECK_INT_EQ(check_problems(st), 0);
	rmdir_rf(d1);
	pair_done(ref_st, st, d0, d2, &ref, &got, &s);
}

typedef struct timelist {
	int64_t us[64];
	size_t n;
} timelist_t;

static int collect_time(void *arg, int64_t us, const uint8_t id[32])
{
	timelist_t *t = arg;
	(void)id;
	if (t->n < 64)
		t->us[t->n++] = us;
	return 0;
}

typedef struct subjlist {
	char created[64][24];
	size_t n;
} subjlist_t;

static int collect_created(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	subjlist_t *l = arg;
	pith_event_t *ev = NULL;
	(void)id;
	if (pith_event_parse_stored(bytes, len, &ev, NULL) || l->n >= 64)
		return 1;
	snprintf(l->created[l->n++], 24, "%s", ev->created_at);
	pith_event_free(ev);
	return 0;
}

TEST(indexes, "lists a time range in created_at order and a record's events grouped and ordered")
{
	evset_t s;
	gen_set(&s, 2);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	for (size_t i = s.n; i-- > 0;)
		put_bytes(st, &s.b[i], NULL);
	timelist_t all = {0}, part = {0};
	int64_t from, to;
	pith_time_parse("2026-01-02T00:00:00Z", &from);
	pith_time_parse("2026-01-04T00:00:00Z", &to);
	CHECK_INT_EQ(store_time_each(st, INT64_MIN / 2, INT64_MAX / 2, collect_time, &all, NULL), 0);
	CHECK_INT_EQ(all.n, s.n);
	for (size_t i = 1; i < all.n; i++)
		CHECK(all.us[i - 1] <= all.us[i]);
	CHECK_INT_EQ(store_time_each(st, from, to, collect_time, &part, NULL), 0);
	CHECK(part.n > 0 && part.n < all.n);
	for (size_t i = 0; i < part.n; i++)
		CHECK(part.us[i] >= from && part.us[i] < to);
	subjlist_t l = {0};
	CHECK_INT_EQ(store_events_each(st, s.pith[1], collect_created, &l, NULL), 0);
	CHECK_INT_EQ(l.n, s.n / 2);
	for (size_t i = 1; i < l.n; i++)
		CHECK(strcmp(l.created[i - 1], l.created[i]) <= 0);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

typedef struct timeids {
	int64_t us[64];
	uint8_t id[64][32];
	size_t n, limit;
} timeids_t;

static int collect_time_id(void *arg, int64_t us, const uint8_t id[32])
{
	timeids_t *t = arg;
	if (t->n >= 64)
		return 1;
	t->us[t->n] = us;
	memcpy(t->id[t->n++], id, 32);
	return t->limit && t->n % t->limit == 0 ? 2 : 0;
}

TEST(time_each_after, "pages through the time index from a (created_at, id) cursor, ties included, each id once")
{
	evset_t s;
	gen_set(&s, 2);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	timeids_t all = {0}, paged = {.limit = 3};
	CHECK_INT_EQ(store_time_each(st, INT64_MIN, INT64_MAX, collect_time_id, &all, NULL), 0);
	CHECK_INT_EQ(all.n, s.n);
	int ties = 0;
	for (size_t i = 1; i < all.n; i++)
		ties += all.us[i - 1] == all.us[i];
	CHECK(ties > 0); /* the set has events created at the same microsecond */
	/* three at a time, each page resuming after the last one seen */
	int rc = store_time_each_after(st, INT64_MIN, NULL, INT64_MAX, collect_time_id, &paged, NULL);
	for (int pages = 0; rc == 2 && pages < 64; pages++)
		rc = store_time_each_after(st, paged.us[paged.n - 1], paged.id[paged.n - 1], INT64_MAX,
					   collect_time_id, &paged, NULL);
	CHECK_INT_EQ(rc, 0);
	CHECK_INT_EQ(paged.n, all.n);
	CHECK(memcmp(paged.us, all.us, sizeof(all.us)) == 0);
	CHECK(memcmp(paged.id, all.id, sizeof(all.id)) == 0);
	/* strictly after: a cursor on the last id yields nothing, an upper
	 * bound at the cursor's time nothing either */
	timeids_t none = {0};
	CHECK_INT_EQ(store_time_each_after(st, all.us[all.n - 1], all.id[all.n - 1], INT64_MAX,
					   collect_time_id, &none, NULL), 0);
	CHECK_INT_EQ(none.n, 0);
	CHECK_INT_EQ(store_time_each_after(st, all.us[0], all.id[0], all.us[0], collect_time_id,
					   &none, NULL), 0);
	CHECK_INT_EQ(none.n, 0);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

TEST(derived_aliases, "a record known only from its events resolves by the aliases of its record")
{
	evset_t s;
	gen_set(&s, 1);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	pith_buf_t rec = PITH_BUF_INIT;
	char pith[PITH_NUMBER_LEN + 1], out[PITH_NUMBER_LEN + 1] = "", arxiv[80];
	tg_record(100, &rec, pith);
	json_doc_t *d = parse(rec.data, rec.len);
	snprintf(arxiv, sizeof(arxiv), "arxiv:%s",
		 json_get_str(json_get(json_doc_root(d), "source"), "id"));
	pith_err_t err = {0};
	CHECK_INT_EQ(store_resolve(st, arxiv, out, &err), 0);
	CHECK_STR_EQ(out, pith);
	char shorty[16];
	snprintf(shorty, sizeof(shorty), "pith:%.8s", pith + 10);
	CHECK_INT_EQ(store_resolve(st, shorty, out, &err), 0);
	CHECK_STR_EQ(out, pith);
	json_doc_free(d);
	pith_buf_release(&rec);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

/* The registry bundle with a later built_at and one more alias (the store
 * trusts its caller's verification, so the broken signature is not its
 * concern here). */
static void newer_bundle_alias(pith_buf_t *out, const char *alias)
{
	json_doc_t *d = parse(bundle_bytes.data, bundle_bytes.len);
	json_value_t *r = json_doc_root(d);
	json_object_set(d, r, "built_at", json_new_string(d, "2026-09-01T00:00:00Z"));
	json_value_t *al = (json_value_t *)json_get(r, "source_aliases");
	json_value_t *a = json_new_object(d);
	json_object_set(d, a, "alias_kind", json_new_string(d, "arxiv"));
	json_object_set(d, a, "alias_value", json_new_string(d, alias));
	json_object_set(d, a, "created_at", json_new_string(d, "2026-09-01T00:00:00Z"));
	json_array_push(d, al, a);
	json_canon_write(r, out);
	json_doc_free(d);
}

static void newer_bundle(pith_buf_t *out)
{
	newer_bundle_alias(out, "2401.99999");
}

TEST(newest_bundle, "takes aliases from the newest bundle by built_at, whichever arrives first")
{
	pith_buf_t nb = PITH_BUF_INIT, s1 = PITH_BUF_INIT, s2 = PITH_BUF_INIT, got = PITH_BUF_INIT;
	newer_bundle(&nb);
	char *d1 = tmpdir(), *d2 = tmpdir();
	store_t *a = open_store(d1), *b = open_store(d2);
	store_bundle_outcome_t o1, o2, o3, o4;
	CHECK_INT_EQ(put_bundle(a, &bundle_bytes, &o1, NULL), 0);
	CHECK_INT_EQ(put_bundle(a, &nb, &o2, NULL), 0);
	CHECK_INT_EQ(put_bundle(b, &nb, &o3, NULL), 0);
	CHECK_INT_EQ(put_bundle(b, &bundle_bytes, &o4, NULL), 0);
	CHECK_INT_EQ(o1, STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(o2, STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(o3, STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(o4, STORE_BUNDLE_OLDER);
	state_of(a, AR7B, &s1);
	state_of(b, AR7B, &s2);
	CHECK_MEM_EQ(s1.data, s1.len, s2.data, s2.len);
	CHECK(strstr((char *)s1.data, "2401.99999") != NULL);
	CHECK_INT_EQ(store_bundle_get(a, AR7B, &got, NULL), 0);
	CHECK_MEM_EQ(got.data, got.len, nb.data, nb.len);
	char out[PITH_NUMBER_LEN + 1] = "";
	CHECK_INT_EQ(store_resolve(b, "arxiv:2401.99999", out, NULL), 0);
	CHECK_STR_EQ(out, AR7B);
	store_counts_t n;
	store_counts_get(a, &n);
	CHECK_INT_EQ(n.bundles, 1);
	CHECK_INT_EQ(check_problems(a), 0);
	CHECK_INT_EQ(check_problems(b), 0);
	store_close(a);
	store_close(b);
	rmdir_rf(d1);
	rmdir_rf(d2);
	pith_buf_release(&nb);
	pith_buf_release(&s1);
	pith_buf_release(&s2);
	pith_buf_release(&got);
}

TEST(bundle_tie, "between bundles built at the same time keeps the smaller bundle_sha256, and withdraws the other's aliases")
{
	pith_buf_t x = PITH_BUF_INIT, y = PITH_BUF_INIT, s1 = PITH_BUF_INIT, s2 = PITH_BUF_INIT;
	newer_bundle_alias(&x, "2401.88888");
	newer_bundle_alias(&y, "2401.77777");
	json_doc_t *dx = parse(x.data, x.len), *dy = parse(y.data, y.len);
	uint8_t hx[32], hy[32];
	pith_bundle_hash(json_doc_root(dx), hx);
	pith_bundle_hash(json_doc_root(dy), hy);
	const char *win = memcmp(hx, hy, 32) < 0 ? "arxiv:2401.88888" : "arxiv:2401.77777";
	const char *lose = memcmp(hx, hy, 32) < 0 ? "2401.77777" : "2401.88888";
	char *d1 = tmpdir(), *d2 = tmpdir();
	store_t *a = open_store(d1), *b = open_store(d2);
	CHECK_INT_EQ(put_bundle(a, &x, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(a, &y, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(b, &y, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(b, &x, NULL, NULL), 0);
	state_of(a, AR7B, &s1);
	state_of(b, AR7B, &s2);
	CHECK_MEM_EQ(s1.data, s1.len, s2.data, s2.len);
	CHECK(strstr((char *)s1.data, win + 6) != NULL);
	CHECK(strstr((char *)s1.data, lose) == NULL);
	char out[PITH_NUMBER_LEN + 1] = "", lost[40];
	CHECK_INT_EQ(store_resolve(a, win, out, NULL), 0);
	CHECK_STR_EQ(out, AR7B);
	/* the alias only the losing bundle listed is withdrawn, in both orders */
	snprintf(lost, sizeof(lost), "arxiv:%s", lose);
	CHECK_INT_EQ(store_resolve(a, lost, out, NULL), PITH_ENOTFOUND);
	CHECK_INT_EQ(store_resolve(b, lost, out, NULL), PITH_ENOTFOUND);
	CHECK_INT_EQ(check_problems(a), 0);
	CHECK_INT_EQ(check_problems(b), 0);
	json_doc_free(dx);
	json_doc_free(dy);
	store_close(a);
	store_close(b);
	rmdir_rf(d1);
	rmdir_rf(d2);
	pith_buf_release(&x);
	pith_buf_release(&y);
	pith_buf_release(&s1);
	pith_buf_release(&s2);
}

TEST(bundle_order_public, "compares a candidate bundle with the stored newest one by the same rule the store keeps")
{
	pith_buf_t x = PITH_BUF_INIT, y = PITH_BUF_INIT;
	newer_bundle_alias(&x, "2401.88888");
	newer_bundle_alias(&y, "2401.77777");
	json_doc_t *dx = parse(x.data, x.len), *dy = parse(y.data, y.len), *d0 =
		parse(bundle_bytes.data, bundle_bytes.len);
	uint8_t hx[32], hy[32], h0[32], got[32];
	int64_t ux, u0, us;
	pith_bundle_hash(json_doc_root(dx), hx);
	pith_bundle_hash(json_doc_root(dy), hy);
	pith_bundle_hash(json_doc_root(d0), h0);
	pith_time_parse(json_get_str(json_doc_root(dx), "built_at"), &ux);
	pith_time_parse(json_get_str(json_doc_root(d0), "built_at"), &u0);
	CHECK(ux > u0);
	CHECK_INT_EQ(store_bundle_order(ux, hx, u0, h0), 1);
	CHECK_INT_EQ(store_bundle_order(u0, h0, ux, hx), -1);
	CHECK_INT_EQ(store_bundle_order(ux, hx, ux, hx), 0);
	CHECK_INT_EQ(store_bundle_order(ux, hx, ux, hy), memcmp(hx, hy, 32) < 0 ? 1 : -1);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_bundle_newest(st, AR7B, &us, got, &err), PITH_ENOTFOUND);
	CHECK_INT_EQ(store_bundle_is_newer(st, AR7B, u0, h0, NULL), 1);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	CHECK_INT_EQ(store_bundle_newest(st, AR7B, &us, got, NULL), 0);
	CHECK_INT_EQ(us, u0);
	CHECK(memcmp(got, h0, 32) == 0);
	CHECK_INT_EQ(store_bundle_is_newer(st, AR7B, u0, h0, NULL), 0);
	CHECK_INT_EQ(store_bundle_is_newer(st, AR7B, ux, hx, NULL), 1);
	/* whichever of x and y the store keeps, the other is not newer */
	CHECK_INT_EQ(put_bundle(st, &x, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(st, &y, NULL, NULL), 0);
	CHECK_INT_EQ(store_bundle_newest(st, AR7B, &us, got, NULL), 0);
	CHECK(memcmp(got, memcmp(hx, hy, 32) < 0 ? hx : hy, 32) == 0);
	CHECK_INT_EQ(store_bundle_is_newer(st, AR7B, ux, hx, NULL), 0);
	CHECK_INT_EQ(store_bundle_is_newer(st, AR7B, ux, hy, NULL), 0);
	store_close(st);
	rmdir_rf(dir);
	json_doc_free(dx);
	json_doc_free(dy);
	json_doc_free(d0);
	pith_buf_release(&x);
	pith_buf_release(&y);
}

TEST(checkpoint_while_open, "writes a checkpoint of an open store that opens on its own and passes the audit")
{
	evset_t s;
	gen_set(&s, 3);
	char *dir = tmpdir(), cp[600];
	snprintf(cp, sizeof(cp), "%s/backup", dir);
	char *sdir = tmpdir();
	store_t *st = open_store(sdir), *copy = NULL;
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	for (size_t i = 0; i < s.n; i++)
		put_bytes(st, &s.b[i], NULL);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_checkpoint(st, cp, &err), 0);
	/* the original goes on taking writes; the copy is as of the checkpoint */
	store_counts_t a, b;
	store_counts_get(st, &a);
	CHECK_INT_EQ(store_checkpoint(st, cp, &err), PITH_EIO); /* exists */
	CHECK_STR_CONTAINS(err.msg, cp);
	store_opts_t ro = {.read_only = 1, .registry = trust};
	CHECK_INT_EQ(store_open(cp, &ro, &copy, &err), 0);
	store_counts_get(copy, &b);
	CHECK_INT_EQ(b.events, a.events);
	CHECK_INT_EQ(b.records, a.records);
	CHECK_INT_EQ(b.bundles, 1);
	CHECK_INT_EQ(check_problems(copy), 0);
	pith_buf_t s1 = PITH_BUF_INIT, s2 = PITH_BUF_INIT;
	state_of(st, AR7B, &s1);
	state_of(copy, AR7B, &s2);
	CHECK_MEM_EQ(s1.data, s1.len, s2.data, s2.len);
	store_close(copy);
	store_close(st);
	rmdir_rf(dir);
	rmdir_rf(sdir);
	pith_buf_release(&s1);
	pith_buf_release(&s2);
	set_free(&s);
}

TEST(warm_page_cache, "reads the records', aliases' and states' table files whole, within the budget, and stops when told")
{
	evset_t s;
	gen_set(&s, 3);
	char *sdir = tmpdir();
	store_t *st = open_store(sdir);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	for (size_t i = 0; i < s.n; i++)
		put_bytes(st, &s.b[i], NULL);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_flush(st, &err), 0);
	store_warm_t w, none;
	CHECK_INT_EQ(store_warm(st, UINT64_MAX, NULL, &w, &err), 0);
	CHECK(w.files >= 3); /* one table file of each family at least */
	CHECK_INT_EQ(w.missing, 0);
	CHECK_INT_EQ(w.skipped, 0);
	CHECK(w.total > 0);
	CHECK_INT_EQ(w.bytes, w.total);
	CHECK_INT_EQ(w.planned, w.total);
	/* a budget under every file: nothing read, all of them left out */
	CHECK_INT_EQ(store_warm(st, 0, NULL, &none, &err), 0);
	CHECK_INT_EQ(none.files, 0);
	CHECK_INT_EQ(none.bytes, 0);
	CHECK_INT_EQ(none.skipped, w.files);
	CHECK_INT_EQ(none.total, w.total);
	/* told to stop: nothing read */
	atomic_int stop;
	atomic_init(&stop, 1);
	CHECK_INT_EQ(store_warm(st, UINT64_MAX, &stop, &none, &err), 0);
	CHECK_INT_EQ(none.bytes, 0);
	CHECK_INT_EQ(none.files, 0);
	store_close(st);
	rmdir_rf(sdir);
	set_free(&s);
}

TEST(reopen_and_lock, "reopens with its counters and refuses a second writer")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir), *other = NULL;
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_open(dir, NULL, &other, &err), PITH_EIO);
	CHECK(other == NULL);
	CHECK_STR_CONTAINS(err.msg, "lock");
	store_opts_t ro = {.read_only = 1, .registry = trust};
	CHECK_INT_EQ(store_open(dir, &ro, &other, &err), 0);
	store_counts_t n;
	store_counts_get(other, &n);
	CHECK_INT_EQ(n.events, 2);
	pith_buf_t orig = PITH_BUF_INIT, copy = PITH_BUF_INIT;
	resigned_copy(&orig, &copy, "2026-09-01T00:00:00Z");
	pith_event_t *ev = NULL;
	pith_event_parse(copy.data, copy.len, trust, &ev, NULL, NULL);
	CHECK(ev && store_event_put(other, ev, NULL, &err) != 0);
	pith_event_free(ev);
	pith_buf_release(&orig);
	pith_buf_release(&copy);
	store_close(other);
	store_close(st);
	st = open_store(dir);
	store_counts_get(st, &n);
	CHECK_INT_EQ(n.events, 2);
	CHECK_INT_EQ(n.records, 1);
	CHECK_INT_EQ(n.bundles, 1);
	store_opts_t nocreate = {.create = 0};
	char missing[600];
	snprintf(missing, sizeof(missing), "%s/none", dir);
	CHECK(store_open(missing, &nocreate, &other, &err) != 0);
	store_close(st);
	rmdir_rf(dir);
}

static void count_line(void *arg, const char *line)
{
	(*(int *)arg)++;
	(void)line;
}

TEST(check_finds_damage, "the audit reports an index entry without its event, an event without its entries and a stale state")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	CHECK_INT_EQ(check_problems(st), 0);
	uint8_t id[32] = {1, 2, 3}, tk[STORE_TIME_KEY_LEN], skey[STORE_SKEY_LEN];
	char *e = NULL;
	/* a time entry for an event that is not stored */
	store_time_key_make(0, id, tk);
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_TIME], (char *)tk, sizeof(tk), "", 0, &e);
	CHECK(e == NULL);
	int lines = 0;
	size_t problems = 0;
	CHECK_INT_EQ(store_check(st, count_line, &lines, &problems, NULL), 0);
	CHECK(problems >= 2); /* the dangling entry, and the count */
	CHECK_INT_EQ(lines, (int)problems);
	rocksdb_delete_cf(st->db, st->wo, st->cf[STORE_CF_TIME], (char *)tk, sizeof(tk), &e);
	/* a stale state */
	store_skey_make(AR7B, skey);
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_STATES], (char *)skey, sizeof(skey), "{}", 2, &e);
	CHECK(check_problems(st) >= 1);
	json_doc_t *d = parse(bundle_bytes.data, bundle_bytes.len);
	pith_buf_t sb = PITH_BUF_INIT;
	store_state_get(st, AR7B, &sb, NULL);
	CHECK_MEM_EQ(sb.data, sb.len, "{}", 2);
	/* an event without its index entries */
	uint8_t ev_id[32];
	const char *h = json_get_str(json_get(json_doc_root(d), "events")->u.items[0], "content_sha256");
	pith_hex_decode(h, 64, ev_id, 32);
	store_iter_t it;
	store_iter_prefix(st, STORE_CF_SUBJ, skey, sizeof(skey), &it, NULL);
	size_t kl;
	const uint8_t *k = store_iter_key(&it, &kl);
	uint8_t sk[STORE_SUBJ_KEY_LEN];
	memcpy(sk, k, sizeof(sk));
	store_iter_close(&it);
	rocksdb_delete_cf(st->db, st->wo, st->cf[STORE_CF_SUBJ], (char *)sk, sizeof(sk), &e);
	lines = 0;
	CHECK_INT_EQ(store_check(st, count_line, &lines, &problems, NULL), 0);
	CHECK(problems >= 3);
	json_doc_free(d);
	pith_buf_release(&sb);
	store_close(st);
	rmdir_rf(dir);
}

static void keep_line(void *arg, const char *line)
{
	pith_buf_printf(arg, "%s\n", line);
}

TEST(check_threads_same_report, "the audit reports the same lines in the same order on one thread and on four")
{
	char *dir = tmpdir();
	evset_t s;
	gen_set(&s, 16);
	store_t *st = filled_store(dir, &s);
	CHECK_INT_EQ(check_problems(st), 0);
	uint8_t skey[STORE_SKEY_LEN], id[32] = {7}, tk[STORE_TIME_KEY_LEN];
	char *e = NULL;
	/* stale states, a state without its record, a time entry without its event */
	for (size_t r = 2; r < 16; r += 7) {
		store_skey_make(s.pith[r], skey);
		rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_STATES], (char *)skey, sizeof(skey), "{}", 2, &e);
	}
	memset(skey, 'Z', sizeof(skey));
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_STATES], (char *)skey, sizeof(skey), "{}", 2, &e);
	store_time_key_make(0, id, tk);
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_TIME], (char *)tk, sizeof(tk), "", 0, &e);
	/* an aliases entry of no record, claimed by none */
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_ALIASES], "x", 1, "", 0, &e);
	CHECK(e == NULL);
	pith_buf_t one = PITH_BUF_INIT, four = PITH_BUF_INIT;
	size_t n1 = 0, n4 = 0;
	CHECK_INT_EQ(store_check_threads(st, 1, keep_line, &one, &n1, NULL), 0);
	CHECK_INT_EQ(store_check_threads(st, 4, keep_line, &four, &n4, NULL), 0);
	CHECK(n1 >= 8); /* 2 stale states, the stray state, the time entry, the alias, 3 counts */
	CHECK_INT_EQ(n4, n1);
	CHECK_MEM_EQ(four.data, four.len, one.data, one.len);
	pith_buf_release(&one);
	pith_buf_release(&four);
	store_close(st);
	set_free(&s);
	rmdir_rf(dir);
}

TEST(own_bytes_checked, "an event read back for a merge must name the id it is stored under")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	json_doc_t *d = parse(bundle_bytes.data, bundle_bytes.len);
	const json_value_t *evs = json_get(json_doc_root(d), "events");
	uint8_t id0[32], id1[32], skey[STORE_SKEY_LEN];
	pith_hex_decode(json_get_str(evs->u.items[0], "content_sha256"), 64, id0, 32);
	pith_hex_decode(json_get_str(evs->u.items[1], "content_sha256"), 64, id1, 32);
	store_skey_make(AR7B, skey);
	pith_event_t **loaded = NULL;
	size_t n = 0;
	pith_err_t err = {0};
	CHECK_INT_EQ(store_subject_load(st, skey, &loaded, &n, &err), 0);
	CHECK_INT_EQ((int)n, (int)evs->len);
	store_events_free(loaded, n);
	/* the second event's bytes filed as the first one's document */
	char *v, *e = NULL;
	size_t vl;
	uint8_t tk0[STORE_TIME_KEY_LEN];
	pith_buf_t doc1 = PITH_BUF_INIT;
	CHECK_INT_EQ(store_event_get(st, id1, &doc1, &err), 0);
	CHECK_INT_EQ(store_get_raw(st, STORE_CF_EVENTS, id0, 32, &v, &vl, &err), 0);
	CHECK_INT_EQ((int)vl, 8);
	memcpy(tk0, v, 8);
	memcpy(tk0 + 8, id0, 32);
	rocksdb_free(v);
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_DOCS], (char *)tk0, sizeof(tk0),
		       (char *)doc1.data, doc1.len, &e);
	CHECK(e == NULL);
	pith_buf_release(&doc1);
	loaded = NULL;
	CHECK_INT_EQ(store_subject_load(st, skey, &loaded, &n, &err), PITH_EMISMATCH);
	CHECK(strstr(err.msg, "names another id") != NULL);
	CHECK(loaded == NULL);
	CHECK(check_problems(st) >= 1);
	json_doc_free(d);
	store_close(st);
	rmdir_rf(dir);
}

TEST(nothing_on_failure, "a batch that fails to commit leaves nothing behind")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	store_close(st);
	/* read-only: the commit fails as a whole */
	store_opts_t ro = {.read_only = 1, .registry = trust};
	pith_err_t err = {0};
	CHECK_INT_EQ(store_open(dir, &ro, &st, &err), 0);
	evset_t s;
	gen_set(&s, 1);
	store_batch_t *b = store_batch_new(st);
	int idx = -1;
	for (size_t i = 0; i < s.n; i++) {
		pith_event_t *ev = NULL;
		pith_event_parse(s.b[i].data, s.b[i].len, trust, &ev, NULL, NULL);
		idx = store_batch_add_event(b, ev, NULL, NULL);
	}
	CHECK(store_batch_commit(b, NULL, &err) != 0);
	CHECK_INT_EQ(store_batch_outcome(b, idx), STORE_PENDING);
	CHECK_INT_EQ(store_batch_count(b), 0);
	store_batch_free(b);
	store_close(st);
	st = open_store(dir);
	store_counts_t n;
	store_counts_get(st, &n);
	CHECK_INT_EQ(n.events, 2);
	CHECK_INT_EQ(check_problems(st), 0);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

/* ---- the bundle index ------------------------------------------------------ */

typedef struct refs {
	int n;
	int64_t us[4];
	uint8_t sha[4][32];
	char pith[4][PITH_NUMBER_LEN + 1];
} refs_t;

static int ref_one(void *arg, int64_t us, const uint8_t sha[32], const char *pith)
{
	refs_t *r = arg;
	if (r->n < 4) {
		r->us[r->n] = us;
		memcpy(r->sha[r->n], sha, 32);
		snprintf(r->pith[r->n], sizeof(r->pith[0]), "%s", pith);
	}
	r->n++;
	return 0;
}

static void bundle_ident_of(const pith_buf_t *b, int64_t *us, uint8_t sha[32])
{
	json_doc_t *d = parse(b->data, b->len);
	const char *built = json_get_str(json_doc_root(d), "built_at");
	pith_time_parse(built, us);
	pith_bundle_hash(json_doc_root(d), sha);
	json_doc_free(d);
}

TEST(bundle_index_put, "keeps the bundle index at the newest bundle of each record, in the commit that stores it")
{
	pith_buf_t nb = PITH_BUF_INIT;
	newer_bundle(&nb);
	int64_t u0, u1, us;
	uint8_t h0[32], h1[32], sha[32];
	bundle_ident_of(&bundle_bytes, &u0, h0);
	bundle_ident_of(&nb, &u1, h1);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	refs_t r = {0};
	char pith[PITH_NUMBER_LEN + 1];
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 0);

	/* the first bundle of a record: added, nothing replaced */
	store_batch_t *b = store_batch_new(st);
	int idx = store_batch_add_bundle(b, parse(bundle_bytes.data, bundle_bytes.len), NULL);
	CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
	CHECK_INT_EQ(store_batch_bundle_replaced(b, idx, &us, sha), 0);
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(r.us[0] == u0 && !memcmp(r.sha[0], h0, 32));
	CHECK_STR_EQ(r.pith[0], AR7B);
	CHECK_INT_EQ(store_bundle_ref_get(st, h0, &us, pith, NULL), 0);
	CHECK(us == u0);
	CHECK_STR_EQ(pith, AR7B);

	/* a newer one replaces it, and says which one it replaced */
	idx = store_batch_add_bundle(b, parse(nb.data, nb.len), NULL);
	CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
	CHECK_INT_EQ(store_batch_bundle_outcome(b, idx), STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(store_batch_bundle_replaced(b, idx, &us, sha), 1);
	CHECK(us == u0 && !memcmp(sha, h0, 32));
	r.n = 0;
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(r.us[0] == u1 && !memcmp(r.sha[0], h1, 32));
	CHECK_INT_EQ(store_bundle_ref_get(st, h0, &us, pith, NULL), PITH_ENOTFOUND);
	CHECK_INT_EQ(store_bundle_ref_get(st, h1, &us, pith, NULL), 0);

	/* an older one changes nothing */
	idx = store_batch_add_bundle(b, parse(bundle_bytes.data, bundle_bytes.len), NULL);
	CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
	CHECK_INT_EQ(store_batch_bundle_outcome(b, idx), STORE_BUNDLE_OLDER);
	CHECK_INT_EQ(store_batch_bundle_replaced(b, idx, &us, sha), 0);
	r.n = 0;
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(!memcmp(r.sha[0], h1, 32));
	CHECK_INT_EQ(check_problems(st), 0);
	store_batch_free(b);

	/* both in one batch: the newer one is indexed, the older never was */
	char *dir2 = tmpdir();
	store_t *st2 = open_store(dir2);
	b = store_batch_new(st2);
	store_batch_add_bundle(b, parse(nb.data, nb.len), NULL);
	store_batch_add_bundle(b, parse(bundle_bytes.data, bundle_bytes.len), NULL);
	CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
	store_batch_free(b);
	r.n = 0;
	CHECK_INT_EQ(store_bundle_refs_each(st2, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(!memcmp(r.sha[0], h1, 32));
	CHECK_INT_EQ(check_problems(st2), 0);

	/* the audit sees a stale entry */
	uint8_t tk[STORE_BIDX_TIME_LEN] = {STORE_BIDX_TIME};
	store_time_put(tk + 1, u0);
	memcpy(tk + 9, h0, 32);
	char *e = NULL;
	uint8_t skey[STORE_SKEY_LEN];
	store_skey_make(AR7B, skey);
	rocksdb_put_cf(st2->db, st2->wo, st2->cf[STORE_CF_BUNDLE_INDEX], (char *)tk, sizeof(tk),
		       (char *)skey, sizeof(skey), &e);
	CHECK(e == NULL);
	CHECK(check_problems(st2) >= 1);
	store_close(st2);
	rmdir_rf(dir2);
	store_close(st);
	rmdir_rf(dir);
	pith_buf_release(&nb);
}

static void schema_is(store_t *st, const char *want)
{
	char *val;
	size_t vl;
	CHECK_INT_EQ(store_get_raw(st, STORE_CF_META, (const uint8_t *)STORE_META_SCHEMA,
				   strlen(STORE_META_SCHEMA), &val, &vl, NULL), 0);
	CHECK_MEM_EQ(val, vl, want, strlen(want));
	rocksdb_free(val);
}

/* Turns the store in dir back into schema 3: each event's document in
 * events under its id, no docs column family, schema_version "3".
 * keep_moved: that many documents (the first by time) stay where schema 4
 * keeps them, the docs family with them, as an upgrade cut short leaves
 * it. Schema 2: also no bundle_index column family. */
static void make_schema(const char *dir, int schema, size_t keep_moved)
{
	store_t *st = open_store(dir);
	char *e = NULL;
	store_iter_t it;
	size_t i = 0;
	CHECK_INT_EQ(store_iter_open(st, STORE_CF_DOCS, NULL, 0, NULL, 0, &it, NULL), 0);
	for (; store_iter_valid(&it); store_iter_next(&it), i++) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		if (i < keep_moved)
			continue;
		rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_EVENTS], (const char *)k + 8, 32,
			       (const char *)v, vl, &e);
		CHECK(e == NULL);
		rocksdb_delete_cf(st->db, st->wo, st->cf[STORE_CF_DOCS], (const char *)k, kl, &e);
		CHECK(e == NULL);
	}
	store_iter_close(&it);
	if (!keep_moved) {
		rocksdb_drop_column_family(st->db, st->cf[STORE_CF_DOCS], &e);
		CHECK(e == NULL);
	}
	if (schema == 2) {
		rocksdb_drop_column_family(st->db, st->cf[STORE_CF_BUNDLE_INDEX], &e);
		CHECK(e == NULL);
	}
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
		       strlen(STORE_META_SCHEMA), schema == 2 ? "2" : "3", 1, &e);
	CHECK(e == NULL);
	store_close(st);
}

TEST(bundle_index_upgrade, "opens a schema-2 store: read-only without the bundle index, read-write by building it")
{
	pith_buf_t nb = PITH_BUF_INIT;
	newer_bundle(&nb);
	int64_t u1, us;
	uint8_t h1[32];
	bundle_ident_of(&nb, &u1, h1);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(st, &nb, NULL, NULL), 0);
	store_close(st);
	make_schema(dir, 2, 0);

	/* read-only: opens, reads, and says the index is not there */
	store_opts_t ro = {.read_only = 1, .registry = trust};
	pith_err_t err = {0};
	char pith[PITH_NUMBER_LEN + 1];
	CHECK_INT_EQ(store_open(dir, &ro, &st, &err), 0);
	pith_buf_t sb = PITH_BUF_INIT;
	CHECK_INT_EQ(store_state_get(st, AR7B, &sb, NULL), 0);
	CHECK_INT_EQ(store_bundle_ref_get(st, h1, &us, pith, &err), PITH_EINVAL);
	CHECK(strstr(err.msg, "bundle index") != NULL);
	CHECK_INT_EQ(check_problems(st), 0); /* not damage: built at the next read-write open */
	store_close(st);

	/* read-write: built, schema 3, the audit passes */
	st = open_store(dir);
	CHECK(st != NULL);
	refs_t r = {0};
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(r.us[0] == u1 && !memcmp(r.sha[0], h1, 32));
	CHECK_INT_EQ(store_bundle_ref_get(st, h1, &us, pith, NULL), 0);
	CHECK_STR_EQ(pith, AR7B);
	CHECK_INT_EQ(check_problems(st), 0);
	schema_is(st, STORE_SCHEMA_VERSION);
	store_close(st);
	/* and a store of another version is still refused */
	st = open_store(dir);
	char *e = NULL;
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
		       strlen(STORE_META_SCHEMA), "1", 1, &e);
	store_close(st);
	store_opts_t rw = {.create = 1, .registry = trust};
	CHECK(store_open(dir, &rw, &st, &err) != 0);
	CHECK(strstr(err.msg, "schema version") != NULL);
	rmdir_rf(dir);
	pith_buf_release(&nb);
	pith_buf_release(&sb);
}

typedef struct {
	pith_buf_t all; /* id, length and bytes of each event, in call order */
	size_t n;
} seen_t;

static int seen_one(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	seen_t *s = arg;
	uint32_t l = bytes ? (uint32_t)len : UINT32_MAX;
	pith_buf_append(&s->all, id, 32);
	pith_buf_append(&s->all, &l, sizeof(l));
	if (bytes)
		pith_buf_append(&s->all, bytes, len);
	s->n++;
	return 0;
}

/* Every event of the store as read by id (one by one and in a batch, with
 * an unknown id among them) and by record, into one buffer. */
static void read_all(store_t *st, pith_buf_t *out)
{
	seen_t s = {PITH_BUF_INIT, 0};
	CHECK_INT_EQ(store_events_each(st, NULL, seen_one, &s, NULL), 0);
	size_t n = s.n;
	uint8_t(*ids)[32] = calloc(n + 1, 32);
	const uint8_t *p = s.all.data;
	for (size_t i = 0; i < n; i++) {
		uint32_t l;
		memcpy(ids[i], p, 32);
		memcpy(&l, p + 32, 4);
		p += 36 + (l == UINT32_MAX ? 0 : l);
	}
	memset(ids[n], 0xee, 32); /* not stored */
	CHECK_INT_EQ((int)store_events_get_many(st, (const uint8_t(*)[32])ids, n + 1, seen_one, &s,
						NULL), 0);
	for (size_t i = 0; i < n; i++) {
		pith_buf_t one = PITH_BUF_INIT;
		CHECK_INT_EQ(store_event_get(st, ids[i], &one, NULL), 0);
		pith_buf_append(&s.all, one.data, one.len);
		pith_buf_release(&one);
	}
	pith_buf_t none = PITH_BUF_INIT;
	CHECK_INT_EQ(store_event_get(st, ids[n], &none, NULL), PITH_ENOTFOUND);
	uint8_t skey[STORE_SKEY_LEN];
	pith_event_t **loaded = NULL;
	size_t nl = 0;
	store_skey_make(AR7B, skey);
	CHECK_INT_EQ(store_subject_load(st, skey, &loaded, &nl, NULL), 0);
	CHECK_INT_EQ((int)nl, (int)n);
	for (size_t i = 0; i < nl; i++)
		pith_buf_append(&s.all, loaded[i]->content_hash, 32);
	store_events_free(loaded, nl);
	free(ids);
	out->len = 0;
	pith_buf_append(out, s.all.data, s.all.len);
	pith_buf_release(&s.all);
}

static void note_line(void *arg, const char *line)
{
	pith_buf_puts(arg, line);
	pith_buf_puts(arg, "\n");
}

TEST(get_many_at, "reads events by their times with the same answers as by id, whatever the times say")
{
	evset_t s;
	gen_set(&s, 2);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	timeids_t all = {0};
	CHECK_INT_EQ(store_time_each(st, INT64_MIN, INT64_MAX, collect_time_id, &all, NULL), 0);
	CHECK(all.n > 4);
	/* every event four times over (more than one chunk of STORE_GET_MANY),
	 * then one that is not stored */
	size_t n = 4 * all.n + 1;
	uint8_t(*ids)[32] = calloc(n, 32);
	int64_t *good = calloc(n, sizeof(*good)), *mixed = calloc(n, sizeof(*mixed));
	for (size_t i = 0; i + 1 < n; i++) {
		size_t e = i % all.n;
		memcpy(ids[i], all.id[e], 32);
		good[i] = all.us[e];
		/* right, unknown, a microsecond late, or another event's */
		mixed[i] = i % 4 == 0 ? all.us[e]
			 : i % 4 == 1 ? STORE_TIME_NONE
			 : i % 4 == 2 ? all.us[e] + 1
				      : all.us[(e + 1) % all.n];
	}
	memset(ids[n - 1], 0xee, 32);
	good[n - 1] = all.us[0];
	mixed[n - 1] = STORE_TIME_NONE;
	seen_t byid = {PITH_BUF_INIT, 0}, bytime = {PITH_BUF_INIT, 0}, bymixed = {PITH_BUF_INIT, 0};
	CHECK_INT_EQ((int)store_events_get_many(st, (const uint8_t(*)[32])ids, n, seen_one, &byid,
						NULL), 0);
	CHECK_INT_EQ((int)store_events_get_many_at(st, (const uint8_t(*)[32])ids, good, n, seen_one,
						   &bytime, NULL), 0);
	CHECK_INT_EQ((int)store_events_get_many_at(st, (const uint8_t(*)[32])ids, mixed, n,
						   seen_one, &bymixed, NULL), 0);
	CHECK_INT_EQ(byid.n, n);
	CHECK_MEM_EQ(bytime.all.data, bytime.all.len, byid.all.data, byid.all.len);
	CHECK_MEM_EQ(bymixed.all.data, bymixed.all.len, byid.all.data, byid.all.len);
	pith_buf_release(&byid.all);
	pith_buf_release(&bytime.all);
	pith_buf_release(&bymixed.all);
	free(ids);
	free(good);
	free(mixed);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

TEST(docs_upgrade, "reads a schema-3 store read-only as it is, and moves its documents to time order read-write, also after a move cut short")
{
	for (size_t keep = 0; keep < 3; keep += 2) {
		char *dir = tmpdir();
		store_t *st = open_store(dir);
		CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
		pith_buf_t before = PITH_BUF_INIT, after = PITH_BUF_INIT;
		store_counts_t c0, c1;
		read_all(st, &before);
		store_counts_get(st, &c0);
		store_close(st);
		make_schema(dir, 3, keep);

		/* read-only: the same events by every path, no problem found */
		store_opts_t ro = {.read_only = 1, .registry = trust};
		pith_err_t err = {0};
		CHECK_INT_EQ(store_open(dir, &ro, &st, &err), 0);
		CHECK(keep ? st->cf[STORE_CF_DOCS] != NULL : st->cf[STORE_CF_DOCS] == NULL);
		read_all(st, &after);
		CHECK_MEM_EQ(after.data, after.len, before.data, before.len);
		CHECK_INT_EQ(check_problems(st), 0);
		schema_is(st, "3");
		store_close(st);

		/* read-write: moved, schema 4, the same events, the audit passes;
		 * the upgrade is announced before and after */
		pith_buf_t said = PITH_BUF_INIT;
		store_opts_t rw = {.create = 1, .registry = trust, .notice = note_line,
				   .notice_arg = &said};
		CHECK_INT_EQ(store_open(dir, &rw, &st, &err), 0);
		pith_buf_cstr(&said);
		CHECK(strstr((char *)said.data, "schema 3, upgrading to " STORE_SCHEMA_VERSION) != NULL);
		CHECK(strstr((char *)said.data, "upgraded to schema " STORE_SCHEMA_VERSION " in") != NULL);
		char moved[64];
		snprintf(moved, sizeof(moved), "%llu event documents moved",
			 (unsigned long long)(c0.events - keep));
		CHECK(strstr((char *)said.data, moved) != NULL);
		pith_buf_release(&said);
		schema_is(st, STORE_SCHEMA_VERSION);
		read_all(st, &after);
		CHECK_MEM_EQ(after.data, after.len, before.data, before.len);
		store_counts_get(st, &c1);
		CHECK(c1.events == c0.events && c1.records == c0.records);
		CHECK_INT_EQ(check_problems(st), 0);
		char *v;
		size_t vl;
		uint8_t id[32];
		memcpy(id, before.data, 32);
		CHECK_INT_EQ(store_get_raw(st, STORE_CF_EVENTS, id, 32, &v, &vl, NULL), 0);
		CHECK_INT_EQ((int)vl, 8);
		rocksdb_free(v);
		/* a document left in events of a schema-4 store is a problem */
		char *e = NULL;
		pith_buf_t doc = PITH_BUF_INIT;
		CHECK_INT_EQ(store_event_get(st, id, &doc, NULL), 0);
		rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_EVENTS], (char *)id, 32,
			       (char *)doc.data, doc.len, &e);
		CHECK(e == NULL);
		CHECK(check_problems(st) >= 2); /* the inline document, and its stray copy in docs */
		pith_buf_release(&doc);
		store_close(st);
		pith_buf_release(&before);
		pith_buf_release(&after);
		rmdir_rf(dir);
	}
}

/* The value of `key=` in section `[section]` (as "DBOptions") of the
 * newest OPTIONS file RocksDB wrote in dir; "" if not found. */
static void rocks_option(const char *dir, const char *section, const char *key, char out[64])
{
	char path[600], line[512];
	out[0] = 0;
	DIR *d = opendir(dir);
	unsigned long newest = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, "OPTIONS-", 8) && strtoul(e->d_name + 8, NULL, 10) > newest)
			newest = strtoul(e->d_name + 8, NULL, 10);
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/OPTIONS-%06lu", dir, newest);
	FILE *f = fopen(path, "r");
	int in = 0;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f)) {
		char *l = line + strspn(line, " ");
		l[strcspn(l, "\n")] = 0;
		if (l[0] == '[')
			in = !strncmp(l + 1, section, strlen(section)) && l[1 + strlen(section)] == ']';
		else if (in && !strncmp(l, key, kl) && l[kl] == '=')
			snprintf(out, 64, "%s", l + kl + 1);
	}
	if (f)
		fclose(f);
}

/* The same of section `[TableOptions/BlockBasedTable "cf"]` */
static void table_option(const char *dir, const char *cf, const char *key, char out[64])
{
	char section[128];
	snprintf(section, sizeof(section), "TableOptions/BlockBasedTable \"%s\"", cf);
	rocks_option(dir, section, key, out);
}

TEST(index_in_reader, "keeps the index and filter blocks of aliases, records, states, events and changes out of the block cache")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	store_close(st);
	char v[64];
	static const char *const held[] = {"aliases", "records", "states", "events", "changes"};
	for (size_t i = 0; i < 5; i++) {
		table_option(dir, held[i], "cache_index_and_filter_blocks", v);
		CHECK_STR_EQ(v, "false");
	}
	table_option(dir, "subj", "cache_index_and_filter_blocks", v);
	CHECK_STR_EQ(v, "true");
	rmdir_rf(dir);
}

TEST(read_ahead, "opens table files without the random-access advice, so that the kernel reads ahead of reads in order")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	store_close(st);
	char v[64];
	rocks_option(dir, "DBOptions", "advise_random_on_open", v);
	CHECK_STR_EQ(v, "false");
	rmdir_rf(dir);
}

/* Bytes of the store's write-ahead log files, as status and metrics see them. */
static size_t wal_bytes(store_t *st)
{
	store_usage_t u;
	store_usage_get(st, &u);
	return (size_t)u.wal_bytes;
}

TEST(unlogged, "commits without the log: nothing in it, counted durable only once flushed, all there after close")
{
	evset_t s;
	gen_set_from(&s, 16, 300);
	char *dir = tmpdir();
	store_t *st = NULL;
	pith_err_t err = {0};
	store_opts_t o = {.create = 1, .registry = trust, .unlogged = 1};
	CHECK_INT_EQ(store_open(dir, &o, &st, &err), 0);
	for (size_t i = 0; i < s.n; i++)
		CHECK_INT_EQ(put_bytes(st, &s.b[i], NULL), 0);
	store_counts_t now, disk;
	store_counts_get(st, &now);
	CHECK_INT_EQ(now.events, s.n);
	/* nothing flushed yet: on disk the new store is empty, and no log holds it */
	CHECK_INT_EQ(store_counts_durable(st, &disk, &err), 0);
	CHECK_INT_EQ(disk.events, 0);
	CHECK_INT_EQ(disk.records, 0);
	CHECK_INT_EQ(wal_bytes(st), 0);
	/* a flush takes every family at once (atomic_flush): then durable */
	CHECK_INT_EQ(store_flush(st, &err), 0);
	CHECK_INT_EQ(store_counts_durable(st, &disk, &err), 0);
	CHECK_INT_EQ(disk.events, s.n);
	CHECK_INT_EQ(disk.records, now.records);
	CHECK_INT_EQ(wal_bytes(st), 0);
	store_close(st);
	/* the close flushed every family: all there, the audit clean */
	st = open_store(dir);
	store_counts_get(st, &now);
	CHECK_INT_EQ(now.events, s.n);
	CHECK_INT_EQ(store_counts_durable(st, &disk, &err), 0);
	CHECK_INT_EQ(disk.events, s.n);
	CHECK_INT_EQ(check_problems(st), 0);
	store_close(st);
	/* and again unlogged over a store that has data: what is on disk counts */
	CHECK_INT_EQ(store_open(dir, &o, &st, &err), 0);
	CHECK_INT_EQ(store_counts_durable(st, &disk, &err), 0);
	CHECK_INT_EQ(disk.events, s.n);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

/* Commits events [from, to) of s as one batch; durable: through the log
 * although the store is unlogged (store_batch_need_durable). */
static int commit_range(store_t *st, const evset_t *s, size_t from, size_t to, int durable)
{
	pith_err_t err = {0};
	store_batch_t *b = store_batch_new(st);
	int rc = b ? 0 : -1;
	for (size_t i = from; i < to && !rc; i++) {
		pith_event_t *ev = NULL;
		if ((rc = pith_event_parse(s->b[i].data, s->b[i].len, trust, &ev, NULL, &err)))
			break;
		if (store_batch_add_event(b, ev, NULL, &err) < 0)
			rc = -1;
	}
	if (durable)
		store_batch_need_durable(b);
	if (!rc)
		rc = store_batch_commit(b, NULL, &err);
	if (rc)
		fprintf(stderr, "commit_range: %s\n", err.msg);
	store_batch_free(b);
	return rc;
}

#define CRASH_SET_BASE 700

/* A node's catch-up without the log, killed: commits the quarters of s
 * (q = 4 * s->n / 4 ... ) as steps says, then _exits without closing, as
 * a kill -9 would (the memtables vanish, the log and table files stay).
 * Steps: 'L' a quarter with the log, 'U' store_unlogged_begin, 'u' a
 * quarter without, 'D' a quarter asked durable, 'E' store_unlogged_end.
 * Runs in a process of its own (test_store --crash-child DIR STEPS). Exit status: 0, or the step that went wrong (the change log's cap
 * included: while unlogged it stays at the last change known flushed). */
static int crash_child(const char *dir, const evset_t *s, const char *steps)
{
	store_t *st = NULL;
	pith_err_t err = {0};
	store_opts_t o = {.create = 1, .registry = trust, .atomic_flush = 1};
	if (store_open(dir, &o, &st, &err))
		return 100;
	size_t q = s->n / 4, at = 0;
	uint64_t flushed = 0;
	for (int i = 0; steps[i]; i++) {
		int rc = 0;
		switch (steps[i]) {
		case 'L': case 'u': case 'D':
			rc = commit_range(st, s, at, at + q, steps[i] == 'D');
			at += q;
			if (steps[i] != 'u')
				flushed = store_changes_last(st);
			break;
		case 'U': rc = store_unlogged_begin(st, &err); break;
		case 'E': rc = store_unlogged_end(st, &err); flushed = store_changes_last(st); break;
		}
		if (rc)
			return 1 + i;
		if (store_changes_last(st) != flushed || (steps[i] == 'u' && !store_is_unlogged(st)))
			return 50 + i;
	}
	_exit(0);
}

/* What a store that took the given quarters of s, and nothing else, holds. */
static void quarters_counts(const evset_t *s, int quarters, store_counts_t *out)
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	for (int k = 0; k < quarters; k++)
		CHECK_INT_EQ(commit_range(st, s, k * (s->n / 4), (k + 1) * (s->n / 4), 0), 0);
	store_counts_get(st, out);
	store_close(st);
	rmdir_rf(dir);
}

TEST(unlogged_catchup, "a store switched to commits without the log and killed keeps its flushes and its durable commits, and is consistent")
{
	static const struct {
		const char *steps;
		int kept; /* quarters found after the kill */
	} cases[] = {
		{"LUu", 1},   /* the unlogged commit is lost, the logged one before it kept */
		{"LUuD", 3},  /* a durable commit flushes the one before it first */
		{"LUuDu", 3}, /* and what follows it unlogged is lost again */
		{"LUuEL", 3}, /* the end flushes, then the log is back */
	};
	evset_t s;
	gen_set_from(&s, 16, CRASH_SET_BASE); /* the quarters share records: states depend on earlier ones */
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char *dir = tmpdir();
		pid_t pid = fork();
		if (!pid) {
			execl("/proc/self/exe", "test_store", "--crash-child", dir, cases[c].steps,
			      (char *)NULL);
			_exit(127);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status));
		CHECK_INT_EQ(WEXITSTATUS(status), 0);
		store_t *st = open_store(dir);
		store_counts_t got, want;
		store_counts_get(st, &got);
		quarters_counts(&s, cases[c].kept, &want);
		CHECK_INT_EQ(got.events, want.events);
		CHECK_INT_EQ(got.records, want.records);
		CHECK_INT_EQ(check_problems(st), 0);
		store_close(st);
		rmdir_rf(dir);
	}
	/* a store opened without atomic_flush cannot skip its log */
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_unlogged_begin(st, &err), PITH_EINVAL);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

TEST(wal_bounded, "keeps its write-ahead logs near the bound, flushing the column families that hold the oldest")
{
	evset_t s[3];
	for (unsigned k = 0; k < 3; k++)
		gen_set_from(&s[k], 16, 100 + 16 * k);
	size_t limit = 32u << 10, most = 0, end = 0, unbounded = 0, n = 3 * s[0].n;
	pith_err_t err = {0};
	for (int bounded = 0; bounded < 2; bounded++) {
		char *dir = tmpdir();
		store_t *st = NULL;
		store_opts_t o = {.create = 1, .registry = trust, .wal_bytes = bounded ? limit : 0};
		CHECK_INT_EQ(store_open(dir, &o, &st, &err), 0);
		/* one commit per event: each rewrites its record's growing state */
		for (unsigned k = 0; k < 3; k++)
			for (size_t i = 0; i < s[k].n; i++) {
				CHECK_INT_EQ(put_bytes(st, &s[k].b[i], NULL), 0);
				size_t w = wal_bytes(st);
				most = bounded && w > most ? w : most;
			}
		if (bounded)
			end = wal_bytes(st);
		else
			unbounded = wal_bytes(st); /* nothing flushed: it holds all */
		store_close(st);
		/* what was flushed and what was replayed is all there */
		st = open_store(dir);
		store_counts_t c;
		store_counts_get(st, &c);
		CHECK_INT_EQ(c.events, n);
		CHECK_INT_EQ(check_problems(st), 0);
		store_close(st);
		rmdir_rf(dir);
	}
	/* A flush runs in the background and its log goes after it, and the
	 * logs are checked only at the next commit, so with a bound this small
	 * they overshoot it by several commits (rewritten states of several
	 * KiB each): 130-340 KiB here against 32 KiB, under load too, while
	 * the unbounded store's logs hold all 2.9 MB. What is checked is that
	 * they stay a small fraction of what was written. At 256 MiB (the
	 * default until session 14), the 500,000-event sync of
	 * docs/performance.md at 262f3c4 ended with one log. */
	if (4 * end > unbounded || 2 * most > unbounded)
		fprintf(stderr, "  logs: at most %zu bytes, %zu at the end; bound %zu, %zu unbounded\n",
			most, end, limit, unbounded);
	CHECK(unbounded > 64 * limit);
	CHECK(4 * end <= unbounded);
	CHECK(2 * most <= unbounded);
	for (unsigned k = 0; k < 3; k++)
		set_free(&s[k]);
}

TEST(usage, "reports its table files, logs and memtables, before and after a flush")
{
	evset_t s;
	gen_set(&s, 2);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	store_usage_t u;
	store_usage_get(st, &u);
	CHECK(u.wal_bytes > 2000 && u.memtable_bytes > 0);
	CHECK(u.sst_bytes < 4096); /* the creation's schema version, flushed at its close */
	pith_err_t err = {0};
	CHECK_INT_EQ(store_flush(st, &err), 0);
	store_usage_t f;
	store_usage_get(st, &f);
	CHECK(f.sst_bytes > u.sst_bytes + 1000);
	CHECK(f.wal_bytes < u.wal_bytes);
	store_close(st);
	set_free(&s);
	rmdir_rf(dir);
}

typedef struct counts_reader {
	store_t *st;
	int stop, bad;
	unsigned long reads;
} counts_reader_t;

static void *counts_read_loop(void *arg)
{
	counts_reader_t *r = arg;
	store_counts_t last = {0};
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		store_counts_t c;
		store_counts_get(r->st, &c);
		/* one commit's counters, never a mix: both only grow, and every
		 * record has at least one event */
		if (c.events < last.events || c.records < last.records || c.records > c.events)
			r->bad = 1;
		last = c;
		r->reads++;
	}
	return NULL;
}

TEST(counts_lock_free, "reads the counters without the write mutex, one commit's whole, while commits run")
{
	evset_t s;
	gen_set(&s, 12);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	CHECK(st != NULL);
	/* a commit or a flush holds wmu for long: status and metrics on the
	 * event loop must not wait for it (this would deadlock if they did) */
	pthread_mutex_lock(&st->wmu);
	store_counts_t c;
	store_counts_get(st, &c);
	pthread_mutex_unlock(&st->wmu);
	CHECK(c.events == 0 && c.records == 0);
	counts_reader_t r = {.st = st};
	pthread_t t;
	CHECK_INT_EQ(pthread_create(&t, NULL, counts_read_loop, &r), 0);
	for (size_t i = 0; i < s.n; i++)
		CHECK_INT_EQ(commit_range(st, &s, i, i + 1, 0), 0);
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	CHECK(!r.bad && r.reads > 0);
	store_counts_get(st, &c);
	CHECK_INT_EQ((int)c.events, (int)s.n);
	store_close(st);
	set_free(&s);
	rmdir_rf(dir);
}

/* ---- the change log -------------------------------------------------------- */

typedef struct chg_list {
	size_t n;
	store_change_t c[64];
} chg_list_t;

static int chg_one(void *arg, const store_change_t *ch)
{
	chg_list_t *l = arg;
	if (l->n < sizeof(l->c) / sizeof(l->c[0]))
		l->c[l->n++] = *ch;
	return 0;
}

/* The whole log from after, in one call; *next as store_changes_each. */
static void chg_all(store_t *st, uint64_t after, size_t limit, chg_list_t *l, uint64_t *next)
{
	pith_err_t err = {0};
	memset(l, 0, sizeof(*l));
	if (store_changes_each(st, after, limit, chg_one, l, next, &err))
		fprintf(stderr, "store_changes_each: %s\n", err.msg);
}

/* Whether an entry says what the store says of its record. */
static int chg_matches(store_t *st, const store_change_t *ch)
{
	store_record_info_t r;
	int64_t us;
	uint8_t sha[32];
	if (store_record_get(st, ch->pith_number, &r, NULL) || memcmp(r.state_hash, ch->state_hash, 32) ||
	    r.has_bundle != ch->has_bundle)
		return 0;
	if (!ch->has_bundle)
		return 1;
	int64_t at;
	return !store_bundle_newest(st, ch->pith_number, &us, sha, NULL) && !memcmp(sha, ch->bundle_sha, 32) &&
	       !pith_time_parse(ch->built_at, &at) && at == us;
}

TEST(changes_order, "logs each changed record once, at its latest change, in commit order, and pages from a cursor")
{
	evset_t s;
	gen_set(&s, 3);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	chg_list_t l;
	uint64_t next = 99;
	chg_all(st, 0, 0, &l, &next);
	CHECK_INT_EQ(l.n, 0);
	CHECK_INT_EQ(next, 0);
	CHECK_INT_EQ(store_changes_last(st), 0);
	for (size_t i = 0; i < s.n; i++)
		CHECK_INT_EQ(put_bytes(st, &s.b[i], NULL), 0);
	/* each stored event was a change: the records in the order of their
	 * last events */
	CHECK_INT_EQ(store_changes_last(st), s.n);
	chg_all(st, 0, 0, &l, &next);
	CHECK_INT_EQ(l.n, 3);
	CHECK_INT_EQ(next, s.n);
	for (size_t i = 0; i < l.n && i < 3; i++) {
		CHECK_STR_EQ(l.c[i].pith_number, s.pith[i]);
		CHECK(chg_matches(st, &l.c[i]));
		CHECK_INT_EQ(l.c[i].has_bundle, 0);
	}
	CHECK(l.c[0].seq < l.c[1].seq && l.c[1].seq < l.c[2].seq);
	/* a duplicate changes nothing; a new event of the first record moves
	 * it to the end, under the next number */
	store_outcome_t o;
	CHECK_INT_EQ(put_bytes(st, &s.b[0], &o), 0);
	CHECK_INT_EQ(o, STORE_DUPLICATE);
	CHECK_INT_EQ(store_changes_last(st), s.n);
	pith_buf_t ev = PITH_BUF_INIT;
	char id[PITH_EVENT_ID_LEN + 1];
	tg_event(&ev, &op, "citation_signature", s.pith[0], "t", "2026-02-01T00:00:00Z", "{\"n\":3}",
		 NULL, NULL, 0, -1, id);
	CHECK_INT_EQ(put_bytes(st, &ev, NULL), 0);
	chg_all(st, 0, 0, &l, &next);
	CHECK_INT_EQ(l.n, 3);
	CHECK_STR_EQ(l.c[0].pith_number, s.pith[1]);
	CHECK_STR_EQ(l.c[1].pith_number, s.pith[2]);
	CHECK_STR_EQ(l.c[2].pith_number, s.pith[0]);
	CHECK_INT_EQ(l.c[2].seq, s.n + 1);
	CHECK(chg_matches(st, &l.c[2]));
	/* paging: one at a time from the last cursor until nothing is new;
	 * then next stays where it was */
	uint64_t cur = 0;
	const char *want[3] = {s.pith[1], s.pith[2], s.pith[0]};
	for (int i = 0; i < 3; i++) {
		chg_all(st, cur, 1, &l, &next);
		CHECK_INT_EQ(l.n, 1);
		CHECK_STR_EQ(l.c[0].pith_number, want[i]);
		CHECK_INT_EQ(next, l.c[0].seq);
		CHECK(next > cur);
		cur = next;
	}
	chg_all(st, cur, 1, &l, &next);
	CHECK_INT_EQ(l.n, 0);
	CHECK_INT_EQ(next, cur);
	chg_all(st, UINT64_MAX, 5, &l, &next);
	CHECK_INT_EQ(l.n, 0);
	CHECK(next == UINT64_MAX);
	/* from a cursor in the middle: what changed after it */
	chg_all(st, s.n - 1, 0, &l, &next);
	CHECK_INT_EQ(l.n, 2);
	CHECK_INT_EQ(check_problems(st), 0);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
	pith_buf_release(&ev);
}

TEST(changes_bundle, "logs a newer bundle's hash and built_at, not an older one, and keeps them when events follow")
{
	pith_buf_t nb = PITH_BUF_INIT, ev = PITH_BUF_INIT;
	newer_bundle(&nb);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	chg_list_t l;
	uint64_t next;
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	chg_all(st, 0, 0, &l, &next);
	CHECK_INT_EQ(l.n, 1);
	CHECK_STR_EQ(l.c[0].pith_number, AR7B);
	CHECK_INT_EQ(l.c[0].has_bundle, 1);
	CHECK_STR_EQ(l.c[0].built_at, "2026-08-04T06:52:48Z");
	CHECK(chg_matches(st, &l.c[0]));
	uint64_t first = l.c[0].seq;
	CHECK_INT_EQ(put_bundle(st, &nb, NULL, NULL), 0);
	chg_all(st, 0, 0, &l, &next);
	CHECK_INT_EQ(l.n, 1);
	CHECK(l.c[0].seq > first);
	CHECK_STR_EQ(l.c[0].built_at, "2026-09-01T00:00:00Z");
	CHECK(chg_matches(st, &l.c[0]));
	/* the older one again: not a change */
	uint64_t last = store_changes_last(st);
	store_bundle_outcome_t o;
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, &o, NULL), 0);
	CHECK_INT_EQ(o, STORE_BUNDLE_OLDER);
	CHECK_INT_EQ(store_changes_last(st), last);
	/* an event of the record: a change that keeps the bundle's part */
	char id[PITH_EVENT_ID_LEN + 1];
	tg_event(&ev, &op, "citation_signature", AR7B, "t", "2026-09-02T00:00:00Z", "{\"n\":1}", NULL,
		 NULL, 0, -1, id);
	CHECK_INT_EQ(put_bytes(st, &ev, NULL), 0);
	chg_all(st, last, 0, &l, &next);
	CHECK_INT_EQ(l.n, 1);
	CHECK_INT_EQ(l.c[0].seq, last + 1);
	CHECK_STR_EQ(l.c[0].built_at, "2026-09-01T00:00:00Z");
	CHECK(chg_matches(st, &l.c[0]));
	CHECK_INT_EQ(check_problems(st), 0);
	/* the audit sees a record whose entry went missing */
	uint8_t sk[9] = {'s'};
	char *e = NULL;
	store_be64_put(sk + 1, l.c[0].seq);
	rocksdb_delete_cf(st->db, st->wo, st->cf[STORE_CF_CHANGES], (const char *)sk, sizeof(sk), &e);
	CHECK(e == NULL);
	CHECK(check_problems(st) >= 1);
	store_close(st);
	rmdir_rf(dir);
	pith_buf_release(&nb);
	pith_buf_release(&ev);
}

TEST(changes_atomic, "numbers every record of one commit, keeps its sequence across a reopen, and logs nothing of a failed commit")
{
	evset_t s;
	gen_set(&s, 3);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	store_batch_t *b = store_batch_new(st);
	for (size_t i = 0; i < s.n; i++) {
		pith_event_t *ev = NULL;
		pith_event_parse(s.b[i].data, s.b[i].len, trust, &ev, NULL, NULL);
		store_batch_add_event(b, ev, NULL, NULL);
	}
	pith_err_t err = {0};
	CHECK_INT_EQ(store_batch_commit(b, NULL, &err), 0);
	store_batch_free(b);
	chg_list_t l;
	uint64_t next;
	chg_all(st, 0, 0, &l, &next);
	CHECK_INT_EQ(l.n, 3);
	CHECK_INT_EQ(store_changes_last(st), 3);
	for (size_t i = 0; i < l.n; i++) {
		CHECK_INT_EQ(l.c[i].seq, i + 1);
		CHECK(chg_matches(st, &l.c[i]));
	}
	store_close(st);
	/* read-only: the commit fails as a whole, the log with it */
	store_opts_t ro = {.read_only = 1, .registry = trust};
	CHECK_INT_EQ(store_open(dir, &ro, &st, &err), 0);
	CHECK_INT_EQ(store_changes_last(st), 3);
	CHECK(put_bundle(st, &bundle_bytes, NULL, NULL) != 0);
	store_close(st);
	st = open_store(dir);
	CHECK_INT_EQ(store_changes_last(st), 3);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	chg_all(st, 3, 0, &l, &next);
	CHECK_INT_EQ(l.n, 1);
	CHECK_INT_EQ(l.c[0].seq, 4);
	CHECK_STR_EQ(l.c[0].pith_number, AR7B);
	CHECK_INT_EQ(check_problems(st), 0);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

static int cmp_pith_skey(const void *a, const void *b)
{
	uint8_t x[STORE_SKEY_LEN], y[STORE_SKEY_LEN];
	store_skey_make(a, x);
	store_skey_make(b, y);
	return memcmp(x, y, sizeof(x));
}

TEST(changes_upgrade, "opens a schema-4 store: read-only without the change log, read-write by logging every record once")
{
	evset_t s;
	gen_set(&s, 3);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	char *e = NULL;
	rocksdb_drop_column_family(st->db, st->cf[STORE_CF_CHANGES], &e);
	CHECK(e == NULL);
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
		       strlen(STORE_META_SCHEMA), STORE_SCHEMA_4, 1, &e);
	CHECK(e == NULL);
	store_close(st);

	store_opts_t ro = {.read_only = 1, .registry = trust};
	pith_err_t err = {0};
	chg_list_t l;
	uint64_t next;
	CHECK_INT_EQ(store_open(dir, &ro, &st, &err), 0);
	CHECK_INT_EQ(store_changes_each(st, 0, 0, chg_one, &l, &next, &err), PITH_EINVAL);
	CHECK(strstr(err.msg, "change log") != NULL);
	CHECK_INT_EQ(check_problems(st), 0);
	store_close(st);

	st = open_store(dir);
	CHECK(st != NULL);
	schema_is(st, STORE_SCHEMA_VERSION);
	chg_all(st, 0, 0, &l, &next);
	CHECK_INT_EQ(l.n, 4);
	CHECK_INT_EQ(store_changes_last(st), 4);
	char order[4][PITH_NUMBER_LEN + 1];
	for (size_t i = 0; i < 3; i++)
		memcpy(order[i], s.pith[i], sizeof(order[i]));
	memcpy(order[3], AR7B, sizeof(order[3]));
	qsort(order, 4, sizeof(order[0]), cmp_pith_skey);
	for (size_t i = 0; i < l.n; i++) {
		CHECK_INT_EQ(l.c[i].seq, i + 1);
		CHECK_STR_EQ(l.c[i].pith_number, order[i]);
		CHECK(chg_matches(st, &l.c[i]));
	}
	CHECK_INT_EQ(check_problems(st), 0);
	/* and the next change goes on from there */
	pith_buf_t ev = PITH_BUF_INIT;
	char id[PITH_EVENT_ID_LEN + 1];
	tg_event(&ev, &op, "citation_signature", s.pith[1], "t", "2026-02-01T00:00:00Z", "{}", NULL,
		 NULL, 0, -1, id);
	CHECK_INT_EQ(put_bytes(st, &ev, NULL), 0);
	chg_all(st, 4, 0, &l, &next);
	CHECK_INT_EQ(l.n, 1);
	CHECK_INT_EQ(l.c[0].seq, 5);
	CHECK_STR_EQ(l.c[0].pith_number, s.pith[1]);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
	pith_buf_release(&ev);
}

/* ---- the timestamp rule (schema 6) ----------------------------------------- */

/* Stores an event as a build before the timestamp rule did: read with the
 * store's own lenient parser, no verification. */
static int put_unchecked(store_t *st, const pith_buf_t *b)
{
	pith_event_t *ev = NULL;
	pith_err_t err = {0};
	int rc = pith_event_parse_stored(b->data, b->len, &ev, &err);
	if (!rc)
		rc = store_event_put(st, ev, NULL, &err);
	if (rc)
		fprintf(stderr, "put_unchecked: %s\n", err.msg);
	pith_event_free(ev);
	return rc;
}

/* A bundle of pith by the test registry key over events (JSON texts). */
static void bundle_of(const char *pith, const pith_buf_t *const *evs, size_t n,
		      const char *built_at, pith_buf_t *out)
{
	pith_event_t *list[8];
	pith_err_t err = {0};
	for (size_t i = 0; i < n; i++)
		CHECK_INT_EQ(pith_event_parse_stored(evs[i]->data, evs[i]->len, &list[i], NULL), 0);
	CHECK_INT_EQ(tg_bundle(pith, list, n, &reg, trust, built_at, out, &err), 0);
	for (size_t i = 0; i < n; i++)
		pith_event_free(list[i]);
}

typedef struct rec_list {
	size_t n;
	store_record_info_t r[32];
} rec_list_t;

static int rec_one(void *arg, const store_record_info_t *rec)
{
	rec_list_t *l = arg;
	if (l->n < 32)
		l->r[l->n++] = *rec;
	return 0;
}

static int ref_one_buf(void *arg, int64_t us, const uint8_t sha[32], const char *pith)
{
	pith_buf_append(arg, &us, sizeof(us));
	pith_buf_append(arg, sha, 32);
	pith_buf_puts(arg, pith);
	return 0;
}

static int time_one(void *arg, int64_t us, const uint8_t id[32])
{
	pith_buf_append(arg, &us, sizeof(us));
	pith_buf_append(arg, id, 32);
	return 0;
}

/* Everything a peer or a reader sees of a store: every record's summary
 * and state, the time index, the bundle index, the counters. */
static void store_view(store_t *st, pith_buf_t *out)
{
	rec_list_t l = {0};
	store_counts_t c;
	pith_buf_t sb = PITH_BUF_INIT;
	pith_buf_reset(out);
	CHECK_INT_EQ(store_records_each(st, rec_one, &l, NULL), 0);
	for (size_t i = 0; i < l.n; i++) {
		pith_buf_puts(out, l.r[i].pith_number);
		pith_buf_append(out, &l.r[i].event_count, sizeof(l.r[i].event_count));
		pith_buf_append(out, l.r[i].state_hash, 32);
		pith_buf_putc(out, (uint8_t)l.r[i].has_bundle);
		state_of(st, l.r[i].pith_number, &sb);
		pith_buf_append(out, sb.data, sb.len);
	}
	CHECK_INT_EQ(store_time_each(st, INT64_MIN, INT64_MAX, time_one, out, NULL), 0);
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one_buf, out, NULL), 0);
	store_counts_get(st, &c);
	pith_buf_append(out, &c, sizeof(c));
	pith_buf_release(&sb);
}

static int chg_logged(const chg_list_t *l, const char *pith)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->c[i].pith_number, pith))
			return 1;
	return 0;
}

TEST(time_rule_upgrade, "opens a schema-5 store holding timestamps outside the rule: read-only as it is, read-write by removing them and recomputing their records as a fresh store holds them")
{
	evset_t s;
	gen_set(&s, 3);
	char *dir = tmpdir(), *fresh_dir = tmpdir();
	char gone[PITH_NUMBER_LEN + 1], id[PITH_EVENT_ID_LEN + 1];
	pith_buf_t rec = PITH_BUF_INIT, bad[6], b0 = PITH_BUF_INIT, b1 = PITH_BUF_INIT,
		   b2 = PITH_BUF_INIT, tmp = PITH_BUF_INIT;
	memset(bad, 0, sizeof(bad));
	tg_record(700, &rec, gone);
	/* record 0: years 9999 and 0000; record 1: 29 February of a common
	 * year and a leap second; record "gone": only events of year 0000
	 * and 9999; record 2: a valid event with a signed_at of year 9999 */
	tg_event(&bad[0], &op, "citation_signature", s.pith[0], "t", "9999-01-01T00:00:00Z", "{}",
		 NULL, NULL, 0, -1, id);
	tg_event(&bad[1], &reg, "mirror_hint", s.pith[0], "t", "0000-06-01T00:00:00Z", "{}", NULL,
		 NULL, 0, -1, id);
	tg_event(&bad[2], &op, "correction", s.pith[1], "record", "2025-02-29T12:00:00Z", "{}", NULL,
		 NULL, 0, -1, id);
	tg_event(&bad[3], &op, "author_attestation", s.pith[1], "t", "2026-01-05T23:59:60Z", "{}",
		 NULL, NULL, 0, -1, id);
	tg_event(&bad[4], &reg, "record_created", gone, "record", "0000-01-01T00:00:00Z", NULL, NULL,
		 NULL, 0, 700, id);
	tg_event(&tmp, &op, "storage_attestation", s.pith[2], "t", "2026-01-07T00:00:00Z", "{}", NULL,
		 NULL, 0, -1, id);
	CHECK_INT_EQ(tg_resign(tmp.data, tmp.len, &op, "9999-12-31T23:59:59Z", &bad[5]), 0);
	/* bundles: record 0's built in 9999; record 1's holding its leap
	 * second; record 2's valid, and kept */
	const pith_buf_t *e0[1] = {&s.b[0]}, *e1[2] = {&s.b[11], &bad[3]}, *e2[1] = {&s.b[22]};
	bundle_of(s.pith[0], e0, 1, "9999-01-01T00:00:00.5Z", &b0);
	bundle_of(s.pith[1], e1, 2, "2026-03-01T00:00:00Z", &b1);
	bundle_of(s.pith[2], e2, 1, "2026-03-01T00:00:00Z", &b2);

	/* the old store: everything, as a build before the rule stored it */
	store_t *st = filled_store(dir, &s);
	for (size_t i = 0; i < 6; i++)
		CHECK_INT_EQ(put_unchecked(st, &bad[i]), 0);
	CHECK_INT_EQ(put_bundle(st, &b0, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(st, &b1, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(st, &b2, NULL, NULL), 0);
	uint64_t last = store_changes_last(st);
	char *e = NULL;
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
		       strlen(STORE_META_SCHEMA), STORE_SCHEMA_5, 1, &e);
	CHECK(e == NULL);
	store_close(st);

	/* a fresh store: what a node given all of it keeps */
	store_t *fr = filled_store(fresh_dir, &s);
	CHECK_INT_EQ(put_bundle(fr, &b2, NULL, NULL), 0);
	for (size_t i = 0; i < 6; i++) {
		pith_event_t *ev = NULL;
		CHECK(pith_event_parse(bad[i].data, bad[i].len, trust, &ev, NULL, NULL) != 0);
	}
	pith_report_t rep = {0};
	json_doc_t *d0 = parse(b0.data, b0.len), *d1 = parse(b1.data, b1.len);
	CHECK(pith_bundle_verify(json_doc_root(d0), trust, &rep) != 0);
	CHECK(pith_bundle_verify(json_doc_root(d1), trust, &rep) != 0);
	pith_report_release(&rep);
	json_doc_free(d0);
	json_doc_free(d1);
	pith_buf_t want = PITH_BUF_INIT, got = PITH_BUF_INIT;
	store_view(fr, &want);
	store_counts_t cf;
	store_counts_get(fr, &cf);
	CHECK_INT_EQ(check_problems(fr), 0);

	/* read-only: schema 5 as it is; the audit names each item outside */
	store_opts_t ro = {.read_only = 1, .registry = trust};
	pith_err_t err = {0};
	CHECK_INT_EQ(store_open(dir, &ro, &st, &err), 0);
	schema_is(st, STORE_SCHEMA_5);
	CHECK_INT_EQ(check_problems(st), 8); /* 6 events, 2 bundles */
	pith_buf_t sb = PITH_BUF_INIT;
	state_of(st, gone, &sb);
	CHECK(sb.len > 0);
	store_close(st);

	/* read-write: upgraded, told line by line */
	pith_buf_t said = PITH_BUF_INIT;
	store_opts_t rw = {.create = 1, .registry = trust, .notice = note_line, .notice_arg = &said};
	CHECK_INT_EQ(store_open(dir, &rw, &st, &err), 0);
	pith_buf_cstr(&said);
	CHECK(strstr((char *)said.data, "schema 5, upgrading to 6") != NULL);
	CHECK(strstr((char *)said.data, "created_at '9999-01-01T00:00:00Z' is outside") != NULL);
	CHECK(strstr((char *)said.data, "signature.signed_at '9999-12-31T23:59:59Z'") != NULL);
	CHECK(strstr((char *)said.data, "events[1].created_at is outside") != NULL);
	CHECK(strstr((char *)said.data, "6 events and 2 bundles removed, 4 records recomputed, "
				"1 of them left empty") != NULL);
	schema_is(st, STORE_SCHEMA_VERSION);
	store_view(st, &got);
	CHECK_MEM_EQ(got.data, got.len, want.data, want.len);
	store_counts_t c;
	store_counts_get(st, &c);
	CHECK(c.events == cf.events && c.records == cf.records && c.bundles == 1 && cf.bundles == 1);
	CHECK_INT_EQ(check_problems(st), 0);
	CHECK_INT_EQ(store_state_get(st, gone, &sb, NULL), PITH_ENOTFOUND);
	/* the change log lists the three records that changed, after what it
	 * had; the record gone is not in it */
	chg_list_t l;
	uint64_t next;
	chg_all(st, last, 0, &l, &next);
	CHECK_INT_EQ(l.n, 3);
	for (size_t i = 0; i < 3; i++)
		CHECK(chg_logged(&l, s.pith[i]));
	for (size_t i = 0; i < l.n; i++)
		CHECK(l.c[i].seq > last && chg_matches(st, &l.c[i]));
	chg_all(st, 0, 0, &l, &next);
	CHECK(!chg_logged(&l, gone));
	store_close(st);

	/* cut short after its last record, before the version: done again,
	 * nothing more to do */
	st = open_store(dir);
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
		       strlen(STORE_META_SCHEMA), STORE_SCHEMA_5, 1, &e);
	CHECK(e == NULL);
	store_close(st);
	said.len = 0;
	CHECK_INT_EQ(store_open(dir, &rw, &st, &err), 0);
	pith_buf_cstr(&said);
	CHECK(strstr((char *)said.data, "0 events and 0 bundles removed, 0 records") != NULL);
	store_view(st, &got);
	CHECK_MEM_EQ(got.data, got.len, want.data, want.len);
	CHECK_INT_EQ(check_problems(st), 0);
	store_close(st);

	store_close(fr);
	for (size_t i = 0; i < 6; i++)
		pith_buf_release(&bad[i]);
	pith_buf_release(&rec);
	pith_buf_release(&b0);
	pith_buf_release(&b1);
	pith_buf_release(&b2);
	pith_buf_release(&tmp);
	pith_buf_release(&want);
	pith_buf_release(&got);
	pith_buf_release(&sb);
	pith_buf_release(&said);
	rmdir_rf(dir);
	rmdir_rf(fresh_dir);
	set_free(&s);
}

/* ---- failures ------------------------------------------------------------- */

static int has_bytes(const uint8_t *p, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= n; i++)
		if (!memcmp(p + i, needle, k))
			return 1;
	return 0;
}

/* Flips the byte in the middle of the largest table file of docs in dir
 * (its column family's name is in the file's properties block). */
static int corrupt_docs_table(const char *dir)
{
	char best[4200] = "";
	long best_size = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[4200];
		pith_buf_t b = PITH_BUF_INIT;
		size_t l = strlen(e->d_name);
		if (l < 4 || strcmp(e->d_name + l - 4, ".sst"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (!stu_read_file(p, &b) && has_bytes(b.data, b.len, "namedocs") &&
		    (long)b.len > best_size) {
			best_size = (long)b.len;
			snprintf(best, sizeof(best), "%s", p);
		}
		pith_buf_release(&b);
	}
	if (d)
		closedir(d);
	FILE *f = best[0] ? fopen(best, "r+b") : NULL;
	if (!f)
		return -1;
	fseek(f, best_size / 2, SEEK_SET);
	int c = fgetc(f);
	fseek(f, best_size / 2, SEEK_SET);
	fputc(c ^ 0x40, f);
	fclose(f);
	return 0;
}

typedef struct err_seen {
	int reads, writes;
	char last[300];
} err_seen_t;

static void on_store_error(void *arg, int what, const char *line)
{
	err_seen_t *s = arg;
	if (what == STORE_OP_READ)
		s->reads++;
	else
		s->writes++;
	snprintf(s->last, sizeof(s->last), "%s", line);
}

static int count_read(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	(void)id;
	(void)len;
	*(size_t *)arg += bytes != NULL;
	return 0;
}

TEST(corrupt_block, "reads a corrupted block as an error, counted and told, never as an absent event")
{
	evset_t s;
	gen_set(&s, 16);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_flush(st, &err), 0);
	uint8_t(*ids)[32] = calloc(s.n, 32);
	size_t n = 0;
	for (size_t i = 0; i < s.n; i++) {
		pith_event_t *ev = NULL;
		if (!pith_event_parse(s.b[i].data, s.b[i].len, trust, &ev, NULL, NULL) &&
		    !store_event_id_parse(ev->event_id, ids[n], NULL))
			n++;
		pith_event_free(ev);
	}
	CHECK(n > 100);
	store_close(st);
	CHECK_INT_EQ(corrupt_docs_table(dir), 0);

	err_seen_t seen = {0};
	store_opts_t o = {.create = 1, .registry = trust, .on_error = on_store_error,
			  .on_error_arg = &seen};
	CHECK_INT_EQ(store_open(dir, &o, &st, &err), 0);
	store_errors_t e;
	store_errors_get(st, &e);
	CHECK(e.writable && e.read_errors == 0 && e.write_errors == 0 && !e.last_error[0]);
	CHECK(store_is_healthy(st, STORE_READ_ERROR_WINDOW_US, NULL, 0));

	size_t got = 0;
	size_t bad =
		store_events_get_many(st, (const uint8_t(*)[32])ids, n, count_read, &got, &err);
	CHECK(bad > 0 && bad < 40);
	CHECK_INT_EQ((int)(got + bad), (int)n);
	CHECK(strstr(err.msg, "Corruption") && strstr(err.msg, "sha256:"));
	store_errors_get(st, &e);
	CHECK_INT_EQ((int)e.read_errors, (int)bad);
	CHECK_INT_EQ(seen.reads, (int)bad);
	CHECK(strstr(e.last_error, "Corruption") != NULL);
	char why[400];
	CHECK(!store_is_healthy(st, STORE_READ_ERROR_WINDOW_US, why, sizeof(why)));
	CHECK(strstr(why, "read failed") != NULL);
	CHECK(store_is_healthy(st, 0, NULL, 0)); /* outside the window */

	/* one by one: PITH_EIO for the unreadable ones, never ENOTFOUND */
	size_t eio = 0;
	for (size_t i = 0; i < n; i++) {
		pith_buf_t b = PITH_BUF_INIT;
		int rc = store_event_get(st, ids[i], &b, &err);
		CHECK(rc == 0 || rc == PITH_EIO);
		eio += rc == PITH_EIO;
		pith_buf_release(&b);
	}
	CHECK_INT_EQ((int)eio, (int)bad);
	/* a record scan that meets the block fails, and says why */
	int failed = 0;
	for (size_t r = 0; r < s.nrec; r++) {
		size_t k = 0;
		int rc = store_events_each(st, s.pith[r], count_read, &k, &err);
		CHECK(rc == 0 || rc == PITH_EIO);
		failed += rc == PITH_EIO;
	}
	CHECK(failed > 0);
	CHECK_INT_EQ(seen.writes, 0);
	store_errors_get(st, &e);
	CHECK(e.writable && e.write_errors == 0);
	/* writes still work, and the probe says so */
	CHECK_INT_EQ(store_write_probe(st, &err), 0);
	free(ids);
	store_close(st);
	set_free(&s);
	rmdir_rf(dir);
}

/* A RocksDB database in dir with the first ncf of the store's column
 * families: what a creation killed between two of them left behind. */
static void partial_db(const char *dir, int ncf)
{
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(o, 1);
	rocksdb_options_set_create_missing_column_families(o, 1);
	const rocksdb_options_t *cfo[STORE_NCF];
	rocksdb_column_family_handle_t *h[STORE_NCF];
	for (int i = 0; i < ncf; i++)
		cfo[i] = o;
	char *e = NULL;
	rocksdb_t *db = rocksdb_open_column_families(o, dir, ncf, store_cf_names, cfo, h, &e);
	CHECK(db && !e);
	for (int i = 0; db && i < ncf; i++)
		rocksdb_column_family_handle_destroy(h[i]);
	if (db)
		rocksdb_close(db);
	rocksdb_free(e);
	rocksdb_options_destroy(o);
}

static int exists(const char *dir, const char *name)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

TEST(creation_atomic, "a store is created whole or not at all; an interrupted creation is told and finished")
{
	char *dir = tmpdir();
	char s[600], stale[700], p[600], none[600], empty[600];
	snprintf(s, sizeof(s), "%s/s", dir);
	snprintf(p, sizeof(p), "%s/p", dir);
	snprintf(none, sizeof(none), "%s/none", dir);
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	/* a creation killed half-way, by a process that is gone */
	pid_t dead = fork();
	if (!dead)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(stale, sizeof(stale), "%s.creating-%ld", s, (long)dead);
	partial_db(stale, 4);
	store_t *st = NULL;
	pith_err_t err = {0};
	store_opts_t ro = {.read_only = 1, .registry = trust};
	store_opts_t rw = {.create = 1, .registry = trust};
	CHECK_INT_EQ(store_open(s, &rw, &st, &err), 0);
	CHECK(exists(s, "CURRENT"));
	CHECK(access(stale, F_OK) != 0);
	DIR *d = opendir(dir);
	struct dirent *de;
	int leftovers = 0;
	while (d && (de = readdir(d)))
		leftovers += strstr(de->d_name, ".creating-") != NULL;
	if (d)
		closedir(d);
	CHECK_INT_EQ(leftovers, 0);
	store_close(st);
	CHECK_INT_EQ(store_open(s, &ro, &st, &err), 0);
	store_close(st);
	/* onto an empty directory that is already there */
	CHECK_INT_EQ(mkdir(empty, 0755), 0);
	CHECK_INT_EQ(store_open(empty, &rw, &st, &err), 0);
	store_close(st);
	CHECK_INT_EQ(store_open(empty, &ro, &st, &err), 0);
	store_close(st);
	/* a store made in place by an older build and killed between two
	 * column families: a reader says so, a writer finishes it */
	partial_db(p, 5);
	CHECK(store_open(p, &ro, &st, &err) != 0);
	CHECK_STR_CONTAINS(err.msg, "creation was interrupted");
	CHECK_STR_CONTAINS(err.msg, "import /dev/null");
	CHECK_INT_EQ(store_open(p, &rw, &st, &err), 0);
	store_close(st);
	CHECK_INT_EQ(store_open(p, &ro, &st, &err), 0);
	store_counts_t n;
	store_counts_get(st, &n);
	CHECK_INT_EQ(n.events, 0);
	store_close(st);
	/* no store at all */
	CHECK(store_open(none, &ro, &st, &err) != 0);
	CHECK_STR_CONTAINS(err.msg, "no store here");
	rmdir_rf(dir);
}

TEST(changes_newest_first_skips_no_history,
     "pages the change log newest-first without stepping over the superseded entries before it")
{
	evset_t s;
	gen_set(&s, 3);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	pith_buf_t ev = PITH_BUF_INIT;
	char id[PITH_EVENT_ID_LEN + 1], at[32], pl[32];
	/* 300 changes of one record, each committed alone: 299 deleted
	 * entries at the front of the log, then the other records */
	for (int i = 0; i < 300; i++) {
		snprintf(at, sizeof(at), "2026-03-01T00:%02d:%02dZ", i / 60, i % 60);
		snprintf(pl, sizeof(pl), "{\"n\":%d}", i);
		pith_buf_reset(&ev);
		tg_event(&ev, &op, "citation_signature", s.pith[0], "t", at, pl, NULL, NULL, 0, -1, id);
		CHECK_INT_EQ(put_bytes(st, &ev, NULL), 0);
	}
	for (size_t i = 0; i < s.n; i++)
		CHECK_INT_EQ(put_bytes(st, &s.b[i], NULL), 0);
	uint64_t last = store_changes_last(st), next = 0;
	chg_list_t l = {0};
	pith_err_t err = {0};
	/* the same page once first: the store turns RocksDB's perf counting
	 * off once per thread and file (store_perf_off), so a first call made
	 * with counting on would turn it off and count nothing */
	CHECK_INT_EQ(store_changes_each_before(st, last, 1, chg_one, &l, &next, &err), 0);
	memset(&l, 0, sizeof(l));
	rocksdb_set_perf_level(rocksdb_enable_count);
	rocksdb_perfcontext_t *pc = rocksdb_perfcontext_create();
	rocksdb_perfcontext_reset(pc);
	CHECK_INT_EQ(store_changes_each_before(st, last, 1, chg_one, &l, &next, &err), 0);
	uint64_t skipped = rocksdb_perfcontext_metric(pc, rocksdb_internal_delete_skipped_count);
	uint64_t compared = rocksdb_perfcontext_metric(pc, rocksdb_user_key_comparison_count);
	rocksdb_perfcontext_destroy(pc);
	rocksdb_set_perf_level(rocksdb_disable);
	CHECK(compared > 0); /* it counted: the check below is not vacuous */
	CHECK_INT_EQ(l.n, 1);
	/* what lies between the last live entries (about 20 here), not the
	 * 299 the old open stepped over seeking forward to sequence 1 first */
	CHECK(skipped < 100);
	if (skipped >= 100)
		fprintf(stderr, "# %llu deleted entries stepped over\n", (unsigned long long)skipped);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
	pith_buf_release(&ev);
}

static uint64_t l0_files(store_t *st, int cf)
{
	uint64_t v = 999;
	CHECK_INT_EQ(store_cf_property(st, cf, "rocksdb.num-files-at-level0", &v), 0);
	return v;
}

/* One bulk load in mode: level 0 holds 10 files of the index families (in
 * both modes under the trigger) and 40 of states (past every other bulk
 * trigger: STORE_BULK_L0_WRITTEN), and of aliases more than the index
 * families' trigger. */
static void bulk_load_in(enum store_bulk_mode mode, int fresh)
{
	evset_t s;
	gen_set(&s, 12);
	char *dir = tmpdir();
	store_t *st = fresh ? open_fresh(dir) : open_store(dir);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_bulk_begin(st, mode, &err), 0);
	/* one table file per family and flush: 10 is past the usual trigger (4)
	 * and under the bulk ones */
	size_t per = s.n / 10;
	for (size_t i = 0; i < s.n; i++) {
		put_bytes(st, &s.b[i], NULL);
		if ((i + 1) % per == 0 && (i + 1) / per <= 10)
			CHECK_INT_EQ(store_flush(st, &err), 0);
	}
	CHECK_INT_EQ(l0_files(st, STORE_CF_EVENTS), 10);
	CHECK_INT_EQ(l0_files(st, STORE_CF_ALIASES), 10);
	CHECK_INT_EQ(l0_files(st, STORE_CF_STATES), 10);
	/* 30 more flushes: 40 is past every bulk trigger but that of states
	 * and aliases, which commits only write (STORE_BULK_L0_WRITTEN) */
	evset_t s2;
	gen_set_from(&s2, 16, 1000);
	size_t flushes = 0;
	for (size_t i = 0; i < s2.n; i++) {
		put_bytes(st, &s2.b[i], NULL);
		if ((i + 1) % (s2.n / 30) == 0 && flushes < 30) {
			CHECK_INT_EQ(store_flush(st, &err), 0);
			flushes++;
		}
	}
	CHECK_INT_EQ(l0_files(st, STORE_CF_STATES), 40);
	CHECK(l0_files(st, STORE_CF_ALIASES) > 16); /* one per record (16 of them), and 10 before */
	if (fresh) {
		/* filled from empty: the index families wait too, subj (read
		 * by prefix scans) included, in an import and in a node's
		 * first catch-up */
		CHECK_INT_EQ(l0_files(st, STORE_CF_EVENTS), 40);
		CHECK_INT_EQ(l0_files(st, STORE_CF_RECORDS), 40);
		CHECK_INT_EQ(l0_files(st, STORE_CF_SUBJ), 40);
	}
	CHECK_INT_EQ(store_bulk_end(st, 1, &err), 0);
	CHECK(l0_files(st, STORE_CF_EVENTS) < 4);
	CHECK(l0_files(st, STORE_CF_ALIASES) < 4);
	CHECK(l0_files(st, STORE_CF_STATES) < 4);
	CHECK(l0_files(st, STORE_CF_SUBJ) < 4);
	store_counts_t c;
	store_counts_get(st, &c);
	CHECK_INT_EQ(c.events, s.n + s2.n);
	CHECK_INT_EQ(check_problems(st), 0);
	set_free(&s2);
	/* byte-identical states to a store filled without it */
	char *dir2 = tmpdir();
	store_t *plain = filled_store(dir2, &s);
	for (size_t r = 0; r < s.nrec; r++) {
		pith_buf_t a = PITH_BUF_INIT, b = PITH_BUF_INIT;
		state_of(st, s.pith[r], &a);
		state_of(plain, s.pith[r], &b);
		CHECK(a.len > 0);
		CHECK_MEM_EQ(a.data, a.len, b.data, b.len);
		pith_buf_release(&a);
		pith_buf_release(&b);
	}
	store_close(plain);
	store_close(st);
	rmdir_rf(dir);
	rmdir_rf(dir2);
	set_free(&s);
}

TEST(bulk_load, "in bulk mode level 0 holds more files; its end compacts them and leaves the same store")
{
	bulk_load_in(STORE_BULK_SYNC, 0);
	bulk_load_in(STORE_BULK_SYNC, 1);
	bulk_load_in(STORE_BULK_IMPORT, 0);
	bulk_load_in(STORE_BULK_IMPORT, 1);
}

int main(int argc, char **argv)
{
	setup();
	if (argc == 4 && !strcmp(argv[1], "--crash-child")) {
		/* a fresh process (unlogged_catchup): RocksDB's threads do not
		 * survive a fork */
		evset_t s;
		gen_set_from(&s, 16, CRASH_SET_BASE);
		return crash_child(argv[2], &s, argv[3]);
	}
	RUN(registry_bundle_state);
	RUN(resolve_forms);
	RUN(bundle_twice);
	RUN(resigned_deterministic);
	RUN(batch_duplicates);
	RUN(order_independent);
	RUN(lanes_same_states);
	RUN(lanes_many_records);
	RUN(unsorted_write_only);
	RUN(cf_quiesce);
	RUN(bulk_side);
	RUN(fpset);
	RUN(fresh_records);
	RUN(indexes);
	RUN(time_each_after);
	RUN(derived_aliases);
	RUN(newest_bundle);
	RUN(bundle_tie);
	RUN(bundle_order_public);
	RUN(checkpoint_while_open);
	RUN(warm_page_cache);
	RUN(read_ahead);
	RUN(reopen_and_lock);
	RUN(creation_atomic);
	RUN(bulk_load);
	RUN(check_finds_damage);
	RUN(check_threads_same_report);
	RUN(own_bytes_checked);
	RUN(nothing_on_failure);
	RUN(bundle_index_put);
	RUN(bundle_index_upgrade);
	RUN(get_many_at);
	RUN(docs_upgrade);
	RUN(index_in_reader);
	RUN(unlogged);
	RUN(unlogged_catchup);
	RUN(wal_bounded);
	RUN(usage);
	RUN(counts_lock_free);
	RUN(changes_order);
	RUN(changes_newest_first_skips_no_history);
	RUN(changes_bundle);
	RUN(changes_atomic);
	RUN(changes_upgrade);
	RUN(time_rule_upgrade);
	RUN(corrupt_block);
	pith_trust_free(trust);
	pith_buf_release(&bundle_bytes);
	return test_done();
}
