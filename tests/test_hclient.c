/* node/loop/hclient.c: the HTTP(S) client on a real loop against real servers.
 *
 * Plain HTTP cases talk to an evhttp server in this process, on the same
 * event_base as the client (every route below: statuses, ETag and 304,
 * a redirect, Retry-After, oversized bodies, a stall). HTTPS cases talk
 * to tests/upstream_standin.py with its own test CA (--standin PATH, run
 * with --python; skipped without them). Every case runs the loop until
 * the callbacks it waits for came, or a deadline. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hclient.h"
#include "test_util.h"

static struct event_base *base;
static struct evhttp *srv, *away; /* the origin, and another port */
static int srv_port;
static char origin[64];
static int away_port;         /* a second server, another origin */
static int away_seen;         /* requests that reached it */
static hc_t *cur;             /* the client the server watches */
static size_t max_seen;       /* most transfers in flight a request saw */
static int stalls_seen;       /* /stall requests that came */
static struct evhttp_request *drips[4]; /* /drip-* requests, ended by their test */
static int ndrips;
static int in_get;            /* inside hc_get */
static const char *standin, *python;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the server ------------------------------------------------------------- */

static void reply(struct evhttp_request *req, int code, const char *body, size_t n)
{
	struct evbuffer *b = evbuffer_new();
	evbuffer_add(b, body, n);
	evhttp_send_reply(req, code, code == 200 ? "OK" : "Status", b);
	evbuffer_free(b);
}

static void on_request(struct evhttp_request *req, void *arg)
{
	const char *uri = evhttp_request_get_uri(req);
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	if (cur && hc_inflight(cur) > max_seen)
		max_seen = hc_inflight(cur);
	static char big[5000];
	memset(big, 'x', sizeof(big));
	if (!strcmp(uri, "/ok")) {
		evhttp_add_header(out, "ETag", "\"v1\"");
		const char *inm = evhttp_find_header(in, "If-None-Match");
		if (inm && !strcmp(inm, "\"v1\""))
			return evhttp_send_reply(req, 304, "Not Modified", NULL);
		return reply(req, 200, "hello world", 11);
	}
	if (!strcmp(uri, "/weak")) {
		evhttp_add_header(out, "ETag", "W/\"v1\"");
		return reply(req, 200, "weak", 4);
	}
	if (!strcmp(uri, "/redir")) {
		evhttp_add_header(out, "Location", "/ok");
		return reply(req, 302, "", 0);
	}
	if (!strcmp(uri, "/redir-port") || !strcmp(uri, "/redir-host")) {
		char to[128];
		if (uri[7] == 'p')
			snprintf(to, sizeof(to), "http://127.0.0.1:%d/ok", away_port);
		else
			snprintf(to, sizeof(to), "http://localhost:%d/ok", srv_port);
		evhttp_add_header(out, "Location", to);
		return reply(req, 302, "", 0);
	}
	if (!strcmp(uri, "/busy-delta")) {
		evhttp_add_header(out, "Retry-After", "120");
		return reply(req, 503, "busy", 4);
	}
	if (!strcmp(uri, "/busy-date")) {
		char date[64];
		time_t t = time(NULL) + 30;
		struct tm tm;
		strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&t, &tm));
		evhttp_add_header(out, "Retry-After", date);
		return reply(req, 429, "slow down", 9);
	}
	if (!strcmp(uri, "/big-cl"))
		return reply(req, 200, big, sizeof(big));
	if (!strcmp(uri, "/stall")) {
		/* no answer at all: the request stays open until the client goes */
		stalls_seen++;
		return;
	}
	if (!strcmp(uri, "/big-chunked")) {
		evhttp_send_reply_start(req, 200, "OK");
		struct evbuffer *b = evbuffer_new();
		for (int i = 0; i < 5; i++) {
			evbuffer_add(b, big, 1000);
			evhttp_send_reply_chunk(req, b);
		}
		evbuffer_free(b);
		return evhttp_send_reply_end(req);
	}
	if (!strcmp(uri, "/drip-cl") || !strcmp(uri, "/drip-chunked")) {
		/* 2,000 bytes of a body, then nothing more: at its first second's
		 * rate a 100,000-byte body would take 50 s */
		if (uri[6] == 'c' && uri[7] == 'l')
			evhttp_add_header(out, "Content-Length", "100000");
		evhttp_send_reply_start(req, 200, "OK");
		struct evbuffer *b = evbuffer_new();
		evbuffer_add(b, big, 2000);
		evhttp_send_reply_chunk(req, b);
		evbuffer_free(b);
		if (ndrips < 4)
			drips[ndrips++] = req;
		return;
	}
	if (!strncmp(uri, "/n/", 3))
		return reply(req, 200, uri + 3, strlen(uri + 3));
	evhttp_send_error(req, 404, NULL);
}

