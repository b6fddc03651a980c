/* Catch-up sync: reconciliation sessions with peers (of events and of
 * bundles), the backlog of ids they find missing, paced bundle requests
 * and offers; progress in sync_progress.c, the sets' load in
 * sync_load.c, status in sync_status.c. See sync.h and docs/sync.md ("Integration with
 * the node", "Bundles").
 *
 * Sessions: RECON messages carry a session number; the dialler numbers
 * its sessions 1, 3, 5..., the acceptor 2, 4, 6..., each increasing, so
 * that the two never collide and a late message of an old session is told
 * apart and ignored. Turns alternate strictly: after sending, a node waits
 * for the peer's message; a message from the peer when it is not its turn
 * is a protocol violation. Empty data ends a session (either side, any
 * time: a limit, a timeout, or "busy"). If both sides start a session at
 * once, the dialler's goes on and the acceptor's yields. */
#include "sync_int.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "recon_index.h"

static log_rl_t rl_recon;

/* ---- "surely not stored" ---------------------------------------------------------------- */

/* The filter of the set's ids (sync_t.have) answers the relay's "do we
 * have this id?" for the ids a peer lists or announces, nearly all of
 * them new in a catch-up, without a store read: that read probes the
 * bloom filter of every level-0 file of `events`, the most of them in a
 * bulk load. It holds every id of the set; the set holds every stored
 * event unless some lie outside the reconciled span (skipped at the
 * load, or stored since) or an add failed, and then it is off and every
 * id is "maybe". */
#define HAVE_MIN_IDS (1u << 20)

static void have_off(sync_t *sy)
{
	idbloom_release(&sy->have);
	sy->have_ok = 0;
}

static int have_add_item(void *arg, const recon_item_t *it)
{
	idbloom_add(arg, it->id);
	return 0;
}

/* Builds the filter again from the set, sized for twice want ids (at
 * least HAVE_MIN_IDS): 1.25 bytes an id. The walk costs about 50 ns an
 * item on the loop thread, once each time the set doubles. */
void sync_have_rebuild(sync_t *sy, size_t want)
{
	idbloom_t nb;
	size_t ids = want < HAVE_MIN_IDS / 2 ? HAVE_MIN_IDS : 2 * want;
	if (idbloom_init(&nb, ids)) {
		log_warn("sync: out of memory for the filter of stored ids; every offered id is "
			 "looked up in the store");
		have_off(sy);
		return;
	}
	recon_set_each(sy->set, have_add_item, &nb);
	idbloom_release(&sy->have);
	sy->have = nb;
	sy->have_ok = 1;
}

int sync_id_is_absent(const sync_t *sy, const uint8_t id[static 32])
{
	return sy && sy->have_ok && !idbloom_has(&sy->have, id);
}

/* Both sides reconcile bundles. */
static int peer_bundles(const peer_t *p)
{
	return p->sync->sy->bundles && (p->features & WIRE_FEAT_SYNC) &&
	       (p->features & WIRE_FEAT_BUNDLE_SYNC);
}

static recon_set_t *set_of(const sync_t *sy, int kind)
{
	return kind == SYNC_BUNDLES ? sy->bset : sy->set;
}

static void offers_add(peer_t *p, const recon_ids_t *have);
static void bundles_offer(peer_t *p);

/* Ids found missing and not yet queued for fetching, above which our
 * next message waits: half of max_wanted (32768 by default, 1 MiB). */
static size_t backlog_hold(const peer_t *p)
{
	return p->relay->wanted.max / 2;
}

/* Drops consumed bytes from the front of a FIFO buffer once they are
 * most of it. */
static void fifo_compact(pith_buf_t *b, size_t *head)
{
	if (*head == b->len) {
		pith_buf_reset(b);
		*head = 0;
		if (b->cap > (4u << 20))
			pith_buf_release(b);
	} else if (*head > b->len / 2) {
		memmove(b->data, b->data + *head, b->len - *head);
		b->len -= *head;
		*head = 0;
	}
}

/* Is session number x one this side of p's connection would use? */
static int session_is_ours(const peer_t *p, uint64_t x)
{
	return (int)(x & 1) == (p->outbound ? 1 : 0);
}

static int64_t jittered(int64_t ms)
{
	/* 0.75x to 1.25x, so that nodes started together do not stay in step */
	int64_t span = ms / 2 > 0 ? ms / 2 : 1;
	return (ms - span / 2 + (int64_t)randombytes_uniform((uint32_t)(span > UINT32_MAX ? UINT32_MAX : span))) * 1000;
}

void sync_answer(sync_t *sy, uint64_t serial, const pith_buf_t *b)
{
	if (serial && sy->d.reply)
		sy->d.reply(sy->d.reply_arg, serial, (const char *)b->data, b->len);
}

void sync_answer_fail(sync_t *sy, uint64_t serial, const char *what)
{
	pith_buf_t b = PITH_BUF_INIT;
	pith_buf_puts(&b, "{\"ok\":false,\"error\":");
	json_write_string(&b, what, strlen(what));
	pith_buf_puts(&b, "}");
	sync_answer(sy, serial, &b);
	pith_buf_release(&b);
}

