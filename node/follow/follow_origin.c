/* The origin rule for what a manifest names (follow_origin.h). */
#include "follow_origin.h"

#include <string.h>

#include "hclient.h"

int follow_origin_ok(const char *base, const char *u, const char *const *origins, size_t n_origins)
{
	const char *p = strstr(u, "://");
	if (!p)
		return 0;
	p += 3;
	size_t n = (size_t)(p - u) + strcspn(p, "/?#");
	char origin[HC_LOCATION_MAX + 1];
	if (n >= sizeof(origin) || memchr(u, '{', n))
		return 0;
	memcpy(origin, u, n);
	origin[n] = 0;
	return hc_origin_allowed(base, origin, origins, n_origins);
}
