/* The follower: records kept current from HTTP(S) upstreams (follower.h;
 * docs/upstream.md, "The node follows upstreams").
 *
 * Each record the follower knows is a rec_t in one map, keyed by the
 * 26-character body of its pith number, or, until an upstream resolved
 * it, by a hash of the id it was given as (an arXiv id, a DOI, a short
 * number). Records wait in one min-heap by the time they are due; a
 * record asked for now (read-through, `follow`) is due at 0 and so comes
 * first. At most max_inflight records are being fetched at once.
 *
 * A fetch walks the upstreams in order: resolve (when only an alias is
 * known), then the bundle at the manifest's pattern (or the registry's two
 * fixed layouts), with If-None-Match when the store still holds a bundle
 * of the record and the URL is the one the ETag came from. A 404 moves to
 * the next layout, then to the next upstream; a failure (5xx, 429,
 * network, TLS, a body over the cap) is counted by cause, backs the
 * upstream off when it is the upstream's trouble, and moves on too. A 200
 * is an INGEST_BUNDLE job claiming the record, verified like a peer's. */
#include "follower_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <event2/event.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hclient.h"
#include "idmap.h"
#include "ids.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "stats.h"
#include "upstream.h"

static void rec_start(follower_t *f, rec_t *r);
static void rec_next_src(follower_t *f, rec_t *r);

/* ---- keys, the heap ---------------------------------------------------------------- */

static void key_body(const char *body, uint8_t key[32])
{
	memset(key, 0, 32);
	memcpy(key, body, PITH_BODY_LEN);
}

/* An unresolved id's key: a hash, its first byte never a body's. */
static void key_alias(const pith_id_t *id, uint8_t key[32])
{
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, 32);
	crypto_generichash_update(&st, (const uint8_t *)id->alias_kind, strlen(id->alias_kind) + 1);
	crypto_generichash_update(&st, (const uint8_t *)id->value, strlen(id->value));
	crypto_generichash_final(&st, key, 32);
	key[0] = 0xff;
}

static void heap_swap(follower_t *f, size_t a, size_t b)
{
	rec_t *t = f->heap[a];
	f->heap[a] = f->heap[b];
	f->heap[b] = t;
	f->heap[a]->heap = a;
	f->heap[b]->heap = b;
}

static void heap_up(follower_t *f, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (f->heap[p]->due_us <= f->heap[i]->due_us)
			break;
		heap_swap(f, p, i);
		i = p;
	}
}

static void heap_down(follower_t *f, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < f->nheap && f->heap[l]->due_us < f->heap[m]->due_us)
			m = l;
		if (r < f->nheap && f->heap[r]->due_us < f->heap[m]->due_us)
			m = r;
		if (m == i)
			return;
		heap_swap(f, i, m);
		i = m;
	}
}

static void heap_remove(follower_t *f, rec_t *r)
{
	size_t i = r->heap;
	if (i == NOT_IN_HEAP)
		return;
	r->heap = NOT_IN_HEAP;
	if (--f->nheap == i)
		return;
	f->heap[i] = f->heap[f->nheap];
	f->heap[i]->heap = i;
	heap_up(f, i);
	heap_down(f, f->heap[i]->heap);
}

/* (Re)schedules r at due (µs; 0: now). Never while it is fetching. */
static int schedule(follower_t *f, rec_t *r, int64_t due)
{
	heap_remove(f, r);
	if (f->nheap == f->capheap) {
		size_t cap = f->capheap ? 2 * f->capheap : 256;
		rec_t **h = realloc(f->heap, cap * sizeof(*h));
		if (!h)
			return PITH_ENOMEM;
		f->heap = h;
		f->capheap = cap;
	}
	r->due_us = due;
	r->heap = f->nheap;
	f->heap[f->nheap++] = r;
	heap_up(f, r->heap);
	return 0;
}

/* The record's own slot in the refresh interval, at least half an
 * interval from now: checks spread evenly over the interval. */
