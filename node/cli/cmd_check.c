/* pithctl check: audit a store's consistency. */
#include <stdlib.h>
#include <string.h>

#include "cli_store.h"

static void report(void *arg, const char *line)
{
	(void)arg;
	printf("%s\n", line);
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
		else
			return cli_fail("check", "unknown option or operand %s", argv[i]);
	}
	if (cli_store_open(ctx, "check", 0, &trust, &st))
		return 1;
	store_counts_t n;
	store_counts_get(st, &n);
	double t0 = cli_now();
	int rc = store_check_threads(st, threads, report, NULL, &problems, &err);
	double secs = cli_now() - t0;
	if (rc)
		rc = cli_fail("check", "%s", err.msg);
	else if (problems)
		rc = cli_fail("check", "%zu problems in %s (%.1f s)", problems, ctx->store_dir, secs);
	else
		printf("ok: %llu events, %llu records, %llu bundles (%.1f s)\n",
		       (unsigned long long)n.events, (unsigned long long)n.records,
		       (unsigned long long)n.bundles, secs);
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_check = {
	"check", "audit the store: indexes, cached states, counters",
	"usage: pithctl --store DIR [--trust-key FILE]... check [--threads N]\n\n"
	"Checks that every event parses and hashes to its key, that every event\n"
	"has exactly its subject and time index entries and every entry its event,\n"
	"that every cached state and record summary equals a fresh merge of the\n"
	"stored events, that aliases name stored records and that the counters\n"
	"are right. Prints each problem, and how long the audit took; exits 1 if\n"
	"there is any problem. Give the same\n"
	"--trust-key files (registry keys) the store was filled with.\n\n"
	"--threads N  audit documents and records on N worker threads (default:\n"
	"             one per core); the report is the same, in key order\n",
	run,
};
