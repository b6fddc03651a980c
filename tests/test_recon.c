/* Set reconciliation: the set (B+tree with counts and sums) and the
 * protocol, with both sides simulated in-process: exchange messages until
 * done, fetch what each side needs from the other, and compare. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recon.h"
#include "recon_int.h"
#include "test_util.h"

/* ---- helpers ---------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rand_item(recon_item_t *it, uint64_t ts_span)
{
	it->ts = ts_span ? rng() % ts_span : 0;
	for (int i = 0; i < 32; i += 8) {
		uint64_t v = rng();
		memcpy(it->id + i, &v, 8);
	}
}

static int item_order(const void *a, const void *b)
{
	const recon_item_t *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return memcmp(x->id, y->id, 32);
}

/* A universe of n distinct sorted items. */
static recon_item_t *universe(size_t n, uint64_t ts_span)
{
	recon_item_t *u = malloc((n ? n : 1) * sizeof(*u));
	for (size_t i = 0; i < n; i++)
		rand_item(&u[i], ts_span);
	qsort(u, n, sizeof(*u), item_order);
	return u;
}

/* The items of u selected by mask bit (1: side A, 2: side B). */
static recon_set_t *side(const recon_item_t *u, const uint8_t *mask, size_t n, int bit)
{
	recon_item_t *v = malloc((n ? n : 1) * sizeof(*v));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (mask[i] & bit)
			v[k++] = u[i];
	recon_set_t *s = NULL;
	pith_err_t err;
	int rc = recon_set_new_sorted(&s, v, k, &err);
	free(v);
	return rc ? NULL : s;
}

typedef struct sync_out {
	recon_ids_t have_a, need_a, have_b, need_b;
	unsigned messages;
	size_t bytes;
	int rc;
	uint32_t version; /* the responder's session's */
	char err[240];
} sync_out_t;

static void sync_out_release(sync_out_t *o)
{
	recon_ids_release(&o->have_a);
	recon_ids_release(&o->need_a);
	recon_ids_release(&o->have_b);
	recon_ids_release(&o->need_b);
}

/* Runs one session, A initiating (with cfg_a), B answering (cfg_b), until
 * a side has nothing to send. */
static void run_sync2(const recon_set_t *a, const recon_set_t *b, const recon_config_t *cfg_a,
		      const recon_config_t *cfg_b, sync_out_t *o)
{
	memset(o, 0, sizeof(*o));
	pith_err_t err = {0};
	recon_session_t *sa = recon_session_new(a, RECON_INITIATOR, cfg_a, NULL, &err);
	recon_session_t *sb = recon_session_new(b, RECON_RESPONDER, cfg_b, NULL, &err);
	pith_buf_t m1 = PITH_BUF_INIT, m2 = PITH_BUF_INIT;
	o->rc = recon_initiate(sa, &m1, &err);
	while (!o->rc) {
		o->messages++;
		o->bytes += m1.len;
		o->rc = recon_respond(sb, m1.data, m1.len, &m2, &o->have_b, &o->need_b, &err);
		if (o->rc || m2.len == 0)
			break;
		o->messages++;
		o->bytes += m2.len;
		o->rc = recon_respond(sa, m2.data, m2.len, &m1, &o->have_a, &o->need_a, &err);
		if (o->rc || m1.len == 0)
			break;
		if (o->messages > 100000) {
			o->rc = -100;
			break;
		}
	}
	if (o->rc)
		snprintf(o->err, sizeof(o->err), "%s", err.msg);
	else if (!recon_session_is_done(sa) || !recon_session_is_done(sb))
		o->rc = -101;
	recon_stats_t st;
	recon_session_stats(sb, &st);
	o->version = st.version;
	recon_session_free(sa);
	recon_session_free(sb);
	pith_buf_release(&m1);
	pith_buf_release(&m2);
}

static void run_sync(const recon_set_t *a, const recon_set_t *b, const recon_config_t *cfg,
		     sync_out_t *o)
{
	run_sync2(a, b, cfg, cfg, o);
}

static int id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

/* Sorted, deduplicated copy of ids; returns the count. */
static size_t ids_sorted(const recon_ids_t *ids, uint8_t (**out)[32])
{
	*out = malloc((ids->n ? ids->n : 1) * 32);
	if (ids->n)
		memcpy(*out, ids->ids, ids->n * 32);
	qsort(*out, ids->n, 32, id_cmp);
	size_t k = 0;
	for (size_t i = 0; i < ids->n; i++)
		if (k == 0 || memcmp((*out)[k - 1], (*out)[i], 32) != 0)
			memcpy((*out)[k++], (*out)[i], 32);
	return k;
}

/* Ids of u with mask bits exactly `want` (sorted). */
static size_t expected_ids(const recon_item_t *u, const uint8_t *mask, size_t n, int want,
			   uint8_t (**out)[32])
{
	*out = malloc((n ? n : 1) * 32);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (mask[i] == want)
			memcpy((*out)[k++], u[i].id, 32);
	qsort(*out, k, 32, id_cmp);
	return k;
}

static int ids_equal(const recon_ids_t *got, const recon_item_t *u, const uint8_t *mask,
		     size_t n, int want)
{
	uint8_t(*g)[32], (*e)[32];
	size_t ng = ids_sorted(got, &g), ne = expected_ids(u, mask, n, want, &e);
	int ok = ng == ne && memcmp(g, e, ng * 32) == 0;
	if (!ok)
		fprintf(stderr, "#   got %zu distinct ids, expected %zu\n", ng, ne);
	free(g);
	free(e);
	return ok;
}

static int item_id_cmp(const void *a, const void *b)
{
	return memcmp(((const recon_item_t *)a)->id, ((const recon_item_t *)b)->id, 32);
}

/* A have list carries each id's item timestamp (the caller reads the
 * event by it), a need list none. */
