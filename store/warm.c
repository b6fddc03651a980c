/* Reading the read side's table files into the page cache (store_warm,
 * docs/store.md "The page cache at start"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"

/* The families a record's documents and a resolve read, smallest first:
 * when the budget cannot hold them all, the ones that fit are read. */
static const int warm_cfs[] = {STORE_CF_RECORDS, STORE_CF_ALIASES, STORE_CF_STATES};

#define WARM_CHUNK (1u << 20)

/* Reads path front to back; 0 and the bytes read, or -1 if it cannot be
 * opened (a compaction may have removed it since it was listed: not an
 * error) or a read failed. */
static int warm_file(const char *path, char *buf, const atomic_int *stop, uint64_t *bytes)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	off_t off = 0;
	int rc = 0;
	while (!(stop && atomic_load(stop))) {
		ssize_t r = pread(fd, buf, WARM_CHUNK, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = -1;
		if (r <= 0)
			break;
		off += r;
	}
	*bytes += (uint64_t)off;
	close(fd);
	return rc;
}

int store_warm(store_t *st, uint64_t budget, const atomic_int *stop, store_warm_t *out,
	       pith_err_t *err)
{
	memset(out, 0, sizeof(*out));
	const rocksdb_livefiles_t *lf = rocksdb_livefiles(st->db);
	char *buf = malloc(WARM_CHUNK);
	if (!lf || !buf) {
		if (lf)
			rocksdb_livefiles_destroy(lf);
		free(buf);
		return pith_err_set(err, PITH_ENOMEM, "store: out of memory listing the table files");
	}
	int n = rocksdb_livefiles_count(lf);
	/* one pass per family, in warm_cfs' order */
	for (size_t c = 0; c < sizeof(warm_cfs) / sizeof(warm_cfs[0]); c++) {
		const char *cf = store_cf_names[warm_cfs[c]];
		for (int i = 0; i < n && !(stop && atomic_load(stop)); i++) {
			if (strcmp(rocksdb_livefiles_column_family_name(lf, i), cf))
				continue;
			uint64_t size = rocksdb_livefiles_size(lf, i);
			out->total += size;
			if (out->planned + size > budget) {
				out->skipped++;
				continue;
			}
			out->planned += size;
			/* the name is "/000123.sst", relative to the database */
			const char *name = rocksdb_livefiles_name(lf, i);
			char path[4096];
			snprintf(path, sizeof(path), "%s%s%s", st->dir, name[0] == '/' ? "" : "/", name);
			if (warm_file(path, buf, stop, &out->bytes))
				out->missing++;
			else
				out->files++;
		}
	}
	rocksdb_livefiles_destroy(lf);
	free(buf);
	return 0;
}
