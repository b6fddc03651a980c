/* pithctl replicate URL [--data DIR]: a complete, verified replica of an
 * upstream (a pithd mirror, or anything serving its change feed), kept
 * current (issue 51; docs/upstream.md, "pithctl replicate").
 *
 * The node's own follower (follower.h) does the work, on an event loop of
 * this command's, with the node's ingest pipeline: it pages through the
 * upstream's change feed (/api/changes) from the cursor saved in
 * DIR/upstream-cursors, and for each record whose state differs from the
 * replica's fetches the newer bundle, then the events still missing; all
 * of it verified as `import` verifies it. The cursor moves (temp file,
 * fsync, rename, fsync of DIR) only once every record of a page is
 * stored, so an interrupted run, by Ctrl-C or by SIGKILL, is continued by
 * the same command: it reads the page again and skips what the replica
 * already holds (by state hash, without a request).
 *
 * DIR is a pithd data directory (the store is DIR/store): `pithd --data
 * DIR --upstream URL` serves the replica and keeps following from the same
 * cursor.
 *
 * Before the follower starts, the command asks the upstream itself, so
 * that the mistakes people make end in one line: a host that does not
 * answer, a certificate that does not verify, a URL that is no pith
 * upstream, an upstream without a change feed (the registry publishes
 * none yet). /healthz, when the upstream serves it, gives the number of
 * records to expect (the progress bar's 100 %) and the counts the replica
 * is compared with at the end. */
#include "cli_node.h"
#include "cli_store.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "follower.h"
#include "hclient.h"
#include "ingest.h"
#include "json.h"
#include "log.h"
#include "upstream.h"

#define REP_PAGE 200                 /* changes per feed page: the cursor is saved this often */
#define REP_REFRESH_S 60             /* default --refresh: the feed is asked again this often */
#define REP_DOWN_AFTER 5             /* --once: failures in a row (about 30 s of backoff) */
#define REP_PREFLIGHT_TRIES 3        /* a first request that may mend is asked this often */
#define REP_SMALL_MAX (1u << 20)     /* a manifest, a health answer */
#define REP_BODY_MAX (16u << 20)     /* a bundle or events page */
#define REP_LINE_EVERY 5.0           /* seconds between progress lines when not a terminal */
#define REP_DEFAULT_DIR "pith-replica"

typedef struct rep {
	const cli_ctx_t *ctx;
	char base[PITH_URL_MAX];
	char feed_url[PITH_URL_MAX + 32];
	const char *data_dir, *ca_file;
	const char *origins[HC_ORIGINS_MAX]; /* --upstream-origin */
	size_t n_origins;
	int once, bar, lines, json;
	long refresh_s;
	struct event_base *loop;
	hc_t *hc;               /* this command's own requests (before and after) */
	store_t *st;
	ingest_t *pipe;
	follower_t *fol;
	/* the upstream's counts from /healthz; -1: unknown */
	int64_t up_records, up_events;
	/* the run */
	double t0, last_draw, last_line;
	store_counts_t at_start;
	uint64_t empty_seen, changes_seen;
	int64_t error_seen_us;
	int caught_up, stop_sig, down, said_following;
	struct event *tick, *sigint, *sigterm;
} rep_t;

/* ---- one request, waited for (before the follower starts, and after) ---------- */

typedef struct rep_get {
	int done;
	int curl_code, transient, tls;
	long status;
	int64_t retry_after_s;
	char error[320];
	pith_buf_t body;
} rep_get_t;

static void on_get(void *arg, const hc_result_t *r)
{
	rep_get_t *g = arg;
	g->done = 1;
	g->curl_code = r->curl_code;
	g->status = r->status;
	g->transient = hc_result_is_transient(r);
	g->retry_after_s = hc_result_retry_after_s(r);
	g->tls = r->curl_code == 60 /* CURLE_PEER_FAILED_VERIFICATION */ ||
		 r->curl_code == 35 /* CURLE_SSL_CONNECT_ERROR */ ||
		 r->curl_code == 77 /* CURLE_SSL_CACERT_BADFILE */ ||
		 r->curl_code == 58 /* CURLE_SSL_CERTPROBLEM */;
	snprintf(g->error, sizeof(g->error), "%s", r->error ? r->error : "");
	if (!r->curl_code && r->body_len && pith_buf_append(&g->body, r->body, r->body_len))
		g->curl_code = -1, snprintf(g->error, sizeof(g->error), "out of memory");
}

