/* The protocol floor wired together: what the connection layer, the
 * relay and the ingest pipeline report goes to the address book, the
 * relay and reconciliation, in the order that matters. The node (node.c)
 * and the unit tests (tests/tnode.c) use the same wiring.
 *
 *   peer ready    -> relay state, address book (learns it, asks for
 *                    addresses), reconciliation or else the INV listing
 *   message       -> PEERS_REQ/PEERS: address book; RECON*, ROOT: sync;
 *                    the rest: relay
 *   peer gone     -> sync ends its session, the relay hands its fetches on
 *   peer freed    -> address book (backoff), sync and relay state freed
 *   ban           -> address book
 *   relay feed    -> sync tops up the peer's fetch queue
 *   ingest result -> relay bookkeeping and announcing, then the
 *                    reconciliation sets
 *
 * The relay and sync may be NULL (a mesh of an address book alone, in
 * tests): then peers get no relay state and no catch-up. Loop thread
 * only.
 *
 * The folder's public header. addrbook.h, relay.h and sync.h are public
 * too, interfaces of their own: the node (node/daemon/) builds each of
 * the three with its own deps, ticks it and reads its status, and the
 * unit tests drive each alone; their insides are in *_int.h. */
#ifndef PITH_NODE_MESH_H
#define PITH_NODE_MESH_H

#include "addrbook.h"
#include "ingest.h"
#include "net.h"
#include "relay.h"
#include "sync.h"

typedef struct mesh {
	net_t *net;
	addrbook_t *book;
	relay_t *relay;
	sync_t *sync;
	int stopping;  /* shutting down: ingest results skip the protocol */
	/* told when a peer became ready or, having been, left (may be NULL):
	 * the node's HTTP side lists peers' mirrors */
	void (*peer_changed)(void *arg, const peer_t *p);
	void *arg;
} mesh_t;

/* The connection layer's events, sent to m (fill m before peers come). */
peer_events_t mesh_peer_events(mesh_t *m);
/* The relay's hooks, sent to m. */
relay_hooks_t mesh_relay_hooks(mesh_t *m);
/* An ingest job is back on the loop: the protocol's part of it (the
 * caller then tells whoever submitted it, and frees it). */
void mesh_job_done(mesh_t *m, ingest_job_t *job);

#endif
