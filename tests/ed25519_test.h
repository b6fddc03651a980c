/* Signature crafting shared by test_ed25519.c and fuzz/fuzz_sig.c: the
 * pieces of Ed25519 signing that libsodium does not expose, so that tests
 * can build signatures with a chosen R or a non-canonical s. Test code. */
#ifndef PITH_ED25519_TEST_H
#define PITH_ED25519_TEST_H

#include <sodium.h>
#include <stdint.h>
#include <string.h>

/* L, the order of the base point, little-endian */
static const uint8_t ed_test_L[32] = {
	0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7,
	0xa2, 0xde, 0xf9, 0xde, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};

/* The signer's secret scalar a (A = [a]B) from its 32-byte seed. */
static inline void ed_test_secret(uint8_t a[32], const uint8_t seed[32])
{
	uint8_t h[64], wide[64] = {0};
	crypto_hash_sha512(h, seed, 32);
	h[0] &= 248;
	h[31] &= 127;
	h[31] |= 64;
	memcpy(wide, h, 32);
	crypto_core_ed25519_scalar_reduce(a, wide);
}

/* h = SHA-512(R || A || M) mod L */
static inline void ed_test_hram(uint8_t h[32], const uint8_t r[32], const uint8_t pk[32],
				const uint8_t *m, size_t n)
{
	uint8_t wide[64];
	crypto_hash_sha512_state st;
	crypto_hash_sha512_init(&st);
	crypto_hash_sha512_update(&st, r, 32);
	crypto_hash_sha512_update(&st, pk, 32);
	crypto_hash_sha512_update(&st, m, n);
	crypto_hash_sha512_final(&st, wide);
	crypto_core_ed25519_scalar_reduce(h, wide);
}

/* s += L as a 256-bit number: the same scalar mod L, not canonical. */
static inline void ed_test_add_l(uint8_t s[32])
{
	unsigned c = 0;
	for (int i = 0; i < 32; i++) {
		c += s[i] + ed_test_L[i];
		s[i] = (uint8_t)c;
		c >>= 8;
	}
}

/* T8, a point of order 8 (on libsodium's small-order list) */
static const uint8_t ed_test_t8[32] = {
	0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
	0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05};

/* [j]T8 for j mod 8: the eight points of small order (j = 4: the point of
 * order 2; 2 and 6: order 4; odd: order 8). libsodium's add takes any
 * point on the curve. */
static inline void ed_test_torsion(uint8_t out[32], int j)
{
	uint8_t acc[32] = {1};
	for (int i = 0; i < (j & 7); i++)
		crypto_core_ed25519_add(acc, acc, ed_test_t8);
	memcpy(out, acc, 32);
}

/* A' = A + [j]T8: a key of mixed order for j mod 8 != 0 */
static inline void ed_test_mixed_key(uint8_t out[32], const uint8_t pk[32], int j)
{
	uint8_t t[32];
	ed_test_torsion(t, j);
	crypto_core_ed25519_add(out, pk, t);
}

/* A signature by secret a under the key pk2 = [a]B + [j]T8 with
 * R = [r]B + [g]T8 (r = 0: R is the small-order point [g]T8) and
 * s = r + h a, so that [s]B - [h]pk2 = [r]B - [h j]T8: the equation
 * holds exactly when -h j = g (mod 8). The last 4 bytes of m (n >= 4) are
 * a counter tried until it holds (*tries of them, at most 64); returns 0
 * then, -1 if no counter made it hold (the signature is still filled). */
static inline int ed_test_sign_torsion(uint8_t sig[64], const uint8_t a[32], const uint8_t pk2[32],
				       int j, const uint8_t r[32], int g, uint8_t *m, size_t n)
{
	static const uint8_t zero[32];
	uint8_t h[32], ha[32], t[32];
	ed_test_torsion(t, g);
	if (memcmp(r, zero, 32)) {
		uint8_t rb[32];
		crypto_scalarmult_ed25519_base_noclamp(rb, r);
		crypto_core_ed25519_add(sig, rb, t);
	} else {
		memcpy(sig, t, 32);
	}
	int held = -1;
	for (uint32_t c = 0; c < 64; c++) {
		memcpy(m + n - 4, &c, 4);
		ed_test_hram(h, sig, pk2, m, n);
		if (((8 - (h[0] & 7)) * j - g) % 8 == 0) {
			held = 0;
			break;
		}
	}
	crypto_core_ed25519_scalar_mul(ha, h, a);
	crypto_core_ed25519_scalar_add(sig + 32, r, ha);
	return held;
}

/* Whether R == [s]B - [h]A for the signature, computed with libsodium's
 * point arithmetic (A may be of mixed order: [h]A = [h]A0 + [h]T with
 * A = A0 + [j]T8 given as a0_pk and j). The cofactorless equation alone,
 * without the rules on encodings and small order. */
static inline int ed_test_equation_holds(const uint8_t sig[64], const uint8_t a0_pk[32], int j,
					 const uint8_t pk[32], const uint8_t *m, size_t n)
{
	uint8_t h[32], sb[32], ha[32], ht[32], hA[32], diff[32];
	ed_test_hram(h, sig, pk, m, n);
	if (crypto_scalarmult_ed25519_base_noclamp(sb, sig + 32) ||
	    crypto_scalarmult_ed25519_noclamp(ha, h, a0_pk))
		return 0;
	ed_test_torsion(ht, (int)(h[0] & 7) * j);
	crypto_core_ed25519_add(hA, ha, ht);
	crypto_core_ed25519_sub(diff, sb, hA);
	return !memcmp(diff, sig, 32);
}

/* What an unpatched libsodium 1.0.18's crypto_core_ed25519_is_valid_point
 * answers: it asks only whether [L]P has x = 0, so a point of prime order
 * plus the point of order 2 passes (CVE-2025-69277). For the self-test's
 * hook; counts its calls. */
static int ed_test_unpatched_calls;
static inline int ed_test_unpatched_is_valid_point(const unsigned char *p)
{
	uint8_t t2[32], q[32];
	ed_test_unpatched_calls++;
	if (crypto_core_ed25519_is_valid_point(p))
		return 1;
	ed_test_torsion(t2, 4);
	return !crypto_core_ed25519_sub(q, p, t2) && crypto_core_ed25519_is_valid_point(q);
}

#endif
