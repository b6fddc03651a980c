/* gen_conformance DIR: writes the conformance corpus (tests/conformance,
 * README.md there) from the rules of docs/merge.md.
 *
 * Each case is built to test one rule and says what it intends: the
 * outcome of every document and words its state must hold (an invalid
 * reason, a superseded list...). The generator evaluates the case with
 * this build (proto/conform.c) and refuses to write it when the build
 * does not do what the rule says; the state bytes it writes are this
 * build's, so that any later change of a state fails the suite. Output is
 * deterministic: fixed keys, fixed signed_at, no clock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gen_conformance.h"

tg_key_t keys[NKEYS];
const char *outdir;
int failures;
size_t written;
pith_buf_t last_state; /* the state of the case case_emit wrote last */


/* in the order of the enum */
static const tg_key_spec_t key_specs[NKEYS] = {
	{1, "test-registry", 1, NULL},
	{2, "op-one", 0, NULL},
	{3, "op-two", 0, NULL},
	{4, "stranger", 0, NULL},
	{5, "old-registry", 1, "2020-01-01T00:00:00Z"},
	{6, "op-rotating", 0, "2026-03-01T00:00:00Z"},
	{1, "test-registry", 0, NULL},
	{40, "dual-as-operator", 0, NULL},
	{40, "dual-as-registry", 1, NULL},
	{6, "op-rotating", 0, "2026-05-01T00:00:00Z"},
	{8, "second-registry", 1, NULL},
};

static void keys_init(void)
{
	tg_keys_make(keys, key_specs, NKEYS);
}

#define T_STD ((1u << K_REG) | (1u << K_OP1) | (1u << K_OP2))

pith_trust_t *trust_of(unsigned mask)
{
	pith_trust_t *t = pith_trust_new();
	for (int i = 0; i < NKEYS; i++)
		if (mask & (1u << i))
			pith_trust_add(t, &keys[i].key);
	return t;
}

static void key_json(pith_buf_t *b, const tg_key_t *k)
{
	char hex[65];
	const char *rot = key_specs[k - keys].rotates_at;
	pith_hex_encode(k->key.pk, 32, hex);
	pith_buf_printf(b, "{\"key_id\":\"%s\",\"public_key_hex\":\"%s\"%s", k->key.key_id, hex,
			k->key.is_registry ? ",\"role\":\"registry\"" : "");
	if (rot)
		pith_buf_printf(b, ",\"rotates_at\":\"%s\"", rot);
	pith_buf_putc(b, '}');
}

void case_init(gcase_t *c, const char *rule, const char *name, const char *desc)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->rule, sizeof(c->rule), "%s", rule);
	snprintf(c->name, sizeof(c->name), "%s.%s", rule, name);
	snprintf(c->desc, sizeof(c->desc), "%s", desc);
	c->trust = T_STD;
}

void case_must(gcase_t *c, const char *s)
{
	c->must[c->nmust++] = s;
}

void add_doc(gcase_t *c, const char *type, const pith_buf_t *text, const char *expect)
{
	c->doc[c->n].type = type;
	c->doc[c->n].expect = expect;
	pith_buf_append(&c->doc[c->n].text, text->data, text->len);
	pith_buf_cstr(&c->doc[c->n].text); /* cases_mixed looks into it with strstr */
	c->n++;
}

unsigned recno = 100;

/* ---- events ---------------------------------------------------------------- */

/* An unsigned event object as JSON text: the usual members. */
void ev_text(pith_buf_t *b, const char *type, const char *subject, const char *target,
	     const char *created, const char *payload, const char *prev, const char *sups)
{
	pith_buf_reset(b);
	pith_buf_printf(b, "{\"event_type\":\"%s\",\"subject_pith_number\":\"%s\",\"target\":\"%s\","
			"\"created_at\":\"%s\",\"payload\":%s,\"prev_event\":%s%s%s,\"supersedes\":[%s],"
			"\"schema_version\":\"1.0\",\"signer\":{\"signer_id\":\"signer\",\"signer_type\":\"operator\"}}",
			type, subject, target, created, payload ? payload : "{}", prev ? "\"" : "",
			prev ? prev : "null", prev ? "\"" : "", sups ? sups : "");
}

