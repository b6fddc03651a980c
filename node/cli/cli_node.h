/* Commands that talk to a running pithd through its control socket
 * (--node SOCKET): one command line out, one JSON line back. */
#ifndef PITH_CLI_NODE_H
#define PITH_CLI_NODE_H

#include <stdint.h>

#include "cli.h"
#include "json.h"

/* Connects to the control socket at path: 0 with *fd, or 1 after saying
 * why (pithctl CMD: ...). */
int cli_node_connect(const char *path, const char *cmd, int *fd);

/* Sends line (one command, no newline) to the node behind ctx->node_sock
 * and parses its answer. On success returns 0 with *doc owning the answer
 * and raw (may be NULL) holding its bytes. On failure prints one line,
 * "pithctl CMD: what (node SOCKET)", and returns 1: the socket cannot be
 * reached, the answer is not JSON, or it says {"ok":false,"error":...}. */
int cli_node_call(const cli_ctx_t *ctx, const char *cmd, const char *line, json_doc_t **doc,
		  pith_buf_t *raw);

/* Runs line on the node and prints the answer: as it came with --json
 * (one line), else through print (for people). 0, or 1 after saying why. */
int cli_node_show(const cli_ctx_t *ctx, const char *cmd, const char *line,
		  void (*print)(const json_value_t *answer));

/* The same for commands that need --node: fails with a usage line when it
 * is missing. */
int cli_node_require(const cli_ctx_t *ctx, const char *cmd);

/* A command with one operand (what names it in errors): sends "cmd
 * OPERAND" and shows the answer with cli_node_show. */
int cli_node_show1(const cli_ctx_t *ctx, int argc, char **argv, const char *cmd,
		   const char *what, void (*print)(const json_value_t *answer));

/* Sends "sockcmd ID" (a query of the node's store) for command cmd.
 * 0 with *doc owning the answer, or 1 after saying why. */
int cli_node_query(const cli_ctx_t *ctx, const char *cmd, const char *sockcmd, const char *id,
		   json_doc_t **doc);

/* An argument that goes into a command line must not break it: fails
 * (saying which) on a line break or another control character. */
int cli_node_arg_ok(const char *cmd, const char *what, const char *arg);

/* Typed members of an answer; 0, "" or NULL when absent. */
long long cli_json_int(const json_value_t *o, const char *key);
double cli_json_num(const json_value_t *o, const char *key);
const char *cli_json_str(const json_value_t *o, const char *key);

/* Writes a string member's bytes to stdout exactly (no newline). */
int cli_json_write_str(const json_value_t *o, const char *key, const char *cmd);

/* "1h 02m", "35s": a duration for people. */
void cli_duration(long long seconds, char out[static 32]);
/* "3.9 MB": a byte count for people. */
void cli_bytes(unsigned long long n, char out[static 32]);

#endif
