/* Following HTTP(S) upstreams (issue 14, item 2): the registry and any
 * other mirror, which speak only HTTP. docs/upstream.md is the design.
 *
 * The follower keeps a set of records: the follow list (the --follow file,
 * `pithctl follow`, and every record asked for by read-through), each
 * checked once per refresh interval at a slot of its own (so checks are
 * spread over the interval, never a burst) with a conditional request.
 * A record's bundle comes from the first upstream, in configured order,
 * that is not backing off and has it; it is verified by the node's ingest
 * pipeline exactly as a bundle from a peer, and what is stored is
 * announced to peers like anything else.
 *
 * Read-through: follower_want() asks for a record the node lacks; every
 * asker of the same record shares one fetch, fetches are bounded, and ids
 * no upstream knows are remembered for a while (the negative cache).
 *
 * Failures are counted by cause per upstream and logged once per cause
 * and URL; 5xx, 429 and network failures back an upstream off (doubling,
 * jittered, Retry-After honoured). Nothing an upstream sends is trusted.
 *
 * Runs on the node's loop thread; HTTP through hclient (libcurl on the
 * same loop). */
#ifndef PITH_NODE_FOLLOWER_H
#define PITH_NODE_FOLLOWER_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "ingest.h"
#include "store.h"

struct event_base;
struct metrics_out;

typedef struct follower follower_t;

typedef enum up_answer {
	UP_FOUND = 1,     /* the store holds the record now (stored or unchanged) */
	UP_NOT_FOUND,     /* no upstream knows it */
	UP_FAILED,        /* upstreams refused what they sent */
	UP_RETRY,         /* an upstream failed or rests: try again later, not "not found" */
} up_answer_t;

/* A read-through answer: token is what follower_want was given; pith is
 * the record's full number when known ("" otherwise). */
typedef void (*up_want_fn)(void *arg, uint64_t token, up_answer_t answer, const char *pith);

typedef struct follower_opts {
	const char *const *urls;  /* base URLs, in order of preference */
	size_t n_urls;
	const char *ca_file;      /* NULL or "": the system CAs */
	const char *follow_file;  /* NULL or "": none */
	const char *data_dir;     /* keeps DATA/follow (run-time additions) and
				   * DATA/upstream-etags */
	int64_t refresh_s;        /* re-check each followed record this often */
	size_t max_inflight;      /* records being fetched at once */
	int64_t negative_ttl_s;   /* how long "no upstream knows ID" is believed */
	size_t max_body;          /* a bundle's body, at most */
	int64_t stall_s;          /* under 1 KiB/s this long: dropped (0: 15) */
	int64_t deadline_s;       /* a transfer not over in this long: dropped, as one
				   * whose rate cannot end it by then (0: 60) */
	size_t src_inflight;      /* records one upstream may be fetching at once, and
				   * its feed's (0: half of max_inflight with two
				   * upstreams or more, all of it with one) */
	const char *const *origins; /* origins (scheme://host[:port]) besides each
				   * upstream's own that manifests and redirects may
				   * name; https to http never */
	size_t n_origins;
	size_t feed_page;         /* changes asked for per feed page (0: 1000; at most
				   * 10,000): the cursor is saved after each page */
	int feed_default;         /* an upstream whose manifest names no change feed, or
				   * that has no manifest, is followed at BASE/api/changes
				   * (pithctl replicate: it checked that one answers) */
	uint64_t first_serial;    /* its jobs' serials (job->follow) start above
				   * this: a reload's follower above those of
				   * the one it replaces (follower_last_serial),
				   * whose jobs may still come back */
} follower_opts_t;

typedef struct follower_deps {
	struct event_base *base;
	store_t *store;
	ingest_t *ingest;
	up_want_fn want_done;     /* read-through answers */
	void *want_arg;
} follower_deps_t;

/* Starts following: reads the follow files (a bad line fails start, with
 * FILE:LINE), queues every followed record, asks each upstream for its
 * manifest. */
int follower_new(const follower_deps_t *d, const follower_opts_t *o, follower_t **out,
		  pith_err_t *err);
/* Cancels every request, saves the ETags. Jobs still in the pipeline must
 * have come back (ingest_free first), or go to a follower that does not
 * know their serials (a reload's: opts.first_serial). NULL-tolerant. */
void follower_free_(follower_t *u);
#define follower_free(x) do { follower_free_(x); (x) = NULL; } while (0)
/* The highest serial f gave a job so far. */
uint64_t follower_last_serial(const follower_t *f);

/* An ingest job came back: 1 if it was one of the follower's (the caller
 * still frees it), 0 if not. */
int follower_job_done(follower_t *u, const ingest_job_t *job);

/* Adds text (any id form pith_id_parse takes) to the follow list, kept in
 * DATA/follow, and checks it now. 0, 1 if already followed, or an error
 * with err saying why. */
int follower_follow(follower_t *u, const char *text, pith_err_t *err);

/* Read-through: fetches the record id names (as a client wrote it) and
 * answers through want_done(token) once it is stored, or known missing or
 * failed; the record is followed from then on. Returns 0 when asked (the
 * answer comes later, never inside this call), PITH_ENOTFOUND when the
 * negative cache says no upstream knows it, PITH_EINVAL for a malformed
 * id, PITH_ETOOBIG when too many requests are waiting. */
int follower_want(follower_t *u, const char *id, uint64_t token);

/* When a read-through answered UP_RETRY may be asked again: the seconds
 * until the first upstream resting now (by its Retry-After or backoff)
 * is asked again, at least 1; -1 when none rests. */
int64_t follower_retry_after_s(follower_t *u);

/* How the change feeds are going, summed over the upstreams that have
 * one: what `pithctl replicate` shows and waits for. */
typedef struct follower_progress {
	int feeds;                /* upstreams whose change feed is followed */
	uint64_t pages;           /* feed pages read */
	uint64_t empty_pages;     /* of them, pages that came back empty: caught up */
	uint64_t changes, same_state, bundles, events_pages, events, diverged;
	uint64_t requests, bytes; /* every request of the follower, its bytes */
	uint64_t rejected;        /* bundles and events the pipeline refused */
	unsigned fails;           /* the most failures in a row of one upstream */
	char last_error[320];     /* the latest upstream error, "" if none */
	int64_t last_error_us;    /* when (node_now_us), 0 if none */
} follower_progress_t;

void follower_progress(follower_t *u, follower_progress_t *out);

/* Appends the "upstreams" status object's members (JSON, no braces). */
void follower_status_json(follower_t *u, pith_buf_t *out);
/* Writes the pith_upstream_* metric families. */
void follower_metrics(follower_t *u, struct metrics_out *o);

#endif
