/* Benchmark (issue 3): `pithctl import` of generated events against the
 * bare Ed25519 verification rate of all cores, measured in the same run,
 * and the bytes the store takes on disk per event.
 *
 * usage: bench_import [--events N] [--per-record E] [--threads T] [--dir DIR]
 *                     [--pithctl PATH] [--gen PATH] [--keep]
 *
 * 1. gen_events writes N signed events (E per record, default 10) to DIR.
 * 2. The bare rate: T threads (default: all cores) run nothing but
 *    crypto_sign_verify_detached over the events' digests and signatures;
 *    measured before and after the import, the mean is reported.
 * 3. `pithctl import` of the file into an empty store, timed from exec to
 *    exit (opening, verifying, merging, writing, syncing, closing).
 * 4. Bytes on disk (allocated blocks of every file in the store directory)
 *    as the import left them, and after a full compaction; against the raw
 *    bytes of the events (the JSON Lines without newlines). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "ids.h"
#include "store.h"

#ifndef BENCH_PITHCTL
#define BENCH_PITHCTL "pithctl"
#endif
#ifndef BENCH_GEN
#define BENCH_GEN "gen_events"
#endif

typedef struct sigjob {
	const uint8_t (*digest)[32];
	const uint8_t (*sig)[64];
	const uint8_t *pk;
	size_t from, to;
	int bad;
} sigjob_t;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double child_cpu; /* user+sys seconds of the last run() */

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *verify_slice(void *arg)
{
	sigjob_t *j = arg;
	for (size_t i = j->from; i < j->to; i++)
		if (crypto_sign_verify_detached(j->sig[i], j->digest[i], 32, j->pk))
			j->bad = 1;
	return NULL;
}

/* Signatures per second with nt threads over all n; *cpu_per gets the
 * CPU seconds per signature. */
static double bare_rate(const uint8_t (*digest)[32], const uint8_t (*sig)[64], const uint8_t *pk,
			size_t n, int nt, double *cpu_per)
{
	pthread_t th[64];
	sigjob_t jobs[64];
	double t0 = now(), c0 = cpu_now();
	for (int t = 0; t < nt; t++) {
		jobs[t] = (sigjob_t){digest, sig, pk, n * (size_t)t / (size_t)nt,
				     n * (size_t)(t + 1) / (size_t)nt, 0};
		pthread_create(&th[t], NULL, verify_slice, &jobs[t]);
	}
	for (int t = 0; t < nt; t++) {
		pthread_join(th[t], NULL);
		if (jobs[t].bad) {
			fprintf(stderr, "bench_import: a generated signature does not verify\n");
			exit(1);
		}
	}
	*cpu_per = (cpu_now() - c0) / (double)n;
	return (double)n / (now() - t0);
}

