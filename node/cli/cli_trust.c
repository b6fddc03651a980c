/* Loading the trust store from --trust-key files, shared by commands. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trust.h"

pith_trust_t *cli_trust_load(const cli_ctx_t *ctx, const char *cmd)
{
	pith_trust_t *t = pith_trust_new();
	if (!t) {
		cli_fail(cmd, "cannot initialise libsodium");
		return NULL;
	}
	const char *note = pith_trust_fixed_key_note(t);
	if (note && !getenv("PITH_ED25519"))
		fprintf(stderr, "pithctl %s: warning: signature self-test failed: %s; every "
			"signature is verified by libsodium (docs/signatures.md)\n", cmd, note);
	for (size_t i = 0; i < ctx->ntrust_keys; i++) {
		pith_buf_t b = PITH_BUF_INIT;
		pith_key_t k;
		pith_err_t err = {0};
		if (cli_read_file(ctx->trust_keys[i], 1 << 16, &b)) {
			pith_buf_release(&b);
			pith_trust_free(t);
			return NULL;
		}
		int rc = pith_keyfile_parse(b.data, b.len, &k, NULL, NULL, &err);
		pith_buf_release(&b);
		if (!rc)
			rc = pith_trust_key_check(&k, &err);
		if (rc || pith_trust_add(t, &k)) {
			cli_fail(cmd, "--trust-key %s: %s", ctx->trust_keys[i], err.msg);
			pith_trust_free(t);
			return NULL;
		}
	}
	return t;
}