/* Signs event text with k (signed_at fixed); edit, when given, changes the
 * signed document: member of the event (or of its signature block when it
 * starts with "signature.") set to raw JSON. Canonical JSON into out, id
 * into id. */
int ev_sign(const char *text, const tg_key_t *k, const char *edit, const char *edit_json,
	    pith_buf_t *out, char id[PITH_EVENT_ID_LEN + 1])
{
	json_doc_t *d = NULL, *e = NULL;
	int rc = -1;
	if (json_parse(&d, (const uint8_t *)text, strlen(text), NULL, NULL))
		goto done;
	json_value_t *ev = json_doc_root(d);
	if (pith_event_sign(d, ev, &k->key, k->sk, NULL))
		goto done;
	json_value_t *sig = (json_value_t *)json_get(ev, "signature");
	json_object_set(d, sig, "signed_at", json_new_string(d, SIGNED_AT));
	if (id)
		snprintf(id, PITH_EVENT_ID_LEN + 1, "%s", json_get_str(ev, "event_id"));
	if (edit) {
		if (json_parse(&e, (const uint8_t *)edit_json, strlen(edit_json), NULL, NULL))
			goto done;
		json_value_t *o = ev;
		if (!strncmp(edit, "signature.", 10)) {
			o = sig;
			edit += 10;
		}
		json_object_set(d, o, edit, json_clone(d, json_doc_root(e)));
	}
	pith_buf_reset(out);
	rc = json_canon_write(ev, out);
done:
	json_doc_free(d);
	json_doc_free(e);
	if (rc)
		fprintf(stderr, "gen_conformance: cannot sign %.120s\n", text);
	return rc;
}

/* Adds a signed event to c; returns its id in id (may be NULL). */
void add_ev(gcase_t *c, int key, const char *type, const char *target, const char *created,
	    const char *payload, const char *prev, const char *sups, const char *expect,
	    char *id)
{
	pith_buf_t t = PITH_BUF_INIT, s = PITH_BUF_INIT;
	char tmp[PITH_EVENT_ID_LEN + 1];
	ev_text(&t, type, c->pith, target, created, payload, prev, sups);
	pith_buf_cstr(&t);
	if (!ev_sign((const char *)t.data, &keys[key], NULL, NULL, &s, id ? id : tmp))
		add_doc(c, "event", &s, expect);
	pith_buf_release(&t);
	pith_buf_release(&s);
}

/* add_ev with one member of the signed event set afterwards (ev_sign). */
void add_ev_edit(gcase_t *c, int key, const char *type, const char *created,
		 const char *payload, const char *member, const char *json, const char *expect)
{
	pith_buf_t t = PITH_BUF_INIT, s = PITH_BUF_INIT;
	ev_text(&t, type, c->pith, "record", created, payload, NULL, NULL);
	pith_buf_cstr(&t);
	if (!ev_sign((const char *)t.data, &keys[key], member, json, &s, NULL))
		add_doc(c, "event", &s, expect);
	pith_buf_release(&t);
	pith_buf_release(&s);
}

/* ---- records and receipts ---------------------------------------------------- */

/* A record with submitted_at given as raw JSON (NULL: no submitted_at). */
/* The source.kind and source.version of the records made next, as raw
 * JSON (B-ALIASES-DERIVED cases change them). */
const char *rec_kind = "\"arxiv\"", *rec_version = "1";

void record_text(pith_buf_t *b, unsigned n, const char *submitted_json)
{
	pith_buf_reset(b);
	pith_buf_printf(b, "{\"metadata\":{\"license\":\"\",\"primary_cat\":\"cs.DC\"%s%s,"
			"\"title_canon_sha256\":\"%064u\"},\"schema_version\":\"1.0\","
			"\"source\":{\"id\":\"2401.%05u\",\"kind\":%s,\"version\":%s}}",
			submitted_json ? ",\"submitted_at\":" : "", submitted_json ? submitted_json : "", n, n,
			rec_kind, rec_version);
	pith_buf_cstr(b);
}

