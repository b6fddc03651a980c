/* The search index (search.h): SQLite FTS5 over each record's title,
 * authors and categories, plus the citation edges, fed from the store's
 * change log by search_refresh (on a thread of its own in pithd). */
#define _GNU_SOURCE /* pthread_setname_np */
#include "search_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "prio.h"

#define SEARCH_SCHEMA 2      /* PRAGMA user_version; another: rebuilt. 2: the "pith"
			      * tokenizer (search_text.c: CJK, more folded letters);
			      * 1 was unicode61 alone */
#define REFRESH_BATCH 4096   /* records per transaction at most: a backlog (a catch-up,
			      * a rebuild) in large ones, each FTS5 and b-tree page
			      * written once per transaction, not once per 256
			      * records (docs/performance.md at 262f3c4, issue 17: 30% less
			      * CPU per record) */
#define TITLE_MAX 2000       /* bytes of a title indexed */
#define AUTHORS_MAX 8000     /* and of the author list */
#define CITES_MAX 256        /* citation edges kept per citing record */
#define SCAN_MIN 20000       /* records missing from the index before the first pass
			      * (scan_wanted) pays off */

int64_t search_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int search_db_fail(pith_err_t *err, sqlite3 *db, const char *what)
{
	return pith_err_set(err, PITH_EIO, "search index: %s: %s", what,
			    db ? sqlite3_errmsg(db) : "cannot allocate");
}

static int exec(sqlite3 *db, const char *sql, pith_err_t *err)
{
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		pith_err_set(err, PITH_EIO, "search index: %s", msg ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		return PITH_EIO;
	}
	return 0;
}

static int64_t pragma_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	int64_t v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

static const char pragma_sql[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"PRAGMA cache_size=-65536;"; /* 64 MiB: the index pages a rebuild revisits */

/* A new index's tables, in one transaction; only ever run on an empty
 * file (user_version 0), so that opening an index writes nothing to it */
static const char schema_sql[] =
	"BEGIN IMMEDIATE;"
	"CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;"
	"INSERT OR IGNORE INTO meta VALUES('seq', 0);"
	"CREATE TABLE IF NOT EXISTS rec(id INTEGER PRIMARY KEY, pith TEXT NOT NULL UNIQUE);"
	"CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(title, authors, cats, primary_cat UNINDEXED,"
	" submitted_at UNINDEXED, tokenize='" SEARCH_TOKENIZER " remove_diacritics 2');"
	/* title words weigh most, then authors', then categories */
	"INSERT INTO fts(fts, rank) VALUES('rank', 'bm25(10.0, 4.0, 2.0, 0.0, 0.0)');"
	"CREATE TABLE IF NOT EXISTS cite(cited TEXT NOT NULL, citing TEXT NOT NULL,"
	" PRIMARY KEY(cited, citing)) WITHOUT ROWID;"
	"CREATE INDEX IF NOT EXISTS cite_citing ON cite(citing);"
	/* the first pass over the states, while it runs (pass_run): the
	 * change it indexes up to and the last record it indexed */
	"CREATE TABLE IF NOT EXISTS pass(k INTEGER PRIMARY KEY CHECK(k = 0),"
	" to_seq INTEGER NOT NULL, after TEXT NOT NULL);"
	"PRAGMA user_version=2;"
	"COMMIT;";
_Static_assert(SEARCH_SCHEMA == 2, "schema_sql sets user_version");

static void unlink_index(const char *path)
{
	char p[4200];
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

static int file_id_of(const char *path, file_id_t *id)
{
	struct stat sb;
	if (stat(path, &sb))
		return -1;
	id->dev = sb.st_dev;
	id->ino = sb.st_ino;
	return 0;
}

int search_file_moved(const char *path, const file_id_t *id)
{
	file_id_t now;
	return file_id_of(path, &now) || now.dev != id->dev || now.ino != id->ino;
}

/* Opens path (flags: SQLite's) with the tokenizer registered; *id gets
 * the file opened. */
static int open_db(const char *path, int flags, sqlite3 **db, file_id_t *id, pith_err_t *err)
{
	*db = NULL;
	int rc = sqlite3_open_v2(path, db, flags, NULL);
	if (rc == SQLITE_OK)
		rc = search_tokenizer_register(*db);
	if (rc != SQLITE_OK) {
		search_db_fail(err, *db, path);
		sqlite3_close(*db);
		*db = NULL;
		return PITH_EIO;
	}
	sqlite3_busy_timeout(*db, 5000);
	sqlite3_extended_result_codes(*db, 1);
	if (file_id_of(path, id))
		memset(id, 0, sizeof(*id));
	return 0;
}

/* The writer connection with the schema in place; an unreadable index or
 * one of another schema version (an older tokenizer's) is deleted first:
 * the refresh that follows rebuilds it from the store, with no one's
 * help. */
static int open_writer(search_t *s, pith_err_t *err)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (open_db(s->path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &s->w, &s->w_id,
			    err))
			return PITH_EIO;
		int64_t v = pragma_int(s->w, "PRAGMA user_version");
		if ((v == 0 || v == SEARCH_SCHEMA) && !exec(s->w, pragma_sql, err) &&
		    (v == SEARCH_SCHEMA || !exec(s->w, schema_sql, err)))
			return 0;
		if (v == 0)
			exec(s->w, "ROLLBACK", NULL);
		log_warn("search index %s: %s; rebuilding it", s->path,
			 v < 0 || v == 0 ? (err && err->msg[0] ? err->msg : "unreadable")
				       : "another schema version");
		sqlite3_close(s->w);
		s->w = NULL;
		unlink_index(s->path);
	}
	return pith_err_set(err, PITH_EIO, "search index %s: cannot create it", s->path);
}

