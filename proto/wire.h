/* The peer-to-peer wire protocol (docs/wire.md): msgpack frames behind a
 * 4-byte length prefix. Pure: bytes in, fixed-size structs or errors out.
 *
 * A frame is a big-endian uint32 L (1 <= L <= the reader's max_frame)
 * followed by L bytes holding exactly one msgpack array whose first element
 * is the message type. Decoding first walks the payload with a bounded
 * scanner that checks every length and every array/map count against the
 * bytes that remain (and the depth), before msgpack-c allocates anything;
 * then it unpacks with msgpack-c and validates the fields into wire_msg_t.
 *
 * Errors: PITH_ETRUNC when the bytes end inside a frame or a msgpack
 * object ("truncated"), PITH_ETOOBIG when a length or count is over a limit,
 * PITH_EINVAL for anything else malformed (wrong type, bad value, unknown
 * message). Messages name the field and byte offset. */
#ifndef PITH_WIRE_H
#define PITH_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "ids.h"

#define WIRE_VERSION 1
#define WIRE_HEADER_LEN 4

/* Hard maxima: the fixed-size fields of wire_msg_t are this big, and a
 * reader's limits may only lower them. */
#define WIRE_FRAME_MAX_HARD (16u << 20) /* payload bytes */
#define WIRE_IDS_MAX 4096               /* ids per ANNOUNCE/GET/NOTFOUND/INV */
#define WIRE_PEERS_MAX 64               /* addresses per PEERS */
#define WIRE_BUNDLE_REFS_MAX 64         /* refs per BUNDLE_ANNOUNCE/BUNDLE_GET */
#define WIRE_NETID_MAX 64
#define WIRE_AGENT_MAX 64
#define WIRE_REASON_MAX 128
#define WIRE_HTTP_URL_MAX 200           /* HELLO's http_url */
#define WIRE_DEPTH_MAX 4                /* nested arrays in any message */
#define WIRE_RECON_MAX (1u << 20)       /* bytes of one RECON message's data */
#define WIRE_ROOT_DOC_MAX 4096          /* bytes of ROOT's signed root document */

/* Default limits (wire_limits_default). */
#define WIRE_FRAME_MAX_DEFAULT (4u << 20)

/* Message types. 32..47 belong to set reconciliation (docs/sync.md); a
 * peer may send them only if its HELLO carried WIRE_FEAT_SYNC and ours did
 * too. 32 is RECON (events); 33 RECON_BUNDLES (the same fields, over each
 * record's newest bundle), which also needs WIRE_FEAT_BUNDLE_SYNC on both
 * sides; 34..47 stay reserved and decode as unknown (PITH_EINVAL). */
typedef enum wire_type {
	WIRE_HELLO = 1,
	WIRE_AUTH = 2,
	WIRE_PING = 3,
	WIRE_PONG = 4,
	WIRE_BYE = 5,
	WIRE_PEERS_REQ = 6,
	WIRE_PEERS = 7,
	WIRE_ANNOUNCE = 8,
	WIRE_GET = 9,
	WIRE_EVENT = 10,
	WIRE_NOTFOUND = 11,
	WIRE_BUNDLE_ANNOUNCE = 12,
	WIRE_BUNDLE_GET = 13,
	WIRE_BUNDLE = 14,
	WIRE_INV_REQ = 15,
	WIRE_INV = 16,
	WIRE_ROOT = 17, /* the sender's latest signed state root (docs/state-root.md) */
	WIRE_TYPE_LAST_DEFINED = WIRE_ROOT, /* last of the contiguous 1..17 */
	WIRE_SYNC_FIRST = 32,
	WIRE_RECON = 32,
	WIRE_RECON_BUNDLES = 33,
	WIRE_SYNC_LAST = 47,
	WIRE_TYPE_MAX = WIRE_SYNC_LAST, /* size tables indexed by type with this + 1 */
} wire_type_t;

/* HELLO feature bits. */
#define WIRE_FEAT_SYNC (UINT64_C(1) << 0) /* speaks RECON (docs/sync.md) */
#define WIRE_FEAT_BUNDLE_SYNC (UINT64_C(1) << 1) /* with SYNC: speaks RECON_BUNDLES */
/* charges bundle refs by the message (BUNDLE_ANNOUNCE 1 + refs/16,
 * BUNDLE_GET 1 + refs/4) and serves BUNDLE_GETs from a bounded queue as
 * its output drains: a peer may announce and ask at that pace
 * (docs/wire.md, "BUNDLE_ANNOUNCE") */
#define WIRE_FEAT_BUNDLE_BULK (UINT64_C(1) << 2)
/* with SYNC: speaks RECON message version 2 (docs/sync.md, "Version 2");
 * a session between two such nodes uses it, any other version 1 */
