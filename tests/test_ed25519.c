/* The fixed-key verifier (proto/ed25519.c) against libsodium: every
 * signature, valid or crafted, must get the same answer from both. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ed25519.h"
#include "ed25519_test.h"
#include "json.h"
#include "test_util.h"
#include "trust.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t rnd(void)
{
	return test_xorshift(&rng_state);
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
	/* and in a batch of three: summed in lanes where the CPU has them */
	pith_ed_item_t it[3];
	for (int i = 0; i < 3; i++)
		it[i] = (pith_ed_item_t){k->tab, sig, m, n, -1};
	pith_ed_verify_many(it, 3);
	if (it[0].ok != got || it[1].ok != got || it[2].ok != got)
		got = !want;
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
	/* sizes around the batch of PITH_ED_MANY and the lanes' eight, each
	 * summed one at a time and (where the CPU has AVX-512 IFMA) in lanes */
	size_t cuts[] = {1, 2, 7, 8, 9, 17, PITH_ED_MANY - 1, PITH_ED_MANY, PITH_ED_MANY + 1, N};
	int lanes = pith_ed_lanes(-1);
	for (size_t c = 0; c < 2 * sizeof(cuts) / sizeof(cuts[0]); c++) {
		pith_ed_lanes(c % 2);
		pith_ed_verify_many(items, cuts[c / 2]);
		int bad = 0, valid = 0;
		for (size_t i = 0; i < cuts[c / 2]; i++) {
			bad += items[i].ok != want[i];
			valid += want[i];
		}
		CHECK(bad == 0);
		if (cuts[c / 2] == N)
			CHECK(valid > 60 && valid < N);
	}
	pith_ed_lanes(lanes);
	for (int k = 0; k < 3; k++)
		pith_ed_table_free(keys[k].tab);
}

TEST(lanes_agree, "sums signatures in AVX-512 lanes with libsodium's answer for each, in batches of every size")
{
	enum { N = 3000, K = 5 };
	static key_t_ keys[K];
	static uint8_t msgs[N][64], sigs[N][64];
	static size_t lens[N];
	static pith_ed_item_t items[N];
	static int want[N];
	int lanes = pith_ed_lanes(-1);
	printf("# lanes: %s\n", lanes ? "on (this CPU has AVX-512 IFMA)" : "off (no AVX-512 IFMA here; summed one at a time)");
	for (int k = 0; k < K; k++)
		key_make(&keys[k]);
	int valid = 0;
	for (int i = 0; i < N; i++) {
		key_t_ *k = &keys[rnd() % K];
		lens[i] = rnd() % 65;
		rnd_bytes(msgs[i], lens[i]);
		crypto_sign_detached(sigs[i], NULL, msgs[i], lens[i], k->sk);
		switch (rnd() % 8) {
		case 0: /* one bit of R or s */
			sigs[i][rnd() % 64] ^= (uint8_t)(1 << (rnd() % 8));
			break;
		case 1: /* another key's signature */
			crypto_sign_detached(sigs[i], NULL, msgs[i], lens[i], keys[(k - keys + 1) % K].sk);
			break;
		case 2: /* s + L: not canonical */
			sigs[i][63] |= 0xf0;
			break;
		default:
			break;
		}
		want[i] = crypto_sign_verify_detached(sigs[i], msgs[i], lens[i], k->pk) == 0;
		valid += want[i];
		items[i] = (pith_ed_item_t){k->tab, sigs[i], msgs[i], lens[i], -1};
	}
	int bad = 0;
	for (int way = 0; way < 2; way++) {
		pith_ed_lanes(way);
		for (size_t i = 0; i < N;) {
			size_t b = 1 + rnd() % (2 * PITH_ED_MANY);
			if (b > N - i)
				b = N - i;
			pith_ed_verify_many(items + i, b);
			for (size_t j = i; j < i + b; j++)
				bad += items[j].ok != want[j];
			i += b;
		}
	}
	pith_ed_lanes(lanes);
	CHECK(bad == 0);
	CHECK(valid > N / 2 && valid < N);
	for (int k = 0; k < K; k++)
		pith_ed_table_free(keys[k].tab);
}

