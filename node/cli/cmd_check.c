/* pithctl check: audit a store's consistency. */
#include <stdlib.h>
#include <string.h>

#include "cli_store.h"
#include "json.h"

/* A problem: a line, or with --json a string of the "problems" array. */
static void report(void *arg, const char *line)
{
	cli_list_t *l = arg;
	if (!l->json) {
		printf("%s\n", line);
		return;
	}
	pith_buf_t b = PITH_BUF_INIT;
	json_write_string(&b, line, strlen(line));
	fputs(l->n ? "," : "", stdout);
	l->n++;
	fwrite(b.data, 1, b.len, stdout);
	pith_buf_release(&b);
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	pith_trust_t *trust;
	store_t *st;
	pith_err_t err = {0};
	size_t problems = 0;
	int threads = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc && atoi(argv[i + 1]) > 0)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--json"))
			return cli_fail("check", "unknown option or operand %s", argv[i]);
	}
	if (cli_store_open(ctx, "check", 0, &trust, &st))
		return 1;
	store_counts_t n;
	store_counts_get(st, &n);
	double t0 = cli_now();
	cli_list_t list = {ctx->json, 0};
	if (ctx->json) /* {"problems":[...],...}: the problems come as they are found */
		fputs("{\"problems\":[", stdout);
	int rc = store_check_threads(st, threads, report, &list, &problems, &err);
	double secs = cli_now() - t0;
	if (ctx->json)
		printf("],\"ok\":%s,\"events\":%llu,\"records\":%llu,\"bundles\":%llu,"
		       "\"seconds\":%.1f}\n", !rc && !problems ? "true" : "false",
		       (unsigned long long)n.events, (unsigned long long)n.records,
		       (unsigned long long)n.bundles, secs);
	if (rc)
		rc = cli_fail("check", "%s", err.msg);
	else if (problems)
		rc = cli_fail("check", "%zu problems in %s (%.1f s)", problems, ctx->store_dir, secs);
	else if (!ctx->json)
		printf("ok: %llu events, %llu records, %llu bundles (%.1f s)\n",
		       (unsigned long long)n.events, (unsigned long long)n.records,
		       (unsigned long long)n.bundles, secs);
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_check = {
	"check", "audit the store: indexes, cached states, counters",
	"usage: pithctl --store DIR [--trust-key FILE]... check [--threads N] [--json]\n\n"
	"Checks that every event parses and hashes to its key, that every event\n"
	"has exactly its subject and time index entries and every entry its event,\n"
	"that every cached state and record summary equals a fresh merge of the\n"
	"stored events, that aliases name stored records and that the counters\n"
	"are right. Prints each problem, and how long the audit took; exits 1 if\n"
	"there is any problem. Give the same\n"
	"--trust-key files (registry keys) the store was filled with. --json: one\n"
	"object, {\"ok\", \"problems\": [lines], \"events\", \"records\", \"bundles\",\n"
	"\"seconds\"}.\n\n"
	"--threads N  audit documents and records on N worker threads (default:\n"
	"             one per core); the report is the same, in key order\n",
	run,
};