static int64_t next_slot(const follower_t *f, const rec_t *r, int64_t now)
{
	int64_t period = f->o.refresh_s * INT64_C(1000000);
	uint64_t h = 1469598103934665603ull;
	for (const char *p = r->body[0] ? r->body : r->alias; p && *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	int64_t phase = (int64_t)(h % (uint64_t)period);
	int64_t k = (now + period / 2 - phase + period - 1) / period;
	return k * period + phase;
}

/* ---- records ------------------------------------------------------------------------- */

static rec_t *rec_new(follower_t *f, const uint8_t key[32])
{
	rec_t *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->act = ACT_REC;
	r->f = f;
	memcpy(r->key, key, 32);
	r->heap = NOT_IN_HEAP;
	r->slot = NO_SLOT;
	if (idmap_put(f->recs, key, r)) {
		free(r);
		return NULL;
	}
	return r;
}

static void rec_free(rec_t *r)
{
	while (r->waiters) {
		waiter_t *w = r->waiters;
		r->waiters = w->next;
		free(w);
	}
	free(r->alias);
	free(r->new_etag);
	free(r->url);
	free(r);
}

static void rec_set_pith(rec_t *r, const char *pith)
{
	snprintf(r->pith, sizeof(r->pith), "%s", pith);
	snprintf(r->body, sizeof(r->body), "%s", pith + PITH_NUMBER_LEN - PITH_BODY_LEN);
}

/* A record by id: found, or made (not scheduled). *err on a bad id. */
static rec_t *rec_for_id(follower_t *f, const pith_id_t *id, int *made)
{
	uint8_t key[32];
	char pith[PITH_NUMBER_LEN + 1] = "";
	pith_err_t e = {0};
	*made = 0;
	if (id->number[0]) {
		snprintf(pith, sizeof(pith), "%s", id->number);
	} else if (id->kind == PITH_ID_FULL && strlen(id->value) == PITH_BODY_LEN) {
		; /* a bare body: no resolve needed, the bundle names its year */
	} else if (store_resolve(f->d.store, id->value, pith, &e)) {
		pith[0] = 0; /* not here: an upstream resolves it */
	}
	if (pith[0])
		key_body(pith + PITH_NUMBER_LEN - PITH_BODY_LEN, key);
	else if (id->kind == PITH_ID_FULL && strlen(id->value) == PITH_BODY_LEN)
		key_body(id->value, key);
	else
		key_alias(id, key);
	rec_t *r = idmap_get(f->recs, key);
	if (r)
		return r;
	r = rec_new(f, key);
	if (!r)
		return NULL;
	*made = 1;
	if (pith[0]) {
		rec_set_pith(r, pith);
	} else if (id->kind == PITH_ID_FULL && strlen(id->value) == PITH_BODY_LEN) {
		snprintf(r->body, sizeof(r->body), "%.*s", PITH_BODY_LEN, id->value);
	} else {
		/* kept as given: pith_id_parse reads it again for the resolve */
		r->alias = strdup(id->value);
		if (!r->alias) {
			free(idmap_del(f->recs, key));
			return NULL;
		}
	}
	return r;
}

/* The store holds a bundle of r: the ETag may be sent. */
static int have_bundle(follower_t *f, const rec_t *r)
{
	int64_t us;
	uint8_t sha[32];
	pith_err_t e = {0};
	return r->pith[0] && !store_bundle_newest(f->d.store, r->pith, &us, sha, &e);
}

/* ---- counting and logging --------------------------------------------------------- */

/* A failed request of r at its upstream: counted, the upstream backed off
 * when the fault is its own, and the next upstream tried. */
static void rec_request_failed(follower_t *f, rec_t *r, const hc_result_t *res)
{
	src_t *s = &f->srcs[r->src];
	int cause = follower_classify(res);
	if (res->curl_code)
		follower_src_error(f, s, cause, res->url, "%s: %s%s", res->url,
			  res->error && *res->error ? res->error : "transfer failed",
			  follower_origin_hint(res));
	else
		follower_src_error(f, s, cause, res->url, "%s answered HTTP %ld", res->url, res->status);
	if (follower_cause_backs_off(cause))
		follower_src_backoff(s, hc_result_retry_after_s(res));
	r->retry = 1; /* its trouble, not an answer about the record */
	r->src++;
	rec_next_src(f, r);
}

const char *follower_origin_hint(const hc_result_t *res)
{
	return res->error && strstr(res->error, "to another origin refused") &&
			       !(!strncmp(res->url, "https:", 6) && strstr(res->error, "refused: http:"))
		       ? " (if that host serves this upstream's files, list its origin with upstream_origin)"
		       : "";
}

/* ---- fetch slots per upstream (issue 53, attack 4) ------------------------------------
 * A record holds a slot of the upstream it is asking from its first
 * request there to its last (the pipeline's time is not the upstream's);
 * an upstream has f->share of them, so that one that drips its answers
 * holds only its share and the others are asked meanwhile. */

static int src_take(follower_t *f, rec_t *r, size_t i)
{
	if (f->srcs[i].inflight >= f->share)
		return 0;
	f->srcs[i].inflight++;
	r->slot = (int)i;
	return 1;
}

static rec_t *wait_pop(src_t *s)
{
	rec_t *w = s->wait_head;
	if (w) {
		s->wait_head = w->wnext;
		if (!s->wait_head)
			s->wait_tail = NULL;
		w->wnext = NULL;
		s->nwait--;
	}
	return w;
}

static void wait_push(src_t *s, rec_t *r)
{
	r->step = ST_WAIT;
	r->wnext = NULL;
	if (s->wait_tail)
		s->wait_tail->wnext = r;
	else
		s->wait_head = r;
	s->wait_tail = r;
	s->nwait++;
}

/* r gives its slot back; the slot goes to the first record waiting for
 * this upstream, else to one waiting for an earlier upstream (which it
 * would have passed over for this one had the slot been free). */
static void src_release(follower_t *f, rec_t *r)
{
	if (r->slot == NO_SLOT)
		return;
	size_t i = (size_t)r->slot;
	r->slot = NO_SLOT;
	f->srcs[i].inflight--;
	rec_t *w = wait_pop(&f->srcs[i]);
	for (size_t k = 0; !w && k < i; k++)
		if ((w = wait_pop(&f->srcs[k]))) {
			f->srcs[k].busy_skips++;
			w->retry = w->busy = 1; /* k said nothing about it */
			w->src = (uint8_t)i;
		}
	if (w)
		rec_next_src(f, w);
}

/* ---- answers ------------------------------------------------------------------------- */

static void neg_put(follower_t *f, const uint8_t key[32])
{
	if (idmap_count(f->neg) >= NEG_MAX)
		return; /* full: unknown ids are asked again, which is only slower */
	int64_t until = node_now_us() + f->o.negative_ttl_s * INT64_C(1000000);
	idmap_del(f->neg, key);
	idmap_put(f->neg, key, (void *)(intptr_t)until);
}

static int neg_has(follower_t *f, const uint8_t key[32])
{
	void *v = idmap_get(f->neg, key);
	if (!v)
		return 0;
	if ((int64_t)(intptr_t)v > node_now_us())
		return 1;
	idmap_del(f->neg, key);
	return 0;
}

static void follow_append(follower_t *f, const char *text);

/* r's fetch is over: its askers are answered, and it is scheduled again
 * (followed) or forgotten. */
static void rec_finish(follower_t *f, rec_t *r, up_answer_t a)
{
	src_release(f, r);
	if (r->serial) {
		follower_active_del(f, r->serial);
		r->serial = 0;
		f->nactive--;
	}
	free(r->url); /* a record waiting for its slot keeps no buffers */
	r->url = NULL;
	r->step = ST_IDLE;
	r->req = 0;
	f->answered[a]++;
	if (a == UP_NOT_FOUND)
		neg_put(f, r->key);
	int asked = r->waiters != NULL;
	while (r->waiters) {
		waiter_t *w = r->waiters;
		r->waiters = w->next;
		f->nwaiters--;
		uint64_t tok = w->token;
		free(w);
		if (f->d.want_done)
			f->d.want_done(f->d.want_arg, tok, a, r->pith);
	}
	/* a record read through is followed from then on */
	if (asked && a == UP_FOUND && !r->followed && r->pith[0]) {
		r->followed = 1;
		f->nfollowed++;
		follow_append(f, r->pith);
	}
	int64_t now = node_now_us();
	if (!r->followed) {
		idmap_del(f->recs, r->key);
		if (r->body[0])
			follow_etags_drop(f->etags, r->body); /* its ETag went with it */
		rec_free(r);
	} else if (a == UP_FAILED || a == UP_RETRY) {
		/* retried when the first upstream rests no more, within one interval */
		int64_t due = next_slot(f, r, now);
		for (size_t i = 0; i < f->nsrcs; i++)
			if (f->srcs[i].blocked_until_us < due)
				due = f->srcs[i].blocked_until_us > now + 1000000 ?
					      f->srcs[i].blocked_until_us : now + 1000000;
		if (r->busy && due > now + 1000000)
			due = now + 1000000; /* an upstream was only busy: soon again */
		schedule(f, r, due);
	} else {
		schedule(f, r, next_slot(f, r, now));
	}
}

/* ---- requests ------------------------------------------------------------------------ */

static void on_resolve(void *arg, const hc_result_t *res);
static void on_bundle(void *arg, const hc_result_t *res);

static int rec_get(follower_t *f, rec_t *r, const char *inm, size_t cap, hc_done_fn done)
{
	hc_req_t q = {.url = r->url, .if_none_match = inm, .body_cap = cap, .done = done,
		      .arg = r, .max_redirects = done == on_bundle ? HC_BUNDLE_REDIRECTS : 0};
	f->srcs[r->src].requests++;
	r->req = hc_get(f->hc, &q);
	return r->req ? 0 : PITH_ENOMEM;
}

/* The bundle URL of layout r->cand at upstream r->src: the manifest's
 * pattern, else /pith/{suffix}/bundle.json, then the .well-known form.
 * 1 when there is no further layout. */
static int bundle_url(follower_t *f, rec_t *r)
{
	src_t *s = &f->srcs[r->src];
	pith_err_t e = {0};
	return pith_bundle_url(s->pattern, s->base, r->cand, r->body, r->url, URL_CAP, &e) ? 1 : 0;
}

static void bundle_request(follower_t *f, rec_t *r)
{
	if (bundle_url(f, r)) {
		r->src++;
		rec_next_src(f, r);
		return;
	}
	r->step = ST_BUNDLE;
	const char *inm = r->body[0] ? follow_etags_match(f->etags, r->body, r->url) : NULL;
	if (inm && !have_bundle(f, r))
		inm = NULL;
	if (rec_get(f, r, inm, f->o.max_body, on_bundle))
		rec_finish(f, r, UP_FAILED);
}

static void resolve_request(follower_t *f, rec_t *r)
{
	pith_id_t id;
	pith_err_t e = {0};
	if (pith_id_parse(r->alias, &id, &e)) {
		rec_finish(f, r, UP_NOT_FOUND);
		return;
	}
	const char *k = id.kind == PITH_ID_ARXIV ? "arxiv" : id.kind == PITH_ID_DOI ? "doi" : "pith";
	char *esc = curl_easy_escape(NULL, id.kind == PITH_ID_ARXIV ? id.arxiv : id.value, 0);
	if (!esc) {
		rec_finish(f, r, UP_FAILED);
		return;
	}
	snprintf(r->url, URL_CAP, "%s/api/pith-number/resolve?%s=%s&json=true",
		 f->srcs[r->src].base, k, esc);
	curl_free(esc);
	r->step = ST_RESOLVE;
	if (rec_get(f, r, NULL, SMALL_MAX, on_resolve))
		rec_finish(f, r, UP_FAILED);
}

/* Moves r on to upstream r->src, or past it to the first that is not
 * resting; ends the fetch when none is left. */
static void rec_next_src(follower_t *f, rec_t *r)
{
	int64_t now = node_now_us();
	for (;;) {
		while (r->src < f->nsrcs && f->srcs[r->src].blocked_until_us > now) {
			r->retry = 1; /* a resting upstream said nothing: "try again", never "not found" */
			r->src++;
		}
		if (r->slot != NO_SLOT && (size_t)r->slot != r->src)
			src_release(f, r);
		if (r->src >= f->nsrcs) {
			/* "not found" only when every upstream said so */
			rec_finish(f, r, r->retry ? UP_RETRY : r->found_any ? UP_FAILED : UP_NOT_FOUND);
			return;
		}
		if (r->slot != NO_SLOT || src_take(f, r, r->src))
			break;
		/* its slots are taken: a later upstream with one free, else wait */
		size_t j = r->src + 1;
		while (j < f->nsrcs &&
		       (f->srcs[j].blocked_until_us > now || f->srcs[j].inflight >= f->share))
			j++;
		if (j >= f->nsrcs) {
			wait_push(&f->srcs[r->src], r);
			return;
		}
		f->srcs[r->src].busy_skips++;
		r->retry = r->busy = 1; /* that upstream said nothing about it */
		r->src = (uint8_t)j;
	}
	r->cand = 0;
	if (r->body[0])
		bundle_request(f, r);
	else
		resolve_request(f, r);
}

/* The record of an answered request (a record is never freed while a
 * request of its own is in flight: hc_free cancels them first). */
static rec_t *rec_of(void *arg, const hc_result_t *res)
{
	rec_t *r = arg;
	r->req = 0;
	r->f->srcs[r->src].bytes += res->bytes;
	return r;
}

/* A resolved alias: the record moves to its body's key, joining a record
 * already known by it. */
static void rec_resolved(follower_t *f, rec_t *r, const char *pith)
{
	uint8_t key[32];
	key_body(pith + PITH_NUMBER_LEN - PITH_BODY_LEN, key);
	rec_t *o = idmap_get(f->recs, key);
	if (o && o != r) {
		/* its askers and its following join the known record */
		while (r->waiters) {
			waiter_t *w = r->waiters;
			r->waiters = w->next;
			w->next = o->waiters;
			o->waiters = w;
		}
		if (r->followed && !o->followed) {
			o->followed = 1;
		} else if (r->followed) {
			f->nfollowed--;
		}
		r->followed = 0;
		rec_finish(f, r, UP_FOUND); /* frees r: nothing waits on it now */
		if (o->step == ST_IDLE) {
			schedule(f, o, 0);
			follower_pump(f);
		}
		return;
	}
	idmap_del(f->recs, r->key);
	memcpy(r->key, key, 32);
	if (idmap_put(f->recs, r->key, r)) {
		rec_finish(f, r, UP_FAILED);
		return;
	}
	free(r->alias);
	r->alias = NULL;
	rec_set_pith(r, pith);
	bundle_request(f, r);
}

static void on_resolve(void *arg, const hc_result_t *res)
{
	rec_t *r = rec_of(arg, res);
	follower_t *f = r->f;
	src_t *s = &f->srcs[r->src];
	char pith[PITH_NUMBER_LEN + 1];
	pith_err_t e = {0};
	int rc;
	if (res->curl_code || (res->status >= 500 || res->status == 429)) {
		rec_request_failed(f, r, res);
		return;
	}
	s->fails = 0;
	if (res->status == 200) {
		rc = pith_resolve_answer_parse(res->body, res->body_len, NULL, pith, &e);
	} else if (res->status >= 300 && res->status < 400 && res->location[0]) {
		pith_id_t id;
		rc = pith_resolve_location_parse(res->location, strlen(res->location), s->base, &id,
						 &e);
		if (!rc)
			snprintf(pith, sizeof(pith), "%.*s", PITH_NUMBER_LEN,
				 id.number[0] ? id.number : id.value);
	} else {
		rc = PITH_ENOTFOUND; /* 404 and the like */
	}
	if (rc == PITH_ENOTFOUND) {
		s->not_found++;
		r->src++;
		rec_next_src(f, r);
		return;
	}
	if (rc) {
		follower_src_error(f, s, C_BAD_ANSWER, res->url, "%s: %s", res->url, e.msg);
		r->found_any = 1;
		r->src++;
		rec_next_src(f, r);
		return;
	}
	if (strlen(pith) == PITH_BODY_LEN) {
		/* a bare body answered: its year comes with the bundle */
		uint8_t key[32];
		key_body(pith, key);
		snprintf(r->body, sizeof(r->body), "%.26s", pith);
		idmap_del(f->recs, r->key);
		memcpy(r->key, key, 32);
		if (idmap_get(f->recs, key) || idmap_put(f->recs, key, r)) {
			rec_finish(f, r, UP_FAILED);
			return;
		}
		free(r->alias);
		r->alias = NULL;
		bundle_request(f, r);
		return;
	}
	rec_resolved(f, r, pith);
}

static void on_bundle(void *arg, const hc_result_t *res)
{
	rec_t *r = rec_of(arg, res);
	follower_t *f = r->f;
	src_t *s = &f->srcs[r->src];
	if (res->curl_code || res->status >= 500 || res->status == 429 ||
	    (res->status >= 300 && res->status < 400 && res->status != 304)) {
		rec_request_failed(f, r, res);
		return;
	}
	s->fails = 0;
	if (res->status == 304) {
		s->not_modified++;
		s->unchanged++;
		rec_finish(f, r, UP_FOUND);
		return;
	}
	if (res->status == 404 || res->status == 410) {
		r->cand++;
		if (bundle_url(f, r) == 0) {
			bundle_request(f, r);
			return;
		}
		s->not_found++;
		r->src++;
		rec_next_src(f, r);
		return;
	}
	if (res->status != 200) {
		rec_request_failed(f, r, res);
		return;
	}
	s->bundles++;
	ingest_job_t *job = ingest_job_new(INGEST_BUNDLE, res->body, res->body_len);
	if (!job) {
		rec_finish(f, r, UP_FAILED);
		return;
	}
	job->has_claim = 1;
	snprintf(job->claimed_pith, sizeof(job->claimed_pith), "%s", r->pith[0] ? r->pith : r->body);
	job->follow = r->serial;
	job->durable = 1; /* its ETag is saved once it is stored */
	free(r->new_etag);
	r->new_etag = res->etag && *res->etag ? strdup(res->etag) : NULL;
	r->step = ST_INGEST;
	src_release(f, r); /* the pipeline's time is not the upstream's */
	ingest_submit(f->d.ingest, job);
}

int follower_job_done(follower_t *f, const ingest_job_t *job)
{
	if (!f || !job->follow)
		return 0;
	uint8_t key[32];
	idmap_key_u64(job->follow, key);
	int *act = idmap_get(f->active, key);
	if (act && *act == ACT_FEED_ITEM) {
		follower_feed_job_done(f, act, job);
		return 1;
	}
	rec_t *r = (rec_t *)act;
	if (!r || r->step != ST_INGEST)
		return 1;
	src_t *s = &f->srcs[r->src];
	if (job->rc == 0) {
		if (job->bundle_outcome == STORE_BUNDLE_NEWER)
			s->stored++;
		else
			s->unchanged++;
		if (!r->pith[0] && job->subject[0])
			rec_set_pith(r, job->subject);
		if (r->body[0] &&
		    (!r->new_etag || follow_etags_put(f->etags, r->body, r->new_etag, r->url)))
			follow_etags_drop(f->etags, r->body);
		free(r->new_etag);
		r->new_etag = NULL;
		f->etags_dirty = 1;
		rec_finish(f, r, UP_FOUND);
		return 1;
	}
	const char *reason = job->reason ? job->reason : "invalid";
	follower_count_rejected(s, reason);
	follower_src_error(f, s, -1, r->url, "%s: bundle rejected (%s): %s", r->url, reason, job->msg);
	free(r->new_etag);
	r->new_etag = NULL;
	if (job->fail == INGEST_FAIL_SHUTDOWN || job->fail == INGEST_FAIL_COMMIT ||
	    job->fail == INGEST_FAIL_OOM || job->fail == INGEST_FAIL_STORE) {
		rec_finish(f, r, UP_FAILED); /* our side's trouble */
		return 1;
	}
	r->found_any = 1;
	r->src++; /* another upstream may hold a good one */
	rec_next_src(f, r);
	return 1;
}

/* ---- running ------------------------------------------------------------------------ */

uint64_t follower_active_add(follower_t *f, void *obj)
{
	uint64_t serial = ++f->next_serial;
	uint8_t key[32];
	idmap_key_u64(serial, key);
	return idmap_put(f->active, key, obj) ? 0 : serial;
}

void follower_active_del(follower_t *f, uint64_t serial)
{
	uint8_t key[32];
	idmap_key_u64(serial, key);
	idmap_del(f->active, key);
}

static void rec_start(follower_t *f, rec_t *r)
{
	r->url = malloc(URL_CAP);
	r->serial = r->url ? follower_active_add(f, r) : 0;
	if (!r->serial) {
		free(r->url);
		r->url = NULL;
		schedule(f, r, node_now_us() + 1000000);
		return;
	}
	f->nactive++;
	r->src = 0;
	r->found_any = 0;
	r->retry = r->busy = 0;
	rec_next_src(f, r);
}

void follower_pump(follower_t *f)
{
	for (size_t i = 0; i < f->nsrcs; i++)
		if (!f->srcs[i].manifest_seen)
			return; /* the layouts are not known yet */
	int64_t now = node_now_us();
	while (f->nheap && f->nactive < f->o.max_inflight && f->heap[0]->due_us <= now) {
		rec_t *r = f->heap[0];
		heap_remove(f, r);
		rec_start(f, r);
	}
}

static int etags_save(follower_t *f);

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	follower_t *f = arg;
	int64_t now = node_now_us();
	for (size_t i = 0; i < f->nsrcs; i++)
		if (f->srcs[i].manifest == 2 && now >= f->srcs[i].manifest_next_us)
			follower_manifest_ask(f, i); /* the layouts may have moved */
	follower_pump(f);
	follower_feed_tick(f);
	if (f->etags_dirty && now - f->etags_saved_us > ETAG_SAVE_US)
		etags_save(f);
}

