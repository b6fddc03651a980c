/* The consistency audit: what a crash must never leave behind. */
#include "store_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "merge.h"

/* An order-independent fingerprint of a multiset of keys: two sums of
 * 64-bit hashes. The events, subj and time column families and the keys
 * the documents imply must have equal ones; a crash or a bug that loses
 * or adds an entry changes them (unless two hashes of 128 bits collide). */
typedef struct fp {
	uint64_t a, b;
} fp_t;

typedef struct audit {
	store_t *st;
	store_report_fn report;
	void *arg;
	size_t problems;
	pith_err_t *err;
	uint64_t claims; /* alias claims the record summaries list */
	fp_t fp_events, fp_time, fp_subj; /* what the documents imply */
	fp_t fp_aliases;                  /* the aliases entries the records claim */
} audit_t;

static uint64_t fp_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

static void fp_add(fp_t *f, const uint8_t *p, size_t n)
{
	uint64_t h1 = UINT64_C(0x9e3779b97f4a7c15) ^ n, h2 = UINT64_C(0xc2b2ae3d27d4eb4f) + n;
	for (size_t i = 0; i < n; i += 8) {
		uint64_t w = 0;
		memcpy(&w, p + i, n - i < 8 ? n - i : 8);
		h1 = fp_mix(h1 ^ w);
		h2 = fp_mix(h2 + w * UINT64_C(0xff51afd7ed558ccd));
	}
	f->a += h1;
	f->b += h2;
}

static void fp_sum(fp_t *to, const fp_t *f)
{
	to->a += f->a;
	to->b += f->b;
}

static int fp_equal(const fp_t *x, const fp_t *y)
{
	return x->a == y->a && x->b == y->b;
}

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

static void index_problem(void *arg, const char *line)
{
	problem(arg, "%s", line);
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

/* The checks of one event, id k, events value v, document d: it parses,
 * hashes to its id, is stored canonical, is filed under its own time (when
 * vl is 8) and passes the timestamp rule. Fills in the subj and time keys
 * it must have. 0, or 1 when it does not parse (reported). */
static int event_check(audit_t *a, const uint8_t *k, const uint8_t *v, size_t vl,
		       const uint8_t *d, size_t dl, const char *hex,
		       uint8_t sk[STORE_SUBJ_KEY_LEN], uint8_t tk[STORE_TIME_KEY_LEN])
{
	pith_event_t *ev = NULL;
	pith_err_t e = {0};
	if (pith_event_parse_stored(d, dl, &ev, &e)) {
		problem(a, "events: sha256:%s does not parse: %s", hex, e.msg);
		return 1;
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
	uint8_t skey[STORE_SKEY_LEN];
	store_skey_make(ev->subject, skey);
	store_subj_key_make(skey, ev->created_at, k, sk);
	store_time_key_make(ev->created_us, k, tk);
	pith_event_free(ev);
	return 0;
}

/* Every event parses, hashes to its key, is filed under its own time and
 * has its two index entries: the exact audit, an event at a time with
 * lookups of its document and entries in the order of ids. */
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
		uint8_t sk[STORE_SUBJ_KEY_LEN], tk[STORE_TIME_KEY_LEN];
		int ex;
		if (event_check(a, k, v, vl, d, dl, hex, sk, tk))
			continue;
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
	int rc = store_iter_scan(a->st, STORE_CF_DOCS, &it, a->err);
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

/* Every index entry names a stored event. */
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
	}
	if (!rc)
		rc = store_iter_status(&it, a->err);
	store_iter_close(&it);
	return rc;
}

/* ---- audits on worker threads ---------------------------------------------
 *
 * The main thread walks column families in key order and hands the items
 * (documents, or records with what the walk found of them) in chunks of
 * consecutive ones to worker threads; each chunk's problems are kept with
 * it and reported in chunk order, so the report reads as if one thread had
 * done it all. At most CHECK_INFLIGHT chunks per thread are held at once:
 * memory does not grow with the store. */

