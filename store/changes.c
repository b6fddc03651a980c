/* The change log (keys.h, changes): each record under the sequence number
 * of its latest change, with what a follower compares. Written by batch.c
 * in the commit that changes a record; built here when a schema-4 store is
 * opened read-write; read by store_changes_each (the HTTP change feed);
 * audited by store_check. */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void seq_key(uint64_t seq, uint8_t k[STORE_CHG_SEQ_LEN])
{
	k[0] = STORE_CHG_SEQ;
	store_be64_put(k + 1, seq);
}

static void pith_key(const uint8_t skey[STORE_SKEY_LEN], uint8_t k[STORE_CHG_PITH_LEN])
{
	k[0] = STORE_CHG_PITH;
	memcpy(k + 1, skey, STORE_SKEY_LEN);
}

static int log_ready(store_t *st, pith_err_t *err)
{
	if (!st->cf[STORE_CF_CHANGES])
		return pith_err_set(err, PITH_EINVAL, "store: no change log in this schema-%d store "
				    "(open it read-write once to build it)", st->schema);
	return 0;
}

/* CHANGE (keys.h) into out; its length. */
static size_t chg_encode(uint8_t out[STORE_CHG_MAX], const uint8_t state_hash[32],
			 const store_chg_bundle_t *b)
{
	memcpy(out, state_hash, 32);
	if (!b || !b->has)
		return 32;
	size_t n = strlen(b->built_at);
	memcpy(out + 32, b->sha, 32);
	memcpy(out + 64, b->built_at, n);
	return 64 + n;
}

/* 0, or -1 if v is not a CHANGE. */
static int chg_decode(const uint8_t *v, size_t vl, uint8_t state_hash[32], store_chg_bundle_t *b)
{
	memset(b, 0, sizeof(*b));
	if (vl == STORE_CHG_MIN) {
		memcpy(state_hash, v, 32);
		return 0;
	}
	if (vl < 64 + 20 || vl > STORE_CHG_MAX)
		return -1;
	for (size_t i = 64; i < vl; i++)
		if (v[i] < 0x21 || v[i] > 0x7e)
			return -1;
	memcpy(state_hash, v, 32);
	b->has = 1;
	memcpy(b->sha, v + 32, 32);
	memcpy(b->built_at, v + 64, vl - 64);
	b->built_at[vl - 64] = 0;
	return 0;
}

int store_chg_bundle_of(const json_value_t *bundle, store_chg_bundle_t *out, pith_err_t *err)
{
	int64_t us;
	char hex[65];
	memset(out, 0, sizeof(*out));
	int rc = store_bundle_ident(bundle, &us, hex, err);
	if (rc)
		return rc;
	const char *built = json_get_str(bundle, "built_at");
	if (strlen(built) > STORE_BUILT_AT_MAX)
		return pith_err_set(err, PITH_EINVAL, "bundle: built_at longer than %d bytes",
				    STORE_BUILT_AT_MAX);
	pith_hex_decode(hex, 64, out->sha, 32);
	memcpy(out->built_at, built, strlen(built) + 1);
	out->has = 1;
	return 0;
}

int store_change_get(store_t *st, const uint8_t skey[STORE_SKEY_LEN], uint64_t *seq,
		     store_chg_bundle_t *bundle, pith_err_t *err)
{
	uint8_t k[STORE_CHG_PITH_LEN], hash[32];
	char *val;
	size_t vl;
	*seq = 0;
	memset(bundle, 0, sizeof(*bundle));
	pith_key(skey, k);
	int rc = store_get_raw(st, STORE_CF_CHANGES, k, sizeof(k), &val, &vl, err);
	if (rc || !val)
		return rc;
	if (vl < 8 || chg_decode((const uint8_t *)val + 8, vl - 8, hash, bundle)) {
		rocksdb_free(val);
		return pith_err_set(err, PITH_EIO, "store: change log entry of %.26s: %zu bytes",
				    (const char *)skey, vl);
	}
	*seq = store_be64_get((const uint8_t *)val);
	rocksdb_free(val);
	return 1;
}

