/* The consistency audit: what a crash must never leave behind. */
#include "store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "merge.h"

typedef struct audit {
	store_t *st;
	store_report_fn report;
	void *arg;
	size_t problems;
	pith_err_t *err;
	hmap_t subjects; /* SKEY -> index into nsubj counts, from the subj index */
	uint64_t *subj_counts;
	size_t nsubj, capsubj;
	uint64_t claims; /* alias claims the record summaries list */
} audit_t;

static void problem(audit_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(audit_t *a, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	a->problems++;
	if (a->report && a->problems <= 1000)
		a->report(a->arg, line);
}

static int key_exists(audit_t *a, int cf, const uint8_t *k, size_t kl, int *exists)
{
	char *val;
	size_t vl;
	int rc = store_get_raw(a->st, cf, k, kl, &val, &vl, a->err);
	*exists = val != NULL;
	rocksdb_free(val);
	return rc;
}

/* The document an events value v names: in docs under its time key (an
 * 8-byte value) or v itself (schemas 2 and 3). 1 with *doc set, 0 after
 * reporting a problem, <0 on a read error. */
static int event_doc(audit_t *a, const uint8_t *k, const uint8_t *v, size_t vl, const char *hex,
		     pith_buf_t *buf, const uint8_t **doc, size_t *dl)
{
	uint8_t tk[STORE_TIME_KEY_LEN];
	if (!store_doc_key(v, vl, k, tk)) {
		if (a->st->schema >= 4) {
			problem(a, "events: sha256:%s holds its document, not its time", hex);
			return 0;
		}
		*doc = v;
		*dl = vl;
		return 1;
	}
	if (!a->st->cf[STORE_CF_DOCS]) {
		problem(a, "events: sha256:%s points into docs, which this store lacks", hex);
		return 0;
	}
	buf->len = 0;
	int rc = store_get_into(a->st, STORE_CF_DOCS, tk, sizeof(tk), buf, a->err);
	if (rc == PITH_ENOTFOUND) {
		problem(a, "docs: no document for event sha256:%s", hex);
		return 0;
	}
	if (rc)
		return rc;
	*doc = buf->data;
	*dl = buf->len;
	return 1;
}

/* Every event parses, hashes to its key, is filed under its own time and
 * has its two index entries. */
static int audit_events(audit_t *a, uint64_t *nevents, uint64_t *npointers)
{
	store_iter_t it;
	pith_buf_t buf = PITH_BUF_INIT;
	int rc = store_iter_open(a->st, STORE_CF_EVENTS, NULL, 0, NULL, 0, &it, a->err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl, dl = 0;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl), *d = NULL;
		char hex[65];
		pith_hex_encode(k, kl == STORE_ID_LEN ? kl : 0, hex);
		(*nevents)++;
		pith_event_t *ev = NULL;
		pith_err_t e = {0};
		if (kl != STORE_ID_LEN) {
			problem(a, "events: key of %zu bytes", kl);
			continue;
		}
		*npointers += vl == 8;
		if ((rc = event_doc(a, k, v, vl, hex, &buf, &d, &dl)) <= 0) {
			if (rc < 0)
				break;
			continue;
		}
		rc = 0;
		if (pith_event_parse_stored(d, dl, &ev, &e)) {
			problem(a, "events: sha256:%s does not parse: %s", hex, e.msg);
			continue;
		}
		pith_buf_t canon = PITH_BUF_INIT;
		if (memcmp(ev->content_hash, k, STORE_ID_LEN))
			problem(a, "events: sha256:%s holds %s", hex, ev->event_id);
		else if (pith_event_canon(ev, &canon) || canon.len != dl || memcmp(canon.data, d, dl))
			problem(a, "events: sha256:%s is not stored in canonical form", hex);
		else if (vl == 8 && store_time_get(v) != ev->created_us)
			problem(a, "events: sha256:%s is filed under another time than its created_at", hex);
		const char *fault = store_event_time_fault(ev->root);
		if (fault)
			problem(a, "events: sha256:%s: %s is outside the timestamp rule (a read-write "
				"open removes it)", hex, fault);
		pith_buf_release(&canon);
		uint8_t skey[STORE_SKEY_LEN], sk[STORE_SUBJ_KEY_LEN], tk[STORE_TIME_KEY_LEN];
		int ex;
		store_skey_make(ev->subject, skey);
		store_subj_key_make(skey, ev->created_at, k, sk);
		store_time_key_make(ev->created_us, k, tk);
		pith_event_free(ev);
		if ((rc = key_exists(a, STORE_CF_SUBJ, sk, sizeof(sk), &ex)))
			break;
		if (!ex)
			problem(a, "subj: no entry for event sha256:%s", hex);
		if ((rc = key_exists(a, STORE_CF_TIME, tk, sizeof(tk), &ex)))
			break;
		if (!ex)
			problem(a, "time: no entry for event sha256:%s", hex);
	}
	if (!rc)
		rc = store_iter_status(&it, a->err);
	store_iter_close(&it);
	pith_buf_release(&buf);
	return rc;
}

