/* http_serve: the HTTP views over a store, without the rest of pithd - for
 * tests and benchmarks of node/http.c.
 *
 * usage: http_serve --store DIR [--listen HOST:PORT] [--public-url URL]
 *                   [--name NAME] [--trust-key FILE]... [--threads N]
 *                   [--mirror NAME=URL]... [--max-body N] [--max-header N]
 *                   [--max-post-events N] [--max-inflight N] [--timeout S]
 *                   [--request-timeout S] [--max-connections N]
 *                   [--cache-mb N] [--worker-nice N] [--port-file FILE]
 *                   [--no-submit] [--search FILE] [--render-threads N]
 *                   [--operator WHO] [--contact HOW] [--max-age S]
 *                   [--hup-name NAME [--hup-operator WHO] [--hup-contact HOW]]
 *                   [--loops N]
 *
 * Opens (or creates) the store with the trusted keys as registry keys, as
 * pithd does; starts the validation pipeline of node/ingest/ingest.c (the one
 * pithd uses) with N threads (default 2) as the submit hook of
 * POST /events; serves until SIGTERM or SIGINT. Prints "listening on
 * IP:PORT" on stdout once serving and, with --port-file, writes the port
 * there. --no-submit leaves POST /events without a pipeline (503).
 * --search FILE keeps the search index (node/search/search.h) in FILE, fed by
 * its thread as pithd's is (without it, /search answers 503).
 * --worker-nice N (default 0) runs the validators, the writer and
 * RocksDB's background threads N nice steps below the loop, as pithd's
 * worker_nice does. --render-threads N (default 2) renders the record
 * documents on N threads off the loop, as pithd's http_render_threads (0:
 * on the loop): the http tests run through the pool unless told.
 * --max-age S: the record documents' Cache-Control max-age (pithd's
 * http_max_age; default 60).
 * --name, --operator, --contact: who the mirror is (pithd's mirror_*);
 * with --hup-name, SIGHUP makes the --hup-* names the mirror's
 * (http_set_identity), as pithd's reload does.
 * --loops N: N serving loops on the port, as pithd's http_loops (default:
 * the environment's PITH_TEST_HTTP_LOOPS, else 0: the loop serves it), so
 * that a test of the views runs again through the serving loops. */
#include <event2/event.h>
#include <event2/thread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "idmap.h"
#include "ingest.h"
#include "log.h"
#include "prio.h"
#include "search.h"
#include "store.h"
#include "trust.h"

#define MAX_MIRRORS 16

typedef struct serve {
	struct event_base *base;
	http_t *http;
	ingest_t *ingest;
	search_t *search;
	const char *hup[3];      /* --hup-name, --hup-operator, --hup-contact */
} serve_t;

static void on_done(void *arg, ingest_job_t *job)
{
	serve_t *s = arg;
	if (s->http)
		http_job_done(s->http, job);
	search_kick(s->search);
	ingest_job_free(job);
}

static void submit(void *arg, ingest_job_t *job)
{
	serve_t *s = arg;
	ingest_submit(s->ingest, job);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopexit(arg, NULL);
}

/* SIGHUP: the names of --hup-* become the mirror's, as pithd's reload
 * applies a changed mirror_name (node_apply_mirror_identity). */
static void on_hup(evutil_socket_t sig, short what, void *arg)
{
	serve_t *s = arg;
	(void)sig;
	(void)what;
	http_set_identity(s->http, s->hup[0], s->hup[1], s->hup[2]);
}

static int usage(void)
{
	fprintf(stderr, "usage: http_serve --store DIR [--listen HOST:PORT] [--public-url URL] "
			"[--name NAME] [--trust-key FILE]... [--threads N] [--mirror NAME=URL]... "
			"[--max-body N] [--max-header N] [--max-post-events N] [--max-inflight N] "
			"[--timeout S] [--request-timeout S] [--max-connections N] [--cache-mb N] "
			"[--worker-nice N] [--port-file FILE] [--no-submit] [--search FILE] [--render-threads N] "
			"[--operator WHO] [--contact HOW] [--hup-name NAME [--hup-operator WHO] "
			"[--hup-contact HOW]]\n");
	return 2;
}

