/* Peer connections (net.h): dialling and accepting, the handshake,
 * reading with budgets, sending, timeouts, misbehaviour, and closing; the
 * rest of the protocol is told through peer_events_t.
 *
 * Callbacks are a few lines that hand off to named functions. A peer is
 * never freed inside its own callbacks: peer_close marks it, and
 * net_reap frees it after the loop turn (once its BYE is flushed or its
 * linger ran out). */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idmap.h"
#include "log.h"

#define READ_CHUNK 65536
#define TURN_MAX_MSGS 256            /* messages per read turn, then yield */
#define TURN_MAX_BYTES (4u << 20)    /* bytes per read turn */
#define CLOSE_LINGER_US 1000000      /* time to flush a BYE */
#define PINGS_PER_WINDOW 5           /* PINGs a peer may send per 10 s */
#define PEER_AGENT "pithd/0.1"

struct net {
	struct event_base *base;
	net_opts_t o;
	const node_config_t *cfg;
	peer_events_t ev;
	struct event *reap_ev;
	uint16_t listen_port;
	uint64_t features;
	char http_url[WIRE_HTTP_URL_MAX + 1];
	int shutting_down;
	peer_t *peers;
	size_t n_out, n_in;
	uint64_t next_serial;
	idmap_t *by_serial; /* key: serial in the first 8 bytes */
};

static log_rl_t rl_close, rl_misbehave;

static void reap_soon(net_t *net)
{
	event_active(net->reap_ev, EV_READ, 0);
}

size_t peer_out_len(const peer_t *p)
{
	return p->bev ? evbuffer_get_length(bufferevent_get_output(p->bev)) : 0;
}

int peer_is_ready(const peer_t *p)
{
	return p->state == PEER_READY;
}

/* ---- sending ------------------------------------------------------------------ */

int peer_send(peer_t *p, const wire_msg_t *m)
{
	static pith_buf_t scratch = PITH_BUF_INIT; /* loop thread only */
	if (!p->bev || (p->state == PEER_CLOSING && m->type != WIRE_BYE))
		return PITH_EIO;
	pith_buf_reset(&scratch);
	int rc = wire_encode(m, &scratch);
	if (rc) {
		log_error("peer %s: cannot encode %s (%s)", p->addr, wire_type_name(m->type),
			  pith_err_name(rc));
		return rc;
	}
	if (bufferevent_write(p->bev, scratch.data, scratch.len))
		return PITH_ENOMEM;
	node_stats_t *st = p->net->o.stats;
	p->bytes_out += scratch.len;
	p->msgs_out++;
	st->bytes_sent += scratch.len;
	st->msgs_sent[m->type]++;
	st->bytes_sent_type[m->type] += scratch.len;
	if (scratch.cap > (1u << 20))
		pith_buf_release(&scratch); /* do not keep a big event's buffer */
	if (p->state != PEER_CLOSING && peer_out_len(p) > (size_t)p->net->cfg->peer_out_max)
		peer_close(p, 0, "too slow: %zu bytes queued for it", peer_out_len(p));
	return 0;
}

/* ---- closing ------------------------------------------------------------------ */

/* BYE reasons are printable ASCII of at most WIRE_REASON_MAX bytes. */
static void bye_reason(const char *in, char out[static WIRE_REASON_MAX + 1])
{
	size_t i = 0;
	for (; in[i] && i < WIRE_REASON_MAX; i++)
		out[i] = ((uint8_t)in[i] >= 0x20 && (uint8_t)in[i] < 0x7f) ? in[i] : '?';
	out[i] = 0;
}

