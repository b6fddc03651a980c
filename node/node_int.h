/* pithd's insides, shared by node/ sources only (the CLI never includes this).
 *
 * One event loop thread owns everything here. Other threads (validators,
 * the writer) touch only ingest_t's queues. Peers are referred to across
 * asynchronous steps by their serial number, never by pointer: a peer may
 * be gone when a validation result comes back.
 *
 * Files: node.c (setup, signals, ticks, status), peer.c (connections,
 * handshake, budgets, closing), relay.c (announce, fetch, serve, catch-up,
 * bundles), addrbook.c (addresses, backoff, bans, peer exchange),
 * control.c (the control socket), ingest.c (validation and writes). */
#ifndef PITH_NODE_INT_H
#define PITH_NODE_INT_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"
#include "idmap.h"
#include "ingest.h"
#include "store.h"
#include "trust.h"
#include "wire.h"

struct event_base;
struct event;
struct bufferevent;
struct evconnlistener;

typedef struct node node_t;
typedef struct peer peer_t;
typedef struct control control_t;

/* ---- misbehaviour points (docs/pithd.md, "Misbehaviour") -------------------- */
#define SCORE_MALFORMED 100   /* a frame that does not decode, oversized frames */
#define SCORE_PROTOCOL 100    /* a message out of place (before the handshake...) */
#define SCORE_BAD_AUTH 100    /* a handshake signature that does not verify */
#define SCORE_INVALID 50      /* an event or bundle that fails validation */
#define SCORE_UNREQUESTED 25  /* data we did not ask for */
#define SCORE_FLOOD 20        /* per second spent over the message budget */
#define SCORE_TRUNCATED 10    /* closed inside a frame */

typedef enum peer_state {
	PEER_CONNECTING = 0, /* outbound TCP connect in progress */
	PEER_HANDSHAKE,      /* HELLO sent, waiting for HELLO and AUTH */
	PEER_READY,          /* authenticated */
	PEER_CLOSING,        /* marked: reaped after the loop turn */
} peer_state_t;

typedef enum inv_state {
	INV_IDLE = 0,   /* not started */
	INV_WAITING,    /* INV_REQ sent, no answer yet */
	INV_MORE,       /* answered, more pages to ask for */
	INV_DONE,
} inv_state_t;

typedef struct addr_entry addr_entry_t;

struct peer {
	node_t *node;
	uint64_t serial;
	struct bufferevent *bev;
	struct event *cont_ev;   /* continue reading after a budgeted turn */
	struct event *resume_ev; /* re-enable reading after a budget pause */
	int outbound;
	struct sockaddr_storage sa;
	socklen_t salen;
	char addr[64];           /* "ip:port" of the socket's far end */
	addr_entry_t *book;      /* outbound: the address dialled */
	peer_state_t state;
	wire_reader_t *reader;

	/* handshake */
	uint8_t my_nonce[32];
	int got_hello;
	uint8_t pk[32];
	char id_short[17];       /* first 16 hex of pk */
	uint8_t their_nonce[32];
	uint16_t listen_port;
	uint64_t features;
	char agent[WIRE_AGENT_MAX + 1];
	char http_url[WIRE_HTTP_URL_MAX + 1]; /* its HELLO's, "" if none or dropped */

	/* time */
	int64_t created_us, ready_us, last_recv_us;
	int64_t ping_sent_us;    /* 0: no PING outstanding */
	uint64_t ping_nonce;
	int64_t rtt_us;
	int64_t pex_answered_us; /* last PEERS we sent */
	int pex_requested;       /* we sent PEERS_REQ and wait for PEERS */
	int64_t pings_window_us;
	unsigned pings_in_window;

	/* budgets */
	double msg_tokens, byte_tokens;
	int64_t tokens_us;
	int read_paused;
	int64_t last_flood_us;
	unsigned flood_strikes;

	/* misbehaviour and closing */
	int score;
	char close_reason[160];
	int64_t close_deadline_us;
	int reap_queued;

	/* relay */
	idcache_t known;         /* ids this peer has or was told about */
	idq_t wanted;            /* ids to GET from it */
	size_t inflight;         /* GETs not yet answered */
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
	struct sync_peer *sync;  /* reconciliation with it (sync.c), once ready */

	/* counters */
	uint64_t bytes_in, bytes_out, msgs_in, msgs_out;
	uint64_t events_in, events_out, ids_announced_in, ids_announced_out;

	peer_t *prev, *next;
};

