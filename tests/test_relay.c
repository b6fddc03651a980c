/* The relay (node/mesh/relay.c) over the fake transport: announce then fetch,
 * fallbacks (NOTFOUND, a disconnect, a timeout), what unasked data costs,
 * the bounds on what is queued and in flight, the path of an EVENT
 * through the real ingest pipeline into a real store and onward, and
 * serving GETs. Peers are inbound and speak reconciliation, so that
 * neither a session nor the INV listing starts with them. */
#include <stdlib.h>
#include <sodium.h>
#include <string.h>

#include "relay_int.h"
#include "test_util.h"
#include "tnode.h"

#define FEAT (WIRE_FEAT_SYNC | WIRE_FEAT_BUNDLE_BULK)

static tevents_t evs; /* signed events, none held by a node at start */

static void rand_ids(uint8_t (*ids)[32], size_t n)
{
	randombytes_buf(ids, n * 32);
}

/* A started node whose settings tweak changed (NULL: defaults), and np
 * inbound ready peers. */
static void setup(tnode_t *n, void (*tweak)(node_config_t *), peer_t **ps, size_t np)
{
	CHECK_INT_EQ(tnode_start_peers(n, "test_relay", tweak, FEAT, ps, np), 0);
}

static void deliver_ids(peer_t *p, wire_type_t type, const uint8_t (*ids)[32], size_t n)
{
	CHECK_INT_EQ(fake_deliver_ids(p, type, ids, n), 0);
}

static void deliver_event(peer_t *p, const uint8_t id[32], const pith_buf_t *json)
{
	wire_msg_t m = {.type = WIRE_EVENT};
	memcpy(m.u.event.id, id, 32);
	m.u.event.json = json->data;
	m.u.event.len = json->len;
	CHECK_INT_EQ(fake_deliver(p, &m), 0);
}

/* ---- announce and fetch ------------------------------------------------------------ */

TEST(announce_gets, "an announced id is asked for with a GET to the announcer alone")
{
	tnode_t n;
	peer_t *ps[2];
	uint8_t id[1][32];
	setup(&n, NULL, ps, 2);
	rand_ids(id, 1);
	deliver_ids(ps[0], WIRE_ANNOUNCE, id, 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_GET, id[0]), 1);
	CHECK_INT_EQ(fake_sent_count(ps[1]), 0);
	CHECK_INT_EQ(ps[0]->relay->inflight, 1);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 1);
	CHECK_INT_EQ(n.stats.ids_requested, 1);
	/* an announce costs budget; it is no answer */
	CHECK_INT_EQ(fake_unsolicited_in(ps[0]), 1);
	/* the same id announced again is not asked for again */
	deliver_ids(ps[0], WIRE_ANNOUNCE, id, 1);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_GET), 1);
	tnode_stop(&n);
}

/* Two peers announce one id; the first is asked. */
static void two_announcers(tnode_t *n, void (*tweak)(node_config_t *), peer_t **ps,
			   uint8_t id[32])
{
	setup(n, tweak, ps, 2);
	randombytes_buf(id, 32);
	deliver_ids(ps[0], WIRE_ANNOUNCE, (const uint8_t(*)[32])id, 1);
	deliver_ids(ps[1], WIRE_ANNOUNCE, (const uint8_t(*)[32])id, 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_GET, id), 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[1], WIRE_GET, id), 0);
}

TEST(fallback_notfound, "a second announcer gets the GET when the first answers NOTFOUND")
{
	tnode_t n;
	peer_t *ps[2];
	uint8_t id[32];
	two_announcers(&n, NULL, ps, id);
	deliver_ids(ps[0], WIRE_NOTFOUND, (const uint8_t(*)[32])id, 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[1], WIRE_GET, id), 1);
	CHECK_INT_EQ(n.stats.notfound_in, 1);
	CHECK_INT_EQ(ps[0]->relay->inflight, 0);
	CHECK_INT_EQ(ps[1]->relay->inflight, 1);
	CHECK_INT_EQ(fake_answers_in(ps[0]), 1); /* NOTFOUND is an answer: free of budget */
	/* the second says NOTFOUND too: nobody is left to ask */
	deliver_ids(ps[1], WIRE_NOTFOUND, (const uint8_t(*)[32])id, 1);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 0);
	CHECK_INT_EQ(ps[0]->score + ps[1]->score, 0);
	tnode_stop(&n);
}

