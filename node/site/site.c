/* A mirror as a static site (site.h): each changed record's documents,
 * the browse pages, the manifest and the alias map, written under OUT.
 *
 * Layout (URL path -> file, docs/site.md; deploy/nginx.conf maps them):
 *   /pith/{BODY}                  rec/XY/BODY.html
 *   /pith/{BODY}.json             rec/XY/BODY.json
 *   /pith/{BODY}/bundle.json      rec/XY/BODY.bundle.json (and state.json)
 *   /.well-known/pith/{BODY}/bundle.json   the same file
 *   /api/pith-number/{BODY}/events.json, graph.json
 *                                 rec/XY/BODY.events.json, BODY.graph.json
 *   /, /pith/, /api/records       index.html, pith/index.html, api/records/index.json
 *   ...?after=N                   pith/after/N.html, api/records/after/N.json
 *   /pith-mirrors.json, /pith-signing-key.json
 * XY: the body's first two characters. Each file stored once: FILE.gz
 * for RENDER_GZIP_MIN bytes or more, else FILE. The registry's six
 * documents only: pithd's JSON-LD and BibTeX are the node's (docs/site.md,
 * "Six files a record"). */
#include "site.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idmap.h"
#include "log.h"
#include "render.h"
#include "site_int.h"
#include "store_file.h"
#include "store_pool.h"

/* ---- files ----------------------------------------------------------------------------- */

static int mkdirs(site_t *s, const char *path)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s", path);
	for (char *q = p + strlen(s->dir) + 1; *q; q++) {
		if (*q != '/')
			continue;
		*q = 0;
		if (mkdir(p, 0755) && errno != EEXIST)
			return pith_err_set(s->err, PITH_EIO, "site: cannot create %s: %s", p, strerror(errno));
		*q = '/';
	}
	return 0;
}

/* Whether path holds exactly data[0..n). */
static int same_bytes(site_t *s, const char *path, const uint8_t *data, size_t n)
{
	struct stat sb;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	int same = 0;
	if (!fstat(fd, &sb) && (size_t)sb.st_size == n && !pith_buf_reserve(&s->old, n + 1)) {
		size_t got = 0;
		while (got < n) {
			ssize_t k = read(fd, s->old.data + got, n - got);
			if (k <= 0)
				break;
			got += (size_t)k;
		}
		same = got == n && (!n || !memcmp(s->old.data, data, n)); /* data may be NULL when n is 0 */
	}
	close(fd);
	return same;
}

/* Writes path by a temporary file and a rename (store_file.h): a reader
 * sees the old bytes or the new ones. Not synced: the tree is made again
 * from the store (docs/site.md). */
static int put_raw(site_t *s, const char *path, const uint8_t *data, size_t n)
{
	store_file_t out;
	int rc = store_file_begin(&out, path, ".tmp~", 0644, STORE_FILE_NOSYNC);
	if (rc && errno == ENOENT && !mkdirs(s, path))
		rc = store_file_begin(&out, path, ".tmp~", 0644, STORE_FILE_NOSYNC);
	if (rc)
		return pith_err_set(s->err, PITH_EIO, "site: cannot write %s.tmp~: %s", path,
				    strerror(errno));
	if (n && fwrite(data, 1, n, out.fp) != n) {
		store_file_abort(&out);
		rc = -1;
	}
	if (rc || store_file_commit(&out))
		return pith_err_set(s->err, PITH_EIO, "site: cannot write %s: %s", path,
				    strerror(errno));
	s->s.written++;
	s->s.bytes += n;
	return 0;
}

void site_drop(site_t *s, const char *path)
{
	if (!unlink(path))
		s->s.deleted++;
}

/* OUT/rel gets data[0..n), stored once (docs/site.md): as OUT/rel.gz, its
 * gzip, when the server sends it compressed (RENDER_GZIP_MIN bytes or
 * more; nginx's gzip_static always, with gunzip for the clients that take
 * no gzip), else as OUT/rel itself; the other form is removed. Nothing is
 * written when the file holds those bytes already. The tree's own notes
 * (.pith-site/) are always plain. */
