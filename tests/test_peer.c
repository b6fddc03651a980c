/* node/net/peer.c, the connection layer, over real sockets on one libevent
 * base in one process: a net_t with recording events, and either the test
 * playing the remote node over a socketpair (frames it encodes itself and
 * reads back with a wire_reader) or two nets talking over 127.0.0.1.
 *
 * The loop runs a turn at a time (EVLOOP_ONCE|EVLOOP_NONBLOCK) until the
 * case's condition holds or a few seconds pass. Timeouts are reached by
 * handing net_tick a clock in the future, except the close linger, which
 * net_reap reads from the real clock. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "net.h"
#include "stats.h"
#include "test_util.h"

static struct event_base *base;

/* ---- a net with recording events ----------------------------------------- */

#define REC_MAX 64

typedef struct rec {
	unsigned ready, messages, gone, freed, bans, writable, answers_asked;
	uint64_t msg_types[REC_MAX];
	uint8_t ready_pk[32];
	uint64_t ready_serial;
	int gone_was_ready, gone_is_self, gone_score; /* the last gone peer's */
	char gone_reason[160];
	uint64_t gone_serials[REC_MAX], freed_serials[REC_MAX];
	unsigned freed_before_gone;
	char ban_what[256];
	int answer_type; /* is_answer says yes to this type */
} rec_t;

typedef struct tnet {
	node_config_t cfg;
	uint8_t pk[32], sk[64];
	node_stats_t stats;
	rec_t rec;
	net_t *net;
} tnet_t;

/* Appends v to a record of at most REC_MAX (counting on past it). */
static void rec_push(uint64_t *arr, unsigned *n, uint64_t v)
{
	if (*n < REC_MAX)
		arr[*n] = v;
	(*n)++;
}

static void on_ready(void *arg, peer_t *p)
{
	rec_t *r = arg;
	r->ready++;
	r->ready_serial = p->serial;
	memcpy(r->ready_pk, p->pk, 32);
}

static void on_message(void *arg, peer_t *p, const wire_msg_t *m)
{
	(void)p;
	rec_t *r = arg;
	rec_push(r->msg_types, &r->messages, (uint64_t)m->type);
}

static int on_is_answer(void *arg, const peer_t *p, const wire_msg_t *m)
{
	(void)p;
	rec_t *r = arg;
	r->answers_asked++;
	return r->answer_type && (int)m->type == r->answer_type;
}

static void on_writable(void *arg, peer_t *p)
{
	(void)p;
	((rec_t *)arg)->writable++;
}

static void on_gone(void *arg, peer_t *p, int was_ready)
{
	rec_t *r = arg;
	rec_push(r->gone_serials, &r->gone, p->serial);
	r->gone_was_ready = was_ready;
	r->gone_is_self = p->is_self;
	r->gone_score = p->score;
	snprintf(r->gone_reason, sizeof(r->gone_reason), "%s", p->close_reason);
}

static void on_freed(void *arg, peer_t *p)
{
	rec_t *r = arg;
	int seen = 0;
	for (unsigned i = 0; i < r->gone && i < REC_MAX; i++)
		seen |= r->gone_serials[i] == p->serial;
	if (!seen)
		r->freed_before_gone++;
	rec_push(r->freed_serials, &r->freed, p->serial);
}

static void on_ban(void *arg, const peer_t *p, const char *what)
{
	(void)p;
	rec_t *r = arg;
	r->bans++;
	snprintf(r->ban_what, sizeof(r->ban_what), "%s", what);
}

/* A net with the default settings but for what adjust changes (may be
 * NULL). Heap: node_config_t is large. */
static tnet_t *tnet_new(void (*adjust)(node_config_t *c))
{
	tnet_t *t = calloc(1, sizeof(*t));
	if (!t)
		abort();
	config_defaults(&t->cfg);
	if (adjust)
		adjust(&t->cfg);
	crypto_sign_keypair(t->pk, t->sk);
	net_opts_t o = {.cfg = &t->cfg, .pk = t->pk, .sk = t->sk,
			.wlim = wire_limits_default, .stats = &t->stats};
	peer_events_t ev = {.arg = &t->rec, .ready = on_ready, .message = on_message,
			    .is_answer = on_is_answer, .writable = on_writable,
			    .gone = on_gone, .freed = on_freed, .ban = on_ban};
	t->net = net_new(base, &o, &ev);
	if (!t->net)
		abort();
	return t;
}

static void tnet_free(tnet_t *t)
{
	if (!t)
		return;
	net_free(t->net);
	free(t);
}

/* ---- the remote side, played by the test over a socketpair ---------------- */

#define REMOTE_MSGS 64

typedef struct remote {
	int fd;
	wire_reader_t *reader;
	int eof;
	wire_msg_t *msgs; /* received; byte ranges not kept */
	size_t n;
	uint8_t pk[32], sk[64], nonce[32];
	uint64_t serial; /* of the peer the net made for it */
} remote_t;

static void set_nonblocking(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A socketpair: one end accepted by t's net (as 192.0.2.1:4000, so that the
 * peer has an IP), the other kept by the remote. */
static remote_t *remote_new(tnet_t *t)
{
	remote_t *rm = calloc(1, sizeof(*rm));
	int sv[2];
	if (!rm || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		abort();
	rm->fd = sv[0];
	set_nonblocking(rm->fd);
	rm->reader = wire_reader_new(NULL);
	rm->msgs = calloc(REMOTE_MSGS, sizeof(*rm->msgs));
	if (!rm->reader || !rm->msgs)
		abort();
	crypto_sign_keypair(rm->pk, rm->sk);
	randombytes_buf(rm->nonce, sizeof(rm->nonce));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(4000)};
	inet_pton(AF_INET, "192.0.2.1", &sa.sin_addr);
	set_nonblocking(sv[1]);
	if (peer_accept(t->net, sv[1], (struct sockaddr *)&sa, sizeof(sa)))
		abort();
	rm->serial = net_peers(t->net)->serial; /* the newest comes first */
	return rm;
}

