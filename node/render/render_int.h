/* The views' insides, shared by the files of node/render only.
 *
 * render.c        the context, errors, ETags, gzip, routing, the
 *                 documents' dispatch, render_get() (render.h)
 * render_target.c the strict request-target parser (no I/O; unit-tested
 *                 and fuzzed on its own)
 * render_accept.c Accept and Accept-Encoding: weighted lists (fuzzed)
 * render_date.c   HTTP-dates and the notes a document's date is taken from
 * render_doc.c    building JSON documents; a record as the store knows it
 * render_views.c, render_page.c, render_browse.c, render_search.c,
 * render_bib.c    the documents, built from the store: pithd serves them
 *                 and `pithctl export --site` writes them (the same bytes) */
#ifndef PITH_NODE_RENDER_INT_H
#define PITH_NODE_RENDER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ids.h"
#include "json.h"
#include "render.h"

typedef struct render_mirror_entry {
	char name[128];
	char base_url[208];
} render_mirror_entry_t;

/* A render context: who the mirror is, what it links to, and the
 * scratch its views reuse. */
struct render {
	store_t *store;
	struct search *search;
	size_t events_page_max;
	int list_registry;
	int files_only;         /* render_opts_t.files_only */
	int64_t started;        /* render_opts_t.started */
	char name[RENDER_NAME_MAX + 1];          /* render_identity_set */
	char operator_name[RENDER_NAME_MAX + 1]; /* "": not shown */
	char contact[RENDER_CONTACT_MAX + 1];    /* "": not shown */
	char base_url[RENDER_URL_MAX + 1];       /* without a trailing slash */
	char search_url[RENDER_URL_MAX + 1];     /* where the pages' search box
						  * submits (BASE/search); "": none */
	char node_id[72], network_id[72];        /* shown on "/"; "": not */
	void (*about)(void *arg, render_about_t *out);
	void *about_arg;

	render_mirror_entry_t *mirrors;
	size_t nmirrors;
	char mirrors_at[32];    /* when the list last changed: generated_at */
	render_root_t root;     /* render_root_set */
	int has_root;

	render_list_cache_t list_cache;

	/* scratch: the views' (tmp, tmp2), render_get's (body, target) */
	pith_buf_t body, tmp, tmp2;
	render_target_t target;
};

/* ---- render_date.c: the notes ------------------------------------------------------- */
/* The views' notes, any thread: the document's date is that of change
 * log number seq (read now); or, for a record's documents, of the
 * record's latest change (a bundle: its built_at). */
void render_date_note_seq(render_ctx_t *c, uint64_t seq);
void render_date_note_record(render_ctx_t *c, const char *pith);

/* ---- render_doc.c: building documents ------------------------------------------ */
/* A document being built: every helper below sets oom instead of failing,
 * render_jb_finish turns it into a 500. */
typedef struct jb {
	json_doc_t *d;
	int oom;
} render_jb_t;

/* Starts a document; on OOM sets the 500 reply and returns -1. */
int render_jb_begin(render_ctx_t *c, render_jb_t *b);
/* Sends root's canonical bytes (ETag from them), or a 500 if anything
 * failed; frees the document. */
void render_jb_finish(render_ctx_t *c, render_jb_t *b, const json_value_t *root, const char *ctype);
json_value_t *render_jb_chk(render_jb_t *b, json_value_t *v);
/* NULL s gives null. */
json_value_t *render_jb_str(render_jb_t *b, const char *s);
json_value_t *render_jb_int(render_jb_t *b, int64_t v);
json_value_t *render_jb_bool(render_jb_t *b, int v);
json_value_t *render_jb_obj(render_jb_t *b);
json_value_t *render_jb_arr(render_jb_t *b);
/* o[k] = v, linking v (which may belong to another live doc); NULL v gives null. */
void render_jb_set(render_jb_t *b, json_value_t *o, const char *k, const json_value_t *v);
void render_jb_push(render_jb_t *b, json_value_t *a, const json_value_t *v);
/* The context's base URL + fmt formatted with arg. */
json_value_t *render_jb_url(render_jb_t *b, render_t *h, const char *fmt, const char *arg);

/* A record as the store knows it: its merged state, parsed, and the parts
 * the views use (pointers into the state; NULL when absent). */
typedef struct rec {
	json_doc_t *doc;                /* the parsed state */
	const json_value_t *state, *cur;
	const json_value_t *record;     /* canonical_record or NULL */
	const json_value_t *rc;         /* record_created projection or NULL */
	const json_value_t *payload;    /* its payload */
	const json_value_t *receipt;
	const json_value_t *snap;       /* newest graph snapshot projection */
	const json_value_t *graph;      /* its payload's graph_snapshot */
	const json_value_t *paper;      /* graph.paper */
	const json_value_t *source;     /* canonical_record.source */
	const json_value_t *aliases;    /* current.source_aliases */
	char pith[PITH_NUMBER_LEN + 1];
	const char *body;               /* 26 characters, in pith */
	char short_num[14];             /* "pith:" + 8 */
	const char *canon_hex;          /* NULL without a record_created */
	const char *state_sha;
	/* derived aliases when no bundle listed any */
	pith_alias_t derived[6];
	int nderived;
} render_rec_t;

/* Reads and parses the record's state; on failure sets the error reply
 * (404, 500) and returns -1. render_rec_release in every case it returned 0. */
int render_rec_load(render_ctx_t *c, const char *pith, render_rec_t *r);
void render_rec_release(render_rec_t *r);
/* render_rec_load, then render_jb_begin: a view of the record about to be built. On
 * failure the error reply is set, nothing is held, and it returns -1. */