static int ts_right(const recon_ids_t *got, const recon_item_t *u, size_t n, int have)
{
	recon_item_t *byid = malloc((n ? n : 1) * sizeof(*byid));
	memcpy(byid, u, n * sizeof(*byid));
	qsort(byid, n, sizeof(*byid), item_id_cmp);
	int ok = 1;
	for (size_t i = 0; i < got->n && ok; i++) {
		recon_item_t key;
		memcpy(key.id, got->ids[i], 32);
		const recon_item_t *it = bsearch(&key, byid, n, sizeof(*byid), item_id_cmp);
		ok = have ? it && got->ts[i] == it->ts : got->ts[i] == RECON_TS_NONE;
	}
	free(byid);
	return ok;
}

/* Full check: both sides learn exactly their differences; after fetching
 * (adding the needed items from the other side) the sets are identical. */
static void check_sync(const recon_item_t *u, uint8_t *mask, size_t n,
		       const recon_config_t *cfg, sync_out_t *o)
{
	recon_set_t *a = side(u, mask, n, 1), *b = side(u, mask, n, 2);
	CHECK(a && b);
	run_sync(a, b, cfg, o);
	if (o->rc)
		fprintf(stderr, "#   sync failed: %d %s\n", o->rc, o->err);
	CHECK_INT_EQ(o->rc, 0);
	CHECK(ids_equal(&o->need_a, u, mask, n, 2));
	CHECK(ids_equal(&o->have_a, u, mask, n, 1));
	CHECK(ids_equal(&o->need_b, u, mask, n, 1));
	CHECK(ids_equal(&o->have_b, u, mask, n, 2));
	CHECK(ts_right(&o->have_a, u, n, 1) && ts_right(&o->have_b, u, n, 1));
	CHECK(ts_right(&o->need_a, u, n, 0) && ts_right(&o->need_b, u, n, 0));
	/* apply: every needed id is fetched from the other side */
	uint8_t(*na)[32], (*nb)[32];
	size_t cna = ids_sorted(&o->need_a, &na), cnb = ids_sorted(&o->need_b, &nb);
	for (size_t i = 0; i < n; i++) {
		if (mask[i] == 2 && bsearch(u[i].id, na, cna, 32, id_cmp))
			CHECK_INT_EQ(recon_set_add(a, u[i].ts, u[i].id), 0);
		if (mask[i] == 1 && bsearch(u[i].id, nb, cnb, 32, id_cmp))
			CHECK_INT_EQ(recon_set_add(b, u[i].ts, u[i].id), 0);
	}
	free(na);
	free(nb);
	CHECK_INT_EQ(recon_set_count(a), recon_set_count(b));
	size_t cnt = recon_set_count(a);
	for (size_t i = 0; i < cnt; i++) {
		recon_item_t x, y;
		recon_set_item_at(a, i, &x);
		recon_set_item_at(b, i, &y);
		if (memcmp(&x, &y, sizeof(x)) != 0) {
			CHECK(!"sets differ after applying the differences");
			break;
		}
	}
	/* and a second session finds nothing */
	sync_out_t o2;
	run_sync(a, b, cfg, &o2);
	CHECK_INT_EQ(o2.rc, 0);
	CHECK_INT_EQ(o2.need_a.n + o2.need_b.n + o2.have_a.n + o2.have_b.n, 0);
	CHECK_INT_EQ(o2.messages, 2);
	sync_out_release(&o2);
	recon_set_free(a);
	recon_set_free(b);
}

static void scenario(size_t n, uint64_t ts_span, uint64_t seed, unsigned only_a_per_mille,
		     unsigned only_b_per_mille, const recon_config_t *cfg, sync_out_t *o)
{
	rng_state = seed;
	recon_item_t *u = universe(n, ts_span);
	uint8_t *mask = malloc(n ? n : 1);
	for (size_t i = 0; i < n; i++) {
		unsigned r = (unsigned)(rng() % 1000);
		mask[i] = r < only_a_per_mille ? 1 : r < only_a_per_mille + only_b_per_mille ? 2 : 3;
	}
	check_sync(u, mask, n, cfg, o);
	free(mask);
	free(u);
}

#define TS_YEARS (UINT64_C(2) * 365 * 86400 * 1000000) /* two years in µs */

/* ---- the set ---------------------------------------------------------- */

typedef struct walk {
	const recon_set_t *s;
	size_t n, bad, stop_at;
} walk_t;

/* recon_set_each's callback: each item must be the one at its rank */
static int walk_check(void *arg, const recon_item_t *it)
{
	walk_t *w = arg;
	recon_item_t x;
	if (recon_set_item_at(w->s, w->n, &x) || memcmp(&x, it, sizeof(x)))
		w->bad++;
	size_t i = w->n++;
	return w->stop_at && i == w->stop_at ? 7 : 0;
}

