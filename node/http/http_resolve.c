/* What the server answers beyond the shared documents: identifiers
 * resolved with the body cache and the read-through (http_want.c),
 * /api/pith-number/resolve, /healthz and /metrics. The documents
 * themselves are rendered by node/render (render.h), which `pithctl
 * export --site` runs too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_int.h"
#include "json.h"
#include "log.h"

/* ---- identifiers -------------------------------------------------------------------- */

/* Bodies resolved before: body -> year. The registry's URLs name records by
 * their 26-character body, and finding the year is a prefix scan of the
 * store (an iterator: a third of a state.json request's time). A stored
 * record is never removed, so a cached answer stays right; the one thing a
 * cached body can miss is a later, second subject with the same body and
 * another year (necessarily bogus), which would make the body ambiguous:
 * such a body keeps naming the record it named first until the cache is
 * forgotten (its slot taken by another, http_bodies.c) or the node
 * restarts. Only resolutions that succeeded are cached, so clients cannot
 * fill it with made-up bodies. */
#define HTTP_WANT_RETRY_AFTER_S 5 /* a read-through whose upstream failed or rests, */
#define HTTP_WANT_RETRY_MAX_S 300 /* unless the upstreams say when, up to this */

void http_body_cache_add(http_t *h, const char *pith)
{
	http_bodies_put(h->bodies, pith);
}

/* The syntax checks every route's identifier goes through: 0 with *pid
 * set, or -1 with the 400 reply set. */
static int id_parse(http_ctx_t *c, const char *id, pith_id_t *pid)
{
	pith_err_t err = {0};
	if (!id || !*id) {
		render_error(&c->v, 400, "no identifier");
		return -1;
	}
	if (strlen(id) > 200 || pith_id_parse(id, pid, &err)) {
		/* pith_id_parse's message names the identifier itself */
		render_error(&c->v, 400, "%s", err.msg[0] ? err.msg : "identifier: longer than 200 bytes");
		return -1;
	}
	return 0;
}

static int id_is_body(const pith_id_t *pid)
{
	return pid->kind == PITH_ID_FULL && strlen(pid->value) == PITH_BODY_LEN;
}

int http_resolve_plan(http_ctx_t *c, const char *id, http_id_plan_t *plan)
{
	pith_id_t pid;
	memset(plan, 0, sizeof(*plan));
	if (id_parse(c, id, &pid))
		return -1;
	snprintf(plan->id, sizeof(plan->id), "%s", id); /* id_parse: at most 200 bytes */
	if (pid.number[0]) {
		memcpy(plan->pith, pid.number, PITH_NUMBER_LEN + 1);
		/* only a record not stored needs the loop (the read-through) */
		plan->check = c->h->hooks.want && !c->rerun;
		return 0;
	}
	if (!id_is_body(&pid) || !c->h->bodies)
		return 0;
	if (!http_bodies_get(c->h->bodies, pid.value, plan->pith))
		plan->cache = 1;
	return 0;
}

int http_resolve_plan_run(store_t *st, const http_id_plan_t *plan,
			  char pith[static PITH_NUMBER_LEN + 1], pith_err_t *err)
{
	if (plan->pith[0]) {
		memcpy(pith, plan->pith, PITH_NUMBER_LEN + 1);
		store_record_info_t info;
		/* as http_resolve_id: any other failure is the view's to report */
		if (plan->check && store_record_get(st, pith, &info, err) == PITH_ENOTFOUND)
			return PITH_ENOTFOUND;
		return 0;
	}
	return store_resolve(st, plan->id, pith, err);
}

void http_resolve_fail(http_ctx_t *c, const char *id, int rc, const pith_err_t *err)
{
	if (rc == PITH_EINVAL) {
		render_error(&c->v, 400, "%s", err->msg);
		return;
	}
	log_warn("http: resolving %s: %s", id, err->msg);
	render_error(&c->v, 500, "store error");
}

