/* pithctl import FILE...: bundles, single events and JSON Lines into the
 * store.
 *
 * The main thread reads lines into chunks; a pool of worker threads (one
 * per core) parses and verifies every item of a chunk (JSON, hashes, trust,
 * Ed25519) and computes its canonical bytes; the main thread, while the
 * workers verify the next chunks, commits each verified chunk in input
 * order as one store batch (one atomic, synced WriteBatch) and helps verify
 * when it would otherwise wait. Nothing is handed to the store before it
 * verified, and a bad line never stops the rest of the file. */
#define _GNU_SOURCE /* memmem */
#include "cli_store.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bundle.h"

#define CHUNK_ITEMS 2048
#define CHUNK_BYTES (8u << 20)
#define LINE_MAX_BYTES (64u << 20) /* a bundle on one line may be large */
#define IN_FLIGHT 3                /* chunks read ahead of the commit */
#define MAX_WORKERS 16
#define CLAIM_MAX 16               /* items a verifier takes at once */

typedef enum { IT_PENDING, IT_REJECT, IT_EVENT, IT_BUNDLE } item_kind_t;

typedef struct item {
	size_t off, len;     /* the line, in its chunk's arena */
	const char *file;
	size_t line;
	int oversize;        /* longer than LINE_MAX_BYTES: bytes dropped */
	item_kind_t kind;
	pith_event_t *ev;
	pith_buf_t canon;
	json_doc_t *bundle;
	const char *reason;
	char msg[400];
	int index;           /* in the store batch */
} item_t;

typedef struct chunk {
	item_t *items;
	size_t n, cap;
	pith_buf_t arena;
	size_t next, done;   /* claimed / verified items (under the pool lock) */
	struct chunk *qnext; /* the pool's queue of chunks with unclaimed items */
} chunk_t;

typedef struct pool {
	pthread_mutex_t mu;
	pthread_cond_t work, fin;
	chunk_t *head, *tail;
	int stop;
	const pith_trust_t *trust;
	pthread_t th[MAX_WORKERS];
	int nth;
	double worker_cpu;     /* CPU seconds of the workers that have exited */
} pool_t;

/* ---- verification (any thread) -------------------------------------------- */

