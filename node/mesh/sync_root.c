/* Signed state roots between peers (sync.h, docs/state-root.md section
 * 14): each node sends its latest signed root document (ROOT) to the
 * peers whose HELLO set WIRE_FEAT_ROOT, after the handshake and each time
 * it signs; a peer's document is verified with the key its connection
 * authenticated and compared with ours by hash only at a moment both
 * agree on, which reconciliation marks out: two sessions in a row that
 * found nothing to exchange either way, at least SYNC_ROOT_SETTLE_US
 * apart, with no commit here since the first, our latest document of
 * exactly that change-log position, and the peer's received after the
 * first (each side sends its latest after each such session, signing
 * first when it is stale). A difference seen at two such moments in a
 * row, the same pair of roots, is a disagreement:
 * logged once per peer per pair of roots, counted, shown in `peers`;
 * never a ban. Loop thread only. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ids.h"
#include "log.h"
#include "stateroot.h"
#include "sync_int.h"

static int has_root(const sync_t *sy)
{
	return sy && sy->d.root.latest;
}

/* Whether the change log, which the tree follows, has every commit: not
 * during a bulk catch-up (commits without the log) nor until its relog
 * ended. Until then our root is not of the events we hold: nothing is
 * sent nor compared. */
static int log_complete(const sync_t *sy)
{
	return !sy->bulk && !sy->unlogged && !sy->relog_running && !store_is_unlogged(sy->d.store);
}

static void send_latest(sync_t *sy, peer_t *p)
{
	const char *doc;
	size_t len;
	uint8_t root[32];
	uint64_t count, cursor;
	if (!has_root(sy) || !log_complete(sy) || p->state != PEER_READY ||
	    !(p->features & WIRE_FEAT_ROOT) ||
	    !sy->d.root.latest(sy->d.root.arg, &doc, &len, root, &count, &cursor) || !len ||
	    len > WIRE_ROOT_DOC_MAX)
		return;
	wire_msg_t m = {.type = WIRE_ROOT};
	m.u.root.doc = (const uint8_t *)doc;
	m.u.root.len = len;
	if (!peer_send(p, &m))
		sy->roots.sent++;
}

void sync_root_peer_ready(sync_t *sy, peer_t *p)
{
	send_latest(sy, p);
}

void sync_root_signed(sync_t *sy)
{
	if (!has_root(sy))
		return;
	for (peer_t *p = net_peers(sy->d.net); p; p = p->next)
		send_latest(sy, p); /* a send that fails marks p closing only */
}

void sync_root_on_message(sync_t *sy, peer_t *p, const wire_msg_t *m)
{
	static log_rl_t rl;
	sync_peer_t *sp = p->sync;
	if (!sy || !sp)
		return;
	pith_key_t key;
	memset(&key, 0, sizeof(key));
	memcpy(key.pk, p->pk, 32);
	pith_key_fingerprint(p->pk, key.fp);
	snprintf(key.key_id, sizeof(key.key_id), "node-%s", key.fp);
	pith_sr_doc_t d;
	pith_err_t err = {0};
	if (pith_sr_doc_verify(m->u.root.doc, m->u.root.len, &key, &d, &err)) {
		/* the reason may quote the peer's bytes (its signer's key_id):
		 * escaped, so that they never make a log line of their own */
		char why[sizeof(err.msg) * 4 + 4];
		sy->roots.bad++;
		log_rl(&rl, LOG_WARN, "peer %s (node %s): state root document refused (ignored): %s",
		       p->addr, p->id_short,
		       log_escape(err.msg, strlen(err.msg), sizeof(err.msg), why, sizeof(why)));
		return;
	}
	sy->roots.received++;
	sync_root_peer_t *rp = &sp->root;
	rp->have = 1;
	memcpy(rp->root, d.root, 32);
	rp->count = d.count;
	rp->recv_us = node_now_us();
}

const char *sync_root_peer_state(const peer_t *p)
{
	int s = p->sync ? p->sync->root.state : SYNC_ROOT_UNKNOWN;
	return s == SYNC_ROOT_AGREES ? "agrees" : s == SYNC_ROOT_DISAGREES ? "disagrees" : "unknown";
}

void sync_root_counts_get(sync_t *sy, sync_root_counts_t *out)
{
	memset(out, 0, sizeof(*out));
	if (!sy)
		return;
	*out = sy->roots;
	out->peers_disagreeing = 0;
	for (peer_t *p = net_peers(sy->d.net); p; p = p->next)
		if (p->state == PEER_READY && p->sync && p->sync->root.state == SYNC_ROOT_DISAGREES)
			out->peers_disagreeing++;
}

