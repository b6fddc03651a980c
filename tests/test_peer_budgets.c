/* node/net/peer.c over a socketpair, the test playing the remote: the
 * message and byte budgets (flood strikes, answers, pausing), PING/PONG,
 * the timeouts (handshake, ping, idle), a slow reader, and closing
 * (truncated, clean, buffered messages, BYE). Helpers in test_peer_util.h. */
#include "test_peer_util.h"

static void small_burst(node_config_t *c)
{
	c->peer_msg_burst = 3;
	c->peer_msg_rate = 10;
}

TEST(flood_is_charged, "messages beyond the burst cost a flood strike and pause reading, which resumes as tokens refill")
{
	tnet_t *t = tnet_new(small_burst);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	/* tokens may have refilled a little since the peer was made: drain */
	for (int i = 0; i < 5; i++)
		send_type(rm, WIRE_PEERS_REQ);
	WAIT_UNTIL(t->rec.messages >= 4, rm, 2000);
	settle(rm);
	CHECK(p != NULL);
	if (p) {
		/* 3 fit the burst; the 4th overdraws, is delivered, and pauses */
		CHECK_INT_EQ(p->flood_strikes, 1);
		CHECK_INT_EQ(p->score, SCORE_FLOOD);
		if (t->rec.messages == 4)
			CHECK_INT_EQ(p->read_paused, 1);
		CHECK(p->state == PEER_READY);
	}
	CHECK(t->rec.messages == 4 || t->rec.messages == 5);
	CHECK_INT_EQ(t->rec.bans, 0);
	/* at 10/s, the pause lasts about 0.2 s; then the 5th is read */
	WAIT_UNTIL(t->rec.messages == 5, rm, 3000);
	CHECK_INT_EQ(t->rec.messages, 5);
	if (p) {
		CHECK_INT_EQ(p->read_paused, 0);
		CHECK_INT_EQ(p->flood_strikes, 1);
	}
	CHECK_INT_EQ(t->rec.gone, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(flood_then_close_not_truncated, "a flooding peer that closes between frames gets its flood strike but no SCORE_TRUNCATED")
{
	tnet_t *t = tnet_new(small_burst);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	wire_msg_t m = {.type = WIRE_PEERS_REQ};
	remote_send_n(rm, &m, 8);
	shutdown(rm->fd, SHUT_WR); /* the stream ends between frames */
	WAIT_UNTIL(t->rec.freed, rm, 3000);
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.gone_score, SCORE_FLOOD);
	CHECK_INT_EQ(t->rec.messages, 8); /* read at the budget's pace, then the end */
	CHECK_STR_CONTAINS(t->rec.gone_reason, "closed by the peer");
	remote_free(rm);
	tnet_free(t);
}

TEST(answers_are_free, "messages is_answer says are answers are not charged to the budget")
{
	tnet_t *t = tnet_new(small_burst);
	t->rec.answer_type = WIRE_NOTFOUND;
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	wire_msg_t m = ids_msg(WIRE_NOTFOUND, 1);
	remote_send_n(rm, &m, 20);
	WAIT_UNTIL(t->rec.messages >= 20, rm, 2000);
	CHECK_INT_EQ(t->rec.messages, 20);
	CHECK(t->rec.answers_asked >= 20);
	if (p) {
		CHECK_INT_EQ(p->flood_strikes, 0);
		CHECK_INT_EQ(p->score, 0);
		CHECK_INT_EQ(p->read_paused, 0);
		CHECK(p->msg_tokens > 2);
	}
	remote_free(rm);
	tnet_free(t);
}

TEST(byte_budget_pauses, "a peer over its byte budget is paused, not punished, and read again as the budget refills")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.peer_byte_rate = 16384; /* bytes a second (and the burst) */
	t->rec.answer_type = WIRE_NOTFOUND;
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	wire_msg_t m = ids_msg(WIRE_NOTFOUND, 32);
	size_t total = remote_send_n(rm, &m, 24); /* about 25 KB */
	int paused = 0;
	int64_t dl = node_now_us() + 4000000;
	while (t->rec.messages < 24 && node_now_us() < dl) {
		turn(rm);
		paused |= p->read_paused;
	}
	CHECK(paused);
	CHECK_INT_EQ(t->rec.messages, 24);
	CHECK_INT_EQ(p->score, 0);
	CHECK_INT_EQ(p->flood_strikes, 0);
	CHECK(p->bytes_in >= total);
	CHECK_INT_EQ(t->rec.gone, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(ping_answered_with_pong, "a PING is answered with a PONG of its nonce and not passed up")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	wire_msg_t m = {.type = WIRE_PING};
	m.u.ping.nonce = 0x1234567890abcdefull;
	remote_send(rm, &m);
	WAIT_UNTIL(remote_got(rm, WIRE_PONG), rm, 2000);
	const wire_msg_t *pong = remote_got(rm, WIRE_PONG);
	CHECK(pong && pong->u.ping.nonce == 0x1234567890abcdefull);
	CHECK_INT_EQ(t->rec.messages, 0);
	CHECK_INT_EQ(t->stats.msgs_recv[WIRE_PING], 1);
	CHECK_INT_EQ(t->stats.msgs_sent[WIRE_PONG], 1);
	remote_free(rm);
	tnet_free(t);
}

TEST(ping_flood, "more than five PINGs in ten seconds are not answered and cost SCORE_FLOOD")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	wire_msg_t m = {.type = WIRE_PING};
	for (int i = 0; i < 8; i++)
		remote_send(rm, &m);
	WAIT_UNTIL(t->stats.msgs_recv[WIRE_PING] == 8, rm, 2000);
	settle(rm);
	CHECK_INT_EQ(t->stats.msgs_sent[WIRE_PONG], 5);
	if (p)
		CHECK_INT_EQ(p->score, SCORE_FLOOD);
	CHECK_INT_EQ(t->rec.messages, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(handshake_timeout, "the handshake timeout closes a peer that never sends HELLO, with BYE TIMEOUT")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	WAIT_UNTIL(remote_got(rm, WIRE_HELLO), rm, 2000);
	net_tick(t->net, node_now_us() + (t->cfg.handshake_timeout_ms - 500) * 1000);
	CHECK_INT_EQ(t->rec.gone, 0);
	net_tick(t->net, node_now_us() + (t->cfg.handshake_timeout_ms + 1) * 1000);
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.gone_was_ready, 0);
	check_closed(t, rm, 0, 0, WIRE_BYE_TIMEOUT);
	remote_free(rm);
	tnet_free(t);
}

