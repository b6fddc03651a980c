/* Reconciliation between two real stores (store/recon_index.h): each store's
 * recon set is loaded from its time index, a session finds the difference,
 * every needed event is fetched from the other store and goes through the
 * normal validated path (pith_event_parse, store_event_put), the sets are
 * kept current with store_recon_index_add, and the stores end identical. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_test_util.h"
#include "bundle.h"
#include "recon_index.h"
#include "store.h"
#include "test_util.h"
#include "testgen.h"

static tg_key_t reg, op;
static pith_trust_t *trust;

static char *tmpdir(void)
{
	return stu_tmpdir("test_recon_index");
}

static void rmdir_rf(char *d)
{
	stu_rmdir_rf(d);
}

static store_t *open_store(const char *dir)
{
	return stu_open_store(dir, trust);
}

/* Validates bytes and stores them; keeps set current if given. */
static int put_event(store_t *st, recon_set_t *set, const uint8_t *p, size_t n)
{
	pith_event_t *ev = NULL;
	pith_err_t err = {0};
	store_outcome_t out;
	int rc = pith_event_parse(p, n, trust, &ev, NULL, &err);
	if (!rc)
		rc = store_event_put(st, ev, &out, &err);
	if (rc)
		fprintf(stderr, "put_event: %s\n", err.msg);
	else if (set && out == STORE_STORED)
		rc = store_recon_index_add(set, ev);
	pith_event_free(ev);
	return rc;
}

/* nrec records, each with a record_created and 6 more events at distinct
 * times (some sharing a second across records). */
typedef struct evs {
	pith_buf_t b[512];
	size_t n;
} evs_t;

static void gen(evs_t *e, size_t nrec)
{
	static const char *const types[] = {"graph_snapshot", "author_attestation",
					    "timestamp_anchor", "storage_attestation",
					    "citation_signature", "mirror_hint"};
	memset(e, 0, sizeof(*e));
	for (size_t r = 0; r < nrec; r++) {
		char pith[PITH_NUMBER_LEN + 1], id[PITH_EVENT_ID_LEN + 1], at[32];
		pith_buf_t rec = PITH_BUF_INIT;
		tg_record((unsigned)(300 + r), &rec, pith);
		pith_buf_release(&rec);
		tg_event(&e->b[e->n++], &reg, "record_created", pith, "record",
			 "2026-01-01T00:00:00Z", NULL, NULL, NULL, 0, (int)(300 + r), id);
		for (size_t k = 0; k < 6; k++) {
			snprintf(at, sizeof(at), "2026-0%u-1%uT0%u:%02u:00Z", (unsigned)(1 + k),
				 (unsigned)(r % 10), (unsigned)(k % 10), (unsigned)(r % 60));
			tg_event(&e->b[e->n++], k % 2 ? &op : &reg, types[k], pith, "t", at,
				 "{\"n\":1}", NULL, NULL, 0, -1, id);
		}
	}
}

static void evs_free(evs_t *e)
{
	for (size_t i = 0; i < e->n; i++)
		pith_buf_release(&e->b[i]);
}

typedef struct timelist {
	uint8_t (*ids)[32];
	int64_t *us;
	size_t n;
} timelist_t;

static int collect(void *arg, int64_t us, const uint8_t id[32])
{
	timelist_t *t = arg;
	t->ids = realloc(t->ids, (t->n + 1) * 32);
	t->us = realloc(t->us, (t->n + 1) * sizeof(int64_t));
	memcpy(t->ids[t->n], id, 32);
	t->us[t->n++] = us;
	return 0;
}

static int same_time_index(store_t *a, store_t *b)
{
	timelist_t ta = {0}, tb = {0};
	store_time_each(a, INT64_MIN, INT64_MAX, collect, &ta, NULL);
	store_time_each(b, INT64_MIN, INT64_MAX, collect, &tb, NULL);
	int same = ta.n == tb.n && (ta.n == 0 || (memcmp(ta.ids, tb.ids, ta.n * 32) == 0 &&
						   memcmp(ta.us, tb.us, ta.n * 8) == 0));
	free(ta.ids);
	free(ta.us);
	free(tb.ids);
	free(tb.us);
	return same;
}

/* One session between sa (initiator) and sb; what each side learns it
 * has that the other lacks (have_*, may be NULL) and lacks (need_*). */