/* GETs url (asked again, REP_PREFLIGHT_TRIES times at most, while the
 * failure may mend), running the loop until it is answered. */
static void rep_get(rep_t *r, const char *url, rep_get_t *g)
{
	for (unsigned attempt = 1;; attempt++) {
		pith_buf_release(&g->body);
		memset(g, 0, sizeof(*g));
		hc_req_t q = {.url = url, .body_cap = REP_SMALL_MAX, .done = on_get, .arg = g};
		if (!hc_get(r->hc, &q)) {
			g->curl_code = -1;
			snprintf(g->error, sizeof(g->error), "out of memory");
			return;
		}
		while (!g->done)
			event_base_loop(r->loop, EVLOOP_ONCE);
		if (!g->transient || attempt >= REP_PREFLIGHT_TRIES)
			return;
		int64_t us = g->retry_after_s >= 0 && g->retry_after_s <= 10
				     ? g->retry_after_s * INT64_C(1000000)
				     : hc_backoff_us(INT64_C(1000000), attempt, INT64_C(4000000));
		usleep((useconds_t)us);
	}
}

/* What went wrong with g, for a person: "answered HTTP 404" or curl's words. */
static const char *get_what(const rep_get_t *g, char *buf, size_t cap)
{
	if (g->curl_code)
		snprintf(buf, cap, "%s", g->error);
	else
		snprintf(buf, cap, "answered HTTP %ld", g->status);
	return buf;
}

/* A request that got no HTTP answer: the one line for it. 1 after saying it. */
static int preflight_transport(const rep_t *r, const char *url, const rep_get_t *g)
{
	if (!g->curl_code)
		return 0;
	if (g->tls)
		return cli_fail("replicate", "%s: TLS failed: %s (if the upstream's certificate comes "
			       "from a CA of its own, pass --ca-file FILE)", url, g->error);
	return cli_fail("replicate", "cannot reach %s: %s (check the URL; if it is right, the "
		       "upstream is down: run the same command later)", r->base, g->error);
}

/* The upstream's /healthz store counts into up_records/up_events (-1 when
 * it serves none: an upstream need not). */
static void health_parse(rep_t *r, const rep_get_t *g)
{
	json_doc_t *doc = NULL;
	pith_err_t e = {0};
	r->up_records = r->up_events = -1;
	if (!g->curl_code && (g->status == 200 || g->status == 503) &&
	    !json_parse(&doc, g->body.data, g->body.len, NULL, &e)) {
		const json_value_t *s = json_get_type(json_doc_root(doc), "store", JSON_OBJECT);
		const json_value_t *n = json_get_type(s, "records", JSON_INT);
		const json_value_t *ev = json_get_type(s, "events", JSON_INT);
		if (n && n->u.str[0] != '-')
			r->up_records = strtoll(n->u.str, NULL, 10);
		if (ev && ev->u.str[0] != '-')
			r->up_events = strtoll(ev->u.str, NULL, 10);
	}
	json_doc_free(doc);
}

static void health_url(const rep_t *r, char *url, size_t cap)
{
	snprintf(url, cap, "%s/healthz", r->base);
}

/* The same, waited for (outside the loop's callbacks). */
static void read_health(rep_t *r)
{
	char url[PITH_URL_MAX + 16];
	rep_get_t g = {0};
	health_url(r, url, sizeof(url));
	rep_get(r, url, &g);
	health_parse(r, &g);
	pith_buf_release(&g.body);
}

/* Asks the upstream for its manifest and the first entry of its change
 * feed: 0 when the feed answers (feed_url set), else 1 after one line
 * saying what is wrong and what to do instead. */
