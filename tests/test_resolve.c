/* node/loop/resolve.c: HOST:PORT splitting, numeric addresses answered at once,
 * names on a worker thread with the answer on the loop thread, and the
 * limits: cancellation, requests in flight, the timeout, freeing the
 * resolver with lookups under way.
 *
 * Slow or failing lookups go through a stand-in for getaddrinfo
 * (resolve_limits_t.gai) so that no case depends on a DNS server; one case
 * resolves "localhost" with the real getaddrinfo (/etc/hosts). */
#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "resolve.h"
#include "test_util.h"

static struct event_base *base;
static pthread_t loop_thread;

/* ---- a getaddrinfo that takes its time ---------------------------------- */

static atomic_int gai_started, gai_finished;
static atomic_int gai_delay_ms;

/* Names ending in ".invalid" do not exist; any other name is 127.0.0.2,
 * after gai_delay_ms. */
static int slow_gai(const char *host, const char *port, const struct addrinfo *hints,
                    struct addrinfo **res)
{
	atomic_fetch_add(&gai_started, 1);
	int ms = atomic_load(&gai_delay_ms);
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	size_t n = strlen(host);
	int rc;
	if (n >= 8 && !strcmp(host + n - 8, ".invalid")) {
		rc = EAI_NONAME;
	} else {
		struct addrinfo h = *hints;
		h.ai_flags |= AI_NUMERICHOST;
		rc = getaddrinfo("127.0.0.2", port, &h, res);
	}
	atomic_fetch_add(&gai_finished, 1);
	return rc;
}

static resolver_t *slow_resolver(unsigned max_inflight, unsigned timeout_ms, int delay_ms)
{
	resolve_limits_t lim = {max_inflight, timeout_ms, slow_gai};
	atomic_store(&gai_delay_ms, delay_ms);
	atomic_store(&gai_started, 0);
	atomic_store(&gai_finished, 0);
	return resolver_new(base, &lim);
}

/* ---- answers ---------------------------------------------------------- */

typedef struct answer {
	int calls;
	int on_loop_thread;
	int ok;
	resolve_addr_t addr;
	pith_err_t err;
	resolver_t **free_me; /* if set, the callback frees this resolver */
} answer_t;

static void on_answer(void *arg, const resolve_addr_t *addr, const pith_err_t *err)
{
	answer_t *a = arg;
	a->calls++;
	a->on_loop_thread = pthread_equal(pthread_self(), loop_thread);
	a->ok = addr != NULL;
	if (addr)
		a->addr = *addr;
	if (err)
		a->err = *err;
	if (a->free_me)
		resolver_free(*a->free_me);
}

/* resolve_hostport for requester a: an answer at once lands in a->addr
 * (a->calls stays 0); the handle and the error go to last_req, last_err. */
static resolve_req_t *last_req;
static pith_err_t last_err;

static int ask(resolver_t *r, const char *hostport, answer_t *a)
{
	memset(&last_err, 0, sizeof(last_err));
	last_req = (resolve_req_t *)&last_req; /* must be overwritten */
	return resolve_hostport(r, hostport, &a->addr, on_answer, a, &last_req, &last_err);
}

/* ---- running the loop --------------------------------------------------- */

static int ticks;

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	ticks++;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Runs the loop, with a 10 ms ticker, until done(arg) or max_ms pass.
 * Returns whether done(arg) became true. */
static int run_until(int (*done)(void *), void *arg, int max_ms)
{
	struct event *tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	struct timeval tv = {0, 10000};
	event_add(tick, &tv);
	double end = now_ms() + max_ms;
	int ok;
	while (!(ok = done(arg)) && now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(tick);
	return ok;
}

static int answered(void *arg)
{
	return ((answer_t *)arg)->calls > 0;
}

static int inflight_zero(void *arg)
{
	return resolve_inflight(arg) == 0;
}

static int lookups_finished(void *arg)
{
	return atomic_load(&gai_finished) == *(int *)arg;
}

/* "1.2.3.4:80" or "[::1]:80"; "bad length" if len does not fit the family */
static const char *addr_str(const resolve_addr_t *a, char buf[80])
{
	char ip[64];
	const struct sockaddr_in *v4 = (const struct sockaddr_in *)&a->ss;
	const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&a->ss;
	if (a->ss.ss_family == AF_INET && a->len == sizeof(*v4) &&
	    inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof(ip)))
		snprintf(buf, 80, "%s:%u", ip, ntohs(v4->sin_port));
	else if (a->ss.ss_family == AF_INET6 && a->len == sizeof(*v6) &&
	         inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof(ip)))
		snprintf(buf, 80, "[%s]:%u", ip, ntohs(v6->sin6_port));
	else
		snprintf(buf, 80, "bad length %u for family %d", (unsigned)a->len, a->ss.ss_family);
	return buf;
}

