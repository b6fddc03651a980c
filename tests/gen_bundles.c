/* gen_bundles: one signed registry bundle per record of a gen_events file,
 * for bundle catch-up benchmarks and tests.
 *
 * usage: gen_bundles [--seed N] [--built-at TIME] IN OUT|-
 *
 * IN is JSON Lines as gen_events writes them (grouped by record, each
 * group starting with its record_created). Each record's bundle holds its
 * events, the aliases derived from its canonical record (created_at =
 * TIME, default 2026-09-01T00:00:00Z), the state this project's merge
 * computes from them, and a bundle_signature by the gen_events test key
 * of the same seed (a registry key: trust gen_events --key-out's file).
 * The bundles pass pith_bundle_verify with that key trusted. One bundle
 * per line, canonical JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"
#include "merge.h"
#include "testgen.h"

#define LINE_MAX_BYTES (4u << 20)

typedef struct group {
	char pith[PITH_NUMBER_LEN + 1];
	pith_event_t **evs;
	size_t n, cap;
} group_t;

static void group_clear(group_t *g)
{
	for (size_t i = 0; i < g->n; i++)
		pith_event_free(g->evs[i]);
	g->n = 0;
	g->pith[0] = 0;
}

static int set_str(json_doc_t *d, json_value_t *o, const char *k, const char *v)
{
	return json_object_set(d, o, k, json_new_string(d, v));
}

/* The aliases of record rec (derived), each with created_at. */
static json_value_t *aliases_of(json_doc_t *d, const json_value_t *rec, const char *pith,
                                const char *at)
{
	pith_alias_t al[6];
	int na = pith_record_aliases(rec, pith, al);
	json_value_t *a = json_new_array(d);
	for (int i = 0; a && i < na; i++) {
		json_value_t *o = json_new_object(d);
		if (!o || set_str(d, o, "alias_kind", al[i].kind) ||
		    set_str(d, o, "alias_value", al[i].value) || set_str(d, o, "created_at", at) ||
		    json_array_push(d, a, o))
			return NULL;
	}
	return na < 0 ? NULL : a;
}

/* Writes the bundle of g to f. 0 or -1. */
static int bundle_write(const group_t *g, const tg_key_t *k, const pith_trust_t *trust,
                        const char *at, FILE *f)
{
	const pith_event_t *rc_ev = NULL;
	for (size_t i = 0; i < g->n && !rc_ev; i++)
		if (!strcmp(g->evs[i]->event_type, "record_created"))
			rc_ev = g->evs[i];
	if (!rc_ev) {
		fprintf(stderr, "gen_bundles: %s has no record_created\n", g->pith);
		return -1;
	}
	const json_value_t *pl = json_get_type(rc_ev->root, "payload", JSON_OBJECT);
	const json_value_t *rec = json_get_type(pl, "canonical_record", JSON_OBJECT);
	const char *csha = json_get_str(pl, "canonical_sha256");
	json_doc_t *d = json_doc_new();
	json_value_t *b = d ? json_new_object(d) : NULL;
	json_value_t *evs = d ? json_new_array(d) : NULL;
	pith_state_t st = {0};
	pith_buf_t out = PITH_BUF_INIT;
	pith_err_t err = {0};
	char shortn[20], hex[65], sig[89];
	uint8_t h[32];
	int rc = -1;
	if (!b || !evs || !rec || !csha)
		goto done;
	snprintf(shortn, sizeof(shortn), "pith:%.8s", g->pith + 10);
	json_value_t *al = aliases_of(d, rec, g->pith, at);
	if (!al || set_str(d, b, "bundle_type", "pith_open_graph_bundle") ||
	    set_str(d, b, "bundle_version", "1.0") || set_str(d, b, "pith_number", g->pith) ||
	    set_str(d, b, "short_pith_number", shortn) ||
	    json_object_set(d, b, "canonical_record", json_clone(d, rec)) ||
	    set_str(d, b, "canonical_sha256", csha) ||
	    json_object_set(d, b, "source_aliases", al) ||
	    set_str(d, b, "merge_version", PITH_MERGE_VERSION) || set_str(d, b, "built_at", at))
		goto done;
	for (size_t i = 0; i < g->n; i++)
		if (json_array_push(d, evs, json_clone(d, g->evs[i]->root)))
			goto done;
	if (json_object_set(d, b, "events", evs))
		goto done;
	if (pith_merge_ex(g->pith, g->evs, g->n, al, trust, &st, &err)) {
		fprintf(stderr, "gen_bundles: %s: merge: %s\n", g->pith, err.msg);
		goto done;
	}
	if (json_object_set(d, b, "state", json_clone(d, st.root)) || pith_bundle_hash(b, h))
		goto done;
	pith_hex_encode(h, 32, hex);
	pith_sig_sign_b64(k->sk, h, sig);
	json_value_t *s = json_new_object(d);
	if (!s || set_str(d, s, "algorithm", "ed25519") || set_str(d, s, "bundle_sha256", hex) ||
	    set_str(d, s, "key_id", k->key.key_id) ||
	    set_str(d, s, "public_key_fingerprint", k->key.fp) ||
	    set_str(d, s, "signature_b64", sig) || set_str(d, s, "signature_status", "signed_v1") ||
	    set_str(d, s, "signed_at", at) ||
	    set_str(d, s, "signed_message", "bundle_sha256_bytes") ||
	    json_object_set(d, b, "bundle_signature", s) || json_canon_write(b, &out))
		goto done;
	pith_buf_putc(&out, '\n');
	rc = fwrite(out.data, 1, out.len, f) == out.len ? 0 : -1;
done:
	if (rc && !err.msg[0])
		fprintf(stderr, "gen_bundles: %s: cannot build the bundle\n", g->pith);
	pith_state_release(&st);
	pith_buf_release(&out);
	json_doc_free(d);
	return rc;
}

