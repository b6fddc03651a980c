/* pithctl keygen OUT: a new Ed25519 key file, owner-only. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "trust.h"

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *out = NULL, *key_id = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--key-id") && i + 1 < argc)
			key_id = argv[++i];
		else if (strcmp(argv[i], "--json"))
			out = argv[i];
	}
	if (!out)
		return cli_fail("keygen", "missing OUT file");
	if (key_id && (!*key_id || strlen(key_id) >= PITH_KEY_ID_MAX))
		return cli_fail("keygen", "--key-id must be 1 to %d bytes", PITH_KEY_ID_MAX - 1);
	pith_buf_t b = PITH_BUF_INIT;
	pith_key_t k;
	uint8_t sk[64];
	if (pith_keyfile_generate(key_id, &b, &k, sk)) {
		pith_buf_release(&b);
		return cli_fail("keygen", "cannot generate a key");
	}
	int fd = open(out, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		sodium_memzero(b.data, b.len);
		sodium_memzero(sk, sizeof(sk));
		pith_buf_release(&b);
		return cli_fail("keygen", "cannot create %s: %s", out, strerror(errno));
	}
	int rc = write(fd, b.data, b.len) == (ssize_t)b.len && fsync(fd) == 0 ? 0 : 1;
	close(fd);
	sodium_memzero(b.data, b.len);
	pith_buf_release(&b);
	sodium_memzero(sk, sizeof(sk));
	if (rc)
		return cli_fail("keygen", "cannot write %s: %s", out, strerror(errno));
	char pk[65];
	pith_hex_encode(k.pk, 32, pk);
	if (ctx->json)
		printf("{\"key_id\":\"%s\",\"public_key_hex\":\"%s\",\"fingerprint\":\"%s\"}\n",
		       k.key_id, pk, k.fp);
	else
		printf("%s\n%s\n", pk, k.fp);
	return 0;
}

const cli_cmd_t cli_cmd_keygen = {
	"keygen", "make an Ed25519 signing key file",
	"usage: pithctl keygen [--key-id ID] [--json] OUT\n\n"
	"Writes a new key file OUT (mode 0600, refuses to overwrite) and prints\n"
	"its public key (64 hex) and fingerprint (32 hex) on two lines. The file\n"
	"works with `--trust-key OUT` (public part) and `sign --key OUT`.\n"
	"The key id defaults to local-FINGERPRINT8.\n",
	run,
};
