/* Commands that work on a store directory (--store DIR). */
#ifndef PITH_CLI_STORE_H
#define PITH_CLI_STORE_H

#include "cli.h"
#include "store.h"
#include "trust.h"

/* writable for an import that commits without the store's log
 * (store_opts_t.unlogged) */
#define CLI_STORE_UNLOGGED 2
/* or'ed into writable by an import, which reads no state or alias claim
 * while it writes them (store_opts_t.unsorted_write_only) */
#define CLI_STORE_IMPORT 4

/* Loads the trust store (registry key plus --trust-key files) into *trust
 * and opens --store DIR into *st (read-only unless writable). Prints one
 * line saying why and returns 1 on failure, with nothing left open. */
int cli_store_open(const cli_ctx_t *ctx, const char *cmd, int writable, pith_trust_t **trust,
		   store_t **st);

/* Whether another process (a running pithd) holds the store at dir
 * open for writing: its pid (-1 when the lock does not say), or 0 when
 * none does or it cannot be told (no LOCK file: no store there). */
long cli_store_holder(const char *dir);

/* The control socket of the pithd whose store is dir, as a hint for
 * --node: DATA/pithd.sock for DATA/store, else "DATA/pithd.sock". */
void cli_store_sock(const char *dir, char *out, size_t cap);

/* Resolves ID (any form) to a full pith number, printing why not. */
int cli_store_resolve(store_t *st, const char *cmd, const char *id,
		      char out[static PITH_NUMBER_LEN + 1]);

/* The first argument that is not an option (--json), or NULL. */
const char *cli_first_operand(int argc, char **argv);

#endif