void store_change_write(store_wsink_t *ws, const uint8_t skey[STORE_SKEY_LEN], uint64_t seq,
			uint64_t old_seq, const uint8_t state_hash[32],
			const store_chg_bundle_t *bundle)
{
	uint8_t sk[STORE_CHG_SEQ_LEN], pk[STORE_CHG_PITH_LEN];
	uint8_t sv[STORE_SKEY_LEN + STORE_CHG_MAX], pv[8 + STORE_CHG_MAX];
	if (old_seq) {
		seq_key(old_seq, sk);
		ws->del(ws, STORE_CF_CHANGES, sk, sizeof(sk));
	}
	size_t n = chg_encode(sv + STORE_SKEY_LEN, state_hash, bundle);
	memcpy(sv, skey, STORE_SKEY_LEN);
	store_be64_put(pv, seq);
	memcpy(pv + 8, sv + STORE_SKEY_LEN, n);
	seq_key(seq, sk);
	pith_key(skey, pk);
	ws->put(ws, STORE_CF_CHANGES, sk, sizeof(sk), sv, STORE_SKEY_LEN + n);
	ws->put(ws, STORE_CF_CHANGES, pk, sizeof(pk), pv, 8 + n);
}

void store_change_delete(store_wsink_t *ws, const uint8_t skey[STORE_SKEY_LEN], uint64_t seq)
{
	uint8_t sk[STORE_CHG_SEQ_LEN], pk[STORE_CHG_PITH_LEN];
	pith_key(skey, pk);
	ws->del(ws, STORE_CF_CHANGES, pk, sizeof(pk));
	if (seq) {
		seq_key(seq, sk);
		ws->del(ws, STORE_CF_CHANGES, sk, sizeof(sk));
	}
}

/* ---- reading -------------------------------------------------------------- */

/* The record's change log entry: 1 with it, 0 without, or an error. */
static int change_of(store_t *st, const char *pith_number, uint64_t *seq, store_chg_bundle_t *b,
		     pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	*seq = 0;
	if (!pith_number_is_valid(pith_number))
		return pith_err_set(err, PITH_EINVAL, "store: malformed pith number");
	int rc = log_ready(st, err);
	if (rc)
		return rc;
	store_skey_make(pith_number, skey);
	return store_change_get(st, skey, seq, b, err);
}

int store_built_at_get(store_t *st, const char *pith_number, char out[static STORE_BUILT_AT_MAX + 1],
		       pith_err_t *err)
{
	uint64_t seq;
	store_chg_bundle_t b;
	out[0] = 0;
	int rc = change_of(st, pith_number, &seq, &b, err);
	if (rc < 0)
		return rc;
	if (!rc || !b.has)
		return PITH_ENOTFOUND;
	memcpy(out, b.built_at, strlen(b.built_at) + 1);
	return 0;
}

/* ---- the change numbers read (store_change_seq_get) ---------------------------------- */

/* A record's change number, which the HTTP server reads beside each
 * document it dates (Last-Modified), cost a second point read of another
 * family, about a tenth of a state.json answer's CPU (docs/performance.md,
 * "pithd against nginx"). Kept here with changes_seq as it was before the
 * read: while changes_seq has not moved, no commit has changed any
 * record's entry (each such commit moves it once its write is visible),
 * so the number read is still the record's. A commit makes every slot
 * stale at once; they are read again one by one as they are asked for. A
 * number read after a commit not yet counted is that commit's, or later:
 * right for the count before it too. (A record that the time rule removes
 * at open goes without a count; its slot is then never asked for before
 * a commit makes it stale, its document being gone.)
 *
 * STORE_SEQS_SLOTS slots of 64 bytes (16 MiB), shared by the threads
 * that read, each slot under a sequence lock: a reader that meets a slot
 * being written, or written while it read, takes it for a miss; a writer
 * that finds a slot being written leaves it. Linear probing over
 * STORE_SEQS_PROBE slots, then the home slot is replaced: a record
 * forgotten, never a wrong number given. */
