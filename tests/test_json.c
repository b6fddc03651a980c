/* test_json: the canonical writer, the DOM accessors and the builder.
 *
 * Expected bytes were produced by Python 3.11's
 *   json.dumps(json.loads(x), sort_keys=True, separators=(',',':'),
 *              ensure_ascii=False).encode()
 * and the float table by repr(); see tests/json_diff.py for the random
 * differential version of the same comparison. Rejections live in
 * test_json_bad.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "test_util.h"

/* Canonical bytes of in (len bytes) as a malloc'd NUL-terminated string in
 * *out with length *out_len; returns the parse/write code. */
static int canon_n(const char *in, size_t len, char **out, size_t *out_len)
{
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	pith_buf_t b = PITH_BUF_INIT;
	*out = NULL;
	*out_len = 0;
	int rc = json_parse(&doc, (const uint8_t *)in, len, NULL, &err);
	if (rc == 0)
		rc = json_canon_write(json_doc_root(doc), &b);
	if (rc == 0)
		rc = pith_buf_cstr(&b);
	json_doc_free(doc);
	if (rc) {
		pith_buf_release(&b);
		return rc;
	}
	*out = (char *)b.data; /* ownership passes to the caller */
	*out_len = b.len;
	return 0;
}

/* Checks that in (a C string) canonicalises to want (a C string). */
#define CHECK_CANON(in, want)                                                  \
	do {                                                                   \
		char *got_;                                                    \
		size_t glen_;                                                  \
		int rc_ = canon_n((in), strlen(in), &got_, &glen_);           \
		CHECK_INT_EQ(rc_, 0);                                          \
		CHECK_MEM_EQ(got_, glen_, (want), strlen(want));               \
		free(got_);                                                    \
	} while (0)

/* Checks that the canonical form is a fixed point: canon(want) == want. */
#define CHECK_CANON_FIXED(want) CHECK_CANON((want), (want))

TEST(escapes_only_what_python_escapes,
     "escapes quote, backslash, the short escapes and other C0 controls with lower-case hex")
{
	CHECK_CANON("\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001F\\u000b\\u0000\"",
		    "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f\\u000b\\u0000\"");
	/* every C0 control, written as \u00XX upper-case, comes back lower-case
	 * or as its short form */
	static const char *const want[32] = {
		"\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005",
		"\\u0006", "\\u0007", "\\b",     "\\t",     "\\n",     "\\u000b",
		"\\f",     "\\r",     "\\u000e", "\\u000f", "\\u0010", "\\u0011",
		"\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
		"\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d",
		"\\u001e", "\\u001f",
	};
	for (int c = 0; c < 32; c++) {
		char in[16], w[16];
		snprintf(in, sizeof(in), "\"\\u%04X\"", c);
		snprintf(w, sizeof(w), "\"%s\"", want[c]);
		CHECK_CANON(in, w);
	}
}

