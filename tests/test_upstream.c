/* proto/upstream.c: the registry's mirror manifest (the real file, copied
 * into tests/data), its URL patterns and their expansion, and the two
 * shapes of a resolve answer; hand-made bad inputs for each bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "upstream.h"
#include "test_util.h"

#define BODY "AR7B3DEVMOTSBRCCVXUCLYSRRE"
#define NUMBER "pith:2024:" BODY

static pith_manifest_t man;
static pith_err_t err;

static int manifest(const char *s)
{
	memset(&err, 0, sizeof(err));
	return pith_manifest_parse((const uint8_t *)s, strlen(s), NULL, &man, &err);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	static char buf[1 << 16];
	*len = fread(buf, 1, sizeof(buf) - 1, f);
	buf[*len] = 0;
	fclose(f);
	return buf;
}

TEST(real_manifest, "reads the registry's real mirror manifest")
{
	size_t n;
	char *b = slurp(PITH_TEST_DATA "/pith-mirrors.json", &n);
	CHECK(b != NULL);
	if (!b)
		return;
	CHECK_INT_EQ(pith_manifest_parse((uint8_t *)b, n, NULL, &man, &err), 0);
	CHECK_INT_EQ(man.n_mirrors, 1);
	CHECK_STR_EQ(man.manifest_version, "1.0");
	CHECK_STR_EQ(man.merge_version, "pith-open-graph-merge-v1");
	const pith_mirror_t *m = &man.mirrors[0];
	CHECK_STR_EQ(m->name, "Pith Resolver");
	CHECK_STR_EQ(m->base_url, "https://pith.science");
	CHECK_STR_EQ(m->bundle_pattern, "https://pith.science/pith/{suffix}/bundle.json");
	CHECK_STR_EQ(m->state_pattern, "https://pith.science/pith/{suffix}/state.json");
	CHECK_STR_EQ(m->well_known_pattern, "https://pith.science/.well-known/pith/{suffix}/bundle.json");
	CHECK_STR_EQ(m->status, "primary");
	CHECK_INT_EQ(m->has_key, 1);
	CHECK_STR_EQ(m->key_id, "pith-v1-2026-05");
	CHECK_INT_EQ(m->public_key[0], 0xb2);
	CHECK_INT_EQ(m->public_key[31], 0xb3);
	char url[PITH_URL_MAX];
	CHECK_INT_EQ(pith_pattern_expand(m->bundle_pattern, NUMBER, url, sizeof(url), &err), 0);
	CHECK_STR_EQ(url, "https://pith.science/pith/" BODY "/bundle.json");
	CHECK_INT_EQ(pith_pattern_expand(m->well_known_pattern, BODY, url, sizeof(url), &err), 0);
	CHECK_STR_EQ(url, "https://pith.science/.well-known/pith/" BODY "/bundle.json");
}

#define M_HEAD "{\"manifest_type\":\"pith_mirror_manifest\",\"manifest_version\":\"1.0\",\"mirrors\":["

/* a one-mirror manifest whose mirror is {base_url: https://m.example, EXTRA} */
static int one_mirror(const char *extra)
{
	char doc[4096];
	snprintf(doc, sizeof(doc), M_HEAD "{\"base_url\":\"https://m.example\"%s}]}", extra);
	return manifest(doc);
}

