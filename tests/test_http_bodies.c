/* node/http/http_bodies.c, the body cache: a record's body -> its full
 * number, bounded, never a wrong year. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "test_util.h"

/* A full number of 26 base32 characters made from i (distinct for distinct i). */
static void number(uint32_t i, int year, char out[PITH_NUMBER_LEN + 1])
{
	static const char b32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	uint64_t x = (uint64_t)i * UINT64_C(0x9e3779b97f4a7c15) + 12345;
	snprintf(out, PITH_NUMBER_LEN + 1, "pith:%04d:", year);
	for (int k = 0; k < PITH_BODY_LEN; k++) {
		out[10 + k] = b32[(k < 7 ? i >> (5 * k) : x >> (5 * (k - 7) % 60)) & 31];
	}
	out[PITH_NUMBER_LEN] = 0;
}

TEST(finds_what_was_put, "gives back the full number of every body put, and nothing for others")
{
	http_bodies_t *b = http_bodies_new();
	CHECK(b != NULL);
	char p[PITH_NUMBER_LEN + 1], got[PITH_NUMBER_LEN + 1];
	for (uint32_t i = 0; i < 50000; i++) {
		number(i, 2000 + (int)(i % 27), p);
		http_bodies_put(b, p);
	}
	CHECK_INT_EQ((long long)http_bodies_count(b), 50000);
	int bad = 0;
	for (uint32_t i = 0; i < 50000; i++) {
		number(i, 2000 + (int)(i % 27), p);
		if (!http_bodies_get(b, p + 10, got) || strcmp(got, p))
			bad++;
	}
	CHECK_INT_EQ(bad, 0);
	number(50001, 2020, p);
	CHECK_INT_EQ(http_bodies_get(b, p + 10, got), 0);
	/* put again: still one entry, the same answer */
	number(7, 2007, p);
	http_bodies_put(b, p);
	CHECK_INT_EQ((long long)http_bodies_count(b), 50000);
	http_bodies_put(b, "pith:2020:SHORT"); /* not a full number: ignored */
	CHECK_INT_EQ((long long)http_bodies_count(b), 50000);
	http_bodies_free(b);
	http_bodies_free(NULL);
	CHECK_INT_EQ(http_bodies_get(NULL, p + 10, got), 0);
}

TEST(bounded, "past its size forgets old bodies, never answers a wrong year")
{
	http_bodies_t *b = http_bodies_new();
	char p[PITH_NUMBER_LEN + 1], got[PITH_NUMBER_LEN + 1];
	const uint32_t n = 3000000; /* more than 2^21 slots hold */
	for (uint32_t i = 0; i < n; i++) {
		number(i, 1990 + (int)(i % 37), p);
		http_bodies_put(b, p);
	}
	CHECK(http_bodies_count(b) <= (1u << 21));
	int wrong = 0, found = 0;
	for (uint32_t i = 0; i < n; i += 7) {
		number(i, 1990 + (int)(i % 37), p);
		if (http_bodies_get(b, p + 10, got)) {
			found++;
			wrong += strcmp(got, p) != 0;
		}
	}
	CHECK_INT_EQ(wrong, 0);
	CHECK(found > (int)(n / 7 / 2)); /* most are still there */
	/* the latest ones are there (one may have taken another's slot) */
	int missing = 0;
	for (uint32_t i = n - 1000; i < n; i++) {
		number(i, 1990 + (int)(i % 37), p);
		missing += !http_bodies_get(b, p + 10, got);
	}
	CHECK(missing < 20);
	number(n - 1, 1990 + (int)((n - 1) % 37), p);
	CHECK(http_bodies_get(b, p + 10, got) && !strcmp(got, p));
	http_bodies_free(b);
}

int main(void)
{
	RUN(finds_what_was_put);
	RUN(bounded);
	return test_done();
}
