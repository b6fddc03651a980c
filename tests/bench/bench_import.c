/* Benchmark (issue 3): `pithctl import` of generated events against the
 * bare Ed25519 verification rate of all cores, measured in the same run,
 * and the bytes the store takes on disk per event.
 *
 * usage: bench_import [--events N] [--per-record E] [--threads T] [--dir DIR]
 *                     [--pithctl PATH] [--gen PATH] [--keep] [--no-compact]
 *
 * 1. gen_events writes N signed events (E per record, default 10) to DIR.
 * 2. The bare rate: T threads (default: all cores) run nothing but
 *    crypto_sign_verify_detached over the events' digests and signatures;
 *    measured before and after the import, the mean is reported.
 * 3. `pithctl import` of the file into an empty store, timed from exec to
 *    exit (opening, verifying, merging, writing, syncing, closing).
 * 4. The floor of an event (bench_util.h, bench_floor_measure): its
 *    signatures at the fixed-key verifier's CPU, its bytes parsed and
 *    hashed once, written once to a bare RocksDB; the import's CPU per
 *    event over it (issue 56).
 * 5. Bytes on disk (allocated blocks of every file in the store directory)
 *    as the import left them, and after a full compaction; against the raw
 *    bytes of the events (the JSON Lines without newlines); --no-compact
 *    skips the compaction (minutes at 10 million events, bench_scale.sh). */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "store.h"

#ifndef BENCH_PITHCTL
#define BENCH_PITHCTL "pithctl"
#endif
#ifndef BENCH_GEN
#define BENCH_GEN "gen_events"
#endif

