/* pithctl audit URL...: do these mirrors compute the same state for every
 * record? (issue 57; docs/state-root.md, "pithctl audit").
 *
 * For each mirror: its node key from its /pith-mirrors.json (the entry
 * "self", "state_root"."node_key": trust on first use, said in the
 * output, unless --key gives it), its signed root from /api/root,
 * verified. Mirrors are grouped by root; for each group that differs
 * from the first (the largest), the descent of pith_sr_diff over
 * /api/root/range of one mirror of each finds the records where they
 * differ, each answer checked; each difference is confirmed by both
 * sides' /api/proof/{ID}, checked against the root their range answers
 * were of, and each side's /pith/{ID}/state.json says which events one
 * has that the other lacks.
 *
 * Exit status: 0 all agree, 1 differences found, 2 a mirror could not be
 * audited (or a usage error). --json: the same as one JSON document. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "cli.h"
#include "hclient.h"
#include "ids.h"
#include "json.h"
#include "stateroot.h"

#define AUD_MIRRORS_MAX 16
#define AUD_DOC_MAX (64u << 10)    /* a root document, a range answer, a proof */
#define AUD_BIG_MAX (4u << 20)     /* pith-mirrors.json, a state.json */
#define AUD_DIFFS_MAX 100000        /* differences listed */
#define AUD_URL_MAX 512

typedef struct mirror {
	char base[AUD_URL_MAX];
	char name[8];               /* A, B, C... */
	pith_key_t key;
	int pinned;                 /* --key gave it */
	pith_sr_doc_t doc;
	int group;
	uint8_t seen_root[32];      /* the root its range answers were of */
	int has_seen;
	char error[1200];
} mirror_t;

typedef struct diff {
	char pith[PITH_NUMBER_LEN + 1];
	int has[2];
	uint8_t state[2][32];
} diff_t;

typedef struct aud {
	struct event_base *loop;
	hc_t *hc;
	mirror_t m[AUD_MIRRORS_MAX];
	size_t n;
	int json;
	long max_requests;
	uint64_t range_requests, proof_requests, state_requests;
	/* the pair being compared */
	mirror_t *side[2];
	diff_t *d;
	size_t nd, capd;
	int overflow;
} aud_t;

/* ---- one GET, waited for ----------------------------------------------------- */

typedef struct get {
	int done, curl_code;
	long status;
	char error[320];
	pith_buf_t body;
} get_t;

static void on_get(void *arg, const hc_result_t *r)
{
	get_t *g = arg;
	g->done = 1;
	g->curl_code = r->curl_code;
	g->status = r->status;
	snprintf(g->error, sizeof(g->error), "%s", r->error ? r->error : "");
	if (!r->curl_code && r->body_len && pith_buf_append(&g->body, r->body, r->body_len))
		g->curl_code = -1, snprintf(g->error, sizeof(g->error), "out of memory");
}

/* 0 with the body of a 200, else -1 with why (what, where). */
static int get(aud_t *a, const char *url, size_t cap, get_t *g, char *why, size_t whylen)
{
	memset(g, 0, sizeof(*g));
	hc_req_t q = {.url = url, .body_cap = cap, .done = on_get, .arg = g};
	if (!hc_get(a->hc, &q)) {
		snprintf(why, whylen, "%s: out of memory", url);
		return -1;
	}
	while (!g->done)
		event_base_loop(a->loop, EVLOOP_ONCE);
	if (g->curl_code) {
		snprintf(why, whylen, "%s: %s", url, g->error);
		return -1;
	}
	if (g->status != 200) {
		snprintf(why, whylen, "%s: answered HTTP %ld", url, g->status);
		return -1;
	}
	return 0;
}

/* ---- a mirror's key and root --------------------------------------------------- */

