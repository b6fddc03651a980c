/* pithctl import FILE...: bundles, single events and JSON Lines into the
 * store.
 *
 * The main thread reads lines into chunks and hands each chunk to the
 * ingest pipeline (node/ingest/ingest_core.h, the one pithd runs) as one group:
 * its validators (one per core) parse and verify every item (JSON, hashes,
 * trust, Ed25519) and compute its canonical bytes, and its writer commits
 * each chunk in input order as one store batch (one atomic WriteBatch,
 * synced, or for large files without the log: docs/store.md,
 * "Durability") while the next chunks are read and verified. The main thread
 * helps verify when it would otherwise wait (but not while the writer
 * commits), then reports each committed chunk in input order. Nothing is
 * handed to the store before it verified, and a bad line never stops the
 * rest of the file. */
#include "cli_node.h"
#include "cli_store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bundle.h"
#include "ingest_core.h"
#include "prio.h"

#define CHUNK_ITEMS 2048
#define CHUNK_BYTES (8u << 20)
#define LINE_MAX_BYTES (64u << 20) /* a bundle on one line may be large */
#define IN_FLIGHT 3                /* chunks read ahead of the commit */
#define MAX_WORKERS 16
#define NODE_WINDOW 256            /* --node: requests sent ahead of their answers */

typedef struct chunk chunk_t;

typedef struct item {
	ingest_job_t job;    /* first: on_done gets &job */
	size_t off, len;     /* the line, in its chunk's arena */
	const char *file;
	size_t line;
	int oversize;        /* longer than LINE_MAX_BYTES: bytes dropped */
	chunk_t *chunk;
} item_t;

struct chunk {
	item_t *items;
	ingest_job_t **jobs;  /* &items[i].job, for the pipeline */
	size_t n, cap;
	pith_buf_t arena;
	ingest_group_t group; /* committed as one batch */
	size_t back;          /* items the pipeline handed back */
	chunk_t *next;        /* the list of spare chunks */
};

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

/* The import's name of a rejection: the names of docs/merge.md ("Names of
 * refusals"), which the conformance corpus uses too; the node names some
 * differently (ingest_job_t.reason). A JSON fault is "too_big" only over
 * the byte bound (1 MiB for an event, 64 MiB for a bundle), whatever
 * else is wrong with it: any other one, a text cut short or nested too
 * deep included, is "json" (its message says which). */
