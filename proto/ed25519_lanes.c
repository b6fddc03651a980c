/* Eight point sums at once with AVX-512 IFMA; see ed25519_lanes.h.
 *
 * Each 512-bit register holds one limb of eight field elements, one per
 * lane, in the same radix 2^51 as ed25519.c, so tables and results pass
 * between the two unchanged. vpmadd52luq / vpmadd52huq multiply the low
 * 52 bits of two limbs and add the low or the high 52 bits of the
 * 104-bit product to a 64-bit accumulator: a limb must be below 2^52
 * before it is multiplied (bits above are silently dropped), so every
 * sum or difference that feeds a product is carried first.
 *
 * Nothing here is secret (public scalars and points), as in ed25519.c. */
#include "ed25519_lanes.h"

#include <string.h>

#if PITH_ED_LANES_BUILT

#include <immintrin.h>

#define LANES_FN __attribute__((target("avx512f,avx512ifma")))
#define M51 ((INT64_C(1) << 51) - 1)

typedef struct {
	__m512i v[5];
} fe8_t;

/* 19 c, as shifts: there is no cheap 64-bit vector multiplication */
LANES_FN static inline __m512i times19(__m512i c)
{
	return _mm512_add_epi64(_mm512_add_epi64(c, _mm512_slli_epi64(c, 1)), _mm512_slli_epi64(c, 4));
}

/* Limbs below 2^63 in; out limbs 1-4 below 2^51, limb 0 below 2^51 +
 * 19 * 2^12: all below 2^52, fit to be multiplied. */
LANES_FN static inline void fe8_carry(fe8_t *h)
{
	const __m512i m = _mm512_set1_epi64(M51);
	__m512i c;
	for (int i = 0; i < 4; i++) {
		c = _mm512_srli_epi64(h->v[i], 51);
		h->v[i] = _mm512_and_si512(h->v[i], m);
		h->v[i + 1] = _mm512_add_epi64(h->v[i + 1], c);
	}
	c = _mm512_srli_epi64(h->v[4], 51);
	h->v[4] = _mm512_and_si512(h->v[4], m);
	h->v[0] = _mm512_add_epi64(h->v[0], times19(c));
}

/* f * g, limbs below 2^52 in, carried out. Column k of the schoolbook
 * product collects the low halves of f_i g_j (i + j = k) at weight
 * 2^(51 k) and the high halves, worth 2^52 = 2 * 2^51 of the next
 * column, doubled; columns 5-9 fold into 0-4 times 19 (2^255 = 19).
 * Bounds: a column is below 5 * 2^52 + 5 * 2^53 < 2^57, after the fold
 * below 2^57 + 19 * 2^57 < 2^62. */
LANES_FN static inline void fe8_mul(fe8_t *h, const fe8_t *f, const fe8_t *g)
{
	__m512i lo[9], hi[9];
	for (int k = 0; k < 9; k++)
		lo[k] = hi[k] = _mm512_setzero_si512();
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++) {
			lo[i + j] = _mm512_madd52lo_epu64(lo[i + j], f->v[i], g->v[j]);
			hi[i + j] = _mm512_madd52hi_epu64(hi[i + j], f->v[i], g->v[j]);
		}
	__m512i z[10];
	z[0] = lo[0];
	for (int k = 1; k < 9; k++)
		z[k] = _mm512_add_epi64(lo[k], _mm512_slli_epi64(hi[k - 1], 1));
	z[9] = _mm512_slli_epi64(hi[8], 1);
	for (int k = 0; k < 5; k++)
		h->v[k] = _mm512_add_epi64(z[k], times19(z[k + 5]));
	fe8_carry(h);
}

/* f + g, carried (limbs below 2^52 in) */
LANES_FN static inline void fe8_add(fe8_t *h, const fe8_t *f, const fe8_t *g)
{
	for (int i = 0; i < 5; i++)
		h->v[i] = _mm512_add_epi64(f->v[i], g->v[i]);
	fe8_carry(h);
}