TEST(set_matches_reference, "keeps order, counts and membership through random adds and removes")
{
	rng_state = 7;
	size_t n = 20000;
	recon_item_t *u = universe(n, 1000); /* many equal timestamps */
	uint8_t *in = calloc(n, 1);
	recon_set_t *s = recon_set_new();
	size_t count = 0;
	for (int round = 0; round < 60000; round++) {
		size_t i = rng() % n;
		if (rng() % 3) {
			int rc = recon_set_add(s, u[i].ts, u[i].id);
			CHECK_INT_EQ(rc, in[i] ? PITH_EEXIST : 0);
			count += !in[i];
			in[i] = 1;
		} else {
			int rc = recon_set_remove(s, u[i].ts, u[i].id);
			CHECK_INT_EQ(rc, in[i] ? 0 : PITH_ENOTFOUND);
			count -= in[i];
			in[i] = 0;
		}
	}
	CHECK_INT_EQ(recon_set_count(s), count);
	size_t r = 0;
	for (size_t i = 0; i < n; i++) {
		CHECK(recon_set_has(s, u[i].ts, u[i].id) == (in[i] != 0));
		if (!in[i])
			continue;
		recon_item_t x;
		CHECK_INT_EQ(recon_set_item_at(s, r, &x), 0);
		if (memcmp(&x, &u[i], sizeof(x)) != 0) {
			CHECK(!"item_at out of order");
			break;
		}
		r++;
	}
	recon_item_t x;
	CHECK_INT_EQ(recon_set_item_at(s, count, &x), PITH_ENOTFOUND);
	/* the walk: every item, in order, and it stops when asked */
	walk_t w = {.s = s};
	CHECK_INT_EQ(recon_set_each(s, walk_check, &w), 0);
	CHECK_INT_EQ(w.n, count);
	CHECK_INT_EQ(w.bad, 0);
	w = (walk_t){.s = s, .stop_at = count / 2};
	CHECK_INT_EQ(recon_set_each(s, walk_check, &w), 7);
	CHECK_INT_EQ(w.n, count / 2 + 1);
	/* remove everything, then the set works again */
	for (size_t i = 0; i < n; i++)
		if (in[i])
			CHECK_INT_EQ(recon_set_remove(s, u[i].ts, u[i].id), 0);
	CHECK_INT_EQ(recon_set_count(s), 0);
	CHECK_INT_EQ(recon_set_add(s, u[0].ts, u[0].id), 0);
	CHECK_INT_EQ(recon_set_count(s), 1);
	recon_set_free(s);
	free(in);
	free(u);
}

