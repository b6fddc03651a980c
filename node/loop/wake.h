/* Waking an event loop from another thread: the one way the tree does it
 * (issue 52). A worker thread (the ingest writer, the HTTP render pool,
 * the name resolver's threads, the sync loader, a backup) that has left
 * results for the loop calls loop_wake_fire; the loop thread then runs the
 * wake's callback, which takes the results (under the caller's own lock).
 *
 * An eventfd under a persistent read event: it works on any event_base,
 * with or without evthread_use_pthreads, and firing is one write(2), safe
 * from any thread (but not after loop_wake_free). Fires before the
 * callback runs coalesce into one call: the callback must take everything
 * that is waiting, not one item per fire. */
#ifndef PITH_LOOP_WAKE_H
#define PITH_LOOP_WAKE_H

struct event_base;

typedef struct loop_wake loop_wake_t;
typedef void (*loop_wake_fn)(void *arg);

/* A wake on base running fn(arg) on base's loop thread; NULL when out of
 * memory or descriptors (errno set). */
loop_wake_t *loop_wake_new(struct event_base *base, loop_wake_fn fn, void *arg);
/* From any thread: fn will run (once for any number of fires before it). */
void loop_wake_fire(loop_wake_t *w);
/* On the loop thread, once no thread may fire it any more. NULL-tolerant. */
void loop_wake_free(loop_wake_t *w);

#endif