TEST(writes_non_ascii_raw, "writes non-ASCII characters as raw UTF-8, whether escaped or raw on input")
{
	CHECK_CANON("\"\\u00e9\\u4E2D\"", "\"\xc3\xa9\xe4\xb8\xad\"");
	CHECK_CANON_FIXED("\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"");
	CHECK_CANON_FIXED("\"\xef\xbf\xbf\xef\xbb\xbf\"");
}

TEST(leaves_del_and_line_separators_raw,
     "leaves U+007F, U+2028 and U+2029 unescaped and does not escape '/'")
{
	CHECK_CANON("\"\\u007f\\u2028\\u2029\\/a/b\"", "\"\x7f\xe2\x80\xa8\xe2\x80\xa9/a/b\"");
	CHECK_CANON_FIXED("\"\x7f\xe2\x80\xa8\xe2\x80\xa9/\"");
}

TEST(joins_surrogate_pairs, "joins an escaped surrogate pair into one raw 4-byte character")
{
	CHECK_CANON("\"\\uD83D\\uDE00\\udbff\\udfff\\ud800\\udc00\"",
		    "\"\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xf0\x90\x80\x80\"");
	CHECK_CANON("\"x\\ud83d\\uDe00y\"", "\"x\xf0\x9f\x98\x80y\"");
}

TEST(keeps_big_integers_exact, "keeps integers of any length exact and writes -0 as 0")
{
	CHECK_CANON_FIXED("123456789012345678901234567890123456789012345678901234567890");
	CHECK_CANON_FIXED("-98765432109876543210987654321098765432109876543210");
	CHECK_CANON_FIXED("18446744073709551616");
	CHECK_CANON_FIXED("-9223372036854775809");
	CHECK_CANON("-0", "0");
	CHECK_CANON("[-0,0, -0 ]", "[0,0,0]");
	/* 4300 digits is Python's limit and still allowed */
	char *big = malloc(4302);
	big[0] = '-';
	for (int i = 1; i <= 4300; i++)
		big[i] = (char)('1' + i % 9);
	big[4301] = 0;
	CHECK_CANON_FIXED(big);
	free(big);
}

TEST(writes_floats_like_python_repr, "writes floats as Python's repr: fixed between 1e-4 and 1e16, else exponent")
{
	CHECK_CANON("100.0", "100.0");
	CHECK_CANON("1e2", "100.0");
	CHECK_CANON("1E5", "100000.0");
	CHECK_CANON("1.0e+05", "100000.0");
	CHECK_CANON("0.0001", "0.0001");
	CHECK_CANON("1e-4", "0.0001");
	CHECK_CANON("0.00001", "1e-05");
	CHECK_CANON("1e16", "1e+16");
	CHECK_CANON("1E+16", "1e+16");
	CHECK_CANON("9999999999999998.0", "9999999999999998.0");
	CHECK_CANON("1.5e300", "1.5e+300");
	CHECK_CANON("-0.0", "-0.0");
	CHECK_CANON("-0E-0", "-0.0");
	CHECK_CANON("0e0", "0.0");
	CHECK_CANON("5e-324", "5e-324");
	CHECK_CANON("4.9e-324", "5e-324");
	CHECK_CANON("2.5e-324", "5e-324");
	CHECK_CANON("2.4e-324", "0.0");
	CHECK_CANON("1e-400", "0.0");
	CHECK_CANON("-1e-400", "-0.0");
	CHECK_CANON("2.2250738585072014e-308", "2.2250738585072014e-308"); /* 2**-1022 */
	CHECK_CANON("1.7976931348623157e308", "1.7976931348623157e+308");
	CHECK_CANON("0.30000000000000004", "0.30000000000000004");
	CHECK_CANON("0.1000000000000000055511151231257827", "0.1");
	CHECK_CANON("1e0000000000000000000000000000001", "10.0");
	CHECK_CANON("[1.0,-1.5,12.5e-1]", "[1.0,-1.5,1.25]");
}

TEST(sorts_keys_by_code_point, "sorts object keys by code point, not by UTF-16 unit, at every level")
{
	CHECK_CANON("{\"b\":1,\"a\":2,\"\\u00e9\":3,\"z\":4,\"\\ud83d\\ude00\":5,"
		    "\"\\uffff\":6,\"\":7,\"a\\u0000\":8,\"ab\":9}",
		    "{\"\":7,\"a\":2,\"a\\u0000\":8,\"ab\":9,\"b\":1,\"z\":4,"
		    "\"\xc3\xa9\":3,\"\xef\xbf\xbf\":6,\"\xf0\x9f\x98\x80\":5}");
	CHECK_CANON("[{\"y\":{\"d\":1,\"c\":[{\"f\":0,\"e\":0}]},\"x\":null}]",
		    "[{\"x\":null,\"y\":{\"c\":[{\"e\":0,\"f\":0}],\"d\":1}}]");
	/* more than the insertion-sort threshold and the writer's stack slots */
	char in[2048], want[2048];
	size_t i = 0, j = 0;
	in[i++] = '{';
	want[j++] = '{';
	for (int k = 39; k >= 0; k--)
		i += (size_t)snprintf(in + i, sizeof(in) - i, "%s\"k%02d\":%d", k == 39 ? "" : ",", k, k);
	for (int k = 0; k < 40; k++)
		j += (size_t)snprintf(want + j, sizeof(want) - j, "%s\"k%02d\":%d", k ? "," : "", k, k);
	in[i++] = '}';
	in[i] = 0;
	want[j++] = '}';
	want[j] = 0;
	CHECK_CANON(in, want);
}

TEST(drops_whitespace_and_keeps_literals, "drops insignificant whitespace and writes true, false, null and empty containers as such")
{
	CHECK_CANON(" \t\r\n{ \"a\" : [ 1 , 2 , { } , [ ] ] ,\n\"b\":\ttrue,\"c\":false,\"d\":null } \n",
		    "{\"a\":[1,2,{},[]],\"b\":true,\"c\":false,\"d\":null}");
	CHECK_CANON("[]", "[]");
	CHECK_CANON("{}", "{}");
	CHECK_CANON("\"\"", "\"\"");
}

TEST(skips_a_leading_bom, "skips a UTF-8 byte order mark at the start, as json.loads on bytes does")
{
	CHECK_CANON("\xef\xbb\xbf{\"a\":1}", "{\"a\":1}");
}

TEST(canonical_form_is_a_fixed_point, "canonicalises the registry vectors to a fixed point")
{
	static const char *const files[] = {
		PITH_TEST_DATA "/bundle-AR7B3DEV.json",
		PITH_TEST_DATA "/record-RCCNG3LI.json",
		PITH_TEST_DATA "/pith-mirrors.json",
	};
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		FILE *fp = fopen(files[f], "rb");
		CHECK(fp != NULL);
		if (!fp)
			continue;
		pith_buf_t in = PITH_BUF_INIT;
		char tmp[65536];
		size_t n;
		while ((n = fread(tmp, 1, sizeof(tmp), fp)) > 0)
			pith_buf_append(&in, tmp, n);
		fclose(fp);
		char *c1 = NULL, *c2 = NULL;
		size_t l1 = 0, l2 = 0;
		CHECK_INT_EQ(canon_n((const char *)in.data, in.len, &c1, &l1), 0);
		if (c1) {
			CHECK_INT_EQ(canon_n(c1, l1, &c2, &l2), 0);
			CHECK_MEM_EQ(c2, l2, c1, l1);
		}
		free(c1);
		free(c2);
		pith_buf_release(&in);
	}
}