#define CHECK_CHUNK_ITEMS 64
#define CHECK_INFLIGHT 4

enum { ITEM_NOTE, ITEM_DOC, ITEM_RECORD };

/* Offsets into its chunk's data (the item's bytes are copies). */
typedef struct item {
	int kind;
	size_t key, klen, val, vlen;
	size_t subj, nsubj; /* a record's subj keys, STORE_SUBJ_KEY_LEN bytes each */
	size_t bad_subj;    /* the length of a subj key of it of another length, or 0 */
	size_t state, slen, bundle, blen;
	int has_state, has_bundle;
} item_t;

typedef struct chunk {
	item_t it[CHECK_CHUNK_ITEMS];
	size_t n;
	pith_buf_t data;
	pith_buf_t lines; /* the problems found, each NUL-terminated */
	int done, rc;
	pith_err_t err;
	uint64_t claims;
	fp_t fp_events, fp_time, fp_subj, fp_aliases;
} chunk_t;

typedef int (*item_fn)(audit_t *wa, const chunk_t *c, const item_t *it);

typedef struct pool {
	audit_t *a; /* where the problems go */
	item_fn work;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	chunk_t *ring, *cur;
	size_t cap, submitted, taken, emitted;
	int quit, rc, nth;
	store_pool_t threads; /* nth of them run pool_worker */
} pool_t;

static void line_to_chunk(void *arg, const char *line)
{
	pith_buf_append(arg, line, strlen(line) + 1);
}

/* Runs the items of c with an audit of its own, whose problems go to
 * c->lines. */
static void chunk_work(pool_t *p, chunk_t *c)
{
	audit_t wa = {.st = p->a->st, .report = line_to_chunk, .arg = &c->lines, .err = &c->err};
	for (size_t i = 0; i < c->n && !c->rc; i++) {
		const item_t *it = &c->it[i];
		if (it->kind == ITEM_NOTE)
			problem(&wa, "%s", (const char *)c->data.data + it->key);
		else
			c->rc = p->work(&wa, c, it);
	}
	c->claims = wa.claims;
	c->fp_events = wa.fp_events;
	c->fp_time = wa.fp_time;
	c->fp_subj = wa.fp_subj;
	c->fp_aliases = wa.fp_aliases;
}

static void *pool_worker(void *arg)
{
	pool_t *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->taken == p->submitted && !p->quit)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->taken == p->submitted)
			break;
		chunk_t *c = &p->ring[p->taken++ % p->cap];
		pthread_mutex_unlock(&p->mu);
		chunk_work(p, c);
		pthread_mutex_lock(&p->mu);
		c->done = 1;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Reports what the oldest chunk found (the main thread, holding mu). */
static void pool_emit_oldest(pool_t *p)
{
	chunk_t *c = &p->ring[p->emitted % p->cap];
	while (!c->done) {
		if (!p->nth) { /* no worker thread could start: the main thread works */
			p->taken++;
			chunk_work(p, c);
			c->done = 1;
		} else {
			pthread_cond_wait(&p->cv, &p->mu);
		}
	}
	audit_t *a = p->a;
	for (size_t o = 0; o < c->lines.len; o += strlen((const char *)c->lines.data + o) + 1)
		problem(a, "%s", (const char *)c->lines.data + o);
	a->claims += c->claims;
	fp_sum(&a->fp_events, &c->fp_events);
	fp_sum(&a->fp_time, &c->fp_time);
	fp_sum(&a->fp_subj, &c->fp_subj);
	fp_sum(&a->fp_aliases, &c->fp_aliases);
	if (c->rc && !p->rc) {
		p->rc = c->rc;
		if (a->err)
			*a->err = c->err;
	}
	pith_buf_t data = c->data, lines = c->lines;
	memset(c, 0, sizeof(*c));
	c->data = data;
	c->lines = lines;
	c->data.len = c->lines.len = 0;
	p->emitted++;
}

