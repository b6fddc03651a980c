/* pithctl pull --from BASE_URL [ID...]: records from an HTTP(S) upstream
 * (the registry or a static mirror) into the store (issue 14, item 1).
 *
 * Each ID (any form pith_id_parse takes) is resolved at the upstream when
 * it is not a full pith number (/api/pith-number/resolve), its bundle
 * fetched through the upstream manifest's bundle_pattern (or the registry's
 * two fixed layouts), and handed to the ingest pipeline exactly as `import`
 * hands a bundle: verified on worker threads, then committed. The HTTP
 * client is libcurl's multi interface driven from this thread with
 * curl_multi_poll (the CLI has no event loop): at most PULL_INFLIGHT
 * transfers at once over one multi handle, so connections are reused. The
 * pipeline's writer wakes the poll (curl_multi_wakeup) when jobs are done.
 *
 * Each bundle's ETag is kept in DIR/pull-etags (docs/upstream.md says why
 * there): the next run sends If-None-Match, and a 304 costs neither a
 * download nor a verification. */
#include "cli_store.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "ingest_core.h"
#include "upstream.h"

#define PULL_INFLIGHT 16           /* transfers at once */
#define PULL_BODY_MAX (16u << 20)  /* a bundle's body, at most */
#define PULL_SMALL_MAX (1u << 20)  /* a manifest or resolve answer */
#define PULL_ETAG_MAX 128          /* bytes of an ETag we keep */
#define PULL_IDS_MAX 1000000       /* IDs per run */
#define PULL_ETAG_FILE "pull-etags"
#define PULL_URL_CAP (PITH_URL_MAX + 256)

typedef enum pull_step {
	STEP_RESOLVE = 1, /* waiting for / doing the resolve request */
	STEP_BUNDLE,      /* waiting for / doing the bundle request */
	STEP_INGEST,      /* in the pipeline */
	STEP_DONE,
} pull_step_t;

typedef enum pull_result {
	RES_NONE = 0,
	RES_STORED,
	RES_UNCHANGED,
	RES_NOT_FOUND,
	RES_REJECTED,
	RES_FAILED,
} pull_result_t;

typedef struct etag_entry {
	char pith[PITH_NUMBER_LEN + 1];
	char etag[PULL_ETAG_MAX + 1];
	char url[PULL_URL_CAP];
	int gone; /* replaced or dropped by this run */
} etag_entry_t;

typedef struct pull_item {
	ingest_job_t job; /* first: the pipeline hands it back */
	const char *text; /* the ID as given */
	pith_id_t id;
	char body[PITH_BODY_LEN + 1];   /* once known */
	char pith[PITH_NUMBER_LEN + 1]; /* the full number, once known */
	pull_step_t step;
	pull_result_t result;
	const char *reason;             /* rejected: the pipeline's name */
	char msg[2048];
	int candidate;                  /* which bundle URL is tried */
	char url[PULL_URL_CAP];
	etag_entry_t *old_etag;         /* what the ETag file had, if used */
	char etag[PULL_ETAG_MAX + 1];   /* the answer's ETag, "" if none */
	char location[PITH_URL_MAX];    /* a 30x answer's Location */
	int location_too_long;
	pith_buf_t resp;
	int over_cap;
	size_t cap;
	CURL *h;
	struct curl_slist *hdrs;        /* the request's If-None-Match */
	char errbuf[CURL_ERROR_SIZE];   /* libcurl's detail of a failure */
	struct pull_item *next_queued;
} pull_item_t;

typedef struct pull {
	const cli_ctx_t *ctx;
	store_t *st;
	ingest_core_t *pipe;
	CURLM *multi;
	const char *base; /* without a trailing '/' */
	char base_buf[PITH_URL_MAX];
	const char *ca_file;
	char pattern[PITH_URL_MAX]; /* the manifest's bundle_pattern, or "" */
	pull_item_t *items;
	size_t nitems;
	pull_item_t *queue, *queue_tail; /* waiting for a transfer */
	size_t transfers, in_pipe, done;
	etag_entry_t *etags;
	size_t netags;
	int tty;
	double t0, last_draw;
	uint64_t stored, unchanged, not_found, rejected, failed;
	uint64_t requests, not_modified, full_bundles, bytes;
	cli_reasons_t reasons;
} pull_t;

