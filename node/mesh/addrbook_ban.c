/* The address book's bans (addrbook.h): who may not connect or be
 * dialled, until when and why; saved with the book (addrbook_file.c). */
#include "addrbook_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#define BANS_MAX 4096

static log_rl_t rl_ban;

/* ---- bans ------------------------------------------------------------------------ */

static ban_t *ban_find(const addrbook_t *ab, const uint8_t *ip, uint8_t il)
{
	uint8_t key[32];
	addrbook_ip_key(ip, il, 0, key);
	return idmap_get(ab->ban_by_ip, key);
}

/* Takes the i-th ban out of the table and frees it. */
static void ban_remove_at(addrbook_t *ab, size_t i)
{
	ban_t *b = ab->bans[i];
	uint8_t key[32];
	addrbook_ip_key(b->ip, b->ip_len, 0, key);
	idmap_del(ab->ban_by_ip, key);
	ab->bans[i] = ab->bans[--ab->nbans];
	free(b);
	addrbook_changed(ab);
}

/* The table is full of running bans: the one that runs out soonest goes,
 * so that the newest offender is banned all the same. Said once in the
 * log (then counted in status and /metrics), since an attack that causes
 * it causes it thousands of times. */
static void ban_evict_one(addrbook_t *ab, const char *for_ip)
{
	size_t v = 0;
	for (size_t i = 1; i < ab->nbans; i++)
		if (ab->bans[i]->until_us < ab->bans[v]->until_us)
			v = i;
	ab->stats->bans_evicted++;
	if (!ab->ban_full_logged) {
		ab->ban_full_logged = 1;
		log_warn("ban table full (%lld bans): the ban on %s, the first to run out (in %lld s), "
			 "dropped to make room for %s; from now on such drops are only counted "
			 "(status: stats.bans_evicted)", (long long)ab->cfg->ban_max,
			 ab->bans[v]->ip_str,
			 (long long)((ab->bans[v]->until_us - node_now_us()) / 1000000), for_ip);
	} else {
		log_debug("ban table full: the ban on %s dropped for %s", ab->bans[v]->ip_str, for_ip);
	}
	ban_remove_at(ab, v);
}

int addrbook_ban_set(addrbook_t *ab, const uint8_t *ip, uint8_t il, int64_t until_us, const char *reason)
{
	ban_t *b = ban_find(ab, ip, il);
	if (!b) {
		char ip_str[48];
		inet_ntop(il == 4 ? AF_INET : AF_INET6, ip, ip_str, sizeof(ip_str));
		if (ab->nbans >= (size_t)ab->cfg->ban_max)
			addrbook_ban_prune(ab, node_now_us());
		while (ab->nbans && ab->nbans >= (size_t)ab->cfg->ban_max)
			ban_evict_one(ab, ip_str);
		if (ab->nbans == ab->capbans) {
			size_t cap = ab->capbans ? ab->capbans * 2 : 16;
			ban_t **nb = realloc(ab->bans, cap * sizeof(*nb));
			if (!nb)
				return PITH_ENOMEM;
			ab->bans = nb;
			ab->capbans = cap;
		}
		b = calloc(1, sizeof(*b));
		if (!b)
			return PITH_ENOMEM;
		memcpy(b->ip, ip, il);
		b->ip_len = il;
		snprintf(b->ip_str, sizeof(b->ip_str), "%s", ip_str);
		uint8_t key[32];
		addrbook_ip_key(ip, il, 0, key);
		if (idmap_put(ab->ban_by_ip, key, b)) {
			free(b);
			return PITH_ENOMEM;
		}
		ab->bans[ab->nbans++] = b;
	}
	b->until_us = until_us;
	snprintf(b->reason, sizeof(b->reason), "%s", reason);
	addrbook_changed(ab);
	return 0;
}

int addrbook_ban_lift(addrbook_t *ab, const uint8_t *ip, uint8_t il)
{
	int64_t now = node_now_us();
	int found = 0;
	for (size_t i = 0; i < ab->nbans; i++)
		if (ab->bans[i]->ip_len == il && !memcmp(ab->bans[i]->ip, ip, il)) {
			found = ab->bans[i]->until_us > now;
			ban_remove_at(ab, i);
			break;
		}
	/* its addresses may be dialled again at once */
	for (size_t i = 0; found && i < ab->nbook; i++) {
		uint8_t bip[16], bl;
		uint16_t port;
		addr_entry_t *a = ab->book[i];
		if (!addr_ip((const struct sockaddr *)&a->sa, bip, &bl, &port) && bl == il &&
		    !memcmp(bip, ip, il)) {
			a->failures = 0;
			a->next_attempt_us = 0;
		}
	}
	if (found)
		addrbook_changed(ab);
	return found;
}
void addrbook_ban_add(addrbook_t *ab, const struct sockaddr *sa, const char *reason)
{
	uint8_t ip[16], il;
	uint16_t port;
	if (addr_ip(sa, ip, &il, &port) ||
	    addrbook_ban_set(ab, ip, il, node_now_us() + ab->cfg->ban_seconds * 1000000, reason))
		return;
	ab->stats->bans++;
	char s[48];
	inet_ntop(il == 4 ? AF_INET : AF_INET6, ip, s, sizeof(s));
	log_rl(&rl_ban, LOG_WARN, "banned %s for %lld s: %s", s, (long long)ab->cfg->ban_seconds,
	       reason);
}

int addrbook_is_banned(const addrbook_t *ab, const struct sockaddr *sa, int64_t now)
{
	uint8_t ip[16], il;
	uint16_t port;
	if (addr_ip(sa, ip, &il, &port))
		return 0;
	const ban_t *b = ban_find(ab, ip, il);
	return b && b->until_us > now;
}

void addrbook_ban_prune(addrbook_t *ab, int64_t now)
{
	for (size_t i = 0; i < ab->nbans;) {
		if (ab->bans[i]->until_us > now) {
			i++;
			continue;
		}
		log_info("ban on %s expired", ab->bans[i]->ip_str);
		ban_remove_at(ab, i);
	}
}

size_t addrbook_ban_count(const addrbook_t *ab)
{
	return ab->nbans;
}

const ban_t *addrbook_ban_at(const addrbook_t *ab, size_t i)
{
	return ab->bans[i];
}

void addrbook_ban_list_json(const addrbook_t *ab, int64_t now, pith_buf_t *b)
{
	int first = 1;
	pith_buf_puts(b, "[");
	for (size_t i = 0; i < ab->nbans; i++) {
		const ban_t *bn = ab->bans[i];
		if (bn->until_us <= now)
			continue;
		pith_buf_printf(b, "%s{\"ip\":", first ? "" : ",");
		first = 0;
		json_write_string(b, bn->ip_str, strlen(bn->ip_str));
		pith_buf_puts(b, ",\"reason\":");
		json_write_string(b, bn->reason, strlen(bn->reason));
		pith_buf_printf(b, ",\"remaining_s\":%lld,\"until_us\":%lld}",
				(long long)((bn->until_us - now) / 1000000), (long long)bn->until_us);
	}
	pith_buf_puts(b, "]");
}