int site_put(site_t *s, const char *rel, const uint8_t *data, size_t n)
{
	char path[4096], gzp[4100];
	snprintf(path, sizeof(path), "%s/%s", s->dir, rel);
	snprintf(gzp, sizeof(gzp), "%s.gz", path);
	int meta = !strncmp(rel, SITE_META_DIR "/", sizeof(SITE_META_DIR));
	const char *keep = path, *other = gzp;
	if (!meta && n >= RENDER_GZIP_MIN) {
		if (render_gzip(&s->gz, data, n))
			return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
		data = s->gz.data;
		n = s->gz.len;
		keep = gzp;
		other = path;
	}
	if (same_bytes(s, keep, data, n)) {
		s->s.unchanged++;
		return 0;
	}
	/* the new form first, then the old one goes: a reader gets the old
	 * bytes or the new ones, never none */
	if (put_raw(s, keep, data, n))
		return -1;
	if (!meta && !s->fresh)
		site_drop(s, other);
	return 0;
}

static void drop_rel(site_t *s, const char *rel)
{
	char path[4096], gzp[4100];
	snprintf(path, sizeof(path), "%s/%s", s->dir, rel);
	snprintf(gzp, sizeof(gzp), "%s.gz", path);
	site_drop(s, gzp);
	site_drop(s, path);
}

/* Reads OUT/rel into out (reset first). 0; 1 if absent; -1 (errno set)
 * if it cannot be read, out of memory included: a read error is never
 * taken for an empty file. */
int site_read_rel(site_t *s, const char *rel, pith_buf_t *out)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", s->dir, rel);
	pith_buf_reset(out);
	FILE *f = fopen(path, "rb");
	if (!f)
		return errno == ENOENT ? 1 : -1;
	char buf[65536];
	size_t k;
	while ((k = fread(buf, 1, sizeof(buf), f)) > 0)
		pith_buf_append(out, buf, k);
	int bad = ferror(f);
	int e = errno;
	fclose(f);
	if (bad || out->oom) {
		pith_buf_reset(out);
		errno = bad ? e : ENOMEM;
		return -1;
	}
	return 0;
}

/* ---- rendering --------------------------------------------------------------------------- */

/* Renders target into OUT/rel. 1 if the server answers 404 for it (the
 * file is removed), 0 when written, -1 on error. */
int site_render_to(site_t *s, const char *target, const char *accept, const char *rel,
		     render_doc_t *out)
{
	render_doc_t d;
	if (render_get(s->r, &(render_req_t){.target = target, .accept = accept}, &d))
		return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory rendering %s", target);
	if (d.status == 404) {
		drop_rel(s, rel);
		return 1;
	}
	if (d.status != 200)
		return pith_err_set(s->err, PITH_EIO, "site: %s: status %d: %.*s", target, d.status,
				    (int)(d.len < 300 ? d.len : 300), (const char *)d.body);
	if (out)
		*out = d; /* its body stays in the context until the next render */
	return site_put(s, rel, d.body, d.len) ? -1 : 0;
}

/* 404.html: the page the node shows a browser for a URL it does not
 * serve, header and all (deploy/nginx.conf's error_page). 0, or -1. */
static int export_error_page(site_t *s)
{
	render_doc_t d;
	if (render_get(s->r, &(render_req_t){.target = "/404.html", .accept = "text/html"}, &d))
		return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory rendering 404.html");
	return site_put(s, "404.html", d.body, d.len) ? -1 : 0;
}

/* A record's documents, side by side with every other record's in the
 * shared directory rec/XY/ of the first two characters of its body (at
 * most 32 x 32 directories however many records); deploy/nginx.conf maps
 * the registry's URLs onto them. /.well-known/pith/{BODY}/bundle.json,
 * the same bytes as /pith/{BODY}/bundle.json (one view), is the same
 * file. Not the JSON-LD nor the .bib (pithd's own, not the registry's:
 * docs/site.md). */