void peer_close(peer_t *p, uint32_t bye_code, const char *fmt, ...)
{
	if (p->state == PEER_CLOSING)
		return;
	net_t *net = p->net;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->close_reason, sizeof(p->close_reason), fmt, ap);
	va_end(ap);
	int was_ready = p->state == PEER_READY;
	if (bye_code && p->state != PEER_CONNECTING) {
		wire_msg_t m = {.type = WIRE_BYE};
		m.u.bye.code = bye_code;
		bye_reason(p->close_reason, m.u.bye.reason);
		p->state = PEER_CLOSING; /* peer_send lets a BYE through */
		peer_send(p, &m);
	}
	p->state = PEER_CLOSING;
	if (p->bev)
		bufferevent_disable(p->bev, EV_READ);
	p->close_deadline_us = node_now_us() + CLOSE_LINGER_US;
	if (was_ready || net->shutting_down)
		log_rl(&rl_close, LOG_INFO, "peer %s%s%s: closed: %s", p->addr,
		       p->id_short[0] ? " node " : "", p->id_short, p->close_reason);
	else
		log_debug("peer %s: closed before the handshake finished: %s", p->addr,
			  p->close_reason);
	if (net->ev.gone)
		net->ev.gone(net->ev.arg, p, was_ready);
	reap_soon(net);
}

/* Frees p's own resources (not its place in the node's lists). */
static void peer_release(peer_t *p)
{
	if (p->bev)
		bufferevent_free(p->bev);
	if (p->cont_ev)
		event_free(p->cont_ev);
	if (p->resume_ev)
		event_free(p->resume_ev);
	wire_reader_free(p->reader);
	free(p);
}

static void peer_free(peer_t *p, int tell)
{
	net_t *net = p->net;
	uint8_t key[32];
	if (p->prev)
		p->prev->next = p->next;
	else
		net->peers = p->next;
	if (p->next)
		p->next->prev = p->prev;
	idmap_key_u64(p->serial, key);
	idmap_del(net->by_serial, key);
	if (p->outbound)
		net->n_out--;
	else
		net->n_in--;
	if (tell && net->ev.freed)
		net->ev.freed(net->ev.arg, p);
	peer_release(p);
}

void net_reap(net_t *net, int force)
{
	int64_t now = node_now_us();
	for (peer_t *p = net->peers, *nx; p; p = nx) {
		nx = p->next;
		if (p->state != PEER_CLOSING)
			continue;
		if (force || peer_out_len(p) == 0 || now >= p->close_deadline_us)
			peer_free(p, 1);
	}
}

/* ---- misbehaviour ----------------------------------------------------------------- */

void peer_misbehaved(peer_t *p, int points, const char *what)
{
	net_t *net = p->net;
	if (p->state == PEER_CLOSING)
		return;
	p->score += points;
	log_rl(&rl_misbehave, LOG_WARN, "peer %s: %s (+%d, score %d)", p->addr, what, points,
	       p->score);
	if (p->score < net->cfg->ban_threshold)
		return;
	if (net->ev.ban)
		net->ev.ban(net->ev.arg, p, what);
	peer_close(p, WIRE_BYE_BANNED, "banned: %s", what);
}

/* ---- budgets ------------------------------------------------------------------------ */

static void tokens_refill(peer_t *p, int64_t now)
{
	const node_config_t *c = p->net->cfg;
	double dt = (double)(now - p->tokens_us) / 1e6;
	p->tokens_us = now;
	p->msg_tokens += dt * (double)c->peer_msg_rate;
	if (p->msg_tokens > (double)c->peer_msg_burst)
		p->msg_tokens = (double)c->peer_msg_burst;
	p->byte_tokens += dt * (double)c->peer_byte_rate;
	if (p->byte_tokens > (double)c->peer_byte_rate)
		p->byte_tokens = (double)c->peer_byte_rate;
}

void peer_refund_bytes(peer_t *p, size_t n)
{
	double cap = (double)p->net->cfg->peer_byte_rate;
	p->byte_tokens += (double)n;
	if (p->byte_tokens > cap)
		p->byte_tokens = cap;
}

/* Stops reading until the budgets refill. */
static void pause_reading(peer_t *p)
{
	const node_config_t *c = p->net->cfg;
	double wait_s = 0.001;
	if (p->msg_tokens < 1)
		wait_s = (1 - p->msg_tokens) / (double)c->peer_msg_rate;
	if (p->byte_tokens < 1) {
		double w = (1 - p->byte_tokens) / (double)c->peer_byte_rate;
		if (w > wait_s)
			wait_s = w;
	}
	if (wait_s > 5)
		wait_s = 5;
	p->read_paused = 1;
	bufferevent_disable(p->bev, EV_READ);
	struct timeval tv = {(time_t)wait_s, (suseconds_t)((wait_s - (double)(time_t)wait_s) * 1e6)};
	evtimer_add(p->resume_ev, &tv);
}

