/* The store's key schema: every column family, its keys and its values.
 * This header is the one place that says how bytes are laid out on disk;
 * docs/store.md explains the choices. Private to store/.
 *
 * A "subject key" (SKEY) is the 26-character body of a pith number followed
 * by its 4-character year: "AR7B3DEVMOTSBRCCVXUCLYSRRE2024". Body first, so
 * that a body or any prefix of one finds its records by a prefix scan; the
 * year is kept so that two subjects differing only in year (one of them
 * necessarily bogus) never share a state.
 *
 * column family  key                                   value
 * -------------  ------------------------------------  ---------------------------------
 * default        (unused; RocksDB requires it)
 * meta           "schema_version"                      STORE_SCHEMA_VERSION
 *                "count:events" / "count:records" /    8-byte big-endian unsigned
 *                "count:bundles"
 * events         event id digest (32 raw bytes)        created_us(8, as in time keys)
 * subj           SKEY(30) created_at(20) id(32) = 82   empty
 * time           created_us(8, big-endian, sign bit    empty
 *                flipped) id(32) = 40
 * bundles        SKEY(30)                              canonical JSON of the newest
 *                                                      verified registry bundle
 * aliases        alias_kind '\0' alias_value '\0'      claim rank: source (1 byte),
 *                full pith number (36)                 built_at (8, as in time keys)
 * states         SKEY(30)                              canonical state JSON
 * records        SKEY(30)                              record summary: event_count (8,
 *                                                      big-endian), state hash (32),
 *                                                      has_bundle (1), claim count (2,
 *                                                      big-endian), then per claimed
 *                                                      alias: length (1), kind '\0' value
 * bundle_index   't' built_us(8, as in time keys)      SKEY(30)
 *                bundle_sha256(32) = 41
 *                'h' bundle_sha256(32) = 33            built_us(8, as in time keys) SKEY(30)
 * docs           created_us(8) id(32) = 40, the same   canonical JSON of the whole event,
 *                key as in time                        signature block included
 * states.bulk,   as states, aliases, events: only while a new node's first
 * aliases.bulk,  catch-up writes them aside and states, aliases, events
 * events.bulk    are empty (side.c)
 * changes        's' seq(8, big-endian) = 9            SKEY(30) CHANGE
 *                'p' SKEY(30) = 31                     seq(8, big-endian) CHANGE
 *   CHANGE: state hash(32), then, when the record has a bundle, its
 *   bundle_sha256(32) and its built_at as the bundle's own text (the rest
 *   of the value, 20 to STORE_BUILT_AT_MAX bytes)
 *
 * created_at in subj keys is the event's own "YYYY-MM-DDTHH:MM:SSZ" text,
 * whose byte order is time order. The time index is the time-ordered list
 * of all event ids used by set reconciliation (issue 5): keep its layout.
 *
 * Event documents are kept in time order (docs), found by id through
 * events: a peer catching up asks for events in time order, so a served
 * block holds the next events it asks for, and a fresh node that stores
 * them in that order writes files that do not overlap the ones before,
 * which compaction moves down instead of rewriting (docs/store.md).
 * Schema 4 moved them there; opening a schema-2 or 3 store read-write
 * moves them (store_docs_upgrade), read-only reads them where they are.
 *
 * bundle_index lists each record's newest bundle twice: in (built_at,
 * bundle_sha256) order ('t' keys: the items of bundle reconciliation, bulk
 * loaded at start) and by hash ('h' keys: which record a reconciled hash
 * names). A commit that stores a newer bundle deletes the old bundle's two
 * entries and puts the new ones in the same WriteBatch. Schema 3 added it;
 * opening a schema-2 store read-write builds it from the bundles and
 * writes "3" (a read-only open of a schema-2 store works without it).
 *
 * changes is the change log (the HTTP change feed, docs/upstream.md): a
 * commit that changes a record (a new event of it stored, or a newer
 * bundle) takes the next number of a sequence for it, puts 's' seq and
 * 'p' SKEY, and deletes the record's previous 's' entry, all in the
 * commit's WriteBatch: each record is listed once, at its latest change,
 * and 's' keys in order are the order of commits. The sequence is not
 * stored apart: at open it is the greatest 's' key (the latest change is
 * never deleted, only superseded by a greater one). The entry carries
 * what a follower compares (state hash, the newest bundle's hash and
 * built_at), so the feed is one range scan. Schema 5 added it; opening a
 * schema-4 store read-write logs every record once, in SKEY order
 * (store_changes_build), and writes "5"; a read-only open goes without.
 *
 * Schema 6 changes no layout: it says that every stored event and bundle
 * passes the timestamp rule (docs/merge.md, T-*: pith_time_parse_valid).
 * Opening a schema-5 store read-write removes those that do not, with
 * their index entries, recomputes their records and logs them
 * (store_time_rule_upgrade), and writes "6"; a read-only open reads a
 * schema-5 store as it is. */
