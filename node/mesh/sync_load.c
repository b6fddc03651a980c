/* Reconciliation's sets loaded at start, on a thread of their own, and
 * the updates and `sync` requests that came meanwhile (sync_int.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include "sync_int.h"

#include <event2/event.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "log.h"
#include "recon_index.h"

/* ---- the load --------------------------------------------------------------------------
 * The sets are loaded on a thread of their own, so that the node serves
 * HTTP, the control socket and gossip at once (a 10M-event store takes
 * seconds). The loader touches only its own fields (l*, load_ms) and the
 * store, and fires loaded (wake.h) when done; the loop thread joins it there
 * before reading them, so nothing is shared while it runs.
 *
 * Nothing is missed: updates are queued from sync_new on (set_state is
 * LOADING before the thread starts). A commit either precedes the load's
 * iterator, and the walk sees it, or follows it, and then its report
 * (sync_event_stored, sync_bundle_stored, on the loop thread after the
 * commit) comes after sync_new: queued if the load has not been applied
 * yet, applied to the loaded sets directly if it has. Both at once is
 * harmless: adds of a present item and removes of an absent one are
 * no-ops, and the queue replays in order, so a bundle's replacement
 * (remove the old, add the new) ends as it would have. */

/* Queues an update of the sets that came while they were loading. */
int sync_queue_update(sync_t *sy, int op, int64_t us, const uint8_t id[static 32])
{
	sync_queued_t q = {.op = op, .us = us};
	memcpy(q.id, id, 32);
	int rc = pith_buf_append(&sy->queue, &q, sizeof(q));
	if (rc)
		sy->queue_failed = 1;
	return rc;
}

static void load_applied(sync_t *sy);

static void *loader_main(void *arg)
{
	sync_t *sy = arg;
	pthread_setname_np(pthread_self(), "pith-reconload");
	int64_t t0 = node_now_us();
	sy->lrc = store_recon_index_load(sy->d.store, &sy->lset, &sy->lskipped, &sy->load_stop,
					 &sy->lerr);
	sy->load_ms = (node_now_us() - t0) / 1000;
	if (!sy->lrc && sy->bundles) {
		t0 = node_now_us();
		sy->lrc = store_recon_bundles_load(sy->d.store, &sy->lbset, &sy->lbskipped,
						   &sy->load_stop, &sy->lerr);
		sy->bload_ms = (node_now_us() - t0) / 1000;
	}
	/* tests only: holds the finished load back, so that "not loaded yet"
	 * is observable and what is stored meanwhile reaches the sets only
	 * through the queue */
	for (int64_t left = sy->load_delay_ms; left > 0 && !atomic_load(&sy->load_stop); left -= 10) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	loop_wake_fire(sy->loaded);
	return NULL;
}

/* Replays the updates queued while loading. */
static void queue_replay(sync_t *sy)
{
	const sync_queued_t *q = (const sync_queued_t *)sy->queue.data;
	size_t n = sy->queue.len / sizeof(*q);
	for (size_t i = 0; i < n; i++) {
		int rc;
		if (q[i].op == SYNC_Q_EVENT)
			rc = store_recon_index_add_raw(sy->set, q[i].us, q[i].id);
		else if (q[i].op == SYNC_Q_BUNDLE_ADD)
			rc = store_recon_index_add_raw(sy->bset, q[i].us, q[i].id);
		else
			rc = store_recon_index_remove_raw(sy->bset, q[i].us, q[i].id);
		if (rc)
			sy->queue_failed = 1;
	}
	if (sy->queue_failed)
		log_error("sync: updates of the reconciliation sets made while loading were lost "
			  "(out of memory); sessions may fetch or offer some items again until a "
			  "restart");
	pith_buf_release(&sy->queue);
}

/* The `sync` requests that came while loading: run or failed now. */
static void deferred_run(sync_t *sy)
{
	for (size_t i = 0; i < SYNC_DEFERRED_MAX; i++) {
		sync_deferred_t *dq = &sy->deferred[i];
		uint64_t serial = dq->serial;
		pith_err_t e = {0};
		if (!serial)
			continue;
		dq->serial = 0;
		if (sync_control_start(sy, dq->peer, serial, &e))
			sync_answer_fail(sy, serial, e.msg);
	}
}

