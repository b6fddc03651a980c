/* A catch-up's progress (the log lines, what is left) and the store's
 * bulk mode for a large one: begun with the catch-up, ended when it is
 * caught up, the flush back to the log on a thread of its own
 * (sync_int.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include "sync_int.h"

#include "log.h"

/* ---- progress ----------------------------------------------------------------------- */

void sync_progress_begin(sync_t *sy, const peer_t *p, size_t need)
{
	if (sy->syncing)
		return;
	int64_t now = node_now_us();
	sy->syncing = 1;
	sy->sync_start_us = sy->last_log_us = sy->last_store_us = now;
	sy->stored_at_start = sy->stored_at_log = sy->d.stats->events_stored;
	sy->rate = 0;
	log_info("sync: catching up from peer %s (node %s): %zu ids missing so far, it holds %llu, "
		 "this node %zu",
		 p->addr, p->id_short, need, (unsigned long long)p->sync->peer_items,
		 recon_set_count(sy->set));
	/* a large catch-up (the peer's count over ours at least sync_bulk_min;
	 * 0: never) is a bulk load: fewer rewrites by compaction, at the price
	 * of slower reads until it ends (docs/store.md) */
	uint64_t ours = recon_set_count(sy->set), theirs = p->sync->peer_items;
	uint64_t min = (uint64_t)sy->d.cfg->sync_bulk_min;
	if (min && theirs > ours && theirs - ours >= min) {
		pith_err_t err = {0};
		sync_relog_join(sy); /* the last catch-up's end is over */
		if (store_bulk_begin(sy->d.store, STORE_BULK_SYNC, &err)) {
			log_warn("sync: %s (catching up with the usual compactions)", err.msg);
		} else {
			sy->bulk = 1;
			if (sy->d.cfg->sync_bulk_unlogged && store_unlogged_begin(sy->d.store, &err))
				log_warn("sync: %s (catching up through the log)", err.msg);
			else
				sy->unlogged = sy->d.cfg->sync_bulk_unlogged != 0;
			if (sy->unlogged)
				store_side_want(sy->d.store); /* into an empty store only */
			log_info("sync: store in bulk mode until caught up (%llu events behind, "
				 "sync_bulk_min %llu%s)",
				 (unsigned long long)(theirs - ours), (unsigned long long)min,
				 sy->unlogged ? "; without the log until then" : "");
		}
	}
}

/* Puts the store's usual compaction back, which RocksDB then catches up
 * with on its own threads. */
static void bulk_options_end(sync_t *sy)
{
	pith_err_t err = {0};
	if (store_bulk_end(sy->d.store, 0, &err))
		log_warn("sync: %s", err.msg);
	else
		log_info("sync: store out of bulk mode (the compactions it put off follow)");
}

/* The end of an unlogged catch-up, off the loop: flushes the store and
 * puts its log back, then its usual compaction. In this order: once the
 * level-0 triggers are back, RocksDB holds a flush until the compactions
 * they call for have made room (7.8 s after a 1M catch-up), and the
 * writer waits for the flush. */
static void *relog_main(void *arg)
{
	sync_t *sy = arg;
	pith_err_t err = {0};
	int64_t t0 = node_now_us();
	if (store_unlogged_end(sy->d.store, &err))
		log_error("sync: %s (the store commits without its log until this succeeds: "
			  "tried again in %d s)", err.msg, SYNC_RELOG_RETRY_S);
	else
		log_info("sync: store flushed and back on its log in %lld ms",
			 (long long)((node_now_us() - t0) / 1000));
	/* before the usual triggers are back: the side families are moved
	 * as they are, not compacted first */
	if (!sy->closing && store_side_active(sy->d.store) && store_side_end(sy->d.store, &err))
		log_error("sync: %s (states, claims and event ids stay in their side families: tried again "
			  "in %d s)", err.msg, SYNC_RELOG_RETRY_S);
	if (sy->relog_bulk)
		bulk_options_end(sy);
	atomic_store(&sy->relog_done, 1);
	return NULL;
}

static void relog_start(sync_t *sy, int bulk)
{
	sy->relog_bulk = bulk;
	atomic_store(&sy->relog_done, 0);
	if (!pthread_create(&sy->relog, NULL, relog_main, sy)) {
		/* its own name in per-thread figures (the move of the side
		 * families is its work: bench_sync, sync_trace.sh) */
		pthread_setname_np(sy->relog, "pith-relog");
		sy->relog_running = 1;
	} else {
		relog_main(sy);
	}
}