int main(int argc, char **argv)
{
	bench_opts_t o;
	bench_opts_init(&o, 200000, BENCH_PITHCTL, BENCH_GEN);
	int compact = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-compact")) {
			compact = 0;
		} else if (!bench_opt_take(&o, argc, argv, &i)) {
			fprintf(stderr, "usage: bench_import [--events N] [--per-record E] [--threads T] "
					"[--dir DIR] [--pithctl PATH] [--gen PATH] [--keep] [--no-compact]\n");
			return 2;
		}
	}
	if (sodium_init() < 0 || !bench_opts_ok(&o))
		return 2;
	unsigned long nevents = o.events, per = o.per;
	int threads = o.threads, keep = o.keep;
	const char *dir = o.dir, *pithctl = o.pithctl, *gen = o.gen;
	char tmpl[] = "/tmp/bench_import.XXXXXX";
	if (!dir && !(dir = mkdtemp(tmpl))) {
		perror("bench_import: mkdtemp");
		return 1;
	}
	mkdir(dir, 0755);
	char events[4096], key[4096], store[4096], out[4096];
	snprintf(events, sizeof(events), "%s/events.jsonl", dir);
	snprintf(key, sizeof(key), "%s/key.json", dir);
	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(out, sizeof(out), "%s/import.json", dir);

	/* 1. the events */
	bench_sigs_t sigs;
	if (bench_events_prepare(gen, events, key, nevents, per, &sigs))
		return 1;
	size_t n = sigs.n;
	uint64_t raw = sigs.raw;

	/* 2-3. bare rate, import, bare rate */
	char *rmargv[] = {"/bin/rm", "-rf", store, NULL};
	bench_run(rmargv, NULL, NULL, NULL);
	double cpu1, cpu2;
	double bare1 = bench_bare_rate(&sigs, threads, &cpu1);
	char *iargv[] = {(char *)pithctl, "--store", store, "--trust-key", key, "import", "--json",
			 "--no-progress", events, NULL};
	double secs = 0, import_cpu = 0;
	static bench_threads_t ith;
	int rc = bench_run_threads(iargv, out, &secs, &import_cpu, &ith);
	long import_rss_kb = bench_last_maxrss_kb;
	double bare2 = bench_bare_rate(&sigs, threads, &cpu2);
	double fcpu, fixed = bench_fixed_rate(&sigs, threads, &fcpu);
	char fdb[4200];
	snprintf(fdb, sizeof(fdb), "%s/floor-db", dir);
	bench_floor_t floor;
	if (bench_floor_measure(events, &sigs, fcpu, fdb, &floor))
		return 1;
	if (rc) {
		fprintf(stderr, "bench_import: pithctl import exited with %d (see %s)\n", rc, out);
		return 1;
	}
	double bare = (bare1 + bare2) / 2, rate = (double)n / secs;

	/* 4. disk */
	uint64_t app1, app2;
	uint64_t disk1 = bench_dir_bytes(store, &app1, NULL);
	store_t *st = NULL;
	pith_err_t err = {0};
	double tc = bench_now();
	if (store_open(store, NULL, &st, &err) || (compact && store_compact(st, &err))) {
		fprintf(stderr, "bench_import: compacting: %s\n", err.msg);
		return 1;
	}
	store_counts_t cnt;
	store_counts_get(st, &cnt);
	store_close(st);
	tc = bench_now() - tc;
	uint64_t disk2 = bench_dir_bytes(store, &app2, NULL);

	printf("events                      %zu (%lu per record), %llu stored\n", n, per,
	       (unsigned long long)cnt.events);
	printf("raw event bytes             %llu (%.0f per event)\n", (unsigned long long)raw,
	       (double)raw / (double)n);
	printf("bare verify, %d threads      %.0f/s (before %.0f, after %.0f)\n", threads, bare, bare1,
	       bare2);
	printf("pithctl import              %.0f events/s (%.2f s)\n", rate, secs);
	printf("import / bare verify        %.3f (target >= 0.8)\n", rate / bare);
	printf("peak RSS of pithctl import  %.0f MiB\n", (double)import_rss_kb / 1024.0);
	/* CPU time is what a busy machine does not distort much: the ratio
	 * the import reaches when it alone saturates every core */
	double vcpu = (cpu1 + cpu2) / 2, icpu = import_cpu / (double)n;
	printf("CPU per event               import %.1f us, bare verify %.1f us per signature\n",
	       icpu * 1e6, vcpu * 1e6);
	printf("CPU-bound ratio             %.3f (bare verify CPU / import CPU per event)\n",
	       vcpu / icpu);
	/* Each record_created carries a receipt: a record of per events needs
	 * per + 1 verifications, which caps the ratio at per / (per + 1) for
	 * any import verifying with the bare verifier (docs/performance.md, "Import"). */
	double spe = per ? 1.0 + 1.0 / (double)per : 1.0;
	printf("per signature verified      %.3f CPU-bound (%.2f signatures per event; the ratio's "
	       "ceiling for an import verifying with libsodium is %.3f)\n",
	       vcpu * spe / icpu, spe, 1.0 / spe);
	/* the same import against the verifier it really uses */
	printf("fixed-key verify, %d threads %.0f/s (%.2f x libsodium; %.1f us CPU per signature)\n",
	       threads, fixed, fixed / bare, fcpu * 1e6);
	printf("import / fixed-key verify   %.3f, CPU-bound %.3f\n", rate / fixed, fcpu / icpu);
	bench_floor_print(&floor, "import / floor", icpu * 1e6);
	pith_buf_t tt = PITH_BUF_INIT;
	bench_threads_print(NULL, &ith, n, &tt);
	printf("pithctl import's threads (noted every 100 ms until it exited):\n%.*s", (int)tt.len,
	       (const char *)tt.data);
	pith_buf_release(&tt);
	printf("disk after import           %.0f bytes/event, %.3f x raw (apparent %.3f x)\n",
	       (double)disk1 / (double)n, (double)disk1 / (double)raw, (double)app1 / (double)raw);
	if (compact)
		printf("disk after full compaction  %.0f bytes/event, %.3f x raw (apparent %.3f x; %.1f "
		       "s)\n",
		       (double)disk2 / (double)n, (double)disk2 / (double)raw,
		       (double)app2 / (double)raw, tc);
	printf("(target <= 1.3 x raw)\n");
	if (!keep) {
		char *rargv[] = {"/bin/rm", "-rf", (char *)dir, NULL};
		bench_run(rargv, NULL, NULL, NULL);
	}
	bench_sigs_release(&sigs);
	return 0;
}
