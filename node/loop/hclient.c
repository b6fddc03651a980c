/* The HTTP(S) client on the loop (hclient.h): libcurl's multi-socket
 * interface under libevent.
 *
 * curl tells us which sockets to watch (on_curl_socket: one event per
 * socket, kept in a struct hc_sock that curl holds for us with
 * curl_multi_assign) and when to wake it (on_curl_timer: one timer event).
 * Both wake-ups call curl_multi_socket_action, then hc_reap reads the
 * finished transfers, hands each to its callback and starts queued ones.
 *
 * A callback may free the client: every entry from the loop is bracketed
 * by hc_enter/hc_leave, and hc_free_ inside one only marks it closing
 * (every transfer dropped at once); hc_leave frees it when the outermost
 * entry returns. */
#include "hclient.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <sodium.h>

#include "buf.h"

#define HC_SPARE_MAX 16 /* easy handles kept for reuse */
#define HC_PINS_MAX 256 /* host names whose first address class is kept */
#define HC_HOST_MAX 255
/* a body's rate is judged once its bytes have come for as long as its
 * first byte took (a few round trips: TCP's slow start is past its
 * first steps by then), and at least this long */
#define HC_RATE_WINDOW_S 0.25

typedef struct hc_xfer {
	struct hc *c;
	uint64_t id;
	CURL *h;                 /* NULL while queued */
	struct curl_slist *hdrs; /* If-None-Match; outlives the transfer */
	char *url;
	char *host;              /* url's host, lower case; NULL if it has none */
	char *inm;
	size_t cap;
	int max_redirects;
	hc_done_fn done;
	void *arg;
	pith_buf_t body;
	int over_cap;
	char etag[HC_ETAG_MAX + 1];
	char location[HC_LOCATION_MAX + 1];
	int location_too_long;
	int64_t retry_after;
	long status;             /* of the response whose headers are arriving */
	int foreign_redirect;    /* a redirect off the request's origin was refused */
	double too_slow;         /* dropped: its body would take this long (s) */
	double t_body;           /* when its body's first bytes came, 0 before */
	char refused_addr[INET6_ADDRSTRLEN]; /* a private address refused, or "" */
	double t0;
	char errbuf[CURL_ERROR_SIZE];
	struct hc_xfer *prev, *next; /* in c->queue or c->running */
} hc_xfer_t;

/* A socket curl asked us to watch. */
typedef struct hc_sock {
	struct event *ev;
	struct hc_sock *prev, *next; /* in c->socks: freed at the end even
				      * if curl never says REMOVE */
} hc_sock_t;

typedef struct hc_list {
	hc_xfer_t *head, *tail;
	size_t n;
} hc_list_t;

struct hc {
	struct event_base *base;
	CURLM *multi;
	struct event *timer; /* curl's timeout */
	struct event *kick;  /* starts queued transfers after hc_get returns */
	hc_opts_t o;
	char *ca_file, *user_agent;
	char **origins;          /* hc_opts_t.origins, copied (o.n_origins of them) */
	hc_list_t queue, running;
	CURL *spare[HC_SPARE_MAX]; /* easy handles of finished transfers, reused */
	struct {
		char host[HC_HOST_MAX + 1];
		int priv; /* its first address was private, loopback or link-local */
	} pins[HC_PINS_MAX];
	size_t npins;
	size_t nspare;
	hc_sock_t *socks;
	uint64_t next_id;
	int depth;   /* entries from the loop under way */
	int closing; /* hc_free_ was called inside one */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void hc_opts_default(hc_opts_t *o)
{
	*o = (hc_opts_t){
		.ca_file = NULL, .user_agent = "pithd/1", .connect_timeout_s = 10,
		.low_speed_bytes = 1024, .low_speed_time_s = 15, .total_timeout_s = 0,
		.max_inflight = 16, .max_host_conns = 16,
	};
}

int hc_global_init(pith_err_t *err)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return pith_err_set(err, PITH_EIO, "cannot initialise libcurl");
	return 0;
}