/* On the tick: joins the relog thread once it is done, and starts it again
 * if it failed to put the log back (a full disk, say) and no catch-up has
 * taken the store since. */
static void relog_poll(sync_t *sy, int64_t now)
{
	if (sy->relog_running && atomic_load(&sy->relog_done)) {
		sync_relog_join(sy);
		sy->relog_retry_us = now + (int64_t)SYNC_RELOG_RETRY_S * 1000000;
	}
	if (!sy->relog_running && !sy->unlogged && now >= sy->relog_retry_us &&
	    (store_is_unlogged(sy->d.store) || store_side_active(sy->d.store)))
		relog_start(sy, 0);
}

void sync_relog_join(sync_t *sy)
{
	if (sy->relog_running) {
		pthread_join(sy->relog, NULL);
		sy->relog_running = 0;
	}
}

/* The end of bulk mode: of the log's absence too, if so (relog_main). */
void sync_bulk_end(sync_t *sy)
{
	if (!sy->bulk)
		return;
	sy->bulk = 0;
	if (!sy->unlogged) {
		bulk_options_end(sy);
		return;
	}
	sy->unlogged = 0;
	relog_start(sy, 1);
}

/* What is left to fetch, as well as this node can tell: the ids sessions
 * found and have not fetched yet, or the largest gap to a peer's count. */
uint64_t sync_progress_remaining(sync_t *sy, size_t *sessions)
{
	uint64_t queued = relay_pending_fetches(sy->d.relay), gap = 0;
	size_t active = 0;
	uint64_t ours = recon_set_count(sy->set);
	for (peer_t *p = net_peers(sy->d.net); p; p = p->next) {
		if (!p->sync || p->state != PEER_READY)
			continue;
		queued += sync_backlog_len(p->sync);
		active += p->sync->s != NULL;
		if (p->sync->peer_items > ours && p->sync->peer_items - ours > gap)
			gap = p->sync->peer_items - ours;
	}
	if (sessions)
		*sessions = active;
	return queued > gap ? queued : gap;
}

void sync_progress_tick(sync_t *sy, int64_t now)
{
	relog_poll(sy, now);
	if (!sy->syncing)
		return;
	uint64_t stored = sy->d.stats->events_stored;
	if (stored != sy->stored_at_log)
		sy->last_store_us = now;
	size_t active = 0;
	uint64_t remaining = sync_progress_remaining(sy, &active);
	int backlog = 0;
	for (peer_t *p = net_peers(sy->d.net); p; p = p->next)
		backlog |= p->sync && sync_backlog_len(p->sync) > 0;
	int pending = relay_pending_fetches(sy->d.relay) > 0 && now - sy->last_store_us < SYNC_QUIET_US;
	if (!active && !backlog && !pending) {
		double s = (double)(now - sy->sync_start_us) / 1e6;
		uint64_t got = stored - sy->stored_at_start;
		log_info("sync: caught up: %llu events stored in %.1f s (%.0f/s), %zu in the set",
			 (unsigned long long)got, s, s > 0 ? (double)got / s : 0.0,
			 recon_set_count(sy->set));
		sy->syncing = 0;
		sy->rate = 0;
		sync_bulk_end(sy);
		return;
	}
	if (now - sy->last_log_us < SYNC_PROGRESS_US)
		return;
	double dt = (double)(now - sy->last_log_us) / 1e6;
	sy->rate = (double)(stored - sy->stored_at_log) / dt;
	sy->last_log_us = now;
	sy->stored_at_log = stored;
	store_counts_t c;
	store_counts_get(sy->d.store, &c);
	if (sy->rate > 0)
		log_info("sync: %llu events stored (%.0f/s), about %llu remaining (%.0f s); "
			 "the store holds %llu events in %llu records",
			 (unsigned long long)(stored - sy->stored_at_start), sy->rate,
			 (unsigned long long)remaining, (double)remaining / sy->rate,
			 (unsigned long long)c.events, (unsigned long long)c.records);
	else
		log_info("sync: %llu events stored, about %llu remaining, none in the last %.0f s; "
			 "the store holds %llu events in %llu records",
			 (unsigned long long)(stored - sy->stored_at_start),
			 (unsigned long long)remaining, dt, (unsigned long long)c.events,
			 (unsigned long long)c.records);
}

int sync_is_bulk(const sync_t *sy)
{
	/* until its end has run: the flush back to the log, then the options
	 * (the search index waits for both, and status says bulk until then) */
	return sy->bulk || sy->relog_running;
}

