/* The address book (addrbook.h): where peers may be found, when to try
 * them next, bans, and peer exchange. */
#include "addrbook_int.h"

#include <arpa/inet.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"

#define PEX_MIN_INTERVAL_US 10000000 /* answer one PEERS_REQ per peer per 10 s */
#define PEX_SHARE_AGE_US (24 * 3600 * INT64_C(1000000))
#define BANS_MAX 4096

static log_rl_t rl_ban;


static socklen_t sa_make(struct sockaddr_storage *ss, const uint8_t *ip, uint8_t len, uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (len == 4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, ip, 4);
		s4->sin_port = htons(port);
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	s6->sin6_family = AF_INET6;
	memcpy(&s6->sin6_addr, ip, 16);
	s6->sin6_port = htons(port);
	return sizeof(*s6);
}

static int ip_is_loopback(const uint8_t *ip, uint8_t len)
{
	static const uint8_t v6lo[16] = {[15] = 1};
	return len == 4 ? ip[0] == 127 : !memcmp(ip, v6lo, 16);
}

/* Addresses a node may dial: not unspecified, not multicast, a port. */
static int ip_is_dialable(const uint8_t *ip, uint8_t len, uint16_t port)
{
	static const uint8_t zero[16];
	if (!port || !memcmp(ip, zero, len))
		return 0;
	if (len == 4)
		return ip[0] < 224 && ip[0] != 0;
	return ip[0] != 0xff;
}

static int sa_same(const struct sockaddr *a, const struct sockaddr *b)
{
	uint8_t ia[16], ib[16], la, lb;
	uint16_t pa, pb;
	if (addr_ip(a, ia, &la, &pa) || addr_ip(b, ib, &lb, &pb))
		return 0;
	return la == lb && pa == pb && !memcmp(ia, ib, la);
}

addr_entry_t *addrbook_add(addrbook_t *ab, const struct sockaddr *sa, socklen_t len, int source)
{
	uint8_t ip[16], il;
	uint16_t port;
	if (addr_ip(sa, ip, &il, &port) || !ip_is_dialable(ip, il, port))
		return NULL;
	for (size_t i = 0; i < ab->nbook; i++)
		if (sa_same((const struct sockaddr *)&ab->book[i]->sa, sa)) {
			if (source == ADDR_CONFIG)
				ab->book[i]->pinned = 1;
			return ab->book[i];
		}
	if (source != ADDR_CONFIG && ab->nbook >= (size_t)ab->cfg->addrbook_max)
		return NULL;
	addr_entry_t **nb = realloc(ab->book, (ab->nbook + 1) * sizeof(*nb));
	if (!nb)
		return NULL;
	ab->book = nb;
	addr_entry_t *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	memcpy(&a->sa, sa, len);
	a->salen = len;
	a->source = source;
	a->pinned = source == ADDR_CONFIG;
	addr_format(sa, a->str);
	ab->book[ab->nbook++] = a;
	addrbook_changed(ab);
	log_debug("address book: added %s (%s)", a->str,
		  source == ADDR_CONFIG ? "configured" : source == ADDR_PEX ? "peer exchange" : "inbound");
	return a;
}

/* ---- names ------------------------------------------------------------------------------ */

/* A resolved HOST:PORT into the book. */
static int add_resolved(addrbook_t *ab, const resolve_addr_t *ra, const char *hostport, int pinned,
			pith_err_t *err)
{
	addr_entry_t *a = addrbook_add(ab, (const struct sockaddr *)&ra->ss, ra->len,
				       pinned ? ADDR_CONFIG : ADDR_PEX);
	if (!a)
		return pith_err_set(err, PITH_EINVAL, "%s is not a dialable address", hostport);
	a->next_attempt_us = 0;
	if (pinned == ADDRBOOK_KEEP && !a->kept) {
		a->kept = 1;
		addrbook_changed(ab);
	}
	return 0;
}

