/* Validation of one ingest job, on whichever thread runs it: a validator
 * of the pipeline, or the submitter helping while it waits. The one copy
 * of the checks pithd and `pithctl import` apply before the store sees
 * an item: parse, hashes, event id, trust, Ed25519 (batched), canonical
 * bytes, the receipt precheck; bundles with every bundle check. */
#define _GNU_SOURCE /* memmem */
#include "ingest_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

/* The loop makes a job for every event a peer sends (a catch-up: tens of
 * thousands a second) and frees it when the job comes back from the
 * writer, a commit's worth at once. Two mallocs and two frees an event, of
 * sizes that vary with the event, kept the loop in glibc's bins for 18% of
 * its time (docs/performance.md at 262f3c4, issue 17, session 33): a job
 * and its bytes are one block, and blocks of the one size that holds INGEST_JOB_INLINE
 * bytes (the registry's events are 0.9-1.9 KB) are kept for reuse by the
 * thread that freed them. */
typedef struct job_cache {
	ingest_job_t *head; /* linked through next */
	size_t n;
} job_cache_t;

static __thread job_cache_t job_cache;

ingest_job_t *ingest_job_new(ingest_kind_t kind, const uint8_t *bytes, size_t len)
{
	int small = len <= INGEST_JOB_INLINE;
	ingest_job_t *j = NULL;
	if (small && job_cache.head) {
		j = job_cache.head;
		job_cache.head = j->next;
		job_cache.n--;
	} else {
		j = malloc(sizeof(*j) + (small ? INGEST_JOB_INLINE : len ? len : 1));
		if (!j)
			return NULL;
	}
	uint8_t *copy = (uint8_t *)(j + 1);
	memcpy(copy, bytes, len);
	ingest_job_init(j, kind, copy, len);
	j->block = small;
	return j;
}

void ingest_job_cache_release(void)
{
	while (job_cache.head) {
		ingest_job_t *j = job_cache.head;
		job_cache.head = j->next;
		free(j);
	}
	job_cache.n = 0;
}

void ingest_job_init(ingest_job_t *j, ingest_kind_t kind, uint8_t *bytes, size_t len)
{
	memset(j, 0, sizeof(*j));
	j->kind = kind;
	j->bytes = bytes;
	j->len = len;
}

void ingest_job_clear(ingest_job_t *j)
{
	free(j->event_ids);
	free(j->event_created_us);
	j->event_ids = NULL;
	j->event_created_us = NULL;
	pith_event_free(j->ev);
	pith_buf_release(&j->canon);
	json_doc_free(j->doc);
}

void ingest_job_free_(ingest_job_t *j)
{
	if (!j)
		return;
	ingest_job_clear(j);
	if (j->block && job_cache.n < INGEST_JOB_CACHE_MAX) {
		j->next = job_cache.head;
		job_cache.head = j;
		job_cache.n++;
		return;
	}
	free(j);
}

/* The node's name of a failure (relay.c, control.c, http_post.c, metrics). */
static const char *fail_reason(ingest_fail_t fail, pith_event_check_t c)
{
	switch (fail) {
	case INGEST_FAIL_NONE: return NULL;
	case INGEST_FAIL_JSON: return "json";
	case INGEST_FAIL_TOO_BIG: return "too_big";
	case INGEST_FAIL_NOT_BUNDLE: return "not_a_bundle";
	case INGEST_FAIL_BUNDLE: return "bundle";
	case INGEST_FAIL_UNTRUSTED: return "untrusted_key";
	case INGEST_FAIL_SHAPE: return "shape";
	case INGEST_FAIL_ID_MISMATCH: return "id_mismatch";
	case INGEST_FAIL_OOM: return "oom";
	case INGEST_FAIL_STORE: case INGEST_FAIL_COMMIT: return "store";
	case INGEST_FAIL_SHUTDOWN: return "shutdown";
	case INGEST_FAIL_CHECK: break;
	}
	switch (c) {
	case PITH_CHECK_JSON: return "json";
	case PITH_CHECK_SHAPE: return "shape";
	case PITH_CHECK_CONTENT_HASH: return "content_hash";
	case PITH_CHECK_EVENT_ID: return "event_id";
	case PITH_CHECK_KEY: return "untrusted_key";
	case PITH_CHECK_ROTATED: return "rotated_key";
	case PITH_CHECK_SIGNATURE: return "signature";
	default: return "invalid";
	}
}

