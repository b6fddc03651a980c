/* gen_hostile DIR RECORDS SEED: hostile input for the merge's differential
 * test (tests/merge_differential.py, docs/merge.md "Properties").
 *
 * Writes DIR/keys/NN-NAME.json, the trusted key files (one public key
 * under an operator and a registry key id, one (key, key id) with and
 * without the registry role, one with two rotation times: K-SET, K-ROLE),
 * and DIR/docs.jsonl: for RECORDS records, events of every type by many
 * keys (rotating, rotated, untrusted, dual-role), supersedes, prev_event
 * chains, equivocations, duplicates and re-signed copies, bundles (valid,
 * several per record, and broken by every B- rule), and documents refused
 * by every V- rule, shuffled. Deterministic for a seed but for the
 * receipts' signed_at, which no state reads. The test imports it in
 * several orders, --trust-key orders and file splits, and compares the
 * states. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bundle.h"
#include "merge.h"
#include "testgen.h"

enum { K_REG, K_REGASOP, K_REG2, K_DUALOP, K_DUALREG, K_OP1, K_OP2, K_OP3, K_ROT, K_ROTLATE,
       K_OLDREG, K_STRANGER, NKEYS };
static tg_key_t keys[NKEYS];
static pith_trust_t *trust; /* every trusted file, as a node loads them */
static uint64_t rng;

/* the keys events are signed with (K_REGASOP, K_ROTLATE, K_DUALREG share
 * keys with others) */
static const int signers[] = {K_REG, K_REG2, K_DUALOP, K_DUALREG, K_OP1, K_OP2, K_OP3,
			      K_ROT, K_OLDREG, K_STRANGER};
#define NSIGNERS (sizeof(signers) / sizeof(signers[0]))

static const char *const times[] = {
	"2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-02-28T23:59:59Z",
	"2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", "2026-06-01T00:00:00Z",
};
#define NTIMES (sizeof(times) / sizeof(times[0]))

static const char *const types[] = {
	"record_created", "graph_snapshot", "author_attestation", "timestamp_anchor",
	"storage_attestation", "citation_signature", "replication_record", "correction",
	"mirror_hint", "foo",
};

static unsigned pick(unsigned n)
{
	return (unsigned)(tg_rand(&rng) % n);
}

/* in the order of the enum */
static const tg_key_spec_t key_specs[NKEYS] = {
	{1, "test-registry", 1, NULL},
	{1, "test-registry", 0, NULL},
	{8, "second-registry", 1, NULL},
	{40, "dual-as-operator", 0, NULL},
	{40, "dual-as-registry", 1, NULL},
	{2, "op-one", 0, NULL},
	{3, "op-two", 0, NULL},
	{4, "op-three", 0, NULL},
	{6, "op-rotating", 0, "2026-03-01T00:00:00Z"},
	{6, "op-rotating", 0, "2026-05-01T00:00:00Z"},
	{5, "old-registry", 1, "2020-01-01T00:00:00Z"},
	{9, "stranger", 0, NULL},
};

static void keys_init(void)
{
	tg_keys_make(keys, key_specs, NKEYS);
	trust = pith_trust_new();
	for (int i = 0; i < NKEYS; i++)
		if (i != K_STRANGER)
			pith_trust_add(trust, &keys[i].key);
}

static int write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int rc = !f || fwrite(p, 1, n, f) != n;
	if (f && fclose(f))
		rc = 1;
	if (rc)
		fprintf(stderr, "gen_hostile: cannot write %s: %s\n", path, strerror(errno));
	return rc;
}

static int write_keys(const char *dir)
{
	char path[4096], hex[65];
	for (int i = 0; i < NKEYS; i++) {
		if (i == K_STRANGER)
			continue;
		pith_buf_t b = PITH_BUF_INIT;
		pith_hex_encode(keys[i].key.pk, 32, hex);
		pith_buf_printf(&b, "{\"key_id\":\"%s\",\"public_key_hex\":\"%s\"%s", keys[i].key.key_id,
				hex, keys[i].key.is_registry ? ",\"role\":\"registry\"" : "");
		if (key_specs[i].rotates_at)
			pith_buf_printf(&b, ",\"rotates_at\":\"%s\"", key_specs[i].rotates_at);
		pith_buf_puts(&b, "}\n");
		snprintf(path, sizeof(path), "%s/keys/%02d-%s%s.json", dir, i, keys[i].key.key_id,
			 i == K_REGASOP ? "-no-role" : i == K_ROTLATE ? "-later" : "");
		int rc = write_file(path, b.data, b.len);
		pith_buf_release(&b);
		if (rc)
			return 1;
	}
	return 0;
}