/* What an unsolicited message costs, by the work it asks of this node:
 * an announced id or bundle ref a hash lookup (maybe a bloom-filtered
 * store lookup), a requested id or bundle a store read (done only as the
 * peer reads what it asked for), a catch-up page a scan of up to 4096
 * index keys. With the default budget (5000/s) a peer gets at most 320k
 * announced ids, 80k served ids, 64k announced or 19k requested bundle
 * refs, or 50 pages a second; an honest peer needs a fraction of that
 * (announces and GETs follow the event rate, one page per drained queue,
 * bundle refs a quarter of the budget at most: docs/sync.md, "Bundles"). */
static double msg_cost(const wire_msg_t *m)
{
	switch (m->type) {
	case WIRE_ANNOUNCE:
		return 1.0 + (double)m->u.ids.n / 64.0;
	case WIRE_GET:
		return 1.0 + (double)m->u.ids.n / 16.0;
	case WIRE_BUNDLE_ANNOUNCE:
		return 1.0 + (double)m->u.bundles.n / 16.0;
	case WIRE_BUNDLE_GET:
		return 1.0 + (double)m->u.bundles.n / 4.0;
	case WIRE_INV_REQ:
		return 100.0;
	case WIRE_RECON:
	case WIRE_RECON_BUNDLES:
		/* bounded work per byte (docs/sync.md, "Limits"): up to 2 tree
		 * descents per fingerprint of about 12 bytes */
		return 1.0 + (double)m->u.recon.len / 512.0;
	default:
		return 1.0;
	}
}

/* Charges an unsolicited message; a peer over its budget gets a flood
 * strike (at most one a second) and is paused. */
static void charge(peer_t *p, const wire_msg_t *m, int64_t now)
{
	p->msg_tokens -= msg_cost(m);
	if (p->msg_tokens >= 0)
		return;
	if (now - p->last_flood_us >= 1000000) {
		p->last_flood_us = now;
		p->flood_strikes++;
		char what[96];
		snprintf(what, sizeof(what), "message flood (over %lld messages/s)",
			 (long long)p->net->cfg->peer_msg_rate);
		peer_misbehaved(p, SCORE_FLOOD, what);
	}
	if (p->state != PEER_CLOSING && !p->read_paused)
		pause_reading(p);
}

/* ---- the handshake ---------------------------------------------------------------- */

static void send_hello(peer_t *p)
{
	net_t *net = p->net;
	wire_msg_t m = {.type = WIRE_HELLO};
	m.u.hello.version = WIRE_VERSION;
	m.u.hello.features = net->features;
	/* config_set checked it: at most WIRE_NETID_MAX bytes */
	memcpy(m.u.hello.network_id, net->cfg->network_id, strlen(net->cfg->network_id) + 1);
	memcpy(m.u.hello.node_pk, net->o.pk, 32);
	memcpy(m.u.hello.nonce, p->my_nonce, 32);
	m.u.hello.listen_port = net->listen_port;
	snprintf(m.u.hello.agent, sizeof(m.u.hello.agent), "%s", PEER_AGENT);
	memcpy(m.u.hello.http_url, net->http_url, sizeof(m.u.hello.http_url));
	peer_send(p, &m);
}

