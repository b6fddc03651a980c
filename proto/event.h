/* Signed events (spec section 4): parse, check shape, recompute the
 * content hash and event id, check the signer against the trust store and
 * verify the signature. Nothing that fails here may be stored. */
#ifndef PITH_EVENT_H
#define PITH_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "ids.h"
#include "json.h"
#include "trust.h"

#define PITH_EVENT_MAX_BYTES (1u << 20) /* one event, as JSON text */
#define PITH_EVENT_MAX_DEPTH 32

typedef struct pith_event {
	json_doc_t *doc;           /* owns everything below unless borrowed */
	const json_value_t *root;  /* the whole event object */
	uint8_t content_hash[32];
	char event_id[PITH_EVENT_ID_LEN + 1];
	char subject[PITH_NUMBER_LEN + 1];
	char created_at[24];       /* as written: YYYY-MM-DDTHH:MM:SSZ */
	int64_t created_us;
	int64_t signed_us;
	const char *event_type;
	const char *target;
	const char *signer_fp;
	const char *signer_key_id;
	const json_value_t *signature; /* the signature block */
	int borrowed;              /* doc belongs to someone else */
	/* record_created: its canonical_record's SHA-256 (hex) and pith
	 * number once computed from root (pith_receipt_precheck_prepare, on a
	 * validating thread), so that the merge does not canonicalise and hash
	 * the record again; empty until then (the merge computes them) */
	char rec_hex[65];
	char rec_pith[PITH_NUMBER_LEN + 1];
} pith_event_t;

/* Which check failed, for messages and per-reason counters. */
typedef enum pith_event_check {
	PITH_CHECK_OK = 0,
	PITH_CHECK_JSON,        /* not well-formed JSON within limits */
	PITH_CHECK_SHAPE,       /* required field missing or of the wrong type */
	PITH_CHECK_CONTENT_HASH,/* content_sha256 differs from the recomputed hash */
	PITH_CHECK_EVENT_ID,    /* event_id differs from sha256:content_sha256 */
	PITH_CHECK_KEY,         /* signer key not trusted / key id mismatch */
	PITH_CHECK_ROTATED,     /* signer key had rotated */
	PITH_CHECK_SIGNATURE,   /* Ed25519 signature does not verify */
	PITH_CHECK_NCHECKS
} pith_event_check_t;

const char *pith_event_check_name(pith_event_check_t c);

/* Parses and fully verifies one event from JSON text. On success *out is
 * a new event owning its doc. On failure returns negative, *failed names
 * the check and err says what and where. */
int pith_event_parse(const uint8_t *buf, size_t len, const pith_trust_t *trust,
		     pith_event_t **out, pith_event_check_t *failed, pith_err_t *err);

/* pith_event_parse with the Ed25519 check left for the caller: every
 * other check is made, and on success *defer holds the signature check,
 * ready for pith_sig_check_many with others (validating threads verify
 * many events together to share work). The event is valid only once
 * pith_event_sig_result says 0; its failure is pith_event_parse's, check
 * and message alike. With trust NULL nothing is checked and *defer says
 * so (key NULL, ok 1). With canon non-NULL, the event's canonical bytes
 * (pith_event_canon's) are appended to it on success, written in the same
 * pass as the hashed ones; on failure it is left empty. */
int pith_event_parse_deferred(const uint8_t *buf, size_t len, const pith_trust_t *trust,
			      pith_event_t **out, pith_event_check_t *failed, pith_err_t *err,
			      pith_sig_check_t *defer, pith_buf_t *canon);
int pith_event_sig_result(const pith_event_t *ev, const pith_sig_check_t *sc,
			  pith_event_check_t *failed, pith_err_t *err);

/* The same for an event object already parsed (e.g. inside a bundle). The
 * event borrows root's doc, which must outlive it. */
int pith_event_verify_value(const json_value_t *root, const pith_trust_t *trust,
			    pith_event_t **out, pith_event_check_t *failed,
			    pith_err_t *err);

/* Re-reads an event this node stored earlier (already verified when it
 * was stored): parses and recomputes ids but skips the trust and signature
 * checks. For the store's own bytes only, never for peer input. */
int pith_event_parse_stored(const uint8_t *buf, size_t len, pith_event_t **out,
			    pith_err_t *err);

/* Re-reads an event from this node's own store, where it is kept under its
 * 32-byte id: parses and checks its shape, and takes content_sha256 and
 * event_id as stored once they name that id, without canonicalising and
 * hashing again (the store audit, pithctl check, still does). For the
 * store's own bytes only, never for peer input. */
int pith_event_parse_own(const uint8_t *buf, size_t len, const uint8_t id[32],
			 pith_event_t **out, pith_err_t *err);

void pith_event_free_(pith_event_t *ev);
#define pith_event_free(e) do { pith_event_free_(e); (e) = NULL; } while (0)

/* The hashed part: canonical JSON of the event without signature,
 * content_sha256 and event_id. */
int pith_event_content_bytes(const json_value_t *ev, pith_buf_t *out);

/* Canonical JSON of the whole event (with its signature block). */
int pith_event_canon(const pith_event_t *ev, pith_buf_t *out);

/* Signs an event object in place: fills signer key fields, defaults
 * (supersedes [], prev_event null, schema_version "1.0", created_at now),
 * content_sha256, event_id and the signature block. */
int pith_event_sign(json_doc_t *doc, json_value_t *ev, const pith_key_t *key,
		    const uint8_t secret[64], pith_err_t *err);

#endif