TEST(fallback_disconnect, "a second announcer gets the GET when the first disconnects")
{
	tnode_t n;
	peer_t *ps[2];
	uint8_t id[32];
	two_announcers(&n, NULL, ps, id);
	uint64_t gone = ps[0]->serial;
	peer_close(ps[0], 0, "test: disconnect");
	CHECK_INT_EQ(fake_sent_has_id(ps[1], WIRE_GET, id), 1);
	net_reap(n.net, 0);
	CHECK(net_peer_by_serial(n.net, gone) == NULL);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 1);
	CHECK_INT_EQ(ps[1]->relay->inflight, 1);
	tnode_stop(&n);
}

TEST(fallback_timeout, "a second announcer gets the GET when the first does not answer within fetch_timeout_ms")
{
	tnode_t n;
	peer_t *ps[2];
	uint8_t id[32];
	two_announcers(&n, NULL, ps, id);
	int64_t t = node_now_us();
	relay_tick(n.relay, t); /* not yet */
	CHECK_INT_EQ(fake_sent_has_id(ps[1], WIRE_GET, id), 0);
	CHECK_INT_EQ(n.stats.fetch_timeouts, 0);
	relay_tick(n.relay, t + n.cfg.fetch_timeout_ms * 1000 + 1000);
	CHECK_INT_EQ(fake_sent_has_id(ps[1], WIRE_GET, id), 1);
	CHECK_INT_EQ(n.stats.fetch_timeouts, 1);
	CHECK_INT_EQ(ps[0]->relay->inflight, 0);
	/* the first one's late EVENT is now unasked-for */
	deliver_event(ps[0], id, &evs.json[0]);
	/* it let a request time out, then sent what it was no longer asked for */
	CHECK_INT_EQ(ps[0]->score, SCORE_UNSERVED + SCORE_UNREQUESTED);
	/* the second times out too: the fetch is forgotten (the timeout scan
	 * runs at most every eighth of fetch_timeout_ms, so look far ahead) */
	relay_tick(n.relay, t + 3 * n.cfg.fetch_timeout_ms * 1000);
	CHECK_INT_EQ(n.stats.fetch_timeouts, 2);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 0);
	tnode_stop(&n);
}

TEST(unrequested_event, "an EVENT nobody asked for costs SCORE_UNREQUESTED points, and enough of them ban")
{
	tnode_t n;
	peer_t *ps[2];
	setup(&n, NULL, ps, 2);
	deliver_event(ps[0], evs.id[0], &evs.json[0]);
	CHECK_INT_EQ(ps[0]->score, SCORE_UNREQUESTED);
	CHECK_INT_EQ(n.stats.unrequested, 1);
	CHECK_INT_EQ(n.jobs_done + ingest_in_flight(n.ingest), 0); /* not validated */
	CHECK_INT_EQ(fake_refunds(ps[0]), 0);
	/* asked of one peer, sent by another: unasked-for all the same */
	deliver_ids(ps[0], WIRE_ANNOUNCE, (const uint8_t(*)[32])evs.id[1], 1);
	deliver_event(ps[1], evs.id[1], &evs.json[1]);
	CHECK_INT_EQ(ps[1]->score, SCORE_UNREQUESTED);
	uint64_t serial = ps[0]->serial;
	for (int i = 0; i < 3; i++)
		deliver_event(ps[0], evs.id[2], &evs.json[2]);
	CHECK_INT_EQ(ps[0]->state, PEER_CLOSING);
	CHECK_INT_EQ(fake_bans(n.net), 1);
	CHECK(addrbook_is_banned(n.book, (const struct sockaddr *)&ps[0]->sa, node_now_us()));
	CHECK_INT_EQ(n.stats.bans, 1);
	net_reap(n.net, 0);
	CHECK(net_peer_by_serial(n.net, serial) == NULL);
	tnode_stop(&n);
}

