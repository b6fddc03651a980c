/* Event documents in time order (keys.h, docs): found by id through the
 * events family, whose value is the event's created_us; moved there from
 * the events family when a schema-3 store is opened read-write. */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_doc_get(store_t *st, const uint8_t id[STORE_ID_LEN], pith_buf_t *out, pith_err_t *err)
{
	size_t at = out->len;
	uint8_t tk[STORE_TIME_KEY_LEN];
	int rc = store_get_into(st, STORE_CF_EVENTS, id, STORE_ID_LEN, out, err);
	if (rc || !st->cf[STORE_CF_DOCS] || !store_doc_key(out->data + at, out->len - at, id, tk))
		return rc; /* missing, or the document itself (schemas 2 and 3) */
	out->len = at;
	rc = store_get_into(st, STORE_CF_DOCS, tk, sizeof(tk), out, err);
	if (rc == PITH_ENOTFOUND) {
		char hex[65];
		pith_hex_encode(id, STORE_ID_LEN, hex);
		rc = pith_err_set(err, PITH_EIO, "store: event sha256:%s is indexed without its document",
				  hex);
	}
	return rc;
}

#define UPGRADE_CHUNK 4096 /* items per WriteBatch while upgrading */

static int write_chunk(store_t *st, rocksdb_writebatch_t *wb, const char *what, pith_err_t *err)
{
	char *e = NULL;
	rocksdb_write(st->db, st->wo, wb, &e);
	rocksdb_writebatch_clear(wb);
	return e ? store_op_error(st, STORE_OP_WRITE, err, e, what) : 0;
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
	uint8_t tk[STORE_TIME_KEY_LEN];
	int moved = val && !store_doc_key(val, len, k + 8, tk);
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
	int rc = store_upgrade_walk(st, STORE_CF_TIME, move_doc, st, STORE_SCHEMA_4,
				    "moving event documents", moved, err);
	/* the documents' old copies in events go now, not at some later
	 * compaction: until then the store holds every document twice */
	if (!rc)
		rocksdb_compact_range_cf(st->db, st->cf[STORE_CF_EVENTS], NULL, 0, NULL, 0);
	return rc;
}