/* repr() of doubles given by bit pattern, from Python 3.11. */
static const struct {
	uint64_t bits;
	const char *repr;
} float_reprs[] = {
	{0x4059000000000000ULL, "100.0"},
	{0x3f1a36e2eb1c432dULL, "0.0001"},
	{0x3ee4f8b588e368f1ULL, "1e-05"},
	{0x4341c37937e08000ULL, "1e+16"},
	{0x7e41eb2d66005835ULL, "1.5e+300"},
	{0x8000000000000000ULL, "-0.0"},
	{0x0000000000000000ULL, "0.0"},
	{0x0000000000000001ULL, "5e-324"},
	{0x0010000000000000ULL, "2.2250738585072014e-308"},
	{0x0000000000000003ULL, "1.5e-323"},
	{0x7fefffffffffffffULL, "1.7976931348623157e+308"},
	{0x3fb999999999999aULL, "0.1"},
	{0x3fd3333333333334ULL, "0.30000000000000004"},
	{0x3fd5555555555555ULL, "0.3333333333333333"},
	{0x3fe5555555555555ULL, "0.6666666666666666"},
	{0x4480f0cf064dd592ULL, "1e+22"},
	{0x44b52d02c7e14af6ULL, "1e+23"},
	{0x4340000000000000ULL, "9007199254740992.0"},
	{0x4341c37937e07fffULL, "9999999999999998.0"},
	{0x430c6bf526340002ULL, "1000000000000000.2"},
	{0x419d6f34547df3b6ULL, "123456789.123"},
	{0x3f1a36e2eb1c432cULL, "9.999999999999999e-05"},
	{0x43e0000000000000ULL, "9.223372036854776e+18"},
	{0x43f0000000000000ULL, "1.8446744073709552e+19"},
	{0x3fe0000000000000ULL, "0.5"},
	{0x0008000000000000ULL, "1.1125369292536007e-308"},
	{0x0000000000000002ULL, "1e-323"},
	{0x7fe0000000000000ULL, "8.98846567431158e+307"},
	{0x00005c0ab9347ed7ULL, "5e-310"},
	{0xbff8000000000000ULL, "-1.5"},
	{0xbefa36e2eb1c432dULL, "-2.5e-05"},
	{0x400921f9f01b866eULL, "3.14159"},
	{0x54b249ad2594c37dULL, "1e+100"},
	{0x0000000000000058ULL, "4.35e-322"},
	{0x000fffffffffffffULL, "2.225073858507201e-308"},
	{0x3ff0000000000001ULL, "1.0000000000000002"},
	{0x3fefffffffffffffULL, "0.9999999999999999"},
	{0x441aabdf2145b430ULL, "1.23e+20"},
	{0x43e56a95319d63e1ULL, "1.2345678901234567e+19"},
	{0x3e7ad7f29abcaf48ULL, "1e-07"},
	{0x3f50624dd2f1a9fcULL, "0.001"},
	{0x3f46f0068db8bac7ULL, "0.0007"},
	{0x4029000000000000ULL, "12.5"},
	{0x43118b54f22aeb03ULL, "1234567890123456.8"},
	{0x0170000000000000ULL, "9.332636185032189e-302"},
	{0x07b0000000000000ULL, "1.1830521861667747e-271"},
	{0x20b0000000000000ULL, "3.054936363499605e-151"},
	{0x39b0000000000000ULL, "7.888609052210118e-31"},
	{0x3c30000000000000ULL, "8.673617379884035e-19"},
	{0x3f10000000000000ULL, "6.103515625e-05"},
	{0x40d0000000000000ULL, "16384.0"},
	{0x43b0000000000000ULL, "1.152921504606847e+18"},
	{0x4630000000000000ULL, "1.2676506002282294e+30"},
	{0x5f30000000000000ULL, "3.273390607896142e+150"},
	{0x7830000000000000ULL, "8.452712498170644e+270"},
	{0x7e70000000000000ULL, "1.0715086071862673e+301"},
	{0xf2a74de452e6b438ULL, "-1.989032661366619e+244"},
	{0x6513270e269e0d37ULL, "7.761117632285041e+178"},
	{0x0c5c7fd0a6a3a450ULL, "3.980498358697587e-249"},
	{0xd23f0824128b2f33ULL, "-1.5432835417340557e+88"},
	{0x1818e811892f902bULL, "1.3647584518757569e-192"},
	{0x9531985d5d9dc9f8ULL, "-1.3701135617873088e-206"},
	{0xe8e25d940ed90475ULL, "-1.7160537630466207e+197"},
	{0x36f675cc81e74ef5ULL, "6.294675241195386e-44"},
	{0x1600a35a099950d8ULL, "1.0613447212142254e-202"},
	{0x6b0d549b6f03675aULL, "4.708325160387546e+207"},
	{0x3d9c172411e20b8fULL, "6.387016158513563e-12"},
	{0x8d116ece1738f7d9ULL, "-9.973130378568733e-246"},
	{0x0f21ddb66cad4a26ULL, "8.779753225680271e-236"},
	{0x90c192cfd3ac94afULL, "-5.795503248498993e-228"},
	{0xf28c105d1fb17c23ULL, "-5.988180159386011e+243"},
	{0xa170b33839263059ULL, "-1.306052388527796e-147"},
	{0x953f48f1a09f76b5ULL, "-2.436117699484841e-206"},
	{0x0fd630f1f29d0da9ULL, "2.233386999150174e-232"},
	{0x95e60af593bd04cfULL, "-3.51527970626667e-203"},
	{0x0cb1e29c658cda14ULL, "1.5987381841032883e-247"},
	{0x3898d190f9ebdaccULL, "4.6678633181812096e-36"},
	{0x8e81973e0becd7b0ULL, "-8.441872792105456e-239"},
	{0x2217beaddbc496cbULL, "1.9015657400796622e-144"},
	{0x6b4cb2424a23d596ULL, "7.370437700706684e+208"},
	{0x8a6a63ec24ede6a4ULL, "-1.7163996725272777e-258"},
	{0x922766581e27a1c0ULL, "-3.2367190832119987e-221"},
	{0x8f6d05584ef8aa38ULL, "-2.2818334634712625e-234"},
	{0xae97ba94d0eda82fULL, "-3.0536383926309363e-84"},
	{0x1a61dbe22e44158bULL, "1.3449551894627777e-181"},
	{0x923a736994e3bf91ULL, "-7.317495976062606e-221"},
};