int http_resolve_id(http_ctx_t *c, const char *id, char pith[static PITH_NUMBER_LEN + 1])
{
	pith_id_t pid;
	pith_err_t err = {0};
	if (id_parse(c, id, &pid))
		return -1;
	/* a full number names its record exactly: the view's own read says
	 * whether it is stored */
	if (pid.number[0]) {
		memcpy(pith, pid.number, PITH_NUMBER_LEN + 1);
		store_record_info_t info;
		if (c->h->hooks.want && !c->rerun &&
		    (c->absent || store_record_get(c->h->store, pith, &info, &err) == PITH_ENOTFOUND)) {
			int w = http_want(c, id);
			if (w)
				return w;
		}
		return 0;
	}
	int is_body = id_is_body(&pid);
	if (is_body && http_bodies_get(c->h->bodies, pid.value, pith))
		return 0;
	/* handed back: the worker's store_resolve found nothing a moment ago */
	int rc = c->absent ? PITH_ENOTFOUND : store_resolve(c->h->store, id, pith, &err);
	if (rc == PITH_ENOTFOUND) {
		int w = http_want(c, id);
		if (w)
			return w;
		if (c->rerun == HTTP_WANT_NOT_FOUND)
			render_error(&c->v, 404, "no record for %s on this mirror nor its upstreams", id);
		else if (c->rerun == HTTP_WANT_FAILED)
			render_error(&c->v, 502, "no record for %s on this mirror, and its upstreams failed: %s", id,
				   c->rerun_msg ? c->rerun_msg : "see the node's status");
		else if (c->rerun == HTTP_WANT_RETRY) {
			render_error(&c->v, 503, "no record for %s on this mirror yet: an upstream failed or "
				     "rests; try again later", id);
			int64_t ra = c->h->hooks.want_retry_s ? c->h->hooks.want_retry_s(c->h->hooks.arg) : -1;
			c->v.r.retry_after = ra < 0 ? HTTP_WANT_RETRY_AFTER_S
					   : ra < 1 ? 1 : ra > HTTP_WANT_RETRY_MAX_S ? HTTP_WANT_RETRY_MAX_S : (int)ra;
		}
		else
			render_error(&c->v, 404, "no record for %s on this mirror", id);
		return -1;
	}
	if (rc) {
		http_resolve_fail(c, id, rc, &err);
		return -1;
	}
	if (is_body)
		http_bodies_put(c->h->bodies, pith);
	return 0;
}

/* ---- /api/pith-number/resolve -------------------------------------------------------- */

/* The query's one identifier: its key and value in the target, and the
 * identifier to resolve (arxiv= and doi= values with their prefix). -1
 * with a 400 set when there is not exactly one. */
static int resolve_query(http_ctx_t *c, const char **key, const char **val, char q[static 256])
{
	static const char *const keys[] = {"arxiv", "doi", "pith", "id"};
	*key = *val = NULL;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		int count;
		const char *v = render_target_query(c->v.t, keys[i], &count);
		if (!v)
			continue;
		if (*key || count > 1) {
			render_error(&c->v, 400, "give exactly one of arxiv=, doi=, pith=, id=");
			return -1;
		}
		*key = keys[i];
		*val = v;
	}
	if (!*key || !**val) {
		render_error(&c->v, 400, "give one of arxiv=, doi=, pith=, id=");
		return -1;
	}
	if (!strcmp(*key, "arxiv") && strncmp(*val, "arxiv:", 6))
		snprintf(q, 256, "arxiv:%s", *val);
	else if (!strcmp(*key, "doi") && strncmp(*val, "doi:", 4))
		snprintf(q, 256, "doi:%s", *val);
	else
		snprintf(q, 256, "%s", *val);
	return 0;
}

int http_view_resolve_plan(http_ctx_t *c, http_id_plan_t *plan)
{
	const char *key, *val;
	char q[256];
	if (resolve_query(c, &key, &val, q) || http_resolve_plan(c, q, plan))
		return -1;
	return 0;
}

static void resolve_answer(http_ctx_t *c, const char *pith, const char *key, const char *val,
			   const char *q);

int http_view_resolve(http_ctx_t *c)
{
	const char *key, *val;
	char q[256], pith[PITH_NUMBER_LEN + 1];
	if (resolve_query(c, &key, &val, q))
		return 0;
	int rc = http_resolve_id(c, q, pith);
	if (rc)
		return rc > 0;
	resolve_answer(c, pith, key, val, q);
	return 0;
}

void http_view_resolve_answer(http_ctx_t *c, const char *pith)
{
	const char *key, *val;
	char q[256];
	/* the worker's own parse of the target (the loop checked it) */
	if (!resolve_query(c, &key, &val, q))
		resolve_answer(c, pith, key, val, q);
}

/* The answer for the record pith that the query's identifier q (key=val
 * in the target) resolved to. */
