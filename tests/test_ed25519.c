/* The fixed-key verifier (proto/ed25519.c) against libsodium: every
 * signature, valid or crafted, must get the same answer from both. */
#include <sodium.h>
#include <stdlib.h>

#include "ed25519.h"
#include "ed25519_test.h"
#include "test_util.h"
#include "trust.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)rng_state;
}

static void rnd_bytes(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

typedef struct {
	uint8_t seed[32], pk[32], sk[64];
	pith_ed_table_t *tab;
} key_t_;

static void key_make(key_t_ *k)
{
	rnd_bytes(k->seed, 32);
	crypto_sign_seed_keypair(k->pk, k->sk, k->seed);
	k->tab = NULL;
	pith_ed_table_new(k->pk, &k->tab);
}

/* counts disagreements; *accepted counts signatures both accepted */
static int agree(const key_t_ *k, const uint8_t sig[64], const uint8_t *m, size_t n,
		 int *accepted)
{
	int want = crypto_sign_verify_detached(sig, m, n, k->pk) == 0;
	int got = pith_ed_verify(k->tab, sig, m, n) == 0;
	if (want != got) {
		fprintf(stderr, "  libsodium %s, pith_ed_verify %s\n",
			want ? "accepts" : "rejects", got ? "accepts" : "rejects");
		return 1;
	}
	if (accepted)
		*accepted += got;
	return 0;
}

TEST(base_mul_matches, "multiplies the base point exactly as libsodium does")
{
	for (int i = 0; i < 500; i++) {
		uint8_t s[32], want[32], got[32];
		rnd_bytes(s, 32);
		s[31] &= 0x0f; /* below 2^252 < L */
		if (i == 0)
			memset(s, 0, 31), s[0] = 1;
		if (crypto_scalarmult_ed25519_base_noclamp(want, s))
			continue; /* zero scalar */
		pith_ed_base_mul(got, s);
		CHECK(!memcmp(want, got, 32));
	}
}

TEST(valid_signatures, "accepts every valid signature libsodium accepts")
{
	key_t_ k;
	int bad = 0, acc = 0;
	for (int i = 0; i < 20; i++) {
		key_make(&k);
		CHECK(k.tab != NULL);
		if (!k.tab)
			return;
		for (int j = 0; j < 50; j++) {
			uint8_t m[100], sig[64];
			size_t n = rnd() % sizeof(m);
			rnd_bytes(m, n);
			crypto_sign_detached(sig, NULL, m, n, k.sk);
			bad += agree(&k, sig, m, n, &acc);
		}
		pith_ed_table_free(k.tab);
	}
	CHECK(bad == 0);
	CHECK(acc == 1000);
}

TEST(mutations, "rejects each one-bit change of signature or message, as libsodium does")
{
	key_t_ k;
	key_make(&k);
	int bad = 0, acc = 0;
	for (int i = 0; i < 2000; i++) {
		uint8_t m[32], sig[64];
		rnd_bytes(m, 32);
		crypto_sign_detached(sig, NULL, m, 32, k.sk);
		int bit = (int)(rnd() % (96 * 8));
		if (bit < 512)
			sig[bit / 8] ^= (uint8_t)(1 << (bit % 8));
		else
			m[(bit - 512) / 8] ^= (uint8_t)(1 << (bit % 8));
		bad += agree(&k, sig, m, 32, &acc);
	}
	CHECK(bad == 0);
	CHECK(acc == 0);
	pith_ed_table_free(k.tab);
}

TEST(crafted, "treats non-canonical s, identity R and non-canonical R as libsodium does")
{
	key_t_ k;
	key_make(&k);
	uint8_t a[32], m[32], sig[64], h[32];
	ed_test_secret(a, k.seed);
	rnd_bytes(m, 32);
	int bad = 0, acc = 0;

	/* s + L: the same point, a non-canonical scalar */
	crypto_sign_detached(sig, NULL, m, 32, k.sk);
	ed_test_add_l(sig + 32);
	bad += agree(&k, sig, m, 32, &acc);
	/* s == L exactly, and s == 0 */
	memcpy(sig + 32, ed_test_L, 32);
	bad += agree(&k, sig, m, 32, &acc);
	memset(sig + 32, 0, 32);
	bad += agree(&k, sig, m, 32, &acc);

	/* R = identity with s = h a, so [s]B - [h]A really is the identity */
	memset(sig, 0, 32);
	sig[0] = 1;
	ed_test_hram(h, sig, k.pk, m, 32);
	crypto_core_ed25519_scalar_mul(sig + 32, h, a);
	bad += agree(&k, sig, m, 32, &acc);

	/* R = [r]B for a chosen r, and its encodings with the sign bit flipped
	 * or y + p where y + p < 2^255 */
	for (int i = 0; i < 200; i++) {
		uint8_t r[32], ha[32];
		rnd_bytes(r, 32);
		r[31] &= 0x0f;
		if (i == 0) {
			memset(r, 0, 32);
			r[0] = 1;
		}
		crypto_scalarmult_ed25519_base_noclamp(sig, r);
		if (i % 3 == 1)
			sig[31] ^= 0x80;
		ed_test_hram(h, sig, k.pk, m, 32);
		crypto_core_ed25519_scalar_mul(ha, h, a);
		crypto_core_ed25519_scalar_add(sig + 32, r, ha);
		bad += agree(&k, sig, m, 32, &acc);
	}
	/* small-order and non-canonical R encodings with any s */
	static const uint8_t ys[][2] = {{0, 0}, {1, 0}, {0xec, 0x7f}, {0xed, 0x7f}, {0xee, 0x7f}};
	for (size_t i = 0; i < sizeof(ys) / sizeof(ys[0]); i++) {
		for (int sign = 0; sign < 2; sign++) {
			memset(sig, ys[i][0] >= 0xec ? 0xff : 0, 32);
			sig[0] = ys[i][0];
			sig[31] = (uint8_t)(ys[i][1] | (sign ? 0x80 : 0));
			if (ys[i][0] < 0xec)
				sig[31] = (uint8_t)(sign ? 0x80 : 0);
			rnd_bytes(sig + 32, 32);
			sig[63] &= 0x0f;
			bad += agree(&k, sig, m, 32, &acc);
		}
	}
	CHECK(bad == 0);
	CHECK(acc > 100); /* the honest [r]B ones */
	pith_ed_table_free(k.tab);
}

TEST(many, "verifies a batch with one inversion, each signature as libsodium alone would")
{
	enum { N = 100 };
	static key_t_ keys[3];
	static uint8_t msgs[N][40], sigs[N][64];
	pith_ed_item_t items[N];
	int want[N];
	for (int k = 0; k < 3; k++)
		key_make(&keys[k]);
	for (int i = 0; i < N; i++) {
		key_t_ *k = &keys[i % 3];
		rnd_bytes(msgs[i], 40);
		crypto_sign_detached(sigs[i], NULL, msgs[i], 40, k->sk);
		if (i % 7 == 3)
			sigs[i][rnd() % 64] ^= (uint8_t)(1 << (rnd() % 8)); /* broken */
		if (i % 11 == 5)
			memset(sigs[i] + 32, 0xff, 32); /* s not canonical */
		want[i] = crypto_sign_verify_detached(sigs[i], msgs[i], 40, k->pk) == 0;
		items[i] = (pith_ed_item_t){k->tab, sigs[i], msgs[i], 40, -1};
	}
	/* sizes around the batch of PITH_ED_MANY */
	size_t cuts[] = {1, 2, PITH_ED_MANY - 1, PITH_ED_MANY, PITH_ED_MANY + 1, N};
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		pith_ed_verify_many(items, cuts[c]);
		int bad = 0, valid = 0;
		for (size_t i = 0; i < cuts[c]; i++) {
			bad += items[i].ok != want[i];
			valid += want[i];
		}
		CHECK(bad == 0);
		if (cuts[c] == N)
			CHECK(valid > 60 && valid < N);
	}
	for (int k = 0; k < 3; k++)
		pith_ed_table_free(keys[k].tab);
}