static const struct {
	const char *target, *accept, *ext;
} record_docs[] = {
	{"/pith/%s", "text/html", "html"},
	{"/pith/%s.json", NULL, "json"}, /* the record view: its aliases (below) */
	{"/pith/%s/bundle.json", NULL, "bundle.json"},
	{"/pith/%s/state.json", NULL, "state.json"},
	{"/api/pith-number/%s/events.json", NULL, "events.json"},
	{"/api/pith-number/%s/graph.json", NULL, "graph.json"},
};
#define NRECORD_DOCS (sizeof(record_docs) / sizeof(record_docs[0]))
#define RECORD_VIEW 1

void site_record_rel(const char *body, const char *ext, char *out, size_t cap)
{
	snprintf(out, cap, SITE_RECORD_DIR "/%.2s/%s.%s", body, body, ext);
}

/* Every document of one record; a record the store no longer has loses
 * its files. Touches only this record's files and s's own fields (the
 * run marks the record changed: site_export), so that workers each
 * with their own site_t render records side by side. */
static int export_record(site_t *s, const char *pith)
{
	const char *body = pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	char target[160], rel[160];
	render_doc_t d;
	store_record_info_t info;
	pith_err_t e = {0};
	int gone = store_record_get(s->st, pith, &info, &e) == PITH_ENOTFOUND;
	for (size_t i = 0; i < NRECORD_DOCS; i++) {
		site_record_rel(body, record_docs[i].ext, rel, sizeof(rel));
		if (gone) {
			drop_rel(s, rel);
			continue;
		}
		/* the full number: no prefix scan to find the year */
		snprintf(target, sizeof(target), record_docs[i].target, pith);
		int got = site_render_to(s, target, record_docs[i].accept, rel, &d);
		if (got < 0)
			return got;
		/* the record view lists the aliases */
		if (i == RECORD_VIEW && !got && site_claims_of(s, body, d.body, d.len))
			return -1;
	}
	if (gone)
		s->s.removed++;
	else
		s->s.records++;
	return 0;
}

/* ---- the change log ----------------------------------------------------------------------- */

typedef struct pith_list {
	char (*v)[PITH_NUMBER_LEN + 1];
	size_t n, cap;
} pith_list_t;

static int note_change(void *arg, const store_change_t *ch)
{
	pith_list_t *l = arg;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 1024;
		void *p = realloc(l->v, nc * sizeof(*l->v));
		if (!p)
			return -1;
		l->v = p;
		l->cap = nc;
	}
	memcpy(l->v[l->n++], ch->pith_number, PITH_NUMBER_LEN + 1);
	return 0;
}

/* ---- the records, side by side ------------------------------------------------------------ */

/* Records are independent (each writes only its own files), so N workers
 * take them from one list, each with its own render context, buffers,
 * counters and claims, summed after; the pages, the aliases and the
 * facts, which read every record, come after all of them, on the
 * calling thread. The files do not depend on which worker wrote them. */
typedef struct run {
	const pith_list_t *l;
	const atomic_int *cancel;
	atomic_size_t next;     /* the next record to take */
	atomic_int stop;        /* an error: take no more */
	pthread_mutex_t mu;     /* guards failed and err */
	int failed;
	pith_err_t err;         /* the first error */
} run_t;

typedef struct worker {
	site_t *s;
	site_t own;             /* a thread's (s points here); worker 0 is the run's */
	pith_err_t err;
	run_t *run;
	int ready;              /* its render context was made: it runs */
} worker_t;

static void run_fail(run_t *r, const pith_err_t *e)
{
	pthread_mutex_lock(&r->mu);
	if (!r->failed) {
		r->failed = 1;
		r->err = *e;
	}
	pthread_mutex_unlock(&r->mu);
	atomic_store(&r->stop, 1);
}

/* Renders records until none is left or the run stops; a worker that
 * fails finishes nothing more, the others their current record. */
