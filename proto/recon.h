/* Range-based set reconciliation over (timestamp, id) items.
 *
 * Two nodes each hold a set of items ordered by (ts, id): ts is the event's
 * created_at in microseconds, id its 32-byte event_id. They exchange
 * messages that carry, for ranges of that order, a keyed fingerprint, a
 * list of short keyed ids, or full ids, recursing only into ranges whose
 * fingerprints differ. At the end each side knows the ids it lacks (need)
 * and the ids the peer lacks (have); fetching them is the caller's job,
 * through its normal validated path. docs/sync.md explains the design and
 * specifies the message format.
 *
 * Pure: no I/O, no clock, no store. A recon_set_t is an in-memory B+tree
 * that keeps per-subtree counts and 256-bit id sums, so adding an item and
 * fingerprinting any range are O(log n); keep it current as events arrive.
 *
 * Untrusted input: every message is bounds-checked; per-message and
 * per-session limits (recon_config_t) cap bytes, ranges, ids, rounds and
 * the work one message may cause. Errors are sticky: after one, the session
 * refuses every further call with the same error. */
#ifndef PITH_RECON_H
#define PITH_RECON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

#define RECON_ID_LEN 32
#define RECON_KEY_LEN 16
/* Largest timestamp an item or a bound may carry: 2^56 - 1 microseconds
 * (about the year 4253), so a bound's delta code always fits 64 bits. */
#define RECON_TS_MAX ((UINT64_C(1) << 56) - 1)
/* Message versions: 1 ranges, fingerprints and short-id lists; 2 adds
 * the difference estimate and coded cells (docs/sync.md, "Version 2"). */
#define RECON_VERSION 0x01
#define RECON_VERSION_2 0x02
#define RECON_VERSION_MAX RECON_VERSION_2

typedef struct recon_item {
	uint64_t ts;
	uint8_t id[RECON_ID_LEN];
} recon_item_t;

/* ---- the set ---------------------------------------------------------- */

typedef struct recon_set recon_set_t;

/* An empty set, or NULL when out of memory. */
recon_set_t *recon_set_new(void);

/* Builds a set from n items that must be strictly increasing in (ts, id)
 * order, in O(n). Returns 0 and *out, PITH_EINVAL if the items are not
 * strictly increasing or a ts exceeds RECON_TS_MAX (err names the index),
 * or PITH_ENOMEM. */
int recon_set_new_sorted(recon_set_t **out, const recon_item_t *items, size_t n,
			 pith_err_t *err);

/* Adds one item in O(log n). Returns 0, PITH_EEXIST if it is already in the
 * set, PITH_EINVAL if ts > RECON_TS_MAX, or PITH_ENOMEM. */
int recon_set_add(recon_set_t *set, uint64_t ts, const uint8_t id[static RECON_ID_LEN]);

/* Removes one item in O(log n). Returns 0 or PITH_ENOTFOUND. */
int recon_set_remove(recon_set_t *set, uint64_t ts, const uint8_t id[static RECON_ID_LEN]);

/* True if the item is in the set. */
bool recon_set_has(const recon_set_t *set, uint64_t ts, const uint8_t id[static RECON_ID_LEN]);

size_t recon_set_count(const recon_set_t *set);

/* The item at position rank (0-based, in order), O(log n). Returns 0 or
 * PITH_ENOTFOUND when rank >= count. */
int recon_set_item_at(const recon_set_t *set, size_t rank, recon_item_t *out);

/* Calls fn with every item in order; stops early, returning what fn
 * returned, when fn returns non-zero. Do not change set from fn. */
int recon_set_each(const recon_set_t *set, int (*fn)(void *arg, const recon_item_t *it),
		   void *arg);

/* Bytes held by the set's nodes (for status and benchmarks). */
size_t recon_set_memory(const recon_set_t *set);

void recon_set_free_(recon_set_t *set);
#define recon_set_free(s) do { recon_set_free_(s); (s) = NULL; } while (0)

/* ---- limits and tuning ------------------------------------------------ */

