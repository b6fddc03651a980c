/* The node's state root (issue 57, docs/state-root.md section 10 and
 * "In pithd"): the tree over every record's state, kept current by
 * following the store's change log, signed with the node's own key at
 * most once per interval and on demand, the last N signed documents kept,
 * and the answers of /api/root, /api/root/history, /api/root/range and
 * /api/proof/{ID}.
 *
 * No lock: one thread (pithd's loop) makes every call. The tree is built
 * from the records family when made (about 1 us a record, and a scan),
 * then told of each change the log lists (pith_sr_upsert: a walk down,
 * no hashing); hashing waits for a read of the root, a proof, a range
 * answer or a signing (pith_sr_flush), which rehashes once what every
 * change since the last one touched. */
#ifndef PITH_NODE_ROOT_H
#define PITH_NODE_ROOT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "stateroot.h"
#include "store.h"

#define NODEROOT_INTERVAL_DEFAULT 60 /* seconds between two signings, at most one */
#define NODEROOT_HISTORY_DEFAULT 64  /* signed documents kept */
#define NODEROOT_HISTORY_MAX 4096
#define NODEROOT_DEMAND_GAP_US 1000000 /* a proof or /api/root signs at most once a second */
#define NODEROOT_VIEW_US 1000000 /* range and proof answers reuse the last hash this long */

typedef struct noderoot_opts {
	unsigned interval_s; /* 0: the default */
	unsigned history;    /* 0: the default; cut to NODEROOT_HISTORY_MAX */
	unsigned bucket;     /* the tree's bucket size (0: proto's default) */
	/* told after each new signing (may be NULL): the mesh sends the
	 * document to its peers (docs/state-root.md section 14) */
	void (*on_signed)(void *arg);
	void *arg;
} noderoot_opts_t;

typedef struct noderoot noderoot_t;

typedef struct noderoot_stats {
	uint64_t records;      /* leaves, as of the last flush */
	uint64_t cursor;       /* the change log's last sequence number the tree was told of */
	uint64_t changes;      /* changes told since start */
	uint64_t signed_docs;  /* documents signed since start */
	uint64_t rebuilds;     /* builds from the records family (the first one included) */
	uint64_t flushes;
	double flush_seconds;  /* the last flush's time */
	double build_seconds;  /* the last build's */
	size_t tree_bytes;     /* pith_sr_mem_bytes */
	size_t kept;           /* signed documents in the history */
} noderoot_stats_t;

/* Builds the tree from st's records and remembers the change log's end.
 * pk/sk: the node's own key (DATA/node.key); its key id is "node-" and
 * the fingerprint. NULL with err on failure. */
noderoot_t *noderoot_new(store_t *st, const uint8_t pk[32], const uint8_t sk[64],
			 const noderoot_opts_t *o, pith_err_t *err);
void noderoot_free_(noderoot_t *r);
#define noderoot_free(x) do { noderoot_free_(x); (x) = NULL; } while (0)

/* Tells the tree of every change the log lists after the last one it was
 * told of (at most limit of them, 0: all). How many, or a negative code.
 * Nothing while readers' answers use the last hash's view (for
 * NODEROOT_VIEW_US after it): their range answers and proofs are of one
 * tree, and a reader asking many times makes at most one hash a second. */
long noderoot_catch_up(noderoot_t *r, size_t limit, pith_err_t *err);

/* Catches up and rehashes: the current root, its record count and the
 * change log position it covers. A mismatch between tree and store
 * (PITH_EMISMATCH: a change it was not told of) rebuilds the tree once. */
int noderoot_current(noderoot_t *r, uint8_t root[32], uint64_t *count, uint64_t *cursor,
		     pith_err_t *err);

/* Signs the current root if it differs from the last signed one (force
 * 1: always; NODEROOT_FORCE_MOVED: also when only the cursor moved), at a moment no commit landed between the catch-up and the end
 * of the hash; 1 when it signed, 0 when nothing changed or a commit
 * landed (try again), negative on error. now_unix_us: the wall clock. */
int noderoot_sign(noderoot_t *r, int64_t now_unix_us, int force, pith_err_t *err);
/* The loop's tick: signs when the interval since the last signing has
 * passed (the first time at once). */
void noderoot_tick(noderoot_t *r, int64_t now_unix_us);
#define NODEROOT_FORCE_MOVED 2

/* Asks for a signing now, on demand (a reconciliation that found nothing
 * to exchange, docs/state-root.md section 14): at once if the last one on
 * demand is NODEROOT_DEMAND_GAP_US old, else at the first tick after; it
 * signs when the root or its cursor moved since the last document. */
void noderoot_want(noderoot_t *r, int64_t now_unix_us);

/* The latest signed document: 1 with its bytes (valid until the next
 * signing), root, record count and cursor (0: null); 0 if none yet. */
int noderoot_latest(const noderoot_t *r, const char **doc, size_t *len, uint8_t root[32],
		    uint64_t *count, uint64_t *cursor);

/* The answers (docs/http.md, "State root"). Each fills body with JSON and
 * returns the HTTP status (200, 400, 404, 503), why saying what for
 * another; etag (65 bytes) gets a hex ETag for a 200, or "". */
typedef enum noderoot_what {
	NODEROOT_LATEST = 0,  /* /api/root[?cursor=C] */
	NODEROOT_HISTORY,     /* /api/root/history */
	NODEROOT_RANGE,       /* /api/root/range?prefix=BITS */
	NODEROOT_PROOF,       /* /api/proof/{ID} */
} noderoot_what_t;
int noderoot_answer(noderoot_t *r, noderoot_what_t what, const char *arg, int64_t now_unix_us,
		    pith_buf_t *body, char etag[65], char *why, size_t whylen);

/* The latest signed document's summary for /pith-mirrors.json: 1 and the
 * fields, 0 when none is signed yet. key_hex: the node key's 64 hex. */
typedef struct noderoot_summary {
	char root_hex[65];
	uint64_t count;
	char cursor[32];
	char signed_at[32];
	char doc_hex[65];
	char key_id[PITH_KEY_ID_MAX];
	char key_hex[65];
	char fp[PITH_FP_LEN + 1];
} noderoot_summary_t;
int noderoot_summary(const noderoot_t *r, noderoot_summary_t *out);

void noderoot_stats_get(const noderoot_t *r, noderoot_stats_t *out);

#endif
