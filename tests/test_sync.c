/* Reconciliation sessions (node/mesh/sync.c) between two test nodes, each with
 * its own store and fake transport, joined by a link that carries what
 * one side sent the other: sessions find exactly what each side lacks,
 * the fetches that follow bring both stores to the same events; a peer
 * without the feature falls back to the INV listing, and its RECON is a
 * protocol violation; a session nobody answers ends at sync_timeout_ms;
 * peers together get at most sync_upload_bytes of answers. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tnode.h"

static tevents_t evs;

/* Which events each node holds at start: A all but i % 3 == 2, B all but
 * i % 3 == 0; each lacks a third, which the other holds. */
static int a_holds(size_t i)
{
	return i % 3 != 2;
}

static int b_holds(size_t i)
{
	return i % 3 != 0;
}

static void start_with(tnode_t *n, int (*holds)(size_t))
{
	CHECK_INT_EQ(tnode_init(n, "test_sync", tnode_trust(), NULL), 0);
	for (size_t i = 0; i < evs.n; i++)
		if (holds(i))
			CHECK_INT_EQ(tnode_put(n, evs.json[i].data, evs.json[i].len), 0);
	CHECK_INT_EQ(tnode_start(n), 0);
}

/* ---- the link ------------------------------------------------------------------------ */

/* A dialled B: pa is B as A sees it, pb A as B sees it (by serial: a peer
 * may be freed). ca, cb: messages of pa, pb already carried. */
typedef struct link {
	tnode_t *a, *b;
	uint64_t pa, pb;
	size_t ca, cb;
	int all; /* carry every message, else RECON and RECON_BUNDLES only */
} link_t;

static void link_open(link_t *l, tnode_t *a, tnode_t *b, int all)
{
	memset(l, 0, sizeof(*l));
	l->a = a;
	l->b = b;
	l->all = all;
	/* the acceptor's end first, so that the dialler's first RECON has
	 * somewhere to go */
	peer_t *pb = fake_peer_add(b->net, 0, "10.0.0.1:40001");
	pb->listen_port = 7411;
	fake_peer_ready(pb, a->pk, sync_features(a->sync));
	peer_t *pa = fake_peer_new(a->net, 1, "10.0.0.2:7411", b->pk, sync_features(b->sync));
	CHECK(pa && pb && pa->state == PEER_READY && pb->state == PEER_READY);
	l->pa = pa->serial;
	l->pb = pb->serial;
}

/* Carries what from sent to to since *cursor. The number carried. */
static size_t carry(peer_t *from, size_t *cursor, peer_t *to, int all)
{
	size_t moved = 0;
	wire_msg_t m;
	while (from && to && *cursor < fake_sent_count(from)) {
		if (fake_sent_get(from, (*cursor)++, &m))
			continue;
		if (!all && m.type != WIRE_RECON && m.type != WIRE_RECON_BUNDLES)
			continue;
		if (to->state == PEER_CLOSING)
			break;
		CHECK_INT_EQ(fake_deliver(to, &m), 0);
		moved++;
	}
	return moved;
}

static size_t link_step(link_t *l)
{
	peer_t *pa = net_peer_by_serial(l->a->net, l->pa);
	peer_t *pb = net_peer_by_serial(l->b->net, l->pb);
	size_t moved = carry(pa, &l->ca, pb, l->all);
	moved += carry(pb, &l->cb, pa, l->all);
	return moved;
}

/* Carries messages and runs both loops until done(arg) or, with done
 * NULL, until nothing moved for a while; at most ms. */
static int link_run(link_t *l, int (*done)(void *), void *arg, int ms)
{
	int64_t end = node_now_us() + (int64_t)ms * 1000, quiet_since = node_now_us();
	for (;;) {
		if (link_step(l))
			quiet_since = node_now_us();
		tnode_run_until(l->a, NULL, NULL, 0);
		tnode_run_until(l->b, NULL, NULL, 0);
		if (done ? done(arg) : node_now_us() - quiet_since > 100000)
			return 1;
		if (node_now_us() > end)
			return 0;
	}
}

static peer_t *link_pa(const link_t *l)
{
	return net_peer_by_serial(l->a->net, l->pa);
}

static peer_t *link_pb(const link_t *l)
{
	return net_peer_by_serial(l->b->net, l->pb);
}

static void status_of(tnode_t *n, pith_buf_t *b)
{
	pith_buf_reset(b);
	pith_buf_puts(b, "{");
	sync_status_json(n->sync, b);
	pith_buf_puts(b, "}");
	pith_buf_append(b, "", 1); /* NUL: read as a string */
}

