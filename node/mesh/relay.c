/* Announce-then-fetch relay and serving (relay.h).
 *
 * A node announces the ids of events it validated and stored; a peer that
 * lacks one asks one announcer for it (GET), keeps the other announcers
 * as fallbacks, validates what arrives off the loop, stores it, and only
 * then announces it onward. Each id is fetched from one peer at a time,
 * so a node receives one full copy of each event in the usual case.
 *
 * Catch-up runs through set reconciliation (sync.c), which hands the ids
 * it finds missing to relay_want_catchup() as the fetch queue drains (the
 * feed hook); with a peer that does not speak it, through the INV listing
 * (relay_inv.c). Announcing: relay_announce.c. Bundles: relay_bundle.c. */
#include "relay_int.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define KNOWN_BITS 15  /* 32768 remembered ids per peer */
#define RECENT_BITS 20 /* ids remembered as stored: 8 MiB */
#define REFUSED_BITS 16 /* (peer, id) pairs remembered as refused: 512 KiB */

static log_rl_t rl_invalid;

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

void relay_refused_add(relay_t *r, const peer_t *p, const uint8_t id[32])
{
	uint8_t key[32];
	refused_key(p, id, key);
	idcache_add(&r->refused, key);
	r->refused_n++;
}

int relay_refused_has(const relay_t *r, const peer_t *p, const uint8_t id[32])
{
	uint8_t key[32];
	if (!r->refused_n)
		return 0;
	refused_key(p, id, key);
	return idcache_has(&r->refused, key);
}

int relay_reason_is_untrusted(const char *r)
{
	return !strcmp(r, "untrusted_key") || !strcmp(r, "rotated_key");
}

/* ---- sending id lists ------------------------------------------------------------- */

