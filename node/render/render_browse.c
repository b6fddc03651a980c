/* Pages for people to browse a mirror: "/" (what this mirror is and what
 * changed last) and the record list, newest first ("/pith/" in HTML,
 * "/api/records" in JSON), both read from the store's change log
 * (store_changes_each_before) and each listed record's merged state.
 * Everything that came from an event is escaped (render_html_escape). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_int.h"
#include "log.h"

/* A record as a line of a list: the parts of its state people scan. */
typedef struct render_rec_line {
	char pith[PITH_NUMBER_LEN + 1];
	uint64_t seq;
	int has_bundle;
	char built_at[STORE_BUILT_AT_MAX + 1];
	char state_sha[65];
} render_rec_line_t;

typedef struct line_page {
	render_rec_line_t *v;
	size_t n, cap;
	uint64_t lo;    /* a record list page: the first sequence number it holds (0: any) */
	uint64_t below; /* the newest record numbered below lo (0: none) */
} line_page_t;

static int line_add(void *arg, const store_change_t *ch)
{
	line_page_t *p = arg;
	if (ch->seq < p->lo) {
		p->below = ch->seq;
		return 1;
	}
	if (p->n == p->cap)
		return 1;
	render_rec_line_t *l = &p->v[p->n++];
	memcpy(l->pith, ch->pith_number, sizeof(l->pith));
	l->seq = ch->seq;
	l->has_bundle = ch->has_bundle;
	memcpy(l->built_at, ch->built_at, sizeof(l->built_at));
	pith_hex_encode(ch->state_hash, 32, l->state_sha);
	return 0;
}

/* Reads into *p at most limit records changed before cursor before (0:
 * the newest) and, when p->lo is set, numbered from p->lo on. -1 with the
 * error reply set. */
static int lines_read(render_ctx_t *c, uint64_t before, size_t limit, line_page_t *p)
{
	pith_err_t err = {0};
	p->n = 0;
	p->cap = limit;
	p->below = 0;
	p->v = calloc(limit ? limit : 1, sizeof(*p->v));
	if (!p->v) {
		render_error(c, 500, "out of memory");
		return -1;
	}
	int rc = store_changes_each_before(c->rd->store, before, p->lo ? limit + 1 : limit, line_add,
					   p, NULL, &err);
	if (rc < 0) {
		log_warn("http: the record list before %llu: %s", (unsigned long long)before, err.msg);
		render_error(c, rc == PITH_EINVAL ? 503 : 500, "%s",
			   rc == PITH_EINVAL ? "this store has no change log yet" : "store error");
		free(p->v);
		p->v = NULL;
		return -1;
	}
	return 0;
}

/* The newest limit records, for the home page. */
static int recent_read(render_ctx_t *c, size_t limit, line_page_t *p)
{
	p->lo = 0;
	return lines_read(c, 0, limit, p);
}

/* A page of the record list (docs/http.md, "records"): the records whose
 * latest change is numbered in one range of limit sequence numbers,
 * [k * limit + 1, (k + 1) * limit], newest first. The first page (before
 * 0) is the range of the newest change, partial; before N (the "next" a
 * page served, k * limit + 1 for the range below) is the range holding
 * N - 1, from N - 1 down. A change moves its record out of its range
 * into the newest one, so it rewrites those two pages only, and a page's
 * URL names the same range whatever changes. *next: the cursor of the
 * next older page that holds a record (empty ranges are skipped), 0 at
 * the end. */
static int page_read(render_ctx_t *c, uint64_t before, size_t limit, line_page_t *p, uint64_t *next)
{
	uint64_t top = before ? before - 1 : 0;
	*next = 0;
	p->lo = 1;
	if (!before) { /* the newest change: the first record of the log */
		line_page_t one = {.lo = 0};
		if (lines_read(c, 0, 1, &one))
			return -1;
		top = one.n ? one.v[0].seq : 0;
		free(one.v);
	}
	if (top)
		p->lo = (top - 1) / limit * limit + 1;
	if (lines_read(c, top ? top + 1 : 1, limit, p))
		return -1;
	if (p->below)
		*next = ((p->below - 1) / limit + 1) * limit + 1;
	return 0;
}

