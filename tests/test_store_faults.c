/* The store (store/store.h), failures: a corrupted block, an interrupted creation, and
 * bulk mode's level 0. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "test_store_util.h"

/* ---- failures ------------------------------------------------------------- */

static int has_bytes(const uint8_t *p, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= n; i++)
		if (!memcmp(p + i, needle, k))
			return 1;
	return 0;
}

/* Flips the byte in the middle of the largest table file of docs in dir
 * (its column family's name is in the file's properties block). */
static int corrupt_docs_table(const char *dir)
{
	char best[4200] = "";
	long best_size = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[4200];
		pith_buf_t b = PITH_BUF_INIT;
		size_t l = strlen(e->d_name);
		if (l < 4 || strcmp(e->d_name + l - 4, ".sst"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (!stu_read_file(p, &b) && has_bytes(b.data, b.len, "namedocs") &&
		    (long)b.len > best_size) {
			best_size = (long)b.len;
			snprintf(best, sizeof(best), "%s", p);
		}
		pith_buf_release(&b);
	}
	if (d)
		closedir(d);
	FILE *f = best[0] ? fopen(best, "r+b") : NULL;
	if (!f)
		return -1;
	fseek(f, best_size / 2, SEEK_SET);
	int c = fgetc(f);
	fseek(f, best_size / 2, SEEK_SET);
	fputc(c ^ 0x40, f);
	fclose(f);
	return 0;
}

typedef struct err_seen {
	int reads, writes;
	char last[300];
} err_seen_t;

static void on_store_error(void *arg, int what, const char *line)
{
	err_seen_t *s = arg;
	if (what == STORE_OP_READ)
		s->reads++;
	else
		s->writes++;
	snprintf(s->last, sizeof(s->last), "%s", line);
}

static int count_read(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	(void)id;
	(void)len;
	*(size_t *)arg += bytes != NULL;
	return 0;
}

TEST(corrupt_block, "reads a corrupted block as an error, counted and told, never as an absent event")
{
	evset_t s;
	gen_set(&s, 16);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_flush(st, &err), 0);
	uint8_t(*ids)[32] = calloc(s.n, 32);
	size_t n = 0;
	for (size_t i = 0; i < s.n; i++) {
		pith_event_t *ev = NULL;
		if (!pith_event_parse(s.b[i].data, s.b[i].len, trust, &ev, NULL, NULL) &&
		    !store_event_id_parse(ev->event_id, ids[n], NULL))
			n++;
		pith_event_free(ev);
	}
	CHECK(n > 100);
	store_close(st);
	CHECK_INT_EQ(corrupt_docs_table(dir), 0);

	err_seen_t seen = {0};
	store_opts_t o = {.create = 1, .registry = trust, .on_error = on_store_error,
			  .on_error_arg = &seen};
	CHECK_INT_EQ(store_open(dir, &o, &st, &err), 0);
	store_errors_t e;
	store_errors_get(st, &e);
	CHECK(e.writable && e.read_errors == 0 && e.write_errors == 0 && !e.last_error[0]);
	CHECK(store_is_healthy(st, STORE_READ_ERROR_WINDOW_US, NULL, 0));

	size_t got = 0;
	size_t bad =
		store_events_get_many(st, (const uint8_t(*)[32])ids, n, count_read, &got, &err);
	CHECK(bad > 0 && bad < 40);
	CHECK_INT_EQ((int)(got + bad), (int)n);
	CHECK(strstr(err.msg, "Corruption") && strstr(err.msg, "sha256:"));
	store_errors_get(st, &e);
	CHECK_INT_EQ((int)e.read_errors, (int)bad);
	CHECK_INT_EQ(seen.reads, (int)bad);
	CHECK(strstr(e.last_error, "Corruption") != NULL);
	char why[400];
	CHECK(!store_is_healthy(st, STORE_READ_ERROR_WINDOW_US, why, sizeof(why)));
	CHECK(strstr(why, "read failed") != NULL);
	CHECK(store_is_healthy(st, 0, NULL, 0)); /* outside the window */

	/* one by one: PITH_EIO for the unreadable ones, never ENOTFOUND */
	size_t eio = 0;
	for (size_t i = 0; i < n; i++) {
		pith_buf_t b = PITH_BUF_INIT;
		int rc = store_event_get(st, ids[i], &b, &err);
		CHECK(rc == 0 || rc == PITH_EIO);
		eio += rc == PITH_EIO;
		pith_buf_release(&b);
	}
	CHECK_INT_EQ((int)eio, (int)bad);
	/* a record scan that meets the block fails, and says why */
	int failed = 0;
	for (size_t r = 0; r < s.nrec; r++) {
		size_t k = 0;
		int rc = store_events_each(st, s.pith[r], count_read, &k, &err);
		CHECK(rc == 0 || rc == PITH_EIO);
		failed += rc == PITH_EIO;
	}
	CHECK(failed > 0);
	CHECK_INT_EQ(seen.writes, 0);
	store_errors_get(st, &e);
	CHECK(e.writable && e.write_errors == 0);
	/* writes still work, and the probe says so */
	CHECK_INT_EQ(store_write_probe(st, &err), 0);
	free(ids);
	store_close(st);
	set_free(&s);
	rmdir_rf(dir);
}