TEST(set_rejects_bad_input, "rejects unsorted or duplicate bulk input and timestamps past the maximum")
{
	recon_item_t it[3] = {{1, {1}}, {2, {1}}, {2, {1}}};
	recon_set_t *s = NULL;
	pith_err_t err = {0};
	CHECK_INT_EQ(recon_set_new_sorted(&s, it, 3, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "item 2 is not above item 1");
	CHECK(s == NULL);
	it[2].ts = RECON_TS_MAX + 1;
	CHECK_INT_EQ(recon_set_new_sorted(&s, it, 3, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "above the maximum");
	s = recon_set_new();
	uint8_t id[32] = {9};
	CHECK_INT_EQ(recon_set_add(s, RECON_TS_MAX + 1, id), PITH_EINVAL);
	CHECK_INT_EQ(recon_set_add(s, RECON_TS_MAX, id), 0);
	CHECK_INT_EQ(recon_set_add(s, RECON_TS_MAX, id), PITH_EEXIST);
	recon_set_free(s);
}

TEST(incremental_equals_bulk, "a set built item by item in random order reconciles as equal to a bulk-built one")
{
	rng_state = 11;
	size_t n = 30000;
	recon_item_t *u = universe(n, TS_YEARS);
	recon_set_t *bulk = NULL, *inc = recon_set_new();
	pith_err_t err;
	CHECK_INT_EQ(recon_set_new_sorted(&bulk, u, n, &err), 0);
	size_t *perm = malloc(n * sizeof(*perm));
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = rng() % (i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		CHECK_INT_EQ(recon_set_add(inc, u[perm[i]].ts, u[perm[i]].id), 0);
	sync_out_t o;
	run_sync(bulk, inc, NULL, &o);
	CHECK_INT_EQ(o.rc, 0);
	CHECK_INT_EQ(o.need_a.n + o.need_b.n, 0);
	CHECK_INT_EQ(o.messages, 2);
	sync_out_release(&o);
	free(perm);
	recon_set_free(bulk);
	recon_set_free(inc);
	free(u);
}

/* ---- reconciliation --------------------------------------------------- */

TEST(identical_sets, "identical sets agree in one round trip, for sizes 0 to 100,000")
{
	size_t sizes[] = {0, 1, 2, 31, 33, 1000, 100000};
	recon_config_t v1;
	recon_config_default(&v1);
	v1.version = RECON_VERSION;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		sync_out_t o;
		scenario(sizes[k], TS_YEARS, 100 + k, 0, 0, &v1, &o);
		CHECK_INT_EQ(o.messages, 2);
		CHECK(o.bytes < 400);
		sync_out_release(&o);
		/* version 2's estimate: 16 blocks of FP ranges */
		scenario(sizes[k], TS_YEARS, 100 + k, 0, 0, NULL, &o);
		CHECK_INT_EQ(o.messages, 2);
		CHECK(o.bytes < 2500);
		sync_out_release(&o);
	}
}

TEST(disjoint_sets, "disjoint sets each learn all of the other's ids")
{
	size_t sizes[] = {1, 40, 5000, 60000};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		sync_out_t o;
		scenario(sizes[k], TS_YEARS, 200 + k, 500, 500, NULL, &o);
		sync_out_release(&o);
	}
}

TEST(overlapping_sets, "overlapping sets with both sides missing some end identical")
{
	unsigned rates[][2] = {{1, 1}, {10, 0}, {0, 10}, {50, 50}, {300, 100}};
	for (size_t k = 0; k < sizeof(rates) / sizeof(rates[0]); k++) {
		sync_out_t o;
		scenario(50000, TS_YEARS, 300 + k, rates[k][0], rates[k][1], NULL, &o);
		sync_out_release(&o);
	}
}

TEST(empty_vs_full, "an empty side learns every id of a full side, as initiator and as responder")
{
	sync_out_t o;
	scenario(150000, TS_YEARS, 400, 1000, 0, NULL, &o); /* all on A */
	CHECK(o.messages > 2); /* more than fits one message: deferred */
	CHECK(o.bytes < 150000 * 33);
	sync_out_release(&o);
	scenario(150000, TS_YEARS, 401, 0, 1000, NULL, &o); /* all on B */
	CHECK(o.bytes < 150000 * 33);
	sync_out_release(&o);
	scenario(0, TS_YEARS, 402, 0, 0, NULL, &o);
	CHECK_INT_EQ(o.messages, 2);
	sync_out_release(&o);
}

TEST(edges_of_time_range, "differences at the very first and last items and at timestamps 0 and the maximum")
{
	rng_state = 500;
	size_t n = 20000;
	recon_item_t *u = universe(n, TS_YEARS);
	u[0].ts = 0;
	memset(u[0].id, 0, 32);
	u[0].id[31] = 1;
	u[n - 1].ts = RECON_TS_MAX;
	memset(u[n - 1].id, 0xff, 32);
	uint8_t *mask = malloc(n);
	memset(mask, 3, n);
	sync_out_t o;
	mask[0] = 1;
	mask[n - 1] = 2;
	check_sync(u, mask, n, NULL, &o);
	sync_out_release(&o);
	mask[0] = 2;
	mask[1] = 2;
	mask[n - 1] = 1;
	mask[n - 2] = 1;
	check_sync(u, mask, n, NULL, &o);
	sync_out_release(&o);
	free(mask);
	free(u);
}

TEST(single_item_difference, "a single missing item is found with traffic far below the set size")
{
	rng_state = 600;
	size_t n = 100000;
	recon_item_t *u = universe(n, TS_YEARS);
	uint8_t *mask = malloc(n);
	for (int side_bit = 1; side_bit <= 2; side_bit++) {
		memset(mask, 3, n);
		mask[rng() % n] = (uint8_t)side_bit;
		sync_out_t o;
		check_sync(u, mask, n, NULL, &o);
		CHECK(o.bytes < 4000);
		sync_out_release(&o);
	}
	free(mask);
	free(u);
}

TEST(equal_timestamps, "items sharing one timestamp are split by id prefixes")
{
	sync_out_t o;
	scenario(40000, 1, 700, 20, 20, NULL, &o); /* every ts is 0 */
	sync_out_release(&o);
	scenario(40000, 3, 701, 5, 5, NULL, &o);
	sync_out_release(&o);
}

TEST(small_messages, "with the smallest message limit and odd tuning the exchange still converges")
{
	recon_config_t cfg;
	recon_config_default(&cfg);
	cfg.max_msg_bytes = 64 << 10;
	cfg.fanout = 2;
	cfg.list_max = 1;
	cfg.reply_max = 1;
	sync_out_t o;
	scenario(20000, TS_YEARS, 800, 30, 30, &cfg, &o);
	sync_out_release(&o);
	cfg.fanout = 64;
	cfg.list_max = 1024;
	cfg.reply_max = 1024;
	scenario(100000, TS_YEARS, 801, 100, 100, &cfg, &o);
	CHECK(o.messages > 2);
	sync_out_release(&o);
	cfg.max_work = 1000; /* every message defers after a few ranges */
	cfg.fanout = 16;
	cfg.list_max = 32;
	cfg.reply_max = 256;
	scenario(20000, TS_YEARS, 802, 20, 20, &cfg, &o);
	sync_out_release(&o);
}

TEST(set_changes_mid_session, "items arriving during a session do not break it")
{
	rng_state = 900;
	size_t n = 30000;
	recon_item_t *u = universe(n + 500, TS_YEARS);
	uint8_t *mask = malloc(n + 500);
	for (size_t i = 0; i < n + 500; i++)
		mask[i] = rng() % 50 == 0 ? 1 + (uint8_t)(rng() % 2) : 3;
	recon_set_t *a = side(u, mask, n + 500, 1), *b = side(u, mask, n + 500, 2);
	/* remove 500 random items from A's set, re-add them mid-session */
	size_t late[500], nl = 0;
	for (size_t i = 0; i < n + 500 && nl < 500; i += 61)
		if (mask[i] & 1)
			late[nl++] = i;
	for (size_t k = 0; k < nl; k++)
		CHECK_INT_EQ(recon_set_remove(a, u[late[k]].ts, u[late[k]].id), 0);
	pith_err_t err = {0};
	recon_session_t *sa = recon_session_new(a, RECON_INITIATOR, NULL, NULL, &err);
	recon_session_t *sb = recon_session_new(b, RECON_RESPONDER, NULL, NULL, &err);
	pith_buf_t m1 = PITH_BUF_INIT, m2 = PITH_BUF_INIT;
	recon_ids_t ha = RECON_IDS_INIT, na = RECON_IDS_INIT, hb = RECON_IDS_INIT,
		    nb = RECON_IDS_INIT;
	int rc = recon_initiate(sa, &m1, &err);
	int msgs = 0;
	while (!rc) {
		rc = recon_respond(sb, m1.data, m1.len, &m2, &hb, &nb, &err);
		if (rc || !m2.len)
			break;
		if (msgs++ == 1)
			for (size_t k = 0; k < nl; k++)
				recon_set_add(a, u[late[k]].ts, u[late[k]].id);
		rc = recon_respond(sa, m2.data, m2.len, &m1, &ha, &na, &err);
		if (rc || !m1.len)
			break;
	}
	CHECK_INT_EQ(rc, 0);
	CHECK(recon_session_is_done(sa) && recon_session_is_done(sb));
	recon_session_free(sa);
	recon_session_free(sb);
	/* a second, undisturbed session then finds exactly the difference */
	sync_out_t o;
	run_sync(a, b, NULL, &o);
	CHECK_INT_EQ(o.rc, 0);
	CHECK(ids_equal(&o.need_a, u, mask, n + 500, 2));
	CHECK(ids_equal(&o.need_b, u, mask, n + 500, 1));
	sync_out_release(&o);
	recon_ids_release(&ha);
	recon_ids_release(&na);
	recon_ids_release(&hb);
	recon_ids_release(&nb);
	pith_buf_release(&m1);
	pith_buf_release(&m2);
	recon_set_free(a);
	recon_set_free(b);
	free(mask);
	free(u);
}

/* ---- version 2: coded cells, the estimate, mixed versions ------------- */

static uint64_t key_at(uint64_t i)
{
	uint64_t st = i * 0x9e3779b97f4a7c15ULL + 7;
	return st ^ (st >> 29) ^ (i << 41);
}

TEST(cells_codec, "coded cells: put/get round trip, exact decoding both ways, overload refused")
{
	size_t sizes[] = {1, 2, 10, 300, 1000};
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t d = sizes[k];
		uint32_t m = recon_cells_for((double)d);
		recon_cells_t a, b;
		CHECK_INT_EQ(recon_cells_init(&a, m, 11, 22), 0);
		CHECK_INT_EQ(recon_cells_init(&b, m, 11, 22), 0);
		/* 5,000 common keys; d differ: even ones only in a, odd only in b */
		for (uint64_t i = 0; i < 5000 + d; i++) {
			uint64_t key = key_at(i);
			if (i < 5000 || (i - 5000) % 2 == 0)
				recon_cells_toggle(&a, key, 1);
			if (i < 5000 || (i - 5000) % 2 == 1)
				recon_cells_toggle(&b, key, 1);
		}
		uint8_t *wire = malloc((size_t)m * CELL_BYTES);
		recon_cells_put(&a, wire);
		recon_cells_t got;
		CHECK_INT_EQ(recon_cells_init(&got, m, 11, 22), 0);
		recon_cells_get(&got, wire);
		CHECK(memcmp(got.key, a.key, m * sizeof(uint64_t)) == 0);
		CHECK(memcmp(got.cnt, a.cnt, m) == 0 && memcmp(got.chk, a.chk, m * 4) == 0);
		/* a's cells minus b's items: what a has is +1, what b has is -1 */
		for (uint64_t i = 0; i < 5000 + d; i++)
			if (i < 5000 || (i - 5000) % 2 == 1)
				recon_cells_toggle(&got, key_at(i), -1);
		uint64_t *plus = malloc(m * 8), *minus = malloc(m * 8), work = 0;
		uint32_t np = 0, nm = 0;
		CHECK_INT_EQ(recon_cells_decode(&got, plus, &np, minus, &nm, &work), 0);
		CHECK_INT_EQ(np, (d + 1) / 2);
		CHECK_INT_EQ(nm, d / 2);
		size_t right = 0;
		for (uint32_t i = 0; i < np; i++)
			for (uint64_t j = 5000; j < 5000 + d; j += 2)
				right += plus[i] == key_at(j);
		for (uint32_t i = 0; i < nm; i++)
			for (uint64_t j = 5001; j < 5000 + d; j += 2)
				right += minus[i] == key_at(j);
		CHECK_INT_EQ(right, d);
		CHECK(work <= 5 * (uint64_t)m);
		free(plus);
		free(minus);
		free(wire);
		recon_cells_release(&got);
		recon_cells_release(&a);
		recon_cells_release(&b);
	}
	/* far more differences than cells: refused, never a wrong answer */
	recon_cells_t c;
	CHECK_INT_EQ(recon_cells_init(&c, 20, 1, 2), 0);
	for (uint64_t i = 0; i < 200; i++)
		recon_cells_toggle(&c, key_at(i), 1);
	uint64_t plus[20], minus[20], work = 0;
	uint32_t np, nm;
	CHECK_INT_EQ(recon_cells_decode(&c, plus, &np, minus, &nm, &work), PITH_EINVAL);
	recon_cells_release(&c);
	CHECK_INT_EQ(recon_cells_init(&c, 0, 1, 2), PITH_EINVAL);
	CHECK_INT_EQ(recon_cells_init(&c, CELLS_MAX + 1, 1, 2), PITH_EINVAL);
	CHECK(recon_cells_for(1e9) == CELLS_MAX);
}

