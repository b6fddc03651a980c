/* The list facts of a static site (site_int.h). */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "site_int.h"

/* ---- the list facts ---------------------------------------------------------------------- */

/* What the record lists show of each record (render_list_facts_t), kept in
 * OUT/.pith-site/facts between runs so that the list pages, which every
 * change shifts, are rendered again without reading the states of the
 * records that did not change (docs/site.md, "Keeping it current"). A
 * record's entry is dropped when it changes; the lists read its state and
 * put the new one. Each entry also keeps the change log number the list
 * pages show the record at, so that a run knows which page a changed
 * record leaves (site_pages.c), and the digest of its alias claims
 * (site_aliases.c: 0 unknown), so that a run whose changed records
 * claim what they claimed before leaves the alias map as it is. The
 * file: FACTS_MAGIC, then per record its body, that number and the
 * digest (each 64-bit little-endian) and five strings, each a 32-bit
 * little-endian length (FACT_NONE: none) and its bytes; FACT_UNREAD as
 * the first string's length: only the number (the state was not read, or
 * a string is too long to keep). A file that does not parse is ignored:
 * every fact is then read from the states again, and every list page
 * rendered. */
#define FACTS_MAGIC "pith-site-facts 3\n"
#define FACTS_MAGIC_2 "pith-site-facts 2\n" /* before the digest: read, digests unknown */
#define FACT_UNREAD 0xfffffffeu
#define FACT_NONE 0xffffffffu
#define FACT_MAX 65536 /* bytes of one string; longer: the file is not ours */
#define NFACTS 5

typedef struct fact {
	char body[PITH_BODY_LEN + 1];
	uint64_t seq;    /* the list pages show it at */
	uint64_t claims; /* the digest of its alias claims; 0: unknown */
	int unread;      /* only seq: get does not know it */
	int dead;        /* dropped or replaced: not saved (freed with its list) */
	char *v[NFACTS]; /* into the same allocation; NULL: none */
} fact_t;

void site_body_key(const char *body, uint8_t key[32])
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
	f->seq = 0;
	f->claims = 0;
	f->unread = 0;
	f->dead = 0;
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

void site_fact_take(site_t *s, const char *body, uint64_t *seq, uint64_t *claims)
{
	uint8_t key[32];
	site_body_key(body, key);
	fact_t *f = idmap_del(s->facts, key);
	*seq = f ? f->seq : 0;
	*claims = f ? f->claims : 0;
	if (f)
		f->dead = 1;
}

/* Appends f to a list of facts (*v, *n, *cap). */
static int fact_push(fact_t ***v, size_t *n, size_t *cap, fact_t *f)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 1024;
		fact_t **p = realloc(*v, nc * sizeof(*p));
		if (!p)
			return -1;
		*v = p;
		*cap = nc;
	}
	(*v)[(*n)++] = f;
	return 0;
}

/* Keeps f (read from the file: loaded, else made this run) in its list
 * and the map; a fact of the same body before it is dead. Each fact is in
 * one list, which frees it (site_facts_free). */
static int fact_set(site_t *s, fact_t *f, int loaded)
{
	uint8_t key[32];
	site_body_key(f->body, key);
	if (loaded ? fact_push(&s->forder, &s->nforder, &s->capforder, f)
		   : fact_push(&s->fnew, &s->nfnew, &s->capfnew, f)) {
		free(f);
		return -1;
	}
	fact_t *was = idmap_del(s->facts, key);
	if (was) {
		if (!f->claims)
			f->claims = was->claims; /* the lists read it again: its claims are the same */
		was->dead = 1;
	}
	if (idmap_put(s->facts, key, f)) {
		f->dead = 1;
		return -1;
	}
	return 0;
}

int site_facts_get(void *arg, const char *pith, render_list_facts_t *out)
{
	site_t *s = arg;
	uint8_t key[32];
	site_body_key(pith + PITH_NUMBER_LEN - PITH_BODY_LEN, key);
	const fact_t *f = idmap_get(s->facts, key);
	if (!f || f->unread)
		return -1;
	*out = (render_list_facts_t){f->v[0], f->v[1], f->v[2], f->v[3], f->v[4], f->seq, 0};
	return 0;
}