static void remote_free(remote_t *rm)
{
	if (!rm)
		return;
	if (rm->fd >= 0)
		close(rm->fd);
	wire_reader_free(rm->reader);
	free(rm->msgs);
	free(rm);
}

/* Reads what the net sent, without blocking. */
static void remote_read(remote_t *rm)
{
	uint8_t buf[65536];
	while (rm->fd >= 0 && !rm->eof) {
		size_t room = wire_reader_room(rm->reader);
		ssize_t got = read(rm->fd, buf, room < sizeof(buf) ? room : sizeof(buf));
		if (got == 0)
			rm->eof = 1;
		if (got <= 0)
			break;
		if (wire_reader_feed(rm->reader, buf, (size_t)got))
			break;
		wire_msg_t m;
		while (wire_reader_next(rm->reader, &m, NULL) == 1)
			if (rm->n < REMOTE_MSGS)
				rm->msgs[rm->n++] = m;
	}
}

/* The first received message of type, or NULL. */
static const wire_msg_t *remote_got(const remote_t *rm, wire_type_t type)
{
	for (size_t i = 0; i < rm->n; i++)
		if (rm->msgs[i].type == type)
			return &rm->msgs[i];
	return NULL;
}

static void remote_write(remote_t *rm, const void *p, size_t n)
{
	ssize_t w = write(rm->fd, p, n);
	if (w != (ssize_t)n)
		test_fail_(__FILE__, __LINE__, "remote wrote %zd of %zu bytes", w, n);
}

static void remote_send(remote_t *rm, const wire_msg_t *m)
{
	pith_buf_t b = PITH_BUF_INIT;
	if (wire_encode(m, &b))
		test_fail_(__FILE__, __LINE__, "cannot encode %s", wire_type_name(m->type));
	else
		remote_write(rm, b.data, b.len);
	pith_buf_release(&b);
}

/* One loop turn, then what the remote (may be NULL) can read. Sleeps a
 * little so that waiting does not spin. */
static void turn(remote_t *rm)
{
	event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	if (rm)
		remote_read(rm);
	struct timespec ts = {0, 200000};
	nanosleep(&ts, NULL);
}

/* Runs the loop until cond holds or ms pass (the caller checks cond). */
#define WAIT_UNTIL(cond, rm, ms)                                               \
	do {                                                                   \
		int64_t dl_ = node_now_us() + (int64_t)(ms) * 1000;            \
		while (!(cond) && node_now_us() < dl_)                         \
			turn(rm);                                              \
	} while (0)

/* A few turns with nothing expected to happen. */
static void settle(remote_t *rm)
{
	for (int i = 0; i < 50; i++)
		turn(rm);
}

static void hello_of(const remote_t *rm, const char *network_id, wire_msg_t *m)
{
	memset(m, 0, sizeof(*m));
	m->type = WIRE_HELLO;
	m->u.hello.version = WIRE_VERSION;
	/* copied by length: an snprintf here trips -Wformat-truncation at -O3 */
	size_t n = strnlen(network_id, sizeof(m->u.hello.network_id) - 1);
	memcpy(m->u.hello.network_id, network_id, n);
	m->u.hello.network_id[n] = 0;
	memcpy(m->u.hello.node_pk, rm->pk, 32);
	memcpy(m->u.hello.nonce, rm->nonce, 32);
	snprintf(m->u.hello.agent, sizeof(m->u.hello.agent), "test_peer");
}

/* The remote's AUTH for the net's HELLO (which it must have read). */
static void auth_of(const remote_t *rm, const tnet_t *t, wire_msg_t *m)
{
	const wire_msg_t *h = remote_got(rm, WIRE_HELLO);
	uint8_t msg[WIRE_AUTH_MSG_MAX];
	memset(m, 0, sizeof(*m));
	m->type = WIRE_AUTH;
	if (!h)
		return;
	size_t len = wire_auth_message(t->cfg.network_id, rm->pk, rm->nonce, t->pk,
				       h->u.hello.nonce, msg);
	crypto_sign_detached(m->u.auth.sig, NULL, msg, len, rm->sk);
}

/* Waits for the net's HELLO, then sends HELLO and a good AUTH, and waits
 * for the peer to be ready. */
static void remote_handshake(remote_t *rm, tnet_t *t)
{
	wire_msg_t m;
	WAIT_UNTIL(remote_got(rm, WIRE_HELLO), rm, 2000);
	CHECK(remote_got(rm, WIRE_HELLO) != NULL);
	hello_of(rm, t->cfg.network_id, &m);
	remote_send(rm, &m);
	auth_of(rm, t, &m);
	remote_send(rm, &m);
	WAIT_UNTIL(t->rec.ready && remote_got(rm, WIRE_AUTH), rm, 2000);
	CHECK_INT_EQ(t->rec.ready, 1);
}

static peer_t *remote_peer(tnet_t *t, const remote_t *rm)
{
	return net_peer_by_serial(t->net, rm->serial);
}

static void send_type(remote_t *rm, wire_type_t type)
{
	wire_msg_t m;
	memset(&m, 0, sizeof(m));
	m.type = type;
	remote_send(rm, &m);
}

/* A message of n (<= 1024) all-zero ids: ANNOUNCE, GET or NOTFOUND. */
static wire_msg_t ids_msg(wire_type_t type, size_t n)
{
	static const uint8_t ids[1024 * 32];
	wire_msg_t m = {.type = type};
	m.u.ids.ids = ids;
	m.u.ids.n = n;
	return m;
}

/* Writes count copies of m at once; returns the bytes written. */
static size_t remote_send_n(remote_t *rm, const wire_msg_t *m, int count)
{
	pith_buf_t b = PITH_BUF_INIT;
	for (int i = 0; i < count; i++)
		CHECK_INT_EQ(wire_encode(m, &b), 0);
	size_t n = b.len;
	remote_write(rm, b.data, b.len);
	pith_buf_release(&b);
	return n;
}