/* ---- cases -------------------------------------------------------------- */

TEST(splits_hostport, "splits HOST:PORT, [V6]:PORT and NAME:PORT, and refuses the rest")
{
	char host[256];
	uint16_t port = 0;
	CHECK_INT_EQ(config_split_hostport("1.2.3.4:9000", host, &port, 0), 0);
	CHECK_STR_EQ(host, "1.2.3.4");
	CHECK_INT_EQ(port, 9000);
	CHECK_INT_EQ(config_split_hostport("[2001:db8::1]:1", host, &port, 0), 0);
	CHECK_STR_EQ(host, "2001:db8::1");
	CHECK_INT_EQ(port, 1);
	CHECK_INT_EQ(config_split_hostport("mirror.example:65535", host, &port, 0), 0);
	CHECK_STR_EQ(host, "mirror.example");
	CHECK_INT_EQ(port, 65535);
	CHECK_INT_EQ(config_split_hostport("0.0.0.0:0", host, &port, 1), 0);
	CHECK_INT_EQ(port, 0);
	const char *bad[] = {"1.2.3.4",
	                     "1.2.3.4:",
	                     ":9000",
	                     "1.2.3.4:0",
	                     "1.2.3.4:65536",
	                     "1.2.3.4:-1",
	                     "1.2.3.4:9x",
	                     "[::1]9000",
	                     "[::1:9000",
	                     "[]:9000",
	                     ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (config_split_hostport(bad[i], host, &port, 0) != PITH_EINVAL)
			test_fail_(__FILE__, __LINE__, "'%s' was accepted", bad[i]);
	char longname[300];
	memset(longname, 'a', 256);
	strcpy(longname + 256, ":80");
	CHECK_INT_EQ(config_split_hostport(longname, host, &port, 0), PITH_EINVAL);
	/* as config_split_hostport always did (strtol): a leading blank or
	 * plus sign in the port passes */
	CHECK_INT_EQ(config_split_hostport("1.2.3.4: +9", host, &port, 0), 0);
	CHECK_INT_EQ(port, 9);
}

TEST(numeric_v4_at_once, "answers a numeric IPv4 address at once, with no thread")
{
	resolver_t *r = slow_resolver(0, 0, 0);
	CHECK(r != NULL);
	answer_t a = {0};
	CHECK_INT_EQ(ask(r, "127.0.0.1:9000", &a), RESOLVE_DONE);
	CHECK(last_req == NULL);
	char b[80];
	CHECK_STR_EQ(addr_str(&a.addr, b), "127.0.0.1:9000");
	/* getaddrinfo's numeric forms, as before: "127.1" is 127.0.0.1 */
	CHECK_INT_EQ(ask(r, "127.1:80", &a), RESOLVE_DONE);
	CHECK_STR_EQ(addr_str(&a.addr, b), "127.0.0.1:80");
	CHECK_INT_EQ(atomic_load(&gai_started), 0);
	CHECK_INT_EQ(resolve_inflight(r), 0);
	CHECK_INT_EQ(a.calls, 0);
	resolver_free(r);
	CHECK(r == NULL);
}

TEST(numeric_v6_at_once, "answers a bracketed IPv6 address at once")
{
	resolver_t *r = slow_resolver(0, 0, 0);
	answer_t a = {0};
	char b[80];
	CHECK_INT_EQ(ask(r, "[::1]:9001", &a), RESOLVE_DONE);
	CHECK_STR_EQ(addr_str(&a.addr, b), "[::1]:9001");
	CHECK_INT_EQ(ask(r, "[2001:db8::7]:443", &a), RESOLVE_DONE);
	CHECK_STR_EQ(addr_str(&a.addr, b), "[2001:db8::7]:443");
	CHECK_INT_EQ(atomic_load(&gai_started), 0);
	CHECK_INT_EQ(a.calls, 0);
	resolver_free(r);
}

TEST(bad_input_messages, "refuses bad ports and malformed input with the node's messages")
{
	resolver_t *r = slow_resolver(0, 0, 0);
	answer_t a = {0};
	const char *bad[] = {"127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:http", "127.0.0.1",
	                     ":9000",       "[::1]9000",       "name.example:"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[300];
		snprintf(want, sizeof(want), "'%s' is not HOST:PORT", bad[i]);
		CHECK_INT_EQ(ask(r, bad[i], &a), PITH_EINVAL);
		CHECK_INT_EQ(last_err.code, PITH_EINVAL);
		CHECK_STR_EQ(last_err.msg, want);
		CHECK(last_req == NULL);
	}
	/* brackets around something that is not an IPv6 address: a name, looked up */
	CHECK_INT_EQ(ask(r, "[nosuch.invalid]:80", &a), 0);
	CHECK(run_until(answered, &a, 5000));
	CHECK_INT_EQ(a.calls, 1);
	CHECK_INT_EQ(a.ok, 0);
	char want[300];
	snprintf(want, sizeof(want), "cannot resolve nosuch.invalid: %s", gai_strerror(EAI_NONAME));
	CHECK_STR_EQ(a.err.msg, want);
	CHECK_INT_EQ(a.err.code, PITH_EINVAL);
	CHECK_INT_EQ(atomic_load(&gai_started), 1);
	resolver_free(r);
}

TEST(localhost_on_a_thread, "resolves localhost off the loop and answers on the loop thread")
{
	resolver_t *r = resolver_new(base, NULL); /* the real getaddrinfo */
	answer_t a = {0};
	CHECK_INT_EQ(ask(r, "localhost:7777", &a), 0);
	CHECK(last_req != NULL);
	CHECK_INT_EQ(resolve_inflight(r), 1);
	CHECK_INT_EQ(a.calls, 0); /* never from inside resolve_hostport */
	CHECK(run_until(answered, &a, 10000));
	CHECK_INT_EQ(a.calls, 1);
	CHECK(a.on_loop_thread);
	if (!a.ok)
		test_fail_(__FILE__, __LINE__, "localhost: %s", a.err.msg);
	char b[80];
	CHECK_STR_EQ(addr_str(&a.addr, b), "127.0.0.1:7777"); /* IPv4 preferred */
	CHECK_INT_EQ(resolve_inflight(r), 0);
	resolver_free(r);
}

TEST(loop_keeps_ticking, "keeps the loop ticking while a name lookup takes 300 ms")
{
	resolver_t *r = slow_resolver(0, 0, 300);
	answer_t a = {0};
	double t0 = now_ms();
	CHECK_INT_EQ(ask(r, "slow.test:9000", &a), 0);
	CHECK(now_ms() - t0 < 100); /* the call itself did not wait */
	ticks = 0;
	CHECK(run_until(answered, &a, 5000));
	/* 300 ms of 10 ms ticks: allow for a loaded machine */
	if (ticks < 10)
		test_fail_(__FILE__, __LINE__, "only %d ticks during the lookup", ticks);
	CHECK(a.ok);
	char b[80];
	CHECK_STR_EQ(addr_str(&a.addr, b), "127.0.0.2:9000");
	resolver_free(r);
}

TEST(cancel_never_calls_back,
     "never calls back a cancelled request, and frees it when its thread ends")
{
	resolver_t *r = slow_resolver(0, 0, 150);
	answer_t a = {0}, b = {0};
	CHECK_INT_EQ(ask(r, "gone.test:1", &a), 0);
	resolve_req_t *q = last_req;
	CHECK_INT_EQ(ask(r, "kept.test:2", &b), 0);
	resolve_cancel(q);
	CHECK(q == NULL);
	resolve_cancel(q);                    /* NULL is fine */
	CHECK_INT_EQ(resolve_inflight(r), 2); /* its thread still runs */
	CHECK(run_until(inflight_zero, r, 5000));
	CHECK_INT_EQ(a.calls, 0);
	CHECK_INT_EQ(b.calls, 1);
	CHECK(b.ok);
	resolver_free(r);
}

TEST(bounded_inflight, "refuses a lookup over the in-flight bound and accepts again once one ends")
{
	resolver_t *r = slow_resolver(4, 0, 200);
	answer_t a[5] = {{0}};
	char name[64];
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "n%d.test:%d", i, 1000 + i);
		CHECK_INT_EQ(ask(r, name, &a[i]), 0);
	}
	CHECK_INT_EQ(resolve_inflight(r), 4);
	CHECK_INT_EQ(ask(r, "n4.test:1004", &a[4]), PITH_ETOOBIG);
	CHECK_STR_EQ(last_err.msg, "too many name lookups in flight (4)");
	CHECK(last_req == NULL);
	/* numeric addresses need no slot */
	CHECK_INT_EQ(ask(r, "10.0.0.1:5", &a[4]), RESOLVE_DONE);
	CHECK(run_until(inflight_zero, r, 5000));
	for (int i = 0; i < 4; i++) {
		CHECK_INT_EQ(a[i].calls, 1);
		CHECK(a[i].ok);
		char b[80], want[80];
		snprintf(want, sizeof(want), "127.0.0.2:%d", 1000 + i);
		CHECK_STR_EQ(addr_str(&a[i].addr, b), want);
	}
	CHECK_INT_EQ(a[4].calls, 0);
	CHECK_INT_EQ(ask(r, "n4.test:1004", &a[4]), 0);
	CHECK(run_until(answered, &a[4], 5000));
	resolver_free(r);
}