/* Documents in docs: each event's was found above, so as many as there
 * are events pointing there means no stray ones. */
static int audit_docs(audit_t *a, uint64_t npointers)
{
	store_iter_t it;
	uint64_t n = 0;
	if (!a->st->cf[STORE_CF_DOCS])
		return 0; /* an older store, opened read-only */
	int rc = store_iter_open(a->st, STORE_CF_DOCS, NULL, 0, NULL, 0, &it, a->err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		store_iter_key(&it, &kl);
		n++;
		if (kl != STORE_TIME_KEY_LEN)
			problem(a, "docs: key of %zu bytes", kl);
	}
	rc = store_iter_status(&it, a->err);
	store_iter_close(&it);
	if (!rc && n != npointers)
		problem(a, "docs: %llu documents for %llu events", (unsigned long long)n,
			(unsigned long long)npointers);
	return rc;
}

/* Every index entry names a stored event; count the entries per subject. */
static int audit_index(audit_t *a, int cf, uint64_t *n)
{
	store_iter_t it;
	int rc = store_iter_open(a->st, cf, NULL, 0, NULL, 0, &it, a->err);
	if (rc)
		return rc;
	size_t want = cf == STORE_CF_SUBJ ? STORE_SUBJ_KEY_LEN : STORE_TIME_KEY_LEN;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		(*n)++;
		if (kl != want) {
			problem(a, "%s: key of %zu bytes", store_cf_names[cf], kl);
			continue;
		}
		int ex;
		if ((rc = key_exists(a, STORE_CF_EVENTS, k + kl - STORE_ID_LEN, STORE_ID_LEN, &ex)))
			break;
		if (!ex) {
			char hex[65];
			pith_hex_encode(k + kl - STORE_ID_LEN, STORE_ID_LEN, hex);
			problem(a, "%s: entry for sha256:%s, which is not stored", store_cf_names[cf], hex);
		}
		if (cf != STORE_CF_SUBJ)
			continue;
		int si = hmap_get(&a->subjects, k);
		if (si < 0) {
			if (a->nsubj == a->capsubj) {
				size_t nc = a->capsubj ? a->capsubj * 2 : 256;
				uint64_t *p = realloc(a->subj_counts, nc * sizeof(*p));
				if (!p) {
					rc = pith_err_set(a->err, PITH_ENOMEM, "check: out of memory");
					break;
				}
				a->subj_counts = p;
				a->capsubj = nc;
			}
			si = (int)a->nsubj++;
			a->subj_counts[si] = 0;
			if (hmap_put(&a->subjects, k, si)) {
				rc = pith_err_set(a->err, PITH_ENOMEM, "check: out of memory");
				break;
			}
		}
		a->subj_counts[si]++;
	}
	if (!rc)
		rc = store_iter_status(&it, a->err);
	store_iter_close(&it);
	return rc;
}

