/* An HTTP(S) client on the event loop (issue 14, item 4): libcurl's multi
 * interface driven by libevent through its socket and timer callbacks
 * (CURLMOPT_SOCKETFUNCTION, CURLMOPT_TIMERFUNCTION,
 * curl_multi_socket_action). No thread per request, no blocking call on
 * the loop; HTTP and TLS are libcurl's.
 *
 * One hc_t is one curl multi handle: its transfers share a connection
 * cache (keep-alive, at most max_host_conns per host), at most
 * max_inflight run at once and the rest wait in FIFO order. Each request
 * is a GET; redirects are followed only when the request says how many
 * (else the caller reads status and location), and only within the
 * request's origin (scheme, host, port: so never from https to http;
 * issue 53); only http and https; TLS peer and host always verified;
 * bodies capped by Content-Length up front and by the bytes that arrive.
 *
 * libcurl's global state: the program's main calls hc_global_init once,
 * before it starts any thread, and hc_global_cleanup once at the end
 * (`pithctl pull` does so before its pipeline's threads start; pithd must
 * before it uses this). hc_new does
 * not call curl_global_init: on libcurl builds that are not thread-safe
 * there, it must not run while other threads use TLS.
 *
 * Threads: everything here is called on the loop thread of the base given
 * to hc_new, and callbacks run there. */
#ifndef PITH_NODE_HCLIENT_H
#define PITH_NODE_HCLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct event_base;

typedef struct hc hc_t;

#define HC_ETAG_MAX 128      /* bytes of an ETag kept */
#define HC_LOCATION_MAX 2048 /* bytes of a Location kept, NUL aside */

typedef struct hc_opts {
	const char *ca_file;       /* NULL: the system CAs; else only this file's
				    * (copied). TLS peer and host always verified */
	const char *user_agent;    /* e.g. "pithd/1" (copied) */
	long connect_timeout_s;    /* default 10 */
	long low_speed_bytes;      /* default 1024: slower than this ... */
	long low_speed_time_s;     /* default 15: ... for this long = dropped */
	long total_timeout_s;      /* default 0 = none: the deadline of a transfer; one
				    * whose Content-Length would take more than twice
				    * that at the rate of its body so far (judged
				    * once its bytes came for as long as its first
				    * byte took, 0.25 s at least) is dropped
				    * then (curl code
				    * CURLE_OPERATION_TIMEDOUT, "too slow for the
				    * deadline: ...") */
	const char *const *origins; /* besides a request's own origin, the origins
				    * (scheme://host[:port]) its redirects may go to
				    * (copied, at most HC_ORIGINS_MAX); https to http
				    * never */
	size_t n_origins;
	size_t max_inflight;       /* transfers at once (default 16); more wait FIFO */
	size_t max_host_conns;     /* connections per host kept/used (default 16) */
} hc_opts_t;

/* The defaults above (ca_file NULL, user_agent "pithd/1"). */
void hc_opts_default(hc_opts_t *o);

typedef struct hc_result {
	const char *url;
	int curl_code;             /* 0: an HTTP answer came (any status) */
	long status;               /* HTTP status, 0 when none */
	const uint8_t *body;       /* valid only during the callback; NULL when */
	size_t body_len;           /*   body_len is 0 */
	const char *etag;          /* "" if none or not a strong printable tag <= 128 bytes */
	const char *location;      /* "" if none; a too long one = "" and location_too_long */
	int location_too_long;
	int64_t retry_after_s;     /* -1 if none; delta-seconds or HTTP-date (relative to
				    * now), clamped to [0, HC_RETRY_AFTER_MAX] */
	int over_cap;              /* body (or Content-Length) over body_cap: curl_code != 0 */
	const char *error;         /* "" when curl_code is 0; else one human line:
				    * "body over N bytes", or curl_easy_strerror
				    * followed by ": " and curl's error buffer when
				    * that says more ("Timeout was reached: Operation
				    * too slow. ...", "SSL peer certificate ...: SSL
				    * certificate problem: ...") */
	uint64_t bytes;            /* body bytes received */
	double seconds;            /* wall time of the transfer (from its start,
				    * not counting its wait in the queue) */
	long connects;             /* new connections it made (CURLINFO_NUM_CONNECTS):
				    * 0 when it reused one */
} hc_result_t;

#define HC_RETRY_AFTER_MAX (366 * 86400)
#define HC_ORIGINS_MAX 64 /* origins listed in hc_opts_t */
#define HC_BUNDLE_REDIRECTS 5 /* redirects a bundle fetch follows (pull, the follower) */

