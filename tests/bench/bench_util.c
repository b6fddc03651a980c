/* Shared benchmark helpers: see bench_util.h. */
#define _GNU_SOURCE /* memmem */
#include "bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <rocksdb/c.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ids.h"
#include "json.h"
#include "store.h"

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int key_load(const char *path, uint8_t pk[32])
{
	FILE *kf = fopen(path, "rb");
	char kbuf[1024];
	size_t kl = kf ? fread(kbuf, 1, sizeof(kbuf), kf) : 0;
	json_doc_t *kd = NULL;
	const char *hex;
	if (kf)
		fclose(kf);
	int bad = json_parse(&kd, (uint8_t *)kbuf, kl, NULL, NULL) ||
		  !(hex = json_get_str(json_doc_root(kd), "public_key_hex")) ||
		  pith_hex_decode(hex, 64, pk, 32);
	json_doc_free(kd);
	if (bad)
		fprintf(stderr, "bench: bad key file %s\n", path);
	return bad;
}

int bench_sigs_load(const char *events, const char *key, bench_sigs_t *s)
{
	memset(s, 0, sizeof(*s));
	if (key_load(key, s->pk))
		return 1;
	FILE *f = fopen(events, "rb");
	if (!f) {
		perror(events);
		return 1;
	}
	size_t cap = 1024;
	s->digest = malloc(cap * 32);
	s->sig = malloc(cap * 64);
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	int rc = 0;
	while (!rc && (len = getline(&line, &lcap, f)) > 0) {
		if (line[len - 1] == '\n')
			len--;
		s->raw += (uint64_t)len;
		json_doc_t *d = NULL;
		if (json_parse(&d, (uint8_t *)line, (size_t)len, NULL, NULL)) {
			rc = 1;
			break;
		}
		const json_value_t *r = json_doc_root(d);
		const char *h = json_get_str(r, "content_sha256");
		const char *sg = json_get_str(json_get(r, "signature"), "signature_b64");
		size_t sl = 0;
		if (s->n == cap) {
			cap *= 2;
			s->digest = realloc(s->digest, cap * 32);
			s->sig = realloc(s->sig, cap * 64);
		}
		if (!s->digest || !s->sig || !h || !sg || pith_hex_decode(h, 64, s->digest[s->n], 32) ||
		    sodium_base642bin(s->sig[s->n], 64, sg, strlen(sg), NULL, &sl, NULL,
				      sodium_base64_VARIANT_ORIGINAL) || sl != 64)
			rc = 1;
		s->n++;
		json_doc_free(d);
	}
	free(line);
	fclose(f);
	if (rc)
		fprintf(stderr, "bench: %s: event %zu has no usable digest or signature\n", events, s->n);
	return rc;
}

int bench_events_prepare(const char *gen, const char *events, const char *key,
			 unsigned long nevents, unsigned long per, bench_sigs_t *out)
{
	struct stat sb;
	char recs[32], perr[32];
	snprintf(recs, sizeof(recs), "%lu", (nevents + per - 1) / per);
	snprintf(perr, sizeof(perr), "%lu", per);
	if (stat(events, &sb) || stat(key, &sb)) {
		char *gargv[] = {(char *)gen, "--records", recs, "--per-record", perr, "--key-out",
				 (char *)key, (char *)events, NULL};
		if (bench_run(gargv, NULL, NULL, NULL)) {
			fprintf(stderr, "bench: %s failed\n", gen);
			return 1;
		}
	}
	return bench_sigs_load(events, key, out);
}

void bench_sigs_release(bench_sigs_t *s)
{
	free(s->digest);
	free(s->sig);
	memset(s, 0, sizeof(*s));
}

typedef struct sigjob {
	const bench_sigs_t *s;
	const pith_ed_table_t *tab; /* NULL: libsodium */
	size_t from, to;
	int bad;
} sigjob_t;

static void *verify_slice(void *arg)
{
	sigjob_t *j = arg;
	if (!j->tab) {
		for (size_t i = j->from; i < j->to; i++)
			if (crypto_sign_verify_detached(j->s->sig[i], j->s->digest[i], 32, j->s->pk))
				j->bad = 1;
		return NULL;
	}
	/* the fixed-key verifier as the node runs it: in batches */
	pith_ed_item_t items[PITH_ED_MANY];
	for (size_t i = j->from; i < j->to;) {
		size_t k = 0;
		for (; k < PITH_ED_MANY && i < j->to; k++, i++)
			items[k] = (pith_ed_item_t){j->tab, j->s->sig[i], j->s->digest[i], 32, 0};
		pith_ed_verify_many(items, k);
		for (size_t x = 0; x < k; x++)
			if (!items[x].ok)
				j->bad = 1;
	}
	return NULL;
}

