/* The control socket (control.h): the listener, its clients, the queue
 * of requests answered in order, and the dispatch through the node's
 * table of commands. */
#define _GNU_SOURCE 1 /* struct ucred (SO_PEERCRED) */
#include "control.h"

#include <errno.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "idmap.h"
#include "json.h"
#include "log.h"

#define CTL_LINE_MAX (64u << 20)  /* a bundle on one line may be large */
#define CTL_PENDING_MAX 4096      /* requests in flight per client */
/* Replies a client has not read: past CTL_OUT_HIGH its next requests are
 * not read (it waits in its own socket) until they drain below
 * CTL_OUT_LOW. A client that sends and never reads holds at most this
 * much of the node's memory, plus the replies of what is in flight. */
#define CTL_OUT_HIGH (8u << 20)
#define CTL_OUT_LOW (1u << 20)

typedef struct ctl_client ctl_client_t;

typedef struct ctl_req {
	uint64_t serial;
	ctl_client_t *client; /* NULL once the client went away */
	int done;
	pith_buf_t reply;
	struct ctl_req *next;
} ctl_req_t;

struct ctl_client {
	control_t *c;
	struct bufferevent *bev;
	ctl_req_t *head, *tail;
	size_t pending;
	pith_buf_t part; /* the line being read: what came before its newline */
	int read_off;
	int closing; /* a line over CTL_LINE_MAX: closed once the replies are out */
	ctl_client_t *prev, *next;
};

struct control {
	struct event_base *base;
	ctl_cmd_t *cmds;
	size_t ncmds;
	struct evconnlistener *listener;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	ctl_client_t *clients;
	idmap_t *reqs; /* serial -> ctl_req_t awaiting an ingest result */
	uint64_t next_serial;
};

static void req_free(ctl_req_t *r)
{
	pith_buf_release(&r->reply);
	free(r);
}

/* Writes the replies at the head of the queue that are ready. */
static void client_flush(ctl_client_t *cl)
{
	struct evbuffer *out = bufferevent_get_output(cl->bev);
	while (cl->head && cl->head->done) {
		ctl_req_t *r = cl->head;
		cl->head = r->next;
		if (!cl->head)
			cl->tail = NULL;
		evbuffer_add(out, r->reply.data, r->reply.len);
		evbuffer_add(out, "\n", 1);
		cl->pending--;
		req_free(r);
	}
	if (cl->read_off && cl->pending < CTL_PENDING_MAX / 2 &&
	    evbuffer_get_length(out) < CTL_OUT_HIGH) {
		cl->read_off = 0;
		bufferevent_enable(cl->bev, EV_READ);
	}
}

static ctl_req_t *req_new(ctl_client_t *cl)
{
	ctl_req_t *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->serial = ++cl->c->next_serial;
	r->client = cl;
	if (cl->tail)
		cl->tail->next = r;
	else
		cl->head = r;
	cl->tail = r;
	cl->pending++;
	return r;
}

static void reply_error(ctl_req_t *r, const char *what)
{
	pith_buf_reset(&r->reply);
	pith_buf_puts(&r->reply, "{\"ok\":false,\"error\":");
	json_write_string(&r->reply, what, strlen(what));
	pith_buf_puts(&r->reply, "}");
	r->done = 1;
}

static const ctl_cmd_t *cmd_find(const control_t *c, const char *name, size_t len)
{
	for (size_t i = 0; i < c->ncmds; i++)
		if (strlen(c->cmds[i].name) == len && !memcmp(c->cmds[i].name, name, len))
			return &c->cmds[i];
	return NULL;
}

/* Does the command take what the line gives? */
static int arg_fits(const ctl_cmd_t *cmd, const char *arg, size_t arglen)
{
	switch (cmd->takes) {
	case CTL_ARG_NONE: return arglen == 0;
	case CTL_ARG_BYTES: return arglen != 0;
	case CTL_ARG_STRING: return arglen != 0 && !memchr(arg, 0, arglen);
	default: return 1;
	}
}

static void reply_unknown(control_t *c, ctl_req_t *r)
{
	pith_buf_t u = PITH_BUF_INIT;
	pith_buf_puts(&u, "unknown command; try: ");
	for (size_t i = 0; i < c->ncmds; i++)
		pith_buf_printf(&u, "%s%s", i ? ", " : "", c->cmds[i].usage);
	pith_buf_append(&u, "", 1);
	reply_error(r, u.oom ? "unknown command" : (const char *)u.data);
	pith_buf_release(&u);
}