/* ---- sending ------------------------------------------------------------------------ */

static void send_recon(peer_t *p, int kind, uint64_t session, const uint8_t *data, size_t len)
{
	sync_t *sy = p->sync->sy;
	wire_msg_t m = {.type = kind == SYNC_BUNDLES ? WIRE_RECON_BUNDLES : WIRE_RECON};
	m.u.recon.session = session;
	m.u.recon.data = data;
	m.u.recon.len = len;
	m.u.recon.items = recon_set_count(set_of(sy, kind));
	sy->bytes_sent += len;
	peer_send(p, &m);
}

/* ---- ending a session ----------------------------------------------------------------- */


/* Ends p's session: records the result, answers a waiting `sync` request,
 * and starts the next session if one was asked for. error NULL: it
 * finished. tell: send the peer an empty RECON (after the session is
 * gone here, since a send may close p, which ends its session again). */
static void session_end(peer_t *p, const char *error, int tell)
{
	sync_t *sy = p->sync->sy;
	sync_peer_t *sp = p->sync;
	if (!sp || !sp->s)
		return;
	int64_t now = node_now_us();
	sync_result_t *r = sp->kind == SYNC_BUNDLES ? &sp->blast : &sp->last;
	memset(r, 0, sizeof(*r));
	r->session = sp->session;
	r->kind = sp->kind;
	r->initiator = sp->initiator;
	r->ok = error == NULL;
	if (error)
		snprintf(r->error, sizeof(r->error), "%s", error);
	recon_session_stats(sp->s, &r->st);
	r->started_us = sp->started_us;
	r->ms = (now - sp->started_us) / 1000;
	r->peer_items = sp->peer_items;
	r->our_items = recon_set_count(set_of(sy, sp->kind));
	recon_session_free(sp->s);
	/* the dialler follows each event session with a bundle session */
	sp->bundles_next = sp->initiator && sp->kind == SYNC_EVENTS && peer_bundles(p);
	pith_buf_release(&sp->held);
	sp->credit_held = 0;
	sp->waiting = 0;
	sp->sessions++;
	if (error) {
		sp->failures++;
		sy->failed++;
		log_rl(&rl_recon, LOG_INFO, "sync with peer %s (node %s): %s session %llu ended: %s",
		       p->addr, p->id_short, r->kind == SYNC_BUNDLES ? "bundle" : "event",
		       (unsigned long long)r->session, error);
	} else {
		sy->done++;
		if (r->st.need || r->st.have)
			log_info("sync with peer %s (node %s): %llu %s missing here, %llu there; "
				 "%llu bytes, %u messages, %lld ms",
				 p->addr, p->id_short, (unsigned long long)r->st.need,
				 r->kind == SYNC_BUNDLES ? "bundles" : "ids",
				 (unsigned long long)r->st.have,
				 (unsigned long long)(r->st.bytes_in + r->st.bytes_out),
				 r->st.rounds_in + r->st.rounds_out, (long long)r->ms);
		else
			log_debug("sync with peer %s: %s in step (%llu items, %llu bytes, %lld ms)",
				  p->addr, r->kind == SYNC_BUNDLES ? "bundles" : "events",
				  (unsigned long long)r->our_items,
				  (unsigned long long)(r->st.bytes_in + r->st.bytes_out),
				  (long long)r->ms);
	}
	if (sp->ctl) {
		pith_buf_t b = PITH_BUF_INIT;
		sync_result_json(p, r, &b);
		sync_answer(sy, sp->ctl, &b);
		pith_buf_release(&b);
		sp->ctl = 0;
	}
	if (p->outbound && sy->d.cfg->sync_interval_ms)
		sp->next_round_us = now + jittered(sy->d.cfg->sync_interval_ms);
	else
		sp->next_round_us = INT64_MAX;
	sync_root_session_end(p, r); /* the comparison of state roots (sync_root.c) */
	if (tell && p->state == PEER_READY)
		send_recon(p, r->kind, r->session, NULL, 0);
	if (sp->superseded) {
		/* the peer's session takes the slot now; what was to follow
		 * ours (a `sync` request) follows that one */
	} else if (sp->ctl_next && p->state == PEER_READY) {
		sp->ctl = sp->ctl_next;
		sp->ctl_next = 0;
		sync_session_start(p, SYNC_EVENTS);
	} else if (sp->bundles_next && p->state == PEER_READY && !sp->s) {
		sp->bundles_next = 0;
		sync_session_start(p, SYNC_BUNDLES);
	}
}

/* ---- the backlog and the fetcher ------------------------------------------------------ */

/* Whether p's session must hold its next message: the ids it found
 * missing (events) or the bundles it has to announce (bundles) are more
 * than the node passes on in a while. */
static int must_hold(const peer_t *p)
{
	const sync_peer_t *sp = p->sync;
	if (sp->kind == SYNC_BUNDLES)
		return sync_offers_len(sp) >= SYNC_OFFER_HOLD || p->relay->bwanted.n >= RELAY_BUNDLE_HOLD;
	return sync_backlog_len(sp) >= backlog_hold(p);
}