TEST(many_in_flight, "answers 32 lookups in flight at once, each to its own requester")
{
	enum { N = 32 };
	resolver_t *r = slow_resolver(N, 0, 50);
	answer_t a[N] = {{0}};
	char name[64];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "m%d.test:%d", i, 2000 + i);
		CHECK_INT_EQ(ask(r, name, &a[i]), 0);
	}
	CHECK(run_until(inflight_zero, r, 10000));
	for (int i = 0; i < N; i++) {
		CHECK_INT_EQ(a[i].calls, 1);
		CHECK(a[i].on_loop_thread);
		char b[80], want[80];
		snprintf(want, sizeof(want), "127.0.0.2:%d", 2000 + i);
		CHECK_STR_EQ(addr_str(&a[i].addr, b), want);
	}
	resolver_free(r);
}

TEST(times_out,
     "gives up after the timeout, calls back once, and holds the slot until the thread ends")
{
	resolver_t *r = slow_resolver(0, 50, 400);
	answer_t a = {0};
	CHECK_INT_EQ(ask(r, "slow.test:9000", &a), 0);
	CHECK(run_until(answered, &a, 5000));
	CHECK_INT_EQ(a.ok, 0);
	CHECK_INT_EQ(a.err.code, PITH_EIO);
	CHECK_STR_EQ(a.err.msg, "cannot resolve slow.test: timed out after 50 ms");
	CHECK_INT_EQ(resolve_inflight(r), 1);
	CHECK(run_until(inflight_zero, r, 5000));
	CHECK_INT_EQ(a.calls, 1);
	resolver_free(r);
}

