/* The search index's two ways in (node/search.h): from the change log, a
 * state read per changed record, and the first pass over all the states in
 * key order (store_states_each). Both must give the same index, byte for
 * byte in what a query can see; the pass resumes where it was saved and
 * the log follows it; the feeder waits while held. */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_test_util.h"
#include "search.h"
#include "store.h"
#include "test_util.h"
#include "testgen.h"

#define NREC 300

static tg_key_t reg, op;
static pith_trust_t *trust;

/* Stores one signed event; 0 or -1. */
static int put(store_t *st, const pith_buf_t *b)
{
	pith_event_t *ev = NULL;
	pith_err_t err = {0};
	store_outcome_t out;
	int rc = pith_event_parse(b->data, b->len, trust, &ev, NULL, &err);
	if (!rc && (rc = store_event_put(st, ev, &out, &err)))
		fprintf(stderr, "store_event_put: %s\n", err.msg);
	else if (rc)
		fprintf(stderr, "event: %s\n", err.msg);
	pith_event_free(ev);
	return rc ? -1 : 0;
}

/* Records from..to-1: a record_created, a graph_snapshot with words of its
 * own (gen: which edition of the titles), every fifth a citation of the
 * record before it. */
static int add_records(store_t *st, unsigned from, unsigned to, unsigned gen)
{
	pith_buf_t ev = PITH_BUF_INIT, rec = PITH_BUF_INIT, p = PITH_BUF_INIT;
	char id[PITH_EVENT_ID_LEN + 1], pith[PITH_NUMBER_LEN + 1], prev[PITH_NUMBER_LEN + 1] = "";
	int rc = 0;
	for (unsigned r = from; r < to && !rc; r++) {
		char at[32];
		pith_buf_reset(&rec);
		tg_record(r, &rec, pith);
		snprintf(at, sizeof(at), "2026-01-01T00:%02u:%02uZ", r / 60 % 60, r % 60);
		pith_buf_reset(&ev);
		rc |= tg_event(&ev, &reg, "record_created", pith, "record", at, NULL, NULL, NULL, 0,
			       (int)r, id);
		rc |= put(st, &ev);
		pith_buf_reset(&p);
		pith_buf_printf(&p, "{\"graph_snapshot\":{\"paper\":{\"title\":\"word%u edition%u "
				    "common\",\"authors_text\":\"Author%u Smith\"}},\"verdict_id\":null}",
				r, gen, r % 7);
		snprintf(at, sizeof(at), "2026-01-02T%02u:%02u:%02uZ", gen, r / 60 % 60, r % 60);
		pith_buf_reset(&ev);
		rc |= tg_event(&ev, &reg, "graph_snapshot", pith, "graph", at,
			       (const char *)p.data, NULL, NULL, 0, -1, id);
		rc |= put(st, &ev);
		if (r % 5 == 0 && prev[0]) {
			pith_buf_reset(&ev);
			rc |= tg_event(&ev, &reg, "citation_signature", pith, prev, at,
				       "{\"relationship\":\"cites\",\"context\":\"x\"}", NULL, NULL, 0,
				       -1, id);
			rc |= put(st, &ev);
		}
		memcpy(prev, pith, sizeof(prev));
	}
	pith_buf_release(&ev);
	pith_buf_release(&rec);
	pith_buf_release(&p);
	return rc;
}

/* What a query can see of the index at path, as one text: every record
 * with its indexed columns, every citation edge, and the sequence. */
static void dump(const char *path, pith_buf_t *out)
{
	static const char *const q[] = {
		"SELECT r.pith, f.title, f.authors, f.cats, f.primary_cat, f.submitted_at"
		" FROM rec r LEFT JOIN fts f ON f.rowid = r.id ORDER BY r.pith",
		"SELECT cited, citing FROM cite ORDER BY cited, citing",
		"SELECT k, v FROM meta ORDER BY k",
		"SELECT count(*) FROM pass",
	};
	sqlite3 *db = NULL;
	pith_buf_reset(out);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		pith_buf_puts(out, "cannot open");
		sqlite3_close(db);
		return;
	}
	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
		sqlite3_stmt *s = NULL;
		if (sqlite3_prepare_v2(db, q[i], -1, &s, NULL) != SQLITE_OK) {
			pith_buf_printf(out, "cannot prepare %zu: %s\n", i, sqlite3_errmsg(db));
			continue;
		}
		while (sqlite3_step(s) == SQLITE_ROW) {
			for (int c = 0; c < sqlite3_column_count(s); c++) {
				const unsigned char *t = sqlite3_column_text(s, c);
				pith_buf_printf(out, "%s|", t ? (const char *)t : "(null)");
			}
			pith_buf_putc(out, '\n');
		}
		sqlite3_finalize(s);
		pith_buf_puts(out, "--\n");
	}
	sqlite3_close(db);
}