static void on_away(struct evhttp_request *req, void *arg)
{
	away_seen++;
	reply(req, 200, "away", 4);
}

static int server_start(void)
{
	srv = evhttp_new(base);
	struct evhttp_bound_socket *s = evhttp_bind_socket_with_handle(srv, "127.0.0.1", 0);
	if (!s)
		return -1;
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&sa, &len);
	srv_port = ntohs(sa.sin_port);
	snprintf(origin, sizeof(origin), "http://127.0.0.1:%d", srv_port);
	evhttp_set_gencb(srv, on_request, NULL);
	away = evhttp_new(base);
	s = evhttp_bind_socket_with_handle(away, "127.0.0.1", 0);
	if (!s)
		return -1;
	len = sizeof(sa);
	getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&sa, &len);
	away_port = ntohs(sa.sin_port);
	evhttp_set_gencb(away, on_away, NULL);
	return 0;
}

/* ---- the client's side --------------------------------------------------------- */

typedef struct got {
	int calls, in_get;
	int curl_code, over_cap, location_too_long;
	long status, connects;
	char body[64];
	size_t body_len;
	char etag[HC_ETAG_MAX + 1], location[HC_LOCATION_MAX + 1], error[512];
	int64_t retry_after;
	double seconds;
	hc_t *free_me; /* freed from the callback */
} got_t;

static void on_done(void *arg, const hc_result_t *r)
{
	got_t *g = arg;
	g->calls++;
	g->in_get |= in_get;
	g->curl_code = r->curl_code;
	g->status = r->status;
	g->body_len = r->body_len;
	snprintf(g->body, sizeof(g->body), "%.*s", (int)(r->body_len < 63 ? r->body_len : 63),
		 r->body ? (const char *)r->body : "");
	snprintf(g->etag, sizeof(g->etag), "%s", r->etag);
	snprintf(g->location, sizeof(g->location), "%s", r->location);
	snprintf(g->error, sizeof(g->error), "%s", r->error);
	g->location_too_long = r->location_too_long;
	g->retry_after = r->retry_after_s;
	g->over_cap = r->over_cap;
	g->connects = r->connects;
	g->seconds = r->seconds;
	if (cur && hc_inflight(cur) > max_seen)
		max_seen = hc_inflight(cur);
	if (g->free_me)
		hc_free(g->free_me);
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
}

/* Runs the loop until *calls >= want or secs passed. */
static void run_until(const int *calls, int want, double secs)
{
	double end = now_s() + secs;
	while ((!calls || *calls < want) && now_s() < end)
		event_base_loop(base, EVLOOP_ONCE);
}

static uint64_t get(hc_t *c, const char *path, const char *inm, size_t cap, got_t *g)
{
	char url[256];
	snprintf(url, sizeof(url), "%s%s", strncmp(path, "http", 4) ? origin : "", path);
	hc_req_t req = {.url = url, .if_none_match = inm, .body_cap = cap, .done = on_done, .arg = g};
	in_get = 1;
	uint64_t id = hc_get(c, &req);
	in_get = 0;
	return id;
}

/* GETs paths[0..n) with cap at once, and waits for every answer into g[]. */
static void fetch_all(hc_t *c, const char *const *paths, size_t n, size_t cap, got_t *g)
{
	for (size_t i = 0; i < n; i++)
		get(c, paths[i], NULL, cap, &g[i]);
	for (size_t i = 0; i < n; i++)
		run_until(&g[i].calls, 1, 10);
}

