/* Verification of bundles, events and record views as named checks. */
#define _GNU_SOURCE /* memmem */
#include "bundle.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pith_report_release(pith_report_t *r)
{
	free(r->checks);
	memset(r, 0, sizeof(*r));
}

int pith_report_add(pith_report_t *r, const char *name, int ok, const char *fmt, ...)
{
	if (r->n == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 16;
		pith_check_t *p = realloc(r->checks, nc * sizeof(*p));
		if (!p)
			return PITH_ENOMEM;
		r->checks = p;
		r->cap = nc;
	}
	pith_check_t *c = &r->checks[r->n++];
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->ok = ok;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->value, sizeof(c->value), fmt, ap);
	va_end(ap);
	c->untrusted = 0;
	if (!ok)
		r->failed++;
	return 0;
}

/* Marks the check just added (a failed one) as failed for trust only. */
static void report_mark_untrusted(pith_report_t *r)
{
	if (r->n && !r->checks[r->n - 1].ok && !r->checks[r->n - 1].untrusted) {
		r->checks[r->n - 1].untrusted = 1;
		r->untrusted++;
	}
}

int pith_report_is_untrusted_only(const pith_report_t *r)
{
	return r->failed > 0 && r->untrusted == r->failed;
}

pith_doc_kind_t pith_doc_kind(const json_value_t *root)
{
	const char *t;
	if (!json_is(root, JSON_OBJECT))
		return PITH_DOC_UNKNOWN;
	/* by member names, so a tampered type field still gets every check */
	if (json_get(root, "bundle_type") || json_get(root, "bundle_signature"))
		return PITH_DOC_BUNDLE;
	if ((t = json_get_str(root, "state_type")) && !strcmp(t, "pith_open_graph_state"))
		return PITH_DOC_STATE;
	if ((t = json_get_str(root, "record_type")) && !strcmp(t, "pith_number_record"))
		return PITH_DOC_RECORD;
	if ((t = json_get_str(root, "kind")) && !strcmp(t, "pith_receipt"))
		return PITH_DOC_RECEIPT;
	if (json_get(root, "event_type") && json_get(root, "subject_pith_number"))
		return PITH_DOC_EVENT;
	return PITH_DOC_UNKNOWN;
}

int pith_text_names_bundle(const uint8_t *p, size_t len)
{
	const uint8_t *end = p + len;
	while ((p = memmem(p, (size_t)(end - p), "\"bundle_", 8))) {
		p += 8;
		size_t left = (size_t)(end - p);
		if ((left >= 5 && !memcmp(p, "type\"", 5)) || (left >= 10 && !memcmp(p, "signature\"", 10)))
			return 1;
	}
	return 0;
}

pith_doc_kind_t pith_item_kind(const uint8_t *p, size_t len)
{
	if (!pith_text_names_bundle(p, len))
		return PITH_DOC_EVENT;
	json_limits_t lim = {PITH_BUNDLE_MAX_BYTES, PITH_BUNDLE_MAX_DEPTH, JSON_MAX_INT_DIGITS};
	json_doc_t *d = NULL;
	if (json_parse(&d, p, len, &lim, NULL))
		return PITH_DOC_BUNDLE; /* refused as B-JSON */
	pith_doc_kind_t k = pith_doc_kind(json_doc_root(d)) == PITH_DOC_BUNDLE ? PITH_DOC_BUNDLE
										: PITH_DOC_EVENT;
	json_doc_free(d);
	return k;
}

/* The checks pith_bundle_verify writes, by name prefix, with the rule of
 * docs/merge.md section 4 each belongs to and the refusal's name. */
