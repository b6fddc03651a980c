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
 *   IDS      answer to REPLY's lacks: the full ids
 * Version 2 adds an estimating first message (FP ranges of falling sizes)
 * and two modes (recon_cells.c):
 *   CELLS    the sender's items in the range coded into invertible cells
 *   CREPLY   answer to CELLS: full ids the coder lacks, and the 8-byte
 *            keys of the coder's items the decoder lacks (answered by IDS) */
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

#define FP_LEN 8
#define SID_LEN 6
#define BOUND_MAX_BYTES (10 + 2 + RECON_ID_LEN)
#define FLAG_KEY 0x01
#define FLAG_EST 0x02 /* version 2, first message: its FPs sample the sets */
/* An estimating message: at most this many ranges; blocks of the set,
 * each cut into ranges of falling sizes (3/4 of what is left, each time). */
#define EST_RANGES_MAX 4096
#define EST_BLOCKS 16
#define MSG_MIN_BYTES (64u << 10)
/* Work units: one per item hashed or copied, this much per tree descent. */
#define WORK_DESCENT 16

static const char *const mode_name[M_COUNT] = {"SKIP",  "FP",    "LIST",  "REPLY",
						"IDS",   "CELLS", "CREPLY"};

enum { ST_NEW, ST_WAIT, ST_DONE };

