/* A worker pool's threads (store_pool.h): the one place that starts a
 * group of like threads in node/, store/ and pithctl
 * (tests/mechanisms_check.py holds the tree to it). */
#include "store_pool.h"

#include <stdlib.h>
#include <string.h>

size_t store_pool_start(store_pool_t *p, size_t n, void *(*fn)(void *), void *arg,
			size_t stride)
{
	memset(p, 0, sizeof(*p));
	if (!n)
		return 0;
	p->th = calloc(n, sizeof(*p->th));
	p->up = calloc(n, 1);
	if (!p->th || !p->up) {
		store_pool_join(p);
		return 0;
	}
	p->n = n;
	for (size_t k = 0; k < n; k++) {
		void *a = stride ? (char *)arg + k * stride : arg;
		if (!pthread_create(&p->th[k], NULL, fn, a)) {
			p->up[k] = 1;
			p->running++;
		}
	}
	return p->running;
}

int store_pool_is_running(const store_pool_t *p, size_t k)
{
	return k < p->n && p->up[k];
}

void store_pool_join(store_pool_t *p)
{
	for (size_t k = 0; k < p->n; k++)
		if (p->up[k])
			pthread_join(p->th[k], NULL);
	free(p->th);
	free(p->up);
	memset(p, 0, sizeof(*p));
}
