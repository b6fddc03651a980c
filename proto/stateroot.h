/* The state root (issue 57, docs/state-root.md): a Merkle tree over every
 * record's (pith number, state_sha256), shaped as a crit-bit (Patricia)
 * trie over the first 130 bits of the record's canonical digest, so that
 * its shape, and so its root, depends only on the set of leaves.
 *
 * Pure: no I/O, no clock. The tree keeps the hash, count and prefix of
 * every trie node with more than `bucket` leaves and of their children
 * (the buckets), and for each bucket its leaves' keys and leaf hashes (49
 * bytes a record, docs/state-root.md section 10): a flush rehashes a
 * changed bucket from memory. The caller's list callback is asked only
 * for the leaf a pith-number-only change names (pith_sr_insert, _update,
 * _upsert, _delete) and for the leaves a proof or a range answer lists.
 *
 * Contract for changes: either tell the leaf itself (pith_sr_upsert_leaf:
 * no listing at all), or change the leaf set first (the list callback
 * must already answer with the new leaf) and tell the tree with
 * pith_sr_insert / _update / _upsert / _delete, which read that one leaf.
 * These walk one path and mark it dirty (a bucket that outgrows `bucket`
 * is split from its entries at once); hashes are recomputed, once for any
 * number of changes, by pith_sr_flush, which pith_sr_root, _prove and
 * _range call. A tree that finds the callback disagreeing with what it
 * holds returns PITH_EMISMATCH (from the change, a proof or a range
 * answer); it must then be rebuilt (pith_sr_build) from the leaf set. */
#ifndef PITH_STATEROOT_H
#define PITH_STATEROOT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "ids.h"
#include "json.h"
#include "trust.h"

#define PITH_SR_KEY_BITS 130 /* the bits a pith number's body encodes */
#define PITH_SR_KEY_BYTES 17 /* 130 bits, most significant first, 6 zero bits after */
#define PITH_SR_RANGE_LEAVES 16 /* a range answer lists its leaves up to this many */
#define PITH_SR_BUCKET_DEFAULT 24
#define PITH_SR_BUCKET_MAX 256

#define PITH_SR_TREE_VERSION "pith-state-root-v1"

typedef struct pith_sr_leaf {
	char pith[PITH_NUMBER_LEN + 1]; /* pith:YYYY:BODY */
	uint8_t state[32];              /* the record's state_sha256 */
} pith_sr_leaf_t;

/* Lists, in key order, the leaves whose key begins with the first plen
 * bits of key (plen 0: all). At most cap of them into out and their number
 * into *n; PITH_ETOOBIG if there are more. 0 or a negative code. */
typedef int (*pith_sr_list_fn)(void *ctx, const uint8_t key[PITH_SR_KEY_BYTES],
			       unsigned plen, pith_sr_leaf_t *out, size_t cap, size_t *n);

/* ---- encoding (the spec's bytes) ---- */

/* The key of a pith number: its body's 130 bits (base32 decoded), which
 * are the first 130 bits of the record's canonical SHA-256. 0, or
 * PITH_EINVAL when pith is not a well-formed full pith number. */
int pith_sr_key(const char *pith, uint8_t key[PITH_SR_KEY_BYTES]);
/* Bit i (0 = most significant) of a key. */
static inline unsigned pith_sr_bit(const uint8_t *key, unsigned i)
{
	return (key[i >> 3] >> (7 - (i & 7))) & 1u;
}
/* Length of the common prefix of a and b, at most max bits. */
unsigned pith_sr_common(const uint8_t *a, const uint8_t *b, unsigned max);
/* SHA-256(0x00 || pith number (36 ASCII bytes) || state_sha256 (32 bytes)). */
void pith_sr_leaf_hash(const pith_sr_leaf_t *leaf, uint8_t out[32]);
/* SHA-256(0x01 || bit (1 byte) || left (32) || right (32)). */
void pith_sr_node_hash(unsigned bit, const uint8_t left[32], const uint8_t right[32],
		       uint8_t out[32]);
/* The root of the empty tree: SHA-256 of the empty string. */
void pith_sr_empty_root(uint8_t out[32]);
/* The root of n leaves in strictly increasing key order (keys[i] is
 * leaves[i]'s key), computed from them alone; empty root for n 0. */
void pith_sr_hash_sorted(const pith_sr_leaf_t *leaves, const uint8_t (*keys)[PITH_SR_KEY_BYTES],
			 size_t n, uint8_t out[32]);

/* ---- the tree ---- */

typedef struct pith_sr pith_sr_t;

/* An empty tree. bucket: subtrees of at most this many leaves are kept
 * as one array of their entries, not as nodes (0: the default, 16; 1 to
 * PITH_SR_BUCKET_MAX). NULL on OOM or a bucket out of range. */