void hc_global_cleanup(void)
{
	curl_global_cleanup();
}

int hc_url_same(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	while (la && a[la - 1] == '/')
		la--;
	while (lb && b[lb - 1] == '/')
		lb--;
	return la == lb && !strncasecmp(a, b, la);
}

int hc_etag_is_ok(const char *s, size_t n)
{
	if (!n || n > HC_ETAG_MAX || (n >= 2 && s[0] == 'W' && s[1] == '/'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

/* ---- lists ------------------------------------------------------------------- */

static void list_push(hc_list_t *l, hc_xfer_t *x)
{
	x->next = NULL;
	x->prev = l->tail;
	if (l->tail)
		l->tail->next = x;
	else
		l->head = x;
	l->tail = x;
	l->n++;
}

static void list_unlink(hc_list_t *l, hc_xfer_t *x)
{
	if (x->prev)
		x->prev->next = x->next;
	else
		l->head = x->next;
	if (x->next)
		x->next->prev = x->prev;
	else
		l->tail = x->prev;
	x->prev = x->next = NULL;
	l->n--;
}

/* ---- the response: body and headers ----------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	hc_xfer_t *x = arg;
	size_t len = size * n;
	if (!x->t_body && len)
		x->t_body = now_s();
	if (len > x->cap - x->body.len) {
		x->over_cap = 1;
		return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
	}
	return pith_buf_append(&x->body, data, len) ? 0 : len;
}

/* Retry-After: delta-seconds, or an HTTP-date made relative to now; -1 if
 * neither. */
static int64_t retry_after_parse(const char *v, size_t vl)
{
	char tmp[64];
	if (!vl || vl >= sizeof(tmp))
		return -1;
	memcpy(tmp, v, vl);
	tmp[vl] = 0;
	int64_t s = 0;
	if (isdigit((unsigned char)tmp[0])) {
		for (size_t i = 0; i < vl; i++) {
			if (!isdigit((unsigned char)tmp[i]))
				return -1;
			if (s < HC_RETRY_AFTER_MAX)
				s = s * 10 + (tmp[i] - '0');
		}
	} else {
		time_t t = curl_getdate(tmp, NULL);
		if (t == (time_t)-1)
			return -1;
		s = (int64_t)t - (int64_t)time(NULL);
	}
	return s < 0 ? 0 : s > HC_RETRY_AFTER_MAX ? HC_RETRY_AFTER_MAX : s;
}

/* Whether curl follows a response of this status (with FOLLOWLOCATION). */
static int redirect_followed(long status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* The origin of u (scheme, host, port, the port made explicit) into o, 0;
 * or -1 when u has none. */
static int url_origin(CURLU *u, char *o, size_t cap)
{
	char *sch = NULL, *host = NULL, *port = NULL;
	int rc = -1;
	if (!curl_url_get(u, CURLUPART_SCHEME, &sch, 0) && !curl_url_get(u, CURLUPART_HOST, &host, 0) &&
	    !curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) {
		int n = snprintf(o, cap, "%s://%s:%s", sch, host, port);
		rc = n > 0 && (size_t)n < cap ? 0 : -1;
	}
	curl_free(sch);
	curl_free(host);
	curl_free(port);
	return rc;
}

int hc_origin_same(const char *a, const char *b)
{
	CURLU *ua = curl_url(), *ub = curl_url();
	char oa[HC_LOCATION_MAX + 64], ob[HC_LOCATION_MAX + 64];
	int same = ua && ub && !curl_url_set(ua, CURLUPART_URL, a, 0) &&
		   !curl_url_set(ub, CURLUPART_URL, b, 0) && !url_origin(ua, oa, sizeof(oa)) &&
		   !url_origin(ub, ob, sizeof(ob)) && !strcasecmp(oa, ob);
	curl_url_cleanup(ua);
	curl_url_cleanup(ub);
	return same;
}

int hc_origin_allowed(const char *from, const char *to, const char *const *origins, size_t n)
{
	if (hc_origin_same(from, to))
		return 1;
	if (!strncasecmp(from, "https:", 6) && strncasecmp(to, "https:", 6))
		return 0; /* never from https down to http */
	for (size_t i = 0; i < n; i++)
		if (hc_origin_same(origins[i], to))
			return 1;
	return 0;
}

int hc_origin_is_valid(const char *s)
{
	size_t n = strlen(s);
	const char *p = strstr(s, "://");
	if (!n || n > HC_LOCATION_MAX || !p ||
	    (strncasecmp(s, "http://", 7) && strncasecmp(s, "https://", 8)))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	const char *rest = p + 3;
	size_t m = strcspn(rest, "/?#@\\");
	if (!m || (rest[m] && (rest[m] != '/' || rest[m + 1])))
		return 0; /* a host, nothing but a trailing '/' after it */
	CURLU *u = curl_url();
	char *host = NULL;
	int ok = u && !curl_url_set(u, CURLUPART_URL, s, 0) &&
		 !curl_url_get(u, CURLUPART_HOST, &host, 0) && host && *host;
	curl_free(host);
	curl_url_cleanup(u);
	return ok;
}

/* Whether x's Location, resolved against the URL it answers, stays on the
 * origin of the URL x was asked for, or goes to an origin the client
 * lists (never from https to http). */
static int location_same_origin(hc_xfer_t *x)
{
	if (x->location_too_long || !x->location[0])
		return 0;
	char *cur = NULL;
	if (!x->h || curl_easy_getinfo(x->h, CURLINFO_EFFECTIVE_URL, &cur) || !cur)
		return 0;
	CURLU *u = curl_url();
	char *abs = NULL;
	int ok = u && !curl_url_set(u, CURLUPART_URL, cur, 0) &&
		 !curl_url_set(u, CURLUPART_URL, x->location, 0) &&
		 !curl_url_get(u, CURLUPART_URL, &abs, 0) &&
		 hc_origin_allowed(x->url, abs, (const char *const *)x->c->origins,
				   x->c->o.n_origins);
	curl_free(abs);
	curl_url_cleanup(u);
	return ok;
}

/* Header lines: keeps ETag, Location and Retry-After of the last response
 * (a 100 Continue's are forgotten at the next status line). */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	hc_xfer_t *x = arg;
	size_t len = size * n;
	if (len > 5 && !strncmp(data, "HTTP/", 5)) {
		x->etag[0] = x->location[0] = 0;
		x->location_too_long = 0;
		x->retry_after = -1;
		const char *sp = memchr(data, ' ', len);
		x->status = sp && (size_t)(sp - data) + 4 <= len ? strtol(sp + 1, NULL, 10) : 0;
		return len;
	}
	static const char *const names[] = {"etag:", "location:", "retry-after:"};
	size_t k = 0, hl = 0;
	for (; k < 3; k++) {
		hl = strlen(names[k]);
		if (len >= hl && !strncasecmp(data, names[k], hl))
			break;
	}
	if (k == 3)
		return len;
	const char *v = data + hl;
	size_t vl = len - hl;
	while (vl && (*v == ' ' || *v == '\t'))
		v++, vl--;
	while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
		vl--;
	if (k == 0) {
		x->etag[0] = 0; /* a weak or odd tag is simply not kept */
		if (hc_etag_is_ok(v, vl))
			memcpy(x->etag, v, vl), x->etag[vl] = 0;
	} else if (k == 1) {
		x->location[0] = 0;
		x->location_too_long = vl > HC_LOCATION_MAX;
		if (!x->location_too_long)
			memcpy(x->location, v, vl), x->location[vl] = 0;
		if (x->max_redirects && redirect_followed(x->status) && !location_same_origin(x)) {
			x->foreign_redirect = 1;
			return 0; /* aborts before curl follows it */
		}
	} else {
		x->retry_after = retry_after_parse(v, vl);
	}
	return len;
}

/* ---- transfers ---------------------------------------------------------------- */

static void xfer_free(hc_xfer_t *x)
{
	if (x->h) {
		curl_multi_remove_handle(x->c->multi, x->h);
		curl_easy_cleanup(x->h);
	}
	curl_slist_free_all(x->hdrs);
	pith_buf_release(&x->body);
	free(x->url);
	free(x->host);
	free(x->inm);
	free(x);
}

/* ---- the address rule ------------------------------------------------------------------
 * A host name's first address says whether it is a private one (loopback,
 * link-local, RFC 1918, CGNAT, unique local): a name first public never
 * gets a private address later (DNS rebinding onto the node's own
 * services). An upstream that is private itself (127.0.0.1, a LAN name)
 * stays usable. */

static int addr_private(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
		return (a >> 24) == 0 || (a >> 24) == 10 || (a >> 24) == 127 ||
		       (a >> 16) == 0xa9fe || (a >> 20) == 0xac1 || (a >> 16) == 0xc0a8 ||
		       (a >> 22) == (100u << 2 | 1);
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (!memcmp(b, mapped, 12)) {
			struct sockaddr_in v4 = {.sin_family = AF_INET};
			memcpy(&v4.sin_addr, b + 12, 4);
			return addr_private((const struct sockaddr *)&v4);
		}
		int zero = 1;
		for (int i = 0; i < 15; i++)
			zero &= b[i] == 0;
		return zero || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || (b[0] & 0xfe) == 0xfc;
	}
	return 1;
}

static curl_socket_t on_open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	hc_xfer_t *x = arg;
	hc_t *c = x->c;
	if (purpose == CURLSOCKTYPE_IPCXN && x->host && strlen(x->host) <= HC_HOST_MAX) {
		int priv = addr_private(&a->addr), refuse = 0;
		size_t i = 0;
		while (i < c->npins && strcmp(c->pins[i].host, x->host))
			i++;
		if (i < c->npins) {
			refuse = priv && !c->pins[i].priv;
		} else if (i < HC_PINS_MAX) {
			snprintf(c->pins[i].host, sizeof(c->pins[i].host), "%s", x->host);
			c->pins[i].priv = priv;
			c->npins++;
		} else if (priv) {
			/* a new name past the table's size: private only if it is an address */
			unsigned char tmp[16];
			refuse = !(inet_pton(AF_INET, x->host, tmp) == 1 || x->host[0] == '[');
		}
		if (refuse) {
			const void *ip = a->addr.sa_family == AF_INET6
						 ? (const void *)&((struct sockaddr_in6 *)&a->addr)->sin6_addr
						 : (const void *)&((struct sockaddr_in *)&a->addr)->sin_addr;
			if (!inet_ntop(a->addr.sa_family, ip, x->refused_addr, sizeof(x->refused_addr)))
				snprintf(x->refused_addr, sizeof(x->refused_addr), "?");
			return CURL_SOCKET_BAD;
		}
	}
	return socket(a->family, a->socktype, a->protocol);
}

/* CURLOPT_XFERINFOFUNCTION: a body whose Content-Length would take more
 * than twice the deadline at the rate seen since its first bytes (over
 * as long as the first byte took, HC_RATE_WINDOW_S at least) is dropped
 * then, not at the deadline (issue
 * 53, attack 4: a drip above the stall rate holds no slot for long). */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)ultotal;
	(void)ulnow;
	hc_xfer_t *x = arg;
	const hc_opts_t *o = &x->c->o;
	if (o->total_timeout_s <= 0 || dltotal <= 0 || dlnow <= 0 || dlnow >= dltotal)
		return 0;
	double now = now_s(), b = now - x->t_body, first = x->t_body - x->t0;
	if (!x->t_body || b < HC_RATE_WINDOW_S || b < first)
		return 0;
	double eta = (now - x->t0) + (double)(dltotal - dlnow) * b / (double)dlnow;
	if (eta <= 2.0 * (double)o->total_timeout_s)
		return 0; /* it may speed up (TCP's slow start): the deadline decides */
	x->too_slow = eta;
	return 1; /* CURLE_ABORTED_BY_CALLBACK */
}

