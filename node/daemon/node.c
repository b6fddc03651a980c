/* Building, running and stopping the node; the tick; the status report. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "daemon.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "http.h"
#include "log.h"
#include "node_int.h"
#include "prio.h"
#include "search.h"
#include "site_feed.h"

#define TICK_MS 200
#define STOP_LINGER_MS 500 /* time for BYEs to leave at shutdown */
#define STOP_POLL_MS 20    /* then, how often to look whether HTTP owes replies */
#define NODE_KEY_FILE "node.key"
#define STORE_SUBDIR "store"
#define SEARCH_FILE "search.sqlite"

/* ---- the node key --------------------------------------------------------------------- */

/* Loads DATA/node.key, or makes it (mode 0600) on first start. */
static int identity_load(node_t *n, pith_err_t *err)
{
	char path[CONFIG_STR_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", n->cfg->data_dir, NODE_KEY_FILE);
	pith_buf_t b = PITH_BUF_INIT;
	pith_key_t k;
	int rc = 0, fd = open(path, O_RDONLY | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT) {
		if (pith_keyfile_generate("pithd-node", &b, &k, n->sk))
			return pith_err_set(err, PITH_ENOMEM, "cannot generate a node key");
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
		if (fd < 0 || write(fd, b.data, b.len) != (ssize_t)b.len || fsync(fd)) {
			rc = pith_err_set(err, PITH_EIO, "cannot write %s: %s", path, strerror(errno));
		} else {
			memcpy(n->pk, k.pk, 32);
			log_info("created node key %s", path);
		}
		if (fd >= 0)
			close(fd);
		sodium_memzero(b.data, b.len);
		pith_buf_release(&b);
		return rc;
	}
	if (fd < 0)
		return pith_err_set(err, PITH_EIO, "cannot open %s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) || (st.st_mode & 077)) {
		close(fd);
		return pith_err_set(err, PITH_EIO,
				    "%s is readable by others (mode %03o): chmod 600 it", path,
				    (unsigned)(st.st_mode & 0777));
	}
	uint8_t chunk[4096];
	ssize_t got;
	while ((got = read(fd, chunk, sizeof(chunk))) > 0 && b.len < 65536)
		pith_buf_append(&b, chunk, (size_t)got);
	close(fd);
	sodium_memzero(chunk, sizeof(chunk));
	int has = 0;
	pith_err_t e = {0};
	if (pith_keyfile_parse(b.data, b.len, &k, n->sk, &has, &e) || !has)
		rc = pith_err_set(err, PITH_EINVAL, "%s: %s", path, has ? e.msg : "no secret key in it");
	else
		memcpy(n->pk, k.pk, 32);
	if (b.data)
		sodium_memzero(b.data, b.len);
	pith_buf_release(&b);
	return rc;
}

/* ---- callbacks --------------------------------------------------------------------------- */

static void set_nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void node_on_accept(node_t *n, int fd, struct sockaddr *sa, int len)
{
	static log_rl_t rl;
	int64_t now = node_now_us();
	char a[64];
	if (n->shutting_down) {
		close(fd);
		return;
	}
	if (addrbook_is_banned(n->book, sa, now)) {
		n->stats.refused_banned++;
		addr_format(sa, a);
		log_rl(&rl, LOG_INFO, "refused %s: banned", a);
		close(fd);
		return;
	}
	/* limits per IP and per group; when full, another inbound peer may be
	 * closed to make room (addrbook_inbound.c) */
	int verdict = addrbook_inbound_admit(n->book, sa, now);
	if (verdict != INBOUND_OK) {
		static const char *const why[] = {
			[INBOUND_PER_IP] = "inbound_per_ip connections from its address already",
			[INBOUND_PER_GROUP] = "inbound_per_group connections from its network group already",
			[INBOUND_FULL] = "inbound slots full, every peer protected"};
		if (verdict == INBOUND_PER_IP)
			n->stats.refused_ip++;
		else if (verdict == INBOUND_PER_GROUP)
			n->stats.refused_group++;
		else
			n->stats.refused_full++;
		addr_format(sa, a);
		log_rl(&rl, LOG_INFO, "refused %s: %s", a, why[verdict]);
		close(fd);
		return;
	}
	set_nodelay(fd);
	if (peer_accept(n->net, fd, sa, (socklen_t)len))
		log_error("cannot set up an inbound peer (out of memory)");
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	(void)l;
	node_on_accept(arg, fd, sa, len);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	(void)l;
	(void)arg;
	static log_rl_t rl;
	int e = EVUTIL_SOCKET_ERROR();
	/* EMFILE and friends: keep listening, say so now and then */
	log_rl(&rl, LOG_ERROR, "accept failed: %s", evutil_socket_error_to_string(e));
}

/* While the store does not take writes (a full disk), an empty write
 * every STORE_PROBE_US tells when it does again: RocksDB recovers by
 * itself once space is free (docs/store.md, "Failures"). Its log sync
 * is on the loop thread, but only while the store is failing. */
#define STORE_PROBE_US 1000000

static void store_probe_tick(node_t *n, int64_t now)
{
	store_errors_t se;
	store_errors_get(n->store, &se);
	if (se.writable) {
		n->store_down_us = 0;
		return;
	}
	if (!n->store_down_us)
		n->store_down_us = now;
	if (now - n->store_probe_us < STORE_PROBE_US)
		return;
	n->store_probe_us = now;
	pith_err_t err = {0};
	if (!store_write_probe(n->store, &err))
		log_warn("store: writes work again, after %.1f s of failing",
			 (double)(now - n->store_down_us) / 1e6);
}

/* One info line a minute while the node stores anything, whatever brings
 * it (gossip, catch-up, the follower, clients): the per-item lines are
 * debug (docs/operations.md, "Logs"). */
#define PROGRESS_US 60000000

static void progress_tick(node_t *n, int64_t now)
{
	if (now - n->progress_us < PROGRESS_US)
		return;
	uint64_t ev = n->stats.events_stored - n->progress_events;
	uint64_t bu = n->stats.bundles_stored - n->progress_bundles;
	double s = (double)(now - n->progress_us) / 1e6;
	n->progress_us = now;
	n->progress_events = n->stats.events_stored;
	n->progress_bundles = n->stats.bundles_stored;
	if (!ev && !bu)
		return;
	store_counts_t c;
	store_counts_get(n->store, &c);
	log_info("stored %llu events (%.0f/s) and %llu bundles in the last %.0f s; the store holds "
		 "%llu events in %llu records", (unsigned long long)ev, (double)ev / s,
		 (unsigned long long)bu, s, (unsigned long long)c.events,
		 (unsigned long long)c.records);
}

static void node_tick(node_t *n)
{
	int64_t now = node_now_us();
	net_tick(n->net, now);
	store_probe_tick(n, now);
	if (n->shutting_down)
		return;
	relay_tick(n->relay, now);
	sync_tick(n->sync, now);
	/* the index sits out a bulk catch-up, then takes it in one pass */
	search_hold(n->search, sync_is_bulk(n->sync));
	addrbook_ban_prune(n->book, now);
	node_trust_reap(n, 0);
	progress_tick(n, now);
	addrbook_save_tick(n->book, now);
	addrbook_maintain(n->book, now);
	addrbook_pex_tick(n->book, now);
	node_http_tick(n, now);
	node_root_tick(n);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	node_tick(arg);
}

static void stop_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	node_t *n = arg;
	/* the HTTP side answers the requests it read first (bounded:
	 * http_stop_wait) */
	if (node_http_stop_wait(n)) {
		struct timeval tv = {0, STOP_POLL_MS * 1000};
		evtimer_add(n->stop_ev, &tv);
		return;
	}
	event_base_loopexit(n->base, NULL);
}

