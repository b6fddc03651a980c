/* Shared by the benchmarks that hold a run against the bare Ed25519
 * verification rate of all cores (bench_import, bench_sync): timing, the
 * signatures of a gen_events file, the bare rate, and running a child. */
#ifndef PITH_BENCH_UTIL_H
#define PITH_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "ed25519.h"

/* The options both benchmarks take: --events N --per-record E --threads T
 * --dir DIR --pithctl PATH --gen PATH --keep. */
typedef struct bench_opts {
	unsigned long events, per;
	int threads, keep;
	const char *dir, *pithctl, *gen;
} bench_opts_t;

/* Defaults: events as given, 10 per record, every core, no dir (a
 * temporary one), the tree's pithctl and gen_events. */
void bench_opts_init(bench_opts_t *o, unsigned long events, const char *pithctl,
		     const char *gen);
/* Takes argv[*i] (and its value, advancing *i) if it is one of those
 * options; returns 0 if it is not. */
int bench_opt_take(bench_opts_t *o, int argc, char **argv, int *i);
/* Whether the options make sense (counts above zero, 1-64 threads). */
int bench_opts_ok(const bench_opts_t *o);

double bench_now(void);     /* monotonic seconds */
double bench_cpu_now(void); /* this process's CPU seconds */

/* The digests and signatures of every event in a gen_events file, and the
 * test key's public key, for bench_bare_rate. */
typedef struct bench_sigs {
	uint8_t (*digest)[32];
	uint8_t (*sig)[64];
	uint8_t pk[32];
	size_t n;
	uint64_t raw; /* bytes of the JSON Lines without newlines */
} bench_sigs_t;

/* Loads events (JSON Lines) and key (its public key file). 0, or 1 after
 * saying why on stderr. */
int bench_sigs_load(const char *events, const char *key, bench_sigs_t *out);

/* Runs gen (tests/gen_events) for nevents events, per per record, into
 * events and key unless both exist, then loads them (bench_sigs_load). */
int bench_events_prepare(const char *gen, const char *events, const char *key,
			 unsigned long nevents, unsigned long per, bench_sigs_t *out);
void bench_sigs_release(bench_sigs_t *s);

/* Signatures per second with nt threads doing nothing but
 * crypto_sign_verify_detached over s (its first million: a rate, and
 * at 10M events all of them took 5 minutes a measurement); *cpu_per
 * gets the CPU seconds per signature. Exits if one does not verify. */
double bench_bare_rate(const bench_sigs_t *s, int nt, double *cpu_per);
/* The same with the fixed-key verifier the node uses for trusted keys
 * (proto/ed25519.h), in batches of PITH_ED_MANY as the node runs it. */
double bench_fixed_rate(const bench_sigs_t *s, int nt, double *cpu_per);

/* The floor of an event (issue 56): what no ingest can avoid, each part
 * measured bare on the first BENCH_RATE_SAMPLE events of the file, CPU
 * microseconds per event. sig: its signatures (sigs_per_event of them,
 * counted in the file) at the fixed-key verifier's CPU per signature
 * measured in the same run; parse: its bytes parsed once (json_parse, the
 * node's parser) and hashed once (SHA-256 over them), on one thread;
 * write: its bytes written once to RocksDB with the write-ahead log (not
 * synced per batch), as a bare WriteBatch per 1,000 events (key 32 bytes,
 * value the event's bytes;
 * LZ4, as the store's flushed files; no compaction), the memtables flushed
 * at the end, every thread's CPU counted. */
typedef struct bench_floor {
	double sig_us, parse_us, write_us, us;
	double sigs_per_event;
	size_t n;
} bench_floor_t;

/* Measures the floor of the events in path (s: its loaded signatures,
 * fixed_cpu_per_sig: bench_fixed_rate's) with a scratch database in dbdir
 * (removed after). 0, or 1 with a line on stderr. */
int bench_floor_measure(const char *path, const bench_sigs_t *s, double fixed_cpu_per_sig,
			const char *dbdir, bench_floor_t *out);
/* Prints `floor per event` with its parts and `WHAT / floor` for a run of
 * cpu_us CPU microseconds per event. */
void bench_floor_print(const bench_floor_t *f, const char *what, double cpu_us);

/* Runs argv[0] with stdout to out_path (NULL: inherited) and waits.
 * Returns its exit status (-1 if it did not exit); *secs (may be NULL)
 * gets the wall time, *cpu (may be NULL) its user+system seconds. */
int bench_run(char *const argv[], const char *out_path, double *secs, double *cpu);

/* The peak resident set (kB) of the child the last bench_run waited for. */
extern long bench_last_maxrss_kb;

/* Starts argv[0] with stdout and stderr appended to log_path; the pid, or
 * -1. */
pid_t bench_spawn(char *const argv[], const char *log_path);

/* User+system CPU seconds a running child has used so far (from /proc),
 * or -1. */
double bench_child_cpu(pid_t pid);
/* The peak resident set (kB, VmHWM) of a running child so far, or -1. */
long bench_child_hwm_kb(pid_t pid);

/* The CPU time of a process's threads, in thread id order (for pithd:
 * the loop, the validators, the writer, then RocksDB's). */
#define BENCH_THREADS_MAX 256
typedef struct bench_threads {
	int n;
	int tid[BENCH_THREADS_MAX];
	char comm[BENCH_THREADS_MAX][20];
	double secs[BENCH_THREADS_MAX];
} bench_threads_t;

/* The threads of pid now. */
void bench_threads_snap(pid_t pid, bench_threads_t *ts);
/* Snaps pid's threads into acc: a thread seen before keeps the CPU time
 * it had when last seen after it exits. */
void bench_threads_note(pid_t pid, bench_threads_t *acc);
/* Each thread's CPU time between snapshots a (NULL: from its start) and
 * b, per event of n, as lines appended to out. */
void bench_threads_print(const bench_threads_t *a, const bench_threads_t *b, size_t n,
			 pith_buf_t *out);
/* bench_run, its threads' CPU times noted every 100 ms until it exits
 * (bench_threads_note; a thread's last 100 ms may be missed); threads
 * NULL: bench_run. */
int bench_run_threads(char *const argv[], const char *out_path, double *secs, double *cpu,
		      bench_threads_t *threads);

/* Bytes of the regular files directly in dir: allocated blocks returned,
 * apparent sizes in *apparent, and those of RocksDB's write-ahead logs
 * (*.log) in *logs (may be NULL). */
uint64_t bench_dir_bytes(const char *dir, uint64_t *apparent, uint64_t *logs);

/* A SHA-256 of every state of the store in dir (opened read-only), in
 * key order: each pith number, a NUL, the state's length (8 bytes, big
 * endian) and its canonical bytes. Two stores with equal digests hold
 * byte-identical states. *n: how many. 0, or -1 with a line on stderr. */
int bench_states_digest(const char *dir, uint8_t out[32], uint64_t *n);

#endif