static void session(recon_set_t *sa, recon_set_t *sb, recon_ids_t *have_a, recon_ids_t *need_a,
		    recon_ids_t *have_b, recon_ids_t *need_b)
{
	pith_err_t err = {0};
	recon_session_t *ia = recon_session_new(sa, RECON_INITIATOR, NULL, NULL, &err);
	recon_session_t *rb = recon_session_new(sb, RECON_RESPONDER, NULL, NULL, &err);
	pith_buf_t m1 = PITH_BUF_INIT, m2 = PITH_BUF_INIT;
	int rc = recon_initiate(ia, &m1, &err);
	while (!rc) {
		rc = recon_respond(rb, m1.data, m1.len, &m2, have_b, need_b, &err);
		if (rc || !m2.len)
			break;
		rc = recon_respond(ia, m2.data, m2.len, &m1, have_a, need_a, &err);
		if (rc || !m1.len)
			break;
	}
	CHECK_INT_EQ(rc, 0);
	pith_buf_release(&m1);
	pith_buf_release(&m2);
	recon_session_free(ia);
	recon_session_free(rb);
}

/* One session; then every needed event is fetched from the other store
 * through the validated path. Returns the number of events fetched. */
static size_t sync_stores(store_t *a, recon_set_t *sa, store_t *b, recon_set_t *sb)
{
	pith_err_t err = {0};
	pith_buf_t ev = PITH_BUF_INIT;
	recon_ids_t need_a = RECON_IDS_INIT, need_b = RECON_IDS_INIT;
	session(sa, sb, NULL, &need_a, NULL, &need_b);
	size_t fetched = 0;
	for (size_t i = 0; i < need_a.n; i++) {
		pith_buf_reset(&ev);
		CHECK_INT_EQ(store_event_get(b, need_a.ids[i], &ev, &err), 0);
		CHECK_INT_EQ(put_event(a, sa, ev.data, ev.len), 0);
		fetched++;
	}
	for (size_t i = 0; i < need_b.n; i++) {
		pith_buf_reset(&ev);
		CHECK_INT_EQ(store_event_get(a, need_b.ids[i], &ev, &err), 0);
		CHECK_INT_EQ(put_event(b, sb, ev.data, ev.len), 0);
		fetched++;
	}
	recon_ids_release(&need_a);
	recon_ids_release(&need_b);
	pith_buf_release(&ev);
	return fetched;
}

/* Frees both sides of a scenario: sets, stores, directories. */
static void close_both(store_t *a, recon_set_t *sa, char *da, store_t *b, recon_set_t *sb, char *db)
{
	recon_set_free(sa);
	recon_set_free(sb);
	store_close(a);
	store_close(b);
	rmdir_rf(da);
	rmdir_rf(db);
}

/* Fills two stores from e: event i goes to A if (sel_a >> (i % 8)) & 1,
 * to B likewise; then reconciles and checks they end identical. */
static void scenario(const evs_t *e, unsigned sel_a, unsigned sel_b, size_t want_fetched)
{
	char *da = tmpdir(), *db = tmpdir();
	store_t *a = open_store(da), *b = open_store(db);
	CHECK(a && b);
	for (size_t i = 0; i < e->n; i++) {
		if ((sel_a >> (i % 8)) & 1)
			CHECK_INT_EQ(put_event(a, NULL, e->b[i].data, e->b[i].len), 0);
		if ((sel_b >> (i % 8)) & 1)
			CHECK_INT_EQ(put_event(b, NULL, e->b[i].data, e->b[i].len), 0);
	}
	recon_set_t *sa = NULL, *sb = NULL;
	pith_err_t err = {0};
	size_t skipped = 1;
	CHECK_INT_EQ(store_recon_index_load(a, &sa, &skipped, NULL, &err), 0);
	CHECK_INT_EQ(skipped, 0);
	CHECK_INT_EQ(store_recon_index_load(b, &sb, NULL, NULL, &err), 0);
	CHECK_INT_EQ(sync_stores(a, sa, b, sb), want_fetched);
	CHECK(same_time_index(a, b));
	store_counts_t ca, cb;
	store_counts_get(a, &ca);
	store_counts_get(b, &cb);
	CHECK_INT_EQ(ca.events, cb.events);
	CHECK_INT_EQ(recon_set_count(sa), ca.events);
	CHECK_INT_EQ(recon_set_count(sb), cb.events);
	/* the sets kept current on ingest equal freshly loaded ones: a second
	 * session between the stores finds nothing */
	recon_set_t *fa = NULL;
	CHECK_INT_EQ(store_recon_index_load(a, &fa, NULL, NULL, &err), 0);
	CHECK_INT_EQ(sync_stores(a, fa, b, sb), 0);
	CHECK_INT_EQ(sync_stores(a, sa, b, sb), 0);
	recon_set_free(fa);
	close_both(a, sa, da, b, sb, db);
}

