/* node/render/render_target.c, the strict request-target parser, and node/http/metrics.c,
 * the metrics registry: what they accept, how they decode and render, and
 * every trick the parser refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "metrics.h"
#include "test_util.h"

static render_target_t t;

static int parse(const char *uri)
{
	const char *why;
	return render_target_parse(uri, strlen(uri), &t, &why);
}

TEST(splits_paths, "splits a path into decoded segments")
{
	CHECK_INT_EQ(parse("/pith/AR7B3DEVMOTSBRCCVXUCLYSRRE/state.json"), RENDER_TARGET_OK);
	CHECK_INT_EQ(t.nseg, 3);
	CHECK_STR_EQ(t.seg[0], "pith");
	CHECK_STR_EQ(t.seg[1], "AR7B3DEVMOTSBRCCVXUCLYSRRE");
	CHECK_STR_EQ(t.seg[2], "state.json");
	CHECK_INT_EQ(t.trailing_slash, 0);
	CHECK_INT_EQ(parse("/"), RENDER_TARGET_OK);
	CHECK_INT_EQ(t.nseg, 0);
	CHECK_INT_EQ(parse("/pith/"), RENDER_TARGET_OK);
	CHECK_INT_EQ(t.nseg, 1);
	CHECK_INT_EQ(t.trailing_slash, 1);
}

TEST(decodes_escapes, "decodes percent escapes and keeps colons")
{
	CHECK_INT_EQ(parse("/pith/pith%3A2024%3aAR7B3DEVMOTSBRCCVXUCLYSRRE"), RENDER_TARGET_OK);
	CHECK_STR_EQ(t.seg[1], "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE");
	CHECK_INT_EQ(parse("/pith/pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE.json"), RENDER_TARGET_OK);
	CHECK_STR_EQ(t.seg[1], "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE.json");
}

TEST(parses_queries, "parses a query: pairs, '+' as space, slashes in values, bare keys")
{
	CHECK_INT_EQ(parse("/api/pith-number/resolve?arxiv=math/0702322&json=true&x&y=a+b%2Fc"),
		     RENDER_TARGET_OK);
	CHECK_INT_EQ(t.nq, 4);
	CHECK_STR_EQ(render_target_query(&t, "arxiv", NULL), "math/0702322");
	CHECK_STR_EQ(render_target_query(&t, "json", NULL), "true");
	CHECK_STR_EQ(render_target_query(&t, "x", NULL), "");
	CHECK_STR_EQ(render_target_query(&t, "y", NULL), "a b/c");
	CHECK(render_target_query(&t, "doi", NULL) == NULL);
	int n = 0;
	CHECK_INT_EQ(parse("/r?a=1&a=2&&"), RENDER_TARGET_OK);
	CHECK_STR_EQ(render_target_query(&t, "a", &n), "1");
	CHECK_INT_EQ(n, 2);
}

TEST(refuses_traversal, "refuses dot segments, raw or encoded, and empty segments")
{
	const char *bad[] = {
		"/pith/../etc/passwd", "/pith/..", "/..", "/./pith", "/pith/%2e%2e/x",
		"/pith/%2E%2E", "/pith/.%2e/x", "/pith/%2e", "//pith", "/pith//x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i]) != RENDER_TARGET_BAD)
			test_fail_(__FILE__, __LINE__, "accepted %s", bad[i]);
}

TEST(marks_encoded_slashes, "marks a segment with an encoded slash; refuses dot pieces around it")
{
	CHECK_INT_EQ(parse("/pith/https%3A%2F%2Farxiv.org%2Fabs%2F2401.14489v2/state.json"),
		     RENDER_TARGET_OK);
	CHECK_INT_EQ(t.nseg, 3);
	CHECK_STR_EQ(t.seg[1], "https://arxiv.org/abs/2401.14489v2");
	CHECK_INT_EQ(t.enc_slash, 2);
	CHECK_INT_EQ(parse("/pith/a%2fb"), RENDER_TARGET_OK);
	CHECK_INT_EQ(t.enc_slash, 2);
	CHECK_INT_EQ(parse("/pith/ab"), RENDER_TARGET_OK);
	CHECK_INT_EQ(t.enc_slash, 0);
	const char *bad[] = {"/pith/a%2F..%2Fb", "/pith/..%2Fb", "/pith/a%2F.", "/pith/a%2F.%2Fb",
			     "/pith/%2E%2E%2Fx"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i]) != RENDER_TARGET_BAD)
			test_fail_(__FILE__, __LINE__, "accepted %s", bad[i]);
}

TEST(refuses_encoded_separators, "refuses encoded backslashes, NUL and controls")
{
	const char *bad[] = {
		"/pith/a%5Cb", "/pith/a%00b", "/pith/a%0Ab",
		"/pith/a%7fb", "/pith/a%C3%A9", "/pith/a\xc3\xa9", "/r?x%C3%A9=1", "/r?x%00=1",
		"/r?%0a=1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i]) != RENDER_TARGET_BAD)
			test_fail_(__FILE__, __LINE__, "accepted %s", bad[i]);
	const char nul[] = "/pith/a\0b";
	const char *why;
	CHECK_INT_EQ(render_target_parse(nul, sizeof(nul) - 1, &t, &why), RENDER_TARGET_BAD);
}

TEST(marks_values_not_text, "lets UTF-8 through in query values; marks values that are not "
     "text (controls, NUL, invalid UTF-8) for the views to refuse")
{
	CHECK_INT_EQ(parse("/search?q=M%C3%BCller+%E6%B7%B1%E5%BA%A6&limit=5"), RENDER_TARGET_OK);
	CHECK_STR_EQ(render_target_query(&t, "q", NULL), "M\xc3\xbcller \xe6\xb7\xb1\xe5\xba\xa6");
	CHECK(t.bad_why == NULL);
	/* raw UTF-8, as curl sends what it is given */
	CHECK_INT_EQ(parse("/search?q=\xd0\x9c\xd0\xb8\xd1\x80"), RENDER_TARGET_OK);
	CHECK_STR_EQ(render_target_query(&t, "q", NULL), "\xd0\x9c\xd0\xb8\xd1\x80");
	CHECK(t.bad_why == NULL);
	static const struct {
		const char *uri, *why;
	} marked[] = {
		{"/r?x=%00", "an encoded NUL"},
		{"/r?x=%0d%0aSet-Cookie:1", "a control character"},
		{"/r?a=1&x=%7F", "a control character"},
		{"/r?x=%C2%85", "a control character"},     /* U+0085, C1 */
		{"/r?x=%C3", "text that is not valid UTF-8"}, /* cut short */
		{"/r?x=%C0%AF", "text that is not valid UTF-8"}, /* overlong '/' */
		{"/r?x=%ED%A0%80", "text that is not valid UTF-8"}, /* a surrogate */
		{"/r?x=\xff", "text that is not valid UTF-8"},
	};
	for (size_t i = 0; i < sizeof(marked) / sizeof(marked[0]); i++) {
		if (parse(marked[i].uri) != RENDER_TARGET_OK) {
			test_fail_(__FILE__, __LINE__, "refused %s", marked[i].uri);
			continue;
		}
		if (!t.bad_why || strcmp(t.bad_why, marked[i].why) || strcmp(t.bad_key, "x"))
			test_fail_(__FILE__, __LINE__, "%s: marked %s (%s)", marked[i].uri,
				   t.bad_why ? t.bad_why : "nothing", t.bad_key ? t.bad_key : "-");
		/* no NUL or control byte reaches a value, marked or not */
		const char *v = render_target_query(&t, "x", NULL);
		for (const char *p = v; p && *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				test_fail_(__FILE__, __LINE__, "%s: a control byte in the value",
					   marked[i].uri);
	}
}

