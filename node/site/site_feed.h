/* pithd keeping a static site current (docs/site.md, "Kept by pithd"):
 * site_export (site.h) run on a thread of its own whenever the store's
 * change log moved, at most once per interval. Never on the event loop
 * nor on the ingest writer: they only kick it (site_feed_kick, a mutex
 * and a condition variable).
 *
 * The first run, at start, renders whatever the tree's cursor lacks. A
 * failed run is logged once per distinct error and retried on the next
 * trigger (a commit, or a minute later); the node keeps serving. No
 * libevent: the feed knows the store and the site exporter only. */
#ifndef PITH_NODE_SITE_FEED_H
#define PITH_NODE_SITE_FEED_H

#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "store.h"

typedef struct site_feed site_feed_t;

typedef struct site_feed_opts {
	const char *dir;      /* the tree (site_opts_t.dir) */
	const char *base_url; /* "" or NULL: the tree's last one */
	const char *name;     /* this mirror's name: pages, pith-mirrors.json */
	const char *operator_name, *contact; /* as site_opts_t's (NULL: none) */
	const char *search_url; /* site_opts_t.search_url (NULL: no search box) */
	int interval_ms;      /* at most one run per interval */
	int nice;             /* nice steps below the caller for the thread */
} site_feed_opts_t;

/* What the feed has done (site_feed_stats_get). */
typedef struct site_feed_stats {
	uint64_t runs, failures;          /* runs finished, and of those failed */
	uint64_t records_total;           /* records rendered, all runs */
	uint64_t written_total, deleted_total, bytes_total; /* files, all runs */
	uint64_t aliases_total;           /* runs that rewrote the alias map */
	uint64_t last_records, last_written, last_unchanged, last_deleted;
	int64_t last_ms;                  /* the last finished run's duration */
	int64_t last_end_us;              /* when it ended (node_now_us), 0: none yet */
	uint64_t cursor;                  /* change log sequence the tree is current to */
	int cursor_known;                 /* a run succeeded since start */
	int running;
	char last_error[256];             /* "" after a run that succeeded */
} site_feed_stats_t;

/* Starts the feed's thread ("pith-site") over st (borrowed: it must
 * outlive the feed); the first run starts at once. Strings in o are
 * copied. 0, or PITH_EINVAL / PITH_EIO / PITH_ENOMEM with err set. */
int site_feed_start(store_t *st, const site_feed_opts_t *o, site_feed_t **out, pith_err_t *err);

/* Sets who the mirror is (site_feed_opts_t.name, operator_name, contact)
 * for the runs that start after it (a reload), and starts one once the
 * interval allows: a change of what the header shows renders every page
 * again (site_opts_t.search_url). The strings are copied, cut to fit.
 * Any thread; NULL-tolerant. */
void site_feed_set_identity(site_feed_t *f, const char *name, const char *operator_name,
			    const char *contact);

/* A commit happened: a run starts once the interval allows. Any thread;
 * cheap; NULL-tolerant. */
void site_feed_kick(site_feed_t *f);

/* A copy of the counters. Any thread. */
void site_feed_stats_get(site_feed_t *f, site_feed_stats_t *out);

/* Appends the status object's members (no braces) to out: dir, runs, the
 * last run, cursor, last error. */
void site_feed_status_json(site_feed_t *f, pith_buf_t *out);

/* Stops the thread: a run in progress stops after the record it renders
 * (its cursor stays), the thread is joined, everything freed.
 * NULL-tolerant. */
void site_feed_free_(site_feed_t *f);
#define site_feed_free(x) do { site_feed_free_(x); (x) = NULL; } while (0)

#endif