struct recon_session {
	const recon_set_t *set;
	recon_role_t role;
	recon_config_t cfg;
	uint8_t key[RECON_KEY_LEN];
	int keyed;
	uint8_t fp_key[crypto_shorthash_siphash24_KEYBYTES];
	uint8_t sid_key[crypto_shorthash_siphash24_KEYBYTES];
	uint64_t ck0, ck1;    /* where a key goes in cells (version 2) */
	uint32_t ver;         /* the session's version (0: not yet known) */
	double dens;          /* estimated differences per item (0: none) */
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
	c->version = RECON_VERSION_MAX;
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

/* Starts a range from cur to a bound at our rank r (cur.rank < r <
 * count), chosen in the gap below the item at r; nxt gets the bound, the
 * rank and the sum of the ids below it (one descent). */
static int wr_cut(recon_session_t *s, wr_t *w, const pos_t *cur, size_t r, int mode,
		  pos_t *nxt, uint64_t *work)
{
	const leaf_t *l;
	uint32_t at;
	nxt->rank = r;
	nxt->located = 1;
	rset_seek(s->set, r, &l, &at, &nxt->sum);
	const recon_item_t *q = &l->it[at];
	const recon_item_t *p = at ? &l->it[at - 1] : &l->prev->it[l->prev->n - 1];
	*work += WORK_DESCENT;
	return recon_wr_range_gap(w, &cur->b, p, q, mode, &nxt->b);
}

/* FP ranges over our items [lo, hi), cut at the k increasing ranks cut
 * (each strictly inside). */
static int emit_fps(recon_session_t *s, wr_t *w, const pos_t *lo, const pos_t *hi,
		    const size_t *cut, size_t k, uint64_t *work)
{
	pos_t cur = *lo;
	for (size_t i = 0; i <= k; i++) {
		pos_t nxt;
		uint8_t fp[FP_LEN];
		if (i == k) {
			nxt = *hi;
			recon_wr_range(w, &cur.b, &nxt.b, M_FP);
		} else {
			wr_cut(s, w, &cur, cut[i], M_FP, &nxt, work);
		}
		fp_compute(s, &cur.sum, &nxt.sum, nxt.rank - cur.rank, fp);
		if (pith_buf_append(w->out, fp, FP_LEN))
			return PITH_ENOMEM;
		cur = nxt;
	}
	w->demands = 1;
	return 0;
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
	size_t cut[64];
	for (size_t i = 1; i < k; i++)
		cut[i - 1] = lo->rank + n * i / k;
	return emit_fps(s, w, lo, hi, cut, k - 1, work);
}

/* ---- version 2: coded cells ------------------------------------------- */

/* Calls fn on our items at ranks [r0, r1), in order. */
#define EACH_ITEM(s, r0, r1, it, body)                                                     \
	do {                                                                               \
		size_t left_ = (r1) - (r0);                                                \
		if (!left_)                                                                \
			break;                                                             \
		const leaf_t *l_;                                                          \
		uint32_t pos_;                                                             \
		rset_seek((s)->set, (r0), &l_, &pos_, NULL);                               \
		while (left_) {                                                            \
			while (pos_ >= l_->n) {                                            \
				l_ = l_->next;                                             \
				pos_ = 0;                                                  \
			}                                                                  \
			const recon_item_t *it = &l_->it[pos_++];                          \
			left_--;                                                           \
			body;                                                              \
		}                                                                          \
	} while (0)

/* Our items [lo, hi) coded into m cells, as a CELLS range. */
static int emit_cells(recon_session_t *s, wr_t *w, const pos_t *lo, const pos_t *hi,
		      uint32_t m, uint64_t *work)
{
	recon_cells_t c;
	int rc = recon_cells_init(&c, m, s->ck0, s->ck1);
	if (rc)
		return rc;
	EACH_ITEM(s, lo->rank, hi->rank, it, recon_cells_toggle(&c, recon_cells_key(it->id), 1));
	*work += hi->rank - lo->rank + m + WORK_DESCENT;
	recon_wr_range(w, &lo->b, &hi->b, M_CELLS);
	recon_put_varint(w->out, m);
	if (pith_buf_reserve(w->out, (size_t)m * CELL_BYTES)) {
		recon_cells_release(&c);
		return PITH_ENOMEM;
	}
	recon_cells_put(&c, w->out->data + w->out->len);
	w->out->len += (size_t)m * CELL_BYTES;
	recon_cells_release(&c);
	w->demands = 1;
	return w->out->oom ? PITH_ENOMEM : 0;
}

/* The most items one CELLS range may cover: a receiver scans them all, so
 * it answers a longer one without scanning (half the work budget of a
 * message; at least 4,096). */
static size_t scan_max(const recon_session_t *s)
{
	uint64_t h = s->cfg.max_work / 2;
	return h < 4096 ? 4096 : (size_t)h;
}

/* Bytes a CELLS range of m cells takes, at most. */
static size_t cells_bytes(uint32_t m)
{
	return 2 * BOUND_MAX_BYTES + 12 + (size_t)m * CELL_BYTES;
}

/* Room left in the message being written, keeping back what a deferral
 * and the final SKIP need. */
static size_t room_left(const recon_session_t *s, const wr_t *w)
{
	size_t keep = 4 * BOUND_MAX_BYTES + 2 * FP_LEN + 32;
	return w->out->len + keep >= s->cfg.max_msg_bytes ? 0
							   : s->cfg.max_msg_bytes - w->out->len - keep;
}

/* Version 2's answer to a range that differs: with an estimate of the
 * density, our items coded in CELLS ranges of equal counts, each expecting
 * at most SPAN_EXPECT differences, as many as the message has room for
 * (at least one), then one FP for the rest; where differences are dense
 * (a quarter of the items or more), or without an estimate, version 1's
 * split. */
static int emit_split2(recon_session_t *s, wr_t *w, const pos_t *lo, const pos_t *hi,
		       uint64_t *work)
{
	size_t n = hi->rank - lo->rank;
	if (s->ver < RECON_VERSION_2 || s->dens <= 0 || n <= s->cfg.list_max)
		return emit_split(s, w, lo, hi, work);
	double e = recon_cells_expect(s->dens * (double)n);
	if (e * 4 >= (double)n || (double)n > SCAN_PER_DIFF * e)
		return emit_split(s, w, lo, hi, work);
	size_t parts = (size_t)ceil(e / SPAN_EXPECT);
	/* a span the peer scans at most scan_max items */
	size_t per = scan_max(s);
	if (parts < (n + per - 1) / per)
		parts = (n + per - 1) / per;
	if (parts > n / 4)
		parts = n / 4 ? n / 4 : 1;
	uint32_t m = recon_cells_for(e / (double)parts);
	size_t fit = room_left(s, w) / cells_bytes(m);
	if (fit < 1)
		fit = 1;
	size_t nspans = parts < fit ? parts : fit;
	pos_t cur = *lo;
	for (size_t i = 1; i <= nspans; i++) {
		pos_t nxt;
		int rc;
		/* coding scans: within the message's work budget, after one */
		if (i > 1 && *work + n / parts > s->cfg.max_work) {
			nspans = i - 1;
			break;
		}
		if (i == parts) {
			nxt = *hi;
		} else {
			/* locate the cut without writing: the CELLS range
			 * starts at cur and ends at the gap's bound */
			wr_t probe = *w;
			pith_buf_t tmp = PITH_BUF_INIT;
			probe.out = &tmp;
			rc = wr_cut(s, &probe, &cur, lo->rank + n * i / parts, M_SKIP, &nxt, work);
			pith_buf_release(&tmp);
			if (rc)
				return rc;
		}
		if ((rc = emit_cells(s, w, &cur, &nxt, m, work)))
			return rc;
		cur = nxt;
	}
	if (nspans < parts) {
		/* the rest as one FP: the peer splits it again */
		uint8_t fp[FP_LEN];
		recon_wr_range(w, &cur.b, &hi->b, M_FP);
		fp_compute(s, &cur.sum, &hi->sum, hi->rank - cur.rank, fp);
		if (pith_buf_append(w->out, fp, FP_LEN))
			return PITH_ENOMEM;
	}
	return w->out->oom ? PITH_ENOMEM : 0;
}

/* Version 2's first message: the set cut into EST_BLOCKS blocks of equal
 * counts, each into FP ranges of 3/4 of what is left, so the ranges' sizes
 * fall by a factor of 4 from 3/4 of a block down to one item. The
 * responder estimates the difference from which fingerprints differ. */
static int emit_estimate(recon_session_t *s, wr_t *w, const pos_t *lo, const pos_t *hi,
			 uint64_t *work)
{
	size_t n = hi->rank - lo->rank;
	size_t *cut = malloc(EST_RANGES_MAX * sizeof(*cut));
	if (!cut)
		return PITH_ENOMEM;
	size_t k = 0;
	for (size_t b = 0; b < EST_BLOCKS; b++) {
		size_t r0 = lo->rank + n * b / EST_BLOCKS, r1 = lo->rank + n * (b + 1) / EST_BLOCKS;
		if (r0 > lo->rank && (k == 0 || cut[k - 1] < r0))
			cut[k++] = r0;
		size_t at = r0;
		while (r1 - at >= 2 && k + 2 < EST_RANGES_MAX / 2) {
			size_t rest = r1 - at, take = rest - rest / 4;
			if (take >= rest)
				take = rest - 1;
			at += take;
			cut[k++] = at;
		}
	}
	int rc = emit_fps(s, w, lo, hi, cut, k, work);
	free(cut);
	return rc;
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
	if (c->version < RECON_VERSION || c->version > RECON_VERSION_MAX)
		return pith_err_set(err, PITH_EINVAL, "recon: version %u not in %d..%d",
				    c->version, RECON_VERSION, RECON_VERSION_MAX);
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
	static const char cells_label[] = "pith-recon-v2 cells";
	uint8_t ck[16];
	crypto_generichash(ck, sizeof(ck), (const uint8_t *)cells_label, sizeof(cells_label) - 1,
			   s->key, RECON_KEY_LEN);
	s->ck0 = rd_le64(ck);
	s->ck1 = rd_le64(ck + 8);
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
		s->ver = s->cfg.version;
		if (key)
			memcpy(s->key, key, RECON_KEY_LEN);
		else
			randombytes_buf(s->key, RECON_KEY_LEN);
		derive_keys(s);
	}
	size_t split = (size_t)s->cfg.fanout * (BOUND_MAX_BYTES + FP_LEN);
	size_t list = BOUND_MAX_BYTES + 10 + (size_t)s->cfg.list_max * SID_LEN;
	s->split_max = split > list ? split : list;
	if (s->cfg.version >= RECON_VERSION_2 && s->split_max < cells_bytes(CELLS_MAX) + 64)
		s->split_max = cells_bytes(CELLS_MAX) + 64;
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
	out->version = s->ver;
}