static int mirror_key(aud_t *a, mirror_t *m)
{
	char url[AUD_URL_MAX + 64];
	get_t g;
	snprintf(url, sizeof(url), "%s/pith-mirrors.json", m->base);
	if (get(a, url, AUD_BIG_MAX, &g, m->error, sizeof(m->error))) {
		pith_buf_release(&g.body);
		return -1;
	}
	json_doc_t *d = NULL;
	pith_err_t err = {0};
	int rc = -1;
	if (!json_parse(&d, g.body.data, g.body.len, NULL, &err)) {
		const json_value_t *list = json_get(json_doc_root(d), "mirrors");
		for (size_t i = 0; list && list->type == JSON_ARRAY && i < list->len; i++) {
			const json_value_t *e = list->u.items[i];
			const char *role = json_get_str(e, "status");
			const json_value_t *sr = json_get(e, "state_root");
			const json_value_t *k = sr ? json_get(sr, "node_key") : NULL;
			const char *hex = k ? json_get_str(k, "public_key_hex") : NULL;
			const char *kid = k ? json_get_str(k, "key_id") : NULL;
			if (!role || strcmp(role, "self") || !hex || !kid)
				continue;
			if (!pith_hex_decode(hex, strlen(hex), m->key.pk, 32) &&
			    strlen(kid) < sizeof(m->key.key_id)) {
				snprintf(m->key.key_id, sizeof(m->key.key_id), "%s", kid);
				pith_key_fingerprint(m->key.pk, m->key.fp);
				rc = 0;
			}
			break;
		}
	}
	json_doc_free(d);
	pith_buf_release(&g.body);
	if (rc)
		snprintf(m->error, sizeof(m->error), "%s: its /pith-mirrors.json names no state root key "
			 "(not a pithd with state roots?)", m->base);
	return rc;
}

static int mirror_root(aud_t *a, mirror_t *m)
{
	char url[AUD_URL_MAX + 64];
	get_t g;
	if (!m->pinned && mirror_key(a, m))
		return -1;
	snprintf(url, sizeof(url), "%s/api/root", m->base);
	if (get(a, url, AUD_DOC_MAX, &g, m->error, sizeof(m->error))) {
		pith_buf_release(&g.body);
		return -1;
	}
	size_t len = g.body.len;
	while (len && (g.body.data[len - 1] == '\n' || g.body.data[len - 1] == '\r'))
		len--;
	pith_err_t err = {0};
	int rc = pith_sr_doc_verify(g.body.data, len, &m->key, &m->doc, &err);
	pith_buf_release(&g.body);
	if (rc) {
		snprintf(m->error, sizeof(m->error), "%.500s: its signed root does not verify: %.300s", url, err.msg);
		return -1;
	}
	return 0;
}

/* ---- the descent --------------------------------------------------------------- */

static int fetch(void *ctx, int side, const uint8_t prefix[PITH_SR_KEY_BYTES], unsigned plen,
		 pith_sr_range_t *out)
{
	aud_t *a = ctx;
	mirror_t *m = a->side[side];
	char bits[PITH_SR_KEY_BITS + 1], url[AUD_URL_MAX + 200], why[600];
	for (unsigned i = 0; i < plen; i++)
		bits[i] = (char)('0' + pith_sr_bit(prefix, i));
	bits[plen] = 0;
	snprintf(url, sizeof(url), "%s/api/root/range?prefix=%s", m->base, bits);
	get_t g;
	a->range_requests++;
	int rc = get(a, url, AUD_DOC_MAX, &g, why, sizeof(why));
	pith_err_t err = {0};
	if (!rc) {
		size_t len = g.body.len;
		while (len && g.body.data[len - 1] == '\n')
			len--;
		if ((rc = pith_sr_range_parse(g.body.data, len, out, &err)))
			snprintf(why, sizeof(why), "%.300s: %.250s", url, err.msg);
	}
	pith_buf_release(&g.body);
	if (rc) {
		snprintf(m->error, sizeof(m->error), "%.600s", why);
		return PITH_EINVAL;
	}
	if (!m->has_seen) {
		memcpy(m->seen_root, out->root, 32);
		m->has_seen = 1;
	} else if (memcmp(m->seen_root, out->root, 32)) {
		memcpy(m->seen_root, out->root, 32); /* it moved: the proofs confirm */
	}
	return 0;
}

