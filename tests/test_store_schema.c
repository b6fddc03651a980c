/* The store (store/store.h), the bundle index and the schema upgrades, reads by time,
 * the table options, commits without the log, the logs' bound, usage and
 * the counters. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include "test_store_util.h"

/* ---- the bundle index ------------------------------------------------------ */

typedef struct refs {
	int n;
	int64_t us[4];
	uint8_t sha[4][32];
	char pith[4][PITH_NUMBER_LEN + 1];
} refs_t;

static int ref_one(void *arg, int64_t us, const uint8_t sha[32], const char *pith)
{
	refs_t *r = arg;
	if (r->n < 4) {
		r->us[r->n] = us;
		memcpy(r->sha[r->n], sha, 32);
		snprintf(r->pith[r->n], sizeof(r->pith[0]), "%s", pith);
	}
	r->n++;
	return 0;
}

static void bundle_ident_of(const pith_buf_t *b, int64_t *us, uint8_t sha[32])
{
	json_doc_t *d = parse(b->data, b->len);
	const char *built = json_get_str(json_doc_root(d), "built_at");
	pith_time_parse(built, us);
	pith_bundle_hash(json_doc_root(d), sha);
	json_doc_free(d);
}

TEST(bundle_index_put, "keeps the bundle index at the newest bundle of each record, in the commit that stores it")
{
	pith_buf_t nb = PITH_BUF_INIT;
	newer_bundle(&nb);
	int64_t u0, u1, us;
	uint8_t h0[32], h1[32], sha[32];
	bundle_ident_of(&bundle_bytes, &u0, h0);
	bundle_ident_of(&nb, &u1, h1);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	refs_t r = {0};
	char pith[PITH_NUMBER_LEN + 1];
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 0);

	/* the first bundle of a record: added, nothing replaced */
	store_batch_t *b = store_batch_new(st);
	int idx = store_batch_add_bundle(b, parse(bundle_bytes.data, bundle_bytes.len), NULL);
	CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
	CHECK_INT_EQ(store_batch_bundle_replaced(b, idx, &us, sha), 0);
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(r.us[0] == u0 && !memcmp(r.sha[0], h0, 32));
	CHECK_STR_EQ(r.pith[0], AR7B);
	CHECK_INT_EQ(store_bundle_ref_get(st, h0, &us, pith, NULL), 0);
	CHECK(us == u0);
	CHECK_STR_EQ(pith, AR7B);

	/* a newer one replaces it, and says which one it replaced */
	idx = store_batch_add_bundle(b, parse(nb.data, nb.len), NULL);
	CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
	CHECK_INT_EQ(store_batch_bundle_outcome(b, idx), STORE_BUNDLE_NEWER);
	CHECK_INT_EQ(store_batch_bundle_replaced(b, idx, &us, sha), 1);
	CHECK(us == u0 && !memcmp(sha, h0, 32));
	r.n = 0;
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(r.us[0] == u1 && !memcmp(r.sha[0], h1, 32));
	CHECK_INT_EQ(store_bundle_ref_get(st, h0, &us, pith, NULL), PITH_ENOTFOUND);
	CHECK_INT_EQ(store_bundle_ref_get(st, h1, &us, pith, NULL), 0);

	/* an older one changes nothing */
	idx = store_batch_add_bundle(b, parse(bundle_bytes.data, bundle_bytes.len), NULL);
	CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
	CHECK_INT_EQ(store_batch_bundle_outcome(b, idx), STORE_BUNDLE_OLDER);
	CHECK_INT_EQ(store_batch_bundle_replaced(b, idx, &us, sha), 0);
	r.n = 0;
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(!memcmp(r.sha[0], h1, 32));
	CHECK_INT_EQ(check_problems(st), 0);
	store_batch_free(b);

	/* both in one batch: the newer one is indexed, the older never was */
	char *dir2 = tmpdir();
	store_t *st2 = open_store(dir2);
	b = store_batch_new(st2);
	store_batch_add_bundle(b, parse(nb.data, nb.len), NULL);
	store_batch_add_bundle(b, parse(bundle_bytes.data, bundle_bytes.len), NULL);
	CHECK_INT_EQ(store_batch_commit(b, NULL, NULL), 0);
	store_batch_free(b);
	r.n = 0;
	CHECK_INT_EQ(store_bundle_refs_each(st2, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(!memcmp(r.sha[0], h1, 32));
	CHECK_INT_EQ(check_problems(st2), 0);

	/* the audit sees a stale entry */
	uint8_t tk[STORE_BIDX_TIME_LEN] = {STORE_BIDX_TIME};
	store_time_put(tk + 1, u0);
	memcpy(tk + 9, h0, 32);
	char *e = NULL;
	uint8_t skey[STORE_SKEY_LEN];
	store_skey_make(AR7B, skey);
	rocksdb_put_cf(st2->db, st2->wo, st2->cf[STORE_CF_BUNDLE_INDEX], (char *)tk, sizeof(tk),
		       (char *)skey, sizeof(skey), &e);
	CHECK(e == NULL);
	CHECK(check_problems(st2) >= 1);
	store_close(st2);
	rmdir_rf(dir2);
	store_close(st);
	rmdir_rf(dir);
	pith_buf_release(&nb);
}

/* Turns the store in dir back into schema 3: each event's document in
 * events under its id, no docs column family, schema_version "3".
 * keep_moved: that many documents (the first by time) stay where schema 4
 * keeps them, the docs family with them, as an upgrade cut short leaves
 * it. Schema 2: also no bundle_index column family. */
static void make_schema(const char *dir, int schema, size_t keep_moved)
{
	store_t *st = open_store(dir);
	char *e = NULL;
	store_iter_t it;
	size_t i = 0;
	CHECK_INT_EQ(store_iter_open(st, STORE_CF_DOCS, NULL, 0, NULL, 0, &it, NULL), 0);
	for (; store_iter_valid(&it); store_iter_next(&it), i++) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		if (i < keep_moved)
			continue;
		rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_EVENTS], (const char *)k + 8, 32,
			       (const char *)v, vl, &e);
		CHECK(e == NULL);
		rocksdb_delete_cf(st->db, st->wo, st->cf[STORE_CF_DOCS], (const char *)k, kl, &e);
		CHECK(e == NULL);
	}
	store_iter_close(&it);
	if (!keep_moved) {
		rocksdb_drop_column_family(st->db, st->cf[STORE_CF_DOCS], &e);
		CHECK(e == NULL);
	}
	if (schema == 2) {
		rocksdb_drop_column_family(st->db, st->cf[STORE_CF_BUNDLE_INDEX], &e);
		CHECK(e == NULL);
	}
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
		       strlen(STORE_META_SCHEMA), schema == 2 ? "2" : "3", 1, &e);
	CHECK(e == NULL);
	store_close(st);
}

