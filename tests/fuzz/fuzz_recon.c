/* libFuzzer harness for set reconciliation: recon_respond, the very
 * function the node calls on every reconciliation message from a peer.
 *
 * The first input byte picks a scenario (bits 0-1) and, for 2 and 3, the
 * message version our side speaks (bit 2 set: 1, else 2; a responder
 * always accepts both, as a node does):
 *   0  the rest is one first message to a fresh responder;
 *   1  the rest is a sequence of messages (2-byte big-endian length, then
 *      bytes) to one responder;
 *   2  the same, to an initiator that has sent its first message;
 *   3  no hostile bytes: the input seeds two honest sets that reconcile,
 *      and both must learn exactly their differences.
 * Invariants, for every message: the call returns 0 or a parse/limit error
 * with a "recon: " message; errors are sticky; an answer never exceeds the
 * message limit; and every answer we produce parses cleanly at a peer
 * (our own output is never malformed). Any broken invariant aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "recon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t mix(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void make_item(recon_item_t *it, uint64_t i)
{
	uint64_t st = i * 7919 + 1;
	it->ts = UINT64_C(1700000000000000) + (i / 3) * 1000; /* triples share a ts */
	for (int k = 0; k < 32; k += 8) {
		uint64_t v = mix(&st);
		memcpy(it->id + k, &v, 8);
	}
	it->id[0] = (uint8_t)(i % 3); /* ...and are ordered by id within it */
}

static recon_set_t *set_resp, *set_init;
static recon_config_t cfg;
static const uint8_t fuzz_key[RECON_KEY_LEN] = "pith-fuzz-key-01";

/* The responder holds items 0..2999; the initiator lacks every 7th of
 * them and has 100 more. Built once. */
static void setup(void)
{
	if (set_resp)
		return;
	recon_config_default(&cfg);
	cfg.max_msg_bytes = 64 << 10;
	cfg.max_ranges = 4096;
	cfg.max_work = 200000;
	cfg.max_rounds = 64;
	set_resp = recon_set_new();
	set_init = recon_set_new();
	FUZZ_CHECK(set_resp && set_init);
	for (uint64_t i = 0; i < 3100; i++) {
		recon_item_t it;
		make_item(&it, i);
		if (i < 3000)
			FUZZ_CHECK(recon_set_add(set_resp, it.ts, it.id) == 0);
		if (i % 7 != 0)
			FUZZ_CHECK(recon_set_add(set_init, it.ts, it.id) == 0);
	}
}

/* Our answer must parse at a peer: an initiator over set_init that has
 * sent its first message and now reads out. (Limits and the peer's state
 * may still stop it; malformed output may not.) */
static void check_output_parses(const pith_buf_t *out, uint32_t version)
{
	if (out->len == 0)
		return;
	pith_err_t err = {0};
	pith_buf_t first = PITH_BUF_INIT, ans = PITH_BUF_INIT;
	recon_config_t pc = cfg;
	pc.version = version;
	recon_session_t *peer = recon_session_new(set_init, RECON_INITIATOR, &pc, fuzz_key, &err);
	FUZZ_CHECK(peer);
	FUZZ_CHECK(recon_initiate(peer, &first, &err) == 0);
	int rc = recon_respond(peer, out->data, out->len, &ans, NULL, NULL, &err);
	if (rc)
		fprintf(stderr, "fuzz_recon: our own answer refused: %s\n", err.msg);
	FUZZ_CHECK(rc == 0);
	recon_session_free(peer);
	pith_buf_release(&first);
	pith_buf_release(&ans);
}

/* Feeds one message; checks the invariants. Returns the code. */
static int feed(recon_session_t *s, const uint8_t *msg, size_t len, int expect_sticky)
{
	pith_err_t err = {0};
	pith_buf_t out = PITH_BUF_INIT;
	recon_ids_t have = RECON_IDS_INIT, need = RECON_IDS_INIT;
	int before = recon_session_error(s);
	int rc = recon_respond(s, msg, len, &out, &have, &need, &err);
	if (rc) {
		FUZZ_CHECK(rc == PITH_EINVAL || rc == PITH_ETRUNC || rc == PITH_ETOOBIG);
		FUZZ_CHECK(strncmp(err.msg, "recon: ", 7) == 0);
		FUZZ_CHECK(recon_session_error(s) == rc);
		if (before)
			FUZZ_CHECK(rc == before);
	} else {
		FUZZ_CHECK(!expect_sticky);
		FUZZ_CHECK(out.len <= cfg.max_msg_bytes);
		/* ids are learnt only from what the message carried */
		FUZZ_CHECK(need.n * RECON_ID_LEN <= len);
		recon_stats_t st;
		recon_session_stats(s, &st);
		FUZZ_CHECK(st.version == RECON_VERSION || st.version == RECON_VERSION_2);
		check_output_parses(&out, st.version);
	}
	recon_ids_release(&have);
	recon_ids_release(&need);
	pith_buf_release(&out);
	return rc;
}

static void feed_sequence(recon_session_t *s, const uint8_t *p, size_t n)
{
	int failed = 0;
	while (n >= 2) {
		size_t len = (size_t)p[0] << 8 | p[1];
		p += 2;
		n -= 2;
		if (len > n)
			len = n;
		if (feed(s, p, len, failed))
			failed = 1;
		p += len;
		n -= len;
	}
}