/* ---- answer credit ---------------------------------------------------------------------
 * What a peer can make this node send by asking, counted in the bytes
 * actually queued to its connection (the frames, as peer_send wrote them,
 * whatever the load: nothing is estimated from time or from a session's
 * own count): each answer to a session the peer started, and every
 * BUNDLE_ANNOUNCE of bundles a session found it lacks, costs its frame
 * bytes in the peer's credit. The credit starts at one full listing of
 * our sets, with the bundles' announcements (what an honest empty node
 * needs once), plus 1 MiB, refills at one such listing per sync interval,
 * and earns 4 bytes per byte of the peer's own RECON messages. The same
 * bytes come out of one budget for all peers together, sync_upload_bytes
 * per interval (sync_t.upload). An answer over either is held (deferred,
 * never a ban) until they refill; a bundle offer waits likewise. A peer
 * that restarts "list everything" in a loop gets one listing, then at
 * most four times what it sends; N such peers together get at most the
 * budget (docs/sync.md, "Limits"). */

#define SYNC_CREDIT_OFFER 88.0      /* a BUNDLE_ANNOUNCE ref on the wire, bytes, about */
#define SYNC_CREDIT_FRAME 48        /* a RECON frame's bytes besides its data, at most */

static int64_t credit_interval_us(const sync_t *sy)
{
	int64_t ms = sy->d.cfg->sync_interval_ms ? sy->d.cfg->sync_interval_ms : 600000;
	return ms * 1000;
}

double sync_credit_cap(const sync_t *sy)
{
	return 32.0 * (double)recon_set_count(sy->set) +
	       (32.0 + SYNC_CREDIT_OFFER) * (double)(sy->bset ? recon_set_count(sy->bset) : 0) +
	       (double)(1u << 20);
}

/* A bucket of cap bytes refilled at cap per interval, to now (a bucket
 * never filled, *us 0, starts full). */
static void bucket_refill(const sync_t *sy, double *v, int64_t *us, double cap, int64_t now)
{
	if (!*us) {
		*v = cap;
	} else if (*v < cap && now > *us) {
		*v += cap * (double)(now - *us) / (double)credit_interval_us(sy);
		if (*v > cap)
			*v = cap;
	}
	*us = now;
}

/* sp's credit and the budget of all peers, refilled to now. */
static void credit_refill(sync_t *sy, sync_peer_t *sp, int64_t now)
{
	bucket_refill(sy, &sp->credit, &sp->credit_us, sync_credit_cap(sy), now);
	bucket_refill(sy, &sy->upload, &sy->upload_us, (double)sy->d.cfg->sync_upload_bytes, now);
}

/* The memory of p's address, or NULL. */
static sync_credit_mem_t *credit_mem_find(sync_t *sy, const uint8_t ip[16], uint8_t len)
{
	for (size_t i = 0; i < SYNC_CREDIT_MEM; i++)
		if (sy->cmem[i].len == len && !memcmp(sy->cmem[i].ip, ip, len))
			return &sy->cmem[i];
	return NULL;
}

/* A new connection from an address whose last one spent credit starts
 * with what was left, refilled since (credit_refill). Not the host's own
 * loopback address, as for the inbound limits (addrbook_inbound.c). */
static void credit_recall(sync_t *sy, peer_t *p)
{
	uint8_t ip[16], len;
	sync_credit_mem_t *m;
	if (!peer_ip(p, ip, &len) && !addrbook_ip_is_host_loopback(ip, len) &&
	    (m = credit_mem_find(sy, ip, len))) {
		p->sync->credit = m->credit;
		p->sync->credit_us = m->us;
	}
}

/* Remembers what p's connection left of its credit, if it spent any. */
static void credit_remember(sync_t *sy, peer_t *p)
{
	sync_peer_t *sp = p->sync;
	uint8_t ip[16], len;
	if (!sp->credit_us || peer_ip(p, ip, &len) || addrbook_ip_is_host_loopback(ip, len))
		return; /* the host's loopback may be many peers (a proxy): each its own */
	credit_refill(sy, sp, node_now_us());
	sync_credit_mem_t *m = credit_mem_find(sy, ip, len);
	if (!m) {
		if (sp->credit >= sync_credit_cap(sy))
			return; /* full: a new connection starts so anyway */
		m = &sy->cmem[sy->cmem_next++ % SYNC_CREDIT_MEM];
		memcpy(m->ip, ip, len);
		m->len = len;
	}
	m->credit = sp->credit;
	m->us = sp->credit_us;
}

/* Whether len more bytes to sp must wait: 0 no, 1 over its credit, 2
 * over the budget of all peers. A full bucket lets one message larger
 * than the bucket through (a budget under max_msg_bytes still passes
 * every answer, one per refill). */
static int credit_short(sync_t *sy, sync_peer_t *sp, size_t len)
{
	credit_refill(sy, sp, node_now_us());
	if (sp->credit < (double)len && sp->credit < sync_credit_cap(sy))
		return 1;
	return sy->upload < (double)len && sy->upload < (double)sy->d.cfg->sync_upload_bytes ? 2 : 0;
}

/* Bytes sp may still be sent (credit_refill first). */
static double credit_room(const sync_t *sy, const sync_peer_t *sp)
{
	return sp->credit < sy->upload ? sp->credit : sy->upload;
}

