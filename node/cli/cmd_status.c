/* pithctl status: what a running node is doing. */
#include "cli_node.h"
#include "cli_store.h"

#include <string.h>

static void print_bans(const json_value_t *bans)
{
	if (!json_is(bans, JSON_ARRAY) || !bans->len) {
		printf("bans       none\n");
		return;
	}
	for (size_t i = 0; i < bans->len; i++) {
		const json_value_t *b = bans->u.items[i];
		char left[32];
		cli_duration(cli_json_int(b, "remaining_s"), left);
		printf("%s %s (%s), %s left\n", i ? "          " : "bans      ", cli_json_str(b, "ip"),
		       cli_json_str(b, "reason"), left);
	}
}

static void print_status(const json_value_t *s)
{
	const json_value_t *store = json_get(s, "store"), *peers = json_get(s, "peers"),
			   *ingest = json_get(s, "ingest"), *stats = json_get(s, "stats");
	size_t ready = 0, in = 0, out = 0, other = 0;
	for (size_t i = 0; json_is(peers, JSON_ARRAY) && i < peers->len; i++) {
		const json_value_t *p = peers->u.items[i];
		if (strcmp(cli_json_str(p, "state"), "ready")) {
			other++;
			continue;
		}
		ready++;
		if (!strcmp(cli_json_str(p, "direction"), "in"))
			in++;
		else
			out++;
	}
	char up[32], sent[32], recv[32];
	cli_duration(cli_json_int(s, "uptime_ms") / 1000, up);
	cli_bytes((unsigned long long)cli_json_int(stats, "bytes_sent"), sent);
	cli_bytes((unsigned long long)cli_json_int(stats, "bytes_recv"), recv);
	const char *http = cli_json_str(s, "http");
	printf("node       %s\n", cli_json_str(s, "node_id"));
	printf("network    %s\n", cli_json_str(s, "network_id"));
	printf("listen     %s\n", cli_json_str(s, "listen"));
	printf("http       %s\n", *http ? http : "(off)");
	printf("uptime     %s%s\n", up,
	       json_is(json_get(s, "shutting_down"), JSON_TRUE) ? " (shutting down)" : "");
	printf("store      %lld events in %lld records, %lld bundles\n", cli_json_int(store, "events"),
	       cli_json_int(store, "records"), cli_json_int(store, "bundles"));
	printf("disk       %.1f MB in tables, %.1f MB of write-ahead log; memtables %.1f MB, "
	       "compaction pending %.1f MB\n",
	       (double)cli_json_int(store, "sst_bytes") / 1e6,
	       (double)cli_json_int(store, "wal_bytes") / 1e6,
	       (double)cli_json_int(store, "memtable_bytes") / 1e6,
	       (double)cli_json_int(store, "pending_compaction_bytes") / 1e6);
	const json_value_t *se = json_get(s, "search");
	if (json_is(se, JSON_OBJECT)) {
		printf("search     indexed through change %lld, %lld behind",
		       cli_json_int(se, "indexed_through"), cli_json_int(se, "behind"));
		if (json_is(json_get(se, "held"), JSON_TRUE))
			printf(" (waiting for the catch-up to end)");
		if (cli_json_int(se, "pass_records"))
			printf(" (first pass: %lld records indexed)", cli_json_int(se, "pass_records"));
		printf("\n");
	}
	printf("peers      %zu ready (%zu out, %zu in), %zu connecting or closing; %lld addresses known\n",
	       ready, out, in, other, cli_json_int(s, "addresses"));
	print_bans(json_get(s, "bans"));
	printf("fetching   %lld pending\n", cli_json_int(s, "pending_fetches"));
	const json_value_t *sy = json_get(s, "sync");
	if (!strcmp(cli_json_str(sy, "state"), "syncing"))
		printf("sync       catching up: %lld events stored (%.0f/s), about %lld remaining "
		       "(%.0f s)\n",
		       cli_json_int(sy, "events_stored"), cli_json_num(sy, "rate"),
		       cli_json_int(sy, "remaining"), cli_json_num(sy, "eta_s"));
	else if (sy)
		printf("sync       idle: %lld events in the set, %lld sessions done (%lld failed)\n",
		       cli_json_int(sy, "items"), cli_json_int(sy, "sessions_done"),
		       cli_json_int(sy, "sessions_failed"));
	if (sy && cli_json_int(sy, "bundle_sessions"))
		printf("sync       bundles: %lld in the set, %lld sessions, %lld announced of %lld "
		       "peers lacked\n",
		       cli_json_int(sy, "bundle_items"), cli_json_int(sy, "bundle_sessions"),
		       cli_json_int(sy, "bundle_offers_sent"), cli_json_int(sy, "bundles_offered"));
	if (sy && (cli_json_int(sy, "upload_sent") || cli_json_int(sy, "credit_holds") ||
		   cli_json_int(sy, "upload_holds")))
		printf("sync       answers to peers' sessions: %lld bytes (budget %lld an interval); "
		       "deferred %lld times over a peer's credit, %lld over the budget\n",
		       cli_json_int(sy, "upload_sent"), cli_json_int(sy, "upload_budget"),
		       cli_json_int(sy, "credit_holds"), cli_json_int(sy, "upload_holds"));
	printf("ingest     %lld in flight; %lld validated, %lld invalid, %lld store errors\n",
	       cli_json_int(ingest, "in_flight"), cli_json_int(ingest, "validated"),
	       cli_json_int(ingest, "invalid"), cli_json_int(ingest, "store_errors"));
	printf("events     %lld stored, %lld duplicate, %lld invalid, %lld served to peers\n",
	       cli_json_int(stats, "events_stored"), cli_json_int(stats, "events_duplicate"),
	       cli_json_int(stats, "events_invalid"), cli_json_int(stats, "events_served"));
	printf("traffic    %s sent, %s received\n", sent, recv);
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	if (cli_first_operand(argc, argv))
		return cli_fail("status", "takes no operands");
	return cli_node_show(ctx, "status", "status", print_status);
}

const cli_cmd_t cli_cmd_status = {
	"status", "what a running node is doing",
	"usage: pithctl --node SOCKET status [--json]\n\n"
	"Asks the pithd behind SOCKET (its control socket, by default\n"
	"DATA/pithd.sock) for its status: identity, addresses, store counts,\n"
	"peers, bans, fetches, the ingest pipeline and traffic. --json prints\n"
	"the node's whole status object (docs/pithd.md, \"Status\").\n",
	run,
};
