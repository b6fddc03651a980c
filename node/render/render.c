/* The views without a server: the render context, error and ETag
 * helpers, gzip, routing and the dispatch of the document routes, run by
 * pithd's server (node/http) and `pithctl export --site` (node/site)
 * alike (render.h). Nothing here includes event2/: a view reads the
 * store and the request's parsed target and Accept header, and fills
 * c->body and c->r. */
#include "render.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "render_int.h"
#include "json.h"
#include "log.h"
#include "wire.h"

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
static void error_page(render_ctx_t *c, int status, const char *msg)
{
	pith_buf_t *b = c->body;
	char title[64];
	snprintf(title, sizeof(title), "%d %s", status, status_title(status));
	render_html_head(c, title, NULL);
	pith_buf_puts(b, "<h1>");
	render_html_text(b, title);
	/* a sentence for people: the message's first letter capitalised */
	char first[2] = {msg[0] >= 'a' && msg[0] <= 'z' ? (char)(msg[0] - 'a' + 'A') : msg[0], 0};
	pith_buf_puts(b, "</h1>\n<p>");
	render_html_text(b, first);
	render_html_text(b, msg[0] ? msg + 1 : msg);
	pith_buf_puts(b, "</p>\n");
	if (status == 404)
		pith_buf_puts(b, "<p>A record is found by its pith number (<code>pith:2024:&hellip;</code>, "
				 "or its first 8, 12 or 16 characters), its arXiv id or its DOI.</p>\n");
	pith_buf_puts(b, "<p><a href=\"");
	render_html_text(b, c->rd->base_url);
	pith_buf_puts(b, "/\">Back to the home page</a> &middot; <a href=\"");
	render_html_text(b, c->rd->base_url);
	pith_buf_puts(b, "/pith/\">All records</a></p>\n</main></body></html>\n");
	c->r.ctype = "text/html; charset=utf-8";
	c->r.is_html = 1;
}

void render_error(render_ctx_t *c, int status, const char *fmt, ...)
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
	c->r.tag[0] = 0;
	c->r.vary_accept = 1;
	c->r.is_html = 0;
	memcpy(c->r.message, msg, sizeof(msg));
	if (render_prefers_html(c->accept)) {
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

void render_etag_hex(render_ctx_t *c, const char *hex64)
{
	snprintf(c->r.etag, sizeof(c->r.etag), "\"%.64s\"", hex64);
}

void render_etag_body(render_ctx_t *c)
{
	uint8_t d[32];
	char hex[65];
	pith_sha256(c->body->data ? c->body->data : (uint8_t *)"", c->body->len, d);
	pith_hex_encode(d, 32, hex);
	render_etag_hex(c, hex);
}


/* Compresses in[0..n) as a gzip member into out. 0, or -1 (out of memory). */
/* One deflate state per thread, reset between bodies: setting one up
 * allocates and clears some 270 KB, which for small documents cost more
 * than compressing them (an export compresses hundreds of thousands). It
 * lives as long as the thread. */
static __thread z_stream gz_z;
static __thread int gz_ready;

int render_gzip(pith_buf_t *out, const uint8_t *in, size_t n)
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

void render_gzip_thread_end(void)
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
 * NULL). Returns RENDER_ROUTE_OTHER for a path no route serves. */
