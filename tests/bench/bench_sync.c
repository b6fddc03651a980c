/* Benchmark (issue 5): a fresh pithd syncing N events (default 500,000)
 * from one peer over loopback, in events per second, against the bare
 * Ed25519 verification rate of all cores measured in the same run.
 *
 * usage: bench_sync [--events N] [--per-record E] [--threads T] [--dir DIR]
 *                   [--pithd PATH] [--pithctl PATH] [--gen PATH]
 *                   [--arg PITHD_ARG]... [--timeout S] [--keep]
 *
 * 1. gen_events writes N signed events (E per record, default 10) to DIR
 *    (kept and reused when DIR is given and already holds them).
 * 2. `pithctl import` fills the peer's store, DIR/a/store (reused when it
 *    already holds N events).
 * 3. The bare rate: T threads (default: all cores) run nothing but
 *    crypto_sign_verify_detached over the events' digests and signatures,
 *    before and after the sync; the mean is reported. "Before" waits
 *    until A (step 4, started first) is idle: it loads its reconciliation
 *    set and reads its store into the page cache after it answers.
 * 4. pithd A serves DIR/a on a free loopback port; pithd B starts with an
 *    empty DIR/b and --peer A, reconciles, fetches, validates and stores
 *    everything. Timed from B's exec until its status reports N events in
 *    the store (polled every 50 ms through its control socket); the CPU
 *    both processes used meanwhile comes from /proc, B's until its store
 *    is done compacting too (status: store.compacting false), since a
 *    large catch-up puts compactions off until it ends (docs/store.md,
 *    "Bulk loading"). Each thread's CPU per event is printed, B's and A's
 *    (A's from B's start). --arg passes a flag to both nodes (e.g. --arg
 *    --validate-threads --arg 3).
 *
 * 5. After both have stopped, the floor of an event (bench_util.h,
 *    bench_floor_measure) and B's CPU per event over it (issue 56).
 * 6. After both have stopped, a SHA-256 of every state of B's store and
 *    of A's, in key order (bench_states_digest): B's states must be byte
 *    for byte those the import computed; exit status 1 if not, or if either
 *    store could not be read.
 *
 * Prints the rate, the ratio to the bare rate (target >= 0.7), CPU per
 * event of each node against the bare CPU per signature, the
 * reconciliation traffic, the states' comparison, and B's progress log
 * lines. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "ids.h"
#include "json.h"
#include "store.h"

#ifndef BENCH_PITHD
#define BENCH_PITHD "pithd"
#endif
#ifndef BENCH_PITHCTL
#define BENCH_PITHCTL "pithctl"
#endif
#ifndef BENCH_GEN
#define BENCH_GEN "gen_events"
#endif

#define MAX_ARGS 32

/* One control-socket command; the parsed answer, or NULL. */
static json_doc_t *node_ask(const char *sock, const char *cmd)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0)
		return NULL;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		close(fd);
		return NULL;
	}
	FILE *f = fdopen(fd, "r+");
	char *line = NULL;
	size_t cap = 0;
	json_doc_t *doc = NULL;
	if (f && fprintf(f, "%s\n", cmd) > 0 && !fflush(f)) {
		ssize_t got = getline(&line, &cap, f);
		if (got > 0 && json_parse(&doc, (uint8_t *)line, (size_t)got - 1, NULL, NULL))
			doc = NULL;
	}
	free(line);
	if (f)
		fclose(f);
	else
		close(fd);
	return doc;
}

static long long jint(const json_value_t *o, const char *path)
{
	char key[64];
	const char *dot;
	while ((dot = strchr(path, '.'))) {
		snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
		o = json_get(o, key);
		path = dot + 1;
	}
	const json_value_t *v = json_get(o, path);
	if (json_is(v, JSON_INT))
		return strtoll(v->u.str, NULL, 10);
	return json_is(v, JSON_FLOAT) ? (long long)v->u.num : -1;
}

static uint16_t free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		perror("bench_sync: finding a free port");
		exit(1);
	}
	close(fd);
	return ntohs(sa.sin_port);
}