TEST(bundle_index_upgrade, "opens a schema-2 store: read-only without the bundle index, read-write by building it")
{
	pith_buf_t nb = PITH_BUF_INIT;
	newer_bundle(&nb);
	int64_t u1, us;
	uint8_t h1[32];
	bundle_ident_of(&nb, &u1, h1);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
	CHECK_INT_EQ(put_bundle(st, &nb, NULL, NULL), 0);
	store_close(st);
	make_schema(dir, 2, 0);

	/* read-only: opens, reads, and says the index is not there */
	store_opts_t ro = {.read_only = 1, .registry = trust};
	pith_err_t err = {0};
	char pith[PITH_NUMBER_LEN + 1];
	CHECK_INT_EQ(store_open(dir, &ro, &st, &err), 0);
	pith_buf_t sb = PITH_BUF_INIT;
	CHECK_INT_EQ(store_state_get(st, AR7B, &sb, NULL), 0);
	CHECK_INT_EQ(store_bundle_ref_get(st, h1, &us, pith, &err), PITH_EINVAL);
	CHECK(strstr(err.msg, "bundle index") != NULL);
	CHECK_INT_EQ(check_problems(st), 0); /* not damage: built at the next read-write open */
	store_close(st);

	/* read-write: built, schema 3, the audit passes */
	st = open_store(dir);
	CHECK(st != NULL);
	refs_t r = {0};
	CHECK_INT_EQ(store_bundle_refs_each(st, ref_one, &r, NULL), 0);
	CHECK_INT_EQ(r.n, 1);
	CHECK(r.us[0] == u1 && !memcmp(r.sha[0], h1, 32));
	CHECK_INT_EQ(store_bundle_ref_get(st, h1, &us, pith, NULL), 0);
	CHECK_STR_EQ(pith, AR7B);
	CHECK_INT_EQ(check_problems(st), 0);
	schema_is(st, STORE_SCHEMA_VERSION);
	store_close(st);
	/* and a store of another version is still refused */
	st = open_store(dir);
	char *e = NULL;
	rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
		       strlen(STORE_META_SCHEMA), "1", 1, &e);
	store_close(st);
	store_opts_t rw = {.create = 1, .registry = trust};
	CHECK(store_open(dir, &rw, &st, &err) != 0);
	CHECK(strstr(err.msg, "schema version") != NULL);
	rmdir_rf(dir);
	pith_buf_release(&nb);
	pith_buf_release(&sb);
}

