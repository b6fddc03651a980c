/* libFuzzer harness for event validation and the merge: the code that
 * decides, from bytes a peer or a file supplies, what every mirror's state
 * of a record is (docs/merge.md).
 *
 * For every input:
 * 1. pith_event_parse of the bytes as they are: accepted, or refused with
 *    a named check and a message; pith_keyfile_parse of them (a key file,
 *    as --trust-key reads one); if the bytes are JSON, pith_bundle_verify,
 *    pith_event_verify_report and pith_record_verify of them run too
 *    (reports, no crash).
 * 2. If the JSON is an object, the harness makes it authentic: it signs it
 *    in place with a test key (the registry key or an operator key, by the
 *    input's length), after giving a record_created whose payload holds a
 *    canonical_record its canonical_sha256 and a registry receipt (and, for
 *    half the inputs, the subject derived from the record). A fuzzer can not
 *    forge signatures; this lets it reach the merge rules with any shape.
 * 3. That event is merged with a fixed record (record_created, a graph
 *    snapshot, an attestation and a mirror hint): in order, and reversed
 *    with the event given twice, and with a re-signed copy of the event
 *    (another signed_at) in its place. All three states must be the same
 *    bytes, must parse, and their state_sha256 must be the hash of the
 *    rest. The event is also merged alone for its own subject.
 * A broken invariant aborts, so the fuzzer (or the replay driver in the
 * normal suite) reports it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "event.h"
#include "fuzz_check.h"
#include "ids.h"
#include "json.h"
#include "merge.h"
#include "testgen.h"
#include "trust.h"

#define NBASE 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tg_key_t reg, op;
static pith_trust_t *trust;
static pith_event_t *base[NBASE];
static char base_pith[PITH_NUMBER_LEN + 1];
/* FUZZ_MERGE_STATS=1 in the environment prints how far inputs got */
static unsigned long n_inputs, n_json_objects, n_authentic;

static void print_stats(void)
{
	fprintf(stderr, "fuzz_merge: %lu inputs, %lu JSON objects, %lu authentic events merged\n",
		n_inputs, n_json_objects, n_authentic);
}

static void setup(void)
{
	tg_key_make(&reg, 1, "test-registry", 1);
	tg_key_make(&op, 2, "op-one", 0);
	trust = pith_trust_new();
	FUZZ_CHECK(trust && !pith_trust_add(trust, &reg.key) && !pith_trust_add(trust, &op.key));
	pith_buf_t rec = PITH_BUF_INIT, b[NBASE];
	tg_record(7, &rec, base_pith);
	pith_buf_release(&rec);
	memset(b, 0, sizeof(b));
	char first[PITH_EVENT_ID_LEN + 1], id[PITH_EVENT_ID_LEN + 1];
	FUZZ_CHECK(!tg_event(&b[0], &reg, "record_created", base_pith, "record", "2026-01-01T00:00:00Z",
			     NULL, NULL, NULL, 0, 7, first));
	FUZZ_CHECK(!tg_event(&b[1], &reg, "graph_snapshot", base_pith, "graph", "2026-01-02T00:00:00Z",
			     "{\"nodes\":1}", first, NULL, 0, -1, id));
	FUZZ_CHECK(!tg_event(&b[2], &op, "author_attestation", base_pith, "record",
			     "2026-01-03T00:00:00Z", "{\"author\":\"a\"}", NULL, NULL, 0, -1, id));
	FUZZ_CHECK(!tg_event(&b[3], &op, "mirror_hint", base_pith, "t", "2026-01-04T00:00:00Z",
			     "{\"url\":\"https://m.example/\"}", NULL, NULL, 0, -1, id));
	for (int i = 0; i < NBASE; i++) {
		pith_err_t err = {0};
		if (pith_event_parse(b[i].data, b[i].len, trust, &base[i], NULL, &err))
			fprintf(stderr, "fuzz_merge: base event %d: %s\n", i, err.msg);
		FUZZ_CHECK(base[i] != NULL);
		pith_buf_release(&b[i]);
	}
}

