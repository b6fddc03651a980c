/* The conformance corpus: the merge's cases, rule by rule (docs/merge.md;
 * gen_conformance.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gen_conformance.h"

/* ---- the cases, rule by rule ----------------------------------------------------- */


/* T-*: created_at, signed_at and built_at at the edges of the rule. */
void cases_time(void)
{
	static const struct {
		const char *name, *rule, *at;
		int ok;
	} created[] = {
		{"leap-day-2024", "T-CALENDAR", "2024-02-29T12:00:00Z", 1},
		{"leap-day-2000", "T-CALENDAR", "2000-02-29T12:00:00Z", 1},
		{"no-leap-day-2025", "T-CALENDAR", "2025-02-29T12:00:00Z", 0},
		{"no-leap-day-2100", "T-CALENDAR", "2100-02-29T12:00:00Z", 0},
		{"february-30", "T-CALENDAR", "2024-02-30T12:00:00Z", 0},
		{"april-31", "T-CALENDAR", "2025-04-31T12:00:00Z", 0},
		{"june-31", "T-CALENDAR", "2025-06-31T12:00:00Z", 0},
		{"september-31", "T-CALENDAR", "2025-09-31T12:00:00Z", 0},
		{"november-31", "T-CALENDAR", "2025-11-31T12:00:00Z", 0},
		{"december-31", "T-CALENDAR", "2025-12-31T12:00:00Z", 1},
		{"month-13", "T-CALENDAR", "2025-13-01T12:00:00Z", 0},
		{"month-00", "T-CALENDAR", "2025-00-01T12:00:00Z", 0},
		{"day-00", "T-CALENDAR", "2025-01-00T12:00:00Z", 0},
		{"second-59", "T-CALENDAR", "2025-12-31T23:59:59Z", 1},
		{"leap-second-60", "T-CALENDAR", "2016-12-31T23:59:60Z", 0},
		{"hour-24", "T-CALENDAR", "2025-01-01T24:00:00Z", 0},
		{"minute-60", "T-CALENDAR", "2025-01-01T23:60:00Z", 0},
		{"year-0000", "T-YEARS", "0000-01-01T00:00:00Z", 0},
		{"year-9999", "T-YEARS", "9999-12-31T23:59:59Z", 0},
		{"year-0828-last-second", "T-YEARS", "0828-12-31T23:59:59Z", 0},
		{"year-0829-first-second", "T-YEARS", "0829-01-01T00:00:00Z", 1},
		{"year-1970-epoch", "T-YEARS", "1970-01-01T00:00:00Z", 1},
		{"year-1969", "T-YEARS", "1969-12-31T23:59:59Z", 1},
		{"year-3110-last-second", "T-YEARS", "3110-12-31T23:59:59Z", 1},
		{"year-3111-first-second", "T-YEARS", "3111-01-01T00:00:00Z", 0},
		{"fraction", "T-SECONDS", "2026-01-01T00:00:00.5Z", 0},
		{"utc-offset", "T-SECONDS", "2026-01-01T00:00:00+00:00", 0},
		{"lower-case-z", "T-SECONDS", "2026-01-01T00:00:00z", 0},
		{"space-not-t", "T-GRAMMAR", "2026-01-01 00:00:00Z", 0},
		{"one-digit-month", "T-GRAMMAR", "2026-1-01T00:00:00Z", 0},
		{"five-digit-year", "T-GRAMMAR", "02026-01-01T00:00:00Z", 0},
		{"no-zone", "T-GRAMMAR", "2026-01-01T00:00:00", 0},
		{"trailing-space", "T-GRAMMAR", "2026-01-01T00:00:00Z ", 0},
		{"other-zone", "T-GRAMMAR", "2026-01-01T00:00:00+01:00", 0},
		{"arabic-indic-digit", "T-GRAMMAR", "202\xd9\xa1-01-01T00:00:00Z", 0},
	};
	for (size_t i = 0; i < sizeof(created) / sizeof(created[0]); i++) {
		gcase_t c;
		char name[80];
		snprintf(name, sizeof(name), "created_at.%s", created[i].name);
		case_init(&c, created[i].rule, name,
			  "an event's created_at at an edge of the timestamp rule (docs/merge.md section 2, "
			  "V-CREATED-AT): refused as V-SHAPE when the rule fails");
		add_record(&c, recno++, T0, NULL);
		add_ev(&c, K_OP1, "timestamp_anchor", "record", created[i].at, "{\"ots\":\"x\"}", NULL,
		       NULL, created[i].ok ? "accepted" : "V-SHAPE", NULL);
		case_emit(&c);
	}
	static const struct {
		const char *name, *rule, *at;
		int ok;
	} stamps[] = {
		{"fraction-9-digits", "T-GRAMMAR", "2026-06-01T00:00:00.123456789Z", 1},
		{"fraction-10-digits", "T-GRAMMAR", "2026-06-01T00:00:00.1234567890Z", 0},
		{"fraction-empty", "T-GRAMMAR", "2026-06-01T00:00:00.Z", 0},
		{"utc-offset", "T-GRAMMAR", "2026-06-01T00:00:00.5+00:00", 1},
		{"no-fraction", "T-GRAMMAR", "2026-06-01T00:00:00Z", 1},
		{"no-leap-day", "T-CALENDAR", "2026-02-29T00:00:00.000001Z", 0},
		{"leap-second", "T-CALENDAR", "2026-06-30T23:59:60.5Z", 0},
		{"year-9999", "T-YEARS", "9999-01-01T00:00:00Z", 0},
		{"year-0000", "T-YEARS", "0000-01-01T00:00:00Z", 0},
	};
	for (size_t i = 0; i < sizeof(stamps) / sizeof(stamps[0]); i++) {
		gcase_t c;
		char name[80], q[64];
		snprintf(name, sizeof(name), "signed_at.%s", stamps[i].name);
		case_init(&c, stamps[i].rule, name,
			  "an event's signature.signed_at at an edge of the timestamp rule (V-SIGNED-AT): "
			  "refused as V-SHAPE when the rule fails");
		add_record(&c, recno++, T0, NULL);
		pith_buf_t t = PITH_BUF_INIT, s = PITH_BUF_INIT;
		ev_text(&t, "timestamp_anchor", c.pith, "record", T1, "{}", NULL, NULL);
		pith_buf_cstr(&t);
		snprintf(q, sizeof(q), "\"%s\"", stamps[i].at);
		ev_sign((const char *)t.data, &keys[K_OP1], "signature.signed_at", q, &s, NULL);
		add_doc(&c, "event", &s, stamps[i].ok ? "accepted" : "V-SHAPE");
		pith_buf_release(&t);
		pith_buf_release(&s);
		case_emit(&c);

		snprintf(name, sizeof(name), "built_at.%s", stamps[i].name);
		case_init(&c, stamps[i].rule, name,
			  "a bundle's built_at (and its signature's signed_at) at an edge of the timestamp "
			  "rule (B-BUILT-AT)");
		add_record(&c, recno++, T0, NULL);
		add_bundle(&c, 0, 1, stamps[i].at, K_REG, NULL, NULL, 0,
			   stamps[i].ok ? "accepted" : "B-BUILT-AT");
		case_emit(&c);
	}
}