typedef struct {
	pith_buf_t all; /* id, length and bytes of each event, in call order */
	size_t n;
} seen_t;

static int seen_one(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	seen_t *s = arg;
	uint32_t l = bytes ? (uint32_t)len : UINT32_MAX;
	pith_buf_append(&s->all, id, 32);
	pith_buf_append(&s->all, &l, sizeof(l));
	if (bytes)
		pith_buf_append(&s->all, bytes, len);
	s->n++;
	return 0;
}

/* Every event of the store as read by id (one by one and in a batch, with
 * an unknown id among them) and by record, into one buffer. */
static void read_all(store_t *st, pith_buf_t *out)
{
	seen_t s = {PITH_BUF_INIT, 0};
	CHECK_INT_EQ(store_events_each(st, NULL, seen_one, &s, NULL), 0);
	size_t n = s.n;
	uint8_t(*ids)[32] = calloc(n + 1, 32);
	const uint8_t *p = s.all.data;
	for (size_t i = 0; i < n; i++) {
		uint32_t l;
		memcpy(ids[i], p, 32);
		memcpy(&l, p + 32, 4);
		p += 36 + (l == UINT32_MAX ? 0 : l);
	}
	memset(ids[n], 0xee, 32); /* not stored */
	CHECK_INT_EQ((int)store_events_get_many(st, (const uint8_t(*)[32])ids, n + 1, seen_one, &s,
						NULL), 0);
	for (size_t i = 0; i < n; i++) {
		pith_buf_t one = PITH_BUF_INIT;
		CHECK_INT_EQ(store_event_get(st, ids[i], &one, NULL), 0);
		pith_buf_append(&s.all, one.data, one.len);
		pith_buf_release(&one);
	}
	pith_buf_t none = PITH_BUF_INIT;
	CHECK_INT_EQ(store_event_get(st, ids[n], &none, NULL), PITH_ENOTFOUND);
	uint8_t skey[STORE_SKEY_LEN];
	pith_event_t **loaded = NULL;
	size_t nl = 0;
	store_skey_make(AR7B, skey);
	CHECK_INT_EQ(store_subject_load(st, skey, &loaded, &nl, NULL), 0);
	CHECK_INT_EQ((int)nl, (int)n);
	for (size_t i = 0; i < nl; i++)
		pith_buf_append(&s.all, loaded[i]->content_hash, 32);
	store_events_free(loaded, nl);
	free(ids);
	out->len = 0;
	pith_buf_append(out, s.all.data, s.all.len);
	pith_buf_release(&s.all);
}

