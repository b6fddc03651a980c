/* pithctl resolve ID: the full pith number of a stored record. */
#include "cli_store.h"

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *id = cli_first_operand(argc, argv);
	if (!id)
		return cli_fail("resolve", "missing ID");
	pith_trust_t *trust;
	store_t *st;
	if (cli_store_open(ctx, "resolve", 0, &trust, &st))
		return 1;
	char pith[PITH_NUMBER_LEN + 1];
	int rc = cli_store_resolve(st, "resolve", id, pith);
	if (!rc)
		printf("%s\n", pith);
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_resolve = {
	"resolve", "print the full pith number an identifier names",
	"usage: pithctl --store DIR resolve ID\n\n"
	"ID: arxiv:2401.14489 (or 2401.14489v2), doi:10.48550/arxiv.2401.14489,\n"
	"pith:AR7B3DEV (8, 12 or 16 characters, or any unambiguous body prefix),\n"
	"the 26-character body or a full pith number. Aliases come from the newest\n"
	"verified bundle of each record and from its applied record_created.\n",
	run,
};
