/* The canonical writer: the bytes of
 *   json.dumps(v, sort_keys=True, separators=(',',':'), ensure_ascii=False)
 * for a tree built by json.c (parsed or by hand). Strings, members in key
 * order, and floats as Python's repr. See json.h for the contract and
 * docs/json.md for the rules; the string scan and the key order are shared
 * with the parser through json_int.h. */
#include "json.h"
#include "json_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- strings ---------------------------------------------------------- */

static const char hexdig[] = "0123456789abcdef";

int json_write_string(pith_buf_t *out, const char *str, size_t len)
{
	const uint8_t *s = (const uint8_t *)str, *end = s + len;
	/* worst case: every byte becomes \u00XX */
	if (pith_buf_reserve(out, len * 6 + 2))
		return PITH_ENOMEM;
	uint8_t *w = out->data + out->len;
	*w++ = '"';
	while (s < end) {
		const uint8_t *run = s;
		s = skip_plain(s, end, 1);
		if (s > run) {
			memcpy(w, run, (size_t)(s - run));
			w += s - run;
			if (s == end)
				break;
		}
		uint8_t c = *s++;
		*w++ = '\\';
		switch (c) {
		case '"': *w++ = '"'; break;
		case '\\': *w++ = '\\'; break;
		case '\b': *w++ = 'b'; break;
		case '\f': *w++ = 'f'; break;
		case '\n': *w++ = 'n'; break;
		case '\r': *w++ = 'r'; break;
		case '\t': *w++ = 't'; break;
		default:
			*w++ = 'u';
			*w++ = '0';
			*w++ = '0';
			*w++ = (uint8_t)hexdig[c >> 4];
			*w++ = (uint8_t)hexdig[c & 15];
		}
	}
	*w++ = '"';
	out->len = (size_t)(w - out->data);
	return 0;
}

/* ---- values ----------------------------------------------------------- */

static int mptr_cmp(const void *a, const void *b)
{
	return member_cmp(*(const json_member_t *const *)a,
			  *(const json_member_t *const *)b);
}

static int is_skipped(const json_member_t *m, const char *const *skip, size_t nskip)
{
	for (size_t i = 0; i < nskip; i++)
		if (strlen(skip[i]) == m->key_len && memcmp(skip[i], m->key, m->key_len) == 0)
			return 1;
	return 0;
}

/* Members of an object built in code, in canonical order: insertion sort
 * for the usual handful (no comparator calls through a pointer). */
static void order_members(const json_member_t **order, size_t n)
{
	if (n > 24) {
		qsort(order, n, sizeof(*order), mptr_cmp);
		return;
	}
	for (size_t i = 1; i < n; i++) {
		const json_member_t *t = order[i];
		size_t j = i;
		while (j > 0 && member_cmp(order[j - 1], t) > 0) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = t;
	}
}

/* What a write of an object reports (NULL: nothing): where a member
 * named key would start (json_canon_write_at), when key.key is set; each
 * member's bytes (json_canon_write_both), when spans is set. */
typedef struct {
	const json_member_t *m;
	size_t start, end;
} member_span_t;

typedef struct {
	json_member_t key;
	size_t at;
	member_span_t *spans; /* one per member, in the order written */
} insert_point_t;

static int write_value_at(const json_value_t *v, pith_buf_t *out, const char *const *skip,
			  size_t nskip, insert_point_t *where);

static int write_value(const json_value_t *v, pith_buf_t *out,
		       const char *const *skip, size_t nskip)
{
	return write_value_at(v, out, skip, nskip, NULL);
}