static void lookup_free(addrbook_t *ab, addr_lookup_t *lk)
{
	for (addr_lookup_t **pp = &ab->lookups; *pp; pp = &(*pp)->next)
		if (*pp == lk) {
			*pp = lk->next;
			ab->nlookups--;
			break;
		}
	resolve_cancel(lk->req);
	free(lk);
}

static void lookup_start(addrbook_t *ab, addr_lookup_t *lk);

/* The answer for a name, on the loop: into the book, the `connect` that
 * asked answered; a configured name that does not resolve (DNS not up yet
 * at boot, say) is asked again after a backoff, as a dial would be. */
static void on_resolved(void *arg, const resolve_addr_t *ra, const pith_err_t *rerr)
{
	addr_lookup_t *lk = arg;
	addrbook_t *ab = lk->ab;
	pith_err_t err = {0};
	lk->req = NULL;
	int rc = ra ? add_resolved(ab, ra, lk->hostport, lk->pinned, &err) : rerr->code;
	if (!ra)
		err = *rerr;
	if (lk->serial) {
		addrbook_ctl_connect_done(ab, lk->serial, lk->hostport, rc, &err);
	} else if (rc && lk->pinned) {
		const node_config_t *c = ab->cfg;
		int64_t delay = c->reconnect_min_ms;
		for (unsigned i = 0; i < lk->failures && delay < c->reconnect_max_ms; i++)
			delay *= 2;
		if (delay > c->reconnect_max_ms)
			delay = c->reconnect_max_ms;
		lk->failures++;
		lk->next_us = node_now_us() + delay * 1000;
		static log_rl_t rl;
		log_rl(&rl, LOG_WARN, "peer %s: %s; trying again in %lld ms", lk->hostport, err.msg,
		       (long long)delay);
		return;
	} else if (rc) {
		log_warn("peer %s: %s", lk->hostport, err.msg);
	} else {
		log_info("peer %s resolved", lk->hostport);
		addrbook_maintain(ab, node_now_us());
	}
	lookup_free(ab, lk);
}

static void lookup_start(addrbook_t *ab, addr_lookup_t *lk)
{
	resolve_addr_t now;
	pith_err_t err = {0};
	int rc = resolve_hostport(ab->res, lk->hostport, &now, on_resolved, lk, &lk->req, &err);
	if (rc == 0)
		return; /* on_resolved follows */
	if (rc == RESOLVE_DONE)
		on_resolved(lk, &now, NULL);
	else
		on_resolved(lk, NULL, &err);
}

/* Configured names that failed are looked up again when due. */
static void lookups_tick(addrbook_t *ab, int64_t now)
{
	for (addr_lookup_t *lk = ab->lookups, *nx; lk; lk = nx) {
		nx = lk->next;
		if (!lk->req && lk->next_us <= now)
			lookup_start(ab, lk);
	}
}

int addrbook_add_hostport_for(addrbook_t *ab, const char *hostport, int pinned, uint64_t serial,
			      pith_err_t *err)
{
	resolve_addr_t now;
	char host[256];
	uint16_t port;
	if (config_split_hostport(hostport, host, &port, 0))
		return pith_err_set(err, PITH_EINVAL, "'%s' is not HOST:PORT", hostport);
	if (!ab->res) { /* numeric only */
		if (resolve_numeric(hostport, &now))
			return pith_err_set(err, PITH_EINVAL, "cannot resolve %s: names are not "
					    "looked up here", host);
		return add_resolved(ab, &now, hostport, pinned, err);
	}
	if (ab->nlookups >= ADDR_LOOKUPS_MAX)
		return pith_err_set(err, PITH_ETOOBIG, "%d names are being looked up already",
				    ADDR_LOOKUPS_MAX);
	addr_lookup_t *lk = calloc(1, sizeof(*lk));
	if (!lk)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	lk->ab = ab;
	snprintf(lk->hostport, sizeof(lk->hostport), "%s", hostport);
	lk->pinned = pinned;
	lk->serial = serial;
	int rc = resolve_hostport(ab->res, hostport, &now, on_resolved, lk, &lk->req, err);
	if (rc < 0 || rc == RESOLVE_DONE) {
		free(lk);
		return rc < 0 ? rc : add_resolved(ab, &now, hostport, pinned, err);
	}
	lk->next = ab->lookups;
	ab->lookups = lk;
	ab->nlookups++;
	return ADDRBOOK_PENDING;
}

