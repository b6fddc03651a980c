/* The site feed's thread (site_feed.h): wait for a kick or the interval,
 * run site_export when the change log moved, keep what it did. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "site_feed.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "render.h"
#include "json.h"
#include "log.h"
#include "prio.h"
#include "site.h"
#include "stats.h"

#define SITE_RETRY_MS 60000 /* a failed run is retried this often without commits */

struct site_feed {
	store_t *st;
	char dir[1024], base_url[512], search_url[512];
	char name[128], operator_name[128], contact[256]; /* under mu (a reload sets them) */
	int interval_ms, nice;
	pthread_t thread;
	pthread_mutex_t mu; /* guards everything below */
	pthread_cond_t cv;
	int stop, kicked;
	int renamed;        /* the names changed: run even if the log did not move */
	atomic_int cancel;  /* stop the run in progress (site_opts_t.cancel) */
	site_feed_stats_t s;
};

/* Waits on the feed's condition variable for at most ms (mu held). */
static void wait_ms(site_feed_t *f, int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&f->cv, &f->mu, &ts);
}

/* One run; the counters and the error after it (mu not held). */
static void run_once(site_feed_t *f)
{
	char name[sizeof(f->name)], op[sizeof(f->operator_name)], contact[sizeof(f->contact)];
	pthread_mutex_lock(&f->mu);
	memcpy(name, f->name, sizeof(name));
	memcpy(op, f->operator_name, sizeof(op));
	memcpy(contact, f->contact, sizeof(contact));
	pthread_mutex_unlock(&f->mu);
	site_opts_t o = {.dir = f->dir, .base_url = f->base_url[0] ? f->base_url : NULL,
			 .name = name, .operator_name = op, .contact = contact,
			 .search_url = f->search_url, .cancel = &f->cancel};
	site_stats_t st;
	pith_err_t err = {0};
	int64_t t0 = node_now_us();
	int rc = site_export(f->st, &o, &st, &err);
	int64_t t1 = node_now_us();
	pthread_mutex_lock(&f->mu);
	int cancelled = f->stop;
	site_feed_stats_t *s = &f->s;
	s->runs++;
	s->records_total += st.records + st.removed;
	s->written_total += st.written;
	s->deleted_total += st.deleted;
	s->bytes_total += st.bytes;
	s->aliases_total += !rc && st.aliases_changed;
	s->last_records = st.records + st.removed;
	s->last_written = st.written;
	s->last_unchanged = st.unchanged;
	s->last_deleted = st.deleted;
	s->last_ms = (t1 - t0) / 1000;
	s->last_end_us = t1;
	s->running = 0;
	int again = 0;
	if (rc) {
		s->failures++;
		/* once per distinct error: a full disk fails every run alike */
		again = !strcmp(s->last_error, err.msg);
		snprintf(s->last_error, sizeof(s->last_error), "%s", err.msg);
	} else {
		s->cursor = st.to;
		s->cursor_known = 1;
		s->last_error[0] = 0;
	}
	pthread_mutex_unlock(&f->mu);
	if (rc && cancelled)
		log_info("site: the run in progress stopped (pithd stopping); the next start redoes it");
	else if (rc && !again)
		log_warn("%s (retried at the next commit)", err.msg);
	else if (!rc && (st.records + st.removed >= 1000 || t1 - t0 >= 10000000))
		log_info("site: %llu records rendered into %s in %.1f s, %llu files written",
			 (unsigned long long)(st.records + st.removed), f->dir,
			 (double)(t1 - t0) / 1e6, (unsigned long long)st.written);
}

static void *feed_main(void *arg)
{
	site_feed_t *f = arg;
	pthread_setname_np(pthread_self(), "pith-site");
	if (f->nice && prio_lower_thread(0, f->nice))
		log_warn("site: cannot lower its thread's priority");
	uint64_t tried = 0; /* the change log's sequence at the last run's start */
	int first = 1;
	int64_t last_start = 0;
	pthread_mutex_lock(&f->mu);
	while (!f->stop) {
		if (!first) {
			int failed = f->s.last_error[0] != 0;
			if (!f->kicked)
				wait_ms(f, failed ? SITE_RETRY_MS : f->interval_ms);
			/* debounce: one run per interval, however many commits */
			int64_t since = (node_now_us() - last_start) / 1000;
			while (!f->stop && since < f->interval_ms) {
				wait_ms(f, f->interval_ms - since);
				since = (node_now_us() - last_start) / 1000;
			}
			if (f->stop)
				break;
			int kicked = f->kicked, renamed = f->renamed;
			f->kicked = f->renamed = 0;
			uint64_t now_seq = store_changes_last(f->st);
			/* a run only when the change log moved since the last one
			 * (a failed one also on a kick, or after SITE_RETRY_MS), or
			 * the pages' header changed */
			if (now_seq == tried && !renamed &&
			    !(failed && (kicked || since >= SITE_RETRY_MS)))
				continue;
		}
		first = 0;
		f->kicked = f->renamed = 0;
		f->s.running = 1;
		pthread_mutex_unlock(&f->mu);
		tried = store_changes_last(f->st);
		last_start = node_now_us();
		run_once(f);
		pthread_mutex_lock(&f->mu);
		/* the export reads the log again and may have gone past tried:
		 * what a commit between the two added is already in the tree,
		 * so it must not start another (empty) run */
		if (!f->s.last_error[0] && f->s.cursor_known && f->s.cursor > tried)
			tried = f->s.cursor;
	}
	pthread_mutex_unlock(&f->mu);
	render_gzip_thread_end(); /* the exporter's compressor lives as long as its thread */
	return NULL;
}

