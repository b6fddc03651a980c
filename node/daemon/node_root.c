/* The node's state root: node_root.h. */
#include "node_root.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ids.h"
#include "json.h"

typedef struct kept {
	pith_sr_doc_t d;
	uint64_t cursor; /* d.cursor as a number (0: null) */
	char *doc;       /* the signed document's bytes */
	size_t len;
} kept_t;

struct noderoot {
	store_t *st;
	pith_sr_t *t;
	uint64_t cursor;        /* the last change told */
	pith_key_t key;
	uint8_t sk[64];
	unsigned interval_s;
	kept_t *hist;           /* a ring of cap, newest at (head + n - 1) % cap */
	size_t cap, head, n;
	int64_t last_sign_us;   /* wall clock of the last signing (0: never) */
	int64_t last_demand_us; /* of the last signing on demand */
	int want;               /* noderoot_want: sign on demand at the next tick the gap allows */
	void (*on_signed)(void *arg);
	void *arg;
	store_sr_reader_t *reader; /* the view of the records the tree was last hashed over */
	int64_t view_us;           /* when (monotonic); readers' answers reuse it for a while */
	noderoot_stats_t s;
};

/* The tree's listings: through the open reader (one iterator, one view
 * of the records) when there is one. */
static int list_leaves(void *ctx, const uint8_t key[PITH_SR_KEY_BYTES], unsigned plen,
		       pith_sr_leaf_t *out, size_t cap, size_t *n)
{
	noderoot_t *r = ctx;
	return store_sr_list_in(r->st, r->reader, key, plen, out, cap, n);
}

/* Ends the view a flush opened (it pins the store's files). */
static void reader_end(noderoot_t *r)
{
	store_sr_reader_free(r->reader);
}

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int build(noderoot_t *r, pith_err_t *err)
{
	int64_t t0 = mono_us();
	/* the log's end before the scan: a change committed while it runs is
	 * told again by the next catch-up (an upsert of what the tree has is
	 * harmless) */
	uint64_t at = store_changes_last(r->st);
	pith_sr_leaf_t *l = NULL;
	size_t n = 0;
	int rc = store_sr_leaves(r->st, &l, &n, err);
	if (!rc)
		rc = pith_sr_build(r->t, l, n, err);
	free(l);
	if (rc)
		return rc;
	r->cursor = at;
	r->s.rebuilds++;
	r->s.build_seconds = (double)(mono_us() - t0) / 1e6;
	r->s.records = n;
	return 0;
}

noderoot_t *noderoot_new(store_t *st, const uint8_t pk[32], const uint8_t sk[64],
			 const noderoot_opts_t *o, pith_err_t *err)
{
	noderoot_t *r = calloc(1, sizeof(*r));
	if (!r) {
		pith_err_set(err, PITH_ENOMEM, "state root: out of memory");
		return NULL;
	}
	r->st = st;
	r->interval_s = o && o->interval_s ? o->interval_s : NODEROOT_INTERVAL_DEFAULT;
	r->cap = o && o->history ? o->history : NODEROOT_HISTORY_DEFAULT;
	if (r->cap > NODEROOT_HISTORY_MAX)
		r->cap = NODEROOT_HISTORY_MAX;
	if (o) {
		r->on_signed = o->on_signed;
		r->arg = o->arg;
	}
	memcpy(r->key.pk, pk, 32);
	memcpy(r->sk, sk, 64);
	pith_key_fingerprint(pk, r->key.fp);
	snprintf(r->key.key_id, sizeof(r->key.key_id), "node-%s", r->key.fp);
	r->hist = calloc(r->cap, sizeof(*r->hist));
	r->t = pith_sr_new(o ? o->bucket : 0, list_leaves, r);
	if (!r->hist || !r->t) {
		pith_err_set(err, PITH_ENOMEM, "state root: out of memory");
		noderoot_free_(r);
		return NULL;
	}
	if (build(r, err)) {
		noderoot_free_(r);
		return NULL;
	}
	return r;
}

