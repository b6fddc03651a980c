/* pithctl pull --from BASE_URL [ID...]: records from an HTTP(S) upstream
 * (the registry or a static mirror) into the store (issue 14, item 1).
 *
 * Each ID (any form pith_id_parse takes) is resolved at the upstream when
 * it is not a full pith number (/api/pith-number/resolve), its bundle
 * fetched through the upstream manifest's bundle_pattern (or the registry's
 * two fixed layouts), and handed to the ingest pipeline as `import` hands
 * bundles: in groups (up to PULL_GROUP_MAX, or what arrived within
 * PULL_GROUP_WAIT_MS), verified on worker threads, then committed. Everything
 * runs on an event loop of this command's own: the daemon's HTTP client
 * (hclient.h: at most PULL_INFLIGHT transfers at once, connections reused)
 * and the pipeline's loop adapter (ingest.h) hand their results back there.
 *
 * Each bundle's ETag is kept in DIR/pull-etags (docs/upstream.md says why
 * there): the next run sends If-None-Match, and a 304 costs neither a
 * download nor a verification.
 *
 * Every request (manifest, resolve, bundle) is asked again, up to
 * --retries times, when its failure may mend (hc_result_is_transient: 5xx
 * but 501/505, 408, 429, network-level failures): after the upstream's
 * Retry-After on a 429 or 503 (over PULL_RETRY_AFTER_MAX_S: not retried),
 * else after hc_backoff_us from PULL_RETRY_FIRST_US, one stderr line each.
 * At most PULL_INFLIGHT requests are busy at once, running or waiting for
 * their retry; IDs start as places free. A Retry-After holds back every
 * request of the run, not only its own: none starts (new IDs, retries,
 * follow-ups) until it is over.
 * When PULL_DOWN_AFTER requests in a row fail after their retries, the
 * upstream is taken for down: nothing more is asked, the IDs not started
 * are counted as not attempted, and one stderr line says so. */
#include "cmd_pull_int.h"
#include "follow_origin.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/http.h>
#include <event2/thread.h>

/* ---- the ETag file ----------------------------------------------------------
 * One line per record: "PITH_NUMBER ETAG URL" (follow_etags.h). Written
 * whole at the end of a run. */

static void etag_path(const pull_t *p, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", p->ctx->store_dir, PULL_ETAG_FILE);
}

/* Reads the ETag file; lines that do not parse are dropped (it is only a
 * cache: the worst a lost line costs is one full download). */
static int etags_load(pull_t *p)
{
	char path[4096];
	etag_path(p, path, sizeof(path));
	if (!(p->etags = follow_etags_new()))
		return cli_fail("pull", "out of memory");
	if (follow_etags_load(p->etags, path))
		return errno == ENOMEM ? cli_fail("pull", "out of memory")
				       : cli_fail("pull", "cannot open %s: %s", path, strerror(errno));
	return 0;
}

/* The file gets what this run stored or found unchanged (an ETag each). */
static int etags_save(pull_t *p)
{
	char path[4096];
	etag_path(p, path, sizeof(path));
	for (size_t i = 0; i < p->nitems; i++) {
		const pull_item_t *it = &p->items[i];
		if ((it->result == RES_STORED || it->result == RES_UNCHANGED) && it->etag[0] &&
		    it->pith[0] && follow_etags_put(p->etags, it->pith, it->etag, it->url) == PITH_ENOMEM)
			return cli_fail("pull", "out of memory");
	}
	if (follow_etags_save(p->etags, path))
		return cli_fail("pull", "cannot write %s: %s", path, strerror(errno));
	return 0;
}

/* ---- results ----------------------------------------------------------------- */

static void draw_progress(pull_t *p, int final)
{
	if (!p->tty)
		return;
	if (!cli_progress_due(&p->last_draw, final))
		return;
	fprintf(stderr, "\r\033[Kpull: %zu/%zu, stored %llu, unchanged %llu, not found %llu, "
		"rejected %llu, failed %llu", p->done, p->nitems, (unsigned long long)p->stored,
		(unsigned long long)p->unchanged, (unsigned long long)p->not_found,
		(unsigned long long)p->rejected, (unsigned long long)p->failed);
	if (final)
		fputc('\n', stderr);
}