#define STORE_SEQS_SLOTS (1u << 18)
#define STORE_SEQS_PROBE 8

struct store_seq_slot {
	uint64_t key[4]; /* the record's skey, zero-padded */
	uint64_t seq;
	uint64_t at;  /* changes_seq before seq was read */
	uint64_t ver; /* 0: never written; odd: being written */
	uint64_t pad;
};

_Static_assert(sizeof(struct store_seq_slot) == 64, "a change number slot is 64 bytes");
_Static_assert(STORE_SKEY_LEN <= 32, "an skey fits a slot's key");

static struct store_seq_slot *seqs_table(store_t *st)
{
	struct store_seq_slot *s = __atomic_load_n(&st->seqs, __ATOMIC_ACQUIRE), *none = NULL;
	if (s)
		return s;
	if (!(s = calloc(STORE_SEQS_SLOTS, sizeof(*s))))
		return NULL;
	if (!__atomic_compare_exchange_n(&st->seqs, &none, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		free(s);
		return none;
	}
	return s;
}

/* 1 with *seq if k's slot was read at at; 0 with *put: where to keep it
 * (NULL: nowhere). */
static int seqs_find(struct store_seq_slot *s, const uint64_t k[4], uint64_t at, uint64_t *seq,
		     struct store_seq_slot **put)
{
	size_t home = (size_t)(((k[0] ^ (k[1] * UINT64_C(0xff51afd7ed558ccd))) *
				UINT64_C(0x9e3779b97f4a7c15)) >> 40) & (STORE_SEQS_SLOTS - 1);
	*put = NULL;
	for (size_t i = 0; i < STORE_SEQS_PROBE; i++) {
		struct store_seq_slot *x = &s[(home + i) & (STORE_SEQS_SLOTS - 1)];
		uint64_t v = __atomic_load_n(&x->ver, __ATOMIC_ACQUIRE), w[6];
		if (!v) {
			*put = x;
			return 0;
		}
		if (v & 1)
			continue;
		for (int j = 0; j < 4; j++)
			w[j] = __atomic_load_n(&x->key[j], __ATOMIC_RELAXED);
		w[4] = __atomic_load_n(&x->seq, __ATOMIC_RELAXED);
		w[5] = __atomic_load_n(&x->at, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&x->ver, __ATOMIC_RELAXED) != v || memcmp(w, k, 32))
			continue;
		if (w[5] == at) {
			*seq = w[4];
			return 1;
		}
		*put = x;
		return 0;
	}
	*put = &s[home];
	return 0;
}

static void seqs_put(struct store_seq_slot *x, const uint64_t k[4], uint64_t seq, uint64_t at)
{
	uint64_t v = __atomic_load_n(&x->ver, __ATOMIC_RELAXED);
	if ((v & 1) || !__atomic_compare_exchange_n(&x->ver, &v, v + 1, 0, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED))
		return; /* another thread's */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (int j = 0; j < 4; j++)
		__atomic_store_n(&x->key[j], k[j], __ATOMIC_RELAXED);
	__atomic_store_n(&x->seq, seq, __ATOMIC_RELAXED);
	__atomic_store_n(&x->at, at, __ATOMIC_RELAXED);
	__atomic_store_n(&x->ver, v + 2, __ATOMIC_RELEASE);
}

int store_change_seq_get(store_t *st, const char *pith_number, uint64_t *seq, pith_err_t *err)
{
	store_chg_bundle_t b;
	uint64_t k[4] = {0}, at = __atomic_load_n(&st->changes_seq, __ATOMIC_ACQUIRE);
	struct store_seq_slot *s = NULL, *put = NULL;
	if (pith_number_is_valid(pith_number) && (s = seqs_table(st))) {
		store_skey_make(pith_number, (uint8_t *)k);
		if (seqs_find(s, k, at, seq, &put))
			return 0;
	}
	int rc = change_of(st, pith_number, seq, &b, err);
	if (rc > 0 && put)
		seqs_put(put, k, *seq, at);
	return rc < 0 ? rc : rc ? 0 : PITH_ENOTFOUND;
}