/* 1 when the index at path gave its records ids in key order (the body,
 * as the store orders them): the pass's order, where the log's is the
 * order of commits. */
static int ids_in_key_order(const char *path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	char prev[PITH_NUMBER_LEN + 1] = "";
	int ordered = 1, n = 0;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT pith FROM rec ORDER BY id", -1, &s, NULL) != SQLITE_OK)
		ordered = -1;
	while (ordered >= 0 && sqlite3_step(s) == SQLITE_ROW) {
		const char *p = (const char *)sqlite3_column_text(s, 0);
		if (!p || strlen(p) != PITH_NUMBER_LEN) {
			ordered = -1;
			break;
		}
		if (n++ && strcmp(prev + 10, p + 10) >= 0)
			ordered = 0;
		memcpy(prev, p, sizeof(prev));
	}
	sqlite3_finalize(s);
	sqlite3_close(db);
	return ordered;
}

static search_t *open_index(const char *path, store_t *st, uint64_t scan_min)
{
	search_t *s = NULL;
	pith_err_t err = {0};
	if (search_open(path, st, &s, &err))
		fprintf(stderr, "search_open: %s\n", err.msg);
	else
		search_set_scan_min(s, scan_min);
	return s;
}

static uint64_t refresh(search_t *s)
{
	uint64_t n = 0;
	pith_err_t err = {0};
	if (search_refresh(s, &n, &err)) {
		fprintf(stderr, "search_refresh: %s\n", err.msg);
		return UINT64_MAX;
	}
	return n;
}

typedef struct seen {
	char prev[PITH_NUMBER_LEN + 1];
	size_t n;
} seen_t;

static int count_state(void *arg, const char *pith, const uint8_t *bytes, size_t len)
{
	seen_t *s = arg;
	CHECK(strcmp(s->prev + (s->prev[0] ? 10 : 0), pith + 10) < 0); /* body order, no repeats */
	CHECK(len > 0 && bytes[0] == '{');
	memcpy(s->prev, pith, PITH_NUMBER_LEN + 1);
	s->n++;
	return 0;
}

TEST(states_each, "store_states_each lists every state once, in pages that resume after the last")
{
	char *dir = stu_tmpdir("test_search");
	store_t *st = stu_open_store(dir, trust);
	CHECK(st && !add_records(st, 0, 50, 0));
	char after[PITH_NUMBER_LEN + 1] = "", last[PITH_NUMBER_LEN + 1];
	seen_t seen = {"", 0};
	pith_err_t err = {0};
	int pages = 0;
	for (; st && pages < 100; pages++) {
		size_t before = seen.n;
		CHECK_INT_EQ(store_states_each(st, after, 7, count_state, &seen, last, &err), 0);
		if (!last[0])
			break;
		CHECK_STR_EQ(last, seen.prev);
		CHECK(seen.n - before == 7 || (seen.n == 50 && seen.n - before == 1));
		memcpy(after, last, sizeof(after));
	}
	CHECK_INT_EQ(seen.n, 50);
	CHECK_INT_EQ(pages, 8); /* 7 of 7, 1 of 1, then an empty one */
	store_close(st);
	stu_rmdir_rf(dir);
}

TEST(pass_same_as_log, "the first pass over the states and the change log give the same index, "
		       "and the log follows the pass")
{
	char *dir = stu_tmpdir("test_search");
	char a[600], b[600];
	snprintf(a, sizeof(a), "%s/a.sqlite", dir);
	snprintf(b, sizeof(b), "%s/b.sqlite", dir);
	store_t *st = stu_open_store(dir, trust);
	CHECK(st && !add_records(st, 0, NREC, 0));
	search_t *sa = st ? open_index(a, st, UINT64_MAX) : NULL; /* the log only */
	search_t *sb = st ? open_index(b, st, 1) : NULL;          /* the pass first */
	CHECK(sa && sb);
	if (!sa || !sb)
		goto out;
	CHECK_INT_EQ(refresh(sa), NREC);
	CHECK_INT_EQ(refresh(sb), NREC); /* every record once: none from the log again */
	CHECK_INT_EQ(search_seq(sa), store_changes_last(st));
	CHECK_INT_EQ(search_seq(sb), store_changes_last(st));
	CHECK_INT_EQ(search_pass_done(sb), 0);
	pith_buf_t da = PITH_BUF_INIT, db = PITH_BUF_INIT;
	dump(a, &da);
	dump(b, &db);
	CHECK(da.len > NREC * 40);
	CHECK(da.len == db.len && !memcmp(da.data, db.data, da.len));
	CHECK(strstr((const char *)da.data, "word17 edition0 common") != NULL);
	/* B came by the pass, A by the log */
	CHECK_INT_EQ(ids_in_key_order(b), 1);
	CHECK_INT_EQ(ids_in_key_order(a), 0);
	/* new records and new titles for old ones: the log, after the pass */
	CHECK(!add_records(st, NREC - 20, NREC + 40, 1));
	CHECK_INT_EQ(refresh(sa), 60);
	CHECK_INT_EQ(refresh(sb), 60); /* 40 new of 340: no second pass */
	dump(a, &da);
	dump(b, &db);
	CHECK(da.len == db.len && !memcmp(da.data, db.data, da.len));
	/* the 20 old records' second snapshots equivocate (same slot, no
	 * supersedes): their titles stand; the 40 new ones are in */
	CHECK(strstr((const char *)db.data, "word330 edition1 common") != NULL);
	CHECK(strstr((const char *)db.data, "word290 edition0 common") != NULL);
	pith_buf_release(&da);
	pith_buf_release(&db);
out:
	search_free(sa);
	search_free(sb);
	store_close(st);
	stu_rmdir_rf(dir);
}

