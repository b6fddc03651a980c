/* The metrics registry: families of series, rendered on demand. */
#include "metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define METRICS_NAME_MAX 96

const double metrics_latency_bounds[] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
};
const size_t metrics_latency_nbounds = sizeof(metrics_latency_bounds) / sizeof(double);

struct metric {
	char *labels;
	_Atomic uint64_t v; /* counters: the count; gauges: the bits of a double */
	struct metric *next;
};

struct metric_hist {
	char *labels;
	size_t nbounds;
	const double *bounds;       /* the family's */
	_Atomic uint64_t *buckets;  /* nbounds + 1, not cumulative */
	_Atomic uint64_t sum_bits;  /* a double */
	_Atomic uint64_t count;
	struct metric_hist *next;
};

typedef struct family {
	char name[METRICS_NAME_MAX];
	char *help;
	metric_type_t type;
	double *bounds;
	size_t nbounds;
	metric_t *series, *last;
	metric_hist_t *hseries, *hlast;
	struct family *next;
} family_t;

typedef struct collector {
	metrics_collect_fn fn;
	void *arg;
	struct collector *next;
} collector_t;

struct metrics {
	pthread_mutex_t mu;
	family_t *families, *last;
	collector_t *collectors, *clast;
};

struct metrics_out {
	pith_buf_t *b;
	metrics_format_t fmt;
};

metrics_t *metrics_new(void)
{
	metrics_t *m = calloc(1, sizeof(*m));
	if (m)
		pthread_mutex_init(&m->mu, NULL);
	return m;
}

