/* The wire protocol: framing, a bounded msgpack scanner, msgpack-c
 * unpacking into fixed-size structs, and the incremental reader; encoding
 * is in wire_encode.c.
 * docs/wire.md is the specification; these files follow it field by field. */
#include "wire_int.h"

#include <ctype.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const wire_limits_t wire_limits_default = {
	WIRE_FRAME_MAX_DEFAULT, WIRE_IDS_MAX, WIRE_PEERS_MAX, WIRE_BUNDLE_REFS_MAX,
	WIRE_FRAME_MAX_DEFAULT + WIRE_HEADER_LEN + (64u << 10),
};

static const char *const type_names[] = {
	[WIRE_HELLO] = "HELLO",
	[WIRE_AUTH] = "AUTH",
	[WIRE_PING] = "PING",
	[WIRE_PONG] = "PONG",
	[WIRE_BYE] = "BYE",
	[WIRE_PEERS_REQ] = "PEERS_REQ",
	[WIRE_PEERS] = "PEERS",
	[WIRE_ANNOUNCE] = "ANNOUNCE",
	[WIRE_GET] = "GET",
	[WIRE_EVENT] = "EVENT",
	[WIRE_NOTFOUND] = "NOTFOUND",
	[WIRE_BUNDLE_ANNOUNCE] = "BUNDLE_ANNOUNCE",
	[WIRE_BUNDLE_GET] = "BUNDLE_GET",
	[WIRE_BUNDLE] = "BUNDLE",
	[WIRE_INV_REQ] = "INV_REQ",
	[WIRE_INV] = "INV",
	[WIRE_ROOT] = "ROOT",
	[WIRE_RECON] = "RECON",
	[WIRE_RECON_BUNDLES] = "RECON_BUNDLES",
};

/* Array length of each defined message (the type included). HELLO may
 * carry more fields, so that a later version can extend it and still be
 * told apart by its version field: the 9th is http_url (optional, sent
 * only when set), any after it are ignored. */
const uint8_t wire_type_fields[] = {
	[WIRE_HELLO] = 8,
	[WIRE_AUTH] = 2,
	[WIRE_PING] = 2,
	[WIRE_PONG] = 2,
	[WIRE_BYE] = 3,
	[WIRE_PEERS_REQ] = 1,
	[WIRE_PEERS] = 2,
	[WIRE_ANNOUNCE] = 2,
	[WIRE_GET] = 2,
	[WIRE_EVENT] = 3,
	[WIRE_NOTFOUND] = 2,
	[WIRE_BUNDLE_ANNOUNCE] = 2,
	[WIRE_BUNDLE_GET] = 2,
	[WIRE_BUNDLE] = 3,
	[WIRE_INV_REQ] = 4,
	[WIRE_INV] = 5,
	[WIRE_ROOT] = 2,
	[WIRE_RECON] = 4,
	[WIRE_RECON_BUNDLES] = 4,
};

const char *wire_type_name(int type)
{
	if (type >= 0 && wire_type_is_defined((uint64_t)type))
		return type_names[type];
	if (type >= WIRE_SYNC_FIRST && type <= WIRE_SYNC_LAST)
		return "reserved";
	return "unknown";
}

static int limits_ok(const wire_limits_t *l)
{
	return l->max_frame >= 64 && l->max_frame <= WIRE_FRAME_MAX_HARD &&
	       l->max_ids >= 1 && l->max_ids <= WIRE_IDS_MAX &&
	       l->max_peers >= 1 && l->max_peers <= WIRE_PEERS_MAX &&
	       l->max_refs >= 1 && l->max_refs <= WIRE_BUNDLE_REFS_MAX &&
	       l->max_buffer >= l->max_frame + WIRE_HEADER_LEN;
}

/* ---- the bounded scanner -------------------------------------------------
 * Walks the msgpack bytes of one payload without allocating. Every string,
 * binary and container length is checked against the bytes that remain
 * (a container of c elements needs at least c more bytes, a map 2c) and
 * containers may nest WIRE_DEPTH_MAX deep, so that what msgpack-c then
 * allocates is bounded by the payload's size. Floats and extension types
 * are not part of the protocol and are refused here. */

