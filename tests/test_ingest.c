/* The ingest pipeline (pith_ingest, node/ingest/ingest_core.h) on a real store:
 * validation and its names for each failure, groups committed whole and in
 * order, single jobs, and what a shutdown hands back. */
#include <stdlib.h>
#include <string.h>

#include "ingest_core.h"
#include "store_test_util.h"
#include "test_util.h"
#include "testgen.h"

static tg_key_t reg, op;
static pith_trust_t *trust;
static pith_buf_t bundle_bytes;

/* The jobs handed back, in order (the test thread delivers them). */
typedef struct backlog {
	ingest_job_t *got[256];
	size_t n;
} backlog_t;

static void on_done(void *arg, ingest_job_t *job)
{
	backlog_t *b = arg;
	if (b->n < sizeof(b->got) / sizeof(b->got[0]))
		b->got[b->n++] = job;
}

/* A pipeline over a fresh store. */
typedef struct fixture {
	char *dir;
	store_t *st;
	ingest_core_t *c;
	backlog_t b;
} fixture_t;

static void start(fixture_t *f)
{
	memset(f, 0, sizeof(*f));
	f->dir = stu_tmpdir("test_ingest");
	f->st = stu_open_store(f->dir, trust);
	ingest_opts_t o = {.trust = trust, .st = f->st, .nthreads = 2, .max_bundle_bytes = 1u << 20,
			   .on_done = on_done, .done_arg = &f->b};
	f->c = ingest_core_new(&o);
}

static void finish(fixture_t *f)
{
	ingest_core_free(f->c);
	store_close(f->st);
	stu_rmdir_rf(f->dir);
}

static void release_all(pith_buf_t *bufs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pith_buf_release(&bufs[i]);
}

/* Delivers until n jobs are back. */
static void wait_for(ingest_core_t *c, backlog_t *b, size_t n)
{
	while (b->n < n)
		if (!ingest_core_deliver(c))
			ingest_core_wait(c);
}

/* n signed events of one record (record_created first) into evs[]. */
static void make_events(pith_buf_t *evs, size_t n, unsigned rec)
{
	char pith[PITH_NUMBER_LEN + 1], id[PITH_EVENT_ID_LEN + 1], at[32];
	pith_buf_t r = PITH_BUF_INIT;
	tg_record(rec, &r, pith);
	pith_buf_release(&r);
	for (size_t i = 0; i < n; i++) {
		evs[i] = (pith_buf_t)PITH_BUF_INIT;
		snprintf(at, sizeof(at), "2026-01-01T00:00:%02uZ", (unsigned)i);
		if (i == 0)
			tg_event(&evs[i], &reg, "record_created", pith, "record", at, NULL, NULL, NULL,
				 0, (int)rec, id);
		else
			tg_event(&evs[i], &op, "mirror_hint", pith, "t", at, "{\"n\":1}", NULL, NULL, 0,
				 -1, id);
	}
}

static void setup(void)
{
	trust = tg_trust_pair(&reg, &op);
	stu_read_file(PITH_TEST_DATA "/bundle-AR7B3DEV.json", &bundle_bytes);
}

