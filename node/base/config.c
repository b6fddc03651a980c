/* The settings table: name, type, bounds, default and meaning. The config
 * file, the flags and `pithd --help` all read it. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "utf8.h"
#include "wire.h"

typedef enum { K_STR, K_INT, K_LIST, K_ADDR, K_LEVEL, K_NETID, K_TEXT } kind_t;

typedef struct key {
	const char *name;
	kind_t kind;
	size_t off;
	int64_t min, max;
	const char *def;
	const char *help;
} key_t_;

#define O(f) offsetof(node_config_t, f)
static const key_t_ keys[] = {
	{"data", K_STR, O(data_dir), 0, 0, "", "data directory (store, node key, control socket)"},
	{"listen", K_ADDR, O(listen), 0, 0, "127.0.0.1:7411", "HOST:PORT for peers; port 0 picks one"},
	{"http", K_ADDR, O(http), 0, 0, "", "HOST:PORT of the HTTP views (docs/http.md); empty: off"},
	{"http_loops", K_INT, O(http_loops), -1, 64, "0", "serving loops sharing the HTTP port, each answering the record documents, resolve and the documents by hash on its own thread and relaying the rest to the node's loop (-1: one per online core; 0: the node's loop serves the port)"},
	{"http_render_threads", K_INT, O(http_render_threads), -1, 64, "-1", "threads rendering the record documents and answering resolves off the HTTP loop (-1: one per online core; 0: the loop does)"},
	{"http_max_age", K_INT, O(http_max_age), 0, 86400, "60", "seconds a cache in front may serve a record's documents without asking (Cache-Control max-age, docs/http.md \"Caching\"); 0: no-cache"},
	{"http_max_connections", K_INT, O(http_max_connections), 16, 1048576, "4096", "open HTTP connections at once; at it accepting pauses (lowered to half the descriptor limit)"},
	{"http_timeout_s", K_INT, O(http_timeout_s), 1, 3600, "10", "seconds a connection may be idle, reading or writing (a reader that does not read its reply is closed)"},
	{"http_request_timeout_s", K_INT, O(http_request_timeout_s), 1, 3600, "30", "seconds a whole request may take to arrive, from the accept or the previous reply (slow-trickling clients are cut)"},
	{"http_max_header_bytes", K_INT, O(http_max_header_bytes), 1024, 1048576, "8192", "bytes of a request line and headers: over it 431"},
	{"http_max_body_bytes", K_INT, O(http_max_body_bytes), 4096, 67108864, "4194304", "bytes of a request body (POST /events): over it 413"},
	{"http_max_post_events", K_INT, O(http_max_post_events), 1, 1000000, "2000", "events in one POST /events: over it 413"},
	{"http_max_inflight", K_INT, O(http_max_inflight), 1, 4194304, "8192", "events POSTed over HTTP in validation at once: over it 503 with Retry-After"},
	{"http_max_queued_mb", K_INT, O(http_max_queued_mb), 1, 65536, "32", "MiB of replies queued for all HTTP readers and not yet taken by the kernel, past which no costly document (search, change feed, lists) is rendered: 503 with Retry-After"},
	{"http_costly_per_addr", K_INT, O(http_costly_per_addr), 1, 1024, "4", "costly documents (search, change feed, lists) outstanding per client address: over it 503 with Retry-After"},
	{"http_public_url", K_STR, O(http_public_url), 0, 0, "", "URL clients reach the HTTP views at (pages, manifest; announced to peers when set); default http://HTTP"},
	{"control", K_STR, O(control), 0, 0, "", "control socket path (default DATA/pithd.sock)"},
	{"network_id", K_NETID, O(network_id), 0, 0, "pith-main", "peers must use the same network id"},
	{"log_level", K_LEVEL, O(log_level), 0, 0, "info", "error, warn, info or debug"},
	{"mirror_name", K_TEXT, O(mirror_name), 0, CONFIG_MIRROR_NAME_MAX, "", "this mirror's name, in every page's header and title and in /pith-mirrors.json (default: pithd and the first 16 hex digits of the node id)"},
	{"mirror_operator", K_TEXT, O(mirror_operator), 0, CONFIG_MIRROR_NAME_MAX, "", "who runs this mirror (a person or an organisation), shown beside the name; empty: not shown"},
	{"mirror_contact", K_TEXT, O(mirror_contact), 0, CONFIG_MIRROR_CONTACT_MAX, "", "how to reach the operator (an e-mail address or an http(s) URL), shown beside the name; empty: not shown"},
	{"log_file", K_STR, O(log_file), 0, 0, "", "append the log here instead of stderr; reopened on SIGHUP (logrotate moves it, then signals: docs/operations.md)"},
	{"trace_stored", K_STR, O(trace_stored), 0, 0, "", "append 'UNIX_US EVENT_ID' per stored event to this file (benchmarks)"},
	{"peer", K_LIST, O(peers), 0, 0, "", "HOST:PORT to dial and keep (repeatable)"},
	{"trust_key", K_LIST, O(trust_keys), 0, 0, "", "key file to trust besides the registry key (repeatable)"},
	{"upstream", K_LIST, O(upstreams), 0, 0, "", "http(s):// base URL of the registry or a mirror to follow (repeatable; docs/upstream.md)"},
	{"upstream_origin", K_LIST, O(upstream_origins), 0, 0, "", "http(s)://HOST[:PORT] besides the upstreams' own origins that their manifests and redirects may send the node to, e.g. a CDN serving the bundles (repeatable; never from https to http)"},
	{"upstream_ca_file", K_STR, O(upstream_ca_file), 0, 0, "", "CA certificates (PEM) for the upstreams, instead of the system's"},
	{"follow", K_STR, O(follow), 0, 0, "", "file of ids to keep current from the upstreams (one a line, '#' comments)"},
	{"site_dir", K_STR, O(site_dir), 0, 0, "", "keep a static site of the store in this directory, rendered on a thread of its own after commits (docs/site.md); empty: off"},
	{"site_base_url", K_STR, O(site_base_url), 0, 0, "", "URL the site is served at (its links, its pith-mirrors.json); default: http_public_url if set, else the tree's last"},
	{"site_search_url", K_STR, O(site_search_url), 0, 0, "", "http(s) base URL of a live node whose /search the site's search box submits to; default: http_public_url if set, else the site has no search box"},
	{"site_interval_ms", K_INT, O(site_interval_ms), 100, 86400000, "1000", "at most one site run per this many ms (a run starts only when the store changed)"},
	{"upstream_refresh", K_INT, O(upstream_refresh), 1, 31 * 86400, "3600", "check each followed record this often, seconds (spread over the interval)"},
	{"upstream_inflight", K_INT, O(upstream_inflight), 1, 256, "16", "records fetched from upstreams at once"},
	{"readthrough_ms", K_INT, O(readthrough_ms), 0, 60000, "3000", "an HTTP read of a record the node lacks waits this long for the upstreams (0: no read-through)"},
	{"state_root_interval", K_INT, O(state_root_interval), 1, 86400, "60", "seconds: the state root (docs/state-root.md) is signed at most this often, when it changed, and on demand"},
	{"state_root_history", K_INT, O(state_root_history), 1, 4096, "64", "signed state roots kept for /api/root?cursor= and /api/root/history"},
	{"state_root_thread_records", K_INT, O(state_root_thread_records), 0, 1000000000, "100000", "a store of more records builds its state root on a thread of its own at start (0: always)"},
	{"upstream_negative_ttl", K_INT, O(upstream_negative_ttl), 0, 7 * 86400, "600", "seconds an id no upstream knows is answered 404 without asking again"},
	{"upstream_stall_s", K_INT, O(upstream_stall_s), 1, 3600, "15", "an upstream transfer slower than 1 KiB/s for this many seconds is dropped (stalled)"},
	{"upstream_deadline_s", K_INT, O(upstream_deadline_s), 1, 3600, "60", "an upstream transfer not over in this many seconds is dropped, and at once one whose Content-Length its rate would take over twice as long to bring (cause timeout)"},
	{"upstream_inflight_each", K_INT, O(upstream_inflight_each), 0, 256, "0", "records fetched from one upstream at once, and entries of its change feed: its share of upstream_inflight (0: half with two upstreams or more, all with one)"},
	{"outbound_target", K_INT, O(outbound_target), 0, 64, "8", "outbound connections to keep"},
	{"inbound_max", K_INT, O(inbound_max), 0, 1024, "32", "inbound connections accepted (when full, one is closed for a newcomer by the protective rule)"},
	{"inbound_per_ip", K_INT, O(inbound_per_ip), 1, 1024, "4", "inbound connections from one IP address (127.0.0.1 and ::1 exempt)"},
	{"inbound_per_group", K_INT, O(inbound_per_group), 1, 1024, "8", "inbound connections from one network group, /16 or /32 (127.0.0.1 and ::1 exempt)"},
	{"validate_threads", K_INT, O(validate_threads), 1, 64, "2", "threads verifying signatures"},
	{"max_frame", K_INT, O(max_frame), 65536, WIRE_FRAME_MAX_HARD, "4194304", "largest wire frame payload, bytes"},
	{"max_inflight", K_INT, O(max_inflight), 1, 65536, "1024", "ids requested from one peer at a time"},
	{"max_pending", K_INT, O(max_pending), 1024, 16777216, "262144", "ids waiting to be fetched, all peers"},
	{"max_wanted", K_INT, O(max_wanted), 1024, 16777216, "16384", "ids queued to fetch from one peer: its share of max_pending (a sixteenth by default, so that a few peers announcing ids they never serve cannot fill the table)"},
	{"max_serve_queue", K_INT, O(max_serve_queue), 4096, 1048576, "16384", "ids one peer may ask for before it is answered"},
	{"peer_validate_bytes", K_INT, O(peer_validate_bytes), 1 << 20, INT64_C(1) << 34, "8388608", "bytes of one peer's events and bundles waiting for validation before it is no longer read from"},
	{"validate_bytes_max", K_INT, O(validate_bytes_max), 1 << 20, INT64_C(1) << 36, "67108864", "bytes of all peers' events and bundles waiting for validation before every peer that delivers is held"},
	{"peer_msg_rate", K_INT, O(peer_msg_rate), 1, 1000000, "5000", "unsolicited messages per second from one peer"},
	{"peer_msg_burst", K_INT, O(peer_msg_burst), 1, 10000000, "10000", "burst of unsolicited messages"},
	{"peer_byte_rate", K_INT, O(peer_byte_rate), 65536, INT64_C(1) << 40, "33554432", "bytes read per second from one peer (but for events and bundles asked of it)"},
	{"peer_out_max", K_INT, O(peer_out_max), 1 << 20, INT64_C(1) << 34, "33554432", "bytes queued to a peer before it is dropped as too slow"},
	{"ban_threshold", K_INT, O(ban_threshold), 1, 1000000, "100", "misbehaviour score that bans"},
	{"ban_seconds", K_INT, O(ban_seconds), 1, INT64_C(1) << 32, "3600", "how long a ban lasts"},
	{"handshake_timeout_ms", K_INT, O(handshake_timeout_ms), 100, 600000, "10000", "HELLO and AUTH must arrive within"},
	{"ping_interval_ms", K_INT, O(ping_interval_ms), 100, 3600000, "30000", "PING an idle peer this often"},
	{"ban_max", K_INT, O(ban_max), 16, 1000000, "4096", "bans held; when full, the one that runs out first is dropped for a new one"},
	{"ping_timeout_ms", K_INT, O(ping_timeout_ms), 100, 3600000, "20000", "PONG must arrive within"},
	{"idle_timeout_ms", K_INT, O(idle_timeout_ms), 1000, 86400000, "120000", "close a peer silent this long"},
	{"fetch_timeout_ms", K_INT, O(fetch_timeout_ms), 100, 600000, "10000", "an EVENT must answer a GET within"},
	{"announce_delay_ms", K_INT, O(announce_delay_ms), 0, 10000, "2", "gather new ids this long before announcing"},
	{"announce_fanout", K_INT, O(announce_fanout), 0, 1024, "2", "peers told at once of an event that entered at this node, the rest later (0: all at once)"},
	{"lazy_announce_ms", K_INT, O(lazy_announce_ms), 1, 60000, "200", "the other peers are told this much later, if none told them first"},
	{"pex_interval_ms", K_INT, O(pex_interval_ms), 100, 86400000, "60000", "ask a peer for addresses this often while short of peers"},
	{"reconnect_min_ms", K_INT, O(reconnect_min_ms), 10, 3600000, "500", "first reconnect delay (doubles, jittered)"},
	{"reconnect_max_ms", K_INT, O(reconnect_max_ms), 10, 86400000, "60000", "longest reconnect delay"},
	{"addrbook_max", K_INT, O(addrbook_max), 16, 1000000, "10240", "learnt addresses remembered (the tables hold 10240 at most)"},
	{"sync_interval_ms", K_INT, O(sync_interval_ms), 0, INT64_C(604800000), "600000", "reconcile with each dialled peer this often, jittered (0: only on connecting)"},
	{"sync_upload_bytes", K_INT, O(sync_upload_bytes), 65536, INT64_C(1) << 44, "1073741824", "bytes of reconciliation answers and bundle offers sent to all peers together per sync interval (600 s if sync_interval_ms is 0); past it answers wait"},
	{"sync_timeout_ms", K_INT, O(sync_timeout_ms), 1000, 86400000, "300000", "a peer must answer a reconciliation message within"},
	{"sync_bulk_min", K_INT, O(sync_bulk_min), 0, INT64_C(1) << 40, "100000", "a catch-up from a peer holding at least this many events more than the node puts the store in bulk mode until caught up, and the search index waits for it to end (0: never)"},
	{"sync_bulk_unlogged", K_INT, O(sync_bulk_unlogged), 0, 1, "1", "a catch-up in bulk mode commits without the write-ahead log: a crash loses what came after the store's last flush, which the next catch-up fetches again; clients' writes and the follower's still outlive a crash, and the store is flushed when the catch-up ends (0: always through the log)"},
	{"sync_bulk_side", K_INT, O(sync_bulk_side), 0, 1, "1", "with sync_bulk_unlogged, a new node's first catch-up writes states, alias claims and the index of events by id into side families sorted once per flush, moved into place when it ends; reads of states and claims meanwhile cost more, and events are found by id only with their times (0: into their families directly)"},
	{"store_cache_mb", K_INT, O(store_cache_mb), 8, 1048576, "64", "the store's block cache, MiB (more: cheaper random reads)"},
	{"store_wal_mb", K_INT, O(store_wal_mb), 1, 65536, "1024", "write-ahead log kept at most before the oldest is flushed away, MiB"},
	{"store_warm_mb", K_INT, O(store_warm_mb), -1, 16777216, "-1", "table files of the read side read into the page cache at start, MiB at most (-1: half the machine's memory; 0: none)"},
	{"worker_nice", K_INT, O(worker_nice), 0, 19, "10", "nice steps below the event loop for the writer; the validators and RocksDB's threads go 5 further (0: none)"},
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* An upstream's base URL: http(s), a host, an optional port and path,
 * nothing else (wire_http_url_is_valid), trailing slashes aside. */
