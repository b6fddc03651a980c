/* libFuzzer harness for the resolve API's answers (proto/upstream.c):
 * pith_resolve_answer_parse on the whole input, and
 * pith_resolve_location_parse on it as a Location header against two
 * base URLs. Invariants: results are 0 or negative codes; a number
 * found is well formed; an id found is a full pith number's body. */
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "upstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pith_err_t err = {0};
	char num[PITH_NUMBER_LEN + 1];
	int rc = pith_resolve_answer_parse(data, size, NULL, num, &err);
	FUZZ_CHECK(rc <= 0);
	FUZZ_CHECK(rc ? num[0] == 0 : pith_number_is_valid(num));
	/* a header value is text: stop at a NUL as a caller would */
	char loc[PITH_URL_MAX + 16];
	size_t n = size < sizeof(loc) - 1 ? size : sizeof(loc) - 1;
	memcpy(loc, data, n);
	loc[n] = 0;
	n = strlen(loc);
	static const char *const bases[] = {"https://pith.science", "http://127.0.0.1:8080/reg/"};
	for (int b = 0; b < 2; b++) {
		pith_id_t id;
		rc = pith_resolve_location_parse(loc, n, bases[b], &id, &err);
		FUZZ_CHECK(rc <= 0);
		if (rc) {
			FUZZ_CHECK(id.value[0] == 0);
			continue;
		}
		FUZZ_CHECK(id.kind == PITH_ID_FULL && strlen(id.value) == PITH_BODY_LEN);
		FUZZ_CHECK(!id.number[0] || pith_number_is_valid(id.number));
	}
	return 0;
}
