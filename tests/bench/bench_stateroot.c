/* Benchmark (issue 57): the state root's tree (proto/stateroot.h) over N
 * random records: time to build from scratch, memory per record, cost per
 * change (updates of existing leaves, inserts, deletes), and with --diff
 * D the descent between it and a copy with D records changed, through
 * the JSON range answers /api/root/range would send.
 *
 * The leaves live in a sorted array standing in for the store (its list
 * callback is a binary search, cheaper than RocksDB's seek: the figures
 * are the tree's own cost plus a cheap listing).
 *
 * usage: bench_stateroot [--n N] [--changes C] [--diff D] [--bucket K]
 *                        [--seed S] [--check]
 * --check also rebuilds from scratch after the changes and compares roots.
 * Build and change times are this process's CPU time (the host is
 * shared); the leaves' making and the descent are wall time.
 * The last line is machine-readable (RESULT key=value ...). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "sr_leafset.h"
#include "stateroot.h"

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * 4;
}

typedef struct sides {
	pith_sr_t *t[2];
	pith_buf_t json;
	uint64_t bytes;
} sides_t;

/* Each answer is written as JSON and parsed back, as over HTTP. */
static int fetch(void *ctx, int side, const uint8_t prefix[PITH_SR_KEY_BYTES], unsigned plen,
		 pith_sr_range_t *out)
{
	sides_t *s = ctx;
	int rc = pith_sr_range(s->t[side], prefix, plen, out);
	if (rc)
		return rc;
	pith_buf_reset(&s->json);
	if ((rc = pith_sr_range_json(out, &s->json)))
		return rc;
	s->bytes += s->json.len;
	return pith_sr_range_parse(s->json.data, s->json.len, out, NULL);
}

static int count_diff(void *ctx, const char *pith, const uint8_t *s0, const uint8_t *s1)
{
	(void)ctx, (void)pith, (void)s0, (void)s1;
	return 0;
}

static pith_sr_t *build(sr_leafset_t *ls, unsigned bucket, double *secs)
{
	pith_sr_leaf_t *l = malloc((ls->present + 1) * sizeof(*l));
	pith_sr_t *t = pith_sr_new(bucket, sr_leafset_list, ls);
	if (!l || !t) {
		fprintf(stderr, "bench_stateroot: out of memory for %zu leaves\n", ls->present);
		exit(1);
	}
	size_t n = sr_leafset_collect(ls, l);
	double t0 = bench_cpu_now();
	pith_err_t err = {0};
	if (pith_sr_build(t, l, n, &err)) {
		fprintf(stderr, "bench_stateroot: build: %s\n", err.msg);
		exit(1);
	}
	*secs = bench_cpu_now() - t0;
	free(l);
	return t;
}

static void flush(pith_sr_t *t)
{
	int rc = pith_sr_flush(t);
	if (rc) {
		fprintf(stderr, "bench_stateroot: flush: %s\n", pith_err_name(rc));
		exit(1);
	}
}

/* Times c changes of one kind, each followed by a flush (each) or with
 * one flush at the end; returns microseconds per change. */
static double run_changes(pith_sr_t *t, sr_leafset_t *ls, size_t c, int kind, int each, uint64_t *rs)
{
	double t0 = bench_cpu_now();
	for (size_t done = 0; done < c;) {
		size_t i = sr_rand(rs) % ls->n;
		sr_entry_t *e = &ls->e[i];
		int rc;
		if (kind == 0 && e->present) {
			e->leaf.state[sr_rand(rs) % 32] ^= 1;
			rc = pith_sr_update(t, e->leaf.pith);
		} else if (kind == 1 && !e->present) {
			sr_leafset_set(ls, i, 1);
			rc = pith_sr_insert(t, e->leaf.pith);
		} else if (kind == 2 && e->present) {
			sr_leafset_set(ls, i, 0);
			rc = pith_sr_delete(t, e->leaf.pith);
		} else {
			continue;
		}
		if (rc) {
			fprintf(stderr, "bench_stateroot: change %zu (kind %d): %s\n", done, kind, pith_err_name(rc));
			exit(1);
		}
		if (each)
			flush(t);
		done++;
	}
	flush(t);
	return (bench_cpu_now() - t0) * 1e6 / (double)c;
}