/* A transfer's end, on the loop. r and what it points to are valid during
 * the call only. The callback may call hc_get, hc_cancel and hc_free. */
typedef void (*hc_done_fn)(void *arg, const hc_result_t *r);

typedef struct hc_req {
	const char *url;           /* copied */
	const char *if_none_match; /* NULL or the ETag to send; copied */
	size_t body_cap;           /* bytes */
	int max_redirects;         /* 0: redirects are answers (status, location);
				    * N > 0: up to N are followed, each only to
				    * the origin (scheme, host, port) of url or
				    * one of hc_opts_t.origins: one
				    * elsewhere, or more than N, fail with curl's
				    * CURLE_TOO_MANY_REDIRECTS (error "redirect to
				    * another origin refused: LOCATION" for the
				    * first), before anything is asked there; the
				    * result is the last answer's */
	hc_done_fn done;
	void *arg;
} hc_req_t;

/* A client on base's loop with options o (NULL: the defaults; copied; a
 * zero count or time keeps its default, but total_timeout_s 0 is "none").
 * 0 with *out set, or PITH_ENOMEM / PITH_EIO with err saying why. */
int hc_new(struct event_base *base, const hc_opts_t *o, hc_t **out, pith_err_t *err);

/* Cancels every transfer (no callback runs after this), closes the
 * connections and frees c. NULL-tolerant; may be called from a done
 * callback. Must be called before the base is freed. */
void hc_free_(hc_t *c);
#define hc_free(c) do { hc_free_(c); (c) = NULL; } while (0)

/* Queues a GET of req->url. Returns its id (nonzero), or 0 when memory is
 * short (nothing queued, done never called). done() runs exactly once,
 * later, on the loop (never inside hc_get), unless the transfer is
 * cancelled or c freed first. A transfer that cannot be started (curl
 * refuses the URL, no memory) ends with curl_code != 0 like any other. */
uint64_t hc_get(hc_t *c, const hc_req_t *req);

/* Drops transfer id, queued or running: done() is not called. An unknown
 * or finished id is ignored. */
void hc_cancel(hc_t *c, uint64_t id);

/* Transfers running, and waiting for a slot. */
size_t hc_inflight(const hc_t *c);
size_t hc_queued(const hc_t *c);

/* Whether s[0..n) is an ETag kept here: a strong tag of printable ASCII
 * (no blanks), 1 to HC_ETAG_MAX bytes ("W/..." is not strong). */
int hc_etag_is_ok(const char *s, size_t n);

/* Whether two base URLs are one (a manifest's mirror and the upstream
 * asked): equal but for trailing slashes and letter case. */
int hc_url_same(const char *a, const char *b);

/* Whether absolute URLs a and b have one origin: scheme, host (letter
 * case aside) and port (the scheme's default made explicit). 0 when
 * either does not parse. */
int hc_origin_same(const char *a, const char *b);

/* Whether a request to URL from may go to URL to: the same origin, or to's
 * origin is one of origins[0..n) (scheme://host[:port], as an operator
 * lists them) and it is not from https to http. */
int hc_origin_allowed(const char *from, const char *to, const char *const *origins, size_t n);

/* Whether s is an origin as an operator lists one: http:// or https://, a
 * host, an optional port, nothing else (a trailing '/' aside). */
int hc_origin_is_valid(const char *s);

/* Retrying: what callers that ask again share (pull's retries, the
 * follower's upstream backoff). */

/* Whether r is a failure that asking again later may mend: a 408, 429 or
 * 5xx other than 501 and 505 (not implemented, version not supported);
 * or a transfer that broke at the network level (DNS, connect, a
 * timeout or stall, a send or receive error, a connection closed or a
 * body cut short, a TLS handshake that did not complete). Not a
 * certificate that does not verify, a body over the cap, too many
 * redirects, a refused URL or protocol, nor any other 4xx. */
int hc_result_is_transient(const hc_result_t *r);

/* r's Retry-After in seconds when r is a 429 or 503 that has one (the two
 * answers whose Retry-After says when to come back), else -1. */
int64_t hc_result_retry_after_s(const hc_result_t *r);

/* The wait before the n-th retry (n >= 1), in microseconds: a random time
 * between half and all of first_us * 2^(n-1), that step being at most
 * max_us. The jitter keeps clients that failed together from coming back
 * together. */
int64_t hc_backoff_us(int64_t first_us, unsigned n, int64_t max_us);

/* curl_global_init / curl_global_cleanup (see the top of this file). */
int hc_global_init(pith_err_t *err);
void hc_global_cleanup(void);

#endif