int render_rec_doc_begin(render_ctx_t *c, const char *pith, render_rec_t *r, render_jb_t *b);
/* Entries in one of current's lists. */
size_t render_rec_list_len(const render_rec_t *r, const char *key);
/* An alias value of a kind ("arxiv", "doi"...): the bundle's, or derived
 * from the record when no bundle listed any. */
const char *render_rec_alias(const render_rec_t *r, const char *kind);
const char *render_rec_paper_str(const render_rec_t *r, const char *key);
/* This mirror's URLs of the record's documents. */
json_value_t *render_rec_links(render_jb_t *b, render_t *h, const render_rec_t *r);
/* v's canonical bytes as the body, with its ETag and CORS. */
void render_view_send_json(render_ctx_t *c, const json_value_t *v, const char *ctype);

/* ---- render_page.c: /pith/{ID} ------------------------------------------------------ */
void render_view_page(render_ctx_t *c, const char *pith);
/* Copies s[0..n) into out with each ASCII byte that esc names replaced by
 * its string, the other ASCII controls (and DEL) dropped, invalid UTF-8
 * as U+FFFD, and valid UTF-8 as it is: the escaper of HTML and BibTeX. */
void render_text_escape(pith_buf_t *out, const char *s, size_t n, const char *const esc[128]);
/* HTML-escapes s[0..n) into out (&, <, >, ", '); invalid UTF-8 becomes
 * U+FFFD, controls but line breaks and tabs are dropped. */
void render_html_escape(pith_buf_t *out, const char *s, size_t n);
/* The same for a C string; NULL writes nothing. */
void render_html_text(pith_buf_t *out, const char *s);

/* ---- render_bib.c: for reference managers ----------------------------------------------- */
/* The next author of an authors_text list ("A, B, C"): 1 with s[0..*n)
 * the name and *cursor moved past it; 0 at the end (or cursor at NULL). */
int render_rec_author_next(const char **cursor, const char **s, size_t *n);
/* The record's BibTeX entry (docs/http.md, "BibTeX"), appended to out. */
void render_bib_entry(pith_buf_t *out, render_t *h, const render_rec_t *r);
/* /pith/{ID}.bib: application/x-bibtex; charset=utf-8. */
void render_view_bib(render_ctx_t *c, const char *pith);
/* The citation_* meta tags of the record page (title, one per author,
 * publication date, arXiv id, DOI: those known), for a page's head. */
void render_html_citation_meta(pith_buf_t *b, const render_rec_t *r);

/* ---- render_views.c ------------------------------------------------------------- */
void render_view_record(render_ctx_t *c, const char *pith);
void render_view_bundle(render_ctx_t *c, const char *pith);
void render_view_state(render_ctx_t *c, const char *pith);
void render_view_events(render_ctx_t *c, const char *pith);
void render_view_graph(render_ctx_t *c, const char *pith);
void render_view_mirrors(render_ctx_t *c);
/* /pith-signing-key.json: the registry key block the manifest carries. */
void render_view_signing_key(render_ctx_t *c);
/* GET /api/changes?after=CURSOR&limit=N: the store's change log, at most
 * limit entries (default HTTP_CHANGES_DEFAULT, more is cut to
 * HTTP_CHANGES_MAX). */
#define HTTP_CHANGES_DEFAULT 1000
#define HTTP_CHANGES_MAX 10000
#define HTTP_CHANGES_PATH "/api/changes"
void render_view_changes(render_ctx_t *c);

/* ---- render_byhash.c ------------------------------------------------------------ */
/* /api/event/{EVENT_ID}: the stored event's canonical bytes. */
void render_view_event_by_id(render_ctx_t *c);
/* /api/bundle/{BUNDLE_SHA256}: the bundle while it is its record's newest. */
void render_view_bundle_by_hash(render_ctx_t *c);

/* ---- render_browse.c: pages to browse ---------------------------------------------- */
/* "/": what this mirror is, the records changed last, the search box. */
void render_view_home(render_ctx_t *c);
/* /pith/ (HTML) and /api/records (JSON): every record, newest change
 * first, paged by ?after=CURSOR&limit=N. */
void render_view_records_html(render_ctx_t *c);
void render_view_records_json(render_ctx_t *c);
/* The start of every page for people: render_html_begin writes the doctype and
 * the head up to the title ("TITLE · MIRROR NAME", or the name alone
 * when title is NULL), where a page may add its own meta tags;
 * render_html_body ends the head (one style sheet, readable at 360 px) and
 * writes the header every page has: the mirror's name linking home, its
 * operator and contact, the navigation and the search box (with q as
 * its value; none when the context has no search URL); then <main>.
 * render_html_head is both. */
void render_html_begin(render_ctx_t *c, const char *title);
void render_html_body(render_ctx_t *c, const char *q);
void render_html_head(render_ctx_t *c, const char *title, const char *q);
/* Query parameter key as a count: dflt when absent, cut to max; 400 (and
 * -1) when given twice, not digits, or below min. */
int render_arg_count(render_ctx_t *c, const char *key, size_t dflt, size_t min, size_t max,
		   size_t *out);
/* Ends a page begun with render_html_head (</main>): the ETag, or a 500 on OOM. */
void render_html_done(render_ctx_t *c);

/* ---- render_search.c: /search and /api/search ----------------------------------------- */
void render_view_search_html(render_ctx_t *c);
void render_view_search_json(render_ctx_t *c);

#endif
