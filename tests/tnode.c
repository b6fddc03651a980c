/* A test node over the fake transport (tnode.h). The on_* functions
 * below are node/daemon/node.c's wiring, less what belongs to HTTP and the
 * control socket: keep them in step with it. */
#include "tnode.h"

#include <event2/event.h>
#include <event2/thread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bundle.h"
#include "idmap.h"
#include "log.h"
#include "store_test_util.h"

static tg_key_t reg, op, rogue; /* rogue: a registry key nobody trusts */
static pith_trust_t *test_trust;

const pith_trust_t *tnode_trust(void)
{
	return test_trust;
}

void tnode_global_init(void)
{
	if (sodium_init() < 0 || evthread_use_pthreads()) {
		fprintf(stderr, "cannot initialise libsodium or libevent's threads\n");
		exit(1);
	}
	idmap_init();
	log_set_level(getenv("TNODE_LOG") ? LOG_DEBUG : LOG_ERROR);
	tg_key_make(&rogue, 3, "rogue-registry", 1);
	test_trust = tg_trust_pair(&reg, &op);
	if (!test_trust) {
		fprintf(stderr, "cannot make the test trust store\n");
		exit(1);
	}
}

void tnode_global_free(void)
{
	pith_trust_free(test_trust);
	test_trust = NULL;
}

/* ---- the wiring: node/mesh/mesh.c, as node.c uses it ------------------------------------ */

static void on_ingest_done(void *arg, ingest_job_t *job)
{
	tnode_t *n = arg;
	n->jobs_done++;
	mesh_job_done(&n->mesh, job);
	ingest_job_free(job);
}

/* ---- setup ------------------------------------------------------------------------- */

int tnode_init(tnode_t *n, const char *name, const pith_trust_t *trust,
	       void (*tweak)(node_config_t *))
{
	memset(n, 0, sizeof(*n));
	config_defaults(&n->cfg);
	if (tweak)
		tweak(&n->cfg);
	n->dir = stu_tmpdir(name);
	snprintf(n->cfg.data_dir, sizeof(n->cfg.data_dir), "%s", n->dir);
	randombytes_buf(n->pk, sizeof(n->pk));
	n->trust = trust;
	if (!trust)
		return 0;
	char path[CONFIG_STR_MAX + 16];
	snprintf(path, sizeof(path), "%s/store", n->dir);
	n->store = stu_open_store(path, trust);
	return n->store ? 0 : -1;
}

int tnode_put(tnode_t *n, const uint8_t *json, size_t len)
{
	pith_event_t *ev = NULL;
	pith_err_t err = {0};
	store_outcome_t out;
	int rc = pith_event_parse(json, len, n->trust, &ev, NULL, &err);
	if (!rc)
		rc = store_event_put(n->store, ev, &out, &err);
	if (rc)
		fprintf(stderr, "tnode_put: %s\n", err.msg);
	pith_event_free(ev);
	return rc;
}

int tnode_start(tnode_t *n)
{
	wire_limits_t wlim = wire_limits_default;
	wlim.max_frame = (size_t)n->cfg.max_frame;
	wlim.max_buffer = (size_t)n->cfg.max_frame + WIRE_HEADER_LEN + (64u << 10);
	n->base = event_base_new();
	if (!n->base)
		return -1;
	net_opts_t no = {.cfg = &n->cfg, .pk = n->pk, .wlim = wlim, .stats = &n->stats};
	peer_events_t pe = mesh_peer_events(&n->mesh);
	n->net = n->mesh.net = net_new(n->base, &no, &pe);
	n->book = n->mesh.book = n->net ? addrbook_new(n->net, &n->cfg, &n->stats) : NULL;
	if (!n->book)
		return -1;
	if (!n->store)
		return 0;
	n->ingest = ingest_new(n->base, n->trust, n->store, 1, 0, (size_t)n->cfg.max_frame, NULL,
			       on_ingest_done, n);
	relay_deps_t rd = {.base = n->base, .net = n->net, .store = n->store, .ingest = n->ingest,
			   .cfg = &n->cfg, .stats = &n->stats,
			   .hooks = mesh_relay_hooks(&n->mesh)};
	n->relay = n->mesh.relay = n->ingest ? relay_new(&rd) : NULL;
	if (!n->relay)
		return -1;
	sync_deps_t sd = {.base = n->base, .net = n->net, .relay = n->relay, .book = n->book, .store = n->store,
			  .ingest = n->ingest, .cfg = &n->cfg, .stats = &n->stats};
	pith_err_t err = {0};
	if (sync_new(&sd, &n->sync, &err)) {
		fprintf(stderr, "sync_new: %s\n", err.msg);
		return -1;
	}
	sync_load_wait(n->sync); /* the cases expect the sets in place */
	n->mesh.sync = n->sync;
	net_set_hello(n->net, 7411, sync_features(n->sync), NULL);
	return 0;
}

void tnode_stop(tnode_t *n)
{
	n->mesh.stopping = 1; /* jobs handed back now are only freed, as in node.c */
	ingest_free(n->ingest);
	if (n->net) {
		net_set_shutting_down(n->net);
		for (peer_t *p = net_peers(n->net); p; p = p->next)
			if (p->state != PEER_CLOSING)
				peer_close(p, 0, "node stopped");
		net_reap(n->net, 1);
	}
	sync_free(n->sync);
	relay_free(n->relay);
	addrbook_free(n->book);
	net_free(n->net);
	if (n->base)
		event_base_free(n->base);
	store_close(n->store);
	stu_rmdir_rf(n->dir);
	n->dir = NULL;
}

