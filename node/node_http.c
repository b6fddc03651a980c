/* pithd's HTTP server (--http HOST:PORT): node/http.c on the node's event
 * loop, POST /events through the node's own ingest pipeline (so events
 * arriving over HTTP are validated, stored and announced to peers exactly
 * like gossip), and the node's counters in /metrics. */
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "log.h"
#include "metrics.h"
#include "node_int.h"

static void submit(void *arg, ingest_job_t *job)
{
	node_t *n = arg;
	ingest_submit(n->ingest, job);
}

static const char *peer_state_label(peer_state_t s)
{
	switch (s) {
	case PEER_CONNECTING: return "connecting";
	case PEER_HANDSHAKE: return "handshake";
	case PEER_READY: return "ready";
	default: return "closing";
	}
}

static const char *catchup_label(inv_state_t s)
{
	switch (s) {
	case INV_WAITING: return "listing";
	case INV_MORE: return "fetching";
	case INV_DONE: return "done";
	default: return "idle";
	}
}

static void counter(metrics_out_t *o, const char *name, const char *help, uint64_t v)
{
	metrics_out_family(o, name, METRIC_COUNTER, help);
	metrics_out_sample_u64(o, name, NULL, v);
}

static void gauge(metrics_out_t *o, const char *name, const char *help, double v)
{
	metrics_out_family(o, name, METRIC_GAUGE, help);
	metrics_out_sample(o, name, NULL, v);
}

/* The node's own counters, read at scrape time (loop thread). */
static void collect(void *arg, metrics_out_t *o)
{
	node_t *n = arg;
	const node_stats_t *s = &n->stats;
	int64_t now = node_now_us();
	char l[96];

	gauge(o, "pith_uptime_seconds", "Seconds since pithd started",
	      (double)(now - n->started_us) / 1e6);
	metrics_out_family(o, "pith_events_total", METRIC_COUNTER,
			   "Events through validation, from peers, HTTP and the control socket, by outcome");
	metrics_out_sample_u64(o, "pith_events_total", "outcome=\"stored\"", s->events_stored);
	metrics_out_sample_u64(o, "pith_events_total", "outcome=\"duplicate\"", s->events_duplicate);
	metrics_out_sample_u64(o, "pith_events_total", "outcome=\"resigned\"", s->events_resigned);
	metrics_out_sample_u64(o, "pith_events_total", "outcome=\"rejected\"", s->events_invalid);
	metrics_out_family(o, "pith_events_rejected_total", METRIC_COUNTER,
			   "Events rejected, by the check that failed");
	for (int i = 1; i < PITH_CHECK_NCHECKS + 3; i++) {
		const char *name = i < PITH_CHECK_NCHECKS ? pith_event_check_name((pith_event_check_t)i)
			: i == PITH_CHECK_NCHECKS ? "id_mismatch"
			: i == PITH_CHECK_NCHECKS + 1 ? "store" : "other";
		snprintf(l, sizeof(l), "reason=\"%s\"", name);
		metrics_out_sample_u64(o, "pith_events_rejected_total", l, s->rejected[i]);
	}
	metrics_out_family(o, "pith_bundles_total", METRIC_COUNTER, "Registry bundles, by outcome");
	metrics_out_sample_u64(o, "pith_bundles_total", "outcome=\"newer\"", s->bundles_stored);
	metrics_out_sample_u64(o, "pith_bundles_total", "outcome=\"older\"", s->bundles_older);
	metrics_out_sample_u64(o, "pith_bundles_total", "outcome=\"rejected\"", s->bundles_invalid);

	/* peers by direction and state, and catch-up progress */
	size_t by[2][4] = {{0}}, cu[4] = {0};
	for (peer_t *p = n->peers; p; p = p->next) {
		by[p->outbound ? 1 : 0][p->state < 4 ? p->state : 3]++;
		if (p->state == PEER_READY)
			cu[p->inv < 4 ? p->inv : 0]++;
	}
	metrics_out_family(o, "pith_peers", METRIC_GAUGE, "Peer connections, by direction and state");
	for (int d = 0; d < 2; d++)
		for (int st = 0; st < 4; st++) {
			snprintf(l, sizeof(l), "direction=\"%s\",state=\"%s\"", d ? "out" : "in",
				 peer_state_label((peer_state_t)st));
			metrics_out_sample_u64(o, "pith_peers", l, by[d][st]);
		}
	metrics_out_family(o, "pith_sync_peers", METRIC_GAUGE,
			   "Ready peers by catch-up phase (idle, listing, fetching, done)");
	for (int st = 0; st < 4; st++) {
		snprintf(l, sizeof(l), "phase=\"%s\"", catchup_label((inv_state_t)st));
		metrics_out_sample_u64(o, "pith_sync_peers", l, cu[st]);
	}
	gauge(o, "pith_sync_pending_fetches", "Event and bundle ids being fetched from peers",
	      (double)idmap_count(n->fetches));
	size_t active = 0;
	for (size_t i = 0; i < n->nbans; i++)
		active += n->bans[i].until_us > now;
	gauge(o, "pith_bans", "Addresses banned now", (double)active);
	counter(o, "pith_bans_total", "Bans since start", s->bans);
	metrics_out_family(o, "pith_connections_refused_total", METRIC_COUNTER,
			   "Inbound peer connections refused, by why");
	metrics_out_sample_u64(o, "pith_connections_refused_total", "why=\"banned\"", s->refused_banned);
	metrics_out_sample_u64(o, "pith_connections_refused_total", "why=\"full\"", s->refused_full);
	counter(o, "pith_peer_bytes_sent_total", "Bytes sent to peers", s->bytes_sent);
	counter(o, "pith_peer_bytes_received_total", "Bytes received from peers", s->bytes_recv);
	counter(o, "pith_peer_malformed_total", "Malformed frames from peers", s->malformed);

	ingest_stats_t is;
	ingest_stats_get(n->ingest, &is);
	metrics_out_family(o, "pith_ingest_queued", METRIC_GAUGE,
			   "Items waiting in the ingest pipeline, by stage");
	metrics_out_sample_u64(o, "pith_ingest_queued", "stage=\"validate\"", is.queued_validate);
	metrics_out_sample_u64(o, "pith_ingest_queued", "stage=\"write\"", is.queued_write);
	counter(o, "pith_ingest_batches_total", "Store batches committed by the writer",
		is.committed_batches);
	counter(o, "pith_ingest_store_errors_total", "Store batch commits that failed",
		is.store_errors);
}

int node_http_start(node_t *n, pith_err_t *err)
{
	if (!n->cfg->http[0])
		return 0;
	n->metrics = metrics_new();
	if (!n->metrics || metrics_add_collector(n->metrics, collect, n))
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	http_opts_t o;
	http_opts_default(&o);
	char name[64];
	snprintf(name, sizeof(name), "pithd %.16s", n->id_hex);
	o.listen = n->cfg->http;
	o.public_url = n->cfg->http_public_url;
	o.name = name;
	http_hooks_t hooks = {submit, n};
	int rc = http_new(n->base, n->store, n->metrics, &o, &hooks, &n->http, err);
	if (rc)
		return rc;
	log_info("http: serving on %s as %s", http_listen_str(n->http), http_base_url(n->http));
	return 0;
}

void node_http_draining(node_t *n)
{
	if (n->http)
		http_set_draining(n->http, 1);
}

void node_http_stop(node_t *n)
{
	http_free(n->http);
	metrics_free(n->metrics);
}
