/* pithctl: the command-line tool. Global options, then a subcommand. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "hclient.h"
#include "prio.h"
#include "version.h"

extern const cli_cmd_t cli_cmd_canon;
extern const cli_cmd_t cli_cmd_verify;
extern const cli_cmd_t cli_cmd_pith_number;
extern const cli_cmd_t cli_cmd_keygen;
extern const cli_cmd_t cli_cmd_sign;
extern const cli_cmd_t cli_cmd_import;
extern const cli_cmd_t cli_cmd_pull;
extern const cli_cmd_t cli_cmd_replicate;
extern const cli_cmd_t cli_cmd_audit;
extern const cli_cmd_t cli_cmd_export;
extern const cli_cmd_t cli_cmd_state;
extern const cli_cmd_t cli_cmd_event;
extern const cli_cmd_t cli_cmd_records;
extern const cli_cmd_t cli_cmd_show;
extern const cli_cmd_t cli_cmd_search;
extern const cli_cmd_t cli_cmd_resolve;
extern const cli_cmd_t cli_cmd_check;
extern const cli_cmd_t cli_cmd_sync;
extern const cli_cmd_t cli_cmd_status;
extern const cli_cmd_t cli_cmd_peers;
extern const cli_cmd_t cli_cmd_connect;
extern const cli_cmd_t cli_cmd_ban;
extern const cli_cmd_t cli_cmd_unban;
extern const cli_cmd_t cli_cmd_backup;
extern const cli_cmd_t cli_cmd_follow;
extern const cli_cmd_t cli_cmd_conformance;

static const cli_cmd_t *const commands[] = {
	&cli_cmd_verify,
	&cli_cmd_canon,
	&cli_cmd_pith_number,
	&cli_cmd_keygen,
	&cli_cmd_sign,
	&cli_cmd_import,
	&cli_cmd_pull,
	&cli_cmd_replicate,
	&cli_cmd_audit,
	&cli_cmd_export,
	&cli_cmd_state,
	&cli_cmd_event,
	&cli_cmd_records,
	&cli_cmd_show,
	&cli_cmd_search,
	&cli_cmd_resolve,
	&cli_cmd_check,
	&cli_cmd_sync,
	&cli_cmd_status,
	&cli_cmd_peers,
	&cli_cmd_connect,
	&cli_cmd_ban,
	&cli_cmd_unban,
	&cli_cmd_backup,
	&cli_cmd_follow,
	&cli_cmd_conformance,
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

int cli_fail(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "pithctl %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int cli_opt_long(const char *cmd, const char *opt, const char *text, long lo, long hi,
		 const char *what, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (*end || end == text || errno || v < lo || v > hi)
		return cli_fail(cmd, "%s %s: not a number of %s from %ld to %ld", opt, text, what, lo,
				hi);
	*out = v;
	return 0;
}

int cli_opt_origin(const char *cmd, const char *text, const char **origins, size_t *n)
{
	if (!hc_origin_is_valid(text))
		return cli_fail(cmd, "--upstream-origin %s: not an origin: http:// or https://, a host "
				"and an optional port, no path (like https://cdn.example)", text);
	if (*n >= HC_ORIGINS_MAX)
		return cli_fail(cmd, "--upstream-origin: more than %d", HC_ORIGINS_MAX);
	origins[(*n)++] = text;
	return 0;
}

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_progress_due(double *last, int final)
{
	double t = cli_now();
	if (!final && t - *last < 0.2)
		return 0;
	*last = t;
	return 1;
}

void cli_reasons_count(cli_reasons_t *rs, const char *reason)
{
	for (size_t i = 0; i < rs->n; i++)
		if (!strcmp(rs->r[i].name, reason)) {
			rs->r[i].n++;
			return;
		}
	if (rs->n < CLI_REASONS_MAX) {
		rs->r[rs->n].name = reason;
		rs->r[rs->n++].n = 1;
	}
}

void cli_reasons_print(const cli_reasons_t *rs, int json)
{
	for (size_t i = 0; i < rs->n; i++)
		if (json)
			printf("%s\"%s\":%llu", i ? "," : "", rs->r[i].name, (unsigned long long)rs->r[i].n);
		else
			printf("  %-16s %llu\n", rs->r[i].name, (unsigned long long)rs->r[i].n);
}

void cli_list_item(cli_list_t *l)
{
	if (l->json)
		fputs(l->n ? ",\n" : "[\n", stdout);
	l->n++;
}

void cli_list_end(cli_list_t *l)
{
	if (l->json)
		fputs(l->n ? "\n]\n" : "[]\n", stdout);
}

int cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return 1;
	return 0;
}

int cli_read_file(const char *path, size_t max, pith_buf_t *out)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f) {
		fprintf(stderr, "pithctl: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	uint8_t chunk[65536];
	size_t n;
	int rc = 0;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (out->len + n > max) {
			fprintf(stderr, "pithctl: %s: larger than the limit of %zu bytes\n", path, max);
			rc = 1;
			break;
		}
		if (pith_buf_append(out, chunk, n)) {
			fprintf(stderr, "pithctl: %s: out of memory\n", path);
			rc = 1;
			break;
		}
	}
	if (!rc && ferror(f)) {
		fprintf(stderr, "pithctl: cannot read %s: %s\n", path, strerror(errno));
		rc = 1;
	}
	if (f != stdin)
		fclose(f);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pithctl [--store DIR | --node SOCKET] [--trust-key FILE]... [--json] CMD [ARGS]\n"
		   "       pithctl --version | --commands | --help\n\ncommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-12s %s\n", commands[i]->name, commands[i]->summary);
	fprintf(f, "\n`pithctl CMD --help` describes one command.\n");
}

int main(int argc, char **argv)
{
	cli_ctx_t ctx = {0};
	const char *trust[64];
	int i = 1;
	prio_raise_fd_limit(PRIO_FD_WANT); /* the store's table files (prio.h) */
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			version_print(stdout, "pithctl");
			return 0;
		} else if (!strcmp(a, "--commands")) {
			/* the command names, one a line: bash completion reads them */
			for (size_t c = 0; c < NCOMMANDS; c++)
				printf("%s\n", commands[c]->name);
			return 0;
		} else if (!strcmp(a, "--json")) {
			ctx.json = 1;
		} else if ((!strcmp(a, "--store") || !strcmp(a, "--node") ||
			    !strcmp(a, "--trust-key")) && i + 1 < argc) {
			const char *v = argv[++i];
			if (!strcmp(a, "--store"))
				ctx.store_dir = v;
			else if (!strcmp(a, "--node"))
				ctx.node_sock = v;
			else if (ctx.ntrust_keys < 64)
				trust[ctx.ntrust_keys++] = v;
			else
				return cli_fail("", "too many --trust-key options (64 at most)");
		} else {
			fprintf(stderr, "pithctl: unknown or incomplete option %s\n", a);
			usage(stderr);
			return 2;
		}
	}
	ctx.trust_keys = trust;
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	for (size_t c = 0; c < NCOMMANDS; c++) {
		if (strcmp(commands[c]->name, argv[i]))
			continue;
		int sub_argc = argc - i;
		char **sub_argv = argv + i;
		if (cli_wants_help(sub_argc, sub_argv)) {
			printf("%s", commands[c]->usage);
			return 0;
		}
		/* a per-command --json is accepted too */
		for (int k = 1; k < sub_argc; k++)
			if (!strcmp(sub_argv[k], "--json"))
				ctx.json = 1;
		return commands[c]->run(&ctx, sub_argc, sub_argv);
	}
	fprintf(stderr, "pithctl: unknown command '%s'\n", argv[i]);
	usage(stderr);
	return 2;
}