TEST(bad_keys, "builds no table for a key outside the prime-order subgroup")
{
	uint8_t pk[32] = {1}; /* the identity */
	pith_ed_table_t *t = NULL;
	CHECK(pith_ed_table_new(pk, &t) != 0);
	CHECK(t == NULL);
	memset(pk, 0xff, 32); /* not canonical */
	CHECK(pith_ed_table_new(pk, &t) != 0);
	CHECK(t == NULL);
}

TEST(trust_store_tables, "gives trusted keys tables unless PITH_ED25519=libsodium")
{
	pith_trust_t *t = pith_trust_new();
	const pith_key_t *reg = pith_trust_at(t, 0);
	CHECK(reg && reg->ed != NULL);
	pith_trust_free(t);
	setenv("PITH_ED25519", "libsodium", 1);
	t = pith_trust_new();
	reg = pith_trust_at(t, 0);
	CHECK(reg && reg->ed == NULL);
	pith_trust_free(t);
	unsetenv("PITH_ED25519");
}

int main(void)
{
	if (sodium_init() < 0)
		return 1;
	key_t_ probe;
	key_make(&probe);
	if (!probe.tab) {
		printf("1..0 # skip: no fixed-key tables on this target (no 128-bit integers)\n");
		return 0;
	}
	pith_ed_table_free(probe.tab);
	RUN(base_mul_matches);
	RUN(valid_signatures);
	RUN(mutations);
	RUN(crafted);
	RUN(many);
	RUN(bad_keys);
	RUN(trust_store_tables);
	return test_done();
}