/* First signal: stop accepting, say goodbye, leave the loop shortly,
 * once HTTP answered what it accepted. A second one leaves at once. */
static void node_stop(node_t *n, int sig)
{
	if (n->shutting_down) {
		log_info("signal %d again: stopping now", sig);
		event_base_loopbreak(n->base);
		return;
	}
	n->shutting_down = n->mesh.stopping = 1;
	atomic_store(&n->warm_stop, 1);
	net_set_shutting_down(n->net);
	log_info("signal %d: shutting down", sig);
	if (n->listener) {
		evconnlistener_free(n->listener);
		n->listener = NULL;
	}
	control_free(n->control);
	node_http_draining(n);
	for (peer_t *p = net_peers(n->net); p; p = p->next)
		peer_close(p, WIRE_BYE_SHUTDOWN, "node shutting down");
	struct timeval tv = {0, STOP_LINGER_MS * 1000};
	evtimer_add(n->stop_ev, &tv);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	node_t *n = arg;
	if (sig == SIGHUP) {
		if (!n->shutting_down)
			node_reload(n);
		return;
	}
	node_stop(n, (int)sig);
}

void node_set_config_reader(node_t *n, node_config_read_fn fn, void *arg)
{
	n->reread = fn;
	n->reread_arg = arg;
}

/* ---- the wiring: what each floor tells the ones above ------------------------------ */

/* The HTTP side lists the mirrors of the peers (mesh_t's peer_changed). */
static void on_peer_changed(void *arg, const peer_t *p)
{
	node_http_peer_changed(arg, p);
}

/* Answers to control requests that waited (`sync`, `connect` of a name). */
static void on_control_reply(void *arg, uint64_t serial, const char *json, size_t len)
{
	node_t *n = arg;
	if (n->control)
		control_reply(n->control, serial, json, len);
}

/* An ingest job is back on the loop: the protocol's part (mesh.c: the
 * relay's bookkeeping, the reconciliation sets), then whoever submitted
 * it (HTTP, control). */
static void on_ingest_done(void *arg, ingest_job_t *job)
{
	node_t *n = arg;
	mesh_job_done(&n->mesh, job);
	follower_job_done(n->follower, job);
	if (n->http)
		http_job_done(n->http, job);
	search_kick(n->search); /* something may have changed: index it now */
	site_feed_kick(n->site); /* and render it, once the interval allows */
	if (job->ctl && n->control)
		control_job_done(n->control, job);
	ingest_job_free(job);
}

/* ---- setup ----------------------------------------------------------------------------------- */

/* The state root (node_root.h): built from the records at start; a
 * failure costs the root's routes only (they answer 503). A store of
 * more than state_root_thread_records records (docs/pithd.md) is built on
 * a thread of its own, 13 to 18 s at 1M records on the host of
 * docs/performance.md, so that the node serves and syncs meanwhile; the
 * root's routes answer 503 with the reason until the tick adopts the
 * tree (node_root_adopt). Smaller ones are built here, before the node
 * listens: a few hundred ms at most. */