/* Waits for rm's peer to be closed and freed and the remote to see the
 * end of the stream; checks it was marked once with score points, bans
 * ban events, and that the remote got a BYE with bye_code (0: no BYE). */
static void check_closed(tnet_t *t, remote_t *rm, int score, unsigned bans, uint32_t bye_code)
{
	WAIT_UNTIL(t->rec.freed && rm->eof, rm, 3000);
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.freed, 1);
	CHECK_INT_EQ(t->rec.freed_before_gone, 0);
	CHECK_INT_EQ(t->rec.gone_score, score);
	CHECK_INT_EQ(t->rec.bans, bans);
	CHECK(rm->eof);
	CHECK(remote_peer(t, rm) == NULL);
	const wire_msg_t *bye = remote_got(rm, WIRE_BYE);
	if (bye_code) {
		CHECK(bye != NULL);
		if (bye)
			CHECK_INT_EQ(bye->u.bye.code, bye_code);
	} else {
		CHECK(bye == NULL);
	}
}

/* ---- cases over a socketpair --------------------------------------------- */

TEST(accepted_peer_sends_hello, "an accepted peer is sent a HELLO with the node's key, network and agent")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	CHECK_INT_EQ(net_count_in(t->net), 1);
	CHECK_INT_EQ(net_count_out(t->net), 0);
	CHECK_INT_EQ(t->stats.connections_in, 1);
	WAIT_UNTIL(rm->n >= 1, rm, 2000);
	const wire_msg_t *h = remote_got(rm, WIRE_HELLO);
	CHECK(h != NULL);
	if (h) {
		CHECK_INT_EQ(h->u.hello.version, WIRE_VERSION);
		CHECK_STR_EQ(h->u.hello.network_id, t->cfg.network_id);
		CHECK_MEM_EQ(h->u.hello.node_pk, 32, t->pk, 32);
		CHECK_STR_EQ(h->u.hello.agent, "pithd/0.1");
	}
	CHECK(!peer_is_ready(remote_peer(t, rm)));
	CHECK_INT_EQ(t->rec.ready, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(remote_handshake_makes_ready, "a remote that signs the handshake is ready with its key, and its messages go up")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	CHECK_MEM_EQ(t->rec.ready_pk, 32, rm->pk, 32);
	CHECK_INT_EQ(t->rec.ready_serial, rm->serial);
	peer_t *p = remote_peer(t, rm);
	CHECK(p && peer_is_ready(p));
	CHECK(remote_got(rm, WIRE_AUTH) != NULL);
	send_type(rm, WIRE_PEERS_REQ);
	WAIT_UNTIL(t->rec.messages, rm, 2000);
	CHECK_INT_EQ(t->rec.messages, 1);
	CHECK_INT_EQ(t->rec.msg_types[0], WIRE_PEERS_REQ);
	CHECK_INT_EQ(t->stats.msgs_recv[WIRE_PEERS_REQ], 1);
	if (p) {
		CHECK_INT_EQ(p->msgs_in, 3); /* HELLO, AUTH, PEERS_REQ */
		CHECK_INT_EQ(p->score, 0);
	}
	CHECK_INT_EQ(t->rec.gone, 0);
	remote_free(rm);
	tnet_free(t);
}

static const uint8_t undecodable[] = {0, 0, 0, 1, 0xc1}; /* 0xc1: never used in msgpack */

TEST(malformed_frame_bans, "a frame that does not decode costs SCORE_MALFORMED, fires the ban, says BYE and the peer is freed")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	remote_write(rm, undecodable, sizeof(undecodable));
	check_closed(t, rm, SCORE_MALFORMED, 1, WIRE_BYE_BANNED);
	CHECK_STR_CONTAINS(t->rec.ban_what, "malformed frame");
	CHECK_INT_EQ(t->stats.malformed, 1);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	CHECK_INT_EQ(net_count_in(t->net), 0);
	const wire_msg_t *bye = remote_got(rm, WIRE_BYE);
	if (bye)
		CHECK_STR_CONTAINS(bye->u.bye.reason, "banned: malformed frame");
	remote_free(rm);
	tnet_free(t);
}

TEST(oversized_length_refused, "a length prefix over max_frame is refused as soon as its 4 bytes arrive, as malformed")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	static const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff};
	remote_write(rm, huge, sizeof(huge));
	check_closed(t, rm, SCORE_MALFORMED, 1, WIRE_BYE_BANNED);
	CHECK_INT_EQ(t->stats.malformed, 1);
	remote_free(rm);
	tnet_free(t);
}

TEST(malformed_below_threshold, "below the ban threshold a malformed frame adds its points and closes with BYE PROTOCOL, without a ban")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	remote_write(rm, undecodable, sizeof(undecodable));
	check_closed(t, rm, SCORE_MALFORMED, 0, WIRE_BYE_PROTOCOL);
	remote_free(rm);
	tnet_free(t);
}

TEST(message_before_handshake, "a message before the handshake is a protocol violation: SCORE_PROTOCOL, a ban at the default threshold, never passed up")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	send_type(rm, WIRE_PEERS_REQ);
	check_closed(t, rm, SCORE_PROTOCOL, 1, WIRE_BYE_BANNED);
	CHECK_INT_EQ(t->rec.messages, 0);
	CHECK_STR_CONTAINS(t->rec.ban_what, "PEERS_REQ before the handshake");
	CHECK_INT_EQ(t->rec.gone_was_ready, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(auth_before_hello, "an AUTH before HELLO is a protocol violation")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	send_type(rm, WIRE_AUTH);
	check_closed(t, rm, SCORE_PROTOCOL, 0, WIRE_BYE_PROTOCOL);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "AUTH before HELLO");
	remote_free(rm);
	tnet_free(t);
}

