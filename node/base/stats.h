/* What every floor of node/ shares without calling anything: the clock,
 * the node's counters (shown by `status` and /metrics), and the
 * misbehaviour points. A module is handed a node_stats_t * when it is made
 * and counts into it; only the loop thread writes it. */
#ifndef PITH_NODE_STATS_H
#define PITH_NODE_STATS_H

#include <stdint.h>
#include <sys/time.h>

#include "event.h"
#include "wire.h"

/* Wall-clock microseconds (the node's only clock). */
static inline int64_t node_now_us(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* ---- misbehaviour points (docs/pithd.md, "Misbehaviour") -------------------- */
#define SCORE_MALFORMED 100   /* a frame that does not decode, oversized frames */
#define SCORE_PROTOCOL 100    /* a message out of place (before the handshake...) */
#define SCORE_BAD_AUTH 100    /* a handshake signature that does not verify */
#define SCORE_INVALID 50      /* an event or bundle that fails validation */
#define SCORE_UNREQUESTED 25  /* data we did not ask for */
#define SCORE_FLOOD 20        /* per second spent over the message budget */
#define SCORE_TRUNCATED 10    /* closed inside a frame */
#define SCORE_UNSERVED 5      /* GETs it let time out (once per timeout scan) */

/* Counters shown by `status`. */
typedef struct node_stats {
	uint64_t events_stored, events_duplicate, events_resigned;
	uint64_t events_invalid, bundles_stored, bundles_older, bundles_invalid;
	uint64_t rejected[PITH_CHECK_NCHECKS + 4];
	uint64_t unrequested, fetch_timeouts, pending_dropped, notfound_in;
	uint64_t refused_skipped; /* offers not fetched: refused from that peer lately */
	uint64_t validate_holds;  /* peers held: their answers over the validation budget */
	uint64_t fetch_expired;   /* ids queued for a peer too long, dropped */
	uint64_t ids_announced, ids_requested, events_served;
	uint64_t served_by_time;  /* GETs read by the time reconciliation offered them at */
	uint64_t events_unreadable; /* asked for by peers, stored, but unreadable (store errors) */
	uint64_t lazy_deferred, lazy_sent; /* own ids: peers deferred; of those, told at the lazy time */
	uint64_t bytes_sent, bytes_recv;
	uint64_t msgs_sent[WIRE_TYPE_MAX + 1], msgs_recv[WIRE_TYPE_MAX + 1];
	uint64_t bytes_sent_type[WIRE_TYPE_MAX + 1];
	uint64_t bans, connections_in, connections_out, refused_banned, refused_full;
	uint64_t refused_ip, refused_group; /* inbound over inbound_per_ip, inbound_per_group */
	uint64_t inbound_evicted;           /* inbound peers closed to make room for a newcomer */
	uint64_t bans_evicted;              /* bans dropped from a full table for newer ones */
	uint64_t malformed;
} node_stats_t;

#endif
