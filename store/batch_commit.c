/* A batch's commit (store_batch_commit, store.h): the touched records
 * looked up, the new events and bundles written, every record's state
 * merged again (in the lanes, batch_lanes.c, if any) and written with its
 * summary, aliases and change log entry, all in one WriteBatch. */
#define _GNU_SOURCE /* qsort_r */
#include "batch_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

/* ---- commit --------------------------------------------------------------- */

/* A put or delete held back until the commit writes its batch. They go
 * into the WriteBatch sorted by column family and key: RocksDB inserts a
 * batch into each memtable's skip list in order and starts every insert
 * from where the previous one ended, so ascending keys cost a short walk
 * instead of a descent from the top through cold memory (the event ids,
 * pith numbers and alias claims are random). */
typedef struct pput {
	const void *vref;          /* the value, if it outlives the commit */
	size_t koff, voff, vlen;   /* key, and value unless vref, in the arena */
	uint32_t seq;              /* order of the put: the later one wins */
	uint8_t cf, klen, del;
} pput_t;

typedef struct commit {
	store_wsink_t sink;        /* the write helpers' way into puts (first member) */
	store_batch_t *b;
	store_t *st;
	rocksdb_writebatch_t *wb;
	store_counts_t counts;     /* what the counters become */
	uint64_t seq;              /* ... and the change log's sequence */
	store_commit_stats_t stats;
	pith_err_t *err;
	pput_t *puts;
	size_t nputs, capputs;
	pith_buf_t arena;          /* keys and copied values of puts */
	pith_buf_t doc;            /* a stored document being compared */
	void **kept;               /* values put by reference, freed at the end */
	size_t nkept, capkept;
} commit_t;

/* Takes p (malloc'd) to be freed when the commit ends. */
static int keep_bytes(commit_t *c, void *p)
{
	if (c->nkept == c->capkept) {
		size_t nc = c->capkept ? c->capkept * 2 : 256;
		void **k = realloc(c->kept, nc * sizeof(*k));
		if (!k)
			return PITH_ENOMEM;
		c->kept = k;
		c->capkept = nc;
	}
	c->kept[c->nkept++] = p;
	return 0;
}

/* Queues a put; vref says the value stays valid until the commit ends
 * (otherwise it is copied). Keys are at most 255 bytes (store/keys.h). */
static int queue_op(commit_t *c, int cf, const void *k, size_t kl, const void *v, size_t vl,
		    int vref, int del)
{
	if (kl > UINT8_MAX)
		return pith_err_set(c->err, PITH_EINVAL, "store: a %zu-byte key (255 at most)", kl);
	if (c->nputs == c->capputs) {
		size_t nc = c->capputs ? c->capputs * 2 : 1024;
		pput_t *p = realloc(c->puts, nc * sizeof(*p));
		if (!p)
			return pith_err_set(c->err, PITH_ENOMEM, "store: out of memory");
		c->puts = p;
		c->capputs = nc;
	}
	pput_t *p = &c->puts[c->nputs];
	p->cf = (uint8_t)cf;
	p->klen = (uint8_t)kl;
	p->koff = c->arena.len;
	p->vlen = vl;
	p->vref = vref ? v : NULL;
	p->del = (uint8_t)del;
	p->seq = (uint32_t)c->nputs;
	if (pith_buf_append(&c->arena, k, kl))
		return pith_err_set(c->err, PITH_ENOMEM, "store: out of memory");
	p->voff = c->arena.len;
	if (!vref && pith_buf_append(&c->arena, v, vl))
		return pith_err_set(c->err, PITH_ENOMEM, "store: out of memory");
	c->nputs++;
	return 0;
}

static int put_ex(commit_t *c, int cf, const void *k, size_t kl, const void *v, size_t vl,
		  int vref)
{
	return queue_op(c, cf, k, kl, v, vl, vref, 0);
}