static int run(char *const argv[], const char *out_path, double *secs)
{
	double t0 = now();
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (out_path && !freopen(out_path, "w", stdout))
			_exit(126);
		execv(argv[0], argv);
		fprintf(stderr, "bench_import: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	int status;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) < 0)
		return -1;
	child_cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
		    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	if (secs)
		*secs = now() - t0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static uint64_t dir_bytes(const char *dir, uint64_t *apparent)
{
	DIR *d = opendir(dir);
	uint64_t total = 0;
	*apparent = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char p[4096];
		struct stat sb;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (e->d_name[0] == '.' || stat(p, &sb) || !S_ISREG(sb.st_mode))
			continue;
		total += (uint64_t)sb.st_blocks * 512;
		*apparent += (uint64_t)sb.st_size;
	}
	closedir(d);
	return total;
}

int main(int argc, char **argv)
{
	unsigned long nevents = 200000, per = 10;
	int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), keep = 0;
	const char *dir = NULL, *pithctl = BENCH_PITHCTL, *gen = BENCH_GEN;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--events") && i + 1 < argc)
			nevents = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--per-record") && i + 1 < argc)
			per = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--pithctl") && i + 1 < argc)
			pithctl = argv[++i];
		else if (!strcmp(argv[i], "--gen") && i + 1 < argc)
			gen = argv[++i];
		else if (!strcmp(argv[i], "--keep"))
			keep = 1;
		else {
			fprintf(stderr, "usage: bench_import [--events N] [--per-record E] [--threads T] "
					"[--dir DIR] [--pithctl PATH] [--gen PATH] [--keep]\n");
			return 2;
		}
	}
	if (sodium_init() < 0 || nevents == 0 || per == 0 || threads < 1 || threads > 64)
		return 2;
	char tmpl[] = "/tmp/bench_import.XXXXXX";
	if (!dir && !(dir = mkdtemp(tmpl))) {
		perror("bench_import: mkdtemp");
		return 1;
	}
	mkdir(dir, 0755);
	char events[4096], key[4096], store[4096], out[4096], recs[32], perr[32];
	snprintf(events, sizeof(events), "%s/events.jsonl", dir);
	snprintf(key, sizeof(key), "%s/key.json", dir);
	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(out, sizeof(out), "%s/import.json", dir);
	snprintf(recs, sizeof(recs), "%lu", (nevents + per - 1) / per);
	snprintf(perr, sizeof(perr), "%lu", per);

	/* 1. the events */
	struct stat sb;
	if (stat(events, &sb) || stat(key, &sb)) {
		char *gargv[] = {(char *)gen, "--records", recs, "--per-record", perr, "--key-out", key,
				 events, NULL};
		if (run(gargv, NULL, NULL)) {
			fprintf(stderr, "bench_import: %s failed\n", gen);
			return 1;
		}
	}
	FILE *f = fopen(events, "rb");
	if (!f) {
		perror(events);
		return 1;
	}
	size_t cap = 1024, n = 0;
	uint8_t (*digest)[32] = malloc(cap * 32), (*sig)[64] = malloc(cap * 64);
	uint8_t pk[32];
	uint64_t raw = 0;
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	pith_buf_t kb = PITH_BUF_INIT;
	{
		FILE *kf = fopen(key, "rb");
		char kbuf[1024];
		size_t kl = kf ? fread(kbuf, 1, sizeof(kbuf), kf) : 0;
		json_doc_t *kd = NULL;
		const char *hex;
		if (kf)
			fclose(kf);
		if (json_parse(&kd, (uint8_t *)kbuf, kl, NULL, NULL) ||
		    !(hex = json_get_str(json_doc_root(kd), "public_key_hex")) ||
		    pith_hex_decode(hex, 64, pk, 32)) {
			fprintf(stderr, "bench_import: bad key file %s\n", key);
			return 1;
		}
		json_doc_free(kd);
	}
	while ((len = getline(&line, &lcap, f)) > 0) {
		if (line[len - 1] == '\n')
			len--;
		raw += (uint64_t)len;
		json_doc_t *d = NULL;
		if (json_parse(&d, (uint8_t *)line, (size_t)len, NULL, NULL))
			return 1;
		const json_value_t *r = json_doc_root(d);
		const char *h = json_get_str(r, "content_sha256");
		const char *s = json_get_str(json_get(r, "signature"), "signature_b64");
		size_t sl = 0;
		if (n == cap) {
			cap *= 2;
			digest = realloc(digest, cap * 32);
			sig = realloc(sig, cap * 64);
		}
		if (!h || !s || pith_hex_decode(h, 64, digest[n], 32) ||
		    sodium_base642bin(sig[n], 64, s, strlen(s), NULL, &sl, NULL,
				      sodium_base64_VARIANT_ORIGINAL) || sl != 64)
			return 1;
		n++;
		json_doc_free(d);
	}
	free(line);
	fclose(f);
	pith_buf_release(&kb);

	/* 2-3. bare rate, import, bare rate */
	char *rmargv[] = {"/bin/rm", "-rf", store, NULL};
	run(rmargv, NULL, NULL);
	double cpu1, cpu2;
	double bare1 = bare_rate((const uint8_t (*)[32])digest, (const uint8_t (*)[64])sig, pk, n, threads,
				 &cpu1);
	char *iargv[] = {(char *)pithctl, "--store", store, "--trust-key", key, "import", "--json",
			 "--no-progress", events, NULL};
	double secs = 0;
	int rc = run(iargv, out, &secs);
	double import_cpu = child_cpu;
	double bare2 = bare_rate((const uint8_t (*)[32])digest, (const uint8_t (*)[64])sig, pk, n, threads,
				 &cpu2);
	if (rc) {
		fprintf(stderr, "bench_import: pithctl import exited with %d (see %s)\n", rc, out);
		return 1;
	}
	double bare = (bare1 + bare2) / 2, rate = (double)n / secs;

	/* 4. disk */
	uint64_t app1, app2;
	uint64_t disk1 = dir_bytes(store, &app1);
	store_t *st = NULL;
	pith_err_t err = {0};
	double tc = now();
	if (store_open(store, NULL, &st, &err) || store_compact(st, &err)) {
		fprintf(stderr, "bench_import: compacting: %s\n", err.msg);
		return 1;
	}
	store_counts_t cnt;
	store_counts_get(st, &cnt);
	store_close(st);
	tc = now() - tc;
	uint64_t disk2 = dir_bytes(store, &app2);

	printf("events                      %zu (%lu per record), %llu stored\n", n, per,
	       (unsigned long long)cnt.events);
	printf("raw event bytes             %llu (%.0f per event)\n", (unsigned long long)raw,
	       (double)raw / (double)n);
	printf("bare verify, %d threads      %.0f/s (before %.0f, after %.0f)\n", threads, bare, bare1,
	       bare2);
	printf("pithctl import              %.0f events/s (%.2f s)\n", rate, secs);
	printf("import / bare verify        %.3f (target >= 0.8)\n", rate / bare);
	/* CPU time is what a busy machine does not distort much: the ratio
	 * the import reaches when it alone saturates every core */
	double vcpu = (cpu1 + cpu2) / 2, icpu = import_cpu / (double)n;
	printf("CPU per event               import %.1f us, bare verify %.1f us per signature\n",
	       icpu * 1e6, vcpu * 1e6);
	printf("CPU-bound ratio             %.3f (bare verify CPU / import CPU per event)\n",
	       vcpu / icpu);
	printf("disk after import           %.0f bytes/event, %.3f x raw (apparent %.3f x)\n",
	       (double)disk1 / (double)n, (double)disk1 / (double)raw, (double)app1 / (double)raw);
	printf("disk after full compaction  %.0f bytes/event, %.3f x raw (apparent %.3f x; %.1f s)\n",
	       (double)disk2 / (double)n, (double)disk2 / (double)raw, (double)app2 / (double)raw, tc);
	printf("(target <= 1.3 x raw)\n");
	if (!keep) {
		char *rargv[] = {"/bin/rm", "-rf", (char *)dir, NULL};
		run(rargv, NULL, NULL);
	}
	free(digest);
	free(sig);
	return 0;
}
