/* Replacing a file atomically (store_file.h): the one place that renames
 * a file over another in node/, store/ and pithctl (tests/mechanisms_check.py
 * holds the tree to it). */
#include "store_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int parent_of(const char *path, char *out, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	if (slash && n == 0)
		n = 1; /* "/name": the root */
	if (!slash)
		return snprintf(out, cap, ".") >= (int)cap ? -1 : 0;
	if (n >= cap)
		return -1;
	memcpy(out, path, n);
	out[n] = 0;
	return 0;
}

int store_file_sync_dir(const char *path)
{
	char dir[4096];
	if (parent_of(path, dir, sizeof(dir))) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = fsync(fd);
	int e = errno;
	close(fd);
	errno = e;
	return rc ? -1 : 0;
}

int store_file_begin(store_file_t *r, const char *path, const char *suffix, unsigned mode,
		     unsigned flags)
{
	r->fp = NULL;
	r->flags = flags;
	if (snprintf(r->path, sizeof(r->path), "%s", path) >= (int)sizeof(r->path) ||
	    snprintf(r->tmp, sizeof(r->tmp), "%s%s", path, suffix ? suffix : ".tmp") >=
		    (int)sizeof(r->tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = open(r->tmp,
		      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
			      (flags & STORE_FILE_NOFOLLOW ? O_NOFOLLOW : 0),
		      (mode_t)mode);
	if (fd < 0)
		return -1;
	r->fp = fdopen(fd, "w");
	if (!r->fp) {
		int e = errno;
		close(fd);
		unlink(r->tmp);
		errno = e;
		return -1;
	}
	return 0;
}

void store_file_abort(store_file_t *r)
{
	int e = errno;
	if (r->fp)
		fclose(r->fp);
	r->fp = NULL;
	unlink(r->tmp);
	errno = e;
}

int store_file_commit(store_file_t *r)
{
	int sync = !(r->flags & STORE_FILE_NOSYNC);
	int bad = fflush(r->fp) || ferror(r->fp) || (sync && fsync(fileno(r->fp)));
	int e = errno;
	if (fclose(r->fp) && !bad) {
		bad = 1;
		e = errno;
	}
	r->fp = NULL;
	if (!bad && rename(r->tmp, r->path)) {
		bad = 1;
		e = errno;
	}
	if (bad) {
		unlink(r->tmp);
		errno = e;
		return -1;
	}
	/* the rename itself survives a crash once the directory is synced */
	return sync ? store_file_sync_dir(r->path) : 0;
}

int store_file_replace(const char *path, const void *data, size_t n, unsigned mode,
		       unsigned flags)
{
	store_file_t r;
	if (store_file_begin(&r, path, NULL, mode, flags))
		return -1;
	if (n && fwrite(data, 1, n, r.fp) != n) {
		store_file_abort(&r);
		return -1;
	}
	return store_file_commit(&r);
}

int store_file_rename(const char *from, const char *to, unsigned flags)
{
	if (rename(from, to))
		return -1;
	return flags & STORE_FILE_NOSYNC ? 0 : store_file_sync_dir(to);
}
