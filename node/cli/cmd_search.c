/* pithctl search WORDS: the search index (node/search/search.h), ranked. With
 * --store DIR it opens the index beside the store (DATA/search.sqlite for
 * DATA/store, or --index FILE), brings it up to date from the store's
 * change log, and queries it; when a running pithd holds the store, the
 * index is that pithd's to write: it is opened read-only and queried as
 * it is. With --node SOCKET the running pithd answers from its own
 * index. --json: one array, a hit a line, "[]" for none (man pithctl,
 * "--json"); without it, a line saying none matched. */
#include "cli_node.h"
#include "cli_store.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

typedef struct out {
	const cli_ctx_t *ctx;
	cli_list_t list; /* hits printed; --json: one array */
} out_t;

/* One hit: "pith:SHORT  title" and an indented line of authors,
 * categories and date (people), or search_hit_json's object (--json). */
static int print_hit(void *arg, const search_hit_t *h)
{
	out_t *o = arg;
	const cli_ctx_t *ctx = o->ctx;
	cli_list_item(&o->list);
	if (ctx->json) {
		pith_buf_t b = PITH_BUF_INIT;
		search_hit_json(h, &b);
		if (!b.oom)
			fwrite(b.data, 1, b.len, stdout);
		pith_buf_release(&b);
	} else {
		printf("pith:%.8s  %s\n", h->pith + PITH_NUMBER_LEN - PITH_BODY_LEN,
		       h->title && *h->title ? h->title : "(title not known here)");
		const char *parts[] = {h->authors, h->cats, h->submitted_at};
		int first = 1;
		printf("               ");
		for (size_t i = 0; i < 3; i++)
			if (parts[i] && *parts[i]) {
				printf(i == 2 ? "%s%.10s" : "%s%s", first ? "" : " · ", parts[i]);
				first = 0;
			}
		printf("\n");
	}
	return ferror(stdout) ? 1 : 0;
}

/* After the hits: the array's end, "[]" for none (--json: an empty
 * result is never nothing), or a line saying none matched; exit status
 * 0 either way. */
static void print_end(out_t *o, size_t offset)
{
	cli_list_end(&o->list);
	if (o->list.n || o->ctx->json)
		return;
	if (offset)
		printf("no more records matched (offset %zu)\n", offset);
	else
		printf("no records matched\n");
}

typedef struct sopts {
	const char *index;
	size_t limit, offset;
	pith_buf_t q; /* the words, one space apart */
} sopts_t;

static int parse(int argc, char **argv, sopts_t *o)
{
	o->limit = 20;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--json"))
			continue;
		if ((!strcmp(a, "--index") || !strcmp(a, "--limit") || !strcmp(a, "--offset"))) {
			if (i + 1 == argc)
				return cli_fail("search", "%s needs a value", a);
			const char *v = argv[++i];
			char *end;
			if (!strcmp(a, "--index")) {
				o->index = v;
				continue;
			}
			unsigned long x = strtoul(v, &end, 10);
			if (!*v || *end || x > 100000)
				return cli_fail("search", "%s: not a count: %s", a, v);
			if (!strcmp(a, "--limit"))
				o->limit = x;
			else
				o->offset = x;
			continue;
		}
		if (o->q.len)
			pith_buf_putc(&o->q, ' ');
		pith_buf_puts(&o->q, a);
	}
	pith_buf_putc(&o->q, 0);
	if (o->q.oom)
		return cli_fail("search", "out of memory");
	if (o->q.len <= 1)
		return cli_fail("search", "missing WORDS (pithctl search --help)");
	if (o->q.len - 1 > SEARCH_QUERY_MAX)
		return cli_fail("search", "the query is longer than %d bytes", SEARCH_QUERY_MAX);
	return 0;
}

static int run_node(cli_ctx_t *ctx, sopts_t *o)
{
	const char *q = (const char *)o->q.data;
	if (cli_node_arg_ok("search", "WORDS", q))
		return 1;
	pith_buf_t line = PITH_BUF_INIT;
	pith_buf_printf(&line, "search %zu %zu %s", o->limit, o->offset, q);
	json_doc_t *doc;
	int rc = line.oom ? cli_fail("search", "out of memory")
			  : cli_node_call(ctx, "search", (const char *)line.data, &doc, NULL);
	pith_buf_release(&line);
	if (rc)
		return 1;
	const json_value_t *res = json_get_type(json_doc_root(doc), "results", JSON_ARRAY);
	out_t out = {ctx, {ctx->json, 0}};
	if (!res)
		rc = cli_fail("search", "the node's answer has no \"results\"");
	for (size_t i = 0; !rc && i < res->len; i++) {
		const json_value_t *r = res->u.items[i];
		search_hit_t h = {0};
		snprintf(h.pith, sizeof(h.pith), "%s", cli_json_str(r, "pith_number"));
		if (strlen(h.pith) != PITH_NUMBER_LEN) {
			rc = cli_fail("search", "the node's answer has a malformed pith_number");
			break;
		}
		h.title = json_get_str(r, "title");
		h.authors = json_get_str(r, "authors");
		h.primary_cat = json_get_str(r, "primary_cat");
		h.cats = json_get_str(r, "categories");
		h.submitted_at = json_get_str(r, "submitted_at");
		h.score = (double)cli_json_int(r, "score") / 1e6;
		if (print_hit(&out, &h))
			rc = cli_fail("search", "cannot write to stdout");
	}
	if (!rc)
		print_end(&out, o->offset);
	json_doc_free(doc);
	return rc;
}