/* need and want hold the same ids, ignoring repeats in need. */
static int ids_cover(const recon_ids_t *need, uint8_t (*want)[32], size_t nw)
{
	for (size_t i = 0; i < need->n; i++) {
		int found = 0;
		for (size_t k = 0; k < nw && !found; k++)
			found = memcmp(need->ids[i], want[k], 32) == 0;
		if (!found)
			return 0;
	}
	for (size_t k = 0; k < nw; k++) {
		int found = 0;
		for (size_t i = 0; i < need->n && !found; i++)
			found = memcmp(need->ids[i], want[k], 32) == 0;
		if (!found)
			return 0;
	}
	return 1;
}

/* Honest exchange between two sets derived from the input. */
static void honest(const uint8_t *p, size_t n, uint32_t version)
{
	uint64_t st = 0;
	for (size_t i = 0; i < n && i < 16; i++)
		st = st * 131 + p[i];
	size_t total = (size_t)(mix(&st) % 2500);
	unsigned ts_span = 1 + (unsigned)(mix(&st) % 4000);
	unsigned pa = (unsigned)(mix(&st) % 100), pb = (unsigned)(mix(&st) % 100);
	recon_set_t *a = recon_set_new(), *b = recon_set_new();
	uint8_t (*only_a)[32] = malloc((total + 1) * 32), (*only_b)[32] = malloc((total + 1) * 32);
	size_t na = 0, nb = 0;
	for (size_t i = 0; i < total; i++) {
		recon_item_t it;
		it.ts = mix(&st) % ts_span;
		for (int k = 0; k < 32; k += 8) {
			uint64_t v = mix(&st);
			memcpy(it.id + k, &v, 8);
		}
		unsigned r = (unsigned)(mix(&st) % 100);
		int in_a = r >= pa / 2, in_b = r < 100 - pb / 2;
		if (!in_a && !in_b)
			in_a = in_b = 1;
		if (in_a && recon_set_add(a, it.ts, it.id) == 0 && !in_b)
			memcpy(only_a[na++], it.id, 32);
		if (in_b && recon_set_add(b, it.ts, it.id) == 0 && !in_a)
			memcpy(only_b[nb++], it.id, 32);
	}
	pith_err_t err = {0};
	recon_config_t ca = cfg;
	ca.version = version;
	recon_session_t *sa = recon_session_new(a, RECON_INITIATOR, &ca, NULL, &err);
	recon_session_t *sb = recon_session_new(b, RECON_RESPONDER, &cfg, NULL, &err);
	pith_buf_t m1 = PITH_BUF_INIT, m2 = PITH_BUF_INIT;
	recon_ids_t need_a = RECON_IDS_INIT, need_b = RECON_IDS_INIT;
	FUZZ_CHECK(recon_initiate(sa, &m1, &err) == 0);
	for (;;) {
		FUZZ_CHECK(recon_respond(sb, m1.data, m1.len, &m2, NULL, &need_b, &err) == 0);
		if (!m2.len)
			break;
		FUZZ_CHECK(recon_respond(sa, m2.data, m2.len, &m1, NULL, &need_a, &err) == 0);
		if (!m1.len)
			break;
	}
	FUZZ_CHECK(recon_session_is_done(sa) && recon_session_is_done(sb));
	/* the same id may be reported twice (after a deferral), so compare
	 * as sets: every id learnt is one the other side alone has, and
	 * every such id is learnt */
	FUZZ_CHECK(ids_cover(&need_a, only_b, nb) && ids_cover(&need_b, only_a, na));
	recon_ids_release(&need_a);
	recon_ids_release(&need_b);
	pith_buf_release(&m1);
	pith_buf_release(&m2);
	recon_session_free(sa);
	recon_session_free(sb);
	recon_set_free(a);
	recon_set_free(b);
	free(only_a);
	free(only_b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	if (size == 0)
		return 0;
	pith_err_t err = {0};
	recon_session_t *s;
	recon_config_t ic = cfg;
	ic.version = data[0] & 4 ? RECON_VERSION : RECON_VERSION_2;
	switch (data[0] & 3) {
	case 0:
		s = recon_session_new(set_resp, RECON_RESPONDER, &cfg, NULL, &err);
		FUZZ_CHECK(s);
		feed(s, data + 1, size - 1, 0);
		recon_session_free(s);
		break;
	case 1:
		s = recon_session_new(set_resp, RECON_RESPONDER, &cfg, NULL, &err);
		FUZZ_CHECK(s);
		feed_sequence(s, data + 1, size - 1);
		recon_session_free(s);
		break;
	case 2: {
		pith_buf_t first = PITH_BUF_INIT;
		s = recon_session_new(set_init, RECON_INITIATOR, &ic, fuzz_key, &err);
		FUZZ_CHECK(s);
		FUZZ_CHECK(recon_initiate(s, &first, &err) == 0);
		feed_sequence(s, data + 1, size - 1);
		recon_session_free(s);
		pith_buf_release(&first);
		break;
	}
	default:
		honest(data + 1, size - 1, ic.version);
		break;
	}
	return 0;
}
