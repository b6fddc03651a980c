/* A mirror as a static site (site.h): each changed record's documents,
 * the browse pages, the manifest and the alias map, written under OUT.
 *
 * Layout (URL path -> file, docs/site.md):
 *   /pith/{BODY}                  pith/BODY/index.html, pith/BODY/index.jsonld
 *   /pith/{BODY}.json             pith/BODY.json
 *   /pith/{BODY}/bundle.json      pith/BODY/bundle.json (and state.json)
 *   /.well-known/pith/{BODY}/bundle.json
 *   /api/pith-number/{BODY}/events.json, graph.json
 *   /, /pith/, /api/records       index.html, pith/index.html, api/records/index.json
 *   ...?after=N                   pith/after/N.html, api/records/after/N.json
 *   /pith-mirrors.json, /pith-signing-key.json
 * and FILE.gz beside every file of RENDER_GZIP_MIN bytes or more. */
#include "site.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "render.h"
#include "idmap.h"
#include "json.h"
#include "log.h"

#define PAGE_LIMIT 50 /* the browse pages' default page (render_browse.c) */

typedef struct claim {
	char body[PITH_BODY_LEN + 1];
	char key[120];
} claim_t;

typedef struct site {
	store_t *st;
	render_t *r;
	char dir[3072];
	site_stats_t s;
	pith_buf_t gz, old;
	pith_err_t *err;
	claim_t *claims;
	size_t nclaims, capclaims;
	idmap_t *changed;   /* bodies rendered this run */
	idmap_t *facts;     /* body -> fact_t: the list pages' facts (below) */
} site_t;

/* ---- files ----------------------------------------------------------------------------- */

static int mkdirs(site_t *s, const char *path)
{
	char p[4096];
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
		same = got == n && !memcmp(s->old.data, data, n);
	}
	close(fd);
	return same;
}

/* Writes path by a temporary file and a rename: a reader sees the old
 * bytes or the new ones. */
