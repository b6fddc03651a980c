/* Signer keys: the trust store, key files, and Ed25519 over digests.
 *
 * All Pith signatures are Ed25519 over the 32 raw bytes of a SHA-256
 * digest (spec section 3). A key is valid for signatures made before its
 * rotates_at. */
#ifndef PITH_TRUST_H
#define PITH_TRUST_H

#include <stddef.h>
#include <stdint.h>

#include "ed25519.h"
#include "err.h"
#include "ids.h"
#include "json.h"

#define PITH_KEY_ID_MAX 64
#define PITH_NO_ROTATION INT64_MAX

/* The registry key in use (spec section 3). */
#define PITH_REGISTRY_KEY_ID "pith-v1-2026-05"
#define PITH_REGISTRY_KEY_HEX "b2d552b68890857171a78b36a5dccf368a953413288c353f7c9d9d6f94b709b3"

typedef struct pith_key {
	uint8_t pk[32];
	char key_id[PITH_KEY_ID_MAX];
	char fp[PITH_FP_LEN + 1];
	int64_t rotates_at_us; /* PITH_NO_ROTATION if it never rotates */
	int is_registry;       /* may sign bundles and receipts */
	/* Fixed-key verification tables: set on the trust store's own copy
	 * (owned and freed by the store), NULL on every other copy. */
	const pith_ed_table_t *ed;
} pith_key_t;

typedef struct pith_trust pith_trust_t;

/* A trust store holding the registry key. NULL on OOM. */
pith_trust_t *pith_trust_new(void);
void pith_trust_free_(pith_trust_t *t);
#define pith_trust_free(t) do { pith_trust_free_(t); (t) = NULL; } while (0)
/* Adds a key, and builds its
 * fixed-key verification tables (ed25519.h) unless the environment says
 * PITH_ED25519=libsodium or the verifier's self-test failed
 * (docs/signatures.md); a key without tables is verified by libsodium.
 * PITH_EINVAL, and nothing added, for a key pith_trust_key_check refuses.
 * The store is a set (docs/merge.md, K-SET): a key already held under
 * the same key_id stays one entry, a registry key if either says so,
 * with the earlier rotates_at; the order of the calls never matters. */
int pith_trust_add(pith_trust_t *t, const pith_key_t *k);
/* 0 when k's public key may be trusted (pith_ed_key_check: canonical, not
 * of small order, in the prime-order subgroup); else PITH_EINVAL with err
 * naming the key and the rule. Loaders call it first for the message. */
int pith_trust_key_check(const pith_key_t *k, pith_err_t *err);
/* NULL when trusted keys get fixed-key tables; else why not, a sentence
 * for the caller to log (PITH_ED25519=libsodium, or the self-test's
 * failure: pith_ed_selftest). Decided when the store is made. */
const char *pith_trust_fixed_key_note(const pith_trust_t *t);
/* The first trusted key with this fingerprint, or NULL: which one
 * depends on the order keys were added, so no rule may read its role or
 * rotation (pith_trust_check, pith_trust_fp_is_registry do). */
const pith_key_t *pith_trust_find(const pith_trust_t *t, const char *fp);
/* 1 when some registry key of t has this fingerprint, whatever key ids it
 * is also trusted under (docs/merge.md, K-ROLE), else 0. */
int pith_trust_fp_is_registry(const pith_trust_t *t, const char *fp);
size_t pith_trust_count(const pith_trust_t *t);
const pith_key_t *pith_trust_at(const pith_trust_t *t, size_t i);

/* Checks that the key with fingerprint fp is trusted under key_id and had
 * not rotated at time us. Fills err naming the failing check. */
int pith_trust_check(const pith_trust_t *t, const char *fp, const char *key_id,
		     int64_t us, const pith_key_t **out, pith_err_t *err);

/* Ed25519 over a 32-byte digest with a base64 (standard, padded) signature:
 * through k->ed when set (same answers, about 3 times faster), else
 * crypto_sign_verify_detached. Returns 0, PITH_EINVAL (bad base64) or
 * PITH_EBADSIG. */
int pith_sig_verify_b64(const pith_key_t *k, const uint8_t digest[static 32],
			const char *sig_b64);

/* One signature check made ready to run with others. */
typedef struct pith_sig_check {
	const pith_key_t *key; /* NULL: nothing to check, ok is 1 */
	uint8_t digest[32];
	uint8_t sig[64];
	int ok; /* out: 1 when the signature verifies */
} pith_sig_check_t;

/* Fills c for a check of sig_b64 over digest by k (k must outlive it).
 * PITH_EINVAL when sig_b64 is not 64 bytes of standard padded base64. */
int pith_sig_check_prepare(pith_sig_check_t *c, const pith_key_t *k,
			   const uint8_t digest[static 32], const char *sig_b64);
/* Runs n prepared checks, with exactly pith_sig_verify_b64's answers; those
 * by keys with fixed-key tables share their final inversions
 * (pith_ed_verify_many). */
void pith_sig_check_many(pith_sig_check_t *c, size_t n);

/* A key file: JSON written by `pithctl keygen`, or any object with
 * public_key_hex (or public_key_b64) and key_id, such as an entry of a
 * bundle's public_keys. secret (64 bytes, libsodium form) is filled when
 * the file has one and secret is non-NULL; *has_secret tells. */
int pith_keyfile_parse(const uint8_t *buf, size_t len, pith_key_t *key,
		       uint8_t secret[64], int *has_secret, pith_err_t *err);
/* Reads key fields from a parsed object (public part only): key_id,
 * public_key_hex or public_key_b64, optional rotates_at, and optional
 * "role": "registry" for a key that may sign receipts and bundles. */
int pith_key_from_json(const json_value_t *o, pith_key_t *key, pith_err_t *err);

/* Writes a new key file for a fresh keypair into out (JSON, one line). */
int pith_keyfile_generate(const char *key_id, pith_buf_t *out, pith_key_t *key,
			  uint8_t secret[64]);

/* Signs a digest; writes base64 (89 bytes with NUL) into out. */
void pith_sig_sign_b64(const uint8_t secret[64], const uint8_t digest[static 32],
		       char out[static 89]);

#endif