/* Every record's cached state and summary equal a fresh merge. */
static int audit_record(audit_t *a, const uint8_t *k, const uint8_t *v, size_t vl, int *seen)
{
	char pith[PITH_NUMBER_LEN + 1];
	pith_event_t **evs = NULL;
	size_t n = 0;
	json_doc_t *bdoc = NULL;
	const json_value_t *aliases = NULL;
	pith_state_t state = {0};
	pith_buf_t fresh = PITH_BUF_INIT, want = PITH_BUF_INIT;
	store_claims_t claims = {0};
	int64_t built_us = 0;
	char *sv = NULL;
	size_t svl;
	pith_err_t e = {0};
	store_skey_pith(k, pith);
	int rc = store_subject_load(a->st, k, &evs, &n, &e);
	if (rc == PITH_EIO || rc == PITH_ENOMEM) {
		problem(a, "records: %s: cannot load its events: %s", pith, e.msg);
		rc = 0;
		goto done;
	} else if (rc) {
		problem(a, "records: %s: a stored event does not parse: %s", pith, e.msg);
		rc = 0;
		goto done;
	}
	int si = hmap_get(&a->subjects, k);
	if (si >= 0)
		seen[si] = 1;
	if ((rc = store_bundle_aliases_load(a->st, k, &bdoc, &aliases, &built_us, a->err)))
		goto done;
	if ((rc = pith_merge_ex(pith, evs, n, aliases, a->st->registry, &state, a->err)) ||
	    (rc = pith_state_canon(&state, &fresh)))
		goto done;
	if ((rc = store_get_raw(a->st, STORE_CF_STATES, k, STORE_SKEY_LEN, &sv, &svl, a->err)))
		goto done;
	if (!sv)
		problem(a, "states: %s has no cached state", pith);
	else if (svl != fresh.len || memcmp(sv, fresh.data, svl))
		problem(a, "states: cached state of %s differs from a fresh merge", pith);
	const json_value_t *record = json_get(json_get(state.root, "current"), "canonical_record");
	if ((rc = store_claims_make(&claims, aliases, built_us, record, pith)) ||
	    (rc = store_rec_encode(&want, n, state.state_hash, bdoc != NULL, &claims))) {
		rc = pith_err_set(a->err, rc, "check: out of memory");
		goto done;
	}
	if (vl != want.len || memcmp(v, want.data, vl))
		problem(a, "records: summary of %s differs from its %zu events, state and aliases", pith, n);
	/* each alias the record claims has its entry, with its rank */
	for (size_t i = 0; i < claims.n; i++) {
		uint8_t ek[STORE_ALIAS_ENTRY_MAX];
		size_t ekl = store_alias_entry_key(claims.c[i].key, claims.c[i].klen, pith, ek);
		char *av;
		size_t avl;
		if ((rc = store_get_raw(a->st, STORE_CF_ALIASES, ek, ekl, &av, &avl, a->err)))
			goto done;
		if (!av || avl != STORE_ALIAS_RANK_LEN || memcmp(av, claims.c[i].rank, avl))
			problem(a, "aliases: %s's claim on %s:%.*s is %s", pith, (const char *)claims.c[i].key,
				(int)(claims.c[i].klen - strlen((const char *)claims.c[i].key) - 1),
				(const char *)claims.c[i].key + strlen((const char *)claims.c[i].key) + 1,
				av ? "wrong" : "missing");
		rocksdb_free(av);
	}
	a->claims += claims.n;
done:
	store_claims_release(&claims);
	pith_buf_release(&want);
	rocksdb_free(sv);
	pith_buf_release(&fresh);
	pith_state_release(&state);
	json_doc_free(bdoc);
	store_events_free(evs, n);
	return rc;
}

static int audit_records(audit_t *a, uint64_t *nrec)
{
	store_iter_t it;
	int *seen = calloc(a->nsubj + 1, sizeof(*seen));
	if (!seen)
		return pith_err_set(a->err, PITH_ENOMEM, "check: out of memory");
	int rc = store_iter_open(a->st, STORE_CF_RECORDS, NULL, 0, NULL, 0, &it, a->err);
	if (rc) {
		free(seen);
		return rc;
	}
	for (; store_iter_valid(&it) && !rc; store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		(*nrec)++;
		if (kl != STORE_SKEY_LEN) {
			problem(a, "records: key of %zu bytes", kl);
			continue;
		}
		rc = audit_record(a, k, v, vl, seen);
	}
	if (!rc)
		rc = store_iter_status(&it, a->err);
	store_iter_close(&it);
	/* a subject with events but no record summary (hence no state) */
	for (size_t i = 0; i < a->subjects.cap; i++) {
		const hmap_slot_t *sl = &a->subjects.slots[i];
		if (sl->used && !seen[sl->value]) {
			char pith[PITH_NUMBER_LEN + 1];
			store_skey_pith(sl->key, pith);
			problem(a, "records: %s has %llu events but no record summary", pith,
				(unsigned long long)a->subj_counts[sl->value]);
		}
	}
	free(seen);
	return rc;
}

/* Keys of cf that must each have a record summary; counted into *n. */
static int audit_keyed_by_record(audit_t *a, int cf, uint64_t *n)
{
	store_iter_t it;
	int rc = store_iter_open(a->st, cf, NULL, 0, NULL, 0, &it, a->err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl);
		const uint8_t *rk = k;
		size_t rkl = kl;
		uint8_t skey[STORE_SKEY_LEN];
		(*n)++;
		if (cf == STORE_CF_ALIASES) {
			char pith[PITH_NUMBER_LEN + 1];
			store_iter_value(&it, &vl);
			if (vl != STORE_ALIAS_RANK_LEN || kl < PITH_NUMBER_LEN + 3) {
				problem(a, "aliases: entry of %zu/%zu bytes", kl, vl);
				continue;
			}
			memcpy(pith, k + kl - PITH_NUMBER_LEN, PITH_NUMBER_LEN);
			pith[PITH_NUMBER_LEN] = 0;
			if (!pith_number_is_valid(pith)) {
				problem(a, "aliases: '%.36s' is not a pith number", pith);
				continue;
			}
			store_skey_make(pith, skey);
			rk = skey;
			rkl = sizeof(skey);
		}
		int ex = 0;
		if (rkl == STORE_SKEY_LEN && (rc = key_exists(a, STORE_CF_RECORDS, rk, rkl, &ex)))
			break;
		if (!ex)
			problem(a, "%s: an entry for a record without a summary (%.*s)", store_cf_names[cf],
				(int)(kl < 60 ? kl : 60), (const char *)k);
	}
	if (!rc)
		rc = store_iter_status(&it, a->err);
	store_iter_close(&it);
	return rc;
}

