/* POST /events: signed events, one JSON document or JSON Lines, validated
 * exactly as gossip is.
 *
 * The loop thread only splits the body into items: a string-aware brace
 * scan, linear in the body and bounded by max_body_bytes. Each item goes
 * to the submit hook as an ingest job (pithd: its validation pool and
 * group-committing writer, the same path as events from peers, so what is
 * stored is announced to peers as usual). The request waits, holding
 * nothing but its item table, until every job is back; the reply then
 * says per item what was stored or why it was rejected. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "json.h"
#include "log.h"

typedef struct post_item {
	post_t *post;
	const ingest_job_t *job; /* identity only: never dereferenced once handed off */
	size_t line;             /* 1-based line of the item's first byte */
	size_t len;              /* its bytes (in h->inflight_bytes while submitted) */
	int done;
	int rc;
	const char *reason;      /* static */
	char msg[240];
	uint8_t id[32];
	int has_id;
	store_outcome_t outcome;
} post_item_t;

struct post {
	http_t *h;
	struct evhttp_request *req;
	int64_t t0_us;
	size_t n, pending;
	post_item_t *items;
	post_t *prev, *next;
};

enum { OUT_STORED = 0, OUT_DUPLICATE, OUT_RESIGNED, OUT_REJECTED };

void http_post_metrics_init(http_t *h)
{
	static const char *const names[] = {"stored", "duplicate", "resigned", "rejected"};
	for (int i = 0; i < 4; i++) {
		char labels[48];
		snprintf(labels, sizeof(labels), "outcome=\"%s\"", names[i]);
		h->post_outcome[i] = metrics_counter(h->metrics, "pith_http_post_events_total",
						     "Events received by POST /events, by outcome",
						     labels);
	}
	h->post_busy = metrics_counter(h->metrics, "pith_http_post_busy_total",
				       "POST /events refused with 503 (validation backlog full)", NULL);
}

static void post_unlink(http_t *h, post_t *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		h->posts = p->next;
	if (p->next)
		p->next->prev = p->prev;
}

static void post_free(post_t *p)
{
	free(p->items);
	free(p);
}

/* ---- splitting the body ------------------------------------------------------------ */

typedef struct span {
	size_t off, len, line;
} span_t;

/* Finds the items of a body: each a JSON object ({...}, strings and
 * escapes respected), separated by whitespace. Anything else up to the end
 * of its line is an item too, left for the validator to reject with a
 * precise message. Returns the count (at most max + 1, so the caller can
 * tell "too many"). */
static size_t split_items(const uint8_t *b, size_t len, span_t *out, size_t max)
{
	size_t n = 0, i = 0, line = 1;
	while (i < len && n <= max) {
		while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) {
			line += b[i] == '\n';
			i++;
		}
		if (i >= len)
			break;
		size_t start = i, start_line = line;
		if (b[i] == '{') {
			int depth = 0, in_str = 0;
			for (; i < len; i++) {
				uint8_t c = b[i];
				if (c == '\n')
					line++;
				if (in_str) {
					if (c == '\\')
						i++;
					else if (c == '"')
						in_str = 0;
				} else if (c == '"') {
					in_str = 1;
				} else if (c == '{' || c == '[') {
					depth++;
				} else if (c == '}' || c == ']') {
					if (--depth == 0) {
						i++;
						break;
					}
				}
			}
			if (i > len)
				i = len;
		} else {
			while (i < len && b[i] != '\n')
				i++;
		}
		if (n < max + 1) {
			out[n].off = start;
			out[n].len = i - start;
			out[n].line = start_line;
		}
		n++;
	}
	return n;
}

/* ---- the reply ---------------------------------------------------------------------- */