TEST(bad_keys, "builds no table for a key libsodium's verifier refuses")
{
	uint8_t pk[32] = {1}; /* the identity */
	pith_ed_table_t *t = NULL;
	CHECK(pith_ed_table_new(pk, &t) == PITH_EINVAL);
	CHECK(t == NULL);
	memset(pk, 0xff, 32); /* not canonical */
	CHECK(pith_ed_table_new(pk, &t) == PITH_EINVAL);
	CHECK(t == NULL);
}

/* the 14 encodings on libsodium's list: 7 entries, each with either sign bit */
static void small_order_enc(uint8_t out[32], int i)
{
	static const uint8_t ys[7][2] = {{0, 0}, {1, 0}, {0x26, 0x05}, {0xc7, 0x7a},
					 {0xec, 0x7f}, {0xed, 0x7f}, {0xee, 0x7f}};
	int e = i / 2;
	if (e == 2 || e == 3) {
		ed_test_torsion(out, e == 2 ? 1 : 7); /* the two x-negated order-8 points */
		if ((out[0] == 0x26) != (e == 2))
			ed_test_torsion(out, e == 2 ? 7 : 1);
		if ((out[0] == 0x26) != (e == 2))
			ed_test_torsion(out, e == 2 ? 3 : 5);
		if ((out[0] == 0x26) != (e == 2))
			ed_test_torsion(out, e == 2 ? 5 : 3);
		out[31] &= 0x7f;
	} else {
		memset(out, ys[e][0] >= 0xec ? 0xff : 0, 32);
		out[0] = ys[e][0];
		out[31] = ys[e][1];
	}
	if (i & 1)
		out[31] |= 0x80;
}

TEST(small_order_list, "knows libsodium's 14 small-order encodings and no others among the torsion")
{
	int listed = 0;
	for (int i = 0; i < 14; i++) {
		uint8_t e[32];
		small_order_enc(e, i);
		listed += pith_ed_has_small_order(e);
	}
	CHECK(listed == 14);
	/* all eight torsion points are listed; B and random points are not */
	for (int j = 0; j < 8; j++) {
		uint8_t t[32];
		ed_test_torsion(t, j);
		CHECK(pith_ed_has_small_order(t));
	}
	for (int i = 0; i < 1000; i++) {
		uint8_t r[32], p[32];
		rnd_bytes(r, 32);
		r[31] &= 0x0f;
		if (!crypto_scalarmult_ed25519_base_noclamp(p, r))
			CHECK(!pith_ed_has_small_order(p));
	}
}

TEST(small_order_keys, "builds no table for a small-order key, refuses to trust it, and libsodium rejects all")
{
	for (int i = 0; i < 14; i++) {
		uint8_t pk[32], m[32], sig[64];
		small_order_enc(pk, i);
		pith_ed_table_t *t = NULL;
		const char *why = NULL;
		CHECK(pith_ed_table_new(pk, &t) == PITH_EINVAL);
		CHECK(t == NULL);
		CHECK(pith_ed_key_check(pk, &why) == PITH_EINVAL);
		CHECK(why != NULL);
		/* the forgery a small-order key allows: R small-order, s = 0 */
		rnd_bytes(m, 32);
		for (int j = 0; j < 8; j++) {
			ed_test_torsion(sig, j);
			memset(sig + 32, 0, 32);
			CHECK(crypto_sign_verify_detached(sig, m, 32, pk) != 0);
		}
	}
}

