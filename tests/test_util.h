/* A tiny TAP-style test harness: one binary per module, cases named as
 * sentences.
 *
 *   TEST(rejects_duplicate_keys, "rejects an object with a duplicate key")
 *   {
 *           CHECK(x == 1);
 *           CHECK_STR_EQ(got, "expected");
 *   }
 *   int main(void)
 *   {
 *           RUN(rejects_duplicate_keys);
 *           return test_done();
 *   }
 *
 * Each case prints "ok N - sentence" or "not ok N - sentence" (with the
 * failed checks on stderr before it); test_done() prints the plan and
 * returns non-zero if any case failed. A failed CHECK does not stop the
 * case, so one run shows every broken expectation. */
#ifndef PITH_TEST_UTIL_H
#define PITH_TEST_UTIL_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int test_count_, test_failed_, test_case_failed_;

#define TEST(fn, sentence)                                                     \
	static void fn(void);                                                  \
	static const char *const fn##_name_ = sentence;                        \
	static void fn(void)

#define RUN(fn) test_run_(fn, fn##_name_)

static inline void test_run_(void (*fn)(void), const char *name)
{
	test_case_failed_ = 0;
	fn();
	test_count_++;
	if (test_case_failed_)
		test_failed_++;
	printf("%s %d - %s\n", test_case_failed_ ? "not ok" : "ok", test_count_, name);
	fflush(stdout);
}

static inline int test_done(void)
{
	printf("1..%d\n", test_count_);
	if (test_failed_)
		printf("# %d of %d cases failed\n", test_failed_, test_count_);
	return test_failed_ ? 1 : 0;
}

static inline void test_fail_(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#include <stdarg.h>
static inline void test_fail_(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "#   %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	test_case_failed_ = 1;
}

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond))                                                   \
			test_fail_(__FILE__, __LINE__, "check failed: %s", #cond); \
	} while (0)

#define CHECK_INT_EQ(got, want)                                                \
	do {                                                                   \
		long long g_ = (long long)(got), w_ = (long long)(want);      \
		if (g_ != w_)                                                  \
			test_fail_(__FILE__, __LINE__, "%s is %lld, expected %lld", \
				   #got, g_, w_);                              \
	} while (0)

/* got may be NULL (reported as a failure). */
#define CHECK_STR_EQ(got, want)                                                \
	do {                                                                   \
		const char *g_ = (got), *w_ = (want);                          \
		if (!g_ || strcmp(g_, w_) != 0)                                \
			test_fail_(__FILE__, __LINE__, "%s is \"%s\", expected \"%s\"", \
				   #got, g_ ? g_ : "(null)", w_);              \
	} while (0)

/* Byte strings of known length, printed escaped on failure. */
#define CHECK_MEM_EQ(got, got_len, want, want_len)                             \
	test_check_mem_(__FILE__, __LINE__, #got, (const void *)(got),         \
			(size_t)(got_len), (const void *)(want), (size_t)(want_len))

#define CHECK_STR_CONTAINS(hay, needle)                                        \
	do {                                                                   \
		const char *h_ = (hay), *n_ = (needle);                        \
		if (!h_ || !strstr(h_, n_))                                    \
			test_fail_(__FILE__, __LINE__, "%s is \"%s\", expected to contain \"%s\"", \
				   #hay, h_ ? h_ : "(null)", n_);              \
	} while (0)

static inline void test_escape_(char *out, size_t cap, const uint8_t *p, size_t n)
{
	size_t w = 0;
	for (size_t i = 0; i < n && w + 5 < cap; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			out[w++] = (char)p[i];
		else
			w += (size_t)snprintf(out + w, cap - w, "\\x%02x", p[i]);
	}
	out[w < cap ? w : cap - 1] = 0;
}

static inline void test_check_mem_(const char *file, int line, const char *expr,
				   const void *got, size_t got_len,
				   const void *want, size_t want_len)
{
	if (got && got_len == want_len && memcmp(got, want, want_len) == 0)
		return;
	char g[512], w[512];
	test_escape_(g, sizeof(g), got ? got : "", got ? got_len : 0);
	test_escape_(w, sizeof(w), want, want_len);
	test_fail_(file, line, "%s is \"%s\", expected \"%s\"", expr, g, w);
}

/* xorshift64: reproducible test data, not for anything secret */
static inline uint32_t test_xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)*s;
}

#endif
