/* The conformance corpus before the merge: files of cases with the
 * expected bytes (canonical JSON, ids, signature encodings, keys, issue
 * 54's cases; gen_conformance.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gen_conformance.h"

/* ---- before the merge: files of cases with the expected bytes ------------------ */

typedef struct listfile {
	pith_buf_t b;
	const char *kind;
	size_t n;
} listfile_t;

static void list_begin(listfile_t *l, const char *kind, const char *desc)
{
	memset(l, 0, sizeof(*l));
	l->kind = kind;
	pith_buf_printf(&l->b, "{\"kind\":\"%s\",\n\"description\":", kind);
	put_str(&l->b, desc, strlen(desc));
	pith_buf_puts(&l->b, ",\n\"cases\":[\n");
}

/* Adds a case; extra is raw JSON members (may be NULL); want is the raw JSON
 * answer the rule gives (NULL: let this build say, for values the rule
 * fixes only as valid or not: then valid tells which). */
static void list_add(listfile_t *l, const char *name, const char *rule, const char *input,
		     size_t inlen, const char *extra, const char *want, int valid)
{
	pith_buf_t c = PITH_BUF_INIT, got = PITH_BUF_INIT;
	pith_buf_puts(&c, "{\"name\":");
	put_str(&c, name, strlen(name));
	pith_buf_puts(&c, ",\"rule\":");
	put_str(&c, rule, strlen(rule));
	pith_buf_putc(&c, ',');
	put_bytes(&c, "input", (const uint8_t *)input, inlen);
	if (extra)
		pith_buf_printf(&c, ",%s", extra);
	pith_buf_puts(&c, ",\"expect\":null}");
	json_doc_t *d = NULL;
	json_parse(&d, c.data, c.len, NULL, NULL);
	/* what this build answers, through the runner's own code */
	pith_conform_answer(l->kind, json_doc_root(d), &got);
	pith_buf_cstr(&got);
	int ok = want ? !strcmp((const char *)got.data, want)
		      : (valid ? strcmp((const char *)got.data, "null") : !strcmp((const char *)got.data, "null"));
	if (!ok) {
		fprintf(stderr, "gen_conformance: %s %s: this build answers %.200s, the rule says %s\n",
			l->kind, name, (const char *)got.data, want ? want : valid ? "valid" : "null");
		failures++;
	} else {
		c.len -= strlen("null}");
		pith_buf_append(&c, got.data, got.len);
		pith_buf_putc(&c, '}');
		pith_buf_puts(&l->b, l->n++ ? ",\n" : "");
		pith_buf_append(&l->b, c.data, c.len);
	}
	json_doc_free(d);
	pith_buf_release(&c);
	pith_buf_release(&got);
}

static void list_end(listfile_t *l, const char *file)
{
	char path[4096];
	pith_buf_puts(&l->b, "\n]}\n");
	snprintf(path, sizeof(path), "%s/before/%s", outdir, file);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(l->b.data, 1, l->b.len, f) != l->b.len) {
		fprintf(stderr, "gen_conformance: cannot write %s\n", path);
		failures++;
	} else {
		written += l->n;
	}
	if (f)
		fclose(f);
	pith_buf_release(&l->b);
}

