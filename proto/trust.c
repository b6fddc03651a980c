#include "trust.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pith_trust {
	pith_key_t *keys;
	size_t n, cap;
	const char *fixed_note; /* why keys get no tables; NULL when they do */
};

/* Whether trusted keys get fixed-key tables: yes unless the environment
 * says PITH_ED25519=libsodium (docs/signatures.md) or the verifier's
 * self-test failed; *note says why not. */
static int ed_fixed_enabled(const char **note)
{
	const char *v = getenv("PITH_ED25519");
	const char *why = NULL;
	*note = NULL;
	if (v && !strcmp(v, "libsodium")) {
		*note = "PITH_ED25519=libsodium: every signature is verified by libsodium";
		return 0;
	}
	if (pith_ed_selftest(&why)) {
		*note = why;
		return 0;
	}
	return 1;
}

pith_trust_t *pith_trust_new(void)
{
	if (sodium_init() < 0)
		return NULL;
	pith_trust_t *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	ed_fixed_enabled(&t->fixed_note); /* the self-test runs here, at start */
	pith_key_t k = {0};
	pith_hex_decode(PITH_REGISTRY_KEY_HEX, 64, k.pk, 32);
	snprintf(k.key_id, sizeof(k.key_id), "%s", PITH_REGISTRY_KEY_ID);
	pith_key_fingerprint(k.pk, k.fp);
	k.rotates_at_us = PITH_NO_ROTATION;
	k.is_registry = 1;
	if (pith_trust_add(t, &k)) {
		free(t);
		return NULL;
	}
	return t;
}

void pith_trust_free_(pith_trust_t *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		pith_ed_table_free_((pith_ed_table_t *)t->keys[i].ed);
	free(t->keys);
	free(t);
}

const char *pith_trust_fixed_key_note(const pith_trust_t *t)
{
	return t->fixed_note;
}

int pith_trust_key_check(const pith_key_t *k, pith_err_t *err)
{
	const char *why = NULL;
	if (pith_ed_key_check(k->pk, &why))
		return pith_err_set(err, PITH_EINVAL,
				    "key %s (%s) cannot be trusted: the public key is %s",
				    k->key_id, k->fp, why);
	return 0;
}

int pith_trust_add(pith_trust_t *t, const pith_key_t *k)
{
	if (pith_trust_key_check(k, NULL))
		return PITH_EINVAL;
	for (size_t i = 0; i < t->n; i++) {
		/* one entry per (public key, key id), whatever the order the
		 * files come in (docs/merge.md, K-SET): a registry entry if
		 * any file says so, the earliest rotates_at of them */
		if (!memcmp(t->keys[i].pk, k->pk, 32) && !strcmp(t->keys[i].key_id, k->key_id)) {
			if (k->rotates_at_us < t->keys[i].rotates_at_us)
				t->keys[i].rotates_at_us = k->rotates_at_us;
			t->keys[i].is_registry |= k->is_registry;
			return 0;
		}
	}
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 4;
		pith_key_t *p = realloc(t->keys, nc * sizeof(*p));
		if (!p)
			return PITH_ENOMEM;
		t->keys = p;
		t->cap = nc;
	}
	pith_key_t *nk = &t->keys[t->n++];
	*nk = *k;
	nk->ed = NULL;
	pith_ed_table_t *ed = NULL;
	const char *note;
	if (ed_fixed_enabled(&note) && !pith_ed_table_new(nk->pk, &ed))
		nk->ed = ed;
	return 0;
}

const pith_key_t *pith_trust_find(const pith_trust_t *t, const char *fp)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->keys[i].fp, fp))
			return &t->keys[i];
	return NULL;
}

int pith_trust_fp_is_registry(const pith_trust_t *t, const char *fp)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->keys[i].is_registry && !strcmp(t->keys[i].fp, fp))
			return 1;
	return 0;
}

size_t pith_trust_count(const pith_trust_t *t)
{
	return t->n;
}

const pith_key_t *pith_trust_at(const pith_trust_t *t, size_t i)
{
	return i < t->n ? &t->keys[i] : NULL;
}