/* Whether an answer of len data bytes must wait for credit. Our own
 * sessions (we started them) are not charged. */
static int over_credit(sync_t *sy, sync_peer_t *sp, size_t len)
{
	if (sp->initiator)
		return 0;
	return credit_short(sy, sp, len + SYNC_CREDIT_FRAME);
}

/* Charges what was queued to p since its count of bytes out was before. */
static void credit_charge(peer_t *p, uint64_t before)
{
	sync_peer_t *sp = p->sync;
	double spent = (double)(p->bytes_out - before);
	sp->credit -= spent;
	sp->sy->upload -= spent;
	sp->sy->upload_sent += p->bytes_out - before;
}

/* Sends an answer of p's session, charged unless we started it. */
static void send_answer(peer_t *p, const uint8_t *data, size_t len)
{
	sync_peer_t *sp = p->sync;
	uint64_t before = p->bytes_out;
	int charged = !sp->initiator;
	send_recon(p, sp->kind, sp->session, data, len);
	if (charged && p->sync)
		credit_charge(p, before);
}

/* Sends p's held message once the session need not hold it any more. */
static void held_release(peer_t *p)
{
	sync_peer_t *sp = p->sync;
	if (!sp->s || !sp->held.len || must_hold(p) || over_credit(sp->sy, sp, sp->held.len))
		return;
	sp->credit_held = 0;
	pith_buf_t held = sp->held;
	sp->held = (pith_buf_t)PITH_BUF_INIT;
	sp->waiting = 1;
	sp->last_us = node_now_us();
	send_answer(p, held.data, held.len);
	pith_buf_release(&held);
	if (sp->s && recon_session_is_done(sp->s))
		session_end(p, NULL, 0);
}

void sync_peer_feed(sync_t *sy, peer_t *p)
{
	sync_peer_t *sp = p->sync;
	if (!sp || p->state != PEER_READY)
		return;
	size_t max_pending = (size_t)sy->d.cfg->max_pending;
	size_t low = p->relay->wanted.max / 2 < SYNC_FEED_LOW ? p->relay->wanted.max / 2 : SYNC_FEED_LOW;
	while (sp->backlog_head < sp->backlog.len && p->relay->wanted.n < low &&
	       relay_pending_fetches(sy->d.relay) < max_pending) {
		if (ingest_in_flight(sy->d.ingest) + p->relay->wanted.n + p->relay->inflight >= SYNC_PIPELINE_MAX) {
			sy->starved = 1; /* sync_event_stored feeds again */
			break;
		}
		relay_want_catchup(p, sp->backlog.data + sp->backlog_head);
		sp->backlog_head += 32;
	}
	fifo_compact(&sp->backlog, &sp->backlog_head);
	held_release(p); /* the fetcher caught up: the session goes on */
}

/* ---- running a session ------------------------------------------------------------------- */

/* Feeds one message of the peer's to the session and answers it (or
 * holds the answer while the backlog is long). */
static void session_step(peer_t *p, const uint8_t *data, size_t len)
{
	static pith_buf_t out = PITH_BUF_INIT; /* loop thread only */
	sync_t *sy = p->sync->sy;
	sync_peer_t *sp = p->sync;
	recon_ids_t have = RECON_IDS_INIT, need = RECON_IDS_INIT;
	pith_err_t err = {0};
	int bundles = sp->kind == SYNC_BUNDLES;
	sp->waiting = 0;
	sp->last_us = node_now_us();
	sy->bytes_recv += len;
	if (!sp->initiator) {
		credit_refill(sy, sp, sp->last_us);
		sp->credit += 4.0 * (double)len;
	}
	/* bundles: the peer announces what we lack (it alone knows the record
	 * behind a hash), so only what it lacks is kept */
	int rc = recon_respond(sp->s, data, len, &out, &have, bundles ? NULL : &need, &err);
	if (rc) {
		char what[300];
		snprintf(what, sizeof(what), "bad reconciliation message: %s", err.msg);
		recon_ids_release(&have);
		recon_ids_release(&need);
		if (rc == PITH_ENOMEM) {
			session_end(p, "out of memory", 1);
			return;
		}
		session_end(p, what, 1);
		/* malformed: the peer's fault; over a limit: maybe a bigger
		 * difference than we allow in one session, so only a strike */
		peer_misbehaved(p, rc == PITH_ETOOBIG ? SCORE_FLOOD : SCORE_MALFORMED, what);
		return;
	}
	if (bundles) {
		offers_add(p, &have);
		recon_ids_release(&have);
		bundles_offer(p);
		if (p->state != PEER_READY || !sp->s)
			return; /* a send closed p: its session ended */
		goto answer;
	}
	sy->ids_needed += need.n;
	sy->ids_offered += have.n;
	/* the peer will GET them: their documents are then read by time */
	for (size_t i = 0; i < have.n; i++)
		if (have.ts[i] != RECON_TS_NONE)
			relay_hint_offered(p, have.ids[i],
					   (int64_t)(have.ts[i] - (uint64_t)STORE_RECON_TS_OFFSET));
	if (need.n) {
		sync_progress_begin(sy, p, need.n);
		/* room for all of them at once (a new node's first listing
		 * is everything) rather than rebuilt as they arrive */
		if (sy->have_ok && sy->have.count + need.n > sy->have.capacity)
			sync_have_rebuild(sy, sy->have.count + need.n);
		if (pith_buf_append(&sp->backlog, need.ids, need.n * 32))
			log_error("sync: out of memory queueing %zu ids from peer %s", need.n, p->addr);
	}
	recon_ids_release(&have);
	recon_ids_release(&need);
	relay_pump(p); /* feeds the backlog to the fetcher, sends GETs */
	if (p->state != PEER_READY || !sp->s)
		return; /* a send closed p (too slow): its session ended */
answer:
	if (!out.len) {
		session_end(p, NULL, 0);
		return;
	}
	int no_credit = over_credit(sy, sp, out.len);
	if (no_credit || must_hold(p)) {
		if (no_credit) {
			sp->credit_held = 1;
			if (no_credit == 2)
				sy->upload_holds++;
			else
				sy->credit_holds++;
		} else {
			sy->holds++;
		}
		pith_buf_reset(&sp->held);
		if (pith_buf_append(&sp->held, out.data, out.len)) {
			session_end(p, "out of memory", 1);
			return;
		}
	} else {
		sp->waiting = 1;
		send_answer(p, out.data, out.len);
		if (sp->s && recon_session_is_done(sp->s))
			session_end(p, NULL, 0);
	}
	if (out.cap > (1u << 20))
		pith_buf_release(&out);
}

