/* The HTTP validator cache: the one place (issue 52) that remembers, per
 * record, the ETag of the last bundle kept and the URL it came from, so
 * that the next request for it is conditional (If-None-Match) and a 304
 * costs neither a download nor a verification. The node's follower
 * (DATA/upstream-etags) and `pithctl pull` (DIR/pull-etags) both keep
 * theirs here; docs/upstream.md describes the two files.
 *
 * On disk: one line per record, "NAME ETAG URL", NAME the record's body
 * (the follower) or its full pith number (pull), written whole through
 * store_file.h. Lines that do not parse are dropped when read (it is only
 * a cache: a lost line costs one download, never a wrong state, as all
 * that is downloaded is verified); of two lines for one record the later
 * wins. Kept beside the store, not in it: it is HTTP metadata about an
 * upstream, not data of the replica.
 *
 * A second public header of pith_follow: a separate interface that
 * pithctl uses without the follower. Not thread-safe: one loop's. */
#ifndef PITH_FOLLOW_ETAGS_H
#define PITH_FOLLOW_ETAGS_H

#include <stddef.h>

#include "ids.h"

typedef struct follow_etag {
	char name[PITH_NUMBER_LEN + 1]; /* as put: the body, or the full pith number */
	const char *etag;               /* a tag hc_etag_is_ok takes */
	const char *url;                /* the URL it answered */
} follow_etag_t;

typedef struct follow_etags follow_etags_t;

/* An empty cache, or NULL when out of memory. */
follow_etags_t *follow_etags_new(void);
/* NULL-tolerant. */
void follow_etags_free_(follow_etags_t *c);
#define follow_etags_free(c) do { follow_etags_free_(c); (c) = NULL; } while (0)

/* Adds the lines of path to c (a missing file adds nothing). 0, or -1
 * with errno set (the file could not be read; ENOMEM). */
int follow_etags_load(follow_etags_t *c, const char *path);
/* Replaces path with every entry of c, sorted by body. 0, or -1 (errno). */
int follow_etags_save(const follow_etags_t *c, const char *path);

/* The entry of the record whose body is body (PITH_BODY_LEN characters),
 * or NULL. Valid until c changes. */
const follow_etag_t *follow_etags_get(const follow_etags_t *c, const char *body);
/* The ETag to send for body's bundle at url: its entry's, if it came from
 * that very URL; else NULL. Valid until c changes. */
const char *follow_etags_match(const follow_etags_t *c, const char *body, const char *url);
/* name's record (a body, or a full pith number) now has etag from url,
 * replacing what it had. 0, PITH_EINVAL (a name, tag or URL not kept) or
 * PITH_ENOMEM. */
int follow_etags_put(follow_etags_t *c, const char *name, const char *etag, const char *url);
/* Forgets body's entry, if any. */
void follow_etags_drop(follow_etags_t *c, const char *body);
size_t follow_etags_count(const follow_etags_t *c);

/* Calls keep(arg, body) for every entry and forgets those it returns 0
 * for. */
void follow_etags_filter(follow_etags_t *c, int (*keep)(void *arg, const char *body), void *arg);

#endif
