/* The deterministic merge, pith-open-graph-merge-v1 (spec sections 5, 6;
 * the rules are written out in docs/merge.md).
 *
 * The state of a record is a pure function of the set of stored, verified
 * events for its subject and of the alias list of the newest verified
 * registry bundle. Arrival order, duplicates and re-signed copies do not
 * change it. */
#ifndef PITH_MERGE_H
#define PITH_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "json.h"
#include "trust.h"

#define PITH_MERGE_VERSION "pith-open-graph-merge-v1"

typedef struct pith_state {
	json_doc_t *doc;            /* owns the state tree (and nothing else) */
	json_value_t *root;         /* the state object, with state_sha256 */
	uint8_t state_hash[32];
	char state_sha256[65];
	size_t applied, invalid, equivocations, superseded;
	pith_buf_t canon;           /* the canonical bytes of root */
} pith_state_t;

/* Computes the state of subject from events (n of them, each already
 * verified, in any order, duplicates allowed) and aliases (a JSON array
 * from the newest verified bundle, or NULL for none). The state borrows
 * nothing: it may outlive the events. Returns 0 or a negative code. */
int pith_merge(const char *subject, pith_event_t *const *events, size_t n,
	       const json_value_t *aliases, pith_state_t *out, pith_err_t *err);

/* The same with the trust store whose registry keys (is_registry) may sign
 * receipts; NULL means the built-in registry key only. Nodes that are to
 * agree must agree on their registry keys (docs/merge.md, M2). */
int pith_merge_ex(const char *subject, pith_event_t *const *events, size_t n,
		  const json_value_t *aliases, const pith_trust_t *registry,
		  pith_state_t *out, pith_err_t *err);

void pith_state_release(pith_state_t *st);

/* Canonical bytes of the state (including state_sha256). */
int pith_state_canon(const pith_state_t *st, pith_buf_t *out);

/* Which current.* list an event type feeds, or NULL if the type is unknown. */
const char *pith_merge_list_for_type(const char *event_type);

/* Chooses, deterministically, which of two valid signature blocks of one
 * event a store keeps: returns <0 if a wins, >0 if b wins, 0 if equal. */
int pith_merge_sigblock_cmp(const json_value_t *a, const json_value_t *b);

#endif