static int session_new(peer_t *p, recon_role_t role, uint64_t number, int kind)
{
	sync_t *sy = p->sync->sy;
	sync_peer_t *sp = p->sync;
	pith_err_t err = {0};
	/* a session we start speaks version 2 only to a peer that does */
	recon_config_t cfg = sy->rcfg;
	if (role == RECON_INITIATOR && !(p->features & WIRE_FEAT_RECON_V2))
		cfg.version = RECON_VERSION;
	sp->s = recon_session_new(set_of(sy, kind), role, &cfg, NULL, &err);
	if (!sp->s) {
		log_error("sync: cannot start a session with peer %s: %s", p->addr,
			  err.msg[0] ? err.msg : "out of memory");
		return PITH_ENOMEM;
	}
	sp->session = number;
	sp->kind = kind;
	sp->initiator = role == RECON_INITIATOR;
	sp->waiting = 0;
	sp->started_us = sp->last_us = node_now_us();
	sy->started++;
	sy->bundle_sessions += kind == SYNC_BUNDLES;
	return 0;
}

/* Starts a session of kind with p as the initiator. */
void sync_session_start(peer_t *p, int kind)
{
	static pith_buf_t out = PITH_BUF_INIT;
	sync_t *sy = p->sync->sy;
	sync_peer_t *sp = p->sync;
	pith_err_t err = {0};
	if (sp->s || p->state != PEER_READY || sy->set_state != SYNC_SET_READY)
		return;
	if (session_new(p, RECON_INITIATOR, sp->next_own, kind)) {
		if (sp->ctl) {
			sync_answer_fail(sy, sp->ctl, "out of memory");
			sp->ctl = 0;
		}
		return;
	}
	sp->next_own += 2;
	if (recon_initiate(sp->s, &out, &err)) {
		session_end(p, err.msg, 0);
		return;
	}
	sp->waiting = 1;
	send_recon(p, kind, sp->session, out.data, out.len);
	if (out.cap > (1u << 20))
		pith_buf_release(&out);
}

void sync_on_recon(sync_t *sy, peer_t *p, const wire_msg_t *m)
{
	sync_peer_t *sp = p->sync;
	int kind = m->type == WIRE_RECON_BUNDLES ? SYNC_BUNDLES : SYNC_EVENTS;
	if (!sy->enabled || !(p->features & WIRE_FEAT_SYNC) || !sp ||
	    (kind == SYNC_BUNDLES && !peer_bundles(p))) {
		peer_misbehaved(p, SCORE_PROTOCOL, "sent RECON without the sync feature");
		peer_close(p, WIRE_BYE_PROTOCOL, "RECON without the sync feature");
		return;
	}
	uint64_t x = m->u.recon.session;
	if (kind == SYNC_EVENTS)
		sp->peer_items = m->u.recon.items;
	if (sy->set_state != SYNC_SET_READY) {
		/* the sets are loading (or failed to): no session runs yet, so
		 * every message starts one of the peer's. Answer "busy" (an
		 * empty RECON, which ends it without blame, docs/sync.md) and
		 * start one ourselves once loaded. */
		if (session_is_ours(p, x) || x <= sp->peer_last)
			return;
		sp->peer_last = x;
		if (!m->u.recon.len)
			return;
		sp->turned_away = sy->set_state == SYNC_SET_LOADING;
		send_recon(p, kind, x, NULL, 0);
		return;
	}
	if (sp->s && x == sp->session) {
		if (!m->u.recon.len) {
			session_end(p, "the peer ended it", 0);
			return;
		}
		if (kind != sp->kind) {
			peer_misbehaved(p, SCORE_PROTOCOL, "sent a RECON of the other kind");
			session_end(p, "a message of the other kind", 1);
			return;
		}
		if (!sp->waiting) {
			peer_misbehaved(p, SCORE_PROTOCOL, "sent a RECON out of turn");
			session_end(p, "a message out of turn", 1);
			return;
		}
		session_step(p, m->u.recon.data, m->u.recon.len);
		return;
	}
	if (session_is_ours(p, x) || x <= sp->peer_last)
		return; /* a late message of a session that ended */
	sp->peer_last = x;
	if (!m->u.recon.len)
		return; /* the peer ended a session we never took part in */
	if (sp->s) {
		if (sp->initiator && p->outbound) {
			/* both started one at once: the dialler's goes on */
			send_recon(p, kind, x, NULL, 0);
			return;
		}
		if (sp->initiator && sp->ctl && !sp->ctl_next) {
			sp->ctl_next = sp->ctl; /* rerun it after the peer's */
			sp->ctl = 0;
		}
		sp->superseded = 1;
		session_end(p, "superseded by a session the peer started", 0);
		sp->superseded = 0;
	}
	if (session_new(p, RECON_RESPONDER, x, kind)) {
		send_recon(p, kind, x, NULL, 0);
		return;
	}
	session_step(p, m->u.recon.data, m->u.recon.len);
}

