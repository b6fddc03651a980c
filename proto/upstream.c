/* The mirror manifest and the resolve API's answers (upstream.h). Every
 * field is copied into a fixed-size struct after its bound is checked;
 * every URL is checked for its scheme, host and path characters before
 * anything else reads it. */
#include "upstream.h"

#include <ctype.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ids.h"
#include "json.h"

const pith_upstream_limits_t pith_upstream_limits_default = {
	.max_bytes = 1u << 20,
	.max_depth = 16,
	.max_mirrors = PITH_MIRRORS_MAX,
	.max_changes = PITH_CHANGES_MAX,
};

const pith_upstream_limits_t pith_changes_limits_default = {
	.max_bytes = 4u << 20,
	.max_depth = 16,
	.max_mirrors = PITH_MIRRORS_MAX,
	.max_changes = PITH_CHANGES_MAX,
};

#define PLACEHOLDER "{suffix}"

/* ---- URLs ---------------------------------------------------------------- */

typedef struct url_origin {
	int https;
	char host[256]; /* lower case */
	unsigned port;  /* the default port when none is spelled */
	size_t path_at; /* offset of what follows the authority */
} url_origin_t;

/* Reads "http(s)://host[:port]" at the start of u (n bytes). 0 or -1 with
 * *why set. User info, empty hosts and characters a host name does not
 * have are refused: a host is what a reader of the URL thinks it is. */
static int url_origin_parse(const char *u, size_t n, url_origin_t *o, const char **why)
{
	size_t at;
	if (n >= 8 && !strncasecmp(u, "https://", 8)) {
		o->https = 1;
		at = 8;
	} else if (n >= 7 && !strncasecmp(u, "http://", 7)) {
		o->https = 0;
		at = 7;
	} else {
		*why = "not an http:// or https:// URL";
		return -1;
	}
	size_t h = 0;
	while (at < n && (isalnum((unsigned char)u[at]) || u[at] == '.' || u[at] == '-')) {
		if (h + 1 >= sizeof(o->host)) {
			*why = "host name too long";
			return -1;
		}
		o->host[h++] = (char)tolower((unsigned char)u[at++]);
	}
	o->host[h] = 0;
	if (!h || o->host[0] == '.' || o->host[0] == '-') {
		*why = "no host name";
		return -1;
	}
	o->port = o->https ? 443 : 80;
	if (at < n && u[at] == ':') {
		unsigned long p = 0;
		size_t d = 0;
		for (at++; at < n && isdigit((unsigned char)u[at]) && d < 6; at++, d++)
			p = p * 10 + (unsigned long)(u[at] - '0');
		if (!d || p == 0 || p > 65535) {
			*why = "bad port";
			return -1;
		}
		o->port = (unsigned)p;
	}
	if (at < n && u[at] != '/' && u[at] != '?' && u[at] != '#') {
		*why = u[at] == '@' ? "user info in a URL" : "bad character in the host";
		return -1;
	}
	o->path_at = at;
	return 0;
}

static int url_path_char_ok(unsigned char c)
{
	return isalnum(c) || (c && strchr("-._~!$&'()*+,;=:@/?", c));
}

/* Is p (n bytes, from a '/') the segment "/." or "/.."? A client would
 * fold it away and fetch from another path than the one written. */
static int dot_segment(const char *p, size_t n)
{
	return n >= 2 && n <= 3 && p[0] == '/' && p[1] == '.' && (n == 2 || p[2] == '.');
}

/* Checks a URL or (is_pattern) a URL pattern, n bytes; counts the
 * placeholders. 0 or -1 with *why. Patterns refuse '%' too: a pattern
 * needs no escapes, and an escaped dot or slash could climb out of it. */