static int report(void *ctx, const char *pith, const uint8_t *s0, const uint8_t *s1)
{
	aud_t *a = ctx;
	if (a->nd == AUD_DIFFS_MAX) {
		a->overflow = 1;
		return 0;
	}
	if (a->nd == a->capd) {
		size_t nc = a->capd ? a->capd * 2 : 64;
		diff_t *nd = realloc(a->d, nc * sizeof(*nd));
		if (!nd)
			return PITH_ENOMEM;
		a->d = nd;
		a->capd = nc;
	}
	diff_t *d = &a->d[a->nd++];
	memset(d, 0, sizeof(*d));
	snprintf(d->pith, sizeof(d->pith), "%s", pith);
	if (s0) {
		d->has[0] = 1;
		memcpy(d->state[0], s0, 32);
	}
	if (s1) {
		d->has[1] = 1;
		memcpy(d->state[1], s1, 32);
	}
	return 0;
}

static int by_pith(const void *x, const void *y)
{
	return strcmp(((const diff_t *)x)->pith, ((const diff_t *)y)->pith);
}

/* ---- confirming one difference ----------------------------------------------------- */

/* The proof of d on mirror m: 1 when it verifies against the root its
 * range answers were of and says what the descent found, 0 when not. */
static int confirm(aud_t *a, mirror_t *m, const diff_t *d, int side)
{
	char url[AUD_URL_MAX + 100], why[600];
	snprintf(url, sizeof(url), "%s/api/proof/%s", m->base, d->pith);
	get_t g;
	a->proof_requests++;
	int ok = 0;
	if (!get(a, url, AUD_DOC_MAX, &g, why, sizeof(why))) {
		json_doc_t *j = NULL;
		pith_err_t err = {0};
		pith_buf_t pb = PITH_BUF_INIT;
		pith_sr_proof_t *p = malloc(sizeof(*p));
		int present = 0;
		if (p && !json_parse(&j, g.body.data, g.body.len, NULL, &err)) {
			const json_value_t *pv = json_get(json_doc_root(j), "proof");
			if (pv && !json_canon_write(pv, &pb) && !pith_sr_proof_parse(pb.data, pb.len, p, &err) &&
			    !pith_sr_proof_check(p, m->seen_root, &present, &err))
				ok = present == d->has[side] &&
				     (!present || !memcmp(p->leaf.state, d->state[side], 32));
		}
		free(p);
		json_doc_free(j);
		pith_buf_release(&pb);
	}
	pith_buf_release(&g.body);
	return ok;
}

/* The applied_event_ids of d's state.json on m, sorted (the merge's
 * R-APPLIED), into *ids (n of them, each 71 bytes + NUL); 0 or -1. */
typedef char event_id_t[PITH_EVENT_ID_LEN + 1];
static int applied(aud_t *a, mirror_t *m, const char *pith, event_id_t **ids, size_t *n)
{
	char url[AUD_URL_MAX + 100], why[600];
	*ids = NULL;
	*n = 0;
	snprintf(url, sizeof(url), "%s/pith/%s/state.json", m->base, pith + 10);
	get_t g;
	a->state_requests++;
	int rc = get(a, url, AUD_BIG_MAX, &g, why, sizeof(why));
	json_doc_t *j = NULL;
	pith_err_t err = {0};
	if (!rc && (rc = json_parse(&j, g.body.data, g.body.len, NULL, &err)) == 0) {
		const json_value_t *v = json_get(json_doc_root(j), "applied_event_ids");
		if (v && v->type == JSON_ARRAY && v->len) {
			*ids = calloc(v->len, sizeof(**ids));
			for (size_t i = 0; *ids && i < v->len; i++)
				if (v->u.items[i]->type == JSON_STRING)
					snprintf((*ids)[(*n)++], sizeof(event_id_t), "%s", v->u.items[i]->u.str);
		}
	}
	json_doc_free(j);
	pith_buf_release(&g.body);
	return rc ? -1 : 0;
}

/* Prints the ids of x that y lacks (both sorted), as a JSON array or a
 * list; their count. */
static size_t lacking(const event_id_t *x, size_t nx, const event_id_t *y, size_t ny, int json,
		      const char *indent)
{
	size_t i = 0, j = 0, k = 0;
	if (json)
		printf("[");
	while (i < nx) {
		int c = j < ny ? strcmp(x[i], y[j]) : -1;
		if (c == 0) {
			i++, j++;
			continue;
		}
		if (c > 0) {
			j++;
			continue;
		}
		if (json)
			printf("%s\"%s\"", k ? "," : "", x[i]);
		else
			printf("%s%s\n", indent, x[i]);
		k++;
		i++;
	}
	if (json)
		printf("]");
	return k;
}

