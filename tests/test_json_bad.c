/* test_json_bad: every way the JSON parser refuses a document, with the
 * error code, the message and the byte offset it reports.
 *
 * Spec section 1: a mirror rejects what Python would silently accept in a
 * different shape (duplicate keys, lone surrogates, NaN, overflow) and
 * anything malformed, oversized or too deep, naming what failed and where. */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "test_util.h"

/* Parses len bytes of in under lim and checks the refusal: code, a message
 * containing what (and "at byte OFF" for parse errors), and err.offset. */
static void check_reject(const char *file, int line, const char *in, size_t len,
			 const json_limits_t *lim, int code, const char *what,
			 size_t off)
{
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	char shown[160];
	test_escape_(shown, sizeof(shown), (const uint8_t *)in, len > 60 ? 60 : len);
	int rc = json_parse(&doc, (const uint8_t *)in, len, lim, &err);
	if (rc == 0) {
		test_fail_(file, line, "accepted \"%s\", expected \"%s\"", shown, what);
		json_doc_free(doc);
		return;
	}
	if (doc)
		test_fail_(file, line, "\"%s\": failed parse left a document", shown);
	if (rc != code)
		test_fail_(file, line, "\"%s\": code %d (%s), expected %d (%s)", shown, rc,
			   pith_err_name(rc), code, pith_err_name(code));
	if (err.code != rc)
		test_fail_(file, line, "\"%s\": err.code %d differs from the return %d",
			   shown, err.code, rc);
	if (!strstr(err.msg, what))
		test_fail_(file, line, "\"%s\": message \"%s\" lacks \"%s\"", shown, err.msg, what);
	if (strncmp(err.msg, "JSON: ", 6) != 0)
		test_fail_(file, line, "\"%s\": message \"%s\" lacks the JSON: prefix", shown,
			   err.msg);
	if (err.offset != off)
		test_fail_(file, line, "\"%s\": offset %zu, expected %zu (%s)", shown,
			   err.offset, off, err.msg);
	char at[48];
	snprintf(at, sizeof(at), "at byte %zu", off);
	if (code != PITH_ETOOBIG || !strstr(what, "exceeds"))
		if (!strstr(err.msg, at))
			test_fail_(file, line, "\"%s\": message \"%s\" lacks \"%s\"", shown,
				   err.msg, at);
}

/* in is a string literal (may hold NULs); default limits. */
#define REJECTS(in, code, what, off)                                           \
	check_reject(__FILE__, __LINE__, (in), sizeof(in) - 1, NULL, (code), (what), (off))
#define REJECTS_LIM(in, lim, code, what, off)                                  \
	check_reject(__FILE__, __LINE__, (in), sizeof(in) - 1, (lim), (code), (what), (off))

static int parses(const char *in, size_t len, const json_limits_t *lim)
{
	json_doc_t *doc = NULL;
	int rc = json_parse(&doc, (const uint8_t *)in, len, lim, NULL);
	json_doc_free(doc);
	return rc == 0;
}
#define ACCEPTS(in) CHECK(parses((in), sizeof(in) - 1, NULL))
#define ACCEPTS_LIM(in, lim) CHECK(parses((in), sizeof(in) - 1, (lim)))

TEST(rejects_duplicate_keys, "rejects duplicate keys at the later key's offset, nested and escaped too")
{
	REJECTS("{\"a\":1,\"a\":2}", PITH_EINVAL, "duplicate key \"a\"", 7);
	REJECTS("{\"a\":1,\"b\":0,\"a\":2}", PITH_EINVAL, "duplicate key \"a\"", 13);
	REJECTS("{\"x\":{\"b\":1,\"c\":2,\"b\":3}}", PITH_EINVAL, "duplicate key \"b\"", 18);
	REJECTS("[0,{\"k\":[{\"q\":1,\"q\":1}]}]", PITH_EINVAL, "duplicate key \"q\"", 16);
	REJECTS("{\"a\":1,\"\\u0061\":2}", PITH_EINVAL, "duplicate key \"a\"", 7);
	REJECTS("{\"\xc3\xa9\":1,\"\\u00e9\":2}", PITH_EINVAL, "duplicate key", 8);
	REJECTS("{\"\":1,\"\":2}", PITH_EINVAL, "duplicate key \"\"", 6);
	REJECTS("{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x80\":2}", PITH_EINVAL, "duplicate key", 18);
	/* after the unsorted-insertion threshold the check still holds */
	REJECTS("{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,"
		"\"j\":1,\"k\":1,\"l\":1,\"m\":1,\"n\":1,\"o\":1,\"p\":1,\"q\":1,\"a\":1}",
		PITH_EINVAL, "duplicate key \"a\"", 103);
	/* keys that differ only after a NUL are distinct */
	ACCEPTS("{\"a\\u0000b\":1,\"a\\u0000c\":2,\"a\":3}");
	ACCEPTS("{\"a\":{\"a\":{\"a\":1}}}");
}

