#include "buf.h"
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pith_buf_reserve(pith_buf_t *b, size_t n)
{
	if (b->oom)
		return PITH_ENOMEM;
	if (n <= b->cap - b->len)
		return 0;
	size_t need = b->len + n;
	if (need < b->len)
		goto oom;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			goto oom;
		cap *= 2;
	}
	uint8_t *p = realloc(b->data, cap);
	if (!p)
		goto oom;
	b->data = p;
	b->cap = cap;
	return 0;
oom:
	b->oom = 1;
	return PITH_ENOMEM;
}

int pith_buf_append(pith_buf_t *b, const void *p, size_t n)
{
	if (n == 0)
		return b->oom ? PITH_ENOMEM : 0;
	int rc = pith_buf_reserve(b, n);
	if (rc)
		return rc;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

int pith_buf_insert(pith_buf_t *b, size_t at, const void *p, size_t n)
{
	if (at > b->len)
		return PITH_EINVAL;
	int rc = pith_buf_reserve(b, n);
	if (rc)
		return rc;
	memmove(b->data + at + n, b->data + at, b->len - at);
	memcpy(b->data + at, p, n);
	b->len += n;
	return 0;
}

int pith_buf_putc(pith_buf_t *b, uint8_t c)
{
	int rc = pith_buf_reserve(b, 1);
	if (rc)
		return rc;
	b->data[b->len++] = c;
	return 0;
}

int pith_buf_puts(pith_buf_t *b, const char *s)
{
	return pith_buf_append(b, s, strlen(s));
}

int pith_buf_printf(pith_buf_t *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return PITH_EINVAL;
	int rc = pith_buf_reserve(b, (size_t)n + 1);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int pith_buf_cstr(pith_buf_t *b)
{
	int rc = pith_buf_reserve(b, 1);
	if (rc)
		return rc;
	b->data[b->len] = 0;
	return 0;
}

void pith_buf_reset(pith_buf_t *b)
{
	b->len = 0;
}

void pith_buf_release(pith_buf_t *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->oom = 0;
}