/* ---- the ETag file ----------------------------------------------------------
 * One line per record: "PITH_NUMBER ETAG URL". Written whole at the end of
 * a run (temp file, fsync, rename, fsync of the directory). */

static int etag_is_ok(const char *s, size_t n)
{
	if (!n || n > PULL_ETAG_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

static int etag_cmp(const void *a, const void *b)
{
	return strcmp(((const etag_entry_t *)a)->pith + 10, ((const etag_entry_t *)b)->pith + 10);
}

static void etag_path(const pull_t *p, char *out, size_t cap, const char *suffix)
{
	snprintf(out, cap, "%s/%s%s", p->ctx->store_dir, PULL_ETAG_FILE, suffix);
}

/* Reads the ETag file; lines that do not parse are dropped (it is only a
 * cache: the worst a lost line costs is one full download). */
static int etags_load(pull_t *p)
{
	char path[4096];
	etag_path(p, path, sizeof(path), "");
	FILE *f = fopen(path, "r");
	if (!f)
		return errno == ENOENT ? 0 : cli_fail("pull", "cannot open %s: %s", path, strerror(errno));
	char line[PITH_NUMBER_LEN + PULL_ETAG_MAX + PULL_URL_CAP + 8];
	size_t cap = 0;
	while (fgets(line, sizeof(line), f)) {
		char *pith = strtok(line, " \n"), *etag = strtok(NULL, " \n"), *url = strtok(NULL, " \n");
		if (!pith || !etag || !url || !pith_number_is_valid(pith) ||
		    !etag_is_ok(etag, strlen(etag)) || strlen(url) >= PULL_URL_CAP)
			continue;
		if (p->netags == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			etag_entry_t *n = realloc(p->etags, ncap * sizeof(*n));
			if (!n) {
				fclose(f);
				return cli_fail("pull", "out of memory");
			}
			p->etags = n;
			cap = ncap;
		}
		etag_entry_t *e = &p->etags[p->netags++];
		memset(e, 0, sizeof(*e));
		snprintf(e->pith, sizeof(e->pith), "%s", pith);
		snprintf(e->etag, sizeof(e->etag), "%s", etag);
		snprintf(e->url, sizeof(e->url), "%s", url);
	}
	fclose(f);
	if (p->netags)
		qsort(p->etags, p->netags, sizeof(*p->etags), etag_cmp);
	/* the last line of a record wins */
	size_t k = 0;
	for (size_t i = 0; i < p->netags; i++) {
		if (k && !etag_cmp(&p->etags[k - 1], &p->etags[i]))
			k--;
		p->etags[k++] = p->etags[i];
	}
	p->netags = k;
	return 0;
}

static etag_entry_t *etag_find(pull_t *p, const char *body)
{
	etag_entry_t key;
	snprintf(key.pith, sizeof(key.pith), "pith:0000:%s", body);
	return p->netags ? bsearch(&key, p->etags, p->netags, sizeof(key), etag_cmp) : NULL;
}

static int etags_save(pull_t *p)
{
	char path[4096], tmp[4096];
	etag_path(p, path, sizeof(path), "");
	etag_path(p, tmp, sizeof(tmp), ".tmp");
	FILE *f = fopen(tmp, "w");
	if (!f)
		return cli_fail("pull", "cannot write %s: %s", tmp, strerror(errno));
	for (size_t i = 0; i < p->netags; i++)
		if (!p->etags[i].gone)
			fprintf(f, "%s %s %s\n", p->etags[i].pith, p->etags[i].etag, p->etags[i].url);
	for (size_t i = 0; i < p->nitems; i++) {
		const pull_item_t *it = &p->items[i];
		if ((it->result == RES_STORED || it->result == RES_UNCHANGED) && it->etag[0] &&
		    it->pith[0])
			fprintf(f, "%s %s %s\n", it->pith, it->etag, it->url);
	}
	int bad = fflush(f) || ferror(f) || fsync(fileno(f));
	if (fclose(f))
		bad = 1;
	if (bad || rename(tmp, path)) {
		cli_fail("pull", "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
		return 1;
	}
	int dfd = open(p->ctx->store_dir, O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
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

/* Ends it with res; a line on stderr for anything but stored/unchanged. */
static void item_finish(pull_t *p, pull_item_t *it, pull_result_t res)
{
	it->step = STEP_DONE;
	it->result = res;
	p->done++;
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
	if (res == RES_REJECTED && it->old_etag)
		it->old_etag->gone = 1; /* never answer 304 for what we refused */
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

/* ---- HTTP -------------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	pull_item_t *it = arg;
	size_t len = size * n;
	if (it->resp.len + len > it->cap) {
		it->over_cap = 1;
		return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
	}
	return pith_buf_append(&it->resp, data, len) ? 0 : len;
}

/* Header lines: keeps ETag and Location (of the last response). */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	pull_item_t *it = arg;
	size_t len = size * n;
	const char *v = NULL;
	char *dst = NULL;
	size_t dcap = 0, hl = 0;
	if (len > 5 && !strncmp(data, "HTTP/", 5)) {
		it->etag[0] = it->location[0] = 0;
		it->location_too_long = 0;
		return len;
	}
	if (len >= 5 && !strncasecmp(data, "etag:", 5)) {
		hl = 5, dst = it->etag, dcap = sizeof(it->etag);
	} else if (len >= 9 && !strncasecmp(data, "location:", 9)) {
		hl = 9, dst = it->location, dcap = sizeof(it->location);
	} else {
		return len;
	}
	v = data + hl;
	size_t vl = len - hl;
	while (vl && (*v == ' ' || *v == '\t'))
		v++, vl--;
	while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
		vl--;
	if (dst == it->etag) {
		if (etag_is_ok(v, vl))
			memcpy(dst, v, vl), dst[vl] = 0;
		else
			dst[0] = 0; /* a weak or odd tag is simply not kept */
	} else if (vl < dcap) {
		memcpy(dst, v, vl), dst[vl] = 0;
	} else {
		it->location_too_long = 1;
	}
	return len;
}

static void queue_push(pull_t *p, pull_item_t *it)
{
	it->next_queued = NULL;
	if (p->queue_tail)
		p->queue_tail->next_queued = it;
	else
		p->queue = it;
	p->queue_tail = it;
}

/* Starts a GET of it->url (with If-None-Match when etag is given). */
static int transfer_start(pull_t *p, pull_item_t *it, const char *if_none_match, size_t cap)
{
	CURL *h = curl_easy_init();
	if (!h)
		return -1;
	it->h = h;
	it->resp.len = 0;
	it->over_cap = 0;
	it->cap = cap;
	it->etag[0] = it->location[0] = 0;
	struct curl_slist *hdrs = NULL;
	if (if_none_match) {
		char line[PULL_ETAG_MAX + 32];
		snprintf(line, sizeof(line), "If-None-Match: %s", if_none_match);
		hdrs = curl_slist_append(NULL, line);
	}
	curl_easy_setopt(h, CURLOPT_URL, it->url);
	curl_easy_setopt(h, CURLOPT_PRIVATE, it);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
	/* a stalled or crawling upstream: under 1 KiB/s for 15 s */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 15L);
	curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)cap);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (p->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, p->ca_file);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "pithctl-pull/1");
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, it);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, it);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (hdrs)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	it->hdrs = hdrs; /* must outlive the transfer */
	it->errbuf[0] = 0;
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, it->errbuf);
	if (curl_multi_add_handle(p->multi, h) != CURLM_OK) {
		curl_slist_free_all(hdrs);
		it->hdrs = NULL;
		curl_easy_cleanup(h);
		it->h = NULL;
		return -1;
	}
	p->transfers++;
	p->requests++;
	return 0;
}

