/* pithctl show ID: a record for a person - title, authors, identifiers and
 * aliases, category and dates, events by type with signer and time, the
 * bundle's built_at, the state hash - from a store or a running node. */
#include "cli_node.h"
#include "cli_store.h"

#include <string.h>

/* The lists of the merged state's "current", in the order shown, with the
 * event type each holds. */
static const char *const lists[][2] = {
	{"record_created", "record_created"},
	{"graph_snapshots", "graph_snapshot"},
	{"author_attestations", "author_attestation"},
	{"timestamp_anchors", "timestamp_anchor"},
	{"storage_attestations", "storage_attestation"},
	{"citation_signatures", "citation_signature"},
	{"replication_records", "replication_record"},
	{"corrections", "correction"},
	{"mirror_hints", "mirror_hint"},
};
#define NLISTS (sizeof(lists) / sizeof(lists[0]))

typedef struct shown {
	const json_value_t *state, *cur, *record, *md, *source, *paper, *aliases;
	const char *pith, *built_at;
} shown_t;

static void shown_init(shown_t *s, const json_value_t *state, const char *built_at)
{
	memset(s, 0, sizeof(*s));
	s->state = state;
	s->built_at = built_at;
	s->pith = json_get_str(state, "pith_number");
	s->cur = json_get_type(state, "current", JSON_OBJECT);
	s->record = json_get_type(s->cur, "canonical_record", JSON_OBJECT);
	s->md = json_get_type(s->record, "metadata", JSON_OBJECT);
	s->source = json_get_type(s->record, "source", JSON_OBJECT);
	s->aliases = json_get_type(s->cur, "source_aliases", JSON_ARRAY);
	const json_value_t *snaps = json_get_type(s->cur, "graph_snapshots", JSON_ARRAY);
	if (snaps && snaps->len) {
		const json_value_t *p = json_get_type(snaps->u.items[snaps->len - 1], "payload", JSON_OBJECT);
		s->paper = json_get_type(json_get_type(p, "graph_snapshot", JSON_OBJECT), "paper",
					 JSON_OBJECT);
	}
}

/* The events of list i: an array, or record_created's one object. */
static size_t list_len(const shown_t *s, size_t i, const json_value_t **items)
{
	const json_value_t *v = json_get(s->cur, lists[i][0]);
	if (json_is(v, JSON_OBJECT)) {
		*items = v;
		return 1;
	}
	*items = json_is(v, JSON_ARRAY) ? v : NULL;
	return *items ? v->len : 0;
}

static const json_value_t *list_at(const json_value_t *items, size_t k)
{
	return json_is(items, JSON_OBJECT) ? items : items->u.items[k];
}

static const char *signer_of(const json_value_t *ev)
{
	const char *s = json_get_str(json_get(ev, "signer"), "signer_id");
	return s ? s : "?";
}

static const char *str_or(const char *s, const char *dflt)
{
	return s && *s ? s : dflt;
}

static void print_text(const shown_t *s)
{
	const char *title = json_get_str(s->paper, "title");
	const char *authors = json_get_str(s->paper, "authors_text");
	printf("%s  (pith:%.8s)\n", s->pith, s->pith + strlen(s->pith) - PITH_BODY_LEN);
	printf("title      %s\n", str_or(title, "(not known here: no graph snapshot)"));
	printf("authors    %s\n", str_or(authors, "(not known here)"));
	const char *kind = json_get_str(s->source, "kind"), *sid = json_get_str(s->source, "id");
	const json_value_t *ver = json_get_type(s->source, "version", JSON_INT);
	if (kind && sid)
		printf("source     %s:%s%s%s\n", kind, sid, ver ? " v" : "", ver ? ver->u.str : "");
	const char *cat = json_get_str(s->md, "primary_cat");
	const json_value_t *cc = json_get_type(s->md, "cross_cats_sorted", JSON_ARRAY);
	printf("category   %s", str_or(cat, "?"));
	for (size_t i = 0; cc && i < cc->len; i++)
		if (json_is(cc->u.items[i], JSON_STRING))
			printf("%s%s", i ? ", " : " (also ", cc->u.items[i]->u.str);
	printf("%s\n", cc && cc->len ? ")" : "");
	printf("submitted  %s\n", str_or(json_get_str(s->md, "submitted_at"), "?"));
	if (json_get_str(s->md, "license"))
		printf("license    %s\n", json_get_str(s->md, "license"));
	printf("aliases   ");
	size_t na = 0;
	for (size_t i = 0; s->aliases && i < s->aliases->len; i++) {
		const char *k = json_get_str(s->aliases->u.items[i], "alias_kind");
		const char *v = json_get_str(s->aliases->u.items[i], "alias_value");
		if (k && v)
			printf("%s%s: %s", na++ ? " · " : " ", k, v);
	}
	printf("%s\n", na ? "" : " (none listed: no bundle)");
	printf("bundle     %s\n", s->built_at ? s->built_at : "none stored (events only)");
	printf("state      %s\n", str_or(json_get_str(s->state, "state_sha256"), "?"));
	const json_value_t *ec = json_get_type(s->state, "event_count", JSON_INT);
	printf("events     %s\n", ec ? ec->u.str : "?");
	for (size_t i = 0; i < NLISTS; i++) {
		const json_value_t *items;
		size_t n = list_len(s, i, &items);
		if (!n)
			continue;
		printf("  %s (%zu)\n", lists[i][1], n);
		for (size_t k = 0; k < n; k++) {
			const json_value_t *ev = list_at(items, k);
			printf("    %s  %s  %s\n", str_or(json_get_str(ev, "created_at"), "?"), signer_of(ev),
			       str_or(json_get_str(ev, "event_id"), "?"));
		}
	}
}

