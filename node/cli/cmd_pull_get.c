/* pithctl pull's requests (cmd_pull_int.h): each GET with its retries
 * (hc_result_is_transient, hc_backoff_us, a Retry-After), the pause a
 * Retry-After puts on the whole run, the breaker that takes the upstream
 * for down, and the pump that starts what may start. cmd_pull.c says what
 * is asked and why. */
#include "cmd_pull_int.h"

#include <stdio.h>

/* ---- requests -------------------------------------------------------------------- */

static void get_answer(void *arg, const hc_result_t *r);

/* Passes g's final answer on; its place is free then. */
static void get_end(pull_get_t *g, const hc_result_t *r)
{
	g->p->busy--;
	g->done(g->arg, r);
}

/* Ends g at once with a network-level failure that is not one of the
 * upstream's: error and note say why. */
static void get_fail(pull_get_t *g, const char *error)
{
	hc_result_t r = {.url = g->req.url, .curl_code = -1, .etag = "",
			 .location = "", .retry_after_s = -1, .error = error};
	get_end(g, &r);
}

/* Hands g's current attempt to the client. A transfer that cannot start
 * ends with a result like any other, at once. */
static void get_start(pull_get_t *g)
{
	g->req.done = get_answer;
	g->req.arg = g;
	if (hc_get(g->p->hc, &g->req)) {
		g->p->requests++;
		if (g->attempt > 1)
			g->p->retried++; /* counted when made: one abandoned is not */
		return;
	}
	get_fail(g, "cannot start a request (out of memory)");
}

/* Ends g unasked: the upstream appears down. */
static void get_abandon(pull_get_t *g)
{
	unsigned made = g->attempt - 1; /* the retry waited for is not made */
	if (made)
		snprintf(g->note, sizeof(g->note), " (after %u attempt%s)", made, made == 1 ? "" : "s");
	get_fail(g, made ? "not asked again: the upstream appears down" :
		 "not asked: the upstream appears down");
}

void pull_pause_cb(evutil_socket_t fd, short what, void *arg)
{
	pull_pump(arg);
}

/* Whether a Retry-After holds the run back; if so, the pause timer is set
 * to its end. */
static int pull_is_paused(pull_t *p)
{
	double left = p->pause_until - cli_now();
	if (left <= 0)
		return 0;
	int64_t us = (int64_t)(left * 1e6) + 1;
	struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
	evtimer_add(p->pause_ev, &tv);
	return 1;
}

/* Starts g's current attempt unless a Retry-After holds the run back;
 * then queues it (pull_pump starts it at the pause's end). */
static void get_send(pull_get_t *g)
{
	pull_t *p = g->p;
	if (p->down) {
		get_abandon(g);
		return;
	}
	if (!p->queue && !pull_is_paused(p)) {
		get_start(g);
		return;
	}
	g->next = NULL;
	if (p->queue_end)
		p->queue_end->next = g;
	else
		p->queue = g;
	p->queue_end = g;
}

static void on_retry_timer(evutil_socket_t fd, short what, void *arg)
{
	get_send(arg);
}

/* GETs req (its url and if_none_match must outlive the answer), done(arg,
 * result) with the final answer. */
void pull_get(pull_t *p, pull_get_t *g, const hc_req_t *req, hc_done_fn done, void *arg)
{
	g->p = p;
	g->req = *req;
	g->done = done;
	g->arg = arg;
	g->attempt = 1;
	g->note[0] = 0;
	p->busy++;
	get_send(g);
}

/* Unless a Retry-After holds the run back: starts what waits for the pause,
 * oldest first, then new items while fewer than PULL_INFLIGHT requests
 * are busy. A request waiting for its retry keeps its place, so that a
 * failing upstream is not sent every ID in the meantime. Once the upstream
 * is down, ends what waits unasked and starts nothing. */
