/* The state root's documents as canonical JSON (docs/state-root.md):
 * proofs, range answers and the signed root document. Everything parsed
 * here is untrusted: bounded, and checked field by field. */
#include "stateroot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SR_JSON_MAX_BYTES (64u << 10)
#define SR_JSON_MAX_DEPTH 8

static const json_limits_t sr_limits = {SR_JSON_MAX_BYTES, SR_JSON_MAX_DEPTH, 40};

int pith_sr_bits_parse(const char *s, size_t len, uint8_t key[PITH_SR_KEY_BYTES],
		       unsigned *plen)
{
	memset(key, 0, PITH_SR_KEY_BYTES);
	if (len > PITH_SR_KEY_BITS)
		return PITH_EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '1')
			key[i >> 3] |= (uint8_t)(0x80u >> (i & 7));
		else if (s[i] != '0')
			return PITH_EINVAL;
	}
	*plen = (unsigned)len;
	return 0;
}

static void bits_text(const uint8_t *key, unsigned n, char out[PITH_SR_KEY_BITS + 1])
{
	for (unsigned i = 0; i < n; i++)
		out[i] = pith_sr_bit(key, i) ? '1' : '0';
	out[n] = 0;
}

/* ---- small builders and getters ---- */

static int set_str(json_doc_t *d, json_value_t *o, const char *k, const char *v)
{
	json_value_t *s = json_new_string(d, v);
	return s ? json_object_set(d, o, k, s) : PITH_ENOMEM;
}

static int set_hex(json_doc_t *d, json_value_t *o, const char *k, const uint8_t h[32])
{
	char hex[65];
	pith_hex_encode(h, 32, hex);
	return set_str(d, o, k, hex);
}

static int set_u64(json_doc_t *d, json_value_t *o, const char *k, uint64_t v)
{
	json_value_t *n = json_new_int(d, (int64_t)v);
	return n ? json_object_set(d, o, k, n) : PITH_ENOMEM;
}

static int set_val(json_doc_t *d, json_value_t *o, const char *k, json_value_t *v)
{
	return v ? json_object_set(d, o, k, v) : PITH_ENOMEM;
}

static json_value_t *leaf_obj(json_doc_t *d, const pith_sr_leaf_t *l)
{
	json_value_t *o = json_new_object(d);
	if (!o || set_str(d, o, "pith_number", l->pith) || set_hex(d, o, "state_sha256", l->state))
		return NULL;
	return o;
}

/* Writes d's root as canonical JSON into out and frees d. */
static int finish(json_doc_t *d, json_value_t *root, int rc, pith_buf_t *out)
{
	if (!rc)
		rc = json_canon_write(root, out);
	json_doc_free(d);
	return rc;
}

static int get_hex(const json_value_t *o, const char *k, uint8_t out[32])
{
	const char *s = json_get_str(o, k);
	return s && strlen(s) == 64 && !pith_hex_decode(s, 64, out, 32) ? 0 : PITH_EINVAL;
}

/* A non-negative JSON integer up to max. */
static int get_u64(const json_value_t *o, const char *k, uint64_t max, uint64_t *out)
{
	const json_value_t *v = json_get_type(o, k, JSON_INT);
	if (!v || v->len == 0 || v->len > 19)
		return PITH_EINVAL;
	uint64_t n = 0;
	for (size_t i = 0; i < v->len; i++) {
		if (v->u.str[i] < '0' || v->u.str[i] > '9')
			return PITH_EINVAL;
		n = n * 10 + (uint64_t)(v->u.str[i] - '0');
	}
	if (n > max)
		return PITH_EINVAL;
	*out = n;
	return 0;
}

static int get_pith(const json_value_t *o, const char *k, char out[PITH_NUMBER_LEN + 1])
{
	const char *s = json_get_str(o, k);
	uint8_t key[PITH_SR_KEY_BYTES];
	if (!s || pith_sr_key(s, key))
		return PITH_EINVAL;
	memcpy(out, s, PITH_NUMBER_LEN + 1);
	return 0;
}

static int get_leaf(const json_value_t *o, pith_sr_leaf_t *l)
{
	if (!json_is(o, JSON_OBJECT) || get_pith(o, "pith_number", l->pith) ||
	    get_hex(o, "state_sha256", l->state))
		return PITH_EINVAL;
	return 0;
}

static int get_bits(const json_value_t *o, const char *k, uint8_t key[PITH_SR_KEY_BYTES],
		    unsigned *n)
{
	const json_value_t *v = json_get_type(o, k, JSON_STRING);
	return v ? pith_sr_bits_parse(v->u.str, v->len, key, n) : PITH_EINVAL;
}