void noderoot_free_(noderoot_t *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->cap && r->hist; i++)
		free(r->hist[i].doc);
	free(r->hist);
	reader_end(r);
	pith_sr_free(r->t);
	free(r);
}

typedef struct told {
	noderoot_t *r;
	int rc;
	uint64_t n;
} told_t;

static int tell(void *arg, const store_change_t *ch)
{
	told_t *t = arg;
	pith_sr_leaf_t l;
	memcpy(l.pith, ch->pith_number, sizeof(l.pith));
	memcpy(l.state, ch->state_hash, 32);
	int rc = pith_sr_upsert_leaf(t->r->t, &l);
	if (rc) {
		t->rc = rc;
		return 1;
	}
	t->n++;
	return 0;
}

static long tell_changes(noderoot_t *r, size_t limit, pith_err_t *err);

long noderoot_catch_up(noderoot_t *r, size_t limit, pith_err_t *err)
{
	/* while readers' answers use the view of the last hash, the tree is
	 * left as it was hashed: what they list agrees with it */
	if (r->reader && mono_us() - r->view_us < NODEROOT_VIEW_US)
		return 0;
	reader_end(r);
	return tell_changes(r, limit, err);
}

static long tell_changes(noderoot_t *r, size_t limit, pith_err_t *err)
{
	told_t t = {.r = r};
	uint64_t next = r->cursor;
	int rc = store_changes_each(r->st, r->cursor, limit, tell, &t, &next, err);
	if (t.rc)
		return pith_err_set(err, t.rc, "state root: a change of the log: %s", pith_err_name(t.rc));
	if (rc)
		return rc;
	r->cursor = next;
	r->s.changes += t.n;
	r->s.cursor = next;
	return (long)t.n;
}

/* noderoot_current, leaving the view of the records open for the
 * answers after it. Not fresh: a view younger than NODEROOT_VIEW_US is
 * answered from as it is (readers make at most one hash a while, however
 * many they ask). */
static int current_open(noderoot_t *r, uint8_t root[32], uint64_t *count, uint64_t *cursor,
			int fresh, pith_err_t *err)
{
	if (!fresh && r->reader && mono_us() - r->view_us < NODEROOT_VIEW_US) {
		int rc = pith_sr_root(r->t, root); /* hashed already: no listing */
		if (count)
			*count = pith_sr_count(r->t);
		if (cursor)
			*cursor = r->cursor;
		return rc ? pith_err_set(err, rc, "state root: %s", pith_err_name(rc)) : 0;
	}
	reader_end(r);
	long got = tell_changes(r, 0, err);
	if (got < 0)
		return (int)got;
	int64_t t0 = mono_us();
	/* one view of the records for the flush and the answer after it
	 * (noderoot_answer ends it): it holds at least every change told */
	r->reader = store_sr_reader_new(r->st, err); /* NULL: an iterator a listing */
	r->view_us = mono_us();
	int rc = pith_sr_root(r->t, root);
	if (rc == PITH_EMISMATCH) {
		/* the tree was not told of something the store holds: once
		 * more from the store, then the changes since */
		reader_end(r);
		if ((rc = build(r, err)) || (got = tell_changes(r, 0, err)) < 0)
			return rc ? rc : (int)got;
		r->reader = store_sr_reader_new(r->st, err);
		r->view_us = mono_us();
		rc = pith_sr_root(r->t, root);
	}
	if (rc)
		return pith_err_set(err, rc, "state root: hashing the tree: %s", pith_err_name(rc));
	r->s.flushes++;
	r->s.flush_seconds = (double)(mono_us() - t0) / 1e6;
	r->s.records = pith_sr_count(r->t);
	if (count)
		*count = pith_sr_count(r->t);
	if (cursor)
		*cursor = r->cursor;
	return 0;
}

int noderoot_current(noderoot_t *r, uint8_t root[32], uint64_t *count, uint64_t *cursor,
		     pith_err_t *err)
{
	int rc = current_open(r, root, count, cursor, 1, err);
	reader_end(r);
	return rc;
}