static const struct {
	const char *prefix, *rule, *refusal;
} bundle_checks[] = {
	{"bundle_type", "B-TYPE", "bundle_type"},
	{"built_at", "B-BUILT-AT", "bundle_built_at"},
	{"canonical_sha256", "B-RECORD", "bundle_record"},
	{"pith_number", "B-RECORD", "bundle_record"},
	{"short_pith_number", "B-RECORD", "bundle_record"},
	{"source_aliases", "B-ALIASES", "bundle_aliases"},
	{"bundle_sha256", "B-HASH", "bundle_hash"},
	{"bundle_signature", "B-SIGNATURE", "bundle_signature"},
	{"events", "B-EVENTS", "bundle_events"},
	{"state", "B-STATE", "bundle_state"},
};

static int bundle_check_index(const char *check)
{
	for (size_t i = 0; i < sizeof(bundle_checks) / sizeof(bundle_checks[0]); i++)
		if (!strncmp(check, bundle_checks[i].prefix, strlen(bundle_checks[i].prefix)))
			return (int)i;
	return -1;
}

const char *pith_bundle_check_rule(const char *check)
{
	int i = bundle_check_index(check);
	return i < 0 ? "B-UNKNOWN" : bundle_checks[i].rule;
}

const char *pith_bundle_check_refusal(const char *check)
{
	int i = bundle_check_index(check);
	return i < 0 ? "bundle" : bundle_checks[i].refusal;
}

const char *pith_bundle_refusal(const pith_report_t *rep)
{
	for (size_t i = 0; i < rep->n; i++)
		if (!rep->checks[i].ok)
			return pith_bundle_check_refusal(rep->checks[i].name);
	return "bundle";
}

/* A receipt check costs one Ed25519 verification, and every recomputation
 * of a record's state re-checks its record_created receipt. Positive
 * results are memoised, once for the process: the validating threads of
 * an import or a node check each receipt as soon as its event parses
 * (pith_receipt_precheck_prepare), so that the one thread that merges and commits
 * finds it done. A catching-up node meets a record's events among
 * thousands of other records', and up to 16,384 events wait between the
 * validators and the writer: with 65,536 slots a fifth of the merges of
 * 2-event records missed and verified again on the writer (counted in a
 * 500,000-event sync, session 5), so the memo holds 262,144 receipts
 * (8 MiB, allocated by the first check), direct-mapped by the SHA-256 of key,
 * digest and signature under 64 striped locks; all 32 bytes are compared,
 * so two receipts sharing a slot cost a verification, never a wrong
 * answer. */
#define RECEIPT_MEMO 262144
#define RECEIPT_STRIPES 64
typedef struct {
	uint8_t key[32];
} memo_slot_t;
static memo_slot_t *memo;
static pthread_mutex_t memo_mu[RECEIPT_STRIPES];
static pthread_once_t memo_once = PTHREAD_ONCE_INIT;

static void memo_init(void)
{
	for (int i = 0; i < RECEIPT_STRIPES; i++)
		pthread_mutex_init(&memo_mu[i], NULL);
	memo = calloc(RECEIPT_MEMO, sizeof(*memo)); /* NULL: every check verifies */
}

static int memo_has(unsigned slot, const uint8_t mk[32])
{
	pthread_once(&memo_once, memo_init);
	if (!memo)
		return 0;
	pthread_mutex_lock(&memo_mu[slot % RECEIPT_STRIPES]);
	int hit = !memcmp(memo[slot].key, mk, 32);
	pthread_mutex_unlock(&memo_mu[slot % RECEIPT_STRIPES]);
	return hit;
}

static void memo_put(unsigned slot, const uint8_t mk[32])
{
	if (!memo)
		return;
	pthread_mutex_lock(&memo_mu[slot % RECEIPT_STRIPES]);
	memcpy(memo[slot].key, mk, 32);
	pthread_mutex_unlock(&memo_mu[slot % RECEIPT_STRIPES]);
}

/* What pith_receipt_verify checks before the signature: the receipt's
 * fields, its hash against canonical_hex, its key (*k; reg holds the
 * built-in registry key when trust is NULL). 0 with *k, digest, *sig and
 * the memo's key mk and slot set. */