static int parse_obj(const uint8_t *buf, size_t len, json_doc_t **doc, const json_value_t **root,
		     const char *what, pith_err_t *err)
{
	int rc = json_parse(doc, buf, len, &sr_limits, err);
	if (rc)
		return rc;
	*root = json_doc_root(*doc);
	if (!json_is(*root, JSON_OBJECT)) {
		json_doc_free(*doc);
		return pith_err_set(err, PITH_EINVAL, "%s: not a JSON object", what);
	}
	return 0;
}

/* ---- proofs ---- */

int pith_sr_proof_json(const pith_sr_proof_t *p, pith_buf_t *out)
{
	json_doc_t *d = json_doc_new();
	json_value_t *o = d ? json_new_object(d) : NULL, *path = d ? json_new_array(d) : NULL;
	if (!o || !path) {
		json_doc_free(d);
		return PITH_ENOMEM;
	}
	int rc = 0;
	for (unsigned i = 0; i < p->n && !rc; i++) {
		json_value_t *s = json_new_object(d);
		rc = !s || set_u64(d, s, "bit", p->path[i].bit) || set_hex(d, s, "sibling", p->path[i].sib) ||
		     json_array_push(d, path, s) ? PITH_ENOMEM : 0;
	}
	if (!rc)
		rc = set_str(d, o, "proof_type", "pith_state_root_proof") ||
		     set_str(d, o, "proof_version", "1") ||
		     set_str(d, o, "tree_version", PITH_SR_TREE_VERSION) ||
		     set_str(d, o, "pith_number", p->asked) ||
		     set_val(d, o, "present", json_new_bool(d, p->has_leaf && !strcmp(p->asked, p->leaf.pith))) ||
		     set_val(d, o, "leaf", p->has_leaf ? leaf_obj(d, &p->leaf) : json_new_null(d)) ||
		     set_val(d, o, "path", path) || set_hex(d, o, "root_sha256", p->root) ||
		     set_u64(d, o, "record_count", p->count) ? PITH_ENOMEM : 0;
	return finish(d, o, rc, out);
}

int pith_sr_proof_parse(const uint8_t *buf, size_t len, pith_sr_proof_t *p, pith_err_t *err)
{
	json_doc_t *doc;
	const json_value_t *o;
	memset(p, 0, sizeof(*p));
	int rc = parse_obj(buf, len, &doc, &o, "proof", err);
	if (rc)
		return rc;
	const char *type = json_get_str(o, "proof_type"), *ver = json_get_str(o, "proof_version");
	const char *tree = json_get_str(o, "tree_version");
	const json_value_t *leaf = json_get(o, "leaf"), *path = json_get_type(o, "path", JSON_ARRAY);
	rc = PITH_EINVAL;
	if (!type || strcmp(type, "pith_state_root_proof") || !ver || strcmp(ver, "1") || !tree ||
	    strcmp(tree, PITH_SR_TREE_VERSION))
		pith_err_set(err, rc, "proof: not a %s proof, version 1", PITH_SR_TREE_VERSION);
	else if (get_pith(o, "pith_number", p->asked))
		pith_err_set(err, rc, "proof: pith_number missing or not a full pith number");
	else if (!leaf || (!json_is(leaf, JSON_NULL) && get_leaf(leaf, &p->leaf)))
		pith_err_set(err, rc, "proof: leaf is neither null nor {pith_number, state_sha256}");
	else if (!path || path->len > PITH_SR_KEY_BITS)
		pith_err_set(err, rc, "proof: path missing or longer than %d steps", PITH_SR_KEY_BITS);
	else if (get_hex(o, "root_sha256", p->root) ||
		 get_u64(o, "record_count", UINT64_MAX >> 1, &p->count))
		pith_err_set(err, rc, "proof: root_sha256 or record_count missing or malformed");
	else
		rc = 0;
	p->has_leaf = leaf && !json_is(leaf, JSON_NULL);
	for (size_t i = 0; !rc && i < path->len; i++) {
		uint64_t b = 0;
		const json_value_t *s = path->u.items[i];
		if (!json_is(s, JSON_OBJECT) || get_u64(s, "bit", PITH_SR_KEY_BITS - 1, &b) ||
		    get_hex(s, "sibling", p->path[i].sib)) {
			rc = pith_err_set(err, PITH_EINVAL, "proof: path step %zu is not {bit, sibling}", i);
			break;
		}
		p->path[i].bit = (uint8_t)b;
		p->n = (unsigned)i + 1;
	}
	json_doc_free(doc);
	return rc;
}