static uint64_t be_get(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

static int scan(const uint8_t *p, size_t len, pith_err_t *err)
{
	uint64_t todo[WIRE_DEPTH_MAX + 1]; /* items left at each open level */
	unsigned depth = 0;
	size_t pos = 0;
	todo[0] = 1;
	for (;;) {
		while (todo[depth] == 0) {
			if (depth == 0)
				goto done;
			depth--;
		}
		todo[depth]--;
		if (pos >= len) {
			if (err)
				err->offset = pos;
			return pith_err_set(err, PITH_ETRUNC,
					    "wire: payload ends where a msgpack object should start "
					    "(byte %zu)", pos);
		}
		size_t at = pos;
		uint8_t b = p[pos++];
		size_t hdr = 0;      /* big-endian length/count bytes that follow */
		size_t skip = 0;     /* fixed bytes of a scalar */
		int kind = 0;        /* 0 scalar, 1 bytes (str/bin), 2 array, 3 map */
		uint64_t n = 0;
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			/* fixint, nil, false, true */
		} else if (b >= 0x80 && b <= 0x8f) {
			kind = 3;
			n = b & 0x0f;
		} else if (b >= 0x90 && b <= 0x9f) {
			kind = 2;
			n = b & 0x0f;
		} else if (b >= 0xa0 && b <= 0xbf) {
			kind = 1;
			n = b & 0x1f;
		} else {
			switch (b) {
			case 0xc4: kind = 1; hdr = 1; break; /* bin 8 */
			case 0xc5: kind = 1; hdr = 2; break;
			case 0xc6: kind = 1; hdr = 4; break;
			case 0xd9: kind = 1; hdr = 1; break; /* str 8 */
			case 0xda: kind = 1; hdr = 2; break;
			case 0xdb: kind = 1; hdr = 4; break;
			case 0xdc: kind = 2; hdr = 2; break; /* array 16 */
			case 0xdd: kind = 2; hdr = 4; break;
			case 0xde: kind = 3; hdr = 2; break; /* map 16 */
			case 0xdf: kind = 3; hdr = 4; break;
			case 0xcc: case 0xd0: skip = 1; break; /* uint8, int8 */
			case 0xcd: case 0xd1: skip = 2; break;
			case 0xce: case 0xd2: skip = 4; break;
			case 0xcf: case 0xd3: skip = 8; break;
			default:
				if (err)
					err->offset = at;
				return pith_err_set(err, PITH_EINVAL,
						    "wire: msgpack type byte 0x%02x at byte %zu is not "
						    "used by this protocol (float, extension or never-used)",
						    b, at);
			}
		}
		if (hdr + skip > len - pos) {
			if (err)
				err->offset = at;
			return pith_err_set(err, PITH_ETRUNC,
					    "wire: payload ends inside a msgpack header at byte %zu", at);
		}
		if (hdr) {
			n = be_get(p + pos, hdr);
			pos += hdr;
		}
		pos += skip;
		if (kind == 1) {
			if (n > len - pos) {
				if (err)
					err->offset = at;
				return pith_err_set(err, PITH_ETRUNC,
						    "wire: string/binary at byte %zu claims %llu bytes, "
						    "%zu remain", at, (unsigned long long)n, len - pos);
			}
			pos += (size_t)n;
		} else if (kind >= 2) {
			uint64_t items = kind == 3 ? 2 * n : n;
			if (items > len - pos) {
				if (err)
					err->offset = at;
				return pith_err_set(err, PITH_ETRUNC,
						    "wire: %s at byte %zu claims %llu elements, only %zu "
						    "bytes remain", kind == 3 ? "map" : "array", at,
						    (unsigned long long)n, len - pos);
			}
			if (depth + 1 > WIRE_DEPTH_MAX) {
				if (err)
					err->offset = at;
				return pith_err_set(err, PITH_ETOOBIG,
						    "wire: containers nested deeper than %d at byte %zu",
						    WIRE_DEPTH_MAX, at);
			}
			todo[++depth] = items;
		}
	}
done:
	if (pos != len) {
		if (err)
			err->offset = pos;
		return pith_err_set(err, PITH_EINVAL,
				    "wire: %zu trailing bytes after the message at byte %zu",
				    len - pos, pos);
	}
	return 0;
}

