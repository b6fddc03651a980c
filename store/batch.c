/* Ingest: batches of verified events and bundles, each committed as one
 * atomic RocksDB WriteBatch (synced, unless the store is unlogged)
 * together with the recomputed state of every record it touches. Here: a
 * batch built (items added, outcomes read) and one item put; the commit
 * is in batch_commit.c, its merge lanes in batch_lanes.c. */
#include "batch_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

store_batch_t *store_batch_new(store_t *st)
{
	store_batch_t *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->st = st;
	hmap_init(&b->ids, STORE_ID_LEN);
	hmap_init(&b->subjects, STORE_SKEY_LEN);
	return b;
}

/* Frees every event and bundle still held; keeps outcomes. */
void store_batch_drop_items(store_batch_t *b)
{
	for (size_t i = 0; i < b->n; i++) {
		pith_event_free(b->e[i].ev);
		pith_buf_release(&b->e[i].canon);
	}
	for (size_t i = 0; i < b->nb; i++) {
		json_doc_free(b->b[i].doc);
		b->b[i].root = NULL;
	}
}

void store_batch_group_merge_release(group_t *g)
{
	pith_state_release(&g->state);
	store_claims_release(&g->claims);
	json_doc_free(g->bdoc);
	g->merged = 0;
}

void store_batch_groups_reset(store_batch_t *b)
{
	for (size_t i = 0; i < b->ng; i++) {
		free(b->g[i].news);
		free(b->g[i].old_rec);
		store_batch_group_merge_release(&b->g[i]);
	}
	b->ng = 0;
	hmap_clear(&b->ids);
	hmap_clear(&b->subjects);
}

void store_batch_free_(store_batch_t *b)
{
	if (!b)
		return;
	store_batch_lanes_stop(b);
	store_batch_drop_items(b);
	store_batch_groups_reset(b);
	free(b->e);
	free(b->b);
	free(b->g);
	hmap_release(&b->ids);
	hmap_release(&b->subjects);
	if (b->wb)
		rocksdb_writebatch_destroy(b->wb);
	free(b->puts);
	pith_buf_release(&b->arena);
	free(b);
}

void store_batch_restart_if_committed(store_batch_t *b)
{
	if (b->committed) {
		b->n = 0;
		b->nb = 0;
		b->committed = 0;
	}
}

void store_batch_need_durable(store_batch_t *b)
{
	b->need_durable = 1;
}

size_t store_batch_count(const store_batch_t *b)
{
	return b->committed ? 0 : b->n;
}

store_outcome_t store_batch_outcome(const store_batch_t *b, int index)
{
	return index >= 0 && (size_t)index < b->n ? b->e[index].outcome : STORE_PENDING;
}

store_bundle_outcome_t store_batch_bundle_outcome(const store_batch_t *b, int index)
{
	return index >= 0 && (size_t)index < b->nb ? b->b[index].outcome : STORE_BUNDLE_PENDING;
}

int store_batch_bundle_replaced(const store_batch_t *b, int index, int64_t *built_us,
				uint8_t sha[static 32])
{
	if (store_batch_bundle_outcome(b, index) != STORE_BUNDLE_NEWER || !b->b[index].replaced)
		return 0;
	*built_us = b->b[index].old_us;
	return pith_hex_decode(b->b[index].old_sha, 64, sha, 32) ? 0 : 1;
}

static int push_entry(store_batch_t *b, pith_event_t *ev, pith_buf_t *canon, pith_err_t *err)
{
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 256;
		entry_t *p = realloc(b->e, nc * sizeof(*p));
		if (!p) {
			pith_event_free(ev);
			return pith_err_set(err, PITH_ENOMEM, "store: out of memory");
		}
		b->e = p;
		b->cap = nc;
	}
	entry_t *e = &b->e[b->n];
	memset(e, 0, sizeof(*e));
	e->ev = ev;
	if (canon) {
		e->canon = *canon;
		memset(canon, 0, sizeof(*canon));
	}
	return (int)b->n++;
}

int store_batch_add_event(store_batch_t *b, pith_event_t *ev, pith_buf_t *canon, pith_err_t *err)
{
	store_batch_restart_if_committed(b);
	if (b->n >= (size_t)INT32_MAX) {
		pith_event_free(ev);
		return pith_err_set(err, PITH_ETOOBIG, "store: batch too large");
	}
	return push_entry(b, ev, canon, err);
}