#define BENCH_RATE_SAMPLE 1000000

static double sig_rate(const bench_sigs_t *s, int nt, const pith_ed_table_t *tab, double *cpu_per)
{
	pthread_t th[64];
	sigjob_t jobs[64];
	if (nt < 1)
		nt = 1;
	if (nt > 64)
		nt = 64;
	/* a rate: the first BENCH_RATE_SAMPLE signatures give it as well as
	 * all of them (at 10M events, 5 minutes a measurement) */
	size_t n = s->n < BENCH_RATE_SAMPLE ? s->n : BENCH_RATE_SAMPLE;
	double t0 = bench_now(), c0 = bench_cpu_now();
	for (int t = 0; t < nt; t++) {
		jobs[t] = (sigjob_t){s, tab, n * (size_t)t / (size_t)nt,
				     n * (size_t)(t + 1) / (size_t)nt, 0};
		pthread_create(&th[t], NULL, verify_slice, &jobs[t]);
	}
	for (int t = 0; t < nt; t++) {
		pthread_join(th[t], NULL);
		if (jobs[t].bad) {
			fprintf(stderr, "bench: a generated signature does not verify\n");
			exit(1);
		}
	}
	*cpu_per = (bench_cpu_now() - c0) / (double)n;
	return (double)n / (bench_now() - t0);
}

double bench_bare_rate(const bench_sigs_t *s, int nt, double *cpu_per)
{
	return sig_rate(s, nt, NULL, cpu_per);
}

double bench_fixed_rate(const bench_sigs_t *s, int nt, double *cpu_per)
{
	pith_ed_table_t *tab = NULL;
	if (pith_ed_table_new(s->pk, &tab)) {
		fprintf(stderr, "bench: no fixed-key table for the test key\n");
		exit(1);
	}
	double r = sig_rate(s, nt, tab, cpu_per);
	pith_ed_table_free(tab);
	return r;
}

long bench_last_maxrss_kb;

int bench_run(char *const argv[], const char *out_path, double *secs, double *cpu)
{
	return bench_run_threads(argv, out_path, secs, cpu, NULL);
}