static double cpu_seconds(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_cpu(void)
{
	return cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
}

static void reject(item_t *it, const char *reason, const char *fmt, const char *arg)
{
	it->kind = IT_REJECT;
	it->reason = reason;
	snprintf(it->msg, sizeof(it->msg), fmt, arg);
}

/* A JSON failure's reason: "truncated" when the text just ends early,
 * "too_big" over a limit, else "json". */
static const char *json_reason(int code)
{
	return code == PITH_ETRUNC ? "truncated" : code == PITH_ETOOBIG ? "too_big" : "json";
}

static void verify_bundle(item_t *it, const uint8_t *p, const pith_trust_t *trust)
{
	pith_err_t err = {0};
	json_doc_t *doc = NULL;
	int rc = json_parse(&doc, p, it->len, NULL, &err);
	if (rc) {
		reject(it, json_reason(rc), "%s", err.msg);
		return;
	}
	pith_report_t rep = {0};
	if (pith_doc_kind(json_doc_root(doc)) != PITH_DOC_BUNDLE) {
		reject(it, "shape", "%s", "neither an event nor a bundle");
	} else if (pith_bundle_verify(json_doc_root(doc), trust, &rep)) {
		/* the names of all failed checks, then why the first failed */
		size_t w = 0;
		const pith_check_t *first = NULL;
		it->kind = IT_REJECT;
		it->reason = "bundle";
		for (size_t i = 0; i < rep.n && w < sizeof(it->msg) - 1; i++) {
			if (rep.checks[i].ok)
				continue;
			if (!first)
				first = &rep.checks[i];
			w += (size_t)snprintf(it->msg + w, sizeof(it->msg) - w, "%s%s",
					      w ? ", " : "failed checks: ", rep.checks[i].name);
		}
		if (first && w < sizeof(it->msg) - 1)
			snprintf(it->msg + w, sizeof(it->msg) - w, " (%s: %s)", first->name, first->value);
	} else {
		it->kind = IT_BUNDLE;
		it->bundle = doc;
		doc = NULL;
	}
	pith_report_release(&rep);
	json_doc_free(doc);
}

/* Checks an item but an event's signature, which it prepares in *sc: 1
 * when that is left to check (then verify_item_end), 0 when the item is
 * done. */
static int verify_item(chunk_t *c, item_t *it, const pith_trust_t *trust, pith_sig_check_t *sc)
{
	const uint8_t *p = c->arena.data + it->off;
	pith_err_t err = {0};
	if (it->oversize) {
		char lim[32];
		snprintf(lim, sizeof(lim), "%u", LINE_MAX_BYTES);
		reject(it, "too_big", "line longer than %s bytes", lim);
		return 0;
	}
	/* bundles name themselves; anything else must be one event */
	if (memmem(p, it->len, "\"bundle_type\"", 13) ||
	    memmem(p, it->len, "\"bundle_signature\"", 18)) {
		verify_bundle(it, p, trust);
		if (it->kind == IT_BUNDLE || strcmp(it->reason, "shape"))
			return 0;
		it->kind = IT_PENDING;
	}
	if (it->len > PITH_EVENT_MAX_BYTES) {
		char sz[64];
		snprintf(sz, sizeof(sz), "%zu bytes, over the limit of %u", it->len, PITH_EVENT_MAX_BYTES);
		reject(it, "too_big", "event of %s", sz);
		return 0;
	}
	pith_event_check_t failed = PITH_CHECK_OK;
	int rc = pith_event_parse_deferred(p, it->len, trust, &it->ev, &failed, &err, sc);
	if (rc) {
		reject(it, failed == PITH_CHECK_JSON ? json_reason(rc) : pith_event_check_name(failed),
		       "%s", err.msg);
		return 0;
	}
	return 1;
}

static void verify_item_end(item_t *it, const pith_sig_check_t *sc, const pith_trust_t *trust)
{
	pith_err_t err = {0};
	pith_event_check_t failed = PITH_CHECK_OK;
	if (pith_event_sig_result(it->ev, sc, &failed, &err)) {
		pith_event_free(it->ev);
		reject(it, pith_event_check_name(failed), "%s", err.msg);
		return;
	}
	if (pith_event_canon(it->ev, &it->canon)) {
		pith_event_free(it->ev);
		reject(it, "json", "%s", "cannot write the canonical form (out of memory)");
		return;
	}
	pith_receipt_precheck(it->ev, trust);
	it->kind = IT_EVENT;
}

/* Claims up to max unclaimed items of the queue's first chunk. Lock held. */
static chunk_t *pool_claim(pool_t *p, size_t *from, size_t *to, size_t max)
{
	chunk_t *c = p->head;
	if (!c)
		return NULL;
	*from = c->next;
	*to = c->next + max < c->n ? c->next + max : c->n;
	c->next = *to;
	if (c->next == c->n) {
		p->head = c->qnext;
		if (!p->head)
			p->tail = NULL;
	}
	return c;
}

/* Verifies items [from, to) of c (at most CLAIM_MAX), their events'
 * signatures together (pith_sig_check_many). */
static void pool_run(pool_t *p, chunk_t *c, size_t from, size_t to)
{
	pith_sig_check_t sc[CLAIM_MAX];
	item_t *pending[CLAIM_MAX];
	size_t m = 0;
	for (size_t i = from; i < to; i++)
		if (verify_item(c, &c->items[i], p->trust, &sc[m]))
			pending[m++] = &c->items[i];
	pith_sig_check_many(sc, m);
	for (size_t i = 0; i < m; i++)
		verify_item_end(pending[i], &sc[i], p->trust);
	pthread_mutex_lock(&p->mu);
	c->done += to - from;
	if (c->done == c->n)
		pthread_cond_broadcast(&p->fin);
	pthread_mutex_unlock(&p->mu);
}

static void *worker(void *arg)
{
	pool_t *p = arg;
	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		size_t from, to;
		chunk_t *c = pool_claim(p, &from, &to, CLAIM_MAX);
		if (!c) {
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		pool_run(p, c, from, to);
		pthread_mutex_lock(&p->mu);
	}
	p->worker_cpu += thread_cpu();
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void pool_submit(pool_t *p, chunk_t *c)
{
	pthread_mutex_lock(&p->mu);
	c->next = c->done = 0;
	c->qnext = NULL;
	if (c->n) {
		if (p->tail)
			p->tail->qnext = c;
		else
			p->head = c;
		p->tail = c;
	}
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
}

/* Waits until every item of c is verified, verifying items of c itself
 * meanwhile rather than sleeping. */
static void pool_wait(pool_t *p, chunk_t *c)
{
	pthread_mutex_lock(&p->mu);
	while (c->done < c->n) {
		size_t from, to;
		if (p->head == c && pool_claim(p, &from, &to, CLAIM_MAX)) {
			pthread_mutex_unlock(&p->mu);
			pool_run(p, c, from, to);
			pthread_mutex_lock(&p->mu);
			continue;
		}
		pthread_cond_wait(&p->fin, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
}

static int pool_start(pool_t *p, int n, const pith_trust_t *trust)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->fin, NULL);
	p->trust = trust;
	for (int i = 0; i < n; i++) {
		if (pthread_create(&p->th[i], NULL, worker, p))
			return 1;
		p->nth++;
	}
	return 0;
}

static void pool_stop(pool_t *p)
{
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->fin);
	pthread_mutex_destroy(&p->mu);
}

/* ---- reading (main thread) ------------------------------------------------- */

typedef struct reader {
	FILE *f;
	const char *name;
	uint8_t *buf;
	size_t cap, start, end;
	int eof, err;
	size_t line;          /* number of the line last returned */
	uint64_t size, done;  /* bytes: file size (0 if unknown), consumed */
} reader_t;

static int reader_open(reader_t *r, const char *path)
{
	memset(r, 0, sizeof(*r));
	r->name = strcmp(path, "-") ? path : "(stdin)";
	r->f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!r->f)
		return cli_fail("import", "cannot open %s: %s", path, strerror(errno));
	struct stat sb;
	if (fstat(fileno(r->f), &sb) == 0 && S_ISREG(sb.st_mode))
		r->size = (uint64_t)sb.st_size;
	r->cap = 1u << 20;
	r->buf = malloc(r->cap);
	if (!r->buf)
		return cli_fail("import", "out of memory");
	return 0;
}