/* Whether the run is over: every item started is done, and no other will
 * start (all started, or the upstream is down). */
void pull_check_finished(pull_t *p)
{
	p->finished = p->done == (p->down ? p->next : p->nitems);
}

/* Ends it with res; a line on stderr for anything but stored/unchanged. */
static void item_finish(pull_t *p, pull_item_t *it, pull_result_t res)
{
	it->step = STEP_DONE;
	it->result = res;
	p->done++;
	pull_check_finished(p);
	pith_buf_release(&it->resp); /* a failed item may hold up to a body's cap */
	const char *what = NULL;
	switch (res) {
	case RES_STORED: p->stored++; break;
	case RES_UNCHANGED: p->unchanged++; break;
	case RES_NOT_FOUND: p->not_found++; what = "not found"; break;
	case RES_REJECTED:
		p->rejected++;
		cli_reasons_count(&p->reasons, it->reason);
		what = "rejected";
		break;
	case RES_FAILED: p->failed++; what = "failed"; break;
	case RES_NONE: break;
	}
	if (res == RES_REJECTED && it->has_old)
		follow_etags_drop(p->etags, it->body); /* never answer 304 for what we refused */
	if (what) {
		if (p->tty)
			fputs("\r\033[K", stderr);
		if (res == RES_REJECTED)
			fprintf(stderr, "pithctl pull: %s: rejected (%s): %s\n", it->text, it->reason,
				it->msg);
		else
			fprintf(stderr, "pithctl pull: %s: %s: %s\n", it->text, what, it->msg);
	}
	draw_progress(p, 0);
}

/* The URL of candidate it->candidate: the manifest's pattern, else the
 * registry's /pith/{suffix}/bundle.json, then its .well-known form. 0, or
 * 1 when there is no further candidate. */
static int bundle_url(pull_t *p, pull_item_t *it)
{
	pith_err_t err = {0};
	int rc = pith_bundle_url(p->pattern, p->base, (unsigned)it->candidate, it->body, it->url,
				 sizeof(it->url), &err);
	if (rc < 0) {
		snprintf(it->msg, sizeof(it->msg), "bundle URL: %s", err.msg);
		return -1;
	}
	return rc;
}

static void on_answer(void *arg, const hc_result_t *r);

/* The ETag to send for it's bundle: the one of the ETag file, if for this
 * URL and while the store still holds a bundle of the record. */
static const char *item_if_none_match(pull_t *p, pull_item_t *it)
{
	const follow_etag_t *e = follow_etags_get(p->etags, it->body);
	it->has_old = 0;
	if (e && !strcmp(e->url, it->url) && strlen(e->name) == PITH_NUMBER_LEN) {
		int64_t us;
		uint8_t sha[32];
		pith_err_t err = {0};
		if (!store_bundle_newest(p->st, e->name, &us, sha, &err)) {
			it->has_old = 1;
			snprintf(it->old_pith, sizeof(it->old_pith), "%s", e->name);
			snprintf(it->old_etag, sizeof(it->old_etag), "%s", e->etag);
			return it->old_etag;
		}
	}
	return NULL;
}

/* Asks for it's next answer: a resolve or its bundle. */
static void item_next(pull_t *p, pull_item_t *it)
{
	hc_req_t req = {.url = it->url, .body_cap = PULL_SMALL_MAX};
	if (it->step == STEP_RESOLVE) {
		const char *key = it->id.kind == PITH_ID_ARXIV ? "arxiv" :
				  it->id.kind == PITH_ID_DOI ? "doi" : "pith";
		const char *val = it->id.kind == PITH_ID_ARXIV ? it->id.arxiv : it->id.value;
		char *esc = evhttp_uriencode(val, -1, 0);
		if (!esc) {
			snprintf(it->msg, sizeof(it->msg), "out of memory");
			item_finish(p, it, RES_FAILED);
			return;
		}
		snprintf(it->url, sizeof(it->url), "%s/api/pith-number/resolve?%s=%s&json=true", p->base,
			 key, esc);
		free(esc);
	} else {
		int r = bundle_url(p, it);
		if (r) {
			item_finish(p, it, r > 0 ? RES_NOT_FOUND : RES_FAILED);
			return;
		}
		req.body_cap = PULL_BODY_MAX;
		req.max_redirects = HC_BUNDLE_REDIRECTS; /* on its own origin only (hclient.h) */
		req.if_none_match = item_if_none_match(p, it);
	}
	pull_get(p, &it->get, &req, on_answer, it);
}