static int url_check(const char *u, size_t n, int is_pattern, int *nph, const char **why)
{
	url_origin_t o;
	if (url_origin_parse(u, n, &o, why))
		return -1;
	*nph = 0;
	size_t i = o.path_at;
	if (is_pattern && (i == n || u[i] != '/')) {
		*why = "no path after the host";
		return -1;
	}
	size_t seg = i; /* start of the current path segment */
	for (; i < n; i++) {
		unsigned char c = (unsigned char)u[i];
		if (c == '{') {
			if (!is_pattern || n - i < strlen(PLACEHOLDER) ||
			    strncmp(u + i, PLACEHOLDER, strlen(PLACEHOLDER))) {
				*why = is_pattern ? "unknown placeholder (only {suffix} is known)"
						  : "'{' in a URL";
				return -1;
			}
			(*nph)++;
			i += strlen(PLACEHOLDER) - 1;
			continue;
		}
		if (c == '%' && !is_pattern && i + 2 < n && isxdigit((unsigned char)u[i + 1]) &&
		    isxdigit((unsigned char)u[i + 2]))
			continue;
		if (!url_path_char_ok(c)) {
			*why = c == '#' ? "a fragment in a URL" : "a character URLs do not carry";
			return -1;
		}
		if (c == '/' || c == '?') {
			if (dot_segment(u + seg, i - seg)) {
				*why = "a '.' or '..' path segment";
				return -1;
			}
			seg = i;
		}
	}
	if (dot_segment(u + seg, n - seg)) {
		*why = "a '.' or '..' path segment";
		return -1;
	}
	return 0;
}

int pith_pattern_check(const char *pattern, pith_err_t *err)
{
	size_t n = strnlen(pattern, PITH_URL_MAX);
	if (n >= PITH_URL_MAX)
		return pith_err_set(err, PITH_ETOOBIG, "pattern: longer than %d bytes", PITH_URL_MAX - 1);
	const char *why;
	int nph;
	if (url_check(pattern, n, 1, &nph, &why))
		return pith_err_set(err, PITH_EINVAL, "pattern: %s", why);
	if (!nph)
		return pith_err_set(err, PITH_EINVAL, "pattern: no {suffix} placeholder");
	return 0;
}

static int body_is_valid(const char *s)
{
	if (strnlen(s, PITH_BODY_LEN + 1) != PITH_BODY_LEN)
		return 0;
	for (int i = 0; i < PITH_BODY_LEN; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '2' && s[i] <= '7')))
			return 0;
	return 1;
}

int pith_pattern_expand(const char *pattern, const char *pith_number, char *out, size_t cap,
			pith_err_t *err)
{
	int rc = pith_pattern_check(pattern, err);
	if (rc)
		return rc;
	const char *body;
	if (pith_number_is_valid(pith_number))
		body = pith_number + PITH_NUMBER_LEN - PITH_BODY_LEN;
	else if (body_is_valid(pith_number))
		body = pith_number;
	else
		return pith_err_set(err, PITH_EINVAL, "pattern: not a pith number or body to fill in");
	size_t o = 0, pl = strlen(PLACEHOLDER);
	for (const char *p = pattern; *p;) {
		const char *piece = p;
		size_t n = 1;
		if (!strncmp(p, PLACEHOLDER, pl)) {
			piece = body;
			n = PITH_BODY_LEN;
			p += pl;
		} else {
			p++;
		}
		if (o + n >= cap)
			return pith_err_set(err, PITH_ETOOBIG, "pattern: URL longer than %zu bytes",
					    cap ? cap - 1 : 0);
		memcpy(out + o, piece, n);
		o += n;
	}
	out[o] = 0;
	/* the body is base32 and lands after the host (the check above): the
	 * URL made has the pattern's own origin; said once more, cheaply */
	url_origin_t a, b;
	const char *why;
	if (url_origin_parse(pattern, strlen(pattern), &a, &why) ||
	    url_origin_parse(out, o, &b, &why) || a.https != b.https || a.port != b.port ||
	    strcmp(a.host, b.host))
		return pith_err_set(err, PITH_EINVAL, "pattern: expansion leaves the pattern's origin");
	return 0;
}

/* ---- the manifest ---------------------------------------------------------- */

