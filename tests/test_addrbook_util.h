/* Helpers shared by the address book's unit tests (test_addrbook*.c,
 * one binary each, over the fake transport). */
#ifndef PITH_TEST_ADDRBOOK_UTIL_H
#define PITH_TEST_ADDRBOOK_UTIL_H

#include <arpa/inet.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addrbook.h"
#include "addrbook_int.h"
#include "test_util.h"
#include "tnode.h"

/* A node with only the net and the book; settings as tweak left them. */
static inline void setup(tnode_t *n, void (*tweak)(node_config_t *))
{
	CHECK_INT_EQ(tnode_init(n, "test_addrbook", NULL, tweak), 0);
	CHECK_INT_EQ(tnode_start(n), 0);
}

static inline addr_entry_t *add(tnode_t *n, const char *addr, int source)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (fake_sockaddr(addr, &ss, &len))
		return NULL;
	return addrbook_add(n->book, (const struct sockaddr *)&ss, len, source);
}

static inline int banned(tnode_t *n, const char *addr, int64_t now)
{
	struct sockaddr_storage ss;
	socklen_t len;
	return !fake_sockaddr(addr, &ss, &len) &&
	       addrbook_is_banned(n->book, (const struct sockaddr *)&ss, now);
}

static inline const addr_entry_t *find(tnode_t *n, const char *addr)
{
	for (size_t i = 0; i < addrbook_size(n->book); i++)
		if (!strcmp(addrbook_entry(n->book, i)->str, addr))
			return addrbook_entry(n->book, i);
	return NULL;
}

/* An inbound peer from addr, ready, listening on listen_port. */
static inline peer_t *inbound(tnode_t *n, const char *addr, uint16_t listen_port)
{
	peer_t *p = fake_peer_add(n->net, 0, addr);
	CHECK(p != NULL);
	p->listen_port = listen_port;
	fake_peer_ready(p, NULL, 0);
	return p;
}

static inline void small_book(node_config_t *c)
{
	c->addrbook_max = 16; /* the smallest the config allows */
}

static inline void no_target(node_config_t *c)
{
	c->outbound_target = 0;
}

static inline void backoff_cfg(node_config_t *c)
{
	c->outbound_target = 0;
	c->reconnect_min_ms = 1000;
	c->reconnect_max_ms = 8000;
}

static inline void peers_msg(wire_msg_t *m, const char *const *addrs, size_t n)
{
	memset(m, 0, sizeof(*m));
	m->type = WIRE_PEERS;
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage ss;
		socklen_t len;
		wire_addr_t *a = &m->u.peers.addrs[m->u.peers.n++];
		fake_sockaddr(addrs[i], &ss, &len);
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)&ss;
		memcpy(a->ip, &s4->sin_addr, 4);
		a->ip_len = 4;
		a->port = ntohs(s4->sin_port);
	}
}

static inline addr_entry_t *add_from(tnode_t *n, const char *addr, const char *src)
{
	struct sockaddr_storage ss, sr;
	socklen_t len, slen;
	if (fake_sockaddr(addr, &ss, &len) || fake_sockaddr(src, &sr, &slen))
		return NULL;
	return addrbook_add_from(n->book, (const struct sockaddr *)&ss, len, ADDR_PEX,
				 (const struct sockaddr *)&sr);
}

#endif