int pith_trust_check(const pith_trust_t *t, const char *fp, const char *key_id,
		     int64_t us, const pith_key_t **out, pith_err_t *err)
{
	const pith_key_t *k = NULL;
	/* one fingerprint may be listed under several key ids */
	for (size_t i = 0; i < t->n; i++) {
		if (strcmp(t->keys[i].fp, fp))
			continue;
		k = &t->keys[i];
		if (key_id && !strcmp(k->key_id, key_id))
			break;
		k = NULL;
	}
	if (!k) {
		if (pith_trust_find(t, fp))
			return pith_err_set(err, PITH_EUNTRUSTED,
					    "key_id '%.64s' does not match the trusted key %s",
					    key_id ? key_id : "", fp);
		return pith_err_set(err, PITH_EUNTRUSTED, "key %.40s is not trusted", fp);
	}
	if (us >= k->rotates_at_us)
		return pith_err_set(err, PITH_EROTATED,
				    "key %s (%s) had rotated before the signature was made",
				    k->key_id, fp);
	if (out)
		*out = k;
	return 0;
}

/* A signature's 88 characters of standard padded base64 (docs/merge.md,
 * V-SIGNATURE): 86 characters of the alphabet, "==", and the last
 * character's 4 unused bits zero. libsodium's sodium_base642bin
 * (VARIANT_ORIGINAL, nothing ignored, the whole string, 64 bytes out) gives
 * the same answers but for bytes from 0x80 up, each of which 1.0.18 reads
 * as '/' and RFC 4648 refuses. Not constant-time: a signature is public.
 * libsodium's decoder, which is, was 7% of a validator's time
 * (docs/performance.md at 262f3c4, issue 17, session 33); tests/test_ed25519.c
 * compares the two on mutated signatures. */
