/* The merge lanes of a commit (store_batch_set_lanes, store.h): helper
 * threads that merge records' states beside the writer (batch_int.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include "batch_int.h"

#include <stdlib.h>

/* ---- lanes ---------------------------------------------------------------- */
/* Takes the next group of the window that needs a merge, or -1. Lock held. */
static long lanes_take(lanes_t *l)
{
	while (l->next < l->end) {
		group_t *g = &l->b->g[l->next++];
		if (store_batch_group_needs_merge(g))
			return (long)(g - l->b->g);
	}
	return -1;
}

static void *lane_main(void *arg)
{
	lanes_t *l = arg;
	uint64_t seen = 0;
	pthread_setname_np(pthread_self(), "pith-lane");
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->stop && l->gen == seen)
			pthread_cond_wait(&l->go, &l->mu);
		if (l->stop)
			break;
		seen = l->gen;
		long gi;
		while ((gi = lanes_take(l)) >= 0) {
			pthread_mutex_unlock(&l->mu);
			store_batch_group_merge(l->b, &l->b->g[gi]);
			pthread_mutex_lock(&l->mu);
		}
		if (--l->busy == 0)
			pthread_cond_signal(&l->idle);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* Merges the groups [from, to) in the lanes and on the calling thread;
 * returns once every one is done. */
void store_batch_lanes_run(store_batch_t *b, size_t from, size_t to)
{
	lanes_t *l = b->lanes;
	pthread_mutex_lock(&l->mu);
	l->next = from;
	l->end = to;
	l->busy = l->n;
	l->gen++;
	pthread_cond_broadcast(&l->go);
	long gi;
	while ((gi = lanes_take(l)) >= 0) {
		pthread_mutex_unlock(&l->mu);
		store_batch_group_merge(b, &b->g[gi]);
		pthread_mutex_lock(&l->mu);
	}
	while (l->busy)
		pthread_cond_wait(&l->idle, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

void store_batch_lanes_stop(store_batch_t *b)
{
	lanes_t *l = b->lanes;
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = 1;
	pthread_cond_broadcast(&l->go);
	pthread_mutex_unlock(&l->mu);
	store_pool_join(&l->threads);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->go);
	pthread_cond_destroy(&l->idle);
	free(l);
	b->lanes = NULL;
}

int store_batch_set_lanes(store_batch_t *b, int n, pith_err_t *err)
{
	store_batch_lanes_stop(b);
	if (n <= 1)
		return 0;
	lanes_t *l = calloc(1, sizeof(*l));
	if (!l)
		return pith_err_set(err, PITH_ENOMEM, "store: out of memory");
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->go, NULL);
	pthread_cond_init(&l->idle, NULL);
	l->b = b;
	b->lanes = l;
	l->n = (int)store_pool_start(&l->threads, (size_t)n - 1, lane_main, l, 0);
	if (l->n < n - 1) {
		store_batch_lanes_stop(b);
		return pith_err_set(err, PITH_EIO, "store: cannot start a merge lane");
	}
	return 0;
}

