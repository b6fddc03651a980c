/* pithctl verify: check a bundle, an event or a record view. */
#include "cli.h"

#include <string.h>

#include "bundle.h"
#include "json.h"
#include "trust.h"

static void print_report(const pith_report_t *rep, int json, int ok, const char *kind)
{
	if (json) {
		printf("{\"ok\":%s,\"kind\":\"%s\",\"checks\":[", ok ? "true" : "false", kind);
		for (size_t i = 0; i < rep->n; i++) {
			pith_buf_t b = PITH_BUF_INIT;
			json_write_string(&b, rep->checks[i].name, strlen(rep->checks[i].name));
			pith_buf_puts(&b, ",\"value\":");
			json_write_string(&b, rep->checks[i].value, strlen(rep->checks[i].value));
			printf("%s{\"name\":%.*s,\"ok\":%s}", i ? "," : "", (int)b.len, b.data,
			       rep->checks[i].ok ? "true" : "false");
			pith_buf_release(&b);
		}
		printf("]}\n");
		return;
	}
	for (size_t i = 0; i < rep->n; i++)
		printf("%-4s %-28s %s\n", rep->checks[i].ok ? "ok" : "FAIL", rep->checks[i].name,
		       rep->checks[i].value);
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *path = NULL;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json"))
			path = argv[i];
	if (!path)
		return cli_fail("verify", "missing FILE (or - for stdin)");
	pith_buf_t in = PITH_BUF_INIT;
	json_doc_t *doc = NULL;
	pith_trust_t *trust = NULL;
	pith_report_t rep = {0};
	pith_err_t err = {0};
	int rc = 1;
	if (cli_read_file(path, CLI_MAX_INPUT, &in))
		goto done;
	if (json_parse(&doc, in.data, in.len, NULL, &err)) {
		cli_fail("verify", "%s: %s", path, err.msg);
		goto done;
	}
	if (!(trust = cli_trust_load(ctx, "verify")))
		goto done;
	const json_value_t *root = json_doc_root(doc);
	const char *kind;
	switch (pith_doc_kind(root)) {
	case PITH_DOC_BUNDLE:
		kind = "bundle";
		pith_bundle_verify(root, trust, &rep);
		break;
	case PITH_DOC_EVENT:
		kind = "event";
		pith_event_verify_report(root, trust, &rep);
		break;
	case PITH_DOC_RECORD:
		kind = "record";
		pith_record_verify(root, trust, &rep);
		break;
	case PITH_DOC_RECEIPT: {
		kind = "receipt";
		const char *h = json_get_str(root, "canonical_sha256");
		int r = pith_receipt_verify(root, h ? h : "", trust, &err);
		pith_report_add(&rep, "receipt", r == 0, "%s", r ? err.msg : "Ed25519 verifies");
		break;
	}
	default:
		cli_fail("verify", "%s: neither a bundle, an event nor a record view", path);
		goto done;
	}
	print_report(&rep, ctx->json, rep.failed == 0, kind);
	if (rep.failed) {
		for (size_t i = 0; i < rep.n; i++)
			if (!rep.checks[i].ok) {
				cli_fail("verify", "%s: %s check failed: %s", path,
					 rep.checks[i].name, rep.checks[i].value);
				break;
			}
	} else {
		rc = 0;
	}
done:
	pith_report_release(&rep);
	pith_trust_free(trust);
	json_doc_free(doc);
	pith_buf_release(&in);
	return rc;
}

const cli_cmd_t cli_cmd_verify = {
	"verify", "verify a bundle, an event, a record view or a receipt",
	"usage: pithctl [--trust-key FILE]... verify [--json] FILE|-\n\n"
	"Recomputes every hash, identifier and signature of a bundle (including\n"
	"its state_sha256 by the deterministic merge), a single event, or a record\n"
	"view, printing one line per check with the recomputed value. Exits 0 only\n"
	"when every check holds; otherwise names the first failing check on stderr.\n",
	run,
};