static const char *item_reason(const ingest_job_t *j)
{
	switch (j->fail) {
	case INGEST_FAIL_CHECK:
		if (j->check != PITH_CHECK_JSON)
			return pith_event_check_name(j->check);
		return j->len > PITH_EVENT_MAX_BYTES ? "too_big" : "json";
	case INGEST_FAIL_JSON: return j->len > PITH_BUNDLE_MAX_BYTES ? "too_big" : "json";
	case INGEST_FAIL_TOO_BIG: return "too_big";
	case INGEST_FAIL_BUNDLE: case INGEST_FAIL_UNTRUSTED: return j->reason; /* bundle_... */
	case INGEST_FAIL_OOM: return "json"; /* no canonical form */
	default: return j->reason;
	}
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

/* An import of at least this many bytes of regular files commits without
 * the write-ahead log unless --wal (docs/store.md, "Durability") */
#define UNLOGGED_MIN_BYTES (64ull << 20)

/* A progress line of an unlogged import, held until the store has
 * flushed what it reports */
typedef struct pending {
	uint64_t events; /* the store's event count as the chunk's commit left it */
	uint64_t stored;
	const char *file;
	size_t line;
} pending_t;

typedef struct import {
	const cli_ctx_t *ctx;
	store_t *st;
	ingest_core_t *pipe;
	chunk_t *inflight[IN_FLIGHT];
	size_t ninflight;
	chunk_t *cur;
	FILE *progress_file;
	int tty;
	double t0, last_draw;
	reader_t *rd;          /* the file being read, for the progress bar */
	uint64_t items, stored, duplicate, resigned, rejected;
	uint64_t bundles_newer, bundles_older;
	cli_reasons_t reasons;
	int failed;            /* a store error: stop */
	double cpu_wait;       /* main thread CPU seconds waiting (PITH_IMPORT_PROFILE) */
	chunk_t *spare;        /* committed chunks for reuse */
	int unlogged;          /* the store commits without its log */
	pending_t *pend;       /* unlogged: progress lines not yet flushed */
	size_t npend, cappend;
	double last_durable;   /* when the flushed counters were last read */
	/* --node: items go to a running pithd's control socket, pipelined */
	FILE *node_out, *node_in;
	struct { const char *file; size_t line; } sent[NODE_WINDOW];
	size_t sent_head, nsent;
} import_t;

static void draw_progress(import_t *im, int final)
{
	if (!im->tty)
		return;
	if (!cli_progress_due(&im->last_draw, final))
		return;
	double t = im->last_draw;
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
	if (!c)
		return NULL;
	c->items = malloc(CHUNK_ITEMS * sizeof(*c->items));
	c->jobs = malloc(CHUNK_ITEMS * sizeof(*c->jobs));
	if (!c->items || !c->jobs) {
		free(c->items);
		free(c->jobs);
		free(c);
		return NULL;
	}
	c->cap = CHUNK_ITEMS;
	return c;
}

/* Frees what the items of c still hold and empties it. */
static void chunk_reset(chunk_t *c)
{
	for (size_t i = 0; i < c->n; i++)
		ingest_job_clear(&c->items[i].job);
	c->n = c->back = 0;
	c->arena.len = 0;
}

static void chunk_free(chunk_t *c)
{
	if (!c)
		return;
	chunk_reset(c);
	pith_buf_release(&c->arena);
	free(c->items);
	free(c->jobs);
	free(c);
}

/* Chunks are reused: their arenas are megabytes, and fresh ones cost a
 * page fault per page. */
static void chunk_recycle(import_t *im, chunk_t *c)
{
	chunk_reset(c);
	c->next = im->spare;
	im->spare = c;
}

/* The pipeline hands an item back (on the main thread). */
static void item_done(void *arg, ingest_job_t *job)
{
	(void)arg;
	((item_t *)job)->chunk->back++;
}

/* Hands c to the pipeline: its items are verified, then committed in
 * order as one batch. */
static void chunk_submit(import_t *im, chunk_t *c)
{
	for (size_t i = 0; i < c->n; i++) {
		item_t *it = &c->items[i];
		it->job.bytes = c->arena.data + it->off; /* the arena is complete */
		c->jobs[i] = &it->job;
		if (it->oversize) {
			char m[64];
			snprintf(m, sizeof(m), "line longer than %u bytes", LINE_MAX_BYTES);
			ingest_job_reject(&it->job, INGEST_FAIL_TOO_BIG, PITH_ETOOBIG, m);
		}
	}
	ingest_core_submit_group(im->pipe, &c->group, c->jobs, c->n);
}

/* Waits until every item of c is back, verifying queued items meanwhile
 * (ingest_core_wait) rather than sleeping. */
static void chunk_wait(import_t *im, chunk_t *c)
{
	double c0 = thread_cpu();
	while (c->back < c->n)
		if (!ingest_core_deliver(im->pipe))
			ingest_core_wait(im->pipe);
	im->cpu_wait += thread_cpu() - c0;
}

static void progress_write(import_t *im, uint64_t stored, const char *file, size_t line)
{
	fprintf(im->progress_file, "stored %llu through %s:%zu\n", (unsigned long long)stored, file,
		line);
	fflush(im->progress_file);
}

/* Unlogged: writes the newest held progress line whose events the store
 * has flushed (its counters on disk reach the count the line was held
 * with: flushes keep a prefix of the commits). The counters are read at
 * most once a second unless force. */
static void progress_durable(import_t *im, int force)
{
	if (!im->npend)
		return;
	double now = cli_now();
	if (!force && now - im->last_durable < 1.0)
		return;
	im->last_durable = now;
	store_counts_t d;
	pith_err_t err = {0};
	if (store_counts_durable(im->st, &d, &err))
		return; /* the store counts the error; the line waits */
	size_t k = 0;
	while (k < im->npend && im->pend[k].events <= d.events)
		k++;
	if (!k)
		return;
	const pending_t *p = &im->pend[k - 1];
	progress_write(im, p->stored, p->file, p->line);
	memmove(im->pend, im->pend + k, (im->npend - k) * sizeof(*im->pend));
	im->npend -= k;
}

/* The progress line for everything up to file:line, whose commit left the
 * store with events events, once it is durable: at once with the log (the
 * commit was synced), else when flushed. */
static void progress_note(import_t *im, uint64_t events, const char *file, size_t line)
{
	if (!im->unlogged) {
		progress_write(im, im->stored, file, line);
		return;
	}
	if (im->npend == im->cappend) {
		size_t cap = im->cappend ? 2 * im->cappend : 64;
		pending_t *p = realloc(im->pend, cap * sizeof(*p));
		if (!p)
			return; /* a later line covers this one */
		im->pend = p;
		im->cappend = cap;
	}
	im->pend[im->npend++] = (pending_t){events, im->stored, file, line};
	progress_durable(im, 0);
}

/* Reports the items of c, committed (or not) by the pipeline, in order. */
static int chunk_report(import_t *im, chunk_t *c)
{
	const char *last_file = NULL;
	size_t last_line = 0;
	for (size_t i = 0; i < c->n; i++) {
		item_t *it = &c->items[i];
		const ingest_job_t *j = &it->job;
		last_file = it->file;
		last_line = it->line;
		im->items++;
		if (!j->rc || j->fail == INGEST_FAIL_COMMIT)
			continue;
		im->rejected++;
		cli_reasons_count(&im->reasons, item_reason(j));
		if (j->fail == INGEST_FAIL_STORE) {
			/* verified, yet the store refuses its shape: a bug, say so */
			fprintf(stderr, "pithctl import: %s:%zu: rejected (store): %s\n", it->file, it->line,
				j->msg);
			continue;
		}
		if (im->tty)
			fprintf(stderr, "\r\033[K");
		fprintf(stderr, "pithctl import: %s:%zu: rejected (%s): %s\n", it->file, it->line,
			item_reason(j), j->msg);
	}
	if (c->group.rc) {
		fprintf(stderr, "%spithctl import: %s: %s (lines after the last reported checkpoint "
			"were not stored)\n", im->tty ? "\r\033[K" : "", im->ctx->store_dir, c->group.msg);
		im->failed = 1;
		return 1;
	}
	const store_commit_stats_t *s = &c->group.stats;
	im->stored += s->stored;
	im->duplicate += s->duplicate;
	im->resigned += s->resigned;
	im->bundles_newer += s->bundles_newer;
	im->bundles_older += s->bundles_older;
	if (im->progress_file && last_file)
		/* written only once the commit is durable: every line up to here
		 * is stored, a duplicate, or rejected */
		progress_note(im, s->counts.events, last_file, last_line);
	draw_progress(im, 0);
	return 0;
}

/* Submits the current chunk; reports the oldest when too many are out. */
static int flush_chunk(import_t *im, int all)
{
	if (im->cur && im->cur->n) {
		chunk_submit(im, im->cur);
		im->inflight[im->ninflight++] = im->cur;
		im->cur = NULL;
	}
	while (im->ninflight && (all || im->ninflight >= IN_FLIGHT)) {
		chunk_t *c = im->inflight[0];
		chunk_wait(im, c);
		int rc = chunk_report(im, c);
		chunk_recycle(im, c);
		memmove(im->inflight, im->inflight + 1, --im->ninflight * sizeof(chunk_t *));
		if (rc)
			return rc;
	}
	return 0;
}

static int node_send(import_t *im, const char *file, size_t line, const uint8_t *p, size_t len,
		     int oversize);

static int add_item(import_t *im, const char *file, size_t line, const uint8_t *p, size_t len,
		    int oversize)
{
	if (im->node_out)
		return node_send(im, file, line, p, len, oversize);
	if (!im->cur && im->spare) {
		im->cur = im->spare;
		im->spare = im->cur->next;
	}
	if (!im->cur && !(im->cur = chunk_new()))
		return cli_fail("import", "out of memory");
	chunk_t *c = im->cur;
	item_t *it = &c->items[c->n];
	ingest_job_init(&it->job, INGEST_ANY, NULL, len);
	it->chunk = c;
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

/* ---- --node: through a running pithd's control socket ------------------------- */

/* The import's name (item_reason's, docs/merge.md) of the node's answer
 * reason r with error msg, kept by pointer in the summary's counts. The
 * node says "bundle" or "untrusted_key" for every bundle refusal and
 * names the first failed check in msg ("bundle check NAME failed"), and
 * "content_hash", "untrusted_key" for the events' content_sha256, key. */
static const char *node_reason(const char *r, const char *msg)
{
	static const char *const known[] = {
		"json", "shape", "event_id", "rotated_key", "signature", "not_a_bundle",
		"too_big", "id_mismatch", "store", "oom", "shutdown", "invalid",
	};
	const char *pre = "bundle check ";
	if (r && (!strcmp(r, "bundle") || !strcmp(r, "untrusted_key")) && msg &&
	    !strncmp(msg, pre, strlen(pre))) {
		char check[64];
		snprintf(check, sizeof(check), "%s", msg + strlen(pre));
		check[strcspn(check, " ")] = 0;
		return pith_bundle_check_refusal(check);
	}
	if (r && !strcmp(r, "content_hash"))
		return "content_sha256";
	if (r && !strcmp(r, "untrusted_key"))
		return "key";
	for (size_t i = 0; r && i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(r, known[i]))
			return known[i];
	return "other";
}

static void node_reject(import_t *im, const char *file, size_t line, const char *reason,
			const char *msg)
{
	im->items++;
	im->rejected++;
	cli_reasons_count(&im->reasons, reason);
	fprintf(stderr, "pithctl import: %s:%zu: rejected (%s): %s\n", file, line, reason, msg);
}

/* Reads answers until at most keep requests are outstanding. 0, or 1 when
 * the node went away (said). */
static int node_drain(import_t *im, size_t keep)
{
	char *ans = NULL;
	size_t cap = 0;
	int rc = 0;
	if (fflush(im->node_out)) {
		im->failed = 1;
		return cli_fail("import", "cannot send to %s: %s", im->ctx->node_sock, strerror(errno));
	}
	while (im->nsent > keep) {
		size_t k = im->sent_head;
		const char *file = im->sent[k].file;
		size_t line = im->sent[k].line;
		im->sent_head = (k + 1) % NODE_WINDOW;
		im->nsent--;
		ssize_t got = getline(&ans, &cap, im->node_in);
		if (got <= 0) {
			rc = cli_fail("import", "%s closed the connection before answering %s:%zu "
				      "(lines from there on may not be stored)", im->ctx->node_sock, file, line);
			im->failed = 1;
			break;
		}
		json_doc_t *d = NULL;
		if (json_parse(&d, (const uint8_t *)ans, (size_t)got, NULL, NULL)) {
			node_reject(im, file, line, "other", "the node's answer is not JSON");
			continue;
		}
		const json_value_t *a = json_doc_root(d);
		const char *out = cli_json_str(a, "outcome");
		if (!json_is(json_get(a, "ok"), JSON_TRUE)) {
			node_reject(im, file, line,
				    node_reason(cli_json_str(a, "reason"), cli_json_str(a, "error")),
				    cli_json_str(a, "error"));
		} else {
			im->items++;
			if (!strcmp(out, "stored"))
				im->stored++;
			else if (!strcmp(out, "duplicate"))
				im->duplicate++;
			else if (!strcmp(out, "resigned"))
				im->resigned++;
			else if (!strcmp(out, "newer"))
				im->bundles_newer++;
			else
				im->bundles_older++; /* "same" or "older": not newer than the stored one */
		}
		json_doc_free(d);
		draw_progress(im, 0);
	}
	free(ans);
	return rc;
}

/* Sends one item as `event JSON` or `bundle JSON` (one line: a
 * pretty-printed document's line breaks are JSON whitespace and become
 * spaces). */
static int node_send(import_t *im, const char *file, size_t line, const uint8_t *p, size_t len,
		     int oversize)
{
	if (oversize || !len) {
		char m[64];
		snprintf(m, sizeof(m), "line longer than %u bytes", LINE_MAX_BYTES);
		node_reject(im, file, line, oversize ? "too_big" : "json", oversize ? m : "an empty item");
		return 0;
	}
	if (im->nsent == NODE_WINDOW && node_drain(im, NODE_WINDOW - 1))
		return 1;
	/* what a file's import reads it as (D-KIND), not a guess by bytes:
	 * an event whose payload has a bundle_type member is an event */
	int bundle = pith_item_kind(p, len) == PITH_DOC_BUNDLE;
	fputs(bundle ? "bundle " : "event ", im->node_out);
	for (size_t i = 0; i < len; i++)
		putc(p[i] == '\n' || p[i] == '\r' ? ' ' : p[i], im->node_out);
	putc('\n', im->node_out);
	size_t k = (im->sent_head + im->nsent) % NODE_WINDOW;
	im->sent[k].file = file;
	im->sent[k].line = line;
	im->nsent++;
	return 0;
}

/* The lines of text (a whole file read as one) as items from line first
 * on, as reader_next would have given them. */
static int add_lines(import_t *im, const char *file, size_t first, const uint8_t *p, size_t n)
{
	int rc = 0;
	for (size_t at = 0, line = first; !rc && at < n; line++) {
		const uint8_t *nl = memchr(p + at, '\n', n - at);
		size_t len = nl ? (size_t)(nl - (p + at)) : n - at;
		int oversize = len > LINE_MAX_BYTES;
		if (oversize || !is_blank(p + at, len))
			rc = add_item(im, file, line, p + at, oversize ? 0 : len, oversize);
		at += len + 1;
	}
	return rc;
}

/* A file is JSON Lines unless its first line is the start of a longer
 * document and the whole file is that one document (a pretty-printed
 * bundle or event): then the whole file is one item (docs/merge.md,
 * D-ITEM). A first line cut short in JSON Lines does not make the rest of
 * the file one item, which would store other documents in one order of
 * the lines and not in another. */
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
				json_doc_t *whole = NULL;
				json_limits_t lim = {CLI_MAX_INPUT, JSON_MAX_DEPTH_DEFAULT, JSON_MAX_INT_DIGITS};
				if (big || !json_parse(&whole, all.data, all.len, &lim, NULL))
					rc = add_item(im, r.name, r.line, all.data, big ? 0 : all.len, big);
				else
					rc = add_lines(im, r.name, r.line, all.data, all.len);
				json_doc_free(whole);
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
		rc = im->node_out ? node_drain(im, 0) : flush_chunk(im, 1);
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
		cli_reasons_print(&im->reasons, 1);
		printf("},\"seconds\":%.3f,\"events_per_second\":%.0f}\n", secs, rate);
		return;
	}
	printf("stored     %llu\n", (unsigned long long)im->stored);
	printf("duplicate  %llu\n", (unsigned long long)im->duplicate);
	if (im->resigned)
		printf("resigned   %llu (duplicates whose signature block replaced the stored one)\n",
		       (unsigned long long)im->resigned);
	printf("rejected   %llu\n", (unsigned long long)im->rejected);
	cli_reasons_print(&im->reasons, 0);
	if (im->bundles_newer || im->bundles_older)
		printf("bundles    %llu now the newest, %llu not newer than the stored one\n",
		       (unsigned long long)im->bundles_newer, (unsigned long long)im->bundles_older);
	printf("time       %.2f s, %.0f events/s\n", secs, rate);
	if (getenv("PITH_IMPORT_PROFILE")) {
		/* the pipeline's threads (validators, writer) and RocksDB's */
		double main_cpu = thread_cpu(), all = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
		fprintf(stderr, "CPU seconds: main thread %.3f (verifying while waiting %.3f), "
			"other threads %.3f, process %.3f\n", main_cpu, im->cpu_wait,
			all - main_cpu, all);
	}
}

