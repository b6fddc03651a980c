/* Following a pithd's change feed (issue 14, item 3; docs/upstream.md,
 * "Following a change feed").
 *
 * An upstream whose manifest entry names a changes_url is a pithd (or
 * anything serving its feed): the follower reads the whole feed, a page at
 * a time from its saved cursor, and for each record whose state_sha256
 * differs from the store's own fetches what it lacks: the bundle when the
 * upstream's is newer than the stored one (docs/merge.md's order), then,
 * if the state still differs, the record's events (events.json, paged).
 * Everything goes through the node's ingest pipeline, verified as gossip
 * is. A page's cursor is saved (DATA/upstream-cursors) only once every
 * record of the page is done; a transport failure leaves the cursor where
 * it was, and the page is read again after the upstream's backoff (what
 * was stored by then is found equal and skipped). A record whose state
 * still differs after its events (events signed by keys not trusted
 * here, say) is counted as diverged and does not hold the cursor. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "follower_int.h"
#include "json.h"
#include "log.h"
#include "store_file.h"

#define CURSOR_FILE "upstream-cursors"
#define EVENTS_PAGE_MAX 1000    /* events per events.json page */
#define FEED_RETRY_US (5 * INT64_C(1000000))
/* events pages one record may take (1,000 pages of EVENTS_PAGE_MAX: a
 * million events, the record's size bound); past it the paging is the
 * upstream's error, not a loop (issue 53, attack 5) */
#define EVENTS_PAGES_MAX 1000
#define CURSOR_SAVE_US (1 * INT64_C(1000000)) /* the cursors file: at most this often */

typedef struct feed feed_t;

typedef struct fitem {
	int act;                 /* ACT_FEED_ITEM */
	feed_t *feed;
	size_t idx;              /* in feed->page */
	uint64_t serial;
	uint64_t req;
	int64_t offset;          /* of the next events page, -1 when read whole */
	unsigned events_pages;   /* asked for this record */
	size_t jobs;             /* in the pipeline */
	int bundle_done;
	int failed;
	char url[URL_CAP];
} fitem_t;

struct feed {
	follower_t *f;
	src_t *s;
	char cursor[PITH_CURSOR_MAX + 1];    /* saved: every change before it is done */
	char page_next[PITH_CURSOR_MAX + 1];
	uint64_t req;                        /* the page request */
	int64_t next_poll_us;
	pith_change_t *page;
	size_t n, started, done, running;
	int page_failed;
	fitem_t *items;
	uint64_t pages, empty_pages, changes, same, bundles, events_pages, events, diverged;
	uint64_t stuck;                      /* pages whose cursor did not advance */
	unsigned events_in_page;             /* of the events page being read */
};

static void item_step(fitem_t *it);
static void poll_page(feed_t *fd);

/* ---- the cursors file: "BASE_URL CURSOR" a line ------------------------------------- */

static void cursors_path(const follower_t *f, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", f->data_dir, CURSOR_FILE);
}

static void cursor_load(feed_t *fd)
{
	char path[600], line[PITH_URL_MAX + PITH_CURSOR_MAX + 8];
	cursors_path(fd->f, path, sizeof(path));
	FILE *fp = fopen(path, "r");
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp)) {
		char *sp = strrchr(line, ' '), *nl = strchr(line, '\n');
		if (!sp || !nl || nl < sp)
			continue;
		*sp = *nl = 0;
		size_t cl = strlen(sp + 1);
		if (!strcmp(line, fd->s->base) && cl && cl <= PITH_CURSOR_MAX)
			memcpy(fd->cursor, sp + 1, cl + 1);
	}
	fclose(fp);
}

/* Rewrites the file whole (store_file.h) with every feed's cursor. */
static void cursors_save(follower_t *f)
{
	char path[600];
	f->cursors_dirty = 0;
	f->cursors_saved_us = node_now_us();
	cursors_path(f, path, sizeof(path));
	store_file_t out;
	int bad = store_file_begin(&out, path, NULL, 0666, 0);
	for (size_t i = 0; !bad && i < f->nsrcs; i++) {
		feed_t *fd = f->srcs[i].feed;
		if (fd && fd->cursor[0] &&
		    fprintf(out.fp, "%s %s\n", f->srcs[i].base, fd->cursor) < 0) {
			store_file_abort(&out);
			bad = 1;
		}
	}
	if (bad || store_file_commit(&out))
		log_warn("cannot write %s: %s", path, strerror(errno));
}

/* ---- a page --------------------------------------------------------------------------- */

static void page_release(feed_t *fd)
{
	free(fd->page);
	free(fd->items);
	fd->page = NULL;
	fd->items = NULL;
	fd->n = fd->started = fd->done = fd->running = 0;
}