static void records_work(worker_t *w)
{
	run_t *r = w->run;
	while (!atomic_load(&r->stop)) {
		size_t i = atomic_fetch_add(&r->next, 1);
		if (i >= r->l->n)
			break;
		if (r->cancel && atomic_load(r->cancel)) {
			pith_err_set(w->s->err, PITH_EIO, "site: %s: cancelled after %zu of %zu records",
				     w->s->dir, i, r->l->n);
			run_fail(r, w->s->err);
			break;
		}
		if (export_record(w->s, r->l->v[i])) {
			run_fail(r, w->s->err);
			break;
		}
	}
}

static void *records_thread(void *arg)
{
	worker_t *w = arg;
	if (!w->ready)
		return NULL; /* its share goes to the others */
	records_work(w);
	render_gzip_thread_end(); /* the deflate state lives as long as the thread */
	return NULL;
}

/* Adds what a worker did to the run's counters and claims. */
static int worker_merge(site_t *to, const site_t *from)
{
	to->s.records += from->s.records;
	to->s.removed += from->s.removed;
	to->s.written += from->s.written;
	to->s.unchanged += from->s.unchanged;
	to->s.deleted += from->s.deleted;
	to->s.bytes += from->s.bytes;
	if (!from->nclaims)
		return 0;
	if (to->nclaims + from->nclaims > to->capclaims) {
		size_t nc = to->nclaims + from->nclaims;
		claim_t *p = realloc(to->claims, nc * sizeof(*p));
		if (!p)
			return pith_err_set(to->err, PITH_ENOMEM, "site: out of memory");
		to->claims = p;
		to->capclaims = nc;
	}
	if (from->nclaims) /* none is the usual case: claims may be NULL */
		memcpy(to->claims + to->nclaims, from->claims, from->nclaims * sizeof(*from->claims));
	to->nclaims += from->nclaims;
	return 0;
}

static void worker_release(site_t *w)
{
	free(w->claims);
	pith_buf_release(&w->gz);
	pith_buf_release(&w->old);
	render_free(w->r);
}

/* The records of l in jobs workers (the calling thread one of them; 1:
 * it alone). 0, or the first error (in s->err). */
static int export_records(site_t *s, const pith_list_t *l, const render_opts_t *ro,
			  int jobs, const atomic_int *cancel)
{
	run_t r = {.l = l, .cancel = cancel};
	atomic_init(&r.next, 0);
	atomic_init(&r.stop, 0);
	pthread_mutex_init(&r.mu, NULL);
	if (jobs < 1)
		jobs = 1;
	if ((size_t)jobs > l->n)
		jobs = l->n ? (int)l->n : 1;
	worker_t *w = calloc((size_t)jobs, sizeof(*w));
	if (!w) {
		pthread_mutex_destroy(&r.mu);
		return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
	}
	int rc = 0;
	for (int k = 0; k < jobs; k++) {
		w[k].run = &r;
		if (!k) {
			w[k].s = s;
			continue;
		}
		w[k].s = &w[k].own;
		w[k].own = (site_t){.st = s->st, .err = &w[k].err, .fresh = s->fresh};
		memcpy(w[k].own.dir, s->dir, sizeof(s->dir));
		w[k].ready = !render_new(s->st, ro, &w[k].own.r, &w[k].err);
	}
	/* a thread that cannot be had leaves its share to the others */
	store_pool_t pool;
	store_pool_start(&pool, (size_t)jobs - 1, records_thread, w + 1, sizeof(*w));
	records_work(&w[0]);
	store_pool_join(&pool);
	for (int k = 1; k < jobs; k++) {
		if (!rc && worker_merge(s, &w[k].own))
			rc = -1;
		worker_release(&w[k].own);
	}
	if (r.failed) {
		*s->err = r.err;
		rc = -1;
	}
	free(w);
	pthread_mutex_destroy(&r.mu);
	return rc;
}

/* ---- the run ------------------------------------------------------------------------------ */