/* ---- typed fields ----------------------------------------------------------
 * Each helper checks one msgpack object and names the field on failure. */

typedef struct dctx {
	const char *msg;      /* message name for errors */
	const uint8_t *base;  /* payload start, for byte offsets of strings */
	pith_err_t *err;
} dctx_t;

static int bad(dctx_t *c, int code, const char *field, const char *what, const void *at)
{
	size_t off = at ? (size_t)((const uint8_t *)at - c->base) : 0;
	if (c->err)
		c->err->offset = off;
	if (at)
		return pith_err_set(c->err, code, "wire: %s: %s %s (byte %zu)", c->msg, field,
				    what, off);
	return pith_err_set(c->err, code, "wire: %s: %s %s", c->msg, field, what);
}

static int get_uint(dctx_t *c, const msgpack_object *o, const char *field, uint64_t max,
		    uint64_t *out)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return bad(c, PITH_EINVAL, field, "is not an unsigned integer", NULL);
	if (o->via.u64 > max)
		return bad(c, PITH_EINVAL, field, "is out of range", NULL);
	*out = o->via.u64;
	return 0;
}

static int get_int64(dctx_t *c, const msgpack_object *o, const char *field, int64_t *out)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*out = o->via.i64;
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return bad(c, PITH_EINVAL, field, "is not an integer", NULL);
	if (o->via.u64 > INT64_MAX)
		return bad(c, PITH_EINVAL, field, "is out of range", NULL);
	*out = (int64_t)o->via.u64;
	return 0;
}

/* A bin of exactly len bytes (len > 0) into out. */
static int get_bin_fixed(dctx_t *c, const msgpack_object *o, const char *field, size_t len,
			 uint8_t *out)
{
	if (o->type != MSGPACK_OBJECT_BIN)
		return bad(c, PITH_EINVAL, field, "is not binary", NULL);
	if (o->via.bin.size != len) {
		char what[64];
		snprintf(what, sizeof(what), "has %u bytes, expected %zu", o->via.bin.size, len);
		return bad(c, PITH_EINVAL, field, what, o->via.bin.ptr);
	}
	memcpy(out, o->via.bin.ptr, len);
	return 0;
}

/* A bin holding n ids of 32 bytes, min_n <= n <= max_n; borrowed. */
static int get_ids(dctx_t *c, const msgpack_object *o, const char *field, size_t min_n,
		   size_t max_n, const uint8_t **ids, size_t *n)
{
	if (o->type != MSGPACK_OBJECT_BIN)
		return bad(c, PITH_EINVAL, field, "is not binary", NULL);
	size_t sz = o->via.bin.size;
	if (sz % 32)
		return bad(c, PITH_EINVAL, field, "is not a whole number of 32-byte ids",
			   o->via.bin.ptr);
	if (sz / 32 > max_n) {
		char what[80];
		snprintf(what, sizeof(what), "holds %zu ids, more than the limit of %zu",
			 sz / 32, max_n);
		return bad(c, PITH_ETOOBIG, field, what, o->via.bin.ptr);
	}
	if (sz / 32 < min_n)
		return bad(c, PITH_EINVAL, field, "holds no id", o->via.bin.ptr);
	*ids = (const uint8_t *)o->via.bin.ptr;
	*n = sz / 32;
	return 0;
}

/* A non-empty bin, borrowed. */
static int get_bytes(dctx_t *c, const msgpack_object *o, const char *field,
		     const uint8_t **p, size_t *n)
{
	if (o->type != MSGPACK_OBJECT_BIN)
		return bad(c, PITH_EINVAL, field, "is not binary", NULL);
	if (o->via.bin.size == 0)
		return bad(c, PITH_EINVAL, field, "is empty", o->via.bin.ptr);
	*p = (const uint8_t *)o->via.bin.ptr;
	*n = o->via.bin.size;
	return 0;
}

