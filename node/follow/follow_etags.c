/* The HTTP validator cache (follow_etags.h): the one place that keeps
 * ETags per record, for the follower and `pithctl pull` alike. */
#include "follow_etags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hclient.h"
#include "idmap.h"
#include "store_file.h"
#include "upstream.h"

#define URL_CAP (PITH_URL_MAX + 256) /* bytes of a URL kept, NUL included */

/* An entry and its two strings, in one allocation. */
typedef struct entry {
	follow_etag_t e;
	char body[PITH_BODY_LEN + 1];
} entry_t;

struct follow_etags {
	idmap_t *m; /* the body (zero-padded) -> entry_t */
};

static void key_of(const char *body, uint8_t key[32])
{
	memset(key, 0, 32);
	memcpy(key, body, PITH_BODY_LEN);
}

/* name's body: name itself (PITH_BODY_LEN characters) or the end of a
 * full pith number; NULL when it is neither. */
static const char *body_of(const char *name)
{
	size_t n = strlen(name);
	if (n == PITH_BODY_LEN)
		return name;
	if (n == PITH_NUMBER_LEN && pith_number_is_valid(name))
		return name + PITH_NUMBER_LEN - PITH_BODY_LEN;
	return NULL;
}

follow_etags_t *follow_etags_new(void)
{
	follow_etags_t *c = calloc(1, sizeof(*c));
	if (c && !(c->m = idmap_new())) {
		free(c);
		return NULL;
	}
	return c;
}

static int free_one(void *arg, const uint8_t id[32], void *val)
{
	(void)arg;
	(void)id;
	free(val);
	return 1;
}

void follow_etags_free_(follow_etags_t *c)
{
	if (!c)
		return;
	idmap_each(c->m, free_one, NULL);
	idmap_free(c->m);
	free(c);
}

size_t follow_etags_count(const follow_etags_t *c)
{
	return idmap_count(c->m);
}

const follow_etag_t *follow_etags_get(const follow_etags_t *c, const char *body)
{
	uint8_t key[32];
	key_of(body, key);
	entry_t *en = idmap_get(c->m, key);
	return en ? &en->e : NULL;
}

const char *follow_etags_match(const follow_etags_t *c, const char *body, const char *url)
{
	const follow_etag_t *e = follow_etags_get(c, body);
	return e && !strcmp(e->url, url) ? e->etag : NULL;
}

void follow_etags_drop(follow_etags_t *c, const char *body)
{
	uint8_t key[32];
	key_of(body, key);
	free(idmap_del(c->m, key));
}

int follow_etags_put(follow_etags_t *c, const char *name, const char *etag, const char *url)
{
	const char *body = body_of(name);
	size_t tl = strlen(etag), ul = strlen(url);
	if (!body || !hc_etag_is_ok(etag, tl) || ul >= URL_CAP || strchr(url, ' ') ||
	    strchr(url, '\n'))
		return PITH_EINVAL;
	entry_t *en = malloc(sizeof(*en) + tl + 1 + ul + 1);
	if (!en)
		return PITH_ENOMEM;
	char *t = (char *)(en + 1), *u = t + tl + 1;
	memcpy(t, etag, tl + 1);
	memcpy(u, url, ul + 1);
	snprintf(en->e.name, sizeof(en->e.name), "%s", name);
	memcpy(en->body, body, PITH_BODY_LEN + 1);
	en->e.etag = t;
	en->e.url = u;
	follow_etags_drop(c, en->body);
	uint8_t key[32];
	key_of(en->body, key);
	if (idmap_put(c->m, key, en)) {
		free(en);
		return PITH_ENOMEM;
	}
	return 0;
}

int follow_etags_load(follow_etags_t *c, const char *path)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		return errno == ENOENT ? 0 : -1;
	char line[PITH_NUMBER_LEN + HC_ETAG_MAX + URL_CAP + 8];
	int rc = 0;
	while (fgets(line, sizeof(line), fp)) {
		char *name = strtok(line, " \n"), *etag = strtok(NULL, " \n"), *url = strtok(NULL, " \n");
		if (!name || !etag || !url || strtok(NULL, " \n"))
			continue;
		if (follow_etags_put(c, name, etag, url) == PITH_ENOMEM) {
			errno = ENOMEM;
			rc = -1;
			break;
		}
	}
	fclose(fp);
	return rc;
}

typedef struct list {
	const entry_t **v;
	size_t n;
} list_t;

static int collect(void *arg, const uint8_t id[32], void *val)
{
	(void)id;
	list_t *l = arg;
	l->v[l->n++] = val;
	return 0;
}

static int by_body(const void *a, const void *b)
{
	return strcmp((*(const entry_t *const *)a)->body, (*(const entry_t *const *)b)->body);
}

int follow_etags_save(const follow_etags_t *c, const char *path)
{
	list_t l = {calloc(idmap_count(c->m) + 1, sizeof(*l.v)), 0};
	if (!l.v)
		return -1;
	idmap_each(c->m, collect, &l);
	qsort(l.v, l.n, sizeof(*l.v), by_body);
	store_file_t out;
	int rc = store_file_begin(&out, path, NULL, 0666, 0);
	for (size_t i = 0; !rc && i < l.n; i++)
		if (fprintf(out.fp, "%s %s %s\n", l.v[i]->e.name, l.v[i]->e.etag, l.v[i]->e.url) < 0) {
			store_file_abort(&out);
			rc = -1;
		}
	free(l.v);
	return rc ? -1 : store_file_commit(&out);
}

typedef struct filter_ctx {
	int (*keep)(void *arg, const char *body);
	void *arg;
} filter_ctx_t;

static int filter_one(void *arg, const uint8_t id[32], void *val)
{
	(void)id;
	filter_ctx_t *f = arg;
	entry_t *en = val;
	if (f->keep(f->arg, en->body))
		return 0;
	free(en);
	return 1;
}

void follow_etags_filter(follow_etags_t *c, int (*keep)(void *arg, const char *body), void *arg)
{
	filter_ctx_t f = {keep, arg};
	idmap_each(c->m, filter_one, &f);
}
