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

#endif