static void handle_line(ctl_client_t *cl, char *line, size_t len)
{
	control_t *c = cl->c;
	ctl_req_t *r = req_new(cl);
	if (!r) {
		log_error("control: out of memory");
		return;
	}
	if (len && line[len - 1] == '\r')
		line[--len] = 0;
	char *arg = memchr(line, ' ', len);
	size_t cmdlen = arg ? (size_t)(arg - line) : len;
	if (arg)
		arg++;
	size_t arglen = arg ? len - (size_t)(arg - line) : 0;
	const ctl_cmd_t *cmd = cmd_find(c, line, cmdlen);
	if (!cmd || !arg_fits(cmd, arg, arglen)) {
		reply_unknown(c, r);
		return;
	}
	uint8_t key[32];
	idmap_key_u64(r->serial, key);
	/* registered first: a command may answer through control_reply or
	 * control_job_done before it returns */
	if (idmap_put(c->reqs, key, r)) {
		reply_error(r, "out of memory");
		return;
	}
	ctl_call_t call = {r->serial, arglen ? arg : NULL, arglen, &r->reply};
	if (cmd->fn(cmd->arg, &call) == CTL_DONE) {
		idmap_del(c->reqs, key);
		r->done = 1;
	}
	if (r->reply.oom)
		reply_error(r, "out of memory");
}

int control_fail(pith_buf_t *b, const char *fmt, ...)
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
	return CTL_DONE;
}

void control_key_str(pith_buf_t *b, const char *key, const char *val, size_t len)
{
	pith_buf_printf(b, ",\"%s\":", key);
	json_write_string(b, val, len);
}

void control_job_done(control_t *c, ingest_job_t *job)
{
	uint8_t key[32];
	idmap_key_u64(job->ctl, key);
	ctl_req_t *r = idmap_del(c->reqs, key);
	if (!r)
		return;
	pith_buf_t *b = &r->reply;
	pith_buf_reset(b);
	if (job->rc) {
		pith_buf_puts(b, "{\"ok\":false,");
		pith_buf_printf(b, "\"reason\":\"%s\",\"error\":", job->reason ? job->reason : "error");
		json_write_string(b, job->msg, strlen(job->msg));
		pith_buf_puts(b, "}");
	} else if (job->kind == INGEST_EVENT) {
		char hex[65];
		pith_hex_encode(job->id, 32, hex);
		pith_buf_printf(b, "{\"ok\":true,\"event_id\":\"sha256:%s\",\"outcome\":\"%s\"}", hex,
				store_outcome_name(job->outcome));
	} else {
		pith_buf_printf(b, "{\"ok\":true,\"pith_number\":\"%s\",\"outcome\":\"%s\",\"events\":%zu}",
				job->subject,
				job->bundle_outcome == STORE_BUNDLE_NEWER ? "newer"
				: job->bundle_outcome == STORE_BUNDLE_SAME ? "same" : "older",
				job->n_event_ids);
	}
	r->done = 1;
	if (r->client)
		client_flush(r->client);
	else
		req_free(r);
}

void control_reply(control_t *c, uint64_t serial, const char *json, size_t len)
{
	uint8_t key[32];
	idmap_key_u64(serial, key);
	ctl_req_t *r = idmap_del(c->reqs, key);
	if (!r)
		return;
	pith_buf_reset(&r->reply);
	pith_buf_append(&r->reply, json, len);
	if (r->reply.oom)
		reply_error(r, "out of memory");
	r->done = 1;
	if (r->client)
		client_flush(r->client);
	else
		req_free(r);
}

/* ---- clients -------------------------------------------------------------------------- */

static void client_free(ctl_client_t *cl)
{
	control_t *c = cl->c;
	if (cl->prev)
		cl->prev->next = cl->next;
	else
		c->clients = cl->next;
	if (cl->next)
		cl->next->prev = cl->prev;
	for (ctl_req_t *r = cl->head, *nx; r; r = nx) {
		nx = r->next;
		if (r->done)
			req_free(r);
		else
			r->client = NULL; /* freed when its job comes back */
	}
	bufferevent_free(cl->bev);
	pith_buf_release(&cl->part);
	free(cl);
}

/* The next line of the input, NUL-terminated in cl->part (NULL: none
 * whole yet). Bytes before a newline move from the input to cl->part, so
 * each byte is searched once: a long line arriving in many reads costs
 * time linear in its length, not quadratic. */
