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

int main(void)
{
	RUN(real_manifest);
	RUN(manifest_bad);
	RUN(manifest_bounds);
	RUN(pattern_expand);
	RUN(bundle_url);
	RUN(resolve_answer);
	RUN(resolve_location);
	return test_done();
}