static hc_t *client(size_t max_inflight, long low_speed_time, const char *ca_file)
{
	hc_opts_t o;
	hc_opts_default(&o);
	o.user_agent = "test_hclient/1";
	if (max_inflight)
		o.max_inflight = max_inflight;
	if (low_speed_time)
		o.low_speed_time_s = low_speed_time;
	o.ca_file = ca_file;
	hc_t *c = NULL;
	pith_err_t err = {0};
	if (hc_new(base, &o, &c, &err))
		fprintf(stderr, "# hc_new: %s\n", err.msg);
	cur = c;
	return c;
}

/* ---- cases ------------------------------------------------------------------ */

TEST(ok_etag_304, "a 200 comes with its body and ETag; If-None-Match with it gets a 304, and the next GET without it a 200")
{
	hc_t *c = client(0, 0, NULL);
	got_t a = {0}, b = {0};
	CHECK(get(c, "/ok", NULL, 1000, &a) != 0);
	CHECK_INT_EQ(a.calls, 0); /* later, not inside hc_get */
	CHECK_INT_EQ(hc_queued(c), 1);
	run_until(&a.calls, 1, 10);
	CHECK_INT_EQ(a.calls, 1);
	CHECK_INT_EQ(a.in_get, 0);
	CHECK_INT_EQ(a.curl_code, 0);
	CHECK_INT_EQ(a.status, 200);
	CHECK_STR_EQ(a.body, "hello world");
	CHECK_INT_EQ(a.body_len, 11);
	CHECK_STR_EQ(a.etag, "\"v1\"");
	CHECK_STR_EQ(a.error, "");
	CHECK_INT_EQ(a.retry_after, -1);
	CHECK_INT_EQ(a.connects, 1);
	get(c, "/ok", a.etag, 1000, &b);
	run_until(&b.calls, 1, 10);
	CHECK_INT_EQ(b.status, 304);
	CHECK_INT_EQ(b.body_len, 0);
	CHECK_STR_EQ(b.etag, "\"v1\"");
	CHECK_INT_EQ(b.connects, 0); /* the first one's connection again */
	got_t d = {0};
	get(c, "/ok", NULL, 1000, &d); /* on b's easy handle, kept: its header is not */
	run_until(&d.calls, 1, 10);
	CHECK_INT_EQ(d.status, 200);
	CHECK_STR_EQ(d.body, "hello world");
	got_t w = {0};
	get(c, "/weak", NULL, 1000, &w);
	run_until(&w.calls, 1, 10);
	CHECK_INT_EQ(w.status, 200);
	CHECK_STR_EQ(w.etag, ""); /* a weak tag is not kept */
	CHECK_INT_EQ(hc_inflight(c), 0);
	hc_free(c);
}

TEST(status_404_302, "a 404 is an answer; a 302's Location is given, not followed")
{
	hc_t *c = client(0, 0, NULL);
	got_t g[2] = {{0}};
	fetch_all(c, (const char *[]){"/nothing-here", "/redir"}, 2, 100000, g);
	CHECK_INT_EQ(g[0].curl_code, 0);
	CHECK_INT_EQ(g[0].status, 404);
	CHECK_INT_EQ(g[1].curl_code, 0);
	CHECK_INT_EQ(g[1].status, 302);
	CHECK_STR_EQ(g[1].location, "/ok");
	CHECK_INT_EQ(g[1].location_too_long, 0);
	CHECK_INT_EQ(g[1].body_len, 0);
	CHECK_STR_EQ(g[1].etag, ""); /* /ok's tag would say it was followed */
	hc_free(c);
}