/* Merges evs for subject; 0 and the canonical state in out, or the merge's
 * error (a subject that is not a pith number). */
static int merge_canon(const char *subject, pith_event_t *const *evs, size_t n, pith_buf_t *out)
{
	pith_state_t st;
	pith_err_t err = {0};
	pith_buf_reset(out);
	int rc = pith_merge_ex(subject, evs, n, NULL, trust, &st, &err);
	if (rc) {
		FUZZ_CHECK(err.msg[0]);
		return rc;
	}
	FUZZ_CHECK(pith_state_canon(&st, out) == 0);
	/* the state parses, and state_sha256 is the hash of the rest */
	json_doc_t *d = NULL;
	FUZZ_CHECK(json_parse(&d, out->data, out->len, NULL, NULL) == 0);
	static const char *const skip[] = {"state_sha256"};
	pith_buf_t rest = PITH_BUF_INIT;
	uint8_t h[32];
	char hx[65];
	FUZZ_CHECK(json_canon_write_skip(json_doc_root(d), skip, 1, &rest) == 0);
	pith_sha256(rest.data, rest.len, h);
	pith_hex_encode(h, 32, hx);
	const char *claimed = json_get_str(json_doc_root(d), "state_sha256");
	FUZZ_CHECK(claimed && !strcmp(claimed, hx) && !strcmp(st.state_sha256, hx));
	pith_buf_release(&rest);
	json_doc_free(d);
	pith_state_release(&st);
	return 0;
}

/* Gives a record_created with a canonical_record its hash and a receipt,
 * and, if set_subject, the subject its record names. */
static void fix_record_created(json_doc_t *d, json_value_t *ev, int set_subject)
{
	const char *type = json_get_str(ev, "event_type");
	json_value_t *p = (json_value_t *)json_get(ev, "payload");
	const json_value_t *r = json_get(p, "canonical_record");
	if (!type || strcmp(type, "record_created") || !json_is(p, JSON_OBJECT) || !r)
		return;
	uint8_t dig[32];
	char hx[65], pith[PITH_NUMBER_LEN + 1];
	if (pith_record_identify(r, dig, hx, pith, NULL))
		return;
	json_object_set(d, p, "canonical_sha256", json_new_string(d, hx));
	json_value_t *receipt = pith_receipt_make(d, hx, &reg.key, reg.sk);
	if (receipt)
		json_object_set(d, p, "receipt", receipt);
	if (set_subject)
		json_object_set(d, ev, "subject_pith_number", json_new_string(d, pith));
}

