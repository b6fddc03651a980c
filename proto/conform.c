/* Conformance cases: see conform.h and tests/conformance/README.md. */
#include "conform.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "event.h"
#include "ids.h"
#include "merge.h"
#include "stateroot.h"
#include "trust.h"

static const char *event_rule(pith_event_check_t c)
{
	static const char *const rules[] = {
		"accepted", "V-JSON", "V-SHAPE", "V-CONTENT-HASH", "V-EVENT-ID",
		"V-KEY", "V-ROTATED", "V-SIGNATURE",
	};
	return c < PITH_CHECK_NCHECKS ? rules[c] : "V-UNKNOWN";
}

/* A case's bytes: member name as a string, or name + "_hex" as the hex of
 * bytes that are not UTF-8 (a JSON file cannot hold them). 0 or -1. */
static int case_bytes(const json_value_t *c, const char *name, pith_buf_t *out)
{
	char hexname[40];
	const json_value_t *v = json_get_type(c, name, JSON_STRING);
	pith_buf_reset(out);
	if (v)
		return pith_buf_append(out, v->u.str, v->len) ? -1 : 0;
	snprintf(hexname, sizeof(hexname), "%s_hex", name);
	v = json_get_type(c, hexname, JSON_STRING);
	if (!v || v->len % 2 || pith_buf_reserve(out, v->len / 2 + 1) ||
	    pith_hex_decode(v->u.str, v->len, out->data, v->len / 2))
		return -1;
	out->len = v->len / 2;
	return 0;
}

void pith_conform_merge_release(pith_conform_merge_t *out)
{
	pith_buf_release(&out->state);
	memset(out, 0, sizeof(*out));
}

typedef struct merge_ctx {
	pith_trust_t *trust;
	json_doc_t *docs[PITH_CONFORM_MAX_DOCS];
	size_t ndocs;
	pith_event_t **evs;
	size_t nevs, cap;
	const json_value_t *aliases; /* the newest accepted bundle's, of the case's record */
	int64_t newest_us;
	uint8_t newest_sha[32];
} merge_ctx_t;

static int push_event(merge_ctx_t *m, pith_event_t *ev)
{
	if (m->nevs == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 16;
		pith_event_t **p = realloc(m->evs, nc * sizeof(*p));
		if (!p)
			return PITH_ENOMEM;
		m->evs = p;
		m->cap = nc;
	}
	m->evs[m->nevs++] = ev;
	return 0;
}

/* A bundle document: B- checks, then its events join E and, when it is
 * the record's newest (B-NEWEST), its aliases become A. */
static const char *eval_bundle(merge_ctx_t *m, const char *pith, const pith_buf_t *text,
			       const char **reason)
{
	json_limits_t lim = {PITH_BUNDLE_MAX_BYTES, PITH_BUNDLE_MAX_DEPTH, JSON_MAX_INT_DIGITS};
	json_doc_t *d = NULL;
	*reason = "accepted";
	if (json_parse(&d, text->data, text->len, &lim, NULL)) {
		*reason = text->len > PITH_BUNDLE_MAX_BYTES ? "too_big" : "json";
		return "B-JSON";
	}
	m->docs[m->ndocs++] = d;
	const json_value_t *b = json_doc_root(d);
	pith_report_t rep = {0};
	if (pith_bundle_verify(b, m->trust, &rep)) {
		const char *rule = "B-UNKNOWN";
		for (size_t i = 0; i < rep.n; i++)
			if (!rep.checks[i].ok) {
				rule = pith_bundle_check_rule(rep.checks[i].name);
				break;
			}
		*reason = pith_bundle_refusal(&rep);
		pith_report_release(&rep);
		return rule;
	}
	pith_report_release(&rep);
	const json_value_t *evs = json_get(b, "events");
	for (size_t i = 0; i < evs->len; i++) {
		pith_event_t *ev = NULL;
		if (pith_event_verify_value(evs->u.items[i], m->trust, &ev, NULL, NULL) ||
		    push_event(m, ev)) {
			pith_event_free(ev);
			return "B-UNKNOWN";
		}
	}
	int64_t us;
	uint8_t sha[32];
	const char *bp = json_get_str(b, "pith_number");
	if (strcmp(bp, pith) || pith_time_parse_valid(json_get_str(b, "built_at"), PITH_TIME_FRACTION, &us) ||
	    pith_bundle_hash(b, sha))
		return "accepted";
	/* B-NEWEST: the greater built_at, ties to the smaller bundle_sha256 */
	if (!m->aliases || us > m->newest_us ||
	    (us == m->newest_us && memcmp(sha, m->newest_sha, 32) < 0)) {
		m->aliases = json_get(b, "source_aliases");
		m->newest_us = us;
		memcpy(m->newest_sha, sha, 32);
	}
	return "accepted";
}