render_route_t render_route_match(const render_target_t *t, char *id, size_t idcap, int *id_seg)
{
	const char *const *s = t->seg;
	size_t n = t->nseg, stem;
	id[0] = 0;
	*id_seg = -1;
	if (n == 0)
		return RENDER_ROUTE_HOME;
	if (n == 1 && t->trailing_slash && !strcmp(s[0], "pith"))
		return RENDER_ROUTE_LIST;
#define SET_ID(p, len) (*id_seg = (int)((p) == s[1] ? 1 : 2), \
			snprintf(id, idcap, "%.*s", (int)(len), (p)))
	if (n == 2 && t->trailing_slash && !strcmp(s[0], "pith")) {
		/* /pith/{ID}/: the record page as the pages link it, so that
		 * a mirroring client saves it as pith/{ID}/index.html beside
		 * pith/{ID}/state.json instead of a file in the directory's
		 * place (docs/http.md, "Mirroring with wget") */
		SET_ID(s[1], strlen(s[1]));
		return RENDER_ROUTE_PAGE;
	}
	if (t->trailing_slash)
		return RENDER_ROUTE_OTHER;
	if (n == 1) {
		if (!strcmp(s[0], "pith-mirrors.json"))
			return RENDER_ROUTE_MIRRORS;
		if (!strcmp(s[0], "pith-signing-key.json"))
			return RENDER_ROUTE_SIGNING_KEY;
		if (!strcmp(s[0], "events"))
			return RENDER_ROUTE_POST_EVENTS;
		if (!strcmp(s[0], "metrics"))
			return RENDER_ROUTE_METRICS;
		if (!strcmp(s[0], "healthz"))
			return RENDER_ROUTE_HEALTHZ;
		if (!strcmp(s[0], "search"))
			return RENDER_ROUTE_SEARCH;
		return RENDER_ROUTE_OTHER;
	}
	if (!strcmp(s[0], "pith")) {
		if (n == 2) {
			if (ends_with(s[1], ".json", &stem)) {
				SET_ID(s[1], stem);
				return RENDER_ROUTE_RECORD;
			}
			if (ends_with(s[1], ".bib", &stem)) {
				SET_ID(s[1], stem);
				return RENDER_ROUTE_BIB;
			}
			SET_ID(s[1], strlen(s[1]));
			return RENDER_ROUTE_PAGE;
		}
		if (n == 3 && !strcmp(s[2], "bundle.json")) {
			SET_ID(s[1], strlen(s[1]));
			return RENDER_ROUTE_BUNDLE;
		}
		if (n == 3 && !strcmp(s[2], "state.json")) {
			SET_ID(s[1], strlen(s[1]));
			return RENDER_ROUTE_STATE;
		}
		return RENDER_ROUTE_OTHER;
	}
	if (n == 4 && !strcmp(s[0], ".well-known") && !strcmp(s[1], "pith") &&
	    !strcmp(s[3], "bundle.json")) {
		SET_ID(s[2], strlen(s[2]));
		return RENDER_ROUTE_WELL_KNOWN;
	}
	if (n <= 3 && !strcmp(s[0], "api") && !strcmp(s[1], "root"))
		return RENDER_ROUTE_ROOT; /* its views tell the tails apart */
	if (n == 3 && !strcmp(s[0], "api") && !strcmp(s[1], "proof")) {
		SET_ID(s[2], strlen(s[2]));
		return RENDER_ROUTE_ROOT;
	}
	if (n == 3 && !strcmp(s[0], "api") && !strcmp(s[1], "event"))
		return RENDER_ROUTE_EVENT_ID; /* the views read seg[2] */
	if (n == 3 && !strcmp(s[0], "api") && !strcmp(s[1], "bundle"))
		return RENDER_ROUTE_BUNDLE_HASH;
	if (n == 2 && !strcmp(s[0], "api") && !strcmp(s[1], "changes"))
		return RENDER_ROUTE_CHANGES;
	if (n == 2 && !strcmp(s[0], "api") && !strcmp(s[1], "records"))
		return RENDER_ROUTE_RECORDS;
	if (n == 2 && !strcmp(s[0], "api") && !strcmp(s[1], "search"))
		return RENDER_ROUTE_SEARCH_API;
	if (!strcmp(s[0], "api") && !strcmp(s[1], "pith-number")) {
		if (n == 3 && !strcmp(s[2], "resolve"))
			return RENDER_ROUTE_RESOLVE;
		if (n == 4 && !strcmp(s[3], "events.json")) {
			SET_ID(s[2], strlen(s[2]));
			return RENDER_ROUTE_EVENTS;
		}
		if (n == 4 && !strcmp(s[3], "graph.json")) {
			SET_ID(s[2], strlen(s[2]));
			return RENDER_ROUTE_GRAPH;
		}
	}
