/* pithctl resolve ID: the full pith number of a stored record. */
#include "cli_node.h"
#include "cli_store.h"

#include <string.h>

/* The answer: the number alone, or with --json {"id":ID,"pith_number":P}
 * (the identifier as given, the number it names). */
static int print_answer(const cli_ctx_t *ctx, const char *id, const char *pith)
{
	if (ctx->json) {
		pith_buf_t b = PITH_BUF_INIT;
		pith_buf_puts(&b, "{\"id\":");
		json_write_string(&b, id, strlen(id));
		pith_buf_puts(&b, ",\"pith_number\":");
		json_write_string(&b, pith, strlen(pith));
		pith_buf_puts(&b, "}\n");
		if (b.oom)
			return cli_fail("resolve", "out of memory");
		fwrite(b.data, 1, b.len, stdout);
		pith_buf_release(&b);
	} else {
		printf("%s\n", pith);
	}
	return fflush(stdout) ? cli_fail("resolve", "cannot write to stdout") : 0;
}

/* The same from a running node (RocksDB lets one process open a store). */
static int run_node(cli_ctx_t *ctx, const char *id)
{
	json_doc_t *doc;
	if (cli_node_query(ctx, "resolve", "resolve", id, &doc))
		return 1;
	int rc = print_answer(ctx, id, cli_json_str(json_doc_root(doc), "pith_number"));
	json_doc_free(doc);
	return rc;
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
		rc = print_answer(ctx, id, pith);
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_resolve = {
	"resolve", "print the full pith number an identifier names",
	"usage: pithctl --store DIR resolve [--json] ID\n"
	"       pithctl --node SOCKET resolve [--json] ID\n\n"
	"ID: arxiv:2401.14489 (or 2401.14489v2), doi:10.48550/arxiv.2401.14489,\n"
	"pith:AR7B3DEV (8, 12 or 16 characters, or any unambiguous body prefix),\n"
	"the 26-character body or a full pith number. Aliases come from the newest\n"
	"verified bundle of each record and from its applied record_created.\n"
	"With --node, a running pithd resolves it in its store. Prints the full\n"
	"pith number; --json: {\"id\": ID as given, \"pith_number\": ...}.\n",
	run,
};