static void set_pith(pull_item_t *it, const pith_id_t *id)
{
	snprintf(it->body, sizeof(it->body), "%.26s", id->kind == PITH_ID_FULL ? id->value : "");
	snprintf(it->pith, sizeof(it->pith), "%s", id->number);
}

/* Starts it: a full pith number at its bundle, anything else at the
 * resolve. */
void pull_item_start(pull_t *p, pull_item_t *it)
{
	it->p = p;
	if (it->id.kind == PITH_ID_FULL) {
		set_pith(it, &it->id);
		it->step = STEP_BUNDLE;
	} else {
		it->step = STEP_RESOLVE;
	}
	item_next(p, it);
}

static void resolve_done(pull_t *p, pull_item_t *it, const hc_result_t *r)
{
	long status = r->status;
	pith_err_t err = {0};
	if (status == 404) {
		snprintf(it->msg, sizeof(it->msg), "%s answered 404", it->url);
		item_finish(p, it, RES_NOT_FOUND);
		return;
	}
	if (status == 200) {
		char num[PITH_NUMBER_LEN + 1];
		int rc = pith_resolve_answer_parse(r->body, r->body_len, NULL, num, &err);
		if (rc == PITH_ENOTFOUND) {
			snprintf(it->msg, sizeof(it->msg), "%s names no pith number", it->url);
			item_finish(p, it, RES_NOT_FOUND);
			return;
		}
		if (rc) {
			snprintf(it->msg, sizeof(it->msg), "%s: bad answer: %s", it->url, err.msg);
			item_finish(p, it, RES_FAILED);
			return;
		}
		snprintf(it->pith, sizeof(it->pith), "%s", num);
		snprintf(it->body, sizeof(it->body), "%s", num + 10);
	} else if (status >= 300 && status < 400 && status != 304) {
		pith_id_t id;
		if (r->location_too_long || !r->location[0] ||
		    pith_resolve_location_parse(r->location, strlen(r->location), p->base, &id,
						&err)) {
			snprintf(it->msg, sizeof(it->msg), "%s: HTTP %ld with a bad Location: %s", it->url,
				 status, r->location_too_long ? "too long" : r->location[0] ? err.msg :
				 "missing");
			item_finish(p, it, RES_FAILED);
			return;
		}
		set_pith(it, &id);
	} else {
		snprintf(it->msg, sizeof(it->msg), "HTTP %ld from %s%s", status, it->url, it->get.note);
		item_finish(p, it, RES_FAILED);
		return;
	}
	it->step = STEP_BUNDLE;
	it->candidate = 0;
	item_next(p, it);
}

/* Hands the gathered bundles to the pipeline as one group. */
static void gather_flush(pull_t *p)
{
	pull_group_t *gr = p->gather;
	if (!gr)
		return;
	p->gather = NULL;
	evtimer_del(p->gather_ev);
	ingest_submit_group(p->pipe, &gr->g, gr->jobs, gr->n);
}

static void on_gather_timer(evutil_socket_t fd, short what, void *arg)
{
	gather_flush(arg);
}

/* Adds it's job to the bundles gathered for the pipeline; hands them over
 * when the group is full, or when no transfer is left that could add to
 * it (none runs or waits and no item is left to start: in a done callback,
 * the transfer that just finished no longer counts). */
