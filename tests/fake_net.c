/* node/net/net.h without sockets: see fake_net.h for what it models and what
 * it does not. */
#include "fake_net.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <unistd.h>

#include "buf.h"

/* A peer and what the test reads back. peer_t comes first: a peer_t *
 * handed out is a fake_peer_t *. */
typedef struct fake_peer {
	peer_t p;
	pith_buf_t *frames; /* whole frames sent to it, oldest first */
	size_t nframes, capframes;
	size_t out_len;
	uint64_t refunded, refunds, answers_in, unsolicited_in;
	unsigned gone;
} fake_peer_t;

struct net {
	net_opts_t o;
	const node_config_t *cfg;
	peer_events_t ev;
	uint16_t listen_port;
	uint64_t features;
	int shutting_down;
	peer_t *peers;
	size_t n_out, n_in;
	uint64_t next_serial;
	char (*connects)[64];
	size_t nconnects;
	size_t bans, freed;
};

static fake_peer_t *fp_of(const peer_t *p)
{
	return (fake_peer_t *)p;
}

/* ---- the table ---------------------------------------------------------------- */

net_t *net_new(struct event_base *base, const net_opts_t *o, const peer_events_t *ev)
{
	(void)base;
	net_t *net = calloc(1, sizeof(*net));
	if (!net)
		return NULL;
	net->o = *o;
	net->cfg = o->cfg;
	net->ev = *ev;
	return net;
}

static void frames_release(fake_peer_t *fp)
{
	for (size_t i = 0; i < fp->nframes; i++)
		pith_buf_release(&fp->frames[i]);
	free(fp->frames);
	fp->frames = NULL;
	fp->nframes = fp->capframes = 0;
}

static void peer_free(peer_t *p, int tell)
{
	net_t *net = p->net;
	if (p->prev)
		p->prev->next = p->next;
	else
		net->peers = p->next;
	if (p->next)
		p->next->prev = p->prev;
	if (p->outbound)
		net->n_out--;
	else
		net->n_in--;
	if (tell) {
		net->freed++;
		if (net->ev.freed)
			net->ev.freed(net->ev.arg, p);
	}
	frames_release(fp_of(p));
	free(p);
}

void net_free_(net_t *net)
{
	if (!net)
		return;
	while (net->peers)
		peer_free(net->peers, 0);
	free(net->connects);
	free(net);
}

