/* Helpers shared by the unit tests of node/net/peer.c, the connection
 * layer (test_peer_*.c, one binary each), over real sockets on one libevent
 * base in one process: a net_t with recording events, and either the test
 * playing the remote node over a socketpair (frames it encodes itself and
 * reads back with a wire_reader) or two nets talking over 127.0.0.1.
 *
 * The loop runs a turn at a time (EVLOOP_ONCE|EVLOOP_NONBLOCK) until the
 * case's condition holds or a few seconds pass. Timeouts are reached by
 * handing net_tick a clock in the future, except the close linger, which
 * net_reap reads from the real clock. */
#ifndef PITH_TEST_PEER_UTIL_H
#define PITH_TEST_PEER_UTIL_H

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
static inline void rec_push(uint64_t *arr, unsigned *n, uint64_t v)
{
	if (*n < REC_MAX)
		arr[*n] = v;
	(*n)++;
}

static inline void on_ready(void *arg, peer_t *p)
{
	rec_t *r = arg;
	r->ready++;
	r->ready_serial = p->serial;
	memcpy(r->ready_pk, p->pk, 32);
}

static inline void on_message(void *arg, peer_t *p, const wire_msg_t *m)
{
	(void)p;
	rec_t *r = arg;
	rec_push(r->msg_types, &r->messages, (uint64_t)m->type);
}

static inline int on_is_answer(void *arg, const peer_t *p, const wire_msg_t *m)
{
	(void)p;
	rec_t *r = arg;
	r->answers_asked++;
	return r->answer_type && (int)m->type == r->answer_type;
}

static inline void on_writable(void *arg, peer_t *p)
{
	(void)p;
	((rec_t *)arg)->writable++;
}

static inline void on_gone(void *arg, peer_t *p, int was_ready)
{
	rec_t *r = arg;
	rec_push(r->gone_serials, &r->gone, p->serial);
	r->gone_was_ready = was_ready;
	r->gone_is_self = p->is_self;
	r->gone_score = p->score;
	snprintf(r->gone_reason, sizeof(r->gone_reason), "%s", p->close_reason);
}

static inline void on_freed(void *arg, peer_t *p)
{
	rec_t *r = arg;
	int seen = 0;
	for (unsigned i = 0; i < r->gone && i < REC_MAX; i++)
		seen |= r->gone_serials[i] == p->serial;
	if (!seen)
		r->freed_before_gone++;
	rec_push(r->freed_serials, &r->freed, p->serial);
}

static inline void on_ban(void *arg, const peer_t *p, const char *what)
{
	(void)p;
	rec_t *r = arg;
	r->bans++;
	snprintf(r->ban_what, sizeof(r->ban_what), "%s", what);
}

/* A net with the default settings but for what adjust changes (may be
 * NULL). Heap: node_config_t is large. */
static inline tnet_t *tnet_new(void (*adjust)(node_config_t *c))
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

static inline void tnet_free(tnet_t *t)
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

static inline void set_nonblocking(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* A socketpair: one end accepted by t's net (as 192.0.2.1:4000, so that the
 * peer has an IP), the other kept by the remote. */
static inline remote_t *remote_new(tnet_t *t)
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

static inline void remote_free(remote_t *rm)
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
static inline void remote_read(remote_t *rm)
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
static inline const wire_msg_t *remote_got(const remote_t *rm, wire_type_t type)
{
	for (size_t i = 0; i < rm->n; i++)
		if (rm->msgs[i].type == type)
			return &rm->msgs[i];
	return NULL;
}

static inline void remote_write(remote_t *rm, const void *p, size_t n)
{
	ssize_t w = write(rm->fd, p, n);
	if (w != (ssize_t)n)
		test_fail_(__FILE__, __LINE__, "remote wrote %zd of %zu bytes", w, n);
}

static inline void remote_send(remote_t *rm, const wire_msg_t *m)
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
static inline void turn(remote_t *rm)
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
static inline void settle(remote_t *rm)
{
	for (int i = 0; i < 50; i++)
		turn(rm);
}

static inline void hello_of(const remote_t *rm, const char *network_id, wire_msg_t *m)
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
static inline void auth_of(const remote_t *rm, const tnet_t *t, wire_msg_t *m)
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
static inline void remote_handshake(remote_t *rm, tnet_t *t)
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

static inline peer_t *remote_peer(tnet_t *t, const remote_t *rm)
{
	return net_peer_by_serial(t->net, rm->serial);
}

static inline void send_type(remote_t *rm, wire_type_t type)
{
	wire_msg_t m;
	memset(&m, 0, sizeof(m));
	m.type = type;
	remote_send(rm, &m);
}

/* A message of n (<= 1024) all-zero ids: ANNOUNCE, GET or NOTFOUND. */
static inline wire_msg_t ids_msg(wire_type_t type, size_t n)
{
	static const uint8_t ids[1024 * 32];
	wire_msg_t m = {.type = type};
	m.u.ids.ids = ids;
	m.u.ids.n = n;
	return m;
}

/* Writes count copies of m at once; returns the bytes written. */
static inline size_t remote_send_n(remote_t *rm, const wire_msg_t *m, int count)
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
static inline void check_closed(tnet_t *t, remote_t *rm, int score, unsigned bans, uint32_t bye_code)
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

/* main's start: libsodium, quiet logs, the base; nonzero on failure. */
static inline int peer_test_init(void)
{
	if (sodium_init() < 0)
		return 1;
	log_set_level(LOG_ERROR);
	base = event_base_new();
	if (!base)
		return 1;
	return 0;
}

/* main's end: frees the base, prints the plan; the exit status. */
static inline int peer_test_done(void)
{
	event_base_free(base);
	return test_done();
}

#endif