static int preflight(rep_t *r)
{
	char url[PITH_URL_MAX + 64], what[400];
	rep_get_t g = {0};
	int rc = 1, manifest = 0;
	pith_manifest_t *m = calloc(1, sizeof(*m));
	if (!m)
		return cli_fail("replicate", "out of memory");
	snprintf(url, sizeof(url), "%s/pith-mirrors.json", r->base);
	rep_get(r, url, &g);
	if (preflight_transport(r, url, &g))
		goto out;
	pith_err_t e = {0};
	if (g.status == 200 && !pith_manifest_parse(g.body.data, g.body.len, NULL, m, &e)) {
		manifest = 1;
		const pith_mirror_t *pick = &m->mirrors[0];
		for (size_t i = 0; i < m->n_mirrors; i++) {
			char b[PITH_URL_MAX];
			snprintf(b, sizeof(b), "%s", m->mirrors[i].base_url);
			for (size_t l = strlen(b); l && b[l - 1] == '/'; l--)
				b[l - 1] = 0;
			if (!strcasecmp(b, r->base))
				pick = &m->mirrors[i];
		}
		snprintf(r->feed_url, sizeof(r->feed_url), "%s", pick->changes_url);
	}
	if (!r->feed_url[0])
		snprintf(r->feed_url, sizeof(r->feed_url), "%s/api/changes", r->base);
	snprintf(url, sizeof(url), "%s?limit=1", r->feed_url);
	rep_get(r, url, &g);
	if (preflight_transport(r, url, &g))
		goto out;
	pith_change_t c;
	size_t n;
	char next[PITH_CURSOR_MAX + 1];
	if (g.status == 200 &&
	    !pith_changes_parse(g.body.data, g.body.len, NULL, &c, 1, &n, next, &e)) {
		rc = 0;
	} else if (g.status == 200) {
		cli_fail("replicate", "%s: not a change feed: %s", url, e.msg);
	} else if (!manifest) {
		cli_fail("replicate", "%s is not a pith upstream: neither /pith-mirrors.json nor "
			 "/api/changes is there (%s %s); give the base URL of a pith mirror, e.g. "
			 "https://mirror.example (no path)", r->base, url, get_what(&g, what, sizeof(what)));
	} else {
		cli_fail("replicate", "%s lists no records: %s %s (it has no change feed, which "
			 "replicate follows; the registry publishes none yet): replicate a pithd mirror "
			 "of it, or fetch records by id: pithctl --store DIR pull --from %s --ids FILE",
			 r->base, url, get_what(&g, what, sizeof(what)), r->base);
	}
out:
	free(m);
	pith_buf_release(&g.body);
	return rc;
}

/* ---- progress ------------------------------------------------------------------- */

static void fmt_duration(double s, char *out, size_t cap)
{
	long t = (long)(s + 0.5);
	if (s < 1)
		snprintf(out, cap, "under 1 s");
	else if (t < 60)
		snprintf(out, cap, "%ld s", t);
	else if (t < 3600)
		snprintf(out, cap, "%ld min %02ld s", t / 60, t % 60);
	else
		snprintf(out, cap, "%ld h %02ld min", t / 3600, t % 3600 / 60);
}

/* "412/1000 records (41%), 3.1 MB, 85 records/s, 7 s left" (or without the
 * total when the upstream did not say). */
static void progress_text(rep_t *r, char *out, size_t cap, int bar)
{
	store_counts_t sc;
	follower_progress_t fp;
	char bytes[32], left[40] = "";
	store_counts_get(r->st, &sc);
	follower_progress(r->fol, &fp);
	cli_bytes(fp.bytes, bytes);
	double secs = cli_now() - r->t0;
	uint64_t got = sc.records > r->at_start.records ? sc.records - r->at_start.records : 0;
	double rate = secs > 0.05 ? (double)got / secs : 0;
	size_t o = 0;
	if (r->up_records >= 0) {
		uint64_t total = (uint64_t)r->up_records;
		uint64_t have = sc.records < total ? sc.records : total;
		int pct = total ? (int)(100 * have / total) : 100;
		if (bar) {
			char b[25];
			int fill = total ? (int)(20 * have / total) : 20;
			for (int i = 0; i < 20; i++)
				b[i] = i < fill ? '#' : '.';
			b[20] = 0;
			o += (size_t)snprintf(out + o, cap - o, "[%s] ", b);
		}
		o += (size_t)snprintf(out + o, cap - o, "%llu/%llu records (%d%%)",
				      (unsigned long long)sc.records, (unsigned long long)total, pct);
		if (rate > 0 && have < total) {
			char d[32];
			fmt_duration((double)(total - have) / rate, d, sizeof(d));
			snprintf(left, sizeof(left), ", %s left", d);
		}
	} else {
		o += (size_t)snprintf(out + o, cap - o, "%llu records", (unsigned long long)sc.records);
	}
	if (o < cap)
		snprintf(out + o, cap - o, ", %s, %.0f records/s%s", bytes, rate, left);
}