static void post_reply(post_t *p)
{
	http_t *h = p->h;
	http_ctx_t c = {.v = {.rd = h->rd, .route = RENDER_ROUTE_POST_EVENTS}, .h = h, .req = p->req,
			.t0_us = p->t0_us};
	c.v.body = &h->body;
	pith_buf_t *b = c.v.body;
	pith_buf_reset(b);
	size_t count[4] = {0};
	int ours = 0; /* a failure on this side (store, memory, shutdown) */
	pith_buf_puts(b, "{\"results\":[");
	for (size_t i = 0; i < p->n; i++) {
		post_item_t *it = &p->items[i];
		char hex[65];
		pith_buf_puts(b, i ? ",{" : "{");
		if (it->rc) {
			count[OUT_REJECTED]++;
			const char *r = it->reason ? it->reason : "invalid";
			if (!strcmp(r, "store") || !strcmp(r, "oom") || !strcmp(r, "shutdown"))
				ours = 1;
			pith_buf_puts(b, "\"error\":");
			json_write_string(b, it->msg, strnlen(it->msg, sizeof(it->msg)));
			pith_buf_puts(b, ",");
		} else {
			count[it->outcome == STORE_STORED ? OUT_STORED
			      : it->outcome == STORE_RESIGNED ? OUT_RESIGNED
			      : OUT_DUPLICATE]++;
		}
		if (it->has_id) {
			pith_hex_encode(it->id, 32, hex);
			pith_buf_printf(b, "\"event_id\":\"sha256:%s\",", hex);
		}
		pith_buf_printf(b, "\"line\":%zu,\"ok\":%s", it->line, it->rc ? "false" : "true");
		if (it->rc) {
			pith_buf_puts(b, ",\"reason\":");
			const char *r = it->reason ? it->reason : "invalid";
			json_write_string(b, r, strlen(r));
		} else {
			pith_buf_printf(b, ",\"outcome\":\"%s\"", store_outcome_name(it->outcome));
		}
		pith_buf_puts(b, "}");
	}
	/* "results" first in the body for readers; the rest in key order */
	pith_buf_printf(b, "],\"accepted\":%zu,\"duplicate\":%zu,\"rejected\":%zu,\"resigned\":%zu,"
			   "\"stored\":%zu}\n",
			count[OUT_STORED] + count[OUT_DUPLICATE] + count[OUT_RESIGNED],
			count[OUT_DUPLICATE], count[OUT_REJECTED], count[OUT_RESIGNED],
			count[OUT_STORED]);
	for (int k = 0; k < 4; k++)
		metric_add(h->post_outcome[k], count[k]);
	if (b->oom) {
		render_error(&c.v, 500, "out of memory");
	} else {
		c.v.r.status = ours ? 503 : count[OUT_REJECTED] ? 400 : 202;
		c.v.r.ctype = "application/json";
		c.v.r.no_store = 1;
		if (ours)
			c.v.r.retry_after = 1;
	}
	http_send(&c);
}

static void item_reject(post_item_t *it, const char *reason, const char *msg)
{
	it->done = 1;
	it->rc = PITH_EINVAL;
	it->reason = reason;
	snprintf(it->msg, sizeof(it->msg), "%s", msg);
}

/* One pending item finished; replies once all have. */
static void post_settle(post_t *p)
{
	if (--p->pending)
		return;
	post_unlink(p->h, p);
	post_reply(p);
	post_free(p);
}

int http_job_done(http_t *h, const ingest_job_t *job)
{
	uint8_t key[32];
	idmap_key_u64((uintptr_t)job, key);
	post_item_t *it = idmap_del(h->jobs, key);
	if (!it)
		return 0;
	h->inflight--;
	h->inflight_bytes -= it->len < h->inflight_bytes ? it->len : h->inflight_bytes;
	it->done = 1;
	it->rc = job->rc;
	it->reason = job->reason;
	snprintf(it->msg, sizeof(it->msg), "%.*s", (int)sizeof(it->msg) - 1, job->msg);
	it->outcome = job->outcome;
	if (job->rc == 0 || (job->reason && !strcmp(job->reason, "store"))) {
		memcpy(it->id, job->id, 32);
		it->has_id = 1;
	}
	if (job->rc) {
		char labels[80];
		snprintf(labels, sizeof(labels), "reason=\"%s\"", job->reason ? job->reason : "invalid");
		metric_inc(metrics_counter(h->metrics, "pith_http_post_events_rejected_total",
					   "Events from POST /events rejected, by reason", labels));
	}
	post_settle(it->post);
	return 1;
}

