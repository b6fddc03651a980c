/* /pith/{ID}: the record's page, JSON-LD for programs (with the canonical
 * record the registry page's verify line hashes) or a small HTML page for
 * people. Everything on the HTML page that came from an event is escaped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render_int.h"
#include "json.h"
#include "search.h"
#include "utf8.h"

/* ---- /pith/{ID}: JSON-LD or HTML --------------------------------------------------- */

/* JSON-LD when the client prefers application/ld+json (or plain JSON)
 * to HTML; a browser's Accept asks for text/html first. */
static int wants_ld(render_ctx_t *c)
{
	const char *a = c->accept;
	if (!a)
		return 0;
	double ld = render_accept_q(a, "application/ld+json", 1);
	double js = render_accept_q(a, "application/json", 1);
	if (js > ld)
		ld = js;
	double html = render_accept_q(a, "text/html", 1);
	double any = render_accept_q(a, "*/*", 1);
	if (any > html)
		html = any;
	return ld > 0 && ld >= html;
}

static void page_ld(render_ctx_t *c, const render_rec_t *r)
{
	render_t *h = c->rd;
	render_jb_t b;
	if (render_jb_begin(c, &b))
		return;
	json_value_t *o = render_jb_obj(&b);
	render_jb_set(&b, o, "@context", render_jb_str(&b, "https://schema.org"));
	render_jb_set(&b, o, "@type", render_jb_str(&b, "ScholarlyArticle"));
	render_jb_set(&b, o, "@id", render_jb_url(&b, h, "/pith/%s", r->body));
	render_jb_set(&b, o, "url", render_jb_url(&b, h, "/pith/%s", r->body));
	json_value_t *ids = render_jb_arr(&b);
	struct {
		const char *prop, *val;
	} idv[] = {
		{"pith", r->pith},
		{"pith_short", r->short_num},
		{"arxiv", render_rec_alias(r, "arxiv")},
		{"doi", render_rec_alias(r, "doi")},
	};
	for (size_t i = 0; i < sizeof(idv) / sizeof(idv[0]); i++) {
		if (!idv[i].val)
			continue;
		json_value_t *pv = render_jb_obj(&b);
		render_jb_set(&b, pv, "@type", render_jb_str(&b, "PropertyValue"));
		render_jb_set(&b, pv, "propertyID", render_jb_str(&b, idv[i].prop));
		render_jb_set(&b, pv, "value", render_jb_str(&b, idv[i].val));
		render_jb_push(&b, ids, pv);
	}
	render_jb_set(&b, o, "identifier", ids);
	if (render_rec_paper_str(r, "title"))
		render_jb_set(&b, o, "name", json_get(r->paper, "title"));
	const char *authors = render_rec_paper_str(r, "authors_text");
	if (authors && *authors) {
		json_value_t *al = render_jb_arr(&b);
		const char *cur = authors, *p;
		size_t n;
		while (render_rec_author_next(&cur, &p, &n)) {
			json_value_t *a = render_jb_obj(&b);
			render_jb_set(&b, a, "@type", render_jb_str(&b, "Person"));
			render_jb_set(&b, a, "name", render_jb_chk(&b, json_new_stringn(b.d, p, n)));
			render_jb_push(&b, al, a);
		}
		render_jb_set(&b, o, "author", al);
	}
	const json_value_t *md = json_get_type(r->record, "metadata", JSON_OBJECT);
	if (json_get_str(md, "submitted_at"))
		render_jb_set(&b, o, "datePublished", json_get(md, "submitted_at"));
	if (json_get_str(md, "license"))
		render_jb_set(&b, o, "license", json_get(md, "license"));
	const char *arxiv = render_rec_alias(r, "arxiv_version");
	if (!arxiv)
		arxiv = render_rec_alias(r, "arxiv");
	const char *doi = render_rec_alias(r, "doi");
	if (arxiv || doi) {
		json_value_t *same = render_jb_arr(&b);
		char u[300];
		if (arxiv) {
			snprintf(u, sizeof(u), "https://arxiv.org/abs/%s", arxiv);
			render_jb_push(&b, same, render_jb_str(&b, u));
		}
		if (doi) {
			snprintf(u, sizeof(u), "https://doi.org/%s", doi);
			render_jb_push(&b, same, render_jb_str(&b, u));
		}
		render_jb_set(&b, o, "sameAs", same);
	}
	render_jb_set(&b, o, "pith_number", render_jb_str(&b, r->pith));
	render_jb_set(&b, o, "short_pith_number", render_jb_str(&b, r->short_num));
	render_jb_set(&b, o, "canonical_sha256", render_jb_str(&b, r->canon_hex));
	render_jb_set(&b, o, "canonical_record", r->record);
	render_jb_set(&b, o, "receipt", r->receipt);
	render_jb_set(&b, o, "state_sha256", render_jb_str(&b, r->state_sha));
	render_jb_set(&b, o, "links", render_rec_links(&b, h, r));
	render_jb_finish(c, &b, o, "application/ld+json");
}

