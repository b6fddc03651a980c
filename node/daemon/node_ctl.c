/* The node's own commands on the control socket (control.h), and the
 * table of all of them, each beside the module it operates:
 *
 *   status                     the node's status object (node.c)
 *   peers                      connections, the address book and the bans
 *   records                    {"records":[{pith_number,event_count,state_sha256,has_bundle}...]}
 *   state ID, resolve ID       read-only queries of the store (RocksDB lets
 *   get_event ID               one process open it: pithctl asks the node)
 *   event JSON                 validate and store one event exactly as gossip
 *                              does; answered once the outcome is durable
 *   bundle JSON                the same for a registry bundle
 *   backup DIR                 a RocksDB checkpoint of the running store
 *   connect, ban, unban        the address book's (addrbook_ctl.c)
 *   sync PEER                  reconciliation's (sync_ctl.c)
 *   follow ID                  the follower keeps a record current (follower.h)
 *   search LIMIT OFFSET QUERY  the search index (search.h): {"results":[...],
 *                              "more","indexed_through"}
 *
 * Every answer is one JSON object with "ok". Replies to `event` and
 * `bundle` come after validation and the synced write:
 * {"ok":true,"event_id":...,"outcome":"stored"} means the event survives
 * a crash from then on. A backup runs on its own thread (the flush and the
 * hard links take a while on a large store) and is answered through
 * control_reply when it is done; one at a time. */
#include "node_int.h"

#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "control.h"
#include "log.h"
#include "prio.h"
#include "search.h"
#include "wake.h"

typedef struct ctlops {
	node_t *node;
	loop_wake_t *done; /* the backup thread fires it at its end */
	/* the backup in progress, if running */
	int running;
	pthread_t th;
	char dir[PATH_MAX];
	uint64_t serial;
	int64_t started_us;
	int rc;
	pith_err_t err;
} ctlops_t;

/* ---- status and peers ------------------------------------------------------------------- */

static int op_status(void *arg, ctl_call_t *call)
{
	node_status_json(arg, call->reply);
	return CTL_DONE;
}

static const char *source_name(int s)
{
	return s == ADDR_CONFIG ? "config" : s == ADDR_PEX ? "peer_exchange" : "inbound";
}

static int op_peers(void *arg, ctl_call_t *call)
{
	node_t *n = arg;
	pith_buf_t *b = call->reply;
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
		pith_buf_printf(b, "%s{\"addr\":\"%s\",\"source\":\"%s\",\"table\":\"%s\","
				"\"pinned\":%s,\"kept\":%s,"
				"\"connected\":%s,\"failures\":%u,\"retry_in_ms\":%lld,"
				"\"last_ok_us\":%lld,\"node_id\":\"%s\"}",
				first ? "" : ",", a->str, source_name(a->source),
				a->table == ADDR_TABLE_NEW ? "new" : a->table == ADDR_TABLE_TRIED ? "tried" : "none",
				a->pinned ? "true" : "false", a->kept ? "true" : "false",
				a->peer_serial ? "true" : "false", a->failures,
				(long long)(a->next_attempt_us > now ? (a->next_attempt_us - now) / 1000 : 0),
				(long long)a->last_ok_us, id);
		first = 0;
	}
	pith_buf_puts(b, "],\"bans\":");
	addrbook_ban_list_json(n->book, now, b);
	pith_buf_puts(b, "}");
	return CTL_DONE;
}

/* ---- records, events and bundles ------------------------------------------------------------ */

static int record_line(void *arg, const store_record_info_t *ri)
{
	pith_buf_t *b = arg;
	char hex[65];
	pith_hex_encode(ri->state_hash, 32, hex);
	pith_buf_printf(b, "%s{\"pith_number\":\"%s\",\"event_count\":%llu,\"state_sha256\":\"%s\","
			"\"has_bundle\":%s}",
			b->data[b->len - 1] == '[' ? "" : ",", ri->pith_number,
			(unsigned long long)ri->event_count, hex, ri->has_bundle ? "true" : "false");
	return b->oom ? 1 : 0;
}

static int op_records(void *arg, ctl_call_t *call)
{
	node_t *n = arg;
	pith_err_t err = {0};
	pith_buf_puts(call->reply, "{\"records\":[");
	if (store_records_each(n->store, record_line, call->reply, &err) < 0)
		return control_fail(call->reply, "%s", err.msg);
	pith_buf_puts(call->reply, "]}");
	return CTL_DONE;
}

/* Hands the line's JSON to the ingest pipeline; answered when the job is
 * back (control_job_done). */
