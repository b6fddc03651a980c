/* The address book and the bans across restarts: DATA/peers.json.
 *
 *   {"version":2,
 *    "key":"HEX",       the book's placement key (16 bytes): the buckets
 *                       of every address depend on it
 *    "addresses":[{"addr":"IP:PORT","kept":BOOL,"last_ok_us":INT,"node_id":"HEX",
 *                  "table":"new"|"tried","src":"GROUP","failures":INT,"seen_us":INT},...],
 *    "bans":[{"ip":"IP","until_us":INT,"reason":"..."},...]}
 *
 * Times are wall-clock microseconds. "kept" marks the addresses the
 * operator added with `connect`: they are dialled and redialled like
 * configured peers after a restart too, and are in no table. Configured
 * peers (--peer) are not kept here (the configuration says whether they
 * still are); addresses learnt from peers are, so that a restarted node
 * has somewhere to start, each in its table and with the network group
 * ("a.b.0.0/16" or "x:y::/32") of the peer that told of it, so that it
 * lands in the same bucket again. Version 1 files (no key, no tables)
 * load too: their addresses go to the new table as if each had told of
 * itself, under a new key.
 *
 * The file is written whole to peers.json.tmp, synced, renamed over
 * peers.json and the directory synced: a crash leaves the old file or the
 * new one. It is written within a few seconds of a change (misbehaviour
 * bans, addresses learnt), at once for the operator's commands, and at
 * shutdown. A file that does not parse is reported and ignored: the node
 * starts with its configured peers, as it would without one. */
#include "addrbook_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "store_file.h"

#define PEERS_FILE "peers.json"
#define PEERS_FILE_MAX (8u << 20)
#define SAVE_AFTER_US 5000000 /* a change is written within this long */

static void file_path(const addrbook_t *ab, const char *suffix, char *out, size_t len)
{
	snprintf(out, len, "%s/%s%s", ab->cfg->data_dir, PEERS_FILE, suffix);
}

void addrbook_changed(addrbook_t *ab)
{
	if (!ab->dirty_us)
		ab->dirty_us = node_now_us();
}

void addrbook_save_if_changed(addrbook_t *ab)
{
	pith_err_t e = {0};
	if (ab && ab->loaded && ab->dirty_us && addrbook_save(ab, &e))
		log_error("%s", e.msg);
}

void addrbook_save_tick(addrbook_t *ab, int64_t now)
{
	if (!ab->dirty_us || now - ab->dirty_us < SAVE_AFTER_US)
		return;
	pith_err_t err = {0};
	if (addrbook_save(ab, &err)) {
		static log_rl_t rl;
		log_rl(&rl, LOG_ERROR, "%s", err.msg);
		ab->dirty_us = now; /* try again later */
	}
}

/* ---- writing ------------------------------------------------------------------------ */

static void write_json(const addrbook_t *ab, pith_buf_t *b)
{
	int64_t now = node_now_us();
	char key[2 * sizeof(ab->key) + 1];
	pith_hex_encode(ab->key, sizeof(ab->key), key);
	pith_buf_printf(b, "{\"version\":2,\"key\":\"%s\",\"addresses\":[", key);
	int first = 1;
	for (size_t i = 0; i < ab->nbook; i++) {
		const addr_entry_t *a = ab->book[i];
		if (a->self)
			continue;
		pith_buf_printf(b, "%s\n{\"addr\":", first ? "" : ",");
		json_write_string(b, a->str, strlen(a->str));
		pith_buf_printf(b, ",\"kept\":%s,\"last_ok_us\":%lld", a->kept ? "true" : "false",
				(long long)a->last_ok_us);
		if (a->has_pk) {
			char hex[65];
			pith_hex_encode(a->pk, 32, hex);
			pith_buf_printf(b, ",\"node_id\":\"%s\"", hex);
		}
		if (a->table != ADDR_TABLE_NONE) {
			char g[64];
			addrbook_group_format(a->src_group, g);
			pith_buf_printf(b, ",\"table\":\"%s\",\"src\":\"%s\",\"failures\":%u,"
					"\"seen_us\":%lld",
					a->table == ADDR_TABLE_TRIED ? "tried" : "new", g, a->failures,
					(long long)a->seen_us);
		}
		pith_buf_puts(b, "}");
		first = 0;
	}
	pith_buf_puts(b, "],\"bans\":[");
	first = 1;
	for (size_t i = 0; i < ab->nbans; i++) {
		const ban_t *bn = ab->bans[i];
		if (bn->until_us <= now)
			continue;
		pith_buf_printf(b, "%s\n{\"ip\":\"%s\",\"until_us\":%lld,\"reason\":", first ? "" : ",",
				bn->ip_str, (long long)bn->until_us);
		json_write_string(b, bn->reason, strlen(bn->reason));
		pith_buf_puts(b, "}");
		first = 0;
	}
	pith_buf_puts(b, "]}\n");
}