static int upstream_url_ok(const char *v)
{
	char u[WIRE_HTTP_URL_MAX + 1];
	size_t n = strlen(v);
	while (n && v[n - 1] == '/')
		n--;
	if (!n || n > WIRE_HTTP_URL_MAX)
		return 0;
	memcpy(u, v, n);
	u[n] = 0;
	return wire_http_url_is_valid(u);
}

/* An origin an operator lists: an upstream URL with no path (a trailing
 * '/' aside). */
static int origin_ok(const char *v)
{
	const char *p = strstr(v, "://");
	if (!p || !upstream_url_ok(v))
		return 0;
	const char *slash = strchr(p + 3, '/');
	return !slash || !slash[1];
}

const char *config_text_why(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n > max) {
		static __thread char why[64];
		snprintf(why, sizeof(why), "longer than %zu bytes", max);
		return why;
	}
	const uint8_t *p = (const uint8_t *)s;
	for (size_t i = 0; i < n;) {
		size_t l = pith_utf8_char(p + i, n - i, NULL);
		if (!l)
			return "not valid UTF-8";
		/* C0 controls, DEL and the C1 controls (U+0080..U+009F) */
		if ((l == 1 && (p[i] < 0x20 || p[i] == 0x7f)) || (l == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0))
			return "holds a control character";
		i += l;
	}
	return NULL;
}