int addrbook_add_hostport(addrbook_t *ab, const char *hostport, int pinned, pith_err_t *err)
{
	int rc = addrbook_add_hostport_for(ab, hostport, pinned, 0, err);
	return rc == ADDRBOOK_PENDING ? 0 : rc;
}

int addrbook_dial(addrbook_t *ab, addr_entry_t *a)
{
	peer_t *p = peer_connect(ab->net, (const struct sockaddr *)&a->sa, a->salen);
	if (!p)
		return PITH_ENOMEM;
	p->book = a;
	a->peer_serial = p->serial;
	return p->state == PEER_CLOSING ? PITH_EIO : 0;
}

static int pk_connected(addrbook_t *ab, const uint8_t pk[32])
{
	for (peer_t *p = net_peers(ab->net); p; p = p->next)
		if (p->state != PEER_CLOSING && p->got_hello && !memcmp(p->pk, pk, 32))
			return 1;
	return 0;
}

static int entry_eligible(addrbook_t *ab, addr_entry_t *a, int64_t now)
{
	return !a->peer_serial && !a->self && a->next_attempt_us <= now &&
	       !ban_is_banned(ab, (const struct sockaddr *)&a->sa, now) &&
	       !(a->has_pk && pk_connected(ab, a->pk));
}

void addrbook_maintain(addrbook_t *ab, int64_t now)
{
	if (net_is_shutting_down(ab->net))
		return;
	lookups_tick(ab, now);
	size_t out = 0;
	for (peer_t *p = net_peers(ab->net); p; p = p->next)
		if (p->outbound && p->state != PEER_CLOSING)
			out++;
	/* configured peers are always kept */
	for (size_t i = 0; i < ab->nbook; i++) {
		addr_entry_t *a = ab->book[i];
		if (a->pinned && entry_eligible(ab, a, now) && addrbook_dial(ab, a) == 0)
			out++;
	}
	while (out < (size_t)ab->cfg->outbound_target) {
		size_t cand = 0, pick = SIZE_MAX;
		for (size_t i = 0; i < ab->nbook; i++) {
			addr_entry_t *a = ab->book[i];
			if (a->pinned || !entry_eligible(ab, a, now))
				continue;
			/* reservoir sampling: a uniformly random eligible entry */
			if (randombytes_uniform((uint32_t)++cand) == 0)
				pick = i;
		}
		if (pick == SIZE_MAX || addrbook_dial(ab, ab->book[pick]))
			break;
		out++;
	}
}

static void retry_later(addrbook_t *ab, addr_entry_t *a, int was_ready)
{
	const node_config_t *c = ab->cfg;
	int64_t delay = c->reconnect_min_ms;
	if (was_ready) {
		a->failures = 0;
	} else {
		a->failures++;
		for (unsigned i = 1; i < a->failures && delay < c->reconnect_max_ms; i++)
			delay *= 2;
	}
	if (delay > c->reconnect_max_ms)
		delay = c->reconnect_max_ms;
	/* jitter: 0.5x to 1.5x, so that nodes that lost each other at the same
	 * moment do not all call back at the same moment */
	delay = delay / 2 + (int64_t)randombytes_uniform((uint32_t)(delay > 1 ? delay : 1));
	a->next_attempt_us = node_now_us() + delay * 1000;
}

