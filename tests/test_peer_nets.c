/* node/net/peer.c between two nets over 127.0.0.1: the handshake, messages
 * and PING, closing and counters, duplicate and crossed dials, a net
 * dialling itself, a refused connect. Helpers in test_peer_util.h. */
#include "test_peer_util.h"

/* ---- two nets over 127.0.0.1 --------------------------------------------- */

/* A listening socket on 127.0.0.1 (an ephemeral port) whose accepts go
 * to t's net. */
typedef struct listener {
	tnet_t *t;
	int fd;
	struct event *ev;
	struct sockaddr_in sa;
} listener_t;

static void accept_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	listener_t *l = arg;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int c = accept(fd, (struct sockaddr *)&ss, &len);
	if (c < 0)
		return;
	set_nonblocking(c);
	if (peer_accept(l->t->net, c, (struct sockaddr *)&ss, len))
		test_fail_(__FILE__, __LINE__, "peer_accept failed");
}

static void listener_open(listener_t *l, tnet_t *t)
{
	l->t = t;
	l->sa = (struct sockaddr_in){.sin_family = AF_INET};
	inet_pton(AF_INET, "127.0.0.1", &l->sa.sin_addr);
	socklen_t len = sizeof(l->sa);
	l->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&l->sa, len) || listen(l->fd, 8) ||
	    getsockname(l->fd, (struct sockaddr *)&l->sa, &len))
		abort();
	set_nonblocking(l->fd);
	l->ev = event_new(base, l->fd, EV_READ | EV_PERSIST, accept_cb, l);
	event_add(l->ev, NULL);
	net_set_hello(t->net, ntohs(l->sa.sin_port), 0, NULL);
}

static void listener_close(listener_t *l)
{
	if (l->ev)
		event_free(l->ev);
	if (l->fd > 0)
		close(l->fd);
	memset(l, 0, sizeof(*l));
}

/* from dials to's listener. The new peer (CONNECTING). */
static peer_t *dial(tnet_t *from, const listener_t *to)
{
	peer_t *p = peer_connect(from->net, (const struct sockaddr *)&to->sa, sizeof(to->sa));
	CHECK(p != NULL);
	return p;
}

typedef struct pair {
	tnet_t *a, *b; /* a dials b */
	listener_t la, lb;
	peer_t *pa;    /* a's outbound peer */
} pair_t;

/* Two nets, a dialling b's listening socket; waits for both to be ready. */
static pair_t *pair_new(void)
{
	pair_t *pr = calloc(1, sizeof(*pr));
	if (!pr)
		abort();
	pr->a = tnet_new(NULL);
	pr->b = tnet_new(NULL);
	listener_open(&pr->lb, pr->b);
	pr->pa = dial(pr->a, &pr->lb);
	CHECK_INT_EQ(net_count_out(pr->a->net), 1);
	WAIT_UNTIL(pr->a->rec.ready && pr->b->rec.ready, NULL, 3000);
	return pr;
}

static void pair_free(pair_t *pr)
{
	tnet_free(pr->a);
	tnet_free(pr->b);
	listener_close(&pr->la);
	listener_close(&pr->lb);
	free(pr);
}

TEST(two_nets_handshake, "two nets complete the handshake and both report ready with each other's key")
{
	pair_t *pr = pair_new();
	CHECK_INT_EQ(pr->a->rec.ready, 1);
	CHECK_INT_EQ(pr->b->rec.ready, 1);
	CHECK_MEM_EQ(pr->a->rec.ready_pk, 32, pr->b->pk, 32);
	CHECK_MEM_EQ(pr->b->rec.ready_pk, 32, pr->a->pk, 32);
	CHECK_INT_EQ(pr->a->stats.connections_out, 1);
	CHECK_INT_EQ(pr->b->stats.connections_in, 1);
	peer_t *pb = net_peers(pr->b->net);
	CHECK(pb && pb->listen_port == 0 && !pb->outbound);
	CHECK(pr->pa->outbound && pr->pa->listen_port != 0);
	CHECK_STR_CONTAINS(pr->pa->addr, "127.0.0.1:");
	uint8_t ip[16], iplen = 0;
	CHECK_INT_EQ(peer_ip(pr->pa, ip, &iplen), 0);
	CHECK_INT_EQ(iplen, 4);
	pair_free(pr);
}

