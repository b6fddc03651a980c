/* The control socket's `sync PEER` (sync.h, sync_control_start): a
 * session with a connected peer named by node id or address, or with one
 * dialled for it; answered when the session ends. */
#include "sync_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "control.h"
#include "log.h"

static void peer_listen_str(const peer_t *p, char out[static 64])
{
	/* the far end of an outbound connection is its listen address; an
	 * inbound peer listens on the port its HELLO gave */
	if (p->outbound || !p->listen_port) {
		snprintf(out, 64, "%s", p->addr);
		return;
	}
	struct sockaddr_storage ss = p->sa;
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons(p->listen_port);
	else if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(p->listen_port);
	addr_format((const struct sockaddr *)&ss, out);
}

static int is_hex_prefix(const char *s)
{
	size_t n = strlen(s);
	if (n < 8 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* Attaches a `sync` request waiting for p's connection, if any. */
void sync_pending_attach(peer_t *p)
{
	sync_t *sy = p->sync->sy;
	char a[64];
	peer_listen_str(p, a);
	for (size_t i = 0; i < sy->npend; i++) {
		if (strcmp(sy->pend[i].addr, a) || p->sync->ctl)
			continue;
		p->sync->ctl = sy->pend[i].serial;
		sy->pend[i] = sy->pend[--sy->npend];
		return;
	}
}

/* Runs a session for request serial with a ready peer. */
static int control_on_peer(peer_t *p, uint64_t serial, pith_err_t *err)
{
	sync_peer_t *sp = p->sync;
	if (!sp || !(p->features & WIRE_FEAT_SYNC))
		return pith_err_set(err, PITH_EINVAL, "peer %s does not speak reconciliation", p->addr);
	if (!sp->s) {
		sp->ctl = serial;
		sync_session_start(p, SYNC_EVENTS);
		return 0;
	}
	if (sp->initiator && !sp->ctl && sp->kind == SYNC_EVENTS) {
		sp->ctl = serial; /* report the session that runs */
		return 0;
	}
	if (sp->ctl_next)
		return pith_err_set(err, PITH_EEXIST, "a sync with peer %s is already queued", p->addr);
	sp->ctl_next = serial;
	return 0;
}

/* `sync` with the peer at address ss (a HOST:PORT resolved): a session
 * with the connected peer that listens there, or a dial and a wait. */
static int start_at(sync_t *sy, const struct sockaddr_storage *ss, socklen_t slen, uint64_t serial,
		    pith_err_t *err)
{
	char a[64];
	int rc;
	addr_format((const struct sockaddr *)ss, a);
	for (peer_t *p = net_peers(sy->d.net); p; p = p->next) {
		char pa[64];
		if (p->state != PEER_READY)
			continue;
		peer_listen_str(p, pa);
		if (!strcmp(pa, a))
			return control_on_peer(p, serial, err);
	}
	/* not connected: dial it (unless a dial is on its way) and wait */
	if (sy->npend == SYNC_PENDING_MAX)
		return pith_err_set(err, PITH_ETOOBIG, "%d sync requests already wait for connections",
				    SYNC_PENDING_MAX);
	addr_entry_t *e = addrbook_add(sy->d.book, (const struct sockaddr *)ss, slen, ADDR_PEX);
	if (!e)
		return pith_err_set(err, PITH_EINVAL, "%s is not an address this node dials", a);
	if (e->self)
		return pith_err_set(err, PITH_EINVAL, "%s is this node", a);
	e->next_attempt_us = 0;
	if (!e->peer_serial && (rc = addrbook_dial(sy->d.book, e)))
		return pith_err_set(err, rc, "cannot dial %s", a);
	pending_ctl_t *pc = &sy->pend[sy->npend++];
	pc->serial = serial;
	snprintf(pc->addr, sizeof(pc->addr), "%s", a);
	pc->deadline_us = node_now_us() + SYNC_CONNECT_US;
	return 0;
}

/* A name looked up for `sync HOST:PORT` (off the loop): go on, or fail. */
static void on_resolved(void *arg, const resolve_addr_t *addr, const pith_err_t *rerr)
{
	sync_lookup_t *lk = arg;
	sync_t *sy = lk->sy;
	uint64_t serial = lk->serial;
	pith_err_t err = {0};
	lk->serial = 0; /* the slot is free again */
	lk->req = NULL;
	if (!addr)
		sync_answer_fail(sy, serial, rerr->msg);
	else if (start_at(sy, &addr->ss, addr->len, serial, &err))
		sync_answer_fail(sy, serial, err.msg);
}

int sync_control_start(sync_t *sy, const char *arg, uint64_t serial, pith_err_t *err)
{
	if (!sy->enabled)
		return pith_err_set(err, PITH_EINVAL, "reconciliation is off (max_frame too small)");
	if (sy->set_state == SYNC_SET_FAILED)
		return pith_err_set(err, PITH_EIO, "reconciliation is off: the set did not load (%s)",
				    sy->lerr.msg);
	if (sy->set_state == SYNC_SET_LOADING) {
		/* run once the sets are loaded (sync.c, load_applied) */
		for (size_t i = 0; i < SYNC_DEFERRED_MAX; i++) {
			sync_deferred_t *dq = &sy->deferred[i];
			if (dq->serial)
				continue;
			if (strlen(arg) >= sizeof(dq->peer))
				return pith_err_set(err, PITH_EINVAL, "peer name too long");
			dq->serial = serial;
			snprintf(dq->peer, sizeof(dq->peer), "%s", arg);
			return 0;
		}
		return pith_err_set(err, PITH_ETOOBIG,
				    "the reconciliation set is loading; too many `sync` requests "
				    "waiting for it: try again shortly");
	}
	if (is_hex_prefix(arg)) {
		peer_t *found = NULL;
		size_t len = strlen(arg);
		for (peer_t *p = net_peers(sy->d.net); p; p = p->next) {
			char id[65];
			if (p->state != PEER_READY)
				continue;
			pith_hex_encode(p->pk, 32, id);
			if (strncmp(id, arg, len))
				continue;
			if (found)
				return pith_err_set(err, PITH_EINVAL, "node id prefix %s is ambiguous", arg);
			found = p;
		}
		if (!found)
			return pith_err_set(err, PITH_ENOTFOUND, "no connected peer has node id %s", arg);
		return control_on_peer(found, serial, err);
	}
	char host[256];
	uint16_t port;
	if (config_split_hostport(arg, host, &port, 0))
		return pith_err_set(err, PITH_EINVAL, "'%s' is neither a node id nor HOST:PORT", arg);
	sync_lookup_t *lk = NULL;
	for (size_t i = 0; i < SYNC_LOOKUPS_MAX && !lk; i++)
		if (!sy->lookups[i].serial)
			lk = &sy->lookups[i];
	if (!lk)
		return pith_err_set(err, PITH_ETOOBIG, "%d sync requests already wait for names",
				    SYNC_LOOKUPS_MAX);
	resolve_addr_t now;
	if (!sy->d.resolver) { /* numeric only */
		if (resolve_numeric(arg, &now))
			return pith_err_set(err, PITH_EINVAL, "cannot resolve %s: names are not "
					    "looked up here", host);
		return start_at(sy, &now.ss, now.len, serial, err);
	}
	lk->sy = sy;
	int rc = resolve_hostport(sy->d.resolver, arg, &now, on_resolved, lk, &lk->req, err);
	if (rc == RESOLVE_DONE)
		return start_at(sy, &now.ss, now.len, serial, err);
	if (rc == 0)
		lk->serial = serial; /* answered by on_resolved */
	return rc < 0 ? rc : 0;
}

void sync_lookups_cancel(sync_t *sy)
{
	for (size_t i = 0; i < SYNC_LOOKUPS_MAX; i++)
		if (sy->lookups[i].serial) {
			resolve_cancel(sy->lookups[i].req);
			sy->lookups[i].serial = 0;
		}
}

void sync_pending_tick(sync_t *sy, int64_t now)
{
	for (size_t i = 0; i < sy->npend;) {
		if (now < sy->pend[i].deadline_us) {
			i++;
			continue;
		}
		char what[128];
		snprintf(what, sizeof(what), "no connection to %s within %d s", sy->pend[i].addr,
			 SYNC_CONNECT_US / 1000000);
		sync_answer_fail(sy, sy->pend[i].serial, what);
		sy->pend[i] = sy->pend[--sy->npend];
	}
}

int sync_ctl_sync(void *arg, ctl_call_t *call)
{
	pith_err_t err = {0};
	if (sync_control_start(arg, call->arg, call->serial, &err))
		return control_fail(call->reply, "%s", err.msg);
	return CTL_LATER;
}
