/* pithctl sync: one reconciliation session between a running pithd and
 * one of its peers, on demand, through the node's control socket (the
 * `sync PEER` command, node/mesh/sync.c). Prints what the session learnt. */
#include "cli_node.h"

static void print_result(const json_value_t *r)
{
	char sent[32], recv[32];
	cli_bytes((unsigned long long)cli_json_int(r, "bytes_sent"), sent);
	cli_bytes((unsigned long long)cli_json_int(r, "bytes_received"), recv);
	printf("sync with %s (node %.16s): session %lld, %s\n", cli_json_str(r, "peer"),
	       cli_json_str(r, "node_id"), cli_json_int(r, "session"), cli_json_str(r, "role"));
	printf("ids needed   %lld (this node lacks them: fetched through GET)\n",
	       cli_json_int(r, "ids_needed"));
	printf("ids offered  %lld (the peer lacks them: served when it asks)\n",
	       cli_json_int(r, "ids_offered"));
	printf("bytes        %s sent, %s received (reconciliation messages)\n", sent, recv);
	printf("round trips  %lld (%lld messages), %lld ms\n", cli_json_int(r, "round_trips"),
	       cli_json_int(r, "messages_sent") + cli_json_int(r, "messages_received"),
	       cli_json_int(r, "duration_ms"));
	printf("items        %lld here, %lld at the peer\n", cli_json_int(r, "our_items"),
	       cli_json_int(r, "peer_items"));
	printf("version      %lld (reconciliation messages; 1 with nodes that speak no other)\n",
	       cli_json_int(r, "version"));
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	if (cli_node_require(ctx, "sync"))
		return 1;
	return cli_node_show1(ctx, argc, argv, "sync", "peer", print_result);
}

const cli_cmd_t cli_cmd_sync = {
	"sync", "reconcile a running node with one peer now",
	"usage: pithctl --node SOCKET sync [--json] PEER\n\n"
	"Asks the pithd behind SOCKET to run one reconciliation session with\n"
	"PEER, a connected peer's node id (8 or more hex digits) or HOST:PORT\n"
	"(dialled first when no connected peer has that address), and prints,\n"
	"once the session ends, what it learnt: ids this node lacks (fetched\n"
	"through the normal validated path), ids the peer lacks (served when it\n"
	"asks), bytes, messages and round trips. A session with a large\n"
	"difference lasts until most of it is fetched (the node takes the\n"
	"peer's ids at the pace it stores them); the fetching of the last ids\n"
	"goes on after the answer. `pithctl status` shows the progress. Exit\n"
	"status 1 when the session failed.\n",
	run,
};
