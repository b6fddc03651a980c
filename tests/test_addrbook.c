/* The address book (node/mesh/addrbook.c, addrbook_file.c, addrbook_inbound.c)
 * over the fake transport: adding and finding addresses, network groups,
 * the new and tried tables (bucket placement, what one poisoning source
 * can fill, terrible entries, the bound), dialling pinned and learnt
 * entries and the selection by group, the backoff after failed dials,
 * inbound limits and eviction, bans and their overflow, addrbook_parse_ip,
 * peer exchange (PEERS_REQ/PEERS), and DATA/peers.json (versions 1 and 2). */
#include <arpa/inet.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addrbook.h"
#include "addrbook_int.h"
#include "test_util.h"
#include "tnode.h"

/* A node with only the net and the book; settings as tweak left them. */
static void setup(tnode_t *n, void (*tweak)(node_config_t *))
{
	CHECK_INT_EQ(tnode_init(n, "test_addrbook", NULL, tweak), 0);
	CHECK_INT_EQ(tnode_start(n), 0);
}

static addr_entry_t *add(tnode_t *n, const char *addr, int source)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (fake_sockaddr(addr, &ss, &len))
		return NULL;
	return addrbook_add(n->book, (const struct sockaddr *)&ss, len, source);
}

static int banned(tnode_t *n, const char *addr, int64_t now)
{
	struct sockaddr_storage ss;
	socklen_t len;
	return !fake_sockaddr(addr, &ss, &len) &&
	       addrbook_is_banned(n->book, (const struct sockaddr *)&ss, now);
}

static const addr_entry_t *find(tnode_t *n, const char *addr)
{
	for (size_t i = 0; i < addrbook_size(n->book); i++)
		if (!strcmp(addrbook_entry(n->book, i)->str, addr))
			return addrbook_entry(n->book, i);
	return NULL;
}

/* An inbound peer from addr, ready, listening on listen_port. */
static peer_t *inbound(tnode_t *n, const char *addr, uint16_t listen_port)
{
	peer_t *p = fake_peer_add(n->net, 0, addr);
	CHECK(p != NULL);
	p->listen_port = listen_port;
	fake_peer_ready(p, NULL, 0);
	return p;
}

/* ---- adding ---------------------------------------------------------------------------- */

TEST(add_find_dedupe, "an address is added once, found again, and pinned when configured later")
{
	tnode_t n;
	setup(&n, NULL);
	addr_entry_t *a = add(&n, "10.0.0.9:7411", ADDR_PEX);
	CHECK(a != NULL);
	CHECK_STR_EQ(a->str, "10.0.0.9:7411");
	CHECK_INT_EQ(a->pinned, 0);
	CHECK(add(&n, "10.0.0.9:7411", ADDR_INBOUND) == a);
	CHECK(add(&n, "10.0.0.9:7412", ADDR_PEX) != a); /* another port, another address */
	CHECK(add(&n, "[2001:db8::1]:7411", ADDR_PEX) != NULL);
	CHECK_INT_EQ(addrbook_size(n.book), 3);
	CHECK(add(&n, "10.0.0.9:7411", ADDR_CONFIG) == a);
	CHECK_INT_EQ(a->pinned, 1);
	CHECK_INT_EQ(addrbook_size(n.book), 3);
	CHECK(find(&n, "[2001:db8::1]:7411") != NULL);
	pith_err_t err = {0};
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "10.0.0.9:7412", 1, &err), 0);
	CHECK_INT_EQ(find(&n, "10.0.0.9:7412")->pinned, 1);
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "no port", 1, &err), PITH_EINVAL);
	tnode_stop(&n);
}

TEST(add_refuses_undialable, "addresses no node can be dialled at are not added")
{
	tnode_t n;
	setup(&n, NULL);
	CHECK(add(&n, "10.0.0.9:0", ADDR_PEX) == NULL);
	CHECK(add(&n, "0.0.0.0:7411", ADDR_PEX) == NULL);
	CHECK(add(&n, "224.0.0.1:7411", ADDR_PEX) == NULL);
	CHECK(add(&n, "[::]:7411", ADDR_PEX) == NULL);
	CHECK(add(&n, "[ff02::1]:7411", ADDR_CONFIG) == NULL);
	CHECK_INT_EQ(addrbook_size(n.book), 0);
	tnode_stop(&n);
}

static void small_book(node_config_t *c)
{
	c->addrbook_max = 16; /* the smallest the config allows */
}

/* ---- dialling ---------------------------------------------------------------------------- */

static void no_target(node_config_t *c)
{
	c->outbound_target = 0;
}

TEST(maintain_pinned, "addrbook_maintain dials pinned entries even with the outbound target met, once each")
{
	tnode_t n;
	pith_err_t err = {0};
	setup(&n, no_target);
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "10.0.0.9:7411", 1, &err), 0);
	CHECK(add(&n, "10.0.0.10:7411", ADDR_PEX) != NULL);
	int64_t now = node_now_us();
	addrbook_maintain(n.book, now);
	CHECK_INT_EQ(fake_connects(n.net), 1);
	CHECK_STR_EQ(fake_connect_addr(n.net, 0), "10.0.0.9:7411");
	CHECK_INT_EQ(net_count_out(n.net), 1);
	addrbook_maintain(n.book, now); /* its dial is under way */
	CHECK_INT_EQ(fake_connects(n.net), 1);
	tnode_stop(&n);
}

static void target_two(node_config_t *c)
{
	c->outbound_target = 2;
}

