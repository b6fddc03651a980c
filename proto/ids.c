#include "ids.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

/* OpenSSL's SHA-256 uses the CPU's SHA extensions where there are some:
 * about 5 times libsodium's portable code on this project's machines, and
 * hashing is most of the cost of validating an event besides the signature
 * (docs/performance.md, "Validating one event: the verifier"). The result is
 * the same SHA-256 either way. */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;
static pthread_key_t sha256_key;

static void sha256_ctx_free(void *ctx)
{
	EVP_MD_CTX_free(ctx);
}

static void sha256_init(void)
{
	/* fetched once: SHA256() would look the algorithm up on every call */
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
	pthread_key_create(&sha256_key, sha256_ctx_free);
}

void pith_sha256(const void *data, size_t len, uint8_t out[static 32])
{
	unsigned int n;
	pthread_once(&sha256_once, sha256_init);
	EVP_MD_CTX *ctx = pthread_getspecific(sha256_key);
	if (!ctx && (ctx = EVP_MD_CTX_new()))
		pthread_setspecific(sha256_key, ctx);
	if (!sha256_md || !ctx || !EVP_DigestInit_ex2(ctx, sha256_md, NULL) ||
	    !EVP_DigestUpdate(ctx, data, len) || !EVP_DigestFinal_ex(ctx, out, &n))
		SHA256(data, len, out);
}

void pith_hex_encode(const uint8_t *in, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 15];
	}
	out[2 * n] = 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int pith_hex_decode(const char *hex, size_t hexlen, uint8_t *out, size_t n)
{
	if (hexlen != 2 * n)
		return PITH_EINVAL;
	for (size_t i = 0; i < n; i++) {
		int h = hexval(hex[2 * i]), l = hexval(hex[2 * i + 1]);
		if (h < 0 || l < 0)
			return PITH_EINVAL;
		out[i] = (uint8_t)(h << 4 | l);
	}
	return 0;
}

size_t pith_base32_encode(const uint8_t *in, size_t n, char *out)
{
	static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 5) {
			out[o++] = al[(acc >> (bits - 5)) & 31];
			bits -= 5;
		}
	}
	if (bits > 0)
		out[o++] = al[(acc << (5 - bits)) & 31];
	out[o] = 0;
	return o;
}

void pith_number_make(const uint8_t digest[static 32], const char year[static 4],
		      char out[static PITH_NUMBER_LEN + 1])
{
	char b32[60];
	pith_base32_encode(digest, 32, b32);
	memcpy(out, "pith:", 5);
	memcpy(out + 5, year, 4);
	out[9] = ':';
	memcpy(out + 10, b32, PITH_BODY_LEN);
	out[PITH_NUMBER_LEN] = 0;
}

static int is_b32(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '2' && s[i] <= '7')))
			return 0;
	return 1;
}

int pith_number_is_valid(const char *s)
{
	if (strlen(s) != PITH_NUMBER_LEN || memcmp(s, "pith:", 5) || s[9] != ':')
		return 0;
	for (int i = 5; i < 9; i++)
		if (!isdigit((unsigned char)s[i]))
			return 0;
	return is_b32(s + 10, PITH_BODY_LEN);
}

int pith_record_identify(const json_value_t *record, uint8_t digest[static 32],
			 char hex_out[static 65], char pith_out[static PITH_NUMBER_LEN + 1],
			 pith_err_t *err)
{
	if (!json_is(record, JSON_OBJECT))
		return pith_err_set(err, PITH_EINVAL, "canonical_record: not an object");
	const char *sub = json_get_str(json_get(record, "metadata"), "submitted_at");
	if (!sub || strlen(sub) < 4 || !isdigit((unsigned char)sub[0]) ||
	    !isdigit((unsigned char)sub[1]) || !isdigit((unsigned char)sub[2]) ||
	    !isdigit((unsigned char)sub[3]))
		return pith_err_set(err, PITH_EINVAL,
				    "canonical_record.metadata.submitted_at: missing or not a date");
	pith_buf_t b = PITH_BUF_INIT;
	if (json_canon_write(record, &b)) {
		pith_buf_release(&b);
		return pith_err_set(err, PITH_ENOMEM, "canonical_record: cannot canonicalise");
	}
	pith_sha256(b.data, b.len, digest);
	pith_buf_release(&b);
	pith_hex_encode(digest, 32, hex_out);
	pith_number_make(digest, sub, pith_out);
	return 0;
}