/* Keeps the easy handle of a finished transfer for the next one (its
 * buffers and state are reused; xfer_easy sets every option again), or
 * frees it when enough are kept. */
static void easy_release(hc_t *c, CURL *h)
{
	if (c->nspare < HC_SPARE_MAX && !c->closing)
		c->spare[c->nspare++] = h;
	else
		curl_easy_cleanup(h);
}

/* The easy handle of x, set up from the client's options: a kept one or a
 * new one. Every option is set each time, so nothing of the transfer it
 * served before is left (If-None-Match included). */
static CURL *xfer_easy(hc_t *c, hc_xfer_t *x)
{
	CURL *h = c->nspare ? c->spare[--c->nspare] : curl_easy_init();
	if (!h)
		return NULL;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
	if (x->inm) {
		size_t n = strlen(x->inm) + 32;
		char *line = malloc(n);
		if (line) {
			snprintf(line, n, "If-None-Match: %s", x->inm);
			x->hdrs = curl_slist_append(NULL, line);
			free(line);
		}
		if (!x->hdrs) {
			curl_easy_cleanup(h);
			return NULL;
		}
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->hdrs);
	}
	const hc_opts_t *o = &c->o;
	curl_easy_setopt(h, CURLOPT_PRIVATE, x);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, x->max_redirects ? 1L : 0L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, (long)x->max_redirects);
	/* never from https down to http (and on_header refuses any
	 * redirect off the request's origin) */
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR,
			 strncasecmp(x->url, "https:", 6) ? "http,https" : "https");
	curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
	curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, x);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, o->connect_timeout_s);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, o->low_speed_bytes);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, o->low_speed_time_s);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, o->total_timeout_s);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x->cap);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (c->ca_file) {
		/* only these CAs: no system directory besides */
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
		curl_easy_setopt(h, CURLOPT_CAPATH, (char *)NULL);
	}
	curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); /* whatever curl can decode */
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
	if (curl_easy_setopt(h, CURLOPT_URL, x->url) != CURLE_OK) {
		curl_easy_cleanup(h);
		return NULL;
	}
	return h;
}