/* ---- range answers ---- */

static json_value_t *sub_obj(json_doc_t *d, const pith_sr_sub_t *s)
{
	char bits[PITH_SR_KEY_BITS + 1];
	json_value_t *o = json_new_object(d);
	bits_text(s->key, s->bits, bits);
	if (!o || set_str(d, o, "bits", bits) || set_u64(d, o, "count", s->count) ||
	    set_hex(d, o, "hash", s->hash))
		return NULL;
	return o;
}

int pith_sr_range_json(const pith_sr_range_t *r, pith_buf_t *out)
{
	char bits[PITH_SR_KEY_BITS + 1];
	json_doc_t *d = json_doc_new();
	json_value_t *o = d ? json_new_object(d) : NULL;
	if (!o) {
		json_doc_free(d);
		return PITH_ENOMEM;
	}
	bits_text(r->prefix, r->plen, bits);
	int rc = set_str(d, o, "range_version", "1") || set_str(d, o, "prefix", bits) ||
		 set_u64(d, o, "count", r->node.count) || set_hex(d, o, "root_sha256", r->root) ||
		 set_u64(d, o, "record_count", r->total);
	if (!rc && r->node.count) {
		bits_text(r->node.key, r->node.bits, bits);
		rc = set_str(d, o, "bits", bits) || set_hex(d, o, "hash", r->node.hash);
	} else if (!rc) {
		rc = set_val(d, o, "bits", json_new_null(d)) || set_val(d, o, "hash", json_new_null(d));
	}
	if (!rc && r->has_children) {
		json_value_t *a = json_new_array(d);
		rc = !a || json_array_push(d, a, sub_obj(d, &r->child[0])) ||
		     json_array_push(d, a, sub_obj(d, &r->child[1])) || set_val(d, o, "children", a);
	}
	if (!rc && r->node.count <= PITH_SR_RANGE_LEAVES) {
		json_value_t *a = json_new_array(d);
		rc = !a;
		for (size_t i = 0; !rc && i < r->nleaves; i++)
			rc = json_array_push(d, a, leaf_obj(d, &r->leaves[i]));
		if (!rc)
			rc = set_val(d, o, "leaves", a);
	}
	return finish(d, o, rc ? PITH_ENOMEM : 0, out);
}

static int get_sub(const json_value_t *o, pith_sr_sub_t *s)
{
	return !json_is(o, JSON_OBJECT) || get_bits(o, "bits", s->key, &s->bits) ||
			       get_u64(o, "count", UINT64_MAX >> 1, &s->count) || get_hex(o, "hash", s->hash)
		       ? PITH_EINVAL
		       : 0;
}

int pith_sr_range_parse(const uint8_t *buf, size_t len, pith_sr_range_t *r, pith_err_t *err)
{
	json_doc_t *doc;
	const json_value_t *o;
	memset(r, 0, sizeof(*r));
	int rc = parse_obj(buf, len, &doc, &o, "range", err);
	if (rc)
		return rc;
	const char *ver = json_get_str(o, "range_version");
	const json_value_t *kids = json_get(o, "children"), *leaves = json_get(o, "leaves");
	rc = PITH_EINVAL;
	if (!ver || strcmp(ver, "1"))
		pith_err_set(err, rc, "range: range_version is not \"1\"");
	else if (get_bits(o, "prefix", r->prefix, &r->plen) ||
		 get_u64(o, "count", UINT64_MAX >> 1, &r->node.count) ||
		 get_hex(o, "root_sha256", r->root) || get_u64(o, "record_count", UINT64_MAX >> 1, &r->total))
		pith_err_set(err, rc, "range: prefix, count, root_sha256 or record_count missing or malformed");
	else if (r->node.count && (get_bits(o, "bits", r->node.key, &r->node.bits) ||
				   get_hex(o, "hash", r->node.hash)))
		pith_err_set(err, rc, "range: bits or hash missing or malformed");
	else if (kids && (!json_is(kids, JSON_ARRAY) || kids->len != 2 ||
			  get_sub(kids->u.items[0], &r->child[0]) || get_sub(kids->u.items[1], &r->child[1])))
		pith_err_set(err, rc, "range: children is not two {bits, count, hash}");
	else if (leaves && (!json_is(leaves, JSON_ARRAY) || leaves->len > PITH_SR_RANGE_LEAVES))
		pith_err_set(err, rc, "range: leaves is not an array of at most %d", PITH_SR_RANGE_LEAVES);
	else
		rc = 0;
	r->has_children = kids != NULL;
	for (size_t i = 0; !rc && leaves && i < leaves->len; i++) {
		if (get_leaf(leaves->u.items[i], &r->leaves[i]))
			rc = pith_err_set(err, PITH_EINVAL, "range: leaves[%zu] is not {pith_number, state_sha256}", i);
		r->nleaves = i + 1;
	}
	json_doc_free(doc);
	return rc ? rc : pith_sr_range_check(r, err);
}

