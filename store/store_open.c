/* Opening the database (creating it, upgrading its schema, the column
 * families tuned one by one) and closing it (store.h). */
#include "store_int.h"
#include "store_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- opening -------------------------------------------------------------- */

/* Whether a column family keeps its files' index and filter blocks in the
 * table readers (loaded once per file, uncompressed, held while the file is
 * open) instead of the block cache. The HTTP views seek in aliases and
 * records and read states for nearly every request; in the cache, a
 * file's index and filter are single blocks that grow with the file (about
 * 1 MiB of index and 2.4 MiB of filter for 330,000 records' aliases),
 * larger than one 1 MiB shard of the default 64 MiB cache, so random reads
 * evicted them and every request read and decompressed them again
 * (docs/performance.md, issue 6). The same for events and changes, whose
 * filters every "do I have this id?" and every commit probe: even in 8 MiB
 * shards (cache_new) the filter of a large events file (3 MiB for 2.5
 * million ids) was evicted by the blocks the writer reads, and a 10M-event
 * catch-up's loop read it from the file again for each probe, 95 us per
 * event instead of 13 (docs/performance.md, issue 17, session 12). Held in
 * the readers they cost memory outside store_cache_mb: about 5 MiB for
 * 330,000 records (2 bytes per alias), and 2-3 bytes per event for the
 * events and changes families (about 25 MiB at 10 million events). */
static int cf_index_in_reader(int cf)
{
	return cf == STORE_CF_ALIASES || cf == STORE_CF_RECORDS || cf == STORE_CF_STATES ||
	       cf == STORE_CF_EVENTS || cf == STORE_CF_CHANGES;
}

/* The block cache, in shards of at least 8 MiB. RocksDB's default cuts
 * 64 MiB into 64 shards of 1 MiB, and the full filter block of a large
 * table file (about 1.25 bytes a key) is near that or over: it could not
 * stay, and every point read of a family whose filters live in the cache
 * (events, changes) read it from the file again and checksummed it, which
 * was most of `pithctl check`'s time at 1M events (docs/performance.md,
 * issue 17). */
static rocksdb_cache_t *cache_new(size_t bytes)
{
	rocksdb_lru_cache_options_t *o = rocksdb_lru_cache_options_create();
	int bits = 0;
	while (bits < 6 && (bytes >> (bits + 1)) >= (8u << 20))
		bits++;
	rocksdb_lru_cache_options_set_capacity(o, bytes);
	rocksdb_lru_cache_options_set_num_shard_bits(o, bits);
	rocksdb_cache_t *c = rocksdb_cache_create_lru_opts(o);
	rocksdb_lru_cache_options_destroy(o);
	return c;
}

/* Column families holding JSON documents get larger blocks (better
 * compression); the point-looked-up ones get a whole-key bloom filter so
 * that the duplicate check of a new event rarely touches a data block. */
