/* An upstream of the follower (follower.h): what is asked of it first,
 * its manifest (the bundle layout and the change feed it names), and its
 * books: failures counted by cause, classified, logged once per cause and
 * URL, the backoff; its status (`pithctl status`) and metrics. The
 * records' fetches are follower.c's, the change feed follower_feed.c's. */
#include "follower_int.h"
#include "follow_origin.h"

#include <curl/curl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "metrics.h"
#include "stats.h"
#include "upstream.h"

const char *const follower_cause_names[NCAUSES] = {
	"http_5xx", "http_429", "http_4xx", "redirect", "timeout", "dns", "connect", "tls",
	"too_big", "bad_answer", "network",
};
#define cause_names follower_cause_names

/* ---- the books ----------------------------------------------------------------------- */

/* Counts a failure of cause at url, keeps it as the upstream's last error,
 * and logs it the first time this cause is seen at this URL. */
void follower_src_error(follower_t *f, src_t *s, int cause, const char *url, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->last_error, sizeof(s->last_error), fmt, ap);
	va_end(ap);
	s->last_error_us = node_now_us();
	if (cause >= 0)
		s->failed[cause]++;
	uint8_t key[32];
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, 32);
	const char *cn = cause >= 0 ? cause_names[cause] : "rejected";
	crypto_generichash_update(&st, (const uint8_t *)cn, strlen(cn) + 1);
	crypto_generichash_update(&st, (const uint8_t *)url, strlen(url));
	crypto_generichash_final(&st, key, 32);
	if (idmap_get(f->logged, key))
		return;
	if (idmap_count(f->logged) < LOGGED_MAX)
		idmap_put(f->logged, key, (void *)1);
	log_warn("upstream %s: %s (%s; said once per cause and URL)", s->base, s->last_error, cn);
}

void follower_count_rejected(src_t *s, const char *reason)
{
	s->rejected_total++;
	for (int i = 0; i < REASONS_MAX; i++) {
		if (!s->rejected[i].reason) {
			s->rejected[i].reason = reason;
			s->rejected[i].n = 1;
			return;
		}
		if (!strcmp(s->rejected[i].reason, reason)) {
			s->rejected[i].n++;
			return;
		}
	}
}

/* The upstream's own trouble (5xx, 429, network): it rests a while,
 * doubling to BACKOFF_MAX_S, jittered; Retry-After, when given, rules. */
void follower_src_backoff(src_t *s, int64_t retry_after_s)
{
	int64_t now = node_now_us();
	s->fails++;
	int64_t us;
	if (retry_after_s >= 0) {
		us = (retry_after_s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : retry_after_s) *
		     INT64_C(1000000);
	} else {
		us = hc_backoff_us(INT64_C(1000000), s->fails, BACKOFF_MAX_S * INT64_C(1000000));
	}
	if (now + us > s->blocked_until_us)
		s->blocked_until_us = now + us;
}

int follower_classify(const hc_result_t *res)
{
	if (res->over_cap)
		return C_TOO_BIG;
	switch (res->curl_code) {
	case 0: break;
	case CURLE_OPERATION_TIMEDOUT: return C_TIMEOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY: return C_DNS;
	case CURLE_COULDNT_CONNECT: return C_CONNECT;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM: return C_TLS;
	case CURLE_TOO_MANY_REDIRECTS: return C_REDIRECT;
	case CURLE_FILESIZE_EXCEEDED: return C_TOO_BIG;
	default: return C_NETWORK;
	}
	if (res->status == 429)
		return C_HTTP_429;
	if (res->status >= 500)
		return C_HTTP_5XX;
	if (res->status >= 300 && res->status < 400)
		return C_REDIRECT;
	return C_HTTP_4XX;
}

int follower_cause_backs_off(int cause)
{
	return cause != C_TOO_BIG && cause != C_HTTP_4XX && cause != C_REDIRECT &&
	       cause != C_BAD_ANSWER;
}

/* ---- the manifest -------------------------------------------------------------------- */

/* The manifest was read or failed: follow the change feed it names, or
 * with feed_default the one every pithd serves at BASE/api/changes. */
static void manifest_feed(follower_t *f, src_t *s)
{
	static const char path[] = "/api/changes";
	size_t n = strlen(s->base);
	if (f->o.feed_default && !s->changes_url[0] && n + sizeof(path) <= sizeof(s->changes_url)) {
		memcpy(s->changes_url, s->base, n);
		memcpy(s->changes_url + n, path, sizeof(path));
	}
	if (s->changes_url[0] && !s->feed)
		follower_feed_start(f, s);
}

