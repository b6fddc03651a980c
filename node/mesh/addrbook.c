/* The address book (addrbook.h): where peers may be found and when to
 * try them next. Bans are in addrbook_ban.c, peer exchange in
 * addrbook_pex.c. */
#include "addrbook_int.h"

#include <arpa/inet.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

socklen_t addrbook_sa_make(struct sockaddr_storage *ss, const uint8_t *ip, uint8_t len, uint16_t port)
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

int addrbook_ip_is_loopback(const uint8_t *ip, uint8_t len)
{
	static const uint8_t v6lo[16] = {[15] = 1};
	return len == 4 ? ip[0] == 127 : !memcmp(ip, v6lo, 16);
}

/* Addresses a node may dial: not unspecified, not multicast, a port. */
int addrbook_ip_is_dialable(const uint8_t *ip, uint8_t len, uint16_t port)
{
	static const uint8_t zero[16];
	if (!port || !memcmp(ip, zero, len))
		return 0;
	if (len == 4)
		return ip[0] < 224 && ip[0] != 0;
	return ip[0] != 0xff;
}

int addrbook_sa_same(const struct sockaddr *a, const struct sockaddr *b)
{
	uint8_t ia[16], ib[16], la, lb;
	uint16_t pa, pb;
	if (addr_ip(a, ia, &la, &pa) || addr_ip(b, ib, &lb, &pb))
		return 0;
	return la == lb && pa == pb && !memcmp(ia, ib, la);
}

int addrbook_parse_ip(const char *text, uint8_t ip[16], uint8_t *len)
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

/* ---- network groups and placement ------------------------------------------------------- */

static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

uint64_t addrbook_group_of(const uint8_t *ip, uint8_t len)
{
	if (len == 16 && !memcmp(ip, v4mapped, 12))
		return addrbook_group_of(ip + 12, 4);
	if (len == 4)
		return (UINT64_C(4) << 32) | (uint64_t)ip[0] << 8 | ip[1];
	return (UINT64_C(6) << 32) | (uint64_t)ip[0] << 24 | (uint64_t)ip[1] << 16 |
	       (uint64_t)ip[2] << 8 | ip[3];
}

uint64_t addrbook_group_of_sa(const struct sockaddr *sa)
{
	uint8_t ip[16], il;
	uint16_t port;
	return addr_ip(sa, ip, &il, &port) ? 0 : addrbook_group_of(ip, il);
}

socklen_t addrbook_group_sa(uint64_t g, struct sockaddr_storage *ss)
{
	uint8_t ip[16] = {0};
	uint32_t v = (uint32_t)g;
	if (g >> 32 == 4) {
		ip[0] = (uint8_t)(v >> 8);
		ip[1] = (uint8_t)v;
		return addrbook_sa_make(ss, ip, 4, 0);
	}
	ip[0] = (uint8_t)(v >> 24);
	ip[1] = (uint8_t)(v >> 16);
	ip[2] = (uint8_t)(v >> 8);
	ip[3] = (uint8_t)v;
	return addrbook_sa_make(ss, ip, 16, 0);
}

void addrbook_group_format(uint64_t g, char out[64])
{
	struct sockaddr_storage ss;
	addrbook_group_sa(g, &ss);
	char ip[INET6_ADDRSTRLEN];
	if (g >> 32 == 4) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
		snprintf(out, 64, "%s/16", ip);
	} else {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof(ip));
		snprintf(out, 64, "%s/32", ip);
	}
}

void addrbook_ip_key(const uint8_t *ip, uint8_t len, uint16_t port, uint8_t key[32])
{
	memset(key, 0, 32);
	memcpy(key, ip, len);
	key[16] = len;
	key[17] = (uint8_t)(port >> 8);
	key[18] = (uint8_t)port;
}

/* SipHash of in under the book's key, as a number. */
static uint64_t sip64(const addrbook_t *ab, const uint8_t *in, size_t len)
{
	uint8_t out[8];
	crypto_shorthash(out, in, len, ab->key);
	uint64_t h = 0;
	for (int i = 0; i < 8; i++)
		h |= (uint64_t)out[i] << (8 * i);
	return h;
}