/* ---- peers ----------------------------------------------------------------------------- */

int sync_peer_ready(sync_t *sy, peer_t *p)
{
	sync_peer_t *sp = calloc(1, sizeof(*sp));
	if (!sp) {
		log_error("sync: out of memory for peer %s", p->addr);
		return 0;
	}
	p->sync = sp;
	sp->sy = sy;
	credit_recall(sy, p);
	sp->next_own = p->outbound ? 1 : 2;
	sp->bundle_us = node_now_us();
	sp->next_round_us = INT64_MAX;
	if (!sy->enabled || sy->set_state == SYNC_SET_FAILED || !(p->features & WIRE_FEAT_SYNC))
		return 0;
	/* the dialler starts, now (or once the sets are loaded: load_applied);
	 * and again every interval */
	if (p->outbound)
		sp->next_round_us = node_now_us();
	sync_pending_attach(p);
	if (p->outbound || sp->ctl)
		sync_session_start(p, SYNC_EVENTS);
	return 1;
}

void sync_peer_gone(sync_t *sy, peer_t *p)
{
	sync_peer_t *sp = p->sync;
	if (!sp)
		return;
	session_end(p, "the connection closed", 0);
	credit_remember(sy, p);
	if (sp->ctl)
		sync_answer_fail(sy, sp->ctl, "the connection closed");
	if (sp->ctl_next)
		sync_answer_fail(sy, sp->ctl_next, "the connection closed");
	sp->ctl = sp->ctl_next = 0;
	pith_buf_release(&sp->held);
	pith_buf_release(&sp->backlog);
	sp->backlog_head = 0;
	pith_buf_release(&sp->bundles);
	sp->bundles_head = 0;
	pith_buf_release(&sp->offers);
	sp->offers_head = 0;
}

void sync_peer_free(sync_t *sy, peer_t *p)
{
	(void)sy;
	sync_peer_t *sp = p->sync;
	if (!sp)
		return;
	recon_session_free(sp->s);
	pith_buf_release(&sp->held);
	pith_buf_release(&sp->backlog);
	pith_buf_release(&sp->bundles);
	pith_buf_release(&sp->offers);
	free(sp);
	p->sync = NULL;
}

/* ---- the set -------------------------------------------------------------------------- */

void sync_event_stored(sync_t *sy, int64_t created_us, const uint8_t id[static 32])
{
	if (!sy)
		return;
	int rc = sy->set_state == SYNC_SET_LOADING ? sync_queue_update(sy, SYNC_Q_EVENT, created_us, id)
		 : sy->set_state == SYNC_SET_READY ? store_recon_index_add_raw(sy->set, created_us, id)
		 : 0;
	if (sy->have_ok) {
		/* (the set's own range check again: two compares) */
		uint64_t ts;
		if (rc || store_recon_ts(created_us, &ts)) {
			have_off(sy); /* stored, and not in the set */
		} else {
			idbloom_add(&sy->have, id);
			if (sy->have.count > sy->have.capacity)
				sync_have_rebuild(sy, recon_set_count(sy->set));
		}
	}
	if (rc && !sy->add_failed) {
		sy->add_failed = 1;
		log_error("sync: cannot add a stored event to the reconciliation set (%s); "
			  "sessions may fetch it again until a restart",
			  pith_err_name(rc));
	}
	if (sy->starved && ingest_in_flight(sy->d.ingest) + 1024 < SYNC_PIPELINE_MAX) {
		/* the validators drained what a feed held back for: go on */
		sy->starved = 0;
		for (peer_t *p = net_peers(sy->d.net); p; p = p->next)
			if (p->sync && p->state == PEER_READY && sync_backlog_len(p->sync))
				relay_pump(p);
	}
}

/* ---- bundles -------------------------------------------------------------------------- */