static void hex8(const uint8_t *h, char out[17])
{
	pith_hex_encode(h, 8, out);
}

/* Compares group g's mirror with the first group's; prints its differences. */
static int compare(aud_t *a, mirror_t *m0, mirror_t *m1, int first_pair)
{
	a->side[0] = m0;
	a->side[1] = m1;
	a->nd = 0;
	a->overflow = 0;
	m0->has_seen = m1->has_seen = 0;
	pith_sr_diff_stats_t st = {0};
	pith_err_t err = {0};
	uint64_t r0 = a->range_requests, p0 = a->proof_requests, s0 = a->state_requests;
	int rc = pith_sr_diff(fetch, report, a, (uint64_t)a->max_requests, &st, &err);
	if (rc) {
		const char *why = m0->error[0] ? m0->error : m1->error[0] ? m1->error : err.msg;
		fprintf(stderr, "pithctl audit: comparing %s with %s: %s\n", m0->base, m1->base, why);
		return 2;
	}
	qsort(a->d, a->nd, sizeof(*a->d), by_pith);
	if (a->json)
		printf("%s{\"mirrors\":[\"%s\",\"%s\"],\"records\":[", first_pair ? "" : ",", m0->name,
		       m1->name);
	else
		printf("\n%s and %s differ in %zu record%s%s:\n", m0->name, m1->name, a->nd,
		       a->nd == 1 ? "" : "s", a->overflow ? " (the first listed)" : "");
	int unconfirmed = 0;
	for (size_t i = 0; i < a->nd; i++) {
		diff_t *d = &a->d[i];
		int ok0 = confirm(a, m0, d, 0), ok1 = confirm(a, m1, d, 1);
		event_id_t *e0 = NULL, *e1 = NULL;
		size_t n0 = 0, n1 = 0;
		int g0 = d->has[0] ? applied(a, m0, d->pith, &e0, &n0) : 0;
		int g1 = d->has[1] ? applied(a, m1, d->pith, &e1, &n1) : 0;
		char h0[17] = "absent", h1[17] = "absent";
		if (d->has[0])
			hex8(d->state[0], h0);
		if (d->has[1])
			hex8(d->state[1], h1);
		unconfirmed += !ok0 || !ok1;
		if (a->json) {
			char f0[65] = "", f1[65] = "";
			if (d->has[0])
				pith_hex_encode(d->state[0], 32, f0);
			if (d->has[1])
				pith_hex_encode(d->state[1], 32, f1);
			printf("%s{\"pith_number\":\"%s\",\"proofs_verified\":%s,\"sides\":[", i ? "," : "",
			       d->pith, ok0 && ok1 ? "true" : "false");
			printf("{\"mirror\":\"%s\",\"state_sha256\":", m0->name);
			printf(d->has[0] ? "\"%s\"" : "null", f0);
			printf(",\"events\":%zu,\"lacked_by_other\":", n0);
			lacking(e0, n0, e1, n1, 1, "");
			printf("},{\"mirror\":\"%s\",\"state_sha256\":", m1->name);
			printf(d->has[1] ? "\"%s\"" : "null", f1);
			printf(",\"events\":%zu,\"lacked_by_other\":", n1);
			lacking(e1, n1, e0, n0, 1, "");
			printf("}]}");
		} else {
			printf("  %s\n", d->pith);
			printf("    %s state %s  %zu events%s\n", m0->name, h0, n0,
			       ok0 ? "" : "  (proof did not verify)");
			printf("    %s state %s  %zu events%s\n", m1->name, h1, n1,
			       ok1 ? "" : "  (proof did not verify)");
			if (g0 || g1)
				printf("    (a state.json could not be read)\n");
			size_t k = 0;
			for (int s = 0; s < 2; s++) {
				const event_id_t *x = s ? e1 : e0, *y = s ? e0 : e1;
				size_t nx = s ? n1 : n0, ny = s ? n0 : n1;
				/* count first, then list under a heading */
				size_t c = 0;
				for (size_t p = 0, q = 0; p < nx;) {
					int cmp = q < ny ? strcmp(x[p], y[q]) : -1;
					if (!cmp)
						p++, q++;
					else if (cmp > 0)
						q++;
					else
						c++, p++;
				}
				if (c) {
					printf("    only %s has:\n", s ? m1->name : m0->name);
					k += lacking(x, nx, y, ny, 0, "      ");
				}
			}
			if (!k && d->has[0] && d->has[1])
				printf("    the same events, different states: a merge disagreement\n");
		}
		free(e0);
		free(e1);
	}
	uint64_t rr = a->range_requests - r0, pr = a->proof_requests - p0, sr = a->state_requests - s0;
	if (a->json)
		printf("],\"requests\":{\"range\":%llu,\"proof\":%llu,\"state\":%llu},\"unconfirmed\":%d}",
		       (unsigned long long)rr, (unsigned long long)pr, (unsigned long long)sr, unconfirmed);
	else
		printf("  requests: %llu range, %llu proof, %llu state\n", (unsigned long long)rr,
		       (unsigned long long)pr, (unsigned long long)sr);
	return a->nd ? 1 : 0;
}

