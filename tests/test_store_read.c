/* The store (store/store.h), reads: the fingerprint set, a store filled from empty, the
 * indexes and paging, aliases and the newest bundle, checkpoints and the
 * page cache, reopening, the consistency audit, a failed commit. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "test_store_util.h"

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

int main(void)
{
	setup();
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
	RUN(reopen_and_lock);
	RUN(check_finds_damage);
	RUN(check_threads_same_report);
	RUN(own_bytes_checked);
	RUN(nothing_on_failure);
	pith_trust_free(trust);
	pith_buf_release(&bundle_bytes);
	return test_done();
}
