/* Fixed-key Ed25519 verification; see ed25519.h for the contract.
 *
 * Field elements are five 51-bit limbs (radix 2^51) multiplied through
 * unsigned __int128. Points are extended twisted-Edwards coordinates
 * (X:Y:Z:T), x = X/Z, y = Y/Z, xy = T/Z, on -x^2 + y^2 = 1 + d x^2 y^2.
 * Table entries are affine and kept as (y+x, y-x, 2dxy), so each addition
 * of an entry costs eight multiplications. The addition formula (Hisil,
 * Wong, Carter, Dawson 2008, "add-2008-hwcd-3") is complete on this
 * curve, so it also doubles.
 *
 * Nothing here is secret: the scalars and points are public, so table
 * lookups index by digit and the code branches on data. */
#include "ed25519.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "ed25519_lanes.h"
#include "err.h"

/* L, the order of the base point (2^252 + 27742317777372353535851937790883648493) */
static const uint8_t scalar_L[32] = {
	0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10};

/* libsodium 1.0.18's ge25519_has_small_order list, byte for byte: the
 * encodings of the eight points of small order, plus y = p and y = p + 1
 * (non-canonical encodings of two of them). The sign bit is not compared,
 * so each entry stands for two encodings: 14 in all. */
static const uint8_t small_order[7][32] = {
	/* 0 (order 4) */
	{0},
	/* 1 (order 1) */
	{1},
	/* 2707385501144840649318225287225658788936804267575313519463743609750303402022 (order 8) */
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
	 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
	/* 55188659117513257062467267217118295137698188065244968500265048394206261417927 (order 8) */
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
	 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
	/* p - 1 (order 2) */
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	/* p (= 0, order 4) */
	{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	/* p + 1 (= 1, order 1) */
	{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
};

int pith_ed_has_small_order(const uint8_t s[static 32])
{
	for (size_t i = 0; i < sizeof(small_order) / sizeof(small_order[0]); i++)
		if (!memcmp(s, small_order[i], 31) && (s[31] & 0x7f) == small_order[i][31])
			return 1;
	return 0;
}

/* libsodium's ge25519_is_canonical: y < p, the sign bit not looked at
 * (y >= p only for bytes 1..30 all 0xff, byte 31 0x7f or 0xff, byte 0
 * from 0xed up). */
static int point_is_canonical(const uint8_t s[32])
{
	if ((s[31] & 0x7f) != 0x7f || s[0] < 0xed)
		return 1;
	for (int i = 1; i < 31; i++)
		if (s[i] != 0xff)
			return 1;
	return 0;
}

/* The self-test's view of crypto_core_ed25519_is_valid_point; tests
 * swap it (pith_ed_set_valid_point_fn). */
static int (*valid_point_fn)(const unsigned char *p) = crypto_core_ed25519_is_valid_point;
static pthread_mutex_t selftest_lock = PTHREAD_MUTEX_INITIALIZER;
static int selftest_state; /* 0 not run, 1 passed, -1 failed */
static const char *selftest_why;

void pith_ed_set_valid_point_fn(int (*fn)(const unsigned char *p))
{
	pthread_mutex_lock(&selftest_lock);
	valid_point_fn = fn ? fn : crypto_core_ed25519_is_valid_point;
	selftest_state = 0;
	selftest_why = NULL;
	pthread_mutex_unlock(&selftest_lock);
}

static int selftest_run(const char **why);

int pith_ed_selftest(const char **why)
{
	pthread_mutex_lock(&selftest_lock);
	if (!selftest_state) {
		selftest_why = NULL;
		selftest_state = selftest_run(&selftest_why) ? -1 : 1;
	}
	int ok = selftest_state > 0;
	if (why)
		*why = selftest_why;
	pthread_mutex_unlock(&selftest_lock);
	return ok ? 0 : PITH_ENOTSUP;
}

#ifndef __SIZEOF_INT128__
/* No 128-bit products (32-bit targets): no tables, and every key stays
 * with libsodium (pith_sig_verify_b64 falls back when a key has none). */
int pith_ed_table_new(const uint8_t pk[static 32], pith_ed_table_t **out)
{
	(void)pk;
	*out = NULL;
	return PITH_EINVAL;
}
void pith_ed_table_free_(pith_ed_table_t *t)
{
	(void)t;
}
int pith_ed_verify(const pith_ed_table_t *t, const uint8_t sig[static 64], const uint8_t *m,
		   size_t mlen)
{
	(void)t, (void)sig, (void)m, (void)mlen;
	return -1;
}
void pith_ed_verify_many(pith_ed_item_t *items, size_t n)
{
	for (size_t i = 0; i < n; i++)
		items[i].ok = 0;
}
int pith_ed_lanes(int want)
{
	(void)want;
	return 0;
}
void pith_ed_base_mul(uint8_t out[static 32], const uint8_t s[static 32])
{
	(void)s;
	memset(out, 0, 32);
}
/* [L]P == identity, by double-and-add with crypto_core_ed25519_add,
 * which takes any point on the curve (is_valid_point is what we cannot
 * rely on). About 300 additions: once per trusted key. */
static int sodium_in_subgroup(const uint8_t p[32])
{
	static const uint8_t identity[32] = {1};
	uint8_t acc[32] = {1};
	for (int i = 252; i >= 0; i--) {
		if (crypto_core_ed25519_add(acc, acc, acc))
			return 0;
		if ((scalar_L[i >> 3] >> (i & 7)) & 1 && crypto_core_ed25519_add(acc, acc, p))
			return 0;
	}
	return !memcmp(acc, identity, 32);
}
/* Without our own arithmetic the subgroup check is libsodium's, so a
 * libsodium that failed the self-test cannot be used for it. */
static int selftest_run(const char **why)
{
	*why = "no fixed-key tables on this target (no 128-bit integers)";
	return -1;
}
int pith_ed_key_check(const uint8_t pk[static 32], const char **why)
{
	const char *w = NULL;
	if (!point_is_canonical(pk))
		w = "not canonical (y >= p)";
	else if (pith_ed_has_small_order(pk))
		w = "of small order";
	else if (!sodium_in_subgroup(pk))
		w = "not on the curve or not in the prime-order subgroup";
	if (why)
		*why = w;
	return w ? PITH_EINVAL : 0;
}
#else

typedef unsigned __int128 u128;

#define MASK51 ((UINT64_C(1) << 51) - 1)

/* radix 2^W signed digits in [-2^(W-1), 2^(W-1)]; POS positions cover a
 * scalar below 2^253 with room for the last carry */
#define W 8
#define POS ((256 + W - 1) / W)
#define HALF (1 << (W - 1))
/* W = 8: 32 positions of 128 entries, 480 KiB per key, built in about
 * 3 ms; 9% faster per signature than W = 7 (half the table), and the
 * import no slower for the larger table (measured in commit 72aa26e) */
_Static_assert(W >= 2 && W <= 8, "digits are int16_t; W = 9 would need 1 MiB per key");

typedef struct {
	uint64_t v[5];
} fe_t;

typedef struct {
	fe_t X, Y, Z, T;
} ge_t;

typedef struct {
	fe_t ypx, ymx, xy2d;
} niels_t;

struct pith_ed_table {
	uint8_t pk[32];
	niels_t a[POS][HALF]; /* a[i][j] = (j + 1) * 2^(W i) * A */
};

/* B: y = 4/5, x even */
static const uint8_t base_enc[32] = {
	0x58, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66,
	0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66, 0x66};

static niels_t base_tab[POS][HALF];
static fe_t fe_d2, fe_d, fe_sqrtm1;
static pthread_once_t base_once = PTHREAD_ONCE_INIT;
static int base_ok;

/* --- field arithmetic mod p = 2^255 - 19 --- */

static uint64_t load64_le(const uint8_t *p)
{
	uint64_t r = 0;
	for (int i = 7; i >= 0; i--)
		r = r << 8 | p[i];
	return r;
}

static void store64_le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static void fe_small(fe_t *h, uint64_t v)
{
	memset(h, 0, sizeof(*h));
	h->v[0] = v;
}

/* the low 255 bits of s; bit 255 is the caller's business */
static void fe_frombytes(fe_t *h, const uint8_t s[32])
{
	h->v[0] = load64_le(s) & MASK51;
	h->v[1] = (load64_le(s + 6) >> 3) & MASK51;
	h->v[2] = (load64_le(s + 12) >> 6) & MASK51;
	h->v[3] = (load64_le(s + 19) >> 1) & MASK51;
	h->v[4] = (load64_le(s + 24) >> 12) & MASK51;
}

/* Limbs below 2^54 in, below 2^51 (limb 0: 2^51 + 2^18) out. */
static void fe_carry(fe_t *h)
{
	uint64_t c;
	c = h->v[0] >> 51, h->v[0] &= MASK51, h->v[1] += c;
	c = h->v[1] >> 51, h->v[1] &= MASK51, h->v[2] += c;
	c = h->v[2] >> 51, h->v[2] &= MASK51, h->v[3] += c;
	c = h->v[3] >> 51, h->v[3] &= MASK51, h->v[4] += c;
	c = h->v[4] >> 51, h->v[4] &= MASK51, h->v[0] += 19 * c;
}

/* The canonical encoding (value reduced below p). */
static void fe_tobytes(uint8_t s[32], const fe_t *f)
{
	fe_t t = *f;
	fe_carry(&t);
	/* q = 1 exactly when t >= p, found by carrying t + 19 */
	uint64_t q = (t.v[0] + 19) >> 51;
	q = (t.v[1] + q) >> 51;
	q = (t.v[2] + q) >> 51;
	q = (t.v[3] + q) >> 51;
	q = (t.v[4] + q) >> 51;
	t.v[0] += 19 * q;
	uint64_t c;
	c = t.v[0] >> 51, t.v[0] &= MASK51, t.v[1] += c;
	c = t.v[1] >> 51, t.v[1] &= MASK51, t.v[2] += c;
	c = t.v[2] >> 51, t.v[2] &= MASK51, t.v[3] += c;
	c = t.v[3] >> 51, t.v[3] &= MASK51, t.v[4] += c;
	t.v[4] &= MASK51; /* drops q * 2^255 */
	store64_le(s, t.v[0] | t.v[1] << 51);
	store64_le(s + 8, t.v[1] >> 13 | t.v[2] << 38);
	store64_le(s + 16, t.v[2] >> 26 | t.v[3] << 25);
	store64_le(s + 24, t.v[3] >> 39 | t.v[4] << 12);
}

static int fe_is_negative(const fe_t *f)
{
	uint8_t s[32];
	fe_tobytes(s, f);
	return s[0] & 1;
}

static int fe_is_zero(const fe_t *f)
{
	static const uint8_t zero[32];
	uint8_t s[32];
	fe_tobytes(s, f);
	return !memcmp(s, zero, 32);
}

static void fe_add(fe_t *h, const fe_t *f, const fe_t *g)
{
	for (int i = 0; i < 5; i++)
		h->v[i] = f->v[i] + g->v[i];
}

/* f + 4p - g: g's limbs must stay below 2^53 - 76 */
static void fe_sub(fe_t *h, const fe_t *f, const fe_t *g)
{
	h->v[0] = f->v[0] + ((UINT64_C(1) << 53) - 76) - g->v[0];
	for (int i = 1; i < 5; i++)
		h->v[i] = f->v[i] + ((UINT64_C(1) << 53) - 4) - g->v[i];
}

static void fe_neg(fe_t *h, const fe_t *f)
{
	fe_t z;
	fe_small(&z, 0);
	fe_sub(h, &z, f);
	fe_carry(h);
}

/* Carries five 128-bit column sums into h. */
static inline __attribute__((always_inline)) void fe_reduce128(fe_t *h, u128 r0, u128 r1, u128 r2, u128 r3, u128 r4)
{
	r1 += (uint64_t)(r0 >> 51);
	r2 += (uint64_t)(r1 >> 51);
	r3 += (uint64_t)(r2 >> 51);
	r4 += (uint64_t)(r3 >> 51);
	u128 c = (u128)(uint64_t)(r4 >> 51) * 19 + ((uint64_t)r0 & MASK51);
	h->v[0] = (uint64_t)c & MASK51;
	h->v[1] = ((uint64_t)r1 & MASK51) + (uint64_t)(c >> 51);
	h->v[2] = (uint64_t)r2 & MASK51;
	h->v[3] = (uint64_t)r3 & MASK51;
	h->v[4] = (uint64_t)r4 & MASK51;
}

/* Limbs below 2^54 in. */
static inline __attribute__((always_inline)) void fe_mul(fe_t *h, const fe_t *f, const fe_t *g)
{
	const uint64_t f0 = f->v[0], f1 = f->v[1], f2 = f->v[2], f3 = f->v[3], f4 = f->v[4];
	const uint64_t g0 = g->v[0], g1 = g->v[1], g2 = g->v[2], g3 = g->v[3], g4 = g->v[4];
	const uint64_t g1_19 = 19 * g1, g2_19 = 19 * g2, g3_19 = 19 * g3, g4_19 = 19 * g4;
	u128 r0 = (u128)f0 * g0 + (u128)f1 * g4_19 + (u128)f2 * g3_19 + (u128)f3 * g2_19 + (u128)f4 * g1_19;
	u128 r1 = (u128)f0 * g1 + (u128)f1 * g0 + (u128)f2 * g4_19 + (u128)f3 * g3_19 + (u128)f4 * g2_19;
	u128 r2 = (u128)f0 * g2 + (u128)f1 * g1 + (u128)f2 * g0 + (u128)f3 * g4_19 + (u128)f4 * g3_19;
	u128 r3 = (u128)f0 * g3 + (u128)f1 * g2 + (u128)f2 * g1 + (u128)f3 * g0 + (u128)f4 * g4_19;
	u128 r4 = (u128)f0 * g4 + (u128)f1 * g3 + (u128)f2 * g2 + (u128)f3 * g1 + (u128)f4 * g0;
	fe_reduce128(h, r0, r1, r2, r3, r4);
}

static inline __attribute__((always_inline)) void fe_sq(fe_t *h, const fe_t *f)
{
	const uint64_t f0 = f->v[0], f1 = f->v[1], f2 = f->v[2], f3 = f->v[3], f4 = f->v[4];
	const uint64_t f0_2 = 2 * f0, f1_2 = 2 * f1;
	const uint64_t f1_38 = 38 * f1, f2_38 = 38 * f2, f3_38 = 38 * f3;
	const uint64_t f3_19 = 19 * f3, f4_19 = 19 * f4;
	u128 r0 = (u128)f0 * f0 + (u128)f1_38 * f4 + (u128)f2_38 * f3;
	u128 r1 = (u128)f0_2 * f1 + (u128)f2_38 * f4 + (u128)f3_19 * f3;
	u128 r2 = (u128)f0_2 * f2 + (u128)f1 * f1 + (u128)f3_38 * f4;
	u128 r3 = (u128)f0_2 * f3 + (u128)f1_2 * f2 + (u128)f4_19 * f4;
	u128 r4 = (u128)f0_2 * f4 + (u128)f1_2 * f3 + (u128)f2 * f2;
	fe_reduce128(h, r0, r1, r2, r3, r4);
}

static void fe_sqn(fe_t *h, const fe_t *f, int n)
{
	fe_sq(h, f);
	while (--n > 0)
		fe_sq(h, h);
}

/* z^(2^250 - 1), and z^11 in *z11: the common head of both chains */
static void fe_pow250(fe_t *out, fe_t *z11, const fe_t *z)
{
	fe_t z2, z9, t, a5, a10, a20, a50, a100;
	fe_sq(&z2, z);
	fe_sqn(&t, &z2, 2);
	fe_mul(&z9, &t, z);
	fe_mul(z11, &z9, &z2);
	fe_sq(&t, z11);
	fe_mul(&a5, &t, &z9); /* 2^5 - 1 */
	fe_sqn(&t, &a5, 5);
	fe_mul(&a10, &t, &a5); /* 2^10 - 1 */
	fe_sqn(&t, &a10, 10);
	fe_mul(&a20, &t, &a10); /* 2^20 - 1 */
	fe_sqn(&t, &a20, 20);
	fe_mul(&t, &t, &a20); /* 2^40 - 1 */
	fe_sqn(&t, &t, 10);
	fe_mul(&a50, &t, &a10); /* 2^50 - 1 */
	fe_sqn(&t, &a50, 50);
	fe_mul(&a100, &t, &a50); /* 2^100 - 1 */
	fe_sqn(&t, &a100, 100);
	fe_mul(&t, &t, &a100); /* 2^200 - 1 */
	fe_sqn(&t, &t, 50);
	fe_mul(out, &t, &a50); /* 2^250 - 1 */
}

/* z^(p - 2) = 1/z */
static void fe_invert(fe_t *out, const fe_t *z)
{
	fe_t t, z11;
	fe_pow250(&t, &z11, z);
	fe_sqn(&t, &t, 5); /* 2^255 - 32 */
	fe_mul(out, &t, &z11);
}

/* z^((p - 5) / 8) = z^(2^252 - 3) */
static void fe_pow22523(fe_t *out, const fe_t *z)
{
	fe_t t, z11;
	fe_pow250(&t, &z11, z);
	fe_sqn(&t, &t, 2);
	fe_mul(out, &t, z);
}

/* --- points --- */

static void ge_identity(ge_t *p)
{
	fe_small(&p->X, 0);
	fe_small(&p->Y, 1);
	fe_small(&p->Z, 1);
	fe_small(&p->T, 0);
}

/* r = p + q, or p - q when neg */
static void ge_madd(ge_t *r, const ge_t *p, const niels_t *q, int neg)
{
	fe_t a, b, c, d, e, f, g, h, t;
	fe_sub(&t, &p->Y, &p->X);
	fe_mul(&a, &t, neg ? &q->ypx : &q->ymx);
	fe_add(&t, &p->Y, &p->X);
	fe_mul(&b, &t, neg ? &q->ymx : &q->ypx);
	fe_mul(&c, &p->T, &q->xy2d);
	fe_add(&d, &p->Z, &p->Z);
	fe_sub(&e, &b, &a);
	fe_add(&h, &b, &a);
	if (neg) {
		fe_add(&f, &d, &c);
		fe_sub(&g, &d, &c);
	} else {
		fe_sub(&f, &d, &c);
		fe_add(&g, &d, &c);
	}
	fe_mul(&r->X, &e, &f);
	fe_mul(&r->Y, &g, &h);
	fe_mul(&r->Z, &f, &g);
	fe_mul(&r->T, &e, &h);
}

/* r = 2p ("dbl-2008-hwcd" with a = -1); only the key check uses it. */
static void ge_dbl(ge_t *r, const ge_t *p)
{
	fe_t a, b, c, e, f, g, h;
	fe_sq(&a, &p->X);
	fe_sq(&b, &p->Y);
	fe_sq(&c, &p->Z);
	fe_add(&c, &c, &c);
	fe_carry(&c);
	fe_add(&e, &p->X, &p->Y);
	fe_carry(&e);
	fe_sq(&e, &e);
	fe_sub(&e, &e, &a);
	fe_carry(&e);
	fe_sub(&e, &e, &b); /* E = (X + Y)^2 - X^2 - Y^2 = 2XY */
	fe_carry(&e);
	fe_sub(&g, &b, &a); /* G = -X^2 + Y^2 */
	fe_carry(&g);
	fe_sub(&f, &g, &c); /* F = G - 2Z^2 */
	fe_carry(&f);
	fe_add(&h, &a, &b);
	fe_carry(&h);
	fe_neg(&h, &h); /* H = -X^2 - Y^2 */
	fe_mul(&r->X, &e, &f);
	fe_mul(&r->Y, &g, &h);
	fe_mul(&r->T, &e, &h);
	fe_mul(&r->Z, &f, &g);
}

static int ge_is_identity(const ge_t *p)
{
	fe_t d;
	fe_sub(&d, &p->Y, &p->Z);
	fe_carry(&d);
	return fe_is_zero(&p->X) && fe_is_zero(&d);
}

/* Affine (y+x, y-x, 2dxy) of p, given zi = 1/Z. */
static void ge_to_niels(niels_t *n, const ge_t *p, const fe_t *zi)
{
	fe_t x, y, xy;
	fe_mul(&x, &p->X, zi);
	fe_mul(&y, &p->Y, zi);
	fe_add(&n->ypx, &y, &x);
	fe_carry(&n->ypx);
	fe_sub(&n->ymx, &y, &x);
	fe_carry(&n->ymx);
	fe_mul(&xy, &x, &y);
	fe_mul(&n->xy2d, &xy, &fe_d2);
}

/* The canonical encoding of p, given zi = 1/Z. */
static void ge_encode(uint8_t s[32], const ge_t *p, const fe_t *zi)
{
	fe_t x, y;
	fe_mul(&x, &p->X, zi);
	fe_mul(&y, &p->Y, zi);
	fe_tobytes(s, &y);
	s[31] |= (uint8_t)(fe_is_negative(&x) << 7);
}

/* Decodes a point; -1 if s is not one. Callers check canonicity first. */
static int ge_frombytes(ge_t *p, const uint8_t s[32])
{
	fe_t y2, u, v, v3, v7, x, t, chk;
	fe_t one;
	fe_small(&one, 1);
	fe_frombytes(&p->Y, s);
	fe_sq(&y2, &p->Y);
	fe_sub(&u, &y2, &one);
	fe_carry(&u);
	fe_mul(&v, &y2, &fe_d);
	fe_add(&v, &v, &one);
	fe_carry(&v);
	/* x = u v^3 (u v^7)^((p-5)/8), then fix up by sqrt(-1) if needed */
	fe_sq(&v3, &v);
	fe_mul(&v3, &v3, &v);
	fe_sq(&v7, &v3);
	fe_mul(&v7, &v7, &v);
	fe_mul(&t, &u, &v7);
	fe_pow22523(&t, &t);
	fe_mul(&x, &u, &v3);
	fe_mul(&x, &x, &t);
	fe_sq(&t, &x);
	fe_mul(&t, &t, &v); /* v x^2 */
	fe_sub(&chk, &t, &u);
	if (!fe_is_zero(&chk)) {
		fe_add(&chk, &t, &u);
		if (!fe_is_zero(&chk))
			return -1;
		fe_mul(&x, &x, &fe_sqrtm1);
	}
	if (fe_is_negative(&x) != (s[31] >> 7)) {
		if (fe_is_zero(&x))
			return -1;
		fe_neg(&x, &x);
	}
	p->X = x;
	fe_small(&p->Z, 1);
	fe_mul(&p->T, &x, &p->Y);
	return 0;
}

/* tab[i][j] = (j + 1) * 2^(W i) * P. The multiples of one position are
 * made projective, then made affine with one inversion between them
 * (Montgomery's trick: each further inverse costs three multiplications). */
static void table_build(niels_t tab[POS][HALF], const ge_t *p)
{
	ge_t m[HALF];
	fe_t pre[HALF], inv, zi;
	niels_t one;
	fe_t z1;
	fe_small(&z1, 1);
	ge_t base = *p;
	for (int i = 0; i < POS; i++) {
		/* base is affine here (Z = 1) for i = 0 and made so below */
		ge_to_niels(&one, &base, &z1);
		m[0] = base;
		for (int j = 1; j < HALF; j++)
			ge_madd(&m[j], &m[j - 1], &one, 0);
		pre[0] = m[0].Z;
		for (int j = 1; j < HALF; j++)
			fe_mul(&pre[j], &pre[j - 1], &m[j].Z);
		fe_invert(&inv, &pre[HALF - 1]);
		for (int j = HALF - 1; j > 0; j--) {
			fe_mul(&zi, &inv, &pre[j - 1]);
			fe_mul(&inv, &inv, &m[j].Z);
			ge_to_niels(&tab[i][j], &m[j], &zi);
		}
		ge_to_niels(&tab[i][0], &m[0], &inv);
		/* the next position's base, 2 * HALF = 2^W times this one's */
		ge_madd(&base, &m[HALF - 1], &tab[i][HALF - 1], 0);
		fe_invert(&zi, &base.Z);
		fe_mul(&base.X, &base.X, &zi);
		fe_mul(&base.Y, &base.Y, &zi);
		fe_mul(&base.T, &base.T, &zi);
		base.Z = z1;
	}
}

/* Signed radix-2^W digits of a scalar below 2^253. */
static void scalar_recode(int16_t e[POS], const uint8_t s[32])
{
	int carry = 0;
	for (int i = 0; i < POS; i++) {
		int bit = i * W, v = 0;
		for (int k = 0; k < W; k++, bit++)
			if (bit < 256)
				v |= ((s[bit >> 3] >> (bit & 7)) & 1) << k;
		v += carry;
		carry = v > HALF;
		if (carry)
			v -= 1 << W;
		e[i] = (int16_t)v;
	}
}

static void base_init(void)
{
	/* d = -121665 / 121666; sqrt(-1) = 2^((p - 1) / 4) */
	fe_t a, b;
	fe_small(&a, 121665);
	fe_neg(&a, &a);
	fe_small(&b, 121666);
	fe_invert(&b, &b);
	fe_mul(&fe_d, &a, &b);
	fe_add(&fe_d2, &fe_d, &fe_d);
	fe_carry(&fe_d2);
	fe_small(&a, 2);
	fe_pow22523(&b, &a); /* 2^(2^252 - 3) */
	fe_sq(&b, &b);
	fe_mul(&fe_sqrtm1, &b, &a); /* 2^(2^253 - 5) */

	ge_t bp;
	if (ge_frombytes(&bp, base_enc))
		return;
	table_build(base_tab, &bp);
	base_ok = 1;
}

static int base_ready(void)
{
	pthread_once(&base_once, base_init);
	return base_ok;
}

/* Whether the point p (affine, Z = 1) is in the prime-order subgroup:
 * [L]p is the identity, by double-and-add over L's 253 bits. */
static int ge_in_subgroup(const ge_t *p)
{
	niels_t n;
	fe_t one;
	ge_t r;
	fe_small(&one, 1);
	ge_to_niels(&n, p, &one);
	ge_identity(&r);
	for (int i = 252; i >= 0; i--) {
		ge_dbl(&r, &r);
		if ((scalar_L[i >> 3] >> (i & 7)) & 1)
			ge_madd(&r, &r, &n, 0);
	}
	return ge_is_identity(&r);
}

int pith_ed_key_check(const uint8_t pk[static 32], const char **why)
{
	const char *w = NULL;
	ge_t a;
	if (!base_ready())
		w = "cannot set up the curve constants";
	else if (!point_is_canonical(pk))
		w = "not canonical (y >= p)";
	else if (pith_ed_has_small_order(pk))
		w = "of small order";
	else if (ge_frombytes(&a, pk))
		w = "not a point on the curve";
	else if (!ge_in_subgroup(&a))
		w = "of mixed order (not in the prime-order subgroup)";
	if (why)
		*why = w;
	return w ? PITH_EINVAL : 0;
}

/* B + T for the torsion point encoded t, encoded into out (our own
 * arithmetic, so that what is tested is libsodium's check alone). */
static int mixed_point(uint8_t out[32], const uint8_t t[32])
{
	ge_t b, tp, r;
	niels_t n;
	fe_t one, zi;
	fe_small(&one, 1);
	if (ge_frombytes(&b, base_enc) || ge_frombytes(&tp, t))
		return -1;
	ge_to_niels(&n, &tp, &one);
	ge_madd(&r, &b, &n, 0);
	fe_invert(&zi, &r.Z);
	ge_encode(out, &r, &zi);
	return 0;
}

/* The start-up self-test (pith_ed_selftest): B passes
 * crypto_core_ed25519_is_valid_point and B + T fails it for torsion points
 * T of order 2, 4 and 8 (unpatched 1.0.18 takes B + T2: it only asks
 * whether [L]P has x = 0, CVE-2025-69277); our own key check must agree. */
static int selftest_run(const char **why)
{
	/* small_order[]: 4 is the point of order 2, 0 one of order 4, 2 one of order 8 */
	static const int torsion[3] = {4, 0, 2};
	static const char t2_msg[] = "crypto_core_ed25519_is_valid_point accepts B + T2, a point of "
				     "mixed order (an unpatched libsodium 1.0.18, CVE-2025-69277)";
	static const char *const names[3] = {
		t2_msg,
		"crypto_core_ed25519_is_valid_point accepts B + T4, a point of mixed order",
		"crypto_core_ed25519_is_valid_point accepts B + T8, a point of mixed order"};
	if (sodium_init() < 0 || !base_ready()) {
		*why = "libsodium or the curve constants failed to initialise";
		return -1;
	}
	if (valid_point_fn(base_enc) != 1 || pith_ed_key_check(base_enc, NULL)) {
		*why = "the base point is not taken as a valid point";
		return -1;
	}
	for (int i = 0; i < 3; i++) {
		uint8_t p[32];
		if (mixed_point(p, small_order[torsion[i]])) {
			*why = "cannot build the mixed-order test points";
			return -1;
		}
		if (valid_point_fn(p) != 0) {
			*why = names[i];
			return -1;
		}
		if (!pith_ed_key_check(p, NULL)) {
			*why = "our own key check accepts a point of mixed order";
			return -1;
		}
	}
	return 0;
}

int pith_ed_table_new(const uint8_t pk[static 32], pith_ed_table_t **out)
{
	*out = NULL;
	if (sodium_init() < 0 || !base_ready())
		return PITH_ENOMEM;
	if (pith_ed_selftest(NULL))
		return PITH_ENOTSUP;
	/* the keys crypto_sign_verify_detached takes: canonical, not on the
	 * small-order list, on the curve (mixed order included: the rules
	 * below do not depend on the subgroup) */
	ge_t a;
	if (!point_is_canonical(pk) || pith_ed_has_small_order(pk) || ge_frombytes(&a, pk))
		return PITH_EINVAL;
	pith_ed_table_t *t = malloc(sizeof(*t));
	if (!t)
		return PITH_ENOMEM;
	memcpy(t->pk, pk, 32);
	table_build(t->a, &a);
	*out = t;
	return 0;
}

void pith_ed_table_free_(pith_ed_table_t *t)
{
	free(t);
}

/* s < L, the group order, read from the top byte down */
static int scalar_is_canonical(const uint8_t s[32])
{
	for (int i = 31; i >= 0; i--)
		if (s[i] != scalar_L[i])
			return s[i] < scalar_L[i];
	return 0;
}

static void accumulate(ge_t *r, const niels_t tab[POS][HALF], const int16_t e[POS], int neg)
{
	for (int i = 0; i < POS; i++) {
		int v = e[i];
		if (v > 0)
			ge_madd(r, r, &tab[i][v - 1], neg);
		else if (v < 0)
			ge_madd(r, r, &tab[i][-v - 1], !neg);
	}
}

/* The digits of s and h for sig under t (h = SHA-512(R || A || m) mod L);
 * -1 when the signature fails a check that needs no arithmetic. */
static int ed_prepare(const pith_ed_table_t *t, const uint8_t sig[64], const uint8_t *m,
		      size_t mlen, int16_t es[POS], int16_t eh[POS])
{
	/* libsodium's first two rules, in its order: s < L, and R not on
	 * its small-order list (whatever the key: with a key of mixed order
	 * [s]B - [h]A can be any small-order point) */
	if (!scalar_is_canonical(sig + 32) || pith_ed_has_small_order(sig))
		return -1;
	uint8_t hram[64], h[32];
	crypto_hash_sha512_state st;
	crypto_hash_sha512_init(&st);
	crypto_hash_sha512_update(&st, sig, 32);
	crypto_hash_sha512_update(&st, t->pk, 32);
	crypto_hash_sha512_update(&st, m, mlen);
	crypto_hash_sha512_final(&st, hram);
	crypto_core_ed25519_scalar_reduce(h, hram);
	scalar_recode(es, sig + 32);
	scalar_recode(eh, h);
	return 0;
}

/* [s]B - [h]A from the digits, one signature at a time */
static void ed_sum(ge_t *r, const pith_ed_table_t *t, const int16_t es[POS], const int16_t eh[POS])
{
	ge_identity(r);
	accumulate(r, (const niels_t(*)[HALF])base_tab, es, 0);
	accumulate(r, t->a, eh, 1);
}

/* Whether r, given zi = 1/Z, encodes to the signature's R. */
static int ed_matches(const ge_t *r, const fe_t *zi, const uint8_t sig[64])
{
	uint8_t rcheck[32];
	ge_encode(rcheck, r, zi);
	return !memcmp(rcheck, sig, 32);
}

int pith_ed_verify(const pith_ed_table_t *t, const uint8_t sig[static 64],
		   const uint8_t *m, size_t mlen)
{
	pith_ed_item_t it = {t, sig, m, mlen, 0};
	pith_ed_verify_many(&it, 1);
	return it.ok ? 0 : -1;
}

/* -1 not decided yet, 0 off, 1 on (when the CPU has AVX-512 IFMA) */
static _Atomic int lanes_mode = -1;

int pith_ed_lanes(int want)
{
	if (want >= 0)
		atomic_store_explicit(&lanes_mode, want && pith_ed_lanes_available(),
				      memory_order_relaxed);
	int m = atomic_load_explicit(&lanes_mode, memory_order_relaxed);
	if (m < 0) { /* the first call: two threads at once find the same */
		m = pith_ed_lanes_available();
		atomic_store_explicit(&lanes_mode, m, memory_order_relaxed);
	}
	return m;
}

/* An identity entry (y+x = 1, y-x = 1, 2dxy = 0), for a zero digit. */
static const niels_t niels_identity = {{{1}}, {{1}}, {{0}}};

/* ed_sum for up to 8 signatures at once (pith_ed_lanes_sum): step i adds
 * B's entry of digit es[i], step POS + i subtracts the key's of eh[i]. */
static void ed_sum_lanes(ge_t *r, const pith_ed_table_t *const *t, const int16_t (*es)[POS],
			 const int16_t (*eh)[POS], size_t n)
{
	const uint64_t *ent[2 * POS][8];
	uint8_t neg[2 * POS];
	uint64_t out[8][20];
	for (int i = 0; i < POS; i++) {
		neg[i] = neg[POS + i] = 0;
		for (size_t l = 0; l < 8; l++) {
			int v = l < n ? es[l][i] : 0, w = l < n ? eh[l][i] : 0;
			const niels_t *b = v ? &base_tab[i][(v < 0 ? -v : v) - 1] : &niels_identity;
			const niels_t *a = w ? &t[l]->a[i][(w < 0 ? -w : w) - 1] : &niels_identity;
			ent[i][l] = b->ypx.v;
			ent[POS + i][l] = a->ypx.v;
			neg[i] |= (uint8_t)((v < 0) << l);
			neg[POS + i] |= (uint8_t)((w > 0) << l);
		}
	}
	pith_ed_lanes_sum((const uint64_t *const(*)[8])ent, neg, 2 * POS, out);
	for (size_t l = 0; l < n; l++) {
		memcpy(r[l].X.v, out[l], 40);
		memcpy(r[l].Y.v, out[l] + 5, 40);
		memcpy(r[l].Z.v, out[l] + 10, 40);
		memcpy(r[l].T.v, out[l] + 15, 40);
	}
}

void pith_ed_verify_many(pith_ed_item_t *items, size_t n)
{
	ge_t r[PITH_ED_MANY];
	fe_t pre[PITH_ED_MANY], inv, zi;
	size_t idx[PITH_ED_MANY];
	int16_t es[PITH_ED_MANY][POS], eh[PITH_ED_MANY][POS];
	const pith_ed_table_t *tk[PITH_ED_MANY];
	int lanes = pith_ed_lanes(-1);
	while (n) {
		size_t take = n < PITH_ED_MANY ? n : PITH_ED_MANY, k = 0;
		for (size_t i = 0; i < take; i++) {
			pith_ed_item_t *it = &items[i];
			it->ok = 0;
			if (ed_prepare(it->t, it->sig, it->m, it->mlen, es[k], eh[k]))
				continue;
			tk[k] = it->t;
			idx[k++] = i;
		}
		/* up to eight at once in lanes while three or more are left: a
		 * group costs about what three cost one at a time */
		size_t done = 0;
		while (lanes && k - done >= 3) {
			size_t g = k - done < 8 ? k - done : 8;
			ed_sum_lanes(&r[done], &tk[done], &es[done], &eh[done], g);
			done += g;
		}
		for (; done < k; done++)
			ed_sum(&r[done], tk[done], es[done], eh[done]);
		for (size_t j = 0; j < k; j++) {
			/* Z is never zero: the addition formula is complete */
			if (j)
				fe_mul(&pre[j], &pre[j - 1], &r[j].Z);
			else
				pre[0] = r[0].Z;
		}
		if (k) {
			/* one inversion for all of them (Montgomery's trick) */
			fe_invert(&inv, &pre[k - 1]);
			for (size_t j = k - 1; j > 0; j--) {
				fe_mul(&zi, &inv, &pre[j - 1]);
				fe_mul(&inv, &inv, &r[j].Z);
				items[idx[j]].ok = ed_matches(&r[j], &zi, items[idx[j]].sig);
			}
			items[idx[0]].ok = ed_matches(&r[0], &inv, items[idx[0]].sig);
		}
		items += take;
		n -= take;
	}
}

void pith_ed_base_mul(uint8_t out[static 32], const uint8_t s[static 32])
{
	int16_t e[POS];
	ge_t r;
	if (!base_ready()) {
		memset(out, 0, 32);
		return;
	}
	fe_t zi;
	scalar_recode(e, s);
	ge_identity(&r);
	accumulate(&r, (const niels_t(*)[HALF])base_tab, e, 0);
	fe_invert(&zi, &r.Z);
	ge_encode(out, &r, &zi);
}

#endif /* __SIZEOF_INT128__ */
