/* What a shared cache may do with an answer (docs/http.md, "Caching"):
 * Cache-Control by route and status, and the cache tag that names the
 * record a document belongs to (Cache-Tag, Surrogate-Key), which the
 * change feed names again when the record changes. */
#include <event2/http.h>
#include <stdio.h>

#include "http_int.h"

/* How long a stale answer may be served while the origin fails (a node
 * down behind a cache): a day. */
#define HTTP_CACHE_STALE_IF_ERROR 86400
/* The lists, the home page, search and resolve change with any commit:
 * at most this long, whatever the knob. */
#define HTTP_CACHE_LIST_MAX 10
/* A 400 or 404 (a mistyped or not yet stored identifier): at most this. */
#define HTTP_CACHE_ERROR_MAX 5
/* The signing key changes only with a rotation (a restart). */
#define HTTP_CACHE_KEY_MAX 3600
/* What a content hash names (an event by its id, a bundle by its hash)
 * never changes: a year, the longest RFC 9111 advises, and immutable. */
#define HTTP_CACHE_IMMUTABLE "public, max-age=31536000, immutable"

static int min_int(int a, int b)
{
	return a < b ? a : b;
}

/* The changing documents: fresh for fresh s, then served stale while one
 * request revalidates, and while the origin fails. */
static void changing(char *out, size_t cap, int fresh)
{
	snprintf(out, cap, "public, max-age=%d, stale-while-revalidate=%d, stale-if-error=%d", fresh,
		 fresh, HTTP_CACHE_STALE_IF_ERROR);
}

void http_cache_control(render_route_t route, int status, const render_resp_t *r, int max_age,
			char *out, size_t cap)
{
	snprintf(out, cap, "no-store");
	if (r->no_store || r->close || r->retry_after)
		return; /* per node or per moment: health, metrics, POST, a busy answer */
	if (status == 400 || status == 404) {
		if (max_age > 0 && route != RENDER_ROUTE_OTHER)
			snprintf(out, cap, "public, max-age=%d", min_int(max_age, HTTP_CACHE_ERROR_MAX));
		return;
	}
	if (status != 200 && status != 304 && status != 302)
		return; /* 204 (a preflight: Access-Control-Max-Age), 405, 5xx... */
	if (route == RENDER_ROUTE_EVENT_ID || route == RENDER_ROUTE_BUNDLE_HASH) {
		snprintf(out, cap, "%s", HTTP_CACHE_IMMUTABLE); /* whatever http_max_age */
		return;
	}
	if (max_age <= 0) {
		snprintf(out, cap, "no-cache");
		return;
	}
	switch (route) {
	case RENDER_ROUTE_PAGE:
	case RENDER_ROUTE_RECORD:
	case RENDER_ROUTE_BUNDLE:
	case RENDER_ROUTE_WELL_KNOWN:
	case RENDER_ROUTE_STATE:
	case RENDER_ROUTE_EVENTS:
	case RENDER_ROUTE_GRAPH:
	case RENDER_ROUTE_BIB:
	case RENDER_ROUTE_MIRRORS: changing(out, cap, max_age); return;
	case RENDER_ROUTE_HOME:
	case RENDER_ROUTE_LIST:
	case RENDER_ROUTE_RECORDS:
	case RENDER_ROUTE_SEARCH:
	case RENDER_ROUTE_SEARCH_API:
	case RENDER_ROUTE_ROOT: /* the signed roots (a range or a proof: no_store) */
	case RENDER_ROUTE_RESOLVE: changing(out, cap, min_int(max_age, HTTP_CACHE_LIST_MAX)); return;
	case RENDER_ROUTE_SIGNING_KEY:
		snprintf(out, cap, "public, max-age=%d, stale-while-revalidate=%d, stale-if-error=%d",
			 HTTP_CACHE_KEY_MAX, HTTP_CACHE_STALE_IF_ERROR, 7 * HTTP_CACHE_STALE_IF_ERROR);
		return;
	/* the change feed: a follower or a purge wants what was committed
	 * last, so a cache asks every time */
	case RENDER_ROUTE_CHANGES: snprintf(out, cap, "no-cache"); return;
	default: return;
	}
}

void http_cache_headers(http_t *h, render_route_t route, int status, const render_resp_t *r,
			struct evkeyvalq *oh)
{
	char cc[128];
	http_cache_control(route, status, r, h->o.cache_max_age, cc, sizeof(cc));
	evhttp_add_header(oh, "Cache-Control", cc);
	/* one tag, two spellings: Cloudflare's and Fastly's (a space- or
	 * comma-separated list; ours is one item) */
	if (r->tag[0] && (status == 200 || status == 302 || status == 304)) {
		evhttp_add_header(oh, "Cache-Tag", r->tag);
		evhttp_add_header(oh, "Surrogate-Key", r->tag);
	}
}