#define WIRE_FEAT_RECON_V2 (UINT64_C(1) << 3)
/* accepts ROOT (docs/wire.md, "ROOT"): a peer sends ROOT only to a
 * node whose HELLO set this bit */
#define WIRE_FEAT_ROOT (UINT64_C(1) << 4)

/* BYE codes. */
enum {
	WIRE_BYE_SHUTDOWN = 1,
	WIRE_BYE_PROTOCOL = 2,  /* a malformed or unexpected message */
	WIRE_BYE_BANNED = 3,
	WIRE_BYE_FULL = 4,      /* no room for another peer */
	WIRE_BYE_DUPLICATE = 5, /* already connected to this node */
	WIRE_BYE_NETWORK = 6,   /* different network id */
	WIRE_BYE_VERSION = 7,
	WIRE_BYE_SELF = 8,      /* connected to itself */
	WIRE_BYE_TIMEOUT = 9,
	WIRE_BYE_SLOW = 10,     /* does not read what it asked for */
};

typedef struct wire_limits {
	size_t max_frame;  /* payload bytes of one frame, <= WIRE_FRAME_MAX_HARD */
	size_t max_ids;    /* ids per message, <= WIRE_IDS_MAX */
	size_t max_peers;  /* <= WIRE_PEERS_MAX */
	size_t max_refs;   /* <= WIRE_BUNDLE_REFS_MAX */
	size_t max_buffer; /* bytes a reader holds unconsumed, >= max_frame + 4 */
} wire_limits_t;

extern const wire_limits_t wire_limits_default;

typedef struct wire_addr {
	uint8_t ip[16]; /* IPv4 in the first 4 bytes when ip_len is 4 */
	uint8_t ip_len; /* 4 or 16 */
	uint16_t port;  /* 1..65535 */
} wire_addr_t;

typedef struct wire_bundle_ref {
	char pith_number[PITH_NUMBER_LEN + 1];
	int64_t built_us;  /* BUNDLE_ANNOUNCE only */
	uint8_t sha[32];   /* bundle_sha256; BUNDLE_ANNOUNCE only */
} wire_bundle_ref_t;

/* One decoded message. Byte ranges (ids, json) borrow the decoded payload:
 * they stay valid until the reader is fed or advanced again (or, for
 * wire_decode, as long as the caller's buffer). Everything else is copied
 * into the struct. For wire_encode the caller fills the same fields. */
typedef struct wire_msg {
	wire_type_t type;
	union {
		struct {
			uint32_t version;
			uint64_t features;
			char network_id[WIRE_NETID_MAX + 1];
			uint8_t node_pk[32];
			uint8_t nonce[32];
			uint16_t listen_port; /* 0: does not accept connections */
			char agent[WIRE_AGENT_MAX + 1];
			/* optional 9th field: the sender's public HTTP base
			 * URL, "" if none. Advisory: a decoder drops one that
			 * is not a wire_http_url_is_valid string (and sets
			 * http_url_dropped) and the HELLO still stands. */
			char http_url[WIRE_HTTP_URL_MAX + 1];
			int http_url_dropped; /* decode only */
		} hello;
		struct {
			uint8_t sig[64];
		} auth;
		struct {
			uint64_t nonce;
		} ping; /* PING and PONG */
		struct {
			uint32_t code;
			char reason[WIRE_REASON_MAX + 1];
		} bye;
		struct {
			size_t n;
			wire_addr_t addrs[WIRE_PEERS_MAX];
		} peers;
		struct {
			const uint8_t *ids; /* n * 32 bytes */
			size_t n;
		} ids; /* ANNOUNCE, GET, NOTFOUND */
		struct {
			uint8_t id[32];
			const uint8_t *json;
			size_t len;
		} event;
		struct {
			size_t n;
			wire_bundle_ref_t refs[WIRE_BUNDLE_REFS_MAX];
		} bundles; /* BUNDLE_ANNOUNCE, BUNDLE_GET */
		struct {
			char pith_number[PITH_NUMBER_LEN + 1];
			const uint8_t *json;
			size_t len;
		} bundle;
		struct {
			int64_t after_us;
			uint8_t after_id[32];
			uint32_t limit;
		} inv_req;
		struct {
			const uint8_t *ids;
			size_t n;
			int64_t next_us;
			uint8_t next_id[32];
			int done;
		} inv;
		struct {
			uint64_t session;    /* >= 1; odd: the dialler's, even: the acceptor's */
			const uint8_t *data; /* one reconciliation message; len 0: the
						sender ends the session */
			size_t len;          /* <= WIRE_RECON_MAX */
			uint64_t items;      /* the sender's item count (progress only) */
		} recon; /* RECON and RECON_BUNDLES */
		struct {
			const uint8_t *doc; /* the signed root document's exact bytes
					       (docs/state-root.md section 5), 1 to
					       WIRE_ROOT_DOC_MAX; checked by the receiver
					       (pith_sr_doc_verify), not by the decoder */
			size_t len;
		} root;
	} u;
} wire_msg_t;