TEST(refuses_malformed, "refuses malformed escapes, raw specials, fragments and other forms")
{
	const char *bad[] = {
		"/pith/%", "/pith/%4", "/pith/%zz", "/pith/a b", "/pith/a\"b", "/pith/<x>",
		"/pith/a\\b", "/pith/a#frag", "/pith/\x80", "http://evil/pith/X", "*", "",
		"pith/X", "/r?a=<", "/r?a=1#x", "/r?%=1", "/r?a=%g0",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse(bad[i]) != RENDER_TARGET_BAD)
			test_fail_(__FILE__, __LINE__, "accepted '%s'", bad[i]);
}

TEST(limits, "refuses too long targets (414), too many segments and parameters")
{
	char *u = malloc(RENDER_TARGET_MAX + 2);
	memset(u, 'a', RENDER_TARGET_MAX + 1);
	u[0] = '/';
	u[RENDER_TARGET_MAX + 1] = 0;
	CHECK_INT_EQ(parse(u), RENDER_TARGET_TOO_LONG);
	u[RENDER_TARGET_MAX] = 0;
	CHECK_INT_EQ(parse(u), RENDER_TARGET_OK);
	free(u);
	CHECK_INT_EQ(parse("/1/2/3/4/5/6/7/8"), RENDER_TARGET_OK);
	CHECK_INT_EQ(parse("/1/2/3/4/5/6/7/8/9"), RENDER_TARGET_BAD);
	char q[512] = "/r?";
	for (int i = 0; i < RENDER_QUERY_MAX; i++)
		strcat(q, "a=1&");
	CHECK_INT_EQ(parse(q), RENDER_TARGET_OK);
	strcat(q, "b=2");
	CHECK_INT_EQ(parse(q), RENDER_TARGET_BAD);
}