static int put(commit_t *c, int cf, const void *k, size_t kl, const void *v, size_t vl)
{
	return queue_op(c, cf, k, kl, v, vl, 0, 0);
}

/* The commit's sink (store_wsink_t): the helpers' puts and deletes join
 * the queue; the first failure stays in rc. */
static void sink_put(store_wsink_t *s, int cf, const void *k, size_t kl, const void *v, size_t vl)
{
	int rc = queue_op((commit_t *)s, cf, k, kl, v, vl, 0, 0);
	if (rc && !s->rc)
		s->rc = rc;
}

static void sink_del(store_wsink_t *s, int cf, const void *k, size_t kl)
{
	int rc = queue_op((commit_t *)s, cf, k, kl, "", 0, 0, 1);
	if (rc && !s->rc)
		s->rc = rc;
}

/* store_wsink_wb's: straight into the WriteBatch. */
static void wb_put(store_wsink_t *s, int cf, const void *k, size_t kl, const void *v, size_t vl)
{
	rocksdb_writebatch_put_cf(s->wb, s->st->cf[cf], k, kl, v, vl);
}

static void wb_del(store_wsink_t *s, int cf, const void *k, size_t kl)
{
	rocksdb_writebatch_delete_cf(s->wb, s->st->cf[cf], k, kl);
}

void store_wsink_wb(store_wsink_t *s, rocksdb_writebatch_t *wb, store_t *st)
{
	*s = (store_wsink_t){.put = wb_put, .del = wb_del, .wb = wb, .st = st};
}