#undef SET_ID
	return RENDER_ROUTE_OTHER;
}


/* The date of a document of no record (render_date.c): the lists by the
 * change log's end, the mirror list by when it last changed, the signing
 * key (this build's) by the server's start. */
static void date_note_global(render_ctx_t *c)
{
	int64_t us;
	switch (c->route) {
	case RENDER_ROUTE_LIST:
	case RENDER_ROUTE_RECORDS: render_date_note_seq(c, store_changes_last(c->rd->store)); break;
	case RENDER_ROUTE_MIRRORS:
		if (!pith_time_parse(c->rd->mirrors_at, &us))
			c->r.lm_fixed = us / 1000000;
		break;
	case RENDER_ROUTE_SIGNING_KEY: c->r.lm_fixed = c->rd->started; break;
	default: break;
	}
}

int render_view_run_global(render_ctx_t *c)
{
	date_note_global(c);
	/* any commit may move a record to the front of these: one tag for
	 * them all, which the change feed's purges name too */
	if (c->route == RENDER_ROUTE_HOME || c->route == RENDER_ROUTE_LIST ||
	    c->route == RENDER_ROUTE_RECORDS)
		snprintf(c->r.tag, sizeof(c->r.tag), "%s", RENDER_CACHE_TAG_LISTS);
	switch (c->route) {
	case RENDER_ROUTE_MIRRORS: render_view_mirrors(c); return 1;
	case RENDER_ROUTE_SIGNING_KEY: render_view_signing_key(c); return 1;
	case RENDER_ROUTE_HOME: render_view_home(c); return 1;
	case RENDER_ROUTE_LIST: render_view_records_html(c); return 1;
	case RENDER_ROUTE_RECORDS: render_view_records_json(c); return 1;
	case RENDER_ROUTE_CHANGES: render_view_changes(c); return 1;
	case RENDER_ROUTE_SEARCH: render_view_search_html(c); return 1;
	case RENDER_ROUTE_SEARCH_API: render_view_search_json(c); return 1;
	case RENDER_ROUTE_EVENT_ID: render_view_event_by_id(c); return 1;
	case RENDER_ROUTE_BUNDLE_HASH: render_view_bundle_by_hash(c); return 1;
	default: return 0;
	}
}

void render_view_run(render_ctx_t *c, const char *pith)
{
	render_date_note_record(c, pith);
	render_cache_tag(pith, c->r.tag);
	switch (c->route) {
	case RENDER_ROUTE_PAGE: render_view_page(c, pith); break;
	case RENDER_ROUTE_RECORD: render_view_record(c, pith); break;
	case RENDER_ROUTE_BUNDLE:
	case RENDER_ROUTE_WELL_KNOWN: render_view_bundle(c, pith); break;
	case RENDER_ROUTE_STATE: render_view_state(c, pith); break;
	case RENDER_ROUTE_EVENTS: render_view_events(c, pith); break;
	case RENDER_ROUTE_GRAPH: render_view_graph(c, pith); break;
	case RENDER_ROUTE_BIB: render_view_bib(c, pith); break;
	default: render_error(c, 404, "no such resource"); break;
	}
}

void render_cache_tag(const char *pith, char tag[static RENDER_CACHE_TAG_LEN + 1])
{
	size_t n = strlen(pith);
	snprintf(tag, RENDER_CACHE_TAG_LEN + 1, "pith-%s", n > PITH_BODY_LEN ? pith + n - PITH_BODY_LEN : pith);
}

/* ---- render-only contexts ------------------------------------------------------------ */

void render_text_copy(char *out, size_t cap, const char *s)
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

void render_identity_set(render_t *h, const char *name, const char *operator_name,
			 const char *contact)
{
	render_text_copy(h->name, sizeof(h->name), name && *name ? name : "pith-mirror");
	render_text_copy(h->operator_name, sizeof(h->operator_name), operator_name);
	render_text_copy(h->contact, sizeof(h->contact), contact);
}

void render_identity(const render_t *h, const char **name, const char **operator_name,
		     const char **contact)
{
	*name = h->name;
	*operator_name = h->operator_name;
	*contact = h->contact;
}