pid_t bench_spawn(char *const argv[], const char *log_path)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(126);
	close(fd);
	execv(argv[0], argv);
	fprintf(stderr, "bench: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

double bench_child_cpu(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* fields after the command name in parentheses: utime is the 14th
	 * field, stime the 15th */
	char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

long bench_child_hwm_kb(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

void bench_opts_init(bench_opts_t *o, unsigned long events, const char *pithctl,
		     const char *gen)
{
	memset(o, 0, sizeof(*o));
	o->events = events;
	o->per = 10;
	o->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	o->pithctl = pithctl;
	o->gen = gen;
}

int bench_opt_take(bench_opts_t *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	if (!strcmp(a, "--keep")) {
		o->keep = 1;
		return 1;
	}
	if (*i + 1 >= argc)
		return 0;
	const char *v = argv[*i + 1];
	if (!strcmp(a, "--events"))
		o->events = strtoul(v, NULL, 10);
	else if (!strcmp(a, "--per-record"))
		o->per = strtoul(v, NULL, 10);
	else if (!strcmp(a, "--threads"))
		o->threads = atoi(v);
	else if (!strcmp(a, "--dir"))
		o->dir = v;
	else if (!strcmp(a, "--pithctl"))
		o->pithctl = v;
	else if (!strcmp(a, "--gen"))
		o->gen = v;
	else
		return 0;
	(*i)++;
	return 1;
}

int bench_opts_ok(const bench_opts_t *o)
{
	return o->events > 0 && o->per > 0 && o->threads >= 1 && o->threads <= 64;
}

uint64_t bench_dir_bytes(const char *dir, uint64_t *apparent, uint64_t *logs)
{
	DIR *d = opendir(dir);
	uint64_t total = 0;
	*apparent = 0;
	if (logs)
		*logs = 0;
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char p[4096];
		struct stat sb;
		size_t l = strlen(e->d_name);
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (e->d_name[0] == '.' || stat(p, &sb) || !S_ISREG(sb.st_mode))
			continue;
		total += (uint64_t)sb.st_blocks * 512;
		*apparent += (uint64_t)sb.st_size;
		if (logs && l > 4 && !strcmp(e->d_name + l - 4, ".log"))
			*logs += (uint64_t)sb.st_size;
	}
	closedir(d);
	return total;
}

typedef struct digest_walk {
	crypto_hash_sha256_state h;
	uint64_t n;
} digest_walk_t;

static int digest_one(void *arg, const char *pith, const uint8_t *bytes, size_t len)
{
	digest_walk_t *w = arg;
	uint8_t be[8];
	for (int i = 0; i < 8; i++)
		be[i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
	crypto_hash_sha256_update(&w->h, (const uint8_t *)pith, strlen(pith) + 1);
	crypto_hash_sha256_update(&w->h, be, sizeof(be));
	crypto_hash_sha256_update(&w->h, bytes, len);
	w->n++;
	return 0;
}

int bench_states_digest(const char *dir, uint8_t out[32], uint64_t *n)
{
	store_opts_t so = {.read_only = 1};
	store_t *st = NULL;
	pith_err_t err = {0};
	digest_walk_t w = {.n = 0};
	crypto_hash_sha256_init(&w.h);
	int rc = store_open(dir, &so, &st, &err);
	if (!rc)
		rc = store_states_each(st, NULL, 0, digest_one, &w, NULL, &err);
	if (st)
		store_close(st);
	if (rc) {
		fprintf(stderr, "bench: states of %s: %s\n", dir, err.msg);
		return -1;
	}
	crypto_hash_sha256_final(&w.h, out);
	*n = w.n;
	return 0;
}

/* ---- threads' CPU ---------------------------------------------------------------- */

void bench_threads_snap(pid_t pid, bench_threads_t *ts)
{
	char dir[64];
	ts->n = 0;
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && ts->n < BENCH_THREADS_MAX)
		if (e->d_name[0] != '.')
			ts->tid[ts->n++] = atoi(e->d_name);
	closedir(d);
	for (int i = 1; i < ts->n; i++) /* few: insertion sort */
		for (int j = i; j > 0 && ts->tid[j] < ts->tid[j - 1]; j--) {
			int t = ts->tid[j];
			ts->tid[j] = ts->tid[j - 1];
			ts->tid[j - 1] = t;
		}
	for (int i = 0; i < ts->n; i++) {
		char path[128], buf[1024];
		snprintf(ts->comm[i], sizeof(ts->comm[i]), "?");
		ts->secs[i] = 0;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, ts->tid[i]);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fgets(ts->comm[i], sizeof(ts->comm[i]), f))
				ts->comm[i][strcspn(ts->comm[i], "\n")] = 0;
			fclose(f);
		}
		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, ts->tid[i]);
		f = fopen(path, "r");
		size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f)
			fclose(f);
		buf[len] = 0;
		char *p = strrchr(buf, ')');
		unsigned long long ut = 0, st = 0;
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
				&st) == 2)
			ts->secs[i] = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	}
}

void bench_threads_print(const bench_threads_t *a, const bench_threads_t *b, size_t n, pith_buf_t *out)
{
	for (int i = 0; i < b->n; i++) {
		double secs = b->secs[i];
		for (int j = 0; a && j < a->n; j++)
			if (a->tid[j] == b->tid[i])
				secs -= a->secs[j];
		if (secs >= 0.01)
			pith_buf_printf(out, "  thread %d (%s): %.2f s, %.1f us per event\n", i,
					b->comm[i], secs, secs / (double)n * 1e6);
	}
}

void bench_threads_note(pid_t pid, bench_threads_t *acc)
{
	static bench_threads_t now;
	bench_threads_snap(pid, &now);
	for (int i = 0; i < now.n; i++) {
		int j = 0;
		while (j < acc->n && acc->tid[j] != now.tid[i])
			j++;
		if (j == acc->n) {
			if (acc->n == BENCH_THREADS_MAX)
				continue;
			acc->n++;
		}
		acc->tid[j] = now.tid[i];
		acc->secs[j] = now.secs[i];
		memcpy(acc->comm[j], now.comm[i], sizeof(acc->comm[j]));
	}
}

