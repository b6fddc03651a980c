/* pithctl state ID: the canonical merged state of a record. */
#include "cli_node.h"
#include "cli_store.h"

/* The same from a running node (RocksDB lets one process open a store). */
static int run_node(cli_ctx_t *ctx, const char *id)
{
	json_doc_t *doc;
	if (cli_node_query(ctx, "state", "state", id, &doc))
		return 1;
	int rc = cli_json_write_str(json_doc_root(doc), "json", "state");
	json_doc_free(doc);
	return rc;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *id = cli_first_operand(argc, argv);
	if (!id)
		return cli_fail("state", "missing ID");
	if (ctx->node_sock)
		return run_node(ctx, id);
	pith_trust_t *trust;
	store_t *st;
	if (cli_store_open(ctx, "state", 0, &trust, &st))
		return 1;
	char pith[PITH_NUMBER_LEN + 1];
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	int rc = cli_store_resolve(st, "state", id, pith);
	if (!rc && store_state_get(st, pith, &b, &err))
		rc = cli_fail("state", "%s", err.msg);
	if (!rc && fwrite(b.data, 1, b.len, stdout) != b.len)
		rc = cli_fail("state", "cannot write to stdout");
	pith_buf_release(&b);
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_state = {
	"state", "print the merged state of a record",
	"usage: pithctl --store DIR state ID\n"
	"       pithctl --node SOCKET state ID\n\n"
	"Writes the canonical JSON of the record's merged state (no newline), as\n"
	"served at /pith/{ID}/state.json. ID in any form: pith:YYYY:BODY, the\n"
	"26-character body, pith:SHORT or a body prefix, arxiv:ID, doi:DOI.\n"
	"With --node, a running pithd reads it from its store.\n",
	run,
};