void site_facts_put(void *arg, const char *pith, const render_list_facts_t *in)
{
	site_t *s = arg;
	const char *v[NFACTS] = {in->title, in->first_author, in->primary_cat, in->submitted_at,
				 in->created_at};
	uint32_t lens[NFACTS];
	int unread = in->unread;
	for (int i = 0; i < NFACTS; i++) {
		size_t n = v[i] ? strlen(v[i]) : 0;
		if (n >= FACT_MAX)
			unread = 1; /* the lists read its state each time */
		lens[i] = v[i] ? (uint32_t)n : FACT_NONE;
	}
	for (int i = 0; unread && i < NFACTS; i++)
		lens[i] = FACT_NONE;
	fact_t *f = fact_new(pith + PITH_NUMBER_LEN - PITH_BODY_LEN, v, lens);
	if (f) {
		f->seq = in->seq;
		f->unread = unread;
		if (fact_set(s, f, 0)) /* out of memory: every list page next run */
			s->facts_lost = 1;
	} else {
		s->facts_lost = 1;
	}
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads OUT/.pith-site/facts (see above); what does not parse is left
 * out. 0 when the whole file was read. */
int site_facts_load(site_t *s)
{
	pith_buf_t b = PITH_BUF_INIT;
	size_t ml = strlen(FACTS_MAGIC), off = ml, good = 0;
	int rc = -1;
	if (site_read_rel(s, SITE_META_DIR "/facts", &b) || b.len < ml)
		goto out;
	s->forder_sorted = 1;
	int v2 = !memcmp(b.data, FACTS_MAGIC_2, ml); /* same length */
	if (!v2 && memcmp(b.data, FACTS_MAGIC, ml))
		goto out;
	size_t head = PITH_BODY_LEN + 8 + (v2 ? 0 : 8);
	while (off < b.len) {
		const char *v[NFACTS];
		uint32_t lens[NFACTS];
		size_t at = off + head;
		if (b.len - off < head + 4)
			break;
		uint64_t seq = get_u64(b.data + off + PITH_BODY_LEN);
		uint64_t claims = v2 ? 0 : get_u64(b.data + off + PITH_BODY_LEN + 8);
		int ok = 1, unread = get_u32(b.data + at) == FACT_UNREAD;
		if (unread) {
			at += 4;
			for (int i = 0; i < NFACTS; i++)
				lens[i] = FACT_NONE;
		}
		for (int i = 0; ok && !unread && i < NFACTS; i++) {
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
		fact_t *f = ok && seq ? fact_new((const char *)b.data + off, v, lens) : NULL;
		if (!f)
			break;
		f->seq = seq;
		f->claims = claims;
		s->facts_unknown += !claims;
		f->unread = unread;
		if (s->nforder && strcmp(s->forder[s->nforder - 1]->body, f->body) >= 0)
			s->forder_sorted = 0;
		if (fact_set(s, f, 1))
			break;
		good++;
		off = at;
	}
	if (off != b.len)
		log_warn("site: %s/" SITE_META_DIR "/facts: unreadable after %zu records (byte %zu of "
			 "%zu); the lists read the other records' states", s->dir, good, off, b.len);
	else
		rc = 0;
out:
	pith_buf_release(&b);
	return rc;
}

static int fact_cmp(const void *a, const void *b)
{
	return strcmp((*(const fact_t *const *)a)->body, (*(const fact_t *const *)b)->body);
}

/* The live facts of list v, in place (the dead freed), sorted by body
 * unless sorted. */
static size_t facts_live(fact_t **v, size_t n, int sorted)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i]->dead)
			free(v[i]);
		else
			v[m++] = v[i];
	}
	if (!sorted && m)
		qsort(v, m, sizeof(*v), fact_cmp);
	return m;
}

static void fact_write(site_t *s, pith_buf_t *b, const fact_t *f)
{
	pith_buf_append(b, f->body, PITH_BODY_LEN);
	uint64_t cl = site_claims_digest_of(s, f->body);
	uint8_t sq[16];
	for (int k = 0; k < 8; k++) {
		sq[k] = (uint8_t)(f->seq >> (8 * k));
		sq[8 + k] = (uint8_t)((cl ? cl : f->claims) >> (8 * k));
	}
	pith_buf_append(b, sq, 16);
	if (f->unread) {
		static const uint8_t un[4] = {0xfe, 0xff, 0xff, 0xff}; /* FACT_UNREAD */
		pith_buf_append(b, un, 4);
		return;
	}
	for (int k = 0; k < NFACTS; k++) {
		uint32_t len = f->v[k] ? (uint32_t)strlen(f->v[k]) : FACT_NONE;
		uint8_t le[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
				 (uint8_t)(len >> 24)};
		pith_buf_append(b, le, 4);
		if (f->v[k])
			pith_buf_append(b, f->v[k], len);
	}
}

/* Writes the facts, sorted by body (the same facts, the same bytes); a
 * record rendered this run with the digest of the claims it made. The
 * facts read (in the file's order, by body) and the few made this run
 * (sorted) are merged: at 1,000,000 records no sort of them all. */
int site_facts_save(site_t *s)
{
	size_t no = facts_live(s->forder, s->nforder, s->forder_sorted);
	size_t nn = facts_live(s->fnew, s->nfnew, 0);
	s->nforder = no;
	s->nfnew = nn;
	pith_buf_t b = PITH_BUF_INIT;
	/* a fact not kept: the numbers are not all known, the next run
	 * renders every list page (the file does not parse) */
	pith_buf_puts(&b, s->facts_lost ? "pith-site-facts lost\n" : FACTS_MAGIC);
	size_t i = 0, j = 0;
	while (i < no || j < nn) {
		int old = j == nn || (i < no && strcmp(s->forder[i]->body, s->fnew[j]->body) < 0);
		fact_write(s, &b, old ? s->forder[i++] : s->fnew[j++]);
	}
	int rc = b.oom ? pith_err_set(s->err, PITH_ENOMEM, "site: out of memory")
		       : site_put(s, SITE_META_DIR "/facts", b.data, b.len);
	pith_buf_release(&b);
	return rc;
}

void site_facts_free(site_t *s)
{
	for (size_t i = 0; i < s->nforder; i++)
		free(s->forder[i]);
	for (size_t i = 0; i < s->nfnew; i++)
		free(s->fnew[i]);
	free(s->forder);
	free(s->fnew);
	s->forder = s->fnew = NULL;
	s->nforder = s->nfnew = 0;
}