void relay_send_ids(peer_t *p, wire_type_t type, const uint8_t *ids, size_t count)
{
	size_t max = p->relay->r->wlim.max_ids;
	for (size_t i = 0; i < count; i += max) {
		wire_msg_t m = {.type = type};
		m.u.ids.ids = ids + i * 32;
		m.u.ids.n = count - i < max ? count - i : max;
		peer_send(p, &m);
	}
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
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	if (p->state != PEER_READY)
		return;
	if (r->d.hooks.feed) /* ids reconciliation found missing */
		r->d.hooks.feed(r->d.hooks.arg, p);
	if (p->state != PEER_READY)
		return;
	size_t k = 0, max = r->wlim.max_ids, window = (size_t)r->d.cfg->max_inflight;
	size_t least = window / 16 ? (window / 16 < 64 ? window / 16 : 64) : 1;
	int64_t now = node_now_us();
	uint8_t id[32];
	/* With little in flight anything queued goes out at once (gossip's
	 * few ids, the tail of a catch-up); with more in flight only a full
	 * batch does. Sending whatever was queued whenever it fitted made a
	 * large window (max_inflight 4096) a GET per few ids, and the peer
	 * banned this node for a message flood. */
	int room = rp->inflight < least ||
		   (rp->wanted.n >= least && rp->inflight + least <= window);
	while (room && rp->inflight < window && idq_pop(&rp->wanted, id)) {
		fetch_t *f = idmap_get(r->fetches, id);
		if (!f || f->is_bundle || f->peer != p->serial || f->state != FETCH_QUEUED)
			continue; /* handed to another peer meanwhile, or done */
		f->state = FETCH_REQUESTED;
		f->since_us = now;
		rp->inflight++;
		memcpy(batch + 32 * k++, id, 32);
		if (k == max) {
			relay_send_ids(p, WIRE_GET, batch, k);
			r->d.stats->ids_requested += k;
			k = 0;
		}
	}
	if (k) {
		relay_send_ids(p, WIRE_GET, batch, k);
		r->d.stats->ids_requested += k;
	}
	if (rp->inv == INV_MORE && rp->wanted.n < max)
		relay_inv_send_req(p);
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
static void fetch_retry(relay_t *r, const uint8_t id[32], fetch_t *f)
{
	while (f->nalt) {
		uint64_t serial = f->alt[0];
		memmove(f->alt, f->alt + 1, (size_t)(f->nalt - 1) * sizeof(f->alt[0]));
		f->nalt--;
		peer_t *q = net_peer_by_serial(r->d.net, serial);
		if (q && q->state == PEER_READY && idq_push(&q->relay->wanted, id) == 0) {
			f->peer = serial;
			f->state = FETCH_QUEUED;
			f->since_us = node_now_us();
			pump(q);
			return;
		}
	}
	free(idmap_del(r->fetches, id));
}

/* p says it has id: fetch it unless we have it or are fetching it.
 * catchup: p listed it in catch-up (reconciliation or an INV page) rather
 * than announcing it. */
void relay_want(peer_t *p, const uint8_t id[32], int catchup)
{
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	idcache_add(&rp->known, id);
	if (idcache_has(&r->recent, id))
		return;
	if (relay_refused_has(r, p, id)) {
		r->d.stats->refused_skipped++;
		return;
	}
	fetch_t *f = idmap_get(r->fetches, id);
	if (f) {
		if (!f->is_bundle)
			fetch_add_alt(f, p->serial);
		return;
	}
	/* bounds first: a peer announcing junk costs no store lookup once full */
	if (rp->wanted.n >= rp->wanted.max || idmap_count(r->fetches) >= (size_t)r->d.cfg->max_pending) {
		r->d.stats->pending_dropped++;
		return;
	}
	/* the filter of stored ids first: in a catch-up nearly every id is
	 * new, and the store's answer probes every level-0 file. While a first
	 * catch-up writes the index of events aside, the store does not know
	 * an id the filter may have (STORE_HAS_UNKNOWN): it is fetched, and
	 * the commit finds it a duplicate if it was stored (by its time) */
	int has = r->d.hooks.is_absent && r->d.hooks.is_absent(r->d.hooks.arg, id)
			  ? 0 : store_event_has(r->d.store, id, NULL);
	if (has == STORE_HAS_UNKNOWN)
		has = 0;
	if (has) {
		if (has == 1)
			idcache_add(&r->recent, id);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return;
	f->peer = p->serial;
	f->state = FETCH_QUEUED;
	f->catchup = (uint8_t)catchup;
	f->since_us = node_now_us();
	if (idmap_put(r->fetches, id, f)) {
		free(f);
		return;
	}
	if (idq_push(&rp->wanted, id))
		free(idmap_del(r->fetches, id));
}

static void on_announce(peer_t *p, const wire_msg_t *m)
{
	p->ids_announced_in += m->u.ids.n;
	for (size_t i = 0; i < m->u.ids.n; i++)
		relay_want(p, m->u.ids.ids + 32 * i, 0);
	pump(p);
}

static void on_event(peer_t *p, const wire_msg_t *m)
{
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	const uint8_t *id = m->u.event.id;
	fetch_t *f = idmap_get(r->fetches, id);
	if (!f || f->is_bundle || f->peer != p->serial || f->state != FETCH_REQUESTED) {
		r->d.stats->unrequested++;
		peer_misbehaved(p, SCORE_UNREQUESTED, "sent an event it was not asked for");
		return;
	}
	rp->inflight--;
	p->events_in++;
	idcache_add(&rp->known, id);
	if (m->u.event.len <= PITH_EVENT_MAX_BYTES)
		peer_refund_bytes(p, m->u.event.len);
	ingest_job_t *job = m->u.event.len <= PITH_EVENT_MAX_BYTES
		? ingest_job_new(INGEST_EVENT, m->u.event.json, m->u.event.len) : NULL;
	if (!job) {
		if (m->u.event.len > PITH_EVENT_MAX_BYTES)
			peer_misbehaved(p, SCORE_INVALID, "sent an event over the size limit");
		fetch_retry(r, id, f);
		pump(p);
		return;
	}
	job->has_claim = 1;
	memcpy(job->claimed_id, id, 32);
	job->peer = p->serial;
	f->state = FETCH_VALIDATING;
	ingest_submit(r->d.ingest, job);
	relay_validating_add(r, p, job->len);
	pump(p);
}

/* ---- the validation budget ------------------------------------------------------------- */

/* What peers sent when asked waits for the validators. Its bytes are
 * bounded per peer (peer_validate_bytes) and in all (validate_bytes_max):
 * past either, the peer that delivers is held (not read from) until its
 * bytes are under half of its budget and the total under half of its own,
 * so that a peer serving large events faster than they validate waits in
 * TCP rather than in our memory, and other peers' events are not queued
 * behind its backlog (docs/pithd.md, "Budgets and misbehaviour"). */
void relay_validating_add(relay_t *r, peer_t *p, size_t len)
{
	relay_peer_t *rp = p->relay;
	rp->vbytes += len;
	r->vbytes += len;
	if (r->vbytes >= (size_t)r->d.cfg->validate_bytes_max)
		r->vheld = 1;
	if (!p->held && (r->vheld || rp->vbytes >= (size_t)r->d.cfg->peer_validate_bytes)) {
		r->d.stats->validate_holds++;
		peer_hold(p, 1);
	}
}

static int under_half(const relay_t *r, const relay_peer_t *rp)
{
	return !r->vheld && rp->vbytes < (size_t)r->d.cfg->peer_validate_bytes / 2;
}

/* A peer's job came back from validation (p NULL when it is gone). */
static void validating_done(relay_t *r, const ingest_job_t *job, peer_t *p)
{
	size_t len = job->len;
	r->vbytes -= len < r->vbytes ? len : r->vbytes;
	if (p && p->relay)
		p->relay->vbytes -= len < p->relay->vbytes ? len : p->relay->vbytes;
	if (r->vheld && r->vbytes < (size_t)r->d.cfg->validate_bytes_max / 2) {
		r->vheld = 0;
		for (peer_t *q = net_peers(r->d.net); q; q = q->next)
			if (q->held && q->relay && q->state == PEER_READY && under_half(r, q->relay))
				peer_hold(q, 0);
	} else if (p && p->held && p->relay && p->state == PEER_READY && under_half(r, p->relay)) {
		peer_hold(p, 0);
	}
}

static void on_notfound(peer_t *p, const wire_msg_t *m)
{
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	for (size_t i = 0; i < m->u.ids.n; i++) {
		const uint8_t *id = m->u.ids.ids + 32 * i;
		fetch_t *f = idmap_get(r->fetches, id);
		if (!f || f->is_bundle || f->peer != p->serial || f->state != FETCH_REQUESTED)
			continue;
		r->d.stats->notfound_in++;
		rp->inflight--;
		fetch_retry(r, id, f);
	}
	pump(p);
}

/* ---- serving ------------------------------------------------------------------------- */

typedef struct serve_ctx {
	peer_t *p;
	uint8_t *nf; /* ids not found, WIRE_IDS_MAX of them at most */
	size_t k;
} serve_ctx_t;

static int serve_one(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	serve_ctx_t *c = arg;
	peer_t *p = c->p;
	relay_t *r = p->relay->r;
	if (bytes) {
		wire_msg_t m = {.type = WIRE_EVENT};
		memcpy(m.u.event.id, id, 32);
		m.u.event.json = bytes;
		m.u.event.len = len;
		peer_send(p, &m);
		p->events_out++;
		r->d.stats->events_served++;
		return 0;
	}
	memcpy(c->nf + 32 * c->k++, id, 32);
	if (c->k == r->wlim.max_ids) {
		relay_send_ids(p, WIRE_NOTFOUND, c->nf, c->k);
		c->k = 0;
	}
	return 0;
}

struct relay_hint {
	uint8_t id[32];
	int64_t us;
};

void relay_hint_offered(peer_t *p, const uint8_t id[32], int64_t created_us)
{
	relay_peer_t *rp = p->relay;
	if (!rp || (!rp->hint_map && !(rp->hint_map = idmap_new())))
		return;
	void *had = idmap_get(rp->hint_map, id);
	if (had) { /* offered again: the newer time (the same one) */
		rp->hint_ring[(uintptr_t)had - 1].us = created_us;
		return;
	}
	size_t slot;
	if (rp->hint_n < rp->hint_cap) {
		slot = (rp->hint_head + rp->hint_n++) % rp->hint_cap;
	} else if (rp->hint_cap < RELAY_HINTS_MAX) {
		/* grows only until first full, so nothing has wrapped yet */
		size_t cap = rp->hint_cap ? rp->hint_cap * 2 : 1024;
		struct relay_hint *ring = realloc(rp->hint_ring, cap * sizeof(*ring));
		if (!ring)
			return;
		rp->hint_ring = ring;
		rp->hint_cap = cap;
		slot = rp->hint_n++;
	} else { /* the oldest goes */
		slot = rp->hint_head;
		idmap_del(rp->hint_map, rp->hint_ring[slot].id);
		rp->hint_head = (rp->hint_head + 1) % rp->hint_cap;
	}
	memcpy(rp->hint_ring[slot].id, id, 32);
	rp->hint_ring[slot].us = created_us;
	if (idmap_put(rp->hint_map, id, (void *)(uintptr_t)(slot + 1)))
		rp->hint_ring[slot].us = STORE_TIME_NONE; /* out of memory: no hint */
}

static int64_t hint_time(const relay_peer_t *rp, const uint8_t id[32])
{
	void *v = rp->hint_map ? idmap_get(rp->hint_map, id) : NULL;
	return v ? rp->hint_ring[(uintptr_t)v - 1].us : STORE_TIME_NONE;
}

/* Sends what p asked for while its output queue is short, reading the
 * events STORE_GET_MANY at a time (store_events_get_many_at, with the
 * times reconciliation offered them at); the queue may pass SERVE_HIGH by
 * one such batch. */
void relay_serve(peer_t *p)
{
	static uint8_t nf[WIRE_IDS_MAX * 32];
	static uint8_t ids[STORE_GET_MANY][32];
	static int64_t times[STORE_GET_MANY];
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	serve_ctx_t c = {p, nf, 0};
	while (p->state == PEER_READY && peer_out_len(p) < SERVE_HIGH) {
		size_t k = 0;
		while (k < STORE_GET_MANY && idq_pop(&rp->serve, ids[k])) {
			times[k] = hint_time(rp, ids[k]);
			r->d.stats->served_by_time += times[k] != STORE_TIME_NONE;
			k++;
		}
		if (!k)
			break;
		pith_err_t err = {0};
		size_t bad = store_events_get_many_at(r->d.store, (const uint8_t(*)[32])ids, times, k,
						      serve_one, &c, &err);
		/* the peer is told NOTFOUND and asks another; the store has
		 * counted and logged the error (node.c, store_error) */
		r->d.stats->events_unreadable += bad;
	}
	if (c.k)
		relay_send_ids(p, WIRE_NOTFOUND, nf, c.k);
	relay_bundles_serve(p);
}

static void on_get(peer_t *p, const wire_msg_t *m)
{
	relay_peer_t *rp = p->relay;
	for (size_t i = 0; i < m->u.ids.n; i++) {
		const uint8_t *id = m->u.ids.ids + 32 * i;
		idcache_add(&rp->known, id);
		if (idq_push(&rp->serve, id)) {
			peer_misbehaved(p, SCORE_FLOOD, "GET flood: asked for more than it reads");
			break;
		}
	}
	relay_serve(p);
}

void relay_peer_writable(relay_t *r, peer_t *p)
{
	(void)r;
	if (p->relay)
		relay_serve(p);
}

/* ---- catch-up: what sync.c calls ------------------------------------------------------------ */

void relay_want_catchup(peer_t *p, const uint8_t id[32])
{
	relay_want(p, id, 1);
}

void relay_pump(peer_t *p)
{
	pump(p);
}

void relay_mark_known(peer_t *p, const uint8_t id[32])
{
	if (p->relay)
		idcache_add(&p->relay->known, id);
}

/* ---- ingest results --------------------------------------------------------------------------- */

int relay_reason_is_peers_fault(const char *r)
{
	/* not: keys this node does not trust (a configuration difference),
	 * our own store or memory, or shutdown */
	return strcmp(r, "untrusted_key") && strcmp(r, "rotated_key") && strcmp(r, "store") &&
	       strcmp(r, "oom") && strcmp(r, "shutdown");
}

static void count_rejection(relay_t *r, const ingest_job_t *job)
{
	if (!strcmp(job->reason, "id_mismatch"))
		r->d.stats->rejected[PITH_CHECK_NCHECKS]++;
	else if (!strcmp(job->reason, "store"))
		r->d.stats->rejected[PITH_CHECK_NCHECKS + 1]++;
	else if (job->check > PITH_CHECK_OK && job->check < PITH_CHECK_NCHECKS)
		r->d.stats->rejected[job->check]++;
	else
		r->d.stats->rejected[PITH_CHECK_NCHECKS + 2]++;
}

/* What became of an event: 1 if it was fetched in catch-up and stored. */
static int done_event(relay_t *r, ingest_job_t *job, peer_t *p)
{
	fetch_t *f = job->peer ? idmap_get(r->fetches, job->claimed_id) : NULL;
	if (f && (f->is_bundle || f->state != FETCH_VALIDATING))
		f = NULL;
	if (job->rc == 0) {
		int catchup = f && f->catchup;
		if (f)
			free(idmap_del(r->fetches, job->claimed_id));
		idcache_add(&r->recent, job->id);
		/* not announced back to the peer it came from: announce_ids
		 * skips that peer by serial (its known cache may have forgotten
		 * the id while the event waited for validation) */
		switch (job->outcome) {
		case STORE_STORED:
			r->d.stats->events_stored++;
			/* per item: debug; the progress lines count them at info */
			if (log_get_level() >= LOG_DEBUG) {
				char hex[65];
				pith_hex_encode(job->id, 32, hex);
				log_debug("stored event %.16s of %s (from %s)", hex, job->subject,
					  p ? p->addr : job->peer ? "a peer gone since" : "this node's client or upstream");
			}
			if (job->peer)
				relay_queue_announce(r, job->id, job->peer);
			else
				relay_queue_announce_own(r, job->id);
			return catchup;
		case STORE_DUPLICATE:
			r->d.stats->events_duplicate++;
			break;
		case STORE_RESIGNED:
			r->d.stats->events_resigned++;
			break;
		default:
			break;
		}
		return 0;
	}
	r->d.stats->events_invalid++;
	count_rejection(r, job);
	int fault = relay_reason_is_peers_fault(job->reason);
	if (job->peer) {
		log_rl(&rl_invalid, LOG_WARN, "event from peer %s rejected (%s): %s",
		       p ? p->addr : "(gone)", job->reason, job->msg);
		if (p && fault)
			peer_misbehaved(p, SCORE_INVALID, "sent an invalid event");
		if (p && f && relay_reason_is_untrusted(job->reason))
			relay_refused_add(r, p, job->claimed_id);
	}
	if (f) {
		/* another announcer may hold a good copy (a good signature block,
		 * or the real event behind an id this peer lied about) */
		if (fault)
			fetch_retry(r, job->claimed_id, f);
		else
			free(idmap_del(r->fetches, job->claimed_id));
	}
	return 0;
}

int relay_job_done(relay_t *r, ingest_job_t *job, peer_t *p)
{
	if (job->peer)
		validating_done(r, job, p);
	if (job->kind == INGEST_EVENT)
		return done_event(r, job, p);
	relay_bundle_done(r, job, p);
	if (p && p->state == PEER_READY)
		relay_bundle_pump(p);
	return 0;
}

/* ---- peers coming and going, timeouts ------------------------------------------------------------ */

typedef struct collect {
	relay_t *r;
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
		pick = (f->state == FETCH_REQUESTED &&
			c->now - f->since_us > c->r->d.cfg->fetch_timeout_ms * 1000) ||
		       (f->state == FETCH_QUEUED && !f->is_bundle &&
			c->now - f->since_us > FETCH_QUEUED_TTL_US);
	if (pick)
		pith_buf_append(&c->ids, id, 32);
	return 0;
}

/* Fetches picked by c, handled one by one outside the map walk. */
static void retry_collected(collect_t *c, int timeouts)
{
	relay_t *r = c->r;
	for (size_t i = 0; i + 32 <= c->ids.len; i += 32) {
		const uint8_t *id = c->ids.data + i;
		fetch_t *f = idmap_get(r->fetches, id);
		if (!f)
			continue;
		if (timeouts && f->state == FETCH_QUEUED) {
			/* waited too long for its peer's window: another announcer,
			 * or it is forgotten (reconciliation finds it again) */
			r->d.stats->fetch_expired++;
		} else if (timeouts) {
			r->d.stats->fetch_timeouts++;
			peer_t *q = net_peer_by_serial(r->d.net, f->peer);
			/* ids announced and never served: once per scan, whatever
			 * the number (a slow honest peer loses a few points); not
			 * a peer we hold, nor one whose answers are validating */
			if (q && q->state == PEER_READY && q->relay && !q->held && !q->relay->vbytes &&
			    q->relay->scored_scan != c->now) {
				q->relay->scored_scan = c->now;
				peer_misbehaved(q, SCORE_UNSERVED, "let requests time out");
			}
			if (q && q->relay->inflight && !f->is_bundle)
				q->relay->inflight--;
			if (q && q->relay->binflight && f->is_bundle)
				q->relay->binflight--;
		}
		if (f->is_bundle)
			free(idmap_del(r->fetches, id));
		else
			fetch_retry(r, id, f);
	}
	pith_buf_release(&c->ids);
}

void relay_peer_gone(relay_t *r, peer_t *p)
{
	relay_peer_t *rp = p->relay;
	if (!rp)
		return;
	collect_t c = {r, p->serial, 0, PITH_BUF_INIT};
	idmap_each(r->fetches, collect_fetch, &c);
	rp->inflight = 0;
	rp->binflight = 0;
	idq_release(&rp->bwanted);
	pith_buf_release(&rp->bserve);
	rp->bserve_head = 0;
	retry_collected(&c, 0);
}

void relay_tick(relay_t *r, int64_t now)
{
	/* Timeouts are looked for every eighth of fetch_timeout_ms, not every
	 * tick: the walk visits every slot of the fetch map, which holds tens
	 * of thousands of ids while a fresh node catches up (it was 9% of the
	 * loop thread's CPU at 200 ms). A fetch is retried at most 1/8 late. */
	if (now >= r->fetch_scan_us) {
		int64_t step = r->d.cfg->fetch_timeout_ms * 1000 / 8;
		r->fetch_scan_us = now + (step > 200000 ? step : 200000);
		collect_t c = {r, 0, now, PITH_BUF_INIT};
		idmap_each(r->fetches, collect_fetch, &c);
		if (c.ids.len)
			log_debug("%zu fetches timed out", c.ids.len / 32);
		retry_collected(&c, 1);
	}
	for (peer_t *p = net_peers(r->d.net); p; p = p->next) {
		relay_peer_t *rp = p->relay;
		if (p->state != PEER_READY || !rp)
			continue;
		if (rp->wanted.n && rp->inflight < (size_t)r->d.cfg->max_inflight)
			pump(p);
		if (rp->bwanted.n)
			relay_bundle_pump(p);
	}
}

/* ---- dispatch ------------------------------------------------------------------------------------- */

int relay_is_answer(const peer_t *p, const wire_msg_t *m)
{
	(void)p;
	return m->type == WIRE_EVENT || m->type == WIRE_BUNDLE || m->type == WIRE_NOTFOUND ||
	       m->type == WIRE_INV;
}

int relay_on_message(relay_t *r, peer_t *p, const wire_msg_t *m)
{
	(void)r;
	if (!p->relay)
		return 0;
	switch (m->type) {
	case WIRE_ANNOUNCE: on_announce(p, m); return 1;
	case WIRE_GET: on_get(p, m); return 1;
	case WIRE_EVENT: on_event(p, m); return 1;
	case WIRE_NOTFOUND: on_notfound(p, m); return 1;
	case WIRE_INV_REQ: relay_on_inv_req(p, m); return 1;
	case WIRE_INV: relay_on_inv(p, m); return 1;
	case WIRE_BUNDLE_ANNOUNCE: relay_on_bundle_announce(p, m); return 1;
	case WIRE_BUNDLE_GET: relay_on_bundle_get(p, m); return 1;
	case WIRE_BUNDLE: relay_on_bundle(p, m); return 1;
	default: return 0;
	}
}

/* ---- setup -------------------------------------------------------------------------------------- */

int relay_free_value(void *arg, const uint8_t id[32], void *val)
{
	(void)arg;
	(void)id;
	free(val);
	return 1;
}

static void announce_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	relay_flush_announces(arg);
}

static void lazy_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	relay_flush_lazy(arg);
}