static int receipt_ready(const json_value_t *receipt, const char *canonical_hex,
			 const pith_trust_t *trust, pith_key_t *reg, const pith_key_t **k,
			 uint8_t digest[32], const char **sig, uint8_t mk[32], unsigned *slot,
			 pith_err_t *err)
{
	if (!json_is(receipt, JSON_OBJECT))
		return pith_err_set(err, PITH_EINVAL, "receipt: missing or not an object");
	const char *claimed = json_get_str(receipt, "canonical_sha256");
	const char *fp = json_get_str(receipt, "public_key_fingerprint");
	const char *kid = json_get_str(receipt, "key_id");
	const char *msg = json_get_str(receipt, "signed_message");
	*sig = json_get_str(receipt, "signature_b64");
	if (!claimed || !fp || !kid || !*sig)
		return pith_err_set(err, PITH_EINVAL,
				    "receipt: canonical_sha256, public_key_fingerprint, key_id or signature_b64 missing");
	if (msg && strcmp(msg, "canonical_sha256_bytes"))
		return pith_err_set(err, PITH_EINVAL, "receipt.signed_message: not canonical_sha256_bytes");
	if (strcmp(claimed, canonical_hex))
		return pith_err_set(err, PITH_EMISMATCH, "receipt.canonical_sha256: %.64s is not the record's %s",
				    claimed, canonical_hex);
	if (pith_hex_decode(canonical_hex, strlen(canonical_hex), digest, 32))
		return pith_err_set(err, PITH_EINVAL, "receipt: canonical hash is not hex");
	/* Receipts are the registry's: only a registry key may sign them. With
	 * no trust store given, the built-in registry key is the one. */
	if (trust) {
		int rc = pith_trust_check(trust, fp, kid, 0, k, err);
		if (rc)
			return rc;
		if (!(*k)->is_registry)
			return pith_err_set(err, PITH_EUNTRUSTED, "receipt: key %s is not a registry key", fp);
	} else {
		memset(reg, 0, sizeof(*reg));
		pith_hex_decode(PITH_REGISTRY_KEY_HEX, 64, reg->pk, 32);
		pith_key_fingerprint(reg->pk, reg->fp);
		if (strcmp(fp, reg->fp) || strcmp(kid, PITH_REGISTRY_KEY_ID))
			return pith_err_set(err, PITH_EUNTRUSTED, "receipt: key %.40s is not the registry key", fp);
		*k = reg;
	}
	pith_buf_t b = PITH_BUF_INIT;
	pith_buf_append(&b, (*k)->pk, 32);
	pith_buf_append(&b, digest, 32);
	pith_buf_puts(&b, *sig);
	pith_sha256(b.data, b.len, mk);
	pith_buf_release(&b);
	*slot = (unsigned)(mk[0] | mk[1] << 8 | mk[2] << 16) % RECEIPT_MEMO;
	return 0;
}

int pith_receipt_verify(const json_value_t *receipt, const char *canonical_hex,
			const pith_trust_t *trust, pith_err_t *err)
{
	pith_key_t reg;
	const pith_key_t *k = NULL;
	uint8_t digest[32], mk[32];
	const char *sig;
	unsigned slot;
	int rc = receipt_ready(receipt, canonical_hex, trust, &reg, &k, digest, &sig, mk, &slot, err);
	if (rc)
		return rc;
	if (memo_has(slot, mk))
		return 0;
	if (pith_sig_verify_b64(k, digest, sig))
		return pith_err_set(err, PITH_EBADSIG, "receipt: signature does not verify");
	memo_put(slot, mk);
	return 0;
}

int pith_bundle_hash(const json_value_t *bundle, uint8_t out[static 32])
{
	static const char *const skip[] = {"bundle_signature"};
	pith_buf_t b = PITH_BUF_INIT;
	int rc = json_canon_write_skip(bundle, skip, 1, &b);
	if (!rc)
		pith_sha256(b.data, b.len, out);
	pith_buf_release(&b);
	return rc;
}