static void reader_close(reader_t *r)
{
	if (r->f && r->f != stdin)
		fclose(r->f);
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* Reads more input after the pending bytes; 0 at end of input. */
static size_t reader_fill(reader_t *r)
{
	if (r->eof)
		return 0;
	if (r->start > 0) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	if (r->end == r->cap) {
		size_t nc = r->cap * 2;
		uint8_t *p = nc <= LINE_MAX_BYTES + (1u << 20) ? realloc(r->buf, nc) : NULL;
		if (!p)
			return 0;
		r->buf = p;
		r->cap = nc;
	}
	size_t n = fread(r->buf + r->end, 1, r->cap - r->end, r->f);
	if (n == 0) {
		r->eof = 1;
		if (ferror(r->f))
			r->err = errno ? errno : EIO;
	}
	r->end += n;
	return n;
}

/* The next line (without its newline), valid until the next call. Returns
 * 1 with a line, 0 at the end. *oversize: the line was longer than
 * LINE_MAX_BYTES and was skipped (*len is 0). */
static int reader_next(reader_t *r, const uint8_t **line, size_t *len, int *oversize)
{
	size_t scanned = 0;
	*oversize = 0;
	for (;;) {
		uint8_t *s = r->buf + r->start;
		uint8_t *nl = memchr(s + scanned, '\n', r->end - r->start - scanned);
		if (nl) {
			size_t l = (size_t)(nl - s);
			r->line++;
			r->start += l + 1;
			r->done += l + 1;
			if (*oversize) {
				*len = 0;
				*line = s;
			} else {
				*line = s;
				*len = l;
			}
			return 1;
		}
		scanned = r->end - r->start;
		if (scanned >= LINE_MAX_BYTES) {
			/* drop what we have, keep looking for the end of the line */
			*oversize = 1;
			r->done += scanned;
			r->start = r->end;
			scanned = 0;
		}
		if (reader_fill(r) == 0) {
			if (r->end == r->start && !*oversize)
				return 0;
			/* the last line, without a newline */
			r->line++;
			*line = r->buf + r->start;
			*len = *oversize ? 0 : r->end - r->start;
			r->done += r->end - r->start;
			r->start = r->end;
			return 1;
		}
	}
}

static int is_blank(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return 0;
	return 1;
}

/* ---- the import ------------------------------------------------------------ */

typedef struct import {
	const cli_ctx_t *ctx;
	store_t *st;
	store_batch_t *batch;
	pool_t pool;
	chunk_t *inflight[IN_FLIGHT];
	size_t ninflight;
	chunk_t *cur;
	FILE *progress_file;
	int tty;
	double t0, last_draw;
	reader_t *rd;          /* the file being read, for the progress bar */
	uint64_t items, stored, duplicate, resigned, rejected;
	uint64_t bundles_newer, bundles_older;
	struct { const char *name; uint64_t n; } reasons[24];
	size_t nreasons;
	int failed;            /* a store error: stop */
	double cpu_commit, cpu_wait; /* main thread CPU seconds (PITH_IMPORT_PROFILE) */
	chunk_t *spare;        /* committed chunks for reuse */
} import_t;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void count_reason(import_t *im, const char *reason)
{
	for (size_t i = 0; i < im->nreasons; i++)
		if (!strcmp(im->reasons[i].name, reason)) {
			im->reasons[i].n++;
			return;
		}
	if (im->nreasons < sizeof(im->reasons) / sizeof(im->reasons[0])) {
		im->reasons[im->nreasons].name = reason;
		im->reasons[im->nreasons++].n = 1;
	}
}

static void draw_progress(import_t *im, int final)
{
	if (!im->tty)
		return;
	double t = now();
	if (!final && t - im->last_draw < 0.2)
		return;
	im->last_draw = t;
	double el = t - im->t0 > 1e-6 ? t - im->t0 : 1e-6;
	char pct[16] = "";
	if (im->rd && im->rd->size)
		snprintf(pct, sizeof(pct), "%5.1f%% ", 100.0 * (double)im->rd->done / (double)im->rd->size);
	fprintf(stderr, "\r\033[Kimport: %s%llu items, %.0f/s, stored %llu, duplicate %llu, rejected %llu",
		pct, (unsigned long long)im->items, (double)im->items / el,
		(unsigned long long)im->stored, (unsigned long long)im->duplicate,
		(unsigned long long)im->rejected);
	if (final)
		fputc('\n', stderr);
}

static chunk_t *chunk_new(void)
{
	chunk_t *c = calloc(1, sizeof(*c));
	if (c && !(c->items = malloc(CHUNK_ITEMS * sizeof(*c->items)))) {
		free(c);
		return NULL;
	}
	if (c)
		c->cap = CHUNK_ITEMS;
	return c;
}

/* Frees what the items of c still hold and empties it. */
static void chunk_reset(chunk_t *c)
{
	for (size_t i = 0; i < c->n; i++) {
		pith_event_free(c->items[i].ev);
		pith_buf_release(&c->items[i].canon);
		json_doc_free(c->items[i].bundle);
	}
	c->n = 0;
	c->arena.len = 0;
}

static void chunk_free(chunk_t *c)
{
	if (!c)
		return;
	chunk_reset(c);
	pith_buf_release(&c->arena);
	free(c->items);
	free(c);
}

/* Chunks are reused: their arenas are megabytes, and fresh ones cost a
 * page fault per page. */
static void chunk_recycle(import_t *im, chunk_t *c)
{
	chunk_reset(c);
	c->qnext = im->spare;
	im->spare = c;
}

/* Hands the verified items of c to the store in order, as one batch. */
static int commit_chunk(import_t *im, chunk_t *c)
{
	pith_err_t err = {0};
	const char *last_file = NULL;
	size_t last_line = 0;
	double c0 = thread_cpu();
	pool_wait(&im->pool, c);
	double c1 = thread_cpu();
	im->cpu_wait += c1 - c0;
	for (size_t i = 0; i < c->n; i++) {
		item_t *it = &c->items[i];
		last_file = it->file;
		last_line = it->line;
		im->items++;
		if (it->kind == IT_REJECT) {
			im->rejected++;
			count_reason(im, it->reason);
			if (im->tty)
				fprintf(stderr, "\r\033[K");
			fprintf(stderr, "pithctl import: %s:%zu: rejected (%s): %s\n", it->file, it->line,
				it->reason, it->msg);
			continue;
		}
		if (it->kind == IT_EVENT) {
			it->index = store_batch_add_event(im->batch, it->ev, &it->canon, &err);
			it->ev = NULL;
		} else {
			it->index = store_batch_add_bundle(im->batch, it->bundle, &err);
			it->bundle = NULL;
		}
		if (it->index < 0) {
			/* verified, yet the store refuses its shape: a bug, say so */
			im->rejected++;
			count_reason(im, "store");
			fprintf(stderr, "pithctl import: %s:%zu: rejected (store): %s\n", it->file, it->line,
				err.msg);
			it->kind = IT_REJECT;
		}
	}
	store_commit_stats_t s;
	if (store_batch_commit(im->batch, &s, &err)) {
		fprintf(stderr, "%spithctl import: %s: %s (lines after the last reported checkpoint "
			"were not stored)\n", im->tty ? "\r\033[K" : "", im->ctx->store_dir, err.msg);
		im->failed = 1;
		return 1;
	}
	im->cpu_commit += thread_cpu() - c1;
	im->stored += s.stored;
	im->duplicate += s.duplicate;
	im->resigned += s.resigned;
	im->bundles_newer += s.bundles_newer;
	im->bundles_older += s.bundles_older;
	if (im->progress_file && last_file) {
		/* written only after the commit returned: every line up to here
		 * is durably stored, a duplicate, or rejected */
		fprintf(im->progress_file, "stored %llu through %s:%zu\n",
			(unsigned long long)im->stored, last_file, last_line);
		fflush(im->progress_file);
	}
	draw_progress(im, 0);
	return 0;
}

/* Submits the current chunk; commits the oldest when too many are out. */
static int flush_chunk(import_t *im, int all)
{
	if (im->cur && im->cur->n) {
		pool_submit(&im->pool, im->cur);
		im->inflight[im->ninflight++] = im->cur;
		im->cur = NULL;
	}
	while (im->ninflight && (all || im->ninflight >= IN_FLIGHT)) {
		chunk_t *c = im->inflight[0];
		int rc = commit_chunk(im, c);
		chunk_recycle(im, c);
		memmove(im->inflight, im->inflight + 1, --im->ninflight * sizeof(chunk_t *));
		if (rc)
			return rc;
	}
	return 0;
}

static int add_item(import_t *im, const char *file, size_t line, const uint8_t *p, size_t len,
		    int oversize)
{
	if (!im->cur && im->spare) {
		im->cur = im->spare;
		im->spare = im->cur->qnext;
	}
	if (!im->cur && !(im->cur = chunk_new()))
		return cli_fail("import", "out of memory");
	chunk_t *c = im->cur;
	item_t *it = &c->items[c->n];
	memset(it, 0, sizeof(*it));
	it->file = file;
	it->line = line;
	it->oversize = oversize;
	it->off = c->arena.len;
	it->len = len;
	if (pith_buf_append(&c->arena, p, len))
		return cli_fail("import", "out of memory");
	c->n++;
	if (c->n == c->cap || c->arena.len >= CHUNK_BYTES)
		return flush_chunk(im, 0);
	return 0;
}

/* A file is JSON Lines unless its first line is the start of a longer
 * document (a pretty-printed bundle or event): then the whole file is one
 * item. */
static int import_file(import_t *im, const char *path)
{
	reader_t r;
	if (reader_open(&r, path)) {
		reader_close(&r);
		return 1;
	}
	im->rd = &r;
	const uint8_t *line;
	size_t len;
	int oversize, rc = 0, first = 1;
	while (!rc && reader_next(&r, &line, &len, &oversize)) {
		if (!oversize && is_blank(line, len))
			continue;
		if (first && !oversize && !r.eof) {
			first = 0;
			json_doc_t *d = NULL;
			if (json_parse(&d, line, len, NULL, NULL) == PITH_ETRUNC) {
				/* one document over many lines: take all of it */
				pith_buf_t all = PITH_BUF_INIT;
				int big = 0;
				if (pith_buf_append(&all, line, len) || pith_buf_putc(&all, '\n'))
					big = 1;
				while (!big && (r.end > r.start || reader_fill(&r))) {
					if (all.len + (r.end - r.start) > CLI_MAX_INPUT ||
					    pith_buf_append(&all, r.buf + r.start, r.end - r.start))
						big = 1;
					r.done += r.end - r.start;
					r.start = r.end;
				}
				rc = add_item(im, r.name, 1, all.data, big ? 0 : all.len, big);
				pith_buf_release(&all);
				json_doc_free(d);
				break;
			}
			json_doc_free(d);
		}
		first = 0;
		rc = add_item(im, r.name, r.line, line, len, oversize);
	}
	if (!rc && r.err)
		rc = cli_fail("import", "cannot read %s: %s", r.name, strerror(r.err));
	/* commit what was read from this file before its name goes away */
	if (!rc)
		rc = flush_chunk(im, 1);
	im->rd = NULL;
	reader_close(&r);
	return rc;
}

static void print_summary(import_t *im, double secs)
{
	double rate = secs > 0 ? (double)(im->stored + im->duplicate + im->resigned) / secs : 0;
	if (im->ctx->json) {
		printf("{\"stored\":%llu,\"duplicate\":%llu,\"resigned\":%llu,\"rejected\":%llu,"
		       "\"bundles_newer\":%llu,\"bundles_older\":%llu,\"reasons\":{",
		       (unsigned long long)im->stored, (unsigned long long)im->duplicate,
		       (unsigned long long)im->resigned, (unsigned long long)im->rejected,
		       (unsigned long long)im->bundles_newer, (unsigned long long)im->bundles_older);
		for (size_t i = 0; i < im->nreasons; i++)
			printf("%s\"%s\":%llu", i ? "," : "", im->reasons[i].name,
			       (unsigned long long)im->reasons[i].n);
		printf("},\"seconds\":%.3f,\"events_per_second\":%.0f}\n", secs, rate);
		return;
	}
	printf("stored     %llu\n", (unsigned long long)im->stored);
	printf("duplicate  %llu\n", (unsigned long long)im->duplicate);
	if (im->resigned)
		printf("resigned   %llu (duplicates whose signature block replaced the stored one)\n",
		       (unsigned long long)im->resigned);
	printf("rejected   %llu\n", (unsigned long long)im->rejected);
	for (size_t i = 0; i < im->nreasons; i++)
		printf("  %-16s %llu\n", im->reasons[i].name, (unsigned long long)im->reasons[i].n);
	if (im->bundles_newer || im->bundles_older)
		printf("bundles    %llu now the newest, %llu not newer than the stored one\n",
		       (unsigned long long)im->bundles_newer, (unsigned long long)im->bundles_older);
	printf("time       %.2f s, %.0f events/s\n", secs, rate);
	if (getenv("PITH_IMPORT_PROFILE"))
		fprintf(stderr, "CPU seconds: main thread %.3f (committing %.3f, verifying while waiting "
			"%.3f), workers %.3f, process %.3f\n", thread_cpu(), im->cpu_commit, im->cpu_wait,
			im->pool.worker_cpu, cpu_seconds(CLOCK_PROCESS_CPUTIME_ID));
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *files[256];
	size_t nfiles = 0;
	const char *progress_path = NULL;
	int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), no_bar = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--progress-file") && i + 1 < argc)
			progress_path = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-progress"))
			no_bar = 1;
		else if (!strcmp(argv[i], "--json"))
			;
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_fail("import", "unknown option %s", argv[i]);
		else if (nfiles < sizeof(files) / sizeof(files[0]))
			files[nfiles++] = argv[i];
		else
			return cli_fail("import", "too many files (256 at most per run)");
	}
	if (!nfiles)
		return cli_fail("import", "missing FILE (or - for stdin)");
	if (threads < 1)
		threads = 1;
	if (threads > MAX_WORKERS)
		threads = MAX_WORKERS;

	import_t im = {.ctx = ctx};
	pith_trust_t *trust = NULL;
	int rc = 1;
	if (cli_store_open(ctx, "import", 1, &trust, &im.st))
		return 1;
	if (progress_path && !(im.progress_file = fopen(progress_path, "a"))) {
		cli_fail("import", "cannot open %s: %s", progress_path, strerror(errno));
		goto done;
	}
	if (!(im.batch = store_batch_new(im.st))) {
		cli_fail("import", "out of memory");
		goto done;
	}
	if (pool_start(&im.pool, threads, trust)) {
		cli_fail("import", "cannot start worker threads");
		pool_stop(&im.pool);
		goto done;
	}
	im.tty = !no_bar && isatty(2);
	im.t0 = now();
	rc = 0;
	for (size_t i = 0; i < nfiles && !rc; i++)
		rc = import_file(&im, files[i]);
	if (rc) {
		/* drop what was read but not committed */
		for (size_t i = 0; i < im.ninflight; i++) {
			pool_wait(&im.pool, im.inflight[i]);
			chunk_free(im.inflight[i]);
		}
		chunk_free(im.cur);
	}
	pool_stop(&im.pool);
	if (!rc && !im.failed) {
		/* leave compressed table files rather than a log of raw bytes */
		pith_err_t err = {0};
		if (store_flush(im.st, &err))
			rc = cli_fail("import", "%s", err.msg);
	}
	while (im.spare) {
		chunk_t *c = im.spare;
		im.spare = c->qnext;
		chunk_free(c);
	}
	draw_progress(&im, 1);
	print_summary(&im, now() - im.t0);
	if (!rc && im.rejected)
		rc = 1;
