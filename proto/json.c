/* Strict JSON parser and DOM. See json.h for the contract; the canonical
 * writer is json_canon.c, and what both share is json_int.h.
 *
 * Why our own parser rather than a library: the canonical bytes depend on
 * details no general-purpose library exposes together (integers of any
 * length kept as text, duplicate keys refused rather than overwritten, lone
 * surrogates refused, Python's float grammar and repr). The parser is also
 * the one piece every untrusted byte goes through first, so we want it
 * small, bounded and fuzzed as a whole. docs/json.md says more. */
#include "json.h"
#include "json_int.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const json_limits_t json_limits_default = {
	JSON_MAX_BYTES_DEFAULT,
	JSON_MAX_DEPTH_DEFAULT,
	JSON_MAX_INT_DIGITS,
};

/* ---- arena ---------------------------------------------------------- */

typedef struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	_Alignas(16) uint8_t data[];
} arena_chunk_t;

struct json_doc {
	arena_chunk_t *chunks;
	json_value_t *root;
};

static void *arena_alloc(json_doc_t *doc, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	arena_chunk_t *c = doc->chunks;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 8192 ? n : 8192;
		if (c && c->cap * 2 > cap && c->cap < (1u << 20))
			cap = c->cap * 2 > n ? c->cap * 2 : n;
		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = doc->chunks;
		doc->chunks = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	return p;
}

json_doc_t *json_doc_new(void)
{
	return calloc(1, sizeof(json_doc_t));
}

static void doc_free(json_doc_t *doc, int wipe)
{
	if (!doc)
		return;
	arena_chunk_t *c = doc->chunks;
	while (c) {
		arena_chunk_t *n = c->next;
		if (wipe)
			explicit_bzero(c, sizeof(*c) + c->used);
		free(c);
		c = n;
	}
	free(doc);
}

void json_doc_free_(json_doc_t *doc)
{
	doc_free(doc, 0);
}

void json_doc_free_wiped_(json_doc_t *doc)
{
	doc_free(doc, 1);
}

json_value_t *json_doc_root(const json_doc_t *doc)
{
	return doc ? doc->root : NULL;
}

void json_doc_set_root(json_doc_t *doc, json_value_t *root)
{
	doc->root = root;
}

static json_value_t *new_value(json_doc_t *doc, json_type_t t)
{
	json_value_t *v = arena_alloc(doc, sizeof(*v));
	if (v) {
		memset(v, 0, sizeof(*v));
		v->type = t;
	}
	return v;
}

