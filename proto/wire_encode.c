/* The wire protocol's encoding (wire.h): a message checked against
 * docs/wire.md's rules, then packed as msgpack into a frame. Decoding
 * and the incremental reader are in wire.c. */
#include "wire_int.h"

#include <msgpack.h>
#include <string.h>

/* ---- encoding ------------------------------------------------------------- */

static int buf_write(void *data, const char *p, size_t n)
{
	return pith_buf_append((pith_buf_t *)data, p, n) ? -1 : 0;
}

static int text_ok(const char *s, size_t min, size_t max)
{
	size_t n = strlen(s);
	if (n < min || n > max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((uint8_t)s[i] < 0x20 || (uint8_t)s[i] > 0x7e)
			return 0;
	return 1;
}

static void pack_text(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void pack_bin(msgpack_packer *pk, const void *p, size_t n)
{
	msgpack_pack_bin(pk, n);
	msgpack_pack_bin_body(pk, p, n);
}

/* The checks wire_decode makes that a sender could get wrong. */
static int encode_check(const wire_msg_t *m)
{
	switch (m->type) {
	case WIRE_HELLO:
		return wire_netid_is_valid(m->u.hello.network_id) &&
		       text_ok(m->u.hello.agent, 0, WIRE_AGENT_MAX) &&
		       memchr(m->u.hello.http_url, 0, sizeof(m->u.hello.http_url)) &&
		       (!m->u.hello.http_url[0] || wire_http_url_is_valid(m->u.hello.http_url));
	case WIRE_BYE:
		return text_ok(m->u.bye.reason, 0, WIRE_REASON_MAX);
	case WIRE_PEERS:
		if (m->u.peers.n > WIRE_PEERS_MAX)
			return 0;
		for (size_t i = 0; i < m->u.peers.n; i++)
			if ((m->u.peers.addrs[i].ip_len != 4 && m->u.peers.addrs[i].ip_len != 16) ||
			    m->u.peers.addrs[i].port == 0)
				return 0;
		return 1;
	case WIRE_ANNOUNCE:
	case WIRE_GET:
	case WIRE_NOTFOUND:
		return m->u.ids.n >= 1 && m->u.ids.n <= WIRE_IDS_MAX;
	case WIRE_EVENT:
		return m->u.event.len > 0;
	case WIRE_BUNDLE_ANNOUNCE:
	case WIRE_BUNDLE_GET:
		if (m->u.bundles.n < 1 || m->u.bundles.n > WIRE_BUNDLE_REFS_MAX)
			return 0;
		for (size_t i = 0; i < m->u.bundles.n; i++)
			if (!pith_number_is_valid(m->u.bundles.refs[i].pith_number))
				return 0;
		return 1;
	case WIRE_BUNDLE:
		return m->u.bundle.len > 0 && pith_number_is_valid(m->u.bundle.pith_number);
	case WIRE_INV_REQ:
		return m->u.inv_req.limit >= 1 && m->u.inv_req.limit <= WIRE_IDS_MAX;
	case WIRE_INV:
		return m->u.inv.n <= WIRE_IDS_MAX;
	case WIRE_RECON:
	case WIRE_RECON_BUNDLES:
		return m->u.recon.session >= 1 && m->u.recon.len <= WIRE_RECON_MAX &&
		       (m->u.recon.data || !m->u.recon.len);
	case WIRE_ROOT:
		return m->u.root.doc && m->u.root.len >= 1 && m->u.root.len <= WIRE_ROOT_DOC_MAX;
	case WIRE_AUTH:
	case WIRE_PING:
	case WIRE_PONG:
	case WIRE_PEERS_REQ:
		return 1;
	default:
		return 0;
	}
}

int wire_encode(const wire_msg_t *m, pith_buf_t *out)
{
	if (!wire_type_is_defined((uint64_t)m->type) || !encode_check(m))
		return PITH_EINVAL;
	size_t start = out->len;
	static const uint8_t zero[WIRE_HEADER_LEN];
	if (pith_buf_append(out, zero, sizeof(zero)))
		return PITH_ENOMEM;
	msgpack_packer pk;
	msgpack_packer_init(&pk, out, buf_write);
	/* HELLO's optional http_url goes out only when set: a HELLO without
	 * it is byte for byte what nodes before it sent */
	msgpack_pack_array(&pk, m->type == WIRE_HELLO && m->u.hello.http_url[0]
					? wire_type_fields[WIRE_HELLO] + 1u
					: wire_type_fields[m->type]);
	msgpack_pack_uint64(&pk, (uint64_t)m->type);
	switch (m->type) {
	case WIRE_HELLO:
		msgpack_pack_uint64(&pk, m->u.hello.version);
		msgpack_pack_uint64(&pk, m->u.hello.features);
		pack_text(&pk, m->u.hello.network_id);
		pack_bin(&pk, m->u.hello.node_pk, 32);
		pack_bin(&pk, m->u.hello.nonce, 32);
		msgpack_pack_uint64(&pk, m->u.hello.listen_port);
		pack_text(&pk, m->u.hello.agent);
		if (m->u.hello.http_url[0])
			pack_text(&pk, m->u.hello.http_url);
		break;
	case WIRE_AUTH:
		pack_bin(&pk, m->u.auth.sig, 64);
		break;
	case WIRE_PING:
	case WIRE_PONG:
		msgpack_pack_uint64(&pk, m->u.ping.nonce);
		break;
	case WIRE_BYE:
		msgpack_pack_uint64(&pk, m->u.bye.code);
		pack_text(&pk, m->u.bye.reason);
		break;
	case WIRE_PEERS_REQ:
		break;
	case WIRE_PEERS:
		msgpack_pack_array(&pk, m->u.peers.n);
		for (size_t i = 0; i < m->u.peers.n; i++) {
			msgpack_pack_array(&pk, 2);
			pack_bin(&pk, m->u.peers.addrs[i].ip, m->u.peers.addrs[i].ip_len);
			msgpack_pack_uint64(&pk, m->u.peers.addrs[i].port);
		}
		break;
	case WIRE_ANNOUNCE:
	case WIRE_GET:
	case WIRE_NOTFOUND:
		pack_bin(&pk, m->u.ids.ids, m->u.ids.n * 32);
		break;
	case WIRE_EVENT:
		pack_bin(&pk, m->u.event.id, 32);
		pack_bin(&pk, m->u.event.json, m->u.event.len);
		break;
	case WIRE_BUNDLE_ANNOUNCE:
	case WIRE_BUNDLE_GET:
		msgpack_pack_array(&pk, m->u.bundles.n);
		for (size_t i = 0; i < m->u.bundles.n; i++) {
			const wire_bundle_ref_t *r = &m->u.bundles.refs[i];
			if (m->type == WIRE_BUNDLE_GET) {
				pack_text(&pk, r->pith_number);
				continue;
			}
			msgpack_pack_array(&pk, 3);
			pack_text(&pk, r->pith_number);
			msgpack_pack_int64(&pk, r->built_us);
			pack_bin(&pk, r->sha, 32);
		}
		break;
	case WIRE_BUNDLE:
		pack_text(&pk, m->u.bundle.pith_number);
		pack_bin(&pk, m->u.bundle.json, m->u.bundle.len);
		break;
	case WIRE_INV_REQ:
		msgpack_pack_int64(&pk, m->u.inv_req.after_us);
		pack_bin(&pk, m->u.inv_req.after_id, 32);
		msgpack_pack_uint64(&pk, m->u.inv_req.limit);
		break;
	case WIRE_INV:
		pack_bin(&pk, m->u.inv.ids, m->u.inv.n * 32);
		msgpack_pack_int64(&pk, m->u.inv.next_us);
		pack_bin(&pk, m->u.inv.next_id, 32);
		if (m->u.inv.done)
			msgpack_pack_true(&pk);
		else
			msgpack_pack_false(&pk);
		break;
	case WIRE_RECON:
	case WIRE_RECON_BUNDLES:
		msgpack_pack_uint64(&pk, m->u.recon.session);
		pack_bin(&pk, m->u.recon.data, m->u.recon.len);
		msgpack_pack_uint64(&pk, m->u.recon.items);
		break;
	case WIRE_ROOT:
		pack_bin(&pk, m->u.root.doc, m->u.root.len);
		break;
	default:
		break;
	}
	if (out->oom) {
		out->len = start;
		return PITH_ENOMEM;
	}
	size_t plen = out->len - start - WIRE_HEADER_LEN;
	if (plen > WIRE_FRAME_MAX_HARD) {
		out->len = start;
		return PITH_EINVAL;
	}
	uint8_t *h = out->data + start;
	h[0] = (uint8_t)(plen >> 24);
	h[1] = (uint8_t)(plen >> 16);
	h[2] = (uint8_t)(plen >> 8);
	h[3] = (uint8_t)plen;
	return 0;
}

