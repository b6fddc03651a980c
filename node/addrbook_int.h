/* The address book's insides, shared by its files (addrbook.c,
 * addrbook_file.c, addrbook_ctl.c) only. */
#ifndef PITH_NODE_ADDRBOOK_INT_H
#define PITH_NODE_ADDRBOOK_INT_H

#include "addrbook.h"

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
};

#endif
