/* Shared benchmark helpers: see bench_util.h. */
#include "bench_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
	double t0 = bench_now();
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
	if (wait4(pid, &status, 0, &ru) < 0)
		return -1;
	bench_last_maxrss_kb = ru.ru_maxrss;
	if (cpu)
		*cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
		       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	if (secs)
		*secs = bench_now() - t0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
