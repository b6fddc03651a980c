/* Benchmark (issue 5): one reconciliation between two sets of N items that
 * differ in D (half missing on each side), both sides simulated in one
 * process with the very functions the node uses. Prints the bytes and
 * messages exchanged, the CPU each side spent, and the size of simply
 * sending all ids; with --dirs it also writes each side's events as one
 * file per event, for bench_recon.sh to measure rsync on the same data.
 *
 * With --newer R instead of --diff, the sets are bundle sets (one item per
 * record): B holds a newer bundle of R records, built in the week after
 * the span (so at the end of the order), where A holds the older one.
 *
 * usage: bench_recon [--n N] [--diff D | --newer R] [--seed S] [--fanout F]
 *                    [--list-max L] [--version V] [--dirs DIR_A DIR_B]
 * (tuning: see recon_config_t; --version 1 is the message version of nodes
 * before issue 56, 2 the default)
 * The last line is machine-readable (RESULT key=value ...). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recon.h"

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int item_order(const void *a, const void *b)
{
	const recon_item_t *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return memcmp(x->id, y->id, 32);
}

static int id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

/* One file per event: DIR/xx/<64 hex>, the 32-byte id then 200 bytes of
 * content derived from it, mtime = created_at, identical on both sides. */
static int write_event_file(const char *dir, const recon_item_t *it)
{
	static const char hexd[] = "0123456789abcdef";
	char path[4096], hex[65];
	for (int i = 0; i < 32; i++) {
		hex[2 * i] = hexd[it->id[i] >> 4];
		hex[2 * i + 1] = hexd[it->id[i] & 15];
	}
	hex[64] = 0;
	snprintf(path, sizeof(path), "%s/%.2s/%s", dir, hex, hex);
	uint8_t body[232];
	memcpy(body, it->id, 32);
	for (int i = 32; i < 232; i++)
		body[i] = (uint8_t)("{\"event_type\":\"graph_snapshot\",\"payload\":"[i % 40] ^ it->id[i % 32]);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	int rc = write(fd, body, sizeof(body)) == (ssize_t)sizeof(body) ? 0 : -1;
	struct timespec tm[2];
	tm[0].tv_sec = tm[1].tv_sec = (time_t)(it->ts / 1000000);
	tm[0].tv_nsec = tm[1].tv_nsec = 0;
	if (futimens(fd, tm))
		rc = -1;
	close(fd);
	return rc;
}