TEST(maintain_target, "addrbook_maintain dials learnt entries up to outbound_target, new-table ones one at a time 500 ms apart")
{
	tnode_t n;
	char a[32];
	setup(&n, target_two);
	for (int i = 0; i < 5; i++) {
		snprintf(a, sizeof(a), "10.0.3.%d:7411", i + 1);
		add(&n, a, ADDR_PEX);
	}
	int64_t now = node_now_us();
	addrbook_maintain(n.book, now);
	CHECK_INT_EQ(fake_connects(n.net), 1);
	addrbook_maintain(n.book, now + 600000); /* the first is still under way */
	CHECK_INT_EQ(fake_connects(n.net), 1);
	for (peer_t *p = net_peers(n.net); p; p = p->next)
		if (p->outbound && p->state != PEER_READY)
			fake_peer_ready(p, NULL, 0);
	addrbook_maintain(n.book, now + 100000); /* done, but too soon */
	CHECK_INT_EQ(fake_connects(n.net), 1);
	addrbook_maintain(n.book, now + 600000);
	CHECK_INT_EQ(fake_connects(n.net), 2);
	if (fake_connects(n.net) == 2)
		CHECK(strcmp(fake_connect_addr(n.net, 0), fake_connect_addr(n.net, 1)) != 0);
	addrbook_maintain(n.book, now + 1200000);
	CHECK_INT_EQ(fake_connects(n.net), 2); /* target met */
	tnode_stop(&n);
}

static void backoff_cfg(node_config_t *c)
{
	c->outbound_target = 0;
	c->reconnect_min_ms = 1000;
	c->reconnect_max_ms = 8000;
}

/* Dials the only entry, fails the dial before it got ready (or after,
 * if ready), and checks the next attempt lies where the backoff puts it
 * for base_ms (jittered 0.5x to 1.5x). */
static void fail_once(tnode_t *n, const addr_entry_t *e, int ready, int64_t base_ms)
{
	size_t dials = fake_connects(n->net);
	addrbook_maintain(n->book, e->next_attempt_us - 1); /* not yet */
	CHECK_INT_EQ(fake_connects(n->net), dials);
	addrbook_maintain(n->book, e->next_attempt_us > 0 ? e->next_attempt_us : node_now_us());
	CHECK_INT_EQ(fake_connects(n->net), dials + 1);
	peer_t *p = net_peer_by_serial(n->net, e->peer_serial);
	CHECK(p && p->state == PEER_CONNECTING);
	if (!p)
		return;
	if (ready) {
		fake_peer_ready(p, NULL, 0);
		CHECK_INT_EQ(e->failures, 0);
		CHECK_INT_EQ(e->has_pk, 1);
	}
	int64_t before = node_now_us();
	peer_close(p, 0, "test: connection refused");
	net_reap(n->net, 0);
	int64_t after = node_now_us();
	CHECK_INT_EQ(e->peer_serial, 0);
	CHECK(e->next_attempt_us >= before + base_ms * 1000 / 2);
	CHECK(e->next_attempt_us <= after + base_ms * 1000 * 3 / 2);
}

TEST(backoff, "an outbound peer that never got ready is retried after a backoff doubling from reconnect_min_ms to reconnect_max_ms")
{
	tnode_t n;
	pith_err_t err = {0};
	setup(&n, backoff_cfg);
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "10.0.0.9:7411", 1, &err), 0);
	const addr_entry_t *e = find(&n, "10.0.0.9:7411");
	CHECK(e != NULL);
	if (!e) {
		tnode_stop(&n);
		return;
	}
	static const int64_t base[] = {1000, 2000, 4000, 8000, 8000, 8000};
	for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		fail_once(&n, e, 0, base[i]);
		CHECK_INT_EQ(e->failures, i + 1);
	}
	/* one that got ready starts over */
	fail_once(&n, e, 1, 1000);
	CHECK_INT_EQ(e->failures, 0);
	tnode_stop(&n);
}

TEST(handshake_timeout, "a dial whose handshake does not finish within handshake_timeout_ms is closed and counts as a failure")
{
	tnode_t n;
	pith_err_t err = {0};
	setup(&n, backoff_cfg);
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "10.0.0.9:7411", 1, &err), 0);
	const addr_entry_t *e = find(&n, "10.0.0.9:7411");
	int64_t now = node_now_us();
	addrbook_maintain(n.book, now);
	peer_t *p = e ? net_peer_by_serial(n.net, e->peer_serial) : NULL;
	CHECK(p && p->state == PEER_CONNECTING);
	if (!p) {
		tnode_stop(&n);
		return;
	}
	net_tick(n.net, now + n.cfg.handshake_timeout_ms * 1000 / 2);
	CHECK_INT_EQ(p->state, PEER_CONNECTING);
	net_tick(n.net, now + n.cfg.handshake_timeout_ms * 1000 + 1000);
	CHECK_INT_EQ(p->state, PEER_CLOSING);
	CHECK_INT_EQ(fake_gone_count(p), 1);
	net_reap(n.net, 0);
	CHECK_INT_EQ(fake_freed(n.net), 1);
	CHECK_INT_EQ(e->failures, 1);
	CHECK_INT_EQ(e->peer_serial, 0);
	CHECK(e->next_attempt_us > now);
	tnode_stop(&n);
}

/* ---- bans ---------------------------------------------------------------------------------- */

static void ip4(const char *s, uint8_t ip[16])
{
	memset(ip, 0, 16);
	inet_pton(AF_INET, s, ip);
}

TEST(bans, "a ban holds until its time, addrbook_ban_lift lifts it and addrbook_ban_prune drops expired ones")
{
	tnode_t n;
	uint8_t ip[16];
	setup(&n, NULL);
	int64_t now = node_now_us();
	ip4("10.0.0.5", ip);
	CHECK_INT_EQ(addrbook_ban_set(n.book, ip, 4, now + 1000000, "test"), 0);
	CHECK(banned(&n, "10.0.0.5:7411", now)); /* every port */
	CHECK(banned(&n, "10.0.0.5:1", now));
	CHECK(!banned(&n, "10.0.0.6:7411", now));
	CHECK(!banned(&n, "10.0.0.5:7411", now + 1000000));
	CHECK_INT_EQ(addrbook_ban_set(n.book, ip, 4, now + 2000000, "again"), 0); /* replaces */
	CHECK_INT_EQ(addrbook_ban_count(n.book), 1);
	CHECK_STR_EQ(addrbook_ban_at(n.book, 0)->reason, "again");
	CHECK_STR_EQ(addrbook_ban_at(n.book, 0)->ip_str, "10.0.0.5");
	CHECK_INT_EQ(addrbook_ban_lift(n.book, ip, 4), 1);
	CHECK(!banned(&n, "10.0.0.5:7411", now));
	CHECK_INT_EQ(addrbook_ban_lift(n.book, ip, 4), 0);
	/* expired bans go at the next prune */
	CHECK_INT_EQ(addrbook_ban_set(n.book, ip, 4, now - 1, "old"), 0);
	ip4("10.0.0.7", ip);
	CHECK_INT_EQ(addrbook_ban_set(n.book, ip, 4, now + 1000000, "running"), 0);
	addrbook_ban_prune(n.book, now);
	CHECK_INT_EQ(addrbook_ban_count(n.book), 1);
	CHECK_STR_EQ(addrbook_ban_at(n.book, 0)->ip_str, "10.0.0.7");
	pith_buf_t b = PITH_BUF_INIT;
	addrbook_ban_list_json(n.book, now, &b);
	pith_buf_append(&b, "", 1);
	CHECK_STR_CONTAINS((const char *)b.data, "\"ip\":\"10.0.0.7\",\"reason\":\"running\"");
	pith_buf_release(&b);
	tnode_stop(&n);
}

