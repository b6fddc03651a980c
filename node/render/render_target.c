/* The request target, decoded strictly: no I/O, no allocation.
 *
 * What is refused, and why:
 * - anything but origin-form ("/path?query"): absolute URLs, "*", an
 *   authority, a fragment;
 * - a raw byte outside RFC 3986's pchar set in the path (spaces, quotes,
 *   backslashes, controls, non-ASCII);
 * - a percent escape that is not %XX, or that decodes to a control byte,
 *   NUL, '\\' or a non-ASCII byte: a NUL would cut a C string short;
 * - in a query value (text: a search query, a pasted title), UTF-8 is
 *   let through, raw or percent-encoded, but a value that is not valid
 *   UTF-8 or holds a control character (C0, DEL, C1) or NUL is marked
 *   (bad_key, bad_why) rather than refused here: the search views say
 *   why in their own page, and the server (node/http/http.c) refuses
 *   it on every other route as before;
 * - an encoded slash is let through but marked (enc_slash), and only where
 *   the pieces it separates hold no dot segment ("%2F..%2F"): the router
 *   takes it in an {ID} segment alone (a pasted URL or DOI), so that one
 *   segment never poses as two;
 * - empty segments ("//") and the dot segments "." and "..", raw or
 *   encoded: nothing here maps paths to files, but no route should ever
 *   see a path that means something else once normalised;
 * - targets over RENDER_TARGET_MAX bytes (414), more than RENDER_SEGS_MAX
 *   segments or RENDER_QUERY_MAX parameters. */
#include <string.h>

#include "render_int.h"
#include "utf8.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* RFC 3986 pchar without '%': unreserved / sub-delims / ':' / '@'. */
static int is_pchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c && strchr("-._~!$&'()*+,;=:@", c) != NULL;
}

/* Query characters: pchar, '/' and '?' (RFC 3986 section 3.4). */
static int is_qchar(unsigned char c)
{
	return is_pchar(c) || c == '/' || c == '?';
}

/* Decodes s[0..n) into out (room checked by the caller: decoding never
 * grows). plus: '+' means a space (query strings). text (a query
 * value): bytes from 0x80 pass, and a control byte or NUL sets *soft (if
 * not set yet) instead of failing. Returns the decoded length, or -1 with
 * *why set. */
static long decode(const char *s, size_t n, char *out, int plus, int allow_slash, int text,
		   const char **soft, const char **why)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '%') {
			if (i + 2 >= n) {
				*why = "a truncated percent escape";
				return -1;
			}
			int a = hexval(s[i + 1]), b = hexval(s[i + 2]);
			if (a < 0 || b < 0) {
				*why = "a malformed percent escape";
				return -1;
			}
			c = (unsigned char)(a * 16 + b);
			i += 2;
			if (text && (c < 0x20 || c == 0x7f)) {
				if (!*soft)
					*soft = c ? "a control character" : "an encoded NUL";
				c = '?'; /* never used: the value is marked */
			}
			if (c == 0) {
				*why = "an encoded NUL";
				return -1;
			}
			if (c == '/' && !allow_slash) {
				*why = "an encoded slash";
				return -1;
			}
			if (c == '\\') {
				*why = "an encoded backslash";
				return -1;
			}
			if (c < 0x20 || c == 0x7f || (c >= 0x80 && !text)) {
				*why = "an encoded control or non-ASCII byte";
				return -1;
			}
		} else if (plus && c == '+') {
			c = ' ';
		}
		out[o++] = (char)c;
	}
	return (long)o;
}

/* What is wrong with a decoded query value as text, or NULL: not valid
 * UTF-8, or a C1 control (U+0080..U+009F). */
static const char *text_fault(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t l = pith_utf8_char(s + i, n - i, &cp);
		if (!l)
			return "text that is not valid UTF-8";
		if (cp >= 0x80 && cp < 0xa0)
			return "a control character";
		i += l;
	}
	return NULL;
}

/* Whether s, cut at '/' (encoded slashes), has a piece "." or "..". */
static int has_dot_piece(const char *s)
{
	for (const char *p = s;;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return 1;
		if (!e)
			return 0;
		p = e + 1;
	}
}

