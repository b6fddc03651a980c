/* A connection layer without sockets, for unit tests of the protocol
 * floors (relay, sync, the address book): tests/fake_net.c implements
 * every function of node/net/net.h, and this header adds what a test needs
 * to play the network's part.
 *
 * What it models, as node/net/peer.c does it:
 *   - the peer table: serial numbers, net_peers/net_peer_by_serial, the
 *     inbound/outbound counts, the limits, config and stats it was given;
 *   - the ready event when a test finishes a peer's handshake
 *     (fake_peer_ready, as peer.c's on_auth does once AUTH verifies);
 *   - dispatch of a delivered message (fake_deliver): BYE closes; anything
 *     but HELLO/AUTH before the handshake, or HELLO/AUTH after it, is a
 *     protocol violation (SCORE_PROTOCOL, then closed); PING and PONG are
 *     swallowed; every other message goes up through the message event;
 *   - peer_misbehaved: the score, the ban event at cfg->ban_threshold,
 *     then peer_close with WIRE_BYE_BANNED;
 *   - peer_close: marks the peer CLOSING, sends BYE if a code is given
 *     (not while CONNECTING), fires the gone event once; net_reap frees
 *     closing peers (freed event) whose output length is 0, or all with
 *     force;
 *   - peer_send: refuses while CLOSING (but BYE), encodes with wire_encode
 *     (so a message the real layer would refuse to send fails here too),
 *     keeps the frame for the test, counts bytes and messages, and closes
 *     the peer as too slow if its output length (set by the test) is over
 *     cfg->peer_out_max;
 *   - net_tick: the handshake timeout of CONNECTING and HANDSHAKE peers.
 *
 * What it does not model: sockets, the HELLO/AUTH exchange itself (a
 * test sets the key and features), duplicate-connection settling, the
 * message and byte budgets (fake_deliver only counts what the is_answer
 * event calls an answer and what it calls unsolicited; no flood strikes,
 * no pausing), keepalive PINGs and idle timeouts, the writable event
 * (call the relay's relay_peer_writable yourself), and the reaping after
 * the loop turn (a test calls net_reap). Peer output never drains by
 * itself: peer_out_len is whatever the test set (0 by default).
 *
 * Everything runs on the calling thread; the event base given to net_new
 * is not used. */
#ifndef PITH_TESTS_FAKE_NET_H
#define PITH_TESTS_FAKE_NET_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"

/* ---- peers ---- */

/* addr ("IP:PORT" or "[IPv6]:PORT") as a socket address. 0 or -1. */
int fake_sockaddr(const char *addr, struct sockaddr_storage *ss, socklen_t *len);

/* A new peer at addr ("IP:PORT" or "[IPv6]:PORT") in the HANDSHAKE state,
 * inbound or outbound; no event is fired. NULL if addr does not parse or
 * on OOM. */
peer_t *fake_peer_add(net_t *net, int outbound, const char *addr);
/* Finishes p's handshake as if its HELLO carried pk (NULL: a random key)
 * and features (and p->listen_port, which the test may set before):
 * READY, then the ready event. The event may close p: check p->state. */
void fake_peer_ready(peer_t *p, const uint8_t pk[32], uint64_t features);
/* fake_peer_add, then fake_peer_ready. */
peer_t *fake_peer_new(net_t *net, int outbound, const char *addr, const uint8_t pk[32],
		      uint64_t features);

/* Delivers m to the layer above as peer.c's dispatch does, after a round
 * trip through wire_encode and wire_decode (so it is what a peer could
 * send). 0, or the encoder's or decoder's error (then nothing happens). */
int fake_deliver(peer_t *p, const wire_msg_t *m);

/* fake_deliver of an ANNOUNCE, GET or NOTFOUND (type) of n ids. */
int fake_deliver_ids(peer_t *p, wire_type_t type, const uint8_t (*ids)[32], size_t n);

/* What peer_out_len(p) says from now on. */
void fake_set_out_len(peer_t *p, size_t n);

/* ---- what the layer above did to a peer ---- */

/* Messages sent to p, oldest first (kept until p is freed or cleared). */
size_t fake_sent_count(const peer_t *p);
/* Decodes the i-th message sent to p into out; its byte ranges borrow the
 * kept frame (valid until p is freed or fake_sent_clear). 0 or negative. */
int fake_sent_get(const peer_t *p, size_t i, wire_msg_t *out);
/* Messages of type t sent to p. */
size_t fake_sent_count_type(const peer_t *p, wire_type_t t);
/* Ids in messages of type t sent to p (ANNOUNCE, GET, NOTFOUND, INV:
 * their id lists; EVENT: one each). */
size_t fake_sent_ids(const peer_t *p, wire_type_t t);
/* How many messages of type t sent to p name id (as above). */
size_t fake_sent_has_id(const peer_t *p, wire_type_t t, const uint8_t id[32]);
/* Bundle refs in messages of type t sent to p (BUNDLE_ANNOUNCE and
 * BUNDLE_GET: their refs; BUNDLE: one each). */
size_t fake_sent_refs(const peer_t *p, wire_type_t t);
/* How many messages of type t sent to p name the record pith (as above);
 * the last such ref is copied to ref if not NULL (BUNDLE: its pith number
 * only). */
size_t fake_sent_has_pith(const peer_t *p, wire_type_t t, const char *pith,
			  wire_bundle_ref_t *ref);
void fake_sent_clear(peer_t *p);

/* Bytes given back through peer_refund_bytes, and how many calls. */
uint64_t fake_refunded_bytes(const peer_t *p);
uint64_t fake_refunds(const peer_t *p);
/* Delivered messages the is_answer event called answers, and the others
 * (after the handshake; PING/PONG/BYE not counted). */
uint64_t fake_answers_in(const peer_t *p);
uint64_t fake_unsolicited_in(const peer_t *p);
/* Times the gone event fired for p (1 once closed: never more). */
unsigned fake_gone_count(const peer_t *p);

/* ---- the table ---- */

/* peer_connect calls, and the address of the i-th ("IP:PORT"). */
size_t fake_connects(const net_t *net);
const char *fake_connect_addr(const net_t *net, size_t i);
/* Ban events fired. */
size_t fake_bans(const net_t *net);
/* Peers freed (freed event fired). */
size_t fake_freed(const net_t *net);

#endif