/* ---- the signed root document ---- */

static const char *const doc_unsigned[] = {"root_document_sha256", "signature"};

/* The signed part of a root document, as a JSON object in d. */
static json_value_t *doc_body(json_doc_t *d, const pith_sr_doc_t *sd)
{
	json_value_t *o = json_new_object(d), *signer = json_new_object(d);
	if (!o || !signer || set_str(d, o, "root_type", "pith_state_root") ||
	    set_str(d, o, "root_version", "1") || set_str(d, o, "tree_version", PITH_SR_TREE_VERSION) ||
	    set_str(d, o, "merge_version", "pith-open-graph-merge-v1") ||
	    set_hex(d, o, "root_sha256", sd->root) || set_u64(d, o, "record_count", sd->count) ||
	    set_val(d, o, "feed_cursor", sd->cursor[0] ? json_new_string(d, sd->cursor) : json_new_null(d)) ||
	    set_str(d, o, "signed_at", sd->signed_at) || set_str(d, signer, "key_id", sd->key_id) ||
	    set_str(d, signer, "public_key_fingerprint", sd->fp) || set_val(d, o, "signer", signer))
		return NULL;
	return o;
}

/* A feed cursor as a document may carry it: 1 to 31 printable ASCII bytes. */
static int cursor_ok(const char *s, size_t len)
{
	if (!len || len >= sizeof(((pith_sr_doc_t *)0)->cursor))
		return 0;
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return 0;
	return 1;
}

int pith_sr_doc_sign(pith_sr_doc_t *sd, const pith_key_t *key, const uint8_t secret[64],
		     pith_buf_t *out, pith_err_t *err)
{
	int64_t us;
	if (pith_time_parse_valid(sd->signed_at, PITH_TIME_FRACTION, &us))
		return pith_err_set(err, PITH_EINVAL, "root document: signed_at \"%s\" is not a valid UTC time",
				    sd->signed_at);
	if (sd->cursor[0] && !cursor_ok(sd->cursor, strlen(sd->cursor)))
		return pith_err_set(err, PITH_EINVAL, "root document: feed_cursor is not 1 to 31 printable bytes");
	snprintf(sd->key_id, sizeof(sd->key_id), "%s", key->key_id);
	memcpy(sd->fp, key->fp, sizeof(sd->fp));
	json_doc_t *d = json_doc_new();
	json_value_t *o = d ? doc_body(d, sd) : NULL, *sig = d ? json_new_object(d) : NULL;
	pith_buf_t body = PITH_BUF_INIT;
	int rc = !o || !sig || json_canon_write(o, &body) ? PITH_ENOMEM : 0;
	if (!rc) {
		char b64[89];
		pith_sha256(body.data, body.len, sd->doc_sha256);
		pith_sig_sign_b64(secret, sd->doc_sha256, b64);
		rc = set_hex(d, o, "root_document_sha256", sd->doc_sha256) ||
		     set_str(d, sig, "signed_message", "root_document_sha256_bytes") ||
		     set_str(d, sig, "signature_b64", b64) || set_val(d, o, "signature", sig)
			     ? PITH_ENOMEM
			     : 0;
	}
	pith_buf_release(&body);
	if (!d)
		return PITH_ENOMEM;
	return finish(d, o, rc, out);
}

