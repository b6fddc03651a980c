#include "err.h"

#include <stdarg.h>
#include <stdio.h>

int pith_err_set(pith_err_t *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		err->code = code;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}

const char *pith_err_name(int code)
{
	switch (code) {
	case PITH_OK: return "ok";
	case PITH_ENOMEM: return "out of memory";
	case PITH_EINVAL: return "malformed";
	case PITH_ETOOBIG: return "too big";
	case PITH_ETRUNC: return "truncated";
	case PITH_EMISMATCH: return "mismatch";
	case PITH_EUNTRUSTED: return "untrusted key";
	case PITH_EBADSIG: return "bad signature";
	case PITH_ENOTFOUND: return "not found";
	case PITH_EIO: return "i/o error";
	case PITH_EEXIST: return "exists";
	case PITH_EROTATED: return "rotated key";
	case PITH_ENOTSUP: return "not supported";
	}
	return "error";
}