static double from_bits(uint64_t b)
{
	double d;
	memcpy(&d, &b, sizeof(d));
	return d;
}

TEST(float_repr_matches_python, "json_float_repr matches Python's repr for a table of hard doubles")
{
	for (size_t i = 0; i < sizeof(float_reprs) / sizeof(float_reprs[0]); i++) {
		char out[32];
		size_t n = json_float_repr(from_bits(float_reprs[i].bits), out);
		CHECK_STR_EQ(out, float_reprs[i].repr);
		CHECK_INT_EQ(n, strlen(float_reprs[i].repr));
	}
}

TEST(float_repr_round_trips_every_power_of_two,
     "json_float_repr round-trips every power of two, subnormals included")
{
	for (int e = -1074; e <= 1023; e++) {
		double x = ldexp(1.0, e);
		char out[32];
		json_float_repr(x, out);
		if (strtod(out, NULL) != x)
			CHECK_STR_EQ(out, "a round-tripping repr");
		json_float_repr(-x, out);
		CHECK(out[0] == '-' && strtod(out, NULL) == -x);
	}
}

TEST(json_get_finds_members, "json_get and the typed lookups find members and return NULL otherwise")
{
	static const char in[] = "{\"s\":\"str\",\"i\":-12,\"f\":1.5,\"o\":{\"n\":null},"
				 "\"a\":[true,false],\"\xc3\xa9\":1}";
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	CHECK_INT_EQ(json_parse(&doc, (const uint8_t *)in, sizeof(in) - 1, NULL, &err), 0);
	const json_value_t *r = json_doc_root(doc);
	CHECK(json_is(r, JSON_OBJECT));
	CHECK_INT_EQ(r->len, 6);
	CHECK_STR_EQ(json_get_str(r, "s"), "str");
	CHECK(json_get_str(r, "i") == NULL);
	const json_value_t *i = json_get_type(r, "i", JSON_INT);
	CHECK(i != NULL);
	if (i)
		CHECK_STR_EQ(i->u.str, "-12");
	const json_value_t *f = json_get_type(r, "f", JSON_FLOAT);
	CHECK(f != NULL && f->u.num == 1.5);
	CHECK(json_get_type(r, "f", JSON_INT) == NULL);
	CHECK(json_is(json_get(json_get(r, "o"), "n"), JSON_NULL));
	const json_value_t *a = json_get_type(r, "a", JSON_ARRAY);
	CHECK(a && a->len == 2 && json_is(a->u.items[0], JSON_TRUE) &&
	      json_is(a->u.items[1], JSON_FALSE));
	CHECK(json_get(r, "\xc3\xa9") != NULL);
	CHECK(json_get(r, "missing") == NULL);
	CHECK(json_get(r, "") == NULL);
	CHECK(json_get(a, "s") == NULL);
	CHECK(json_get(NULL, "s") == NULL);
	CHECK(!json_is(NULL, JSON_NULL));
	json_doc_free(doc);
	CHECK(doc == NULL);
}