TEST(two_nets_message_and_ping, "between two nets a message is delivered to the other's message callback, and a keepalive PING gets a PONG that is not passed up")
{
	pair_t *pr = pair_new();
	wire_msg_t m = {.type = WIRE_PEERS_REQ};
	CHECK_INT_EQ(peer_send(pr->pa, &m), 0);
	WAIT_UNTIL(pr->b->rec.messages, NULL, 2000);
	CHECK_INT_EQ(pr->b->rec.messages, 1);
	CHECK_INT_EQ(pr->b->rec.msg_types[0], WIRE_PEERS_REQ);
	CHECK(pr->a->rec.writable >= 1); /* a's output drained after the send */
	/* b pings a, quiet for an interval (in b's clock) */
	peer_t *pb = net_peers(pr->b->net);
	net_tick(pr->b->net, node_now_us() + (pr->b->cfg.ping_interval_ms + 1) * 1000);
	CHECK(pb->ping_sent_us != 0);
	WAIT_UNTIL(pb->ping_sent_us == 0, NULL, 2000);
	CHECK(pb->ping_sent_us == 0);
	CHECK_INT_EQ(pr->a->stats.msgs_recv[WIRE_PING], 1);
	CHECK_INT_EQ(pr->a->stats.msgs_sent[WIRE_PONG], 1);
	CHECK_INT_EQ(pr->b->stats.msgs_recv[WIRE_PONG], 1);
	CHECK_INT_EQ(pr->a->rec.messages, 0);
	CHECK_INT_EQ(pr->b->rec.messages, 1);
	pair_free(pr);
}

TEST(two_nets_close_and_counters, "a close reaches both sides: gone once then freed once per peer, serials forgotten, byte and message counters add up")
{
	pair_t *pr = pair_new();
	peer_t *pb = net_peers(pr->b->net);
	wire_msg_t m = {.type = WIRE_PEERS_REQ};
	for (int i = 0; i < 3; i++)
		peer_send(pb, &m);
	WAIT_UNTIL(pr->a->rec.messages == 3, NULL, 2000);
	CHECK_INT_EQ(pr->a->rec.messages, 3);
	/* everything sent has been read on the other side */
	CHECK_INT_EQ(pr->pa->bytes_out, pb->bytes_in);
	CHECK_INT_EQ(pb->bytes_out, pr->pa->bytes_in);
	CHECK_INT_EQ(pr->pa->msgs_out, 2);       /* HELLO, AUTH */
	CHECK_INT_EQ(pb->msgs_out, 5);           /* HELLO, AUTH, 3 PEERS_REQ */
	CHECK_INT_EQ(pr->pa->msgs_out, pb->msgs_in);
	CHECK_INT_EQ(pb->msgs_out, pr->pa->msgs_in);
	CHECK_INT_EQ(pr->a->stats.bytes_recv, pb->bytes_out);
	CHECK_INT_EQ(pr->b->stats.bytes_sent, pb->bytes_out);
	uint64_t sa = pr->pa->serial, sb = pb->serial;
	CHECK(net_peer_by_serial(pr->a->net, sa) == pr->pa);
	peer_close(pr->pa, WIRE_BYE_SHUTDOWN, "test over");
	peer_close(pr->pa, WIRE_BYE_SHUTDOWN, "closed twice"); /* no-op */
	CHECK_INT_EQ(pr->a->rec.gone, 1);
	CHECK_INT_EQ(pr->a->rec.gone_was_ready, 1);
	WAIT_UNTIL(pr->a->rec.freed && pr->b->rec.freed, NULL, 3000);
	settle(NULL);
	CHECK_INT_EQ(pr->a->rec.gone, 1);
	CHECK_INT_EQ(pr->a->rec.freed, 1);
	CHECK_INT_EQ(pr->b->rec.gone, 1);
	CHECK_INT_EQ(pr->b->rec.gone_was_ready, 1);
	CHECK_INT_EQ(pr->b->rec.freed, 1);
	CHECK_INT_EQ(pr->a->rec.freed_before_gone, 0);
	CHECK_INT_EQ(pr->b->rec.freed_before_gone, 0);
	CHECK_INT_EQ(pr->a->rec.freed_serials[0], sa);
	CHECK_INT_EQ(pr->b->rec.freed_serials[0], sb);
	CHECK(net_peer_by_serial(pr->a->net, sa) == NULL);
	CHECK(net_peer_by_serial(pr->b->net, sb) == NULL);
	CHECK(net_peers(pr->a->net) == NULL && net_peers(pr->b->net) == NULL);
	CHECK_INT_EQ(net_count_out(pr->a->net), 0);
	CHECK_INT_EQ(net_count_in(pr->b->net), 0);
	CHECK_INT_EQ(pr->b->stats.msgs_recv[WIRE_BYE], 1);
	CHECK_INT_EQ(pr->a->rec.bans + pr->b->rec.bans, 0);
	pair_free(pr);
}

