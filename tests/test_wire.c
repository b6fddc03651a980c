/* test_wire: the wire protocol's frames, messages, limits and reader
 * (proto/wire.h, docs/wire.md). */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "wire.h"

/* Encodes m into a fresh buffer (a whole frame); aborts the case on error. */
static int enc(const wire_msg_t *m, pith_buf_t *out)
{
	pith_buf_reset(out);
	return wire_encode(m, out);
}

/* Decodes one whole frame (prefix included) through a reader. The message
 * borrows the reader's buffer, so the reader lives until the next call. */
static int dec_frame(const uint8_t *p, size_t n, wire_msg_t *m, pith_err_t *err)
{
	static wire_reader_t *r;
	wire_reader_free(r);
	r = wire_reader_new(NULL);
	int rc = wire_reader_feed(r, p, n);
	if (!rc)
		rc = wire_reader_next(r, m, NULL);
	if (rc < 0)
		wire_reader_error(r, err);
	return rc;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* Decodes a raw payload and returns the code; err gets the message. */
static int dec_raw(const char *payload, size_t n, pith_err_t *err)
{
	wire_msg_t m;
	memset(err, 0, sizeof(*err));
	return wire_decode((const uint8_t *)payload, n, NULL, &m, err);
}
#define DEC_RAW(lit, err) dec_raw((lit), sizeof(lit) - 1, (err))

TEST(ping_bytes, "encodes PING as the exact bytes docs/wire.md shows")
{
	wire_msg_t m = {.type = WIRE_PING};
	m.u.ping.nonce = 7;
	pith_buf_t b = PITH_BUF_INIT;
	CHECK_INT_EQ(enc(&m, &b), 0);
	CHECK_MEM_EQ(b.data, b.len, "\x00\x00\x00\x03\x92\x03\x07", 7);
	pith_buf_release(&b);
}

TEST(hello_round_trip, "round-trips a HELLO with every field")
{
	wire_msg_t m = {.type = WIRE_HELLO}, d;
	m.u.hello.version = WIRE_VERSION;
	m.u.hello.features = 5;
	strcpy(m.u.hello.network_id, "pith-test_1.0");
	fill(m.u.hello.node_pk, 32, 1);
	fill(m.u.hello.nonce, 32, 99);
	m.u.hello.listen_port = 7411;
	strcpy(m.u.hello.agent, "pithd/0.1");
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	CHECK_INT_EQ(enc(&m, &b), 0);
	CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), 1);
	CHECK_INT_EQ(d.type, WIRE_HELLO);
	CHECK_INT_EQ(d.u.hello.version, WIRE_VERSION);
	CHECK_INT_EQ(d.u.hello.features, 5);
	CHECK_STR_EQ(d.u.hello.network_id, "pith-test_1.0");
	CHECK_MEM_EQ(d.u.hello.node_pk, 32, m.u.hello.node_pk, 32);
	CHECK_MEM_EQ(d.u.hello.nonce, 32, m.u.hello.nonce, 32);
	CHECK_INT_EQ(d.u.hello.listen_port, 7411);
	CHECK_STR_EQ(d.u.hello.agent, "pithd/0.1");
	pith_buf_release(&b);
}

TEST(hello_extra, "accepts a HELLO with extra trailing fields from a later version")
{
	wire_msg_t m = {.type = WIRE_HELLO}, d;
	m.u.hello.version = 2;
	strcpy(m.u.hello.network_id, "n");
	pith_buf_t b = PITH_BUF_INIT;
	CHECK_INT_EQ(enc(&m, &b), 0);
	/* bump the array header 0x98 (8) to 0x99 (9) and append a nil */
	CHECK_INT_EQ(b.data[4], 0x98);
	b.data[4] = 0x99;
	pith_buf_putc(&b, 0xc0);
	b.data[3]++;
	pith_err_t err = {0};
	CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), 1);
	CHECK_INT_EQ(d.u.hello.version, 2);
	pith_buf_release(&b);
}

/* A HELLO payload (no length prefix) with `extra` msgpack bytes as its 9th
 * and later fields (nfields of them), decoded; rc of wire_decode. */
static int hello_with(const void *extra, size_t n, unsigned nfields, wire_msg_t *d,
		      pith_err_t *err)
{
	wire_msg_t m = {.type = WIRE_HELLO};
	m.u.hello.version = 1;
	strcpy(m.u.hello.network_id, "n");
	pith_buf_t b = PITH_BUF_INIT;
	int rc = wire_encode(&m, &b);
	if (!rc) {
		b.data[4] = (uint8_t)(0x90 | (8 + nfields)); /* fixarray: 8 + nfields */
		rc = pith_buf_append(&b, extra, n) ? PITH_ENOMEM : 0;
	}
	memset(err, 0, sizeof(*err));
	if (!rc)
		rc = wire_decode(b.data + 4, b.len - 4, NULL, d, err);
	pith_buf_release(&b);
	return rc;
}

/* hello_with for one msgpack str field holding s[0..n). */
static int hello_with_url(const char *s, size_t n, wire_msg_t *d)
{
	uint8_t x[300];
	size_t h = 0;
	if (n < 32) {
		x[h++] = (uint8_t)(0xa0 | n);
	} else {
		x[h++] = 0xd9;
		x[h++] = (uint8_t)n;
	}
	memcpy(x + h, s, n);
	pith_err_t err;
	return hello_with(x, h + n, 1, d, &err);
}