/* Ends x: its callback (unless the client is closing), then frees it. x is
 * in no list any more. */
static void xfer_finish(hc_t *c, hc_xfer_t *x, CURLcode code)
{
	hc_result_t r = {.url = x->url, .curl_code = (int)code, .etag = x->etag,
			 .location = x->location, .location_too_long = x->location_too_long,
			 .retry_after_s = x->retry_after, .over_cap = x->over_cap, .error = ""};
	char line[CURL_ERROR_SIZE + 128];
	if (x->h) {
		curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &r.status);
		curl_easy_getinfo(x->h, CURLINFO_NUM_CONNECTS, &r.connects);
		r.seconds = now_s() - x->t0;
	}
	if (code == CURLE_FILESIZE_EXCEEDED)
		r.over_cap = 1;
	if (x->foreign_redirect && code != CURLE_OK)
		r.curl_code = code = CURLE_TOO_MANY_REDIRECTS;
	if (x->too_slow > 0 && code == CURLE_ABORTED_BY_CALLBACK)
		r.curl_code = code = CURLE_OPERATION_TIMEDOUT;
	if (code != CURLE_OK) {
		const char *s = curl_easy_strerror(code);
		if (x->too_slow > 0)
			snprintf(line, sizeof(line), "too slow for the deadline: %zu bytes in %.1f s, "
				 "the rest would take until %.0f s (deadline %ld s)", x->body.len,
				 now_s() - x->t0, x->too_slow, c->o.total_timeout_s);
		else if (x->foreign_redirect)
			snprintf(line, sizeof(line), "redirect to another origin refused: %.300s",
				 x->location);
		else if (x->refused_addr[0])
			snprintf(line, sizeof(line), "address %s refused: private, loopback or link-local, "
				 "and %.200s was first public", x->refused_addr, x->host);
		else if (r.over_cap)
			snprintf(line, sizeof(line), "body over %zu bytes", x->cap);
		else if (x->errbuf[0] && strcmp(x->errbuf, s))
			snprintf(line, sizeof(line), "%s: %s", s, x->errbuf);
		else
			snprintf(line, sizeof(line), "%s", s);
		r.error = line; /* status stays: an answer may have begun */
	} else {
		r.body = x->body.len ? x->body.data : NULL;
		r.body_len = x->body.len;
	}
	r.bytes = x->body.len;
	if (x->h) {
		curl_multi_remove_handle(c->multi, x->h);
		easy_release(c, x->h);
		x->h = NULL;
	}
	if (!c->closing)
		x->done(x->arg, &r);
	xfer_free(x);
}