TEST(estimate, "the difference estimate is within a factor of 2 of the truth")
{
	/* ranges of falling sizes, as emit_estimate cuts them */
	double items = 1e6;
	size_t truths[] = {10, 1000, 50000};
	for (size_t k = 0; k < 3; k++) {
		rng_state = 900 + k;
		recon_sample_t smp[256];
		size_t n = 0;
		for (int b = 0; b < 16; b++) {
			double rest = items / 16;
			while (rest >= 2 && n < 256) {
				double take = rest - floor(rest / 4);
				double lam = (double)truths[k] * take / items;
				double u = (double)(rng() >> 11) / 9007199254740992.0;
				smp[n].items = (uint64_t)take;
				smp[n++].differ = u < 1 - exp(-lam);
				rest -= take;
			}
		}
		double d = recon_estimate(smp, n, items);
		CHECK(d > (double)truths[k] / 2 && d < (double)truths[k] * 2);
	}
	recon_sample_t none[3] = {{100, 0}, {10, 0}, {1, 0}};
	CHECK(recon_estimate(none, 3, 111) == 0);
}

static void versions_sync(uint32_t va, uint32_t vb, size_t n, unsigned per_mille,
			  sync_out_t *o, uint64_t seed)
{
	recon_config_t ca, cb;
	recon_config_default(&ca);
	recon_config_default(&cb);
	ca.version = va;
	cb.version = vb;
	rng_state = seed;
	recon_item_t *u = universe(n, TS_YEARS);
	uint8_t *mask = malloc(n);
	for (size_t i = 0; i < n; i++) {
		unsigned r = (unsigned)(rng() % 1000);
		mask[i] = r < per_mille ? 1 : r < 2 * per_mille ? 2 : 3;
	}
	recon_set_t *a = side(u, mask, n, 1), *b = side(u, mask, n, 2);
	run_sync2(a, b, &ca, &cb, o);
	if (!o->rc) {
		CHECK_INT_EQ(o->version, va);
		CHECK(ids_equal(&o->need_a, u, mask, n, 2) && ids_equal(&o->need_b, u, mask, n, 1));
		CHECK(ids_equal(&o->have_a, u, mask, n, 1) && ids_equal(&o->have_b, u, mask, n, 2));
	}
	recon_set_free(a);
	recon_set_free(b);
	free(mask);
	free(u);
}