TEST(rejects_invalid_utf8, "rejects invalid UTF-8 in strings at the offending byte")
{
	REJECTS("\"\xc0\xaf\"", PITH_EINVAL, "invalid UTF-8", 1);         /* overlong '/' */
	REJECTS("\"\xc1\xbf\"", PITH_EINVAL, "invalid UTF-8", 1);         /* overlong */
	REJECTS("\"ab\xe0\x80\xaf\"", PITH_EINVAL, "invalid UTF-8", 3);   /* overlong 3 */
	REJECTS("\"\xe0\x9f\xbf\"", PITH_EINVAL, "invalid UTF-8", 1);     /* overlong 3 */
	REJECTS("\"\xf0\x80\x80\xaf\"", PITH_EINVAL, "invalid UTF-8", 1); /* overlong 4 */
	REJECTS("\"\xf0\x8f\xbf\xbf\"", PITH_EINVAL, "invalid UTF-8", 1); /* overlong 4 */
	REJECTS("\"\xed\xa0\x80\"", PITH_EINVAL, "invalid UTF-8", 1);     /* U+D800 */
	REJECTS("\"\xed\xbf\xbf\"", PITH_EINVAL, "invalid UTF-8", 1);     /* U+DFFF */
	REJECTS("\"\xed\xa0\xbd\xed\xb8\x80\"", PITH_EINVAL, "invalid UTF-8", 1); /* CESU */
	REJECTS("\"\xf4\x90\x80\x80\"", PITH_EINVAL, "invalid UTF-8", 1); /* U+110000 */
	REJECTS("\"\xf5\x80\x80\x80\"", PITH_EINVAL, "invalid UTF-8", 1);
	REJECTS("\"\xf7\xbf\xbf\xbf\"", PITH_EINVAL, "invalid UTF-8", 1);
	REJECTS("\"\xf8\x88\x80\x80\x80\"", PITH_EINVAL, "invalid UTF-8", 1);
	REJECTS("\"\xfe\"", PITH_EINVAL, "invalid UTF-8", 1);
	REJECTS("\"\xff\"", PITH_EINVAL, "invalid UTF-8", 1);
	REJECTS("\"x\x80\"", PITH_EINVAL, "invalid UTF-8", 2);            /* stray continuation */
	REJECTS("\"\xc3\xa9\xbf\"", PITH_EINVAL, "invalid UTF-8", 3);     /* one too many */
	REJECTS("\"\xe2\x82\"", PITH_EINVAL, "invalid UTF-8", 1);         /* truncated 3 */
	REJECTS("\"\xf0\x9f\x98\"", PITH_EINVAL, "invalid UTF-8", 1);     /* truncated 4 */
	REJECTS("\"\xc3\"", PITH_EINVAL, "invalid UTF-8", 1);             /* truncated 2 */
	REJECTS("\"\xc3", PITH_EINVAL, "invalid UTF-8", 1);               /* at the very end */
	REJECTS("\"\xf0\x9f\x98", PITH_EINVAL, "invalid UTF-8", 1);
	REJECTS("\"\xe2\x82x\"", PITH_EINVAL, "invalid UTF-8", 1);
	REJECTS("{\"k\xff\":1}", PITH_EINVAL, "invalid UTF-8", 3);        /* in a key */
	/* outside strings any non-ASCII byte is simply unexpected */
	REJECTS("\xc3\xa9", PITH_EINVAL, "unexpected character", 0);
	REJECTS("[1,\xe2\x80\xa8]", PITH_EINVAL, "unexpected character", 3);
	/* the boundaries themselves are fine */
	ACCEPTS("\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf"
		"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"");
}

TEST(rejects_lone_surrogates, "rejects lone high and low surrogate escapes at the escape")
{
	REJECTS("\"\\ud800\"", PITH_EINVAL, "lone high surrogate", 1);
	REJECTS("\"ab\\uDBFF\"", PITH_EINVAL, "lone high surrogate", 3);
	REJECTS("\"\\udc00\"", PITH_EINVAL, "lone low surrogate", 1);
	REJECTS("\"ab\\uDFFF\"", PITH_EINVAL, "lone low surrogate", 3);
	REJECTS("\"\\ud800\\u0041\"", PITH_EINVAL, "lone high surrogate", 1);
	REJECTS("\"\\ud800\\ud800\\udc00\"", PITH_EINVAL, "lone high surrogate", 1);
	REJECTS("\"\\ud800x\\udc00\"", PITH_EINVAL, "lone high surrogate", 1);
	REJECTS("\"\\ud800\\n\"", PITH_EINVAL, "lone high surrogate", 1);
	REJECTS("\"\\ud800\\\"", PITH_EINVAL, "lone high surrogate", 1);
	REJECTS("\"\\ud83d\\ude00\\ude00\"", PITH_EINVAL, "lone low surrogate", 13);
	REJECTS("{\"\\udc00\":1}", PITH_EINVAL, "lone low surrogate", 2);
	/* a high surrogate escape at the end of the input */
	REJECTS("\"\\ud800", PITH_EINVAL, "lone high surrogate", 1);
}

TEST(rejects_nan_and_infinity, "rejects NaN, Infinity and -Infinity")
{
	REJECTS("NaN", PITH_EINVAL, "NaN is not allowed", 0);
	REJECTS("[1,NaN]", PITH_EINVAL, "NaN is not allowed", 3);
	REJECTS("Infinity", PITH_EINVAL, "Infinity is not allowed", 0);
	REJECTS("-Infinity", PITH_EINVAL, "Infinity is not allowed", 0);
	REJECTS("{\"a\": -Infinity}", PITH_EINVAL, "Infinity is not allowed", 6);
	REJECTS("-NaN", PITH_EINVAL, "invalid number", 1);
	REJECTS("nan", PITH_EINVAL, "invalid literal", 0);
}

TEST(rejects_overflowing_numbers, "rejects numbers that overflow a double, at the number")
{
	REJECTS("1e400", PITH_EINVAL, "number overflows a double", 0);
	REJECTS("-1e400", PITH_EINVAL, "number overflows a double", 0);
	REJECTS("[0, -1E+400]", PITH_EINVAL, "number overflows a double", 4);
	REJECTS("1.8e308", PITH_EINVAL, "number overflows a double", 0);
	REJECTS("{\"x\":17976931348623159077293051907890247336179769789423065727343008"
		"115773267580550096313270847732240753602112011387987139335765878976881441"
		"662249284743063947412437776789342486548527630221960124609411945308295208"
		"500576883815068234246288147391311054082723716335051068458629823994724593"
		"8479716304835356329624224137216.0}",
		PITH_EINVAL, "number overflows a double", 5);
	REJECTS("1e99999999999999999999999", PITH_EINVAL, "number overflows a double", 0);
	/* the largest double and underflow to zero are fine */
	ACCEPTS("1.7976931348623157e308");
	ACCEPTS("1e-99999999999999999999999");
	ACCEPTS("-1e-400");
}

TEST(rejects_trailing_garbage, "rejects anything but whitespace after the document")
{
	REJECTS("{} x", PITH_EINVAL, "trailing data after the document", 3);
	REJECTS("1 2", PITH_EINVAL, "trailing data", 2);
	REJECTS("[]]", PITH_EINVAL, "trailing data", 2);
	REJECTS("nullx", PITH_EINVAL, "trailing data", 4);
	REJECTS("\"a\"\"b\"", PITH_EINVAL, "trailing data", 3);
	REJECTS("01", PITH_EINVAL, "trailing data", 1);
	REJECTS("-012", PITH_EINVAL, "trailing data", 2);
	REJECTS("{}\0", PITH_EINVAL, "trailing data", 2);
	REJECTS("{} \f", PITH_EINVAL, "trailing data", 3);
	REJECTS("{}\xef\xbb\xbf", PITH_EINVAL, "trailing data", 2);
	ACCEPTS("{} \t\r\n");
}

TEST(rejects_deep_nesting, "rejects nesting deeper than the limit at the first bracket too many")
{
	json_limits_t lim = json_limits_default;
	lim.max_depth = 4;
	ACCEPTS_LIM("[[[[1]]]]", &lim);
	ACCEPTS_LIM("{\"a\":[{\"b\":[]}]}", &lim);
	REJECTS_LIM("[[[[[1]]]]]", &lim, PITH_ETOOBIG, "nesting too deep", 4);
	REJECTS_LIM("{\"a\":[{\"b\":[{}]}]}", &lim, PITH_ETOOBIG, "nesting too deep", 12);
	/* siblings do not add up */
	ACCEPTS_LIM("[[[1]],[[2]],[[[]]]]", &lim);
	/* the default is 128 */
	char buf[300];
	memset(buf, '[', 128);
	memset(buf + 128, ']', 128);
	CHECK(parses(buf, 256, NULL));
	memset(buf, '[', 129);
	memset(buf + 129, ']', 129);
	check_reject(__FILE__, __LINE__, buf, 258, NULL, PITH_ETOOBIG, "nesting too deep", 128);
	/* depth is checked before the recursion, so a huge input cannot blow the stack */
	size_t n = 1u << 20;
	char *deep = malloc(n);
	memset(deep, '[', n);
	check_reject(__FILE__, __LINE__, deep, n, NULL, PITH_ETOOBIG, "nesting too deep", 128);
	free(deep);
}

TEST(rejects_oversized_documents, "rejects a document over max_bytes before parsing it")
{
	json_limits_t lim = json_limits_default;
	lim.max_bytes = 10;
	ACCEPTS_LIM("[1,2,3,45]", &lim);
	REJECTS_LIM("[1,2,3,456]", &lim, PITH_ETOOBIG,
		    "document of 11 bytes exceeds the limit of 10", 10);
	/* even when the bytes are not JSON at all */
	REJECTS_LIM("xxxxxxxxxxxxxxxx", &lim, PITH_ETOOBIG, "exceeds the limit", 10);
}

TEST(rejects_huge_integers, "rejects integers of more than 4300 digits, as Python does")
{
	size_t n = 4301;
	char *b = malloc(n + 8);
	b[0] = '[';
	b[1] = '-';
	memset(b + 2, '7', n);
	b[n + 2] = ']';
	/* 4301 digits, negative, inside an array */
	check_reject(__FILE__, __LINE__, b, n + 3, NULL, PITH_ETOOBIG,
		     "integer has too many digits", 1);
	/* 4301 digits positive */
	check_reject(__FILE__, __LINE__, b + 2, n, NULL, PITH_ETOOBIG,
		     "integer has too many digits", 0);
	/* 4300 digits is fine, and so is a float with many more */
	CHECK(parses(b + 3, n - 1, NULL));
	memcpy(b + n + 2, "e-4300", 6); /* 7.77...e0 */
	CHECK(parses(b + 2, n + 6, NULL));
	free(b);
	json_limits_t lim = json_limits_default;
	lim.max_int_digits = 5;
	ACCEPTS_LIM("[12345,-12345,123456.0,1234567e0]", &lim);
	REJECTS_LIM("[12345,-123456]", &lim, PITH_ETOOBIG, "integer has too many digits", 7);
}

TEST(rejects_control_characters, "rejects every raw control character U+0000-U+001F in strings and keys")
{
	for (int c = 0; c < 0x20; c++) {
		char in[8] = {'"', 'a', 'b', (char)c, '"'};
		check_reject(__FILE__, __LINE__, in, 5, NULL, PITH_EINVAL,
			     "control character in string", 3);
		char key[16] = {'{', '"', (char)c, '"', ':', '1', '}'};
		check_reject(__FILE__, __LINE__, key, 7, NULL, PITH_EINVAL,
			     "control character in string", 2);
	}
	/* DEL is not a control character to JSON */
	ACCEPTS("\"\x7f\"");
}

TEST(rejects_bad_escapes, "rejects unknown escapes and malformed \\u escapes")
{
	REJECTS("\"\\x41\"", PITH_EINVAL, "invalid escape", 1);
	REJECTS("\"ab\\'\"", PITH_EINVAL, "invalid escape", 3);
	REJECTS("\"\\U0041\"", PITH_EINVAL, "invalid escape", 1);
	REJECTS("\"\\a\"", PITH_EINVAL, "invalid escape", 1);
	REJECTS("\"\\0\"", PITH_EINVAL, "invalid escape", 1);
	REJECTS("\"\\\xc3\xa9\"", PITH_EINVAL, "invalid escape", 1);
	REJECTS("\"\\u00g0\"", PITH_EINVAL, "invalid \\u escape", 1);
	REJECTS("\"\\u-123\"", PITH_EINVAL, "invalid \\u escape", 1);
	REJECTS("\"\\u 123\"", PITH_EINVAL, "invalid \\u escape", 1);
	REJECTS("\"\\u12\"", PITH_ETRUNC, "truncated \\u escape", 1);
	REJECTS("\"\\u12", PITH_ETRUNC, "truncated \\u escape", 1);
	REJECTS("\"\\", PITH_ETRUNC, "unterminated escape", 1);
	REJECTS("{\"\\q\":1}", PITH_EINVAL, "invalid escape", 2);
}

TEST(rejects_malformed_syntax, "rejects malformed structure, numbers and literals at the first bad byte")
{
	REJECTS("", PITH_ETRUNC, "value expected", 0);
	REJECTS(" \n\t", PITH_ETRUNC, "value expected", 3);
	REJECTS("[1,]", PITH_EINVAL, "unexpected character", 3);
	REJECTS("[,1]", PITH_EINVAL, "unexpected character", 1);
	REJECTS("{,}", PITH_EINVAL, "string key expected", 1);
	REJECTS("{\"a\":1,}", PITH_EINVAL, "string key expected", 7);
	REJECTS("{'a':1}", PITH_EINVAL, "string key expected", 1);
	REJECTS("{a:1}", PITH_EINVAL, "string key expected", 1);
	REJECTS("{1:1}", PITH_EINVAL, "string key expected", 1);
	REJECTS("{\"a\" 1}", PITH_EINVAL, "':' expected", 5);
	REJECTS("{\"a\":1 \"b\":2}", PITH_EINVAL, "',' or '}' expected", 7);
	REJECTS("[1 2]", PITH_EINVAL, "',' or ']' expected", 3);
	REJECTS("[1:2]", PITH_EINVAL, "',' or ']' expected", 2);
	REJECTS("1.", PITH_EINVAL, "digit expected after decimal point", 2);
	REJECTS("1.e5", PITH_EINVAL, "digit expected after decimal point", 2);
	REJECTS("1e", PITH_EINVAL, "digit expected in exponent", 2);
	REJECTS("1e+", PITH_EINVAL, "digit expected in exponent", 3);
	REJECTS("1E-x", PITH_EINVAL, "digit expected in exponent", 3);
	REJECTS(".5", PITH_EINVAL, "unexpected character", 0);
	REJECTS("+1", PITH_EINVAL, "unexpected character", 0);
	REJECTS("-", PITH_ETRUNC, "truncated number", 1);
	REJECTS("-a", PITH_EINVAL, "invalid number", 1);
	REJECTS("- 1", PITH_EINVAL, "invalid number", 1);
	REJECTS("0x10", PITH_EINVAL, "trailing data", 1);
	REJECTS("tru", PITH_EINVAL, "invalid literal", 0);
	REJECTS("[truE]", PITH_EINVAL, "invalid literal", 1);
	REJECTS("True", PITH_EINVAL, "unexpected character", 0);
	REJECTS("nul", PITH_EINVAL, "invalid literal", 0);
	REJECTS("\"abc", PITH_ETRUNC, "unterminated string", 4);
	REJECTS("[1,2", PITH_ETRUNC, "unterminated array", 4);
	REJECTS("{\"a\":1", PITH_ETRUNC, "unterminated object", 6);
	REJECTS("{\"a\"", PITH_ETRUNC, "unterminated object", 4);
	REJECTS("{", PITH_ETRUNC, "unterminated object", 1);
	REJECTS("{\"a\":", PITH_ETRUNC, "value expected", 5);
	REJECTS("\xef\xbb\xbf", PITH_ETRUNC, "value expected", 3);
	REJECTS("\xef\xbb\xbf\xef\xbb\xbf{}", PITH_EINVAL, "unexpected character", 3);
	REJECTS("\0", PITH_EINVAL, "unexpected character", 0);
	REJECTS("/* c */ 1", PITH_EINVAL, "unexpected character", 0);
}

/* A sample touching every token kind; none of its proper prefixes is a
 * document, since the root object only closes at the last byte. */
static const char sample_doc[] =
	"{\"arr\": [1, -0, 12.5e-3, true, false, null, \"s\\n\\u00e9\\ud83d\\ude00\xc3\xa9\xf0\x9f\x98\x80\"],\n"
	" \"big\": -123456789012345678901234567890, \"obj\": {\"k\": {}, \"e\": []},"
	" \"f\": 1E+5, \"esc\": \"\\\"\\\\\\/\\b\\f\\r\\t\"}";

TEST(rejects_every_truncation, "rejects every proper prefix of a sample document without crashing")
{
	size_t len = sizeof(sample_doc) - 1;
	CHECK(parses(sample_doc, len, NULL));
	size_t trunc = 0;
	for (size_t n = 0; n < len; n++) {
		/* an exact-size heap copy so ASan sees any read past the end */
		char *p = malloc(n ? n : 1);
		memcpy(p, sample_doc, n);
		json_doc_t *doc = NULL;
		pith_err_t err = {0};
		int rc = json_parse(&doc, (const uint8_t *)p, n, NULL, &err);
		if (rc == 0) {
			test_fail_(__FILE__, __LINE__, "prefix of %zu bytes accepted", n);
			json_doc_free(doc);
		} else {
			if (rc != PITH_ETRUNC && rc != PITH_EINVAL)
				test_fail_(__FILE__, __LINE__, "prefix of %zu bytes: code %d", n, rc);
			if (err.offset > n)
				test_fail_(__FILE__, __LINE__, "prefix of %zu bytes: offset %zu",
					   n, err.offset);
			if (strncmp(err.msg, "JSON: ", 6) != 0)
				test_fail_(__FILE__, __LINE__, "prefix of %zu bytes: message \"%s\"",
					   n, err.msg);
			trunc += rc == PITH_ETRUNC;
		}
		free(p);
	}
	/* most cut points fall between tokens or inside strings: "truncated" */
	CHECK(trunc * 10 >= len * 7);
}

TEST(works_without_an_error_record, "refuses bad input the same way when err is NULL")
{
	json_doc_t *doc = (json_doc_t *)&doc;
	CHECK_INT_EQ(json_parse(&doc, (const uint8_t *)"{\"a\":1,\"a\":1}", 13, NULL, NULL),
		     PITH_EINVAL);
	CHECK(doc == NULL);
	json_limits_t lim = json_limits_default;
	lim.max_bytes = 2;
	CHECK_INT_EQ(json_parse(&doc, (const uint8_t *)"[1]", 3, &lim, NULL), PITH_ETOOBIG);
	CHECK_INT_EQ(json_parse(&doc, (const uint8_t *)"[", 1, NULL, NULL), PITH_ETRUNC);
}

int main(void)
{
	RUN(rejects_duplicate_keys);
	RUN(rejects_invalid_utf8);
	RUN(rejects_lone_surrogates);
	RUN(rejects_nan_and_infinity);
	RUN(rejects_overflowing_numbers);
	RUN(rejects_trailing_garbage);
	RUN(rejects_deep_nesting);
	RUN(rejects_oversized_documents);
	RUN(rejects_huge_integers);
	RUN(rejects_control_characters);
	RUN(rejects_bad_escapes);
	RUN(rejects_malformed_syntax);
	RUN(rejects_every_truncation);
	RUN(works_without_an_error_record);
	return test_done();
}