/* Starts queued transfers while there is room. */
static void start_queued(hc_t *c)
{
	while (!c->closing && c->queue.head && c->running.n < c->o.max_inflight) {
		hc_xfer_t *x = c->queue.head;
		list_unlink(&c->queue, x);
		x->errbuf[0] = 0;
		x->retry_after = -1;
		x->t_body = x->too_slow = 0;
		x->h = xfer_easy(c, x);
		if (!x->h) {
			snprintf(x->errbuf, sizeof(x->errbuf), "cannot set up the transfer of %s", x->url);
			xfer_finish(c, x, CURLE_FAILED_INIT);
			continue;
		}
		x->t0 = now_s();
		list_push(&c->running, x);
		if (curl_multi_add_handle(c->multi, x->h) != CURLM_OK) {
			list_unlink(&c->running, x);
			xfer_finish(c, x, CURLE_OUT_OF_MEMORY);
		}
	}
}

/* After curl ran: every finished transfer to its callback, then the queue. */
static void hc_reap(hc_t *c)
{
	CURLMsg *m;
	int left;
	while (!c->closing && (m = curl_multi_info_read(c->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		hc_xfer_t *x = NULL;
		CURLcode code = m->data.result;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
		list_unlink(&c->running, x);
		xfer_finish(c, x, code);
	}
	start_queued(c);
}

static void hc_destroy(hc_t *c);

static void hc_enter(hc_t *c)
{
	c->depth++;
}

/* Frees c if hc_free_ was called meanwhile and this is the outermost entry. */
static void hc_leave(hc_t *c)
{
	if (--c->depth == 0 && c->closing)
		hc_destroy(c);
}

/* ---- curl's wake-ups on the loop ---------------------------------------------- */

static void on_sock_event(evutil_socket_t fd, short what, void *arg)
{
	hc_t *c = arg;
	int flags = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
	int running = 0;
	hc_enter(c);
	curl_multi_socket_action(c->multi, fd, flags, &running);
	hc_reap(c);
	hc_leave(c);
}

static void on_timer_event(evutil_socket_t fd, short what, void *arg)
{
	hc_t *c = arg;
	int running = 0;
	hc_enter(c);
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	hc_reap(c);
	hc_leave(c);
}

static void on_kick_event(evutil_socket_t fd, short what, void *arg)
{
	hc_t *c = arg;
	hc_enter(c);
	start_queued(c);
	hc_leave(c);
}

static void sock_free(hc_t *c, hc_sock_t *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		c->socks = s->next;
	if (s->next)
		s->next->prev = s->prev;
	if (s->ev)
		event_free(s->ev);
	free(s);
}

/* CURLMOPT_SOCKETFUNCTION: watch s for what (or stop). */
static int on_curl_socket(CURL *e, curl_socket_t s, int what, void *arg, void *sockp)
{
	hc_t *c = arg;
	hc_sock_t *hs = sockp;
	if (what == CURL_POLL_REMOVE) {
		if (hs)
			sock_free(c, hs);
		curl_multi_assign(c->multi, s, NULL);
		return 0;
	}
	if (!hs) {
		if (!(hs = calloc(1, sizeof(*hs))))
			return -1;
		hs->next = c->socks;
		if (c->socks)
			c->socks->prev = hs;
		c->socks = hs;
		curl_multi_assign(c->multi, s, hs);
	}
	if (hs->ev)
		event_free(hs->ev);
	short kind = (short)((what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0));
	hs->ev = event_new(c->base, s, kind | EV_PERSIST, on_sock_event, c);
	if (!hs->ev || event_add(hs->ev, NULL))
		return -1;
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: wake curl in ms milliseconds (-1: never). */
static int on_curl_timer(CURLM *m, long ms, void *arg)
{
	hc_t *c = arg;
	if (ms < 0)
		return evtimer_del(c->timer);
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	return evtimer_add(c->timer, &tv);
}

/* ---- the client ------------------------------------------------------------- */

int hc_new(struct event_base *base, const hc_opts_t *o, hc_t **out, pith_err_t *err)
{
	*out = NULL;
	hc_opts_t d;
	hc_opts_default(&d);
	hc_t *c = calloc(1, sizeof(*c));
	if (!c)
		return pith_err_set(err, PITH_ENOMEM, "out of memory");
	c->base = base;
	c->next_id = 1;
	c->o = o ? *o : d;
	/* zero: the default */
	if (!c->o.connect_timeout_s)
		c->o.connect_timeout_s = d.connect_timeout_s;
	if (!c->o.low_speed_bytes)
		c->o.low_speed_bytes = d.low_speed_bytes;
	if (!c->o.low_speed_time_s)
		c->o.low_speed_time_s = d.low_speed_time_s;
	if (!c->o.max_inflight)
		c->o.max_inflight = d.max_inflight;
	if (!c->o.max_host_conns)
		c->o.max_host_conns = d.max_host_conns;
	c->user_agent = strdup(c->o.user_agent ? c->o.user_agent : d.user_agent);
	c->ca_file = c->o.ca_file ? strdup(c->o.ca_file) : NULL;
	c->o.user_agent = c->o.ca_file = NULL; /* the copies are used */
	int rc = PITH_ENOMEM;
	if (!c->user_agent || (o && o->ca_file && !c->ca_file))
		goto fail;
	if (c->o.n_origins > HC_ORIGINS_MAX || (c->o.n_origins && !c->o.origins))
		c->o.n_origins = 0;
	if (c->o.n_origins && !(c->origins = calloc(c->o.n_origins, sizeof(char *))))
		goto fail;
	for (size_t i = 0; i < c->o.n_origins; i++)
		if (!(c->origins[i] = strdup(c->o.origins[i])))
			goto fail;
	c->o.origins = NULL;
	c->timer = evtimer_new(base, on_timer_event, c);
	c->kick = event_new(base, -1, 0, on_kick_event, c);
	if (!c->timer || !c->kick)
		goto fail;
	rc = PITH_EIO;
	if (!(c->multi = curl_multi_init()))
		goto fail;
	size_t keep = c->o.max_inflight > c->o.max_host_conns ? c->o.max_inflight : c->o.max_host_conns;
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)c->o.max_host_conns);
	curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)keep);
	curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, (long)keep);
	*out = c;
	return 0;
