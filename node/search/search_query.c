/* The search index's queries (search.h): ranked search over the reader
 * connection, the citation edges, a hit as JSON. One query at a time
 * (rmu); the reader follows the file at the path (search_int.h). */
#include "search_int.h"

#include <stdio.h>
#include <string.h>

#include "json.h"
#include "log.h"

/* ---- queries ------------------------------------------------------------------------ */

static int past_deadline(void *arg)
{
	return search_mono_us() > *(const int64_t *)arg;
}

static void hit_of(sqlite3_stmt *st, search_hit_t *h)
{
	snprintf(h->pith, sizeof(h->pith), "%s", (const char *)sqlite3_column_text(st, 0));
	h->title = (const char *)sqlite3_column_text(st, 1);
	h->authors = (const char *)sqlite3_column_text(st, 2);
	h->primary_cat = (const char *)sqlite3_column_text(st, 3);
	h->cats = (const char *)sqlite3_column_text(st, 4);
	h->submitted_at = (const char *)sqlite3_column_text(st, 5);
}

/* handed: how many hits fn was given (an index that failed before any
 * may be retried). */
static int query_locked(search_t *s, const char *q, size_t limit, size_t offset,
			search_hit_fn fn, void *arg, int *more, size_t *handed, pith_err_t *err)
{
	pith_buf_t m = PITH_BUF_INIT;
	sqlite3_stmt *st = NULL;
	int rc;
	if (more)
		*more = 0;
	if (limit > SEARCH_LIMIT_MAX)
		limit = SEARCH_LIMIT_MAX;
	if (!limit)
		limit = 1;
	if (offset > SEARCH_OFFSET_MAX || offset + limit > SEARCH_OFFSET_MAX)
		return pith_err_set(err, PITH_ETOOBIG, "offset + limit over %d: narrow the query",
				    SEARCH_OFFSET_MAX);
	if ((rc = search_match_build(s->tok, q, &m, err)))
		goto out;
	/* ranked first; a word so common that ranking every match would run
	 * past the ranked budget (a category over the whole store) is
	 * answered unranked: the matches in index order, newest first, which
	 * stop at the limit (score 0) */
	int64_t start = search_mono_us();
	for (int ranked = 1; ranked >= 0; ranked--) {
		const char *sql = ranked
			? "SELECT r.pith, f.title, f.authors, f.primary_cat, f.cats, f.submitted_at,"
			  " f.rank FROM fts f JOIN rec r ON r.id = f.rowid WHERE fts MATCH ?1"
			  " ORDER BY f.rank LIMIT ?2 OFFSET ?3"
			: "SELECT r.pith, f.title, f.authors, f.primary_cat, f.cats, f.submitted_at,"
			  " 0 FROM fts f JOIN rec r ON r.id = f.rowid WHERE fts MATCH ?1"
			  " ORDER BY f.rowid DESC LIMIT ?2 OFFSET ?3";
		sqlite3_finalize(st);
		st = NULL;
		if (sqlite3_prepare_v2(s->r, sql, -1, &st, NULL) != SQLITE_OK) {
			rc = search_db_fail(err, s->r, "query");
			goto out;
		}
		sqlite3_bind_text(st, 1, (const char *)m.data, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (int64_t)limit + 1);
		sqlite3_bind_int64(st, 3, (int64_t)offset);
		int64_t deadline = start + (ranked ? SEARCH_RANKED_MS : SEARCH_BUDGET_MS) * 1000;
		sqlite3_progress_handler(s->r, 1000, past_deadline, &deadline);
		size_t n = 0;
		int step;
		/* rows are handed out only once the ranked query is done: an
		 * interrupted one must not have called fn */
		while ((step = sqlite3_step(st)) == SQLITE_ROW) {
			if (n++ == limit) {
				if (more)
					*more = 1;
				break;
			}
			search_hit_t h;
			hit_of(st, &h);
			h.score = sqlite3_column_double(st, 6);
			++*handed;
			if (fn(arg, &h))
				break;
		}
		sqlite3_progress_handler(s->r, 0, NULL, NULL);
		if (step == SQLITE_INTERRUPT && ranked && !n)
			continue;
		if (step == SQLITE_INTERRUPT)
			rc = pith_err_set(err, PITH_EIO, "the query took longer than %d ms: add words "
					  "to narrow it", SEARCH_BUDGET_MS);
		else if (step != SQLITE_ROW && step != SQLITE_DONE)
			rc = search_db_fail(err, s->r, "query");
		break;
	}
out:
	sqlite3_finalize(st);
	pith_buf_release(&m);
	return rc;
}

