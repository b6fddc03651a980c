/* libFuzzer harness for what `pithctl audit` reads from a mirror (issue
 * 57, docs/state-root.md): a range answer (/api/root/range), a proof
 * (/api/proof/{ID}'s "proof") and a signed root document (/api/root),
 * each parsed and then checked as the audit checks them. The first byte
 * picks which; the rest is the document.
 *
 * Invariants: every call returns 0 or a negative code; a parsed range
 * answer's counts and bits are within their bounds, and one that passes
 * its check is written back and parsed again to the same answer; a
 * parsed proof has at most 130 steps; a document verifies only under the
 * one key it is checked with, and then its fields are NUL-terminated. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_check.h"
#include "stateroot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pith_sr_range_t r, r2;
static pith_sr_proof_t p;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	pith_err_t err = {0};
	const uint8_t *doc = data + 1;
	size_t len = size - 1;
	switch (data[0] % 3) {
	case 0: {
		int rc = pith_sr_range_parse(doc, len, &r, &err);
		FUZZ_CHECK(rc <= 0);
		if (rc)
			return 0;
		FUZZ_CHECK(r.plen <= PITH_SR_KEY_BITS && r.nleaves <= PITH_SR_RANGE_LEAVES);
		FUZZ_CHECK(r.node.bits <= PITH_SR_KEY_BITS);
		rc = pith_sr_range_check(&r, &err);
		FUZZ_CHECK(rc <= 0);
		if (!rc) {
			pith_buf_t out = PITH_BUF_INIT;
			FUZZ_CHECK(!pith_sr_range_json(&r, &out));
			FUZZ_CHECK(!pith_sr_range_parse(out.data, out.len, &r2, &err));
			FUZZ_CHECK(r2.node.count == r.node.count && !memcmp(r2.node.hash, r.node.hash, 32));
			pith_buf_release(&out);
		}
		break;
	}
	case 1: {
		int rc = pith_sr_proof_parse(doc, len, &p, &err);
		FUZZ_CHECK(rc <= 0);
		if (rc)
			return 0;
		FUZZ_CHECK(p.n <= PITH_SR_KEY_BITS);
		int present = -1;
		rc = pith_sr_proof_check(&p, p.root, &present, &err);
		FUZZ_CHECK(rc <= 0 && (present == 0 || present == 1));
		break;
	}
	default: {
		/* the corpus's key (documents.json, "mirror-test-87") */
		static const char hex[] = "c84069fa2216c6edc1d52ca83aa11c267dd5440afa526090ca43ebd0ca86a9cf";
		pith_key_t key = {0};
		for (int i = 0; i < 32; i++) {
			unsigned v;
			sscanf(hex + 2 * i, "%2x", &v);
			key.pk[i] = (uint8_t)v;
		}
		pith_key_fingerprint(key.pk, key.fp);
		snprintf(key.key_id, sizeof(key.key_id), "mirror-test-87");
		pith_sr_doc_t d;
		int rc = pith_sr_doc_verify(doc, len, &key, &d, &err);
		FUZZ_CHECK(rc <= 0);
		if (!rc)
			FUZZ_CHECK(memchr(d.cursor, 0, sizeof(d.cursor)) && memchr(d.signed_at, 0, sizeof(d.signed_at)));
		break;
	}
	}
	return 0;
}
