/* The mechanisms written once (issue 52): the atomic file replace
 * (store/store_file.h), the worker pool's threads (store/store_pool.h),
 * the wake of a loop from another thread (node/loop/wake.h) and the HTTP
 * validator cache (node/follow/follow_etags.h). */
#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "follow_etags.h"
#include "idmap.h"
#include "store_file.h"
#include "store_pool.h"
#include "test_util.h"
#include "wake.h"

static char dir[64];

static void slurp(const char *path, char *out, size_t cap)
{
	out[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = 0;
	fclose(f);
}

static int exists(const char *path)
{
	struct stat st;
	return !stat(path, &st);
}

TEST(replace_writes_whole, "replaces a file with the new bytes and leaves no temporary file")
{
	char path[128], tmp[140], got[64];
	snprintf(path, sizeof(path), "%s/a", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	CHECK_INT_EQ(store_file_replace(path, "old\n", 4, 0644, 0), 0);
	CHECK_INT_EQ(store_file_replace(path, "new\n", 4, 0644, 0), 0);
	slurp(path, got, sizeof(got));
	CHECK_STR_EQ(got, "new\n");
	CHECK(!exists(tmp));
}

TEST(abort_keeps_old, "a replacement given up leaves the old bytes and no temporary file")
{
	char path[128], got[64];
	snprintf(path, sizeof(path), "%s/b", dir);
	CHECK_INT_EQ(store_file_replace(path, "kept", 4, 0644, STORE_FILE_NOSYNC), 0);
	store_file_t r;
	CHECK_INT_EQ(store_file_begin(&r, path, ".tmp~", 0644, 0), 0);
	fputs("half", r.fp);
	store_file_abort(&r);
	slurp(path, got, sizeof(got));
	CHECK_STR_EQ(got, "kept");
	CHECK(!exists(r.tmp));
}

TEST(missing_dir, "a replacement into a missing directory fails with ENOENT")
{
	char path[128];
	snprintf(path, sizeof(path), "%s/none/c", dir);
	store_file_t r;
	errno = 0;
	CHECK_INT_EQ(store_file_begin(&r, path, NULL, 0644, 0), -1);
	CHECK_INT_EQ(errno, ENOENT);
}

static void *add_one(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
	return NULL;
}

TEST(pool_runs_each, "a pool runs its function once on each thread's argument and joins them")
{
	atomic_int hits[8];
	for (int i = 0; i < 8; i++)
		atomic_init(&hits[i], 0);
	store_pool_t p = STORE_POOL_INIT;
	CHECK_INT_EQ((int)store_pool_start(&p, 8, add_one, hits, sizeof(hits[0])), 8);
	CHECK(store_pool_is_running(&p, 7));
	CHECK(!store_pool_is_running(&p, 8));
	store_pool_join(&p);
	for (int i = 0; i < 8; i++)
		CHECK_INT_EQ(atomic_load(&hits[i]), 1);
	CHECK_INT_EQ((int)store_pool_start(&p, 0, add_one, hits, 0), 0);
	store_pool_join(&p);
}

typedef struct wake_case {
	struct event_base *base;
	loop_wake_t *w;
	atomic_int fired;
	int calls;
} wake_case_t;

static void on_wake(void *arg)
{
	wake_case_t *c = arg;
	c->calls++;
	if (atomic_load(&c->fired) == 100)
		event_base_loopbreak(c->base);
}

static void *fire_many(void *arg)
{
	wake_case_t *c = arg;
	for (int i = 0; i < 100; i++) {
		atomic_fetch_add(&c->fired, 1);
		loop_wake_fire(c->w);
	}
	return NULL;
}

TEST(wake_from_thread, "a wake fired from another thread runs its callback on the loop, fires coalesced")
{
	wake_case_t c = {.base = event_base_new()};
	atomic_init(&c.fired, 0);
	CHECK(c.base != NULL);
	c.w = loop_wake_new(c.base, on_wake, &c);
	CHECK(c.w != NULL);
	pthread_t th;
	CHECK_INT_EQ(pthread_create(&th, NULL, fire_many, &c), 0);
	pthread_join(th, NULL); /* all fired before the loop runs: one call */
	event_base_loop(c.base, EVLOOP_ONCE);
	CHECK_INT_EQ(c.calls, 1);
	loop_wake_free(c.w);
	event_base_free(c.base);
}

#define BODY_A "abcdefghijklmnopqrstuvwxyz"
#define BODY_B "bbcdefghijklmnopqrstuvwxyz"

TEST(etags_match_url, "the validator cache answers an ETag only for the URL it came from")
{
	follow_etags_t *c = follow_etags_new();
	CHECK(c != NULL);
	CHECK_INT_EQ(follow_etags_put(c, BODY_A, "\"v1\"", "http://u/a"), 0);
	CHECK_STR_EQ(follow_etags_match(c, BODY_A, "http://u/a"), "\"v1\"");
	CHECK(follow_etags_match(c, BODY_A, "http://u/b") == NULL);
	CHECK(follow_etags_match(c, BODY_B, "http://u/a") == NULL);
	CHECK_INT_EQ(follow_etags_put(c, BODY_A, "W/\"weak\"", "http://u/a"), PITH_EINVAL);
	CHECK_INT_EQ(follow_etags_put(c, "short", "\"v\"", "http://u/a"), PITH_EINVAL);
	CHECK_INT_EQ(follow_etags_put(c, BODY_A, "\"v2\"", "http://u/a"), 0);
	CHECK_STR_EQ(follow_etags_match(c, BODY_A, "http://u/a"), "\"v2\"");
	CHECK_INT_EQ((int)follow_etags_count(c), 1);
	follow_etags_drop(c, BODY_A);
	CHECK_INT_EQ((int)follow_etags_count(c), 0);
	follow_etags_free(c);
	CHECK(c == NULL);
}

TEST(etags_file, "the validator cache's file round-trips, drops bad lines and keeps a record's last")
{
	char path[128], got[512];
	snprintf(path, sizeof(path), "%s/etags", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(BODY_B " \"b\" http://u/b\n"
	      "garbage\n"
	      BODY_A " \"old\" http://u/a\n"
	      BODY_A " \"new\" http://u/a\n"
	      BODY_A " \"x\"\n", f);
	fclose(f);
	follow_etags_t *c = follow_etags_new();
	CHECK_INT_EQ(follow_etags_load(c, path), 0);
	CHECK_INT_EQ((int)follow_etags_count(c), 2);
	CHECK_STR_EQ(follow_etags_match(c, BODY_A, "http://u/a"), "\"new\"");
	CHECK_INT_EQ(follow_etags_save(c, path), 0);
	slurp(path, got, sizeof(got));
	CHECK_STR_EQ(got, BODY_A " \"new\" http://u/a\n" BODY_B " \"b\" http://u/b\n");
	follow_etags_free(c);
	snprintf(path, sizeof(path), "%s/none", dir);
	c = follow_etags_new();
	CHECK_INT_EQ(follow_etags_load(c, path), 0); /* a missing file is an empty cache */
	follow_etags_free(c);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	idmap_init();
	snprintf(dir, sizeof(dir), "/tmp/test_mechanisms.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	RUN(replace_writes_whole);
	RUN(abort_keeps_old);
	RUN(missing_dir);
	RUN(pool_runs_each);
	RUN(wake_from_thread);
	RUN(etags_match_url);
	RUN(etags_file);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		return 1;
	return test_done();
}