int main(int argc, char **argv)
{
	size_t n = 1000000, changes = 200000, diff = 0;
	unsigned bucket = 0;
	uint64_t seed = 57;
	int check = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--changes") && i + 1 < argc)
			changes = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--diff") && i + 1 < argc)
			diff = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--bucket") && i + 1 < argc)
			bucket = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--check"))
			check = 1;
		else {
			fprintf(stderr, "usage: bench_stateroot [--n N] [--changes C] [--diff D] [--bucket K] "
					"[--seed S] [--check]\n");
			return 2;
		}
	}
	if (!n || changes > n) {
		fprintf(stderr, "bench_stateroot: --n must be at least 1 and --changes at most --n\n");
		return 2;
	}
	/* N present leaves among N + C keys: the C absent ones are the
	 * inserts' room */
	sr_leafset_t ls;
	double t0 = bench_now();
	if (sr_leafset_init(&ls, n + changes, seed)) {
		fprintf(stderr, "bench_stateroot: out of memory for %zu keys\n", n + changes);
		return 1;
	}
	for (size_t i = 0; i < ls.n; i++)
		ls.e[i].present = 1;
	ls.present = ls.n;
	uint64_t rs = seed * 7919;
	while (ls.present > n) {
		size_t i = sr_rand(&rs) % ls.n;
		if (ls.e[i].present)
			sr_leafset_set(&ls, i, 0);
	}
	printf("leaves                      %zu (made and sorted in %.1f s)\n", ls.present, bench_now() - t0);
	long rss0 = rss_kb();
	double build_s;
	pith_sr_t *t = build(&ls, bucket, &build_s);
	long rss1 = rss_kb();
	size_t mem = pith_sr_mem_bytes(t);
	printf("build from scratch          %.2f s (%.2f us per leaf)\n", build_s, build_s * 1e6 / (double)n);
	printf("tree memory                 %.1f MiB counted, %.1f bytes per record (RSS grew %.1f MiB: %.1f bytes per record)\n",
	       (double)mem / 1048576.0, (double)mem / (double)n, (double)(rss1 - rss0) / 1024.0,
	       (double)(rss1 - rss0) * 1024.0 / (double)n);
	/* each flushed: the root current after every change; batched: C
	 * changes then one root, as a node signing once per interval does */
	double up = run_changes(t, &ls, changes, 0, 1, &rs);
	double ins = run_changes(t, &ls, changes, 1, 1, &rs);
	double del = run_changes(t, &ls, changes, 2, 1, &rs);
	printf("per change, root each time  update %.2f us, insert %.2f us, delete %.2f us (%zu each)\n", up, ins,
	       del, changes);
	double bup = run_changes(t, &ls, changes, 0, 0, &rs);
	double bins = run_changes(t, &ls, changes, 1, 0, &rs);
	double bdel = run_changes(t, &ls, changes, 2, 0, &rs);
	printf("per change, one root at end update %.2f us, insert %.2f us, delete %.2f us (%zu each, then one flush)\n",
	       bup, bins, bdel, changes);
	size_t small = changes / 100 ? changes / 100 : 1;
	double sup = run_changes(t, &ls, small, 0, 0, &rs);
	printf("per change, %zu then a root  update %.2f us\n", small, sup);
	size_t mem_after = pith_sr_mem_bytes(t);
	printf("tree memory after changes   %.1f MiB counted, %.1f bytes per record\n",
	       (double)mem_after / 1048576.0, (double)mem_after / (double)ls.present);
	int ok = 1;
	if (check) {
		double s;
		uint8_t a[32], b[32];
		pith_sr_t *again = build(&ls, bucket, &s);
		ok = !pith_sr_root(t, a) && !pith_sr_root(again, b) && !memcmp(a, b, 32);
		printf("root after the changes      %s the one rebuilt from scratch\n", ok ? "equals" : "DIFFERS FROM");
		pith_sr_free(again);
	}
	double diff_s = 0;
	uint64_t requests = 0, found = 0, bytes = 0;
	if (diff) {
		/* a second leaf set: the same keys, D of them changed (a third
		 * each updated, missing, extra) */
		sr_leafset_t other = ls;
		other.e = malloc(ls.n * sizeof(*ls.e));
		if (!other.e) {
			fprintf(stderr, "bench_stateroot: out of memory for the second side\n");
			return 1;
		}
		memcpy(other.e, ls.e, ls.n * sizeof(*ls.e));
		for (size_t d = 0; d < diff;) {
			size_t i = sr_rand(&rs) % other.n;
			sr_entry_t *e = &other.e[i];
			if (memcmp(e, &ls.e[i], sizeof(*e)))
				continue; /* already changed */
			if (!e->present)
				sr_leafset_set(&other, i, 1);
			else if (d % 3 == 0)
				sr_leafset_set(&other, i, 0);
			else
				e->leaf.state[0] ^= 0xff;
			d++;
		}
		double s;
		sides_t sd = {{t, build(&other, bucket, &s)}, PITH_BUF_INIT, 0};
		pith_sr_diff_stats_t st;
		pith_err_t err = {0};
		double d0 = bench_now();
		if (pith_sr_diff(fetch, count_diff, &sd, 0, &st, &err)) {
			fprintf(stderr, "bench_stateroot: descent: %s\n", err.msg);
			return 1;
		}
		diff_s = bench_now() - d0;
		requests = st.requests;
		found = st.differences;
		bytes = sd.bytes;
		ok &= found == diff;
		printf("descent                     %llu differences found of %zu, %llu requests (%.1f per difference), "
		       "%.1f KiB of answers, %.3f s (in process, no network)\n",
		       (unsigned long long)found, diff, (unsigned long long)requests,
		       (double)requests / (double)diff, (double)bytes / 1024.0, diff_s);
		pith_sr_free(sd.t[1]);
		pith_buf_release(&sd.json);
		free(other.e);
	}
	printf("RESULT n=%zu bucket=%u build_s=%.3f mem_bytes_per_record=%.2f rss_bytes_per_record=%.2f "
	       "update_us=%.3f insert_us=%.3f delete_us=%.3f batch_update_us=%.3f batch_insert_us=%.3f "
	       "batch_delete_us=%.3f small_batch_update_us=%.3f mem_after_bytes_per_record=%.2f diff=%zu diff_requests=%llu diff_found=%llu "
	       "diff_s=%.3f diff_bytes=%llu ok=%d\n",
	       n, bucket ? bucket : PITH_SR_BUCKET_DEFAULT, build_s, (double)mem / (double)n,
	       (double)(rss1 - rss0) * 1024.0 / (double)n, up, ins, del, bup, bins, bdel, sup,
	       (double)mem_after / (double)ls.present, diff, (unsigned long long)requests,
	       (unsigned long long)found, diff_s, (unsigned long long)bytes, ok);
	pith_sr_free(t);
	sr_leafset_free(&ls);
	return ok ? 0 : 1;
}
