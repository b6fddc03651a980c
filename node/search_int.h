/* The search index's insides, shared by node/search*.c only.
 *
 * search.c       the index file: connections, schema, refresh, queries
 * search_text.c  its text: the FTS5 tokenizer every connection registers
 *                (every script, search_text.c's head says how) and the
 *                query parser (words, each quoted for FTS5) */
#ifndef PITH_NODE_SEARCH_INT_H
#define PITH_NODE_SEARCH_INT_H

#include <sqlite3.h>

#include "search.h"

/* The tokenizer's name in the schema, and the arguments it passes on to
 * unicode61 (the schema's tokenize= says the same). */
#define SEARCH_TOKENIZER "pith"
#define SEARCH_TOKENIZER_ARGS "remove_diacritics", "2"

/* An instance of the tokenizer, for the query parser: made on a
 * connection that registered it, freed before that connection closes. */
typedef struct search_tok search_tok_t;
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