/* ---- HTML ------------------------------------------------------------------------ */

void render_text_escape(pith_buf_t *out, const char *s, size_t n, const char *const esc[128])
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		unsigned char ch = p[i];
		if (ch < 0x80 && (esc[ch] || ch < 0x20 || ch == 0x7f)) {
			pith_buf_puts(out, esc[ch] ? esc[ch] : "");
			i++;
			continue;
		}
		size_t l = pith_utf8_char(p + i, n - i, NULL);
		if (!l) {
			pith_buf_puts(out, "\xef\xbf\xbd");
			i++;
			continue;
		}
		pith_buf_append(out, p + i, l);
		i += l;
	}
}

/* HTML: the five that matter, controls dropped but line breaks and tabs */
static const char *const render_html_esc[128] = {
	['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&#39;",
	['\n'] = "\n", ['\t'] = "\t",
};

void render_html_escape(pith_buf_t *out, const char *s, size_t n)
{
	render_text_escape(out, s, n, render_html_esc);
}

void render_html_text(pith_buf_t *out, const char *s)
{
	if (s)
		render_html_escape(out, s, strlen(s));
}

/* Canonical JSON re-indented two spaces a level (string contents are
 * copied as they are). */
static void json_indent(pith_buf_t *out, const uint8_t *p, size_t n)
{
	int depth = 0, in_str = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t ch = p[i];
		if (in_str) {
			pith_buf_putc(out, ch);
			if (ch == '\\' && i + 1 < n)
				pith_buf_putc(out, p[++i]);
			else if (ch == '"')
				in_str = 0;
			continue;
		}
		switch (ch) {
		case '"':
			in_str = 1;
			pith_buf_putc(out, ch);
			break;
		case '{':
		case '[':
			pith_buf_putc(out, ch);
			if (i + 1 < n && (p[i + 1] == '}' || p[i + 1] == ']')) {
				pith_buf_putc(out, p[++i]);
				break;
			}
			depth++;
			pith_buf_printf(out, "\n%*s", 2 * depth, "");
			break;
		case '}':
		case ']':
			depth--;
			pith_buf_printf(out, "\n%*s%c", 2 * (depth > 0 ? depth : 0), "", ch);
			break;
		case ',':
			pith_buf_printf(out, ",\n%*s", 2 * depth, "");
			break;
		case ':':
			pith_buf_puts(out, ": ");
			break;
		default:
			pith_buf_putc(out, ch);
		}
	}
}

static void render_html_link(pith_buf_t *b, render_t *h, const char *path_fmt, const char *body,
		      const char *text)
{
	char path[300];
	snprintf(path, sizeof(path), path_fmt, body);
	pith_buf_puts(b, "<a href=\"");
	render_html_text(b, h->base_url);
	render_html_text(b, path);
	pith_buf_puts(b, "\">");
	render_html_text(b, text);
	pith_buf_puts(b, "</a>");
}

/* The verification status in words, as the registry's badges say it:
 * what the record has and what it still lacks. */
static void page_status(pith_buf_t *b, const render_rec_t *r)
{
	struct {
		const char *list, *yes, *no;
	} st[] = {
		{"author_attestations", "author attested", "not attested"},
		{"timestamp_anchors", "anchored", "not anchored"},
		{"storage_attestations", "stored", "not stored"},
	};
	pith_buf_puts(b, "<p class=\"status\">");
	if (r->canon_hex)
		pith_buf_puts(b, "<span class=\"ok\">content-addressed</span> ");
	const char *sig = json_get_str(r->receipt, "signature_status");
	if (sig) {
		pith_buf_puts(b, "<span class=\"ok\">registry receipt (");
		render_html_text(b, sig);
		pith_buf_puts(b, ")</span> ");
	}
	for (size_t i = 0; i < sizeof(st) / sizeof(st[0]); i++) {
		int has = render_rec_list_len(r, st[i].list) > 0;
		pith_buf_printf(b, "<span class=\"%s\">%s</span> ", has ? "ok" : "no",
				has ? st[i].yes : st[i].no);
	}
	pith_buf_printf(b, "<span class=\"%s\">%s</span></p>\n", r->snap ? "ok" : "no",
			r->snap ? "graph snapshot" : "no graph snapshot");
}

