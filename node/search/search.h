/* The search index: words of titles and author names, categories, and who
 * cites whom, in a SQLite FTS5 file beside the store (DATA/search.sqlite).
 *
 * RocksDB stays the store of record: the index is derived from each
 * record's merged state and can be deleted at any time; it remembers the
 * store's change log sequence number it has indexed up to (table meta),
 * so that a restart resumes where it stopped and a missing or foreign
 * index is rebuilt from the whole log (docs/http.md, "Search").
 *
 * Two SQLite connections: one that writes (search_refresh, on the feeder
 * thread search_start runs, or on the caller's thread in pithctl), and one
 * that reads, opened read-only (search_query, search_cited_by, on the
 * caller's thread: the event loop and the render threads in pithd, one at
 * a time). WAL mode lets the reader see every committed refresh while the
 * writer goes on, and lets readers in other processes (search_open_ro)
 * read beside it. Each connection follows the file at the path: one
 * replaced or deleted under the process is reopened (and, for the writer,
 * rebuilt), not served stale or failing for ever. Words in every script:
 * search_text.c. No libevent: pithctl links this too. */
#ifndef PITH_NODE_SEARCH_H
#define PITH_NODE_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "buf.h"
#include "ids.h"
#include "store.h"

typedef struct search search_t;

/* Bounds on untrusted queries. */
#define SEARCH_QUERY_MAX 256    /* bytes of a query; longer: refused */
#define SEARCH_TERMS_MAX 12     /* words of a query; more: refused */
#define SEARCH_LIMIT_MAX 100    /* hits in one answer; more: cut */
#define SEARCH_OFFSET_MAX 1000  /* offset + limit; deeper: refused */
#define SEARCH_RANKED_MS 50     /* ranking longer than this: answered unranked */
#define SEARCH_BUDGET_MS 200    /* a query running longer is interrupted */

/* Opens (creating if needed) the index at path over st (borrowed; it must
 * outlive the index). An index that cannot be read, has another schema
 * version, or is ahead of st's change log (another store's) is emptied and
 * rebuilt by the next refresh. */
int search_open(const char *path, store_t *st, search_t **out, pith_err_t *err);

/* Opens the index at path read-only, for a reader beside the process
 * that writes it (pithctl search while pithd holds the store): no store,
 * no refresh; search_query, search_cited_by and search_seq (read from the
 * file) work. PITH_ENOTFOUND when there is no index at path, PITH_EIO
 * when it cannot be read or has another schema version. */
int search_open_ro(const char *path, search_t **out, pith_err_t *err);

/* Registers the index's FTS5 tokenizer on a connection opened by other
 * code (tests, tools): the table cannot be read without it. SQLite's
 * result code. */
struct sqlite3;
int search_tokenizer_register(struct sqlite3 *db);

/* Stops the feeder thread (if started), closes. NULL-tolerant. */
void search_free_(search_t *s);
#define search_free(x) do { search_free_(x); (x) = NULL; } while (0)

/* Indexes what changed in the store since the index's sequence number, in
 * transactions of a few thousand records, each saving the sequence reached.
 * When at least half of the store's records (and 20000) are not in the
 * index at all, it first takes every record in one pass over the states in
 * key order (each table block read once, where the change log's order
 * reads one per record), saving its progress in each transaction too.
 * *indexed (may be NULL) gets how many records were (re)indexed. Call it
 * on one thread at a time, and not while the feeder thread runs. */
int search_refresh(search_t *s, uint64_t *indexed, pith_err_t *err);

/* Starts the feeder thread ("pith-search", nice steps below the caller):
 * search_refresh whenever the store's change log moved (checked every
 * poll_ms, or at once after search_kick). */
int search_start(search_t *s, int poll_ms, int nice, pith_err_t *err);
/* A commit happened: the feeder looks now rather than at its next poll.
 * Any thread; cheap. */
void search_kick(search_t *s);

/* The sequence number indexed up to (what a reader can see; for a
 * read-only handle, what the file says, 0 when it cannot be read). */
uint64_t search_seq(search_t *s);

/* hold 1: the feeder indexes nothing more (a refresh running stops after
 * its transaction) until search_hold(s, 0). pithd holds the index while
 * the store is in bulk mode for a catch-up: the catch-up gets the CPU,
 * and the index then takes the backlog in one pass over the states (see
 * search_refresh). Any thread. */
void search_hold(search_t *s, int hold);
int search_held(search_t *s);
/* Records the pass over all the states has indexed so far in this
 * process, 0 when none is running. */
uint64_t search_pass_done(search_t *s);
/* The records missing from the index before a refresh takes them in one
 * pass (default 20000; tests set 1 to force it, UINT64_MAX to never). */
void search_set_scan_min(search_t *s, uint64_t n);

typedef struct search_hit {
	char pith[PITH_NUMBER_LEN + 1];
	const char *title, *authors, *primary_cat, *cats, *submitted_at; /* valid during the call */
	double score; /* bm25: lower is better */
} search_hit_t;

typedef int (*search_hit_fn)(void *arg, const search_hit_t *hit);

/* Ranked search (bm25; a title word weighs 10, an author's 4, a category
 * 2). A query whose ranking would take more than SEARCH_RANKED_MS (a word
 * most records hold) is answered unranked instead: matches newest indexed
 * first, score 0. q: words (UTF-8, split at blanks, Unicode's too), each
 * matched as whole tokens, case and diacritics folded, a CJK word as the
 * run of its characters (quoted: FTS5 syntax in q means nothing); "cat:X"
 * (also "category:X") matches category X only; "author:X" an author's
 * name only, "title:X" the title. Every word must match. Calls fn for
 * hits offset .. offset + limit - 1 (limit cut to SEARCH_LIMIT_MAX);
 * *more (may be NULL) gets 1 when there are hits after them. Errors, each
 * with err saying why in words for whoever typed q: PITH_ETOOBIG (q over
 * SEARCH_QUERY_MAX bytes or SEARCH_TERMS_MAX words, offset + limit over
 * SEARCH_OFFSET_MAX), PITH_EINVAL (q not valid UTF-8, a control character
 * in it, no word in it), PITH_ENOTSUP (no index at the path yet: being
 * rebuilt), PITH_EIO (the index failed twice, the second time on a fresh
 * connection, or the query ran past SEARCH_BUDGET_MS and was
 * interrupted). */
int search_query(search_t *s, const char *q, size_t limit, size_t offset, search_hit_fn fn,
		 void *arg, int *more, pith_err_t *err);

/* Appends hit as one JSON object: pith_number, short_pith_number, title,
 * authors, primary_cat, categories, submitted_at (null when unknown) and
 * score (bm25 in millionths, lower is better). What `pithctl search
 * --json` prints and the control command answers. */
void search_hit_json(const search_hit_t *hit, pith_buf_t *out);

/* Records whose applied citation_signature events name pith (full
 * number), at most limit, by pith number; *total (may be NULL) gets how
 * many there are. */
int search_cited_by(search_t *s, const char *pith, size_t limit, search_hit_fn fn, void *arg,
		    size_t *total, pith_err_t *err);

#endif
