/* The operator's commands on the control socket (issue 6), next to the
 * ones control.c answers itself (status, records, event, bundle, sync):
 *
 *   peers                      connections, the address book and the bans
 *   connect HOST:PORT          dial and keep a peer, across restarts too
 *   ban PEER [SECONDS [WHY]]   ban an IP address (or a connected peer's, by
 *                              node id prefix), close its connections
 *   unban PEER                 lift the ban on an IP address
 *   backup DIR                 a RocksDB checkpoint of the running store
 *   state ID, resolve ID       read-only queries of the store (RocksDB lets
 *   get_event ID               one process open it: pithctl asks the node)
 *
 * Every answer is one JSON object with "ok". Bans and kept addresses are
 * written to DATA/peers.json before the answer (addrbook_file.c). A backup
 * runs on its own thread (the flush and the hard links take a while on a
 * large store) and is answered through control_reply when it is done; one
 * at a time. */
#include "node_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "prio.h"

#define BAN_SECONDS_MAX (10 * 366 * 86400LL)
#define NODE_ID_PREFIX_MIN 8

typedef struct ctlops {
	node_t *node;
	struct event *done_ev;
	/* the backup in progress, if running */
	int running;
	pthread_t th;
	char dir[PATH_MAX];
	uint64_t serial;
	int64_t started_us;
	int rc;
	pith_err_t err;
} ctlops_t;

