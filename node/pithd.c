/* pithd: the Pith mirror's replica node. See docs/pithd.md. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "config.h"
#include "hclient.h"
#include "log.h"
#include "node.h"
#include "version.h"

int main(int argc, char **argv)
{
	static node_config_t cfg; /* large: lists of paths */
	pith_err_t err = {0};
	/* everything the node creates (store files, key, socket) is owner-only */
	umask(0077);
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
		pith_version_print(stdout, "pithd");
		return 0;
	}
	if (config_finish(&cfg, &err)) {
		fprintf(stderr, "pithd: %s\n", err.msg);
		return 2;
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
	int rc = node_run(n);
	node_free(n);
	hc_global_cleanup();
	log_info("pithd stopped");
	return rc ? 1 : 0;
}