static const kept_t *newest(const noderoot_t *r)
{
	return r->n ? &r->hist[(r->head + r->n - 1) % r->cap] : NULL;
}

static void utc(int64_t unix_us, char out[32])
{
	time_t s = (time_t)(unix_us / 1000000);
	struct tm tm;
	gmtime_r(&s, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int noderoot_sign(noderoot_t *r, int64_t now_unix_us, int force, pith_err_t *err)
{
	uint8_t root[32];
	uint64_t count, cursor;
	int rc;
	/* the root is of its cursor when no change was committed after the
	 * catch-up until the end of the hash (the view the flush listed was
	 * made after the catch-up): the log has nothing new after it. A few
	 * tries, then wait for the next tick. */
	for (int tries = 0;; tries++) {
		rc = noderoot_current(r, root, &count, &cursor, err);
		reader_end(r);
		if (rc)
			return rc;
		long more = tell_changes(r, 1, err);
		if (more < 0)
			return (int)more;
		if (!more)
			break;
		if (tries == 2)
			return 0;
	}
	const kept_t *k = newest(r);
	if (force != 1 && k && !memcmp(k->d.root, root, 32) && k->d.count == count &&
	    (force != NODEROOT_FORCE_MOVED || k->cursor == cursor))
		return 0;
	pith_sr_doc_t d = {0};
	memcpy(d.root, root, 32);
	d.count = count;
	if (cursor)
		snprintf(d.cursor, sizeof(d.cursor), "%" PRIu64, cursor);
	utc(now_unix_us, d.signed_at);
	pith_buf_t out = PITH_BUF_INIT;
	if ((rc = pith_sr_doc_sign(&d, &r->key, r->sk, &out, err))) {
		pith_buf_release(&out);
		return rc;
	}
	kept_t *slot;
	if (r->n == r->cap) {
		slot = &r->hist[r->head];
		r->head = (r->head + 1) % r->cap;
	} else {
		slot = &r->hist[(r->head + r->n) % r->cap];
		r->n++;
	}
	free(slot->doc);
	slot->d = d;
	slot->cursor = cursor;
	slot->len = out.len;
	slot->doc = (char *)out.data; /* the buffer's bytes move to the slot */
	out.data = NULL;
	pith_buf_release(&out);
	r->last_sign_us = now_unix_us;
	r->s.signed_docs++;
	if (r->on_signed)
		r->on_signed(r->arg);
	return 1;
}

void noderoot_want(noderoot_t *r, int64_t now_unix_us)
{
	if (!r)
		return;
	r->want = 1;
	noderoot_tick(r, now_unix_us);
}

int noderoot_latest(const noderoot_t *r, const char **doc, size_t *len, uint8_t root[32],
		    uint64_t *count, uint64_t *cursor)
{
	const kept_t *k = r ? (r->n ? &r->hist[(r->head + r->n - 1) % r->cap] : NULL) : NULL;
	if (!k)
		return 0;
	*doc = k->doc;
	*len = k->len;
	memcpy(root, k->d.root, 32);
	*count = k->d.count;
	*cursor = k->cursor;
	return 1;
}

void noderoot_tick(noderoot_t *r, int64_t now_unix_us)
{
	if (r && r->want && now_unix_us - r->last_demand_us >= NODEROOT_DEMAND_GAP_US) {
		/* on demand: a commit meeting it leaves want set (the next tick) */
		pith_err_t e = {0};
		int rc = noderoot_sign(r, now_unix_us, NODEROOT_FORCE_MOVED, &e);
		const kept_t *k = newest(r);
		if (rc > 0)
			r->last_demand_us = now_unix_us;
		if (rc < 0 || (k && k->cursor == r->cursor))
			r->want = 0;
	}
	if (!r || (r->last_sign_us && now_unix_us - r->last_sign_us < (int64_t)r->interval_s * 1000000))
		return;
	pith_err_t err = {0};
	if (noderoot_sign(r, now_unix_us, 0, &err) == 0 && r->n)
		r->last_sign_us = now_unix_us; /* nothing new: wait the interval again */
}

/* Signs on demand (a reader asked for a root or a proof of a tree that
 * moved since the last signing), at most once a NODEROOT_DEMAND_GAP_US. */
static void on_demand(noderoot_t *r, int64_t now_unix_us)
{
	if (r->n && now_unix_us - r->last_demand_us < NODEROOT_DEMAND_GAP_US)
		return;
	pith_err_t err = {0};
	if (noderoot_sign(r, now_unix_us, 0, &err) > 0)
		r->last_demand_us = now_unix_us;
}

static int fail(char *why, size_t whylen, int status, const char *msg)
{
	snprintf(why, whylen, "%s", msg);
	return status;
}

static void summary_json(const kept_t *k, pith_buf_t *b)
{
	char root[65], doc[65];
	pith_hex_encode(k->d.root, 32, root);
	pith_hex_encode(k->d.doc_sha256, 32, doc);
	pith_buf_puts(b, "{\"feed_cursor\":");
	if (k->d.cursor[0])
		pith_buf_printf(b, "\"%s\"", k->d.cursor);
	else
		pith_buf_puts(b, "null");
	pith_buf_printf(b, ",\"record_count\":%" PRIu64 ",\"root_document_sha256\":\"%s\","
			"\"root_sha256\":\"%s\",\"signed_at\":\"%s\"}",
			k->d.count, doc, root, k->d.signed_at);
}

static int answer_latest(noderoot_t *r, const char *arg, int64_t now, pith_buf_t *body,
			 char etag[65], char *why, size_t whylen)
{
	if (!arg || !arg[0])
		on_demand(r, now); /* the tree moved since: a root of now (at most once a second) */
	const kept_t *k = NULL;
	if (arg && arg[0]) {
		char *end;
		uint64_t c = strtoull(arg, &end, 10);
		if (*end || arg[0] < '0' || arg[0] > '9' || strlen(arg) > 20)
			return fail(why, whylen, 400, "cursor: not a change feed cursor (decimal digits)");
		for (size_t i = r->n; i-- > 0;) {
			const kept_t *x = &r->hist[(r->head + i) % r->cap];
			if (x->cursor <= c) {
				k = x;
				break;
			}
		}
		if (!k)
			return fail(why, whylen, 404, "no kept root is at or before this cursor "
				    "(see /api/root/history for the ones kept)");
	} else if (!(k = newest(r))) {
		return fail(why, whylen, 503, "no state root signed yet: try again shortly");
	}
	pith_buf_append(body, k->doc, k->len);
	pith_buf_putc(body, '\n');
	pith_hex_encode(k->d.doc_sha256, 32, etag);
	return 200;
}

static int answer_history(noderoot_t *r, pith_buf_t *body)
{
	pith_buf_puts(body, "{\"history_version\":\"1\",\"roots\":[");
	for (size_t i = r->n; i-- > 0;) {
		summary_json(&r->hist[(r->head + i) % r->cap], body);
		if (i)
			pith_buf_putc(body, ',');
	}
	pith_buf_puts(body, "]}\n");
	return 200;
}

static int answer_range(noderoot_t *r, const char *arg, pith_buf_t *body, char *why, size_t whylen)
{
	uint8_t pre[PITH_SR_KEY_BYTES], root[32];
	unsigned plen;
	pith_err_t err = {0};
	const char *p = arg ? arg : "";
	if (pith_sr_bits_parse(p, strlen(p), pre, &plen))
		return fail(why, whylen, 400, "prefix: 0 to 130 characters 0 or 1 (bit 0 first)");
	if (current_open(r, root, NULL, NULL, 0, &err))
		return fail(why, whylen, 503, err.msg[0] ? err.msg : "state root: not available");
	pith_sr_range_t *rg = malloc(sizeof(*rg));
	if (!rg)
		return fail(why, whylen, 503, "out of memory");
	int rc = pith_sr_range(r->t, pre, plen, rg);
	if (!rc)
		rc = pith_sr_range_json(rg, body);
	free(rg);
	if (rc)
		return fail(why, whylen, 503, "state root: the range could not be answered");
	pith_buf_putc(body, '\n');
	return 200;
}

static int answer_proof(noderoot_t *r, const char *id, int64_t now, pith_buf_t *body,
			char *why, size_t whylen)
{
	char pith[PITH_NUMBER_LEN + 1];
	pith_err_t err = {0};
	if (!id || !id[0])
		return fail(why, whylen, 400, "a proof needs a record's pith number");
	if (strlen(id) == PITH_NUMBER_LEN && pith_number_is_valid(id)) {
		memcpy(pith, id, sizeof(pith)); /* absent or not: the key is whole */
	} else {
		int rc = store_resolve(r->st, id, pith, &err);
		if (rc == PITH_ENOTFOUND)
			return fail(why, whylen, 404, "no record has this identifier; a proof of absence "
				    "needs the full pith number (pith:YYYY: and 26 characters)");
		if (rc)
			return fail(why, whylen, 400, err.msg[0] ? err.msg : "not an identifier");
	}
	on_demand(r, now);
	uint8_t root[32];
	if (current_open(r, root, NULL, NULL, 0, &err))
		return fail(why, whylen, 503, err.msg[0] ? err.msg : "state root: not available");
	pith_sr_proof_t *p = malloc(sizeof(*p));
	if (!p)
		return fail(why, whylen, 503, "out of memory");
	int rc = pith_sr_prove(r->t, pith, p);
	pith_buf_puts(body, "{\"proof\":");
	if (!rc)
		rc = pith_sr_proof_json(p, body);
	free(p);
	if (rc)
		return fail(why, whylen, 503, "state root: the proof could not be made");
	/* the signed document of the same root, when the newest is */
	const kept_t *k = newest(r);
	pith_buf_puts(body, ",\"root_document\":");
	if (k && !memcmp(k->d.root, root, 32))
		pith_buf_append(body, k->doc, k->len);
	else
		pith_buf_puts(body, "null");
	pith_buf_puts(body, "}\n");
	return 200;
}

int noderoot_answer(noderoot_t *r, noderoot_what_t what, const char *arg, int64_t now_unix_us,
		    pith_buf_t *body, char etag[65], char *why, size_t whylen)
{
	etag[0] = 0;
	why[0] = 0;
	int status = 404;
	switch (what) {
	case NODEROOT_LATEST: status = answer_latest(r, arg, now_unix_us, body, etag, why, whylen); break;
	case NODEROOT_HISTORY: status = answer_history(r, body); break;
	case NODEROOT_RANGE: status = answer_range(r, arg, body, why, whylen); break;
	case NODEROOT_PROOF: status = answer_proof(r, arg, now_unix_us, body, why, whylen); break;
	default: fail(why, whylen, 404, "no such state root document"); break;
	}
	return status; /* the view stays for the next readers (noderoot_catch_up ends it) */
}

int noderoot_summary(const noderoot_t *r, noderoot_summary_t *out)
{
	memset(out, 0, sizeof(*out));
	pith_hex_encode(r->key.pk, 32, out->key_hex);
	memcpy(out->fp, r->key.fp, sizeof(out->fp));
	snprintf(out->key_id, sizeof(out->key_id), "%s", r->key.key_id);
	const kept_t *k = newest(r);
	if (!k)
		return 0;
	pith_hex_encode(k->d.root, 32, out->root_hex);
	pith_hex_encode(k->d.doc_sha256, 32, out->doc_hex);
	out->count = k->d.count;
	snprintf(out->cursor, sizeof(out->cursor), "%s", k->d.cursor);
	snprintf(out->signed_at, sizeof(out->signed_at), "%s", k->d.signed_at);
	return 1;
}

void noderoot_stats_get(const noderoot_t *r, noderoot_stats_t *out)
{
	*out = r->s;
	out->tree_bytes = pith_sr_mem_bytes(r->t);
	out->kept = r->n;
}
