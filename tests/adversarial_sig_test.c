/* Under attack, case 11 (issue 16): the fixed-key verifier must not lean
 * on libsodium's patch level.
 *
 * 1. A trusted key of mixed order (A + T2, the key CVE-2025-69277 lets an
 *    unpatched crypto_core_ed25519_is_valid_point through, and A + T8),
 *    and signatures whose R is of small order and whose equation
 *    R == [s]B - [h]A' holds (checked with libsodium's own arithmetic):
 *    the old rule (reject only the identity R) accepted those whose R is
 *    not the identity; libsodium rejects them all by its small-order list;
 *    our verifier, alone and in a batch, must reject them all too, and the
 *    trust store must refuse the key at load, saying why.
 * 2. A simulated unpatched libsodium (pith_ed_set_valid_point_fn: takes
 *    P + T2 for every valid P): the self-test fails, no tables are built,
 *    the trust store says so (the note pithd logs as a warning and pithctl
 *    prints), and signatures are checked by libsodium with the same
 *    answers. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>

#include "ed25519.h"
#include "ed25519_test.h"
#include "test_util.h"
#include "trust.h"

static void make_key(uint8_t seed[32], uint8_t pk[32], uint8_t a[32], uint8_t fill)
{
	uint8_t sk[64];
	memset(seed, fill, 32);
	crypto_sign_seed_keypair(pk, sk, seed);
	ed_test_secret(a, seed);
}

TEST(mixed_key_small_r, "rejects small-order R under a mixed-order key, as libsodium does, where the old rule accepted")
{
	static const int js[2] = {4, 1}; /* A + T2, A + T8 */
	for (int kk = 0; kk < 2; kk++) {
		uint8_t seed[32], pk[32], a[32], pk2[32];
		make_key(seed, pk, a, (uint8_t)(0x31 + kk));
		ed_test_mixed_key(pk2, pk, js[kk]);
		/* what an unpatched is_valid_point says of it */
		printf("# key A + [%d]T8: unpatched is_valid_point %s it, this libsodium %s it\n",
		       js[kk], ed_test_unpatched_is_valid_point(pk2) ? "takes" : "refuses",
		       crypto_core_ed25519_is_valid_point(pk2) ? "takes" : "refuses");
		pith_ed_table_t *tab = NULL;
		CHECK(pith_ed_table_new(pk2, &tab) == 0);
		if (!tab)
			return;
		int n = 0, held = 0, sodium_acc = 0, ours_acc = 0, batch_acc = 0, old_rule_acc = 0;
		for (int g = 0; g < 8; g++) {
			for (int i = 0; i < 8; i++) {
				uint8_t m[40], sig[64], r[32] = {0};
				memset(m, 0, sizeof(m));
				m[0] = (uint8_t)g, m[1] = (uint8_t)i, m[2] = (uint8_t)kk;
				if (ed_test_sign_torsion(sig, a, pk2, js[kk], r, g, m, sizeof(m)))
					continue; /* T2: only g = 0 and 4 are reachable */
				n++;
				int eq = ed_test_equation_holds(sig, pk, js[kk], pk2, m, sizeof(m));
				held += eq;
				CHECK(pith_ed_has_small_order(sig));
				sodium_acc += crypto_sign_verify_detached(sig, m, sizeof(m), pk2) == 0;
				ours_acc += pith_ed_verify(tab, sig, m, sizeof(m)) == 0;
				pith_ed_item_t it[1] = {{tab, sig, m, sizeof(m), -1}};
				pith_ed_verify_many(it, 1);
				batch_acc += it[0].ok;
				/* the old rule: s < L, R not the identity, equation */
				static const uint8_t identity[32] = {1};
				old_rule_acc += eq && memcmp(sig, identity, 32) != 0;
			}
		}
		printf("# key A + [%d]T8: %d small-order-R signatures whose equation holds (%d checked): "
		       "libsodium accepts %d, ours %d (batch %d); the old rule would have accepted %d\n",
		       js[kk], held, n, sodium_acc, ours_acc, batch_acc, old_rule_acc);
		CHECK(n >= 16 && held == n);
		CHECK(sodium_acc == 0 && ours_acc == 0 && batch_acc == 0);
		CHECK(old_rule_acc > 0);
		pith_ed_table_free(tab);

		/* and the trust store refuses the key, loudly */
		pith_trust_t *t = pith_trust_new();
		pith_key_t key = {0};
		memcpy(key.pk, pk2, 32);
		snprintf(key.key_id, sizeof(key.key_id), "mixed");
		pith_key_fingerprint(key.pk, key.fp);
		key.rotates_at_us = PITH_NO_ROTATION;
		pith_err_t err = {0};
		CHECK(pith_trust_key_check(&key, &err) == PITH_EINVAL);
		CHECK(strstr(err.msg, "mixed order") != NULL);
		printf("# trust load: %s\n", err.msg);
		CHECK(pith_trust_add(t, &key) == PITH_EINVAL);
		CHECK(pith_trust_count(t) == 1);
		pith_trust_free(t);
	}
}