static char *line_next(ctl_client_t *cl, struct evbuffer *in, size_t *len)
{
	struct evbuffer_ptr p = evbuffer_search(in, "\n", 1, NULL);
	size_t n = p.pos < 0 ? evbuffer_get_length(in) : (size_t)p.pos + 1;
	if (cl->part.len + n > CTL_LINE_MAX + 1 || pith_buf_reserve(&cl->part, n))
		return NULL; /* over the limit (the caller tells), or out of memory */
	evbuffer_remove(in, cl->part.data + cl->part.len, n);
	cl->part.len += n;
	if (p.pos < 0)
		return NULL;
	*len = --cl->part.len;
	cl->part.data[*len] = 0;
	return (char *)cl->part.data;
}

/* After a line was handled: a large buffer is not kept. */
static void line_done(ctl_client_t *cl)
{
	if (cl->part.cap > (1u << 20))
		pith_buf_release(&cl->part);
	else
		pith_buf_reset(&cl->part);
}

static void client_read(ctl_client_t *cl)
{
	struct evbuffer *in = bufferevent_get_input(cl->bev);
	char *line;
	size_t len;
	struct evbuffer *out = bufferevent_get_output(cl->bev);
	while (!cl->closing && cl->pending < CTL_PENDING_MAX &&
	       evbuffer_get_length(out) < CTL_OUT_HIGH && (line = line_next(cl, in, &len)) != NULL) {
		handle_line(cl, line, len);
		line_done(cl);
		client_flush(cl);
	}
	client_flush(cl);
	if (cl->closing)
		return;
	if (cl->pending >= CTL_PENDING_MAX || evbuffer_get_length(out) >= CTL_OUT_HIGH) {
		/* resumed by client_flush, or by the write callback as the
		 * replies drain (the write watermark is CTL_OUT_LOW) */
		cl->read_off = 1;
		bufferevent_disable(cl->bev, EV_READ);
	} else if (cl->part.len + evbuffer_get_length(in) > CTL_LINE_MAX) {
		/* the replies before it, then this error, then the connection closes */
		log_warn("control: a line longer than %u bytes; closing that client", CTL_LINE_MAX);
		ctl_req_t *r = req_new(cl);
		if (r)
			reply_error(r, "line too long: the control socket takes lines of at most "
				       "64 MiB; closing this connection");
		cl->closing = 1;
		cl->read_off = 0; /* nothing turns reading on again */
		bufferevent_disable(cl->bev, EV_READ);
		evbuffer_drain(in, evbuffer_get_length(in));
		pith_buf_release(&cl->part);
		client_flush(cl);
		if (!r || (!cl->head && !evbuffer_get_length(out)))
			client_free(cl);
	}
}

static void client_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	client_read(arg);
}

/* Output drained below CTL_OUT_LOW: read the requests that waited. */
static void client_write_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	ctl_client_t *cl = arg;
	if (cl->closing) {
		if (!cl->head && !evbuffer_get_length(bufferevent_get_output(cl->bev)))
			client_free(cl);
		return;
	}
	if (cl->read_off && cl->pending < CTL_PENDING_MAX / 2) {
		cl->read_off = 0;
		bufferevent_enable(cl->bev, EV_READ);
		client_read(cl);
	}
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		client_free(arg);
}

/* Only this user (and root) may use the socket: the file's mode says so,
 * and the kernel's word on who connected says so again, in case the mode
 * was loosened or is not enforced. */
static int peer_is_owner(int fd)
{
#ifdef SO_PEERCRED
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
	    (cr.uid == geteuid() || cr.uid == 0))
		return 1;
	static log_rl_t rl;
	log_rl(&rl, LOG_WARN, "control: refused a client of uid %d (pid %d): not the node's user",
	       len == sizeof(cr) ? (int)cr.uid : -1, len == sizeof(cr) ? (int)cr.pid : -1);
	return 0;
#else
	(void)fd;
	return 1;
#endif
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	(void)l;
	(void)sa;
	(void)len;
	control_t *c = arg;
	if (!peer_is_owner(fd)) {
		close(fd);
		return;
	}
	ctl_client_t *cl = calloc(1, sizeof(*cl));
	if (!cl) {
		close(fd);
		return;
	}
	cl->c = c;
	cl->bev = bufferevent_socket_new(c->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!cl->bev) {
		close(fd);
		free(cl);
		return;
	}
	bufferevent_setcb(cl->bev, client_read_cb, client_write_cb, client_event_cb, cl);
	bufferevent_setwatermark(cl->bev, EV_WRITE, CTL_OUT_LOW, 0);
	bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
	cl->next = c->clients;
	if (c->clients)
		c->clients->prev = cl;
	c->clients = cl;
}

/* ---- the listener ------------------------------------------------------------------------ */