int search_reader_open(search_t *s, pith_err_t *err)
{
	search_tok_free(s->tok);
	s->tok = NULL;
	sqlite3_close(s->r);
	s->r = NULL;
	if (access(s->path, F_OK))
		return pith_err_set(err, PITH_ENOTFOUND, "search index %s: no such file", s->path);
	if (open_db(s->path, SQLITE_OPEN_READONLY, &s->r, &s->r_id, err))
		return PITH_EIO;
	int64_t v = pragma_int(s->r, "PRAGMA user_version");
	int rc = 0;
	if (v != SEARCH_SCHEMA)
		rc = pith_err_set(err, PITH_EIO, "search index %s: %s", s->path,
				  v < 0 ? sqlite3_errmsg(s->r) : v == 0 ? "empty, not built yet"
				  : "another schema version (the writer rebuilds it)");
	if (!rc)
		rc = search_tok_open(s->r, &s->tok, err);
	if (rc) {
		sqlite3_close(s->r);
		s->r = NULL;
	}
	return rc;
}

static int prepare(search_t *s, sqlite3_stmt **st, const char *sql, pith_err_t *err)
{
	if (sqlite3_prepare_v3(s->w, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) != SQLITE_OK)
		return search_db_fail(err, s->w, "prepare");
	return 0;
}

static void writer_close(search_t *s)
{
	sqlite3_stmt **sts[] = {&s->get_id, &s->ins_rec, &s->del_fts, &s->ins_fts, &s->del_cite,
				&s->ins_cite, &s->set_seq, &s->get_pass, &s->set_pass, &s->del_pass,
				&s->max_id};
	for (size_t i = 0; i < sizeof(sts) / sizeof(sts[0]); i++) {
		sqlite3_finalize(*sts[i]);
		*sts[i] = NULL;
	}
	sqlite3_close(s->w);
	s->w = NULL;
}

/* The writer with its statements, and the sequence it has indexed up to:
 * a file of another store's (ahead of st's change log) is emptied. */