static int load_trust(merge_ctx_t *m, const json_value_t *keys, pith_err_t *err)
{
	if (!(m->trust = pith_trust_new()))
		return pith_err_set(err, PITH_ENOMEM, "cannot initialise libsodium");
	for (size_t i = 0; keys && i < keys->len; i++) {
		pith_key_t k;
		int rc = pith_key_from_json(keys->u.items[i], &k, err);
		if (rc || (rc = pith_trust_add(m->trust, &k)))
			return rc;
	}
	return 0;
}

int pith_conform_merge_eval(const json_value_t *c, pith_conform_merge_t *out, pith_err_t *err)
{
	memset(out, 0, sizeof(*out));
	merge_ctx_t m = {0};
	pith_buf_t text = PITH_BUF_INIT;
	const char *pith = json_get_str(c, "pith_number");
	const json_value_t *docs = json_get_type(c, "documents", JSON_ARRAY);
	const json_value_t *keys = json_get(c, "trust");
	int rc;
	if (!pith || !docs || docs->len > PITH_CONFORM_MAX_DOCS ||
	    (keys && !json_is(keys, JSON_ARRAY))) {
		rc = pith_err_set(err, PITH_EINVAL, "merge case: pith_number, documents (at most %d) "
				  "or trust missing or malformed", PITH_CONFORM_MAX_DOCS);
		goto done;
	}
	if ((rc = load_trust(&m, keys, err)))
		goto done;
	for (size_t i = 0; i < docs->len; i++) {
		const json_value_t *d = docs->u.items[i];
		const char *type = json_get_str(d, "type");
		if (!type || case_bytes(d, "text", &text)) {
			rc = pith_err_set(err, PITH_EINVAL, "documents[%zu]: type or text missing", i);
			goto done;
		}
		/* "item": the document says nothing of its kind; D-KIND decides */
		if (!strcmp(type, "item"))
			type = pith_item_kind(text.data, text.len) == PITH_DOC_BUNDLE ? "bundle" : "event";
		out->kind[i] = !strcmp(type, "bundle") ? "bundle" : "event";
		if (!strcmp(type, "bundle")) {
			out->outcome[i] = eval_bundle(&m, pith, &text, &out->reason[i]);
		} else {
			pith_event_t *ev = NULL;
			pith_event_check_t failed = PITH_CHECK_OK;
			if (pith_event_parse(text.data, text.len, m.trust, &ev, &failed, NULL) == 0 &&
			    push_event(&m, ev)) {
				pith_event_free(ev);
				rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
				goto done;
			}
			out->outcome[i] = event_rule(failed);
			/* the refusal's name: pithctl import's (docs/merge.md) */
			out->reason[i] = failed == PITH_CHECK_OK ? "accepted"
					 : failed == PITH_CHECK_JSON && text.len > PITH_EVENT_MAX_BYTES
					 ? "too_big" : pith_event_check_name(failed);
		}
		out->ndocs = i + 1;
	}
	pith_state_t st;
	if ((rc = pith_merge_ex(pith, m.evs, m.nevs, m.aliases, m.trust, &st, err)))
		goto done;
	rc = pith_state_canon(&st, &out->state);
	memcpy(out->state_sha256, st.state_sha256, 65);
	pith_state_release(&st);
	if (rc)
		rc = pith_err_set(err, PITH_ENOMEM, "out of memory");
done:
	pith_buf_release(&text);
	for (size_t i = 0; i < m.nevs; i++)
		pith_event_free(m.evs[i]);
	free(m.evs);
	for (size_t i = 0; i < m.ndocs; i++)
		json_doc_free(m.docs[i]);
	pith_trust_free(m.trust);
	if (rc)
		pith_conform_merge_release(out);
	return rc;
}

/* ---- checking a case file ------------------------------------------------ */

typedef struct checker {
	pith_conform_fail_fn fail;
	void *arg;
	size_t *cases, *failed;
} checker_t;