int render_target_parse(const char *uri, size_t len, render_target_t *t, const char **why)
{
	memset(t, 0, sizeof(*t));
	*why = "";
	if (len > RENDER_TARGET_MAX) {
		*why = "the request target is too long";
		return RENDER_TARGET_TOO_LONG;
	}
	if (len == 0 || uri[0] != '/') {
		*why = "the request target is not an absolute path";
		return RENDER_TARGET_BAD;
	}
	if (memchr(uri, 0, len)) {
		*why = "a NUL byte in the request target";
		return RENDER_TARGET_BAD;
	}
	const char *q = memchr(uri, '?', len);
	size_t plen = q ? (size_t)(q - uri) : len;
	char *o = t->buf;
	/* the path: segments between slashes */
	size_t i = 1;
	if (plen == 1) {
		t->nseg = 0;
	} else {
		while (i <= plen) {
			size_t j = i;
			while (j < plen && uri[j] != '/')
				j++;
			if (j == i) {
				if (j == plen) {
					t->trailing_slash = 1;
					break;
				}
				*why = "an empty path segment";
				return RENDER_TARGET_BAD;
			}
			for (size_t k = i; k < j; k++) {
				unsigned char c = (unsigned char)uri[k];
				if (c != '%' && !is_pchar(c)) {
					*why = c == '#' ? "a fragment in the request target"
						 : "a character not allowed in a path";
					return RENDER_TARGET_BAD;
				}
			}
			if (t->nseg == RENDER_SEGS_MAX) {
				*why = "too many path segments";
				return RENDER_TARGET_BAD;
			}
			long d = decode(uri + i, j - i, o, 0, 1, 0, NULL, why);
			if (d < 0)
				return RENDER_TARGET_BAD;
			o[d] = 0;
			if (has_dot_piece(o)) {
				*why = "a dot segment";
				return RENDER_TARGET_BAD;
			}
			if (memchr(o, '/', (size_t)d))
				t->enc_slash |= 1u << t->nseg;
			t->seg[t->nseg++] = o;
			o += d + 1;
			i = j + 1;
		}
	}
	/* the query: key=value pairs */
	if (q) {
		size_t k = plen + 1;
		while (k < len) {
			size_t e = k;
			while (e < len && uri[e] != '&')
				e++;
			if (e > k) {
				const char *eq = memchr(uri + k, '=', e - k);
				for (size_t x = k; x < e; x++) {
					unsigned char c = (unsigned char)uri[x];
					/* raw UTF-8 in a value: as if percent-encoded */
					if (c >= 0x80 && eq && uri + x > eq)
						continue;
					if (c != '%' && c != '=' && !is_qchar(c)) {
						*why = c == '#' ? "a fragment in the request target"
							 : "a character not allowed in a query";
						return RENDER_TARGET_BAD;
					}
				}
				if (t->nq == RENDER_QUERY_MAX) {
					*why = "too many query parameters";
					return RENDER_TARGET_BAD;
				}
				size_t klen = eq ? (size_t)(eq - (uri + k)) : e - k;
				const char *soft = NULL;
				long d = decode(uri + k, klen, o, 1, 1, 0, &soft, why);
				if (d < 0)
					return RENDER_TARGET_BAD;
				o[d] = 0;
				t->q[t->nq].key = o;
				o += d + 1;
				if (eq) {
					d = decode(eq + 1, (size_t)(uri + e - (eq + 1)), o, 1, 1, 1, &soft,
						   why);
					if (d < 0)
						return RENDER_TARGET_BAD;
				} else {
					d = 0;
				}
				o[d] = 0;
				if (!soft)
					soft = text_fault(o, (size_t)d);
				if (soft && !t->bad_why) {
					t->bad_key = t->q[t->nq].key;
					t->bad_why = soft;
				}
				t->q[t->nq].val = o;
				o += d + 1;
				t->nq++;
			}
			k = e + 1;
		}
	}
	return RENDER_TARGET_OK;
}

const char *render_target_query(const render_target_t *t, const char *key, int *count)
{
	const char *v = NULL;
	int n = 0;
	for (size_t i = 0; i < t->nq; i++)
		if (!strcmp(t->q[i].key, key)) {
			if (!v)
				v = t->q[i].val;
			n++;
		}
	if (count)
		*count = n;
	return v;
}
