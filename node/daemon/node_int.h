/* pithd's wiring, shared by the top floor of node/ (node.c, node_http.c,
 * node_ctl.c) only: the node holds one of each module and
 * joins them (docs/pithd.md, "Layout of the code"). The CLI never
 * includes this.
 *
 * One event loop thread owns everything here. Other threads (validators,
 * the writer) touch only ingest_t's queues. Peers are referred to across
 * asynchronous steps by their serial number, never by pointer: a peer may
 * be gone when a validation result comes back. */
#ifndef PITH_NODE_INT_H
#define PITH_NODE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "addrbook.h"
#include "config.h"
#include "control.h"
#include "follower.h"
#include "idmap.h"
#include "mesh.h"
#include "node_root.h"
#include "daemon.h"
#include "ingest.h"
#include "net.h"
#include "relay.h"
#include "resolve.h"
#include "stats.h"
#include "store.h"
#include "sync.h"
#include "trust.h"
#include "wire.h"

struct event_base;
struct event;
struct evconnlistener;

typedef struct node node_t;

struct node {
	node_config_t *cfg;
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *sig_term, *sig_int, *sig_hup;
	struct event *tick_ev, *stop_ev;
	store_t *store;
	pith_trust_t *trust;        /* the store's (its merges' registry keys), for the whole run */
	pith_trust_t *trust_live;   /* the validators': trust, or a reload's (node_config.c) */
	pith_trust_t **trust_old;   /* replaced by reloads, freed once no validation uses them */
	size_t ntrust_old;
	node_config_read_fn reread; /* SIGHUP's config reader (node_set_config_reader) */
	void *reread_arg;
	ingest_t *ingest;
	resolver_t *resolver;       /* HOST:PORT names off the loop (resolve.c) */
	mesh_t mesh;                /* the protocol floor's wiring (mesh.c) */
	net_t *net;                 /* the connections (peer.c) */
	addrbook_t *book;           /* addresses and bans (addrbook.c) */
	relay_t *relay;             /* announce, fetch, serve (relay.c) */
	sync_t *sync;               /* reconciliation set and sessions (sync.c) */
	control_t *control;
	follower_t *follower;       /* --upstream: follower.c (NULL when none) */
	node_config_t *follow_cfg;  /* the settings a reload's follower reads (its strings), or NULL: cfg's */
	uint64_t follow_serials;    /* serials given by followers a reload replaced */
	int started_follower;       /* a follower at start: HTTP's read-through is on */
	struct http *http;          /* --http: node_http.c (NULL when off) */
	struct search *search;      /* DATA/search.sqlite (search.h); NULL if it failed */
	struct site_feed *site;     /* --site-dir: site_feed.h (NULL when off) */
	struct noderoot *root;      /* the state root (node_root.h); NULL if it failed or is being built */
	/* a large store's tree is built on a thread of its own at start
	 * (node.c, root_start): root_built is its result, root_done says it
	 * ended (root_built NULL: it failed); the tick adopts it */
	pthread_t root_th;
	int root_running;
	_Atomic(struct noderoot *) root_built;
	atomic_int root_done;
	int64_t root_t0;
	char root_err[256];
	struct metrics *metrics;    /* what /metrics renders */
	char http_url[WIRE_HTTP_URL_MAX + 1]; /* sent in HELLO: http_public_url when serving */
	struct mirrors *mirrors;    /* peers' HTTP mirrors, for /pith-mirrors.json (node_http.c) */
	wire_limits_t wlim;

	uint8_t pk[32], sk[64];
	char id_hex[65];
	char listen_str[80];
	uint16_t listen_port;
	int64_t started_us;
	int64_t progress_us;        /* the last "stored" progress line (node.c, progress_tick) */
	uint64_t progress_events, progress_bundles; /* the stats then */
	int shutting_down;
	int64_t store_down_us;      /* since when the store has refused writes (0: it takes them) */
	int64_t store_probe_us;     /* the last write probe (node.c, store_probe_tick) */
	struct ctlops *ctlops;      /* a backup in progress (node_ctl.c) */
	pthread_t warm_th;          /* store_warm at start (node.c, warm_start) */
	int warm_running;
	atomic_int warm_stop;