/* The remote sends HELLO (its key, netid, version) and nothing more. */
static void send_hello(remote_t *rm, const char *netid, uint32_t version)
{
	wire_msg_t m;
	hello_of(rm, netid, &m);
	m.u.hello.version = version;
	remote_send(rm, &m);
}

TEST(other_network_closes, "a HELLO with another network id is closed with BYE NETWORK and no points")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	send_hello(rm, "another-net", WIRE_VERSION);
	check_closed(t, rm, 0, 0, WIRE_BYE_NETWORK);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "another-net");
	CHECK_INT_EQ(t->rec.ready, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(hello_with_own_key_is_self, "a HELLO carrying the node's own key marks the peer is_self and closes it with BYE SELF")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	memcpy(rm->pk, t->pk, 32);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	check_closed(t, rm, 0, 0, WIRE_BYE_SELF);
	CHECK_INT_EQ(t->rec.gone_is_self, 1);
	remote_free(rm);
	tnet_free(t);
}

TEST(older_version_closes, "a HELLO with an older protocol version is closed with BYE VERSION and no points")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION - 1);
	check_closed(t, rm, 0, 0, WIRE_BYE_VERSION);
	remote_free(rm);
	tnet_free(t);
}

TEST(second_hello, "a second HELLO during the handshake is a protocol violation")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	check_closed(t, rm, SCORE_PROTOCOL, 0, WIRE_BYE_PROTOCOL);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "a second HELLO");
	remote_free(rm);
	tnet_free(t);
}

TEST(hello_after_handshake, "a HELLO after the handshake is a protocol violation and is not passed up")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	check_closed(t, rm, SCORE_PROTOCOL, 0, WIRE_BYE_PROTOCOL);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "HELLO after the handshake");
	CHECK_INT_EQ(t->rec.messages, 0);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	remote_free(rm);
	tnet_free(t);
}

/* The remote answers the node's HELLO with its HELLO and an AUTH whose
 * signature has a bit flipped (flip_sig) or covers a nonce the node did not
 * send (flip_nonce). */
static void send_bad_auth(remote_t *rm, tnet_t *t, int flip_sig, int flip_nonce)
{
	WAIT_UNTIL(remote_got(rm, WIRE_HELLO), rm, 2000);
	CHECK(rm->n >= 1 && rm->msgs[0].type == WIRE_HELLO);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	rm->msgs[0].u.hello.nonce[0] ^= (uint8_t)flip_nonce;
	wire_msg_t m;
	auth_of(rm, t, &m);
	m.u.auth.sig[0] ^= (uint8_t)flip_sig;
	remote_send(rm, &m);
}

TEST(bad_auth_signature, "an AUTH whose signature does not verify costs SCORE_BAD_AUTH and the peer is never ready")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	send_bad_auth(rm, t, 1, 0);
	check_closed(t, rm, SCORE_BAD_AUTH, 0, WIRE_BYE_PROTOCOL);
	CHECK_INT_EQ(t->rec.ready, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(auth_for_other_nonce, "an AUTH signed over another connection's nonce does not verify, and bans at the default threshold")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	send_bad_auth(rm, t, 0, 1);
	check_closed(t, rm, SCORE_BAD_AUTH, 1, WIRE_BYE_BANNED);
	CHECK_INT_EQ(t->rec.ready, 0);
	CHECK_STR_CONTAINS(t->rec.ban_what, "signature");
	remote_free(rm);
	tnet_free(t);
}

static void small_burst(node_config_t *c)
{
	c->peer_msg_burst = 3;
	c->peer_msg_rate = 10;
}