/* ---- sessions --------------------------------------------------------------------------- */

TEST(session_finds_difference, "a session between overlapping stores finds exactly the ids each side lacks")
{
	tnode_t a, b;
	link_t l;
	start_with(&a, a_holds);
	start_with(&b, b_holds);
	link_open(&l, &a, &b, 0);
	CHECK_INT_EQ(fake_sent_count_type(link_pa(&l), WIRE_RECON), 1); /* the dialler began */
	CHECK(link_run(&l, NULL, NULL, 5000));
	peer_t *pa = link_pa(&l), *pb = link_pb(&l);
	size_t a_lacks = 0, b_lacks = 0;
	for (size_t i = 0; i < evs.n; i++) {
		/* what A asks B for is what A lacks; likewise B */
		CHECK_INT_EQ(fake_sent_has_id(pa, WIRE_GET, evs.id[i]), !a_holds(i));
		CHECK_INT_EQ(fake_sent_has_id(pb, WIRE_GET, evs.id[i]), !b_holds(i));
		a_lacks += !a_holds(i);
		b_lacks += !b_holds(i);
	}
	CHECK_INT_EQ(fake_sent_ids(pa, WIRE_GET), a_lacks);
	CHECK_INT_EQ(fake_sent_ids(pb, WIRE_GET), b_lacks);
	/* catch-up runs through reconciliation: no INV listing */
	CHECK_INT_EQ(fake_sent_count_type(pa, WIRE_INV_REQ) + fake_sent_count_type(pb, WIRE_INV_REQ), 0);
	pith_buf_t s = PITH_BUF_INIT;
	char want[64];
	status_of(&a, &s);
	snprintf(want, sizeof(want), "\"ids_needed\":%zu,\"ids_offered\":%zu", a_lacks, b_lacks);
	CHECK_STR_CONTAINS((const char *)s.data, want);
	CHECK_STR_CONTAINS((const char *)s.data, "\"sessions_failed\":0");
	CHECK_STR_CONTAINS((const char *)s.data, "\"role\":\"initiator\"");
	status_of(&b, &s);
	snprintf(want, sizeof(want), "\"ids_needed\":%zu,\"ids_offered\":%zu", b_lacks, a_lacks);
	CHECK_STR_CONTAINS((const char *)s.data, want);
	CHECK_STR_CONTAINS((const char *)s.data, "\"sessions_failed\":0");
	CHECK_INT_EQ(pa->score + pb->score, 0);
	pith_buf_release(&s);
	tnode_stop(&a);
	tnode_stop(&b);
}

typedef struct both {
	tnode_t *a, *b;
	size_t a_lacks, b_lacks;
} both_t;

static int both_stored(void *arg)
{
	both_t *w = arg;
	return w->a->stats.events_stored + w->a->stats.events_invalid >= w->a_lacks &&
	       w->b->stats.events_stored + w->b->stats.events_invalid >= w->b_lacks;
}

TEST(session_converges, "the fetches a session starts bring both stores to the same events")
{
	tnode_t a, b;
	link_t l;
	start_with(&a, a_holds);
	start_with(&b, b_holds);
	both_t w = {&a, &b, 0, 0};
	for (size_t i = 0; i < evs.n; i++) {
		w.a_lacks += !a_holds(i);
		w.b_lacks += !b_holds(i);
	}
	link_open(&l, &a, &b, 1);
	CHECK(link_run(&l, both_stored, &w, 10000));
	CHECK_INT_EQ(a.stats.events_stored, w.a_lacks);
	CHECK_INT_EQ(b.stats.events_stored, w.b_lacks);
	CHECK_INT_EQ(a.stats.events_invalid + b.stats.events_invalid, 0);
	for (size_t i = 0; i < evs.n; i++) {
		CHECK_INT_EQ(store_event_has(a.store, evs.id[i], NULL), 1);
		CHECK_INT_EQ(store_event_has(b.store, evs.id[i], NULL), 1);
	}
	/* nothing is left to fetch or to reconcile */
	CHECK(link_run(&l, NULL, NULL, 5000));
	CHECK_INT_EQ(relay_pending_fetches(a.relay) + relay_pending_fetches(b.relay), 0);
	CHECK_INT_EQ(link_pa(&l)->score + link_pb(&l)->score, 0);
	/* the filter of stored ids (relay_want's "surely not stored") holds
	 * what each node held and what it fetched: a "surely absent" for
	 * either would fetch it again, once its id left the relay's cache of
	 * recent ids. And it is on: most ids never seen are surely absent. */
	for (size_t i = 0; i < evs.n; i++) {
		CHECK_INT_EQ(sync_id_is_absent(a.sync, evs.id[i]), 0);
		CHECK_INT_EQ(sync_id_is_absent(b.sync, evs.id[i]), 0);
	}
	int absent = 0;
	for (int k = 0; k < 16; k++) {
		uint8_t id[32];
		randombytes_buf(id, sizeof(id));
		absent += sync_id_is_absent(a.sync, id) + sync_id_is_absent(b.sync, id);
	}
	CHECK(absent >= 16);
	tnode_stop(&a);
	tnode_stop(&b);
}

