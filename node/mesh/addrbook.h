/* The address book: where peers may be found and when to try them next,
 * the bans, peer exchange (PEERS_REQ/PEERS) and which inbound peers may
 * stay. It stands on the connection layer (net.h): it dials through it
 * and reads its table, and is told of peers by the node's wiring (mesh.c).
 * DATA/peers.json keeps the book and the bans across restarts
 * (addrbook_file.c). Loop thread only.
 *
 * Learnt addresses live in two tables in the manner of Bitcoin Core's
 * addrman (docs/pithd.md, "Budgets and misbehaviour"): "new" (heard of,
 * ADDRBOOK_NEW_BUCKETS buckets of ADDRBOOK_BUCKET_SIZE) and "tried" (a
 * handshake with it worked, ADDRBOOK_TRIED_BUCKETS buckets). A new
 * address's bucket is chosen by a keyed hash of the network group of the
 * peer that told of it and of its own group, so one source can fill only a
 * few buckets; a tried address's by its own group. An occupied slot is
 * given up only by an entry that proved useless ("terrible"). Configured
 * and kept addresses are in no table: they are always kept. */
#ifndef PITH_NODE_ADDRBOOK_H
#define PITH_NODE_ADDRBOOK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "config.h"
#include "err.h"
#include "net.h"
#include "resolve.h"

typedef struct addrbook addrbook_t;

typedef struct addr_entry {
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
	/* the tables (addrbook.c) */
	int table;            /* ADDR_TABLE_NONE (pinned), _NEW or _TRIED */
	uint16_t bucket, slot;
	uint64_t src_group;   /* network group of the peer that told of it */
	int64_t seen_us;      /* last heard of (added, or told of again) */
	size_t idx;           /* its place in the book's list */
} addr_entry_t;

enum { ADDR_CONFIG = 1, ADDR_PEX, ADDR_INBOUND };
enum { ADDR_TABLE_NONE = 0, ADDR_TABLE_NEW, ADDR_TABLE_TRIED };

#define ADDRBOOK_NEW_BUCKETS 256
#define ADDRBOOK_TRIED_BUCKETS 64
#define ADDRBOOK_BUCKET_SIZE 32
#define ADDRBOOK_NEW_PER_GROUP 8    /* new buckets one source group can reach */
#define ADDRBOOK_TRIED_PER_GROUP 8  /* tried buckets one address group can reach */
#define ADDRBOOK_CAPACITY ((ADDRBOOK_NEW_BUCKETS + ADDRBOOK_TRIED_BUCKETS) * ADDRBOOK_BUCKET_SIZE)
#define PEX_NEW_MAX 10              /* new addresses one PEERS answer may add */

typedef struct ban {
	uint8_t ip[16];
	uint8_t ip_len;
	int64_t until_us;
	char ip_str[48];
	char reason[96];
} ban_t;

/* An empty book over net's peers; counts bans in stats. NULL on OOM. */
addrbook_t *addrbook_new(net_t *net, const node_config_t *cfg, node_stats_t *stats);
/* Frees the book (it does not save it: addrbook_save_if_changed). NULL-tolerant. */
void addrbook_free_(addrbook_t *ab);
#define addrbook_free(x) do { addrbook_free_(x); (x) = NULL; } while (0)

/* Adds (or finds) an address, as told by the peer at src (NULL: by the
 * address itself, as an inbound peer's listening address is). A learnt
 * address goes to the new table, in a bucket chosen by src's network
 * group and its own; NULL if its slots there are held by entries that
 * are not terrible (and one not terrible is never pushed out), if the
 * book holds addrbook_max learnt entries and none can go, or if the
 * address is unusable. ADDR_CONFIG entries are in no table and always
 * added (a learnt entry added again so is taken out of its table). */
addr_entry_t *addrbook_add_from(addrbook_t *ab, const struct sockaddr *sa, socklen_t len, int source,
				const struct sockaddr *src);