pith_sr_t *pith_sr_new(unsigned bucket, pith_sr_list_fn list, void *ctx);
void pith_sr_free_(pith_sr_t *t);
#define pith_sr_free(t) do { pith_sr_free_(t); (t) = NULL; } while (0)

/* Replaces the tree by one over n leaves given in strictly increasing key
 * order (the same leaves the list callback serves). PITH_EINVAL (tree
 * unchanged) when they are not sorted, repeat a key or name a bad pith
 * number. O(n). */
int pith_sr_build(pith_sr_t *t, const pith_sr_leaf_t *leaves, size_t n, pith_err_t *err);
/* A record was added to the leaf set / its state changed / it was removed
 * (the list callback shows it so: the tree reads that one leaf). O(log n)
 * steps, no hashing (but for the split of a full bucket: 2 x bucket
 * hashes). PITH_EEXIST (insert of a key the tree has), PITH_ENOTFOUND
 * (update or delete of a key the tree lacks), PITH_EMISMATCH (the list
 * callback does not show the change), PITH_EINVAL (bad pith number),
 * PITH_ENOMEM; on these errors the tree is unchanged. */
int pith_sr_insert(pith_sr_t *t, const char *pith);
int pith_sr_update(pith_sr_t *t, const char *pith);
int pith_sr_delete(pith_sr_t *t, const char *pith);
/* A record was added or its state changed, the caller does not know
 * which: as insert or update, whichever the tree finds. 0, PITH_EINVAL,
 * PITH_EMISMATCH, PITH_ENOMEM. */
int pith_sr_upsert(pith_sr_t *t, const char *pith);
/* The same with the leaf given (a node following its change log, which
 * carries each record's state_sha256): no listing. 0, PITH_EINVAL,
 * PITH_ENOMEM. */
int pith_sr_upsert_leaf(pith_sr_t *t, const pith_sr_leaf_t *leaf);

/* Rehashes what the changes since the last flush left dirty: each dirty
 * bucket from its entries in memory, then the dirty nodes above. 0. */
int pith_sr_flush(pith_sr_t *t);
/* The root (after a flush); the empty tree's for no leaves. 0 or as flush. */
int pith_sr_root(pith_sr_t *t, uint8_t out[32]);
uint64_t pith_sr_count(const pith_sr_t *t);
/* Bytes the tree holds (its node pool and the buckets' entries), for
 * metrics and the benchmark. */
size_t pith_sr_mem_bytes(const pith_sr_t *t);

/* ---- proofs ---- */

typedef struct pith_sr_step {
	uint8_t bit;     /* the node's crit bit */
	uint8_t sib[32]; /* the hash of the child the path does not take */
} pith_sr_step_t;

/* The leaf reached by following a key's bits from the root, and the path
 * to it (top-down). The key is present iff leaf.pith is the asked one. */
typedef struct pith_sr_proof {
	char asked[PITH_NUMBER_LEN + 1];
	int has_leaf; /* 0 only for the empty tree */
	pith_sr_leaf_t leaf;
	unsigned n;
	pith_sr_step_t path[PITH_SR_KEY_BITS];
	uint8_t root[32];
	uint64_t count;
} pith_sr_proof_t;

/* The proof for pith in t. 0, PITH_EINVAL, PITH_EMISMATCH (callback). */
int pith_sr_prove(pith_sr_t *t, const char *pith, pith_sr_proof_t *out);
/* Checks p against root (the one a signed root document gives): the path
 * hashes p's leaf to root, its bits increase strictly, and the asked key
 * takes the leaf's turn at every one of them. 0 with *present 1 (the
 * asked record is there with state p->leaf.state) or 0 (absent), else
 * PITH_EMISMATCH / PITH_EINVAL with err saying why. */
int pith_sr_proof_check(const pith_sr_proof_t *p, const uint8_t root[32], int *present,
			pith_err_t *err);

/* ---- range answers (the subtree under a prefix) ---- */

typedef struct pith_sr_sub {
	uint64_t count;  /* 0: nothing under the prefix */
	uint8_t hash[32];
	unsigned bits;   /* the subtree's common prefix length (130 for a leaf) */
	uint8_t key[PITH_SR_KEY_BYTES]; /* its first `bits` bits; zero after */
} pith_sr_sub_t;

typedef struct pith_sr_range {
	uint8_t prefix[PITH_SR_KEY_BYTES]; /* asked, zero after plen bits */
	unsigned plen;
	pith_sr_sub_t node;       /* every key under the prefix, as one subtree */
	int has_children;         /* node is an inner node (count >= 2) */
	pith_sr_sub_t child[2];   /* its two children */
	size_t nleaves;           /* count <= PITH_SR_RANGE_LEAVES: all leaves */
	pith_sr_leaf_t leaves[PITH_SR_RANGE_LEAVES];
	uint8_t root[32];         /* the whole tree's root and count when answered */
	uint64_t total;
} pith_sr_range_t;