static int pool_start(pool_t *p, audit_t *a, item_fn work, int threads)
{
	memset(p, 0, sizeof(*p));
	p->a = a;
	p->work = work;
	p->cap = (size_t)threads * CHECK_INFLIGHT;
	p->ring = calloc(p->cap, sizeof(*p->ring));
	if (!p->ring)
		return pith_err_set(a->err, PITH_ENOMEM, "check: out of memory");
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->nth = (int)store_pool_start(&p->threads, (size_t)threads, pool_worker, p, 0);
	return 0;
}

/* The next item to fill in, in the chunk being filled (*c). */
static item_t *pool_item(pool_t *p, int kind, chunk_t **c)
{
	pthread_mutex_lock(&p->mu);
	if (p->cur && p->cur->n == CHECK_CHUNK_ITEMS) {
		p->submitted++;
		p->cur = NULL;
		pthread_cond_broadcast(&p->cv);
	}
	if (!p->cur) {
		while (p->submitted - p->emitted == p->cap)
			pool_emit_oldest(p);
		p->cur = &p->ring[p->submitted % p->cap];
	}
	pthread_mutex_unlock(&p->mu);
	*c = p->cur;
	item_t *it = &p->cur->it[p->cur->n++];
	memset(it, 0, sizeof(*it));
	it->kind = kind;
	return it;
}

/* Copies n bytes into c's data; their offset in *off. */
static int item_copy(pool_t *p, chunk_t *c, const void *b, size_t n, size_t *off)
{
	*off = c->data.len;
	if (pith_buf_append(&c->data, b, n))
		return pith_err_set(p->a->err, PITH_ENOMEM, "check: out of memory");
	return 0;
}

/* A problem the main thread found (line), reported in its place among the
 * items'. */
static int pool_note(pool_t *p, const char *line)
{
	chunk_t *c;
	item_t *it = pool_item(p, ITEM_NOTE, &c);
	return item_copy(p, c, line, strlen(line) + 1, &it->key);
}

/* Waits for every chunk, reports what is left and stops the threads;
 * the first error of a chunk (or rc, the main thread's). */
static int pool_finish(pool_t *p, int rc)
{
	pthread_mutex_lock(&p->mu);
	if (p->cur && p->cur->n)
		p->submitted++;
	p->cur = NULL;
	pthread_cond_broadcast(&p->cv);
	while (p->emitted < p->submitted)
		pool_emit_oldest(p);
	p->quit = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	store_pool_join(&p->threads);
	for (size_t i = 0; i < p->cap; i++) {
		pith_buf_release(&p->ring[i].data);
		pith_buf_release(&p->ring[i].lines);
	}
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->ring);
	return rc ? rc : p->rc;
}

/* ---- events, the fast way ------------------------------------------------ */

/* Counts the keys of cf into *n and sums them (with their values, for
 * events) into *f; *bad set if one has another length than klen (0: any)
 * or an events value is not a time. */
static int cf_fingerprint(audit_t *a, int cf, size_t klen, uint64_t *n, fp_t *f, int *bad)
{
	store_iter_t it;
	uint8_t buf[STORE_SUBJ_KEY_LEN + 8];
	int rc = store_iter_scan(a->st, cf, &it, a->err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl = 0;
		const uint8_t *k = store_iter_key(&it, &kl), *v = NULL;
		(*n)++;
		if (cf == STORE_CF_EVENTS)
			v = store_iter_value(&it, &vl);
		if ((klen && kl != klen) || (v && vl != 8)) {
			*bad = 1;
			continue;
		}
		if (v) {
			memcpy(buf, k, kl);
			memcpy(buf + kl, v, vl);
			fp_add(f, buf, kl + vl);
		} else {
			fp_add(f, k, kl);
		}
	}
	rc = store_iter_status(&it, a->err);
	store_iter_close(&it);
	return rc;
}

/* One document (key: its time key): event_check, and the keys it implies
 * in events (id, time), subj and time added to the audit's fingerprints. */