static void draw(rep_t *r, int final)
{
	char line[300];
	if (r->bar) {
		if (!cli_progress_due(&r->last_draw, final))
			return;
		progress_text(r, line, sizeof(line), 1);
		fprintf(stderr, "\r\033[Kreplicate: %s%s", line, final ? "\n" : "");
	} else if (r->lines) {
		double t = cli_now();
		if (!final && t - r->last_line < REP_LINE_EVERY)
			return;
		r->last_line = t;
		progress_text(r, line, sizeof(line), 0);
		fprintf(stderr, "pithctl replicate: %s\n", line);
	}
}

/* A line on stderr between progress bars. */
static void say(rep_t *r, const char *text)
{
	if (r->bar)
		fprintf(stderr, "\r\033[K");
	fprintf(stderr, "pithctl replicate: %s\n", text);
	r->last_draw = 0;
}

/* The summary, on stdout: one line, or one JSON object. */
static void summary(rep_t *r, int interrupted)
{
	store_counts_t sc;
	follower_progress_t fp;
	char bytes[32];
	store_counts_get(r->st, &sc);
	follower_progress(r->fol, &fp);
	cli_bytes(fp.bytes, bytes);
	double secs = cli_now() - r->t0;
	int known = r->up_records >= 0 && r->up_events >= 0;
	int same = known && sc.records == (uint64_t)r->up_records &&
		   sc.events == (uint64_t)r->up_events;
	if (r->json) {
		printf("{\"upstream\":");
		pith_buf_t b = PITH_BUF_INIT;
		json_write_string(&b, r->base, strlen(r->base));
		pith_buf_puts(&b, ",\"data\":");
		json_write_string(&b, r->data_dir, strlen(r->data_dir));
		printf("%.*s", (int)b.len, (const char *)b.data);
		pith_buf_release(&b);
		printf(",\"caught_up\":%s,\"interrupted\":%s,\"records\":%llu,\"events\":%llu,"
		       "\"bundles\":%llu,", r->caught_up ? "true" : "false",
		       interrupted ? "true" : "false", (unsigned long long)sc.records,
		       (unsigned long long)sc.events, (unsigned long long)sc.bundles);
		if (known)
			printf("\"upstream_records\":%lld,\"upstream_events\":%lld,\"same_counts\":%s,",
			       (long long)r->up_records, (long long)r->up_events, same ? "true" : "false");
		else
			printf("\"upstream_records\":null,\"upstream_events\":null,\"same_counts\":null,");
		printf("\"changes\":%llu,\"same_state\":%llu,\"bundles_fetched\":%llu,"
		       "\"events_fetched\":%llu,\"rejected\":%llu,\"diverged\":%llu,\"requests\":%llu,"
		       "\"bytes\":%llu,\"seconds\":%.2f}\n",
		       (unsigned long long)fp.changes, (unsigned long long)fp.same_state,
		       (unsigned long long)fp.bundles, (unsigned long long)fp.events,
		       (unsigned long long)fp.rejected, (unsigned long long)fp.diverged,
		       (unsigned long long)fp.requests, (unsigned long long)fp.bytes, secs);
	} else {
		char cmp[160] = "";
		if (known)
			snprintf(cmp, sizeof(cmp), same ? " (the upstream's counts)"
							: " (the upstream has %lld records, %lld events)",
				 (long long)r->up_records, (long long)r->up_events);
		printf("%s %s into %s: %llu records, %llu events%s; this run: %llu changes read, %llu "
		       "already here, %llu bundles and %llu events fetched, %s in %.1f s\n",
		       interrupted ? "interrupted replicating" : r->stop_sig && !r->once ? "stopped following" :
		       r->caught_up ? "replicated" : "stopped replicating",
		       r->base, r->data_dir, (unsigned long long)sc.records,
		       (unsigned long long)sc.events, cmp, (unsigned long long)fp.changes,
		       (unsigned long long)fp.same_state, (unsigned long long)fp.bundles,
		       (unsigned long long)fp.events, bytes, secs);
	}
	fflush(stdout);
}