static void on_manifest(void *arg, const hc_result_t *res)
{
	src_t *s = arg;
	follower_t *f = s->f;
	s->manifest_req = 0;
	s->manifest = 2;
	s->manifest_seen = 1;
	s->bytes += res->bytes;
	s->manifest_next_us = node_now_us() + f->o.refresh_s * INT64_C(1000000);
	if (res->curl_code || res->status != 200) {
		if (res->status != 404 && res->status != 0)
			follower_src_error(f, s, follower_classify(res), res->url, "%s answered HTTP %ld: using the registry's layouts",
				  res->url, res->status);
		else if (res->curl_code)
			follower_src_error(f, s, follower_classify(res), res->url, "%s: %s: using the registry's layouts",
				  res->url, res->error ? res->error : "failed");
		manifest_feed(f, s);
		follower_pump(f);
		return;
	}
	pith_manifest_t *m = malloc(sizeof(*m));
	pith_err_t e = {0};
	if (!m || pith_manifest_parse(res->body, res->body_len, NULL, m, &e)) {
		follower_src_error(f, s, C_BAD_ANSWER, res->url, "%s: %s: using the registry's layouts",
			  res->url, m ? e.msg : "out of memory");
		free(m);
		manifest_feed(f, s);
		follower_pump(f);
		return;
	}
	const pith_mirror_t *pick = &m->mirrors[0];
	for (size_t i = 0; i < m->n_mirrors; i++)
		if (hc_url_same(m->mirrors[i].base_url, s->base)) {
			pick = &m->mirrors[i];
			break;
		}
	s->has_manifest = 1;
	const char *pattern = pick->bundle_pattern, *feed = pick->changes_url;
	if (pattern[0] && !follow_origin_ok(s->base, pattern, f->o.origins, f->o.n_origins)) {
		follower_src_error(f, s, -1, res->url, "%s: bundle_pattern %s is not on %s's origin nor one listed (upstream_origin): using the registry's layouts",
				   res->url, pattern, s->base);
		pattern = "";
	}
	if (feed[0] && !follow_origin_ok(s->base, feed, f->o.origins, f->o.n_origins)) {
		follower_src_error(f, s, -1, res->url, "%s: changes_url %s is not on %s's origin nor one listed (upstream_origin): not followed",
				   res->url, feed, s->base);
		feed = "";
	}
	snprintf(s->pattern, sizeof(s->pattern), "%s", pattern);
	/* a feed being read keeps its URL when a re-read manifest names none */
	if (feed[0] || !s->feed)
		snprintf(s->changes_url, sizeof(s->changes_url), "%s", feed);
	manifest_feed(f, s);
	log_info("upstream %s: manifest read, bundles at %s", s->base,
		 s->pattern[0] ? s->pattern : "the registry's layouts");
	free(m);
	follower_pump(f);
}

void follower_manifest_ask(follower_t *f, size_t i)
{
	src_t *s = &f->srcs[i];
	char url[URL_CAP];
	snprintf(url, sizeof(url), "%s/pith-mirrors.json", s->base);
	hc_req_t q = {.url = url, .body_cap = SMALL_MAX, .done = on_manifest, .arg = s};
	s->requests++;
	s->manifest = 1;
	s->manifest_req = hc_get(f->hc, &q);
	if (!s->manifest_req)
		s->manifest = 2, s->manifest_seen = 1;
}

/* ---- status and metrics -------------------------------------------------------------- */

