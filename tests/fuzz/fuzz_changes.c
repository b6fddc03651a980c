/* libFuzzer harness for pith_changes_parse (proto/upstream.c), what a
 * follower runs on a page of an upstream's change feed (GET /api/changes).
 *
 * Invariants: the result is 0 or a negative code; on failure nothing is
 * left (no entries, next ""); on success the count is within both bounds
 * (the array and the limit), next and every cursor are 1 to
 * PITH_CURSOR_MAX bytes of printable ASCII, every pith number is well
 * formed, and an entry has a bundle exactly when its built_at is set and
 * parses to the time given. */
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "upstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 16

static pith_change_t out[CAP];

static int cursor_ok(const char *c)
{
	size_t n = strnlen(c, PITH_CURSOR_MAX + 1);
	if (n < 1 || n > PITH_CURSOR_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)c[i] < 0x21 || (unsigned char)c[i] > 0x7e)
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pith_err_t err = {0};
	char next[PITH_CURSOR_MAX + 1];
	size_t n = 99;
	pith_upstream_limits_t lim = pith_changes_limits_default;
	lim.max_changes = 8; /* under the array: the limit is what stops a page */
	int rc = pith_changes_parse(data, size, &lim, out, CAP, &n, next, &err);
	FUZZ_CHECK(rc <= 0);
	if (rc) {
		FUZZ_CHECK(n == 0 && next[0] == 0 && err.msg[0]);
		return 0;
	}
	FUZZ_CHECK(n <= 8);
	FUZZ_CHECK(cursor_ok(next));
	for (size_t i = 0; i < n; i++) {
		const pith_change_t *c = &out[i];
		FUZZ_CHECK(cursor_ok(c->cursor));
		FUZZ_CHECK(pith_number_is_valid(c->pith_number));
		FUZZ_CHECK(memchr(c->built_at, 0, sizeof(c->built_at)));
		FUZZ_CHECK(c->has_bundle == (c->built_at[0] != 0));
		if (c->has_bundle) {
			int64_t us;
			FUZZ_CHECK(pith_time_parse(c->built_at, &us) == 0 && us == c->built_us);
		}
	}
	return 0;
}