TEST(redirect_origin, "followed redirects stay on the request's origin: another port or host name is refused before anything is asked there")
{
	hc_t *c = client(0, 0, NULL);
	static const char *const paths[] = {"/redir", "/redir-port", "/redir-host"};
	got_t g[3] = {{0}};
	for (int i = 0; i < 3; i++) {
		char url[256];
		snprintf(url, sizeof(url), "%s%s", origin, paths[i]);
		hc_req_t req = {.url = url, .body_cap = 1000, .max_redirects = 5, .done = on_done, .arg = &g[i]};
		CHECK(hc_get(c, &req) != 0);
		run_until(&g[i].calls, 1, 10);
	}
	CHECK_INT_EQ(g[0].curl_code, 0);
	CHECK_INT_EQ(g[0].status, 200);
	CHECK_STR_EQ(g[0].body, "hello world");
	for (int i = 1; i < 3; i++) {
		CHECK_INT_EQ(g[i].curl_code, 47); /* CURLE_TOO_MANY_REDIRECTS */
		CHECK(!strncmp(g[i].error, "redirect to another origin refused: http://", 43));
		CHECK_INT_EQ(g[i].body_len, 0);
	}
	CHECK_INT_EQ(away_seen, 0);
	char a[128], b[128];
	snprintf(a, sizeof(a), "http://127.0.0.1:%d/x", away_port);
	CHECK(hc_origin_same("https://Example.org/a", "https://example.org:443/b?c"));
	CHECK(hc_origin_same("http://127.0.0.1:80", "http://127.0.0.1/"));
	CHECK(!hc_origin_same("https://example.org/", "http://example.org/"));
	CHECK(!hc_origin_same("https://example.org/", "https://example.org:8443/"));
	CHECK(!hc_origin_same("https://example.org/", "https://evil.example.org/"));
	CHECK(!hc_origin_same(origin, a));
	snprintf(b, sizeof(b), "%s/y", origin);
	CHECK(hc_origin_same(origin, b));
	CHECK(!hc_origin_same("not a url", "not a url"));
	hc_free(c);
}

TEST(retry_after, "Retry-After is read as delta-seconds (503) and as an HTTP-date (429)")
{
	hc_t *c = client(0, 0, NULL);
	got_t g[2] = {{0}};
	fetch_all(c, (const char *[]){"/busy-delta", "/busy-date"}, 2, 1000, g);
	CHECK_INT_EQ(g[0].status, 503);
	CHECK_INT_EQ(g[0].retry_after, 120);
	CHECK_STR_EQ(g[0].body, "busy");
	CHECK_INT_EQ(g[1].status, 429);
	CHECK(g[1].retry_after >= 28 && g[1].retry_after <= 31);
	hc_free(c);
}

TEST(over_cap, "a body over the cap fails, by Content-Length up front and when chunked")
{
	hc_t *c = client(0, 0, NULL);
	got_t g[2] = {{0}}, ok = {0};
	fetch_all(c, (const char *[]){"/big-cl", "/big-chunked"}, 2, 1000, g);
	fetch_all(c, (const char *[]){"/big-chunked"}, 1, 5000, &ok);
	for (int i = 0; i < 2; i++) {
		CHECK(g[i].curl_code != 0);
		CHECK_INT_EQ(g[i].over_cap, 1);
		CHECK_STR_EQ(g[i].error, "body over 1000 bytes");
	}
	CHECK_INT_EQ(g[0].body_len, 0);
	CHECK_INT_EQ(ok.curl_code, 0); /* exactly the cap is fine */
	CHECK_INT_EQ(ok.body_len, 5000);
	hc_free(c);
}

TEST(stall, "a transfer slower than low_speed_bytes for low_speed_time_s is dropped")
{
	hc_t *c = client(0, 1, NULL);
	got_t a = {0};
	double t0 = now_s();
	get(c, "/stall", NULL, 1000, &a);
	run_until(&a.calls, 1, 10);
	CHECK_INT_EQ(a.calls, 1);
	CHECK_INT_EQ(a.curl_code, 28); /* CURLE_OPERATION_TIMEDOUT */
	CHECK_STR_CONTAINS(a.error, "Timeout");
	CHECK(now_s() - t0 < 5);
	CHECK(a.seconds >= 0.9);
	hc_free(c);
}