void addrbook_peer_freed(addrbook_t *ab, peer_t *p)
{
	addr_entry_t *a = p->book;
	if (!a || a->peer_serial != p->serial)
		return;
	a->peer_serial = 0;
	if (p->is_self)
		a->self = 1;
	if (p->outbound)
		retry_later(ab, a, p->ready_us != 0);
}

/* p is ready: what the book learns of it. */
static void learn(addrbook_t *ab, peer_t *p)
{
	int64_t now = node_now_us();
	if (p->outbound && p->book) {
		p->book->failures = 0;
		p->book->last_ok_us = now;
		memcpy(p->book->pk, p->pk, 32);
		p->book->has_pk = 1;
		return;
	}
	if (!p->listen_port)
		return;
	uint8_t ip[16], il;
	uint16_t port;
	if (addr_ip((const struct sockaddr *)&p->sa, ip, &il, &port))
		return;
	struct sockaddr_storage ss;
	socklen_t len = sa_make(&ss, ip, il, p->listen_port);
	addr_entry_t *a = addrbook_add(ab, (const struct sockaddr *)&ss, len, ADDR_INBOUND);
	if (!a)
		return;
	memcpy(a->pk, p->pk, 32);
	a->has_pk = 1;
	a->last_ok_us = now;
	if (!a->peer_serial) {
		a->peer_serial = p->serial;
		p->book = a;
	}
}

void addrbook_peer_ready(addrbook_t *ab, peer_t *p)
{
	learn(ab, p);
	wire_msg_t req = {.type = WIRE_PEERS_REQ};
	p->pex.requested = 1;
	peer_send(p, &req);
}

addrbook_t *addrbook_new(net_t *net, const node_config_t *cfg, node_stats_t *stats)
{
	addrbook_t *ab = calloc(1, sizeof(*ab));
	if (!ab)
		return NULL;
	ab->net = net;
	ab->cfg = cfg;
	ab->stats = stats;
	ab->next_pex_us = node_now_us() + cfg->pex_interval_ms * 1000;
	return ab;
}

void addrbook_set_resolver(addrbook_t *ab, resolver_t *res,
			   void (*reply)(void *arg, uint64_t serial, const char *json, size_t len),
			   void *reply_arg)
{
	ab->res = res;
	ab->reply = reply;
	ab->reply_arg = reply_arg;
}

void addrbook_free_(addrbook_t *ab)
{
	if (!ab)
		return;
	while (ab->lookups)
		lookup_free(ab, ab->lookups);
	for (size_t i = 0; i < ab->nbook; i++)
		free(ab->book[i]);
	free(ab->book);
	free(ab->bans);
	free(ab);
}

size_t addrbook_size(const addrbook_t *ab)
{
	return ab->nbook;
}

const addr_entry_t *addrbook_entry(const addrbook_t *ab, size_t i)
{
	return ab->book[i];
}

size_t addrbook_count_known(const addrbook_t *ab)
{
	size_t known = 0;
	for (size_t i = 0; i < ab->nbook; i++)
		known += !ab->book[i]->self;
	return known;
}

/* ---- bans ------------------------------------------------------------------------ */

int ban_set(addrbook_t *ab, const uint8_t *ip, uint8_t il, int64_t until_us, const char *reason)
{
	ban_t *b = NULL;
	for (size_t i = 0; i < ab->nbans; i++)
		if (ab->bans[i].ip_len == il && !memcmp(ab->bans[i].ip, ip, il))
			b = &ab->bans[i];
	if (!b) {
		if (ab->nbans >= BANS_MAX)
			ban_prune(ab, node_now_us());
		if (ab->nbans >= BANS_MAX)
			return PITH_ETOOBIG;
		if (ab->nbans == ab->capbans) {
			size_t cap = ab->capbans ? ab->capbans * 2 : 16;
			ban_t *nb = realloc(ab->bans, cap * sizeof(*nb));
			if (!nb)
				return PITH_ENOMEM;
			ab->bans = nb;
			ab->capbans = cap;
		}
		b = &ab->bans[ab->nbans++];
		memset(b, 0, sizeof(*b));
		memcpy(b->ip, ip, il);
		b->ip_len = il;
		inet_ntop(il == 4 ? AF_INET : AF_INET6, ip, b->ip_str, sizeof(b->ip_str));
	}
	b->until_us = until_us;
	snprintf(b->reason, sizeof(b->reason), "%s", reason);
	addrbook_changed(ab);
	return 0;
}