/* V-*: each check of event validation. */
void cases_validation(void)
{
	static const struct {
		const char *name, *rule, *member, *json, *expect;
	} edits[] = {
		{"event_type-missing-type", "V-SHAPE", "event_type", "7", "V-SHAPE"},
		{"event_type-empty", "V-SHAPE", "event_type", "\"\"", "V-SHAPE"},
		{"event_type-65-bytes", "V-SHAPE", "event_type", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "V-SHAPE"},
		{"event_type-nul", "V-SHAPE", "event_type", "\"correction\\u0000\"", "V-SHAPE"},
		{"subject-lower-case", "V-SHAPE", "subject_pith_number", "\"pith:2024:ar7b3devmotsbrccvxuclysrre\"", "V-SHAPE"},
		{"subject-short", "V-SHAPE", "subject_pith_number", "\"pith:AR7B3DEV\"", "V-SHAPE"},
		{"target-null", "V-SHAPE", "target", "null", "V-SHAPE"},
		{"payload-array", "V-SHAPE", "payload", "[]", "V-SHAPE"},
		{"signer-string", "V-SHAPE", "signer", "\"me\"", "V-SHAPE"},
		{"created_at-number", "V-SHAPE", "created_at", "20260101", "V-SHAPE"},
		{"supersedes-null", "V-SHAPE", "supersedes", "null", "V-SHAPE"},
		{"supersedes-upper-hex", "V-SHAPE", "supersedes", "[\"sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"]", "V-SHAPE"},
		{"prev_event-empty-string", "V-SHAPE", "prev_event", "\"\"", "V-SHAPE"},
		{"schema_version-number", "V-SHAPE", "schema_version", "1", "V-SHAPE"},
		{"signature-algorithm-upper", "V-SHAPE", "signature.algorithm", "\"ED25519\"", "V-SHAPE"},
		{"signature-signed_message-other", "V-SHAPE", "signature.signed_message", "\"content_sha256_bytes\"", "V-SHAPE"},
		{"signature-signed_message-null", "V-SHAPE", "signature.signed_message", "null", "accepted"},
		{"signature-signed_message-number", "V-SHAPE", "signature.signed_message", "1", "accepted"},
		{"signature-status-not-read", "V-SHAPE", "signature.signature_status", "\"unsigned\"", "accepted"},
		{"content_sha256-number", "V-SHAPE", "content_sha256", "1", "V-SHAPE"},
		{"content_sha256-wrong", "V-CONTENT-HASH", "content_sha256", "\"0000000000000000000000000000000000000000000000000000000000000000\"", "V-CONTENT-HASH"},
		{"event_id-wrong", "V-EVENT-ID", "event_id", "\"sha256:0000000000000000000000000000000000000000000000000000000000000000\"", "V-EVENT-ID"},
		{"signature-key_id-differs", "V-KEY", "signature.key_id", "\"op-two\"", "V-KEY"},
		{"signature-fingerprint-differs", "V-KEY", "signature.public_key_fingerprint", "\"00000000000000000000000000000000\"", "V-KEY"},
		{"signature-flipped", "V-SIGNATURE", "signature.signature_b64", "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\"", "V-SIGNATURE"},
		{"signature-not-base64", "V-SIGNATURE", "signature.signature_b64", "\"not base64\"", "V-SIGNATURE"},
		{"unknown-member-hashed", "V-CONTENT-HASH", "x_extra", "1", "V-CONTENT-HASH"},
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		gcase_t c;
		case_init(&c, edits[i].rule, edits[i].name,
			  "one member of a signed event changed after signing (docs/merge.md section 3)");
		add_record(&c, recno++, T0, NULL);
		pith_buf_t t = PITH_BUF_INIT, s = PITH_BUF_INIT;
		ev_text(&t, "correction", c.pith, "record", T1, "{\"note\":\"x\"}", NULL, NULL);
		pith_buf_cstr(&t);
		ev_sign((const char *)t.data, &keys[K_OP1], edits[i].member, edits[i].json, &s, NULL);
		add_doc(&c, "event", &s, edits[i].expect);
		pith_buf_release(&t);
		pith_buf_release(&s);
		case_emit(&c);
	}
	static const struct {
		const char *name, *text;
	} bad_json[] = {
		{"trailing-data", "{\"event_type\":\"correction\"} x"},
		{"duplicate-key", "{\"event_type\":\"correction\",\"event_type\":\"mirror_hint\"}"},
		{"lone-surrogate", "{\"event_type\":\"\\ud800\"}"},
		{"nan", "{\"payload\":{\"x\":NaN}}"},
		{"invalid-utf8", "{\"target\":\"\xc3\x28\"}"},
		{"empty", ""},
	};
	for (size_t i = 0; i < sizeof(bad_json) / sizeof(bad_json[0]); i++) {
		gcase_t c;
		case_init(&c, "V-JSON", bad_json[i].name, "not one JSON document within section 0's rules");
		add_record(&c, recno++, T0, NULL);
		pith_buf_t t = PITH_BUF_INIT;
		pith_buf_puts(&t, bad_json[i].text);
		add_doc(&c, "event", &t, "V-JSON");
		pith_buf_release(&t);
		case_emit(&c);
	}
	/* keys: untrusted, rotated; and re-signed copies and duplicates */
	gcase_t c;
	case_init(&c, "V-KEY", "untrusted-signer", "an event by a key T does not hold");
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_STRANGER, "correction", "record", T1, "{}", NULL, NULL, "V-KEY", NULL);
	case_emit(&c);

	case_init(&c, "V-ROTATED", "created-after-rotation",
		  "an event by a key whose rotates_at (2026-03-01) precedes its created_at");
	c.trust |= 1u << K_OPROT;
	add_record(&c, recno++, T0, NULL);
	add_ev_edit(&c, K_OPROT, "correction", T1, "{}", "signature.signed_at",
		    "\"2026-02-01T00:00:00Z\"", "accepted");
	add_ev_edit(&c, K_OPROT, "correction", "2026-03-01T00:00:00Z", "{}", "signature.signed_at",
		    "\"2026-02-01T00:00:00Z\"", "V-ROTATED");
	case_emit(&c);

	case_init(&c, "V-ROTATED", "signed-after-rotation",
		  "created before rotation but signed_at (2026-06-01) after it: max of the two counts");
	c.trust |= 1u << K_OPROT;
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_OPROT, "correction", "record", "2026-02-28T23:59:59Z", "{}", NULL, NULL,
	       "V-ROTATED", NULL);
	case_emit(&c);

	case_init(&c, "V-DUP", "duplicate-and-resigned",
		  "the same event three times, once with another signature block: one event of E");
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_OP1, "correction", "record", T1, "{}", NULL, NULL, "accepted", NULL);
	add_doc(&c, "event", &c.doc[1].text, "accepted");
	{
		pith_buf_t r = PITH_BUF_INIT;
		tg_resign(c.doc[1].text.data, c.doc[1].text.len, &keys[K_OP1], "2026-07-01T00:00:00.5Z", &r);
		add_doc(&c, "event", &r, "accepted");
		pith_buf_release(&r);
	}
	case_must(&c, "\"event_count\":2");
	case_emit(&c);
}

