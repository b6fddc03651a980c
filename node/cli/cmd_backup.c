/* pithctl backup DIR: a consistent copy of a running node's store. */
#include "cli_node.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void print_backup(const json_value_t *r)
{
	const char *dir = cli_json_str(r, "dir");
	printf("backup written to %s in %lld ms\n", dir, cli_json_int(r, "ms"));
	printf("read it with: pithctl --store %s records   (and check)\n", dir);
}

/* The node runs elsewhere (another working directory, maybe a sandbox):
 * it gets DIR as an absolute path, with the parent's symbolic links
 * resolved here. */
static int absolute(const char *dir, char out[static PATH_MAX])
{
	char parent[PATH_MAX], real[PATH_MAX];
	size_t len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (len >= sizeof(parent))
		return cli_fail("backup", "%s: path too long", dir);
	memcpy(parent, dir, len);
	parent[len] = 0;
	char *slash = strrchr(parent, '/');
	const char *base = parent, *pdir = ".";
	if (slash) {
		*slash = 0;
		base = slash + 1;
		pdir = slash == parent ? "/" : parent;
	}
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return cli_fail("backup", "%s: name a new directory", dir);
	if (!realpath(pdir, real))
		return cli_fail("backup", "%s: %s", pdir, strerror(errno));
	if ((size_t)snprintf(out, PATH_MAX, "%s/%s", strcmp(real, "/") ? real : "", base) >= PATH_MAX)
		return cli_fail("backup", "%s: path too long", dir);
	return 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			continue;
		if (dir)
			return cli_fail("backup", "one DIR only; unexpected '%s'", argv[i]);
		dir = argv[i];
	}
	if (!dir)
		return cli_fail("backup", "missing DIR (a directory to create)");
	char abs[PATH_MAX];
	if (cli_node_require(ctx, "backup") || cli_node_arg_ok("backup", "DIR", dir) ||
	    absolute(dir, abs))
		return 1;
	pith_buf_t line = PITH_BUF_INIT;
	pith_buf_printf(&line, "backup %s", abs);
	pith_buf_cstr(&line);
	int rc = line.oom ? cli_fail("backup", "out of memory")
			  : cli_node_show(ctx, "backup", (const char *)line.data, print_backup);
	pith_buf_release(&line);
	return rc;
}

const cli_cmd_t cli_cmd_backup = {
	"backup", "copy a running node's store (a RocksDB checkpoint)",
	"usage: pithctl --node SOCKET backup DIR [--json]\n\n"
	"The node writes a consistent copy of its store to DIR while it keeps\n"
	"running (a RocksDB checkpoint: the memtables are flushed, table files\n"
	"hard-linked when DIR is on the same filesystem as the store, copied\n"
	"otherwise). DIR must not exist; its parent must, and the node's user\n"
	"must be able to write there. The copy is a store directory:\n"
	"`pithctl --store DIR records` reads it, `pithctl --store DIR check`\n"
	"audits it, and `pithd --data D` runs on it when moved to D/store.\n",
	run,
};