static void cf_tune(store_t *st, int cf)
{
	rocksdb_options_t *o = rocksdb_options_create_copy(st->opts);
	rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
	int docs = !store_cf_is_index(cf);
	rocksdb_block_based_options_set_block_cache(t, st->cache);
	/* event documents 8 KiB: read one by one by id over HTTP, each read
	 * a cache miss that loads a whole block; states and bundles 32 KiB
	 * (docs/store.md) */
	rocksdb_block_based_options_set_block_size(t, cf == STORE_CF_DOCS ? 8 * 1024
						      : docs		    ? 32 * 1024
									    : 4 * 1024);
	if (cf == STORE_CF_EVENTS || cf == STORE_CF_RECORDS || cf == STORE_CF_STATES ||
	    cf == STORE_CF_BUNDLES || cf == STORE_CF_ALIASES || cf == STORE_CF_CHANGES)
		rocksdb_block_based_options_set_filter_policy(t, rocksdb_filterpolicy_create_bloom_full(10));
	rocksdb_block_based_options_set_cache_index_and_filter_blocks(t, !cf_index_in_reader(cf));
	rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(t, 1);
	rocksdb_options_set_block_based_table_factory(o, t);
	/* LZ4 for flushes and young levels: cheap on the two cores that also
	 * verify signatures. Documents stay LZ4 in the last level too: a peer
	 * catching up reads them in random order, and ZSTD's decompression of
	 * a block per event was a third of the serving CPU (docs/store.md).
	 * Index column families settle in the last level with ZSTD, which
	 * is where nearly all of it ends up. A bulk load's level 0 goes
	 * uncompressed (store_bulk.c, levels_compression: keep the two alike). */
	int bottom = docs ? rocksdb_lz4_compression : rocksdb_zstd_compression;
	int levels[7] = {rocksdb_lz4_compression, rocksdb_lz4_compression, rocksdb_lz4_compression,
			 rocksdb_lz4_compression, rocksdb_lz4_compression, rocksdb_lz4_compression,
			 bottom};
	rocksdb_options_set_num_levels(o, 7);
	rocksdb_options_set_compression_per_level(o, levels, 7);
	rocksdb_options_set_bottommost_compression(o, bottom);
	rocksdb_options_set_level_compaction_dynamic_level_bytes(o, 1);
	rocksdb_options_set_max_bytes_for_level_base(o, STORE_LEVEL_BASE_BYTES);
	/* L0 triggers: RocksDB's defaults, set here so that store_bulk_end
	 * puts back exactly these (docs/store.md, "Bulk loading") */
	rocksdb_options_set_level0_file_num_compaction_trigger(o, STORE_L0_TRIGGER);
	rocksdb_options_set_level0_slowdown_writes_trigger(o, STORE_L0_SLOWDOWN);
	rocksdb_options_set_level0_stop_writes_trigger(o, STORE_L0_STOP);
	size_t mb = docs ? 64 : 16;
	if (st->atomic_flush)
		/* every family flushes when one memtable fills, so every family
		 * gets twice the room: the small families' flushes, each a
		 * small level-0 file to compact, stay few (a 4M catch-up: 47
		 * flushes instead of 69, its compactions 18% cheaper;
		 * docs/store.md, Durability) */
		mb *= 2;
	/* for tests that need flushes soon (crash_import --no-wal) */
	const char *v = getenv("PITH_STORE_WRITE_BUFFER_MB");
	if (v && atoi(v) > 0)
		mb = docs ? (size_t)atoi(v) : ((size_t)atoi(v) + 3) / 4;
	rocksdb_options_set_write_buffer_size(o, mb << 20);
	/* an import's states and alias claims: appended to a vector, sorted
	 * once at the flush, instead of a skip-list descent through cold
	 * memory per insert (store_opts_t.unsorted_write_only) */
	if (st->unsorted_write_only && store_cf_write_only(cf))
		rocksdb_options_set_memtable_vector_rep(o);
	/* A whole-key bloom filter in the memtables too: a node that fetches
	 * many events asks "do I have this id?" for each before it asks a
	 * peer, nearly always for one it lacks, and a miss in a full skip
	 * list costs several microseconds (docs/performance.md, issue 5);
	 * 2% of the memtable makes it a filter probe. Likewise for records:
	 * every commit asks for the summary of each record it touches, and in
	 * an import or a catch-up nearly every record is new. */
	if (cf == STORE_CF_EVENTS || cf == STORE_CF_RECORDS) {
		rocksdb_options_set_memtable_prefix_bloom_size_ratio(o, 0.02);
		rocksdb_options_set_memtable_whole_key_filtering(o, 1);
	}
	st->cf_opts[cf] = o;
	st->table[cf] = t;
}

/* A counter of meta, read with ro (the store's, or one that reads only
 * the table files: store_counts_durable) */
static int meta_get_u64(store_t *st, const rocksdb_readoptions_t *ro, const char *key, uint64_t *v,
			pith_err_t *err)
{
	char *val;
	size_t len;
	int rc = store_get_raw_ro(st, ro, STORE_CF_META, (const uint8_t *)key, strlen(key), &val, &len, err);
	if (rc)
		return rc;
	*v = 0;
	if (val && len == 8)
		*v = store_be64_get((const uint8_t *)val);
	else if (val)
		rc = pith_err_set(err, PITH_EIO, "store: meta %s: %zu bytes, expected 8", key, len);
	rocksdb_free(val);
	return rc;
}

int store_meta_counts_get(store_t *st, const rocksdb_readoptions_t *ro, store_counts_t *out,
			  pith_err_t *err)
{
	int rc;
	(void)((rc = meta_get_u64(st, ro, STORE_META_EVENTS, &out->events, err)) ||
	       (rc = meta_get_u64(st, ro, STORE_META_RECORDS, &out->records, err)) ||
	       (rc = meta_get_u64(st, ro, STORE_META_BUNDLES, &out->bundles, err)));
	return rc;
}

