/* The merge (docs/merge.md): the rules one by one, then properties over
 * generated event sets - permutation, duplication, re-signing and
 * splitting never change a state, and every event lands in one place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bundle.h"
#include "merge.h"
#include "test_util.h"
#include "testgen.h"

static tg_key_t reg, op1, op2;
static pith_trust_t *trust;

typedef struct evset {
	pith_buf_t bytes[512];
	size_t n;
} evset_t;

static void setup(void)
{
	tg_key_make(&reg, 1, "test-registry", 1);
	tg_key_make(&op1, 2, "op-one", 0);
	tg_key_make(&op2, 3, "op-two", 0);
	trust = pith_trust_new();
	pith_trust_add(trust, &reg.key);
	pith_trust_add(trust, &op1.key);
	pith_trust_add(trust, &op2.key);
}

static void set_clear(evset_t *s)
{
	for (size_t i = 0; i < s->n; i++)
		pith_buf_release(&s->bytes[i]);
	s->n = 0;
}

/* Adds an event, returns its id in id (may be NULL). */
static void add(evset_t *s, const tg_key_t *k, const char *type, const char *subject,
		const char *target, const char *created, const char *payload, const char *prev,
		const char *sup, int record_n, char *id)
{
	char tmp[PITH_EVENT_ID_LEN + 1];
	const char *sups[1] = {sup};
	pith_buf_t *b = &s->bytes[s->n++];
	memset(b, 0, sizeof(*b));
	if (tg_event(b, k, type, subject, target, created, payload, prev, sups, sup ? 1 : 0,
		     record_n, id ? id : tmp))
		fprintf(stderr, "cannot generate event\n");
	pith_buf_cstr(b);
}

/* Merges s (in the given order) and returns the canonical state bytes. */
static void merge_bytes(const char *subject, evset_t *s, const size_t *order, pith_buf_t *out)
{
	pith_event_t *evs[512];
	pith_err_t err = {0};
	size_t n = 0;
	for (size_t i = 0; i < s->n; i++) {
		size_t j = order ? order[i] : i;
		pith_event_check_t failed;
		if (pith_event_parse(s->bytes[j].data, s->bytes[j].len, trust, &evs[n], &failed, &err)) {
			fprintf(stderr, "event %zu does not verify: %s\n", j, err.msg);
			continue;
		}
		n++;
	}
	pith_state_t st;
	pith_buf_reset(out);
	if (pith_merge_ex(subject, evs, n, NULL, trust, &st, &err) == 0) {
		pith_state_canon(&st, out);
		pith_state_release(&st);
	}
	for (size_t i = 0; i < n; i++)
		pith_event_free(evs[i]);
	pith_buf_cstr(out);
}

static json_doc_t *merged(const char *subject, evset_t *s)
{
	pith_buf_t b = PITH_BUF_INIT;
	json_doc_t *d = NULL;
	merge_bytes(subject, s, NULL, &b);
	json_parse(&d, b.data, b.len, NULL, NULL);
	pith_buf_release(&b);
	return d;
}

static int id_in(const json_value_t *arr, const char *id)
{
	for (size_t i = 0; arr && i < arr->len; i++)
		if (arr->u.items[i]->type == JSON_STRING && !strcmp(arr->u.items[i]->u.str, id))
			return 1;
	return 0;
}

static const char *invalid_reason(const json_value_t *st, const char *id)
{
	const json_value_t *inv = json_get(st, "invalid_events");
	for (size_t i = 0; inv && i < inv->len; i++)
		if (!strcmp(json_get_str(inv->u.items[i], "event_id"), id))
			return json_get_str(inv->u.items[i], "reason");
	return NULL;
}

static char subj[PITH_NUMBER_LEN + 1];

static void record_subject(unsigned n)
{
	pith_buf_t b = PITH_BUF_INIT;
	tg_record(n, &b, subj);
	pith_buf_release(&b);
}

/* The bytes of the registry's sample bundle. */
static void read_registry_bundle(pith_buf_t *in)
{
	FILE *f = fopen(PITH_TEST_DATA "/bundle-AR7B3DEV.json", "rb");
	uint8_t chunk[4096];
	size_t k;
	while (f && (k = fread(chunk, 1, sizeof(chunk), f)) > 0)
		pith_buf_append(in, chunk, k);
	if (f)
		fclose(f);
}