/* The density in a version 2 header: differences per item in units of
 * 2^-32, at most 2^33 (0: no estimate). */
#define DENS_ONE 4294967296.0
#define DENS_MAX (UINT64_C(1) << 33)

static void msg_header(recon_session_t *s, pith_buf_t *out, int flags)
{
	pith_buf_reset(out);
	pith_buf_putc(out, (uint8_t)s->ver);
	pith_buf_putc(out, (uint8_t)flags);
	if (flags & FLAG_KEY)
		pith_buf_append(out, s->key, RECON_KEY_LEN);
	if (s->ver >= RECON_VERSION_2) {
		double q = s->dens * DENS_ONE;
		recon_put_varint(out, q >= (double)DENS_MAX ? DENS_MAX : (uint64_t)q);
	}
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
	/* version 2 estimates first, unless the set is small enough to list */
	int est = s->ver >= RECON_VERSION_2 && s->set->count > s->cfg.list_max;
	msg_header(s, out, FLAG_KEY | (est ? FLAG_EST : 0));
	wr_t w = {.out = out};
	pos_t lo = {.b = {0}}, hi;
	bound_t inf = {.inf = 1};
	sum256_zero(&lo.sum);
	lo.rank = 0;
	lo.located = 1;
	locate(s, &inf, &hi);
	uint64_t work = 0;
	int rc = est ? emit_estimate(s, &w, &lo, &hi, &work) : emit_split(s, &w, &lo, &hi, &work);
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
	/* an estimating first message (version 2): its FP ranges, answered
	 * once all are read */
	int est;
	recon_sample_t *smp;
	pos_t *slo, *shi;
	size_t ns;
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

/* ---- version 2 answers ------------------------------------------------- */

/* A small open-addressing set of 8-byte keys, for matching decoded keys
 * against a range's items in one pass. */
typedef struct keyset {
	uint64_t *slot;
	uint8_t *used;
	uint32_t *tag;  /* index of the key in the caller's array */
	size_t mask;
} keyset_t;

static int keyset_init(keyset_t *k, size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n)
		cap <<= 1;
	k->slot = calloc(cap, sizeof(*k->slot));
	k->used = calloc(cap, 1);
	k->tag = calloc(cap, sizeof(*k->tag));
	k->mask = cap - 1;
	return k->slot && k->used && k->tag ? 0 : PITH_ENOMEM;
}