static void on_hello(peer_t *p, const wire_msg_t *m)
{
	net_t *net = p->net;
	char esc[80];
	if (p->got_hello) {
		peer_misbehaved(p, SCORE_PROTOCOL, "a second HELLO");
		peer_close(p, WIRE_BYE_PROTOCOL, "a second HELLO");
		return;
	}
	if (m->u.hello.version < WIRE_VERSION) {
		peer_close(p, WIRE_BYE_VERSION, "protocol version %u, this node speaks %d",
			   m->u.hello.version, WIRE_VERSION);
		return;
	}
	if (strcmp(m->u.hello.network_id, net->cfg->network_id)) {
		peer_close(p, WIRE_BYE_NETWORK, "network id '%s', this node is on '%s'",
			   log_escape(m->u.hello.network_id, strlen(m->u.hello.network_id), 64, esc,
				      sizeof(esc)),
			   net->cfg->network_id);
		return;
	}
	if (!memcmp(m->u.hello.node_pk, net->o.pk, 32)) {
		p->is_self = 1;
		peer_close(p, WIRE_BYE_SELF, "connected to itself");
		return;
	}
	p->got_hello = 1;
	memcpy(p->pk, m->u.hello.node_pk, 32);
	memcpy(p->their_nonce, m->u.hello.nonce, 32);
	p->listen_port = m->u.hello.listen_port;
	p->features = m->u.hello.features;
	log_escape(m->u.hello.agent, strlen(m->u.hello.agent), 64, p->agent, sizeof(p->agent));
	pith_hex_encode(p->pk, 8, p->id_short);
	/* the decoder kept it only if it is a plain http(s) URL */
	memcpy(p->http_url, m->u.hello.http_url, sizeof(p->http_url));
	if (m->u.hello.http_url_dropped) {
		static log_rl_t rl_url;
		log_rl(&rl_url, LOG_INFO, "peer %s: its HELLO's http_url is not a plain http(s) URL; "
		       "not listed in /pith-mirrors.json", p->addr);
	}

	uint8_t msg[WIRE_AUTH_MSG_MAX];
	size_t len = wire_auth_message(net->cfg->network_id, net->o.pk, p->my_nonce, p->pk,
				       p->their_nonce, msg);
	wire_msg_t a = {.type = WIRE_AUTH};
	crypto_sign_detached(a.u.auth.sig, NULL, msg, len, net->o.sk);
	peer_send(p, &a);
}

/* Of two authenticated connections to one node, both ends keep the one
 * dialled by the node with the smaller key (the older one if the same
 * node dialled both). Returns 1 if p survives. */
static int settle_duplicate(peer_t *p)
{
	net_t *net = p->net;
	for (peer_t *q = net->peers; q; q = q->next) {
		if (q == p || q->state != PEER_READY || memcmp(q->pk, p->pk, 32))
			continue;
		const uint8_t *ip = p->outbound ? net->o.pk : p->pk;
		const uint8_t *iq = q->outbound ? net->o.pk : q->pk;
		if (memcmp(ip, iq, 32) < 0) {
			peer_close(q, WIRE_BYE_DUPLICATE, "duplicate connection to node %s", q->id_short);
			return 1;
		}
		peer_close(p, WIRE_BYE_DUPLICATE, "duplicate connection to node %s", p->id_short);
		return 0;
	}
	return 1;
}

static void on_auth(peer_t *p, const wire_msg_t *m)
{
	net_t *net = p->net;
	if (!p->got_hello) {
		peer_misbehaved(p, SCORE_PROTOCOL, "AUTH before HELLO");
		peer_close(p, WIRE_BYE_PROTOCOL, "AUTH before HELLO");
		return;
	}
	uint8_t msg[WIRE_AUTH_MSG_MAX];
	size_t len = wire_auth_message(net->cfg->network_id, p->pk, p->their_nonce, net->o.pk,
				       p->my_nonce, msg);
	if (crypto_sign_verify_detached(m->u.auth.sig, msg, len, p->pk)) {
		peer_misbehaved(p, SCORE_BAD_AUTH, "handshake signature does not verify");
		peer_close(p, WIRE_BYE_PROTOCOL, "handshake signature does not verify");
		return;
	}
	if (!settle_duplicate(p))
		return;
	p->state = PEER_READY;
	p->ready_us = node_now_us();
	log_info("peer %s: ready (%s, node %s, listens on %u, %s)", p->addr,
		 p->outbound ? "outbound" : "inbound", p->id_short, p->listen_port, p->agent);
	if (net->ev.ready)
		net->ev.ready(net->ev.arg, p);
}

