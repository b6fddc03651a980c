/* Project-wide error codes and a small error record.
 *
 * Every fallible function returns 0 or a negative PITH_E* code; when the
 * caller passes a pith_err_t, it also gets a one-line message saying what
 * failed and where (field name, byte offset). */
#ifndef PITH_ERR_H
#define PITH_ERR_H

#include <stddef.h>

enum {
	PITH_OK = 0,
	PITH_ENOMEM = -1,    /* allocation failed */
	PITH_EINVAL = -2,    /* malformed input */
	PITH_ETOOBIG = -3,   /* input over a limit */
	PITH_ETRUNC = -4,    /* input ended early */
	PITH_EMISMATCH = -5, /* a recomputed value differs from the claimed one */
	PITH_EUNTRUSTED = -6,/* signer key not trusted */
	PITH_EBADSIG = -7,   /* signature does not verify */
	PITH_ENOTFOUND = -8, /* no such item */
	PITH_EIO = -9,       /* file, socket or database error */
	PITH_EEXIST = -10,   /* already present */
	PITH_EROTATED = -11, /* key had rotated when used */
	PITH_ENOTSUP = -12,  /* not available here (e.g. fixed-key tables after a failed self-test) */
};

typedef struct pith_err {
	int code;
	size_t offset; /* byte offset for parse errors, else 0 */
	char msg[240];
} pith_err_t;

/* Fills err (if non-NULL) with code and a printf-style message; returns code. */
int pith_err_set(pith_err_t *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Short name of an error code, e.g. "mismatch". */
const char *pith_err_name(int code);

#endif