/* A stale socket file from a crashed run is removed; a live one (another
 * node answers on it) is an error. */
static int path_take(const char *path, pith_err_t *err)
{
	struct stat st;
	if (lstat(path, &st))
		return errno == ENOENT ? 0
			: pith_err_set(err, PITH_EIO, "control: %s: %s", path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return pith_err_set(err, PITH_EIO, "control: %s exists and is not a socket", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	int live = fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
	if (fd >= 0)
		close(fd);
	if (live)
		return pith_err_set(err, PITH_EIO, "control: another process answers on %s", path);
	if (unlink(path))
		return pith_err_set(err, PITH_EIO, "control: cannot remove the stale socket %s: %s",
				    path, strerror(errno));
	return 0;
}

/* A missing directory of the socket is made (owner-only, as systemd's
 * RuntimeDirectory= with the unit's mode) when its parent lets this user:
 * /run/pithd without systemd, as root, or a directory of the user's own.
 * Only the last component: a mistyped path is not built whole. */
static int dir_make(const char *dir, pith_err_t *err)
{
	if (!mkdir(dir, 0700)) {
		log_info("control: created the socket's directory %s (mode 0700)", dir);
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	return pith_err_set(err, PITH_EIO,
			    "control: cannot create the socket's directory %s (%s): create it, "
			    "or give --control PATH (default DATA/pithd.sock)", dir, strerror(errno));
}

/* Whoever can write to the socket's directory can put another socket in
 * its place, and on some systems the socket file's own mode is not
 * enforced: the directory must belong to this user (or root) and be
 * writable by nobody else. */
static int dir_check(const char *path, pith_err_t *err)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	struct stat st;
	int rc;
	if (stat(dir, &st) && errno == ENOENT && (rc = dir_make(dir, err)))
		return rc;
	if (stat(dir, &st))
		return pith_err_set(err, PITH_EIO, "control: directory %s of the socket: %s", dir,
				    strerror(errno));
	if (!S_ISDIR(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0) ||
	    (st.st_mode & 022))
		return pith_err_set(err, PITH_EIO,
				    "control: the socket's directory %s (mode %04o, owner uid %u) must "
				    "be owned by this user or root and writable by nobody else",
				    dir, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
	return 0;
}

control_t *control_new(struct event_base *base, const char *path, const ctl_cmd_t *cmds,
		       size_t n, pith_err_t *err)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sun.sun_path)) {
		pith_err_set(err, PITH_EINVAL, "control: path %s is too long for a Unix socket", path);
		return NULL;
	}
	if (dir_check(path, err) || path_take(path, err))
		return NULL;
	control_t *c = calloc(1, sizeof(*c));
	if (!c) {
		pith_err_set(err, PITH_ENOMEM, "control: out of memory");
		return NULL;
	}
	c->base = base;
	c->cmds = calloc(n ? n : 1, sizeof(*cmds));
	if (!c->cmds) {
		free(c);
		pith_err_set(err, PITH_ENOMEM, "control: out of memory");
		return NULL;
	}
	memcpy(c->cmds, cmds, n * sizeof(*cmds));
	c->ncmds = n;
	snprintf(c->path, sizeof(c->path), "%s", path);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	c->reqs = idmap_new();
	/* owner-only from the moment it exists */
	mode_t old = umask(0177);
	c->listener = evconnlistener_new_bind(base, accept_cb, c,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 16,
					      (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	struct stat st;
	if (!c->listener || !c->reqs || chmod(path, 0600) || lstat(path, &st)) {
		pith_err_set(err, PITH_EIO, "control: cannot listen on %s: %s", path, strerror(errno));
		control_free(c);
		return NULL;
	}
	if (!S_ISSOCK(st.st_mode) || (st.st_mode & 077) || st.st_uid != geteuid()) {
		pith_err_set(err, PITH_EIO, "control: %s is not an owner-only socket of this user after bind",
			     path);
		control_free(c);
		return NULL;
	}
	return c;
}

static int free_req(void *arg, const uint8_t id[32], void *val)
{
	(void)arg;
	(void)id;
	ctl_req_t *r = val;
	if (r->client == NULL)
		req_free(r); /* clients free their own below */
	return 1;
}

void control_free_(control_t *c)
{
	if (!c)
		return;
	if (c->listener) {
		evconnlistener_free(c->listener);
		unlink(c->path);
	}
	while (c->clients)
		client_free(c->clients);
	if (c->reqs) {
		idmap_each(c->reqs, free_req, NULL);
		idmap_free(c->reqs);
	}
	free(c->cmds);
	free(c);
}
