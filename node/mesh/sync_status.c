/* What reconciliation reports: the status's "sync" object and a
 * session's result, as JSON (sync.h, sync_int.h). */
#include "sync_int.h"

#include <string.h>

void sync_result_json(const peer_t *p, const sync_result_t *r, pith_buf_t *b)
{
	char id[65];
	pith_hex_encode(p->pk, 32, id);
	pith_buf_printf(b, "{\"ok\":%s,\"peer\":\"%s\",\"node_id\":\"%s\",\"session\":%llu,"
			"\"kind\":\"%s\",\"role\":\"%s\"",
			r->ok ? "true" : "false", p->addr, id, (unsigned long long)r->session,
			r->kind == SYNC_BUNDLES ? "bundles" : "events",
			r->initiator ? "initiator" : "responder");
	if (!r->ok) {
		pith_buf_puts(b, ",\"error\":");
		json_write_string(b, r->error, strlen(r->error));
	}
	uint32_t msgs = r->st.rounds_in + r->st.rounds_out;
	pith_buf_printf(b,
			",\"ids_needed\":%llu,\"ids_offered\":%llu,\"bytes_sent\":%llu,"
			"\"bytes_received\":%llu,\"messages_sent\":%u,\"messages_received\":%u,"
			"\"round_trips\":%u,\"deferred\":%llu,\"duration_ms\":%lld,"
			"\"our_items\":%llu,\"peer_items\":%llu,\"version\":%u}",
			(unsigned long long)r->st.need, (unsigned long long)r->st.have,
			(unsigned long long)r->st.bytes_out, (unsigned long long)r->st.bytes_in,
			r->st.rounds_out, r->st.rounds_in, (msgs + 1) / 2,
			(unsigned long long)r->st.deferred, (long long)r->ms,
			(unsigned long long)r->our_items, (unsigned long long)r->peer_items,
			r->st.version);
}

void sync_status_json(sync_t *sy, pith_buf_t *b)
{
	size_t active = 0;
	uint64_t remaining = sync_progress_remaining(sy, &active);
	int64_t now = node_now_us();
	uint64_t stored = sy->syncing ? sy->d.stats->events_stored - sy->stored_at_start : 0;
	double elapsed = sy->syncing ? (double)(now - sy->sync_start_us) / 1e6 : 0;
	double rate = sy->rate > 0 ? sy->rate : elapsed > 0 ? (double)stored / elapsed : 0;
	pith_buf_printf(b,
			"\"sync\":{\"enabled\":%s,\"set\":\"%s\",\"set_load_ms\":%lld,"
			"\"state\":\"%s\",\"bulk\":%s,\"items\":%zu,\"skipped\":%zu,"
			"\"set_bytes\":%zu,\"filter_bytes\":%zu,\"events_stored\":%llu,\"elapsed_s\":%.1f,\"rate\":%.1f,"
			"\"remaining\":%llu,\"eta_s\":%.0f,\"sessions_active\":%zu,"
			"\"sessions_started\":%llu,\"sessions_done\":%llu,\"sessions_failed\":%llu,"
			"\"ids_needed\":%llu,\"ids_offered\":%llu,\"bytes_sent\":%llu,"
			"\"bytes_received\":%llu,\"holds\":%llu,\"credit_holds\":%llu,"
			"\"upload_holds\":%llu,\"offer_holds\":%llu,\"upload_sent\":%llu,"
			"\"upload_budget\":%lld,\"credit_cap\":%.0f,\"bundles\":%s,\"bundle_items\":%zu,"
			"\"bundle_sessions\":%llu,\"bundles_offered\":%llu,\"bundle_offers_sent\":%llu",
			sy->enabled ? "true" : "false",
			sy->set_state == SYNC_SET_READY ? "loaded"
			: sy->set_state == SYNC_SET_LOADING ? "loading" : "failed",
			(long long)(sy->set_state == SYNC_SET_LOADING
				    ? (now - sy->load_start_us) / 1000 : sy->load_ms + sy->bload_ms),
			sy->syncing ? "syncing" : "idle", sync_is_bulk(sy) ? "true" : "false",
			recon_set_count(sy->set), sy->skipped, recon_set_memory(sy->set),
			sy->have_ok ? sy->have.nlines * 64 : 0, (unsigned long long)stored, elapsed, rate,
			(unsigned long long)(sy->syncing ? remaining : 0),
			sy->syncing && rate > 0 ? (double)remaining / rate : 0.0, active,
			(unsigned long long)sy->started, (unsigned long long)sy->done,
			(unsigned long long)sy->failed, (unsigned long long)sy->ids_needed,
			(unsigned long long)sy->ids_offered, (unsigned long long)sy->bytes_sent,
			(unsigned long long)sy->bytes_recv, (unsigned long long)sy->holds,
			(unsigned long long)sy->credit_holds, (unsigned long long)sy->upload_holds,
			(unsigned long long)sy->offer_holds, (unsigned long long)sy->upload_sent,
			(long long)sy->d.cfg->sync_upload_bytes, sync_credit_cap(sy),
			sy->bundles ? "true" : "false", sy->bset ? recon_set_count(sy->bset) : 0,
			(unsigned long long)sy->bundle_sessions, (unsigned long long)sy->bundles_offered,
			(unsigned long long)sy->offers_sent);
	if (sy->set_state == SYNC_SET_FAILED) {
		pith_buf_puts(b, ",\"set_error\":");
		json_write_string(b, sy->lerr.msg, strlen(sy->lerr.msg));
	}
	pith_buf_puts(b, ",\"peers\":[");
	int first = 1;
	for (peer_t *p = net_peers(sy->d.net); p; p = p->next) {
		sync_peer_t *sp = p->sync;
		if (!sp || p->state != PEER_READY)
			continue;
		const char *state = !(p->features & WIRE_FEAT_SYNC) ? "unsupported"
				    : !sp->s ? "idle"
				    : sp->held.len ? "holding"
				    : sp->waiting ? "waiting" : "working";
		pith_buf_printf(b,
				"%s{\"addr\":\"%s\",\"state\":\"%s\",\"role\":\"%s\",\"session\":%llu,"
				"\"kind\":\"%s\",\"backlog\":%zu,\"bundle_queue\":%zu,\"bundle_offers\":%zu,"
				"\"bundle_wanted\":%zu,\"bundles_inflight\":%zu,"
				"\"peer_items\":%llu,"
				"\"sessions\":%llu,\"failures\":%llu,\"last\":",
				first ? "" : ",", p->addr, state,
				sp->s ? (sp->initiator ? "initiator" : "responder") : "",
				(unsigned long long)sp->session,
				sp->kind == SYNC_BUNDLES ? "bundles" : "events", sync_backlog_len(sp),
				(sp->bundles.len - sp->bundles_head) / PITH_LEN, sync_offers_len(sp),
				p->relay->bwanted.n, p->relay->binflight,
				(unsigned long long)sp->peer_items, (unsigned long long)sp->sessions,
				(unsigned long long)sp->failures);
		first = 0;
		if (sp->last.session)
			sync_result_json(p, &sp->last, b);
		else
			pith_buf_puts(b, "null");
		pith_buf_puts(b, ",\"last_bundles\":");
		if (sp->blast.session)
			sync_result_json(p, &sp->blast, b);
		else
			pith_buf_puts(b, "null");
		pith_buf_puts(b, "}");
	}
	pith_buf_puts(b, "]}");
}

