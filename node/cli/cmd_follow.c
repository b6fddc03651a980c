/* pithctl --node SOCKET follow ID...: a running node keeps records
 * current from its upstreams (issue 14; docs/upstream.md). */
#include <string.h>

#include "cli_node.h"

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	int json = ctx->json, n = 0, failed = 0;
	cli_list_t list = {json, 0}; /* --json: one array, an answer per ID */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			continue;
		n++;
		if (cli_node_arg_ok("follow", "ID", argv[i])) {
			failed++;
			continue;
		}
		pith_buf_t line = PITH_BUF_INIT, raw = PITH_BUF_INIT;
		json_doc_t *doc = NULL;
		pith_buf_printf(&line, "follow %s", argv[i]);
		pith_buf_cstr(&line);
		if (line.oom || cli_node_call(ctx, "follow", (const char *)line.data, &doc, &raw)) {
			failed++;
		} else if (json) {
			size_t len = raw.len;
			while (len && (raw.data[len - 1] == '\n' || raw.data[len - 1] == '\r'))
				len--;
			cli_list_item(&list);
			printf("%.*s", (int)len, (const char *)raw.data);
		} else {
			const json_value_t *r = json_doc_root(doc);
			printf("%s: %s\n", argv[i],
			       cli_json_int(r, "already") ? "already followed" :
			       "followed; checked now and every refresh interval");
		}
		json_doc_free(doc);
		pith_buf_release(&line);
		pith_buf_release(&raw);
	}
	if (!n)
		return cli_fail("follow", "missing ID (an arXiv id, DOI, or pith number)");
	if (list.n) /* every ID failed: nothing but the errors, as for any command */
		cli_list_end(&list);
	return failed ? 1 : 0;
}

const cli_cmd_t cli_cmd_follow = {
	"follow", "make a running node keep records current from its upstreams",
	"usage: pithctl --node SOCKET follow ID... [--json]\n\n"
	"Each ID (arXiv id, DOI, short or full pith number, or their URLs) joins\n"
	"the node's follow list: fetched from its upstreams (pithd --upstream) now,\n"
	"then checked every upstream_refresh seconds with a conditional request.\n"
	"The list is kept in DATA/follow across restarts. Fails for a malformed\n"
	"ID or a node without upstreams. --json: an array of the node's answers,\n"
	"one per ID followed ({\"ok\":true,\"already\":...}).\n",
	run,
};
