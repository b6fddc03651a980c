/* pith-open-graph-merge-v1. The rules, numbered as in docs/merge.md:
 *
 *  M1 events are a set: one per event_id, in (created_at, event_id) order;
 *  M2 an event is invalid (authentic but semantically wrong) when its
 *     subject differs, its type is unknown, its target is wrong for the
 *     type, or a record_created carries a bad record hash, pith number or
 *     receipt;
 *  M3 a valid event S supersedes the valid events named in S.supersedes
 *     that come before S, when S has the same signer or is signed by the
 *     registry key; superseded events leave current;
 *  M4 the remaining valid events that claim one slot conflict: the slot
 *     of record_created is the record itself; the slot of other events is
 *     (event_type, signer, target, prev_event). The first in order is
 *     applied, the rest are listed as an equivocation;
 *  M5 current lists are projections in (created_at, event_id) order;
 *  M6 aliases are the newest verified bundle's, as given by the caller.
 */
#include "merge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

static const struct {
	const char *type;
	const char *list; /* member of current */
	const char *target; /* required target, or NULL for any */
} kinds[] = {
	{"record_created", "record_created", "record"},
	{"graph_snapshot", "graph_snapshots", "graph"},
	{"author_attestation", "author_attestations", NULL},
	{"timestamp_anchor", "timestamp_anchors", NULL},
	{"storage_attestation", "storage_attestations", NULL},
	{"citation_signature", "citation_signatures", NULL},
	{"replication_record", "replication_records", NULL},
	{"correction", "corrections", NULL},
	{"mirror_hint", "mirror_hints", NULL},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* current's members in the order the registry lists them (the canonical
 * writer sorts them anyway). */
static const char *const current_lists[] = {
	"graph_snapshots", "author_attestations", "timestamp_anchors",
	"storage_attestations", "citation_signatures", "replication_records",
	"corrections", "mirror_hints",
};

static int kind_index(const char *type)
{
	for (size_t i = 0; i < NKINDS; i++)
		if (!strcmp(kinds[i].type, type))
			return (int)i;
	return -1;
}

const char *pith_merge_list_for_type(const char *event_type)
{
	int k = kind_index(event_type);
	return k < 0 ? NULL : kinds[k].list;
}

int pith_merge_sigblock_cmp(const json_value_t *a, const json_value_t *b)
{
	pith_buf_t x = PITH_BUF_INIT, y = PITH_BUF_INIT;
	json_canon_write(a, &x);
	json_canon_write(b, &y);
	size_t n = x.len < y.len ? x.len : y.len;
	int c = n ? memcmp(x.data, y.data, n) : 0;
	if (!c)
		c = (x.len > y.len) - (x.len < y.len);
	pith_buf_release(&x);
	pith_buf_release(&y);
	return c;
}

typedef enum { EV_APPLIED, EV_INVALID, EV_SUPERSEDED, EV_EQUIVOCATION } ev_fate_t;

typedef struct item {
	pith_event_t *ev;
	int kind;
	ev_fate_t fate;
	const char *reason; /* EV_INVALID */
	char slot[400];
} item_t;

static int item_cmp(const void *a, const void *b)
{
	const item_t *x = a, *y = b;
	int c = strcmp(x->ev->created_at, y->ev->created_at);
	return c ? c : strcmp(x->ev->event_id, y->ev->event_id);
}

static int slot_cmp(const void *a, const void *b)
{
	const item_t *x = *(const item_t *const *)a, *y = *(const item_t *const *)b;
	int c = strcmp(x->slot, y->slot);
	return c ? c : item_cmp(x, y);
}

static const char *semantic_check(const item_t *it, const char *subject,
				  const pith_trust_t *registry)
{
	const pith_event_t *ev = it->ev;
	if (strcmp(ev->subject, subject))
		return "subject_mismatch";
	if (it->kind < 0)
		return "unknown_event_type";
	if (kinds[it->kind].target && strcmp(ev->target, kinds[it->kind].target))
		return "wrong_target";
	const json_value_t *payload = json_get(ev->root, "payload");
	if (!strcmp(ev->event_type, "graph_snapshot")) {
		if (!json_get_type(payload, "graph_snapshot", JSON_OBJECT))
			return "bad_payload";
	} else if (!strcmp(ev->event_type, "record_created")) {
		const json_value_t *rec = json_get_type(payload, "canonical_record", JSON_OBJECT);
		const char *claimed = json_get_str(payload, "canonical_sha256");
		uint8_t d[32];
		char hb[65], pb[PITH_NUMBER_LEN + 1];
		const char *hex = ev->rec_hex, *pith = ev->rec_pith;
		if (!rec || !claimed)
			return "bad_payload";
		if (!hex[0]) { /* not computed ahead (pith_event_t) */
			if (pith_record_identify(rec, d, hb, pb, NULL))
				return "bad_record";
			hex = hb;
			pith = pb;
		}
		if (strcmp(hex, claimed))
			return "record_hash_mismatch";
		if (strcmp(pith, subject))
			return "pith_number_mismatch";
		if (pith_receipt_verify(json_get(payload, "receipt"), hex, registry, NULL))
			return "bad_receipt";
	}
	return NULL;
}