TEST(deadline, "a transfer past total_timeout_s is dropped; one whose Content-Length cannot arrive by then, at once")
{
	hc_opts_t o;
	hc_opts_default(&o);
	o.total_timeout_s = 3;
	hc_t *c = NULL;
	pith_err_t err = {0};
	CHECK(hc_new(base, &o, &c, &err) == 0);
	cur = c;
	got_t g[2] = {{0}};
	double t0 = now_s();
	get(c, "/drip-cl", NULL, 200000, &g[0]);
	run_until(&g[0].calls, 1, 10);
	double t_cl = now_s() - t0;
	get(c, "/drip-chunked", NULL, 200000, &g[1]);
	run_until(&g[1].calls, 1, 10);
	double t_ch = now_s() - t0 - t_cl;
	printf("# Content-Length body judged too slow after %.1f s; chunked dropped at %.1f s\n", t_cl,
	       t_ch);
	CHECK_INT_EQ(g[0].curl_code, 28); /* CURLE_OPERATION_TIMEDOUT */
	CHECK_STR_CONTAINS(g[0].error, "too slow for the deadline: 2000 bytes in");
	CHECK(t_cl >= 0.2 && t_cl < 2.9);
	CHECK_INT_EQ(g[1].curl_code, 28);
	CHECK_STR_CONTAINS(g[1].error, "Timeout");
	CHECK(t_ch >= 2.9 && t_ch < 6);
	hc_free(c);
	run_until(NULL, 0, 0.2); /* the server sees the connections close */
	while (ndrips)
		evhttp_send_reply_end(drips[--ndrips]); /* frees one whose connection is gone */
}

TEST(origins_listed, "redirects go to a listed origin too, never from https to http")
{
	char listed[64];
	snprintf(listed, sizeof(listed), "http://127.0.0.1:%d", away_port);
	const char *const origins[] = {listed};
	hc_opts_t o;
	hc_opts_default(&o);
	o.origins = origins;
	o.n_origins = 1;
	hc_t *c = NULL;
	pith_err_t err = {0};
	CHECK(hc_new(base, &o, &c, &err) == 0);
	cur = c;
	got_t g[2] = {{0}};
	static const char *const paths[] = {"/redir-port", "/redir-host"};
	away_seen = 0;
	for (int i = 0; i < 2; i++) {
		char url[256];
		snprintf(url, sizeof(url), "%s%s", origin, paths[i]);
		hc_req_t req = {.url = url, .body_cap = 1000, .max_redirects = 5, .done = on_done, .arg = &g[i]};
		CHECK(hc_get(c, &req) != 0);
		run_until(&g[i].calls, 1, 10);
	}
	CHECK_INT_EQ(g[0].curl_code, 0); /* to the listed origin */
	CHECK_STR_EQ(g[0].body, "away");
	CHECK_INT_EQ(away_seen, 1);
	CHECK_INT_EQ(g[1].curl_code, 47); /* localhost is not listed */
	CHECK(!strncmp(g[1].error, "redirect to another origin refused: http://localhost", 52));
	CHECK(hc_origin_allowed("https://a.example/x", "https://cdn.example/b", (const char *[]){"https://cdn.example"}, 1));
	CHECK(hc_origin_allowed("https://a.example/x", "https://CDN.example:443/b", (const char *[]){"https://cdn.example/"}, 1));
	CHECK(!hc_origin_allowed("https://a.example/x", "http://cdn.example/b", (const char *[]){"http://cdn.example"}, 1));
	CHECK(!hc_origin_allowed("https://a.example/x", "https://cdn.example:8443/b", (const char *[]){"https://cdn.example"}, 1));
	CHECK(!hc_origin_allowed("https://a.example/x", "https://b.example/b", NULL, 0));
	CHECK(hc_origin_allowed("http://a.example/x", "https://cdn.example/b", (const char *[]){"https://cdn.example"}, 1));
	CHECK(hc_origin_is_valid("https://cdn.example"));
	CHECK(hc_origin_is_valid("http://127.0.0.1:8080/"));
	CHECK(!hc_origin_is_valid("https://cdn.example/bundles"));
	CHECK(!hc_origin_is_valid("https://user@cdn.example"));
	CHECK(!hc_origin_is_valid("ftp://cdn.example"));
	CHECK(!hc_origin_is_valid("https://"));
	CHECK(!hc_origin_is_valid("https://cdn.example?x"));
	hc_free(c);
}