static int writer_open(search_t *s, pith_err_t *err)
{
	int rc = open_writer(s, err);
	if (!rc)
		rc = prepare(s, &s->get_id, "SELECT id FROM rec WHERE pith=?1", err) ||
		     prepare(s, &s->ins_rec, "INSERT INTO rec(pith) VALUES(?1)", err) ||
		     prepare(s, &s->del_fts, "DELETE FROM fts WHERE rowid=?1", err) ||
		     prepare(s, &s->ins_fts, "INSERT INTO fts(rowid, title, authors, cats, "
				"primary_cat, submitted_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6)", err) ||
		     prepare(s, &s->del_cite, "DELETE FROM cite WHERE citing=?1", err) ||
		     prepare(s, &s->ins_cite, "INSERT OR IGNORE INTO cite VALUES(?1, ?2)", err) ||
		     prepare(s, &s->set_seq, "UPDATE meta SET v=?1 WHERE k='seq'", err) ||
		     prepare(s, &s->get_pass, "SELECT to_seq, after FROM pass WHERE k=0", err) ||
		     prepare(s, &s->set_pass, "INSERT OR REPLACE INTO pass VALUES(0, ?1, ?2)", err) ||
		     prepare(s, &s->del_pass, "DELETE FROM pass", err) ||
		     prepare(s, &s->max_id, "SELECT coalesce(max(id), 0) FROM rec", err) ? PITH_EIO : 0;
	if (!rc) {
		int64_t seq = pragma_int(s->w, "SELECT v FROM meta WHERE k='seq'");
		uint64_t last = store_changes_last(s->st);
		if (seq < 0 || (uint64_t)seq > last) {
			/* ahead of this store's log: built from another store */
			log_warn("search index %s: at change %lld, the store at %llu: rebuilding it",
				 s->path, (long long)seq, (unsigned long long)last);
			rc = exec(s->w, "BEGIN; DELETE FROM rec; DELETE FROM fts; DELETE FROM cite;"
					"DELETE FROM pass; UPDATE meta SET v=0 WHERE k='seq'; COMMIT;", err);
			seq = 0;
		}
		atomic_store(&s->seq, (uint64_t)seq);
	}
	if (rc)
		writer_close(s);
	return rc;
}

/* The index file was replaced or deleted under the writer (by hand, or
 * by a program that should not have): the writer follows the path, so
 * that what it indexes is what the readers, which follow it too, see. A
 * new file is rebuilt from the store by the refresh. */
static int writer_follow(search_t *s, pith_err_t *err)
{
	if (!search_file_moved(s->path, &s->w_id))
		return 0;
	log_warn("search index %s: the file changed under this process; reopening it", s->path);
	writer_close(s);
	/* moved or deleted without its -wal and -shm: a new file beside
	 * them would take the old one's log for its own */
	if (access(s->path, F_OK))
		unlink_index(s->path);
	return writer_open(s, err);
}