TEST(get_many_at, "reads events by their times with the same answers as by id, whatever the times say")
{
	evset_t s;
	gen_set(&s, 2);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	timeids_t all = {0};
	CHECK_INT_EQ(store_time_each(st, INT64_MIN, INT64_MAX, collect_time_id, &all, NULL), 0);
	CHECK(all.n > 4);
	/* every event four times over (more than one chunk of STORE_GET_MANY),
	 * then one that is not stored */
	size_t n = 4 * all.n + 1;
	uint8_t(*ids)[32] = calloc(n, 32);
	int64_t *good = calloc(n, sizeof(*good)), *mixed = calloc(n, sizeof(*mixed));
	for (size_t i = 0; i + 1 < n; i++) {
		size_t e = i % all.n;
		memcpy(ids[i], all.id[e], 32);
		good[i] = all.us[e];
		/* right, unknown, a microsecond late, or another event's */
		mixed[i] = i % 4 == 0 ? all.us[e]
			 : i % 4 == 1 ? STORE_TIME_NONE
			 : i % 4 == 2 ? all.us[e] + 1
				      : all.us[(e + 1) % all.n];
	}
	memset(ids[n - 1], 0xee, 32);
	good[n - 1] = all.us[0];
	mixed[n - 1] = STORE_TIME_NONE;
	seen_t byid = {PITH_BUF_INIT, 0}, bytime = {PITH_BUF_INIT, 0}, bymixed = {PITH_BUF_INIT, 0};
	CHECK_INT_EQ((int)store_events_get_many(st, (const uint8_t(*)[32])ids, n, seen_one, &byid,
						NULL), 0);
	CHECK_INT_EQ((int)store_events_get_many_at(st, (const uint8_t(*)[32])ids, good, n, seen_one,
						   &bytime, NULL), 0);
	CHECK_INT_EQ((int)store_events_get_many_at(st, (const uint8_t(*)[32])ids, mixed, n,
						   seen_one, &bymixed, NULL), 0);
	CHECK_INT_EQ(byid.n, n);
	CHECK_MEM_EQ(bytime.all.data, bytime.all.len, byid.all.data, byid.all.len);
	CHECK_MEM_EQ(bymixed.all.data, bymixed.all.len, byid.all.data, byid.all.len);
	pith_buf_release(&byid.all);
	pith_buf_release(&bytime.all);
	pith_buf_release(&bymixed.all);
	free(ids);
	free(good);
	free(mixed);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

TEST(docs_upgrade, "reads a schema-3 store read-only as it is, and moves its documents to time order read-write, also after a move cut short")
{
	for (size_t keep = 0; keep < 3; keep += 2) {
		char *dir = tmpdir();
		store_t *st = open_store(dir);
		CHECK_INT_EQ(put_bundle(st, &bundle_bytes, NULL, NULL), 0);
		pith_buf_t before = PITH_BUF_INIT, after = PITH_BUF_INIT;
		store_counts_t c0, c1;
		read_all(st, &before);
		store_counts_get(st, &c0);
		store_close(st);
		make_schema(dir, 3, keep);

		/* read-only: the same events by every path, no problem found */
		store_opts_t ro = {.read_only = 1, .registry = trust};
		pith_err_t err = {0};
		CHECK_INT_EQ(store_open(dir, &ro, &st, &err), 0);
		CHECK(keep ? st->cf[STORE_CF_DOCS] != NULL : st->cf[STORE_CF_DOCS] == NULL);
		read_all(st, &after);
		CHECK_MEM_EQ(after.data, after.len, before.data, before.len);
		CHECK_INT_EQ(check_problems(st), 0);
		schema_is(st, "3");
		store_close(st);

		/* read-write: moved, schema 4, the same events, the audit passes;
		 * the upgrade is announced before and after */
		pith_buf_t said = PITH_BUF_INIT;
		store_opts_t rw = {.create = 1, .registry = trust, .notice = note_line,
				   .notice_arg = &said};
		CHECK_INT_EQ(store_open(dir, &rw, &st, &err), 0);
		pith_buf_cstr(&said);
		CHECK(strstr((char *)said.data, "schema 3, upgrading to " STORE_SCHEMA_VERSION) != NULL);
		CHECK(strstr((char *)said.data, "upgraded to schema " STORE_SCHEMA_VERSION " in") != NULL);
		char moved[64];
		snprintf(moved, sizeof(moved), "%llu event documents moved",
			 (unsigned long long)(c0.events - keep));
		CHECK(strstr((char *)said.data, moved) != NULL);
		pith_buf_release(&said);
		schema_is(st, STORE_SCHEMA_VERSION);
		read_all(st, &after);
		CHECK_MEM_EQ(after.data, after.len, before.data, before.len);
		store_counts_get(st, &c1);
		CHECK(c1.events == c0.events && c1.records == c0.records);
		CHECK_INT_EQ(check_problems(st), 0);
		char *v;
		size_t vl;
		uint8_t id[32];
		memcpy(id, before.data, 32);
		CHECK_INT_EQ(store_get_raw(st, STORE_CF_EVENTS, id, 32, &v, &vl, NULL), 0);
		CHECK_INT_EQ((int)vl, 8);
		rocksdb_free(v);
		/* a document left in events of a schema-4 store is a problem */
		char *e = NULL;
		pith_buf_t doc = PITH_BUF_INIT;
		CHECK_INT_EQ(store_event_get(st, id, &doc, NULL), 0);
		rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_EVENTS], (char *)id, 32,
			       (char *)doc.data, doc.len, &e);
		CHECK(e == NULL);
		CHECK(check_problems(st) >= 2); /* the inline document, and its stray copy in docs */
		pith_buf_release(&doc);
		store_close(st);
		pith_buf_release(&before);
		pith_buf_release(&after);
		rmdir_rf(dir);
	}
}

