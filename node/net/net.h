/* The connection layer: TCP connections to peers (libevent bufferevents),
 * framing, the handshake, budgets, keepalive, misbehaviour points and
 * closing. It knows what HELLO, AUTH, PING, PONG and BYE mean and nothing
 * else: every other message goes up through the peer_events_t it is
 * given, as do a peer becoming ready, draining its output, closing and
 * being freed. It never calls the protocol (relay, sync, the address
 * book) by name; they call down into it (peer_send, peer_close, ...).
 *
 * Per-peer protocol state is owned by the protocol side: peer_t has a slot
 * for each (relay, sync, book) that only its owner reads, sets and frees
 * (on the gone and freed events).
 *
 * A peer is never freed inside its own callbacks: peer_close marks it, and
 * net_reap frees it after the loop turn (once its BYE is flushed or its
 * linger ran out). Peers are referred to across asynchronous steps by
 * their serial number, never by pointer. Loop thread only. */
#ifndef PITH_NODE_PEER_H
#define PITH_NODE_PEER_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#include "addr.h"
#include "config.h"
#include "stats.h"
#include "wire.h"

struct event_base;
struct event;
struct bufferevent;

typedef struct peer peer_t;
typedef struct net net_t;

typedef enum peer_state {
	PEER_CONNECTING = 0, /* outbound TCP connect in progress */
	PEER_HANDSHAKE,      /* HELLO sent, waiting for HELLO and AUTH */
	PEER_READY,          /* authenticated */
	PEER_CLOSING,        /* marked: reaped after the loop turn */
} peer_state_t;

struct peer {
	net_t *net;
	uint64_t serial;
	struct bufferevent *bev;
	struct event *cont_ev;   /* continue reading after a budgeted turn */
	struct event *resume_ev; /* re-enable reading after a budget pause */
	int outbound;
	struct sockaddr_storage sa;
	socklen_t salen;
	char addr[64];           /* "ip:port" of the socket's far end */
	peer_state_t state;
	wire_reader_t *reader;
	int is_self;             /* its HELLO carried this node's own key */

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
	int64_t last_useful_us;  /* last new event or bundle from it (mesh.c): spared by inbound eviction */
	int64_t ping_sent_us;    /* 0: no PING outstanding */
	uint64_t ping_nonce;
	int64_t rtt_us;
	int64_t pings_window_us;
	unsigned pings_in_window;

	/* budgets */
	double msg_tokens, byte_tokens;
	int64_t tokens_us;
	int read_paused;
	int held;                 /* reading stopped by the floor above (peer_hold) */
	int64_t last_flood_us;
	unsigned flood_strikes;

	/* misbehaviour and closing */
	int score;
	char close_reason[160];
	int64_t close_deadline_us;

	/* protocol state, each owned by its module (opaque here) */
	struct relay_peer *relay;  /* relay.c: from ready to freed */
	struct sync_peer *sync;    /* sync.c */
	struct addr_entry *book;   /* addrbook.c: outbound, the address dialled */
	struct pex_peer_state {    /* addrbook.c: peer exchange with it */
		int64_t answered_us; /* last PEERS we sent */
		int requested;       /* we sent PEERS_REQ and wait for PEERS */
	} pex;

	/* counters */
	uint64_t bytes_in, bytes_out, msgs_in, msgs_out;
	uint64_t events_in, events_out, ids_announced_in, ids_announced_out;

	peer_t *prev, *next;
};

/* What the layer above is told. Every function may be NULL. arg is the
 * events' own. */
typedef struct peer_events {
	void *arg;
	/* p finished its handshake (AUTH verified, duplicates settled) */
	void (*ready)(void *arg, peer_t *p);
	/* a message after the handshake, other than PING, PONG and BYE */
	void (*message)(void *arg, peer_t *p, const wire_msg_t *m);
	/* is m an answer to one of this node's own requests? Such messages
	 * are not charged to the peer's message budget */
	int (*is_answer)(void *arg, const peer_t *p, const wire_msg_t *m);
	/* p's output drained below the low-water mark (ready peers only) */
	void (*writable)(void *arg, peer_t *p);
	/* p was marked for closing (was_ready: it had finished the handshake) */
	void (*gone)(void *arg, peer_t *p, int was_ready);
	/* p is about to be freed: release the protocol state in its slots */
	void (*freed)(void *arg, peer_t *p);
	/* p's misbehaviour score reached the threshold: ban its address (p
	 * is closed right after) */
	void (*ban)(void *arg, const peer_t *p, const char *what);
} peer_events_t;

