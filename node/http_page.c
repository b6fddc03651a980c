/* /pith/{ID}: the record's page, JSON-LD for programs (with the canonical
 * record the registry page's verify line hashes) or a small HTML page for
 * people. Everything on the HTML page that came from an event is escaped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "json.h"

/* ---- /pith/{ID}: JSON-LD or HTML --------------------------------------------------- */

/* Quality of a media type in an Accept header (0 when not listed, 1 when
 * no q is given). */
static double accept_q(const char *accept, const char *type)
{
	double best = 0;
	size_t tl = strlen(type);
	const char *p = accept;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		const char *s = p;
		while (*p && *p != ',' && *p != ';' && *p != ' ')
			p++;
		size_t n = (size_t)(p - s);
		double q = 1;
		while (*p && *p != ',') {
			if (*p == ';') {
				p++;
				while (*p == ' ')
					p++;
				if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=')
					q = strtod(p + 2, NULL);
			} else {
				p++;
			}
		}
		if (n == tl && !strncasecmp(s, type, n) && q > best)
			best = q;
	}
	return best;
}

/* JSON-LD when the client prefers application/ld+json (or plain JSON)
 * to HTML; a browser's Accept asks for text/html first. */
static int wants_ld(http_ctx_t *c)
{
	const char *a = c->accept;
	if (!a)
		return 0;
	double ld = accept_q(a, "application/ld+json");
	double js = accept_q(a, "application/json");
	if (js > ld)
		ld = js;
	double html = accept_q(a, "text/html");
	double any = accept_q(a, "*/*");
	if (any > html)
		html = any;
	return ld > 0 && ld >= html;
}

static void page_ld(http_ctx_t *c, const rec_t *r)
{
	http_t *h = c->h;
	jb_t b;
	if (jb_begin(c, &b))
		return;
	json_value_t *o = jb_obj(&b);
	jb_set(&b, o, "@context", jb_str(&b, "https://schema.org"));
	jb_set(&b, o, "@type", jb_str(&b, "ScholarlyArticle"));
	jb_set(&b, o, "@id", jb_url(&b, h, "/pith/%s", r->body));
	jb_set(&b, o, "url", jb_url(&b, h, "/pith/%s", r->body));
	json_value_t *ids = jb_arr(&b);
	struct {
		const char *prop, *val;
	} idv[] = {
		{"pith", r->pith},
		{"pith_short", r->short_num},
		{"arxiv", rec_alias(r, "arxiv")},
		{"doi", rec_alias(r, "doi")},
	};
	for (size_t i = 0; i < sizeof(idv) / sizeof(idv[0]); i++) {
		if (!idv[i].val)
			continue;
		json_value_t *pv = jb_obj(&b);
		jb_set(&b, pv, "@type", jb_str(&b, "PropertyValue"));
		jb_set(&b, pv, "propertyID", jb_str(&b, idv[i].prop));
		jb_set(&b, pv, "value", jb_str(&b, idv[i].val));
		jb_push(&b, ids, pv);
	}
	jb_set(&b, o, "identifier", ids);
	if (rec_paper_str(r, "title"))
		jb_set(&b, o, "name", json_get(r->paper, "title"));
	const char *authors = rec_paper_str(r, "authors_text");
	if (authors && *authors) {
		json_value_t *al = jb_arr(&b);
		const char *p = authors;
		while (*p) {
			const char *e = strstr(p, ", ");
			size_t n = e ? (size_t)(e - p) : strlen(p);
			if (n) {
				json_value_t *a = jb_obj(&b);
				jb_set(&b, a, "@type", jb_str(&b, "Person"));
				jb_set(&b, a, "name", jb_chk(&b, json_new_stringn(b.d, p, n)));
				jb_push(&b, al, a);
			}
			p += n;
			if (e)
				p += 2;
		}
		jb_set(&b, o, "author", al);
	}
	const json_value_t *md = json_get_type(r->record, "metadata", JSON_OBJECT);
	if (json_get_str(md, "submitted_at"))
		jb_set(&b, o, "datePublished", json_get(md, "submitted_at"));
	if (json_get_str(md, "license"))
		jb_set(&b, o, "license", json_get(md, "license"));
	const char *arxiv = rec_alias(r, "arxiv_version");
	if (!arxiv)
		arxiv = rec_alias(r, "arxiv");
	const char *doi = rec_alias(r, "doi");
	if (arxiv || doi) {
		json_value_t *same = jb_arr(&b);
		char u[300];
		if (arxiv) {
			snprintf(u, sizeof(u), "https://arxiv.org/abs/%s", arxiv);
			jb_push(&b, same, jb_str(&b, u));
		}
		if (doi) {
			snprintf(u, sizeof(u), "https://doi.org/%s", doi);
			jb_push(&b, same, jb_str(&b, u));
		}
		jb_set(&b, o, "sameAs", same);
	}
	jb_set(&b, o, "pith_number", jb_str(&b, r->pith));
	jb_set(&b, o, "short_pith_number", jb_str(&b, r->short_num));
	jb_set(&b, o, "canonical_sha256", jb_str(&b, r->canon_hex));
	jb_set(&b, o, "canonical_record", r->record);
	jb_set(&b, o, "receipt", r->receipt);
	jb_set(&b, o, "state_sha256", jb_str(&b, r->state_sha));
	jb_set(&b, o, "links", rec_links(&b, h, r));
	jb_finish(c, &b, o, "application/ld+json");
}

