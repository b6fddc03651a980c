/* Announce-then-fetch relay, serving, interim catch-up, and bundles.
 *
 * A node announces the ids of events it validated and stored; a peer that
 * lacks one asks one announcer for it (GET), keeps the other announcers
 * as fallbacks, validates what arrives off the loop, stores it, and only
 * then announces it onward. Each id is fetched from one peer at a time,
 * so a node receives one full copy of each event in the usual case.
 *
 * Catch-up runs through set reconciliation (sync.c), which hands the ids
 * it finds missing to want() as the fetch queue drains. With a peer that
 * does not speak it, the interim listing remains: after the handshake each
 * side pages through the other's time index with INV_REQ/INV and treats
 * the ids like announcements; the next page is asked for only once the
 * fetch queue has drained, so a large store streams at the pace the node
 * can validate. */
#include "node_int.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "http.h"
#include "log.h"
#include "sync.h"

#define SERVE_HIGH (512u << 10)    /* stop serving a peer above this much output */
#define BUNDLE_CACHE_MAX 65536
#define BUNDLE_INFLIGHT 256   /* bundles asked of one peer, not yet validated */
#define BUNDLE_SERVE_MAX 4096 /* bundles one peer may ask for before it is answered */
#define PITH_LEN (PITH_NUMBER_LEN + 1)

static log_rl_t rl_invalid;

static void bundle_key(const char *pith, uint8_t key[32])
{
	pith_sha256(pith, strlen(pith), key);
}

/* ---- refused by trust ------------------------------------------------------------- */

/* An event or bundle refused because it is signed by keys this node does
 * not trust is remembered per (sender's node key, id): the sender would
 * offer it again at every session, and fetching and refusing it each time
 * is wasted work. Keyed by the sender too, because the id does not cover
 * the signature: a hostile peer re-signing someone's bundle with a key of
 * its own must not stop us from fetching the good copy from others. The
 * cache has a fixed size and forgets; a restart (maybe with more trusted
 * keys) forgets everything. */
static void refused_key(const peer_t *p, const uint8_t id[32], uint8_t key[32])
{
	uint8_t in[64];
	memcpy(in, p->pk, 32);
	memcpy(in + 32, id, 32);
	pith_sha256(in, sizeof(in), key);
}

static void refused_add(node_t *n, const peer_t *p, const uint8_t id[32])
{
	uint8_t key[32];
	refused_key(p, id, key);
	idcache_add(&n->refused, key);
	n->refused_n++;
}

static int refused_has(const node_t *n, const peer_t *p, const uint8_t id[32])
{
	uint8_t key[32];
	if (!n->refused_n)
		return 0;
	refused_key(p, id, key);
	return idcache_has(&n->refused, key);
}

static int reason_is_untrusted(const char *r)
{
	return !strcmp(r, "untrusted_key") || !strcmp(r, "rotated_key");
}

/* ---- sending id lists ------------------------------------------------------------- */

static void send_ids(peer_t *p, wire_type_t type, const uint8_t *ids, size_t count)
{
	size_t max = p->node->wlim.max_ids;
	for (size_t i = 0; i < count; i += max) {
		wire_msg_t m = {.type = type};
		m.u.ids.ids = ids + i * 32;
		m.u.ids.n = count - i < max ? count - i : max;
		peer_send(p, &m);
	}
}

static void send_inv_req(peer_t *p)
{
	wire_msg_t m = {.type = WIRE_INV_REQ};
	m.u.inv_req.after_us = p->inv_next_us;
	memcpy(m.u.inv_req.after_id, p->inv_next_id, 32);
	m.u.inv_req.limit = (uint32_t)p->node->wlim.max_ids;
	p->inv = INV_WAITING;
	peer_send(p, &m);
}

/* ---- fetching ---------------------------------------------------------------------- */

/* Requests queued ids from p while it has room, then the next catch-up
 * page if the queue ran low. GETs go out in batches of at least a
 * sixteenth of the inflight window, at most 64 (unless fewer are queued
 * and little is in flight): one GET per returning EVENT would cost the
 * peer's message budget more than the events do, and a node catching up
 * would be taken for a flooder. */
static void pump(peer_t *p)
{
	static uint8_t batch[WIRE_IDS_MAX * 32];
	node_t *n = p->node;
	if (p->state != PEER_READY)
		return;
	sync_peer_feed(p); /* ids reconciliation found missing */
	if (p->state != PEER_READY)
		return;
	size_t k = 0, max = n->wlim.max_ids, window = (size_t)n->cfg->max_inflight;
	size_t least = window / 16 ? (window / 16 < 64 ? window / 16 : 64) : 1;
	int64_t now = node_now_us();
	uint8_t id[32];
	/* With little in flight anything queued goes out at once (gossip's
	 * few ids, the tail of a catch-up); with more in flight only a full
	 * batch does. Sending whatever was queued whenever it fitted made a
	 * large window (max_inflight 4096) a GET per few ids, and the peer
	 * banned this node for a message flood. */
	int room = p->inflight < least ||
		   (p->wanted.n >= least && p->inflight + least <= window);
	while (room && p->inflight < window && idq_pop(&p->wanted, id)) {
		fetch_t *f = idmap_get(n->fetches, id);
		if (!f || f->is_bundle || f->peer != p->serial || f->state != FETCH_QUEUED)
			continue; /* handed to another peer meanwhile, or done */
		f->state = FETCH_REQUESTED;
		f->since_us = now;
		p->inflight++;
		memcpy(batch + 32 * k++, id, 32);
		if (k == max) {
			send_ids(p, WIRE_GET, batch, k);
			n->stats.ids_requested += k;
			k = 0;
		}
	}
	if (k) {
		send_ids(p, WIRE_GET, batch, k);
		n->stats.ids_requested += k;
	}
	if (p->inv == INV_MORE && p->wanted.n < max)
		send_inv_req(p);
}

