/* Identifiers (spec section 2): digests, hex, base32, pith numbers, key
 * fingerprints, aliases, and the timestamps events carry. */
#ifndef PITH_IDS_H
#define PITH_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "json.h"

#define PITH_BODY_LEN 26          /* base32 characters in a pith number */
#define PITH_NUMBER_LEN 36        /* "pith:YYYY:" + 26 */
#define PITH_EVENT_ID_LEN 71      /* "sha256:" + 64 hex */
#define PITH_FP_LEN 32            /* fingerprint hex characters */

void pith_sha256(const void *data, size_t len, uint8_t out[static 32]);
/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void pith_hex_encode(const uint8_t *in, size_t n, char *out);
/* Strict lower-case hex of exactly 2n characters. 0 or PITH_EINVAL. */
int pith_hex_decode(const char *hex, size_t hexlen, uint8_t *out, size_t n);
/* RFC 4648 base32, upper case, no padding; out gets ceil(8n/5)+1 bytes. */
size_t pith_base32_encode(const uint8_t *in, size_t n, char *out);

/* "pith:" YEAR ":" first 26 base32 chars of digest. year is 4 chars. */
void pith_number_make(const uint8_t digest[static 32], const char year[static 4],
		      char out[static PITH_NUMBER_LEN + 1]);
/* Checks the shape of a full pith number. Returns 1 if well formed. */
int pith_number_is_valid(const char *s);

/* Canonical hash and pith number of a canonical record (the object that
 * metadata.submitted_at lives in). hex_out gets 65 bytes. */
int pith_record_identify(const json_value_t *record, uint8_t digest[static 32],
			 char hex_out[static 65], char pith_out[static PITH_NUMBER_LEN + 1],
			 pith_err_t *err);

/* Key fingerprint: first 32 hex chars of SHA-256(pk); and the base32 form. */
void pith_key_fingerprint(const uint8_t pk[static 32], char out[static PITH_FP_LEN + 1]);
void pith_key_fingerprint_b32(const uint8_t pk[static 32], char out[static 27]);

/* An alias derivable from a record (created_at is registry data, not here). */
typedef struct pith_alias {
	const char *kind; /* static string: "arxiv", "doi", ... */
	char value[160];
} pith_alias_t;

/* Derives the aliases of a record in the registry's published order
 * (alias_kind as strings). Returns how many (at most 6), or negative. */
int pith_record_aliases(const json_value_t *record, const char *pith_number,
			pith_alias_t out[static 6]);

/* Identifier forms a user may type or paste. */
typedef enum pith_id_kind {
	PITH_ID_FULL,   /* pith:2024:AR7B...(26) or the bare 26-char body */
	PITH_ID_SHORT,  /* pith:AR7B3DEV, 8/12/16 chars, or bare */
	PITH_ID_ARXIV,  /* arxiv:2401.14489, arxiv:2401.14489v2, bare arXiv id */
	PITH_ID_DOI,    /* doi:10.48550/arxiv.2401.14489 or bare 10.x */
} pith_id_kind_t;

#define PITH_ID_MAX 199 /* longest identifier text, surrounding blanks aside */

typedef struct pith_id {
	pith_id_kind_t kind;
	char value[200]; /* FULL: body (26); SHORT: body prefix; ARXIV/DOI: text */
	char alias_kind[16]; /* the alias_kind to look up for non-FULL forms */
	/* FULL given with its year (pith:YYYY:BODY, in any wrapper): the
	 * number, which names one record exactly; else "". */
	char number[PITH_NUMBER_LEN + 1];
	/* ARXIV: the id without its version (the upstream resolve API's
	 * arxiv= form) and the version, 0 if none was given; else "" and 0. */
	char arxiv[200];
	unsigned arxiv_version;
} pith_id_t;

/* Decodes n bytes of URL text with percent escapes into out (cap bytes,
 * NUL-terminated). 0, or -1 on a bad escape, a decoded NUL or control
 * byte, or if it does not fit. */
int pith_url_pct_decode(const char *in, size_t n, char *out, size_t cap);

/* Parses any identifier form into *out (zeroed first). Accepted, after
 * leading and trailing blanks are dropped:
 *   pith:YYYY:BODY, BODY (26), pith:SHORT, SHORT (8 to 25, any case);
 *   arXiv ids, new (2401.14489[vN]) and old style (hep-th/9901001[vN]),
 *   bare or after "arxiv:" (any case);
 *   DOIs, bare (10.x/...) or after "doi:" (any case), lower-cased;
 *   URLs (http or https, any case of scheme and host):
 *     arxiv.org, www.arxiv.org, export.arxiv.org: /abs/ID, /pdf/ID[.pdf];
 *     doi.org, dx.doi.org, www.doi.org: /DOI (percent escapes decoded);
 *     pith.science, www.pith.science: /pith/ID[.json|/bundle.json|
 *     /state.json], /.well-known/pith/ID/bundle.json, /paper/ID, with ID
 *     any pith form above;
 *   a URL may carry a query or fragment (ignored) and may omit "https://"
 *   when it starts with one of these hosts.
 * Forms accepted before URLs were (every one without blanks or scheme)
 * give the same kind, value and alias_kind as before. PITH_EINVAL with a
 * message that quotes the input if malformed. */
int pith_id_parse(const char *s, pith_id_t *out, pith_err_t *err);

/* Timestamps: "YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+00:00)". Microseconds since
 * the epoch (digits past the sixth of a fraction are dropped). Returns 0
 * or PITH_EINVAL. Lenient: any year, day up to 31 (29 in February)
 * whatever the month and year, second up to 60. For this node's own
 * stored bytes and for local settings; what a peer sends is checked with
 * pith_time_parse_valid. */
int pith_time_parse(const char *s, int64_t *us);

/* The years a valid timestamp may carry (docs/merge.md, R-TIME): the whole
 * years inside the span reconciliation carries (docs/sync.md: created_us
 * + 2^55 in [0, 2^56 - 1], 0828-04-17T00:49:41Z to 3111-09-16T23:10:18Z). */
#define PITH_TIME_YEAR_MIN 829
#define PITH_TIME_YEAR_MAX 3110

typedef enum pith_time_form {
	PITH_TIME_SECONDS,  /* exactly YYYY-MM-DDTHH:MM:SSZ (created_at) */
	PITH_TIME_FRACTION, /* pith_time_parse's grammar (built_at, signed_at) */
} pith_time_form_t;

/* The one validity rule for the timestamps of events and bundles
 * (created_at, built_at, signed_at), docs/merge.md R-TIME: the grammar of
 * form, a real date of the proleptic Gregorian calendar, hour 00-23,
 * minute and second 00-59, year PITH_TIME_YEAR_MIN to _MAX. *us as
 * pith_time_parse. Returns 0 or PITH_EINVAL. */
int pith_time_parse_valid(const char *s, pith_time_form_t form, int64_t *us);
/* Formats now (UTC) as YYYY-MM-DDTHH:MM:SS.ffffffZ (frac) or ...SSZ. */
void pith_time_now(char out[static 32], int frac);

#endif