static int write_value_at(const json_value_t *v, pith_buf_t *out, const char *const *skip,
			  size_t nskip, insert_point_t *where)
{
	int rc;
	switch (v->type) {
	case JSON_NULL:
		return pith_buf_append(out, "null", 4);
	case JSON_TRUE:
		return pith_buf_append(out, "true", 4);
	case JSON_FALSE:
		return pith_buf_append(out, "false", 5);
	case JSON_INT:
		return pith_buf_append(out, v->u.str, v->len);
	case JSON_FLOAT: {
		char t[32];
		if (!isfinite(v->u.num))
			return PITH_EINVAL;
		size_t n = json_float_repr(v->u.num, t);
		return pith_buf_append(out, t, n);
	}
	case JSON_STRING:
		return json_write_string(out, v->u.str, v->len);
	case JSON_ARRAY:
		if ((rc = pith_buf_putc(out, '[')))
			return rc;
		for (size_t i = 0; i < v->len; i++) {
			if (i && (rc = pith_buf_putc_fast(out, ',')))
				return rc;
			if ((rc = write_value(v->u.items[i], out, NULL, 0)))
				return rc;
		}
		return pith_buf_putc(out, ']');
	case JSON_OBJECT: {
		const json_member_t *stackv[32];
		const json_member_t **order = NULL;
		if (!v->sorted) {
			order = v->len <= 32 ? stackv : malloc(v->len * sizeof(*order));
			if (!order)
				return PITH_ENOMEM;
			for (size_t i = 0; i < v->len; i++)
				order[i] = &v->u.members[i];
			order_members(order, v->len);
		}
		rc = pith_buf_putc(out, '{');
		int first = 1;
		for (size_t i = 0; !rc && i < v->len; i++) {
			const json_member_t *m = order ? order[i] : &v->u.members[i];
			if (nskip && is_skipped(m, skip, nskip))
				continue;
			if (!first)
				rc = pith_buf_putc_fast(out, ',');
			first = 0;
			if (where && where->key.key && !where->at && member_cmp(m, &where->key) > 0)
				where->at = out->len;
			size_t start = out->len;
			if (!rc)
				rc = json_write_string(out, m->key, m->key_len);
			if (!rc)
				rc = pith_buf_putc_fast(out, ':');
			if (!rc)
				rc = write_value(m->value, out, NULL, 0);
			if (where && where->spans)
				where->spans[i] = (member_span_t){m, start, out->len};
		}
		if (order && order != stackv)
			free(order);
		if (where && !where->at)
			where->at = out->len;
		return rc ? rc : pith_buf_putc(out, '}');
	}
	}
	return PITH_EINVAL;
}

int json_canon_write(const json_value_t *v, pith_buf_t *out)
{
	return write_value(v, out, NULL, 0);
}

int json_canon_write_skip(const json_value_t *v, const char *const *skip,
			  size_t nskip, pith_buf_t *out)
{
	return write_value(v, out, skip, nskip);
}

int json_canon_write_both(const json_value_t *v, const char *const *skip, size_t nskip,
			  pith_buf_t *out, pith_buf_t *part)
{
	if (v->type != JSON_OBJECT)
		return PITH_EINVAL;
	member_span_t stackv[32];
	member_span_t *sp = v->len <= 32 ? stackv : malloc(v->len * sizeof(*sp));
	if (!sp)
		return PITH_ENOMEM;
	insert_point_t where = {.spans = sp};
	size_t base = out->len;
	/* the part is the whole less some members: never longer */
	int rc = write_value_at(v, out, NULL, 0, &where);
	if (!rc)
		rc = pith_buf_reserve(part, out->len - base);
	if (!rc) {
		uint8_t *w = part->data + part->len;
		*w++ = '{';
		int first = 1;
		for (size_t i = 0; i < v->len; i++) {
			if (nskip && is_skipped(sp[i].m, skip, nskip))
				continue;
			if (!first)
				*w++ = ',';
			first = 0;
			memcpy(w, out->data + sp[i].start, sp[i].end - sp[i].start);
			w += sp[i].end - sp[i].start;
		}
		*w++ = '}';
		part->len = (size_t)(w - part->data);
	}
	if (sp != stackv)
		free(sp);
	return rc;
}

int json_canon_write_at(const json_value_t *v, const char *key, pith_buf_t *out, size_t *at)
{
	insert_point_t where = {{.key = key, .key_len = strlen(key)}, 0, NULL};
	if (v->type != JSON_OBJECT)
		return PITH_EINVAL;
	int rc = write_value_at(v, out, NULL, 0, &where);
	*at = where.at;
	return rc;
}