void store_say(store_t *st, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	if (!st->notice)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	st->notice(st->notice_arg, line);
}


static int64_t store_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The meta counters and the change log's sequence, as the store holds them. */
static int counters_load(store_t *st, pith_err_t *err)
{
	int rc;
	if ((rc = store_meta_counts_get(st, st->ro, &st->counts, err)))
		return rc;
	return store_changes_recover(st, err);
}

/* Upgrades a schema-v store (2 to 5) to the current schema (6), one step at a
 * time, each writing the next version last (a step cut short is done
 * again at the next open), announced before and after: it can take
 * minutes for millions of events. */
static int upgrade(store_t *st, int v, pith_err_t *err)
{
	static const char *const what[] = {
		[2] = "indexing bundles, moving event documents into time order, logging every "
		      "record, checking every timestamp",
		[3] = "moving event documents into time order, logging every record, checking "
		      "every timestamp",
		[4] = "logging every record in the change log, checking every timestamp",
		[5] = "checking every stored timestamp against the rule: removing the events "
		      "and bundles outside it, recomputing their records",
	};
	int rc = 0;
	uint64_t moved = 0, logged = 0;
	size_t built = 0;
	store_time_rule_stats_t tr = {0};
	store_say(st, "store %s: schema %d, upgrading to %s (%s; once, may take minutes)", st->dir, v,
	       STORE_SCHEMA_VERSION, what[v]);
	int64_t t0 = store_now_us();
	if (v == 2 && !(rc = store_bundle_index_build(st, &built, err)))
		v = 3;
	if (v == 3 && !rc && !(rc = store_docs_upgrade(st, &moved, err)))
		v = 4;
	if (v == 4 && !rc && !(rc = store_changes_build(st, &logged, err)))
		v = 5;
	/* the last step rewrites records: it needs the counters and the log */
	if (v == 5 && !rc && !(rc = counters_load(st, err)) &&
	    !(rc = store_time_rule_upgrade(st, &tr, err)))
		v = 6;
	if (rc)
		return rc;
	store_say(st, "store %s: upgraded to schema %s in %.1f s (%zu bundles indexed, %llu event "
	       "documents moved, %llu records logged; outside the timestamp rule: %llu events and "
	       "%llu bundles removed, %llu records recomputed, %llu of them left empty and removed)",
	       st->dir, STORE_SCHEMA_VERSION, (double)(store_now_us() - t0) / 1e6, built,
	       (unsigned long long)moved, (unsigned long long)logged, (unsigned long long)tr.events,
	       (unsigned long long)tr.bundles, (unsigned long long)tr.records,
	       (unsigned long long)tr.records_gone);
	return 0;
}

static int meta_init(store_t *st, pith_err_t *err)
{
	char *val;
	size_t len;
	int rc = store_get_raw(st, STORE_CF_META, (const uint8_t *)STORE_META_SCHEMA,
			       strlen(STORE_META_SCHEMA), &val, &len, err);
	if (rc)
		return rc;
	st->schema = STORE_SCHEMA_VERSION[0] - '0'; /* a new or empty store */
	if (val) {
		/* older schemas are upgraded by a read-write open, one step at
		 * a time, each writing the next version last; a read-only open
		 * reads them as they are */
		int v = len == 1 && val[0] >= '2' && val[0] <= STORE_SCHEMA_VERSION[0] ? val[0] - '0' : 0;
		if (!v)
			rc = pith_err_set(err, PITH_EINVAL, "store: schema version '%.*s', this build reads '%s'",
					  (int)(len < 16 ? len : 16), val, STORE_SCHEMA_VERSION);
		rocksdb_free(val);
		if (rc)
			return rc;
		if (v < 6 && !st->read_only && (rc = upgrade(st, v, err)))
			return rc;
		st->schema = st->read_only ? v : STORE_SCHEMA_VERSION[0] - '0';
	} else if (!st->read_only) {
		char *e = NULL;
		rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
			       strlen(STORE_META_SCHEMA), STORE_SCHEMA_VERSION,
			       strlen(STORE_SCHEMA_VERSION), &e);
		if (e)
			return store_op_error(st, STORE_OP_WRITE, err, e,
					      "writing the schema version");
	}
	return counters_load(st, err);
}

