/* The interim catch-up listing (docs/wire.md, INV_REQ/INV): with a peer
 * that does not speak reconciliation, after the handshake each side pages
 * through the other's time index and treats the ids like announcements;
 * the next page is asked for only once the fetch queue has drained, so a
 * large store streams at the pace the node can validate. */
#include "relay_int.h"

#include <string.h>

#include "log.h"

void relay_inv_send_req(peer_t *p)
{
	relay_peer_t *rp = p->relay;
	wire_msg_t m = {.type = WIRE_INV_REQ};
	m.u.inv_req.after_us = rp->inv_next_us;
	memcpy(m.u.inv_req.after_id, rp->inv_next_id, 32);
	m.u.inv_req.limit = (uint32_t)rp->r->wlim.max_ids;
	rp->inv = INV_WAITING;
	peer_send(p, &m);
}

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

void relay_on_inv_req(peer_t *p, const wire_msg_t *m)
{
	static uint8_t ids[WIRE_IDS_MAX * 32];
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	inv_ctx_t c = {m->u.inv_req.limit, 0, ids, m->u.inv_req.after_us};
	pith_err_t err = {0};
	if (store_time_each_after(r->d.store, m->u.inv_req.after_us, m->u.inv_req.after_id, INT64_MAX,
				  inv_collect, &c, &err) < 0) {
		log_error("store: reading the time index: %s", err.msg);
		return;
	}
	wire_msg_t inv = {.type = WIRE_INV};
	inv.u.inv.ids = ids;
	inv.u.inv.n = c.n;
	inv.u.inv.next_us = c.last_us;
	memcpy(inv.u.inv.next_id, c.n ? ids + 32 * (c.n - 1) : m->u.inv_req.after_id, 32);
	inv.u.inv.done = c.n < c.limit;
	for (size_t i = 0; i < c.n; i++)
		idcache_add(&rp->known, ids + 32 * i);
	peer_send(p, &inv);
}

void relay_on_inv(peer_t *p, const wire_msg_t *m)
{
	relay_peer_t *rp = p->relay;
	relay_t *r = rp->r;
	if (rp->inv != INV_WAITING) {
		r->d.stats->unrequested++;
		peer_misbehaved(p, SCORE_UNREQUESTED, "sent an INV it was not asked for");
		return;
	}
	for (size_t i = 0; i < m->u.inv.n; i++)
		relay_want(p, m->u.inv.ids + 32 * i, 1);
	if (m->u.inv.done) {
		rp->inv = INV_DONE;
		log_debug("peer %s: catch-up listing complete", p->addr);
	} else {
		rp->inv = INV_MORE;
		rp->inv_next_us = m->u.inv.next_us;
		memcpy(rp->inv_next_id, m->u.inv.next_id, 32);
	}
	relay_pump(p);
}

void relay_inv_start(relay_t *r, peer_t *p)
{
	(void)r;
	relay_peer_t *rp = p->relay;
	rp->inv_next_us = INT64_MIN;
	memset(rp->inv_next_id, 0, 32);
	relay_inv_send_req(p);
}
