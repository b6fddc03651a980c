/* Version report shared by pithd and pithctl (version.h). */
#include "version.h"

#include <curl/curl.h>
#include <event2/event.h>
#include <msgpack.h>
#include <openssl/crypto.h>
#include <sodium.h>

#include "store.h"
#include "trust.h"
#include "version_git.h"

const char *version_project(void)
{
	return PITH_VERSION;
}

const char *version_commit(void)
{
	return PITH_GIT_COMMIT;
}

/* Which verifier checks signatures by trusted keys: the answer a trust
 * store gets when it is built (the self-test and PITH_ED25519). */
static void print_ed25519(FILE *f)
{
	pith_trust_t *t = pith_trust_new();
	const char *note = t ? pith_trust_fixed_key_note(t) : "libsodium could not be initialised";
	if (!note)
		fprintf(f, "ed25519: fixed-key (pith-mirror's tables for trusted keys; "
			   "libsodium for other keys)\n");
	else
		fprintf(f, "ed25519: libsodium (%s)\n", note);
	pith_trust_free(t);
}

void version_print(FILE *f, const char *prog)
{
	const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
	fprintf(f, "%s %s\n", prog, PITH_VERSION);
	fprintf(f, "commit: %s\n", PITH_GIT_COMMIT);
	fprintf(f, "libsodium: %s\n", sodium_version_string());
	fprintf(f, "rocksdb: %s (built against)\n", store_rocksdb_version());
	fprintf(f, "libevent: %s\n", event_get_version());
	fprintf(f, "libcurl: %s (%s)\n", cv->version, cv->ssl_version ? cv->ssl_version : "no TLS");
	fprintf(f, "libcrypto: %s\n", OpenSSL_version(OPENSSL_VERSION));
	fprintf(f, "msgpack-c: %s\n", msgpack_version());
	print_ed25519(f);
}