/* canonical_sha256 and pith number of a record against the claims in o. */
static void check_record_ids(const json_value_t *o, const json_value_t *rec,
			     pith_report_t *rep, char hex[65], char pith[PITH_NUMBER_LEN + 1])
{
	uint8_t d[32];
	pith_err_t err = {0};
	hex[0] = pith[0] = 0;
	if (pith_record_identify(rec, d, hex, pith, &err)) {
		pith_report_add(rep, "canonical_sha256", 0, "%s", err.msg);
		return;
	}
	const char *c = json_get_str(o, "canonical_sha256");
	pith_report_add(rep, "canonical_sha256", c && !strcmp(c, hex), "%s%s%s", hex,
			c && strcmp(c, hex) ? " (claimed " : "", c && strcmp(c, hex) ? c : "");
	if (!c)
		pith_report_add(rep, "canonical_sha256.claimed", 0, "missing");
	const char *p = json_get_str(o, "pith_number");
	pith_report_add(rep, "pith_number", p && !strcmp(p, pith), "%s", pith);
	const char *sp = json_get_str(o, "short_pith_number");
	if (sp) {
		char shortn[20];
		snprintf(shortn, sizeof(shortn), "pith:%.8s", pith + 10);
		pith_report_add(rep, "short_pith_number", !strcmp(sp, shortn), "%s", shortn);
	}
}

/* Two JSON strings compared as docs/merge.md section 0 says: bytes,
 * unsigned, the shorter first on a common prefix (NUL is a byte). */
static int str_cmp(const json_value_t *a, const json_value_t *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->u.str, b->u.str, n) : 0;
	return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* A JSON string without NUL, as a C string; NULL for anything else (a
 * timestamp with a NUL is no timestamp: nothing may follow it). */
static const char *str_no_nul(const json_value_t *o, const char *key)
{
	const json_value_t *v = json_get_type(o, key, JSON_STRING);
	return v && strlen(v->u.str) == v->len ? v->u.str : NULL;
}

static void check_aliases(const json_value_t *list, const json_value_t *rec,
			  const char *pith, const char *name, pith_report_t *rep)
{
	if (!json_is(list, JSON_ARRAY)) {
		pith_report_add(rep, name, 0, "missing or not an array");
		return;
	}
	pith_alias_t derived[6];
	int nd = pith_record_aliases(rec, pith, derived);
	size_t bad = 0, checked = 0;
	const json_value_t *prev = NULL;
	for (size_t i = 0; i < list->len; i++) {
		/* an element that is no object has no alias_kind: bad */
		const json_value_t *k = json_get_type(list->u.items[i], "alias_kind", JSON_STRING);
		const json_value_t *v = json_get_type(list->u.items[i], "alias_value", JSON_STRING);
		if (!k || !v) {
			bad++;
			continue;
		}
		/* published lists are ordered by alias_kind: ascending, equal
		 * kinds allowed (B-ALIASES), compared as bytes */
		if (prev && str_cmp(prev, k) > 0)
			bad++;
		prev = k;
		for (int j = 0; j < nd; j++) {
			if (strlen(derived[j].kind) == k->len && !memcmp(derived[j].kind, k->u.str, k->len)) {
				checked++;
				if (strlen(derived[j].value) != v->len ||
				    memcmp(derived[j].value, v->u.str, v->len))
					bad++;
			}
		}
	}
	pith_report_add(rep, name, bad == 0, bad ? "%zu alias(es) disagree with the record"
			: "%zu derived alias(es) agree", bad ? bad : checked);
}

/* A bundle's signature block (B-SIGNATURE). signed_at is outside the
 * signed hash, so the key must not have rotated at signed_at nor at
 * signed_floor, a signed time (the bundle's built_at; 0 when it has none). */
