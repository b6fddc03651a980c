/* pithd: the Pith mirror's replica node. See docs/pithd.md. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "hclient.h"
#include "log.h"
#include "daemon.h"
#include "version.h"

/* The command line, read again on SIGHUP (node_set_config_reader). */
typedef struct args {
	int argc;
	char **argv;
} args_t;

static int config_read(void *arg, node_config_t *c, pith_err_t *err)
{
	const args_t *a = arg;
	config_ask_t ask;
	config_defaults(c);
	int rc = config_from_args(c, a->argc, a->argv, &ask, err);
	return rc ? rc : config_finish(c, err);
}

int main(int argc, char **argv)
{
	static node_config_t cfg; /* large: lists of paths */
	pith_err_t err = {0};
	/* everything the node creates (store files, key, socket) is owner-only */
	umask(0077);
	/* a reload asked for while the node starts (a long store open) must
	 * not kill it: ignored until the loop takes SIGHUP (node_reload) */
	signal(SIGHUP, SIG_IGN);
	config_ask_t ask = CONFIG_ASK_RUN;
	config_defaults(&cfg);
	if (config_from_args(&cfg, argc, argv, &ask, &err)) {
		fprintf(stderr, "pithd: %s\n", err.msg);
		return 2;
	}
	if (ask == CONFIG_ASK_HELP) {
		config_usage(stdout);
		return 0;
	}
	if (ask == CONFIG_ASK_VERSION) {
		version_print(stdout, "pithd");
		return 0;
	}
	if (config_finish(&cfg, &err)) {
		fprintf(stderr, "pithd: %s\n", err.msg);
		return 2;
	}
	if (cfg.log_file[0]) {
		int lrc = log_file_open(cfg.log_file);
		if (lrc) {
			fprintf(stderr, "pithd: log_file %s: %s\n", cfg.log_file, strerror(-lrc));
			return 1;
		}
	}
	/* libcurl's global state, before any thread starts (hclient.h) */
	if (hc_global_init(&err)) {
		fprintf(stderr, "pithd: %s\n", err.msg);
		return 1;
	}
	node_t *n = NULL;
	if (node_new(&cfg, &n, &err)) {
		log_error("cannot start: %s", err.msg);
		hc_global_cleanup();
		return 1;
	}
	args_t args = {argc, argv};
	node_set_config_reader(n, config_read, &args);
	int rc = node_run(n);
	node_free(n);
	hc_global_cleanup();
	log_info("pithd stopped");
	return rc ? 1 : 0;
}