/* --node: the same reading, the same summary and exit status; the node
 * verifies and stores (its own trust keys apply, not --trust-key). */
static int run_node(import_t *im, const char **files, size_t nfiles, int no_bar)
{
	int fd, rc = 0;
	if (cli_node_connect(im->ctx->node_sock, "import", &fd))
		return 1;
	int fd2 = dup(fd);
	im->node_out = fdopen(fd, "w");
	im->node_in = fd2 >= 0 ? fdopen(fd2, "r") : NULL;
	if (!im->node_out || !im->node_in) {
		if (im->node_out)
			fclose(im->node_out);
		else
			close(fd);
		if (fd2 >= 0 && !im->node_in)
			close(fd2);
		return cli_fail("import", "out of memory");
	}
	im->tty = !no_bar && isatty(2);
	im->t0 = cli_now();
	for (size_t i = 0; i < nfiles && !rc; i++)
		rc = import_file(im, files[i]);
	if (!rc)
		rc = node_drain(im, 0);
	fclose(im->node_out);
	fclose(im->node_in);
	draw_progress(im, 1);
	print_summary(im, cli_now() - im->t0);
	return rc || im->rejected || im->failed ? 1 : 0;
}

/* Without --wal or --no-wal: unlogged when every FILE is a regular file
 * and together they hold at least UNLOGGED_MIN_BYTES (a pipe or a small
 * file may take long to fill a memtable, and would keep its progress lines
 * waiting for the flush). */
