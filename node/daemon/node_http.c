/* pithd's HTTP server (--http HOST:PORT): node/http/http.c on the node's event
 * loop, POST /events through the node's own ingest pipeline (so events
 * arriving over HTTP are validated, stored and announced to peers exactly
 * like gossip), and the node's counters in /metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http.h"
#include "log.h"
#include "metrics.h"
#include "node_int.h"
#include "site_feed.h"
#include "version.h"

static void submit(void *arg, ingest_job_t *job)
{
	node_t *n = arg;
	job->durable = 1; /* a POST: the client is told it is stored */
	ingest_submit(n->ingest, job);
}

/* Read-through: a view found no record for id; the follower asks the
 * upstreams. */
static int want(void *arg, const char *id, uint64_t token)
{
	node_t *n = arg;
	return n->follower ? follower_want(n->follower, id, token) : PITH_ENOTFOUND;
}

static int64_t want_retry_s(void *arg)
{
	node_t *n = arg;
	return n->follower ? follower_retry_after_s(n->follower) : -1;
}

void node_http_want_done(void *arg, uint64_t token, up_answer_t answer, const char *pith)
{
	node_t *n = arg;
	(void)pith;
	if (n->http)
		http_want_done(n->http, token, answer == UP_FOUND ? HTTP_WANT_FOUND :
					       answer == UP_NOT_FOUND ? HTTP_WANT_NOT_FOUND :
					       answer == UP_RETRY ? HTTP_WANT_RETRY : HTTP_WANT_FAILED);
}