/* ---- bounds ------------------------------------------------------------------------- */

static void small_window(node_config_t *c)
{
	c->max_inflight = 16;
	c->max_wanted = 1024; /* the smallest the config allows */
	c->max_pending = 1024;
}

TEST(inflight_window, "no more than max_inflight GETs are in flight to one peer")
{
	tnode_t n;
	peer_t *ps[1];
	static uint8_t ids[100][32];
	setup(&n, small_window, ps, 1);
	rand_ids(ids, 100);
	deliver_ids(ps[0], WIRE_ANNOUNCE, ids, 100);
	CHECK_INT_EQ(fake_sent_ids(ps[0], WIRE_GET), 16);
	CHECK_INT_EQ(ps[0]->relay->inflight, 16);
	CHECK_INT_EQ(ps[0]->relay->wanted.n, 84);
	/* a tick sends nothing while the window is full */
	relay_tick(n.relay, node_now_us());
	CHECK_INT_EQ(fake_sent_ids(ps[0], WIRE_GET), 16);
	/* answers open the window again */
	deliver_ids(ps[0], WIRE_NOTFOUND, ids, 16);
	CHECK_INT_EQ(fake_sent_ids(ps[0], WIRE_GET), 32);
	CHECK_INT_EQ(ps[0]->relay->inflight, 16);
	for (size_t i = 0; i < 32; i++)
		CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_GET, ids[i]), 1);
	tnode_stop(&n);
}

TEST(wanted_bound, "ids beyond max_wanted queued for one peer are dropped and counted")
{
	tnode_t n;
	peer_t *ps[1];
	static uint8_t ids[1100][32];
	setup(&n, small_window, ps, 1);
	rand_ids(ids, 1100);
	deliver_ids(ps[0], WIRE_ANNOUNCE, ids, 1100);
	CHECK_INT_EQ(n.stats.pending_dropped, 1100 - 1024);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 1024);
	CHECK_INT_EQ(ps[0]->relay->wanted.n + ps[0]->relay->inflight, 1024);
	/* the dropped ones were never asked for */
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_GET, ids[1099]), 0);
	tnode_stop(&n);
}

static void pending_small(node_config_t *c)
{
	small_window(c);
	c->max_wanted = 4096;
}

TEST(pending_bound, "ids beyond max_pending waiting to be fetched from all peers are dropped and counted")
{
	tnode_t n;
	peer_t *ps[2];
	static uint8_t ids[1100][32];
	setup(&n, pending_small, ps, 2);
	rand_ids(ids, 1100);
	deliver_ids(ps[0], WIRE_ANNOUNCE, ids, 1000);
	CHECK_INT_EQ(n.stats.pending_dropped, 0);
	deliver_ids(ps[1], WIRE_ANNOUNCE, ids + 1000, 100);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 1024);
	CHECK_INT_EQ(n.stats.pending_dropped, 76);
	/* an id already being fetched only adds a fallback, even when full */
	deliver_ids(ps[1], WIRE_ANNOUNCE, ids, 1);
	CHECK_INT_EQ(n.stats.pending_dropped, 76);
	tnode_stop(&n);
}

/* ---- an event's way through ---------------------------------------------------------- */

typedef struct wait_announce {
	peer_t *p;
	const uint8_t *id;
} wait_announce_t;

static int announced(void *arg)
{
	wait_announce_t *w = arg;
	return fake_sent_has_id(w->p, WIRE_ANNOUNCE, w->id) > 0;
}

static int stored_one(void *arg)
{
	const tnode_t *n = arg;
	return n->stats.events_stored + n->stats.events_invalid > 0;
}