static void fetch_add_alt(fetch_t *f, uint64_t serial)
{
	if (f->peer == serial)
		return;
	for (int i = 0; i < f->nalt; i++)
		if (f->alt[i] == serial)
			return;
	if (f->nalt < FETCH_ALTS)
		f->alt[f->nalt++] = serial;
}

/* The current source of f failed: queue it at the next announcer that is
 * still connected, or forget it. */
static void fetch_retry(node_t *n, const uint8_t id[32], fetch_t *f)
{
	while (f->nalt) {
		uint64_t serial = f->alt[0];
		memmove(f->alt, f->alt + 1, (size_t)(f->nalt - 1) * sizeof(f->alt[0]));
		f->nalt--;
		peer_t *q = node_peer_by_serial(n, serial);
		if (q && q->state == PEER_READY && idq_push(&q->wanted, id) == 0) {
			f->peer = serial;
			f->state = FETCH_QUEUED;
			f->since_us = node_now_us();
			pump(q);
			return;
		}
	}
	free(idmap_del(n->fetches, id));
}

/* p says it has id: fetch it unless we have it or are fetching it.
 * catchup: p listed it in catch-up (reconciliation or an INV page) rather
 * than announcing it. */
static void want(peer_t *p, const uint8_t id[32], int catchup)
{
	node_t *n = p->node;
	idcache_add(&p->known, id);
	if (idcache_has(&n->recent, id))
		return;
	if (refused_has(n, p, id)) {
		n->stats.refused_skipped++;
		return;
	}
	fetch_t *f = idmap_get(n->fetches, id);
	if (f) {
		if (!f->is_bundle)
			fetch_add_alt(f, p->serial);
		return;
	}
	/* bounds first: a peer announcing junk costs no store lookup once full */
	if (p->wanted.n >= p->wanted.max || idmap_count(n->fetches) >= (size_t)n->cfg->max_pending) {
		n->stats.pending_dropped++;
		return;
	}
	int has = store_event_has(n->store, id, NULL);
	if (has) {
		if (has == 1)
			idcache_add(&n->recent, id);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return;
	f->peer = p->serial;
	f->state = FETCH_QUEUED;
	f->catchup = (uint8_t)catchup;
	f->since_us = node_now_us();
	if (idmap_put(n->fetches, id, f)) {
		free(f);
		return;
	}
	if (idq_push(&p->wanted, id))
		free(idmap_del(n->fetches, id));
}

static void on_announce(peer_t *p, const wire_msg_t *m)
{
	p->ids_announced_in += m->u.ids.n;
	for (size_t i = 0; i < m->u.ids.n; i++)
		want(p, m->u.ids.ids + 32 * i, 0);
	pump(p);
}

static void on_event(peer_t *p, const wire_msg_t *m)
{
	node_t *n = p->node;
	const uint8_t *id = m->u.event.id;
	fetch_t *f = idmap_get(n->fetches, id);
	if (!f || f->is_bundle || f->peer != p->serial || f->state != FETCH_REQUESTED) {
		n->stats.unrequested++;
		peer_misbehaved(p, SCORE_UNREQUESTED, "sent an event it was not asked for");
		return;
	}
	p->inflight--;
	p->events_in++;
	idcache_add(&p->known, id);
	if (m->u.event.len <= PITH_EVENT_MAX_BYTES)
		peer_refund_bytes(p, m->u.event.len);
	ingest_job_t *job = m->u.event.len <= PITH_EVENT_MAX_BYTES
		? ingest_job_new(INGEST_EVENT, m->u.event.json, m->u.event.len) : NULL;
	if (!job) {
		if (m->u.event.len > PITH_EVENT_MAX_BYTES)
			peer_misbehaved(p, SCORE_INVALID, "sent an event over the size limit");
		fetch_retry(n, id, f);
		pump(p);
		return;
	}
	job->has_claim = 1;
	memcpy(job->claimed_id, id, 32);
	job->peer = p->serial;
	f->state = FETCH_VALIDATING;
	ingest_submit(n->ingest, job);
	pump(p);
}

static void on_notfound(peer_t *p, const wire_msg_t *m)
{
	node_t *n = p->node;
	for (size_t i = 0; i < m->u.ids.n; i++) {
		const uint8_t *id = m->u.ids.ids + 32 * i;
		fetch_t *f = idmap_get(n->fetches, id);
		if (!f || f->is_bundle || f->peer != p->serial || f->state != FETCH_REQUESTED)
			continue;
		n->stats.notfound_in++;
		p->inflight--;
		fetch_retry(n, id, f);
	}
	pump(p);
}

/* ---- serving ------------------------------------------------------------------------- */

/* Sends the bundles p asked for while its output queue is short: what a
 * BUNDLE_GET makes this node read is bounded by what the peer reads. A
 * record without a bundle gets no answer (the asker's request times out). */
static void bundles_serve(peer_t *p)
{
	static pith_buf_t buf = PITH_BUF_INIT;
	node_t *n = p->node;
	while (p->state == PEER_READY && peer_out_len(p) < SERVE_HIGH &&
	       p->bserve_head < p->bserve.len) {
		const char *pith = (const char *)p->bserve.data + p->bserve_head;
		p->bserve_head += PITH_LEN;
		pith_buf_reset(&buf);
		if (store_bundle_get(n->store, pith, &buf, NULL))
			continue;
		wire_msg_t r = {.type = WIRE_BUNDLE};
		snprintf(r.u.bundle.pith_number, sizeof(r.u.bundle.pith_number), "%s", pith);
		r.u.bundle.json = buf.data;
		r.u.bundle.len = buf.len;
		peer_send(p, &r);
	}
	if (p->bserve_head == p->bserve.len) {
		pith_buf_reset(&p->bserve);
		p->bserve_head = 0;
	} else if (p->bserve_head > p->bserve.len / 2) {
		memmove(p->bserve.data, p->bserve.data + p->bserve_head,
			p->bserve.len - p->bserve_head);
		p->bserve.len -= p->bserve_head;
		p->bserve_head = 0;
	}
	if (buf.cap > (1u << 20))
		pith_buf_release(&buf);
}

typedef struct serve_ctx {
	peer_t *p;
	uint8_t *nf; /* ids not found, WIRE_IDS_MAX of them at most */
	size_t k;
} serve_ctx_t;

static int serve_one(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	serve_ctx_t *c = arg;
	peer_t *p = c->p;
	node_t *n = p->node;
	if (bytes) {
		wire_msg_t m = {.type = WIRE_EVENT};
		memcpy(m.u.event.id, id, 32);
		m.u.event.json = bytes;
		m.u.event.len = len;
		peer_send(p, &m);
		p->events_out++;
		n->stats.events_served++;
		return 0;
	}
	memcpy(c->nf + 32 * c->k++, id, 32);
	if (c->k == n->wlim.max_ids) {
		send_ids(p, WIRE_NOTFOUND, c->nf, c->k);
		c->k = 0;
	}
	return 0;
}

/* Sends what p asked for while its output queue is short, reading the
 * events STORE_GET_MANY at a time (store_events_get_many); the queue may
 * pass SERVE_HIGH by one such batch. */
static void serve(peer_t *p)
{
	static uint8_t nf[WIRE_IDS_MAX * 32];
	static uint8_t ids[STORE_GET_MANY][32];
	node_t *n = p->node;
	serve_ctx_t c = {p, nf, 0};
	while (p->state == PEER_READY && peer_out_len(p) < SERVE_HIGH) {
		size_t k = 0;
		while (k < STORE_GET_MANY && idq_pop(&p->serve, ids[k]))
			k++;
		if (!k)
			break;
		store_events_get_many(n->store, (const uint8_t(*)[32])ids, k, serve_one, &c);
	}
	if (c.k)
		send_ids(p, WIRE_NOTFOUND, nf, c.k);
	bundles_serve(p);
}

static void on_get(peer_t *p, const wire_msg_t *m)
{
	for (size_t i = 0; i < m->u.ids.n; i++) {
		const uint8_t *id = m->u.ids.ids + 32 * i;
		idcache_add(&p->known, id);
		if (idq_push(&p->serve, id)) {
			peer_misbehaved(p, SCORE_FLOOD, "GET flood: asked for more than it reads");
			break;
		}
	}
	serve(p);
}

void relay_peer_writable(peer_t *p)
{
	serve(p);
}

/* ---- catch-up --------------------------------------------------------------------------- */

typedef struct inv_ctx {
	size_t limit, n;
	uint8_t *ids;
	int64_t last_us;
} inv_ctx_t;

static int inv_collect(void *arg, int64_t us, const uint8_t id[32])
{
	inv_ctx_t *c = arg;
	memcpy(c->ids + 32 * c->n++, id, 32);
	c->last_us = us;
	return c->n >= c->limit ? 1 : 0;
}

static void on_inv_req(peer_t *p, const wire_msg_t *m)
{
	static uint8_t ids[WIRE_IDS_MAX * 32];
	node_t *n = p->node;
	inv_ctx_t c = {m->u.inv_req.limit, 0, ids, m->u.inv_req.after_us};
	pith_err_t err = {0};
	if (store_time_each_after(n->store, m->u.inv_req.after_us, m->u.inv_req.after_id, INT64_MAX,
				  inv_collect, &c, &err) < 0) {
		log_error("store: reading the time index: %s", err.msg);
		return;
	}
	wire_msg_t r = {.type = WIRE_INV};
	r.u.inv.ids = ids;
	r.u.inv.n = c.n;
	r.u.inv.next_us = c.last_us;
	memcpy(r.u.inv.next_id, c.n ? ids + 32 * (c.n - 1) : m->u.inv_req.after_id, 32);
	r.u.inv.done = c.n < c.limit;
	for (size_t i = 0; i < c.n; i++)
		idcache_add(&p->known, ids + 32 * i);
	peer_send(p, &r);
}

static void on_inv(peer_t *p, const wire_msg_t *m)
{
	node_t *n = p->node;
	if (p->inv != INV_WAITING) {
		n->stats.unrequested++;
		peer_misbehaved(p, SCORE_UNREQUESTED, "sent an INV it was not asked for");
		return;
	}
	for (size_t i = 0; i < m->u.inv.n; i++)
		want(p, m->u.inv.ids + 32 * i, 1);
	if (m->u.inv.done) {
		p->inv = INV_DONE;
		log_debug("peer %s: catch-up listing complete", p->addr);
	} else {
		p->inv = INV_MORE;
		p->inv_next_us = m->u.inv.next_us;
		memcpy(p->inv_next_id, m->u.inv.next_id, 32);
	}
	pump(p);
}

void relay_want_catchup(peer_t *p, const uint8_t id[32])
{
	want(p, id, 1);
}

void relay_pump(peer_t *p)
{
	pump(p);
}

void relay_peer_ready(peer_t *p)
{
	if (sync_peer_ready(p))
		return; /* catch-up through reconciliation */
	p->inv_next_us = INT64_MIN;
	memset(p->inv_next_id, 0, 32);
	send_inv_req(p);
}

/* ---- bundles -------------------------------------------------------------------------------- */

static int free_value(void *arg, const uint8_t id[32], void *val)
{
	(void)arg;
	(void)id;
	free(val);
	return 1;
}

/* The newest stored bundle of pith (cached), or NULL if none. */
static const bundle_info_t *bundle_local(node_t *n, const char *pith)
{
	uint8_t key[32];
	bundle_key(pith, key);
	bundle_info_t *bi = idmap_get(n->bundles, key);
	if (bi)
		return bi;
	bundle_info_t got;
	if (store_bundle_newest(n->store, pith, &got.built_us, got.sha, NULL))
		return NULL;
	if (idmap_count(n->bundles) >= BUNDLE_CACHE_MAX)
		idmap_each(n->bundles, free_value, NULL);
	bi = malloc(sizeof(*bi));
	if (!bi)
		return NULL;
	*bi = got;
	if (idmap_put(n->bundles, key, bi)) {
		free(bi);
		return NULL;
	}
	return bi;
}

static void bundle_remember(node_t *n, const char *pith, int64_t built_us, const uint8_t sha[32])
{
	uint8_t key[32];
	bundle_key(pith, key);
	bundle_info_t *bi = idmap_get(n->bundles, key);
	if (!bi) {
		if (idmap_count(n->bundles) >= BUNDLE_CACHE_MAX)
			idmap_each(n->bundles, free_value, NULL);
		bi = calloc(1, sizeof(*bi));
		if (!bi || idmap_put(n->bundles, key, bi)) {
			free(bi);
			return;
		}
	}
	bi->built_us = built_us;
	memcpy(bi->sha, sha, 32);
}

/* Is (built_us, sha) newer than the bundle we hold (the store's order)? */
static int bundle_is_newer(node_t *n, const char *pith, int64_t built_us, const uint8_t sha[32])
{
	const bundle_info_t *bi = bundle_local(n, pith);
	return !bi || store_bundle_order(built_us, sha, bi->built_us, bi->sha) > 0;
}

double relay_bundle_cost(const peer_t *p, wire_type_t type, size_t refs)
{
	if (!(p->features & WIRE_FEAT_BUNDLE_BULK))
		return 1.0 + 16.0 * (double)refs; /* what an older node charges */
	return 1.0 + (double)refs / (type == WIRE_BUNDLE_GET ? 4.0 : 16.0);
}

/* Asks p for queued bundles while fewer than BUNDLE_INFLIGHT are out
 * (asked or being validated: the validators set the pace) and within a
 * quarter of the message budget p grants at its cost per ref. */
static void bundle_pump(peer_t *p)
{
	node_t *n = p->node;
	double rate = (double)n->cfg->peer_msg_rate / 4.0;
	int64_t now = node_now_us();
	if (p->state != PEER_READY)
		return;
	p->bget_tokens += rate * (double)(now - p->bget_us) / 1e6;
	p->bget_us = now;
	if (p->bget_tokens > rate)
		p->bget_tokens = rate;
	wire_msg_t get = {.type = WIRE_BUNDLE_GET};
	size_t k = 0;
	uint8_t key[32];
	while (p->binflight < BUNDLE_INFLIGHT &&
	       p->bget_tokens >= relay_bundle_cost(p, WIRE_BUNDLE_GET, k + 1) &&
	       idq_pop(&p->bwanted, key)) {
		fetch_t *f = idmap_get(n->fetches, key);
		if (!f || !f->is_bundle || f->peer != p->serial || f->state != FETCH_QUEUED)
			continue;
		f->state = FETCH_REQUESTED;
		f->since_us = now;
		p->binflight++;
		snprintf(get.u.bundles.refs[k++].pith_number, PITH_LEN, "%s", f->pith);
		if (k == n->wlim.max_refs) {
			get.u.bundles.n = k;
			p->bget_tokens -= relay_bundle_cost(p, WIRE_BUNDLE_GET, k);
			peer_send(p, &get);
			k = 0;
			if (p->state != PEER_READY)
				return;
		}
	}
	if (k) {
		get.u.bundles.n = k;
		p->bget_tokens -= relay_bundle_cost(p, WIRE_BUNDLE_GET, k);
		peer_send(p, &get);
	}
	sync_peer_feed(p); /* a bundle session held for this queue may go on */
}

/* Queues a fetch of pith's bundle from p; sha: the hash p announced, or
 * NULL. A fetch of that record still queued at another peer (not asked
 * yet) moves to p: a peer cannot keep a record from being fetched
 * elsewhere by announcing it first and leaving it deep in its queue.
 * Returns 1 if queued (bundle_pump asks for it). */
static int bundle_fetch_start(peer_t *p, const char *pith, const uint8_t *sha)
{
	node_t *n = p->node;
	uint8_t key[32];
	bundle_key(pith, key);
	fetch_t *f = idmap_get(n->fetches, key);
	if (p->bwanted.n >= p->bwanted.max ||
	    (!f && idmap_count(n->fetches) >= (size_t)n->cfg->max_pending)) {
		n->stats.pending_dropped++;
		return 0;
	}
	if (f) {
		if (f->is_bundle && f->state != FETCH_QUEUED && f->peer != p->serial) {
			/* asked already: p is a fallback if that copy is refused */
			int known = 0;
			for (size_t i = 0; i < f->nalt; i++)
				known |= f->alt[i] == p->serial;
			if (!known && f->nalt < FETCH_ALTS)
				f->alt[f->nalt++] = p->serial;
			return 0;
		}
		if (!f->is_bundle || f->state != FETCH_QUEUED || f->peer == p->serial ||
		    idq_push(&p->bwanted, key))
			return 0;
		f->peer = p->serial; /* the other queue's entry is skipped */
		f->has_sha = sha != NULL;
		if (sha)
			memcpy(f->sha, sha, 32);
		return 1;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return 0;
	f->is_bundle = 1;
	f->peer = p->serial;
	f->state = FETCH_QUEUED;
	f->since_us = node_now_us();
	snprintf(f->pith, sizeof(f->pith), "%s", pith);
	if (sha) {
		memcpy(f->sha, sha, 32);
		f->has_sha = 1;
	}
	if (idmap_put(n->fetches, key, f)) {
		free(f);
		return 0;
	}
	if (idq_push(&p->bwanted, key)) {
		free(idmap_del(n->fetches, key));
		return 0;
	}
	return 1;
}

static void on_bundle_announce(peer_t *p, const wire_msg_t *m)
{
	for (size_t i = 0; i < m->u.bundles.n; i++) {
		const wire_bundle_ref_t *r = &m->u.bundles.refs[i];
		idcache_add(&p->known, r->sha);
		if (refused_has(p->node, p, r->sha)) {
			p->node->stats.refused_skipped++;
			continue;
		}
		if (bundle_is_newer(p->node, r->pith_number, r->built_us, r->sha))
			bundle_fetch_start(p, r->pith_number, r->sha);
	}
	bundle_pump(p);
}

static void on_bundle_get(peer_t *p, const wire_msg_t *m)
{
	for (size_t i = 0; i < m->u.bundles.n; i++) {
		char rec[PITH_LEN] = {0};
		if ((p->bserve.len - p->bserve_head) / PITH_LEN >= BUNDLE_SERVE_MAX) {
			peer_misbehaved(p, SCORE_FLOOD,
					"BUNDLE_GET flood: asked for more than it reads");
			break;
		}
		snprintf(rec, sizeof(rec), "%s", m->u.bundles.refs[i].pith_number);
		if (pith_buf_append(&p->bserve, rec, PITH_LEN))
			break;
	}
	serve(p);
}

static void on_bundle(peer_t *p, const wire_msg_t *m)
{
	node_t *n = p->node;
	uint8_t key[32];
	bundle_key(m->u.bundle.pith_number, key);
	fetch_t *f = idmap_get(n->fetches, key);
	if (!f || !f->is_bundle || f->peer != p->serial || f->state != FETCH_REQUESTED) {
		n->stats.unrequested++;
		peer_misbehaved(p, SCORE_UNREQUESTED, "sent a bundle it was not asked for");
		return;
	}
	peer_refund_bytes(p, m->u.bundle.len); /* the reader bounds its size */
	ingest_job_t *job = ingest_job_new(INGEST_BUNDLE, m->u.bundle.json, m->u.bundle.len);
	if (!job) {
		free(idmap_del(n->fetches, key));
		if (p->binflight)
			p->binflight--;
		bundle_pump(p);
		return;
	}
	job->has_claim = 1;
	snprintf(job->claimed_pith, sizeof(job->claimed_pith), "%s", m->u.bundle.pith_number);
	job->peer = p->serial;
	f->state = FETCH_VALIDATING;
	ingest_submit(n->ingest, job);
}

/* A record_created arrived from p in catch-up and we may hold no bundle
 * for its record: ask p for one (interim catch-up of bundles,
 * docs/wire.md; sync.c paces the calls). */
int relay_bundle_request(peer_t *p, const char *subject)
{
	store_record_info_t ri;
	if (p->state != PEER_READY ||
	    (store_record_get(p->node->store, subject, &ri, NULL) == 0 && ri.has_bundle))
		return 0;
	if (!bundle_fetch_start(p, subject, NULL))
		return 0;
	bundle_pump(p);
	return 1;
}

/* ---- announcing ------------------------------------------------------------------------------ */

static void announce_schedule(node_t *n)
{
	if (evtimer_pending(n->announce_ev, NULL))
		return;
	struct timeval tv = {0, (suseconds_t)(n->cfg->announce_delay_ms * 1000)};
	evtimer_add(n->announce_ev, &tv);
}

void relay_queue_announce(node_t *n, const uint8_t id[32])
{
	if (pith_buf_append(&n->announce_q, id, 32))
		return;
	announce_schedule(n);
}

void relay_queue_announce_own(node_t *n, const uint8_t id[32])
{
	if (pith_buf_append(&n->announce_own_q, id, 32))
		return;
	announce_schedule(n);
}

static void queue_bundle_announce(node_t *n, const char *pith, int64_t built_us,
				  const uint8_t sha[32])
{
	wire_bundle_ref_t *q = realloc(n->bundle_q, (n->nbundle_q + 1) * sizeof(*q));
	if (!q)
		return;
	n->bundle_q = q;
	wire_bundle_ref_t *r = &q[n->nbundle_q++];
	memset(r, 0, sizeof(*r));
	snprintf(r->pith_number, sizeof(r->pith_number), "%s", pith);
	r->built_us = built_us;
	memcpy(r->sha, sha, 32);
	announce_schedule(n);
}

/* Ready peers that can take announces now: a peer with more than half of
 * peer_out_max queued is skipped (it learns these at its next catch-up). */
static size_t announce_targets(node_t *n, peer_t ***out)
{
	static peer_t **ps;
	static size_t cap;
	size_t np = 0;
	for (peer_t *p = n->peers; p; p = p->next) {
		if (p->state != PEER_READY || peer_out_len(p) > (size_t)n->cfg->peer_out_max / 2)
			continue;
		if (np == cap) {
			size_t nc = cap ? cap * 2 : 64;
			peer_t **nps = realloc(ps, nc * sizeof(*nps));
			if (!nps)
				break;
			ps = nps;
			cap = nc;
		}
		ps[np++] = p;
	}
	*out = ps;
	return np;
}

/* Per-peer ANNOUNCE batches built during one flush. */
static pith_buf_t *batches_get(size_t np)
{
	static pith_buf_t *b;
	static size_t cap;
	if (np > cap) {
		pith_buf_t *nb = realloc(b, np * sizeof(*nb));
		if (!nb)
			return NULL;
		for (size_t i = cap; i < np; i++)
			nb[i] = (pith_buf_t)PITH_BUF_INIT;
		b = nb;
		cap = np;
	}
	for (size_t i = 0; i < np; i++)
		pith_buf_reset(&b[i]);
	return b;
}

static void batches_send(node_t *n, peer_t **ps, pith_buf_t *b, size_t np)
{
	for (size_t i = 0; i < np; i++) {
		size_t k = b[i].len / 32;
		if (!k)
			continue;
		send_ids(ps[i], WIRE_ANNOUNCE, b[i].data, k);
		ps[i]->ids_announced_out += k;
		n->stats.ids_announced += k;
		if (b[i].cap > (1u << 20))
			pith_buf_release(&b[i]);
	}
}

static void lazy_schedule(node_t *n)
{
	if (n->lazy_head >= n->lazy_q.len || evtimer_pending(n->lazy_ev, NULL))
		return;
	int64_t due;
	memcpy(&due, n->lazy_q.data + n->lazy_head, 8);
	int64_t wait = due - node_now_us();
	if (wait < 0)
		wait = 0;
	struct timeval tv = {(time_t)(wait / 1000000), (suseconds_t)(wait % 1000000)};
	evtimer_add(n->lazy_ev, &tv);
}

/* Adds each of count ids to the batches of the peers that do not know
 * it: all of them, or with fanout > 0 only that many (chosen per id, so
 * that different events leave through different links) and the others to
 * the lazy queue, due at due_us. */
static void announce_ids(node_t *n, peer_t **ps, pith_buf_t *b, size_t np, const uint8_t *ids,
			 size_t count, size_t fanout, int64_t due_us)
{
	for (size_t i = 0; i < count; i++) {
		const uint8_t *id = ids + 32 * i;
		size_t start = np ? ((size_t)id[0] << 8 | id[1]) % np : 0, eager = 0, deferred = 0;
		for (size_t k = 0; k < np; k++) {
			size_t j = (start + k) % np;
			if (idcache_has(&ps[j]->known, id))
				continue;
			if (fanout && eager >= fanout) {
				deferred++;
				continue;
			}
			idcache_add(&ps[j]->known, id);
			pith_buf_append(&b[j], id, 32);
			eager++;
		}
		if (deferred && !pith_buf_append(&n->lazy_q, &due_us, 8) &&
		    !pith_buf_append(&n->lazy_q, id, 32))
			n->stats.lazy_deferred += deferred;
	}
}

/* Relayed ids go to every peer that does not know them: they reach this
 * node's neighbours no faster any other way. An id of an event that
 * entered here goes to announce_fanout peers at once and to the others
 * after lazy_announce_ms if none of their other peers told them first:
 * otherwise every neighbour would learn of it from this node alone, at
 * the same moment, and fetch one full copy each from it (docs/pithd.md,
 * "Relay"). The lazy delay is chosen to exceed the time the relays
 * normally take to reach them (docs/performance.md, issue 4), so the
 * fallback rarely fires; a neighbour that has only this node as a peer
 * hears of own events that much later. */
void relay_flush_announces(node_t *n)
{
	peer_t **ps;
	size_t np = announce_targets(n, &ps);
	pith_buf_t *b = batches_get(np);
	int64_t due = node_now_us() + n->cfg->lazy_announce_ms * 1000;
	if (b) {
		announce_ids(n, ps, b, np, n->announce_q.data, n->announce_q.len / 32, 0, due);
		announce_ids(n, ps, b, np, n->announce_own_q.data, n->announce_own_q.len / 32,
			     (size_t)n->cfg->announce_fanout, due);
		batches_send(n, ps, b, np);
	}
	for (size_t j = 0; j < np; j++) {
		peer_t *p = ps[j];
		wire_msg_t m = {.type = WIRE_BUNDLE_ANNOUNCE};
		for (size_t i = 0; i < n->nbundle_q; i++) {
			if (idcache_has(&p->known, n->bundle_q[i].sha))
				continue;
			idcache_add(&p->known, n->bundle_q[i].sha);
			m.u.bundles.refs[m.u.bundles.n++] = n->bundle_q[i];
			if (m.u.bundles.n == n->wlim.max_refs) {
				peer_send(p, &m);
				m.u.bundles.n = 0;
			}
		}
		if (m.u.bundles.n)
			peer_send(p, &m);
	}
	pith_buf_t *qs[2] = {&n->announce_q, &n->announce_own_q};
	for (int i = 0; i < 2; i++) {
		pith_buf_reset(qs[i]);
		if (qs[i]->cap > (4u << 20))
			pith_buf_release(qs[i]);
	}
	free(n->bundle_q);
	n->bundle_q = NULL;
	n->nbundle_q = 0;
	lazy_schedule(n);
}

void relay_flush_lazy(node_t *n)
{
	peer_t **ps;
	size_t np = announce_targets(n, &ps);
	pith_buf_t *b = batches_get(np);
	int64_t now = node_now_us();
	while (b && n->lazy_head + 40 <= n->lazy_q.len) {
		int64_t due;
		memcpy(&due, n->lazy_q.data + n->lazy_head, 8);
		if (due > now)
			break;
		const uint8_t *id = n->lazy_q.data + n->lazy_head + 8;
		for (size_t j = 0; j < np; j++) {
			if (idcache_has(&ps[j]->known, id))
				continue;
			idcache_add(&ps[j]->known, id);
			pith_buf_append(&b[j], id, 32);
			n->stats.lazy_sent++;
		}
		n->lazy_head += 40;
	}
	if (b)
		batches_send(n, ps, b, np);
	/* drop what was handled once it is most of the buffer */
	if (n->lazy_head == n->lazy_q.len) {
		pith_buf_reset(&n->lazy_q);
		n->lazy_head = 0;
		if (n->lazy_q.cap > (4u << 20))
			pith_buf_release(&n->lazy_q);
	} else if (n->lazy_head > n->lazy_q.len / 2) {
		memmove(n->lazy_q.data, n->lazy_q.data + n->lazy_head, n->lazy_q.len - n->lazy_head);
		n->lazy_q.len -= n->lazy_head;
		n->lazy_head = 0;
	}
	lazy_schedule(n);
}

/* ---- ingest results --------------------------------------------------------------------------- */

static int reason_is_peers_fault(const char *r)
{
	/* not: keys this node does not trust (a configuration difference),
	 * our own store or memory, or shutdown */
	return strcmp(r, "untrusted_key") && strcmp(r, "rotated_key") && strcmp(r, "store") &&
	       strcmp(r, "oom") && strcmp(r, "shutdown");
}

static void count_rejection(node_t *n, const ingest_job_t *job)
{
	if (!strcmp(job->reason, "id_mismatch"))
		n->stats.rejected[PITH_CHECK_NCHECKS]++;
	else if (!strcmp(job->reason, "store"))
		n->stats.rejected[PITH_CHECK_NCHECKS + 1]++;
	else if (job->check > PITH_CHECK_OK && job->check < PITH_CHECK_NCHECKS)
		n->stats.rejected[job->check]++;
	else
		n->stats.rejected[PITH_CHECK_NCHECKS + 2]++;
}

static void done_event(node_t *n, ingest_job_t *job, peer_t *p)
{
	fetch_t *f = job->peer ? idmap_get(n->fetches, job->claimed_id) : NULL;
	if (f && (f->is_bundle || f->state != FETCH_VALIDATING))
		f = NULL;
	if (job->rc == 0) {
		int catchup = f && f->catchup;
		if (f)
			free(idmap_del(n->fetches, job->claimed_id));
		idcache_add(&n->recent, job->id);
		/* the peer it came from has it: its known cache may have
		 * forgotten the id while the event waited for validation, and
		 * a node catching up would announce everything back */
		if (p)
			idcache_add(&p->known, job->id);
		switch (job->outcome) {
		case STORE_STORED:
			n->stats.events_stored++;
			sync_event_stored(n, job->created_us, job->id);
			if (job->peer)
				relay_queue_announce(n, job->id);
			else
				relay_queue_announce_own(n, job->id);
			/* live bundles travel by BUNDLE_ANNOUNCE; a node catching up
			 * may have missed one, so it asks */
			if (job->is_record_created && p && catchup)
				sync_bundle_wanted(p, job->subject);
			break;
		case STORE_DUPLICATE:
			n->stats.events_duplicate++;
			break;
		case STORE_RESIGNED:
			n->stats.events_resigned++;
			break;
		default:
			break;
		}
		return;
	}
	n->stats.events_invalid++;
	count_rejection(n, job);
	int fault = reason_is_peers_fault(job->reason);
	if (job->peer) {
		log_rl(&rl_invalid, LOG_WARN, "event from peer %s rejected (%s): %s",
		       p ? p->addr : "(gone)", job->reason, job->msg);
		if (p && fault)
			peer_misbehaved(p, SCORE_INVALID, "sent an invalid event");
		if (p && f && reason_is_untrusted(job->reason))
			refused_add(n, p, job->claimed_id);
	}
	if (f) {
		/* another announcer may hold a good copy (a good signature block,
		 * or the real event behind an id this peer lied about) */
		if (fault)
			fetch_retry(n, job->claimed_id, f);
		else
			free(idmap_del(n->fetches, job->claimed_id));
	}
}

static void done_bundle(node_t *n, ingest_job_t *job, peer_t *p)
{
	uint8_t key[32];
	bundle_key(job->has_claim ? job->claimed_pith : job->subject, key);
	fetch_t *f = job->peer ? idmap_get(n->fetches, key) : NULL;
	uint8_t asked[32];
	int has_asked = 0;
	peer_t *from = NULL;
	uint64_t alt[FETCH_ALTS];
	size_t nalt = 0;
	if (f && f->is_bundle && f->state == FETCH_VALIDATING) {
		has_asked = f->has_sha;
		memcpy(asked, f->sha, 32);
		nalt = f->nalt;
		memcpy(alt, f->alt, sizeof(alt));
		from = node_peer_by_serial(n, f->peer);
		if (from && from->binflight)
			from->binflight--;
		free(idmap_del(n->fetches, key));
	}
	if (job->rc == 0) {
		if (job->bundle_outcome == STORE_BUNDLE_NEWER) {
			n->stats.bundles_stored++;
			bundle_remember(n, job->subject, job->built_us, job->sha);
			sync_bundle_stored(n, job->built_us, job->sha, job->bundle_replaced,
					   job->old_built_us, job->old_sha);
			queue_bundle_announce(n, job->subject, job->built_us, job->sha);
			log_info("stored bundle of %s (%zu events)", job->subject, job->n_event_ids);
		} else {
			n->stats.bundles_older++;
		}
		for (size_t i = 0; i < job->n_event_ids; i++) {
			idcache_add(&n->recent, job->event_ids + 32 * i);
			sync_event_stored(n, job->event_created_us[i], job->event_ids + 32 * i);
			if (job->peer)
				relay_queue_announce(n, job->event_ids + 32 * i);
			else
				relay_queue_announce_own(n, job->event_ids + 32 * i);
		}
		return;
	}
	n->stats.bundles_invalid++;
	if (job->peer) {
		log_rl(&rl_invalid, LOG_WARN, "bundle from peer %s rejected (%s): %s",
		       p ? p->addr : "(gone)", job->reason, job->msg);
		if (p && reason_is_peers_fault(job->reason))
			peer_misbehaved(p, SCORE_INVALID, "sent an invalid bundle");
		/* not fetched from p again: what it holds, and what it
		 * announced (it sends the same when asked again) */
		if (p && reason_is_untrusted(job->reason)) {
			if (job->has_sha)
				refused_add(n, p, job->sha);
			if (has_asked)
				refused_add(n, p, asked);
		}
	}
	/* another peer that announced the record while this copy was on its
	 * way may hold a different one: ask the first that still can */
	for (size_t i = 0; i < nalt; i++) {
		peer_t *q = node_peer_by_serial(n, alt[i]);
		if (!q || q->state != PEER_READY ||
		    !bundle_fetch_start(q, job->has_claim ? job->claimed_pith : job->subject, NULL))
			continue;
		fetch_t *g = idmap_get(n->fetches, key); /* the rest stay fallbacks */
		for (size_t j = i + 1; g && j < nalt; j++)
			g->alt[g->nalt++] = alt[j];
		bundle_pump(q);
		break;
	}
}

void relay_ingest_done(void *arg, ingest_job_t *job)
{
	node_t *n = arg;
	if (!n->shutting_down) {
		peer_t *p = job->peer ? node_peer_by_serial(n, job->peer) : NULL;
		if (p && p->state == PEER_CLOSING)
			p = NULL;
		if (job->kind == INGEST_EVENT) {
			done_event(n, job, p);
		} else {
			done_bundle(n, job, p);
			if (p && p->state == PEER_READY)
				bundle_pump(p);
		}
	}
	if (n->http)
		http_job_done(n->http, job);
	if (job->ctl && n->control)
		control_job_done(n->control, job);
	ingest_job_free(job);
}

/* ---- peers coming and going, timeouts ------------------------------------------------------------ */

typedef struct collect {
	node_t *n;
	uint64_t serial;   /* peer whose fetches to collect, or 0 for timeouts */
	int64_t now;
	pith_buf_t ids;
} collect_t;

static int collect_fetch(void *arg, const uint8_t id[32], void *val)
{
	collect_t *c = arg;
	fetch_t *f = val;
	int pick;
	if (c->serial)
		pick = f->peer == c->serial && f->state != FETCH_VALIDATING;
	else
		pick = f->state == FETCH_REQUESTED &&
		       c->now - f->since_us > c->n->cfg->fetch_timeout_ms * 1000;
	if (pick)
		pith_buf_append(&c->ids, id, 32);
	return 0;
}

/* Fetches picked by c, handled one by one outside the map walk. */
static void retry_collected(collect_t *c, int timeouts)
{
	node_t *n = c->n;
	for (size_t i = 0; i + 32 <= c->ids.len; i += 32) {
		const uint8_t *id = c->ids.data + i;
		fetch_t *f = idmap_get(n->fetches, id);
		if (!f)
			continue;
		if (timeouts) {
			n->stats.fetch_timeouts++;
			peer_t *q = node_peer_by_serial(n, f->peer);
			if (q && q->inflight && !f->is_bundle)
				q->inflight--;
			if (q && q->binflight && f->is_bundle)
				q->binflight--;
		}
		if (f->is_bundle)
			free(idmap_del(n->fetches, id));
		else
			fetch_retry(n, id, f);
	}
	pith_buf_release(&c->ids);
}

void relay_peer_gone(peer_t *p)
{
	sync_peer_gone(p);
	collect_t c = {p->node, p->serial, 0, PITH_BUF_INIT};
	idmap_each(p->node->fetches, collect_fetch, &c);
	p->inflight = 0;
	p->binflight = 0;
	idq_release(&p->bwanted);
	pith_buf_release(&p->bserve);
	p->bserve_head = 0;
	retry_collected(&c, 0);
}

void relay_tick(node_t *n, int64_t now)
{
	/* Timeouts are looked for every eighth of fetch_timeout_ms, not every
	 * tick: the walk visits every slot of the fetch map, which holds tens
	 * of thousands of ids while a fresh node catches up (it was 9% of the
	 * loop thread's CPU at 200 ms). A fetch is retried at most 1/8 late. */
	if (now >= n->fetch_scan_us) {
		int64_t step = n->cfg->fetch_timeout_ms * 1000 / 8;
		n->fetch_scan_us = now + (step > 200000 ? step : 200000);
		collect_t c = {n, 0, now, PITH_BUF_INIT};
		idmap_each(n->fetches, collect_fetch, &c);
		if (c.ids.len)
			log_debug("%zu fetches timed out", c.ids.len / 32);
		retry_collected(&c, 1);
	}
	for (peer_t *p = n->peers; p; p = p->next) {
		if (p->state == PEER_READY && p->wanted.n && p->inflight < (size_t)n->cfg->max_inflight)
			pump(p);
		if (p->state == PEER_READY && p->bwanted.n)
			bundle_pump(p);
	}
}

/* ---- dispatch ------------------------------------------------------------------------------------- */

int relay_is_answer(const peer_t *p, const wire_msg_t *m)
{
	(void)p;
	return m->type == WIRE_EVENT || m->type == WIRE_BUNDLE || m->type == WIRE_NOTFOUND ||
	       m->type == WIRE_INV;
}

void relay_dispatch(peer_t *p, const wire_msg_t *m)
{
	switch (m->type) {
	case WIRE_ANNOUNCE: on_announce(p, m); break;
	case WIRE_GET: on_get(p, m); break;
	case WIRE_EVENT: on_event(p, m); break;
	case WIRE_NOTFOUND: on_notfound(p, m); break;
	case WIRE_INV_REQ: on_inv_req(p, m); break;
	case WIRE_INV: on_inv(p, m); break;
	case WIRE_BUNDLE_ANNOUNCE: on_bundle_announce(p, m); break;
	case WIRE_BUNDLE_GET: on_bundle_get(p, m); break;
	case WIRE_BUNDLE: on_bundle(p, m); break;
	case WIRE_RECON:
	case WIRE_RECON_BUNDLES: sync_on_recon(p, m); break;
	default: {
		static log_rl_t rl;
		log_rl(&rl, LOG_WARN, "peer %s: unexpected %s", p->addr, wire_type_name(m->type));
		break;
	}
	}
}