static int nth_state(void *arg, const char *pith, const uint8_t *bytes, size_t len)
{
	(void)bytes;
	(void)len;
	memcpy(arg, pith, PITH_NUMBER_LEN + 1);
	return 0;
}

TEST(pass_resumes, "a pass saved half done resumes after its last record, and moves the "
		   "sequence to where it started")
{
	char *dir = stu_tmpdir("test_search");
	char c[600];
	snprintf(c, sizeof(c), "%s/c.sqlite", dir);
	store_t *st = stu_open_store(dir, trust);
	CHECK(st && !add_records(st, 0, 100, 0));
	/* the 40th record in key order */
	char mid[PITH_NUMBER_LEN + 1] = "";
	pith_err_t err = {0};
	CHECK(st && !store_states_each(st, NULL, 40, nth_state, mid, NULL, &err));
	search_t *s = st ? open_index(c, st, 1) : NULL;
	CHECK(s != NULL);
	if (!s)
		goto out;
	uint64_t last = store_changes_last(st);
	search_free(s);
	/* what an interrupted pass leaves: its target and last record, nothing indexed */
	sqlite3 *db = NULL;
	char sql[300];
	snprintf(sql, sizeof(sql), "INSERT INTO pass VALUES(0, %llu, '%s')", (unsigned long long)last,
		 mid);
	CHECK(sqlite3_open(c, &db) == SQLITE_OK && sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	s = open_index(c, st, UINT64_MAX); /* resumed even where none would start */
	CHECK(s != NULL);
	if (!s)
		goto out;
	CHECK_INT_EQ(refresh(s), 60);
	CHECK_INT_EQ(search_seq(s), last);
	pith_buf_t d = PITH_BUF_INIT;
	dump(c, &d);
	CHECK(strstr((const char *)d.data, mid) == NULL); /* up to it: the pass had it */
	/* the pass row is gone: the dump's last part, count(*) FROM pass, is 0 */
	CHECK(d.len > 9 && !memcmp(d.data + d.len - 9, "--\n0|\n--\n", 9));
	pith_buf_release(&d);
out:
	search_free(s);
	store_close(st);
	stu_rmdir_rf(dir);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

TEST(hold, "a held index indexes nothing until let go")
{
	char *dir = stu_tmpdir("test_search");
	char path[600];
	snprintf(path, sizeof(path), "%s/h.sqlite", dir);
	store_t *st = stu_open_store(dir, trust);
	search_t *s = st ? open_index(path, st, 1) : NULL;
	pith_err_t err = {0};
	CHECK(s && !search_start(s, 10, 0, &err));
	if (!s)
		goto out;
	search_hold(s, 1);
	CHECK(search_held(s));
	CHECK(!add_records(st, 0, 30, 0));
	search_kick(s);
	sleep_ms(300);
	CHECK_INT_EQ(search_seq(s), 0);
	search_hold(s, 0);
	for (int i = 0; i < 500 && search_seq(s) != store_changes_last(st); i++)
		sleep_ms(10);
	CHECK_INT_EQ(search_seq(s), store_changes_last(st));
out:
	search_free(s);
	store_close(st);
	stu_rmdir_rf(dir);
}

int main(void)
{
	trust = tg_trust_pair(&reg, &op);
	if (!trust)
		return 1;
	RUN(states_each);
	RUN(pass_same_as_log);
	RUN(pass_resumes);
	RUN(hold);
	pith_trust_free(trust);
	return test_done();
}