/* Name of a message type ("HELLO"), "reserved" or "unknown". */
const char *wire_type_name(int type);

/* Decodes one frame payload (without its length prefix). Pure and
 * re-entrant; lim may be NULL for the defaults. Returns 0 and fills *out,
 * or a negative code with err naming the field and offset. */
int wire_decode(const uint8_t *payload, size_t len, const wire_limits_t *lim,
		wire_msg_t *out, pith_err_t *err);

/* Appends one whole frame (length prefix and payload) for m to out.
 * Returns 0, PITH_EINVAL if m breaks a rule the decoder enforces (so a
 * node never sends what its peers must refuse), or PITH_ENOMEM. */
int wire_encode(const wire_msg_t *m, pith_buf_t *out);

/* ---- Incremental reader ---------------------------------------------------
 * Feed bytes as they arrive, pull whole messages. The reader holds the
 * limits; its first error is sticky (every later call returns it). */
typedef struct wire_reader wire_reader_t;

/* A new reader with lim (copied; NULL for defaults). NULL on OOM or if lim
 * is out of range. */
wire_reader_t *wire_reader_new(const wire_limits_t *lim);
void wire_reader_free_(wire_reader_t *r);
#define wire_reader_free(r) do { wire_reader_free_(r); (r) = NULL; } while (0)

/* Appends n bytes. PITH_ETOOBIG (sticky) if the unconsumed bytes would
 * exceed max_buffer: feed at most wire_reader_room() bytes at a time. */
int wire_reader_feed(wire_reader_t *r, const uint8_t *p, size_t n);
/* How many bytes the next feed may add. */
size_t wire_reader_room(const wire_reader_t *r);

/* Pulls the next message: 1 with *out filled (borrowing the reader's
 * buffer until the next feed or next call), 0 if a whole frame is not
 * buffered yet, or a negative sticky error. An over-long length prefix is
 * refused as soon as its 4 bytes arrive. frame_len (may be NULL) gets the
 * frame's size including the prefix. */
int wire_reader_next(wire_reader_t *r, wire_msg_t *out, size_t *frame_len);

/* Call when the stream ended: 0 if it ended between frames, PITH_ETRUNC if
 * inside one (or the sticky error). */
int wire_reader_finish(wire_reader_t *r, pith_err_t *err);

/* The sticky error (0 if none); err (may be NULL) gets its message. */
int wire_reader_error(const wire_reader_t *r, pith_err_t *err);

/* Bytes buffered and not yet consumed by a pulled message. */
size_t wire_reader_pending(const wire_reader_t *r);

/* ---- Handshake ------------------------------------------------------------ */

/* The bytes an AUTH signature covers (docs/wire.md, "AUTH"): a context
 * string, the network id, both node keys and both nonces, so that a
 * signature proves the signer's key, is fresh for this connection, and
 * cannot be replayed in the other direction or on another network.
 * out needs WIRE_AUTH_MSG_MAX bytes; returns the length. */
#define WIRE_AUTH_CONTEXT "pith-mirror/wire/1 auth"
#define WIRE_AUTH_MSG_MAX (sizeof(WIRE_AUTH_CONTEXT) + 1 + WIRE_NETID_MAX + 4 * 32)
size_t wire_auth_message(const char *network_id, const uint8_t signer_pk[static 32],
			 const uint8_t signer_nonce[static 32],
			 const uint8_t verifier_pk[static 32],
			 const uint8_t verifier_nonce[static 32], uint8_t *out);

/* Checks a network id: 1..WIRE_NETID_MAX of [A-Za-z0-9._-]. */
int wire_netid_is_valid(const char *s);

/* Checks a public HTTP base URL (HELLO's http_url, a mirror's entry in
 * /pith-mirrors.json): at most WIRE_HTTP_URL_MAX bytes; "http://" or
 * "https://"; a host name ([A-Za-z0-9.-]+) or a bracketed IPv6 address;
 * an optional port 1..65535; an optional path of printable ASCII without
 * space, quotes, <>\^`{|}, '@' (no credentials), '?' or '#' (no query or
 * fragment). */
int wire_http_url_is_valid(const char *s);

#endif