TEST(second_dial_is_duplicate, "a second connection dialled to the same node is closed as a duplicate on both sides; the first is kept")
{
	pair_t *pr = pair_new();
	peer_t *first = pr->pa;
	peer_t *second = dial(pr->a, &pr->lb);
	uint64_t second_serial = second ? second->serial : 0; /* second is freed below */
	WAIT_UNTIL(pr->a->rec.freed && pr->b->rec.freed, NULL, 3000);
	settle(NULL);
	CHECK_INT_EQ(pr->a->rec.ready, 1); /* the duplicate is never reported ready */
	CHECK_INT_EQ(pr->b->rec.ready, 1);
	CHECK_INT_EQ(pr->a->rec.gone, 1);
	CHECK_INT_EQ(pr->b->rec.gone, 1);
	CHECK_INT_EQ(pr->a->rec.gone_was_ready, 0);
	CHECK_STR_CONTAINS(pr->a->rec.gone_reason, "duplicate");
	CHECK_STR_CONTAINS(pr->b->rec.gone_reason, "duplicate");
	CHECK_INT_EQ(pr->a->rec.freed_serials[0], second_serial);
	CHECK(net_peer_by_serial(pr->a->net, first->serial) == first);
	CHECK(peer_is_ready(first));
	CHECK_INT_EQ(net_count_out(pr->a->net), 1);
	CHECK_INT_EQ(net_count_in(pr->b->net), 1);
	CHECK_INT_EQ(pr->a->rec.bans + pr->b->rec.bans, 0);
	pair_free(pr);
}

TEST(crossed_dials_keep_smaller_key, "when two nodes dial each other both keep the connection dialled by the node with the smaller key")
{
	pair_t *pr = pair_new();
	listener_open(&pr->la, pr->a);
	peer_t *back = dial(pr->b, &pr->la); /* b dials a */
	uint64_t ab = pr->pa->serial, ba = back->serial;
	WAIT_UNTIL(pr->a->rec.freed && pr->b->rec.freed, NULL, 3000);
	settle(NULL);
	CHECK_INT_EQ(pr->a->rec.gone, 1);
	CHECK_INT_EQ(pr->b->rec.gone, 1);
	CHECK_INT_EQ(pr->a->rec.freed, 1);
	CHECK_INT_EQ(pr->b->rec.freed, 1);
	int a_smaller = memcmp(pr->a->pk, pr->b->pk, 32) < 0;
	/* a's outbound and b's outbound: the one the smaller key dialled stays */
	peer_t *a_out = net_peer_by_serial(pr->a->net, ab);
	peer_t *b_out = net_peer_by_serial(pr->b->net, ba);
	CHECK((a_out != NULL) == a_smaller);
	CHECK((b_out != NULL) == !a_smaller);
	CHECK_INT_EQ(net_count_in(pr->a->net) + net_count_out(pr->a->net), 1);
	CHECK_INT_EQ(net_count_in(pr->b->net) + net_count_out(pr->b->net), 1);
	CHECK(net_peers(pr->a->net) && peer_is_ready(net_peers(pr->a->net)));
	CHECK(net_peers(pr->b->net) && peer_is_ready(net_peers(pr->b->net)));
	/* both kept the same TCP connection: a's survivor is outbound iff b's is inbound */
	if (net_peers(pr->a->net) && net_peers(pr->b->net))
		CHECK(net_peers(pr->a->net)->outbound != net_peers(pr->b->net)->outbound);
	pair_free(pr);
}

TEST(net_dials_itself, "a net that dials its own listener closes both ends as is_self, with no points")
{
	tnet_t *t = tnet_new(NULL);
	listener_t l = {0};
	listener_open(&l, t);
	dial(t, &l);
	WAIT_UNTIL(t->rec.freed == 2, NULL, 3000);
	settle(NULL);
	CHECK_INT_EQ(t->rec.gone, 2);
	CHECK_INT_EQ(t->rec.freed, 2);
	CHECK_INT_EQ(t->rec.freed_before_gone, 0);
	CHECK_INT_EQ(t->rec.gone_is_self, 1);
	CHECK_INT_EQ(t->rec.gone_score, 0);
	CHECK_INT_EQ(t->rec.ready, 0);
	CHECK_INT_EQ(t->rec.bans, 0);
	CHECK(net_peers(t->net) == NULL);
	tnet_free(t);
	listener_close(&l);
}

TEST(connect_refused, "a dial to a closed port is closed as connect failed, never ready, and freed")
{
	tnet_t *t = tnet_new(NULL);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0); /* bound, not listening: refuses */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len))
		abort();
	peer_t *p = peer_connect(t->net, (struct sockaddr *)&sa, len);
	CHECK(p != NULL);
	WAIT_UNTIL(t->rec.freed, NULL, 2000);
	CHECK_INT_EQ(t->rec.gone, 1);
	CHECK_INT_EQ(t->rec.gone_was_ready, 0);
	CHECK_INT_EQ(t->rec.freed, 1);
	CHECK_INT_EQ(t->rec.ready, 0);
	CHECK_INT_EQ(net_count_out(t->net), 0);
	close(fd);
	tnet_free(t);
}

int main(void)
{
	if (peer_test_init())
		return 1;
	RUN(two_nets_handshake);
	RUN(two_nets_message_and_ping);
	RUN(two_nets_close_and_counters);
	RUN(second_dial_is_duplicate);
	RUN(crossed_dials_keep_smaller_key);
	RUN(net_dials_itself);
	RUN(connect_refused);
	return peer_test_done();
}
