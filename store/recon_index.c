/* Set reconciliation over the store's time index: see recon_index.h. */
#include <stdlib.h>
#include <string.h>

#include "ids.h"
#include "recon_index.h"

int store_recon_ts(int64_t created_us, uint64_t *ts)
{
	if (created_us < -STORE_RECON_TS_OFFSET || created_us >= STORE_RECON_TS_OFFSET)
		return PITH_EINVAL;
	*ts = (uint64_t)(created_us + STORE_RECON_TS_OFFSET);
	return 0;
}

typedef struct collect {
	recon_item_t *items;
	size_t n, cap;
	size_t skipped;
	int oom;
	const atomic_int *stop;  /* set from another thread: give up */
	int stopped;
} collect_t;

static int collect_one(void *arg, int64_t created_us, const uint8_t id[32])
{
	collect_t *c = arg;
	uint64_t ts;
	if (c->stop && atomic_load_explicit(c->stop, memory_order_relaxed)) {
		c->stopped = 1;
		return 1;
	}
	if (store_recon_ts(created_us, &ts)) {
		c->skipped++;
		return 0;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4096;
		recon_item_t *p = realloc(c->items, cap * sizeof(*p));
		if (!p) {
			c->oom = 1;
			return 1;
		}
		c->items = p;
		c->cap = cap;
	}
	c->items[c->n].ts = ts;
	memcpy(c->items[c->n].id, id, 32);
	c->n++;
	return 0;
}

static int collect_bundle(void *arg, int64_t built_us, const uint8_t sha[32], const char *pith)
{
	(void)pith;
	return collect_one(arg, built_us, sha);
}

/* Builds the set from what c collected (walk: rc of the index walk). */
static int load_finish(collect_t *c, int rc, const char *what, recon_set_t **out,
		       size_t *skipped, pith_err_t *err)
{
	if (c->stopped)
		rc = pith_err_set(err, PITH_ENOTSUP, "recon index: %s load abandoned", what);
	else if (c->oom)
		rc = pith_err_set(err, PITH_ENOMEM, "recon index: out of memory after %zu %s", c->n,
				  what);
	else if (rc > 0)
		rc = pith_err_set(err, PITH_EIO, "recon index: %s index walk stopped", what);
	/* Both indexes are in (time, id) order and the mapping keeps it, so
	 * the set is bulk-built; a broken order is reported. */
	if (!rc)
		rc = recon_set_new_sorted(out, c->items, c->n, err);
	free(c->items);
	if (!rc && skipped)
		*skipped = c->skipped;
	return rc;
}

int store_recon_index_load(store_t *st, recon_set_t **out, size_t *skipped,
			   const atomic_int *stop, pith_err_t *err)
{
	collect_t c = {.stop = stop};
	*out = NULL;
	/* sized by the store's count up front: at 10 million events the
	 * doublings would copy 0.8 GB and hold 1.2 GB at once */
	store_counts_t n;
	store_counts_get(st, &n);
	if (n.events && n.events <= SIZE_MAX / sizeof(*c.items) &&
	    (c.items = malloc((size_t)n.events * sizeof(*c.items))))
		c.cap = (size_t)n.events;
	int rc = store_time_each(st, INT64_MIN, INT64_MAX, collect_one, &c, err);
	return load_finish(&c, rc, "events", out, skipped, err);
}

int store_recon_bundles_load(store_t *st, recon_set_t **out, size_t *skipped,
			     const atomic_int *stop, pith_err_t *err)
{
	collect_t c = {.stop = stop};
	*out = NULL;
	int rc = store_bundle_refs_each(st, collect_bundle, &c, err);
	return load_finish(&c, rc, "bundles", out, skipped, err);
}

int store_recon_index_remove_raw(recon_set_t *set, int64_t us, const uint8_t id[static 32])
{
	uint64_t ts;
	if (store_recon_ts(us, &ts))
		return 0;
	int rc = recon_set_remove(set, ts, id);
	return rc == PITH_ENOTFOUND ? 0 : rc;
}

int store_recon_index_add_raw(recon_set_t *set, int64_t created_us,
			      const uint8_t id[static 32])
{
	uint64_t ts;
	if (store_recon_ts(created_us, &ts))
		return 0;
	int rc = recon_set_add(set, ts, id);
	return rc == PITH_EEXIST ? 0 : rc;
}

int store_recon_index_add(recon_set_t *set, const pith_event_t *ev)
{
	static const char prefix[] = "sha256:";
	uint8_t id[32];
	if (strncmp(ev->event_id, prefix, sizeof(prefix) - 1) != 0 ||
	    pith_hex_decode(ev->event_id + sizeof(prefix) - 1, 64, id, 32))
		return PITH_EINVAL;
	return store_recon_index_add_raw(set, ev->created_us, id);
}
