/* pithctl: a table of subcommands, one file each (node/cli/cmd_*.c). */
#ifndef PITH_CLI_H
#define PITH_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "buf.h"

typedef struct cli_ctx {
	const char *store_dir;   /* --store DIR, or NULL */
	const char *node_sock;   /* --node SOCKET, or NULL */
	const char **trust_keys; /* --trust-key FILE (repeatable) */
	size_t ntrust_keys;
	int json;                /* --json */
} cli_ctx_t;

typedef struct cli_cmd {
	const char *name;
	const char *summary;
	const char *usage; /* printed by `pithctl CMD --help` */
	int (*run)(cli_ctx_t *ctx, int argc, char **argv);
} cli_cmd_t;

/* Read all of FILE ("-" for stdin) into out, at most max bytes.
 * Prints an error naming the file and returns non-zero on failure. */
int cli_read_file(const char *path, size_t max, pith_buf_t *out);

/* Prints "pithctl CMD: message" to stderr; returns 1 (the exit status). */
int cli_fail(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* An option's whole-number value: text, a decimal from lo to hi, into
 * *out; else prints "pithctl CMD: OPT TEXT: not a number of WHAT from LO
 * to HI" and returns 1 (the exit status). */
int cli_opt_long(const char *cmd, const char *opt, const char *text, long lo, long hi,
		 const char *what, long *out);

/* --upstream-origin TEXT (pull, replicate): an origin (hc_origin_is_valid)
 * appended to origins[*n] (at most HC_ORIGINS_MAX); else prints why and
 * returns 1 (the exit status). */
int cli_opt_origin(const char *cmd, const char *text, const char **origins, size_t *n);

/* A list on stdout that stays one JSON document with --json: an array,
 * one element a line, "[]" when empty (docs: man/pithctl.1, "--json").
 * Without json both calls print nothing. */
typedef struct cli_list {
	int json;
	size_t n;
} cli_list_t;
/* Before each element (printed without a newline with json): "[" and a
 * newline for the first, "," and a newline for the others. */
void cli_list_item(cli_list_t *l);
/* After the last: "\n]\n", or "[]\n" when there was none. */
void cli_list_end(cli_list_t *l);

/* True when argv holds -h or --help. */
int cli_wants_help(int argc, char **argv);

struct pith_trust;
/* The registry key plus every --trust-key file; NULL after printing why. */
struct pith_trust *cli_trust_load(const cli_ctx_t *ctx, const char *cmd);

#define CLI_MAX_INPUT (256u << 20)

/* Seconds on the monotonic clock (elapsed times, progress). */
double cli_now(void);
/* Is a progress line due: the final one, or 0.2 s after the last (*last
 * is updated then)? */
int cli_progress_due(double *last, int final);

/* Rejections counted by reason (static strings), for a command's summary:
 * import's and pull's. */
#define CLI_REASONS_MAX 24
typedef struct cli_reasons {
	struct { const char *name; uint64_t n; } r[CLI_REASONS_MAX];
	size_t n;
} cli_reasons_t;

/* Counts one rejection for reason (kept by pointer: a static string);
 * reasons past CLI_REASONS_MAX distinct ones are not counted. */
void cli_reasons_count(cli_reasons_t *rs, const char *reason);
/* Prints the counts to stdout: "\"name\":n" members separated by commas
 * (json), or one "  name  n" line each. */
void cli_reasons_print(const cli_reasons_t *rs, int json);

#endif
