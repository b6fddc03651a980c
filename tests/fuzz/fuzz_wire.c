/* libFuzzer harness for the wire protocol: the reader and decoder pithd
 * runs on every byte a peer sends (proto/wire.h).
 *
 * The input is a byte stream. It goes through one reader whole and through
 * a second one in chunks (sizes drawn from the input itself); both must
 * pull the same messages and end in the same state, and every error must
 * be one of truncated / too big / malformed and stay sticky. Every message
 * pulled must re-encode, and re-encoding is a fixed point: decode(encode(m))
 * encodes to the same bytes. The input is also decoded as one bare payload
 * under tight limits. Any broken invariant aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_MSGS 256

typedef struct trace {
	size_t n;
	size_t frame_len[MAX_MSGS];
	int type[MAX_MSGS];
	int end; /* 0 clean, 1 partial frame pending, <0 error */
} trace_t;

static void check_reencode(const wire_msg_t *m)
{
	pith_buf_t a = PITH_BUF_INIT, b = PITH_BUF_INIT;
	wire_msg_t d;
	pith_err_t err = {0};
	FUZZ_CHECK(wire_encode(m, &a) == 0);
	FUZZ_CHECK(a.len > WIRE_HEADER_LEN);
	int rc = wire_decode(a.data + WIRE_HEADER_LEN, a.len - WIRE_HEADER_LEN, NULL, &d, &err);
	if (rc)
		fprintf(stderr, "fuzz_wire: re-encoded %s refused: %s\n", wire_type_name(m->type), err.msg);
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(d.type == m->type);
	FUZZ_CHECK(wire_encode(&d, &b) == 0);
	FUZZ_CHECK(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
	pith_buf_release(&a);
	pith_buf_release(&b);
}

static int ok_code(int rc)
{
	return rc == PITH_EINVAL || rc == PITH_ETRUNC || rc == PITH_ETOOBIG;
}

/* Runs data through a reader fed `chunk` bytes at a time (0: all at once;
 * chunk sizes cycle through `sizes` when given). */
static void run(const uint8_t *data, size_t size, const uint8_t *sizes, size_t nsizes,
		const wire_limits_t *lim, trace_t *t, int check)
{
	wire_reader_t *r = wire_reader_new(lim);
	FUZZ_CHECK(r != NULL);
	memset(t, 0, sizeof(*t));
	size_t off = 0, k = 0;
	int rc = 0;
	while (rc >= 0) {
		wire_msg_t m;
		size_t flen = 0;
		rc = wire_reader_next(r, &m, &flen);
		if (rc == 1) {
			if (t->n < MAX_MSGS) {
				t->frame_len[t->n] = flen;
				t->type[t->n] = m.type;
			}
			t->n++;
			if (check)
				check_reencode(&m);
			continue;
		}
		if (rc < 0)
			break;
		if (off == size)
			break;
		size_t want = nsizes ? (size_t)sizes[k++ % nsizes] + 1 : size - off;
		size_t room = wire_reader_room(r);
		if (want > room)
			want = room;
		if (want > size - off)
			want = size - off;
		FUZZ_CHECK(want > 0);
		FUZZ_CHECK(wire_reader_feed(r, data + off, want) == 0);
		off += want;
	}
	if (rc < 0) {
		pith_err_t err = {0};
		FUZZ_CHECK(ok_code(rc));
		FUZZ_CHECK(wire_reader_error(r, &err) == rc && err.code == rc);
		FUZZ_CHECK(strncmp(err.msg, "wire: ", 6) == 0);
		/* sticky */
		wire_msg_t m;
		FUZZ_CHECK(wire_reader_next(r, &m, NULL) == rc);
		FUZZ_CHECK(wire_reader_feed(r, data, 1) == rc);
		t->end = rc;
	} else {
		int fin = wire_reader_finish(r, NULL);
		FUZZ_CHECK(fin == 0 || fin == PITH_ETRUNC);
		t->end = fin ? 1 : 0;
	}
	wire_reader_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wire_limits_t lim = wire_limits_default;
	lim.max_frame = 1 << 16;
	lim.max_buffer = lim.max_frame + WIRE_HEADER_LEN + 1024;
	trace_t whole, chunked;
	run(data, size, NULL, 0, &lim, &whole, 1);
	/* chunk sizes come from the input's first bytes */
	size_t ns = size < 8 ? size : 8;
	run(data, size, data, ns, &lim, &chunked, 0);
	FUZZ_CHECK(whole.n == chunked.n);
	for (size_t i = 0; i < whole.n && i < MAX_MSGS; i++)
		FUZZ_CHECK(whole.frame_len[i] == chunked.frame_len[i] && whole.type[i] == chunked.type[i]);
	FUZZ_CHECK(whole.end == chunked.end);

	/* the input as one payload, under tight limits */
	wire_limits_t tight = lim;
	tight.max_ids = 3;
	tight.max_peers = 2;
	tight.max_refs = 2;
	wire_msg_t m;
	pith_err_t err = {0};
	int rc = wire_decode(data, size, &tight, &m, &err);
	if (rc) {
		FUZZ_CHECK(ok_code(rc));
		FUZZ_CHECK(err.code == rc && err.offset <= size);
	} else {
		check_reencode(&m);
	}
	return 0;
}