/* addrbook_add_from with src NULL. */
addr_entry_t *addrbook_add(addrbook_t *ab, const struct sockaddr *sa, socklen_t len, int source);
/* The network group of an IP address (ip_len 4 or 16): IPv4 (and
 * IPv4-mapped IPv6) by /16, loopback included (127.0.0.0/16 holds what a
 * machine uses; tests play distinct hosts from other 127/16s); IPv6 by
 * /32. The family is part of the value. */
uint64_t addrbook_group_of(const uint8_t *ip, uint8_t ip_len);
/* The group of a socket address, or 0 if it is not inet. */
uint64_t addrbook_group_of_sa(const struct sockaddr *sa);
/* Entries in the new and the tried table. */
void addrbook_table_counts(const addrbook_t *ab, size_t *n_new, size_t *n_tried);
/* Does the entry look useless (docs/pithd.md): never worked after 3
 * dials, or failed 10 times with its last success over 7 days ago, or
 * not heard of for 30 days? Pinned entries never are. */
int addrbook_entry_is_terrible(const addr_entry_t *a, int64_t now);
/* Names are looked up through res (resolve.h, off the loop); reply
 * answers a `connect` that waited for one. Without a resolver only
 * numeric addresses are taken. */
void addrbook_set_resolver(addrbook_t *ab, resolver_t *res,
			   void (*reply)(void *arg, uint64_t serial, const char *json, size_t len),
			   void *reply_arg);
/* Adds HOST:PORT: pinned 0 as an address learnt, 1 pinned (--peer),
 * ADDRBOOK_KEEP pinned and kept across restarts (`connect`). A numeric
 * address goes in at once (0); a name is looked up off the loop and goes
 * in when it resolves (ADDRBOOK_PENDING; a configured name that does not
 * resolve is tried again with the redial backoff, and control request
 * serial, if not 0, is answered then). Negative, with err saying why, for
 * what is not HOST:PORT or cannot be taken. */
int addrbook_add_hostport_for(addrbook_t *ab, const char *hostport, int pinned, uint64_t serial,
			      pith_err_t *err);
/* The same with no request to answer: 0 (in the book, or being looked
 * up) or negative. */
int addrbook_add_hostport(addrbook_t *ab, const char *hostport, int pinned, pith_err_t *err);
/* HOST:PORT, a numeric address pinned by --peer, is no longer pinned (a
 * reload's removed peer): an ordinary learnt address from now on, its
 * connection left open. PITH_ENOTSUP for a name, PITH_ENOTFOUND when no
 * such entry is pinned (or `connect` keeps it), PITH_EEXIST when it stays
 * pinned (connected, and its slots are held). */
int addrbook_unpin_hostport(addrbook_t *ab, const char *hostport);
#define ADDRBOOK_KEEP 2
#define ADDRBOOK_PENDING 1
/* Dials a now: the connection is a's until it is freed. 0, or negative
 * if the dial failed at once. */
int addrbook_dial(addrbook_t *ab, addr_entry_t *a);
/* Dials what the outbound target and the pinned entries call for. */
void addrbook_maintain(addrbook_t *ab, int64_t now);
/* p finished its handshake: the book learns its key (outbound) or its
 * listening address (inbound), and asks it for addresses. */
void addrbook_peer_ready(addrbook_t *ab, peer_t *p);
/* p is being freed: its address is tried again after a backoff. */
void addrbook_peer_freed(addrbook_t *ab, peer_t *p);
/* The entries, for reports (i < addrbook_size). */
size_t addrbook_size(const addrbook_t *ab);
const addr_entry_t *addrbook_entry(const addrbook_t *ab, size_t i);
/* Entries that are not this node itself. */
size_t addrbook_count_known(const addrbook_t *ab);

/* ---- inbound peers (addrbook_inbound.c) ---- */
enum { INBOUND_OK = 0, INBOUND_PER_IP, INBOUND_PER_GROUP, INBOUND_FULL };
/* May a connection from sa be accepted? INBOUND_OK, after closing another
 * inbound peer to make room if inbound_max are connected (the one the
 * protective rule picks: docs/pithd.md); or why not: sa's IP already has
 * inbound_per_ip connections, its group inbound_per_group (127.0.0.1 and
 * ::1, this machine's own processes, are exempt from both), or every
 * inbound peer is protected. Bans are not looked at here. */