/* f + 4p - g, carried (limbs below 2^52 in, so nothing goes negative) */
LANES_FN static inline void fe8_sub(fe8_t *h, const fe8_t *f, const fe8_t *g)
{
	const __m512i p4_0 = _mm512_set1_epi64((INT64_C(1) << 53) - 76);
	const __m512i p4_i = _mm512_set1_epi64((INT64_C(1) << 53) - 4);
	h->v[0] = _mm512_sub_epi64(_mm512_add_epi64(f->v[0], p4_0), g->v[0]);
	for (int i = 1; i < 5; i++)
		h->v[i] = _mm512_sub_epi64(_mm512_add_epi64(f->v[i], p4_i), g->v[i]);
	fe8_carry(h);
}

/* The fifteen limbs of each lane's entry (y+x, y-x, 2dxy), swapped and
 * negated in the lanes of neg: then each lane adds its entry or its
 * entry's negative, as ed25519.c's ge_madd does with its flag. */
LANES_FN static void entries_load(fe8_t q[3], const uint64_t *const ent[8], __mmask8 neg)
{
	const __m512i idx = _mm512_loadu_si512((const void *)ent);
	fe8_t raw[3];
	for (int c = 0; c < 3; c++)
		for (int i = 0; i < 5; i++)
			raw[c].v[i] = _mm512_i64gather_epi64(
				idx, (const void *)(uintptr_t)(8 * (5 * c + i)), 1);
	fe8_t zero, nxy;
	memset(&zero, 0, sizeof(zero));
	fe8_sub(&nxy, &zero, &raw[2]);
	for (int i = 0; i < 5; i++) {
		q[0].v[i] = _mm512_mask_blend_epi64(neg, raw[0].v[i], raw[1].v[i]);
		q[1].v[i] = _mm512_mask_blend_epi64(neg, raw[1].v[i], raw[0].v[i]);
		q[2].v[i] = _mm512_mask_blend_epi64(neg, raw[2].v[i], nxy.v[i]);
	}
}

LANES_FN void pith_ed_lanes_sum(const uint64_t *const (*ent)[8], const uint8_t *neg, int steps,
				uint64_t out[8][20])
{
	/* (X:Y:Z:T) = the identity in every lane */
	fe8_t p[4];
	memset(p, 0, sizeof(p));
	p[1].v[0] = p[2].v[0] = _mm512_set1_epi64(1);
	for (int s = 0; s < steps; s++) {
		fe8_t q[3], t, a, b, c, d, e, f, g, h;
		entries_load(q, ent[s], (__mmask8)neg[s]);
		fe8_sub(&t, &p[1], &p[0]);
		fe8_mul(&a, &t, &q[1]);
		fe8_add(&t, &p[1], &p[0]);
		fe8_mul(&b, &t, &q[0]);
		fe8_mul(&c, &p[3], &q[2]);
		fe8_add(&d, &p[2], &p[2]);
		fe8_sub(&e, &b, &a);
		fe8_add(&h, &b, &a);
		fe8_sub(&f, &d, &c);
		fe8_add(&g, &d, &c);
		fe8_mul(&p[0], &e, &f);
		fe8_mul(&p[1], &g, &h);
		fe8_mul(&p[2], &f, &g);
		fe8_mul(&p[3], &e, &h);
	}
	uint64_t tmp[8];
	for (int c = 0; c < 4; c++)
		for (int i = 0; i < 5; i++) {
			_mm512_storeu_si512((void *)tmp, p[c].v[i]);
			for (int l = 0; l < 8; l++)
				out[l][5 * c + i] = tmp[l];
		}
}

int pith_ed_lanes_available(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma");
}

#else

int pith_ed_lanes_available(void)
{
	return 0;
}

void pith_ed_lanes_sum(const uint64_t *const (*ent)[8], const uint8_t *neg, int steps,
		       uint64_t out[8][20])
{
	(void)ent, (void)neg, (void)steps;
	memset(out, 0, 8 * sizeof(out[0]));
}

#endif