TEST(reproduces_registry_state, "reproduces the registry's published state byte for byte")
{
	pith_buf_t in = PITH_BUF_INIT;
	read_registry_bundle(&in);
	json_doc_t *d = NULL;
	CHECK(json_parse(&d, in.data, in.len, NULL, NULL) == 0);
	const json_value_t *b = json_doc_root(d);
	const json_value_t *evs = json_get(b, "events");
	pith_event_t *list[2];
	CHECK(evs && evs->len == 2);
	for (size_t i = 0; i < 2; i++)
		CHECK(pith_event_verify_value(evs->u.items[1 - i], trust, &list[i], NULL, NULL) == 0);
	pith_state_t st;
	CHECK(pith_merge(json_get_str(b, "pith_number"), list, 2, json_get(b, "source_aliases"), &st, NULL) == 0);
	pith_buf_t mine = PITH_BUF_INIT, theirs = PITH_BUF_INIT;
	pith_state_canon(&st, &mine);
	json_canon_write(json_get(b, "state"), &theirs);
	CHECK_MEM_EQ(mine.data, mine.len, theirs.data, theirs.len);
	CHECK_STR_EQ(st.state_sha256, "3facdc2aeec0c5e2ff45dd750211a965091b49387ad1b15346dff0bb9a58c999");
	pith_state_release(&st);
	pith_event_free(list[0]);
	pith_event_free(list[1]);
	pith_buf_release(&mine);
	pith_buf_release(&theirs);
	pith_buf_release(&in);
	json_doc_free(d);
}

/* The registry bundle with its bundle_signature by k (the hash does not
 * cover the signature block); bad: flip a bit of the signature. */
static json_doc_t *bundle_signed_by(const tg_key_t *k, int bad)
{
	pith_buf_t in = PITH_BUF_INIT;
	uint8_t h[32];
	read_registry_bundle(&in);
	json_doc_t *d = NULL;
	if (json_parse(&d, in.data, in.len, NULL, NULL)) {
		pith_buf_release(&in);
		return NULL;
	}
	pith_buf_release(&in);
	json_value_t *b = json_doc_root(d);
	json_value_t *s = (json_value_t *)json_get(b, "bundle_signature");
	char sig[89];
	pith_bundle_hash(b, h);
	pith_sig_sign_b64(k->sk, h, sig);
	if (bad)
		sig[0] = sig[0] == 'A' ? 'B' : 'A';
	json_object_set(d, s, "key_id", json_new_string(d, k->key.key_id));
	json_object_set(d, s, "public_key_fingerprint", json_new_string(d, k->key.fp));
	json_object_set(d, s, "signature_b64", json_new_string(d, sig));
	return d;
}

TEST(bundle_untrusted_only, "tells a bundle signed by a key this node does not trust from a broken one")
{
	pith_report_t rep = {0};
	/* the same bundle, signed by the test registry key */
	json_doc_t *d = bundle_signed_by(&reg, 0);
	CHECK(d != NULL);
	CHECK_INT_EQ(pith_bundle_verify(json_doc_root(d), trust, &rep), 0);
	CHECK(!pith_report_is_untrusted_only(&rep));
	pith_report_release(&rep);
	/* a verifier that does not trust that key: only trust failed */
	pith_trust_t *narrow = pith_trust_new();
	CHECK(pith_bundle_verify(json_doc_root(d), narrow, &rep) != 0);
	CHECK_INT_EQ(rep.failed, 1);
	CHECK(pith_report_is_untrusted_only(&rep));
	pith_report_release(&rep);
	/* an operator key is trusted but may not sign bundles: trust again */
	tg_key_t op;
	tg_key_make(&op, 2, "op-one", 0);
	json_doc_free(d);
	d = bundle_signed_by(&op, 0);
	CHECK(pith_bundle_verify(json_doc_root(d), trust, &rep) != 0);
	CHECK(pith_report_is_untrusted_only(&rep));
	pith_report_release(&rep);
	/* a signature that does not verify under a trusted key: broken */
	json_doc_free(d);
	d = bundle_signed_by(&reg, 1);
	CHECK(pith_bundle_verify(json_doc_root(d), trust, &rep) != 0);
	CHECK(!pith_report_is_untrusted_only(&rep));
	pith_report_release(&rep);
	/* untrusted signer, and a state that does not match: broken too */
	json_doc_free(d);
	d = bundle_signed_by(&reg, 0);
	json_value_t *st = (json_value_t *)json_get(json_doc_root(d), "state");
	json_object_set(d, st, "state_sha256", json_new_string(d, "00"));
	CHECK(pith_bundle_verify(json_doc_root(d), narrow, &rep) != 0);
	CHECK(rep.failed > 1);
	CHECK(!pith_report_is_untrusted_only(&rep));
	pith_report_release(&rep);
	pith_trust_free(narrow);
	json_doc_free(d);
}