/* Starts a record_created case: the caller adds the event; reason is the
 * invalid reason the state must name (NULL: none). */
static void rc_case(gcase_t *c, const char *rule, const char *name, const char *desc,
		    const char *rec_json, const char *claimed_json, const char *receipt_json,
		    const char *reason)
{
	(void)rec_json;
	(void)claimed_json;
	(void)receipt_json;
	case_init(c, rule, name, desc);
	static char want[80];
	if (reason) {
		snprintf(want, sizeof(want), "\"reason\":\"%s\"", reason);
		case_must(c, want);
	} else {
		case_must(c, "\"invalid_event_count\":0");
	}
}

/* M2: payload types, record identity, hash, pith number, receipt. */
void cases_invalid(void)
{
	gcase_t c;
	pith_buf_t rec = PITH_BUF_INIT, rcpt = PITH_BUF_INIT;
	char hex[65], q[80];
	unsigned n = recno++;
	record_text(&rec, n, "\"2024-01-15T10:00:00Z\"");
	const char *R = (const char *)rec.data;
	char pith[PITH_NUMBER_LEN + 1];
	record_ident(R, hex, pith);
	receipt_text(&rcpt, hex, &keys[K_REG], NULL, NULL, NULL);
	snprintf(q, sizeof(q), "\"%s\"", hex);
	const char *Q = q, *RC = (const char *)rcpt.data;

#define RC_CASE(rule, name, desc, r, h, rc, reason)                                   \
	do {                                                                          \
		rc_case(&c, rule, name, desc, r, h, rc, reason);                     \
		memcpy(c.pith, pith, sizeof(pith));                                   \
		c.n = 0;                                                              \
		pith_buf_t pl_ = PITH_BUF_INIT;                                       \
		rc_payload(&pl_, r, h, rc);                                           \
		add_ev(&c, K_REG, "record_created", "record", T0, (const char *)pl_.data, NULL, \
		       NULL, "accepted", NULL);                                       \
		pith_buf_release(&pl_);                                               \
		case_emit(&c);                                                        \
	} while (0)

	RC_CASE("R-STATE", "record-created-valid", "a whole, valid record_created: applied", R, Q, RC, NULL);
	static const char *const not_objects[] = {"null", "\"record\"", "[]", "5", "true"};
	static const char *const not_obj_names[] = {"null", "string", "array", "number", "boolean"};
	for (int i = 0; i < 5; i++) {
		char nm[64];
		snprintf(nm, sizeof(nm), "canonical_record-%s", not_obj_names[i]);
		RC_CASE("R-PAYLOAD-TYPE", nm, "payload.canonical_record present but not an object: bad_payload "
			"(issue 15, point 1)", not_objects[i], Q, RC, "bad_payload");
	}
	RC_CASE("R-PAYLOAD-TYPE", "canonical_record-absent", "no payload.canonical_record", NULL, Q, RC, "bad_payload");
	static const char *const not_strings[] = {"null", "5", "[]", "{}"};
	static const char *const not_str_names[] = {"null", "number", "array", "object"};
	for (int i = 0; i < 4; i++) {
		char nm[64];
		snprintf(nm, sizeof(nm), "canonical_sha256-%s", not_str_names[i]);
		RC_CASE("R-PAYLOAD-TYPE", nm, "payload.canonical_sha256 present but not a string: bad_payload "
			"(issue 15, point 1)", R, not_strings[i], RC, "bad_payload");
	}
	RC_CASE("R-PAYLOAD-TYPE", "canonical_sha256-absent", "no payload.canonical_sha256", R, NULL, RC, "bad_payload");

	/* R-RECORD-ID: what identifies a record (issue 15, point 2) */
	static const struct {
		const char *name, *sub;
		int ok;
	} subs[] = {
		{"submitted_at-year-with-letter", "\"20a1-01-15T10:00:00Z\"", 0},
		{"submitted_at-three-digits", "\"202\"", 0},
		{"submitted_at-empty", "\"\"", 0},
		{"submitted_at-number", "2024", 0},
		{"submitted_at-null", "null", 0},
		{"submitted_at-absent", NULL, 0},
		{"submitted_at-fullwidth-digit", "\"\xef\xbc\x92" "024-01-15\"", 0},
		{"submitted_at-year-only", "\"2024\"", 1},
		{"submitted_at-not-a-date-after-year", "\"2024 sometime\"", 1},
		{"submitted_at-year-0000", "\"0000-01-01\"", 1},
	};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		pith_buf_t r2 = PITH_BUF_INIT, rc2 = PITH_BUF_INIT;
		char h2[65], q2[80], p2[PITH_NUMBER_LEN + 1];
		record_text(&r2, n, subs[i].sub);
		if (record_ident((const char *)r2.data, h2, p2)) {
			uint8_t d[32];
			pith_buf_t cb = PITH_BUF_INIT;
			json_doc_t *dd = NULL;
			json_parse(&dd, r2.data, r2.len, NULL, NULL);
			json_canon_write(json_doc_root(dd), &cb);
			pith_sha256(cb.data, cb.len, d);
			pith_hex_encode(d, 32, h2);
			memcpy(p2, pith, sizeof(p2));
			json_doc_free(dd);
			pith_buf_release(&cb);
		}
		snprintf(q2, sizeof(q2), "\"%s\"", h2);
		receipt_text(&rc2, h2, &keys[K_REG], NULL, NULL, NULL);
		char save[PITH_NUMBER_LEN + 1];
		memcpy(save, pith, sizeof(save));
		memcpy(pith, p2, sizeof(pith));
		RC_CASE("R-RECORD-ID", subs[i].name, "record.metadata.submitted_at: identified only when "
			"its first four bytes are ASCII digits (issue 15, point 2)",
			(const char *)r2.data, q2, (const char *)rc2.data, subs[i].ok ? NULL : "bad_record");
		memcpy(pith, save, sizeof(pith));
		pith_buf_release(&r2);
		pith_buf_release(&rc2);
	}
	{
		char r3[200];
		snprintf(r3, sizeof(r3), "{\"metadata\":\"2024\",\"schema_version\":\"1.0\"}");
		RC_CASE("R-RECORD-ID", "metadata-string", "record.metadata not an object", r3, Q, RC, "bad_record");
		snprintf(r3, sizeof(r3), "{\"schema_version\":\"1.0\"}");
		RC_CASE("R-RECORD-ID", "metadata-absent", "no record.metadata", r3, Q, RC, "bad_record");
	}
	/* R-RECORD-HASH */
	{
		char up[80];
		snprintf(up, sizeof(up), "\"%s\"", hex);
		for (char *p = up; *p; p++)
			if (*p >= 'a' && *p <= 'f')
				*p = (char)(*p - 32);
		RC_CASE("R-RECORD-HASH", "claimed-upper-case", "the claimed hash in upper case is not the hash",
			R, up, RC, "record_hash_mismatch");
		RC_CASE("R-RECORD-HASH", "claimed-other",
			"a claimed hash of another record", R,
			"\"0000000000000000000000000000000000000000000000000000000000000000\"", RC,
			"record_hash_mismatch");
	}
	/* R-PITH-NUMBER: the subject is another record's, or another year's */
	{
		char save[PITH_NUMBER_LEN + 1];
		memcpy(save, pith, sizeof(save));
		memcpy(pith + 5, "2025", 4);
		RC_CASE("R-PITH-NUMBER", "subject-other-year", "subject with the record's body but another year",
			R, Q, RC, "pith_number_mismatch");
		memcpy(pith, save, sizeof(pith));
		pith[PITH_NUMBER_LEN - 1] = pith[PITH_NUMBER_LEN - 1] == 'A' ? 'B' : 'A';
		RC_CASE("R-PITH-NUMBER", "subject-other-body", "subject of another record", R, Q, RC,
			"pith_number_mismatch");
		memcpy(pith, save, sizeof(pith));
	}
	/* R-RECEIPT: each member read, and those not read (issue 15, point 3) */
	static const struct {
		const char *name, *omit, *over, *json;
		int key, ok;
	} rcs[] = {
		{"canonical_sha256-absent", "canonical_sha256", NULL, NULL, K_REG, 0},
		{"public_key_fingerprint-absent", "public_key_fingerprint", NULL, NULL, K_REG, 0},
		{"key_id-absent", "key_id", NULL, NULL, K_REG, 0},
		{"signature_b64-absent", "signature_b64", NULL, NULL, K_REG, 0},
		{"canonical_sha256-number", NULL, "canonical_sha256", "1", K_REG, 0},
		{"public_key_fingerprint-null", NULL, "public_key_fingerprint", "null", K_REG, 0},
		{"key_id-number", NULL, "key_id", "1", K_REG, 0},
		{"signature_b64-array", NULL, "signature_b64", "[]", K_REG, 0},
		{"signed_message-other", NULL, "signed_message", "\"open_graph_event_sha256_bytes\"", K_REG, 0},
		{"signed_message-absent", "signed_message", NULL, NULL, K_REG, 1},
		{"signed_message-null", NULL, "signed_message", "null", K_REG, 1},
		{"signed_message-number", NULL, "signed_message", "7", K_REG, 1},
		{"canonical_sha256-other", NULL, "canonical_sha256",
		 "\"1111111111111111111111111111111111111111111111111111111111111111\"", K_REG, 0},
		{"fingerprint-of-another-key", NULL, "public_key_fingerprint", "\"OPFP\"", K_REG, 0},
		{"key_id-of-another-key", NULL, "key_id", "\"op-one\"", K_REG, 0},
		{"key_id-case", NULL, "key_id", "\"Test-Registry\"", K_REG, 0},
		{"signature-zeroes", NULL, "signature_b64",
		 "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\"", K_REG, 0},
		{"signature-unpadded", NULL, "signature_b64", "\"SIGNOPAD\"", K_REG, 0},
		{"by-operator-key", NULL, NULL, NULL, K_OP1, 0},
		{"by-untrusted-key", NULL, NULL, NULL, K_STRANGER, 0},
		{"by-registry-key-not-in-T", NULL, NULL, NULL, K_OLDREG, 0},
		{"algorithm-not-read", NULL, "algorithm", "\"rsa\"", K_REG, 1},
		{"kind-not-read", NULL, "kind", "\"something_else\"", K_REG, 1},
		{"signature_status-not-read", NULL, "signature_status", "\"unsigned\"", K_REG, 1},
		{"signed_at-not-read", NULL, "signed_at", "\"yesterday\"", K_REG, 1},
		{"extra-member-not-read", NULL, "builder_version", "\"x\"", K_REG, 1},
	};
	for (size_t i = 0; i < sizeof(rcs) / sizeof(rcs[0]); i++) {
		pith_buf_t r2 = PITH_BUF_INIT;
		const char *json = rcs[i].json;
		char buf[200];
		if (json && !strcmp(json, "\"OPFP\"")) {
			snprintf(buf, sizeof(buf), "\"%s\"", keys[K_OP1].key.fp);
			json = buf;
		}
		receipt_text(&r2, hex, &keys[rcs[i].key], rcs[i].omit, rcs[i].over, json);
		if (json && !strcmp(json, "\"SIGNOPAD\"")) {
			/* the right signature without its "==" */
			receipt_text(&r2, hex, &keys[rcs[i].key], NULL, NULL, NULL);
			char *p = strstr((char *)r2.data, "==\"");
			if (p)
				memmove(p, p + 2, strlen(p + 2) + 1);
			r2.len = strlen((char *)r2.data);
		}
		RC_CASE("R-RECEIPT", rcs[i].name, "the receipt rule: which members are read and how "
			"(issue 15, point 3)", R, Q, (const char *)r2.data, rcs[i].ok ? NULL : "bad_receipt");
		pith_buf_release(&r2);
	}
	RC_CASE("R-RECEIPT", "absent", "no payload.receipt", R, Q, NULL, "bad_receipt");
	RC_CASE("R-RECEIPT", "null", "payload.receipt null", R, Q, "null", "bad_receipt");
	RC_CASE("R-RECEIPT", "string", "payload.receipt a string", R, Q, "\"signed\"", "bad_receipt");
	{
		/* a registry key of T that rotated in 2020: rotation does not apply to receipts */
		pith_buf_t r2 = PITH_BUF_INIT;
		receipt_text(&r2, hex, &keys[K_OLDREG], NULL, NULL, NULL);
		rc_case(&c, "R-RECEIPT", "by-rotated-registry-key",
			"a receipt by a registry key of T whose rotates_at (2020) is long past: holds", R, Q,
			(const char *)r2.data, NULL);
		memcpy(c.pith, pith, sizeof(pith));
		c.n = 0;
		c.trust |= 1u << K_OLDREG;
		pith_buf_t pl = PITH_BUF_INIT;
		rc_payload(&pl, R, Q, (const char *)r2.data);
		add_ev(&c, K_REG, "record_created", "record", T0, (const char *)pl.data, NULL, NULL,
		       "accepted", NULL);
		case_emit(&c);
		pith_buf_release(&pl);
		pith_buf_release(&r2);
	}
	/* the record_created by an operator, with the registry's receipt: valid */
	rc_case(&c, "R-RECEIPT", "event-by-operator", "record_created signed by an operator key, receipt "
		"by the registry: the receipt decides, not the event's signer", R, Q, RC, NULL);
	memcpy(c.pith, pith, sizeof(pith));
	c.n = 0;
	{
		pith_buf_t pl = PITH_BUF_INIT;
		rc_payload(&pl, R, Q, RC);
		add_ev(&c, K_OP1, "record_created", "record", T0, (const char *)pl.data, NULL, NULL,
		       "accepted", NULL);
		pith_buf_release(&pl);
	}
	case_emit(&c);