TEST(flood_is_charged, "messages beyond the burst cost a flood strike and pause reading, which resumes as tokens refill")
{
	tnet_t *t = tnet_new(small_burst);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	/* tokens may have refilled a little since the peer was made: drain */
	for (int i = 0; i < 5; i++)
		send_type(rm, WIRE_PEERS_REQ);
	WAIT_UNTIL(t->rec.messages >= 4, rm, 2000);
	settle(rm);
	CHECK(p != NULL);
	if (p) {
		/* 3 fit the burst; the 4th overdraws, is delivered, and pauses */
		CHECK_INT_EQ(p->flood_strikes, 1);
		CHECK_INT_EQ(p->score, SCORE_FLOOD);
		if (t->rec.messages == 4)
			CHECK_INT_EQ(p->read_paused, 1);
		CHECK(p->state == PEER_READY);
	}
	CHECK(t->rec.messages == 4 || t->rec.messages == 5);
	CHECK_INT_EQ(t->rec.bans, 0);
	/* at 10/s, the pause lasts about 0.2 s; then the 5th is read */
	WAIT_UNTIL(t->rec.messages == 5, rm, 3000);
	CHECK_INT_EQ(t->rec.messages, 5);
	if (p) {
		CHECK_INT_EQ(p->read_paused, 0);
		CHECK_INT_EQ(p->flood_strikes, 1);
	}
	CHECK_INT_EQ(t->rec.gone, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(flood_then_close_not_truncated, "a flooding peer that closes between frames gets its flood strike but no SCORE_TRUNCATED")
{
	tnet_t *t = tnet_new(small_burst);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	wire_msg_t m = {.type = WIRE_PEERS_REQ};
	remote_send_n(rm, &m, 8);
	shutdown(rm->fd, SHUT_WR); /* the stream ends between frames */
	WAIT_UNTIL(t->rec.freed, rm, 3000);
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.gone_score, SCORE_FLOOD);
	CHECK_INT_EQ(t->rec.messages, 8); /* read at the budget's pace, then the end */
	CHECK_STR_CONTAINS(t->rec.gone_reason, "closed by the peer");
	remote_free(rm);
	tnet_free(t);
}

TEST(answers_are_free, "messages is_answer says are answers are not charged to the budget")
{
	tnet_t *t = tnet_new(small_burst);
	t->rec.answer_type = WIRE_NOTFOUND;
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	wire_msg_t m = ids_msg(WIRE_NOTFOUND, 1);
	remote_send_n(rm, &m, 20);
	WAIT_UNTIL(t->rec.messages >= 20, rm, 2000);
	CHECK_INT_EQ(t->rec.messages, 20);
	CHECK(t->rec.answers_asked >= 20);
	if (p) {
		CHECK_INT_EQ(p->flood_strikes, 0);
		CHECK_INT_EQ(p->score, 0);
		CHECK_INT_EQ(p->read_paused, 0);
		CHECK(p->msg_tokens > 2);
	}
	remote_free(rm);
	tnet_free(t);
}

TEST(byte_budget_pauses, "a peer over its byte budget is paused, not punished, and read again as the budget refills")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.peer_byte_rate = 16384; /* bytes a second (and the burst) */
	t->rec.answer_type = WIRE_NOTFOUND;
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	wire_msg_t m = ids_msg(WIRE_NOTFOUND, 32);
	size_t total = remote_send_n(rm, &m, 24); /* about 25 KB */
	int paused = 0;
	int64_t dl = node_now_us() + 4000000;
	while (t->rec.messages < 24 && node_now_us() < dl) {
		turn(rm);
		paused |= p->read_paused;
	}
	CHECK(paused);
	CHECK_INT_EQ(t->rec.messages, 24);
	CHECK_INT_EQ(p->score, 0);
	CHECK_INT_EQ(p->flood_strikes, 0);
	CHECK(p->bytes_in >= total);
	CHECK_INT_EQ(t->rec.gone, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(ping_answered_with_pong, "a PING is answered with a PONG of its nonce and not passed up")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	wire_msg_t m = {.type = WIRE_PING};
	m.u.ping.nonce = 0x1234567890abcdefull;
	remote_send(rm, &m);
	WAIT_UNTIL(remote_got(rm, WIRE_PONG), rm, 2000);
	const wire_msg_t *pong = remote_got(rm, WIRE_PONG);
	CHECK(pong && pong->u.ping.nonce == 0x1234567890abcdefull);
	CHECK_INT_EQ(t->rec.messages, 0);
	CHECK_INT_EQ(t->stats.msgs_recv[WIRE_PING], 1);
	CHECK_INT_EQ(t->stats.msgs_sent[WIRE_PONG], 1);
	remote_free(rm);
	tnet_free(t);
}

TEST(ping_flood, "more than five PINGs in ten seconds are not answered and cost SCORE_FLOOD")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	wire_msg_t m = {.type = WIRE_PING};
	for (int i = 0; i < 8; i++)
		remote_send(rm, &m);
	WAIT_UNTIL(t->stats.msgs_recv[WIRE_PING] == 8, rm, 2000);
	settle(rm);
	CHECK_INT_EQ(t->stats.msgs_sent[WIRE_PONG], 5);
	if (p)
		CHECK_INT_EQ(p->score, SCORE_FLOOD);
	CHECK_INT_EQ(t->rec.messages, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(handshake_timeout, "the handshake timeout closes a peer that never sends HELLO, with BYE TIMEOUT")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	WAIT_UNTIL(remote_got(rm, WIRE_HELLO), rm, 2000);
	net_tick(t->net, node_now_us() + (t->cfg.handshake_timeout_ms - 500) * 1000);
	CHECK_INT_EQ(t->rec.gone, 0);
	net_tick(t->net, node_now_us() + (t->cfg.handshake_timeout_ms + 1) * 1000);
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.gone_was_ready, 0);
	check_closed(t, rm, 0, 0, WIRE_BYE_TIMEOUT);
	remote_free(rm);
	tnet_free(t);
}

TEST(idle_peer_pinged_then_timed_out, "a quiet ready peer is PINGed after ping_interval and closed when no PONG comes within ping_timeout")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	int64_t now = node_now_us() + (t->cfg.ping_interval_ms + 1) * 1000;
	net_tick(t->net, now);
	WAIT_UNTIL(remote_got(rm, WIRE_PING), rm, 2000);
	CHECK(remote_got(rm, WIRE_PING) != NULL);
	CHECK(p && p->ping_sent_us == now);
	net_tick(t->net, now + (t->cfg.ping_timeout_ms + 1) * 1000);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	check_closed(t, rm, 0, 0, WIRE_BYE_TIMEOUT);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "no PONG");
	remote_free(rm);
	tnet_free(t);
}

TEST(idle_peer_closed, "a ready peer silent for idle_timeout is closed with BYE TIMEOUT")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	net_tick(t->net, node_now_us() + (t->cfg.idle_timeout_ms + 1) * 1000);
	check_closed(t, rm, 0, 0, WIRE_BYE_TIMEOUT);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "silent for");
	remote_free(rm);
	tnet_free(t);
}

TEST(slow_reader_closed, "peer_send beyond peer_out_max closes a peer that does not read as too slow, freed when the linger runs out")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.peer_out_max = 1 << 20; /* the smallest config_set allows */
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	wire_msg_t m = ids_msg(WIRE_ANNOUNCE, 1024);
	int sent = 0, refused = 0;
	/* the remote stops reading: the socket buffers fill, then the output */
	for (int i = 0; i < 200 && !t->rec.gone; i++) {
		if (peer_send(p, &m))
			refused++;
		else
			sent++;
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	}
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	CHECK_INT_EQ(refused, 0);
	CHECK(sent > 32); /* over 1 MiB of 32 KiB messages */
	if (t->rec.gone && !t->rec.freed) {
		CHECK_STR_CONTAINS(p->close_reason, "too slow");
		CHECK(peer_send(p, &m) != 0); /* nothing more once closing */
		CHECK(peer_out_len(p) > (size_t)t->cfg.peer_out_max);
	}
	/* the output never drains: the peer is freed after the 1 s linger,
	 * seen by the tick (node.c ticks every 200 ms) */
	int64_t closed = node_now_us();
	WAIT_UNTIL(t->rec.freed, NULL, 300);
	CHECK_INT_EQ(t->rec.freed, 0);
	for (int64_t dl = closed + 3000000; !t->rec.freed && node_now_us() < dl;) {
		net_tick(t->net, node_now_us());
		WAIT_UNTIL(t->rec.freed, NULL, 20);
	}
	CHECK_INT_EQ(t->rec.freed, 1);
	CHECK(node_now_us() - closed >= 900000);
	CHECK(remote_peer(t, rm) == NULL);
	remote_free(rm);
	tnet_free(t);
}

