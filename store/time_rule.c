/* The timestamp rule in the store (docs/merge.md, T-*; issue 16, item 7).
 *
 * Builds before schema 6 read created_at, signed_at and built_at leniently
 * (any year, a day up to 31, a second up to 60), so a store may hold
 * events and bundles that a node starting afresh refuses: years such as
 * 0000 or 9999, which reconciliation cannot carry, 2025-02-29, 23:59:60.
 * Their records then differ between nodes for good. Opening such a store
 * read-write (schema 5) removes them and recomputes their records, as if
 * they had never been stored; store_check reports any that is left. */
#include "store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "merge.h"

/* ---- the predicates ------------------------------------------------------- */

static int time_valid(const json_value_t *v, pith_time_form_t form)
{
	int64_t us;
	return json_is(v, JSON_STRING) && strlen(v->u.str) == v->len &&
	       !pith_time_parse_valid(v->u.str, form, &us);
}

const char *store_event_time_fault(const json_value_t *ev)
{
	if (!time_valid(json_get(ev, "created_at"), PITH_TIME_SECONDS))
		return "created_at";
	if (!time_valid(json_get(json_get(ev, "signature"), "signed_at"), PITH_TIME_FRACTION))
		return "signature.signed_at";
	return NULL;
}

int store_bundle_time_fault(const json_value_t *b, char *what, size_t whatlen)
{
	const json_value_t *sa = json_get(json_get(b, "bundle_signature"), "signed_at");
	const json_value_t *evs = json_get_type(b, "events", JSON_ARRAY);
	if (!time_valid(json_get(b, "built_at"), PITH_TIME_FRACTION)) {
		snprintf(what, whatlen, "built_at");
		return 1;
	}
	if (json_is(sa, JSON_STRING) && !time_valid(sa, PITH_TIME_FRACTION)) {
		snprintf(what, whatlen, "bundle_signature.signed_at");
		return 1;
	}
	for (size_t i = 0; evs && i < evs->len; i++) {
		const char *f = store_event_time_fault(evs->u.items[i]);
		if (f) {
			snprintf(what, whatlen, "events[%zu].%s", i, f);
			return 1;
		}
	}
	return 0;
}

/* ---- finding what breaks the rule ---------------------------------------- */

typedef struct bad_event {
	uint8_t tk[STORE_TIME_KEY_LEN]; /* created_us + id: its docs and time key */
	uint8_t skey[STORE_SKEY_LEN];
	char created_at[STORE_CREATED_LEN + 1];
} bad_event_t;

typedef struct bad_record {
	uint8_t skey[STORE_SKEY_LEN];
	int bundle_bad;            /* its stored bundle breaks the rule */
	int64_t bundle_us;         /* ... its built_at, */
	char bundle_sha[65];       /* ... and hash: its bundle_index entries */
} bad_record_t;

typedef struct purge {
	store_t *st;
	pith_err_t *err;
	bad_event_t *ev;
	size_t nev, capev;
	bad_record_t *rec;
	size_t nrec, caprec;
	hmap_t ids;                /* bad event id -> index into ev */
	hmap_t skeys;              /* SKEY -> index into rec */
	size_t next_ev;            /* ev sorted by SKEY: the first not yet deleted */
	uint64_t said[2];          /* items of each kind found (events, bundles): the
				    * first STORE_TIME_RULE_SAY of each are told */
	store_time_rule_stats_t stats;
} purge_t;

