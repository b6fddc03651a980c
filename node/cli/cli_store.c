/* Opening the store for the store commands. */
#include "cli_store.h"

#include <string.h>

/* A store upgrade at open: it can take minutes, so say so (stderr). */
static void store_notice(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "pithctl: %s\n", line);
}

int cli_store_open(const cli_ctx_t *ctx, const char *cmd, int writable, pith_trust_t **trust,
		   store_t **st)
{
	pith_err_t err = {0};
	*st = NULL;
	if (!ctx->store_dir) {
		*trust = NULL;
		return cli_fail(cmd, "needs --store DIR");
	}
	if (!(*trust = cli_trust_load(ctx, cmd)))
		return 1;
	/* the registry keys decide which receipts the merge accepts: every
	 * command on one store must be given the same --trust-key files */
	store_opts_t opts = {.create = writable, .read_only = !writable, .registry = *trust,
			     .notice = store_notice};
	if (store_open(ctx->store_dir, &opts, st, &err)) {
		pith_trust_free(*trust);
		return cli_fail(cmd, "%s", err.msg);
	}
	return 0;
}

int cli_store_resolve(store_t *st, const char *cmd, const char *id,
		      char out[static PITH_NUMBER_LEN + 1])
{
	pith_err_t err = {0};
	if (store_resolve(st, id, out, &err))
		return cli_fail(cmd, "%s", err.msg);
	return 0;
}

const char *cli_first_operand(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json"))
			return argv[i];
	return NULL;
}
