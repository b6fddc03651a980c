/* The control socket's commands on the address book (control.h):
 *
 *   connect HOST:PORT          dial and keep a peer, across restarts too
 *   ban PEER [SECONDS [WHY]]   ban an IP address (or a connected peer's, by
 *                              node id prefix), close its connections
 *   unban PEER                 lift the ban on an IP address
 *
 * Bans and kept addresses are written to DATA/peers.json before the
 * answer (addrbook_file.c). */
#include "addrbook_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "log.h"

#define BAN_SECONDS_MAX (10 * 366 * 86400LL)
#define NODE_ID_PREFIX_MIN 8

/* The answer to `connect HOST:PORT` once the address is in the book (or
 * could not go in: rc, err): the book is saved, the peer dialled. */
static int connect_answer(addrbook_t *ab, const char *arg, int rc, const pith_err_t *err_in,
			  pith_buf_t *b)
{
	pith_err_t err = {0};
	if (rc)
		return control_fail(b, "%s", err_in->msg);
	if (addrbook_save(ab, &err))
		return control_fail(b, "%s is dialled but not kept across restarts: %s", arg,
				  err.msg);
	addrbook_maintain(ab, node_now_us());
	pith_buf_puts(b, "{\"ok\":true");
	control_key_str(b, "addr", arg, strlen(arg));
	pith_buf_puts(b, ",\"kept\":true}");
	return CTL_DONE;
}

int addrbook_ctl_connect(void *arg_, ctl_call_t *call)
{
	addrbook_t *ab = arg_;
	pith_err_t err = {0};
	int rc = addrbook_add_hostport_for(ab, call->arg, ADDRBOOK_KEEP, call->serial, &err);
	if (rc == ADDRBOOK_PENDING)
		return CTL_LATER; /* a name: answered when it resolves */
	return connect_answer(ab, call->arg, rc, &err, call->reply);
}

void addrbook_ctl_connect_done(addrbook_t *ab, uint64_t serial, const char *hostport, int rc,
			       const pith_err_t *err)
{
	pith_buf_t b = PITH_BUF_INIT;
	connect_answer(ab, hostport, rc, err, &b);
	if (ab->reply && !b.oom)
		ab->reply(ab->reply_arg, serial, (const char *)b.data, b.len);
	pith_buf_release(&b);
}

/* ---- bans ----------------------------------------------------------------------------- */

/* The IP address PEER names: "IP", "IP:PORT", "[IPv6]:PORT", or a node id
 * prefix (8 to 64 hex digits) of exactly one connected peer. */
static int peer_target(addrbook_t *ab, const char *peer, uint8_t ip[16], uint8_t *il, pith_buf_t *b)
{
	if (addrbook_parse_ip(peer, ip, il) == 0)
		return 0;
	size_t len = strlen(peer);
	int hex = len >= NODE_ID_PREFIX_MIN && len <= 64;
	for (size_t i = 0; hex && i < len; i++)
		hex = (peer[i] >= '0' && peer[i] <= '9') || (peer[i] >= 'a' && peer[i] <= 'f');
	if (!hex) {
		control_fail(b, "'%s' is neither an IP address nor a node id (%d to 64 lower-case "
				"hex digits)", peer, NODE_ID_PREFIX_MIN);
		return -1;
	}
	const peer_t *found = NULL;
	for (const peer_t *p = net_peers(ab->net); p; p = p->next) {
		char id[65];
		if (!p->got_hello || p->state == PEER_CLOSING)
			continue;
		pith_hex_encode(p->pk, 32, id);
		if (strncmp(id, peer, len))
			continue;
		if (found && memcmp(found->pk, p->pk, 32)) {
			control_fail(b, "node id %s names more than one connected peer", peer);
			return -1;
		}
		found = p;
	}
	if (!found || peer_ip(found, ip, il)) {
		control_fail(b, "no connected peer has a node id starting with %s", peer);
		return -1;
	}
	return 0;
}

