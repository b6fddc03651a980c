/* The search index's insides, shared by node/search*.c only.
 *
 * search.c       the index file: connections, schema, refresh
 * search_query.c queries: ranked search, cited-by, a hit as JSON
 * search_text.c  its text: the FTS5 tokenizer every connection registers
 *                (every script, search_text.c's head says how) and the
 *                query parser (words, each quoted for FTS5) */
#ifndef PITH_NODE_SEARCH_INT_H
#define PITH_NODE_SEARCH_INT_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "search.h"

typedef struct search_tok search_tok_t;

/* Which file a connection opened: the index at the path may be replaced
 * under a running process (deleted and rebuilt by hand, or by another
 * program), and a connection would go on with the old one. */
typedef struct file_id {
	dev_t dev;
	ino_t ino;
} file_id_t;

struct search {
	sqlite3 *w, *r;      /* writer (refresh; NULL read-only), reader (queries:
			      * opened read-only) */
	search_tok_t *tok;   /* the reader's tokenizer, for the query parser */
	file_id_t w_id, r_id;
	pthread_mutex_t rmu; /* the reader: one query at a time (the loop and
			      * pithd's render threads share it) */
	store_t *st;         /* NULL: read-only (search_open_ro) */
	char path[4096];
	_Atomic uint64_t seq;
	uint64_t scan_min;          /* SCAN_MIN; search_set_scan_min (tests) */
	_Atomic uint64_t pass_done; /* records indexed by the pass running, 0: none */
	atomic_int held;            /* search_hold: no refresh while set */
	/* writer statements */
	sqlite3_stmt *get_id, *ins_rec, *del_fts, *ins_fts, *del_cite, *ins_cite, *set_seq,
		*get_pass, *set_pass, *del_pass, *max_id;
	/* the feeder thread */
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop, kicked, poll_ms, nice;
	atomic_int stopping;
	atomic_int kick_pending; /* a kick not yet taken: later ones need no lock */
};

/* Monotonic microseconds. */
int64_t search_mono_us(void);
/* PITH_EIO with err saying what failed in db. */
int search_db_fail(pith_err_t *err, sqlite3 *db, const char *what);
/* Whether the file at path is no longer the one id names (replaced,
 * deleted). A stat per query or refresh: about a microsecond. */
int search_file_moved(const char *path, const file_id_t *id);
/* The reader connection (read-only: only the writer writes the file) and
 * its tokenizer; an open one is closed first. PITH_ENOTFOUND when there
 * is no file, PITH_EIO when it is not an index of this schema. Under rmu
 * once the index is shared. */
int search_reader_open(search_t *s, pith_err_t *err);

/* The tokenizer's name in the schema, and the arguments it passes on to
 * unicode61 (the schema's tokenize= says the same). */
#define SEARCH_TOKENIZER "pith"
#define SEARCH_TOKENIZER_ARGS "remove_diacritics", "2"

/* An instance of the tokenizer, for the query parser: made on a
 * connection that registered it, freed before that connection closes. */
int search_tok_open(sqlite3 *db, search_tok_t **out, pith_err_t *err);
void search_tok_free(search_tok_t *t);

/* The FTS5 expression of query q into out (NUL-terminated): each word a
 * quoted string (so nothing in q is FTS5 syntax), a cat:/category:/
 * author:/title: word limited to its column, words joined by AND; a word
 * the tokenizer finds no token in (punctuation) left out. Errors, with err
 * saying why in words for the person who typed q: PITH_ETOOBIG (over
 * SEARCH_QUERY_MAX bytes or SEARCH_TERMS_MAX words), PITH_EINVAL (not
 * valid UTF-8, a control character, no word at all). */
int search_match_build(search_tok_t *tok, const char *q, pith_buf_t *out, pith_err_t *err);

#endif