/* Puts what the document is before the JSON parser's message. */
static int err_prefix(pith_err_t *err, const char *what, int rc)
{
	if (err) {
		char m[sizeof(err->msg)];
		memcpy(m, err->msg, sizeof(m));
		size_t at = err->offset;
		pith_err_set(err, rc, "%s: %.200s", what, m);
		err->offset = at;
	}
	return rc;
}

static int json_limits_of(const pith_upstream_limits_t *lim, json_limits_t *jl)
{
	jl->max_bytes = lim->max_bytes;
	jl->max_depth = lim->max_depth;
	jl->max_int_digits = 64; /* no number in these documents needs more */
	return 0;
}

/* Copies member key of o, a string, into out (cap bytes). Absent (or null
 * when !required) leaves out "". Strings with a NUL or control byte are
 * refused: they end up in logs and URLs. */
static int text_get(const json_value_t *o, const char *key, char *out, size_t cap, int required,
		    const char *where, pith_err_t *err)
{
	const json_value_t *v = json_get(o, key);
	out[0] = 0;
	if (!v || (v->type == JSON_NULL && !required)) {
		if (required)
			return pith_err_set(err, PITH_EINVAL, "%s%s: missing", where, key);
		return 0;
	}
	if (v->type != JSON_STRING)
		return pith_err_set(err, PITH_EINVAL, "%s%s: not a string", where, key);
	if (v->len >= cap)
		return pith_err_set(err, PITH_ETOOBIG, "%s%s: longer than %zu bytes", where, key, cap - 1);
	for (size_t i = 0; i < v->len; i++)
		if ((unsigned char)v->u.str[i] < 0x20 || v->u.str[i] == 0x7f)
			return pith_err_set(err, PITH_EINVAL, "%s%s: control byte at %zu", where, key, i);
	memcpy(out, v->u.str, v->len + 1);
	return 0;
}

static int mirror_key_parse(const json_value_t *k, pith_mirror_t *m, const char *where,
			    pith_err_t *err)
{
	if (!k || k->type == JSON_NULL)
		return 0;
	if (k->type != JSON_OBJECT)
		return pith_err_set(err, PITH_EINVAL, "%spublic_key: not an object", where);
	char w[64], hex[80], b64[80];
	snprintf(w, sizeof(w), "%spublic_key.", where);
	int rc;
	if ((rc = text_get(k, "key_id", m->key_id, sizeof(m->key_id), 0, w, err)) ||
	    (rc = text_get(k, "public_key_hex", hex, sizeof(hex), 0, w, err)) ||
	    (rc = text_get(k, "public_key_b64", b64, sizeof(b64), 0, w, err)))
		return rc;
	uint8_t fromb64[32];
	size_t bl = 0;
	int has_b64 = b64[0] != 0;
	if (has_b64 && (sodium_base642bin(fromb64, sizeof(fromb64), b64, strlen(b64), NULL, &bl, NULL,
					  sodium_base64_VARIANT_ORIGINAL) ||
			bl != 32))
		return pith_err_set(err, PITH_EINVAL, "%spublic_key_b64: not 32 bytes of base64", w);
	if (hex[0]) {
		if (pith_hex_decode(hex, strlen(hex), m->public_key, 32))
			return pith_err_set(err, PITH_EINVAL, "%spublic_key_hex: not 64 lower-case hex digits", w);
		if (has_b64 && memcmp(fromb64, m->public_key, 32))
			return pith_err_set(err, PITH_EINVAL, "%spublic_key_hex and public_key_b64 differ", w);
	} else if (has_b64) {
		memcpy(m->public_key, fromb64, 32);
	} else {
		return pith_err_set(err, PITH_EINVAL, "%s: neither public_key_hex nor public_key_b64", w);
	}
	m->has_key = 1;
	return 0;
}