/* Adds a bundle whose tree belongs to doc (owned) or to the caller
 * (doc NULL). Its events borrow the tree. */
static int add_bundle(store_batch_t *b, json_doc_t *doc, const json_value_t *root,
		      pith_err_t *err)
{
	store_batch_restart_if_committed(b);
	size_t n0 = b->n;
	int rc;
	const char *pith = json_get_str(root, "pith_number");
	const json_value_t *events = json_get_type(root, "events", JSON_ARRAY);
	if (!pith || !pith_number_is_valid(pith)) {
		rc = pith_err_set(err, PITH_EINVAL, "bundle: pith_number missing or malformed");
		goto fail;
	}
	if (!events) {
		rc = pith_err_set(err, PITH_EINVAL, "bundle: events missing or not an array");
		goto fail;
	}
	if (b->nb == b->capb) {
		size_t nc = b->capb ? b->capb * 2 : 16;
		bentry_t *p = realloc(b->b, nc * sizeof(*p));
		if (!p) {
			rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
			goto fail;
		}
		b->b = p;
		b->capb = nc;
	}
	bentry_t *be = &b->b[b->nb];
	memset(be, 0, sizeof(*be));
	if ((rc = store_bundle_ident(root, &be->built_us, be->sha, err)))
		goto fail;
	for (size_t i = 0; i < events->len; i++) {
		pith_event_t *ev;
		/* verified with the bundle; this only re-derives ids and fields */
		if ((rc = pith_event_verify_value(events->u.items[i], NULL, &ev, NULL, err))) {
			char m[sizeof(err->msg)];
			snprintf(m, sizeof(m), "%s", err ? err->msg : "");
			rc = pith_err_set(err, rc, "bundle: events[%zu]: %s", i, m);
			goto fail;
		}
		if ((rc = push_entry(b, ev, NULL, err)) < 0)
			goto fail;
	}
	be->doc = doc;
	be->root = root;
	memcpy(be->pith, pith, PITH_NUMBER_LEN + 1);
	store_skey_make(pith, be->skey);
	return (int)b->nb++;
fail:
	while (b->n > n0) {
		b->n--;
		pith_event_free(b->e[b->n].ev);
		pith_buf_release(&b->e[b->n].canon);
	}
	json_doc_free(doc);
	return rc;
}

int store_batch_add_bundle(store_batch_t *b, json_doc_t *doc, pith_err_t *err)
{
	return add_bundle(b, doc, json_doc_root(doc), err);
}

/* ---- one item ------------------------------------------------------------ */

int store_event_put(store_t *st, const pith_event_t *ev, store_outcome_t *out, pith_err_t *err)
{
	/* a private parsed copy, so the batch can own it */
	pith_buf_t canon = PITH_BUF_INIT;
	pith_event_t *copy = NULL;
	int rc;
	if (out)
		*out = STORE_PENDING;
	if (pith_event_canon(ev, &canon)) {
		pith_buf_release(&canon);
		return pith_err_set(err, PITH_ENOMEM, "store: out of memory");
	}
	if ((rc = pith_event_parse_own(canon.data, canon.len, ev->content_hash, &copy, err))) {
		pith_buf_release(&canon);
		return rc;
	}
	store_batch_t *b = store_batch_new(st);
	if (!b) {
		pith_event_free(copy);
		pith_buf_release(&canon);
		return pith_err_set(err, PITH_ENOMEM, "store: out of memory");
	}
	int idx = store_batch_add_event(b, copy, &canon, err);
	pith_buf_release(&canon);
	if (idx >= 0 && !(rc = store_batch_commit(b, NULL, err)) && out)
		*out = store_batch_outcome(b, idx);
	if (idx < 0)
		rc = idx;
	store_batch_free(b);
	return rc;
}

int store_bundle_put(store_t *st, const json_value_t *bundle, store_bundle_outcome_t *out,
		     store_commit_stats_t *stats, pith_err_t *err)
{
	store_batch_t *b = store_batch_new(st);
	int rc;
	if (out)
		*out = STORE_BUNDLE_PENDING;
	if (!b)
		return pith_err_set(err, PITH_ENOMEM, "store: out of memory");
	int idx = add_bundle(b, NULL, bundle, err);
	if (idx < 0)
		rc = idx;
	else if (!(rc = store_batch_commit(b, stats, err)) && out)
		*out = store_batch_bundle_outcome(b, idx);
	store_batch_free(b);
	return rc;
}