/* What "/" shows of the node: ready peers and the upstreams followed. */
static void about(void *arg, http_about_t *out)
{
	node_t *n = arg;
	for (peer_t *p = net_peers(n->net); p; p = p->next)
		out->peers += p->state == PEER_READY;
	for (size_t i = 0; i < n->cfg->upstreams.n && out->nupstreams < 16; i++)
		out->upstreams[out->nupstreams++] = n->cfg->upstreams.items[i];
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

/* The static site's thread (site_feed.h), when site_dir is set. */
static void site_metrics(node_t *n, metrics_out_t *o)
{
	site_feed_stats_t s;
	site_feed_stats_get(n->site, &s);
	metrics_out_family(o, "pith_site_runs_total", METRIC_COUNTER,
			   "Static site runs finished, by outcome");
	metrics_out_sample_u64(o, "pith_site_runs_total", "outcome=\"ok\"", s.runs - s.failures);
	metrics_out_sample_u64(o, "pith_site_runs_total", "outcome=\"failed\"", s.failures);
	const struct {
		const char *name, *help;
		uint64_t v;
	} totals[] = {
		{"pith_site_records_rendered_total", "Records the static site rendered", s.records_total},
		{"pith_site_files_written_total", "Files the static site wrote (each .gz too)",
		 s.written_total},
		{"pith_site_files_deleted_total", "Files the static site removed", s.deleted_total},
		{"pith_site_written_bytes_total", "Bytes the static site wrote", s.bytes_total},
		{"pith_site_alias_map_changes_total",
		 "Static site runs that rewrote the alias map (nginx -s reload reads it)",
		 s.aliases_total},
	};
	for (size_t i = 0; i < sizeof(totals) / sizeof(totals[0]); i++)
		counter(o, totals[i].name, totals[i].help, totals[i].v);
	gauge(o, "pith_site_last_run_seconds", "How long the last static site run took",
	      (double)s.last_ms / 1000.0);
	gauge(o, "pith_site_cursor", "Change log sequence the static site is current to",
	      (double)s.cursor);
	uint64_t last = store_changes_last(n->store);
	gauge(o, "pith_site_lag_changes",
	      "Change log entries the store has that the static site does not have yet",
	      (double)(last > s.cursor ? last - s.cursor : 0));
}

/* The node's own counters, read at scrape time (loop thread). */
/* The state root's metrics (docs/state-root.md, "In pithd"). */
static void root_metrics(node_t *n, metrics_out_t *o)
{
	if (!n->root)
		return;
	noderoot_stats_t s;
	noderoot_stats_get(n->root, &s);
	gauge(o, "pith_state_root_records", "Records under the state root, as of its last hash",
	      (double)s.records);
	counter(o, "pith_state_root_changes_total", "Changes of the change log the state root was told of",
		s.changes);
	counter(o, "pith_state_root_signed_total", "State roots signed", s.signed_docs);
	counter(o, "pith_state_root_rebuilds_total",
		"State root trees built from the records (at start, and on a mismatch)", s.rebuilds);
	gauge(o, "pith_state_root_flush_seconds", "Time of the state root's last rehash",
	      s.flush_seconds);
	gauge(o, "pith_state_root_build_seconds", "Time of the state root's last build from the records",
	      s.build_seconds);
	gauge(o, "pith_state_root_tree_bytes", "Memory the state root's tree holds", (double)s.tree_bytes);
	/* between peers (docs/state-root.md section 14) */
	sync_root_counts_t c;
	sync_root_counts_get(n->sync, &c);
	counter(o, "pith_state_root_disagreements_total",
		"Peers whose state root differed from ours at a moment both had synced, once per pair of roots",
		c.disagreements);
	counter(o, "pith_state_root_peer_agreements_total",
		"Peers whose state root equalled ours at a moment both had synced, once per pair of roots",
		c.agreements);
	gauge(o, "pith_state_root_peers_disagreeing", "Connected peers whose last compared state root differed",
	      (double)c.peers_disagreeing);
	counter(o, "pith_state_root_peer_docs_total", "Peers' signed state root documents received and verified",
		c.received);
	counter(o, "pith_state_root_peer_refused_total",
		"Peers' state root documents refused (not verified with the key the peer authenticated)", c.bad);
	counter(o, "pith_state_root_sent_total", "Our signed state root documents sent to peers", c.sent);
}

static void collect(void *arg, metrics_out_t *o)
{
	node_t *n = arg;
	const node_stats_t *s = &n->stats;
	int64_t now = node_now_us();
	char l[96];

	gauge(o, "pith_uptime_seconds", "Seconds since pithd started",
	      (double)(now - n->started_us) / 1e6);
	/* what runs, as every exporter says it: a series of value 1 */
	pith_buf_t bl = PITH_BUF_INIT;
	pith_buf_puts(&bl, "version=\"");
	metrics_label_escape(&bl, version_project());
	pith_buf_puts(&bl, "\",commit=\"");
	metrics_label_escape(&bl, version_commit());
	pith_buf_putc(&bl, '"');
	if (!bl.oom) {
		metrics_out_family(o, "pith_build_info", METRIC_INFO,
				   "The pithd that runs: its version and the commit it was built from");
		pith_buf_putc(&bl, 0);
		metrics_out_sample(o, "pith_build_info", (const char *)bl.data, 1);
	}
	pith_buf_release(&bl);
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
	for (peer_t *p = net_peers(n->net); p; p = p->next) {
		by[p->outbound ? 1 : 0][p->state < 4 ? p->state : 3]++;
		if (p->state == PEER_READY)
			cu[p->relay && p->relay->inv < 4 ? p->relay->inv : 0]++;
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
	store_usage_t u;
	store_usage_get(n->store, &u);
	metrics_out_family(o, "pith_store_bytes", METRIC_GAUGE,
			   "What the store takes: table files and write-ahead logs on disk, memtables in memory");
	metrics_out_sample_u64(o, "pith_store_bytes", "part=\"sst\"", u.sst_bytes);
	metrics_out_sample_u64(o, "pith_store_bytes", "part=\"wal\"", u.wal_bytes);
	metrics_out_sample_u64(o, "pith_store_bytes", "part=\"memtable\"", u.memtable_bytes);
	gauge(o, "pith_store_pending_compaction_bytes",
	      "RocksDB's estimate of the bytes compaction still has to rewrite",
	      (double)u.pending_compaction_bytes);
	store_errors_t se;
	store_errors_get(n->store, &se);
	metrics_out_family(o, "pith_store_errors_total", METRIC_COUNTER,
			   "Store operations that failed with a database error "
			   "(corruption, I/O, no space), by kind");
	metrics_out_sample_u64(o, "pith_store_errors_total", "op=\"read\"", se.read_errors);
	metrics_out_sample_u64(o, "pith_store_errors_total", "op=\"write\"", se.write_errors);
	gauge(o, "pith_store_writable",
	      "1 while the store takes writes, 0 from a failed write until one succeeds",
	      se.writable ? 1 : 0);
	counter(o, "pith_events_unreadable_total",
		"Events peers asked for that are stored but could not be read (answered NOTFOUND)",
		s->events_unreadable);
	gauge(o, "pith_sync_pending_fetches", "Event and bundle ids being fetched from peers",
	      (double)relay_pending_fetches(n->relay));
	gauge(o, "pith_sync_bulk",
	      "1 while a catch-up holds the store in bulk mode (sync_bulk_min), else 0",
	      sync_is_bulk(n->sync) ? 1 : 0);
	gauge(o, "pith_store_unlogged",
	      "1 while the store commits without its write-ahead log (a catch-up in bulk mode, "
	      "sync_bulk_unlogged), else 0", store_is_unlogged(n->store) ? 1 : 0);
	size_t active = 0;
	for (size_t i = 0; i < addrbook_ban_count(n->book); i++)
		active += addrbook_ban_at(n->book, i)->until_us > now;
	gauge(o, "pith_bans_active", "Addresses banned now", (double)active);
	counter(o, "pith_bans_total", "Bans since start", s->bans);
	metrics_out_family(o, "pith_connections_refused_total", METRIC_COUNTER,
			   "Inbound peer connections refused, by why");
	metrics_out_sample_u64(o, "pith_connections_refused_total", "why=\"banned\"", s->refused_banned);
	metrics_out_sample_u64(o, "pith_connections_refused_total", "why=\"full\"", s->refused_full);
	metrics_out_sample_u64(o, "pith_connections_refused_total", "why=\"per_ip\"", s->refused_ip);
	metrics_out_sample_u64(o, "pith_connections_refused_total", "why=\"per_group\"", s->refused_group);
	counter(o, "pith_inbound_evicted_total", "Inbound peers closed to make room for a newcomer",
		s->inbound_evicted);
	counter(o, "pith_bans_evicted_total",
		"Bans dropped from a full ban table (the soonest to run out) for newer ones",
		s->bans_evicted);
	counter(o, "pith_peer_bytes_sent_total", "Bytes sent to peers", s->bytes_sent);
	counter(o, "pith_peer_bytes_received_total", "Bytes received from peers", s->bytes_recv);
	counter(o, "pith_peer_malformed_total", "Malformed frames from peers", s->malformed);

	ingest_stats_t is;
	ingest_stats_get(n->ingest, &is);
	metrics_out_family(o, "pith_ingest_queued", METRIC_GAUGE,
			   "Items waiting in the ingest pipeline, by stage");
	metrics_out_sample_u64(o, "pith_ingest_queued", "stage=\"validate\"", is.queued_validate);
	metrics_out_sample_u64(o, "pith_ingest_queued", "stage=\"write\"", is.queued_write);
	counter(o, "pith_ingest_validate_batches_total",
		"Batches the validators took (items validated / this: their batch size)",
		is.validate_batches);
	counter(o, "pith_ingest_batches_total", "Store batches committed by the writer",
		is.committed_batches);
	counter(o, "pith_ingest_states_total", "Record states recomputed by those commits",
		is.states);
	counter(o, "pith_ingest_store_errors_total", "Store batch commits that failed",
		is.store_errors);
	if (n->follower)
		follower_metrics(n->follower, o);
	if (n->site)
		site_metrics(n, o);
	root_metrics(n, o);
}

static struct mirrors *mirrors_new(void);

static int64_t wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* http_hooks_t.root: the node's state root answers. */
static int root_doc(void *arg, int what, const char *targ, pith_buf_t *body, char etag[65],
		    char *why, size_t whylen)
{
	node_t *n = arg;
	etag[0] = 0;
	if (!n->root) {
		if (node_root_building(n))
			snprintf(why, whylen, "this node is building its state root from its records at "
				 "start (%lld s so far): try again in a few seconds",
				 (long long)((node_now_us() - n->root_t0) / 1000000));
		else
			snprintf(why, whylen, "this node has no state root (it failed at start: see its log)");
		return 503;
	}
	int status = noderoot_answer(n->root, (noderoot_what_t)what, targ, wall_us(), body, etag, why,
				     whylen);
	node_root_publish(n);
	return status;
}

void node_root_publish(node_t *n)
{
	noderoot_summary_t s;
	if (!n->http || !n->root || !noderoot_summary(n->root, &s))
		return;
	http_root_t r = {.record_count = s.count};
	memcpy(r.root_sha256, s.root_hex, sizeof(r.root_sha256));
	snprintf(r.feed_cursor, sizeof(r.feed_cursor), "%s", s.cursor);
	snprintf(r.signed_at, sizeof(r.signed_at), "%s", s.signed_at);
	snprintf(r.key_id, sizeof(r.key_id), "%s", s.key_id);
	memcpy(r.public_key_hex, s.key_hex, sizeof(r.public_key_hex));
	snprintf(r.fingerprint, sizeof(r.fingerprint), "%s", s.fp);
	http_root_set(n->http, &r);
}

/* The state root as reconciliation exchanges it with peers (sync.h,
 * sync_root_hooks_t; docs/state-root.md section 14). */
static int root_latest(void *arg, const char **doc, size_t *len, uint8_t root[32], uint64_t *count,
		       uint64_t *cursor)
{
	node_t *n = arg;
	return noderoot_latest(n->root, doc, len, root, count, cursor);
}

static void root_want(void *arg)
{
	node_t *n = arg;
	noderoot_want(n->root, wall_us());
}

sync_root_hooks_t node_root_hooks(node_t *n)
{
	if (!n->root && !node_root_building(n))
		return (sync_root_hooks_t){0}; /* off: HELLO does not offer roots */
	return (sync_root_hooks_t){.arg = n, .latest = root_latest, .want = root_want};
}

void node_root_signed(void *arg)
{
	node_t *n = arg;
	sync_root_signed(n->sync);
}

void node_root_tick(node_t *n)
{
	if (!n->root && !node_root_adopt(n))
		return;
	pith_err_t e = {0};
	/* a bounded share of the log each tick: the loop is not held long */
	if (noderoot_catch_up(n->root, NODE_ROOT_CHANGES_PER_TICK, &e) < 0)
		log_warn("%s", e.msg);
	noderoot_tick(n->root, wall_us());
	node_root_publish(n);
}

int node_http_start(node_t *n, pith_err_t *err)
{
	if (!n->cfg->http[0])
		return 0;
	n->metrics = metrics_new();
	n->mirrors = mirrors_new();
	if (!n->metrics || !n->mirrors || metrics_add_collector(n->metrics, collect, n) ||
	    metrics_add_process(n->metrics))
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	http_opts_t o;
	http_opts_default(&o);
	char name[CONFIG_MIRROR_NAME_MAX + 1];
	node_mirror_name(n, name);
	o.listen = n->cfg->http;
	o.public_url = n->cfg->http_public_url;
	o.name = name;
	o.operator_name = n->cfg->mirror_operator;
	o.contact = n->cfg->mirror_contact;
	o.readthrough_ms = n->follower ? (int)n->cfg->readthrough_ms : 0;
	o.node_id = n->id_hex;
	o.network_id = n->cfg->network_id;
	o.search = n->search;
	o.render_threads = (int)n->cfg->http_render_threads;
	o.loops = (int)n->cfg->http_loops;
	o.cache_max_age = (int)n->cfg->http_max_age;
	o.max_connections = (size_t)(n->cfg->http_max_connections);
	o.timeout_s = (int)(n->cfg->http_timeout_s);
	o.request_timeout_s = (int)(n->cfg->http_request_timeout_s);
	o.max_header_bytes = (size_t)(n->cfg->http_max_header_bytes);
	o.max_body_bytes = (size_t)(n->cfg->http_max_body_bytes);
	o.max_post_events = (size_t)(n->cfg->http_max_post_events);
	o.max_inflight = (size_t)(n->cfg->http_max_inflight);
	o.max_queued_out = (size_t)(n->cfg->http_max_queued_mb << 20);
	o.costly_per_addr = (size_t)(n->cfg->http_costly_per_addr);
	if (o.render_threads < 0) {
		long nc = sysconf(_SC_NPROCESSORS_ONLN);
		o.render_threads = nc > 0 ? (int)nc : 1;
	}
	if (o.loops < 0) {
		long nc = sysconf(_SC_NPROCESSORS_ONLN);
		o.loops = nc > 0 ? (int)(nc < HTTP_LOOPS_MAX ? nc : HTTP_LOOPS_MAX) : 1;
	}
	http_hooks_t hooks = {.submit = submit, .want = want, .want_retry_s = want_retry_s,
			      .about = about, .root = root_doc, .arg = n};
	int rc = http_new(n->base, n->store, n->metrics, &o, &hooks, &n->http, err);
	if (rc)
		return rc;
	/* peers list what we announce: only a URL the operator declared
	 * public (the bound address is often loopback or behind a proxy) */
	if (n->cfg->http_public_url[0])
		snprintf(n->http_url, sizeof(n->http_url), "%s", http_base_url(n->http));
	log_info("http: serving on %s as %s", http_listen_str(n->http), http_base_url(n->http));
	return 0;
}

void node_mirror_name(const node_t *n, char out[static CONFIG_MIRROR_NAME_MAX + 1])
{
	if (n->cfg->mirror_name[0])
		memcpy(out, n->cfg->mirror_name, CONFIG_MIRROR_NAME_MAX + 1);
	else
		snprintf(out, CONFIG_MIRROR_NAME_MAX + 1, "pithd %.16s", n->id_hex);
}

void node_apply_mirror_identity(node_t *n)
{
	char name[CONFIG_MIRROR_NAME_MAX + 1];
	node_mirror_name(n, name);
	if (n->http) {
		http_set_identity(n->http, name, n->cfg->mirror_operator, n->cfg->mirror_contact);
		/* every page shows the name: a client that asks by date alone
		 * must not keep the old one */
		http_dates_restart(n->http);
	}
	if (n->site)
		site_feed_set_identity(n->site, n->cfg->mirror_name, n->cfg->mirror_operator,
				       n->cfg->mirror_contact); /* not the id: site_start */
}

void node_http_draining(node_t *n)
{
	if (n->http)
		http_set_draining(n->http, 1);
}

int node_http_stop_wait(node_t *n)
{
	return n->http && http_stop_wait(n->http);
}

void node_http_stop(node_t *n)
{
	http_free(n->http);
	metrics_free(n->metrics);
	free(n->mirrors);
	n->mirrors = NULL;
}

/* ---- peers' HTTP mirrors (/pith-mirrors.json) ---------------------------------- */

/* A peer's URL is listed while the peer is connected and for
 * MIRROR_KEEP_US after it left, so that the manifest does not flap with
 * reconnects; at most MIRRORS_SEEN_MAX departed peers are remembered (a
 * new one replaces the one that left first). */
#define MIRROR_KEEP_US (3600 * INT64_C(1000000))
#define MIRRORS_SEEN_MAX 64
#define MIRRORS_TICK_US (10 * INT64_C(1000000))

typedef struct mirror_seen {
	uint8_t pk[32];
	char url[WIRE_HTTP_URL_MAX + 1];
	int64_t left_us;
} mirror_seen_t;

/* The peers' mirrors the node lists, its own state: who left when. */
struct mirrors {
	mirror_seen_t seen[MIRRORS_SEEN_MAX];
	size_t n;
	int64_t tick_us;
};

static struct mirrors *mirrors_new(void)
{
	return calloc(1, sizeof(struct mirrors));
}

typedef struct mirror_list {
	http_mirror_t *m;
	char (*names)[32];
	size_t n, cap;
} mirror_list_t;

static void mirror_add(node_t *n, mirror_list_t *l, const uint8_t pk[32], const char *url)
{
	if (l->n == l->cap || !strcmp(url, n->http_url))
		return;
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->m[i].base_url, url))
			return; /* two nodes behind one URL: one entry */
	char hex[17];
	pith_hex_encode(pk, 8, hex);
	snprintf(l->names[l->n], sizeof(l->names[0]), "pithd %s", hex);
	l->m[l->n].name = l->names[l->n];
	l->m[l->n].base_url = url;
	l->n++;
}