TEST(bundle_receipt_untrusted, "tells a bundle whose receipts are by a key not a registry key here from a broken one")
{
	/* events (and the record_created's receipt) by reg, the bundle signed
	 * by a second registry key; a verifier trusting reg only as a signer
	 * of events counts the record_created invalid, so its state differs */
	evset_t *s = calloc(1, sizeof(*s));
	tg_key_t reg2, reg_plain;
	tg_key_make(&reg2, 9, "test-registry-2", 1);
	tg_key_make(&reg_plain, 1, "test-registry", 0);
	pith_trust_t *wide = pith_trust_new(), *narrow = pith_trust_new();
	pith_trust_add(wide, &reg.key);
	pith_trust_add(wide, &reg2.key);
	pith_trust_add(narrow, &reg_plain.key);
	pith_trust_add(narrow, &reg2.key);
	record_subject(5);
	add(s, &reg, "record_created", subj, "record", "2026-01-01T00:00:00Z", NULL, NULL, NULL, 5, NULL);
	add(s, &reg, "mirror_hint", subj, "record", "2026-01-02T00:00:00Z",
	    "{\"mirror_hint\":{\"mirror_type\":\"https\",\"base_url\":\"https://m.example\"}}",
	    NULL, NULL, -1, NULL);
	pith_event_t *evs[2];
	pith_err_t err = {0};
	for (size_t i = 0; i < 2; i++)
		CHECK(pith_event_parse(s->bytes[i].data, s->bytes[i].len, wide, &evs[i], NULL, &err) == 0);
	pith_buf_t b = PITH_BUF_INIT;
	CHECK_INT_EQ(tg_bundle(subj, evs, 2, &reg2, wide, "2026-02-01T00:00:00Z", &b, &err), 0);
	json_doc_t *d = NULL;
	CHECK(json_parse(&d, b.data, b.len, NULL, NULL) == 0);
	pith_report_t rep = {0};
	CHECK_INT_EQ(pith_bundle_verify(json_doc_root(d), wide, &rep), 0);
	pith_report_release(&rep);
	CHECK(pith_bundle_verify(json_doc_root(d), narrow, &rep) != 0);
	CHECK_INT_EQ(rep.failed, 1);
	for (size_t i = 0; i < rep.n; i++)
		if (!rep.checks[i].ok)
			CHECK_STR_EQ(rep.checks[i].name, "state_sha256");
	CHECK(pith_report_is_untrusted_only(&rep));
	pith_report_release(&rep);
	/* the same with its state claim altered is broken under either */
	json_value_t *st = (json_value_t *)json_get(json_doc_root(d), "state");
	json_object_set(d, st, "state_sha256", json_new_string(d, "00"));
	CHECK(pith_bundle_verify(json_doc_root(d), narrow, &rep) != 0);
	CHECK(!pith_report_is_untrusted_only(&rep));
	pith_report_release(&rep);
	json_doc_free(d);
	pith_buf_release(&b);
	for (size_t i = 0; i < 2; i++)
		pith_event_free(evs[i]);
	pith_trust_free(wide);
	pith_trust_free(narrow);
	set_clear(s);
	free(s);
}

TEST(m2_invalid_reasons, "M2: marks each kind of semantically invalid event with its reason")
{
	evset_t *s = calloc(1, sizeof(*s));
	char other[PITH_NUMBER_LEN + 1];
	char id_unknown[80], id_target[80], id_subject[80], id_payload[80], id_rec_target[80];
	record_subject(1);
	pith_buf_t b = PITH_BUF_INIT;
	tg_record(2, &b, other);
	pith_buf_release(&b);
	add(s, &reg, "record_created", subj, "record", "2026-01-01T00:00:00Z", NULL, NULL, NULL, 1, NULL);
	add(s, &op1, "frobnication", subj, "record", "2026-01-02T00:00:00Z", "{}", NULL, NULL, -1, id_unknown);
	add(s, &op1, "graph_snapshot", subj, "record", "2026-01-03T00:00:00Z", "{\"graph_snapshot\":{}}", NULL, NULL, -1, id_target);
	add(s, &op1, "correction", other, "record", "2026-01-04T00:00:00Z", "{}", NULL, NULL, -1, id_subject);
	add(s, &op1, "graph_snapshot", subj, "graph", "2026-01-05T00:00:00Z", "{\"nothing\":1}", NULL, NULL, -1, id_payload);
	add(s, &reg, "record_created", subj, "graph", "2026-01-06T00:00:00Z", NULL, NULL, NULL, 1, id_rec_target);
	json_doc_t *d = merged(subj, s);
	const json_value_t *st = json_doc_root(d);
	CHECK_STR_EQ(invalid_reason(st, id_unknown), "unknown_event_type");
	CHECK_STR_EQ(invalid_reason(st, id_target), "wrong_target");
	CHECK_STR_EQ(invalid_reason(st, id_subject), "subject_mismatch");
	CHECK_STR_EQ(invalid_reason(st, id_payload), "bad_payload");
	CHECK_STR_EQ(invalid_reason(st, id_rec_target), "wrong_target");
	CHECK_STR_EQ(json_get(st, "invalid_event_count")->u.str, "5");
	CHECK_STR_EQ(json_get(st, "valid_event_count")->u.str, "1");
	json_doc_free(d);
	set_clear(s);
	free(s);
}

