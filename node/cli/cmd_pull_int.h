/* pithctl pull, inside (cmd_pull.c, cmd_pull_get.c): its limits, an
 * item per ID, the run's state, and the calls between the two files. */
#ifndef PITH_CLI_CMD_PULL_INT_H
#define PITH_CLI_CMD_PULL_INT_H

#include "cli_store.h"

#include <event2/event.h>

#include "follow_etags.h"
#include "hclient.h"
#include "ingest.h"
#include "upstream.h"

#define PULL_INFLIGHT 16           /* transfers at once */
#define PULL_BODY_MAX (16u << 20)  /* a bundle's body, at most */
#define PULL_SMALL_MAX (1u << 20)  /* a manifest or resolve answer */
#define PULL_IDS_MAX 1000000       /* IDs per run */
#define PULL_ETAG_FILE "pull-etags"
#define PULL_URL_CAP (PITH_URL_MAX + 256)
#define PULL_RETRIES 4                          /* default --retries */
#define PULL_RETRIES_MAX 10
#define PULL_RETRY_FIRST_US INT64_C(500000)     /* 0.5 s, 1 s, 2 s, 4 s, ... */
#define PULL_RETRY_STEP_MAX_US INT64_C(30000000) /*   jittered, at most 30 s */
#define PULL_RETRY_AFTER_MAX_S 60               /* a longer Retry-After: not retried */
#define PULL_DOWN_AFTER 8 /* requests in a row failed after their retries: upstream down */
#ifndef PULL_GROUP_MAX
#define PULL_GROUP_MAX 256          /* bundles handed to the pipeline at once, */
#endif
#define PULL_GROUP_BYTES (8u << 20) /*   or this many bytes of them, */
#ifndef PULL_GROUP_WAIT_MS
#define PULL_GROUP_WAIT_MS 50       /*   or when the first has waited this long */
#endif

typedef enum pull_step {
	STEP_RESOLVE = 1, /* waiting for / doing the resolve request */
	STEP_BUNDLE,      /* waiting for / doing the bundle request */
	STEP_INGEST,      /* in the pipeline */
	STEP_DONE,
} pull_step_t;

typedef enum pull_result {
	RES_NONE = 0,
	RES_STORED,
	RES_UNCHANGED,
	RES_NOT_FOUND,
	RES_REJECTED,
	RES_FAILED,
} pull_result_t;

typedef struct pull pull_t;

/* One GET with its retries. done sees only the final answer: a success,
 * one not worth asking again, or the last attempt's; note then says why
 * the asking stopped ("" when the first answer was final). */
typedef struct pull_get {
	pull_t *p;
	hc_req_t req;          /* req.done and req.arg are the retrier's */
	hc_done_fn done;
	void *arg;
	unsigned attempt;      /* of the transfer running or waited for, from 1 */
	struct event *wait;    /* the retry timer, made when first needed */
	struct pull_get *next; /* in the run's queue of attempts held by a pause */
	char note[128];
} pull_get_t;

/* Downloaded bundles gathered for the pipeline: handed over as one group,
 * so that the validators verify full batches of signatures and the writer
 * commits them at once, as `import` hands over its chunks. Freed when its
 * last job is back. */
typedef struct pull_group {
	ingest_group_t g;
	size_t n, back, bytes;
	ingest_job_t *jobs[PULL_GROUP_MAX];
} pull_group_t;

typedef struct pull_item {
	ingest_job_t job; /* first: the pipeline hands it back */
	pull_t *p;
	const char *text; /* the ID as given */
	pith_id_t id;
	char body[PITH_BODY_LEN + 1];   /* once known */
	char pith[PITH_NUMBER_LEN + 1]; /* the full number, once known */
	pull_step_t step;
	pull_get_t get;                 /* its request of the moment */
	pull_result_t result;
	const char *reason;             /* rejected: the pipeline's name */
	char msg[2048];
	int candidate;                  /* which bundle URL is tried */
	char url[PULL_URL_CAP];
	int has_old;                    /* the ETag file's entry was sent: */
	char old_pith[PITH_NUMBER_LEN + 1], old_etag[HC_ETAG_MAX + 1];
	char etag[HC_ETAG_MAX + 1];   /* the answer's ETag, "" if none */
	pith_buf_t resp;                /* a bundle's body, lent to the pipeline */
	pull_group_t *group;            /* the group it went in, NULL if alone */
} pull_item_t;

struct pull {
	const cli_ctx_t *ctx;
	store_t *st;
	struct event_base *loop;
	hc_t *hc;
	ingest_t *pipe;
	pull_group_t *gather;    /* bundles not yet handed to the pipeline */
	struct event *gather_ev; /* hands them over PULL_GROUP_WAIT_MS after the first */
	long stall_s; /* --stall-timeout */
	unsigned retries; /* --retries */
	const char *base; /* without a trailing '/' */
	char base_buf[PITH_URL_MAX];
	const char *ca_file;
	const char *origins[HC_ORIGINS_MAX]; /* --upstream-origin */
	size_t n_origins;
	char pattern[PITH_URL_MAX]; /* the manifest's bundle_pattern, or "" */
	pull_item_t *items;
	size_t nitems;
	size_t done;
	size_t next;  /* items[next..] are not started */
	int items_go; /* the manifest is read: items may start */
	int finished; /* every started item is done, and none is left to start */
	size_t busy; /* requests between their start and their final answer */
	pull_get_t *queue, *queue_end; /* attempts waiting for the pause to end */
	double pause_until;            /* cli_now() before which none starts */
	struct event *pause_ev;        /* starts them when the pause is over */
	unsigned down_streak; /* requests in a row failed after their retries */
	int down;             /* it reached PULL_DOWN_AFTER: nothing more is asked */
	follow_etags_t *etags; /* the ETag file (follow_etags.h) */
	int tty;
	double t0, last_draw;
	uint64_t stored, unchanged, not_found, rejected, failed;
	uint64_t requests, retried, not_modified, full_bundles, bytes;
	cli_reasons_t reasons;
};

/* ---- cmd_pull.c, for cmd_pull_get.c ---- */
/* Starts it: its resolve request, or its bundle's. */
void pull_item_start(pull_t *p, pull_item_t *it);
/* Notes the run finished once nothing is busy and nothing is left to start. */
void pull_check_finished(pull_t *p);

/* ---- cmd_pull_get.c: requests, their retries, the pause, the breaker ---- */
/* GETs req (its url and if_none_match must outlive the answer), done(arg,
 * result) with the final answer. */
void pull_get(pull_t *p, pull_get_t *g, const hc_req_t *req, hc_done_fn done, void *arg);
/* Starts what waits for the pause, then new items while slots are free. */
void pull_pump(pull_t *p);
/* The pause timer's callback (p->pause_ev): the pause is over. */
void pull_pause_cb(evutil_socket_t fd, short what, void *arg);

#endif
