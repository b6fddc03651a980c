/* The daemon's log lines: "2026-11-30T14:02:03.123Z WARN message". */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* atomic: a reload sets it on the loop thread while workers log */
static _Atomic log_level_t level = LOG_INFO;
static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};

void log_set_level(log_level_t lvl)
{
	level = lvl;
}

log_level_t log_get_level(void)
{
	return level;
}

int log_level_parse(const char *s)
{
	static const char *const lower[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, lower[i]))
			return i;
	return -1;
}

int log_file_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
	if (fd < 0)
		return -errno;
	/* dup2 swaps the file under stderr in one step: a thread writing a
	 * line meanwhile writes it whole, to the old file or the new one */
	int rc = dup2(fd, STDERR_FILENO) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static int64_t now_us(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static void vlog(log_level_t lvl, const char *fmt, va_list ap)
{
	char line[1024];
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %-5s ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, (int)(tv.tv_usec / 1000), names[lvl]);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = strlen(line);
	line[len++] = '\n';
	/* one write per line so that lines of threads never interleave */
	fwrite(line, 1, len, stderr);
	fflush(stderr);
}

void log_msg(log_level_t lvl, const char *fmt, ...)
{
	if (lvl > level)
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(lvl, fmt, ap);
	va_end(ap);
}

void log_rl(log_rl_t *rl, log_level_t lvl, const char *fmt, ...)
{
	if (lvl > level)
		return;
	int64_t now = now_us();
	if (now - rl->window_start_us >= (int64_t)LOG_RL_WINDOW_S * 1000000) {
		if (rl->dropped)
			log_msg(lvl, "(%u similar lines suppressed in the last %d s)", rl->dropped,
				LOG_RL_WINDOW_S);
		rl->window_start_us = now;
		rl->used = 0;
		rl->dropped = 0;
	}
	if (rl->used >= LOG_RL_BURST) {
		rl->dropped++;
		return;
	}
	rl->used++;
	va_list ap;
	va_start(ap, fmt);
	vlog(lvl, fmt, ap);
	va_end(ap);
}

char *log_escape(const void *p, size_t n, size_t max, char *out, size_t cap)
{
	const uint8_t *s = p;
	size_t w = 0, i = 0;
	if (cap == 0)
		return out;
	for (; i < n && i < max; i++) {
		uint8_t c = s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\') {
			if (w + 1 >= cap)
				break;
			out[w++] = (char)c;
		} else {
			if (w + 4 >= cap)
				break;
			w += (size_t)snprintf(out + w, cap - w, "\\x%02x", c);
		}
	}
	if (i < n && w + 3 < cap) {
		memcpy(out + w, "...", 3);
		w += 3;
	}
	out[w] = 0;
	return out;
}