static void transfer_end(pull_t *p, pull_item_t *it)
{
	curl_multi_remove_handle(p->multi, it->h);
	curl_easy_cleanup(it->h);
	it->h = NULL;
	curl_slist_free_all(it->hdrs);
	it->hdrs = NULL;
	p->transfers--;
}

/* The URL of candidate it->candidate: the manifest's pattern, else the
 * registry's /pith/{suffix}/bundle.json, then its .well-known form. 0, or
 * 1 when there is no further candidate. */
static int bundle_url(pull_t *p, pull_item_t *it)
{
	pith_err_t err = {0};
	char pat[PULL_URL_CAP];
	if (p->pattern[0]) {
		if (it->candidate > 0)
			return 1;
		snprintf(pat, sizeof(pat), "%s", p->pattern);
	} else if (it->candidate == 0) {
		snprintf(pat, sizeof(pat), "%s/pith/{suffix}/bundle.json", p->base);
	} else if (it->candidate == 1) {
		snprintf(pat, sizeof(pat), "%s/.well-known/pith/{suffix}/bundle.json", p->base);
	} else {
		return 1;
	}
	if (pith_pattern_expand(pat, it->body, it->url, sizeof(it->url), &err)) {
		snprintf(it->msg, sizeof(it->msg), "bundle URL: %s", err.msg);
		return -1;
	}
	return 0;
}

