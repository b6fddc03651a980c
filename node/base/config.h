/* pithd's settings: defaults, a `key = value` config file, and flags.
 *
 * Every setting has one name, used both in the file (`ban_seconds = 60`)
 * and as a flag (`--ban-seconds 60`). Flags override the file; for the
 * repeatable settings (peer, trust_key) the flags' list replaces the
 * file's. docs/pithd.md lists every key; deploy/pithd.conf is an example. */
#ifndef PITH_NODE_CONFIG_H
#define PITH_NODE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define CONFIG_LIST_MAX 64
#define CONFIG_STR_MAX 512
#define CONFIG_MIRROR_NAME_MAX 100    /* bytes of mirror_name, mirror_operator */
#define CONFIG_MIRROR_CONTACT_MAX 200 /* bytes of mirror_contact */

typedef struct config_list {
	char items[CONFIG_LIST_MAX][CONFIG_STR_MAX];
	size_t n;
	int from_flags; /* set once a flag added to it: the file's entries are gone */
} config_list_t;

typedef struct node_config {
	char data_dir[CONFIG_STR_MAX];
	char listen[CONFIG_STR_MAX];  /* HOST:PORT; port 0 picks a free one */
	char http[CONFIG_STR_MAX];    /* HOST:PORT for the HTTP views (issue 6); "" off */
	char http_public_url[CONFIG_STR_MAX]; /* base URL of those views; "" = http://HTTP */
	int64_t http_loops;           /* serving loops on the HTTP port; -1: per core */
	int64_t http_render_threads;  /* record documents rendered off the loop; -1: per core */
	int64_t http_max_connections;  /* docs/http.md, "Limits" */
	int64_t http_timeout_s;        /* docs/http.md, "Limits" */
	int64_t http_request_timeout_s; /* docs/http.md, "Limits" */
	int64_t http_max_header_bytes; /* docs/http.md, "Limits" */
	int64_t http_max_body_bytes;   /* docs/http.md, "Limits" */
	int64_t http_max_post_events;  /* docs/http.md, "Limits" */
	int64_t http_max_inflight;     /* docs/http.md, "Limits" */
	int64_t http_max_queued_mb;    /* docs/http.md, "Limits" */
	int64_t http_costly_per_addr;  /* docs/http.md, "Limits" */
	int64_t http_max_age;         /* Cache-Control max-age of a record's documents */
	char control[CONFIG_STR_MAX]; /* Unix socket path; "" = DATA/pithd.sock */
	char network_id[CONFIG_STR_MAX];
	char log_level[16];
	/* who this mirror is (shown on its pages and in /pith-mirrors.json):
	 * valid UTF-8 without control characters (config_text_why); "" unset */
	char mirror_name[CONFIG_MIRROR_NAME_MAX + 1];
	char mirror_operator[CONFIG_MIRROR_NAME_MAX + 1];
	char mirror_contact[CONFIG_MIRROR_CONTACT_MAX + 1];
	char log_file[CONFIG_STR_MAX]; /* log lines appended here; "" stderr (reopened on SIGHUP) */
	char config_file[CONFIG_STR_MAX]; /* --config FILE, "" none: not a key, what a reload reads */
	char trace_stored[CONFIG_STR_MAX]; /* benchmark trace file, "" off */
	config_list_t peers;          /* HOST:PORT, dialled and kept */
	config_list_t trust_keys;     /* key files trusted besides the registry key */
	config_list_t upstreams;      /* HTTP(S) base URLs followed (docs/upstream.md) */
	config_list_t upstream_origins; /* origins besides theirs manifests and redirects may name */
	char upstream_ca_file[CONFIG_STR_MAX]; /* CA file for them; "" = the system's */
	char follow[CONFIG_STR_MAX];  /* file of ids to keep current; "" none */
	char site_dir[CONFIG_STR_MAX]; /* a static site kept current (docs/site.md); "" off */
	char site_base_url[CONFIG_STR_MAX]; /* the URL it is served at; "" = the tree's last */
	char site_search_url[CONFIG_STR_MAX]; /* a live node its search box submits to; "" none */
	int64_t site_interval_ms;     /* at most one site run per interval */
	int64_t upstream_refresh;     /* seconds between checks of a followed record */
	int64_t upstream_inflight;    /* records fetched from upstreams at once */
	int64_t readthrough_ms;       /* an HTTP read of a missing record waits this long */
	int64_t state_root_interval;  /* seconds: the state root is signed at most this often */
	int64_t state_root_history;   /* signed state roots kept */
	int64_t state_root_thread_records; /* more records: the tree is built off the loop at start */
	int64_t upstream_negative_ttl; /* seconds "no upstream knows ID" is believed */
	int64_t upstream_stall_s;     /* a transfer under 1 KiB/s this long is dropped */
	int64_t upstream_deadline_s;  /* a transfer not over in this long is dropped */
	int64_t upstream_inflight_each; /* records fetched from one upstream at once (0: auto) */

	int64_t outbound_target;      /* outbound connections to keep */
	int64_t inbound_max;
	int64_t inbound_per_ip;       /* inbound connections from one IP */
	int64_t inbound_per_group;    /* inbound connections from one network group */
	int64_t validate_threads;
	int64_t max_frame;            /* wire frame payload bytes */
	int64_t max_inflight;         /* ids requested from one peer and not yet answered */
	int64_t max_pending;          /* ids waiting to be fetched, all peers */
	int64_t max_wanted;           /* ids queued for one peer */
	int64_t max_serve_queue;      /* ids one peer asked for and we have not sent */
	int64_t peer_validate_bytes;  /* one peer's answers waiting for validation, bytes */
	int64_t validate_bytes_max;   /* all peers' answers waiting for validation, bytes */
	int64_t peer_msg_rate;        /* unsolicited messages per second per peer */
	int64_t peer_msg_burst;
	int64_t peer_byte_rate;       /* bytes read per second per peer */
	int64_t peer_out_max;         /* output bytes queued to one peer before closing */
	int64_t ban_threshold;        /* misbehaviour score that bans */
	int64_t ban_seconds;
	int64_t ban_max;              /* bans held at most (the soonest to end goes) */
	int64_t handshake_timeout_ms;
	int64_t ping_interval_ms;
	int64_t ping_timeout_ms;
	int64_t idle_timeout_ms;
	int64_t fetch_timeout_ms;
	int64_t announce_delay_ms;
	int64_t announce_fanout;      /* peers told of a new id at once (0: all) */
	int64_t lazy_announce_ms;     /* the others, if still unaware, this much later */
	int64_t pex_interval_ms;
	int64_t reconnect_min_ms;
	int64_t reconnect_max_ms;
	int64_t addrbook_max;
	int64_t sync_interval_ms;     /* reconcile with each dialled peer this often (0: on connect only) */
	int64_t sync_upload_bytes;    /* reconciliation answers to all peers per interval (sync.c) */
	int64_t sync_timeout_ms;      /* a peer must answer a reconciliation message within */
	int64_t sync_bulk_min;        /* a catch-up this many events behind: bulk mode (0: never) */
	int64_t sync_bulk_unlogged;   /* bulk mode commits without the log (0/1) */
	int64_t sync_bulk_side;       /* a new node's first unlogged catch-up uses side families (0/1) */
	int64_t store_cache_mb;       /* the store's block cache */
	int64_t store_wal_mb;         /* the store's write-ahead log bound */
	int64_t store_warm_mb;        /* read into the page cache at start; -1: half the memory */
	int64_t worker_nice;          /* validators, writer, RocksDB: this much nicer than the loop */
} node_config_t;

