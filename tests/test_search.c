/* The search index's two ways in (node/search/search.h): from the change log, a
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
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    search_tokenizer_register(db) != SQLITE_OK) {
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

/* Record r with the title and authors given (JSON-escaped by the caller). */
static int add_named(store_t *st, unsigned r, const char *title, const char *authors)
{
	pith_buf_t ev = PITH_BUF_INIT, rec = PITH_BUF_INIT, p = PITH_BUF_INIT;
	char id[PITH_EVENT_ID_LEN + 1], pith[PITH_NUMBER_LEN + 1];
	tg_record(r, &rec, pith);
	int rc = tg_event(&ev, &reg, "record_created", pith, "record", "2026-01-01T00:00:00Z", NULL,
			  NULL, NULL, 0, (int)r, id);
	rc |= put(st, &ev);
	pith_buf_printf(&p, "{\"graph_snapshot\":{\"paper\":{\"title\":\"%s\",\"authors_text\":"
			"\"%s\"}},\"verdict_id\":null}", title, authors);
	pith_buf_reset(&ev);
	rc |= tg_event(&ev, &reg, "graph_snapshot", pith, "graph", "2026-01-02T00:00:00Z",
		       (const char *)p.data, NULL, NULL, 0, -1, id);
	rc |= put(st, &ev);
	pith_buf_release(&ev);
	pith_buf_release(&rec);
	pith_buf_release(&p);
	return rc;
}

typedef struct titles {
	char got[1024];
	size_t n;
} titles_t;

static int note_title(void *arg, const search_hit_t *h)
{
	titles_t *t = arg;
	size_t l = strlen(t->got);
	snprintf(t->got + l, sizeof(t->got) - l, "%s%s", l ? "|" : "", h->title ? h->title : "");
	t->n++;
	return 0;
}

/* The titles q finds, '|' between them, best first; "ERR n: msg" when
 * search_query fails. */
static const char *found(search_t *s, const char *q)
{
	static titles_t t;
	pith_err_t err = {0};
	memset(&t, 0, sizeof(t));
	int rc = search_query(s, q, 20, 0, note_title, &t, NULL, &err);
	if (rc)
		snprintf(t.got, sizeof(t.got), "ERR %d: %s", rc, err.msg);
	return t.got;
}

static const char *const named[][2] = {
	{"Kernel methods revisited", "Hans M\u00fcller"},
	{"On electromagnetism", "Hans Christian \u00d8rsted"},
	{"Symphony analysis", "Anton\u00edn Dvo\u0159\u00e1k"},
	{"Many-valued logic", "Jan \u0141ukasiewicz"},
	{"Stra\u00dfe und \u0152uvre", "Mar\u00eda \u00d1\u00fa\u00f1ez"},
	{"\u6df1\u5ea6\u5b66\u4e60\u7684\u7814\u7a76", "\u674e\u660e"},
	{"\u6a5f\u68b0\u5b66\u7fd2\u3068\u30c7\u30fc\u30bf", "\u5c71\u7530\u592a\u90ce"},
	{"\u0422\u0435\u043e\u0440\u0438\u044f \u0433\u0440\u0430\u0444\u043e\u0432", "\u0418\u0432\u0430\u043d \u041f\u0435\u0442\u0440\u043e\u0432"},
	{"\u0398\u03b5\u03c9\u03c1\u03af\u03b1 \u03b1\u03c1\u03b9\u03b8\u03bc\u03ce\u03bd", "\u039d\u03af\u03ba\u03bf\u03c2"},
	{"\ub17c\ubb38 \uc5f0\uad6c\ub97c", "\uae40\ucca0\uc218"},
	{"\uff26\uff55\uff4c\uff4c width and \ufb01nal", "Someone Else"},
};