int site_feed_start(store_t *st, const site_feed_opts_t *o, site_feed_t **out, pith_err_t *err)
{
	*out = NULL;
	if (!o->dir || !*o->dir || strlen(o->dir) >= sizeof(((site_feed_t *)0)->dir))
		return pith_err_set(err, PITH_EINVAL, "site_dir: empty or longer than 1023 bytes");
	if (o->base_url && strlen(o->base_url) >= sizeof(((site_feed_t *)0)->base_url))
		return pith_err_set(err, PITH_EINVAL, "site_base_url: longer than 511 bytes");
	site_feed_t *f = calloc(1, sizeof(*f));
	if (!f)
		return pith_err_set(err, PITH_ENOMEM, "site: out of memory");
	f->st = st;
	snprintf(f->dir, sizeof(f->dir), "%s", o->dir);
	snprintf(f->base_url, sizeof(f->base_url), "%s", o->base_url ? o->base_url : "");
	if (o->search_url && strlen(o->search_url) >= sizeof(f->search_url)) {
		free(f);
		return pith_err_set(err, PITH_EINVAL, "site_search_url: longer than 511 bytes");
	}
	snprintf(f->search_url, sizeof(f->search_url), "%s", o->search_url ? o->search_url : "");
	f->interval_ms = o->interval_ms > 0 ? o->interval_ms : 1000;
	f->nice = o->nice;
	atomic_init(&f->cancel, 0);
	pthread_mutex_init(&f->mu, NULL);
	site_feed_set_identity(f, o->name, o->operator_name, o->contact);
	pthread_cond_init(&f->cv, NULL);
	if (pthread_create(&f->thread, NULL, feed_main, f)) {
		pthread_mutex_destroy(&f->mu);
		pthread_cond_destroy(&f->cv);
		free(f);
		return pith_err_set(err, PITH_EIO, "site: cannot start its thread");
	}
	*out = f;
	return 0;
}

void site_feed_set_identity(site_feed_t *f, const char *name, const char *operator_name,
			    const char *contact)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	render_text_copy(f->name, sizeof(f->name), name && *name ? name : "pith-mirror");
	render_text_copy(f->operator_name, sizeof(f->operator_name), operator_name);
	render_text_copy(f->contact, sizeof(f->contact), contact);
	f->renamed = f->kicked = 1;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

void site_feed_kick(site_feed_t *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->kicked = 1;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

void site_feed_stats_get(site_feed_t *f, site_feed_stats_t *out)
{
	pthread_mutex_lock(&f->mu);
	*out = f->s;
	pthread_mutex_unlock(&f->mu);
}

void site_feed_status_json(site_feed_t *f, pith_buf_t *b)
{
	site_feed_stats_t s;
	site_feed_stats_get(f, &s);
	pith_buf_puts(b, "\"dir\":");
	json_write_string(b, f->dir, strlen(f->dir));
	pith_buf_printf(b, ",\"runs\":%llu,\"failures\":%llu,\"running\":%s,",
			(unsigned long long)s.runs, (unsigned long long)s.failures,
			s.running ? "true" : "false");
	if (s.last_end_us)
		pith_buf_printf(b, "\"last_run\":{\"records\":%llu,\"files_written\":%llu,"
				"\"files_unchanged\":%llu,\"files_deleted\":%llu,\"duration_ms\":%lld,"
				"\"age_ms\":%lld},",
				(unsigned long long)s.last_records, (unsigned long long)s.last_written,
				(unsigned long long)s.last_unchanged, (unsigned long long)s.last_deleted,
				(long long)s.last_ms, (long long)((node_now_us() - s.last_end_us) / 1000));
	else
		pith_buf_puts(b, "\"last_run\":null,");
	uint64_t last = store_changes_last(f->st);
	if (s.cursor_known)
		pith_buf_printf(b, "\"cursor\":%llu,\"lag_changes\":%llu,", (unsigned long long)s.cursor,
				(unsigned long long)(last > s.cursor ? last - s.cursor : 0));
	else
		pith_buf_puts(b, "\"cursor\":null,\"lag_changes\":null,");
	pith_buf_puts(b, "\"last_error\":");
	json_write_string(b, s.last_error, strlen(s.last_error));
}

void site_feed_free_(site_feed_t *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stop = 1;
	atomic_store(&f->cancel, 1);
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f);
}