static void gather_add(pull_t *p, pull_item_t *it)
{
	if (!p->gather) {
		if (!(p->gather = calloc(1, sizeof(*p->gather)))) {
			ingest_submit(p->pipe, &it->job); /* alone, then */
			return;
		}
		struct timeval wait = {0, PULL_GROUP_WAIT_MS * 1000};
		evtimer_add(p->gather_ev, &wait);
	}
	pull_group_t *gr = p->gather;
	it->group = gr;
	gr->jobs[gr->n++] = &it->job;
	gr->bytes += it->job.len;
	if (gr->n == PULL_GROUP_MAX || gr->bytes >= PULL_GROUP_BYTES ||
	    (!p->busy && (p->down || p->next == p->nitems)))
		gather_flush(p);
}

static void bundle_done(pull_t *p, pull_item_t *it, const hc_result_t *r)
{
	long status = r->status;
	if (status == 304 && it->has_old) {
		p->not_modified++;
		snprintf(it->pith, sizeof(it->pith), "%s", it->old_pith);
		snprintf(it->etag, sizeof(it->etag), "%s", it->old_etag);
		follow_etags_drop(p->etags, it->body); /* written again from the item */
		item_finish(p, it, RES_UNCHANGED);
		return;
	}
	if (status == 404) {
		snprintf(it->msg, sizeof(it->msg), "%s answered 404", it->url);
		it->candidate++;
		item_next(p, it);
		return;
	}
	if (status != 200) {
		snprintf(it->msg, sizeof(it->msg), "HTTP %ld from %s%s", status, it->url, it->get.note);
		item_finish(p, it, RES_FAILED);
		return;
	}
	p->full_bundles++;
	snprintf(it->etag, sizeof(it->etag), "%s", r->etag);
	/* the body outlives the callback: the pipeline borrows it */
	if (pith_buf_append(&it->resp, r->body, r->body_len)) {
		snprintf(it->msg, sizeof(it->msg), "%s: out of memory", it->url);
		item_finish(p, it, RES_FAILED);
		return;
	}
	/* verified and stored as import does it: the pipeline decides */
	ingest_job_init(&it->job, INGEST_BUNDLE, it->resp.data, it->resp.len);
	/* the record asked for, by its number or (a bare body) by its body:
	 * a validly signed bundle of another record at that URL is refused */
	if (it->pith[0] || it->body[0]) {
		it->job.has_claim = 1;
		snprintf(it->job.claimed_pith, sizeof(it->job.claimed_pith), "%s",
			 it->pith[0] ? it->pith : it->body);
	}
	it->step = STEP_INGEST;
	gather_add(p, it);
}

/* An answer (or a failure) from the HTTP client moves the item on. */
static void on_answer(void *arg, const hc_result_t *r)
{
	pull_item_t *it = arg;
	pull_t *p = it->p;
	if (r->curl_code) {
		snprintf(it->msg, sizeof(it->msg), "%s: %s%s", it->url, r->error, it->get.note);
		item_finish(p, it, RES_FAILED);
	} else if (it->step == STEP_RESOLVE) {
		resolve_done(p, it, r);
	} else {
		bundle_done(p, it, r);
	}
}

/* The pipeline hands a bundle back (on this thread). */
static void job_done(void *arg, ingest_job_t *job)
{
	pull_t *p = arg;
	pull_item_t *it = (pull_item_t *)job;
	pull_group_t *gr = it->group;
	ingest_job_clear(job); /* what validation left; the results stay */
	job->bytes = NULL;
	it->group = NULL;
	if (gr && ++gr->back == gr->n)
		free(gr); /* its jobs are all back: the pipeline is done with it */
	if (job->rc) {
		it->reason = job->fail == INGEST_FAIL_UNTRUSTED || job->fail == INGEST_FAIL_BUNDLE ?
			"bundle" : job->reason ? job->reason : "rejected";
		snprintf(it->msg, sizeof(it->msg), "%s: %s", it->url, job->msg);
		it->etag[0] = 0;
		item_finish(p, it, RES_REJECTED);
	} else {
		snprintf(it->pith, sizeof(it->pith), "%s", job->subject);
		if (it->has_old)
			follow_etags_drop(p->etags, it->body);
		item_finish(p, it, job->bundle_outcome == STORE_BUNDLE_NEWER ? RES_STORED :
			    RES_UNCHANGED);
	}
}