TEST(truncated_close, "a connection closed inside a frame costs SCORE_TRUNCATED and closes without a ban or BYE")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	static const uint8_t part[] = {0, 0, 0, 100, 0x92, 0x06};
	remote_write(rm, part, sizeof(part));
	shutdown(rm->fd, SHUT_WR);
	check_closed(t, rm, SCORE_TRUNCATED, 0, 0);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "closed by the peer");
	remote_free(rm);
	tnet_free(t);
}

TEST(clean_close_no_points, "a connection closed between frames costs nothing")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	shutdown(rm->fd, SHUT_WR);
	check_closed(t, rm, 0, 0, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(messages_before_close_handled, "messages buffered when the remote closes are all handled, past one turn's cap, and cost nothing")
{
	tnet_t *t = tnet_new(NULL);
	t->rec.answer_type = WIRE_NOTFOUND; /* answers: not charged */
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	wire_msg_t m = ids_msg(WIRE_NOTFOUND, 1);
	remote_send_n(rm, &m, 2000); /* TURN_MAX_MSGS is 256 */
	shutdown(rm->fd, SHUT_WR);
	check_closed(t, rm, 0, 0, 0);
	CHECK_INT_EQ(t->rec.messages, 2000);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "closed by the peer");
	remote_free(rm);
	tnet_free(t);
}

TEST(bye_from_remote, "a BYE from the remote closes the peer without a BYE back or points")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	wire_msg_t m = {.type = WIRE_BYE};
	m.u.bye.code = WIRE_BYE_SHUTDOWN;
	snprintf(m.u.bye.reason, sizeof(m.u.bye.reason), "going away");
	remote_send(rm, &m);
	check_closed(t, rm, 0, 0, 0);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "going away");
	remote_free(rm);
	tnet_free(t);
}

/* ---- two nets over 127.0.0.1 --------------------------------------------- */

/* A listening socket on 127.0.0.1 (an ephemeral port) whose accepts go
 * to t's net. */
typedef struct listener {
	tnet_t *t;
	int fd;
	struct event *ev;
	struct sockaddr_in sa;
} listener_t;

static void accept_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	listener_t *l = arg;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int c = accept(fd, (struct sockaddr *)&ss, &len);
	if (c < 0)
		return;
	set_nonblocking(c);
	if (peer_accept(l->t->net, c, (struct sockaddr *)&ss, len))
		test_fail_(__FILE__, __LINE__, "peer_accept failed");
}

static void listener_open(listener_t *l, tnet_t *t)
{
	l->t = t;
	l->sa = (struct sockaddr_in){.sin_family = AF_INET};
	inet_pton(AF_INET, "127.0.0.1", &l->sa.sin_addr);
	socklen_t len = sizeof(l->sa);
	l->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&l->sa, len) || listen(l->fd, 8) ||
	    getsockname(l->fd, (struct sockaddr *)&l->sa, &len))
		abort();
	set_nonblocking(l->fd);
	l->ev = event_new(base, l->fd, EV_READ | EV_PERSIST, accept_cb, l);
	event_add(l->ev, NULL);
	net_set_hello(t->net, ntohs(l->sa.sin_port), 0, NULL);
}

static void listener_close(listener_t *l)
{
	if (l->ev)
		event_free(l->ev);
	if (l->fd > 0)
		close(l->fd);
	memset(l, 0, sizeof(*l));
}

/* from dials to's listener. The new peer (CONNECTING). */
static peer_t *dial(tnet_t *from, const listener_t *to)
{
	peer_t *p = peer_connect(from->net, (const struct sockaddr *)&to->sa, sizeof(to->sa));
	CHECK(p != NULL);
	return p;
}

typedef struct pair {
	tnet_t *a, *b; /* a dials b */
	listener_t la, lb;
	peer_t *pa;    /* a's outbound peer */
} pair_t;

/* Two nets, a dialling b's listening socket; waits for both to be ready. */
static pair_t *pair_new(void)
{
	pair_t *pr = calloc(1, sizeof(*pr));
	if (!pr)
		abort();
	pr->a = tnet_new(NULL);
	pr->b = tnet_new(NULL);
	listener_open(&pr->lb, pr->b);
	pr->pa = dial(pr->a, &pr->lb);
	CHECK_INT_EQ(net_count_out(pr->a->net), 1);
	WAIT_UNTIL(pr->a->rec.ready && pr->b->rec.ready, NULL, 3000);
	return pr;
}

static void pair_free(pair_t *pr)
{
	tnet_free(pr->a);
	tnet_free(pr->b);
	listener_close(&pr->la);
	listener_close(&pr->lb);
	free(pr);
}

TEST(two_nets_handshake, "two nets complete the handshake and both report ready with each other's key")
{
	pair_t *pr = pair_new();
	CHECK_INT_EQ(pr->a->rec.ready, 1);
	CHECK_INT_EQ(pr->b->rec.ready, 1);
	CHECK_MEM_EQ(pr->a->rec.ready_pk, 32, pr->b->pk, 32);
	CHECK_MEM_EQ(pr->b->rec.ready_pk, 32, pr->a->pk, 32);
	CHECK_INT_EQ(pr->a->stats.connections_out, 1);
	CHECK_INT_EQ(pr->b->stats.connections_in, 1);
	peer_t *pb = net_peers(pr->b->net);
	CHECK(pb && pb->listen_port == 0 && !pb->outbound);
	CHECK(pr->pa->outbound && pr->pa->listen_port != 0);
	CHECK_STR_CONTAINS(pr->pa->addr, "127.0.0.1:");
	uint8_t ip[16], iplen = 0;
	CHECK_INT_EQ(peer_ip(pr->pa, ip, &iplen), 0);
	CHECK_INT_EQ(iplen, 4);
	pair_free(pr);
}