static int submit(node_t *n, ctl_call_t *call, ingest_kind_t kind)
{
	ingest_job_t *job = ingest_job_new(kind, (const uint8_t *)call->arg, call->arglen);
	if (!job)
		return control_fail(call->reply, "out of memory");
	job->ctl = call->serial;
	job->durable = 1;
	ingest_submit(n->ingest, job);
	return CTL_LATER;
}

static int op_event(void *arg, ctl_call_t *call)
{
	return submit(arg, call, INGEST_EVENT);
}

static int op_bundle(void *arg, ctl_call_t *call)
{
	return submit(arg, call, INGEST_BUNDLE);
}

/* ---- backup ----------------------------------------------------------------------------- */

static void *backup_thread(void *arg)
{
	ctlops_t *o = arg;
	prio_lower_thread(0, (int)o->node->cfg->worker_nice); /* a worker like the others */
	o->rc = store_checkpoint(o->node->store, o->dir, &o->err);
	loop_wake_fire(o->done);
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
		control_fail(&b, "%s", o->err.msg);
	} else {
		log_info("backup written to %s in %lld ms", o->dir, ms);
		pith_buf_puts(&b, "{\"ok\":true");
		control_key_str(&b, "dir", o->dir, strlen(o->dir));
		pith_buf_printf(&b, ",\"ms\":%lld}", ms);
	}
	if (n->control)
		control_reply(n->control, o->serial, (const char *)b.data, b.len);
	pith_buf_release(&b);
}

static void backup_done_cb(void *arg)
{
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
	o->done = loop_wake_new(n->base, backup_done_cb, o);
	if (!o->done) {
		free(o);
		return NULL;
	}
	return n->ctlops = o;
}

/* backup DIR: DIR absolute, not there yet, in an existing directory. */
static int op_backup(void *arg, ctl_call_t *call)
{
	node_t *n = arg;
	uint64_t serial = call->serial;
	const char *dir = call->arg;
	pith_buf_t *b = call->reply;
	ctlops_t *o = ops_get(n);
	struct stat st;
	if (!o)
		return control_fail(b, "out of memory");
	if (o->running)
		return control_fail(b, "a backup into %s is in progress", o->dir);
	if (dir[0] != '/')
		return control_fail(b, "'%s' is not an absolute path", dir);
	if (strlen(dir) >= sizeof(o->dir))
		return control_fail(b, "the path is longer than %zu bytes", sizeof(o->dir) - 1);
	if (lstat(dir, &st) == 0)
		return control_fail(b, "%s exists (the backup makes a new directory)", dir);
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", dir);
	char *slash = strrchr(parent, '/');
	if (slash == parent)
		slash[1] = 0;
	else
		*slash = 0;
	if (stat(parent, &st))
		return control_fail(b, "%s: %s", parent, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return control_fail(b, "%s is not a directory", parent);
	snprintf(o->dir, sizeof(o->dir), "%s", dir);
	o->serial = serial;
	o->started_us = node_now_us();
	o->rc = 0;
	memset(&o->err, 0, sizeof(o->err));
	if (pthread_create(&o->th, NULL, backup_thread, o))
		return control_fail(b, "cannot start a thread: %s", strerror(errno));
	o->running = 1;
	log_info("backup into %s started", dir);
	return CTL_LATER;
}

void node_ctl_free(node_t *n)
{
	ctlops_t *o = n->ctlops;
	if (!o)
		return;
	if (o->running) {
		pthread_join(o->th, NULL);
		log_info("backup into %s %s", o->dir, o->rc ? "failed" : "finished");
	}
	loop_wake_free(o->done);
	free(o);
	n->ctlops = NULL;
}

/* ---- read-only queries ------------------------------------------------------------------- */

static int store_fail(pith_buf_t *b, const pith_err_t *err)
{
	control_fail(b, "%s", err->msg);
	if (err->code == PITH_ENOTFOUND && b->len && b->data[b->len - 1] == '}') {
		b->len--; /* the CLI tells "not found" from other failures */
		pith_buf_puts(b, ",\"not_found\":true}");
	}
	return CTL_DONE;
}

static int state_or_resolve(node_t *n, const char *id, int state, pith_buf_t *b)
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
	if (state) {
		control_key_str(b, "json", (const char *)doc.data, doc.len);
		/* the newest bundle's built_at (pithctl show), from the change log's
		 * entry: no bundle to read and parse */
		char built[STORE_BUILT_AT_MAX + 1];
		if (store_built_at_get(n->store, pith, built, NULL) == 0)
			control_key_str(b, "built_at", built, strlen(built));
	}
	pith_buf_puts(b, "}");
	pith_buf_release(&doc);
	return CTL_DONE;
}