static void kv_str(pith_buf_t *b, const char *k, const char *v)
{
	pith_buf_printf(b, ",\"%s\":", k);
	if (v)
		json_write_string(b, v, strlen(v));
	else
		pith_buf_puts(b, "null");
}

static void kv_raw(pith_buf_t *b, const char *k, const json_value_t *v)
{
	pith_buf_printf(b, ",\"%s\":", k);
	if (!v || json_canon_write(v, b))
		pith_buf_puts(b, "null");
}

static void print_json(const shown_t *s, pith_buf_t *b)
{
	pith_buf_puts(b, "{\"pith_number\":");
	json_write_string(b, s->pith, strlen(s->pith));
	kv_str(b, "title", json_get_str(s->paper, "title"));
	kv_str(b, "authors", json_get_str(s->paper, "authors_text"));
	kv_raw(b, "source", s->source);
	kv_str(b, "primary_cat", json_get_str(s->md, "primary_cat"));
	kv_raw(b, "cross_cats", json_get_type(s->md, "cross_cats_sorted", JSON_ARRAY));
	kv_str(b, "submitted_at", json_get_str(s->md, "submitted_at"));
	kv_raw(b, "aliases", s->aliases);
	kv_str(b, "bundle_built_at", s->built_at);
	kv_str(b, "state_sha256", json_get_str(s->state, "state_sha256"));
	kv_raw(b, "event_count", json_get(s->state, "event_count"));
	pith_buf_puts(b, ",\"events\":[");
	size_t m = 0;
	for (size_t i = 0; i < NLISTS; i++) {
		const json_value_t *items;
		size_t n = list_len(s, i, &items);
		for (size_t k = 0; k < n; k++) {
			const json_value_t *ev = list_at(items, k);
			pith_buf_puts(b, m++ ? ",{\"event_type\":" : "{\"event_type\":");
			json_write_string(b, lists[i][1], strlen(lists[i][1]));
			kv_str(b, "event_id", json_get_str(ev, "event_id"));
			kv_str(b, "created_at", json_get_str(ev, "created_at"));
			kv_str(b, "signer", signer_of(ev));
			pith_buf_puts(b, "}");
		}
	}
	pith_buf_puts(b, "]}\n");
}

/* Shows the state's bytes; built_at may be NULL. */
static int show(const cli_ctx_t *ctx, const uint8_t *state, size_t len, const char *built_at)
{
	json_doc_t *d = NULL;
	pith_err_t err = {0};
	json_limits_t lim = {CLI_MAX_INPUT, JSON_MAX_DEPTH_DEFAULT, JSON_MAX_INT_DIGITS};
	if (json_parse(&d, state, len, &lim, &err))
		return cli_fail("show", "the record's state is not JSON: %s", err.msg);
	shown_t s;
	shown_init(&s, json_doc_root(d), built_at);
	int rc = 0;
	if (!s.pith) {
		rc = cli_fail("show", "the record's state has no pith_number");
	} else if (ctx->json) {
		pith_buf_t b = PITH_BUF_INIT;
		print_json(&s, &b);
		if (b.oom || fwrite(b.data, 1, b.len, stdout) != b.len)
			rc = cli_fail("show", "cannot write to stdout");
		pith_buf_release(&b);
	} else {
		print_text(&s);
	}
	if (!rc && (fflush(stdout) || ferror(stdout)))
		rc = cli_fail("show", "cannot write to stdout");
	json_doc_free(d);
	return rc;
}

static int run_node(cli_ctx_t *ctx, const char *id)
{
	json_doc_t *doc;
	if (cli_node_query(ctx, "show", "state", id, &doc))
		return 1;
	const json_value_t *a = json_doc_root(doc);
	const char *st = json_get_str(a, "json");
	int rc = st ? show(ctx, (const uint8_t *)st, strlen(st), json_get_str(a, "built_at"))
		    : cli_fail("show", "the node's answer has no state");
	json_doc_free(doc);
	return rc;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *id = cli_first_operand(argc, argv);
	if (!id)
		return cli_fail("show", "missing ID");
	if (ctx->node_sock)
		return run_node(ctx, id);
	pith_trust_t *trust;
	store_t *st;
	if (cli_store_open(ctx, "show", 0, &trust, &st))
		return 1;
	char pith[PITH_NUMBER_LEN + 1];
	pith_buf_t b = PITH_BUF_INIT;
	pith_err_t err = {0};
	char built[STORE_BUILT_AT_MAX + 1];
	int rc = cli_store_resolve(st, "show", id, pith);
	if (!rc && store_state_get(st, pith, &b, &err))
		rc = cli_fail("show", "%s", err.msg);
	if (!rc)
		rc = show(ctx, b.data, b.len, store_built_at_get(st, pith, built, NULL) ? NULL : built);
	pith_buf_release(&b);
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_show = {
	"show", "a record for a person: title, authors, ids, dates, events",
	"usage: pithctl --store DIR show [--json] ID\n"
	"       pithctl --node SOCKET show [--json] ID\n\n"
	"The record ID names (any form: pith number, short number, arXiv id or\n"
	"URL, DOI) as this store knows it: title and authors (from the newest\n"
	"graph snapshot), source, category and dates (from the canonical record),\n"
	"aliases, the newest stored bundle's built_at, the merged state's hash\n"
	"and event count, and every applied event by type with its time, signer\n"
	"and id. --json: one object with the same.\n",
	run,
};