int ban_lift(addrbook_t *ab, const uint8_t *ip, uint8_t il)
{
	int64_t now = node_now_us();
	int found = 0;
	size_t w = 0;
	for (size_t i = 0; i < ab->nbans; i++) {
		if (ab->bans[i].ip_len == il && !memcmp(ab->bans[i].ip, ip, il))
			found = ab->bans[i].until_us > now;
		else
			ab->bans[w++] = ab->bans[i];
	}
	ab->nbans = w;
	/* its addresses may be dialled again at once */
	for (size_t i = 0; found && i < ab->nbook; i++) {
		uint8_t bip[16], bl;
		uint16_t port;
		addr_entry_t *a = ab->book[i];
		if (!addr_ip((const struct sockaddr *)&a->sa, bip, &bl, &port) && bl == il &&
		    !memcmp(bip, ip, il)) {
			a->failures = 0;
			a->next_attempt_us = 0;
		}
	}
	if (found)
		addrbook_changed(ab);
	return found;
}

int addr_parse_ip(const char *text, uint8_t ip[16], uint8_t *len)
{
	char host[INET6_ADDRSTRLEN];
	const char *h = text, *end = text + strlen(text);
	if (*text == '[') { /* [v6] or [v6]:port */
		const char *close = strchr(text, ']');
		if (!close || (close[1] && close[1] != ':'))
			return PITH_EINVAL;
		h = text + 1;
		end = close;
	} else if (strchr(text, ':') == strrchr(text, ':') && strchr(text, ':')) {
		end = strchr(text, ':'); /* v4:port */
	}
	if (end == h || (size_t)(end - h) >= sizeof(host))
		return PITH_EINVAL;
	memcpy(host, h, (size_t)(end - h));
	host[end - h] = 0;
	if (inet_pton(AF_INET, host, ip) == 1) {
		*len = 4;
		return 0;
	}
	if (inet_pton(AF_INET6, host, ip) == 1) {
		*len = 16;
		return 0;
	}
	return PITH_EINVAL;
}

void ban_add(addrbook_t *ab, const struct sockaddr *sa, const char *reason)
{
	uint8_t ip[16], il;
	uint16_t port;
	if (addr_ip(sa, ip, &il, &port) ||
	    ban_set(ab, ip, il, node_now_us() + ab->cfg->ban_seconds * 1000000, reason))
		return;
	ab->stats->bans++;
	char s[48];
	inet_ntop(il == 4 ? AF_INET : AF_INET6, ip, s, sizeof(s));
	log_rl(&rl_ban, LOG_WARN, "banned %s for %lld s: %s", s, (long long)ab->cfg->ban_seconds,
	       reason);
}

int ban_is_banned(const addrbook_t *ab, const struct sockaddr *sa, int64_t now)
{
	uint8_t ip[16], il;
	uint16_t port;
	if (addr_ip(sa, ip, &il, &port))
		return 0;
	for (size_t i = 0; i < ab->nbans; i++)
		if (ab->bans[i].until_us > now && ab->bans[i].ip_len == il &&
		    !memcmp(ab->bans[i].ip, ip, il))
			return 1;
	return 0;
}

void ban_prune(addrbook_t *ab, int64_t now)
{
	size_t w = 0;
	for (size_t i = 0; i < ab->nbans; i++) {
		if (ab->bans[i].until_us > now)
			ab->bans[w++] = ab->bans[i];
		else
			log_info("ban on %s expired", ab->bans[i].ip_str);
	}
	if (w != ab->nbans)
		addrbook_changed(ab);
	ab->nbans = w;
}