typedef struct recon_config {
	/* Limits on what a peer can make us read, send, hold or compute. */
	size_t max_msg_bytes;       /* one message, in or out (default 256 KiB) */
	size_t max_ranges;          /* ranges in one incoming message (65536) */
	uint32_t max_rounds;        /* messages received in one session (4096) */
	uint64_t max_session_bytes; /* bytes in + out over a session (1 GiB) */
	uint64_t max_work;          /* work units (items hashed or visited, tree
				       descents) one incoming message may cost
				       before the rest is deferred (1,000,000) */
	/* Tuning of our own messages; the peer need not agree on these. */
	uint32_t fanout;            /* children per split range (16, 2..64) */
	uint32_t list_max;          /* ranges with at most this many of our
				       items are sent as short-id lists (32) */
	uint32_t reply_max;         /* a listed range is answered with full ids
				       if we hold at most this many items in it,
				       else split again (256) */
	/* The message version: an initiator speaks this one; a responder
	 * accepts any from 1 up to it and answers in the first message's
	 * (RECON_VERSION_MAX; 1 speaks only what nodes before version 2
	 * spoke, and refuses version 2 as they do). */
	uint32_t version;
} recon_config_t;

/* Fills cfg with the defaults above. */
void recon_config_default(recon_config_t *cfg);

/* ---- sessions --------------------------------------------------------- */

typedef enum recon_role {
	RECON_INITIATOR = 1,
	RECON_RESPONDER = 2,
} recon_role_t;

typedef struct recon_session recon_session_t;

/* Ids learnt in one step; a growable array of 32-byte ids the caller owns.
 * Zero-initialise (RECON_IDS_INIT); recon_ids_release frees it. ts[i] is
 * ids[i]'s item timestamp where the session knows it (the have list: our
 * own items), RECON_TS_NONE where it does not (the need list: a REPLY
 * carries ids only). */
typedef struct recon_ids {
	uint8_t (*ids)[RECON_ID_LEN];
	uint64_t *ts;
	size_t n, cap;
} recon_ids_t;
#define RECON_IDS_INIT {NULL, NULL, 0, 0}
#define RECON_TS_NONE UINT64_MAX
void recon_ids_release(recon_ids_t *ids);

/* Per-session counters, for logs, status and benchmarks. */
typedef struct recon_stats {
	uint32_t rounds_in, rounds_out;  /* messages received / produced */
	uint64_t bytes_in, bytes_out;
	uint64_t have, need;             /* ids reported so far */
	uint64_t deferred;               /* times a message hit a limit and
					    deferred the rest of the key space */
	uint32_t version;                /* the session's message version (0:
					    no message received yet) */
	uint32_t cells_failed;           /* coded ranges that did not decode */
	double estimate;                 /* estimated differences (version 2;
					    0 if none made) */
} recon_stats_t;

/* A session over set, which must outlive it. The set may change between
 * steps (events keep arriving); the protocol tolerates that, at worst
 * reporting an id that has meanwhile arrived. cfg may be NULL (defaults);
 * it is copied. key (RECON_KEY_LEN bytes) keys the fingerprints and short
 * ids: an initiator passes a fresh secret (NULL: random bytes from
 * libsodium) and sends it in its first message; a responder passes NULL
 * and takes the initiator's. Returns NULL when out of memory or when cfg is
 * invalid (err says which field). */
recon_session_t *recon_session_new(const recon_set_t *set, recon_role_t role,
				   const recon_config_t *cfg,
				   const uint8_t *key, pith_err_t *err);

void recon_session_free_(recon_session_t *s);
#define recon_session_free(s) do { recon_session_free_(s); (s) = NULL; } while (0)

/* Initiator only, once: writes the first message into out (reset first).
 * Returns 0 or a negative code (sticky). */
int recon_initiate(recon_session_t *s, pith_buf_t *out, pith_err_t *err);

/* Either role: processes one message from the peer. out is reset and gets
 * the reply; out->len == 0 means there is nothing to send, and then the
 * session is done (recon_session_is_done). Ids learnt in this step are
 * appended to have (ours the peer lacks) and need (the peer's we lack);
 * either may be NULL. The same id may be reported again in a later step
 * (the caller deduplicates against its store). Returns 0, or PITH_EINVAL /
 * PITH_ETRUNC for a malformed message (err gives the byte offset),
 * PITH_ETOOBIG for a limit, PITH_ENOMEM; any error is sticky. */
int recon_respond(recon_session_t *s, const uint8_t *in, size_t len, pith_buf_t *out,
		  recon_ids_t *have, recon_ids_t *need, pith_err_t *err);

/* True once the exchange has finished (nothing more to send or expect). */
bool recon_session_is_done(const recon_session_t *s);

/* 0 or the sticky error code. */
int recon_session_error(const recon_session_t *s);

void recon_session_stats(const recon_session_t *s, recon_stats_t *out);

#endif
