/* The node's config at start and on SIGHUP (docs/operations.md): the
 * trusted keys, the log file reopened, and the reload, which reads the
 * config as pithd read it at start (node_set_config_reader) and applies
 * what can change while the node runs:
 *
 *   log_level, log_file   at once;
 *   trust_key             a new trust store for the validators (the jobs
 *                         being validated finish with the old one, freed
 *                         after them); the registry-role keys cannot
 *                         change, since the store merges with them;
 *   peer                  a new one is dialled and kept; a numeric one
 *                         removed is no longer kept (a name: at the next
 *                         start);
 *   upstream, follow, upstream_*
 *                         a new follower replaces the running one;
 *   anything else         logged as waiting for the next start.
 *
 * A config that does not read leaves everything as it was. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "node_int.h"

#define DIFF_MAX 128 /* more keys than the table has */

int node_trust_build(const node_config_t *cfg, int loud, pith_trust_t **out, pith_err_t *err)
{
	pith_trust_t *t = pith_trust_new();
	*out = NULL;
	if (!t)
		return pith_err_set(err, PITH_ENOMEM, "cannot initialise the trust store");
	const char *note = pith_trust_fixed_key_note(t);
	if (loud && note && getenv("PITH_ED25519"))
		log_info("signatures: %s", note);
	else if (loud && note)
		log_warn("signature self-test failed: %s; no fixed-key tables, every signature "
			 "is verified by libsodium (docs/signatures.md)", note);
	int rc = 0;
	uint8_t *buf = malloc(65536);
	if (!buf) {
		pith_trust_free(t);
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < cfg->trust_keys.n && !rc; i++) {
		const char *path = cfg->trust_keys.items[i];
		FILE *f = fopen(path, "rb");
		if (!f) {
			rc = pith_err_set(err, PITH_EIO, "trust_key %s: %s", path, strerror(errno));
			break;
		}
		size_t len = fread(buf, 1, 65536, f);
		fclose(f);
		pith_key_t k;
		pith_err_t e = {0};
		if (pith_keyfile_parse(buf, len, &k, NULL, NULL, &e) || pith_trust_key_check(&k, &e) ||
		    pith_trust_add(t, &k))
			rc = pith_err_set(err, PITH_EINVAL, "trust_key %s: %s", path,
					  e.msg[0] ? e.msg : "cannot be added");
		else if (loud)
			log_info("trusting key %s (%s)%s", k.key_id, k.fp,
				 k.is_registry ? " as a registry key" : "");
	}
	/* a key file may hold a secret key beside the public one */
	memset(buf, 0, 65536);
	free(buf);
	if (rc) {
		pith_trust_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

/* Whether t holds k (the same public key under the same key id, with
 * the same role). */
static int trust_holds(const pith_trust_t *t, const pith_key_t *k)
{
	for (size_t i = 0; i < pith_trust_count(t); i++) {
		const pith_key_t *x = pith_trust_at(t, i);
		if (!memcmp(x->pk, k->pk, 32) && !strcmp(x->key_id, k->key_id) &&
		    x->is_registry == k->is_registry)
			return 1;
	}
	return 0;
}

/* 1 when a and b hold the same registry-role keys. */
static int same_registry_keys(const pith_trust_t *a, const pith_trust_t *b)
{
	for (int pass = 0; pass < 2; pass++) {
		const pith_trust_t *x = pass ? b : a, *y = pass ? a : b;
		for (size_t i = 0; i < pith_trust_count(x); i++) {
			const pith_key_t *k = pith_trust_at(x, i);
			if (k->is_registry && !trust_holds(y, k))
				return 0;
		}
	}
	return 1;
}

/* Logs the keys one store holds and the other lacks, with word. */
static void trust_log_diff(const pith_trust_t *from, const pith_trust_t *to, const char *word)
{
	for (size_t i = 0; i < pith_trust_count(to); i++) {
		const pith_key_t *k = pith_trust_at(to, i);
		if (!trust_holds(from, k))
			log_info("reload: trust_key: %s key %s (%s)", word, k->key_id, k->fp);
	}
}

void node_trust_reap(node_t *n, int stopping)
{
	if (!n->ntrust_old && (!stopping || n->trust_live == n->trust))
		return;
	if (!stopping && !ingest_trust_retired(n->ingest))
		return;
	for (size_t i = 0; i < n->ntrust_old; i++)
		pith_trust_free(n->trust_old[i]);
	free(n->trust_old);
	n->trust_old = NULL;
	n->ntrust_old = 0;
	if (stopping && n->trust_live != n->trust)
		pith_trust_free(n->trust_live);
	if (stopping)
		n->trust_live = NULL;
}

/* trust_key changed: a store of the new list for the validators. 1 when
 * applied, 0 when not (logged why). */
static int reload_trust(node_t *n, const node_config_t *nc)
{
	pith_trust_t *t = NULL;
	pith_err_t err = {0};
	if (node_trust_build(nc, 0, &t, &err)) {
		log_error("reload: %s; keeping the keys trusted until now", err.msg);
		return 0;
	}
	if (!same_registry_keys(t, n->trust)) {
		log_error("reload: trust_key: the registry-role keys changed, which takes a restart "
			  "(the store's merged states are computed with them, docs/store.md); keeping "
			  "the keys trusted until now");
		pith_trust_free(t);
		return 0;
	}
	/* the store it replaces waits for the validations that use it (the
	 * store's own, n->trust, lives as long as the node) */
	if (n->trust_live != n->trust) {
		pith_trust_t **old = realloc(n->trust_old, (n->ntrust_old + 1) * sizeof(*old));
		if (!old) {
			log_error("reload: trust_key: out of memory; keeping the keys trusted until now");
			pith_trust_free(t);
			return 0;
		}
		n->trust_old = old;
		n->trust_old[n->ntrust_old++] = n->trust_live;
	}
	trust_log_diff(n->trust_live, t, "now trusting");
	trust_log_diff(t, n->trust_live, "no longer trusting");
	n->trust_live = t;
	ingest_set_trust(n->ingest, t);
	return 1;
}

/* peer changed: the new ones dialled and kept (pinned, as at start). */
static void reload_peers(node_t *n, const node_config_t *nc)
{
	const config_list_t *was = &n->cfg->peers, *now = &nc->peers;
	for (size_t i = 0; i < now->n; i++) {
		size_t j = 0;
		while (j < was->n && strcmp(was->items[j], now->items[i]))
			j++;
		if (j < was->n)
			continue;
		pith_err_t err = {0};
		if (addrbook_add_hostport(n->book, now->items[i], 1, &err))
			log_error("reload: peer %s: %s", now->items[i], err.msg);
		else
			log_info("reload: peer %s: added, dialling it", now->items[i]);
	}
	for (size_t j = 0; j < was->n; j++) {
		size_t i = 0;
		while (i < now->n && strcmp(was->items[j], now->items[i]))
			i++;
		if (i < now->n)
			continue;
		int rc = addrbook_unpin_hostport(n->book, was->items[j]);
		if (!rc)
			log_info("reload: peer %s: removed, no longer kept (a connection to it stays "
				 "until it closes)", was->items[j]);
		else
			log_info("reload: peer %s: removed from the config; kept until the next start "
				 "(%s)", was->items[j],
				 rc == PITH_ENOTSUP ? "a name" : rc == PITH_EEXIST ? "its address book slots are held"
				 : "`connect` keeps it, or it was never in the book");
	}
}

/* The settings the follower is made with: any of them changed, a new
 * follower replaces it. */
static int is_follower_key(const char *k)
{
	static const char *const keys[] = {"upstream", "upstream_ca_file", "follow",
					   "upstream_refresh", "upstream_inflight",
					   "upstream_negative_ttl", "upstream_stall_s",
					   "upstream_origin", "upstream_deadline_s",
					   "upstream_inflight_each"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(k, keys[i]))
			return 1;
	return 0;
}

/* The follower's settings changed: a follower of nc's replaces the
 * running one, made first so that one that cannot start (a follow list
 * that does not read) leaves the old in place. The old one's requests are
 * cancelled: its jobs in the pipeline come back to the new one, which
 * does not know their serials (follower_opts_t.first_serial), and
 * read-through requests it was answering time out (readthrough_ms) as
 * they would without an upstream. 1 when applied. */
static int reload_follower(node_t *n, const node_config_t *nc)
{
	node_config_t *fc = malloc(sizeof(*fc));
	if (!fc) {
		log_error("reload: upstream: out of memory; the upstreams stay as they were");
		return 0;
	}
	*fc = *nc; /* the new follower keeps pointers into its settings */
	uint64_t first = n->follow_serials;
	if (n->follower && follower_last_serial(n->follower) > first)
		first = follower_last_serial(n->follower);
	follower_t *f = NULL;
	pith_err_t err = {0};
	if (node_follower_start(n, fc, first, &f, &err)) {
		log_error("reload: %s; the upstreams stay as they were", err.msg);
		free(fc);
		return 0;
	}
	follower_free(n->follower);
	free(n->follow_cfg);
	n->follower = f;
	n->follow_cfg = fc;
	n->follow_serials = first;
	node_config_t *c = n->cfg;
	c->upstreams = nc->upstreams;
	memcpy(c->upstream_ca_file, nc->upstream_ca_file, sizeof(c->upstream_ca_file));
	memcpy(c->follow, nc->follow, sizeof(c->follow));
	c->upstream_refresh = nc->upstream_refresh;
	c->upstream_inflight = nc->upstream_inflight;
	c->upstream_negative_ttl = nc->upstream_negative_ttl;
	c->upstream_stall_s = nc->upstream_stall_s;
	c->upstream_origins = nc->upstream_origins;
	c->upstream_deadline_s = nc->upstream_deadline_s;
	c->upstream_inflight_each = nc->upstream_inflight_each;
	if (!f)
		log_info("reload: upstream: none now; the node follows nothing");
	else if (!n->http || !c->readthrough_ms || n->started_follower)
		log_info("reload: upstream: following %zu upstream(s) afresh", c->upstreams.n);
	else
		log_info("reload: upstream: following %zu upstream(s) afresh; HTTP reads of records "
			 "the node lacks wait for them from the next start on (there was no upstream "
			 "at start)", c->upstreams.n);
	return 1;
}

/* Reopens log_file (if set) in place of stderr: logrotate moved it.
 * 1 when it did. */
static int reopen_log(const char *path)
{
	if (!path[0])
		return 0;
	int rc = log_file_open(path);
	if (rc)
		log_error("SIGHUP: cannot reopen the log file %s: %s; logging on where it went "
			  "so far", path, strerror(-rc));
	return !rc;
}

void node_reload(node_t *n)
{
	node_config_t *cfg = n->cfg, *nc = calloc(1, sizeof(*nc));
	pith_err_t err = {0};
	int rc;
	if (!nc)
		rc = pith_err_set(&err, PITH_ENOMEM, "out of memory");
	else if (!n->reread)
		rc = pith_err_set(&err, PITH_EINVAL, "no config reader");
	else
		rc = n->reread(n->reread_arg, nc, &err);
	/* the log first, so that what follows lands in the new file (an
	 * emptied log_file cannot give the node its stderr back: the old
	 * file is reopened) */
	int reopened = reopen_log(!rc && nc->log_file[0] ? nc->log_file : cfg->log_file);
	if (rc) {
		log_error("SIGHUP: %s; the running config is kept", err.msg);
		free(nc);
		return;
	}
	const char *names[DIFF_MAX];
	size_t nd = config_diff(cfg, nc, names, DIFF_MAX), applied = 0, waiting = 0;
	size_t nfollow = 0, nident = 0;
	log_info("SIGHUP: %sconfig %s read again: %zu setting%s changed",
		 reopened ? "log file reopened, " : "",
		 cfg->config_file[0] ? cfg->config_file : "(none: flags only)", nd, nd == 1 ? "" : "s");
	for (size_t i = 0; i < nd && i < DIFF_MAX; i++) {
		const char *k = names[i];
		if (!strcmp(k, "log_level")) {
			/* shown when the old or the new level shows info lines */
			log_level_t lvl = (log_level_t)log_level_parse(nc->log_level);
			if (lvl > log_get_level())
				log_set_level(lvl);
			log_msg(LOG_INFO, "reload: log_level %s -> %s", cfg->log_level, nc->log_level);
			log_set_level(lvl);
			memcpy(cfg->log_level, nc->log_level, sizeof(cfg->log_level));
			applied++;
		} else if (!strcmp(k, "log_file") && nc->log_file[0]) {
			log_info("reload: log_file %s -> %s", cfg->log_file[0] ? cfg->log_file : "stderr",
				 nc->log_file);
			memcpy(cfg->log_file, nc->log_file, sizeof(cfg->log_file));
			applied++;
		} else if (!strcmp(k, "trust_key")) {
			if (reload_trust(n, nc)) {
				cfg->trust_keys = nc->trust_keys;
				applied++;
			}
		} else if (!strcmp(k, "peer")) {
			reload_peers(n, nc);
			cfg->peers = nc->peers;
			applied++;
		} else if (is_follower_key(k)) {
			log_info("reload: %s changed", k);
			nfollow++; /* one new follower for all of them, below */
		} else if (!strcmp(k, "mirror_name") || !strcmp(k, "mirror_operator") ||
			   !strcmp(k, "mirror_contact")) {
			log_info("reload: %s changed", k);
			nident++; /* applied together, below */
		} else {
			log_info("reload: %s changed; takes effect at the next start", k);
			waiting++;
		}
	}
	if (nident) {
		/* config_set checked them as at start; the header, the title,
		 * /pith-mirrors.json and the site's pages show them from now on */
		memcpy(cfg->mirror_name, nc->mirror_name, sizeof(cfg->mirror_name));
		memcpy(cfg->mirror_operator, nc->mirror_operator, sizeof(cfg->mirror_operator));
		memcpy(cfg->mirror_contact, nc->mirror_contact, sizeof(cfg->mirror_contact));
		node_apply_mirror_identity(n);
		applied += nident;
	}
	if (nfollow && reload_follower(n, nc))
		applied += nfollow;
	else
		waiting += nfollow;
	if (nd)
		log_info("reload: %zu change%s applied, %zu waiting for a restart", applied,
			 applied == 1 ? "" : "s", waiting);
	free(nc);
}