/* On the loop thread, once the loader is done: the sets in, the queue
 * replayed, the sessions that waited started. */
static void load_apply(sync_t *sy)
{
	if (!sy->loader_running)
		return; /* sync_load_wait applied it already */
	pthread_join(sy->loader, NULL);
	sy->loader_running = 0;
	if (sy->lrc) {
		sy->set_state = SYNC_SET_FAILED;
		log_error("sync: cannot load the reconciliation set: %s; reconciliation stays off "
			  "until a restart (serving and gossip go on; peers' sessions are answered "
			  "busy)", sy->lerr.msg);
		recon_set_free(sy->lset);
		recon_set_free(sy->lbset);
		pith_buf_release(&sy->queue);
		deferred_run(sy);
		return;
	}
	recon_set_free(sy->set);
	sy->set = sy->lset;
	sy->lset = NULL;
	sy->skipped = sy->lskipped;
	log_info("sync: reconciliation set of %zu events loaded in %lld ms (%zu KiB)%s",
		 recon_set_count(sy->set), (long long)sy->load_ms, recon_set_memory(sy->set) >> 10,
		 sy->skipped ? "; some events lie outside the reconciled time span" : "");
	if (sy->bundles) {
		recon_set_free(sy->bset);
		sy->bset = sy->lbset;
		sy->lbset = NULL;
		sy->bskipped = sy->lbskipped;
		log_info("sync: bundle reconciliation set of %zu bundles loaded in %lld ms (%zu KiB)",
			 recon_set_count(sy->bset), (long long)sy->bload_ms,
			 recon_set_memory(sy->bset) >> 10);
	}
	queue_replay(sy);
	sy->set_state = SYNC_SET_READY;
	if (!sy->skipped && !sy->queue_failed)
		sync_have_rebuild(sy, recon_set_count(sy->set));
	load_applied(sy);
}

/* Starts what waited for the sets: the dialler's first session with each
 * peer (as at connecting), one with each peer we turned away, the
 * deferred `sync` requests. */
static void load_applied(sync_t *sy)
{
	int64_t now = node_now_us();
	if (!sy->enabled)
		return;
	for (peer_t *p = net_peers(sy->d.net); p; p = p->next) {
		sync_peer_t *sp = p->sync;
		if (!sp || p->state != PEER_READY || !(p->features & WIRE_FEAT_SYNC))
			continue;
		if (p->outbound || sp->turned_away) {
			sp->turned_away = 0;
			sp->next_round_us = now; /* the tick retries if a send is refused */
			sync_session_start(p, SYNC_EVENTS);
		}
	}
	deferred_run(sy);
}

static void loaded_cb(void *arg)
{
	load_apply(arg);
}

void sync_load_wait(sync_t *sy)
{
	load_apply(sy); /* the join waits */
}

/* Test-only: PITH_TEST_RECON_LOAD_DELAY_MS holds the finished load back
 * that long before handing it to the loop (read once, here). */
static int64_t load_delay_ms(void)
{
	return config_test_knob("PITH_TEST_RECON_LOAD_DELAY_MS", 3600000);
}

/* Starts the loader (sync_new): 0, or an error with the reason in err. */
int sync_load_start(sync_t *sy, pith_err_t *err)
{
	sy->load_delay_ms = load_delay_ms();
	sy->load_start_us = node_now_us();
	sy->loaded = loop_wake_new(sy->d.base, loaded_cb, sy);
	if (!sy->loaded)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	if (pthread_create(&sy->loader, NULL, loader_main, sy))
		return pith_err_set(err, PITH_EIO, "cannot start the reconciliation set's loader");
	sy->loader_running = 1;
	return 0;
}

/* Gives a running load up and joins it (sync_free). */
void sync_load_stop(sync_t *sy)
{
	if (sy->loader_running) {
		atomic_store(&sy->load_stop, 1); /* a 10M-event walk gives up at once */
		pthread_join(sy->loader, NULL);
		sy->loader_running = 0;
	}
	loop_wake_free(sy->loaded);
	sy->loaded = NULL;
}