/* Runs the loop until *done is set. A tick keeps the loop waiting while
 * only the pipeline (woken from its threads) has work, and redraws the
 * progress line. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	draw_progress(arg, 0);
}

static void pull_run(pull_t *p, const int *done)
{
	while (!*done && event_base_loop(p->loop, EVLOOP_ONCE) >= 0)
		;
}

/* ---- the manifest ------------------------------------------------------------ */

typedef struct manifest_get {
	pull_t *p;
	pull_get_t get;
	int done;
} manifest_get_t;

/* The manifest's answer: the mirror whose base_url is ours, else the
 * first, gives the bundle pattern. Any failure: the fixed layouts. */
static void on_manifest(void *arg, const hc_result_t *r)
{
	manifest_get_t *g = arg;
	pull_t *p = g->p;
	g->done = 1;
	pith_manifest_t *man = NULL;
	pith_err_t err = {0};
	if (r->curl_code) {
		fprintf(stderr, "pithctl pull: %s: %s%s (trying the registry's layout)\n", r->url,
			r->error, g->get.note);
	} else if (r->status != 200) {
		if (r->status != 404)
			fprintf(stderr, "pithctl pull: %s: HTTP %ld%s (trying the registry's layout)\n",
				r->url, r->status, g->get.note);
	} else if (!(man = malloc(sizeof(*man)))) {
		/* the fixed layouts then */
	} else if (pith_manifest_parse(r->body, r->body_len, NULL, man, &err)) {
		fprintf(stderr, "pithctl pull: %s: %s (trying the registry's layout)\n", r->url, err.msg);
	} else {
		const pith_mirror_t *mi = man->n_mirrors ? &man->mirrors[0] : NULL;
		for (size_t i = 0; i < man->n_mirrors; i++)
			if (hc_url_same(man->mirrors[i].base_url, p->base)) {
				mi = &man->mirrors[i];
				break;
			}
		if (mi && mi->bundle_pattern[0] && !follow_origin_ok(p->base, mi->bundle_pattern, p->origins, p->n_origins))
			fprintf(stderr, "pithctl pull: %s: bundle_pattern %s is not on %s's origin "
				"nor one listed with --upstream-origin (trying the registry's layout)\n", r->url, mi->bundle_pattern, p->base);
		else if (mi)
			snprintf(p->pattern, sizeof(p->pattern), "%s", mi->bundle_pattern);
	}
	free(man);
}

/* Reads BASE/pith-mirrors.json for the bundle pattern, before any ID. */
static void manifest_read(pull_t *p)
{
	char url[PULL_URL_CAP];
	snprintf(url, sizeof(url), "%s/pith-mirrors.json", p->base);
	manifest_get_t g = {.p = p};
	hc_req_t req = {.url = url, .body_cap = PULL_SMALL_MAX};
	pull_get(p, &g.get, &req, on_manifest, &g);
	pull_run(p, &g.done);
	if (g.get.wait)
		event_free(g.get.wait);
}

/* ---- IDs ----------------------------------------------------------------------- */

/* Adds the ID text (kept by pointer); where ("FILE:LINE: " or "") prefixes
 * the error. */
static int add_id(pull_t *p, size_t *cap, const char *text, const char *where)
{
	if (p->nitems == PULL_IDS_MAX)
		return cli_fail("pull", "too many IDs (%u at most)", PULL_IDS_MAX);
	if (p->nitems == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		pull_item_t *n = realloc(p->items, ncap * sizeof(*n));
		if (!n)
			return cli_fail("pull", "out of memory");
		p->items = n;
		*cap = ncap;
	}
	pull_item_t *it = &p->items[p->nitems];
	memset(it, 0, sizeof(*it));
	it->text = text;
	pith_err_t err = {0};
	if (pith_id_parse(text, &it->id, &err))
		return cli_fail("pull", "%s%s", where, err.msg);
	p->nitems++;
	return 0;
}