void cases_canon(void)
{
	static const struct {
		const char *name, *in, *out;
	} cs[] = {
		{"keys-sorted", "{\"b\":1,\"a\":2}", "{\"a\":2,\"b\":1}"},
		{"whitespace-removed", " { \"a\" : [ 1 , 2 ] } \n", "{\"a\":[1,2]}"},
		{"keys-by-code-point", "{\"\xc3\xa9\":1,\"z\":2,\"Z\":3,\"\xe2\x82\xac\":4}", "{\"Z\":3,\"z\":2,\"\xc3\xa9\":1,\"\xe2\x82\xac\":4}"},
		{"keys-astral-after-bmp", "{\"\\ud83d\\ude00\":1,\"\\uffff\":2}", "{\"\xef\xbf\xbf\":2,\"\xf0\x9f\x98\x80\":1}"},
		{"non-ascii-raw", "\"\\u00e9\"", "\"\xc3\xa9\""},
		{"control-lower-hex", "\"\\u001F\"", "\"\\u001f\""},
		{"short-escapes", "\"\\u0008\\u000c\\u000a\\u000d\\u0009\"", "\"\\b\\f\\n\\r\\t\""},
		{"quote-backslash", "\"\\\"\\\\\"", "\"\\\"\\\\\""},
		{"slash-not-escaped", "\"\\/\"", "\"/\""},
		{"del-raw", "\"\\u007f\"", "\"\x7f\""},
		{"line-separator-raw", "\"\\u2028\\u2029\"", "\"\xe2\x80\xa8\xe2\x80\xa9\""},
		{"surrogate-pair-raw", "\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\""},
		{"nul-escaped", "\"\\u0000\"", "\"\\u0000\""},
		{"minus-zero-int", "-0", "0"},
		{"big-int", "123456789012345678901234567890", "123456789012345678901234567890"},
		{"float-one", "1.0", "1.0"},
		{"float-hundred", "1e2", "100.0"},
		{"float-1e16", "1e16", "1e+16"},
		{"float-below-1e16", "9999999999999998.0", "9999999999999998.0"},
		{"float-1e-4", "0.0001", "0.0001"},
		{"float-1e-5", "0.00001", "1e-05"},
		{"float-big-exp", "1.5E300", "1.5e+300"},
		{"float-minus-zero", "-0.0", "-0.0"},
		{"float-shortest", "0.30000000000000004", "0.30000000000000004"},
		{"float-denormal", "5e-324", "5e-324"},
		{"float-max", "1.7976931348623157e308", "1.7976931348623157e+308"},
		{"float-exp-int", "2.5E+3", "2500.0"},
		{"float-underflow", "1e-400", "0.0"},
		{"literals", "[true,false,null]", "[true,false,null]"},
		{"empty-containers", "{\"a\":{},\"b\":[]}", "{\"a\":{},\"b\":[]}"},
		{"bom-skipped", "\xef\xbb\xbf{}", "{}"},
		{"reject-lone-high-surrogate", "\"\\ud800\"", NULL},
		{"reject-lone-low-surrogate", "\"\\udc00\"", NULL},
		{"reject-nan", "NaN", NULL},
		{"reject-infinity", "[Infinity]", NULL},
		{"reject-overflow", "1e400", NULL},
		{"reject-duplicate-key", "{\"a\":1,\"a\":1}", NULL},
		{"reject-nested-duplicate", "{\"x\":{\"a\":1,\"a\":2}}", NULL},
		{"reject-trailing", "{} {}", NULL},
		{"reject-invalid-utf8", "\"\xff\"", NULL},
		{"reject-overlong-utf8", "\"\xc0\xaf\"", NULL},
		{"reject-utf8-surrogate", "\"\xed\xa0\x80\"", NULL},
		{"reject-single-quotes", "{'a':1}", NULL},
		{"reject-trailing-comma", "[1,]", NULL},
		{"reject-leading-zero", "01", NULL},
		{"reject-raw-control", "\"a\nb\"", NULL},
		{"reject-empty", "", NULL},
	};
	listfile_t l;
	list_begin(&l, "canonical_json", "spec section 1: input JSON text, expected canonical bytes "
		   "(a JSON string), or null when the input must be refused");
	pith_buf_t want = PITH_BUF_INIT;
	for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		pith_buf_reset(&want);
		if (cs[i].out)
			json_write_string(&want, cs[i].out, strlen(cs[i].out));
		else
			pith_buf_puts(&want, "null");
		pith_buf_cstr(&want);
		list_add(&l, cs[i].name, "CANON", cs[i].in, strlen(cs[i].in), NULL, (const char *)want.data, 0);
	}
	/* depth and integer length bounds */
	pith_buf_t deep = PITH_BUF_INIT;
	for (int i = 0; i < 129; i++)
		pith_buf_putc(&deep, '[');
	for (int i = 0; i < 129; i++)
		pith_buf_putc(&deep, ']');
	list_add(&l, "reject-depth-129", "CANON", (const char *)deep.data, deep.len, NULL, "null", 0);
	pith_buf_reset(&deep);
	for (int i = 0; i < 4301; i++)
		pith_buf_putc(&deep, '7');
	list_add(&l, "reject-int-4301-digits", "CANON", (const char *)deep.data, deep.len, NULL, "null", 0);
	pith_buf_release(&deep);
	pith_buf_release(&want);
	list_end(&l, "canonical_json.json");
}