static pid_t start_node(const char *pithd, const char *data, const char *listen, const char *peer,
			const char *key, char **extra, int nextra, const char *log)
{
	char *argv[16 + MAX_ARGS];
	int k = 0;
	argv[k++] = (char *)pithd;
	argv[k++] = "--data";
	argv[k++] = (char *)data;
	argv[k++] = "--listen";
	argv[k++] = (char *)listen;
	argv[k++] = "--network-id";
	argv[k++] = "bench-sync";
	argv[k++] = "--trust-key";
	argv[k++] = (char *)key;
	if (peer) {
		argv[k++] = "--peer";
		argv[k++] = (char *)peer;
	}
	for (int i = 0; i < nextra; i++)
		argv[k++] = extra[i];
	argv[k] = NULL;
	return bench_spawn(argv, log);
}

/* Waits until the node answers on its control socket. */
static json_doc_t *wait_up(pid_t pid, const char *sock, double timeout)
{
	double end = bench_now() + timeout;
	while (bench_now() < end) {
		json_doc_t *d = node_ask(sock, "status");
		if (d)
			return d;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return NULL;
		usleep(20000);
	}
	return NULL;
}

/* Waits until pid spends under 2% of a core over a second (at most
 * timeout seconds); returns how long it waited. */
static double wait_idle(pid_t pid, double timeout)
{
	double t0 = bench_now(), c0 = bench_child_cpu(pid);
	while (bench_now() - t0 < timeout) {
		usleep(1000000);
		double c1 = bench_child_cpu(pid);
		if (c1 - c0 < 0.02)
			break;
		c0 = c1;
	}
	return bench_now() - t0;
}

static int stop_node(pid_t pid)
{
	int st = 0;
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void print_log_lines(const char *path, const char *match, int max)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int shown = 0, total = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		total += strstr(line, match) != NULL;
	rewind(f);
	int skip = total > max ? total - max : 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, match))
			continue;
		if (skip-- > 0)
			continue;
		printf("  %s", line);
		shown++;
	}
	if (total > shown)
		printf("  (%d earlier lines not shown)\n", total - shown);
	fclose(f);
}

