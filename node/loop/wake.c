/* Waking an event loop from another thread (wake.h): the one place that
 * makes a wake-up descriptor in node/ (tests/mechanisms_check.py holds the
 * tree to it). */
#include "wake.h"

#include <errno.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct loop_wake {
	int efd;
	struct event *ev;
	loop_wake_fn fn;
	void *arg;
};

static void on_fire(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	loop_wake_t *w = arg;
	uint64_t n;
	/* EAGAIN: another callback took it already; nothing else can fail */
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	w->fn(w->arg);
}

loop_wake_t *loop_wake_new(struct event_base *base, loop_wake_fn fn, void *arg)
{
	loop_wake_t *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->fn = fn;
	w->arg = arg;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0)
		goto fail;
	w->ev = event_new(base, w->efd, EV_READ | EV_PERSIST, on_fire, w);
	if (!w->ev || event_add(w->ev, NULL))
		goto fail;
	return w;
fail:
	if (w->ev)
		event_free(w->ev);
	if (w->efd >= 0)
		close(w->efd);
	free(w);
	return NULL;
}

void loop_wake_fire(loop_wake_t *w)
{
	uint64_t one = 1;
	/* EAGAIN: the counter is full, so a wake-up is pending already */
	ssize_t rc = write(w->efd, &one, sizeof(one));
	(void)rc;
}

void loop_wake_free(loop_wake_t *w)
{
	if (!w)
		return;
	event_free(w->ev);
	close(w->efd);
	free(w);
}