/* the documents, kept to be shuffled */
static pith_buf_t *docs;
static size_t ndocs, capdocs;

static void put(const pith_buf_t *b)
{
	if (ndocs == capdocs) {
		capdocs = capdocs ? capdocs * 2 : 1024;
		docs = realloc(docs, capdocs * sizeof(*docs));
		if (!docs)
			exit(1);
	}
	docs[ndocs] = (pith_buf_t)PITH_BUF_INIT;
	pith_buf_append(&docs[ndocs++], b->data, b->len);
}

/* An event by key, signed_at set to when (a re-signing keeps the id). */
static int event(pith_buf_t *out, int key, const char *type, const char *pith, const char *target,
		 const char *created, const char *payload, const char *prev, const char *const *sup,
		 size_t nsup, int record_n, const char *signed_at, char id[PITH_EVENT_ID_LEN + 1])
{
	pith_buf_t raw = PITH_BUF_INIT;
	int rc = tg_event(&raw, &keys[key], type, pith, target, created, payload, prev, sup, nsup,
			  record_n, id);
	pith_buf_reset(out);
	rc = rc || tg_resign(raw.data, raw.len, &keys[key], signed_at, out);
	pith_buf_release(&raw);
	return rc;
}

/* One member of event text ev set to raw JSON, without signing again. */
static void edit(pith_buf_t *ev, const char *member, const char *json)
{
	json_doc_t *d = NULL, *e = NULL;
	if (json_parse(&d, ev->data, ev->len, NULL, NULL) ||
	    json_parse(&e, (const uint8_t *)json, strlen(json), NULL, NULL))
		exit(1);
	json_value_t *o = json_doc_root(d);
	if (!strncmp(member, "signature.", 10)) {
		o = (json_value_t *)json_get(o, "signature");
		member += 10;
	}
	json_object_set(d, o, member, json_clone(d, json_doc_root(e)));
	pith_buf_reset(ev);
	json_canon_write(json_doc_root(d), ev);
	json_doc_free(d);
	json_doc_free(e);
}

/* Documents every V- rule refuses, from a valid event text ev. */
static void refused_events(const pith_buf_t *ev, const char *pith)
{
	pith_buf_t b = PITH_BUF_INIT;
	char id[PITH_EVENT_ID_LEN + 1];
	switch (pick(9)) {
	case 0: /* json: cut short */
		pith_buf_append(&b, ev->data, ev->len / 2);
		break;
	case 1: /* json: nesting 33 */
		event(&b, K_OP1, "correction", pith, "record", times[1],
		      "{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", NULL, NULL, 0,
		      -1, "2026-01-02T00:00:00Z", id);
		break;
	case 2: /* shape: an impossible created_at, hashed or not */
		pith_buf_append(&b, ev->data, ev->len);
		edit(&b, "created_at", "\"2025-02-29T00:00:00Z\"");
		break;
	case 3: /* content_sha256 */
		pith_buf_append(&b, ev->data, ev->len);
		edit(&b, "target", "\"tampered\"");
		break;
	case 4: /* event_id */
		pith_buf_append(&b, ev->data, ev->len);
		edit(&b, "event_id", "\"sha256:0000000000000000000000000000000000000000000000000000000000000000\"");
		break;
	case 5: /* key */
		event(&b, K_STRANGER, "correction", pith, "record", times[1], "{}", NULL, NULL, 0, -1,
		      "2026-01-02T00:00:00Z", id);
		break;
	case 6: /* rotated_key: signed_at at rotates_at (the earlier of two) */
		event(&b, K_ROT, "correction", pith, "record", times[1], "{\"r\":1}", NULL, NULL, 0, -1,
		      "2026-03-01T00:00:00Z", id);
		break;
	case 7: /* signature */
		pith_buf_append(&b, ev->data, ev->len);
		edit(&b, "signature.signature_b64",
		     "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\"");
		break;
	default: /* shape: an event with a top-level bundle_signature is a bundle (D-KIND) */
		pith_buf_append(&b, ev->data, ev->len);
		edit(&b, "bundle_signature", "null");
		break;
	}
	put(&b);
	pith_buf_release(&b);
}