static int signature_block_check(const json_value_t *sigblk, const uint8_t digest[32],
				 const char *expect_msg, const pith_trust_t *trust,
				 int need_registry, int64_t signed_floor, const char *name,
				 pith_report_t *rep)
{
	pith_err_t err = {0};
	const char *fp = json_get_str(sigblk, "public_key_fingerprint");
	const char *kid = json_get_str(sigblk, "key_id");
	const char *sig = json_get_str(sigblk, "signature_b64");
	const char *msg = json_get_str(sigblk, "signed_message");
	/* B-SIGNATURE: signed_at not a string is as if absent (time 0); a
	 * string must be a timestamp, without NUL */
	const char *sa = json_get_str(sigblk, "signed_at");
	int sa_nul = sa && !str_no_nul(sigblk, "signed_at");
	int64_t us = 0;
	if (!fp || !kid || !sig) {
		pith_report_add(rep, name, 0, "signature block missing or incomplete");
		return -1;
	}
	const char *alg = json_get_str(sigblk, "algorithm");
	if (alg && strcmp(alg, "ed25519")) {
		pith_report_add(rep, name, 0, "algorithm is %.20s, expected ed25519", alg);
		return -1;
	}
	if (msg && strcmp(msg, expect_msg)) {
		pith_report_add(rep, name, 0, "signed_message is %.40s, expected %s", msg, expect_msg);
		return -1;
	}
	if (sa && (sa_nul || pith_time_parse_valid(sa, PITH_TIME_FRACTION, &us))) {
		pith_report_add(rep, name, 0, "signed_at is not a timestamp");
		return -1;
	}
	const pith_key_t *k;
	if (us < signed_floor)
		us = signed_floor;
	if (pith_trust_check(trust, fp, kid, us, &k, &err)) {
		pith_report_add(rep, name, 0, "%s", err.msg);
		report_mark_untrusted(rep);
		return -1;
	}
	if (need_registry && !k->is_registry) {
		pith_report_add(rep, name, 0, "key %s is not a registry key", fp);
		report_mark_untrusted(rep);
		return -1;
	}
	int rc = pith_sig_verify_b64(k, digest, sig);
	pith_report_add(rep, name, rc == 0, rc ? "Ed25519 signature does not verify"
			: "Ed25519 by %s (%s)", k->key_id, k->fp);
	return rc;
}

/* Whether ev is a record_created whose receipt is by a key trust does not
 * hold as a registry key (the merge then counts the event invalid, so the
 * state cannot be checked against the sender's). */
static int receipt_is_untrusted(const pith_event_t *ev, const pith_trust_t *trust)
{
	if (strcmp(ev->event_type, "record_created"))
		return 0;
	const json_value_t *p = json_get(ev->root, "payload");
	const json_value_t *rec = json_get_type(p, "canonical_record", JSON_OBJECT);
	char hex[65], pith[PITH_NUMBER_LEN + 1];
	uint8_t d[32];
	pith_err_t err = {0};
	if (!rec || pith_record_identify(rec, d, hex, pith, &err))
		return 0;
	int rc = pith_receipt_verify(json_get(p, "receipt"), hex, trust, &err);
	return rc == PITH_EUNTRUSTED || rc == PITH_EROTATED;
}

int pith_receipt_precheck_prepare(pith_event_t *ev, const pith_trust_t *trust,
				  pith_sig_check_t *sc, pith_receipt_pre_t *pre)
{
	if (!trust || strcmp(ev->event_type, "record_created"))
		return 0;
	const json_value_t *p = json_get(ev->root, "payload");
	const json_value_t *rec = json_get_type(p, "canonical_record", JSON_OBJECT);
	char hex[65], pith[PITH_NUMBER_LEN + 1];
	uint8_t d[32], digest[32];
	pith_err_t err = {0};
	pith_key_t reg;
	const pith_key_t *k = NULL;
	const char *sig;
	if (!rec || pith_record_identify(rec, d, hex, pith, &err))
		return 0; /* the merge's check decides */
	memcpy(ev->rec_hex, hex, sizeof(hex));
	memcpy(ev->rec_pith, pith, sizeof(pith));
	/* nothing to verify ahead otherwise */
	return !receipt_ready(json_get(p, "receipt"), hex, trust, &reg, &k, digest, &sig, pre->mk,
			      &pre->slot, &err) &&
	       !memo_has(pre->slot, pre->mk) && !pith_sig_check_prepare(sc, k, digest, sig);
}

