/* pithctl sign --key FILE: sign events from stdin. */
#include "cli.h"

#include <string.h>

#include <sodium.h>

#include "event.h"
#include "trust.h"

/* Signs one event and prints it (an element of list when it is JSON). */
static int sign_one(const uint8_t *p, size_t n, const pith_key_t *k, const uint8_t sk[64],
		    const char *where, cli_list_t *list)
{
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	json_limits_t lim = {PITH_EVENT_MAX_BYTES, PITH_EVENT_MAX_DEPTH, JSON_MAX_INT_DIGITS};
	if (json_parse(&doc, p, n, &lim, &err))
		return cli_fail("sign", "%s: %s", where, err.msg);
	json_value_t *ev = json_doc_root(doc);
	pith_buf_t out = PITH_BUF_INIT;
	int rc = 0;
	if (pith_event_sign(doc, ev, k, sk, &err))
		rc = cli_fail("sign", "%s: %s", where, err.msg);
	else if (json_canon_write(ev, &out) || (!list->json && pith_buf_putc(&out, '\n')))
		rc = cli_fail("sign", "%s: out of memory", where);
	else {
		cli_list_item(list);
		fwrite(out.data, 1, out.len, stdout);
	}
	pith_buf_release(&out);
	json_doc_free(doc);
	return rc;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *keyfile = NULL, *path = "-";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--key") && i + 1 < argc)
			keyfile = argv[++i];
		else if (strcmp(argv[i], "--json"))
			path = argv[i];
	}
	if (!keyfile)
		return cli_fail("sign", "missing --key FILE");
	pith_buf_t kb = PITH_BUF_INIT, in = PITH_BUF_INIT;
	pith_key_t k;
	uint8_t sk[64];
	int has = 0, rc = 1;
	pith_err_t err = {0};
	if (cli_read_file(keyfile, 1 << 16, &kb))
		goto done;
	if (pith_keyfile_parse(kb.data, kb.len, &k, sk, &has, &err)) {
		cli_fail("sign", "%s: %s", keyfile, err.msg);
		goto done;
	}
	if (!has) {
		cli_fail("sign", "%s: has no secret_seed_hex (a public key only)", keyfile);
		goto done;
	}
	if (cli_read_file(path, CLI_MAX_INPUT, &in))
		goto done;
	/* One JSON document, or JSON Lines: try the whole input first. */
	json_doc_t *whole = NULL;
	if (json_parse(&whole, in.data, in.len, NULL, NULL) == 0) {
		json_doc_free(whole);
		cli_list_t one = {0, 0};
		rc = sign_one(in.data, in.len, &k, sk, path, &one);
		goto done;
	}
	rc = 0;
	cli_list_t list = {ctx->json, 0}; /* --json: JSON Lines in, one array out */
	size_t start = 0, line = 0;
	while (start < in.len) {
		uint8_t *nl = memchr(in.data + start, '\n', in.len - start);
		size_t end = nl ? (size_t)(nl - in.data) : in.len;
		char where[300];
		line++;
		snprintf(where, sizeof(where), "%s:%zu", path, line);
		size_t s = start;
		while (s < end && (in.data[s] == ' ' || in.data[s] == '\t' || in.data[s] == '\r'))
			s++;
		if (s < end)
			rc |= sign_one(in.data + start, end - start, &k, sk, where, &list);
		start = end + 1;
	}
	cli_list_end(&list);
done:
	sodium_memzero(sk, sizeof(sk));
	if (kb.data)
		sodium_memzero(kb.data, kb.len);
	pith_buf_release(&kb);
	pith_buf_release(&in);
	return rc;
}

const cli_cmd_t cli_cmd_sign = {
	"sign", "sign events read from stdin with a key file",
	"usage: pithctl sign --key FILE [--json] [IN|-]\n\n"
	"Reads one JSON event, or JSON Lines of events, and prints each signed, in\n"
	"canonical JSON, one per line. Sets signer.key_id and\n"
	"signer.public_key_fingerprint from the key (signer_id and signer_type\n"
	"default to the key id and \"operator\"), fills missing created_at (now),\n"
	"supersedes ([]), prev_event (null), schema_version (\"1.0\") and payload\n"
	"({}), then content_sha256, event_id and the signature block.\n"
	"--json: JSON Lines in give one JSON array out ([] for none).\n",
	run,
};
