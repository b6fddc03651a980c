/* The store (store/store.h), ingest: the registry bundle and generated events, resolution,
 * duplicates and re-signed copies, order independence across stores and
 * merge lanes, the side families of a catch-up. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "test_store_util.h"

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

int main(void)
{
	setup();
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
	pith_trust_free(trust);
	pith_buf_release(&bundle_bytes);
	return test_done();
}