void cases_ids(const char *data_dir)
{
	listfile_t l;
	static const struct {
		const char *rule, *form, *in;
		int ok;
		const char *us;
	} ts[] = {
		{"T-SECONDS", "created_at", "1970-01-01T00:00:00Z", 1, "0"},
		{"T-SECONDS", "created_at", "2026-07-05T07:39:34Z", 1, NULL},
		{"T-SECONDS", "created_at", "2026-07-05T07:39:34.5Z", 0, NULL},
		{"T-SECONDS", "created_at", "2026-07-05T07:39:34+00:00", 0, NULL},
		{"T-GRAMMAR", "built_at", "2026-07-05T07:39:34+00:00", 1, NULL},
		{"T-GRAMMAR", "built_at", "1970-01-01T00:00:00.000001Z", 1, "1"},
		{"T-GRAMMAR", "built_at", "1970-01-01T00:00:00.0000019Z", 1, "1"},
		{"T-GRAMMAR", "built_at", "1969-12-31T23:59:59Z", 1, "-1000000"},
		{"T-GRAMMAR", "built_at", "2026-07-05T07:39:34.1234567891Z", 0, NULL},
		{"T-GRAMMAR", "built_at", "2026-07-05t07:39:34Z", 0, NULL},
		{"T-GRAMMAR", "built_at", "2026-07-05T07:39:34-00:00", 0, NULL},
		{"T-CALENDAR", "built_at", "2024-02-29T00:00:00Z", 1, NULL},
		{"T-CALENDAR", "built_at", "2000-02-29T00:00:00Z", 1, NULL},
		{"T-CALENDAR", "built_at", "1900-02-29T00:00:00Z", 0, NULL},
		{"T-CALENDAR", "built_at", "2025-02-29T00:00:00Z", 0, NULL},
		{"T-CALENDAR", "built_at", "2025-04-31T00:00:00Z", 0, NULL},
		{"T-CALENDAR", "built_at", "2025-12-31T23:59:60Z", 0, NULL},
		{"T-CALENDAR", "built_at", "2025-12-31T24:00:00Z", 0, NULL},
		{"T-YEARS", "built_at", "0829-01-01T00:00:00Z", 1, NULL},
		{"T-YEARS", "built_at", "0828-12-31T23:59:59.999999999Z", 0, NULL},
		{"T-YEARS", "built_at", "3110-12-31T23:59:59.999999999Z", 1, NULL},
		{"T-YEARS", "built_at", "3111-01-01T00:00:00Z", 0, NULL},
		{"T-YEARS", "built_at", "0000-01-01T00:00:00Z", 0, NULL},
		{"T-YEARS", "built_at", "9999-12-31T23:59:59Z", 0, NULL},
	};
	list_begin(&l, "timestamp", "docs/merge.md section 2: a timestamp of form created_at "
		   "(T-SECONDS) or built_at/signed_at; expected microseconds since the epoch, or null "
		   "when invalid");
	for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
		char name[80], extra[40];
		snprintf(name, sizeof(name), "%s:%s", ts[i].form, ts[i].in);
		snprintf(extra, sizeof(extra), "\"form\":\"%s\"", ts[i].form);
		list_add(&l, name, ts[i].rule, ts[i].in, strlen(ts[i].in), extra, ts[i].us, ts[i].ok);
	}
	list_end(&l, "timestamps.json");

	/* record identity: the registry's own records, then what is refused */
	list_begin(&l, "record_identity", "spec section 2 and R-RECORD-ID: a canonical record (JSON "
		   "text); expected canonical_sha256 and pith number, or null when it cannot be identified");
	listfile_t sig;
	list_begin(&sig, "ed25519", "spec section 3: Ed25519 over the 32 raw bytes of the hex digest in "
		   "input, by public_key_hex; true when signature_b64 verifies");
	char path[4096];
	snprintf(path, sizeof(path), "%s/registry_records.jsonl", data_dir);
	FILE *f = fopen(path, "r");
	char line[1 << 16];
	unsigned k = 0;
	while (f && fgets(line, sizeof(line), f)) {
		json_doc_t *d = NULL;
		if (json_parse(&d, (const uint8_t *)line, strlen(line), NULL, NULL))
			continue;
		const json_value_t *r = json_doc_root(d);
		const json_value_t *rec = json_get_type(r, "canonical_record", JSON_OBJECT);
		const char *h = json_get_str(r, "canonical_sha256"), *p = json_get_str(r, "pith_number");
		const char *rs = json_get_str(r, "receipt_signature_b64");
		if (rec && h && p) {
			pith_buf_t t = PITH_BUF_INIT;
			char want[200], name[80];
			json_canon_write(rec, &t);
			snprintf(want, sizeof(want), "{\"canonical_sha256\":\"%s\",\"pith_number\":\"%s\"}", h, p);
			snprintf(name, sizeof(name), "registry-%s", p);
			list_add(&l, name, "R-RECORD-ID", (const char *)t.data, t.len, NULL, want, 1);
			pith_buf_release(&t);
		}
		if (h && rs && k++ < 40) {
			char extra[300], name[80];
			snprintf(extra, sizeof(extra), "\"public_key_hex\":\"%s\",\"signature_b64\":\"%s\"",
				 PITH_REGISTRY_KEY_HEX, rs);
			snprintf(name, sizeof(name), "registry-receipt-%s", p ? p : "?");
			list_add(&sig, name, "R-RECEIPT", h, strlen(h), extra, "true", 1);
			/* the same signature over another digest */
			char other[65];
			snprintf(other, sizeof(other), "%s", h);
			other[0] = other[0] == '0' ? '1' : '0';
			snprintf(name, sizeof(name), "registry-receipt-other-digest-%s", p ? p : "?");
			list_add(&sig, name, "R-RECEIPT", other, 64, extra, "false", 1);
		}
		json_doc_free(d);
	}
	if (f)
		fclose(f);
	static const char *const bad[] = {
		"{\"metadata\":{\"submitted_at\":\"20a1-01-01\"}}", "{\"metadata\":{\"submitted_at\":\"202\"}}",
		"{\"metadata\":{\"submitted_at\":2024}}", "{\"metadata\":{}}", "{\"metadata\":\"2024\"}", "[]",
		"\"record\"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char name[40];
		snprintf(name, sizeof(name), "not-identified-%zu", i);
		list_add(&l, name, "R-RECORD-ID", bad[i], strlen(bad[i]), NULL, "null", 0);
	}
	list_add(&l, "year-only", "R-RECORD-ID", "{\"metadata\":{\"submitted_at\":\"2024\"}}", 36, NULL, NULL, 1);
	list_end(&l, "record_identity.json");
	list_end(&sig, "ed25519.json");

	list_begin(&l, "key_fingerprint", "spec section 2: the first 32 hex digits of SHA-256 of the raw "
		   "32-byte key (input: 64 lower-case hex), or null when the input is no key");
	list_add(&l, "registry-key", "FINGERPRINT", PITH_REGISTRY_KEY_HEX, 64, NULL,
		 "\"8d4b5ee74e4693bcd1df2446408b0d54\"", 1);
	for (int i = 0; i <= K_OPROT; i++) { /* the others share these keys */
		char hex[65], want[40];
		pith_hex_encode(keys[i].key.pk, 32, hex);
		snprintf(want, sizeof(want), "\"%s\"", keys[i].key.fp);
		list_add(&l, keys[i].key.key_id, "FINGERPRINT", hex, 64, NULL, want, 1);
	}
	list_add(&l, "upper-case-hex", "FINGERPRINT",
		 "B2D552B68890857171A78B36A5DCCF368A953413288C353F7C9D9D6F94B709B3", 64, NULL, "null", 0);
	list_add(&l, "short", "FINGERPRINT", "b2d552", 6, NULL, "null", 0);
	list_end(&l, "key_fingerprints.json");
}