void follower_status_json(follower_t *f, pith_buf_t *b)
{
	int64_t now = node_now_us();
	pith_buf_printf(b, "\"followed\":%zu,\"fetching\":%zu,\"scheduled\":%zu,\"waiting_readers\":%zu,"
			"\"refresh_seconds\":%lld,\"upstreams\":[",
			f->nfollowed, f->nactive, f->nheap, f->nwaiters, (long long)f->o.refresh_s);
	for (size_t i = 0; i < f->nsrcs; i++) {
		src_t *s = &f->srcs[i];
		pith_buf_printf(b, "%s{\"url\":", i ? "," : "");
		json_write_string(b, s->base, strlen(s->base));
		pith_buf_printf(b, ",\"manifest\":\"%s\",\"bundle_pattern\":",
				s->manifest == 1 ? "asking" : s->has_manifest ? "read" : "none");
		json_write_string(b, s->pattern, strlen(s->pattern));
		pith_buf_printf(b, ",\"requests\":%llu,\"not_modified\":%llu,\"bytes\":%llu,"
				"\"bundles_downloaded\":%llu,\"records_pulled\":%llu,\"unchanged\":%llu,"
				"\"not_found\":%llu,\"fetching\":%zu,\"waiting\":%zu,\"slots\":%zu,"
				"\"busy_skips\":%llu,\"backing_off_seconds\":%.1f,\"rejected\":{",
				(unsigned long long)s->requests, (unsigned long long)s->not_modified,
				(unsigned long long)s->bytes, (unsigned long long)s->bundles,
				(unsigned long long)s->stored, (unsigned long long)s->unchanged,
				(unsigned long long)s->not_found, s->inflight, s->nwait, f->share,
				(unsigned long long)s->busy_skips,
				s->blocked_until_us > now ? (double)(s->blocked_until_us - now) / 1e6 : 0.0);
		for (int j = 0; j < REASONS_MAX && s->rejected[j].reason; j++)
			pith_buf_printf(b, "%s\"%s\":%llu", j ? "," : "", s->rejected[j].reason,
					(unsigned long long)s->rejected[j].n);
		pith_buf_puts(b, "},\"failed\":{");
		int first = 1;
		for (int c = 0; c < NCAUSES; c++)
			if (s->failed[c]) {
				pith_buf_printf(b, "%s\"%s\":%llu", first ? "" : ",", cause_names[c],
						(unsigned long long)s->failed[c]);
				first = 0;
			}
		pith_buf_puts(b, "}");
		follower_feed_status_json(s, b);
		pith_buf_puts(b, ",\"last_error\":");
		if (s->last_error[0]) {
			json_write_string(b, s->last_error, strlen(s->last_error));
			pith_buf_printf(b, ",\"last_error_age_seconds\":%.1f",
					(double)(now - s->last_error_us) / 1e6);
		} else {
			pith_buf_puts(b, "null");
		}
		pith_buf_puts(b, "}");
	}
	pith_buf_puts(b, "]");
}

static void family_each(follower_t *f, metrics_out_t *o, const char *name, const char *help,
			size_t off)
{
	char l[PITH_URL_MAX + 32];
	metrics_out_family(o, name, METRIC_COUNTER, help);
	for (size_t i = 0; i < f->nsrcs; i++) {
		pith_buf_t esc = {0};
		metrics_label_escape(&esc, f->srcs[i].base);
		pith_buf_cstr(&esc);
		snprintf(l, sizeof(l), "upstream=\"%s\"", esc.data ? (char *)esc.data : "");
		metrics_out_sample_u64(o, name, l, *(const uint64_t *)((const char *)&f->srcs[i] + off));
		pith_buf_release(&esc);
	}
}

void follower_metrics(follower_t *f, metrics_out_t *o)
{
	char l[PITH_URL_MAX + 96];
	metrics_out_family(o, "pith_upstream_followed_records", METRIC_GAUGE,
			   "Records kept current from HTTP(S) upstreams");
	metrics_out_sample_u64(o, "pith_upstream_followed_records", NULL, f->nfollowed);
	metrics_out_family(o, "pith_upstream_fetching_records", METRIC_GAUGE,
			   "Records being fetched from upstreams now");
	metrics_out_sample_u64(o, "pith_upstream_fetching_records", NULL, f->nactive);
	family_each(f, o, "pith_upstream_requests_total", "HTTP requests sent to the upstream",
		    offsetof(src_t, requests));
	family_each(f, o, "pith_upstream_not_modified_total", "304 answers (no download, no verification)",
		    offsetof(src_t, not_modified));
	family_each(f, o, "pith_upstream_bytes_total", "Body bytes received from the upstream",
		    offsetof(src_t, bytes));
	family_each(f, o, "pith_upstream_records_pulled_total",
		    "Bundles from the upstream stored as newer", offsetof(src_t, stored));
	family_each(f, o, "pith_upstream_not_found_total", "Records the upstream does not know",
		    offsetof(src_t, not_found));
	metrics_out_family(o, "pith_upstream_rejected_total", METRIC_COUNTER,
			   "Bundles from the upstream refused by verification, by reason");
	metrics_out_family(o, "pith_upstream_failed_total", METRIC_COUNTER,
			   "Requests to the upstream that failed, by cause");
	for (size_t i = 0; i < f->nsrcs; i++) {
		src_t *s = &f->srcs[i];
		pith_buf_t esc = {0};
		metrics_label_escape(&esc, s->base);
		pith_buf_cstr(&esc);
		const char *u = esc.data ? (char *)esc.data : "";
		for (int j = 0; j < REASONS_MAX && s->rejected[j].reason; j++) {
			snprintf(l, sizeof(l), "upstream=\"%s\",reason=\"%s\"", u, s->rejected[j].reason);
			metrics_out_sample_u64(o, "pith_upstream_rejected_total", l, s->rejected[j].n);
		}
		for (int c = 0; c < NCAUSES; c++) {
			snprintf(l, sizeof(l), "upstream=\"%s\",cause=\"%s\"", u, cause_names[c]);
			metrics_out_sample_u64(o, "pith_upstream_failed_total", l, s->failed[c]);
		}
		pith_buf_release(&esc);
	}
}