void pull_pump(pull_t *p)
{
	while (p->queue && (p->down || !pull_is_paused(p))) {
		pull_get_t *g = p->queue;
		if (!(p->queue = g->next))
			p->queue_end = NULL;
		if (p->down)
			get_abandon(g);
		else
			get_start(g);
	}
	while (p->items_go && !p->down && !p->queue && p->next < p->nitems &&
	       p->busy < PULL_INFLIGHT && !pull_is_paused(p))
		pull_item_start(p, &p->items[p->next++]);
}

/* The upstream is taken for down: the retries waiting on their timers end
 * now, unasked (on the next loop turn), and pull_pump starts nothing. */
static void pull_trip(pull_t *p)
{
	p->down = 1;
	for (size_t i = 0; i < p->next; i++) {
		struct event *w = p->items[i].get.wait;
		if (w && evtimer_pending(w, NULL)) {
			evtimer_del(w);
			event_active(w, EV_TIMEOUT, 1);
		}
	}
	pull_check_finished(p);
}

/* The breaker sees each request's final answer: a failure that may mend,
 * after every retry it was allowed (or not retried: a Retry-After over
 * PULL_RETRY_AFTER_MAX_S), counts; any other answer, even a 404, shows
 * the upstream up and starts the count again. */
static void pull_breaker(pull_t *p, const hc_result_t *r)
{
	if (!hc_result_is_transient(r))
		p->down_streak = 0;
	else if (++p->down_streak == PULL_DOWN_AFTER && !p->down)
		pull_trip(p);
}

/* Whether g is asked again after r (its timer set, one stderr line); if
 * not, g->note says why when that is not plain. */
static int get_retry(pull_get_t *g, const hc_result_t *r, int64_t ra)
{
	pull_t *p = g->p;
	if (!hc_result_is_transient(r) || !p->retries)
		return 0;
	if (ra > PULL_RETRY_AFTER_MAX_S) {
		snprintf(g->note, sizeof(g->note), " (Retry-After %lld s is over the %d s pull "
			 "waits: not retried)", (long long)ra, PULL_RETRY_AFTER_MAX_S);
		return 0;
	}
	if (g->attempt > p->retries || p->down) {
		snprintf(g->note, sizeof(g->note), " (after %u attempt%s%s)", g->attempt,
			 g->attempt == 1 ? "" : "s",
			 p->down ? "; not asked again: the upstream appears down" : "");
		return 0;
	}
	if (!g->wait && !(g->wait = evtimer_new(p->loop, on_retry_timer, g))) {
		snprintf(g->note, sizeof(g->note), " (out of memory: not retried)");
		return 0;
	}
	int64_t us = ra >= 0 ? ra * INT64_C(1000000) :
		hc_backoff_us(PULL_RETRY_FIRST_US, g->attempt, PULL_RETRY_STEP_MAX_US);
	g->attempt++;
	char what[2200], ras[48] = "";
	if (r->curl_code) {
		snprintf(what, sizeof(what), "%s: %s", r->url, r->error);
	} else {
		if (ra >= 0)
			snprintf(ras, sizeof(ras), " with Retry-After: %lld", (long long)ra);
		snprintf(what, sizeof(what), "%s answered %ld%s", r->url, r->status, ras);
	}
	if (p->tty)
		fputs("\r\033[K", stderr);
	fprintf(stderr, "pithctl pull: %s; retrying in %.1f s (attempt %u of %u)\n", what,
		(double)us / 1e6, g->attempt, p->retries + 1);
	struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
	evtimer_add(g->wait, &tv);
	return 1;
}

/* An attempt's answer: a Retry-After in it holds back the whole run; then
 * the next attempt, or the final answer passed on (the breaker sees it),
 * and what waits is started in the slot freed. */
static void get_answer(void *arg, const hc_result_t *r)
{
	pull_get_t *g = arg;
	pull_t *p = g->p;
	p->bytes += r->bytes;
	int64_t ra = hc_result_retry_after_s(r);
	if (ra > 0 && ra <= PULL_RETRY_AFTER_MAX_S && cli_now() + (double)ra > p->pause_until)
		p->pause_until = cli_now() + (double)ra;
	if (!get_retry(g, r, ra)) {
		pull_breaker(p, r);
		get_end(g, r);
	}
	pull_pump(p);
}
