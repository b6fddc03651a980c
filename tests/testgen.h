/* Generated, signed test data: keys, canonical records, and events of
 * every kind. Deterministic for a given seed (except signed_at). */
#ifndef PITH_TESTGEN_H
#define PITH_TESTGEN_H

#include <stdint.h>

#include "buf.h"
#include "event.h"
#include "trust.h"

typedef struct tg_key {
	pith_key_t key;
	uint8_t sk[64];
} tg_key_t;

/* A key from a 32-byte seed derived from n; registry=1 marks it a registry
 * key (may sign receipts). */
void tg_key_make(tg_key_t *k, unsigned n, const char *key_id, int registry);

/* A key of a table: tg_key_make's seed, key id and role, and rotates_at
 * (a timestamp, or NULL for never). */
typedef struct tg_key_spec {
	unsigned seed;
	const char *key_id;
	int registry;
	const char *rotates_at;
} tg_key_spec_t;

/* Makes keys[i] from specs[i] for i < n, rotation times included. */
void tg_keys_make(tg_key_t *keys, const tg_key_spec_t *specs, size_t n);

/* The tests' usual pair: reg, the test registry key (1, "test-registry"),
 * and op, an operator key (2, "op-one"), and a trust store holding both
 * (the caller frees it); NULL on OOM. */
pith_trust_t *tg_trust_pair(tg_key_t *reg, tg_key_t *op);

/* Small deterministic PRNG. */
uint64_t tg_rand(uint64_t *state);

/* Writes a canonical record for record number n into out (JSON text) and
 * its pith number into pith. */
void tg_record(unsigned n, pith_buf_t *out, char pith[static PITH_NUMBER_LEN + 1]);
/* From now on records 0 to n-1 have the arXiv ids ids[0..n-1] (JSON
 * string contents, not escaped), whatever they are: hostile ids for the
 * tests (gen_events --arxiv-id). ids must outlive the calls. */
void tg_set_arxiv_ids(const char *const *ids, size_t n);

/* Appends one signed event as canonical JSON (no newline) to out.
 * type: any event type (unknown ones are allowed); payload_json: the
 * payload object as JSON text; prev: event id or NULL; supersedes: event
 * ids (nsup of them). For record_created, pass record_n >= 0 and the
 * payload is built (record, hash, receipt by key). Returns 0 or -1. */
int tg_event(pith_buf_t *out, const tg_key_t *k, const char *type, const char *subject,
	     const char *target, const char *created_at, const char *payload_json,
	     const char *prev, const char *const *supersedes, size_t nsup, int record_n,
	     char event_id_out[static PITH_EVENT_ID_LEN + 1]);

/* Re-signs canonical event JSON with a different signed_at (same id). */
int tg_resign(const uint8_t *ev, size_t len, const tg_key_t *k, const char *signed_at,
	      pith_buf_t *out);

/* A registry bundle of record pith from its events (n of them, verified,
 * one a record_created): its record, the aliases derived from it
 * (created_at = built_at), the events, the state pith_merge_ex computes
 * with trust's registry keys, and a bundle_signature by k (a registry
 * key for it to verify). Appends canonical JSON to out. 0 or negative. */
int tg_bundle(const char *pith, pith_event_t *const *evs, size_t n, const tg_key_t *k,
	      const pith_trust_t *trust, const char *built_at, pith_buf_t *out,
	      pith_err_t *err);

/* Re-hashes bundle b (of doc d) and signs it again with k, after an edit:
 * its bundle_signature's hash, signature, key id and fingerprint. */
void tg_bundle_resign(json_doc_t *d, json_value_t *b, const tg_key_t *k);

#endif