static void say(purge_t *p, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(purge_t *p, int kind, const char *fmt, ...)
{
	char line[400];
	va_list ap;
	if (!p->st->notice || p->said[kind]++ >= STORE_TIME_RULE_SAY)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	p->st->notice(p->st->notice_arg, line);
}

static bad_record_t *record_of(purge_t *p, const uint8_t skey[STORE_SKEY_LEN])
{
	int i = hmap_get(&p->skeys, skey);
	if (i >= 0)
		return &p->rec[i];
	if (p->nrec == p->caprec) {
		size_t nc = p->caprec ? p->caprec * 2 : 16;
		bad_record_t *r = realloc(p->rec, nc * sizeof(*r));
		if (!r)
			return NULL;
		p->rec = r;
		p->caprec = nc;
	}
	if (hmap_put(&p->skeys, skey, (int)p->nrec))
		return NULL;
	bad_record_t *r = &p->rec[p->nrec++];
	memset(r, 0, sizeof(*r));
	memcpy(r->skey, skey, STORE_SKEY_LEN);
	return r;
}

/* One document of docs (key: its time key). */
static int scan_doc(purge_t *p, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	json_doc_t *d = NULL;
	pith_err_t e = {0};
	char hex[65];
	if (kl != STORE_TIME_KEY_LEN)
		return pith_err_set(p->err, PITH_EIO, "store: docs key of %zu bytes", kl);
	pith_hex_encode(k + 8, STORE_ID_LEN, hex);
	if (json_parse(&d, v, vl, NULL, &e))
		return pith_err_set(p->err, PITH_EIO, "store: event sha256:%s does not parse: %s", hex,
				    e.msg);
	const json_value_t *root = json_doc_root(d);
	const char *fault = store_event_time_fault(root);
	const char *subj = json_get_str(root, "subject_pith_number");
	const char *created = json_get_str(root, "created_at");
	int rc = 0;
	if (!fault)
		goto done;
	if (!subj || !pith_number_is_valid(subj) || !created || strlen(created) != STORE_CREATED_LEN) {
		rc = pith_err_set(p->err, PITH_EIO, "store: event sha256:%s: no subject or created_at",
				  hex);
		goto done;
	}
	const char *val = !strcmp(fault, "created_at") ? created
			  : json_get_str(json_get(root, "signature"), "signed_at");
	say(p, 0, "store %s: removing event sha256:%s of %s: %s '%.40s' is outside the timestamp "
	    "rule", p->st->dir, hex, subj, fault, val ? val : "(missing)");
	if (p->nev == p->capev) {
		size_t nc = p->capev ? p->capev * 2 : 64;
		bad_event_t *b = realloc(p->ev, nc * sizeof(*b));
		if (!b) {
			rc = pith_err_set(p->err, PITH_ENOMEM, "store: out of memory");
			goto done;
		}
		p->ev = b;
		p->capev = nc;
	}
	bad_event_t *b = &p->ev[p->nev];
	memcpy(b->tk, k, STORE_TIME_KEY_LEN);
	store_skey_make(subj, b->skey);
	memcpy(b->created_at, created, STORE_CREATED_LEN + 1);
	if (hmap_put(&p->ids, k + 8, (int)p->nev) || !record_of(p, b->skey))
		rc = pith_err_set(p->err, PITH_ENOMEM, "store: out of memory");
	p->nev++;
done:
	json_doc_free(d);
	return rc;
}

/* One record's bundle (key: SKEY). */
static int scan_bundle(purge_t *p, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	json_doc_t *d = NULL;
	pith_err_t e = {0};
	char what[64], pith[PITH_NUMBER_LEN + 1];
	if (kl != STORE_SKEY_LEN)
		return pith_err_set(p->err, PITH_EIO, "store: bundles key of %zu bytes", kl);
	store_skey_pith(k, pith);
	int rc = json_parse(&d, v, vl, NULL, &e);
	if (!rc && store_bundle_time_fault(json_doc_root(d), what, sizeof(what))) {
		bad_record_t *r = record_of(p, k);
		if (!r) {
			rc = pith_err_set(p->err, PITH_ENOMEM, "store: out of memory");
		} else if (!(rc = store_bundle_ident(json_doc_root(d), &r->bundle_us, r->bundle_sha,
						     &e))) {
			r->bundle_bad = 1;
			say(p, 1, "store %s: removing the bundle of %s: %s is outside the timestamp rule",
			    p->st->dir, pith, what);
		}
	}
	json_doc_free(d);
	if (rc && rc != PITH_ENOMEM)
		return pith_err_set(p->err, PITH_EIO, "store: stored bundle of %s: %s", pith, e.msg);
	return rc;
}

static int scan(purge_t *p, int cf)
{
	store_iter_t it;
	int rc = store_iter_open(p->st, cf, NULL, 0, NULL, 0, &it, p->err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it) && !rc; store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		rc = cf == STORE_CF_DOCS ? scan_doc(p, k, kl, v, vl) : scan_bundle(p, k, kl, v, vl);
	}
	if (!rc)
		rc = store_iter_status(&it, p->err);
	store_iter_close(&it);
	return rc;
}

