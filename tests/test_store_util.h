/* Helpers shared by the store's unit tests (test_store*.c, one binary
 * each): a store opened and filled, generated event sets, states read
 * back. Each binary is one translation unit, so the statics here are
 * its own. */
#ifndef PITH_TEST_STORE_UTIL_H
#define PITH_TEST_STORE_UTIL_H

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "store_test_util.h"
#include "bundle.h"
#include "hmap.h"
#include "merge.h"
#include "store.h"
#include "store_int.h"
#include "test_util.h"
#include "testgen.h"

#define AR7B "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
#define AR7B_STATE_SHA "3facdc2aeec0c5e2ff45dd750211a965091b49387ad1b15346dff0bb9a58c999"

static tg_key_t reg, op;
static pith_trust_t *trust;
static pith_buf_t bundle_bytes;

/* ---- helpers ------------------------------------------------------------- */

static inline char *tmpdir(void)
{
	return stu_tmpdir("test_store");
}

static inline void rmdir_rf(char *d)
{
	stu_rmdir_rf(d);
}

static inline store_t *open_store(const char *dir)
{
	return stu_open_store(dir, trust);
}

static inline json_doc_t *parse(const uint8_t *p, size_t n)
{
	json_doc_t *d = NULL;
	pith_err_t err = {0};
	if (json_parse(&d, p, n, NULL, &err))
		fprintf(stderr, "parse: %s\n", err.msg);
	return d;
}

static inline int put_bytes(store_t *st, const pith_buf_t *b, store_outcome_t *out)
{
	pith_event_t *ev = NULL;
	pith_err_t err = {0};
	int rc = pith_event_parse(b->data, b->len, trust, &ev, NULL, &err);
	if (rc) {
		fprintf(stderr, "event does not verify: %s\n", err.msg);
		return rc;
	}
	rc = store_event_put(st, ev, out, &err);
	if (rc)
		fprintf(stderr, "store_event_put: %s\n", err.msg);
	pith_event_free(ev);
	return rc;
}

static inline int put_bundle(store_t *st, const pith_buf_t *b, store_bundle_outcome_t *out,
		      store_commit_stats_t *stats)
{
	json_doc_t *d = parse(b->data, b->len);
	pith_err_t err = {0};
	int rc = d ? store_bundle_put(st, json_doc_root(d), out, stats, &err) : -1;
	if (rc && d)
		fprintf(stderr, "store_bundle_put: %s\n", err.msg);
	json_doc_free(d);
	return rc;
}

static inline size_t check_problems(store_t *st)
{
	size_t problems = 99;
	pith_err_t err = {0};
	if (store_check(st, NULL, NULL, &problems, &err))
		fprintf(stderr, "store_check: %s\n", err.msg);
	return problems;
}

/* The state's bytes, NUL-terminated. */
static inline void state_of(store_t *st, const char *pith, pith_buf_t *out)
{
	pith_err_t err = {0};
	pith_buf_reset(out);
	if (store_state_get(st, pith, out, &err))
		fprintf(stderr, "store_state_get %s: %s\n", pith, err.msg);
	pith_buf_cstr(out);
}

/* A set of generated events over nrec records: all kinds, supersedes,
 * an equivocation and an unknown type. */
typedef struct evset {
	pith_buf_t *b;
	size_t n, cap;
	char pith[600][PITH_NUMBER_LEN + 1]; /* lanes_many_records: three windows */
	size_t nrec;
} evset_t;

static inline pith_buf_t *set_next(evset_t *s)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->b = realloc(s->b, s->cap * sizeof(*s->b));
	}
	memset(&s->b[s->n], 0, sizeof(s->b[0]));
	return &s->b[s->n++];
}

