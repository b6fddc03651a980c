/* Last-Modified (docs/http.md, "Conditional requests"): the table that
 * turns a change log sequence number into a date, for the notes the
 * views make (node/render/render_date.c says why a table). One row per
 * second in which a document needed a date and the log had moved (and
 * once a second while the log moves). The first row is the server's
 * start, so a restart (a new pithd may render differently) dates every
 * document anew. The node's loop and its serving loops (http_loops.c)
 * share the node's table, under its dates_mu: one change gets one date,
 * whichever loop answers. */
#include <stdlib.h>
#include <time.h>

#include "http_int.h"

int http_dates_init(http_t *h)
{
	h->dates = calloc(HTTP_DATES_MAX, sizeof(*h->dates));
	if (!h->dates)
		return -1;
	h->dates[0].seq = h->store ? store_changes_last(h->store) : 0;
	h->dates[0].t = (int64_t)time(NULL);
	h->ndates = 1;
	if (pthread_mutex_init(&h->dates_mu, NULL))
		return -1;
	h->dates_mu_init = 1;
	return 0;
}

/* The date of change seq: the first row at or past it, or a new row now. */
static int64_t date_of_seq(http_t *h, uint64_t seq, int64_t now)
{
	size_t lo = 0, hi = h->ndates;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (h->dates[mid].seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < h->ndates)
		return h->dates[lo].t;
	uint64_t last = store_changes_last(h->store);
	http_date_row_t *top = &h->dates[h->ndates - 1];
	if (now < top->t)
		now = top->t; /* a clock stepped back: rows never go backwards */
	if (last < seq)
		last = seq; /* unlogged: the log's end is as of the last flush */
	if (now == top->t) {
		top->seq = last; /* what was committed by the end of this second */
		return now;
	}
	if (h->ndates == HTTP_DATES_MAX) {
		/* coarser: keep every second row; the seqs of a dropped row get
		 * the next row's later date, so dates only move forward */
		for (size_t i = 0; i < HTTP_DATES_MAX / 2; i++)
			h->dates[i] = h->dates[2 * i + 1];
		h->ndates = HTTP_DATES_MAX / 2;
	}
	h->dates[h->ndates++] = (http_date_row_t){.seq = last, .t = now};
	return now;
}

void http_dates_restart(http_t *h)
{
	if (!h->dates_mu_init)
		return;
	pthread_mutex_lock(&h->dates_mu);
	h->dates_floor = (int64_t)time(NULL);
	pthread_mutex_unlock(&h->dates_mu);
}

void http_dates_tick(http_t *h)
{
	if (!h->dates || !h->store)
		return;
	pthread_mutex_lock(&h->dates_mu);
	date_of_seq(h, store_changes_last(h->store), (int64_t)time(NULL));
	pthread_mutex_unlock(&h->dates_mu);
}

int64_t http_date_of(http_t *h, const render_resp_t *r)
{
	int64_t now = (int64_t)time(NULL);
	if (r->lm_fixed > 0)
		return render_date_own(r, now);
	if (h->main)
		h = h->main; /* a serving loop: the node's table */
	if (!r->lm_seq || !h->dates || !h->store)
		return 0;
	pthread_mutex_lock(&h->dates_mu);
	int64_t t = date_of_seq(h, r->lm_seq, now);
	if (t < h->dates_floor)
		t = h->dates_floor;
	pthread_mutex_unlock(&h->dates_mu);
	/* only a second that had ended before the documents were read: a
	 * change later in that second would get the same date, and a client
	 * holding the older bytes would be told they are current */
	return t < r->lm_read ? t : 0;
}
