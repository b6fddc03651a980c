/* Reconciliation's insides, shared by sync.c (sessions, the sets, the
 * backlog, bundles), sync_load.c (the sets' load at start),
 * sync_progress.c (a catch-up's progress, bulk mode), sync_status.c
 * (status) and sync_ctl.c (the control socket's `sync`) only. */
#ifndef PITH_NODE_SYNC_INT_H
#define PITH_NODE_SYNC_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "recon.h"
#include "resolve.h"
#include "idmap.h"
#include "sync.h"
#include "wake.h"

typedef struct sync_peer sync_peer_t;

#define SYNC_LOOKUPS_MAX 4          /* `sync NAME:PORT` requests waiting for a name */

/* A name being looked up for a `sync` request (serial 0: a free slot). */
typedef struct sync_lookup {
	sync_t *sy;
	uint64_t serial;
	resolve_req_t *req;
} sync_lookup_t;

/* What a session reconciles: the events (RECON) or each record's newest
 * bundle (RECON_BUNDLES). */
enum { SYNC_EVENTS = 0, SYNC_BUNDLES = 1 };

#define SYNC_FEED_LOW 8192          /* keep a peer's fetch queue topped up to this
				       (at most half of max_wanted) */
#define SYNC_PIPELINE_MAX 16384     /* ...while fewer than this are queued, in
				       flight and waiting for validation and
				       writing: fetched events beyond what the
				       validators keep up with only wait in memory
				       (about a second of work, 25 MB) */
#define SYNC_BUNDLE_Q_MAX 65536     /* bundle requests queued per peer */
#define SYNC_BUNDLE_REF_COST 17.0   /* a BUNDLE_GET ref in the peer's budget (peer.c) */
#define SYNC_PROGRESS_US 5000000    /* a progress line this often while syncing */
#define SYNC_RELOG_RETRY_S 10        /* a store that failed to take its log back tries again */
#define SYNC_QUIET_US 10000000      /* syncing ends after this long with nothing
				       stored, even with fetches still pending */
#define SYNC_CONNECT_US 30000000    /* `sync HOST:PORT`: the connection must be
				       ready within */
#define SYNC_PENDING_MAX 16         /* `sync` requests waiting for a connection */
#define SYNC_OFFER_HOLD 4096        /* bundle hashes waiting to be announced to a
				       peer above which our next bundle message
				       waits (a minute at an older peer's pace,
				       about a second at the bulk pace) */
#define SYNC_OFFER_LOOKUPS 1024     /* index lookups per offer pass (a tick) */
#define PITH_LEN (PITH_NUMBER_LEN + 1)
#define SYNC_DEFERRED_MAX 16        /* `sync` requests waiting for the set's load */

/* The sets' load at start (a thread of its own, sync_load.c). */
enum { SYNC_SET_LOADING = 0, SYNC_SET_READY = 1, SYNC_SET_FAILED = 2 };

/* An update of the sets that came while they were loading, replayed in
 * order once loaded. */
enum { SYNC_Q_EVENT = 0, SYNC_Q_BUNDLE_ADD = 1, SYNC_Q_BUNDLE_REMOVE = 2 };
typedef struct sync_queued {
	int op;
	int64_t us;
	uint8_t id[32];
} sync_queued_t;

/* A `sync PEER` request that came while the sets were loading. */
typedef struct sync_deferred {
	uint64_t serial;         /* 0: a free slot */
	char peer[96];
} sync_deferred_t;

/* One finished session, for status and the `sync` answer. */
typedef struct sync_result {
	uint64_t session;
	int kind;
	int initiator;
	int ok;
	char error[160];
	recon_stats_t st;
	int64_t started_us, ms;
	uint64_t peer_items, our_items;
} sync_result_t;

/* A peer's state roots (sync_root.c). */
typedef struct sync_root_peer {
	int have;                /* a verified document of the peer's */
	uint8_t root[32];        /* ... its root and count */
	uint64_t count;
	int64_t recv_us;         /* when it came */
	int streak;              /* sessions in a row that found nothing either way */
	int64_t streak_us;       /* the first one's end */
	uint64_t streak_seq;     /* our change log's end then */
	int confirms;            /* confirming sessions asked for in this streak */
	int settled;             /* a verdict in this streak */
	int cand;                /* a difference seen once in this streak: the pair */
	uint8_t cand_ours[32], cand_theirs[32];
	int state;               /* SYNC_ROOT_UNKNOWN, _AGREES, _DISAGREES */
	int judged;              /* a verdict on the pair below */
	uint8_t ours[32], theirs[32];
} sync_root_peer_t;
enum { SYNC_ROOT_UNKNOWN = 0, SYNC_ROOT_AGREES = 1, SYNC_ROOT_DISAGREES = 2 };

