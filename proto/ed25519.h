/* Ed25519 verification against a fixed, trusted public key.
 *
 * A node accepts signatures from a handful of trusted keys only (the
 * registry's and those in its config), millions of times each. Verifying
 * R == [s]B - [h]A with a general double-scalar multiplication spends most
 * of its time doubling; with both B and A fixed, tables of the multiples
 * of each, at every radix-256 position, turn each scalar multiplication
 * into at most 32 mixed additions and no doublings. The table costs about
 * 480 KiB and about 3 ms per key, once.
 *
 * The accepted set is exactly crypto_sign_verify_detached's (libsodium
 * 1.0.18, default build): s must be canonical (s < L); the key must pass
 * crypto_core_ed25519_is_valid_point, which puts A in the prime-order
 * subgroup, so [s]B - [h]A is either of prime order or the identity, and
 * the identity is the only point libsodium's small-order list for R can
 * still match; the recomputed R is encoded canonically and compared byte
 * for byte with the signature's R. tests/test_ed25519.c and
 * tests/fuzz/fuzz_sig.c check the two verifiers against each other. */
#ifndef PITH_ED25519_H
#define PITH_ED25519_H

#include <stddef.h>
#include <stdint.h>

typedef struct pith_ed_table pith_ed_table_t;

/* Builds the tables for public key pk. Returns 0, PITH_EINVAL when pk is
 * not a valid point of the prime-order subgroup (such a key is left to
 * libsodium), or PITH_ENOMEM. */
int pith_ed_table_new(const uint8_t pk[static 32], pith_ed_table_t **out);
void pith_ed_table_free_(pith_ed_table_t *t);
#define pith_ed_table_free(t) do { pith_ed_table_free_(t); (t) = NULL; } while (0)

/* 0 when sig is a valid signature of m under the table's key, -1 if not.
 * Thread-safe: the tables are read-only once built. */
int pith_ed_verify(const pith_ed_table_t *t, const uint8_t sig[static 64],
		   const uint8_t *m, size_t mlen);

/* One signature of a batch for pith_ed_verify_many. */
typedef struct pith_ed_item {
	const pith_ed_table_t *t;
	const uint8_t *sig; /* 64 bytes */
	const uint8_t *m;
	size_t mlen;
	int ok;             /* out: 1 when valid */
} pith_ed_item_t;

#define PITH_ED_MANY 32 /* signatures sharing one inversion */

/* pith_ed_verify for each item, with the same answers; the final step of
 * each, turning the computed point into bytes, shares one field inversion
 * among up to PITH_ED_MANY items (Montgomery's trick), about a quarter of
 * a verification saved per signature. Not batch verification: every
 * signature is checked on its own equation, and a bad one fails alone. */
void pith_ed_verify_many(pith_ed_item_t *items, size_t n);

/* [s]B for a scalar s < 2^253, encoded (tests compare it with libsodium). */
void pith_ed_base_mul(uint8_t out[static 32], const uint8_t s[static 32]);

#endif
