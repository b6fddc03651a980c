#include "event.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const unhashed[] = {"signature", "content_sha256", "event_id"};

const char *pith_event_check_name(pith_event_check_t c)
{
	static const char *const names[] = {
		"ok", "json", "shape", "content_sha256", "event_id",
		"key", "rotated_key", "signature",
	};
	return c < PITH_CHECK_NCHECKS ? names[c] : "unknown";
}

int pith_event_content_bytes(const json_value_t *ev, pith_buf_t *out)
{
	return json_canon_write_skip(ev, unhashed, 3, out);
}

int pith_event_canon(const pith_event_t *ev, pith_buf_t *out)
{
	return json_canon_write(ev->root, out);
}

void pith_event_free_(pith_event_t *ev)
{
	if (!ev)
		return;
	if (!ev->borrowed)
		json_doc_free(ev->doc);
	free(ev);
}

static int is_event_id(const json_value_t *v)
{
	uint8_t d[32];
	return json_is(v, JSON_STRING) && v->len == PITH_EVENT_ID_LEN &&
	       !memcmp(v->u.str, "sha256:", 7) && !pith_hex_decode(v->u.str + 7, 64, d, 32);
}

static const char *req_str(const json_value_t *o, const char *key, size_t max,
			   const char *where, pith_err_t *err)
{
	const json_value_t *v = json_get(o, key);
	if (!json_is(v, JSON_STRING)) {
		pith_err_set(err, PITH_EINVAL, "%s%s: missing or not a string", where, key);
		return NULL;
	}
	if (v->len == 0 || v->len > max || strlen(v->u.str) != v->len) {
		pith_err_set(err, PITH_EINVAL, "%s%s: empty, longer than %zu bytes or with NUL",
			     where, key, max);
		return NULL;
	}
	return v->u.str;
}

/* created_at is exactly YYYY-MM-DDTHH:MM:SSZ so that string order is time
 * order; signed_at may carry a fraction. strict: what a peer sends, whose
 * timestamps must be valid (docs/merge.md R-TIME); not strict: this
 * node's own stored bytes, which older builds checked more loosely (they
 * stay readable until an upgrade takes them out). */
static int time_ok(const char *s, pith_time_form_t form, int strict, int64_t *us)
{
	if (strict)
		return !pith_time_parse_valid(s, form, us);
	return (form != PITH_TIME_SECONDS || (strlen(s) == 20 && s[19] == 'Z')) &&
	       !pith_time_parse(s, us);
}

