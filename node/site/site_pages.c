/* The browse pages of a static site (site_int.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "site_int.h"

#define PAGE_LIMIT 50 /* the browse pages' default page (render_browse.c) */

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
		site_drop(s, f);
	}
	closedir(d);
}

int site_left_add(site_t *s, uint64_t seq)
{
	if (!seq)
		return 0;
	if (s->nleft == s->capleft) {
		size_t nc = s->capleft ? s->capleft * 2 : 256;
		uint64_t *v = realloc(s->left, nc * sizeof(*v));
		if (!v)
			return -1;
		s->left = v;
		s->capleft = nc;
	}
	s->left[s->nleft++] = seq;
	return 0;
}

/* A list page, as render_browse.c pages: the range k holds the records
 * whose latest change is numbered in [k * PAGE_LIMIT + 1, (k + 1) *
 * PAGE_LIMIT]; its URL's cursor is (k + 1) * PAGE_LIMIT + 1. */
static uint64_t page_of(uint64_t seq)
{
	return (seq - 1) / PAGE_LIMIT;
}

/* Renders the list page of range k (not the newest: that is /pith/) into
 * pith/after/N.html and api/records/after/N.json. 0, or -1. */
static int page_export(site_t *s, uint64_t k)
{
	char target[128], rel[128];
	unsigned long long cur = (unsigned long long)((k + 1) * PAGE_LIMIT + 1);
	snprintf(target, sizeof(target), "/pith/?after=%llu&limit=%d", cur, PAGE_LIMIT);
	snprintf(rel, sizeof(rel), "pith/after/%llu.html", cur);
	if (site_render_to(s, target, NULL, rel, NULL) < 0)
		return -1;
	snprintf(target, sizeof(target), "/api/records?after=%llu", cur);
	snprintf(rel, sizeof(rel), "api/records/after/%llu.json", cur);
	if (site_render_to(s, target, NULL, rel, NULL) < 0)
		return -1;
	s->s.pages += 2;
	return 0;
}

/* Removes the files of range k's page (every record on it changed since):
 * each stored as FILE or FILE.gz (site_put), both forms go. */
static void page_drop(site_t *s, uint64_t k)
{
	static const char *const forms[] = {"%s/pith/after/%llu.html", "%s/pith/after/%llu.html.gz",
					    "%s/api/records/after/%llu.json",
					    "%s/api/records/after/%llu.json.gz"};
	char path[4400];
	unsigned long long cur = (unsigned long long)((k + 1) * PAGE_LIMIT + 1);
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		snprintf(path, sizeof(path), forms[i], s->dir, cur);
		site_drop(s, path);
	}
}

static int first_seq(void *arg, const store_change_t *ch)
{
	*(uint64_t *)arg = ch->seq;
	return 1;
}

/* *v: the number of the newest record changed before before (0: from
 * the newest), or 0 when none is; above: the oldest changed after after.
 * 0, or -1 with s->err set when the change log cannot be read (read as
 * "none", a page with records would be removed). */
static int seq_below(site_t *s, uint64_t before, uint64_t *v)
{
	*v = 0;
	return store_changes_each_before(s->st, before, 1, first_seq, v, NULL, s->err) < 0 ? -1 : 0;
}

static int seq_above(site_t *s, uint64_t after, uint64_t *v)
{
	*v = 0;
	return store_changes_each(s->st, after, 1, first_seq, v, NULL, s->err) < 0 ? -1 : 0;
}

static int u64_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The pages the changes since s->s.from touch: the ranges from the one
 * the last run ended in to the newest (the last run's newest page, which
 * was /pith/, becomes a file), the ranges the changed records left (an
 * emptied one loses its files, and the page before it, which linked to
 * it, is rendered again), and /pith/ itself. */
static int pages_touched(site_t *s)
{
	uint64_t top, below, up;
	if (seq_below(s, 0, &top))
		return -1;
	if (!top)
		return 0;
	uint64_t ktop = page_of(top), kfrom = s->s.from ? page_of(s->s.from) : 0;
	for (uint64_t k = kfrom; k < ktop; k++)
		if (site_left_add(s, k * PAGE_LIMIT + 1))
			return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
	/* s->left now holds sequence numbers; make them ranges */
	for (size_t i = 0; i < s->nleft; i++)
		s->left[i] = page_of(s->left[i]);
	if (s->nleft) /* none: left is NULL, which qsort may not be given */
		qsort(s->left, s->nleft, sizeof(*s->left), u64_desc);
	size_t n = s->nleft;
	for (size_t i = 0; i < n; i++) {
		uint64_t k = s->left[i];
		if ((i && k == s->left[i - 1]) || k >= ktop)
			continue;
		if (seq_below(s, (k + 1) * PAGE_LIMIT + 1, &below))
			return -1;
		if (below > k * PAGE_LIMIT) {
			if (page_export(s, k))
				return -1;
			continue;
		}
		page_drop(s, k);
		/* the page before it linked to it: now to the next one with records */
		if (seq_above(s, (k + 1) * PAGE_LIMIT, &up))
			return -1;
		if (up && page_of(up) < ktop) {
			uint64_t ku = page_of(up);
			int done = 0; /* rendered already (the ranges go newest first) */
			for (size_t j = 0; j < i && !done; j++)
				done = s->left[j] == ku;
			if (!done && page_export(s, ku))
				return -1;
		}
	}
	return 0;
}

/* "/", and the chain of record list pages (HTML and JSON) the "next"
 * links of the first page lead to: one file per range (page_of), every
 * one when s->pages_all, else only those the changes touched
 * (pages_touched). Pages of other cursors or limits are not static
 * (docs/site.md). */
int site_pages_export(site_t *s)
{
	char target[128], rel[128];
	render_doc_t d;
	if (site_render_to(s, "/", NULL, "index.html", NULL) < 0 ||
	    site_render_to(s, "/pith/", NULL, "pith/index.html", NULL) < 0 ||
	    site_render_to(s, "/api/records", NULL, "api/records/index.json", &d) < 0)
		return -1;
	s->s.pages += 3;
	if (!s->pages_all)
		return pages_touched(s);
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
		if (site_render_to(s, target, NULL, rel, NULL) < 0) {
			rc = -1;
			break;
		}
		snprintf(target, sizeof(target), "/api/records?after=%llu", (unsigned long long)next);
		snprintf(rel, sizeof(rel), "api/records/after/%llu.json", (unsigned long long)next);
		if (site_render_to(s, target, NULL, rel, &d) < 0) {
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
