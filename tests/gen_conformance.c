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

#include "bundle.h"
#include "conform.h"
#include "merge.h"
#include "testgen.h"

#define SIGNED_AT "2026-06-01T00:00:00.000000Z"
#define MAXDOCS 64

/* The last five share public keys with others (docs/merge.md, K-SET and
 * K-ROLE): K_REGASOP is K_REG's key and key id without the registry role,
 * K_DUALOP and K_DUALREG one key under an operator and a registry key id,
 * K_OPROTLATE K_OPROT's key and id with a later rotates_at. */
enum { K_REG, K_OP1, K_OP2, K_STRANGER, K_OLDREG, K_OPROT, K_REGASOP, K_DUALOP, K_DUALREG,
       K_OPROTLATE, K_REG2, NKEYS };
static tg_key_t keys[NKEYS];
static const char *outdir;
static int failures;
static size_t written;
static pith_buf_t last_state; /* the state of the case case_emit wrote last */

typedef struct gcase {
	char name[128], rule[40], desc[400];
	char pith[PITH_NUMBER_LEN + 1];
	unsigned trust; /* bit mask of keys in T (the built-in key always is) */
	int trust_reversed; /* list them last key first */
	struct {
		const char *type;
		pith_buf_t text;
		const char *expect;
	} doc[MAXDOCS];
	size_t n;
	const char *must[6];
	size_t nmust;
} gcase_t;

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

static pith_trust_t *trust_of(unsigned mask)
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

static void case_init(gcase_t *c, const char *rule, const char *name, const char *desc)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->rule, sizeof(c->rule), "%s", rule);
	snprintf(c->name, sizeof(c->name), "%s.%s", rule, name);
	snprintf(c->desc, sizeof(c->desc), "%s", desc);
	c->trust = T_STD;
}

static void case_must(gcase_t *c, const char *s)
{
	c->must[c->nmust++] = s;
}

static void add_doc(gcase_t *c, const char *type, const pith_buf_t *text, const char *expect)
{
	c->doc[c->n].type = type;
	c->doc[c->n].expect = expect;
	pith_buf_append(&c->doc[c->n].text, text->data, text->len);
	pith_buf_cstr(&c->doc[c->n].text); /* cases_mixed looks into it with strstr */
	c->n++;
}

/* ---- events ---------------------------------------------------------------- */

/* An unsigned event object as JSON text: the usual members. */
static void ev_text(pith_buf_t *b, const char *type, const char *subject, const char *target,
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
static int ev_sign(const char *text, const tg_key_t *k, const char *edit, const char *edit_json,
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
static void add_ev(gcase_t *c, int key, const char *type, const char *target, const char *created,
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
static void add_ev_edit(gcase_t *c, int key, const char *type, const char *created,
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
static const char *rec_kind = "\"arxiv\"", *rec_version = "1";

static void record_text(pith_buf_t *b, unsigned n, const char *submitted_json)
{
	pith_buf_reset(b);
	pith_buf_printf(b, "{\"metadata\":{\"license\":\"\",\"primary_cat\":\"cs.DC\"%s%s,"
			"\"title_canon_sha256\":\"%064u\"},\"schema_version\":\"1.0\","
			"\"source\":{\"id\":\"2401.%05u\",\"kind\":%s,\"version\":%s}}",
			submitted_json ? ",\"submitted_at\":" : "", submitted_json ? submitted_json : "", n, n,
			rec_kind, rec_version);
	pith_buf_cstr(b);
}

static int record_ident(const char *text, char hex[65], char pith[PITH_NUMBER_LEN + 1])
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
static void receipt_text(pith_buf_t *b, const char *signed_hex, const tg_key_t *k,
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
static void rc_payload(pith_buf_t *b, const char *rec_json, const char *claimed_json,
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
static void good_payload(gcase_t *c, unsigned n, pith_buf_t *pl)
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
static void add_record(gcase_t *c, unsigned n, const char *created, char *id)
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
static int make_bundle(gcase_t *c, size_t from, size_t to, const char *built_at, int key,
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

static void add_bundle(gcase_t *c, size_t from, size_t to, const char *built_at, int key,
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

static void put_str(pith_buf_t *b, const char *s, size_t n)
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
static void put_bytes(pith_buf_t *b, const char *name, const uint8_t *p, size_t n)
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
static void case_emit(gcase_t *c)
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

/* ---- the cases, rule by rule ----------------------------------------------------- */

#define T0 "2026-01-01T00:00:00Z"
#define T1 "2026-01-02T00:00:00Z"
#define T2 "2026-01-03T00:00:00Z"
#define T3 "2026-01-04T00:00:00Z"

static unsigned recno = 100;

/* T-*: created_at, signed_at and built_at at the edges of the rule. */
static void cases_time(void)
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
static void cases_validation(void)
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
static void cases_invalid(void)
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

static char *quoted(char *buf, size_t cap, const char *id)
{
	snprintf(buf, cap, "\"%s\"", id);
	return buf;
}

/* M3: supersession. */
static void cases_supersede(void)
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
static void cases_equiv_order(void)
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
static void cases_bundles(void)
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
static void case_registry(const char *data_dir)
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
static void cases_mixed(unsigned count)
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

static void cases_canon(void)
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

static void cases_ids(const char *data_dir)
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
static void cases_sig_encoding(void)
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
static void cases_keys(void)
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
static void cases_issue54(void)
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