int record_ident(const char *text, char hex[65], char pith[PITH_NUMBER_LEN + 1])
{
	json_doc_t *d = NULL;
	uint8_t dig[32];
	int rc = json_parse(&d, (const uint8_t *)text, strlen(text), NULL, NULL) ||
		 pith_record_identify(json_doc_root(d), dig, hex, pith, NULL);
	json_doc_free(d);
	return rc;
}

/* A receipt over signed_hex by k; omit (may be NULL) leaves one member out,
 * over (may be NULL) sets one member to raw JSON over_json. */
void receipt_text(pith_buf_t *b, const char *signed_hex, const tg_key_t *k,
		  const char *omit, const char *over, const char *over_json)
{
	uint8_t dig[32];
	char sig[89];
	pith_hex_decode(signed_hex, 64, dig, 32);
	pith_sig_sign_b64(k->sk, dig, sig);
	const char *names[] = {"algorithm", "canonical_sha256", "key_id", "kind",
			       "public_key_fingerprint", "signature_b64", "signature_status",
			       "signed_at", "signed_message"};
	char vals[9][120];
	snprintf(vals[0], 120, "\"ed25519\"");
	snprintf(vals[1], 120, "\"%s\"", signed_hex);
	snprintf(vals[2], 120, "\"%s\"", k->key.key_id);
	snprintf(vals[3], 120, "\"pith_receipt\"");
	snprintf(vals[4], 120, "\"%s\"", k->key.fp);
	snprintf(vals[5], 120, "\"%s\"", sig);
	snprintf(vals[6], 120, "\"signed_v1\"");
	snprintf(vals[7], 120, "\"2026-05-01T00:00:00.000000Z\"");
	snprintf(vals[8], 120, "\"canonical_sha256_bytes\"");
	pith_buf_reset(b);
	pith_buf_putc(b, '{');
	int first = 1;
	int over_done = 0;
	for (int i = 0; i < 9; i++) {
		if (omit && !strcmp(omit, names[i]))
			continue;
		const char *v = vals[i];
		if (over && !strcmp(over, names[i])) {
			v = over_json;
			over_done = 1;
		}
		pith_buf_printf(b, "%s\"%s\":%s", first ? "" : ",", names[i], v);
		first = 0;
	}
	if (over && !over_done)
		pith_buf_printf(b, ",\"%s\":%s", over, over_json);
	pith_buf_putc(b, '}');
	pith_buf_cstr(b);
}

/* The payload of a record_created: record and claimed hash as raw JSON
 * (NULL: member absent), receipt as raw JSON (NULL: absent). */
void rc_payload(pith_buf_t *b, const char *rec_json, const char *claimed_json,
		const char *receipt_json)
{
	pith_buf_reset(b);
	pith_buf_puts(b, "{\"attestation_state\":\"computed\"");
	if (rec_json)
		pith_buf_printf(b, ",\"canonical_record\":%s", rec_json);
	if (claimed_json)
		pith_buf_printf(b, ",\"canonical_sha256\":%s", claimed_json);
	if (receipt_json)
		pith_buf_printf(b, ",\"receipt\":%s", receipt_json);
	pith_buf_putc(b, '}');
	pith_buf_cstr(b);
}

/* A whole, valid record_created payload for record n (c->pith set). */
void good_payload(gcase_t *c, unsigned n, pith_buf_t *pl)
{
	pith_buf_t rec = PITH_BUF_INIT, rcpt = PITH_BUF_INIT;
	char hex[65], q[70];
	record_text(&rec, n, "\"2024-01-15T10:00:00Z\"");
	record_ident((const char *)rec.data, hex, c->pith);
	receipt_text(&rcpt, hex, &keys[K_REG], NULL, NULL, NULL);
	snprintf(q, sizeof(q), "\"%s\"", hex);
	rc_payload(pl, (const char *)rec.data, q, (const char *)rcpt.data);
	pith_buf_release(&rec);
	pith_buf_release(&rcpt);
}

