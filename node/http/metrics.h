/* A small metrics registry rendered in the Prometheus text format (0.0.4).
 *
 * Series are registered once (usually at start-up) and bumped through the
 * handle that registration returns: a relaxed atomic add, safe from any
 * thread. Registration and rendering take the registry's mutex.
 *
 * Values the owner already keeps elsewhere (the node's counters, the
 * store's totals) are not copied into series: a collector callback writes
 * them at scrape time with metrics_out_family/metrics_out_sample.
 *
 * Names are Prometheus metric names ([a-zA-Z_:][a-zA-Z0-9_:]*); labels are
 * given pre-formatted, e.g. `route="state",code="200"`, with values
 * escaped by metrics_label_escape when they are not constants. */
#ifndef PITH_NODE_METRICS_H
#define PITH_NODE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

typedef struct metrics metrics_t;
typedef struct metric metric_t;           /* a counter or a gauge */
typedef struct metric_hist metric_hist_t; /* a histogram */

typedef enum metric_type {
	METRIC_COUNTER = 0,
	METRIC_GAUGE,
	METRIC_HISTOGRAM,
	METRIC_INFO,      /* collectors only: a gauge NAME_info of value 1 whose
			   * labels are the information (OpenMetrics: type
			   * info, family NAME) */
} metric_type_t;

/* The two text formats /metrics answers in (docs/http.md, "Metrics"). */
typedef enum metrics_format {
	METRICS_PROMETHEUS = 0, /* text/plain; version=0.0.4 */
	METRICS_OPENMETRICS,    /* application/openmetrics-text; version=1.0.0:
				 * counter families named without _total, info
				 * families, UNIT where the name ends in one,
				 * canonical le values, "# EOF" */
} metrics_format_t;

/* An empty registry; NULL on OOM. */
metrics_t *metrics_new(void);
/* Frees the registry and every series; handles become invalid. */
void metrics_free_(metrics_t *m);
#define metrics_free(x) do { metrics_free_(x); (x) = NULL; } while (0)

/* Registers the series name{labels} (labels may be NULL or "") or returns
 * the one registered before. help is kept from the family's first
 * registration. NULL on OOM, on a malformed name, or when name is already
 * a family of another type. */
metric_t *metrics_counter(metrics_t *m, const char *name, const char *help, const char *labels);
metric_t *metrics_gauge(metrics_t *m, const char *name, const char *help, const char *labels);
/* bounds: nbounds ascending upper bounds (the +Inf bucket is implicit),
 * copied. A series of an existing family must use the same bounds. */
metric_hist_t *metrics_histogram(metrics_t *m, const char *name, const char *help,
				 const char *labels, const double *bounds, size_t nbounds);

/* NULL-tolerant, any thread. */
void metric_add(metric_t *c, uint64_t n);
static inline void metric_inc(metric_t *c)
{
	metric_add(c, 1);
}
void metric_set(metric_t *g, double v);
void metric_hist_observe(metric_hist_t *h, double v);

/* ---- collectors ---------------------------------------------------------- */
typedef struct metrics_out metrics_out_t;

/* Called during metrics_render (registry lock held: do not register from
 * here). Writes whole families with the helpers below. */
typedef void (*metrics_collect_fn)(void *arg, metrics_out_t *out);
/* 0 or PITH_ENOMEM. Collectors run in the order they were added. */
int metrics_add_collector(metrics_t *m, metrics_collect_fn fn, void *arg);

/* Starts a family: the # HELP and # TYPE lines (and # UNIT in
 * OpenMetrics), name being the sample's name (a counter's with _total). */
void metrics_out_family(metrics_out_t *o, const char *name, metric_type_t type,
			const char *help);
/* One sample line: name{labels} value. */
void metrics_out_sample(metrics_out_t *o, const char *name, const char *labels, double v);
void metrics_out_sample_u64(metrics_out_t *o, const char *name, const char *labels,
			    uint64_t v);

/* Appends value escaped for a label value (\\, \" and \n) to out. */
void metrics_label_escape(pith_buf_t *out, const char *value);

/* Appends the whole exposition (registered families in registration order,
 * then the collectors' output) to out. 0 or PITH_ENOMEM. */
int metrics_render(metrics_t *m, pith_buf_t *out);
/* The same in either format. */
int metrics_render_as(metrics_t *m, pith_buf_t *out, metrics_format_t fmt);

/* Adds the collector of the standard process_* families, read from /proc
 * at scrape time (metrics_process.c): CPU seconds, resident and virtual
 * memory, open and maximum descriptors, start time. 0 or PITH_ENOMEM. */
int metrics_add_process(metrics_t *m);

/* Latency buckets in seconds shared by the request histograms:
 * 100 us to 10 s. */
extern const double metrics_latency_bounds[];
extern const size_t metrics_latency_nbounds;

#endif
