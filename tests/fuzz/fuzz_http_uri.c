/* libFuzzer harness for the HTTP request-target parser (node/render/render_target.c),
 * the function the server runs on every request target a client sends.
 *
 * The input is one request target. Invariants (any broken one aborts):
 * - the result is OK, BAD or TOO_LONG, and TOO_LONG exactly when the input
 *   is over RENDER_TARGET_MAX;
 * - on OK, every segment is non-empty, is not "." or "..", holds '/' only
 *   when marked in enc_slash, and no '\\', NUL, control or non-ASCII byte; every query key
 *   holds no NUL, control or non-ASCII byte, every value no NUL, C0
 *   control, DEL or '\\', and unless the target marks one (bad_key, one of
 *   its keys) every value is valid UTF-8 without C1 controls; all of them
 *   lie inside the target's buffer; counts stay within their limits;
 * - re-encoding is a fixed point: the segments and pairs percent-encoded
 *   again (every byte but unreserved ones) parse back to the same ones. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "render.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static render_target_t t1, t2;

static int inside(const render_target_t *t, const char *p)
{
	return p >= t->buf && p + strlen(p) < t->buf + sizeof(t->buf);
}

/* is_seg: 1 a segment without, 2 a segment with an encoded slash (marked),
 * 0 a query key, 3 a query value (bytes from 0x80 too) */
static void check_text(const char *s, int is_seg)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		FUZZ_CHECK(*p >= 0x20 && *p != 0x7f && (*p < 0x80 || is_seg == 3));
		FUZZ_CHECK(*p != '\\');
		if (is_seg == 1)
			FUZZ_CHECK(*p != '/');
	}
	if (is_seg == 2)
		FUZZ_CHECK(strchr(s, '/') != NULL);
}

/* Percent-encodes everything but unreserved characters. */
static size_t enc(char *out, const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '_' || *p == '~')
			out[n++] = (char)*p;
		else
			n += (size_t)sprintf(out + n, "%%%02X", *p);
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;
	int rc = render_target_parse((const char *)data, size, &t1, &why);
	FUZZ_CHECK(why != NULL);
	FUZZ_CHECK(rc == RENDER_TARGET_OK || rc == RENDER_TARGET_BAD || rc == RENDER_TARGET_TOO_LONG);
	FUZZ_CHECK((rc == RENDER_TARGET_TOO_LONG) == (size > RENDER_TARGET_MAX));
	if (rc != RENDER_TARGET_OK)
		return 0;
	FUZZ_CHECK(t1.nseg <= RENDER_SEGS_MAX && t1.nq <= RENDER_QUERY_MAX);
	for (size_t i = 0; i < t1.nseg; i++) {
		FUZZ_CHECK(inside(&t1, t1.seg[i]));
		FUZZ_CHECK(t1.seg[i][0] != 0);
		FUZZ_CHECK(strcmp(t1.seg[i], ".") && strcmp(t1.seg[i], ".."));
		check_text(t1.seg[i], (t1.enc_slash >> i) & 1 ? 2 : 1);
	}
	for (size_t i = 0; i < t1.nq; i++) {
		FUZZ_CHECK(inside(&t1, t1.q[i].key) && inside(&t1, t1.q[i].val));
		check_text(t1.q[i].key, 0);
		check_text(t1.q[i].val, 3);
		if (!t1.bad_why)
			FUZZ_CHECK(pith_utf8_valid(t1.q[i].val, strlen(t1.q[i].val)));
	}
	if (t1.bad_why) {
		int found = 0;
		for (size_t i = 0; i < t1.nq; i++)
			found |= t1.bad_key == t1.q[i].key;
		FUZZ_CHECK(found);
	}
	/* re-encode (three bytes per byte at most) and parse again */
	static char again[3 * sizeof(t1.buf) + 64];
	size_t n = 0;
	for (size_t i = 0; i < t1.nseg; i++) {
		again[n++] = '/';
		n += enc(again + n, t1.seg[i]);
	}
	if (!t1.nseg || t1.trailing_slash)
		again[n++] = '/';
	for (size_t i = 0; i < t1.nq; i++) {
		again[n++] = i ? '&' : '?';
		n += enc(again + n, t1.q[i].key);
		again[n++] = '=';
		n += enc(again + n, t1.q[i].val);
	}
	if (n > RENDER_TARGET_MAX)
		return 0; /* escaping grew it past the limit: nothing to compare */
	FUZZ_CHECK(render_target_parse(again, n, &t2, &why) == RENDER_TARGET_OK);
	FUZZ_CHECK(t2.nseg == t1.nseg && t2.nq == t1.nq);
	FUZZ_CHECK(t2.trailing_slash == (t1.trailing_slash && t1.nseg > 0));
	for (size_t i = 0; i < t1.nseg; i++)
		FUZZ_CHECK(!strcmp(t1.seg[i], t2.seg[i]));
	for (size_t i = 0; i < t1.nq; i++)
		FUZZ_CHECK(!strcmp(t1.q[i].key, t2.q[i].key) && !strcmp(t1.q[i].val, t2.q[i].val));
	return 0;
}