static int doc_work(audit_t *a, const chunk_t *c, const item_t *it)
{
	const uint8_t *k = c->data.data + it->key, *d = c->data.data + it->val;
	uint8_t sk[STORE_SUBJ_KEY_LEN], tk[STORE_TIME_KEY_LEN], ek[STORE_ID_LEN + 8];
	char hex[65];
	if (it->klen != STORE_TIME_KEY_LEN) {
		problem(a, "docs: key of %zu bytes", it->klen);
		return 0;
	}
	pith_hex_encode(k + 8, STORE_ID_LEN, hex);
	memcpy(ek, k + 8, STORE_ID_LEN);
	memcpy(ek + STORE_ID_LEN, k, 8);
	fp_add(&a->fp_events, ek, sizeof(ek));
	if (event_check(a, k + 8, k, 8, d, it->vlen, hex, sk, tk))
		return 0;
	fp_add(&a->fp_subj, sk, sizeof(sk));
	fp_add(&a->fp_time, tk, sizeof(tk));
	return 0;
}

/* For a store keeping its documents in docs: events, subj and time read
 * in key order and fingerprinted, the documents read in key order and
 * checked on the worker threads, and the keys they imply compared with
 * those stored. Reports nothing: *clean is 1 when all is well (n: the
 * counts of events, docs, subj and time entries), else the exact audit
 * must say what is wrong. */
static int events_fast(audit_t *a, int threads, uint64_t n[4], int *clean)
{
	fp_t fev = {0, 0}, fsubj = {0, 0}, ftime = {0, 0};
	int bad = 0, rc;
	audit_t quiet = {.st = a->st, .err = a->err};
	pool_t p;
	store_iter_t it;
	*clean = 0;
	if ((rc = cf_fingerprint(a, STORE_CF_EVENTS, STORE_ID_LEN, &n[0], &fev, &bad)) ||
	    (rc = cf_fingerprint(a, STORE_CF_SUBJ, STORE_SUBJ_KEY_LEN, &n[2], &fsubj, &bad)) ||
	    (rc = cf_fingerprint(a, STORE_CF_TIME, STORE_TIME_KEY_LEN, &n[3], &ftime, &bad)))
		return rc;
	if (bad || n[2] != n[0] || n[3] != n[0])
		return 0;
	if ((rc = store_iter_scan(a->st, STORE_CF_DOCS, &it, a->err)))
		return rc;
	if ((rc = pool_start(&p, &quiet, doc_work, threads))) {
		store_iter_close(&it);
		return rc;
	}
	for (; !rc && store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		chunk_t *c;
		item_t *item = pool_item(&p, ITEM_DOC, &c);
		n[1]++;
		item->klen = kl;
		item->vlen = vl;
		if (!(rc = item_copy(&p, c, k, kl, &item->key)))
			rc = item_copy(&p, c, v, vl, &item->val);
	}
	if (!rc)
		rc = store_iter_status(&it, a->err);
	store_iter_close(&it);
	if ((rc = pool_finish(&p, rc)))
		return rc;
	*clean = !quiet.problems && n[1] == n[0] && fp_equal(&fev, &quiet.fp_events) &&
		 fp_equal(&fsubj, &quiet.fp_subj) && fp_equal(&ftime, &quiet.fp_time);
	return 0;
}

/* ---- records ------------------------------------------------------------- */

/* Every record's cached state and summary equal a fresh merge of its
 * events (it: the record with its subj keys, state and bundle). */
