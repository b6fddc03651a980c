/* A growable byte buffer. Zero-initialise (PITH_BUF_INIT) before use. */
#ifndef PITH_BUF_H
#define PITH_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct pith_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	int oom; /* sticky: set once an append failed */
} pith_buf_t;

#define PITH_BUF_INIT {NULL, 0, 0, 0}

/* Ensure room for n more bytes. Returns 0 or PITH_ENOMEM (and sets oom). */
int pith_buf_reserve(pith_buf_t *b, size_t n);
int pith_buf_append(pith_buf_t *b, const void *p, size_t n);
/* Insert n bytes at offset at (at most len), moving the rest up. */
int pith_buf_insert(pith_buf_t *b, size_t at, const void *p, size_t n);
int pith_buf_putc(pith_buf_t *b, uint8_t c);
int pith_buf_puts(pith_buf_t *b, const char *s);
int pith_buf_printf(pith_buf_t *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Make data a NUL-terminated C string (the NUL is not counted in len). */
int pith_buf_cstr(pith_buf_t *b);
void pith_buf_reset(pith_buf_t *b);
void pith_buf_release(pith_buf_t *b);

static inline int pith_buf_putc_fast(pith_buf_t *b, uint8_t c)
{
	if (b->len < b->cap) {
		b->data[b->len++] = c;
		return 0;
	}
	return pith_buf_putc(b, c);
}

#endif