/* OUT/.pith-site/NAME as a string (trailing newline dropped), or "". */
static void meta_get(site_t *s, const char *name, char *out, size_t cap)
{
	char rel[128];
	pith_buf_t b = PITH_BUF_INIT;
	snprintf(rel, sizeof(rel), SITE_META_DIR "/%s", name);
	out[0] = 0;
	if (!site_read_rel(s, rel, &b) && b.len < cap) {
		memcpy(out, b.data, b.len);
		out[b.len] = 0;
		out[strcspn(out, "\n")] = 0;
	}
	pith_buf_release(&b);
}

static int meta_put(site_t *s, const char *name, const char *val)
{
	char rel[128], line[512];
	snprintf(rel, sizeof(rel), SITE_META_DIR "/%s", name);
	snprintf(line, sizeof(line), "%s\n", val);
	return site_put(s, rel, (const uint8_t *)line, strlen(line));
}

/* ---- the tree's layout ----------------------------------------------------------------- */

/* The layout OUT/.pith-site/layout names. A tree of another is rendered
 * again, and the files this one has not removed: "2" (issue 55's rec/XY/
 * with eight documents a record) its JSON-LD and .bib files; older (the
 * directories of its own per record, a plain file and a .gz beside it)
 * its record files. */
#define SITE_LAYOUT "3"
#define SITE_LAYOUT_8DOCS "2"

/* Removes path and what is under it (files and directories; no link is
 * followed). Counts the files. */
static void rm_tree(site_t *s, const char *path, int depth)
{
	DIR *d = depth < 8 ? opendir(path) : NULL;
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			char sub[4400];
			snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			struct stat sb;
			if (!lstat(sub, &sb) && S_ISDIR(sb.st_mode))
				rm_tree(s, sub, depth + 1);
			else
				site_drop(s, sub);
		}
		closedir(d);
	}
	rmdir(path);
}

/* The record files of the layout before SITE_LAYOUT: pith/BODY/,
 * pith/BODY.json and .bib (and their .gz), .well-known/pith/ and
 * api/pith-number/. The pages (pith/index.html, pith/after/) stay. */
static void drop_old_layout(site_t *s)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/.well-known/pith", s->dir);
	rm_tree(s, path, 0);
	snprintf(path, sizeof(path), "%s/.well-known", s->dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/api/pith-number", s->dir);
	rm_tree(s, path, 0);
	snprintf(path, sizeof(path), "%s/pith", s->dir);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t k = strspn(de->d_name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
		if (k != PITH_BODY_LEN)
			continue;
		char sub[4400];
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (!de->d_name[k])
			rm_tree(s, sub, 1);
		else
			site_drop(s, sub);
	}
	closedir(d);
}

/* Whether name is a record's file of ext (BODY.EXT or BODY.EXT.gz). */
static int is_doc(const char *name, const char *ext)
{
	size_t k = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), n = strlen(ext);
	return k == PITH_BODY_LEN && name[k] == '.' && !strncmp(name + k + 1, ext, n) &&
	       (!name[k + 1 + n] || !strcmp(name + k + 1 + n, ".gz"));
}

/* The JSON-LD and .bib files of layout SITE_LAYOUT_8DOCS in rec/XY/. */
static void drop_8docs(site_t *s)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/" SITE_RECORD_DIR, s->dir);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strlen(de->d_name) != 2 || de->d_name[0] == '.')
			continue;
		char sub[4400];
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		DIR *x = opendir(sub);
		struct dirent *f;
		while (x && (f = readdir(x))) {
			if (!is_doc(f->d_name, "jsonld") && !is_doc(f->d_name, "bib"))
				continue;
			char file[4700];
			snprintf(file, sizeof(file), "%s/%s", sub, f->d_name);
			site_drop(s, file);
		}
		if (x)
			closedir(x);
	}
	closedir(d);
}

/* Whether dir has no entry. */
static int dir_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *de;
	int empty = 1;
	while (empty && (de = readdir(d)))
		empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
	closedir(d);
	return empty;
}

/* A digest of what every page's header shows (name, operator, contact,
 * search URL), to know when the tree must be rendered again. */