static evs_t events;

TEST(stores_identical, "two stores with the same events exchange nothing")
{
	scenario(&events, 0xff, 0xff, 0);
}

TEST(stores_disjoint, "two stores with disjoint events end identical")
{
	size_t a = 0, b = 0;
	for (size_t i = 0; i < events.n; i++)
		(0x0f >> (i % 8)) & 1 ? a++ : b++;
	scenario(&events, 0x0f, 0xf0, a + b);
}

TEST(stores_overlapping, "two overlapping stores, each missing some, end identical")
{
	size_t want = 0;
	for (size_t i = 0; i < events.n; i++)
		want += ((0x7b ^ 0xde) >> (i % 8)) & 1;
	scenario(&events, 0x7b, 0xde, want);
}

TEST(store_empty_vs_full, "an empty store and a full one end identical, either way round")
{
	scenario(&events, 0x00, 0xff, events.n);
	scenario(&events, 0xff, 0x00, events.n);
}

TEST(ts_mapping, "maps store times into the reconciled span and leaves the rest out")
{
	uint64_t ts = 0;
	CHECK_INT_EQ(store_recon_ts(0, &ts), 0);
	CHECK(ts == (uint64_t)STORE_RECON_TS_OFFSET);
	CHECK_INT_EQ(store_recon_ts(-STORE_RECON_TS_OFFSET, &ts), 0);
	CHECK(ts == 0);
	CHECK_INT_EQ(store_recon_ts(STORE_RECON_TS_OFFSET - 1, &ts), 0);
	CHECK(ts <= RECON_TS_MAX);
	CHECK_INT_EQ(store_recon_ts(STORE_RECON_TS_OFFSET, &ts), PITH_EINVAL);
	CHECK_INT_EQ(store_recon_ts(-STORE_RECON_TS_OFFSET - 1, &ts), PITH_EINVAL);
	uint64_t a, b;
	store_recon_ts(-5, &a);
	store_recon_ts(5, &b);
	CHECK(a < b);
	recon_set_t *s = recon_set_new();
	uint8_t id[32] = {1};
	CHECK_INT_EQ(store_recon_index_add_raw(s, INT64_MAX, id), 0); /* left out */
	CHECK_INT_EQ(recon_set_count(s), 0);
	CHECK_INT_EQ(store_recon_index_add_raw(s, 1, id), 0);
	CHECK_INT_EQ(store_recon_index_add_raw(s, 1, id), 0); /* again: no error */
	CHECK_INT_EQ(recon_set_count(s), 1);
	recon_set_free(s);
}

/* ---- bundles ------------------------------------------------------------- */

static pith_buf_t bundle0;

/* The registry bundle with another built_at (the store trusts its
 * caller's verification: the signature is not its concern). */
static void bundle_built(pith_buf_t *out, const char *built_at)
{
	json_doc_t *d = NULL;
	json_parse(&d, bundle0.data, bundle0.len, NULL, NULL);
	json_object_set(d, json_doc_root(d), "built_at", json_new_string(d, built_at));
	json_canon_write(json_doc_root(d), out);
	json_doc_free(d);
}

/* Stores a bundle; keeps set current as pithd does (the replaced one out,
 * this one in). Returns the outcome. */