int main(int argc, char **argv)
{
	uint64_t seed = 1;
	const char *in = NULL, *out = NULL, *at = "2026-09-01T00:00:00Z";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--built-at") && i + 1 < argc)
			at = argv[++i];
		else if (!in && argv[i][0] != '-')
			in = argv[i];
		else if (in && !out && (argv[i][0] != '-' || !strcmp(argv[i], "-")))
			out = argv[i];
		else
			in = out = NULL, i = argc;
	}
	int64_t us;
	if (!in || !out || pith_time_parse(at, &us)) {
		fprintf(stderr, "usage: gen_bundles [--seed N] [--built-at TIME] IN OUT|-\n");
		return 2;
	}
	tg_key_t key;
	tg_key_make(&key, (unsigned)seed, "gen-test-key", 1);
	pith_trust_t *trust = pith_trust_new();
	FILE *fi = fopen(in, "r");
	FILE *fo = strcmp(out, "-") ? fopen(out, "w") : stdout;
	if (!trust || pith_trust_add(trust, &key.key) || !fi || !fo) {
		fprintf(stderr, "gen_bundles: cannot open %s or %s\n", in, out);
		return 1;
	}
	group_t g = {0};
	char *line = malloc(LINE_MAX_BYTES);
	size_t lineno = 0, bundles = 0;
	int rc = 0;
	while (line && !rc) {
		int eof = !fgets(line, LINE_MAX_BYTES, fi);
		pith_event_t *ev = NULL;
		if (!eof) {
			lineno++;
			size_t len = strcspn(line, "\r\n");
			pith_event_check_t failed;
			pith_err_t err = {0};
			if (!len)
				continue;
			if (pith_event_parse((const uint8_t *)line, len, trust, &ev, &failed,
			                     &err)) {
				fprintf(stderr, "gen_bundles: %s line %zu: %s\n", in, lineno,
				        err.msg);
				rc = 1;
				break;
			}
		}
		if (g.n && (eof || strcmp(ev->subject, g.pith))) {
			if (bundle_write(&g, &key, trust, at, fo)) {
				pith_event_free(ev);
				rc = 1;
				break;
			}
			bundles++;
			group_clear(&g);
		}
		if (eof)
			break;
		if (g.n == g.cap) {
			size_t nc = g.cap ? g.cap * 2 : 16;
			pith_event_t **ne = realloc(g.evs, nc * sizeof(*ne));
			if (!ne) {
				pith_event_free(ev);
				rc = 1;
				break;
			}
			g.evs = ne;
			g.cap = nc;
		}
		snprintf(g.pith, sizeof(g.pith), "%s", ev->subject);
		g.evs[g.n++] = ev;
	}
	group_clear(&g);
	free(g.evs);
	free(line);
	fclose(fi);
	if (fo != stdout && fclose(fo))
		rc = 1;
	pith_trust_free(trust);
	if (!rc)
		fprintf(stderr, "gen_bundles: %zu bundles\n", bundles);
	return rc;
}