static inline void gen_set_from(evset_t *s, size_t nrec, unsigned base)
{
	static const char *const types[] = {
		"graph_snapshot", "author_attestation", "timestamp_anchor", "storage_attestation",
		"citation_signature", "replication_record", "correction", "mirror_hint",
	};
	memset(s, 0, sizeof(*s));
	if (nrec > sizeof(s->pith) / sizeof(s->pith[0])) {
		fprintf(stderr, "gen_set_from: %zu records, at most %zu\n", nrec,
			sizeof(s->pith) / sizeof(s->pith[0]));
		abort();
	}
	s->nrec = nrec;
	for (size_t r = 0; r < nrec; r++) {
		pith_buf_t rec = PITH_BUF_INIT;
		tg_record((unsigned)(base + r), &rec, s->pith[r]);
		pith_buf_release(&rec);
	}
	for (size_t r = 0; r < nrec; r++) {
		char id[PITH_EVENT_ID_LEN + 1], first[PITH_EVENT_ID_LEN + 1], at[32];
		tg_event(set_next(s), &reg, "record_created", s->pith[r], "record", "2026-01-01T00:00:00Z",
			 NULL, NULL, NULL, 0, (int)(base + r), id);
		for (size_t k = 0; k < 8; k++) {
			const char *sup[1] = {first};
			snprintf(at, sizeof(at), "2026-01-0%uT00:00:%02uZ", (unsigned)(1 + k % 5), (unsigned)(r % 60));
			tg_event(set_next(s), k % 2 ? &op : &reg, types[k], s->pith[r],
				 k == 4 ? s->pith[(r + 1) % nrec] : "t", at, "{\"n\":1}", NULL,
				 k == 6 ? sup : NULL, k == 6 ? 1 : 0, -1, id);
			if (k == 0)
				memcpy(first, id, sizeof(id));
		}
		/* an equivocation (same slot as the mirror hint) and an unknown type */
		tg_event(set_next(s), &op, "mirror_hint", s->pith[r], "t", "2026-01-09T00:00:00Z",
			 "{\"n\":2}", NULL, NULL, 0, -1, id);
		tg_event(set_next(s), &reg, "future_kind", s->pith[r], "x", "2026-01-09T00:00:01Z",
			 "{}", NULL, NULL, 0, -1, id);
	}
}

static inline void gen_set(evset_t *s, size_t nrec)
{
	gen_set_from(s, nrec, 100);
}

/* A new store in dir holding every event of s, one commit each. */
static inline store_t *filled_store(const char *dir, const evset_t *s)
{
	store_t *st = open_store(dir);
	for (size_t i = 0; st && i < s->n; i++)
		put_bytes(st, &s->b[i], NULL);
	return st;
}

static inline void set_free(evset_t *s)
{
	for (size_t i = 0; i < s->n; i++)
		pith_buf_release(&s->b[i]);
	free(s->b);
	memset(s, 0, sizeof(*s));
}

static inline void setup(void)
{
	trust = tg_trust_pair(&reg, &op);
	stu_read_file(PITH_TEST_DATA "/bundle-AR7B3DEV.json", &bundle_bytes);
}

/* ---- helpers more than one test binary uses ---------------------------- */

/* The registry's first event with another signed_at: still valid (the
 * signature block is outside the hash), a re-signed copy. */
static inline void resigned_copy(pith_buf_t *orig, pith_buf_t *copy, const char *signed_at)
{
	json_doc_t *d = parse(bundle_bytes.data, bundle_bytes.len);
	const json_value_t *events = json_get(json_doc_root(d), "events");
	json_value_t *ev = events->u.items[0];
	json_canon_write(ev, orig);
	json_value_t *sig = (json_value_t *)json_get(ev, "signature");
	json_object_set(d, sig, "signed_at", json_new_string(d, signed_at));
	json_canon_write(ev, copy);
	json_doc_free(d);
}

/* Every record's state in st, concatenated. */
static inline void all_states(store_t *st, const evset_t *s, pith_buf_t *out)
{
	pith_buf_reset(out);
	for (size_t r = 0; r < s->nrec; r++) {
		pith_err_t err = {0};
		if (store_state_get(st, s->pith[r], out, &err))
			fprintf(stderr, "#   state %s: %s\n", s->pith[r], err.msg);
		pith_buf_putc(out, '\n');
	}
}

/* Closes and removes a test's reference store and its store under test,
 * with their states' buffers and the event set. */
static inline void pair_done(store_t *ref_st, store_t *st, char *d0, char *d1, pith_buf_t *ref,
		      pith_buf_t *got, evset_t *s)
{
	store_close(ref_st);
	store_close(st);
	rmdir_rf(d0);
	rmdir_rf(d1);
	pith_buf_release(ref);
	pith_buf_release(got);
	set_free(s);
}