TEST(builder_sorts_on_output, "a hand-built object set in any order is written with sorted keys")
{
	json_doc_t *doc = json_doc_new();
	CHECK(doc != NULL);
	json_value_t *o = json_new_object(doc);
	json_value_t *arr = json_new_array(doc);
	CHECK_INT_EQ(json_object_set(doc, o, "zeta", json_new_int(doc, INT64_MIN)), 0);
	CHECK_INT_EQ(json_object_set(doc, o, "alpha", json_new_float(doc, 100.0)), 0);
	CHECK_INT_EQ(json_object_set(doc, o, "\xc3\xa9", json_new_string(doc, "tab\there\x7f")), 0);
	CHECK_INT_EQ(json_object_set(doc, o, "mid", arr), 0);
	CHECK_INT_EQ(json_array_push(doc, arr, json_new_null(doc)), 0);
	CHECK_INT_EQ(json_array_push(doc, arr, json_new_bool(doc, 1)), 0);
	CHECK_INT_EQ(json_array_push(doc, arr, json_new_bool(doc, 0)), 0);
	CHECK_INT_EQ(json_array_push(doc, arr, json_new_float(doc, -0.0)), 0);
	CHECK_INT_EQ(json_array_push(doc, arr, json_new_float(doc, 1e-5)), 0);
	CHECK_INT_EQ(json_array_push(doc, arr, json_new_stringn(doc, "a\0b", 3)), 0);
	/* replacing keeps one member */
	CHECK_INT_EQ(json_object_set(doc, o, "alpha", json_new_int(doc, 7)), 0);
	CHECK_INT_EQ(o->len, 4);
	CHECK(json_is(json_get(o, "alpha"), JSON_INT));
	CHECK(json_get(o, "zeta") != NULL);
	json_doc_set_root(doc, o);
	pith_buf_t b = PITH_BUF_INIT;
	CHECK_INT_EQ(json_canon_write(json_doc_root(doc), &b), 0);
	static const char want[] =
		"{\"alpha\":7,\"mid\":[null,true,false,-0.0,1e-05,\"a\\u0000b\"],"
		"\"zeta\":-9223372036854775808,\"\xc3\xa9\":\"tab\\there\x7f\"}";
	CHECK_MEM_EQ(b.data, b.len, want, sizeof(want) - 1);
	/* many members set in reverse, past the writer's 32 stack slots */
	json_value_t *big = json_new_object(doc);
	for (int k = 99; k >= 0; k--) {
		char key[8];
		snprintf(key, sizeof(key), "k%02d", k);
		CHECK_INT_EQ(json_object_set(doc, big, key, json_new_int(doc, k)), 0);
	}
	for (int k = 0; k < 100; k += 7) {
		char key[8];
		snprintf(key, sizeof(key), "k%02d", k);
		const json_value_t *v = json_get(big, key);
		CHECK(v && atoi(v->u.str) == k);
	}
	pith_buf_reset(&b);
	CHECK_INT_EQ(json_canon_write(big, &b), 0);
	CHECK(b.len > 8 && memcmp(b.data, "{\"k00\":0,\"k01\":1,", 17) == 0);
	pith_buf_release(&b);
	json_doc_free(doc);
}

TEST(builder_refuses_bad_calls, "the builder refuses non-finite floats and pushes onto the wrong type")
{
	json_doc_t *doc = json_doc_new();
	json_value_t *o = json_new_object(doc), *a = json_new_array(doc);
	pith_buf_t b = PITH_BUF_INIT;
	CHECK_INT_EQ(json_array_push(doc, o, json_new_null(doc)), PITH_EINVAL);
	CHECK_INT_EQ(json_object_set(doc, a, "k", json_new_null(doc)), PITH_EINVAL);
	CHECK_INT_EQ(json_array_push(doc, a, NULL), PITH_EINVAL);
	CHECK_INT_EQ(json_object_set(doc, o, "k", NULL), PITH_EINVAL);
	CHECK_INT_EQ(json_canon_write(json_new_float(doc, NAN), &b), PITH_EINVAL);
	CHECK_INT_EQ(json_canon_write(json_new_float(doc, -INFINITY), &b), PITH_EINVAL);
	json_array_push(doc, a, json_new_float(doc, INFINITY));
	CHECK_INT_EQ(json_canon_write(a, &b), PITH_EINVAL);
	pith_buf_release(&b);
	json_doc_free(doc);
}