fail:
	hc_destroy(c);
	return pith_err_set(err, rc, rc == PITH_EIO ? "cannot initialise libcurl" : "out of memory");
}

/* Drops every transfer without a callback, then frees c. */
static void hc_destroy(hc_t *c)
{
	hc_xfer_t *x;
	while ((x = c->running.head)) {
		list_unlink(&c->running, x);
		xfer_free(x);
	}
	while ((x = c->queue.head)) {
		list_unlink(&c->queue, x);
		xfer_free(x);
	}
	while (c->nspare)
		curl_easy_cleanup(c->spare[--c->nspare]);
	if (c->multi)
		curl_multi_cleanup(c->multi); /* closes the cached connections */
	while (c->socks)
		sock_free(c, c->socks);
	if (c->timer)
		event_free(c->timer);
	if (c->kick)
		event_free(c->kick);
	for (size_t i = 0; c->origins && i < c->o.n_origins; i++)
		free(c->origins[i]);
	free(c->origins);
	free(c->ca_file);
	free(c->user_agent);
	free(c);
}

void hc_free_(hc_t *c)
{
	if (!c)
		return;
	if (c->depth) {
		/* inside one of our callbacks: no more callbacks, freed on the way out */
		c->closing = 1;
		return;
	}
	hc_destroy(c);
}