/* ---- the run --------------------------------------------------------------------- */

static void on_job(void *arg, ingest_job_t *job)
{
	rep_t *r = arg;
	follower_job_done(r->fol, job);
	ingest_job_free(job);
}

/* Follow mode caught up: the upstream's counts as of now, then the
 * summary (asked on the loop: rep_get cannot run inside a callback). */
static void on_health(void *arg, const hc_result_t *res)
{
	rep_t *r = arg;
	rep_get_t g = {0};
	on_get(&g, res);
	health_parse(r, &g);
	pith_buf_release(&g.body);
	summary(r, 0);
	if (!r->said_following && !r->json)
		fprintf(stderr, "pithctl replicate: following %s: its changes are fetched every "
			"%ld s; Ctrl-C stops\n", r->base, r->refresh_s);
	r->said_following = 1;
}

static void health_ask(rep_t *r)
{
	char url[PITH_URL_MAX + 16];
	health_url(r, url, sizeof(url));
	hc_req_t q = {.url = url, .body_cap = REP_SMALL_MAX, .done = on_health, .arg = r};
	if (!hc_get(r->hc, &q))
		summary(r, 0);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	rep_t *r = arg;
	r->stop_sig = (int)sig;
	event_base_loopbreak(r->loop);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rep_t *r = arg;
	follower_progress_t fp;
	follower_progress(r->fol, &fp);
	if (fp.last_error_us > r->error_seen_us) {
		r->error_seen_us = fp.last_error_us;
		say(r, fp.last_error);
	}
	if (fp.empty_pages > r->empty_seen) {
		/* the feed came back empty: everything listed so far is in */
		r->empty_seen = fp.empty_pages;
		if (r->once) {
			r->caught_up = 1;
			event_base_loopbreak(r->loop);
			return;
		}
		if (!r->caught_up || fp.changes > r->changes_seen) {
			r->caught_up = 1;
			r->changes_seen = fp.changes;
			draw(r, 1);
			health_ask(r);
		}
	}
	if (r->once && fp.fails >= REP_DOWN_AFTER) {
		r->down = 1;
		event_base_loopbreak(r->loop);
		return;
	}
	if (!r->caught_up)
		draw(r, 0);
}

/* DIR/store: the data directory made when missing (0700, as pithd makes
 * it). 0, or 1 after saying why. */