/* The change at the iterator into *ch. */
static int chg_entry(store_iter_t *it, store_change_t *ch, pith_err_t *err)
{
	size_t kl, vl;
	const uint8_t *k = store_iter_key(it, &kl), *v = store_iter_value(it, &vl);
	store_chg_bundle_t b;
	if (kl != STORE_CHG_SEQ_LEN || vl < STORE_SKEY_LEN ||
	    chg_decode(v + STORE_SKEY_LEN, vl - STORE_SKEY_LEN, ch->state_hash, &b))
		return pith_err_set(err, PITH_EIO, "store: change log entry of %zu/%zu bytes", kl, vl);
	ch->seq = store_be64_get(k + 1);
	store_skey_pith(v, ch->pith_number);
	ch->has_bundle = b.has;
	memcpy(ch->bundle_sha, b.sha, 32);
	memcpy(ch->built_at, b.built_at, sizeof(ch->built_at));
	return 0;
}

/* The last change a reader may see: all of them, but while the store
 * commits without the log only those known flushed, so that no follower
 * holds a number a crash could give to another change
 * (store_unlogged_begin). */
static uint64_t changes_cap(store_t *st)
{
	return __atomic_load_n(&st->changes_durable, __ATOMIC_ACQUIRE);
}

/* Hands up to limit (0: all) entries up to cap from it's position to fn,
 * walking backward or forward; *next gets the last one's number. Closes
 * it. */
static int changes_walk(store_iter_t *it, int backward, size_t limit, uint64_t cap,
			store_change_fn fn, void *arg, uint64_t *next, pith_err_t *err)
{
	int rc = 0;
	for (size_t n = 0; store_iter_valid(it) && (!limit || n < limit); n++) {
		store_change_t ch;
		if ((rc = chg_entry(it, &ch, err)))
			break;
		if (!backward && ch.seq > cap)
			break;
		if ((rc = fn(arg, &ch)))
			break;
		if (next)
			*next = ch.seq;
		if (backward)
			store_iter_prev(it);
		else
			store_iter_next(it);
	}
	if (!rc)
		rc = store_iter_status(it, err);
	store_iter_close(it);
	return rc;
}

int store_changes_each_before(store_t *st, uint64_t before, size_t limit, store_change_fn fn,
			      void *arg, uint64_t *next, pith_err_t *err)
{
	uint8_t lo[STORE_CHG_SEQ_LEN], hi[STORE_CHG_SEQ_LEN], hi_end = STORE_CHG_SEQ + 1;
	store_iter_t it;
	if (next)
		*next = 0;
	int rc = log_ready(st, err);
	uint64_t cap = changes_cap(st);
	if (cap != UINT64_MAX && (!before || before > cap + 1))
		before = cap + 1;
	if (rc || before == 1)
		return rc;
	seq_key(1, lo);
	seq_key(before, hi);
	if ((rc = store_iter_open_last(st, STORE_CF_CHANGES, lo, sizeof(lo), before ? hi : &hi_end,
				       before ? sizeof(hi) : 1, &it, err)))
		return rc;
	return changes_walk(&it, 1, limit, UINT64_MAX, fn, arg, next, err);
}

int store_changes_each(store_t *st, uint64_t after, size_t limit, store_change_fn fn, void *arg,
		       uint64_t *next, pith_err_t *err)
{
	uint8_t lo[STORE_CHG_SEQ_LEN], hi = STORE_CHG_SEQ + 1;
	store_iter_t it;
	if (next)
		*next = after;
	int rc = log_ready(st, err);
	if (rc || after == UINT64_MAX)
		return rc;
	seq_key(after + 1, lo);
	if ((rc = store_iter_open(st, STORE_CF_CHANGES, lo, sizeof(lo), &hi, 1, &it, err)))
		return rc;
	return changes_walk(&it, 0, limit, changes_cap(st), fn, arg, next, err);
}

