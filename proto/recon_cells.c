/* Version 2 of set reconciliation (docs/sync.md, "Version 2: coded
 * cells"): the invertible cells a range is coded into, their decoding, the
 * difference estimate and the cells' sizing, for recon.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recon_int.h"

int recon_cells_init(recon_cells_t *c, uint32_t m, uint64_t k0, uint64_t k1)
{
	memset(c, 0, sizeof(*c));
	if (m < 1 || m > CELLS_MAX)
		return PITH_EINVAL;
	c->cnt = calloc(m, 1);
	c->key = calloc(m, sizeof(*c->key));
	c->chk = calloc(m, sizeof(*c->chk));
	if (!c->cnt || !c->key || !c->chk) {
		recon_cells_release(c);
		return PITH_ENOMEM;
	}
	c->m = m;
	c->k0 = k0;
	c->k1 = k1;
	c->k = m < CELLS_K ? m : CELLS_K;
	for (uint32_t j = 0; j < c->k; j++) {
		c->base[j] = (uint32_t)((uint64_t)m * j / c->k);
		c->width[j] = (uint32_t)((uint64_t)m * (j + 1) / c->k) - c->base[j];
	}
	return 0;
}

void recon_cells_release(recon_cells_t *c)
{
	free(c->cnt);
	free(c->key);
	free(c->chk);
	memset(c, 0, sizeof(*c));
}

void recon_cells_put(const recon_cells_t *c, uint8_t *p)
{
	for (uint32_t i = 0; i < c->m; i++, p += CELL_BYTES) {
		p[0] = c->cnt[i];
		wr_le64(p + 1, c->key[i]);
		p[9] = (uint8_t)c->chk[i];
		p[10] = (uint8_t)(c->chk[i] >> 8);
		p[11] = (uint8_t)(c->chk[i] >> 16);
		p[12] = (uint8_t)(c->chk[i] >> 24);
	}
}

void recon_cells_get(recon_cells_t *c, const uint8_t *p)
{
	for (uint32_t i = 0; i < c->m; i++, p += CELL_BYTES) {
		c->cnt[i] = p[0];
		c->key[i] = rd_le64(p + 1);
		c->chk[i] = (uint32_t)p[9] | (uint32_t)p[10] << 8 | (uint32_t)p[11] << 16 |
			    (uint32_t)p[12] << 24;
	}
}

/* Cell i holds exactly one key, with the sign its count says. */
static int pure(const recon_cells_t *c, uint32_t i, int *sign)
{
	int8_t n = (int8_t)c->cnt[i];
	if (n != 1 && n != -1)
		return 0;
	uint32_t idx[CELLS_K], chk;
	int k = recon_cells_where(c, c->key[i], idx, &chk);
	if (chk != c->chk[i])
		return 0;
	for (int j = 0; j < k; j++)
		if (idx[j] == i) {
			*sign = n;
			return 1;
		}
	return 0;
}

int recon_cells_decode(recon_cells_t *c, uint64_t *plus, uint32_t *nplus, uint64_t *minus,
		       uint32_t *nminus, uint64_t *work)
{
	uint32_t m = c->m, np = 0, nm = 0;
	/* a stack of cells to look at; a cell is pushed when it may have
	 * become pure, at most CELLS_K per peel, and peels are at most m */
	size_t cap = (size_t)m * (CELLS_K + 1), top = 0;
	uint32_t *stack = malloc(cap * sizeof(*stack));
	if (!stack)
		return PITH_ENOMEM;
	for (uint32_t i = 0; i < m; i++)
		stack[top++] = m - 1 - i;
	int rc = 0;
	while (top > 0) {
		uint32_t i = stack[--top];
		int sign;
		if (!pure(c, i, &sign))
			continue;
		if (np + nm >= m) {
			rc = PITH_EINVAL; /* more keys than cells: not a coding */
			break;
		}
		uint64_t key = c->key[i];
		if (sign > 0)
			plus[np++] = key;
		else
			minus[nm++] = key;
		uint32_t idx[CELLS_K], chk;
		int k = recon_cells_where(c, key, idx, &chk);
		for (int j = 0; j < k; j++) {
			c->cnt[idx[j]] = (uint8_t)(c->cnt[idx[j]] - sign);
			c->key[idx[j]] ^= key;
			c->chk[idx[j]] ^= chk;
			if (top < cap)
				stack[top++] = idx[j];
		}
		*work += CELLS_K;
	}
	free(stack);
	*work += m;
	if (rc)
		return rc;
	for (uint32_t i = 0; i < m; i++)
		if (c->cnt[i] || c->key[i] || c->chk[i])
			return PITH_EINVAL; /* not fully peeled */
	*nplus = np;
	*nminus = nm;
	return 0;
}

uint32_t recon_cells_for(double e)
{
	if (e < 1)
		e = 1;
	double m = CELLS_SLOPE * e + CELLS_SQRT * sqrt(e) + CELLS_BASE;
	return m >= CELLS_MAX ? CELLS_MAX : (uint32_t)ceil(m);
}

double recon_cells_expect(double lambda)
{
	/* expected differences in a range known to differ */
	if (lambda < 1e-9)
		return 1;
	return lambda / -expm1(-lambda);
}

double recon_estimate(const recon_sample_t *smp, size_t n, double items)
{
	size_t differ = 0;
	for (size_t i = 0; i < n; i++)
		differ += smp[i].differ;
	if (differ == 0)
		return 0;
	if (items < 1)
		items = 1;
	double best = 1, best_ll = -INFINITY;
	/* maximum likelihood over d = 2^(i/8): a range of g items differs
	 * with probability 1 - exp(-d g / items) */
	for (int step = 0; step <= 8 * 40; step++) {
		double d = exp2(step / 8.0);
		if (d > 4 * items)
			break;
		double ll = 0;
		for (size_t i = 0; i < n; i++) {
			double lam = d * (smp[i].items + 0.5) / items;
			ll += smp[i].differ ? log(-expm1(-lam)) : -lam;
		}
		if (ll > best_ll) {
			best_ll = ll;
			best = d;
		}
	}
	return best;
}