static void resolve_answer(http_ctx_t *c, const char *pith, const char *key, const char *val,
			   const char *q)
{
	http_t *h = c->h;
	const char *js = render_target_query(c->v.t, "json", NULL);
	int want_json = js && (!strcmp(js, "true") || !strcmp(js, "1"));
	const char *body = pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	store_record_info_t info;
	pith_err_t err = {0};
	int rc = store_record_get(h->store, pith, &info, &err);
	if (rc == PITH_ENOTFOUND) {
		/* a full number not stored, on a mirror with no upstream: not
		 * found, as any other identifier (not a redirect to a 404) */
		render_error(&c->v, 404, "no record for %s on this mirror", q);
		return;
	}
	if (rc) {
		http_resolve_fail(c, q, rc, &err);
		return;
	}
	render_cache_tag(pith, c->v.r.tag); /* it names the record's state */
	if (!want_json) {
		c->v.r.status = 302;
		snprintf(c->v.r.location, sizeof(c->v.r.location), "%s/pith/%s", h->base_url, body);
		pith_buf_reset(c->v.body);
		c->v.r.ctype = NULL;
		return;
	}
	char hex[65];
	pith_hex_encode(info.state_hash, 32, hex);
	pith_buf_t *b = c->v.body;
	pith_buf_reset(b);
	/* canonical key order again */
	pith_buf_printf(b, "{\"bundle_url\":\"%s/pith/%s/bundle.json\",\"event_count\":%llu,"
			   "\"events_url\":\"%s/api/pith-number/%s/events.json\",\"found\":true,"
			   "\"graph_url\":\"%s/api/pith-number/%s/graph.json\",\"has_bundle\":%s,"
			   "\"json_url\":\"%s/pith/%s.json\",\"pith_number\":\"%s\",\"query\":{",
			h->base_url, body, (unsigned long long)info.event_count, h->base_url, body,
			h->base_url, body, info.has_bundle ? "true" : "false", h->base_url, body, pith);
	json_write_string(b, key, strlen(key));
	pith_buf_puts(b, ":");
	json_write_string(b, val, strlen(val));
	pith_buf_printf(b, "},\"short_pith_number\":\"pith:%.8s\",\"state_sha256\":\"%s\","
			   "\"state_url\":\"%s/pith/%s/state.json\",\"url\":\"%s/pith/%s\"}",
			body, hex, h->base_url, body, h->base_url, body);
	if (b->oom) {
		render_error(&c->v, 500, "out of memory");
		return;
	}
	c->v.r.ctype = "application/json";
	c->v.r.cors = 1;
	render_etag_body(&c->v);
}

/* ---- /healthz and /metrics ---------------------------------------------------------- */

void http_view_healthz(http_ctx_t *c)
{
	store_counts_t sc;
	store_errors_t se;
	char why[400];
	store_counts_get(c->h->store, &sc);
	store_errors_get(c->h->store, &se);
	/* 503 while draining, while the store does not take writes, and for
	 * a while after a read failed (docs/http.md) */
	int store_ok = store_is_healthy(c->h->store, STORE_READ_ERROR_WINDOW_US, why, sizeof(why));
	int ok = !c->h->draining && store_ok;
	pith_buf_reset(c->v.body);
	pith_buf_printf(c->v.body, "{\"ok\":%s,", ok ? "true" : "false");
	if (!ok) {
		const char *r = c->h->draining ? "shutting down" : why;
		pith_buf_puts(c->v.body, "\"reason\":");
		json_write_string(c->v.body, r, strlen(r));
		pith_buf_puts(c->v.body, ",");
	}
	pith_buf_printf(c->v.body, "\"store\":{\"bundles\":%llu,\"events\":%llu,\"records\":%llu,"
			"\"writable\":%s,\"read_errors\":%llu,\"write_errors\":%llu}}\n",
			(unsigned long long)sc.bundles, (unsigned long long)sc.events,
			(unsigned long long)sc.records, se.writable ? "true" : "false",
			(unsigned long long)se.read_errors, (unsigned long long)se.write_errors);
	c->v.r.status = ok ? 200 : 503;
	c->v.r.ctype = "application/json";
	c->v.r.no_store = 1;
}

/* Whether an Accept header asks for OpenMetrics: the media type listed
 * without q=0 (Prometheus sends it first, text/plain after it at a lower
 * q); anything else gets the Prometheus text format. */
static int wants_openmetrics(const char *accept)
{
	static const char om[] = "application/openmetrics-text";
	for (const char *p = accept; p && *p;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n >= sizeof(om) - 1 && !strncasecmp(p, om, sizeof(om) - 1)) {
			int ok = 1;
			for (const char *q = p; q + 2 <= p + n; q++)
				if (q[0] == 'q' && q[1] == '=')
					ok = strtod(q + 2, NULL) > 0;
			if (ok)
				return 1;
		}
		p += n;
	}
	return 0;
}

void http_view_metrics(http_ctx_t *c)
{
	int om = wants_openmetrics(c->v.accept);
	pith_buf_reset(c->v.body);
	if (metrics_render_as(c->h->metrics, c->v.body, om ? METRICS_OPENMETRICS : METRICS_PROMETHEUS)) {
		render_error(&c->v, 500, "out of memory");
		return;
	}
	c->v.r.ctype = om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
			: "text/plain; version=0.0.4; charset=utf-8";
	c->v.r.vary_accept = 1;
	c->v.r.no_store = 1;
}
