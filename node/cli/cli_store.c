/* Opening the store for the store commands. */
#include "cli_store.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A store upgrade at open: it can take minutes, so say so (stderr). */
static void store_notice(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "pithctl: %s\n", line);
}

static int path_exists(const char *dir, const char *name)
{
	char p[4200];
	struct stat sb;
	if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, name) >= sizeof(p))
		return 0;
	return stat(p, &sb) == 0;
}

/* What to say instead of RocksDB's words for the two mistakes people
 * make: a pithd data directory given for its store, and a store a running
 * pithd holds. 1 after saying it, 0 when neither. */
static int store_open_hint(const char *cmd, const char *dir, const char *msg)
{
	if (!path_exists(dir, "CURRENT") && path_exists(dir, "store/CURRENT"))
		return cli_fail(cmd, "%s is a pithd data directory; its store is %s/store (--store "
			       "%s/store, or --node %s/pithd.sock while pithd runs)", dir, dir, dir, dir);
	if (strstr(msg, "lock") || strstr(msg, "LOCK")) {
		char sock[4200];
		cli_store_sock(dir, sock, sizeof(sock));
		return cli_fail(cmd, "a running pithd holds this store (%s); use --node %s", dir, sock);
	}
	return 0;
}

void cli_store_sock(const char *dir, char *out, size_t cap)
{
	char data[4200];
	snprintf(data, sizeof(data), "%s", dir);
	size_t n = strlen(data);
	while (n > 1 && data[n - 1] == '/')
		data[--n] = 0;
	/* DATA/store: the socket is DATA/pithd.sock */
	if (n >= 6 && !strcmp(data + n - 6, "/store"))
		data[n - 6] = 0;
	else if (!strcmp(data, "store"))
		snprintf(data, sizeof(data), ".");
	else
		snprintf(data, sizeof(data), "DATA");
	snprintf(out, cap, "%s/pithd.sock", data);
}

long cli_store_holder(const char *dir)
{
	char p[4200];
	if ((size_t)snprintf(p, sizeof(p), "%s/LOCK", dir) >= sizeof(p))
		return 0;
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	/* RocksDB holds a POSIX write lock on the whole of LOCK while the
	 * database is open for writing; F_GETLK asks who, taking nothing */
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
	long pid = 0;
	if (!fcntl(fd, F_GETLK, &fl) && fl.l_type != F_UNLCK)
		pid = fl.l_pid > 0 ? (long)fl.l_pid : -1;
	close(fd);
	return pid;
}

int cli_store_open(const cli_ctx_t *ctx, const char *cmd, int writable, pith_trust_t **trust,
		   store_t **st)
{
	pith_err_t err = {0};
	*st = NULL;
	if (!ctx->store_dir) {
		*trust = NULL;
		return cli_fail(cmd, "needs --store DIR");
	}
	if (!(*trust = cli_trust_load(ctx, cmd)))
		return 1;
	if (store_open_hint(cmd, ctx->store_dir, "")) {
		pith_trust_free(*trust);
		return 1;
	}
	/* the registry keys decide which receipts the merge accepts: every
	 * command on one store must be given the same --trust-key files */
	store_opts_t opts = {.create = !!writable, .read_only = !writable, .registry = *trust,
			     .notice = store_notice,
			     .unlogged = (writable & ~CLI_STORE_IMPORT) == CLI_STORE_UNLOGGED,
			     .unsorted_write_only = !!(writable & CLI_STORE_IMPORT),
			     .fresh_records = !!(writable & CLI_STORE_IMPORT)};
	if (store_open(ctx->store_dir, &opts, st, &err)) {
		pith_trust_free(*trust);
		if (store_open_hint(cmd, ctx->store_dir, err.msg))
			return 1;
		return cli_fail(cmd, "%s", err.msg);
	}
	return 0;
}

int cli_store_resolve(store_t *st, const char *cmd, const char *id,
		      char out[static PITH_NUMBER_LEN + 1])
{
	pith_err_t err = {0};
	if (store_resolve(st, id, out, &err))
		return cli_fail(cmd, "%s", err.msg);
	return 0;
}

const char *cli_first_operand(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json"))
			return argv[i];
	return NULL;
}