TEST(two_nets_message_and_ping, "between two nets a message is delivered to the other's message callback, and a keepalive PING gets a PONG that is not passed up")
{
	pair_t *pr = pair_new();
	wire_msg_t m = {.type = WIRE_PEERS_REQ};
	CHECK_INT_EQ(peer_send(pr->pa, &m), 0);
	WAIT_UNTIL(pr->b->rec.messages, NULL, 2000);
	CHECK_INT_EQ(pr->b->rec.messages, 1);
	CHECK_INT_EQ(pr->b->rec.msg_types[0], WIRE_PEERS_REQ);
	CHECK(pr->a->rec.writable >= 1); /* a's output drained after the send */
	/* b pings a, quiet for an interval (in b's clock) */
	peer_t *pb = net_peers(pr->b->net);
	net_tick(pr->b->net, node_now_us() + (pr->b->cfg.ping_interval_ms + 1) * 1000);
	CHECK(pb->ping_sent_us != 0);
	WAIT_UNTIL(pb->ping_sent_us == 0, NULL, 2000);
	CHECK(pb->ping_sent_us == 0);
	CHECK_INT_EQ(pr->a->stats.msgs_recv[WIRE_PING], 1);
	CHECK_INT_EQ(pr->a->stats.msgs_sent[WIRE_PONG], 1);
	CHECK_INT_EQ(pr->b->stats.msgs_recv[WIRE_PONG], 1);
	CHECK_INT_EQ(pr->a->rec.messages, 0);
	CHECK_INT_EQ(pr->b->rec.messages, 1);
	pair_free(pr);
}

TEST(two_nets_close_and_counters, "a close reaches both sides: gone once then freed once per peer, serials forgotten, byte and message counters add up")
{
	pair_t *pr = pair_new();
	peer_t *pb = net_peers(pr->b->net);
	wire_msg_t m = {.type = WIRE_PEERS_REQ};
	for (int i = 0; i < 3; i++)
		peer_send(pb, &m);
	WAIT_UNTIL(pr->a->rec.messages == 3, NULL, 2000);
	CHECK_INT_EQ(pr->a->rec.messages, 3);
	/* everything sent has been read on the other side */
	CHECK_INT_EQ(pr->pa->bytes_out, pb->bytes_in);
	CHECK_INT_EQ(pb->bytes_out, pr->pa->bytes_in);
	CHECK_INT_EQ(pr->pa->msgs_out, 2);       /* HELLO, AUTH */
	CHECK_INT_EQ(pb->msgs_out, 5);           /* HELLO, AUTH, 3 PEERS_REQ */
	CHECK_INT_EQ(pr->pa->msgs_out, pb->msgs_in);
	CHECK_INT_EQ(pb->msgs_out, pr->pa->msgs_in);
	CHECK_INT_EQ(pr->a->stats.bytes_recv, pb->bytes_out);
	CHECK_INT_EQ(pr->b->stats.bytes_sent, pb->bytes_out);
	uint64_t sa = pr->pa->serial, sb = pb->serial;
	CHECK(net_peer_by_serial(pr->a->net, sa) == pr->pa);
	peer_close(pr->pa, WIRE_BYE_SHUTDOWN, "test over");
	peer_close(pr->pa, WIRE_BYE_SHUTDOWN, "closed twice"); /* no-op */
	CHECK_INT_EQ(pr->a->rec.gone, 1);
	CHECK_INT_EQ(pr->a->rec.gone_was_ready, 1);
	WAIT_UNTIL(pr->a->rec.freed && pr->b->rec.freed, NULL, 3000);
	settle(NULL);
	CHECK_INT_EQ(pr->a->rec.gone, 1);
	CHECK_INT_EQ(pr->a->rec.freed, 1);
	CHECK_INT_EQ(pr->b->rec.gone, 1);
	CHECK_INT_EQ(pr->b->rec.gone_was_ready, 1);
	CHECK_INT_EQ(pr->b->rec.freed, 1);
	CHECK_INT_EQ(pr->a->rec.freed_before_gone, 0);
	CHECK_INT_EQ(pr->b->rec.freed_before_gone, 0);
	CHECK_INT_EQ(pr->a->rec.freed_serials[0], sa);
	CHECK_INT_EQ(pr->b->rec.freed_serials[0], sb);
	CHECK(net_peer_by_serial(pr->a->net, sa) == NULL);
	CHECK(net_peer_by_serial(pr->b->net, sb) == NULL);
	CHECK(net_peers(pr->a->net) == NULL && net_peers(pr->b->net) == NULL);
	CHECK_INT_EQ(net_count_out(pr->a->net), 0);
	CHECK_INT_EQ(net_count_in(pr->b->net), 0);
	CHECK_INT_EQ(pr->b->stats.msgs_recv[WIRE_BYE], 1);
	CHECK_INT_EQ(pr->a->rec.bans + pr->b->rec.bans, 0);
	pair_free(pr);
}