TEST(event_ingested, "a requested EVENT is validated, stored, and announced to the other peers but not back to its sender")
{
	tnode_t n;
	peer_t *ps[3];
	setup(&n, NULL, ps, 3);
	const uint8_t *id = evs.id[3];
	deliver_ids(ps[0], WIRE_ANNOUNCE, (const uint8_t(*)[32])id, 1);
	deliver_ids(ps[1], WIRE_ANNOUNCE, (const uint8_t(*)[32])id, 1); /* a fallback */
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_GET, id), 1);
	deliver_event(ps[0], id, &evs.json[3]);
	CHECK_INT_EQ(ps[0]->score, 0);
	CHECK_INT_EQ(fake_answers_in(ps[0]), 1); /* free of the message budget */
	/* what we asked for does not count against its byte budget */
	CHECK_INT_EQ(fake_refunds(ps[0]), 1);
	CHECK_INT_EQ(fake_refunded_bytes(ps[0]), evs.json[3].len);
	CHECK(tnode_run_until(&n, stored_one, &n, 5000));
	CHECK_INT_EQ(n.stats.events_stored, 1);
	CHECK_INT_EQ(store_event_has(n.store, id, NULL), 1);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 0);
	wait_announce_t w = {ps[2], id};
	CHECK(tnode_run_until(&n, announced, &w, 2000));
	tnode_run_until(&n, NULL, NULL, 20); /* any other announce would be out by now */
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_ANNOUNCE, id), 0);
	/* the fallback announced it: it knows it */
	CHECK_INT_EQ(fake_sent_has_id(ps[1], WIRE_ANNOUNCE, id), 0);
	CHECK_INT_EQ(fake_sent_has_id(ps[2], WIRE_ANNOUNCE, id), 1);
	/* announced again later, held now: nothing is asked for */
	deliver_ids(ps[2], WIRE_ANNOUNCE, (const uint8_t(*)[32])id, 1);
	CHECK_INT_EQ(fake_sent_count_type(ps[2], WIRE_GET), 0);
	tnode_stop(&n);
}

static void slow_announces(node_config_t *c)
{
	c->announce_delay_ms = 200; /* room to make the sender's cache forget first */
}

TEST(no_echo, "an event fetched from a peer is not announced back to it, even once its known cache forgot the id")
{
	tnode_t n;
	peer_t *ps[2];
	setup(&n, slow_announces, ps, 2);
	const uint8_t *id = evs.id[4];
	deliver_ids(ps[0], WIRE_ANNOUNCE, (const uint8_t(*)[32])id, 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_GET, id), 1);
	deliver_event(ps[0], id, &evs.json[4]);
	CHECK(tnode_run_until(&n, stored_one, &n, 5000));
	CHECK_INT_EQ(n.stats.events_stored, 1);
	/* the cache is bounded and forgets (a catch-up stores tens of
	 * thousands of ids between an id's arrival and its announce) */
	idcache_release(&ps[0]->relay->known);
	CHECK_INT_EQ(idcache_init(&ps[0]->relay->known, 4), 0);
	wait_announce_t w = {ps[1], id};
	CHECK(tnode_run_until(&n, announced, &w, 2000));
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_ANNOUNCE, id), 0);
	tnode_stop(&n);
}

static void small_validate_budget(node_config_t *c)
{
	c->peer_validate_bytes = 4096; /* below what the config allows: a few events */
}