TEST(mixed_keys, "agrees with libsodium under keys of mixed order, small-order R included")
{
	int bad = 0, acc = 0, held = 0, so_r = 0;
	for (int kk = 0; kk < 6; kk++) {
		static const int js[6] = {4, 2, 6, 1, 3, 7}; /* T of order 2, 4, 4, 8, 8, 8 */
		key_t_ k;
		uint8_t a[32], pk2[32];
		key_make(&k);
		pith_ed_table_free(k.tab);
		ed_test_secret(a, k.seed);
		ed_test_mixed_key(pk2, k.pk, js[kk]);
		key_t_ mk = k;
		memcpy(mk.pk, pk2, 32);
		const char *why = NULL;
		CHECK(pith_ed_key_check(pk2, &why) == PITH_EINVAL);
		CHECK(why && strstr(why, "mixed order"));
		CHECK(!crypto_core_ed25519_is_valid_point(pk2) || pith_ed_selftest(NULL));
		CHECK(pith_ed_table_new(pk2, &mk.tab) == 0);
		if (!mk.tab)
			continue;
		for (int i = 0; i < 120; i++) {
			uint8_t m[36], sig[64], r[32] = {0};
			rnd_bytes(m, sizeof(m));
			int g = (int)(rnd() % 8);
			if (i % 2) { /* R = [r]B + [g]T8, mixed order unless g = 0 */
				rnd_bytes(r, 32);
				r[31] &= 0x0f;
			}
			int eq = ed_test_sign_torsion(sig, a, pk2, js[kk], r, g, m, sizeof(m)) == 0;
			if (i % 2 == 0 && eq) {
				so_r++; /* small-order R and the equation holds */
				CHECK(ed_test_equation_holds(sig, k.pk, js[kk], pk2, m, sizeof(m)));
			}
			held += eq;
			bad += agree(&mk, sig, m, sizeof(m), &acc);
			if (i % 3 == 0) { /* R's sign bit flipped */
				sig[31] ^= 0x80;
				bad += agree(&mk, sig, m, sizeof(m), &acc);
			}
			if (i % 5 == 0) { /* an honest libsodium signature for A' */
				uint8_t sk2[64];
				memcpy(sk2, k.seed, 32);
				memcpy(sk2 + 32, pk2, 32);
				crypto_sign_detached(sig, NULL, m, sizeof(m), sk2);
				bad += agree(&mk, sig, m, sizeof(m), &acc);
			}
		}
		pith_ed_table_free(mk.tab);
	}
	printf("# mixed-order keys: %d signatures whose equation holds, %d of them with a "
	       "small-order R; %d accepted by both\n", held, so_r, acc);
	CHECK(bad == 0);
	CHECK(so_r > 50);
	CHECK(acc > 50); /* the mixed-order R ones whose equation holds */
}

TEST(key_check, "trusts exactly the keys a patched crypto_core_ed25519_is_valid_point takes")
{
	int bad = 0, took = 0;
	for (int i = 0; i < 3000; i++) {
		uint8_t pk[32], seed[32], sk[64];
		if (i % 3 == 0) { /* an honest key */
			rnd_bytes(seed, 32);
			crypto_sign_seed_keypair(pk, sk, seed);
		} else if (i % 3 == 1) { /* honest plus torsion */
			rnd_bytes(seed, 32);
			crypto_sign_seed_keypair(pk, sk, seed);
			ed_test_mixed_key(pk, pk, (int)(rnd() % 8));
		} else { /* any bytes (about half are points) */
			rnd_bytes(pk, 32);
			if (i % 30 == 2)
				memset(pk + 1, 0xff, 30), pk[0] |= 0xe0, pk[31] |= 0x7f;
		}
		int ours = pith_ed_key_check(pk, NULL) == 0;
		/* a simulated unpatched libsodium would differ: compare with the
		 * real one only when it passed the self-test */
		int theirs = crypto_core_ed25519_is_valid_point(pk);
		if (!pith_ed_selftest(NULL))
			bad += ours != theirs;
		took += ours;
	}
	CHECK(bad == 0);
	CHECK(took > 1000 && took < 2000);
}

/* libsodium's answer for a signature string, as pith_sig_check_prepare
 * gave it before it decoded on its own, but for bytes from 0x80 up: its
 * decoder reads each as '/', RFC 4648 (and docs/merge.md, V-SIGNATURE)
 * refuses them */
static int sodium_sig_b64(const char *s, uint8_t out[64])
{
	size_t n = strlen(s), len = 0;
	const char *end = NULL;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] >= 0x80)
			return 0;
	return n == 88 &&
	       !sodium_base642bin(out, 64, s, n, NULL, &len, &end, sodium_base64_VARIANT_ORIGINAL) &&
	       len == 64 && end == s + n;
}

static int same_b64_answer(const char *s)
{
	uint8_t want[64], got[64] = {0};
	int sodium = sodium_sig_b64(s, want);
	pith_sig_check_t c;
	int ours = pith_sig_check_prepare(&c, NULL, (const uint8_t[32]){0}, s) == 0;
	if (ours)
		memcpy(got, c.sig, 64);
	if (sodium != ours || (ours && memcmp(got, want, 64))) {
		fprintf(stderr, "  '%s': libsodium %s, ours %s\n", s, sodium ? "accepts" : "rejects",
			ours ? (sodium ? "decodes otherwise" : "accepts") : "rejects");
		return 0;
	}
	return 1;
}