TEST(mixed_versions, "a version 1 initiator and a version 2 responder reconcile in version 1; "
		     "a version 1 responder refuses version 2 as older nodes do")
{
	sync_out_t o;
	versions_sync(RECON_VERSION, RECON_VERSION_2, 20000, 5, &o, 31);
	CHECK_INT_EQ(o.rc, 0);
	sync_out_release(&o);
	versions_sync(RECON_VERSION_2, RECON_VERSION_2, 20000, 5, &o, 31);
	CHECK_INT_EQ(o.rc, 0);
	sync_out_release(&o);
	versions_sync(RECON_VERSION_2, RECON_VERSION, 20000, 5, &o, 31);
	CHECK_INT_EQ(o.rc, PITH_EINVAL);
	CHECK_STR_CONTAINS(o.err, "version 2, expected 1");
	sync_out_release(&o);
}

TEST(v2_near_the_difference, "version 2 exchanges under 100 bytes per difference in at most "
			     "6 messages (100,000 items, 1,000 differences)")
{
	for (uint64_t seed = 41; seed < 44; seed++) {
		sync_out_t o;
		versions_sync(RECON_VERSION_2, RECON_VERSION_2, 100000, 5, &o, seed);
		CHECK_INT_EQ(o.rc, 0);
		size_t d = o.need_a.n + o.need_b.n;
		CHECK(d > 800);
		CHECK(o.bytes < 100 * d);
		CHECK(o.messages <= 6);
		sync_out_release(&o);
	}
}

TEST(v2_clustered, "differences crowded into the newest items: cells that do not decode are "
		   "answered with more cells, and both sides end exact")
{
	size_t n = 30000;
	rng_state = 77;
	recon_item_t *u = universe(n, TS_YEARS);
	uint8_t *mask = malloc(n);
	/* 1,200 differences, all in the newest 2% of the items */
	for (size_t i = 0; i < n; i++)
		mask[i] = i < n - 1200 ? 3 : (i % 2 ? 1 : 2);
	sync_out_t o;
	check_sync(u, mask, n, NULL, &o);
	sync_out_release(&o);
	free(mask);
	free(u);
}

/* ---- hostile input ---------------------------------------------------- */

/* Feeds msg to a fresh responder over set; returns the code, err filled. */
static int feed(const recon_set_t *set, const uint8_t *msg, size_t len, pith_buf_t *out,
		pith_err_t *err)
{
	recon_session_t *s = recon_session_new(set, RECON_RESPONDER, NULL, NULL, err);
	int rc = recon_respond(s, msg, len, out, NULL, NULL, err);
	recon_session_free(s);
	return rc;
}

#define HDR 0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0