static const key_t_ *key_find(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	/* a few aliases that read better as flags */
	if (!strcmp(name, "data_dir"))
		return key_find("data");
	return NULL;
}

int config_split_hostport(const char *s, char host[static 256], uint16_t *port, int allow_zero)
{
	const char *colon;
	size_t hl;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return PITH_EINVAL;
		hl = (size_t)(rb - s - 1);
		memcpy(host, s + 1, hl < 255 ? hl : 255);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return PITH_EINVAL;
		hl = (size_t)(colon - s);
		memcpy(host, s, hl < 255 ? hl : 255);
	}
	if (hl == 0 || hl > 255)
		return PITH_EINVAL;
	host[hl] = 0;
	char *end;
	errno = 0;
	long p = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end || p < (allow_zero ? 0 : 1) || p > 65535)
		return PITH_EINVAL;
	*port = (uint16_t)p;
	return 0;
}

int config_set(node_config_t *c, const char *name, const char *value, int from_flag,
	       pith_err_t *err)
{
	const key_t_ *k = key_find(name);
	if (!k)
		return pith_err_set(err, PITH_EINVAL, "unknown setting '%s'", name);
	char *field = (char *)c + k->off;
	size_t vl = strlen(value);
	char host[256];
	uint16_t port;
	switch (k->kind) {
	case K_ADDR:
		if (vl && config_split_hostport(value, host, &port, 1))
			return pith_err_set(err, PITH_EINVAL, "%s: '%s' is not HOST:PORT", name, value);
		/* fall through */
	case K_STR:
		if (vl >= CONFIG_STR_MAX)
			return pith_err_set(err, PITH_EINVAL, "%s: longer than %d bytes", name,
					    CONFIG_STR_MAX - 1);
		memcpy(field, value, vl + 1);
		return 0;
	case K_NETID:
		if (!wire_netid_is_valid(value))
			return pith_err_set(err, PITH_EINVAL,
					    "%s: '%s' is not 1 to %d of [A-Za-z0-9._-]", name, value,
					    WIRE_NETID_MAX);
		memcpy(field, value, vl + 1);
		return 0;
	case K_TEXT: {
		const char *why = config_text_why(value, (size_t)k->max);
		if (why)
			return pith_err_set(err, PITH_EINVAL, "%s: %s", name, why);
		memcpy(field, value, vl + 1);
		return 0;
	}
	case K_LEVEL:
		if (log_level_parse(value) < 0)
			return pith_err_set(err, PITH_EINVAL, "%s: '%s' is not error, warn, info or debug",
					    name, value);
		snprintf(field, 16, "%s", value);
		return 0;
	case K_LIST: {
		config_list_t *l = (config_list_t *)field;
		if (from_flag && !l->from_flags) {
			l->n = 0;
			l->from_flags = 1;
		}
		if (l->n >= CONFIG_LIST_MAX)
			return pith_err_set(err, PITH_EINVAL, "%s: more than %d entries", name,
					    CONFIG_LIST_MAX);
		if (!vl || vl >= CONFIG_STR_MAX)
			return pith_err_set(err, PITH_EINVAL, "%s: empty or too long", name);
		if (k->off == O(peers) && config_split_hostport(value, host, &port, 0))
			return pith_err_set(err, PITH_EINVAL, "%s: '%s' is not HOST:PORT", name, value);
		if (k->off == O(upstream_origins) && !origin_ok(value))
			return pith_err_set(err, PITH_EINVAL,
					    "%s: '%s' is not an origin: http:// or https://, a host and an optional port, no path (like https://cdn.example)",
					    name, value);
		if (k->off == O(upstreams) && !upstream_url_ok(value))
			return pith_err_set(err, PITH_EINVAL,
					    "%s: '%s' is not an http:// or https:// base URL (like https://pith.science)",
					    name, value);
		memcpy(l->items[l->n++], value, vl + 1);
		return 0;
	}
	case K_INT: {
		char *end;
		errno = 0;
		long long v = strtoll(value, &end, 10);
		if (errno || end == value || *end)
			return pith_err_set(err, PITH_EINVAL, "%s: '%s' is not an integer", name, value);
		if (v < k->min || v > k->max)
			return pith_err_set(err, PITH_EINVAL, "%s: %lld is outside %lld..%lld", name, v,
					    (long long)k->min, (long long)k->max);
		*(int64_t *)field = v;
		return 0;
	}
	}
	return PITH_EINVAL;
}