int store_audit_key_kinds(store_t *st, int cf, const store_key_kind_t kinds[2], uint64_t want,
			  const char *items, void (*report)(void *arg, const char *line), void *arg,
			  pith_err_t *err)
{
	store_iter_t it;
	uint64_t n[2] = {0, 0};
	char line[200];
	int rc = store_iter_open(st, cf, NULL, 0, NULL, 0, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		int i = kl == kinds[0].len && k[0] == kinds[0].first   ? 0
			: kl == kinds[1].len && k[0] == kinds[1].first ? 1
								       : -1;
		if (i >= 0) {
			n[i]++;
			continue;
		}
		snprintf(line, sizeof(line), "%s: a key of %zu bytes", store_cf_names[cf], kl);
		report(arg, line);
	}
	rc = store_iter_status(&it, err);
	store_iter_close(&it);
	if (!rc && (n[0] != want || n[1] != want)) {
		snprintf(line, sizeof(line), "%s: %llu %s and %llu %s entries for %llu %s",
			 store_cf_names[cf], (unsigned long long)n[0], kinds[0].name,
			 (unsigned long long)n[1], kinds[1].name, (unsigned long long)want, items);
		report(arg, line);
	}
	return rc;
}

static void index_problem(void *arg, const char *line)
{
	problem(arg, "%s", line);
}

static void count_problem(audit_t *a, const char *what, uint64_t meta, uint64_t real)
{
	if (meta != real)
		problem(a, "meta: %s counter says %llu, the store holds %llu", what,
			(unsigned long long)meta, (unsigned long long)real);
}

int store_check(store_t *st, store_report_fn report, void *arg, size_t *problems,
		pith_err_t *err)
{
	audit_t a = {.st = st, .report = report, .arg = arg, .err = err};
	uint64_t nev = 0, nptr = 0, nsubj = 0, ntime = 0, nrec = 0, nstates = 0, nbundles = 0,
		 naliases = 0;
	store_counts_t counts;
	int rc;
	hmap_init(&a.subjects, STORE_SKEY_LEN);
	store_counts_get(st, &counts);
	if ((rc = audit_events(&a, &nev, &nptr)) || (rc = audit_docs(&a, nptr)) ||
	    (rc = audit_index(&a, STORE_CF_SUBJ, &nsubj)) ||
	    (rc = audit_index(&a, STORE_CF_TIME, &ntime)) || (rc = audit_records(&a, &nrec)) ||
	    (rc = audit_keyed_by_record(&a, STORE_CF_STATES, &nstates)) ||
	    (rc = audit_keyed_by_record(&a, STORE_CF_BUNDLES, &nbundles)) ||
	    (rc = audit_keyed_by_record(&a, STORE_CF_ALIASES, &naliases)) ||
	    (rc = store_time_rule_audit_bundles(st, index_problem, &a, err)) ||
	    (rc = store_bundle_index_audit(st, index_problem, &a, err)) ||
	    (rc = store_changes_audit(st, index_problem, &a, err)))
		goto done;
	/* each event has its own entries (checked above); equal counts mean
	 * there are no others */
	if (nsubj != nev)
		problem(&a, "subj: %llu entries for %llu events", (unsigned long long)nsubj,
			(unsigned long long)nev);
	if (ntime != nev)
		problem(&a, "time: %llu entries for %llu events", (unsigned long long)ntime,
			(unsigned long long)nev);
	if (nstates != nrec)
		problem(&a, "states: %llu states for %llu records", (unsigned long long)nstates,
			(unsigned long long)nrec);
	/* each claim has its entry (checked per record); equal counts mean
	 * no entry is left of a withdrawn claim */
	if (naliases != a.claims)
		problem(&a, "aliases: %llu entries for %llu claims", (unsigned long long)naliases,
			(unsigned long long)a.claims);
	count_problem(&a, "events", counts.events, nev);
	count_problem(&a, "records", counts.records, nrec);
	count_problem(&a, "bundles", counts.bundles, nbundles);
done:
	hmap_release(&a.subjects);
	free(a.subj_counts);
	if (problems)
		*problems = a.problems;
	return rc;
}