TEST(validate_budget, "a peer whose answers waiting for validation pass peer_validate_bytes is held until they are validated")
{
	tnode_t n;
	peer_t *ps[2];
	setup(&n, small_validate_budget, ps, 2);
	uint8_t ids[8][32];
	for (int i = 0; i < 8; i++)
		memcpy(ids[i], evs.id[8 + i], 32);
	deliver_ids(ps[0], WIRE_ANNOUNCE, (const uint8_t(*)[32])ids, 8);
	size_t sent = 0;
	for (int i = 0; i < 8; i++) {
		deliver_event(ps[0], ids[i], &evs.json[8 + i]);
		sent += evs.json[8 + i].len;
		if (sent >= 4096)
			break;
	}
	CHECK_INT_EQ(ps[0]->held, 1);
	CHECK_INT_EQ(n.stats.validate_holds, 1);
	CHECK_INT_EQ(ps[1]->held, 0); /* the others are read as before */
	CHECK(relay_validating_bytes(n.relay) >= 4096);
	/* once validated, it is read again */
	CHECK(tnode_run_until(&n, stored_one, &n, 5000));
	tnode_run_until(&n, NULL, NULL, 200);
	CHECK_INT_EQ(relay_validating_bytes(n.relay), 0);
	CHECK_INT_EQ(ps[0]->held, 0);
	tnode_stop(&n);
}

TEST(event_invalid, "an EVENT that fails validation costs SCORE_INVALID and the fetch goes to the fallback")
{
	tnode_t n;
	peer_t *ps[2];
	setup(&n, NULL, ps, 2);
	const uint8_t *id = evs.id[5];
	deliver_ids(ps[0], WIRE_ANNOUNCE, (const uint8_t(*)[32])id, 1);
	deliver_ids(ps[1], WIRE_ANNOUNCE, (const uint8_t(*)[32])id, 1);
	/* another event's bytes under this id */
	deliver_event(ps[0], id, &evs.json[6]);
	CHECK(tnode_run_until(&n, stored_one, &n, 5000));
	CHECK_INT_EQ(n.stats.events_invalid, 1);
	CHECK_INT_EQ(ps[0]->score, SCORE_INVALID);
	CHECK_INT_EQ(fake_sent_has_id(ps[1], WIRE_GET, id), 1);
	CHECK_INT_EQ(store_event_has(n.store, id, NULL), 0);
	tnode_stop(&n);
}

/* ---- serving ---------------------------------------------------------------------------- */

static int settled_one(void *arg)
{
	const tnode_t *n = arg;
	return n->stats.events_stored + n->stats.events_duplicate + n->stats.events_invalid > 0;
}

TEST(aside_fetch, "while a first catch-up writes the index of events aside, an offered id the store cannot rule out is fetched, and a stored one is then found a duplicate")
{
	tnode_t n;
	peer_t *ps[1];
	pith_err_t err = {0};
	CHECK_INT_EQ(tnode_init(&n, "test_relay", tnode_trust(), NULL), 0);
	/* the node's store as a node opens it for a first catch-up */
	char path[CONFIG_STR_MAX + 16];
	snprintf(path, sizeof(path), "%s/store", n.dir);
	store_close(n.store);
	store_opts_t o = {.create = 1, .registry = tnode_trust(), .atomic_flush = 1, .bulk_side = 1};
	CHECK_INT_EQ(store_open(path, &o, &n.store, &err), 0);
	store_side_want(n.store);
	CHECK_INT_EQ(tnode_put(&n, evs.json[0].data, evs.json[0].len), 0);
	CHECK_INT_EQ(store_events_aside(n.store), 1);
	CHECK_INT_EQ(tnode_start(&n), 0);
	ps[0] = fake_peer_new(n.net, 0, "10.0.0.2:50001", NULL, FEAT);
	fake_sent_clear(ps[0]);
	/* held, and in the node's filter of stored ids: the store is asked,
	 * and cannot say from the id */
	CHECK_INT_EQ(store_event_has(n.store, evs.id[0], NULL), STORE_HAS_UNKNOWN);
	deliver_ids(ps[0], WIRE_ANNOUNCE, (const uint8_t(*)[32])evs.id[0], 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_GET, evs.id[0]), 1);
	deliver_event(ps[0], evs.id[0], &evs.json[0]);
	CHECK(tnode_run_until(&n, settled_one, &n, 5000));
	CHECK_INT_EQ(n.stats.events_duplicate, 1);
	CHECK_INT_EQ(n.stats.events_stored, 0);
	store_counts_t c;
	store_counts_get(n.store, &c);
	CHECK_INT_EQ((int)c.events, 1);
	CHECK_INT_EQ(ps[0]->score, 0);
	tnode_stop(&n);
}