static int record_work(audit_t *a, const chunk_t *c, const item_t *it)
{
	const uint8_t *base = c->data.data, *k = base + it->key, *v = base + it->val;
	char pith[PITH_NUMBER_LEN + 1];
	pith_event_t **evs = NULL;
	size_t n = 0, vl = it->vlen;
	json_doc_t *bdoc = NULL;
	const json_value_t *aliases = NULL;
	pith_state_t state = {0};
	pith_buf_t fresh = PITH_BUF_INIT, want = PITH_BUF_INIT, doc = PITH_BUF_INIT;
	store_claims_t claims = {0};
	int64_t built_us = 0;
	pith_err_t e = {0};
	int rc = 0;
	store_skey_pith(k, pith);
	if (it->bad_subj) {
		problem(a, "records: %s: cannot load its events: store: subj key of %zu bytes", pith,
			it->bad_subj);
		goto done;
	}
	if (!(evs = calloc(it->nsubj + 1, sizeof(*evs)))) {
		rc = pith_err_set(a->err, PITH_ENOMEM, "check: out of memory");
		goto done;
	}
	for (; n < it->nsubj && !rc; n += !rc)
		rc = store_subj_event_load(a->st, base + it->subj + n * STORE_SUBJ_KEY_LEN, &doc,
					   &evs[n], &e);
	if (rc == PITH_EIO || rc == PITH_ENOMEM) {
		problem(a, "records: %s: cannot load its events: %s", pith, e.msg);
		rc = 0;
		goto done;
	} else if (rc) {
		problem(a, "records: %s: a stored event does not parse: %s", pith, e.msg);
		rc = 0;
		goto done;
	}
	if (it->has_bundle && (rc = store_bundle_aliases_parse(base + it->bundle, it->blen, &bdoc,
							       &aliases, &built_us, a->err)))
		goto done;
	if ((rc = pith_merge_ex(pith, evs, n, aliases, a->st->registry, &state, a->err)) ||
	    (rc = pith_state_canon(&state, &fresh)))
		goto done;
	if (!it->has_state)
		problem(a, "states: %s has no cached state", pith);
	else if (it->slen != fresh.len || memcmp(base + it->state, fresh.data, it->slen))
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
		fp_add(&a->fp_aliases, ek, ekl);
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
	/* its change log entries, whatever was found above */
	if (!rc && a->st->cf[STORE_CF_CHANGES])
		rc = store_changes_audit_record(a->st, k, v, vl, index_problem, a, a->err);
	store_claims_release(&claims);
	pith_buf_release(&want);
	pith_buf_release(&doc);
	pith_buf_release(&fresh);
	pith_state_release(&state);
	json_doc_free(bdoc);
	store_events_free(evs, n);
	return rc;
}

/* The order of an iterator's key against SKEY skey (NULL: after every
 * key): <0 before, 0 if the key starts with it, >0 after or at the end. */
static int join_cmp(store_iter_t *it, const uint8_t *skey)
{
	if (!store_iter_valid(it))
		return 1;
	if (!skey)
		return -1;
	size_t kl;
	const uint8_t *k = store_iter_key(it, &kl);
	int c = memcmp(k, skey, kl < STORE_SKEY_LEN ? kl : STORE_SKEY_LEN);
	return c ? c : kl < STORE_SKEY_LEN ? -1 : 0;
}

/* Whether an iterator's key is skey itself. */
static int join_is_at(store_iter_t *it, const uint8_t *skey)
{
	size_t kl = 0;
	if (join_cmp(it, skey) == 0)
		store_iter_key(it, &kl);
	return kl == STORE_SKEY_LEN;
}

/* Steps the subj, states and bundles cursors (j[0..2]) past the keys before
 * skey (NULL: all that are left), reporting them: the entries of a record
 * without a summary. */