/* Re-hashes and re-signs bundle text b with key, after an edit. */
static void bundle_edit(pith_buf_t *b, int key, const char *member, const char *json, int resign)
{
	json_doc_t *d = NULL, *e = NULL;
	if (json_parse(&d, b->data, b->len, NULL, NULL) ||
	    json_parse(&e, (const uint8_t *)json, strlen(json), NULL, NULL))
		exit(1);
	json_value_t *o = json_doc_root(d);
	if (!strcmp(member, "events.0.target")) {
		json_value_t *ev = (json_value_t *)json_get(o, "events")->u.items[0];
		json_object_set(d, ev, "target", json_clone(d, json_doc_root(e)));
	} else {
		json_object_set(d, o, member, json_clone(d, json_doc_root(e)));
	}
	if (resign)
		tg_bundle_resign(d, o, &keys[key]);
	pith_buf_reset(b);
	json_canon_write(o, b);
	json_doc_free(d);
	json_doc_free(e);
}

static void record(unsigned n)
{
	pith_buf_t rec = PITH_BUF_INIT, b = PITH_BUF_INIT;
	char pith[PITH_NUMBER_LEN + 1], ids[40][PITH_EVENT_ID_LEN + 1];
	size_t nid = 0;
	pith_event_t *valid[40];
	size_t nvalid = 0, first = ndocs;
	tg_record(n, &rec, pith);
	/* one or two record_created; the receipt is by the signer: valid by
	 * a registry entry (test-registry, dual-as-registry, second-registry),
	 * bad_receipt by dual-as-operator (K-ROLE: the entry decides) */
	static const int rc_keys[] = {K_REG, K_REG, K_DUALREG, K_DUALOP, K_REG2};
	for (unsigned k = 0, nk = 1 + pick(2); k < nk; k++)
		if (!event(&b, rc_keys[pick(5)], "record_created", pith, "record", times[pick(2)], NULL,
			   NULL, NULL, 0, (int)n, "2026-01-01T00:00:00Z", ids[nid]))
			put(&b), nid++;
	for (unsigned i = 0, ne = 4 + pick(12); i < ne && nid < 38; i++) {
		unsigned t = 1 + pick(9);
		int key = signers[pick(NSIGNERS)];
		const char *created = times[pick(NTIMES)];
		/* a graph_snapshot at "record" is wrong_target, one without its
		 * object bad_payload */
		const char *target = t == 1 ? (pick(6) ? "graph" : "record") : pick(3) ? "record" : "x";
		const char *sup[3];
		size_t nsup = 0;
		char payload[64];
		snprintf(payload, sizeof(payload), t == 1 && pick(6) ? "{\"graph_snapshot\":{\"v\":%u}}"
								   : "{\"v\":%u}", pick(3));
		for (unsigned k = pick(4); k > 0 && nid; k--)
			if (pick(2))
				sup[nsup++] = ids[pick((unsigned)nid)];
		const char *prev = nid && !pick(4) ? ids[pick((unsigned)nid)] : NULL;
		/* signed_at before rotation mostly; the rotating key's events
		 * of April are valid for one file and rotated for the other,
		 * and K-SET says rotated */
		const char *sat = pick(4) ? created : "2026-02-01T00:00:00Z";
		if (event(&b, key, types[t], pith, target, created, payload, prev, sup, nsup, -1, sat,
			  ids[nid]))
			continue;
		put(&b);
		nid++;
		switch (pick(8)) {
		case 0: /* a duplicate */
			put(&b);
			break;
		case 1: { /* a re-signed copy, valid or rotated */
			pith_buf_t r = PITH_BUF_INIT;
			tg_resign(b.data, b.len, &keys[key], pick(2) ? "2026-02-02T00:00:00.5Z"
								  : "2026-07-07T07:07:07Z", &r);
			put(&r);
			pith_buf_release(&r);
			break;
		}
		case 2:
			refused_events(&b, pith);
			break;
		}
	}
	/* bundles of the valid events (as a node verifies them) */
	for (size_t i = first; i < ndocs && nvalid < 40; i++) {
		pith_event_t *ev = NULL;
		if (!pith_event_parse(docs[i].data, docs[i].len, trust, &ev, NULL, NULL) && ev &&
		    !strcmp(ev->subject, pith))
			valid[nvalid++] = ev;
		else
			pith_event_free(ev);
	}
	static const char *const built[] = {"2026-05-05T05:05:05Z", "2026-05-05T05:05:05+00:00",
					    "2026-06-06T06:06:06.000001Z"};
	for (unsigned k = 0, nb = pick(4); k < nb && nvalid; k++) {
		static const int bkeys[] = {K_REG, K_REG2, K_DUALREG, K_DUALOP, K_OLDREG, K_STRANGER};
		int key = bkeys[pick(6)];
		size_t from = pick((unsigned)nvalid);
		pith_err_t err = {0};
		/* the record_created first, so that the bundle has its record */
		size_t upto = from + 1 + pick((unsigned)(nvalid - from));
		pith_event_t *sel[40];
		size_t ns = 0;
		for (size_t j = 0; j < nvalid; j++)
			if (!strcmp(valid[j]->event_type, "record_created") || (j >= from && j < upto))
				sel[ns++] = valid[j];
		pith_buf_reset(&b);
		if (tg_bundle(pith, sel, ns, &keys[key], trust, built[pick(3)], &b, &err))
			continue;
		switch (pick(10)) {
		case 0: bundle_edit(&b, key, "bundle_type", "\"pith_bundle\"", 1); break;
		case 1: bundle_edit(&b, key, "built_at", "\"2026-02-30T00:00:00Z\"", 1); break;
		case 2: bundle_edit(&b, key, "canonical_sha256", "\"00\"", 1); break;
		case 3: bundle_edit(&b, key, "source_aliases", "[\"arxiv\"]", 1); break;
		case 4: bundle_edit(&b, key, "x_extra", "1", 0); break;
		case 5: bundle_edit(&b, key, "events.0.target", "\"tampered\"", 1); break;
		case 6: bundle_edit(&b, key, "state", "{\"state_sha256\":\"00\"}", 1); break;
		case 7: bundle_edit(&b, key, "x_deep", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", 1); break;
		default: break; /* as built */
		}
		put(&b);
	}
	for (size_t j = 0; j < nvalid; j++)
		pith_event_free(valid[j]);
	pith_buf_release(&rec);
	pith_buf_release(&b);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: gen_hostile DIR RECORDS SEED\n");
		return 2;
	}
	const char *dir = argv[1];
	unsigned nrec = (unsigned)strtoul(argv[2], NULL, 10);
	unsigned seed = (unsigned)strtoul(argv[3], NULL, 10);
	char path[4096];
	rng = 0x54d1ff00ull + seed;
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/keys", dir);
	mkdir(path, 0755);
	keys_init();
	if (write_keys(dir))
		return 1;
	for (unsigned r = 0; r < nrec; r++)
		record(100000u * (seed % 40) + r);
	{ /* one event over V-JSON's byte bound: too_big */
		pith_buf_t b = PITH_BUF_INIT;
		char id[PITH_EVENT_ID_LEN + 1], pith[PITH_NUMBER_LEN + 1];
		pith_buf_t rec = PITH_BUF_INIT;
		tg_record(100000u * (seed % 40), &rec, pith);
		event(&b, K_OP1, "correction", pith, "record", times[1], "{}", NULL, NULL, 0, -1,
		      "2026-01-02T00:00:00Z", id);
		while (b.len <= PITH_EVENT_MAX_BYTES)
			pith_buf_putc(&b, ' ');
		put(&b);
		pith_buf_release(&b);
		pith_buf_release(&rec);
	}
	/* shuffled, one per line */
	for (size_t i = ndocs; i > 1; i--) {
		size_t j = pick((unsigned)i);
		pith_buf_t t = docs[i - 1];
		docs[i - 1] = docs[j];
		docs[j] = t;
	}
	pith_buf_t all = PITH_BUF_INIT;
	for (size_t i = 0; i < ndocs; i++) {
		pith_buf_append(&all, docs[i].data, docs[i].len);
		pith_buf_putc(&all, '\n');
		pith_buf_release(&docs[i]);
	}
	free(docs);
	snprintf(path, sizeof(path), "%s/docs.jsonl", dir);
	int rc = write_file(path, all.data, all.len);
	fprintf(stderr, "gen_hostile: %u records, %zu documents, %zu bytes\n", nrec, ndocs, all.len);
	pith_buf_release(&all);
	pith_trust_free(trust);
	return rc;
}
