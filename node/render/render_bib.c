/* What reference managers read of a record: /pith/{ID}.bib, its BibTeX
 * entry, and the citation_* meta tags of the record page (Google
 * Scholar's, which Zotero reads too). docs/http.md, "BibTeX", maps each
 * field. Everything comes from the record's merged state: the graph
 * snapshot's paper (title, authors), the canonical record's metadata
 * (submitted_at, primary_cat) and its aliases (arXiv id, DOI). */
#include <stdio.h>
#include <string.h>

#include "render_int.h"
#include "json.h"

int render_rec_author_next(const char **cursor, const char **s, size_t *n)
{
	const char *p = *cursor;
	while (p && *p) {
		const char *e = strstr(p, ", ");
		size_t len = e ? (size_t)(e - p) : strlen(p);
		*cursor = e ? e + 2 : p + len;
		if (len) {
			*s = p;
			*n = len;
			return 1;
		}
		p = *cursor;
	}
	return 0;
}

/* s[0..n) as the text of a braced BibTeX value: the characters TeX gives
 * a meaning escaped (so that a title's braces, backslashes, % and & come
 * out as written, and the braces of the entry stay balanced), line
 * breaks and tabs as spaces, other controls dropped, invalid UTF-8 as
 * U+FFFD; other non-ASCII characters stay as they are (UTF-8: biber,
 * and bibtex with inputenc, read them). */
static const char *const bib_esc[128] = {
	['\\'] = "\\textbackslash{}", ['{'] = "\\{", ['}'] = "\\}", ['%'] = "\\%",
	['&'] = "\\&", ['#'] = "\\#", ['$'] = "\\$", ['_'] = "\\_",
	['~'] = "\\textasciitilde{}", ['^'] = "\\textasciicircum{}",
	['\t'] = " ", ['\n'] = " ", ['\r'] = " ",
};

static void bib_text(pith_buf_t *out, const char *s, size_t n)
{
	render_text_escape(out, s, n, bib_esc);
}

/* An identifier or URL field (doi, eprint, url), which biblatex reads
 * verbatim: copied as it is but for what could unbalance the entry
 * (braces, backslashes) and controls, which are left out. Identifiers
 * of the store are plain ASCII already. */
static void bib_verbatim(pith_buf_t *out, const char *s)
{
	for (; *s; s++)
		if (*s != '{' && *s != '}' && *s != '\\' && (unsigned char)*s >= 0x20 && *s != 0x7f)
			pith_buf_putc(out, *s);
}

/* ",\n  name = {value}": value as text, or verbatim (s is then a C string) */
static void field(pith_buf_t *out, const char *name, const char *s, size_t n, int verbatim)
{
	pith_buf_printf(out, ",\n  %-13s = {", name);
	if (verbatim)
		bib_verbatim(out, s);
	else
		bib_text(out, s, n);
	pith_buf_putc(out, '}');
}

/* What a citation says of a record (NULL: not known). */
typedef struct cite {
	const char *title, *authors, *arxiv, *doi, *cat;
	const char *date; /* YYYY-MM-DD... (submitted_at), or NULL */
} cite_t;

static void cite_of(const render_rec_t *r, cite_t *f)
{
	const json_value_t *md = json_get_type(r->record, "metadata", JSON_OBJECT);
	f->title = render_rec_paper_str(r, "title");
	f->authors = render_rec_paper_str(r, "authors_text");
	f->arxiv = render_rec_alias(r, "arxiv");
	f->doi = render_rec_alias(r, "doi");
	f->cat = json_get_str(md, "primary_cat");
	f->date = json_get_str(md, "submitted_at");
	if (f->date && (strlen(f->date) < 10 || f->date[4] != '-' || f->date[7] != '-'))
		f->date = NULL;
}

void render_bib_entry(pith_buf_t *out, render_t *h, const render_rec_t *r)
{
	cite_t f;
	cite_of(r, &f);
	const char *title = f.title, *authors = f.authors, *sub = f.date, *arxiv = f.arxiv,
		   *doi = f.doi, *cat = f.cat;
	/* the key: the short pith number a reader sees on the page */
	pith_buf_printf(out, "@misc{%s", r->short_num);
	if (title && *title)
		field(out, "title", title, strlen(title), 0);
	if (authors && *authors) {
		pith_buf_printf(out, ",\n  %-13s = {", "author");
		const char *cur = authors, *a;
		size_t n, k = 0;
		while (render_rec_author_next(&cur, &a, &n)) {
			pith_buf_puts(out, k++ ? " and " : "");
			bib_text(out, a, n);
		}
		pith_buf_putc(out, '}');
	}
	if (sub) {
		field(out, "year", sub, 4, 0);
		field(out, "date", sub, 10, 0);
	}
	if (arxiv) {
		field(out, "eprint", arxiv, 0, 1);
		field(out, "archiveprefix", "arXiv", 0, 1);
		if (cat)
			field(out, "primaryclass", cat, 0, 1);
	}
	if (doi)
		field(out, "doi", doi, 0, 1);
	char url[400];
	snprintf(url, sizeof(url), "%s/pith/%s", h->base_url, r->body);
	field(out, "url", url, 0, 1);
	pith_buf_printf(out, ",\n  %-13s = {Pith Number %s}\n}\n", "note", r->pith);
}

void render_view_bib(render_ctx_t *c, const char *pith)
{
	render_rec_t r;
	if (render_rec_load(c, pith, &r))
		return;
	pith_buf_reset(c->body);
	render_bib_entry(c->body, c->rd, &r);
	render_rec_release(&r);
	if (c->body->oom) {
		render_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "application/x-bibtex; charset=utf-8";
	c->r.cors = 1;
	render_etag_body(c);
}

static void meta(pith_buf_t *b, const char *name, const char *v, size_t n)
{
	pith_buf_printf(b, "<meta name=\"%s\" content=\"", name);
	render_html_escape(b, v, n);
	pith_buf_puts(b, "\">\n");
}

void render_html_citation_meta(pith_buf_t *b, const render_rec_t *r)
{
	cite_t f;
	cite_of(r, &f);
	const char *title = f.title, *authors = f.authors, *sub = f.date, *arxiv = f.arxiv,
		   *doi = f.doi;
	if (title && *title)
		meta(b, "citation_title", title, strlen(title));
	const char *cur = authors, *a;
	size_t n;
	while (render_rec_author_next(&cur, &a, &n))
		meta(b, "citation_author", a, n);
	if (sub) {
		/* Google Scholar's form: YYYY/MM/DD */
		char d[11];
		snprintf(d, sizeof(d), "%.4s/%.2s/%.2s", sub, sub + 5, sub + 8);
		meta(b, "citation_publication_date", d, 10);
	}
	if (arxiv)
		meta(b, "citation_arxiv_id", arxiv, strlen(arxiv));
	if (doi)
		meta(b, "citation_doi", doi, strlen(doi));
}
