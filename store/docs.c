/* Event documents in time order (keys.h, docs): found by id through the
 * events family, whose value is the event's created_us; moved there from
 * the events family when a schema-3 store is opened read-write. */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_doc_get(store_t *st, const uint8_t id[STORE_ID_LEN], pith_buf_t *out, pith_err_t *err)
{
	char *e = NULL;
	rocksdb_pinnableslice_t *v = rocksdb_get_pinned_cf(st->db, st->ro, st->cf[STORE_CF_EVENTS],
							   (const char *)id, STORE_ID_LEN, &e);
	if (e) {
		rocksdb_pinnableslice_destroy(v);
		int rc = pith_err_set(err, PITH_EIO, "store: events: %s", e);
		rocksdb_free(e);
		return rc;
	}
	if (!v)
		return PITH_ENOTFOUND;
	size_t len = 0;
	const char *val = rocksdb_pinnableslice_value(v, &len);
	int rc = 0;
	if (len != 8 || !st->cf[STORE_CF_DOCS]) {
		/* the document itself (schemas 2 and 3) */
		if (pith_buf_append(out, val, len))
			rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
		rocksdb_pinnableslice_destroy(v);
		return rc;
	}
	uint8_t tk[STORE_TIME_KEY_LEN];
	memcpy(tk, val, 8);
	memcpy(tk + 8, id, STORE_ID_LEN);
	rocksdb_pinnableslice_destroy(v);
	v = rocksdb_get_pinned_cf(st->db, st->ro, st->cf[STORE_CF_DOCS], (const char *)tk, sizeof(tk),
				  &e);
	if (e) {
		rocksdb_pinnableslice_destroy(v);
		rc = pith_err_set(err, PITH_EIO, "store: docs: %s", e);
		rocksdb_free(e);
		return rc;
	}
	if (!v) {
		char hex[65];
		pith_hex_encode(id, STORE_ID_LEN, hex);
		return pith_err_set(err, PITH_EIO, "store: event sha256:%s is indexed without its document", hex);
	}
	val = rocksdb_pinnableslice_value(v, &len);
	if (pith_buf_append(out, val, len))
		rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
	rocksdb_pinnableslice_destroy(v);
	return rc;
}

#define UPGRADE_CHUNK 4096 /* items per WriteBatch while upgrading */

static int write_chunk(store_t *st, rocksdb_writebatch_t *wb, const char *what, pith_err_t *err)
{
	char *e = NULL;
	rocksdb_write(st->db, st->wo, wb, &e);
	rocksdb_writebatch_clear(wb);
	if (e) {
		int rc = pith_err_set(err, PITH_EIO, "store: %s: %s", what, e);
		rocksdb_free(e);
		return rc;
	}
	return 0;
}

int store_upgrade_walk(store_t *st, int cf, store_upgrade_fn fn, void *arg, const char *schema,
		       const char *what, uint64_t *n, pith_err_t *err)
{
	store_iter_t it;
	uint64_t total = 0;
	size_t chunk = 0;
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	int rc = store_iter_open(st, cf, NULL, 0, NULL, 0, &it, err);
	if (rc) {
		rocksdb_writebatch_destroy(wb);
		return rc;
	}
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		int added = fn(arg, wb, k, kl, v, vl, err);
		if (added < 0) {
			rc = added;
			break;
		}
		total += (uint64_t)added;
		chunk += (size_t)added;
		if (chunk >= UPGRADE_CHUNK) {
			chunk = 0;
			if ((rc = write_chunk(st, wb, what, err)))
				break;
		}
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	if (!rc) {
		rocksdb_writebatch_put_cf(wb, st->cf[STORE_CF_META], STORE_META_SCHEMA,
					  strlen(STORE_META_SCHEMA), schema, strlen(schema));
		rc = write_chunk(st, wb, what, err);
	}
	rocksdb_writebatch_destroy(wb);
	if (!rc && n)
		*n = total;
	return rc;
}

/* The time index lists every event with its created_us: each document
 * still in events is put under that key in docs and its events value
 * becomes the 8-byte time. Values already 8 bytes long were moved by a
 * step cut short. */
static int move_doc(void *arg, rocksdb_writebatch_t *wb, const uint8_t *k, size_t kl,
		    const uint8_t *v, size_t vl, pith_err_t *err)
{
	store_t *st = arg;
	char *val;
	size_t len;
	(void)v;
	(void)vl;
	if (kl != STORE_TIME_KEY_LEN)
		return pith_err_set(err, PITH_EIO, "store: time key of %zu bytes", kl);
	int rc = store_get_raw(st, STORE_CF_EVENTS, k + 8, STORE_ID_LEN, &val, &len, err);
	if (rc)
		return rc;
	int moved = val && len != 8;
	if (moved) {
		rocksdb_writebatch_put_cf(wb, st->cf[STORE_CF_DOCS], (const char *)k, kl, val, len);
		rocksdb_writebatch_put_cf(wb, st->cf[STORE_CF_EVENTS], (const char *)k + 8,
					  STORE_ID_LEN, (const char *)k, 8);
	}
	rocksdb_free(val);
	return moved;
}

int store_docs_upgrade(store_t *st, uint64_t *moved, pith_err_t *err)
{
	int rc = store_upgrade_walk(st, STORE_CF_TIME, move_doc, st, STORE_SCHEMA_VERSION,
				    "moving event documents", moved, err);
	/* the documents' old copies in events go now, not at some later
	 * compaction: until then the store holds every document twice */
	if (!rc)
		rocksdb_compact_range_cf(st->db, st->cf[STORE_CF_EVENTS], NULL, 0, NULL, 0);
	return rc;
}