/* mkdir -p of the directories above dir (RocksDB makes only dir itself). */
static int make_parents(const char *dir, pith_err_t *err)
{
	char p[4096];
	size_t n = strlen(dir);
	if (n >= sizeof(p))
		return pith_err_set(err, PITH_EINVAL, "store: path too long: %.60s...", dir);
	memcpy(p, dir, n + 1);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = 0;
	for (char *s = p + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		if (mkdir(p, 0755) && errno != EEXIST) {
			int e = errno;
			return pith_err_set(err, PITH_EIO, "store: cannot create %s: %s", p, strerror(e));
		}
		*s = '/';
	}
	return 0;
}

/* How many of the column families, in enum order, the database in dir
 * has: a schema-2 store lacks the last three, a schema-3 store the last
 * two, a schema-4 store the last one (all of them also when that cannot
 * be told: the open then says what is wrong). */
/* Which side families (side.c) dir's database holds: at[i] 1 or 0 (all 0
 * unless want). */
static void side_list(const char *dir, int want, int at[STORE_NSIDE])
{
	memset(at, 0, sizeof(int) * STORE_NSIDE);
	if (!want)
		return;
	rocksdb_options_t *o = rocksdb_options_create();
	size_t n = 0;
	char *e = NULL;
	char **names = rocksdb_list_column_families(o, dir, &n, &e);
	for (size_t k = 0; names && k < n; k++)
		for (int i = 0; i < STORE_NSIDE; i++)
			at[i] |= !strcmp(names[k], store_side_name(i));
	if (names)
		rocksdb_list_column_families_destroy(names, n);
	rocksdb_free(e);
	rocksdb_options_destroy(o);
}

static int store_cf_count(const char *dir)
{
	rocksdb_options_t *o = rocksdb_options_create();
	size_t n = 0;
	char *e = NULL;
	char **names = rocksdb_list_column_families(o, dir, &n, &e);
	int has_bidx = e || !names, has_docs = has_bidx, has_changes = has_bidx;
	for (size_t i = 0; names && i < n; i++) {
		has_bidx |= !strcmp(names[i], store_cf_names[STORE_CF_BUNDLE_INDEX]);
		has_docs |= !strcmp(names[i], store_cf_names[STORE_CF_DOCS]);
		has_changes |= !strcmp(names[i], store_cf_names[STORE_CF_CHANGES]);
	}
	if (names)
		rocksdb_list_column_families_destroy(names, n);
	rocksdb_free(e);
	rocksdb_options_destroy(o);
	return !has_bidx ? STORE_CF_BUNDLE_INDEX : !has_docs ? STORE_CF_DOCS
	       : !has_changes ? STORE_CF_CHANGES : STORE_NCF;
}

/* RocksDB's own LOG: fatal errors only, unless PITH_ROCKSDB_LOG says
 * otherwise (debug, info, warn, error). Debian's librocksdb is built with
 * its assertions on, and once a write to LOG has failed (a full disk) the
 * next line logged aborts the process (WritableFileWriter's
 * AssertFalseAndGetStatusForPrevError): with the default level a full
 * disk killed the node at its second failed commit (docs/store.md,
 * "Failures"). */
static int info_log_level(void)
{
	static const char *names[] = {"debug", "info", "warn", "error", "fatal", "header"};
	const char *v = getenv("PITH_ROCKSDB_LOG");
	for (int i = 0; v && i < 6; i++)
		if (!strcmp(v, names[i]))
			return i;
	return 4;
}

static int has_current(const char *dir)
{
	char p[4200];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/CURRENT", dir);
	return stat(p, &sb) == 0;
}

/* rm -r of a directory RocksDB made (files only, no subdirectories but
 * an empty archive/ or the like, which rmdir takes). */
static void remove_db_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *de;
	char p[4400];
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (unlink(p))
			rmdir(p);
	}
	closedir(d);
	rmdir(dir);
}

/* The directory holding path (no trailing slash) into parent; returns
 * path's last component. */
static const char *parent_of(const char *path, char *parent, size_t cap)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		snprintf(parent, cap, ".");
		return path;
	}
	snprintf(parent, cap, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	return slash + 1;
}

/* Stale DIR.creating-PID siblings, left by a creation that was killed
 * (or by this process's pid in an earlier life): removed when their
 * process is gone. */