static void keyset_release(keyset_t *k)
{
	free(k->slot);
	free(k->used);
	free(k->tag);
}

static size_t keyset_home(const keyset_t *k, uint64_t key)
{
	return (size_t)((key * UINT64_C(0x9e3779b97f4a7c15)) >> 20) & k->mask;
}

/* Adds key (tag i); 0, or 1 if it is already there. */
static int keyset_add(keyset_t *k, uint64_t key, uint32_t i)
{
	size_t h = keyset_home(k, key);
	while (k->used[h]) {
		if (k->slot[h] == key)
			return 1;
		h = (h + 1) & k->mask;
	}
	k->used[h] = 1;
	k->slot[h] = key;
	k->tag[h] = i;
	return 0;
}

/* The slot of key, or -1. */
static long keyset_find(const keyset_t *k, uint64_t key)
{
	size_t h = keyset_home(k, key);
	while (k->used[h]) {
		if (k->slot[h] == key)
			return (long)h;
		h = (h + 1) & k->mask;
	}
	return -1;
}

/* Answers the peer's CELLS of m cells for [lo, hi): subtracts our items
 * and peels. Decoded: CREPLY with our items it lacks (full ids) and the
 * keys of its items we lack. Not decoded (more differences than cells):
 * our own cells for the range, twice as many, or at CELLS_MAX a split. */