/* DATA/search.sqlite for DATA/store: the file pithd keeps. */
static void index_path(const char *store_dir, char *out, size_t cap)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", store_dir);
	size_t n = strlen(tmp);
	while (n > 1 && tmp[n - 1] == '/')
		tmp[--n] = 0;
	snprintf(out, cap, "%s/search.sqlite", dirname(tmp));
}

/* Beside a running pithd (it holds the store): its index, read-only, as
 * far as it has indexed; only pithd writes it. Another process writing
 * the file under pithd would leave it answering from an index it did not
 * build (issue 51). */
static int run_beside_node(cli_ctx_t *ctx, sopts_t *o, const char *path, long pid)
{
	search_t *s = NULL;
	pith_err_t err = {0};
	char sock[4200];
	cli_store_sock(ctx->store_dir, sock, sizeof(sock));
	if (search_open_ro(path, &s, &err))
		return cli_fail("search", "a running pithd (pid %ld) holds %s, and its index %s cannot "
				"be read (%s); use --node %s search", pid, ctx->store_dir, path, err.msg,
				sock);
	out_t out = {ctx, {ctx->json, 0}};
	int rc = 0, more = 0;
	if (search_query(s, (const char *)o->q.data, o->limit, o->offset, print_hit, &out, &more,
			 &err))
		rc = cli_fail("search", "%s", err.msg);
	if (!rc)
		print_end(&out, o->offset);
	/* after the answer: a refusal stays one line */
	if (!rc && !ctx->json)
		fprintf(stderr, "pithctl search: a running pithd holds this store: answered from its "
			"index, read-only (indexed through change %llu)\n",
			(unsigned long long)search_seq(s));
	search_free(s);
	return rc;
}

static int run(cli_ctx_t *ctx, int argc, char **argv)
{
	sopts_t o = {.q = PITH_BUF_INIT};
	int rc = parse(argc, argv, &o);
	if (rc || ctx->node_sock) {
		rc = rc ? rc : run_node(ctx, &o);
		pith_buf_release(&o.q);
		return rc;
	}
	pith_trust_t *trust;
	store_t *st;
	search_t *s = NULL;
	pith_err_t err = {0};
	char path[4200] = "";
	if (o.index)
		snprintf(path, sizeof(path), "%s", o.index);
	else if (ctx->store_dir)
		index_path(ctx->store_dir, path, sizeof(path));
	long pid = ctx->store_dir ? cli_store_holder(ctx->store_dir) : 0;
	if (pid) {
		rc = run_beside_node(ctx, &o, path, pid);
		pith_buf_release(&o.q);
		return rc;
	}
	if (cli_store_open(ctx, "search", 0, &trust, &st)) {
		pith_buf_release(&o.q);
		return 1;
	}
	uint64_t n = 0;
	int more = 0;
	out_t out = {ctx, {ctx->json, 0}};
	double t0 = cli_now();
	if (search_open(path, st, &s, &err) || search_refresh(s, &n, &err))
		rc = cli_fail("search", "%s", err.msg);
	if (!rc && n && !ctx->json)
		fprintf(stderr, "pithctl search: indexed %llu records in %.1f s (%s)\n",
			(unsigned long long)n, cli_now() - t0, path);
	if (!rc && search_query(s, (const char *)o.q.data, o.limit, o.offset, print_hit, &out,
				&more, &err))
		rc = cli_fail("search", "%s", err.msg);
	if (!rc)
		print_end(&out, o.offset);
	if (!rc && (fflush(stdout) || ferror(stdout)))
		rc = cli_fail("search", "cannot write to stdout");
	search_free(s);
	store_close(st);
	pith_trust_free(trust);
	pith_buf_release(&o.q);
	return rc;
}

const cli_cmd_t cli_cmd_search = {
	"search", "search titles, author names and categories, ranked",
	"usage: pithctl --store DIR search [--index FILE] [--limit N] [--offset N] [--json] WORDS...\n"
	"       pithctl --node SOCKET search [--limit N] [--offset N] [--json] WORDS...\n\n"
	"The records whose title, authors or categories hold every word, best\n"
	"first (bm25; title words weigh most, then authors', then categories).\n"
	"Words in any script: case and accents do not matter (Müller, Muller,\n"
	"MÜLLER), a Chinese or Japanese word matches inside a title's run of\n"
	"characters. Quotes, *, NEAR(, OR and the like are plain text.\n"
	"A word is matched whole and literally; cat:X matches category X only\n"
	"(cat:cs.LG), author:NAME an author's name, title:WORD the title. At\n"
	"most 256 bytes and 12 words; --limit (default 20) is cut to 100.\n\n"
	"With --store, the index is the file pithd keeps beside its store\n"
	"(DATA/search.sqlite for DATA/store; --index FILE for another): it is\n"
	"created or brought up to date from the store's change log first\n"
	"(a progress line on stderr), then queried. When a running pithd holds\n"
	"the store, its index is pithd's to write: it is read as it is,\n"
	"read-only (a line on stderr says so). With --node, the running pithd\n"
	"answers from its index. One line per record (pith:SHORT and the title,\n"
	"then authors, categories and date), or \"no records matched\"; --json:\n"
	"one array, an object a line, [] when none matched. Exit status 0 with hits\n"
	"or without; 1 for a query refused (not UTF-8, a control character, no\n"
	"word at all, too long) or an index that cannot be read.\n",
	run,
};
