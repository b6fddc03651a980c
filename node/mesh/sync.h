/* Catch-up sync in pithd: range-based set reconciliation (proto/recon.h)
 * over the peer connection, in RECON messages (docs/wire.md), as
 * docs/sync.md ("Integration with the node") lays out.
 *
 * The node keeps one recon_set_t of its store's time index: loaded at
 * start (store_recon_index_load, on a thread of its own so that the node
 * serves at once; sessions wait for it) and kept current for every event a
 * commit stores. With each peer that speaks RECON (HELLO feature
 * WIRE_FEAT_SYNC), the node that dialled starts a session after the
 * handshake and again every sync_interval_ms; at most one session runs
 * per peer. The ids a session finds missing here go into a per-peer
 * backlog and from there, as the fetch queue drains, into the normal GET
 * path (validated, stored, announced as usual); the ids the peer lacks are
 * served when it asks for them. While the backlog is long the node holds
 * its next message back, so a session never makes it hold more than about
 * max_wanted / 2 ids plus one message's worth per peer (1.3 MiB by
 * default).
 *
 * A second set holds each record's newest bundle, (built_at, hash), from
 * the store's bundle index, kept current for every bundle that becomes
 * its record's newest. With a peer whose HELLO also carries
 * WIRE_FEAT_BUNDLE_SYNC, the dialler follows each event session with a
 * bundle session (RECON_BUNDLES, in the same session slot); each side
 * announces (BUNDLE_ANNOUNCE, paced) the bundles the other lacks, and the
 * other fetches those newer than its own (docs/sync.md, "Bundles").
 *
 * Everything here runs on the loop thread, except the sets' load, which
 * hands its result to the loop thread (an event) and touches nothing else. */
#ifndef PITH_NODE_SYNC_H
#define PITH_NODE_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "addrbook.h"
#include "ingest.h"
#include "net.h"
#include "relay.h"
#include "resolve.h"
#include "store.h"

typedef struct sync sync_t;

/* The node's signed state root, as reconciliation needs it for the
 * exchange of roots with peers (sync_root.c, docs/state-root.md section
 * 14). latest NULL: the node has no root (no WIRE_FEAT_ROOT). */
typedef struct sync_root_hooks {
	void *arg;
	/* our latest signed document: 1 with its bytes, root, record count
	 * and change-log cursor (0: null); 0 if none yet */
	int (*latest)(void *arg, const char **doc, size_t *len, uint8_t root[32], uint64_t *count,
		      uint64_t *cursor);
	/* sign on demand when the root or its cursor moved (at most once a
	 * second); a new document comes back through sync_root_signed */
	void (*want)(void *arg);
} sync_root_hooks_t;

/* Everything sync uses; borrowed, must outlive it. reply answers a
 * control request that waited for a session (`sync PEER`). */
typedef struct sync_deps {
	struct event_base *base; /* the loop the finished load is handed to */
	net_t *net;
	relay_t *relay;
	addrbook_t *book;
	resolver_t *resolver;    /* `sync HOST:PORT` looks names up through it */
	store_t *store;
	ingest_t *ingest;
	const node_config_t *cfg;
	node_stats_t *stats;
	void (*reply)(void *arg, uint64_t serial, const char *json, size_t len);
	void *reply_arg;
	sync_root_hooks_t root;
} sync_deps_t;

/* Starts loading the reconciliation sets from the store on a thread of
 * its own and returns at once; reconciliation begins on the loop thread
 * once they are loaded (until then sessions are neither started nor
 * accepted: a peer's is answered "busy"). A failed load is logged and
 * leaves reconciliation off. 0, or a negative code with err saying why
 * (out of memory, no thread: the node does not start). */
int sync_new(const sync_deps_t *d, sync_t **out, pith_err_t *err);

/* Blocks until the sets' load has finished and applies it (tests that
 * want the sets in place before running the loop). Loop thread only. */
void sync_load_wait(sync_t *sy);

/* NULL-tolerant. Stops a load in progress (the walk gives up at its next
 * item) and joins its thread. Call after the peers are gone. */
void sync_free_(sync_t *sy);
#define sync_free(x) do { sync_free_(x); (x) = NULL; } while (0)

/* HELLO feature bits this node offers (WIRE_FEAT_SYNC and
 * WIRE_FEAT_BUNDLE_SYNC when enabled). */
uint64_t sync_features(const sync_t *sy);

/* p finished its handshake. Returns 1 if catch-up with it runs through
 * reconciliation (the dialler starts a session now), 0 if p does not
 * speak RECON and the caller falls back to the INV listing. */