TEST(ban_blocks_dial, "a banned address is not dialled, and is dialled at once when its ban is lifted")
{
	tnode_t n;
	uint8_t ip[16];
	pith_err_t err = {0};
	setup(&n, backoff_cfg);
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "10.0.0.9:7411", 1, &err), 0);
	ip4("10.0.0.9", ip);
	int64_t now = node_now_us();
	CHECK_INT_EQ(addrbook_ban_set(n.book, ip, 4, now + 3600 * INT64_C(1000000), "test"), 0);
	addrbook_maintain(n.book, now);
	CHECK_INT_EQ(fake_connects(n.net), 0);
	CHECK_INT_EQ(addrbook_ban_lift(n.book, ip, 4), 1);
	addrbook_maintain(n.book, now);
	CHECK_INT_EQ(fake_connects(n.net), 1);
	tnode_stop(&n);
}

static void small_bans(node_config_t *c)
{
	c->ban_max = 16;
}

TEST(ban_overflow, "a full ban table drops the ban that runs out first, says so once and counts it: the newest offender is always banned")
{
	tnode_t n;
	uint8_t ip[16] = {10, 9};
	setup(&n, small_bans);
	int64_t now = node_now_us();
	for (int i = 0; i < 16; i++) {
		ip[3] = (uint8_t)i;
		/* the first has already run out; the others end 1000 s + i from now */
		CHECK_INT_EQ(addrbook_ban_set(n.book, ip, 4, i ? now + (1000 + i) * INT64_C(1000000) : now - 1, "t"), 0);
	}
	CHECK_INT_EQ(addrbook_ban_count(n.book), 16);
	uint8_t more[16] = {10, 8, 0, 1};
	CHECK_INT_EQ(addrbook_ban_set(n.book, more, 4, now + 5000000, "t"), 0); /* in the expired one's place */
	CHECK_INT_EQ(n.stats.bans_evicted, 0);
	for (int i = 2; i < 6; i++) { /* four more: the ones ending soonest go */
		more[3] = (uint8_t)i;
		CHECK_INT_EQ(addrbook_ban_set(n.book, more, 4, now + 3600 * INT64_C(1000000), "t"), 0);
	}
	CHECK_INT_EQ(addrbook_ban_count(n.book), 16);
	CHECK_INT_EQ(n.stats.bans_evicted, 4);
	for (int i = 2; i < 6; i++) {
		char s2[32];
		snprintf(s2, sizeof(s2), "10.8.0.%d:1", i);
		CHECK(banned(&n, s2, now));
	}
	CHECK(!banned(&n, "10.8.0.1:1", now)); /* ended soonest (5 s): dropped first */
	CHECK(!banned(&n, "10.9.0.1:1", now)); /* then 1001 s, 1002 s, 1003 s */
	CHECK(!banned(&n, "10.9.0.3:1", now));
	CHECK(banned(&n, "10.9.0.4:1", now));
	CHECK(banned(&n, "10.9.0.15:1", now));
	/* an address already banned has its ban replaced, nothing dropped */
	more[3] = 5;
	CHECK_INT_EQ(addrbook_ban_set(n.book, more, 4, now + 2000000, "longer"), 0);
	CHECK_INT_EQ(n.stats.bans_evicted, 4);
	tnode_stop(&n);
}

/* ---- inbound peers ------------------------------------------------------------------------ */

static void inbound_cfg(node_config_t *c)
{
	c->inbound_max = 8;
	c->inbound_per_ip = 2;
	c->inbound_per_group = 3;
}

static int admit(tnode_t *n, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	fake_sockaddr(addr, &ss, &len);
	return addrbook_inbound_admit(n->book, (const struct sockaddr *)&ss, node_now_us());
}

/* admit, then the peer itself, created at created_us. */
static peer_t *admit_peer(tnode_t *n, const char *addr, int64_t created_us)
{
	if (admit(n, addr) != INBOUND_OK)
		return NULL;
	peer_t *p = inbound(n, addr, 0);
	p->created_us = created_us;
	return p;
}

TEST(inbound_limits, "inbound connections are limited per IP and per network group; 127.0.0.1 is exempt")
{
	tnode_t n;
	setup(&n, inbound_cfg);
	int64_t t = node_now_us();
	CHECK(admit_peer(&n, "10.1.0.1:50001", t) != NULL);
	CHECK(admit_peer(&n, "10.1.0.1:50002", t) != NULL);
	CHECK_INT_EQ(admit(&n, "10.1.0.1:50003"), INBOUND_PER_IP);
	CHECK(admit_peer(&n, "10.1.0.2:50001", t) != NULL);
	CHECK_INT_EQ(admit(&n, "10.1.9.9:50001"), INBOUND_PER_GROUP);
	CHECK(admit_peer(&n, "10.2.0.1:50001", t) != NULL);
	for (int i = 0; i < 3; i++)
		CHECK(admit_peer(&n, "127.0.0.1:50001", t) != NULL);
	CHECK_INT_EQ(net_count_in(n.net), 7);
	tnode_stop(&n);
}