/* The facts of a listed record from its state: what render_rec_load finds. */
typedef struct render_rec_facts {
	render_list_facts_t v;
	char author[256];
} render_rec_facts_t;

static void facts_of(const render_rec_t *r, render_rec_facts_t *f)
{
	memset(f, 0, sizeof(*f));
	const json_value_t *md = json_get_type(r->record, "metadata", JSON_OBJECT);
	f->v.title = render_rec_paper_str(r, "title");
	const char *a = render_rec_paper_str(r, "authors_text");
	if (a && *a) {
		const char *e = strstr(a, ", ");
		size_t n = e ? (size_t)(e - a) : strlen(a);
		snprintf(f->author, sizeof(f->author), "%.*s", (int)(n < 255 ? n : 255), a);
		f->v.first_author = f->author;
	}
	f->v.primary_cat = json_get_str(md, "primary_cat");
	f->v.submitted_at = json_get_str(md, "submitted_at");
	f->v.created_at = json_get_str(r->rc, "created_at");
}

/* A listed record's facts: from the context's list cache when it knows
 * them (render.h), else from the record's state (told to the cache),
 * which is loaded without touching the reply (a record that cannot be
 * read is listed by its number alone). 1 when *r was loaded: release it
 * once f is no longer read. */
static int line_facts(render_ctx_t *c, const render_rec_line_t *l, render_rec_t *r,
		      render_rec_facts_t *f)
{
	const render_list_cache_t *lc = &c->rd->list_cache;
	memset(f, 0, sizeof(*f));
	if (lc->get && !lc->get(lc->arg, l->pith, &f->v))
		return 0;
	render_resp_t saved = c->r;
	int rc = render_rec_load(c, l->pith, r);
	c->r = saved;
	if (!rc)
		facts_of(r, f);
	f->v.seq = l->seq;
	f->v.unread = rc != 0;
	if (lc->put)
		lc->put(lc->arg, l->pith, &f->v);
	return !rc;
}

/* ---- cursors and limits ------------------------------------------------------------ */

#define LIST_DEFAULT 50
#define LIST_MAX 200
#define HOME_RECENT 20

static int cursor_arg(render_ctx_t *c, uint64_t *before)
{
	int count = 0;
	*before = 0;
	const char *a = render_target_query(c->t, "after", &count);
	if (!a)
		return 0;
	uint64_t x = 0;
	size_t n = strlen(a);
	int bad = count > 1 || !n || n > 19;
	for (size_t i = 0; !bad && i < n; i++) {
		if (a[i] < '0' || a[i] > '9')
			bad = 1;
		else
			x = x * 10 + (uint64_t)(a[i] - '0');
	}
	if (bad || !x) {
		render_error(c, 400, "after: not a cursor of this list (give back a \"next\" it served, "
			   "or leave it out to start from the newest)");
		return -1;
	}
	*before = x;
	return 0;
}

int render_arg_count(render_ctx_t *c, const char *key, size_t dflt, size_t min, size_t max,
		   size_t *out)
{
	int count = 0;
	const char *v = render_target_query(c->t, key, &count);
	*out = dflt;
	if (!v)
		return 0;
	size_t x = 0, n = strlen(v);
	int bad = count > 1 || !n || n > 6;
	for (size_t i = 0; !bad && i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			bad = 1;
		else
			x = x * 10 + (size_t)(v[i] - '0');
	}
	if (bad || x < min) {
		render_error(c, 400, "%s: a whole number from %zu (at most %zu are served)", key, min, max);
		return -1;
	}
	*out = x > max ? max : x;
	return 0;
}