/* Sets c->pith to record n's and adds its valid record_created by the
 * registry at created; id out. */
void add_record(gcase_t *c, unsigned n, const char *created, char *id)
{
	pith_buf_t pl = PITH_BUF_INIT;
	good_payload(c, n, &pl);
	add_ev(c, K_REG, "record_created", "record", created, (const char *)pl.data, NULL, NULL,
	       "accepted", id);
	pith_buf_release(&pl);
}

/* ---- bundles ------------------------------------------------------------------ */

/* A bundle of c's event documents [from, to) (verified with c's trust),
 * built at built_at and signed by key; edit (may be NULL) sets a top-level
 * member to raw JSON and re-signs (resign 1) or not. */
int make_bundle(gcase_t *c, size_t from, size_t to, const char *built_at, int key,
		const char *edit, const char *edit_json, int resign, pith_buf_t *out)
{
	pith_trust_t *t = trust_of(c->trust);
	pith_event_t *evs[MAXDOCS];
	size_t n = 0;
	int rc = -1;
	for (size_t i = from; i < to; i++)
		if (pith_event_parse(c->doc[i].text.data, c->doc[i].text.len, t, &evs[n], NULL, NULL) == 0)
			n++;
	pith_buf_t raw = PITH_BUF_INIT;
	pith_err_t err = {0};
	if (tg_bundle(c->pith, evs, n, &keys[key], t, built_at, &raw, &err)) {
		fprintf(stderr, "gen_conformance: %s: bundle: %s\n", c->name, err.msg);
		goto done;
	}
	json_doc_t *d = NULL, *e = NULL;
	json_parse(&d, raw.data, raw.len, NULL, NULL);
	json_value_t *b = json_doc_root(d);
	/* deterministic: the bundle signature's signed_at is built_at */
	if (edit) {
		json_parse(&e, (const uint8_t *)edit_json, strlen(edit_json), NULL, NULL);
		json_value_t *o = b;
		const char *m = edit;
		if (!strncmp(edit, "bundle_signature.", 17)) { /* outside the hash */
			o = (json_value_t *)json_get(b, "bundle_signature");
			m = edit + 17;
		}
		json_object_set(d, o, m, json_clone(d, json_doc_root(e)));
	}
	if (edit && !strcmp(edit, "source_aliases")) {
		/* the state the bundle carries has A: merge again with the new one */
		pith_state_t st;
		if (!pith_merge_ex(c->pith, evs, n, json_doc_root(e), t, &st, &err)) {
			json_object_set(d, b, "state", json_clone(d, st.root));
			pith_state_release(&st);
		}
	}
	if (resign)
		tg_bundle_resign(d, b, &keys[key]);
	pith_buf_reset(out);
	rc = json_canon_write(b, out);
	json_doc_free(d);
	json_doc_free(e);
done:
	for (size_t i = 0; i < n; i++)
		pith_event_free(evs[i]);
	pith_buf_release(&raw);
	pith_trust_free(t);
	return rc;
}

void add_bundle(gcase_t *c, size_t from, size_t to, const char *built_at, int key,
		const char *edit, const char *edit_json, int resign, const char *expect)
{
	pith_buf_t b = PITH_BUF_INIT;
	if (!make_bundle(c, from, to, built_at, key, edit, edit_json, resign, &b))
		add_doc(c, "bundle", &b, expect);
	else
		failures++;
	pith_buf_release(&b);
}

/* ---- writing ------------------------------------------------------------------ */

void put_str(pith_buf_t *b, const char *s, size_t n)
{
	json_write_string(b, s, n);
}

/* Whether n bytes are UTF-8 a JSON string can carry (no surrogates,
 * shortest forms, at most U+10FFFF). */