void pith_key_fingerprint(const uint8_t pk[static 32], char out[static PITH_FP_LEN + 1])
{
	uint8_t d[32];
	char hex[65];
	pith_sha256(pk, 32, d);
	pith_hex_encode(d, 32, hex);
	memcpy(out, hex, PITH_FP_LEN);
	out[PITH_FP_LEN] = 0;
}

void pith_key_fingerprint_b32(const uint8_t pk[static 32], char out[static 27])
{
	uint8_t d[32];
	char b32[60];
	pith_sha256(pk, 32, d);
	pith_base32_encode(d, 32, b32);
	memcpy(out, b32, 26);
	out[26] = 0;
}

int pith_record_aliases(const json_value_t *record, const char *pith_number,
			pith_alias_t out[static 6])
{
	int n = 0;
	/* an arXiv record (docs/merge.md, B-ALIASES-DERIVED): source an
	 * object whose kind is the string "arxiv" and whose id is a string
	 * of 1 to 99 bytes without NUL; arxiv_version only when version is an
	 * integer whose canonical text (-0 is 0) has at most 20 bytes */
	const json_value_t *src = json_get_type(record, "source", JSON_OBJECT);
	const json_value_t *kv = json_get_type(src, "kind", JSON_STRING);
	const json_value_t *iv = json_get_type(src, "id", JSON_STRING);
	const json_value_t *ver = json_get_type(src, "version", JSON_INT);
	const char *id = iv ? iv->u.str : NULL;
	if (kv && iv && kv->len == 5 && !memcmp(kv->u.str, "arxiv", 5) && iv->len >= 1 &&
	    iv->len < 100 && strlen(id) == iv->len) {
		out[n].kind = "arxiv";
		snprintf(out[n++].value, sizeof(out[0].value), "%s", id);
		pith_buf_t vt = PITH_BUF_INIT;
		if (ver && !json_canon_write(ver, &vt) && vt.len <= 20) {
			out[n].kind = "arxiv_version";
			snprintf(out[n++].value, sizeof(out[0].value), "%sv%.*s", id, (int)vt.len,
				 (const char *)vt.data);
		}
		pith_buf_release(&vt);
		out[n].kind = "doi";
		snprintf(out[n++].value, sizeof(out[0].value), "10.48550/arxiv.%s", id);
	}
	if (!pith_number_is_valid(pith_number))
		return n;
	const char *body = pith_number + 10;
	static const char *const kinds[] = {"pith_short_12", "pith_short_16", "pith_short_8"};
	static const int lens[] = {12, 16, 8};
	for (int i = 0; i < 3; i++) {
		out[n].kind = kinds[i];
		snprintf(out[n++].value, sizeof(out[0].value), "%.*s", lens[i], body);
	}
	return n;
}

static void lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

static int is_arxiv_id(const char *s)
{
	/* new style: YYMM.NNNN or YYMM.NNNNN, optional vN */
	size_t i = 0;
	while (isdigit((unsigned char)s[i]))
		i++;
	if (i == 4 && s[4] == '.') {
		size_t j = 5;
		while (isdigit((unsigned char)s[j]))
			j++;
		if (j - 5 < 4 || j - 5 > 5)
			return 0;
		if (s[j] == 0)
			return 1;
		if (s[j] != 'v' || !isdigit((unsigned char)s[j + 1]))
			return 0;
		for (j++; isdigit((unsigned char)s[j]); j++)
			;
		return s[j] == 0;
	}
	/* old style: archive[.XX]/YYMMNNN */
	const char *slash = strchr(s, '/');
	if (!slash || slash == s)
		return 0;
	for (const char *p = s; p < slash; p++)
		if (!(islower((unsigned char)*p) || *p == '-' || *p == '.' ||
		      isupper((unsigned char)*p)))
			return 0;
	const char *d = slash + 1;
	size_t k = 0;
	while (isdigit((unsigned char)d[k]))
		k++;
	if (k != 7)
		return 0;
	if (d[k] == 0)
		return 1;
	if (d[k] != 'v' || !isdigit((unsigned char)d[k + 1]))
		return 0;
	for (k++; isdigit((unsigned char)d[k]); k++)
		;
	return d[k] == 0;
}