int addrbook_save(addrbook_t *ab, pith_err_t *err)
{
	char path[CONFIG_STR_MAX + 32];
	file_path(ab, "", path, sizeof(path));
	pith_buf_t b = PITH_BUF_INIT;
	write_json(ab, &b);
	int rc = 0;
	if (b.oom)
		rc = pith_err_set(err, PITH_ENOMEM, "%s: out of memory", path);
	else if (store_file_replace(path, b.data, b.len, 0600, STORE_FILE_NOFOLLOW))
		rc = pith_err_set(err, PITH_EIO, "cannot write %s: %s", path, strerror(errno));
	else
		ab->dirty_us = 0;
	pith_buf_release(&b);
	return rc;
}

/* ---- reading --------------------------------------------------------------------------- */

static int get_i64(const json_value_t *o, const char *key, int64_t *out)
{
	const json_value_t *v = json_get_type(o, key, JSON_INT);
	if (!v || v->len > 20)
		return -1;
	char *end;
	errno = 0;
	long long x = strtoll(v->u.str, &end, 10);
	if (errno || *end)
		return -1;
	*out = x;
	return 0;
}

static int load_address(addrbook_t *ab, const json_value_t *o)
{
	const char *addr = json_get_str(o, "addr");
	const json_value_t *kept = json_get(o, "kept");
	int64_t last_ok = 0, seen = 0, failures = 0;
	char host[256];
	uint16_t port;
	uint8_t ip[16], il;
	if (!addr || config_split_hostport(addr, host, &port, 0) || addrbook_parse_ip(host, ip, &il) ||
	    get_i64(o, "last_ok_us", &last_ok) || !(json_is(kept, JSON_TRUE) || json_is(kept, JSON_FALSE)))
		return -1;
	struct sockaddr_storage ss = {0}, src = {0};
	socklen_t len;
	if (il == 4) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, ip, 4);
		s4->sin_port = htons(port);
		len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, ip, 16);
		s6->sin6_port = htons(port);
		len = sizeof(*s6);
	}
	/* version 2: the table and the group of who told of it */
	const char *table = json_get_str(o, "table"), *srcs = json_get_str(o, "src");
	int has_src = 0;
	if (srcs) {
		char g[64];
		uint8_t gip[16], gl;
		const char *slash = strchr(srcs, '/');
		size_t n = slash ? (size_t)(slash - srcs) : strlen(srcs);
		if (n >= sizeof(g))
			return -1;
		memcpy(g, srcs, n);
		g[n] = 0;
		if (addrbook_parse_ip(g, gip, &gl))
			return -1;
		addrbook_group_sa(addrbook_group_of(gip, gl), &src);
		has_src = 1;
	}
	if ((json_get(o, "failures") && get_i64(o, "failures", &failures)) ||
	    (json_get(o, "seen_us") && get_i64(o, "seen_us", &seen)) || failures < 0)
		return -1;
	int is_kept = json_is(kept, JSON_TRUE);
	addr_entry_t *a = addrbook_add_from(ab, (const struct sockaddr *)&ss, len,
					    is_kept ? ADDR_CONFIG : ADDR_PEX,
					    has_src ? (const struct sockaddr *)&src : NULL);
	if (!a)
		return 0; /* its slots are held, or not dialable: skipped */
	a->kept |= is_kept;
	if (last_ok > a->last_ok_us)
		a->last_ok_us = last_ok;
	if (seen)
		a->seen_us = seen;
	a->failures = failures > 1000 ? 1000 : (unsigned)failures;
	const char *id = json_get_str(o, "node_id");
	if (id && !a->has_pk && pith_hex_decode(id, strlen(id), a->pk, 32) == 0)
		a->has_pk = 1;
	if (table && !strcmp(table, "tried"))
		addrbook_make_tried(ab, a);
	return 0;
}