/* ---- files: the follow list and the ETags ------------------------------------------ */

/* Adds one id to the follow list (not to DATA/follow). 0, 1 if it was
 * followed already, or an error. */
static int follow_add(follower_t *f, const char *text, int now, pith_err_t *err)
{
	pith_id_t id;
	if (pith_id_parse(text, &id, err))
		return PITH_EINVAL;
	int made;
	rec_t *r = rec_for_id(f, &id, &made);
	if (!r)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	if (r->followed)
		return 1;
	r->followed = 1;
	f->nfollowed++;
	if (r->step == ST_IDLE) {
		/* a record the store holds waits for its slot: a restart is no burst */
		int64_t t = node_now_us();
		schedule(f, r, now || !have_bundle(f, r) ? 0 : next_slot(f, r, t) - f->o.refresh_s * INT64_C(500000));
	}
	return 0;
}

static void follow_append(follower_t *f, const char *text)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", f->data_dir, FOLLOW_FILE);
	FILE *fp = fopen(path, "a");
	if (!fp) {
		log_warn("cannot append to %s: %s", path, strerror(errno));
		return;
	}
	for (const char *p = text; *p; p++)
		if ((unsigned char)*p >= 0x20 && *p != 0x7f && *p != '#')
			fputc(*p, fp);
	fputc('\n', fp);
	if (fflush(fp) || fsync(fileno(fp)))
		log_warn("cannot write %s: %s", path, strerror(errno));
	fclose(fp);
}