/* The forms without a URL or blanks around them: those pith_id_parse took
 * before it read URLs, with the same results. out is zeroed. */
static int id_parse_plain(const char *s, pith_id_t *out, pith_err_t *err)
{
	size_t n = strlen(s);
	if (n == 0 || n >= sizeof(out->value))
		return pith_err_set(err, PITH_EINVAL, "identifier: empty or longer than %zu bytes",
				    sizeof(out->value) - 1);
	if (!strncmp(s, "pith:", 5)) {
		const char *b = s + 5;
		size_t bl = strlen(b);
		if (bl == PITH_BODY_LEN + 5 && isdigit((unsigned char)b[0]) && b[4] == ':') {
			if (!pith_number_is_valid(s))
				return pith_err_set(err, PITH_EINVAL, "identifier: malformed pith number '%s'", s);
			out->kind = PITH_ID_FULL;
			memcpy(out->value, b + 5, PITH_BODY_LEN + 1);
			memcpy(out->number, s, PITH_NUMBER_LEN + 1);
			return 0;
		}
		s = b;
		n = bl;
	} else if (!strncasecmp(s, "arxiv:", 6)) {
		if (!is_arxiv_id(s + 6))
			return pith_err_set(err, PITH_EINVAL, "identifier: malformed arXiv id '%s'", s + 6);
		out->kind = PITH_ID_ARXIV;
		strcpy(out->value, s + 6);
		strcpy(out->alias_kind, strchr(strchr(out->value, '/') ? strchr(out->value, '/') : out->value, 'v') ? "arxiv_version" : "arxiv");
		return 0;
	} else if (!strncasecmp(s, "doi:", 4)) {
		if (strncmp(s + 4, "10.", 3) || strlen(s + 4) < 5)
			return pith_err_set(err, PITH_EINVAL, "identifier: malformed DOI '%s'", s + 4);
		out->kind = PITH_ID_DOI;
		strcpy(out->value, s + 4);
		lower(out->value);
		strcpy(out->alias_kind, "doi");
		return 0;
	} else if (!strncmp(s, "10.", 3) && strchr(s, '/')) {
		out->kind = PITH_ID_DOI;
		strcpy(out->value, s);
		lower(out->value);
		strcpy(out->alias_kind, "doi");
		return 0;
	} else if (is_arxiv_id(s)) {
		out->kind = PITH_ID_ARXIV;
		strcpy(out->value, s);
		strcpy(out->alias_kind, strchr(strchr(s, '/') ? strchr(s, '/') : s, 'v') ? "arxiv_version" : "arxiv");
		return 0;
	}
	/* a body or a prefix of one; accept lower case as typed by people */
	char up[sizeof(out->value)];
	for (size_t i = 0; i <= n; i++)
		up[i] = (char)toupper((unsigned char)s[i]);
	if (n < 8 || n > PITH_BODY_LEN || !is_b32(up, n))
		return pith_err_set(err, PITH_EINVAL,
				    "identifier: '%s' is not a pith number, short pith number, arXiv id or DOI", s);
	memcpy(out->value, up, n + 1);
	if (n == PITH_BODY_LEN) {
		out->kind = PITH_ID_FULL;
	} else {
		out->kind = PITH_ID_SHORT;
		if (n == 8 || n == 12 || n == 16)
			snprintf(out->alias_kind, sizeof(out->alias_kind), "pith_short_%zu", n);
	}
	return 0;
}

