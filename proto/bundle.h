/* Verification of the registry's signed objects as a list of named checks:
 * bundles (spec section 5), single events (section 4) and record views. */
#ifndef PITH_BUNDLE_H
#define PITH_BUNDLE_H

#include <stddef.h>

#include "json.h"
#include "merge.h"
#include "trust.h"

typedef struct pith_check {
	char name[64];   /* e.g. "bundle_sha256", "events[1].signature" */
	int ok;
	char value[200]; /* the recomputed value, or why it failed */
	int untrusted;   /* failed only because of this node's trust store */
} pith_check_t;

typedef struct pith_report {
	pith_check_t *checks;
	size_t n, cap;
	size_t failed;
	size_t untrusted; /* of the failed checks, those marked untrusted */
} pith_report_t;

void pith_report_release(pith_report_t *r);
int pith_report_add(pith_report_t *r, const char *name, int ok, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Whether every failed check of rep (at least one) failed only because
 * of the verifier's trust store: a signer key it does not trust, that
 * had rotated, or that is no registry key here, and what cannot be
 * judged without those signatures. Another node with a wider trust store
 * may accept the object, so relaying it is no fault of the sender
 * (docs/pithd.md, "Budgets and misbehaviour"). */
int pith_report_is_untrusted_only(const pith_report_t *r);

/* B-JSON (docs/merge.md): a bundle is at most 64 MiB, and nests at most
 * 40 arrays and objects, the outermost counting 1: the events' 32
 * (PITH_EVENT_MAX_DEPTH) plus the 8 levels a bundle puts around an event's
 * content (bundle, events, and in its state: state, current, a list, a
 * projection, the payload). */
#define PITH_BUNDLE_MAX_BYTES (64u << 20)
#define PITH_BUNDLE_MAX_DEPTH (PITH_EVENT_MAX_DEPTH + 8)

typedef enum pith_doc_kind {
	PITH_DOC_UNKNOWN = 0,
	PITH_DOC_BUNDLE,
	PITH_DOC_EVENT,
	PITH_DOC_RECORD,   /* a record view, /pith/{ID}.json */
	PITH_DOC_STATE,
	PITH_DOC_RECEIPT,  /* a receipt: kind pith_receipt */
} pith_doc_kind_t;

/* What kind of signed object root looks like. A bundle is an object with
 * a top-level bundle_type or bundle_signature member, whatever its value
 * (docs/merge.md, D-KIND). */
pith_doc_kind_t pith_doc_kind(const json_value_t *root);

/* Whether the text of an item holds the bytes "bundle_type" or
 * "bundle_signature" (quotes included): only such an item may be a bundle
 * (D-KIND); every other one is read as an event without parsing it twice. */
int pith_text_names_bundle(const uint8_t *p, size_t len);

/* D-KIND: PITH_DOC_BUNDLE when the item is to be checked as a bundle (its
 * text names one, and it does not parse within B-JSON's bounds or parses
 * to an object pith_doc_kind calls a bundle), else PITH_DOC_EVENT. */
pith_doc_kind_t pith_item_kind(const uint8_t *p, size_t len);

/* The refusal name (docs/merge.md, "Names of refusals") of a bundle that
 * failed pith_bundle_verify: that of the first failed check in rep, which
 * is the first failing rule B-TYPE ... B-STATE; "bundle" when rep holds
 * no failed check. Static strings. */
const char *pith_bundle_refusal(const pith_report_t *rep);
/* The rule id ("B-TYPE" ... "B-STATE") and the refusal name of one check
 * name of a report ("built_at", "events[3].signature", ...); "B-UNKNOWN"
 * and "bundle" for a name pith_bundle_verify does not write. */
const char *pith_bundle_check_rule(const char *check);
const char *pith_bundle_check_refusal(const char *check);

/* Runs every check of a bundle into rep. Returns 0 if all passed, else
 * PITH_EMISMATCH (the report names the failing checks). */
int pith_bundle_verify(const json_value_t *bundle, const pith_trust_t *trust,
		       pith_report_t *rep);
int pith_event_verify_report(const json_value_t *event, const pith_trust_t *trust,
			     pith_report_t *rep);
int pith_record_verify(const json_value_t *record, const pith_trust_t *trust,
		       pith_report_t *rep);

/* The receipt of a record_created event checked ahead, so that the merge,
 * which re-checks it, finds the answer memoised: for the validating
 * threads, to keep the signature off the one thread that merges, and to
 * verify receipts in batches (pith_sig_check_many) as they verify the
 * events' signatures. prepare returns 1 and fills *sc (the caller's, to
 * batch) and *pre when there is a receipt to verify; 0 when there is
 * nothing (another event type, a receipt the merge will refuse anyway,
 * one already memoised, or no trust store). Once *sc has run, finish
 * memoises a receipt that verified. The merge's own check decides.
 * prepare also keeps the record's hash and pith number on ev (rec_hex,
 * rec_pith) when it computed them. */
typedef struct pith_receipt_pre {
	uint8_t mk[32];
	unsigned slot;
} pith_receipt_pre_t;
int pith_receipt_precheck_prepare(pith_event_t *ev, const pith_trust_t *trust,
				  pith_sig_check_t *sc, pith_receipt_pre_t *pre);
void pith_receipt_precheck_finish(const pith_receipt_pre_t *pre, const pith_sig_check_t *sc);

/* Verifies a receipt over canonical_hex against a registry key. */
int pith_receipt_verify(const json_value_t *receipt, const char *canonical_hex,
			const pith_trust_t *trust, pith_err_t *err);

/* A receipt object for canonical_hex signed with a registry key (for test
 * meshes and generators). NULL on OOM. */
json_value_t *pith_receipt_make(json_doc_t *doc, const char *canonical_hex,
				const pith_key_t *key, const uint8_t secret[64]);

/* Bundle hash (without bundle_signature) and its signature check. */
int pith_bundle_hash(const json_value_t *bundle, uint8_t out[static 32]);

#endif
