/* node/net/peer.c over a socketpair, the test playing the remote: framing
 * (undecodable and oversized frames), the handshake (HELLO, AUTH, their
 * order, network, version, self) and what a misbehaving remote costs.
 * Helpers in test_peer_util.h. */
#include "test_peer_util.h"

/* ---- cases over a socketpair --------------------------------------------- */

TEST(accepted_peer_sends_hello, "an accepted peer is sent a HELLO with the node's key, network and agent")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	CHECK_INT_EQ(net_count_in(t->net), 1);
	CHECK_INT_EQ(net_count_out(t->net), 0);
	CHECK_INT_EQ(t->stats.connections_in, 1);
	WAIT_UNTIL(rm->n >= 1, rm, 2000);
	const wire_msg_t *h = remote_got(rm, WIRE_HELLO);
	CHECK(h != NULL);
	if (h) {
		CHECK_INT_EQ(h->u.hello.version, WIRE_VERSION);
		CHECK_STR_EQ(h->u.hello.network_id, t->cfg.network_id);
		CHECK_MEM_EQ(h->u.hello.node_pk, 32, t->pk, 32);
		CHECK_STR_EQ(h->u.hello.agent, "pithd/0.1");
	}
	CHECK(!peer_is_ready(remote_peer(t, rm)));
	CHECK_INT_EQ(t->rec.ready, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(remote_handshake_makes_ready, "a remote that signs the handshake is ready with its key, and its messages go up")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	CHECK_MEM_EQ(t->rec.ready_pk, 32, rm->pk, 32);
	CHECK_INT_EQ(t->rec.ready_serial, rm->serial);
	peer_t *p = remote_peer(t, rm);
	CHECK(p && peer_is_ready(p));
	CHECK(remote_got(rm, WIRE_AUTH) != NULL);
	send_type(rm, WIRE_PEERS_REQ);
	WAIT_UNTIL(t->rec.messages, rm, 2000);
	CHECK_INT_EQ(t->rec.messages, 1);
	CHECK_INT_EQ(t->rec.msg_types[0], WIRE_PEERS_REQ);
	CHECK_INT_EQ(t->stats.msgs_recv[WIRE_PEERS_REQ], 1);
	if (p) {
		CHECK_INT_EQ(p->msgs_in, 3); /* HELLO, AUTH, PEERS_REQ */
		CHECK_INT_EQ(p->score, 0);
	}
	CHECK_INT_EQ(t->rec.gone, 0);
	remote_free(rm);
	tnet_free(t);
}

static const uint8_t undecodable[] = {0, 0, 0, 1, 0xc1}; /* 0xc1: never used in msgpack */

TEST(malformed_frame_bans, "a frame that does not decode costs SCORE_MALFORMED, fires the ban, says BYE and the peer is freed")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	remote_write(rm, undecodable, sizeof(undecodable));
	check_closed(t, rm, SCORE_MALFORMED, 1, WIRE_BYE_BANNED);
	CHECK_STR_CONTAINS(t->rec.ban_what, "malformed frame");
	CHECK_INT_EQ(t->stats.malformed, 1);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	CHECK_INT_EQ(net_count_in(t->net), 0);
	const wire_msg_t *bye = remote_got(rm, WIRE_BYE);
	if (bye)
		CHECK_STR_CONTAINS(bye->u.bye.reason, "banned: malformed frame");
	remote_free(rm);
	tnet_free(t);
}

TEST(oversized_length_refused, "a length prefix over max_frame is refused as soon as its 4 bytes arrive, as malformed")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	static const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff};
	remote_write(rm, huge, sizeof(huge));
	check_closed(t, rm, SCORE_MALFORMED, 1, WIRE_BYE_BANNED);
	CHECK_INT_EQ(t->stats.malformed, 1);
	remote_free(rm);
	tnet_free(t);
}

TEST(malformed_below_threshold, "below the ban threshold a malformed frame adds its points and closes with BYE PROTOCOL, without a ban")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	remote_write(rm, undecodable, sizeof(undecodable));
	check_closed(t, rm, SCORE_MALFORMED, 0, WIRE_BYE_PROTOCOL);
	remote_free(rm);
	tnet_free(t);
}

TEST(message_before_handshake, "a message before the handshake is a protocol violation: SCORE_PROTOCOL, a ban at the default threshold, never passed up")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	send_type(rm, WIRE_PEERS_REQ);
	check_closed(t, rm, SCORE_PROTOCOL, 1, WIRE_BYE_BANNED);
	CHECK_INT_EQ(t->rec.messages, 0);
	CHECK_STR_CONTAINS(t->rec.ban_what, "PEERS_REQ before the handshake");
	CHECK_INT_EQ(t->rec.gone_was_ready, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(auth_before_hello, "an AUTH before HELLO is a protocol violation")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	send_type(rm, WIRE_AUTH);
	check_closed(t, rm, SCORE_PROTOCOL, 0, WIRE_BYE_PROTOCOL);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "AUTH before HELLO");
	remote_free(rm);
	tnet_free(t);
}