/* A bin of min (0 or 1) to max bytes, borrowed; over max is PITH_ETOOBIG. */
static int get_bin_upto(dctx_t *c, const msgpack_object *o, const char *field, size_t min,
			size_t max, const uint8_t **p, size_t *n)
{
	if (o->type != MSGPACK_OBJECT_BIN)
		return bad(c, PITH_EINVAL, field, "is not binary", NULL);
	if (o->via.bin.size < min)
		return bad(c, PITH_EINVAL, field, "is empty", o->via.bin.ptr);
	if (o->via.bin.size > max) {
		char what[80];
		snprintf(what, sizeof(what), "has %u bytes, more than the limit of %zu",
			 o->via.bin.size, max);
		return bad(c, PITH_ETOOBIG, field, what, o->via.bin.ptr);
	}
	*p = (const uint8_t *)o->via.bin.ptr;
	*n = o->via.bin.size;
	return 0;
}

/* A str of min..max printable ASCII bytes (0x20..0x7e) into out. */
static int get_text(dctx_t *c, const msgpack_object *o, const char *field, size_t min,
		    size_t max, char *out)
{
	if (o->type != MSGPACK_OBJECT_STR)
		return bad(c, PITH_EINVAL, field, "is not a string", NULL);
	size_t n = o->via.str.size;
	const char *s = o->via.str.ptr;
	if (n < min || n > max) {
		char what[64];
		snprintf(what, sizeof(what), "has %zu bytes, expected %zu to %zu", n, min, max);
		return bad(c, n > max ? PITH_ETOOBIG : PITH_EINVAL, field, what, s);
	}
	for (size_t i = 0; i < n; i++)
		if ((uint8_t)s[i] < 0x20 || (uint8_t)s[i] > 0x7e)
			return bad(c, PITH_EINVAL, field, "has a byte that is not printable ASCII",
				   s + i);
	if (n) /* msgpack gives an empty str a NULL pointer */
		memcpy(out, s, n);
	out[n] = 0;
	return 0;
}

static int get_pith(dctx_t *c, const msgpack_object *o, const char *field,
		    char out[static PITH_NUMBER_LEN + 1])
{
	int rc = get_text(c, o, field, PITH_NUMBER_LEN, PITH_NUMBER_LEN, out);
	if (rc)
		return rc;
	if (!pith_number_is_valid(out))
		return bad(c, PITH_EINVAL, field, "is not a full pith number", o->via.str.ptr);
	return 0;
}

static int get_array(dctx_t *c, const msgpack_object *o, const char *field, size_t min,
		     size_t max, const msgpack_object **items, size_t *n)
{
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return bad(c, PITH_EINVAL, field, "is not an array", NULL);
	if (o->via.array.size > max) {
		char what[80];
		snprintf(what, sizeof(what), "has %u entries, more than the limit of %zu",
			 o->via.array.size, max);
		return bad(c, PITH_ETOOBIG, field, what, NULL);
	}
	if (o->via.array.size < min)
		return bad(c, PITH_EINVAL, field, "is empty", NULL);
	*items = o->via.array.ptr;
	*n = o->via.array.size;
	return 0;
}

int wire_http_url_is_valid(const char *s)
{
	size_t n = strlen(s), i;
	if (n > WIRE_HTTP_URL_MAX)
		return 0;
	if (!strncmp(s, "https://", 8))
		i = 8;
	else if (!strncmp(s, "http://", 7))
		i = 7;
	else
		return 0;
	size_t host = i;
	if (s[i] == '[') {
		for (i++; isxdigit((unsigned char)s[i]) || s[i] == ':' || s[i] == '.'; i++)
			;
		if (s[i] != ']' || i == host + 1)
			return 0;
		i++;
	} else {
		for (; isalnum((unsigned char)s[i]) || s[i] == '.' || s[i] == '-'; i++)
			;
		if (i == host)
			return 0;
	}
	if (s[i] == ':') {
		size_t d = ++i;
		unsigned long port = 0;
		for (; isdigit((unsigned char)s[i]) && i - d < 5; i++)
			port = port * 10 + (unsigned long)(s[i] - '0');
		if (i == d || port < 1 || port > 65535)
			return 0;
	}
	if (s[i] && s[i] != '/')
		return 0;
	for (; s[i]; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch <= 0x20 || ch >= 0x7f || strchr("\"'<>\\^`{|}?#@", ch))
			return 0;
	}
	return 1;
}

/* HELLO's optional 9th field (o NULL when absent). Advisory: a value that
 * is not a valid URL string is dropped and noted, never an error, so that
 * a peer's odd URL costs it its manifest entry and nothing else. */