TEST(inbound_eviction, "with every slot taken a newcomer is let in: the biggest group loses its youngest unprotected peer; long-lived, fast and useful peers stay")
{
	tnode_t n;
	setup(&n, inbound_cfg);
	n.cfg.inbound_per_ip = 8;
	n.cfg.inbound_per_group = 8;
	int64_t t = node_now_us() - 1000 * INT64_C(1000000);
	/* honest: old, one fast, one that brought events */
	peer_t *old = admit_peer(&n, "10.1.0.1:1", t);
	peer_t *fast = admit_peer(&n, "10.2.0.1:1", t + 100000000);
	peer_t *useful = admit_peer(&n, "10.3.0.1:1", t + 200000000);
	CHECK(old && fast && useful);
	if (!old || !fast || !useful) {
		tnode_stop(&n);
		return;
	}
	fast->rtt_us = 300;
	useful->last_useful_us = node_now_us();
	/* attacker: five slots from one group, idle, newer */
	peer_t *att[5];
	for (int i = 0; i < 5; i++) {
		char a[32];
		snprintf(a, sizeof(a), "10.66.0.%d:1", 1 + i);
		att[i] = admit_peer(&n, a, t + (500 + i) * INT64_C(1000000));
		CHECK(att[i] != NULL);
	}
	CHECK_INT_EQ(net_count_in(n.net), 8);
	/* a newcomer from elsewhere: the attacker's youngest makes room */
	CHECK_INT_EQ(admit(&n, "10.9.0.1:1"), INBOUND_OK);
	CHECK_INT_EQ(att[4]->state, PEER_CLOSING);
	CHECK_INT_EQ(n.stats.inbound_evicted, 1);
	wire_msg_t m;
	CHECK_INT_EQ(fake_sent_get(att[4], fake_sent_count(att[4]) - 1, &m), 0);
	CHECK_INT_EQ(m.type, WIRE_BYE);
	CHECK_INT_EQ(m.u.bye.code, WIRE_BYE_FULL);
	net_reap(n.net, 1);
	peer_t *newcomer = inbound(&n, "10.9.0.1:1", 0);
	/* the attacker comes back, again and again: it evicts its own */
	for (int round = 0; round < 6; round++) {
		CHECK_INT_EQ(admit(&n, "10.66.0.9:1"), INBOUND_OK);
		inbound(&n, "10.66.0.9:1", 0);
		net_reap(n.net, 1);
	}
	CHECK(old->state != PEER_CLOSING && fast->state != PEER_CLOSING &&
	      useful->state != PEER_CLOSING && newcomer->state != PEER_CLOSING);
	CHECK_INT_EQ(n.stats.inbound_evicted, 7);
	CHECK_INT_EQ(net_count_in(n.net), 8);
	tnode_stop(&n);
}

TEST(ban_threshold, "a peer whose score reaches ban_threshold is banned and closed")
{
	tnode_t n;
	setup(&n, NULL);
	peer_t *p = inbound(&n, "10.0.0.7:50000", 0);
	peer_misbehaved(p, SCORE_FLOOD, "test");
	CHECK_INT_EQ(p->state, PEER_READY);
	CHECK(!banned(&n, "10.0.0.7:1", node_now_us()));
	peer_misbehaved(p, (int)n.cfg.ban_threshold - SCORE_FLOOD, "test");
	CHECK_INT_EQ(p->state, PEER_CLOSING);
	CHECK(banned(&n, "10.0.0.7:1", node_now_us()));
	CHECK_INT_EQ(n.stats.bans, 1);
	wire_msg_t m;
	CHECK_INT_EQ(fake_sent_get(p, fake_sent_count(p) - 1, &m), 0);
	CHECK_INT_EQ(m.type, WIRE_BYE);
	CHECK_INT_EQ(m.u.bye.code, WIRE_BYE_BANNED);
	tnode_stop(&n);
}

TEST(parse_ip, "addrbook_parse_ip reads IP, IP:PORT, [IPv6] and [IPv6]:PORT, and nothing else")
{
	uint8_t ip[16], len = 0;
	static const struct {
		const char *in;
		int len;
	} ok[] = {{"10.1.2.3", 4}, {"10.1.2.3:7411", 4}, {"::1", 16}, {"2001:db8::1", 16},
		  {"[::1]", 16}, {"[2001:db8::1]:7411", 16}, {"::ffff:10.1.2.3", 16}};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		CHECK_INT_EQ(addrbook_parse_ip(ok[i].in, ip, &len), 0);
		CHECK_INT_EQ(len, ok[i].len);
	}
	CHECK_INT_EQ(addrbook_parse_ip("10.1.2.3:7411", ip, &len), 0);
	CHECK_MEM_EQ(ip, 4, "\x0a\x01\x02\x03", 4);
	static const char *const bad[] = {"", "host", "host:7411", "10.1.2", "[::1", "[::1]x",
					  "[::1]7411", "1.2.3.4:5:6", "[]", ":7411", "10.1.2.3.4"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT_EQ(addrbook_parse_ip(bad[i], ip, &len), PITH_EINVAL);
}

/* ---- peer exchange ------------------------------------------------------------------------ */

/* How many PEERS sent to p list addr ("IP:PORT"). */
static size_t peers_lists(peer_t *p, const char *addr)
{
	size_t k = 0;
	wire_msg_t m;
	for (size_t i = 0; i < fake_sent_count(p); i++) {
		if (fake_sent_get(p, i, &m) || m.type != WIRE_PEERS)
			continue;
		for (size_t j = 0; j < m.u.peers.n; j++) {
			const wire_addr_t *a = &m.u.peers.addrs[j];
			char ip[64], s[80];
			inet_ntop(a->ip_len == 4 ? AF_INET : AF_INET6, a->ip, ip, sizeof(ip));
			snprintf(s, sizeof(s), a->ip_len == 4 ? "%s:%u" : "[%s]:%u", ip, a->port);
			k += !strcmp(s, addr);
		}
	}
	return k;
}