/* ---- the command ---------------------------------------------------------------- */

static int usage_fail(const char *msg)
{
	fprintf(stderr, "pithctl audit: %s\n", msg);
	return 2;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	aud_t a = {.json = ctx->json};
	int rc = 2;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			a.json = 1;
		} else if (!strcmp(argv[i], "--max-requests") && i + 1 < argc) {
			if (cli_opt_long("audit", "--max-requests", argv[++i], 1, 100000000, "requests",
					 &a.max_requests))
				return 2;
		} else if (!strcmp(argv[i], "--key") && i + 1 < argc) {
			/* --key N=HEX: mirror N's (1-based, as given) node key, pinned */
			char *eq = strchr(argv[++i], '=');
			long k = eq ? strtol(argv[i], NULL, 10) : 0;
			if (!eq || k < 1 || k > AUD_MIRRORS_MAX ||
			    pith_hex_decode(eq + 1, strlen(eq + 1), a.m[k - 1].key.pk, 32))
				return usage_fail("--key N=HEX: the Nth URL's node key, 64 hex digits");
			char fp[PITH_FP_LEN + 1];
			pith_key_fingerprint(a.m[k - 1].key.pk, fp);
			memcpy(a.m[k - 1].key.fp, fp, sizeof(fp));
			snprintf(a.m[k - 1].key.key_id, sizeof(a.m[k - 1].key.key_id), "node-%s", fp);
			a.m[k - 1].pinned = 1;
		} else if (argv[i][0] == '-') {
			return usage_fail("unknown option (see pithctl audit --help)");
		} else {
			if (a.n == AUD_MIRRORS_MAX)
				return usage_fail("at most 16 mirrors at once");
			size_t l = strlen(argv[i]);
			while (l && argv[i][l - 1] == '/')
				l--;
			if ((strncmp(argv[i], "http://", 7) && strncmp(argv[i], "https://", 8)) ||
			    l >= AUD_URL_MAX)
				return usage_fail("a mirror is an http:// or https:// base URL");
			snprintf(a.m[a.n].base, sizeof(a.m[a.n].base), "%.*s", (int)l, argv[i]);
			snprintf(a.m[a.n].name, sizeof(a.m[a.n].name), "%c", (char)('A' + a.n));
			a.n++;
		}
	}
	if (a.n < 2)
		return usage_fail("give two mirrors or more (pithctl audit URL URL...)");
	pith_err_t err = {0};
	if (hc_global_init(&err))
		return usage_fail(err.msg);
	if (evthread_use_pthreads() || !(a.loop = event_base_new())) {
		usage_fail("cannot set up an event loop");
		goto out;
	}
	hc_opts_t ho;
	hc_opts_default(&ho);
	ho.user_agent = "pithctl-audit/1";
	if (hc_new(a.loop, &ho, &a.hc, &err)) {
		usage_fail(err.msg);
		goto out;
	}
	int failed = 0;
	for (size_t i = 0; i < a.n; i++)
		if (mirror_root(&a, &a.m[i])) {
			fprintf(stderr, "pithctl audit: %s\n", a.m[i].error);
			failed = 1;
		}
	if (failed)
		goto out;
	/* groups by root, the largest first (ties: the first given) */
	int ng = 0, size[AUD_MIRRORS_MAX] = {0};
	size_t rep[AUD_MIRRORS_MAX];
	for (size_t i = 0; i < a.n; i++) {
		int g = 0;
		for (; g < ng; g++)
			if (!memcmp(a.m[rep[g]].doc.root, a.m[i].doc.root, 32))
				break;
		if (g == ng)
			rep[ng++] = i;
		a.m[i].group = g;
		size[g]++;
	}
	int big = 0;
	for (int g = 1; g < ng; g++)
		if (size[g] > size[big])
			big = g;
	if (a.json)
		printf("{\"audit_version\":\"1\",\"mirrors\":[");
	for (size_t i = 0; i < a.n; i++) {
		mirror_t *m = &a.m[i];
		char root[65];
		pith_hex_encode(m->doc.root, 32, root);
		if (a.json)
			printf("%s{\"name\":\"%s\",\"url\":\"%s\",\"root_sha256\":\"%s\",\"record_count\":%llu,"
			       "\"feed_cursor\":\"%s\",\"signed_at\":\"%s\",\"key_fingerprint\":\"%s\","
			       "\"key_pinned\":%s,\"agrees\":%s}",
			       i ? "," : "", m->name, m->base, root, (unsigned long long)m->doc.count,
			       m->doc.cursor, m->doc.signed_at, m->key.fp, m->pinned ? "true" : "false",
			       m->group == big ? "true" : "false");
		else
			printf("%s  %s  root %.16s  %llu records  signed %s  key %.16s%s\n", m->name, m->base,
			       root, (unsigned long long)m->doc.count, m->doc.signed_at, m->key.fp,
			       m->pinned ? " (pinned)" : " (from its pith-mirrors.json)");
	}
	if (a.json)
		printf("],\"differences\":[");
	if (ng == 1) {
		if (a.json)
			printf("],\"agree\":true}\n");
		else
			printf("all %zu mirrors agree\n", a.n);
		rc = 0;
		goto out;
	}
	if (!a.json) {
		printf("agree:");
		for (size_t i = 0; i < a.n; i++)
			if (a.m[i].group == big)
				printf(" %s", a.m[i].name);
		printf("\ndiffer:");
		for (size_t i = 0; i < a.n; i++)
			if (a.m[i].group != big)
				printf(" %s", a.m[i].name);
		printf("\n");
	}
	rc = 0;
	int first = 1;
	for (int g = 0; g < ng; g++) {
		if (g == big)
			continue;
		int c = compare(&a, &a.m[rep[big]], &a.m[rep[g]], first);
		first = 0;
		if (c == 2) {
			rc = 2;
			break;
		}
		if (c > rc)
			rc = c;
	}
	if (a.json && rc != 2)
		printf("],\"agree\":false}\n");
	if (rc == 0)
		rc = 1; /* the roots differ: the records are of moments apart */
out:
	free(a.d);
	hc_free(a.hc);
	if (a.loop)
		event_base_free(a.loop);
	hc_global_cleanup();
	fflush(stdout);
	return rc;
}

const cli_cmd_t cli_cmd_audit = {
	"audit", "do these mirrors compute the same state for every record?",
	"usage: pithctl audit URL URL... [--key N=HEX]... [--max-requests N] [--json]\n\n"
	"Fetches each mirror's signed state root (/api/root), verified with the\n"
	"node key its /pith-mirrors.json names (trust on first use), or the one\n"
	"--key N=HEX pins for the Nth URL; says which mirrors agree; for each that\n"
	"differs from the largest group, descends through /api/root/range to the\n"
	"records where they differ, confirms each with both sides' /api/proof/{ID},\n"
	"and shows per record each mirror's state hash and the events one has\n"
	"that the other lacks (from /pith/{ID}/state.json).\n\n"
	"A root proves agreement and completeness as of a mirror's feed position,\n"
	"not that the upstream was honest (docs/state-root.md, section 1).\n\n"
	"Exit status: 0 all agree, 1 differences found, 2 a mirror could not be\n"
	"audited. --max-requests bounds the range requests of each comparison.\n",
	run,
};