static int mirror_parse(const json_value_t *v, size_t i, pith_mirror_t *m, pith_err_t *err)
{
	char where[32];
	snprintf(where, sizeof(where), "mirrors[%zu].", i);
	if (!json_is(v, JSON_OBJECT))
		return pith_err_set(err, PITH_EINVAL, "mirrors[%zu]: not an object", i);
	int rc;
	if ((rc = text_get(v, "name", m->name, sizeof(m->name), 0, where, err)) ||
	    (rc = text_get(v, "mirror_type", m->mirror_type, sizeof(m->mirror_type), 0, where, err)) ||
	    (rc = text_get(v, "status", m->status, sizeof(m->status), 0, where, err)) ||
	    (rc = text_get(v, "base_url", m->base_url, sizeof(m->base_url), 1, where, err)))
		return rc;
	const char *why;
	int nph;
	if (url_check(m->base_url, strlen(m->base_url), 0, &nph, &why))
		return pith_err_set(err, PITH_EINVAL, "%sbase_url: %s", where, why);
	static const struct {
		const char *key;
		size_t off;
	} pats[] = {
		{"bundle_pattern", offsetof(pith_mirror_t, bundle_pattern)},
		{"state_pattern", offsetof(pith_mirror_t, state_pattern)},
		{"well_known_pattern", offsetof(pith_mirror_t, well_known_pattern)},
	};
	for (size_t k = 0; k < sizeof(pats) / sizeof(pats[0]); k++) {
		char *p = (char *)m + pats[k].off;
		pith_err_t e = {0};
		if ((rc = text_get(v, pats[k].key, p, PITH_URL_MAX, 0, where, err)))
			return rc;
		if (p[0] && (rc = pith_pattern_check(p, &e)))
			return pith_err_set(err, rc, "%s%s: %s", where, pats[k].key,
					    e.msg + strlen("pattern: "));
	}
	if ((rc = text_get(v, "changes_url", m->changes_url, sizeof(m->changes_url), 0, where, err)))
		return rc;
	size_t cl = strlen(m->changes_url);
	if (cl && url_check(m->changes_url, cl, 0, &nph, &why))
		return pith_err_set(err, PITH_EINVAL, "%schanges_url: %s", where, why);
	if (strchr(m->changes_url, '?'))
		return pith_err_set(err, PITH_EINVAL, "%schanges_url: a query (a follower adds its own)",
				    where);
	return mirror_key_parse(json_get(v, "public_key"), m, where, err);
}

/* Parses an upstream's JSON document within lim (NULL: the defaults);
 * what names the document in errors. */
static int doc_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
		     const char *what, json_doc_t **doc, pith_err_t *err)
{
	json_limits_t jl;
	json_limits_of(lim ? lim : &pith_upstream_limits_default, &jl);
	*doc = NULL;
	int rc = json_parse(doc, buf, len, &jl, err);
	return rc ? err_prefix(err, what, rc) : 0;
}