TEST(pex_answer, "PEERS_REQ is answered once per 10 s, never with the asker's own address nor loopback to a non-loopback peer")
{
	tnode_t n;
	setup(&n, NULL);
	peer_t *q = inbound(&n, "10.0.0.7:50000", 7411);
	inbound(&n, "10.0.0.8:50001", 7411);
	inbound(&n, "127.0.0.1:50002", 7411);
	CHECK(find(&n, "10.0.0.7:7411") && find(&n, "10.0.0.8:7411") && find(&n, "127.0.0.1:7411"));
	CHECK_INT_EQ(fake_sent_count_type(q, WIRE_PEERS_REQ), 1); /* asked at the handshake */
	wire_msg_t req = {.type = WIRE_PEERS_REQ};
	CHECK_INT_EQ(fake_deliver(q, &req), 0);
	CHECK_INT_EQ(fake_sent_count_type(q, WIRE_PEERS), 1);
	CHECK_INT_EQ(peers_lists(q, "10.0.0.8:7411"), 1);
	CHECK_INT_EQ(peers_lists(q, "10.0.0.7:7411"), 0);
	CHECK_INT_EQ(peers_lists(q, "127.0.0.1:7411"), 0);
	CHECK_INT_EQ(fake_deliver(q, &req), 0);
	CHECK_INT_EQ(fake_sent_count_type(q, WIRE_PEERS), 1);
	CHECK_INT_EQ(q->score, 0); /* asking again is no offence, only not answered */
	tnode_stop(&n);
}

static void peers_msg(wire_msg_t *m, const char *const *addrs, size_t n)
{
	memset(m, 0, sizeof(*m));
	m->type = WIRE_PEERS;
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage ss;
		socklen_t len;
		wire_addr_t *a = &m->u.peers.addrs[m->u.peers.n++];
		fake_sockaddr(addrs[i], &ss, &len);
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
		memcpy(a->ip, &s4->sin_addr, 4);
		a->ip_len = 4;
		a->port = ntohs(s4->sin_port);
	}
}

TEST(pex_learn, "PEERS asked for are learnt but for loopback from a non-loopback peer; unasked PEERS are ignored")
{
	tnode_t n;
	wire_msg_t m;
	setup(&n, NULL);
	peer_t *q = inbound(&n, "10.0.0.7:50000", 0);
	size_t before = addrbook_size(n.book);
	static const char *const first[] = {"10.0.0.20:7411", "127.0.0.1:7411"};
	peers_msg(&m, first, 2);
	CHECK_INT_EQ(fake_deliver(q, &m), 0);
	CHECK(find(&n, "10.0.0.20:7411") != NULL);
	CHECK(find(&n, "127.0.0.1:7411") == NULL);
	CHECK_INT_EQ(addrbook_size(n.book), before + 1);
	static const char *const second[] = {"10.0.0.21:7411"};
	peers_msg(&m, second, 1);
	CHECK_INT_EQ(fake_deliver(q, &m), 0); /* answered once already */
	CHECK(find(&n, "10.0.0.21:7411") == NULL);
	CHECK_INT_EQ(q->score, 0);
	/* a peer on loopback may tell of loopback addresses (a local mesh) */
	peer_t *l = inbound(&n, "127.0.0.1:50002", 0);
	static const char *const third[] = {"127.0.0.5:7411"};
	peers_msg(&m, third, 1);
	CHECK_INT_EQ(fake_deliver(l, &m), 0);
	CHECK(find(&n, "127.0.0.5:7411") != NULL);
	tnode_stop(&n);
}

/* ---- groups and tables ------------------------------------------------------------------ */

static addr_entry_t *add_from(tnode_t *n, const char *addr, const char *src)
{
	struct sockaddr_storage ss, sr;
	socklen_t len, slen;
	if (fake_sockaddr(addr, &ss, &len) || fake_sockaddr(src, &sr, &slen))
		return NULL;
	return addrbook_add_from(n->book, (const struct sockaddr *)&ss, len, ADDR_PEX,
				 (const struct sockaddr *)&sr);
}

static size_t count_src(tnode_t *n, const char *src)
{
	struct sockaddr_storage sr;
	socklen_t slen;
	fake_sockaddr(src, &sr, &slen);
	uint64_t g = addrbook_group_of_sa((const struct sockaddr *)&sr);
	size_t k = 0;
	for (size_t i = 0; i < addrbook_size(n->book); i++)
		k += addrbook_entry(n->book, i)->table != ADDR_TABLE_NONE &&
		     addrbook_entry(n->book, i)->src_group == g;
	return k;
}

TEST(add_bound, "at addrbook_max learnt entries one more pushes out the oldest of the source with the most; configured ones are added all the same")
{
	tnode_t n;
	char a[32];
	setup(&n, small_book);
	for (int i = 0; i < 12; i++) { /* 12 from one source, 4 from others */
		snprintf(a, sizeof(a), "10.%d.1.1:7411", 100 + i);
		CHECK(add_from(&n, a, "10.1.0.1:1") != NULL);
	}
	for (int i = 0; i < 4; i++) {
		snprintf(a, sizeof(a), "10.%d.1.1:7411", 200 + i);
		CHECK(add(&n, a, i % 2 ? ADDR_PEX : ADDR_INBOUND) != NULL);
	}
	CHECK_INT_EQ(addrbook_size(n.book), 16);
	CHECK(add(&n, "10.200.1.1:7411", ADDR_PEX) != NULL); /* known: found, not added */
	CHECK(add_from(&n, "10.250.1.1:7411", "10.2.0.1:1") != NULL);
	CHECK_INT_EQ(addrbook_size(n.book), 16);
	CHECK(find(&n, "10.100.1.1:7411") == NULL); /* the oldest of the big source went */
	CHECK_INT_EQ(count_src(&n, "10.1.0.1:1"), 11);
	for (int i = 0; i < 4; i++) {
		snprintf(a, sizeof(a), "10.%d.1.1:7411", 200 + i);
		CHECK(find(&n, a) != NULL);
	}
	CHECK(add(&n, "10.3.2.1:7411", ADDR_CONFIG) != NULL);
	CHECK_INT_EQ(addrbook_size(n.book), 17);
	tnode_stop(&n);
}

static uint64_t group_of(const char *ip)
{
	uint8_t b[16], l;
	if (addrbook_parse_ip(ip, b, &l))
		return 0;
	return addrbook_group_of(b, l);
}

