/* libFuzzer harness for the weighted lists of Accept and Accept-Encoding
 * (node/render/render_accept.c), what the server reads of every request's headers
 * to choose JSON or an HTML error page, JSON-LD or HTML, gzip or not.
 *
 * The input is one header value (cut at its first NUL, as evhttp's
 * strings are). Invariants (any broken one aborts):
 * - render_list_next ends; each token lies inside the input, is not empty
 *   and holds no ',', ';', space or tab; each q is in 0..1; tokens come in
 *   order and the cursor only moves forward;
 * - render_accept_q is in 0..1; a type listed by name with a quality above
 *   0 has that quality whether ranges count or not (the most specific
 *   entry decides);
 * - render_prefers_html implies text/html has a quality above 0 and above
 *   both JSON types'; no header prefers nothing.
 * (http_accepts_gzip, in http.c with libevent, reads the same lists.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "render.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char in[8193];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > sizeof(in) - 1)
		size = sizeof(in) - 1;
	memcpy(in, data, size);
	in[size] = 0;
	size_t len = strlen(in);
	const char *p = in, *tok, *last = in;
	size_t n, count = 0;
	double q;
	while (render_list_next(&p, &tok, &n, &q)) {
		FUZZ_CHECK(tok >= last && n > 0 && tok + n <= in + len);
		FUZZ_CHECK(p >= tok + n && p <= in + len);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(tok[i] != ',' && tok[i] != ';' && tok[i] != ' ' && tok[i] != '\t');
		FUZZ_CHECK(q >= 0 && q <= 1);
		last = tok + n;
		FUZZ_CHECK(++count <= len);
	}
	static const char *const types[] = {"text/html", "application/json", "application/ld+json",
					    "image/png"};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		double a = render_accept_q(in, types[i], 0), e = render_accept_q(in, types[i], 1);
		FUZZ_CHECK(a >= 0 && a <= 1 && e >= 0 && e <= 1);
		/* listed by name: that entry decides, ranges or not */
		if (e > 0)
			FUZZ_CHECK(a == e);
	}
	if (render_prefers_html(in)) {
		double h = render_accept_q(in, "text/html", 0);
		FUZZ_CHECK(h > 0 && h > render_accept_q(in, "application/json", 0) &&
			   h > render_accept_q(in, "application/ld+json", 0));
	}
	FUZZ_CHECK(render_accept_q(NULL, "text/html", 0) == 0 && !render_prefers_html(NULL));
	return 0;
}