struct sync_peer {
	sync_t *sy;
	sync_root_peer_t root;   /* sync_root.c */
	recon_session_t *s;      /* the running session, or NULL */
	uint64_t session;        /* its number */
	int kind;                /* SYNC_EVENTS or SYNC_BUNDLES */
	int bundles_next;        /* a bundle session follows the event session */
	int superseded;          /* ending ours for the peer's: start nothing next */
	int initiator;           /* we started it */
	int waiting;             /* our message is out: the next one is the peer's */
	pith_buf_t held;         /* our next message, held while the backlog is long */
	uint64_t next_own;       /* our next session number */
	uint64_t peer_last;      /* the highest session number the peer started */
	int64_t started_us, last_us, next_round_us;
	uint64_t peer_items;     /* the peer's item count, as it last said */
	pith_buf_t backlog;      /* ids to fetch from this peer, 32 bytes each */
	size_t backlog_head;
	pith_buf_t bundles;      /* pith numbers (PITH_LEN bytes each) to ask for */
	size_t bundles_head;
	pith_buf_t offers;       /* hashes of our bundles the peer lacks, to announce */
	size_t offers_head;
	double bundle_tokens;
	int64_t bundle_us;
	uint64_t ctl;            /* `sync` request answered when this session ends */
	uint64_t ctl_next;       /* `sync` request for a session after this one */
	uint64_t sessions, failures;
	int turned_away;         /* we answered a session of the peer's "busy" while
				    loading: we start one once loaded */
	double credit;           /* bytes of answers it may still have (sync.c, "answer credit") */
	int64_t credit_us;       /* when credit was last refilled */
	int credit_held;         /* held: the answer is over the credit */
	sync_result_t last;      /* the last event session */
	sync_result_t blast;     /* the last bundle session */
};

/* What a peer's address had left of its answer credit when its last
 * connection ended (len 0: a free slot), so that reconnecting does not
 * fill it again (sync.c, "answer credit"). */
#define SYNC_CREDIT_MEM 1024
typedef struct sync_credit_mem {
	uint8_t ip[16];
	uint8_t len;
	double credit;
	int64_t us;
} sync_credit_mem_t;

typedef struct pending_ctl {
	uint64_t serial;
	char addr[64];           /* ip:port the peer must have */
	int64_t deadline_us;
} pending_ctl_t;

struct sync {
	sync_deps_t d;           /* what it uses (sync.h) */
	wire_limits_t wlim;
	recon_set_t *set;
	recon_set_t *bset;       /* each record's newest bundle (built_at, sha) */
	int bundles;             /* bundle reconciliation on (WIRE_FEAT_BUNDLE_SYNC) */
	size_t bskipped;         /* bundles outside the reconciled span at load */
	int badd_failed;         /* an update of bset failed (logged once) */
	uint64_t bundle_sessions, bundles_offered, offers_sent;
	recon_config_t rcfg;
	/* the highest RECON message version spoken: 2, or 1 as nodes before
	 * version 2 (PITH_TEST_RECON_VERSION=1, tests only) */
	uint32_t recon_version;
	int enabled;
	/* the load (the loop thread reads l* only after joining the loader) */
	int set_state;           /* SYNC_SET_* */
	int loader_running;      /* loader started and not joined yet */
	pthread_t loader;
	atomic_int load_stop;    /* sync_free: give the load up */
	loop_wake_t *loaded;     /* the loader fires it when done */
	int64_t load_delay_ms;   /* PITH_TEST_RECON_LOAD_DELAY_MS (tests only) */
	int64_t load_start_us, load_ms, bload_ms;
	recon_set_t *lset, *lbset;
	size_t lskipped, lbskipped;
	int lrc;
	pith_err_t lerr;         /* why the load failed */
	pith_buf_t queue;        /* sync_queued_t: updates while loading */
	int queue_failed;        /* an update was lost (out of memory, logged) */
	sync_deferred_t deferred[SYNC_DEFERRED_MAX];
	size_t skipped;          /* events outside the reconciled span at load */
	int add_failed;          /* an add to the set failed (logged once) */
	/* "surely not stored": every id in the set, while have_ok (the set
	 * loaded, none skipped, no add lost); sync_id_is_absent */
	idbloom_t have;
	int have_ok;
	/* totals */
	uint64_t started, done, failed;
	uint64_t ids_needed, ids_offered, bytes_sent, bytes_recv;
	sync_root_counts_t roots; /* sync_root.c */
	uint64_t holds;          /* messages held back while a backlog was long */
	uint64_t credit_holds;   /* answers held back over a peer's answer credit */
	uint64_t upload_holds;   /* ...over the budget of all peers (sync_upload_bytes) */
	uint64_t offer_holds;    /* bundle offers stopped over either */
	uint64_t upload_sent;    /* bytes charged to peers' credit and the budget */
	double upload;           /* the budget of all peers: bytes left (sync.c, "answer credit") */
	int64_t upload_us;       /* when it was last refilled */
	sync_credit_mem_t cmem[SYNC_CREDIT_MEM]; /* by address, the oldest overwritten */
	size_t cmem_next;
	int starved;             /* a feed stopped at SYNC_PIPELINE_MAX */
	/* progress of a catch-up */
	int syncing;
	int bulk;                /* the store is in bulk mode for this catch-up */
	int unlogged;            /*   and commits without the log (sync_bulk_unlogged) */
	int relog_running;       /* relog (the flush back to the log) not joined yet */
	int relog_bulk;          /*   it also ends bulk mode's options */
	int closing;             /* sync_free: the side families' move is left
				  * to the store's next open */
	atomic_int relog_done;   /*   it has returned */
	int64_t relog_retry_us;  /* a failed relog is tried again then */
	pthread_t relog;
	int64_t sync_start_us, last_log_us, last_store_us;
	uint64_t stored_at_start, stored_at_log;
	double rate;             /* events stored per second, last window */
	pending_ctl_t pend[SYNC_PENDING_MAX];
	sync_lookup_t lookups[SYNC_LOOKUPS_MAX];
	size_t npend;
};