TEST(sig_b64, "decodes a signature's base64 with libsodium's answers, mutated every way, but refuses bytes from 0x80 up")
{
	static const char probes[] = "AQgw/+9zP=-_ \n\\\x80\xff.";
	uint8_t sig[64];
	char s[100];
	int differ = 0, accepted = 0;
	size_t tried = 0;
	for (int round = 0; round < 40; round++) {
		randombytes_buf(sig, 64);
		if (round == 0)
			memset(sig, 0, 64);
		sodium_bin2base64(s, sizeof(s), sig, 64, sodium_base64_VARIANT_ORIGINAL);
		differ += !same_b64_answer(s);
		for (size_t i = 0; i < 88; i++) {
			char keep = s[i];
			for (size_t p = 0; p < sizeof(probes) - 1; p++, tried++) {
				s[i] = probes[p];
				differ += !same_b64_answer(s);
			}
			s[i] = keep;
		}
		/* every character last and next to last: the unused bits, '=' early */
		for (int a = 0; a < 64; a++)
			for (int pos = 84; pos < 86; pos++, tried++) {
				char keep = s[pos];
				s[pos] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[a];
				int ok = same_b64_answer(s);
				differ += !ok;
				uint8_t tmp[64];
				accepted += ok && sodium_sig_b64(s, tmp);
				s[pos] = keep;
			}
		/* shorter and longer */
		char t[100];
		memcpy(t, s, 87);
		t[87] = 0;
		differ += !same_b64_answer(t);
		memcpy(t, s, 88);
		memcpy(t + 88, "=", 2);
		differ += !same_b64_answer(t);
		memcpy(t, s, 86);
		memcpy(t + 86, "A=", 3);
		differ += !same_b64_answer(t);
		differ += !same_b64_answer("");
	}
	CHECK_INT_EQ(differ, 0);
	CHECK(tried > 50000);
	CHECK(accepted > 0); /* some last characters are right */
}

TEST(selftest, "builds no tables when crypto_core_ed25519_is_valid_point takes a mixed-order point")
{
	const char *why = NULL;
	uint8_t b[32], t2[32], bt2[32], one[32] = {1};
	crypto_scalarmult_ed25519_base_noclamp(b, one);
	ed_test_torsion(t2, 4);
	crypto_core_ed25519_add(bt2, b, t2);
	/* the real library: passes exactly when it is patched */
	CHECK((pith_ed_selftest(&why) == 0) == !crypto_core_ed25519_is_valid_point(bt2));
	/* a simulated unpatched one */
	ed_test_unpatched_calls = 0;
	pith_ed_set_valid_point_fn(ed_test_unpatched_is_valid_point);
	CHECK(pith_ed_selftest(&why) == PITH_ENOTSUP);
	CHECK(ed_test_unpatched_calls >= 2);
	CHECK(why && strstr(why, "CVE-2025-69277"));
	key_t_ k;
	key_make(&k);
	CHECK(k.tab == NULL);
	pith_trust_t *t = pith_trust_new();
	CHECK(t && pith_trust_at(t, 0)->ed == NULL);
	CHECK(t && pith_trust_fixed_key_note(t) == why);
	pith_trust_free(t);
	pith_ed_set_valid_point_fn(NULL);
	CHECK(pith_ed_selftest(NULL) == 0);
	t = pith_trust_new();
	CHECK(t && pith_trust_at(t, 0)->ed != NULL && !pith_trust_fixed_key_note(t));
	pith_trust_free(t);
}