/* ---- dispatch ---------------------------------------------------------------------- */

static void on_bye(peer_t *p, const wire_msg_t *m)
{
	char esc[WIRE_REASON_MAX * 4 + 8];
	log_escape(m->u.bye.reason, strlen(m->u.bye.reason), WIRE_REASON_MAX, esc, sizeof(esc));
	peer_close(p, 0, "it said goodbye (code %u: %s)", m->u.bye.code, esc);
}

static void on_ping(peer_t *p, const wire_msg_t *m, int64_t now)
{
	if (now - p->pings_window_us >= 10000000) {
		p->pings_window_us = now;
		p->pings_in_window = 0;
	}
	if (++p->pings_in_window > PINGS_PER_WINDOW) {
		if (now - p->last_flood_us >= 1000000) {
			p->last_flood_us = now;
			peer_misbehaved(p, SCORE_FLOOD, "PING flood");
		}
		return;
	}
	wire_msg_t r = {.type = WIRE_PONG};
	r.u.ping.nonce = m->u.ping.nonce;
	peer_send(p, &r);
}

static void dispatch(peer_t *p, const wire_msg_t *m, int64_t now)
{
	net_t *net = p->net;
	net->o.stats->msgs_recv[m->type]++;
	p->last_recv_us = now;
	if (m->type == WIRE_BYE) {
		on_bye(p, m);
		return;
	}
	if (p->state == PEER_HANDSHAKE) {
		if (m->type == WIRE_HELLO)
			on_hello(p, m);
		else if (m->type == WIRE_AUTH)
			on_auth(p, m);
		else {
			char what[80];
			snprintf(what, sizeof(what), "%s before the handshake", wire_type_name(m->type));
			peer_misbehaved(p, SCORE_PROTOCOL, what);
			peer_close(p, WIRE_BYE_PROTOCOL, "%s", what);
		}
		return;
	}
	/* answers to our own requests are free; everything else is budgeted */
	if (!net->ev.is_answer || !net->ev.is_answer(net->ev.arg, p, m)) {
		charge(p, m, now);
		if (p->state == PEER_CLOSING)
			return;
	}
	switch (m->type) {
	case WIRE_HELLO:
	case WIRE_AUTH: {
		char what[80];
		snprintf(what, sizeof(what), "%s after the handshake", wire_type_name(m->type));
		peer_misbehaved(p, SCORE_PROTOCOL, what);
		peer_close(p, WIRE_BYE_PROTOCOL, "%s", what);
		return;
	}
	case WIRE_PING:
		on_ping(p, m, now);
		return;
	case WIRE_PONG:
		if (p->ping_sent_us && m->u.ping.nonce == p->ping_nonce) {
			p->rtt_us = now - p->ping_sent_us;
			p->ping_sent_us = 0;
		}
		return;
	default:
		if (net->ev.message)
			net->ev.message(net->ev.arg, p, m);
		return;
	}
}

/* Reads on from p's socket once its bufferevent's input is drained: up
 * to n bytes, 0 if none are there yet (or the stream ended: the
 * bufferevent, whose socket stays readable, sees the end at its next read
 * and reports it as ever), -1 if p was closed on an error. libevent 2.1
 * reads at most 4 KiB a wakeup (EVBUFFER_MAX_READ), each an epoll_wait,
 * an ioctl and a readv: a catch-up's 40 MB a second cost the loop some
 * 12,000 wakeups a second (docs/performance.md at 262f3c4, session 26). */
static ssize_t read_socket(peer_t *p, uint8_t *buf, size_t n)
{
	evutil_socket_t fd = bufferevent_getfd(p->bev);
	if (fd < 0)
		return 0;
	ssize_t got;
	do
		got = recv(fd, buf, n, MSG_DONTWAIT);
	while (got < 0 && errno == EINTR);
	if (got >= 0)
		return got;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return 0;
	peer_close(p, 0, "socket error: %s", evutil_socket_error_to_string(errno));
	return -1;
}

/* Reads and handles what is buffered, then what the socket holds, within
 * this turn's budget. */
