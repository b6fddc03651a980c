/* pithctl records: one line per stored record. */
#include "cli_store.h"

#include <inttypes.h>

static int print_record(void *arg, const store_record_info_t *r)
{
	const cli_ctx_t *ctx = arg;
	char hex[65];
	pith_hex_encode(r->state_hash, 32, hex);
	if (ctx->json)
		printf("{\"pith_number\":\"%s\",\"event_count\":%" PRIu64
		       ",\"state_sha256\":\"%s\",\"has_bundle\":%s}\n",
		       r->pith_number, r->event_count, hex, r->has_bundle ? "true" : "false");
	else
		printf("%s %" PRIu64 " %s\n", r->pith_number, r->event_count, hex);
	return ferror(stdout) ? 1 : 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	pith_trust_t *trust;
	store_t *st;
	pith_err_t err = {0};
	if (cli_first_operand(argc, argv))
		return cli_fail("records", "takes no operands");
	if (cli_store_open(ctx, "records", 0, &trust, &st))
		return 1;
	int rc = store_records_each(st, print_record, ctx, &err);
	if (rc < 0)
		rc = cli_fail("records", "%s", err.msg);
	else if (rc > 0 || fflush(stdout))
		rc = cli_fail("records", "cannot write to stdout");
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_records = {
	"records", "list the stored records",
	"usage: pithctl --store DIR records [--json]\n\n"
	"One line per record: pith number, event count, state_sha256; with\n"
	"--json one object per line (with has_bundle).\n",
	run,
};