void pith_receipt_precheck_finish(const pith_receipt_pre_t *pre, const pith_sig_check_t *sc)
{
	if (sc->ok)
		memo_put(pre->slot, pre->mk);
}

/* Nesting of v (docs/merge.md section 0: the outermost container 1). */
static unsigned nesting(const json_value_t *v)
{
	unsigned d = 0;
	if (v->type == JSON_ARRAY)
		for (size_t i = 0; i < v->len; i++) {
			unsigned k = nesting(v->u.items[i]);
			d = k > d ? k : d;
		}
	else if (v->type == JSON_OBJECT)
		for (size_t i = 0; i < v->len; i++) {
			unsigned k = nesting(v->u.members[i].value);
			d = k > d ? k : d;
		}
	else
		return 0;
	return d + 1;
}

/* B-EVENTS: an element must be an event a node would take alone too
 * (V-JSON's bounds on its canonical JSON, the bytes peers send it as),
 * else a node could store it from a bundle that a newer one replaces and
 * never give it to a peer that comes later. NULL, or why not. */
static const char *event_bound_fault(const json_value_t *ev)
{
	if (nesting(ev) > PITH_EVENT_MAX_DEPTH)
		return "the event nests deeper than an event may (32)";
	pith_buf_t b = PITH_BUF_INIT;
	int big = json_canon_write(ev, &b) || b.len > PITH_EVENT_MAX_BYTES;
	pith_buf_release(&b);
	return big ? "the event's canonical JSON is over an event's 1 MiB" : NULL;
}