TEST(free_with_lookups_under_way,
     "frees the resolver with lookups under way; their threads clean up")
{
	resolver_t *r = slow_resolver(0, 0, 100);
	answer_t a[3] = {{0}};
	for (int i = 0; i < 3; i++)
		CHECK_INT_EQ(ask(r, "x.test:1", &a[i]), 0);
	resolver_free(r);
	int three = 3;
	CHECK(run_until(lookups_finished, &three, 5000));
	usleep(50000); /* the threads free their requests after the lookup returns */
	event_base_loop(base, EVLOOP_NONBLOCK);
	for (int i = 0; i < 3; i++)
		CHECK_INT_EQ(a[i].calls, 0);
}

TEST(callback_frees_resolver, "lets a callback free the resolver; the other answers are dropped")
{
	resolver_t *r = slow_resolver(0, 0, 50);
	answer_t a[4] = {{0}};
	for (int i = 0; i < 4; i++) {
		a[i].free_me = &r;
		CHECK_INT_EQ(ask(r, "y.test:1", &a[i]), 0);
	}
	int four = 4;
	CHECK(run_until(lookups_finished, &four, 5000));
	usleep(50000);
	for (int i = 0; i < 20; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	int calls = a[0].calls + a[1].calls + a[2].calls + a[3].calls;
	CHECK_INT_EQ(calls, 1);
	CHECK(r == NULL);
}

int main(void)
{
	base = event_base_new();
	loop_thread = pthread_self();
	RUN(splits_hostport);
	RUN(numeric_v4_at_once);
	RUN(numeric_v6_at_once);
	RUN(bad_input_messages);
	RUN(localhost_on_a_thread);
	RUN(loop_keeps_ticking);
	RUN(cancel_never_calls_back);
	RUN(bounded_inflight);
	RUN(many_in_flight);
	RUN(times_out);
	RUN(free_with_lookups_under_way);
	RUN(callback_frees_resolver);
	event_base_free(base);
	return test_done();
}