TEST(m2_record_checks, "M2: a record_created with a wrong pith number or an operator's receipt is invalid")
{
	evset_t *s = calloc(1, sizeof(*s));
	char id_pn[80], id_receipt[80];
	record_subject(3);
	/* the record of #4 under the subject of #3 */
	add(s, &reg, "record_created", subj, "record", "2026-01-01T00:00:00Z", NULL, NULL, NULL, 4, id_pn);
	/* a receipt signed by a key that is not a registry key */
	add(s, &op1, "record_created", subj, "record", "2026-01-02T00:00:00Z", NULL, NULL, NULL, 3, id_receipt);
	json_doc_t *d = merged(subj, s);
	const json_value_t *st = json_doc_root(d);
	CHECK_STR_EQ(invalid_reason(st, id_pn), "pith_number_mismatch");
	CHECK_STR_EQ(invalid_reason(st, id_receipt), "bad_receipt");
	CHECK(json_get(json_get(st, "current"), "record_created")->type == JSON_NULL);
	json_doc_free(d);
	set_clear(s);
	free(s);
}

TEST(receipt_precheck_batched, "a receipt checked ahead in a validator's batch is memoised only when it verifies")
{
	evset_t *s = calloc(1, sizeof(*s));
	pith_event_t *ev[3] = {0};
	pith_err_t err = {0};
	pith_event_check_t failed;
	record_subject(41);
	add(s, &reg, "record_created", subj, "record", "2026-01-01T00:00:00Z", NULL, NULL, NULL, 41, NULL);
	add(s, &op1, "record_created", subj, "record", "2026-01-02T00:00:00Z", NULL, NULL, NULL, 41, NULL);
	add(s, &reg, "graph_snapshot", subj, "record", "2026-01-03T00:00:00Z", "{\"graph_snapshot\":{}}",
	    NULL, NULL, -1, NULL);
	for (size_t i = 0; i < 3; i++)
		CHECK(pith_event_parse(s->bytes[i].data, s->bytes[i].len, trust, &ev[i], &failed, &err) == 0);
	pith_receipt_pre_t pre;
	pith_sig_check_t good, bad, other;
	/* nothing to verify ahead: an operator's receipt, another event type,
	 * or no trust store */
	CHECK(!pith_receipt_precheck_prepare(ev[1], trust, &other, &pre));
	CHECK(!pith_receipt_precheck_prepare(ev[2], trust, &other, &pre));
	CHECK(!pith_receipt_precheck_prepare(ev[0], NULL, &other, &pre));
	/* a signature that fails is not memoised: the next check verifies again */
	CHECK(pith_receipt_precheck_prepare(ev[0], trust, &bad, &pre));
	bad.sig[7] ^= 1;
	pith_sig_check_many(&bad, 1);
	CHECK(!bad.ok);
	pith_receipt_precheck_finish(&pre, &bad);
	CHECK(pith_receipt_precheck_prepare(ev[0], trust, &good, &pre));
	/* and it kept the record's hash and number for the merge */
	CHECK_STR_EQ(ev[0]->rec_hex, json_get_str(json_get(ev[0]->root, "payload"), "canonical_sha256"));
	CHECK_STR_EQ(ev[0]->rec_pith, ev[0]->subject);
	/* one that verifies is: the merge's own check then finds it */
	pith_sig_check_many(&good, 1);
	CHECK(good.ok);
	pith_receipt_precheck_finish(&pre, &good);
	CHECK(!pith_receipt_precheck_prepare(ev[0], trust, &other, &pre));
	for (size_t i = 0; i < 3; i++)
		pith_event_free(ev[i]);
	set_clear(s);
	free(s);
}

TEST(m3_supersedes, "M3: a later event supersedes its signer's earlier one, not another signer's")
{
	evset_t *s = calloc(1, sizeof(*s));
	char a[80], b2[80], c[80], d2[80], e[80];
	record_subject(5);
	add(s, &op1, "correction", subj, "record", "2026-02-01T00:00:00Z", "{\"n\":1}", NULL, NULL, -1, a);
	add(s, &op1, "correction", subj, "record", "2026-02-02T00:00:00Z", "{\"n\":2}", a, a, -1, b2);
	add(s, &op2, "correction", subj, "record", "2026-02-03T00:00:00Z", "{\"n\":3}", NULL, NULL, -1, c);
	add(s, &op1, "correction", subj, "x", "2026-02-04T00:00:00Z", "{\"n\":4}", NULL, c, -1, d2);
	/* the registry may supersede anyone's event */
	add(s, &reg, "correction", subj, "y", "2026-02-05T00:00:00Z", "{\"n\":5}", NULL, c, -1, e);
	json_doc_t *dd = merged(subj, s);
	const json_value_t *st = json_doc_root(dd);
	const json_value_t *sup = json_get(st, "superseded_event_ids");
	const json_value_t *app = json_get(st, "applied_event_ids");
	CHECK(id_in(sup, a));
	CHECK(id_in(app, b2));
	CHECK(id_in(sup, c)); /* by the registry, not by op1 */
	CHECK(id_in(app, d2));
	CHECK(id_in(app, e));
	CHECK_INT_EQ((long long)json_get(json_get(st, "current"), "corrections")->len, 3);
	json_doc_free(dd);
	set_clear(s);

	/* an earlier event cannot supersede a later one, nor another signer's */
	add(s, &op1, "correction", subj, "record", "2026-03-02T00:00:00Z", "{\"n\":1}", NULL, NULL, -1, a);
	add(s, &op2, "correction", subj, "z", "2026-03-03T00:00:00Z", "{\"n\":2}", NULL, a, -1, b2);
	dd = merged(subj, s);
	st = json_doc_root(dd);
	CHECK(json_get(st, "superseded_event_ids") == NULL);
	CHECK(id_in(json_get(st, "applied_event_ids"), a));
	json_doc_free(dd);
	set_clear(s);
	free(s);
}