TEST(trust_refuses_bad_keys, "refuses to trust small-order, mixed-order and non-canonical keys, saying why")
{
	pith_trust_t *t = pith_trust_new();
	key_t_ k;
	key_make(&k);
	pith_ed_table_free(k.tab);
	pith_key_t key = {0};
	snprintf(key.key_id, sizeof(key.key_id), "bad");
	snprintf(key.fp, sizeof(key.fp), "fp");
	key.rotates_at_us = PITH_NO_ROTATION;
	pith_err_t err = {0};
	struct {
		int kind;
		const char *says;
	} cases[] = {{0, "small order"}, {1, "mixed order"}, {2, "not canonical"}, {3, "not a point"}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].kind == 0)
			small_order_enc(key.pk, 8); /* the point of order 2 */
		else if (cases[i].kind == 1)
			ed_test_mixed_key(key.pk, k.pk, 4);
		else if (cases[i].kind == 2)
			memset(key.pk, 0xff, 32), key.pk[0] = 0xf0, key.pk[31] = 0x7f;
		else
			memset(key.pk, 0, 32), key.pk[0] = 2; /* y = 2: no x */
		memset(&err, 0, sizeof(err));
		CHECK(pith_trust_key_check(&key, &err) == PITH_EINVAL);
		CHECK(strstr(err.msg, cases[i].says) != NULL);
		if (!strstr(err.msg, cases[i].says))
			fprintf(stderr, "  %s\n", err.msg);
		CHECK(pith_trust_add(t, &key) == PITH_EINVAL);
	}
	CHECK(pith_trust_count(t) == 1);
	memcpy(key.pk, k.pk, 32);
	CHECK(pith_trust_key_check(&key, &err) == 0);
	CHECK(pith_trust_add(t, &key) == 0 && pith_trust_count(t) == 2);
	pith_trust_free(t);
}

/* --- the Wycheproof and ed25519-speccheck vectors --- */

typedef struct {
	int n, both_accept, both_reject, differ, short_sig, no_table, trust_refuses, libsodium_vs_expected;
} vec_stats_t;

static int hex_to(uint8_t *out, size_t cap, const char *hex, size_t *n)
{
	size_t len = strlen(hex);
	if (len % 2 || len / 2 > cap)
		return -1;
	for (size_t i = 0; i < len / 2; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	*n = len / 2;
	return 0;
}

/* One vector through both paths: libsodium's crypto_sign_verify_detached,
 * and ours (pith_ed_verify when pk has a table, alone and in a batch; no
 * table means every signature is rejected, as libsodium does for such a
 * key). expected: 1 valid, 0 invalid, -1 not given. */
static void vec_run(vec_stats_t *st, const char *src, long id, const char *pk_hex,
		    const char *msg_hex, const char *sig_hex, int expected)
{
	static uint8_t msg[4096];
	uint8_t pk[32], sig[128];
	size_t pkn = 0, mn = 0, sn = 0;
	st->n++;
	if (hex_to(pk, 32, pk_hex, &pkn) || pkn != 32 || hex_to(msg, sizeof(msg), msg_hex, &mn) ||
	    hex_to(sig, sizeof(sig), sig_hex, &sn)) {
		fprintf(stderr, "  %s %ld: cannot read the vector\n", src, id);
		st->differ++;
		return;
	}
	int sodium, ours;
	if (sn != 64) {
		/* both APIs take exactly 64 bytes; pith_sig_check_prepare
		 * refuses any other length before either runs */
		st->short_sig++;
		sodium = ours = 0;
	} else {
		sodium = crypto_sign_verify_detached(sig, msg, mn, pk) == 0;
		pith_ed_table_t *t = NULL;
		if (pith_ed_table_new(pk, &t) == 0) {
			ours = pith_ed_verify(t, sig, msg, mn) == 0;
			pith_ed_item_t it[3] = {{t, sig, msg, mn, -1}, {t, sig, msg, mn, -1}, {t, sig, msg, mn, -1}};
			pith_ed_verify_many(it, 3); /* three: summed in lanes where the CPU has them */
			if (it[0].ok != ours || it[1].ok != ours || it[2].ok != ours)
				ours = -1;
			pith_ed_table_free(t);
		} else {
			st->no_table++;
			ours = 0;
		}
	}
	st->trust_refuses += pith_ed_key_check(pk, NULL) != 0;
	if (ours != sodium) {
		fprintf(stderr, "  %s %ld: libsodium %s, ours %s\n", src, id,
			sodium ? "accepts" : "rejects", ours > 0 ? "accepts" : ours ? "differs in a batch" : "rejects");
		st->differ++;
	} else if (ours) {
		st->both_accept++;
	} else {
		st->both_reject++;
	}
	if (expected >= 0 && sodium != expected) {
		st->libsodium_vs_expected++;
		fprintf(stderr, "  # %s %ld: libsodium %s, the vector says %s\n", src, id,
			sodium ? "accepts" : "rejects", expected ? "valid" : "invalid");
	}
}

static json_doc_t *vec_load(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/ed25519/%s", PITH_TEST_DATA, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "  cannot open %s\n", path);
		return NULL;
	}
	static uint8_t buf[1 << 20];
	size_t len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	if (json_parse(&doc, buf, len, NULL, &err)) {
		fprintf(stderr, "  %s: %s\n", path, err.msg);
		return NULL;
	}
	return doc;
}

