/* The static site's insides, shared by the files of node/site only.
 *
 * site.c         the run (site_export), the files it writes (every one
 *                replaced by rename), each record's documents, the
 *                records rendered side by side
 * site_facts.c   what the record lists show of each record, kept between
 *                runs (the render context's list cache)
 * site_aliases.c the alias map: the short numbers, arXiv ids and DOIs each
 *                record claims, as an nginx map
 * site_pages.c   the browse pages (/, /pith/, /api/records and their
 *                later pages)
 * site_feed.c    the change feed's files (site_feed.h) */
#ifndef PITH_NODE_SITE_INT_H
#define PITH_NODE_SITE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "idmap.h"
#include "ids.h"
#include "render.h"
#include "site.h"
#include "store.h"

typedef struct claim {
	char body[PITH_BODY_LEN + 1];
	char key[120];
} claim_t;

/* One run's state (a worker rendering records side by side has one of
 * its own: site.c). */
typedef struct site {
	store_t *st;
	render_t *r;
	char dir[3072];
	site_stats_t s;
	int fresh;          /* the tree was empty: no old file to remove */
	pith_buf_t gz, old;
	pith_err_t *err;
	claim_t *claims;
	size_t nclaims, capclaims;
	idmap_t *changed;   /* bodies rendered this run */
	idmap_t *facts;     /* body -> fact_t: the list pages' facts (site_facts.c) */
	struct fact **forder; /* the facts read, in the file's order (by body) */
	size_t nforder, capforder;
	int forder_sorted;    /* that order is by body: a save merges, no sort */
	size_t facts_unknown; /* facts read without their claims' digest */
	struct fact **fnew;   /* the facts made this run */
	size_t nfnew, capfnew;
	idmap_t *claims_new;/* body -> the digest of its claims this run (site_aliases.c) */
	int facts_lost;     /* a fact could not be kept: every list page next run */
	int pages_all;      /* render every list page (no facts to tell which) */
	uint64_t *left;     /* the changed records' former change log numbers */
	size_t nleft, capleft;
} site_t;

/* ---- site.c: files and documents ------------------------------------------------------ */
/* Writes OUT/rel.gz (the bytes compressed, when the server would send
 * them so) or OUT/rel, and removes the other, unless it holds those bytes
 * already. 0, or -1 with s->err set. */
int site_put(site_t *s, const char *rel, const uint8_t *data, size_t n);
/* The path, relative to the tree, of a record's document EXT ("json",
 * "state.json"...), stored as it or as it.gz (site_put). */
void site_record_rel(const char *body, const char *ext, char *out, size_t cap);
/* Removes the file at the full path. */
void site_drop(site_t *s, const char *path);
/* Reads OUT/rel into out: 0; 1 if absent; -1 (errno set) if it cannot
 * be read (an error, not an empty file). */
int site_read_rel(site_t *s, const char *rel, pith_buf_t *out);
/* Renders target into OUT/rel. 1 if the server answers 404 for it (the
 * file is removed), 0 when written, -1 on error. out (may be NULL) gets
 * the document. */
int site_render_to(site_t *s, const char *target, const char *accept, const char *rel,
		   render_doc_t *out);

/* ---- site_facts.c: the list facts --------------------------------------------------------- */
/* The idmap key of a record body. */
void site_body_key(const char *body, uint8_t key[32]);
/* Reads OUT/.pith-site/facts into s->facts (a file that does not parse
 * is ignored: -1; 0 when all of it was read) and writes them back. */
int site_facts_load(site_t *s);
int site_facts_save(site_t *s);
/* Forgets a record's facts (it changed): *seq gets the change log number
 * the list pages showed it at, *claims the digest of its alias claims
 * of the last run (each 0: not known). */
void site_fact_take(site_t *s, const char *body, uint64_t *seq, uint64_t *claims);
/* Frees every entry of s->facts (not the map). */
void site_facts_free(site_t *s);
/* The render context's list cache over s->facts (render_list_cache_t). */
int site_facts_get(void *arg, const char *pith, render_list_facts_t *out);
void site_facts_put(void *arg, const char *pith, const render_list_facts_t *in);

/* ---- site_aliases.c: the alias map --------------------------------------------------- */
/* The alias paths of a record, from its record view (the body just
 * rendered): its short number and the arXiv ids and DOI it is known by.
 * 0, or an error with s->err set. */
int site_claims_of(site_t *s, const char *body, const uint8_t *view, size_t n);
/* Sorts s->claims (this run's) and adds each to its record's digest in
 * s->claims_new; site_aliases_export, when it merges, adds the other
 * records' from the map. Before site_aliases_export. */
int site_claims_digest(site_t *s);
/* A record's digest this run (0: unknown, none made). */
uint64_t site_claims_digest_of(site_t *s, const char *body);
/* Writes the nginx map (SITE_ALIAS_MAP) and the claims list (what the map
 * leaves out: the keys several records claim). */
int site_aliases_export(site_t *s);

/* ---- site_pages.c: the browse pages ---------------------------------------------------- */
/* "/" and the record list pages: every page (s->pages_all), or those the
 * changes since s->s.from touch (the newest, and the pages s->left names). */
int site_pages_export(site_t *s);
/* Notes a changed record's former change log number (0: none): its page. */
int site_left_add(site_t *s, uint64_t seq);

#endif