TEST(manifest_bad, "refuses manifests of the wrong type or version and mirrors with bad URLs, naming the field")
{
	CHECK_INT_EQ(one_mirror(""), 0);
	CHECK_INT_EQ(manifest("[]"), PITH_EINVAL);
	CHECK_INT_EQ(manifest("{\"manifest_type\":\"x\",\"manifest_version\":\"1.0\",\"mirrors\":[]}"), PITH_EINVAL);
	CHECK_INT_EQ(manifest("{\"manifest_type\":\"pith_mirror_manifest\",\"manifest_version\":\"2.0\","
			      "\"mirrors\":[{\"base_url\":\"https://m.example\"}]}"), PITH_EINVAL);
	CHECK_INT_EQ(manifest(M_HEAD "]}"), PITH_EINVAL);
	CHECK_INT_EQ(manifest(M_HEAD "{}]}"), PITH_EINVAL);
	CHECK(strstr(err.msg, "mirrors[0].base_url") != NULL);
	CHECK_INT_EQ(manifest(M_HEAD "{\"base_url\":\"ftp://m.example\"}]}"), PITH_EINVAL);
	CHECK_INT_EQ(manifest(M_HEAD "{\"base_url\":\"https://u@m.example\"}]}"), PITH_EINVAL);
	CHECK_INT_EQ(manifest(M_HEAD "{\"base_url\":\"javascript:alert(1)\"}]}"), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"bundle_pattern\":\"https://m.example/pith/{number}/b.json\""), PITH_EINVAL);
	CHECK(strstr(err.msg, "mirrors[0].bundle_pattern") && strstr(err.msg, "placeholder"));
	CHECK_INT_EQ(one_mirror(",\"state_pattern\":\"https://m.example/pith/state.json\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"state_pattern\":\"https://{suffix}.example/s.json\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"state_pattern\":\"https://m.example/a/../{suffix}\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"state_pattern\":\"https://m.example/%2e%2e/{suffix}\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"state_pattern\":\"https://m.example/{suffix} x\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"state_pattern\":\"https://m.example/{suffix}#f\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"state_pattern\":7"), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"name\":\"a\\u0000b\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"public_key\":{\"public_key_hex\":\"00\"}"), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"public_key\":{\"public_key_hex\":\"b2d552b68890857171a78b36a5dccf368a953413288c353f7c9d9d6f94b709b3\","
				"\"public_key_b64\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"}"), PITH_EINVAL);
	CHECK_INT_EQ(man.n_mirrors, 0);
}

TEST(manifest_bounds, "refuses a manifest over the size, depth or mirror limits, saying which")
{
	char doc[8192];
	size_t n = (size_t)snprintf(doc, sizeof(doc), M_HEAD);
	for (int i = 0; i < PITH_MIRRORS_MAX + 1; i++)
		n += (size_t)snprintf(doc + n, sizeof(doc) - n, "%s{\"base_url\":\"https://m%d.example\"}",
				      i ? "," : "", i);
	snprintf(doc + n, sizeof(doc) - n, "]}");
	CHECK_INT_EQ(manifest(doc), PITH_ETOOBIG);
	CHECK(strstr(err.msg, "mirrors") != NULL);
	pith_upstream_limits_t lim = pith_upstream_limits_default;
	lim.max_mirrors = 2;
	const char *three = M_HEAD "{\"base_url\":\"https://a.example\"},{\"base_url\":\"https://b.example\"},"
				   "{\"base_url\":\"https://c.example\"}]}";
	CHECK_INT_EQ(pith_manifest_parse((const uint8_t *)three, strlen(three), &lim, &man, &err), PITH_ETOOBIG);
	lim.max_mirrors = 3;
	CHECK_INT_EQ(pith_manifest_parse((const uint8_t *)three, strlen(three), &lim, &man, &err), 0);
	CHECK_INT_EQ(man.n_mirrors, 3);
	lim.max_bytes = 40;
	CHECK_INT_EQ(pith_manifest_parse((const uint8_t *)three, strlen(three), &lim, &man, &err), PITH_ETOOBIG);
	CHECK(strncmp(err.msg, "manifest: ", 10) == 0);
	lim = pith_upstream_limits_default;
	char deep[200];
	snprintf(deep, sizeof(deep), M_HEAD "{\"base_url\":\"https://a.example\",\"x\":%s1%s}]}",
		 "[[[[[[[[[[[[[[[[[[[[", "]]]]]]]]]]]]]]]]]]]]");
	CHECK_INT_EQ(manifest(deep), PITH_ETOOBIG);
	char longname[1200];
	memset(longname, 'n', 1000);
	longname[1000] = 0;
	snprintf(doc, sizeof(doc), ",\"name\":\"%s\"", longname);
	CHECK_INT_EQ(one_mirror(doc), PITH_ETOOBIG);
	CHECK(strstr(err.msg, "mirrors[0].name") != NULL);
}