TEST(canon_write_skip_drops_top_level_keys_only,
     "json_canon_write_skip leaves out the named keys at the top level only")
{
	static const char in[] = "{\"sig\":1,\"b\":{\"sig\":2},\"a\":3,\"id\":4}";
	json_doc_t *doc = NULL;
	CHECK_INT_EQ(json_parse(&doc, (const uint8_t *)in, sizeof(in) - 1, NULL, NULL), 0);
	static const char *const skip[] = {"sig", "id", "absent"};
	pith_buf_t b = PITH_BUF_INIT;
	CHECK_INT_EQ(json_canon_write_skip(json_doc_root(doc), skip, 3, &b), 0);
	CHECK_MEM_EQ(b.data, b.len, "{\"a\":3,\"b\":{\"sig\":2}}", 21);
	pith_buf_reset(&b);
	/* skipping the first member must not leave a leading comma */
	static const char *const skip_a[] = {"a"};
	CHECK_INT_EQ(json_canon_write_skip(json_doc_root(doc), skip_a, 1, &b), 0);
	CHECK_MEM_EQ(b.data, b.len, "{\"b\":{\"sig\":2},\"id\":4,\"sig\":1}", 30);
	pith_buf_release(&b);
	json_doc_free(doc);
}

TEST(json_equal_compares_structure, "json_equal ignores member order but tells -0.0, ints and floats apart")
{
	json_doc_t *d1 = NULL, *d2 = NULL, *d3 = NULL, *d4 = NULL;
	const char *a = "{\"x\":[1,2.5,\"s\"],\"y\":{\"p\":null,\"q\":true}}";
	const char *b = "{\"y\":{\"q\":true,\"p\":null},\"x\":[1,2.5,\"s\"]}";
	const char *c = "{\"y\":{\"q\":true,\"p\":null},\"x\":[1.0,2.5,\"s\"]}";
	CHECK_INT_EQ(json_parse(&d1, (const uint8_t *)a, strlen(a), NULL, NULL), 0);
	CHECK_INT_EQ(json_parse(&d2, (const uint8_t *)b, strlen(b), NULL, NULL), 0);
	CHECK_INT_EQ(json_parse(&d3, (const uint8_t *)c, strlen(c), NULL, NULL), 0);
	CHECK(json_equal(json_doc_root(d1), json_doc_root(d2)));
	CHECK(!json_equal(json_doc_root(d1), json_doc_root(d3)));
	json_doc_t *b1 = json_doc_new();
	CHECK(!json_equal(json_new_float(b1, 0.0), json_new_float(b1, -0.0)));
	CHECK(json_equal(json_new_float(b1, 0.5), json_new_float(b1, 0.5)));
	/* keys containing U+0000 are compared whole */
	const char *k1 = "{\"a\\u0000b\":1}", *k2 = "{\"a\":1}";
	CHECK_INT_EQ(json_parse(&d4, (const uint8_t *)k1, strlen(k1), NULL, NULL), 0);
	json_doc_free(d3);
	CHECK_INT_EQ(json_parse(&d3, (const uint8_t *)k2, strlen(k2), NULL, NULL), 0);
	CHECK(!json_equal(json_doc_root(d4), json_doc_root(d3)));
	CHECK(!json_equal(json_doc_root(d3), json_doc_root(d4)));
	CHECK(json_equal(json_doc_root(d4), json_doc_root(d4)));
	json_doc_free(b1);
	json_doc_free(d1);
	json_doc_free(d2);
	json_doc_free(d3);
	json_doc_free(d4);
}

TEST(json_clone_copies_deeply, "json_clone makes an equal deep copy that outlives its source")
{
	const char *in = "{\"b\":[1,-0,2.5e-7,\"\xc3\xa9\",{\"z\":{},\"y\":[]}],\"a\":null,"
			 "\"a\\u0000x\":1,\"a\\u0000y\":2,\"n\":-123456789012345678901234567890}";
	json_doc_t *src = NULL;
	CHECK_INT_EQ(json_parse(&src, (const uint8_t *)in, strlen(in), NULL, NULL), 0);
	pith_buf_t want = PITH_BUF_INIT, got = PITH_BUF_INIT;
	CHECK_INT_EQ(json_canon_write(json_doc_root(src), &want), 0);
	json_doc_t *dst = json_doc_new();
	json_value_t *c = json_clone(dst, json_doc_root(src));
	CHECK(c != NULL);
	CHECK(c && json_equal(c, json_doc_root(src)));
	json_doc_free(src);
	if (c)
		CHECK_INT_EQ(json_canon_write(c, &got), 0);
	CHECK_MEM_EQ(got.data, got.len, want.data, want.len);
	pith_buf_release(&want);
	pith_buf_release(&got);
	json_doc_free(dst);
}