/* --ids FILE: one ID a line; blank lines and '#' comments skipped. The
 * texts live in *keep. */
static int read_ids(pull_t *p, size_t *cap, const char *path, pith_buf_t *keep)
{
	if (cli_read_file(path, CLI_MAX_INPUT, keep) || pith_buf_putc(keep, 0))
		return 1;
	char *s = (char *)keep->data;
	size_t lineno = 0;
	while (*s) {
		char *nl = strchr(s, '\n');
		if (nl)
			*nl = 0;
		lineno++;
		char *h = strchr(s, '#');
		if (h)
			*h = 0;
		char *e = s + strlen(s);
		while (e > s && isspace((unsigned char)e[-1]))
			*--e = 0;
		while (isspace((unsigned char)*s))
			s++;
		if (*s) {
			char where[4200];
			snprintf(where, sizeof(where), "%s:%zu: ", path, lineno);
			if (add_id(p, cap, s, where))
				return 1;
		}
		if (!nl)
			break;
		s = nl + 1;
	}
	return 0;
}

static void print_summary(pull_t *p, double secs)
{
	if (p->ctx->json) {
		printf("{\"stored\":%llu,\"unchanged\":%llu,\"not_found\":%llu,\"rejected\":%llu,"
		       "\"failed\":%llu,\"not_attempted\":%zu,\"reasons\":{",
		       (unsigned long long)p->stored, (unsigned long long)p->unchanged,
		       (unsigned long long)p->not_found, (unsigned long long)p->rejected,
		       (unsigned long long)p->failed, p->nitems - p->next);
		cli_reasons_print(&p->reasons, 1);
		printf("},\"requests\":%llu,\"retries\":%llu,\"not_modified\":%llu,"
		       "\"bundles_downloaded\":%llu,\"bytes\":%llu,\"seconds\":%.3f}\n",
		       (unsigned long long)p->requests, (unsigned long long)p->retried,
		       (unsigned long long)p->not_modified, (unsigned long long)p->full_bundles,
		       (unsigned long long)p->bytes, secs);
		return;
	}
	printf("stored     %llu\n", (unsigned long long)p->stored);
	printf("unchanged  %llu (%llu answered 304 Not Modified)\n",
	       (unsigned long long)p->unchanged, (unsigned long long)p->not_modified);
	printf("not found  %llu\n", (unsigned long long)p->not_found);
	printf("rejected   %llu\n", (unsigned long long)p->rejected);
	cli_reasons_print(&p->reasons, 0);
	printf("failed     %llu\n", (unsigned long long)p->failed);
	if (p->next < p->nitems)
		printf("not tried  %zu (the upstream appeared down)\n", p->nitems - p->next);
	printf("requests   %llu (%llu retries), %llu bundles downloaded, %llu bytes, %.2f s\n",
	       (unsigned long long)p->requests, (unsigned long long)p->retried,
	       (unsigned long long)p->full_bundles,
	       (unsigned long long)p->bytes, secs);
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	pull_t p = {.ctx = ctx};
	const char *from = NULL, *ids_file = NULL;
	size_t cap = 0;
	pith_buf_t ids_text = PITH_BUF_INIT;
	int rc = 1, no_bar = 0, curl_up = 0;
	pith_trust_t *trust = NULL;
	struct event *tick = NULL;
	p.stall_s = 15;
	p.retries = PULL_RETRIES;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--from") && i + 1 < argc)
			from = argv[++i];
		else if (!strcmp(argv[i], "--ca-file") && i + 1 < argc)
			p.ca_file = argv[++i];
		else if (!strcmp(argv[i], "--upstream-origin") && i + 1 < argc) {
			if (cli_opt_origin("pull", argv[++i], p.origins, &p.n_origins))
				goto out;
		} else if (!strcmp(argv[i], "--ids") && i + 1 < argc)
			ids_file = argv[++i];
		else if (!strcmp(argv[i], "--stall-timeout") && i + 1 < argc) {
			if (cli_opt_long("pull", argv[i], argv[i + 1], 1, 3600, "seconds", &p.stall_s))
				return 1;
			i++;
		} else if (!strcmp(argv[i], "--retries") && i + 1 < argc) {
			long v;
			if (cli_opt_long("pull", argv[i], argv[i + 1], 0, PULL_RETRIES_MAX, "retries", &v))
				return 1;
			p.retries = (unsigned)v;
			i++;
		} else if (!strcmp(argv[i], "--no-progress"))
			no_bar = 1;
		else if (!strcmp(argv[i], "--json"))
			;
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_fail("pull", "unknown or incomplete option %s", argv[i]);
		else if (add_id(&p, &cap, argv[i], ""))
			goto out;
	}
	if (!from) {
		cli_fail("pull", "missing --from BASE_URL");
		goto out;
	}
	if (strncasecmp(from, "https://", 8) && strncasecmp(from, "http://", 7)) {
		cli_fail("pull", "--from %s: not an http:// or https:// URL", from);
		goto out;
	}
	if (strlen(from) >= sizeof(p.base_buf) - 64) {
		cli_fail("pull", "--from: URL longer than %d bytes", (int)sizeof(p.base_buf) - 64);
		goto out;
	}
	snprintf(p.base_buf, sizeof(p.base_buf), "%s", from);
	for (size_t l = strlen(p.base_buf); l && p.base_buf[l - 1] == '/'; l--)
		p.base_buf[l - 1] = 0;
	p.base = p.base_buf;
	if (ids_file && read_ids(&p, &cap, ids_file, &ids_text))
		goto out;
	if (!p.nitems) {
		cli_fail("pull", "no ID given (ID... or --ids FILE)");
		goto out;
	}
	if (p.ca_file && access(p.ca_file, R_OK)) {
		cli_fail("pull", "--ca-file %s: %s", p.ca_file, strerror(errno));
		goto out;
	}
	if (cli_store_open(ctx, "pull", 1, &trust, &p.st))
		goto out;
	if (etags_load(&p))
		goto out;
	pith_err_t err = {0};
	/* before the pipeline's threads start (hclient.h) */
	if (hc_global_init(&err)) {
		cli_fail("pull", "%s", err.msg);
		goto out;
	}
	curl_up = 1;
	/* the pipeline's writer wakes the loop from its thread */
	if (evthread_use_pthreads() || !(p.loop = event_base_new()) ||
	    !(tick = event_new(p.loop, -1, EV_PERSIST, on_tick, &p)) ||
	    event_add(tick, &(struct timeval){0, 250000}) ||
	    !(p.gather_ev = evtimer_new(p.loop, on_gather_timer, &p)) ||
	    !(p.pause_ev = evtimer_new(p.loop, pull_pause_cb, &p))) {
		cli_fail("pull", "cannot set up an event loop");
		goto out;
	}
	hc_opts_t ho;
	hc_opts_default(&ho);
	ho.ca_file = p.ca_file;
	ho.user_agent = "pithctl-pull/1";
	ho.origins = p.origins;
	ho.n_origins = p.n_origins;
	ho.low_speed_time_s = p.stall_s;
	ho.max_inflight = ho.max_host_conns = PULL_INFLIGHT;
	if (hc_new(p.loop, &ho, &p.hc, &err)) {
		cli_fail("pull", "%s", err.msg);
		goto out;
	}
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	if (!(p.pipe = ingest_new(p.loop, trust, p.st, threads > 0 ? (int)threads : 1, 0,
				  PULL_BODY_MAX, NULL, job_done, &p))) {
		cli_fail("pull", "cannot start worker threads");
		goto out;
	}
	p.tty = !no_bar && isatty(2);
	p.t0 = cli_now();
	manifest_read(&p);
	/* the items start as slots free (pull_pump) */
	p.items_go = 1;
	pull_pump(&p);
	pull_check_finished(&p);
	pull_run(&p, &p.finished);
	ingest_free(p.pipe);
	rc = etags_save(&p);
	draw_progress(&p, 1);
	if (p.down)
		fprintf(stderr, "pithctl pull: %s appears down (%d requests in a row failed after "
			"their retries): stopped after %zu of %zu IDs, %zu not attempted; what was "
			"stored is kept. Run the same command again later (what is already stored "
			"comes back unchanged, by a 304 where the upstream sends ETags).\n", p.base,
			PULL_DOWN_AFTER, p.next, p.nitems, p.nitems - p.next);
	print_summary(&p, cli_now() - p.t0);
	if (!rc && p.stored + p.unchanged != p.nitems)
		rc = 1;
