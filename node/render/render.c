/* The views without a server: error and ETag helpers, gzip, routing and
 * the dispatch of the document routes, shared by node/http/http.c (pithd's
 * server) and render-only contexts (http_render.h: `pithctl export
 * --site`). Nothing here includes event2/: a view reads the store and
 * the request's parsed target and Accept header, and fills c->body and
 * c->r. */
#include "http_render.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "http_int.h"
#include "json.h"
#include "log.h"
#include "wire.h"

void http_opts_default(http_opts_t *o)
{
	memset(o, 0, sizeof(*o));
	o->name = "pith-mirror";
	o->max_header_bytes = 8192;
	o->max_body_bytes = 4u << 20;
	o->max_post_events = 2000;
	o->max_inflight = 8192;
	o->max_buffered_bytes = 64u << 20;
	o->timeout_s = 10;
	o->request_timeout_s = 30;
	o->max_connections = 4096;
	o->events_page_max = 1000;
	o->list_registry = 1;
}

static const char *status_code_name(int s)
{
	switch (s) {
	case 400: return "bad_request";
	case 404: return "not_found";
	case 405: return "method_not_allowed";
	case 406: return "not_acceptable";
	case 413: return "too_large";
	case 414: return "uri_too_long";
	case 431: return "headers_too_large";
	case 500: return "internal";
	case 503: return "unavailable";
	default: return "error";
	}
}


/* The phrase an error page is titled with. */
static const char *status_title(int s)
{
	switch (s) {
	case 400: return "Bad request";
	case 404: return "Not found";
	case 405: return "Method not allowed";
	case 406: return "Not acceptable";
	case 413: return "Too large";
	case 414: return "Address too long";
	case 431: return "Request headers too large";
	case 503: return "Unavailable for a moment";
	default: return s >= 500 ? "Server error" : "Error";
	}
}

/* The error as a page for people: what went wrong, where to go from
 * here (the header has home and the search box). */
static void error_page(http_ctx_t *c, int status, const char *msg)
{
	pith_buf_t *b = c->body;
	char title[64];
	snprintf(title, sizeof(title), "%d %s", status, status_title(status));
	html_head(c, title, NULL);
	pith_buf_puts(b, "<h1>");
	html_text(b, title);
	/* a sentence for people: the message's first letter capitalised */
	char first[2] = {msg[0] >= 'a' && msg[0] <= 'z' ? (char)(msg[0] - 'a' + 'A') : msg[0], 0};
	pith_buf_puts(b, "</h1>\n<p>");
	html_text(b, first);
	html_text(b, msg[0] ? msg + 1 : msg);
	pith_buf_puts(b, "</p>\n");
	if (status == 404)
		pith_buf_puts(b, "<p>A record is found by its pith number (<code>pith:2024:&hellip;</code>, "
				 "or its first 8, 12 or 16 characters), its arXiv id or its DOI.</p>\n");
	pith_buf_puts(b, "<p><a href=\"");
	html_text(b, c->h->base_url);
	pith_buf_puts(b, "/\">Back to the home page</a> &middot; <a href=\"");
	html_text(b, c->h->base_url);
	pith_buf_puts(b, "/pith/\">All records</a></p>\n</main></body></html>\n");
	c->r.ctype = "text/html; charset=utf-8";
	c->r.is_html = 1;
}