struct addr_entry {
	struct sockaddr_storage sa;
	socklen_t salen;
	char str[64];
	int pinned;           /* from --peer or `connect`: always redialled */
	int kept;             /* from `connect`: pinned across restarts (DATA/peers.json) */
	int source;           /* ADDR_CONFIG, ADDR_PEX, ADDR_INBOUND */
	int self;             /* it is this node */
	unsigned failures;
	int64_t next_attempt_us;
	int64_t last_ok_us;
	uint64_t peer_serial; /* a live connection to it, or 0 */
	uint8_t pk[32];
	int has_pk;
};

enum { ADDR_CONFIG = 1, ADDR_PEX, ADDR_INBOUND };

typedef struct ban {
	uint8_t ip[16];
	uint8_t ip_len;
	int64_t until_us;
	char ip_str[48];
	char reason[96];
} ban_t;

typedef enum fetch_state {
	FETCH_QUEUED = 1, /* in the assigned peer's wanted queue */
	FETCH_REQUESTED,  /* GET sent to the assigned peer */
	FETCH_VALIDATING, /* its EVENT is in the ingest pipeline */
} fetch_state_t;

#define FETCH_ALTS 4

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

/* Counters shown by `status`. */
typedef struct node_stats {
	uint64_t events_stored, events_duplicate, events_resigned;
	uint64_t events_invalid, bundles_stored, bundles_older, bundles_invalid;
	uint64_t rejected[PITH_CHECK_NCHECKS + 4];
	uint64_t unrequested, fetch_timeouts, pending_dropped, notfound_in;
	uint64_t refused_skipped; /* offers not fetched: refused from that peer lately */
	uint64_t ids_announced, ids_requested, events_served;
	uint64_t lazy_deferred, lazy_sent; /* own ids: peers deferred; of those, told at the lazy time */
	uint64_t bytes_sent, bytes_recv;
	uint64_t msgs_sent[WIRE_TYPE_MAX + 1], msgs_recv[WIRE_TYPE_MAX + 1];
	uint64_t bytes_sent_type[WIRE_TYPE_MAX + 1];
	uint64_t bans, connections_in, connections_out, refused_banned, refused_full;
	uint64_t malformed;
} node_stats_t;

struct node {
	node_config_t *cfg;
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *sig_term, *sig_int, *sig_pipe;
	struct event *tick_ev, *announce_ev, *lazy_ev, *reap_ev, *stop_ev;
	store_t *store;
	struct sync *sync;          /* reconciliation set and sessions (sync.c) */
	pith_trust_t *trust;
	ingest_t *ingest;
	control_t *control;
	struct http *http;          /* --http: node_http.c (NULL when off) */
	struct metrics *metrics;    /* what /metrics renders */
	char http_url[WIRE_HTTP_URL_MAX + 1]; /* sent in HELLO: http_public_url when serving */
	struct mirror_seen *mirrors_seen; /* peers' HTTP URLs after they left (node_http.c) */
	size_t n_mirrors_seen;
	int64_t mirrors_tick_us;
	wire_limits_t wlim;

	uint8_t pk[32], sk[64];
	char id_hex[65];
	char listen_str[80];
	uint16_t listen_port;
	int64_t started_us;
	int shutting_down;

	peer_t *peers;
	size_t n_out, n_in;
	uint64_t next_serial;
	idmap_t *peer_by_serial;    /* key: serial in the first 8 bytes */

	addr_entry_t **book;
	size_t nbook;
	ban_t *bans;
	size_t nbans, capbans;
	int64_t book_dirty_us;      /* address book or bans changed since (0: saved) */
	int book_loaded;            /* DATA/peers.json was read: it may be written */
	struct ctlops *ctlops;      /* operator commands in progress (control_ops.c) */
	int64_t next_pex_us;

	idmap_t *fetches;           /* event id, or SHA-256 of a pith number for bundles */
	int64_t fetch_scan_us;      /* when relay_tick next looks for timed-out fetches */
	idmap_t *bundles;           /* SHA-256(pith number) -> bundle_info_t (cache) */
	idcache_t recent;           /* ids stored lately (saves store lookups) */
	idcache_t refused;          /* (peer key, event id or bundle hash) refused as
				       signed by keys this node does not trust */
	uint64_t refused_n;         /* additions to refused (0: skip the lookups) */
	pith_buf_t announce_q;      /* relayed ids to announce, 32 bytes each */
	pith_buf_t announce_own_q;  /* ids of events that entered here (announce_fanout) */
	pith_buf_t lazy_q;          /* deferred announces: due_us (8) + id (32), by due time */
	size_t lazy_head;           /* bytes of lazy_q already handled */
	wire_bundle_ref_t *bundle_q;/* bundles to announce */
	size_t nbundle_q;