static void page_head_hash(const render_opts_t *ro, char hex[65])
{
	/* the name as the pages show it: none is render's "pith-mirror", as
	 * pithd's site feed names it */
	const char *v[] = {ro->name && *ro->name ? ro->name : "pith-mirror", ro->operator_name ? ro->operator_name : "",
			   ro->contact ? ro->contact : "", ro->search_url ? ro->search_url : ""};
	pith_buf_t b = PITH_BUF_INIT;
	for (size_t i = 0; i < 4; i++)
		pith_buf_append(&b, v[i], strlen(v[i]) + 1);
	uint8_t d[32];
	pith_sha256(b.data ? b.data : (uint8_t *)"", b.len, d);
	pith_hex_encode(d, 32, hex);
	pith_buf_release(&b);
}

/* Whether the alias map may differ from the last run's: a full run, a
 * record gone, or one rendered whose claims' digest is unknown or not the
 * one it had (the map is then merged again: site_aliases.c). Else every
 * record claims what it claimed, and the map and the claims list stay
 * as they are, unread (at 1,000,000 records some 280 MB). */
static int claims_moved(site_t *s, const pith_list_t *l, const uint64_t *was, int full)
{
	if (full || s->pages_all || s->s.removed)
		return 1;
	for (size_t i = 0; i < l->n; i++) {
		uint64_t now = site_claims_digest_of(s, l->v[i] + PITH_NUMBER_LEN - PITH_BODY_LEN);
		if (!now || now != was[i])
			return 1;
	}
	return 0;
}