static int check_shape(const json_value_t *r, pith_event_t *ev, int strict, pith_err_t *err)
{
	if (!json_is(r, JSON_OBJECT))
		return pith_err_set(err, PITH_EINVAL, "event: not a JSON object");
	if (!(ev->event_type = req_str(r, "event_type", 64, "", err)))
		return PITH_EINVAL;
	const char *subj = req_str(r, "subject_pith_number", 64, "", err);
	if (!subj)
		return PITH_EINVAL;
	if (!pith_number_is_valid(subj))
		return pith_err_set(err, PITH_EINVAL, "subject_pith_number: '%.60s' is not a pith number", subj);
	memcpy(ev->subject, subj, PITH_NUMBER_LEN + 1);
	if (!(ev->target = req_str(r, "target", 256, "", err)))
		return PITH_EINVAL;
	if (!json_get_type(r, "payload", JSON_OBJECT))
		return pith_err_set(err, PITH_EINVAL, "payload: missing or not an object");
	const json_value_t *signer = json_get_type(r, "signer", JSON_OBJECT);
	if (!signer)
		return pith_err_set(err, PITH_EINVAL, "signer: missing or not an object");
	if (!req_str(signer, "signer_id", 256, "signer.", err) ||
	    !req_str(signer, "signer_type", 64, "signer.", err) ||
	    !(ev->signer_key_id = req_str(signer, "key_id", PITH_KEY_ID_MAX - 1, "signer.", err)) ||
	    !(ev->signer_fp = req_str(signer, "public_key_fingerprint", 64, "signer.", err)))
		return PITH_EINVAL;
	const char *ca = req_str(r, "created_at", 32, "", err);
	if (!ca)
		return PITH_EINVAL;
	if (!time_ok(ca, PITH_TIME_SECONDS, strict, &ev->created_us))
		return pith_err_set(err, PITH_EINVAL, "created_at: '%.32s' is not a valid "
				    "YYYY-MM-DDTHH:MM:SSZ (a real date, seconds 00-59, years %04d-%04d)",
				    ca, PITH_TIME_YEAR_MIN, PITH_TIME_YEAR_MAX);
	memcpy(ev->created_at, ca, 21);
	const json_value_t *sup = json_get_type(r, "supersedes", JSON_ARRAY);
	if (!sup)
		return pith_err_set(err, PITH_EINVAL, "supersedes: missing or not an array");
	if (sup->len > 64)
		return pith_err_set(err, PITH_EINVAL, "supersedes: more than 64 event ids");
	for (size_t i = 0; i < sup->len; i++)
		if (!is_event_id(sup->u.items[i]))
			return pith_err_set(err, PITH_EINVAL, "supersedes[%zu]: not an event id", i);
	const json_value_t *prev = json_get(r, "prev_event");
	if (!prev || (prev->type != JSON_NULL && !is_event_id(prev)))
		return pith_err_set(err, PITH_EINVAL, "prev_event: missing, or neither null nor an event id");
	if (!req_str(r, "schema_version", 16, "", err))
		return PITH_EINVAL;
	const json_value_t *sig = json_get_type(r, "signature", JSON_OBJECT);
	if (!sig)
		return pith_err_set(err, PITH_EINVAL, "signature: missing or not an object");
	ev->signature = sig;
	const char *alg = req_str(sig, "algorithm", 16, "signature.", err);
	if (!alg)
		return PITH_EINVAL;
	if (strcmp(alg, "ed25519"))
		return pith_err_set(err, PITH_EINVAL, "signature.algorithm: '%.16s' is not ed25519", alg);
	const char *msg = json_get_str(sig, "signed_message");
	if (msg && strcmp(msg, "open_graph_event_sha256_bytes"))
		return pith_err_set(err, PITH_EINVAL, "signature.signed_message: '%.40s' is not open_graph_event_sha256_bytes", msg);
	if (!req_str(sig, "signature_b64", 100, "signature.", err) ||
	    !req_str(sig, "key_id", PITH_KEY_ID_MAX - 1, "signature.", err) ||
	    !req_str(sig, "public_key_fingerprint", 64, "signature.", err))
		return PITH_EINVAL;
	const char *sa = req_str(sig, "signed_at", 40, "signature.", err);
	if (!sa)
		return PITH_EINVAL;
	if (!time_ok(sa, PITH_TIME_FRACTION, strict, &ev->signed_us))
		return pith_err_set(err, PITH_EINVAL, "signature.signed_at: '%.40s' is not a valid timestamp", sa);
	if (!req_str(r, "content_sha256", 64, "", err) || !req_str(r, "event_id", 71, "", err))
		return PITH_EINVAL;
	return 0;
}

static int sig_failed(const pith_event_t *ev, int rc, pith_event_check_t *failed,
		      pith_err_t *err)
{
	*failed = PITH_CHECK_SIGNATURE;
	return pith_err_set(err, PITH_EBADSIG, rc == PITH_EINVAL
			    ? "signature.signature_b64: not 64 bytes of base64"
			    : "signature: Ed25519 signature does not verify for %s", ev->event_id);
}

/* Every check; the Ed25519 one is prepared in *defer instead of run when
 * defer is non-NULL. */
