/* Worker thread priorities (setpriority on thread ids) and the descriptor limit. */
#include "prio.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "err.h"

/* getpriority returns the nice value, which may be -1: errno tells. */
static int nice_of(pid_t tid, int *out)
{
	errno = 0;
	int v = getpriority(PRIO_PROCESS, (id_t)tid);
	if (v == -1 && errno)
		return PITH_EIO;
	*out = v;
	return 0;
}

int prio_lower_thread(pid_t tid, int n)
{
	if (n <= 0)
		return 0;
	if (!tid)
		tid = (pid_t)syscall(SYS_gettid);
	int base, cur;
	/* PRIO_PROCESS with the process id names its main thread only */
	if (nice_of(getpid(), &base) || nice_of(tid, &cur))
		return PITH_EIO;
	int want = base + n > PRIO_NICE_MAX ? PRIO_NICE_MAX : base + n;
	if (cur >= want)
		return 0;
	return setpriority(PRIO_PROCESS, (id_t)tid, want) ? PITH_EIO : 0;
}

/* The name of thread tid, "" if it is gone. */
static void thread_name(long tid, char *out, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", tid);
	out[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(out, (int)cap, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\n")] = 0;
}

int prio_lower_threads_named(const char *prefix, int n)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return PITH_EIO;
	int count = 0, rc = 0;
	size_t plen = strlen(prefix);
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long tid = strtol(e->d_name, &end, 10);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || tid <= 0)
			continue;
		char name[32];
		thread_name(tid, name, sizeof(name));
		if (strncmp(name, prefix, plen))
			continue;
		count++;
		if (prio_lower_thread((pid_t)tid, n))
			rc = PITH_EIO;
	}
	closedir(d);
	return rc ? rc : count;
}

uint64_t prio_raise_fd_limit(uint64_t want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 0;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		rlim_t to = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
		struct rlimit up = {to, rl.rlim_max};
		if (to > rl.rlim_cur && !setrlimit(RLIMIT_NOFILE, &up))
			rl.rlim_cur = to;
	}
	return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
}
