/* The relay's bundle path (node/mesh/relay_bundle.c) and its INV catch-up
 * listing (node/mesh/relay_inv.c) over the fake transport: which announced
 * bundles are asked for, a BUNDLE's way through the real ingest pipeline
 * into the store and onward, what unasked, invalid and untrusted bundles
 * cost, serving BUNDLE_GETs and their bounds; the INV pages asked of a
 * peer that does not reconcile, and those served to a peer that asks.
 * Peers are inbound; unless a case says otherwise they speak
 * reconciliation, so that the INV listing does not start with them. */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <sodium.h>
#include <string.h>

#include "relay_int.h"
#include "test_util.h"
#include "tnode.h"

#define FEAT (WIRE_FEAT_SYNC | WIRE_FEAT_BUNDLE_BULK)
#define FEAT_NOSYNC WIRE_FEAT_BUNDLE_BULK

#define BUILT "2026-09-01T00:00:00Z"
#define BUILT_LATER "2026-10-01T00:00:00Z"

static tevents_t evs; /* signed events of records 100..102, none held at start */

static void setup(tnode_t *n, void (*tweak)(node_config_t *), uint64_t feats, peer_t **ps,
		  size_t np)
{
	CHECK_INT_EQ(tnode_start_peers(n, "test_relay_bundle", tweak, feats, ps, np), 0);
}

static void bundle(tbundle_t *b, unsigned rn, const char *built_at, int trusted)
{
	CHECK_INT_EQ(tbundle_make(b, rn, built_at, trusted), 0);
}

/* p announces the bundle (pith, built_us, sha). */
static void announce(peer_t *p, const char *pith, int64_t built_us, const uint8_t sha[32])
{
	wire_msg_t m = {.type = WIRE_BUNDLE_ANNOUNCE};
	m.u.bundles.n = 1;
	snprintf(m.u.bundles.refs[0].pith_number, PITH_LEN, "%s", pith);
	m.u.bundles.refs[0].built_us = built_us;
	memcpy(m.u.bundles.refs[0].sha, sha, 32);
	CHECK_INT_EQ(fake_deliver(p, &m), 0);
}

static void announce_bundle(peer_t *p, const tbundle_t *b)
{
	announce(p, b->pith, b->built_us, b->sha);
}

static void deliver_bundle(peer_t *p, const char *pith, const pith_buf_t *json)
{
	wire_msg_t m = {.type = WIRE_BUNDLE};
	snprintf(m.u.bundle.pith_number, PITH_LEN, "%s", pith);
	m.u.bundle.json = json->data;
	m.u.bundle.len = json->len;
	CHECK_INT_EQ(fake_deliver(p, &m), 0);
}

/* A BUNDLE_ANNOUNCE or BUNDLE_GET (type) of the records piths[0..n). */
static void deliver_refs(peer_t *p, wire_type_t type, char (*piths)[PITH_LEN], size_t n)
{
	for (size_t i = 0; i < n; i += WIRE_BUNDLE_REFS_MAX) {
		wire_msg_t m = {.type = type};
		for (size_t j = i; j < n && j - i < WIRE_BUNDLE_REFS_MAX; j++) {
			wire_bundle_ref_t *r = &m.u.bundles.refs[m.u.bundles.n++];
			snprintf(r->pith_number, PITH_LEN, "%s", piths[j]);
			r->built_us = 1;
			randombytes_buf(r->sha, 32);
		}
		CHECK_INT_EQ(fake_deliver(p, &m), 0);
	}
}

/* The pith numbers of records first .. first + n - 1. */
static void piths_make(char (*piths)[PITH_LEN], unsigned first, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		pith_buf_t rec = PITH_BUF_INIT;
		tg_record(first + (unsigned)i, &rec, piths[i]);
		pith_buf_release(&rec);
	}
}

static int bundle_judged(void *arg)
{
	const tnode_t *n = arg;
	return n->stats.bundles_stored + n->stats.bundles_older + n->stats.bundles_invalid > 0;
}

static int stored_two(void *arg)
{
	const tnode_t *n = arg;
	return n->stats.bundles_stored + n->stats.bundles_older + n->stats.bundles_invalid >= 2;
}

typedef struct wait_pith {
	peer_t *p;
	wire_type_t type;
	const char *pith;
} wait_pith_t;

static int pith_sent(void *arg)
{
	const wait_pith_t *w = arg;
	return fake_sent_has_pith(w->p, w->type, w->pith, NULL) > 0;
}