out:
	ingest_free(p.pipe);
	free(p.gather); /* never handed over: its items hold their bodies */
	hc_free(p.hc);
	if (tick)
		event_free(tick);
	if (p.gather_ev)
		event_free(p.gather_ev);
	if (p.pause_ev)
		event_free(p.pause_ev);
	if (p.loop)
		event_base_free(p.loop);
	if (curl_up)
		hc_global_cleanup();
	for (size_t i = 0; i < p.nitems; i++) {
		pith_buf_release(&p.items[i].resp);
		if (p.items[i].get.wait)
			event_free(p.items[i].get.wait);
	}
	free(p.items);
	follow_etags_free(p.etags);
	pith_buf_release(&ids_text);
	store_close(p.st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_pull = {
	"pull", "fetch, verify and store records from an HTTP(S) upstream",
	"usage: pithctl --store DIR [--trust-key FILE]... pull --from BASE_URL\n"
	"                [--ca-file FILE] [--upstream-origin URL]... [--ids FILE]\n"
	"                [--stall-timeout SECONDS]\n"
	"                [--retries N] [--json] [--no-progress] [ID...]\n\n"
	"Each ID (arXiv id or URL, DOI or doi.org URL, short or full pith number,\n"
	"registry URL; --ids FILE: one a line, '#' comments) is resolved at the\n"
	"upstream when it is not a full pith number (BASE_URL/api/pith-number/resolve),\n"
	"its bundle fetched through the bundle_pattern of BASE_URL/pith-mirrors.json\n"
	"(else BASE_URL/pith/{suffix}/bundle.json, then the /.well-known/pith form),\n"
	"verified as `import` verifies it (every bundle check; keys trusted here) and\n"
	"stored. 16 requests at most in flight over reused connections; TLS is\n"
	"verified (--ca-file: the CA certificates to trust instead of the system's).\n"
	"Requests go only to BASE_URL's origin and to each --upstream-origin\n"
	"(repeatable, like https://cdn.example: where the manifest's pattern or a\n"
	"bundle's redirect may go; never from https to http).\n"
	"A transfer under 1 KiB/s for --stall-timeout seconds (default 15) fails.\n"
	"A request answered 5xx (but 501, 505), 408 or 429, or that failed at the\n"
	"network level (DNS, connect, timeout, reset), is asked again up to\n"
	"--retries times (default 4, 0 to 10): after the upstream's Retry-After on\n"
	"a 429 or 503 (one over 60 s is not waited out: the request fails), else\n"
	"after 0.5 s, 1 s, 2 s, 4 s, ... (at most 30 s), each a random time between\n"
	"half and all of that; one stderr line per retry. Other 4xx are not retried.\n"
	"A Retry-After holds back every request of the run until then, not only\n"
	"its own. A request waiting for its retry keeps its place among the 16.\n"
	"When 8 requests in a row still fail after their retries, the upstream is\n"
	"taken for down: nothing more is asked, the IDs not started are counted as\n"
	"not attempted, and one stderr line says so; run the same command later\n"
	"(what is stored is kept, and comes back unchanged).\n"
	"Each bundle's ETag is kept in DIR/pull-etags: the next pull asks with\n"
	"If-None-Match, and a 304 is 'unchanged' without download or verification.\n"
	"Summary: stored, unchanged, not found, rejected (with the reason), failed\n"
	"(HTTP status or network error, with the URL and the attempts made), not\n"
	"attempted (--json: not_attempted; the upstream was down); one\n"
	"stderr line per ID that was not stored or unchanged. A progress line on\n"
	"stderr when a terminal.\n\n"
	"Exit status: 0 if every ID ended stored or unchanged, else 1.\n",
	run,
};
