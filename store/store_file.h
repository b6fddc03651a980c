/* Replacing a file atomically: the one place (issue 52) where the tree
 * writes a temporary file, fsyncs it, renames it over its name and fsyncs
 * the directory, so that a reader sees the old bytes or the new ones and
 * a crash after the call leaves the new ones. Every file pithd and
 * pithctl rewrite whole goes through here (the address book, the
 * follower's ETags and feed cursors, pull's ETags, export's bundles, the
 * static site's documents), and the store's own "made beside its place,
 * then renamed in" (store_create).
 *
 * It lives in store/ because store/ is the lowest floor that does I/O
 * (proto/ has none) and store/ needs it itself; node/ and pithctl link
 * pith_store already. A second public header of pith_store, as it is a
 * separate interface: it knows nothing of RocksDB.
 *
 * Functions return 0, or -1 with errno set (the caller words the message:
 * it knows what the file is); nothing is left at the temporary name on
 * failure. */
#ifndef PITH_STORE_FILE_H
#define PITH_STORE_FILE_H

#include <stddef.h>
#include <stdio.h>

/* flags */
#define STORE_FILE_NOSYNC 1u   /* no fsync of the file nor of the directory: a
                                * reader never sees half a file, but a crash
                                * may lose the new bytes (files made again
                                * from the store, such as a static site's) */
#define STORE_FILE_NOFOLLOW 2u /* the temporary name is opened O_NOFOLLOW */

/* A replacement under way: PATH + SUFFIX written, then renamed to PATH. */
typedef struct store_file {
	FILE *fp;       /* write the new contents here */
	unsigned flags;
	char path[4096];
	char tmp[4112];
} store_file_t;

/* Opens PATH+suffix (suffix NULL: ".tmp"), truncated, with mode (before
 * the umask) for the new file. 0 with r->fp open, or -1 (errno; ENOENT
 * when PATH's directory is missing, ENAMETOOLONG when PATH does not fit). */
int store_file_begin(store_file_t *r, const char *path, const char *suffix, unsigned mode,
		     unsigned flags);
/* Flushes, fsyncs, closes, renames onto PATH and fsyncs PATH's directory
 * (none of the syncs with STORE_FILE_NOSYNC). On failure the temporary
 * file is removed. Closes r->fp either way. */
int store_file_commit(store_file_t *r);
/* Gives the replacement up: closes and removes the temporary file. */
void store_file_abort(store_file_t *r);

/* PATH's contents become data[0..n), by the three calls above. */
int store_file_replace(const char *path, const void *data, size_t n, unsigned mode,
		       unsigned flags);

/* rename(from, to), then an fsync of to's directory (unless
 * STORE_FILE_NOSYNC): for a file or directory made whole beside its
 * place by other means (a hard link, a RocksDB database). */
int store_file_rename(const char *from, const char *to, unsigned flags);

/* fsync of the directory that holds path ("." for a bare name). */
int store_file_sync_dir(const char *path);

#endif