/* ---- which announced bundles are asked for ------------------------------------------ */

TEST(announce_newer, "a BUNDLE_ANNOUNCE of a bundle newer than the one held is asked for with a BUNDLE_GET to the announcer, of the one held or an older one not")
{
	tnode_t n;
	peer_t *ps[2];
	tbundle_t held, later, none;
	bundle(&held, 200, BUILT, 1);
	bundle(&later, 200, BUILT_LATER, 1);
	bundle(&none, 201, BUILT, 1);
	setup(&n, NULL, FEAT, ps, 2);
	CHECK_INT_EQ(tnode_put_bundle(&n, &held), 0);
	/* the one held, and one built a day before it */
	announce_bundle(ps[0], &held);
	uint8_t sha[32];
	randombytes_buf(sha, 32);
	announce(ps[0], held.pith, held.built_us - 86400000000LL, sha);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_BUNDLE_GET), 0);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 0);
	/* a newer one, and one of a record without a bundle */
	announce_bundle(ps[0], &later);
	CHECK_INT_EQ(fake_sent_has_pith(ps[0], WIRE_BUNDLE_GET, held.pith, NULL), 1);
	announce_bundle(ps[0], &none);
	CHECK_INT_EQ(fake_sent_has_pith(ps[0], WIRE_BUNDLE_GET, none.pith, NULL), 1);
	CHECK_INT_EQ(ps[0]->relay->binflight, 2);
	CHECK_INT_EQ(fake_sent_count(ps[1]), 0);
	/* announced again, or by another: asked of the first alone */
	announce_bundle(ps[0], &later);
	announce_bundle(ps[1], &later);
	CHECK_INT_EQ(fake_sent_refs(ps[0], WIRE_BUNDLE_GET), 2);
	CHECK_INT_EQ(fake_sent_count_type(ps[1], WIRE_BUNDLE_GET), 0);
	CHECK_INT_EQ(ps[0]->score + ps[1]->score, 0);
	tnode_stop(&n);
	tbundle_free(&held);
	tbundle_free(&later);
	tbundle_free(&none);
}

/* ---- a bundle's way through ------------------------------------------------------------- */

TEST(bundle_ingested, "a BUNDLE answering a BUNDLE_GET is validated, stored, and announced to the other ready peers but not to its sender")
{
	tnode_t n;
	peer_t *ps[3];
	tbundle_t b;
	bundle(&b, 202, BUILT, 1);
	setup(&n, NULL, FEAT, ps, 3);
	announce_bundle(ps[0], &b);
	CHECK_INT_EQ(fake_sent_has_pith(ps[0], WIRE_BUNDLE_GET, b.pith, NULL), 1);
	deliver_bundle(ps[0], b.pith, &b.json);
	CHECK_INT_EQ(fake_answers_in(ps[0]), 1); /* free of the message budget */
	CHECK_INT_EQ(fake_refunded_bytes(ps[0]), b.json.len);
	CHECK(tnode_run_until(&n, bundle_judged, &n, 5000));
	CHECK_INT_EQ(n.stats.bundles_stored, 1);
	CHECK_INT_EQ(ps[0]->score, 0);
	CHECK_INT_EQ(ps[0]->relay->binflight, 0);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 0);
	store_record_info_t ri;
	CHECK_INT_EQ(store_record_get(n.store, b.pith, &ri, NULL), 0);
	CHECK(ri.has_bundle);
	int64_t us = 0;
	uint8_t sha[32] = {0};
	CHECK_INT_EQ(store_bundle_newest(n.store, b.pith, &us, sha, NULL), 0);
	CHECK_INT_EQ(us, b.built_us);
	CHECK_MEM_EQ(sha, 32, b.sha, 32);
	/* its events are stored with it */
	const uint8_t *id = b.ids[0];
	for (int i = 0; i < 4; i++)
		CHECK_INT_EQ(store_event_has(n.store, b.ids[i], NULL), 1);
	/* onward */
	wait_pith_t w = {ps[2], WIRE_BUNDLE_ANNOUNCE, b.pith};
	CHECK(tnode_run_until(&n, pith_sent, &w, 2000));
	tnode_run_until(&n, NULL, NULL, 20); /* any other announce would be out by now */
	wire_bundle_ref_t ref;
	for (int i = 1; i < 3; i++) {
		CHECK_INT_EQ(fake_sent_has_pith(ps[i], WIRE_BUNDLE_ANNOUNCE, b.pith, &ref), 1);
		CHECK_INT_EQ(ref.built_us, b.built_us);
		CHECK_MEM_EQ(ref.sha, 32, b.sha, 32);
		CHECK_INT_EQ(fake_sent_has_id(ps[i], WIRE_ANNOUNCE, id), 1);
	}
	CHECK_INT_EQ(fake_sent_has_pith(ps[0], WIRE_BUNDLE_ANNOUNCE, b.pith, NULL), 0);
	/* announced again, held now: nothing is asked for */
	announce_bundle(ps[1], &b);
	CHECK_INT_EQ(fake_sent_count_type(ps[1], WIRE_BUNDLE_GET), 0);
	tnode_stop(&n);
	tbundle_free(&b);
}