int pith_bundle_verify(const json_value_t *b, const pith_trust_t *trust,
		       pith_report_t *rep)
{
	char hex[65], pith[PITH_NUMBER_LEN + 1], name[64];
	size_t failed0 = rep->failed;
	const char *t = json_get_str(b, "bundle_type"), *v = json_get_str(b, "bundle_version");
	pith_report_add(rep, "bundle_type", t && v && !strcmp(t, "pith_open_graph_bundle") &&
			!strcmp(v, "1.0"), "%s %s", t ? t : "(missing)", v ? v : "(missing)");
	const char *built = str_no_nul(b, "built_at");
	int64_t built_us = 0;
	int built_ok = built && !pith_time_parse_valid(built, PITH_TIME_FRACTION, &built_us);
	pith_report_add(rep, "built_at", built_ok, "%.40s", built ? built : "(missing or not a string)");
	if (!built_ok)
		built_us = 0;
	const json_value_t *rec = json_get_type(b, "canonical_record", JSON_OBJECT);
	check_record_ids(b, rec, rep, hex, pith);
	check_aliases(json_get(b, "source_aliases"), rec, pith, "source_aliases", rep);

	uint8_t bh[32];
	char bhex[65];
	pith_bundle_hash(b, bh);
	pith_hex_encode(bh, 32, bhex);
	const char *bclaim = json_get_str(json_get(b, "bundle_signature"), "bundle_sha256");
	pith_report_add(rep, "bundle_sha256", !bclaim || !strcmp(bclaim, bhex), "%s%s%s", bhex,
			bclaim && strcmp(bclaim, bhex) ? " recomputed, claimed " : "",
			bclaim && strcmp(bclaim, bhex) ? bclaim : "");
	signature_block_check(json_get(b, "bundle_signature"), bh, "bundle_sha256_bytes",
			      trust, 1, built_us, "bundle_signature", rep);

	const json_value_t *evs = json_get_type(b, "events", JSON_ARRAY);
	size_t nev = evs ? evs->len : 0;
	pith_event_t **list = calloc(nev ? nev : 1, sizeof(*list));
	size_t nok = 0, nuntrusted = 0;
	if (!evs)
		pith_report_add(rep, "events", 0, "missing or not an array");
	for (size_t i = 0; list && i < nev; i++) {
		pith_err_t err = {0};
		pith_event_check_t failed;
		const char *bound = event_bound_fault(evs->u.items[i]);
		if (bound) {
			snprintf(name, sizeof(name), "events[%zu].json", i);
			pith_report_add(rep, name, 0, "%s", bound);
			continue;
		}
		snprintf(name, sizeof(name), "events[%zu]", i);
		if (pith_event_verify_value(evs->u.items[i], trust, &list[nok], &failed, &err)) {
			snprintf(name, sizeof(name), "events[%zu].%s", i, pith_event_check_name(failed));
			pith_report_add(rep, name, 0, "%s", err.msg);
			if (failed == PITH_CHECK_KEY || failed == PITH_CHECK_ROTATED) {
				report_mark_untrusted(rep);
				nuntrusted++;
			}
			continue;
		}
		pith_report_add(rep, name, 1, "%s signed by %s", list[nok]->event_id,
				list[nok]->signer_key_id);
		nuntrusted += receipt_is_untrusted(list[nok], trust);
		nok++;
	}
	const json_value_t *st = json_get_type(b, "state", JSON_OBJECT);
	const char *claimed = json_get_str(st, "state_sha256");
	if (!st || !claimed) {
		pith_report_add(rep, "state_sha256", 0, "state or state.state_sha256 missing");
	} else {
		/* the published state must hash to its own claim ... */
		static const char *const skip[] = {"state_sha256"};
		pith_buf_t sb = PITH_BUF_INIT;
		uint8_t sd[32];
		char shex[65];
		json_canon_write_skip(st, skip, 1, &sb);
		pith_sha256(sb.data, sb.len, sd);
		pith_buf_release(&sb);
		pith_hex_encode(sd, 32, shex);
		pith_report_add(rep, "state.self_hash", !strcmp(shex, claimed), "%s", shex);
		/* ... and our own merge of the events must give the same state */
		pith_state_t ms;
		pith_err_t err = {0};
		if (pith_merge_ex(pith, list, nok, json_get(b, "source_aliases"), trust, &ms, &err)) {
			pith_report_add(rep, "state_sha256", 0, "%s", err.msg);
		} else {
			pith_report_add(rep, "state_sha256", !strcmp(ms.state_sha256, claimed),
					"%s%s%s", ms.state_sha256,
					strcmp(ms.state_sha256, claimed) ? " recomputed, claimed " : "",
					strcmp(ms.state_sha256, claimed) ? claimed : "");
			/* merged without the events (or receipts) this node
			 * cannot verify: the state says nothing about the
			 * sender then */
			if (nuntrusted)
				report_mark_untrusted(rep);
			pith_state_release(&ms);
		}
	}
	for (size_t i = 0; i < nok; i++)
		pith_event_free(list[i]);
	free(list);
	return rep->failed > failed0 ? PITH_EMISMATCH : 0;
}

