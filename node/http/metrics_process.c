/* The standard process_* families every Prometheus client exports, read
 * from /proc at scrape time: the names, types and meanings of the Go and
 * Python clients, so that dashboards made for any exporter work. Linux
 * only; a file that cannot be read leaves its families out. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "err.h"
#include "metrics.h"

/* A small /proc file into buf (NUL-terminated): its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n + 1 < cap) {
		ssize_t k = read(fd, buf + n, cap - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

/* What the collector takes of /proc/self/stat (proc(5): fields 14, 15,
 * 22, 23 and 24, counted after the command, which may hold blanks and
 * brackets: the fields start after its last ')'). */
typedef struct proc_stat {
	unsigned long long utime, stime, starttime, vsize;
	long long rss;
	int ok;
} proc_stat_t;

static proc_stat_t stat_read(void)
{
	proc_stat_t ps = {0};
	char buf[1024];
	if (read_small("/proc/self/stat", buf, sizeof(buf)) <= 0)
		return ps;
	char *p = strrchr(buf, ')');
	if (!p)
		return ps;
	p++;
	/* field 3 (state) on: take fields 14, 15, 22, 23, 24 */
	for (int field = 3; field <= 24; field++) {
		while (*p == ' ')
			p++;
		if (!*p)
			return ps;
		char *end;
		unsigned long long v = strtoull(p, &end, 10);
		if (field == 14)
			ps.utime = v;
		else if (field == 15)
			ps.stime = v;
		else if (field == 22)
			ps.starttime = v;
		else if (field == 23)
			ps.vsize = v;
		else if (field == 24)
			ps.rss = (long long)v;
		while (*p && *p != ' ')
			p++;
	}
	ps.ok = 1;
	return ps;
}

/* The boot time from /proc/stat's "btime" line (unix seconds), or -1. */
static long long boot_time(void)
{
	static char buf[16384]; /* collectors run under the registry's lock: one at a time */
	if (read_small("/proc/stat", buf, sizeof(buf)) <= 0)
		return -1;
	const char *p = strstr(buf, "\nbtime ");
	return p ? strtoll(p + 7, NULL, 10) : -1;
}

static long long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	long long n = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* less the one opendir holds */
}

static void one(metrics_out_t *o, const char *name, metric_type_t type, const char *help, double v)
{
	metrics_out_family(o, name, type, help);
	metrics_out_sample(o, name, NULL, v);
}

static void collect(void *arg, metrics_out_t *o)
{
	(void)arg;
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	proc_stat_t ps = stat_read();
	if (ps.ok && tick > 0) {
		one(o, "process_cpu_seconds_total", METRIC_COUNTER,
		    "Total user and system CPU time spent in seconds",
		    (double)(ps.utime + ps.stime) / (double)tick);
		one(o, "process_virtual_memory_bytes", METRIC_GAUGE, "Virtual memory size in bytes",
		    (double)ps.vsize);
		one(o, "process_resident_memory_bytes", METRIC_GAUGE, "Resident memory size in bytes",
		    (double)ps.rss * (double)(page > 0 ? page : 4096));
		long long bt = boot_time();
		if (bt > 0)
			one(o, "process_start_time_seconds", METRIC_GAUGE,
			    "Start time of the process since unix epoch in seconds",
			    (double)bt + (double)ps.starttime / (double)tick);
	}
	long long fds = open_fds();
	if (fds >= 0)
		one(o, "process_open_fds", METRIC_GAUGE, "Number of open file descriptors",
		    (double)fds);
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
		one(o, "process_max_fds", METRIC_GAUGE, "Maximum number of open file descriptors",
		    (double)rl.rlim_cur);
}

int metrics_add_process(metrics_t *m)
{
	return metrics_add_collector(m, collect, NULL);
}