void ingest_job_reject(ingest_job_t *j, ingest_fail_t fail, int rc, const char *msg)
{
	j->rc = rc ? rc : PITH_EINVAL;
	j->fail = fail;
	j->reason = fail_reason(fail, j->check);
	snprintf(j->msg, sizeof(j->msg), "%s", msg);
}

static void reject_check(ingest_job_t *j, pith_event_check_t failed, int rc, const char *msg)
{
	j->check = failed;
	ingest_job_reject(j, INGEST_FAIL_CHECK, rc, msg);
}

/* Bytes of an item read to tell what other document it is. */
#define INGEST_OTHER_DOC_MAX (16u << 20)

/* ---- documents that are neither ----------------------------------------------- */

/* An item that failed as an event may be another document people fetch
 * from a mirror or the registry and hand to an import: say what it is and
 * what to import instead. 1 after rejecting j with that, else 0. Runs only
 * on items already refused, so it costs nothing on the good path. */
static int reject_other_doc(ingest_job_t *j)
{
	json_doc_t *d = NULL;
	json_limits_t lim = {INGEST_OTHER_DOC_MAX, PITH_BUNDLE_MAX_DEPTH, JSON_MAX_INT_DIGITS};
	if (json_parse(&d, j->bytes, j->len, &lim, NULL))
		return 0;
	const json_value_t *root = json_doc_root(d);
	const char *m = NULL;
	switch (pith_doc_kind(root)) {
	case PITH_DOC_RECORD:
		m = "this is a registry record view (/pith/{ID}.json), not an event or a bundle: import "
		    "the record's bundle instead (/pith/{ID}/bundle.json, or `pithctl pull ID`)";
		break;
	case PITH_DOC_STATE:
		m = "this is a merged state (/pith/{ID}/state.json), not an event or a bundle: import "
		    "the record's bundle instead (/pith/{ID}/bundle.json, or `pithctl pull ID`)";
		break;
	case PITH_DOC_RECEIPT:
		m = "this is a receipt, not an event or a bundle: import the record's bundle instead "
		    "(/pith/{ID}/bundle.json)";
		break;
	default:
		if (json_get_type(root, "events", JSON_ARRAY) && json_get(root, "event_count"))
			m = "this is an events.json page, not an event: import its events as JSON Lines "
			    "(jq -c '.events[]' FILE > events.jsonl)";
		break;
	}
	json_doc_free(d);
	if (!m)
		return 0;
	j->rc = 0;
	j->fail = 0;
	ingest_job_reject(j, INGEST_FAIL_SHAPE, PITH_EINVAL, m);
	return 1;
}

/* ---- events ------------------------------------------------------------------ */

/* Parses and checks an event but its signature, which it prepares in
 * *sc. 1 when the signature is left to check, 0 when the job is done
 * (rejected). */
static int event_begin(ingest_job_t *j, const pith_trust_t *trust, pith_sig_check_t *sc)
{
	pith_err_t err = {0};
	pith_event_check_t failed = PITH_CHECK_OK;
	if (j->kind == INGEST_ANY && j->len > PITH_EVENT_MAX_BYTES) {
		char m[96];
		snprintf(m, sizeof(m), "event of %zu bytes, over the limit of %u", j->len,
			 PITH_EVENT_MAX_BYTES);
		ingest_job_reject(j, INGEST_FAIL_TOO_BIG, PITH_ETOOBIG, m);
		reject_other_doc(j);
		return 0;
	}
	/* the canonical bytes the store keeps, written with the hashed ones */
	int rc = pith_event_parse_deferred(j->bytes, j->len, trust, &j->ev, &failed, &err, sc,
					   &j->canon);
	if (rc) {
		reject_check(j, failed, rc, err.msg);
		if (failed == PITH_CHECK_SHAPE)
			reject_other_doc(j);
		return 0;
	}
	return 1;
}