/* Every record of the page is done: the cursor moves on (and the next page
 * is asked for at once), or stays for a retry. */
static void page_finish(feed_t *fd)
{
	follower_t *f = fd->f;
	int64_t now = node_now_us();
	if (!fd->page_failed) {
		/* the upstream's failures in a row end with a page done, not with
		 * any answer: a page whose records page for ever backs off more */
		fd->s->fails = 0;
		memcpy(fd->cursor, fd->page_next, sizeof(fd->cursor));
		/* while a catch-up commits without the log, a record of the page
		 * may have been found done against a state a crash would lose:
		 * the file keeps the older cursor (the next page saves them all),
		 * and after a crash the page is read again */
		if (!store_is_unlogged(f->d.store)) {
			/* at most once per CURSOR_SAVE_US; else by follower_feed_tick */
			f->cursors_dirty = 1;
			if (now - f->cursors_saved_us >= CURSOR_SAVE_US)
				cursors_save(f);
		}
		page_release(fd);
		poll_page(fd); /* the next page at once, until one comes back empty */
		return;
	} else {
		int64_t t = fd->s->blocked_until_us > now ? fd->s->blocked_until_us : now + FEED_RETRY_US;
		fd->next_poll_us = t;
	}
	page_release(fd);
}

static void item_done(fitem_t *it)
{
	feed_t *fd = it->feed;
	if (it->serial)
		follower_active_del(fd->f, it->serial);
	it->serial = 0;
	fd->running--;
	if (++fd->done == fd->n)
		page_finish(fd);
	else
		follower_feed_tick(fd->f);
}

/* Starts records of the page while under the upstream's share of the
 * follower's fetch slots. */
static void page_pump(feed_t *fd)
{
	while (fd->page && fd->started < fd->n && fd->running < fd->f->share) {
		fitem_t *it = &fd->items[fd->started++];
		it->act = ACT_FEED_ITEM;
		it->feed = fd;
		it->idx = fd->started - 1;
		it->offset = 0;
		it->events_pages = 0;
		it->serial = follower_active_add(fd->f, it);
		fd->running++;
		if (!it->serial) {
			fd->page_failed = 1;
			item_done(it);
			continue;
		}
		item_step(it);
	}
}

/* ---- one record ----------------------------------------------------------------------- */

/* The store's state of the record equals the upstream's. */
static int same_state(feed_t *fd, const pith_change_t *c)
{
	store_record_info_t info;
	pith_err_t e = {0};
	return !store_record_get(fd->f->d.store, c->pith_number, &info, &e) &&
	       !memcmp(info.state_hash, c->state_sha, 32);
}

/* The upstream's bundle is newer than the stored one (docs/merge.md: the
 * greater built_at, ties to the smaller bundle_sha256). */
static int bundle_is_newer(feed_t *fd, const pith_change_t *c)
{
	int64_t us;
	uint8_t sha[32];
	pith_err_t e = {0};
	if (!c->has_bundle)
		return 0;
	if (store_bundle_newest(fd->f->d.store, c->pith_number, &us, sha, &e))
		return 1;
	return c->built_us > us || (c->built_us == us && memcmp(c->bundle_sha, sha, 32) < 0);
}

static void on_bundle(void *arg, const hc_result_t *res);
static void on_events(void *arg, const hc_result_t *res);

static int item_get(fitem_t *it, size_t cap, hc_done_fn done)
{
	follower_t *f = it->feed->f;
	hc_req_t q = {.url = it->url, .body_cap = cap, .done = done, .arg = it,
		      .max_redirects = done == on_bundle ? HC_BUNDLE_REDIRECTS : 0};
	it->feed->s->requests++;
	it->req = hc_get(f->hc, &q);
	return it->req ? 0 : PITH_ENOMEM;
}

/* A failed request: counted, the upstream backed off when it is its own
 * trouble, and the page read again later. */
static void item_failed(fitem_t *it, const hc_result_t *res)
{
	feed_t *fd = it->feed;
	int cause = follower_classify(res);
	if (res->curl_code)
		follower_src_error(fd->f, fd->s, cause, res->url, "%s: %s%s", res->url, res->error,
				   follower_origin_hint(res));
	else
		follower_src_error(fd->f, fd->s, cause, res->url, "%s answered HTTP %ld", res->url,
				   res->status);
	if (follower_cause_backs_off(cause))
		follower_src_backoff(fd->s, hc_result_retry_after_s(res));
	fd->page_failed = 1;
	it->failed = 1;
}