/* ---- rewriting a record ---------------------------------------------------- */

static int by_skey(const void *a, const void *b)
{
	return memcmp(a, b, STORE_SKEY_LEN);
}

static int ev_by_skey(const void *a, const void *b)
{
	return memcmp(((const bad_event_t *)a)->skey, ((const bad_event_t *)b)->skey,
		      STORE_SKEY_LEN);
}

/* Adds to wb the deletes of the bad events of r's record: the next run of
 * ev (both ev and rec are in SKEY order by then). */
static void delete_events(purge_t *p, rocksdb_writebatch_t *wb, const bad_record_t *r,
			  uint64_t *n)
{
	store_t *st = p->st;
	for (; p->next_ev < p->nev && !memcmp(p->ev[p->next_ev].skey, r->skey, STORE_SKEY_LEN);
	     p->next_ev++) {
		const bad_event_t *b = &p->ev[p->next_ev];
		uint8_t sk[STORE_SUBJ_KEY_LEN];
		store_subj_key_make(b->skey, b->created_at, b->tk + 8, sk);
		rocksdb_writebatch_delete_cf(wb, st->cf[STORE_CF_EVENTS], (const char *)b->tk + 8,
					     STORE_ID_LEN);
		rocksdb_writebatch_delete_cf(wb, st->cf[STORE_CF_DOCS], (const char *)b->tk,
					     STORE_TIME_KEY_LEN);
		rocksdb_writebatch_delete_cf(wb, st->cf[STORE_CF_TIME], (const char *)b->tk,
					     STORE_TIME_KEY_LEN);
		rocksdb_writebatch_delete_cf(wb, st->cf[STORE_CF_SUBJ], (const char *)sk, sizeof(sk));
		(*n)++;
	}
}

/* Everything of one record in wb, as a commit would write it: its bad
 * events and bundle deleted, its state, summary, claims and change log
 * entry from what is left, or all of it deleted when nothing is left.
 * counts and *seq follow. */