/* The subtree of t holding every key that begins with the first plen bits
 * of prefix. 0, PITH_EINVAL (plen over 130), PITH_EMISMATCH (callback). */
int pith_sr_range(pith_sr_t *t, const uint8_t prefix[PITH_SR_KEY_BYTES], unsigned plen,
		  pith_sr_range_t *out);
/* Checks an answer from elsewhere against itself (it is untrusted): the
 * node lies under the prefix, its children extend it by one bit each and
 * hash to it, listed leaves hash to it. 0 or PITH_EINVAL/EMISMATCH. */
int pith_sr_range_check(const pith_sr_range_t *r, pith_err_t *err);

/* ---- JSON (stateroot_json.c): proofs, range answers, the signed root ---- */

/* A prefix as text: '0' and '1', at most 130 of them. 0 or PITH_EINVAL. */
int pith_sr_bits_parse(const char *s, size_t len, uint8_t key[PITH_SR_KEY_BYTES],
		       unsigned *plen);
/* Canonical JSON of a proof / a range answer (docs/state-root.md). */
int pith_sr_proof_json(const pith_sr_proof_t *p, pith_buf_t *out);
int pith_sr_proof_parse(const uint8_t *buf, size_t len, pith_sr_proof_t *p, pith_err_t *err);
int pith_sr_range_json(const pith_sr_range_t *r, pith_buf_t *out);
int pith_sr_range_parse(const uint8_t *buf, size_t len, pith_sr_range_t *r, pith_err_t *err);

/* The signed root document's fields. */
typedef struct pith_sr_doc {
	uint8_t root[32];
	uint64_t count;
	char cursor[32];        /* feed_cursor: the change feed's cursor covered; "" = null */
	char key_id[PITH_KEY_ID_MAX];
	char fp[PITH_FP_LEN + 1];
	char signed_at[32];     /* YYYY-MM-DDTHH:MM:SS[.ffffff]Z */
	uint8_t doc_sha256[32]; /* root_document_sha256 */
} pith_sr_doc_t;

/* Writes the signed root document for d's root, count, cursor and
 * signed_at (key_id, fp and doc_sha256 are filled from key) as canonical
 * JSON into out. 0, PITH_EINVAL (a bad signed_at or cursor), PITH_ENOMEM. */
int pith_sr_doc_sign(pith_sr_doc_t *d, const pith_key_t *key, const uint8_t secret[64],
		     pith_buf_t *out, pith_err_t *err);
/* Parses and verifies a signed root document (untrusted bytes, at most
 * 64 KiB) against key, the node's public key the reader trusts (e.g. from
 * its /pith-signing-key.json, pinned). 0 with *d filled; else PITH_EINVAL
 * (JSON or shape), PITH_EMISMATCH (hash), PITH_EUNTRUSTED (another key),
 * PITH_EBADSIG. */
int pith_sr_doc_verify(const uint8_t *buf, size_t len, const pith_key_t *key,
		       pith_sr_doc_t *d, pith_err_t *err);

/* The answer to one case of the corpus (tests/conformance/state-root/,
 * docs/state-root.md section 9) of kind state_root, state_root_proof or
 * state_root_document, as canonical JSON into out (null when refused):
 * 1, or 0 (out untouched) for any other kind. pith_conform_answer asks. */
int pith_sr_conform_answer(const char *kind, const json_value_t *c, pith_buf_t *out);

/* ---- finding where two trees differ (the audit's descent) ---- */

/* Asks side (0 or 1) for the range answer under a prefix. 0 or negative. */
typedef int (*pith_sr_fetch_fn)(void *ctx, int side, const uint8_t prefix[PITH_SR_KEY_BYTES],
				unsigned plen, pith_sr_range_t *out);
/* One record that differs: state on side 0 and 1, NULL where absent. */
typedef int (*pith_sr_diff_fn)(void *ctx, const char *pith, const uint8_t *state0,
			       const uint8_t *state1);

typedef struct pith_sr_diff_stats {
	uint64_t requests; /* fetch calls */
	uint64_t differences;
} pith_sr_diff_stats_t;

/* Descends both sides from the root to every record whose leaf differs
 * (present on one side only, or with different states), calling report
 * once for each, in no particular order. Each answer is checked
 * (pith_sr_range_check); at most max_requests fetches (0: no limit, else
 * PITH_ETOOBIG past it). 0 or the first negative code of fetch, report or
 * a check. The sides may change during the descent: what it finds is then
 * a mix of moments (docs/state-root.md, "Range"). */
int pith_sr_diff(pith_sr_fetch_fn fetch, pith_sr_diff_fn report, void *ctx,
		 uint64_t max_requests, pith_sr_diff_stats_t *stats, pith_err_t *err);

#endif