TEST(second_dial_is_duplicate, "a second connection dialled to the same node is closed as a duplicate on both sides; the first is kept")
{
	pair_t *pr = pair_new();
	peer_t *first = pr->pa;
	peer_t *second = dial(pr->a, &pr->lb);
	uint64_t second_serial = second ? second->serial : 0; /* second is freed below */
	WAIT_UNTIL(pr->a->rec.freed && pr->b->rec.freed, NULL, 3000);
	settle(NULL);
	CHECK_INT_EQ(pr->a->rec.ready, 1); /* the duplicate is never reported ready */
	CHECK_INT_EQ(pr->b->rec.ready, 1);
	CHECK_INT_EQ(pr->a->rec.gone, 1);
	CHECK_INT_EQ(pr->b->rec.gone, 1);
	CHECK_INT_EQ(pr->a->rec.gone_was_ready, 0);
	CHECK_STR_CONTAINS(pr->a->rec.gone_reason, "duplicate");
	CHECK_STR_CONTAINS(pr->b->rec.gone_reason, "duplicate");
	CHECK_INT_EQ(pr->a->rec.freed_serials[0], second_serial);
	CHECK(net_peer_by_serial(pr->a->net, first->serial) == first);
	CHECK(peer_is_ready(first));
	CHECK_INT_EQ(net_count_out(pr->a->net), 1);
	CHECK_INT_EQ(net_count_in(pr->b->net), 1);
	CHECK_INT_EQ(pr->a->rec.bans + pr->b->rec.bans, 0);
	pair_free(pr);
}

TEST(crossed_dials_keep_smaller_key, "when two nodes dial each other both keep the connection dialled by the node with the smaller key")
{
	pair_t *pr = pair_new();
	listener_open(&pr->la, pr->a);
	peer_t *back = dial(pr->b, &pr->la); /* b dials a */
	uint64_t ab = pr->pa->serial, ba = back->serial;
	WAIT_UNTIL(pr->a->rec.freed && pr->b->rec.freed, NULL, 3000);
	settle(NULL);
	CHECK_INT_EQ(pr->a->rec.gone, 1);
	CHECK_INT_EQ(pr->b->rec.gone, 1);
	CHECK_INT_EQ(pr->a->rec.freed, 1);
	CHECK_INT_EQ(pr->b->rec.freed, 1);
	int a_smaller = memcmp(pr->a->pk, pr->b->pk, 32) < 0;
	/* a's outbound and b's outbound: the one the smaller key dialled stays */
	peer_t *a_out = net_peer_by_serial(pr->a->net, ab);
	peer_t *b_out = net_peer_by_serial(pr->b->net, ba);
	CHECK((a_out != NULL) == a_smaller);
	CHECK((b_out != NULL) == !a_smaller);
	CHECK_INT_EQ(net_count_in(pr->a->net) + net_count_out(pr->a->net), 1);
	CHECK_INT_EQ(net_count_in(pr->b->net) + net_count_out(pr->b->net), 1);
	CHECK(net_peers(pr->a->net) && peer_is_ready(net_peers(pr->a->net)));
	CHECK(net_peers(pr->b->net) && peer_is_ready(net_peers(pr->b->net)));
	/* both kept the same TCP connection: a's survivor is outbound iff b's is inbound */
	if (net_peers(pr->a->net) && net_peers(pr->b->net))
		CHECK(net_peers(pr->a->net)->outbound != net_peers(pr->b->net)->outbound);
	pair_free(pr);
}

TEST(net_dials_itself, "a net that dials its own listener closes both ends as is_self, with no points")
{
	tnet_t *t = tnet_new(NULL);
	listener_t l = {0};
	listener_open(&l, t);
	dial(t, &l);
	WAIT_UNTIL(t->rec.freed == 2, NULL, 3000);
	settle(NULL);
	CHECK_INT_EQ(t->rec.gone, 2);
	CHECK_INT_EQ(t->rec.freed, 2);
	CHECK_INT_EQ(t->rec.freed_before_gone, 0);
	CHECK_INT_EQ(t->rec.gone_is_self, 1);
	CHECK_INT_EQ(t->rec.gone_score, 0);
	CHECK_INT_EQ(t->rec.ready, 0);
	CHECK_INT_EQ(t->rec.bans, 0);
	CHECK(net_peers(t->net) == NULL);
	tnet_free(t);
	listener_close(&l);
}

TEST(connect_refused, "a dial to a closed port is closed as connect failed, never ready, and freed")
{
	tnet_t *t = tnet_new(NULL);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0); /* bound, not listening: refuses */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len))
		abort();
	peer_t *p = peer_connect(t->net, (struct sockaddr *)&sa, len);
	CHECK(p != NULL);
	WAIT_UNTIL(t->rec.freed, NULL, 2000);
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.gone_was_ready, 0);
	CHECK_INT_EQ(t->rec.freed, 1);
	CHECK_INT_EQ(t->rec.ready, 0);
	CHECK_INT_EQ(net_count_out(t->net), 0);
	close(fd);
	tnet_free(t);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	log_set_level(LOG_ERROR);
	base = event_base_new();
	if (!base)
		return 1;
	RUN(accepted_peer_sends_hello);
	RUN(remote_handshake_makes_ready);
	RUN(malformed_frame_bans);
	RUN(oversized_length_refused);
	RUN(malformed_below_threshold);
	RUN(message_before_handshake);
	RUN(auth_before_hello);
	RUN(other_network_closes);
	RUN(hello_with_own_key_is_self);
	RUN(older_version_closes);
	RUN(second_hello);
	RUN(hello_after_handshake);
	RUN(bad_auth_signature);
	RUN(auth_for_other_nonce);
	RUN(flood_is_charged);
	RUN(flood_then_close_not_truncated);
	RUN(answers_are_free);
	RUN(byte_budget_pauses);
	RUN(ping_answered_with_pong);
	RUN(ping_flood);
	RUN(handshake_timeout);
	RUN(idle_peer_pinged_then_timed_out);
	RUN(idle_peer_closed);
	RUN(slow_reader_closed);
	RUN(truncated_close);
	RUN(clean_close_no_points);
	RUN(messages_before_close_handled);
	RUN(bye_from_remote);
	RUN(two_nets_handshake);
	RUN(two_nets_message_and_ping);
	RUN(two_nets_close_and_counters);
	RUN(second_dial_is_duplicate);
	RUN(crossed_dials_keep_smaller_key);
	RUN(net_dials_itself);
	RUN(connect_refused);
	event_base_free(base);
	return test_done();
}