int pith_manifest_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
			pith_manifest_t *out, pith_err_t *err)
{
	memset(out, 0, sizeof(*out));
	if (!lim)
		lim = &pith_upstream_limits_default;
	json_doc_t *doc;
	int rc = doc_parse(buf, len, lim, "manifest", &doc, err);
	if (rc)
		return rc;
	const json_value_t *root = json_doc_root(doc);
	const char *type = json_get_str(root, "manifest_type");
	const json_value_t *mirrors = json_get(root, "mirrors");
	size_t max = lim->max_mirrors < PITH_MIRRORS_MAX ? lim->max_mirrors : PITH_MIRRORS_MAX;
	if (!json_is(root, JSON_OBJECT)) {
		rc = pith_err_set(err, PITH_EINVAL, "manifest: not a JSON object");
	} else if (!type || strcmp(type, "pith_mirror_manifest")) {
		rc = pith_err_set(err, PITH_EINVAL, "manifest_type: not \"pith_mirror_manifest\"");
	} else if ((rc = text_get(root, "manifest_version", out->manifest_version,
				  sizeof(out->manifest_version), 1, "", err)) ||
		   (rc = text_get(root, "merge_version", out->merge_version,
				  sizeof(out->merge_version), 0, "", err))) {
		;
	} else if (strcmp(out->manifest_version, "1") && strncmp(out->manifest_version, "1.", 2)) {
		rc = pith_err_set(err, PITH_EINVAL, "manifest_version: '%s', not a version 1",
				  out->manifest_version);
	} else if (!json_is(mirrors, JSON_ARRAY) || mirrors->len == 0) {
		rc = pith_err_set(err, PITH_EINVAL, "mirrors: missing, empty or not an array");
	} else if (mirrors->len > max) {
		rc = pith_err_set(err, PITH_ETOOBIG, "mirrors: %zu entries, more than the limit %zu",
				  mirrors->len, max);
	} else {
		for (size_t i = 0; i < mirrors->len && !rc; i++)
			rc = mirror_parse(mirrors->u.items[i], i, &out->mirrors[i], err);
		out->n_mirrors = rc ? 0 : mirrors->len;
	}
	json_doc_free(doc);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

/* ---- resolve answers ------------------------------------------------------- */

static int number_from(const json_value_t *o, const char *where, char out[static PITH_NUMBER_LEN + 1],
		       pith_err_t *err)
{
	const json_value_t *v = json_get(o, "pith_number");
	if (!v || v->type == JSON_NULL)
		return PITH_ENOTFOUND;
	if (v->type != JSON_STRING || v->len != PITH_NUMBER_LEN || !pith_number_is_valid(v->u.str))
		return pith_err_set(err, PITH_EINVAL, "resolve answer: %spith_number: not a pith number",
				    where);
	memcpy(out, v->u.str, PITH_NUMBER_LEN + 1);
	return 0;
}

int pith_resolve_answer_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
			      char out[static PITH_NUMBER_LEN + 1], pith_err_t *err)
{
	out[0] = 0;
	json_doc_t *doc;
	int rc = doc_parse(buf, len, lim, "resolve answer", &doc, err);
	if (rc)
		return rc;
	const json_value_t *root = json_doc_root(doc);
	static const char *const nests[] = {"record", "result", "data", "resolved"};
	if (!json_is(root, JSON_OBJECT)) {
		rc = pith_err_set(err, PITH_EINVAL, "resolve answer: not a JSON object");
		goto done;
	}
	if ((rc = number_from(root, "", out, err)) != PITH_ENOTFOUND)
		goto done;
	for (size_t i = 0; i < sizeof(nests) / sizeof(nests[0]); i++) {
		char where[16];
		snprintf(where, sizeof(where), "%s.", nests[i]);
		const json_value_t *o = json_get(root, nests[i]);
		if (json_is(o, JSON_OBJECT) && (rc = number_from(o, where, out, err)) != PITH_ENOTFOUND)
			goto done;
	}
	rc = pith_err_set(err, PITH_ENOTFOUND, "resolve answer: names no pith_number");
done:
	json_doc_free(doc);
	if (rc)
		out[0] = 0;
	return rc;
}