static int answer_cells(step_t *t, const pos_t *lo, const pos_t *hi, const uint8_t *p,
			uint32_t m)
{
	recon_session_t *s = t->s;
	size_t n = hi->rank - lo->rank;
	/* more items than an honest coder puts in one range (or than its
	 * cells could tell apart): ask about the range again instead of
	 * scanning it */
	if (n > scan_max(s) || (double)n > SCAN_PER_DIFF * m)
		return emit_split2(s, &t->w, lo, hi, &t->work);
	recon_cells_t c;
	int rc = recon_cells_init(&c, m, s->ck0, s->ck1);
	if (rc)
		return rc;
	recon_cells_get(&c, p);
	EACH_ITEM(s, lo->rank, hi->rank, it, recon_cells_toggle(&c, recon_cells_key(it->id), -1));
	t->work += hi->rank - lo->rank + WORK_DESCENT;
	uint64_t *plus = malloc((size_t)m * sizeof(uint64_t));
	uint64_t *minus = malloc((size_t)m * sizeof(uint64_t));
	recon_item_t *mine = malloc((size_t)m * sizeof(recon_item_t));
	uint32_t np = 0, nm = 0;
	keyset_t ks = {0};
	if (!plus || !minus || !mine) {
		rc = PITH_ENOMEM;
		goto out;
	}
	rc = recon_cells_decode(&c, plus, &np, minus, &nm, &t->work);
	if (rc == PITH_ENOMEM)
		goto out;
	if (!rc && nm) {
		/* our keys it lacks: find the items (each once, all in range) */
		if ((rc = keyset_init(&ks, nm)))
			goto out;
		for (uint32_t i = 0; i < nm && !rc; i++)
			rc = keyset_add(&ks, minus[i], i) ? PITH_EINVAL : 0;
		uint32_t found = 0;
		if (!rc) {
			EACH_ITEM(s, lo->rank, hi->rank, it, {
				long h = keyset_find(&ks, recon_cells_key(it->id));
				if (h >= 0 && ks.used[h] == 1) {
					ks.used[h] = 2;
					mine[ks.tag[h]] = *it;
					found++;
				}
			});
			t->work += hi->rank - lo->rank;
			if (found != nm)
				rc = PITH_EINVAL;
		}
	}
	if (rc) {
		/* not decoded: more differences than cells */
		s->st.cells_failed++;
		rc = 0;
		if (m < CELLS_MAX && hi->rank - lo->rank > s->cfg.list_max) {
			uint32_t m2 = m > (CELLS_MAX - 8) / 3 * 2 ? CELLS_MAX : m + m / 2 + 8;
			rc = emit_cells(s, &t->w, lo, hi, m2, &t->work);
		} else {
			rc = emit_split(s, &t->w, lo, hi, &t->work);
		}
		goto out;
	}
	if (np + nm == 0)
		goto out;
	recon_wr_range(&t->w, &lo->b, &hi->b, M_CREPLY);
	recon_put_varint(t->w.out, nm);
	for (uint32_t i = 0; i < nm && !rc; i++) {
		pith_buf_append(t->w.out, mine[i].id, RECON_ID_LEN);
		rc = push_have(t, &mine[i]);
	}
	recon_put_varint(t->w.out, np);
	for (uint32_t i = 0; i < np; i++) {
		uint8_t k8[8];
		wr_le64(k8, plus[i]);
		pith_buf_append(t->w.out, k8, 8);
	}
	if (np)
		t->w.demands = 1;
	if (!rc && t->w.out->oom)
		rc = PITH_ENOMEM;
out:
	keyset_release(&ks);
	free(plus);
	free(minus);
	free(mine);
	recon_cells_release(&c);
	return rc;
}

/* Answers CREPLY's b keys (8 bytes each at p) with IDS: our items in
 * [lo, hi) with those keys, each key once. */
static int answer_keys(step_t *t, const pos_t *lo, const pos_t *hi, const uint8_t *p,
		       size_t b)
{
	recon_session_t *s = t->s;
	if (hi->rank - lo->rank > scan_max(s))
		/* we never coded that many: the set changed or the peer lies */
		return emit_split2(s, &t->w, lo, hi, &t->work);
	keyset_t ks = {0};
	int rc = keyset_init(&ks, b);
	recon_item_t *got = malloc((b ? b : 1) * sizeof(*got));
	if (rc || !got) {
		keyset_release(&ks);
		free(got);
		return PITH_ENOMEM;
	}
	for (size_t i = 0; i < b; i++)
		keyset_add(&ks, rd_le64(p + 8 * i), (uint32_t)i);
	size_t found = 0;
	EACH_ITEM(s, lo->rank, hi->rank, it, {
		long h = keyset_find(&ks, recon_cells_key(it->id));
		if (h >= 0 && ks.used[h] == 1) {
			ks.used[h] = 2;
			got[found++] = *it;
		}
	});
	t->work += hi->rank - lo->rank + b + WORK_DESCENT;
	if (found) {
		recon_wr_range(&t->w, &lo->b, &hi->b, M_IDS);
		recon_put_varint(t->w.out, found);
		for (size_t i = 0; i < found && !rc; i++) {
			pith_buf_append(t->w.out, got[i].id, RECON_ID_LEN);
			rc = push_have(t, &got[i]);
		}
	}
	keyset_release(&ks);
	free(got);
	return rc ? rc : t->w.out->oom ? PITH_ENOMEM : 0;
}

/* Answers an estimating first message once all of it is read: estimates
 * the differences from the FPs that differed, then codes runs of
 * differing ranges into CELLS ranges of at most SPAN_EXPECT expected
 * differences each (ranges that matched between them come along: they
 * cost a scan, no cells); dense ranges get version 1's split. */