static int add_key(pith_trust_t *t, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "http_serve: cannot open %s\n", path);
		return -1;
	}
	static uint8_t buf[65536];
	size_t len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	pith_key_t k;
	pith_err_t err = {0};
	if (pith_keyfile_parse(buf, len, &k, NULL, NULL, &err) || pith_trust_add(t, &k)) {
		fprintf(stderr, "http_serve: %s: %s\n", path, err.msg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *search_path = NULL;
	const char *store_dir = NULL, *port_file = NULL;
	const char *hup[3] = {NULL, NULL, NULL};
	http_opts_t o;
	http_opts_default(&o);
	o.listen = "127.0.0.1:0";
	o.render_threads = 2;
	if (getenv("PITH_TEST_HTTP_LOOPS"))
		o.loops = atoi(getenv("PITH_TEST_HTTP_LOOPS"));
	int threads = 2, no_submit = 0, worker_nice = 0;
	size_t cache_mb = 0;
	http_mirror_t mirrors[MAX_MIRRORS];
	size_t nmirrors = 0;
	static char mirror_text[MAX_MIRRORS][512];
	pith_trust_t *trust = pith_trust_new();
	if (!trust || sodium_init() < 0)
		return 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && ++i)
		if (OPT("--store"))
			store_dir = v;
		else if (OPT("--listen"))
			o.listen = v;
		else if (OPT("--public-url"))
			o.public_url = v;
		else if (OPT("--name"))
			o.name = v;
		else if (OPT("--operator"))
			o.operator_name = v;
		else if (OPT("--contact"))
			o.contact = v;
		else if (OPT("--hup-name"))
			hup[0] = v;
		else if (OPT("--hup-operator"))
			hup[1] = v;
		else if (OPT("--hup-contact"))
			hup[2] = v;
		else if (OPT("--trust-key")) {
			if (add_key(trust, v))
				return 2;
		} else if (OPT("--threads"))
			threads = atoi(v);
		else if (OPT("--mirror")) {
			char *eq;
			if (nmirrors == MAX_MIRRORS || strlen(v) >= sizeof(mirror_text[0]) ||
			    !(eq = strchr(strcpy(mirror_text[nmirrors], v), '=')))
				return usage();
			*eq = 0;
			mirrors[nmirrors].name = mirror_text[nmirrors];
			mirrors[nmirrors].base_url = eq + 1;
			nmirrors++;
		} else if (OPT("--max-body"))
			o.max_body_bytes = strtoull(v, NULL, 10);
		else if (OPT("--max-header"))
			o.max_header_bytes = strtoull(v, NULL, 10);
		else if (OPT("--max-post-events"))
			o.max_post_events = strtoull(v, NULL, 10);
		else if (OPT("--max-inflight"))
			o.max_inflight = strtoull(v, NULL, 10);
		else if (OPT("--timeout"))
			o.timeout_s = atoi(v);
		else if (OPT("--request-timeout"))
			o.request_timeout_s = atoi(v);
		else if (OPT("--max-connections"))
			o.max_connections = strtoull(v, NULL, 10);
		else if (OPT("--worker-nice"))
			worker_nice = atoi(v);
		else if (OPT("--cache-mb"))
			cache_mb = strtoull(v, NULL, 10);
		else if (OPT("--port-file"))
			port_file = v;
		else if (OPT("--search"))
			search_path = v;
		else if (OPT("--render-threads"))
			o.render_threads = atoi(v);
		else if (OPT("--loops"))
			o.loops = atoi(v);
		else if (OPT("--max-age"))
			o.cache_max_age = atoi(v);
		else if (!strcmp(a, "--no-submit"))
			no_submit = 1;
		else
			return usage();
#undef OPT
	}
	if (!store_dir || threads < 1 || threads > 64 || worker_nice < 0 ||
	    worker_nice > PRIO_NICE_MAX)
		return usage();
	signal(SIGPIPE, SIG_IGN);
	idmap_init();
	if (evthread_use_pthreads())
		return 1;

	int rc = 1;
	pith_err_t err = {0};
	store_t *st = NULL;
	serve_t s = {0};
	store_opts_t so = {.create = 1, .registry = trust, .cache_bytes = cache_mb << 20};
	struct event *sig_term = NULL, *sig_int = NULL, *sig_hup = NULL;
	memcpy(s.hup, hup, sizeof(s.hup));
	if (store_open(store_dir, &so, &st, &err)) {
		fprintf(stderr, "http_serve: %s\n", err.msg);
		goto out;
	}
	if (prio_lower_threads_named("rocksdb:", worker_nice) < 0)
		fprintf(stderr, "http_serve: cannot lower the priority of RocksDB's threads\n");
	if (search_path && (search_open(search_path, st, &s.search, &err) ||
			    search_start(s.search, 1000, worker_nice, &err))) {
		fprintf(stderr, "http_serve: %s\n", err.msg);
		goto out;
	}
	o.search = s.search;
	s.base = event_base_new();
	if (!s.base)
		goto out;
	if (!no_submit) {
		s.ingest = ingest_new(s.base, trust, st, threads, worker_nice, 64u << 20, NULL,
				      on_done, &s);
		if (!s.ingest) {
			fprintf(stderr, "http_serve: cannot start the validation threads\n");
			goto out;
		}
	}
	http_hooks_t hooks = {.submit = submit, .arg = &s};
	if (http_new(s.base, st, NULL, &o, no_submit ? NULL : &hooks, &s.http, &err)) {
		fprintf(stderr, "http_serve: %s\n", err.msg);
		goto out;
	}
	if (nmirrors && http_mirrors_set(s.http, mirrors, nmirrors) < 0)
		goto out;
	sig_term = evsignal_new(s.base, SIGTERM, on_signal, s.base);
	sig_int = evsignal_new(s.base, SIGINT, on_signal, s.base);
	if (!sig_term || !sig_int)
		goto out;
	event_add(sig_term, NULL);
	event_add(sig_int, NULL);
	if (hup[0] && (!(sig_hup = evsignal_new(s.base, SIGHUP, on_hup, &s)) ||
		       event_add(sig_hup, NULL)))
		goto out;
	if (port_file) {
		FILE *f = fopen(port_file, "w");
		if (!f || fprintf(f, "%u\n", http_port(s.http)) < 0 || fclose(f)) {
			fprintf(stderr, "http_serve: cannot write %s\n", port_file);
			goto out;
		}
	}
	printf("listening on %s\n", http_listen_str(s.http));
	fflush(stdout);
	rc = event_base_dispatch(s.base) < 0;
out:
	/* the server first (it drops waiting requests), then the pipeline
	 * (its jobs come back to on_done, no longer recognised) */
	http_free(s.http);
	ingest_free(s.ingest);
	search_free(s.search);
	if (sig_term)
		event_free(sig_term);
	if (sig_hup)
		event_free(sig_hup);
	if (sig_int)
		event_free(sig_int);
	if (s.base)
		event_base_free(s.base);
	store_close(st);
	pith_trust_free(trust);
	return rc;
}