void net_set_hello(net_t *net, uint16_t listen_port, uint64_t features, const char *http_url)
{
	(void)http_url;
	net->listen_port = listen_port;
	net->features = features;
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
	for (peer_t *p = net->peers; p; p = p->next)
		if (p->serial == serial)
			return p;
	return NULL;
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


/* ---- peers ---------------------------------------------------------------------- */

static peer_t *peer_new(net_t *net, int outbound, const struct sockaddr *sa, socklen_t len)
{
	fake_peer_t *fp = calloc(1, sizeof(*fp));
	if (!fp)
		return NULL;
	peer_t *p = &fp->p;
	p->net = net;
	p->serial = ++net->next_serial;
	p->outbound = outbound;
	memcpy(&p->sa, sa, len);
	p->salen = len;
	addr_format(sa, p->addr);
	p->created_us = p->last_recv_us = p->tokens_us = node_now_us();
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

int fake_sockaddr(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[256];
	uint16_t port;
	memset(ss, 0, sizeof(*ss));
	if (config_split_hostport(addr, host, &port, 0))
		return -1;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		*len = sizeof(*s6);
		return 0;
	}
	return -1;
}

peer_t *fake_peer_add(net_t *net, int outbound, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (fake_sockaddr(addr, &ss, &len))
		return NULL;
	peer_t *p = peer_new(net, outbound, (const struct sockaddr *)&ss, len);
	if (p)
		p->state = PEER_HANDSHAKE;
	return p;
}

void fake_peer_ready(peer_t *p, const uint8_t pk[32], uint64_t features)
{
	net_t *net = p->net;
	p->got_hello = 1;
	if (pk)
		memcpy(p->pk, pk, 32);
	else
		randombytes_buf(p->pk, 32);
	pith_hex_encode(p->pk, 8, p->id_short);
	p->features = features;
	p->state = PEER_READY;
	p->ready_us = node_now_us();
	if (net->ev.ready)
		net->ev.ready(net->ev.arg, p);
}

peer_t *fake_peer_new(net_t *net, int outbound, const char *addr, const uint8_t pk[32],
		      uint64_t features)
{
	peer_t *p = fake_peer_add(net, outbound, addr);
	if (p)
		fake_peer_ready(p, pk, features);
	return p;
}

peer_t *peer_connect(net_t *net, const struct sockaddr *sa, socklen_t len)
{
	char (*nc)[64] = realloc(net->connects, (net->nconnects + 1) * sizeof(*nc));
	if (!nc)
		return NULL;
	net->connects = nc;
	peer_t *p = peer_new(net, 1, sa, len);
	if (!p)
		return NULL;
	memcpy(net->connects[net->nconnects++], p->addr, 64);
	p->state = PEER_CONNECTING;
	net->o.stats->connections_out++;
	return p;
}

int peer_accept(net_t *net, int fd, const struct sockaddr *sa, socklen_t len)
{
	if (fd >= 0)
		close(fd);
	peer_t *p = peer_new(net, 0, sa, len);
	if (!p)
		return PITH_ENOMEM;
	net->o.stats->connections_in++;
	p->state = PEER_HANDSHAKE;
	return 0;
}


size_t peer_out_len(const peer_t *p)
{
	return fp_of(p)->out_len;
}

void fake_set_out_len(peer_t *p, size_t n)
{
	fp_of(p)->out_len = n;
}

int peer_is_ready(const peer_t *p)
{
	return p->state == PEER_READY;
}

void peer_hold(peer_t *p, int hold)
{
	p->held = !!hold; /* a fake connection has nothing to stop reading */
}

void peer_refund_bytes(peer_t *p, size_t n)
{
	fp_of(p)->refunded += n;
	fp_of(p)->refunds++;
}

/* ---- sending and closing --------------------------------------------------------- */

int peer_send(peer_t *p, const wire_msg_t *m)
{
	fake_peer_t *fp = fp_of(p);
	if (p->state == PEER_CLOSING && m->type != WIRE_BYE)
		return PITH_EIO;
	if (fp->nframes == fp->capframes) {
		size_t cap = fp->capframes ? fp->capframes * 2 : 16;
		pith_buf_t *nf = realloc(fp->frames, cap * sizeof(*nf));
		if (!nf)
			return PITH_ENOMEM;
		fp->frames = nf;
		fp->capframes = cap;
	}
	pith_buf_t *f = &fp->frames[fp->nframes];
	*f = (pith_buf_t)PITH_BUF_INIT;
	int rc = wire_encode(m, f);
	if (rc) {
		pith_buf_release(f);
		return rc;
	}
	fp->nframes++;
	node_stats_t *st = p->net->o.stats;
	p->bytes_out += f->len;
	p->msgs_out++;
	st->bytes_sent += f->len;
	st->msgs_sent[m->type]++;
	st->bytes_sent_type[m->type] += f->len;
	if (p->state != PEER_CLOSING && peer_out_len(p) > (size_t)p->net->cfg->peer_out_max)
		peer_close(p, 0, "too slow: %zu bytes queued for it", peer_out_len(p));
	return 0;
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
		snprintf(m.u.bye.reason, sizeof(m.u.bye.reason), "closed");
		p->state = PEER_CLOSING;
		peer_send(p, &m);
	}
	p->state = PEER_CLOSING;
	fp_of(p)->gone++;
	if (net->ev.gone)
		net->ev.gone(net->ev.arg, p, was_ready);
}

void net_reap(net_t *net, int force)
{
	for (peer_t *p = net->peers, *nx; p; p = nx) {
		nx = p->next;
		if (p->state == PEER_CLOSING && (force || peer_out_len(p) == 0))
			peer_free(p, 1);
	}
}

void peer_misbehaved(peer_t *p, int points, const char *what)
{
	net_t *net = p->net;
	if (p->state == PEER_CLOSING)
		return;
	p->score += points;
	if (p->score < net->cfg->ban_threshold)
		return;
	net->bans++;
	if (net->ev.ban)
		net->ev.ban(net->ev.arg, p, what);
	peer_close(p, WIRE_BYE_BANNED, "banned: %s", what);
}