void config_defaults(node_config_t *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < NKEYS; i++)
		if (keys[i].kind != K_LIST && (keys[i].def[0] || keys[i].kind != K_INT))
			config_set(c, keys[i].name, keys[i].def, 0, NULL);
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = 0;
	return s;
}

int config_load_file(node_config_t *c, const char *path, pith_err_t *err)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return pith_err_set(err, PITH_EIO, "cannot open config %s: %s", path, strerror(errno));
	char line[2048];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			rc = pith_err_set(err, PITH_EINVAL, "%s:%d: line longer than %zu bytes", path,
					  lineno, sizeof(line) - 2);
			break;
		}
		char *s = trim(line);
		if (!*s || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = pith_err_set(err, PITH_EINVAL, "%s:%d: expected 'key = value'", path, lineno);
			break;
		}
		*eq = 0;
		char *k = trim(s), *v = trim(eq + 1);
		pith_err_t e = {0};
		if (config_set(c, k, v, 0, &e)) {
			rc = pith_err_set(err, PITH_EINVAL, "%s:%d: %s", path, lineno, e.msg);
			break;
		}
	}
	fclose(f);
	return rc;
}

int config_from_args(node_config_t *c, int argc, char **argv, config_ask_t *ask,
		     pith_err_t *err)
{
	*ask = CONFIG_ASK_RUN;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			*ask = CONFIG_ASK_HELP;
			return 0;
		}
		/* a flag without a value, not a setting: answered before the
		 * settings are read */
		if (!strcmp(argv[i], "--version")) {
			*ask = CONFIG_ASK_VERSION;
			return 0;
		}
		if (!strcmp(argv[i], "--config")) {
			if (i + 1 >= argc)
				return pith_err_set(err, PITH_EINVAL, "--config needs a FILE");
			if (strlen(argv[i + 1]) >= sizeof(c->config_file))
				return pith_err_set(err, PITH_EINVAL, "--config: longer than %d bytes",
						    CONFIG_STR_MAX - 1);
			snprintf(c->config_file, sizeof(c->config_file), "%s", argv[i + 1]);
			int rc = config_load_file(c, argv[i + 1], err);
			if (rc)
				return rc;
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strncmp(a, "--", 2) || !a[2])
			return pith_err_set(err, PITH_EINVAL, "unexpected argument '%s'", a);
		if (i + 1 >= argc)
			return pith_err_set(err, PITH_EINVAL, "%s needs a value", a);
		const char *v = argv[++i];
		if (!strcmp(a, "--config"))
			continue;
		char name[64];
		size_t n = strlen(a + 2);
		if (n >= sizeof(name))
			return pith_err_set(err, PITH_EINVAL, "unknown flag %s", a);
		for (size_t j = 0; j <= n; j++)
			name[j] = a[2 + j] == '-' ? '_' : a[2 + j];
		pith_err_t e = {0};
		if (!key_find(name))
			return pith_err_set(err, PITH_EINVAL, "unknown flag %s", a);
		if (config_set(c, name, v, 1, &e))
			return pith_err_set(err, PITH_EINVAL, "%s", e.msg);
	}
	return 0;
}

