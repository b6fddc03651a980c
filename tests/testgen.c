#include "testgen.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "bundle.h"
#include "ids.h"

void tg_key_make(tg_key_t *k, unsigned n, const char *key_id, int registry)
{
	uint8_t seed[32] = {0};
	memcpy(seed, &n, sizeof(n));
	seed[31] = 0x5a;
	if (sodium_init() < 0)
		return;
	memset(&k->key, 0, sizeof(k->key));
	crypto_sign_seed_keypair(k->key.pk, k->sk, seed);
	pith_key_fingerprint(k->key.pk, k->key.fp);
	snprintf(k->key.key_id, sizeof(k->key.key_id), "%s", key_id);
	k->key.rotates_at_us = PITH_NO_ROTATION;
	k->key.is_registry = registry;
}

uint64_t tg_rand(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void tg_record(unsigned n, pith_buf_t *out, char pith[static PITH_NUMBER_LEN + 1])
{
	uint8_t th[32], ah[32];
	char tx[65], ax[65], hx[65];
	char seed[32];
	snprintf(seed, sizeof(seed), "title-%u", n);
	pith_sha256(seed, strlen(seed), th);
	snprintf(seed, sizeof(seed), "abstract-%u", n);
	pith_sha256(seed, strlen(seed), ah);
	pith_hex_encode(th, 32, tx);
	pith_hex_encode(ah, 32, ax);
	unsigned year = 2000 + n % 26;
	pith_buf_reset(out);
	pith_buf_printf(out,
		"{\"metadata\":{\"abstract_canon_sha256\":\"%s\",\"cross_cats_sorted\":[\"cs.AI\"],"
		"\"license\":\"http://creativecommons.org/licenses/by/4.0/\",\"primary_cat\":\"cs.DC\","
		"\"submitted_at\":\"%u-0%u-1%uT10:00:00Z\",\"title_canon_sha256\":\"%s\"},"
		"\"schema_version\":\"1.0\",\"source\":{\"id\":\"%02u%02u.%05u\",\"kind\":\"arxiv\",\"version\":%u}}",
		ax, year, 1 + n % 9, n % 10, tx, year % 100, 1 + n % 12, n % 100000, 1 + n % 3);
	json_doc_t *d = NULL;
	uint8_t dig[32];
	json_parse(&d, out->data, out->len, NULL, NULL);
	pith_record_identify(json_doc_root(d), dig, hx, pith, NULL);
	json_doc_free(d);
}

int tg_event(pith_buf_t *out, const tg_key_t *k, const char *type, const char *subject,
	     const char *target, const char *created_at, const char *payload_json,
	     const char *prev, const char *const *supersedes, size_t nsup, int record_n,
	     char event_id_out[static PITH_EVENT_ID_LEN + 1])
{
	pith_buf_t src = PITH_BUF_INIT, rec = PITH_BUF_INIT;
	char pith[PITH_NUMBER_LEN + 1];
	int rc = -1;
	pith_buf_printf(&src, "{\"event_type\":\"%s\",\"subject_pith_number\":\"%s\",\"target\":\"%s\","
			"\"created_at\":\"%s\",\"prev_event\":", type, subject, target, created_at);
	if (prev)
		pith_buf_printf(&src, "\"%s\"", prev);
	else
		pith_buf_puts(&src, "null");
	pith_buf_puts(&src, ",\"supersedes\":[");
	for (size_t i = 0; i < nsup; i++)
		pith_buf_printf(&src, "%s\"%s\"", i ? "," : "", supersedes[i]);
	pith_buf_puts(&src, "],\"signer\":{\"signer_id\":\"");
	pith_buf_puts(&src, k->key.key_id);
	pith_buf_printf(&src, "\",\"signer_type\":\"%s\"}", k->key.is_registry ? "pith_registry" : "operator");
	if (record_n < 0)
		pith_buf_printf(&src, ",\"payload\":%s", payload_json ? payload_json : "{}");
	pith_buf_putc(&src, '}');

	json_doc_t *d = NULL;
	if (json_parse(&d, src.data, src.len, NULL, NULL))
		goto done;
	json_value_t *ev = json_doc_root(d);
	if (record_n >= 0) {
		tg_record((unsigned)record_n, &rec, pith);
		json_doc_t *rd = NULL;
		uint8_t dig[32];
		char hx[65];
		if (json_parse(&rd, rec.data, rec.len, NULL, NULL))
			goto done;
		json_value_t *r = json_clone(d, json_doc_root(rd));
		pith_record_identify(r, dig, hx, pith, NULL);
		json_doc_free(rd);
		json_value_t *p = json_new_object(d);
		json_object_set(d, p, "canonical_record", r);
		json_object_set(d, p, "canonical_sha256", json_new_string(d, hx));
		json_object_set(d, p, "receipt", pith_receipt_make(d, hx, &k->key, k->sk));
		json_object_set(d, p, "attestation_state", json_new_string(d, "computed"));
		json_object_set(d, ev, "payload", p);
	}
	if (pith_event_sign(d, ev, &k->key, k->sk, NULL))
		goto done;
	if (event_id_out)
		snprintf(event_id_out, PITH_EVENT_ID_LEN + 1, "%s", json_get_str(ev, "event_id"));
	rc = json_canon_write(ev, out);
done:
	json_doc_free(d);
	pith_buf_release(&src);
	pith_buf_release(&rec);
	return rc;
}

int tg_resign(const uint8_t *evb, size_t len, const tg_key_t *k, const char *signed_at,
	      pith_buf_t *out)
{
	json_doc_t *d = NULL;
	if (json_parse(&d, evb, len, NULL, NULL))
		return -1;
	json_value_t *ev = json_doc_root(d);
	json_value_t *sig = (json_value_t *)json_get(ev, "signature");
	/* Ed25519 is deterministic: a real re-signing differs in signed_at */
	json_object_set(d, sig, "signed_at", json_new_string(d, signed_at));
	(void)k;
	int rc = json_canon_write(ev, out);
	json_doc_free(d);
	return rc;
}