static int write_tree(const char *dir, const recon_item_t *items, size_t n)
{
	char path[4096];
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -1;
	for (int i = 0; i < 256; i++) {
		snprintf(path, sizeof(path), "%s/%02x", dir, i);
		if (mkdir(path, 0755) && errno != EEXIST)
			return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (write_event_file(dir, &items[i]))
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = 1000000, diff = 1000, newer = 0;
	uint64_t seed = 42;
	const char *dir_a = NULL, *dir_b = NULL;
	recon_config_t cfg;
	recon_config_default(&cfg);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--n") && i + 1 < argc)
			n = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--diff") && i + 1 < argc)
			diff = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--newer") && i + 1 < argc)
			newer = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--fanout") && i + 1 < argc)
			cfg.fanout = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--list-max") && i + 1 < argc)
			cfg.list_max = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--version") && i + 1 < argc)
			cfg.version = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--dirs") && i + 2 < argc) {
			dir_a = argv[++i];
			dir_b = argv[++i];
		} else {
			fprintf(stderr, "usage: bench_recon [--n N] [--diff D | --newer R] [--seed S] "
					"[--fanout F] [--list-max L] [--version V] [--dirs DIR_A DIR_B]\n");
			return 2;
		}
	}
	if (newer)
		diff = 2 * newer;
	if (diff > n) {
		fprintf(stderr, "bench_recon: --diff (or twice --newer) must not exceed --n\n");
		return 2;
	}
	/* A universe of n + diff/2 items: n - diff/2 common, diff/2 only on
	 * A, diff/2 only on B, so each side holds n and they differ in diff.
	 * --newer: B's are the last diff/2 (newer bundles of records whose
	 * older ones, anywhere in the span, only A holds). */
	size_t only = diff / 2, total = n + only;
	rng_state = seed;
	recon_item_t *u = malloc(total * sizeof(*u));
	uint8_t *mask = malloc(total);
	if (!u || !mask)
		return 1;
	const uint64_t span = UINT64_C(2) * 365 * 86400 * 1000000; /* two years, µs */
	const uint64_t base = UINT64_C(1700000000) * 1000000;
	for (size_t i = 0; i < total; i++) {
		u[i].ts = base + rng() % span;
		if (newer && i >= n) /* built in the week after the span */
			u[i].ts = base + span + rng() % (UINT64_C(7) * 86400 * 1000000);
		for (int k = 0; k < 32; k += 8) {
			uint64_t v = rng();
			memcpy(u[i].id + k, &v, 8);
		}
		mask[i] = 3;
	}
	qsort(u, total, sizeof(*u), item_order);
	for (size_t k = 0; k < 2 * only;) {
		size_t i = rng() % total;
		if (newer) {
			/* the newest `only` are B's; the old ones of as many records A's */
			i = k < only ? rng() % n : n + (k - only);
		}
		if (mask[i] != 3)
			continue;
		mask[i] = k < only ? 1 : 2;
		k++;
	}
	recon_item_t *va = malloc(n * sizeof(*va)), *vb = malloc(n * sizeof(*vb));
	size_t na = 0, nb = 0;
	for (size_t i = 0; i < total; i++) {
		if (mask[i] & 1)
			va[na++] = u[i];
		if (mask[i] & 2)
			vb[nb++] = u[i];
	}

	pith_err_t err = {0};
	recon_set_t *a = NULL, *b = NULL;
	double t0 = cpu_now();
	if (recon_set_new_sorted(&a, va, na, &err) || recon_set_new_sorted(&b, vb, nb, &err)) {
		fprintf(stderr, "bench_recon: %s\n", err.msg);
		return 1;
	}
	double build_s = (cpu_now() - t0) / 2;

	/* Keeping the set current: items added one at a time in random order
	 * (what ingest does), timed on a third set. */
	recon_set_t *c = recon_set_new();
	size_t nadd = n < 200000 ? n : 200000;
	size_t *perm = malloc(nadd * sizeof(*perm));
	for (size_t i = 0; i < nadd; i++)
		perm[i] = (size_t)(rng() % na);
	t0 = cpu_now();
	for (size_t i = 0; i < nadd; i++)
		recon_set_add(c, va[perm[i]].ts, va[perm[i]].id);
	double add_ns = (cpu_now() - t0) / (double)nadd * 1e9;
	recon_set_free(c);
	free(perm);

	/* The reconciliation. */
	recon_session_t *sa = recon_session_new(a, RECON_INITIATOR, &cfg, NULL, &err);
	recon_session_t *sb = recon_session_new(b, RECON_RESPONDER, &cfg, NULL, &err);
	if (!sa || !sb) {
		fprintf(stderr, "bench_recon: %s\n", err.msg);
		return 1;
	}
	pith_buf_t m1 = PITH_BUF_INIT, m2 = PITH_BUF_INIT;
	recon_ids_t have_a = RECON_IDS_INIT, need_a = RECON_IDS_INIT;
	recon_ids_t have_b = RECON_IDS_INIT, need_b = RECON_IDS_INIT;
	double cpu_a = 0, cpu_b = 0, w0 = wall_now();
	uint64_t bytes_ab = 0, bytes_ba = 0;
	unsigned msgs = 0;
	size_t largest = 0;
	t0 = cpu_now();
	int rc = recon_initiate(sa, &m1, &err);
	cpu_a += cpu_now() - t0;
	while (!rc) {
		msgs++;
		bytes_ab += m1.len;
		largest = m1.len > largest ? m1.len : largest;
		t0 = cpu_now();
		rc = recon_respond(sb, m1.data, m1.len, &m2, &have_b, &need_b, &err);
		cpu_b += cpu_now() - t0;
		if (rc || !m2.len)
			break;
		msgs++;
		bytes_ba += m2.len;
		largest = m2.len > largest ? m2.len : largest;
		t0 = cpu_now();
		rc = recon_respond(sa, m2.data, m2.len, &m1, &have_a, &need_a, &err);
		cpu_a += cpu_now() - t0;
		if (rc || !m1.len)
			break;
	}
	double wall = wall_now() - w0;
	if (rc) {
		fprintf(stderr, "bench_recon: reconciliation failed: %s\n", err.msg);
		return 1;
	}

	/* Check: each side learnt exactly what it lacks. */
	qsort(need_a.ids, need_a.n, 32, id_cmp);
	qsort(need_b.ids, need_b.n, 32, id_cmp);
	size_t want_a = 0, want_b = 0, got_a = 0, got_b = 0;
	for (size_t i = 0; i < total; i++) {
		if (mask[i] == 2) {
			want_a++;
			got_a += bsearch(u[i].id, need_a.ids, need_a.n, 32, id_cmp) != NULL;
		} else if (mask[i] == 1) {
			want_b++;
			got_b += bsearch(u[i].id, need_b.ids, need_b.n, 32, id_cmp) != NULL;
		}
	}
	size_t dup_a = 0, dup_b = 0;
	for (size_t i = 1; i < need_a.n; i++)
		dup_a += !memcmp(need_a.ids[i - 1], need_a.ids[i], 32);
	for (size_t i = 1; i < need_b.n; i++)
		dup_b += !memcmp(need_b.ids[i - 1], need_b.ids[i], 32);
	int correct = got_a == want_a && got_b == want_b && need_a.n - dup_a == want_a &&
		      need_b.n - dup_b == want_b;

	uint64_t bytes = bytes_ab + bytes_ba;
	uint64_t all_ids = (uint64_t)n * 32;
	unsigned round_trips = (msgs + 1) / 2;
	printf("bench_recon: two sets of %zu items differing in %zu (%zu missing on each side)\n",
	       n, 2 * only, only);
	printf("  set build (bulk, sorted)   %8.1f ms per side, %.1f MB per set\n",
	       build_s * 1e3, (double)recon_set_memory(a) / 1e6);
	printf("  set add (random order)     %8.0f ns per item\n", add_ns);
	printf("  reconciliation             %u messages (%u round trips), largest %zu bytes\n",
	       msgs, round_trips, largest);
	printf("  bytes A->B / B->A / total  %llu / %llu / %llu\n", (unsigned long long)bytes_ab,
	       (unsigned long long)bytes_ba, (unsigned long long)bytes);
	printf("  all ids (32 bytes each)    %llu bytes; reconciliation is %.3f%% of it\n",
	       (unsigned long long)all_ids, 100.0 * (double)bytes / (double)all_ids);
	printf("  CPU initiator / responder  %.1f ms / %.1f ms (wall %.1f ms, both in one thread)\n",
	       cpu_a * 1e3, cpu_b * 1e3, wall * 1e3);
	recon_stats_t st_a, st_b;
	recon_session_stats(sa, &st_a);
	recon_session_stats(sb, &st_b);
	printf("  version %u                  bytes per difference %.1f; estimate %.0f; "
	       "coded ranges not decoded %u\n",
	       st_b.version, diff ? (double)(bytes_ab + bytes_ba) / (double)(2 * only) : 0.0,
	       st_b.estimate, st_a.cells_failed + st_b.cells_failed);
	printf("  result                     A learnt %zu of %zu, B learnt %zu of %zu: %s"
	       " (ids reported twice: %zu, %zu)\n",
	       got_a, want_a, got_b, want_b, correct ? "correct" : "WRONG", dup_a, dup_b);
	fflush(stdout);

	if (dir_a) {
		double f0 = wall_now();
		if (write_tree(dir_a, va, na) || write_tree(dir_b, vb, nb)) {
			fprintf(stderr, "bench_recon: writing the file trees failed: %s\n",
				strerror(errno));
			return 1;
		}
		printf("  file trees                 %zu + %zu files written in %.1f s\n", na, nb,
		       wall_now() - f0);
	}
	printf("RESULT n=%zu diff=%zu bytes=%llu bytes_ab=%llu bytes_ba=%llu messages=%u "
	       "round_trips=%u all_ids=%llu cpu_initiator_ms=%.2f cpu_responder_ms=%.2f "
	       "add_ns=%.0f correct=%d version=%u per_diff=%.1f\n",
	       n, 2 * only, (unsigned long long)bytes, (unsigned long long)bytes_ab,
	       (unsigned long long)bytes_ba, msgs, round_trips, (unsigned long long)all_ids,
	       cpu_a * 1e3, cpu_b * 1e3, add_ns, correct, cfg.version,
	       only ? (double)bytes / (double)(2 * only) : 0.0);

	recon_ids_release(&have_a);
	recon_ids_release(&need_a);
	recon_ids_release(&have_b);
	recon_ids_release(&need_b);
	pith_buf_release(&m1);
	pith_buf_release(&m2);
	recon_session_free(sa);
	recon_session_free(sb);
	recon_set_free(a);
	recon_set_free(b);
	free(va);
	free(vb);
	free(u);
	free(mask);
	return correct ? 0 : 1;
}
