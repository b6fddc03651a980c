/* Range-based set reconciliation: both roles; the messages' codec is in
 * recon_codec.c. docs/sync.md specifies the format; these files follow
 * it.
 *
 * A message covers the whole key space in order, as consecutive ranges
 * [previous bound, bound), each with a mode:
 *   SKIP     nothing to say
 *   FP       8-byte keyed fingerprint of the sender's items in the range
 *   LIST     the sender's items in the range as 6-byte keyed short ids
 *   REPLY    answer to a LIST: full ids the lister lacks, and the short
 *            ids of listed items the replier lacks
 *   IDS      answer to REPLY's lacks: the full ids */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

#define FP_LEN 8
#define SID_LEN 6
#define BOUND_MAX_BYTES (10 + 2 + RECON_ID_LEN)
#define FLAG_KEY 0x01
#define MSG_MIN_BYTES (64u << 10)
/* Work units: one per item hashed or copied, this much per tree descent. */
#define WORK_DESCENT 16

static const char *const mode_name[M_COUNT] = {"SKIP", "FP", "LIST", "REPLY", "IDS"};

enum { ST_NEW, ST_WAIT, ST_DONE };

struct recon_session {
	const recon_set_t *set;
	recon_role_t role;
	recon_config_t cfg;
	uint8_t key[RECON_KEY_LEN];
	int keyed;
	uint8_t fp_key[crypto_shorthash_siphash24_KEYBYTES];
	uint8_t sid_key[crypto_shorthash_siphash24_KEYBYTES];
	int state;
	int err;
	pith_err_t errrec;
	recon_stats_t st;
	size_t split_max;     /* worst-case bytes of an emit_split answer */
	/* scratch reused across steps */
	recon_item_t *items;
	uint64_t *sids, *sids2;
	size_t scratch_cap;
};

/* ---- small helpers ---------------------------------------------------- */

void recon_config_default(recon_config_t *c)
{
	c->max_msg_bytes = 256u << 10;
	c->max_ranges = 65536;
	c->max_rounds = 4096;
	c->max_session_bytes = UINT64_C(1) << 30;
	c->max_work = 2000000;
	c->fanout = 16;
	c->list_max = 32;
	c->reply_max = 256;
}

void recon_ids_release(recon_ids_t *ids)
{
	if (!ids)
		return;
	free(ids->ids);
	free(ids->ts);
	ids->ids = NULL;
	ids->ts = NULL;
	ids->n = ids->cap = 0;
}

static int ids_push(recon_ids_t *ids, const uint8_t *id, uint64_t ts)
{
	if (!ids)
		return 0;
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 64;
		void *p = realloc(ids->ids, cap * RECON_ID_LEN);
		if (!p)
			return PITH_ENOMEM;
		ids->ids = p;
		if (!(p = realloc(ids->ts, cap * sizeof(*ids->ts))))
			return PITH_ENOMEM;
		ids->ts = p;
		ids->cap = cap;
	}
	ids->ts[ids->n] = ts;
	memcpy(ids->ids[ids->n++], id, RECON_ID_LEN);
	return 0;
}

static void fp_compute(const recon_session_t *s, const sum256_t *lo, const sum256_t *hi,
		       uint64_t count, uint8_t out[FP_LEN])
{
	sum256_t d = *hi;
	sum256_sub(&d, lo);
	uint8_t in[40];
	for (int i = 0; i < 4; i++)
		wr_le64(in + 8 * i, d.w[i]);
	wr_le64(in + 32, count);
	crypto_shorthash_siphash24(out, in, sizeof(in), s->fp_key);
}

/* The 6-byte short id as a number (for sorting). */
static uint64_t sid_of(const recon_session_t *s, const uint8_t *id)
{
	uint8_t h[8];
	crypto_shorthash_siphash24(h, id, RECON_ID_LEN, s->sid_key);
	uint64_t v = 0;
	for (int i = 0; i < SID_LEN; i++)
		v = v << 8 | h[i];
	return v;
}