TEST(rejects_malformed, "rejects malformed messages with the reason and the byte offset")
{
	recon_set_t *s = recon_set_new();
	pith_buf_t out = PITH_BUF_INIT;
	pith_err_t err = {0};
	uint8_t ok[] = {HDR, 0x00, 0x02, 0x00}; /* LIST of 0 ids to +inf */
	CHECK_INT_EQ(feed(s, ok, sizeof(ok), &out, &err), 0);

	uint8_t v3[] = {0x03, 0x01};
	CHECK_INT_EQ(feed(s, v3, sizeof(v3), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "version 3, expected 1..2");
	uint8_t nokey[] = {0x01, 0x00};
	CHECK_INT_EQ(feed(s, nokey, sizeof(nokey), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "lacks the session key");
	uint8_t flags[] = {0x01, 0x81};
	CHECK_INT_EQ(feed(s, flags, sizeof(flags), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "unknown flags");
	uint8_t shortkey[] = {0x01, 0x01, 1, 2, 3};
	CHECK_INT_EQ(feed(s, shortkey, sizeof(shortkey), &out, &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "session key");
	uint8_t mode7[] = {HDR, 0x00, 0x07};
	CHECK_INT_EQ(feed(s, mode7, sizeof(mode7), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "unknown mode 7 at byte 18");
	uint8_t noend[] = {HDR, 0x41, 0x00};
	CHECK_INT_EQ(feed(s, noend, sizeof(noend), &out, &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "before the top of the key space");
	uint8_t after_inf[] = {HDR, 0x00, 0x00, 0x05, 0x00};
	CHECK_INT_EQ(feed(s, after_inf, sizeof(after_inf), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "after the end of the key space");
	uint8_t not_above[] = {HDR, 0x41, 0x00, 0x01, 0x00};
	CHECK_INT_EQ(feed(s, not_above, sizeof(not_above), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "bound at byte 20 is not above the previous one");
	uint8_t zero_first[] = {HDR, 0x01, 0x00, 0x00, 0x00};
	CHECK_INT_EQ(feed(s, zero_first, sizeof(zero_first), &out, &err), PITH_EINVAL);
	uint8_t fp_short[] = {HDR, 0x00, 0x01, 1, 2, 3};
	CHECK_INT_EQ(feed(s, fp_short, sizeof(fp_short), &out, &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "fingerprint at byte 20 needs 8 bytes, 3 left");
	uint8_t list_big[] = {HDR, 0x00, 0x02, 0x81, 0x10}; /* 2049 ids */
	CHECK_INT_EQ(feed(s, list_big, sizeof(list_big), &out, &err), PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "above the limit");
	uint8_t list_trunc[] = {HDR, 0x00, 0x02, 0x02, 1, 2, 3, 4, 5, 6};
	CHECK_INT_EQ(feed(s, list_trunc, sizeof(list_trunc), &out, &err), PITH_ETRUNC);
	uint8_t varint_long[] = {HDR, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02};
	CHECK_INT_EQ(feed(s, varint_long, sizeof(varint_long), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "overflows 64 bits");
	uint8_t varint_pad[] = {HDR, 0x80, 0x00, 0x00};
	CHECK_INT_EQ(feed(s, varint_pad, sizeof(varint_pad), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not minimally encoded");
	uint8_t ts_big[] = {HDR, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0x00};
	CHECK_INT_EQ(feed(s, ts_big, sizeof(ts_big), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "past the largest timestamp");
	uint8_t prefix_big[] = {HDR, 0x02, 0x88, 0x02}; /* 33-byte id prefix */
	CHECK_INT_EQ(feed(s, prefix_big, sizeof(prefix_big), &out, &err), PITH_EINVAL);
	uint8_t empty_reply[] = {HDR, 0x00, 0x03, 0x00, 0x00};
	CHECK_INT_EQ(feed(s, empty_reply, sizeof(empty_reply), &out, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "empty REPLY");
	uint8_t trunc_hdr[] = {0x01};
	CHECK_INT_EQ(feed(s, trunc_hdr, sizeof(trunc_hdr), &out, &err), PITH_ETRUNC);

	/* version 2: modes 5 and 6 only there; cells and replies bounded */
#define HDR2 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00
	static const struct {
		uint8_t msg[32];
		size_t len;
		int code;
		const char *says;
	} bad2[] = {
		{{HDR, 0x00, 0x05, 0x01}, 21, PITH_EINVAL, "mode 5 at byte 18 needs version 2"},
		{{HDR2, 0x00, 0x02, 0x00}, 22, 0, ""},
		{{HDR2}, 18, PITH_ETRUNC, "density"},
		{{HDR2}, 17, PITH_ETRUNC, "session key"},
		{{0x02, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81, 0x80, 0x80,
		  0x80, 0x40},
		 23, PITH_EINVAL, "density"},
		{{HDR2, 0x00, 0x05, 0x00}, 22, PITH_EINVAL, "0 cells at byte 19, not in 1..1536"},
		{{HDR2, 0x00, 0x05, 0x81, 0x0c}, 23, PITH_EINVAL, "1537 cells"},
		{{HDR2, 0x00, 0x05, 0x02, 1, 2, 3}, 25, PITH_ETRUNC,
		 "cells at byte 22 needs 26 bytes, 3 left"},
		{{HDR2, 0x00, 0x06, 0x00, 0x00}, 23, PITH_EINVAL, "empty CREPLY"},
		{{HDR2, 0x00, 0x06, 0x81, 0x0c}, 23, PITH_ETOOBIG, "above the limit of 1536"},
		{{HDR2, 0x00, 0x06, 0x01, 1, 2}, 23, PITH_ETRUNC, "coded reply id count"},
		{{0x02, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x02,
		  0x00},
		 22, PITH_EINVAL, "LIST at byte 19 in an estimating message"},
		{{0x01, 0x03}, 2, PITH_EINVAL, "unknown flags 0x03"},
		{{0x02, 0x02}, 2, PITH_EINVAL, "lacks the session key"},
	};
	for (size_t i = 0; i < sizeof(bad2) / sizeof(bad2[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK_INT_EQ(feed(s, bad2[i].msg, bad2[i].len, &out, &err), bad2[i].code);
		CHECK_STR_CONTAINS(err.msg, bad2[i].says);
	}

	/* one cell over 100 items cannot decode: answered with more cells */
	recon_set_t *hundred = recon_set_new();
	for (uint64_t i = 0; i < 100; i++) {
		uint8_t id[32] = {0};
		memcpy(id, &i, 8);
		id[9] = 1;
		CHECK_INT_EQ(recon_set_add(hundred, 1000 + i, id), 0);
	}
	uint8_t one_cell[] = {HDR2, 0x00, 0x05, 0x01, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	CHECK_INT_EQ(feed(hundred, one_cell, sizeof(one_cell), &out, &err), 0);
	/* version, flags, density; +inf bound, CELLS, 1 + 1/2 + 8 cells */
	CHECK_INT_EQ(out.len, 3 + 3 + 9 * CELL_BYTES);
	CHECK_INT_EQ(out.data[0], RECON_VERSION_2);
	CHECK_INT_EQ(out.data[3], 0);
	CHECK_INT_EQ(out.data[4], M_CELLS);
	CHECK_INT_EQ(out.data[5], 9);
	recon_set_free(hundred);

	/* one cell over 10,000 items: no honest coder sends that (at most
	 * 4,096 items a cell), so it is not scanned but asked about again */
	recon_set_t *many = recon_set_new();
	for (uint64_t i = 0; i < 10000; i++) {
		uint8_t id[32] = {0};
		memcpy(id, &i, 8);
		id[9] = 2;
		CHECK_INT_EQ(recon_set_add(many, 1000 + i, id), 0);
	}
	recon_session_t *r = recon_session_new(many, RECON_RESPONDER, NULL, NULL, &err);
	CHECK_INT_EQ(recon_respond(r, one_cell, sizeof(one_cell), &out, NULL, NULL, &err), 0);
	recon_stats_t st;
	recon_session_stats(r, &st);
	CHECK_INT_EQ(st.cells_failed, 0);
	/* 16 FPs of 8 bytes and their bounds, not 9 cells (123 bytes) */
	CHECK(out.len > 16 * 10 && out.len < 16 * 20);
	recon_session_free(r);
	recon_set_free(many);
	pith_buf_release(&out);
	recon_set_free(s);
}

TEST(errors_are_sticky, "after an error, and after the end, a session refuses further messages")
{
	recon_set_t *set = recon_set_new();
	pith_buf_t out = PITH_BUF_INIT;
	pith_err_t err = {0};
	recon_session_t *s = recon_session_new(set, RECON_RESPONDER, NULL, NULL, &err);
	uint8_t bad[] = {0x07};
	CHECK_INT_EQ(recon_respond(s, bad, 1, &out, NULL, NULL, &err), PITH_ETRUNC);
	uint8_t ok[] = {HDR, 0x00, 0x02, 0x00};
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(recon_respond(s, ok, sizeof(ok), &out, NULL, NULL, &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "header");
	CHECK_INT_EQ(recon_session_error(s), PITH_ETRUNC);
	recon_session_free(s);

	s = recon_session_new(set, RECON_RESPONDER, NULL, NULL, &err);
	CHECK_INT_EQ(recon_respond(s, ok, sizeof(ok), &out, NULL, NULL, &err), 0);
	CHECK(recon_session_is_done(s));
	CHECK_INT_EQ(recon_respond(s, ok, sizeof(ok), &out, NULL, NULL, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "already done");
	recon_session_free(s);

	s = recon_session_new(set, RECON_INITIATOR, NULL, NULL, &err);
	CHECK_INT_EQ(recon_respond(s, ok, sizeof(ok), &out, NULL, NULL, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not initiated");
	recon_session_free(s);
	pith_buf_release(&out);
	recon_set_free(set);
}

TEST(limits_hold, "oversized messages, too many rounds and hostile lists stay within the limits")
{
	rng_state = 1000;
	size_t n = 200000;
	recon_item_t *u = universe(n, TS_YEARS);
	recon_set_t *set = NULL;
	pith_err_t err = {0};
	CHECK_INT_EQ(recon_set_new_sorted(&set, u, n, &err), 0);
	recon_config_t cfg;
	recon_config_default(&cfg);
	pith_buf_t out = PITH_BUF_INIT;

	/* a message over max_msg_bytes is refused before it is parsed */
	size_t big = cfg.max_msg_bytes + 1;
	uint8_t *msg = calloc(big, 1);
	msg[0] = 1;
	msg[1] = 1;
	CHECK_INT_EQ(feed(set, msg, big, &out, &err), PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "over the limit");

	/* "I have nothing": the answer stays within one message */
	uint8_t none[] = {HDR, 0x00, 0x02, 0x00};
	recon_ids_t have = RECON_IDS_INIT;
	recon_session_t *s = recon_session_new(set, RECON_RESPONDER, NULL, NULL, &err);
	CHECK_INT_EQ(recon_respond(s, none, sizeof(none), &out, &have, NULL, &err), 0);
	CHECK(out.len <= cfg.max_msg_bytes);
	CHECK(have.n > 1000 && have.n < n);
	recon_stats_t st;
	recon_session_stats(s, &st);
	CHECK_INT_EQ(st.deferred, 1);
	recon_session_free(s);
	recon_ids_release(&have);

	/* 15,000 fingerprint ranges that all mismatch: bounded answer */
	size_t len = 18;
	memcpy(msg, (uint8_t[]){HDR}, 18);
	uint64_t step = TS_YEARS / 15000;
	for (int k = 0; k < 15000; k++) {
		/* bound code (step << 6 | 0) + 1 as a varint, then FP */
		uint64_t code = (step << 6) + 1;
		while (code >= 0x80) {
			msg[len++] = (uint8_t)(code | 0x80);
			code >>= 7;
		}
		msg[len++] = (uint8_t)code;
		msg[len++] = 0x01;
		memset(msg + len, 0xab, 8);
		len += 8;
	}
	msg[len++] = 0x00;
	msg[len++] = 0x00;
	CHECK(len <= cfg.max_msg_bytes);
	s = recon_session_new(set, RECON_RESPONDER, NULL, NULL, &err);
	CHECK_INT_EQ(recon_respond(s, msg, len, &out, NULL, NULL, &err), 0);
	CHECK(out.len <= cfg.max_msg_bytes);
	recon_session_stats(s, &st);
	CHECK_INT_EQ(st.deferred, 1);
	recon_session_free(s);

	/* rounds: a session never ends if the peer keeps asking; max_rounds */
	cfg.max_rounds = 3;
	s = recon_session_new(set, RECON_RESPONDER, &cfg, NULL, &err);
	uint8_t again[] = {0x01, 0x00, 0x00, 0x02, 0x00};
	CHECK_INT_EQ(recon_respond(s, none, sizeof(none), &out, NULL, NULL, &err), 0);
	CHECK_INT_EQ(recon_respond(s, again, sizeof(again), &out, NULL, NULL, &err), 0);
	CHECK_INT_EQ(recon_respond(s, again, sizeof(again), &out, NULL, NULL, &err), 0);
	CHECK_INT_EQ(recon_respond(s, again, sizeof(again), &out, NULL, NULL, &err),
		     PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "more than 3 messages");
	recon_session_free(s);

	/* bad configurations are refused */
	cfg.max_rounds = 10;
	cfg.max_msg_bytes = 1000;
	CHECK(recon_session_new(set, RECON_RESPONDER, &cfg, NULL, &err) == NULL);
	CHECK_STR_CONTAINS(err.msg, "max_msg_bytes");

	free(msg);
	pith_buf_release(&out);
	recon_set_free(set);
	free(u);
}

int main(void)
{
	RUN(set_matches_reference);
	RUN(set_rejects_bad_input);
	RUN(incremental_equals_bulk);
	RUN(identical_sets);
	RUN(disjoint_sets);
	RUN(overlapping_sets);
	RUN(empty_vs_full);
	RUN(edges_of_time_range);
	RUN(single_item_difference);
	RUN(equal_timestamps);
	RUN(small_messages);
	RUN(set_changes_mid_session);
	RUN(cells_codec);
	RUN(estimate);
	RUN(mixed_versions);
	RUN(v2_near_the_difference);
	RUN(v2_clustered);
	RUN(rejects_malformed);
	RUN(errors_are_sticky);
	RUN(limits_hold);
	return test_done();
}