static int unlogged_by_size(const char *const *files, size_t nfiles)
{
	unsigned long long total = 0;
	for (size_t i = 0; i < nfiles; i++) {
		struct stat sb;
		if (!strcmp(files[i], "-") || stat(files[i], &sb) || !S_ISREG(sb.st_mode))
			return 0;
		total += (unsigned long long)sb.st_size;
	}
	return total >= UNLOGGED_MIN_BYTES;
}

/* Unlogged, at the end (on an error too): every family flushed in one
 * atomic group (store_unlogged_end), then the store takes its log again
 * for the compactions the import put off; the held progress lines are
 * all durable then. */
static int relog(import_t *im)
{
	pith_err_t err = {0};
	if (store_unlogged_end(im->st, &err)) {
		im->failed = 1;
		return cli_fail("import", "%s (what the store's earlier flushes hold is kept, and "
				"the progress file says how far that is; run the same import again "
				"to store the rest)", err.msg);
	}
	im->unlogged = 0;
	progress_durable(im, 1);
	return 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *files[256];
	size_t nfiles = 0;
	const char *progress_path = NULL;
	int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), no_bar = 0, wal = -1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--progress-file") && i + 1 < argc)
			progress_path = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-progress"))
			no_bar = 1;
		else if (!strcmp(argv[i], "--wal"))
			wal = 1;
		else if (!strcmp(argv[i], "--no-wal"))
			wal = 0;
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
	if (ctx->node_sock && wal >= 0)
		return cli_fail("import", "%s: a node commits its own way (its catch-ups without the "
				"log: sync_bulk_unlogged, docs/pithd.md); drop it with --node",
				wal ? "--wal" : "--no-wal");
	if (ctx->node_sock)
		return run_node(&im, files, nfiles, no_bar);
	im.unlogged = wal == 0 || (wal < 0 && unlogged_by_size(files, nfiles));
	if (cli_store_open(ctx, "import", (im.unlogged ? CLI_STORE_UNLOGGED : 1) | CLI_STORE_IMPORT,
			   &trust, &im.st))
		return 1;
	if (progress_path && !(im.progress_file = fopen(progress_path, "a"))) {
		cli_fail("import", "cannot open %s: %s", progress_path, strerror(errno));
		goto done;
	}
	pith_err_t berr = {0};
	if (store_bulk_begin(im.st, STORE_BULK_IMPORT, &berr))
		fprintf(stderr, "pithctl import: %s (importing with the usual compactions)\n", berr.msg);
	/* the validators below the writer: with both cores busy, the writer
	 * (which every chunk waits for) waited 6 s of a 1M-event import's 26
	 * for a core (docs/performance.md at 262f3c4, issue 17, session 23) */
	ingest_opts_t o = {.trust = trust, .st = im.st, .nthreads = threads,
			   .validator_nice = PRIO_BELOW_WRITER, .on_done = item_done};
	if (!(im.pipe = ingest_core_new(&o))) {
		cli_fail("import", "cannot start worker threads");
		goto done;
	}
	im.tty = !no_bar && isatty(2);
	im.t0 = cli_now();
	rc = 0;
	for (size_t i = 0; i < nfiles && !rc; i++)
		rc = import_file(&im, files[i]);
	/* on an error, drops what was read but not committed */
	ingest_core_free(im.pipe);
	for (size_t i = 0; i < im.ninflight; i++) {
		/* the writer may have been committing it as the import stopped */
		if (!im.failed && !im.inflight[i]->group.rc)
			chunk_report(&im, im.inflight[i]);
		chunk_free(im.inflight[i]);
	}
	chunk_free(im.cur);
	if (im.unlogged) {
		/* on an error too: what was committed is kept and reported */
		if (relog(&im))
			rc = 1;
	} else if (!rc && !im.failed) {
		/* leave compressed table files rather than a log of raw bytes */
		pith_err_t err = {0};
		if (store_flush(im.st, &err))
			rc = cli_fail("import", "%s", err.msg);
	}
	/* the compactions the bulk load put off, before the summary's time:
	 * the store is left as an import without it would leave it (done on
	 * an error too, but not waited for) */
	if (im.tty && !rc && !im.failed)
		fputs("\r\033[Kpithctl import: compacting what the import put off...", stderr);
	if (im.st && store_bulk_end(im.st, !rc && !im.failed, &berr))
		fprintf(stderr, "pithctl import: %s\n", berr.msg);
	while (im.spare) {
		chunk_t *c = im.spare;
		im.spare = c->next;
		chunk_free(c);
	}
	draw_progress(&im, 1);
	print_summary(&im, cli_now() - im.t0);
	if (!rc && im.rejected)
		rc = 1;