TEST(groups, "network groups are /16 for IPv4 (loopback too, and IPv4-mapped IPv6), /32 for IPv6")
{
	CHECK(group_of("10.1.2.3") == group_of("10.1.200.9"));
	CHECK(group_of("10.1.2.3") != group_of("10.2.2.3"));
	CHECK(group_of("::ffff:10.1.2.3") == group_of("10.1.9.9"));
	CHECK(group_of("127.0.0.1") == group_of("127.0.5.5"));
	CHECK(group_of("127.0.0.1") != group_of("127.1.0.1"));
	CHECK(group_of("2001:db8:1::1") == group_of("2001:db8:ffff::2"));
	CHECK(group_of("2001:db8::1") != group_of("2001:db9::1"));
	CHECK(group_of("0.0.10.1") != group_of("::a01:0")); /* the family is part of it */
}

TEST(bucket_placement, "a source's addresses land in at most 8 new buckets, an address group's in at most 8 tried ones; placement follows the key")
{
	tnode_t n;
	char a[40];
	setup(&n, NULL);
	/* on an empty book first: nothing there can hold a slot */
	/* the same address from the same source goes to the same place under
	 * the same key; under other keys, elsewhere */
	addr_entry_t *e = add_from(&n, "10.240.0.1:7411", "10.241.0.1:1");
	CHECK(e != NULL);
	unsigned b1 = e ? e->bucket : 0;
	addrbook_t *other = addrbook_new(n.net, &n.cfg, &n.stats);
	addrbook_t *keep = n.book;
	n.book = other;
	int moved = 0;
	for (int k = 0; k < 4; k++) { /* four fresh keys: all four in one bucket is 2^-32 */
		crypto_shorthash_keygen(other->key);
		char t[40];
		snprintf(t, sizeof(t), "10.240.0.%d:7411", 11 + k);
		addr_entry_t *f = add_from(&n, t, "10.241.0.1:1");
		moved |= f && f->bucket != b1;
	}
	CHECK(moved);
	memcpy(other->key, keep->key, sizeof(other->key));
	addr_entry_t *g = add_from(&n, "10.240.0.9:7411", "10.241.0.1:1");
	n.book = keep;
	addr_entry_t *h = add_from(&n, "10.240.0.9:7411", "10.241.0.1:1");
	CHECK(g && h && g->bucket == h->bucket);
	addrbook_free(other);
	/* tried: every address of one group in at most 8 buckets */
	uint8_t tseen[ADDRBOOK_TRIED_BUCKETS] = {0};
	size_t tb = 0;
	for (int i = 0; i < 200; i++) {
		snprintf(a, sizeof(a), "10.77.%d.%d:7411", i / 200, 1 + i % 200);
		addr_entry_t *te = add_from(&n, a, "10.78.0.1:1");
		if (!te)
			continue;
		addrbook_make_tried(n.book, te);
		if (te->table != ADDR_TABLE_TRIED)
			continue;
		tb += !tseen[te->bucket];
		tseen[te->bucket] = 1;
	}
	CHECK(tb >= 1 && tb <= ADDRBOOK_TRIED_PER_GROUP);
	uint8_t seen[ADDRBOOK_NEW_BUCKETS] = {0};
	size_t buckets = 0, added = 0;
	for (int i = 0; i < 3000; i++) {
		snprintf(a, sizeof(a), "%d.%d.%d.%d:7411", 11 + i % 200, i % 251, i / 251, 1 + i % 7);
		addr_entry_t *ne = add_from(&n, a, "10.9.0.1:1");
		if (!ne)
			continue;
		added++;
		CHECK_INT_EQ(ne->table, ADDR_TABLE_NEW);
		buckets += !seen[ne->bucket];
		seen[ne->bucket] = 1;
	}
	CHECK(buckets <= ADDRBOOK_NEW_PER_GROUP);
	CHECK(added <= ADDRBOOK_NEW_PER_GROUP * ADDRBOOK_BUCKET_SIZE);
	CHECK(added >= ADDRBOOK_BUCKET_SIZE); /* it does fill its own share */
	tnode_stop(&n);
}

TEST(poisoning, "17 poisoning sources fill only their share: every honest address survives, newcomers that connect are taken, most told by fresh sources too")
{
	tnode_t n;
	char a[40], src[40];
	setup(&n, NULL);
	/* 40 honest addresses from 10 honest sources */
	size_t honest = 0;
	for (int i = 0; i < 40; i++) {
		snprintf(a, sizeof(a), "10.%d.%d.1:7411", 10 + i, i);
		snprintf(src, sizeof(src), "10.%d.0.1:1", 10 + i % 10);
		honest += add_from(&n, a, src) != NULL;
	}
	CHECK_INT_EQ(honest, 40);
	/* 17 sources in 17 groups, each telling of 3000 addresses */
	for (int s2 = 0; s2 < 17; s2++) {
		snprintf(src, sizeof(src), "172.%d.0.1:1", 16 + s2);
		for (int i = 0; i < 3000; i++) {
			snprintf(a, sizeof(a), "%d.%d.%d.%d:7411", 100 + s2, i % 256, i / 256, 1 + s2);
			add_from(&n, a, src);
		}
	}
	size_t n_new, n_tried, attacker = 0;
	addrbook_table_counts(n.book, &n_new, &n_tried);
	for (int s2 = 0; s2 < 17; s2++) {
		snprintf(src, sizeof(src), "172.%d.0.1:1", 16 + s2);
		size_t k = count_src(&n, src);
		CHECK(k <= ADDRBOOK_NEW_PER_GROUP * ADDRBOOK_BUCKET_SIZE);
		attacker += k;
	}
	CHECK(attacker <= 17 * ADDRBOOK_NEW_PER_GROUP * ADDRBOOK_BUCKET_SIZE);
	size_t survived = 0;
	for (int i = 0; i < 40; i++) {
		snprintf(a, sizeof(a), "10.%d.%d.1:7411", 10 + i, i);
		survived += find(&n, a) != NULL;
	}
	CHECK_INT_EQ(survived, 40);
	/* newcomers that connected and told of themselves: taken, if need be
	 * in the place of an address no one has reached yet (one of the honest
	 * 40, now and then: a node that connects beats one only heard of) */
	for (int i = 0; i < 20; i++) {
		snprintf(a, sizeof(a), "10.%d.7.1:7411", 100 + i);
		CHECK(add(&n, a, ADDR_INBOUND) != NULL);
	}
	/* newcomers told of by 40 fresh sources: most are taken (each one's
	 * bucket is one the attack filled with odds of about 0.4) */
	size_t fresh = 0;
	for (int i = 0; i < 40; i++) {
		snprintf(a, sizeof(a), "10.%d.8.1:7411", 150 + i);
		snprintf(src, sizeof(src), "10.%d.0.1:1", 200 + i);
		fresh += add_from(&n, a, src) != NULL;
	}
	CHECK(fresh >= 10);
	printf("# attack: %zu of 17 x 3000 addresses taken (%zu new entries in all); "
	       "20 of 20 connecting newcomers and %zu of 40 told by fresh sources taken\n",
	       attacker, n_new, fresh);

	/* with a small bound (addrbook_max 1024) the room comes out of the
	 * biggest source: the honest entries stay */
	n.cfg.addrbook_max = 1024;
	for (int i = 0; i < 2000; i++) {
		snprintf(a, sizeof(a), "99.%d.%d.7:7411", i % 256, i / 256);
		add_from(&n, a, "172.40.0.1:1");
	}
	size_t after = 0;
	for (int i = 0; i < 40; i++) {
		snprintf(a, sizeof(a), "10.%d.%d.1:7411", 10 + i, i);
		after += find(&n, a) != NULL;
	}
	CHECK(after >= 36);
	printf("# after the newcomers and a 2000-address source against addrbook_max 1024: "
	       "%zu of the 40 honest addresses left\n", after);
	tnode_stop(&n);
}