static void shuffle(size_t *a, size_t n, uint64_t *rng);

/* The trust store is a set (docs/merge.md, K-SET, K-ROLE): one public key
 * trusted under an operator key id and under a registry key id, or under
 * one key id with two roles or two rotation times, gives the same states
 * and checks in every order of --trust-key. */
TEST(k_set_trust_order, "K-SET: a key trusted twice, with two roles, in either order: one state")
{
	tg_key_t dual_op, dual_reg, same_op, rot_late, rot_early;
	tg_key_make(&dual_op, 40, "dual-as-operator", 0);
	tg_key_make(&dual_reg, 40, "dual-as-registry", 1);
	tg_key_make(&same_op, 1, "test-registry", 0); /* reg's key and id, no role */
	tg_key_make(&rot_late, 41, "rotating", 0);
	tg_key_make(&rot_early, 41, "rotating", 0);
	pith_time_parse_valid("2026-05-01T00:00:00Z", PITH_TIME_FRACTION, &rot_late.key.rotates_at_us);
	pith_time_parse_valid("2026-03-01T00:00:00Z", PITH_TIME_FRACTION, &rot_early.key.rotates_at_us);
	const pith_key_t *ks[] = {&reg.key, &op1.key, &op2.key, &dual_op.key, &dual_reg.key,
				  &same_op.key, &rot_late.key, &rot_early.key};
	enum { NK = sizeof(ks) / sizeof(ks[0]) };
	evset_t *s = calloc(1, sizeof(*s));
	char a[80], b[80];
	record_subject(7);
	add(s, &reg, "record_created", subj, "record", "2026-01-01T00:00:00Z", NULL, NULL, NULL, 7, NULL);
	add(s, &op1, "correction", subj, "record", "2026-02-01T00:00:00Z", "{\"n\":1}", NULL, NULL, -1, a);
	/* signed under the operator key id of a key that is also a registry
	 * key: supersedes another signer's event (K-ROLE), in every order */
	add(s, &dual_op, "correction", subj, "x", "2026-02-02T00:00:00Z", "{\"n\":2}", NULL, a, -1, b);
	pith_trust_t *saved = trust;
	pith_buf_t first = PITH_BUF_INIT, other = PITH_BUF_INIT;
	uint64_t rng = 54;
	int differ = 0, rot_wrong = 0, role_wrong = 0;
	for (int t = 0; t < 24; t++) {
		size_t order[NK];
		for (size_t i = 0; i < NK; i++)
			order[i] = i;
		if (t == 1)
			for (size_t i = 0; i < NK; i++)
				order[i] = NK - 1 - i;
		else if (t > 1)
			shuffle(order, NK, &rng);
		trust = pith_trust_new();
		for (size_t i = 0; i < NK; i++)
			pith_trust_add(trust, ks[order[i]]);
		merge_bytes(subj, s, NULL, t ? &other : &first);
		if (t)
			differ += strcmp((char *)first.data, (char *)other.data) != 0;
		/* one entry (key, "rotating"), rotating at the earlier time */
		int64_t apr;
		pith_time_parse_valid("2026-04-01T00:00:00Z", PITH_TIME_FRACTION, &apr);
		rot_wrong += pith_trust_check(trust, rot_late.key.fp, "rotating", apr, NULL, NULL) !=
			     PITH_EROTATED;
		/* reg's (key, id) listed again without the role stays a registry key */
		const pith_key_t *k = NULL;
		role_wrong += pith_trust_check(trust, reg.key.fp, "test-registry", 0, &k, NULL) ||
			      !k->is_registry || !pith_trust_fp_is_registry(trust, dual_op.key.fp) ||
			      pith_trust_fp_is_registry(trust, op1.key.fp);
		pith_trust_free(trust);
	}
	trust = saved;
	CHECK_INT_EQ(differ, 0);
	CHECK_INT_EQ(rot_wrong, 0);
	CHECK_INT_EQ(role_wrong, 0);
	CHECK(strstr((char *)first.data, "\"superseded_event_ids\":[\"") != NULL);
	CHECK(strstr((char *)first.data, a) != NULL);
	pith_buf_release(&first);
	pith_buf_release(&other);
	set_clear(s);
	free(s);
}