uint64_t hc_get(hc_t *c, const hc_req_t *req)
{
	if (c->closing)
		return 0;
	hc_xfer_t *x = calloc(1, sizeof(*x));
	if (!x)
		return 0;
	x->c = c;
	x->url = strdup(req->url);
	x->inm = req->if_none_match ? strdup(req->if_none_match) : NULL;
	CURLU *u = x->url ? curl_url() : NULL;
	if (u && !curl_url_set(u, CURLUPART_URL, x->url, 0) &&
	    !curl_url_get(u, CURLUPART_HOST, &x->host, 0) && x->host) {
		char *h = strdup(x->host); /* ours, not curl's, to free */
		curl_free(x->host);
		x->host = h;
		for (char *p = h; p && *p; p++)
			*p = (char)tolower((unsigned char)*p);
	}
	curl_url_cleanup(u);
	if (!x->url || (req->if_none_match && !x->inm)) {
		xfer_free(x);
		return 0;
	}
	x->cap = req->body_cap;
	x->max_redirects = req->max_redirects > 0 ? req->max_redirects : 0;
	x->done = req->done;
	x->arg = req->arg;
	x->retry_after = -1;
	x->id = c->next_id++;
	list_push(&c->queue, x);
	/* started from the loop, so that done() never runs in here */
	event_active(c->kick, 0, 0);
	return x->id;
}