/* A RocksDB database in dir with the first ncf of the store's column
 * families: what a creation killed between two of them left behind. */
static void partial_db(const char *dir, int ncf)
{
	rocksdb_options_t *o = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(o, 1);
	rocksdb_options_set_create_missing_column_families(o, 1);
	const rocksdb_options_t *cfo[STORE_NCF];
	rocksdb_column_family_handle_t *h[STORE_NCF];
	for (int i = 0; i < ncf; i++)
		cfo[i] = o;
	char *e = NULL;
	rocksdb_t *db = rocksdb_open_column_families(o, dir, ncf, store_cf_names, cfo, h, &e);
	CHECK(db && !e);
	for (int i = 0; db && i < ncf; i++)
		rocksdb_column_family_handle_destroy(h[i]);
	if (db)
		rocksdb_close(db);
	rocksdb_free(e);
	rocksdb_options_destroy(o);
}

TEST(creation_atomic, "a store is created whole or not at all; an interrupted creation is told and finished")
{
	char *dir = tmpdir();
	char s[600], stale[700], p[600], none[600], empty[600];
	snprintf(s, sizeof(s), "%s/s", dir);
	snprintf(p, sizeof(p), "%s/p", dir);
	snprintf(none, sizeof(none), "%s/none", dir);
	snprintf(empty, sizeof(empty), "%s/empty", dir);
	/* a creation killed half-way, by a process that is gone */
	pid_t dead = fork();
	if (!dead)
		_exit(0);
	waitpid(dead, NULL, 0);
	snprintf(stale, sizeof(stale), "%s.creating-%ld", s, (long)dead);
	partial_db(stale, 4);
	store_t *st = NULL;
	pith_err_t err = {0};
	store_opts_t ro = {.read_only = 1, .registry = trust};
	store_opts_t rw = {.create = 1, .registry = trust};
	CHECK_INT_EQ(store_open(s, &rw, &st, &err), 0);
	CHECK(exists(s, "CURRENT"));
	CHECK(access(stale, F_OK) != 0);
	DIR *d = opendir(dir);
	struct dirent *de;
	int leftovers = 0;
	while (d && (de = readdir(d)))
		leftovers += strstr(de->d_name, ".creating-") != NULL;
	if (d)
		closedir(d);
	CHECK_INT_EQ(leftovers, 0);
	store_close(st);
	CHECK_INT_EQ(store_open(s, &ro, &st, &err), 0);
	store_close(st);
	/* onto an empty directory that is already there */
	CHECK_INT_EQ(mkdir(empty, 0755), 0);
	CHECK_INT_EQ(store_open(empty, &rw, &st, &err), 0);
	store_close(st);
	CHECK_INT_EQ(store_open(empty, &ro, &st, &err), 0);
	store_close(st);
	/* a store made in place by an older build and killed between two
	 * column families: a reader says so, a writer finishes it */
	partial_db(p, 5);
	CHECK(store_open(p, &ro, &st, &err) != 0);
	CHECK_STR_CONTAINS(err.msg, "creation was interrupted");
	CHECK_STR_CONTAINS(err.msg, "import /dev/null");
	CHECK_INT_EQ(store_open(p, &rw, &st, &err), 0);
	store_close(st);
	CHECK_INT_EQ(store_open(p, &ro, &st, &err), 0);
	store_counts_t n;
	store_counts_get(st, &n);
	CHECK_INT_EQ(n.events, 0);
	store_close(st);
	/* no store at all */
	CHECK(store_open(none, &ro, &st, &err) != 0);
	CHECK_STR_CONTAINS(err.msg, "no store here");
	rmdir_rf(dir);
}