/* Readies it's next request: a resolve or its bundle. */
static void item_next(pull_t *p, pull_item_t *it)
{
	if (it->step == STEP_RESOLVE) {
		const char *key = it->id.kind == PITH_ID_ARXIV ? "arxiv" :
				  it->id.kind == PITH_ID_DOI ? "doi" : "pith";
		const char *val = it->id.kind == PITH_ID_ARXIV ? it->id.arxiv : it->id.value;
		char *esc = curl_easy_escape(NULL, val, 0);
		if (!esc) {
			snprintf(it->msg, sizeof(it->msg), "out of memory");
			item_finish(p, it, RES_FAILED);
			return;
		}
		snprintf(it->url, sizeof(it->url), "%s/api/pith-number/resolve?%s=%s&json=true", p->base,
			 key, esc);
		curl_free(esc);
	} else {
		int r = bundle_url(p, it);
		if (r) {
			item_finish(p, it, r > 0 ? RES_NOT_FOUND : RES_FAILED);
			return;
		}
	}
	queue_push(p, it);
}

static void start_queued(pull_t *p)
{
	while (p->queue && p->transfers < PULL_INFLIGHT) {
		pull_item_t *it = p->queue;
		p->queue = it->next_queued;
		if (!p->queue)
			p->queue_tail = NULL;
		const char *inm = NULL;
		size_t cap = PULL_SMALL_MAX;
		if (it->step == STEP_BUNDLE) {
			cap = PULL_BODY_MAX;
			it->old_etag = etag_find(p, it->body);
			if (it->old_etag && !it->old_etag->gone && !strcmp(it->old_etag->url, it->url)) {
				/* only while the store still holds a bundle of it */
				int64_t us;
				uint8_t sha[32];
				pith_err_t err = {0};
				if (!store_bundle_newest(p->st, it->old_etag->pith, &us, sha, &err))
					inm = it->old_etag->etag;
			}
			if (!inm)
				it->old_etag = NULL;
		}
		if (transfer_start(p, it, inm, cap)) {
			snprintf(it->msg, sizeof(it->msg), "cannot start a request (out of memory)");
			item_finish(p, it, RES_FAILED);
		}
	}
}

static void set_pith(pull_item_t *it, const pith_id_t *id)
{
	snprintf(it->body, sizeof(it->body), "%.26s", id->kind == PITH_ID_FULL ? id->value : "");
	snprintf(it->pith, sizeof(it->pith), "%s", id->number);
}

