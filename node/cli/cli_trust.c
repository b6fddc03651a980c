/* Loading the trust store from --trust-key files, shared by commands. */
#include "cli.h"

#include <string.h>

#include "trust.h"

pith_trust_t *cli_trust_load(const cli_ctx_t *ctx, const char *cmd)
{
	pith_trust_t *t = pith_trust_new();
	if (!t) {
		cli_fail(cmd, "cannot initialise libsodium");
		return NULL;
	}
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
		if (rc || pith_trust_add(t, &k)) {
			cli_fail(cmd, "--trust-key %s: %s", ctx->trust_keys[i], err.msg);
			pith_trust_free(t);
			return NULL;
		}
	}
	return t;
}
