/* libFuzzer harness for pith_events_page_parse (proto/upstream.c), what a
 * follower of a pithd's change feed runs on a record's events.json page.
 *
 * Invariants: the result is 0, a negative code, or the callback's code;
 * the callback sees at most the limit of events, each a non-empty JSON
 * object that parses again (canonical bytes); on success next_offset is -1
 * or an offset; on failure it is -1. */
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "json.h"
#include "upstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS 8

typedef struct seen {
	size_t n;
} seen_t;

static int on_event(void *arg, const uint8_t *bytes, size_t len)
{
	seen_t *s = arg;
	FUZZ_CHECK(++s->n <= MAX_EVENTS);
	FUZZ_CHECK(len >= 2 && bytes[0] == '{' && bytes[len - 1] == '}');
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	FUZZ_CHECK(json_parse(&doc, bytes, len, NULL, &err) == 0);
	json_doc_free(doc);
	return s->n == 7 ? 123 : 0; /* the callback's code stops the walk */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pith_err_t err = {0};
	seen_t s = {0};
	int64_t next = 42;
	int rc = pith_events_page_parse(data, size, NULL, NULL, MAX_EVENTS, on_event, &s, &next, &err);
	FUZZ_CHECK(rc <= 0 || rc == 123);
	if (rc) {
		FUZZ_CHECK(next == -1);
		return 0;
	}
	FUZZ_CHECK(next >= -1);
	FUZZ_CHECK(s.n <= MAX_EVENTS);
	return 0;
}