static const char *registry_fp(void)
{
	static __thread char fp[PITH_FP_LEN + 1];
	if (!fp[0]) {
		uint8_t pk[32];
		pith_hex_decode(PITH_REGISTRY_KEY_HEX, 64, pk, 32);
		pith_key_fingerprint(pk, fp);
	}
	return fp;
}

static int byid_cmp(const void *a, const void *b)
{
	const item_t *x = *(item_t *const *)a, *y = *(item_t *const *)b;
	return strcmp(x->ev->event_id, y->ev->event_id);
}

static int byid_key_cmp(const void *key, const void *elem)
{
	return strcmp(key, (*(item_t *const *)elem)->ev->event_id);
}

/* The item with this id among byid (the items sorted by id), or NULL. */
static item_t *find_item(item_t **byid, size_t n, const char *id)
{
	item_t **p = bsearch(id, byid, n, sizeof(*byid), byid_key_cmp);
	return p ? *p : NULL;
}

/* {event_id, target, created_at, signer, payload} of an event. */
static json_value_t *projection(json_doc_t *d, const pith_event_t *ev)
{
	json_value_t *o = json_new_object(d);
	if (!o)
		return NULL;
	int rc = json_object_set(d, o, "event_id", json_new_string(d, ev->event_id));
	rc = rc || json_object_set(d, o, "target", json_new_string(d, ev->target));
	rc = rc || json_object_set(d, o, "created_at", json_new_string(d, ev->created_at));
	rc = rc || json_object_set(d, o, "signer", json_clone(d, json_get(ev->root, "signer")));
	rc = rc || json_object_set(d, o, "payload", json_clone(d, json_get(ev->root, "payload")));
	return rc ? NULL : o;
}

static int str_ptr_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static json_value_t *sorted_id_array(json_doc_t *d, const char **ids, size_t n)
{
	qsort(ids, n, sizeof(*ids), str_ptr_cmp);
	json_value_t *a = json_new_array(d);
	for (size_t i = 0; a && i < n; i++)
		if (json_array_push(d, a, json_new_string(d, ids[i])))
			return NULL;
	return a;
}

int pith_merge(const char *subject, pith_event_t *const *events, size_t n,
	       const json_value_t *aliases, pith_state_t *out, pith_err_t *err)
{
	return pith_merge_ex(subject, events, n, aliases, NULL, out, err);
}

