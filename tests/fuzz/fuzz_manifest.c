/* libFuzzer harness for pith_manifest_parse and pith_pattern_expand
 * (proto/upstream.c), what pithctl pull and pithd will run on an
 * upstream's /pith-mirrors.json.
 *
 * Invariants: the result is 0 or a negative code; on success the mirror
 * count is within its bound, every string is NUL-terminated in its field,
 * every base URL is http(s), and every pattern expands to a URL that
 * starts with the pattern's text up to its first placeholder. */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "fuzz_check.h"
#include "upstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pith_manifest_t m;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pith_err_t err = {0};
	int rc = pith_manifest_parse(data, size, NULL, &m, &err);
	FUZZ_CHECK(rc <= 0);
	if (rc) {
		FUZZ_CHECK(m.n_mirrors == 0 && err.msg[0]);
		return 0;
	}
	FUZZ_CHECK(m.n_mirrors >= 1 && m.n_mirrors <= PITH_MIRRORS_MAX);
	for (size_t i = 0; i < m.n_mirrors; i++) {
		const pith_mirror_t *x = &m.mirrors[i];
		FUZZ_CHECK(memchr(x->base_url, 0, sizeof(x->base_url)));
		FUZZ_CHECK(!strncasecmp(x->base_url, "http", 4)); /* scheme: any case */
		const char *pats[] = {x->bundle_pattern, x->state_pattern, x->well_known_pattern};
		for (int k = 0; k < 3; k++) {
			if (!pats[k][0])
				continue;
			char url[4 * PITH_URL_MAX];
			FUZZ_CHECK(pith_pattern_expand(pats[k], "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE", url,
						       sizeof(url), &err) == 0);
			size_t pre = (size_t)(strstr(pats[k], "{suffix}") - pats[k]);
			FUZZ_CHECK(!strncmp(url, pats[k], pre) && !strstr(url, "{"));
		}
	}
	return 0;
}
