/* pithctl export: every stored event as JSON Lines, the newest bundles
 * as files, or (--site) the mirror as a static site (node/site/site.h). */
#include "cli_store.h"
#include "config.h"
#include "site.h"
#include "store_file.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One event a line; with --json each an element of one array. */
static int write_event(void *arg, const uint8_t id[32], const uint8_t *bytes, size_t len)
{
	cli_list_t *l = arg;
	(void)id;
	cli_list_item(l);
	if (fwrite(bytes, 1, len, stdout) != len || (!l->json && putchar('\n') == EOF))
		return 1;
	return 0;
}

typedef struct bundle_list {
	char (*pith)[PITH_NUMBER_LEN + 1];
	size_t n, cap;
} bundle_list_t;

static int note_bundle(void *arg, const store_record_info_t *rec)
{
	bundle_list_t *l = arg;
	if (!rec->has_bundle)
		return 0;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 64;
		void *p = realloc(l->pith, nc * sizeof(*l->pith));
		if (!p)
			return -1;
		l->pith = p;
		l->cap = nc;
	}
	memcpy(l->pith[l->n++], rec->pith_number, PITH_NUMBER_LEN + 1);
	return 0;
}

/* DIR/BODY.json: the newest verified registry bundle, byte for byte as it
 * was verified, so that anyone can check its signature. Replaced
 * atomically (store_file.h), so a reader never sees half a file. */
static int write_bundle(store_t *st, const char *dir, const char *pith, pith_err_t *err)
{
	pith_buf_t b = PITH_BUF_INIT;
	char path[4096];
	int rc = store_bundle_get(st, pith, &b, err);
	if (rc) {
		pith_buf_release(&b);
		return cli_fail("export", "%s: %s", pith, err->msg);
	}
	snprintf(path, sizeof(path), "%s/%s.json", dir, pith + 10);
	rc = store_file_replace(path, b.data, b.len, 0666, 0);
	pith_buf_release(&b);
	return rc ? cli_fail("export", "cannot write %s: %s", path, strerror(errno)) : 0;
}

static int export_bundles(store_t *st, const char *dir, const char *subject, int json)
{
	bundle_list_t l = {0};
	pith_err_t err = {0};
	int rc = 0;
	if (mkdir(dir, 0755) && errno != EEXIST)
		return cli_fail("export", "cannot create %s: %s", dir, strerror(errno));
	if (subject) {
		store_record_info_t info;
		if (store_record_get(st, subject, &info, &err))
			return cli_fail("export", "%s: %s", subject, err.msg);
		if (!info.has_bundle)
			return cli_fail("export", "%s: no verified registry bundle is stored", subject);
		rc = note_bundle(&l, &info);
	} else if (store_records_each(st, note_bundle, &l, &err)) {
		free(l.pith);
		return cli_fail("export", "%s", err.msg);
	}
	for (size_t i = 0; !rc && i < l.n; i++)
		rc = write_bundle(st, dir, l.pith[i], &err);
	if (!rc && json) {
		pith_buf_t b = PITH_BUF_INIT;
		json_write_string(&b, dir, strlen(dir));
		printf("{\"bundles\":%zu,\"dir\":%.*s}\n", l.n, (int)b.len, (const char *)b.data);
		pith_buf_release(&b);
	} else if (!rc) {
		fprintf(stderr, "pithctl export: %zu bundle(s) written to %s\n", l.n, dir);
	}
	free(l.pith);
	return rc;
}