done:
	if (im.progress_file)
		fclose(im.progress_file);
	store_batch_free(im.batch);
	store_close(im.st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_import = {
	"import", "verify and store bundles, events and JSON Lines of events",
	"usage: pithctl --store DIR [--trust-key FILE]... import [--json] [--threads N]\n"
	"                [--progress-file FILE] [--no-progress] FILE...\n\n"
	"FILE ('-' for stdin) holds JSON Lines, each line an event or a bundle, or\n"
	"one (pretty-printed) bundle or event. Every item is verified first (JSON,\n"
	"content hash, event id, trusted unrotated key, Ed25519; bundles with every\n"
	"bundle check) on N worker threads (default: one per core); verified items\n"
	"are committed in input order in atomic, synced batches. A rejected line is\n"
	"reported as FILE:LINE with its reason and the rest of the file is still\n"
	"imported. At the end a summary: stored, duplicate, rejected per reason.\n"
	"A progress bar is drawn on stderr when it is a terminal.\n\n"
	"--progress-file FILE  after each commit, append 'stored N through FILE:LINE':\n"
	"                      every line up to there is stored, duplicate or rejected.\n\n"
	"Exit status: 0 if every item was stored or a duplicate, 1 if any was\n"
	"rejected or the store failed.\n",
	run,
};