/* Adds every event of s twice, in reverse, committing batches of 5 for
 * the first `batched` of them and the rest in one last commit; 0 or the
 * first commit's error. */
static inline int commit_reversed_twice(store_batch_t *b, const evset_t *s, size_t batched)
{
	int rc = 0;
	for (size_t k = 0; k < 2 * s->n && !rc; k++) {
		size_t i = s->n - 1 - k % s->n;
		pith_event_t *ev = NULL;
		pith_event_parse(s->b[i].data, s->b[i].len, trust, &ev, NULL, NULL);
		store_batch_add_event(b, ev, NULL, NULL);
		if (k < batched && store_batch_count(b) == 5)
			rc = store_batch_commit(b, NULL, NULL);
	}
	return rc ? rc : store_batch_commit(b, NULL, NULL);
}

/* Fills st in batches of 5 in reverse, each event twice (records stored
 * by earlier batches get more events, claims are rewritten), then gives
 * it and ref_st (filled with s) the registry bundle; ref gets ref_st's
 * states. */
static inline void reversed_with_bundle(store_t *st, store_t *ref_st, const evset_t *s, pith_buf_t *ref)
{
	store_batch_t *b = store_batch_new(st);
	CHECK_INT_EQ(commit_reversed_twice(b, s, 2 * s->n), 0);
	store_batch_free(b);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(ref_st, &bundle_bytes, NULL, NULL), 0);
	all_states(ref_st, s, ref);
	CHECK(ref->len > 1000);
}

/* Opened as pithctl import opens a store (store_opts_t.fresh_records). */
static inline store_t *open_fresh(const char *dir)
{
	store_opts_t o = {.create = 1, .registry = trust, .unsorted_write_only = 1, .fresh_records = 1};
	store_t *st = NULL;
	pith_err_t err = {0};
	if (store_open(dir, &o, &st, &err))
		fprintf(stderr, "#   open %s: %s\n", dir, err.msg);
	return st;
}

typedef struct timeids {
	int64_t us[64];
	uint8_t id[64][32];
	size_t n, limit;
} timeids_t;

static inline int collect_time_id(void *arg, int64_t us, const uint8_t id[32])
{
	timeids_t *t = arg;
	if (t->n >= 64)
		return 1;
	t->us[t->n] = us;
	memcpy(t->id[t->n++], id, 32);
	return t->limit && t->n % t->limit == 0 ? 2 : 0;
}

/* The registry bundle with a later built_at and one more alias (the store
 * trusts its caller's verification, so the broken signature is not its
 * concern here). */
static inline void newer_bundle_alias(pith_buf_t *out, const char *alias)
{
	json_doc_t *d = parse(bundle_bytes.data, bundle_bytes.len);
	json_value_t *r = json_doc_root(d);
	json_object_set(d, r, "built_at", json_new_string(d, "2026-09-01T00:00:00Z"));
	json_value_t *al = (json_value_t *)json_get(r, "source_aliases");
	json_value_t *a = json_new_object(d);
	json_object_set(d, a, "alias_kind", json_new_string(d, "arxiv"));
	json_object_set(d, a, "alias_value", json_new_string(d, alias));
	json_object_set(d, a, "created_at", json_new_string(d, "2026-09-01T00:00:00Z"));
	json_array_push(d, al, a);
	json_canon_write(r, out);
	json_doc_free(d);
}

static inline void newer_bundle(pith_buf_t *out)
{
	newer_bundle_alias(out, "2401.99999");
}

static inline void schema_is(store_t *st, const char *want)
{
	char *val;
	size_t vl;
	CHECK_INT_EQ(store_get_raw(st, STORE_CF_META, (const uint8_t *)STORE_META_SCHEMA,
				   strlen(STORE_META_SCHEMA), &val, &vl, NULL), 0);
	CHECK_MEM_EQ(val, vl, want, strlen(want));
	rocksdb_free(val);
}

static inline void note_line(void *arg, const char *line)
{
	pith_buf_puts(arg, line);
	pith_buf_puts(arg, "\n");
}

static inline int exists(const char *dir, const char *name)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

#endif
