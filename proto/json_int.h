/* What the parser (json.c) and the canonical writer (json_canon.c) share:
 * the scan over the plain bytes of a string and the order of object keys.
 * Private to proto/: not installed, not included by json.h.
 *
 * The scan is inline on purpose: it is the inner loop of both parsing and
 * writing strings (docs/performance.md, "Validating one event:
 * the verifier"). */
#ifndef PITH_JSON_INT_H
#define PITH_JSON_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "json.h"

/* 1 for bytes that stand for themselves in a string: printable ASCII
 * other than the quote and the backslash. Defined in json.c. */
extern const uint8_t json_plain_ascii[256];

/* Whether any of the 8 bytes in x is a control character, '"' or '\\'
 * (or, with stop_high, a byte >= 0x80): the plain runs of strings are
 * scanned a word at a time. A false positive only sends the scan to the
 * byte loop; a true one is never missed. */
static inline uint64_t word_special(uint64_t x, int stop_high)
{
	const uint64_t ones = UINT64_C(0x0101010101010101), highs = ones << 7;
	uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
	uint64_t m = ((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b);
	return (m | (stop_high ? x : 0)) & highs;
}

/* Bytes from p on that need nothing done: ASCII but controls, '"' and '\\',
 * and with allow_high any byte >= 0x80 too. */
static inline const uint8_t *skip_plain(const uint8_t *p, const uint8_t *end, int allow_high)
{
	uint64_t x;
	while (end - p >= 8) {
		memcpy(&x, p, 8);
		if (word_special(x, !allow_high))
			break;
		p += 8;
	}
	while (p < end && (json_plain_ascii[*p] || (allow_high && *p >= 0x80)))
		p++;
	return p;
}

/* Canonical key order: the key bytes compared as unsigned, a prefix first
 * (UTF-8 byte order is code point order). a and b are json_member_t *;
 * the signature is qsort's. */
static inline int member_cmp(const void *a, const void *b)
{
	const json_member_t *x = a, *y = b;
	size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
	int c = memcmp(x->key, y->key, n);
	if (c)
		return c;
	return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

#endif
