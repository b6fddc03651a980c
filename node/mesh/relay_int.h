/* The relay's insides, shared by relay.c, relay_bundle.c and relay_inv.c
 * only. */
#ifndef PITH_NODE_RELAY_INT_H
#define PITH_NODE_RELAY_INT_H

#include "relay.h"

#define PITH_LEN (PITH_NUMBER_LEN + 1)
#define SERVE_HIGH (512u << 10) /* stop serving a peer above this much output */

typedef enum fetch_state {
	FETCH_QUEUED = 1, /* in the assigned peer's wanted queue */
	FETCH_REQUESTED,  /* GET sent to the assigned peer */
	FETCH_VALIDATING, /* its EVENT is in the ingest pipeline */
} fetch_state_t;

#define FETCH_ALTS 4
#define FETCH_QUEUED_TTL_US (120 * INT64_C(1000000)) /* an id queued for a peer this long is dropped */

/* One id being fetched: a single request at a time, the next announcers
 * kept as fallbacks. */
typedef struct fetch {
	uint64_t peer;
	uint64_t alt[FETCH_ALTS];
	uint8_t nalt;
	uint8_t state;
	uint8_t is_bundle;
	uint8_t catchup;  /* first learnt from an INV page, not an announce */
	int64_t since_us;
	char pith[PITH_NUMBER_LEN + 1]; /* bundles */
	uint8_t sha[32];  /* bundles: the hash announced, if has_sha */
	uint8_t has_sha;
} fetch_t;

typedef struct bundle_info {
	int64_t built_us;
	uint8_t sha[32];
} bundle_info_t;

/* A queued announce: the id (32) and the serial of the peer it came from (8) */
#define ANNOUNCE_ENTRY 40

struct relay {
	relay_deps_t d;             /* what it uses (relay.h) */
	wire_limits_t wlim;
	struct event *announce_ev, *lazy_ev;
	idmap_t *fetches;           /* event id, or SHA-256 of a pith number for bundles */
	int64_t fetch_scan_us;      /* when relay_tick next looks for timed-out fetches */
	idmap_t *bundles;           /* SHA-256(pith number) -> bundle_info_t (cache) */
	idcache_t recent;           /* ids stored lately (saves store lookups) */
	idcache_t refused;          /* (peer key, event id or bundle hash) refused as
				       signed by keys this node does not trust */
	uint64_t refused_n;         /* additions to refused (0: skip the lookups) */
	pith_buf_t announce_q;      /* relayed ids to announce: ANNOUNCE_ENTRY bytes each */
	pith_buf_t announce_own_q;  /* ids of events that entered here (announce_fanout),
				       ANNOUNCE_ENTRY bytes each, the serial 0 */
	pith_buf_t lazy_q;          /* deferred announces: due_us (8) + id (32), by due time */
	size_t lazy_head;           /* bytes of lazy_q already handled */
	wire_bundle_ref_t *bundle_q;/* bundles to announce */
	size_t nbundle_q;
	size_t vbytes;              /* bytes from peers in validation, all of them */
	int vheld;                  /* over validate_bytes_max: peers that deliver are held */
};

/* relay.c */
void relay_send_ids(peer_t *p, wire_type_t type, const uint8_t *ids, size_t count);
void relay_want(peer_t *p, const uint8_t id[32], int catchup);
void relay_serve(peer_t *p);
void relay_refused_add(relay_t *r, const peer_t *p, const uint8_t id[32]);
int relay_refused_has(const relay_t *r, const peer_t *p, const uint8_t id[32]);
int relay_reason_is_untrusted(const char *reason);
int relay_reason_is_peers_fault(const char *reason);
/* Bytes from p (an event or bundle it was asked for) entered validation;
 * p is held (peer_hold) while its own or everyone's bytes there are over
 * budget. */
void relay_validating_add(relay_t *r, peer_t *p, size_t len);
int relay_free_value(void *arg, const uint8_t id[32], void *val);

/* relay_announce.c: the announce timer set, if it is not; the queued
 * announces sent (that timer), and the lazy ones now due (the lazy
 * timer). */
void relay_announce_schedule(relay_t *r);
void relay_flush_announces(relay_t *r);
void relay_flush_lazy(relay_t *r);

/* relay_inv.c */
void relay_inv_send_req(peer_t *p);
void relay_on_inv_req(peer_t *p, const wire_msg_t *m);
void relay_on_inv(peer_t *p, const wire_msg_t *m);

/* relay_bundle.c */
void relay_bundle_pump(peer_t *p);
void relay_bundles_serve(peer_t *p);
void relay_bundle_announce_flush(relay_t *r, peer_t **ps, size_t np);
void relay_on_bundle_announce(peer_t *p, const wire_msg_t *m);
void relay_on_bundle_get(peer_t *p, const wire_msg_t *m);
void relay_on_bundle(peer_t *p, const wire_msg_t *m);
void relay_bundle_done(relay_t *r, ingest_job_t *job, peer_t *p);

#endif