TEST(hello_http_url, "carries the sender's HTTP URL as HELLO's 9th field, only when set")
{
	wire_msg_t m = {.type = WIRE_HELLO}, d;
	m.u.hello.version = WIRE_VERSION;
	strcpy(m.u.hello.network_id, "pith-main");
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	/* without it: the 8-field HELLO of earlier nodes, byte for byte */
	CHECK_INT_EQ(enc(&m, &b), 0);
	CHECK_INT_EQ(b.data[4], 0x98);
	CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), 1);
	CHECK_STR_EQ(d.u.hello.http_url, "");
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 0);
	strcpy(m.u.hello.http_url, "https://mirror.example.org:8443/pith");
	CHECK_INT_EQ(enc(&m, &b), 0);
	CHECK_INT_EQ(b.data[4], 0x99);
	CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), 1);
	CHECK_STR_EQ(d.u.hello.http_url, "https://mirror.example.org:8443/pith");
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 0);
	/* a later version's 10th field does not hide it */
	const uint8_t two[] = {0xa8, 'h', 't', 't', 'p', ':', '/', '/', 'a', 0xc0};
	CHECK_INT_EQ(hello_with(two, sizeof(two), 2, &d, &err), 0);
	CHECK_STR_EQ(d.u.hello.http_url, "http://a");
	/* nil and "" mean none, and are not a dropped URL */
	const uint8_t nil[] = {0xc0};
	CHECK_INT_EQ(hello_with(nil, 1, 1, &d, &err), 0);
	CHECK_STR_EQ(d.u.hello.http_url, "");
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 0);
	CHECK_INT_EQ(hello_with_url("", 0, &d), 0);
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 0);
	/* encoding refuses what a receiver would drop */
	strcpy(m.u.hello.http_url, "ftp://mirror.example.org");
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL);
	pith_buf_release(&b);
}

TEST(hello_http_url_bad, "drops an HTTP URL in HELLO that is malformed, and keeps the HELLO")
{
	static const char *const bad[] = {
		"javascript:alert(1)", "ftp://a.example", "http://", "https://", "http:///x",
		"http://user:pw@evil.example", "http://evil.example/@x", "https://a.example/?q=1",
		"https://a.example/#f", "http://a.example/a b", "http://a.example/\"x\"",
		"http://a.example/<script>", "http://a.example:0", "http://a.example:65536",
		"http://a.example:123456", "http://a.example:80x", "http://a_b.example",
		"http://[]:80", "http://[::1", "HTTP://A.EXAMPLE", "http://a.example/\x7f",
		"http://a.example/\t",
	};
	wire_msg_t d;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT_EQ(wire_http_url_is_valid(bad[i]), 0);
		CHECK_INT_EQ(hello_with_url(bad[i], strlen(bad[i]), &d), 0);
		CHECK_STR_EQ(d.u.hello.http_url, "");
		CHECK_INT_EQ(d.u.hello.http_url_dropped, 1);
		CHECK_STR_EQ(d.u.hello.network_id, "n");
	}
	static const char *const good[] = {
		"http://a", "https://mirror.example.org", "http://127.0.0.1:8080",
		"http://[::1]:8080/", "https://a.example/pith/mirror%20one", "http://a.example:65535",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		CHECK_INT_EQ(wire_http_url_is_valid(good[i]), 1);
		CHECK_INT_EQ(hello_with_url(good[i], strlen(good[i]), &d), 0);
		CHECK_STR_EQ(d.u.hello.http_url, good[i]);
	}
	/* 200 bytes is the most; 201 is dropped; a NUL inside is dropped */
	char u[202];
	memset(u, 'a', sizeof(u));
	memcpy(u, "https://", 8);
	u[200] = 0;
	CHECK_INT_EQ(hello_with_url(u, 200, &d), 0);
	CHECK_INT_EQ((int)strlen(d.u.hello.http_url), 200);
	u[200] = 'a';
	u[201] = 0;
	CHECK_INT_EQ(hello_with_url(u, 201, &d), 0);
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 1);
	CHECK_INT_EQ(hello_with_url("http://a\0b", 10, &d), 0);
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 1);
	CHECK_STR_EQ(d.u.hello.http_url, "");
	/* other types: an integer, a binary, an array */
	pith_err_t err;
	const uint8_t i7[] = {0x07}, bin[] = {0xc4, 0x08, 'h', 't', 't', 'p', ':', '/', '/', 'a'},
		      arr[] = {0x91, 0x01};
	CHECK_INT_EQ(hello_with(i7, sizeof(i7), 1, &d, &err), 0);
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 1);
	CHECK_INT_EQ(hello_with(bin, sizeof(bin), 1, &d, &err), 0);
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 1);
	CHECK_INT_EQ(hello_with(arr, sizeof(arr), 1, &d, &err), 0);
	CHECK_INT_EQ(d.u.hello.http_url_dropped, 1);
	/* a string that claims more bytes than the frame holds is still truncation */
	const uint8_t cut[] = {0xd9, 0xc8, 'h', 't', 't', 'p'};
	CHECK_INT_EQ(hello_with(cut, sizeof(cut), 1, &d, &err), PITH_ETRUNC);
}