static void peer_on_readable(peer_t *p)
{
	static uint8_t chunk[READ_CHUNK]; /* loop thread only */
	node_stats_t *st = p->net->o.stats;
	if (p->state == PEER_CLOSING || p->state == PEER_CONNECTING || p->held)
		return;
	int64_t now = node_now_us();
	tokens_refill(p, now);
	size_t msgs = 0, bytes = 0;
	struct evbuffer *in = bufferevent_get_input(p->bev);
	for (;;) {
		wire_msg_t m;
		size_t flen = 0;
		int rc = wire_reader_next(p->reader, &m, &flen);
		if (rc < 0) {
			pith_err_t err = {0};
			wire_reader_error(p->reader, &err);
			st->malformed++;
			char what[260];
			snprintf(what, sizeof(what), "malformed frame: %s", err.msg);
			peer_misbehaved(p, SCORE_MALFORMED, what);
			peer_close(p, WIRE_BYE_PROTOCOL, "%s", what);
			return;
		}
		if (rc == 1) {
			p->msgs_in++;
			dispatch(p, &m, now);
			if (p->state == PEER_CLOSING || p->read_paused || p->held)
				return;
			if (++msgs >= TURN_MAX_MSGS)
				break;
			continue;
		}
		size_t avail = evbuffer_get_length(in);
		if (avail && p->byte_tokens < 1) {
			if (!p->read_paused)
				pause_reading(p);
			return;
		}
		if (p->byte_tokens < 1)
			return;
		if (bytes >= TURN_MAX_BYTES)
			break;
		size_t take = avail ? avail : sizeof(chunk);
		size_t room = wire_reader_room(p->reader);
		if (take > room)
			take = room;
		if (take > sizeof(chunk))
			take = sizeof(chunk);
		/* from the socket no more than the byte budget allows (what the
		 * bufferevent buffered already overshoots it by 4 KiB at most) */
		if (!avail && take > (size_t)p->byte_tokens)
			take = (size_t)p->byte_tokens;
		if (!take)
			return;
		ssize_t got = avail ? evbuffer_remove(in, chunk, take) : read_socket(p, chunk, take);
		if (got <= 0)
			return;
		if (wire_reader_feed(p->reader, chunk, (size_t)got))
			continue; /* the sticky error surfaces in wire_reader_next */
		p->bytes_in += (size_t)got;
		st->bytes_recv += (size_t)got;
		p->byte_tokens -= (double)got;
		bytes += (size_t)got;
	}
	/* budget for this turn spent: let other peers run, then go on */
	event_active(p->cont_ev, EV_READ, 0);
}

/* ---- libevent callbacks -------------------------------------------------------------- */

static void on_connected(peer_t *p)
{
	int one = 1, fd = bufferevent_getfd(p->bev);
	/* small ANNOUNCE and GET frames must not wait for Nagle */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	p->state = PEER_HANDSHAKE;
	p->created_us = node_now_us(); /* the handshake clock starts now */
	send_hello(p);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	peer_on_readable(arg);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	peer_t *p = arg;
	net_t *net = p->net;
	if (p->state == PEER_CLOSING)
		reap_soon(net);
	else if (p->state == PEER_READY && net->ev.writable)
		net->ev.writable(net->ev.arg, p);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	peer_t *p = arg;
	if (what & BEV_EVENT_CONNECTED) {
		/* a peer marked for closing while its connect was in flight stays closing */
		if (p->state == PEER_CONNECTING)
			on_connected(p);
		return;
	}
	if (p->state == PEER_CLOSING) {
		reap_soon(p->net);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		/* handle what is still buffered, then see how the stream ended */
		peer_on_readable(p);
		if (p->state == PEER_CLOSING)
			return;
		if (evbuffer_get_length(bufferevent_get_input(p->bev)) == 0 &&
		    wire_reader_finish(p->reader, NULL) == PITH_ETRUNC) {
			peer_misbehaved(p, SCORE_TRUNCATED, "closed the connection inside a frame");
		}
		peer_close(p, 0, "connection closed by the peer");
	} else if (what & BEV_EVENT_ERROR) {
		int e = EVUTIL_SOCKET_ERROR();
		peer_close(p, 0, "%s: %s", p->state == PEER_CONNECTING ? "connect failed" : "socket error",
			   evutil_socket_error_to_string(e));
	}
}

