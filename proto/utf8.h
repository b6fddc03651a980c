/* UTF-8 (RFC 3629), strictly: no overlong forms, no UTF-16 surrogates,
 * nothing past U+10FFFF. What the HTML escaper, the request-target parser
 * and the search query share (json.c keeps an inlined one of its own in
 * its parser's hot loop). */
#ifndef PITH_UTF8_H
#define PITH_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1..4) of the valid UTF-8 sequence at p (n bytes left, n > 0),
 * or 0 when it is not one; *cp (may be NULL) gets its code point. */
size_t pith_utf8_char(const void *p, size_t n, uint32_t *cp);

/* 1 when s[0..n) is valid UTF-8 throughout, else 0. */
int pith_utf8_valid(const void *s, size_t n);

#endif