void net_tick(net_t *net, int64_t now)
{
	for (peer_t *p = net->peers; p; p = p->next)
		if ((p->state == PEER_CONNECTING || p->state == PEER_HANDSHAKE) &&
		    now - p->created_us > net->cfg->handshake_timeout_ms * 1000)
			peer_close(p, WIRE_BYE_TIMEOUT, "no handshake within %lld ms",
				   (long long)net->cfg->handshake_timeout_ms);
}

/* ---- delivering -------------------------------------------------------------------- */

static void protocol_violation(peer_t *p, const char *when, wire_type_t t)
{
	char what[80];
	snprintf(what, sizeof(what), "%s %s the handshake", wire_type_name(t), when);
	peer_misbehaved(p, SCORE_PROTOCOL, what);
	peer_close(p, WIRE_BYE_PROTOCOL, "%s", what);
}

static void dispatch(peer_t *p, const wire_msg_t *m)
{
	net_t *net = p->net;
	net->o.stats->msgs_recv[m->type]++;
	p->msgs_in++;
	p->last_recv_us = node_now_us();
	if (m->type == WIRE_BYE) {
		peer_close(p, 0, "it said goodbye (code %u)", m->u.bye.code);
		return;
	}
	if (p->state != PEER_READY) {
		/* the handshake is the test's (fake_peer_ready) */
		if (p->state == PEER_HANDSHAKE && m->type != WIRE_HELLO && m->type != WIRE_AUTH)
			protocol_violation(p, "before", m->type);
		return;
	}
	if (m->type == WIRE_HELLO || m->type == WIRE_AUTH) {
		protocol_violation(p, "after", m->type);
		return;
	}
	if (m->type == WIRE_PING || m->type == WIRE_PONG)
		return;
	if (net->ev.is_answer && net->ev.is_answer(net->ev.arg, p, m))
		fp_of(p)->answers_in++;
	else
		fp_of(p)->unsolicited_in++;
	if (net->ev.message)
		net->ev.message(net->ev.arg, p, m);
}

int fake_deliver(peer_t *p, const wire_msg_t *m)
{
	pith_buf_t f = PITH_BUF_INIT;
	wire_msg_t d;
	pith_err_t err = {0};
	int rc = wire_encode(m, &f);
	if (!rc)
		rc = wire_decode(f.data + WIRE_HEADER_LEN, f.len - WIRE_HEADER_LEN,
				 &p->net->o.wlim, &d, &err);
	if (!rc) {
		p->bytes_in += f.len;
		p->net->o.stats->bytes_recv += f.len;
		dispatch(p, &d);
	}
	pith_buf_release(&f);
	return rc;
}

int fake_deliver_ids(peer_t *p, wire_type_t type, const uint8_t (*ids)[32], size_t n)
{
	wire_msg_t m = {.type = type};
	m.u.ids.ids = (const uint8_t *)ids;
	m.u.ids.n = n;
	return fake_deliver(p, &m);
}

/* ---- reading back -------------------------------------------------------------------- */

size_t fake_sent_count(const peer_t *p)
{
	return fp_of(p)->nframes;
}

int fake_sent_get(const peer_t *p, size_t i, wire_msg_t *out)
{
	const fake_peer_t *fp = fp_of(p);
	if (i >= fp->nframes)
		return PITH_ENOTFOUND;
	const pith_buf_t *f = &fp->frames[i];
	return wire_decode(f->data + WIRE_HEADER_LEN, f->len - WIRE_HEADER_LEN, &p->net->o.wlim,
			   out, NULL);
}

size_t fake_sent_count_type(const peer_t *p, wire_type_t t)
{
	size_t k = 0;
	wire_msg_t m;
	for (size_t i = 0; i < fake_sent_count(p); i++)
		k += fake_sent_get(p, i, &m) == 0 && m.type == t;
	return k;
}

