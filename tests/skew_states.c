/* skew_states: a merge bug, simulated for the tests of state roots
 * between peers (mesh_root_test.py, journey_mesh_root; docs/state-root.md
 * section 14). Rewrites the stored state hash of the first N records of
 * a stopped node's store, in the records family the state root is built
 * from at start, and nothing else: the node keeps exactly the events it
 * had (so reconciliation finds nothing to exchange) and reports other
 * states for those N records than every other node computes.
 *
 * usage: skew_states STORE N
 *
 * Prints the pith numbers it changed, one a line. Test-only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"
#include "store_test_util.h"

int main(int argc, char **argv)
{
	if (argc != 3 || atoi(argv[2]) <= 0) {
		fprintf(stderr, "usage: skew_states STORE N\n");
		return 2;
	}
	size_t want = (size_t)atoi(argv[2]), done = 0;
	store_t *st = stu_open_store(argv[1], NULL);
	if (!st)
		return 1;
	pith_err_t err = {0};
	store_iter_t it;
	if (store_iter_scan(st, STORE_CF_RECORDS, &it, &err)) {
		fprintf(stderr, "skew_states: %s\n", err.msg);
		store_close(st);
		return 1;
	}
	int rc = 0;
	for (; store_iter_valid(&it) && done < want && !rc; store_iter_next(&it)) {
		size_t kl, vl;
		const uint8_t *k = store_iter_key(&it, &kl), *v = store_iter_value(&it, &vl);
		store_record_info_t r;
		if (store_record_info_decode(k, kl, v, vl, &r, &err) || vl < 40) {
			fprintf(stderr, "skew_states: %s\n", err.msg);
			rc = 1;
			break;
		}
		uint8_t *nv = malloc(vl);
		if (!nv) {
			rc = 1;
			break;
		}
		memcpy(nv, v, vl);
		nv[8] ^= 0x5a; /* the state hash is bytes 8..40 of the summary */
		char *e = NULL;
		rocksdb_put_cf(st->db, st->wo, st->cf[STORE_CF_RECORDS], (const char *)k, kl,
			       (const char *)nv, vl, &e);
		free(nv);
		if (e) {
			fprintf(stderr, "skew_states: %s\n", e);
			rocksdb_free(e);
			rc = 1;
			break;
		}
		printf("%s\n", r.pith_number);
		done++;
	}
	store_iter_close(&it);
	store_close(st);
	if (!rc && done < want) {
		fprintf(stderr, "skew_states: only %zu records in %s\n", done, argv[1]);
		rc = 1;
	}
	return rc;
}