TEST(refused, "a refused connection fails with curl's message")
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &len);
	close(fd); /* nobody listens there now */
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/x", ntohs(sa.sin_port));
	hc_t *c = client(0, 0, NULL);
	got_t a = {0}, b = {0};
	get(c, url, NULL, 1000, &a);
	get(c, "ftp://127.0.0.1/x", NULL, 1000, &b);
	run_until(&a.calls, 1, 10);
	run_until(&b.calls, 1, 10);
	CHECK_INT_EQ(a.curl_code, 7); /* CURLE_COULDNT_CONNECT */
	CHECK_INT_EQ(a.status, 0);
	CHECK_STR_CONTAINS(a.error, "onnect");
	CHECK(b.curl_code != 0); /* only http and https */
	CHECK_INT_EQ(b.status, 0);
	hc_free(c);
}

TEST(many, "250 requests with max_inflight 4: never more than 4 at once, all done, 4 connections")
{
	enum { N = 250 };
	hc_t *c = client(4, 0, NULL);
	static got_t g[N];
	memset(g, 0, sizeof(g));
	max_seen = 0;
	for (int i = 0; i < N; i++) {
		char path[32];
		snprintf(path, sizeof(path), "/n/%d", i);
		CHECK(get(c, path, NULL, 100, &g[i]) != 0);
	}
	CHECK_INT_EQ(hc_queued(c), N);
	int done = 0;
	double end = now_s() + 30;
	while (done < N && now_s() < end) {
		event_base_loop(base, EVLOOP_ONCE);
		done = 0;
		for (int i = 0; i < N; i++)
			done += g[i].calls;
	}
	CHECK_INT_EQ(done, N);
	long conns = 0;
	int bad = 0;
	for (int i = 0; i < N; i++) {
		char want[16];
		snprintf(want, sizeof(want), "%d", i);
		conns += g[i].connects;
		bad += g[i].calls != 1 || g[i].status != 200 || strcmp(g[i].body, want);
	}
	CHECK_INT_EQ(bad, 0);
	CHECK(max_seen <= 4 && max_seen >= 2);
	CHECK(conns >= 1 && conns <= 4);
	printf("# %d transfers, at most %zu at once, %ld connections\n", N, max_seen, conns);
	CHECK_INT_EQ(hc_inflight(c), 0);
	CHECK_INT_EQ(hc_queued(c), 0);
	hc_free(c);
}

TEST(cancel, "hc_cancel of a queued and of a running transfer: no callback, the slot freed")
{
	hc_t *c = client(1, 0, NULL);
	got_t a = {0}, b = {0}, s = {0}, after = {0};
	get(c, "/ok", NULL, 1000, &a);
	uint64_t idb = get(c, "/ok", NULL, 1000, &b);
	CHECK_INT_EQ(hc_queued(c), 2);
	hc_cancel(c, idb);
	CHECK_INT_EQ(hc_queued(c), 1);
	hc_cancel(c, 999999); /* unknown: ignored */
	run_until(&a.calls, 1, 10);
	run_until(NULL, 0, 0.2);
	CHECK_INT_EQ(a.calls, 1);
	CHECK_INT_EQ(b.calls, 0);
	stalls_seen = 0;
	uint64_t ids = get(c, "/stall", NULL, 1000, &s);
	get(c, "/ok", NULL, 1000, &after);
	run_until(&stalls_seen, 1, 10);
	CHECK_INT_EQ(hc_inflight(c), 1);
	CHECK_INT_EQ(hc_queued(c), 1);
	hc_cancel(c, ids);
	CHECK_INT_EQ(hc_inflight(c), 0);
	run_until(&after.calls, 1, 10); /* the queued one gets the slot */
	CHECK_INT_EQ(after.status, 200);
	CHECK_INT_EQ(s.calls, 0);
	hc_cancel(c, ids); /* finished or cancelled: ignored */
	hc_free(c);
}