static int answer_est(step_t *t)
{
	recon_session_t *s = t->s;
	double items = (double)(s->set->count ? s->set->count : 1);
	double d = recon_estimate(t->smp, t->ns, items);
	s->st.estimate = d;
	s->dens = d / items;
	size_t i = 0;
	int rc = 0;
	while (i < t->ns && !rc) {
		if (!t->smp[i].differ) {
			i++;
			continue;
		}
		double lam = s->dens * (double)t->smp[i].items;
		double e = recon_cells_expect(lam);
		size_t first = i, last = i;
		/* dense, or sparse in many items: split as version 1 does */
		double g = (double)t->smp[i].items;
		int dense = e * 4 >= g || g > SCAN_PER_DIFF * e;
		int big = g > (double)scan_max(s);
		if (!dense) {
			for (size_t j = i + 1; j < t->ns; j++) {
				double gj = (double)t->smp[j].items;
				double ej = t->smp[j].differ ? recon_cells_expect(s->dens * gj) : 0;
				if ((t->smp[j].differ && ej * 4 >= gj) || e + ej > SPAN_EXPECT ||
				    g + gj > SCAN_PER_DIFF * (e + ej) || g + gj > (double)scan_max(s))
					break;
				e += ej;
				g += gj;
				if (t->smp[j].differ)
					last = j;
			}
		}
		pos_t *lo = &t->slo[first], *hi = &t->shi[last];
		uint32_t m = recon_cells_for(e);
		size_t answer = dense || big || e > SPAN_EXPECT ? s->split_max
								 : max_sz(s->split_max, cells_bytes(m));
		if (must_defer(t, lo, answer))
			break;
		if (dense)
			rc = emit_split(s, &t->w, lo, hi, &t->work);
		else if (big || e > SPAN_EXPECT)
			rc = emit_split2(s, &t->w, lo, hi, &t->work);
		else
			rc = emit_cells(s, &t->w, lo, hi, m, &t->work);
		i = last + 1;
	}
	return rc;
}