/* The verdict on our root and p's: 1 when made (an agreement, or a
 * difference seen at two comparable moments in a row: the first may be
 * of a peer that gained an event from elsewhere just then, or whose
 * document is one moment old; it then differs, or agrees, at the next),
 * 0 when a difference was seen for the first time. Logged and counted
 * once per pair of roots. */
static int judge(sync_t *sy, peer_t *p, const uint8_t ours[32], uint64_t count, uint64_t cursor)
{
	sync_root_peer_t *rp = &p->sync->root;
	int agree = !memcmp(ours, rp->root, 32) && count == rp->count;
	if (!agree && !(rp->cand && !memcmp(rp->cand_ours, ours, 32) &&
			!memcmp(rp->cand_theirs, rp->root, 32))) {
		rp->cand = 1;
		memcpy(rp->cand_ours, ours, 32);
		memcpy(rp->cand_theirs, rp->root, 32);
		return 0;
	}
	if (rp->judged && !memcmp(rp->ours, ours, 32) && !memcmp(rp->theirs, rp->root, 32))
		return 1;
	rp->judged = 1;
	memcpy(rp->ours, ours, 32);
	memcpy(rp->theirs, rp->root, 32);
	char oh[65], th[65];
	pith_hex_encode(ours, 32, oh);
	pith_hex_encode(rp->root, 32, th);
	oh[16] = th[16] = 0;
	if (agree) {
		sy->roots.agreements++;
		if (rp->state == SYNC_ROOT_DISAGREES)
			log_info("peer %s: state roots agree again: %s (%" PRIu64 " records)", p->addr,
				 oh, count);
		rp->state = SYNC_ROOT_AGREES;
		return 1;
	}
	sy->roots.disagreements++;
	rp->state = SYNC_ROOT_DISAGREES;
	log_warn("peer %s: state root disagreement: ours %s (%" PRIu64 " records, cursor %" PRIu64
		 "), theirs %s (%" PRIu64 " records)",
		 p->addr, oh, count, cursor, th, rp->count);
	return 1;
}

/* The dialler asks for the comparable moment to come: a confirming
 * session soon, rather than after sync_interval_ms (after the bundle
 * session, when one follows). */
static void ask_confirm(peer_t *p, int64_t now)
{
	sync_peer_t *sp = p->sync;
	sync_root_peer_t *rp = &sp->root;
	if (p->outbound && !sp->bundles_next && rp->streak && !rp->settled &&
	    rp->confirms < SYNC_ROOT_CONFIRMS && sp->next_round_us > now + SYNC_ROOT_CONFIRM_US) {
		rp->confirms++;
		sp->next_round_us = now + SYNC_ROOT_CONFIRM_US;
	}
}

void sync_root_session_end(peer_t *p, const sync_result_t *r)
{
	sync_peer_t *sp = p->sync;
	sync_t *sy = sp->sy;
	sync_root_peer_t *rp = &sp->root;
	if (!has_root(sy) || !(p->features & WIRE_FEAT_ROOT))
		return;
	int64_t now = node_now_us();
	if (r->kind == SYNC_BUNDLES) {
		/* bundles say nothing of the events states are made of */
		ask_confirm(p, now);
		return;
	}
	if (!r->ok || r->st.need || r->st.have || !log_complete(sy)) {
		rp->streak = 0; /* something to exchange, no answer, or a log behind: lag */
		return;
	}
	uint64_t seq = store_changes_last(sy->d.store);
	if (!rp->streak || seq != rp->streak_seq) {
		rp->streak = 1;
		rp->streak_us = now;
		rp->streak_seq = seq;
		rp->confirms = 0;
		rp->settled = 0;
		rp->cand = 0;
	} else {
		rp->streak++;
	}
	const char *doc;
	size_t len;
	uint8_t root[32];
	uint64_t count, cursor;
	int ours = sy->d.root.latest(sy->d.root.arg, &doc, &len, root, &count, &cursor);
	if (ours && cursor == seq)
		send_latest(sy, p); /* ours is of this moment: the peer gets it after the session */
	else
		sy->d.root.want(sy->d.root.arg); /* stale: sent to every peer once signed */
	/* the peer's document must have come after the streak's first end:
	 * the peer sends its own after each such session (and whenever it
	 * signs), and what came before may be of a moment before it synced */
	if (rp->streak >= 2 && now - rp->streak_us >= SYNC_ROOT_SETTLE_US && rp->have &&
	    rp->recv_us > rp->streak_us && ours && cursor == seq && judge(sy, p, root, count, cursor))
		rp->settled = 1;
	ask_confirm(p, now);
}