static void resolve_done(pull_t *p, pull_item_t *it, long status)
{
	pith_err_t err = {0};
	if (status == 404) {
		snprintf(it->msg, sizeof(it->msg), "%s answered 404", it->url);
		item_finish(p, it, RES_NOT_FOUND);
		return;
	}
	if (status == 200) {
		char num[PITH_NUMBER_LEN + 1];
		int rc = pith_resolve_answer_parse(it->resp.data, it->resp.len, NULL, num, &err);
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
		if (it->location_too_long || !it->location[0] ||
		    pith_resolve_location_parse(it->location, strlen(it->location), p->base, &id,
						&err)) {
			snprintf(it->msg, sizeof(it->msg), "%s: HTTP %ld with a bad Location: %s", it->url,
				 status, it->location_too_long ? "too long" : it->location[0] ? err.msg :
				 "missing");
			item_finish(p, it, RES_FAILED);
			return;
		}
		set_pith(it, &id);
	} else {
		snprintf(it->msg, sizeof(it->msg), "HTTP %ld from %s", status, it->url);
		item_finish(p, it, RES_FAILED);
		return;
	}
	it->step = STEP_BUNDLE;
	it->candidate = 0;
	item_next(p, it);
}

static void bundle_done(pull_t *p, pull_item_t *it, long status)
{
	if (status == 304 && it->old_etag) {
		p->not_modified++;
		snprintf(it->pith, sizeof(it->pith), "%s", it->old_etag->pith);
		snprintf(it->etag, sizeof(it->etag), "%s", it->old_etag->etag);
		it->old_etag->gone = 1; /* written again from the item */
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
		snprintf(it->msg, sizeof(it->msg), "HTTP %ld from %s", status, it->url);
		item_finish(p, it, RES_FAILED);
		return;
	}
	p->full_bundles++;
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
	p->in_pipe++;
	ingest_core_submit(p->pipe, &it->job);
}

/* A transfer ended: its answer moves the item on. */
static void transfer_done(pull_t *p, CURL *h, CURLcode code)
{
	pull_item_t *it = NULL;
	curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&it);
	long status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	transfer_end(p, it);
	p->bytes += it->resp.len;
	if (code != CURLE_OK) {
		if (it->over_cap || code == CURLE_FILESIZE_EXCEEDED)
			snprintf(it->msg, sizeof(it->msg), "%s: body over %zu bytes", it->url, it->cap);
		else
			snprintf(it->msg, sizeof(it->msg), "%s: %s%s%s", it->url, curl_easy_strerror(code),
				 it->errbuf[0] ? ": " : "", it->errbuf);
		item_finish(p, it, RES_FAILED);
		return;
	}
	if (it->step == STEP_RESOLVE)
		resolve_done(p, it, status);
	else
		bundle_done(p, it, status);
}

/* The pipeline hands a bundle back (on this thread). */
static void job_done(void *arg, ingest_job_t *job)
{
	pull_t *p = arg;
	pull_item_t *it = (pull_item_t *)job;
	p->in_pipe--;
	ingest_job_clear(job); /* what validation left; the results stay */
	job->bytes = NULL;
	if (job->rc) {
		it->reason = job->fail == INGEST_FAIL_UNTRUSTED || job->fail == INGEST_FAIL_BUNDLE ?
			"bundle" : job->reason ? job->reason : "rejected";
		snprintf(it->msg, sizeof(it->msg), "%s: %s", it->url, job->msg);
		it->etag[0] = 0;
		item_finish(p, it, RES_REJECTED);
	} else {
		snprintf(it->pith, sizeof(it->pith), "%s", job->subject);
		if (it->old_etag)
			it->old_etag->gone = 1;
		item_finish(p, it, job->bundle_outcome == STORE_BUNDLE_NEWER ? RES_STORED :
			    RES_UNCHANGED);
	}
}

static void pipe_notify(void *arg)
{
	curl_multi_wakeup(((pull_t *)arg)->multi);
}