	node_stats_t stats;
};

/* ---- node.c ------------------------------------------------------------------ */
int64_t node_now_us(void);
/* The serial key for peer_by_serial. */
void node_serial_key(uint64_t serial, uint8_t key[32]);
peer_t *node_peer_by_serial(node_t *n, uint64_t serial);
/* Appends the status object (JSON) to out. */
int node_status_json(node_t *n, pith_buf_t *out);
/* Appends one peer's object of the status "peers" list. */
void node_peer_json(const peer_t *p, int64_t now, pith_buf_t *out);
/* Appends the status "bans" list (those still running). */
void node_bans_json(const node_t *n, int64_t now, pith_buf_t *out);
/* Asks the loop to reap closing peers after this turn. */
void node_reap_soon(node_t *n);

/* ---- peer.c ------------------------------------------------------------------ */
int peer_connect(node_t *n, addr_entry_t *a);
int peer_accept(node_t *n, int fd, const struct sockaddr *sa, socklen_t len);
/* Sends one message; closes the peer (as too slow) if its output queue
 * is over the limit. 0, or negative if not sent. */
int peer_send(peer_t *p, const wire_msg_t *m);
/* Marks p for closing with a reason (logged); sends BYE first when code is
 * non-zero. Safe inside p's own callbacks: p is freed after the loop turn. */
