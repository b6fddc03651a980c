/* /search?q= (HTML) and /api/search?q= (JSON): the search index
 * (search.h) queried on the loop thread. A query is a few hundred bytes
 * at most, its words quoted, its answer capped, and SQLite interrupts it
 * past SEARCH_BUDGET_MS (docs/http.md, "Search": measured well under
 * that). A q that is a stored record's identifier goes to the record.
 * A query refused (too long, not text, no word) is a 400 that says why:
 * in JSON on /api/search, in the search page itself on /search, with the
 * box to try again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_int.h"
#include "log.h"
#include "search.h"

#define SEARCH_DEFAULT 20

typedef struct sargs {
	const char *q;
	int q_text;                     /* q is text (not marked by the target parser) */
	size_t limit, offset;
	char pith[PITH_NUMBER_LEN + 1]; /* q names this stored record, or "" */
} sargs_t;

/* The parameters; -1 with the error reply set (JSON: the page's views
 * render it again as their page, search_refused). */
static int search_args(render_ctx_t *c, sargs_t *a)
{
	int count = 0;
	memset(a, 0, sizeof(*a));
	a->q = render_target_query(c->t, "q", &count);
	a->q_text = !c->t->bad_why || strcmp(c->t->bad_key, "q");
	if (count > 1) {
		render_error(c, 400, "q: given more than once");
		return -1;
	}
	if (c->t->bad_why) { /* render_target.c: a value that is not text */
		render_error(c, 400, "%s: %s (type words only)", c->t->bad_key, c->t->bad_why);
		return -1;
	}
	if (a->q && strlen(a->q) > SEARCH_QUERY_MAX) {
		render_error(c, 400, "q: the query is longer than %d bytes", SEARCH_QUERY_MAX);
		return -1;
	}
	if (render_arg_count(c, "limit", SEARCH_DEFAULT, 1, SEARCH_LIMIT_MAX, &a->limit) ||
	    render_arg_count(c, "offset", 0, 0, SEARCH_OFFSET_MAX, &a->offset))
		return -1;
	if (a->offset + a->limit > SEARCH_OFFSET_MAX) {
		render_error(c, 400, "offset + limit: at most %d (narrow the query instead)",
			   SEARCH_OFFSET_MAX);
		return -1;
	}
	/* an identifier of a stored record: that record (words that happen
	 * to parse as one, like a prefix of a number, fall through to search) */
	pith_id_t id;
	if (a->q && !pith_id_parse(a->q, &id, NULL) &&
	    store_resolve(c->rd->store, a->q, a->pith, NULL))
		a->pith[0] = 0;
	return 0;
}

/* What a failed search_query means for the client. */
static void search_failed(render_ctx_t *c, int rc, const pith_err_t *err)
{
	if (rc == PITH_EINVAL || rc == PITH_ETOOBIG)
		render_error(c, 400, "q: %s", err->msg);
	else if (rc == PITH_ENOTSUP || strstr(err->msg, "took longer")) {
		render_error(c, 503, "%s", err->msg);
		c->r.retry_after = rc == PITH_ENOTSUP ? 5 : 0;
	} else {
		log_warn("http: search: %s", err->msg);
		render_error(c, 500, "the search index failed");
	}
}

static int no_index(render_ctx_t *c)
{
	if (c->rd->search)
		return 0;
	render_error(c, 503, "this mirror keeps no search index");
	return 1;
}

/* ---- JSON ---------------------------------------------------------------------------- */

typedef struct jhits {
	render_jb_t *b;
	render_t *h;
	json_value_t *list;
} jhits_t;