static long json_int_of(const json_value_t *o, const char *key)
{
	const json_value_t *v = json_get_type(o, key, JSON_INT);
	return v ? atol(v->u.str) : -1;
}

static void vec_wycheproof(vec_stats_t *st, const char *name, const char *key_field)
{
	json_doc_t *doc = vec_load(name);
	CHECK(doc != NULL);
	if (!doc)
		return;
	const json_value_t *groups = json_get_type(json_doc_root(doc), "testGroups", JSON_ARRAY);
	CHECK(groups != NULL);
	for (size_t g = 0; groups && g < groups->len; g++) {
		const json_value_t *grp = groups->u.items[g];
		const char *pk = json_get_str(json_get(grp, key_field), "pk");
		const json_value_t *tests = json_get_type(grp, "tests", JSON_ARRAY);
		CHECK(pk && tests);
		for (size_t i = 0; pk && tests && i < tests->len; i++) {
			const json_value_t *tc = tests->u.items[i];
			const char *res = json_get_str(tc, "result");
			int expected = res && !strcmp(res, "valid") ? 1 : res && !strcmp(res, "invalid") ? 0 : -1;
			vec_run(st, name, json_int_of(tc, "tcId"), pk, json_get_str(tc, "msg"),
				json_get_str(tc, "sig"), expected);
		}
	}
	json_doc_free(doc);
}

static void vec_print(const char *what, const vec_stats_t *st)
{
	printf("# %s: %d vectors, both paths accept %d, both reject %d (%d signatures not 64 bytes, "
	       "%d keys without a table), differ %d; trust refuses the key of %d; libsodium "
	       "against the vector's verdict: %d differ\n",
	       what, st->n, st->both_accept, st->both_reject, st->short_sig, st->no_table, st->differ,
	       st->trust_refuses, st->libsodium_vs_expected);
}

TEST(vectors, "agrees with libsodium on every Wycheproof and ed25519-speccheck vector")
{
	vec_stats_t w = {0}, wl = {0}, sc = {0};
	vec_wycheproof(&w, "wycheproof_ed25519_test.json", "publicKey");
	vec_wycheproof(&wl, "wycheproof_eddsa_test_legacy.json", "key");
	json_doc_t *doc = vec_load("ed25519_speccheck_cases.json");
	CHECK(doc && json_is(json_doc_root(doc), JSON_ARRAY));
	const json_value_t *arr = doc ? json_doc_root(doc) : NULL;
	for (size_t i = 0; arr && i < arr->len; i++) {
		const json_value_t *c = arr->u.items[i];
		vec_run(&sc, "speccheck", (long)i, json_get_str(c, "pub_key"), json_get_str(c, "message"),
			json_get_str(c, "signature"), -1);
	}
	json_doc_free(doc);
	vec_print("wycheproof_ed25519_test.json", &w);
	vec_print("wycheproof_eddsa_test_legacy.json", &wl);
	vec_print("ed25519_speccheck_cases.json", &sc);
	CHECK(w.n == 151 && wl.n == 145 && sc.n == 12);
	CHECK(w.differ == 0 && wl.differ == 0 && sc.differ == 0);
	/* libsodium takes what Wycheproof calls valid and refuses the rest */
	CHECK(w.libsodium_vs_expected == 0 && wl.libsodium_vs_expected == 0);
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
	RUN(lanes_agree);
	RUN(bad_keys);
	RUN(small_order_list);
	RUN(small_order_keys);
	RUN(mixed_keys);
	RUN(key_check);
	RUN(sig_b64);
	RUN(selftest);
	RUN(trust_refuses_bad_keys);
	RUN(vectors);
	RUN(trust_store_tables);
	return test_done();
}