uint64_t addrbook_hash(const addrbook_t *ab, uint8_t tag, uint64_t a, uint64_t b, uint64_t c)
{
	uint8_t in[25];
	in[0] = tag;
	for (int i = 0; i < 8; i++) {
		in[1 + i] = (uint8_t)(a >> (8 * i));
		in[9 + i] = (uint8_t)(b >> (8 * i));
		in[17 + i] = (uint8_t)(c >> (8 * i));
	}
	return sip64(ab, in, sizeof(in));
}


/* The address as one number for hashing: SipHash of ip, length and port. */
static uint64_t addr_hash(const addrbook_t *ab, const addr_entry_t *a)
{
	uint8_t ip[16], il, key[32];
	uint16_t port;
	addr_ip((const struct sockaddr *)&a->sa, ip, &il, &port);
	addrbook_ip_key(ip, il, port, key);
	return sip64(ab, key, 19);
}

static uint64_t entry_group(const addr_entry_t *a)
{
	return addrbook_group_of_sa((const struct sockaddr *)&a->sa);
}

/* A new address's bucket: one of ADDRBOOK_NEW_PER_GROUP buckets of its
 * source's group, picked by its own group. */
static unsigned new_bucket(const addrbook_t *ab, uint64_t src_group, uint64_t group)
{
	uint64_t h1 = addrbook_hash(ab, 'n', src_group, group, 0) % ADDRBOOK_NEW_PER_GROUP;
	return (unsigned)(addrbook_hash(ab, 'N', src_group, h1, 0) % ADDRBOOK_NEW_BUCKETS);
}

/* A tried address's bucket: one of ADDRBOOK_TRIED_PER_GROUP of its group. */
static unsigned tried_bucket(const addrbook_t *ab, const addr_entry_t *a)
{
	uint64_t h1 = addrbook_hash(ab, 't', addr_hash(ab, a), 0, 0) % ADDRBOOK_TRIED_PER_GROUP;
	return (unsigned)(addrbook_hash(ab, 'T', entry_group(a), h1, 0) % ADDRBOOK_TRIED_BUCKETS);
}

/* The k-th of the slots an address may take in its bucket (k < SLOT_TRIES):
 * a few, so that two honest addresses rarely push each other out, and
 * still a fixed set, so that no one can choose where an address goes. */
#define SLOT_TRIES 4
static unsigned bucket_slot(const addrbook_t *ab, int table, unsigned bucket,
			    const addr_entry_t *a, unsigned k)
{
	return (unsigned)(addrbook_hash(ab, 'S', ((uint64_t)table << 32) | bucket, addr_hash(ab, a), k) %
			  ADDRBOOK_BUCKET_SIZE);
}

#define DAY_US (86400 * INT64_C(1000000))

int addrbook_entry_is_terrible(const addr_entry_t *a, int64_t now)
{
	if (a->pinned || a->peer_serial)
		return 0;
	if (!a->last_ok_us && a->failures >= 3)
		return 1; /* never worked */
	if (a->failures >= 10 && now - a->last_ok_us > 7 * DAY_US)
		return 1; /* stopped working */
	return a->seen_us && now - a->seen_us > 30 * DAY_US && now - a->last_ok_us > 30 * DAY_US;
}

static addr_entry_t **table_slot(addrbook_t *ab, int table, unsigned bucket, unsigned slot)
{
	return table == ADDR_TABLE_NEW ? &ab->newtab[bucket][slot] : &ab->tried[bucket][slot];
}

static void table_remove(addrbook_t *ab, addr_entry_t *a)
{
	if (a->table == ADDR_TABLE_NONE)
		return;
	*table_slot(ab, a->table, a->bucket, a->slot) = NULL;
	if (a->table == ADDR_TABLE_NEW)
		ab->nnew--;
	else
		ab->ntried--;
	a->table = ADDR_TABLE_NONE;
}

