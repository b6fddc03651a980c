/* Fuzz target: the fixed-key Ed25519 verifier (proto/ed25519.c) must give
 * crypto_sign_verify_detached's answer for every signature and message.
 *
 * The first input byte picks how the signature is made, the rest feeds it:
 *   0  raw: 64 bytes of signature, then the message;
 *   1  honest: the message is signed by the test key, then the next 64
 *      input bytes are XORed into the signature (all zero: still valid);
 *   2  chosen R: R = [r]B from 32 input bytes (or the raw bytes when the
 *      next byte is odd), s = r + h a made valid for that R, then s gets
 *      k L added (k from the input) and R's sign bit may be flipped.
 * Each signature is also checked inside a batch (pith_ed_verify_many)
 * between two valid ones. */
#include <sodium.h>
#include <stdint.h>
#include <string.h>

#include "../ed25519_test.h"
#include "ed25519.h"
#include "fuzz_check.h"

static uint8_t pk[32], sk[64], a[32];
static pith_ed_table_t *tab;

static void setup(void)
{
	uint8_t seed[32];
	FUZZ_CHECK(sodium_init() >= 0);
	memset(seed, 0x5a, sizeof(seed));
	crypto_sign_seed_keypair(pk, sk, seed);
	ed_test_secret(a, seed);
	FUZZ_CHECK(pith_ed_table_new(pk, &tab) == 0);
}

static void check(const uint8_t sig[64], const uint8_t *m, size_t n)
{
	int want = crypto_sign_verify_detached(sig, m, n, pk) == 0;
	int got = pith_ed_verify(tab, sig, m, n) == 0;
	FUZZ_CHECK(want == got);
	/* and in a batch between two valid signatures, which must stay valid */
	static const uint8_t other[3] = {1, 2, 3};
	uint8_t good[64];
	crypto_sign_detached(good, NULL, other, sizeof(other), sk);
	pith_ed_item_t items[3] = {{tab, good, other, sizeof(other), -1},
				   {tab, sig, m, n, -1},
				   {tab, good, other, sizeof(other), -1}};
	pith_ed_verify_many(items, 3);
	FUZZ_CHECK(items[0].ok == 1 && items[2].ok == 1 && items[1].ok == want);
}

static void chosen_r(const uint8_t *d, size_t n)
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
	ed_test_hram(h, sig, pk, m, mlen);
	crypto_core_ed25519_scalar_mul(ha, h, a);
	crypto_core_ed25519_scalar_add(sig + 32, r, ha);
	for (int j = 0; j < k; j++)
		ed_test_add_l(sig + 32);
	check(sig, m, mlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!tab)
		setup();
	if (size < 1)
		return 0;
	uint8_t mode = data[0] % 3;
	data++, size--;
	if (mode == 0 && size >= 64) {
		check(data, data + 64, size - 64);
	} else if (mode == 1 && size >= 64) {
		uint8_t sig[64];
		crypto_sign_detached(sig, NULL, data + 64, size - 64, sk);
		for (int i = 0; i < 64; i++)
			sig[i] ^= data[i];
		check(sig, data + 64, size - 64);
	} else if (mode == 2) {
		chosen_r(data, size);
	}
	return 0;
}