/* Reads a follow file: one id a line, '#' comments. A bad line is an
 * error (strict) or a warning. */
static int follow_load(follower_t *f, const char *path, int strict, pith_err_t *err)
{
	FILE *fp = fopen(path, "r");
	if (!fp) {
		if (!strict && errno == ENOENT)
			return 0;
		return pith_err_set(err, PITH_EIO, "follow: cannot open %s: %s", path, strerror(errno));
	}
	char line[1024];
	size_t ln = 0;
	int rc = 0;
	while (fgets(line, sizeof(line), fp)) {
		ln++;
		char *h = strchr(line, '#');
		if (h)
			*h = 0;
		size_t n = strlen(line);
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
			     line[n - 1] == '\t'))
			line[--n] = 0;
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			continue;
		pith_err_t e = {0};
		int r = follow_add(f, p, 0, &e);
		if (r < 0 && r != PITH_EINVAL) {
			rc = pith_err_set(err, r, "%s", e.msg);
			break;
		}
		if (r == PITH_EINVAL) {
			if (strict) {
				rc = pith_err_set(err, PITH_EINVAL, "%s:%zu: %s", path, ln, e.msg);
				break;
			}
			log_warn("%s:%zu: %s (skipped)", path, ln, e.msg);
		}
	}
	fclose(fp);
	return rc;
}

