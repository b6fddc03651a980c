/* UTF-8 (utf8.h). */
#include "utf8.h"

size_t pith_utf8_char(const void *s, size_t n, uint32_t *cp_out)
{
	const unsigned char *p = s;
	unsigned char c = p[0];
	size_t len;
	uint32_t cp;
	if (c < 0x80) {
		if (cp_out)
			*cp_out = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0; /* a continuation byte, 0xc0/0xc1 (overlong), 0xf5.. */
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	if (cp_out)
		*cp_out = cp;
	return len;
}

int pith_utf8_valid(const void *s, size_t n)
{
	const unsigned char *p = s;
	for (size_t i = 0; i < n;) {
		size_t l = pith_utf8_char(p + i, n - i, NULL);
		if (!l)
			return 0;
		i += l;
	}
	return 1;
}