/* The rest, once the signature check has run. */
static void event_end(ingest_job_t *j, const pith_trust_t *trust, const pith_sig_check_t *sc)
{
	pith_err_t err = {0};
	pith_event_check_t failed = PITH_CHECK_OK;
	int rc = pith_event_sig_result(j->ev, sc, &failed, &err);
	if (rc) {
		reject_check(j, failed, rc, err.msg);
		goto drop;
	}
	j->kind = INGEST_EVENT;
	memcpy(j->id, j->ev->content_hash, 32);
	if (j->has_claim && memcmp(j->id, j->claimed_id, 32)) {
		ingest_job_reject(j, INGEST_FAIL_ID_MISMATCH, PITH_EMISMATCH,
				  "the event's id is not the one it was sent as");
		goto drop;
	}
	/* a copy, not snprintf (1.4% of a validator's samples in an import) */
	size_t sl = strnlen(j->ev->subject, sizeof(j->subject) - 1);
	memcpy(j->subject, j->ev->subject, sl);
	j->subject[sl] = 0;
	j->created_us = j->ev->created_us;
	j->is_record_created = !strcmp(j->ev->event_type, "record_created");
	if (!j->canon.len && pith_event_canon(j->ev, &j->canon)) {
		ingest_job_reject(j, INGEST_FAIL_OOM, PITH_ENOMEM,
				  "cannot write the canonical form (out of memory)");
		goto drop;
	}
	return;
drop:
	pith_buf_release(&j->canon);
	pith_event_free(j->ev);
}

/* ---- bundles ------------------------------------------------------------------ */

/* Why rep failed: for a file's item the names of all failed checks, then
 * why the first failed; for the node one line on the first. */
static void bundle_failure(ingest_job_t *j, const pith_report_t *rep)
{
	const pith_check_t *first = NULL;
	for (size_t i = 0; i < rep->n && !first; i++)
		if (!rep->checks[i].ok)
			first = &rep->checks[i];
	if (j->kind != INGEST_ANY) {
		char m[240];
		snprintf(m, sizeof(m), "bundle check %s failed (%zu failed)", first ? first->name : "?",
			 rep->failed);
		/* signed by keys this node does not trust: a configuration
		 * difference, as for events (relay.c remembers the hash) */
		int untrusted = pith_report_is_untrusted_only(rep);
		ingest_job_reject(j, untrusted ? INGEST_FAIL_UNTRUSTED : INGEST_FAIL_BUNDLE,
				  PITH_EMISMATCH, m);
		return;
	}
	ingest_job_reject(j, INGEST_FAIL_BUNDLE, PITH_EMISMATCH, "");
	j->reason = pith_bundle_refusal(rep); /* the import's name, docs/merge.md */
	size_t w = 0, cap = sizeof(j->msg);
	for (size_t i = 0; i < rep->n && w < cap - 1; i++)
		if (!rep->checks[i].ok)
			w += (size_t)snprintf(j->msg + w, cap - w, "%s%s", w ? ", " : "failed checks: ",
					      rep->checks[i].name);
	if (first && w < cap - 1)
		snprintf(j->msg + w, cap - w, " (%s: %s)", first->name, first->value);
}

/* What the node keeps of a valid bundle besides the document: its pith
 * number, built_at, hash and the ids of its events. */