static int mirror_cmp(const void *a, const void *b)
{
	return strcmp(((const http_mirror_t *)a)->base_url, ((const http_mirror_t *)b)->base_url);
}

/* Hands the current list to the server (which keeps generated_at when
 * nothing changed). Sorted by URL, so that the order does not depend on
 * the order peers connected in. */
static void mirrors_publish(node_t *n, int64_t now)
{
	mirror_list_t l = {0};
	for (peer_t *p = net_peers(n->net); p; p = p->next)
		l.cap++;
	l.cap += n->mirrors->n;
	l.m = calloc(l.cap ? l.cap : 1, sizeof(*l.m));
	l.names = calloc(l.cap ? l.cap : 1, sizeof(*l.names));
	if (!l.m || !l.names) {
		log_error("http: out of memory listing the peers' mirrors");
		goto out;
	}
	for (peer_t *p = net_peers(n->net); p; p = p->next)
		if (p->state == PEER_READY && p->http_url[0])
			mirror_add(n, &l, p->pk, p->http_url);
	for (size_t i = 0; i < n->mirrors->n; i++)
		if (now - n->mirrors->seen[i].left_us < MIRROR_KEEP_US)
			mirror_add(n, &l, n->mirrors->seen[i].pk, n->mirrors->seen[i].url);
	qsort(l.m, l.n, sizeof(*l.m), mirror_cmp);
	if (http_mirrors_set(n->http, l.m, l.n) < 0)
		log_error("http: out of memory listing the peers' mirrors");
out:
	free(l.m);
	free(l.names);
}