TEST(bundle_not_back, "neither a stored bundle nor its events are announced back to the peer it came from, also when fetched in catch-up (relay_bundle_request)")
{
	tnode_t n;
	peer_t *ps[2];
	tbundle_t b[2];
	bundle(&b[0], 208, BUILT, 1);
	bundle(&b[1], 209, BUILT, 1);
	setup(&n, NULL, FEAT, ps, 2);
	announce_bundle(ps[0], &b[0]);                    /* announced */
	CHECK_INT_EQ(relay_bundle_request(ps[0], b[1].pith), 1); /* catch-up */
	CHECK_INT_EQ(fake_sent_refs(ps[0], WIRE_BUNDLE_GET), 2);
	for (int i = 0; i < 2; i++)
		deliver_bundle(ps[0], b[i].pith, &b[i].json);
	CHECK(tnode_run_until(&n, stored_two, &n, 5000));
	wait_pith_t w = {ps[1], WIRE_BUNDLE_ANNOUNCE, b[1].pith};
	CHECK(tnode_run_until(&n, pith_sent, &w, 2000));
	tnode_run_until(&n, NULL, NULL, 20);
	for (int i = 0; i < 2; i++) {
		CHECK_INT_EQ(fake_sent_has_pith(ps[1], WIRE_BUNDLE_ANNOUNCE, b[i].pith, NULL), 1);
		CHECK_INT_EQ(fake_sent_has_pith(ps[0], WIRE_BUNDLE_ANNOUNCE, b[i].pith, NULL), 0);
		for (int k = 0; k < 4; k++) {
			CHECK_INT_EQ(fake_sent_has_id(ps[1], WIRE_ANNOUNCE, b[i].ids[k]), 1);
			CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_ANNOUNCE, b[i].ids[k]), 0);
		}
	}
	tnode_stop(&n);
	tbundle_free(&b[0]);
	tbundle_free(&b[1]);
}

TEST(bundle_unrequested, "a BUNDLE nobody asked for costs SCORE_UNREQUESTED and is not validated")
{
	tnode_t n;
	peer_t *ps[2];
	tbundle_t b;
	bundle(&b, 203, BUILT, 1);
	setup(&n, NULL, FEAT, ps, 2);
	deliver_bundle(ps[0], b.pith, &b.json);
	CHECK_INT_EQ(ps[0]->score, SCORE_UNREQUESTED);
	CHECK_INT_EQ(n.stats.unrequested, 1);
	CHECK_INT_EQ(fake_refunds(ps[0]), 0);
	/* asked of one peer, sent by another: unasked-for all the same */
	announce_bundle(ps[0], &b);
	deliver_bundle(ps[1], b.pith, &b.json);
	CHECK_INT_EQ(ps[1]->score, SCORE_UNREQUESTED);
	CHECK_INT_EQ(n.stats.unrequested, 2);
	CHECK_INT_EQ(n.jobs_done + ingest_in_flight(n.ingest), 0);
	tnode_stop(&n);
	tbundle_free(&b);
}

