/* Announcing (relay.h): the ids this node stored, queued and flushed to
 * the peers that do not know them, at once or, past announce_fanout for
 * an own event, lazily (relay_int.h). */
#include "relay_int.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

/* ---- announcing ------------------------------------------------------------------------------ */

void relay_announce_schedule(relay_t *r)
{
	if (evtimer_pending(r->announce_ev, NULL))
		return;
	struct timeval tv = {0, (suseconds_t)(r->d.cfg->announce_delay_ms * 1000)};
	evtimer_add(r->announce_ev, &tv);
}

/* An id and the serial of the peer it came from (0: none) */
static void queue_id(relay_t *r, pith_buf_t *q, const uint8_t id[32], uint64_t from)
{
	uint8_t e[ANNOUNCE_ENTRY];
	memcpy(e, id, 32);
	memcpy(e + 32, &from, 8);
	if (pith_buf_append(q, e, sizeof(e)))
		return;
	relay_announce_schedule(r);
}

void relay_queue_announce(relay_t *r, const uint8_t id[32], uint64_t from)
{
	queue_id(r, &r->announce_q, id, from);
}

void relay_queue_announce_own(relay_t *r, const uint8_t id[32])
{
	queue_id(r, &r->announce_own_q, id, 0);
}

/* Ready peers that can take announces now: a peer with more than half of
 * peer_out_max queued is skipped (it learns these at its next catch-up). */
static size_t announce_targets(relay_t *r, peer_t ***out)
{
	static peer_t **ps;
	static size_t cap;
	size_t np = 0;
	for (peer_t *p = net_peers(r->d.net); p; p = p->next) {
		if (p->state != PEER_READY || peer_out_len(p) > (size_t)r->d.cfg->peer_out_max / 2)
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

static void batches_send(relay_t *r, peer_t **ps, pith_buf_t *b, size_t np)
{
	for (size_t i = 0; i < np; i++) {
		size_t k = b[i].len / 32;
		if (!k)
			continue;
		relay_send_ids(ps[i], WIRE_ANNOUNCE, b[i].data, k);
		ps[i]->ids_announced_out += k;
		r->d.stats->ids_announced += k;
		if (b[i].cap > (1u << 20))
			pith_buf_release(&b[i]);
	}
}

static void lazy_schedule(relay_t *r)
{
	if (r->lazy_head >= r->lazy_q.len || evtimer_pending(r->lazy_ev, NULL))
		return;
	int64_t due;
	memcpy(&due, r->lazy_q.data + r->lazy_head, 8);
	int64_t wait = due - node_now_us();
	if (wait < 0)
		wait = 0;
	struct timeval tv = {(time_t)(wait / 1000000), (suseconds_t)(wait % 1000000)};
	evtimer_add(r->lazy_ev, &tv);
}

/* Adds each of the queued ids (ANNOUNCE_ENTRY bytes each) to the batches
 * of the peers that do not know it: all of them but the one it came from,
 * or with fanout > 0 only that many (chosen per id, so that different
 * events leave through different links) and the others to the lazy
 * queue, due at due_us. The peer an event came from is skipped by its
 * serial, not only by its known cache: that cache forgets, and a node
 * catching up from one peer announced some 6% of what it fetched back
 * to it, each id a store read there (docs/performance.md, session 26). */
static void announce_ids(relay_t *r, peer_t **ps, pith_buf_t *b, size_t np, const pith_buf_t *q,
			 size_t fanout, int64_t due_us)
{
	for (size_t off = 0; off + ANNOUNCE_ENTRY <= q->len; off += ANNOUNCE_ENTRY) {
		const uint8_t *id = q->data + off;
		uint64_t from;
		memcpy(&from, id + 32, 8);
		size_t start = np ? ((size_t)id[0] << 8 | id[1]) % np : 0, eager = 0, deferred = 0;
		for (size_t k = 0; k < np; k++) {
			size_t j = (start + k) % np;
			if (ps[j]->serial == from || idcache_has(&ps[j]->relay->known, id))
				continue;
			if (fanout && eager >= fanout) {
				deferred++;
				continue;
			}
			idcache_add(&ps[j]->relay->known, id);
			pith_buf_append(&b[j], id, 32);
			eager++;
		}
		if (deferred && !pith_buf_append(&r->lazy_q, &due_us, 8) &&
		    !pith_buf_append(&r->lazy_q, id, 32))
			r->d.stats->lazy_deferred += deferred;
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
void relay_flush_announces(relay_t *r)
{
	peer_t **ps;
	size_t np = announce_targets(r, &ps);
	pith_buf_t *b = batches_get(np);
	int64_t due = node_now_us() + r->d.cfg->lazy_announce_ms * 1000;
	if (b) {
		announce_ids(r, ps, b, np, &r->announce_q, 0, due);
		announce_ids(r, ps, b, np, &r->announce_own_q, (size_t)r->d.cfg->announce_fanout, due);
		batches_send(r, ps, b, np);
	}
	relay_bundle_announce_flush(r, ps, np);
	pith_buf_t *qs[2] = {&r->announce_q, &r->announce_own_q};
	for (int i = 0; i < 2; i++) {
		pith_buf_reset(qs[i]);
		if (qs[i]->cap > (4u << 20))
			pith_buf_release(qs[i]);
	}
	lazy_schedule(r);
}

void relay_flush_lazy(relay_t *r)
{
	peer_t **ps;
	size_t np = announce_targets(r, &ps);
	pith_buf_t *b = batches_get(np);
	int64_t now = node_now_us();
	while (b && r->lazy_head + 40 <= r->lazy_q.len) {
		int64_t due;
		memcpy(&due, r->lazy_q.data + r->lazy_head, 8);
		if (due > now)
			break;
		const uint8_t *id = r->lazy_q.data + r->lazy_head + 8;
		for (size_t j = 0; j < np; j++) {
			if (idcache_has(&ps[j]->relay->known, id))
				continue;
			idcache_add(&ps[j]->relay->known, id);
			pith_buf_append(&b[j], id, 32);
			r->d.stats->lazy_sent++;
		}
		r->lazy_head += 40;
	}
	if (b)
		batches_send(r, ps, b, np);
	/* drop what was handled once it is most of the buffer */
	if (r->lazy_head == r->lazy_q.len) {
		pith_buf_reset(&r->lazy_q);
		r->lazy_head = 0;
		if (r->lazy_q.cap > (4u << 20))
			pith_buf_release(&r->lazy_q);
	} else if (r->lazy_head > r->lazy_q.len / 2) {
		memmove(r->lazy_q.data, r->lazy_q.data + r->lazy_head, r->lazy_q.len - r->lazy_head);
		r->lazy_q.len -= r->lazy_head;
		r->lazy_head = 0;
	}
	lazy_schedule(r);
}
