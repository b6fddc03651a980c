/* Which inbound peers may stay (addrbook.h, "inbound peers"): limits per
 * IP address and per network group, and when every slot is taken, the
 * inbound peer to close for a newcomer, in the manner of Bitcoin Core's
 * eviction (net.cpp, SelectNodeToEvict).
 *
 * Refusing a newcomer when the slots are full lets whoever took them first
 * keep them: 31 idle connections from one address, answering pings, held
 * every slot of a node for minutes. So a full node makes room instead, and
 * what it spares is what an attacker finds hardest to fake all at once:
 * peers from many network groups, peers with the lowest round trip, peers
 * that lately brought events the node did not have, an eighth of the
 * slots for this machine's own processes, and the longest connected. Of the rest, the network group with the most connections
 * loses its youngest. An attacker who holds many slots from few groups
 * loses them first; an honest newcomer stays, since its group is small. */
#include "addrbook_int.h"

#include <stdlib.h>
#include <string.h>

/* How many are spared, as eighths of inbound_max (at least one each):
 * with the default 32, 4 groups (one peer each, keyed choice), 8 lowest
 * round trips, 4 that most lately brought a new event or bundle, 4 from
 * 127.0.0.1 or ::1 (oldest first), then the older half of the rest (one
 * per group): at most 26 spared, at least 6 that may go. Bitcoin Core spares 4, 8, 4 and 4 of about 117;
 * fixed numbers would spare every slot of a small node. */
#define PROTECT_GROUPS 1   /* eighths */
#define PROTECT_PING 2
#define PROTECT_USEFUL 1
#define PROTECT_LOCAL 1

typedef struct ecand {
	peer_t *p;
	uint64_t group;
	uint64_t group_key;    /* keyed hash of the group: no one can aim at the protection */
	int local;             /* from 127.0.0.1 or ::1 */
	int keep;
	int aged;              /* kept for its age */
} ecand_t;

/* This machine's own default loopback address: local processes (a local
 * mesh, a tunnel or proxy that forwards peers) are limited by inbound_max
 * alone (and their answer credit is each connection's, sync.c). */
