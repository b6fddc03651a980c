/* The address book's insides, shared by its files (addrbook.c,
 * addrbook_ban.c, addrbook_pex.c, addrbook_file.c, addrbook_ctl.c,
 * addrbook_inbound.c) only. */
#ifndef PITH_NODE_ADDRBOOK_INT_H
#define PITH_NODE_ADDRBOOK_INT_H

#include <sodium.h>

#include "addrbook.h"
#include "idmap.h"
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
	addr_entry_t **book;  /* every entry, pinned or in a table (a->idx) */
	size_t nbook, capbook;
	idmap_t *by_addr;     /* address -> entry */
	uint8_t key[crypto_shorthash_KEYBYTES]; /* bucket placement; saved with the book */
	addr_entry_t *newtab[ADDRBOOK_NEW_BUCKETS][ADDRBOOK_BUCKET_SIZE];
	addr_entry_t *tried[ADDRBOOK_TRIED_BUCKETS][ADDRBOOK_BUCKET_SIZE];
	size_t nnew, ntried;
	int64_t next_new_dial_us; /* dials of unproven (new) addresses are paced */
	ban_t **bans;         /* running or expired, until pruned */
	size_t nbans, capbans;
	idmap_t *ban_by_ip;   /* ip -> ban */
	int ban_full_logged;
	int64_t dirty_us;   /* book or bans changed since (0: saved) */
	int loaded;         /* DATA/peers.json was read: it may be written */
	int64_t next_pex_us;
	resolver_t *res;    /* names are looked up through it (NULL: numeric only) */
	void (*reply)(void *arg, uint64_t serial, const char *json, size_t len);
	void *reply_arg;    /* answers a `connect` that waited for a name */
	addr_lookup_t *lookups;
	size_t nlookups;
};

/* SipHash under the book's key of a tag and three numbers: placements no
 * peer can aim at without the key (saved with the book). */
uint64_t addrbook_hash(const addrbook_t *ab, uint8_t tag, uint64_t a, uint64_t b, uint64_t c);
/* The idmap key of an IP address and port (port 0 for a ban's key). */
void addrbook_ip_key(const uint8_t *ip, uint8_t ip_len, uint16_t port, uint8_t key[32]);
/* Moves a learnt entry from the new table to the tried one (a handshake
 * with it worked, or the file says it did). Its tried slot's holder goes
 * back to the new table, or is dropped if there is no room there. */
void addrbook_make_tried(addrbook_t *ab, addr_entry_t *a);
/* The entry the next dial from table would go to (as addrbook_maintain
 * picks: a group uniformly, then an entry of it by its failures), or
 * NULL if none may be dialled now. */
addr_entry_t *addrbook_select(addrbook_t *ab, int table, int64_t now);
/* A socket address in group g (its first address), for src arguments. */
socklen_t addrbook_group_sa(uint64_t g, struct sockaddr_storage *ss);
/* Writes group g as text: "a.b.0.0/16" or "x:y::/32". */
void addrbook_group_format(uint64_t g, char out[64]);

/* The socket address of ip (len 4 or 16) and port, in ss; its length. */
socklen_t addrbook_sa_make(struct sockaddr_storage *ss, const uint8_t *ip, uint8_t len, uint16_t port);
/* Whether ip is a loopback address. */
int addrbook_ip_is_loopback(const uint8_t *ip, uint8_t len);
/* Whether a node may dial ip:port: not unspecified, not multicast, a port. */
int addrbook_ip_is_dialable(const uint8_t *ip, uint8_t len, uint16_t port);
/* Whether a and b are the same IP address and port. */
int addrbook_sa_same(const struct sockaddr *a, const struct sockaddr *b);
/* The book's entry for address sa, or NULL. */
addr_entry_t *addrbook_find(const addrbook_t *ab, const struct sockaddr *sa);

/* addrbook_ctl.c: a `connect` that waited for its name is answered (rc 0:
 * the address is in the book; else err says why). */
void addrbook_ctl_connect_done(addrbook_t *ab, uint64_t serial, const char *hostport, int rc,
			       const pith_err_t *err);

#endif
