/* canon_batch: many documents through json_parse + json_canon_write in one
 * process, for tests/json_diff.py.
 *
 * Input on stdin, repeated until EOF: a 4-byte big-endian length, then that
 * many bytes of one document. Output on stdout for each: a status byte
 * (0 = canonical bytes follow, 1 = rejected: the error message follows),
 * a 4-byte big-endian length, then the bytes. Default limits, the same as
 * `pithctl canon`. Exits 0 at a clean EOF, 2 on a broken frame. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static int read_full(void *p, size_t n)
{
	return fread(p, 1, n, stdin) == n;
}

static int write_frame(uint8_t status, const void *p, size_t n)
{
	uint8_t h[5] = {status, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
			(uint8_t)n};
	return fwrite(h, 1, 5, stdout) == 5 && fwrite(p, 1, n, stdout) == n;
}

int main(void)
{
	uint8_t *buf = NULL;
	size_t cap = 0;
	pith_buf_t out = PITH_BUF_INIT;
	int rc = 0;
	for (;;) {
		uint8_t h[4];
		size_t got = fread(h, 1, 4, stdin);
		if (got == 0 && feof(stdin))
			break;
		if (got != 4) {
			fprintf(stderr, "canon_batch: truncated length prefix\n");
			rc = 2;
			break;
		}
		size_t n = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
		if (n > cap) {
			uint8_t *nb = realloc(buf, n);
			if (!nb) {
				fprintf(stderr, "canon_batch: out of memory\n");
				rc = 2;
				break;
			}
			buf = nb;
			cap = n;
		}
		if (n && !read_full(buf, n)) {
			fprintf(stderr, "canon_batch: truncated document\n");
			rc = 2;
			break;
		}
		json_doc_t *doc = NULL;
		pith_err_t err = {0};
		pith_buf_reset(&out);
		int prc = json_parse(&doc, buf, n, NULL, &err);
		if (prc == 0 && json_canon_write(json_doc_root(doc), &out) != 0) {
			prc = -1;
			snprintf(err.msg, sizeof(err.msg), "cannot write canonical form");
		}
		json_doc_free(doc);
		int ok = prc == 0 ? write_frame(0, out.data, out.len)
				  : write_frame(1, err.msg, strlen(err.msg));
		if (!ok) {
			fprintf(stderr, "canon_batch: write failed\n");
			rc = 2;
			break;
		}
	}
	fflush(stdout);
	free(buf);
	pith_buf_release(&out);
	return rc;
}
