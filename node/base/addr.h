/* Socket addresses as the node shows and compares them: "ip:port" (IPv6
 * in brackets) and the raw IP bytes. Pure; used by the connection layer,
 * the address book and the tests' fake transport alike. */
#ifndef PITH_NODE_ADDR_H
#define PITH_NODE_ADDR_H

#include <stdint.h>
#include <sys/socket.h>

/* Formats sa as ip:port ("[v6]:port"; "(family N)" for others). */
void addr_format(const struct sockaddr *sa, char out[static 64]);

/* The IP bytes (4 or 16, *len) and port of an inet address. 0, or -1 for
 * other families. */
int addr_ip(const struct sockaddr *sa, uint8_t ip[16], uint8_t *len, uint16_t *port);

#endif
