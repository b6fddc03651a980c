/* The address book's insides, shared by its files (addrbook.c,
 * addrbook_file.c, addrbook_ctl.c) only. */
#ifndef PITH_NODE_ADDRBOOK_INT_H
#define PITH_NODE_ADDRBOOK_INT_H

#include "addrbook.h"
#include "log.h"
#include "resolve.h"

#define ADDR_LOOKUPS_MAX 64 /* names being looked up (configured peers, `connect`) */

/* A HOST:PORT with a name, being looked up off the loop (resolve.h). */
typedef struct addr_lookup {
	addrbook_t *ab;
	char hostport[CONFIG_STR_MAX];
	int pinned;
	uint64_t serial;       /* the `connect` request to answer, or 0 */
	resolve_req_t *req;    /* the lookup under way; NULL: again at next_us */
	unsigned failures;
	int64_t next_us;
	struct addr_lookup *next;
} addr_lookup_t;

struct addrbook {
	net_t *net;
	const node_config_t *cfg;
	node_stats_t *stats;
	addr_entry_t **book;
	size_t nbook;
	ban_t *bans;
	size_t nbans, capbans;
	int64_t dirty_us;   /* book or bans changed since (0: saved) */
	int loaded;         /* DATA/peers.json was read: it may be written */
	int64_t next_pex_us;
	resolver_t *res;    /* names are looked up through it (NULL: numeric only) */
	void (*reply)(void *arg, uint64_t serial, const char *json, size_t len);
	void *reply_arg;    /* answers a `connect` that waited for a name */
	addr_lookup_t *lookups;
	size_t nlookups;
};

/* addrbook_ctl.c: a `connect` that waited for its name is answered (rc 0:
 * the address is in the book; else err says why). */
void addrbook_ctl_connect_done(addrbook_t *ab, uint64_t serial, const char *hostport, int rc,
			       const pith_err_t *err);

#endif