static int parse_seconds(const char *s, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || v < 1 || v > BAN_SECONDS_MAX)
		return -1;
	*out = v;
	return 0;
}

/* ban PEER [SECONDS [REASON]] */
int addrbook_ctl_ban(void *arg_, ctl_call_t *call)
{
	addrbook_t *ab = arg_;
	const char *arg = call->arg;
	pith_buf_t *b = call->reply;
	char peer[128], secs[32] = "";
	const char *reason = "banned by the operator";
	int used = 0;
	if (sscanf(arg, "%127s %n", peer, &used) != 1)
		return control_fail(b, "which PEER?");
	const char *rest = arg + used;
	if (*rest) {
		used = 0;
		sscanf(rest, "%31s %n", secs, &used);
		if (rest[used])
			reason = rest + used;
	}
	long long seconds = ab->cfg->ban_seconds;
	if (*secs && strcmp(secs, "0") && parse_seconds(secs, &seconds)) /* 0: ban_seconds */
		return control_fail(b, "'%s' is not a number of seconds from 1 to %lld", secs,
				  BAN_SECONDS_MAX);
	uint8_t ip[16], il;
	if (peer_target(ab, peer, ip, &il, b))
		return CTL_DONE;
	int64_t until = node_now_us() + seconds * 1000000;
	int rc = addrbook_ban_set(ab, ip, il, until, reason);
	if (rc)
		return control_fail(b, "%s",
				    rc == PITH_ETOOBIG ? "too many bans" : "out of memory");
	ab->stats->bans++;
	size_t closed = 0;
	for (peer_t *p = net_peers(ab->net); p; p = p->next) {
		uint8_t pip[16], pl;
		if (p->state == PEER_CLOSING || peer_ip(p, pip, &pl) || pl != il || memcmp(pip, ip, il))
			continue;
		peer_close(p, WIRE_BYE_BANNED, "banned by the operator: %s", reason);
		closed++;
	}
	const ban_t *bn = NULL;
	for (size_t i = 0; i < addrbook_ban_count(ab); i++)
		if (addrbook_ban_at(ab, i)->ip_len == il && !memcmp(addrbook_ban_at(ab, i)->ip, ip, il))
			bn = addrbook_ban_at(ab, i);
	log_info("operator banned %s for %lld s (%s); %zu connections closed", bn->ip_str, seconds,
		 reason, closed);
	pith_err_t err = {0};
	if (addrbook_save(ab, &err))
		return control_fail(b, "%s is banned until the node stops, but not saved: %s",
				  bn->ip_str, err.msg);
	pith_buf_printf(b, "{\"ok\":true,\"ip\":\"%s\",\"seconds\":%lld,\"until_us\":%lld",
			bn->ip_str, seconds, (long long)until);
	control_key_str(b, "reason", bn->reason, strlen(bn->reason));
	pith_buf_printf(b, ",\"closed\":%zu}", closed);
	return CTL_DONE;
}

int addrbook_ctl_unban(void *arg_, ctl_call_t *call)
{
	addrbook_t *ab = arg_;
	const char *arg = call->arg;
	pith_buf_t *b = call->reply;
	uint8_t ip[16], il;
	if (addrbook_parse_ip(arg, ip, &il))
		return control_fail(b, "'%s' is not an IP address (IP, IP:PORT or [IPv6]:PORT)",
				  arg);
	char s[48];
	inet_ntop(il == 4 ? AF_INET : AF_INET6, ip, s, sizeof(s));
	if (!addrbook_ban_lift(ab, ip, il))
		return control_fail(b, "%s is not banned", s);
	log_info("operator lifted the ban on %s", s);
	pith_err_t err = {0};
	if (addrbook_save(ab, &err))
		return control_fail(b, "the ban on %s is lifted until the node stops, but not "
				     "saved: %s", s, err.msg);
	pith_buf_printf(b, "{\"ok\":true,\"ip\":\"%s\"}", s);
	addrbook_maintain(ab, node_now_us());
	return CTL_DONE;
}

