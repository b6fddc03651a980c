/* legacy_store: a store as a build before the timestamp rule (schema 5)
 * left it, for the upgrade tests (adversarial_timestamp).
 *
 * usage: legacy_store --trust-key KEY STORE FILE
 *
 * Stores every line of FILE (JSON Lines of events, or of bundles) in the
 * store at STORE (created if needed) as such a build did: read with the
 * store's own lenient parser and not verified, so events and bundles with
 * timestamps outside the rule of docs/merge.md (T-*) are stored too; then
 * writes schema version 5, so that the next read-write open upgrades it.
 * KEY, a key file with role registry, is given to the merge as a node
 * trusting it would (states computed with other registry keys differ). */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"
#include "store_test_util.h"

static int put_line(store_t *st, const uint8_t *p, size_t n, pith_err_t *err)
{
	if (memmem(p, n, "\"bundle_type\"", 13)) {
		json_doc_t *d = NULL;
		int rc = json_parse(&d, p, n, NULL, err);
		if (!rc)
			rc = store_bundle_put(st, json_doc_root(d), NULL, NULL, err);
		json_doc_free(d);
		return rc;
	}
	pith_event_t *ev = NULL;
	int rc = pith_event_parse_stored(p, n, &ev, err);
	if (!rc)
		rc = store_event_put(st, ev, NULL, err);
	pith_event_free(ev);
	return rc;
}

int main(int argc, char **argv)
{
	pith_buf_t kb = PITH_BUF_INIT, in = PITH_BUF_INIT;
	pith_key_t key;
	pith_err_t err = {0};
	if (argc != 5 || strcmp(argv[1], "--trust-key")) {
		fprintf(stderr, "usage: legacy_store --trust-key KEY STORE FILE\n");
		return 2;
	}
	if (stu_read_file(argv[2], &kb) || pith_keyfile_parse(kb.data, kb.len, &key, NULL, NULL, &err)) {
		fprintf(stderr, "legacy_store: %s: cannot read the key: %s\n", argv[2], err.msg);
		return 1;
	}
	if (stu_read_file(argv[4], &in)) {
		fprintf(stderr, "legacy_store: cannot read %s\n", argv[4]);
		return 1;
	}
	pith_trust_t *trust = pith_trust_new();
	store_t *st = NULL;
	if (!trust || pith_trust_add(trust, &key) || !(st = stu_open_store(argv[3], trust)))
		return 1;
	size_t stored = 0, line = 0;
	int rc = 0;
	for (size_t at = 0; at < in.len && !rc; line++) {
		const uint8_t *p = in.data + at, *nl = memchr(p, '\n', in.len - at);
		size_t n = nl ? (size_t)(nl - p) : in.len - at;
		at += n + 1;
		if (!n)
			continue;
		if ((rc = put_line(st, p, n, &err)))
			fprintf(stderr, "legacy_store: %s:%zu: %s\n", argv[4], line + 1, err.msg);
		else
			stored++;
	}
	char *e = NULL;
	if (!rc) {
		rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_META], STORE_META_SCHEMA,
			       strlen(STORE_META_SCHEMA), STORE_SCHEMA_5, 1, &e);
		if (e) {
			fprintf(stderr, "legacy_store: writing the schema version: %s\n", e);
			rocksdb_free(e);
			rc = 1;
		}
	}
	store_close(st);
	pith_trust_free(trust);
	pith_buf_release(&kb);
	pith_buf_release(&in);
	if (!rc)
		printf("stored %zu items in %s, schema %s\n", stored, argv[3], STORE_SCHEMA_5);
	return rc ? 1 : 0;
}