/* --site OUT: the tree, then one line of what was done. */
static int export_site(store_t *st, const site_opts_t *o, int json)
{
	site_stats_t s;
	pith_err_t err = {0};
	if (site_export(st, o, &s, &err))
		return cli_fail("export", "%s", err.msg);
	printf(json ? "{\"aliases_changed\":%s,\"bytes\":%llu,\"deleted\":%llu,\"from\":%llu,"
		      "\"pages\":%llu,\"records\":%llu,\"removed\":%llu,\"to\":%llu,"
		      "\"unchanged\":%llu,\"written\":%llu}\n"
		    : "aliases_changed %s bytes %llu deleted %llu from %llu pages %llu "
		      "records %llu removed %llu to %llu unchanged %llu written %llu\n",
	       s.aliases_changed ? "true" : "false", (unsigned long long)s.bytes,
	       (unsigned long long)s.deleted, (unsigned long long)s.from,
	       (unsigned long long)s.pages,
	       (unsigned long long)s.records, (unsigned long long)s.removed, (unsigned long long)s.to,
	       (unsigned long long)s.unchanged, (unsigned long long)s.written);
	return 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *subject = NULL, *bundles = NULL;
	site_opts_t so = {0};
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int jobs_set = 0;
	so.jobs = cores > 0 ? (int)(cores < SITE_JOBS_MAX ? cores : SITE_JOBS_MAX) : 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--subject") && i + 1 < argc)
			subject = argv[++i];
		else if (!strcmp(argv[i], "--bundles") && i + 1 < argc)
			bundles = argv[++i];
		else if (!strcmp(argv[i], "--site") && i + 1 < argc)
			so.dir = argv[++i];
		else if (!strcmp(argv[i], "--base-url") && i + 1 < argc)
			so.base_url = argv[++i];
		else if (!strcmp(argv[i], "--name") && i + 1 < argc)
			so.name = argv[++i];
		else if (!strcmp(argv[i], "--operator") && i + 1 < argc)
			so.operator_name = argv[++i];
		else if (!strcmp(argv[i], "--contact") && i + 1 < argc)
			so.contact = argv[++i];
		else if (!strcmp(argv[i], "--search-url") && i + 1 < argc)
			so.search_url = argv[++i];
		else if (!strcmp(argv[i], "--full"))
			so.full = 1;
		else if (!strcmp(argv[i], "--jobs") && i + 1 < argc) {
			long j;
			if (cli_opt_long("export", argv[i], argv[i + 1], 1, SITE_JOBS_MAX, "threads", &j))
				return 1;
			i++;
			so.jobs = (int)j;
			jobs_set = 1;
		} else if (strcmp(argv[i], "--json"))
			return cli_fail("export", "unknown argument %s", argv[i]);
	}
	if ((so.base_url || so.name || so.operator_name || so.contact || so.search_url || so.full ||
	     jobs_set) && !so.dir)
		return cli_fail("export", "--base-url, --name, --operator, --contact, --search-url, "
				"--full and --jobs go with --site");
	/* the checks pithd's mirror_name, mirror_operator and mirror_contact pass */
	const struct {
		const char *flag, *v;
		size_t max;
	} texts[] = {{"--name", so.name, CONFIG_MIRROR_NAME_MAX},
		     {"--operator", so.operator_name, CONFIG_MIRROR_NAME_MAX},
		     {"--contact", so.contact, CONFIG_MIRROR_CONTACT_MAX}};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		const char *why = texts[i].v ? config_text_why(texts[i].v, texts[i].max) : NULL;
		if (why)
			return cli_fail("export", "%s: %s", texts[i].flag, why);
	}
	if (so.dir && (subject || bundles))
		return cli_fail("export", "--site exports every record: no --subject or --bundles");
	pith_trust_t *trust;
	store_t *st;
	pith_err_t err = {0};
	char pith[PITH_NUMBER_LEN + 1];
	if (cli_store_open(ctx, "export", 0, &trust, &st))
		return 1;
	int rc = subject ? cli_store_resolve(st, "export", subject, pith) : 0;
	if (so.dir) {
		rc = export_site(st, &so, ctx->json);
	} else if (!rc && bundles) {
		rc = export_bundles(st, bundles, subject ? pith : NULL, ctx->json);
	} else if (!rc) {
		cli_list_t list = {ctx->json, 0};
		rc = store_events_each(st, subject ? pith : NULL, write_event, &list, &err);
		if (!rc)
			cli_list_end(&list);
		if (rc < 0)
			rc = cli_fail("export", "%s", err.msg);
		else if (rc > 0 || fflush(stdout))
			rc = cli_fail("export", "cannot write to stdout");
	}
	store_close(st);
	pith_trust_free(trust);
	return rc;
}

const cli_cmd_t cli_cmd_export = {
	"export", "write stored events as JSON Lines, bundles, or the mirror as a static site",
	"usage: pithctl --store DIR export [--subject ID] [--bundles OUTDIR] [--json]\n"
	"       pithctl --store DIR export --site OUT [--base-url URL] [--name NAME] [--full]\n"
	"                                    [--operator WHO] [--contact HOW]\n"
	"                                    [--search-url URL] [--jobs N]\n\n"
	"Writes every stored event (or those of one record) as canonical JSON,\n"
	"one per line, grouped by record and in (created_at, event_id) order\n"
	"within each: the order `pithctl import` ingests fastest (--json: one\n"
	"JSON array of them instead, one a line; [] for none).\n"
	"With --bundles, writes instead one file per record, OUTDIR/BODY.json:\n"
	"the newest verified registry bundle, byte for byte (records without one\n"
	"are skipped; a mirror cannot sign a registry bundle); --json prints\n"
	"{\"bundles\": N, \"dir\": OUTDIR}.\n"
	"With --site, writes every document the node's HTTP side serves for every\n"
	"record (the same bytes), the browse pages, pith-mirrors.json and\n"
	"pith-signing-key.json under OUT, each stored once (gzip-compressed when\n"
	"the node sends it so: FILE.gz), the records' documents side by side in\n"
	"OUT/rec/XY/, and the alias map OUT/.pith-site/aliases.map: serve it with\n"
	"deploy/nginx.conf, which maps the registry's URLs onto them (docs/site.md).\n"
	"URL: where OUT is served (links, the manifest); kept for later runs.\n"
	"NAME, WHO, HOW: the mirror's name, operator and contact in every page's\n"
	"header (pithd's mirror_name...: give the same for the same tree). --search-url:\n"
	"a live node whose /search the pages' search box submits to (files answer\n"
	"no search); kept for later runs, 'none' drops it; without one the pages\n"
	"have no search box.\n"
	"A second run writes only what changed since the last (a cursor in\n"
	"OUT/.pith-site), each file replaced by rename: safe while OUT is served.\n"
	"--full renders every record again. --jobs N renders records in N threads\n"
	"(default: the online cores; the same files whatever N). Prints what it\n"
	"did (--json: as JSON).\n",
	run,
};
