/* pithctl canon: JSON on stdin (or FILE) to canonical bytes on stdout. */
#include "cli.h"
#include "json.h"

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *path = "-";
	for (int i = 1; i < argc; i++)
		if (argv[i][0] != '-' || argv[i][1] == 0)
			path = argv[i];
	pith_buf_t in = PITH_BUF_INIT, out = PITH_BUF_INIT;
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	int rc = 1;
	if (cli_read_file(path, CLI_MAX_INPUT, &in))
		goto done;
	if (json_parse(&doc, in.data, in.len, NULL, &err)) {
		cli_fail("canon", "%s: %s", path, err.msg);
		goto done;
	}
	if (json_canon_write(json_doc_root(doc), &out)) {
		cli_fail("canon", "%s: cannot write canonical form", path);
		goto done;
	}
	rc = fwrite(out.data, 1, out.len, stdout) == out.len ? 0 : 1;
done:
	json_doc_free(doc);
	pith_buf_release(&in);
	pith_buf_release(&out);
	return rc;
}

const cli_cmd_t cli_cmd_canon = {
	"canon", "write the canonical JSON of a document",
	"usage: pithctl canon [FILE|-]\n\n"
	"Reads one JSON document (stdin by default) and writes its canonical bytes:\n"
	"json.dumps(v, sort_keys=True, separators=(',',':'), ensure_ascii=False).\n"
	"Rejects duplicate keys, invalid UTF-8, lone surrogates, NaN/Infinity,\n"
	"overflowing numbers, trailing data, nesting over 128 and inputs over 64 MiB.\n",
	run,
};