/* The paper (arXiv, DOI) and every document of the record this mirror
 * has (the bundle only when it holds one: no link answers 404). */
static void page_links(pith_buf_t *b, render_t *h, const render_rec_t *r, int has_bundle)
{
	const char *arxiv = render_rec_alias(r, "arxiv_version");
	const char *doi = render_rec_alias(r, "doi");
	if (!arxiv)
		arxiv = render_rec_alias(r, "arxiv");
	pith_buf_puts(b, "<p class=\"links\">");
	if (arxiv) {
		pith_buf_puts(b, "<a href=\"https://arxiv.org/abs/");
		render_html_text(b, arxiv);
		pith_buf_puts(b, "\">arXiv</a> ");
	}
	if (doi) {
		pith_buf_puts(b, "<a href=\"https://doi.org/");
		render_html_text(b, doi);
		pith_buf_puts(b, "\">DOI</a> ");
	}
	static const char *const docs[][2] = {
		{"/pith/%s.json", "JSON"},
		{"/pith/%s/bundle.json", "Open Graph bundle"},
		{"/pith/%s/state.json", "Merged state"},
		{"/api/pith-number/%s/events.json", "Events JSON"},
		{"/api/pith-number/%s/graph.json", "Graph JSON"},
		{"/api/pith-number/resolve?pith=%s&json=true", "Resolver JSON"},
		{"/pith/%s.bib", "BibTeX"},
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		if ((i == 1 && !has_bundle) || (i >= 5 && h->files_only))
			continue; /* no bundle; a tree of files answers no resolve, has no .bib */
		render_html_link(b, h, docs[i][0], r->body, docs[i][1]);
		pith_buf_putc(b, ' ');
	}
	render_html_link(b, h, "/pith-signing-key.json%s", "", "Signing key");
	pith_buf_puts(b, " <a href=\"https://pith.science/schemas/pith-number/v1.json\">Schema</a></p>\n");
}

/* The abstract, when the graph snapshot's paper carries one. */
static void page_abstract(pith_buf_t *b, const render_rec_t *r)
{
	const char *abs = render_rec_paper_str(r, "abstract");
	if (!abs || !*abs)
		abs = render_rec_paper_str(r, "abstract_excerpt");
	if (!abs || !*abs)
		return;
	pith_buf_puts(b, "<h3>Abstract</h3>\n<p class=\"abstract\">");
	render_html_text(b, abs);
	pith_buf_puts(b, "</p>\n");
}

/* The LaTeX snippet and a link to embed (the mirror has no badge image:
 * the registry's badge route is not published). */
static void page_cite(pith_buf_t *b, render_t *h, const render_rec_t *r)
{
	pith_buf_puts(b, "<h3>Add to your LaTeX paper</h3>\n<pre>\\usepackage{pith}\n\\pithnumber{");
	render_html_text(b, r->body);
	pith_buf_puts(b, "}</pre>\n<p class=\"muted\">Prints a linked badge after your title and "
			 "injects PDF metadata (the registry's <code>pith</code> package).</p>\n"
			 "<h3>Embed a link to this record</h3>\n<pre>");
	pith_buf_t *t = &h->tmp;
	pith_buf_reset(t);
	pith_buf_puts(t, "<a href=\"");
	pith_buf_puts(t, h->base_url);
	pith_buf_printf(t, "/pith/%s\">%s</a>\n[%s](", r->body, r->short_num, r->short_num);
	pith_buf_puts(t, h->base_url);
	pith_buf_printf(t, "/pith/%s)", r->body);
	if (!t->oom)
		render_html_escape(b, (const char *)t->data, t->len);
	pith_buf_puts(b, "</pre>\n<h3 id=\"bibtex\">Cite it: BibTeX</h3>\n<pre>");
	pith_buf_reset(t);
	render_bib_entry(t, h, r);
	if (!t->oom)
		render_html_escape(b, (const char *)t->data, t->len);
	pith_buf_puts(b, "</pre>\n<p class=\"muted\">Select and copy it");
	if (!h->files_only) { /* a tree of files has no .bib (docs/site.md) */
		pith_buf_puts(b, ", or ");
		render_html_link(b, h, "/pith/%s.bib", r->body, "download it as a .bib file");
	}
	pith_buf_puts(b, " (the key is the short pith number).</p>\n");
}