static int jhit(void *arg, const search_hit_t *hit)
{
	jhits_t *j = arg;
	render_jb_t *b = j->b;
	json_value_t *e = render_jb_obj(b);
	const char *body = hit->pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	char short_num[14];
	snprintf(short_num, sizeof(short_num), "pith:%.8s", body);
	render_jb_set(b, e, "pith_number", render_jb_str(b, hit->pith));
	render_jb_set(b, e, "short_pith_number", render_jb_str(b, short_num));
	render_jb_set(b, e, "title", render_jb_str(b, hit->title));
	render_jb_set(b, e, "authors", render_jb_str(b, hit->authors));
	render_jb_set(b, e, "primary_cat", render_jb_str(b, hit->primary_cat));
	render_jb_set(b, e, "categories", render_jb_str(b, hit->cats));
	render_jb_set(b, e, "submitted_at", render_jb_str(b, hit->submitted_at));
	/* bm25, lower is better; as an integer (millionths) so that the
	 * canonical body has no float */
	render_jb_set(b, e, "score", render_jb_int(b, (int64_t)(hit->score * 1e6)));
	render_jb_set(b, e, "url", render_jb_url(b, j->h, "/pith/%s", body));
	render_jb_push(b, j->list, e);
	return 0;
}

void render_view_search_json(render_ctx_t *c)
{
	sargs_t a;
	render_jb_t b;
	if (no_index(c) || search_args(c, &a))
		return;
	if (!a.q) {
		render_error(c, 400, "q: missing (words of a title or an author's name, cat:X)");
		return;
	}
	if (render_jb_begin(c, &b))
		return;
	json_value_t *o = render_jb_obj(&b);
	jhits_t j = {.b = &b, .h = c->rd, .list = render_jb_arr(&b)};
	pith_err_t err = {0};
	int more = 0, rc = 0;
	/* an identifier finds its record ("record"), not words */
	if (!a.pith[0])
		rc = search_query(c->rd->search, a.q, a.limit, a.offset, jhit, &j, &more, &err);
	if (rc) {
		json_doc_free(b.d);
		search_failed(c, rc, &err);
		return;
	}
	render_jb_set(&b, o, "query", render_jb_str(&b, a.q));
	render_jb_set(&b, o, "record", a.pith[0] ? render_jb_url(&b, c->rd, "/pith/%s",
						    a.pith + PITH_NUMBER_LEN - PITH_BODY_LEN) : NULL);
	render_jb_set(&b, o, "results", j.list);
	render_jb_set(&b, o, "limit", render_jb_int(&b, (int64_t)a.limit));
	render_jb_set(&b, o, "offset", render_jb_int(&b, (int64_t)a.offset));
	render_jb_set(&b, o, "next_offset", more ? render_jb_int(&b, (int64_t)(a.offset + a.limit)) : NULL);
	render_jb_set(&b, o, "indexed_through", render_jb_int(&b, (int64_t)search_seq(c->rd->search)));
	render_jb_finish(c, &b, o, "application/json");
}

/* ---- HTML ---------------------------------------------------------------------------- */

typedef struct hhits {
	render_ctx_t *c;
	size_t n;
} hhits_t;

static int hhit(void *arg, const search_hit_t *hit)
{
	hhits_t *hh = arg;
	pith_buf_t *b = hh->c->body;
	const char *body = hit->pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	if (!hh->n++)
		pith_buf_puts(b, "<ol class=\"hits\">\n");
	pith_buf_puts(b, "<li><a href=\"");
	render_html_text(b, hh->c->rd->base_url);
	pith_buf_printf(b, "/pith/%s/\">", body);
	if (hit->title && *hit->title)
		render_html_text(b, hit->title);
	else
		pith_buf_printf(b, "pith:%.8s", body);
	pith_buf_puts(b, "</a><br><span class=\"muted\">");
	render_html_text(b, hit->authors);
	pith_buf_printf(b, "</span><br><code>pith:%.8s</code>", body);
	if (hit->cats && *hit->cats) {
		pith_buf_puts(b, " &middot; ");
		render_html_text(b, hit->cats);
	}
	if (hit->submitted_at && strlen(hit->submitted_at) >= 10) {
		pith_buf_puts(b, " &middot; ");
		render_html_escape(b, hit->submitted_at, 10);
	}
	pith_buf_puts(b, "</li>\n");
	return 0;
}

/* The search page again, saying why the query was not searched (status
 * and message from the JSON error just set: 400, or 503), with the box
 * holding what was typed when it is text. A server failure (500) stays
 * the plain error. */