static search_t *search_new(const char *path, store_t *st, pith_err_t *err)
{
	if (strlen(path) >= sizeof(((search_t *)0)->path)) {
		pith_err_set(err, PITH_EINVAL, "search index: path too long");
		return NULL;
	}
	search_t *s = calloc(1, sizeof(*s));
	if (!s) {
		pith_err_set(err, PITH_ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	s->st = st;
	s->scan_min = SCAN_MIN;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->rmu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

int search_open(const char *path, store_t *st, search_t **out, pith_err_t *err)
{
	*out = NULL;
	search_t *s = search_new(path, st, err);
	if (!s)
		return err ? err->code : PITH_ENOMEM;
	int rc = writer_open(s, err);
	if (!rc)
		rc = search_reader_open(s, err);
	if (rc) {
		search_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int search_open_ro(const char *path, search_t **out, pith_err_t *err)
{
	*out = NULL;
	search_t *s = search_new(path, NULL, err);
	if (!s)
		return err ? err->code : PITH_ENOMEM;
	int rc = search_reader_open(s, err);
	if (rc) {
		search_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void search_free_(search_t *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->mu);
		s->stop = 1;
		atomic_store(&s->stopping, 1);
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
	}
	writer_close(s);
	search_tok_free(s->tok);
	sqlite3_close(s->r);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->rmu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

uint64_t search_seq(search_t *s)
{
	if (s->st)
		return atomic_load(&s->seq);
	pthread_mutex_lock(&s->rmu);
	int64_t v = s->r ? pragma_int(s->r, "SELECT v FROM meta WHERE k='seq'") : -1;
	pthread_mutex_unlock(&s->rmu);
	return v > 0 ? (uint64_t)v : 0;
}

/* ---- indexing one record ----------------------------------------------------------- */

/* At most max bytes of t, cut at a character boundary. */
static int text_len(const char *t, size_t max)
{
	size_t n = strlen(t);
	if (n <= max)
		return (int)n;
	n = max;
	while (n && ((unsigned char)t[n] & 0xc0) == 0x80)
		n--;
	return (int)n;
}

static void bind_text(sqlite3_stmt *st, int i, const char *t, size_t max)
{
	if (t)
		sqlite3_bind_text(st, i, t, text_len(t, max), SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static int step_done(search_t *s, sqlite3_stmt *st, pith_err_t *err)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : search_db_fail(err, s->w, "write");
}

/* The full number a citation's target names, when it names a record:
 * a full pith number as it is (the cited record may come later), other
 * forms (body, arXiv id, DOI) when they resolve in the store now. */
static int cited_of(search_t *s, const char *target, char out[static PITH_NUMBER_LEN + 1])
{
	pith_id_t id;
	if (!target || pith_id_parse(target, &id, NULL))
		return 0;
	if (id.number[0]) {
		memcpy(out, id.number, PITH_NUMBER_LEN + 1);
		return 1;
	}
	return store_resolve(s->st, target, out, NULL) == 0;
}

/* (Re)indexes one record from its merged state's bytes (NULL: it could
 * not be read, e2 says why). */
static int index_state(search_t *s, const char *pith, const uint8_t *bytes, size_t len,
		       pith_err_t *e2, pith_err_t *err)
{
	json_doc_t *doc = NULL;
	const json_value_t *cur = NULL, *paper = NULL, *md = NULL;
	if (!bytes || json_parse(&doc, bytes, len, NULL, e2)) {
		/* indexed without words: it is still a record */
		log_warn("search index: %s: %s", pith, e2->msg);
	} else {
		cur = json_get_type(json_doc_root(doc), "current", JSON_OBJECT);
		const json_value_t *snaps = json_get_type(cur, "graph_snapshots", JSON_ARRAY);
		if (snaps && snaps->len) {
			const json_value_t *p = json_get_type(snaps->u.items[snaps->len - 1], "payload",
							      JSON_OBJECT);
			paper = json_get_type(json_get_type(p, "graph_snapshot", JSON_OBJECT), "paper",
					      JSON_OBJECT);
		}
		md = json_get_type(json_get_type(cur, "canonical_record", JSON_OBJECT), "metadata",
				   JSON_OBJECT);
	}
	int rc = 0;
	int64_t id = -1;
	sqlite3_bind_text(s->get_id, 1, pith, -1, SQLITE_STATIC);
	if (sqlite3_step(s->get_id) == SQLITE_ROW)
		id = sqlite3_column_int64(s->get_id, 0);
	sqlite3_reset(s->get_id);
	sqlite3_clear_bindings(s->get_id);
	if (id < 0) {
		sqlite3_bind_text(s->ins_rec, 1, pith, -1, SQLITE_STATIC);
		if ((rc = step_done(s, s->ins_rec, err)))
			goto out;
		id = sqlite3_last_insert_rowid(s->w);
	} else {
		sqlite3_bind_int64(s->del_fts, 1, id);
		if ((rc = step_done(s, s->del_fts, err)))
			goto out;
	}
	/* categories: the primary one, then the cross-lists */
	pith_buf_t cats = PITH_BUF_INIT;
	const char *primary = json_get_str(md, "primary_cat");
	if (primary)
		pith_buf_puts(&cats, primary);
	const json_value_t *cc = json_get_type(md, "cross_cats_sorted", JSON_ARRAY);
	for (size_t i = 0; cc && i < cc->len && i < 32; i++)
		if (json_is(cc->u.items[i], JSON_STRING)) {
			pith_buf_puts(&cats, cats.len ? " " : "");
			pith_buf_puts(&cats, cc->u.items[i]->u.str);
		}
	pith_buf_putc(&cats, 0);
	sqlite3_bind_int64(s->ins_fts, 1, id);
	bind_text(s->ins_fts, 2, json_get_str(paper, "title"), TITLE_MAX);
	bind_text(s->ins_fts, 3, json_get_str(paper, "authors_text"), AUTHORS_MAX);
	bind_text(s->ins_fts, 4, cats.oom ? "" : (const char *)cats.data, 1000);
	bind_text(s->ins_fts, 5, primary, 64);
	bind_text(s->ins_fts, 6, json_get_str(md, "submitted_at"), 64);
	rc = step_done(s, s->ins_fts, err);
	pith_buf_release(&cats);
	if (rc)
		goto out;
	/* what it cites: its applied citation_signature events' targets */
	sqlite3_bind_text(s->del_cite, 1, pith, -1, SQLITE_STATIC);
	if ((rc = step_done(s, s->del_cite, err)))
		goto out;
	const json_value_t *cites = json_get_type(cur, "citation_signatures", JSON_ARRAY);
	for (size_t i = 0; cites && i < cites->len && i < CITES_MAX; i++) {
		char cited[PITH_NUMBER_LEN + 1];
		if (!cited_of(s, json_get_str(cites->u.items[i], "target"), cited) || !strcmp(cited, pith))
			continue;
		sqlite3_bind_text(s->ins_cite, 1, cited, -1, SQLITE_STATIC);
		sqlite3_bind_text(s->ins_cite, 2, pith, -1, SQLITE_STATIC);
		if ((rc = step_done(s, s->ins_cite, err)))
			goto out;
	}
out:
	json_doc_free(doc);
	return rc;
}

/* (Re)indexes one record from its merged state, read from the store. */
static int index_record(search_t *s, const char *pith, pith_buf_t *raw, pith_err_t *err)
{
	pith_err_t e2 = {0};
	pith_buf_reset(raw);
	int ok = !store_state_get(s->st, pith, raw, &e2);
	return index_state(s, pith, ok ? raw->data : NULL, raw->len, &e2, err);
}

/* ---- refresh: following the change log ------------------------------------------------ */

typedef struct batch {
	char pith[REFRESH_BATCH][PITH_NUMBER_LEN + 1];
	size_t n;
} batch_t;

static int batch_add(void *arg, const store_change_t *ch)
{
	batch_t *b = arg;
	memcpy(b->pith[b->n++], ch->pith_number, PITH_NUMBER_LEN + 1);
	return 0;
}

static int paused(search_t *s)
{
	return atomic_load(&s->stopping) || atomic_load(&s->held);
}

/* The sequence indexed up to, read under the write lock: the one saved,
 * when another process (pithctl search beside pithd) went further. */
static uint64_t seq_locked(search_t *s)
{
	uint64_t seq = atomic_load(&s->seq);
	int64_t saved = pragma_int(s->w, "SELECT v FROM meta WHERE k='seq'");
	return saved > 0 && (uint64_t)saved > seq ? (uint64_t)saved : seq;
}

static int log_run(search_t *s, uint64_t *indexed, pith_err_t *err)
{
	batch_t *b = malloc(sizeof(*b));
	pith_buf_t raw = PITH_BUF_INIT;
	int rc = 0;
	uint64_t done = 0;
	if (!b)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	while (!paused(s)) {
		if ((rc = exec(s->w, "BEGIN IMMEDIATE", err)))
			break;
		uint64_t seq = seq_locked(s), next = seq;
		b->n = 0;
		rc = store_changes_each(s->st, seq, REFRESH_BATCH, batch_add, b, &next, err);
		if (rc || !b->n) {
			exec(s->w, "ROLLBACK", NULL);
			atomic_store(&s->seq, seq);
			break;
		}
		for (size_t i = 0; i < b->n && !rc; i++)
			rc = index_record(s, b->pith[i], &raw, err);
		if (!rc) {
			sqlite3_bind_int64(s->set_seq, 1, (int64_t)next);
			rc = step_done(s, s->set_seq, err);
		}
		if (!rc)
			rc = exec(s->w, "COMMIT", err);
		if (rc) {
			exec(s->w, "ROLLBACK", NULL);
			break;
		}
		atomic_store(&s->seq, next);
		done += b->n;
	}
	free(b);
	pith_buf_release(&raw);
	*indexed += done;
	return rc;
}

/* ---- the first pass: every state, in key order ---------------------------------------- */

/* Whether to index by one pass over all the states rather than from the
 * change log: when at least half of the store's records, and scan_min of
 * them, are not in the index at all (a new index beside a filled store;
 * a fresh node's catch-up, which the index sits out: search_hold). Each
 * of those must be read anyway; in the log's order every read loads and
 * decompresses a table block of its own, in key order each block is read
 * once (docs/performance.md at 262f3c4, issue 17, session 13). The pass indexes at
 * most twice the records that needed it. rec's largest id stands for the
 * records indexed: ids are given in order and rows never deleted. */
static int scan_wanted(search_t *s)
{
	store_counts_t c;
	store_counts_get(s->st, &c);
	int64_t have = 0;
	if (sqlite3_step(s->max_id) == SQLITE_ROW)
		have = sqlite3_column_int64(s->max_id, 0);
	sqlite3_reset(s->max_id);
	uint64_t missing = c.records > (uint64_t)have ? c.records - (uint64_t)have : 0;
	return missing && missing >= s->scan_min && missing * 2 >= c.records;
}

typedef struct pass {
	search_t *s;
	pith_err_t *err;
	uint64_t n;
} pass_t;

static int pass_one(void *arg, const char *pith, const uint8_t *bytes, size_t len)
{
	pass_t *p = arg;
	pith_err_t e2 = {0};
	int rc = index_state(p->s, pith, bytes, len, &e2, p->err);
	p->n += !rc;
	return rc;
}

/* The pass, saved in table pass as it goes (a restart resumes it): each
 * transaction indexes the next REFRESH_BATCH states; the last one moves
 * the index's sequence number to the change the pass started at. Every
 * change up to that one is in the states the pass reads (the store's
 * counter moves after its write); the later ones are indexed from the log
 * after it, as usual (some twice: harmless). Nothing to do when no pass
 * is saved or wanted. */
static int pass_run(search_t *s, uint64_t *indexed, pith_err_t *err)
{
	int rc = 0;
	while (!paused(s)) {
		if ((rc = exec(s->w, "BEGIN IMMEDIATE", err)))
			return rc;
		int64_t to = -1;
		char after[PITH_NUMBER_LEN + 1] = "", last[PITH_NUMBER_LEN + 1];
		if (sqlite3_step(s->get_pass) == SQLITE_ROW) {
			to = sqlite3_column_int64(s->get_pass, 0);
			const char *a = (const char *)sqlite3_column_text(s->get_pass, 1);
			snprintf(after, sizeof(after), "%s", a ? a : "");
		}
		sqlite3_reset(s->get_pass);
		if (to < 0) {
			if (!scan_wanted(s)) {
				exec(s->w, "ROLLBACK", NULL);
				return 0;
			}
			to = (int64_t)store_changes_last(s->st);
			log_info("search index: most records are not indexed: one pass over the "
				 "states in key order, up to change %lld",
				 (long long)to);
		}
		pass_t p = {s, err, 0};
		uint64_t seq = 0;
		rc = store_states_each(s->st, after, REFRESH_BATCH, pass_one, &p, last, err);
		if (!rc && p.n) {
			sqlite3_bind_int64(s->set_pass, 1, to);
			sqlite3_bind_text(s->set_pass, 2, last, -1, SQLITE_STATIC);
			rc = step_done(s, s->set_pass, err);
		} else if (!rc) {
			seq = seq_locked(s);
			if ((uint64_t)to > seq)
				seq = (uint64_t)to;
			sqlite3_bind_int64(s->set_seq, 1, (int64_t)seq);
			rc = step_done(s, s->del_pass, err) || step_done(s, s->set_seq, err);
		}
		if (!rc)
			rc = exec(s->w, "COMMIT", err);
		if (rc) {
			exec(s->w, "ROLLBACK", NULL);
			return rc;
		}
		*indexed += p.n;
		if (!p.n) {
			atomic_store(&s->seq, seq);
			atomic_store(&s->pass_done, 0);
			return 0;
		}
		atomic_fetch_add(&s->pass_done, p.n);
	}
	return 0;
}

static int refresh_run(search_t *s, uint64_t *indexed, pith_err_t *err)
{
	uint64_t done = 0;
	if (indexed)
		*indexed = 0;
	if (!s->st)
		return pith_err_set(err, PITH_ENOTSUP, "search index %s: opened read-only", s->path);
	int rc = s->w ? writer_follow(s, err) : writer_open(s, err);
	if (!rc)
		rc = pass_run(s, &done, err);
	if (!rc)
		rc = log_run(s, &done, err);
	if (indexed)
		*indexed = done;
	return rc;
}

int search_refresh(search_t *s, uint64_t *indexed, pith_err_t *err)
{
	return refresh_run(s, indexed, err);
}

static void *feeder(void *arg)
{
	search_t *s = arg;
	pthread_setname_np(pthread_self(), "pith-search");
	if (s->nice && prio_lower_thread(0, s->nice))
		log_warn("search index: cannot lower its thread's priority");
	int64_t failed_us = 0;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		if (!s->kicked && !s->stop) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			int wait_ms = failed_us ? 5000 : s->poll_ms;
			ts.tv_sec += wait_ms / 1000;
			ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		}
		int stop = s->stop;
		s->kicked = 0;
		/* cleared before the change log is read: a commit whose kick
		 * finds it still set is read by the refresh below */
		atomic_store(&s->kick_pending, 0);
		pthread_mutex_unlock(&s->mu);
		if (stop)
			break;
		if (atomic_load(&s->held) ||
		    (store_changes_last(s->st) == atomic_load(&s->seq) && s->w &&
		     !search_file_moved(s->path, &s->w_id)))
			continue;
		pith_err_t err = {0};
		uint64_t n = 0;
		int64_t t0 = search_mono_us();
		if (refresh_run(s, &n, &err)) {
			if (!failed_us)
				log_warn("%s (retrying every 5 s)", err.msg);
			failed_us = search_mono_us();
		} else {
			failed_us = 0;
			if (n >= 1000)
				log_info("search index: %llu records indexed in %.1f s",
					 (unsigned long long)n, (double)(search_mono_us() - t0) / 1e6);
		}
	}
	return NULL;
}

int search_start(search_t *s, int poll_ms, int nice, pith_err_t *err)
{
	s->poll_ms = poll_ms > 0 ? poll_ms : 1000;
	s->nice = nice;
	if (pthread_create(&s->thread, NULL, feeder, s))
		return pith_err_set(err, PITH_EIO, "search index: cannot start its thread");
	s->started = 1;
	return 0;
}

void search_hold(search_t *s, int hold)
{
	if (s && atomic_exchange(&s->held, hold ? 1 : 0) && !hold)
		search_kick(s); /* what waited: now */
}

int search_held(search_t *s)
{
	return atomic_load(&s->held);
}

uint64_t search_pass_done(search_t *s)
{
	return atomic_load(&s->pass_done);
}

void search_set_scan_min(search_t *s, uint64_t n)
{
	s->scan_min = n;
}

void search_kick(search_t *s)
{
	if (!s || !s->started)
		return;
	/* called on the loop for every ingest result: after the first kick
	 * the feeder has not taken yet, the others cost one atomic */
	if (atomic_exchange(&s->kick_pending, 1))
		return;
	pthread_mutex_lock(&s->mu);
	s->kicked = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}