void sync_bundle_stored(sync_t *sy, int64_t built_us, const uint8_t sha[static 32], int replaced,
			int64_t old_us, const uint8_t old_sha[static 32])
{
	if (!sy || !sy->bundles || sy->set_state == SYNC_SET_FAILED)
		return;
	int rc = 0;
	if (sy->set_state == SYNC_SET_LOADING) {
		/* in this order at the replay: the replaced one out, this one in */
		if (replaced)
			rc = sync_queue_update(sy, SYNC_Q_BUNDLE_REMOVE, old_us, old_sha);
		if (!rc)
			rc = sync_queue_update(sy, SYNC_Q_BUNDLE_ADD, built_us, sha);
	} else {
		rc = replaced ? store_recon_index_remove_raw(sy->bset, old_us, old_sha) : 0;
		if (!rc)
			rc = store_recon_index_add_raw(sy->bset, built_us, sha);
	}
	if (rc && !sy->badd_failed) {
		sy->badd_failed = 1;
		log_error("sync: cannot update the bundle reconciliation set (%s); sessions may "
			  "offer or miss a bundle until a restart", pith_err_name(rc));
	}
}

/* Queues the hashes of our bundles that a session found p lacks. */
static void offers_add(peer_t *p, const recon_ids_t *have)
{
	sync_peer_t *sp = p->sync;
	sync_t *sy = p->sync->sy;
	size_t room = SYNC_BUNDLE_Q_MAX - sync_offers_len(sp), k = have->n < room ? have->n : room;
	sy->bundles_offered += have->n;
	/* beyond the queue's bound: best effort, the next session finds the
	 * rest again */
	if (k && pith_buf_append(&sp->offers, have->ids, k * 32))
		log_error("sync: out of memory queueing %zu bundle offers to peer %s", k, p->addr);
}

/* Announces queued bundles to p (BUNDLE_ANNOUNCE, so that p asks for the
 * ones newer than its own through the normal validated path), within the
 * token bucket bundle requests use, at what p charges per ref (a peer
 * with WIRE_FEAT_BUNDLE_BULK charges 1/16 token a ref and 1 a message,
 * an older one 17 a ref). A hash whose bundle is no longer our newest is
 * skipped. */
static void bundles_offer(peer_t *p)
{
	sync_peer_t *sp = p->sync;
	sync_t *sy = p->sync->sy;
	wire_msg_t m = {.type = WIRE_BUNDLE_ANNOUNCE};
	size_t lookups = SYNC_OFFER_LOOKUPS; /* store reads per call, stale hashes included */
	double per_ref = relay_bundle_cost(p, WIRE_BUNDLE_ANNOUNCE, 1) - 1.0;
	uint64_t before = p->bytes_out;
	if (sp->offers_head < sp->offers.len)
		credit_refill(sy, sp, node_now_us());
	/* each announcement costs its bytes in the peer's answer credit and
	 * the budget of all peers, whoever started the session */
	while (sp->offers_head < sp->offers.len &&
	       sp->bundle_tokens >= per_ref + (m.u.bundles.n ? 0.0 : 1.0) &&
	       p->state == PEER_READY && lookups--) {
		if (credit_room(sy, sp) - (double)(p->bytes_out - before) <
		    SYNC_CREDIT_OFFER * (double)(m.u.bundles.n + 1) + SYNC_CREDIT_FRAME) {
			sy->offer_holds++;
			break;
		}
		const uint8_t *sha = sp->offers.data + sp->offers_head;
		wire_bundle_ref_t *r = &m.u.bundles.refs[m.u.bundles.n];
		sp->offers_head += 32;
		if (store_bundle_ref_get(sy->d.store, sha, &r->built_us, r->pith_number, NULL))
			continue;
		memcpy(r->sha, sha, 32);
		relay_mark_known(p, sha);
		sp->bundle_tokens -= per_ref + (m.u.bundles.n ? 0.0 : 1.0);
		sy->offers_sent++;
		if (++m.u.bundles.n == sy->wlim.max_refs) {
			peer_send(p, &m);
			m.u.bundles.n = 0;
		}
	}
	if (m.u.bundles.n && p->state == PEER_READY)
		peer_send(p, &m);
	credit_charge(p, before);
	if (p->state != PEER_READY)
		return;
	fifo_compact(&sp->offers, &sp->offers_head);
	if (sp->kind == SYNC_BUNDLES)
		held_release(p);
}

void sync_bundle_wanted(sync_t *sy, peer_t *p, const char *pith)
{
	(void)sy;
	sync_peer_t *sp = p->sync;
	char rec[PITH_LEN] = {0};
	if (!sp || (sp->bundles.len - sp->bundles_head) / PITH_LEN >= SYNC_BUNDLE_Q_MAX)
		return; /* best effort: the next catch-up asks again */
	if (peer_bundles(p))
		return; /* its bundle session announces every bundle we lack */
	snprintf(rec, sizeof(rec), "%s", pith);
	pith_buf_append(&sp->bundles, rec, PITH_LEN);
}

/* Asks p for queued bundles within a quarter of the message budget a
 * peer with our settings grants (docs/pithd.md): a node catching up on
 * many records must not be banned as a flooder for it. */
