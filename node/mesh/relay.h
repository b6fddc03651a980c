/* The relay: announce-then-fetch gossip of events and bundles, serving
 * what peers ask for, and the interim catch-up listing (INV) for peers
 * that do not speak reconciliation. It stands on the connection layer
 * (net.h) and the ingest pipeline; reconciliation (sync.h) stands on it.
 *
 * Files: relay.c (announce, fetch, serve, timeouts, results of events),
 * relay_bundle.c (bundle relay), relay_inv.c (INV catch-up); relay_int.h
 * is theirs alone. The relay's state, and each ready peer's
 * (p->relay), are its own. Loop thread only. */
#ifndef PITH_NODE_RELAY_H
#define PITH_NODE_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "idmap.h"
#include "ingest.h"
#include "net.h"
#include "store.h"

struct event_base;
typedef struct relay relay_t;

typedef enum inv_state {
	INV_IDLE = 0,   /* not started */
	INV_WAITING,    /* INV_REQ sent, no answer yet */
	INV_MORE,       /* answered, more pages to ask for */
	INV_DONE,
} inv_state_t;

/* A ready peer's relay state. Read-only outside relay*.c. */
typedef struct relay_peer {
	relay_t *r;
	idcache_t known;         /* ids this peer has or was told about */
	idq_t wanted;            /* ids to GET from it */
	size_t inflight;         /* GETs not yet answered */
	size_t vbytes;           /* bytes of its events and bundles in validation */
	int64_t scored_scan;     /* the timeout scan that last scored it */
	idq_t serve;             /* ids it asked for, not yet sent */
	idq_t bwanted;           /* bundle fetches (SHA-256 of the pith number) to ask it for */
	size_t binflight;        /* bundles asked of it, not yet validated */
	double bget_tokens;      /* pace of our BUNDLE_GETs in its budget */
	int64_t bget_us;
	pith_buf_t bserve;       /* pith numbers (PITH_NUMBER_LEN + 1 bytes each) it
				    asked for the bundles of, not yet sent */
	size_t bserve_head;
	inv_state_t inv;
	int64_t inv_next_us;
	uint8_t inv_next_id[32];
	/* created_at of the ids reconciliation told it it lacks, the last
	 * RELAY_HINTS_MAX of them (relay_hint_offered): when it GETs them
	 * their documents are read without the lookup by id */
	idmap_t *hint_map;       /* id -> slot + 1 in hint_ring */
	struct relay_hint *hint_ring;
	size_t hint_head, hint_n, hint_cap;
} relay_peer_t;

/* What the relay tells the layer above. May be NULL. */
typedef struct relay_hooks {
	void *arg;
	/* about to send p GETs from its fetch queue: top the queue up
	 * (reconciliation's backlog, sync_peer_feed) */
	void (*feed)(void *arg, peer_t *p);
	/* 1 if id is surely not stored (no store read needed to fetch it) */
	int (*is_absent)(void *arg, const uint8_t id[32]);
} relay_hooks_t;

/* Everything the relay uses; borrowed, must outlive it. */
typedef struct relay_deps {
	struct event_base *base;
	net_t *net;
	store_t *store;
	ingest_t *ingest;
	const node_config_t *cfg;
	node_stats_t *stats;
	relay_hooks_t hooks;
} relay_deps_t;

relay_t *relay_new(const relay_deps_t *d);
void relay_free_(relay_t *r);
#define relay_free(x) do { relay_free_(x); (x) = NULL; } while (0)

/* p finished its handshake: its relay state (p->relay). 0 or PITH_ENOMEM. */
int relay_peer_attach(relay_t *r, peer_t *p);
/* p is closing: its fetches go to others. */
void relay_peer_gone(relay_t *r, peer_t *p);
/* p is being freed: releases p->relay. */
void relay_peer_detach(relay_t *r, peer_t *p);
/* p's output drained: send more of what it asked for. */
void relay_peer_writable(relay_t *r, peer_t *p);
/* Starts the INV listing with p (a peer that does not reconcile). */
void relay_inv_start(relay_t *r, peer_t *p);
/* A message from a ready peer: 1 if it was the relay's (ANNOUNCE, GET,
 * EVENT, NOTFOUND, INV_REQ, INV, BUNDLE_*), else 0. */
int relay_on_message(relay_t *r, peer_t *p, const wire_msg_t *m);
/* Is m one of our requested answers (free of the budget)? */
int relay_is_answer(const peer_t *p, const wire_msg_t *m);

/* An ingest job came back (p: the ready peer it came from, or NULL):
 * fetch bookkeeping, counts, misbehaviour, announcing onward. Returns 1
 * if it was an event this node fetched in catch-up. */
int relay_job_done(relay_t *r, ingest_job_t *job, peer_t *p);

/* Queues a stored event id, fetched from the peer of serial from, for
 * announcing to the others. */
void relay_queue_announce(relay_t *r, const uint8_t id[32], uint64_t from);
/* Queues the id of an event that entered at this node (control socket,
 * HTTP, a bundle given to it): announced with announce_fanout. */
void relay_queue_announce_own(relay_t *r, const uint8_t id[32]);

/* Fetches id from p as catch-up, unless held or fetched already; queued
 * only (relay_pump sends the GETs). */
void relay_want_catchup(peer_t *p, const uint8_t id[32]);
/* Sends p the GETs its fetch queue and inflight window allow. */
void relay_pump(peer_t *p);
/* p knows id (it was offered or told): not announced to it. */
void relay_mark_known(peer_t *p, const uint8_t id[32]);
/* Reconciliation told p it lacks id, an event created at created_us: p
 * will likely GET it soon, and relay_serve then reads its document
 * straight from its time (store_events_get_many_at) instead of looking
 * the id up first. Kept for the last RELAY_HINTS_MAX such ids per peer;
 * a hint never decides what is served, only how it is read. */
#define RELAY_HINTS_MAX 65536
void relay_hint_offered(peer_t *p, const uint8_t id[32], int64_t created_us);

/* Bundle fetches queued per peer; above RELAY_BUNDLE_HOLD of them a
 * bundle session holds its next message (sync.c). */
#define RELAY_BUNDLE_WANTED_MAX 32768
#define RELAY_BUNDLE_HOLD 4096
/* Asks p for the bundle of record pith unless the node holds one or asks
 * already. 1 if the request was queued (paced BUNDLE_GETs follow). */
int relay_bundle_request(peer_t *p, const char *pith);
/* What a BUNDLE_ANNOUNCE or BUNDLE_GET (type) of refs refs costs in p's
 * message budget: as a node of this version charges if p's HELLO has
 * WIRE_FEAT_BUNDLE_BULK, else as an older node does (1 + 16 per ref). */
double relay_bundle_cost(const peer_t *p, wire_type_t type, size_t refs);

/* Per tick: fetch timeouts, queued GETs. */
void relay_tick(relay_t *r, int64_t now);
/* Ids being fetched (events and bundles). */
size_t relay_pending_fetches(const relay_t *r);
/* Bytes peers sent (asked for) that are in validation now. */
size_t relay_validating_bytes(const relay_t *r);

#endif
