/* Weighted header lists (Accept, Accept-Encoding): no I/O, no allocation,
 * fuzzed on its own (tests/fuzz/fuzz_accept.c). A client's header is
 * bounded by the server's max_header_bytes before it gets here. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "render_int.h"

int render_list_next(const char **cursor, const char **tok, size_t *n, double *q)
{
	const char *p = *cursor;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p) {
			*cursor = p;
			return 0;
		}
		*tok = p;
		while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
			p++;
		*n = (size_t)(p - *tok);
		if (*n)
			break;
		while (*p && *p != ',')
			p++; /* parameters without a token (";q=0"): not an element */
	}
	*q = 1;
	while (*p && *p != ',') {
		if (*p != ';') {
			p++;
			continue;
		}
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
			char *end;
			*q = strtod(p + 2, &end);
			if (end == p + 2 || !(*q >= 0 && *q <= 1))
				*q = 0;
		}
	}
	*cursor = p;
	return 1;
}

double render_accept_q(const char *accept, const char *type, int explicit_only)
{
	const char *slash = strchr(type, '/');
	size_t tl = strlen(type), major = slash ? (size_t)(slash - type) : tl;
	double best = 0, q;
	int best_rank = 0; /* 3: the type itself, 2: type/any, 1: any */
	const char *p = accept, *s;
	size_t n;
	while (p && render_list_next(&p, &s, &n, &q)) {
		int rank = 0;
		if (n == tl && !strncasecmp(s, type, n))
			rank = 3;
		else if (!explicit_only && n == major + 2 && !strncasecmp(s, type, major) &&
			 !memcmp(s + major, "/*", 2))
			rank = 2;
		else if (!explicit_only && n == 3 && !memcmp(s, "*/*", 3))
			rank = 1;
		if (rank > best_rank || (rank == best_rank && rank && q > best)) {
			best_rank = rank;
			best = q;
		}
	}
	return best;
}

int render_prefers_html(const char *accept)
{
	double html = render_accept_q(accept, "text/html", 0);
	double json = render_accept_q(accept, "application/json", 0);
	double ld = render_accept_q(accept, "application/ld+json", 0);
	return html > 0 && html > json && html > ld;
}
