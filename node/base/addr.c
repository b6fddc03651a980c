/* Socket addresses (addr.h). */
#include "addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

void addr_format(const struct sockaddr *sa, char out[static 64])
{
	char ip[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(out, 64, "%s:%u", ip, ntohs(s4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(out, 64, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		snprintf(out, 64, "(family %d)", sa->sa_family);
	}
}

int addr_ip(const struct sockaddr *sa, uint8_t ip[16], uint8_t *len, uint16_t *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		memcpy(ip, &s4->sin_addr, 4);
		*len = 4;
		*port = ntohs(s4->sin_port);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		memcpy(ip, &s6->sin6_addr, 16);
		*len = 16;
		*port = ntohs(s6->sin6_port);
		return 0;
	}
	return -1;
}