static int fix_record(purge_t *p, rocksdb_writebatch_t *wb, const bad_record_t *r,
		      store_counts_t *counts, uint64_t *seq)
{
	store_t *st = p->st;
	char pith[PITH_NUMBER_LEN + 1];
	char *rv = NULL;
	size_t rvl = 0, nstored = 0, nkept = 0;
	pith_event_t **evs = NULL;
	json_doc_t *bdoc = NULL;
	const json_value_t *aliases = NULL;
	int64_t built_us = 0;
	pith_state_t state = {0};
	store_claims_t claims = {0};
	pith_buf_t sb = PITH_BUF_INIT;
	store_rec_t old;
	store_chg_bundle_t cb = {0};
	uint64_t old_seq = 0, removed = 0;
	store_wsink_t ws;
	store_wsink_wb(&ws, wb, st);
	store_skey_pith(r->skey, pith);
	int rc = store_get_raw(st, STORE_CF_RECORDS, r->skey, STORE_SKEY_LEN, &rv, &rvl, p->err);
	if (rc)
		goto done;
	if (rv && store_rec_decode((const uint8_t *)rv, rvl, &old)) {
		rc = pith_err_set(p->err, PITH_EIO, "store: summary of %s is malformed", pith);
		goto done;
	}
	if ((rc = store_subject_load(st, r->skey, &evs, &nstored, p->err)))
		goto done;
	/* the events that stay, in place; the others are freed */
	for (size_t i = 0; i < nstored; i++) {
		if (hmap_get(&p->ids, evs[i]->content_hash) < 0)
			evs[nkept++] = evs[i];
		else
			pith_event_free(evs[i]);
	}
	delete_events(p, wb, r, &removed);
	int has_bundle = rv && old.has_bundle && !r->bundle_bad;
	if (r->bundle_bad) {
		rocksdb_writebatch_delete_cf(wb, st->cf[STORE_CF_BUNDLES], (const char *)r->skey,
					     STORE_SKEY_LEN);
		store_bundle_index_write(&ws, r->skey, 0, NULL, r->bundle_us, r->bundle_sha);
		counts->bundles--;
		p->stats.bundles++;
	} else if (has_bundle) {
		if ((rc = store_bundle_aliases_load(st, r->skey, &bdoc, &aliases, &built_us, p->err)))
			goto done;
		has_bundle = bdoc != NULL;
		if (bdoc && (rc = store_chg_bundle_of(json_doc_root(bdoc), &cb, p->err)))
			goto done;
	}
	counts->events -= removed;
	p->stats.events += removed;
	p->stats.records++;
	if (rv && (rc = store_change_get(st, r->skey, &old_seq, &(store_chg_bundle_t){0}, p->err)) < 0)
		goto done;
	rc = 0;
	if (!nkept && !has_bundle) {
		/* nothing left: the record goes, as if it had never been stored */
		rocksdb_writebatch_delete_cf(wb, st->cf[STORE_CF_STATES], (const char *)r->skey,
					     STORE_SKEY_LEN);
		rocksdb_writebatch_delete_cf(wb, st->cf[STORE_CF_RECORDS], (const char *)r->skey,
					     STORE_SKEY_LEN);
		if (rv)
			store_claims_write(&ws, pith, &old, &claims, 0);
		store_change_delete(&ws, r->skey, old_seq);
		counts->records -= rv != NULL;
		p->stats.records_gone++;
		goto done;
	}
	if ((rc = pith_merge_ex(pith, evs, nkept, aliases, st->registry, &state, p->err)))
		goto done;
	const json_value_t *record = json_get(json_get(state.root, "current"), "canonical_record");
	if (state.canon.oom || store_claims_make(&claims, aliases, built_us, record, pith) ||
	    store_rec_encode(&sb, nkept, state.state_hash, has_bundle, &claims)) {
		rc = pith_err_set(p->err, PITH_ENOMEM, "store: out of memory");
		goto done;
	}
	rocksdb_writebatch_put_cf(wb, st->cf[STORE_CF_STATES], (const char *)r->skey, STORE_SKEY_LEN,
				  (const char *)state.canon.data, state.canon.len);
	rocksdb_writebatch_put_cf(wb, st->cf[STORE_CF_RECORDS], (const char *)r->skey, STORE_SKEY_LEN,
				  (const char *)sb.data, sb.len);
	store_claims_write(&ws, pith, rv ? &old : NULL, &claims, !r->bundle_bad);
	store_change_write(&ws, r->skey, ++*seq, old_seq, state.state_hash, &cb);
	counts->records += rv == NULL;
done:
	pith_buf_release(&sb);
	store_claims_release(&claims);
	pith_state_release(&state);
	json_doc_free(bdoc);
	store_events_free(evs, nkept);
	rocksdb_free(rv);
	return rc;
}

static void put_count(rocksdb_writebatch_t *wb, store_t *st, const char *key, uint64_t v)
{
	uint8_t be[8];
	store_be64_put(be, v);
	rocksdb_writebatch_put_cf(wb, st->cf[STORE_CF_META], key, strlen(key), (const char *)be, 8);
}