static void remove_stale_creations(const char *base)
{
	char parent[4096], prefix[4200];
	snprintf(prefix, sizeof(prefix), "%s.creating-", parent_of(base, parent, sizeof(parent)));
	DIR *d = opendir(parent);
	if (!d)
		return;
	size_t pl = strlen(prefix);
	struct dirent *de;
	char p[8300];
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, prefix, pl))
			continue;
		char *end;
		long pid = strtol(de->d_name + pl, &end, 10);
		if (*end || pid <= 0)
			continue;
		if (pid != (long)getpid() && !(kill((pid_t)pid, 0) && errno == ESRCH))
			continue;
		snprintf(p, sizeof(p), "%s/%s", parent, de->d_name);
		remove_db_dir(p);
	}
	closedir(d);
}

static int store_open_dir(const char *dir, const store_opts_t *opts, store_t **out,
			  pith_err_t *err);

/* A new store is made whole beside its place, DIR.creating-PID, and
 * renamed into it (onto nothing, or onto an empty directory): RocksDB
 * creates the column families one manifest write at a time, and a
 * process killed between two of them left a database that a read-only
 * open refused ("Column family not found"). So DIR holds either no store
 * or a complete one. Where the rename cannot be done (DIR holds other
 * files, is a mount point, or its parent is not writable) the store is
 * created in place as before: a read-write open finishes an interrupted
 * creation (docs/store.md, "Durability"). */
static void store_create(const char *dir, const store_opts_t *opts)
{
	char base[4096], tmp[4200];
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n >= sizeof(base))
		return;
	memcpy(base, dir, n);
	base[n] = 0;
	snprintf(tmp, sizeof(tmp), "%s.creating-%ld", base, (long)getpid());
	remove_stale_creations(base);
	store_t *st = NULL;
	pith_err_t err = {0};
	store_opts_t o = *opts;
	o.on_error = NULL;
	o.notice = NULL;
	o.unlogged = 0;
	if (store_open_dir(tmp, &o, &st, &err)) {
		remove_db_dir(tmp);
		return;
	}
	store_close_(st);
	/* renamed, then the parent directory fsynced (store_file.h) */
	if (store_file_rename(tmp, base, 0))
		remove_db_dir(tmp);
}

/* Table files RocksDB keeps open: all of them (-1) unless the process has
 * a descriptor limit, then a quarter of it, so that a store larger than
 * the limit allows closes and reopens its least used files instead of
 * failing reads and writes with "Too many open files"; the rest is the
 * sockets' (pithd raises its soft limit to 65536 first: node/base/prio.h). */
static int max_open_files(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / 4 > INT32_MAX)
		return -1;
	return rl.rlim_cur / 4 < 64 ? 64 : (int)(rl.rlim_cur / 4);
}

/* Turns store_opts_t.fresh_records on if the store holds no record: no
 * summary in `records` (every stored event's record has one) and counters
 * at zero. */
static int fresh_begin(store_t *st, pith_err_t *err)
{
	if (st->counts.records || st->counts.events || st->counts.bundles)
		return 0;
	store_iter_t it;
	int rc = store_iter_open(st, STORE_CF_RECORDS, NULL, 0, NULL, 0, &it, err);
	if (rc)
		return rc;
	int empty = !store_iter_valid(&it);
	rc = store_iter_status(&it, err);
	store_iter_close(&it);
	st->fresh_on = empty && !rc;
	return rc;
}

int store_open(const char *dir, const store_opts_t *opts, store_t **out, pith_err_t *err)
{
	static const store_opts_t defaults = {.create = 1};
	if (!opts)
		opts = &defaults;
	*out = NULL;
	if (opts->create && !opts->read_only && make_parents(dir, err))
		return PITH_EIO;
	if (opts->create && !opts->read_only && !has_current(dir))
		store_create(dir, opts);
	return store_open_dir(dir, opts, out, err);
}