/* Remembers that p (which has a URL) left now. */
static void mirror_left(struct mirrors *ms, const peer_t *p, int64_t now)
{
	mirror_seen_t *e = NULL;
	for (size_t i = 0; i < ms->n && !e; i++)
		if (!memcmp(ms->seen[i].pk, p->pk, 32))
			e = &ms->seen[i];
	if (!e && ms->n < MIRRORS_SEEN_MAX)
		e = &ms->seen[ms->n++];
	if (!e) { /* full: the one that left first makes room */
		e = &ms->seen[0];
		for (size_t i = 1; i < ms->n; i++)
			if (ms->seen[i].left_us < e->left_us)
				e = &ms->seen[i];
	}
	memcpy(e->pk, p->pk, 32);
	memcpy(e->url, p->http_url, sizeof(e->url));
	e->left_us = now;
}

/* Forgets what node pk announced before it left; 1 if there was something. */
static int mirror_forget(struct mirrors *ms, const uint8_t pk[32])
{
	for (size_t i = 0; i < ms->n; i++)
		if (!memcmp(ms->seen[i].pk, pk, 32)) {
			ms->seen[i] = ms->seen[--ms->n];
			return 1;
		}
	return 0;
}

void node_http_peer_changed(node_t *n, const peer_t *p)
{
	if (!n->http || n->shutting_down)
		return;
	int64_t now = node_now_us();
	int changed = 0;
	if (p->state == PEER_READY)
		changed = mirror_forget(n->mirrors, p->pk); /* back: its new HELLO is what counts */
	else if (p->http_url[0])
		mirror_left(n->mirrors, p, now);
	if (changed || p->http_url[0])
		mirrors_publish(n, now);
}

void node_http_tick(node_t *n, int64_t now)
{
	struct mirrors *ms = n->mirrors;
	if (!n->http || !ms->n || now - ms->tick_us < MIRRORS_TICK_US)
		return;
	ms->tick_us = now;
	size_t k = 0;
	for (size_t i = 0; i < ms->n; i++)
		if (now - ms->seen[i].left_us < MIRROR_KEEP_US)
			ms->seen[k++] = ms->seen[i];
	if (k == ms->n)
		return;
	ms->n = k;
	mirrors_publish(n, now);
}
