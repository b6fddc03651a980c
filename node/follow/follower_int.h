/* The follower's insides, shared by follower.c (the follow list,
 * read-through, the manifest) and follower_feed.c (following a pithd's
 * change feed) only. */
#ifndef PITH_NODE_FOLLOWER_INT_H
#define PITH_NODE_FOLLOWER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "follow_etags.h"
#include "follower.h"
#include "hclient.h"
#include "idmap.h"
#include "ids.h"
#include "stats.h"
#include "upstream.h"

struct event;
struct feed;

#define FOLLOW_FILE "follow"
#define ETAG_FILE "upstream-etags"
#define SMALL_MAX (1u << 20)      /* a manifest or resolve answer */
#define ETAG_MAX 128
#define URL_CAP (PITH_URL_MAX + 256)
#define WAITERS_MAX 4096          /* read-through requests waiting, all records */
#define NEG_MAX 65536             /* ids in the negative cache */
#define LOGGED_MAX 4096           /* (cause, URL) pairs logged once */
#define REASONS_MAX 24
#define TICK_MS 100
#define ETAG_SAVE_US (60 * INT64_C(1000000))
#define BACKOFF_MAX_S 300
#define RETRY_AFTER_MAX_S 3600
#define NOT_IN_HEAP SIZE_MAX

typedef enum step { ST_IDLE = 0, ST_RESOLVE, ST_BUNDLE, ST_INGEST, ST_WAIT } step_t;
#define NO_SLOT (-1)

/* Why a request failed, for counters and logs. */
enum cause {
	C_HTTP_5XX = 0, C_HTTP_429, C_HTTP_4XX, C_REDIRECT, C_TIMEOUT, C_DNS, C_CONNECT, C_TLS,
	C_TOO_BIG, C_BAD_ANSWER, C_NETWORK, NCAUSES
};
extern const char *const follower_cause_names[NCAUSES];

typedef struct waiter {
	uint64_t token;
	struct waiter *next;
} waiter_t;

/* What f->active maps a serial to: a record being fetched, or an entry of
 * a change feed page (follower_feed.c). The kind comes first in both. */
enum { ACT_REC = 1, ACT_FEED_ITEM };

typedef struct rec {
	int act;                        /* ACT_REC */
	struct follower *f;
	uint8_t key[32];
	char body[PITH_BODY_LEN + 1];   /* "" until known */
	char pith[PITH_NUMBER_LEN + 1]; /* the full number, "" until known */
	char *alias;                    /* the id as given, while unresolved */
	char *new_etag;                 /* of the 200 in the pipeline (kept: f->etags) */
	step_t step;
	uint8_t followed;
	uint8_t src, cand;              /* upstream and bundle layout being tried */
	uint8_t found_any;              /* some upstream answered other than 404 */
	uint8_t retry;                  /* some upstream failed or was resting (issue 53, 3) */
	uint8_t busy;                   /* an upstream was passed over with its slots taken */
	int slot;                       /* the upstream whose fetch slot r holds, or NO_SLOT */
	struct rec *wnext;              /* ST_WAIT: the next in that upstream's wait list */
	int64_t due_us;
	size_t heap;
	uint64_t serial;                /* while fetching: in f->active */
	uint64_t req;                   /* hclient request in flight */
	char *url;                      /* while fetching: the request's (URL_CAP bytes) */
	waiter_t *waiters;
} rec_t;

typedef struct reason_count {
	const char *reason; /* static: the pipeline's names */
	uint64_t n;
} reason_count_t;