/* ---- pasted forms: blanks around, URLs ---------------------------------- */

/* Copies s into out (cap bytes) for a message: bytes that are not
 * printable ASCII become '?', so that a message never carries control
 * bytes from the input. */
static const char *id_quote(const char *s, char *out, size_t cap)
{
	size_t i = 0;
	for (; s[i] && i + 1 < cap; i++)
		out[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	out[i] = 0;
	return out;
}

static int id_url_fail(const char *input, const char *why, pith_err_t *err)
{
	char q[PITH_ID_MAX + 1];
	return pith_err_set(err, PITH_EINVAL, "identifier: '%s': %s",
			    id_quote(input, q, sizeof(q)), why);
}

/* Decodes n bytes of URL text with percent escapes into out (cap bytes,
 * NUL-terminated). -1 on a bad escape, a decoded NUL or control byte, or
 * if it does not fit. */
int pith_url_pct_decode(const char *in, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c == '%') {
			if (i + 2 >= n)
				return -1;
			int h = hexval((char)tolower((unsigned char)in[i + 1]));
			int l = hexval((char)tolower((unsigned char)in[i + 2]));
			if (h < 0 || l < 0)
				return -1;
			c = (unsigned char)(h << 4 | l);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f || o + 1 >= cap)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = 0;
	return 0;
}

typedef enum id_site { SITE_NONE, SITE_ARXIV, SITE_DOI, SITE_PITH } id_site_t;

static const struct {
	const char *host;
	id_site_t site;
} id_hosts[] = {
	{"arxiv.org", SITE_ARXIV},  {"www.arxiv.org", SITE_ARXIV}, {"export.arxiv.org", SITE_ARXIV},
	{"doi.org", SITE_DOI},      {"dx.doi.org", SITE_DOI},      {"www.doi.org", SITE_DOI},
	{"pith.science", SITE_PITH}, {"www.pith.science", SITE_PITH},
};

/* The site of host (hl bytes, any case), SITE_NONE if not one we know. */
static id_site_t id_site_of(const char *host, size_t hl)
{
	for (size_t i = 0; i < sizeof(id_hosts) / sizeof(id_hosts[0]); i++)
		if (strlen(id_hosts[i].host) == hl && !strncasecmp(host, id_hosts[i].host, hl))
			return id_hosts[i].site;
	return SITE_NONE;
}

/* Does s end with suffix (any case)? Then its length without it. */
static int id_strip_suffix(const char *s, size_t *n, const char *suffix)
{
	size_t sl = strlen(suffix);
	if (*n <= sl || strncasecmp(s + *n - sl, suffix, sl))
		return 0;
	*n -= sl;
	return 1;
}

/* An arxiv.org path: /abs/ID or /pdf/ID[.pdf], ID new or old style. */
static int id_parse_arxiv_path(const char *input, const char *path, size_t pl, pith_id_t *out,
			       pith_err_t *err)
{
	const char *id;
	size_t n;
	if (pl > 5 && (!strncasecmp(path, "/abs/", 5) || !strncasecmp(path, "/pdf/", 5))) {
		id = path + 5;
		n = pl - 5;
	} else {
		return id_url_fail(input, "an arxiv.org URL names a paper as /abs/ID or /pdf/ID", err);
	}
	if (n && id[n - 1] == '/')
		n--;
	if (!strncasecmp(path, "/pdf/", 5))
		id_strip_suffix(id, &n, ".pdf");
	char buf[8 + PITH_ID_MAX + 1] = "arxiv:";
	if (pith_url_pct_decode(id, n, buf + 6, sizeof(buf) - 6) || !is_arxiv_id(buf + 6))
		return id_url_fail(input, "no arXiv id in this arxiv.org URL", err);
	return id_parse_plain(buf, out, err);
}

