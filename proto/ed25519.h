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
 * 1.0.18, default build), for every key it takes, whatever the patch
 * level: s must be canonical (s < L); R must not be on libsodium's list of
 * small-order encodings (pith_ed_has_small_order); the recomputed
 * [s]B - [h]A is encoded canonically and compared byte for byte with R.
 * Nothing rests on the key being in the prime-order subgroup: a table is
 * built for any key libsodium's verifier takes (canonical, not on the
 * list, on the curve), mixed order included. Which keys may be trusted is
 * a stricter rule, pith_ed_key_check. docs/signatures.md has the
 * argument; tests/test_ed25519.c, tests/adversarial_sig_test.c and
 * tests/fuzz/fuzz_sig.c check the two verifiers against each other, with
 * the Wycheproof and ed25519-speccheck vectors among the inputs. */
#ifndef PITH_ED25519_H
#define PITH_ED25519_H

#include <stddef.h>
#include <stdint.h>

typedef struct pith_ed_table pith_ed_table_t;

/* Builds the tables for public key pk. Returns 0; PITH_EINVAL when
 * crypto_sign_verify_detached would reject every signature under pk (not
 * canonical, of small order, or not on the curve); PITH_ENOTSUP when the
 * self-test failed (pith_ed_selftest: no tables at all, libsodium
 * verifies); PITH_ENOMEM. */
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

/* Whether pith_ed_verify_many sums three or more signatures up to eight
 * at a time with AVX-512 IFMA (same answers, found at run time; on by default
 * where the CPU has it). want 0 turns it off, 1 on where available, -1
 * asks; returns the mode now in force. For tests and benchmarks: not
 * meant to be switched while other threads verify. */
int pith_ed_lanes(int want);

/* 1 when s is one of the 14 encodings on libsodium 1.0.18's small-order
 * list (ge25519_has_small_order: the eight points of small order, y = p
 * and y = p + 1, the sign bit ignored), else 0. crypto_sign_verify_detached
 * rejects such an R, and such a key, whatever else holds. */
int pith_ed_has_small_order(const uint8_t s[static 32]);

/* Whether pk may be a trusted key: 0 when it is canonical (y < p), not of
 * small order, on the curve and in the prime-order subgroup ([L]A is the
 * identity, computed here, not asked of libsodium); else PITH_EINVAL and
 * *why (if why is non-NULL) says which rule failed. This is what
 * crypto_core_ed25519_is_valid_point of a patched libsodium 1.0.18
 * (Debian 1.0.18-1+deb12u1, the fix for CVE-2025-69277) accepts. */
int pith_ed_key_check(const uint8_t pk[static 32], const char **why);

/* The self-test run before the first table is built: the base point B
 * must pass crypto_core_ed25519_is_valid_point and B + T must fail it for
 * torsion points T of order 2, 4 and 8 (an unpatched libsodium 1.0.18
 * takes B + T2), and pith_ed_key_check must say the same. Runs once, the
 * answer is kept. 0 when it passed; PITH_ENOTSUP when not, with *why
 * (static text) saying what failed: then pith_ed_table_new builds no
 * tables and every signature goes to libsodium. */
int pith_ed_selftest(const char **why);

/* Test hook: the self-test asks fn instead of
 * crypto_core_ed25519_is_valid_point (NULL: libsodium's again), and runs
 * again at its next use. Not for concurrent use with table building. */
void pith_ed_set_valid_point_fn(int (*fn)(const unsigned char *p));

/* [s]B for a scalar s < 2^253, encoded (tests compare it with libsodium). */
void pith_ed_base_mul(uint8_t out[static 32], const uint8_t s[static 32]);

#endif