/* Many events each superseding 64 earlier ones: the lookups are by id, so
 * this stays milliseconds (a linear scan per id made it m * 64 * m). */
TEST(m3_many_supersedes, "M3 at scale: 4,000 events each naming 64 earlier ones")
{
	enum { N = 4000, S = 64 };
	record_subject(9);
	char (*ids)[PITH_EVENT_ID_LEN + 1] = calloc(N, sizeof(*ids));
	pith_event_t **evs = calloc(N, sizeof(*evs));
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	size_t n = 0;
	for (int i = 0; i < N; i++) {
		const char *sup[S];
		size_t ns = 0;
		for (int k = i - S; k < i; k++)
			if (k >= 0)
				sup[ns++] = ids[k];
		char at[32];
		snprintf(at, sizeof(at), "2026-04-01T%02d:%02d:%02dZ", i / 3600, i / 60 % 60, i % 60);
		pith_buf_reset(&b);
		if (tg_event(&b, &op1, "correction", subj, "record", at, "{}", NULL, sup, ns, -1, ids[i]))
			break;
		if (pith_event_parse(b.data, b.len, trust, &evs[n], NULL, &err))
			break;
		n++;
	}
	CHECK_INT_EQ((long long)n, N);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pith_state_t st = {0};
	CHECK_INT_EQ(pith_merge_ex(subj, evs, n, NULL, trust, &st, &err), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	printf("# merge of %zu events naming 64 each: %.1f ms\n", n, ms);
	/* every event but the last is named by a later one of its signer */
	CHECK_INT_EQ((long long)st.superseded, N - 1);
	CHECK(ms < 2000);
	pith_state_release(&st);
	for (size_t i = 0; i < n; i++)
		pith_event_free(evs[i]);
	free(evs);
	free(ids);
	pith_buf_release(&b);
}

TEST(m4_equivocation, "M4: two events of one signer in one slot: the first applies, the other is an equivocation")
{
	evset_t *s = calloc(1, sizeof(*s));
	char a[80], b2[80], c[80];
	record_subject(6);
	add(s, &op1, "author_attestation", subj, "record", "2026-04-02T00:00:00Z", "{\"v\":\"yes\"}", NULL, NULL, -1, a);
	add(s, &op1, "author_attestation", subj, "record", "2026-04-01T00:00:00Z", "{\"v\":\"no\"}", NULL, NULL, -1, b2);
	/* another signer in the same (target, prev) is not a conflict */
	add(s, &op2, "author_attestation", subj, "record", "2026-04-03T00:00:00Z", "{\"v\":\"yes\"}", NULL, NULL, -1, c);
	json_doc_t *d = merged(subj, s);
	const json_value_t *st = json_doc_root(d);
	const json_value_t *eq = json_get(st, "equivocations");
	CHECK(eq && eq->len == 1);
	if (eq && eq->len == 1) {
		CHECK_STR_EQ(json_get_str(eq->u.items[0], "applied_event_id"), b2);
		CHECK(id_in(json_get(eq->u.items[0], "rejected_event_ids"), a));
	}
	CHECK(id_in(json_get(st, "applied_event_ids"), b2));
	CHECK(!id_in(json_get(st, "applied_event_ids"), a));
	CHECK(id_in(json_get(st, "applied_event_ids"), c));
	CHECK_STR_EQ(json_get(st, "equivocation_count")->u.str, "1");
	json_doc_free(d);
	set_clear(s);
	free(s);
}

TEST(m4_record_created_conflict, "M4: two valid record_created events: the first by (created_at, event_id) applies")
{
	evset_t *s = calloc(1, sizeof(*s));
	char a[80], b2[80];
	record_subject(7);
	add(s, &reg, "record_created", subj, "record", "2026-05-02T00:00:00Z", NULL, NULL, NULL, 7, a);
	add(s, &reg, "record_created", subj, "record", "2026-05-01T00:00:00Z", NULL, NULL, NULL, 7, b2);
	json_doc_t *d = merged(subj, s);
	const json_value_t *st = json_doc_root(d);
	CHECK_STR_EQ(json_get_str(json_get(json_get(st, "current"), "record_created"), "event_id"), b2);
	CHECK_STR_EQ(json_get(st, "equivocation_count")->u.str, "1");
	CHECK(json_get(json_get(st, "current"), "canonical_record")->type == JSON_OBJECT);
	json_doc_free(d);
	set_clear(s);
	free(s);
}

TEST(m5_order, "M5: current lists are ordered by (created_at, event_id), applied ids ascending")
{
	evset_t *s = calloc(1, sizeof(*s));
	record_subject(8);
	add(s, &op1, "citation_signature", subj, "t3", "2026-06-03T00:00:00Z", "{}", NULL, NULL, -1, NULL);
	add(s, &op1, "citation_signature", subj, "t1", "2026-06-01T00:00:00Z", "{}", NULL, NULL, -1, NULL);
	add(s, &op2, "citation_signature", subj, "t2", "2026-06-02T00:00:00Z", "{}", NULL, NULL, -1, NULL);
	json_doc_t *d = merged(subj, s);
	const json_value_t *st = json_doc_root(d);
	const json_value_t *l = json_get(json_get(st, "current"), "citation_signatures");
	CHECK(l && l->len == 3);
	for (size_t i = 1; l && i < l->len; i++)
		CHECK(strcmp(json_get_str(l->u.items[i - 1], "created_at"),
			     json_get_str(l->u.items[i], "created_at")) < 0);
	const json_value_t *app = json_get(st, "applied_event_ids");
	for (size_t i = 1; app && i < app->len; i++)
		CHECK(strcmp(app->u.items[i - 1]->u.str, app->u.items[i]->u.str) < 0);
	json_doc_free(d);
	set_clear(s);
	free(s);
}

/* A random event set over one record with every kind, equivocations,
 * supersedes and invalid events. */
static void random_set(evset_t *s, unsigned rec, uint64_t *rng)
{
	static const char *const types[] = {
		"graph_snapshot", "author_attestation", "timestamp_anchor", "storage_attestation",
		"citation_signature", "replication_record", "correction", "mirror_hint", "unknown_kind"};
	char ids[64][80];
	size_t nids = 0;
	record_subject(rec);
	add(s, &reg, "record_created", subj, "record", "2026-01-01T00:00:00Z", NULL, NULL, NULL, (int)rec, ids[nids++]);
	unsigned n = 8 + (unsigned)(tg_rand(rng) % 24);
	for (unsigned i = 0; i < n && nids < 64; i++) {
		const char *type = types[tg_rand(rng) % 9];
		const tg_key_t *k = tg_rand(rng) % 5 == 0 ? &reg : (tg_rand(rng) & 1) ? &op1 : &op2;
		char created[32], payload[64], target[16];
		snprintf(created, sizeof(created), "2026-0%u-1%uT00:00:00Z", 1 + (unsigned)(tg_rand(rng) % 3),
			 (unsigned)(tg_rand(rng) % 3));
		snprintf(payload, sizeof(payload), "{\"graph_snapshot\":{\"n\":%u}}", (unsigned)(tg_rand(rng) % 4));
		snprintf(target, sizeof(target), "%s", !strcmp(type, "graph_snapshot")
			 ? ((tg_rand(rng) % 8) ? "graph" : "bogus") : (tg_rand(rng) & 1) ? "record" : "other");
		const char *prev = nids > 1 && tg_rand(rng) % 4 == 0 ? ids[tg_rand(rng) % nids] : NULL;
		const char *sup = nids > 1 && tg_rand(rng) % 5 == 0 ? ids[tg_rand(rng) % nids] : NULL;
		add(s, k, type, subj, target, created, payload, prev, sup, -1, ids[nids++]);
	}
}

static void shuffle(size_t *a, size_t n, uint64_t *rng)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = tg_rand(rng) % i, t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

TEST(property_order_dup_resign, "permutations, duplicates and re-signed copies never change a state")
{
	evset_t *s = calloc(1, sizeof(*s));
	uint64_t rng = 42;
	pith_buf_t base = PITH_BUF_INIT, other = PITH_BUF_INIT;
	size_t order[512];
	int mismatches = 0, trials = 0;
	for (unsigned rec = 100; rec < 140; rec++) {
		set_clear(s);
		random_set(s, rec, &rng);
		merge_bytes(subj, s, NULL, &base);
		size_t n = s->n;
		for (int t = 0; t < 5; t++) {
			for (size_t i = 0; i < n; i++)
				order[i] = i;
			shuffle(order, n, &rng);
			merge_bytes(subj, s, order, &other);
			mismatches += strcmp((char *)base.data, (char *)other.data) != 0;
			trials++;
		}
		/* duplicates and re-signed copies, then a shuffle */
		for (size_t i = 0; i < n && s->n < 500; i++) {
			pith_buf_t *b = &s->bytes[s->n++];
			memset(b, 0, sizeof(*b));
			if (i % 2)
				pith_buf_append(b, s->bytes[i].data, s->bytes[i].len);
			else
				tg_resign(s->bytes[i].data, s->bytes[i].len, &op1, "2027-01-01T00:00:00.000001Z", b);
		}
		for (size_t i = 0; i < s->n; i++)
			order[i] = i;
		shuffle(order, s->n, &rng);
		merge_bytes(subj, s, order, &other);
		mismatches += strcmp((char *)base.data, (char *)other.data) != 0;
		trials++;
	}
	CHECK_INT_EQ(mismatches, 0);
	CHECK(trials == 240);
	pith_buf_release(&base);
	pith_buf_release(&other);
	set_clear(s);
	free(s);
}

TEST(property_split_union, "any split of an event set, exchanged back, merges to the same state")
{
	evset_t *s = calloc(1, sizeof(*s)), *part = calloc(1, sizeof(*part));
	uint64_t rng = 7;
	pith_buf_t base = PITH_BUF_INIT, other = PITH_BUF_INIT;
	int mismatches = 0;
	for (unsigned rec = 200; rec < 230; rec++) {
		set_clear(s);
		random_set(s, rec, &rng);
		merge_bytes(subj, s, NULL, &base);
		/* three nodes each get a random, overlapping part; after the
		 * exchange each holds the union, in its own arrival order */
		for (int node = 0; node < 3; node++) {
			size_t order[512], n = 0;
			for (size_t i = 0; i < s->n; i++)
				if (tg_rand(&rng) % 3 == (uint64_t)node || tg_rand(&rng) % 2)
					order[n++] = i;
			for (size_t i = 0; i < s->n; i++)
				order[n++] = i; /* the exchange: everything, again */
			shuffle(order, n, &rng);
			set_clear(part);
			for (size_t i = 0; i < n; i++) {
				pith_buf_t *b = &part->bytes[part->n++];
				memset(b, 0, sizeof(*b));
				pith_buf_append(b, s->bytes[order[i]].data, s->bytes[order[i]].len);
			}
			merge_bytes(subj, part, NULL, &other);
			mismatches += strcmp((char *)base.data, (char *)other.data) != 0;
		}
	}
	CHECK_INT_EQ(mismatches, 0);
	pith_buf_release(&base);
	pith_buf_release(&other);
	set_clear(s);
	set_clear(part);
	free(s);
	free(part);
}

TEST(property_one_place, "every stored event appears in exactly one place of the state")
{
	evset_t *s = calloc(1, sizeof(*s));
	uint64_t rng = 99;
	int bad = 0;
	for (unsigned rec = 300; rec < 340; rec++) {
		set_clear(s);
		random_set(s, rec, &rng);
		json_doc_t *d = merged(subj, s);
		const json_value_t *st = json_doc_root(d);
		for (size_t i = 0; i < s->n; i++) {
			json_doc_t *e = NULL;
			json_parse(&e, s->bytes[i].data, s->bytes[i].len, NULL, NULL);
			const char *id = json_get_str(json_doc_root(e), "event_id");
			int places = id_in(json_get(st, "applied_event_ids"), id) +
				     id_in(json_get(st, "superseded_event_ids"), id) +
				     (invalid_reason(st, id) != NULL);
			const json_value_t *eq = json_get(st, "equivocations");
			for (size_t k = 0; eq && k < eq->len; k++)
				places += id_in(json_get(eq->u.items[k], "rejected_event_ids"), id);
			if (places != 1)
				fprintf(stderr, "  %s in %d places\n", id, places);
			bad += places != 1;
			json_doc_free(e);
		}
		/* generated events can coincide (same content, same id): count
		 * distinct ids, which is what the state counts */
		size_t distinct = 0;
		for (size_t i = 0; i < s->n; i++) {
			int seen = 0;
			const char *idi = strstr((char *)s->bytes[i].data, "\"event_id\":\"");
			for (size_t j = 0; j < i && !seen && idi; j++) {
				const char *idj = strstr((char *)s->bytes[j].data, "\"event_id\":\"");
				seen = idj && !strncmp(idi, idj, 12 + PITH_EVENT_ID_LEN);
			}
			distinct += !seen;
		}
		const json_value_t *ec = json_get(st, "event_count");
		bad += !ec || (size_t)atoi(ec->u.str) != distinct;
		json_doc_free(d);
	}
	CHECK_INT_EQ(bad, 0);
	set_clear(s);
	free(s);
}

int main(void)
{
	setup();
	RUN(reproduces_registry_state);
	RUN(m2_invalid_reasons);
	RUN(m2_record_checks);
	RUN(receipt_precheck_batched);
	RUN(m3_supersedes);
	RUN(m3_many_supersedes);
	RUN(k_set_trust_order);
	RUN(m4_equivocation);
	RUN(bundle_untrusted_only);
	RUN(bundle_receipt_untrusted);
	RUN(m4_record_created_conflict);
	RUN(m5_order);
	RUN(property_order_dup_resign);
	RUN(property_split_union);
	RUN(property_one_place);
	pith_trust_free(trust);
	return test_done();
}