static int limit_arg(render_ctx_t *c, size_t *limit)
{
	return render_arg_count(c, "limit", LIST_DEFAULT, 1, LIST_MAX, limit);
}

/* ---- /api/records ------------------------------------------------------------------ */

void render_view_records_json(render_ctx_t *c)
{
	render_t *h = c->rd;
	uint64_t before, next;
	size_t limit;
	line_page_t p;
	render_jb_t b;
	if (cursor_arg(c, &before) || limit_arg(c, &limit) || page_read(c, before, limit, &p, &next))
		return;
	if (render_jb_begin(c, &b)) {
		free(p.v);
		return;
	}
	json_value_t *o = render_jb_obj(&b), *list = render_jb_arr(&b);
	for (size_t i = 0; i < p.n; i++) {
		const render_rec_line_t *l = &p.v[i];
		render_rec_t r;
		render_rec_facts_t f;
		int loaded = line_facts(c, l, &r, &f);
		json_value_t *e = render_jb_obj(&b);
		char cur[24];
		snprintf(cur, sizeof(cur), "%llu", (unsigned long long)l->seq);
		render_jb_set(&b, e, "pith_number", render_jb_str(&b, l->pith));
		char short_num[14];
		snprintf(short_num, sizeof(short_num), "pith:%.8s", l->pith + PITH_NUMBER_LEN - PITH_BODY_LEN);
		render_jb_set(&b, e, "short_pith_number", render_jb_str(&b, short_num));
		render_jb_set(&b, e, "title", render_jb_str(&b, f.v.title));
		render_jb_set(&b, e, "first_author", render_jb_str(&b, f.v.first_author));
		render_jb_set(&b, e, "primary_cat", render_jb_str(&b, f.v.primary_cat));
		render_jb_set(&b, e, "submitted_at", render_jb_str(&b, f.v.submitted_at));
		render_jb_set(&b, e, "created_at", render_jb_str(&b, f.v.created_at));
		render_jb_set(&b, e, "built_at", render_jb_str(&b, l->has_bundle ? l->built_at : NULL));
		render_jb_set(&b, e, "state_sha256", render_jb_str(&b, l->state_sha));
		render_jb_set(&b, e, "cursor", render_jb_str(&b, cur));
		render_jb_set(&b, e, "url", render_jb_url(&b, h, "/pith/%s", l->pith + PITH_NUMBER_LEN - PITH_BODY_LEN));
		render_jb_push(&b, list, e);
		if (loaded)
			render_rec_release(&r);
	}
	char nx[24];
	snprintf(nx, sizeof(nx), "%llu", (unsigned long long)next);
	render_jb_set(&b, o, "records", list);
	render_jb_set(&b, o, "next", next ? render_jb_str(&b, nx) : NULL);
	render_jb_set(&b, o, "limit", render_jb_int(&b, (int64_t)limit));
	free(p.v);
	render_jb_finish(c, &b, o, "application/json");
}

/* ---- HTML ------------------------------------------------------------------------------ */


/* One style sheet for every page: a column of text that fits a phone.
 * Long identifiers (pith numbers, hashes, node ids) break anywhere
 * (overflow-wrap, inherited: words still wrap at spaces first)
 * rather than widen the page; the list's side columns go on narrow
 * screens. */