relay_t *relay_new(const relay_deps_t *d)
{
	relay_t *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->d = *d;
	r->wlim = *net_limits(d->net);
	r->fetches = idmap_new();
	r->bundles = idmap_new();
	r->announce_ev = evtimer_new(d->base, announce_cb, r);
	r->lazy_ev = evtimer_new(d->base, lazy_cb, r);
	if (!r->fetches || !r->bundles || !r->announce_ev || !r->lazy_ev ||
	    idcache_init(&r->recent, RECENT_BITS) || idcache_init(&r->refused, REFUSED_BITS)) {
		relay_free(r);
		return NULL;
	}
	return r;
}

void relay_free_(relay_t *r)
{
	if (!r)
		return;
	if (r->announce_ev)
		event_free(r->announce_ev);
	if (r->lazy_ev)
		event_free(r->lazy_ev);
	if (r->fetches) {
		idmap_each(r->fetches, relay_free_value, NULL);
		idmap_free(r->fetches);
	}
	if (r->bundles) {
		idmap_each(r->bundles, relay_free_value, NULL);
		idmap_free(r->bundles);
	}
	idcache_release(&r->recent);
	idcache_release(&r->refused);
	pith_buf_release(&r->announce_q);
	pith_buf_release(&r->announce_own_q);
	pith_buf_release(&r->lazy_q);
	free(r->bundle_q);
	free(r);
}