TEST(pattern_expand, "fills {suffix} with the body and refuses bad numbers, bad patterns and small buffers")
{
	char out[PITH_URL_MAX];
	CHECK_INT_EQ(pith_pattern_expand("http://m.example:8080/x/{suffix}/{suffix}.json", NUMBER, out,
					 sizeof(out), &err), 0);
	CHECK_STR_EQ(out, "http://m.example:8080/x/" BODY "/" BODY ".json");
	CHECK_INT_EQ(pith_pattern_expand("https://m.example/{suffix}", "pith:AR7B3DEV", out, sizeof(out), &err),
		     PITH_EINVAL);
	CHECK_INT_EQ(pith_pattern_expand("https://m.example/{suffix}", "ar7b3devmotsbrccvxuclysrre", out,
					 sizeof(out), &err), PITH_EINVAL);
	CHECK_INT_EQ(pith_pattern_expand("https://m.example/{suffix}", NUMBER, out, 30, &err), PITH_ETOOBIG);
	CHECK_INT_EQ(pith_pattern_expand("https://m.example{suffix}", NUMBER, out, sizeof(out), &err), PITH_EINVAL);
	CHECK_INT_EQ(pith_pattern_expand("https://m.example:{suffix}/", NUMBER, out, sizeof(out), &err), PITH_EINVAL);
	CHECK_INT_EQ(pith_pattern_expand("//m.example/{suffix}", NUMBER, out, sizeof(out), &err), PITH_EINVAL);
	CHECK_INT_EQ(pith_pattern_expand("https://m.example/{suffix", NUMBER, out, sizeof(out), &err), PITH_EINVAL);
}

static int answer(const char *s, char out[static PITH_NUMBER_LEN + 1])
{
	memset(&err, 0, sizeof(err));
	return pith_resolve_answer_parse((const uint8_t *)s, strlen(s), NULL, out, &err);
}

TEST(bundle_url, "gives the manifest's pattern alone, else the registry's two layouts in order")
{
	char out[PITH_URL_MAX];
	CHECK_INT_EQ(pith_bundle_url("https://cdn.example/b/{suffix}.json", "https://m.example", 0, BODY,
				     out, sizeof(out), &err), 0);
	CHECK_STR_EQ(out, "https://cdn.example/b/" BODY ".json");
	CHECK_INT_EQ(pith_bundle_url("https://cdn.example/b/{suffix}.json", "https://m.example", 1, BODY,
				     out, sizeof(out), &err), 1);
	CHECK_INT_EQ(pith_bundle_url("", "https://m.example/sub", 0, BODY, out, sizeof(out), &err), 0);
	CHECK_STR_EQ(out, "https://m.example/sub/pith/" BODY "/bundle.json");
	CHECK_INT_EQ(pith_bundle_url(NULL, "https://m.example", 1, BODY, out, sizeof(out), &err), 0);
	CHECK_STR_EQ(out, "https://m.example/.well-known/pith/" BODY "/bundle.json");
	CHECK_INT_EQ(pith_bundle_url(NULL, "https://m.example", 2, BODY, out, sizeof(out), &err), 1);
	CHECK_INT_EQ(pith_bundle_url(NULL, "https://m.example", 0, "short", out, sizeof(out), &err),
		     PITH_EINVAL);
}