/* A doi.org path: /DOI, percent escapes decoded (10.48550%2Farxiv...). */
static int id_parse_doi_path(const char *input, const char *path, size_t pl, pith_id_t *out,
			     pith_err_t *err)
{
	char buf[8 + PITH_ID_MAX + 1] = "doi:";
	if (pl < 2 || pith_url_pct_decode(path + 1, pl - 1, buf + 4, sizeof(buf) - 4) ||
	    strncmp(buf + 4, "10.", 3) || !strchr(buf + 4, '/') || buf[strlen(buf) - 1] == '/')
		return id_url_fail(input, "no DOI (10.NNNN/...) in this doi.org URL", err);
	return id_parse_plain(buf, out, err);
}

/* A pith.science path naming a record: the views the registry links to. */
static int id_parse_pith_path(const char *input, const char *path, size_t pl, pith_id_t *out,
			      pith_err_t *err)
{
	enum { NSEG = 5 };
	const char *seg[NSEG];
	size_t len[NSEG], ns = 0;
	for (size_t i = 0; i < pl;) {
		size_t j = i + 1;
		while (j < pl && path[j] != '/')
			j++;
		if (j - i - 1 > 0) { /* "/pith/X/" : the empty tail is no segment */
			if (ns == NSEG)
				goto bad;
			seg[ns] = path + i + 1;
			len[ns++] = j - i - 1;
		} else if (j < pl) {
			goto bad; /* "//" inside the path */
		}
		i = j;
	}
#define SEG_IS(k, lit) (len[k] == strlen(lit) && !strncmp(seg[k], lit, len[k]))
	size_t at;
	if (ns == 2 && SEG_IS(0, "pith")) {
		at = 1;
		id_strip_suffix(seg[1], &len[1], ".json");
	} else if (ns == 3 && SEG_IS(0, "pith") && (SEG_IS(2, "bundle.json") || SEG_IS(2, "state.json"))) {
		at = 1;
	} else if (ns == 4 && SEG_IS(0, ".well-known") && SEG_IS(1, "pith") && SEG_IS(3, "bundle.json")) {
		at = 2;
	} else if (ns == 2 && SEG_IS(0, "paper")) {
		at = 1;
	} else {
		goto bad;
	}
#undef SEG_IS
	char id[PITH_ID_MAX + 1];
	if (pith_url_pct_decode(seg[at], len[at], id, sizeof(id)) || id_parse_plain(id, out, NULL) ||
	    (out->kind != PITH_ID_FULL && out->kind != PITH_ID_SHORT)) {
		memset(out, 0, sizeof(*out));
		return id_url_fail(input, "no pith number in this pith.science URL", err);
	}
	return 0;
bad:
	return id_url_fail(input,
			   "a pith.science URL names a record as /pith/ID, /pith/ID.json, "
			   "/pith/ID/bundle.json, /pith/ID/state.json, "
			   "/.well-known/pith/ID/bundle.json or /paper/ID",
			   err);
}

/* s is a URL (scheme given or a known host first) if this returns 1; then
 * *out holds the identifier it names or the error is set in *rc. */
static int id_parse_url(const char *s, pith_id_t *out, int *rc, pith_err_t *err)
{
	const char *rest;
	if (!strncasecmp(s, "https://", 8))
		rest = s + 8;
	else if (!strncasecmp(s, "http://", 7))
		rest = s + 7;
	else
		rest = s;
	size_t hl = strcspn(rest, "/?#");
	id_site_t site = id_site_of(rest, hl);
	if (rest == s && (site == SITE_NONE || rest[hl] != '/'))
		return 0; /* no scheme and no known host: not a URL */
	if (site == SITE_NONE) {
		*rc = id_url_fail(s, "a URL of neither arxiv.org, doi.org nor pith.science", err);
		return 1;
	}
	const char *path = rest + hl;
	size_t pl = strcspn(path, "?#"); /* query and fragment name no record */
	if (site == SITE_ARXIV)
		*rc = id_parse_arxiv_path(s, path, pl, out, err);
	else if (site == SITE_DOI)
		*rc = id_parse_doi_path(s, path, pl, out, err);
	else
		*rc = id_parse_pith_path(s, path, pl, out, err);
	return 1;
}