static int verify(const json_value_t *r, const pith_trust_t *trust, pith_event_t *ev,
		  pith_event_check_t *failed, pith_err_t *err, pith_sig_check_t *defer,
		  pith_buf_t *canon)
{
	/* trust == NULL: the store re-reading its own verified bytes */
	int rc = check_shape(r, ev, trust != NULL, err);
	if (rc) {
		*failed = PITH_CHECK_SHAPE;
		return rc;
	}
	ev->root = r;
	pith_buf_t b = PITH_BUF_INIT;
	/* one allocation each: the hashed part and the canonical form are
	 * about the size of the event (growing them by doubling was 3% of a
	 * validator's samples in an import) */
	rc = pith_buf_reserve(&b, 4096);
	if (!rc && canon)
		rc = pith_buf_reserve(canon, 4096);
	/* with canon, the whole canonical form too, each value written once */
	if (!rc)
		rc = canon ? json_canon_write_both(r, unhashed, 3, canon, &b)
			   : pith_event_content_bytes(r, &b);
	if (rc) {
		pith_buf_release(&b);
		*failed = PITH_CHECK_JSON;
		return pith_err_set(err, rc, "event: cannot canonicalise");
	}
	pith_sha256(b.data, b.len, ev->content_hash);
	pith_buf_release(&b);
	char hex[65];
	pith_hex_encode(ev->content_hash, 32, hex);
	const char *claimed = json_get_str(r, "content_sha256");
	if (strcmp(claimed, hex)) {
		*failed = PITH_CHECK_CONTENT_HASH;
		return pith_err_set(err, PITH_EMISMATCH,
				    "content_sha256: claimed %.64s, recomputed %s", claimed, hex);
	}
	snprintf(ev->event_id, sizeof(ev->event_id), "sha256:%s", hex);
	const char *eid = json_get_str(r, "event_id");
	if (strcmp(eid, ev->event_id)) {
		*failed = PITH_CHECK_EVENT_ID;
		return pith_err_set(err, PITH_EMISMATCH, "event_id: claimed %.71s, recomputed %s",
				    eid, ev->event_id);
	}
	if (!trust) {
		if (defer) {
			defer->key = NULL;
			defer->ok = 1;
		}
		*failed = PITH_CHECK_OK;
		return 0;
	}
	const json_value_t *sig = ev->signature;
	const char *sfp = json_get_str(sig, "public_key_fingerprint");
	const char *skid = json_get_str(sig, "key_id");
	if (strcmp(sfp, ev->signer_fp) || strcmp(skid, ev->signer_key_id)) {
		*failed = PITH_CHECK_KEY;
		return pith_err_set(err, PITH_EMISMATCH,
				    "signature: key_id/fingerprint differ from the signer's");
	}
	/* signed_at is outside the hash, so a relay could change it; the
	 * signed created_at must be before rotation too. */
	const pith_key_t *key;
	int64_t when = ev->created_us > ev->signed_us ? ev->created_us : ev->signed_us;
	rc = pith_trust_check(trust, ev->signer_fp, ev->signer_key_id, when, &key, err);
	if (rc) {
		*failed = rc == PITH_EROTATED ? PITH_CHECK_ROTATED : PITH_CHECK_KEY;
		return rc;
	}
	const char *b64 = json_get_str(sig, "signature_b64");
	if (defer)
		rc = pith_sig_check_prepare(defer, key, ev->content_hash, b64);
	else
		rc = pith_sig_verify_b64(key, ev->content_hash, b64);
	if (rc)
		return sig_failed(ev, rc, failed, err);
	*failed = PITH_CHECK_OK;
	return 0;
}

int pith_event_verify_value(const json_value_t *root, const pith_trust_t *trust,
			    pith_event_t **out, pith_event_check_t *failed,
			    pith_err_t *err)
{
	pith_event_check_t dummy;
	if (!failed)
		failed = &dummy;
	*out = NULL;
	pith_event_t *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return pith_err_set(err, PITH_ENOMEM, "event: out of memory");
	ev->borrowed = 1;
	int rc = verify(root, trust, ev, failed, err, NULL, NULL);
	if (rc) {
		free(ev);
		return rc;
	}
	*out = ev;
	return 0;
}

/* An event owning the parsed document of buf, its fields not yet read. */
static int parse_doc(const uint8_t *buf, size_t len, pith_event_t **out, pith_err_t *err)
{
	json_limits_t lim = {PITH_EVENT_MAX_BYTES, PITH_EVENT_MAX_DEPTH, JSON_MAX_INT_DIGITS};
	json_doc_t *doc = NULL;
	int rc = json_parse(&doc, buf, len, &lim, err);
	if (rc)
		return rc;
	pith_event_t *ev = calloc(1, sizeof(*ev));
	if (!ev) {
		json_doc_free(doc);
		return pith_err_set(err, PITH_ENOMEM, "event: out of memory");
	}
	ev->doc = doc;
	*out = ev;
	return 0;
}

int pith_event_parse(const uint8_t *buf, size_t len, const pith_trust_t *trust,
		     pith_event_t **out, pith_event_check_t *failed, pith_err_t *err)
{
	return pith_event_parse_deferred(buf, len, trust, out, failed, err, NULL, NULL);
}

int pith_event_sig_result(const pith_event_t *ev, const pith_sig_check_t *sc,
			  pith_event_check_t *failed, pith_err_t *err)
{
	pith_event_check_t dummy;
	if (sc->ok)
		return 0;
	return sig_failed(ev, PITH_EBADSIG, failed ? failed : &dummy, err);
}

int pith_event_parse_deferred(const uint8_t *buf, size_t len, const pith_trust_t *trust,
			      pith_event_t **out, pith_event_check_t *failed, pith_err_t *err,
			      pith_sig_check_t *defer, pith_buf_t *canon)
{
	pith_event_check_t dummy;
	if (!failed)
		failed = &dummy;
	*out = NULL;
	pith_event_t *ev = NULL;
	int rc = parse_doc(buf, len, &ev, err);
	if (rc) {
		*failed = PITH_CHECK_JSON;
		return rc;
	}
	rc = verify(json_doc_root(ev->doc), trust, ev, failed, err, defer, canon);
	if (rc) {
		if (canon)
			pith_buf_reset(canon);
		pith_event_free(ev);
		return rc;
	}
	*out = ev;
	return 0;
}

