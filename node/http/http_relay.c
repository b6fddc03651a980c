/* What a serving loop (http_loops.c) cannot answer itself goes to the
 * node's loop: the request is sent again, over a fresh loopback
 * connection, to the node's server's private listener, and the answer
 * that comes back is sent to the client as it came (status, headers,
 * body), less what belongs to one connection (Connection, Keep-Alive,
 * Transfer-Encoding, Date, and Content-Length but for HEAD, which evhttp
 * sets again from the body; and of the request, Expect: its body came
 * whole before it is relayed). So the node's loop answers exactly as it
 * would with no serving loops: its bounds, its read-through waits, its
 * pipeline.
 *
 * The client's address, which the node's per-client bounds need (the
 * costly documents, http_pool.c), travels in the X-Pith-Relay header with
 * a secret the node's server made at its start (32 hex characters from
 * getrandom): the node believes the header only with that secret, and a
 * serving loop drops any X-Pith-Relay a client sends. The private
 * listener is on 127.0.0.1 with every bound of the public port.
 *
 * Bounded: a relayed request holds its client's connection, which holds
 * one request at a time, so relays are at most the serving loop's
 * connections; each relay is one loopback connection (closed once
 * answered), counted in the node's connection cap. A relay the node's
 * loop does not answer within its timeout (the read-through's wait and
 * two of the inactivity timeout) is answered 504; a relay that cannot be
 * sent, 503. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "http_int.h"
#include "log.h"

struct http_relay {
	http_t *h;                     /* the serving loop's server; NULL: dropped */
	struct evhttp_request *req;    /* the client's */
	struct evhttp_connection *conn;
	render_route_t route;
	int64_t t0_us;
	struct http_relay *prev, *next;
};

static const char *const hop_by_hop[] = {
	"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding",
	"Upgrade", "Content-Length", "Expect", HTTP_RELAY_HEADER, NULL,
};

static int is_hop(const char *name, int keep_length)
{
	for (size_t i = 0; hop_by_hop[i]; i++)
		if (!strcasecmp(name, hop_by_hop[i]))
			return !(keep_length && !strcasecmp(name, "Content-Length"));
	return 0;
}

int http_is_relay_header(const char *name)
{
	return !strcasecmp(name, HTTP_RELAY_HEADER);
}