/* What the layer needs of the node: the settings, its identity, and what
 * its HELLO says. Borrowed; must outlive the net. */
typedef struct net_opts {
	const node_config_t *cfg;
	const uint8_t *pk;      /* 32 bytes */
	const uint8_t *sk;      /* 64 bytes */
	wire_limits_t wlim;
	node_stats_t *stats;
} net_opts_t;

/* A connection table on base. NULL on OOM. */
net_t *net_new(struct event_base *base, const net_opts_t *o, const peer_events_t *ev);
/* Frees every peer at once (no events) and the table. NULL-tolerant. */
void net_free_(net_t *net);
#define net_free(x) do { net_free_(x); (x) = NULL; } while (0)

/* What the node's HELLO carries besides its key (set before peers come). */
void net_set_hello(net_t *net, uint16_t listen_port, uint64_t features, const char *http_url);
/* Shutting down: closes are logged as such. */
void net_set_shutting_down(net_t *net);
int net_is_shutting_down(const net_t *net);

/* The first peer of the table (then p->next), every state. */
peer_t *net_peers(net_t *net);
peer_t *net_peer_by_serial(net_t *net, uint64_t serial);
size_t net_count_in(const net_t *net);
size_t net_count_out(const net_t *net);
const wire_limits_t *net_limits(const net_t *net);
const node_config_t *net_config(const net_t *net);
node_stats_t *net_stats(net_t *net);

/* Dials sa (an outbound peer, CONNECTING). The new peer, or NULL. */
peer_t *peer_connect(net_t *net, const struct sockaddr *sa, socklen_t len);
/* Takes an accepted socket (an inbound peer; HELLO is sent). fd is closed
 * on failure. 0 or PITH_ENOMEM. */
int peer_accept(net_t *net, int fd, const struct sockaddr *sa, socklen_t len);

/* Sends one message; closes the peer (as too slow) if its output queue
 * is over the limit. 0, or negative if not sent. */
int peer_send(peer_t *p, const wire_msg_t *m);
/* Marks p for closing with a reason (logged); sends BYE first when code is
 * non-zero. Safe inside p's own callbacks: p is freed after the loop turn. */
void peer_close(peer_t *p, uint32_t bye_code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Adds misbehaviour points; at the threshold, bans the address (the ban
 * event) and closes. */
void peer_misbehaved(peer_t *p, int points, const char *what);
/* Gives back to p's byte budget the n bytes of an item this node asked p
 * for: what we request is bounded by our own windows, not by the budget
 * against floods (docs/wire.md, "Budgets"). */
void peer_refund_bytes(peer_t *p, size_t n);
/* Stops (hold 1) or resumes (hold 0) reading from p, for the floor above:
 * what p sent before waits in the socket and in p's own send buffer,
 * which is how a peer is made to wait while its answers are still being
 * validated (TCP is the queue, not our memory). Independent of the rate
 * budget's pauses. */
void peer_hold(peer_t *p, int hold);
size_t peer_out_len(const peer_t *p);
int peer_is_ready(const peer_t *p);
/* The IP address of p's far end. 0, or -1 if not an inet socket. */
static inline int peer_ip(const peer_t *p, uint8_t ip[16], uint8_t *len)
{
	uint16_t port;
	return addr_ip((const struct sockaddr *)&p->sa, ip, len, &port);
}

/* Per tick: handshake, ping, idle and linger timeouts of every peer. */
void net_tick(net_t *net, int64_t now);
/* Frees closing peers whose output drained or whose linger ran out
 * (force: all of them). */
void net_reap(net_t *net, int force);

#endif
