/* pithctl resolve ID: the full pith number of a stored record. */
#include "cli_node.h"
#include "cli_store.h"

/* The same from a running node (RocksDB lets one process open a store). */
static int run_node(cli_ctx_t *ctx, const char *id)
{
	json_doc_t *doc;
	if (cli_node_query(ctx, "resolve", "resolve", id, &doc))
		return 1;
	printf("%s\n", cli_json_str(json_doc_root(doc), "pith_number"));
	json_doc_free(doc);
	return fflush(stdout) ? cli_fail("resolve", "cannot write to stdout") : 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *id = cli_first_operand(argc, argv);
	if (!id)
		return cli_fail("resolve", "missing ID");
	if (ctx->node_sock)
		return run_node(ctx, id);
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
	"usage: pithctl --store DIR resolve ID\n"
	"       pithctl --node SOCKET resolve ID\n\n"
	"ID: arxiv:2401.14489 (or 2401.14489v2), doi:10.48550/arxiv.2401.14489,\n"
	"pith:AR7B3DEV (8, 12 or 16 characters, or any unambiguous body prefix),\n"
	"the 26-character body or a full pith number. Aliases come from the newest\n"
	"verified bundle of each record and from its applied record_created.\n"
	"With --node, a running pithd resolves it in its store.\n",
	run,
};