int pith_resolve_location_parse(const char *location, size_t len, const char *base_url,
				pith_id_t *out, pith_err_t *err)
{
	memset(out, 0, sizeof(*out));
	if (len >= PITH_URL_MAX)
		return pith_err_set(err, PITH_ETOOBIG, "Location: longer than %d bytes", PITH_URL_MAX - 1);
	if (!len)
		return pith_err_set(err, PITH_EINVAL, "Location: empty");
	const char *why;
	int nph;
	url_origin_t base, at;
	size_t bl = strnlen(base_url, PITH_URL_MAX);
	if (bl >= PITH_URL_MAX || url_check(base_url, bl, 0, &nph, &why) ||
	    url_origin_parse(base_url, bl, &base, &why))
		return pith_err_set(err, PITH_EINVAL, "base URL: %s", bl >= PITH_URL_MAX ? "too long" : why);
	const char *path;
	size_t pl;
	if (location[0] == '/' && (len == 1 || location[1] != '/')) {
		path = location;
		pl = len;
	} else if (location[0] == '/') {
		return pith_err_set(err, PITH_EINVAL, "Location: a scheme-relative URL");
	} else {
		if (url_origin_parse(location, len, &at, &why))
			return pith_err_set(err, PITH_EINVAL, "Location: %s", why);
		if (at.https != base.https || at.port != base.port || strcmp(at.host, base.host))
			return pith_err_set(err, PITH_EINVAL, "Location: not on the origin of %s",
					    base_url);
		path = location + at.path_at;
		pl = len - at.path_at;
	}
	for (size_t i = 0; i < pl; i++)
		if (!url_path_char_ok((unsigned char)path[i]) && path[i] != '%' && path[i] != '#')
			return pith_err_set(err, PITH_EINVAL, "Location: a character URLs do not carry at %zu",
					    (size_t)(path - location) + i);
	pl = strcspn(path, "?#") < pl ? strcspn(path, "?#") : pl;
	/* base_url's own path (a mirror under /registry) comes first */
	const char *bp = base_url + base.path_at;
	size_t bpl = strcspn(bp, "?#");
	while (bpl && bp[bpl - 1] == '/')
		bpl--;
	if (pl < bpl + 6 || memcmp(path, bp, bpl) || memcmp(path + bpl, "/pith/", 6))
		return pith_err_set(err, PITH_EINVAL, "Location: not a /pith/{ID} path");
	const char *seg = path + bpl + 6;
	size_t sl = pl - bpl - 6;
	if (sl && seg[sl - 1] == '/')
		sl--;
	char id[PITH_NUMBER_LEN + 1];
	if (pith_url_pct_decode(seg, sl, id, sizeof(id)))
		return pith_err_set(err, PITH_EINVAL, "Location: bad percent escape, or too long");
	if (strchr(id, '/'))
		return pith_err_set(err, PITH_EINVAL, "Location: not a /pith/{ID} path");
	size_t o = strlen(id);
	if ((o != PITH_BODY_LEN && o != PITH_NUMBER_LEN) || pith_id_parse(id, out, NULL) ||
	    out->kind != PITH_ID_FULL) {
		memset(out, 0, sizeof(*out));
		return pith_err_set(err, PITH_EINVAL, "Location: /pith/ names no full pith number or body");
	}
	return 0;
}

int pith_bundle_url(const char *pattern, const char *base, unsigned cand, const char *body,
		    char *out, size_t cap, pith_err_t *err)
{
	char pat[PITH_URL_MAX + 64];
	int n;
	if (pattern && *pattern) {
		if (cand > 0)
			return 1;
		n = snprintf(pat, sizeof(pat), "%s", pattern);
	} else if (cand == 0) {
		n = snprintf(pat, sizeof(pat), "%s/pith/{suffix}/bundle.json", base);
	} else if (cand == 1) {
		n = snprintf(pat, sizeof(pat), "%s/.well-known/pith/{suffix}/bundle.json", base);
	} else {
		return 1;
	}
	if (n < 0 || (size_t)n >= sizeof(pat))
		return pith_err_set(err, PITH_ETOOBIG, "bundle URL over %d bytes", PITH_URL_MAX);
	return pith_pattern_expand(pat, body, out, cap, err);
}

/* ---- the change feed ------------------------------------------------------- */

/* A cursor: 1 to PITH_CURSOR_MAX bytes of printable ASCII without blanks
 * (it goes back into a query string, escaped by the caller, and into
 * logs). */
static int cursor_get(const json_value_t *v, const char *where, char out[PITH_CURSOR_MAX + 1],
		      pith_err_t *err)
{
	if (!v || v->type != JSON_STRING)
		return pith_err_set(err, PITH_EINVAL, "%s: missing or not a string", where);
	if (v->len == 0)
		return pith_err_set(err, PITH_EINVAL, "%s: empty", where);
	if (v->len > PITH_CURSOR_MAX)
		return pith_err_set(err, PITH_ETOOBIG, "%s: longer than %d bytes", where, PITH_CURSOR_MAX);
	for (size_t i = 0; i < v->len; i++)
		if ((unsigned char)v->u.str[i] < 0x21 || (unsigned char)v->u.str[i] > 0x7e)
			return pith_err_set(err, PITH_EINVAL, "%s: byte %zu is not printable ASCII", where, i);
	memcpy(out, v->u.str, v->len + 1);
	return 0;
}