/* ---- the request ------------------------------------------------------------------------ */

void http_post_events(http_ctx_t *c)
{
	http_t *h = c->h;
	struct evbuffer *in = evhttp_request_get_input_buffer(c->req);
	size_t len = evbuffer_get_length(in);
	if (!h->hooks.submit || h->draining) {
		render_error(&c->v, 503, "this server does not take events now");
		c->v.r.retry_after = h->draining ? 0 : 60;
		http_send(c);
		return;
	}
	if (len > h->o.max_body_bytes) {
		render_error(&c->v, 413, "body over %zu bytes", h->o.max_body_bytes);
		c->v.r.close = 1;
		http_send(c);
		return;
	}
	const uint8_t *body = len ? evbuffer_pullup(in, -1) : NULL;
	size_t max = h->o.max_post_events;
	span_t *sp = malloc((max + 1) * sizeof(*sp));
	if (!sp || (len && !body)) {
		free(sp);
		render_error(&c->v, 500, "out of memory");
		http_send(c);
		return;
	}
	size_t n = len ? split_items(body, len, sp, max) : 0;
	if (n == 0) {
		free(sp);
		render_error(&c->v, 400, "no events in the body (one JSON object, or JSON Lines)");
		http_send(c);
		return;
	}
	if (n > max) {
		free(sp);
		render_error(&c->v, 413, "more than %zu events in one request", max);
		http_send(c);
		return;
	}
	if (h->inflight + n > h->o.max_inflight ||
	    h->inflight_bytes + len > h->o.max_buffered_bytes) {
		free(sp);
		metric_inc(h->post_busy);
		render_error(&c->v, 503, "the validation backlog is full; try again shortly");
		c->v.r.retry_after = 1;
		http_send(c);
		return;
	}
	post_t *p = calloc(1, sizeof(*p));
	post_item_t *items = calloc(n, sizeof(*items));
	if (!p || !items) {
		free(sp);
		free(p);
		free(items);
		render_error(&c->v, 500, "out of memory");
		http_send(c);
		return;
	}
	p->h = h;
	p->req = c->req;
	p->t0_us = c->t0_us;
	p->n = n;
	p->items = items;
	p->pending = n + 1; /* one for this function: a hook may answer inline */
	p->next = h->posts;
	if (h->posts)
		h->posts->prev = p;
	h->posts = p;
	for (size_t i = 0; i < n; i++) {
		post_item_t *it = &items[i];
		it->post = p;
		it->line = sp[i].line;
		ingest_job_t *job = ingest_job_new(INGEST_EVENT, body + sp[i].off, sp[i].len);
		uint8_t key[32];
		if (!job) {
			item_reject(it, "oom", "out of memory");
			p->pending--;
			continue;
		}
		idmap_key_u64((uintptr_t)job, key);
		if (idmap_put(h->jobs, key, it)) {
			ingest_job_free(job);
			item_reject(it, "oom", "out of memory");
			p->pending--;
			continue;
		}
		it->job = job;
		it->len = sp[i].len;
		h->inflight++;
		h->inflight_bytes += it->len;
		h->hooks.submit(h->hooks.arg, job);
	}
	free(sp);
	/* the jobs hold their own copies: the body goes now, not with the reply */
	evbuffer_drain(in, len);
	post_settle(p);
	http_conn_budget(h);
}

void http_post_drop_all(http_t *h)
{
	while (h->posts) {
		post_t *p = h->posts;
		for (size_t i = 0; i < p->n; i++) {
			post_item_t *it = &p->items[i];
			if (it->done || !it->job)
				continue;
			uint8_t key[32];
			idmap_key_u64((uintptr_t)it->job, key);
			if (idmap_del(h->jobs, key))
				h->inflight--;
		}
		post_unlink(h, p);
		/* a request whose client left is no longer evhttp's to free */
		if (!evhttp_request_get_connection(p->req))
			evhttp_request_free(p->req);
		post_free(p);
	}
}