#undef RC_CASE
	pith_buf_release(&rec);
	pith_buf_release(&rcpt);

	/* R-SUBJECT, R-TYPE, R-TARGET, graph_snapshot payloads */
	static const struct {
		const char *rule, *name, *type, *target, *payload, *reason;
	} evs[] = {
		{"R-TYPE", "unknown", "foo", "record", "{}", "unknown_event_type"},
		{"R-TYPE", "case-differs", "Correction", "record", "{}", "unknown_event_type"},
		{"R-TYPE", "plural", "graph_snapshots", "graph", "{}", "unknown_event_type"},
		{"R-TARGET", "record_created-target-graph", "record_created", "graph", "{}", "wrong_target"},
		{"R-TARGET", "graph_snapshot-target-record", "graph_snapshot", "record", "{\"graph_snapshot\":{}}", "wrong_target"},
		{"R-TARGET", "citation-any-target", "citation_signature", "pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA", "{}", NULL},
		{"R-TARGET", "mirror_hint-url-target", "mirror_hint", "https://mirror.example/pith/", "{}", NULL},
		{"R-PAYLOAD-TYPE", "graph_snapshot-absent", "graph_snapshot", "graph", "{}", "bad_payload"},
		{"R-PAYLOAD-TYPE", "graph_snapshot-null", "graph_snapshot", "graph", "{\"graph_snapshot\":null}", "bad_payload"},
		{"R-PAYLOAD-TYPE", "graph_snapshot-string", "graph_snapshot", "graph", "{\"graph_snapshot\":\"g\"}", "bad_payload"},
		{"R-PAYLOAD-TYPE", "graph_snapshot-array", "graph_snapshot", "graph", "{\"graph_snapshot\":[]}", "bad_payload"},
		{"R-PAYLOAD-TYPE", "graph_snapshot-object", "graph_snapshot", "graph", "{\"graph_snapshot\":{}}", NULL},
	};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
		case_init(&c, evs[i].rule, evs[i].name, "M2: an authentic event checked against its type");
		add_record(&c, recno++, T0, NULL);
		add_ev(&c, K_OP1, evs[i].type, evs[i].target, T1, evs[i].payload, NULL, NULL, "accepted", NULL);
		static char want[80];
		snprintf(want, sizeof(want), "\"reason\":\"%s\"", evs[i].reason ? evs[i].reason : "");
		case_must(&c, evs[i].reason ? want : "\"invalid_event_count\":0");
		case_emit(&c);
	}
	case_init(&c, "R-SUBJECT", "other-record", "an event about another record, merged under this one "
		  "(as in a bundle's state): subject_mismatch, checked first");
	add_record(&c, recno++, T0, NULL);
	{
		char save[PITH_NUMBER_LEN + 1];
		memcpy(save, c.pith, sizeof(save));
		c.pith[PITH_NUMBER_LEN - 1] = c.pith[PITH_NUMBER_LEN - 1] == 'A' ? 'B' : 'A';
		add_ev(&c, K_OP1, "foo", "graph", T1, "{}", NULL, NULL, "accepted", NULL);
		memcpy(c.pith, save, sizeof(save));
	}
	case_must(&c, "\"reason\":\"subject_mismatch\"");
	case_emit(&c);
}

