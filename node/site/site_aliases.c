/* The alias map of a static site (site_int.h): the keys (short numbers,
 * arXiv ids, DOIs) that name a record, for nginx to redirect. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "site_int.h"

/* ---- the claims ---------------------------------------------------------------------------- */

/* Whether nginx takes key, quoted, as it is (nothing to escape). */
static int claim_ok(const char *key)
{
	if (!key || !*key || strlen(key) >= sizeof(((claim_t *)0)->key))
		return 0;
	for (const char *p = key; *p; p++)
		if (*p <= ' ' || *p == '"' || *p == '\\' || *p == ';' || *p == '{' || *p == '}' ||
		    *p == '$' || (unsigned char)*p >= 0x7f)
			return 0;
	return 1;
}

static int claim_add(site_t *s, const char *body, const char *key)
{
	/* nginx map keys are quoted: leave out what would need escaping */
	if (!claim_ok(key))
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
int site_claims_of(site_t *s, const char *body, const uint8_t *view, size_t n)
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

static int claim_cmp(const void *a, const void *b)
{
	const claim_t *x = a, *y = b;
	int r = strcmp(x->key, y->key);
	return r ? r : strcmp(x->body, y->body);
}

/* The digest of a record's claims: the sum, modulo 2^64, of FNV-1a 64 of
 * each key it claims (once however often it claims it), 1 if that is 0;
 * 0 is "unknown". A sum, so that it can be added up from the alias map,
 * which lists the claims by key, as well as from a record's own. Kept in
 * s->claims_new as the sum XOR CLAIMS_X (NULL: none yet; CLAIMS_LOST: a
 * sum that would be NULL, unknown from then on). */
#define CLAIMS_X ((uintptr_t)0x9e3779b97f4a7c15ull)
#define CLAIMS_LOST ((void *)(uintptr_t)1)

static uint64_t key_hash(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return h;
}

static int claims_add(site_t *s, const char *body, const char *key)
{
	uint8_t k[32];
	site_body_key(body, k);
	void *v = idmap_del(s->claims_new, k);
	if (v == CLAIMS_LOST)
		return idmap_put(s->claims_new, k, v) ? -1 : 0;
	uintptr_t sum = (v ? (uintptr_t)v ^ CLAIMS_X : 0) + (uintptr_t)key_hash(key);
	v = (void *)(sum ^ CLAIMS_X);
	return idmap_put(s->claims_new, k, v ? v : CLAIMS_LOST) ? -1 : 0;
}

uint64_t site_claims_digest_of(site_t *s, const char *body)
{
	uint8_t k[32];
	site_body_key(body, k);
	void *v = idmap_get(s->claims_new, k);
	if (!v || v == CLAIMS_LOST)
		return 0;
	uint64_t d = (uint64_t)((uintptr_t)v ^ CLAIMS_X);
	return d ? d : 1;
}

int site_claims_digest(site_t *s)
{
	if (s->nclaims) /* none: claims is NULL, which qsort may not be given */
		qsort(s->claims, s->nclaims, sizeof(*s->claims), claim_cmp);
	for (size_t i = 0; i < s->nclaims; i++) {
		const claim_t *c = &s->claims[i];
		if (i && !strcmp(c->key, c[-1].key) && !strcmp(c->body, c[-1].body))
			continue; /* claimed twice by one record */
		if (claims_add(s, c->body, c->key))
			return pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
	}
	return 0;
}

/* ---- the alias map ------------------------------------------------------------------------ */


/* The merge of the last run's claims with this run's, in (key, body)
 * order, and what it writes: the map, one line per key that names one
 * record, and the claims list, only the claims of the keys that name
 * several (what the map leaves out: issue 55, the map is the list of the
 * others, not repeated). */
typedef struct merge {
	pith_buf_t list, map, grp;
	const char *key, *body; /* the item before */
	const char *gkey, *gbody; /* the first of the key's group */
	size_t gbodies;           /* distinct bodies claiming gkey */
} merge_t;

static void group_end(merge_t *m)
{
	/* "\\KEY": nginx unquotes it to \KEY, and map takes a key after a
	 * backslash as the literal string, never as a regular expression
	 * (~...) or a parameter (default, include, ...). A key two records
	 * claim is ambiguous, as the server's resolver says: left out, its
	 * claims kept in the list. */
	if (m->gbodies == 1)
		pith_buf_printf(&m->map, "\"\\\\%s\" %s;\n", m->gkey, m->gbody);
	else
		pith_buf_append(&m->list, m->grp.data, m->grp.len);
	pith_buf_reset(&m->grp);
	m->gbodies = 0;
}

static void merge_item(merge_t *m, const char *key, const char *body)
{
	int same_key = m->key && !strcmp(m->key, key);
	if (same_key && !strcmp(m->body, body))
		return; /* claimed twice by one record */
	if (!same_key) {
		if (m->gbodies)
			group_end(m);
		m->gkey = key;
		m->gbody = body;
	}
	pith_buf_printf(&m->grp, "%s %s\n", body, key);
	m->gbodies++;
	m->key = key;
	m->body = body;
}

static int item_cmp(const char *k1, const char *b1, const char *k2, const char *b2)
{
	int r = strcmp(k1, k2);
	return r ? r : strcmp(b1, b2);
}

/* One of the last run's two files, read line by line from p (each NUL
 * terminated in place): the map ("\\KEY" BODY;) or the claims list
 * (BODY KEY). */
typedef struct cur {
	char *p, *end;
	int map;
	const char *key, *body; /* its next line; key NULL at the end */
} cur_t;

static void cur_next(cur_t *c)
{
	c->key = c->body = NULL;
	while (c->p < c->end) {
		char *line = c->p, *nl = memchr(line, '\n', (size_t)(c->end - line));
		if (!nl)
			nl = c->end;
		*nl = 0;
		c->p = nl + (nl < c->end);
		if (c->map) {
			/* "\\KEY" BODY; as group_end writes it; the comment skipped */
			char *q = strchr(line, ' ');
			if (strncmp(line, "\"\\\\", 3) || !q || q - line < 5 || q[-1] != '"' ||
			    strlen(q + 1) != PITH_BODY_LEN + 1 || q[1 + PITH_BODY_LEN] != ';')
				continue;
			q[-1] = 0;
			q[1 + PITH_BODY_LEN] = 0;
			c->key = line + 3;
			c->body = q + 1;
		} else {
			char *sp = strchr(line, ' ');
			if (!sp || sp - line != PITH_BODY_LEN)
				continue;
			*sp = 0;
			c->key = sp + 1;
			c->body = line;
		}
		if (claim_ok(c->key))
			return;
	}
	c->key = c->body = NULL;
}

/* The last run's claims: its map and its list, merged as read. */
typedef struct old {
	cur_t c[2];
	const char *pkey, *pbody; /* the line before, for the order */
	int ordered;              /* check it */
} old_t;

/* The next of the last run's claims whose record was not rendered this
 * run: 1 with key and body set (and added to its record's digest while
 * some digest read is unknown), 0 at the end, -1 if out of order (files
 * this code did not write), -2 out of memory. */
static int old_next(site_t *s, old_t *o, const char **key, const char **body)
{
	for (;;) {
		cur_t *c = NULL;
		for (int i = 0; i < 2; i++)
			if (o->c[i].key && (!c || item_cmp(o->c[i].key, o->c[i].body, c->key, c->body) < 0))
				c = &o->c[i];
		if (!c)
			return 0;
		const char *k = c->key, *b = c->body;
		cur_next(c);
		if (o->ordered && o->pkey && item_cmp(o->pkey, o->pbody, k, b) > 0)
			return -1;
		o->pkey = k;
		o->pbody = b;
		uint8_t bk[32] = {0};
		memcpy(bk, b, PITH_BODY_LEN);
		if (idmap_get(s->changed, bk))
			continue;
		/* its digest, for the facts, unless every one read is known */
		if ((s->pages_all || s->facts_unknown) && claims_add(s, b, k))
			return -2;
		*key = k;
		*body = b;
		return 1;
	}
}

/* Reads the last run's map and list into bm and bl, and o over them. 0
 * (a file absent: none of its claims), or -1 with s->err set when one
 * cannot be read: taken for empty, the map written would lose the claims
 * of every record not rendered this run. */
static int old_open(site_t *s, old_t *o, pith_buf_t *bm, pith_buf_t *bl, int ordered)
{
	*o = (old_t){.ordered = ordered};
	pith_buf_t *b[2] = {bm, bl};
	const char *rel[2] = {SITE_ALIAS_MAP, SITE_META_DIR "/claims"};
	for (int i = 0; i < 2; i++) {
		o->c[i].map = !i;
		int rc = site_read_rel(s, rel[i], b[i]);
		if (rc < 0)
			return pith_err_set(s->err, errno == ENOMEM ? PITH_ENOMEM : PITH_EIO,
					    "site: cannot read %s/%s: %s", s->dir, rel[i], strerror(errno));
		if (rc || !b[i]->len)
			continue;
		o->c[i].p = (char *)b[i]->data;
		o->c[i].end = o->c[i].p + b[i]->len;
		cur_next(&o->c[i]);
	}
	return 0;
}

/* Writes the list and the map; the map's rewrite is what nginx must
 * reload for. */
static int aliases_write(site_t *s, merge_t *m)
{
	if (site_put(s, SITE_META_DIR "/claims", m->list.data, m->list.len))
		return -1;
	uint64_t w = s->s.written;
	if (site_put(s, SITE_ALIAS_MAP, m->map.data, m->map.len))
		return -1;
	s->s.aliases_changed = s->s.written > w;
	return 0;
}

/* The slow way, for files out of order: their lines (but the records
 * rendered this run) added to this run's claims, all sorted, merged. */
static int aliases_sorted(site_t *s, merge_t *m)
{
	pith_buf_t bm = PITH_BUF_INIT, bl = PITH_BUF_INIT;
	int rc = 0;
	pith_buf_reset(&m->list);
	pith_buf_reset(&m->map);
	pith_buf_reset(&m->grp);
	m->key = m->body = m->gkey = m->gbody = NULL;
	m->gbodies = 0;
	/* the digests again: the first pass added part of the old claims */
	idmap_free(s->claims_new);
	if (!(s->claims_new = idmap_new()) || site_claims_digest(s))
		rc = pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
	old_t o = {0};
	if (!rc)
		rc = old_open(s, &o, &bm, &bl, 0);
	const char *k, *bd;
	int more = 0;
	while (!rc && (more = old_next(s, &o, &k, &bd)) > 0)
		rc = claim_add(s, bd, k);
	if (!rc && more == -2)
		rc = pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
	if (!rc && s->nclaims)
		qsort(s->claims, s->nclaims, sizeof(*s->claims), claim_cmp);
	pith_buf_puts(&m->map, "# generated by pithctl export --site: alias -> record body\n");
	for (size_t i = 0; !rc && i < s->nclaims; i++)
		merge_item(m, s->claims[i].key, s->claims[i].body);
	if (m->gbodies)
		group_end(m);
	if (!rc && (bm.oom || bl.oom || m->list.oom || m->map.oom || m->grp.oom))
		rc = pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
	if (!rc)
		rc = aliases_write(s, m);
	pith_buf_release(&bm);
	pith_buf_release(&bl);
	return rc;
}

/* Keeps the claims of the records not rendered this run (from the last
 * run's map and list, sorted as written: merged line by line, no sort of
 * them), adds this run's, and writes the list and the nginx map. Files
 * out of order are read whole and sorted instead. */
int site_aliases_export(site_t *s)
{
	pith_buf_t bm = PITH_BUF_INIT, bl = PITH_BUF_INIT;
	merge_t m = {PITH_BUF_INIT, PITH_BUF_INIT, PITH_BUF_INIT, NULL, NULL, NULL, NULL, 0};
	int rc = 0;
	/* s->claims sorted by site_claims_digest */
	old_t o;
	if ((rc = old_open(s, &o, &bm, &bl, 1)))
		goto out;
	pith_buf_puts(&m.map, "# generated by pithctl export --site: alias -> record body\n");
	const char *ok = NULL, *ob = NULL;
	int more = old_next(s, &o, &ok, &ob);
	size_t j = 0;
	while (more > 0 || j < s->nclaims) {
		const claim_t *c = j < s->nclaims ? &s->claims[j] : NULL;
		if (more > 0 && (!c || item_cmp(ok, ob, c->key, c->body) <= 0)) {
			merge_item(&m, ok, ob);
			more = old_next(s, &o, &ok, &ob);
		} else {
			merge_item(&m, c->key, c->body);
			j++;
		}
		if (more < 0)
			break;
	}
	if (m.gbodies)
		group_end(&m);
	if (more == -2) {
		rc = pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
		goto out;
	}
	if (more < 0) {
		/* not the order this code writes: every line read and sorted */
		log_warn("site: %s/" SITE_META_DIR "/claims or the alias map is out of order; read whole",
			 s->dir);
		rc = aliases_sorted(s, &m);
		goto out;
	}
	if (bm.oom || bl.oom || m.list.oom || m.map.oom || m.grp.oom) {
		rc = pith_err_set(s->err, PITH_ENOMEM, "site: out of memory");
		goto out;
	}
	rc = aliases_write(s, &m);
out:
	pith_buf_release(&bm);
	pith_buf_release(&bl);
	pith_buf_release(&m.list);
	pith_buf_release(&m.map);
	pith_buf_release(&m.grp);
	return rc;
}