TEST(group_in_order, "commits a group as one batch and hands back every job, rejected ones named by fail code")
{
	fixture_t f;
	start(&f);
	ingest_core_t *c = f.c;
	backlog_t *b = &f.b;
	pith_buf_t evs[6];
	make_events(evs, 6, 300);
	/* 0..5 good, then: tampered, not JSON, truncated, refused before */
	ingest_job_t jobs[10], *jp[10];
	for (size_t i = 0; i < 6; i++)
		ingest_job_init(&jobs[i], INGEST_ANY, evs[i].data, evs[i].len);
	pith_buf_t bad = PITH_BUF_INIT;
	pith_buf_append(&bad, evs[1].data, evs[1].len);
	char *n1 = strstr((char *)bad.data, "\"n\":1");
	if (n1)
		n1[4] = '2';
	uint8_t junk[] = "not json", cut[] = "{\"event_type\":\"x";
	ingest_job_init(&jobs[6], INGEST_ANY, bad.data, bad.len);
	ingest_job_init(&jobs[7], INGEST_ANY, junk, sizeof(junk) - 1);
	ingest_job_init(&jobs[8], INGEST_EVENT, cut, sizeof(cut) - 1);
	ingest_job_init(&jobs[9], INGEST_ANY, junk, 0);
	ingest_job_reject(&jobs[9], INGEST_FAIL_TOO_BIG, PITH_ETOOBIG, "line too long");
	for (size_t i = 0; i < 10; i++)
		jp[i] = &jobs[i];
	ingest_group_t g;
	ingest_core_submit_group(c, &g, jp, 10);
	wait_for(c, b, 10);
	CHECK_INT_EQ(b->n, 10);
	CHECK_INT_EQ(ingest_core_in_flight(c), 0);
	CHECK_INT_EQ(g.rc, 0);
	CHECK_INT_EQ(g.stats.stored, 6);
	for (size_t i = 0; i < 6; i++) {
		CHECK_INT_EQ(jobs[i].rc, 0);
		CHECK_INT_EQ(jobs[i].kind, INGEST_EVENT);
		CHECK_INT_EQ(jobs[i].outcome, STORE_STORED);
	}
	CHECK_INT_EQ(jobs[0].is_record_created, 1);
	CHECK_INT_EQ(jobs[6].fail, INGEST_FAIL_CHECK);
	CHECK_INT_EQ(jobs[6].check, PITH_CHECK_CONTENT_HASH);
	CHECK_STR_EQ(jobs[6].reason, "content_hash");
	CHECK_INT_EQ(jobs[7].fail, INGEST_FAIL_CHECK);
	CHECK_INT_EQ(jobs[7].check, PITH_CHECK_JSON);
	CHECK_STR_EQ(jobs[7].reason, "json");
	CHECK_INT_EQ(jobs[8].check, PITH_CHECK_JSON);
	CHECK_INT_EQ(jobs[8].rc, PITH_ETRUNC);
	CHECK_INT_EQ(jobs[9].fail, INGEST_FAIL_TOO_BIG);
	CHECK_STR_EQ(jobs[9].msg, "line too long");
	/* a group comes back whole, in submission order */
	for (size_t i = 0; i < b->n; i++)
		CHECK(b->got[i] == &jobs[i]);
	finish(&f);
	for (size_t i = 0; i < 10; i++)
		ingest_job_clear(&jobs[i]);
	release_all(evs, 6);
	pith_buf_release(&bad);
}

TEST(singles, "commits single jobs (owned copies) and hands each back once, duplicates as such")
{
	fixture_t f;
	start(&f);
	ingest_core_t *c = f.c;
	backlog_t *b = &f.b;
	pith_buf_t evs[4];
	make_events(evs, 4, 301);
	for (size_t round = 0; round < 2; round++) {
		for (size_t i = 0; i < 4; i++)
			ingest_core_submit(c, ingest_job_new(INGEST_EVENT, evs[i].data, evs[i].len));
		wait_for(c, b, 4 * (round + 1));
	}
	CHECK_INT_EQ(b->n, 8);
	for (size_t i = 0; i < b->n; i++) {
		CHECK_INT_EQ(b->got[i]->rc, 0);
		CHECK_INT_EQ(b->got[i]->outcome, i < 4 ? STORE_STORED : STORE_DUPLICATE);
		ingest_job_free(b->got[i]);
	}
	ingest_stats_t s;
	ingest_core_stats_get(c, &s);
	CHECK_INT_EQ(s.submitted, 8);
	CHECK_INT_EQ(s.written, 4);
	CHECK(s.validate_batches >= 2 && s.validate_batches <= 8); /* two rounds; 1-4 a take */
	finish(&f);
	release_all(evs, 4);
}

TEST(bundle_names, "reports a tampered bundle as the node does (one line) and as a file's item (every check)")
{
	fixture_t f;
	start(&f);
	ingest_core_t *c = f.c;
	backlog_t *b = &f.b;
	pith_buf_t bad = PITH_BUF_INIT;
	pith_buf_append(&bad, bundle_bytes.data, bundle_bytes.len);
	char *v = strstr((char *)bad.data, "\"events\"");
	char *d = v ? strstr(v, "\"created_at\":\"20") : NULL;
	if (d)
		d[17] = d[17] == '9' ? '8' : (char)(d[17] + 1); /* a digit of a year */
	CHECK(d != NULL);
	ingest_core_submit(c, ingest_job_new(INGEST_BUNDLE, bad.data, bad.len));
	ingest_core_submit(c, ingest_job_new(INGEST_ANY, bad.data, bad.len));
	ingest_core_submit(c, ingest_job_new(INGEST_BUNDLE, bundle_bytes.data, bundle_bytes.len));
	wait_for(c, b, 3);
	CHECK_INT_EQ(b->n, 3);
	for (size_t i = 0; i < b->n; i++) {
		ingest_job_t *j = b->got[i];
		if (j->rc && strstr(j->msg, "failed checks: ")) {
			CHECK_INT_EQ(j->fail, INGEST_FAIL_BUNDLE);
		} else if (j->rc) {
			CHECK_STR_EQ(j->reason, "bundle");
			CHECK_STR_CONTAINS(j->msg, "bundle check ");
		} else {
			CHECK_INT_EQ(j->bundle_outcome, STORE_BUNDLE_NEWER);
			CHECK_INT_EQ(j->n_event_ids, 2);
			CHECK_INT_EQ(j->has_sha, 1);
		}
		ingest_job_free(j);
	}
	finish(&f);
	pith_buf_release(&bad);
}