/* Ids queued to fetch from a peer, bundle hashes queued to announce. */
static inline size_t sync_backlog_len(const sync_peer_t *sp)
{
	return (sp->backlog.len - sp->backlog_head) / 32;
}

static inline size_t sync_offers_len(const sync_peer_t *sp)
{
	return (sp->offers.len - sp->offers_head) / 32;
}

/* sync.c */
void sync_session_start(peer_t *p, int kind);
/* Builds the "surely not stored" filter again from the set, sized for
 * twice want ids. */
void sync_have_rebuild(sync_t *sy, size_t want);
/* A peer's answer credit at first and at most: one listing of our sets,
 * the bundles' announcements, 1 MiB ("answer credit"). */
double sync_credit_cap(const sync_t *sy);
/* Answers control request serial (if any) with b, or with an error. */
void sync_answer(sync_t *sy, uint64_t serial, const pith_buf_t *b);
void sync_answer_fail(sync_t *sy, uint64_t serial, const char *what);

/* sync_load.c */
/* Starts the loader (sync_new): 0, or an error with the reason in err. */
int sync_load_start(sync_t *sy, pith_err_t *err);
/* Gives a running load up and joins it (sync_free). */
void sync_load_stop(sync_t *sy);
/* Queues an update of the sets that came while they were loading
 * (op SYNC_Q_*): 0, or PITH_ENOMEM (and queue_failed set). */
int sync_queue_update(sync_t *sy, int op, int64_t us, const uint8_t id[static 32]);

/* sync_progress.c */
/* A session with p found need ids missing: a catch-up begins, unless one
 * runs (and a large one puts the store in bulk mode). */
void sync_progress_begin(sync_t *sy, const peer_t *p, size_t need);
/* On the tick: the progress line, the catch-up's end, the relog's join. */
void sync_progress_tick(sync_t *sy, int64_t now);
/* What is left to fetch, as well as this node can tell; *sessions (if
 * not NULL): the sessions running. */
uint64_t sync_progress_remaining(sync_t *sy, size_t *sessions);
/* Ends bulk mode, if on (the log's absence too, on the relog thread). */
void sync_bulk_end(sync_t *sy);
/* Joins the relog thread, if it runs. */
void sync_relog_join(sync_t *sy);

/* sync_root.c */
/* A session with p ended (r its result): the streak of sessions that
 * found nothing, the signing on demand, the comparison. After r's
 * next_round_us is set. */
void sync_root_session_end(peer_t *p, const sync_result_t *r);

/* sync_status.c */
/* One finished session with p, as a JSON object, appended to b. */
void sync_result_json(const peer_t *p, const sync_result_t *r, pith_buf_t *b);

/* sync_ctl.c */
/* Attaches a `sync` request waiting for p's connection, if any. */
void sync_pending_attach(peer_t *p);
/* Forgets the names being looked up (their requests are not answered). */
void sync_lookups_cancel(sync_t *sy);
/* Fails the `sync` requests whose connection did not come in time. */
void sync_pending_tick(sync_t *sy, int64_t now);

#endif