/* Runs the multi handle until every item is done. */
static void pull_run(pull_t *p)
{
	while (p->done < p->nitems) {
		start_queued(p);
		int running = 0;
		curl_multi_perform(p->multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(p->multi, &left)))
			if (m->msg == CURLMSG_DONE)
				transfer_done(p, m->easy_handle, m->data.result);
		ingest_core_deliver(p->pipe);
		if (p->done >= p->nitems)
			break;
		start_queued(p);
		if (p->transfers)
			curl_multi_poll(p->multi, NULL, 0, 1000, NULL);
		else if (p->in_pipe && !ingest_core_deliver(p->pipe))
			ingest_core_wait(p->pipe);
		else if (!p->in_pipe && !p->queue)
			break; /* nothing can move any more: a bug, but never spin */
	}
}

/* ---- the manifest ------------------------------------------------------------ */

static int url_same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	while (la && a[la - 1] == '/')
		la--;
	while (lb && b[lb - 1] == '/')
		lb--;
	return la == lb && !strncasecmp(a, b, la);
}

/* Reads BASE/pith-mirrors.json for the bundle pattern; without one (no
 * manifest, or none in it), the fixed layouts are tried. */
static void manifest_read(pull_t *p)
{
	pull_item_t it = {0};
	it.text = "pith-mirrors.json";
	snprintf(it.url, sizeof(it.url), "%s/pith-mirrors.json", p->base);
	if (transfer_start(p, &it, NULL, PULL_SMALL_MAX))
		return;
	CURLMsg *m = NULL;
	int running = 1, left;
	while (!m) {
		curl_multi_perform(p->multi, &running);
		while ((m = curl_multi_info_read(p->multi, &left)) && m->msg != CURLMSG_DONE)
			;
		if (!m)
			curl_multi_poll(p->multi, NULL, 0, 1000, NULL);
	}
	CURLcode code = m->data.result;
	long status = 0;
	curl_easy_getinfo(it.h, CURLINFO_RESPONSE_CODE, &status);
	transfer_end(p, &it);
	p->bytes += it.resp.len;
	pith_manifest_t *man = NULL;
	pith_err_t err = {0};
	if (code != CURLE_OK) {
		fprintf(stderr, "pithctl pull: %s: %s%s%s (trying the registry's layout)\n", it.url,
			it.over_cap ? "body over 1 MiB" : curl_easy_strerror(code),
			it.errbuf[0] ? ": " : "", it.errbuf);
	} else if (status != 200) {
		if (status != 404)
			fprintf(stderr, "pithctl pull: %s: HTTP %ld (trying the registry's layout)\n",
				it.url, status);
	} else if (!(man = malloc(sizeof(*man)))) {
		/* the fixed layouts then */
	} else if (pith_manifest_parse(it.resp.data, it.resp.len, NULL, man, &err)) {
		fprintf(stderr, "pithctl pull: %s: %s (trying the registry's layout)\n", it.url, err.msg);
	} else {
		const pith_mirror_t *mi = man->n_mirrors ? &man->mirrors[0] : NULL;
		for (size_t i = 0; i < man->n_mirrors; i++)
			if (url_same(man->mirrors[i].base_url, p->base)) {
				mi = &man->mirrors[i];
				break;
			}
		if (mi)
			snprintf(p->pattern, sizeof(p->pattern), "%s", mi->bundle_pattern);
	}
	free(man);
	pith_buf_release(&it.resp);
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
		       "\"failed\":%llu,\"reasons\":{", (unsigned long long)p->stored,
		       (unsigned long long)p->unchanged, (unsigned long long)p->not_found,
		       (unsigned long long)p->rejected, (unsigned long long)p->failed);
		cli_reasons_print(&p->reasons, 1);
		printf("},\"requests\":%llu,\"not_modified\":%llu,\"bundles_downloaded\":%llu,"
		       "\"bytes\":%llu,\"seconds\":%.3f}\n", (unsigned long long)p->requests,
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
	printf("requests   %llu, %llu bundles downloaded, %llu bytes, %.2f s\n",
	       (unsigned long long)p->requests, (unsigned long long)p->full_bundles,
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
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--from") && i + 1 < argc)
			from = argv[++i];
		else if (!strcmp(argv[i], "--ca-file") && i + 1 < argc)
			p.ca_file = argv[++i];
		else if (!strcmp(argv[i], "--ids") && i + 1 < argc)
			ids_file = argv[++i];
		else if (!strcmp(argv[i], "--no-progress"))
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
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		cli_fail("pull", "cannot initialise libcurl");
		goto out;
	}
	curl_up = 1;
	if (!(p.multi = curl_multi_init())) {
		cli_fail("pull", "cannot initialise libcurl");
		goto out;
	}
	curl_multi_setopt(p.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)PULL_INFLIGHT);
	curl_multi_setopt(p.multi, CURLMOPT_MAXCONNECTS, (long)PULL_INFLIGHT);
	long threads = sysconf(_SC_NPROCESSORS_ONLN);
	ingest_opts_t o = {.trust = trust, .st = p.st, .nthreads = threads > 0 ? (int)threads : 1,
			   .max_bundle_bytes = PULL_BODY_MAX, .notify = pipe_notify,
			   .notify_arg = &p, .on_done = job_done, .done_arg = &p};
	if (!(p.pipe = ingest_core_new(&o))) {
		cli_fail("pull", "cannot start worker threads");
		goto out;
	}
	p.tty = !no_bar && isatty(2);
	p.t0 = cli_now();
	manifest_read(&p);
	for (size_t i = 0; i < p.nitems; i++) {
		pull_item_t *it = &p.items[i];
		if (it->id.kind == PITH_ID_FULL) {
			set_pith(it, &it->id);
			it->step = STEP_BUNDLE;
		} else {
			it->step = STEP_RESOLVE;
		}
		item_next(&p, it);
	}
	pull_run(&p);
	ingest_core_free(p.pipe);
	rc = etags_save(&p);
	draw_progress(&p, 1);
	print_summary(&p, cli_now() - p.t0);
	if (!rc && p.stored + p.unchanged != p.nitems)
		rc = 1;
