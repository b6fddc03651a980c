/* The protocol floor wired together (mesh.h). */
#include "mesh.h"

#include "log.h"

static void on_peer_ready(void *arg, peer_t *p)
{
	mesh_t *m = arg;
	if (m->relay && relay_peer_attach(m->relay, p)) {
		peer_close(p, 0, "out of memory");
		return;
	}
	addrbook_peer_ready(m->book, p);
	if (p->state != PEER_READY || !m->relay || !m->sync)
		return; /* a mesh of an address book alone (tests) */
	if (!sync_peer_ready(m->sync, p)) /* catch-up through reconciliation, */
		relay_inv_start(m->relay, p); /* or else the INV listing */
	sync_root_peer_ready(m->sync, p); /* our latest signed state root */
	if (m->peer_changed)
		m->peer_changed(m->arg, p);
}

static void on_peer_message(void *arg, peer_t *p, const wire_msg_t *msg)
{
	mesh_t *m = arg;
	switch (msg->type) {
	case WIRE_PEERS_REQ:
		addrbook_pex_on_request(m->book, p);
		return;
	case WIRE_PEERS:
		addrbook_pex_on_peers(m->book, p, msg);
		return;
	case WIRE_ROOT:
		sync_root_on_message(m->sync, p, msg);
		return;
	case WIRE_RECON:
	case WIRE_RECON_BUNDLES:
		if (m->sync)
			sync_on_recon(m->sync, p, msg);
		return;
	default:
		if (!relay_on_message(m->relay, p, msg)) {
			static log_rl_t rl;
			log_rl(&rl, LOG_WARN, "peer %s: unexpected %s", p->addr,
			       wire_type_name(msg->type));
		}
		return;
	}
}

static int on_peer_is_answer(void *arg, const peer_t *p, const wire_msg_t *msg)
{
	(void)arg;
	return relay_is_answer(p, msg);
}

static void on_peer_writable(void *arg, peer_t *p)
{
	mesh_t *m = arg;
	relay_peer_writable(m->relay, p);
}

static void on_peer_gone(void *arg, peer_t *p, int was_ready)
{
	mesh_t *m = arg;
	sync_peer_gone(m->sync, p);
	relay_peer_gone(m->relay, p);
	if (was_ready && m->peer_changed)
		m->peer_changed(m->arg, p);
}

static void on_peer_freed(void *arg, peer_t *p)
{
	mesh_t *m = arg;
	addrbook_peer_freed(m->book, p);
	sync_peer_free(m->sync, p);
	relay_peer_detach(m->relay, p);
}

static void on_peer_ban(void *arg, const peer_t *p, const char *what)
{
	mesh_t *m = arg;
	addrbook_ban_add(m->book, (const struct sockaddr *)&p->sa, what);
}

static void on_relay_feed(void *arg, peer_t *p)
{
	mesh_t *m = arg;
	sync_peer_feed(m->sync, p);
}

peer_events_t mesh_peer_events(mesh_t *m)
{
	return (peer_events_t){.arg = m, .ready = on_peer_ready, .message = on_peer_message,
			       .is_answer = on_peer_is_answer, .writable = on_peer_writable,
			       .gone = on_peer_gone, .freed = on_peer_freed, .ban = on_peer_ban};
}

static int on_relay_is_absent(void *arg, const uint8_t id[32])
{
	mesh_t *m = arg;
	return sync_id_is_absent(m->sync, id);
}

relay_hooks_t mesh_relay_hooks(mesh_t *m)
{
	return (relay_hooks_t){.arg = m, .feed = on_relay_feed, .is_absent = on_relay_is_absent};
}

void mesh_job_done(mesh_t *m, ingest_job_t *job)
{
	if (m->stopping)
		return;
	peer_t *p = job->peer ? net_peer_by_serial(m->net, job->peer) : NULL;
	if (p && p->state == PEER_CLOSING)
		p = NULL;
	int catchup = relay_job_done(m->relay, job, p);
	if (job->rc)
		return;
	/* a peer that brings what the node lacked is spared by inbound eviction */
	if (p && ((job->kind == INGEST_EVENT && job->outcome == STORE_STORED) ||
		  (job->kind == INGEST_BUNDLE && job->bundle_outcome == STORE_BUNDLE_NEWER)))
		p->last_useful_us = node_now_us();
	if (job->kind == INGEST_EVENT && job->outcome == STORE_STORED) {
		sync_event_stored(m->sync, job->created_us, job->id);
		/* live bundles travel by BUNDLE_ANNOUNCE; a node catching up may
		 * have missed one, so it asks */
		if (job->is_record_created && p && catchup)
			sync_bundle_wanted(m->sync, p, job->subject);
	} else if (job->kind == INGEST_BUNDLE) {
		if (job->bundle_outcome == STORE_BUNDLE_NEWER)
			sync_bundle_stored(m->sync, job->built_us, job->sha, job->bundle_replaced,
					   job->old_built_us, job->old_sha);
		for (size_t i = 0; i < job->n_event_ids; i++)
			sync_event_stored(m->sync, job->event_created_us[i], job->event_ids + 32 * i);
	}
}