static int op_get_event(void *arg, ctl_call_t *call)
{
	node_t *n = arg;
	const char *id = call->arg;
	pith_buf_t *b = call->reply;
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
	control_key_str(b, "json", (const char *)ev.data, ev.len);
	pith_buf_puts(b, "}");
	pith_buf_release(&ev);
	return CTL_DONE;
}

static int op_state(void *arg, ctl_call_t *call)
{
	return state_or_resolve(arg, call->arg, 1, call->reply);
}

static int op_resolve(void *arg, ctl_call_t *call)
{
	return state_or_resolve(arg, call->arg, 0, call->reply);
}

/* follow ID: the follower keeps the record current (follower.h). */
static int op_follow(void *arg, ctl_call_t *call)
{
	node_t *n = arg;
	pith_err_t err = {0};
	if (!n->follower)
		return control_fail(call->reply, "this node has no upstreams (start it with --upstream URL)");
	int rc = follower_follow(n->follower, call->arg, &err);
	if (rc < 0)
		return control_fail(call->reply, "%s", err.msg);
	pith_buf_printf(call->reply, "{\"ok\":true,\"already\":%d}", rc == 1);
	return CTL_DONE;
}

/* search LIMIT OFFSET QUERY: the search index (search.h), on the loop
 * like /api/search (a bounded query). pithctl search writes the line. */
typedef struct ctl_hits {
	pith_buf_t *b;
	size_t n;
} ctl_hits_t;

static int ctl_hit(void *arg, const search_hit_t *hit)
{
	ctl_hits_t *h = arg;
	pith_buf_puts(h->b, h->n++ ? "," : "");
	search_hit_json(hit, h->b);
	return 0;
}

static int op_search(void *arg, ctl_call_t *call)
{
	node_t *n = arg;
	pith_buf_t *b = call->reply;
	char *end;
	const char *p = call->arg;
	if (!n->search)
		return control_fail(b, "this node keeps no search index (see its log)");
	unsigned long limit = strtoul(p, &end, 10);
	if (end == p || *end != ' ')
		return control_fail(b, "usage: search LIMIT OFFSET QUERY");
	p = end + 1;
	unsigned long offset = strtoul(p, &end, 10);
	if (end == p || *end != ' ')
		return control_fail(b, "usage: search LIMIT OFFSET QUERY");
	size_t at = b->len;
	pith_buf_puts(b, "{\"ok\":true,\"results\":[");
	ctl_hits_t h = {.b = b};
	pith_err_t err = {0};
	int more = 0;
	if (search_query(n->search, end + 1, limit, offset, ctl_hit, &h, &more, &err)) {
		b->len = at;
		return control_fail(b, "%s", err.msg);
	}
	pith_buf_printf(b, "],\"more\":%s,\"indexed_through\":%llu}", more ? "true" : "false",
			(unsigned long long)search_seq(n->search));
	return CTL_DONE;
}

/* ---- the table ------------------------------------------------------------------------------ */

control_t *node_control_new(node_t *n, pith_err_t *err)
{
	const ctl_cmd_t cmds[] = {
		{"status", CTL_ARG_IGNORED, op_status, n, "status"},
		{"peers", CTL_ARG_NONE, op_peers, n, "peers"},
		{"records", CTL_ARG_IGNORED, op_records, n, "records"},
		{"state", CTL_ARG_STRING, op_state, n, "state ID"},
		{"get_event", CTL_ARG_STRING, op_get_event, n, "get_event ID"},
		{"resolve", CTL_ARG_STRING, op_resolve, n, "resolve ID"},
		{"event", CTL_ARG_BYTES, op_event, n, "event JSON"},
		{"bundle", CTL_ARG_BYTES, op_bundle, n, "bundle JSON"},
		{"connect", CTL_ARG_STRING, addrbook_ctl_connect, n->book, "connect HOST:PORT"},
		{"ban", CTL_ARG_STRING, addrbook_ctl_ban, n->book, "ban PEER [SECONDS [REASON]]"},
		{"unban", CTL_ARG_STRING, addrbook_ctl_unban, n->book, "unban PEER"},
		{"backup", CTL_ARG_STRING, op_backup, n, "backup DIR"},
		{"sync", CTL_ARG_BYTES, sync_ctl_sync, n->sync, "sync PEER"},
		{"follow", CTL_ARG_STRING, op_follow, n, "follow ID"},
		{"search", CTL_ARG_STRING, op_search, n, "search LIMIT OFFSET QUERY"},
	};
	return control_new(n->base, n->cfg->control, cmds, sizeof(cmds) / sizeof(cmds[0]), err);
}