TEST(selftest_fallback, "falls back to libsodium, and says so, when is_valid_point takes a mixed-order point")
{
	const char *why = NULL;
	pith_ed_set_valid_point_fn(ed_test_unpatched_is_valid_point);
	ed_test_unpatched_calls = 0;
	CHECK(pith_ed_selftest(&why) == PITH_ENOTSUP);
	CHECK(ed_test_unpatched_calls > 0);
	CHECK(why && strstr(why, "B + T2"));
	uint8_t seed[32], pk[32], a[32];
	make_key(seed, pk, a, 0x44);
	pith_ed_table_t *tab = NULL;
	CHECK(pith_ed_table_new(pk, &tab) == PITH_ENOTSUP && tab == NULL);

	pith_trust_t *t = pith_trust_new();
	const char *note = t ? pith_trust_fixed_key_note(t) : NULL;
	CHECK(note && note == why);
	/* what pithd logs (node.c, trust_load) */
	printf("# pithd would log: signature self-test failed: %s; no fixed-key tables, every "
	       "signature is verified by libsodium (docs/signatures.md)\n", note ? note : "(none)");
	pith_key_t key = {0};
	memcpy(key.pk, pk, 32);
	snprintf(key.key_id, sizeof(key.key_id), "honest");
	pith_key_fingerprint(key.pk, key.fp);
	key.rotates_at_us = PITH_NO_ROTATION;
	CHECK(t && pith_trust_add(t, &key) == 0);
	const pith_key_t *k = t ? pith_trust_at(t, 1) : NULL;
	CHECK(k && k->ed == NULL && pith_trust_at(t, 0)->ed == NULL);
	/* an honest signature passes, a small-order-R one fails: libsodium's answers */
	uint8_t sk[64], pk_[32], digest[32], sig[64];
	char b64[89];
	crypto_sign_seed_keypair(pk_, sk, seed);
	memset(digest, 7, 32);
	pith_sig_sign_b64(sk, digest, b64);
	CHECK(k && pith_sig_verify_b64(k, digest, b64) == 0);
	ed_test_torsion(sig, 4);
	memset(sig + 32, 0, 32);
	sodium_bin2base64(b64, sizeof(b64), sig, 64, sodium_base64_VARIANT_ORIGINAL);
	CHECK(k && pith_sig_verify_b64(k, digest, b64) == PITH_EBADSIG);
	pith_trust_free(t);

	/* the real library again: tables again */
	pith_ed_set_valid_point_fn(NULL);
	CHECK(pith_ed_selftest(NULL) == 0 || !getenv("PITH_EXPECT_PATCHED"));
	t = pith_trust_new();
	CHECK(t && (pith_trust_at(t, 0)->ed != NULL) == (pith_ed_selftest(NULL) == 0));
	pith_trust_free(t);
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	uint8_t seed[32], pk[32], a[32];
	make_key(seed, pk, a, 0x11);
	pith_ed_table_t *probe = NULL;
	if (pith_ed_table_new(pk, &probe) && !pith_ed_selftest(NULL)) {
		printf("1..0 # skip: no fixed-key tables on this target\n");
		return 0;
	}
	pith_ed_table_free(probe);
	RUN(mixed_key_small_r);
	RUN(selftest_fallback);
	return test_done();
}