/* ---- HTML ------------------------------------------------------------------------ */

/* Length of a valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

void html_escape(pith_buf_t *out, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		unsigned char ch = p[i];
		switch (ch) {
		case '&': pith_buf_puts(out, "&amp;"); i++; continue;
		case '<': pith_buf_puts(out, "&lt;"); i++; continue;
		case '>': pith_buf_puts(out, "&gt;"); i++; continue;
		case '"': pith_buf_puts(out, "&quot;"); i++; continue;
		case '\'': pith_buf_puts(out, "&#39;"); i++; continue;
		default: break;
		}
		if (ch < 0x20 && ch != '\n' && ch != '\t') {
			i++; /* controls: dropped */
			continue;
		}
		if (ch == 0x7f) {
			i++;
			continue;
		}
		size_t l = utf8_len(p + i, n - i);
		if (!l) {
			pith_buf_puts(out, "\xef\xbf\xbd");
			i++;
			continue;
		}
		pith_buf_append(out, p + i, l);
		i += l;
	}
}

static void hesc(pith_buf_t *out, const char *s)
{
	if (s)
		html_escape(out, s, strlen(s));
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

static void html_link(pith_buf_t *b, http_t *h, const char *path_fmt, const char *body,
		      const char *text)
{
	char path[300];
	snprintf(path, sizeof(path), path_fmt, body);
	pith_buf_puts(b, "<a href=\"");
	hesc(b, h->base_url);
	hesc(b, path);
	pith_buf_puts(b, "\">");
	hesc(b, text);
	pith_buf_puts(b, "</a>");
}

static void page_html(http_ctx_t *c, const rec_t *r)
{
	http_t *h = c->h;
	pith_buf_t *b = c->body;
	pith_buf_reset(b);
	const char *title = rec_paper_str(r, "title");
	pith_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
			 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
			 "<title>");
	if (title && *title) {
		hesc(b, title);
		pith_buf_puts(b, " &middot; ");
	}
	hesc(b, r->short_num);
	pith_buf_puts(b, "</title>\n<style>body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;"
			 "margin:2rem auto;padding:0 1rem;color:#222}code,pre{font:14px ui-monospace,"
			 "monospace}pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;"
			 "padding:.75rem}dt{font-weight:600}.muted{color:#666}</style></head>\n<body>\n"
			 "<p class=\"muted\">Pith Number</p>\n<h1>");
	hesc(b, r->short_num);
	pith_buf_puts(b, "</h1>\n<p><code>");
	hesc(b, r->pith);
	pith_buf_puts(b, "</code></p>\n");
	if (title && *title) {
		pith_buf_puts(b, "<h2>");
		hesc(b, title);
		pith_buf_puts(b, "</h2>\n");
	}
	const char *authors = rec_paper_str(r, "authors_text");
	if (authors && *authors) {
		pith_buf_puts(b, "<p>");
		hesc(b, authors);
		pith_buf_puts(b, "</p>\n");
	}
	const json_value_t *md = json_get_type(r->record, "metadata", JSON_OBJECT);
	const char *kind = json_get_str(r->source, "kind"), *sid = json_get_str(r->source, "id");
	if (kind && sid) {
		pith_buf_puts(b, "<p>");
		hesc(b, kind);
		pith_buf_puts(b, ":");
		hesc(b, sid);
		const json_value_t *ver = json_get_type(r->source, "version", JSON_INT);
		if (ver) {
			pith_buf_puts(b, " v");
			hesc(b, ver->u.str);
		}
		const char *sub = json_get_str(md, "submitted_at");
		if (sub && strlen(sub) >= 10) {
			pith_buf_puts(b, " &middot; ");
			html_escape(b, sub, 10);
		}
		const char *cat = json_get_str(md, "primary_cat");
		if (cat) {
			pith_buf_puts(b, " &middot; ");
			hesc(b, cat);
		}
		const json_value_t *cc = json_get_type(md, "cross_cats_sorted", JSON_ARRAY);
		for (size_t i = 0; cc && i < cc->len && i < 32; i++)
			if (json_is(cc->u.items[i], JSON_STRING)) {
				pith_buf_puts(b, " &middot; ");
				hesc(b, cc->u.items[i]->u.str);
			}
		pith_buf_puts(b, "</p>\n");
	}
	pith_buf_puts(b, "<p>");
	html_link(b, h, "/pith/%s.json", r->body, "JSON");
	pith_buf_puts(b, " &middot; ");
	html_link(b, h, "/pith/%s/bundle.json", r->body, "Open Graph bundle");
	pith_buf_puts(b, " &middot; ");
	html_link(b, h, "/pith/%s/state.json", r->body, "Merged state");
	pith_buf_puts(b, " &middot; ");
	html_link(b, h, "/api/pith-number/%s/events.json", r->body, "Events JSON");
	pith_buf_puts(b, " &middot; ");
	html_link(b, h, "/api/pith-number/%s/graph.json", r->body, "Graph JSON");
	pith_buf_puts(b, "</p>\n<h3>Record completeness</h3>\n<ul>\n");
	static const char *const lists[][2] = {
		{"timestamp_anchors", "Timestamp anchors"},
		{"storage_attestations", "Storage attestations"},
		{"author_attestations", "Author attestations"},
		{"citation_signatures", "Citation signatures"},
		{"replication_records", "Replication records"},
		{"corrections", "Corrections"},
		{"graph_snapshots", "Graph snapshots"},
		{"mirror_hints", "Mirror hints"},
	};
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		pith_buf_printf(b, "<li>%s: %zu</li>\n", lists[i][1], rec_list_len(r, lists[i][0]));
	pith_buf_puts(b, "</ul>\n");
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
			hesc(b, v);
			pith_buf_puts(b, "</code></dd>");
		}
		pith_buf_puts(b, "</dl>\n");
	}
	if (r->canon_hex) {
		pith_buf_puts(b, "<h3>Canonical hash</h3>\n<p><code>");
		hesc(b, r->canon_hex);
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
			hesc(b, k);
			pith_buf_puts(b, ": ");
			hesc(b, v);
		}
	} else {
		for (int i = 0; i < r->nderived; i++) {
			pith_buf_puts(b, first ? "" : " &middot; ");
			first = 0;
			hesc(b, r->derived[i].kind);
			pith_buf_puts(b, ": ");
			hesc(b, r->derived[i].value);
		}
	}
	pith_buf_puts(b, first ? "none known</p>\n" : "</p>\n");
	pith_buf_puts(b, "<h3>Merged state on this mirror</h3>\n<p><code>");
	hesc(b, r->state_sha);
	const json_value_t *ec = json_get_type(r->state, "event_count", JSON_INT);
	const json_value_t *iv = json_get_type(r->state, "invalid_event_count", JSON_INT);
	const json_value_t *eq = json_get_type(r->state, "equivocation_count", JSON_INT);
	pith_buf_puts(b, "</code><br>events: ");
	hesc(b, ec ? ec->u.str : "?");
	pith_buf_puts(b, ", invalid: ");
	hesc(b, iv ? iv->u.str : "?");
	pith_buf_puts(b, ", equivocations: ");
	hesc(b, eq ? eq->u.str : "?");
	pith_buf_puts(b, "</p>\n");
	if (r->record) {
		pith_buf_puts(b, "<h3>Verify this Pith Number yourself</h3>\n<pre>curl -sH "
				 "'Accept: application/ld+json' ");
		hesc(b, h->base_url);
		pith_buf_puts(b, "/pith/");
		hesc(b, r->body);
		pith_buf_puts(b, " \\\n  | jq -c '.canonical_record' \\\n  | python3 -c \"import sys,json,"
				 "hashlib; b=json.dumps(json.loads(sys.stdin.read()), sort_keys=True, "
				 "separators=(',',':'), ensure_ascii=False).encode(); "
				 "print(hashlib.sha256(b).hexdigest())\"\n# expect: ");
		hesc(b, r->canon_hex);
		pith_buf_puts(b, "</pre>\n<h3>Canonical record JSON</h3>\n<pre>");
		pith_buf_t *t = &h->tmp2;
		pith_buf_reset(t);
		pith_buf_t *ind = &h->tmp;
		pith_buf_reset(ind);
		if (!json_canon_write(r->record, t)) {
			json_indent(ind, t->data, t->len);
			html_escape(b, (const char *)ind->data, ind->len);
		}
		pith_buf_puts(b, "</pre>\n");
	}
	pith_buf_puts(b, "<p class=\"muted\">Served by the mirror ");
	hesc(b, h->name);
	pith_buf_puts(b, " from its own store: the state above is its own deterministic merge of "
			 "the signed events it holds.</p>\n</body></html>\n");
	if (b->oom) {
		http_error(c, 500, "out of memory");
		return;
	}
	c->r.ctype = "text/html; charset=utf-8";
	c->r.is_html = 1;
	http_set_etag_body(c);
}

void view_page(http_ctx_t *c, const char *pith)
{
	rec_t r;
	c->r.vary_accept = 1;
	if (rec_load(c, pith, &r))
		return;
	if (wants_ld(c))
		page_ld(c, &r);
	else
		page_html(c, &r);
	c->r.vary_accept = 1;
	rec_release(&r);
}