/* Writes wb with the counters (and the schema version, if last). */
static int write_chunk(purge_t *p, rocksdb_writebatch_t *wb, const store_counts_t *c, int last)
{
	store_t *st = p->st;
	char *e = NULL;
	put_count(wb, st, STORE_META_EVENTS, c->events);
	put_count(wb, st, STORE_META_RECORDS, c->records);
	put_count(wb, st, STORE_META_BUNDLES, c->bundles);
	if (last)
		rocksdb_writebatch_put_cf(wb, st->cf[STORE_CF_META], STORE_META_SCHEMA,
					  strlen(STORE_META_SCHEMA), STORE_SCHEMA_VERSION,
					  strlen(STORE_SCHEMA_VERSION));
	rocksdb_write(st->db, st->wo, wb, &e);
	rocksdb_writebatch_clear(wb);
	return e ? store_op_error(st, STORE_OP_WRITE, p->err, e, "removing items outside the "
				  "timestamp rule") : 0;
}

#define RECORDS_PER_CHUNK 256

int store_time_rule_upgrade(store_t *st, store_time_rule_stats_t *out, pith_err_t *err)
{
	purge_t p = {.st = st, .err = err};
	hmap_init(&p.ids, STORE_ID_LEN);
	hmap_init(&p.skeys, STORE_SKEY_LEN);
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	int rc = scan(&p, STORE_CF_DOCS);
	if (!rc)
		rc = scan(&p, STORE_CF_BUNDLES);
	for (int kind = 0; kind < 2 && !rc; kind++) {
		char line[200];
		if (p.said[kind] <= STORE_TIME_RULE_SAY || !st->notice)
			continue;
		snprintf(line, sizeof(line), "store %s: ... and %llu more %s outside the timestamp "
			 "rule", st->dir, (unsigned long long)(p.said[kind] - STORE_TIME_RULE_SAY),
			 kind ? "bundles" : "events");
		st->notice(st->notice_arg, line);
	}
	/* records in SKEY order, each with its run of bad events (the ids map
	 * is only asked whether an id is bad: its indexes may change) */
	if (p.nev)
		qsort(p.ev, p.nev, sizeof(*p.ev), ev_by_skey);
	if (p.nrec)
		qsort(p.rec, p.nrec, sizeof(*p.rec), by_skey);
	/* one record at a time, whole in one WriteBatch with the counters: a
	 * crash between two leaves the store consistent, and the next open
	 * finds what is left to do */
	store_counts_t c = st->counts;
	uint64_t seq = st->changes_seq;
	for (size_t i = 0; i < p.nrec && !rc; i++) {
		if ((rc = fix_record(&p, wb, &p.rec[i], &c, &seq)))
			break;
		if ((i + 1) % RECORDS_PER_CHUNK == 0 && !(rc = write_chunk(&p, wb, &c, 0))) {
			store_counts_set(st, &c);
			__atomic_store_n(&st->changes_seq, seq, __ATOMIC_RELEASE);
		}
	}
	if (!rc && !(rc = write_chunk(&p, wb, &c, 1))) {
		store_counts_set(st, &c);
		__atomic_store_n(&st->changes_seq, seq, __ATOMIC_RELEASE);
		if (out)
			*out = p.stats;
	}
	rocksdb_writebatch_destroy(wb);
	hmap_release(&p.ids);
	hmap_release(&p.skeys);
	free(p.ev);
	free(p.rec);
	return rc;
}

/* ---- the audit ------------------------------------------------------------ */

int store_time_rule_audit_bundles(store_t *st, void (*problem)(void *arg, const char *line),
				  void *arg, pith_err_t *err)
{
	store_iter_t it;
	int rc = store_iter_open(st, STORE_CF_BUNDLES, NULL, 0, NULL, 0, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		json_doc_t *d = NULL;
		char what[64], line[200];
		if (kl == STORE_SKEY_LEN && !json_parse(&d, v, vl, NULL, NULL) &&
		    store_bundle_time_fault(json_doc_root(d), what, sizeof(what))) {
			snprintf(line, sizeof(line), "bundles: the bundle of %.26s: %s is outside the "
				 "timestamp rule (a read-write open removes it)", (const char *)k, what);
			problem(arg, line);
		}
		json_doc_free(d);
	}
	rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}