int pith_sr_doc_verify(const uint8_t *buf, size_t len, const pith_key_t *key,
		       pith_sr_doc_t *sd, pith_err_t *err)
{
	json_doc_t *doc;
	const json_value_t *o;
	memset(sd, 0, sizeof(*sd));
	int rc = pith_trust_key_check(key, err);
	if (rc || (rc = parse_obj(buf, len, &doc, &o, "root document", err)))
		return rc;
	const char *type = json_get_str(o, "root_type"), *ver = json_get_str(o, "root_version");
	const char *tree = json_get_str(o, "tree_version"), *merge = json_get_str(o, "merge_version");
	const char *at = json_get_str(o, "signed_at");
	const json_value_t *cur = json_get(o, "feed_cursor");
	const json_value_t *signer = json_get_type(o, "signer", JSON_OBJECT);
	const json_value_t *sig = json_get_type(o, "signature", JSON_OBJECT);
	const char *kid = json_get_str(signer, "key_id"), *fp = json_get_str(signer, "public_key_fingerprint");
	const char *msg = json_get_str(sig, "signed_message"), *b64 = json_get_str(sig, "signature_b64");
	uint8_t claimed[32];
	int64_t us;
	rc = PITH_EINVAL;
	if (!type || strcmp(type, "pith_state_root") || !ver || strcmp(ver, "1") || !tree ||
	    strcmp(tree, PITH_SR_TREE_VERSION) || !merge || strcmp(merge, "pith-open-graph-merge-v1"))
		pith_err_set(err, rc, "root document: not a pith_state_root, version 1, of %s and pith-open-graph-merge-v1",
			     PITH_SR_TREE_VERSION);
	else if (get_hex(o, "root_sha256", sd->root) || get_u64(o, "record_count", UINT64_MAX >> 1, &sd->count))
		pith_err_set(err, rc, "root document: root_sha256 or record_count missing or malformed");
	else if (!cur || (!json_is(cur, JSON_NULL) &&
			  (!json_is(cur, JSON_STRING) || !cursor_ok(cur->u.str, cur->len))))
		pith_err_set(err, rc, "root document: feed_cursor is neither null nor 1 to 31 printable bytes");
	else if (!at || strlen(at) >= sizeof(sd->signed_at) ||
		 pith_time_parse_valid(at, PITH_TIME_FRACTION, &us))
		pith_err_set(err, rc, "root document: signed_at missing or not a valid UTC time");
	else if (!kid || !fp || strlen(kid) >= sizeof(sd->key_id) || strlen(fp) != PITH_FP_LEN)
		pith_err_set(err, rc, "root document: signer is not {key_id, public_key_fingerprint}");
	else if (!msg || strcmp(msg, "root_document_sha256_bytes") || !b64 ||
		 get_hex(o, "root_document_sha256", claimed))
		pith_err_set(err, rc, "root document: signature or root_document_sha256 missing or malformed");
	else if (strcmp(fp, key->fp) || strcmp(kid, key->key_id))
		rc = pith_err_set(err, PITH_EUNTRUSTED,
				  "root document: signed by %s (%s), not by the key given, %s (%s)", fp, kid,
				  key->fp, key->key_id);
	else
		rc = 0;
	if (!rc) {
		if (json_is(cur, JSON_STRING))
			memcpy(sd->cursor, cur->u.str, cur->len + 1);
		snprintf(sd->signed_at, sizeof(sd->signed_at), "%s", at);
		snprintf(sd->key_id, sizeof(sd->key_id), "%s", kid);
		memcpy(sd->fp, fp, sizeof(sd->fp));
		pith_buf_t body = PITH_BUF_INIT;
		rc = json_canon_write_skip(o, doc_unsigned, 2, &body);
		if (!rc) {
			pith_sha256(body.data, body.len, sd->doc_sha256);
			if (memcmp(sd->doc_sha256, claimed, 32))
				rc = pith_err_set(err, PITH_EMISMATCH,
						  "root document: root_document_sha256 is not the hash of the document");
			else if ((rc = pith_sig_verify_b64(key, sd->doc_sha256, b64)))
				rc = pith_err_set(err, rc == PITH_EINVAL ? PITH_EINVAL : PITH_EBADSIG,
						  "root document: the signature %s",
						  rc == PITH_EINVAL ? "is not 64 bytes of base64" : "does not verify");
		}
		pith_buf_release(&body);
	}
	json_doc_free(doc);
	return rc;
}

/* ---- the conformance corpus (tests/conformance/state-root/) ---- */

static int cmp_entry(const void *a, const void *b)
{
	return memcmp((const uint8_t *)a + sizeof(pith_sr_leaf_t), (const uint8_t *)b + sizeof(pith_sr_leaf_t),
		      PITH_SR_KEY_BYTES);
}