char *quoted(char *buf, size_t cap, const char *id)
{
	snprintf(buf, cap, "\"%s\"", id);
	return buf;
}

/* M3: supersession. */
void cases_supersede(void)
{
	gcase_t c;
	char a[PITH_EVENT_ID_LEN + 1], b[PITH_EVENT_ID_LEN + 1], x[PITH_EVENT_ID_LEN + 1], q[80];
	static char must[8][200];
	memset(must, 0, sizeof(must));

	/* X by kx at tx, then S by ks at ts naming X: superseded or not */
	static const struct {
		const char *name, *desc;
		int kx;
		const char *tx;
		int ks;
		const char *ts;
		int superseded;
	} pairs[] = {
		{"same-signer-earlier", "a later event of the same signer names an earlier one", K_OP1, T1, K_OP1, T2, 1},
		{"names-later-event", "naming an event that comes later in merge order has no effect", K_OP1, T2, K_OP1, T1, 0},
		{"other-signer", "an operator cannot supersede another operator's event", K_OP1, T1, K_OP2, T2, 0},
		{"registry-supersedes-operator", "a registry key may supersede anyone's event", K_OP1, T1, K_REG, T2, 1},
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		case_init(&c, "R-SUPERSEDE", pairs[i].name, pairs[i].desc);
		add_record(&c, recno++, T0, NULL);
		add_ev(&c, pairs[i].kx, "correction", "record", pairs[i].tx, "{\"v\":1}", NULL, NULL, "accepted", a);
		add_ev(&c, pairs[i].ks, "correction", "record", pairs[i].ts, "{\"v\":2}", NULL,
		       quoted(q, sizeof(q), a), "accepted", NULL);
		if (pairs[i].superseded) {
			snprintf(must[i], 200, "\"superseded_event_ids\":[\"%s\"]", a);
			case_must(&c, must[i]);
		}
		case_emit(&c);
	}

	case_init(&c, "R-SUPERSEDE", "unknown-id", "naming an id not in E has no effect");
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_OP1, "correction", "record", T1, "{}", NULL,
	       "\"sha256:00000000000000000000000000000000000000000000000000000000000000aa\"", "accepted", NULL);
	case_emit(&c);

	case_init(&c, "R-SUPERSEDE", "names-invalid-event", "an invalid event stays invalid when named");
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_OP1, "foo", "record", T1, "{}", NULL, NULL, "accepted", a);
	add_ev(&c, K_OP1, "correction", "record", T2, "{}", NULL, quoted(q, sizeof(q), a), "accepted", NULL);
	case_must(&c, "\"reason\":\"unknown_event_type\"");
	case_emit(&c);

	case_init(&c, "R-SUPERSEDE", "chain", "C supersedes B, B supersedes A: a superseded event still supersedes");
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_OP1, "correction", "record", T1, "{\"v\":1}", NULL, NULL, "accepted", a);
	add_ev(&c, K_OP1, "correction", "record", T2, "{\"v\":2}", NULL, quoted(q, sizeof(q), a), "accepted", b);
	add_ev(&c, K_REG, "correction", "record", T3, "{\"v\":3}", NULL, quoted(q, sizeof(q), b), "accepted", NULL);
	snprintf(must[0], 200, "\"superseded_event_ids\":[\"%s\",\"%s\"]", strcmp(a, b) < 0 ? a : b,
		 strcmp(a, b) < 0 ? b : a);
	case_must(&c, must[0]);
	case_emit(&c);

	for (int v = 0; v < 4; v++) {
		char nm[40];
		snprintf(nm, sizeof(nm), "same-created_at-%d", v);
		case_init(&c, "R-SUPERSEDE", nm, "same created_at: X supersedable only when its id is the smaller (merge order)");
		add_record(&c, recno++, T0, NULL);
		char pl[40];
		snprintf(pl, sizeof(pl), "{\"v\":%d}", v);
		add_ev(&c, K_OP1, "correction", "record", T1, pl, NULL, NULL, "accepted", a);
		add_ev(&c, K_OP1, "correction", "record", T1, "{}", NULL, quoted(q, sizeof(q), a), "accepted", x);
		if (strcmp(a, x) < 0) {
			snprintf(must[4 + v], 200, "\"superseded_event_ids\":[\"%s\"]", a);
			case_must(&c, must[4 + v]);
		}
		case_emit(&c);
	}

	case_init(&c, "R-SUPERSEDE", "superseded-not-equivocation", "two events in one slot, the later superseding the earlier: no equivocation");
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_OP1, "timestamp_anchor", "record", T1, "{\"v\":1}", NULL, NULL, "accepted", a);
	add_ev(&c, K_OP1, "timestamp_anchor", "record", T2, "{\"v\":2}", NULL, quoted(q, sizeof(q), a), "accepted", NULL);
	case_must(&c, "\"equivocation_count\":0");
	case_emit(&c);
}