int addrbook_ip_is_host_loopback(const uint8_t *ip, uint8_t len)
{
	static const uint8_t v6lo[16] = {[15] = 1};
	static const uint8_t v4m[16] = {[10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1};
	if (len == 4)
		return ip[0] == 127 && ip[1] == 0 && ip[2] == 0 && ip[3] == 1;
	return !memcmp(ip, v6lo, 16) || !memcmp(ip, v4m, 16);
}

/* Groups by their keyed hash, highest first; within one, oldest first. */
static int by_group_key(const void *x, const void *y)
{
	const ecand_t *a = x, *b = y;
	if (a->group_key != b->group_key)
		return a->group_key > b->group_key ? -1 : 1;
	return a->p->created_us < b->p->created_us ? -1 : a->p->created_us > b->p->created_us;
}

static int by_rtt(const void *x, const void *y)
{
	const peer_t *a = ((const ecand_t *)x)->p, *b = ((const ecand_t *)y)->p;
	/* not measured yet: last */
	int64_t ra = a->rtt_us > 0 ? a->rtt_us : INT64_MAX, rb = b->rtt_us > 0 ? b->rtt_us : INT64_MAX;
	return ra < rb ? -1 : ra > rb;
}

static int by_useful(const void *x, const void *y)
{
	const peer_t *a = ((const ecand_t *)x)->p, *b = ((const ecand_t *)y)->p;
	return a->last_useful_us > b->last_useful_us ? -1 : a->last_useful_us < b->last_useful_us;
}

static int by_age(const void *x, const void *y)
{
	const peer_t *a = ((const ecand_t *)x)->p, *b = ((const ecand_t *)y)->p;
	return a->created_us < b->created_us ? -1 : a->created_us > b->created_us;
}

/* Marks up to n of c (sorted as cmp says, unmarked ones only) as kept;
 * want(p) may turn one down. */
static void protect(ecand_t *c, size_t nc, int (*cmp)(const void *, const void *), size_t n,
		    int (*want)(const peer_t *))
{
	qsort(c, nc, sizeof(*c), cmp);
	for (size_t i = 0; i < nc && n; i++) {
		if (c[i].keep || (want && !want(c[i].p)))
			continue;
		c[i].keep = 1;
		n--;
	}
}

static int has_rtt(const peer_t *p)
{
	return p->rtt_us > 0;
}

static int was_useful(const peer_t *p)
{
	return p->last_useful_us > 0;
}

peer_t *addrbook_inbound_victim(addrbook_t *ab, int64_t now)
{
	(void)now;
	size_t nc = 0;
	for (peer_t *p = net_peers(ab->net); p; p = p->next)
		nc += !p->outbound && p->state != PEER_CLOSING;
	if (!nc)
		return NULL;
	ecand_t *c = calloc(nc, sizeof(*c));
	if (!c)
		return NULL;
	size_t n = 0;
	for (peer_t *p = net_peers(ab->net); p && n < nc; p = p->next) {
		if (p->outbound || p->state == PEER_CLOSING)
			continue;
		uint8_t ip[16], il;
		c[n].p = p;
		c[n].group = addrbook_group_of_sa((const struct sockaddr *)&p->sa);
		/* this machine's processes are no group that took many slots:
		 * each counts as a group of its own */
		c[n].local = !peer_ip(p, ip, &il) && addrbook_ip_is_host_loopback(ip, il);
		if (c[n].local)
			c[n].group = (UINT64_C(0xff) << 32) | p->serial;
		c[n].group_key = addrbook_hash(ab, 'E', c[n].group, 0, 0);
		n++;
	}
	/* one peer from each of PROTECT_GROUPS groups, chosen by a keyed hash
	 * of the group (the oldest of each) */
	qsort(c, n, sizeof(*c), by_group_key);
	size_t eighth = (size_t)ab->cfg->inbound_max / 8 ? (size_t)ab->cfg->inbound_max / 8 : 1;
	size_t kept_groups = 0;
	for (size_t i = 0; i < n && kept_groups < PROTECT_GROUPS * eighth; i++)
		if (!i || c[i].group != c[i - 1].group) {
			c[i].keep = 1;
			kept_groups++;
		}
	/* an eighth of the slots for this machine's own processes, the
	 * longest connected (Bitcoin Core spares localhost peers likewise: they
	 * are often proxies for peers that would otherwise lose every contest) */
	size_t local_left = PROTECT_LOCAL * eighth;
	qsort(c, n, sizeof(*c), by_age);
	for (size_t i = 0; i < n && local_left; i++)
		if (c[i].local && !c[i].keep) {
			c[i].keep = 1;
			local_left--;
		}
	protect(c, n, by_rtt, PROTECT_PING * eighth, has_rtt);
	protect(c, n, by_useful, PROTECT_USEFUL * eighth, was_useful);
	size_t left = 0;
	for (size_t i = 0; i < n; i++)
		left += !c[i].keep;
	/* the longest connected half of the rest, one per group: a group that
	 * came early with many connections keeps one of them for its age, not
	 * all (else an attacker's early connections are untouchable and the
	 * youngest newcomer from a group of its own is the one to go) */
	qsort(c, n, sizeof(*c), by_age);
	size_t want = left / 2;
	for (size_t i = 0; i < n && want; i++) {
		int taken = 0;
		for (size_t j = 0; j < i && !taken; j++)
			taken = c[j].aged && c[j].group == c[i].group;
		if (c[i].keep || taken)
			continue;
		c[i].keep = c[i].aged = 1;
		want--;
	}
	/* of the rest, the youngest of the group with the most inbound peers
	 * (counted over all of them, protected or not: a group that took many
	 * slots pays for them even where some of its peers are protected);
	 * between groups as big, the youngest */
	peer_t *victim = NULL;
	size_t best_n = 0;
	for (size_t i = 0; i < n; i++) {
		if (c[i].keep)
			continue;
		size_t k = 0;
		for (size_t j = 0; j < n; j++)
			k += c[j].group == c[i].group;
		if (k > best_n || (k == best_n && c[i].p->created_us > victim->created_us)) {
			best_n = k;
			victim = c[i].p;
		}
	}
	free(c);
	return victim;
}

int addrbook_inbound_admit(addrbook_t *ab, const struct sockaddr *sa, int64_t now)
{
	const node_config_t *cfg = ab->cfg;
	uint8_t ip[16], il;
	uint16_t port;
	if (addr_ip(sa, ip, &il, &port))
		return INBOUND_FULL;
	uint64_t g = addrbook_group_of(ip, il);
	int exempt = addrbook_ip_is_host_loopback(ip, il);
	size_t total = 0, same_ip = 0, same_group = 0;
	for (peer_t *p = net_peers(ab->net); p; p = p->next) {
		uint8_t pip[16], pl;
		if (p->outbound || p->state == PEER_CLOSING || peer_ip(p, pip, &pl))
			continue;
		total++;
		same_ip += pl == il && !memcmp(pip, ip, il);
		same_group += addrbook_group_of(pip, pl) == g;
	}
	if (!exempt && same_ip >= (size_t)cfg->inbound_per_ip)
		return INBOUND_PER_IP;
	if (!exempt && same_group >= (size_t)cfg->inbound_per_group)
		return INBOUND_PER_GROUP;
	if (total < (size_t)cfg->inbound_max)
		return INBOUND_OK;
	peer_t *v = cfg->inbound_max ? addrbook_inbound_victim(ab, now) : NULL;
	if (!v)
		return INBOUND_FULL;
	char a[64];
	addr_format(sa, a);
	ab->stats->inbound_evicted++;
	static log_rl_t rl;
	log_rl(&rl, LOG_INFO, "inbound slots full: closing %s (node %s, %lld s connected) for %s",
	       v->addr, v->got_hello ? v->id_short : "?", (long long)((now - v->created_us) / 1000000), a);
	peer_close(v, WIRE_BYE_FULL, "evicted to make room for an inbound newcomer");
	return INBOUND_OK;
}
