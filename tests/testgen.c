#include "testgen.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "bundle.h"
#include "ids.h"
#include "merge.h"

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

void tg_keys_make(tg_key_t *keys, const tg_key_spec_t *specs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		tg_key_make(&keys[i], specs[i].seed, specs[i].key_id, specs[i].registry);
		if (specs[i].rotates_at)
			pith_time_parse_valid(specs[i].rotates_at, PITH_TIME_FRACTION,
					      &keys[i].key.rotates_at_us);
	}
}

static const char *const *arxiv_ids;
static size_t narxiv_ids;

void tg_set_arxiv_ids(const char *const *ids, size_t n)
{
	arxiv_ids = ids;
	narxiv_ids = n;
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
		"\"schema_version\":\"1.0\",\"source\":{\"id\":\"", ax, year, 1 + n % 9, n % 10, tx);
	if (n < narxiv_ids)
		pith_buf_puts(out, arxiv_ids[n]);
	else
		pith_buf_printf(out, "%02u%02u.%05u", year % 100, 1 + n % 12, n % 100000);
	pith_buf_printf(out, "\",\"kind\":\"arxiv\",\"version\":%u}}", 1 + n % 3);
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

static int tg_set_str(json_doc_t *d, json_value_t *o, const char *k, const char *v)
{
	return json_object_set(d, o, k, json_new_string(d, v));
}

/* The aliases of record rec (derived), each with created_at. */
static json_value_t *tg_aliases(json_doc_t *d, const json_value_t *rec, const char *pith,
                                const char *at)
{
	pith_alias_t al[6];
	int na = pith_record_aliases(rec, pith, al);
	json_value_t *a = json_new_array(d);
	for (int i = 0; a && i < na; i++) {
		json_value_t *o = json_new_object(d);
		if (!o || tg_set_str(d, o, "alias_kind", al[i].kind) ||
		    tg_set_str(d, o, "alias_value", al[i].value) ||
		    tg_set_str(d, o, "created_at", at) || json_array_push(d, a, o))
			return NULL;
	}
	return na < 0 ? NULL : a;
}

int tg_bundle(const char *pith, pith_event_t *const *evs, size_t n, const tg_key_t *k,
              const pith_trust_t *trust, const char *built_at, pith_buf_t *out,
              pith_err_t *err)
{
	const pith_event_t *rc_ev = NULL;
	for (size_t i = 0; i < n && !rc_ev; i++)
		if (!strcmp(evs[i]->event_type, "record_created"))
			rc_ev = evs[i];
	if (!rc_ev)
		return pith_err_set(err, PITH_EINVAL, "no record_created");
	const json_value_t *pl = json_get_type(rc_ev->root, "payload", JSON_OBJECT);
	const json_value_t *rec = json_get_type(pl, "canonical_record", JSON_OBJECT);
	const char *csha = json_get_str(pl, "canonical_sha256");
	json_doc_t *d = json_doc_new();
	json_value_t *b = d ? json_new_object(d) : NULL;
	json_value_t *arr = d ? json_new_array(d) : NULL;
	pith_state_t st = {0};
	char shortn[20], hex[65], sig[89];
	uint8_t h[32];
	int rc = PITH_ENOMEM;
	if (!rec || !csha) {
		rc = pith_err_set(err, PITH_EINVAL, "record_created without its record");
		goto done;
	}
	if (!b || !arr)
		goto done;
	snprintf(shortn, sizeof(shortn), "pith:%.8s", pith + 10);
	json_value_t *al = tg_aliases(d, rec, pith, built_at);
	if (!al || tg_set_str(d, b, "bundle_type", "pith_open_graph_bundle") ||
	    tg_set_str(d, b, "bundle_version", "1.0") || tg_set_str(d, b, "pith_number", pith) ||
	    tg_set_str(d, b, "short_pith_number", shortn) ||
	    json_object_set(d, b, "canonical_record", json_clone(d, rec)) ||
	    tg_set_str(d, b, "canonical_sha256", csha) ||
	    json_object_set(d, b, "source_aliases", al) ||
	    tg_set_str(d, b, "merge_version", PITH_MERGE_VERSION) ||
	    tg_set_str(d, b, "built_at", built_at))
		goto done;
	for (size_t i = 0; i < n; i++)
		if (json_array_push(d, arr, json_clone(d, evs[i]->root)))
			goto done;
	if (json_object_set(d, b, "events", arr))
		goto done;
	if ((rc = pith_merge_ex(pith, evs, n, al, trust, &st, err)))
		goto done;
	rc = PITH_ENOMEM;
	if (json_object_set(d, b, "state", json_clone(d, st.root)) || pith_bundle_hash(b, h))
		goto done;
	pith_hex_encode(h, 32, hex);
	pith_sig_sign_b64(k->sk, h, sig);
	json_value_t *s = json_new_object(d);
	if (!s || tg_set_str(d, s, "algorithm", "ed25519") ||
	    tg_set_str(d, s, "bundle_sha256", hex) || tg_set_str(d, s, "key_id", k->key.key_id) ||
	    tg_set_str(d, s, "public_key_fingerprint", k->key.fp) ||
	    tg_set_str(d, s, "signature_b64", sig) ||
	    tg_set_str(d, s, "signature_status", "signed_v1") ||
	    tg_set_str(d, s, "signed_at", built_at) ||
	    tg_set_str(d, s, "signed_message", "bundle_sha256_bytes") ||
	    json_object_set(d, b, "bundle_signature", s) || json_canon_write(b, out))
		goto done;
	rc = 0;
done:
	if (rc == PITH_ENOMEM)
		pith_err_set(err, rc, "out of memory building the bundle");
	pith_state_release(&st);
	json_doc_free(d);
	return rc;
}

void tg_bundle_resign(json_doc_t *d, json_value_t *b, const tg_key_t *k)
{
	uint8_t h[32];
	char hex[65], sig[89];
	pith_bundle_hash(b, h);
	pith_hex_encode(h, 32, hex);
	pith_sig_sign_b64(k->sk, h, sig);
	json_value_t *s = (json_value_t *)json_get(b, "bundle_signature");
	json_object_set(d, s, "bundle_sha256", json_new_string(d, hex));
	json_object_set(d, s, "signature_b64", json_new_string(d, sig));
	json_object_set(d, s, "key_id", json_new_string(d, k->key.key_id));
	json_object_set(d, s, "public_key_fingerprint", json_new_string(d, k->key.fp));
}

pith_trust_t *tg_trust_pair(tg_key_t *reg, tg_key_t *op)
{
	tg_key_make(reg, 1, "test-registry", 1);
	tg_key_make(op, 2, "op-one", 0);
	pith_trust_t *t = pith_trust_new();
	if (t && (pith_trust_add(t, &reg->key) || pith_trust_add(t, &op->key))) {
		pith_trust_free(t);
		return NULL;
	}
	return t;
}