/* The value of `key=` in section `[section]` (as "DBOptions") of the
 * newest OPTIONS file RocksDB wrote in dir; "" if not found. */
static void rocks_option(const char *dir, const char *section, const char *key, char out[64])
{
	char path[600], line[512];
	out[0] = 0;
	DIR *d = opendir(dir);
	unsigned long newest = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, "OPTIONS-", 8) && strtoul(e->d_name + 8, NULL, 10) > newest)
			newest = strtoul(e->d_name + 8, NULL, 10);
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/OPTIONS-%06lu", dir, newest);
	FILE *f = fopen(path, "r");
	int in = 0;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f)) {
		char *l = line + strspn(line, " ");
		l[strcspn(l, "\n")] = 0;
		if (l[0] == '[')
			in = !strncmp(l + 1, section, strlen(section)) && l[1 + strlen(section)] == ']';
		else if (in && !strncmp(l, key, kl) && l[kl] == '=')
			snprintf(out, 64, "%s", l + kl + 1);
	}
	if (f)
		fclose(f);
}

/* The same of section `[TableOptions/BlockBasedTable "cf"]` */
static void table_option(const char *dir, const char *cf, const char *key, char out[64])
{
	char section[128];
	snprintf(section, sizeof(section), "TableOptions/BlockBasedTable \"%s\"", cf);
	rocks_option(dir, section, key, out);
}

TEST(index_in_reader, "keeps the index and filter blocks of aliases, records, states, events and changes out of the block cache")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	store_close(st);
	char v[64];
	static const char *const held[] = {"aliases", "records", "states", "events", "changes"};
	for (size_t i = 0; i < 5; i++) {
		table_option(dir, held[i], "cache_index_and_filter_blocks", v);
		CHECK_STR_EQ(v, "false");
	}
	table_option(dir, "subj", "cache_index_and_filter_blocks", v);
	CHECK_STR_EQ(v, "true");
	rmdir_rf(dir);
}

TEST(read_ahead, "opens table files without the random-access advice, so that the kernel reads ahead of reads in order")
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	store_close(st);
	char v[64];
	rocks_option(dir, "DBOptions", "advise_random_on_open", v);
	CHECK_STR_EQ(v, "false");
	rmdir_rf(dir);
}

/* Bytes of the store's write-ahead log files, as status and metrics see them. */
static size_t wal_bytes(store_t *st)
{
	store_usage_t u;
	store_usage_get(st, &u);
	return (size_t)u.wal_bytes;
}