/* Signs root with k and parses the result back as a verified event. */
static pith_event_t *sign_and_parse(json_doc_t *d, json_value_t *root, const tg_key_t *k)
{
	pith_buf_t b = PITH_BUF_INIT;
	pith_event_t *ev = NULL;
	pith_err_t err = {0};
	pith_event_check_t failed = PITH_CHECK_OK;
	if (pith_event_sign(d, root, &k->key, k->sk, &err) == 0 && json_canon_write(root, &b) == 0) {
		if (pith_event_parse(b.data, b.len, trust, &ev, &failed, &err)) {
			/* authentic now: only the shape (or size) may be refused */
			FUZZ_CHECK(failed == PITH_CHECK_SHAPE || failed == PITH_CHECK_JSON);
			FUZZ_CHECK(err.msg[0]);
		}
	}
	pith_buf_release(&b);
	return ev;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		setup();
		ready = 1;
		if (getenv("FUZZ_MERGE_STATS"))
			atexit(print_stats);
	}
	n_inputs++;
	pith_event_t *ev = NULL;
	pith_event_check_t failed = PITH_CHECK_OK;
	pith_err_t err = {0};
	if (pith_event_parse(data, size, trust, &ev, &failed, &err)) {
		FUZZ_CHECK(ev == NULL && failed > PITH_CHECK_OK && failed < PITH_CHECK_NCHECKS);
		FUZZ_CHECK(err.msg[0]);
	}
	pith_event_free(ev);
	pith_key_t key;
	uint8_t secret[64];
	int has_secret = 0;
	err.msg[0] = 0;
	if (pith_keyfile_parse(data, size, &key, secret, &has_secret, &err))
		FUZZ_CHECK(err.msg[0]);

	json_doc_t *d = NULL;
	if (json_parse(&d, data, size, NULL, NULL))
		return 0;
	json_value_t *root = json_doc_root(d);
	pith_report_t rep;
	memset(&rep, 0, sizeof(rep));
	(void)pith_bundle_verify(root, trust, &rep);
	pith_report_release(&rep);
	memset(&rep, 0, sizeof(rep));
	(void)pith_event_verify_report(root, trust, &rep);
	pith_report_release(&rep);
	memset(&rep, 0, sizeof(rep));
	(void)pith_record_verify(root, trust, &rep);
	pith_report_release(&rep);
	if (!json_is(root, JSON_OBJECT)) {
		json_doc_free(d);
		return 0;
	}

	n_json_objects++;
	fix_record_created(d, root, size & 2);
	ev = sign_and_parse(d, root, size & 1 ? &op : &reg);
	if (!ev) {
		json_doc_free(d);
		return 0;
	}
	n_authentic++;
	/* the same event re-signed later: another signature block, same id */
	json_value_t *sig = (json_value_t *)json_get(root, "signature");
	pith_event_t *again = NULL;
	if (json_is(sig, JSON_OBJECT)) {
		json_object_set(d, sig, "signed_at", json_new_string(d, "2099-01-01T00:00:00.000000Z"));
		pith_buf_t b = PITH_BUF_INIT;
		FUZZ_CHECK(json_canon_write(root, &b) == 0);
		err.msg[0] = 0;
		if (pith_event_parse(b.data, b.len, trust, &again, NULL, &err))
			fprintf(stderr, "fuzz_merge: re-signed copy refused: %s\n", err.msg);
		FUZZ_CHECK(again != NULL);
		pith_buf_release(&b);
	}

	pith_event_t *in_order[NBASE + 1], *reversed[NBASE + 2], *resigned[NBASE + 1];
	for (int i = 0; i < NBASE; i++) {
		in_order[i] = base[i];
		reversed[NBASE - 1 - i] = base[i];
		resigned[i] = base[i];
	}
	in_order[NBASE] = ev;
	reversed[NBASE] = ev;
	reversed[NBASE + 1] = ev;
	resigned[NBASE] = again;
	pith_buf_t s1 = PITH_BUF_INIT, s2 = PITH_BUF_INIT, s3 = PITH_BUF_INIT;
	FUZZ_CHECK(merge_canon(base_pith, in_order, NBASE + 1, &s1) == 0);
	FUZZ_CHECK(merge_canon(base_pith, reversed, NBASE + 2, &s2) == 0);
	FUZZ_CHECK(merge_canon(base_pith, resigned, NBASE + 1, &s3) == 0);
	FUZZ_CHECK(s1.len == s2.len && !memcmp(s1.data, s2.data, s1.len));
	FUZZ_CHECK(s1.len == s3.len && !memcmp(s1.data, s3.data, s1.len));
	/* alone, for the subject it names */
	const char *subject = json_get_str(root, "subject_pith_number");
	if (subject && pith_number_is_valid(subject)) {
		pith_event_t *alone[2] = {ev, again};
		FUZZ_CHECK(merge_canon(subject, alone, 1, &s1) == 0);
		FUZZ_CHECK(merge_canon(subject, alone + 1, 1, &s2) == 0);
		FUZZ_CHECK(s1.len == s2.len && !memcmp(s1.data, s2.data, s1.len));
	}
	pith_buf_release(&s1);
	pith_buf_release(&s2);
	pith_buf_release(&s3);
	pith_event_free(ev);
	pith_event_free(again);
	json_doc_free(d);
	return 0;
}
