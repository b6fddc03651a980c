/* pithctl pith-number: canonical record in, pith number and hash out. */
#include "cli.h"

#include <string.h>

#include "ids.h"
#include "json.h"

static int one(const json_value_t *v, int json, cli_list_t *list, const char *where)
{
	/* accept a bare canonical record or anything that carries one */
	const json_value_t *rec = json_get_type(v, "canonical_record", JSON_OBJECT);
	if (!rec)
		rec = v;
	uint8_t d[32];
	char hex[65], pith[PITH_NUMBER_LEN + 1];
	pith_err_t err = {0};
	if (pith_record_identify(rec, d, hex, pith, &err))
		return cli_fail("pith-number", "%s: %s", where, err.msg);
	cli_list_item(list);
	if (json)
		printf("{\"canonical_sha256\":\"%s\",\"pith_number\":\"%s\",\"short_pith_number\":\"pith:%.8s\"}%s",
		       hex, pith, pith + 10, list->json ? "" : "\n");
	else
		printf("%s %s\n", pith, hex);
	return 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *path = "-";
	int lines = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--lines"))
			lines = 1;
		else if (strcmp(argv[i], "--json"))
			path = argv[i];
	}
	pith_buf_t in = PITH_BUF_INIT;
	int rc = 1;
	if (cli_read_file(path, CLI_MAX_INPUT, &in))
		goto done;
	rc = 0;
	/* --lines --json: one array, whatever the number of lines */
	cli_list_t list = {lines && ctx->json, 0};
	size_t start = 0, lineno = 0;
	while (start < in.len) {
		size_t end = in.len;
		if (lines) {
			uint8_t *nl = memchr(in.data + start, '\n', in.len - start);
			end = nl ? (size_t)(nl - in.data) : in.len;
		}
		lineno++;
		char where[300];
		snprintf(where, sizeof(where), lines ? "%s:%zu" : "%s", path, lineno);
		json_doc_t *doc = NULL;
		pith_err_t err = {0};
		if (end > start) {
			if (json_parse(&doc, in.data + start, end - start, NULL, &err))
				rc |= cli_fail("pith-number", "%s: %s", where, err.msg);
			else
				rc |= one(json_doc_root(doc), ctx->json, &list, where);
		}
		json_doc_free(doc);
		start = end + 1;
	}
	cli_list_end(&list);
done:
	pith_buf_release(&in);
	return rc;
}

const cli_cmd_t cli_cmd_pith_number = {
	"pith-number", "pith number and canonical hash of a canonical record",
	"usage: pithctl pith-number [--lines] [--json] [FILE|-]\n\n"
	"Reads a canonical record (or any object with a canonical_record member)\n"
	"and prints `PITH_NUMBER CANONICAL_SHA256`. --lines reads JSON Lines.\n"
	"--json: an object (pith_number, short_pith_number, canonical_sha256);\n"
	"with --lines an array of them, one a line ([] for no line).\n",
	run,
};