TEST(write_string_escapes_canonically, "json_write_string quotes a byte string the canonical way")
{
	pith_buf_t b = PITH_BUF_INIT;
	static const char in[] = "a\"\\\x01\x1f\x7f/\xe2\x80\xa8";
	static const char want[] = "\"a\\\"\\\\\\u0001\\u001f\x7f/\xe2\x80\xa8\"";
	CHECK_INT_EQ(json_write_string(&b, in, sizeof(in) - 1), 0);
	CHECK_MEM_EQ(b.data, b.len, want, sizeof(want) - 1);
	pith_buf_release(&b);
}

TEST(canon_write_at_finds_the_place_of_a_key, "json_canon_write_at says where a missing key's member would start")
{
	static const struct {
		const char *keys, *key, *rest; /* rest: the bytes from the place on */
	} cases[] = {
		{"b,d,a", "c", "\"d\":4}"},
		{"b,d,a", "0", "\"a\":3,\"b\":1,\"d\":4}"},
		{"b,d,a", "e", "}"},
		{"", "x", "}"},
		{"ab,a", "aa", "\"ab\":1}"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_doc_t *d = json_doc_new();
		json_value_t *o = json_new_object(d);
		char keys[32];
		snprintf(keys, sizeof(keys), "%s", cases[i].keys);
		int v = 1;
		for (char *k = strtok(keys, ","); k; k = strtok(NULL, ","))
			CHECK_INT_EQ(json_object_set(d, o, k, json_new_int(d, k[0] == 'd' ? 4 : k[0] == 'a' && !k[1] ? 3 : v++)), 0);
		pith_buf_t b = PITH_BUF_INIT, whole = PITH_BUF_INIT;
		size_t at = 0;
		pith_buf_append(&b, "xyz", 3); /* offsets count from the buffer's start */
		CHECK_INT_EQ(json_canon_write_at(o, cases[i].key, &b, &at), 0);
		CHECK_MEM_EQ(b.data + at, b.len - at, cases[i].rest, strlen(cases[i].rest));
		CHECK_INT_EQ(json_canon_write(o, &whole), 0);
		CHECK_MEM_EQ(b.data + 3, b.len - 3, whole.data, whole.len);
		pith_buf_release(&b);
		pith_buf_release(&whole);
		json_doc_free(d);
	}
}

TEST(canon_write_both_is_the_two_writes, "json_canon_write_both gives json_canon_write's and json_canon_write_skip's bytes")
{
	static const char *const skip[] = {"signature", "content_sha256", "event_id"};
	static const char *const docs[] = {
		"{}",
		"{\"signature\":1}",
		"{\"content_sha256\":\"x\",\"event_id\":2,\"signature\":{\"a\":[1,2]}}",
		"{\"z\":1,\"signature\":{\"k\":\"v\"},\"a\":\"\\u00e9\\n\",\"event_id\":null}",
		"{\"content_sha256\":1,\"b\":2}",
		"{\"b\":[{\"signature\":1}],\"event_id\":3,\"c\":1.5e-7}",
		"{\"a\":{\"event_id\":1},\"b\":2}",
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]) + 1; i++) {
		json_doc_t *d = NULL;
		json_value_t *o;
		if (i < sizeof(docs) / sizeof(docs[0])) {
			CHECK_INT_EQ(json_parse(&d, (const uint8_t *)docs[i], strlen(docs[i]), NULL, NULL), 0);
			o = (json_value_t *)json_doc_root(d);
		} else {
			/* built in code (unsorted) and wider than the writer's stack */
			d = json_doc_new();
			o = json_new_object(d);
			for (int k = 40; k >= 0; k--) {
				char key[16];
				snprintf(key, sizeof(key), "k%02d", k);
				CHECK_INT_EQ(json_object_set(d, o, k == 7 ? "signature" : key, json_new_int(d, k)), 0);
			}
		}
		pith_buf_t whole = PITH_BUF_INIT, part = PITH_BUF_INIT, both = PITH_BUF_INIT,
			   bpart = PITH_BUF_INIT;
		CHECK_INT_EQ(json_canon_write(o, &whole), 0);
		CHECK_INT_EQ(json_canon_write_skip(o, skip, 3, &part), 0);
		pith_buf_append(&both, "xy", 2); /* both append */
		pith_buf_append(&bpart, "z", 1);
		CHECK_INT_EQ(json_canon_write_both(o, skip, 3, &both, &bpart), 0);
		CHECK_MEM_EQ(both.data + 2, both.len - 2, whole.data, whole.len);
		CHECK_MEM_EQ(bpart.data + 1, bpart.len - 1, part.data, part.len);
		pith_buf_release(&whole);
		pith_buf_release(&part);
		pith_buf_release(&both);
		pith_buf_release(&bpart);
		json_doc_free(d);
	}
	json_doc_t *d = json_doc_new();
	pith_buf_t a = PITH_BUF_INIT, b = PITH_BUF_INIT;
	CHECK_INT_EQ(json_canon_write_both(json_new_int(d, 1), skip, 3, &a, &b), PITH_EINVAL);
	pith_buf_release(&a);
	pith_buf_release(&b);
	json_doc_free(d);
}

