/* gen_bundles: one signed registry bundle per record of a gen_events file,
 * for bundle catch-up benchmarks and tests.
 *
 * usage: gen_bundles [--seed N] [--sign-seed M] [--built-at TIME] [--unchecked] IN OUT|-
 *
 * IN is JSON Lines as gen_events writes them (grouped by record, each
 * group starting with its record_created). Each record's bundle holds its
 * events, the aliases derived from its canonical record (created_at =
 * TIME, default 2026-09-01T00:00:00Z), the state this project's merge
 * computes from them, and a bundle_signature by the gen_events test key
 * of the same seed (a registry key: trust gen_events --key-out's file).
 * The bundles pass pith_bundle_verify with that key trusted. One bundle
 * per line, canonical JSON.
 *
 * --sign-seed M signs the bundles with the test key of seed M instead
 * (same key_id, another key): the events, aliases and state are those of
 * seed N, only bundle_signature is by a key a store trusting seed N's key
 * does not trust (the stand-in's --fault untrusted serves such bundles).
 *
 * --unchecked reads the events without verifying them, so that a bundle
 * can hold events a node refuses (gen_events --created-at outside the
 * timestamp rule, for adversarial_timestamp); TIME is read leniently
 * always (--built-at 9999-01-01T00:00:00Z makes bundles nodes refuse). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Writes the bundle of g to f. 0 or -1. */
static int bundle_write(const group_t *g, const tg_key_t *k, const pith_trust_t *trust,
                        const char *at, FILE *f)
{
	pith_buf_t out = PITH_BUF_INIT;
	pith_err_t err = {0};
	int rc = tg_bundle(g->pith, g->evs, g->n, k, trust, at, &out, &err);
	if (rc)
		fprintf(stderr, "gen_bundles: %s: %s\n", g->pith, err.msg);
	else if (pith_buf_putc(&out, '\n') || fwrite(out.data, 1, out.len, f) != out.len)
		rc = -1;
	pith_buf_release(&out);
	return rc;
}

int main(int argc, char **argv)
{
	uint64_t seed = 1, sign_seed = 0;
	int unchecked = 0;
	const char *in = NULL, *out = NULL, *at = "2026-09-01T00:00:00Z";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--sign-seed") && i + 1 < argc)
			sign_seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--built-at") && i + 1 < argc)
			at = argv[++i];
		else if (!strcmp(argv[i], "--unchecked"))
			unchecked = 1;
		else if (!in && argv[i][0] != '-')
			in = argv[i];
		else if (in && !out && (argv[i][0] != '-' || !strcmp(argv[i], "-")))
			out = argv[i];
		else
			in = out = NULL, i = argc;
	}
	int64_t us;
	if (!in || !out || pith_time_parse(at, &us)) {
		fprintf(stderr, "usage: gen_bundles [--seed N] [--sign-seed M] [--built-at TIME] "
		        "[--unchecked] IN OUT|-\n");
		return 2;
	}
	tg_key_t key, signer;
	tg_key_make(&key, (unsigned)seed, "gen-test-key", 1);
	tg_key_make(&signer, (unsigned)(sign_seed ? sign_seed : seed), "gen-test-key", 1);
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
			if (pith_event_parse((const uint8_t *)line, len, unchecked ? NULL : trust,
			                     &ev, &failed, &err)) {
				fprintf(stderr, "gen_bundles: %s line %zu: %s\n", in, lineno,
				        err.msg);
				rc = 1;
				break;
			}
		}
		if (g.n && (eof || strcmp(ev->subject, g.pith))) {
			if (bundle_write(&g, &signer, trust, at, fo)) {
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