TEST(bundle_invalid, "a tampered BUNDLE costs SCORE_INVALID and the fetch goes to another announcer")
{
	tnode_t n;
	peer_t *ps[2];
	tbundle_t b;
	bundle(&b, 204, BUILT, 1);
	setup(&n, NULL, FEAT, ps, 2);
	announce_bundle(ps[0], &b);
	announce_bundle(ps[1], &b); /* asked of ps[0] already: a fallback */
	CHECK_INT_EQ(fake_sent_count_type(ps[1], WIRE_BUNDLE_GET), 0);
	/* built_at is signed: a year later breaks bundle_sha256 */
	pith_buf_t bad = PITH_BUF_INIT;
	CHECK_INT_EQ(pith_buf_append(&bad, b.json.data, b.json.len), 0);
	char *at = memmem(bad.data, bad.len, "\"built_at\":\"2026", 16);
	CHECK(at != NULL);
	if (at)
		at[15] = '7';
	deliver_bundle(ps[0], b.pith, &bad);
	CHECK(tnode_run_until(&n, bundle_judged, &n, 5000));
	CHECK_INT_EQ(n.stats.bundles_invalid, 1);
	CHECK_INT_EQ(ps[0]->score, SCORE_INVALID);
	CHECK_INT_EQ(ps[0]->relay->binflight, 0);
	CHECK_INT_EQ(fake_sent_has_pith(ps[1], WIRE_BUNDLE_GET, b.pith, NULL), 1);
	/* the good copy from the fallback is stored */
	deliver_bundle(ps[1], b.pith, &b.json);
	n.stats.bundles_invalid = 0;
	CHECK(tnode_run_until(&n, bundle_judged, &n, 5000));
	CHECK_INT_EQ(n.stats.bundles_stored, 1);
	CHECK_INT_EQ(ps[1]->score, 0);
	pith_buf_release(&bad);
	tnode_stop(&n);
	tbundle_free(&b);
}

TEST(bundle_untrusted, "a BUNDLE signed by a key the node does not trust costs no points and is not asked of that peer again")
{
	tnode_t n;
	peer_t *ps[2];
	tbundle_t b;
	bundle(&b, 205, BUILT, 0);
	setup(&n, NULL, FEAT, ps, 2);
	announce_bundle(ps[0], &b);
	deliver_bundle(ps[0], b.pith, &b.json);
	CHECK(tnode_run_until(&n, bundle_judged, &n, 5000));
	CHECK_INT_EQ(n.stats.bundles_invalid, 1);
	CHECK_INT_EQ(ps[0]->score, 0);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 0);
	store_record_info_t ri;
	CHECK(store_record_get(n.store, b.pith, &ri, NULL) != 0 || !ri.has_bundle);
	/* announced again by the same peer: refused, not asked for */
	announce_bundle(ps[0], &b);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_BUNDLE_GET), 1);
	CHECK_INT_EQ(n.stats.refused_skipped, 1);
	/* by another peer: it may hold another copy */
	announce_bundle(ps[1], &b);
	CHECK_INT_EQ(fake_sent_has_pith(ps[1], WIRE_BUNDLE_GET, b.pith, NULL), 1);
	CHECK_INT_EQ(n.stats.refused_skipped, 1);
	tnode_stop(&n);
	tbundle_free(&b);
}

/* ---- pacing --------------------------------------------------------------------------- */

#define BUNDLE_INFLIGHT_TEST 256 /* BUNDLE_INFLIGHT, private to relay_bundle.c */
#define MANY (BUNDLE_INFLIGHT_TEST + 44)

TEST(bundle_inflight, "no more than 256 bundles are asked of one peer and not yet validated")
{
	tnode_t n;
	peer_t *ps[1];
	static char piths[MANY][PITH_LEN];
	piths_make(piths, 1000, MANY);
	setup(&n, NULL, FEAT, ps, 1);
	deliver_refs(ps[0], WIRE_BUNDLE_ANNOUNCE, piths, MANY);
	CHECK_INT_EQ(fake_sent_refs(ps[0], WIRE_BUNDLE_GET), BUNDLE_INFLIGHT_TEST);
	CHECK_INT_EQ(ps[0]->relay->binflight, BUNDLE_INFLIGHT_TEST);
	CHECK_INT_EQ(ps[0]->relay->bwanted.n, MANY - BUNDLE_INFLIGHT_TEST);
	CHECK_INT_EQ(fake_sent_has_pith(ps[0], WIRE_BUNDLE_GET, piths[MANY - 1], NULL), 0);
	/* a tick sends nothing while the window is full */
	int64_t t = node_now_us();
	relay_tick(n.relay, t);
	CHECK_INT_EQ(fake_sent_refs(ps[0], WIRE_BUNDLE_GET), BUNDLE_INFLIGHT_TEST);
	/* once those time out, the rest go out */
	relay_tick(n.relay, t + n.cfg.fetch_timeout_ms * 1000 + 1000);
	CHECK_INT_EQ(n.stats.fetch_timeouts, BUNDLE_INFLIGHT_TEST);
	CHECK_INT_EQ(fake_sent_refs(ps[0], WIRE_BUNDLE_GET), MANY);
	CHECK_INT_EQ(ps[0]->relay->binflight, MANY - BUNDLE_INFLIGHT_TEST);
	CHECK_INT_EQ(fake_sent_has_pith(ps[0], WIRE_BUNDLE_GET, piths[MANY - 1], NULL), 1);
	CHECK_INT_EQ(ps[0]->score, SCORE_UNSERVED); /* once for the scan, not per bundle */
	tnode_stop(&n);
}