/* The registry's completeness list: what the record has, what is open. */
static void page_completeness(render_ctx_t *c, const render_rec_t *r, const char *built)
{
	render_t *h = c->rd;
	pith_buf_t *b = c->body;
	static const char *const lists[][3] = {
		{"timestamp_anchors", "Bitcoin timestamp", "anchor"},
		{"storage_attestations", "Internet Archive", "storage attestation"},
		{"author_attestations", "Author claim", "author attestation"},
		{"citation_signatures", "Citations", "citation signature"},
		{"replication_records", "Replications", "replication record"},
	};
	pith_buf_puts(b, "<h3>Record completeness</h3>\n<ol class=\"complete\">\n");
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		size_t n = render_rec_list_len(r, lists[i][0]);
		if (n)
			pith_buf_printf(b, "<li>&#10003; %s: %zu %s%s</li>\n", lists[i][1], n, lists[i][2],
					n == 1 ? "" : "s");
		else
			pith_buf_printf(b, "<li>%s: open</li>\n", lists[i][1]);
	}
	if (built) {
		pith_buf_puts(b, "<li>&#10003; Portable graph bundle live (built ");
		render_html_text(b, built);
		pith_buf_puts(b, ") &middot; ");
		render_html_link(b, h, "/pith/%s/bundle.json", r->body, "download bundle");
	} else {
		pith_buf_puts(b, "<li>Portable graph bundle: none on this mirror yet");
	}
	pith_buf_puts(b, " &middot; ");
	render_html_link(b, h, "/pith/%s/state.json", r->body, "merged state");
	pith_buf_printf(b, "</li>\n</ol>\n<p class=\"muted\">Also: %zu corrections, %zu graph "
			   "snapshots, %zu mirror hints. The bundle contains the canonical record "
			   "plus signed events. A mirror can host it anywhere and recompute the same "
			   "current state with the deterministic merge algorithm.</p>\n",
			render_rec_list_len(r, "corrections"), render_rec_list_len(r, "graph_snapshots"),
			render_rec_list_len(r, "mirror_hints"));
}

#define CITED_BY_SHOWN 20

typedef struct cited {
	render_ctx_t *c;
} cited_t;

static int cited_line(void *arg, const search_hit_t *hit)
{
	cited_t *k = arg;
	pith_buf_t *b = k->c->body;
	const char *body = hit->pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	pith_buf_puts(b, "<li>");
	render_html_link(b, k->c->rd, "/pith/%s/", body,
		  hit->title && *hit->title ? hit->title : hit->pith);
	pith_buf_puts(b, "</li>\n");
	return 0;
}

/* "Cited by": the records whose applied citation_signature events name
 * this one, from the search index's citation table (search.h). */
static void page_cited_by(render_ctx_t *c, const render_rec_t *r)
{
	pith_buf_t *b = c->body;
	pith_buf_puts(b, "<h3>Cited by</h3>\n");
	if (!c->rd->search) {
		pith_buf_puts(b, "<p class=\"muted\">Not known: this mirror keeps no search index."
				 "</p>\n");
		return;
	}
	size_t total = 0;
	pith_err_t err = {0};
	pith_buf_t *mark = b;
	size_t at = mark->len;
	pith_buf_puts(b, "<ul class=\"cited\">\n");
	cited_t k = {.c = c};
	if (search_cited_by(c->rd->search, r->pith, CITED_BY_SHOWN, cited_line, &k, &total, &err)) {
		mark->len = at;
		pith_buf_puts(b, "<p class=\"muted\">Not known: the search index failed.</p>\n");
		return;
	}
	if (!total) {
		mark->len = at;
		pith_buf_puts(b, "<p>No record on this mirror cites it yet.</p>\n");
		return;
	}
	pith_buf_puts(b, "</ul>\n");
	pith_buf_printf(b, "<p class=\"muted\">%zu paper%s on this mirror%s.</p>\n", total,
			total == 1 ? "" : "s", total > CITED_BY_SHOWN ? " (the first 20 shown)" : "");
}