/* The defaults. */
void config_defaults(node_config_t *c);

/* Sets one key from text. PITH_EINVAL with err naming the key and value. */
int config_set(node_config_t *c, const char *key, const char *value, int from_flag,
	       pith_err_t *err);

/* Reads a config file into c (over what c holds). err names file and line. */
int config_load_file(node_config_t *c, const char *path, pith_err_t *err);

/* What the command line asks of pithd besides running. */
typedef enum config_ask {
	CONFIG_ASK_RUN = 0,
	CONFIG_ASK_HELP,    /* -h, --help */
	CONFIG_ASK_VERSION, /* --version (no value: not a setting) */
} config_ask_t;

/* Applies argv: --config FILE first (if any), then every other flag over
 * it. *ask says whether -h/--help or --version was given instead (then
 * nothing else is read). */
int config_from_args(node_config_t *c, int argc, char **argv, config_ask_t *ask,
		     pith_err_t *err);

/* Checks cross-field rules (data dir set, ranges that depend on each
 * other) and fills derived defaults (control path). */
int config_finish(node_config_t *c, pith_err_t *err);

/* The names of the keys whose values differ between a and b, in the
 * table's order, into names (static strings, at most max); returns how
 * many differ (more than max when names was too short). A reload says
 * with it what changed. */
size_t config_diff(const node_config_t *a, const node_config_t *b, const char **names,
		   size_t max);

/* Prints every key with its default and meaning. */
void config_usage(void *file);

/* Why s is not a text setting shown to people (mirror_name and the
 * like): longer than max bytes, not valid UTF-8, or holding a control
 * character (C0, DEL, C1); NULL when it is fine. The phrase is static (or
 * the calling thread's). */
const char *config_text_why(const char *s, size_t max);

/* Splits "HOST:PORT" or "[V6]:PORT" into host (NUL-terminated, at most 255
 * bytes, without the brackets) and *port: the one place that does
 * (resolve.h turns the host into an address). A port of 0 is refused
 * unless allow_zero (a listen address). Does no lookup. Returns 0 or
 * PITH_EINVAL (and sets no message: each caller words its own). */
int config_split_hostport(const char *s, char host[static 256], uint16_t *port, int allow_zero);

/* A test-only knob from the environment (the PITH_TEST_* variables,
 * docs/pithd.md): its value if it is an integer in 1 .. max - 1, else 0.
 * Each caller reads its knob once, when it starts. */
long long config_test_knob(const char *name, long long max);

#endif