	node_stats_t stats;
};

/* ---- node.c ------------------------------------------------------------------ */
/* Appends the status object (JSON) to out. */
int node_status_json(node_t *n, pith_buf_t *out);
/* Appends one peer's object of the status "peers" list. */
void node_peer_json(const peer_t *p, int64_t now, pith_buf_t *out);

/* ---- node.c, for the reload ------------------------------------------------------ */
/* A follower of c's upstreams into *out (NULL and 0 when c has none; an
 * error when c has a follow list without upstreams); its jobs' serials
 * start above first_serial. c must outlive it (it keeps c's strings). */
int node_follower_start(node_t *n, const node_config_t *c, uint64_t first_serial,
			follower_t **out, pith_err_t *err);

/* ---- node_config.c: the config at start and on SIGHUP ------------------------ */
/* The trust store of cfg's trust_key files besides the registry key;
 * logs each key (a line per key) when loud. */
int node_trust_build(const node_config_t *cfg, int loud, pith_trust_t **out, pith_err_t *err);
/* SIGHUP: reopens the log file, reads the config again, applies what can
 * change while running, logs a line per change, keeps the running config
 * when the new one does not parse. */
void node_reload(node_t *n);
/* Frees the trust stores reloads replaced once no validation uses them
 * (every tick; all of them, whatever is left, when stopping). */
void node_trust_reap(node_t *n, int stopping);

/* ---- node_http.c ------------------------------------------------------------- */
/* Peer p became ready or, having been ready, left (p->state tells): the
 * peers' entries of /pith-mirrors.json follow (its URL, if it sent one, is
 * kept for a while after it left; a node that comes back replaces what it
 * said before). */
void node_http_peer_changed(node_t *n, const peer_t *p);
/* The state root's tick (node_root.h): a share of the change log told
 * to the tree, a signing when the interval passed, /pith-mirrors.json
 * told of the latest root. */
#define NODE_ROOT_CHANGES_PER_TICK 50000
void node_root_tick(node_t *n);
/* What reconciliation needs of the state root (none when it is off), and
 * noderoot's on_signed: the new document goes to the peers. */
sync_root_hooks_t node_root_hooks(node_t *n);
void node_root_signed(void *arg);
void node_root_publish(node_t *n);
/* A tree built on its thread at start (node.c): node_root_adopt makes it
 * n->root once done (1 when it did now); node_root_building says the
 * build still runs. Loop thread. */
int node_root_adopt(node_t *n);
int node_root_building(const node_t *n);
/* Drops the entries of peers gone for longer than the window. */
void node_http_tick(node_t *n, int64_t now);
/* This mirror's name: cfg->mirror_name, or "pithd" and the first 16 hex
 * digits of the node id. */
void node_mirror_name(const node_t *n, char out[static CONFIG_MIRROR_NAME_MAX + 1]);
/* Starts the HTTP views when cfg->http is set (0 when off). */
int node_http_start(node_t *n, pith_err_t *err);
/* Shutting down: /healthz answers 503, connections close after replies. */
void node_http_draining(node_t *n);
/* Shutdown: 1 while HTTP still answers requests it accepted (ask again
 * shortly), 0 when the loop may be left (http_stop_wait). */
int node_http_stop_wait(node_t *n);
/* Stops serving; NULL-tolerant parts. */
void node_http_stop(node_t *n);
/* The follower's read-through answers, to the HTTP views. */
void node_http_want_done(void *arg, uint64_t token, up_answer_t answer, const char *pith);

/* ---- node_ctl.c: the control socket's commands ----------------------------- */
/* The control socket at cfg->control with every command (a table); NULL
 * with err saying why. */
control_t *node_control_new(node_t *n, pith_err_t *err);
/* Waits for a backup in progress and frees what the commands keep. */
void node_ctl_free(node_t *n);

#endif