/* kind state_root: the root of c's leaves, given in any order. */
static void answer_root(const json_value_t *c, pith_buf_t *out)
{
	const json_value_t *lv = json_get_type(c, "leaves", JSON_ARRAY);
	size_t n = lv ? lv->len : 0;
	const size_t esz = sizeof(pith_sr_leaf_t) + PITH_SR_KEY_BYTES;
	uint8_t *e = lv ? calloc(n + 1, esz) : NULL;
	pith_sr_leaf_t *l = e ? calloc(n + 1, sizeof(*l)) : NULL;
	uint8_t (*k)[PITH_SR_KEY_BYTES] = l ? calloc(n + 1, PITH_SR_KEY_BYTES) : NULL;
	int ok = k != NULL;
	for (size_t i = 0; ok && i < n; i++) {
		pith_sr_leaf_t leaf;
		ok = !get_leaf(lv->u.items[i], &leaf) && !pith_sr_key(leaf.pith, e + i * esz + sizeof(leaf));
		memcpy(e + i * esz, &leaf, sizeof(leaf));
	}
	if (ok) {
		qsort(e, n, esz, cmp_entry);
		for (size_t i = 0; i < n; i++) {
			memcpy(&l[i], e + i * esz, sizeof(*l));
			memcpy(k[i], e + i * esz + sizeof(*l), PITH_SR_KEY_BYTES);
			ok &= !i || memcmp(k[i - 1], k[i], PITH_SR_KEY_BYTES) != 0;
		}
	}
	if (ok) {
		uint8_t r[32];
		char hex[65];
		pith_sr_hash_sorted(l, (const uint8_t (*)[PITH_SR_KEY_BYTES])k, n, r);
		pith_hex_encode(r, 32, hex);
		pith_buf_printf(out, "{\"record_count\":%zu,\"root_sha256\":\"%s\"}", n, hex);
	} else {
		pith_buf_puts(out, "null");
	}
	free(k);
	free(l);
	free(e);
}

/* kind state_root_proof: c's proof against c's root_sha256. */
static void answer_proof(const json_value_t *c, pith_buf_t *out)
{
	const json_value_t *pv = json_get(c, "proof");
	uint8_t root[32];
	pith_buf_t b = PITH_BUF_INIT;
	pith_sr_proof_t *p = malloc(sizeof(*p));
	int present = 0;
	if (p && pv && !get_hex(c, "root_sha256", root) && !json_canon_write(pv, &b) &&
	    !pith_sr_proof_parse(b.data, b.len, p, NULL) && !pith_sr_proof_check(p, root, &present, NULL)) {
		char hex[65];
		pith_hex_encode(p->leaf.state, 32, hex);
		if (present)
			pith_buf_printf(out, "{\"present\":true,\"state_sha256\":\"%s\"}", hex);
		else
			pith_buf_puts(out, "{\"present\":false}");
	} else {
		pith_buf_puts(out, "null");
	}
	free(p);
	pith_buf_release(&b);
}

/* kind state_root_document: c's text verified against its key. */
static void answer_document(const json_value_t *c, pith_buf_t *out)
{
	const char *pk = json_get_str(c, "public_key_hex"), *kid = json_get_str(c, "key_id");
	const json_value_t *text = json_get_type(c, "text", JSON_STRING);
	pith_key_t k = {0};
	pith_sr_doc_t d;
	if (!pk || !kid || strlen(kid) >= sizeof(k.key_id) || !text ||
	    pith_hex_decode(pk, strlen(pk), k.pk, 32)) {
		pith_buf_puts(out, "null");
		return;
	}
	snprintf(k.key_id, sizeof(k.key_id), "%s", kid);
	pith_key_fingerprint(k.pk, k.fp);
	k.rotates_at_us = PITH_NO_ROTATION;
	if (pith_sr_doc_verify((const uint8_t *)text->u.str, text->len, &k, &d, NULL)) {
		pith_buf_puts(out, "null");
		return;
	}
	char hex[65];
	pith_hex_encode(d.root, 32, hex);
	pith_buf_puts(out, "{\"feed_cursor\":");
	if (d.cursor[0])
		json_write_string(out, d.cursor, strlen(d.cursor));
	else
		pith_buf_puts(out, "null");
	pith_buf_printf(out, ",\"record_count\":%llu,\"root_sha256\":\"%s\"}", (unsigned long long)d.count, hex);
}

int pith_sr_conform_answer(const char *kind, const json_value_t *c, pith_buf_t *out)
{
	if (!strcmp(kind, "state_root"))
		answer_root(c, out);
	else if (!strcmp(kind, "state_root_proof"))
		answer_proof(c, out);
	else if (!strcmp(kind, "state_root_document"))
		answer_document(c, out);
	else
		return 0;
	return 1;
}
