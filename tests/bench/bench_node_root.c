/* Benchmark (issue 57): the state root as pithd keeps it (node_root.h)
 * over a real store, against the ingest it rides on.
 *
 * N records of 2 events each are committed through the store's batches
 * (events verified as the writer's validators verify them, committed in
 * batches of 512): the ingest's CPU a change, measured on this thread.
 * Then the tree is built from the records (time, memory a record), and C
 * more events (a mark of existing records, one in ten a new record) are
 * committed the same way while the node keeps the root: the change log
 * told to the tree after each batch (the tick's catch-up), and the root
 * hashed every F changes (a reader's flush or a signing; F = 0: only at
 * the end). Reported: the root's CPU a change and its share of the
 * ingest's, and at the end the root compared with a rebuild.
 *
 * usage: bench_node_root [--n N] [--changes C] [--flush-every F] [--bucket K] [--dir DIR]
 * (--bucket: the tree's bucket size, node_root.h's noderoot_opts_t.bucket)
 * The last line is machine-readable (RESULT key=value ...). */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "node_root.h"
#include "store_test_util.h"
#include "testgen.h"

static double thread_cpu(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct evs {
	pith_buf_t *b;
	size_t n;
} evs_t;

static tg_key_t reg, op;
static pith_trust_t *trust;

/* Verifies and commits events [lo, hi) in batches of 512: CPU seconds of
 * this thread into *cpu. */
static int commit(store_t *st, const evs_t *e, size_t lo, size_t hi, double *cpu)
{
	double c0 = thread_cpu();
	pith_err_t err = {0};
	for (size_t i = lo; i < hi;) {
		store_batch_t *b = store_batch_new(st);
		size_t end = i + 512 < hi ? i + 512 : hi;
		for (; i < end; i++) {
			pith_event_t *ev = NULL;
			if (pith_event_parse(e->b[i].data, e->b[i].len, trust, &ev, NULL, &err) ||
			    store_batch_add_event(b, ev, NULL, &err) < 0) {
				fprintf(stderr, "event %zu: %s\n", i, err.msg);
				store_batch_free(b);
				return 1;
			}
		}
		if (store_batch_commit(b, NULL, &err)) {
			fprintf(stderr, "commit: %s\n", err.msg);
			store_batch_free(b);
			return 1;
		}
		store_batch_free(b);
	}
	*cpu += thread_cpu() - c0;
	return 0;
}

static void add(evs_t *e, size_t cap, const pith_buf_t *b)
{
	if (e->n < cap)
		e->b[e->n++] = *b;
}

int main(int argc, char **argv)
{
	size_t n = 100000, changes = 50000, flush_every = 20000;
	unsigned bucket = 0; /* the tree's default */
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--changes") && i + 1 < argc)
			changes = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--flush-every") && i + 1 < argc)
			flush_every = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--bucket") && i + 1 < argc)
			bucket = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else {
			fprintf(stderr, "usage: bench_node_root [--n N] [--changes C] [--flush-every F] [--bucket K] [--dir DIR]\n");
			return 2;
		}
	}
	if (sodium_init() < 0 || !(trust = tg_trust_pair(&reg, &op)))
		return 1;
	char *tmp = dir ? NULL : stu_tmpdir("bench_node_root");
	store_t *st = stu_open_store(dir ? dir : tmp, trust);
	if (!st)
		return 1;
	/* the events, signed before anything is timed */
	size_t nnew = changes / 10, cap = 2 * n + changes + nnew;
	evs_t e = {calloc(cap, sizeof(pith_buf_t)), 0};
	char (*pith)[PITH_NUMBER_LEN + 1] = calloc(n + nnew, sizeof(*pith));
	double g0 = mono();
	for (size_t r = 0; r < n + nnew; r++) {
		pith_buf_t rec = PITH_BUF_INIT, ev = PITH_BUF_INIT;
		char id[PITH_EVENT_ID_LEN + 1];
		tg_record((unsigned)r, &rec, pith[r]);
		pith_buf_release(&rec);
		if (r >= n)
			continue; /* the new records' events come with the changes */
		tg_event(&ev, &reg, "record_created", pith[r], "record", "2026-01-01T00:00:00Z", NULL,
			 NULL, NULL, 0, (int)r, id);
		add(&e, cap, &ev);
		memset(&ev, 0, sizeof(ev));
		tg_event(&ev, &op, "author_attestation", pith[r], "t", "2026-01-02T00:00:00Z",
			 "{\"n\":1}", NULL, NULL, 0, -1, id);
		add(&e, cap, &ev);
	}
	size_t loaded = e.n;
	uint64_t rs = 57;
	for (size_t c = 0, k = 0; c < changes; c++) {
		pith_buf_t ev = PITH_BUF_INIT;
		char id[PITH_EVENT_ID_LEN + 1], at[40], pay[40];
		if (c % 10 == 9 && k < nnew) { /* a new record */
			tg_event(&ev, &reg, "record_created", pith[n + k], "record", "2026-01-01T00:00:00Z",
				 NULL, NULL, NULL, 0, (int)(n + k), id);
			k++;
		} else {
			size_t r = tg_rand(&rs) % n;
			snprintf(at, sizeof(at), "2026-02-%02uT00:00:%02uZ", (unsigned)(1 + c % 28),
				 (unsigned)(c % 60));
			snprintf(pay, sizeof(pay), "{\"n\":%zu}", c);
			tg_event(&ev, &op, "storage_attestation", pith[r], "t", at, pay, NULL, NULL, 0, -1, id);
		}
		add(&e, cap, &ev);
	}
	fprintf(stderr, "generated %zu events in %.1f s\n", e.n, mono() - g0);
	/* the load: N records, 2N events */
	double load_cpu = 0, w0 = mono();
	if (commit(st, &e, 0, loaded, &load_cpu))
		return 1;
	double load_wall = mono() - w0;
	/* the tree from the records */
	uint8_t pk[32], sk[64];
	crypto_sign_keypair(pk, sk);
	pith_err_t err = {0};
	double b0 = mono(), bc0 = thread_cpu();
	long rss0 = 0;
	noderoot_opts_t ro = {.bucket = bucket};
	noderoot_t *root = noderoot_new(st, pk, sk, &ro, &err);
	double build_wall = mono() - b0, build_cpu = thread_cpu() - bc0;
	(void)rss0;
	if (!root) {
		fprintf(stderr, "noderoot_new: %s\n", err.msg);
		return 1;
	}
	uint8_t h[32];
	if (noderoot_current(root, h, NULL, NULL, &err))
		return 1;
	noderoot_stats_t s0;
	noderoot_stats_get(root, &s0);
	/* the changes, the root kept */
	double ingest_cpu = 0, root_cpu = 0, flush_cpu = 0, tell_cpu = 0;
	size_t since = 0, flushes = 0;
	for (size_t i = loaded; i < e.n;) {
		size_t end = i + 512 < e.n ? i + 512 : e.n;
		if (commit(st, &e, i, end, &ingest_cpu))
			return 1;
		since += end - i;
		i = end;
		double c0 = thread_cpu();
		if (noderoot_catch_up(root, 0, &err) < 0) {
			fprintf(stderr, "catch up: %s\n", err.msg);
			return 1;
		}
		double c1 = thread_cpu();
		tell_cpu += c1 - c0;
		if ((flush_every && since >= flush_every) || i == e.n) {
			if (noderoot_current(root, h, NULL, NULL, &err)) {
				fprintf(stderr, "root: %s\n", err.msg);
				return 1;
			}
			flush_cpu += thread_cpu() - c1;
			since = 0;
			flushes++;
		}
		root_cpu += thread_cpu() - c0;
	}
	/* against a rebuild */
	noderoot_t *again = noderoot_new(st, pk, sk, &ro, &err);
	uint8_t h2[32];
	int same = again && !noderoot_current(again, h2, NULL, NULL, &err) && !memcmp(h, h2, 32);
	noderoot_stats_t s1;
	noderoot_stats_get(root, &s1);
	size_t nch = e.n - loaded;
	double per_change_root = root_cpu / (double)nch * 1e6, per_event_ingest = ingest_cpu / (double)nch * 1e6;
	printf("store: %zu records (%zu events) loaded in %.1f s wall, %.1f us CPU an event (this thread)\n",
	       n, loaded, load_wall, load_cpu / (double)loaded * 1e6);
	printf("build from the records: %.2f s wall, %.2f us CPU a record; tree %.1f bytes a record\n",
	       build_wall, build_cpu / (double)n * 1e6, (double)s0.tree_bytes / (double)n);
	printf("changes: %zu events (%zu new records), root hashed %zu times (every %zu changes)\n", nch,
	       nnew, flushes, flush_every);
	printf("  ingest: %.2f us CPU an event (verify + commit)\n", per_event_ingest);
	printf("  root:   %.2f us CPU a change (told %.2f + hashed %.2f): %.2f%% of the ingest's\n",
	       per_change_root, tell_cpu / (double)nch * 1e6, flush_cpu / (double)nch * 1e6,
	       100.0 * root_cpu / ingest_cpu);
	printf("  tree after the changes: %.1f bytes a record (%llu records)\n",
	       (double)s1.tree_bytes / (double)s1.records, (unsigned long long)s1.records);
	printf("  root after the changes = root rebuilt from the records: %s\n", same ? "yes" : "NO");
	printf("RESULT n=%zu changes=%zu flush_every=%zu ingest_us=%.2f root_us=%.3f tell_us=%.3f "
	       "flush_us=%.3f share_pct=%.2f build_us_per_record=%.2f tree_bytes_per_record=%.1f "
	       "tree_bytes_per_record_end=%.1f same=%d\n",
	       n, nch, flush_every, per_event_ingest, per_change_root, tell_cpu / (double)nch * 1e6,
	       flush_cpu / (double)nch * 1e6, 100.0 * root_cpu / ingest_cpu, build_cpu / (double)n * 1e6,
	       (double)s0.tree_bytes / (double)n, (double)s1.tree_bytes / (double)s1.records, same);
	noderoot_free(again);
	noderoot_free(root);
	for (size_t i = 0; i < e.n; i++)
		pith_buf_release(&e.b[i]);
	free(e.b);
	free(pith);
	store_close(st);
	if (tmp)
		stu_rmdir_rf(tmp);
	pith_trust_free(trust);
	return same ? 0 : 1;
}