static int store_open_dir(const char *dir, const store_opts_t *opts, store_t **out,
			  pith_err_t *err)
{
	store_t *st = calloc(1, sizeof(*st));
	if (!st)
		return pith_err_set(err, PITH_ENOMEM, "store: out of memory");
	pthread_mutex_init(&st->wmu, NULL);
	pthread_mutex_init(&st->emu, NULL);
	st->read_only = opts->read_only;
	st->unlogged = opts->unlogged && !opts->read_only;
	st->errors.writable = !opts->read_only;
	st->on_error = opts->on_error;
	st->on_error_arg = opts->on_error_arg;
	if (!(st->dir = strdup(dir))) {
		store_close_(st);
		return pith_err_set(err, PITH_ENOMEM, "store: out of memory");
	}
	st->registry = opts->registry;
	st->notice = opts->notice;
	st->notice_arg = opts->notice_arg;
	st->opts = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(st->opts, opts->create && !opts->read_only);
	rocksdb_options_set_create_missing_column_families(st->opts, !opts->read_only);
	rocksdb_options_increase_parallelism(st->opts, 2);
	/* 3 jobs: one flush and up to two compactions. RocksDB runs the second
	 * compaction only when it judges them behind (level 0 well past its
	 * trigger, writes slowed); with 2 jobs it never could, and the
	 * compactions an import's bulk load put off ran one at a time at its
	 * end, one core idle for a fifth of the import (docs/store.md, Bulk
	 * loading) */
	rocksdb_options_set_max_background_jobs(st->opts, 3);
	rocksdb_options_set_max_open_files(st->opts, max_open_files());
	rocksdb_options_set_info_log_level(st->opts, info_log_level());
	rocksdb_options_set_keep_log_file_num(st->opts, 4);
	rocksdb_options_set_max_log_file_size(st->opts, 8u << 20);
	/* A write-ahead log file can go only when every column family with
	 * data in it has flushed, and the small families (meta's counters are
	 * in every commit) take long to fill a memtable: without a bound, a
	 * node that synced 500,000 events kept 1.1 GB of logs (2.2 times the
	 * events' own bytes), all replayed at the next open. Over this total
	 * RocksDB flushes the families that hold the oldest log
	 * (docs/store.md, Durability). */
	rocksdb_options_set_max_total_wal_size(st->opts, opts->wal_bytes ? opts->wal_bytes : STORE_MAX_WAL_BYTES);
	/* the manifest grows by an edit per flush and compaction until the
	 * next open (RocksDB's default bound is 1 GiB); store_flush_locked's
	 * checkpoint copies it whole, under the write lock */
	rocksdb_options_set_max_manifest_file_size(st->opts, 64u << 20);
	/* without a log, only flushes that take every family at once leave a
	 * consistent store after a crash */
	st->atomic_flush = st->unlogged || (opts->atomic_flush && !opts->read_only);
	if (st->atomic_flush)
		rocksdb_options_set_atomic_flush(st->opts, 1);
	/* Without RocksDB's default POSIX_FADV_RANDOM on every table file
	 * opened: the kernel then reads ahead where reads run in order, as
	 * a peer catching up from this node reads `docs` (in time order,
	 * block after block), and `pithctl records` and `check` read whole
	 * families. With the advice each block missing from the page cache
	 * was a request of its own to the disk: a node serving a 4M
	 * catch-up from disk spent 1.6-2.2 us of CPU an event more
	 * (docs/store.md, "The page cache at start") */
	rocksdb_options_set_advise_random_on_open(st->opts, 0);
	st->cache = cache_new(opts->cache_bytes ? opts->cache_bytes : 64u << 20);
	/* RocksDB's vector memtables take one writer at a time (the store
	 * has one) */
	st->unsorted_write_only = opts->unsorted_write_only && !opts->read_only;
	st->bulk_side = opts->bulk_side && !opts->read_only;
	if (st->unsorted_write_only || st->bulk_side)
		rocksdb_options_set_allow_concurrent_memtable_write(st->opts, 0);
	for (int cf = 0; cf < STORE_NCF; cf++)
		cf_tune(st, cf);
	st->wo = st->wo_log = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(st->wo_log, 1);
	st->wo_nolog = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(st->wo_nolog, 0);
	rocksdb_writeoptions_disable_WAL(st->wo_nolog, 1);
	st->changes_durable = UINT64_MAX;
	st->ro = rocksdb_readoptions_create();

	char *e = NULL;
	/* a read-only open of an older store goes without the families it lacks */
	int ncf = opts->read_only ? store_cf_count(dir) : STORE_NCF;
	/* and any store with the side families of an interrupted catch-up
	 * opens them too (side.c) */
	const char *names[STORE_NCF + STORE_NSIDE];
	rocksdb_options_t *cfo[STORE_NCF + STORE_NSIDE];
	rocksdb_column_family_handle_t *h[STORE_NCF + STORE_NSIDE] = {0};
	int side_at[STORE_NSIDE], nopen = ncf;
	for (int cf = 0; cf < ncf; cf++)
		names[cf] = store_cf_names[cf], cfo[cf] = st->cf_opts[cf];
	side_list(dir, ncf == STORE_NCF, side_at);
	for (int i = 0; i < STORE_NSIDE; i++) {
		if (!side_at[i])
			continue;
		side_at[i] = nopen;
		names[nopen] = store_side_name(i);
		cfo[nopen++] = store_side_opts(st, i, 0);
	}
	if (opts->read_only)
		st->db = rocksdb_open_for_read_only_column_families(
			st->opts, dir, nopen, names, (const rocksdb_options_t *const *)cfo, h, 0, &e);
	else
		st->db = rocksdb_open_column_families(st->opts, dir, nopen, names,
						      (const rocksdb_options_t *const *)cfo, h, &e);
	for (int i = ncf; i < nopen; i++)
		rocksdb_options_destroy(cfo[i]);
	if (!e && st->db) {
		memcpy(st->cf, h, sizeof(st->cf[0]) * (size_t)ncf);
		for (int i = 0; i < STORE_NSIDE; i++) {
			if (!side_at[i])
				continue;
			int cf = store_side_cf(i);
			st->side[i] = h[side_at[i]];
			st->side_main[i] = st->cf[cf];
			st->cf[cf] = st->side[i];
			st->side_on = 1;
		}
	}
	int rc;
	if ((e || !st->db) && opts->read_only && !has_current(dir)) {
		rc = pith_err_set(err, PITH_EIO, "store %s: no store here (no CURRENT file); "
				  "import or pull with --store %s creates one", dir, dir);
		rocksdb_free(e);
		st->db = NULL;
		goto fail;
	}
	if ((e || !st->db) && opts->read_only && strstr(e ? e : "", "Column family not found")) {
		rc = pith_err_set(err, PITH_EIO, "store %s: its creation was interrupted (%s); a "
				  "writing command (pithctl --store %s import /dev/null) finishes it",
				  dir, e, dir);
		rocksdb_free(e);
		st->db = NULL;
		goto fail;
	}
	if (e || !st->db) {
		rc = pith_err_set(err, PITH_EIO, "store %s: cannot open: %s", dir,
				  e ? e : "unknown error");
		rocksdb_free(e);
		st->db = NULL;
		goto fail;
	}
	if ((rc = meta_init(st, err)))
		goto fail;
	if (!st->read_only)
		store_remove_flush_dir(st); /* store_flush_locked's, left by a crash */
	if (!st->read_only && (rc = store_side_open_end(st, err)))
		goto fail;
	if (opts->fresh_records && !st->read_only && (rc = fresh_begin(st, err)))
		goto fail;
	if (st->unlogged) {
		/* after meta_init: an upgrade at open is written as usual */
		st->wo = st->wo_nolog;
		st->changes_durable = st->changes_seq;
	}
	/* the open-time move is done: what cf[] holds now lives to the close
	 * (a read-only store's side families included: nothing moves them) */
	memcpy(st->cf_open, st->cf, sizeof(st->cf_open));
	*out = st;
	return 0;
fail:
	store_close_(st);
	return rc;
}

void store_close_(store_t *st)
{
	if (!st)
		return;
	if (st->db) {
		store_side_close(st);
		for (int cf = 0; cf < STORE_NCF; cf++)
			if (st->cf[cf])
				rocksdb_column_family_handle_destroy(st->cf[cf]);
		rocksdb_close(st->db);
	}
	for (int cf = 0; cf < STORE_NCF; cf++) {
		if (st->cf_opts[cf])
			rocksdb_options_destroy(st->cf_opts[cf]);
		if (st->table[cf])
			rocksdb_block_based_options_destroy(st->table[cf]);
	}
	if (st->wo_log)
		rocksdb_writeoptions_destroy(st->wo_log);
	if (st->wo_nolog)
		rocksdb_writeoptions_destroy(st->wo_nolog);
	if (st->ro)
		rocksdb_readoptions_destroy(st->ro);
	if (st->opts)
		rocksdb_options_destroy(st->opts);
	if (st->cache)
		rocksdb_cache_destroy(st->cache);
	pthread_mutex_destroy(&st->wmu);
	pthread_mutex_destroy(&st->emu);
	fpset_release(&st->fresh);
	free(st->seqs);
	free(st->dir);
	free(st);
}

