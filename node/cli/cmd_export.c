/* pithctl export: every stored event as JSON Lines. */
#include "cli_store.h"

#include <string.h>

static int write_event(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	(void)arg;
	(void)id;
	if (fwrite(bytes, 1, len, stdout) != len || putchar('\n') == EOF)
		return 1;
	return 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *subject = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--subject") && i + 1 < argc)
			subject = argv[++i];
		else
			return cli_fail("export", "unknown argument %s", argv[i]);
	}
	pith_trust_t *trust;
	store_t *st;
	pith_err_t err = {0};
	char pith[PITH_NUMBER_LEN + 1];
	if (cli_store_open(ctx, "export", 0, &trust, &st))
		return 1;
	int rc = subject ? cli_store_resolve(st, "export", subject, pith) : 0;
	if (!rc) {
		rc = store_events_each(st, subject ? pith : NULL, write_event, NULL, &err);
		if (rc < 0)
			rc = cli_fail("export", "%s", err.msg);
		else if (rc > 0 || fflush(stdout))
			rc = cli_fail("export", "cannot write to stdout");
	}
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_export = {
	"export", "write stored events as JSON Lines",
	"usage: pithctl --store DIR export [--subject ID]\n\n"
	"Writes every stored event (or those of one record) as canonical JSON,\n"
	"one per line, grouped by record and in (created_at, event_id) order\n"
	"within each: the order `pithctl import` ingests fastest.\n",
	run,
};