static int make_data_dir(const char *dir, char *store, size_t cap)
{
	if (mkdir(dir, 0700) && errno != EEXIST)
		return cli_fail("replicate", "cannot create %s: %s", dir, strerror(errno));
	struct stat sb;
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
		return cli_fail("replicate", "%s is not a directory (--data DIR)", dir);
	if ((size_t)snprintf(store, cap, "%s/store", dir) >= cap)
		return cli_fail("replicate", "--data %s: path too long", dir);
	return 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	rep_t r = {.ctx = ctx, .json = ctx->json, .refresh_s = REP_REFRESH_S,
		   .data_dir = REP_DEFAULT_DIR};
	const char *url = NULL;
	int no_progress = 0, curl_up = 0, rc = 1;
	pith_trust_t *trust = NULL;
	char store_dir[4200];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--data") && i + 1 < argc)
			r.data_dir = argv[++i];
		else if (!strcmp(argv[i], "--ca-file") && i + 1 < argc)
			r.ca_file = argv[++i];
		else if (!strcmp(argv[i], "--upstream-origin") && i + 1 < argc) {
			if (cli_opt_origin("replicate", argv[++i], r.origins, &r.n_origins))
				return 1;
		} else if (!strcmp(argv[i], "--refresh") && i + 1 < argc) {
			if (cli_opt_long("replicate", argv[i], argv[i + 1], 1, 86400, "seconds",
					 &r.refresh_s))
				return 1;
			i++;
		} else if (!strcmp(argv[i], "--once"))
			r.once = 1;
		else if (!strcmp(argv[i], "--follow"))
			r.once = 0;
		else if (!strcmp(argv[i], "--no-progress"))
			no_progress = 1;
		else if (!strcmp(argv[i], "--json"))
			;
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_fail("replicate", "unknown or incomplete option %s", argv[i]);
		else if (url)
			return cli_fail("replicate", "one URL only (%s and %s)", url, argv[i]);
		else
			url = argv[i];
	}
	if (!url)
		return cli_fail("replicate", "missing URL (the upstream's base URL, e.g. "
			       "https://mirror.example)");
	if (ctx->node_sock)
		return cli_fail("replicate", "works on a data directory (--data DIR), not a running "
			       "node; to make a running node follow %s, start it with --upstream %s",
			       url, url);
	if (ctx->store_dir)
		return cli_fail("replicate", "takes --data DIR (a pithd data directory; the store is "
			       "DIR/store), not --store");
	if (strncasecmp(url, "https://", 8) && strncasecmp(url, "http://", 7))
		return cli_fail("replicate", "%s: not an http:// or https:// URL", url);
	if (strlen(url) >= sizeof(r.base) - 64)
		return cli_fail("replicate", "URL longer than %d bytes", (int)sizeof(r.base) - 64);
	snprintf(r.base, sizeof(r.base), "%s", url);
	for (size_t l = strlen(r.base); l && r.base[l - 1] == '/'; l--)
		r.base[l - 1] = 0;
	if (r.ca_file && access(r.ca_file, R_OK))
		return cli_fail("replicate", "--ca-file %s: %s", r.ca_file, strerror(errno));
	log_set_level(LOG_ERROR); /* the follower's warnings come as this command's lines */

	pith_err_t err = {0};
	if (hc_global_init(&err)) /* before any thread (hclient.h) */
		return cli_fail("replicate", "%s", err.msg);
	curl_up = 1;
	if (evthread_use_pthreads() || !(r.loop = event_base_new())) {
		cli_fail("replicate", "cannot set up an event loop");
		goto out;
	}
	hc_opts_t ho;
	hc_opts_default(&ho);
	ho.ca_file = r.ca_file;
	ho.user_agent = "pithctl-replicate/1";
	ho.origins = r.origins;
	ho.n_origins = r.n_origins;
	if (hc_new(r.loop, &ho, &r.hc, &err)) {
		cli_fail("replicate", "%s", err.msg);
		goto out;
	}
	if (preflight(&r))
		goto out;
	read_health(&r);
	if (make_data_dir(r.data_dir, store_dir, sizeof(store_dir))) /* not before: a typo makes none */
		goto out;

	cli_ctx_t sctx = *ctx;
	sctx.store_dir = store_dir;
	if (cli_store_open(&sctx, "replicate", 1, &trust, &r.st))
		goto out;
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	if (!(r.pipe = ingest_new(r.loop, trust, r.st, threads > 0 ? (int)threads : 1, 0,
				  REP_BODY_MAX, NULL, on_job, &r))) {
		cli_fail("replicate", "cannot start worker threads");
		goto out;
	}
	const char *urls[1] = {r.base};
	follower_opts_t fo = {.urls = urls, .n_urls = 1, .ca_file = r.ca_file,
			      .data_dir = r.data_dir, .refresh_s = r.refresh_s, .max_inflight = 16,
			      .negative_ttl_s = 600, .max_body = REP_BODY_MAX, .stall_s = 15,
			      .feed_page = REP_PAGE, .feed_default = 1,
			      .origins = r.origins, .n_origins = r.n_origins};
	follower_deps_t fd = {.base = r.loop, .store = r.st, .ingest = r.pipe};
	if (follower_new(&fd, &fo, &r.fol, &err)) {
		cli_fail("replicate", "%s", err.msg);
		goto out;
	}
	if (!(r.tick = event_new(r.loop, -1, EV_PERSIST, on_tick, &r)) ||
	    event_add(r.tick, &(struct timeval){0, 200000}) ||
	    !(r.sigint = evsignal_new(r.loop, SIGINT, on_signal, &r)) || event_add(r.sigint, NULL) ||
	    !(r.sigterm = evsignal_new(r.loop, SIGTERM, on_signal, &r)) ||
	    event_add(r.sigterm, NULL)) {
		cli_fail("replicate", "cannot set up an event loop");
		goto out;
	}
	r.bar = !no_progress && isatty(2);
	r.lines = !no_progress && !r.bar;
	store_counts_get(r.st, &r.at_start);
	r.t0 = r.last_line = cli_now();
	if (!r.json && r.up_records >= 0)
		fprintf(stderr, "pithctl replicate: %s (%lld records) into %s (%s)\n", r.base,
			(long long)r.up_records, r.data_dir,
			r.at_start.records ? "continuing: the records it holds are skipped" : "new");
	else if (!r.json)
		fprintf(stderr, "pithctl replicate: %s into %s (%s; the upstream does not say how "
			"many records it has)\n", r.base, r.data_dir,
			r.at_start.records ? "continuing" : "new");
	event_base_dispatch(r.loop);
	/* a second Ctrl-C while the pipeline drains ends the process at once:
	 * safe, as after a kill (the next run reads the page again) */
	event_free(r.sigint);
	event_free(r.sigterm);
	r.sigint = r.sigterm = NULL;

	ingest_free(r.pipe); /* every job back, committed or not, before the follower goes */
	int interrupted = r.stop_sig && !r.caught_up;
	follower_progress_t fp;
	follower_progress(r.fol, &fp);
	if (r.once || !r.caught_up)
		draw(&r, 1); /* following: the bar ended when it caught up */
	if (r.once && r.caught_up)
		read_health(&r); /* the counts to compare with, as of now */
	summary(&r, interrupted);
	rc = 0;
	if (r.down) {
		rc = cli_fail("replicate", "%s appears down (%u failures in a row; the last: %s); what "
			     "was fetched is kept: run the same command later to continue",
			     r.base, fp.fails, fp.last_error);
	} else if (interrupted) {
		fprintf(stderr, "pithctl replicate: interrupted; what was fetched is kept: run the "
			"same command again to continue where it stopped\n");
		rc = 130;
	} else if (fp.rejected || fp.diverged) {
		rc = cli_fail("replicate", "%llu bundles or events were refused and %llu records still "
			     "differ from the upstream's (the lines above say why): the replica is not "
			     "identical", (unsigned long long)fp.rejected, (unsigned long long)fp.diverged);
	}