int pith_merge_ex(const char *subject, pith_event_t *const *events, size_t n,
		  const json_value_t *aliases, const pith_trust_t *registry,
		  pith_state_t *out, pith_err_t *err)
{
	memset(out, 0, sizeof(*out));
	item_t *items = calloc(n ? n : 1, sizeof(*items));
	item_t **byslot = calloc(n ? n : 1, sizeof(*byslot));
	item_t **byid = calloc(n ? n : 1, sizeof(*byid));
	const char **ids = calloc(n ? n : 1, sizeof(*ids));
	json_doc_t *d = json_doc_new();
	int rc = PITH_ENOMEM;
	if (!items || !byslot || !byid || !ids || !d)
		goto fail;

	/* M1 */
	for (size_t i = 0; i < n; i++)
		items[i].ev = events[i];
	qsort(items, n, sizeof(*items), item_cmp);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (m == 0 || strcmp(items[m - 1].ev->event_id, items[i].ev->event_id))
			items[m++] = items[i];
	/* M2 */
	for (size_t i = 0; i < m; i++) {
		items[i].kind = kind_index(items[i].ev->event_type);
		items[i].reason = semantic_check(&items[i], subject, registry);
		items[i].fate = items[i].reason ? EV_INVALID : EV_APPLIED;
	}
	/* M3: by id in O(log m), so that a record of many events each naming
	 * up to 64 others does not cost m * 64 * m; the index is built only
	 * when some event names any */
	int indexed = 0;
	for (size_t i = 0; i < m; i++) {
		const json_value_t *sup = json_get(items[i].ev->root, "supersedes");
		if (items[i].fate == EV_INVALID || !sup || !sup->len)
			continue;
		if (!indexed) {
			for (size_t j = 0; j < m; j++)
				byid[j] = &items[j];
			qsort(byid, m, sizeof(*byid), byid_cmp);
			indexed = 1;
		}
		const char *sfp = items[i].ev->signer_fp;
		/* by fingerprint, any entry (K-ROLE): not the first one
		 * listed, which would make the state depend on the order of
		 * --trust-key */
		int by_registry = !strcmp(sfp, registry_fp()) ||
				  (registry && pith_trust_fp_is_registry(registry, sfp));
		for (size_t k = 0; k < sup->len; k++) {
			item_t *x = find_item(byid, m, sup->u.items[k]->u.str);
			if (!x || x >= &items[i] || x->fate == EV_INVALID)
				continue;
			if (by_registry || !strcmp(x->ev->signer_fp, items[i].ev->signer_fp))
				x->fate = EV_SUPERSEDED;
		}
	}
	/* M4 */
	size_t ns = 0;
	for (size_t i = 0; i < m; i++) {
		item_t *it = &items[i];
		if (it->fate != EV_APPLIED)
			continue;
		const json_value_t *prev = json_get(it->ev->root, "prev_event");
		if (!strcmp(it->ev->event_type, "record_created"))
			snprintf(it->slot, sizeof(it->slot), "record_created");
		else
			snprintf(it->slot, sizeof(it->slot), "%s\x1f%s\x1f%s\x1f%s",
				 it->ev->event_type, it->ev->signer_fp, it->ev->target,
				 json_is(prev, JSON_STRING) ? prev->u.str : "null");
		byslot[ns++] = it;
	}
	qsort(byslot, ns, sizeof(*byslot), slot_cmp);
	json_value_t *equivs = json_new_array(d);
	if (!equivs)
		goto fail;
	for (size_t i = 0; i < ns;) {
		size_t j = i + 1;
		while (j < ns && !strcmp(byslot[j]->slot, byslot[i]->slot))
			j++;
		if (j - i > 1) {
			const pith_event_t *w = byslot[i]->ev;
			const json_value_t *prev = json_get(w->root, "prev_event");
			int single = !strcmp(w->event_type, "record_created");
			json_value_t *e = json_new_object(d);
			size_t nr = 0;
			for (size_t k = i + 1; k < j; k++) {
				byslot[k]->fate = EV_EQUIVOCATION;
				ids[nr++] = byslot[k]->ev->event_id;
			}
			rc = !e;
			rc = rc || json_object_set(d, e, "event_type", json_new_string(d, w->event_type));
			rc = rc || json_object_set(d, e, "signer_fingerprint",
						   single ? json_new_null(d) : json_new_string(d, w->signer_fp));
			rc = rc || json_object_set(d, e, "target", json_new_string(d, w->target));
			rc = rc || json_object_set(d, e, "prev_event",
						   single ? json_new_null(d) : json_clone(d, prev));
			rc = rc || json_object_set(d, e, "applied_event_id", json_new_string(d, w->event_id));
			rc = rc || json_object_set(d, e, "rejected_event_ids", sorted_id_array(d, ids, nr));
			rc = rc || json_array_push(d, equivs, e);
			if (rc) {
				rc = PITH_ENOMEM;
				goto fail;
			}
			out->equivocations++;
		}
		i = j;
	}

	/* M5: build the state */
	json_value_t *cur = json_new_object(d);
	json_value_t *lists[sizeof(current_lists) / sizeof(current_lists[0])];
	json_value_t *record_created = NULL;
	rc = PITH_ENOMEM;
	if (!cur)
		goto fail;
	for (size_t k = 0; k < sizeof(current_lists) / sizeof(current_lists[0]); k++)
		if (!(lists[k] = json_new_array(d)) ||
		    json_object_set(d, cur, current_lists[k], lists[k]))
			goto fail;
	json_value_t *invalid = json_new_array(d);
	if (!invalid)
		goto fail;
	size_t napplied = 0, nsup = 0;
	for (size_t i = 0; i < m; i++) {
		item_t *it = &items[i];
		if (it->fate == EV_INVALID) {
			json_value_t *e = json_new_object(d);
			if (!e || json_object_set(d, e, "event_id", json_new_string(d, it->ev->event_id)) ||
			    json_object_set(d, e, "reason", json_new_string(d, it->reason)) ||
			    json_array_push(d, invalid, e))
				goto fail;
			out->invalid++;
			continue;
		}
		if (it->fate == EV_SUPERSEDED) {
			nsup++;
			continue;
		}
		if (it->fate != EV_APPLIED)
			continue;
		napplied++;
		json_value_t *p = projection(d, it->ev);
		if (!p)
			goto fail;
		if (!strcmp(kinds[it->kind].list, "record_created")) {
			record_created = p;
			continue;
		}
		for (size_t k = 0; k < sizeof(current_lists) / sizeof(current_lists[0]); k++)
			if (!strcmp(current_lists[k], kinds[it->kind].list) &&
			    json_array_push(d, lists[k], p))
				goto fail;
	}
	/* invalid_events in event_id order, like applied_event_ids */
	{
		size_t ni = invalid->len;
		for (size_t a = 1; a < ni; a++)
			for (size_t b = a; b > 0 &&
			     strcmp(json_get_str(invalid->u.items[b - 1], "event_id"),
				    json_get_str(invalid->u.items[b], "event_id")) > 0; b--) {
				json_value_t *t = invalid->u.items[b];
				invalid->u.items[b] = invalid->u.items[b - 1];
				invalid->u.items[b - 1] = t;
			}
	}
	const json_value_t *rec = record_created
		? json_get(json_get(record_created, "payload"), "canonical_record") : NULL;
	if (json_object_set(d, cur, "record_created", record_created ? record_created : json_new_null(d)) ||
	    json_object_set(d, cur, "canonical_record", rec ? (json_value_t *)rec : json_new_null(d)) ||
	    json_object_set(d, cur, "source_aliases",
			    aliases ? json_clone(d, aliases) : json_new_array(d)))
		goto fail;

	size_t k = 0;
	for (size_t i = 0; i < m; i++)
		if (items[i].fate == EV_APPLIED)
			ids[k++] = items[i].ev->event_id;
	json_value_t *applied = sorted_id_array(d, ids, k);
	k = 0;
	for (size_t i = 0; i < m; i++)
		if (items[i].fate == EV_SUPERSEDED)
			ids[k++] = items[i].ev->event_id;
	json_value_t *superseded = nsup ? sorted_id_array(d, ids, k) : NULL;

	json_value_t *st = json_new_object(d);
	rc = !st || !applied || (nsup && !superseded);
	rc = rc || json_object_set(d, st, "state_type", json_new_string(d, "pith_open_graph_state"));
	rc = rc || json_object_set(d, st, "state_version", json_new_string(d, "1.0"));
	rc = rc || json_object_set(d, st, "pith_number", json_new_string(d, subject));
	rc = rc || json_object_set(d, st, "merge_version", json_new_string(d, PITH_MERGE_VERSION));
	rc = rc || json_object_set(d, st, "event_count", json_new_int(d, (int64_t)m));
	rc = rc || json_object_set(d, st, "valid_event_count", json_new_int(d, (int64_t)(m - out->invalid)));
	rc = rc || json_object_set(d, st, "invalid_event_count", json_new_int(d, (int64_t)out->invalid));
	rc = rc || json_object_set(d, st, "equivocation_count", json_new_int(d, (int64_t)out->equivocations));
	rc = rc || json_object_set(d, st, "current", cur);
	rc = rc || json_object_set(d, st, "equivocations", equivs);
	rc = rc || json_object_set(d, st, "invalid_events", invalid);
	rc = rc || json_object_set(d, st, "applied_event_ids", applied);
	/* only present when non-empty, so published states stay byte-identical */
	if (superseded)
		rc = rc || json_object_set(d, st, "superseded_event_ids", superseded);
	if (rc) {
		rc = PITH_ENOMEM;
		goto fail;
	}
	/* the hash is over the state without state_sha256; the canonical
	 * bytes with it are those with the member put in its place */
	pith_buf_t *b = &out->canon;
	size_t at;
	*b = (pith_buf_t)PITH_BUF_INIT;
	if (json_canon_write_at(st, "state_sha256", b, &at))
		goto fail;
	pith_sha256(b->data, b->len, out->state_hash);
	pith_hex_encode(out->state_hash, 32, out->state_sha256);
	char member[16 + 64 + 4];
	int last = b->data[at] == '}', alone = last && b->data[at - 1] == '{';
	int ml = snprintf(member, sizeof(member), "%s\"state_sha256\":\"%s\"%s",
			  last && !alone ? "," : "", out->state_sha256, last ? "" : ",");
	if (pith_buf_insert(b, at, member, (size_t)ml) ||
	    json_object_set(d, st, "state_sha256", json_new_string(d, out->state_sha256)))
		goto fail;
	json_doc_set_root(d, st);
	out->doc = d;
	out->root = st;
	out->applied = napplied;
	out->superseded = nsup;
	free(items);
	free(byslot);
	free(byid);
	free(ids);
	return 0;
fail:
	json_doc_free(d);
	pith_buf_release(&out->canon);
	free(items);
	free(byslot);
	free(byid);
	free(ids);
	memset(out, 0, sizeof(*out));
	return pith_err_set(err, rc ? rc : PITH_ENOMEM, "merge: out of memory");
}

void pith_state_release(pith_state_t *st)
{
	json_doc_free(st->doc);
	pith_buf_release(&st->canon);
	memset(st, 0, sizeof(*st));
}

int pith_state_canon(const pith_state_t *st, pith_buf_t *out)
{
	return pith_buf_append(out, st->canon.data, st->canon.len);
}