static const char page_style[] =
	"<style>body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:0 auto;"
	"padding:0 1rem 2rem;color:#222;overflow-wrap:anywhere}a{color:#0645ad}"
	"code,pre{font:14px ui-monospace,monospace}pre{white-space:pre-wrap;background:#f4f4f4;"
	"padding:.75rem}th,td code{white-space:nowrap;overflow-wrap:normal}"
	".muted{color:#666}table{border-collapse:collapse;width:100%}td,th{text-align:left;"
	"padding:.3rem .4rem;border-bottom:1px solid #ddd;vertical-align:top}"
	"header{border-bottom:1px solid #ddd;padding:.6rem 0 .2rem;margin-bottom:1rem}"
	"header .site{font-weight:600;font-size:1.15rem;text-decoration:none;color:#222}"
	"header .who{display:inline-block;color:#666;font-size:14px;margin-left:.4rem}"
	"header nav{margin:.2rem 0}nav a{margin-right:1rem}"
	"form{display:flex;gap:.5rem;margin:.5rem 0}input[type=search]{flex:1;min-width:0;"
	"font:inherit;padding:.4rem}button{font:inherit;padding:.4rem .8rem}dt{font-weight:600}"
	"dd{margin-left:1rem}.status span{display:inline-block;margin:0 .3rem .3rem 0;"
	"padding:.1rem .5rem;border-radius:1rem;font-size:14px;background:#eee}"
	".status .ok{background:#dff3e4}.links a{display:inline-block;margin:0 .8rem .3rem 0}"
	"@media (max-width:40rem){.wide{display:none}h1{font-size:1.6rem}}</style>";

void render_html_begin(render_ctx_t *c, const char *title)
{
	pith_buf_t *b = c->body;
	pith_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
			 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
			 "<title>");
	if (title && *title) {
		render_html_text(b, title);
		pith_buf_puts(b, " &middot; ");
	}
	render_html_text(b, c->rd->name);
	pith_buf_puts(b, "</title>\n");
}

/* How to reach the operator: a link when it is an http(s) URL or an
 * e-mail address, else the text. */
static void contact_html(pith_buf_t *b, const char *contact)
{
	int url = !strncmp(contact, "https://", 8) || !strncmp(contact, "http://", 7);
	int mail = !url && strchr(contact, '@') && !strpbrk(contact, " :/<>\"'");
	if (!url && !mail) {
		render_html_text(b, contact);
		return;
	}
	pith_buf_puts(b, mail ? "<a href=\"mailto:" : "<a href=\"");
	render_html_text(b, contact);
	pith_buf_puts(b, "\">");
	render_html_text(b, contact);
	pith_buf_puts(b, "</a>");
}

void render_html_body(render_ctx_t *c, const char *q)
{
	render_t *h = c->rd;
	pith_buf_t *b = c->body;
	pith_buf_puts(b, page_style);
	pith_buf_puts(b, "</head>\n<body>\n<header><a class=\"site\" href=\"");
	render_html_text(b, h->base_url);
	pith_buf_puts(b, "/\">");
	render_html_text(b, h->name);
	pith_buf_puts(b, "</a>");
	if (h->operator_name[0] || h->contact[0]) {
		pith_buf_puts(b, "<span class=\"who\">");
		if (h->operator_name[0]) {
			pith_buf_puts(b, "run by ");
			render_html_text(b, h->operator_name);
		}
		if (h->contact[0]) {
			pith_buf_puts(b, h->operator_name[0] ? " &middot; " : "contact: ");
			contact_html(b, h->contact);
		}
		pith_buf_puts(b, "</span>");
	}
	pith_buf_puts(b, "\n<nav><a href=\"");
	render_html_text(b, h->base_url);
	pith_buf_puts(b, "/\">Home</a><a href=\"");
	render_html_text(b, h->base_url);
	pith_buf_puts(b, "/pith/\">All records</a>");
	if (h->search_url[0]) {
		pith_buf_puts(b, "<a href=\"");
		render_html_text(b, h->search_url);
		pith_buf_puts(b, "/search\">Search</a>");
	}
	pith_buf_puts(b, "</nav>\n");
	if (h->search_url[0]) {
		pith_buf_puts(b, "<form action=\"");
		render_html_text(b, h->search_url);
		pith_buf_puts(b, "/search\" method=\"get\" role=\"search\">"
				 "<input type=\"search\" name=\"q\" maxlength=\"256\" aria-label=\"Search\" "
				 "placeholder=\"Title, author or id\" value=\"");
		render_html_text(b, q);
		pith_buf_puts(b, "\"><button type=\"submit\">Search</button></form>\n");
	}
	pith_buf_puts(b, "</header>\n<main>\n");
}