#ifndef PITH_STORE_KEYS_H
#define PITH_STORE_KEYS_H

#include <stdint.h>
#include <string.h>

#include "ids.h"

#define STORE_SCHEMA_VERSION "6" /* 2: alias claims per record; 3: bundle_index; 4: docs;
				  * 5: changes; 6: only valid timestamps */
#define STORE_SCHEMA_5 "5"       /* opened and upgraded to 6 (items outside the timestamp
				  * rule removed, their records recomputed) */
#define STORE_SCHEMA_4 "4"       /* the same, after building the change log */
#define STORE_SCHEMA_3 "3"       /* the same, after moving documents to docs */
#define STORE_SCHEMA_2 "2"       /* the same, after building bundle_index */

enum store_cf {
	STORE_CF_DEFAULT = 0,
	STORE_CF_META,
	STORE_CF_EVENTS,
	STORE_CF_SUBJ,
	STORE_CF_TIME,
	STORE_CF_BUNDLES,
	STORE_CF_ALIASES,
	STORE_CF_STATES,
	STORE_CF_RECORDS,
	STORE_CF_BUNDLE_INDEX, /* a read-only open of a schema-2 store goes without it */
	STORE_CF_DOCS,         /* and of a schema-2 or 3 store without this one */
	STORE_CF_CHANGES,      /* and of a schema-2, 3 or 4 store without this one */
	STORE_NCF
};

/* Column family names, indexed by enum store_cf. */
static const char *const store_cf_names[STORE_NCF] = {
	"default", "meta", "events", "subj", "time",
	"bundles", "aliases", "states", "records", "bundle_index", "docs", "changes",
};

#define STORE_ID_LEN 32
#define STORE_SKEY_LEN (PITH_BODY_LEN + 4)         /* 30 */
#define STORE_CREATED_LEN 20                       /* YYYY-MM-DDTHH:MM:SSZ */
#define STORE_SUBJ_KEY_LEN (STORE_SKEY_LEN + STORE_CREATED_LEN + STORE_ID_LEN) /* 82 */
#define STORE_TIME_KEY_LEN (8 + STORE_ID_LEN)      /* 40 */
#define STORE_BIDX_TIME 't'
#define STORE_BIDX_HASH 'h'
#define STORE_BIDX_TIME_LEN (1 + 8 + STORE_ID_LEN) /* 41 */
#define STORE_BIDX_HASH_LEN (1 + STORE_ID_LEN)     /* 33 */
#define STORE_BIDX_HASH_VAL_LEN (8 + STORE_SKEY_LEN) /* 38 */
#define STORE_CHG_SEQ 's'
#define STORE_CHG_PITH 'p'
#define STORE_CHG_SEQ_LEN (1 + 8)                  /* 9 */
#define STORE_CHG_PITH_LEN (1 + STORE_SKEY_LEN)    /* 31 */
#define STORE_CHG_MIN 32                           /* CHANGE without a bundle */
#define STORE_CHG_MAX (32 + 32 + STORE_BUILT_AT_MAX) /* CHANGE with one */
#define STORE_ALIAS_KEY_MAX (16 + 1 + 200)  /* kind '\0' value */
#define STORE_ALIAS_ENTRY_MAX (STORE_ALIAS_KEY_MAX + 1 + PITH_NUMBER_LEN)
#define STORE_ALIAS_RANK_LEN 9
#define STORE_MAX_CLAIMS 1024                /* aliases indexed per record */