TEST(unlogged, "commits without the log: nothing in it, counted durable only once flushed, all there after close")
{
	evset_t s;
	gen_set_from(&s, 16, 300);
	char *dir = tmpdir();
	store_t *st = NULL;
	pith_err_t err = {0};
	store_opts_t o = {.create = 1, .registry = trust, .unlogged = 1};
	CHECK_INT_EQ(store_open(dir, &o, &st, &err), 0);
	for (size_t i = 0; i < s.n; i++)
		CHECK_INT_EQ(put_bytes(st, &s.b[i], NULL), 0);
	store_counts_t now, disk;
	store_counts_get(st, &now);
	CHECK_INT_EQ(now.events, s.n);
	/* nothing flushed yet: on disk the new store is empty, and no log holds it */
	CHECK_INT_EQ(store_counts_durable(st, &disk, &err), 0);
	CHECK_INT_EQ(disk.events, 0);
	CHECK_INT_EQ(disk.records, 0);
	CHECK_INT_EQ(wal_bytes(st), 0);
	/* a flush takes every family at once (atomic_flush): then durable */
	CHECK_INT_EQ(store_flush(st, &err), 0);
	CHECK_INT_EQ(store_counts_durable(st, &disk, &err), 0);
	CHECK_INT_EQ(disk.events, s.n);
	CHECK_INT_EQ(disk.records, now.records);
	CHECK_INT_EQ(wal_bytes(st), 0);
	store_close(st);
	/* the close flushed every family: all there, the audit clean */
	st = open_store(dir);
	store_counts_get(st, &now);
	CHECK_INT_EQ(now.events, s.n);
	CHECK_INT_EQ(store_counts_durable(st, &disk, &err), 0);
	CHECK_INT_EQ(disk.events, s.n);
	CHECK_INT_EQ(check_problems(st), 0);
	store_close(st);
	/* and again unlogged over a store that has data: what is on disk counts */
	CHECK_INT_EQ(store_open(dir, &o, &st, &err), 0);
	CHECK_INT_EQ(store_counts_durable(st, &disk, &err), 0);
	CHECK_INT_EQ(disk.events, s.n);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

/* Commits events [from, to) of s as one batch; durable: through the log
 * although the store is unlogged (store_batch_need_durable). */
static int commit_range(store_t *st, const evset_t *s, size_t from, size_t to, int durable)
{
	pith_err_t err = {0};
	store_batch_t *b = store_batch_new(st);
	int rc = b ? 0 : -1;
	for (size_t i = from; i < to && !rc; i++) {
		pith_event_t *ev = NULL;
		if ((rc = pith_event_parse(s->b[i].data, s->b[i].len, trust, &ev, NULL, &err)))
			break;
		if (store_batch_add_event(b, ev, NULL, &err) < 0)
			rc = -1;
	}
	if (durable)
		store_batch_need_durable(b);
	if (!rc)
		rc = store_batch_commit(b, NULL, &err);
	if (rc)
		fprintf(stderr, "commit_range: %s\n", err.msg);
	store_batch_free(b);
	return rc;
}

#define CRASH_SET_BASE 700

/* A node's catch-up without the log, killed: commits the quarters of s
 * (q = 4 * s->n / 4 ... ) as steps says, then _exits without closing, as
 * a kill -9 would (the memtables vanish, the log and table files stay).
 * Steps: 'L' a quarter with the log, 'U' store_unlogged_begin, 'u' a
 * quarter without, 'D' a quarter asked durable, 'E' store_unlogged_end.
 * Runs in a process of its own (test_store --crash-child DIR STEPS). Exit status: 0, or the step that went wrong (the change log's cap
 * included: while unlogged it stays at the last change known flushed). */
static int crash_child(const char *dir, const evset_t *s, const char *steps)
{
	store_t *st = NULL;
	pith_err_t err = {0};
	store_opts_t o = {.create = 1, .registry = trust, .atomic_flush = 1};
	if (store_open(dir, &o, &st, &err))
		return 100;
	size_t q = s->n / 4, at = 0;
	uint64_t flushed = 0;
	for (int i = 0; steps[i]; i++) {
		int rc = 0;
		switch (steps[i]) {
		case 'L': case 'u': case 'D':
			rc = commit_range(st, s, at, at + q, steps[i] == 'D');
			at += q;
			if (steps[i] != 'u')
				flushed = store_changes_last(st);
			break;
		case 'U': rc = store_unlogged_begin(st, &err); break;
		case 'E': rc = store_unlogged_end(st, &err); flushed = store_changes_last(st); break;
		}
		if (rc)
			return 1 + i;
		if (store_changes_last(st) != flushed || (steps[i] == 'u' && !store_is_unlogged(st)))
			return 50 + i;
	}
	_exit(0);
}

/* What a store that took the given quarters of s, and nothing else, holds. */
static void quarters_counts(const evset_t *s, int quarters, store_counts_t *out)
{
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	for (int k = 0; k < quarters; k++)
		CHECK_INT_EQ(commit_range(st, s, k * (s->n / 4), (k + 1) * (s->n / 4), 0), 0);
	store_counts_get(st, out);
	store_close(st);
	rmdir_rf(dir);
}

TEST(unlogged_catchup, "a store switched to commits without the log and killed keeps its flushes and its durable commits, and is consistent")
{
	static const struct {
		const char *steps;
		int kept; /* quarters found after the kill */
	} cases[] = {
		{"LUu", 1},   /* the unlogged commit is lost, the logged one before it kept */
		{"LUuD", 3},  /* a durable commit flushes the one before it first */
		{"LUuDu", 3}, /* and what follows it unlogged is lost again */
		{"LUuEL", 3}, /* the end flushes, then the log is back */
	};
	evset_t s;
	gen_set_from(&s, 16, CRASH_SET_BASE); /* the quarters share records: states depend on earlier ones */
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char *dir = tmpdir();
		pid_t pid = fork();
		if (!pid) {
			execl("/proc/self/exe", "test_store", "--crash-child", dir, cases[c].steps,
			      (char *)NULL);
			_exit(127);
		}
		int status = 0;
		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status));
		CHECK_INT_EQ(WEXITSTATUS(status), 0);
		store_t *st = open_store(dir);
		store_counts_t got, want;
		store_counts_get(st, &got);
		quarters_counts(&s, cases[c].kept, &want);
		CHECK_INT_EQ(got.events, want.events);
		CHECK_INT_EQ(got.records, want.records);
		CHECK_INT_EQ(check_problems(st), 0);
		store_close(st);
		rmdir_rf(dir);
	}
	/* a store opened without atomic_flush cannot skip its log */
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	pith_err_t err = {0};
	CHECK_INT_EQ(store_unlogged_begin(st, &err), PITH_EINVAL);
	store_close(st);
	rmdir_rf(dir);
	set_free(&s);
}

