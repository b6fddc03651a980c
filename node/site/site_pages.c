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

/* "/", and the chain of record list pages (HTML and JSON) the "next"
 * links of the first page lead to: one file per cursor. Pages of other
 * cursors or limits are not static (docs/site.md). */
int site_pages_export(site_t *s)
{
	char target[128], rel[128];
	render_doc_t d;
	if (site_render_to(s, "/", NULL, "index.html", NULL) < 0 ||
	    site_render_to(s, "/pith/", NULL, "pith/index.html", NULL) < 0 ||
	    site_render_to(s, "/api/records", NULL, "api/records/index.json", &d) < 0)
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