int main(int argc, char **argv)
{
	bench_opts_t o;
	bench_opts_init(&o, 500000, BENCH_PITHCTL, BENCH_GEN);
	int nextra = 0;
	double timeout = 3600;
	const char *pithd = BENCH_PITHD;
	char *extra[MAX_ARGS];
	for (int i = 1; i < argc; i++) {
		if (bench_opt_take(&o, argc, argv, &i))
			continue;
		if (!strcmp(argv[i], "--pithd") && i + 1 < argc)
			pithd = argv[++i];
		else if (!strcmp(argv[i], "--arg") && i + 1 < argc && nextra < MAX_ARGS)
			extra[nextra++] = argv[++i];
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: bench_sync [--events N] [--per-record E] [--threads T] "
					"[--dir DIR] [--pithd PATH] [--pithctl PATH] [--gen PATH] "
					"[--arg PITHD_ARG]... [--timeout S] [--keep]\n");
			return 2;
		}
	}
	if (!bench_opts_ok(&o))
		return 2;
	unsigned long nevents = o.events, per = o.per;
	int threads = o.threads, keep = o.keep;
	const char *dir = o.dir, *pithctl = o.pithctl, *gen = o.gen;
	char tmpl[] = "/tmp/bench_sync.XXXXXX";
	if (!dir && !(dir = mkdtemp(tmpl))) {
		perror("bench_sync: mkdtemp");
		return 1;
	}
	mkdir(dir, 0700);
	char events[4096], key[4096], adir[4000], astore[4096], bdir[4000], out[4096], alog[4096],
		blog[4096], asock[4096], bsock[4096];
	if (strlen(dir) > 3000) {
		fprintf(stderr, "bench_sync: --dir path too long\n");
		return 2;
	}
	snprintf(events, sizeof(events), "%s/events-%lu-%lu.jsonl", dir, nevents, per);
	snprintf(key, sizeof(key), "%s/key.json", dir);
	snprintf(adir, sizeof(adir), "%s/a-%lu-%lu", dir, nevents, per);
	snprintf(astore, sizeof(astore), "%s/store", adir);
	snprintf(bdir, sizeof(bdir), "%s/b", dir);
	snprintf(out, sizeof(out), "%s/import.json", dir);
	snprintf(alog, sizeof(alog), "%s/a.log", dir);
	snprintf(blog, sizeof(blog), "%s/b.log", dir);
	snprintf(asock, sizeof(asock), "%s/pithd.sock", adir);
	snprintf(bsock, sizeof(bsock), "%s/pithd.sock", bdir);

	/* 1. the events */
	bench_sigs_t sigs;
	if (bench_events_prepare(gen, events, key, nevents, per, &sigs))
		return 1;
	size_t n = sigs.n;

	/* 2. the peer's store */
	store_counts_t cnt = {0};
	store_t *st = NULL;
	pith_err_t err = {0};
	if (!store_open(astore, NULL, &st, &err)) {
		store_counts_get(st, &cnt);
		store_close(st);
	}
	if (cnt.events != n) {
		char *rmargv[] = {"/bin/rm", "-rf", adir, NULL};
		bench_run(rmargv, NULL, NULL, NULL);
		mkdir(adir, 0700);
		char *iargv[] = {(char *)pithctl, "--store", astore, "--trust-key", key, "import",
				 "--json", "--no-progress", events, NULL};
		double secs = 0;
		int rc = bench_run(iargv, out, &secs, NULL);
		if (rc) {
			fprintf(stderr, "bench_sync: pithctl import exited with %d (see %s)\n", rc, out);
			return 1;
		}
		printf("peer store                  %zu events imported in %.1f s (%.0f/s)\n", n, secs,
		       (double)n / secs);
	} else {
		printf("peer store                  %zu events (reused from %s)\n", n, astore);
	}

	/* 3-4. bare rate, sync, bare rate. A reused peer forgets its address
	 * book: a ban from an earlier run (say, one with --arg flags that
	 * flooded it) would refuse B for the whole timeout. */
	char apeers[4096];
	snprintf(apeers, sizeof(apeers), "%s/peers.json", adir);
	char *rmb[] = {"/bin/rm", "-rf", bdir, alog, blog, apeers, NULL};
	bench_run(rmb, NULL, NULL, NULL);
	char alisten[64], blisten[] = "127.0.0.1:0";
	snprintf(alisten, sizeof(alisten), "127.0.0.1:%u", free_port());
	pid_t pa = start_node(pithd, adir, alisten, NULL, key, extra, nextra, alog);
	json_doc_t *d = wait_up(pa, asock, 120);
	if (!d) {
		fprintf(stderr, "bench_sync: node A did not come up (see %s)\n", alog);
		return 1;
	}
	json_doc_free(d);
	/* A loads its reconciliation set and reads its store into the page
	 * cache after it answers (at 10M events some 7 s of a core, then up
	 * to 28 s of reading): the bare rate before and B's start wait until
	 * it is idle */
	double a_idle = wait_idle(pa, 300);
	double cpu1, cpu2;
	double bare1 = bench_bare_rate(&sigs, threads, &cpu1);

	double t0 = bench_now();
	pid_t pb = start_node(pithd, bdir, blisten, alisten, key, extra, nextra, blog);
	double ca0 = bench_child_cpu(pa);
	static bench_threads_t snap_a0, snap_b;
	bench_threads_snap(pa, &snap_a0);
	long long stored = 0;
	double t_first = 0, t_end = 0, ca1 = 0, cb1 = 0;
	while (bench_now() - t0 < timeout) {
		json_doc_t *s = node_ask(bsock, "status");
		if (s) {
			stored = jint(json_doc_root(s), "store.events");
			json_doc_free(s);
			if (stored > 0 && !t_first)
				t_first = bench_now() - t0;
			if (stored >= (long long)n) {
				t_end = bench_now() - t0;
				ca1 = bench_child_cpu(pa);
				cb1 = bench_child_cpu(pb);
				break;
			}
		}
		if (waitpid(pb, NULL, WNOHANG) == pb || waitpid(pa, NULL, WNOHANG) == pa) {
			fprintf(stderr, "bench_sync: a node exited (see %s, %s)\n", alog, blog);
			return 1;
		}
		bench_threads_note(pb, &snap_b);
		usleep(50000);
	}
	/* what the catch-up left behind is part of its cost: RocksDB's
	 * compactions put off until it ended (docs/store.md, "Bulk loading")
	 * and the search index, which follows the store at the lowest priority
	 * (docs/pithd.md): B's CPU is counted until both are done */
	double t_settled = t_end, t_compacted = t_end, t_indexed = t_end;
	if (t_end) {
		double until = bench_now() + 1800;
		int compacting = 1, indexing = 1;
		for (;;) {
			json_doc_t *s = node_ask(bsock, "status");
			const json_value_t *root = s ? json_doc_root(s) : NULL;
			const json_value_t *c = json_get(json_get(root, "store"), "compacting");
			const json_value_t *se = json_get(root, "search");
			/* the node leaves bulk mode just after its last commit
			 * (the sync sees it is caught up): until then RocksDB has
			 * not been told of the compactions it put off, and a status
			 * taken in between said "not compacting" */
			const json_value_t *bulk = json_get(json_get(root, "sync"), "bulk");
			int in_bulk = bulk && bulk->type == JSON_TRUE;
			if (compacting && s && !in_bulk && !(c && c->type == JSON_TRUE)) {
				compacting = 0;
				t_compacted = bench_now() - t0;
			}
			/* no index (null) or none behind, once out of bulk mode
			 * (the index sits it out; while a catch-up commits without
			 * the log, what it is behind is read only up to the last
			 * flush) */
			if (indexing && s && !in_bulk &&
			    (!json_is(se, JSON_OBJECT) || !jint(root, "search.behind"))) {
				indexing = 0;
				t_indexed = bench_now() - t0;
			}
			json_doc_free(s);
			if ((!compacting && !indexing) || bench_now() > until)
				break;
			bench_threads_note(pb, &snap_b);
			usleep(200000);
		}
		t_settled = bench_now() - t0;
	}
	double cb2 = t_end ? bench_child_cpu(pb) : 0;
	json_doc_t *fin = node_ask(bsock, "status");
	pith_buf_t tt = PITH_BUF_INIT, tta = PITH_BUF_INIT;
	static bench_threads_t snap_a1;
	bench_threads_note(pb, &snap_b); /* threads that exited keep their last time */
	bench_threads_snap(pa, &snap_a1);
	bench_threads_print(NULL, &snap_b, n, &tt);
	bench_threads_print(&snap_a0, &snap_a1, n, &tta);
	long hwm_b = bench_child_hwm_kb(pb), hwm_a = bench_child_hwm_kb(pa);
	int rca = stop_node(pa), rcb = stop_node(pb);
	double bare2 = bench_bare_rate(&sigs, threads, &cpu2);
	double fcpu, fixed = bench_fixed_rate(&sigs, threads, &fcpu);
	char fdb[4200];
	snprintf(fdb, sizeof(fdb), "%s/floor-db", dir);
	bench_floor_t floor;
	if (bench_floor_measure(events, &sigs, fcpu, fdb, &floor))
		return 1;
	if (!t_end) {
		fprintf(stderr, "bench_sync: B stored %lld of %zu events in %.0f s (see %s)\n", stored, n,
			timeout, blog);
		return 1;
	}

	double bare = (bare1 + bare2) / 2, rate = (double)n / t_end, vcpu = (cpu1 + cpu2) / 2;
	double cpu_a = (ca1 - ca0) / (double)n, cpu_b = cb2 / (double)n;
	const json_value_t *r = fin ? json_doc_root(fin) : NULL;
	printf("events                      %zu (%lu per record, %.0f bytes of JSON on average)\n", n,
	       per, (double)sigs.raw / (double)n);
	printf("peer idle                   %.1f s after it answered (its set and page cache "
	       "loaded; then the bare rate, then B)\n",
	       a_idle);
	printf("bare verify, %d threads      %.0f/s (before %.0f, after %.0f)\n", threads, bare, bare1,
	       bare2);
	printf("fresh node sync             %.0f events/s (%zu in %.2f s from exec; first stored "
	       "after %.2f s)\n",
	       rate, n, t_end, t_first);
	printf("sync / bare verify          %.3f (target >= 0.7)\n", rate / bare);
	printf("settled                     %.1f s after it (B's compactions done after %.1f s, its "
	       "search index after %.1f s; %.1f us of B's CPU per event, counted below)\n",
	       t_settled - t_end, t_compacted - t_end, t_indexed - t_end,
	       (cb2 - cb1) / (double)n * 1e6);
	printf("peak RSS                    B (syncing) %.0f MiB, A (serving) %.0f MiB\n",
	       (double)hwm_b / 1024.0, (double)hwm_a / 1024.0);
	printf("CPU per event               B (syncing) %.1f us, A (serving) %.1f us; bare verify "
	       "%.1f us per signature\n",
	       cpu_b * 1e6, cpu_a * 1e6, vcpu * 1e6);
	printf("CPU-bound ratio             %.3f (bare verify CPU / B's CPU per event), %.3f "
	       "counting A too\n",
	       vcpu / cpu_b, vcpu / (cpu_a + cpu_b));
	printf("fixed-key verify, %d threads %.0f/s (%.2f x libsodium; %.1f us CPU per signature)\n",
	       threads, fixed, fixed / bare, fcpu * 1e6);
	printf("sync / fixed-key verify     %.3f, CPU-bound %.3f (B), %.3f (A + B)\n", rate / fixed,
	       fcpu / cpu_b, fcpu / (cpu_a + cpu_b));
	bench_floor_print(&floor, "sync / floor", cpu_b * 1e6);
	if (r)
		printf("reconciliation              %lld sessions, %lld ids needed, %lld bytes sent, "
		       "%lld received, %lld messages held back; all traffic %lld bytes received by B "
		       "(%.0f per event)\n",
		       jint(r, "sync.sessions_done"), jint(r, "sync.ids_needed"),
		       jint(r, "sync.bytes_sent"), jint(r, "sync.bytes_received"), jint(r, "sync.holds"),
		       jint(r, "stats.bytes_recv"), (double)jint(r, "stats.bytes_recv") / (double)n);
	if (r)
		printf("B's commits                 %lld batches (%.0f events each), %lld record states "
		       "computed (%.2f per record)\n",
		       jint(r, "ingest.batches"), (double)n / (double)jint(r, "ingest.batches"),
		       jint(r, "ingest.states"), (double)jint(r, "ingest.states") * (double)o.per / (double)n);
	char bstore[4096];
	uint64_t bapp, blogs;
	snprintf(bstore, sizeof(bstore), "%s/store", bdir);
	uint64_t bdisk = bench_dir_bytes(bstore, &bapp, &blogs);
	printf("B's store after it stopped  %.0f bytes/event, %.3f x the events' JSON (write-ahead "
	       "logs %.1f MB)\n",
	       (double)bdisk / (double)n, (double)bdisk / (double)sigs.raw, (double)blogs / 1e6);
	/* the guarantee every change to the ingest keeps: B's states are
	 * byte for byte those of A's store, which pithctl import built */
	uint8_t da[32], db[32];
	int states_differ = 1; /* also when either could not be read */
	uint64_t sa = 0, sb = 0;
	if (!bench_states_digest(astore, da, &sa) && !bench_states_digest(bstore, db, &sb)) {
		char hex[65];
		pith_hex_encode(db, 32, hex);
		int same = sa == sb && !memcmp(da, db, 32);
		printf("B's states                  %llu, sha256 %.16s..., %s A's (%llu)\n",
		       (unsigned long long)sb, hex, same ? "byte-identical to" : "DIFFERENT from",
		       (unsigned long long)sa);
		states_differ = !same;
	}
	printf("exit status                 A %d, B %d\n", rca, rcb);
	printf("B's threads (the loop, the validators, the writer, RocksDB's; noted every 50-200 ms, so exited ones too):\n%.*s",
	       (int)tt.len, tt.data ? (const char *)tt.data : "");
	printf("A's threads from B's start until B settled:\n%.*s", (int)tta.len,
	       tta.data ? (const char *)tta.data : "");
	pith_buf_release(&tt);
	pith_buf_release(&tta);
	printf("B's progress lines:\n");
	print_log_lines(blog, "sync:", 12);
	json_doc_free(fin);
	if (!keep) {
		char *rargv[] = {"/bin/rm", "-rf", (char *)dir, NULL};
		bench_run(rargv, NULL, NULL, NULL);
	}
	bench_sigs_release(&sigs);
	return states_differ;
}