static void table_put(addrbook_t *ab, addr_entry_t *a, int table, unsigned bucket, unsigned slot)
{
	a->table = table;
	a->bucket = (uint16_t)bucket;
	a->slot = (uint16_t)slot;
	*table_slot(ab, table, bucket, slot) = a;
	if (table == ADDR_TABLE_NEW)
		ab->nnew++;
	else
		ab->ntried++;
}

/* Takes a out of the book and frees it. Never an entry with a live
 * connection (p->book points at it). */
static void entry_delete(addrbook_t *ab, addr_entry_t *a)
{
	uint8_t ip[16], il, key[32];
	uint16_t port;
	table_remove(ab, a);
	if (!addr_ip((const struct sockaddr *)&a->sa, ip, &il, &port)) {
		addrbook_ip_key(ip, il, port, key);
		idmap_del(ab->by_addr, key);
	}
	ab->book[a->idx] = ab->book[--ab->nbook];
	ab->book[a->idx]->idx = a->idx;
	addrbook_changed(ab);
	free(a);
}

/* A slot of a's bucket in table that a may take now: an empty one, or one
 * whose holder is terrible (dropped). -1 if none. */
static int free_slot(addrbook_t *ab, int table, unsigned bucket, const addr_entry_t *a,
		     int64_t now)
{
	for (unsigned k = 0; k < SLOT_TRIES; k++) {
		unsigned s = bucket_slot(ab, table, bucket, a, k);
		addr_entry_t *h = *table_slot(ab, table, bucket, s);
		if (!h || h == a)
			return (int)s;
	}
	for (unsigned k = 0; k < SLOT_TRIES; k++) {
		unsigned s = bucket_slot(ab, table, bucket, a, k);
		addr_entry_t *h = *table_slot(ab, table, bucket, s);
		if (addrbook_entry_is_terrible(h, now)) {
			log_debug("address book: %s dropped (terrible) for %s", h->str, a->str);
			entry_delete(ab, h);
			return (int)s;
		}
	}
	return -1;
}

/* a (in no table) into the new table from its src_group; 0, or -1 if its
 * slots are held. An address a peer connected from and told of itself
 * (ADDR_INBOUND: its IP is real and it finished a handshake) may take the
 * slot of one only heard of by peer exchange and never reached: what
 * poisoning fills a bucket with cannot keep out the nodes that come. Its
 * bucket is its own group's, so this costs an attacker a handshake from
 * each address it would place, one bucket per group. */
static int place_new(addrbook_t *ab, addr_entry_t *a, int64_t now)
{
	unsigned b = new_bucket(ab, a->src_group, entry_group(a));
	int s = free_slot(ab, ADDR_TABLE_NEW, b, a, now);
	for (unsigned k = 0; s < 0 && a->source == ADDR_INBOUND && k < SLOT_TRIES; k++) {
		unsigned t = bucket_slot(ab, ADDR_TABLE_NEW, b, a, k);
		addr_entry_t *h = ab->newtab[b][t];
		if (h->source == ADDR_PEX && !h->last_ok_us && !h->peer_serial) {
			log_debug("address book: %s (heard of, never reached) gives way to %s, "
				  "which connected", h->str, a->str);
			entry_delete(ab, h);
			s = (int)t;
		}
	}
	if (s < 0)
		return -1;
	table_put(ab, a, ADDR_TABLE_NEW, b, (unsigned)s);
	return 0;
}