int relay_peer_attach(relay_t *r, peer_t *p)
{
	relay_peer_t *rp = calloc(1, sizeof(*rp));
	if (!rp)
		return PITH_ENOMEM;
	rp->r = r;
	idq_init(&rp->wanted, (size_t)r->d.cfg->max_wanted);
	idq_init(&rp->serve, (size_t)r->d.cfg->max_serve_queue);
	idq_init(&rp->bwanted, RELAY_BUNDLE_WANTED_MAX);
	if (idcache_init(&rp->known, KNOWN_BITS)) {
		free(rp);
		return PITH_ENOMEM;
	}
	p->relay = rp;
	return 0;
}

void relay_peer_detach(relay_t *r, peer_t *p)
{
	(void)r;
	relay_peer_t *rp = p->relay;
	if (!rp)
		return;
	idcache_release(&rp->known);
	idq_release(&rp->wanted);
	idq_release(&rp->serve);
	idq_release(&rp->bwanted);
	pith_buf_release(&rp->bserve);
	idmap_free(rp->hint_map);
	free(rp->hint_ring);
	free(rp);
	p->relay = NULL;
}

size_t relay_validating_bytes(const relay_t *r)
{
	return r ? r->vbytes : 0;
}

size_t relay_pending_fetches(const relay_t *r)
{
	return idmap_count(r->fetches);
}