/* The remote sends HELLO (its key, netid, version) and nothing more. */
static void send_hello(remote_t *rm, const char *netid, uint32_t version)
{
	wire_msg_t m;
	hello_of(rm, netid, &m);
	m.u.hello.version = version;
	remote_send(rm, &m);
}

TEST(other_network_closes, "a HELLO with another network id is closed with BYE NETWORK and no points")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	send_hello(rm, "another-net", WIRE_VERSION);
	check_closed(t, rm, 0, 0, WIRE_BYE_NETWORK);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "another-net");
	CHECK_INT_EQ(t->rec.ready, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(hello_with_own_key_is_self, "a HELLO carrying the node's own key marks the peer is_self and closes it with BYE SELF")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	memcpy(rm->pk, t->pk, 32);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	check_closed(t, rm, 0, 0, WIRE_BYE_SELF);
	CHECK_INT_EQ(t->rec.gone_is_self, 1);
	remote_free(rm);
	tnet_free(t);
}

TEST(older_version_closes, "a HELLO with an older protocol version is closed with BYE VERSION and no points")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION - 1);
	check_closed(t, rm, 0, 0, WIRE_BYE_VERSION);
	remote_free(rm);
	tnet_free(t);
}

TEST(second_hello, "a second HELLO during the handshake is a protocol violation")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	check_closed(t, rm, SCORE_PROTOCOL, 0, WIRE_BYE_PROTOCOL);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "a second HELLO");
	remote_free(rm);
	tnet_free(t);
}

TEST(hello_after_handshake, "a HELLO after the handshake is a protocol violation and is not passed up")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	check_closed(t, rm, SCORE_PROTOCOL, 0, WIRE_BYE_PROTOCOL);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "HELLO after the handshake");
	CHECK_INT_EQ(t->rec.messages, 0);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	remote_free(rm);
	tnet_free(t);
}

/* The remote answers the node's HELLO with its HELLO and an AUTH whose
 * signature has a bit flipped (flip_sig) or covers a nonce the node did not
 * send (flip_nonce). */
static void send_bad_auth(remote_t *rm, tnet_t *t, int flip_sig, int flip_nonce)
{
	WAIT_UNTIL(remote_got(rm, WIRE_HELLO), rm, 2000);
	CHECK(rm->n >= 1 && rm->msgs[0].type == WIRE_HELLO);
	send_hello(rm, t->cfg.network_id, WIRE_VERSION);
	rm->msgs[0].u.hello.nonce[0] ^= (uint8_t)flip_nonce;
	wire_msg_t m;
	auth_of(rm, t, &m);
	m.u.auth.sig[0] ^= (uint8_t)flip_sig;
	remote_send(rm, &m);
}

TEST(bad_auth_signature, "an AUTH whose signature does not verify costs SCORE_BAD_AUTH and the peer is never ready")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.ban_threshold = 1000;
	remote_t *rm = remote_new(t);
	send_bad_auth(rm, t, 1, 0);
	check_closed(t, rm, SCORE_BAD_AUTH, 0, WIRE_BYE_PROTOCOL);
	CHECK_INT_EQ(t->rec.ready, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(auth_for_other_nonce, "an AUTH signed over another connection's nonce does not verify, and bans at the default threshold")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	send_bad_auth(rm, t, 0, 1);
	check_closed(t, rm, SCORE_BAD_AUTH, 1, WIRE_BYE_BANNED);
	CHECK_INT_EQ(t->rec.ready, 0);
	CHECK_STR_CONTAINS(t->rec.ban_what, "signature");
	remote_free(rm);
	tnet_free(t);
}

int main(void)
{
	if (peer_test_init())
		return 1;
	RUN(accepted_peer_sends_hello);
	RUN(remote_handshake_makes_ready);
	RUN(malformed_frame_bans);
	RUN(oversized_length_refused);
	RUN(malformed_below_threshold);
	RUN(message_before_handshake);
	RUN(auth_before_hello);
	RUN(other_network_closes);
	RUN(hello_with_own_key_is_self);
	RUN(older_version_closes);
	RUN(second_hello);
	RUN(hello_after_handshake);
	RUN(bad_auth_signature);
	RUN(auth_for_other_nonce);
	return peer_test_done();
}