static void failf(checker_t *k, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void failf(checker_t *k, const char *name, const char *fmt, ...)
{
	char what[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	(*k->failed)++;
	k->fail(k->arg, name, what);
}

static void check_merge(checker_t *k, const json_value_t *c)
{
	const char *name = json_get_str(c, "name");
	name = name ? name : "(unnamed)";
	(*k->cases)++;
	pith_conform_merge_t out;
	pith_err_t err = {0};
	if (pith_conform_merge_eval(c, &out, &err)) {
		failf(k, name, "malformed case: %s", err.msg);
		return;
	}
	const json_value_t *docs = json_get(c, "documents");
	for (size_t i = 0; i < out.ndocs; i++) {
		const char *want = json_get_str(docs->u.items[i], "expect");
		const char *want_reason = json_get_str(docs->u.items[i], "expect_reason");
		if (!want || strcmp(want, out.outcome[i])) {
			failf(k, name, "documents[%zu]: %s, expected %s", i, out.outcome[i],
			      want ? want : "(no expect)");
			goto done;
		}
		if (!want_reason || strcmp(want_reason, out.reason[i])) {
			failf(k, name, "documents[%zu]: refused as %s, expected %s", i, out.reason[i],
			      want_reason ? want_reason : "(no expect_reason)");
			goto done;
		}
	}
	const char *want = json_get_str(c, "expect_state");
	const char *want_sha = json_get_str(c, "expect_state_sha256");
	if (!want || strlen(want) != out.state.len || memcmp(want, out.state.data, out.state.len))
		failf(k, name, "state %s differs from the expected bytes (%.16s...)", out.state_sha256,
		      want_sha ? want_sha : "?");
	else if (!want_sha || strcmp(want_sha, out.state_sha256))
		failf(k, name, "state_sha256 %s, expected %s", out.state_sha256, want_sha ? want_sha : "?");
done:
	pith_conform_merge_release(&out);
}

void pith_conform_answer(const char *kind, const json_value_t *c, pith_buf_t *out)
{
	pith_buf_t inb = PITH_BUF_INIT;
	pith_buf_reset(out);
	if (pith_sr_conform_answer(kind, c, out)) /* the state root's kinds: no input */
		return;
	if (case_bytes(c, "input", &inb) || pith_buf_cstr(&inb)) {
		pith_buf_puts(out, "malformed");
		pith_buf_release(&inb);
		return;
	}
	/* u.str/len as a JSON string would have them */
	json_value_t inv = {.type = JSON_STRING, .len = inb.len, .u.str = (const char *)inb.data};
	const json_value_t *in = &inv;
	if (!strcmp(kind, "canonical_json")) {
		json_doc_t *d = NULL;
		pith_buf_t b = PITH_BUF_INIT;
		if (json_parse(&d, (const uint8_t *)in->u.str, in->len, NULL, NULL) ||
		    json_canon_write(json_doc_root(d), &b))
			pith_buf_puts(out, "null");
		else
			json_write_string(out, (const char *)b.data, b.len);
		pith_buf_release(&b);
		json_doc_free(d);
	} else if (!strcmp(kind, "timestamp")) {
		const char *form = json_get_str(c, "form");
		int64_t us;
		pith_time_form_t f = form && !strcmp(form, "created_at") ? PITH_TIME_SECONDS
									 : PITH_TIME_FRACTION;
		if (strlen(in->u.str) != in->len || pith_time_parse_valid(in->u.str, f, &us))
			pith_buf_puts(out, "null");
		else
			pith_buf_printf(out, "%lld", (long long)us);
	} else if (!strcmp(kind, "record_identity")) {
		json_doc_t *d = NULL;
		uint8_t dig[32];
		char hex[65], pith[PITH_NUMBER_LEN + 1];
		if (json_parse(&d, (const uint8_t *)in->u.str, in->len, NULL, NULL) ||
		    pith_record_identify(json_doc_root(d), dig, hex, pith, NULL))
			pith_buf_puts(out, "null");
		else
			pith_buf_printf(out, "{\"canonical_sha256\":\"%s\",\"pith_number\":\"%s\"}", hex, pith);
		json_doc_free(d);
	} else if (!strcmp(kind, "key_fingerprint")) {
		uint8_t pk[32];
		char fp[PITH_FP_LEN + 1];
		if (pith_hex_decode(in->u.str, in->len, pk, 32)) {
			pith_buf_puts(out, "null");
		} else {
			pith_key_fingerprint(pk, fp);
			pith_buf_printf(out, "\"%s\"", fp);
		}
	} else if (!strcmp(kind, "key_file")) {
		/* K-FILE, K-ROTATES-AT: what a trusted key file says, or null
		 * when it is refused at start */
		json_doc_t *d = NULL;
		pith_key_t k;
		if (json_parse(&d, (const uint8_t *)in->u.str, in->len, NULL, NULL) ||
		    !json_is(json_doc_root(d), JSON_OBJECT) ||
		    pith_key_from_json(json_doc_root(d), &k, NULL) || pith_trust_key_check(&k, NULL)) {
			pith_buf_puts(out, "null");
		} else {
			pith_buf_puts(out, "{\"fingerprint\":");
			json_write_string(out, k.fp, strlen(k.fp));
			pith_buf_puts(out, ",\"key_id\":");
			json_write_string(out, k.key_id, strlen(k.key_id));
			pith_buf_printf(out, ",\"registry\":%s,\"rotates_at_us\":", k.is_registry ? "true" : "false");
			if (k.rotates_at_us == PITH_NO_ROTATION)
				pith_buf_puts(out, "null}");
			else
				pith_buf_printf(out, "%lld}", (long long)k.rotates_at_us);
		}
		json_doc_free(d);
	} else if (!strcmp(kind, "ed25519")) {
		/* input: the hex digest signed; the key and signature beside it */
		const char *pk_hex = json_get_str(c, "public_key_hex");
		const char *sig = json_get_str(c, "signature_b64");
		pith_key_t k = {0};
		uint8_t dig[32];
		if (!pk_hex || !sig || pith_hex_decode(pk_hex, strlen(pk_hex), k.pk, 32) ||
		    pith_hex_decode(in->u.str, in->len, dig, 32))
			pith_buf_puts(out, "null");
		else
			pith_buf_puts(out, pith_sig_verify_b64(&k, dig, sig) ? "false" : "true");
	} else {
		pith_buf_puts(out, "unknown kind");
	}
	pith_buf_release(&inb);
}

static void check_list(checker_t *k, const char *kind, const json_value_t *cases)
{
	pith_buf_t got = PITH_BUF_INIT, want = PITH_BUF_INIT;
	for (size_t i = 0; i < cases->len; i++) {
		const json_value_t *c = cases->u.items[i];
		const char *name = json_get_str(c, "name");
		const json_value_t *expect = json_get(c, "expect");
		(*k->cases)++;
		pith_conform_answer(kind, c, &got);
		pith_buf_reset(&want);
		if (expect)
			json_canon_write(expect, &want);
		if (!expect || got.len != want.len || memcmp(got.data, want.data, got.len)) {
			pith_buf_cstr(&got);
			pith_buf_cstr(&want);
			failf(k, name ? name : "(unnamed)", "%s: got %.200s, expected %.200s", kind,
			      (const char *)got.data, expect ? (const char *)want.data : "(no expect)");
		}
	}
	pith_buf_release(&got);
	pith_buf_release(&want);
}

int pith_conform_check(const json_value_t *root, pith_conform_fail_fn fail, void *arg,
		       size_t *cases, size_t *failed, pith_err_t *err)
{
	checker_t k = {fail, arg, cases, failed};
	const char *kind = json_get_str(root, "kind");
	if (!kind)
		return pith_err_set(err, PITH_EINVAL, "not a case file: no kind");
	if (!strcmp(kind, "merge")) {
		check_merge(&k, root);
		return 0;
	}
	const json_value_t *cases_v = json_get_type(root, "cases", JSON_ARRAY);
	if (!cases_v)
		return pith_err_set(err, PITH_EINVAL, "case file of kind %.40s without cases", kind);
	check_list(&k, kind, cases_v);
	return 0;
}

int pith_conform_answer_file(const json_value_t *root, pith_buf_t *out, pith_err_t *err)
{
	const char *kind = json_get_str(root, "kind");
	pith_buf_reset(out);
	if (!kind)
		return pith_err_set(err, PITH_EINVAL, "not a case file: no kind");
	if (!strcmp(kind, "merge")) {
		pith_conform_merge_t m;
		int rc = pith_conform_merge_eval(root, &m, err);
		if (rc)
			return rc;
		pith_buf_puts(out, "{\"documents\":[");
		for (size_t i = 0; i < m.ndocs; i++)
			pith_buf_printf(out, "%s{\"expect\":\"%s\",\"expect_reason\":\"%s\"}", i ? "," : "",
					m.outcome[i], m.reason[i]);
		pith_buf_puts(out, "],\"expect_state\":");
		json_write_string(out, (const char *)m.state.data, m.state.len);
		pith_buf_printf(out, ",\"expect_state_sha256\":\"%s\"}", m.state_sha256);
		pith_conform_merge_release(&m);
		return 0;
	}
	const json_value_t *cases = json_get_type(root, "cases", JSON_ARRAY);
	if (!cases)
		return pith_err_set(err, PITH_EINVAL, "case file of kind %.40s without cases", kind);
	pith_buf_t a = PITH_BUF_INIT;
	pith_buf_puts(out, "{\"cases\":[");
	for (size_t i = 0; i < cases->len; i++) {
		const char *name = json_get_str(cases->u.items[i], "name");
		pith_conform_answer(kind, cases->u.items[i], &a);
		pith_buf_puts(out, i ? ",{\"name\":" : "{\"name\":");
		json_write_string(out, name ? name : "", name ? strlen(name) : 0);
		pith_buf_puts(out, ",\"expect\":");
		pith_buf_append(out, a.data, a.len);
		pith_buf_putc(out, '}');
	}
	pith_buf_puts(out, "]}");
	pith_buf_release(&a);
	return 0;
}