TEST(worst_case_fits, "the decoding buffer holds the worst case (bare keys and empty values)")
{
	/* "?a&a&..." : every 2 input bytes make 3 output bytes; within the
	 * parameter limit the target stays short, so also try long values */
	char *u = malloc(RENDER_TARGET_MAX + 1);
	strcpy(u, "/x?");
	size_t n = strlen(u);
	for (int i = 0; i < RENDER_QUERY_MAX - 1; i++) {
		strcpy(u + n, "k&");
		n += 2;
	}
	u[n++] = 'v';
	u[n++] = '=';
	while (n < RENDER_TARGET_MAX)
		u[n++] = 'z';
	u[n] = 0;
	CHECK_INT_EQ(parse(u), RENDER_TARGET_OK);
	CHECK_INT_EQ(t.nq, RENDER_QUERY_MAX);
	free(u);
}

TEST(renders_metrics, "renders counters, gauges, histograms and collector output as Prometheus text and OpenMetrics")
{
	metrics_t *m = metrics_new();
	metric_t *c = metrics_counter(m, "t_requests_total", "Requests", "route=\"a\"");
	metric_t *c2 = metrics_counter(m, "t_requests_total", "ignored", "route=\"b\"");
	CHECK(c && c2 && c != c2);
	CHECK(metrics_counter(m, "t_requests_total", "", "route=\"a\"") == c);
	CHECK(metrics_gauge(m, "t_requests_total", "", "x=\"1\"") == NULL); /* type clash */
	CHECK(metrics_counter(m, "bad name", "", NULL) == NULL);
	metric_add(c, 41);
	metric_inc(c);
	metric_set(metrics_gauge(m, "t_temp", "Temperature", NULL), 1.5);
	double b[] = {0.1, 1};
	metric_hist_t *h = metrics_histogram(m, "t_lat_seconds", "Latency", "route=\"a\"", b, 2);
	metric_hist_observe(h, 0.05);
	metric_hist_observe(h, 0.5);
	metric_hist_observe(h, 5);
	pith_buf_t out = PITH_BUF_INIT;
	CHECK_INT_EQ(metrics_render(m, &out), 0);
	pith_buf_cstr(&out);
	const char *s = (const char *)out.data;
	CHECK_STR_CONTAINS(s, "# HELP t_requests_total Requests\n# TYPE t_requests_total counter\n"
			      "t_requests_total{route=\"a\"} 42\nt_requests_total{route=\"b\"} 0\n");
	CHECK_STR_CONTAINS(s, "# TYPE t_temp gauge\nt_temp 1.5\n");
	/* values in the shortest form that reads back the same */
	CHECK_STR_CONTAINS(s, "t_lat_seconds_bucket{route=\"a\",le=\"0.1\"} 1\n");
	CHECK_STR_CONTAINS(s, "t_lat_seconds_bucket{route=\"a\",le=\"1\"} 2\n");
	CHECK_STR_CONTAINS(s, "t_lat_seconds_bucket{route=\"a\",le=\"+Inf\"} 3\n");
	CHECK_STR_CONTAINS(s, "t_lat_seconds_sum{route=\"a\"} 5.55\n");
	CHECK_STR_CONTAINS(s, "t_lat_seconds_count{route=\"a\"} 3\n");
	/* OpenMetrics: counter and info families named without their
	 * suffix, units, canonical le values, the end marker */
	pith_buf_t om = PITH_BUF_INIT;
	CHECK_INT_EQ(metrics_render_as(m, &om, METRICS_OPENMETRICS), 0);
	pith_buf_cstr(&om);
	const char *o = (const char *)om.data;
	CHECK_STR_CONTAINS(o, "# HELP t_requests Requests\n# TYPE t_requests counter\n"
			      "t_requests_total{route=\"a\"} 42\n");
	CHECK_STR_CONTAINS(o, "# TYPE t_lat_seconds histogram\n# UNIT t_lat_seconds seconds\n");
	CHECK_STR_CONTAINS(o, "t_lat_seconds_bucket{route=\"a\",le=\"0.1\"} 1\n");
	CHECK_STR_CONTAINS(o, "t_lat_seconds_bucket{route=\"a\",le=\"1.0\"} 2\n");
	CHECK_INT_EQ(om.len >= 6 && !strcmp(o + om.len - 6, "# EOF\n"), 1);
	pith_buf_release(&om);
	pith_buf_t e = PITH_BUF_INIT;
	metrics_label_escape(&e, "a\"b\\c\nd");
	pith_buf_cstr(&e);
	CHECK_STR_EQ((const char *)e.data, "a\\\"b\\\\c\\nd");
	pith_buf_release(&e);
	pith_buf_release(&out);
	metrics_free(m);
}