int http_relay_secret_new(char out[static HTTP_RELAY_SECRET_LEN + 1])
{
	unsigned char r[HTTP_RELAY_SECRET_LEN / 2];
	size_t got = 0;
	while (got < sizeof(r)) {
		ssize_t k = getrandom(r + got, sizeof(r) - got, 0);
		if (k <= 0)
			return -1; /* no guessable secret instead */
		got += (size_t)k;
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	out[HTTP_RELAY_SECRET_LEN] = 0;
	return 0;
}

const char *http_client_addr(const http_t *h, struct evhttp_request *req)
{
	if (h->relay_secret[0]) {
		const char *v = evhttp_find_header(evhttp_request_get_input_headers(req),
						   HTTP_RELAY_HEADER);
		if (v && strlen(v) > HTTP_RELAY_SECRET_LEN + 1 && v[HTTP_RELAY_SECRET_LEN] == ' ') {
			unsigned char d = 0; /* the same time for any wrong secret */
			for (size_t i = 0; i < HTTP_RELAY_SECRET_LEN; i++)
				d |= (unsigned char)(v[i] ^ h->relay_secret[i]);
			if (!d)
				return v + HTTP_RELAY_SECRET_LEN + 1;
		}
	}
	char *addr = NULL;
	ev_uint16_t port = 0;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	if (evcon)
		evhttp_connection_get_peer(evcon, &addr, &port);
	return addr ? addr : "";
}

static void relay_unlink(struct http_relay *r)
{
	http_t *h = r->h;
	if (r->prev)
		r->prev->next = r->next;
	else
		h->relay_list = r->next;
	if (r->next)
		r->next->prev = r->prev;
	h->relays--;
}

/* An answer of the serving loop's own (the relay failed). */
static void relay_error(http_t *h, struct http_relay *r, int status, const char *msg)
{
	http_ctx_t c = {.v = {.rd = h->rd, .route = r->route}, .h = h, .req = r->req,
			.t0_us = r->t0_us};
	c.v.t = &h->target;
	c.v.body = &h->body;
	pith_buf_reset(c.v.body);
	c.head = evhttp_request_get_command(r->req) == EVHTTP_REQ_HEAD;
	render_error(&c.v, status, "%s", msg);
	if (status == 503)
		c.v.r.retry_after = 1;
	http_send(&c);
}

static void relay_done(struct evhttp_request *rq, void *arg)
{
	struct http_relay *r = arg;
	http_t *h = r->h;
	if (!h)
		return; /* dropped at shutdown (http_relay_drop_all) */
	relay_unlink(r);
	int code = rq ? evhttp_request_get_response_code(rq) : 0;
	if (!code) {
		static log_rl_t rl;
		log_rl(&rl, LOG_WARN, "http: a request relayed to the node's loop got no answer");
		relay_error(h, r, 504, "this mirror's node did not answer in time; try again shortly");
		free(r);
		return;
	}
	struct evhttp_request *req = r->req;
	int head = evhttp_request_get_command(req) == EVHTTP_REQ_HEAD;
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	const struct evkeyvalq *ih = evhttp_request_get_input_headers(rq);
	for (const struct evkeyval *kv = ih->tqh_first; kv; kv = kv->next.tqe_next)
		if (!is_hop(kv->key, head) && strcasecmp(kv->key, "Date"))
			evhttp_add_header(oh, kv->key, kv->value);
	if (http_draining(h))
		evhttp_add_header(oh, "Connection", "close");
	evbuffer_add_buffer(evhttp_request_get_output_buffer(req), evhttp_request_get_input_buffer(rq));
	const char *line = evhttp_request_get_response_code_line(rq);
	evhttp_send_reply(req, code, line && *line ? line : "OK", NULL);
	free(r);
}

int http_relay(http_ctx_t *c)
{
	http_t *h = c->h, *m = h->main;
	struct http_relay *r = calloc(1, sizeof(*r));
	struct evhttp_request *rq = NULL;
	if (!r)
		goto fail;
	r->h = h;
	r->req = c->req;
	r->route = c->v.route;
	r->t0_us = c->t0_us;
	r->conn = evhttp_connection_base_new(h->base, NULL, "127.0.0.1", m->relay_port);
	if (!r->conn)
		goto fail;
	int tmo = 2 * m->o.timeout_s + (m->o.readthrough_ms + 999) / 1000;
	evhttp_connection_set_timeout(r->conn, tmo < 30 ? 30 : tmo);
	if (!(rq = evhttp_request_new(relay_done, r)))
		goto fail;
	struct evkeyvalq *oh = evhttp_request_get_output_headers(rq);
	const struct evkeyvalq *ih = evhttp_request_get_input_headers(c->req);
	for (const struct evkeyval *kv = ih->tqh_first; kv; kv = kv->next.tqe_next)
		if (!is_hop(kv->key, 0))
			evhttp_add_header(oh, kv->key, kv->value);
	char *addr = NULL;
	ev_uint16_t port = 0;
	struct evhttp_connection *evcon = evhttp_request_get_connection(c->req);
	if (evcon)
		evhttp_connection_get_peer(evcon, &addr, &port);
	char hv[HTTP_RELAY_SECRET_LEN + 80];
	snprintf(hv, sizeof(hv), "%s %.64s", h->relay_secret, addr && *addr ? addr : "-");
	evhttp_add_header(oh, HTTP_RELAY_HEADER, hv);
	/* one request a connection: evhttp frees a connection it was told to
	 * (free_on_completion) only once it is to be closed */
	evhttp_add_header(oh, "Connection", "close");
	enum evhttp_cmd_type cmd = evhttp_request_get_command(c->req);
	if (cmd == EVHTTP_REQ_POST)
		evbuffer_add_buffer(evhttp_request_get_output_buffer(rq),
				    evhttp_request_get_input_buffer(c->req));
	if (evhttp_make_request(r->conn, rq, cmd, evhttp_request_get_uri(c->req))) {
		rq = NULL; /* evhttp frees a request it could not make */
		goto fail;
	}
	evhttp_connection_free_on_completion(r->conn);
	r->next = h->relay_list;
	if (r->next)
		r->next->prev = r;
	h->relay_list = r;
	h->relays++;
	return 1;
fail:
	if (rq)
		evhttp_request_free(rq);
	if (r && r->conn)
		evhttp_connection_free(r->conn);
	free(r);
	render_error(&c->v, 503, "this mirror cannot hand the request to its node now; try again "
		     "shortly");
	c->v.r.retry_after = 1;
	return 0;
}

void http_relay_drop_all(http_t *h)
{
	for (struct http_relay *r = h->relay_list, *nx; r; r = nx) {
		nx = r->next;
		r->h = NULL;
		evhttp_connection_free(r->conn);
		/* the client's request: evhttp's to free with its connection,
		 * unless the client left (as the render pool's jobs) */
		if (!evhttp_request_get_connection(r->req))
			evhttp_request_free(r->req);
		free(r);
	}
	h->relay_list = NULL;
	h->relays = 0;
}