static void sid_put(uint8_t *p, uint64_t v)
{
	for (int i = SID_LEN - 1; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t sid_get(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < SID_LEN; i++)
		v = v << 8 | p[i];
	return v;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int u64_in(const uint64_t *sorted, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sorted[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && sorted[lo] == v;
}

static int scratch_reserve(recon_session_t *s, size_t n)
{
	if (n <= s->scratch_cap && s->items)
		return 0;
	size_t cap = n < 256 ? 256 : n;
	recon_item_t *it = realloc(s->items, cap * sizeof(*it));
	if (!it)
		return PITH_ENOMEM;
	s->items = it;
	uint64_t *a = realloc(s->sids, cap * sizeof(*a));
	if (!a)
		return PITH_ENOMEM;
	s->sids = a;
	uint64_t *b = realloc(s->sids2, cap * sizeof(*b));
	if (!b)
		return PITH_ENOMEM;
	s->sids2 = b;
	s->scratch_cap = cap;
	return 0;
}

/* Copies our items [r0, r1) into s->items (r1 - r0 <= scratch_cap). */
static void copy_items(recon_session_t *s, size_t r0, size_t r1)
{
	if (r0 >= r1)
		return;
	const leaf_t *l;
	uint32_t pos;
	rset_seek(s->set, r0, &l, &pos, NULL);
	for (size_t k = 0; k < r1 - r0; k++) {
		while (pos >= l->n) {
			l = l->next;
			pos = 0;
		}
		s->items[k] = l->it[pos++];
	}
}

/* ---- producing ranges ------------------------------------------------- */

/* A bound and, once located, our rank and prefix sum there. */
typedef struct pos {
	bound_t b;
	size_t rank;
	sum256_t sum;
	int located;
} pos_t;

static void locate(const recon_session_t *s, const bound_t *b, pos_t *p)
{
	p->b = *b;
	p->located = 1;
	if (b->inf) {
		p->rank = s->set->count;
		p->sum = s->set->total;
	} else {
		rset_locate(s->set, b->ts, b->id, &p->rank, &p->sum);
	}
}

/* Our items [lo, hi) as a LIST range. */
static int emit_list(recon_session_t *s, wr_t *w, const pos_t *lo, const pos_t *hi,
		     uint64_t *work)
{
	size_t n = hi->rank - lo->rank;
	int rc = scratch_reserve(s, n);
	if (rc)
		return rc;
	copy_items(s, lo->rank, hi->rank);
	recon_wr_range(w, &lo->b, &hi->b, M_LIST);
	recon_put_varint(w->out, n);
	if (pith_buf_reserve(w->out, n * SID_LEN))
		return PITH_ENOMEM;
	for (size_t k = 0; k < n; k++) {
		sid_put(w->out->data + w->out->len, sid_of(s, s->items[k].id));
		w->out->len += SID_LEN;
	}
	*work += n + WORK_DESCENT;
	w->demands = 1;
	return w->out->oom ? PITH_ENOMEM : 0;
}

/* Asks about our items in [lo, hi): a LIST when few, else fanout FP
 * children split at equal counts. */
static int emit_split(recon_session_t *s, wr_t *w, const pos_t *lo, const pos_t *hi,
		      uint64_t *work)
{
	size_t n = hi->rank - lo->rank;
	if (n <= s->cfg.list_max)
		return emit_list(s, w, lo, hi, work);
	size_t k = s->cfg.fanout < n ? s->cfg.fanout : n;
	pos_t cur = *lo;
	for (size_t i = 1; i <= k; i++) {
		pos_t nxt;
		uint8_t fp[FP_LEN];
		if (i == k) {
			nxt = *hi;
			recon_wr_range(w, &cur.b, &nxt.b, M_FP);
		} else {
			/* one descent: the item at the split, the one before
			 * it and the sum of everything before it */
			nxt.rank = lo->rank + n * i / k;
			const leaf_t *l;
			uint32_t at;
			rset_seek(s->set, nxt.rank, &l, &at, &nxt.sum);
			const recon_item_t *q = &l->it[at];
			const recon_item_t *p = at ? &l->it[at - 1] : &l->prev->it[l->prev->n - 1];
			recon_wr_range_gap(w, &cur.b, p, q, M_FP, &nxt.b);
			*work += WORK_DESCENT;
		}
		fp_compute(s, &cur.sum, &nxt.sum, nxt.rank - cur.rank, fp);
		if (pith_buf_append(w->out, fp, FP_LEN))
			return PITH_ENOMEM;
		cur = nxt;
	}
	w->demands = 1;
	return 0;
}

/* ---- the session ------------------------------------------------------ */

static int fail(recon_session_t *s, pith_err_t *err, int code)
{
	s->err = code;
	s->errrec = *err;
	s->errrec.code = code;
	return code;
}

static int sticky(const recon_session_t *s, pith_err_t *err)
{
	if (err)
		*err = s->errrec;
	return s->err;
}

static int config_check(const recon_config_t *c, pith_err_t *err)
{
	/* The largest answer to one range (a REPLY for a full LIST, about
	 * 39 KB) must fit an otherwise empty message, or the exchange could
	 * stall. */
	if (c->max_msg_bytes < MSG_MIN_BYTES)
		return pith_err_set(err, PITH_EINVAL, "recon: max_msg_bytes below %u",
				    MSG_MIN_BYTES);
	if (c->fanout < 2 || c->fanout > 64)
		return pith_err_set(err, PITH_EINVAL, "recon: fanout %u not in 2..64",
				    c->fanout);
	if (c->list_max < 1 || c->list_max > RANGE_IDS_MAX)
		return pith_err_set(err, PITH_EINVAL, "recon: list_max %u not in 1..%d",
				    c->list_max, RANGE_IDS_MAX);
	if (c->reply_max < c->list_max || c->reply_max > RANGE_IDS_MAX)
		return pith_err_set(err, PITH_EINVAL,
				    "recon: reply_max %u not in list_max..%d", c->reply_max,
				    RANGE_IDS_MAX);
	if (c->max_ranges < 1 || c->max_rounds < 1 || c->max_work < 1)
		return pith_err_set(err, PITH_EINVAL, "recon: a zero limit");
	return 0;
}

static void derive_keys(recon_session_t *s)
{
	static const char fp_label[] = "pith-recon-v1 fingerprint";
	static const char sid_label[] = "pith-recon-v1 short id";
	crypto_generichash(s->fp_key, sizeof(s->fp_key), (const uint8_t *)fp_label,
			   sizeof(fp_label) - 1, s->key, RECON_KEY_LEN);
	crypto_generichash(s->sid_key, sizeof(s->sid_key), (const uint8_t *)sid_label,
			   sizeof(sid_label) - 1, s->key, RECON_KEY_LEN);
	s->keyed = 1;
}

recon_session_t *recon_session_new(const recon_set_t *set, recon_role_t role,
				   const recon_config_t *cfg, const uint8_t *key,
				   pith_err_t *err)
{
	pith_err_t dummy;
	if (!err)
		err = &dummy;
	if (sodium_init() < 0) {
		pith_err_set(err, PITH_EIO, "recon: libsodium failed to initialise");
		return NULL;
	}
	if (role != RECON_INITIATOR && role != RECON_RESPONDER) {
		pith_err_set(err, PITH_EINVAL, "recon: unknown role %d", (int)role);
		return NULL;
	}
	recon_session_t *s = calloc(1, sizeof(*s));
	if (!s) {
		pith_err_set(err, PITH_ENOMEM, "recon: out of memory");
		return NULL;
	}
	if (cfg)
		s->cfg = *cfg;
	else
		recon_config_default(&s->cfg);
	if (config_check(&s->cfg, err)) {
		free(s);
		return NULL;
	}
	s->set = set;
	s->role = role;
	s->state = ST_NEW;
	if (role == RECON_INITIATOR) {
		if (key)
			memcpy(s->key, key, RECON_KEY_LEN);
		else
			randombytes_buf(s->key, RECON_KEY_LEN);
		derive_keys(s);
	}
	size_t split = (size_t)s->cfg.fanout * (BOUND_MAX_BYTES + FP_LEN);
	size_t list = BOUND_MAX_BYTES + 10 + (size_t)s->cfg.list_max * SID_LEN;
	s->split_max = split > list ? split : list;
	return s;
}

void recon_session_free_(recon_session_t *s)
{
	if (!s)
		return;
	free(s->items);
	free(s->sids);
	free(s->sids2);
	sodium_memzero(s->key, sizeof(s->key));
	free(s);
}

bool recon_session_is_done(const recon_session_t *s)
{
	return s->state == ST_DONE;
}

int recon_session_error(const recon_session_t *s)
{
	return s->err;
}

void recon_session_stats(const recon_session_t *s, recon_stats_t *out)
{
	*out = s->st;
}

static void msg_header(recon_session_t *s, pith_buf_t *out, int with_key)
{
	pith_buf_reset(out);
	pith_buf_putc(out, RECON_VERSION);
	pith_buf_putc(out, with_key ? FLAG_KEY : 0);
	if (with_key)
		pith_buf_append(out, s->key, RECON_KEY_LEN);
}

int recon_initiate(recon_session_t *s, pith_buf_t *out, pith_err_t *err)
{
	pith_err_t dummy;
	if (!err)
		err = &dummy;
	if (s->err)
		return sticky(s, err);
	if (s->role != RECON_INITIATOR || s->state != ST_NEW) {
		pith_err_set(err, PITH_EINVAL, "recon: initiate called %s",
			     s->role != RECON_INITIATOR ? "by a responder" : "twice");
		return fail(s, err, PITH_EINVAL);
	}
	msg_header(s, out, 1);
	wr_t w = {.out = out};
	pos_t lo = {.b = {0}}, hi;
	bound_t inf = {.inf = 1};
	sum256_zero(&lo.sum);
	lo.rank = 0;
	locate(s, &inf, &hi);
	uint64_t work = 0;
	int rc = emit_split(s, &w, &lo, &hi, &work);
	if (!rc)
		rc = recon_wr_finish(&w);
	if (rc) {
		pith_err_set(err, rc, "recon: out of memory");
		return fail(s, err, rc);
	}
	s->state = ST_WAIT;
	s->st.rounds_out++;
	s->st.bytes_out += out->len;
	return 0;
}

/* State of one incoming message being answered. */
typedef struct step {
	recon_session_t *s;
	wr_t w;
	recon_ids_t *have, *need;
	uint64_t work;
	int deferring;    /* limits reached: answer nothing more in detail */
	pos_t defer_lo;   /* where the unanswered part starts */
	int dropped;      /* something after defer_lo still needs an answer */
	size_t answered;  /* ranges answered in detail */
} step_t;

/* Checks the budget before answering a range that starts at lo with at
 * most answer_max bytes; returns 1 if the answer must be deferred. The
 * room kept back covers a SKIP before the range, the deferral FP and the
 * final SKIP, so a message never exceeds max_msg_bytes. (config_check
 * makes sure that the largest single answer fits an empty message, so
 * every message answers at least one range: the exchange progresses.) */
static int must_defer(step_t *t, const pos_t *lo, size_t answer_max)
{
	size_t room = answer_max + 3 * BOUND_MAX_BYTES + FP_LEN + 16;
	if (!t->deferring &&
	    (t->w.out->len + room > t->s->cfg.max_msg_bytes ||
	     (t->work > t->s->cfg.max_work && t->answered > 0))) {
		t->deferring = 1;
		t->defer_lo = *lo;
	}
	if (t->deferring)
		t->dropped = 1;
	else
		t->answered++;
	return t->deferring;
}

static size_t max_sz(size_t a, size_t b)
{
	return a > b ? a : b;
}

static int push_have(step_t *t, const recon_item_t *it)
{
	t->s->st.have++;
	return ids_push(t->have, it->id, it->ts);
}

/* Answers a LIST of m short ids (sorted into s->sids2) for [lo, hi). */
static int answer_list(step_t *t, const pos_t *lo, const pos_t *hi, const uint8_t *list,
		       size_t m)
{
	recon_session_t *s = t->s;
	size_t n = hi->rank - lo->rank;
	int rc;
	if (n > s->cfg.reply_max && m > 0)
		return emit_split(s, &t->w, lo, hi, &t->work);
	if (n > s->cfg.reply_max) {
		/* The peer has nothing here: stream our ids in chunks, as many
		 * as fit; the rest is deferred like any other answer. */
		pos_t cur = *lo;
		while (cur.rank < hi->rank) {
			if (cur.rank > lo->rank &&
			    must_defer(t, &cur, 20 + (size_t)s->cfg.reply_max * RECON_ID_LEN))
				return 0;
			size_t end = cur.rank + s->cfg.reply_max;
			pos_t nxt;
			if ((rc = scratch_reserve(s, s->cfg.reply_max + 1)))
				return rc;
			if (end >= hi->rank) {
				end = hi->rank;
				nxt = *hi;
				copy_items(s, cur.rank, end);
				recon_wr_range(&t->w, &cur.b, &nxt.b, M_REPLY);
			} else {
				copy_items(s, cur.rank, end + 1);
				nxt.rank = end;
				recon_wr_range_gap(&t->w, &cur.b, &s->items[end - cur.rank - 1],
						   &s->items[end - cur.rank], M_REPLY, &nxt.b);
				const leaf_t *l;
				uint32_t at;
				rset_seek(s->set, end, &l, &at, &nxt.sum);
				t->work += WORK_DESCENT;
			}
			size_t c = end - cur.rank;
			recon_put_varint(t->w.out, c);
			for (size_t k = 0; k < c; k++) {
				pith_buf_append(t->w.out, s->items[k].id, RECON_ID_LEN);
				if ((rc = push_have(t, &s->items[k])))
					return rc;
			}
			recon_put_varint(t->w.out, 0);
			t->work += c + 2 * WORK_DESCENT;
			cur = nxt;
		}
		return t->w.out->oom ? PITH_ENOMEM : 0;
	}
	if ((rc = scratch_reserve(s, n > m ? n : m)))
		return rc;
	copy_items(s, lo->rank, hi->rank);
	for (size_t k = 0; k < m; k++)
		s->sids2[k] = sid_get(list + k * SID_LEN);
	qsort(s->sids2, m, sizeof(uint64_t), u64_cmp);
	for (size_t k = 0; k < n; k++)
		s->sids[k] = sid_of(s, s->items[k].id);
	t->work += n + m + WORK_DESCENT;
	size_t extras = 0;
	for (size_t k = 0; k < n; k++)
		if (!u64_in(s->sids2, m, s->sids[k]))
			extras++;
	/* our short ids, sorted, to find the listed ones we lack */
	uint64_t *own = malloc((n ? n : 1) * sizeof(uint64_t));
	if (!own)
		return PITH_ENOMEM;
	memcpy(own, s->sids, n * sizeof(uint64_t));
	qsort(own, n, sizeof(uint64_t), u64_cmp);
	size_t lacks = 0;
	for (size_t k = 0; k < m; k++)
		if ((k == 0 || s->sids2[k] != s->sids2[k - 1]) && !u64_in(own, n, s->sids2[k]))
			lacks++;
	if (extras == 0 && lacks == 0) {
		free(own);
		return 0;
	}
	recon_wr_range(&t->w, &lo->b, &hi->b, M_REPLY);
	recon_put_varint(t->w.out, extras);
	for (size_t k = 0; k < n; k++) {
		if (u64_in(s->sids2, m, s->sids[k]))
			continue;
		pith_buf_append(t->w.out, s->items[k].id, RECON_ID_LEN);
		if ((rc = push_have(t, &s->items[k]))) {
			free(own);
			return rc;
		}
	}
	recon_put_varint(t->w.out, lacks);
	if (pith_buf_reserve(t->w.out, lacks * SID_LEN)) {
		free(own);
		return PITH_ENOMEM;
	}
	for (size_t k = 0; k < m; k++) {
		if ((k == 0 || s->sids2[k] != s->sids2[k - 1]) && !u64_in(own, n, s->sids2[k])) {
			sid_put(t->w.out->data + t->w.out->len, s->sids2[k]);
			t->w.out->len += SID_LEN;
		}
	}
	free(own);
	if (lacks)
		t->w.demands = 1;
	return t->w.out->oom ? PITH_ENOMEM : 0;
}

/* Answers REPLY's lacks (sorted in s->sids2, m of them) with IDS. */
static int answer_lacks(step_t *t, const pos_t *lo, const pos_t *hi, size_t m)
{
	recon_session_t *s = t->s;
	size_t n = hi->rank - lo->rank;
	int rc;
	if (n > 2 * RANGE_IDS_MAX)
		/* we never listed that many: the set changed or the peer lies;
		 * ask again about the range instead of scanning it */
		return emit_split(s, &t->w, lo, hi, &t->work);
	if ((rc = scratch_reserve(s, n)))
		return rc;
	copy_items(s, lo->rank, hi->rank);
	size_t found = 0;
	for (size_t k = 0; k < n; k++) {
		s->sids[k] = sid_of(s, s->items[k].id);
		if (u64_in(s->sids2, m, s->sids[k]) && found < m)
			found++;
		else
			s->sids[k] = UINT64_MAX; /* not sent */
	}
	t->work += n + m + WORK_DESCENT;
	if (!found)
		return 0;
	recon_wr_range(&t->w, &lo->b, &hi->b, M_IDS);
	recon_put_varint(t->w.out, found);
	for (size_t k = 0; k < n; k++) {
		if (s->sids[k] == UINT64_MAX)
			continue;
		pith_buf_append(t->w.out, s->items[k].id, RECON_ID_LEN);
		if ((rc = push_have(t, &s->items[k])))
			return rc;
	}
	return t->w.out->oom ? PITH_ENOMEM : 0;
}

/* Reads n full ids (the peer's, that we lack) into need. */
static int read_need(step_t *t, rd_t *r, size_t n, const char *what, pith_err_t *err)
{
	const uint8_t *p = NULL;
	int rc = recon_rd_bytes(r, n * RECON_ID_LEN, &p, what, err);
	if (rc)
		return rc;
	for (size_t k = 0; k < n; k++) {
		t->s->st.need++;
		if (ids_push(t->need, p + k * RECON_ID_LEN, RECON_TS_NONE))
			return pith_err_set(err, PITH_ENOMEM, "recon: out of memory");
	}
	return 0;
}

static void need_pos(step_t *t, pos_t *p)
{
	if (p->located)
		return;
	locate(t->s, &p->b, p);
	t->work += WORK_DESCENT;
}

static int process(step_t *t, rd_t *r, int *demanded, pith_err_t *err)
{
	recon_session_t *s = t->s;
	pos_t lo = {.b = {0}, .located = 1};
	lo.rank = 0;
	sum256_zero(&lo.sum);
	size_t nranges = 0;
	int rc;
	while (r->off < r->len) {
		size_t at = r->off;
		if (lo.b.inf)
			return pith_err_set(err, PITH_EINVAL,
					    "recon: range at byte %zu after the end of the key space",
					    at);
		if (++nranges > s->cfg.max_ranges)
			return pith_err_set(err, PITH_ETOOBIG,
					    "recon: more than %zu ranges (byte %zu)",
					    s->cfg.max_ranges, at);
		bound_t hb = {0};
		int mode;
		if ((rc = recon_read_bound(r, &lo.b, &hb, &mode, err)))
			return rc;
		/* located lazily: SKIP ranges and received ids need no descent */
		pos_t hi = {.b = hb, .located = 0};
		const uint8_t *p = NULL;
		size_t n, n2;
		switch (mode) {
		case M_SKIP:
			break;
		case M_FP: {
			*demanded = 1;
			if ((rc = recon_rd_bytes(r, FP_LEN, &p, "fingerprint", err)))
				return rc;
			uint8_t fp[FP_LEN];
			need_pos(t, &lo);
			need_pos(t, &hi);
			fp_compute(s, &lo.sum, &hi.sum, hi.rank - lo.rank, fp);
			if (memcmp(fp, p, FP_LEN) == 0 || must_defer(t, &lo, s->split_max))
				break;
			rc = emit_split(s, &t->w, &lo, &hi, &t->work);
			break;
		}
		case M_LIST:
			*demanded = 1;
			if ((rc = recon_read_count(r, SID_LEN, "list length", &n, err)))
				return rc;
			if ((rc = recon_rd_bytes(r, n * SID_LEN, &p, "short ids", err)))
				return rc;
			need_pos(t, &lo);
			need_pos(t, &hi);
			if (must_defer(t, &lo, max_sz(s->split_max,
						      20 + (size_t)s->cfg.reply_max * RECON_ID_LEN +
							      n * SID_LEN)))
				break;
			rc = answer_list(t, &lo, &hi, p, n);
			break;
		case M_REPLY:
			if ((rc = recon_read_count(r, RECON_ID_LEN, "reply id count", &n, err)) ||
			    (rc = read_need(t, r, n, "reply ids", err)))
				return rc;
			if ((rc = recon_read_count(r, SID_LEN, "lack count", &n2, err)))
				return rc;
			if ((rc = recon_rd_bytes(r, n2 * SID_LEN, &p, "lacked short ids", err)))
				return rc;
			if (n == 0 && n2 == 0)
				return pith_err_set(err, PITH_EINVAL,
						    "recon: empty REPLY at byte %zu", at);
			if (n2 == 0)
				break;
			*demanded = 1;
			need_pos(t, &lo);
			need_pos(t, &hi);
			if (must_defer(t, &lo, max_sz(s->split_max, 10 + n2 * RECON_ID_LEN)))
				break;
			if ((rc = scratch_reserve(s, n2)))
				break;
			for (size_t k = 0; k < n2; k++)
				s->sids2[k] = sid_get(p + k * SID_LEN);
			qsort(s->sids2, n2, sizeof(uint64_t), u64_cmp);
			rc = answer_lacks(t, &lo, &hi, n2);
			break;
		case M_IDS:
			if ((rc = recon_read_count(r, RECON_ID_LEN, "id count", &n, err)))
				return rc;
			if (n == 0)
				return pith_err_set(err, PITH_EINVAL,
						    "recon: empty IDS at byte %zu", at);
			if ((rc = read_need(t, r, n, "ids", err)))
				return rc;
			break;
		}
		if (rc)
			return pith_err_set(err, rc, "recon: out of memory answering %s at byte %zu",
					    mode_name[mode], at);
		lo = hi;
	}
	if (nranges > 0 && !lo.b.inf)
		return pith_err_set(err, PITH_ETRUNC,
				    "recon: message ends before the top of the key space");
	return 0;
}

int recon_respond(recon_session_t *s, const uint8_t *in, size_t len, pith_buf_t *out,
		  recon_ids_t *have, recon_ids_t *need, pith_err_t *err)
{
	pith_err_t dummy;
	if (!err)
		err = &dummy;
	if (s->err)
		return sticky(s, err);
	pith_buf_reset(out);
	int rc;
	if (s->state == ST_DONE || (s->state == ST_NEW && s->role == RECON_INITIATOR)) {
		pith_err_set(err, PITH_EINVAL, "recon: unexpected message (session %s)",
			     s->state == ST_DONE ? "already done" : "not initiated");
		return fail(s, err, PITH_EINVAL);
	}
	if (len > s->cfg.max_msg_bytes) {
		pith_err_set(err, PITH_ETOOBIG, "recon: message of %zu bytes over the limit %zu",
			     len, s->cfg.max_msg_bytes);
		return fail(s, err, PITH_ETOOBIG);
	}
	s->st.rounds_in++;
	s->st.bytes_in += len;
	if (s->st.rounds_in > s->cfg.max_rounds) {
		pith_err_set(err, PITH_ETOOBIG, "recon: more than %u messages in one session",
			     s->cfg.max_rounds);
		return fail(s, err, PITH_ETOOBIG);
	}
	if (s->st.bytes_in + s->st.bytes_out > s->cfg.max_session_bytes) {
		pith_err_set(err, PITH_ETOOBIG, "recon: session over %llu bytes",
			     (unsigned long long)s->cfg.max_session_bytes);
		return fail(s, err, PITH_ETOOBIG);
	}
	rd_t r = {in, len, 0};
	const uint8_t *p = NULL;
	if ((rc = recon_rd_bytes(&r, 2, &p, "header", err)))
		return fail(s, err, rc);
	if (p[0] != RECON_VERSION) {
		pith_err_set(err, PITH_EINVAL, "recon: version %u, expected %u", p[0],
			     RECON_VERSION);
		return fail(s, err, PITH_EINVAL);
	}
	if (p[1] & ~FLAG_KEY) {
		pith_err_set(err, PITH_EINVAL, "recon: unknown flags 0x%02x at byte 1", p[1]);
		return fail(s, err, PITH_EINVAL);
	}
	int first = s->role == RECON_RESPONDER && s->state == ST_NEW;
	if (!!(p[1] & FLAG_KEY) != first) {
		pith_err_set(err, PITH_EINVAL, first ? "recon: first message lacks the session key"
						     : "recon: session key after the first message");
		return fail(s, err, PITH_EINVAL);
	}
	if (first) {
		if ((rc = recon_rd_bytes(&r, RECON_KEY_LEN, &p, "session key", err)))
			return fail(s, err, rc);
		memcpy(s->key, p, RECON_KEY_LEN);
		derive_keys(s);
	}
	msg_header(s, out, 0);
	step_t t = {.s = s, .have = have, .need = need};
	t.w.out = out;
	int demanded = 0;
	if ((rc = process(&t, &r, &demanded, err)))
		return fail(s, err, rc);
	if (t.dropped) {
		/* One fingerprint for everything not answered: the peer splits
		 * it again next round. */
		pos_t hi;
		bound_t inf = {.inf = 1};
		uint8_t fp[FP_LEN];
		locate(s, &inf, &hi);
		recon_wr_range(&t.w, &t.defer_lo.b, &hi.b, M_FP);
		fp_compute(s, &t.defer_lo.sum, &hi.sum, hi.rank - t.defer_lo.rank, fp);
		pith_buf_append(out, fp, FP_LEN);
		t.w.demands = 1;
		s->st.deferred++;
	}
	if ((rc = recon_wr_finish(&t.w)) || out->oom) {
		pith_err_set(err, PITH_ENOMEM, "recon: out of memory");
		return fail(s, err, PITH_ENOMEM);
	}
	if (!demanded && !t.w.any)
		out->len = 0;
	s->state = t.w.demands ? ST_WAIT : ST_DONE;
	if (out->len) {
		s->st.rounds_out++;
		s->st.bytes_out += out->len;
	}
	return 0;
}