static int pput_cmp(const void *a, const void *b, void *arena)
{
	const pput_t *x = a, *y = b;
	const uint8_t *k = arena;
	if (x->cf != y->cf)
		return x->cf < y->cf ? -1 : 1;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int r = memcmp(k + x->koff, k + y->koff, n);
	if (r)
		return r;
	if (x->klen != y->klen)
		return x->klen < y->klen ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Moves the queued puts and deletes into the WriteBatch, sorted. */
static void puts_flush(commit_t *c)
{
	qsort_r(c->puts, c->nputs, sizeof(*c->puts), pput_cmp, c->arena.data);
	for (size_t i = 0; i < c->nputs; i++) {
		const pput_t *p = &c->puts[i];
		const char *k = (const char *)c->arena.data + p->koff;
		if (c->st->side_track)
			store_side_note(c->st, p->cf, k, p->klen);
		if (p->del) {
			rocksdb_writebatch_delete_cf(c->wb, c->st->cf[p->cf], k, p->klen);
			continue;
		}
		const char *v = p->vref ? p->vref : (const char *)c->arena.data + p->voff;
		rocksdb_writebatch_put_cf(c->wb, c->st->cf[p->cf], k, p->klen, v, p->vlen);
	}
}

static int group_of(commit_t *c, const uint8_t skey[STORE_SKEY_LEN], const char *pith)
{
	store_batch_t *b = c->b;
	int gi = hmap_get(&b->subjects, skey);
	if (gi >= 0)
		return gi;
	if (b->ng == b->capg) {
		size_t nc = b->capg ? b->capg * 2 : 64;
		group_t *p = realloc(b->g, nc * sizeof(*p));
		if (!p)
			return pith_err_set(c->err, PITH_ENOMEM, "store: out of memory");
		b->g = p;
		b->capg = nc;
	}
	group_t *g = &b->g[b->ng];
	memset(g, 0, sizeof(*g));
	memcpy(g->skey, skey, STORE_SKEY_LEN);
	memcpy(g->pith, pith, PITH_NUMBER_LEN + 1);
	g->bundle = -1;
	if (hmap_put(&b->subjects, skey, (int)b->ng))
		return pith_err_set(c->err, PITH_ENOMEM, "store: out of memory");
	return (int)b->ng++;
}

static int group_add_new(commit_t *c, int gi, int idx)
{
	group_t *g = &c->b->g[gi];
	if (g->nnew == g->capnew) {
		size_t nc = g->capnew ? g->capnew * 2 : 8;
		int *p = realloc(g->news, nc * sizeof(*p));
		if (!p)
			return pith_err_set(c->err, PITH_ENOMEM, "store: out of memory");
		g->news = p;
		g->capnew = nc;
	}
	g->news[g->nnew++] = idx;
	return 0;
}

static int entry_canon(commit_t *c, entry_t *e)
{
	if (e->canon.len)
		return 0;
	if (pith_event_canon(e->ev, &e->canon))
		return pith_err_set(c->err, PITH_ENOMEM, "store: cannot write %s", e->ev->event_id);
	return 0;
}

/* Whether the store knows the record of each group. Every stored event's
 * record has a summary (they are written in one batch), so the events of
 * a record the store does not know are new without looking them up. A
 * store filled from empty (store_opts_t.fresh_records) knows without a
 * read that a record it has not written since is not there. */
static int groups_lookup(commit_t *c, size_t from)
{
	for (size_t gi = from; gi < c->b->ng; gi++) {
		group_t *g = &c->b->g[gi];
		char *val;
		size_t vl;
		store_rec_t rec;
		if (c->st->fresh_on && !fpset_maybe(&c->st->fresh, g->skey, STORE_SKEY_LEN)) {
			g->exists = 0;
			continue;
		}
		int rc = store_get_raw(c->st, STORE_CF_RECORDS, g->skey, STORE_SKEY_LEN, &val, &vl, c->err);
		if (rc)
			return rc;
		g->exists = val != NULL;
		if (val) {
			if (store_rec_decode((const uint8_t *)val, vl, &rec) ||
			    !(g->old_rec = malloc(vl))) {
				rocksdb_free(val);
				return pith_err_set(c->err, PITH_EIO, "store: summary of %s is malformed "
						    "or out of memory", g->pith);
			}
			memcpy(g->old_rec, val, vl);
			g->old_rec_len = vl;
			g->stored_bundle = rec.has_bundle;
		}
		rocksdb_free(val);
	}
	return 0;
}

/* Step 1: one primary copy per id; copies already stored are duplicates
 * (maybe re-signed); the others are new and grouped by subject. */
static int commit_events(commit_t *c)
{
	store_batch_t *b = c->b;
	int rc;
	for (size_t i = 0; i < b->n; i++) {
		entry_t *e = &b->e[i];
		const uint8_t *id = e->ev->content_hash;
		int p = hmap_get(&b->ids, id);
		if (p >= 0) {
			entry_t *w = &b->e[b->e[p].win];
			e->outcome = STORE_DUPLICATE;
			if (pith_merge_sigblock_cmp(e->ev->signature, w->ev->signature) < 0)
				b->e[p].win = (int)i;
			continue;
		}
		if (hmap_put(&b->ids, id, (int)i))
			return pith_err_set(c->err, PITH_ENOMEM, "store: out of memory");
		e->primary = 1;
		e->win = (int)i;
		uint8_t skey[STORE_SKEY_LEN];
		store_skey_make(e->ev->subject, skey);
		int gi = group_of(c, skey, e->ev->subject);
		if (gi < 0)
			return gi;
		if ((rc = group_add_new(c, gi, (int)i)))
			return rc;
	}
	if ((rc = groups_lookup(c, 0)))
		return rc;
	for (size_t gi = 0; gi < b->ng; gi++) {
		group_t *g = &b->g[gi];
		size_t k = 0;
		for (size_t x = 0; x < g->nnew; x++) {
			entry_t *e = &b->e[g->news[x]];
			int has = g->exists ? store_event_has_at(c->st, e->ev->content_hash,
								  e->ev->created_us, c->err)
					    : 0;
			if (has < 0)
				return has;
			e->outcome = has ? STORE_DUPLICATE : STORE_STORED;
			if (!has)
				g->news[k++] = g->news[x];
		}
		g->nnew = k;
	}
	/* signature blocks: a new event is written with the winning copy's
	 * block; a stored one is rewritten only if a copy here beats it */
	for (size_t i = 0; i < b->n; i++) {
		entry_t *e = &b->e[i];
		if (!e->primary)
			continue;
		entry_t *w = &b->e[e->win];
		uint8_t tk[STORE_TIME_KEY_LEN];
		store_time_key_make(e->ev->created_us, e->ev->content_hash, tk);
		if ((rc = entry_canon(c, w)))
			return rc;
		if (e->outcome == STORE_STORED) {
			if ((rc = put(c, STORE_CF_EVENTS, e->ev->content_hash, STORE_ID_LEN, tk, 8)) ||
			    (rc = put_ex(c, STORE_CF_DOCS, tk, sizeof(tk), w->canon.data, w->canon.len, 1)))
				return rc;
			continue;
		}
		pith_event_t *old = NULL;
		c->doc.len = 0;
		/* by its key in docs: no lookup of the id (which, while the
		 * index of events is aside, would sort its memtable) */
		rc = c->st->schema < 4 ? store_doc_get(c->st, e->ev->content_hash, &c->doc, c->err)
				       : store_get_into(c->st, STORE_CF_DOCS, tk, sizeof(tk), &c->doc,
							c->err);
		if (rc == PITH_ENOTFOUND)
			return pith_err_set(c->err, PITH_EIO, "store: %s vanished", e->ev->event_id);
		if (rc)
			return rc;
		/* the common duplicate is byte-identical: no need to parse it */
		if (c->doc.len == w->canon.len && !memcmp(c->doc.data, w->canon.data, c->doc.len))
			continue;
		if ((rc = pith_event_parse_own(c->doc.data, c->doc.len, e->ev->content_hash, &old,
					       c->err)))
			return rc;
		int better = pith_merge_sigblock_cmp(w->ev->signature, old->signature) < 0;
		pith_event_free(old);
		if (better) {
			if ((rc = put_ex(c, STORE_CF_DOCS, tk, sizeof(tk), w->canon.data, w->canon.len, 1)))
				return rc;
			w->outcome = STORE_RESIGNED;
		}
	}
	return 0;
}

/* Step 2: the newest bundle of each record, against the stored one. */
static int commit_bundles(commit_t *c)
{
	store_batch_t *b = c->b;
	size_t ng0 = b->ng; /* groups made from here on need a lookup */
	for (size_t j = 0; j < b->nb; j++) {
		bentry_t *be = &b->b[j];
		be->outcome = STORE_BUNDLE_OLDER;
		int gi = group_of(c, be->skey, be->pith);
		if (gi < 0)
			return gi;
		group_t *g = &b->g[gi];
		if (g->bundle < 0 || store_bundle_newer(be->built_us, be->sha, b->b[g->bundle].built_us,
							b->b[g->bundle].sha) > 0)
			g->bundle = (int)j;
	}
	int rc = groups_lookup(c, ng0);
	if (rc)
		return rc;
	for (size_t gi = 0; gi < b->ng; gi++) {
		group_t *g = &b->g[gi];
		if (g->bundle < 0)
			continue;
		bentry_t *be = &b->b[g->bundle];
		char *val = NULL;
		size_t vl;
		if (g->stored_bundle &&
		    (rc = store_get_raw(c->st, STORE_CF_BUNDLES, g->skey, STORE_SKEY_LEN, &val, &vl, c->err)))
			return rc;
		if (val) {
			json_doc_t *d = NULL;
			int64_t us;
			char sha[65];
			rc = json_parse(&d, (const uint8_t *)val, vl, NULL, c->err);
			rocksdb_free(val);
			if (!rc)
				rc = store_bundle_ident(json_doc_root(d), &us, sha, c->err);
			json_doc_free(d);
			if (rc)
				return rc;
			int cmp = store_bundle_newer(be->built_us, be->sha, us, sha);
			if (cmp == 0)
				be->outcome = STORE_BUNDLE_SAME;
			if (cmp <= 0)
				continue;
			be->replaced = 1;
			be->old_us = us;
			memcpy(be->old_sha, sha, sizeof(be->old_sha));
		} else {
			c->counts.bundles++;
		}
		pith_buf_t cb = PITH_BUF_INIT;
		if (json_canon_write(be->root, &cb)) {
			pith_buf_release(&cb);
			return pith_err_set(c->err, PITH_ENOMEM, "store: cannot write bundle of %s", g->pith);
		}
		rc = put(c, STORE_CF_BUNDLES, g->skey, STORE_SKEY_LEN, cb.data, cb.len);
		pith_buf_release(&cb);
		if (rc)
			return rc;
		store_bundle_index_write(&c->sink, g->skey, be->built_us, be->sha, be->old_us,
					 be->replaced ? be->old_sha : NULL);
		g->bundle_newer = 1;
		be->outcome = STORE_BUNDLE_NEWER;
	}
	/* a second copy of the batch's kept bundle is that very bundle too */
	for (size_t j = 0; j < b->nb; j++) {
		bentry_t *be = &b->b[j];
		int gi = group_of(c, be->skey, be->pith);
		if (gi < 0)
			return gi;
		const bentry_t *kept = &b->b[b->g[gi].bundle];
		if (kept != be && be->outcome == STORE_BUNDLE_OLDER && kept->outcome != STORE_BUNDLE_OLDER &&
		    !store_bundle_newer(be->built_us, be->sha, kept->built_us, kept->sha))
			be->outcome = STORE_BUNDLE_SAME;
	}
	return 0;
}

/* The record's entry in the change log under the next sequence number,
 * replacing its previous one. The bundle part is the new bundle's, or
 * the previous entry's when the bundle did not change; bdoc (the stored
 * bundle, if loaded) only when that entry lacks it. */
static int log_change(commit_t *c, const group_t *g, int has_bundle, const json_doc_t *bdoc,
		      const uint8_t state_hash[32])
{
	store_chg_bundle_t cb = {0};
	uint64_t old_seq = 0;
	int rc = g->exists ? store_change_get(c->st, g->skey, &old_seq, &cb, c->err) : 0;
	if (rc < 0)
		return rc;
	if (g->bundle_newer) {
		const bentry_t *be = &c->b->b[g->bundle];
		const char *built = json_get_str(be->root, "built_at");
		size_t n = built ? strlen(built) : 0;
		if (!n || n > STORE_BUILT_AT_MAX)
			return pith_err_set(c->err, PITH_EINVAL, "bundle of %s: built_at missing or "
					    "longer than %d bytes", g->pith, STORE_BUILT_AT_MAX);
		cb.has = 1;
		pith_hex_decode(be->sha, 64, cb.sha, 32);
		memcpy(cb.built_at, built, n + 1);
	} else if (!has_bundle) {
		cb.has = 0;
	} else if (!cb.has && (!bdoc || (rc = store_chg_bundle_of(json_doc_root(bdoc), &cb, c->err)))) {
		return rc ? rc : pith_err_set(c->err, PITH_EIO, "store: %s: no bundle to log", g->pith);
	}
	store_change_write(&c->sink, g->skey, ++c->seq, old_seq, state_hash, &cb);
	return c->sink.rc; /* its message set by queue_op (a key too long, out of memory) */
}

/* Step 3a: a touched record's state from all of its events (stored and
 * new), and the aliases it claims, into g. Reads the store, writes
 * nothing shared: lanes run it for different records at once. */
void store_batch_group_merge(store_batch_t *b, group_t *g)
{
	store_t *st = b->st;
	pith_event_t **stored = NULL, **all = NULL;
	size_t nstored = 0;
	const json_value_t *aliases = NULL;
	pith_err_t *err = &g->merr;
	int rc;

	g->merged = 1;
	if (g->exists && (rc = store_subject_load(st, g->skey, &stored, &nstored, err)))
		goto done;
	all = malloc((nstored + g->nnew + 1) * sizeof(*all));
	if (!all) {
		rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
		goto done;
	}
	if (nstored)
		memcpy(all, stored, nstored * sizeof(*all));
	for (size_t k = 0; k < g->nnew; k++)
		all[nstored + k] = b->e[g->news[k]].ev;
	g->nevents = nstored + g->nnew;

	g->has_bundle = g->bundle_newer;
	int64_t built_us = 0;
	if (g->bundle_newer) {
		aliases = json_get_type(b->b[g->bundle].root, "source_aliases", JSON_ARRAY);
		built_us = b->b[g->bundle].built_us;
	} else if (g->stored_bundle) {
		if ((rc = store_bundle_aliases_load(st, g->skey, &g->bdoc, &aliases, &built_us, err)))
			goto done;
		g->has_bundle = g->bdoc != NULL;
	}
	if ((rc = pith_merge_ex(g->pith, all, g->nevents, aliases, st->registry, &g->state, err)))
		goto done;
	if (g->state.canon.oom) {
		rc = pith_err_set(err, PITH_ENOMEM, "store: cannot write the state of %s", g->pith);
		goto done;
	}
	const json_value_t *record = json_get(json_get(g->state.root, "current"), "canonical_record");
	if ((rc = store_claims_make(&g->claims, aliases, built_us, record, g->pith)))
		rc = pith_err_set(err, rc, "store: out of memory");
done:
	g->mrc = rc;
	free(all);
	store_events_free(stored, nstored);
}

/* Whether store_batch_group_merge has work in g: not for a record that
 * only got an older bundle (nothing changes). */
int store_batch_group_needs_merge(const group_t *g)
{
	return g->nnew || g->bundle_newer;
}

/* Step 3b: the writer's part for a record store_batch_group_merge did:
 * its state, summary, aliases, change log entry and index entries into
 * the batch. */
static int commit_group(commit_t *c, group_t *g, pith_buf_t *sb)
{
	store_batch_t *b = c->b;
	int rc;

	if (!store_batch_group_needs_merge(g))
		return 0;
	if (!g->merged)
		store_batch_group_merge(b, g);
	if (g->mrc) {
		*c->err = g->merr;
		rc = g->mrc;
		goto done;
	}
	/* the merge's own canonical bytes, kept until the commit ends (no
	 * copies of a state that can be hundreds of kilobytes) */
	if ((rc = keep_bytes(c, g->state.canon.data))) {
		rc = pith_err_set(c->err, PITH_ENOMEM, "store: cannot write the state of %s", g->pith);
		goto done;
	}
	const pith_buf_t canon = g->state.canon;
	g->state.canon = (pith_buf_t)PITH_BUF_INIT;
	if ((rc = put_ex(c, STORE_CF_STATES, g->skey, STORE_SKEY_LEN, canon.data, canon.len, 1)))
		goto done;

	if (!g->exists)
		c->counts.records++;
	if ((rc = store_rec_encode(sb, g->nevents, g->state.state_hash, g->has_bundle, &g->claims))) {
		rc = pith_err_set(c->err, rc, "store: out of memory");
		goto done;
	}
	if ((rc = put(c, STORE_CF_RECORDS, g->skey, STORE_SKEY_LEN, sb->data, sb->len)))
		goto done;
	if (g->old_rec) {
		store_rec_t old;
		store_rec_decode(g->old_rec, g->old_rec_len, &old); /* checked when read */
		store_claims_write(&c->sink, g->pith, &old, &g->claims, !g->bundle_newer);
	} else {
		store_claims_write(&c->sink, g->pith, NULL, &g->claims, 0);
	}

	if ((rc = log_change(c, g, g->has_bundle, g->bdoc, g->state.state_hash)))
		goto done;

	for (size_t k = 0; k < g->nnew; k++) {
		const pith_event_t *ev = b->e[g->news[k]].ev;
		uint8_t sk[STORE_SUBJ_KEY_LEN], tk[STORE_TIME_KEY_LEN];
		store_subj_key_make(g->skey, ev->created_at, ev->content_hash, sk);
		store_time_key_make(ev->created_us, ev->content_hash, tk);
		if ((rc = put(c, STORE_CF_SUBJ, sk, sizeof(sk), "", 0)) ||
		    (rc = put(c, STORE_CF_TIME, tk, sizeof(tk), "", 0)))
			goto done;
	}
	c->counts.events += g->nnew;
	c->stats.records_touched++;
done:
	/* its state may be large: held no longer than its turn */
	store_batch_group_merge_release(g);
	return rc;
}

/* Step 3 for every touched record: merged in windows (in the lanes, if
 * any), each window then written in order by the writer. */
static int commit_groups(commit_t *c)
{
	store_batch_t *b = c->b;
	pith_buf_t sb = PITH_BUF_INIT;
	int rc = 0;
	for (size_t w = 0; w < b->ng && !rc; w += LANES_WINDOW) {
		size_t end = w + LANES_WINDOW < b->ng ? w + LANES_WINDOW : b->ng;
		if (b->lanes)
			store_batch_lanes_run(b, w, end);
		for (size_t gi = w; gi < end && !rc; gi++)
			rc = commit_group(c, &b->g[gi], &sb);
	}
	pith_buf_release(&sb);
	return rc;
}

/* A commit's buffers bigger than this are freed, not kept for the next */
#define BATCH_KEEP_BYTES (64u << 20)

/* Gives the commit's WriteBatch, puts and arena back to b, emptied. */
static void commit_keep(store_batch_t *b, commit_t *c)
{
	size_t wbytes = 0;
	rocksdb_writebatch_data(c->wb, &wbytes);
	if (wbytes > BATCH_KEEP_BYTES) {
		rocksdb_writebatch_destroy(c->wb);
	} else {
		rocksdb_writebatch_clear(c->wb);
		b->wb = c->wb;
	}
	if (c->capputs * sizeof(*c->puts) > BATCH_KEEP_BYTES) {
		free(c->puts);
	} else {
		b->puts = c->puts;
		b->capputs = c->capputs;
	}
	if (c->arena.cap > BATCH_KEEP_BYTES || c->arena.oom) {
		pith_buf_release(&c->arena);
	} else {
		b->arena = c->arena;
		b->arena.len = 0;
	}
}

static int put_count(commit_t *c, const char *key, uint64_t v)
{
	uint8_t be[8];
	store_be64_put(be, v);
	return put(c, STORE_CF_META, key, strlen(key), be, 8);
}

/* Turns store_opts_t.fresh_records off for good. Under wmu. */
static void fresh_off(store_t *st)
{
	__atomic_store_n(&st->fresh_on, 0, __ATOMIC_RELAXED);
	fpset_release(&st->fresh);
}

/* After a commit: every record it touched goes into the fresh set (a
 * superset of the records written: a group may have written none). If
 * the set cannot grow, commits read `records` again from now on. Under
 * wmu. */
static void fresh_note(store_t *st, const store_batch_t *b)
{
	for (size_t gi = 0; st->fresh_on && gi < b->ng; gi++)
		if (fpset_add(&st->fresh, b->g[gi].skey, STORE_SKEY_LEN))
			fresh_off(st);
}

int store_batch_commit(store_batch_t *b, store_commit_stats_t *stats, pith_err_t *err)
{
	store_t *st = b->st;
	commit_t c = {.sink = {.put = sink_put, .del = sink_del, .st = st}, .b = b, .st = st, .err = err};
	int rc = 0, durable = b->need_durable;
	b->need_durable = 0;
	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (b->committed || (b->n == 0 && b->nb == 0)) {
		store_batch_restart_if_committed(b);
		b->committed = 1;
		return 0;
	}
	if (st->read_only) {
		rc = pith_err_set(err, PITH_EINVAL, "store: opened read-only");
		goto out;
	}
	store_perf_off();
	pthread_mutex_lock(&st->wmu);
	if (st->fresh_on && __atomic_load_n(&st->fresh_stop, __ATOMIC_ACQUIRE))
		fresh_off(st); /* store_bulk_end */
	if (__atomic_load_n(&st->side_want, __ATOMIC_RELAXED))
		store_side_begin_locked(st);
	c.counts = st->counts;
	c.seq = st->changes_seq;
	c.wb = b->wb ? b->wb : rocksdb_writebatch_create();
	c.puts = b->puts, c.capputs = b->capputs, c.arena = b->arena;
	b->wb = NULL, b->puts = NULL, b->capputs = 0, b->arena = (pith_buf_t)PITH_BUF_INIT;
	store_batch_groups_reset(b);
	if (!(rc = commit_events(&c)) && !(rc = commit_bundles(&c)))
		rc = commit_groups(&c);
	if (!rc)
		rc = c.sink.rc; /* err says why (queue_op) */
	if (!rc && !(rc = put_count(&c, STORE_META_EVENTS, c.counts.events)) &&
	    !(rc = put_count(&c, STORE_META_RECORDS, c.counts.records)) &&
	    !(rc = put_count(&c, STORE_META_BUNDLES, c.counts.bundles))) {
		puts_flush(&c);
		/* while the store is unlogged, a commit someone is told about
		 * goes through the log, after a flush of the commits before it:
		 * replayed alone after a crash, it would stand on records whose
		 * earlier events were lost */
		durable = durable && st->unlogged;
		if (durable && st->nolog_dirty)
			rc = store_flush_locked(st, err);
		char *e = NULL;
		if (!rc)
			rocksdb_write(st->db, durable ? st->wo_log : st->wo, c.wb, &e);
		if (e) {
			rc = store_op_error(st, STORE_OP_WRITE, err, e, "write");
		} else if (!rc) {
			store_counts_set(st, &c.counts);
			fresh_note(st, b);
			c.stats.counts = c.counts;
			__atomic_store_n(&st->changes_seq, c.seq, __ATOMIC_RELEASE);
			if (durable)
				__atomic_store_n(&st->changes_durable, c.seq, __ATOMIC_RELEASE);
			else if (st->unlogged)
				st->nolog_dirty = 1;
			store_write_ok(st);
		}
	}
	pthread_mutex_unlock(&st->wmu);
	commit_keep(b, &c);
	pith_buf_release(&c.doc);
	for (size_t i = 0; i < c.nkept; i++)
		free(c.kept[i]);
	free(c.kept);
out:
	for (size_t i = 0; i < b->n; i++) {
		store_outcome_t o = b->e[i].outcome;
		if (rc)
			b->e[i].outcome = STORE_PENDING;
		else if (o == STORE_STORED)
			c.stats.stored++;
		else if (o == STORE_RESIGNED)
			c.stats.resigned++;
		else
			c.stats.duplicate++;
	}
	for (size_t j = 0; j < b->nb; j++) {
		if (rc)
			b->b[j].outcome = STORE_BUNDLE_PENDING;
		else if (b->b[j].outcome == STORE_BUNDLE_NEWER)
			c.stats.bundles_newer++;
		else
			c.stats.bundles_older++;
	}
	store_batch_drop_items(b);
	store_batch_groups_reset(b);
	b->committed = 1;
	if (rc) {
		b->n = 0;
		b->nb = 0;
	}
	if (stats && !rc)
		*stats = c.stats;
	return rc;
}