static int load_ban(addrbook_t *ab, const json_value_t *o, int64_t now)
{
	const char *ipstr = json_get_str(o, "ip"), *reason = json_get_str(o, "reason");
	int64_t until;
	uint8_t ip[16], il;
	if (!ipstr || !reason || addrbook_parse_ip(ipstr, ip, &il) || get_i64(o, "until_us", &until))
		return -1;
	if (until > now)
		addrbook_ban_set(ab, ip, il, until, reason);
	return 0;
}

static int load_doc(addrbook_t *ab, const json_value_t *root, const char *path)
{
	const json_value_t *ver = json_get_type(root, "version", JSON_INT);
	const json_value_t *addrs = json_get_type(root, "addresses", JSON_ARRAY);
	const json_value_t *bans = json_get_type(root, "bans", JSON_ARRAY);
	const char *key = json_get_str(root, "key");
	int v2 = ver && !strcmp(ver->u.str, "2");
	if (!ver || !(v2 || !strcmp(ver->u.str, "1")) || !addrs || !bans) {
		log_warn("%s: not a version 1 or 2 peers file; ignored", path);
		return -1;
	}
	uint8_t k[sizeof(ab->key)];
	if (v2 && (!key || strlen(key) != 2 * sizeof(k) || pith_hex_decode(key, strlen(key), k, sizeof(k)))) {
		log_warn("%s: no valid \"key\"; ignored", path);
		return -1;
	}
	if (v2) /* before any learnt address is placed */
		memcpy(ab->key, k, sizeof(k));
	int64_t now = node_now_us();
	size_t bad = 0, nb = 0;
	for (size_t i = 0; i < addrs->len; i++)
		bad += load_address(ab, addrs->u.items[i]) != 0;
	for (size_t i = 0; i < bans->len; i++) {
		bad += load_ban(ab, bans->u.items[i], now) != 0;
		nb += json_is(bans->u.items[i], JSON_OBJECT);
	}
	if (bad)
		log_warn("%s: %zu malformed entries skipped", path, bad);
	size_t n_new, n_tried;
	addrbook_table_counts(ab, &n_new, &n_tried);
	log_info("%s (version %s): %zu addresses (%zu new, %zu tried), %zu bans still running of %zu",
		 path, ver->u.str, addrs->len, n_new, n_tried, ab->nbans, nb);
	return 0;
}

void addrbook_load(addrbook_t *ab)
{
	char path[CONFIG_STR_MAX + 32];
	file_path(ab, "", path, sizeof(path));
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			log_warn("cannot open %s: %s; starting without it", path, strerror(errno));
		return;
	}
	pith_buf_t b = PITH_BUF_INIT;
	uint8_t chunk[65536];
	ssize_t got;
	while ((got = read(fd, chunk, sizeof(chunk))) > 0 && b.len <= PEERS_FILE_MAX)
		pith_buf_append(&b, chunk, (size_t)got);
	close(fd);
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	if (got < 0 || b.oom || b.len > PEERS_FILE_MAX)
		log_warn("%s: unreadable or over %u bytes; ignored", path, PEERS_FILE_MAX);
	else if (json_parse(&doc, b.data, b.len, NULL, &err))
		log_warn("%s: %s (byte %zu); ignored", path, err.msg, err.offset);
	else
		load_doc(ab, json_doc_root(doc), path);
	json_doc_free(doc);
	pith_buf_release(&b);
	ab->dirty_us = 0; /* what was loaded is what the file says */
	ab->loaded = 1;
}