/* ---- serving ------------------------------------------------------------------------------ */

TEST(bundle_serve, "a BUNDLE_GET of a held bundle is answered with the BUNDLE, of a record without one not at all")
{
	tnode_t n;
	peer_t *ps[1];
	tbundle_t b;
	bundle(&b, 206, BUILT, 1);
	setup(&n, NULL, FEAT, ps, 1);
	CHECK_INT_EQ(tnode_put_bundle(&n, &b), 0);
	/* a record held without a bundle, and one not held at all */
	CHECK_INT_EQ(tnode_put(&n, evs.json[0].data, evs.json[0].len), 0);
	char piths[3][PITH_LEN];
	snprintf(piths[0], PITH_LEN, "%s", b.pith);
	piths_make(piths + 1, 100, 2);
	deliver_refs(ps[0], WIRE_BUNDLE_GET, piths, 3);
	CHECK_INT_EQ(fake_sent_count(ps[0]), 1);
	CHECK_INT_EQ(fake_sent_has_pith(ps[0], WIRE_BUNDLE, b.pith, NULL), 1);
	wire_msg_t m;
	CHECK_INT_EQ(fake_sent_get(ps[0], 0, &m), 0);
	CHECK_INT_EQ(m.type, WIRE_BUNDLE);
	CHECK_MEM_EQ(m.u.bundle.json, m.u.bundle.len, b.json.data, b.json.len);
	CHECK_INT_EQ(ps[0]->relay->bserve.len, 0);
	CHECK_INT_EQ(ps[0]->score, 0);
	tnode_stop(&n);
	tbundle_free(&b);
}

#define SERVE_MAX 4096 /* BUNDLE_SERVE_MAX, private to relay_bundle.c */

TEST(bundle_serve_flood, "a BUNDLE_GET beyond 4096 unread records costs SCORE_FLOOD")
{
	tnode_t n;
	peer_t *ps[1];
	tbundle_t b;
	static char piths[SERVE_MAX][PITH_LEN];
	bundle(&b, 207, BUILT, 1);
	setup(&n, NULL, FEAT, ps, 1);
	CHECK_INT_EQ(tnode_put_bundle(&n, &b), 0);
	for (size_t i = 0; i < SERVE_MAX; i++)
		snprintf(piths[i], PITH_LEN, "%s", b.pith);
	/* it does not read: its output stays above the serving mark */
	fake_set_out_len(ps[0], SERVE_HIGH + 1);
	deliver_refs(ps[0], WIRE_BUNDLE_GET, piths, SERVE_MAX);
	CHECK_INT_EQ(ps[0]->relay->bserve.len / PITH_LEN, SERVE_MAX);
	CHECK_INT_EQ(fake_sent_count(ps[0]), 0);
	CHECK_INT_EQ(ps[0]->score, 0);
	deliver_refs(ps[0], WIRE_BUNDLE_GET, piths, 1);
	CHECK_INT_EQ(ps[0]->score, SCORE_FLOOD);
	CHECK_INT_EQ(ps[0]->state, PEER_READY);
	CHECK_INT_EQ(ps[0]->relay->bserve.len / PITH_LEN, SERVE_MAX);
	/* once its output drains, what it asked for goes out */
	fake_set_out_len(ps[0], 0);
	relay_peer_writable(n.relay, ps[0]);
	CHECK_INT_EQ(fake_sent_refs(ps[0], WIRE_BUNDLE), SERVE_MAX);
	CHECK_INT_EQ(ps[0]->relay->bserve.len, 0);
	tnode_stop(&n);
	tbundle_free(&b);
}

/* ---- the INV listing of a peer that does not reconcile --------------------------------------- */

