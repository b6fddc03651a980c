/* The store (store/store.h), the change log (order, bundles, atomicity, the upgrade,
 * newest-first paging) and the timestamp rule's upgrade. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "test_store_util.h"

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

int main(void)
{
	setup();
	RUN(changes_order);
	RUN(changes_newest_first_skips_no_history);
	RUN(changes_bundle);
	RUN(changes_atomic);
	RUN(changes_upgrade);
	RUN(time_rule_upgrade);
	pith_trust_free(trust);
	pith_buf_release(&bundle_bytes);
	return test_done();
}