/* Paging that does not advance or end: the upstream's error (counted,
 * logged once, backed off), and the page read again after the backoff. */
static void paging_error(fitem_t *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void paging_error(fitem_t *it, const char *fmt, ...)
{
	feed_t *fd = it->feed;
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	follower_src_error(fd->f, fd->s, C_BAD_ANSWER, it->url, "%s: %s", it->url, msg);
	follower_src_backoff(fd->s, -1);
	it->failed = fd->page_failed = 1;
}

/* The next thing the record needs: its bundle, then its events, then done. */
static void item_step(fitem_t *it)
{
	feed_t *fd = it->feed;
	const pith_change_t *c = &fd->page[it->idx];
	if (it->jobs)
		return; /* its jobs come back first */
	if (it->failed || same_state(fd, c)) {
		if (!it->failed && !it->bundle_done && it->offset == 0)
			fd->same++;
		item_done(it);
		return;
	}
	if (!it->bundle_done) {
		it->bundle_done = 1;
		pith_err_t e = {0};
		if (bundle_is_newer(fd, c) &&
		    !pith_bundle_url(fd->s->pattern, fd->s->base, 0,
				     c->pith_number + PITH_NUMBER_LEN - PITH_BODY_LEN, it->url,
				     sizeof(it->url), &e)) {
			if (item_get(it, fd->f->o.max_body, on_bundle)) {
				it->failed = fd->page_failed = 1;
				item_done(it);
			}
			return;
		}
	}
	if (it->offset < 0) {
		/* the events are all in and the states still differ */
		fd->diverged++;
		log_debug("feed %s: %s still differs after its events", fd->s->base, c->pith_number);
		item_done(it);
		return;
	}
	if (it->events_pages >= EVENTS_PAGES_MAX) {
		paging_error(it, "events paging of %s does not end within %d pages",
			     c->pith_number, EVENTS_PAGES_MAX);
		item_done(it);
		return;
	}
	it->events_pages++;
	snprintf(it->url, sizeof(it->url), "%s/api/pith-number/%s/events.json?offset=%lld&limit=%d",
		 fd->s->base, c->pith_number + PITH_NUMBER_LEN - PITH_BODY_LEN, (long long)it->offset,
		 EVENTS_PAGE_MAX);
	if (item_get(it, fd->f->o.max_body, on_events)) {
		it->failed = fd->page_failed = 1;
		item_done(it);
	}
}

static void submit(fitem_t *it, ingest_kind_t kind, const uint8_t *bytes, size_t len)
{
	feed_t *fd = it->feed;
	ingest_job_t *job = ingest_job_new(kind, bytes, len);
	if (!job) {
		it->failed = fd->page_failed = 1;
		return;
	}
	if (kind == INGEST_BUNDLE) {
		job->has_claim = 1;
		snprintf(job->claimed_pith, sizeof(job->claimed_pith), "%s",
			 fd->page[it->idx].pith_number);
	}
	job->follow = it->serial;
	job->durable = 1; /* the page's cursor is saved once it is stored */
	it->jobs++;
	ingest_submit(fd->f->d.ingest, job);
}

static void on_bundle(void *arg, const hc_result_t *res)
{
	fitem_t *it = arg;
	it->req = 0;
	it->feed->s->bytes += res->bytes;
	if (res->curl_code || res->status != 200) {
		if (res->status == 404)
			it->feed->s->not_found++; /* listed, yet gone: its events may say more */
		else
			item_failed(it, res);
		item_step(it);
		return;
	}
	it->feed->s->bundles++;
	it->feed->bundles++;
	submit(it, INGEST_BUNDLE, res->body, res->body_len);
	item_step(it);
}

static int event_cb(void *arg, const uint8_t *bytes, size_t len)
{
	fitem_t *it = arg;
	it->feed->events++;
	it->feed->events_in_page++;
	submit(it, INGEST_EVENT, bytes, len);
	return 0;
}

static void on_events(void *arg, const hc_result_t *res)
{
	fitem_t *it = arg;
	feed_t *fd = it->feed;
	it->req = 0;
	fd->s->bytes += res->bytes;
	if (res->curl_code || res->status != 200) {
		if (res->status == 404)
			it->offset = -1; /* the upstream has no events of it (any more) */
		else
			item_failed(it, res);
		item_step(it);
		return;
	}
	fd->events_pages++;
	int64_t next = -1;
	pith_err_t e = {0};
	fd->events_in_page = 0;
	int rc = pith_events_page_parse(res->body, res->body_len, NULL, fd->page[it->idx].pith_number,
					EVENTS_PAGE_MAX, event_cb, it, &next, &e);
	if (rc) {
		follower_src_error(fd->f, fd->s, C_BAD_ANSWER, res->url, "%s: %s", res->url, e.msg);
		it->failed = fd->page_failed = 1;
	} else if (next >= 0 && (!fd->events_in_page || next <= it->offset)) {
		/* a further page promised, and this one brought nothing or went back */
		paging_error(it, "events paging does not advance (offset %lld: %u events, next %lld)",
			     (long long)it->offset, fd->events_in_page, (long long)next);
		next = -1;
	}
	it->offset = next;
	item_step(it); /* the next page, once this one's jobs are back */
}

void follower_feed_job_done(follower_t *f, void *obj, const ingest_job_t *job)
{
	(void)f;
	fitem_t *it = obj;
	feed_t *fd = it->feed;
	it->jobs--;
	if (job->rc) {
		const char *reason = job->reason ? job->reason : "invalid";
		follower_count_rejected(fd->s, reason);
		if (job->fail == INGEST_FAIL_SHUTDOWN || job->fail == INGEST_FAIL_COMMIT ||
		    job->fail == INGEST_FAIL_OOM || job->fail == INGEST_FAIL_STORE)
			it->failed = fd->page_failed = 1; /* our side: read again later */
		else
			follower_src_error(fd->f, fd->s, -1, it->url, "%s: %s of %s rejected (%s): %s",
					   it->url, job->kind == INGEST_BUNDLE ? "bundle" : "event",
					   fd->page[it->idx].pith_number, reason, job->msg);
	} else if (job->kind == INGEST_BUNDLE && job->bundle_outcome == STORE_BUNDLE_NEWER) {
		fd->s->stored++;
	}
	item_step(it);
}

/* ---- polling the feed ----------------------------------------------------------------- */

/* A page's next cursor is past the one asked: cursors are opaque, yet
 * equal ones do not advance, and of two decimal ones (a pithd's) the
 * smaller goes back. */
static int cursor_advances(const char *asked, const char *next)
{
	if (!next[0] || !strcmp(asked, next))
		return 0;
	size_t la = strspn(asked, "0123456789"), ln = strspn(next, "0123456789");
	if (la == strlen(asked) && ln == strlen(next)) {
		while (*asked == '0' && asked[1])
			asked++, la--;
		while (*next == '0' && next[1])
			next++, ln--;
		return ln > la || (ln == la && strcmp(next, asked) > 0);
	}
	return 1;
}

static void on_page(void *arg, const hc_result_t *res)
{
	feed_t *fd = arg;
	follower_t *f = fd->f;
	int64_t now = node_now_us();
	fd->req = 0;
	fd->s->bytes += res->bytes;
	if (res->curl_code || res->status != 200) {
		int cause = follower_classify(res);
		follower_src_error(f, fd->s, cause, res->url, "%s: %s", res->url,
				   res->curl_code ? res->error : "not 200");
		if (follower_cause_backs_off(cause))
			follower_src_backoff(fd->s, hc_result_retry_after_s(res));
		fd->next_poll_us = fd->s->blocked_until_us > now ? fd->s->blocked_until_us
								 : now + FEED_RETRY_US;
		return;
	}
	fd->page = calloc(f->o.feed_page, sizeof(*fd->page));
	pith_err_t e = {0};
	size_t n = 0;
	int rc = fd->page ? pith_changes_parse(res->body, res->body_len, NULL, fd->page,
					       f->o.feed_page,
					       &n, fd->page_next, &e)
			  : pith_err_set(&e, PITH_ENOMEM, "out of memory");
	if (rc) {
		follower_src_error(f, fd->s, C_BAD_ANSWER, res->url, "%s: %s", res->url, e.msg);
		page_release(fd);
		fd->next_poll_us = now + f->o.refresh_s * INT64_C(1000000);
		return;
	}
	fd->pages++;
	if (n && fd->cursor[0] && !cursor_advances(fd->cursor, fd->page_next)) {
		/* a page whose cursor stands still or goes back would be read for ever */
		fd->stuck++;
		follower_src_error(f, fd->s, C_BAD_ANSWER, res->url,
				   "%s: the change feed's cursor does not advance (after %s, next %s)",
				   res->url, fd->cursor, fd->page_next);
		follower_src_backoff(fd->s, -1);
		page_release(fd);
		fd->next_poll_us = fd->s->blocked_until_us > now ? fd->s->blocked_until_us
								 : now + FEED_RETRY_US;
		return;
	}
	if (!n) {
		/* caught up: ask again in one interval */
		fd->s->fails = 0;
		fd->empty_pages++;
		page_release(fd);
		fd->next_poll_us = now + f->o.refresh_s * INT64_C(1000000);
		return;
	}
	fd->items = calloc(n, sizeof(*fd->items));
	if (!fd->items) {
		page_release(fd);
		fd->next_poll_us = now + FEED_RETRY_US;
		return;
	}
	fd->n = n;
	fd->changes += n;
	fd->page_failed = 0;
	page_pump(fd);
}

static void poll_page(feed_t *fd)
{
	follower_t *f = fd->f;
	char url[URL_CAP];
	if (fd->cursor[0])
		snprintf(url, sizeof(url), "%s?after=%s&limit=%zu", fd->s->changes_url, fd->cursor,
			 f->o.feed_page);
	else
		snprintf(url, sizeof(url), "%s?limit=%zu", fd->s->changes_url, f->o.feed_page);
	hc_req_t q = {.url = url, .body_cap = pith_changes_limits_default.max_bytes,
		      .done = on_page, .arg = fd};
	fd->s->requests++;
	fd->req = hc_get(f->hc, &q);
	if (!fd->req)
		fd->next_poll_us = node_now_us() + FEED_RETRY_US;
}

void follower_feed_tick(follower_t *f)
{
	int64_t now = node_now_us();
	if (f->cursors_dirty && now - f->cursors_saved_us >= CURSOR_SAVE_US)
		cursors_save(f);
	for (size_t i = 0; i < f->nsrcs; i++) {
		feed_t *fd = f->srcs[i].feed;
		if (!fd)
			continue;
		if (fd->page)
			page_pump(fd);
		else if (!fd->req && now >= fd->next_poll_us && f->srcs[i].blocked_until_us <= now)
			poll_page(fd);
	}
}

void follower_feed_start(follower_t *f, src_t *s)
{
	feed_t *fd = calloc(1, sizeof(*fd));
	if (!fd) {
		log_warn("upstream %s: no memory to follow its change feed", s->base);
		return;
	}
	fd->f = f;
	fd->s = s;
	s->feed = fd;
	cursor_load(fd);
	log_info("upstream %s: following its change feed %s from %s", s->base, s->changes_url,
		 fd->cursor[0] ? fd->cursor : "the start");
	poll_page(fd);
}

void follower_feed_flush(follower_t *f)
{
	if (f->cursors_dirty && !store_is_unlogged(f->d.store))
		cursors_save(f);
}

void follower_feed_free(follower_t *f, src_t *s)
{
	(void)f;
	feed_t *fd = s->feed;
	if (!fd)
		return;
	/* hclient is gone already (no callback comes); the jobs came back */
	page_release(fd);
	free(fd);
	s->feed = NULL;
}

void follower_feed_status_json(const src_t *s, pith_buf_t *b)
{
	const feed_t *fd = s->feed;
	if (!fd)
		return;
	pith_buf_puts(b, ",\"feed\":{\"url\":");
	json_write_string(b, s->changes_url, strlen(s->changes_url));
	pith_buf_puts(b, ",\"cursor\":");
	json_write_string(b, fd->cursor, strlen(fd->cursor));
	pith_buf_printf(b, ",\"pages\":%llu,\"changes\":%llu,\"same_state\":%llu,"
			"\"bundles_fetched\":%llu,\"events_pages\":%llu,\"events_fetched\":%llu,"
			"\"diverged\":%llu,\"stuck_pages\":%llu,\"in_page\":%zu}",
			(unsigned long long)fd->pages, (unsigned long long)fd->changes,
			(unsigned long long)fd->same, (unsigned long long)fd->bundles,
			(unsigned long long)fd->events_pages, (unsigned long long)fd->events,
			(unsigned long long)fd->diverged, (unsigned long long)fd->stuck,
			fd->n - fd->done);
}

void follower_progress(follower_t *f, follower_progress_t *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < f->nsrcs; i++) {
		const src_t *s = &f->srcs[i];
		const feed_t *fd = s->feed;
		out->requests += s->requests;
		out->bytes += s->bytes;
		out->rejected += s->rejected_total;
		if (s->fails > out->fails)
			out->fails = s->fails;
		if (s->last_error_us > out->last_error_us) {
			out->last_error_us = s->last_error_us;
			snprintf(out->last_error, sizeof(out->last_error), "%s", s->last_error);
		}
		if (!fd)
			continue;
		out->feeds++;
		out->pages += fd->pages;
		out->empty_pages += fd->empty_pages;
		out->changes += fd->changes;
		out->same_state += fd->same;
		out->bundles += fd->bundles;
		out->events_pages += fd->events_pages;
		out->events += fd->events;
		out->diverged += fd->diverged;
	}
}