/* ---- Python float repr ------------------------------------------------ */

/* Digits and decimal exponent of x in the form d.ddd * 10^exp, written
 * with prec significant digits, correctly rounded (glibc printf is exact). */
static int sci_digits(double x, int prec, char *digits, int *exp10)
{
	char t[48];
	snprintf(t, sizeof(t), "%.*e", prec - 1, x);
	int n = 0;
	const char *p = t;
	for (; *p && *p != 'e'; p++)
		if (*p >= '0' && *p <= '9')
			digits[n++] = *p;
	digits[n] = 0;
	*exp10 = atoi(p + 1);
	return n;
}

static int roundtrips(const char *digits, int n, int exp10, double x)
{
	char t[48];
	snprintf(t, sizeof(t), "%.*se%d", n, digits, exp10 - (n - 1));
	return strtod(t, NULL) == x;
}

/* Add delta (+1/-1) to the n-digit decimal mantissa; renormalise. */
static int bump(const char *digits, int n, int exp10, int delta, char *out, int *oexp)
{
	uint64_t m = 0;
	for (int i = 0; i < n; i++)
		m = m * 10 + (uint64_t)(digits[i] - '0');
	if (delta < 0 && m == 0)
		return -1;
	m = delta > 0 ? m + 1 : m - 1;
	if (m == 0)
		return -1;
	char t[24];
	int k = snprintf(t, sizeof(t), "%llu", (unsigned long long)m);
	*oexp = exp10 + (k - n);
	memcpy(out, t, (size_t)k + 1);
	return k;
}

size_t json_float_repr(double x, char out[32])
{
	char *w = out;
	if (signbit(x)) {
		*w++ = '-';
		x = -x;
	}
	if (x == 0) {
		memcpy(w, "0.0", 4);
		return (size_t)(w - out) + 3;
	}
	char digits[24], cand[24];
	int n = 0, e = 0;
	for (int prec = 1; prec <= 17; prec++) {
		int ce;
		n = sci_digits(x, prec, digits, &e);
		if (roundtrips(digits, n, e, x))
			break;
		/* Near a power of two the round-trip interval is lopsided and a
		 * neighbour of the nearest candidate may be the shortest one. */
		int k = bump(digits, n, e, +1, cand, &ce);
		if (k > 0 && k <= prec && roundtrips(cand, k, ce, x)) {
			memcpy(digits, cand, (size_t)k + 1);
			n = k;
			e = ce;
			break;
		}
		k = bump(digits, n, e, -1, cand, &ce);
		if (k > 0 && k <= prec && roundtrips(cand, k, ce, x)) {
			memcpy(digits, cand, (size_t)k + 1);
			n = k;
			e = ce;
			break;
		}
	}
	while (n > 1 && digits[n - 1] == '0')
		n--;
	int decpt = e + 1; /* value = 0.DIGITS * 10^decpt */
	if (decpt > -4 && decpt <= 16) {
		if (decpt <= 0) {
			*w++ = '0';
			*w++ = '.';
			for (int i = 0; i < -decpt; i++)
				*w++ = '0';
			memcpy(w, digits, (size_t)n);
			w += n;
		} else if (decpt >= n) {
			memcpy(w, digits, (size_t)n);
			w += n;
			for (int i = n; i < decpt; i++)
				*w++ = '0';
			*w++ = '.';
			*w++ = '0';
		} else {
			memcpy(w, digits, (size_t)decpt);
			w += decpt;
			*w++ = '.';
			memcpy(w, digits + decpt, (size_t)(n - decpt));
			w += n - decpt;
		}
	} else {
		*w++ = digits[0];
		if (n > 1) {
			*w++ = '.';
			memcpy(w, digits + 1, (size_t)(n - 1));
			w += n - 1;
		}
		w += sprintf(w, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
	}
	*w = 0;
	return (size_t)(w - out);
}