void render_html_head(render_ctx_t *c, const char *title, const char *q)
{
	render_html_begin(c, title);
	render_html_body(c, q);
}

/* The table of a page of records. */
static void render_html_table(render_ctx_t *c, const line_page_t *p)
{
	pith_buf_t *b = c->body;
	pith_buf_puts(b, "<table>\n<tr><th>Record</th><th>Title</th><th class=\"wide\">First author"
			 "</th><th class=\"wide\">Category</th><th class=\"wide\">Submitted</th></tr>\n");
	for (size_t i = 0; i < p->n; i++) {
		const render_rec_line_t *l = &p->v[i];
		const char *body = l->pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
		render_rec_t r;
		render_rec_facts_t f;
		int loaded = line_facts(c, l, &r, &f);
		pith_buf_puts(b, "<tr><td><a href=\"");
		render_html_text(b, c->rd->base_url);
		pith_buf_printf(b, "/pith/%s/\"><code>pith:%.8s</code></a></td><td>", body, body);
		if (f.v.title && *f.v.title)
			render_html_text(b, f.v.title);
		else
			pith_buf_puts(b, "<span class=\"muted\">(title not known here)</span>");
		pith_buf_puts(b, "</td><td class=\"wide\">");
		render_html_text(b, f.v.first_author);
		pith_buf_puts(b, "</td><td class=\"wide\">");
		render_html_text(b, f.v.primary_cat);
		pith_buf_puts(b, "</td><td class=\"wide\">");
		if (f.v.submitted_at && strlen(f.v.submitted_at) >= 10)
			render_html_escape(b, f.v.submitted_at, 10);
		pith_buf_puts(b, "</td></tr>\n");
		if (loaded)
			render_rec_release(&r);
	}
	pith_buf_puts(b, "</table>\n");
}

