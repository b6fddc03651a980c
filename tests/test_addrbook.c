/* The address book (node/mesh/addrbook*.c) over the fake transport:
 * adding and finding addresses, dialling pinned and learnt entries, the
 * backoff after failed dials, bans and their overflow, inbound limits and
 * eviction, addrbook_parse_ip, peer exchange (PEERS_REQ/PEERS), and
 * DATA/peers.json (versions 1 and 2). The tables: test_addrbook_tables.c. */
#include "test_addrbook_util.h"

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

/* ---- dialling ---------------------------------------------------------------------------- */

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
	RUN(file_roundtrip);
	tnode_global_free();
	return test_done();
}