static void deliver_inv(peer_t *p, const uint8_t (*ids)[32], size_t k, int64_t next_us, int done)
{
	wire_msg_t m = {.type = WIRE_INV};
	m.u.inv.ids = (const uint8_t *)ids;
	m.u.inv.n = k;
	m.u.inv.next_us = next_us;
	if (k)
		memcpy(m.u.inv.next_id, ids[k - 1], 32);
	m.u.inv.done = done;
	CHECK_INT_EQ(fake_deliver(p, &m), 0);
}

/* The last message of type t sent to p, into out. 1 if there is one. */
static int last_sent(const peer_t *p, wire_type_t t, wire_msg_t *out)
{
	int found = 0;
	wire_msg_t m;
	for (size_t i = 0; i < fake_sent_count(p); i++)
		if (fake_sent_get(p, i, &m) == 0 && m.type == t) {
			*out = m;
			found = 1;
		}
	return found;
}

/* A node with one peer of features feats, sent an INV page of k random
 * ids (into ids) ending at next_us. */
static void inv_page(tnode_t *n, peer_t **p, uint64_t feats, uint8_t (*ids)[32], size_t k,
		     int64_t next_us, int done)
{
	setup(n, NULL, feats, p, 1);
	randombytes_buf(ids, k * 32);
	deliver_inv(*p, (const uint8_t(*)[32])ids, k, next_us, done);
}

TEST(inv_at_ready, "a peer without WIRE_FEAT_SYNC is sent an INV_REQ from the start of the time index at ready; one with it is not")
{
	tnode_t n;
	peer_t *ps[1];
	setup(&n, NULL, FEAT, ps, 1);
	CHECK_INT_EQ(ps[0]->relay->inv, INV_IDLE);
	peer_t *p = fake_peer_new(n.net, 0, "10.0.1.2:50001", NULL, FEAT_NOSYNC);
	CHECK(p && p->state == PEER_READY);
	CHECK_INT_EQ(fake_sent_count_type(p, WIRE_INV_REQ), 1);
	wire_msg_t m;
	CHECK(last_sent(p, WIRE_INV_REQ, &m));
	CHECK(m.u.inv_req.after_us == INT64_MIN);
	static const uint8_t zero[32];
	CHECK_MEM_EQ(m.u.inv_req.after_id, 32, zero, 32);
	CHECK_INT_EQ(m.u.inv_req.limit, WIRE_IDS_MAX);
	CHECK_INT_EQ(p->relay->inv, INV_WAITING);
	tnode_stop(&n);
}

TEST(inv_page_fetched, "an INV page's ids are fetched with GETs like announced ones, and the next INV_REQ resumes after the page")
{
	tnode_t n;
	peer_t *ps[1];
	uint8_t ids[3][32];
	inv_page(&n, ps, FEAT_NOSYNC, ids, 3, 1234567, 0);
	for (int i = 0; i < 3; i++) {
		CHECK_INT_EQ(fake_sent_has_id(ps[0], WIRE_GET, ids[i]), 1);
		fetch_t *f = idmap_get(n.relay->fetches, ids[i]);
		CHECK(f && f->catchup);
	}
	CHECK_INT_EQ(fake_answers_in(ps[0]), 1); /* asked for: free of the budget */
	/* the queue drained at once: the next page is asked for */
	wire_msg_t m;
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_INV_REQ), 1);
	CHECK(last_sent(ps[0], WIRE_INV_REQ, &m));
	CHECK_INT_EQ(m.u.inv_req.after_us, 1234567);
	CHECK_MEM_EQ(m.u.inv_req.after_id, 32, ids[2], 32);
	CHECK_INT_EQ(ps[0]->relay->inv, INV_WAITING);
	CHECK_INT_EQ(ps[0]->score, 0);
	tnode_stop(&n);
}

static void inv_window(node_config_t *c)
{
	c->max_inflight = 16;
	c->max_wanted = 16384;
	c->max_pending = 16384;
}