static noderoot_opts_t root_opts(node_t *n)
{
	return (noderoot_opts_t){.interval_s = (unsigned)n->cfg->state_root_interval,
				 .history = (unsigned)n->cfg->state_root_history,
				 .on_signed = node_root_signed, .arg = n};
}

static void root_built_log(node_t *n)
{
	noderoot_stats_t s;
	noderoot_stats_get(n->root, &s);
	log_info("state root: %llu records in %lld ms",
		 (unsigned long long)s.records, (long long)((node_now_us() - n->root_t0) / 1000));
}

static void *root_main(void *arg)
{
	node_t *n = arg;
	pthread_setname_np(pthread_self(), "pith-root");
	noderoot_opts_t o = root_opts(n);
	pith_err_t e = {0};
	noderoot_t *r = noderoot_new(n->store, n->pk, n->sk, &o, &e);
	if (!r)
		snprintf(n->root_err, sizeof(n->root_err), "%s", e.msg);
	atomic_store(&n->root_built, r);
	atomic_store(&n->root_done, 1);
	return NULL;
}

static void root_start(node_t *n)
{
	n->root_t0 = node_now_us();
	atomic_init(&n->root_built, NULL);
	atomic_init(&n->root_done, 0);
	store_counts_t sc;
	store_counts_get(n->store, &sc);
	uint64_t thr = (uint64_t)n->cfg->state_root_thread_records;
	if (!thr || sc.records > thr) {
		if (!pthread_create(&n->root_th, NULL, root_main, n)) {
			n->root_running = 1;
			log_info("state root: building the tree of %llu records on a thread of its own; "
				 "/api/root answers 503 until it is done",
				 (unsigned long long)sc.records);
			return;
		}
		log_warn("cannot start the state root's build thread: building it here");
	}
	noderoot_opts_t o = root_opts(n);
	pith_err_t e = {0};
	n->root = noderoot_new(n->store, n->pk, n->sk, &o, &e);
	if (!n->root) {
		log_warn("state root: %s: /api/root is off", e.msg);
		return;
	}
	root_built_log(n);
}

int node_root_adopt(node_t *n)
{
	if (n->root || !n->root_running || !atomic_load(&n->root_done))
		return 0;
	pthread_join(n->root_th, NULL);
	n->root_running = 0;
	n->root = atomic_load(&n->root_built);
	if (!n->root) {
		log_warn("state root: %s: /api/root is off", n->root_err);
		return 0;
	}
	root_built_log(n);
	return 1;
}

int node_root_building(const node_t *n)
{
	return n->root_running;
}

/* The static site's thread, when site_dir is set (site_feed.h): its
 * first run starts now and renders what the tree's cursor lacks. */
static int site_start(node_t *n, pith_err_t *err)
{
	const node_config_t *c = n->cfg;
	if (!c->site_dir[0])
		return 0;
	/* the tree is the same bytes whoever writes it (docs/site.md): the
	 * configured name, or what pithctl export --site calls it without
	 * one ("pith-mirror"), never the node's id */
	site_feed_opts_t o = {.dir = c->site_dir, .base_url = c->site_base_url, .name = c->mirror_name,
			      .operator_name = c->mirror_operator, .contact = c->mirror_contact,
			      .search_url = c->site_search_url,
			      .interval_ms = (int)c->site_interval_ms, .nice = (int)c->worker_nice};
	int rc = site_feed_start(n->store, &o, &n->site, err);
	if (!rc)
		log_info("site: keeping %s current (at most every %lld ms)", c->site_dir,
			 (long long)c->site_interval_ms);
	return rc;
}

int node_follower_start(node_t *n, const node_config_t *c, uint64_t first_serial,
			follower_t **out, pith_err_t *err)
{
	*out = NULL;
	if (!c->upstreams.n) {
		if (c->follow[0])
			return pith_err_set(err, PITH_EINVAL,
					    "follow: %s names records to follow, but no upstream is set "
					    "(add --upstream URL, e.g. https://pith.science)", c->follow);
		return 0;
	}
	const char *urls[CONFIG_LIST_MAX];
	for (size_t i = 0; i < c->upstreams.n; i++)
		urls[i] = c->upstreams.items[i];
	const char *origins[CONFIG_LIST_MAX];
	for (size_t i = 0; i < c->upstream_origins.n; i++)
		origins[i] = c->upstream_origins.items[i];
	follower_opts_t o = {.urls = urls, .n_urls = c->upstreams.n,
			     .origins = origins, .n_origins = c->upstream_origins.n,
			     .deadline_s = c->upstream_deadline_s,
			     .src_inflight = (size_t)c->upstream_inflight_each,
			     .ca_file = c->upstream_ca_file, .follow_file = c->follow,
			     .data_dir = c->data_dir, .refresh_s = c->upstream_refresh,
			     .max_inflight = (size_t)c->upstream_inflight,
			     .negative_ttl_s = c->upstream_negative_ttl,
			     .max_body = (size_t)c->max_frame, .stall_s = c->upstream_stall_s,
			     .first_serial = first_serial};
	follower_deps_t d = {.base = n->base, .store = n->store, .ingest = n->ingest,
			     .want_done = node_http_want_done, .want_arg = n};
	return follower_new(&d, &o, out, err);
}

