/* Peer exchange (addrbook.h): PEERS_REQ answered with addresses that
 * worked, PEERS taken into the new table by the teller's group, and a
 * request now and then while outbound connections are short. */
#include "addrbook_int.h"

#include <string.h>

#define PEX_MIN_INTERVAL_US 10000000 /* answer one PEERS_REQ per peer per 10 s */
#define PEX_SHARE_AGE_US (24 * 3600 * INT64_C(1000000))

/* ---- peer exchange ----------------------------------------------------------------- */

/* The address a peer can be dialled at, if known. */
static int peer_listen_addr(const peer_t *q, struct sockaddr_storage *ss, socklen_t *len)
{
	if (q->outbound && q->book) {
		memcpy(ss, &q->book->sa, q->book->salen);
		*len = q->book->salen;
		return 0;
	}
	uint8_t ip[16], il;
	uint16_t port;
	if (!q->listen_port || addr_ip((const struct sockaddr *)&q->sa, ip, &il, &port))
		return -1;
	*len = addrbook_sa_make(ss, ip, il, q->listen_port);
	return 0;
}

static void pex_push(wire_msg_t *m, const struct sockaddr *sa, int to_loopback, size_t max)
{
	wire_addr_t a = {0};
	if (m->u.peers.n >= max || addr_ip(sa, a.ip, &a.ip_len, &a.port))
		return;
	if (!addrbook_ip_is_dialable(a.ip, a.ip_len, a.port) || (addrbook_ip_is_loopback(a.ip, a.ip_len) && !to_loopback))
		return;
	for (size_t i = 0; i < m->u.peers.n; i++)
		if (m->u.peers.addrs[i].ip_len == a.ip_len && m->u.peers.addrs[i].port == a.port &&
		    !memcmp(m->u.peers.addrs[i].ip, a.ip, a.ip_len))
			return;
	m->u.peers.addrs[m->u.peers.n++] = a;
}

void addrbook_pex_on_request(addrbook_t *ab, peer_t *p)
{
	int64_t now = node_now_us();
	if (p->pex.answered_us && now - p->pex.answered_us < PEX_MIN_INTERVAL_US)
		return; /* charged as a message; not answered again so soon */
	p->pex.answered_us = now;
	uint8_t pip[16], pl;
	uint16_t pport;
	int to_lo = !addr_ip((const struct sockaddr *)&p->sa, pip, &pl, &pport) &&
		    addrbook_ip_is_loopback(pip, pl);
	wire_msg_t m = {.type = WIRE_PEERS};
	size_t max = net_limits(ab->net)->max_peers;
	struct sockaddr_storage own;
	socklen_t ownlen = 0;
	int has_own = peer_listen_addr(p, &own, &ownlen) == 0;
	/* peers we are connected to first, then addresses that worked lately */
	for (peer_t *q = net_peers(ab->net); q; q = q->next) {
		struct sockaddr_storage ss;
		socklen_t len;
		if (q == p || q->state != PEER_READY || peer_listen_addr(q, &ss, &len))
			continue;
		pex_push(&m, (const struct sockaddr *)&ss, to_lo, max);
	}
	for (size_t i = 0; i < ab->nbook && m.u.peers.n < max; i++) {
		addr_entry_t *a = ab->book[i];
		if (a->self || !a->last_ok_us || now - a->last_ok_us > PEX_SHARE_AGE_US)
			continue;
		if (has_own && addrbook_sa_same((const struct sockaddr *)&a->sa, (const struct sockaddr *)&own))
			continue;
		pex_push(&m, (const struct sockaddr *)&a->sa, to_lo, max);
	}
	/* never tell a peer its own address */
	if (has_own) {
		size_t w = 0;
		wire_addr_t o = {0};
		addr_ip((const struct sockaddr *)&own, o.ip, &o.ip_len, &o.port);
		for (size_t i = 0; i < m.u.peers.n; i++) {
			wire_addr_t *a = &m.u.peers.addrs[i];
			if (!(a->ip_len == o.ip_len && a->port == o.port && !memcmp(a->ip, o.ip, o.ip_len)))
				m.u.peers.addrs[w++] = *a;
		}
		m.u.peers.n = w;
	}
	peer_send(p, &m);
}

void addrbook_pex_on_peers(addrbook_t *ab, peer_t *p, const wire_msg_t *m)
{
	if (!p->pex.requested)
		return; /* unasked: charged as a message and ignored */
	p->pex.requested = 0;
	uint8_t pip[16], pl;
	uint16_t pport;
	int from_lo = !addr_ip((const struct sockaddr *)&p->sa, pip, &pl, &pport) &&
		      addrbook_ip_is_loopback(pip, pl);
	/* at most PEX_NEW_MAX new addresses per answer, into new buckets chosen
	 * by the group of this peer: what one peer says can fill only its share */
	size_t added = 0, known = 0;
	for (size_t i = 0; i < m->u.peers.n && added < PEX_NEW_MAX; i++) {
		const wire_addr_t *a = &m->u.peers.addrs[i];
		if (addrbook_ip_is_loopback(a->ip, a->ip_len) && !from_lo)
			continue;
		struct sockaddr_storage ss;
		socklen_t len = addrbook_sa_make(&ss, a->ip, a->ip_len, a->port);
		if (addrbook_find(ab, (const struct sockaddr *)&ss)) {
			known++;
			continue;
		}
		if (addrbook_add_from(ab, (const struct sockaddr *)&ss, len, ADDR_PEX,
				      (const struct sockaddr *)&p->sa))
			added++;
	}
	if (added)
		log_debug("peer %s: learnt %zu new addresses (%zu known, %zu told)", p->addr, added,
			  known, m->u.peers.n);
}

void addrbook_pex_tick(addrbook_t *ab, int64_t now)
{
	if (now < ab->next_pex_us)
		return;
	ab->next_pex_us = now + ab->cfg->pex_interval_ms * 1000;
	size_t out = 0, ready = 0;
	for (peer_t *p = net_peers(ab->net); p; p = p->next) {
		if (p->outbound && p->state != PEER_CLOSING)
			out++;
		if (p->state == PEER_READY)
			ready++;
	}
	if (out >= (size_t)ab->cfg->outbound_target || !ready)
		return;
	uint32_t k = randombytes_uniform((uint32_t)ready);
	for (peer_t *p = net_peers(ab->net); p; p = p->next) {
		if (p->state != PEER_READY || k--)
			continue;
		wire_msg_t m = {.type = WIRE_PEERS_REQ};
		p->pex.requested = 1;
		peer_send(p, &m);
		return;
	}
}