static const int8_t b64_val[256] = {
	['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8,
	['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15,
	['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22,
	['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29,
	['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36,
	['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42, ['q'] = 43,
	['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49, ['x'] = 50,
	['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56, ['4'] = 57,
	['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
}; /* value + 1; 0: not in the alphabet */

static int sig_b64_decode(uint8_t out[64], const char *s, size_t n)
{
	if (n != 88 || s[86] != '=' || s[87] != '=')
		return PITH_EINVAL;
	const uint8_t *u = (const uint8_t *)s;
	int bad = 0;
	/* 21 groups of four characters: 63 bytes */
	for (int g = 0; g < 21; g++) {
		int a = b64_val[u[4 * g]], b = b64_val[u[4 * g + 1]], c = b64_val[u[4 * g + 2]],
		    d = b64_val[u[4 * g + 3]];
		bad |= !a | !b | !c | !d;
		uint32_t v = (uint32_t)(a - 1) << 18 | (uint32_t)(b - 1) << 12 |
			     (uint32_t)(c - 1) << 6 | (uint32_t)(d - 1);
		out[3 * g] = (uint8_t)(v >> 16);
		out[3 * g + 1] = (uint8_t)(v >> 8);
		out[3 * g + 2] = (uint8_t)v;
	}
	/* then "xy==": one byte, and y's low 4 bits unused */
	int x = b64_val[u[84]], y = b64_val[u[85]];
	if (bad || !x || !y || ((y - 1) & 0xF))
		return PITH_EINVAL;
	out[63] = (uint8_t)((x - 1) << 2 | (y - 1) >> 4);
	return 0;
}

int pith_sig_check_prepare(pith_sig_check_t *c, const pith_key_t *k,
			   const uint8_t digest[static 32], const char *sig_b64)
{
	c->key = k;
	c->ok = 0;
	memcpy(c->digest, digest, 32);
	return sig_b64_decode(c->sig, sig_b64, strlen(sig_b64));
}

void pith_sig_check_many(pith_sig_check_t *c, size_t n)
{
	pith_ed_item_t items[PITH_ED_MANY];
	pith_sig_check_t *owner[PITH_ED_MANY];
	size_t k = 0;
	for (size_t i = 0; i <= n; i++) {
		/* a full batch, or the end: run what is gathered */
		if (k == PITH_ED_MANY || (i == n && k)) {
			pith_ed_verify_many(items, k);
			for (size_t j = 0; j < k; j++)
				owner[j]->ok = items[j].ok;
			k = 0;
		}
		if (i == n)
			break;
		if (!c[i].key) /* nothing to check (pith_event_parse_deferred) */
			continue;
		if (!c[i].key->ed) {
			c[i].ok = !crypto_sign_verify_detached(c[i].sig, c[i].digest, 32, c[i].key->pk);
			continue;
		}
		items[k] = (pith_ed_item_t){c[i].key->ed, c[i].sig, c[i].digest, 32, 0};
		owner[k++] = &c[i];
	}
}

int pith_sig_verify_b64(const pith_key_t *k, const uint8_t digest[static 32],
			const char *sig_b64)
{
	pith_sig_check_t c;
	if (pith_sig_check_prepare(&c, k, digest, sig_b64))
		return PITH_EINVAL;
	if (k->ed ? pith_ed_verify(k->ed, c.sig, digest, 32)
		  : crypto_sign_verify_detached(c.sig, digest, 32, k->pk))
		return PITH_EBADSIG;
	return 0;
}

void pith_sig_sign_b64(const uint8_t secret[64], const uint8_t digest[static 32],
		       char out[static 89])
{
	uint8_t sig[64];
	crypto_sign_detached(sig, NULL, digest, 32, secret);
	sodium_bin2base64(out, 89, sig, 64, sodium_base64_VARIANT_ORIGINAL);
}

int pith_key_from_json(const json_value_t *o, pith_key_t *key, pith_err_t *err)
{
	memset(key, 0, sizeof(*key));
	const json_value_t *hv = json_get_type(o, "public_key_hex", JSON_STRING);
	const json_value_t *bv = json_get_type(o, "public_key_b64", JSON_STRING);
	const char *hex = hv ? hv->u.str : NULL, *b64 = bv ? bv->u.str : NULL;
	const json_value_t *kv = json_get_type(o, "key_id", JSON_STRING);
	const char *kid = kv ? kv->u.str : NULL;
	if (!kid || !*kid || kv->len >= PITH_KEY_ID_MAX || strlen(kid) != kv->len)
		return pith_err_set(err, PITH_EINVAL, "key: key_id missing, longer than %d or with a NUL",
				    PITH_KEY_ID_MAX - 1);
	if (hex) {
		if (pith_hex_decode(hex, hv->len, key->pk, 32)) /* a NUL is no hex digit */
			return pith_err_set(err, PITH_EINVAL, "key: public_key_hex is not 64 lower-case hex");
	} else if (b64) {
		size_t n = 0;
		if (sodium_base642bin(key->pk, 32, b64, bv->len, NULL, &n, NULL,
				      sodium_base64_VARIANT_ORIGINAL) || n != 32)
			return pith_err_set(err, PITH_EINVAL, "key: public_key_b64 is not 32 bytes of base64");
	} else {
		return pith_err_set(err, PITH_EINVAL, "key: no public_key_hex or public_key_b64");
	}
	snprintf(key->key_id, sizeof(key->key_id), "%s", kid);
	pith_key_fingerprint(key->pk, key->fp);
	const char *claimed = json_get_str(o, "fingerprint_sha256_hex");
	if (!claimed)
		claimed = json_get_str(o, "public_key_fingerprint");
	if (claimed && strcmp(claimed, key->fp))
		return pith_err_set(err, PITH_EMISMATCH, "key: fingerprint %.40s does not match the key (%s)",
				    claimed, key->fp);
	key->rotates_at_us = PITH_NO_ROTATION;
	/* "role": "registry" marks a key that may sign receipts and bundles:
	 * for test meshes and a registry's own successor keys. */
	const char *role = json_get_str(o, "role");
	key->is_registry = role && !strcmp(role, "registry");
	const json_value_t *rot = json_get(o, "rotates_at");
	if (rot && rot->type == JSON_STRING) {
		/* K-ROTATES-AT: the one rule of every timestamp (T-GRAMMAR,
		 * T-CALENDAR, T-YEARS), so that two nodes never read one key
		 * file as two rotation times, or one as none */
		if (strlen(rot->u.str) != rot->len ||
		    pith_time_parse_valid(rot->u.str, PITH_TIME_FRACTION, &key->rotates_at_us))
			return pith_err_set(err, PITH_EINVAL,
					    "key %.64s: rotates_at '%.40s' is not a timestamp "
					    "(YYYY-MM-DDThh:mm:ss[.F]Z, a real date, years 0829-3110)",
					    kid, rot->u.str);
	} else if (rot && rot->type != JSON_NULL) {
		return pith_err_set(err, PITH_EINVAL, "key: rotates_at must be a string or null");
	}
	return 0;
}

int pith_keyfile_parse(const uint8_t *buf, size_t len, pith_key_t *key,
		       uint8_t secret[64], int *has_secret, pith_err_t *err)
{
	json_doc_t *doc = NULL;
	json_limits_t lim = {1 << 16, 8, 100};
	int rc = json_parse(&doc, buf, len, &lim, err);
	if (rc)
		return rc;
	const json_value_t *o = json_doc_root(doc);
	rc = pith_key_from_json(o, key, err);
	if (has_secret)
		*has_secret = 0;
	const char *seed_hex = json_get_str(o, "secret_seed_hex");
	if (!rc && seed_hex && secret) {
		uint8_t seed[32], pk[32];
		if (pith_hex_decode(seed_hex, strlen(seed_hex), seed, 32)) {
			rc = pith_err_set(err, PITH_EINVAL, "key: secret_seed_hex is not 64 hex");
		} else {
			crypto_sign_seed_keypair(pk, secret, seed);
			sodium_memzero(seed, sizeof(seed));
			if (memcmp(pk, key->pk, 32))
				rc = pith_err_set(err, PITH_EMISMATCH,
						  "key: secret seed does not belong to public_key_hex");
			else if (has_secret)
				*has_secret = 1;
		}
	}
	json_doc_free_wiped(doc); /* the arena holds a copy of the seed */
	return rc;
}

int pith_keyfile_generate(const char *key_id, pith_buf_t *out, pith_key_t *key,
			  uint8_t secret[64])
{
	uint8_t seed[32];
	char seed_hex[65], pk_hex[65], b32[27], b64[48];
	if (sodium_init() < 0)
		return PITH_EIO;
	randombytes_buf(seed, sizeof(seed));
	memset(key, 0, sizeof(*key));
	crypto_sign_seed_keypair(key->pk, secret, seed);
	pith_key_fingerprint(key->pk, key->fp);
	pith_key_fingerprint_b32(key->pk, b32);
	key->rotates_at_us = PITH_NO_ROTATION;
	if (key_id)
		snprintf(key->key_id, sizeof(key->key_id), "%s", key_id);
	else
		snprintf(key->key_id, sizeof(key->key_id), "local-%.8s", key->fp);
	pith_hex_encode(seed, 32, seed_hex);
	pith_hex_encode(key->pk, 32, pk_hex);
	sodium_bin2base64(b64, sizeof(b64), key->pk, 32, sodium_base64_VARIANT_ORIGINAL);
	sodium_memzero(seed, sizeof(seed));
	json_doc_t *d = json_doc_new();
	if (!d)
		return PITH_ENOMEM;
	json_value_t *o = json_new_object(d);
	int rc = !o;
	rc = rc || json_object_set(d, o, "key_type", json_new_string(d, "pith_ed25519_key"));
	rc = rc || json_object_set(d, o, "algorithm", json_new_string(d, "ed25519"));
	rc = rc || json_object_set(d, o, "format", json_new_string(d, "raw"));
	rc = rc || json_object_set(d, o, "key_id", json_new_string(d, key->key_id));
	rc = rc || json_object_set(d, o, "public_key_hex", json_new_string(d, pk_hex));
	rc = rc || json_object_set(d, o, "public_key_b64", json_new_string(d, b64));
	rc = rc || json_object_set(d, o, "fingerprint_sha256_hex", json_new_string(d, key->fp));
	rc = rc || json_object_set(d, o, "fingerprint_sha256_b32_first128bits", json_new_string(d, b32));
	rc = rc || json_object_set(d, o, "rotates_at", json_new_null(d));
	rc = rc || json_object_set(d, o, "secret_seed_hex", json_new_string(d, seed_hex));
	rc = rc || json_canon_write(o, out) || pith_buf_putc(out, '\n');
	sodium_memzero(seed_hex, sizeof(seed_hex));
	json_doc_free_wiped(d);
	return rc ? PITH_ENOMEM : 0;
}