int pith_event_verify_report(const json_value_t *e, const pith_trust_t *trust,
			     pith_report_t *rep)
{
	size_t failed0 = rep->failed;
	pith_event_t *ev = NULL;
	pith_event_check_t failed;
	pith_err_t err = {0};
	if (pith_event_verify_value(e, trust, &ev, &failed, &err)) {
		static const pith_event_check_t order[] = {
			PITH_CHECK_SHAPE, PITH_CHECK_CONTENT_HASH, PITH_CHECK_EVENT_ID,
			PITH_CHECK_KEY, PITH_CHECK_ROTATED, PITH_CHECK_SIGNATURE};
		for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
			if (order[i] == failed) {
				pith_report_add(rep, pith_event_check_name(failed), 0, "%s", err.msg);
				break;
			}
			if (order[i] != PITH_CHECK_ROTATED)
				pith_report_add(rep, pith_event_check_name(order[i]), 1, "ok");
		}
		return PITH_EMISMATCH;
	}
	char hex[65];
	pith_hex_encode(ev->content_hash, 32, hex);
	pith_report_add(rep, "shape", 1, "%s for %s", ev->event_type, ev->subject);
	pith_report_add(rep, "content_sha256", 1, "%s", hex);
	pith_report_add(rep, "event_id", 1, "%s", ev->event_id);
	pith_report_add(rep, "key", 1, "%s (%s)", ev->signer_key_id, ev->signer_fp);
	pith_report_add(rep, "signature", 1, "Ed25519 verifies");
	if (!strcmp(ev->event_type, "record_created")) {
		const json_value_t *p = json_get(e, "payload");
		const json_value_t *rec = json_get_type(p, "canonical_record", JSON_OBJECT);
		char rhex[65], pith[PITH_NUMBER_LEN + 1];
		uint8_t d[32];
		if (!rec || pith_record_identify(rec, d, rhex, pith, &err)) {
			pith_report_add(rep, "payload.canonical_record", 0, "missing or malformed");
		} else {
			const char *c = json_get_str(p, "canonical_sha256");
			pith_report_add(rep, "payload.canonical_sha256", c && !strcmp(c, rhex), "%s", rhex);
			pith_report_add(rep, "subject_pith_number", !strcmp(pith, ev->subject), "%s", pith);
			int rc = pith_receipt_verify(json_get(p, "receipt"), rhex, trust, &err);
			pith_report_add(rep, "payload.receipt", rc == 0, "%s", rc ? err.msg : "Ed25519 verifies");
		}
	}
	pith_event_free(ev);
	return rep->failed > failed0 ? PITH_EMISMATCH : 0;
}

int pith_record_verify(const json_value_t *o, const pith_trust_t *trust,
		       pith_report_t *rep)
{
	size_t failed0 = rep->failed;
	char hex[65], pith[PITH_NUMBER_LEN + 1];
	const json_value_t *rec = json_get_type(o, "canonical_record", JSON_OBJECT);
	check_record_ids(o, rec, rep, hex, pith);
	const json_value_t *receipt = json_get(o, "receipt");
	if (receipt && hex[0]) {
		pith_err_t err = {0};
		int rc = pith_receipt_verify(receipt, hex, trust, &err);
		pith_report_add(rep, "receipt", rc == 0, "%s", rc ? err.msg : "Ed25519 verifies");
	}
	const json_value_t *al = json_get(o, "aliases");
	if (!al)
		al = json_get(o, "source_aliases");
	if (al && hex[0])
		check_aliases(al, rec, pith, "aliases", rep);
	return rep->failed > failed0 ? PITH_EMISMATCH : 0;
}

json_value_t *pith_receipt_make(json_doc_t *d, const char *canonical_hex,
				const pith_key_t *key, const uint8_t secret[64])
{
	uint8_t digest[32];
	char sig[89], now[32];
	if (pith_hex_decode(canonical_hex, strlen(canonical_hex), digest, 32))
		return NULL;
	pith_sig_sign_b64(secret, digest, sig);
	pith_time_now(now, 1);
	json_value_t *r = json_new_object(d);
	int rc = !r;
	rc = rc || json_object_set(d, r, "kind", json_new_string(d, "pith_receipt"));
	rc = rc || json_object_set(d, r, "key_id", json_new_string(d, key->key_id));
	rc = rc || json_object_set(d, r, "algorithm", json_new_string(d, "ed25519"));
	rc = rc || json_object_set(d, r, "signed_at", json_new_string(d, now));
	rc = rc || json_object_set(d, r, "signature_b64", json_new_string(d, sig));
	rc = rc || json_object_set(d, r, "signed_message", json_new_string(d, "canonical_sha256_bytes"));
	rc = rc || json_object_set(d, r, "canonical_sha256", json_new_string(d, canonical_hex));
	rc = rc || json_object_set(d, r, "public_key_fingerprint", json_new_string(d, key->fp));
	rc = rc || json_object_set(d, r, "signature_status", json_new_string(d, "signed_v1"));
	return rc ? NULL : r;
}
