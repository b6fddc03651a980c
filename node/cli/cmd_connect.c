/* pithctl connect HOST:PORT: a running node dials a peer and keeps it. */
#include "cli_node.h"

static void print_connect(const json_value_t *r)
{
	printf("dialling %s; kept: redialled when lost and after restarts\n", cli_json_str(r, "addr"));
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	return cli_node_show1(ctx, argc, argv, "connect", "HOST:PORT", print_connect);
}

const cli_cmd_t cli_cmd_connect = {
	"connect", "make a running node dial and keep a peer",
	"usage: pithctl --node SOCKET connect HOST:PORT [--json]\n\n"
	"The node adds HOST:PORT to its address book as a kept peer: dialled now,\n"
	"redialled with backoff whenever the connection is lost, and again after\n"
	"a restart (kept addresses are saved in DATA/peers.json). HOST is a name\n"
	"or an address; the node resolves it once.\n",
	run,
};
