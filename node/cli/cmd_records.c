/* pithctl records: one line per stored record. */
#include "cli_node.h"
#include "cli_store.h"

#include <inttypes.h>
#include <string.h>

typedef struct rec_out {
	const cli_ctx_t *ctx;
	cli_list_t list; /* --json: one array */
} rec_out_t;

static int print_record(void *arg, const store_record_info_t *r)
{
	rec_out_t *o = arg;
	char hex[65];
	pith_hex_encode(r->state_hash, 32, hex);
	cli_list_item(&o->list);
	if (o->ctx->json)
		printf("{\"pith_number\":\"%s\",\"event_count\":%" PRIu64
		       ",\"state_sha256\":\"%s\",\"has_bundle\":%s}",
		       r->pith_number, r->event_count, hex, r->has_bundle ? "true" : "false");
	else
		printf("%s %" PRIu64 " %s\n", r->pith_number, r->event_count, hex);
	return ferror(stdout) ? 1 : 0;
}

/* The header line (people; '#' so that scripts can skip it). */
static void print_header(const cli_ctx_t *ctx)
{
	if (!ctx->json)
		printf("# pith_number events state_sha256\n");
}

/* The same from a running node (RocksDB lets one process open a store). */
static int run_node(cli_ctx_t *ctx)
{
	json_doc_t *doc;
	rec_out_t o = {ctx, {ctx->json, 0}};
	if (cli_node_call(ctx, "records", "records", &doc, NULL))
		return 1;
	const json_value_t *recs = json_get_type(json_doc_root(doc), "records", JSON_ARRAY);
	int rc = recs ? 0 : cli_fail("records", "the node's answer has no \"records\"");
	if (!rc)
		print_header(ctx);
	for (size_t i = 0; !rc && i < recs->len; i++) {
		const json_value_t *r = recs->u.items[i];
		store_record_info_t ri = {.has_bundle = json_is(json_get(r, "has_bundle"), JSON_TRUE)};
		const char *hex = cli_json_str(r, "state_sha256");
		snprintf(ri.pith_number, sizeof(ri.pith_number), "%s", cli_json_str(r, "pith_number"));
		ri.event_count = (uint64_t)cli_json_int(r, "event_count");
		if (pith_hex_decode(hex, strlen(hex), ri.state_hash, 32))
			rc = cli_fail("records", "the node's answer has a malformed state_sha256");
		else if (print_record(&o, &ri))
			rc = cli_fail("records", "cannot write to stdout");
	}
	if (!rc)
		cli_list_end(&o.list);
	if (!rc && fflush(stdout))
		rc = cli_fail("records", "cannot write to stdout");
	json_doc_free(doc);
	return rc;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	pith_trust_t *trust;
	store_t *st;
	pith_err_t err = {0};
	if (cli_first_operand(argc, argv))
		return cli_fail("records", "takes no operands");
	if (ctx->node_sock)
		return run_node(ctx);
	if (cli_store_open(ctx, "records", 0, &trust, &st))
		return 1;
	print_header(ctx);
	rec_out_t o = {ctx, {ctx->json, 0}};
	int rc = store_records_each(st, print_record, &o, &err);
	if (!rc)
		cli_list_end(&o.list);
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
	"usage: pithctl --store DIR records [--json]\n"
	"       pithctl --node SOCKET records [--json]\n\n"
	"A header line ('# ...'), then one line per record: pith number, event count,\n"
	"state_sha256 (`show ID` tells one record for a person); with\n"
	"--json a JSON array of objects, one a line (with has_bundle; [] for no\n"
	"record). With --node, a running pithd lists its store.\n",
	run,
};