void render_set_list_cache(render_t *h, const render_list_cache_t *c)
{
	if (c)
		h->list_cache = *c;
	else
		memset(&h->list_cache, 0, sizeof(h->list_cache));
}

int render_url_trim(const char *u, char out[static RENDER_URL_MAX + 1])
{
	size_t n = strlen(u);
	while (n && u[n - 1] == '/')
		n--;
	if (!n || n > RENDER_URL_MAX)
		return 0;
	memcpy(out, u, n);
	out[n] = 0;
	return wire_http_url_is_valid(out);
}

/* render_url_trim of an option, with the error saying why not: 0 or
 * PITH_EINVAL. */
static int opt_url(const char *what, const char *u, const char *rule,
		   char out[static RENDER_URL_MAX + 1], pith_err_t *err)
{
	size_t n = strlen(u);
	while (n && u[n - 1] == '/')
		n--;
	if (!n || n > RENDER_URL_MAX)
		return pith_err_set(err, PITH_EINVAL, "%s '%.200s': not a plain http(s) URL of at "
				    "most %d bytes", what, u, RENDER_URL_MAX);
	if (!render_url_trim(u, out))
		return pith_err_set(err, PITH_EINVAL, "%s '%.200s': not a plain http(s) URL (%s)",
				    what, u, rule);
	return 0;
}

int render_new(store_t *store, const render_opts_t *o, render_t **out, pith_err_t *err)
{
	*out = NULL;
	char base[RENDER_URL_MAX + 1], search[RENDER_URL_MAX + 1] = "";
	int rc = opt_url("base URL", o->base_url ? o->base_url : "",
			 "host, optional port and path; no credentials, query or fragment", base, err);
	if (!rc && o->search_url && *o->search_url)
		rc = opt_url("search URL", o->search_url, "host, optional port and path", search, err);
	if (rc)
		return rc;
	render_t *h = calloc(1, sizeof(*h));
	if (!h)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	h->store = store;
	h->search = o->search;
	h->events_page_max = o->events_page_max ? o->events_page_max : 1000;
	h->list_registry = o->list_registry;
	h->files_only = o->files_only;
	h->started = o->started;
	h->about = o->about;
	h->about_arg = o->about_arg;
	render_identity_set(h, o->name, o->operator_name, o->contact);
	memcpy(h->base_url, base, sizeof(base));
	memcpy(h->search_url, search, sizeof(search));
	snprintf(h->node_id, sizeof(h->node_id), "%s", o->node_id ? o->node_id : "");
	snprintf(h->network_id, sizeof(h->network_id), "%s", o->network_id ? o->network_id : "");
	if (o->mirrors_at)
		snprintf(h->mirrors_at, sizeof(h->mirrors_at), "%s", o->mirrors_at);
	else
		pith_time_now(h->mirrors_at, 0);
	*out = h;
	return 0;
}

render_t *render_clone(const render_t *src)
{
	render_t *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->store = src->store;
	h->search = src->search;
	h->events_page_max = src->events_page_max;
	h->list_registry = src->list_registry;
	h->files_only = src->files_only;
	h->started = src->started; /* not the about hook: it is the loop's */
	memcpy(h->name, src->name, sizeof(h->name));
	memcpy(h->operator_name, src->operator_name, sizeof(h->operator_name));
	memcpy(h->contact, src->contact, sizeof(h->contact));
	memcpy(h->base_url, src->base_url, sizeof(h->base_url));
	memcpy(h->search_url, src->search_url, sizeof(h->search_url));
	memcpy(h->node_id, src->node_id, sizeof(h->node_id));
	memcpy(h->network_id, src->network_id, sizeof(h->network_id));
	memcpy(h->mirrors_at, src->mirrors_at, sizeof(h->mirrors_at));
	return h;
}

const char *render_base_url(const render_t *h)
{
	return h->base_url;
}