static void get_http_url(const msgpack_object *o, wire_msg_t *m)
{
	char *out = m->u.hello.http_url;
	out[0] = 0;
	m->u.hello.http_url_dropped = 0;
	if (!o || o->type == MSGPACK_OBJECT_NIL ||
	    (o->type == MSGPACK_OBJECT_STR && o->via.str.size == 0))
		return;
	if (o->type == MSGPACK_OBJECT_STR && o->via.str.size <= WIRE_HTTP_URL_MAX &&
	    !memchr(o->via.str.ptr, 0, o->via.str.size)) {
		memcpy(out, o->via.str.ptr, o->via.str.size);
		out[o->via.str.size] = 0;
		if (wire_http_url_is_valid(out))
			return;
		out[0] = 0;
	}
	m->u.hello.http_url_dropped = 1;
}

int wire_netid_is_valid(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > WIRE_NETID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return 0;
	}
	return 1;
}

static int decode_fields(dctx_t *c, const msgpack_object *f, size_t nf,
			 const wire_limits_t *lim, wire_msg_t *m)
{
	uint64_t u = 0;
	int rc = 0;
	switch (m->type) {
	case WIRE_HELLO:
		if ((rc = get_uint(c, &f[1], "version", UINT32_MAX, &u)))
			return rc;
		m->u.hello.version = (uint32_t)u;
		if ((rc = get_uint(c, &f[2], "features", UINT64_MAX, &m->u.hello.features)) ||
		    (rc = get_text(c, &f[3], "network_id", 1, WIRE_NETID_MAX,
				   m->u.hello.network_id)))
			return rc;
		if (!wire_netid_is_valid(m->u.hello.network_id))
			return bad(c, PITH_EINVAL, "network_id", "has a character outside [A-Za-z0-9._-]",
				   f[3].via.str.ptr);
		if ((rc = get_bin_fixed(c, &f[4], "node_key", 32, m->u.hello.node_pk)) ||
		    (rc = get_bin_fixed(c, &f[5], "nonce", 32, m->u.hello.nonce)) ||
		    (rc = get_uint(c, &f[6], "listen_port", 65535, &u)))
			return rc;
		m->u.hello.listen_port = (uint16_t)u;
		if ((rc = get_text(c, &f[7], "agent", 0, WIRE_AGENT_MAX, m->u.hello.agent)))
			return rc;
		get_http_url(nf > 8 ? &f[8] : NULL, m);
		return 0;
	case WIRE_AUTH:
		return get_bin_fixed(c, &f[1], "signature", 64, m->u.auth.sig);
	case WIRE_PING:
	case WIRE_PONG:
		return get_uint(c, &f[1], "nonce", UINT64_MAX, &m->u.ping.nonce);
	case WIRE_BYE:
		if ((rc = get_uint(c, &f[1], "code", UINT32_MAX, &u)))
			return rc;
		m->u.bye.code = (uint32_t)u;
		return get_text(c, &f[2], "reason", 0, WIRE_REASON_MAX, m->u.bye.reason);
	case WIRE_PEERS_REQ:
		return 0;
	case WIRE_PEERS: {
		const msgpack_object *a;
		size_t n;
		if ((rc = get_array(c, &f[1], "addresses", 0, lim->max_peers, &a, &n)))
			return rc;
		for (size_t i = 0; i < n; i++) {
			wire_addr_t *ad = &m->u.peers.addrs[i];
			const msgpack_object *e;
			size_t ne;
			if ((rc = get_array(c, &a[i], "address", 2, 2, &e, &ne)))
				return rc;
			if (ne != 2)
				return bad(c, PITH_EINVAL, "address", "is not [ip, port]", NULL);
			if (e[0].type != MSGPACK_OBJECT_BIN ||
			    (e[0].via.bin.size != 4 && e[0].via.bin.size != 16))
				return bad(c, PITH_EINVAL, "address ip", "is not 4 or 16 bytes of binary",
					   NULL);
			ad->ip_len = (uint8_t)e[0].via.bin.size;
			memset(ad->ip, 0, sizeof(ad->ip));
			memcpy(ad->ip, e[0].via.bin.ptr, ad->ip_len);
			if ((rc = get_uint(c, &e[1], "address port", 65535, &u)))
				return rc;
			if (u == 0)
				return bad(c, PITH_EINVAL, "address port", "is 0", NULL);
			ad->port = (uint16_t)u;
		}
		m->u.peers.n = n;
		return 0;
	}
	case WIRE_ANNOUNCE:
	case WIRE_GET:
	case WIRE_NOTFOUND:
		return get_ids(c, &f[1], "ids", 1, lim->max_ids, &m->u.ids.ids, &m->u.ids.n);
	case WIRE_EVENT:
		if ((rc = get_bin_fixed(c, &f[1], "event_id", 32, m->u.event.id)))
			return rc;
		return get_bytes(c, &f[2], "json", &m->u.event.json, &m->u.event.len);
	case WIRE_BUNDLE_ANNOUNCE:
	case WIRE_BUNDLE_GET: {
		const msgpack_object *a;
		size_t n;
		int ann = m->type == WIRE_BUNDLE_ANNOUNCE;
		if ((rc = get_array(c, &f[1], "refs", 1, lim->max_refs, &a, &n)))
			return rc;
		for (size_t i = 0; i < n; i++) {
			wire_bundle_ref_t *r = &m->u.bundles.refs[i];
			memset(r, 0, sizeof(*r));
			if (!ann) {
				if ((rc = get_pith(c, &a[i], "pith_number", r->pith_number)))
					return rc;
				continue;
			}
			const msgpack_object *e;
			size_t ne;
			if ((rc = get_array(c, &a[i], "ref", 3, 3, &e, &ne)))
				return rc;
			if ((rc = get_pith(c, &e[0], "pith_number", r->pith_number)) ||
			    (rc = get_int64(c, &e[1], "built_at", &r->built_us)) ||
			    (rc = get_bin_fixed(c, &e[2], "bundle_sha256", 32, r->sha)))
				return rc;
		}
		m->u.bundles.n = n;
		return 0;
	}
	case WIRE_BUNDLE:
		if ((rc = get_pith(c, &f[1], "pith_number", m->u.bundle.pith_number)))
			return rc;
		return get_bytes(c, &f[2], "json", &m->u.bundle.json, &m->u.bundle.len);
	case WIRE_INV_REQ:
		if ((rc = get_int64(c, &f[1], "after_us", &m->u.inv_req.after_us)) ||
		    (rc = get_bin_fixed(c, &f[2], "after_id", 32, m->u.inv_req.after_id)) ||
		    (rc = get_uint(c, &f[3], "limit", lim->max_ids, &u)))
			return rc;
		if (u == 0)
			return bad(c, PITH_EINVAL, "limit", "is 0", NULL);
		m->u.inv_req.limit = (uint32_t)u;
		return 0;
	case WIRE_INV:
		if ((rc = get_ids(c, &f[1], "ids", 0, lim->max_ids, &m->u.inv.ids, &m->u.inv.n)) ||
		    (rc = get_int64(c, &f[2], "next_us", &m->u.inv.next_us)) ||
		    (rc = get_bin_fixed(c, &f[3], "next_id", 32, m->u.inv.next_id)))
			return rc;
		if (f[4].type != MSGPACK_OBJECT_BOOLEAN)
			return bad(c, PITH_EINVAL, "done", "is not a boolean", NULL);
		m->u.inv.done = f[4].via.boolean ? 1 : 0;
		return 0;
	case WIRE_RECON:
	case WIRE_RECON_BUNDLES:
		if ((rc = get_uint(c, &f[1], "session", UINT64_MAX, &m->u.recon.session)))
			return rc;
		if (m->u.recon.session == 0)
			return bad(c, PITH_EINVAL, "session", "is 0", NULL);
		if ((rc = get_bin_upto(c, &f[2], "data", 0, WIRE_RECON_MAX, &m->u.recon.data,
				       &m->u.recon.len)))
			return rc;
		return get_uint(c, &f[3], "items", UINT64_MAX, &m->u.recon.items);
	case WIRE_ROOT:
		return get_bin_upto(c, &f[1], "document", 1, WIRE_ROOT_DOC_MAX, &m->u.root.doc,
				    &m->u.root.len);
	default:
		return bad(c, PITH_EINVAL, "type", "is not handled", NULL);
	}
}

