/* Benchmark (issue 2): validating a typical 2 KB event - parse, canonicalise,
 * hash, trust lookup and Ed25519 verify - against a bare
 * crypto_sign_verify_detached of the same digest, measured in one run.
 *
 * usage: bench_verify [ITERATIONS]   (default 20000) */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ed25519.h"
#include "event.h"
#include "trust.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A graph_snapshot-like event of about 2 KB, shaped like the registry's. */
static void make_event(pith_buf_t *out, pith_key_t *key, uint8_t sk[64])
{
	char abs[1300];
	for (size_t i = 0; i < sizeof(abs) - 1; i++)
		abs[i] = "abcdefghij klmnopqrstuvwxyz, "[i % 29];
	abs[sizeof(abs) - 1] = 0;
	pith_buf_t src = PITH_BUF_INIT;
	pith_buf_printf(&src,
		"{\"event_type\":\"graph_snapshot\",\"subject_pith_number\":\"pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE\","
		"\"target\":\"graph\",\"payload\":{\"graph_snapshot\":{\"paper\":{\"title\":\"The Case for Co-Designing Model Architectures with Hardware\","
		"\"license\":\"http://creativecommons.org/licenses/by/4.0/\",\"headline\":\"\",\"cross_cats\":[\"cs.AI\"],\"primary_cat\":\"cs.DC\","
		"\"authors_text\":\"Aamir Shafi, Deepak Narayanan, Dhabaleswar Panda, Hari Subramoni\",\"submitted_at\":\"2024-01-25T19:50:31Z\","
		"\"abstract_excerpt\":\"%s\"},\"claims\":{\"count\":0,\"items\":[],\"snapshot_sha256\":\"258153158e38e3291e3d48162225fcdb2d5a3ed65a07baac614ab91432fd4f57\"},"
		"\"integrity\":{\"clean\":true,\"findings\":[],\"available\":true}},\"verdict_id\":null},"
		"\"created_at\":\"2026-07-05T07:39:34Z\"}", abs);
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	if (json_parse(&doc, src.data, src.len, NULL, &err) ||
	    pith_event_sign(doc, json_doc_root(doc), key, sk, &err) ||
	    json_canon_write(json_doc_root(doc), out)) {
		fprintf(stderr, "bench_verify: cannot build the event: %s\n", err.msg);
		exit(1);
	}
	json_doc_free(doc);
	pith_buf_release(&src);
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 20000;
	if (sodium_init() < 0)
		return 1;
	pith_buf_t kf = PITH_BUF_INIT, ev = PITH_BUF_INIT;
	pith_key_t key;
	uint8_t sk[64];
	pith_keyfile_generate("bench", &kf, &key, sk);
	pith_trust_t *trust = pith_trust_new();
	pith_trust_add(trust, &key);
	make_event(&ev, &key, sk);

	/* the digest and signature the bare check uses */
	pith_event_t *e = NULL;
	pith_err_t err = {0};
	if (pith_event_parse(ev.data, ev.len, trust, &e, NULL, &err)) {
		fprintf(stderr, "bench_verify: event does not verify: %s\n", err.msg);
		return 1;
	}
	uint8_t digest[32], sig[64];
	size_t siglen;
	memcpy(digest, e->content_hash, 32);
	const char *b64 = json_get_str(e->signature, "signature_b64");
	sodium_base642bin(sig, 64, b64, strlen(b64), NULL, &siglen, NULL,
			  sodium_base64_VARIANT_ORIGINAL);
	pith_event_free(e);

	/* interleave rounds so that machine noise hits both alike */
	pith_ed_table_t *tab = NULL;
	if (pith_ed_table_new(key.pk, &tab)) {
		fprintf(stderr, "bench_verify: no fixed-key table\n");
		return 1;
	}
	double t_bare = 0, t_full = 0, t_fixed = 0, t_many[2] = {0, 0}, t_two = 0, t_one = 0;
	int lanes = pith_ed_lanes(-1);
	pith_buf_t canon = PITH_BUF_INIT;
	long rounds = 10, per = iters / rounds;
	for (long r = 0; r < rounds; r++) {
		double t0 = now();
		for (long i = 0; i < per; i++)
			if (crypto_sign_verify_detached(sig, digest, 32, key.pk))
				return 1;
		double t1 = now();
		for (long i = 0; i < per; i++) {
			pith_event_t *x = NULL;
			if (pith_event_parse(ev.data, ev.len, trust, &x, NULL, &err))
				return 1;
			pith_event_free(x);
		}
		double t2 = now();
		for (long i = 0; i < per; i++)
			if (pith_ed_verify(tab, sig, digest, 32))
				return 1;
		double t3 = now();
		/* batches summed one signature at a time, then eight at a time
		 * in AVX-512 IFMA lanes where the CPU has them */
		for (int way = 0; way < 1 + lanes; way++) {
			pith_ed_lanes(way);
			double ta = now();
			pith_ed_item_t items[PITH_ED_MANY];
			for (long i = 0; i < per;) {
				size_t k = 0;
				for (; k < PITH_ED_MANY && i < per; k++, i++)
					items[k] = (pith_ed_item_t){tab, sig, digest, 32, 0};
				pith_ed_verify_many(items, k);
				if (!items[0].ok)
					return 1;
			}
			t_many[way] += now() - ta;
		}
		pith_ed_lanes(lanes);
		/* what a validator does before the batched signature check and
		 * hands the store: the hashed bytes, then the whole canonical
		 * form written again, or both in one pass */
		for (int once = 0; once < 2; once++) {
			double ta = now();
			for (long i = 0; i < per; i++) {
				pith_event_t *x = NULL;
				pith_sig_check_t sc;
				if (pith_event_parse_deferred(ev.data, ev.len, trust, &x, NULL, &err, &sc,
							      once ? &canon : NULL) ||
				    (!once && pith_event_canon(x, &canon)))
					return 1;
				pith_buf_reset(&canon);
				pith_event_free(x);
			}
			*(once ? &t_one : &t_two) += now() - ta;
		}
		t_bare += t1 - t0;
		t_full += t2 - t1;
		t_fixed += t3 - t2;
	}
	long n = per * rounds;
	double us_bare = t_bare / (double)n * 1e6, us_full = t_full / (double)n * 1e6;
	printf("event bytes                 %zu\n", ev.len);
	printf("bare Ed25519 verify         %.2f us/op\n", us_bare);
	printf("fixed-key Ed25519 verify    %.2f us/op (%.2fx libsodium)\n",
	       t_fixed / (double)n * 1e6, t_bare / t_fixed);
	printf("fixed-key, batches of %d     %.2f us/op (%.2fx libsodium)\n", PITH_ED_MANY,
	       t_many[0] / (double)n * 1e6, t_bare / t_many[0]);
	if (lanes)
		printf("the same in AVX-512 lanes   %.2f us/op (%.2fx libsodium; what the node uses)\n",
		       t_many[1] / (double)n * 1e6, t_bare / t_many[1]);
	else
		printf("the same in AVX-512 lanes   (this CPU has no AVX-512 IFMA)\n");
	printf("parse+canon+hash+verify     %.2f us/op\n", us_full);
	/* the verifier pith_event_parse really uses for a trusted key */
	printf("overhead (json+hash)        %.2f us/op over the fixed-key verify\n",
	       us_full - t_fixed / (double)n * 1e6);
	printf("checks but Ed25519, + canon %.2f us/op written twice, %.2f in one pass (%.2f fewer)\n",
	       t_two / (double)n * 1e6, t_one / (double)n * 1e6, (t_two - t_one) / (double)n * 1e6);
	printf("ratio full/bare             %.3f (target <= 1.15)\n", us_full / us_bare);
	pith_ed_table_free(tab);
	pith_trust_free(trust);
	pith_buf_release(&kf);
	pith_buf_release(&ev);
	pith_buf_release(&canon);
	return 0;
}