TEST(all_round_trip, "round-trips every other message type")
{
	uint8_t ids[3 * 32];
	fill(ids, sizeof(ids), 3);
	const char *json = "{\"a\":1}";
	wire_msg_t ms[24];
	memset(ms, 0, sizeof(ms));
	int k = 0;
	ms[k].type = WIRE_AUTH;
	fill(ms[k++].u.auth.sig, 64, 5);
	ms[k].type = WIRE_PONG;
	ms[k++].u.ping.nonce = UINT64_MAX;
	ms[k].type = WIRE_BYE;
	ms[k].u.bye.code = WIRE_BYE_BANNED;
	strcpy(ms[k++].u.bye.reason, "banned: malformed frame");
	ms[k++].type = WIRE_PEERS_REQ;
	ms[k].type = WIRE_PEERS;
	ms[k].u.peers.n = 2;
	ms[k].u.peers.addrs[0] = (wire_addr_t){{127, 0, 0, 1}, 4, 7411};
	ms[k].u.peers.addrs[1] = (wire_addr_t){{0x20, 0x01, [15] = 1}, 16, 1};
	k++;
	for (int t = WIRE_ANNOUNCE; t <= WIRE_GET; t++) {
		ms[k].type = (wire_type_t)t;
		ms[k].u.ids.ids = ids;
		ms[k++].u.ids.n = 3;
	}
	ms[k].type = WIRE_NOTFOUND;
	ms[k].u.ids.ids = ids;
	ms[k++].u.ids.n = 1;
	ms[k].type = WIRE_EVENT;
	fill(ms[k].u.event.id, 32, 9);
	ms[k].u.event.json = (const uint8_t *)json;
	ms[k++].u.event.len = strlen(json);
	ms[k].type = WIRE_BUNDLE_ANNOUNCE;
	ms[k].u.bundles.n = 1;
	strcpy(ms[k].u.bundles.refs[0].pith_number, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE");
	ms[k].u.bundles.refs[0].built_us = -5;
	fill(ms[k++].u.bundles.refs[0].sha, 32, 4);
	ms[k].type = WIRE_BUNDLE_GET;
	ms[k].u.bundles.n = 1;
	strcpy(ms[k++].u.bundles.refs[0].pith_number, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE");
	ms[k].type = WIRE_BUNDLE;
	strcpy(ms[k].u.bundle.pith_number, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE");
	ms[k].u.bundle.json = (const uint8_t *)json;
	ms[k++].u.bundle.len = strlen(json);
	ms[k].type = WIRE_INV_REQ;
	ms[k].u.inv_req.after_us = INT64_MIN;
	ms[k++].u.inv_req.limit = 1024;
	ms[k].type = WIRE_INV;
	ms[k].u.inv.ids = ids;
	ms[k].u.inv.n = 0;
	ms[k].u.inv.next_us = 1700000000000000;
	ms[k++].u.inv.done = 1;
	ms[k].type = WIRE_RECON;
	ms[k].u.recon.session = UINT64_MAX;
	ms[k].u.recon.data = (const uint8_t *)json;
	ms[k].u.recon.len = strlen(json);
	ms[k++].u.recon.items = 1000000;
	ms[k].type = WIRE_RECON; /* empty data: the sender ends the session */
	ms[k++].u.recon.session = 2;
	ms[k].type = WIRE_RECON_BUNDLES; /* the same fields, over bundles */
	ms[k].u.recon.session = 3;
	ms[k].u.recon.data = (const uint8_t *)json;
	ms[k].u.recon.len = strlen(json);
	ms[k++].u.recon.items = 7;
	ms[k].type = WIRE_ROOT; /* the bytes are the receiver's to verify */
	ms[k].u.root.doc = (const uint8_t *)json;
	ms[k++].u.root.len = strlen(json);

	pith_buf_t b = PITH_BUF_INIT;
	for (int i = 0; i < k; i++) {
		wire_msg_t d;
		pith_err_t err = {0};
		pith_buf_reset(&b);
		int rc = wire_encode(&ms[i], &b);
		if (rc)
			test_fail_(__FILE__, __LINE__, "%s: encode %d", wire_type_name(ms[i].type), rc);
		rc = dec_frame(b.data, b.len, &d, &err);
		if (rc != 1) {
			test_fail_(__FILE__, __LINE__, "%s: decode %d: %s",
				   wire_type_name(ms[i].type), rc, err.msg);
			continue;
		}
		CHECK_INT_EQ(d.type, ms[i].type);
		switch (d.type) {
		case WIRE_AUTH:
			CHECK_MEM_EQ(d.u.auth.sig, 64, ms[i].u.auth.sig, 64);
			break;
		case WIRE_PONG:
			CHECK(d.u.ping.nonce == UINT64_MAX);
			break;
		case WIRE_BYE:
			CHECK_INT_EQ(d.u.bye.code, WIRE_BYE_BANNED);
			CHECK_STR_EQ(d.u.bye.reason, "banned: malformed frame");
			break;
		case WIRE_PEERS:
			CHECK_INT_EQ(d.u.peers.n, 2);
			CHECK_INT_EQ(d.u.peers.addrs[0].ip_len, 4);
			CHECK_INT_EQ(d.u.peers.addrs[0].port, 7411);
			CHECK_INT_EQ(d.u.peers.addrs[1].ip_len, 16);
			CHECK_MEM_EQ(d.u.peers.addrs[1].ip, 16, ms[i].u.peers.addrs[1].ip, 16);
			break;
		case WIRE_ANNOUNCE:
		case WIRE_GET:
		case WIRE_NOTFOUND:
			CHECK_INT_EQ(d.u.ids.n, ms[i].u.ids.n);
			CHECK_MEM_EQ(d.u.ids.ids, d.u.ids.n * 32, ids, ms[i].u.ids.n * 32);
			break;
		case WIRE_EVENT:
			CHECK_MEM_EQ(d.u.event.id, 32, ms[i].u.event.id, 32);
			CHECK_MEM_EQ(d.u.event.json, d.u.event.len, json, strlen(json));
			break;
		case WIRE_BUNDLE_ANNOUNCE:
			CHECK_INT_EQ(d.u.bundles.n, 1);
			CHECK_STR_EQ(d.u.bundles.refs[0].pith_number, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE");
			CHECK_INT_EQ(d.u.bundles.refs[0].built_us, -5);
			CHECK_MEM_EQ(d.u.bundles.refs[0].sha, 32, ms[i].u.bundles.refs[0].sha, 32);
			break;
		case WIRE_BUNDLE_GET:
			CHECK_STR_EQ(d.u.bundles.refs[0].pith_number, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE");
			break;
		case WIRE_BUNDLE:
			CHECK_STR_EQ(d.u.bundle.pith_number, "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE");
			CHECK_MEM_EQ(d.u.bundle.json, d.u.bundle.len, json, strlen(json));
			break;
		case WIRE_INV_REQ:
			CHECK(d.u.inv_req.after_us == INT64_MIN);
			CHECK_INT_EQ(d.u.inv_req.limit, 1024);
			break;
		case WIRE_INV:
			CHECK_INT_EQ(d.u.inv.n, 0);
			CHECK_INT_EQ(d.u.inv.next_us, 1700000000000000);
			CHECK_INT_EQ(d.u.inv.done, 1);
			break;
		case WIRE_RECON:
		case WIRE_RECON_BUNDLES:
			CHECK(d.u.recon.session == ms[i].u.recon.session);
			CHECK_INT_EQ(d.u.recon.len, ms[i].u.recon.len);
			if (d.u.recon.len)
				CHECK_MEM_EQ(d.u.recon.data, d.u.recon.len, ms[i].u.recon.data,
					     ms[i].u.recon.len);
			CHECK(d.u.recon.items == ms[i].u.recon.items);
			break;
		case WIRE_ROOT:
			CHECK_MEM_EQ(d.u.root.doc, d.u.root.len, json, strlen(json));
			break;
		default:
			break;
		}
	}
	pith_buf_release(&b);
}

TEST(byte_at_a_time, "delivers messages fed one byte at a time, and only when whole")
{
	wire_msg_t m = {.type = WIRE_PING}, d;
	pith_buf_t b = PITH_BUF_INIT;
	for (int i = 0; i < 3; i++) {
		m.u.ping.nonce = (uint64_t)i * 1000003u;
		wire_encode(&m, &b);
	}
	wire_reader_t *r = wire_reader_new(NULL);
	int got = 0;
	for (size_t i = 0; i < b.len; i++) {
		CHECK_INT_EQ(wire_reader_feed(r, b.data + i, 1), 0);
		int rc;
		while ((rc = wire_reader_next(r, &d, NULL)) == 1) {
			CHECK(d.u.ping.nonce == (uint64_t)got * 1000003u);
			got++;
		}
		CHECK_INT_EQ(rc, 0);
	}
	CHECK_INT_EQ(got, 3);
	CHECK_INT_EQ(wire_reader_pending(r), 0);
	CHECK_INT_EQ(wire_reader_finish(r, NULL), 0);
	wire_reader_free(r);
	pith_buf_release(&b);
}

TEST(oversized, "rejects a frame longer than the limit as soon as its prefix arrives")
{
	wire_limits_t lim = wire_limits_default;
	lim.max_frame = 1024;
	lim.max_buffer = 4096;
	wire_reader_t *r = wire_reader_new(&lim);
	uint8_t h[4] = {0, 0, 4, 1}; /* 1025 */
	wire_msg_t d;
	pith_err_t err = {0};
	CHECK_INT_EQ(wire_reader_feed(r, h, 4), 0);
	CHECK_INT_EQ(wire_reader_next(r, &d, NULL), PITH_ETOOBIG);
	CHECK_INT_EQ(wire_reader_error(r, &err), PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "exceeds the limit of 1024");
	/* sticky: feeding and pulling keep failing */
	CHECK_INT_EQ(wire_reader_feed(r, h, 1), PITH_ETOOBIG);
	CHECK_INT_EQ(wire_reader_next(r, &d, NULL), PITH_ETOOBIG);
	CHECK_INT_EQ(wire_reader_room(r), 0);
	wire_reader_free(r);
}

TEST(zero_len, "rejects a zero-length frame")
{
	uint8_t z[4] = {0};
	wire_msg_t d;
	pith_err_t err = {0};
	CHECK_INT_EQ(dec_frame(z, 4, &d, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "zero-length");
}

TEST(truncated_vs_malformed, "tells a stream truncated inside a frame from a malformed one")
{
	wire_msg_t m = {.type = WIRE_PING}, d;
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	wire_encode(&m, &b);
	wire_reader_t *r = wire_reader_new(NULL);
	wire_reader_feed(r, b.data, b.len - 1);
	CHECK_INT_EQ(wire_reader_next(r, &d, NULL), 0);
	CHECK_INT_EQ(wire_reader_finish(r, &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "stream ended inside a frame");
	wire_reader_free(r);

	/* a whole frame whose msgpack array is cut short: truncated payload */
	const uint8_t cut[] = {0, 0, 0, 2, 0x92, 0x03};
	CHECK_INT_EQ(dec_frame(cut, sizeof(cut), &d, &err), PITH_ETRUNC);
	/* a whole frame with garbage: malformed */
	const uint8_t junk[] = {0, 0, 0, 3, 0xc1, 0xc1, 0xc1};
	CHECK_INT_EQ(dec_frame(junk, sizeof(junk), &d, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "0xc1");
	pith_buf_release(&b);
}

TEST(counts_first, "refuses array and map counts larger than the bytes that remain before unpacking")
{
	pith_err_t err;
	/* array32 of 4 billion elements in 6 bytes */
	CHECK_INT_EQ(DEC_RAW("\xdd\xff\xff\xff\xff\x01", &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "claims 4294967295 elements");
	CHECK_INT_EQ(err.offset, 0);
	/* inner map16 with 0x8000 pairs */
	CHECK_INT_EQ(DEC_RAW("\x92\x08\xde\x80\x00\x01\x02", &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "map at byte 2");
	/* bin32 of 2^32-1 bytes */
	CHECK_INT_EQ(DEC_RAW("\x92\x08\xc6\xff\xff\xff\xff", &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "claims 4294967295 bytes");
	/* a header cut short */
	CHECK_INT_EQ(DEC_RAW("\x92\x08\xc5\x01", &err), PITH_ETRUNC);
	CHECK_STR_CONTAINS(err.msg, "msgpack header");
}

TEST(depth, "rejects containers nested deeper than the protocol uses")
{
	pith_err_t err;
	CHECK_INT_EQ(DEC_RAW("\x91\x91\x91\x91\x91\x01", &err), PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "nested deeper");
}

TEST(trailing, "rejects bytes after the message inside a frame")
{
	pith_err_t err;
	CHECK_INT_EQ(DEC_RAW("\x91\x06\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "1 trailing bytes");
	CHECK_INT_EQ(err.offset, 2);
}

TEST(floats_ext, "rejects floats and extension types")
{
	pith_err_t err;
	CHECK_INT_EQ(DEC_RAW("\x92\x03\xcb\x00\x00\x00\x00\x00\x00\x00\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "0xcb");
	CHECK_INT_EQ(DEC_RAW("\x92\x03\xd4\x01\x01", &err), PITH_EINVAL);
}

TEST(shapes, "rejects wrong element counts, wrong field types and unknown types")
{
	pith_err_t err;
	CHECK_INT_EQ(DEC_RAW("\x93\x03\x07\x07", &err), PITH_EINVAL); /* PING with 3 */
	CHECK_STR_CONTAINS(err.msg, "PING: message has 3 elements, expected 2");
	CHECK_INT_EQ(DEC_RAW("\x92\x03\xa1x", &err), PITH_EINVAL); /* string nonce */
	CHECK_STR_CONTAINS(err.msg, "PING: nonce is not an unsigned integer");
	CHECK_INT_EQ(DEC_RAW("\x92\x03\xff", &err), PITH_EINVAL); /* negative nonce */
	CHECK_INT_EQ(DEC_RAW("\x91\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "type 0 is unknown");
	CHECK_INT_EQ(DEC_RAW("\x91\x22", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "type 34 is reserved");
	CHECK_INT_EQ(DEC_RAW("\x91\x21", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "RECON_BUNDLES: message has 1 elements, expected 4");
	CHECK_INT_EQ(DEC_RAW("\x90", &err), PITH_EINVAL);
	CHECK_INT_EQ(DEC_RAW("\x03", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not an array");
	CHECK_INT_EQ(DEC_RAW("\x91\xa1x", &err), PITH_EINVAL);
}

TEST(ids_limits, "rejects id lists that are empty, ragged or over the limit")
{
	pith_err_t err;
	wire_msg_t d;
	CHECK_INT_EQ(DEC_RAW("\x92\x08\xc4\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "ANNOUNCE: ids holds no id");
	CHECK_INT_EQ(DEC_RAW("\x92\x09\xc4\x03\x01\x02\x03", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "GET: ids is not a whole number of 32-byte ids");
	CHECK_INT_EQ(err.offset, 4);

	wire_limits_t lim = wire_limits_default;
	lim.max_ids = 2;
	uint8_t ids[3 * 32] = {0};
	wire_msg_t m = {.type = WIRE_ANNOUNCE};
	m.u.ids.ids = ids;
	m.u.ids.n = 3;
	pith_buf_t b = PITH_BUF_INIT;
	CHECK_INT_EQ(wire_encode(&m, &b), 0);
	CHECK_INT_EQ(wire_decode(b.data + 4, b.len - 4, &lim, &d, &err), PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "holds 3 ids, more than the limit of 2");
	CHECK_INT_EQ(wire_decode(b.data + 4, b.len - 4, NULL, &d, &err), 0);
	pith_buf_release(&b);
}

TEST(hello_checks, "rejects a HELLO with a bad network id, key length or port")
{
	wire_msg_t m = {.type = WIRE_HELLO}, d;
	strcpy(m.u.hello.network_id, "net");
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	CHECK_INT_EQ(wire_encode(&m, &b), 0);
	/* the network id "net" sits after 0x98 0x01 version features 0xa3 */
	uint8_t *p = memchr(b.data, 'n', b.len);
	CHECK(p != NULL);
	if (p) {
		p[1] = ' ';
		CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), PITH_EINVAL);
		CHECK_STR_CONTAINS(err.msg, "network_id");
	}
	strcpy(m.u.hello.network_id, "bad id");
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL);
	pith_err_t e2;
	/* node key of 31 bytes */
	const char raw[] = "\x98\x01\x01\x00\xa1n\xc4\x1f"
			   "0123456789012345678901234567890"
			   "\xc4\x20" "01234567890123456789012345678901" "\x00\xa0";
	CHECK_INT_EQ(dec_raw(raw, sizeof(raw) - 1, &e2), PITH_EINVAL);
	CHECK_STR_CONTAINS(e2.msg, "HELLO: node_key has 31 bytes, expected 32");
	pith_buf_release(&b);
}

TEST(peers_checks, "rejects PEERS entries with a bad address and too many entries")
{
	pith_err_t err;
	CHECK_INT_EQ(DEC_RAW("\x92\x07\x91\x92\xc4\x03\x01\x02\x03\x01", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not 4 or 16 bytes");
	CHECK_INT_EQ(DEC_RAW("\x92\x07\x91\x92\xc4\x04\x01\x02\x03\x04\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "port is 0");
	CHECK_INT_EQ(DEC_RAW("\x92\x07\x91\x92\xc4\x04\x01\x02\x03\x04\xce\x00\x01\x00\x00", &err),
		     PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "out of range");
	/* 65 entries */
	uint8_t raw[5 + 65 * 8];
	size_t n = 0;
	raw[n++] = 0x92;
	raw[n++] = 0x07;
	raw[n++] = 0xdc;
	raw[n++] = 0;
	raw[n++] = 65;
	for (int i = 0; i < 65; i++) {
		const uint8_t e[] = {0x92, 0xc4, 4, 10, 0, 0, 1, 0x05};
		memcpy(raw + n, e, sizeof(e));
		n += sizeof(e);
	}
	CHECK_INT_EQ(dec_raw((const char *)raw, n, &err), PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "65 entries, more than the limit of 64");
}

TEST(bundle_checks, "rejects bundle refs that are not full pith numbers")
{
	pith_err_t err;
	CHECK_INT_EQ(DEC_RAW("\x92\x0d\x91\xa4pith", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "BUNDLE_GET: pith_number has 4 bytes");
	char raw[64];
	size_t n = 0;
	raw[n++] = '\x92';
	raw[n++] = '\x0d';
	raw[n++] = '\x91';
	raw[n++] = '\xd9'; /* str 8: fixstr stops at 31 bytes */
	raw[n++] = 36;
	memcpy(raw + n, "pith:2024:ar7b3devmotsbrccvxuclysrre", 36);
	n += 36;
	CHECK_INT_EQ(dec_raw(raw, n, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not a full pith number");
}

TEST(bundle_full, "round-trips a BUNDLE_ANNOUNCE and a BUNDLE_GET of 64 refs and refuses 65")
{
	/* the bulk pace (WIRE_FEAT_BUNDLE_BULK) sends them full */
	static const char *const b32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	wire_type_t types[2] = {WIRE_BUNDLE_ANNOUNCE, WIRE_BUNDLE_GET};
	for (int t = 0; t < 2; t++) {
		wire_msg_t m = {.type = types[t]}, d;
		m.u.bundles.n = WIRE_BUNDLE_REFS_MAX;
		for (size_t i = 0; i < WIRE_BUNDLE_REFS_MAX; i++) {
			wire_bundle_ref_t *r = &m.u.bundles.refs[i];
			snprintf(r->pith_number, sizeof(r->pith_number),
				 "pith:2024:AR7B3DEVMOTSBRCCVXUCLYS%c%c%c", b32[i % 32], b32[i / 32], 'E');
			r->built_us = (int64_t)i * 1000003 - 5;
			fill(r->sha, 32, (uint8_t)i);
		}
		CHECK_INT_EQ(enc(&m, &b), 0);
		CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), 1);
		CHECK_INT_EQ(d.type, types[t]);
		CHECK_INT_EQ(d.u.bundles.n, WIRE_BUNDLE_REFS_MAX);
		for (size_t i = 0; i < WIRE_BUNDLE_REFS_MAX; i++) {
			CHECK_STR_EQ(d.u.bundles.refs[i].pith_number, m.u.bundles.refs[i].pith_number);
			if (t == 0) {
				CHECK_INT_EQ(d.u.bundles.refs[i].built_us, m.u.bundles.refs[i].built_us);
				CHECK_MEM_EQ(d.u.bundles.refs[i].sha, 32, m.u.bundles.refs[i].sha, 32);
			}
		}
	}
	/* a 65th ref: the array header says 65 */
	wire_msg_t m = {.type = WIRE_BUNDLE_GET};
	m.u.bundles.n = 1;
	snprintf(m.u.bundles.refs[0].pith_number, sizeof(m.u.bundles.refs[0].pith_number), "%s",
		 "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE");
	CHECK_INT_EQ(enc(&m, &b), 0);
	pith_buf_t raw = PITH_BUF_INIT;
	pith_buf_append(&raw, "\x92\x0d\xdc\x00\x41", 5);
	for (int i = 0; i < 65; i++)
		pith_buf_append(&raw, b.data + 7, b.len - 7); /* the one str(36) */
	CHECK_INT_EQ(dec_raw((const char *)raw.data, raw.len, &err), PITH_ETOOBIG);
	pith_buf_release(&raw);
	pith_buf_release(&b);
}

TEST(hello_bulk, "carries the bulk bundle feature bit in HELLO")
{
	wire_msg_t m = {.type = WIRE_HELLO}, d;
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	m.u.hello.version = WIRE_VERSION;
	m.u.hello.features = WIRE_FEAT_SYNC | WIRE_FEAT_BUNDLE_SYNC | WIRE_FEAT_BUNDLE_BULK;
	strcpy(m.u.hello.network_id, "pith-test");
	CHECK_INT_EQ(enc(&m, &b), 0);
	CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), 1);
	CHECK_INT_EQ(d.u.hello.features, 7);
	CHECK(d.u.hello.features & WIRE_FEAT_BUNDLE_BULK);
	pith_buf_release(&b);
}

TEST(buffer_limit, "refuses to buffer more than max_buffer unconsumed bytes")
{
	wire_limits_t lim = wire_limits_default;
	lim.max_frame = 100;
	lim.max_buffer = 200;
	wire_reader_t *r = wire_reader_new(&lim);
	uint8_t junk[150] = {0, 0, 0, 100};
	CHECK_INT_EQ(wire_reader_room(r), 200);
	CHECK_INT_EQ(wire_reader_feed(r, junk, 150), 0);
	CHECK_INT_EQ(wire_reader_room(r), 50);
	CHECK_INT_EQ(wire_reader_feed(r, junk, 51), PITH_ETOOBIG);
	wire_reader_free(r);
	lim.max_buffer = 50; /* smaller than a frame: refused */
	CHECK(wire_reader_new(&lim) == NULL);
}

TEST(sticky, "keeps the first error for every later call")
{
	wire_reader_t *r = wire_reader_new(NULL);
	uint8_t bad[] = {0, 0, 0, 1, 0xc1};
	wire_msg_t d;
	pith_err_t err;
	wire_reader_feed(r, bad, sizeof(bad));
	CHECK_INT_EQ(wire_reader_next(r, &d, NULL), PITH_EINVAL);
	uint8_t ping[] = {0, 0, 0, 2, 0x92, 0x03, 0x07};
	CHECK_INT_EQ(wire_reader_feed(r, ping, sizeof(ping)), PITH_EINVAL);
	CHECK_INT_EQ(wire_reader_next(r, &d, NULL), PITH_EINVAL);
	CHECK_INT_EQ(wire_reader_finish(r, &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "0xc1");
	wire_reader_free(r);
}

TEST(encode_refuses, "refuses to encode what a peer must reject")
{
	pith_buf_t b = PITH_BUF_INIT;
	wire_msg_t m = {.type = WIRE_ANNOUNCE};
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL); /* no ids */
	m.type = WIRE_BYE;
	strcpy(m.u.bye.reason, "tab\there");
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL);
	m.type = (wire_type_t)40;
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL);
	CHECK_INT_EQ(b.len, 0);
	pith_buf_release(&b);
}

TEST(recon_checks, "checks RECON's session, data and item count, and caps the data")
{
	pith_err_t err;
	CHECK_INT_EQ(DEC_RAW("\x94\x20\x01\xc4\x00\x00", &err), 0);
	CHECK_INT_EQ(DEC_RAW("\x94\x20\x00\xc4\x01\x01\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "RECON: session is 0");
	CHECK_INT_EQ(DEC_RAW("\x94\x20\x01\xa1x\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "RECON: data is not binary");
	CHECK_INT_EQ(DEC_RAW("\x94\x20\x01\xc4\x00\xff", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "RECON: items is not an unsigned integer");
	CHECK_INT_EQ(DEC_RAW("\x93\x20\x01\xc4\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "RECON: message has 3 elements, expected 4");

	/* data one byte over WIRE_RECON_MAX: too big, though the frame fits */
	size_t n = WIRE_RECON_MAX + 1, len = 0;
	uint8_t *p = calloc(1, n + 16);
	p[len++] = 0x94;
	p[len++] = 0x20;
	p[len++] = 0x07;
	p[len++] = 0xc6;
	p[len++] = (uint8_t)(n >> 24);
	p[len++] = (uint8_t)(n >> 16);
	p[len++] = (uint8_t)(n >> 8);
	p[len++] = (uint8_t)n;
	len += n;
	p[len++] = 0x00;
	wire_msg_t d;
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(wire_decode(p, len, NULL, &d, &err), PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "RECON: data has 1048577 bytes, more than the limit of 1048576");
	CHECK_INT_EQ(err.offset, 8);

	/* and the sender refuses what the receiver would */
	pith_buf_t b = PITH_BUF_INIT;
	wire_msg_t m = {.type = WIRE_RECON};
	m.u.recon.data = p;
	m.u.recon.len = 1;
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL); /* session 0 */
	m.u.recon.session = 1;
	m.u.recon.len = n;
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL);
	m.u.recon.len = n - 1;
	CHECK_INT_EQ(wire_encode(&m, &b), 0);
	CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), 1);
	CHECK_INT_EQ(d.u.recon.len, n - 1);
	pith_buf_release(&b);
	free(p);
}

TEST(auth_msg, "binds the AUTH message to the network, both keys, both nonces and the direction")
{
	uint8_t a[32], b[32], na[32], nb[32], m1[WIRE_AUTH_MSG_MAX], m2[WIRE_AUTH_MSG_MAX],
		m3[WIRE_AUTH_MSG_MAX];
	fill(a, 32, 1);
	fill(b, 32, 2);
	fill(na, 32, 3);
	fill(nb, 32, 4);
	size_t n1 = wire_auth_message("net", a, na, b, nb, m1);
	size_t n2 = wire_auth_message("net", b, nb, a, na, m2);
	size_t n3 = wire_auth_message("net2", a, na, b, nb, m3);
	CHECK_INT_EQ(n1, sizeof(WIRE_AUTH_CONTEXT) + 1 + 3 + 128);
	CHECK(n1 == n2 && memcmp(m1, m2, n1) != 0);
	CHECK(n3 != n1 || memcmp(m1, m3, n1) != 0);
	CHECK_MEM_EQ(m1, sizeof(WIRE_AUTH_CONTEXT), WIRE_AUTH_CONTEXT, sizeof(WIRE_AUTH_CONTEXT));
}

TEST(root_checks, "checks ROOT's document is 1 to WIRE_ROOT_DOC_MAX bytes of binary")
{
	pith_err_t err;
	CHECK_INT_EQ(DEC_RAW("\x92\x11\xc4\x02{}", &err), 0);
	CHECK_INT_EQ(DEC_RAW("\x92\x11\xc4\x00", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "ROOT: document is empty");
	CHECK_INT_EQ(DEC_RAW("\x92\x11\xa2{}", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "ROOT: document is not binary");
	CHECK_INT_EQ(DEC_RAW("\x91\x11", &err), PITH_EINVAL);
	CHECK_STR_CONTAINS(err.msg, "ROOT: message has 1 elements, expected 2");

	uint8_t doc[WIRE_ROOT_DOC_MAX + 1];
	memset(doc, '{', sizeof(doc));
	pith_buf_t b = PITH_BUF_INIT;
	wire_msg_t m = {.type = WIRE_ROOT}, d;
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL); /* no document */
	m.u.root.doc = doc;
	m.u.root.len = sizeof(doc);
	CHECK_INT_EQ(wire_encode(&m, &b), PITH_EINVAL);
	m.u.root.len = WIRE_ROOT_DOC_MAX;
	CHECK_INT_EQ(wire_encode(&m, &b), 0);
	CHECK_INT_EQ(dec_frame(b.data, b.len, &d, &err), 1);
	CHECK_INT_EQ(d.u.root.len, WIRE_ROOT_DOC_MAX);
	/* one byte more: too big, though the frame fits */
	uint8_t raw[WIRE_ROOT_DOC_MAX + 8];
	size_t len = 0;
	raw[len++] = 0x92;
	raw[len++] = 0x11;
	raw[len++] = 0xc5;
	raw[len++] = (uint8_t)((WIRE_ROOT_DOC_MAX + 1) >> 8);
	raw[len++] = (uint8_t)(WIRE_ROOT_DOC_MAX + 1);
	memcpy(raw + len, doc, WIRE_ROOT_DOC_MAX + 1);
	len += WIRE_ROOT_DOC_MAX + 1;
	CHECK_INT_EQ(wire_decode(raw, len, NULL, &d, &err), PITH_ETOOBIG);
	CHECK_STR_CONTAINS(err.msg, "ROOT: document has 4097 bytes, more than the limit of 4096");
	pith_buf_release(&b);
}

TEST(names, "names message types, reserved and unknown ones")
{
	CHECK_STR_EQ(wire_type_name(WIRE_ANNOUNCE), "ANNOUNCE");
	CHECK_STR_EQ(wire_type_name(40), "reserved");
	CHECK_STR_EQ(wire_type_name(WIRE_RECON), "RECON");
	CHECK_STR_EQ(wire_type_name(WIRE_RECON_BUNDLES), "RECON_BUNDLES");
	CHECK_STR_EQ(wire_type_name(34), "reserved");
	CHECK_STR_EQ(wire_type_name(17), "ROOT");
	CHECK_STR_EQ(wire_type_name(20), "unknown");
	CHECK_STR_EQ(wire_type_name(200), "unknown");
	CHECK_STR_EQ(wire_type_name(-1), "unknown");
}

int main(void)
{
	RUN(ping_bytes);
	RUN(hello_round_trip);
	RUN(hello_extra);
	RUN(hello_http_url);
	RUN(hello_http_url_bad);
	RUN(all_round_trip);
	RUN(byte_at_a_time);
	RUN(oversized);
	RUN(zero_len);
	RUN(truncated_vs_malformed);
	RUN(counts_first);
	RUN(depth);
	RUN(trailing);
	RUN(floats_ext);
	RUN(shapes);
	RUN(ids_limits);
	RUN(hello_checks);
	RUN(peers_checks);
	RUN(bundle_checks);
	RUN(bundle_full);
	RUN(hello_bulk);
	RUN(buffer_limit);
	RUN(sticky);
	RUN(encode_refuses);
	RUN(recon_checks);
	RUN(root_checks);
	RUN(auth_msg);
	RUN(names);
	wire_msg_t m;
	dec_frame(NULL, 0, &m, NULL); /* frees the last reader */
	return test_done();
}
