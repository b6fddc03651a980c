/* The conformance corpus (tests/conformance/README.md): evaluating one
 * case the way docs/merge.md says, so that `pithctl conformance` and the
 * corpus generator share one reading of a case. Pure: a parsed case in,
 * what this implementation answers out. */
#ifndef PITH_CONFORM_H
#define PITH_CONFORM_H

#include <stddef.h>

#include "buf.h"
#include "err.h"
#include "json.h"

#define PITH_CONFORM_MAX_DOCS 256

/* What this implementation makes of a "merge" case. */
typedef struct pith_conform_merge {
	size_t ndocs;
	/* per document: "accepted" or the rule id of the first failing check
	 * (V-JSON ... V-SIGNATURE for events, B-JSON ... B-STATE for bundles);
	 * static strings */
	const char *outcome[PITH_CONFORM_MAX_DOCS];
	/* per document: "accepted" or the refusal's name, as pithctl import
	 * counts it ("json", "too_big", "shape", ... "bundle_state") */
	const char *reason[PITH_CONFORM_MAX_DOCS];
	/* per document: "event" or "bundle", as read (an "item" by D-KIND) */
	const char *kind[PITH_CONFORM_MAX_DOCS];
	pith_buf_t state;     /* canonical bytes of the state */
	char state_sha256[65];
} pith_conform_merge_t;

/* Runs the documents of a merge case c against its trust keys and merges
 * what was accepted (docs/merge.md sections 3-5). 0, or a negative code
 * when the case itself is malformed (err says why). Release out with
 * pith_conform_merge_release. */
int pith_conform_merge_eval(const json_value_t *c, pith_conform_merge_t *out, pith_err_t *err);
void pith_conform_merge_release(pith_conform_merge_t *out);

/* The answer of this implementation to one case of a list file (kind
 * canonical_json, timestamp, record_identity, key_fingerprint, ed25519;
 * state_root, state_root_proof, state_root_document: stateroot.h),
 * as canonical JSON text into out (reset first); null when the input is
 * refused. */
void pith_conform_answer(const char *kind, const json_value_t *c, pith_buf_t *out);

/* Checks one case file's root (any kind) against this implementation.
 * Calls fail(arg, case_name, what) once per failing case; adds to *cases
 * and *failed. 0, or a negative code when the file is not a case file. */
typedef void (*pith_conform_fail_fn)(void *arg, const char *case_name, const char *what);
int pith_conform_check(const json_value_t *root, pith_conform_fail_fn fail, void *arg,
		       size_t *cases, size_t *failed, pith_err_t *err);

/* This implementation's answers to one case file (any kind), as JSON in
 * the case's own member names, so that a runner compares them member by
 * member (tests/conformance/run.py): for a merge case
 * {"documents":[{"expect","expect_reason"}...],"expect_state",
 * "expect_state_sha256"}; for a list file {"cases":[{"name","expect"}...]}.
 * 0, or a negative code when root is no case file (err says why). */
int pith_conform_answer_file(const json_value_t *root, pith_buf_t *out, pith_err_t *err);

#endif