int tnode_start_peers(tnode_t *n, const char *name, void (*tweak)(node_config_t *),
		      uint64_t features, peer_t **ps, size_t np)
{
	if (np > 8 || tnode_init(n, name, tnode_trust(), tweak) || tnode_start(n))
		return -1;
	for (size_t i = 0; i < np; i++) {
		char addr[32];
		snprintf(addr, sizeof(addr), "10.0.0.%zu:%zu", i + 2, 50001 + i);
		ps[i] = fake_peer_new(n->net, 0, addr, NULL, features);
		if (!ps[i] || ps[i]->state != PEER_READY || !ps[i]->relay)
			return -1;
		fake_sent_clear(ps[i]);
	}
	return 0;
}

int tnode_run_until(tnode_t *n, int (*cond)(void *), void *arg, int ms)
{
	int64_t end = node_now_us() + (int64_t)ms * 1000;
	for (;;) {
		event_base_loop(n->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		if (cond && cond(arg))
			return 1;
		if (node_now_us() >= end)
			return cond ? 0 : 1;
		usleep(500);
	}
}

void tnode_id_digest(const char *event_id, uint8_t out[32])
{
	/* "sha256:" then 64 hex digits */
	if (strncmp(event_id, "sha256:", 7) || pith_hex_decode(event_id + 7, 64, out, 32))
		memset(out, 0, 32);
}

/* ---- generated events ------------------------------------------------------------------ */

static void tevents_add(tevents_t *e, const char *event_id)
{
	tnode_id_digest(event_id, e->id[e->n]);
	e->n++;
}

void tevents_make(tevents_t *e, unsigned first, size_t nrec)
{
	static const char *const types[] = {"graph_snapshot", "author_attestation", "mirror_hint"};
	size_t cap = 4 * nrec;
	e->json = calloc(cap ? cap : 1, sizeof(*e->json));
	e->id = calloc(cap ? cap : 1, sizeof(*e->id));
	e->n = 0;
	if (!e->json || !e->id) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t r = 0; r < nrec; r++) {
		unsigned rn = first + (unsigned)r;
		char pith[PITH_NUMBER_LEN + 1], id[PITH_EVENT_ID_LEN + 1], at[32];
		pith_buf_t rec = PITH_BUF_INIT;
		tg_record(rn, &rec, pith);
		pith_buf_release(&rec);
		if (tg_event(&e->json[e->n], &reg, "record_created", pith, "record",
			     "2026-01-01T00:00:00Z", NULL, NULL, NULL, 0, (int)rn, id))
			exit(1);
		tevents_add(e, id);
		for (size_t k = 0; k < 3; k++) {
			snprintf(at, sizeof(at), "2026-0%u-%02uT%02u:%02u:00Z", (unsigned)(2 + k),
				 1 + rn % 28, (unsigned)(rn % 24), (unsigned)(rn % 60));
			if (tg_event(&e->json[e->n], k == 1 ? &op : &reg, types[k], pith, "t", at,
				     "{\"n\":1}", NULL, NULL, 0, -1, id))
				exit(1);
			tevents_add(e, id);
		}
	}
}

void tevents_free(tevents_t *e)
{
	for (size_t i = 0; i < e->n; i++)
		pith_buf_release(&e->json[i]);
	free(e->json);
	free(e->id);
	memset(e, 0, sizeof(*e));
}

/* ---- generated bundles ------------------------------------------------------------------ */

int tbundle_make(tbundle_t *b, unsigned rn, const char *built_at, int trusted)
{
	tevents_t e;
	pith_event_t *evs[4] = {0};
	pith_buf_t rec = PITH_BUF_INIT;
	json_doc_t *d = NULL;
	pith_err_t err = {0};
	int rc = -1;
	memset(b, 0, sizeof(*b));
	tg_record(rn, &rec, b->pith);
	pith_buf_release(&rec);
	tevents_make(&e, rn, 1);
	memcpy(b->ids, e.id, sizeof(b->ids));
	for (size_t i = 0; i < e.n; i++)
		if (pith_event_parse(e.json[i].data, e.json[i].len, test_trust, &evs[i], NULL, &err))
			goto done;
	if (tg_bundle(b->pith, evs, e.n, trusted ? &reg : &rogue, test_trust, built_at, &b->json,
		      &err) ||
	    json_parse(&d, b->json.data, b->json.len, NULL, &err) ||
	    pith_bundle_hash(json_doc_root(d), b->sha) || pith_time_parse(built_at, &b->built_us))
		goto done;
	rc = 0;
done:
	if (rc)
		fprintf(stderr, "tbundle_make: %s\n", err.msg);
	json_doc_free(d);
	for (size_t i = 0; i < e.n; i++)
		pith_event_free(evs[i]);
	tevents_free(&e);
	return rc;
}

void tbundle_free(tbundle_t *b)
{
	pith_buf_release(&b->json);
}

int tnode_put_bundle(tnode_t *n, const tbundle_t *b)
{
	json_doc_t *d = NULL;
	pith_err_t err = {0};
	int rc = json_parse(&d, b->json.data, b->json.len, NULL, &err);
	if (!rc)
		rc = store_bundle_put(n->store, json_doc_root(d), NULL, NULL, &err);
	if (rc)
		fprintf(stderr, "tnode_put_bundle: %s\n", err.msg);
	json_doc_free(d);
	return rc;
}
