/* pithctl ban PEER [--for DURATION] [--reason TEXT]: ban on a running node. */
#include "cli_node.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BAN_MAX_S (10LL * 366 * 86400)

/* "3600", "90s", "15m", "2h", "7d", "2w" to seconds (1 to ten years). */
static int parse_duration(const char *s, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	long long mul = 1;
	if (end == s || errno || v < 1)
		return -1;
	if (*end && end[1])
		return -1;
	switch (*end) {
	case 0: case 's': mul = 1; break;
	case 'm': mul = 60; break;
	case 'h': mul = 3600; break;
	case 'd': mul = 86400; break;
	case 'w': mul = 7 * 86400; break;
	default: return -1;
	}
	if (v > BAN_MAX_S / mul)
		return -1;
	*out = v * mul;
	return 0;
}

static void print_ban(const json_value_t *r)
{
	char len[32], until[32] = "?";
	time_t t = (time_t)(cli_json_int(r, "until_us") / 1000000);
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(until, sizeof(until), "%Y-%m-%dT%H:%M:%SZ", &tm);
	cli_duration(cli_json_int(r, "seconds"), len);
	long long closed = cli_json_int(r, "closed");
	printf("banned %s for %s (until %s): %s; %lld connection%s closed\n", cli_json_str(r, "ip"),
	       len, until, cli_json_str(r, "reason"), closed, closed == 1 ? "" : "s");
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *peer = NULL, *reason = NULL;
	long long seconds = 0; /* 0: the node's ban_seconds */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json"))
			continue;
		if ((!strcmp(a, "--for") || !strcmp(a, "--reason")) && i + 1 < argc) {
			const char *v = argv[++i];
			if (a[2] == 'r')
				reason = v;
			else if (parse_duration(v, &seconds))
				return cli_fail("ban", "--for: '%s' is not a duration from 1s to 10 years "
						       "(a number with s, m, h, d or w)", v);
		} else if (a[0] == '-' || peer) {
			return cli_fail("ban", "unexpected argument '%s' (see --help)", a);
		} else {
			peer = a;
		}
	}
	if (!peer)
		return cli_fail("ban", "missing PEER (an IP address or a connected peer's node id)");
	if (cli_node_arg_ok("ban", "PEER", peer) || (reason && cli_node_arg_ok("ban", "--reason", reason)))
		return 1;
	pith_buf_t line = PITH_BUF_INIT;
	pith_buf_printf(&line, "ban %s %lld", peer, seconds);
	if (reason)
		pith_buf_printf(&line, " %s", reason);
	pith_buf_cstr(&line);
	int rc = line.oom ? cli_fail("ban", "out of memory")
			  : cli_node_show(ctx, "ban", (const char *)line.data, print_ban);
	pith_buf_release(&line);
	return rc;
}

const cli_cmd_t cli_cmd_ban = {
	"ban", "ban an address on a running node",
	"usage: pithctl --node SOCKET ban PEER [--for DURATION] [--reason TEXT] [--json]\n\n"
	"PEER: an IP address (IP, IP:PORT or [IPv6]:PORT; bans are per address)\n"
	"or the node id of a connected peer (8 to 64 hex digits, a prefix will\n"
	"do when it names one peer). The node closes its connections to that\n"
	"address, refuses it and does not dial it until the ban runs out.\n"
	"DURATION: 3600, 90s, 15m, 2h, 7d or 2w (default: the node's ban_seconds).\n"
	"The ban is saved in DATA/peers.json and survives restarts; `peers` and\n"
	"`status` show it, `unban` lifts it.\n",
	run,
};