static store_bundle_outcome_t put_bundle(store_t *st, recon_set_t *set, const pith_buf_t *b)
{
	json_doc_t *d = NULL;
	pith_err_t err = {0};
	CHECK_INT_EQ(json_parse(&d, b->data, b->len, NULL, &err), 0);
	store_batch_t *bt = store_batch_new(st);
	int idx = store_batch_add_bundle(bt, d, &err);
	CHECK_INT_EQ(store_batch_commit(bt, NULL, &err), 0);
	store_bundle_outcome_t o = store_batch_bundle_outcome(bt, idx);
	int64_t old_us, us;
	uint8_t old_sha[32], sha[32];
	char pith[PITH_NUMBER_LEN + 1];
	if (set && o == STORE_BUNDLE_NEWER) {
		if (store_batch_bundle_replaced(bt, idx, &old_us, old_sha))
			CHECK_INT_EQ(store_recon_index_remove_raw(set, old_us, old_sha), 0);
		json_parse(&d, b->data, b->len, NULL, NULL);
		pith_bundle_hash(json_doc_root(d), sha);
		json_doc_free(d);
		CHECK_INT_EQ(store_bundle_ref_get(st, sha, &us, pith, &err), 0);
		CHECK_INT_EQ(store_recon_index_add_raw(set, us, sha), 0);
	}
	store_batch_free(bt);
	return o;
}

TEST(bundle_sets, "bundle sets: the side with the older bundle is offered the newer one, never the other way, and the sets end equal")
{
	pith_buf_t x1 = PITH_BUF_INIT;
	bundle_built(&x1, "2026-09-01T00:00:00Z");
	char *da = tmpdir(), *db = tmpdir();
	store_t *a = open_store(da), *b = open_store(db);
	/* A holds X0, B the newer X1 (and had X0 before) */
	CHECK_INT_EQ(put_bundle(a, NULL, &bundle0), STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(put_bundle(b, NULL, &bundle0), STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(put_bundle(b, NULL, &x1), STORE_BUNDLE_NEWER);
	recon_set_t *sa = NULL, *sb = NULL;
	pith_err_t err = {0};
	CHECK_INT_EQ(store_recon_bundles_load(a, &sa, NULL, NULL, &err), 0);
	CHECK_INT_EQ(store_recon_bundles_load(b, &sb, NULL, NULL, &err), 0);
	CHECK_INT_EQ(recon_set_count(sa), 1);
	CHECK_INT_EQ(recon_set_count(sb), 1);

	/* the sets differ in both: each side has one the other lacks */
	recon_ids_t have_a = RECON_IDS_INIT, have_b = RECON_IDS_INIT;
	session(sa, sb, &have_a, NULL, &have_b, NULL);
	CHECK_INT_EQ(have_a.n, 1);
	CHECK_INT_EQ(have_b.n, 1);
	/* each offers its own by record (the index names it); only the newer
	 * one is newer than what the receiving side holds */
	int64_t us;
	char pith[PITH_NUMBER_LEN + 1];
	CHECK_INT_EQ(store_bundle_ref_get(a, have_a.ids[0], &us, pith, &err), 0);
	CHECK_INT_EQ(store_bundle_is_newer(b, pith, us, have_a.ids[0], &err), 0);
	CHECK_INT_EQ(store_bundle_ref_get(b, have_b.ids[0], &us, pith, &err), 0);
	CHECK_INT_EQ(store_bundle_is_newer(a, pith, us, have_b.ids[0], &err), 1);
	/* A fetches it: the commit's replaced bundle leaves A's set */
	CHECK_INT_EQ(put_bundle(a, sa, &x1), STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(recon_set_count(sa), 1);
	recon_ids_release(&have_a);
	recon_ids_release(&have_b);
	session(sa, sb, &have_a, NULL, &have_b, NULL);
	CHECK_INT_EQ(have_a.n + have_b.n, 0);
	/* and the set kept current equals a fresh load */
	recon_set_t *fa = NULL;
	CHECK_INT_EQ(store_recon_bundles_load(a, &fa, NULL, NULL, &err), 0);
	session(fa, sa, &have_a, NULL, &have_b, NULL);
	CHECK_INT_EQ(have_a.n + have_b.n, 0);
	recon_ids_release(&have_a);
	recon_ids_release(&have_b);
	recon_set_free(fa);
	close_both(a, sa, da, b, sb, db);
	pith_buf_release(&x1);
}

int main(void)
{
	trust = tg_trust_pair(&reg, &op);
	gen(&events, 40);
	RUN(stores_identical);
	RUN(stores_disjoint);
	RUN(stores_overlapping);
	RUN(store_empty_vs_full);
	RUN(ts_mapping);
	stu_read_file(PITH_TEST_DATA "/bundle-AR7B3DEV.json", &bundle0);
	RUN(bundle_sets);
	pith_buf_release(&bundle0);
	evs_free(&events);
	pith_trust_free(trust);
	return test_done();
}