TEST(free_running, "hc_free with transfers running and queued: no callback after, nothing leaks")
{
	hc_t *c = client(3, 0, NULL);
	got_t g[5] = {{0}};
	stalls_seen = 0;
	for (int i = 0; i < 5; i++)
		get(c, "/stall", NULL, 1000, &g[i]);
	run_until(&stalls_seen, 3, 10);
	CHECK_INT_EQ(hc_inflight(c), 3);
	CHECK_INT_EQ(hc_queued(c), 2);
	hc_free(c);
	CHECK(c == NULL);
	cur = NULL;
	run_until(NULL, 0, 0.3);
	int calls = 0;
	for (int i = 0; i < 5; i++)
		calls += g[i].calls;
	CHECK_INT_EQ(calls, 0);
	hc_free(c); /* NULL */
}

TEST(free_in_callback, "hc_free from a done callback: the other transfers get no callback")
{
	hc_t *c = client(4, 0, NULL);
	got_t a = {0}, b = {0}, q = {0};
	a.free_me = c;
	b.free_me = c;
	get(c, "/ok", NULL, 1000, &a);
	get(c, "/ok", NULL, 1000, &b);
	get(c, "/stall", NULL, 1000, &q);
	int first = 0;
	double end = now_s() + 10;
	while (!(first = a.calls + b.calls) && now_s() < end)
		event_base_loop(base, EVLOOP_ONCE);
	cur = NULL;
	run_until(NULL, 0, 0.3);
	CHECK_INT_EQ(a.calls + b.calls, 1);
	CHECK_INT_EQ(q.calls, 0);
}

/* ---- HTTPS through the stand-in ---------------------------------------------- */

static pid_t standin_pid;
static char tls_dir[256], ca_file[300], https_origin[64];

static int standin_start(void)
{
	char tmpl[] = "/tmp/pith-hclient-XXXXXX";
	if (!mkdtemp(tmpl))
		return -1;
	char root[300], port_file[300];
	snprintf(tls_dir, sizeof(tls_dir), "%s/tls", tmpl);
	snprintf(root, sizeof(root), "%s/root", tmpl);
	snprintf(port_file, sizeof(port_file), "%s/port", tmpl);
	snprintf(ca_file, sizeof(ca_file), "%s/ca.pem", tls_dir);
	mkdir(root, 0700);
	standin_pid = fork();
	if (standin_pid == 0) {
		int nul = open("/dev/null", O_WRONLY);
		dup2(nul, 1);
		execlp(python, python, standin, "--root", root, "--tls-dir", tls_dir, "--port-file",
		      port_file, (char *)NULL);
		_exit(127);
	}
	double end = now_s() + 20;
	FILE *f = NULL;
	while (!(f = fopen(port_file, "r")) && now_s() < end)
		usleep(50000);
	int port = 0;
	if (!f || fscanf(f, "%d", &port) != 1)
		port = 0;
	if (f)
		fclose(f);
	snprintf(https_origin, sizeof(https_origin), "https://127.0.0.1:%d", port);
	return port ? 0 : -1;
}

static void standin_stop(void)
{
	if (standin_pid > 0) {
		kill(standin_pid, SIGKILL);
		waitpid(standin_pid, NULL, 0);
	}
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%.*s'", (int)(strlen(tls_dir) - 4), tls_dir);
	if (tls_dir[0] && system(cmd)) {
	}
}

TEST(https, "HTTPS: the test CA verifies the stand-in; another CA set (the system's) fails")
{
	char url[128];
	snprintf(url, sizeof(url), "%s/_stats", https_origin);
	hc_t *good = client(0, 0, ca_file);
	got_t a = {0}, b = {0};
	get(good, url, NULL, 10000, &a);
	run_until(&a.calls, 1, 20);
	CHECK_INT_EQ(a.curl_code, 0);
	CHECK_INT_EQ(a.status, 200);
	CHECK_STR_CONTAINS(a.body, "\"full\"");
	hc_free(good);
	hc_t *bad = client(0, 0, NULL);
	get(bad, url, NULL, 10000, &b);
	run_until(&b.calls, 1, 20);
	CHECK(b.curl_code != 0);
	CHECK_INT_EQ(b.status, 0);
	CHECK_STR_CONTAINS(b.error, "SSL");
	printf("# wrong CA: %s\n", b.error);
	hc_free(bad);
}

