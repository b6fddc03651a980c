/* Opening the database, lookups, resolution and iteration. Ingest is in
 * batch.c, the audit in check.c. */
#include "store_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bundle.h"
#include "ids.h"
#include "store_file.h"

/* RocksDB reports errors as malloc'd strings; this turns one into err. */
int store_db_error(pith_err_t *err, char *msg, const char *what)
{
	int rc = pith_err_set(err, PITH_EIO, "store: %s: %s", what, msg ? msg : "unknown error");
	rocksdb_free(msg);
	return rc;
}

static int64_t wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Counts the error, keeps its message, tells the hook. A corrupted block
 * fails every read of it and a full disk every commit: the hook (the
 * node's log) rate-limits, the counters count them all. */
int store_op_error(store_t *st, int op, pith_err_t *err, char *msg, const char *what)
{
	char line[sizeof(st->errors.last_error)];
	snprintf(line, sizeof(line), "store: %s: %s", what, msg ? msg : "unknown error");
	rocksdb_free(msg);
	pthread_mutex_lock(&st->emu);
	if (op == STORE_OP_WRITE) {
		st->errors.write_errors++;
		st->errors.last_write_us = wall_us();
		st->errors.writable = 0;
	} else {
		st->errors.read_errors++;
		st->errors.last_read_us = wall_us();
	}
	memcpy(st->errors.last_error, line, sizeof(line));
	pthread_mutex_unlock(&st->emu);
	if (st->on_error)
		st->on_error(st->on_error_arg, op, line);
	return pith_err_set(err, PITH_EIO, "%s", line);
}

void store_write_ok(store_t *st)
{
	pthread_mutex_lock(&st->emu);
	st->errors.writable = !st->read_only;
	pthread_mutex_unlock(&st->emu);
}

void store_errors_get(store_t *st, store_errors_t *out)
{
	pthread_mutex_lock(&st->emu);
	*out = st->errors;
	pthread_mutex_unlock(&st->emu);
}

int store_is_healthy(store_t *st, int64_t window_us, char *why, size_t whylen)
{
	store_errors_t e;
	int64_t now = wall_us();
	store_errors_get(st, &e);
	int write_ok = e.writable || st->read_only;
	int read_ok = !e.last_read_us || now - e.last_read_us >= window_us;
	if (why && whylen) {
		if (!write_ok)
			snprintf(why, whylen, "the store does not take writes: %s", e.last_error);
		else if (!read_ok)
			snprintf(why, whylen,
				 "a store read failed %.0f s ago (%llu read errors): %s",
				 (double)(now - e.last_read_us) / 1e6,
				 (unsigned long long)e.read_errors, e.last_error);
		else
			why[0] = 0;
	}
	return write_ok && read_ok;
}

int store_write_probe(store_t *st, pith_err_t *err)
{
	if (st->read_only)
		return pith_err_set(err, PITH_EINVAL, "store: opened read-only");
	/* a commit under way will tell by itself, and it can hold the lock
	 * for its merges: the caller (an event loop) does not wait for it */
	if (pthread_mutex_trylock(&st->wmu))
		return pith_err_set(err, PITH_EIO, "store: write probe: a commit is under way");
	rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
	char *e = NULL;
	store_perf_off();
	rocksdb_write(st->db, st->wo, wb, &e);
	pthread_mutex_unlock(&st->wmu);
	rocksdb_writebatch_destroy(wb);
	if (e) {
		/* not counted again: the store is known not to take writes */
		int rc = pith_err_set(err, PITH_EIO, "store: write probe: %s", e);
		rocksdb_free(e);
		return rc;
	}
	store_write_ok(st);
	return 0;
}

const char *store_rocksdb_version(void)
{
	return PITH_ROCKSDB_VERSION;
}

const char *store_outcome_name(store_outcome_t o)
{
	switch (o) {
	case STORE_STORED: return "stored";
	case STORE_DUPLICATE: return "duplicate";
	case STORE_RESIGNED: return "resigned";
	default: return "pending";
	}
}

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

#define L0_TRIGGER 4
#define L0_SLOWDOWN 20
#define L0_STOP 36
/* RocksDB's default, set so that store_bulk_end puts back exactly it */
#define LEVEL_BASE_BYTES (256ull << 20)
/* The level base of the families commits only write (cf_write_only) in
 * bulk mode: RocksDB also compacts level 0 once its bytes reach the level
 * base (whatever the file count), so deferring their compactions takes
 * both */
#define LEVEL_BASE_BYTES_BULK_WRITTEN (64ull << 30)

/* The families keyed by something random (ids, pith numbers, aliases)
 * and small entries, which RocksDB's leveled compaction rewrites most
 * often per byte: every L0 compaction of a family still smaller than a
 * level's base goes straight into its last level and rewrites all of it. */
static int cf_is_index(int cf)
{
	return cf != STORE_CF_DOCS && cf != STORE_CF_STATES && cf != STORE_CF_BUNDLES;
}

/* The families a commit writes and never reads (it reads summaries,
 * stored events and change log entries): states and alias claims. */
static int cf_write_only(int cf)
{
	return cf == STORE_CF_STATES || cf == STORE_CF_ALIASES;
}

/* Column families holding JSON documents get larger blocks (better
 * compression); the point-looked-up ones get a whole-key bloom filter so
 * that the duplicate check of a new event rarely touches a data block. */
static void cf_tune(store_t *st, int cf)
{
	rocksdb_options_t *o = rocksdb_options_create_copy(st->opts);
	rocksdb_block_based_table_options_t *t = rocksdb_block_based_options_create();
	int docs = !cf_is_index(cf);
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
	 * is where nearly all of it ends up. */
	int bottom = docs ? rocksdb_lz4_compression : rocksdb_zstd_compression;
	int levels[7] = {rocksdb_lz4_compression, rocksdb_lz4_compression, rocksdb_lz4_compression,
			 rocksdb_lz4_compression, rocksdb_lz4_compression, rocksdb_lz4_compression,
			 bottom};
	rocksdb_options_set_num_levels(o, 7);
	rocksdb_options_set_compression_per_level(o, levels, 7);
	rocksdb_options_set_bottommost_compression(o, bottom);
	rocksdb_options_set_level_compaction_dynamic_level_bytes(o, 1);
	rocksdb_options_set_max_bytes_for_level_base(o, LEVEL_BASE_BYTES);
	/* L0 triggers: RocksDB's defaults, set here so that store_bulk_end
	 * puts back exactly these (docs/store.md, "Bulk loading") */
	rocksdb_options_set_level0_file_num_compaction_trigger(o, L0_TRIGGER);
	rocksdb_options_set_level0_slowdown_writes_trigger(o, L0_SLOWDOWN);
	rocksdb_options_set_level0_stop_writes_trigger(o, L0_STOP);
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
	if (st->unsorted_write_only && cf_write_only(cf))
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

static int get_raw_ro(store_t *st, const rocksdb_readoptions_t *ro, int cf, const uint8_t *key,
		      size_t klen, char **val, size_t *vlen, pith_err_t *err);

/* A counter of meta, read with ro (the store's, or one that reads only
 * the table files: store_counts_durable) */
static int meta_get_u64(store_t *st, const rocksdb_readoptions_t *ro, const char *key, uint64_t *v,
			pith_err_t *err)
{
	char *val;
	size_t len;
	int rc = get_raw_ro(st, ro, STORE_CF_META, (const uint8_t *)key, strlen(key), &val, &len, err);
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

static int meta_counts_get(store_t *st, const rocksdb_readoptions_t *ro, store_counts_t *out,
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
	if ((rc = meta_counts_get(st, st->ro, &st->counts, err)))
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

static void remove_flush_dir(store_t *st);

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
		remove_flush_dir(st); /* store_flush_locked's, left by a crash */
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
	free(st->dir);
	free(st);
}

/* ---- raw access ----------------------------------------------------------- */

int store_get_raw(store_t *st, int cf, const uint8_t *key, size_t klen, char **val,
		  size_t *vlen, pith_err_t *err)
{
	return get_raw_ro(st, st->ro, cf, key, klen, val, vlen, err);
}

static int get_raw_ro(store_t *st, const rocksdb_readoptions_t *ro, int cf, const uint8_t *key,
		      size_t klen, char **val, size_t *vlen, pith_err_t *err)
{
	char *e = NULL;
	*vlen = 0;
	store_perf_off();
	unsigned slot;
	rocksdb_column_family_handle_t *h = store_cf_enter(st, cf, &slot);
	*val = rocksdb_get_cf(st->db, ro, h, (const char *)key, klen, vlen, &e);
	store_cf_leave(st, slot);
	if (e) {
		*val = NULL;
		return store_op_error(st, STORE_OP_READ, err, e, store_cf_names[cf]);
	}
	return 0;
}

static int iter_open(store_t *st, int cf, const uint8_t *lo, size_t lo_len, const uint8_t *hi,
		     size_t hi_len, int scan, store_iter_t *out, pith_err_t *err)
{
	memset(out, 0, sizeof(*out));
	out->st = st;
	if (lo_len > sizeof(out->lo) || hi_len > sizeof(out->hi))
		return pith_err_set(err, PITH_EINVAL, "store: iterator bound too long");
	out->ro = rocksdb_readoptions_create();
	if (scan > 0) {
		/* one pass over all of it: keep the cache for the point reads */
		rocksdb_readoptions_set_fill_cache(out->ro, 0);
		rocksdb_readoptions_set_readahead_size(out->ro, 2u << 20);
	}
	if (lo_len) {
		memcpy(out->lo, lo, lo_len);
		out->lo_len = lo_len;
		rocksdb_readoptions_set_iterate_lower_bound(out->ro, (const char *)out->lo, lo_len);
	}
	if (hi_len) {
		memcpy(out->hi, hi, hi_len);
		out->hi_len = hi_len;
		rocksdb_readoptions_set_iterate_upper_bound(out->ro, (const char *)out->hi, hi_len);
	}
	store_perf_off();
	unsigned slot;
	out->it = rocksdb_create_iterator_cf(st->db, out->ro, store_cf_enter(st, cf, &slot));
	store_cf_leave(st, slot);
	if (scan < 0)
		rocksdb_iter_seek_to_last(out->it);
	else if (lo_len)
		rocksdb_iter_seek(out->it, (const char *)out->lo, lo_len);
	else
		rocksdb_iter_seek_to_first(out->it);
	return 0;
}

int store_iter_open(store_t *st, int cf, const uint8_t *lo, size_t lo_len,
		    const uint8_t *hi, size_t hi_len, store_iter_t *out, pith_err_t *err)
{
	return iter_open(st, cf, lo, lo_len, hi, hi_len, 0, out, err);
}

/* Positioned at the last key below hi, without the forward seek to lo
 * first: in the change log that seek stepped over every deleted entry
 * from lo on (all the superseded changes of the first import) before the
 * walk even began, on every page (docs/store.md, "The change log"). */
int store_iter_open_last(store_t *st, int cf, const uint8_t *lo, size_t lo_len,
			 const uint8_t *hi, size_t hi_len, store_iter_t *out, pith_err_t *err)
{
	return iter_open(st, cf, lo, lo_len, hi, hi_len, -1, out, err);
}

int store_iter_scan(store_t *st, int cf, store_iter_t *out, pith_err_t *err)
{
	return iter_open(st, cf, NULL, 0, NULL, 0, 1, out, err);
}

int store_iter_prefix(store_t *st, int cf, const uint8_t *prefix, size_t len,
		      store_iter_t *out, pith_err_t *err)
{
	uint8_t hi[256];
	size_t hl = len;
	if (len > sizeof(hi))
		return pith_err_set(err, PITH_EINVAL, "store: prefix too long");
	memcpy(hi, prefix, len);
	/* the smallest key greater than every key with this prefix */
	while (hl > 0 && hi[hl - 1] == 0xff)
		hl--;
	if (hl > 0)
		hi[hl - 1]++;
	return store_iter_open(st, cf, prefix, len, hi, hl, out, err);
}

int store_iter_valid(store_iter_t *it)
{
	return rocksdb_iter_valid(it->it);
}

const uint8_t *store_iter_key(store_iter_t *it, size_t *len)
{
	return (const uint8_t *)rocksdb_iter_key(it->it, len);
}

const uint8_t *store_iter_value(store_iter_t *it, size_t *len)
{
	return (const uint8_t *)rocksdb_iter_value(it->it, len);
}

void store_iter_next(store_iter_t *it)
{
	rocksdb_iter_next(it->it);
}

void store_iter_last(store_iter_t *it)
{
	rocksdb_iter_seek_to_last(it->it);
}

void store_iter_prev(store_iter_t *it)
{
	rocksdb_iter_prev(it->it);
}

int store_iter_status(store_iter_t *it, pith_err_t *err)
{
	char *e = NULL;
	rocksdb_iter_get_error(it->it, &e);
	return e ? store_op_error(it->st, STORE_OP_READ, err, e, "iterating") : 0;
}

void store_iter_close(store_iter_t *it)
{
	if (it->it)
		rocksdb_iter_destroy(it->it);
	if (it->ro)
		rocksdb_readoptions_destroy(it->ro);
	memset(it, 0, sizeof(*it));
}

/* ---- helpers shared with batch.c and check.c --------------------------- */

void store_events_free(pith_event_t **evs, size_t n)
{
	if (!evs)
		return;
	for (size_t i = 0; i < n; i++)
		pith_event_free(evs[i]);
	free(evs);
}

/* The document a subj key names, appended to out: straight from its time
 * key in docs (the key has created_at and the id), or by id in an older
 * schema. */
static int subj_doc_get(store_t *st, const uint8_t k[STORE_SUBJ_KEY_LEN], pith_buf_t *out,
			pith_err_t *err)
{
	const uint8_t *id = k + STORE_SUBJ_KEY_LEN - STORE_ID_LEN;
	char created[STORE_CREATED_LEN + 1], hex[65];
	int64_t us;
	int rc;
	memcpy(created, k + STORE_SKEY_LEN, STORE_CREATED_LEN);
	created[STORE_CREATED_LEN] = 0;
	if (st->schema < 4 || pith_time_parse(created, &us)) {
		rc = store_doc_get(st, id, out, err);
	} else {
		uint8_t tk[STORE_TIME_KEY_LEN];
		store_time_key_make(us, id, tk);
		rc = store_get_into(st, STORE_CF_DOCS, tk, sizeof(tk), out, err);
	}
	if (rc != PITH_ENOTFOUND)
		return rc;
	pith_hex_encode(id, STORE_ID_LEN, hex);
	return pith_err_set(err, PITH_EIO, "store: subj entry for sha256:%s without its event", hex);
}

int store_subj_event_load(store_t *st, const uint8_t k[STORE_SUBJ_KEY_LEN], pith_buf_t *doc,
			  pith_event_t **ev, pith_err_t *err)
{
	doc->len = 0;
	int rc = subj_doc_get(st, k, doc, err);
	if (rc)
		return rc;
	return pith_event_parse_own(doc->data, doc->len, k + STORE_SUBJ_KEY_LEN - STORE_ID_LEN, ev,
				    err);
}

int store_subject_load(store_t *st, const uint8_t skey[STORE_SKEY_LEN], pith_event_t ***out,
		       size_t *n, pith_err_t *err)
{
	store_iter_t it;
	pith_event_t **evs = NULL;
	pith_buf_t doc = PITH_BUF_INIT;
	size_t cnt = 0, cap = 0;
	int rc = store_iter_prefix(st, STORE_CF_SUBJ, skey, STORE_SKEY_LEN, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl != STORE_SUBJ_KEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: subj key of %zu bytes", kl);
			break;
		}
		if (cnt == cap) {
			size_t nc = cap ? cap * 2 : 16;
			pith_event_t **p = realloc(evs, nc * sizeof(*p));
			if (!p) {
				rc = pith_err_set(err, PITH_ENOMEM, "store: out of memory");
				break;
			}
			evs = p;
			cap = nc;
		}
		if ((rc = store_subj_event_load(st, k, &doc, &evs[cnt], err)))
			break;
		cnt++;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	pith_buf_release(&doc);
	if (rc) {
		store_events_free(evs, cnt);
		return rc;
	}
	*out = evs;
	*n = cnt;
	return 0;
}

int store_bundle_ident(const json_value_t *bundle, int64_t *built_us, char sha[65],
		       pith_err_t *err)
{
	const char *built = json_get_str(bundle, "built_at");
	if (!built || pith_time_parse(built, built_us))
		return pith_err_set(err, PITH_EINVAL, "bundle: built_at missing or not a timestamp");
	uint8_t h[32];
	if (pith_bundle_hash(bundle, h))
		return pith_err_set(err, PITH_EINVAL, "bundle: cannot hash");
	pith_hex_encode(h, 32, sha);
	return 0;
}

int store_bundle_order(int64_t a_us, const uint8_t a_sha[static 32], int64_t b_us,
		       const uint8_t b_sha[static 32])
{
	if (a_us != b_us)
		return a_us > b_us ? 1 : -1;
	/* docs/merge.md: ties go to the smaller bundle_sha256 */
	int c = memcmp(b_sha, a_sha, 32);
	return c > 0 ? 1 : c < 0 ? -1 : 0;
}

int store_bundle_newer(int64_t a_us, const char *a_sha, int64_t b_us, const char *b_sha)
{
	/* lower-case hex sorts as the bytes do; one rule: store_bundle_order */
	uint8_t a[32] = {0}, b[32] = {0};
	pith_hex_decode(a_sha, 64, a, 32);
	pith_hex_decode(b_sha, 64, b, 32);
	return store_bundle_order(a_us, a, b_us, b);
}

int store_bundle_newest(store_t *st, const char *pith_number, int64_t *built_us,
			uint8_t sha[static 32], pith_err_t *err)
{
	pith_buf_t buf = PITH_BUF_INIT;
	json_doc_t *doc = NULL;
	char hex[65];
	pith_err_t e = {0};
	int rc = store_bundle_get(st, pith_number, &buf, &e);
	if (!rc)
		rc = json_parse(&doc, buf.data, buf.len, NULL, &e);
	if (!rc)
		rc = store_bundle_ident(json_doc_root(doc), built_us, hex, &e);
	if (!rc)
		pith_hex_decode(hex, 64, sha, 32);
	else if (rc == PITH_ENOTFOUND || rc == PITH_EIO)
		pith_err_set(err, rc, "%s", e.msg);
	else
		rc = pith_err_set(err, PITH_EIO, "store: stored bundle of %s: %s", pith_number, e.msg);
	json_doc_free(doc);
	pith_buf_release(&buf);
	return rc;
}

int store_bundle_is_newer(store_t *st, const char *pith_number, int64_t built_us,
			  const uint8_t sha[static 32], pith_err_t *err)
{
	int64_t us;
	uint8_t have[32];
	int rc = store_bundle_newest(st, pith_number, &us, have, err);
	if (rc == PITH_ENOTFOUND)
		return 1;
	if (rc)
		return rc;
	return store_bundle_order(built_us, sha, us, have) > 0;
}

int store_bundle_aliases_load(store_t *st, const uint8_t skey[STORE_SKEY_LEN],
			      json_doc_t **doc, const json_value_t **aliases, int64_t *built_us,
			      pith_err_t *err)
{
	char *val;
	size_t len;
	*doc = NULL;
	*aliases = NULL;
	*built_us = 0;
	int rc = store_get_raw(st, STORE_CF_BUNDLES, skey, STORE_SKEY_LEN, &val, &len, err);
	if (rc || !val)
		return rc;
	rc = store_bundle_aliases_parse((const uint8_t *)val, len, doc, aliases, built_us, err);
	rocksdb_free(val);
	return rc;
}

int store_bundle_aliases_parse(const uint8_t *val, size_t len, json_doc_t **doc,
			       const json_value_t **aliases, int64_t *built_us, pith_err_t *err)
{
	int rc = json_parse(doc, val, len, NULL, err);
	if (rc)
		return rc;
	*aliases = json_get_type(json_doc_root(*doc), "source_aliases", JSON_ARRAY);
	const char *built = json_get_str(json_doc_root(*doc), "built_at");
	if (!built || pith_time_parse(built, built_us))
		return pith_err_set(err, PITH_EIO, "store: stored bundle without a valid built_at");
	return 0;
}

size_t store_alias_key(const char *kind, const char *value, uint8_t out[STORE_ALIAS_KEY_MAX])
{
	size_t kl = strlen(kind), vl = strlen(value);
	if (kl == 0 || kl + 1 + vl > STORE_ALIAS_KEY_MAX)
		return 0;
	memcpy(out, kind, kl);
	out[kl] = 0;
	memcpy(out + kl + 1, value, vl);
	if (!strcmp(kind, "doi"))
		for (size_t i = kl + 1; i < kl + 1 + vl; i++)
			out[i] = (uint8_t)tolower(out[i]);
	return kl + 1 + vl;
}

static int rec_decode(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
		      store_record_info_t *r, pith_err_t *err)
{
	store_rec_t rec;
	if (kl != STORE_SKEY_LEN || store_rec_decode(v, vl, &rec))
		return pith_err_set(err, PITH_EIO, "store: malformed record summary (%zu/%zu bytes)",
				    kl, vl);
	store_skey_pith(k, r->pith_number);
	r->event_count = rec.events;
	memcpy(r->state_hash, rec.hash, 32);
	r->has_bundle = rec.has_bundle;
	return 0;
}

/* ---- lookups ------------------------------------------------------------ */

/* Appends the value under key to out through a pinned slice (no copy of
 * its own, no malloc of the value). PITH_ENOTFOUND without touching err:
 * the caller names what was missing, so that a hit formats nothing. */
int store_get_into(store_t *st, int cf, const uint8_t *key, size_t klen, pith_buf_t *out,
		   pith_err_t *err)
{
	char *e = NULL;
	store_perf_off();
	unsigned slot;
	rocksdb_pinnableslice_t *v = rocksdb_get_pinned_cf(st->db, st->ro, store_cf_enter(st, cf, &slot),
							   (const char *)key, klen, &e);
	store_cf_leave(st, slot);
	if (e) {
		rocksdb_pinnableslice_destroy(v);
		return store_op_error(st, STORE_OP_READ, err, e, store_cf_names[cf]);
	}
	if (!v)
		return PITH_ENOTFOUND;
	size_t len = 0;
	const char *val = rocksdb_pinnableslice_value(v, &len);
	int rc = pith_buf_append(out, val, len) ? pith_err_set(err, PITH_ENOMEM, "store: out of memory") : 0;
	rocksdb_pinnableslice_destroy(v);
	return rc;
}

int store_event_get(store_t *st, const uint8_t id[static 32], pith_buf_t *out, pith_err_t *err)
{
	int rc = store_doc_get(st, id, out, err);
	if (rc == PITH_ENOTFOUND) {
		char hex[65];
		pith_hex_encode(id, 32, hex);
		pith_err_set(err, PITH_ENOTFOUND, "event sha256:%s: not in the store", hex);
	}
	return rc;
}

/* One id of a MultiGet that failed: counted, told, and the first
 * message kept in err. */
static void get_many_failed(store_t *st, const uint8_t id[32], char *e, const char *cf,
			    size_t *bad, pith_err_t *err)
{
	char hex[65], what[120];
	pith_hex_encode(id, 32, hex);
	snprintf(what, sizeof(what), "%s: reading event sha256:%s", cf, hex);
	if (!e) { /* indexed without its document */
		const char m[] = "indexed, but its document is missing";
		e = malloc(sizeof(m));
		if (e)
			memcpy(e, m, sizeof(m));
	}
	store_op_error(st, STORE_OP_READ, *bad ? NULL : err, e, what);
	(*bad)++;
}

/* One key of docs for a batched MultiGet: the document of id created at
 * the time in tk (filled by the caller), read into slot n. */
static void docs_slot(const uint8_t *tk, size_t n, const char **keys, size_t *sizes,
		      rocksdb_pinnableslice_t **vals, char **errs)
{
	keys[n] = (const char *)tk;
	sizes[n] = STORE_TIME_KEY_LEN;
	vals[n] = NULL;
	errs[n] = NULL;
}

/* Up to STORE_GET_MANY ids. Those with a time (times[i] != STORE_TIME_NONE):
 * their documents in one batched MultiGet of docs. The others, and those
 * not found where their time said: their events values in one batched
 * MultiGet, then the documents the 8-byte ones point to in a second (in
 * time order, so a peer asking for events in the order it learnt them
 * reads each block of docs once); longer values are documents (schemas 2
 * and 3). While the index of events is aside, the others are not found.
 * Returns how many could not be read. */
static size_t get_many_chunk(store_t *st, const uint8_t (*ids)[32], const int64_t *times,
			     size_t k, store_event_fn fn, void *arg, size_t bad, pith_err_t *err)
{
	enum { G = STORE_GET_MANY };
	const char *keys[G], *dkeys[G], *hkeys[G];
	size_t sizes[G], dsizes[G], hsizes[G];
	rocksdb_pinnableslice_t *vals[G], *docs[G], *hdocs[G];
	char *errs[G], *derrs[G], *herrs[G];
	uint8_t tks[G][STORE_TIME_KEY_LEN], hks[G][STORE_TIME_KEY_LEN];
	int hat[G];   /* index into hdocs (read by time), -1, or -2: not read (aside) */
	int lat[G];   /* index into vals (looked up by id), or -1 */
	int at[G];    /* for each lookup by id: index into docs, or -1 */
	size_t look[G];
	size_t nh = 0, nl = 0, nd = 0;
	store_perf_off();
	for (size_t i = 0; i < k; i++) {
		hat[i] = lat[i] = -1;
		if (!times || times[i] == STORE_TIME_NONE || !st->cf[STORE_CF_DOCS])
			continue;
		store_time_key_make(times[i], ids[i], hks[nh]);
		docs_slot(hks[nh], nh, hkeys, hsizes, hdocs, herrs);
		hat[i] = (int)nh++;
	}
	if (nh)
		rocksdb_batched_multi_get_cf(st->db, st->ro, st->cf[STORE_CF_DOCS], nh, hkeys,
					     hsizes, hdocs, herrs, 0);
	/* while a first catch-up writes events aside, an id is not looked up
	 * by id (each found would sort the side family's memtable): not found */
	int aside = store_events_aside(st);
	for (size_t i = 0; i < k; i++) {
		int h = hat[i];
		if (h >= 0 && (hdocs[h] || herrs[h]))
			continue;
		if (aside) {
			hat[i] = -2; /* nothing read: not found */
			continue;
		}
		keys[nl] = (const char *)ids[i];
		sizes[nl] = 32;
		vals[nl] = NULL;
		errs[nl] = NULL;
		look[nl] = i;
		lat[i] = (int)nl++;
	}
	if (nl) {
		unsigned slot;
		rocksdb_column_family_handle_t *h = store_cf_enter(st, STORE_CF_EVENTS, &slot);
		rocksdb_batched_multi_get_cf(st->db, st->ro, h, nl, keys, sizes, vals, errs, 0);
		store_cf_leave(st, slot);
	}
	for (size_t j = 0; j < nl; j++) {
		size_t len = 0;
		const char *v = vals[j] && !errs[j] ? rocksdb_pinnableslice_value(vals[j], &len) : NULL;
		at[j] = -1;
		if (v && st->cf[STORE_CF_DOCS] && store_doc_key(v, len, ids[look[j]], tks[nd])) {
			docs_slot(tks[nd], nd, dkeys, dsizes, docs, derrs);
			at[j] = (int)nd++;
		}
	}
	if (nd)
		rocksdb_batched_multi_get_cf(st->db, st->ro, st->cf[STORE_CF_DOCS], nd, dkeys, dsizes,
					     docs, derrs, 0);
	for (size_t i = 0; i < k; i++) {
		size_t len = 0;
		const char *v = NULL;
		int h = hat[i], j = lat[i];
		if (h == -2) {
			/* not looked up */
		} else if (j < 0) {
			if (hdocs[h])
				v = rocksdb_pinnableslice_value(hdocs[h], &len);
			else
				get_many_failed(st, ids[i], herrs[h], "docs", &bad, err);
			herrs[h] = NULL;
		} else if (errs[j]) {
			get_many_failed(st, ids[i], errs[j], "events", &bad, err);
			errs[j] = NULL;
		} else if (at[j] >= 0) {
			int d = at[j];
			if (docs[d] && !derrs[d])
				v = rocksdb_pinnableslice_value(docs[d], &len);
			else
				get_many_failed(st, ids[i], derrs[d], "docs", &bad, err);
			derrs[d] = NULL;
		} else if (vals[j]) {
			v = rocksdb_pinnableslice_value(vals[j], &len);
		}
		fn(arg, ids[i], (const uint8_t *)v, len);
	}
	for (size_t h = 0; h < nh; h++)
		rocksdb_pinnableslice_destroy(hdocs[h]);
	for (size_t j = 0; j < nl; j++)
		rocksdb_pinnableslice_destroy(vals[j]);
	for (size_t d = 0; d < nd; d++)
		rocksdb_pinnableslice_destroy(docs[d]);
	return bad;
}

size_t store_events_get_many_at(store_t *st, const uint8_t (*ids)[32],
				const int64_t *created_us, size_t n, store_event_fn fn,
				void *arg, pith_err_t *err)
{
	size_t bad = 0;
	while (n) {
		size_t k = n < STORE_GET_MANY ? n : STORE_GET_MANY;
		bad = get_many_chunk(st, ids, created_us, k, fn, arg, bad, err);
		ids += k;
		if (created_us)
			created_us += k;
		n -= k;
	}
	return bad;
}

size_t store_events_get_many(store_t *st, const uint8_t (*ids)[32], size_t n,
			     store_event_fn fn, void *arg, pith_err_t *err)
{
	return store_events_get_many_at(st, ids, NULL, n, fn, arg, err);
}

int store_events_aside(store_t *st)
{
	/* a side family made by this process: one found at open is only read
	 * from its table files (read-only) or moved before store_open returns */
	return __atomic_load_n(&st->cf[STORE_CF_EVENTS], __ATOMIC_ACQUIRE) !=
	       st->cf_open[STORE_CF_EVENTS];
}

int store_event_has_at(store_t *st, const uint8_t id[static 32], int64_t created_us,
		       pith_err_t *err)
{
	if (!store_events_aside(st) || st->schema < 4)
		return store_event_has(st, id, err);
	uint8_t tk[STORE_TIME_KEY_LEN];
	char *val;
	size_t len;
	store_time_key_make(created_us, id, tk);
	int rc = store_get_raw(st, STORE_CF_DOCS, tk, sizeof(tk), &val, &len, err);
	if (rc)
		return rc;
	rocksdb_free(val);
	return val != NULL;
}

int store_event_has(store_t *st, const uint8_t id[static 32], pith_err_t *err)
{
	if (store_events_aside(st))
		return STORE_HAS_UNKNOWN;
	char *val;
	size_t len;
	int rc = store_get_raw(st, STORE_CF_EVENTS, id, 32, &val, &len, err);
	if (rc)
		return rc;
	rocksdb_free(val);
	return val != NULL;
}

int store_event_id_parse(const char *s, uint8_t id[static 32], pith_err_t *err)
{
	const char *h = strncmp(s, "sha256:", 7) ? s : s + 7;
	if (strlen(h) != 64 || pith_hex_decode(h, 64, id, 32))
		return pith_err_set(err, PITH_EINVAL,
				    "event id '%.80s' is not sha256: and 64 lower-case hex digits", s);
	return 0;
}

static int skey_of(const char *pith_number, uint8_t skey[STORE_SKEY_LEN], pith_err_t *err)
{
	if (!pith_number_is_valid(pith_number))
		return pith_err_set(err, PITH_EINVAL, "'%.60s' is not a full pith number", pith_number);
	store_skey_make(pith_number, skey);
	return 0;
}

int store_state_get(store_t *st, const char *pith_number, pith_buf_t *out, pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	int rc = skey_of(pith_number, skey, err);
	if (!rc)
		rc = store_get_into(st, STORE_CF_STATES, skey, sizeof(skey), out, err);
	if (rc == PITH_ENOTFOUND)
		pith_err_set(err, rc, "state of %s: not in the store", pith_number);
	return rc;
}

int store_bundle_get(store_t *st, const char *pith_number, pith_buf_t *out, pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	int rc = skey_of(pith_number, skey, err);
	if (!rc)
		rc = store_get_into(st, STORE_CF_BUNDLES, skey, sizeof(skey), out, err);
	if (rc == PITH_ENOTFOUND)
		pith_err_set(err, rc, "bundle of %s: not in the store", pith_number);
	return rc;
}

int store_record_get(store_t *st, const char *pith_number, store_record_info_t *out,
		     pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	char *val;
	size_t len;
	int rc = skey_of(pith_number, skey, err);
	if (rc || (rc = store_get_raw(st, STORE_CF_RECORDS, skey, sizeof(skey), &val, &len, err)))
		return rc;
	if (!val)
		return pith_err_set(err, PITH_ENOTFOUND, "record %s: not in the store", pith_number);
	rc = rec_decode(skey, sizeof(skey), (const uint8_t *)val, len, out, err);
	rocksdb_free(val);
	return rc;
}

/* Records whose body starts with prefix (upper-case base32, 1..26 chars).
 * Exactly one: its pith number in out. */
static int resolve_prefix(store_t *st, const char *prefix, const char *typed,
			  char out[static PITH_NUMBER_LEN + 1], pith_err_t *err)
{
	store_iter_t it;
	size_t found = 0;
	char first[PITH_NUMBER_LEN + 1] = "", second[PITH_NUMBER_LEN + 1] = "";
	int rc = store_iter_prefix(st, STORE_CF_RECORDS, (const uint8_t *)prefix, strlen(prefix),
				   &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it) && found < 2; store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl != STORE_SKEY_LEN)
			continue;
		store_skey_pith(k, found ? second : first);
		found++;
	}
	rc = store_iter_status(&it, err);
	store_iter_close(&it);
	if (rc)
		return rc;
	if (found == 0)
		return pith_err_set(err, PITH_ENOTFOUND, "%s: no stored record", typed);
	if (found > 1)
		return pith_err_set(err, PITH_EINVAL, "%s: ambiguous, names %s, %s and maybe more",
				    typed, first, second);
	memcpy(out, first, PITH_NUMBER_LEN + 1);
	return 0;
}

/* The record with the best claim on (kind, value): the greater rank
 * (bundle over derived, then the later built_at), then the smaller pith
 * number. PITH_ENOTFOUND if no record claims it. */
static int resolve_alias(store_t *st, const char *kind, const char *value,
			 char out[static PITH_NUMBER_LEN + 1], pith_err_t *err)
{
	uint8_t key[STORE_ALIAS_KEY_MAX + 1], best[STORE_ALIAS_RANK_LEN];
	size_t kl = store_alias_key(kind, value, key);
	store_iter_t it;
	int found = 0;
	if (!kl)
		return PITH_ENOTFOUND;
	key[kl++] = 0;
	int rc = store_iter_prefix(st, STORE_CF_ALIASES, key, kl, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t ekl, vl;
		const uint8_t *k = store_iter_key(&it, &ekl), *v = store_iter_value(&it, &vl);
		if (ekl != kl + PITH_NUMBER_LEN || vl != STORE_ALIAS_RANK_LEN)
			continue;
		/* entries come in pith number order: on equal rank the first stays */
		if (found && memcmp(v, best, STORE_ALIAS_RANK_LEN) <= 0)
			continue;
		memcpy(best, v, STORE_ALIAS_RANK_LEN);
		memcpy(out, k + kl, PITH_NUMBER_LEN);
		out[PITH_NUMBER_LEN] = 0;
		found = 1;
	}
	rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc ? rc : found ? 0 : PITH_ENOTFOUND;
}

int store_resolve(store_t *st, const char *text, char out[static PITH_NUMBER_LEN + 1],
		  pith_err_t *err)
{
	pith_id_t id;
	int rc = pith_id_parse(text, &id, err);
	if (rc)
		return rc;
	if (id.kind == PITH_ID_FULL) {
		if (id.number[0]) {
			/* exact year given: that record or nothing */
			store_record_info_t r;
			if ((rc = store_record_get(st, id.number, &r, err)))
				return rc;
			memcpy(out, r.pith_number, PITH_NUMBER_LEN + 1);
			return 0;
		}
		return resolve_prefix(st, id.value, text, out, err);
	}
	if (id.alias_kind[0]) {
		if ((rc = resolve_alias(st, id.alias_kind, id.value, out, err)) != PITH_ENOTFOUND)
			return rc;
	}
	if (id.kind == PITH_ID_SHORT)
		return resolve_prefix(st, id.value, text, out, err);
	return pith_err_set(err, PITH_ENOTFOUND, "%s: no stored record has this alias", text);
}

/* ---- iteration ---------------------------------------------------------- */

int store_records_each(store_t *st, store_record_fn fn, void *arg, pith_err_t *err)
{
	store_iter_t it;
	int rc = store_iter_open(st, STORE_CF_RECORDS, NULL, 0, NULL, 0, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		store_record_info_t r;
		if ((rc = rec_decode(k, kl, v, vl, &r, err)) || (rc = fn(arg, &r)))
			break;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}

int store_states_each(store_t *st, const char *after, size_t limit, store_state_fn fn, void *arg,
		      char *last, pith_err_t *err)
{
	uint8_t lo[STORE_SKEY_LEN];
	size_t lo_len = 0, n = 0;
	store_iter_t it;
	int rc;
	if (last)
		last[0] = 0;
	if (after && after[0]) {
		if ((rc = skey_of(after, lo, err)))
			return rc;
		lo_len = sizeof(lo);
	}
	if ((rc = iter_open(st, STORE_CF_STATES, lo, lo_len, NULL, 0, 1, &it, err)))
		return rc;
	for (; store_iter_valid(&it) && (!limit || n < limit); store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		if (kl != STORE_SKEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: state key of %zu bytes", kl);
			break;
		}
		if (lo_len && !memcmp(k, lo, sizeof(lo)))
			continue; /* after itself */
		char pith[PITH_NUMBER_LEN + 1];
		store_skey_pith(k, pith);
		if ((rc = fn(arg, pith, v, vl)))
			break;
		if (last)
			memcpy(last, pith, sizeof(pith));
		n++;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}

int store_events_each(store_t *st, const char *pith_number, store_event_fn fn, void *arg,
		      pith_err_t *err)
{
	uint8_t skey[STORE_SKEY_LEN];
	store_iter_t it;
	int rc;
	if (pith_number) {
		if ((rc = skey_of(pith_number, skey, err)) ||
		    (rc = store_iter_prefix(st, STORE_CF_SUBJ, skey, sizeof(skey), &it, err)))
			return rc;
	} else if ((rc = store_iter_open(st, STORE_CF_SUBJ, NULL, 0, NULL, 0, &it, err))) {
		return rc;
	}
	pith_buf_t doc = PITH_BUF_INIT;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl != STORE_SUBJ_KEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: subj key of %zu bytes", kl);
			break;
		}
		doc.len = 0;
		if ((rc = subj_doc_get(st, k, &doc, err)) ||
		    (rc = fn(arg, k + kl - STORE_ID_LEN, doc.data, doc.len)))
			break;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	pith_buf_release(&doc);
	return rc;
}

int store_time_each(store_t *st, int64_t from_us, int64_t to_us, store_time_fn fn, void *arg,
		    pith_err_t *err)
{
	return store_time_each_after(st, from_us, NULL, to_us, fn, arg, err);
}

int store_time_each_after(store_t *st, int64_t after_us, const uint8_t *after_id, int64_t to_us,
			  store_time_fn fn, void *arg, pith_err_t *err)
{
	/* the lower bound (us, id, 0x00) is the first 41-byte string after the
	 * cursor's 40-byte key, so every key strictly after it, and no other,
	 * is at or above it */
	uint8_t lo[STORE_TIME_KEY_LEN + 1], hi[8];
	size_t lo_len = 8;
	store_iter_t it;
	if (to_us <= after_us)
		return 0;
	store_time_put(lo, after_us);
	if (after_id) {
		memcpy(lo + 8, after_id, STORE_ID_LEN);
		lo[STORE_TIME_KEY_LEN] = 0;
		lo_len = sizeof(lo);
	}
	store_time_put(hi, to_us);
	/* the whole index (the reconciliation set's load at start, 10
	 * million keys in a large store) is one pass: read ahead, and keep
	 * the block cache for the point reads that serve */
	int whole = after_us == INT64_MIN && !after_id && to_us == INT64_MAX;
	int rc = iter_open(st, STORE_CF_TIME, lo, lo_len, hi, 8, whole, &it, err);
	if (rc)
		return rc;
	for (; store_iter_valid(&it); store_iter_next(&it)) {
		size_t kl;
		const uint8_t *k = store_iter_key(&it, &kl);
		if (kl != STORE_TIME_KEY_LEN) {
			rc = pith_err_set(err, PITH_EIO, "store: time key of %zu bytes", kl);
			break;
		}
		if ((rc = fn(arg, store_time_get(k), k + 8)))
			break;
	}
	if (!rc)
		rc = store_iter_status(&it, err);
	store_iter_close(&it);
	return rc;
}

/* A seqlock: the writer makes counts_seq odd, writes, makes it even
 * again; a reader retries while it is odd or changed under it. status
 * and metrics read the counters on the event loop, and wmu may be held
 * by a commit or by a flush for most of a second. */
void store_counts_set(store_t *st, const store_counts_t *c)
{
	uint64_t s = st->counts_seq;
	__atomic_store_n(&st->counts_seq, s + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&st->counts.events, c->events, __ATOMIC_RELAXED);
	__atomic_store_n(&st->counts.records, c->records, __ATOMIC_RELAXED);
	__atomic_store_n(&st->counts.bundles, c->bundles, __ATOMIC_RELAXED);
	__atomic_store_n(&st->counts_seq, s + 2, __ATOMIC_RELEASE);
}

void store_counts_get(store_t *st, store_counts_t *out)
{
	for (;;) {
		uint64_t s = __atomic_load_n(&st->counts_seq, __ATOMIC_ACQUIRE);
		if (s & 1) {
			sched_yield();
			continue;
		}
		out->events = __atomic_load_n(&st->counts.events, __ATOMIC_RELAXED);
		out->records = __atomic_load_n(&st->counts.records, __ATOMIC_RELAXED);
		out->bundles = __atomic_load_n(&st->counts.bundles, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&st->counts_seq, __ATOMIC_RELAXED) == s)
			return;
	}
}

int store_counts_durable(store_t *st, store_counts_t *out, pith_err_t *err)
{
	if (!store_is_unlogged(st)) {
		store_counts_get(st, out);
		return 0;
	}
	/* kPersistedTier: the table files only, not the memtables (RocksDB
	 * skips them for a Get while writes without the log are unflushed) */
	rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
	rocksdb_readoptions_set_read_tier(ro, 2); /* kPersistedTier */
	int rc = meta_counts_get(st, ro, out, err);
	rocksdb_readoptions_destroy(ro);
	return rc;
}

static int compaction_busy(store_t *st);

void store_usage_get(store_t *st, store_usage_t *out)
{
	memset(out, 0, sizeof(*out));
	out->compacting = compaction_busy(st);
	for (int cf = 0; cf < STORE_NCF; cf++) {
		uint64_t v;
		unsigned slot;
		rocksdb_column_family_handle_t *h = store_cf_enter(st, cf, &slot);
		if (h && !rocksdb_property_int_cf(st->db, h, "rocksdb.total-sst-files-size", &v))
			out->sst_bytes += v;
		if (h && !rocksdb_property_int_cf(st->db, h, "rocksdb.cur-size-all-mem-tables", &v))
			out->memtable_bytes += v;
		if (h && !rocksdb_property_int_cf(st->db, h, "rocksdb.estimate-pending-compaction-bytes",
						  &v))
			out->pending_compaction_bytes += v;
		store_cf_leave(st, slot);
	}
	DIR *d = opendir(st->dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[4096];
		struct stat sb;
		size_t l = strlen(e->d_name);
		if (l <= 4 || strcmp(e->d_name + l - 4, ".log"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", st->dir, e->d_name);
		if (!stat(p, &sb) && S_ISREG(sb.st_mode))
			out->wal_bytes += (uint64_t)sb.st_size;
	}
	if (d)
		closedir(d);
}

#define FLUSH_DIR "flush-checkpoint" /* store_flush_locked's, in the store's directory */

/* Removes a directory of files (hard links to table files and copies). */
void store_remove_files_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[4096 + 256];
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Removes the checkpoint store_flush_locked made, and the directory
 * RocksDB builds it in (DIR.tmp, renamed at its end), either of which a
 * crash may leave: their hard links would keep table files on disk. */
static void remove_flush_dir(store_t *st)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/" FLUSH_DIR, st->dir);
	store_remove_files_dir(dir);
	snprintf(dir, sizeof(dir), "%s/" FLUSH_DIR ".tmp", st->dir);
	store_remove_files_dir(dir);
}

/* RocksDB 7.8's C API flushes one family per call (rocksdb_flush_cfs came
 * with 8.x); a checkpoint with log_size_for_flush 0 is documented to
 * flush all of them first, which with atomic_flush is one atomic group.
 * The checkpoint itself (hard links, a copy of the manifest) goes at once. */
int store_flush_locked(store_t *st, pith_err_t *err)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/" FLUSH_DIR, st->dir);
	remove_flush_dir(st); /* a crash's leftover */
	int rc = store_checkpoint(st, dir, err);
	remove_flush_dir(st);
	if (rc)
		return rc;
	st->nolog_dirty = 0;
	if (st->unlogged)
		__atomic_store_n(&st->changes_durable, st->changes_seq, __ATOMIC_RELEASE);
	return 0;
}

int store_flush(store_t *st, pith_err_t *err)
{
	if (st->read_only)
		return pith_err_set(err, PITH_EINVAL, "store: opened read-only");
	if (st->atomic_flush) {
		pthread_mutex_lock(&st->wmu);
		int rc = store_flush_locked(st, err);
		pthread_mutex_unlock(&st->wmu);
		return rc;
	}
	rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
	rocksdb_flushoptions_set_wait(fo, 1);
	char *e = NULL;
	for (int cf = 0; cf < STORE_NCF && !e; cf++)
		rocksdb_flush_cf(st->db, fo, st->cf[cf], &e);
	rocksdb_flushoptions_destroy(fo);
	return e ? store_op_error(st, STORE_OP_WRITE, err, e, "flushing") : 0;
}

int store_unlogged_begin(store_t *st, pith_err_t *err)
{
	if (st->read_only)
		return pith_err_set(err, PITH_EINVAL, "store: opened read-only");
	if (!st->atomic_flush)
		return pith_err_set(err, PITH_EINVAL, "store %s: commits without the log need a store "
				    "opened with atomic_flush", st->dir);
	pthread_mutex_lock(&st->wmu);
	if (!st->unlogged) {
		__atomic_store_n(&st->changes_durable, st->changes_seq, __ATOMIC_RELEASE);
		__atomic_store_n(&st->unlogged, 1, __ATOMIC_RELEASE);
		st->wo = st->wo_nolog;
	}
	pthread_mutex_unlock(&st->wmu);
	return 0;
}

int store_unlogged_end(store_t *st, pith_err_t *err)
{
	int rc = 0;
	pthread_mutex_lock(&st->wmu);
	if (st->unlogged && !(rc = store_flush_locked(st, err))) {
		__atomic_store_n(&st->unlogged, 0, __ATOMIC_RELEASE);
		st->wo = st->wo_log;
		__atomic_store_n(&st->changes_durable, UINT64_MAX, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&st->wmu);
	return rc;
}

int store_is_unlogged(store_t *st)
{
	/* written under wmu, read without it: a commit can hold wmu long */
	return __atomic_load_n(&st->unlogged, __ATOMIC_ACQUIRE);
}

/* Whether family cf's compactions wait like the write-only families'
 * (STORE_BULK_L0_WRITTEN files, the bulk level base) in bulk mode: every
 * index family does too while the store is being filled from empty
 * (store_opts_t.fresh_records), in an import and a node's catch-up alike,
 * since a commit then reads nothing of a record it has not written. That
 * includes `subj`, read by prefix scans that no bloom filter spares a
 * level-0 file, but only for a record whose events straddle two commits
 * (at the registry's shape, one record in about two commits); its
 * compactions at STORE_BULK_L0_INDEX files each rewrote the whole family
 * (random keys) and grew with the store: 1.1 us an event in a 4M
 * catch-up, 1.9 at 10M (docs/performance.md, issue 17, session 36). */
static int l0_waits(const store_t *st, int cf)
{
	return cf_write_only(cf) ||
	       (cf_is_index(cf) && __atomic_load_n(&st->fresh_on, __ATOMIC_RELAXED));
}

/* Whether st->cf[cf] is a side family now (side.c). */
static int side_in_use(const store_t *st, int cf)
{
	for (int i = 0; i < STORE_NSIDE; i++)
		if (store_side_cf(i) == cf && st->side[i])
			return 1;
	return 0;
}

/* Level 0's triggers of family cf (compaction, slowdown, stop) for a
 * bulk mode, or the usual ones when !bulk; side: of the side family
 * standing in for it, if one does. */
static void l0_triggers(const store_t *st, int cf, int bulk, enum store_bulk_mode mode, int side,
			int v[3])
{
	if (!bulk) {
		v[0] = L0_TRIGGER, v[1] = L0_SLOWDOWN, v[2] = L0_STOP;
		return;
	}
	int wide = mode == STORE_BULK_IMPORT ? 2 : 1;
	if (side && side_in_use(st, cf))
		v[0] = STORE_BULK_L0_SIDE;
	else if (l0_waits(st, cf))
		v[0] = STORE_BULK_L0_WRITTEN;
	else
		v[0] = wide * (cf_is_index(cf) ? STORE_BULK_L0_INDEX : STORE_BULK_L0_DOCS);
	/* slowing and stopping writes: 24 and 48 files past the trigger,
	 * except for the document families in a node's catch-up, which keep
	 * the usual ones (RocksDB raises any below the trigger to it) */
	int usual = mode == STORE_BULK_SYNC && !cf_is_index(cf) && !cf_write_only(cf);
	v[1] = usual ? L0_SLOWDOWN : v[0] + 24;
	v[2] = usual ? L0_STOP : v[0] + 48;
}

/* Sets the L0 triggers of family handle h (l0_triggers: v). */
static int l0_set_one(store_t *st, rocksdb_column_family_handle_t *h, int bulk, int waits,
		      const int v[3], pith_err_t *err)
{
	static const char *keys[4] = {"level0_file_num_compaction_trigger",
				      "level0_slowdown_writes_trigger", "level0_stop_writes_trigger",
				      "max_bytes_for_level_base"};
	char vals[4][24];
	const char *vp[4];
	for (int i = 0; i < 3; i++)
		snprintf(vals[i], sizeof(vals[i]), "%d", v[i]);
	snprintf(vals[3], sizeof(vals[3]), "%llu", bulk ? LEVEL_BASE_BYTES_BULK_WRITTEN : LEVEL_BASE_BYTES);
	for (int i = 0; i < 4; i++)
		vp[i] = vals[i];
	/* one SetOptions per family (each rewrites the OPTIONS file); the
	 * level base only for the families whose compaction waits, and back
	 * for all at the end */
	char *e = NULL;
	rocksdb_set_options_cf(st->db, h, !bulk || waits ? 4 : 3, keys, vp, &e);
	return e ? store_db_error(err, e, "setting the level-0 triggers") : 0;
}

/* Sets the L0 triggers of every family (l0_triggers), and of the family a
 * side family stands in for, for when it is back. */
static int l0_set(store_t *st, int bulk, enum store_bulk_mode mode, pith_err_t *err)
{
	for (int cf = 0; cf < STORE_NCF; cf++) {
		if (!st->cf[cf])
			continue;
		int v[3], rc;
		l0_triggers(st, cf, bulk, mode, 1, v);
		if ((rc = l0_set_one(st, st->cf[cf], bulk, l0_waits(st, cf), v, err)))
			return rc;
		for (int i = 0; i < STORE_NSIDE; i++) {
			if (store_side_cf(i) != cf || !st->side[i] || !st->side_main[i])
				continue;
			l0_triggers(st, cf, bulk, mode, 0, v);
			if ((rc = l0_set_one(st, st->side_main[i], bulk, l0_waits(st, cf), v, err)))
				return rc;
		}
	}
	return 0;
}

void store_l0_reset(store_t *st)
{
	pith_err_t err = {0};
	if (st->bulk_on && l0_set(st, 1, st->bulk_mode, &err))
		store_say(st, "%s", err.msg);
}

int store_bulk_begin(store_t *st, enum store_bulk_mode mode, pith_err_t *err)
{
	if (st->read_only)
		return pith_err_set(err, PITH_EINVAL, "store: opened read-only");
	st->bulk_mode = mode;
	st->bulk_on = 1;
	return l0_set(st, 1, mode, err);
}

int store_cf_property(store_t *st, int cf, const char *name, uint64_t *v)
{
	unsigned slot;
	rocksdb_column_family_handle_t *h = store_cf_enter(st, cf, &slot);
	if (!rocksdb_property_int_cf(st->db, h, name, v)) {
		store_cf_leave(st, slot);
		return 0;
	}
	/* some (num-files-at-levelN) are only given as text */
	char *t = rocksdb_property_value_cf(st->db, h, name), *end = NULL;
	store_cf_leave(st, slot);
	int rc = -1;
	if (t) {
		unsigned long long n = strtoull(t, &end, 10);
		if (end != t && !*end) {
			*v = n;
			rc = 0;
		}
		rocksdb_free(t);
	}
	return rc;
}

/* Is RocksDB flushing or compacting, or does a family want a compaction? */
static int compaction_busy(store_t *st)
{
	uint64_t v = 0;
	if (!rocksdb_property_int(st->db, "rocksdb.num-running-compactions", &v) && v)
		return 1;
	if (!rocksdb_property_int(st->db, "rocksdb.num-running-flushes", &v) && v)
		return 1;
	for (int cf = 0; cf < STORE_NCF; cf++) {
		unsigned slot;
		rocksdb_column_family_handle_t *h = store_cf_enter(st, cf, &slot);
		int pending = h && !rocksdb_property_int_cf(st->db, h, "rocksdb.compaction-pending", &v) &&
			      v;
		store_cf_leave(st, slot);
		if (pending)
			return 1;
	}
	return 0;
}

int store_bulk_end(store_t *st, int settle, pith_err_t *err)
{
	st->bulk_on = 0;
	int rc = l0_set(st, 0, STORE_BULK_SYNC, err);
	/* the bulk is in: the next commit turns store_opts_t.fresh_records
	 * off and frees its set (not here: a node ends its bulk mode on the
	 * event loop, which must not wait for a commit) */
	__atomic_store_n(&st->fresh_stop, 1, __ATOMIC_RELEASE);
	/* setting the options scheduled the compactions they now call for;
	 * they run on RocksDB's threads: poll until none is left */
	while (!rc && settle && compaction_busy(st)) {
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return rc;
}

int store_checkpoint(store_t *st, const char *dir, pith_err_t *err)
{
	char *e = NULL;
	rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(st->db, &e);
	if (e || !cp)
		return store_db_error(err, e, "checkpoint");
	/* log_size_for_flush 0: flush the memtables first, so the copy does
	 * not depend on replaying a write-ahead log */
	rocksdb_checkpoint_create(cp, dir, 0, &e);
	rocksdb_checkpoint_object_destroy(cp);
	if (e) {
		int rc = pith_err_set(err, PITH_EIO, "store: checkpoint into %s: %s", dir, e);
		rocksdb_free(e);
		return rc;
	}
	return 0;
}

int store_compact(store_t *st, pith_err_t *err)
{
	int rc = store_flush(st, err);
	if (rc)
		return rc;
	for (int cf = 0; cf < STORE_NCF; cf++)
		rocksdb_compact_range_cf(st->db, st->cf[cf], NULL, 0, NULL, 0);
	return 0;
}