static char *arena_strndup(json_doc_t *doc, const char *s, size_t n)
{
	char *p = arena_alloc(doc, n + 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

/* ---- parser ----------------------------------------------------------- */

typedef struct parser {
	json_doc_t *doc;
	uint8_t *p, *start, *end;
	const json_limits_t *lim;
	pith_err_t *err;
	unsigned depth;
	/* scratch stacks for elements of open containers */
	json_value_t **vs;
	size_t vs_len, vs_cap;
	json_member_t *ms;
	size_t ms_len, ms_cap;
	/* small documents never touch the heap for their scratch stacks */
	json_value_t *vs_inline[64];
	json_member_t ms_inline[32];
} parser_t;

static int perr(parser_t *ps, const uint8_t *at, int code, const char *what)
{
	size_t off = (size_t)(at - ps->start);
	if (ps->err) {
		pith_err_set(ps->err, code, "JSON: %s at byte %zu", what, off);
		ps->err->offset = off;
	}
	return code;
}

static inline void skip_ws(parser_t *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
		ps->p++;
}

static int parse_value(parser_t *ps, json_value_t **out);

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if invalid. */
static inline int utf8_seq(const uint8_t *p, const uint8_t *end)
{
	uint8_t c = p[0];
	if (c < 0x80)
		return 1;
	size_t rem = (size_t)(end - p);
	if (c >= 0xC2 && c <= 0xDF) {
		if (rem < 2 || (p[1] & 0xC0) != 0x80)
			return 0;
		return 2;
	}
	if (c >= 0xE0 && c <= 0xEF) {
		if (rem < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
			return 0;
		if (c == 0xE0 && p[1] < 0xA0)
			return 0; /* overlong */
		if (c == 0xED && p[1] >= 0xA0)
			return 0; /* UTF-16 surrogate */
		return 3;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		if (rem < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
		    (p[3] & 0xC0) != 0x80)
			return 0;
		if (c == 0xF0 && p[1] < 0x90)
			return 0; /* overlong */
		if (c == 0xF4 && p[1] >= 0x90)
			return 0; /* above U+10FFFF */
		return 4;
	}
	return 0;
}

size_t json_utf8_len(const uint8_t *p, size_t n)
{
	return n ? (size_t)utf8_seq(p, p + n) : 0;
}

static int hex4(const uint8_t *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		uint8_t c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static uint8_t *put_utf8(uint8_t *w, unsigned cp)
{
	if (cp < 0x80) {
		*w++ = (uint8_t)cp;
	} else if (cp < 0x800) {
		*w++ = (uint8_t)(0xC0 | (cp >> 6));
		*w++ = (uint8_t)(0x80 | (cp & 0x3F));
	} else if (cp < 0x10000) {
		*w++ = (uint8_t)(0xE0 | (cp >> 12));
		*w++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		*w++ = (uint8_t)(0x80 | (cp & 0x3F));
	} else {
		*w++ = (uint8_t)(0xF0 | (cp >> 18));
		*w++ = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
		*w++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		*w++ = (uint8_t)(0x80 | (cp & 0x3F));
	}
	return w;
}

/* 1 for bytes that stand for themselves in a string: printable ASCII
 * other than the quote and the backslash. */
const uint8_t json_plain_ascii[256] = {
#define R4(x) x, x, x, x
#define R16(x) R4(x), R4(x), R4(x), R4(x)
	R16(0), R16(0),                            /* 0x00-0x1F */
	1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20-0x2F: '"' */
	R16(1), R16(1),                            /* 0x30-0x4F */
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50-0x5F: '\\' */
	R16(1), R16(1),                            /* 0x60-0x7F */
	R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0),
#undef R16
#undef R4
};

/* Parses a string starting after its opening quote. The input is our own
 * copy, so the decoded bytes are written in place (decoding never grows)
 * and the closing quote is overwritten with NUL. */
static int parse_string(parser_t *ps, const char **out, size_t *out_len)
{
	uint8_t *p = ps->p, *end = ps->end;
	uint8_t *s = p;
	/* Until the first escape, bytes stay where they are: no copying. */
	p = (uint8_t *)skip_plain(p, end, 0);
	uint8_t *w = p;
	for (;;) {
		/* fast scan over plain ASCII */
		if (w == p) {
			p = (uint8_t *)skip_plain(p, end, 0);
			w = p;
		} else {
			while (p < end && json_plain_ascii[*p])
				*w++ = *p++;
		}
		if (p >= end)
			return perr(ps, p, PITH_ETRUNC, "unterminated string");
		uint8_t c = *p;
		if (c == '"') {
			*w = 0;
			*out = (const char *)s;
			*out_len = (size_t)(w - s);
			ps->p = p + 1;
			return 0;
		}
		if (c < 0x20)
			return perr(ps, p, PITH_EINVAL, "control character in string");
		if (c >= 0x80) {
			int n = utf8_seq(p, end);
			if (!n)
				return perr(ps, p, PITH_EINVAL, "invalid UTF-8");
			memmove(w, p, (size_t)n);
			w += n;
			p += n;
			continue;
		}
		/* backslash */
		if (end - p < 2)
			return perr(ps, p, PITH_ETRUNC, "unterminated escape");
		uint8_t e = p[1];
		switch (e) {
		case '"': *w++ = '"'; p += 2; continue;
		case '\\': *w++ = '\\'; p += 2; continue;
		case '/': *w++ = '/'; p += 2; continue;
		case 'b': *w++ = '\b'; p += 2; continue;
		case 'f': *w++ = '\f'; p += 2; continue;
		case 'n': *w++ = '\n'; p += 2; continue;
		case 'r': *w++ = '\r'; p += 2; continue;
		case 't': *w++ = '\t'; p += 2; continue;
		case 'u': break;
		default:
			return perr(ps, p, PITH_EINVAL, "invalid escape");
		}
		unsigned cp;
		if (end - p < 6)
			return perr(ps, p, PITH_ETRUNC, "truncated \\u escape");
		if (hex4(p + 2, &cp))
			return perr(ps, p, PITH_EINVAL, "invalid \\u escape");
		uint8_t *esc = p;
		p += 6;
		if (cp >= 0xDC00 && cp <= 0xDFFF)
			return perr(ps, esc, PITH_EINVAL, "lone low surrogate");
		if (cp >= 0xD800 && cp <= 0xDBFF) {
			unsigned lo;
			if (end - p < 6 || p[0] != '\\' || p[1] != 'u' ||
			    hex4(p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
				return perr(ps, esc, PITH_EINVAL, "lone high surrogate");
			cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			p += 6;
		}
		w = put_utf8(w, cp);
	}
}

static int parse_number(parser_t *ps, json_value_t **out)
{
	uint8_t *s = ps->p, *p = s, *end = ps->end;
	int is_float = 0;
	if (p < end && *p == '-')
		p++;
	if (p >= end)
		return perr(ps, p, PITH_ETRUNC, "truncated number");
	if (*p == 'I')
		return perr(ps, s, PITH_EINVAL, "Infinity is not allowed");
	if (*p == '0') {
		p++;
	} else if (*p >= '1' && *p <= '9') {
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	} else {
		return perr(ps, p, PITH_EINVAL, "invalid number");
	}
	size_t int_digits = (size_t)(p - s) - (*s == '-');
	if (p < end && *p == '.') {
		is_float = 1;
		p++;
		if (p >= end || *p < '0' || *p > '9')
			return perr(ps, p, PITH_EINVAL, "digit expected after decimal point");
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		is_float = 1;
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if (p >= end || *p < '0' || *p > '9')
			return perr(ps, p, PITH_EINVAL, "digit expected in exponent");
		while (p < end && *p >= '0' && *p <= '9')
			p++;
	}
	size_t n = (size_t)(p - s);
	json_value_t *v;
	if (!is_float) {
		if (int_digits > ps->lim->max_int_digits)
			return perr(ps, s, PITH_ETOOBIG, "integer has too many digits");
		v = new_value(ps->doc, JSON_INT);
		if (!v)
			return perr(ps, s, PITH_ENOMEM, "out of memory");
		if (n == 2 && s[0] == '-' && s[1] == '0') {
			v->u.str = "0";
			v->len = 1;
		} else {
			char *t = arena_strndup(ps->doc, (const char *)s, n);
			if (!t)
				return perr(ps, s, PITH_ENOMEM, "out of memory");
			v->u.str = t;
			v->len = n;
		}
	} else {
		char small[64];
		char *t = small;
		if (n >= sizeof(small)) {
			t = malloc(n + 1);
			if (!t)
				return perr(ps, s, PITH_ENOMEM, "out of memory");
		}
		memcpy(t, s, n);
		t[n] = 0;
		double d = strtod(t, NULL);
		if (t != small)
			free(t);
		if (isinf(d) || isnan(d))
			return perr(ps, s, PITH_EINVAL, "number overflows a double");
		v = new_value(ps->doc, JSON_FLOAT);
		if (!v)
			return perr(ps, s, PITH_ENOMEM, "out of memory");
		v->u.num = d;
	}
	ps->p = p;
	*out = v;
	return 0;
}

static void sort_members(json_member_t *m, size_t n)
{
	if (n < 16) {
		for (size_t i = 1; i < n; i++) {
			json_member_t t = m[i];
			size_t j = i;
			while (j > 0 && member_cmp(&m[j - 1], &t) > 0) {
				m[j] = m[j - 1];
				j--;
			}
			m[j] = t;
		}
	} else {
		qsort(m, n, sizeof(*m), member_cmp);
	}
}

static int grow(void **arr, size_t *cap, size_t need, size_t elsize, void *inline_buf)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 64;
	while (nc < need)
		nc *= 2;
	void *p;
	if (*arr == inline_buf) {
		p = malloc(nc * elsize);
		if (p)
			memcpy(p, *arr, *cap * elsize);
	} else {
		p = realloc(*arr, nc * elsize);
	}
	if (!p)
		return PITH_ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

static int parse_array(parser_t *ps, json_value_t **out)
{
	uint8_t *open = ps->p - 1;
	size_t base = ps->vs_len;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == ']') {
		ps->p++;
	} else {
		for (;;) {
			json_value_t *v;
			int rc = parse_value(ps, &v);
			if (rc)
				return rc;
			if (grow((void **)&ps->vs, &ps->vs_cap, ps->vs_len + 1, sizeof(*ps->vs),
				 ps->vs_inline))
				return perr(ps, ps->p, PITH_ENOMEM, "out of memory");
			ps->vs[ps->vs_len++] = v;
			skip_ws(ps);
			if (ps->p >= ps->end)
				return perr(ps, ps->p, PITH_ETRUNC, "unterminated array");
			if (*ps->p == ',') {
				ps->p++;
				continue;
			}
			if (*ps->p == ']') {
				ps->p++;
				break;
			}
			return perr(ps, ps->p, PITH_EINVAL, "',' or ']' expected");
		}
	}
	json_value_t *a = new_value(ps->doc, JSON_ARRAY);
	size_t n = ps->vs_len - base;
	if (!a)
		return perr(ps, open, PITH_ENOMEM, "out of memory");
	if (n) {
		a->u.items = arena_alloc(ps->doc, n * sizeof(*a->u.items));
		if (!a->u.items)
			return perr(ps, open, PITH_ENOMEM, "out of memory");
		memcpy(a->u.items, ps->vs + base, n * sizeof(*a->u.items));
	}
	a->len = a->cap = n;
	ps->vs_len = base;
	*out = a;
	return 0;
}

static int parse_object(parser_t *ps, json_value_t **out)
{
	uint8_t *open = ps->p - 1;
	size_t base = ps->ms_len;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
	} else {
		for (;;) {
			skip_ws(ps);
			if (ps->p >= ps->end)
				return perr(ps, ps->p, PITH_ETRUNC, "unterminated object");
			if (*ps->p != '"')
				return perr(ps, ps->p, PITH_EINVAL, "string key expected");
			json_member_t m;
			m.offset = (size_t)(ps->p - ps->start);
			ps->p++;
			int rc = parse_string(ps, &m.key, &m.key_len);
			if (rc)
				return rc;
			skip_ws(ps);
			if (ps->p >= ps->end)
				return perr(ps, ps->p, PITH_ETRUNC, "unterminated object");
			if (*ps->p != ':')
				return perr(ps, ps->p, PITH_EINVAL, "':' expected");
			ps->p++;
			rc = parse_value(ps, &m.value);
			if (rc)
				return rc;
			if (grow((void **)&ps->ms, &ps->ms_cap, ps->ms_len + 1, sizeof(*ps->ms),
				 ps->ms_inline))
				return perr(ps, ps->p, PITH_ENOMEM, "out of memory");
			ps->ms[ps->ms_len++] = m;
			skip_ws(ps);
			if (ps->p >= ps->end)
				return perr(ps, ps->p, PITH_ETRUNC, "unterminated object");
			if (*ps->p == ',') {
				ps->p++;
				continue;
			}
			if (*ps->p == '}') {
				ps->p++;
				break;
			}
			return perr(ps, ps->p, PITH_EINVAL, "',' or '}' expected");
		}
	}
	json_value_t *o = new_value(ps->doc, JSON_OBJECT);
	size_t n = ps->ms_len - base;
	if (!o)
		return perr(ps, open, PITH_ENOMEM, "out of memory");
	if (n) {
		json_member_t *m = arena_alloc(ps->doc, n * sizeof(*m));
		if (!m)
			return perr(ps, open, PITH_ENOMEM, "out of memory");
		memcpy(m, ps->ms + base, n * sizeof(*m));
		sort_members(m, n);
		for (size_t i = 1; i < n; i++) {
			if (member_cmp(&m[i - 1], &m[i]) == 0) {
				size_t off = m[i].offset > m[i - 1].offset ? m[i].offset
									    : m[i - 1].offset;
				if (ps->err) {
					pith_err_set(ps->err, PITH_EINVAL,
						     "JSON: duplicate key \"%.40s\" at byte %zu",
						     m[i].key, off);
					ps->err->offset = off;
				}
				return PITH_EINVAL;
			}
		}
		o->u.members = m;
	}
	o->len = o->cap = n;
	o->sorted = 1;
	ps->ms_len = base;
	*out = o;
	return 0;
}

static int expect_lit(parser_t *ps, const char *lit, size_t n)
{
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0)
		return perr(ps, ps->p, PITH_EINVAL, "invalid literal");
	ps->p += n;
	return 0;
}

static int parse_value(parser_t *ps, json_value_t **out)
{
	skip_ws(ps);
	if (ps->p >= ps->end)
		return perr(ps, ps->p, PITH_ETRUNC, "value expected");
	uint8_t c = *ps->p;
	int rc;
	json_value_t *v;
	switch (c) {
	case '{':
	case '[':
		if (++ps->depth > ps->lim->max_depth)
			return perr(ps, ps->p, PITH_ETOOBIG, "nesting too deep");
		ps->p++;
		rc = c == '{' ? parse_object(ps, out) : parse_array(ps, out);
		ps->depth--;
		return rc;
	case '"': {
		uint8_t *at = ps->p++;
		const char *s;
		size_t n;
		rc = parse_string(ps, &s, &n);
		if (rc)
			return rc;
		v = new_value(ps->doc, JSON_STRING);
		if (!v)
			return perr(ps, at, PITH_ENOMEM, "out of memory");
		v->u.str = s;
		v->len = n;
		*out = v;
		return 0;
	}
	case 't':
		if ((rc = expect_lit(ps, "true", 4)))
			return rc;
		v = new_value(ps->doc, JSON_TRUE);
		break;
	case 'f':
		if ((rc = expect_lit(ps, "false", 5)))
			return rc;
		v = new_value(ps->doc, JSON_FALSE);
		break;
	case 'n':
		if ((rc = expect_lit(ps, "null", 4)))
			return rc;
		v = new_value(ps->doc, JSON_NULL);
		break;
	case 'N':
		return perr(ps, ps->p, PITH_EINVAL, "NaN is not allowed");
	case 'I':
		return perr(ps, ps->p, PITH_EINVAL, "Infinity is not allowed");
	default:
		if (c == '-' || (c >= '0' && c <= '9'))
			return parse_number(ps, out);
		return perr(ps, ps->p, PITH_EINVAL, "unexpected character");
	}
	if (!v)
		return perr(ps, ps->p, PITH_ENOMEM, "out of memory");
	*out = v;
	return 0;
}

int json_parse(json_doc_t **out, const uint8_t *buf, size_t len,
	       const json_limits_t *lim, pith_err_t *err)
{
	*out = NULL;
	if (!lim)
		lim = &json_limits_default;
	if (len > lim->max_bytes) {
		if (err) {
			pith_err_set(err, PITH_ETOOBIG,
				     "JSON: document of %zu bytes exceeds the limit of %zu",
				     len, lim->max_bytes);
			err->offset = lim->max_bytes;
		}
		return PITH_ETOOBIG;
	}
	json_doc_t *doc = json_doc_new();
	if (!doc)
		return pith_err_set(err, PITH_ENOMEM, "JSON: out of memory");
	parser_t ps;
	memset(&ps, 0, offsetof(parser_t, vs_inline));
	ps.vs = ps.vs_inline;
	ps.vs_cap = sizeof(ps.vs_inline) / sizeof(ps.vs_inline[0]);
	ps.ms = ps.ms_inline;
	ps.ms_cap = sizeof(ps.ms_inline) / sizeof(ps.ms_inline[0]);
	ps.doc = doc;
	ps.lim = lim;
	ps.err = err;
	uint8_t *copy = arena_alloc(doc, len + 1);
	if (!copy) {
		json_doc_free(doc);
		return pith_err_set(err, PITH_ENOMEM, "JSON: out of memory");
	}
	memcpy(copy, buf, len);
	copy[len] = 0;
	ps.start = copy;
	ps.p = copy;
	ps.end = copy + len;
	/* json.loads on bytes tolerates a leading UTF-8 byte order mark */
	if (len >= 3 && copy[0] == 0xEF && copy[1] == 0xBB && copy[2] == 0xBF)
		ps.p += 3;
	json_value_t *root = NULL;
	int rc = parse_value(&ps, &root);
	if (!rc) {
		skip_ws(&ps);
		if (ps.p != ps.end)
			rc = perr(&ps, ps.p, PITH_EINVAL, "trailing data after the document");
	}
	if (ps.vs != ps.vs_inline)
		free(ps.vs);
	if (ps.ms != ps.ms_inline)
		free(ps.ms);
	if (rc) {
		json_doc_free(doc);
		return rc;
	}
	doc->root = root;
	*out = doc;
	return 0;
}

/* ---- builder ---------------------------------------------------------- */

json_value_t *json_new_null(json_doc_t *doc)
{
	return new_value(doc, JSON_NULL);
}

json_value_t *json_new_bool(json_doc_t *doc, int b)
{
	return new_value(doc, b ? JSON_TRUE : JSON_FALSE);
}

json_value_t *json_new_int(json_doc_t *doc, int64_t x)
{
	json_value_t *v = new_value(doc, JSON_INT);
	char t[24];
	if (!v)
		return NULL;
	int n = snprintf(t, sizeof(t), "%lld", (long long)x);
	v->u.str = arena_strndup(doc, t, (size_t)n);
	v->len = (size_t)n;
	return v->u.str ? v : NULL;
}

json_value_t *json_new_float(json_doc_t *doc, double x)
{
	json_value_t *v = new_value(doc, JSON_FLOAT);
	if (v)
		v->u.num = x;
	return v;
}

json_value_t *json_new_stringn(json_doc_t *doc, const char *s, size_t len)
{
	json_value_t *v = new_value(doc, JSON_STRING);
	if (!v)
		return NULL;
	v->u.str = arena_strndup(doc, s, len);
	v->len = len;
	return v->u.str ? v : NULL;
}

json_value_t *json_new_string(json_doc_t *doc, const char *s)
{
	return json_new_stringn(doc, s, strlen(s));
}

json_value_t *json_new_array(json_doc_t *doc)
{
	return new_value(doc, JSON_ARRAY);
}

json_value_t *json_new_object(json_doc_t *doc)
{
	json_value_t *v = new_value(doc, JSON_OBJECT);
	if (v)
		v->sorted = 1;
	return v;
}

/* Containers built by hand grow in the arena; the old slots are simply
 * abandoned (the arena frees them with the doc). */
static int slots_grow(json_doc_t *doc, json_value_t *c, size_t elsize)
{
	if (c->len < c->cap)
		return 0;
	size_t nc = c->cap ? c->cap * 2 : 8;
	void *p = arena_alloc(doc, nc * elsize);
	if (!p)
		return PITH_ENOMEM;
	if (c->len)
		memcpy(p, c->u.items, c->len * elsize);
	c->u.items = p;
	c->cap = nc;
	return 0;
}

int json_array_push(json_doc_t *doc, json_value_t *a, json_value_t *v)
{
	if (!v || a->type != JSON_ARRAY)
		return PITH_EINVAL;
	if (slots_grow(doc, a, sizeof(json_value_t *)))
		return PITH_ENOMEM;
	a->u.items[a->len++] = v;
	return 0;
}

/* Keys are counted, not NUL-terminated: a parsed key may hold U+0000. */
static int object_set_n(json_doc_t *doc, json_value_t *o, const char *key,
			size_t klen, json_value_t *v)
{
	if (!v || o->type != JSON_OBJECT)
		return PITH_EINVAL;
	for (size_t i = 0; i < o->len; i++) {
		json_member_t *m = &o->u.members[i];
		if (m->key_len == klen && memcmp(m->key, key, klen) == 0) {
			m->value = v;
			return 0;
		}
	}
	if (slots_grow(doc, o, sizeof(json_member_t)))
		return PITH_ENOMEM;
	json_member_t *m = &o->u.members[o->len];
	m->key = arena_strndup(doc, key, klen);
	if (!m->key)
		return PITH_ENOMEM;
	m->key_len = klen;
	m->value = v;
	m->offset = 0;
	if (o->len && member_cmp(&o->u.members[o->len - 1], m) > 0)
		o->sorted = 0;
	o->len++;
	return 0;
}

int json_object_set(json_doc_t *doc, json_value_t *o, const char *key,
		    json_value_t *v)
{
	return object_set_n(doc, o, key, strlen(key), v);
}

json_value_t *json_clone(json_doc_t *doc, const json_value_t *v)
{
	json_value_t *c;
	switch (v->type) {
	case JSON_ARRAY:
		c = json_new_array(doc);
		for (size_t i = 0; c && i < v->len; i++)
			if (json_array_push(doc, c, json_clone(doc, v->u.items[i])))
				return NULL;
		return c;
	case JSON_OBJECT:
		/* The source's keys are unique already: copy the members in
		 * one allocation instead of a lookup per key (quadratic). */
		c = json_new_object(doc);
		if (!c)
			return NULL;
		if (v->len) {
			json_member_t *m = arena_alloc(doc, v->len * sizeof(*m));
			if (!m)
				return NULL;
			for (size_t i = 0; i < v->len; i++) {
				const json_member_t *src = &v->u.members[i];
				m[i].key = arena_strndup(doc, src->key, src->key_len);
				m[i].key_len = src->key_len;
				m[i].offset = 0;
				m[i].value = json_clone(doc, src->value);
				if (!m[i].key || !m[i].value)
					return NULL;
			}
			c->u.members = m;
		}
		c->len = c->cap = v->len;
		c->sorted = v->sorted;
		return c;
	case JSON_STRING:
	case JSON_INT:
		c = json_new_stringn(doc, v->u.str, v->len);
		if (c)
			c->type = v->type;
		return c;
	default:
		c = new_value(doc, v->type);
		if (c)
			c->u = v->u;
		return c;
	}
}

/* ---- lookup ----------------------------------------------------------- */

static const json_value_t *get_n(const json_value_t *o, const char *key, size_t klen)
{
	if (!o || o->type != JSON_OBJECT)
		return NULL;
	json_member_t k = {key, klen, NULL, 0};
	if (o->sorted) {
		size_t lo = 0, hi = o->len;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			int c = member_cmp(&o->u.members[mid], &k);
			if (c == 0)
				return o->u.members[mid].value;
			if (c < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		return NULL;
	}
	for (size_t i = 0; i < o->len; i++)
		if (member_cmp(&o->u.members[i], &k) == 0)
			return o->u.members[i].value;
	return NULL;
}

const json_value_t *json_get(const json_value_t *o, const char *key)
{
	return get_n(o, key, strlen(key));
}

const char *json_get_str(const json_value_t *o, const char *key)
{
	const json_value_t *v = json_get(o, key);
	return v && v->type == JSON_STRING ? v->u.str : NULL;
}

const json_value_t *json_get_type(const json_value_t *o, const char *key,
				  json_type_t type)
{
	const json_value_t *v = json_get(o, key);
	return v && v->type == type ? v : NULL;
}

int json_equal(const json_value_t *a, const json_value_t *b)
{
	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case JSON_NULL:
	case JSON_TRUE:
	case JSON_FALSE:
		return 1;
	case JSON_FLOAT:
		return a->u.num == b->u.num && signbit(a->u.num) == signbit(b->u.num);
	case JSON_INT:
	case JSON_STRING:
		return a->len == b->len && memcmp(a->u.str, b->u.str, a->len) == 0;
	case JSON_ARRAY:
		if (a->len != b->len)
			return 0;
		for (size_t i = 0; i < a->len; i++)
			if (!json_equal(a->u.items[i], b->u.items[i]))
				return 0;
		return 1;
	case JSON_OBJECT:
		if (a->len != b->len)
			return 0;
		for (size_t i = 0; i < a->len; i++) {
			const json_value_t *bv =
				get_n(b, a->u.members[i].key, a->u.members[i].key_len);
			if (!bv || !json_equal(a->u.members[i].value, bv))
				return 0;
		}
		return 1;
	}
	return 0;
}
