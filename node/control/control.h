/* The control socket: a Unix domain socket (mode 0600, this user only)
 * taking one command per line and answering each with one line of JSON,
 * in request order. It knows no command itself: the node gives it a table
 * (name, what argument it takes, the function), the way pithctl's
 * commands are a table. The commands' code lives beside the module they
 * operate (node_ctl.c: status, peers, the store and the ingest pipeline;
 * addrbook_ctl.c: connect, ban, unban; sync_ctl.c: sync).
 *
 * A command answers at once (CTL_DONE, the reply in call->reply) or later
 * (CTL_LATER): then control_reply(serial) or, for an ingest job submitted
 * with job->ctl = serial, control_job_done answers it. Loop thread only. */
#ifndef PITH_NODE_CONTROL_H
#define PITH_NODE_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ingest.h"

struct event_base;
typedef struct control control_t;

enum { CTL_DONE = 0, CTL_LATER = 1 };

typedef enum ctl_arg {
	CTL_ARG_IGNORED = 0, /* an argument, if any, is ignored */
	CTL_ARG_NONE,        /* takes none */
	CTL_ARG_BYTES,       /* takes one (any bytes, arglen of them) */
	CTL_ARG_STRING,      /* takes one without NUL bytes (a C string) */
} ctl_arg_t;

/* One request as a command sees it. */
typedef struct ctl_call {
	uint64_t serial;     /* for a later answer */
	const char *arg;     /* NUL-terminated; NULL if none */
	size_t arglen;
	pith_buf_t *reply;   /* one JSON object, for CTL_DONE */
} ctl_call_t;

typedef int (*ctl_fn)(void *arg, ctl_call_t *call);

typedef struct ctl_cmd {
	const char *name;
	ctl_arg_t takes;
	ctl_fn fn;
	void *arg;           /* fn's first argument: the module it operates */
	const char *usage;   /* "state ID", for the unknown-command answer */
} ctl_cmd_t;

/* Listens on path for the commands cmds (n of them, copied), making its
 * directory (the last component, owner-only) when it is missing and this
 * user may. A command never answers through control_reply before it
 * returned CTL_LATER. NULL on failure, err saying why in one line (and
 * which flag to use when the directory cannot be made). */
control_t *control_new(struct event_base *base, const char *path, const ctl_cmd_t *cmds,
		       size_t n, pith_err_t *err);
void control_free_(control_t *c);
#define control_free(c) do { control_free_(c); (c) = NULL; } while (0)

/* Answers request serial (waiting since its command said CTL_LATER) with
 * one JSON line; nothing if it is gone. */
void control_reply(control_t *c, uint64_t serial, const char *json, size_t len);
/* A job submitted for request job->ctl is done: answers it with the
 * outcome ({"ok":true,"event_id":...,"outcome":"stored"} once durable). */
void control_job_done(control_t *c, ingest_job_t *job);
/* Appends {"ok":false,"error":WHAT} to b; returns CTL_DONE. */
int control_fail(pith_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends ,"key":"val" (val escaped) to b. */
void control_key_str(pith_buf_t *b, const char *key, const char *val, size_t len);

#endif
