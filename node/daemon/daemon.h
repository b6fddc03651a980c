/* pithd: the replica node. Build it from a finished config, run it until
 * SIGTERM/SIGINT (SIGHUP reloads: node_config.c), free it. */
#ifndef PITH_NODE_DAEMON_H
#define PITH_NODE_DAEMON_H

#include "config.h"
#include "err.h"

typedef struct node node_t;

/* Opens the data directory (store, node key), binds the listener and the
 * control socket, and starts the validation threads. cfg is borrowed and
 * must outlive the node. */
int node_new(node_config_t *cfg, node_t **out, pith_err_t *err);

/* How the node reads its config again on SIGHUP (docs/operations.md):
 * fills out from scratch (defaults, the file, the flags over it, finished)
 * as at start, or returns negative with err saying why. */
typedef int (*node_config_read_fn)(void *arg, node_config_t *out, pith_err_t *err);
/* Sets it (pithd: its command line again); without one SIGHUP only
 * reopens the log file. */
void node_set_config_reader(node_t *n, node_config_read_fn fn, void *arg);

/* Runs the event loop until a signal stops the node. 0, or negative if the
 * loop failed. */
int node_run(node_t *n);

/* Applies who this mirror is, from the node's config (mirror_name,
 * mirror_operator, mirror_contact; an empty name means "pithd" and the
 * first 16 hex digits of the node id): the header and title of every
 * page the HTTP views serve, /pith-mirrors.json, and the static site
 * pithd keeps (a run that renders every page again starts at once).
 * node_new applies them at start; a reload calls this after n's config
 * changed (loop thread; the values must have passed config_set's
 * checks). Harmless when neither is on. */
void node_apply_mirror_identity(node_t *n);

/* Shuts down in order: peers told, validated events written (durable),
 * threads joined, store closed. NULL-tolerant. */
void node_free_(node_t *n);
#define node_free(x) do { node_free_(x); (x) = NULL; } while (0)

#endif