TEST(inv_waits_for_queue, "the next INV_REQ goes out only once the fetch queue has drained below a page")
{
	tnode_t n;
	peer_t *ps[1];
	static uint8_t ids[WIRE_IDS_MAX][32], page[100][32];
	setup(&n, inv_window, FEAT_NOSYNC, ps, 1);
	/* the queue holds a page of announced ids, the window is full */
	randombytes_buf(ids, sizeof(ids));
	randombytes_buf(page, sizeof(page));
	CHECK_INT_EQ(fake_deliver_ids(ps[0], WIRE_ANNOUNCE, ids, WIRE_IDS_MAX), 0);
	CHECK_INT_EQ(ps[0]->relay->inflight, 16);
	deliver_inv(ps[0], page, 100, 42, 0);
	CHECK_INT_EQ(ps[0]->relay->wanted.n, WIRE_IDS_MAX - 16 + 100);
	CHECK_INT_EQ(ps[0]->relay->inv, INV_MORE);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_INV_REQ), 0);
	/* answers drain it 16 at a time: 5 rounds leave it above a page */
	size_t k = 0;
	for (int round = 0; round < 5; round++, k += 16)
		CHECK_INT_EQ(fake_deliver_ids(ps[0], WIRE_NOTFOUND, ids + k, 16), 0);
	CHECK_INT_EQ(ps[0]->relay->wanted.n, WIRE_IDS_MAX + 4);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_INV_REQ), 0);
	relay_tick(n.relay, node_now_us());
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_INV_REQ), 0);
	/* the sixth takes it below */
	CHECK_INT_EQ(fake_deliver_ids(ps[0], WIRE_NOTFOUND, ids + k, 16), 0);
	CHECK(ps[0]->relay->wanted.n < WIRE_IDS_MAX);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_INV_REQ), 1);
	wire_msg_t m;
	CHECK(last_sent(ps[0], WIRE_INV_REQ, &m));
	CHECK_INT_EQ(m.u.inv_req.after_us, 42);
	CHECK_MEM_EQ(m.u.inv_req.after_id, 32, page[99], 32);
	/* one at a time: no second INV_REQ while this one is unanswered */
	CHECK_INT_EQ(fake_deliver_ids(ps[0], WIRE_NOTFOUND, ids + k + 16, 16), 0);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_INV_REQ), 1);
	tnode_stop(&n);
}

TEST(inv_done, "an INV with done ends the listing: no INV_REQ follows, and a later INV costs SCORE_UNREQUESTED")
{
	tnode_t n;
	peer_t *ps[1];
	uint8_t ids[2][32];
	inv_page(&n, ps, FEAT_NOSYNC, ids, 2, 7, 1);
	CHECK_INT_EQ(fake_sent_ids(ps[0], WIRE_GET), 2);
	CHECK_INT_EQ(ps[0]->relay->inv, INV_DONE);
	CHECK_INT_EQ(fake_deliver_ids(ps[0], WIRE_NOTFOUND, (const uint8_t(*)[32])ids, 2), 0);
	relay_tick(n.relay, node_now_us());
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_INV_REQ), 0);
	CHECK_INT_EQ(ps[0]->score, 0);
	deliver_inv(ps[0], (const uint8_t(*)[32])ids, 2, 7, 1);
	CHECK_INT_EQ(ps[0]->score, SCORE_UNREQUESTED);
	CHECK_INT_EQ(fake_sent_ids(ps[0], WIRE_GET), 2); /* not fetched */
	tnode_stop(&n);
}

TEST(inv_unrequested, "an INV nobody asked for costs SCORE_UNREQUESTED and its ids are not fetched")
{
	tnode_t n;
	peer_t *ps[1];
	uint8_t ids[2][32];
	inv_page(&n, ps, FEAT, ids, 2, 7, 0); /* it reconciles: no listing was asked of it */
	CHECK_INT_EQ(ps[0]->score, SCORE_UNREQUESTED);
	CHECK_INT_EQ(n.stats.unrequested, 1);
	CHECK_INT_EQ(fake_sent_count_type(ps[0], WIRE_GET), 0);
	CHECK_INT_EQ(relay_pending_fetches(n.relay), 0);
	CHECK_INT_EQ(ps[0]->relay->inv, INV_IDLE);
	tnode_stop(&n);
}

/* ---- serving the listing ----------------------------------------------------------------- */

typedef struct timed {
	int64_t us;
	uint8_t id[32];
} timed_t;

static int timed_cmp(const void *a, const void *b)
{
	const timed_t *x = a, *y = b;
	if (x->us != y->us)
		return x->us < y->us ? -1 : 1;
	return memcmp(x->id, y->id, 32);
}

static void deliver_inv_req(peer_t *p, int64_t after_us, const uint8_t after_id[32], uint32_t limit)
{
	wire_msg_t m = {.type = WIRE_INV_REQ};
	m.u.inv_req.after_us = after_us;
	memcpy(m.u.inv_req.after_id, after_id, 32);
	m.u.inv_req.limit = limit;
	CHECK_INT_EQ(fake_deliver(p, &m), 0);
}