int bench_run_threads(char *const argv[], const char *out_path, double *secs, double *cpu,
		      bench_threads_t *threads)
{
	double t0 = bench_now();
	if (threads)
		threads->n = 0;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (out_path && !freopen(out_path, "w", stdout))
			_exit(126);
		execv(argv[0], argv);
		fprintf(stderr, "bench: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	int status;
	struct rusage ru;
	pid_t w;
	if (!threads)
		w = wait4(pid, &status, 0, &ru);
	else
		for (;;) {
			bench_threads_note(pid, threads);
			if ((w = wait4(pid, &status, WNOHANG, &ru)) != 0)
				break;
			usleep(100000);
		}
	if (w < 0)
		return -1;
	bench_last_maxrss_kb = ru.ru_maxrss;
	if (cpu)
		*cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	if (secs)
		*secs = bench_now() - t0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- the floor (issue 56) ----------------------------------------------------- */

static double thread_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define FLOOR_BATCH 1000

int bench_floor_measure(const char *path, const bench_sigs_t *s, double fixed_cpu_per_sig,
			const char *dbdir, bench_floor_t *out)
{
	memset(out, 0, sizeof(*out));
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	char *rmargv[] = {"/bin/rm", "-rf", (char *)dbdir, NULL};
	bench_run(rmargv, NULL, NULL, NULL);
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(o, 1);
	rocksdb_options_set_compression(o, rocksdb_lz4_compression);
	rocksdb_options_set_disable_auto_compactions(o, 1);
	rocksdb_options_set_level0_slowdown_writes_trigger(o, 1 << 20);
	rocksdb_options_set_level0_stop_writes_trigger(o, 1 << 20);
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	char *e = NULL;
	rocksdb_t *db = rocksdb_open(o, dbdir, &e);
	if (!db) {
		fprintf(stderr, "bench: floor database %s: %s\n", dbdir, e ? e : "?");
		free(e);
		fclose(f);
		return 1;
	}
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	size_t limit = s->n < BENCH_RATE_SAMPLE ? s->n : BENCH_RATE_SAMPLE, n = 0, sigs = 0;
	double parse = 0, write_fg = 0;
	double p0 = bench_cpu_now(), t0 = thread_cpu_now();
	char *line = NULL;
	size_t lcap = 0;
	ssize_t len;
	int rc = 0;
	while (!rc && n < limit && (len = getline(&line, &lcap, f)) > 0) {
		if (line[len - 1] == '\n')
			len--;
		for (const char *p = line; (p = memmem(p, (size_t)len - (size_t)(p - line),
						       "\"signature_b64\"", 15)); p += 15)
			sigs++;
		double a = thread_cpu_now();
		json_doc_t *d = NULL;
		uint8_t h[32];
		rc = json_parse(&d, (uint8_t *)line, (size_t)len, NULL, NULL);
		pith_sha256(line, (size_t)len, h);
		json_doc_free(d);
		double b = thread_cpu_now();
		rocksdb_writebatch_put(wb, (const char *)s->digest[n], 32, line, (size_t)len);
		if (++n % FLOOR_BATCH == 0 || n == limit) {
			rocksdb_write(db, wo, wb, &e);
			rocksdb_writebatch_clear(wb);
		}
		parse += b - a;
		write_fg += thread_cpu_now() - b;
		if (e)
			rc = 1;
	}
	if (!rc) {
		double a = thread_cpu_now();
		rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
		rocksdb_flushoptions_set_wait(fo, 1);
		rocksdb_flush(db, fo, &e);
		rocksdb_flushoptions_destroy(fo);
		write_fg += thread_cpu_now() - a;
	}
	/* RocksDB's own threads: the process's CPU but this thread's */
	double bg = (bench_cpu_now() - p0) - (thread_cpu_now() - t0);
	rocksdb_writebatch_destroy(wb);
	rocksdb_close(db);
	rocksdb_writeoptions_destroy(wo);
	rocksdb_options_destroy(o);
	free(line);
	fclose(f);
	bench_run(rmargv, NULL, NULL, NULL);
	if (rc || !n) {
		fprintf(stderr, "bench: floor of %s: %s\n", path, e ? e : "an event does not parse");
		free(e);
		return 1;
	}
	out->n = n;
	out->sigs_per_event = (double)sigs / (double)n;
	out->sig_us = fixed_cpu_per_sig * out->sigs_per_event * 1e6;
	out->parse_us = parse / (double)n * 1e6;
	out->write_us = (write_fg + (bg > 0 ? bg : 0)) / (double)n * 1e6;
	out->us = out->sig_us + out->parse_us + out->write_us;
	return 0;
}

void bench_floor_print(const bench_floor_t *f, const char *what, double cpu_us)
{
	printf("floor per event             %.1f us (signatures %.1f: %.2f per event at the fixed-key "
	       "verifier's CPU; parse and hash once %.1f; RocksDB write with the WAL %.1f; %zu "
	       "events)\n",
	       f->us, f->sig_us, f->sigs_per_event, f->parse_us, f->write_us, f->n);
	printf("%-27s %.2f (CPU per event %.1f us over the floor; goal: import <= 1.5, sync <= 2)\n",
	       what, cpu_us / f->us, cpu_us);
}