/* The ids m names (see fake_sent_ids); n 0 for other types. */
static const uint8_t *msg_ids(const wire_msg_t *m, size_t *n)
{
	switch (m->type) {
	case WIRE_ANNOUNCE:
	case WIRE_GET:
	case WIRE_NOTFOUND:
		*n = m->u.ids.n;
		return m->u.ids.ids;
	case WIRE_INV:
		*n = m->u.inv.n;
		return m->u.inv.ids;
	case WIRE_EVENT:
		*n = 1;
		return m->u.event.id;
	default:
		*n = 0;
		return NULL;
	}
}

size_t fake_sent_ids(const peer_t *p, wire_type_t t)
{
	size_t k = 0, n;
	wire_msg_t m;
	for (size_t i = 0; i < fake_sent_count(p); i++)
		if (fake_sent_get(p, i, &m) == 0 && m.type == t && msg_ids(&m, &n))
			k += n;
	return k;
}

size_t fake_sent_has_id(const peer_t *p, wire_type_t t, const uint8_t id[32])
{
	size_t k = 0, n;
	wire_msg_t m;
	for (size_t i = 0; i < fake_sent_count(p); i++) {
		if (fake_sent_get(p, i, &m) || m.type != t)
			continue;
		const uint8_t *ids = msg_ids(&m, &n);
		for (size_t j = 0; j < n; j++)
			if (!memcmp(ids + 32 * j, id, 32)) {
				k++;
				break;
			}
	}
	return k;
}

/* The bundle refs m names (see fake_sent_refs); n 0 for other types.
 * one: room for the ref of a BUNDLE. */
static const wire_bundle_ref_t *msg_refs(const wire_msg_t *m, size_t *n, wire_bundle_ref_t *one)
{
	switch (m->type) {
	case WIRE_BUNDLE_ANNOUNCE:
	case WIRE_BUNDLE_GET:
		*n = m->u.bundles.n;
		return m->u.bundles.refs;
	case WIRE_BUNDLE:
		memset(one, 0, sizeof(*one));
		snprintf(one->pith_number, sizeof(one->pith_number), "%s", m->u.bundle.pith_number);
		*n = 1;
		return one;
	default:
		*n = 0;
		return NULL;
	}
}

size_t fake_sent_refs(const peer_t *p, wire_type_t t)
{
	size_t k = 0, n;
	wire_msg_t m;
	wire_bundle_ref_t one;
	for (size_t i = 0; i < fake_sent_count(p); i++)
		if (fake_sent_get(p, i, &m) == 0 && m.type == t && msg_refs(&m, &n, &one))
			k += n;
	return k;
}

size_t fake_sent_has_pith(const peer_t *p, wire_type_t t, const char *pith,
			  wire_bundle_ref_t *ref)
{
	size_t k = 0, n;
	wire_msg_t m;
	wire_bundle_ref_t one;
	for (size_t i = 0; i < fake_sent_count(p); i++) {
		if (fake_sent_get(p, i, &m) || m.type != t)
			continue;
		const wire_bundle_ref_t *refs = msg_refs(&m, &n, &one);
		for (size_t j = 0; j < n; j++)
			if (!strcmp(refs[j].pith_number, pith)) {
				if (ref)
					*ref = refs[j];
				k++;
				break;
			}
	}
	return k;
}

void fake_sent_clear(peer_t *p)
{
	frames_release(fp_of(p));
}

uint64_t fake_refunded_bytes(const peer_t *p)
{
	return fp_of(p)->refunded;
}

uint64_t fake_refunds(const peer_t *p)
{
	return fp_of(p)->refunds;
}

uint64_t fake_answers_in(const peer_t *p)
{
	return fp_of(p)->answers_in;
}

uint64_t fake_unsolicited_in(const peer_t *p)
{
	return fp_of(p)->unsolicited_in;
}

unsigned fake_gone_count(const peer_t *p)
{
	return fp_of(p)->gone;
}

size_t fake_connects(const net_t *net)
{
	return net->nconnects;
}

const char *fake_connect_addr(const net_t *net, size_t i)
{
	return i < net->nconnects ? net->connects[i] : NULL;
}

size_t fake_bans(const net_t *net)
{
	return net->bans;
}

size_t fake_freed(const net_t *net)
{
	return net->freed;
}