typedef struct src {
	struct follower *f;
	char base[PITH_URL_MAX];         /* no trailing '/' */
	char pattern[PITH_URL_MAX];      /* the manifest's bundle_pattern, or "" */
	int manifest;                    /* 0 not asked, 1 asking, 2 answered or failed */
	int manifest_seen;               /* asked once and answered (or failed) */
	int has_manifest;
	uint64_t manifest_req;
	int64_t manifest_next_us;
	int64_t blocked_until_us;
	unsigned fails;                  /* in a row */
	uint64_t requests, not_modified, bytes, bundles, stored, unchanged, not_found;
	uint64_t failed[NCAUSES];
	reason_count_t rejected[REASONS_MAX];
	uint64_t rejected_total;
	char last_error[320];
	int64_t last_error_us;
	char changes_url[PITH_URL_MAX];  /* the manifest's feed of this upstream, or "" */
	struct feed *feed;               /* following it (follower_feed.c), or NULL */
	size_t inflight;                 /* records holding one of its fetch slots */
	struct rec *wait_head, *wait_tail; /* records waiting for one (ST_WAIT), FIFO */
	size_t nwait;
	uint64_t busy_skips;             /* records asked of a later upstream: its slots were taken */
} src_t;

struct follower {
	follower_deps_t d;
	follower_opts_t o;
	char data_dir[512];
	hc_t *hc;
	src_t *srcs;
	size_t nsrcs;
	idmap_t *recs;      /* key -> rec_t */
	idmap_t *active;    /* serial -> rec_t or feed item (ACT_*), while fetching */
	idmap_t *neg;       /* id key -> expiry (µs) as a pointer-sized integer */
	idmap_t *logged;    /* (cause, URL) key -> 1 */
	rec_t **heap;
	size_t nheap, capheap;
	size_t nactive, nwaiters, nfollowed;
	size_t share;       /* fetch slots one upstream may hold (issue 53, attack 4) */
	char **origins;     /* opts.origins, copied (o.origins points here) */
	uint64_t next_serial;
	struct event *tick;
	follow_etags_t *etags; /* body -> the ETag of the last 200 kept, and its URL */
	int etags_dirty;
	int64_t etags_saved_us;
	int cursors_dirty;     /* follower_feed.c: a cursor moved since the file was written */
	int64_t cursors_saved_us;
	uint64_t answered[5];
};

/* ---- follower.c, for follower_feed.c and follower_upstream.c ---- */
/* Counts a failure (cause >= 0; -1: a refused bundle) at url as the
 * upstream's last error, logged once per cause and URL. */
void follower_src_error(follower_t *f, src_t *s, int cause, const char *url, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* The upstream rests a while (Retry-After when >= 0). */
void follower_src_backoff(src_t *s, int64_t retry_after_s);
/* The cause of a failed answer. */
int follower_classify(const hc_result_t *res);
/* A hint for a redirect refused because its origin is not listed (""
 * otherwise, and for one to http://, which listing would not allow from
 * https). */
const char *follower_origin_hint(const hc_result_t *res);
/* Whether res is the upstream's own trouble (backs it off). */
int follower_cause_backs_off(int cause);
void follower_count_rejected(src_t *s, const char *reason);
/* Adds obj to f->active under a new serial (returned; 0 when memory is short). */
uint64_t follower_active_add(follower_t *f, void *obj);
void follower_active_del(follower_t *f, uint64_t serial);
/* Starts what is due and fits (records waiting for a fetch slot). */
void follower_pump(follower_t *f);

/* ---- follower_upstream.c ---- */
/* Asks upstream i for its manifest (pith-mirrors.json). */
void follower_manifest_ask(follower_t *f, size_t i);

/* ---- follower_feed.c ---- */
/* s's manifest named a change feed: follow it (cursor from DATA). */
void follower_feed_start(follower_t *f, src_t *s);
/* Polls feeds that are due. */
void follower_feed_tick(follower_t *f);
/* A job of a feed item came back (obj from f->active). */
void follower_feed_job_done(follower_t *f, void *obj, const ingest_job_t *job);
/* Appends ,"feed":{...} for s (nothing without a feed). */
void follower_feed_status_json(const src_t *s, pith_buf_t *b);
/* Writes the cursors file if a cursor moved since (at shutdown). */
void follower_feed_flush(follower_t *f);
/* Cancels s's feed and frees it. */
void follower_feed_free(follower_t *f, src_t *s);

#endif