/* The escape of byte c as json_write_string must write it, byte by byte. */
static void ref_escape(pith_buf_t *b, uint8_t c)
{
	static const char hex[] = "0123456789abcdef";
	char e[8];
	if (c == '"' || c == '\\') {
		e[0] = '\\';
		e[1] = (char)c;
		pith_buf_append(b, e, 2);
	} else if (c < 0x20) {
		const char *named = c == '\b' ? "\\b" : c == '\f' ? "\\f" : c == '\n' ? "\\n"
				  : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
		if (named) {
			pith_buf_puts(b, named);
		} else {
			snprintf(e, sizeof(e), "\\u00%c%c", hex[c >> 4], hex[c & 15]);
			pith_buf_puts(b, e);
		}
	} else {
		pith_buf_putc(b, c);
	}
}

TEST(special_bytes_at_every_offset, "finds a byte to escape (or refuse) at every offset of a word-scanned run")
{
	static const uint8_t specials[] = {0x00, 0x01, 0x0a, 0x1f, '"', '\\', 0x20, 0x7f, 0x80, 0xc3, 0xff};
	for (size_t k = 0; k < sizeof(specials); k++) {
		for (size_t at = 0; at < 20; at++) {
			uint8_t in[24];
			memset(in, 'a', sizeof(in));
			in[at] = specials[k];
			if (specials[k] == 0xc3)
				in[at + 1] = 0xa9; /* a whole UTF-8 character */
			pith_buf_t got = PITH_BUF_INIT, want = PITH_BUF_INIT;
			CHECK_INT_EQ(json_write_string(&got, (const char *)in, sizeof(in)), 0);
			pith_buf_putc(&want, '"');
			for (size_t i = 0; i < sizeof(in); i++)
				ref_escape(&want, in[i]);
			pith_buf_putc(&want, '"');
			CHECK_MEM_EQ(got.data, got.len, want.data, want.len);
			/* the parser: raw controls refused, the rest read back */
			json_doc_t *d = NULL;
			int bad = specials[k] < 0x20 || specials[k] == 0x80 || specials[k] == 0xff;
			pith_buf_t raw = PITH_BUF_INIT;
			pith_buf_putc(&raw, '"');
			pith_buf_append(&raw, in, sizeof(in));
			pith_buf_putc(&raw, '"');
			int rc = json_parse(&d, raw.data, raw.len, NULL, NULL);
			if (specials[k] == '"' || specials[k] == '\\' || bad) {
				CHECK(rc != 0); /* a stray quote, a bad escape, a control, bad UTF-8 */
			} else {
				CHECK_INT_EQ(rc, 0);
				const json_value_t *v = json_doc_root(d);
				CHECK_MEM_EQ(v->u.str, v->len, in, sizeof(in));
			}
			if (!bad && specials[k] != '"' && specials[k] != '\\') {
				json_doc_free(d);
				d = NULL;
			}
			/* escaped, every string reads back */
			CHECK_INT_EQ(json_parse(&d, got.data, got.len, NULL, NULL),
				     specials[k] == 0x80 || specials[k] == 0xff ? PITH_EINVAL : 0);
			json_doc_free(d);
			pith_buf_release(&raw);
			pith_buf_release(&got);
			pith_buf_release(&want);
		}
	}
}

int main(void)
{
	RUN(escapes_only_what_python_escapes);
	RUN(writes_non_ascii_raw);
	RUN(leaves_del_and_line_separators_raw);
	RUN(joins_surrogate_pairs);
	RUN(keeps_big_integers_exact);
	RUN(writes_floats_like_python_repr);
	RUN(sorts_keys_by_code_point);
	RUN(drops_whitespace_and_keeps_literals);
	RUN(skips_a_leading_bom);
	RUN(canonical_form_is_a_fixed_point);
	RUN(float_repr_matches_python);
	RUN(float_repr_round_trips_every_power_of_two);
	RUN(json_get_finds_members);
	RUN(builder_sorts_on_output);
	RUN(builder_refuses_bad_calls);
	RUN(canon_write_skip_drops_top_level_keys_only);
	RUN(json_equal_compares_structure);
	RUN(json_clone_copies_deeply);
	RUN(write_string_escapes_canonically);
	RUN(canon_write_at_finds_the_place_of_a_key);
	RUN(canon_write_both_is_the_two_writes);
	RUN(special_bytes_at_every_offset);
	return test_done();
}
