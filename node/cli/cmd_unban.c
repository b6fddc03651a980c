/* pithctl unban PEER: lift a ban on a running node. */
#include "cli_node.h"

static void print_unban(const json_value_t *r)
{
	printf("ban on %s lifted\n", cli_json_str(r, "ip"));
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	return cli_node_show1(ctx, argc, argv, "unban", "PEER", print_unban);
}

const cli_cmd_t cli_cmd_unban = {
	"unban", "lift a ban on a running node",
	"usage: pithctl --node SOCKET unban PEER [--json]\n\n"
	"PEER: the banned IP address (IP, IP:PORT or [IPv6]:PORT; the port is\n"
	"ignored, bans are per address). The node may dial it again at once; the\n"
	"change is saved in DATA/peers.json. Fails if PEER is not banned.\n",
	run,
};