static int join_orphans(pool_t *p, store_iter_t *j, const uint8_t *skey, uint64_t *nstates,
			uint64_t *nbundles)
{
	int rc = 0;
	while (!rc && join_cmp(&j[0], skey) < 0) {
		/* one subject's events */
		size_t kl;
		uint8_t sk[STORE_SKEY_LEN];
		uint64_t n = 0;
		const uint8_t *k = store_iter_key(&j[0], &kl);
		if (kl < STORE_SKEY_LEN) {
			store_iter_next(&j[0]);
			continue;
		}
		memcpy(sk, k, STORE_SKEY_LEN);
		for (; join_cmp(&j[0], sk) == 0; store_iter_next(&j[0])) {
			store_iter_key(&j[0], &kl);
			n += kl == STORE_SUBJ_KEY_LEN;
		}
		if (n) {
			char pith[PITH_NUMBER_LEN + 1], line[160];
			store_skey_pith(sk, pith);
			snprintf(line, sizeof(line), "records: %s has %llu events but no record summary",
				 pith, (unsigned long long)n);
			rc = pool_note(p, line);
		}
	}
	for (int i = 1; i < 3; i++) {
		for (; !rc && join_cmp(&j[i], skey) < 0; store_iter_next(&j[i])) {
			size_t kl;
			const uint8_t *k = store_iter_key(&j[i], &kl);
			int cf = i == 1 ? STORE_CF_STATES : STORE_CF_BUNDLES;
			(*(i == 1 ? nstates : nbundles))++;
			char line[160];
			snprintf(line, sizeof(line), "%s: an entry for a record without a summary (%.*s)",
				 store_cf_names[cf], (int)(kl < 60 ? kl : 60), (const char *)k);
			rc = pool_note(p, line);
		}
	}
	return rc;
}

/* The value of j's key if it is skey: copied into c (*has set, *off and
 * *len where), counted in *n, j stepped past it. */
static int join_value(pool_t *p, chunk_t *c, store_iter_t *j, const uint8_t *skey, uint64_t *n,
		      int *has, size_t *off, size_t *len)
{
	if (!join_is_at(j, skey))
		return 0;
	const uint8_t *v = store_iter_value(j, len);
	(*n)++;
	*has = 1;
	int rc = item_copy(p, c, v, *len, off);
	store_iter_next(j);
	return rc;
}

/* One record's item: its summary, subj keys, state and bundle, the
 * cursors j stepped past them. */
static int join_record(pool_t *p, store_iter_t *rec, store_iter_t *j, uint64_t *nstates,
		       uint64_t *nbundles)
{
	size_t kl, vl;
	const uint8_t *k = store_iter_key(rec, &kl), *v = store_iter_value(rec, &vl);
	chunk_t *c;
	item_t *it = pool_item(p, ITEM_RECORD, &c);
	int rc;
	it->vlen = vl;
	if ((rc = item_copy(p, c, k, kl, &it->key)) || (rc = item_copy(p, c, v, vl, &it->val)))
		return rc;
	it->subj = c->data.len;
	for (; !rc && join_cmp(&j[0], k) == 0; store_iter_next(&j[0])) {
		size_t sl;
		const uint8_t *s = store_iter_key(&j[0], &sl);
		size_t off;
		if (sl != STORE_SUBJ_KEY_LEN) {
			it->bad_subj = it->bad_subj ? it->bad_subj : sl;
			continue;
		}
		if (!(rc = item_copy(p, c, s, sl, &off)))
			it->nsubj++;
	}
	if (!rc)
		rc = join_value(p, c, &j[1], k, nstates, &it->has_state, &it->state, &it->slen);
	if (!rc)
		rc = join_value(p, c, &j[2], k, nbundles, &it->has_bundle, &it->bundle, &it->blen);
	return rc;
}

/* The records, and the subj, states and bundles entries, walked together
 * in SKEY order (a merge join), each record audited on a worker thread:
 * every record's state and summary equal a fresh merge, and every entry
 * belongs to a record with a summary. */
