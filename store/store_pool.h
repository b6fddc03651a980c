/* A worker pool's threads: the one place (issue 52) that starts a group
 * of like threads and joins them. The pools of the tree start theirs
 * here: the store's merge lanes (batch.c) and its check's workers
 * (check.c), the ingest pipeline's validators, the HTTP render pool's
 * workers and the static site's record writers. What each hands its
 * threads stays its own, as the orders differ on purpose: check reports
 * its chunks in store order, the render pool hands each job back to an
 * event loop (wake.h), the site's writers share one cursor, the lanes
 * merge one window at a time.
 *
 * Threads of one fixed role (the ingest writer, the search and site
 * feeders, the sync loader, the store warmer, a backup, a name lookup)
 * start their one thread themselves, named as such
 * (tests/mechanisms_check.py lists them with their reasons).
 *
 * In store/ as store/ is the lowest floor that runs threads (proto/ runs
 * none) and store itself needs it; node/ and pithctl link pith_store. A
 * second public header of pith_store: it knows nothing of RocksDB. */
#ifndef PITH_STORE_POOL_H
#define PITH_STORE_POOL_H

#include <pthread.h>
#include <stddef.h>

typedef struct store_pool {
	pthread_t *th;
	unsigned char *up; /* th[k] was started */
	size_t n;          /* threads asked for */
	size_t running;    /* of which started */
} store_pool_t;

#define STORE_POOL_INIT {0}

/* Starts n threads: thread k runs fn(arg) when stride is 0, else
 * fn((char *)arg + k * stride). A thread that cannot be started is left
 * out (store_pool_is_running says which). Returns how many run: fewer
 * than n when threads or memory ran short (0: none, then p holds nothing
 * to join). p must be empty (STORE_POOL_INIT, or joined). */
size_t store_pool_start(store_pool_t *p, size_t n, void *(*fn)(void *), void *arg,
			size_t stride);
/* Whether thread k was started. */
int store_pool_is_running(const store_pool_t *p, size_t k);
/* Joins every thread started (the caller has told them to end) and
 * empties p. An empty p: nothing. */
void store_pool_join(store_pool_t *p);

#endif