static uint64_t l0_files(store_t *st, int cf)
{
	uint64_t v = 999;
	CHECK_INT_EQ(store_cf_property(st, cf, "rocksdb.num-files-at-level0", &v), 0);
	return v;
}

/* One bulk load in mode: level 0 holds 10 files of the index families (in
 * both modes under the trigger) and 40 of states (past every other bulk
 * trigger: STORE_BULK_L0_WRITTEN), and of aliases more than the index
 * families' trigger. */
static void bulk_load_in(enum store_bulk_mode mode, int fresh)
{
	evset_t s;
	gen_set(&s, 12);
	char *dir = tmpdir();
	store_t *st = fresh ? open_fresh(dir) : open_store(dir);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_bulk_begin(st, mode, &err), 0);
	/* one table file per family and flush: 10 is past the usual trigger (4)
	 * and under the bulk ones */
	size_t per = s.n / 10;
	for (size_t i = 0; i < s.n; i++) {
		put_bytes(st, &s.b[i], NULL);
		if ((i + 1) % per == 0 && (i + 1) / per <= 10)
			CHECK_INT_EQ(store_flush(st, &err), 0);
	}
	CHECK_INT_EQ(l0_files(st, STORE_CF_EVENTS), 10);
	CHECK_INT_EQ(l0_files(st, STORE_CF_ALIASES), 10);
	CHECK_INT_EQ(l0_files(st, STORE_CF_STATES), 10);
	/* 30 more flushes: 40 is past every bulk trigger but that of states
	 * and aliases, which commits only write (STORE_BULK_L0_WRITTEN) */
	evset_t s2;
	gen_set_from(&s2, 16, 1000);
	size_t flushes = 0;
	for (size_t i = 0; i < s2.n; i++) {
		put_bytes(st, &s2.b[i], NULL);
		if ((i + 1) % (s2.n / 30) == 0 && flushes < 30) {
			CHECK_INT_EQ(store_flush(st, &err), 0);
			flushes++;
		}
	}
	CHECK_INT_EQ(l0_files(st, STORE_CF_STATES), 40);
	CHECK(l0_files(st, STORE_CF_ALIASES) > 16); /* one per record (16 of them), and 10 before */
	if (fresh) {
		/* filled from empty: the index families wait too, subj (read
		 * by prefix scans) included, in an import and in a node's
		 * first catch-up */
		CHECK_INT_EQ(l0_files(st, STORE_CF_EVENTS), 40);
		CHECK_INT_EQ(l0_files(st, STORE_CF_RECORDS), 40);
		CHECK_INT_EQ(l0_files(st, STORE_CF_SUBJ), 40);
	}
	CHECK_INT_EQ(store_bulk_end(st, 1, &err), 0);
	CHECK(l0_files(st, STORE_CF_EVENTS) < 4);
	CHECK(l0_files(st, STORE_CF_ALIASES) < 4);
	CHECK(l0_files(st, STORE_CF_STATES) < 4);
	CHECK(l0_files(st, STORE_CF_SUBJ) < 4);
	store_counts_t c;
	store_counts_get(st, &c);
	CHECK_INT_EQ(c.events, s.n + s2.n);
	CHECK_INT_EQ(check_problems(st), 0);
	set_free(&s2);
	/* byte-identical states to a store filled without it */
	char *dir2 = tmpdir();
	store_t *plain = filled_store(dir2, &s);
	for (size_t r = 0; r < s.nrec; r++) {
		pith_buf_t a = PITH_BUF_INIT, b = PITH_BUF_INIT;
		state_of(st, s.pith[r], &a);
		state_of(plain, s.pith[r], &b);
		CHECK(a.len > 0);
		CHECK_MEM_EQ(a.data, a.len, b.data, b.len);
		pith_buf_release(&a);
		pith_buf_release(&b);
	}
	store_close(plain);
	store_close(st);
	rmdir_rf(dir);
	rmdir_rf(dir2);
	set_free(&s);
}

TEST(bulk_load, "in bulk mode level 0 holds more files; its end compacts them and leaves the same store")
{
	bulk_load_in(STORE_BULK_SYNC, 0);
	bulk_load_in(STORE_BULK_SYNC, 1);
	bulk_load_in(STORE_BULK_IMPORT, 0);
	bulk_load_in(STORE_BULK_IMPORT, 1);
}

int main(void)
{
	setup();
	RUN(creation_atomic);
	RUN(bulk_load);
	RUN(corrupt_block);
	pith_trust_free(trust);
	pith_buf_release(&bundle_bytes);
	return test_done();
}