static int listen_start(node_t *n, pith_err_t *err)
{
	char host[256], portstr[8];
	uint16_t port;
	if (config_split_hostport(n->cfg->listen, host, &port, 1))
		return pith_err_set(err, PITH_EINVAL, "listen: '%s' is not HOST:PORT", n->cfg->listen);
	snprintf(portstr, sizeof(portstr), "%u", port);
	struct addrinfo hints = {0}, *res = NULL;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
	int g = getaddrinfo(host, portstr, &hints, &res);
	if (g || !res)
		return pith_err_set(err, PITH_EINVAL, "listen: cannot resolve %s: %s", host,
				    gai_strerror(g));
	n->listener = evconnlistener_new_bind(n->base, accept_cb, n,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
						      LEV_OPT_CLOSE_ON_EXEC,
					      128, res->ai_addr, (int)res->ai_addrlen);
	freeaddrinfo(res);
	if (!n->listener)
		return pith_err_set(err, PITH_EIO, "cannot listen on %s: %s", n->cfg->listen,
				    strerror(errno));
	evconnlistener_set_error_cb(n->listener, accept_error_cb);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	getsockname(evconnlistener_get_fd(n->listener), (struct sockaddr *)&ss, &len);
	addr_format((struct sockaddr *)&ss, n->listen_str);
	n->listen_port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

/* A store upgrade at open (store_opts_t.notice): it can take minutes. */
static void store_notice(void *arg, const char *line)
{
	(void)arg;
	log_info("%s", line);
}

/* A database error (store_opts_t.on_error), from any thread: the loop's
 * reads, the writer's commits, a backup. A corrupted block fails every
 * read of it and a full disk every commit, so the lines are rate-limited
 * (per kind); store_errors_get counts them all for status and /metrics. */
static void store_error(void *arg, int what, const char *line)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static log_rl_t rl_read, rl_write;
	(void)arg;
	pthread_mutex_lock(&mu);
	if (what == STORE_OP_WRITE)
		log_rl(&rl_write, LOG_ERROR, "%s (no writes until one succeeds)", line);
	else
		log_rl(&rl_read, LOG_ERROR, "%s", line);
	pthread_mutex_unlock(&mu);
}

/* ---- the page cache at start (store_warm; docs/pithd.md, store_warm_mb) --------------------------- */

static void *warm_main(void *arg)
{
	node_t *n = arg;
	pthread_setname_np(pthread_self(), "pith-warm");
	if (n->cfg->worker_nice)
		prio_lower_thread(0, PRIO_NICE_MAX); /* the disk's time, not the CPU's, is what it takes */
	uint64_t budget = (uint64_t)n->cfg->store_warm_mb << 20;
	if (n->cfg->store_warm_mb < 0)
		budget = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 2;
	int64_t t0 = node_now_us();
	store_warm_t w;
	pith_err_t e = {0};
	if (store_warm(n->store, budget, &n->warm_stop, &w, &e)) {
		log_warn("page cache: %s; the store is read from the disk as asked", e.msg);
		return NULL;
	}
	if (atomic_load(&n->warm_stop))
		return NULL;
	log_info("page cache: read %u table files of the records, aliases and states (%llu MiB) in %lld ms; "
		 "%u left out over store_warm_mb (%llu MiB of %llu), %u gone meanwhile",
		 w.files, (unsigned long long)(w.bytes >> 20),
		 (long long)((node_now_us() - t0) / 1000), w.skipped,
		 (unsigned long long)((w.total - w.planned) >> 20),
		 (unsigned long long)(w.total >> 20), w.missing);
	return NULL;
}

static void warm_start(node_t *n)
{
	atomic_init(&n->warm_stop, 0);
	if (!n->cfg->store_warm_mb)
		return;
	if (pthread_create(&n->warm_th, NULL, warm_main, n))
		log_warn("cannot start the page cache's warm-up thread: the store is read from the disk as asked");
	else
		n->warm_running = 1;
}

