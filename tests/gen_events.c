/* gen_events: JSON Lines of signed events for store tests and benchmarks.
 *
 * usage: gen_events [--records R] [--per-record E] [--seed N] [--threads T] [--arxiv-id ID]...
 *                   [--pad BYTES] [--created-at TEXT] [--key-out FILE] OUT|-
 *
 * R records (default 1000) of E events each (default 10, at least 1): a
 * record_created (with a receipt by the test key, valid when the key is
 * trusted with role registry), then events of every kind the merge knows:
 * graph snapshots chained by prev_event, author attestations, timestamp
 * anchors, storage attestations, citation signatures naming other records,
 * replication records, corrections (a later one superseding an earlier
 * one), mirror hints; now and then an equivocation (two mirror hints for
 * one slot) and an event of an unknown type. Lines are grouped by record,
 * as `pithctl export` writes them. All events are signed by one test key,
 * derived from the seed; --key-out writes its public key file (role
 * registry) for --trust-key. Deterministic for a seed except signed_at.
 * --pad BYTES adds a "padding" member of that many bytes to the payload of
 * every event but record_created (large events for budget tests).
 * --created-at TEXT gives every event but record_created that created_at,
 * whatever it is (a timestamp outside the rule of docs/merge.md, T-*, for
 * the adversarial_timestamp test): they are signed all the same.
 * --arxiv-id ID (repeatable): the first records have these arXiv ids,
 * whatever they are (`~.*`, `include`: hostile ids for the static site's
 * alias map, issue 53); no quote or backslash in ID. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ids.h"
#include "testgen.h"

static const char *const words[] = {
	"graph", "record", "mirror", "theorem", "lemma", "transformer", "latency", "kernel",
	"bandwidth", "proof", "replication", "dataset", "benchmark", "gradient", "tensor",
	"cluster", "protocol", "consensus", "signature", "attestation", "archive", "citation",
	"evidence", "model", "hardware", "throughput", "memory", "compiler", "schedule",
	"inference", "training", "sparse", "dense", "matrix", "vector", "stochastic",
	"bound", "optimal", "empirical", "analysis", "method", "result", "figure", "table",
	"section", "appendix", "abstract", "author", "review", "claim", "finding", "the",
	"of", "and", "for", "with", "under", "over", "a", "we", "show", "that", "is", "in",
};
#define NWORDS (sizeof(words) / sizeof(words[0]))

static const char *const relations[] = {
	"supports", "refutes", "extends", "uses_method", "depends_on", "replaces", "compares", "cites",
};

typedef struct job {
	unsigned first, count, per, nrecords;
	size_t pad;
	const char *created_at;   /* for every event but record_created, or NULL */
	uint64_t seed;
	const tg_key_t *key;
	pith_buf_t out;
	int failed;
} job_t;

static void text(pith_buf_t *b, uint64_t *rng, size_t nwords)
{
	for (size_t i = 0; i < nwords; i++)
		pith_buf_printf(b, "%s%s", i ? " " : "", words[tg_rand(rng) % NWORDS]);
}

static void hex(pith_buf_t *b, uint64_t *rng)
{
	uint8_t d[32];
	char h[65];
	uint64_t x = tg_rand(rng);
	pith_sha256(&x, sizeof(x), d);
	pith_hex_encode(d, 32, h);
	pith_buf_puts(b, h);
}

