/* CPU priority of the node's worker threads (docs/pithd.md, worker_nice).
 *
 * The event loop serves HTTP reads and the peers; the validators, the
 * store writer and RocksDB's flushes and compactions can wait a little.
 * On a machine with few cores, running the workers at a higher nice value
 * than the loop keeps the loop's latency down while ingest runs
 * (docs/performance.md at 262f3c4, issue 6). Linux nice values are per thread. */
#ifndef PITH_NODE_PRIO_H
#define PITH_NODE_PRIO_H

#include <stdint.h>
#include <sys/types.h>

/* Highest (nicest) value a thread can be given. */
#define PRIO_NICE_MAX 19

/* Nice steps the validators (pithctl import's; pithd's when worker_nice is
 * set) and pithd's RocksDB flush and compaction threads run below the
 * writer. The writer is the one thread a catch-up or an import cannot
 * share out: with both cores busy it waited for one behind them, and
 * later ran alone while they, every fetched event validated, had nothing
 * to do (a core idle 8-10% of a 4M-event catch-up; docs/performance.md at 262f3c4,
 * issue 17, sessions 23, 32). */
#define PRIO_BELOW_WRITER 5

/* How many steps further than the writer a node's validators and RocksDB's
 * threads go: PRIO_BELOW_WRITER when the workers are lowered at all
 * (worker_nice > 0), none when everything runs at the loop's value. The
 * one place pithd says it (node/ingest/ingest.c, node/daemon/node.c). */
static inline int prio_below_writer(int worker_nice)
{
	return worker_nice > 0 ? PRIO_BELOW_WRITER : 0;
}

/* Sets thread tid (0: the calling thread) of this process to the nice
 * value of the process's main thread (pithd's event loop) plus n, at most
 * PRIO_NICE_MAX. Never
 * raises a thread's priority: a thread already at that value or nicer is
 * left alone. n <= 0: does nothing. Returns 0, or PITH_EIO with errno set
 * (an unknown thread, a kernel that refuses). */
int prio_lower_thread(pid_t tid, int n);

/* prio_lower_thread(tid, n) for every thread of this process whose name
 * (/proc/self/task/TID/comm) starts with prefix, e.g. "rocksdb:" for the
 * background threads RocksDB names after their pool. Returns how many
 * threads matched (whether or not they needed changing), or PITH_EIO if
 * the thread list cannot be read or a thread refused. */
int prio_lower_threads_named(const char *prefix, int n);

/* Open descriptors. A store keeps its table files open (a 10M-event store
 * some 770 of them, more as it grows), beside the peers' and the HTTP
 * clients' sockets, and many systems start a process at a soft limit of
 * 1024 (a hard one far above). Raises this process's soft RLIMIT_NOFILE
 * to want, or to the hard limit when that is lower; never lowers it.
 * Returns the soft limit now (UINT64_MAX: unlimited; 0: unknown). */
#define PRIO_FD_WANT 65536
uint64_t prio_raise_fd_limit(uint64_t want);

#endif
