/* Read-through (docs/upstream.md): a read of a record this mirror lacks
 * waits, up to readthrough_ms, while the want hook (pithd: its follower)
 * asks the upstreams. The request keeps only its evhttp request, its
 * start time and a deadline; once answered it is served again from the
 * start, now from the store. Past the deadline it gets 503 with
 * Retry-After, saying the record is being fetched. */
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>

#include "http_int.h"

#define WANT_RETRY_AFTER_S 2

typedef struct want {
	http_t *h;
	struct evhttp_request *req;
	render_route_t route;
	int head;
	int64_t t0_us;
	uint64_t token;
	struct event *deadline;
	char id[200];
} want_t;

static void want_free(want_t *w)
{
	if (w->deadline)
		event_free(w->deadline);
	free(w);
}

static want_t *want_take(http_t *h, uint64_t token)
{
	uint8_t key[32];
	idmap_key_u64(token, key);
	want_t *w = idmap_del(h->waits, key);
	if (w)
		h->nwaits--;
	return w;
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	want_t *w = arg;
	http_t *h = w->h;
	if (!want_take(h, w->token))
		return;
	http_ctx_t c = {.v = {.rd = h->rd, .route = w->route, .t = &h->target, .body = &h->body},
			.h = h, .req = w->req, .t0_us = w->t0_us, .head = w->head};
	render_error(&c.v, 503, "%s is being fetched from this mirror's upstreams; try again in a few seconds",
		   w->id);
	c.v.r.retry_after = WANT_RETRY_AFTER_S;
	http_send(&c);
	want_free(w);
}

int http_want(http_ctx_t *c, const char *id)
{
	http_t *h = c->h;
	if (!h->hooks.want || c->rerun || http_draining(h) || h->o.readthrough_ms <= 0)
		return 0;
	if (h->main)
		return http_relay(c) ? 1 : -1; /* a serving loop: the node's loop asks and waits */
	want_t *w = calloc(1, sizeof(*w));
	if (!w) {
		render_error(&c->v, 503, "out of memory");
		return -1;
	}
	w->h = h;
	w->req = c->req;
	w->route = c->v.route;
	w->head = c->head;
	w->t0_us = c->t0_us;
	w->token = ++h->next_token;
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->deadline = evtimer_new(h->base, deadline_cb, w);
	uint8_t key[32];
	idmap_key_u64(w->token, key);
	if (!w->deadline || idmap_put(h->waits, key, w)) {
		want_free(w);
		render_error(&c->v, 503, "out of memory");
		return -1;
	}
	h->nwaits++;
	int rc = h->hooks.want(h->hooks.arg, id, w->token);
	if (rc) {
		want_take(h, w->token);
		want_free(w);
		if (rc == PITH_ENOTFOUND)
			return 0;
		render_error(&c->v, 503, "too many reads are waiting for this mirror's upstreams");
		c->v.r.retry_after = WANT_RETRY_AFTER_S;
		return -1;
	}
	struct timeval tv = {h->o.readthrough_ms / 1000, (h->o.readthrough_ms % 1000) * 1000};
	event_add(w->deadline, &tv);
	return 1;
}

void http_want_done(http_t *h, uint64_t token, http_want_answer_t answer)
{
	want_t *w = want_take(h, token);
	if (!w)
		return; /* answered at its deadline already */
	struct evhttp_request *req = w->req;
	int64_t t0 = w->t0_us;
	want_free(w);
	http_handle(h, req, t0, answer);
}

static int drop_one(void *arg, const uint8_t id[32], void *val)
{
	(void)arg;
	(void)id;
	want_free(val);
	return 0;
}

void http_want_drop_all(http_t *h)
{
	if (!h->waits)
		return;
	idmap_each(h->waits, drop_one, NULL);
	idmap_free(h->waits);
	h->nwaits = 0;
}