TEST(scripts, "finds words of every script: case and diacritics folded, letters without "
     "a decomposition folded, CJK runs by their characters")
{
	char *dir = stu_tmpdir("test_search");
	char path[600];
	snprintf(path, sizeof(path), "%s/s.sqlite", dir);
	store_t *st = stu_open_store(dir, trust);
	for (unsigned i = 0; st && i < sizeof(named) / sizeof(named[0]); i++)
		CHECK(!add_named(st, 100 + i, named[i][0], named[i][1]));
	search_t *s = st ? open_index(path, st, UINT64_MAX) : NULL;
	CHECK(s && refresh(s) == sizeof(named) / sizeof(named[0]));
	if (!s)
		goto out;
	static const struct {
		const char *q, *want;
	} cases[] = {
		{"M\u00fcller", "Kernel methods revisited"},
		{"Muller", "Kernel methods revisited"},
		{"M\u00dcLLER", "Kernel methods revisited"},
		{"author:mUlLeR", "Kernel methods revisited"},
		{"\u00d8rsted", "On electromagnetism"},
		{"Orsted", "On electromagnetism"},
		{"\u00f8rsted", "On electromagnetism"},
		{"Dvorak", "Symphony analysis"},
		{"DVO\u0158\u00c1K", "Symphony analysis"},
		{"Lukasiewicz", "Many-valued logic"},
		{"\u0141UKASIEWICZ", "Many-valued logic"},
		{"Nunez strasse oeuvre", "Stra\u00dfe und \u0152uvre"},
		{"\u00d1\u00fa\u00f1ez", "Stra\u00dfe und \u0152uvre"},
		{"\u5b66\u4e60", "\u6df1\u5ea6\u5b66\u4e60\u7684\u7814\u7a76"},     /* a CJK word inside a run */
		{"\u7814\u7a76", "\u6df1\u5ea6\u5b66\u4e60\u7684\u7814\u7a76"},
		{"\u5b66\u7fd2", "\u6a5f\u68b0\u5b66\u7fd2\u3068\u30c7\u30fc\u30bf"},    /* Japanese */
		{"\u30c7\u30fc\u30bf", "\u6a5f\u68b0\u5b66\u7fd2\u3068\u30c7\u30fc\u30bf"},
		{"\u5b66", "\u6df1\u5ea6\u5b66\u4e60\u7684\u7814\u7a76|\u6a5f\u68b0\u5b66\u7fd2\u3068\u30c7\u30fc\u30bf"},
		{"\u4e60\u5b66", ""},                    /* out of order: not the run */
		{"\u0433\u0440\u0430\u0444\u043e\u0432", "\u0422\u0435\u043e\u0440\u0438\u044f \u0433\u0440\u0430\u0444\u043e\u0432"},
		{"\u0422\u0415\u041e\u0420\u0418\u042f", "\u0422\u0435\u043e\u0440\u0438\u044f \u0433\u0440\u0430\u0444\u043e\u0432"},
		{"\u03b8\u03b5\u03c9\u03c1\u03b9\u03b1", "\u0398\u03b5\u03c9\u03c1\u03af\u03b1 \u03b1\u03c1\u03b9\u03b8\u03bc\u03ce\u03bd"}, /* tonos folded */
		{"\ub17c\ubb38", "\ub17c\ubb38 \uc5f0\uad6c\ub97c"},
		{"\uc5f0\uad6c", "\ub17c\ubb38 \uc5f0\uad6c\ub97c"},             /* a Korean word, its particle left */
		{"full final", "\uff26\uff55\uff4c\uff4c width and \ufb01nal"},
		{"m\u00fcller\u3000kernel", "Kernel methods revisited"},   /* an ideographic space */
		{"\"m\u00fcller", "Kernel methods revisited"},
		{"NEAR(m\u00fcller kernel)", ""},        /* the words near, müller, kernel */
		{"(kernel) m\u00fcller* -revisited", "Kernel methods revisited"},
		{"m\u00fcller OR nothing", ""},
		{"title:m\u00fcller", ""},
		{"nope:kernel", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = found(s, cases[i].q);
		if (strcmp(got, cases[i].want))
			test_fail_(__FILE__, __LINE__, "%s: got '%s', want '%s'", cases[i].q, got,
				   cases[i].want);
	}
	static const struct {
		const char *q, *why;
	} bad[] = {
		{"\"", "no word to search for"},
		{"* - ( ) \"\" :", "no word to search for"},
		{"\u3002\u3001", "no word to search for"},
		{"caf\xc3", "not valid UTF-8"},
		{"\xff\xfe", "not valid UTF-8"},
		{"a\nb", "control character (U+000A)"},
		{"a\xc2\x85z", "control character (U+0085)"},
		{"a b c d e f g h i j k l m", "more than 12 words"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *got = found(s, bad[i].q);
		if (strncmp(got, "ERR", 3) || !strstr(got, bad[i].why))
			test_fail_(__FILE__, __LINE__, "%s: got '%s', want an error with '%s'",
				   bad[i].q, got, bad[i].why);
	}
out:
	search_free(s);
	store_close(st);
	stu_rmdir_rf(dir);
}

TEST(old_schema, "an index of the old schema (unicode61 alone) is rebuilt on open")
{
	char *dir = stu_tmpdir("test_search");
	char path[600];
	snprintf(path, sizeof(path), "%s/o.sqlite", dir);
	store_t *st = stu_open_store(dir, trust);
	CHECK(st && !add_named(st, 7, "\u6df1\u5ea6\u5b66\u4e60", "\u0141ukasiewicz"));
	/* what schema 1 left: its tables, user_version 1, the store indexed */
	sqlite3 *db = NULL;
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE meta(k TEXT PRIMARY KEY, v "
			   "INTEGER NOT NULL) WITHOUT ROWID; INSERT INTO meta VALUES('seq', 2);"
			   "CREATE VIRTUAL TABLE fts USING fts5(title, authors, cats, primary_cat "
			   "UNINDEXED, submitted_at UNINDEXED, tokenize='unicode61 remove_diacritics "
			   "2'); PRAGMA user_version=1;", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	search_t *s = st ? open_index(path, st, UINT64_MAX) : NULL;
	CHECK(s && refresh(s) == 1);
	if (s) {
		CHECK_STR_EQ(found(s, "\u5b66\u4e60"), "\u6df1\u5ea6\u5b66\u4e60");
		CHECK_STR_EQ(found(s, "lukasiewicz"), "\u6df1\u5ea6\u5b66\u4e60");
	}
	search_free(s);
	store_close(st);
	stu_rmdir_rf(dir);
}

TEST(read_only, "a read-only handle answers from the writer's file and writes nothing; the "
     "writer and its reader follow a file replaced under them")
{
	char *dir = stu_tmpdir("test_search");
	char path[600], moved[700];
	snprintf(path, sizeof(path), "%s/r.sqlite", dir);
	snprintf(moved, sizeof(moved), "%s.old", path);
	store_t *st = stu_open_store(dir, trust);
	CHECK(st && !add_named(st, 1, "Kernel methods", "M\u00fcller"));
	search_t *w = st ? open_index(path, st, UINT64_MAX) : NULL, *ro = NULL;
	pith_err_t err = {0};
	CHECK(w && refresh(w) == 1);
	CHECK_INT_EQ(search_open_ro(path, &ro, &err), 0);
	if (!w || !ro)
		goto out;
	CHECK_STR_EQ(found(ro, "muller"), "Kernel methods");
	CHECK_INT_EQ(search_seq(ro), search_seq(w));
	CHECK_INT_EQ(search_refresh(ro, NULL, &err), PITH_ENOTSUP);
	CHECK(!add_named(st, 2, "Kernel tricks", "\u00d8rsted"));
	CHECK(refresh(w) == 1); /* the reader sees the writer's commits */
	CHECK_STR_EQ(found(ro, "orsted"), "Kernel tricks");
	/* no index at a path: not found, nothing created */
	search_t *none = NULL;
	char nopath[700];
	snprintf(nopath, sizeof(nopath), "%s/none.sqlite", dir);
	CHECK_INT_EQ(search_open_ro(nopath, &none, &err), PITH_ENOTFOUND);
	CHECK(access(nopath, F_OK) != 0);
	/* the file moved away under both: the writer builds a new one at the
	 * path, the readers follow it */
	CHECK(rename(path, moved) == 0);
	CHECK(refresh(w) == 2);
	CHECK_STR_EQ(found(w, "kernel"), "Kernel methods|Kernel tricks");
	CHECK_STR_EQ(found(ro, "orsted"), "Kernel tricks");
out:
	search_free(ro);
	search_free(w);
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
	RUN(scripts);
	RUN(old_schema);
	RUN(read_only);
	pith_trust_free(trust);
	return test_done();
}