/* 64 lower-case hex digits into 32 bytes. */
static int sha_get(const json_value_t *v, const char *where, const char *key, uint8_t out[32],
		   pith_err_t *err)
{
	int ok = json_is(v, JSON_STRING) && v->len == 64;
	for (size_t i = 0; ok && i < 64; i++)
		ok = (v->u.str[i] >= '0' && v->u.str[i] <= '9') || (v->u.str[i] >= 'a' && v->u.str[i] <= 'f');
	if (!ok || pith_hex_decode(v->u.str, 64, out, 32))
		return pith_err_set(err, PITH_EINVAL, "%s%s: not 64 lower-case hex digits", where, key);
	return 0;
}

static int change_parse(const json_value_t *v, size_t i, pith_change_t *c, pith_err_t *err)
{
	char where[40], w[64];
	snprintf(where, sizeof(where), "changes[%zu].", i);
	memset(c, 0, sizeof(*c));
	if (!json_is(v, JSON_OBJECT))
		return pith_err_set(err, PITH_EINVAL, "changes[%zu]: not an object", i);
	snprintf(w, sizeof(w), "%scursor", where);
	int rc = cursor_get(json_get(v, "cursor"), w, c->cursor, err);
	if (rc)
		return rc;
	const json_value_t *pn = json_get(v, "pith_number");
	if (!json_is(pn, JSON_STRING) || pn->len != PITH_NUMBER_LEN || !pith_number_is_valid(pn->u.str))
		return pith_err_set(err, PITH_EINVAL, "%spith_number: missing or not a full pith number",
				    where);
	memcpy(c->pith_number, pn->u.str, PITH_NUMBER_LEN + 1);
	if ((rc = sha_get(json_get(v, "state_sha256"), where, "state_sha256", c->state_sha, err)))
		return rc;
	const json_value_t *bs = json_get(v, "bundle_sha256"), *ba = json_get(v, "built_at");
	int has_bs = bs && bs->type != JSON_NULL, has_ba = ba && ba->type != JSON_NULL;
	if (has_bs != has_ba)
		return pith_err_set(err, PITH_EINVAL, "%s%s: given without %s", where,
				    has_bs ? "bundle_sha256" : "built_at", has_bs ? "built_at" : "bundle_sha256");
	if (!has_bs)
		return 0;
	if ((rc = sha_get(bs, where, "bundle_sha256", c->bundle_sha, err)))
		return rc;
	if ((rc = text_get(v, "built_at", c->built_at, sizeof(c->built_at), 1, where, err)))
		return rc;
	if (pith_time_parse(c->built_at, &c->built_us))
		return pith_err_set(err, PITH_EINVAL, "%sbuilt_at: not a timestamp", where);
	c->has_bundle = 1;
	return 0;
}

int pith_changes_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
		       pith_change_t *out, size_t cap, size_t *n,
		       char next[static PITH_CURSOR_MAX + 1], pith_err_t *err)
{
	*n = 0;
	next[0] = 0;
	if (!lim)
		lim = &pith_changes_limits_default;
	json_doc_t *doc;
	int rc = doc_parse(buf, len, lim, "change feed", &doc, err);
	if (rc)
		return rc;
	const json_value_t *root = json_doc_root(doc);
	const json_value_t *changes = json_get(root, "changes");
	size_t max = lim->max_changes && lim->max_changes < cap ? lim->max_changes : cap;
	if (!json_is(root, JSON_OBJECT)) {
		rc = pith_err_set(err, PITH_EINVAL, "change feed: not a JSON object");
	} else if (!json_is(changes, JSON_ARRAY)) {
		rc = pith_err_set(err, PITH_EINVAL, "changes: missing or not an array");
	} else if (changes->len > max) {
		rc = pith_err_set(err, PITH_ETOOBIG, "changes: %zu entries, more than the limit %zu",
				  changes->len, max);
	} else if (!(rc = cursor_get(json_get(root, "next"), "next", next, err))) {
		for (size_t i = 0; i < changes->len && !rc; i++)
			rc = change_parse(changes->u.items[i], i, &out[i], err);
		*n = rc ? 0 : changes->len;
	}
	json_doc_free(doc);
	if (rc) {
		*n = 0;
		next[0] = 0;
	}
	return rc;
}