/* ---- peers without the feature ------------------------------------------------------------ */

TEST(fallback_without_sync, "a peer without WIRE_FEAT_SYNC gets no session: sync_peer_ready says 0 and the INV listing runs")
{
	tnode_t a;
	start_with(&a, a_holds);
	/* wired as node.c does: no RECON, an INV_REQ instead */
	peer_t *p = fake_peer_new(a.net, 1, "10.0.0.2:7411", NULL, WIRE_FEAT_BUNDLE_BULK);
	CHECK_INT_EQ(fake_sent_count_type(p, WIRE_RECON), 0);
	CHECK_INT_EQ(fake_sent_count_type(p, WIRE_INV_REQ), 1);
	/* the contract itself, on peers the test makes ready by hand */
	uint64_t feats[2] = {WIRE_FEAT_BUNDLE_BULK, WIRE_FEAT_SYNC};
	for (int k = 0; k < 2; k++) {
		peer_t *q = fake_peer_add(a.net, 1, k ? "10.0.0.4:7411" : "10.0.0.3:7411");
		q->features = feats[k];
		q->state = PEER_READY;
		CHECK_INT_EQ(relay_peer_attach(a.relay, q), 0);
		CHECK_INT_EQ(sync_peer_ready(a.sync, q), k);
		/* the dialler of a peer that reconciles starts a session at once */
		CHECK_INT_EQ(fake_sent_count_type(q, WIRE_RECON), k);
	}
	tnode_stop(&a);
}

static void deliver_recon(peer_t *p, wire_type_t type, uint64_t session)
{
	static const uint8_t junk[3] = {1, 2, 3};
	wire_msg_t m = {.type = type};
	m.u.recon.session = session;
	m.u.recon.data = junk;
	m.u.recon.len = sizeof(junk);
	CHECK_INT_EQ(fake_deliver(p, &m), 0);
}

TEST(recon_without_feature, "a RECON from a peer without the feature is a protocol violation")
{
	tnode_t a;
	start_with(&a, a_holds);
	peer_t *p = fake_peer_new(a.net, 0, "10.0.0.2:40001", NULL, WIRE_FEAT_BUNDLE_BULK);
	deliver_recon(p, WIRE_RECON, 2);
	CHECK_INT_EQ(p->score, SCORE_PROTOCOL);
	CHECK_INT_EQ(p->state, PEER_CLOSING);
	CHECK_INT_EQ(fake_bans(a.net), 1); /* SCORE_PROTOCOL is the default ban threshold */
	CHECK(addrbook_is_banned(a.book, (const struct sockaddr *)&p->sa, node_now_us()));
	/* RECON_BUNDLES needs WIRE_FEAT_BUNDLE_SYNC as well */
	peer_t *q = fake_peer_new(a.net, 0, "10.0.0.3:40001", NULL, WIRE_FEAT_SYNC);
	deliver_recon(q, WIRE_RECON_BUNDLES, 2);
	CHECK_INT_EQ(q->score, SCORE_PROTOCOL);
	CHECK_INT_EQ(q->state, PEER_CLOSING);
	tnode_stop(&a);
}

/* The last RECON sent to p: its session and data length. */
static int last_recon(peer_t *p, uint64_t *session, size_t *len)
{
	wire_msg_t m;
	int found = 0;
	for (size_t i = 0; i < fake_sent_count(p); i++)
		if (fake_sent_get(p, i, &m) == 0 && m.type == WIRE_RECON) {
			*session = m.u.recon.session;
			*len = m.u.recon.len;
			found = 1;
		}
	return found;
}