TEST(shutdown, "a shutdown hands every job back, and a group either committed whole or not at all")
{
	fixture_t f;
	start(&f);
	ingest_core_t *c = f.c;
	backlog_t *b = &f.b;
	enum { N = 40 };
	pith_buf_t evs[N];
	make_events(evs, N, 302);
	ingest_job_t jobs[N], *jp[N];
	for (size_t i = 0; i < N; i++) {
		ingest_job_init(&jobs[i], INGEST_ANY, evs[i].data, evs[i].len);
		jp[i] = &jobs[i];
	}
	ingest_group_t g1, g2;
	ingest_core_submit_group(c, &g1, jp, N / 2);
	ingest_core_submit_group(c, &g2, jp + N / 2, N / 2);
	ingest_core_free(f.c); /* at once: the groups are still in the pipeline */
	CHECK_INT_EQ(b->n, N);
	size_t ok1 = 0, ok2 = 0;
	for (size_t i = 0; i < N; i++) {
		if (jobs[i].rc == 0 && i < N / 2)
			ok1++;
		else if (jobs[i].rc == 0)
			ok2++;
		else
			CHECK_INT_EQ(jobs[i].fail, INGEST_FAIL_SHUTDOWN);
		ingest_job_clear(&jobs[i]);
	}
	CHECK_INT_EQ(ok1, g1.rc ? 0 : N / 2);
	CHECK_INT_EQ(ok2, g2.rc ? 0 : N / 2);
	CHECK(!(g1.rc && !g2.rc)); /* in order */
	finish(&f);
	release_all(evs, N);
}

TEST(job_blocks, "a freed job's block is reused for the thread's next small job, cleared; large jobs have their own")
{
	uint8_t small[INGEST_JOB_INLINE], large[INGEST_JOB_INLINE + 1];
	memset(small, 's', sizeof(small));
	memset(large, 'l', sizeof(large));
	ingest_job_cache_release();
	ingest_job_t *a = ingest_job_new(INGEST_EVENT, small, 100);
	a->rc = -5;
	a->peer = 9;
	ingest_job_free_(a);
	ingest_job_t *b = ingest_job_new(INGEST_BUNDLE, small, sizeof(small));
	CHECK(b == a); /* the same block, */
	CHECK_INT_EQ(b->kind, INGEST_BUNDLE); /* cleared and filled again */
	CHECK_INT_EQ(b->rc, 0);
	CHECK_INT_EQ(b->peer, 0);
	CHECK_MEM_EQ(b->bytes, b->len, small, sizeof(small));
	ingest_job_t *c = ingest_job_new(INGEST_EVENT, large, sizeof(large));
	CHECK(c != b);
	CHECK_MEM_EQ(c->bytes, c->len, large, sizeof(large));
	ingest_job_free(c);
	ingest_job_t *d = ingest_job_new(INGEST_EVENT, small, 1);
	CHECK_MEM_EQ(d->bytes, d->len, small, 1);
	ingest_job_free(b);
	ingest_job_free(d);
	ingest_job_cache_release();
	ingest_job_t *e = ingest_job_new(INGEST_EVENT, small, 0);
	CHECK_INT_EQ(e->len, 0);
	ingest_job_free(e);
	ingest_job_cache_release();
}

int main(void)
{
	setup();
	RUN(group_in_order);
	RUN(singles);
	RUN(bundle_names);
	RUN(shutdown);
	RUN(job_blocks);
	pith_trust_free(trust);
	pith_buf_release(&bundle_bytes);
	return test_done();
}