int addrbook_inbound_admit(addrbook_t *ab, const struct sockaddr *sa, int64_t now);
/* The inbound peer the protective rule would close for a newcomer, or
 * NULL if every one is protected. */
peer_t *addrbook_inbound_victim(addrbook_t *ab, int64_t now);

/* ---- bans ---- */
/* Bans the address of sa for cfg->ban_seconds. */
void addrbook_ban_add(addrbook_t *ab, const struct sockaddr *sa, const char *reason);
/* Bans ip (ip_len 4 or 16 bytes) until until_us (wall clock), replacing
 * any ban on it. When cfg->ban_max bans are running, the one that would
 * run out soonest is dropped to make room (logged the first time, counted
 * in stats->bans_evicted): a new ban always holds. 0 or PITH_ENOMEM. Does
 * not close connections. */
int addrbook_ban_set(addrbook_t *ab, const uint8_t *ip, uint8_t ip_len, int64_t until_us, const char *reason);
/* Lifts the ban on ip and lets its addresses be dialled at once; 1 if it
 * was banned, else 0. */
int addrbook_ban_lift(addrbook_t *ab, const uint8_t *ip, uint8_t ip_len);
int addrbook_is_banned(const addrbook_t *ab, const struct sockaddr *sa, int64_t now);
void addrbook_ban_prune(addrbook_t *ab, int64_t now);
/* The bans (running or not), for reports. */
size_t addrbook_ban_count(const addrbook_t *ab);
const ban_t *addrbook_ban_at(const addrbook_t *ab, size_t i);
/* Appends the JSON list of the bans still running. */
void addrbook_ban_list_json(const addrbook_t *ab, int64_t now, pith_buf_t *out);
/* Whether ip is this machine's own default loopback address (127.0.0.1,
 * ::1, or ::ffff:127.0.0.1): local processes, or a tunnel or proxy that
 * forwards many peers, exempt from the per-address limits. */
int addrbook_ip_is_host_loopback(const uint8_t *ip, uint8_t len);
/* The IP address of "IP", "IP:PORT" or "[IPv6]:PORT" (numeric only).
 * 0 or PITH_EINVAL. */
int addrbook_parse_ip(const char *text, uint8_t ip[16], uint8_t *len);

/* ---- peer exchange ---- */
void addrbook_pex_on_request(addrbook_t *ab, peer_t *p);
void addrbook_pex_on_peers(addrbook_t *ab, peer_t *p, const wire_msg_t *m);
void addrbook_pex_tick(addrbook_t *ab, int64_t now);

/* ---- addrbook_ctl.c: the control socket's commands (control.h) ---- */
struct ctl_call;
/* connect HOST:PORT */
int addrbook_ctl_connect(void *ab, struct ctl_call *call);
/* ban PEER [SECONDS [REASON]] */
int addrbook_ctl_ban(void *ab, struct ctl_call *call);
/* unban PEER */
int addrbook_ctl_unban(void *ab, struct ctl_call *call);

/* ---- addrbook_file.c: the book and the bans across restarts ----------------
 * DATA/peers.json, written atomically (temporary file, fsync, rename). */
/* Loads the file if there is one (a damaged file is logged and ignored);
 * from then on the book may be written. */
void addrbook_load(addrbook_t *ab);
/* Writes the file now. 0 or PITH_EIO (err says where). */
int addrbook_save(addrbook_t *ab, pith_err_t *err);
/* Something in the file changed: it is written within a few seconds. */
void addrbook_changed(addrbook_t *ab);
/* Per-tick: writes the file if it changed a while ago. */
void addrbook_save_tick(addrbook_t *ab, int64_t now);
/* At shutdown: writes the file if it was loaded and changed since. */
void addrbook_save_if_changed(addrbook_t *ab);

#endif