static int est_push(step_t *t, const pos_t *lo, const pos_t *hi, int differ)
{
	if (t->ns == EST_RANGES_MAX)
		return PITH_ETOOBIG;
	if (!t->smp) {
		t->smp = malloc(EST_RANGES_MAX * sizeof(*t->smp));
		t->slo = malloc(EST_RANGES_MAX * sizeof(*t->slo));
		t->shi = malloc(EST_RANGES_MAX * sizeof(*t->shi));
		if (!t->smp || !t->slo || !t->shi)
			return PITH_ENOMEM;
	}
	t->smp[t->ns].items = hi->rank - lo->rank;
	t->smp[t->ns].differ = differ;
	t->slo[t->ns] = *lo;
	t->shi[t->ns++] = *hi;
	return 0;
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
		if (s->ver < RECON_VERSION_2 && mode >= M_COUNT_V1)
			return pith_err_set(err, PITH_EINVAL,
					    "recon: mode %d at byte %zu needs version 2", mode, at);
		if (t->est && mode != M_SKIP && mode != M_FP)
			return pith_err_set(err, PITH_EINVAL,
					    "recon: %s at byte %zu in an estimating message",
					    mode_name[mode], at);
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
			if (t->est) {
				if ((rc = est_push(t, &lo, &hi, memcmp(fp, p, FP_LEN) != 0)) ==
				    PITH_ETOOBIG)
					return pith_err_set(err, rc,
							    "recon: more than %d ranges in an "
							    "estimating message (byte %zu)",
							    EST_RANGES_MAX, at);
				break;
			}
			if (memcmp(fp, p, FP_LEN) == 0 || must_defer(t, &lo, s->split_max))
				break;
			rc = emit_split2(s, &t->w, &lo, &hi, &t->work);
			break;
		}
		case M_CELLS: {
			*demanded = 1;
			uint64_t m = 0;
			if ((rc = recon_rd_varint(r, &m, "cell count", err)))
				return rc;
			if (m < 1 || m > CELLS_MAX)
				return pith_err_set(err, PITH_EINVAL,
						    "recon: %llu cells at byte %zu, not in 1..%d",
						    (unsigned long long)m, at, CELLS_MAX);
			if ((rc = recon_rd_bytes(r, (size_t)m * CELL_BYTES, &p, "cells", err)))
				return rc;
			need_pos(t, &lo);
			need_pos(t, &hi);
			if (must_defer(t, &lo, max_sz(s->split_max,
						      2 * BOUND_MAX_BYTES + 24 +
							      (size_t)m * RECON_ID_LEN)))
				break;
			rc = answer_cells(t, &lo, &hi, p, (uint32_t)m);
			break;
		}
		case M_CREPLY:
			if ((rc = recon_read_count_max(r, RECON_ID_LEN, CELLS_MAX, "coded reply id count",
						       &n, err)) ||
			    (rc = read_need(t, r, n, "coded reply ids", err)))
				return rc;
			if ((rc = recon_read_count_max(r, 8, CELLS_MAX, "coded reply key count", &n2,
						       err)))
				return rc;
			if ((rc = recon_rd_bytes(r, n2 * 8, &p, "coded reply keys", err)))
				return rc;
			if (n == 0 && n2 == 0)
				return pith_err_set(err, PITH_EINVAL,
						    "recon: empty CREPLY at byte %zu", at);
			if (n2 == 0)
				break;
			*demanded = 1;
			need_pos(t, &lo);
			need_pos(t, &hi);
			if (must_defer(t, &lo, max_sz(s->split_max, 2 * BOUND_MAX_BYTES + 12 +
									 n2 * RECON_ID_LEN)))
				break;
			rc = answer_keys(t, &lo, &hi, p, n2);
			break;
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
			if ((rc = recon_read_count_max(r, RECON_ID_LEN,
						       s->ver >= RECON_VERSION_2 ? CELLS_MAX
										 : RANGE_IDS_MAX,
						       "id count", &n, err)))
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
	if (t->est && (rc = answer_est(t)))
		return pith_err_set(err, rc, "recon: out of memory answering the estimate");
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
	int first = s->role == RECON_RESPONDER && s->state == ST_NEW;
	const unsigned flags = p[1];
	if (first && p[0] >= RECON_VERSION && p[0] <= s->cfg.version) {
		s->ver = p[0];
	} else if (p[0] != s->ver) {
		if (first && s->cfg.version == RECON_VERSION)
			pith_err_set(err, PITH_EINVAL, "recon: version %u, expected %u", p[0],
				     RECON_VERSION);
		else if (first)
			pith_err_set(err, PITH_EINVAL, "recon: version %u, expected %d..%u", p[0],
				     RECON_VERSION, s->cfg.version);
		else
			pith_err_set(err, PITH_EINVAL,
				     "recon: version %u in a session of version %u", p[0], s->ver);
		return fail(s, err, PITH_EINVAL);
	}
	unsigned known = s->ver >= RECON_VERSION_2 ? FLAG_KEY | FLAG_EST : FLAG_KEY;
	if (p[1] & ~known) {
		pith_err_set(err, PITH_EINVAL, "recon: unknown flags 0x%02x at byte 1", p[1]);
		return fail(s, err, PITH_EINVAL);
	}
	if ((p[1] & FLAG_EST) && !first) {
		pith_err_set(err, PITH_EINVAL, "recon: an estimate after the first message");
		return fail(s, err, PITH_EINVAL);
	}
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
	if (s->ver >= RECON_VERSION_2) {
		uint64_t q = 0;
		if ((rc = recon_rd_varint(&r, &q, "density", err)))
			return fail(s, err, rc);
		if (q > DENS_MAX) {
			pith_err_set(err, PITH_EINVAL, "recon: density %llu above %llu",
				     (unsigned long long)q, (unsigned long long)DENS_MAX);
			return fail(s, err, PITH_EINVAL);
		}
		/* the peer's estimate, until we have our own */
		if (s->dens <= 0)
			s->dens = (double)q / DENS_ONE;
	}
	step_t t = {.s = s, .have = have, .need = need, .est = (flags & FLAG_EST) != 0};
	t.w.out = out;
	int demanded = 0;
	/* the header goes first, its density filled in once known */
	size_t dens_at = 0;
	msg_header(s, out, 0);
	dens_at = out->len;
	rc = process(&t, &r, &demanded, err);
	free(t.smp);
	free(t.slo);
	free(t.shi);
	if (rc)
		return fail(s, err, rc);
	if (t.est && s->ver >= RECON_VERSION_2) {
		/* an estimate was made while answering: put it in the header */
		pith_buf_t body = PITH_BUF_INIT;
		if (pith_buf_append(&body, out->data + dens_at, out->len - dens_at)) {
			pith_buf_release(&body);
			pith_err_set(err, PITH_ENOMEM, "recon: out of memory");
			return fail(s, err, PITH_ENOMEM);
		}
		msg_header(s, out, 0);
		pith_buf_append(out, body.data, body.len);
		pith_buf_release(&body);
	}
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