size_t ban_count(const addrbook_t *ab)
{
	return ab->nbans;
}

const ban_t *ban_at(const addrbook_t *ab, size_t i)
{
	return &ab->bans[i];
}

void ban_list_json(const addrbook_t *ab, int64_t now, pith_buf_t *b)
{
	int first = 1;
	pith_buf_puts(b, "[");
	for (size_t i = 0; i < ab->nbans; i++) {
		const ban_t *bn = &ab->bans[i];
		if (bn->until_us <= now)
			continue;
		pith_buf_printf(b, "%s{\"ip\":", first ? "" : ",");
		first = 0;
		json_write_string(b, bn->ip_str, strlen(bn->ip_str));
		pith_buf_puts(b, ",\"reason\":");
		json_write_string(b, bn->reason, strlen(bn->reason));
		pith_buf_printf(b, ",\"remaining_s\":%lld,\"until_us\":%lld}",
				(long long)((bn->until_us - now) / 1000000), (long long)bn->until_us);
	}
	pith_buf_puts(b, "]");
}

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
	*len = sa_make(ss, ip, il, q->listen_port);
	return 0;
}

static void pex_push(wire_msg_t *m, const struct sockaddr *sa, int to_loopback, size_t max)
{
	wire_addr_t a = {0};
	if (m->u.peers.n >= max || addr_ip(sa, a.ip, &a.ip_len, &a.port))
		return;
	if (!ip_is_dialable(a.ip, a.ip_len, a.port) || (ip_is_loopback(a.ip, a.ip_len) && !to_loopback))
		return;
	for (size_t i = 0; i < m->u.peers.n; i++)
		if (m->u.peers.addrs[i].ip_len == a.ip_len && m->u.peers.addrs[i].port == a.port &&
		    !memcmp(m->u.peers.addrs[i].ip, a.ip, a.ip_len))
			return;
	m->u.peers.addrs[m->u.peers.n++] = a;
}

void pex_on_request(addrbook_t *ab, peer_t *p)
{
	int64_t now = node_now_us();
	if (p->pex.answered_us && now - p->pex.answered_us < PEX_MIN_INTERVAL_US)
		return; /* charged as a message; not answered again so soon */
	p->pex.answered_us = now;
	uint8_t pip[16], pl;
	uint16_t pport;
	int to_lo = !addr_ip((const struct sockaddr *)&p->sa, pip, &pl, &pport) &&
		    ip_is_loopback(pip, pl);
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
		if (has_own && sa_same((const struct sockaddr *)&a->sa, (const struct sockaddr *)&own))
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

void pex_on_peers(addrbook_t *ab, peer_t *p, const wire_msg_t *m)
{
	if (!p->pex.requested)
		return; /* unasked: charged as a message and ignored */
	p->pex.requested = 0;
	uint8_t pip[16], pl;
	uint16_t pport;
	int from_lo = !addr_ip((const struct sockaddr *)&p->sa, pip, &pl, &pport) &&
		      ip_is_loopback(pip, pl);
	size_t added = 0;
	for (size_t i = 0; i < m->u.peers.n; i++) {
		const wire_addr_t *a = &m->u.peers.addrs[i];
		if (ip_is_loopback(a->ip, a->ip_len) && !from_lo)
			continue;
		struct sockaddr_storage ss;
		socklen_t len = sa_make(&ss, a->ip, a->ip_len, a->port);
		size_t before = ab->nbook;
		if (addrbook_add(ab, (const struct sockaddr *)&ss, len, ADDR_PEX) && ab->nbook > before)
			added++;
	}
	if (added)
		log_debug("peer %s: learnt %zu new addresses", p->addr, added);
}

void pex_tick(addrbook_t *ab, int64_t now)
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
