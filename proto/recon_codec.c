/* Set reconciliation's message codec (docs/sync.md): varints, bounds and
 * range headers read and written, for recon.c's sessions (recon_int.h). */
#include "recon_int.h"

#include <string.h>

/* ---- varints and bounds ----------------------------------------------- */

int recon_put_varint(pith_buf_t *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;
	do {
		uint8_t c = v & 0x7f;
		v >>= 7;
		tmp[n++] = c | (v ? 0x80 : 0);
	} while (v);
	return pith_buf_append(b, tmp, n);
}

int recon_rd_varint(rd_t *r, uint64_t *v, const char *what, pith_err_t *err)
{
	uint64_t x = 0;
	size_t start = r->off;
	for (int shift = 0;; shift += 7) {
		if (r->off >= r->len)
			return pith_err_set(err, PITH_ETRUNC, "recon: %s truncated at byte %zu",
					    what, start);
		uint8_t c = r->p[r->off++];
		if (shift == 63 && c > 1)
			return pith_err_set(err, PITH_EINVAL,
					    "recon: %s at byte %zu overflows 64 bits", what, start);
		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			if (c == 0 && shift > 0)
				return pith_err_set(err, PITH_EINVAL,
						    "recon: %s at byte %zu is not minimally encoded",
						    what, start);
			break;
		}
	}
	*v = x;
	err->offset = 0;
	return 0;
}

int recon_rd_bytes(rd_t *r, size_t n, const uint8_t **out, const char *what, pith_err_t *err)
{
	if (r->len - r->off < n)
		return pith_err_set(err, PITH_ETRUNC,
				    "recon: %s at byte %zu needs %zu bytes, %zu left", what,
				    r->off, n, r->len - r->off);
	*out = r->p + r->off;
	r->off += n;
	return 0;
}

/* Among the deltas d in [dl, dh] (<= RECON_TS_MAX), the one with the
 * shortest code m << 6 | e where d = m << e. Returns the code, sets *d. */
static uint64_t ts_code(uint64_t dl, uint64_t dh, uint64_t *d)
{
	uint64_t best = dl << 6;
	*d = dl;
	for (unsigned e = 1; e <= 56; e++) {
		uint64_t step = UINT64_C(1) << e;
		if (step > dh && dl > 0)
			break;
		uint64_t m = (dl + step - 1) >> e;
		if ((m << e) > dh)
			continue;
		uint64_t code = m << 6 | e;
		if (code < best) {
			best = code;
			*d = m << e;
		}
	}
	return best;
}

/* Writes the bound (ts in [tlo, thi], id prefix) and the range header. */
static int wr_bound_raw(wr_t *w, uint64_t tlo, uint64_t thi, const uint8_t *id, int inf,
			int mode, bound_t *chosen)
{
	pith_buf_t *b = w->out;
	if (inf) {
		recon_put_varint(b, 0);
		recon_put_varint(b, (uint64_t)mode);
		chosen->inf = 1;
		chosen->ts = 0;
		memset(chosen->id, 0, RECON_ID_LEN);
	} else {
		uint64_t prev = w->pos.ts, d;
		uint64_t code = ts_code(tlo - prev, thi - prev, &d);
		int plen = 0;
		if (id)
			for (int i = RECON_ID_LEN; i > 0; i--)
				if (id[i - 1]) {
					plen = i;
					break;
				}
		recon_put_varint(b, code + 1);
		recon_put_varint(b, (uint64_t)plen << 3 | (uint64_t)mode);
		if (plen)
			pith_buf_append(b, id, (size_t)plen);
		chosen->inf = 0;
		chosen->ts = prev + d;
		memset(chosen->id, 0, RECON_ID_LEN);
		if (plen)
			memcpy(chosen->id, id, (size_t)plen);
	}
	w->pos = *chosen;
	if (mode != M_SKIP)
		w->any = 1;
	return b->oom ? PITH_ENOMEM : 0;
}

/* Starts a range [lo, hi) with an exact upper bound; a SKIP range first
 * fills any gap since the last range written. */
int recon_wr_range(wr_t *w, const bound_t *lo, const bound_t *hi, int mode)
{
	bound_t tmp;
	if (recon_bound_cmp(lo, &w->pos) > 0)
		wr_bound_raw(w, lo->ts, lo->ts, lo->id, lo->inf, M_SKIP, &tmp);
	return wr_bound_raw(w, hi->ts, hi->ts, hi->id, hi->inf, mode, &tmp);
}