TEST(idle_peer_pinged_then_timed_out, "a quiet ready peer is PINGed after ping_interval and closed when no PONG comes within ping_timeout")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	int64_t now = node_now_us() + (t->cfg.ping_interval_ms + 1) * 1000;
	net_tick(t->net, now);
	WAIT_UNTIL(remote_got(rm, WIRE_PING), rm, 2000);
	CHECK(remote_got(rm, WIRE_PING) != NULL);
	CHECK(p && p->ping_sent_us == now);
	net_tick(t->net, now + (t->cfg.ping_timeout_ms + 1) * 1000);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	check_closed(t, rm, 0, 0, WIRE_BYE_TIMEOUT);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "no PONG");
	remote_free(rm);
	tnet_free(t);
}

TEST(idle_peer_closed, "a ready peer silent for idle_timeout is closed with BYE TIMEOUT")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	net_tick(t->net, node_now_us() + (t->cfg.idle_timeout_ms + 1) * 1000);
	check_closed(t, rm, 0, 0, WIRE_BYE_TIMEOUT);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "silent for");
	remote_free(rm);
	tnet_free(t);
}

TEST(slow_reader_closed, "peer_send beyond peer_out_max closes a peer that does not read as too slow, freed when the linger runs out")
{
	tnet_t *t = tnet_new(NULL);
	t->cfg.peer_out_max = 1 << 20; /* the smallest config_set allows */
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	peer_t *p = remote_peer(t, rm);
	wire_msg_t m = ids_msg(WIRE_ANNOUNCE, 1024);
	int sent = 0, refused = 0;
	/* the remote stops reading: the socket buffers fill, then the output */
	for (int i = 0; i < 200 && !t->rec.gone; i++) {
		if (peer_send(p, &m))
			refused++;
		else
			sent++;
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	}
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	CHECK_INT_EQ(refused, 0);
	CHECK(sent > 32); /* over 1 MiB of 32 KiB messages */
	if (t->rec.gone && !t->rec.freed) {
		CHECK_STR_CONTAINS(p->close_reason, "too slow");
		CHECK(peer_send(p, &m) != 0); /* nothing more once closing */
		CHECK(peer_out_len(p) > (size_t)t->cfg.peer_out_max);
	}
	/* the output never drains: the peer is freed after the 1 s linger,
	 * seen by the tick (node.c ticks every 200 ms) */
	int64_t closed = node_now_us();
	WAIT_UNTIL(t->rec.freed, NULL, 300);
	CHECK_INT_EQ(t->rec.freed, 0);
	for (int64_t dl = closed + 3000000; !t->rec.freed && node_now_us() < dl;) {
		net_tick(t->net, node_now_us());
		WAIT_UNTIL(t->rec.freed, NULL, 20);
	}
	CHECK_INT_EQ(t->rec.freed, 1);
	CHECK(node_now_us() - closed >= 900000);
	CHECK(remote_peer(t, rm) == NULL);
	remote_free(rm);
	tnet_free(t);
}

