/* The store's side of set reconciliation (docs/sync.md): a recon_set_t
 * (proto/recon.h) over the time index, and one over the bundle index
 * (each record's newest bundle), each built once from the store and then
 * kept current by the caller after each commit.
 *
 * Mapping: recon timestamps are unsigned and at most RECON_TS_MAX, store
 * times are signed microseconds; ts = created_us + STORE_RECON_TS_OFFSET,
 * which keeps the time index's order and covers the years 828 to 3112.
 * Events outside that span are left out of reconciliation (gossip still
 * carries them); both sides of a session use the same mapping. */
#ifndef PITH_STORE_RECON_INDEX_H
#define PITH_STORE_RECON_INDEX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "event.h"
#include "recon.h"
#include "store.h"

#define STORE_RECON_TS_OFFSET (INT64_C(1) << 55)

/* Maps a store time to a recon timestamp. 0, or PITH_EINVAL when outside
 * the reconciled span. */
int store_recon_ts(int64_t created_us, uint64_t *ts);

/* Builds a set of every event in st's time index, in one pass (O(n)).
 * *out is the caller's (recon_set_free). skipped (may be NULL) gets the
 * number of events outside the reconciled span. stop (may be NULL): once
 * another thread sets it, the walk gives up at the next item and the load
 * returns PITH_ENOTSUP ("abandoned"), with nothing in *out. */
int store_recon_index_load(store_t *st, recon_set_t **out, size_t *skipped,
			   const atomic_int *stop, pith_err_t *err);

/* Builds a set of every record's newest bundle, as items (built_at + the
 * same offset, bundle_sha256), from the store's bundle index (O(n)). stop
 * as above. */
int store_recon_bundles_load(store_t *st, recon_set_t **out, size_t *skipped,
			     const atomic_int *stop, pith_err_t *err);

/* Removes one item (a replaced bundle). 0 also when it was not in the set
 * or lies outside the span; PITH_ENOMEM is not possible. */
int store_recon_index_remove_raw(recon_set_t *set, int64_t us, const uint8_t id[static 32]);

/* Adds one stored event (call it for each event a commit reported
 * STORE_STORED). Returns 0 when the set has it afterwards or it is outside
 * the reconciled span, PITH_EINVAL for an event_id that is not
 * "sha256:<64 hex>", PITH_ENOMEM. */
int store_recon_index_add(recon_set_t *set, const pith_event_t *ev);

/* The same from a time and a raw 32-byte id. */
int store_recon_index_add_raw(recon_set_t *set, int64_t created_us,
			      const uint8_t id[static 32]);

#endif