static int set_default(json_doc_t *d, json_value_t *o, const char *key, json_value_t *v)
{
	if (json_get(o, key))
		return 0;
	return json_object_set(d, o, key, v);
}

int pith_event_sign(json_doc_t *d, json_value_t *ev, const pith_key_t *key,
		    const uint8_t secret[64], pith_err_t *err)
{
	char now[32], nowf[32], hex[65], eid[80], sig[89];
	if (!json_is(ev, JSON_OBJECT))
		return pith_err_set(err, PITH_EINVAL, "event: not a JSON object");
	pith_time_now(now, 0);
	pith_time_now(nowf, 1);
	json_value_t *signer = (json_value_t *)json_get(ev, "signer");
	int rc = 0;
	if (!json_is(signer, JSON_OBJECT)) {
		signer = json_new_object(d);
		rc = rc || !signer || json_object_set(d, ev, "signer", signer);
	}
	rc = rc || set_default(d, signer, "signer_id", json_new_string(d, key->key_id));
	rc = rc || set_default(d, signer, "signer_type", json_new_string(d, "operator"));
	rc = rc || json_object_set(d, signer, "key_id", json_new_string(d, key->key_id));
	rc = rc || json_object_set(d, signer, "public_key_fingerprint", json_new_string(d, key->fp));
	rc = rc || set_default(d, ev, "created_at", json_new_string(d, now));
	rc = rc || set_default(d, ev, "supersedes", json_new_array(d));
	rc = rc || set_default(d, ev, "prev_event", json_new_null(d));
	rc = rc || set_default(d, ev, "schema_version", json_new_string(d, "1.0"));
	rc = rc || set_default(d, ev, "payload", json_new_object(d));
	if (rc)
		return pith_err_set(err, PITH_ENOMEM, "event: out of memory");
	pith_buf_t b = PITH_BUF_INIT;
	uint8_t digest[32];
	if (pith_event_content_bytes(ev, &b)) {
		pith_buf_release(&b);
		return pith_err_set(err, PITH_ENOMEM, "event: cannot canonicalise");
	}
	pith_sha256(b.data, b.len, digest);
	pith_buf_release(&b);
	pith_hex_encode(digest, 32, hex);
	snprintf(eid, sizeof(eid), "sha256:%s", hex);
	pith_sig_sign_b64(secret, digest, sig);
	json_value_t *s = json_new_object(d);
	rc = !s;
	rc = rc || json_object_set(d, s, "signature_status", json_new_string(d, "signed_v1"));
	rc = rc || json_object_set(d, s, "algorithm", json_new_string(d, "ed25519"));
	rc = rc || json_object_set(d, s, "key_id", json_new_string(d, key->key_id));
	rc = rc || json_object_set(d, s, "public_key_fingerprint", json_new_string(d, key->fp));
	rc = rc || json_object_set(d, s, "signature_b64", json_new_string(d, sig));
	rc = rc || json_object_set(d, s, "signed_message", json_new_string(d, "open_graph_event_sha256_bytes"));
	rc = rc || json_object_set(d, s, "signed_at", json_new_string(d, nowf));
	rc = rc || json_object_set(d, ev, "signature", s);
	rc = rc || json_object_set(d, ev, "content_sha256", json_new_string(d, hex));
	rc = rc || json_object_set(d, ev, "event_id", json_new_string(d, eid));
	return rc ? pith_err_set(err, PITH_ENOMEM, "event: out of memory") : 0;
}

int pith_event_parse_stored(const uint8_t *buf, size_t len, pith_event_t **out,
			    pith_err_t *err)
{
	return pith_event_parse(buf, len, NULL, out, NULL, err);
}

int pith_event_parse_own(const uint8_t *buf, size_t len, const uint8_t id[32],
			 pith_event_t **out, pith_err_t *err)
{
	*out = NULL;
	pith_event_t *ev = NULL;
	int rc = parse_doc(buf, len, &ev, err);
	if (rc)
		return rc;
	const json_value_t *r = json_doc_root(ev->doc);
	if ((rc = check_shape(r, ev, 0, err))) {
		pith_event_free(ev);
		return rc;
	}
	ev->root = r;
	char hex[65];
	pith_hex_encode(id, 32, hex);
	snprintf(ev->event_id, sizeof(ev->event_id), "sha256:%s", hex);
	if (strcmp(json_get_str(r, "content_sha256"), hex) ||
	    strcmp(json_get_str(r, "event_id"), ev->event_id)) {
		pith_event_free(ev);
		return pith_err_set(err, PITH_EMISMATCH, "event: stored under sha256:%s but names "
				    "another id", hex);
	}
	memcpy(ev->content_hash, id, 32);
	*out = ev;
	return 0;
}