/* M4: slots and equivocations; M1/M5: order. */
void cases_equiv_order(void)
{
	gcase_t c;
	char a[PITH_EVENT_ID_LEN + 1], q[80];
	pith_buf_t pl = PITH_BUF_INIT;

	case_init(&c, "R-EQUIV", "record_created-twice", "two valid record_created: the first in merge order applies");
	good_payload(&c, recno++, &pl);
	add_ev(&c, K_REG, "record_created", "record", T1, (const char *)pl.data, NULL, NULL, "accepted", NULL);
	add_ev(&c, K_REG, "record_created", "record", T0, (const char *)pl.data, NULL, NULL, "accepted", NULL);
	case_must(&c, "\"equivocation_count\":1");
	case_must(&c, "\"signer_fingerprint\":null");
	case_emit(&c);

	case_init(&c, "R-EQUIV", "record_created-tie", "two record_created at one created_at: the smaller event_id applies");
	good_payload(&c, recno++, &pl);
	add_ev(&c, K_REG, "record_created", "record", T0, (const char *)pl.data, NULL, NULL, "accepted", NULL);
	pl.len--; /* drop the closing brace: another member makes another event */
	pith_buf_puts(&pl, ",\"note\":\"copy\"}");
	pith_buf_cstr(&pl);
	add_ev(&c, K_REG, "record_created", "record", T0, (const char *)pl.data, NULL, NULL, "accepted", NULL);
	case_must(&c, "\"equivocation_count\":1");
	case_emit(&c);

	case_init(&c, "R-EQUIV", "record_created-two-signers", "record_created is one slot whoever signed");
	good_payload(&c, recno++, &pl);
	add_ev(&c, K_OP1, "record_created", "record", T0, (const char *)pl.data, NULL, NULL, "accepted", NULL);
	add_ev(&c, K_REG, "record_created", "record", T1, (const char *)pl.data, NULL, NULL, "accepted", NULL);
	case_must(&c, "\"equivocation_count\":1");
	case_emit(&c);

	static const struct {
		const char *name, *desc;
		int k2;
		const char *t2;
		int prev2, n;
		const char *count;
	} slots[] = {
		{"same-slot", "two anchors of one signer, one target, no prev_event", K_OP1, "record", 0, 2, "\"equivocation_count\":1"},
		{"three-in-slot", "three in one slot: one applied, two rejected (ascending)", K_OP1, "record", 0, 3, "\"equivocation_count\":1"},
		{"other-signer", "another signer: another slot", K_OP2, "record", 0, 2, "\"equivocation_count\":0"},
		{"other-target", "another target: another slot", K_OP1, "graph", 0, 2, "\"equivocation_count\":0"},
		{"other-prev", "another prev_event: another slot", K_OP1, "record", 1, 2, "\"equivocation_count\":0"},
	};
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		char rid[PITH_EVENT_ID_LEN + 1];
		case_init(&c, "R-SLOT", slots[i].name, slots[i].desc);
		add_record(&c, recno++, T0, rid);
		add_ev(&c, K_OP1, "timestamp_anchor", "record", T1, "{\"v\":1}", NULL, NULL, "accepted", NULL);
		add_ev(&c, slots[i].k2, "timestamp_anchor", slots[i].t2, T2, "{\"v\":2}",
		       slots[i].prev2 ? rid : NULL, NULL, "accepted", NULL);
		if (slots[i].n > 2)
			add_ev(&c, K_OP1, "timestamp_anchor", "record", T2, "{\"v\":3}", NULL, NULL, "accepted", NULL);
		case_must(&c, slots[i].count);
		case_emit(&c);
	}

	case_init(&c, "R-EQUIV", "entry-order", "several equivocations: entries ordered by slot bytes");
	good_payload(&c, recno++, &pl);
	add_ev(&c, K_REG, "record_created", "record", T0, (const char *)pl.data, NULL, NULL, "accepted", NULL);
	add_ev(&c, K_REG, "record_created", "record", T1, (const char *)pl.data, NULL, NULL, "accepted", NULL);
	static const char *const types[] = {"timestamp_anchor", "author_attestation", "correction"};
	for (int t = 0; t < 3; t++)
		for (int v = 0; v < 2; v++) {
			char p[30];
			snprintf(p, sizeof(p), "{\"v\":%d}", v);
			add_ev(&c, K_OP2, types[t], "record", v ? T2 : T1, p, NULL, NULL, "accepted", NULL);
		}
	case_must(&c, "\"equivocation_count\":4");
	case_emit(&c);

	case_init(&c, "R-EQUIV", "utf8-target-order", "slots differing in a non-ASCII target: byte order (z 0x7A before é 0xC3)");
	add_record(&c, recno++, T0, NULL);
	static const char *const tg[] = {"\xc3\xa9", "z", "Z", "\xe2\x82\xac"};
	for (int t = 0; t < 4; t++)
		for (int v = 0; v < 2; v++) {
			char p[30];
			snprintf(p, sizeof(p), "{\"v\":%d}", v);
			add_ev(&c, K_OP1, "citation_signature", tg[t], v ? T2 : T1, p, NULL, NULL, "accepted", NULL);
		}
	case_must(&c, "\"equivocation_count\":4");
	case_emit(&c);

	case_init(&c, "R-ORDER", "lists-by-created_at", "current lists in (created_at, event_id) order, not arrival order");
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_OP1, "storage_attestation", "a", T3, "{}", NULL, NULL, "accepted", NULL);
	add_ev(&c, K_OP1, "storage_attestation", "b", T1, "{}", NULL, NULL, "accepted", NULL);
	add_ev(&c, K_OP1, "storage_attestation", "c", T2, "{}", NULL, NULL, "accepted", NULL);
	case_emit(&c);

	case_init(&c, "R-ORDER", "created_at-tie", "one created_at: ties in event_id order");
	add_record(&c, recno++, T0, NULL);
	for (int v = 0; v < 5; v++) {
		char t[8];
		snprintf(t, sizeof(t), "t%d", v);
		add_ev(&c, K_OP2, "replication_record", t, T1, "{}", NULL, NULL, "accepted", NULL);
	}
	case_emit(&c);

	case_init(&c, "R-PROJECTION", "every-list", "one applied event of every type, with extra members the projection leaves out");
	add_record(&c, recno++, T0, a);
	static const char *const all[] = {"graph_snapshot", "author_attestation", "timestamp_anchor",
					  "storage_attestation", "citation_signature", "replication_record",
					  "correction", "mirror_hint"};
	for (int t = 0; t < 8; t++) {
		pith_buf_t tx = PITH_BUF_INIT, sx = PITH_BUF_INIT;
		ev_text(&tx, all[t], c.pith, t ? "record" : "graph", T1,
			t ? "{\"k\":[1,2.5,\"\\u00e9\"]}" : "{\"graph_snapshot\":{\"n\":1}}", a, NULL);
		tx.len--; /* an extra member, hashed and signed */
		pith_buf_puts(&tx, ",\"x_note\":\"outside the projection\"}");
		pith_buf_cstr(&tx);
		ev_sign((const char *)tx.data, &keys[K_OP1], NULL, NULL, &sx, NULL);
		add_doc(&c, "event", &sx, "accepted");
		pith_buf_release(&tx);
		pith_buf_release(&sx);
	}
	case_must(&c, "\"valid_event_count\":9");
	case_emit(&c);

	case_init(&c, "R-CURRENT", "no-record_created", "no record_created: current.record_created and canonical_record are null");
	memcpy(c.pith, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE", PITH_NUMBER_LEN + 1);
	add_ev(&c, K_OP1, "mirror_hint", "https://m.example/", T1, "{}", NULL, NULL, "accepted", NULL);
	case_must(&c, "\"canonical_record\":null");
	case_emit(&c);

	case_init(&c, "R-CURRENT", "empty", "no events at all");
	memcpy(c.pith, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE", PITH_NUMBER_LEN + 1);
	case_must(&c, "\"event_count\":0");
	case_emit(&c);
	(void)q;
	pith_buf_release(&pl);
}

/* Section 4: bundles, B-NEWEST. */
void cases_bundles(void)
{
	gcase_t c;
	static const struct {
		const char *rule, *name, *edit, *json;
		int key, resign;
	} bs[] = {
		{"B-TYPE", "bundle_type-other", "bundle_type", "\"pith_bundle\"", K_REG, 1},
		{"B-TYPE", "bundle_version-number", "bundle_version", "1.0", K_REG, 1},
		{"B-RECORD", "pith_number-other", "pith_number", "\"pith:2024:AAAAAAAAAAAAAAAAAAAAAAAAAA\"", K_REG, 1},
		{"B-RECORD", "canonical_sha256-other", "canonical_sha256", "\"0000000000000000000000000000000000000000000000000000000000000000\"", K_REG, 1},
		{"B-RECORD", "short_pith_number-other", "short_pith_number", "\"pith:AAAAAAAA\"", K_REG, 1},
		{"B-RECORD", "canonical_record-string", "canonical_record", "\"r\"", K_REG, 1},
		{"B-ALIASES", "not-an-array", "source_aliases", "{}", K_REG, 1},
		{"B-ALIASES", "wrong-arxiv", "source_aliases", "[{\"alias_kind\":\"arxiv\",\"alias_value\":\"9999.99999\",\"created_at\":\"x\"}]", K_REG, 1},
		{"B-ALIASES", "out-of-order", "source_aliases", "[{\"alias_kind\":\"x2\",\"alias_value\":\"a\"},{\"alias_kind\":\"x1\",\"alias_value\":\"b\"}]", K_REG, 1},
		{"B-HASH", "changed-after-signing", "x_extra", "1", K_REG, 0},
		{"B-SIGNATURE", "by-operator-key", NULL, NULL, K_OP1, 0},
		{"B-SIGNATURE", "by-untrusted-key", NULL, NULL, K_STRANGER, 0},
		{"B-STATE", "state-not-object", "state", "[]", K_REG, 1},
		{"B-STATE", "state-self-hash", "state", "{\"state_sha256\":\"00\"}", K_REG, 1},
		{"B-NEWEST", "one-bundle", NULL, NULL, K_REG, 0},
	};
	for (size_t i = 0; i < sizeof(bs) / sizeof(bs[0]); i++) {
		case_init(&c, bs[i].rule, bs[i].name, "one bundle check (docs/merge.md section 4): a bundle "
			  "failing any is refused whole");
		/* the events go inside the bundle only: they join E with it */
		add_record(&c, recno++, T0, NULL);
		add_ev(&c, K_OP1, "correction", "record", T1, "{}", NULL, NULL, "accepted", NULL);
		pith_buf_t b = PITH_BUF_INIT;
		int ok = !make_bundle(&c, 0, 2, "2026-02-01T00:00:00Z", bs[i].key, bs[i].edit, bs[i].json,
				      bs[i].resign, &b);
		for (size_t k = 0; k < c.n; k++)
			pith_buf_release(&c.doc[k].text);
		c.n = 0;
		if (ok)
			add_doc(&c, "bundle", &b, strcmp(bs[i].rule, "B-NEWEST") ? bs[i].rule : "accepted");
		if (!strcmp(bs[i].rule, "B-NEWEST"))
			case_must(&c, "\"alias_kind\":\"arxiv\"");
		else
			case_must(&c, "\"event_count\":0");
		pith_buf_release(&b);
		case_emit(&c);
	}

	case_init(&c, "B-EVENTS", "event-by-untrusted-key", "a bundle holding an event T does not trust: refused whole");
	c.trust |= 1u << K_STRANGER;
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_STRANGER, "correction", "record", T1, "{}", NULL, NULL, "accepted", NULL);
	{
		pith_buf_t b = PITH_BUF_INIT;
		make_bundle(&c, 0, 2, "2026-02-01T00:00:00Z", K_REG, NULL, NULL, 0, &b);
		for (size_t k = 0; k < c.n; k++)
			pith_buf_release(&c.doc[k].text);
		c.n = 0;
		c.trust &= ~(1u << K_STRANGER);
		add_doc(&c, "bundle", &b, "B-EVENTS");
		pith_buf_release(&b);
	}
	case_emit(&c);

	/* B-NEWEST: two bundles of one record, aliases told apart by created_at */
	static const struct {
		const char *name, *desc, *at1, *at2;
	} nw[] = {
		{"later-wins-whatever-arrival", "the bundle built later gives A, though it arrives first",
		 "2026-03-01T00:00:00Z", "2026-02-01T00:00:00Z"},
		{"tie-smaller-hash", "one built_at: the smaller bundle_sha256 gives A",
		 "2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{"tie-nanoseconds", "built_at differing past the microsecond are one time: smaller hash",
		 "2026-03-01T00:00:00.123456001Z", "2026-03-01T00:00:00.123456999Z"},
		{"tie-z-and-offset", "Z and +00:00 are one time: smaller hash",
		 "2026-03-01T00:00:00Z", "2026-03-01T00:00:00+00:00"},
		{"microsecond-later-wins", "one microsecond later wins",
		 "2026-03-01T00:00:00.000001Z", "2026-03-01T00:00:00Z"},
	};
	for (size_t i = 0; i < sizeof(nw) / sizeof(nw[0]); i++) {
		case_init(&c, "B-NEWEST", nw[i].name, nw[i].desc);
		add_record(&c, recno++, T0, NULL);
		pith_buf_t b1 = PITH_BUF_INIT, b2 = PITH_BUF_INIT;
		char al1[400], al2[400];
		/* aliases valid for the record, created_at naming the bundle */
		const char *src = "[{\"alias_kind\":\"pith_short_8\",\"alias_value\":\"%.8s\",\"created_at\":\"%s\"}]";
		snprintf(al1, sizeof(al1), src, c.pith + 10, "first");
		snprintf(al2, sizeof(al2), src, c.pith + 10, "second");
		make_bundle(&c, 0, 1, nw[i].at1, K_REG, "source_aliases", al1, 1, &b1);
		make_bundle(&c, 0, 1, nw[i].at2, K_REG, "source_aliases", al2, 1, &b2);
		pith_buf_release(&c.doc[0].text);
		c.n = 0;
		add_doc(&c, "bundle", &b1, "accepted");
		add_doc(&c, "bundle", &b2, "accepted");
		/* which one the rule picks */
		json_doc_t *d1 = NULL, *d2 = NULL;
		uint8_t h1[32], h2[32];
		int64_t u1, u2;
		json_parse(&d1, b1.data, b1.len, NULL, NULL);
		json_parse(&d2, b2.data, b2.len, NULL, NULL);
		pith_bundle_hash(json_doc_root(d1), h1);
		pith_bundle_hash(json_doc_root(d2), h2);
		pith_time_parse_valid(nw[i].at1, PITH_TIME_FRACTION, &u1);
		pith_time_parse_valid(nw[i].at2, PITH_TIME_FRACTION, &u2);
		int first = u1 > u2 || (u1 == u2 && memcmp(h1, h2, 32) < 0);
		case_must(&c, first ? "\"created_at\":\"first\"" : "\"created_at\":\"second\"");
		json_doc_free(d1);
		json_doc_free(d2);
		pith_buf_release(&b1);
		pith_buf_release(&b2);
		case_emit(&c);
	}

	case_init(&c, "B-NEWEST", "other-record-bundle", "a valid bundle of another record: its events join E, its aliases do not");
	add_record(&c, recno++, T0, NULL);
	{
		pith_buf_t b = PITH_BUF_INIT;
		make_bundle(&c, 0, 1, "2026-02-01T00:00:00Z", K_REG, NULL, NULL, 0, &b);
		pith_buf_release(&c.doc[0].text);
		c.n = 0;
		add_record(&c, recno++, T1, NULL);
		add_doc(&c, "bundle", &b, "accepted");
		pith_buf_release(&b);
	}
	case_must(&c, "\"source_aliases\":[]");
	case_must(&c, "\"reason\":\"subject_mismatch\"");
	case_emit(&c);
}