int render_mirrors_set(render_t *h, const render_mirror_t *m, size_t n)
{
	render_mirror_entry_t *v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return PITH_ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!m[i].base_url || !render_url_trim(m[i].base_url, v[k].base_url))
			continue;
		/* names are peer text: printable ASCII only, truncated */
		const char *nm = m[i].name && *m[i].name ? m[i].name : v[k].base_url;
		size_t j = 0;
		for (; *nm && j + 1 < sizeof(v[k].name); nm++)
			if ((unsigned char)*nm >= 0x20 && (unsigned char)*nm < 0x7f)
				v[k].name[j++] = *nm;
		v[k].name[j] = 0;
		k++;
	}
	/* generated_at says when the list last changed, not when it was set */
	int same = k == h->nmirrors && (!k || !memcmp(v, h->mirrors, k * sizeof(*v)));
	free(h->mirrors);
	h->mirrors = v;
	h->nmirrors = k;
	if (!same)
		pith_time_now(h->mirrors_at, 0);
	return (int)k;
}

void render_root_set(render_t *h, const render_root_t *r)
{
	int has = r != NULL;
	if (has == h->has_root && (!has || !memcmp(r, &h->root, sizeof(*r))))
		return;
	if (r)
		h->root = *r;
	h->has_root = has;
	pith_time_now(h->mirrors_at, 0);
}

size_t render_mirrors_count(const render_t *h)
{
	return h->nmirrors;
}

void render_free_(render_t *h)
{
	if (!h)
		return;
	pith_buf_release(&h->body);
	pith_buf_release(&h->tmp);
	pith_buf_release(&h->tmp2);
	free(h->mirrors);
	free(h);
}

int render_get(render_t *h, const render_req_t *req, render_doc_t *out)
{
	const char *target = req->target;
	render_ctx_t c = {.rd = h, .route = RENDER_ROUTE_OTHER, .accept = req->accept};
	c.t = &h->target;
	c.body = &h->body;
	pith_buf_reset(c.body);
	char id[256], pith[PITH_NUMBER_LEN + 1];
	const char *why = "";
	int id_seg;
	memset(out, 0, sizeof(*out));
	if (render_target_parse(target, strlen(target), c.t, &why) || c.t->bad_why) {
		render_error(&c, 400, "malformed request target: %s", *why ? why : c.t->bad_why);
		goto done;
	}
	c.route = render_route_match(c.t, id, sizeof(id), &id_seg);
	c.r.status = 200;
	if (render_view_run_global(&c))
		goto done;
	switch (c.route) {
	case RENDER_ROUTE_PAGE: case RENDER_ROUTE_RECORD: case RENDER_ROUTE_BUNDLE: case RENDER_ROUTE_WELL_KNOWN:
	case RENDER_ROUTE_STATE: case RENDER_ROUTE_EVENTS: case RENDER_ROUTE_GRAPH: case RENDER_ROUTE_BIB: break;
	default: render_error(&c, 404, "no such resource"); goto done;
	}
	pith_err_t err = {0};
	int rc = store_resolve(h->store, id, pith, &err);
	if (rc == PITH_ENOTFOUND)
		render_error(&c, 404, "no record for %s on this mirror", id);
	else if (rc)
		render_error(&c, rc == PITH_EINVAL ? 400 : 500, "%s", err.msg);
	else
		render_view_run(&c, pith);
done:
	if (c.body->oom)
		return PITH_ENOMEM;
	out->status = c.r.status ? c.r.status : 200;
	out->ctype = c.r.ctype;
	out->body = c.body->data ? c.body->data : (const uint8_t *)"";
	out->len = c.body->len;
	out->last_modified = out->status == 200 ? render_date_own(&c.r, (int64_t)time(NULL)) : 0;
	if (out->status == 200 && render_is_not_modified(c.r.etag, out->last_modified,
							 req->if_none_match, req->if_modified_since)) {
		out->status = 304;
		out->len = 0;
	}
	memcpy(out->etag, c.r.etag, sizeof(out->etag));
	out->cors = c.r.cors;
	out->is_html = c.r.is_html;
	out->vary_accept = c.r.vary_accept;
	return 0;
}