TEST(transient, "5xx but 501/505, 408, 429 and network-level failures are worth asking again; other 4xx, TLS verification, caps and redirects are not")
{
	hc_result_t r = {.retry_after_s = -1};
	static const long again[] = {408, 429, 500, 502, 503, 504, 520};
	static const long never[] = {200, 304, 400, 401, 403, 404, 410, 501, 505};
	for (size_t i = 0; i < sizeof(again) / sizeof(again[0]); i++) {
		r.status = again[i];
		CHECK_INT_EQ(hc_result_is_transient(&r), 1);
	}
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
		r.status = never[i];
		CHECK_INT_EQ(hc_result_is_transient(&r), 0);
	}
	r.status = 0;
	static const int net[] = {6 /* resolve */, 7 /* connect */, 28 /* timeout */, 35 /* TLS handshake */,
				  52 /* nothing */, 55 /* send */, 56 /* recv */, 18 /* partial */};
	for (size_t i = 0; i < sizeof(net) / sizeof(net[0]); i++) {
		r.curl_code = net[i];
		CHECK_INT_EQ(hc_result_is_transient(&r), 1);
	}
	static const int fatal[] = {1 /* protocol */, 3 /* URL */, 47 /* redirects */,
				    60 /* peer verification */, 63 /* file size */, -1};
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) {
		r.curl_code = fatal[i];
		CHECK_INT_EQ(hc_result_is_transient(&r), 0);
	}
	r.curl_code = 23; /* a write error: the body over the cap */
	r.over_cap = 1;
	CHECK_INT_EQ(hc_result_is_transient(&r), 0);
}

TEST(retry_after_rule, "Retry-After counts only on a 429 or a 503")
{
	hc_result_t r = {.status = 503, .retry_after_s = 7};
	CHECK_INT_EQ(hc_result_retry_after_s(&r), 7);
	r.status = 429;
	CHECK_INT_EQ(hc_result_retry_after_s(&r), 7);
	r.status = 500;
	CHECK_INT_EQ(hc_result_retry_after_s(&r), -1);
	r.status = 429;
	r.retry_after_s = -1;
	CHECK_INT_EQ(hc_result_retry_after_s(&r), -1);
}

TEST(backoff, "the n-th wait is between half and all of first * 2^(n-1), capped at max")
{
	for (int k = 0; k < 200; k++) {
		for (unsigned n = 1; n <= 12; n++) {
			int64_t step = INT64_C(500000) << (n - 1);
			if (step > INT64_C(30000000))
				step = INT64_C(30000000);
			int64_t us = hc_backoff_us(500000, n, 30000000);
			CHECK(us >= step / 2 && us <= step);
		}
		int64_t us = hc_backoff_us(1000000, 40, INT64_C(300000000)); /* no overflow */
		CHECK(us >= INT64_C(150000000) && us <= INT64_C(300000000));
	}
}

int main(int argc, char **argv)
{
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--standin"))
			standin = argv[i + 1];
		else if (!strcmp(argv[i], "--python"))
			python = argv[i + 1];
	}
	signal(SIGPIPE, SIG_IGN);
	pith_err_t err = {0};
	if (hc_global_init(&err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	base = event_base_new();
	struct event *t = event_new(base, -1, EV_PERSIST, tick, NULL);
	struct timeval tv = {0, 50000};
	event_add(t, &tv); /* EVLOOP_ONCE returns at least this often */
	if (server_start()) {
		fprintf(stderr, "cannot start the HTTP server\n");
		return 1;
	}
	RUN(ok_etag_304);
	RUN(status_404_302);
	RUN(redirect_origin);
	RUN(retry_after);
	RUN(over_cap);
	RUN(stall);
	RUN(deadline);
	RUN(origins_listed);
	RUN(refused);
	RUN(many);
	RUN(cancel);
	RUN(free_running);
	RUN(free_in_callback);
	RUN(transient);
	RUN(retry_after_rule);
	RUN(backoff);
	if (standin && python && !standin_start())
		RUN(https);
	else
		printf("# HTTPS case skipped (no --standin/--python, or it did not start)\n");
	standin_stop();
	evhttp_free(away);
	evhttp_free(srv);
	event_free(t);
	event_base_free(base);
	hc_global_cleanup();
	return test_done();
}