TEST(pex_answer_limit, "one PEERS answer adds at most 10 new addresses, placed by the answering peer's group")
{
	tnode_t n;
	wire_msg_t m;
	setup(&n, NULL);
	peer_t *q = inbound(&n, "10.66.0.7:50000", 0);
	size_t before = addrbook_size(n.book);
	const char *addrs[64];
	char buf[64][32];
	for (int i = 0; i < 64; i++) {
		snprintf(buf[i], sizeof(buf[i]), "10.%d.0.%d:7411", 100 + i, 1 + i);
		addrs[i] = buf[i];
	}
	peers_msg(&m, addrs, 64);
	CHECK_INT_EQ(fake_deliver(q, &m), 0);
	CHECK_INT_EQ(addrbook_size(n.book) - before, PEX_NEW_MAX);
	CHECK_INT_EQ(count_src(&n, "10.66.0.1:1"), PEX_NEW_MAX);
	tnode_stop(&n);
}

TEST(selection, "dialling picks a source group uniformly: one source telling of 400 addresses gets about its share of dials, not 400 times more")
{
	tnode_t n;
	char a[40], src[40];
	setup(&n, no_target);
	for (int i = 0; i < 4; i++) {
		snprintf(a, sizeof(a), "10.%d.0.1:7411", 30 + i);
		snprintf(src, sizeof(src), "10.%d.0.1:1", 40 + i);
		CHECK(add_from(&n, a, src) != NULL);
	}
	size_t told = 0;
	for (int i = 0; i < 400; i++) {
		snprintf(a, sizeof(a), "%d.%d.%d.9:7411", 20 + i % 100, i % 256, i / 256);
		told += add_from(&n, a, "172.20.0.1:1") != NULL;
	}
	CHECK(told > 100);
	int64_t now = node_now_us();
	size_t bad = 0, picks = 2000;
	for (size_t i = 0; i < picks; i++) {
		addr_entry_t *e = addrbook_select(n.book, ADDR_TABLE_NEW, now);
		CHECK(e != NULL);
		bad += e && e->src_group == group_of("172.20.0.1");
	}
	/* 1 of 5 groups: 20 % expected; 400 of 404 entries would be 99 % */
	CHECK(bad > picks / 10 && bad < picks * 3 / 10);
	CHECK(addrbook_select(n.book, ADDR_TABLE_TRIED, now) == NULL);
	printf("# the poisoning source (%zu entries of %zu) got %zu of %zu picks\n", told, told + 4,
	       bad, picks);
	tnode_stop(&n);
}

TEST(terrible, "a learnt address that never worked is dropped after 3 failed dials; a configured one never is; one that worked goes to the tried table")
{
	tnode_t n;
	pith_err_t err = {0};
	setup(&n, backoff_cfg);
	n.cfg.outbound_target = 1;
	CHECK(add_from(&n, "10.5.0.1:7411", "10.6.0.1:1") != NULL);
	int64_t t = node_now_us();
	for (int i = 0; i < 3; i++) {
		const addr_entry_t *e = find(&n, "10.5.0.1:7411");
		CHECK(e != NULL);
		if (!e)
			break;
		t = (e->next_attempt_us > t ? e->next_attempt_us : t) + 1000000;
		addrbook_maintain(n.book, t);
		peer_t *p = net_peer_by_serial(n.net, e->peer_serial);
		CHECK(p != NULL);
		if (!p)
			break;
		peer_close(p, 0, "test: refused");
		net_reap(n.net, 0);
	}
	CHECK(find(&n, "10.5.0.1:7411") == NULL);
	/* configured: kept whatever happens */
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "10.7.0.1:7411", 1, &err), 0);
	const addr_entry_t *c = find(&n, "10.7.0.1:7411");
	CHECK(c && c->table == ADDR_TABLE_NONE);
	for (int i = 0; c && i < 5; i++) {
		t = (c->next_attempt_us > t ? c->next_attempt_us : t) + 1000000;
		addrbook_maintain(n.book, t);
		peer_t *p = net_peer_by_serial(n.net, c->peer_serial);
		if (!p)
			break;
		peer_close(p, 0, "test: refused");
		net_reap(n.net, 0);
		c = find(&n, "10.7.0.1:7411");
	}
	CHECK(c != NULL && c->failures == 5);
	/* one that works moves to tried */
	n.cfg.outbound_target = 2;
	addr_entry_t *w = add_from(&n, "10.8.0.1:7411", "10.6.0.1:1");
	CHECK(w && w->table == ADDR_TABLE_NEW);
	addrbook_maintain(n.book, t + 10000000);
	peer_t *p = w ? net_peer_by_serial(n.net, w->peer_serial) : NULL;
	CHECK(p != NULL);
	if (p)
		fake_peer_ready(p, NULL, 0);
	CHECK(w && w->table == ADDR_TABLE_TRIED && w->last_ok_us > 0);
	size_t nn, nt;
	addrbook_table_counts(n.book, &nn, &nt);
	CHECK_INT_EQ(nt, 1);
	tnode_stop(&n);
}