/* Alias claim sources, in rising priority (docs/store.md, "Aliases"). */
#define STORE_ALIAS_DERIVED 1 /* derived from an applied record_created */
#define STORE_ALIAS_BUNDLE 2  /* listed in a verified registry bundle */

/* records value: the fixed part, before the claimed aliases */
#define STORE_REC_LEN (8 + 32 + 1 + 2)

#define STORE_META_SCHEMA "schema_version"
#define STORE_META_EVENTS "count:events"
#define STORE_META_RECORDS "count:records"
#define STORE_META_BUNDLES "count:bundles"

static inline void store_be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static inline uint64_t store_be64_get(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* SKEY of a full pith number "pith:YYYY:BODY" (assumed well formed). */
static inline void store_skey_make(const char *pith_number, uint8_t out[STORE_SKEY_LEN])
{
	memcpy(out, pith_number + 10, PITH_BODY_LEN);
	memcpy(out + PITH_BODY_LEN, pith_number + 5, 4);
}

/* The full pith number of an SKEY. */
static inline void store_skey_pith(const uint8_t skey[STORE_SKEY_LEN],
				   char out[PITH_NUMBER_LEN + 1])
{
	memcpy(out, "pith:", 5);
	memcpy(out + 5, skey + PITH_BODY_LEN, 4);
	out[9] = ':';
	memcpy(out + 10, skey, PITH_BODY_LEN);
	out[PITH_NUMBER_LEN] = 0;
}

static inline void store_subj_key_make(const uint8_t skey[STORE_SKEY_LEN],
				       const char created_at[STORE_CREATED_LEN],
				       const uint8_t id[STORE_ID_LEN],
				       uint8_t out[STORE_SUBJ_KEY_LEN])
{
	memcpy(out, skey, STORE_SKEY_LEN);
	memcpy(out + STORE_SKEY_LEN, created_at, STORE_CREATED_LEN);
	memcpy(out + STORE_SKEY_LEN + STORE_CREATED_LEN, id, STORE_ID_LEN);
}

/* Microseconds as an 8-byte key whose byte order is numeric order, also
 * for times before 1970. */
static inline void store_time_put(uint8_t p[8], int64_t us)
{
	store_be64_put(p, (uint64_t)us ^ (UINT64_C(1) << 63));
}

static inline int64_t store_time_get(const uint8_t p[8])
{
	return (int64_t)(store_be64_get(p) ^ (UINT64_C(1) << 63));
}

static inline void store_time_key_make(int64_t us, const uint8_t id[STORE_ID_LEN],
				       uint8_t out[STORE_TIME_KEY_LEN])
{
	store_time_put(out, us);
	memcpy(out + 8, id, STORE_ID_LEN);
}

/* An events value of 8 bytes (schema 4) is the event's created_us: with
 * the id it makes the key of its document in docs (tk, 1 returned). A
 * longer one is the document itself (schemas 2 and 3; no event is 8
 * bytes long): 0 returned. */
static inline int store_doc_key(const void *v, size_t vl, const uint8_t id[STORE_ID_LEN],
				uint8_t tk[STORE_TIME_KEY_LEN])
{
	if (vl != 8)
		return 0;
	memcpy(tk, v, 8);
	memcpy(tk + 8, id, STORE_ID_LEN);
	return 1;
}

#endif