static void when(time_t t, char out[32])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* One record's events, appended to j->out as lines. */
static int gen_record(job_t *j, unsigned r)
{
	uint64_t rng = j->seed * 1000003u + r;
	char pith[PITH_NUMBER_LEN + 1], other[PITH_NUMBER_LEN + 1], at[32], target[160];
	char id[PITH_EVENT_ID_LEN + 1], prev_graph[PITH_EVENT_ID_LEN + 1] = "";
	char first_correction[PITH_EVENT_ID_LEN + 1] = "";
	pith_buf_t rec = PITH_BUF_INIT, p = PITH_BUF_INIT;
	tg_record(r, &rec, pith);
	tg_record((r * 7919u + 13u) % j->nrecords, &rec, other);
	time_t t = 1767225600 + (time_t)r * 600; /* 2026-01-01 + 10 min per record */
	int rc = 0;
	when(t, at);
	rc |= tg_event(&j->out, j->key, "record_created", pith, "record", at, NULL, NULL, NULL, 0,
		       (int)r, id);
	pith_buf_putc(&j->out, '\n');
	for (unsigned i = 1; i < j->per && !rc; i++) {
		const char *type, *prev = NULL, *sup[1];
		size_t nsup = 0;
		unsigned kind = 1 + (unsigned)(tg_rand(&rng) % 8);
		pith_buf_reset(&p);
		when(t + (time_t)i, at);
		if (j->created_at)
			snprintf(at, sizeof(at), "%s", j->created_at);
		if (i == j->per - 1 && tg_rand(&rng) % 30 == 0)
			kind = 9; /* unknown type: stored, listed invalid */
		switch (kind) {
		case 1:
			type = "graph_snapshot";
			snprintf(target, sizeof(target), "graph");
			pith_buf_puts(&p, "{\"graph_snapshot\":{\"paper\":{\"title\":\"");
			text(&p, &rng, 8);
			pith_buf_puts(&p, "\",\"abstract_excerpt\":\"");
			text(&p, &rng, 60);
			pith_buf_puts(&p, "\"},\"claims\":{\"count\":3,\"snapshot_sha256\":\"");
			hex(&p, &rng);
			pith_buf_puts(&p, "\"},\"builder_version\":\"gen-events-v1\"},\"verdict_id\":null}");
			prev = prev_graph[0] ? prev_graph : NULL;
			break;
		case 2:
			type = "author_attestation";
			snprintf(target, sizeof(target), "orcid:0000-0002-%04u-%04u", r % 10000, i);
			pith_buf_puts(&p, "{\"statement\":\"");
			text(&p, &rng, 20);
			pith_buf_puts(&p, "\",\"evidence_sha256\":\"");
			hex(&p, &rng);
			pith_buf_puts(&p, "\"}");
			break;
		case 3:
			type = "timestamp_anchor";
			snprintf(target, sizeof(target), "canonical_sha256");
			pith_buf_puts(&p, "{\"calendar\":\"https://alice.btc.calendar.opentimestamps.org\",\"ots_proof_sha256\":\"");
			hex(&p, &rng);
			pith_buf_printf(&p, "\",\"block_height\":%u}", 900000 + r);
			break;
		case 4:
			type = "storage_attestation";
			snprintf(target, sizeof(target), "https://web.archive.org/web/2026/https://pith.science/pith/%s",
				 pith + 10);
			pith_buf_puts(&p, "{\"capture_sha256\":\"");
			hex(&p, &rng);
			pith_buf_puts(&p, "\",\"status\":200}");
			break;
		case 5:
			type = "citation_signature";
			snprintf(target, sizeof(target), "%s", other);
			pith_buf_printf(&p, "{\"relationship\":\"%s\",\"context\":\"",
					relations[tg_rand(&rng) % 8]);
			text(&p, &rng, 30);
			pith_buf_puts(&p, "\"}");
			break;
		case 6:
			type = "replication_record";
			snprintf(target, sizeof(target), "replication");
			pith_buf_puts(&p, "{\"kind\":\"replication\",\"summary\":\"");
			text(&p, &rng, 40);
			pith_buf_puts(&p, "\",\"artifact_sha256\":\"");
			hex(&p, &rng);
			pith_buf_puts(&p, "\"}");
			break;
		case 7:
			type = "correction";
			snprintf(target, sizeof(target), "record");
			pith_buf_puts(&p, "{\"field\":\"title\",\"note\":\"");
			text(&p, &rng, 15);
			pith_buf_puts(&p, "\"}");
			if (first_correction[0]) {
				sup[0] = first_correction;
				nsup = 1;
			}
			break;
		case 8:
			type = "mirror_hint";
			snprintf(target, sizeof(target), "https://mirror%u.example/pith/%s", i % 3, pith + 10);
			pith_buf_printf(&p, "{\"region\":\"eu-%u\"}", i);
			break;
		default:
			type = "future_kind";
			snprintf(target, sizeof(target), "x");
			pith_buf_puts(&p, "{}");
			break;
		}
		if (j->pad && p.len && p.data[p.len - 1] == '}') {
			/* a large payload: a member no rule reads */
			p.len--;
			pith_buf_puts(&p, p.len > 1 ? ",\"padding\":\"" : "\"padding\":\"");
			for (size_t k = 0; k < j->pad; k++)
				pith_buf_putc(&p, 'a' + (uint8_t)(k % 26));
			pith_buf_puts(&p, "\"}");
		}
		pith_buf_cstr(&p);
		rc |= tg_event(&j->out, j->key, type, pith, target, at, (const char *)p.data, prev,
			       sup, nsup, -1, id);
		pith_buf_putc(&j->out, '\n');
		if (kind == 1)
			memcpy(prev_graph, id, sizeof(id));
		if (kind == 7 && !first_correction[0])
			memcpy(first_correction, id, sizeof(id));
		if (kind == 8 && i + 1 < j->per && tg_rand(&rng) % 20 == 0) {
			/* an equivocation: another hint for the same slot */
			i++;
			pith_buf_reset(&p);
			pith_buf_printf(&p, "{\"region\":\"us-%u\"}", i);
			pith_buf_cstr(&p);
			when(t + (time_t)i, at);
			if (j->created_at)
				snprintf(at, sizeof(at), "%s", j->created_at);
			rc |= tg_event(&j->out, j->key, type, pith, target, at, (const char *)p.data,
				       NULL, NULL, 0, -1, id);
			pith_buf_putc(&j->out, '\n');
		}
	}
	pith_buf_release(&rec);
	pith_buf_release(&p);
	return rc;
}