int node_new(node_config_t *cfg, node_t **out, pith_err_t *err)
{
	*out = NULL;
	log_set_level((log_level_t)log_level_parse(cfg->log_level));
	if (sodium_init() < 0)
		return pith_err_set(err, PITH_EIO, "cannot initialise libsodium");
	idmap_init();
	uint64_t fds = prio_raise_fd_limit(PRIO_FD_WANT);
	if (fds && fds < 4096)
		log_warn("open descriptors limited to %llu (the hard limit): a large store keeps a file "
			 "open per table file, and the store gets a quarter of them (raise the hard limit: "
			 "LimitNOFILE= in pithd.service, or ulimit -Hn)", (unsigned long long)fds);
	if (evthread_use_pthreads())
		return pith_err_set(err, PITH_EIO, "libevent has no pthreads support");
	signal(SIGPIPE, SIG_IGN);

	node_t *n = calloc(1, sizeof(*n));
	if (!n)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	n->cfg = cfg;
	n->started_us = n->progress_us = node_now_us();
	n->wlim = wire_limits_default;
	n->wlim.max_frame = (size_t)cfg->max_frame;
	n->wlim.max_buffer = (size_t)cfg->max_frame + WIRE_HEADER_LEN + (64u << 10);
	int rc = 0;
	char path[CONFIG_STR_MAX + 32];
	store_opts_t so = {.create = 1};

	if (mkdir(cfg->data_dir, 0700) && errno != EEXIST) {
		rc = pith_err_set(err, PITH_EIO, "cannot create %s: %s", cfg->data_dir, strerror(errno));
		goto fail;
	}
	if ((rc = identity_load(n, err)) || (rc = node_trust_build(cfg, 1, &n->trust, err)))
		goto fail;
	n->trust_live = n->trust;
	pith_hex_encode(n->pk, 32, n->id_hex);
	snprintf(path, sizeof(path), "%s/%s", cfg->data_dir, STORE_SUBDIR);
	so.registry = n->trust;
	so.cache_bytes = (size_t)cfg->store_cache_mb << 20;
	so.wal_bytes = (size_t)cfg->store_wal_mb << 20;
	/* a catch-up may commit without the log (sync_bulk_unlogged); only
	 * then, since atomic flushes cost a logged catch-up more compactions
	 * (docs/performance.md, issue 17, session 18) */
	so.atomic_flush = cfg->sync_bulk_unlogged != 0;
	/* a new node's first catch-up reads no summary of a record it has
	 * not written (docs/store.md, "Bulk loading"); its end frees that */
	so.fresh_records = 1;
	/* and, unlogged, writes states, claims and event ids into side families moved
	 * into place at its end (store_side_end on the relog thread) */
	so.bulk_side = cfg->sync_bulk_unlogged && cfg->sync_bulk_side;
	so.notice = store_notice;
	so.on_error = store_error;
	if ((rc = store_open(path, &so, &n->store, err)))
		goto fail;
	/* RocksDB started its flush and compaction threads when the store
	 * opened (named rocksdb:high and rocksdb:low); its C API could only
	 * send them to nice 19, and only from their next job on. Below the
	 * writer, as the validators are: a memtable's flush can wait while
	 * the writer has work */
	int nrocks = prio_lower_threads_named(
		"rocksdb:", (int)cfg->worker_nice + prio_below_writer((int)cfg->worker_nice));
	if (nrocks < 0)
		log_warn("cannot lower the priority of RocksDB's threads: %s", strerror(errno));
	else if (!nrocks && cfg->worker_nice)
		log_warn("found no RocksDB background threads by name: they keep the loop's priority");
	warm_start(n);
	/* the search index: derived, rebuildable, so a failure costs search
	 * only (docs/pithd.md, "The search index") */
	snprintf(path, sizeof(path), "%s/%s", cfg->data_dir, SEARCH_FILE);
	pith_err_t serr = {0};
	/* at the lowest priority of all (when workers are lowered at all):
	 * a catch-up's validators and writer come first, the index follows
	 * when they leave it the CPU (docs/pithd.md, "The search index") */
	if (search_open(path, n->store, &n->search, &serr) ||
	    search_start(n->search, 1000, cfg->worker_nice ? PRIO_NICE_MAX : 0, &serr)) {
		log_warn("%s: search is off", serr.msg);
		search_free(n->search);
	}
	if ((rc = site_start(n, err)))
		goto fail;
	root_start(n);
	n->base = event_base_new();
	if (!n->base) {
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	/* the floors, bottom up: connections, the address book, the ingest
	 * pipeline, the relay, reconciliation; each told of the others'
	 * events through the functions above */
	net_opts_t no = {.cfg = cfg, .pk = n->pk, .sk = n->sk, .wlim = n->wlim, .stats = &n->stats};
	n->mesh = (mesh_t){.peer_changed = on_peer_changed, .arg = n};
	peer_events_t pe = mesh_peer_events(&n->mesh);
	n->net = n->mesh.net = net_new(n->base, &no, &pe);
	n->resolver = resolver_new(n->base, NULL);
	n->book = n->mesh.book = n->net ? addrbook_new(n->net, cfg, &n->stats) : NULL;
	if (!n->net || !n->book || !n->resolver) {
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	addrbook_set_resolver(n->book, n->resolver, on_control_reply, n);
	n->ingest = ingest_new(n->base, n->trust_live, n->store, (int)cfg->validate_threads,
			       (int)cfg->worker_nice,
			       (size_t)cfg->max_frame, cfg->trace_stored, on_ingest_done, n);
	if (!n->ingest) {
		rc = pith_err_set(err, PITH_EIO, "cannot start the validation threads");
		goto fail;
	}
	if ((rc = node_follower_start(n, cfg, 0, &n->follower, err)))
		goto fail;
	n->started_follower = n->follower != NULL;
	relay_deps_t rd = {.base = n->base, .net = n->net, .store = n->store, .ingest = n->ingest,
			   .cfg = cfg, .stats = &n->stats,
			   .hooks = mesh_relay_hooks(&n->mesh)};
	n->relay = n->mesh.relay = relay_new(&rd);
	if (!n->relay) {
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	sync_deps_t sd = {.base = n->base, .net = n->net, .relay = n->relay, .book = n->book,
			  .resolver = n->resolver, .store = n->store,
			  .ingest = n->ingest, .cfg = cfg, .stats = &n->stats,
			  .reply = on_control_reply, .reply_arg = n, .root = node_root_hooks(n)};
	if ((rc = sync_new(&sd, &n->sync, err)))
		goto fail;
	n->mesh.sync = n->sync;
	if ((rc = listen_start(n, err)))
		goto fail;
	n->control = node_control_new(n, err);
	if (!n->control) {
		rc = err->code ? err->code : PITH_EIO;
		goto fail;
	}
	if ((rc = node_http_start(n, err)))
		goto fail;
	net_set_hello(n->net, n->listen_port, sync_features(n->sync), n->http_url);
	for (size_t i = 0; i < cfg->peers.n; i++)
		if ((rc = addrbook_add_hostport(n->book, cfg->peers.items[i], 1, err)))
			goto fail;
	addrbook_load(n->book); /* addresses and bans of the last run (DATA/peers.json) */
	n->sig_term = evsignal_new(n->base, SIGTERM, signal_cb, n);
	n->sig_int = evsignal_new(n->base, SIGINT, signal_cb, n);
	n->sig_hup = evsignal_new(n->base, SIGHUP, signal_cb, n);
	n->tick_ev = event_new(n->base, -1, EV_PERSIST, tick_cb, n);
	n->stop_ev = evtimer_new(n->base, stop_cb, n);
	if (!n->sig_term || !n->sig_int || !n->sig_hup || !n->tick_ev || !n->stop_ev) {
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	struct timeval tick = {0, TICK_MS * 1000};
	event_add(n->sig_term, NULL);
	event_add(n->sig_int, NULL);
	event_add(n->sig_hup, NULL);
	event_add(n->tick_ev, &tick);
	*out = n;
	return 0;
fail:
	node_free(n);
	return rc ? rc : PITH_EIO;
}

int node_run(node_t *n)
{
	store_counts_t c;
	store_counts_get(n->store, &c);
	log_info("pithd started: node %.16s, listening on %s, network %s, control %s, "
		 "%llu events in %llu records",
		 n->id_hex, n->listen_str, n->cfg->network_id, n->cfg->control,
		 (unsigned long long)c.events, (unsigned long long)c.records);
	node_tick(n); /* dial the configured peers now, not a tick later */
	int rc = event_base_dispatch(n->base);
	return rc < 0 ? PITH_EIO : 0;
}

void node_free_(node_t *n)
{
	if (!n)
		return;
	n->shutting_down = n->mesh.stopping = 1;
	atomic_store(&n->warm_stop, 1); /* a failed start too: node_stop never ran */
	if (n->net)
		net_set_shutting_down(n->net);
	control_free(n->control);
	node_ctl_free(n); /* waits for a backup in progress: it reads the store */
	node_http_stop(n); /* before the pipeline hands back the jobs HTTP was waiting for */
	if (n->listener)
		evconnlistener_free(n->listener);
	/* validated events are written before the store closes */
	ingest_free(n->ingest);
	search_free(n->search); /* its thread reads the store */
	site_feed_free(n->site); /* so does this one: joined before the store closes */
	if (n->root_running) {
		/* it reads the store: its tree is dropped once it is done */
		pthread_join(n->root_th, NULL);
		n->root_running = 0;
		noderoot_free_(atomic_load(&n->root_built));
	}
	noderoot_free(n->root);
	follower_free(n->follower); /* after the pipeline handed its jobs back */
	free(n->follow_cfg);
	resolver_free(n->resolver); /* no lookup answers from here on */
	if (n->net) {
		for (peer_t *p = net_peers(n->net); p; p = p->next)
			if (p->state != PEER_CLOSING)
				peer_close(p, 0, "node stopped");
		net_reap(n->net, 1);
	}
	if (n->sig_term)
		event_free(n->sig_term);
	if (n->sig_int)
		event_free(n->sig_int);
	if (n->sig_hup)
		event_free(n->sig_hup);
	if (n->tick_ev)
		event_free(n->tick_ev);
	if (n->stop_ev)
		event_free(n->stop_ev);
	if (n->book)
		addrbook_save_if_changed(n->book);
	sync_free(n->sync);
	relay_free(n->relay);
	addrbook_free(n->book);
	net_free(n->net);
	if (n->base)
		event_base_free(n->base);
	if (n->warm_running)
		pthread_join(n->warm_th, NULL); /* it reads the store's files */
	pith_err_t e = {0};
	if (n->store) {
		/* a clean stop leaves no log to replay at the next start */
		int64_t t0 = node_now_us();
		if (store_flush(n->store, &e))
			log_error("%s", e.msg);
		else
			log_info("store flushed in %lld ms", (long long)((node_now_us() - t0) / 1000));
		store_close(n->store);
		log_info("store closed");
	}
	node_trust_reap(n, 1); /* the validators are gone (ingest_free) */
	pith_trust_free(n->trust);
	sodium_memzero(n->sk, sizeof(n->sk));
	ingest_job_cache_release(); /* the loop's spare job blocks */
	free(n);
}

/* ---- status ------------------------------------------------------------------------------------ */

static const char *state_name(peer_state_t s)
{
	switch (s) {
	case PEER_CONNECTING: return "connecting";
	case PEER_HANDSHAKE: return "handshake";
	case PEER_READY: return "ready";
	default: return "closing";
	}
}

static const char *inv_name(const relay_peer_t *rp)
{
	switch (rp ? rp->inv : INV_IDLE) {
	case INV_WAITING: return "listing";
	case INV_MORE: return "fetching";
	case INV_DONE: return "done";
	default: return "idle";
	}
}

static void jstr(pith_buf_t *b, const char *key, const char *val)
{
	pith_buf_printf(b, "\"%s\":", key);
	json_write_string(b, val, strlen(val));
}

static void type_counts(pith_buf_t *b, const char *key, const uint64_t *v)
{
	pith_buf_printf(b, "\"%s\":{", key);
	int first = 1;
	for (int t = WIRE_HELLO; t <= WIRE_TYPE_MAX; t++) {
		if (!v[t])
			continue;
		pith_buf_printf(b, "%s\"%s\":%llu", first ? "" : ",", wire_type_name(t),
				(unsigned long long)v[t]);
		first = 0;
	}
	pith_buf_puts(b, "}");
}

void node_peer_json(const peer_t *p, int64_t now, pith_buf_t *b)
{
	char id[65] = "";
	if (p->got_hello)
		pith_hex_encode(p->pk, 32, id);
	pith_buf_puts(b, "{");
	jstr(b, "addr", p->addr);
	pith_buf_puts(b, ",");
	jstr(b, "node_id", id);
	pith_buf_puts(b, ",");
	jstr(b, "agent", p->agent);
	pith_buf_puts(b, ",");
	jstr(b, "http_url", p->http_url);
	pith_buf_printf(b,
			",\"direction\":\"%s\",\"state\":\"%s\",\"score\":%d,"
			"\"listen_port\":%u,\"rtt_ms\":%.3f,\"age_ms\":%lld,"
			"\"bytes_in\":%llu,\"bytes_out\":%llu,\"msgs_in\":%llu,\"msgs_out\":%llu,"
			"\"events_in\":%llu,\"events_out\":%llu,\"inflight\":%zu,"
			"\"wanted\":%zu,\"serve_queue\":%zu,\"catchup\":\"%s\",\"root\":\"%s\"}",
			p->outbound ? "out" : "in", state_name(p->state), p->score, p->listen_port,
			(double)p->rtt_us / 1000.0, (long long)((now - p->created_us) / 1000),
			(unsigned long long)p->bytes_in, (unsigned long long)p->bytes_out,
			(unsigned long long)p->msgs_in, (unsigned long long)p->msgs_out,
			(unsigned long long)p->events_in, (unsigned long long)p->events_out,
			p->relay ? p->relay->inflight : 0, p->relay ? p->relay->wanted.n : 0,
			p->relay ? p->relay->serve.n : 0, inv_name(p->relay), sync_root_peer_state(p));
}

/* The store's failures in status (docs/pithd.md): counts, whether it
 * takes writes, the last error and how long ago. */
static void node_store_errors_json(store_t *st, int64_t now, pith_buf_t *b)
{
	store_errors_t e;
	store_errors_get(st, &e);
	int64_t last = e.last_read_us > e.last_write_us ? e.last_read_us : e.last_write_us;
	int healthy = store_is_healthy(st, STORE_READ_ERROR_WINDOW_US, NULL, 0);
	pith_buf_printf(b, "\"writable\":%s,\"healthy\":%s,\"read_errors\":%llu,"
			"\"write_errors\":%llu,",
			e.writable ? "true" : "false", healthy ? "true" : "false",
			(unsigned long long)e.read_errors, (unsigned long long)e.write_errors);
	jstr(b, "last_error", e.last_error);
	if (last)
		pith_buf_printf(b, ",\"last_error_age_ms\":%lld", (long long)((now - last) / 1000));
	else
		pith_buf_puts(b, ",\"last_error_age_ms\":null");
}

int node_status_json(node_t *n, pith_buf_t *b)
{
	int64_t now = node_now_us();
	store_counts_t c;
	store_counts_get(n->store, &c);
	ingest_stats_t is;
	ingest_stats_get(n->ingest, &is);
	const node_stats_t *s = &n->stats;
	pith_buf_puts(b, "{");
	jstr(b, "node_id", n->id_hex);
	pith_buf_puts(b, ",");
	jstr(b, "network_id", n->cfg->network_id);
	pith_buf_puts(b, ",");
	jstr(b, "listen", n->listen_str);
	pith_buf_puts(b, ",");
	jstr(b, "http", n->http ? http_listen_str(n->http) : n->cfg->http);
	pith_buf_printf(b, ",\"uptime_ms\":%lld,\"shutting_down\":%s",
			(long long)((now - n->started_us) / 1000), n->shutting_down ? "true" : "false");
	store_usage_t u;
	store_usage_get(n->store, &u);
	pith_buf_printf(b, ",\"store\":{\"events\":%llu,\"records\":%llu,\"bundles\":%llu,"
			"\"sst_bytes\":%llu,\"wal_bytes\":%llu,\"memtable_bytes\":%llu,"
			"\"pending_compaction_bytes\":%llu,\"compacting\":%s,",
			(unsigned long long)c.events, (unsigned long long)c.records,
			(unsigned long long)c.bundles, (unsigned long long)u.sst_bytes,
			(unsigned long long)u.wal_bytes, (unsigned long long)u.memtable_bytes,
			(unsigned long long)u.pending_compaction_bytes, u.compacting ? "true" : "false");
	node_store_errors_json(n->store, now, b);
	pith_buf_puts(b, "}");
	/* how far the search index is behind the change log (null: no index) */
	if (n->search) {
		uint64_t last = store_changes_last(n->store), at = search_seq(n->search);
		pith_buf_printf(b, ",\"search\":{\"indexed_through\":%llu,\"behind\":%llu,"
				"\"held\":%s,\"pass_records\":%llu}",
				(unsigned long long)at, (unsigned long long)(last > at ? last - at : 0),
				search_held(n->search) ? "true" : "false",
				(unsigned long long)search_pass_done(n->search));
	} else {
		pith_buf_puts(b, ",\"search\":null");
	}
	if (n->follower) {
		pith_buf_puts(b, ",\"follow\":{");
		follower_status_json(n->follower, b);
		pith_buf_puts(b, "}");
	}
	if (n->site) {
		pith_buf_puts(b, ",\"site\":{");
		site_feed_status_json(n->site, b);
		pith_buf_puts(b, "}");
	}
	pith_buf_puts(b, ",\"peers\":[");
	int first = 1;
	for (peer_t *p = net_peers(n->net); p; p = p->next) {
		pith_buf_puts(b, first ? "" : ",");
		node_peer_json(p, now, b);
		first = 0;
	}
	pith_buf_puts(b, "],\"bans\":");
	addrbook_ban_list_json(n->book, now, b);
	size_t a_new, a_tried;
	addrbook_table_counts(n->book, &a_new, &a_tried);
	pith_buf_printf(b, ",\"addresses\":%zu,\"addresses_new\":%zu,\"addresses_tried\":%zu,"
			"\"pending_fetches\":%zu",
			addrbook_count_known(n->book), a_new, a_tried, relay_pending_fetches(n->relay));
	pith_buf_printf(b,
			",\"ingest\":{\"in_flight\":%zu,\"queued_validate\":%zu,\"queued_write\":%zu,"
			"\"validated\":%llu,\"invalid\":%llu,\"validate_batches\":%llu,"
			"\"batches\":%llu,\"states\":%llu,\"store_errors\":%llu}",
			ingest_in_flight(n->ingest), is.queued_validate, is.queued_write,
			(unsigned long long)is.validated, (unsigned long long)is.invalid,
			(unsigned long long)is.validate_batches,
			(unsigned long long)is.committed_batches, (unsigned long long)is.states,
			(unsigned long long)is.store_errors);
	pith_buf_puts(b, ",");
	sync_status_json(n->sync, b);
	pith_buf_printf(b,
			",\"stats\":{\"events_stored\":%llu,\"events_duplicate\":%llu,"
			"\"events_resigned\":%llu,\"events_invalid\":%llu,\"bundles_stored\":%llu,"
			"\"bundles_older\":%llu,\"bundles_invalid\":%llu,\"unrequested\":%llu,"
			"\"fetch_timeouts\":%llu,\"pending_dropped\":%llu,\"notfound_in\":%llu,"
			"\"ids_announced\":%llu,\"ids_requested\":%llu,\"events_served\":%llu,"
			"\"served_by_time\":%llu,"
			"\"events_unreadable\":%llu,"
			"\"bytes_sent\":%llu,\"bytes_recv\":%llu,\"bans\":%llu,\"malformed\":%llu,"
			"\"connections_in\":%llu,\"connections_out\":%llu,\"refused_banned\":%llu,"
			"\"refused_full\":%llu,\"refused_ip\":%llu,\"refused_group\":%llu,"
			"\"inbound_evicted\":%llu,\"bans_evicted\":%llu,"
			"\"lazy_deferred\":%llu,\"lazy_sent\":%llu,"
			"\"refused_skipped\":%llu,\"validate_holds\":%llu,\"fetch_expired\":%llu,"
			"\"validating_bytes\":%zu,\"rejected\":{",
			(unsigned long long)s->events_stored, (unsigned long long)s->events_duplicate,
			(unsigned long long)s->events_resigned, (unsigned long long)s->events_invalid,
			(unsigned long long)s->bundles_stored, (unsigned long long)s->bundles_older,
			(unsigned long long)s->bundles_invalid, (unsigned long long)s->unrequested,
			(unsigned long long)s->fetch_timeouts, (unsigned long long)s->pending_dropped,
			(unsigned long long)s->notfound_in, (unsigned long long)s->ids_announced,
			(unsigned long long)s->ids_requested, (unsigned long long)s->events_served,
			(unsigned long long)s->served_by_time,
			(unsigned long long)s->events_unreadable,
			(unsigned long long)s->bytes_sent, (unsigned long long)s->bytes_recv,
			(unsigned long long)s->bans, (unsigned long long)s->malformed,
			(unsigned long long)s->connections_in, (unsigned long long)s->connections_out,
			(unsigned long long)s->refused_banned, (unsigned long long)s->refused_full,
			(unsigned long long)s->refused_ip, (unsigned long long)s->refused_group,
			(unsigned long long)s->inbound_evicted, (unsigned long long)s->bans_evicted,
			(unsigned long long)s->lazy_deferred, (unsigned long long)s->lazy_sent,
			(unsigned long long)s->refused_skipped, (unsigned long long)s->validate_holds,
			(unsigned long long)s->fetch_expired, relay_validating_bytes(n->relay));
	first = 1;
	for (int i = 1; i < PITH_CHECK_NCHECKS + 3; i++) {
		if (!s->rejected[i])
			continue;
		const char *name = i < PITH_CHECK_NCHECKS ? pith_event_check_name((pith_event_check_t)i)
			: i == PITH_CHECK_NCHECKS ? "id_mismatch"
			: i == PITH_CHECK_NCHECKS + 1 ? "store" : "other";
		pith_buf_printf(b, "%s\"%s\":%llu", first ? "" : ",", name,
				(unsigned long long)s->rejected[i]);
		first = 0;
	}
	pith_buf_puts(b, "},");
	type_counts(b, "msgs_sent", s->msgs_sent);
	pith_buf_puts(b, ",");
	type_counts(b, "msgs_recv", s->msgs_recv);
	pith_buf_puts(b, ",");
	type_counts(b, "bytes_sent_by_type", s->bytes_sent_type);
	pith_buf_puts(b, "}}");
	return b->oom ? PITH_ENOMEM : 0;
}