/* Starts a range [lo, b) whose upper bound b is ours to choose anywhere in
 * (p, q], p < q being consecutive items of our set: the shortest one. */
int recon_wr_range_gap(wr_t *w, const bound_t *lo, const recon_item_t *p,
		       const recon_item_t *q, int mode, bound_t *chosen)
{
	bound_t tmp;
	if (recon_bound_cmp(lo, &w->pos) > 0)
		wr_bound_raw(w, lo->ts, lo->ts, lo->id, lo->inf, M_SKIP, &tmp);
	if (p->ts < q->ts)
		return wr_bound_raw(w, p->ts + 1, q->ts, NULL, 0, mode, chosen);
	uint8_t pre[RECON_ID_LEN] = {0};
	int l = 0;
	while (p->id[l] == q->id[l])
		l++;
	memcpy(pre, q->id, (size_t)l + 1);
	return wr_bound_raw(w, q->ts, q->ts, pre, 0, mode, chosen);
}

int recon_wr_finish(wr_t *w)
{
	if (w->any && !w->pos.inf) {
		bound_t tmp;
		wr_bound_raw(w, 0, 0, NULL, 1, M_SKIP, &tmp);
	}
	return w->out->oom ? PITH_ENOMEM : 0;
}

int recon_read_count(rd_t *r, size_t unit, const char *what, size_t *n, pith_err_t *err)
{
	return recon_read_count_max(r, unit, RANGE_IDS_MAX, what, n, err);
}

int recon_read_count_max(rd_t *r, size_t unit, size_t max, const char *what, size_t *n,
			 pith_err_t *err)
{
	uint64_t v = 0;
	size_t at = r->off;
	int rc = recon_rd_varint(r, &v, what, err);
	if (rc)
		return rc;
	if (v > max)
		return pith_err_set(err, PITH_ETOOBIG,
				    "recon: %s at byte %zu is %llu, above the limit of %zu", what,
				    at, (unsigned long long)v, max);
	if (v * unit > r->len - r->off)
		return pith_err_set(err, PITH_ETRUNC,
				    "recon: %s at byte %zu is %llu but only %zu bytes follow",
				    what, at, (unsigned long long)v, r->len - r->off);
	*n = (size_t)v;
	return 0;
}

/* Reads one bound after prev (strictly above it). */
int recon_read_bound(rd_t *r, const bound_t *prev, bound_t *b, int *mode, pith_err_t *err)
{
	size_t at = r->off;
	uint64_t code = 0, hdr = 0;
	int rc = recon_rd_varint(r, &code, "bound", err);
	if (rc)
		return rc;
	if ((rc = recon_rd_varint(r, &hdr, "range header", err)))
		return rc;
	*mode = (int)(hdr & 7);
	uint64_t plen = hdr >> 3;
	if (*mode >= M_COUNT)
		return pith_err_set(err, PITH_EINVAL, "recon: unknown mode %d at byte %zu",
				    *mode, at);
	if (plen > RECON_ID_LEN)
		return pith_err_set(err, PITH_EINVAL,
				    "recon: bound id prefix of %llu bytes at byte %zu",
				    (unsigned long long)plen, at);
	memset(b->id, 0, RECON_ID_LEN);
	if (code == 0) {
		if (plen)
			return pith_err_set(err, PITH_EINVAL,
					    "recon: infinite bound with an id prefix at byte %zu",
					    at);
		b->inf = 1;
		b->ts = 0;
		return 0;
	}
	uint64_t c = code - 1, e = c & 63, m = c >> 6;
	if (e > 56 || m > (RECON_TS_MAX >> e) || (m << e) > RECON_TS_MAX - prev->ts)
		return pith_err_set(err, PITH_EINVAL,
				    "recon: bound at byte %zu is past the largest timestamp", at);
	b->inf = 0;
	b->ts = prev->ts + (m << e);
	const uint8_t *p = NULL;
	if ((rc = recon_rd_bytes(r, (size_t)plen, &p, "bound id prefix", err)))
		return rc;
	memcpy(b->id, p, (size_t)plen);
	if (recon_bound_cmp(b, prev) <= 0)
		return pith_err_set(err, PITH_EINVAL,
				    "recon: bound at byte %zu is not above the previous one", at);
	return 0;
}