done:
	free(im.pend);
	if (im.progress_file)
		fclose(im.progress_file);
	store_close(im.st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_import = {
	"import", "verify and store bundles, events and JSON Lines of events",
	"usage: pithctl --store DIR [--trust-key FILE]... import [--json] [--threads N]\n"
	"                [--progress-file FILE] [--no-progress] [--wal | --no-wal] FILE...\n"
	"       pithctl --node SOCKET import [--json] [--no-progress] FILE...\n\n"
	"FILE ('-' for stdin) holds JSON Lines, each line an event or a bundle, or\n"
	"one (pretty-printed) bundle or event. Every item is verified first (JSON,\n"
	"content hash, event id, trusted unrotated key, Ed25519; bundles with every\n"
	"bundle check) on N worker threads (default: one per core); verified items\n"
	"are committed in input order in atomic batches. A rejected line is\n"
	"reported as FILE:LINE with its reason and the rest of the file is still\n"
	"imported. The store is in bulk mode meanwhile (fewer, larger compactions;\n"
	"docs/store.md, \"Bulk loading\"), and the import waits for the compactions\n"
	"it put off before it ends. At the end a summary: stored, duplicate,\n"
	"rejected per reason, named as docs/merge.md names refusals (json,\n"
	"too_big, shape, content_sha256, event_id, key, rotated_key, signature,\n"
	"bundle_type ... bundle_state); a line is a bundle when docs/merge.md's\n"
	"D-KIND says so, else an event.\n"
	"A progress bar is drawn on stderr when it is a terminal.\n\n"
	"--progress-file FILE  once a commit is durable, append 'stored N through\n"
	"                      FILE:LINE': every line up to there is stored,\n"
	"                      duplicate or rejected.\n"
	"--wal, --no-wal       commit through the store's write-ahead log, each\n"
	"                      commit synced; or without it, durable at RocksDB's\n"
	"                      flushes (atomic across the store) and at the end.\n"
	"                      Default: without it for regular files of 64 MiB or\n"
	"                      more in all, which takes a fifth off the import's\n"
	"                      time; a crash then loses what was committed since\n"
	"                      the last flush (a few seconds' work, never reported\n"
	"                      as stored), and the store stays consistent.\n\n"
	"With --node, a running pithd (whose store is locked to it) verifies and\n"
	"stores each item through its control socket ('event'/'bundle' commands,\n"
	"pipelined), with its own trust keys; the summary counts a bundle as a\n"
	"bundle (newer, or not newer: same or older), not by its events.\n\n"
	"Exit status: 0 if every item was stored or a duplicate, 1 if any was\n"
	"rejected or the store failed.\n",
	run,
};