int config_finish(node_config_t *c, pith_err_t *err)
{
	if (!c->data_dir[0])
		return pith_err_set(err, PITH_EINVAL, "no data directory: use --data DIR or data = DIR");
	if (!c->listen[0])
		return pith_err_set(err, PITH_EINVAL, "listen must be HOST:PORT");
	if (!c->control[0]) {
		int n = snprintf(c->control, sizeof(c->control), "%s/pithd.sock", c->data_dir);
		if (n < 0 || (size_t)n >= sizeof(c->control) || (size_t)n >= 100)
			return pith_err_set(err, PITH_EINVAL,
					    "the default control path DATA/pithd.sock is too long "
					    "for a Unix socket; set control = PATH");
	}
	if (c->reconnect_min_ms > c->reconnect_max_ms)
		return pith_err_set(err, PITH_EINVAL, "reconnect_min_ms exceeds reconnect_max_ms");
	if (c->site_dir[0] && !c->site_base_url[0] && c->http_public_url[0])
		memcpy(c->site_base_url, c->http_public_url, sizeof(c->site_base_url));
	if (c->site_base_url[0] && !upstream_url_ok(c->site_base_url))
		return pith_err_set(err, PITH_EINVAL,
				    "site_base_url: '%s' is not an http:// or https:// base URL",
				    c->site_base_url);
	if (c->site_dir[0] && !c->site_search_url[0] && c->http[0] && c->http_public_url[0])
		memcpy(c->site_search_url, c->http_public_url, sizeof(c->site_search_url));
	if (c->site_search_url[0] && !upstream_url_ok(c->site_search_url))
		return pith_err_set(err, PITH_EINVAL,
				    "site_search_url: '%s' is not an http:// or https:// base URL",
				    c->site_search_url);
	if (c->peer_msg_burst < c->peer_msg_rate)
		c->peer_msg_burst = c->peer_msg_rate;
	return 0;
}