TEST(wal_bounded, "keeps its write-ahead logs near the bound, flushing the column families that hold the oldest")
{
	evset_t s[3];
	for (unsigned k = 0; k < 3; k++)
		gen_set_from(&s[k], 16, 100 + 16 * k);
	size_t limit = 32u << 10, most = 0, end = 0, unbounded = 0, n = 3 * s[0].n;
	pith_err_t err = {0};
	for (int bounded = 0; bounded < 2; bounded++) {
		char *dir = tmpdir();
		store_t *st = NULL;
		store_opts_t o = {.create = 1, .registry = trust, .wal_bytes = bounded ? limit : 0};
		CHECK_INT_EQ(store_open(dir, &o, &st, &err), 0);
		/* one commit per event: each rewrites its record's growing state */
		for (unsigned k = 0; k < 3; k++)
			for (size_t i = 0; i < s[k].n; i++) {
				CHECK_INT_EQ(put_bytes(st, &s[k].b[i], NULL), 0);
				size_t w = wal_bytes(st);
				most = bounded && w > most ? w : most;
			}
		if (bounded)
			end = wal_bytes(st);
		else
			unbounded = wal_bytes(st); /* nothing flushed: it holds all */
		store_close(st);
		/* what was flushed and what was replayed is all there */
		st = open_store(dir);
		store_counts_t c;
		store_counts_get(st, &c);
		CHECK_INT_EQ(c.events, n);
		CHECK_INT_EQ(check_problems(st), 0);
		store_close(st);
		rmdir_rf(dir);
	}
	/* A flush runs in the background and its log goes after it, and the
	 * logs are checked only at the next commit, so with a bound this small
	 * they overshoot it by several commits (rewritten states of several
	 * KiB each): 130-340 KiB here against 32 KiB, under load too, while
	 * the unbounded store's logs hold all 2.9 MB. What is checked is that
	 * they stay a small fraction of what was written. At 256 MiB (the
	 * default until session 14), the 500,000-event sync of
	 * docs/performance.md at 262f3c4 ended with one log. */
	if (4 * end > unbounded || 2 * most > unbounded)
		fprintf(stderr, "  logs: at most %zu bytes, %zu at the end; bound %zu, %zu unbounded\n",
			most, end, limit, unbounded);
	CHECK(unbounded > 64 * limit);
	CHECK(4 * end <= unbounded);
	CHECK(2 * most <= unbounded);
	for (unsigned k = 0; k < 3; k++)
		set_free(&s[k]);
}