static void bundles_tick(peer_t *p, int64_t now)
{
	sync_peer_t *sp = p->sync;
	double rate = (double)p->sync->sy->d.cfg->peer_msg_rate / 4.0;
	sp->bundle_tokens += rate * (double)(now - sp->bundle_us) / 1e6;
	sp->bundle_us = now;
	if (sp->bundle_tokens > rate)
		sp->bundle_tokens = rate;
	while (sp->bundles_head < sp->bundles.len && sp->bundle_tokens >= SYNC_BUNDLE_REF_COST) {
		const char *pith = (const char *)sp->bundles.data + sp->bundles_head;
		sp->bundles_head += PITH_LEN;
		if (relay_bundle_request(p, pith))
			sp->bundle_tokens -= SYNC_BUNDLE_REF_COST;
	}
	fifo_compact(&sp->bundles, &sp->bundles_head);
	bundles_offer(p);
}

/* ---- the tick -------------------------------------------------------------------------- */

void sync_tick(sync_t *sy, int64_t now)
{
	if (!sy)
		return;
	sync_pending_tick(sy, now);
	int64_t timeout = sy->d.cfg->sync_timeout_ms * 1000;
	for (peer_t *p = net_peers(sy->d.net); p; p = p->next) {
		sync_peer_t *sp = p->sync;
		if (!sp || p->state != PEER_READY)
			continue;
		bundles_tick(p, now);
		if (!sy->enabled || !(p->features & WIRE_FEAT_SYNC))
			continue;
		if (sp->credit_held)
			held_release(p); /* the credit may have refilled */
		if (sp->s && sp->waiting && now - sp->last_us > timeout) {
			char what[80];
			snprintf(what, sizeof(what), "no answer within %lld ms",
				 (long long)sy->d.cfg->sync_timeout_ms);
			session_end(p, what, 1);
		} else if (!sp->s && now >= sp->next_round_us) {
			sync_session_start(p, SYNC_EVENTS);
		}
	}
	sync_progress_tick(sy, now);
}

/* ---- setup ----------------------------------------------------------------------------- */

uint64_t sync_features(const sync_t *sy)
{
	/* the bulk bundle pace is the relay's (relay.c), with or without sync */
	uint64_t root = sy && sy->d.root.latest ? WIRE_FEAT_ROOT : 0; /* sync_root.c */
	if (!sy || !sy->enabled)
		return WIRE_FEAT_BUNDLE_BULK | root;
	return root | WIRE_FEAT_SYNC | WIRE_FEAT_BUNDLE_BULK |
	       (sy->bundles ? WIRE_FEAT_BUNDLE_SYNC : 0) |
	       (sy->recon_version >= RECON_VERSION_2 ? WIRE_FEAT_RECON_V2 : 0);
}

int sync_new(const sync_deps_t *d, sync_t **out, pith_err_t *err)
{
	*out = NULL;
	sync_t *sy = calloc(1, sizeof(*sy));
	if (!sy)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	sy->d = *d;
	sy->wlim = *net_limits(d->net);
	sy->set_state = SYNC_SET_LOADING;
	atomic_init(&sy->load_stop, 0);
	recon_config_default(&sy->rcfg);
	sy->recon_version = config_test_knob("PITH_TEST_RECON_VERSION", RECON_VERSION_MAX + 1) ==
					    RECON_VERSION
				    ? RECON_VERSION
				    : RECON_VERSION_MAX;
	sy->rcfg.version = sy->recon_version;
	/* a message and its RECON frame must fit the peer's frame limit,
	 * which is at least ours in a mesh of equal settings */
	size_t room = (size_t)sy->d.cfg->max_frame - 64;
	if (room < sy->rcfg.max_msg_bytes)
		sy->rcfg.max_msg_bytes = room;
	/* until loaded, empty sets stand in (counts, status); the probe on
	 * the empty one decides the HELLO's features, which must not change */
	sy->set = recon_set_new();
	if (!sy->set) {
		free(sy);
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	}
	pith_err_t e = {0};
	recon_session_t *probe = recon_session_new(sy->set, RECON_RESPONDER, &sy->rcfg, NULL, &e);
	sy->enabled = probe != NULL;
	recon_session_free(probe);
	if (!sy->enabled)
		log_warn("sync: reconciliation off (%s); catch-up falls back to listing ids",
			 e.msg[0] ? e.msg : "out of memory");
	sy->bundles = sy->enabled;
	if (sy->bundles && !(sy->bset = recon_set_new())) {
		sync_free(sy);
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	}
	int rc = sync_load_start(sy, err);
	if (rc) {
		sync_free(sy);
		return rc;
	}
	*out = sy;
	return 0;
}

void sync_free_(sync_t *sy)
{
	if (!sy)
		return;
	sy->closing = 1; /* a prompt stop: the next open moves the side families */
	store_side_stop(sy->d.store);
	sync_bulk_end(sy); /* the store outlives us (node_free) */
	sync_relog_join(sy);
	sync_load_stop(sy);
	sync_lookups_cancel(sy);
	recon_set_free(sy->lset);
	recon_set_free(sy->lbset);
	recon_set_free(sy->set);
	recon_set_free(sy->bset);
	idbloom_release(&sy->have);
	pith_buf_release(&sy->queue);
	free(sy);
}