int wire_decode(const uint8_t *payload, size_t len, const wire_limits_t *lim,
		wire_msg_t *out, pith_err_t *err)
{
	if (!lim)
		lim = &wire_limits_default;
	if (err)
		err->offset = 0;
	memset(out, 0, offsetof(wire_msg_t, u));
	if (len == 0)
		return pith_err_set(err, PITH_EINVAL, "wire: empty frame");
	if (len > lim->max_frame)
		return pith_err_set(err, PITH_ETOOBIG, "wire: frame of %zu bytes exceeds the limit of %zu",
				    len, lim->max_frame);
	int rc = scan(payload, len, err);
	if (rc)
		return rc;

	msgpack_unpacked res;
	msgpack_unpacked_init(&res);
	size_t off = 0;
	msgpack_unpack_return ur = msgpack_unpack_next(&res, (const char *)payload, len, &off);
	dctx_t c = {"message", payload, err};
	if (ur == MSGPACK_UNPACK_NOMEM_ERROR) {
		rc = pith_err_set(err, PITH_ENOMEM, "wire: out of memory unpacking a frame");
		goto out;
	}
	if (ur != MSGPACK_UNPACK_SUCCESS || off != len) {
		/* the scanner accepted it, so msgpack-c should too */
		rc = pith_err_set(err, PITH_EINVAL, "wire: msgpack-c refused a scanned frame (%d)", (int)ur);
		goto out;
	}
	const msgpack_object *root = &res.data;
	if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size == 0) {
		rc = bad(&c, PITH_EINVAL, "payload", "is not an array [type, ...]", NULL);
		goto out;
	}
	const msgpack_object *f = root->via.array.ptr;
	size_t nf = root->via.array.size;
	if (f[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		rc = bad(&c, PITH_EINVAL, "type", "is not an unsigned integer", NULL);
		goto out;
	}
	uint64_t t = f[0].via.u64;
	if (!wire_type_is_defined(t)) {
		rc = pith_err_set(err, PITH_EINVAL, "wire: message type %llu is %s",
				  (unsigned long long)t, wire_type_name(t > 255 ? 0 : (int)t));
		goto out;
	}
	out->type = (wire_type_t)t;
	c.msg = type_names[t];
	if (t == WIRE_HELLO ? nf < wire_type_fields[t] : nf != wire_type_fields[t]) {
		char what[64];
		snprintf(what, sizeof(what), "has %zu elements, expected %s%u", nf,
			 t == WIRE_HELLO ? "at least " : "", wire_type_fields[t]);
		rc = bad(&c, PITH_EINVAL, "message", what, NULL);
		goto out;
	}
	rc = decode_fields(&c, f, nf, lim, out);
out:
	msgpack_unpacked_destroy(&res);
	return rc;
}