uint64_t store_changes_last(store_t *st)
{
	/* without wmu: a commit, or a flush, can hold it for seconds */
	uint64_t v = __atomic_load_n(&st->changes_seq, __ATOMIC_ACQUIRE);
	uint64_t cap = changes_cap(st);
	return v < cap ? v : cap;
}

int store_changes_recover(store_t *st, pith_err_t *err)
{
	uint8_t lo = STORE_CHG_SEQ, hi = STORE_CHG_SEQ + 1, top[STORE_CHG_SEQ_LEN];
	store_iter_t it;
	st->changes_seq = 0;
	if (!st->cf[STORE_CF_CHANGES])
		return 0;
	int rc = store_iter_open(st, STORE_CF_CHANGES, &lo, 1, &hi, 1, &it, err);
	if (rc)
		return rc;
	seq_key(UINT64_MAX, top);
	rocksdb_iter_seek_for_prev(it.it, (const char *)top, sizeof(top));
	if (store_iter_valid(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl == STORE_CHG_SEQ_LEN)
			st->changes_seq = store_be64_get(k + 1);
		else
			rc = pith_err_set(err, PITH_EIO, "store: change log key of %zu bytes", kl);
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}

/* ---- building the log of a schema-4 store ----------------------------------- */

/* The bundle part of the stored bundle of skey (none if it has none). */
static int stored_bundle_part(store_t *st, const uint8_t skey[STORE_SKEY_LEN],
			      store_chg_bundle_t *out, pith_err_t *err)
{
	char *val;
	size_t vl;
	json_doc_t *d = NULL;
	memset(out, 0, sizeof(*out));
	int rc = store_get_raw(st, STORE_CF_BUNDLES, skey, STORE_SKEY_LEN, &val, &vl, err);
	if (rc || !val)
		return rc;
	pith_err_t e = {0};
	rc = json_parse(&d, (const uint8_t *)val, vl, NULL, &e);
	rocksdb_free(val);
	if (!rc)
		rc = store_chg_bundle_of(json_doc_root(d), out, &e);
	json_doc_free(d);
	if (rc)
		return pith_err_set(err, PITH_EIO, "store: stored bundle of %.26s: %s", (const char *)skey,
				    e.msg);
	return 0;
}

typedef struct build {
	store_t *st;
	uint64_t seq;
} build_t;

static int log_record(void *arg, rocksdb_writebatch_t *wb, const uint8_t *k, size_t kl,
		      const uint8_t *v, size_t vl, pith_err_t *err)
{
	build_t *b = arg;
	store_rec_t rec;
	store_chg_bundle_t bp = {0};
	if (kl != STORE_SKEY_LEN || store_rec_decode(v, vl, &rec))
		return pith_err_set(err, PITH_EIO, "store: malformed record summary (%zu/%zu bytes)",
				    kl, vl);
	int rc = rec.has_bundle ? stored_bundle_part(b->st, k, &bp, err) : 0;
	if (rc)
		return rc;
	store_wsink_t ws;
	store_wsink_wb(&ws, wb, b->st);
	store_change_write(&ws, k, ++b->seq, 0, rec.hash, &bp);
	return 2;
}

int store_changes_build(store_t *st, uint64_t *logged, pith_err_t *err)
{
	/* nothing commits before the build ends: clearing makes a build cut
	 * short by a crash start again from the same numbers */
	static const char end = (char)0xff;
	char *e = NULL;
	build_t b = {.st = st};
	rocksdb_delete_range_cf(st->db, st->wo, st->cf[STORE_CF_CHANGES], "", 0, &end, 1, &e);
	if (e)
		return store_op_error(st, STORE_OP_WRITE, err, e, "clearing the change log");
	uint64_t n = 0;
	int rc = store_upgrade_walk(st, STORE_CF_RECORDS, log_record, &b, STORE_SCHEMA_5,
				    "building the change log", &n, err);
	if (!rc && logged)
		*logged = b.seq;
	return rc;
}

/* ---- the audit ------------------------------------------------------------ */

int store_changes_audit_record(store_t *st, const uint8_t *k, const uint8_t *v, size_t vl,
			       void (*problem)(void *arg, const char *line), void *arg,
			       pith_err_t *err)
{
	char line[200];
	store_rec_t rec;
	store_chg_bundle_t have, want;
	uint64_t seq;
	if (store_rec_decode(v, vl, &rec))
		return 0; /* the records audit reports it */
	int rc = store_change_get(st, k, &seq, &have, err);
	if (rc < 0) {
		snprintf(line, sizeof(line), "changes: %.26s: %.160s", (const char *)k, err ? err->msg : "");
		problem(arg, line);
		return 0;
	}
	if (rc == 0) {
		snprintf(line, sizeof(line), "changes: record %.26s is not in the change log",
			 (const char *)k);
		problem(arg, line);
		return 0;
	}
	uint8_t sk[STORE_CHG_SEQ_LEN], hash[32], pk[STORE_CHG_PITH_LEN];
	char *sv;
	size_t svl;
	seq_key(seq, sk);
	pith_key(k, pk);
	if ((rc = store_get_raw(st, STORE_CF_CHANGES, sk, sizeof(sk), &sv, &svl, err)))
		return rc;
	char *pv;
	size_t pvl;
	if ((rc = store_get_raw(st, STORE_CF_CHANGES, pk, sizeof(pk), &pv, &pvl, err))) {
		rocksdb_free(sv);
		return rc;
	}
	int same = sv && svl >= STORE_SKEY_LEN && !memcmp(sv, k, STORE_SKEY_LEN) && pv &&
		   svl - STORE_SKEY_LEN == pvl - 8 && !memcmp(sv + STORE_SKEY_LEN, pv + 8, pvl - 8);
	if (same)
		chg_decode((const uint8_t *)pv + 8, pvl - 8, hash, &have);
	rocksdb_free(sv);
	rocksdb_free(pv);
	if (!same) {
		snprintf(line, sizeof(line), "changes: record %.26s: its entry %llu does not name it "
			 "with the same change", (const char *)k, (unsigned long long)seq);
		problem(arg, line);
		return 0;
	}
	if (seq > st->changes_seq) {
		snprintf(line, sizeof(line), "changes: record %.26s at %llu, past the sequence's %llu",
			 (const char *)k, (unsigned long long)seq, (unsigned long long)st->changes_seq);
		problem(arg, line);
	}
	pith_err_t e = {0};
	if (stored_bundle_part(st, k, &want, &e))
		return 0; /* the bundles audit reports it */
	if (memcmp(hash, rec.hash, 32) || have.has != want.has ||
	    (want.has && (memcmp(have.sha, want.sha, 32) || strcmp(have.built_at, want.built_at)))) {
		snprintf(line, sizeof(line), "changes: the entry of %.26s differs from its state or "
			 "newest bundle", (const char *)k);
		problem(arg, line);
	}
	return 0;
}

int store_changes_audit(store_t *st, uint64_t nrec,
			void (*problem)(void *arg, const char *line), void *arg, pith_err_t *err)
{
	if (!st->cf[STORE_CF_CHANGES])
		return 0; /* a schema-4 store opened read-only: built at its next read-write open */
	/* every record has its entries (store_changes_audit_record): equal
	 * counts mean none is left of an earlier change */
	const store_key_kind_t kinds[2] = {{STORE_CHG_SEQ, STORE_CHG_SEQ_LEN, "sequence"},
					   {STORE_CHG_PITH, STORE_CHG_PITH_LEN, "record"}};
	return store_audit_key_kinds(st, STORE_CF_CHANGES, kinds, nrec, "records", problem, arg, err);
}
