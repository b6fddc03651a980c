/* HOST:PORT to a socket address without blocking the event loop.
 *
 * One place that splits "HOST:PORT" ("1.2.3.4:9000", "[::1]:9000",
 * "name.example:9000") and turns it into a struct sockaddr:
 *   - a numeric address is answered at once, on the caller's thread, by
 *     getaddrinfo(AI_NUMERICHOST), which does no I/O;
 *   - a name is looked up by getaddrinfo on a short-lived worker thread,
 *     and the answer comes back on the loop thread through a callback.
 *
 * Why getaddrinfo on a thread rather than libevent's evdns_getaddrinfo:
 * operators expect a name in pithd's config or on `pithctl connect` to
 * resolve exactly as it does for every other program on the host:
 * /etc/hosts, /etc/nsswitch.conf (nss-resolve, nss-myhostname, mdns),
 * resolv.conf's search/ndots/options as glibc reads them, and
 * systemd-resolved where it is in use. evdns reads resolv.conf and
 * /etc/hosts itself, with its own interpretation, and knows nothing of NSS;
 * under the sandboxed systemd unit (deploy/) the two could disagree in ways
 * an operator could not see. Lookups are rare (config peers at start, an
 * operator's connect or sync), so a thread each is cheap.
 *
 * getaddrinfo cannot be interrupted. A timeout or a cancel therefore only
 * detaches the request: its callback never runs, and the thread finishes
 * in the background and frees what it holds. Such threads still count
 * against max_inflight, so a resolver that hangs cannot pile up threads.
 *
 * Threads: resolver_new, resolve_hostport, resolve_cancel and
 * resolver_free are called on the loop thread of the base, and callbacks
 * run there. */
#ifndef PITH_NODE_RESOLVE_H
#define PITH_NODE_RESOLVE_H

#include <netdb.h>
#include <stdint.h>
#include <sys/socket.h>

#include "err.h"

struct event_base;

typedef struct resolver resolver_t;
typedef struct resolve_req resolve_req_t;

/* One address, ready for connect(2). */
typedef struct resolve_addr {
	struct sockaddr_storage ss;
	socklen_t len;
} resolve_addr_t;

#define RESOLVE_MAX_INFLIGHT_DEFAULT 8
#define RESOLVE_TIMEOUT_MS_DEFAULT 10000

typedef struct resolve_limits {
	/* name lookups whose thread is still running, cancelled and timed-out
	 * ones included; 0: RESOLVE_MAX_INFLIGHT_DEFAULT */
	unsigned max_inflight;
	/* after this, the callback gets "timed out"; 0: RESOLVE_TIMEOUT_MS_DEFAULT */
	unsigned timeout_ms;
	/* for tests: called instead of getaddrinfo on the worker thread (its
	 * result is freed with freeaddrinfo). NULL: getaddrinfo. */
	int (*gai)(const char *host, const char *port, const struct addrinfo *hints,
	           struct addrinfo **res);
} resolve_limits_t;

/* The answer to a name lookup, on the loop thread. Exactly one of addr and
 * err is non-NULL; both are valid during the call only. The request handle
 * is already gone when this runs: do not resolve_cancel it. The callback
 * may call resolve_hostport, resolve_cancel (other requests) and
 * resolver_free. */
typedef void (*resolve_cb)(void *arg, const resolve_addr_t *addr, const pith_err_t *err);

/* A resolver answering on base's loop. lim may be NULL (defaults); it is
 * copied. Returns NULL if memory, the wake-up pipe or the event cannot be
 * had. */
resolver_t *resolver_new(struct event_base *base, const resolve_limits_t *lim);

/* Frees r; NULL is fine. Callbacks of requests still pending never run;
 * their threads finish on their own. Must be called before the base is
 * freed. */
void resolver_free_(resolver_t *r);
#define resolver_free(r)                                                                           \
	do {                                                                                       \
		resolver_free_(r);                                                                 \
		(r) = NULL;                                                                        \
	} while (0)

/* The answer to resolve_hostport when it came at once. */
#define RESOLVE_DONE 1

/* Resolves hostport (see config_split_hostport (config.h); port 0 refused), preferring
 * the first IPv4 address getaddrinfo gives, else its first address.
 *   - RESOLVE_DONE: hostport was numeric; *now holds the address, cb is
 *     never called, *req is set to NULL.
 *   - 0: a lookup is under way; *req is its handle, valid until cb runs or
 *     resolve_cancel. cb(arg, ...) runs exactly once, later, on the loop
 *     thread, with the address or an error:
 *       PITH_EINVAL "cannot resolve HOST: <gai_strerror>" (the lookup failed),
 *       PITH_EIO    "cannot resolve HOST: timed out after N ms".
 *   - negative, cb never called, err says why:
 *       PITH_EINVAL "'HOSTPORT' is not HOST:PORT" (bad syntax or port),
 *       PITH_EINVAL "cannot resolve HOST: <gai_strerror>" (numeric but refused),
 *       PITH_ETOOBIG "too many name lookups in flight (N)",
 *       PITH_ENOMEM, or PITH_EIO (no thread could be started).
 * The messages are those addrbook_add_hostport and sync's resolve give. A
 * caller that words the syntax error otherwise (sync: "neither a node id
 * nor HOST:PORT") checks with config_split_hostport (config.h) first. */
int resolve_hostport(resolver_t *r, const char *hostport, resolve_addr_t *now, resolve_cb cb,
                     void *arg, resolve_req_t **req, pith_err_t *err);

/* hostport as a numeric address (no lookup, no thread): 0 with *out set,
 * or PITH_EINVAL if it is not HOST:PORT with a numeric host. */
int resolve_numeric(const char *hostport, resolve_addr_t *out);

/* Forgets a pending lookup: its callback will not run. NULL is fine; the
 * macro nulls the handle. Call it when the requester goes away. */
void resolve_cancel_(resolve_req_t *req);
#define resolve_cancel(q)                                                                          \
	do {                                                                                       \
		resolve_cancel_(q);                                                                \
		(q) = NULL;                                                                        \
	} while (0)

/* Name lookups whose thread is still running (cancelled and timed-out ones
 * included): what max_inflight bounds. */
unsigned resolve_inflight(const resolver_t *r);

#endif
