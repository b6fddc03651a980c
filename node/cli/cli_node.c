/* The control-socket client shared by the commands that talk to a running
 * node (--node SOCKET). */
#include "cli_node.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int cli_node_require(const cli_ctx_t *ctx, const char *cmd)
{
	if (ctx->node_sock)
		return 0;
	return cli_fail(cmd, "needs --node SOCKET (the control socket of a running pithd, "
			     "by default DATA/pithd.sock)");
}

int cli_node_connect(const char *path, const char *cmd, int *out)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	*out = -1;
	if (strlen(path) >= sizeof(sun.sun_path))
		return cli_fail(cmd, "%s: too long for a Unix socket path", path);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return cli_fail(cmd, "cannot connect to %s: %s%s", path, strerror(e),
				e == ENOENT || e == ECONNREFUSED ? " (is pithd running?)" : "");
	}
	*out = fd;
	return 0;
}

/* Connects, sends line and a newline, reads up to the answer's newline. */
static int exchange(const char *path, const char *cmd, const char *line, pith_buf_t *out)
{
	int fd;
	if (cli_node_connect(path, cmd, &fd))
		return 1;
	/* one line out, one line back: stdio does the partial reads and writes */
	FILE *f = fdopen(fd, "r+");
	if (!f) {
		close(fd);
		return cli_fail(cmd, "out of memory");
	}
	int rc = 0;
	char *ans = NULL;
	size_t cap = 0;
	if (fprintf(f, "%s\n", line) < 0 || fflush(f)) {
		rc = cli_fail(cmd, "cannot send to %s: %s", path, strerror(errno));
	} else {
		errno = 0;
		ssize_t got = getline(&ans, &cap, f);
		if (got <= 0 || ans[got - 1] != '\n')
			rc = cli_fail(cmd, "%s closed the connection without an answer%s%s", path,
				      errno ? ": " : "", errno ? strerror(errno) : "");
		else if ((size_t)got > CLI_MAX_INPUT || pith_buf_append(out, ans, (size_t)got - 1))
			rc = cli_fail(cmd, "the answer from %s is over %u bytes", path, CLI_MAX_INPUT);
	}
	free(ans);
	fclose(f);
	return rc;
}

int cli_node_call(const cli_ctx_t *ctx, const char *cmd, const char *line, json_doc_t **doc,
		  pith_buf_t *raw)
{
	pith_buf_t own = PITH_BUF_INIT, *b = raw ? raw : &own;
	pith_err_t err = {0};
	*doc = NULL;
	if (cli_node_require(ctx, cmd))
		return 1;
	int rc = exchange(ctx->node_sock, cmd, line, b);
	if (!rc && json_parse(doc, b->data, b->len, NULL, &err))
		rc = cli_fail(cmd, "the answer from %s is not JSON: %s", ctx->node_sock, err.msg);
	const json_value_t *ok = rc ? NULL : json_get(json_doc_root(*doc), "ok");
	if (json_is(ok, JSON_FALSE)) {
		const char *e = json_get_str(json_doc_root(*doc), "error");
		rc = cli_fail(cmd, "%s (node %s)", e ? e : "failed", ctx->node_sock);
	}
	if (rc)
		json_doc_free(*doc);
	pith_buf_release(&own);
	return rc;
}

int cli_node_show(const cli_ctx_t *ctx, const char *cmd, const char *line,
		  void (*print)(const json_value_t *answer))
{
	json_doc_t *doc;
	pith_buf_t raw = PITH_BUF_INIT;
	int rc = cli_node_call(ctx, cmd, line, &doc, &raw);
	if (!rc) {
		if (ctx->json) {
			fwrite(raw.data, 1, raw.len, stdout);
			putchar('\n');
		} else {
			print(json_doc_root(doc));
		}
		if (fflush(stdout) || ferror(stdout))
			rc = cli_fail(cmd, "cannot write to stdout");
		json_doc_free(doc);
	}
	pith_buf_release(&raw);
	return rc;
}

int cli_node_show1(const cli_ctx_t *ctx, int argc, char **argv, const char *cmd,
		   const char *what, void (*print)(const json_value_t *answer))
{
	const char *arg = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			continue;
		if (arg)
			return cli_fail(cmd, "one %s only; unexpected '%s'", what, argv[i]);
		arg = argv[i];
	}
	if (!arg)
		return cli_fail(cmd, "missing %s", what);
	if (cli_node_arg_ok(cmd, what, arg))
		return 1;
	pith_buf_t line = PITH_BUF_INIT;
	pith_buf_printf(&line, "%s %s", cmd, arg);
	pith_buf_cstr(&line);
	int rc = line.oom ? cli_fail(cmd, "out of memory")
			  : cli_node_show(ctx, cmd, (const char *)line.data, print);
	pith_buf_release(&line);
	return rc;
}

int cli_node_query(const cli_ctx_t *ctx, const char *cmd, const char *sockcmd, const char *id,
		   json_doc_t **doc)
{
	pith_buf_t line = PITH_BUF_INIT;
	*doc = NULL;
	if (cli_node_arg_ok(cmd, "ID", id))
		return 1;
	pith_buf_printf(&line, "%s %s", sockcmd, id);
	pith_buf_cstr(&line);
	int rc = line.oom ? cli_fail(cmd, "out of memory")
			  : cli_node_call(ctx, cmd, (const char *)line.data, doc, NULL);
	pith_buf_release(&line);
	return rc;
}

int cli_node_arg_ok(const char *cmd, const char *what, const char *arg)
{
	if (!*arg)
		return cli_fail(cmd, "%s is empty", what);
	for (const unsigned char *p = (const unsigned char *)arg; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return cli_fail(cmd, "%s contains a control character (byte %zu)", what,
					(size_t)(p - (const unsigned char *)arg));
	return 0;
}

long long cli_json_int(const json_value_t *o, const char *key)
{
	const json_value_t *v = json_get_type(o, key, JSON_INT);
	return v ? strtoll(v->u.str, NULL, 10) : 0;
}

double cli_json_num(const json_value_t *o, const char *key)
{
	const json_value_t *v = json_get(o, key);
	if (json_is(v, JSON_FLOAT))
		return v->u.num;
	return json_is(v, JSON_INT) ? strtod(v->u.str, NULL) : 0;
}

const char *cli_json_str(const json_value_t *o, const char *key)
{
	const char *s = json_get_str(o, key);
	return s ? s : "";
}

int cli_json_write_str(const json_value_t *o, const char *key, const char *cmd)
{
	const json_value_t *v = json_get_type(o, key, JSON_STRING);
	if (!v)
		return cli_fail(cmd, "the node's answer has no \"%s\"", key);
	if (fwrite(v->u.str, 1, v->len, stdout) != v->len || fflush(stdout))
		return cli_fail(cmd, "cannot write to stdout");
	return 0;
}

void cli_duration(long long s, char out[static 32])
{
	if (s < 0)
		s = 0;
	if (s < 60)
		snprintf(out, 32, "%llds", s);
	else if (s < 3600)
		snprintf(out, 32, "%lldm %02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(out, 32, "%lldh %02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(out, 32, "%lldd %02lldh", s / 86400, s % 86400 / 3600);
}

void cli_bytes(unsigned long long n, char out[static 32])
{
	static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
	double v = (double)n;
	int u = 0;
	while (v >= 1000 && u < 4) {
		v /= 1000;
		u++;
	}
	snprintf(out, 32, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}