/* DATA/upstream-etags, whole: "BODY ETAG URL" a line (follow_etags.h). */
static int etags_save(follower_t *f)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", f->data_dir, ETAG_FILE);
	f->etags_saved_us = node_now_us();
	if (follow_etags_save(f->etags, path)) {
		log_warn("cannot write %s: %s", path, strerror(errno));
		return PITH_EIO;
	}
	f->etags_dirty = 0;
	return 0;
}

static int is_followed_body(void *arg, const char *body)
{
	uint8_t key[32];
	key_body(body, key);
	return idmap_get(arg, key) != NULL;
}

/* Loads the ETags of followed records; lines that do not parse, or of
 * records not followed, are dropped (an ETag only saves a download). */
static void etags_load(follower_t *f)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", f->data_dir, ETAG_FILE);
	if (follow_etags_load(f->etags, path))
		log_warn("cannot read %s: %s", path, strerror(errno));
	follow_etags_filter(f->etags, is_followed_body, f->recs);
}

/* ---- the API ---------------------------------------------------------------------- */

int follower_new(const follower_deps_t *d, const follower_opts_t *o, follower_t **out,
		 pith_err_t *err)
{
	*out = NULL;
	follower_t *f = calloc(1, sizeof(*f));
	if (!f)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	f->d = *d;
	f->o = *o;
	if (f->o.refresh_s < 1)
		f->o.refresh_s = 1;
	if (!f->o.max_inflight)
		f->o.max_inflight = 16;
	if (!f->o.max_body)
		f->o.max_body = 16u << 20;
	if (!f->o.feed_page || f->o.feed_page > 10000)
		f->o.feed_page = 1000;
	if (f->o.deadline_s <= 0)
		f->o.deadline_s = 60;
	f->share = f->o.src_inflight ? f->o.src_inflight
				     : o->n_urls > 1 ? f->o.max_inflight / 2 : f->o.max_inflight;
	if (f->share > f->o.max_inflight)
		f->share = f->o.max_inflight;
	if (!f->share)
		f->share = 1;
	snprintf(f->data_dir, sizeof(f->data_dir), "%s", o->data_dir);
	f->next_serial = o->first_serial;
	int rc = 0;
	f->recs = idmap_new();
	f->active = idmap_new();
	f->neg = idmap_new();
	f->logged = idmap_new();
	f->etags = follow_etags_new();
	f->srcs = calloc(o->n_urls ? o->n_urls : 1, sizeof(*f->srcs));
	f->tick = event_new(d->base, -1, EV_PERSIST, tick_cb, f);
	if (!f->recs || !f->active || !f->neg || !f->logged || !f->etags || !f->srcs || !f->tick) {
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	f->o.origins = NULL;
	f->o.n_origins = 0;
	if (o->n_origins && !(f->origins = calloc(o->n_origins, sizeof(char *)))) {
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < o->n_origins; i++, f->o.n_origins++)
		if (!(f->origins[i] = strdup(o->origins[i]))) {
			rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
			goto fail;
		}
	f->o.origins = (const char *const *)f->origins;
	f->nsrcs = o->n_urls;
	for (size_t i = 0; i < o->n_urls; i++) {
		f->srcs[i].f = f;
		snprintf(f->srcs[i].base, sizeof(f->srcs[i].base), "%s", o->urls[i]);
		size_t n = strlen(f->srcs[i].base);
		while (n && f->srcs[i].base[n - 1] == '/')
			f->srcs[i].base[--n] = 0;
	}
	hc_opts_t ho;
	hc_opts_default(&ho);
	ho.ca_file = o->ca_file && *o->ca_file ? o->ca_file : NULL;
	ho.user_agent = "pithd/1";
	/* the records' slots, each feed's share, a feed page and a manifest per
	 * upstream: the client's own queue never holds one upstream's
	 * transfers behind another's */
	ho.max_inflight = f->o.max_inflight + f->nsrcs * (f->share + 2);
	ho.max_host_conns = f->o.max_inflight;
	if (o->stall_s > 0)
		ho.low_speed_time_s = (long)o->stall_s;
	ho.total_timeout_s = (long)f->o.deadline_s;
	ho.origins = f->o.origins;
	ho.n_origins = f->o.n_origins;
	if ((rc = hc_new(d->base, &ho, &f->hc, err)))
		goto fail;
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", f->data_dir, FOLLOW_FILE);
	if (o->follow_file && *o->follow_file && (rc = follow_load(f, o->follow_file, 1, err)))
		goto fail;
	if ((rc = follow_load(f, path, 0, err)))
		goto fail;
	etags_load(f);
	for (size_t i = 0; i < f->nsrcs; i++)
		follower_manifest_ask(f, i);
	struct timeval tv = {0, TICK_MS * 1000};
	event_add(f->tick, &tv);
	if (f->nsrcs)
		log_info("following %zu upstream(s), %zu record(s), refresh %llds", f->nsrcs,
			 f->nfollowed, (long long)f->o.refresh_s);
	*out = f;
	return 0;
fail:
	follower_free(f);
	return rc;
}

static int free_one(void *arg, const uint8_t id[32], void *val)
{
	(void)arg;
	(void)id;
	rec_free(val);
	return 0;
}

void follower_free_(follower_t *f)
{
	if (!f)
		return;
	if (f->etags_dirty)
		etags_save(f);
	follower_feed_flush(f);
	hc_free(f->hc); /* no callbacks from here on */
	for (size_t i = 0; f->srcs && i < f->nsrcs; i++)
		follower_feed_free(f, &f->srcs[i]);
	if (f->tick)
		event_free(f->tick);
	if (f->recs)
		idmap_each(f->recs, free_one, NULL);
	idmap_free(f->recs);
	idmap_free(f->active);
	idmap_free(f->neg);
	idmap_free(f->logged);
	follow_etags_free(f->etags);
	for (size_t i = 0; f->origins && i < f->o.n_origins; i++)
		free(f->origins[i]);
	free(f->origins);
	free(f->heap);
	free(f->srcs);
	free(f);
}

uint64_t follower_last_serial(const follower_t *f)
{
	return f->next_serial;
}

int follower_follow(follower_t *f, const char *text, pith_err_t *err)
{
	int rc = follow_add(f, text, 1, err);
	if (rc == 0) {
		follow_append(f, text);
		follower_pump(f);
	}
	return rc;
}

int follower_want(follower_t *f, const char *text, uint64_t token)
{
	pith_id_t id;
	pith_err_t e = {0};
	if (!f->nsrcs)
		return PITH_ENOTFOUND;
	if (pith_id_parse(text, &id, &e))
		return PITH_EINVAL;
	if (f->nwaiters >= WAITERS_MAX)
		return PITH_ETOOBIG;
	int made;
	rec_t *r = rec_for_id(f, &id, &made);
	if (!r)
		return PITH_ETOOBIG;
	if (r->step == ST_IDLE && neg_has(f, r->key)) {
		if (made) {
			idmap_del(f->recs, r->key);
			rec_free(r);
		}
		return PITH_ENOTFOUND;
	}
	waiter_t *w = calloc(1, sizeof(*w));
	if (!w) {
		if (made) {
			idmap_del(f->recs, r->key);
			rec_free(r);
		}
		return PITH_ETOOBIG;
	}
	w->token = token;
	w->next = r->waiters;
	r->waiters = w;
	f->nwaiters++;
	if (r->step == ST_IDLE)
		schedule(f, r, 0);
	event_active(f->tick, 0, 0); /* started from the loop, never inside this call */
	return 0;
}

int64_t follower_retry_after_s(follower_t *f)
{
	int64_t now = node_now_us(), best = -1;
	for (size_t i = 0; i < f->nsrcs; i++) {
		int64_t left = f->srcs[i].blocked_until_us - now;
		if (left > 0 && (best < 0 || left < best))
			best = left;
	}
	return best < 0 ? -1 : (best + 999999) / 1000000;
}