TEST(resolve_answer, "takes pith_number from the top level or one level down, and only a well-formed one")
{
	char out[PITH_NUMBER_LEN + 1];
	CHECK_INT_EQ(answer("{\"pith_number\":\"" NUMBER "\",\"x\":1}", out), 0);
	CHECK_STR_EQ(out, NUMBER);
	CHECK_INT_EQ(answer("{\"ok\":true,\"record\":{\"pith_number\":\"" NUMBER "\"}}", out), 0);
	CHECK_STR_EQ(out, NUMBER);
	CHECK_INT_EQ(answer("{\"result\":{\"pith_number\":\"" NUMBER "\"}}", out), 0);
	CHECK_INT_EQ(answer("{\"found\":false}", out), PITH_ENOTFOUND);
	CHECK_INT_EQ(answer("{\"pith_number\":null}", out), PITH_ENOTFOUND);
	CHECK_INT_EQ(answer("{\"a\":{\"b\":{\"pith_number\":\"" NUMBER "\"}}}", out), PITH_ENOTFOUND);
	CHECK_INT_EQ(answer("{\"pith_number\":\"pith:AR7B3DEV\"}", out), PITH_EINVAL);
	CHECK(strstr(err.msg, "pith_number") != NULL);
	CHECK_INT_EQ(answer("{\"record\":{\"pith_number\":5}}", out), PITH_EINVAL);
	CHECK(strstr(err.msg, "record.pith_number") != NULL);
	CHECK_STR_EQ(out, "");
	CHECK_INT_EQ(answer("[\"" NUMBER "\"]", out), PITH_EINVAL);
	CHECK_INT_EQ(answer("{\"pith_number\":\"" NUMBER "\"", out), PITH_ETRUNC);
	pith_upstream_limits_t lim = pith_upstream_limits_default;
	lim.max_bytes = 10;
	const char *a = "{\"pith_number\":\"" NUMBER "\"}";
	CHECK_INT_EQ(pith_resolve_answer_parse((const uint8_t *)a, strlen(a), &lim, out, &err), PITH_ETOOBIG);
	CHECK(strncmp(err.msg, "resolve answer: ", 16) == 0);
}

static pith_id_t lid;

static int loc(const char *s, const char *base)
{
	memset(&err, 0, sizeof(err));
	return pith_resolve_location_parse(s, strlen(s), base, &lid, &err);
}