out:
	ingest_core_free(p.pipe);
	if (p.multi)
		curl_multi_cleanup(p.multi);
	if (curl_up)
		curl_global_cleanup();
	for (size_t i = 0; i < p.nitems; i++)
		pith_buf_release(&p.items[i].resp);
	free(p.items);
	free(p.etags);
	pith_buf_release(&ids_text);
	store_close(p.st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_pull = {
	"pull", "fetch, verify and store records from an HTTP(S) upstream",
	"usage: pithctl --store DIR [--trust-key FILE]... pull --from BASE_URL\n"
	"                [--ca-file FILE] [--ids FILE] [--json] [--no-progress] [ID...]\n\n"
	"Each ID (arXiv id or URL, DOI or doi.org URL, short or full pith number,\n"
	"registry URL; --ids FILE: one a line, '#' comments) is resolved at the\n"
	"upstream when it is not a full pith number (BASE_URL/api/pith-number/resolve),\n"
	"its bundle fetched through the bundle_pattern of BASE_URL/pith-mirrors.json\n"
	"(else BASE_URL/pith/{suffix}/bundle.json, then the /.well-known/pith form),\n"
	"verified as `import` verifies it (every bundle check; keys trusted here) and\n"
	"stored. 16 requests at most in flight over reused connections; TLS is\n"
	"verified (--ca-file: the CA certificates to trust instead of the system's).\n"
	"Each bundle's ETag is kept in DIR/pull-etags: the next pull asks with\n"
	"If-None-Match, and a 304 is 'unchanged' without download or verification.\n"
	"Summary: stored, unchanged, not found, rejected (with the reason), failed\n"
	"(HTTP status or network error, with the URL); one stderr line per ID that\n"
	"was not stored or unchanged. A progress line on stderr when a terminal.\n\n"
	"Exit status: 0 if every ID ended stored or unchanged, else 1.\n",
	run,
};