void render_html_done(render_ctx_t *c)
{
	pith_buf_puts(c->body, "</main></body></html>\n");
	if (c->body->oom) {
		render_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "text/html; charset=utf-8";
	c->r.is_html = 1;
	render_etag_body(c);
}

/* /pith/: every record, newest change first, in pages of LIST_DEFAULT
 * sequence numbers (page_read). */
void render_view_records_html(render_ctx_t *c)
{
	uint64_t before, next;
	size_t limit;
	line_page_t p;
	if (cursor_arg(c, &before) || limit_arg(c, &limit) || page_read(c, before, limit, &p, &next))
		return;
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	render_html_head(c, "All records", NULL);
	pith_buf_puts(b, "<h1>All records</h1>\n");
	if (!before) {
		store_counts_t sc;
		store_counts_get(c->rd->store, &sc);
		pith_buf_printf(b, "<p class=\"muted\">%llu records on this mirror, the most "
				   "recently changed first.</p>\n", (unsigned long long)sc.records);
	} else {
		/* nothing that another page's change moves: the page stays */
		pith_buf_puts(b, "<p class=\"muted\">Older records, the most recently changed "
				 "first.</p>\n");
	}
	render_html_table(c, &p);
	if (next) {
		pith_buf_puts(b, "<p><a rel=\"next\" href=\"");
		render_html_text(b, c->rd->base_url);
		pith_buf_printf(b, "/pith/?after=%llu&amp;limit=%zu\">Older records &rarr;</a></p>\n",
				(unsigned long long)next, limit);
	}
	pith_buf_puts(b, "<p class=\"muted\">The same as JSON: <a href=\"");
	render_html_text(b, c->rd->base_url);
	pith_buf_puts(b, "/api/records\">/api/records</a></p>\n");
	free(p.v);
	render_html_done(c);
}

/* /: what this mirror is, what changed last, and the search box. */
void render_view_home(render_ctx_t *c)
{
	render_t *h = c->rd;
	line_page_t p;
	if (recent_read(c, HOME_RECENT, &p))
		return;
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	render_html_head(c, NULL, NULL);
	pith_buf_puts(b, "<h1>");
	render_html_text(b, h->name);
	pith_buf_puts(b, "</h1>\n<p>A mirror of the Pith Number registry: it keeps registry-signed "
			 "records and the events signed about them, and recomputes each record's state "
			 "with the deterministic merge, so that what it serves can be checked by "
			 "anyone.</p>\n");
	store_counts_t sc;
	store_counts_get(h->store, &sc);
	pith_buf_puts(b, "<dl>\n");
	if (*h->node_id) {
		pith_buf_puts(b, "<dt>Node id</dt><dd><code>");
		render_html_text(b, h->node_id);
		pith_buf_puts(b, "</code></dd>\n");
	}
	if (*h->network_id) {
		pith_buf_puts(b, "<dt>Network</dt><dd><code>");
		render_html_text(b, h->network_id);
		pith_buf_puts(b, "</code></dd>\n");
	}
	pith_buf_printf(b, "<dt>Holds</dt><dd>%llu record%s, %llu event%s, %llu registry bundle%s</dd>\n",
			(unsigned long long)sc.records, sc.records == 1 ? "" : "s",
			(unsigned long long)sc.events, sc.events == 1 ? "" : "s",
			(unsigned long long)sc.bundles, sc.bundles == 1 ? "" : "s");
	if (h->about) {
		render_about_t ab = {0};
		h->about(h->about_arg, &ab);
		pith_buf_printf(b, "<dt>Peers</dt><dd>%zu connected</dd>\n", ab.peers);
		pith_buf_puts(b, "<dt>Upstreams</dt><dd>");
		for (size_t i = 0; i < ab.nupstreams && i < 16; i++) {
			pith_buf_puts(b, i ? ", <code>" : "<code>");
			render_html_text(b, ab.upstreams[i]);
			pith_buf_puts(b, "</code>");
		}
		pith_buf_puts(b, ab.nupstreams ? "</dd>\n" : "none</dd>\n");
	}
	for (size_t i = 0; i < h->nmirrors && i < 64; i++) {
		pith_buf_puts(b, i ? ", " : "<dt>Peer mirrors</dt><dd>");
		pith_buf_puts(b, "<a href=\"");
		render_html_text(b, h->mirrors[i].base_url);
		pith_buf_puts(b, "/\">");
		render_html_text(b, h->mirrors[i].name);
		pith_buf_puts(b, "</a>");
		if (i + 1 == h->nmirrors || i == 63)
			pith_buf_puts(b, "</dd>\n");
	}
	pith_buf_printf(b, "<dt>Last change</dt><dd>number %llu in its change log",
			(unsigned long long)store_changes_last(h->store));
	if (p.n) {
		const char *body = p.v[0].pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
		pith_buf_puts(b, " (<a href=\"");
		render_html_text(b, h->base_url);
		pith_buf_printf(b, "/pith/%s/\">pith:%.8s</a>)", body, body);
	}
	pith_buf_puts(b, "</dd>\n</dl>\n<h2>Recently changed</h2>\n");
	render_html_table(c, &p);
	pith_buf_puts(b, "<p><a href=\"");
	render_html_text(b, h->base_url);
	pith_buf_puts(b, "/pith/\">All records &rarr;</a></p>\n<p class=\"muted\">For programs:");
	static const char *const docs[] = {"/api/records", "/api/changes", "/pith-mirrors.json",
					   "/pith-signing-key.json", "/healthz"};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		if (h->files_only && (i == 1 || i == 4))
			continue; /* the change feed and /healthz are a node's, not files */
		pith_buf_puts(b, i ? ", <a href=\"" : " <a href=\"");
		render_html_text(b, h->base_url);
		pith_buf_printf(b, "%s\">%s</a>", docs[i], docs[i]);
	}
	pith_buf_puts(b, ".</p>\n");
	free(p.v);
	render_html_done(c);
}