TEST(http_dates, "formats IMF-fixdates and parses RFC 9110's three forms, refusing the rest")
{
	char d[RENDER_DATE_LEN + 1];
	int64_t when = -1;
	render_date_format(784111777, d);
	CHECK_STR_EQ(d, "Sun, 06 Nov 1994 08:49:37 GMT");
	render_date_format(0, d);
	CHECK_STR_EQ(d, "Thu, 01 Jan 1970 00:00:00 GMT");
	static const char *const good[] = {"Sun, 06 Nov 1994 08:49:37 GMT",
					   "Sunday, 06-Nov-94 08:49:37 GMT",
					   "Sun Nov  6 08:49:37 1994"};
	for (size_t i = 0; i < 3; i++) {
		when = -1;
		CHECK_INT_EQ(render_date_parse(good[i], &when), 0);
		CHECK_INT_EQ(when, 784111777);
	}
	static const char *const bad[] = {"", "Sun, 06 Nov 1994 08:49:37", "Sun, 6 Nov 1994 08:49:37 GMT",
					  "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
					  "Sun, 06 Nov 1994 08:49:37 GMT x", "1994-11-06T08:49:37Z",
					  "Sun Nov 06 08:49:37", "\"Sun, 06 Nov 1994 08:49:37 GMT\""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT_EQ(render_date_parse(bad[i], &when), -1);
	CHECK_INT_EQ(render_date_parse(NULL, &when), -1);
}

TEST(conditional, "answers 304 when If-None-Match lists the ETag, else by If-Modified-Since alone")
{
	const char *tag = "\"abc\"";
	CHECK(render_is_not_modified(tag, 0, "\"abc\"", NULL));
	CHECK(render_is_not_modified(tag, 0, "\"x\", W/\"abc\"", NULL));
	CHECK(render_is_not_modified(tag, 0, "*", NULL));
	CHECK(!render_is_not_modified(tag, 0, "\"abcd\"", NULL));
	CHECK(!render_is_not_modified("", 0, "*", NULL));
	/* If-None-Match decides alone, even when the date would match */
	CHECK(!render_is_not_modified(tag, 784111777, "\"x\"", "Sun, 06 Nov 1994 08:49:37 GMT"));
	CHECK(render_is_not_modified(tag, 784111777, NULL, "Sun, 06 Nov 1994 08:49:37 GMT"));
	CHECK(!render_is_not_modified(tag, 784111778, NULL, "Sun, 06 Nov 1994 08:49:37 GMT"));
	CHECK(!render_is_not_modified(tag, 0, NULL, "Sun, 06 Nov 1994 08:49:37 GMT"));
	CHECK(!render_is_not_modified(tag, 784111777, NULL, "yesterday"));
}

int main(void)
{
	RUN(splits_paths);
	RUN(decodes_escapes);
	RUN(parses_queries);
	RUN(refuses_traversal);
	RUN(marks_encoded_slashes);
	RUN(refuses_encoded_separators);
	RUN(marks_values_not_text);
	RUN(refuses_malformed);
	RUN(limits);
	RUN(worst_case_fits);
	RUN(renders_metrics);
	RUN(http_dates);
	RUN(conditional);
	return test_done();
}