TEST(resolve_location, "reads a redirect to /pith/{ID} on the upstream's own origin only")
{
	CHECK_INT_EQ(loc("/pith/" BODY, "https://pith.science"), 0);
	CHECK_INT_EQ(lid.kind, PITH_ID_FULL);
	CHECK_STR_EQ(lid.value, BODY);
	CHECK_STR_EQ(lid.number, "");
	CHECK_INT_EQ(loc("https://PITH.science:443/pith/" BODY "?x#y", "https://pith.science/"), 0);
	CHECK_INT_EQ(loc("/pith/pith%3A2024%3A" BODY, "https://pith.science"), 0);
	CHECK_STR_EQ(lid.number, NUMBER);
	CHECK_INT_EQ(loc("/reg/pith/" BODY "/", "http://127.0.0.1:8080/reg"), 0);
	CHECK_INT_EQ(loc("/pith/" BODY, "http://127.0.0.1:8080/reg"), PITH_EINVAL);
	CHECK_INT_EQ(loc("https://evil.example/pith/" BODY, "https://pith.science"), PITH_EINVAL);
	CHECK(strstr(err.msg, "origin") != NULL);
	CHECK_INT_EQ(loc("http://pith.science/pith/" BODY, "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("https://pith.science:8443/pith/" BODY, "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("//evil.example/pith/" BODY, "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("https://pith.science@evil.example/pith/" BODY, "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("/pith/AR7B3DEV", "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("/pith/" BODY "/bundle.json", "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("/paper/" BODY, "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("/pith/" BODY "%", "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("/pith/\r\n" BODY, "https://pith.science"), PITH_EINVAL);
	CHECK_INT_EQ(loc("", "https://pith.science"), PITH_EINVAL);
	char big[PITH_URL_MAX + 10];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	CHECK_INT_EQ(loc(big, "https://pith.science"), PITH_ETOOBIG);
	CHECK_INT_EQ(lid.kind, 0);
	CHECK_STR_EQ(lid.value, "");
}

TEST(manifest_changes_url, "reads a mirror's changes_url when it names one, and refuses one that is not a plain http(s) URL")
{
	CHECK_INT_EQ(one_mirror(",\"changes_url\":\"https://m.example/api/changes\""), 0);
	CHECK_STR_EQ(man.mirrors[0].changes_url, "https://m.example/api/changes");
	CHECK_INT_EQ(one_mirror(""), 0);
	CHECK_STR_EQ(man.mirrors[0].changes_url, "");
	CHECK_INT_EQ(one_mirror(",\"changes_url\":null"), 0);
	CHECK_STR_EQ(man.mirrors[0].changes_url, "");
	CHECK_INT_EQ(one_mirror(",\"changes_url\":\"ftp://m.example/c\""), PITH_EINVAL);
	CHECK(strstr(err.msg, "mirrors[0].changes_url") != NULL);
	CHECK_INT_EQ(one_mirror(",\"changes_url\":\"https://m.example/c?after=1\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"changes_url\":\"https://u@m.example/c\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"changes_url\":\"https://m.example/../c\""), PITH_EINVAL);
	CHECK_INT_EQ(one_mirror(",\"changes_url\":7"), PITH_EINVAL);
}

#define SHA_A "3facdc2aeec0c5e2ff45dd750211a965091b49387ad1b15346dff0bb9a58c999"
#define SHA_B "b9d0bf10c387d1e4fbd0e44cb71fc42b4c518b794f6c5d4ae912c03cc47b6ccf"
#define NUMBER2 "pith:2026:RCCNG3LIAAAAAAAAAAAAAAAAAA"

static pith_change_t chg[8];
static size_t nchg;
static char next_cur[PITH_CURSOR_MAX + 1];

static int changes(const char *s)
{
	memset(&err, 0, sizeof(err));
	return pith_changes_parse((const uint8_t *)s, strlen(s), NULL, chg, 8, &nchg, next_cur, &err);
}

/* a page of one entry: {cursor "7", pith_number NUMBER, state_sha256 SHA_A, EXTRA} */
static int one_change(const char *extra)
{
	char doc[4096];
	snprintf(doc, sizeof(doc), "{\"changes\":[{\"cursor\":\"7\",\"pith_number\":\"" NUMBER "\","
		 "\"state_sha256\":\"" SHA_A "\"%s}],\"next\":\"7\"}", extra);
	return changes(doc);
}

TEST(changes_page, "reads a change feed page as pithd serves it: entries with and without a bundle, and next")
{
	/* the server's own form: canonical, bundle fields null without a bundle */
	CHECK_INT_EQ(changes("{\"changes\":[{\"built_at\":\"2026-08-04T06:52:48Z\",\"bundle_sha256\":\"" SHA_B
			     "\",\"cursor\":\"12\",\"pith_number\":\"" NUMBER "\",\"state_sha256\":\"" SHA_A "\"},"
			     "{\"built_at\":null,\"bundle_sha256\":null,\"cursor\":\"15\",\"pith_number\":\""
			     NUMBER2 "\",\"state_sha256\":\"" SHA_B "\"}],\"next\":\"15\"}"), 0);
	CHECK_INT_EQ(nchg, 2);
	CHECK_STR_EQ(next_cur, "15");
	CHECK_STR_EQ(chg[0].cursor, "12");
	CHECK_STR_EQ(chg[0].pith_number, NUMBER);
	CHECK_INT_EQ(chg[0].state_sha[0], 0x3f);
	CHECK_INT_EQ(chg[0].has_bundle, 1);
	CHECK_INT_EQ(chg[0].bundle_sha[31], 0xcf);
	CHECK_STR_EQ(chg[0].built_at, "2026-08-04T06:52:48Z");
	int64_t us;
	pith_time_parse("2026-08-04T06:52:48Z", &us);
	CHECK(chg[0].built_us == us);
	CHECK_STR_EQ(chg[1].pith_number, NUMBER2);
	CHECK_INT_EQ(chg[1].has_bundle, 0);
	CHECK_STR_EQ(chg[1].built_at, "");
	/* nothing new; absent bundle fields; unknown members; any cursor text */
	CHECK_INT_EQ(changes("{\"changes\":[],\"next\":\"15\",\"more\":1}"), 0);
	CHECK_INT_EQ(nchg, 0);
	CHECK_STR_EQ(next_cur, "15");
	CHECK_INT_EQ(one_change(",\"x\":[1,2]"), 0);
	CHECK_INT_EQ(chg[0].has_bundle, 0);
	CHECK_INT_EQ(changes("{\"changes\":[],\"next\":\"opaque-Cursor_9.z~\"}"), 0);
	CHECK_INT_EQ(one_change(",\"built_at\":\"2026-08-04T06:52:48.123456+00:00\",\"bundle_sha256\":\"" SHA_B "\""), 0);
	CHECK_INT_EQ(chg[0].has_bundle, 1);
}

TEST(changes_bad, "refuses malformed pages, naming the field, and leaves nothing behind")
{
	static const struct {
		const char *extra, *field;
		int rc;
	} bad[] = {
		{",\"bundle_sha256\":\"" SHA_B "\"", "bundle_sha256", PITH_EINVAL},
		{",\"built_at\":\"2026-08-04T06:52:48Z\"", "built_at", PITH_EINVAL},
		{",\"built_at\":\"yesterday\",\"bundle_sha256\":\"" SHA_B "\"", "changes[0].built_at", PITH_EINVAL},
		{",\"built_at\":\"2026-08-04T06:52:48.123456789012345678901234567Z\",\"bundle_sha256\":\"" SHA_B "\"",
		 "changes[0].built_at", PITH_ETOOBIG},
		{",\"built_at\":7,\"bundle_sha256\":\"" SHA_B "\"", "changes[0].built_at", PITH_EINVAL},
		{",\"built_at\":\"2026-08-04T06:52:48Z\",\"bundle_sha256\":\"" "B9D0BF10C387D1E4FBD0E44CB71FC42B4C518B794F6C5D4AE912C03CC47B6CCF\"",
		 "changes[0].bundle_sha256", PITH_EINVAL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT_EQ(one_change(bad[i].extra), bad[i].rc);
		CHECK(strstr(err.msg, bad[i].field) != NULL);
		CHECK_INT_EQ(nchg, 0);
		CHECK_STR_EQ(next_cur, "");
	}
	static const struct {
		const char *doc, *field;
	} docs[] = {
		{"[]", "not a JSON object"},
		{"{\"next\":\"1\"}", "changes"},
		{"{\"changes\":{},\"next\":\"1\"}", "changes"},
		{"{\"changes\":[]}", "next"},
		{"{\"changes\":[],\"next\":\"\"}", "next"},
		{"{\"changes\":[],\"next\":\"a b\"}", "next"},
		{"{\"changes\":[],\"next\":7}", "next"},
		{"{\"changes\":[],\"next\":\"\\u00e9\"}", "next"},
		{"{\"changes\":[7],\"next\":\"1\"}", "changes[0]"},
		{"{\"changes\":[{\"pith_number\":\"" NUMBER "\",\"state_sha256\":\"" SHA_A "\"}],\"next\":\"1\"}",
		 "changes[0].cursor"},
		{"{\"changes\":[{\"cursor\":\"1\",\"pith_number\":\"pith:2024:AR7B\",\"state_sha256\":\"" SHA_A "\"}],"
		 "\"next\":\"1\"}", "changes[0].pith_number"},
		{"{\"changes\":[{\"cursor\":\"1\",\"pith_number\":\"" NUMBER "\",\"state_sha256\":\"abc\"}],"
		 "\"next\":\"1\"}", "changes[0].state_sha256"},
		{"{\"changes\":[{\"cursor\":\"1\",\"pith_number\":\"" NUMBER "\"}],\"next\":\"1\"}",
		 "changes[0].state_sha256"},
		{"{\"changes\":[],\"next\":\"1\"", "change feed"},
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		CHECK(changes(docs[i].doc) < 0);
		CHECK(strstr(err.msg, docs[i].field) != NULL);
		CHECK_INT_EQ(nchg, 0);
		CHECK_STR_EQ(next_cur, "");
	}
	char longc[PITH_CURSOR_MAX + 2];
	memset(longc, '9', sizeof(longc) - 1);
	longc[sizeof(longc) - 1] = 0;
	char doc[256];
	snprintf(doc, sizeof(doc), "{\"changes\":[],\"next\":\"%s\"}", longc);
	CHECK_INT_EQ(changes(doc), PITH_ETOOBIG);
	longc[PITH_CURSOR_MAX] = 0;
	snprintf(doc, sizeof(doc), "{\"changes\":[],\"next\":\"%s\"}", longc);
	CHECK_INT_EQ(changes(doc), 0);
}

TEST(changes_bounds, "refuses a page with more entries than the limit or the caller's array, or over the size limit")
{
	char doc[4096];
	size_t n = (size_t)snprintf(doc, sizeof(doc), "{\"changes\":[");
	for (int i = 0; i < 3; i++)
		n += (size_t)snprintf(doc + n, sizeof(doc) - n, "%s{\"cursor\":\"%d\",\"pith_number\":\"" NUMBER
				      "\",\"state_sha256\":\"" SHA_A "\"}", i ? "," : "", i + 1);
	snprintf(doc + n, sizeof(doc) - n, "],\"next\":\"3\"}");
	CHECK_INT_EQ(changes(doc), 0);
	CHECK_INT_EQ(nchg, 3);
	pith_upstream_limits_t lim = pith_changes_limits_default;
	lim.max_changes = 2;
	CHECK_INT_EQ(pith_changes_parse((const uint8_t *)doc, strlen(doc), &lim, chg, 8, &nchg, next_cur, &err),
		     PITH_ETOOBIG);
	CHECK(strstr(err.msg, "changes") && strstr(err.msg, "limit 2"));
	CHECK_INT_EQ(nchg, 0);
	lim.max_changes = 0; /* the array alone bounds it */
	CHECK_INT_EQ(pith_changes_parse((const uint8_t *)doc, strlen(doc), &lim, chg, 2, &nchg, next_cur, &err),
		     PITH_ETOOBIG);
	CHECK_INT_EQ(pith_changes_parse((const uint8_t *)doc, strlen(doc), &lim, chg, 3, &nchg, next_cur, &err), 0);
	CHECK_INT_EQ(nchg, 3);
	lim.max_bytes = 100;
	CHECK_INT_EQ(pith_changes_parse((const uint8_t *)doc, strlen(doc), &lim, chg, 8, &nchg, next_cur, &err),
		     PITH_ETOOBIG);
	lim = pith_changes_limits_default;
	lim.max_depth = 2;
	CHECK_INT_EQ(pith_changes_parse((const uint8_t *)doc, strlen(doc), &lim, chg, 8, &nchg, next_cur, &err),
		     PITH_ETOOBIG);
	CHECK_INT_EQ(pith_changes_limits_default.max_changes, PITH_CHANGES_MAX);
}

int main(void)
{
	RUN(real_manifest);
	RUN(manifest_bad);
	RUN(manifest_bounds);
	RUN(pattern_expand);
	RUN(bundle_url);
	RUN(resolve_answer);
	RUN(resolve_location);
	RUN(manifest_changes_url);
	RUN(changes_page);
	RUN(changes_bad);
	RUN(changes_bounds);
	return test_done();
}