static void *run_job(void *arg)
{
	job_t *j = arg;
	for (unsigned r = j->first; r < j->first + j->count && !j->failed; r++)
		if (gen_record(j, r))
			j->failed = 1;
	return NULL;
}

static int write_key(const char *path, const tg_key_t *k)
{
	FILE *f = fopen(path, "w");
	char pk[65];
	if (!f)
		return 1;
	pith_hex_encode(k->key.pk, 32, pk);
	fprintf(f, "{\"key_id\":\"%s\",\"public_key_hex\":\"%s\",\"role\":\"registry\"}\n",
		k->key.key_id, pk);
	return fclose(f) ? 1 : 0;
}

int main(int argc, char **argv)
{
	unsigned records = 1000, per = 10, threads = 2;
	size_t pad = 0;
	uint64_t seed = 1;
	const char *out = NULL, *key_out = NULL, *created_at = NULL;
	const char *ids[64];
	size_t nids = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--records") && i + 1 < argc)
			records = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--per-record") && i + 1 < argc)
			per = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--pad") && i + 1 < argc)
			pad = (size_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--key-out") && i + 1 < argc)
			key_out = argv[++i];
		else if (!strcmp(argv[i], "--created-at") && i + 1 < argc)
			created_at = argv[++i];
		else if (!strcmp(argv[i], "--arxiv-id") && i + 1 < argc && nids < 64)
			ids[nids++] = argv[++i];
		else if (!out && (argv[i][0] != '-' || !strcmp(argv[i], "-")))
			out = argv[i];
		else {
			fprintf(stderr, "gen_events: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	if (!out || records == 0 || per == 0) {
		fprintf(stderr, "usage: gen_events [--records R] [--per-record E] [--seed N] "
				"[--threads T] [--pad BYTES] [--created-at TEXT] [--arxiv-id ID]... "
				"[--key-out FILE] OUT|-\n");
		return 2;
	}
	tg_set_arxiv_ids(ids, nids);
	if (threads < 1 || threads > 64)
		threads = 2;
	if (threads > records)
		threads = records;
	tg_key_t key;
	tg_key_make(&key, (unsigned)seed, "gen-test-key", 1);
	if (key_out && write_key(key_out, &key)) {
		fprintf(stderr, "gen_events: cannot write %s\n", key_out);
		return 1;
	}
	FILE *f = strcmp(out, "-") ? fopen(out, "w") : stdout;
	if (!f) {
		fprintf(stderr, "gen_events: cannot create %s\n", out);
		return 1;
	}
	job_t *jobs = calloc(threads, sizeof(*jobs));
	pthread_t *th = calloc(threads, sizeof(*th));
	int rc = 0;
	for (unsigned t = 0; t < threads; t++) {
		jobs[t].first = (unsigned)((uint64_t)records * t / threads);
		jobs[t].count = (unsigned)((uint64_t)records * (t + 1) / threads) - jobs[t].first;
		jobs[t].per = per;
		jobs[t].pad = pad;
		jobs[t].created_at = created_at;
		jobs[t].nrecords = records;
		jobs[t].seed = seed;
		jobs[t].key = &key;
		pthread_create(&th[t], NULL, run_job, &jobs[t]);
	}
	for (unsigned t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		if (jobs[t].failed || jobs[t].out.oom)
			rc = 1;
		else if (fwrite(jobs[t].out.data, 1, jobs[t].out.len, f) != jobs[t].out.len)
			rc = 1;
		pith_buf_release(&jobs[t].out);
	}
	if ((f != stdout && fclose(f)) || (f == stdout && fflush(f)))
		rc = 1;
	if (rc)
		fprintf(stderr, "gen_events: generation or writing failed\n");
	free(jobs);
	free(th);
	return rc;
}