static int audit_records(audit_t *a, int threads, uint64_t *nrec, uint64_t *nstates,
			 uint64_t *nbundles)
{
	static const int cfs[4] = {STORE_CF_RECORDS, STORE_CF_SUBJ, STORE_CF_STATES,
				   STORE_CF_BUNDLES};
	store_iter_t it[4];
	pool_t p;
	int rc = 0, n = 0;
	for (; n < 4 && !rc; n += !rc)
		rc = store_iter_scan(a->st, cfs[n], &it[n], a->err);
	if (rc || (rc = pool_start(&p, a, record_work, threads)))
		goto done;
	for (; !rc && store_iter_valid(&it[0]); store_iter_next(&it[0])) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it[0], &kl);
		(*nrec)++;
		char line[64];
		if (kl != STORE_SKEY_LEN) {
			snprintf(line, sizeof(line), "records: key of %zu bytes", kl);
			rc = pool_note(&p, line);
		} else if (!(rc = join_orphans(&p, &it[1], k, nstates, nbundles))) {
			rc = join_record(&p, &it[0], &it[1], nstates, nbundles);
		}
	}
	if (!rc)
		rc = join_orphans(&p, &it[1], NULL, nstates, nbundles);
	for (int i = 0; i < 4 && !rc; i++)
		rc = store_iter_status(&it[i], a->err);
	rc = pool_finish(&p, rc);
done:
	while (n-- > 0)
		store_iter_close(&it[n]);
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

/* Every aliases entry is a claim of a record with a summary: the entries
 * read in key order and summed, equal to the sum of the claims the record
 * audit found (each of which it looked up). When they differ, the exact
 * audit (an entry at a time, its record looked up) says what is wrong. */
static int audit_aliases(audit_t *a, uint64_t *n)
{
	fp_t f = {0, 0};
	int bad = 0;
	int rc = cf_fingerprint(a, STORE_CF_ALIASES, 0, n, &f, &bad);
	if (rc || (!bad && *n == a->claims && fp_equal(&f, &a->fp_aliases)))
		return rc;
	*n = 0;
	return audit_keyed_by_record(a, STORE_CF_ALIASES, n);
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

static void count_problem(audit_t *a, const char *what, uint64_t meta, uint64_t real)
{
	if (meta != real)
		problem(a, "meta: %s counter says %llu, the store holds %llu", what,
			(unsigned long long)meta, (unsigned long long)real);
}

int store_check(store_t *st, store_report_fn report, void *arg, size_t *problems,
		pith_err_t *err)
{
	return store_check_threads(st, 0, report, arg, problems, err);
}

int store_check_threads(store_t *st, int threads, store_report_fn report, void *arg,
			size_t *problems, pith_err_t *err)
{
	audit_t a = {.st = st, .report = report, .arg = arg, .err = err};
	uint64_t nev = 0, nptr = 0, nsubj = 0, ntime = 0, nrec = 0, nstates = 0, nbundles = 0,
		 naliases = 0, n[4] = {0, 0, 0, 0};
	store_counts_t counts;
	int rc, clean = 0;
	if (threads <= 0)
		threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (threads <= 0)
		threads = 1;
	store_counts_get(st, &counts);
	/* the fast audit where documents are in docs; when it finds anything
	 * wrong, the exact one says what (and reports nothing twice: the fast
	 * one reports nothing) */
	if (st->schema >= 4 && st->cf[STORE_CF_DOCS] &&
	    (rc = events_fast(&a, threads, n, &clean)))
		goto done;
	if (clean) {
		nev = nptr = n[0];
		nsubj = n[2];
		ntime = n[3];
	} else if ((rc = audit_events(&a, &nev, &nptr)) || (rc = audit_docs(&a, nptr)) ||
		   (rc = audit_index(&a, STORE_CF_SUBJ, &nsubj)) ||
		   (rc = audit_index(&a, STORE_CF_TIME, &ntime))) {
		goto done;
	}
	if ((rc = audit_records(&a, threads, &nrec, &nstates, &nbundles)) ||
	    (rc = audit_aliases(&a, &naliases)) ||
	    (rc = store_time_rule_audit_bundles(st, index_problem, &a, err)) ||
	    (rc = store_bundle_index_audit(st, index_problem, &a, err)) ||
	    (rc = store_changes_audit(st, nrec, index_problem, &a, err)))
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
	if (problems)
		*problems = a.problems;
	return rc;
}