void peer_close(peer_t *p, uint32_t bye_code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Adds misbehaviour points; at the threshold, bans the address and closes. */
void peer_misbehaved(peer_t *p, int points, const char *what);
/* Gives back to p's byte budget the n bytes of an item this node asked p
 * for: what we request is bounded by our own windows, not by the budget
 * against floods (docs/wire.md, "Budgets"). */
void peer_refund_bytes(peer_t *p, size_t n);
/* Frees closing peers whose output drained or whose linger ran out
 * (force: all of them). */
void peer_reap(node_t *n, int force);
/* Per-tick timeouts: handshake, ping, idle, linger. */
void peer_tick(peer_t *p, int64_t now);
size_t peer_out_len(const peer_t *p);
int peer_is_ready(const peer_t *p);

/* ---- relay.c ----------------------------------------------------------------- */
/* The peer finished its handshake: start catch-up. */
void relay_peer_ready(peer_t *p);
/* The peer is going: hand its fetches to others. */
void relay_peer_gone(peer_t *p);
/* One authenticated message (not HELLO/AUTH/PING/PONG/BYE/PEERS*). */
void relay_dispatch(peer_t *p, const wire_msg_t *m);
/* The peer's output drained: send more of what it asked for. */
void relay_peer_writable(peer_t *p);
/* Ingest results (ingest_done_fn). */
void relay_ingest_done(void *arg, ingest_job_t *job);
/* Per-tick: fetch timeouts. */
void relay_tick(node_t *n, int64_t now);
/* Flushes the announce queues: relayed ids to every peer that does not
 * know them; own ids to announce_fanout such peers, the rest deferred to
 * the lazy queue. */
void relay_flush_announces(node_t *n);
/* Announces deferred ids that are due to every peer still unaware of them. */
void relay_flush_lazy(node_t *n);
/* Queues a stored event id, fetched from a peer, for announcing. */
void relay_queue_announce(node_t *n, const uint8_t id[32]);
/* Queues the id of an event that entered at this node (control socket,
 * HTTP, a bundle given to it): announced with announce_fanout. */
void relay_queue_announce_own(node_t *n, const uint8_t id[32]);
/* Is this message type one of our requested answers (free of the budget)? */
int relay_is_answer(const peer_t *p, const wire_msg_t *m);
/* Fetches id from p as catch-up, unless held or fetched already; queued
 * only (relay_pump sends the GETs). */
void relay_want_catchup(peer_t *p, const uint8_t id[32]);
/* Sends p the GETs its fetch queue and inflight window allow. */
void relay_pump(peer_t *p);
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

/* ---- addrbook.c -------------------------------------------------------------- */
/* Adds (or finds) an address; NULL if the book is full or the address is
 * unusable. */
addr_entry_t *addrbook_add(node_t *n, const struct sockaddr *sa, socklen_t len, int source);
/* Resolves HOST:PORT (numeric or by name) and adds it: pinned 0 as an
 * address learnt, 1 pinned (--peer), ADDRBOOK_KEEP pinned and kept across
 * restarts (`connect`). */
int addrbook_add_hostport(node_t *n, const char *hostport, int pinned, pith_err_t *err);
#define ADDRBOOK_KEEP 2
/* Dials what the outbound target and the pinned entries call for. */
void addrbook_maintain(node_t *n, int64_t now);
/* A dial or a session with a ended: schedule the next try. */
void addrbook_failed(node_t *n, addr_entry_t *a, int was_ready);
void addrbook_ready(node_t *n, peer_t *p);
void addrbook_free(node_t *n);
/* Bans the peer's IP address for cfg->ban_seconds. */
void ban_add(node_t *n, const struct sockaddr *sa, const char *reason);
/* Bans ip (ip_len 4 or 16 bytes) until until_us (wall clock), replacing
 * any ban on it. 0, PITH_ETOOBIG (too many bans) or PITH_ENOMEM. Does not
 * close connections. */
int ban_set(node_t *n, const uint8_t *ip, uint8_t ip_len, int64_t until_us, const char *reason);
/* Lifts the ban on ip and lets its addresses be dialled at once; 1 if it
 * was banned, else 0. */
int ban_lift(node_t *n, const uint8_t *ip, uint8_t ip_len);
/* The IP address of "IP", "IP:PORT" or "[IPv6]:PORT" (numeric only).
 * 0 or PITH_EINVAL. */
int addr_parse_ip(const char *text, uint8_t ip[16], uint8_t *len);
/* The IP address of p's far end. 0, or -1 if not an inet socket. */
int peer_ip(const peer_t *p, uint8_t ip[16], uint8_t *len);
int ban_is_banned(node_t *n, const struct sockaddr *sa, int64_t now);
void ban_prune(node_t *n, int64_t now);
/* PEERS_REQ and PEERS. */
void pex_on_request(peer_t *p);
void pex_on_peers(peer_t *p, const wire_msg_t *m);
void pex_tick(node_t *n, int64_t now);
/* Formats a socket address as ip:port. */
void addr_format(const struct sockaddr *sa, char out[static 64]);

/* ---- node_http.c ------------------------------------------------------------- */
/* Peer p became ready or, having been ready, left (p->state tells): the
 * peers' entries of /pith-mirrors.json follow (its URL, if it sent one, is
 * kept for a while after it left; a node that comes back replaces what it
 * said before). */
void node_http_peer_changed(node_t *n, const peer_t *p);
/* Drops the entries of peers gone for longer than the window. */
void node_http_tick(node_t *n, int64_t now);
/* Starts the HTTP views when cfg->http is set (0 when off). */
int node_http_start(node_t *n, pith_err_t *err);
/* Shutting down: /healthz answers 503, connections close after replies. */
void node_http_draining(node_t *n);
/* Stops serving; NULL-tolerant parts. */
void node_http_stop(node_t *n);

/* ---- addrbook_file.c: the address book and bans across restarts --------------
 * DATA/peers.json, written atomically (temporary file, fsync, rename). */
/* Loads the file if there is one (a damaged file is logged and ignored). */
void addrbook_load(node_t *n);
/* Writes the file now. 0 or PITH_EIO (err says where). */
int addrbook_save(node_t *n, pith_err_t *err);
/* Something in the file changed: it is written within a few seconds. */
void addrbook_changed(node_t *n);
/* Per-tick: writes the file if it changed a while ago. */
void addrbook_save_tick(node_t *n, int64_t now);

/* ---- control_ops.c: the operator's commands on the control socket ------------- */
/* Runs one command if it is one of the operator's (peers, connect, ban,
 * unban, backup, state, resolve, get_event): CTLOP_DONE with the answer in
 * reply, CTLOP_LATER if control_reply(serial) answers it later, or
 * CTLOP_UNKNOWN if it is not one of them. */
int ctlop_run(node_t *n, uint64_t serial, const char *cmd, size_t cmdlen, const char *arg,
	      size_t arglen, pith_buf_t *reply);
enum { CTLOP_UNKNOWN = -1, CTLOP_DONE = 0, CTLOP_LATER = 1 };
/* Waits for a backup in progress and frees what ctlop_run keeps. */
void ctlop_free(node_t *n);

/* ---- control.c --------------------------------------------------------------- */
control_t *control_new(node_t *n, const char *path);
void control_free_(control_t *c);
#define control_free(c) do { control_free_(c); (c) = NULL; } while (0)
/* A job submitted for control request serial is done. */
void control_job_done(control_t *c, ingest_job_t *job);
/* Answers control request serial (waiting since its command) with one
 * JSON line; nothing if it is gone. */
void control_reply(control_t *c, uint64_t serial, const char *json, size_t len);

#endif
