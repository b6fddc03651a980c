/* The address book's new and tried tables (node/mesh/addrbook.c) over
 * the fake transport: the bound, network groups, bucket placement, what
 * one poisoning source can fill, what one PEERS answer adds, the
 * selection by group, terrible entries. */
#include "test_addrbook_util.h"

/* ---- groups and tables ------------------------------------------------------------------ */

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

int main(void)
{
	tnode_global_init();
	RUN(add_bound);
	RUN(groups);
	RUN(bucket_placement);
	RUN(poisoning);
	RUN(pex_answer_limit);
	RUN(selection);
	RUN(terrible);
	tnode_global_free();
	return test_done();
}
