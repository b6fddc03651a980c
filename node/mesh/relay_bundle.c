/* Bundle relay: BUNDLE_ANNOUNCE of each record's newest bundle, paced
 * BUNDLE_GETs, serving bundles, and what becomes of a validated bundle.
 * The bundles this node holds are cached by record (SHA-256 of the pith
 * number), so that an announce of one we hold costs no store read. */
#include "relay_int.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "log.h"

#define BUNDLE_CACHE_MAX 65536
#define BUNDLE_INFLIGHT 256   /* bundles asked of one peer, not yet validated */
#define BUNDLE_SERVE_MAX 4096 /* bundles one peer may ask for before it is answered */

static log_rl_t rl_invalid;

static void bundle_key(const char *pith, uint8_t key[32])
{
	pith_sha256(pith, strlen(pith), key);
}

/* The newest stored bundle of pith (cached), or NULL if none. */
static const bundle_info_t *bundle_local(relay_t *r, const char *pith)
{
	uint8_t key[32];
	bundle_key(pith, key);
	bundle_info_t *bi = idmap_get(r->bundles, key);
	if (bi)
		return bi;
	bundle_info_t got;
	if (store_bundle_newest(r->d.store, pith, &got.built_us, got.sha, NULL))
		return NULL;
	if (idmap_count(r->bundles) >= BUNDLE_CACHE_MAX)
		idmap_each(r->bundles, relay_free_value, NULL);
	bi = malloc(sizeof(*bi));
	if (!bi)
		return NULL;
	*bi = got;
	if (idmap_put(r->bundles, key, bi)) {
		free(bi);
		return NULL;
	}
	return bi;
}

static void bundle_remember(relay_t *r, const char *pith, int64_t built_us, const uint8_t sha[32])
{
	uint8_t key[32];
	bundle_key(pith, key);
	bundle_info_t *bi = idmap_get(r->bundles, key);
	if (!bi) {
		if (idmap_count(r->bundles) >= BUNDLE_CACHE_MAX)
			idmap_each(r->bundles, relay_free_value, NULL);
		bi = calloc(1, sizeof(*bi));
		if (!bi || idmap_put(r->bundles, key, bi)) {
			free(bi);
			return;
		}
	}
	bi->built_us = built_us;
	memcpy(bi->sha, sha, 32);
}