/* ---- a record's events page ---------------------------------------------------- */

/* An integer member that may be absent (def) or null (-1 when null_ok). */
static int offset_get(const json_value_t *v, const char *name, int null_ok, int64_t def,
		      int64_t *out, pith_err_t *err)
{
	if (!v) {
		*out = def;
		return 0;
	}
	if (null_ok && json_is(v, JSON_NULL)) {
		*out = -1;
		return 0;
	}
	char *end = NULL;
	long long x = json_is(v, JSON_INT) ? strtoll(v->u.str, &end, 10) : -1;
	if (!json_is(v, JSON_INT) || v->u.str[0] == '-' || (end && *end) || x < 0 ||
	    x > INT64_C(1) << 53)
		return pith_err_set(err, PITH_EINVAL, "%s: not a non-negative integer", name);
	*out = x;
	return 0;
}

int pith_events_page_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
			   const char *pith, size_t max_events, pith_event_bytes_fn fn, void *arg,
			   int64_t *next_offset, pith_err_t *err)
{
	*next_offset = -1;
	if (!lim)
		lim = &pith_changes_limits_default;
	if (!max_events || max_events > PITH_EVENTS_PAGE_MAX)
		max_events = PITH_EVENTS_PAGE_MAX;
	json_doc_t *doc;
	int rc = doc_parse(buf, len, lim, "events page", &doc, err);
	if (rc)
		return rc;
	const json_value_t *root = json_doc_root(doc);
	const json_value_t *events = json_get(root, "events");
	const char *pn = json_get_str(root, "pith_number");
	int64_t offset = 0, next = -1;
	if (!json_is(root, JSON_OBJECT)) {
		rc = pith_err_set(err, PITH_EINVAL, "events page: not a JSON object");
	} else if (!pn || !pith_number_is_valid(pn)) {
		rc = pith_err_set(err, PITH_EINVAL, "pith_number: missing or not a full pith number");
	} else if (pith && strcmp(pn, pith)) {
		rc = pith_err_set(err, PITH_EINVAL, "pith_number: %s, not the record asked for (%s)", pn,
				  pith);
	} else if (!json_is(events, JSON_ARRAY)) {
		rc = pith_err_set(err, PITH_EINVAL, "events: missing or not an array");
	} else if (events->len > max_events) {
		rc = pith_err_set(err, PITH_ETOOBIG, "events: %zu entries, more than the limit %zu",
				  events->len, max_events);
	} else if (!(rc = offset_get(json_get(root, "offset"), "offset", 0, 0, &offset, err)) &&
		   !(rc = offset_get(json_get(root, "next_offset"), "next_offset", 1, -1, &next, err)) &&
		   next >= 0 && next <= offset) {
		rc = pith_err_set(err, PITH_EINVAL, "next_offset: %lld, not past offset %lld",
				  (long long)next, (long long)offset);
	}
	for (size_t i = 0; !rc && i < events->len; i++)
		if (!json_is(events->u.items[i], JSON_OBJECT))
			rc = pith_err_set(err, PITH_EINVAL, "events[%zu]: not an object", i);
	pith_buf_t b = PITH_BUF_INIT;
	for (size_t i = 0; !rc && i < events->len; i++) {
		pith_buf_reset(&b);
		if (json_canon_write(events->u.items[i], &b) || b.oom)
			rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
		else
			rc = fn(arg, b.data, b.len);
	}
	pith_buf_release(&b);
	json_doc_free(doc);
	if (!rc)
		*next_offset = next;
	return rc;
}