void metrics_free_(metrics_t *m)
{
	if (!m)
		return;
	for (family_t *f = m->families, *fn; f; f = fn) {
		fn = f->next;
		for (metric_t *s = f->series, *sn; s; s = sn) {
			sn = s->next;
			free(s->labels);
			free(s);
		}
		for (metric_hist_t *h = f->hseries, *hn; h; h = hn) {
			hn = h->next;
			free(h->labels);
			free(h->buckets);
			free(h);
		}
		free(f->help);
		free(f->bounds);
		free(f);
	}
	for (collector_t *c = m->collectors, *cn; c; c = cn) {
		cn = c->next;
		free(c);
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static int name_is_valid(const char *s)
{
	size_t n = strlen(s);
	if (!n || n >= METRICS_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
			 (i && c >= '0' && c <= '9');
		if (!ok)
			return 0;
	}
	return 1;
}

/* The family called name, created with type if new; NULL on a type clash
 * or OOM. Lock held. */
static family_t *family_get(metrics_t *m, const char *name, const char *help, metric_type_t type)
{
	if (!name_is_valid(name))
		return NULL;
	for (family_t *f = m->families; f; f = f->next)
		if (!strcmp(f->name, name))
			return f->type == type ? f : NULL;
	family_t *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->help = strdup(help ? help : "");
	if (!f->help) {
		free(f);
		return NULL;
	}
	f->type = type;
	if (m->last)
		m->last->next = f;
	else
		m->families = f;
	m->last = f;
	return f;
}

static metric_t *series_get(metrics_t *m, const char *name, const char *help, const char *labels,
			    metric_type_t type)
{
	if (!labels)
		labels = "";
	pthread_mutex_lock(&m->mu);
	metric_t *s = NULL;
	family_t *f = family_get(m, name, help, type);
	if (!f)
		goto out;
	for (s = f->series; s; s = s->next)
		if (!strcmp(s->labels, labels))
			goto out;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto out;
	s->labels = strdup(labels);
	if (!s->labels) {
		free(s);
		s = NULL;
		goto out;
	}
	if (type == METRIC_GAUGE) {
		double z = 0;
		uint64_t bits;
		memcpy(&bits, &z, sizeof(bits));
		atomic_store_explicit(&s->v, bits, memory_order_relaxed);
	}
	if (f->last)
		f->last->next = s;
	else
		f->series = s;
	f->last = s;
out:
	pthread_mutex_unlock(&m->mu);
	return s;
}

metric_t *metrics_counter(metrics_t *m, const char *name, const char *help, const char *labels)
{
	return series_get(m, name, help, labels, METRIC_COUNTER);
}

metric_t *metrics_gauge(metrics_t *m, const char *name, const char *help, const char *labels)
{
	return series_get(m, name, help, labels, METRIC_GAUGE);
}

metric_hist_t *metrics_histogram(metrics_t *m, const char *name, const char *help,
				 const char *labels, const double *bounds, size_t nbounds)
{
	if (!labels)
		labels = "";
	if (!nbounds)
		return NULL;
	for (size_t i = 1; i < nbounds; i++)
		if (!(bounds[i] > bounds[i - 1]))
			return NULL;
	pthread_mutex_lock(&m->mu);
	metric_hist_t *h = NULL;
	family_t *f = family_get(m, name, help, METRIC_HISTOGRAM);
	if (!f)
		goto out;
	if (!f->bounds) {
		f->bounds = malloc(nbounds * sizeof(double));
		if (!f->bounds)
			goto out;
		memcpy(f->bounds, bounds, nbounds * sizeof(double));
		f->nbounds = nbounds;
	} else if (f->nbounds != nbounds || memcmp(f->bounds, bounds, nbounds * sizeof(double))) {
		goto out;
	}
	for (h = f->hseries; h; h = h->next)
		if (!strcmp(h->labels, labels))
			goto out;
	h = calloc(1, sizeof(*h));
	if (!h)
		goto out;
	h->labels = strdup(labels);
	h->buckets = calloc(nbounds + 1, sizeof(*h->buckets));
	if (!h->labels || !h->buckets) {
		free(h->labels);
		free(h->buckets);
		free(h);
		h = NULL;
		goto out;
	}
	h->nbounds = nbounds;
	h->bounds = f->bounds;
	if (f->hlast)
		f->hlast->next = h;
	else
		f->hseries = h;
	f->hlast = h;
out:
	pthread_mutex_unlock(&m->mu);
	return h;
}

void metric_add(metric_t *c, uint64_t n)
{
	if (c)
		atomic_fetch_add_explicit(&c->v, n, memory_order_relaxed);
}

void metric_set(metric_t *g, double v)
{
	if (!g)
		return;
	uint64_t bits;
	memcpy(&bits, &v, sizeof(bits));
	atomic_store_explicit(&g->v, bits, memory_order_relaxed);
}

void metric_hist_observe(metric_hist_t *h, double v)
{
	if (!h || isnan(v))
		return;
	size_t i = 0;
	while (i < h->nbounds && v > h->bounds[i])
		i++;
	atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
	uint64_t old = atomic_load_explicit(&h->sum_bits, memory_order_relaxed), nw;
	do {
		double s;
		memcpy(&s, &old, sizeof(s));
		s += v;
		memcpy(&nw, &s, sizeof(nw));
	} while (!atomic_compare_exchange_weak_explicit(&h->sum_bits, &old, nw,
							memory_order_relaxed, memory_order_relaxed));
}

/* Reads a series' value as a double, whatever its kind. */
static double series_value(const metric_t *s, metric_type_t type)
{
	uint64_t bits = atomic_load_explicit(&((metric_t *)s)->v, memory_order_relaxed);
	if (type == METRIC_COUNTER)
		return (double)bits;
	double d;
	memcpy(&d, &bits, sizeof(d));
	return d;
}

int metrics_add_collector(metrics_t *m, metrics_collect_fn fn, void *arg)
{
	collector_t *c = calloc(1, sizeof(*c));
	if (!c)
		return PITH_ENOMEM;
	c->fn = fn;
	c->arg = arg;
	pthread_mutex_lock(&m->mu);
	if (m->clast)
		m->clast->next = c;
	else
		m->collectors = c;
	m->clast = c;
	pthread_mutex_unlock(&m->mu);
	return 0;
}

/* ---- rendering ------------------------------------------------------------------ */

static const char *type_name(metric_type_t t, metrics_format_t fmt)
{
	switch (t) {
	case METRIC_COUNTER: return "counter";
	case METRIC_GAUGE: return "gauge";
	case METRIC_INFO: return fmt == METRICS_OPENMETRICS ? "info" : "gauge";
	default: return "histogram";
	}
}

/* v with the fewest significant digits that read back as v (%.17g
 * would write 0.03 as 0.029999999999999999); *prec gets their count. */
static void shortest_g(char *out, size_t cap, double v, int *prec)
{
	int p = 1;
	for (; p < 17; p++) {
		snprintf(out, cap, "%.*g", p, v);
		if (strtod(out, NULL) == v)
			break;
	}
	if (p == 17)
		snprintf(out, cap, "%.17g", v);
	*prec = p;
}

/* A value as Prometheus writes it: integers plainly, others in the
 * shortest form that reads back the same, and the special spellings of
 * infinities and NaN. */
static void put_value(pith_buf_t *b, double v)
{
	char num[40];
	int prec;
	if (isnan(v))
		pith_buf_puts(b, "NaN");
	else if (isinf(v))
		pith_buf_puts(b, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 9.007199254740992e15)
		pith_buf_printf(b, "%lld", (long long)v);
	else {
		shortest_g(num, sizeof(num), v, &prec);
		pith_buf_puts(b, num);
	}
}

static void put_help(pith_buf_t *b, const char *help, metrics_format_t fmt)
{
	/* HELP text escapes backslash and newline; OpenMetrics's also the
	 * double quote, as a label value */
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			pith_buf_puts(b, "\\\\");
		else if (*p == '\n')
			pith_buf_puts(b, "\\n");
		else if (*p == '"' && fmt == METRICS_OPENMETRICS)
			pith_buf_puts(b, "\\\"");
		else
			pith_buf_putc(b, (uint8_t)*p);
	}
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n > k && !memcmp(s + n - k, suffix, k);
}

void metrics_out_family(metrics_out_t *o, const char *name, metric_type_t type, const char *help)
{
	/* OpenMetrics names the family, not the sample: a counter's family
	 * is its name less _total, an info's less _info (its sample keeps
	 * the suffix); Prometheus 0.0.4 names the sample */
	size_t n = strlen(name);
	if (o->fmt == METRICS_OPENMETRICS && ((type == METRIC_COUNTER && ends_with(name, n, "_total")) ||
					      (type == METRIC_INFO && ends_with(name, n, "_info"))))
		n -= type == METRIC_COUNTER ? 6 : 5;
	pith_buf_printf(o->b, "# HELP %.*s ", (int)n, name);
	put_help(o->b, help ? help : "", o->fmt);
	pith_buf_printf(o->b, "\n# TYPE %.*s %s\n", (int)n, name, type_name(type, o->fmt));
	/* a unit only where the name says it (OpenMetrics: the family's name
	 * must end in _UNIT) */
	static const char *const units[] = {"seconds", "bytes"};
	for (size_t i = 0; o->fmt == METRICS_OPENMETRICS && i < 2; i++) {
		char suffix[16];
		snprintf(suffix, sizeof(suffix), "_%s", units[i]);
		if (type != METRIC_INFO && ends_with(name, n, suffix))
			pith_buf_printf(o->b, "# UNIT %.*s %s\n", (int)n, name, units[i]);
	}
}

static void put_sample_head(pith_buf_t *b, const char *name, const char *suffix, const char *labels,
			    const char *extra)
{
	pith_buf_printf(b, "%s%s", name, suffix);
	int has = labels && *labels, has_extra = extra && *extra;
	if (has || has_extra)
		pith_buf_printf(b, "{%s%s%s}", has ? labels : "", has && has_extra ? "," : "",
				has_extra ? extra : "");
	pith_buf_putc(b, ' ');
}

void metrics_out_sample(metrics_out_t *o, const char *name, const char *labels, double v)
{
	put_sample_head(o->b, name, "", labels, NULL);
	put_value(o->b, v);
	pith_buf_putc(o->b, '\n');
}

void metrics_out_sample_u64(metrics_out_t *o, const char *name, const char *labels, uint64_t v)
{
	put_sample_head(o->b, name, "", labels, NULL);
	pith_buf_printf(o->b, "%llu\n", (unsigned long long)v);
}

void metrics_label_escape(pith_buf_t *out, const char *value)
{
	for (const char *p = value; *p; p++) {
		if (*p == '\\')
			pith_buf_puts(out, "\\\\");
		else if (*p == '"')
			pith_buf_puts(out, "\\\"");
		else if (*p == '\n')
			pith_buf_puts(out, "\\n");
		else
			pith_buf_putc(out, (uint8_t)*p);
	}
}

/* A bucket bound as OpenMetrics's canonical number, as its reference
 * parsers print a float: the shortest digits, positional from 1e-4 up to
 * 1e16 with a ".0" on integers ("1.0", "10.0", "0.00025"), else with an
 * exponent ("1e-05"). */
static void canonical_number(char *out, size_t cap, double v)
{
	int prec;
	shortest_g(out, cap, v, &prec);
	double a = fabs(v);
	if (a >= 1e-4 && a < 1e16) {
		int decimals = prec - 1 - (int)floor(log10(a));
		snprintf(out, cap, "%.*f", decimals > 0 ? decimals : 0, v);
	}
	if (!strpbrk(out, ".eEn"))
		snprintf(out + strlen(out), cap - strlen(out), ".0");
}

static void render_hist(pith_buf_t *b, const family_t *f, metric_hist_t *h, metrics_format_t fmt)
{
	uint64_t cum = 0;
	char le[48];
	for (size_t i = 0; i <= h->nbounds; i++) {
		cum += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
		if (i < h->nbounds && fmt == METRICS_OPENMETRICS) {
			char num[32];
			canonical_number(num, sizeof(num), f->bounds[i]);
			snprintf(le, sizeof(le), "le=\"%s\"", num);
		} else if (i < h->nbounds) {
			pith_buf_t t = PITH_BUF_INIT;
			put_value(&t, f->bounds[i]);
			snprintf(le, sizeof(le), "le=\"%.*s\"", (int)t.len, t.data ? (char *)t.data : "");
			pith_buf_release(&t);
		} else {
			snprintf(le, sizeof(le), "le=\"+Inf\"");
		}
		put_sample_head(b, f->name, "_bucket", h->labels, le);
		pith_buf_printf(b, "%llu\n", (unsigned long long)cum);
	}
	uint64_t bits = atomic_load_explicit(&h->sum_bits, memory_order_relaxed);
	double sum;
	memcpy(&sum, &bits, sizeof(sum));
	put_sample_head(b, f->name, "_sum", h->labels, NULL);
	put_value(b, sum);
	pith_buf_putc(b, '\n');
	put_sample_head(b, f->name, "_count", h->labels, NULL);
	/* the count line agrees with the +Inf bucket read above */
	pith_buf_printf(b, "%llu\n", (unsigned long long)cum);
}

int metrics_render(metrics_t *m, pith_buf_t *out)
{
	return metrics_render_as(m, out, METRICS_PROMETHEUS);
}

int metrics_render_as(metrics_t *m, pith_buf_t *out, metrics_format_t fmt)
{
	metrics_out_t o = {out, fmt};
	pthread_mutex_lock(&m->mu);
	for (family_t *f = m->families; f; f = f->next) {
		metrics_out_family(&o, f->name, f->type, f->help);
		if (f->type == METRIC_HISTOGRAM) {
			for (metric_hist_t *h = f->hseries; h; h = h->next)
				render_hist(out, f, h, fmt);
			continue;
		}
		for (metric_t *s = f->series; s; s = s->next) {
			put_sample_head(out, f->name, "", s->labels, NULL);
			if (f->type == METRIC_COUNTER)
				pith_buf_printf(out, "%llu\n",
						(unsigned long long)atomic_load_explicit(
							&s->v, memory_order_relaxed));
			else {
				put_value(out, series_value(s, f->type));
				pith_buf_putc(out, '\n');
			}
		}
	}
	for (collector_t *c = m->collectors; c; c = c->next)
		c->fn(c->arg, &o);
	pthread_mutex_unlock(&m->mu);
	if (fmt == METRICS_OPENMETRICS)
		pith_buf_puts(out, "# EOF\n");
	return out->oom ? PITH_ENOMEM : 0;
}