/* ---- the incremental reader ----------------------------------------------- */

struct wire_reader {
	wire_limits_t lim;
	uint8_t *buf;
	size_t cap;
	size_t start; /* first unconsumed byte */
	size_t end;   /* one past the last buffered byte */
	int error;    /* sticky */
	pith_err_t err;
};

wire_reader_t *wire_reader_new(const wire_limits_t *lim)
{
	if (!lim)
		lim = &wire_limits_default;
	if (!limits_ok(lim))
		return NULL;
	wire_reader_t *r = calloc(1, sizeof(*r));
	if (r)
		r->lim = *lim;
	return r;
}

void wire_reader_free_(wire_reader_t *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}

static int fail(wire_reader_t *r, int code)
{
	r->error = code;
	r->err.code = code;
	return code;
}

size_t wire_reader_pending(const wire_reader_t *r)
{
	return r->end - r->start;
}

size_t wire_reader_room(const wire_reader_t *r)
{
	return r->error ? 0 : r->lim.max_buffer - wire_reader_pending(r);
}

int wire_reader_feed(wire_reader_t *r, const uint8_t *p, size_t n)
{
	if (r->error)
		return r->error;
	size_t pend = wire_reader_pending(r);
	if (n > r->lim.max_buffer - pend) {
		pith_err_set(&r->err, PITH_ETOOBIG,
			     "wire: %zu more bytes would exceed the reader's buffer of %zu",
			     n, r->lim.max_buffer);
		return fail(r, PITH_ETOOBIG);
	}
	if (r->start && (r->end + n > r->cap || r->start > r->cap / 2)) {
		memmove(r->buf, r->buf + r->start, pend);
		r->start = 0;
		r->end = pend;
	}
	if (r->end + n > r->cap) {
		/* grow by doubling, from 16 KiB, never past max_buffer */
		size_t cap = r->cap ? r->cap : 16384;
		while (cap < r->end + n)
			cap *= 2;
		if (cap > r->lim.max_buffer)
			cap = r->lim.max_buffer;
		uint8_t *nb = realloc(r->buf, cap);
		if (!nb) {
			pith_err_set(&r->err, PITH_ENOMEM, "wire: out of memory growing a reader");
			return fail(r, PITH_ENOMEM);
		}
		r->buf = nb;
		r->cap = cap;
	}
	if (n)
		memcpy(r->buf + r->end, p, n);
	r->end += n;
	return 0;
}