typedef struct wait_id {
	peer_t *p;
	const uint8_t *id;
} wait_id_t;

static int id_announced(void *arg)
{
	const wait_id_t *w = arg;
	return fake_sent_has_id(w->p, WIRE_ANNOUNCE, w->id) > 0;
}

TEST(inv_served, "an INV_REQ is answered with a page of the time index in time order, limit honoured, done at the end, and the ids listed are not announced to the asker")
{
	tnode_t n;
	peer_t *p;
	timed_t want[12];
	CHECK_INT_EQ(evs.n, 12);
	CHECK_INT_EQ(tnode_init(&n, "test_relay_bundle", tnode_trust(), NULL), 0);
	for (size_t i = 0; i < evs.n; i++) {
		CHECK_INT_EQ(tnode_put(&n, evs.json[i].data, evs.json[i].len), 0);
		pith_event_t *ev = NULL;
		pith_err_t err = {0};
		CHECK_INT_EQ(pith_event_parse(evs.json[i].data, evs.json[i].len, tnode_trust(), &ev,
					      NULL, &err), 0);
		want[i].us = ev ? ev->created_us : 0;
		memcpy(want[i].id, evs.id[i], 32);
		pith_event_free(ev);
	}
	qsort(want, 12, sizeof(want[0]), timed_cmp);
	CHECK_INT_EQ(tnode_start(&n), 0);
	p = fake_peer_new(n.net, 0, "10.0.0.2:50001", NULL, FEAT);
	fake_sent_clear(p);
	/* pages of 5: 5, 5, then 2 and done */
	static const uint8_t zero[32];
	int64_t after_us = INT64_MIN;
	uint8_t after_id[32];
	memcpy(after_id, zero, 32);
	size_t got = 0, sizes[3] = {5, 5, 2};
	for (int page = 0; page < 3; page++) {
		wire_msg_t m;
		fake_sent_clear(p);
		deliver_inv_req(p, after_us, after_id, 5);
		CHECK(last_sent(p, WIRE_INV, &m));
		CHECK_INT_EQ(m.u.inv.n, sizes[page]);
		CHECK_INT_EQ(m.u.inv.done, page == 2);
		for (size_t i = 0; i < m.u.inv.n && got < 12; i++, got++)
			CHECK_MEM_EQ(m.u.inv.ids + 32 * i, 32, want[got].id, 32);
		CHECK_INT_EQ(m.u.inv.next_us, want[got - 1].us);
		CHECK_MEM_EQ(m.u.inv.next_id, 32, want[got - 1].id, 32);
		after_us = m.u.inv.next_us;
		memcpy(after_id, m.u.inv.next_id, 32);
		if (page == 0) {
			/* listed ids are known to p; the others are announced */
			relay_queue_announce(n.relay, want[0].id, 0);
			relay_queue_announce(n.relay, want[11].id, 0);
			wait_id_t w = {p, want[11].id};
			CHECK(tnode_run_until(&n, id_announced, &w, 2000));
			CHECK_INT_EQ(fake_sent_has_id(p, WIRE_ANNOUNCE, want[0].id), 0);
		}
	}
	CHECK_INT_EQ(got, 12);
	/* asked past the end: an empty page, done */
	wire_msg_t m = {0};
	fake_sent_clear(p);
	deliver_inv_req(p, after_us, after_id, 5);
	CHECK(last_sent(p, WIRE_INV, &m));
	CHECK_INT_EQ(m.u.inv.n, 0);
	CHECK(m.u.inv.done);
	CHECK_INT_EQ(p->score, 0);
	tnode_stop(&n);
}

int main(void)
{
	tnode_global_init();
	tevents_make(&evs, 100, 3);
	RUN(announce_newer);
	RUN(bundle_ingested);
	RUN(bundle_not_back);
	RUN(bundle_unrequested);
	RUN(bundle_invalid);
	RUN(bundle_untrusted);
	RUN(bundle_inflight);
	RUN(bundle_serve);
	RUN(bundle_serve_flood);
	RUN(inv_at_ready);
	RUN(inv_page_fetched);
	RUN(inv_waits_for_queue);
	RUN(inv_done);
	RUN(inv_unrequested);
	RUN(inv_served);
	tevents_free(&evs);
	tnode_global_free();
	return test_done();
}