int site_export(store_t *st, const site_opts_t *o, site_stats_t *stats, pith_err_t *err)
{
	site_t s = {.st = st, .err = err};
	pith_list_t l = {0};
	int rc = 0;
	size_t dl = strlen(o->dir);
	while (dl > 1 && o->dir[dl - 1] == '/')
		dl--;
	if (dl >= sizeof(s.dir) - 200)
		return pith_err_set(err, PITH_EINVAL, "site: the directory name is too long");
	memcpy(s.dir, o->dir, dl);
	s.dir[dl] = 0;
	if (mkdir(s.dir, 0755) && errno != EEXIST)
		return pith_err_set(err, PITH_EIO, "site: cannot create %s: %s", s.dir, strerror(errno));
	s.fresh = dir_empty(s.dir);
	char was_url[512], cursor[32], mirrors_at[64], was_search[512], was_head[80], layout[16];
	meta_get(&s, "layout", layout, sizeof(layout));
	meta_get(&s, "base_url", was_url, sizeof(was_url));
	meta_get(&s, "search_url", was_search, sizeof(was_search));
	meta_get(&s, "page_head", was_head, sizeof(was_head));
	meta_get(&s, "cursor", cursor, sizeof(cursor));
	meta_get(&s, "mirrors_at", mirrors_at, sizeof(mirrors_at));
	/* generated_at of the manifest: when the tree was first exported (its
	 * list, this site and the registry, does not change after) */
	if (!mirrors_at[0])
		pith_time_now(mirrors_at, 0);
	if (!o->base_url && !was_url[0]) {
		rc = pith_err_set(err, PITH_EINVAL,
				  "site: %s: give the URL the tree is served at "
				  "(pithctl --base-url, pithd site_base_url)", s.dir);
		goto out;
	}
	/* the search URL, like the base URL, is the last run's unless given
	 * ("none": no search box from now on) */
	if (o->search_url && *o->search_url)
		snprintf(was_search, sizeof(was_search), "%s", o->search_url);
	if (!strcmp(was_search, "none"))
		was_search[0] = 0;
	render_opts_t ro = {.base_url = o->base_url ? o->base_url : was_url, .name = o->name,
				 .operator_name = o->operator_name, .contact = o->contact,
				 .search_url = was_search, .mirrors_at = mirrors_at,
				 .list_registry = 1, .files_only = 1};
	if ((rc = render_new(st, &ro, &s.r, err)))
		goto out;
	/* every page's header shows these: when one changes, every page again */
	char head[65];
	page_head_hash(&ro, head);
	s.changed = idmap_new();
	s.facts = idmap_new();
	s.claims_new = idmap_new();
	if (!s.changed || !s.facts || !s.claims_new) {
		rc = pith_err_set(err, PITH_ENOMEM, "site: out of memory");
		goto out;
	}
	/* another base URL changes every link: everything again */
	int full = o->full || !cursor[0] || strcmp(was_url, render_base_url(s.r)) ||
		   strcmp(was_head, head) || strcmp(layout, SITE_LAYOUT);
	if (cursor[0] && !strcmp(layout, SITE_LAYOUT_8DOCS))
		drop_8docs(&s);
	else if (cursor[0] && strcmp(layout, SITE_LAYOUT))
		drop_old_layout(&s);
	s.s.from = full ? 0 : strtoull(cursor, NULL, 10);
	s.s.to = store_changes_last(st);
	s.pages_all = full || site_facts_load(&s);
	render_list_cache_t lc = {site_facts_get, site_facts_put, &s};
	render_set_list_cache(s.r, &lc);
	rc = store_changes_each(st, s.s.from, 0, note_change, &l, NULL, err);
	if (rc) {
		rc = rc < 0 ? rc : pith_err_set(err, PITH_ENOMEM, "site: out of memory");
		goto out;
	}
	/* the records to render are changed for the aliases, and the lists
	 * read their new states; was: the digests of what they claimed */
	uint64_t *was = calloc(l.n ? l.n : 1, sizeof(*was));
	if (!was)
		rc = pith_err_set(err, PITH_ENOMEM, "site: out of memory");
	for (size_t i = 0; i < l.n && !rc; i++) {
		uint8_t key[32];
		const char *body = l.v[i] + PITH_NUMBER_LEN - PITH_BODY_LEN;
		site_body_key(body, key);
		uint64_t seq;
		site_fact_take(&s, body, &seq, &was[i]);
		if (idmap_put(s.changed, key, (void *)1) || site_left_add(&s, seq))
			rc = pith_err_set(err, PITH_ENOMEM, "site: out of memory");
	}
	if (!rc)
		rc = export_records(&s, &l, &ro, o->jobs, o->cancel);
	if (!rc)
		rc = site_claims_digest(&s);
	if (!rc && (l.n || full))
		rc = site_pages_export(&s);
	if (!rc && (l.n || full) && claims_moved(&s, &l, was, full))
		rc = site_aliases_export(&s);
	free(was);
	if (!rc && (l.n || full))
		rc = site_facts_save(&s);
	if (!rc)
		rc = site_render_to(&s, "/pith-mirrors.json", NULL, "pith-mirrors.json", NULL) < 0 ||
		     site_render_to(&s, "/pith-signing-key.json", NULL, "pith-signing-key.json", NULL) < 0 ||
		     export_error_page(&s) < 0;
	if (rc)
		goto out;
	/* the cursor last: a run that stopped is redone from the old one */
	snprintf(cursor, sizeof(cursor), "%llu", (unsigned long long)s.s.to);
	if (meta_put(&s, "layout", SITE_LAYOUT) || meta_put(&s, "base_url", render_base_url(s.r)) || meta_put(&s, "mirrors_at", mirrors_at) ||
	    meta_put(&s, "search_url", was_search[0] ? was_search : "none") ||
	    meta_put(&s, "page_head", head) || meta_put(&s, "cursor", cursor))
		rc = -1;
out:
	if (rc > 0 || (rc && !err->code))
		rc = err->code ? err->code : PITH_EIO;
	if (stats)
		*stats = s.s;
	free(l.v);
	free(s.left);
	free(s.claims);
	idmap_free(s.changed);
	site_facts_free(&s);
	idmap_free(s.facts);
	idmap_free(s.claims_new);
	pith_buf_release(&s.gz);
	pith_buf_release(&s.old);
	render_free(s.r);
	return rc;
}