static void bundle_facts(ingest_job_t *j, const json_value_t *root)
{
	const char *pith = json_get_str(root, "pith_number");
	const char *built = json_get_str(root, "built_at");
	if (!pith || !pith_number_is_valid(pith) || !built ||
	    pith_time_parse_valid(built, PITH_TIME_FRACTION, &j->built_us)) {
		ingest_job_reject(j, INGEST_FAIL_SHAPE, PITH_EINVAL,
				  "bundle without a pith_number or built_at");
		return;
	}
	snprintf(j->subject, sizeof(j->subject), "%s", pith);
	/* a claim is a full number, or its 26-character body alone (the
	 * year unknown to the sender, `pithctl pull BODY`) */
	size_t cl = strlen(j->claimed_pith), pl = strlen(pith);
	if (j->has_claim && (cl == PITH_BODY_LEN ? pl < cl || strcmp(pith + pl - cl, j->claimed_pith)
						  : strcmp(pith, j->claimed_pith))) {
		ingest_job_reject(j, INGEST_FAIL_ID_MISMATCH, PITH_EMISMATCH,
				  "the bundle is not for the pith number it was sent as");
		return;
	}
	pith_bundle_hash(root, j->sha);
	j->has_sha = 1;
	const json_value_t *evs = json_get_type(root, "events", JSON_ARRAY);
	size_t n = evs ? evs->len : 0;
	j->event_ids = malloc(n ? n * 32 : 1);
	j->event_created_us = malloc(n ? n * sizeof(int64_t) : 1);
	if (!j->event_ids || !j->event_created_us) {
		ingest_job_reject(j, INGEST_FAIL_OOM, PITH_ENOMEM, "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *id = json_get_str(evs->u.items[i], "event_id");
		const char *created = json_get_str(evs->u.items[i], "created_at");
		int64_t us = 0;
		/* verified: "sha256:" + 64 hex, and a valid created_at */
		if (id && strlen(id) == PITH_EVENT_ID_LEN && created &&
		    !pith_time_parse_valid(created, PITH_TIME_SECONDS, &us) &&
		    !pith_hex_decode(id + 7, 64, j->event_ids + 32 * j->n_event_ids, 32))
			j->event_created_us[j->n_event_ids++] = us;
	}
}

/* Validates a bundle. 0 when the job is done; 1 when an INGEST_ANY item
 * turned out to be no bundle and is to be read as an event. */
static int validate_bundle(ingest_job_t *j, const pith_trust_t *trust, size_t max_bytes)
{
	pith_err_t err = {0};
	/* B-JSON (docs/merge.md): a file's item too, which the default
	 * limits once let nest 128 deep where every node refused past 40 */
	json_limits_t lim = {j->kind == INGEST_ANY ? PITH_BUNDLE_MAX_BYTES : max_bytes,
			     PITH_BUNDLE_MAX_DEPTH, JSON_MAX_INT_DIGITS};
	int rc = json_parse(&j->doc, j->bytes, j->len, &lim, &err);
	if (rc) {
		ingest_job_reject(j, INGEST_FAIL_JSON, rc, err.msg);
		return 0;
	}
	const json_value_t *root = json_doc_root(j->doc);
	if (pith_doc_kind(root) != PITH_DOC_BUNDLE) {
		json_doc_free(j->doc);
		if (j->kind == INGEST_ANY)
			return 1;
		ingest_job_reject(j, INGEST_FAIL_NOT_BUNDLE, PITH_EINVAL, "not a pith_open_graph_bundle");
		return 0;
	}
	pith_report_t rep = {0};
	rc = pith_bundle_verify(root, trust, &rep);
	if (rc) {
		bundle_failure(j, &rep);
		if (j->fail == INGEST_FAIL_UNTRUSTED)
			j->has_sha = pith_bundle_hash(root, j->sha) == 0;
	}
	pith_report_release(&rep);
	if (rc || j->kind == INGEST_ANY) {
		/* a file's bundle needs nothing more (the import has no use for
		 * the facts, and checks nothing the bundle checks did not) */
		j->kind = INGEST_BUNDLE;
	} else {
		bundle_facts(j, root);
	}
	if (j->rc)
		json_doc_free(j->doc);
	return 0;
}

/* Does a file's item name itself a bundle ("bundle_type" or
 * "bundle_signature" anywhere: D-KIND)? Anything else must be one event. */
static int looks_like_bundle(const ingest_job_t *j)
{
	return pith_text_names_bundle(j->bytes, j->len);
}

void ingest_validate(const pith_trust_t *trust, size_t max_bundle_bytes, ingest_job_t **js,
		     size_t n)
{
	pith_sig_check_t sc[INGEST_VALIDATE_BATCH], rsc[INGEST_VALIDATE_BATCH];
	pith_receipt_pre_t pre[INGEST_VALIDATE_BATCH];
	ingest_job_t *pending[INGEST_VALIDATE_BATCH];
	size_t m = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		ingest_job_t *j = js[i];
		if (j->rc)
			continue;
		if (j->kind == INGEST_BUNDLE || (j->kind == INGEST_ANY && looks_like_bundle(j)))
			if (!validate_bundle(j, trust, max_bundle_bytes))
				continue;
		if (event_begin(j, trust, &sc[m]))
			pending[m++] = j;
	}
	pith_sig_check_many(sc, m);
	/* then the receipts of the record_created events whose own signature
	 * verified, in one batch too (an event that fails costs one
	 * verification, not two) */
	for (size_t i = 0; i < m; i++) {
		if (!sc[i].ok)
			continue;
		r += pith_receipt_precheck_prepare(pending[i]->ev, trust, &rsc[r], &pre[r]);
	}
	pith_sig_check_many(rsc, r);
	for (size_t i = 0; i < r; i++)
		pith_receipt_precheck_finish(&pre[i], &rsc[i]);
	for (size_t i = 0; i < m; i++)
		event_end(pending[i], trust, &sc[i]);
}