int wire_reader_next(wire_reader_t *r, wire_msg_t *out, size_t *frame_len)
{
	if (r->error)
		return r->error;
	size_t pend = wire_reader_pending(r);
	if (pend < WIRE_HEADER_LEN)
		return 0;
	const uint8_t *h = r->buf + r->start;
	uint64_t len = be_get(h, WIRE_HEADER_LEN);
	if (len == 0) {
		pith_err_set(&r->err, PITH_EINVAL, "wire: zero-length frame at stream byte offset +%zu",
			     r->start);
		return fail(r, PITH_EINVAL);
	}
	if (len > r->lim.max_frame) {
		pith_err_set(&r->err, PITH_ETOOBIG,
			     "wire: frame length %llu exceeds the limit of %zu",
			     (unsigned long long)len, r->lim.max_frame);
		return fail(r, PITH_ETOOBIG);
	}
	if (pend - WIRE_HEADER_LEN < len)
		return 0;
	int rc = wire_decode(h + WIRE_HEADER_LEN, (size_t)len, &r->lim, out, &r->err);
	if (rc)
		return fail(r, rc);
	r->start += WIRE_HEADER_LEN + (size_t)len;
	if (frame_len)
		*frame_len = WIRE_HEADER_LEN + (size_t)len;
	return 1;
}

int wire_reader_finish(wire_reader_t *r, pith_err_t *err)
{
	if (r->error)
		return wire_reader_error(r, err);
	size_t pend = wire_reader_pending(r);
	if (pend == 0)
		return 0;
	pith_err_set(&r->err, PITH_ETRUNC, "wire: stream ended inside a frame (%zu bytes of %s)",
		     pend, pend < WIRE_HEADER_LEN ? "a length prefix" : "a frame");
	fail(r, PITH_ETRUNC);
	return wire_reader_error(r, err);
}

int wire_reader_error(const wire_reader_t *r, pith_err_t *err)
{
	if (err && r->error)
		*err = r->err;
	return r->error;
}

/* ---- handshake -------------------------------------------------------------- */

size_t wire_auth_message(const char *network_id, const uint8_t signer_pk[static 32],
			 const uint8_t signer_nonce[static 32],
			 const uint8_t verifier_pk[static 32],
			 const uint8_t verifier_nonce[static 32], uint8_t *out)
{
	size_t n = 0, nl = strlen(network_id);
	if (nl > WIRE_NETID_MAX)
		nl = WIRE_NETID_MAX;
	memcpy(out, WIRE_AUTH_CONTEXT, sizeof(WIRE_AUTH_CONTEXT)); /* with its NUL */
	n += sizeof(WIRE_AUTH_CONTEXT);
	out[n++] = (uint8_t)nl;
	memcpy(out + n, network_id, nl);
	n += nl;
	memcpy(out + n, signer_pk, 32);
	n += 32;
	memcpy(out + n, verifier_pk, 32);
	n += 32;
	memcpy(out + n, verifier_nonce, 32);
	n += 32;
	memcpy(out + n, signer_nonce, 32);
	n += 32;
	return n;
}