static void cont_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	peer_on_readable(arg);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	peer_t *p = arg;
	if (p->state == PEER_CLOSING)
		return;
	p->read_paused = 0;
	tokens_refill(p, node_now_us());
	if (p->msg_tokens < 1 || p->byte_tokens < 1) {
		pause_reading(p);
		return;
	}
	if (p->held)
		return; /* peer_hold(p, 0) resumes it */
	bufferevent_enable(p->bev, EV_READ);
	peer_on_readable(p);
}

void peer_hold(peer_t *p, int hold)
{
	if (!p->bev || p->state == PEER_CLOSING || p->held == !!hold)
		return;
	p->held = !!hold;
	if (hold) {
		bufferevent_disable(p->bev, EV_READ);
		return;
	}
	if (p->read_paused)
		return; /* the rate budget's timer resumes it */
	bufferevent_enable(p->bev, EV_READ);
	event_active(p->cont_ev, EV_READ, 0); /* what is buffered already, from the loop */
}

/* ---- creating peers ------------------------------------------------------------------- */

static peer_t *peer_new(net_t *net, int fd, int outbound, const struct sockaddr *sa, socklen_t len)
{
	peer_t *p = calloc(1, sizeof(*p));
	if (!p) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	p->net = net;
	p->serial = ++net->next_serial;
	p->outbound = outbound;
	memcpy(&p->sa, sa, len);
	p->salen = len;
	addr_format(sa, p->addr);
	int64_t now = node_now_us();
	p->created_us = p->last_recv_us = p->tokens_us = now;
	p->msg_tokens = (double)net->cfg->peer_msg_burst;
	p->byte_tokens = (double)net->cfg->peer_byte_rate;
	randombytes_buf(p->my_nonce, sizeof(p->my_nonce));
	uint8_t key[32];
	idmap_key_u64(p->serial, key);
	p->bev = bufferevent_socket_new(net->base, fd, BEV_OPT_CLOSE_ON_FREE);
	p->reader = wire_reader_new(&net->o.wlim);
	p->cont_ev = event_new(net->base, -1, 0, cont_cb, p);
	p->resume_ev = evtimer_new(net->base, resume_cb, p);
	if (!p->bev || !p->reader || !p->cont_ev || !p->resume_ev ||
	    idmap_put(net->by_serial, key, p)) {
		if (!p->bev && fd >= 0)
			close(fd);
		idmap_del(net->by_serial, key);
		peer_release(p);
		return NULL;
	}
	/* the input buffer holds at most one whole frame more than the reader */
	bufferevent_setwatermark(p->bev, EV_READ, 0, net->o.wlim.max_buffer);
	/* the write callback fires when output drains below 256 KiB */
	bufferevent_setwatermark(p->bev, EV_WRITE, 256u << 10, 0);
	/* a writev of up to 256 KiB a wakeup, not libevent's 16 KiB: a
	 * peer serving a catch-up sends 40 MB a second */
	bufferevent_set_max_single_write(p->bev, 256u << 10);
	bufferevent_setcb(p->bev, read_cb, write_cb, event_cb, p);
	p->next = net->peers;
	if (net->peers)
		net->peers->prev = p;
	net->peers = p;
	if (outbound)
		net->n_out++;
	else
		net->n_in++;
	return p;
}

peer_t *peer_connect(net_t *net, const struct sockaddr *sa, socklen_t len)
{
	peer_t *p = peer_new(net, -1, 1, sa, len);
	if (!p)
		return NULL;
	p->state = PEER_CONNECTING;
	net->o.stats->connections_out++;
	if (bufferevent_socket_connect(p->bev, sa, (int)len)) {
		peer_close(p, 0, "connect failed at once");
		return p;
	}
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	log_debug("dialling %s", p->addr);
	return p;
}

