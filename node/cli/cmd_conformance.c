/* pithctl conformance DIR: runs the conformance corpus (tests/conformance,
 * README.md there) against this build: one line per failing case, then a
 * summary; exit 0 only if every case passes. */
#include <dirent.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "conform.h"
#include "json.h"

typedef struct run_state {
	const char *file;
	size_t files, cases, failed;
	int broken; /* a file that is no case file */
	int json;
	pith_buf_t problems; /* --json: the lines, as the members of an array */
} run_state_t;

/* A failing case or a broken file: a line, or with --json a string kept
 * for the "problems" array of the summary. */
static void problem(run_state_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(run_state_t *r, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!r->json) {
		printf("%s\n", line);
		return;
	}
	if (r->problems.len)
		pith_buf_putc(&r->problems, ',');
	json_write_string(&r->problems, line, strlen(line));
}

static void on_fail(void *arg, const char *case_name, const char *what)
{
	run_state_t *r = arg;
	problem(r, "FAIL %s: %s: %s", r->file, case_name, what);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

static void run_file(run_state_t *r, const char *path)
{
	pith_buf_t b = PITH_BUF_INIT;
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	r->file = path;
	r->files++;
	if (cli_read_file(path, CLI_MAX_INPUT, &b)) {
		r->broken = 1;
	} else if (json_parse(&doc, b.data, b.len, NULL, &err) ||
		   pith_conform_check(json_doc_root(doc), on_fail, r, &r->cases, &r->failed, &err)) {
		problem(r, "BROKEN %s: %s", path, err.msg);
		r->broken = 1;
	}
	json_doc_free(doc);
	pith_buf_release(&b);
}

/* Every *.json file under dir, in name order (directories too). */
static void run_dir(run_state_t *r, const char *dir)
{
	struct dirent **names = NULL;
	int n = scandir(dir, &names, NULL, alphasort);
	if (n < 0) {
		problem(r, "BROKEN %s: cannot read the directory", dir);
		r->broken = 1;
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *nm = names[i]->d_name;
		char path[4096];
		if (nm[0] != '.' && snprintf(path, sizeof(path), "%s/%s", dir, nm) < (int)sizeof(path)) {
			DIR *sub = opendir(path);
			if (sub) {
				closedir(sub);
				run_dir(r, path);
			} else if (ends_with(nm, ".json")) {
				run_file(r, path);
			}
		}
		free(names[i]);
	}
	free(names);
}

/* --answer FILE: this build's answers to one case file, for a runner of
 * another implementation's kind (tests/conformance/run.py). */
static int answer_file(const char *path)
{
	pith_buf_t b = PITH_BUF_INIT, out = PITH_BUF_INIT;
	json_doc_t *doc = NULL;
	pith_err_t err = {0};
	int rc = cli_read_file(path, CLI_MAX_INPUT, &b);
	if (!rc && (json_parse(&doc, b.data, b.len, NULL, &err) ||
		    pith_conform_answer_file(json_doc_root(doc), &out, &err)))
		rc = cli_fail("conformance", "%s: %s", path, err.msg);
	if (!rc)
		printf("%.*s\n", (int)out.len, (const char *)out.data);
	json_doc_free(doc);
	pith_buf_release(&b);
	pith_buf_release(&out);
	return rc ? 1 : 0;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--answer") && i + 1 < argc)
			return answer_file(argv[i + 1]);
		if (strcmp(argv[i], "--json"))
			dir = argv[i];
	}
	if (!dir)
		return cli_fail("conformance", "missing DIR (the corpus, e.g. tests/conformance)");
	run_state_t r = {.json = ctx->json, .problems = PITH_BUF_INIT};
	run_dir(&r, dir);
	if (r.json)
		printf("{\"ok\":%s,\"cases\":%zu,\"files\":%zu,\"passed\":%zu,\"failed\":%zu,"
		       "\"broken\":%s,\"problems\":[%.*s]}\n",
		       r.failed || r.broken || r.cases == 0 ? "false" : "true", r.cases, r.files,
		       r.cases - r.failed, r.failed, r.broken ? "true" : "false",
		       (int)r.problems.len, r.problems.data ? (const char *)r.problems.data : "");
	else
		printf("conformance: %zu case(s) in %zu file(s): %zu passed, %zu failed%s\n", r.cases,
		       r.files, r.cases - r.failed, r.failed,
		       r.broken ? "; some files could not be read" : "");
	pith_buf_release(&r.problems);
	return r.failed || r.broken || r.cases == 0 ? 1 : 0;
}

const cli_cmd_t cli_cmd_conformance = {
	"conformance", "run a conformance corpus against this build",
	"usage: pithctl conformance [--json] DIR\n"
	"       pithctl conformance --answer FILE\n\n"
	"Runs every case file (*.json) under DIR, in name order: merge cases\n"
	"(documents accepted or refused by the rule they break, then the state\n"
	"bytes and state_sha256), and canonical JSON, timestamp, record identity\n"
	"and key fingerprint cases. Prints one line per failing case and a summary;\n"
	"exits 0 only if every case passes (--json: one object, ok, cases, files,\n"
	"passed, failed, broken and the lines as \"problems\"). The corpus and its format:\n"
	"tests/conformance/README.md; the rules: docs/merge.md.\n\n"
	"--answer FILE  print this build's answers to one case file as JSON, in\n"
	"               the case's member names (what tests/conformance/run.py\n"
	"               asks of any implementation).\n",
	run,
};
