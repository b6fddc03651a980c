/* pithctl event EVENT_ID: one stored event, canonical. */
#include "cli_node.h"
#include "cli_store.h"

/* The same from a running node (RocksDB lets one process open a store). */
static int run_node(cli_ctx_t *ctx, const char *id)
{
	json_doc_t *doc;
	if (cli_node_query(ctx, "event", "get_event", id, &doc))
		return 1;
	int rc = cli_json_write_str(json_doc_root(doc), "json", "event");
	json_doc_free(doc);
	return rc;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *idtext = cli_first_operand(argc, argv);
	uint8_t id[32];
	pith_err_t err = {0};
	if (!idtext)
		return cli_fail("event", "missing EVENT_ID");
	if (ctx->node_sock)
		return run_node(ctx, idtext);
	if (store_event_id_parse(idtext, id, &err))
		return cli_fail("event", "%s", err.msg);
	pith_trust_t *trust;
	store_t *st;
	if (cli_store_open(ctx, "event", 0, &trust, &st))
		return 1;
	pith_buf_t b = PITH_BUF_INIT;
	int rc = 0;
	if (store_event_get(st, id, &b, &err))
		rc = cli_fail("event", "%s", err.msg);
	else if (fwrite(b.data, 1, b.len, stdout) != b.len)
		rc = cli_fail("event", "cannot write to stdout");
	pith_buf_release(&b);
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_event = {
	"event", "print one stored event",
	"usage: pithctl --store DIR event EVENT_ID\n"
	"       pithctl --node SOCKET event EVENT_ID\n\n"
	"Writes the canonical JSON of the stored event (with the signature block\n"
	"the store kept), no newline. EVENT_ID: sha256:HEX or HEX. With --node, a\n"
	"running pithd reads it from its store.\n",
	run,
};