void http_error(http_ctx_t *c, int status, const char *fmt, ...)
{
	char msg[sizeof(c->r.message)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* messages may quote a client's identifier: keep the JSON valid UTF-8
	 * (the target parser only lets ASCII through, but be sure) */
	for (char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	pith_buf_reset(c->body);
	memset(&c->r.etag, 0, sizeof(c->r.etag));
	c->r.status = status;
	c->r.no_store = 1;
	c->r.vary_accept = 1;
	c->r.is_html = 0;
	memcpy(c->r.message, msg, sizeof(msg));
	if (http_prefers_html(c->accept)) {
		error_page(c, status, msg);
		if (!c->body->oom)
			return;
		pith_buf_reset(c->body); /* out of memory: the short JSON below */
	}
	pith_buf_printf(c->body, "{\"error\":\"%s\",\"message\":", status_code_name(status));
	json_write_string(c->body, msg, strlen(msg));
	pith_buf_puts(c->body, "}\n");
	c->r.ctype = "application/json";
}

void http_set_etag_hex(http_ctx_t *c, const char *hex64)
{
	snprintf(c->r.etag, sizeof(c->r.etag), "\"%.64s\"", hex64);
}

void http_set_etag_body(http_ctx_t *c)
{
	uint8_t d[32];
	char hex[65];
	pith_sha256(c->body->data ? c->body->data : (uint8_t *)"", c->body->len, d);
	pith_hex_encode(d, 32, hex);
	http_set_etag_hex(c, hex);
}


/* Compresses in[0..n) as a gzip member into out. 0, or -1 (out of memory). */
/* One deflate state per thread, reset between bodies: setting one up
 * allocates and clears some 270 KB, which for small documents cost more
 * than compressing them (an export compresses hundreds of thousands). It
 * lives as long as the thread. */
static __thread z_stream gz_z;
static __thread int gz_ready;

int http_gzip(pith_buf_t *out, const uint8_t *in, size_t n)
{
	z_stream *z = &gz_z;
	if (!gz_ready) {
		memset(z, 0, sizeof(*z));
		/* level 5: most of level 9's ratio on JSON at a third of its time */
		if (deflateInit2(z, 5, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			return -1;
		gz_ready = 1;
	} else if (deflateReset(z) != Z_OK) {
		return -1;
	}
	size_t cap = deflateBound(z, (uLong)n);
	pith_buf_reset(out);
	if (pith_buf_reserve(out, cap))
		return -1;
	z->next_in = (Bytef *)in;
	z->avail_in = (uInt)n;
	z->next_out = out->data;
	z->avail_out = (uInt)cap;
	int rc = deflate(z, Z_FINISH);
	out->len = cap - z->avail_out;
	return rc == Z_STREAM_END ? 0 : -1;
}

void http_gzip_thread_end(void)
{
	if (gz_ready)
		deflateEnd(&gz_z);
	gz_ready = 0;
}

static int ends_with(const char *s, const char *suffix, size_t *stem)
{
	size_t n = strlen(s), k = strlen(suffix);
	if (n <= k || memcmp(s + n - k, suffix, k))
		return 0;
	*stem = n - k;
	return 1;
}

/* Picks the route for the parsed target; *id gets the {ID} segment (or
 * NULL). Returns ROUTE_OTHER for a path no route serves. */
http_route_t http_route_match(const http_target_t *t, char *id, size_t idcap, int *id_seg)
{
	const char *const *s = t->seg;
	size_t n = t->nseg, stem;
	id[0] = 0;
	*id_seg = -1;
	if (n == 0)
		return ROUTE_HOME;
	if (n == 1 && t->trailing_slash && !strcmp(s[0], "pith"))
		return ROUTE_LIST;
#define SET_ID(p, len) (*id_seg = (int)((p) == s[1] ? 1 : 2), \
			snprintf(id, idcap, "%.*s", (int)(len), (p)))
	if (n == 2 && t->trailing_slash && !strcmp(s[0], "pith")) {
		/* /pith/{ID}/: the record page as the pages link it, so that
		 * a mirroring client saves it as pith/{ID}/index.html beside
		 * pith/{ID}/state.json instead of a file in the directory's
		 * place (docs/http.md, "Mirroring with wget") */
		SET_ID(s[1], strlen(s[1]));
		return ROUTE_PAGE;
	}
	if (t->trailing_slash)
		return ROUTE_OTHER;
	if (n == 1) {
		if (!strcmp(s[0], "pith-mirrors.json"))
			return ROUTE_MIRRORS;
		if (!strcmp(s[0], "pith-signing-key.json"))
			return ROUTE_SIGNING_KEY;
		if (!strcmp(s[0], "events"))
			return ROUTE_POST_EVENTS;
		if (!strcmp(s[0], "metrics"))
			return ROUTE_METRICS;
		if (!strcmp(s[0], "healthz"))
			return ROUTE_HEALTHZ;
		if (!strcmp(s[0], "search"))
			return ROUTE_SEARCH;
		return ROUTE_OTHER;
	}
	if (!strcmp(s[0], "pith")) {
		if (n == 2) {
			if (ends_with(s[1], ".json", &stem)) {
				SET_ID(s[1], stem);
				return ROUTE_RECORD;
			}
			if (ends_with(s[1], ".bib", &stem)) {
				SET_ID(s[1], stem);
				return ROUTE_BIB;
			}
			SET_ID(s[1], strlen(s[1]));
			return ROUTE_PAGE;
		}
		if (n == 3 && !strcmp(s[2], "bundle.json")) {
			SET_ID(s[1], strlen(s[1]));
			return ROUTE_BUNDLE;
		}
		if (n == 3 && !strcmp(s[2], "state.json")) {
			SET_ID(s[1], strlen(s[1]));
			return ROUTE_STATE;
		}
		return ROUTE_OTHER;
	}
	if (n == 4 && !strcmp(s[0], ".well-known") && !strcmp(s[1], "pith") &&
	    !strcmp(s[3], "bundle.json")) {
		SET_ID(s[2], strlen(s[2]));
		return ROUTE_WELL_KNOWN;
	}
	if (n == 2 && !strcmp(s[0], "api") && !strcmp(s[1], "changes"))
		return ROUTE_CHANGES;
	if (n == 2 && !strcmp(s[0], "api") && !strcmp(s[1], "records"))
		return ROUTE_RECORDS;
	if (n == 2 && !strcmp(s[0], "api") && !strcmp(s[1], "search"))
		return ROUTE_SEARCH_API;
	if (!strcmp(s[0], "api") && !strcmp(s[1], "pith-number")) {
		if (n == 3 && !strcmp(s[2], "resolve"))
			return ROUTE_RESOLVE;
		if (n == 4 && !strcmp(s[3], "events.json")) {
			SET_ID(s[2], strlen(s[2]));
			return ROUTE_EVENTS;
		}
		if (n == 4 && !strcmp(s[3], "graph.json")) {
			SET_ID(s[2], strlen(s[2]));
			return ROUTE_GRAPH;
		}
	}
#undef SET_ID
	return ROUTE_OTHER;
}


/* The date of a document of no record (http_date.c): the lists by the
 * change log's end, the mirror list by when it last changed, the signing
 * key (this build's) by the server's start. */
static void date_note_global(http_ctx_t *c)
{
	int64_t us;
	switch (c->route) {
	case ROUTE_LIST:
	case ROUTE_RECORDS: http_date_note_seq(c, store_changes_last(c->h->store)); break;
	case ROUTE_MIRRORS:
		if (!pith_time_parse(c->h->mirrors_at, &us))
			c->r.lm_fixed = us / 1000000;
		break;
	case ROUTE_SIGNING_KEY: c->r.lm_fixed = c->h->dates ? c->h->dates[0].t : 0; break;
	default: break;
	}
}

int http_view_run_global(http_ctx_t *c)
{
	date_note_global(c);
	switch (c->route) {
	case ROUTE_MIRRORS: view_mirrors(c); return 1;
	case ROUTE_SIGNING_KEY: view_signing_key(c); return 1;
	case ROUTE_HOME: view_home(c); return 1;
	case ROUTE_LIST: view_records_html(c); return 1;
	case ROUTE_RECORDS: view_records_json(c); return 1;
	case ROUTE_CHANGES: view_changes(c); return 1;
	case ROUTE_SEARCH: view_search_html(c); return 1;
	case ROUTE_SEARCH_API: view_search_json(c); return 1;
	default: return 0;
	}
}

void http_view_run(http_ctx_t *c, const char *pith)
{
	http_date_note_record(c, pith);
	switch (c->route) {
	case ROUTE_PAGE: view_page(c, pith); break;
	case ROUTE_RECORD: view_record(c, pith); break;
	case ROUTE_BUNDLE:
	case ROUTE_WELL_KNOWN: view_bundle(c, pith); break;
	case ROUTE_STATE: view_state(c, pith); break;
	case ROUTE_EVENTS: view_events(c, pith); break;
	case ROUTE_GRAPH: view_graph(c, pith); break;
	case ROUTE_BIB: view_bib(c, pith); break;
	default: http_error(c, 404, "no such resource"); break;
	}
}

/* ---- render-only contexts ------------------------------------------------------------ */

void http_text_copy(char *out, size_t cap, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n >= cap) {
		n = cap - 1;
		while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--; /* s[n] continues a character: cut before it starts */
	}
	if (n)
		memcpy(out, s, n);
	out[n] = 0;
}

void http_identity_copy(http_t *h, const char *name, const char *operator_name,
			const char *contact)
{
	http_text_copy(h->name, sizeof(h->name), name && *name ? name : "pith-mirror");
	http_text_copy(h->operator_name, sizeof(h->operator_name), operator_name);
	http_text_copy(h->contact, sizeof(h->contact), contact);
	h->o.name = h->name;
}

void http_render_set_list_cache(http_t *h, const http_list_cache_t *c)
{
	if (c)
		h->list_cache = *c;
	else
		memset(&h->list_cache, 0, sizeof(h->list_cache));
}

int http_render_new(store_t *store, const http_render_opts_t *o, http_t **out, pith_err_t *err)
{
	*out = NULL;
	const char *u = o->base_url ? o->base_url : "";
	size_t n = strlen(u);
	while (n && u[n - 1] == '/')
		n--;
	char base[WIRE_HTTP_URL_MAX + 1];
	if (!n || n > WIRE_HTTP_URL_MAX)
		return pith_err_set(err, PITH_EINVAL, "base URL '%.200s': not a plain http(s) URL of at "
				    "most %d bytes", u, WIRE_HTTP_URL_MAX);
	memcpy(base, u, n);
	base[n] = 0;
	if (!wire_http_url_is_valid(base))
		return pith_err_set(err, PITH_EINVAL, "base URL '%.200s': not a plain http(s) URL (host, "
				    "optional port and path; no credentials, query or fragment)", u);
	http_t *h = calloc(1, sizeof(*h));
	if (!h)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	http_opts_default(&h->o);
	h->store = store;
	http_identity_copy(h, o->name, o->operator_name, o->contact);
	h->files_only = 1;
	h->o.node_id = h->node_id;
	h->o.network_id = h->network_id;
	h->o.list_registry = o->list_registry;
	snprintf(h->base_url, sizeof(h->base_url), "%s", base);
	if (o->search_url && *o->search_url) {
		n = strlen(o->search_url);
		while (n && o->search_url[n - 1] == '/')
			n--;
		if (!n || n > WIRE_HTTP_URL_MAX || n >= sizeof(h->search_url)) {
			free(h);
			return pith_err_set(err, PITH_EINVAL, "search URL '%.200s': not a plain http(s) "
					    "URL of at most %d bytes", o->search_url, WIRE_HTTP_URL_MAX);
		}
		memcpy(h->search_url, o->search_url, n);
		h->search_url[n] = 0;
		if (!wire_http_url_is_valid(h->search_url)) {
			free(h);
			return pith_err_set(err, PITH_EINVAL, "search URL '%.200s': not a plain http(s) "
					    "URL (host, optional port and path)", o->search_url);
		}
	}
	if (o->mirrors_at)
		snprintf(h->mirrors_at, sizeof(h->mirrors_at), "%s", o->mirrors_at);
	else
		pith_time_now(h->mirrors_at, 0);
	*out = h;
	return 0;
}

http_t *http_render_ctx_of(const http_t *srv)
{
	http_t *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->store = srv->store;
	h->o = srv->o;
	h->o.listen = NULL;
	h->o.public_url = NULL;
	memcpy(h->name, srv->name, sizeof(h->name));
	memcpy(h->operator_name, srv->operator_name, sizeof(h->operator_name));
	memcpy(h->contact, srv->contact, sizeof(h->contact));
	memcpy(h->search_url, srv->search_url, sizeof(h->search_url));
	memcpy(h->node_id, srv->node_id, sizeof(h->node_id));
	memcpy(h->network_id, srv->network_id, sizeof(h->network_id));
	memcpy(h->base_url, srv->base_url, sizeof(h->base_url));
	memcpy(h->mirrors_at, srv->mirrors_at, sizeof(h->mirrors_at));
	h->o.name = h->name;
	h->o.node_id = h->node_id;
	h->o.network_id = h->network_id;
	return h;
}

const char *http_base_url(const http_t *h)
{
	return h->base_url;
}

/* Also the end of http_free_: what both kinds of context hold. */
void http_render_free_(http_t *h)
{
	if (!h)
		return;
	pith_buf_release(&h->body);
	pith_buf_release(&h->tmp);
	pith_buf_release(&h->tmp2);
	pith_buf_release(&h->gz);
	free(h->mirrors);
	free(h);
}

int http_render(http_t *h, const char *target, const char *accept, http_doc_t *out)
{
	http_ctx_t c = {.h = h, .route = ROUTE_OTHER, .accept = accept};
	c.t = &h->target;
	c.body = &h->body;
	pith_buf_reset(c.body);
	char id[256], pith[PITH_NUMBER_LEN + 1];
	const char *why = "";
	int id_seg;
	memset(out, 0, sizeof(*out));
	if (http_target_parse(target, strlen(target), c.t, &why) || c.t->bad_why) {
		http_error(&c, 400, "malformed request target: %s", *why ? why : c.t->bad_why);
		goto done;
	}
	c.route = http_route_match(c.t, id, sizeof(id), &id_seg);
	c.r.status = 200;
	if (http_view_run_global(&c))
		goto done;
	switch (c.route) {
	case ROUTE_PAGE: case ROUTE_RECORD: case ROUTE_BUNDLE: case ROUTE_WELL_KNOWN:
	case ROUTE_STATE: case ROUTE_EVENTS: case ROUTE_GRAPH: case ROUTE_BIB: break;
	default: http_error(&c, 404, "no such resource"); goto done;
	}
	pith_err_t err = {0};
	int rc = store_resolve(h->store, id, pith, &err);
	if (rc == PITH_ENOTFOUND)
		http_error(&c, 404, "no record for %s on this mirror", id);
	else if (rc)
		http_error(&c, rc == PITH_EINVAL ? 400 : 500, "%s", err.msg);
	else
		http_view_run(&c, pith);
done:
	if (c.body->oom)
		return PITH_ENOMEM;
	out->status = c.r.status ? c.r.status : 200;
	out->ctype = c.r.ctype;
	out->body = c.body->data ? c.body->data : (const uint8_t *)"";
	out->len = c.body->len;
	memcpy(out->etag, c.r.etag, sizeof(out->etag));
	out->cors = c.r.cors;
	out->is_html = c.r.is_html;
	out->vary_accept = c.r.vary_accept;
	return 0;
}