/* Is (built_us, sha) newer than the bundle we hold (the store's order)? */
static int bundle_is_newer(relay_t *r, const char *pith, int64_t built_us, const uint8_t sha[32])
{
	const bundle_info_t *bi = bundle_local(r, pith);
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
void relay_bundle_pump(peer_t *p)
{
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	double rate = (double)r->d.cfg->peer_msg_rate / 4.0;
	int64_t now = node_now_us();
	if (p->state != PEER_READY)
		return;
	rp->bget_tokens += rate * (double)(now - rp->bget_us) / 1e6;
	rp->bget_us = now;
	if (rp->bget_tokens > rate)
		rp->bget_tokens = rate;
	wire_msg_t get = {.type = WIRE_BUNDLE_GET};
	size_t k = 0;
	uint8_t key[32];
	while (rp->binflight < BUNDLE_INFLIGHT &&
	       rp->bget_tokens >= relay_bundle_cost(p, WIRE_BUNDLE_GET, k + 1) &&
	       idq_pop(&rp->bwanted, key)) {
		fetch_t *f = idmap_get(r->fetches, key);
		if (!f || !f->is_bundle || f->peer != p->serial || f->state != FETCH_QUEUED)
			continue;
		f->state = FETCH_REQUESTED;
		f->since_us = now;
		rp->binflight++;
		snprintf(get.u.bundles.refs[k++].pith_number, PITH_LEN, "%s", f->pith);
		if (k == r->wlim.max_refs) {
			get.u.bundles.n = k;
			rp->bget_tokens -= relay_bundle_cost(p, WIRE_BUNDLE_GET, k);
			peer_send(p, &get);
			k = 0;
			if (p->state != PEER_READY)
				return;
		}
	}
	if (k) {
		get.u.bundles.n = k;
		rp->bget_tokens -= relay_bundle_cost(p, WIRE_BUNDLE_GET, k);
		peer_send(p, &get);
	}
	if (r->d.hooks.feed) /* a bundle session held for this queue may go on */
		r->d.hooks.feed(r->d.hooks.arg, p);
}

/* Queues a fetch of pith's bundle from p; sha: the hash p announced, or
 * NULL. A fetch of that record still queued at another peer (not asked
 * yet) moves to p: a peer cannot keep a record from being fetched
 * elsewhere by announcing it first and leaving it deep in its queue.
 * Returns 1 if queued (bundle_pump asks for it). */
static int bundle_fetch_start(peer_t *p, const char *pith, const uint8_t *sha)
{
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	uint8_t key[32];
	bundle_key(pith, key);
	fetch_t *f = idmap_get(r->fetches, key);
	if (rp->bwanted.n >= rp->bwanted.max ||
	    (!f && idmap_count(r->fetches) >= (size_t)r->d.cfg->max_pending)) {
		r->d.stats->pending_dropped++;
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
		    idq_push(&rp->bwanted, key))
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
	if (idmap_put(r->fetches, key, f)) {
		free(f);
		return 0;
	}
	if (idq_push(&rp->bwanted, key)) {
		free(idmap_del(r->fetches, key));
		return 0;
	}
	return 1;
}

void relay_on_bundle_announce(peer_t *p, const wire_msg_t *m)
{
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	for (size_t i = 0; i < m->u.bundles.n; i++) {
		const wire_bundle_ref_t *ref = &m->u.bundles.refs[i];
		idcache_add(&rp->known, ref->sha);
		if (relay_refused_has(r, p, ref->sha)) {
			r->d.stats->refused_skipped++;
			continue;
		}
		if (bundle_is_newer(r, ref->pith_number, ref->built_us, ref->sha))
			bundle_fetch_start(p, ref->pith_number, ref->sha);
	}
	relay_bundle_pump(p);
}

void relay_on_bundle_get(peer_t *p, const wire_msg_t *m)
{
	relay_peer_t *rp = p->relay;
	for (size_t i = 0; i < m->u.bundles.n; i++) {
		char rec[PITH_LEN] = {0};
		if ((rp->bserve.len - rp->bserve_head) / PITH_LEN >= BUNDLE_SERVE_MAX) {
			peer_misbehaved(p, SCORE_FLOOD,
					"BUNDLE_GET flood: asked for more than it reads");
			break;
		}
		snprintf(rec, sizeof(rec), "%s", m->u.bundles.refs[i].pith_number);
		if (pith_buf_append(&rp->bserve, rec, PITH_LEN))
			break;
	}
	relay_serve(p);
}

void relay_on_bundle(peer_t *p, const wire_msg_t *m)
{
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	uint8_t key[32];
	bundle_key(m->u.bundle.pith_number, key);
	fetch_t *f = idmap_get(r->fetches, key);
	if (!f || !f->is_bundle || f->peer != p->serial || f->state != FETCH_REQUESTED) {
		r->d.stats->unrequested++;
		peer_misbehaved(p, SCORE_UNREQUESTED, "sent a bundle it was not asked for");
		return;
	}
	peer_refund_bytes(p, m->u.bundle.len); /* the reader bounds its size */
	ingest_job_t *job = ingest_job_new(INGEST_BUNDLE, m->u.bundle.json, m->u.bundle.len);
	if (!job) {
		free(idmap_del(r->fetches, key));
		if (rp->binflight)
			rp->binflight--;
		relay_bundle_pump(p);
		return;
	}
	job->has_claim = 1;
	snprintf(job->claimed_pith, sizeof(job->claimed_pith), "%s", m->u.bundle.pith_number);
	job->peer = p->serial;
	f->state = FETCH_VALIDATING;
	ingest_submit(r->d.ingest, job);
	relay_validating_add(r, p, job->len);
}

/* A record_created arrived from p in catch-up and we may hold no bundle
 * for its record: ask p for one (interim catch-up of bundles,
 * docs/wire.md; sync.c paces the calls). */
int relay_bundle_request(peer_t *p, const char *subject)
{
	relay_peer_t *rp = p->relay;
	store_record_info_t ri;
	if (p->state != PEER_READY || !rp ||
	    (store_record_get(rp->r->d.store, subject, &ri, NULL) == 0 && ri.has_bundle))
		return 0;
	if (!bundle_fetch_start(p, subject, NULL))
		return 0;
	relay_bundle_pump(p);
	return 1;
}

/* Sends the bundles p asked for while its output queue is short: what a
 * BUNDLE_GET makes this node read is bounded by what the peer reads. A
 * record without a bundle gets no answer (the asker's request times out). */
void relay_bundles_serve(peer_t *p)
{
	static pith_buf_t buf = PITH_BUF_INIT;
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	while (p->state == PEER_READY && peer_out_len(p) < SERVE_HIGH &&
	       rp->bserve_head < rp->bserve.len) {
		const char *pith = (const char *)rp->bserve.data + rp->bserve_head;
		rp->bserve_head += PITH_LEN;
		pith_buf_reset(&buf);
		if (store_bundle_get(r->d.store, pith, &buf, NULL))
			continue;
		wire_msg_t msg = {.type = WIRE_BUNDLE};
		snprintf(msg.u.bundle.pith_number, sizeof(msg.u.bundle.pith_number), "%s", pith);
		msg.u.bundle.json = buf.data;
		msg.u.bundle.len = buf.len;
		peer_send(p, &msg);
	}
	if (rp->bserve_head == rp->bserve.len) {
		pith_buf_reset(&rp->bserve);
		rp->bserve_head = 0;
	} else if (rp->bserve_head > rp->bserve.len / 2) {
		memmove(rp->bserve.data, rp->bserve.data + rp->bserve_head,
			rp->bserve.len - rp->bserve_head);
		rp->bserve.len -= rp->bserve_head;
		rp->bserve_head = 0;
	}
	if (buf.cap > (1u << 20))
		pith_buf_release(&buf);
}

static void queue_bundle_announce(relay_t *r, const char *pith, int64_t built_us,
				  const uint8_t sha[32])
{
	wire_bundle_ref_t *q = realloc(r->bundle_q, (r->nbundle_q + 1) * sizeof(*q));
	if (!q)
		return;
	r->bundle_q = q;
	wire_bundle_ref_t *ref = &q[r->nbundle_q++];
	memset(ref, 0, sizeof(*ref));
	snprintf(ref->pith_number, sizeof(ref->pith_number), "%s", pith);
	ref->built_us = built_us;
	memcpy(ref->sha, sha, 32);
	relay_announce_schedule(r);
}

/* Announces the queued bundles to the peers ps (those not known to hold
 * them), then empties the queue. */
void relay_bundle_announce_flush(relay_t *r, peer_t **ps, size_t np)
{
	for (size_t j = 0; j < np; j++) {
		peer_t *p = ps[j];
		wire_msg_t m = {.type = WIRE_BUNDLE_ANNOUNCE};
		for (size_t i = 0; i < r->nbundle_q; i++) {
			if (idcache_has(&p->relay->known, r->bundle_q[i].sha))
				continue;
			idcache_add(&p->relay->known, r->bundle_q[i].sha);
			m.u.bundles.refs[m.u.bundles.n++] = r->bundle_q[i];
			if (m.u.bundles.n == r->wlim.max_refs) {
				peer_send(p, &m);
				m.u.bundles.n = 0;
			}
		}
		if (m.u.bundles.n)
			peer_send(p, &m);
	}
	free(r->bundle_q);
	r->bundle_q = NULL;
	r->nbundle_q = 0;
}

void relay_bundle_done(relay_t *r, ingest_job_t *job, peer_t *p)
{
	uint8_t key[32];
	bundle_key(job->has_claim ? job->claimed_pith : job->subject, key);
	fetch_t *f = job->peer ? idmap_get(r->fetches, key) : NULL;
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
		from = net_peer_by_serial(r->d.net, f->peer);
		if (from && from->relay->binflight)
			from->relay->binflight--;
		free(idmap_del(r->fetches, key));
	}
	if (job->rc == 0) {
		/* the peer it came from holds the bundle: not announced back
		 * to it (a bundle fetched in catch-up was never announced by
		 * it); its events are queued with its serial, which
		 * announce_ids skips */
		if (p && p->relay)
			idcache_add(&p->relay->known, job->sha);
		if (job->bundle_outcome == STORE_BUNDLE_NEWER) {
			r->d.stats->bundles_stored++;
			bundle_remember(r, job->subject, job->built_us, job->sha);
			queue_bundle_announce(r, job->subject, job->built_us, job->sha);
			/* per item: debug (a catch-up of the registry is millions
			 * of these; the sync's and the node's progress lines say
			 * how many at info) */
			log_debug("stored bundle of %s (%zu events)", job->subject, job->n_event_ids);
		} else {
			r->d.stats->bundles_older++;
		}
		for (size_t i = 0; i < job->n_event_ids; i++) {
			idcache_add(&r->recent, job->event_ids + 32 * i);
			if (job->peer)
				relay_queue_announce(r, job->event_ids + 32 * i, job->peer);
			else
				relay_queue_announce_own(r, job->event_ids + 32 * i);
		}
		return;
	}
	r->d.stats->bundles_invalid++;
	if (job->peer) {
		log_rl(&rl_invalid, LOG_WARN, "bundle from peer %s rejected (%s): %s",
		       p ? p->addr : "(gone)", job->reason, job->msg);
		if (p && relay_reason_is_peers_fault(job->reason))
			peer_misbehaved(p, SCORE_INVALID, "sent an invalid bundle");
		/* not fetched from p again: what it holds, and what it
		 * announced (it sends the same when asked again) */
		if (p && relay_reason_is_untrusted(job->reason)) {
			if (job->has_sha)
				relay_refused_add(r, p, job->sha);
			if (has_asked)
				relay_refused_add(r, p, asked);
		}
	}
	/* another peer that announced the record while this copy was on its
	 * way may hold a different one: ask the first that still can */
	for (size_t i = 0; i < nalt; i++) {
		peer_t *q = net_peer_by_serial(r->d.net, alt[i]);
		if (!q || q->state != PEER_READY ||
		    !bundle_fetch_start(q, job->has_claim ? job->claimed_pith : job->subject, NULL))
			continue;
		fetch_t *g = idmap_get(r->fetches, key); /* the rest stay fallbacks */
		for (size_t j = i + 1; g && j < nalt; j++)
			g->alt[g->nalt++] = alt[j];
		relay_bundle_pump(q);
		break;
	}
}