/* The reader, on the file now at the path: reopened when the file was
 * replaced or deleted under it, or when it failed (again: the last
 * query failed in the index, not in its words). Under rmu. */
static int reader_follow(search_t *s, int again, pith_err_t *err)
{
	if (s->r && !again && !search_file_moved(s->path, &s->r_id))
		return 0;
	if (s->r)
		log_warn("search index %s: %s; reopening it", s->path,
			 again ? "a query failed" : "the file changed under this process");
	int rc = search_reader_open(s, err);
	/* no index at the path yet: the writer is building one */
	if (rc == PITH_ENOTFOUND || (rc && s->st))
		rc = pith_err_set(err, PITH_ENOTSUP, "the search index is being rebuilt: try again "
				  "in a moment");
	return rc;
}

int search_query(search_t *s, const char *q, size_t limit, size_t offset, search_hit_fn fn,
		 void *arg, int *more, pith_err_t *err)
{
	pthread_mutex_lock(&s->rmu);
	size_t handed = 0;
	int rc = reader_follow(s, 0, err);
	if (!rc)
		rc = query_locked(s, q, limit, offset, fn, arg, more, &handed, err);
	/* an index failure before any hit: once more on a fresh connection
	 * (the file may have been rewritten under this one) */
	if (rc == PITH_EIO && !handed && !strstr(err ? err->msg : "", "took longer") &&
	    !reader_follow(s, 1, err))
		rc = query_locked(s, q, limit, offset, fn, arg, more, &handed, err);
	pthread_mutex_unlock(&s->rmu);
	return rc;
}

static int cited_by_locked(search_t *s, const char *pith, size_t limit, search_hit_fn fn,
			   void *arg, size_t *total, pith_err_t *err)
{
	sqlite3_stmt *st = NULL;
	int rc = 0, step;
	if (total) {
		*total = 0;
		if (sqlite3_prepare_v2(s->r, "SELECT count(*) FROM cite WHERE cited=?1", -1, &st,
				       NULL) != SQLITE_OK)
			return search_db_fail(err, s->r, "query");
		sqlite3_bind_text(st, 1, pith, -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			*total = (size_t)sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
		st = NULL;
	}
	if (sqlite3_prepare_v2(s->r,
			       "SELECT c.citing, f.title, f.authors, f.primary_cat, f.cats, f.submitted_at"
			       " FROM cite c LEFT JOIN rec r ON r.pith = c.citing"
			       " LEFT JOIN fts f ON f.rowid = r.id WHERE c.cited=?1"
			       " ORDER BY c.citing LIMIT ?2", -1, &st, NULL) != SQLITE_OK)
		return search_db_fail(err, s->r, "query");
	sqlite3_bind_text(st, 1, pith, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (int64_t)limit);
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		search_hit_t h;
		hit_of(st, &h);
		h.score = 0;
		if (fn(arg, &h))
			break;
	}
	if (step != SQLITE_ROW && step != SQLITE_DONE)
		rc = search_db_fail(err, s->r, "query");
	sqlite3_finalize(st);
	return rc;
}

int search_cited_by(search_t *s, const char *pith, size_t limit, search_hit_fn fn, void *arg,
		    size_t *total, pith_err_t *err)
{
	pthread_mutex_lock(&s->rmu);
	int rc = reader_follow(s, 0, err);
	if (!rc)
		rc = cited_by_locked(s, pith, limit, fn, arg, total, err);
	pthread_mutex_unlock(&s->rmu);
	return rc;
}

static void json_member(pith_buf_t *out, const char *key, const char *v)
{
	pith_buf_printf(out, ",\"%s\":", key);
	if (v)
		json_write_string(out, v, strlen(v));
	else
		pith_buf_puts(out, "null");
}

void search_hit_json(const search_hit_t *hit, pith_buf_t *out)
{
	pith_buf_printf(out, "{\"pith_number\":\"%s\",\"short_pith_number\":\"pith:%.8s\"",
			hit->pith, hit->pith + PITH_NUMBER_LEN - PITH_BODY_LEN);
	json_member(out, "title", hit->title);
	json_member(out, "authors", hit->authors);
	json_member(out, "primary_cat", hit->primary_cat);
	json_member(out, "categories", hit->cats);
	json_member(out, "submitted_at", hit->submitted_at);
	pith_buf_printf(out, ",\"score\":%lld}", (long long)(hit->score * 1e6));
}
