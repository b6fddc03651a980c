/* libFuzzer harness for the JSON parser and canonical writer: the very
 * functions pithctl and the node use on untrusted bytes.
 *
 * For every input: json_parse either refuses it with a sane error record,
 * or the canonical bytes can be written, parse again to an equal tree, and
 * are a fixed point (canonical(canonical(x)) == canonical(x)). A deep copy
 * (json_clone) must write the same bytes, and an object's two forms in
 * one pass (json_canon_write_both) those of the two writes. Any broken invariant aborts so
 * the fuzzer (or the replay driver) reports it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_doc_t *doc = NULL, *doc2 = NULL, *copy = NULL;
	pith_buf_t c1 = PITH_BUF_INIT, c2 = PITH_BUF_INIT, c3 = PITH_BUF_INIT;
	pith_err_t err = {0};

	int rc = json_parse(&doc, data, size, NULL, &err);
	if (rc) {
		FUZZ_CHECK(doc == NULL);
		FUZZ_CHECK(rc == err.code);
		FUZZ_CHECK(rc == PITH_EINVAL || rc == PITH_ETRUNC || rc == PITH_ETOOBIG);
		FUZZ_CHECK(err.offset <= size);
		FUZZ_CHECK(strncmp(err.msg, "JSON: ", 6) == 0);
		return 0;
	}
	FUZZ_CHECK(json_doc_root(doc) != NULL);
	FUZZ_CHECK(json_canon_write(json_doc_root(doc), &c1) == 0);

	/* an object's two forms in one pass (the validators' write) are the
	 * whole form and the one without the skipped members */
	if (json_doc_root(doc)->type == JSON_OBJECT) {
		static const char *const skip[] = {"signature", "content_sha256", "event_id", "a"};
		pith_buf_t w = PITH_BUF_INIT, p = PITH_BUF_INIT, q = PITH_BUF_INIT;
		FUZZ_CHECK(json_canon_write_both(json_doc_root(doc), skip, 4, &w, &p) == 0);
		FUZZ_CHECK(json_canon_write_skip(json_doc_root(doc), skip, 4, &q) == 0);
		FUZZ_CHECK(w.len == c1.len && memcmp(w.data, c1.data, c1.len) == 0);
		FUZZ_CHECK(p.len == q.len && memcmp(p.data, q.data, q.len) == 0);
		pith_buf_release(&w);
		pith_buf_release(&p);
		pith_buf_release(&q);
	}

	rc = json_parse(&doc2, c1.data, c1.len, NULL, &err);
	if (rc)
		fprintf(stderr, "fuzz_json: canonical output refused: %s\n", err.msg);
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(json_equal(json_doc_root(doc), json_doc_root(doc2)));
	FUZZ_CHECK(json_canon_write(json_doc_root(doc2), &c2) == 0);
	FUZZ_CHECK(c1.len == c2.len && memcmp(c1.data, c2.data, c1.len) == 0);

	copy = json_doc_new();
	FUZZ_CHECK(copy != NULL);
	json_value_t *cl = json_clone(copy, json_doc_root(doc));
	FUZZ_CHECK(cl != NULL);
	json_doc_free(doc); /* the copy must not depend on the source */
	FUZZ_CHECK(json_canon_write(cl, &c3) == 0);
	FUZZ_CHECK(c1.len == c3.len && memcmp(c1.data, c3.data, c1.len) == 0);

	json_doc_free(copy);
	json_doc_free(doc2);
	pith_buf_release(&c1);
	pith_buf_release(&c2);
	pith_buf_release(&c3);
	return 0;
}