/* The registry's own bundle, as published (tests/data). */
void case_registry(const char *data_dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/bundle-AR7B3DEV.json", data_dir);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "gen_conformance: cannot open %s\n", path);
		failures++;
		return;
	}
	pith_buf_t b = PITH_BUF_INIT;
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		pith_buf_append(&b, chunk, n);
	fclose(f);
	gcase_t c;
	case_init(&c, "R-STATE", "registry-bundle", "the registry's published bundle of pith:2024:AR7B3DEV..., "
		  "verbatim: accepted, and its state is the published one (3facdc2a...)");
	c.trust = 0;
	memcpy(c.pith, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE", PITH_NUMBER_LEN + 1);
	add_doc(&c, "bundle", &b, "accepted");
	case_must(&c, "\"state_sha256\":\"3facdc2a");
	case_emit(&c);
	pith_buf_release(&b);
}

/* Mixed sets from a seed: every type, signers, ties, supersedes, prev
 * chains, duplicates, re-signed copies, invalid events, a bundle. */
void cases_mixed(unsigned count)
{
	static const char *const types[] = {"record_created", "graph_snapshot", "author_attestation",
					    "timestamp_anchor", "storage_attestation", "citation_signature",
					    "replication_record", "correction", "mirror_hint", "foo"};
	static const char *const times[] = {T0, T1, T2, T3};
	static const char *const targets[] = {"record", "graph", "x"};
	for (unsigned s = 0; s < count; s++) {
		uint64_t rng = 0x5eed0000u + s;
		gcase_t c;
		char nm[40], ids[MAXDOCS][PITH_EVENT_ID_LEN + 1];
		size_t nid = 0;
		snprintf(nm, sizeof(nm), "mixed-%03u", s);
		case_init(&c, "R-STATE", nm, "a generated mix of events (all rules at once); the state is "
			  "this build's, kept as data");
		pith_buf_t pl = PITH_BUF_INIT;
		good_payload(&c, recno++, &pl);
		unsigned ne = 3 + (unsigned)(tg_rand(&rng) % 14);
		for (unsigned i = 0; i < ne && c.n < MAXDOCS - 4; i++) {
			unsigned t = (unsigned)(tg_rand(&rng) % 10);
			int key = (int)(tg_rand(&rng) % 3); /* reg, op1, op2 */
			const char *at = times[tg_rand(&rng) % 4];
			const char *target = t == 0 ? "record" : t == 1 ? "graph" : targets[tg_rand(&rng) % 3];
			char payload[64], sup[80] = "", *prev = NULL;
			snprintf(payload, sizeof(payload), t == 1 ? "{\"graph_snapshot\":{\"v\":%u}}" : "{\"v\":%u}",
				 (unsigned)(tg_rand(&rng) % 3));
			if (nid && tg_rand(&rng) % 4 == 0)
				quoted(sup, sizeof(sup), ids[tg_rand(&rng) % nid]);
			if (nid && tg_rand(&rng) % 5 == 0)
				prev = ids[tg_rand(&rng) % nid];
			add_ev(&c, key, types[t], target, at, t == 0 ? (const char *)pl.data : payload, prev,
			       sup[0] ? sup : NULL, "accepted", ids[nid]);
			nid++;
			unsigned extra = (unsigned)(tg_rand(&rng) % 10);
			if (extra == 0) {
				add_doc(&c, "event", &c.doc[c.n - 1].text, "accepted");
			} else if (extra == 1) {
				pith_buf_t r = PITH_BUF_INIT;
				tg_resign(c.doc[c.n - 1].text.data, c.doc[c.n - 1].text.len, &keys[K_OP1],
					  "2026-09-09T09:09:09Z", &r);
				add_doc(&c, "event", &r, "accepted");
				pith_buf_release(&r);
			}
		}
		if (tg_rand(&rng) % 3 == 0) {
			/* a bundle of a prefix of the documents, with the record_created */
			gcase_t tmp = c;
			size_t upto = 1 + (size_t)(tg_rand(&rng) % c.n);
			int has_rc = 0;
			for (size_t k = 0; k < upto; k++)
				has_rc |= strstr((const char *)tmp.doc[k].text.data, "\"event_type\":\"record_created\"") != NULL;
			pith_buf_t b = PITH_BUF_INIT;
			if (has_rc && !make_bundle(&c, 0, upto, "2026-05-05T05:05:05Z", K_REG, NULL, NULL, 0, &b))
				add_doc(&c, "bundle", &b, "accepted");
			pith_buf_release(&b);
		}
		pith_buf_release(&pl);
		case_emit(&c);
	}
}