TEST(truncated_close, "a connection closed inside a frame costs SCORE_TRUNCATED and closes without a ban or BYE")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	static const uint8_t part[] = {0, 0, 0, 100, 0x92, 0x06};
	remote_write(rm, part, sizeof(part));
	shutdown(rm->fd, SHUT_WR);
	check_closed(t, rm, SCORE_TRUNCATED, 0, 0);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "closed by the peer");
	remote_free(rm);
	tnet_free(t);
}

TEST(clean_close_no_points, "a connection closed between frames costs nothing")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	shutdown(rm->fd, SHUT_WR);
	check_closed(t, rm, 0, 0, 0);
	remote_free(rm);
	tnet_free(t);
}

TEST(messages_before_close_handled, "messages buffered when the remote closes are all handled, past one turn's cap, and cost nothing")
{
	tnet_t *t = tnet_new(NULL);
	t->rec.answer_type = WIRE_NOTFOUND; /* answers: not charged */
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	wire_msg_t m = ids_msg(WIRE_NOTFOUND, 1);
	remote_send_n(rm, &m, 2000); /* TURN_MAX_MSGS is 256 */
	shutdown(rm->fd, SHUT_WR);
	check_closed(t, rm, 0, 0, 0);
	CHECK_INT_EQ(t->rec.messages, 2000);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "closed by the peer");
	remote_free(rm);
	tnet_free(t);
}

TEST(bye_from_remote, "a BYE from the remote closes the peer without a BYE back or points")
{
	tnet_t *t = tnet_new(NULL);
	remote_t *rm = remote_new(t);
	remote_handshake(rm, t);
	wire_msg_t m = {.type = WIRE_BYE};
	m.u.bye.code = WIRE_BYE_SHUTDOWN;
	snprintf(m.u.bye.reason, sizeof(m.u.bye.reason), "going away");
	remote_send(rm, &m);
	check_closed(t, rm, 0, 0, 0);
	CHECK_INT_EQ(t->rec.gone_was_ready, 1);
	CHECK_STR_CONTAINS(t->rec.gone_reason, "going away");
	remote_free(rm);
	tnet_free(t);
}

int main(void)
{
	if (peer_test_init())
		return 1;
	RUN(flood_is_charged);
	RUN(flood_then_close_not_truncated);
	RUN(answers_are_free);
	RUN(byte_budget_pauses);
	RUN(ping_answered_with_pong);
	RUN(ping_flood);
	RUN(handshake_timeout);
	RUN(idle_peer_pinged_then_timed_out);
	RUN(idle_peer_closed);
	RUN(slow_reader_closed);
	RUN(truncated_close);
	RUN(clean_close_no_points);
	RUN(messages_before_close_handled);
	RUN(bye_from_remote);
	return peer_test_done();
}