/* ---- DATA/peers.json -------------------------------------------------------------------------- */

TEST(file_roundtrip, "peers.json keeps addresses, kept entries, node ids and running bans across a restart")
{
	tnode_t n;
	pith_err_t err = {0};
	uint8_t ip[16], pk[32];
	setup(&n, NULL);
	addrbook_load(n.book); /* no file yet */
	CHECK_INT_EQ(addrbook_size(n.book), 0);
	addr_entry_t *a = add(&n, "10.0.0.20:7411", ADDR_PEX);
	a->last_ok_us = 1234567;
	addrbook_make_tried(n.book, a);
	CHECK_INT_EQ(a->table, ADDR_TABLE_TRIED);
	unsigned tried_bucket = a->bucket;
	addr_entry_t *told = add_from(&n, "10.0.0.22:7411", "10.50.0.1:1");
	CHECK(told != NULL);
	unsigned told_bucket = told ? told->bucket : 0;
	randombytes_buf(pk, sizeof(pk));
	memcpy(a->pk, pk, 32);
	a->has_pk = 1;
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "10.0.0.21:7411", ADDRBOOK_KEEP, &err), 0);
	CHECK_INT_EQ(addrbook_add_hostport(n.book, "[2001:db8::5]:7411", 1, &err), 0);
	int64_t now = node_now_us();
	ip4("10.0.0.30", ip);
	CHECK_INT_EQ(addrbook_ban_set(n.book, ip, 4, now + 3600 * INT64_C(1000000), "a \"quoted\" reason"), 0);
	ip4("10.0.0.31", ip);
	CHECK_INT_EQ(addrbook_ban_set(n.book, ip, 4, now - 1, "ran out"), 0);
	CHECK_INT_EQ(addrbook_save(n.book, &err), 0);

	addrbook_t *b = addrbook_new(n.net, &n.cfg, &n.stats);
	addrbook_t *keep = n.book;
	n.book = b;
	addrbook_load(b);
	CHECK_INT_EQ(addrbook_size(b), 4);
	CHECK(!memcmp(b->key, keep->key, sizeof(b->key))); /* version 2 keeps the key */
	const addr_entry_t *e = find(&n, "10.0.0.20:7411");
	CHECK(e && e->last_ok_us == 1234567 && e->has_pk && !memcmp(e->pk, pk, 32) && !e->pinned);
	CHECK(e && e->table == ADDR_TABLE_TRIED && e->bucket == tried_bucket);
	e = find(&n, "10.0.0.22:7411"); /* in the bucket of who told of it */
	CHECK(e && e->table == ADDR_TABLE_NEW && e->bucket == told_bucket);
	e = find(&n, "10.0.0.21:7411");
	CHECK(e && e->kept && e->pinned);
	e = find(&n, "[2001:db8::5]:7411");
	CHECK(e && !e->kept && !e->pinned); /* configured peers come from the configuration */
	CHECK_INT_EQ(addrbook_ban_count(b), 1);
	CHECK(banned(&n, "10.0.0.30:1", now));
	CHECK(!banned(&n, "10.0.0.31:1", now));
	CHECK_STR_EQ(addrbook_ban_at(b, 0)->reason, "a \"quoted\" reason");
	n.book = keep;
	addrbook_free(b);

	/* a version 1 file loads: its addresses into the new table */
	char path1[CONFIG_STR_MAX + 16];
	snprintf(path1, sizeof(path1), "%s/peers.json", n.cfg.data_dir);
	FILE *f1 = fopen(path1, "w");
	CHECK(f1 != NULL);
	if (f1) {
		fputs("{\"version\":1,\"addresses\":[\n{\"addr\":\"10.0.0.40:7411\",\"kept\":false,"
		      "\"last_ok_us\":5},\n{\"addr\":\"10.0.0.41:7411\",\"kept\":true,\"last_ok_us\":0}],"
		      "\"bans\":[]}\n", f1);
		fclose(f1);
	}
	b = addrbook_new(n.net, &n.cfg, &n.stats);
	n.book = b;
	addrbook_load(b);
	CHECK_INT_EQ(addrbook_size(b), 2);
	e = find(&n, "10.0.0.40:7411");
	CHECK(e && e->table == ADDR_TABLE_NEW && e->last_ok_us == 5);
	e = find(&n, "10.0.0.41:7411");
	CHECK(e && e->kept && e->table == ADDR_TABLE_NONE);
	n.book = keep;
	addrbook_free(b);

	/* a damaged file is ignored */
	char path[CONFIG_STR_MAX + 16];
	snprintf(path, sizeof(path), "%s/peers.json", n.cfg.data_dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs("{\"version\":1,\"addresses\":[", f);
		fclose(f);
	}
	b = addrbook_new(n.net, &n.cfg, &n.stats);
	addrbook_load(b);
	CHECK_INT_EQ(addrbook_size(b), 0);
	CHECK_INT_EQ(addrbook_ban_count(b), 0);
	addrbook_free(b);
	tnode_stop(&n);
}

int main(void)
{
	tnode_global_init();
	RUN(add_find_dedupe);
	RUN(add_refuses_undialable);

	RUN(maintain_pinned);
	RUN(maintain_target);
	RUN(backoff);
	RUN(handshake_timeout);
	RUN(bans);
	RUN(ban_blocks_dial);
	RUN(ban_overflow);
	RUN(inbound_limits);
	RUN(inbound_eviction);
	RUN(ban_threshold);
	RUN(parse_ip);
	RUN(pex_answer);
	RUN(pex_learn);
	RUN(add_bound);
	RUN(groups);
	RUN(bucket_placement);
	RUN(poisoning);
	RUN(pex_answer_limit);
	RUN(selection);
	RUN(terrible);
	RUN(file_roundtrip);
	tnode_global_free();
	return test_done();
}