static void page_html(render_ctx_t *c, const render_rec_t *r)
{
	render_t *h = c->rd;
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	const char *title = render_rec_paper_str(r, "title");
	pith_buf_t *t = &h->tmp2;
	pith_buf_reset(t);
	if (title && *title) {
		pith_buf_puts(t, title);
		pith_buf_puts(t, " \xc2\xb7 ");
	}
	pith_buf_puts(t, r->short_num);
	pith_buf_putc(t, 0);
	render_html_begin(c, t->oom ? r->short_num : (const char *)t->data);
	render_html_citation_meta(b, r);
	render_html_body(c, NULL);
	pith_buf_puts(b, "<p class=\"muted\">Pith Number</p>\n<h1>");
	render_html_text(b, r->short_num);
	pith_buf_puts(b, "</h1>\n<p><code>");
	render_html_text(b, r->pith);
	pith_buf_puts(b, "</code></p>\n");
	if (title && *title) {
		pith_buf_puts(b, "<h2>");
		render_html_text(b, title);
		pith_buf_puts(b, "</h2>\n");
	}
	const char *authors = render_rec_paper_str(r, "authors_text");
	if (authors && *authors) {
		pith_buf_puts(b, "<p>");
		render_html_text(b, authors);
		pith_buf_puts(b, "</p>\n");
	}
	const json_value_t *md = json_get_type(r->record, "metadata", JSON_OBJECT);
	const char *kind = json_get_str(r->source, "kind"), *sid = json_get_str(r->source, "id");
	if (kind && sid) {
		pith_buf_puts(b, "<p>");
		render_html_text(b, kind);
		pith_buf_puts(b, ":");
		render_html_text(b, sid);
		const json_value_t *ver = json_get_type(r->source, "version", JSON_INT);
		if (ver) {
			pith_buf_puts(b, " v");
			render_html_text(b, ver->u.str);
		}
		const char *sub = json_get_str(md, "submitted_at");
		if (sub && strlen(sub) >= 10) {
			pith_buf_puts(b, " &middot; ");
			render_html_escape(b, sub, 10);
		}
		const char *cat = json_get_str(md, "primary_cat");
		if (cat) {
			pith_buf_puts(b, " &middot; ");
			render_html_text(b, cat);
		}
		const json_value_t *cc = json_get_type(md, "cross_cats_sorted", JSON_ARRAY);
		for (size_t i = 0; cc && i < cc->len && i < 32; i++)
			if (json_is(cc->u.items[i], JSON_STRING)) {
				pith_buf_puts(b, " &middot; ");
				render_html_text(b, cc->u.items[i]->u.str);
			}
		pith_buf_puts(b, "</p>\n");
	}
	char built[STORE_BUILT_AT_MAX + 1];
	int has_bundle = !store_built_at_get(h->store, r->pith, built, NULL);
	page_status(b, r);
	page_links(b, h, r, has_bundle);
	page_abstract(b, r);
	page_cite(b, h, r);
	page_completeness(c, r, has_bundle ? built : NULL);
	page_cited_by(c, r);
	if (r->receipt) {
		pith_buf_puts(b, "<h3>Receipt and verification</h3>\n<dl>");
		static const char *const rk[][2] = {
			{"first_computed_at", "First computed"},
			{"builder_version", "Builder"},
			{"key_id", "Signing key"},
			{"signature_status", "Signature status"},
		};
		for (size_t i = 0; i < sizeof(rk) / sizeof(rk[0]); i++) {
			const char *v = json_get_str(r->receipt, rk[i][0]);
			if (!v)
				continue;
			pith_buf_printf(b, "<dt>%s</dt><dd><code>", rk[i][1]);
			render_html_text(b, v);
			pith_buf_puts(b, "</code>");
			if (!strcmp(rk[i][0], "key_id")) {
				pith_buf_puts(b, " &middot; ");
				render_html_link(b, h, "/pith-signing-key.json%s", "", "public key");
			}
			pith_buf_puts(b, "</dd>");
		}
		const char *sv = json_get_str(r->record, "schema_version");
		if (sv) {
			pith_buf_puts(b, "<dt>Schema</dt><dd><code>pith-number/v");
			render_html_text(b, sv);
			pith_buf_puts(b, "</code></dd>");
		}
		pith_buf_puts(b, "</dl>\n");
	}
	if (r->canon_hex) {
		pith_buf_puts(b, "<h3>Canonical hash</h3>\n<p><code>");
		render_html_text(b, r->canon_hex);
		pith_buf_puts(b, "</code></p>\n");
	}
	pith_buf_puts(b, "<h3>Aliases</h3>\n<p>");
	int first = 1;
	if (r->aliases && r->aliases->len) {
		for (size_t i = 0; i < r->aliases->len && i < 64; i++) {
			const char *k = json_get_str(r->aliases->u.items[i], "alias_kind");
			const char *v = json_get_str(r->aliases->u.items[i], "alias_value");
			if (!k || !v)
				continue;
			pith_buf_puts(b, first ? "" : " &middot; ");
			first = 0;
			render_html_text(b, k);
			pith_buf_puts(b, ": ");
			render_html_text(b, v);
		}
	} else {
		for (int i = 0; i < r->nderived; i++) {
			pith_buf_puts(b, first ? "" : " &middot; ");
			first = 0;
			render_html_text(b, r->derived[i].kind);
			pith_buf_puts(b, ": ");
			render_html_text(b, r->derived[i].value);
		}
	}
	pith_buf_puts(b, first ? "none known</p>\n" : "</p>\n");
	pith_buf_puts(b, "<h3>Merged state on this mirror</h3>\n<p><code>");
	render_html_text(b, r->state_sha);
	const json_value_t *ec = json_get_type(r->state, "event_count", JSON_INT);
	const json_value_t *iv = json_get_type(r->state, "invalid_event_count", JSON_INT);
	const json_value_t *eq = json_get_type(r->state, "equivocation_count", JSON_INT);
	pith_buf_puts(b, "</code><br>events: ");
	render_html_text(b, ec ? ec->u.str : "?");
	pith_buf_puts(b, ", invalid: ");
	render_html_text(b, iv ? iv->u.str : "?");
	pith_buf_puts(b, ", equivocations: ");
	render_html_text(b, eq ? eq->u.str : "?");
	pith_buf_puts(b, "</p>\n");
	if (r->record) {
		pith_buf_puts(b, "<h3>Verify this Pith Number yourself</h3>\n<pre>curl -sH "
				 "'Accept: application/ld+json' ");
		render_html_text(b, h->base_url);
		pith_buf_puts(b, "/pith/");
		render_html_text(b, r->body);
		pith_buf_puts(b, " \\\n  | jq -c '.canonical_record' \\\n  | python3 -c \"import sys,json,"
				 "hashlib; b=json.dumps(json.loads(sys.stdin.read()), sort_keys=True, "
				 "separators=(',',':'), ensure_ascii=False).encode(); "
				 "print(hashlib.sha256(b).hexdigest())\"\n# expect: ");
		render_html_text(b, r->canon_hex);
		pith_buf_puts(b, "</pre>\n<h3>Canonical record JSON</h3>\n<pre>");
		pith_buf_reset(t);
		pith_buf_t *ind = &h->tmp;
		pith_buf_reset(ind);
		if (!json_canon_write(r->record, t)) {
			json_indent(ind, t->data, t->len);
			render_html_escape(b, (const char *)ind->data, ind->len);
		}
		pith_buf_puts(b, "</pre>\n");
	}
	pith_buf_puts(b, "<p class=\"muted\">Served by the mirror ");
	render_html_text(b, h->name);
	pith_buf_puts(b, " from its own store: the state above is its own deterministic merge of "
			 "the signed events it holds.</p>\n</main></body></html>\n");
	if (b->oom) {
		render_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "text/html; charset=utf-8";
	c->r.is_html = 1;
	render_etag_body(c);
}

void render_view_page(render_ctx_t *c, const char *pith)
{
	render_rec_t r;
	c->r.vary_accept = 1;
	if (render_rec_load(c, pith, &r))
		return;
	if (wants_ld(c))
		page_ld(c, &r);
	else
		page_html(c, &r);
	c->r.vary_accept = 1;
	render_rec_release(&r);
}