TEST(serve_get, "a GET of a stored event is answered with the EVENT, of an unknown id with NOTFOUND")
{
	tnode_t n;
	peer_t *ps[1];
	CHECK_INT_EQ(tnode_init(&n, "test_relay", tnode_trust(), NULL), 0);
	CHECK_INT_EQ(tnode_put(&n, evs.json[0].data, evs.json[0].len), 0);
	CHECK_INT_EQ(tnode_start(&n), 0);
	ps[0] = fake_peer_new(n.net, 0, "10.0.0.2:50001", NULL, FEAT);
	fake_sent_clear(ps[0]);
	uint8_t ids[2][32];
	memcpy(ids[0], evs.id[0], 32);
	rand_ids(ids + 1, 1);
	deliver_ids(ps[0], WIRE_GET, (const uint8_t(*)[32])ids, 2);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_EVENT), 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_EVENT, ids[0]), 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_NOTFOUND, ids[1]), 1);
	CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_NOTFOUND, ids[0]), 0);
	CHECK_INT_EQ(n.stats.events_served, 1);
	wire_msg_t m;
	for (size_t i = 0; i < fake_sent_count(ps[0]); i++)
		if (fake_sent_get(ps[0], i, &m) == 0 && m.type == WIRE_EVENT)
			CHECK_MEM_EQ(m.u.event.json, m.u.event.len, evs.json[0].data, evs.json[0].len);
	CHECK_INT_EQ(ps[0]->score, 0);
	tnode_stop(&n);
}

TEST(serve_flood, "a GET beyond max_serve_queue of what a peer has not read costs SCORE_FLOOD")
{
	tnode_t n;
	peer_t *ps[1];
	static uint8_t ids[WIRE_IDS_MAX + 1][32];
	setup(&n, NULL, ps, 1);
	rand_ids(ids, WIRE_IDS_MAX + 1);
	/* it does not read: its output stays above the serving mark */
	fake_set_out_len(ps[0], SERVE_HIGH + 1);
	size_t q = (size_t)n.cfg.max_serve_queue;
	for (size_t k = 0; k < q; k += WIRE_IDS_MAX)
		deliver_ids(ps[0], WIRE_GET, ids, q - k < WIRE_IDS_MAX ? q - k : WIRE_IDS_MAX);
	CHECK_INT_EQ(ps[0]->relay->serve.n, q);
	CHECK_INT_EQ(fake_sent_count(ps[0]), 0);
	CHECK_INT_EQ(ps[0]->score, 0);
	deliver_ids(ps[0], WIRE_GET, ids + WIRE_IDS_MAX, 1);
	CHECK_INT_EQ(ps[0]->score, SCORE_FLOOD);
	CHECK_INT_EQ(ps[0]->state, PEER_READY);
	/* once its output drains, what it asked for goes out */
	fake_set_out_len(ps[0], 0);
	relay_peer_writable(n.relay, ps[0]);
	CHECK_INT_EQ(ps[0]->relay->serve.n, 0);
	CHECK_INT_EQ(fake_sent_ids(ps[0], WIRE_NOTFOUND), q);
	tnode_stop(&n);
}

int main(void)
{
	tnode_global_init();
	tevents_make(&evs, 100, 4);
	RUN(announce_gets);
	RUN(fallback_notfound);
	RUN(fallback_disconnect);
	RUN(fallback_timeout);
	RUN(unrequested_event);
	RUN(inflight_window);
	RUN(wanted_bound);
	RUN(pending_bound);
	RUN(event_ingested);
	RUN(no_echo);
	RUN(validate_budget);
	RUN(event_invalid);
	RUN(aside_fetch);
	RUN(serve_get);
	RUN(serve_flood);
	tevents_free(&evs);
	tnode_global_free();
	return test_done();
}