/* A signature's base64 must be the alphabet's (RFC 4648): libsodium's
 * decoder reads every byte from 0x80 up as '/', so "//" written as the two
 * bytes of U+00E9 decodes to the same signature; and the last character's
 * unused bits must be zero. Both refused (V-SIGNATURE). Last of the cases,
 * so that the records of the others keep their numbers. */
void cases_sig_encoding(void)
{
	for (int variant = 0; variant < 2; variant++) {
		gcase_t c;
		case_init(&c, "V-SIGNATURE", variant ? "signature-unused-bits-set" : "signature-non-ascii-for-slash",
			  variant ? "a valid signature with the unused low bits of its last base64 "
				    "character set: refused"
				  : "a valid signature whose \"//\" is written as the two UTF-8 bytes of "
				    "U+00E9 (which libsodium 1.0.18's decoder reads as '/' each): refused");
		add_record(&c, recno++, T0, NULL);
		pith_buf_t t = PITH_BUF_INIT, sd = PITH_BUF_INIT;
		for (int nonce = 0;; nonce++) {
			char payload[64];
			snprintf(payload, sizeof(payload), "{\"note\":\"x%d\"}", nonce);
			pith_buf_reset(&t);
			ev_text(&t, "correction", c.pith, "record", T1, payload, NULL, NULL);
			pith_buf_cstr(&t);
			if (ev_sign((const char *)t.data, &keys[K_OP1], NULL, NULL, &sd, NULL))
				exit(1); /* ev_sign said why */
			pith_buf_cstr(&sd);
			char *b64 = strstr((char *)sd.data, "\"signature_b64\":\"");
			if (!b64) {
				fprintf(stderr, "gen_conformance: no signature_b64 in %.120s\n",
					(const char *)sd.data);
				exit(1);
			}
			b64 += 17;
			if (variant) {
				/* 'A' (0) -> 'B' (1) in the 86th character */
				if (b64[85] != 'A')
					continue;
				b64[85] = 'B';
				break;
			}
			char *two = strstr(b64, "//");
			if (!two || two >= b64 + 86)
				continue;
			two[0] = (char)0xC3;
			two[1] = (char)0xA9;
			break;
		}
		add_doc(&c, "event", &sd, "V-SIGNATURE");
		pith_buf_release(&t);
		pith_buf_release(&sd);
		case_emit(&c);
	}
}

/* K-SET, K-ROLE: the trust store is a set; a key listed twice (two key
 * ids and two roles, or one key id with two roles or two rotation times)
 * gives one state whatever the order of the list. Each pair of cases
 * lists T in both orders and must give the same bytes. */
void cases_keys(void)
{
	static const struct {
		const char *rule, *name, *desc;
		unsigned extra;
		int variant;
	} ks[] = {
		{"K-ROLE", "dual-key-supersedes",
		 "one public key trusted as dual-as-operator and as dual-as-registry: an event it signs "
		 "under the operator key id supersedes another signer's event (its fingerprint is a "
		 "registry fingerprint), whichever entry T lists first",
		 (1u << K_DUALOP) | (1u << K_DUALREG), 0},
		{"K-SET", "same-key-id-two-roles",
		 "test-registry's key and key id listed twice, as a registry key and without the role: one "
		 "entry, a registry key, so its receipt holds and its bundle verifies, in either order",
		 1u << K_REGASOP, 1},
		{"K-SET", "same-key-id-two-rotations",
		 "op-rotating's key and key id listed with rotates_at 2026-03-01 and 2026-05-01: one entry "
		 "rotating at the earlier, so an event of 2026-04-01 is refused (V-ROTATED) in either order",
		 (1u << K_OPROT) | (1u << K_OPROTLATE), 2},
	};
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		pith_buf_t state0 = PITH_BUF_INIT;
		for (int rev = 0; rev < 2; rev++) {
			gcase_t c;
			char name[96], a[PITH_EVENT_ID_LEN + 1], q[80];
			static char must[200];
			snprintf(name, sizeof(name), "%s.%s", ks[i].name, rev ? "listed-backwards" : "listed-forwards");
			case_init(&c, ks[i].rule, name, ks[i].desc);
			c.trust |= ks[i].extra;
			c.trust_reversed = rev;
			recno = 900 + (unsigned)i; /* the two orders: one record */
			if (ks[i].variant == 0) {
				add_record(&c, recno, T0, NULL);
				add_ev(&c, K_OP1, "correction", "record", T1, "{\"v\":1}", NULL, NULL, "accepted", a);
				add_ev(&c, K_DUALOP, "correction", "x", T2, "{\"v\":2}", NULL,
				       quoted(q, sizeof(q), a), "accepted", NULL);
				snprintf(must, sizeof(must), "\"superseded_event_ids\":[\"%s\"]", a);
				case_must(&c, must);
			} else if (ks[i].variant == 1) {
				add_record(&c, recno, T0, NULL);
				add_bundle(&c, 0, 1, "2026-02-01T00:00:00Z", K_REG, NULL, NULL, 0, "accepted");
				case_must(&c, "\"invalid_event_count\":0");
				case_must(&c, "\"alias_kind\":\"arxiv\"");
			} else {
				add_record(&c, recno, T0, NULL);
				add_ev_edit(&c, K_OPROT, "correction", "2026-02-01T00:00:00Z", "{}",
					    "signature.signed_at", "\"2026-02-01T00:00:00Z\"", "accepted");
				add_ev_edit(&c, K_OPROT, "correction", "2026-04-01T00:00:00Z", "{}",
					    "signature.signed_at", "\"2026-04-01T00:00:00Z\"", "V-ROTATED");
				case_must(&c, "\"event_count\":2");
			}
			case_emit(&c);
			if (!rev) {
				pith_buf_append(&state0, last_state.data, last_state.len);
			} else if (state0.len != last_state.len ||
				   memcmp(state0.data, last_state.data, state0.len)) {
				fprintf(stderr, "gen_conformance: %s: the two orders of T give two states\n",
					c.name);
				failures++;
			}
		}
		pith_buf_release(&state0);
	}
}