void addrbook_make_tried(addrbook_t *ab, addr_entry_t *a)
{
	if (a->table != ADDR_TABLE_NEW)
		return;
	int64_t now = node_now_us();
	unsigned b = tried_bucket(ab, a);
	int s = free_slot(ab, ADDR_TABLE_TRIED, b, a, now);
	addr_entry_t *out = NULL;
	if (s < 0) {
		/* the first of its slots not held by a live connection: its holder
		 * goes back to new (Bitcoin Core tests the holder first; here the
		 * one that just worked wins) */
		for (unsigned k = 0; k < SLOT_TRIES && s < 0; k++) {
			unsigned t = bucket_slot(ab, ADDR_TABLE_TRIED, b, a, k);
			if (!ab->tried[b][t]->peer_serial)
				s = (int)t;
		}
		if (s < 0)
			return; /* stays in new */
		out = ab->tried[b][s];
		table_remove(ab, out);
	}
	table_remove(ab, a);
	table_put(ab, a, ADDR_TABLE_TRIED, b, (unsigned)s);
	addrbook_changed(ab);
	if (out && place_new(ab, out, now)) {
		log_debug("address book: %s dropped: its tried slot went to %s", out->str, a->str);
		entry_delete(ab, out);
	}
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* The book holds addrbook_max learnt entries: one of the new table goes
 * to make room. A terrible one if any; else, from the source group with
 * the most new entries, the one heard of longest ago, so that what one
 * source said pays for the room it takes. 0, or -1 if none can go. */
static int make_room(addrbook_t *ab, int64_t now)
{
	addr_entry_t *victim = NULL;
	size_t n = 0;
	uint64_t *groups = malloc(ab->nbook * sizeof(*groups));
	if (!groups)
		return -1;
	for (size_t i = 0; i < ab->nbook; i++) {
		addr_entry_t *a = ab->book[i];
		if (a->table != ADDR_TABLE_NEW || a->peer_serial)
			continue;
		if (addrbook_entry_is_terrible(a, now)) {
			victim = a;
			break;
		}
		groups[n++] = a->src_group;
	}
	if (!victim && n) {
		/* the most frequent source group: one pass of counting over a sort */
		uint64_t best = 0;
		size_t best_n = 0;
		qsort(groups, n, sizeof(*groups), u64_cmp);
		for (size_t i = 0, j; i < n; i = j) {
			for (j = i; j < n && groups[j] == groups[i]; j++)
				;
			if (j - i > best_n) {
				best_n = j - i;
				best = groups[i];
			}
		}
		for (size_t i = 0; i < ab->nbook; i++) {
			addr_entry_t *a = ab->book[i];
			if (a->table == ADDR_TABLE_NEW && !a->peer_serial && a->src_group == best &&
			    (!victim || a->seen_us < victim->seen_us))
				victim = a;
		}
	}
	free(groups);
	if (!victim)
		return -1;
	log_debug("address book: full; %s dropped", victim->str);
	entry_delete(ab, victim);
	return 0;
}

addr_entry_t *addrbook_find(const addrbook_t *ab, const struct sockaddr *sa)
{
	uint8_t ip[16], il, key[32];
	uint16_t port;
	if (addr_ip(sa, ip, &il, &port))
		return NULL;
	addrbook_ip_key(ip, il, port, key);
	return idmap_get(ab->by_addr, key);
}

static const char *source_word(int source)
{
	return source == ADDR_CONFIG ? "configured" : source == ADDR_PEX ? "peer exchange" : "inbound";
}

addr_entry_t *addrbook_add_from(addrbook_t *ab, const struct sockaddr *sa, socklen_t len, int source,
				const struct sockaddr *src)
{
	uint8_t ip[16], il, key[32];
	uint16_t port;
	int64_t now = node_now_us();
	if (addr_ip(sa, ip, &il, &port) || !addrbook_ip_is_dialable(ip, il, port))
		return NULL;
	addr_entry_t *a = addrbook_find(ab, sa);
	if (a) {
		if (source == ADDR_CONFIG && !a->pinned) {
			table_remove(ab, a);
			a->pinned = 1;
		}
		a->seen_us = now;
		return a;
	}
	size_t learnt = ab->nnew + ab->ntried;
	size_t cap = (size_t)ab->cfg->addrbook_max;
	if (source != ADDR_CONFIG && learnt >= cap && make_room(ab, now))
		return NULL;
	if (ab->nbook == ab->capbook) {
		size_t ncap = ab->capbook ? ab->capbook * 2 : 64;
		addr_entry_t **nb = realloc(ab->book, ncap * sizeof(*nb));
		if (!nb)
			return NULL;
		ab->book = nb;
		ab->capbook = ncap;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	memcpy(&a->sa, sa, len);
	a->salen = len;
	a->source = source;
	a->pinned = source == ADDR_CONFIG;
	a->seen_us = now;
	a->src_group = src ? addrbook_group_of_sa(src) : addrbook_group_of(ip, il);
	addr_format(sa, a->str);
	if (!a->pinned && place_new(ab, a, now)) {
		log_debug("address book: %s (%s) not taken: its slots are held", a->str,
			  source_word(source));
		free(a);
		return NULL;
	}
	addrbook_ip_key(ip, il, port, key);
	if (idmap_put(ab->by_addr, key, a)) {
		table_remove(ab, a);
		free(a);
		return NULL;
	}
	a->idx = ab->nbook;
	ab->book[ab->nbook++] = a;
	addrbook_changed(ab);
	log_debug("address book: added %s (%s)", a->str, source_word(source));
	return a;
}

addr_entry_t *addrbook_add(addrbook_t *ab, const struct sockaddr *sa, socklen_t len, int source)
{
	return addrbook_add_from(ab, sa, len, source, NULL);
}

void addrbook_table_counts(const addrbook_t *ab, size_t *n_new, size_t *n_tried)
{
	*n_new = ab->nnew;
	*n_tried = ab->ntried;
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

int addrbook_unpin_hostport(addrbook_t *ab, const char *hostport)
{
	resolve_addr_t ra;
	if (resolve_numeric(hostport, &ra))
		return PITH_ENOTSUP; /* a name: the entries it gave do not remember it */
	addr_entry_t *a = addrbook_find(ab, (const struct sockaddr *)&ra.ss);
	if (!a || !a->pinned || a->kept)
		return PITH_ENOTFOUND;
	a->pinned = 0;
	if (!place_new(ab, a, node_now_us())) {
		addrbook_changed(ab);
		return 0;
	}
	if (!a->peer_serial) {
		entry_delete(ab, a); /* no slot for it, no connection */
		return 0;
	}
	a->pinned = 1; /* connected and no slot: an entry is pinned or in a table */
	return PITH_EEXIST;
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
	       !addrbook_is_banned(ab, (const struct sockaddr *)&a->sa, now) &&
	       !(a->has_pk && pk_connected(ab, a->pk));
}

typedef struct cand {
	uint64_t group;
	addr_entry_t *a;
} cand_t;

static int cand_cmp(const void *x, const void *y)
{
	uint64_t a = ((const cand_t *)x)->group, b = ((const cand_t *)y)->group;
	return a < b ? -1 : a > b;
}

/* How likely an entry is to be picked, against others of its group. */
static double chance(const addr_entry_t *a)
{
	double x = 1;
	for (unsigned f = 0; f < a->failures && f < 8; f++)
		x *= 0.66;
	return x;
}

/* A random eligible entry of table, or NULL: first a group, uniformly
 * among the groups that have one (new: the group of the peer that told of
 * it; tried: its own), so that a source that told of many addresses is
 * dialled no more often than one that told of few; then an entry of that
 * group, each failure since it last worked making it a third less likely
 * (Bitcoin Core's weighting). c has room for every entry. */
static addr_entry_t *pick_in(addrbook_t *ab, int table, int64_t now, cand_t *c)
{
	size_t n = 0, groups = 0;
	for (size_t i = 0; i < ab->nbook; i++) {
		addr_entry_t *a = ab->book[i];
		if (a->table != table || !entry_eligible(ab, a, now))
			continue;
		c[n].group = table == ADDR_TABLE_NEW ? a->src_group : entry_group(a);
		c[n++].a = a;
	}
	if (!n)
		return NULL;
	qsort(c, n, sizeof(*c), cand_cmp);
	for (size_t i = 0; i < n; i++)
		groups += !i || c[i].group != c[i - 1].group;
	uint32_t g = randombytes_uniform((uint32_t)groups);
	size_t lo = 0;
	for (size_t i = 1; i < n && g; i++)
		if (c[i].group != c[i - 1].group && !--g)
			lo = i;
	size_t hi = lo;
	double total = 0;
	while (hi < n && c[hi].group == c[lo].group)
		total += chance(c[hi++].a);
	double r = total * (randombytes_random() / 4294967296.0);
	for (size_t i = lo; i < hi; i++) {
		double w = chance(c[i].a);
		if (r < w)
			return c[i].a;
		r -= w;
	}
	return c[hi - 1].a;
}

addr_entry_t *addrbook_select(addrbook_t *ab, int table, int64_t now)
{
	cand_t *c = ab->nbook ? malloc(ab->nbook * sizeof(*c)) : NULL;
	addr_entry_t *a = c ? pick_in(ab, table, now, c) : NULL;
	free(c);
	return a;
}

/* Dials of addresses from the new table (heard of, never shown to work)
 * go one at a time and this far apart: a book full of addresses that
 * lead nowhere costs a few dials a second, not one per tick and slot. */
#define NEW_DIAL_GAP_US 500000

void addrbook_maintain(addrbook_t *ab, int64_t now)
{
	if (net_is_shutting_down(ab->net))
		return;
	lookups_tick(ab, now);
	size_t out = 0, new_inflight = 0;
	for (peer_t *p = net_peers(ab->net); p; p = p->next) {
		if (!p->outbound || p->state == PEER_CLOSING)
			continue;
		out++;
		new_inflight += p->state != PEER_READY && p->book && p->book->table == ADDR_TABLE_NEW;
	}
	/* configured peers are always kept */
	for (size_t i = 0; i < ab->nbook; i++) {
		addr_entry_t *a = ab->book[i];
		if (a->pinned && entry_eligible(ab, a, now) && addrbook_dial(ab, a) == 0)
			out++;
	}
	if (out >= (size_t)ab->cfg->outbound_target || !ab->nbook)
		return;
	cand_t *c = malloc(ab->nbook * sizeof(*c));
	if (!c)
		return;
	while (out < (size_t)ab->cfg->outbound_target) {
		int may_new = !new_inflight && now >= ab->next_new_dial_us;
		int first = randombytes_uniform(2) ? ADDR_TABLE_TRIED : ADDR_TABLE_NEW;
		int second = first == ADDR_TABLE_NEW ? ADDR_TABLE_TRIED : ADDR_TABLE_NEW;
		addr_entry_t *a = NULL;
		if (first == ADDR_TABLE_TRIED || may_new)
			a = pick_in(ab, first, now, c);
		if (!a && (second == ADDR_TABLE_TRIED || may_new))
			a = pick_in(ab, second, now, c);
		if (!a)
			break;
		if (a->table == ADDR_TABLE_NEW) {
			new_inflight++;
			ab->next_new_dial_us = now + NEW_DIAL_GAP_US;
		}
		if (addrbook_dial(ab, a))
			break;
		out++;
	}
	free(c);
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
	if (!p->outbound)
		return;
	retry_later(ab, a, p->ready_us != 0);
	/* an address that keeps leading nowhere makes room at once */
	if (a->table != ADDR_TABLE_NONE && addrbook_entry_is_terrible(a, node_now_us())) {
		log_debug("address book: %s dropped after %u failed dials", a->str, a->failures);
		p->book = NULL;
		entry_delete(ab, a);
	}
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
		addrbook_make_tried(ab, p->book);
		return;
	}
	if (!p->listen_port)
		return;
	uint8_t ip[16], il;
	uint16_t port;
	if (addr_ip((const struct sockaddr *)&p->sa, ip, &il, &port))
		return;
	struct sockaddr_storage ss;
	socklen_t len = addrbook_sa_make(&ss, ip, il, p->listen_port);
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
	crypto_shorthash_keygen(ab->key); /* the file's key replaces it (addrbook_load) */
	ab->by_addr = idmap_new();
	ab->ban_by_ip = idmap_new();
	if (!ab->by_addr || !ab->ban_by_ip) {
		addrbook_free(ab);
		return NULL;
	}
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
	for (size_t i = 0; i < ab->nbans; i++)
		free(ab->bans[i]);
	free(ab->bans);
	idmap_free(ab->by_addr);
	idmap_free(ab->ban_by_ip);
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