static int reply_fail(pith_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int reply_fail(pith_buf_t *b, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pith_buf_reset(b);
	pith_buf_puts(b, "{\"ok\":false,\"error\":");
	json_write_string(b, msg, strlen(msg));
	pith_buf_puts(b, "}");
	return CTLOP_DONE;
}

static void jkey_str(pith_buf_t *b, const char *key, const char *val, size_t len)
{
	pith_buf_printf(b, ",\"%s\":", key);
	json_write_string(b, val, len);
}

/* ---- peers ---------------------------------------------------------------------------- */

static const char *source_name(int s)
{
	return s == ADDR_CONFIG ? "config" : s == ADDR_PEX ? "peer_exchange" : "inbound";
}

static int op_peers(node_t *n, pith_buf_t *b)
{
	int64_t now = node_now_us();
	pith_buf_puts(b, "{\"ok\":true,\"peers\":[");
	for (peer_t *p = net_peers(n->net); p; p = p->next) {
		pith_buf_puts(b, p == net_peers(n->net) ? "" : ",");
		node_peer_json(p, now, b);
	}
	pith_buf_puts(b, "],\"addresses\":[");
	int first = 1;
	for (size_t i = 0; i < addrbook_size(n->book); i++) {
		const addr_entry_t *a = addrbook_entry(n->book, i);
		if (a->self)
			continue;
		char id[65] = "";
		if (a->has_pk)
			pith_hex_encode(a->pk, 32, id);
		pith_buf_printf(b, "%s{\"addr\":\"%s\",\"source\":\"%s\",\"pinned\":%s,\"kept\":%s,"
				"\"connected\":%s,\"failures\":%u,\"retry_in_ms\":%lld,"
				"\"last_ok_us\":%lld,\"node_id\":\"%s\"}",
				first ? "" : ",", a->str, source_name(a->source),
				a->pinned ? "true" : "false", a->kept ? "true" : "false",
				a->peer_serial ? "true" : "false", a->failures,
				(long long)(a->next_attempt_us > now ? (a->next_attempt_us - now) / 1000 : 0),
				(long long)a->last_ok_us, id);
		first = 0;
	}
	pith_buf_puts(b, "],\"bans\":");
	ban_list_json(n->book, now, b);
	pith_buf_puts(b, "}");
	return CTLOP_DONE;
}

static int op_connect(node_t *n, const char *arg, pith_buf_t *b)
{
	pith_err_t err = {0};
	if (addrbook_add_hostport(n->book, arg, ADDRBOOK_KEEP, &err))
		return reply_fail(b, "%s", err.msg);
	if (addrbook_save(n->book, &err))
		return reply_fail(b, "%s is dialled but not kept across restarts: %s", arg,
				  err.msg);
	addrbook_maintain(n->book, node_now_us());
	pith_buf_puts(b, "{\"ok\":true");
	jkey_str(b, "addr", arg, strlen(arg));
	pith_buf_puts(b, ",\"kept\":true}");
	return CTLOP_DONE;
}

/* ---- bans ----------------------------------------------------------------------------- */

/* The IP address PEER names: "IP", "IP:PORT", "[IPv6]:PORT", or a node id
 * prefix (8 to 64 hex digits) of exactly one connected peer. */
static int peer_target(node_t *n, const char *peer, uint8_t ip[16], uint8_t *il, pith_buf_t *b)
{
	if (addr_parse_ip(peer, ip, il) == 0)
		return 0;
	size_t len = strlen(peer);
	int hex = len >= NODE_ID_PREFIX_MIN && len <= 64;
	for (size_t i = 0; hex && i < len; i++)
		hex = (peer[i] >= '0' && peer[i] <= '9') || (peer[i] >= 'a' && peer[i] <= 'f');
	if (!hex) {
		reply_fail(b, "'%s' is neither an IP address nor a node id (%d to 64 lower-case hex "
			      "digits)", peer, NODE_ID_PREFIX_MIN);
		return -1;
	}
	const peer_t *found = NULL;
	for (const peer_t *p = net_peers(n->net); p; p = p->next) {
		char id[65];
		if (!p->got_hello || p->state == PEER_CLOSING)
			continue;
		pith_hex_encode(p->pk, 32, id);
		if (strncmp(id, peer, len))
			continue;
		if (found && memcmp(found->pk, p->pk, 32)) {
			reply_fail(b, "node id %s names more than one connected peer", peer);
			return -1;
		}
		found = p;
	}
	if (!found || peer_ip(found, ip, il)) {
		reply_fail(b, "no connected peer has a node id starting with %s", peer);
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
static int op_ban(node_t *n, const char *arg, pith_buf_t *b)
{
	char peer[128], secs[32] = "";
	const char *reason = "banned by the operator";
	int used = 0;
	if (sscanf(arg, "%127s %n", peer, &used) != 1)
		return reply_fail(b, "which PEER?");
	const char *rest = arg + used;
	if (*rest) {
		used = 0;
		sscanf(rest, "%31s %n", secs, &used);
		if (rest[used])
			reason = rest + used;
	}
	long long seconds = n->cfg->ban_seconds;
	if (*secs && strcmp(secs, "0") && parse_seconds(secs, &seconds)) /* 0: ban_seconds */
		return reply_fail(b, "'%s' is not a number of seconds from 1 to %lld", secs,
				  BAN_SECONDS_MAX);
	uint8_t ip[16], il;
	if (peer_target(n, peer, ip, &il, b))
		return CTLOP_DONE;
	int64_t until = node_now_us() + seconds * 1000000;
	int rc = ban_set(n->book, ip, il, until, reason);
	if (rc)
		return reply_fail(b, "%s", rc == PITH_ETOOBIG ? "too many bans" : "out of memory");
	n->stats.bans++;
	size_t closed = 0;
	for (peer_t *p = net_peers(n->net); p; p = p->next) {
		uint8_t pip[16], pl;
		if (p->state == PEER_CLOSING || peer_ip(p, pip, &pl) || pl != il || memcmp(pip, ip, il))
			continue;
		peer_close(p, WIRE_BYE_BANNED, "banned by the operator: %s", reason);
		closed++;
	}
	const ban_t *bn = NULL;
	for (size_t i = 0; i < ban_count(n->book); i++)
		if (ban_at(n->book, i)->ip_len == il && !memcmp(ban_at(n->book, i)->ip, ip, il))
			bn = ban_at(n->book, i);
	log_info("operator banned %s for %lld s (%s); %zu connections closed", bn->ip_str, seconds,
		 reason, closed);
	pith_err_t err = {0};
	if (addrbook_save(n->book, &err))
		return reply_fail(b, "%s is banned until the node stops, but not saved: %s",
				  bn->ip_str, err.msg);
	pith_buf_printf(b, "{\"ok\":true,\"ip\":\"%s\",\"seconds\":%lld,\"until_us\":%lld",
			bn->ip_str, seconds, (long long)until);
	jkey_str(b, "reason", bn->reason, strlen(bn->reason));
	pith_buf_printf(b, ",\"closed\":%zu}", closed);
	return CTLOP_DONE;
}

static int op_unban(node_t *n, const char *arg, pith_buf_t *b)
{
	uint8_t ip[16], il;
	if (addr_parse_ip(arg, ip, &il))
		return reply_fail(b, "'%s' is not an IP address (IP, IP:PORT or [IPv6]:PORT)",
				  arg);
	char s[48];
	inet_ntop(il == 4 ? AF_INET : AF_INET6, ip, s, sizeof(s));
	if (!ban_lift(n->book, ip, il))
		return reply_fail(b, "%s is not banned", s);
	log_info("operator lifted the ban on %s", s);
	pith_err_t err = {0};
	if (addrbook_save(n->book, &err))
		return reply_fail(b, "the ban on %s is lifted until the node stops, but not "
				     "saved: %s", s, err.msg);
	pith_buf_printf(b, "{\"ok\":true,\"ip\":\"%s\"}", s);
	addrbook_maintain(n->book, node_now_us());
	return CTLOP_DONE;
}

/* ---- backup ----------------------------------------------------------------------------- */

static void *backup_thread(void *arg)
{
	ctlops_t *o = arg;
	prio_lower_thread(0, (int)o->node->cfg->worker_nice); /* a worker like the others */
	o->rc = store_checkpoint(o->node->store, o->dir, &o->err);
	event_active(o->done_ev, EV_READ, 0);
	return NULL;
}

static void backup_done(ctlops_t *o)
{
	node_t *n = o->node;
	pthread_join(o->th, NULL);
	o->running = 0;
	pith_buf_t b = PITH_BUF_INIT;
	long long ms = (long long)((node_now_us() - o->started_us) / 1000);
	if (o->rc) {
		log_error("backup into %s failed: %s", o->dir, o->err.msg);
		reply_fail(&b, "%s", o->err.msg);
	} else {
		log_info("backup written to %s in %lld ms", o->dir, ms);
		pith_buf_puts(&b, "{\"ok\":true");
		jkey_str(&b, "dir", o->dir, strlen(o->dir));
		pith_buf_printf(&b, ",\"ms\":%lld}", ms);
	}
	if (n->control)
		control_reply(n->control, o->serial, (const char *)b.data, b.len);
	pith_buf_release(&b);
}

static void backup_done_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	backup_done(arg);
}

static ctlops_t *ops_get(node_t *n)
{
	if (n->ctlops)
		return n->ctlops;
	ctlops_t *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->node = n;
	o->done_ev = event_new(n->base, -1, 0, backup_done_cb, o);
	if (!o->done_ev) {
		free(o);
		return NULL;
	}
	return n->ctlops = o;
}

/* backup DIR: DIR absolute, not there yet, in an existing directory. */
static int op_backup(node_t *n, uint64_t serial, const char *dir, pith_buf_t *b)
{
	ctlops_t *o = ops_get(n);
	struct stat st;
	if (!o)
		return reply_fail(b, "out of memory");
	if (o->running)
		return reply_fail(b, "a backup into %s is in progress", o->dir);
	if (dir[0] != '/')
		return reply_fail(b, "'%s' is not an absolute path", dir);
	if (strlen(dir) >= sizeof(o->dir))
		return reply_fail(b, "the path is longer than %zu bytes", sizeof(o->dir) - 1);
	if (lstat(dir, &st) == 0)
		return reply_fail(b, "%s exists (the backup makes a new directory)", dir);
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", dir);
	char *slash = strrchr(parent, '/');
	if (slash == parent)
		slash[1] = 0;
	else
		*slash = 0;
	if (stat(parent, &st))
		return reply_fail(b, "%s: %s", parent, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return reply_fail(b, "%s is not a directory", parent);
	snprintf(o->dir, sizeof(o->dir), "%s", dir);
	o->serial = serial;
	o->started_us = node_now_us();
	o->rc = 0;
	memset(&o->err, 0, sizeof(o->err));
	if (pthread_create(&o->th, NULL, backup_thread, o))
		return reply_fail(b, "cannot start a thread: %s", strerror(errno));
	o->running = 1;
	log_info("backup into %s started", dir);
	return CTLOP_LATER;
}

void ctlop_free(node_t *n)
{
	ctlops_t *o = n->ctlops;
	if (!o)
		return;
	if (o->running) {
		pthread_join(o->th, NULL);
		log_info("backup into %s %s", o->dir, o->rc ? "failed" : "finished");
	}
	event_free(o->done_ev);
	free(o);
	n->ctlops = NULL;
}

/* ---- read-only queries ------------------------------------------------------------------- */

static int store_fail(pith_buf_t *b, const pith_err_t *err)
{
	reply_fail(b, "%s", err->msg);
	if (err->code == PITH_ENOTFOUND && b->len && b->data[b->len - 1] == '}') {
		b->len--; /* the CLI tells "not found" from other failures */
		pith_buf_puts(b, ",\"not_found\":true}");
	}
	return CTLOP_DONE;
}

static int op_state(node_t *n, const char *id, int state, pith_buf_t *b)
{
	char pith[PITH_NUMBER_LEN + 1];
	pith_err_t err = {0};
	pith_buf_t doc = PITH_BUF_INIT;
	if (store_resolve(n->store, id, pith, &err) ||
	    (state && store_state_get(n->store, pith, &doc, &err))) {
		pith_buf_release(&doc);
		return store_fail(b, &err);
	}
	pith_buf_printf(b, "{\"ok\":true,\"pith_number\":\"%s\"", pith);
	if (state)
		jkey_str(b, "json", (const char *)doc.data, doc.len);
	pith_buf_puts(b, "}");
	pith_buf_release(&doc);
	return CTLOP_DONE;
}

static int op_get_event(node_t *n, const char *id, pith_buf_t *b)
{
	uint8_t digest[32];
	char hex[65];
	pith_err_t err = {0};
	pith_buf_t ev = PITH_BUF_INIT;
	if (store_event_id_parse(id, digest, &err) || store_event_get(n->store, digest, &ev, &err)) {
		pith_buf_release(&ev);
		return store_fail(b, &err);
	}
	pith_hex_encode(digest, 32, hex);
	pith_buf_printf(b, "{\"ok\":true,\"event_id\":\"sha256:%s\"", hex);
	jkey_str(b, "json", (const char *)ev.data, ev.len);
	pith_buf_puts(b, "}");
	pith_buf_release(&ev);
	return CTLOP_DONE;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

int ctlop_run(node_t *n, uint64_t serial, const char *cmd, size_t cmdlen, const char *arg,
	      size_t arglen, pith_buf_t *reply)
{
#define IS(s) (cmdlen == sizeof(s) - 1 && !memcmp(cmd, s, cmdlen))
	if (IS("peers") && !arglen)
		return op_peers(n, reply);
	if (!arglen || memchr(arg, 0, arglen))
		return CTLOP_UNKNOWN; /* the rest take an argument (a C string here) */
	if (IS("connect"))
		return op_connect(n, arg, reply);
	if (IS("ban"))
		return op_ban(n, arg, reply);
	if (IS("unban"))
		return op_unban(n, arg, reply);
	if (IS("backup"))
		return op_backup(n, serial, arg, reply);
	if (IS("state"))
		return op_state(n, arg, 1, reply);
	if (IS("resolve"))
		return op_state(n, arg, 0, reply);
	if (IS("get_event"))
		return op_get_event(n, arg, reply);
	return CTLOP_UNKNOWN;
#undef IS
}
