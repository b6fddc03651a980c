/* A node for unit tests: the protocol floors (address book, ingest
 * pipeline, relay, reconciliation) over the fake transport
 * (tests/fake_net.h), wired by node/mesh/mesh.c as node/daemon/node.c wires them,
 * with a real store in a temporary directory. No
 * sockets, no HTTP, no control socket.
 *
 *   tnode_t a;
 *   tnode_init(&a, "test_relay", trust, NULL); // config defaults, store
 *   tnode_put(&a, json, len);                  // events already held
 *   tnode_start(&a);                           // net, book, ingest, relay, sync
 *   peer_t *p = fake_peer_new(a.net, 1, "10.0.0.2:7411", pk, 0);
 *   ...
 *   tnode_stop(&a);                            // closes peers, frees all
 *
 * With trust NULL there is no store and only the net and the address book
 * are made (address book tests). */
#ifndef PITH_TESTS_TNODE_H
#define PITH_TESTS_TNODE_H

#include <stddef.h>
#include <stdint.h>

#include "addrbook.h"
#include "fake_net.h"
#include "ingest.h"
#include "mesh.h"
#include "relay.h"
#include "store.h"
#include "sync.h"
#include "testgen.h"
#include "trust.h"

typedef struct tnode {
	node_config_t cfg;
	node_stats_t stats;
	uint8_t pk[32];
	char *dir;                 /* cfg.data_dir, removed by tnode_stop */
	const pith_trust_t *trust;
	store_t *store;
	struct event_base *base;
	mesh_t mesh;               /* the wiring (node/mesh/mesh.c) */
	net_t *net;
	addrbook_t *book;
	ingest_t *ingest;
	relay_t *relay;
	sync_t *sync;
	uint64_t jobs_done;        /* ingest jobs handed back */
} tnode_t;

/* Once per process, before any tnode: libsodium, idmap, libevent's
 * threads, a quiet log. */
void tnode_global_init(void);

/* config_defaults, then tweak (may be NULL) over them; a temporary data
 * directory named after name; the store if trust is given. 0 or -1. */
int tnode_init(tnode_t *n, const char *name, const pith_trust_t *trust,
	       void (*tweak)(node_config_t *));
/* Validates and stores one event before tnode_start (the reconciliation
 * set is loaded from the store then). 0 or negative. */
int tnode_put(tnode_t *n, const uint8_t *json, size_t len);
/* The floors, bottom up. 0 or -1. */
int tnode_start(tnode_t *n);
/* Closes every peer (gone, then freed), stops the pipeline, frees all and
 * removes the directory. */
void tnode_stop(tnode_t *n);

/* tnode_init with the test trust (tnode_trust) and tweak, tnode_start,
 * then np inbound peers (np at most 8: 10.0.0.2:50001, 10.0.0.3:50002,
 * ...) made ready with features into ps, what their handshake sent them
 * (PEERS_REQ, an INV_REQ) cleared. 0, or -1 if a step failed or a peer
 * is not ready. */
int tnode_start_peers(tnode_t *n, const char *name, void (*tweak)(node_config_t *),
		      uint64_t features, peer_t **ps, size_t np);

/* Runs n's event loop (timers, ingest results) until cond(arg) is true
 * or ms milliseconds have passed; returns cond's last answer. cond NULL:
 * runs for ms. */
int tnode_run_until(tnode_t *n, int (*cond)(void *), void *arg, int ms);

/* The 32-byte digest of an event id "sha256:HEX". */
void tnode_id_digest(const char *event_id, uint8_t out[32]);

/* ---- signed events to relay ---- */

/* The trust of every test node: a registry key and an operator key
 * (made by tnode_global_init, freed by tnode_global_free). */
const pith_trust_t *tnode_trust(void);
void tnode_global_free(void);

/* Generated events: per record, its record_created (registry) and three
 * more events at distinct times (registry and operator). */
typedef struct tevents {
	pith_buf_t *json;
	uint8_t (*id)[32];
	size_t n;
} tevents_t;

/* 4 * nrec events of records first .. first + nrec - 1. */
void tevents_make(tevents_t *e, unsigned first, size_t nrec);
void tevents_free(tevents_t *e);

/* A registry bundle of one record, as nodes relay it. */
typedef struct tbundle {
	pith_buf_t json;            /* canonical JSON */
	char pith[PITH_NUMBER_LEN + 1];
	int64_t built_us;           /* built_at */
	uint8_t sha[32];            /* bundle_sha256 */
	uint8_t ids[4][32];         /* its events' ids, record_created first */
} tbundle_t;

/* The bundle of record rn (the four events tevents_make gives it) built
 * at built_at, signed by the test registry key, or with trusted 0 by a
 * registry key the test trust does not hold. 0 or -1. */
int tbundle_make(tbundle_t *b, unsigned rn, const char *built_at, int trusted);
void tbundle_free(tbundle_t *b);
/* Stores b (verified) before or after tnode_start. 0 or negative. */
int tnode_put_bundle(tnode_t *n, const tbundle_t *b);

#endif