/* Splits an arXiv id in out->value into out->arxiv and out->arxiv_version. */
static void id_arxiv_split(pith_id_t *out)
{
	const char *v = out->value, *slash = strchr(v, '/');
	const char *ver = strchr(slash ? slash : v, 'v');
	size_t n = ver ? (size_t)(ver - v) : strlen(v);
	memcpy(out->arxiv, v, n);
	out->arxiv[n] = 0;
	unsigned long x = 0;
	for (const char *p = ver ? ver + 1 : ""; *p; p++)
		x = x >= 100000000ul ? 4000000000ul : x * 10 + (unsigned long)(*p - '0');
	out->arxiv_version = x > 4000000000ul ? 4000000000u : (unsigned)x; /* saturates */
}

int pith_id_parse(const char *s, pith_id_t *out, pith_err_t *err)
{
	memset(out, 0, sizeof(*out));
	/* blanks around an identifier come with pasting; inside one, they
	 * are an error below */
	while (*s && isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (n == 0 || n > PITH_ID_MAX)
		return pith_err_set(err, PITH_EINVAL, "identifier: empty or longer than %d bytes",
				    PITH_ID_MAX);
	char t[PITH_ID_MAX + 1];
	memcpy(t, s, n);
	t[n] = 0;
	int rc;
	if (!id_parse_url(t, out, &rc, err))
		rc = id_parse_plain(t, out, err);
	if (rc) {
		memset(out, 0, sizeof(*out));
		return rc;
	}
	if (out->kind == PITH_ID_ARXIV)
		id_arxiv_split(out);
	return 0;
}

static int digits(const char *s, int n, int *v)
{
	int x = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		x = x * 10 + (s[i] - '0');
	}
	*v = x;
	return 0;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar. */
static int64_t days_from_civil(int y, int m, int d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int is_leap(int y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* pith_time_parse (strict 0) and pith_time_parse_valid (strict 1). */
static int time_parse(const char *s, int strict, int64_t *us)
{
	int Y, M, D, h, m, sec;
	if (strlen(s) < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) ||
	    s[7] != '-' || digits(s + 8, 2, &D) || s[10] != 'T' || digits(s + 11, 2, &h) ||
	    s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' || digits(s + 17, 2, &sec))
		return PITH_EINVAL;
	static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h > 23 || m > 59 || sec > 60)
		return PITH_EINVAL;
	/* what older builds let through stays readable in their stores; a
	 * peer's timestamp must name a real second (R-TIME) */
	static const int real_mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int dim = real_mdays[M - 1] + (M == 2 && is_leap(Y));
	if (strict && (sec > 59 || D > dim || Y < PITH_TIME_YEAR_MIN || Y > PITH_TIME_YEAR_MAX))
		return PITH_EINVAL;
	const char *p = s + 19;
	int64_t frac = 0;
	if (*p == '.') {
		int nd = 0;
		for (p++; isdigit((unsigned char)*p); p++, nd++) {
			if (nd < 6)
				frac = frac * 10 + (*p - '0');
			if (nd >= 9)
				return PITH_EINVAL;
		}
		if (nd == 0)
			return PITH_EINVAL;
		for (; nd < 6; nd++)
			frac *= 10;
	}
	if (strcmp(p, "Z") && strcmp(p, "+00:00"))
		return PITH_EINVAL;
	int64_t t = days_from_civil(Y, M, D) * 86400 + h * 3600 + m * 60 + sec;
	*us = t * 1000000 + frac;
	return 0;
}

int pith_time_parse(const char *s, int64_t *us)
{
	return time_parse(s, 0, us);
}

int pith_time_parse_valid(const char *s, pith_time_form_t form, int64_t *us)
{
	if (form == PITH_TIME_SECONDS && (strlen(s) != 20 || s[19] != 'Z'))
		return PITH_EINVAL;
	return time_parse(s, 1, us);
}

void pith_time_now(char out[static 32], int frac)
{
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac)
		snprintf(out + n, 32 - n, ".%06ldZ", (long)tv.tv_usec);
	else
		snprintf(out + n, 32 - n, "Z");
}