void hc_cancel(hc_t *c, uint64_t id)
{
	hc_list_t *lists[2] = {&c->running, &c->queue};
	for (int i = 0; i < 2; i++)
		for (hc_xfer_t *x = lists[i]->head; x; x = x->next)
			if (x->id == id) {
				list_unlink(lists[i], x);
				xfer_free(x);
				if (i == 0)
					event_active(c->kick, 0, 0); /* its slot is free */
				return;
			}
}

size_t hc_inflight(const hc_t *c)
{
	return c->running.n;
}

size_t hc_queued(const hc_t *c)
{
	return c->queue.n;
}

/* ---- retrying -------------------------------------------------------------- */

int hc_result_is_transient(const hc_result_t *r)
{
	if (r->over_cap)
		return 0;
	switch (r->curl_code) {
	case CURLE_OK:
		return r->status == 408 || r->status == 429 ||
		       (r->status >= 500 && r->status <= 599 && r->status != 501 && r->status != 505);
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

int64_t hc_result_retry_after_s(const hc_result_t *r)
{
	return r->curl_code == CURLE_OK && (r->status == 429 || r->status == 503) ?
		r->retry_after_s : -1;
}

int64_t hc_backoff_us(int64_t first_us, unsigned n, int64_t max_us)
{
	int64_t step = first_us > 0 ? first_us : 1;
	for (unsigned i = 1; i < n && step < max_us; i++)
		step *= 2;
	if (step > max_us)
		step = max_us;
	/* to the millisecond: randombytes_uniform takes 32 bits */
	int64_t half = step / 2, half_ms = half / 1000;
	if (half_ms > UINT32_MAX)
		half_ms = UINT32_MAX;
	return half + (half_ms ? (int64_t)randombytes_uniform((uint32_t)half_ms) * 1000 : 0);
}