int peer_accept(net_t *net, int fd, const struct sockaddr *sa, socklen_t len)
{
	peer_t *p = peer_new(net, fd, 0, sa, len);
	if (!p)
		return PITH_ENOMEM;
	net->o.stats->connections_in++;
	p->state = PEER_HANDSHAKE;
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	send_hello(p);
	log_debug("peer %s: accepted", p->addr);
	return 0;
}


/* ---- the table -------------------------------------------------------------------------- */

static void reap_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	net_reap(arg, 0);
}

net_t *net_new(struct event_base *base, const net_opts_t *o, const peer_events_t *ev)
{
	net_t *net = calloc(1, sizeof(*net));
	if (!net)
		return NULL;
	net->base = base;
	net->o = *o;
	net->cfg = o->cfg;
	net->ev = *ev;
	net->by_serial = idmap_new();
	net->reap_ev = event_new(base, -1, 0, reap_cb, net);
	if (!net->by_serial || !net->reap_ev) {
		net_free(net);
		return NULL;
	}
	return net;
}

void net_free_(net_t *net)
{
	if (!net)
		return;
	while (net->peers)
		peer_free(net->peers, 0);
	if (net->reap_ev)
		event_free(net->reap_ev);
	idmap_free(net->by_serial);
	free(net);
}

void net_set_hello(net_t *net, uint16_t listen_port, uint64_t features, const char *http_url)
{
	net->listen_port = listen_port;
	net->features = features;
	snprintf(net->http_url, sizeof(net->http_url), "%s", http_url ? http_url : "");
}

void net_set_shutting_down(net_t *net)
{
	net->shutting_down = 1;
}

int net_is_shutting_down(const net_t *net)
{
	return net->shutting_down;
}

peer_t *net_peers(net_t *net)
{
	return net->peers;
}

peer_t *net_peer_by_serial(net_t *net, uint64_t serial)
{
	uint8_t key[32];
	idmap_key_u64(serial, key);
	return idmap_get(net->by_serial, key);
}

size_t net_count_in(const net_t *net)
{
	return net->n_in;
}

size_t net_count_out(const net_t *net)
{
	return net->n_out;
}

const wire_limits_t *net_limits(const net_t *net)
{
	return &net->o.wlim;
}

const node_config_t *net_config(const net_t *net)
{
	return net->cfg;
}

node_stats_t *net_stats(net_t *net)
{
	return net->o.stats;
}


/* ---- timers ------------------------------------------------------------------------------ */

static void peer_tick(peer_t *p, int64_t now)
{
	const node_config_t *c = p->net->cfg;
	switch (p->state) {
	case PEER_CONNECTING:
	case PEER_HANDSHAKE:
		if (now - p->created_us > c->handshake_timeout_ms * 1000)
			peer_close(p, WIRE_BYE_TIMEOUT, "no handshake within %lld ms",
				   (long long)c->handshake_timeout_ms);
		return;
	case PEER_READY:
		if (p->ping_sent_us && now - p->ping_sent_us > c->ping_timeout_ms * 1000) {
			peer_close(p, WIRE_BYE_TIMEOUT, "no PONG within %lld ms",
				   (long long)c->ping_timeout_ms);
			return;
		}
		if (now - p->last_recv_us > c->idle_timeout_ms * 1000) {
			peer_close(p, WIRE_BYE_TIMEOUT, "silent for %lld ms",
				   (long long)c->idle_timeout_ms);
			return;
		}
		/* a keepalive: PING a peer that has been quiet for an interval */
		if (!p->ping_sent_us && now - p->last_recv_us > c->ping_interval_ms * 1000) {
			wire_msg_t m = {.type = WIRE_PING};
			randombytes_buf(&m.u.ping.nonce, sizeof(m.u.ping.nonce));
			p->ping_nonce = m.u.ping.nonce;
			p->ping_sent_us = now;
			peer_send(p, &m);
		}
		return;
	case PEER_CLOSING:
		if (now >= p->close_deadline_us)
			reap_soon(p->net);
		return;
	}
}

void net_tick(net_t *net, int64_t now)
{
	for (peer_t *p = net->peers; p; p = p->next)
		peer_tick(p, now);
}
