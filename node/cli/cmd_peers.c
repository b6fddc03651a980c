/* pithctl peers: a running node's connections, address book and bans. */
#include "cli_node.h"
#include "cli_store.h"

#include <string.h>

static void print_peers(const json_value_t *r)
{
	const json_value_t *peers = json_get(r, "peers"), *addrs = json_get(r, "addresses"),
			   *bans = json_get(r, "bans");
	size_t np = json_is(peers, JSON_ARRAY) ? peers->len : 0;
	if (np)
		printf("%-22s %-3s %-9s %-16s %8s %8s %5s %15s %19s  %s\n", "ADDR", "DIR", "STATE",
		       "NODE", "RTT", "AGE", "SCORE", "EVENTS IN/OUT", "BYTES IN/OUT", "ROOT");
	for (size_t i = 0; i < np; i++) {
		const json_value_t *p = peers->u.items[i];
		char age[32], bin[32], bout[32], ev[40], by[72], rtt[24];
		cli_duration(cli_json_int(p, "age_ms") / 1000, age);
		cli_bytes((unsigned long long)cli_json_int(p, "bytes_in"), bin);
		cli_bytes((unsigned long long)cli_json_int(p, "bytes_out"), bout);
		snprintf(ev, sizeof(ev), "%lld/%lld", cli_json_int(p, "events_in"),
			 cli_json_int(p, "events_out"));
		snprintf(by, sizeof(by), "%s/%s", bin, bout);
		snprintf(rtt, sizeof(rtt), "%.1f ms", cli_json_num(p, "rtt_ms"));
		/* ROOT: our state roots compared (docs/state-root.md section 14) */
		printf("%-22s %-3s %-9s %-16.16s %8s %8s %5lld %15s %19s  %s\n", cli_json_str(p, "addr"),
		       cli_json_str(p, "direction"), cli_json_str(p, "state"),
		       *cli_json_str(p, "node_id") ? cli_json_str(p, "node_id") : "-", rtt, age,
		       cli_json_int(p, "score"), ev, by,
		       *cli_json_str(p, "root") ? cli_json_str(p, "root") : "-");
	}
	if (!np)
		printf("no connections\n");
	size_t na = json_is(addrs, JSON_ARRAY) ? addrs->len : 0, kept = 0;
	for (size_t i = 0; i < na; i++)
		kept += json_is(json_get(addrs->u.items[i], "kept"), JSON_TRUE);
	printf("addresses: %zu known, %zu kept by `connect`", na, kept);
	for (size_t i = 0, k = 0; i < na; i++)
		if (json_is(json_get(addrs->u.items[i], "kept"), JSON_TRUE))
			printf("%s%s", k++ ? ", " : ": ", cli_json_str(addrs->u.items[i], "addr"));
	printf("\n");
	size_t nb = json_is(bans, JSON_ARRAY) ? bans->len : 0;
	printf("bans: %s\n", nb ? "" : "none");
	for (size_t i = 0; i < nb; i++) {
		char left[32];
		cli_duration(cli_json_int(bans->u.items[i], "remaining_s"), left);
		printf("  %-39s %10s left  %s\n", cli_json_str(bans->u.items[i], "ip"), left,
		       cli_json_str(bans->u.items[i], "reason"));
	}
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	if (cli_first_operand(argc, argv))
		return cli_fail("peers", "takes no operands");
	return cli_node_show(ctx, "peers", "peers", print_peers);
}

const cli_cmd_t cli_cmd_peers = {
	"peers", "a running node's connections, addresses and bans",
	"usage: pithctl --node SOCKET peers [--json]\n\n"
	"One line per connection (address, direction, state, node id, round\n"
	"trip, age, misbehaviour score, events and bytes each way), then the\n"
	"address book (addresses kept by `connect` are dialled across restarts)\n"
	"and the bans with the time left. --json prints the node's answer:\n"
	"{\"ok\":true,\"peers\":[...],\"addresses\":[...],\"bans\":[...]}.\n",
	run,
};