TEST(session_timeout, "a session the peer does not answer within sync_timeout_ms ends, and its late answer is ignored")
{
	tnode_t a;
	uint64_t session = 0;
	size_t len = 0;
	pith_buf_t s = PITH_BUF_INIT;
	start_with(&a, a_holds);
	peer_t *p = fake_peer_new(a.net, 1, "10.0.0.2:7411", NULL, WIRE_FEAT_SYNC);
	CHECK(last_recon(p, &session, &len) && len > 0);
	CHECK_INT_EQ(session, 1); /* the dialler's sessions are odd */
	int64_t t = node_now_us();
	sync_tick(a.sync, t + a.cfg.sync_timeout_ms * 1000 / 2);
	status_of(&a, &s);
	CHECK_STR_CONTAINS((const char *)s.data, "\"state\":\"waiting\"");
	sync_tick(a.sync, t + a.cfg.sync_timeout_ms * 1000 + 1000);
	status_of(&a, &s);
	CHECK_STR_CONTAINS((const char *)s.data, "\"sessions_failed\":1");
	CHECK_STR_CONTAINS((const char *)s.data, "\"state\":\"idle\"");
	CHECK_STR_CONTAINS((const char *)s.data, "no answer within");
	/* the peer is told: an empty RECON of that session */
	CHECK(last_recon(p, &session, &len));
	CHECK_INT_EQ(session, 1);
	CHECK_INT_EQ(len, 0);
	deliver_recon(p, WIRE_RECON, 1);
	CHECK_INT_EQ(p->score, 0);
	CHECK_INT_EQ(p->state, PEER_READY);
	pith_buf_release(&s);
	tnode_stop(&a);
}

static void small_upload(node_config_t *c)
{
	c->sync_upload_bytes = 65536;
}

TEST(upload_budget, "peers asking \"list everything\" again and again get at most sync_upload_bytes together, deferred, not banned")
{
	/* one range to +infinity, a LIST of nothing (docs/sync.md, "Limits") */
	static const uint8_t all[] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0};
	tnode_t a;
	peer_t *ps[8];
	uint64_t before[8];
	pith_buf_t s = PITH_BUF_INIT;
	CHECK_INT_EQ(tnode_init(&a, "test_sync", tnode_trust(), small_upload), 0);
	for (size_t i = 0; i < evs.n; i++)
		if (a_holds(i))
			CHECK_INT_EQ(tnode_put(&a, evs.json[i].data, evs.json[i].len), 0);
	CHECK_INT_EQ(tnode_start(&a), 0);
	for (size_t k = 0; k < 8; k++) {
		char addr[32];
		snprintf(addr, sizeof(addr), "10.0.%zu.2:40001", k + 1);
		ps[k] = fake_peer_new(a.net, 0, addr, NULL, WIRE_FEAT_SYNC);
		CHECK(ps[k] && ps[k]->state == PEER_READY);
		before[k] = ps[k]->bytes_out;
	}
	/* 8 peers x 10 sessions of one listing (80 ids, 2,560 bytes) each:
	 * 205 KB asked, each peer's own credit (over 1 MiB) allowing it all */
	for (uint64_t round = 0; round < 10; round++)
		for (size_t k = 0; k < 8; k++) {
			wire_msg_t m = {.type = WIRE_RECON};
			m.u.recon.session = 2 * round + 1; /* the dialler's are odd */
			m.u.recon.data = all;
			m.u.recon.len = sizeof(all);
			CHECK_INT_EQ(fake_deliver(ps[k], &m), 0);
		}
	sync_tick(a.sync, node_now_us());
	uint64_t total = 0;
	for (size_t k = 0; k < 8; k++) {
		total += ps[k]->bytes_out - before[k];
		CHECK_INT_EQ(ps[k]->score, 0);
		CHECK_INT_EQ(ps[k]->state, PEER_READY);
	}
	/* at most the budget (and its refill over the test: 65536 / 600 s a
	 * second), and most of it used */
	CHECK(total <= 65536 + 1024);
	CHECK(total >= 65536 - 2 * 2600);
	CHECK_INT_EQ(fake_bans(a.net), 0);
	status_of(&a, &s);
	CHECK_STR_CONTAINS((const char *)s.data, "\"upload_budget\":65536");
	CHECK(!strstr((const char *)s.data, "\"upload_holds\":0,"));
	pith_buf_release(&s);
	tnode_stop(&a);
}

int main(void)
{
	tnode_global_init();
	tevents_make(&evs, 200, 30);
	RUN(session_finds_difference);
	RUN(session_converges);
	RUN(fallback_without_sync);
	RUN(recon_without_feature);
	RUN(session_timeout);
	RUN(upload_budget);
	tevents_free(&evs);
	tnode_global_free();
	return test_done();
}