static int key_differs(const key_t_ *k, const node_config_t *a, const node_config_t *b)
{
	const char *fa = (const char *)a + k->off, *fb = (const char *)b + k->off;
	switch (k->kind) {
	case K_INT:
		return *(const int64_t *)fa != *(const int64_t *)fb;
	case K_LIST: {
		const config_list_t *la = (const config_list_t *)fa, *lb = (const config_list_t *)fb;
		if (la->n != lb->n)
			return 1;
		for (size_t i = 0; i < la->n; i++)
			if (strcmp(la->items[i], lb->items[i]))
				return 1;
		return 0;
	}
	default:
		return strcmp(fa, fb) != 0;
	}
}

size_t config_diff(const node_config_t *a, const node_config_t *b, const char **names,
		   size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < NKEYS; i++) {
		if (!key_differs(&keys[i], a, b))
			continue;
		if (n < max)
			names[n] = keys[i].name;
		n++;
	}
	return n;
}

void config_usage(void *file)
{
	FILE *f = file;
	fprintf(f, "usage: pithd [--config FILE] [--KEY VALUE]...\n"
		   "       pithd --version | --help\n\n"
		   "Every setting is a config file line `key = value` and a flag\n"
		   "`--key value` (dashes or underscores); flags override the file.\n"
		   "peer, trust_key, upstream and upstream_origin repeat; given as flags they replace the file's.\n\n");
	for (size_t i = 0; i < NKEYS; i++) {
		char flag[64];
		snprintf(flag, sizeof(flag), "--%s", keys[i].name);
		for (char *p = flag + 2; *p; p++)
			if (*p == '_')
				*p = '-';
		fprintf(f, "  %-24s %s", flag, keys[i].help);
		if (keys[i].def[0])
			fprintf(f, " [%s]", keys[i].def);
		fputc('\n', f);
	}
}

long long config_test_knob(const char *name, long long max)
{
	const char *v = getenv(name);
	long long n = v ? atoll(v) : 0;
	return n > 0 && n < max ? n : 0;
}
