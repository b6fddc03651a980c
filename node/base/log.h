/* pithd's log: one line per event worth an operator's attention, on
 * stderr (or log_file, put in its place), with a UTC timestamp and a level.
 *
 * Peer-controlled text goes through log_escape (printable ASCII only,
 * truncated). Warnings that a peer can trigger go through a log_rl_t, a
 * per-call-site limiter that lets a burst through, then drops lines and
 * reports how many it dropped. */
#ifndef PITH_NODE_LOG_H
#define PITH_NODE_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum log_level {
	LOG_ERROR = 0,
	LOG_WARN,
	LOG_INFO,
	LOG_DEBUG,
} log_level_t;

/* Lines above this level are dropped. */
void log_set_level(log_level_t lvl);
log_level_t log_get_level(void);
/* "error", "warn", "info" or "debug" to a level; -1 if none matches. */
int log_level_parse(const char *s);

/* Opens path for appending (created mode 0640 under the umask) and puts
 * it in place of stderr, where every line goes: at start for log_file,
 * and again on SIGHUP after logrotate moved the old one away. 0, or a
 * negative errno (stderr unchanged). */
int log_file_open(const char *path);

void log_msg(log_level_t lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (log_get_level() >= LOG_DEBUG)                              \
			log_msg(LOG_DEBUG, __VA_ARGS__);                       \
	} while (0)

/* A rate limiter: at most `burst` lines per `window_s` seconds. */
typedef struct log_rl {
	int64_t window_start_us;
	unsigned used;
	unsigned dropped;
} log_rl_t;

#define LOG_RL_BURST 10
#define LOG_RL_WINDOW_S 10

/* log_msg through the limiter rl (a static at the call site). When a new
 * window opens after drops, a line says how many were suppressed. */
void log_rl(log_rl_t *rl, log_level_t lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Copies at most max bytes of untrusted text p[0..n) into out (cap bytes,
 * NUL-terminated): printable ASCII as is, anything else as \xHH, and "..."
 * when cut. Returns out. */
char *log_escape(const void *p, size_t n, size_t max, char *out, size_t cap);

#endif