TEST(usage, "reports its table files, logs and memtables, before and after a flush")
{
	evset_t s;
	gen_set(&s, 2);
	char *dir = tmpdir();
	store_t *st = filled_store(dir, &s);
	store_usage_t u;
	store_usage_get(st, &u);
	CHECK(u.wal_bytes > 2000 && u.memtable_bytes > 0);
	CHECK(u.sst_bytes < 4096); /* the creation's schema version, flushed at its close */
	pith_err_t err = {0};
	CHECK_INT_EQ(store_flush(st, &err), 0);
	store_usage_t f;
	store_usage_get(st, &f);
	CHECK(f.sst_bytes > u.sst_bytes + 1000);
	CHECK(f.wal_bytes < u.wal_bytes);
	store_close(st);
	set_free(&s);
	rmdir_rf(dir);
}

typedef struct counts_reader {
	store_t *st;
	int stop, bad;
	unsigned long reads;
} counts_reader_t;

static void *counts_read_loop(void *arg)
{
	counts_reader_t *r = arg;
	store_counts_t last = {0};
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		store_counts_t c;
		store_counts_get(r->st, &c);
		/* one commit's counters, never a mix: both only grow, and every
		 * record has at least one event */
		if (c.events < last.events || c.records < last.records || c.records > c.events)
			r->bad = 1;
		last = c;
		r->reads++;
	}
	return NULL;
}

TEST(counts_lock_free, "reads the counters without the write mutex, one commit's whole, while commits run")
{
	evset_t s;
	gen_set(&s, 12);
	char *dir = tmpdir();
	store_t *st = open_store(dir);
	CHECK(st != NULL);
	/* a commit or a flush holds wmu for long: status and metrics on the
	 * event loop must not wait for it (this would deadlock if they did) */
	pthread_mutex_lock(&st->wmu);
	store_counts_t c;
	store_counts_get(st, &c);
	pthread_mutex_unlock(&st->wmu);
	CHECK(c.events == 0 && c.records == 0);
	counts_reader_t r = {.st = st};
	pthread_t t;
	CHECK_INT_EQ(pthread_create(&t, NULL, counts_read_loop, &r), 0);
	for (size_t i = 0; i < s.n; i++)
		CHECK_INT_EQ(commit_range(st, &s, i, i + 1, 0), 0);
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	CHECK(!r.bad && r.reads > 0);
	store_counts_get(st, &c);
	CHECK_INT_EQ((int)c.events, (int)s.n);
	store_close(st);
	set_free(&s);
	rmdir_rf(dir);
}

int main(int argc, char **argv)
{
	setup();
	if (argc == 4 && !strcmp(argv[1], "--crash-child")) {
		/* a fresh process (unlogged_catchup): RocksDB's threads do not
		 * survive a fork */
		evset_t s;
		gen_set_from(&s, 16, CRASH_SET_BASE);
		return crash_child(argv[2], &s, argv[3]);
	}
	RUN(read_ahead);
	RUN(bundle_index_put);
	RUN(bundle_index_upgrade);
	RUN(get_many_at);
	RUN(docs_upgrade);
	RUN(index_in_reader);
	RUN(unlogged);
	RUN(unlogged_catchup);
	RUN(wal_bounded);
	RUN(usage);
	RUN(counts_lock_free);
	pith_trust_free(trust);
	pith_buf_release(&bundle_bytes);
	return test_done();
}