/* A document whose text is given as is. */
static void add_text(gcase_t *c, const char *type, const char *text, size_t len, const char *expect)
{
	pith_buf_t t = PITH_BUF_INIT;
	pith_buf_append(&t, text, len);
	add_doc(c, type, &t, expect);
	pith_buf_release(&t);
}

/* n nested arrays, as JSON text */
static void nested(pith_buf_t *b, int n)
{
	pith_buf_reset(b);
	for (int i = 0; i < n; i++)
		pith_buf_putc(b, '[');
	for (int i = 0; i < n; i++)
		pith_buf_putc(b, ']');
	pith_buf_cstr(b);
}

/* The points issue 54 closed: D-KIND, the bounds of V-JSON and B-JSON,
 * B-ALIASES (order, elements, derivation), B-SIGNATURE's signed_at and
 * rotation, the T of B-STATE, V-ROTATED's equality. Last, so that the
 * records of the other cases keep their numbers. */
void cases_issue54(void)
{
	gcase_t c;
	pith_buf_t t = PITH_BUF_INIT, sd = PITH_BUF_INIT;

	/* D-KIND: documents of type "item", read as the rule says */
	case_init(&c, "D-KIND", "event-with-nested-bundle_type",
		  "an item whose text holds \"bundle_type\", but not as a top-level member: an event");
	add_record(&c, recno++, T0, NULL);
	add_ev(&c, K_OP1, "correction", "record", T1, "{\"bundle_type\":\"x\"}", NULL, NULL, "accepted", NULL);
	c.doc[1].type = "item";
	case_must(&c, "\"bundle_type\":\"x\"");
	case_emit(&c);

	case_init(&c, "D-KIND", "event-with-top-level-bundle_signature-null",
		  "an event with a top-level bundle_signature member (null): read as a bundle, which has "
		  "no bundle_type (B-TYPE)");
	add_record(&c, recno++, T0, NULL);
	add_ev_edit(&c, K_OP1, "correction", T1, "{}", "bundle_signature", "null", "B-TYPE");
	c.doc[1].type = "item";
	case_must(&c, "\"event_count\":1");
	case_emit(&c);

	case_init(&c, "D-KIND", "bundle-as-item", "a whole bundle as an item: a bundle");
	add_record(&c, recno++, T0, NULL);
	add_bundle(&c, 0, 1, "2026-02-01T00:00:00Z", K_REG, NULL, NULL, 0, "accepted");
	c.doc[1].type = "item";
	case_must(&c, "\"alias_kind\":\"arxiv\"");
	case_emit(&c);

	case_init(&c, "D-KIND", "unparsable-naming-bundle",
		  "an item that names bundle_type and is no JSON: a bundle, refused as B-JSON (json)");
	add_record(&c, recno++, T0, NULL);
	add_text(&c, "item", "{\"bundle_type\":\"pith_open_graph_bundle\",", 40, "B-JSON");
	case_emit(&c);

	case_init(&c, "D-KIND", "unparsable-event", "an item that names no bundle member and is no JSON: "
		  "an event, refused as V-JSON (json)");
	add_record(&c, recno++, T0, NULL);
	add_text(&c, "item", "{\"event_type\":\"correction\",", 27, "V-JSON");
	case_emit(&c);

	/* V-JSON and B-JSON: nesting, the outermost container counting 1 */
	for (int over = 0; over < 2; over++) {
		pith_buf_t deep = PITH_BUF_INIT, pl = PITH_BUF_INIT;
		case_init(&c, "V-JSON", over ? "nesting-33" : "nesting-32",
			  "an event nesting 32 arrays and objects (the event 1, payload 2, 30 arrays) is "
			  "accepted; one more is refused (json)");
		add_record(&c, recno++, T0, NULL);
		nested(&deep, 30 + over);
		pith_buf_printf(&pl, "{\"x\":%s}", (const char *)deep.data);
		pith_buf_cstr(&pl);
		add_ev(&c, K_OP1, "correction", "record", T1, (const char *)pl.data, NULL, NULL,
		       over ? "V-JSON" : "accepted", NULL);
		case_emit(&c);

		case_init(&c, "B-JSON", over ? "nesting-41" : "nesting-40",
			  "a bundle nesting 40 (the bundle 1, a member of 39 arrays) is accepted; 41 is refused "
			  "(json)");
		add_record(&c, recno++, T0, NULL);
		nested(&deep, 39 + over);
		add_bundle(&c, 0, 1, "2026-02-01T00:00:00Z", K_REG, "x_deep", (const char *)deep.data, 1,
			   over ? "B-JSON" : "accepted");
		case_emit(&c);
		pith_buf_release(&deep);
		pith_buf_release(&pl);
	}
	/* V-JSON's byte bound: exactly 1 MiB is read, one byte more is too_big */
	for (int over = 0; over < 2; over++) {
		case_init(&c, "V-JSON", over ? "one-byte-over-1-MiB" : "exactly-1-MiB",
			  "a valid event padded with spaces to 1,048,576 bytes is accepted; to 1,048,577 "
			  "it is refused before parsing (too_big)");
		add_record(&c, recno++, T0, NULL);
		ev_text(&t, "correction", c.pith, "record", T1, "{}", NULL, NULL);
		pith_buf_cstr(&t);
		ev_sign((const char *)t.data, &keys[K_OP1], NULL, NULL, &sd, NULL);
		while (sd.len < PITH_EVENT_MAX_BYTES + (size_t)over)
			pith_buf_putc(&sd, ' ');
		add_doc(&c, "event", &sd, over ? "V-JSON" : "accepted");
		case_emit(&c);
	}

	/* B-ALIASES: order, elements, what is derived */
	static const struct {
		const char *name, *desc, *kind, *version, *aliases;
		int ok;
	} al[] = {
		{"equal-kinds-allowed", "two elements of one alias_kind: ascending allows equal kinds",
		 "\"arxiv\"", "1", "[{\"alias_kind\":\"x\",\"alias_value\":\"a\"},{\"alias_kind\":\"x\",\"alias_value\":\"b\"}]", 1},
		{"element-string", "an element that is not an object: refused",
		 "\"arxiv\"", "1", "[\"arxiv\"]", 0},
		{"element-null", "an element null: refused", "\"arxiv\"", "1", "[null]", 0},
		{"alias_kind-number", "alias_kind not a string: refused",
		 "\"arxiv\"", "1", "[{\"alias_kind\":1,\"alias_value\":\"a\"}]", 0},
		{"byte-order", "ascending by bytes: \"Z\" (0x5A) before \"a\" (0x61)",
		 "\"arxiv\"", "1", "[{\"alias_kind\":\"Z\",\"alias_value\":\"a\"},{\"alias_kind\":\"a\",\"alias_value\":\"b\"}]", 1},
		{"arxiv_version-integer-right", "source.version 1: arxiv_version is ID + \"v1\"",
		 "\"arxiv\"", "1", "[{\"alias_kind\":\"arxiv_version\",\"alias_value\":\"ID" "v1\"}]", 1},
		{"arxiv_version-integer-wrong", "source.version 1: arxiv_version ID + \"v2\" is refused",
		 "\"arxiv\"", "1", "[{\"alias_kind\":\"arxiv_version\",\"alias_value\":\"ID" "v2\"}]", 0},
		{"arxiv_version-string-not-derived", "source.version the string \"2\": no arxiv_version is "
		 "derived, so any listed value stands", "\"arxiv\"", "\"2\"",
		 "[{\"alias_kind\":\"arxiv_version\",\"alias_value\":\"anything\"}]", 1},
		{"arxiv_version-float-not-derived", "source.version 1.0 (not an integer): none derived",
		 "\"arxiv\"", "1.0", "[{\"alias_kind\":\"arxiv_version\",\"alias_value\":\"anything\"}]", 1},
		{"arxiv_version-21-digits-not-derived", "source.version of 21 digits: none derived",
		 "\"arxiv\"", "100000000000000000000", "[{\"alias_kind\":\"arxiv_version\",\"alias_value\":\"anything\"}]", 1},
		{"arxiv_version-20-digits", "source.version of 20 digits: derived, and checked",
		 "\"arxiv\"", "10000000000000000000", "[{\"alias_kind\":\"arxiv_version\",\"alias_value\":\"anything\"}]", 0},
		{"kind-not-arxiv", "source.kind \"ARXIV\": not an arXiv record, no arxiv alias derived",
		 "\"ARXIV\"", "1", "[{\"alias_kind\":\"arxiv\",\"alias_value\":\"anything\"}]", 1},
		{"arxiv-wrong", "an arXiv record: a listed arxiv alias must be its id",
		 "\"arxiv\"", "1", "[{\"alias_kind\":\"arxiv\",\"alias_value\":\"anything\"}]", 0},
	};
	for (size_t i = 0; i < sizeof(al) / sizeof(al[0]); i++) {
		char list[400], id[16];
		case_init(&c, "B-ALIASES", al[i].name, al[i].desc);
		rec_kind = al[i].kind;
		rec_version = al[i].version;
		unsigned n = recno++;
		add_record(&c, n, T0, NULL);
		rec_kind = "\"arxiv\"";
		rec_version = "1";
		snprintf(id, sizeof(id), "2401.%05u", n);
		const char *at = strstr(al[i].aliases, "ID");
		if (at)
			snprintf(list, sizeof(list), "%.*s%s%s", (int)(at - al[i].aliases), al[i].aliases, id, at + 2);
		else
			snprintf(list, sizeof(list), "%s", al[i].aliases);
		add_bundle(&c, 0, 1, "2026-02-01T00:00:00Z", K_REG, "source_aliases", list, 1,
			   al[i].ok ? "accepted" : "B-ALIASES");
		case_emit(&c);
	}

	/* B-SIGNATURE: signed_at, and rotation by max(built_at, signed_at) */
	static const struct {
		const char *name, *desc, *json;
		int key, ok;
	} sa[] = {
		{"signed_at-number", "bundle_signature.signed_at 5, not a string: as if absent", "5", K_REG, 1},
		{"signed_at-null", "bundle_signature.signed_at null: as if absent", "null", K_REG, 1},
		{"signed_at-absent", "no bundle_signature.signed_at: time 0", NULL, K_REG, 1},
		{"signed_at-not-a-timestamp", "bundle_signature.signed_at \"yesterday\": refused",
		 "\"yesterday\"", K_REG, 0},
		{"signed_at-nul", "bundle_signature.signed_at a timestamp followed by NUL: refused",
		 "\"2026-02-01T00:00:00Z\\u0000\"", K_REG, 0},
		{"rotated-key-signed_at-absent", "a bundle by a registry key rotated in 2020, built in 2026, "
		 "signed_at absent: refused (built_at counts)", NULL, K_OLDREG, 0},
		{"rotated-key-signed-before", "a bundle by a registry key rotated in 2020, built in 2026, "
		 "signed_at 2019: refused (built_at counts)", "\"2019-01-01T00:00:00Z\"", K_OLDREG, 0},
	};
	for (size_t i = 0; i < sizeof(sa) / sizeof(sa[0]); i++) {
		pith_buf_t b = PITH_BUF_INIT;
		case_init(&c, "B-SIGNATURE", sa[i].name, sa[i].desc);
		c.trust |= 1u << K_OLDREG;
		add_record(&c, recno++, T0, NULL);
		make_bundle(&c, 0, 1, "2026-02-01T00:00:00Z", sa[i].key,
			    sa[i].json ? "bundle_signature.signed_at" : NULL, sa[i].json, 0, &b);
		if (!sa[i].json) { /* the first signed_at of the text is bundle_signature's */
			pith_buf_cstr(&b);
			char *p = strstr((char *)b.data, "\"signed_at\":\""), *q = p ? strchr(p + 13, '"') : NULL;
			if (q && q[1] == ',') {
				memmove(p, q + 2, strlen(q + 2) + 1);
				b.len = strlen((char *)b.data);
			}
		}
		add_doc(&c, "bundle", &b, sa[i].ok ? "accepted" : "B-SIGNATURE");
		pith_buf_release(&b);
		case_emit(&c);
	}

	/* B-STATE: the merge is made with the verifier's T (its registry
	 * entries), not the builder's, nor the bundle's public_keys */
	for (int here = 0; here < 2; here++) {
		pith_buf_t b = PITH_BUF_INIT;
		case_init(&c, "B-STATE", here ? "receipt-key-no-registry-here" : "receipt-key-registry-here",
			  "a bundle signed by second-registry whose record_created has a receipt by "
			  "test-registry: accepted where T holds test-registry as a registry key; where T "
			  "holds it without the role, its merge finds bad_receipt and the state differs");
		c.trust = (1u << K_REG) | (1u << K_OP1) | (1u << K_REG2);
		add_record(&c, 950, T0, NULL);
		make_bundle(&c, 0, 1, "2026-02-01T00:00:00Z", K_REG2, NULL, NULL, 0, &b);
		pith_buf_release(&c.doc[0].text);
		c.n = 0;
		if (here)
			c.trust = (1u << K_REGASOP) | (1u << K_OP1) | (1u << K_REG2);
		add_doc(&c, "bundle", &b, here ? "B-STATE" : "accepted");
		case_must(&c, here ? "\"event_count\":0" : "\"event_count\":1");
		pith_buf_release(&b);
		case_emit(&c);
	}

	/* V-ROTATED: a time equal to rotates_at is not before it */
	static const struct {
		const char *name, *created, *signed_at;
		int ok;
	} rt[] = {
		{"signed-one-microsecond-before", "2026-02-28T23:59:59Z", "\"2026-02-28T23:59:59.999999Z\"", 1},
		{"signed-at-rotates_at", "2026-02-28T23:59:59Z", "\"2026-03-01T00:00:00Z\"", 0},
		{"signed-at-rotates_at-offset-form", "2026-02-28T23:59:59Z", "\"2026-03-01T00:00:00+00:00\"", 0},
	};
	for (size_t i = 0; i < sizeof(rt) / sizeof(rt[0]); i++) {
		case_init(&c, "V-ROTATED", rt[i].name, "op-rotating's rotates_at is 2026-03-01T00:00:00Z: a "
			  "signature is valid only strictly before it");
		c.trust |= 1u << K_OPROT;
		add_record(&c, recno++, T0, NULL);
		add_ev_edit(&c, K_OPROT, "correction", rt[i].created, "{}", "signature.signed_at",
			    rt[i].signed_at, rt[i].ok ? "accepted" : "V-ROTATED");
		case_emit(&c);
	}
	/* B-EVENTS: an element is held to V-JSON's bounds, as it would be
	 * alone (signed, and merged into the bundle's state, all the same) */
	for (int over = 0; over < 2; over++) {
		pith_buf_t deep = PITH_BUF_INIT, pl = PITH_BUF_INIT, b = PITH_BUF_INIT;
		pith_event_t *evs[2] = {NULL, NULL};
		json_doc_t *dd = NULL;
		pith_err_t err = {0};
		case_init(&c, "B-EVENTS", over ? "element-nesting-33" : "element-nesting-32",
			  "a bundle whose event element nests 32 is accepted; one nesting 33 (an event no "
			  "node takes alone) refuses the bundle, though its signature and the state hold");
		add_record(&c, recno++, T0, NULL);
		nested(&deep, 30 + over);
		pith_buf_printf(&pl, "{\"x\":%s}", (const char *)deep.data);
		pith_buf_cstr(&pl);
		ev_text(&t, "correction", c.pith, "record", T1, (const char *)pl.data, NULL, NULL);
		pith_buf_cstr(&t);
		ev_sign((const char *)t.data, &keys[K_OP1], NULL, NULL, &sd, NULL);
		pith_trust_t *tr = trust_of(c.trust);
		if (pith_event_parse(c.doc[0].text.data, c.doc[0].text.len, tr, &evs[0], NULL, NULL) ||
		    json_parse(&dd, sd.data, sd.len, NULL, NULL) ||
		    pith_event_verify_value(json_doc_root(dd), tr, &evs[1], NULL, NULL) ||
		    tg_bundle(c.pith, evs, 2, &keys[K_REG], tr, "2026-02-01T00:00:00Z", &b, &err)) {
			fprintf(stderr, "gen_conformance: %s: cannot build the bundle %s\n", c.name, err.msg);
			failures++;
		}
		pith_buf_release(&c.doc[0].text);
		c.n = 0;
		add_doc(&c, "bundle", &b, over ? "B-EVENTS" : "accepted");
		case_must(&c, over ? "\"event_count\":0" : "\"event_count\":2");
		case_emit(&c);
		pith_event_free(evs[0]);
		pith_event_free(evs[1]);
		json_doc_free(dd);
		pith_trust_free(tr);
		pith_buf_release(&deep);
		pith_buf_release(&pl);
		pith_buf_release(&b);
	}
	pith_buf_release(&t);
	pith_buf_release(&sd);

	/* K-FILE, K-ROTATES-AT: trusted key files, read or refused at start */
	listfile_t l;
	list_begin(&l, "key_file", "docs/merge.md K-FILE and K-ROTATES-AT: a trusted key file (JSON "
		   "text); expected its fingerprint, key_id, role and rotates_at in microseconds (null: "
		   "never), or null when the file is refused at start");
	char hex[65];
	pith_hex_encode(keys[K_OP1].key.pk, 32, hex);
	static const struct {
		const char *name, *rule, *members, *want;
		int ok;
	} kf[] = {
		{"rotates_at-null", "K-ROTATES-AT", ",\"rotates_at\":null", NULL, 1},
		{"rotates_at-absent", "K-ROTATES-AT", "", NULL, 1},
		{"rotates_at-seconds", "K-ROTATES-AT", ",\"rotates_at\":\"2026-03-01T00:00:00Z\"", NULL, 1},
		{"rotates_at-fraction-offset", "K-ROTATES-AT", ",\"rotates_at\":\"2026-03-01T00:00:00.5+00:00\"", NULL, 1},
		{"rotates_at-year-3110", "K-ROTATES-AT", ",\"rotates_at\":\"3110-12-31T23:59:59Z\"", NULL, 1},
		{"rotates_at-year-9999", "K-ROTATES-AT", ",\"rotates_at\":\"9999-12-31T23:59:59Z\"", NULL, 0},
		{"rotates_at-year-0001", "K-ROTATES-AT", ",\"rotates_at\":\"0001-01-01T00:00:00Z\"", NULL, 0},
		{"rotates_at-no-leap-day", "K-ROTATES-AT", ",\"rotates_at\":\"2025-02-29T00:00:00Z\"", NULL, 0},
		{"rotates_at-leap-day", "K-ROTATES-AT", ",\"rotates_at\":\"2024-02-29T00:00:00Z\"", NULL, 1},
		{"rotates_at-date-only", "K-ROTATES-AT", ",\"rotates_at\":\"2026-03-01\"", NULL, 0},
		{"rotates_at-no-zone", "K-ROTATES-AT", ",\"rotates_at\":\"2026-03-01T00:00:00\"", NULL, 0},
		{"rotates_at-number", "K-ROTATES-AT", ",\"rotates_at\":1767225600", NULL, 0},
		{"rotates_at-nul", "K-ROTATES-AT", ",\"rotates_at\":\"2026-03-01T00:00:00Z\\u0000\"", NULL, 0},
		{"role-registry", "K-FILE", ",\"role\":\"registry\"", NULL, 1},
		{"role-other-case", "K-FILE", ",\"role\":\"Registry\"", NULL, 1},
		{"role-operator", "K-FILE", ",\"role\":\"operator\"", NULL, 1},
		{"key_id-nul", "K-FILE", ",\"key_id\":\"op\\u0000x\"", NULL, 0},
		{"fingerprint-wrong", "K-FILE", ",\"fingerprint_sha256_hex\":\"00000000000000000000000000000000\"", NULL, 0},
	};
	for (size_t i = 0; i < sizeof(kf) / sizeof(kf[0]); i++) {
		char text[400];
		/* members naming key_id replace the usual one */
		snprintf(text, sizeof(text), "{%s\"public_key_hex\":\"%s\"%s}",
			 strstr(kf[i].members, "\"key_id\"") ? "" : "\"key_id\":\"op-one\",", hex,
			 kf[i].members);
		list_add(&l, kf[i].name, kf[i].rule, text, strlen(text), NULL, kf[i].want, kf[i].ok);
	}
	list_end(&l, "key_files.json");
}