static int put_raw(site_t *s, const char *path, const uint8_t *data, size_t n)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp~", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 && errno == ENOENT && !mkdirs(s, path))
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return pith_err_set(s->err, PITH_EIO, "site: cannot write %s: %s", tmp, strerror(errno));
	size_t done = 0;
	while (done < n) {
		ssize_t k = write(fd, data + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	int bad = done != n;
	if (close(fd))
		bad = 1;
	if (bad || rename(tmp, path)) {
		int e = errno;
		unlink(tmp);
		return pith_err_set(s->err, PITH_EIO, "site: cannot write %s: %s", path, strerror(e));
	}
	s->s.written++;
	s->s.bytes += n;
	return 0;
}

static void drop(site_t *s, const char *path)
{
	if (!unlink(path))
		s->s.deleted++;
}

/* OUT/rel gets data[0..n) if it differs, and OUT/rel.gz its gzip (or no
 * .gz for a short body, as the server sends those plain). */
static int put(site_t *s, const char *rel, const uint8_t *data, size_t n)
{
	char path[4096], gzp[4100];
	snprintf(path, sizeof(path), "%s/%s", s->dir, rel);
	snprintf(gzp, sizeof(gzp), "%s.gz", path);
	if (same_bytes(s, path, data, n)) {
		s->s.unchanged++;
		return 0;
	}
	/* the .gz first: while the two differ, a client that takes gzip
	 * already gets the new bytes. The tree's own notes are not served. */
	int meta = !strncmp(rel, SITE_META_DIR "/", sizeof(SITE_META_DIR));
	if (meta) {
		/* nothing */
	} else if (n >= RENDER_GZIP_MIN) {
		if (render_gzip(&s->gz, data, n))
			return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
		if (put_raw(s, gzp, s->gz.data, s->gz.len))
			return -1;
	} else {
		drop(s, gzp);
	}
	return put_raw(s, path, data, n);
}

/* path as a hard link to from (a link to a temporary name, then a
 * rename). 1 if it already is one, 0 when linked, -1 with errno set. */
static int link_one(site_t *s, const char *from, const char *path)
{
	struct stat a, b;
	char tmp[4200];
	if (stat(from, &a))
		return -1;
	/* rename() of two links to one file does nothing and leaves tmp */
	if (!stat(path, &b) && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
		return 1;
	snprintf(tmp, sizeof(tmp), "%s.tmp~", path);
	unlink(tmp); /* left by a run that stopped */
	int rc = link(from, tmp);
	if (rc && errno == ENOENT && !mkdirs(s, path))
		rc = link(from, tmp);
	if (!rc && rename(tmp, path)) {
		int e = errno;
		unlink(tmp);
		errno = e;
		rc = -1;
	}
	if (rc)
		return -1;
	s->s.written++;
	s->s.linked++;
	return 0;
}

/* OUT/rel gets the bytes of OUT/src, just put with data[0..n), as a hard
 * link to it, and OUT/rel.gz likewise (or no .gz when src has none): a
 * document another URL serves byte for byte costs a directory entry,
 * not a copy (docs/site.md). Where the file system has no hard links,
 * a copy (put). */
static int put_link(site_t *s, const char *src, const char *rel, const uint8_t *data, size_t n)
{
	char from[4096], path[4096], fromgz[4100], gzp[4100];
	snprintf(from, sizeof(from), "%s/%s", s->dir, src);
	snprintf(path, sizeof(path), "%s/%s", s->dir, rel);
	snprintf(fromgz, sizeof(fromgz), "%s.gz", from);
	snprintf(gzp, sizeof(gzp), "%s.gz", path);
	struct stat a, b;
	if (!stat(from, &a) && !stat(path, &b) && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
		s->s.unchanged++;
		return 0;
	}
	/* the .gz first, as put does */
	int rc = n >= RENDER_GZIP_MIN ? link_one(s, fromgz, gzp) : (drop(s, gzp), 0);
	if (rc >= 0)
		rc = link_one(s, from, path);
	if (rc >= 0)
		return 0;
	if (errno == EPERM || errno == EMLINK || errno == EXDEV || errno == ENOTSUP ||
	    errno == ENOSYS)
		return put(s, rel, data, n);
	return pith_err_set(s->err, PITH_EIO, "site: cannot link %s to %s: %s", path, from,
			    strerror(errno));
}

static void drop_rel(site_t *s, const char *rel)
{
	char path[4096], gzp[4100];
	snprintf(path, sizeof(path), "%s/%s", s->dir, rel);
	snprintf(gzp, sizeof(gzp), "%s.gz", path);
	drop(s, gzp);
	drop(s, path);
}

/* Reads OUT/rel into out (reset first). 0, or -1 if absent. */
static int read_rel(site_t *s, const char *rel, pith_buf_t *out)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", s->dir, rel);
	pith_buf_reset(out);
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	char buf[65536];
	size_t k;
	while ((k = fread(buf, 1, sizeof(buf), f)) > 0)
		pith_buf_append(out, buf, k);
	fclose(f);
	return out->oom ? -1 : 0;
}

/* ---- the list facts ---------------------------------------------------------------------- */

/* What the record lists show of each record (render_list_facts_t), kept in
 * OUT/.pith-site/facts between runs so that the list pages, which every
 * change shifts, are rendered again without reading the states of the
 * records that did not change (docs/site.md, "Keeping it current"). A
 * record's entry is dropped when it changes; the lists read its state and
 * put the new one. The file: FACTS_MAGIC, then per record its body and
 * five strings, each a 32-bit little-endian length (FACT_NONE: none) and
 * its bytes. A file that does not parse is ignored: every fact is then
 * read from the states again. */
#define FACTS_MAGIC "pith-site-facts 1\n"
#define FACT_NONE 0xffffffffu
#define FACT_MAX 65536 /* bytes of one string; longer: the file is not ours */
#define NFACTS 5

typedef struct fact {
	char body[PITH_BODY_LEN + 1];
	char *v[NFACTS]; /* into the same allocation; NULL: none */
} fact_t;

static void body_key(const char *body, uint8_t key[32])
{
	memset(key, 0, 32);
	memcpy(key, body, PITH_BODY_LEN);
}

/* A fact of body with these strings (lens[i] == FACT_NONE: NULL). */
static fact_t *fact_new(const char *body, const char *const v[NFACTS], const uint32_t lens[NFACTS])
{
	size_t total = sizeof(fact_t);
	for (int i = 0; i < NFACTS; i++)
		total += lens[i] == FACT_NONE ? 0 : lens[i] + 1;
	fact_t *f = malloc(total);
	if (!f)
		return NULL;
	memcpy(f->body, body, PITH_BODY_LEN);
	f->body[PITH_BODY_LEN] = 0;
	char *p = (char *)(f + 1);
	for (int i = 0; i < NFACTS; i++) {
		f->v[i] = NULL;
		if (lens[i] == FACT_NONE)
			continue;
		memcpy(p, v[i], lens[i]);
		p[lens[i]] = 0;
		f->v[i] = p;
		p += lens[i] + 1;
	}
	return f;
}

static void fact_drop(site_t *s, const char *body)
{
	uint8_t key[32];
	body_key(body, key);
	free(idmap_del(s->facts, key));
}

static int fact_set(site_t *s, fact_t *f)
{
	uint8_t key[32];
	body_key(f->body, key);
	free(idmap_del(s->facts, key));
	if (idmap_put(s->facts, key, f)) {
		free(f);
		return -1;
	}
	return 0;
}

static int facts_get(void *arg, const char *pith, render_list_facts_t *out)
{
	site_t *s = arg;
	uint8_t key[32];
	body_key(pith + PITH_NUMBER_LEN - PITH_BODY_LEN, key);
	const fact_t *f = idmap_get(s->facts, key);
	if (!f)
		return -1;
	*out = (render_list_facts_t){f->v[0], f->v[1], f->v[2], f->v[3], f->v[4]};
	return 0;
}

static void facts_put(void *arg, const char *pith, const render_list_facts_t *in)
{
	site_t *s = arg;
	const char *v[NFACTS] = {in->title, in->first_author, in->primary_cat, in->submitted_at,
				 in->created_at};
	uint32_t lens[NFACTS];
	for (int i = 0; i < NFACTS; i++) {
		size_t n = v[i] ? strlen(v[i]) : 0;
		if (n >= FACT_MAX)
			return; /* not cached: the lists read its state each time */
		lens[i] = v[i] ? (uint32_t)n : FACT_NONE;
	}
	fact_t *f = fact_new(pith + PITH_NUMBER_LEN - PITH_BODY_LEN, v, lens);
	if (f)
		fact_set(s, f); /* out of memory: not cached, nothing wrong */
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads OUT/.pith-site/facts (see above); what does not parse is left
 * out. */
static void facts_load(site_t *s)
{
	pith_buf_t b = PITH_BUF_INIT;
	size_t ml = strlen(FACTS_MAGIC), off = ml, good = 0;
	if (read_rel(s, SITE_META_DIR "/facts", &b) || b.len < ml || memcmp(b.data, FACTS_MAGIC, ml))
		goto out;
	while (off < b.len) {
		const char *v[NFACTS];
		uint32_t lens[NFACTS];
		size_t at = off + PITH_BODY_LEN;
		if (b.len - off < PITH_BODY_LEN)
			break;
		int ok = 1;
		for (int i = 0; ok && i < NFACTS; i++) {
			if (b.len - at < 4) {
				ok = 0;
				break;
			}
			lens[i] = get_u32(b.data + at);
			at += 4;
			v[i] = (const char *)b.data + at;
			if (lens[i] == FACT_NONE)
				continue;
			if (lens[i] >= FACT_MAX || b.len - at < lens[i] ||
			    memchr(v[i], 0, lens[i]))
				ok = 0;
			else
				at += lens[i];
		}
		fact_t *f = ok ? fact_new((const char *)b.data + off, v, lens) : NULL;
		if (!f || fact_set(s, f))
			break;
		good++;
		off = at;
	}
	if (off != b.len)
		log_warn("site: %s/" SITE_META_DIR "/facts: unreadable after %zu records (byte %zu of "
			 "%zu); the lists read the other records' states", s->dir, good, off, b.len);
out:
	pith_buf_release(&b);
}

static int fact_collect(void *arg, const uint8_t id[32], void *val)
{
	(void)id;
	const fact_t ***p = arg;
	*(*p)++ = val;
	return 0;
}

static int fact_cmp(const void *a, const void *b)
{
	return strcmp((*(const fact_t *const *)a)->body, (*(const fact_t *const *)b)->body);
}

/* Writes the facts, sorted by body (the same facts, the same bytes). */
static int facts_save(site_t *s)
{
	size_t n = idmap_count(s->facts);
	const fact_t **v = malloc((n ? n : 1) * sizeof(*v)), **p = v;
	if (!v)
		return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
	idmap_each(s->facts, fact_collect, &p);
	qsort(v, n, sizeof(*v), fact_cmp);
	pith_buf_t b = PITH_BUF_INIT;
	pith_buf_puts(&b, FACTS_MAGIC);
	for (size_t i = 0; i < n; i++) {
		pith_buf_append(&b, v[i]->body, PITH_BODY_LEN);
		for (int k = 0; k < NFACTS; k++) {
			uint32_t len = v[i]->v[k] ? (uint32_t)strlen(v[i]->v[k]) : FACT_NONE;
			uint8_t le[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
					 (uint8_t)(len >> 24)};
			pith_buf_append(&b, le, 4);
			if (v[i]->v[k])
				pith_buf_append(&b, v[i]->v[k], len);
		}
	}
	free(v);
	int rc = b.oom ? pith_err_set(s->err, PITH_ENOMEM, "site: out of memory")
		       : put(s, SITE_META_DIR "/facts", b.data, b.len);
	pith_buf_release(&b);
	return rc;
}

static int fact_free(void *arg, const uint8_t id[32], void *val)
{
	(void)arg;
	(void)id;
	free(val);
	return 0;
}

/* ---- rendering --------------------------------------------------------------------------- */

/* Renders target into OUT/rel. 1 if the server answers 404 for it (the
 * file is removed), 0 when written, -1 on error. */
static int render_to(site_t *s, const char *target, const char *accept, const char *rel,
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
	return put(s, rel, d.body, d.len) ? -1 : 0;
}

/* 404.html: the page the node shows a browser for a URL it does not
 * serve, header and all (deploy/nginx.conf's error_page). 0, or -1. */
static int export_error_page(site_t *s)
{
	render_doc_t d;
	if (render_get(s->r, &(render_req_t){.target = "/404.html", .accept = "text/html"}, &d))
		return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory rendering 404.html");
	return put(s, "404.html", d.body, d.len) ? -1 : 0;
}

static int claim_add(site_t *s, const char *body, const char *key)
{
	if (!key || !*key || strlen(key) >= sizeof(s->claims[0].key))
		return 0;
	/* nginx map keys are quoted: leave out what would need escaping */
	for (const char *p = key; *p; p++)
		if (*p <= ' ' || *p == '"' || *p == '\\' || *p == ';' || *p == '{' || *p == '}' ||
		    *p == '$' || (unsigned char)*p >= 0x7f)
			return 0;
	if (s->nclaims == s->capclaims) {
		size_t nc = s->capclaims ? 2 * s->capclaims : 1024;
		claim_t *p = realloc(s->claims, nc * sizeof(*p));
		if (!p)
			return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
		s->claims = p;
		s->capclaims = nc;
	}
	claim_t *c = &s->claims[s->nclaims++];
	snprintf(c->body, sizeof(c->body), "%s", body);
	snprintf(c->key, sizeof(c->key), "%s", key);
	return 0;
}

/* The alias paths of a record, from its record view (the body just
 * rendered): its short number and the arXiv ids and DOI it is known by. */
static int claims_of(site_t *s, const char *body, const uint8_t *view, size_t n)
{
	json_doc_t *d = NULL;
	pith_err_t e = {0};
	json_limits_t lim = {64u << 20, JSON_MAX_DEPTH_DEFAULT, JSON_MAX_INT_DIGITS};
	int rc = 0;
	char short8[9]; /* the short number's 8 characters */
	snprintf(short8, sizeof(short8), "%.8s", body);
	rc = claim_add(s, body, short8); /* also listed as pith_short_8 when a bundle lists aliases */
	if (rc || json_parse(&d, view, n, &lim, &e))
		return rc;
	const json_value_t *al = json_get_type(json_doc_root(d), "aliases", JSON_ARRAY);
	for (size_t i = 0; !rc && al && i < al->len; i++) {
		const char *k = json_get_str(al->u.items[i], "alias_kind");
		const char *v = json_get_str(al->u.items[i], "alias_value");
		if (!k || !v || (strcmp(k, "arxiv") && strcmp(k, "arxiv_version") && strcmp(k, "doi") &&
				 strncmp(k, "pith_short_", 11)))
			continue;
		rc = claim_add(s, body, v); /* nginx compares map keys without case */
	}
	json_doc_free(d);
	return rc;
}

/* same: the earlier document whose bytes this one has (the same view:
 * render_view_run answers both bundle routes with view_bundle), written as
 * a hard link to it; -1 for none. */
static const struct {
	const char *target, *accept, *rel;
	int same;
} record_docs[] = {
	{"/pith/%s", "text/html", "pith/%s/index.html", -1},
	{"/pith/%s", "application/ld+json", "pith/%s/index.jsonld", -1},
	{"/pith/%s.json", NULL, "pith/%s.json", -1},
	{"/pith/%s/bundle.json", NULL, "pith/%s/bundle.json", -1},
	{"/.well-known/pith/%s/bundle.json", NULL, ".well-known/pith/%s/bundle.json", 3},
	{"/pith/%s/state.json", NULL, "pith/%s/state.json", -1},
	{"/api/pith-number/%s/events.json", NULL, "api/pith-number/%s/events.json", -1},
	{"/api/pith-number/%s/graph.json", NULL, "api/pith-number/%s/graph.json", -1},
	{"/pith/%s.bib", NULL, "pith/%s.bib", -1},
};
#define NRECORD_DOCS (sizeof(record_docs) / sizeof(record_docs[0]))

/* Every document of one record; a record the store no longer has loses
 * its files. Touches only this record's files and s's own fields (the
 * run marks the record changed: site_export), so that workers each
 * with their own site_t render records side by side. */
static int export_record(site_t *s, const char *pith)
{
	const char *body = pith + PITH_NUMBER_LEN - PITH_BODY_LEN;
	char target[160], rel[NRECORD_DOCS][160];
	render_doc_t d;
	int got[NRECORD_DOCS]; /* render_to's answer per document */
	store_record_info_t info;
	pith_err_t e = {0};
	int gone = store_record_get(s->st, pith, &info, &e) == PITH_ENOTFOUND;
	for (size_t i = 0; i < NRECORD_DOCS; i++) {
		snprintf(rel[i], sizeof(rel[i]), record_docs[i].rel, body);
		int same = record_docs[i].same;
		if (gone || (same >= 0 && got[same])) {
			drop_rel(s, rel[i]);
			got[i] = 1;
			continue;
		}
		if (same >= 0) {
			/* d is still the render of document same: it is the one
			 * before */
			assert((size_t)same + 1 == i);
			if (put_link(s, rel[same], rel[i], d.body, d.len))
				return -1;
			got[i] = 0;
			continue;
		}
		/* the full number: no prefix scan to find the year */
		snprintf(target, sizeof(target), record_docs[i].target, pith);
		got[i] = render_to(s, target, record_docs[i].accept, rel[i], &d);
		if (got[i] < 0)
			return got[i];
		/* the record view lists the aliases */
		if (i == 2 && !got[i] && claims_of(s, body, d.body, d.len))
			return -1;
	}
	if (gone) {
		s->s.removed++;
		char dir[3300];
		snprintf(dir, sizeof(dir), "%s/pith/%s", s->dir, body);
		rmdir(dir);
	} else {
		s->s.records++;
	}
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

/* ---- the browse pages --------------------------------------------------------------------- */

/* The "next" cursor of an /api/records page, or 0. */
static uint64_t records_next(const uint8_t *p, size_t n)
{
	json_doc_t *d = NULL;
	pith_err_t e = {0};
	json_limits_t lim = {64u << 20, JSON_MAX_DEPTH_DEFAULT, JSON_MAX_INT_DIGITS};
	uint64_t next = 0;
	if (json_parse(&d, p, n, &lim, &e))
		return 0;
	const char *v = json_get_str(json_doc_root(d), "next");
	if (v)
		next = strtoull(v, NULL, 10);
	json_doc_free(d);
	return next;
}

/* Removes the files of dir (relative) that are not in keep (cursors). */
static void prune_pages(site_t *s, const char *rel, const char *ext, idmap_t *keep)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", s->dir, rel);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		uint64_t cur = strtoull(de->d_name, &end, 10);
		if (de->d_name[0] < '0' || de->d_name[0] > '9' || strncmp(end, ext, strlen(ext)))
			continue;
		uint8_t key[32];
		idmap_key_u64(cur, key);
		if (idmap_get(keep, key))
			continue;
		char f[4400];
		snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
		drop(s, f);
	}
	closedir(d);
}

/* "/", and the chain of record list pages (HTML and JSON) the "next"
 * links of the first page lead to: one file per cursor. Pages of other
 * cursors or limits are not static (docs/site.md). */
static int export_pages(site_t *s)
{
	char target[128], rel[128];
	render_doc_t d;
	if (render_to(s, "/", NULL, "index.html", NULL) < 0 ||
	    render_to(s, "/pith/", NULL, "pith/index.html", NULL) < 0 ||
	    render_to(s, "/api/records", NULL, "api/records/index.json", &d) < 0)
		return -1;
	s->s.pages += 3;
	uint64_t next = records_next(d.body, d.len);
	idmap_t *keep = idmap_new();
	if (!keep)
		return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
	int rc = 0;
	while (!rc && next) {
		uint8_t key[32];
		idmap_key_u64(next, key);
		if (idmap_put(keep, key, (void *)1)) {
			rc = pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
			break;
		}
		snprintf(target, sizeof(target), "/pith/?after=%llu&limit=%d", (unsigned long long)next,
			 PAGE_LIMIT);
		snprintf(rel, sizeof(rel), "pith/after/%llu.html", (unsigned long long)next);
		if (render_to(s, target, NULL, rel, NULL) < 0) {
			rc = -1;
			break;
		}
		snprintf(target, sizeof(target), "/api/records?after=%llu", (unsigned long long)next);
		snprintf(rel, sizeof(rel), "api/records/after/%llu.json", (unsigned long long)next);
		if (render_to(s, target, NULL, rel, &d) < 0) {
			rc = -1;
			break;
		}
		s->s.pages += 2;
		next = records_next(d.body, d.len);
	}
	if (!rc) {
		prune_pages(s, "pith/after", ".html", keep);
		prune_pages(s, "api/records/after", ".json", keep);
	}
	idmap_free(keep);
	return rc;
}

/* ---- the alias map ------------------------------------------------------------------------ */

static int claim_cmp(const void *a, const void *b)
{
	const claim_t *x = a, *y = b;
	int r = strcmp(x->key, y->key);
	return r ? r : strcmp(x->body, y->body);
}

/* Keeps the claims of the records not rendered this run (from the last
 * run's list), adds this run's, and writes the list and the nginx map:
 * one line per key that names one record (a key two records claim is
 * ambiguous, as the server's resolver says; it is left out). */
static int export_aliases(site_t *s)
{
	pith_buf_t b = PITH_BUF_INIT, m = PITH_BUF_INIT;
	int rc = 0;
	if (!read_rel(s, SITE_META_DIR "/claims", &b)) {
		pith_buf_cstr(&b);
		char *save = NULL;
		for (char *line = strtok_r((char *)b.data, "\n", &save); line && !rc;
		     line = strtok_r(NULL, "\n", &save)) {
			char *sp = strchr(line, ' ');
			if (!sp || sp - line != PITH_BODY_LEN)
				continue;
			uint8_t key[32] = {0};
			memcpy(key, line, PITH_BODY_LEN);
			if (idmap_get(s->changed, key))
				continue;
			*sp = 0;
			rc = claim_add(s, line, sp + 1);
		}
	}
	if (rc)
		goto out;
	if (s->nclaims) /* none: claims is NULL, which qsort may not be given */
		qsort(s->claims, s->nclaims, sizeof(*s->claims), claim_cmp);
	pith_buf_reset(&b);
	pith_buf_puts(&m, "# generated by pithctl export --site: alias -> record body\n");
	for (size_t i = 0; i < s->nclaims; i++) {
		const claim_t *c = &s->claims[i];
		pith_buf_printf(&b, "%s %s\n", c->body, c->key);
		if (i && !strcmp(s->claims[i - 1].key, c->key) && !strcmp(s->claims[i - 1].body, c->body))
			continue;
		int others = (i && !strcmp(s->claims[i - 1].key, c->key)) ||
			     (i + 1 < s->nclaims && !strcmp(s->claims[i + 1].key, c->key) &&
			      strcmp(s->claims[i + 1].body, c->body));
		if (!others)
			pith_buf_printf(&m, "\"%s\" %s;\n", c->key, c->body);
	}
	if (b.oom || m.oom) {
		rc = pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
		goto out;
	}
	if (put(s, SITE_META_DIR "/claims", b.data, b.len)) {
		rc = -1;
		goto out;
	}
	uint64_t w = s->s.written;
	if (put(s, SITE_ALIAS_MAP, m.data, m.len))
		rc = -1;
	s->s.aliases_changed = s->s.written > w;
out:
	pith_buf_release(&b);
	pith_buf_release(&m);
	return rc;
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
	pthread_t thread;
	int started;
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
	records_work(arg);
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
	to->s.linked += from->s.linked;
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
		w[k].own = (site_t){.st = s->st, .err = &w[k].err};
		memcpy(w[k].own.dir, s->dir, sizeof(s->dir));
		/* a thread that cannot be had leaves its share to the others */
		if (render_new(s->st, ro, &w[k].own.r, &w[k].err) ||
		    pthread_create(&w[k].thread, NULL, records_thread, &w[k]))
			continue;
		w[k].started = 1;
	}
	records_work(&w[0]);
	for (int k = 1; k < jobs; k++)
		if (w[k].started)
			pthread_join(w[k].thread, NULL);
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
	if (!read_rel(s, rel, &b) && b.len < cap) {
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
	return put(s, rel, (const uint8_t *)line, strlen(line));
}

/* A digest of what every page's header shows (name, operator, contact,
 * search URL), to know when the tree must be rendered again. */
static void page_head_hash(const render_opts_t *ro, char hex[65])
{
	const char *v[] = {ro->name ? ro->name : "", ro->operator_name ? ro->operator_name : "",
			   ro->contact ? ro->contact : "", ro->search_url ? ro->search_url : ""};
	pith_buf_t b = PITH_BUF_INIT;
	for (size_t i = 0; i < 4; i++)
		pith_buf_append(&b, v[i], strlen(v[i]) + 1);
	uint8_t d[32];
	pith_sha256(b.data ? b.data : (uint8_t *)"", b.len, d);
	pith_hex_encode(d, 32, hex);
	pith_buf_release(&b);
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
	char was_url[512], cursor[32], mirrors_at[64], was_search[512], was_head[80];
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
	if (!s.changed || !s.facts) {
		rc = pith_err_set(err, PITH_ENOMEM, "site: out of memory");
		goto out;
	}
	/* another base URL changes every link: everything again */
	int full = o->full || !cursor[0] || strcmp(was_url, render_base_url(s.r)) ||
		   strcmp(was_head, head);
	s.s.from = full ? 0 : strtoull(cursor, NULL, 10);
	s.s.to = store_changes_last(st);
	if (!full)
		facts_load(&s);
	render_list_cache_t lc = {facts_get, facts_put, &s};
	render_set_list_cache(s.r, &lc);
	rc = store_changes_each(st, s.s.from, 0, note_change, &l, NULL, err);
	if (rc) {
		rc = rc < 0 ? rc : pith_err_set(err, PITH_ENOMEM, "site: out of memory");
		goto out;
	}
	/* the records to render are changed for the aliases, and the lists
	 * read their new states */
	for (size_t i = 0; i < l.n && !rc; i++) {
		uint8_t key[32];
		const char *body = l.v[i] + PITH_NUMBER_LEN - PITH_BODY_LEN;
		body_key(body, key);
		if (idmap_put(s.changed, key, (void *)1))
			rc = pith_err_set(err, PITH_ENOMEM, "site: out of memory");
		fact_drop(&s, body);
	}
	if (!rc)
		rc = export_records(&s, &l, &ro, o->jobs, o->cancel);
	if (!rc && (l.n || full))
		rc = export_pages(&s);
	if (!rc && (l.n || full))
		rc = export_aliases(&s);
	if (!rc && (l.n || full))
		rc = facts_save(&s);
	if (!rc)
		rc = render_to(&s, "/pith-mirrors.json", NULL, "pith-mirrors.json", NULL) < 0 ||
		     render_to(&s, "/pith-signing-key.json", NULL, "pith-signing-key.json", NULL) < 0 ||
		     export_error_page(&s) < 0;
	if (rc)
		goto out;
	/* the cursor last: a run that stopped is redone from the old one */
	snprintf(cursor, sizeof(cursor), "%llu", (unsigned long long)s.s.to);
	if (meta_put(&s, "base_url", render_base_url(s.r)) || meta_put(&s, "mirrors_at", mirrors_at) ||
	    meta_put(&s, "search_url", was_search[0] ? was_search : "none") ||
	    meta_put(&s, "page_head", head) || meta_put(&s, "cursor", cursor))
		rc = -1;
out:
	if (rc > 0 || (rc && !err->code))
		rc = err->code ? err->code : PITH_EIO;
	if (stats)
		*stats = s.s;
	free(l.v);
	free(s.claims);
	idmap_free(s.changed);
	if (s.facts)
		idmap_each(s.facts, fact_free, NULL);
	idmap_free(s.facts);
	pith_buf_release(&s.gz);
	pith_buf_release(&s.old);
	render_free(s.r);
	return rc;
}
