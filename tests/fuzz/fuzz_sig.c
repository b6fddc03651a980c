/* Fuzz target: the fixed-key Ed25519 verifier (proto/ed25519.c) must give
 * crypto_sign_verify_detached's answer for every signature and message,
 * under several keys: an honest one, keys of mixed order (A + T for T of
 * order 2, 4 and 8) and one of small order.
 *
 * The first input byte picks how the signature is made (byte % 4) and
 * the key ((byte / 4) % 5: 0 honest, 1 A + T2, 2 A + T4, 3 A + T8, 4 the
 * small-order key T8, which gets no table and whose every signature
 * libsodium must reject); the rest feeds it:
 *   0  raw: 64 bytes of signature, then the message;
 *   1  honest: the message is signed with the key's seed (and the key's
 *      bytes in the hash), then the next 64 input bytes are XORed into the
 *      signature (all zero: still valid under the honest key);
 *   2  chosen R: R = [r]B from 32 input bytes (or the raw bytes when the
 *      next byte is odd), s = r + h a made valid for that R, then s gets
 *      k L added (k from the input) and R's sign bit may be flipped;
 *   3  torsion R: R = [r]B + [g]T8, or the small-order [g]T8 alone, with
 *      s = r + h a; under a mixed-order key the equation holds for one
 *      message in up to 8, and the message's last 4 bytes are searched
 *      for one where it does.
 * Each signature is also checked inside a batch (pith_ed_verify_many)
 * between two valid ones. */
#include <sodium.h>
#include <stdint.h>
#include <string.h>

#include "../ed25519_test.h"
#include "ed25519.h"
#include "fuzz_check.h"

#define NKEYS 5
static uint8_t seed[32], a[32], base_pk[32], sk[64];
static uint8_t pks[NKEYS][32], sks[NKEYS][64];
static pith_ed_table_t *tabs[NKEYS];
static const int torsion_of[NKEYS] = {0, 4, 2, 1, 0};

static void setup(void)
{
	FUZZ_CHECK(sodium_init() >= 0);
	memset(seed, 0x5a, sizeof(seed));
	crypto_sign_seed_keypair(base_pk, sk, seed);
	ed_test_secret(a, seed);
	for (int k = 0; k < NKEYS; k++) {
		if (k == NKEYS - 1)
			memcpy(pks[k], ed_test_t8, 32);
		else
			ed_test_mixed_key(pks[k], base_pk, torsion_of[k]);
		/* libsodium signs with the key bytes held in sk */
		memcpy(sks[k], seed, 32);
		memcpy(sks[k] + 32, pks[k], 32);
		int rc = pith_ed_table_new(pks[k], &tabs[k]);
		FUZZ_CHECK(k == NKEYS - 1 ? rc != 0 && !tabs[k] : rc == 0);
		FUZZ_CHECK((pith_ed_key_check(pks[k], NULL) == 0) == (k == 0));
	}
}

static void check(int k, const uint8_t sig[64], const uint8_t *m, size_t n)
{
	int want = crypto_sign_verify_detached(sig, m, n, pks[k]) == 0;
	if (!tabs[k]) { /* small-order key: nothing may pass */
		FUZZ_CHECK(!want);
		return;
	}
	int got = pith_ed_verify(tabs[k], sig, m, n) == 0;
	FUZZ_CHECK(want == got);
	/* and in a batch between two valid signatures, which must stay valid */
	static const uint8_t other[3] = {1, 2, 3};
	uint8_t good[64];
	crypto_sign_detached(good, NULL, other, sizeof(other), sk);
	pith_ed_item_t items[3] = {{tabs[0], good, other, sizeof(other), -1},
				   {tabs[k], sig, m, n, -1},
				   {tabs[0], good, other, sizeof(other), -1}};
	pith_ed_verify_many(items, 3);
	FUZZ_CHECK(items[0].ok == 1 && items[2].ok == 1 && items[1].ok == want);
}

static void chosen_r(int key, const uint8_t *d, size_t n)
{
	if (n < 34)
		return;
	uint8_t sig[64], r[32], h[32], ha[32];
	memcpy(r, d, 32);
	r[31] &= 0x0f;
	if (d[32] & 1)
		memcpy(sig, d, 32); /* any bytes as R */
	else if (crypto_scalarmult_ed25519_base_noclamp(sig, r))
		return;
	if (d[32] & 2)
		sig[31] ^= 0x80;
	int k = d[33] & 3; /* add k L: non-canonical for k > 0 when it fits */
	const uint8_t *m = d + 34;
	size_t mlen = n - 34;
	ed_test_hram(h, sig, pks[key], m, mlen);
	crypto_core_ed25519_scalar_mul(ha, h, a);
	crypto_core_ed25519_scalar_add(sig + 32, r, ha);
	for (int j = 0; j < k; j++)
		ed_test_add_l(sig + 32);
	check(key, sig, m, mlen);
}

static void torsion_r(int key, const uint8_t *d, size_t n)
{
	if (n < 33 || n - 33 > 1024)
		return;
	uint8_t sig[64], r[32], m[1024 + 4];
	memcpy(r, d, 32);
	r[31] &= 0x0f;
	if (d[32] & 8)
		memset(r, 0, 32); /* R of small order */
	size_t mlen = n - 33 + 4;
	memcpy(m, d + 33, n - 33);
	memset(m + n - 33, 0, 4);
	ed_test_sign_torsion(sig, a, pks[key], torsion_of[key], r, d[32] & 7, m, mlen);
	if (d[32] & 16)
		sig[31] ^= 0x80;
	check(key, sig, m, mlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!tabs[0])
		setup();
	if (size < 1)
		return 0;
	uint8_t mode = data[0] % 4;
	int key = (data[0] / 4) % NKEYS;
	data++, size--;
	if (mode == 0 && size >= 64) {
		check(key, data, data + 64, size - 64);
	} else if (mode == 1 && size >= 64) {
		uint8_t sig[64];
		crypto_sign_detached(sig, NULL, data + 64, size - 64, sks[key]);
		for (int i = 0; i < 64; i++)
			sig[i] ^= data[i];
		check(key, sig, data + 64, size - 64);
	} else if (mode == 2) {
		chosen_r(key, data, size);
	} else if (mode == 3) {
		torsion_r(key, data, size);
	}
	return 0;
}