int sync_peer_ready(sync_t *sy, peer_t *p);

/* p is closing: ends its session (answering a waiting `sync` request)
 * and drops its backlog. The state itself lives until sync_peer_free. */
void sync_peer_gone(sync_t *sy, peer_t *p);

/* Frees p's reconciliation state (p itself is being freed). */
void sync_peer_free(sync_t *sy, peer_t *p);

/* A RECON or RECON_BUNDLES message from p (after the handshake). */
void sync_on_recon(sync_t *sy, peer_t *p, const wire_msg_t *m);

/* Moves ids from p's backlog into its fetch queue while that queue is
 * short, and sends a held message once the backlog is short again. The
 * relay calls it (its feed hook) each time it pumps GETs to p. */
void sync_peer_feed(sync_t *sy, peer_t *p);

/* A commit stored an event: keeps the set current. */
void sync_event_stored(sync_t *sy, int64_t created_us, const uint8_t id[static 32]);
/* 1 if id is surely not a stored event (its set is loaded and says so
 * through its filter); 0 if it may be, or nothing is known (sy NULL, the
 * set loading or incomplete): then the store must be asked. */
int sync_id_is_absent(const sync_t *sy, const uint8_t id[static 32]);

/* A commit stored a bundle that became its record's newest: keeps the
 * bundle set current (the replaced one out, if replaced, this one in). */
void sync_bundle_stored(sync_t *sy, int64_t built_us, const uint8_t sha[static 32], int replaced,
			int64_t old_us, const uint8_t old_sha[static 32]);

/* A record_created learnt in catch-up from p was stored and the node may
 * lack the record's bundle: queues a BUNDLE_GET to p, sent at a pace that
 * keeps within a fraction of p's message budget. */
void sync_bundle_wanted(sync_t *sy, peer_t *p, const char *pith_number);

/* Per tick: periodic sessions, timeouts, bundle requests, progress log. */
void sync_tick(sync_t *sy, int64_t now);

/* Appends `"sync":{...}` (progress, totals, sessions per peer) to b. */
void sync_status_json(sync_t *sy, pith_buf_t *b);

/* 1 while the store is in bulk mode for a catch-up (sync_bulk_min), else 0. */
int sync_is_bulk(const sync_t *sy);

/* The control socket's `sync PEER`: runs one session with PEER (a node id
 * or a prefix of at least 8 hex digits, or HOST:PORT, dialled first if no
 * connected peer has that address) and answers control request
 * ctl_serial with the result once it ends (the reply hook). Returns 0, or
 * a negative code with err saying why (then nothing will be answered;
 * the caller answers with the error). Never answers synchronously. */
int sync_control_start(sync_t *sy, const char *peer, uint64_t ctl_serial, pith_err_t *err);
/* The same as a control-socket command (control.h): `sync PEER`. */
struct ctl_call;
int sync_ctl_sync(void *sy, struct ctl_call *call);

/* ---- state roots between peers (sync_root.c, docs/state-root.md 14) ---- */

/* A session with a peer must have found nothing to exchange either way,
 * twice, with this long at least between the first's end and the
 * comparison (the peer's document signed on demand after the first has
 * come by then), and no commit here in between. */
#define SYNC_ROOT_SETTLE_US 2000000
/* The dialler's confirming session after a first one that found
 * nothing: this long after it, at most SYNC_ROOT_CONFIRMS per streak. */
#define SYNC_ROOT_CONFIRM_US 2500000
#define SYNC_ROOT_CONFIRMS 4

/* p became ready: our latest document to it, if its HELLO set WIRE_FEAT_ROOT. */
void sync_root_peer_ready(sync_t *sy, peer_t *p);
/* The node signed a new root: sent to every ready peer with the bit. */
void sync_root_signed(sync_t *sy);
/* A ROOT from p: verified with the key p authenticated; one that fails
 * is ignored and logged (rate-limited), never a ban. */
void sync_root_on_message(sync_t *sy, peer_t *p, const wire_msg_t *m);
/* p's comparison, for `peers`: "unknown", "agrees" or "disagrees". */
const char *sync_root_peer_state(const peer_t *p);

typedef struct sync_root_counts {
	uint64_t sent, received, bad;  /* ROOTs sent, received and verified, refused */
	uint64_t agreements, disagreements; /* comparisons, one per peer per pair of roots */
	uint64_t peers_disagreeing;    /* ready peers flagged now */
} sync_root_counts_t;
void sync_root_counts_get(sync_t *sy, sync_root_counts_t *out);

#endif