static void search_refused(render_ctx_t *c, const sargs_t *a)
{
	int status = c->r.status;
	if (status != 400 && status != 503)
		return;
	/* the message render_error kept (the shared argument checks call it too) */
	char msg[sizeof(c->r.message)];
	memcpy(msg, c->r.message, sizeof(msg));
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	render_html_head(c, "Search: not searched", a->q && a->q_text ? a->q : NULL);
	pith_buf_puts(b, "<h1>Search</h1>\n");
	pith_buf_puts(b, "<p role=\"alert\"><strong>Not searched:</strong> ");
	render_html_text(b, strncmp(msg, "q: ", 3) ? msg : msg + 3); /* the box is q */
	pith_buf_puts(b, "</p>\n<p class=\"muted\">A query is words of a title or of an author's "
			 "name, in any script (at most 256 bytes and 12 words); punctuation and "
			 "search syntax are taken as plain text.</p>\n");
	render_html_done(c);
	if (c->r.status == 200) /* not render_html_done's 500 */
		c->r.status = status;
	c->r.etag[0] = 0;
	c->r.no_store = 1;
}

void render_view_search_html(render_ctx_t *c)
{
	render_t *h = c->rd;
	sargs_t a;
	if (no_index(c))
		return;
	if (search_args(c, &a)) {
		search_refused(c, &a);
		return;
	}
	if (a.pith[0]) {
		snprintf(c->r.location, sizeof(c->r.location), "%s/pith/%s", h->base_url,
			 a.pith + PITH_NUMBER_LEN - PITH_BODY_LEN);
		c->r.status = 302;
		pith_buf_reset(c->body);
		return;
	}
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	render_html_head(c, a.q && *a.q ? a.q : "Search", a.q);
	pith_buf_puts(b, "<h1>Search</h1>\n");
	if (!a.q || !*a.q) {
		pith_buf_puts(b, "<p class=\"muted\">Words of a title or of an author's name (every "
				 "word must match; title words count most), <code>cat:cs.LG</code> for a "
				 "category, <code>author:NAME</code>, or any identifier: an arXiv id or "
				 "URL, a DOI, a pith number.</p>\n");
		render_html_done(c);
		return;
	}
	hhits_t hh = {.c = c};
	pith_err_t err = {0};
	int more = 0;
	int rc = search_query(h->search, a.q, a.limit, a.offset, hhit, &hh, &more, &err);
	if (rc) {
		search_failed(c, rc, &err);
		search_refused(c, &a);
		return;
	}
	if (hh.n)
		pith_buf_puts(b, "</ol>\n");
	else if (!a.offset)
		pith_buf_puts(b, "<p>No record on this mirror matches.</p>\n");
	if (more || a.offset) {
		pith_buf_puts(b, "<p>");
		pith_buf_t *qe = &h->tmp;
		pith_buf_reset(qe);
		for (const char *p = a.q; *p; p++) {
			unsigned char ch = (unsigned char)*p;
			int safe = ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') || (ch >= '0' && ch <= '9') ||
				   strchr("-._~", ch);
			if (safe)
				pith_buf_putc(qe, ch);
			else
				pith_buf_printf(qe, "%%%02X", ch);
		}
		pith_buf_putc(qe, 0);
		if (a.offset) {
			pith_buf_puts(b, "<a rel=\"prev\" href=\"");
			render_html_text(b, h->base_url);
			pith_buf_printf(b, "/search?q=%s&amp;offset=%zu&amp;limit=%zu\">&larr; Better "
					"matches</a> ", qe->oom ? "" : (const char *)qe->data,
					a.offset > a.limit ? a.offset - a.limit : 0, a.limit);
		}
		if (more) {
			pith_buf_puts(b, "<a rel=\"next\" href=\"");
			render_html_text(b, h->base_url);
			pith_buf_printf(b, "/search?q=%s&amp;offset=%zu&amp;limit=%zu\">More &rarr;</a>",
					qe->oom ? "" : (const char *)qe->data, a.offset + a.limit, a.limit);
		}
		pith_buf_puts(b, "</p>\n");
	}
	pith_buf_puts(b, "<p class=\"muted\">The same as JSON: <code>/api/search?q=&hellip;</code>"
			 "</p>\n");
	render_html_done(c);
}