static int utf8_ok(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = p[i];
		size_t k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 9;
		if (k == 9 || i + k >= n)
			return 0;
		uint32_t cp = k ? c & (0x3f >> k) : c;
		for (size_t j = 1; j <= k; j++) {
			if ((p[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + j] & 0x3f);
		}
		static const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
		if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

/* "name":"text" or, for bytes that are not UTF-8, "name_hex":"..." */
void put_bytes(pith_buf_t *b, const char *name, const uint8_t *p, size_t n)
{
	if (utf8_ok(p, n)) {
		pith_buf_printf(b, "\"%s\":", name);
		put_str(b, (const char *)p, n);
		return;
	}
	pith_buf_printf(b, "\"%s_hex\":\"", name);
	for (size_t i = 0; i < n; i++)
		pith_buf_printf(b, "%02x", p[i]);
	pith_buf_putc(b, '"');
}

/* The refusal name a rule id gives (docs/merge.md, "Names of refusals");
 * V-JSON and B-JSON say "json", which is "too_big" over the byte bound. */
static const char *reason_of_rule(const char *rule, const char *kind)
{
	static const char *const map[][2] = {
		{"accepted", "accepted"}, {"V-JSON", "json"}, {"V-SHAPE", "shape"},
		{"V-CONTENT-HASH", "content_sha256"}, {"V-EVENT-ID", "event_id"}, {"V-KEY", "key"},
		{"V-ROTATED", "rotated_key"}, {"V-SIGNATURE", "signature"}, {"B-JSON", "json"},
		{"B-TYPE", "bundle_type"}, {"B-BUILT-AT", "bundle_built_at"},
		{"B-RECORD", "bundle_record"}, {"B-ALIASES", "bundle_aliases"},
		{"B-HASH", "bundle_hash"}, {"B-SIGNATURE", "bundle_signature"},
		{"B-EVENTS", "bundle_events"}, {"B-STATE", "bundle_state"},
	};
	(void)kind;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(rule, map[i][0]))
			return map[i][1];
	return "?";
}

/* Evaluates c, checks what it intends, writes DIR/merge/NAME.json. */
void case_emit(gcase_t *c)
{
	pith_buf_t b = PITH_BUF_INIT;
	pith_buf_puts(&b, "{\"kind\":\"merge\",\"name\":");
	put_str(&b, c->name, strlen(c->name));
	pith_buf_puts(&b, ",\"rule\":");
	put_str(&b, c->rule, strlen(c->rule));
	pith_buf_puts(&b, ",\"description\":");
	put_str(&b, c->desc, strlen(c->desc));
	pith_buf_printf(&b, ",\"pith_number\":\"%s\",\"trust\":[", c->pith);
	int first = 1;
	for (int j = 0; j < NKEYS; j++) {
		int i = c->trust_reversed ? NKEYS - 1 - j : j;
		if (c->trust & (1u << i)) {
			pith_buf_puts(&b, first ? "" : ",");
			key_json(&b, &keys[i]);
			first = 0;
		}
	}
	pith_buf_puts(&b, "],\"documents\":[");
	for (size_t i = 0; i < c->n; i++) {
		pith_buf_printf(&b, "%s{\"type\":\"%s\",\"expect\":\"%s\",", i ? "," : "",
				c->doc[i].type, c->doc[i].expect);
		put_bytes(&b, "text", c->doc[i].text.data, c->doc[i].text.len);
		pith_buf_putc(&b, '}');
	}
	pith_buf_puts(&b, "]}");

	json_doc_t *d = NULL;
	pith_err_t err = {0};
	pith_conform_merge_t out;
	if (json_parse(&d, b.data, b.len, NULL, &err) ||
	    pith_conform_merge_eval(json_doc_root(d), &out, &err)) {
		fprintf(stderr, "gen_conformance: %s: %s\n", c->name, err.msg);
		failures++;
		goto done;
	}
	/* each document's refusal name, this build's, checked against the
	 * rule the case expects (docs/merge.md, "Names of refusals") */
	for (size_t i = 0; i < c->n; i++) {
		const char *want = reason_of_rule(c->doc[i].expect, out.kind[i]);
		if (strcmp(want, out.reason[i]) &&
		    !(!strcmp(want, "json") && !strcmp(out.reason[i], "too_big"))) {
			fprintf(stderr, "gen_conformance: %s: documents[%zu] refused as %s, the rule says %s\n",
				c->name, i, out.reason[i], want);
			failures++;
			pith_conform_merge_release(&out);
			goto done;
		}
		json_value_t *dv = json_get(json_doc_root(d), "documents")->u.items[i];
		json_object_set(d, dv, "expect_reason", json_new_string(d, out.reason[i]));
	}
	int ok = 1;
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(out.outcome[i], c->doc[i].expect)) {
			fprintf(stderr, "gen_conformance: %s: documents[%zu] is %s, the rule says %s\n",
				c->name, i, out.outcome[i], c->doc[i].expect);
			ok = 0;
		}
	pith_buf_cstr(&out.state);
	for (size_t i = 0; i < c->nmust; i++)
		if (!strstr((const char *)out.state.data, c->must[i])) {
			fprintf(stderr, "gen_conformance: %s: the state lacks %s\n", c->name, c->must[i]);
			ok = 0;
		}
	if (ok) {
		pith_buf_reset(&last_state);
		pith_buf_append(&last_state, out.state.data, out.state.len);
		/* one member per line, one document per line: readable diffs */
		pith_buf_t f = PITH_BUF_INIT;
		const json_value_t *r = json_doc_root(d);
		for (size_t i = 0; i < r->len; i++) {
			const json_member_t *m = &r->u.members[i];
			pith_buf_puts(&f, i ? ",\n" : "{\n");
			put_str(&f, m->key, m->key_len);
			pith_buf_putc(&f, ':');
			if (m->value->type == JSON_ARRAY && !strcmp(m->key, "documents")) {
				pith_buf_puts(&f, "[\n");
				for (size_t j = 0; j < m->value->len; j++) {
					json_canon_write(m->value->u.items[j], &f);
					pith_buf_puts(&f, j + 1 < m->value->len ? ",\n" : "\n");
				}
				pith_buf_putc(&f, ']');
			} else {
				json_canon_write(m->value, &f);
			}
		}
		pith_buf_puts(&f, ",\n\"expect_state\":");
		put_str(&f, (const char *)out.state.data, out.state.len);
		pith_buf_printf(&f, ",\n\"expect_state_sha256\":\"%s\"\n}\n", out.state_sha256);
		char path[4096];
		snprintf(path, sizeof(path), "%s/merge/%s.json", outdir, c->name);
		FILE *fp = fopen(path, "wb");
		if (!fp || fwrite(f.data, 1, f.len, fp) != f.len) {
			fprintf(stderr, "gen_conformance: cannot write %s\n", path);
			failures++;
		} else {
			written++;
		}
		if (fp)
			fclose(fp);
		pith_buf_release(&f);
	} else {
		failures++;
	}
	pith_conform_merge_release(&out);
done:
	json_doc_free(d);
	pith_buf_release(&b);
	for (size_t i = 0; i < c->n; i++)
		pith_buf_release(&c->doc[i].text);
	c->n = 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: gen_conformance OUTDIR DATADIR (tests/conformance tests/data)\n");
		return 2;
	}
	outdir = argv[1];
	char path[4096];
	snprintf(path, sizeof(path), "%s/merge", outdir);
	mkdir(outdir, 0755);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/before", outdir);
	mkdir(path, 0755);
	keys_init();
	cases_time();
	cases_validation();
	cases_invalid();
	cases_supersede();
	cases_equiv_order();
	cases_bundles();
	case_registry(argv[2]);
	cases_mixed(60);
	cases_canon();
	cases_ids(argv[2]);
	cases_sig_encoding();
	cases_keys();
	cases_issue54();
	fprintf(stderr, "gen_conformance: %zu cases written, %d refused\n", written, failures);
	return failures ? 1 : 0;
}
