/* A mirror as a static site: every document the HTTP views serve for a
 * store, written under a directory in the registry's URL layout, so that
 * any web server, CDN or object store can serve it (docs/site.md). The
 * bytes are rendered by the views themselves (render.h): a file
 * holds what pithd answers for its URL.
 *
 * Incremental: OUT/.pith-site/cursor keeps the change log sequence
 * (store.h) the tree is current to; a run renders only the records
 * changed after it, rewrites a file only when its bytes change, and
 * replaces every file by rename, so that readers see the old file or the
 * new one, never a part. The cursor moves last: a run that stops midway
 * is redone by the next.
 *
 * Each document is stored once: gzip-compressed (FILE.gz) when the server
 * sends it so, else plain; a record's documents lie side by side with
 * other records' in shared directories (SITE_RECORD_DIR), and a URL that
 * answers another's bytes (the bundle under /.well-known/) maps onto the
 * same file (deploy/nginx.conf). */
#ifndef PITH_NODE_SITE_H
#define PITH_NODE_SITE_H

#include <stdatomic.h>
#include <stdint.h>

#include "err.h"
#include "store.h"

typedef struct site_opts {
	const char *dir;       /* OUT: created if missing */
	const char *base_url;  /* the URL the tree is served at (links, manifest);
				* NULL: the last run's */
	const char *name;      /* this mirror's name (NULL: "pith-mirror") */
	const char *operator_name, *contact; /* shown beside it (NULL: not) */
	const char *search_url; /* base URL of a live node whose /search the
				 * pages' search box submits to; NULL or "": the
				 * last run's ("none": no search box). A change of
				 * name, operator, contact or search URL renders
				 * every page again. */
	int full;              /* ignore the cursor: render every record */
	const atomic_int *cancel; /* NULL, or set by another thread to stop the run
				   * after the record being rendered (PITH_EIO,
				   * "cancelled"; the cursor stays where it was) */
	int jobs;              /* threads rendering the records (0 or 1: the
				* calling thread alone); the files are the
				* same bytes whatever the number */
} site_opts_t;

typedef struct site_stats {
	uint64_t from, to;           /* change log: (from, to] was exported */
	uint64_t records;            /* records rendered */
	uint64_t removed;            /* records whose files were removed */
	uint64_t written, unchanged; /* files (each .gz counted too) */
	uint64_t deleted;            /* files removed (stale pages, removed records) */
	uint64_t bytes;              /* bytes written */
	uint64_t pages;              /* browse pages rendered */
	int aliases_changed;         /* the alias map was rewritten: reload the server */
} site_stats_t;

/* Exports the store's documents to o->dir (see above). stats may be NULL.
 * 0, or a negative PITH_E* with err set. Not thread-safe for one dir. */
int site_export(store_t *st, const site_opts_t *o, site_stats_t *stats, pith_err_t *err);

/* The most site_opts_t.jobs that pithctl takes. */
#define SITE_JOBS_MAX 256

/* Where the alias map is, relative to the tree (an nginx map body:
 * `"KEY" BODY;` lines, see deploy/nginx.conf). */
#define SITE_META_DIR ".pith-site"
#define SITE_ALIAS_MAP SITE_META_DIR "/aliases.map"
/* The records' documents: SITE_RECORD_DIR/XY/BODY.EXT(.gz), XY the body's
 * first two characters (docs/site.md). */
#define SITE_RECORD_DIR "rec"

#endif