out:
	ingest_free(r.pipe);
	follower_free(r.fol);
	hc_free(r.hc);
	if (r.tick)
		event_free(r.tick);
	if (r.sigint)
		event_free(r.sigint);
	if (r.sigterm)
		event_free(r.sigterm);
	if (r.loop)
		event_base_free(r.loop);
	if (curl_up)
		hc_global_cleanup();
	store_close(r.st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_replicate = {
	"replicate", "make and keep a complete, verified replica of an upstream",
	"usage: pithctl [--trust-key FILE]... replicate URL [--data DIR] [--once | --follow]\n"
	"                [--refresh SECONDS] [--ca-file FILE] [--upstream-origin URL]...\n"
	"                [--no-progress] [--json]\n\n"
	"Copies every record of the upstream at URL (a pithd mirror, or anything\n"
	"serving its change feed, /api/changes) into DIR (default ./pith-replica,\n"
	"made when missing; a pithd data directory: the store is DIR/store), each\n"
	"bundle and event verified as `import` verifies it, then keeps it current:\n"
	"the feed is asked again every --refresh seconds (default 60) until Ctrl-C\n"
	"(--follow, the default), or the command ends once the replica has caught up\n"
	"(--once). The feed's cursor is kept in DIR/upstream-cursors, saved after\n"
	"every 200 records: run the same command after an interrupt and it goes on\n"
	"from there, fetching only what DIR lacks. `pithd --data DIR --upstream URL`\n"
	"serves the replica and keeps following from the same cursor.\n"
	"Progress on stderr: a bar when it is a terminal (records, bytes, rate, time\n"
	"left), else a line every 5 s; --no-progress: none. Then a summary on stdout\n"
	"(--json: one object), compared with the upstream's counts (its /healthz).\n"
	"TLS is verified (--ca-file: the CA certificates to trust instead).\n"
	"Requests go only to URL's origin and to each --upstream-origin (repeatable,\n"
	"like https://cdn.example: where its manifest or redirects may send bundles;\n"
	"never from https to http).\n\n"
	"Exit status: 0 once caught up with nothing refused (after Ctrl-C when\n"
	"following); 1 on an error (the upstream unreachable, TLS, not a pith\n"
	"upstream, down for --once, something refused); 130 when interrupted\n"
	"before it caught up.\n",
	run,
};
