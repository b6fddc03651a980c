/* The search index's text (search_int.h): the FTS5 tokenizer "pith" that
 * indexes and queries every script, and the parser that turns what a
 * person typed into an FTS5 expression of quoted words.
 *
 * The tokenizer wraps SQLite's unicode61 (case folded, remove_diacritics
 * 2: "Müller", "MÜLLER" and "Muller" are one token) and changes two things
 * in what it hands FTS5:
 * - every character of a CJK script (Han, kana, Hangul, and their
 *   compatibility forms) is a token of its own. unicode61 keeps a run of
 *   them, which has no spaces between words, as one token, so "学习"
 *   would never find "深度学习的研究". A query word goes through the same
 *   tokenizer and becomes the phrase of its characters, which matches
 *   them consecutive: a substring search for CJK (docs/http.md, "Search",
 *   for why this and not a trigram index, and what it costs);
 * - letters unicode61 leaves alone (Unicode gives them no decomposition,
 *   or its diacritic table is Latin's) are folded to the letters people
 *   type for them: ø→o, ł→l, đ ð→d, ħ→h, ŧ→t, ı→i, ß ẞ→ss, æ→ae, œ→oe,
 *   þ→th, ſ→s, the fi ff fl ligatures, full-width ASCII (Ｆｕｌｌ→full),
 *   Greek vowels with tonos or dialytika (ί→ι) and final sigma (ς→σ),
 *   Cyrillic ё→е. So "Orsted" finds "Ørsted", "Lukasiewicz"
 *   "Łukasiewicz" and "θεωρια" "Θεωρία".
 * Index and query share it, so whatever it does, a word finds itself. */
#include "search_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "utf8.h"

/* ---- the tokenizer ---------------------------------------------------------------- */

typedef struct tok_module {
	fts5_tokenizer u61; /* unicode61's methods */
	void *u61_ctx;
} tok_module_t;

struct search_tok {
	tok_module_t *m;
	Fts5Tokenizer *in; /* unicode61's instance */
};

/* Whether cp is of a script written without spaces between words, whose
 * characters are tokens one by one. */
static int is_cjk(uint32_t cp)
{
	static const uint32_t ranges[][2] = {
		{0x2e80, 0x2fdf},   /* CJK and Kangxi radicals */
		{0x3005, 0x3007},   /* 々 〆 〇 */
		{0x3021, 0x3029},   /* Hangzhou numerals */
		{0x3031, 0x303c},   /* kana repeat marks */
		{0x3040, 0x31ff},   /* hiragana, katakana, bopomofo, Hangul compatibility jamo */
		{0x3400, 0x4dbf},   /* CJK extension A */
		{0x4e00, 0x9fff},   /* CJK unified ideographs */
		{0xa960, 0xa97f},   /* Hangul jamo extended A */
		{0xac00, 0xd7af},   /* Hangul syllables */
		{0xf900, 0xfaff},   /* CJK compatibility ideographs */
		{0xff66, 0xff9f},   /* half-width katakana */
		{0x20000, 0x3ffff}, /* CJK extensions B and later */
	};
	if (cp < 0x2e80)
		return 0;
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
		if (cp >= ranges[i][0] && cp <= ranges[i][1])
			return 1;
	return 0;
}

/* What cp is folded to (lower case ASCII), or NULL to keep it. Never
 * longer than cp's own UTF-8 (the token's buffer relies on it). Full-width
 * ASCII is computed by the caller. */
static const char *fold_of(uint32_t cp)
{
	static const struct {
		uint32_t cp;
		const char *to;
	} folds[] = {
		{0xc6, "ae"}, {0xd0, "d"},   {0xd8, "o"},  {0xde, "th"}, {0xdf, "ss"},
		{0xe6, "ae"}, {0xf0, "d"},   {0xf8, "o"},  {0xfe, "th"}, {0x110, "d"},
		{0x111, "d"}, {0x126, "h"},  {0x127, "h"}, {0x131, "i"}, {0x138, "k"},
		{0x13f, "l"}, {0x140, "l"},  {0x141, "l"}, {0x142, "l"}, {0x152, "oe"},
		{0x153, "oe"}, {0x166, "t"}, {0x167, "t"}, {0x17f, "s"}, {0x192, "f"},
		{0x1e9e, "ss"}, {0xfb00, "ff"}, {0xfb01, "fi"}, {0xfb02, "fl"},
		{0xfb03, "ffi"}, {0xfb04, "ffl"}, {0xfb05, "st"}, {0xfb06, "st"},
		/* Greek: unicode61 keeps the tonos and dialytika; final sigma */
		{0x386, "\u03b1"}, {0x388, "\u03b5"}, {0x389, "\u03b7"}, {0x38a, "\u03b9"},
		{0x38c, "\u03bf"}, {0x38e, "\u03c5"}, {0x38f, "\u03c9"}, {0x390, "\u03b9"},
		{0x3aa, "\u03b9"}, {0x3ab, "\u03c5"}, {0x3ac, "\u03b1"}, {0x3ad, "\u03b5"},
		{0x3ae, "\u03b7"}, {0x3af, "\u03b9"}, {0x3b0, "\u03c5"}, {0x3c2, "\u03c3"},
		{0x3ca, "\u03b9"}, {0x3cb, "\u03c5"}, {0x3cc, "\u03bf"}, {0x3cd, "\u03c5"},
		{0x3ce, "\u03c9"},
		/* Cyrillic: ё is written е as often as not */
		{0x401, "\u0435"}, {0x451, "\u0435"},
	};
	for (size_t i = 0; i < sizeof(folds) / sizeof(folds[0]); i++)
		if (folds[i].cp == cp)
			return folds[i].to;
	return NULL;
}

typedef struct split {
	void *ctx;
	int (*emit)(void *, int, const char *, int, int, int);
	char small[256];
} split_t;

/* One token from unicode61: its CJK characters one by one, the runs
 * between them folded (fold_of), each run one token. */
static int split_token(void *arg, int tflags, const char *tok, int ntok, int start, int end)
{
	split_t *sp = arg;
	int i = 0;
	while (i < ntok && (unsigned char)tok[i] < 0x80)
		i++;
	if (i >= ntok) /* ASCII, most tokens: as unicode61 made it */
		return sp->emit(sp->ctx, tflags, tok, ntok, start, end);
	size_t cap = (size_t)(unsigned)ntok;
	char *buf = cap <= sizeof(sp->small) ? sp->small : malloc(cap);
	if (!buf)
		return SQLITE_NOMEM;
	int rc = SQLITE_OK;
	size_t o = (size_t)i;
	memcpy(buf, tok, o); /* the ASCII before the first other byte */
	while (i < ntok && rc == SQLITE_OK) {
		uint32_t cp;
		size_t l = pith_utf8_char(tok + i, (size_t)(ntok - i), &cp);
		if (!l) { /* unicode61 hands out UTF-8; be safe all the same */
			buf[o++] = tok[i++];
			continue;
		}
		if (is_cjk(cp)) {
			if (o)
				rc = sp->emit(sp->ctx, tflags, buf, (int)o, start, end);
			if (rc == SQLITE_OK)
				rc = sp->emit(sp->ctx, o ? 0 : tflags, tok + i, (int)l, start, end);
			tflags = 0; /* colocation is the first token's alone */
			o = 0;
		} else if (cp >= 0xff01 && cp <= 0xff5e) {
			char c = (char)(cp - 0xfee0);
			buf[o++] = c >= 'A' && c <= 'Z' ? (char)(c | 0x20) : c;
		} else {
			const char *f = fold_of(cp);
			size_t fl = f ? strlen(f) : l;
			memcpy(buf + o, f ? f : tok + i, fl);
			o += fl;
		}
		i += (int)l;
	}
	if (o && rc == SQLITE_OK)
		rc = sp->emit(sp->ctx, tflags, buf, (int)o, start, end);
	if (buf != sp->small)
		free(buf);
	return rc;
}

static int tok_create(void *arg, const char **argv, int argc, Fts5Tokenizer **out)
{
	tok_module_t *m = arg;
	search_tok_t *t = calloc(1, sizeof(*t));
	if (!t)
		return SQLITE_NOMEM;
	t->m = m;
	int rc = m->u61.xCreate(m->u61_ctx, argv, argc, &t->in);
	if (rc != SQLITE_OK) {
		free(t);
		return rc;
	}
	*out = (Fts5Tokenizer *)t;
	return SQLITE_OK;
}

static void tok_delete(Fts5Tokenizer *p)
{
	search_tok_t *t = (search_tok_t *)p;
	if (t) {
		t->m->u61.xDelete(t->in);
		free(t);
	}
}

static int tok_tokenize(Fts5Tokenizer *p, void *ctx, int flags, const char *text, int n,
			int (*emit)(void *, int, const char *, int, int, int))
{
	search_tok_t *t = (search_tok_t *)p;
	split_t sp = {.ctx = ctx, .emit = emit};
	return t->m->u61.xTokenize(t->in, &sp, flags, text, n, split_token);
}

/* The connection's FTS5 API (SQLite's documented way: a pointer bound to
 * "SELECT fts5(?1)"), or NULL. */
static fts5_api *fts5_of(sqlite3 *db)
{
	fts5_api *api = NULL;
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
		sqlite3_step(st);
	}
	sqlite3_finalize(st);
	return api;
}

int search_tokenizer_register(sqlite3 *db)
{
	fts5_api *api = fts5_of(db);
	if (!api)
		return SQLITE_ERROR;
	tok_module_t *m = calloc(1, sizeof(*m));
	if (!m)
		return SQLITE_NOMEM;
	int rc = api->xFindTokenizer(api, "unicode61", &m->u61_ctx, &m->u61);
	if (rc != SQLITE_OK) {
		free(m);
		return rc;
	}
	fts5_tokenizer mine = {tok_create, tok_delete, tok_tokenize};
	return api->xCreateTokenizer(api, SEARCH_TOKENIZER, m, &mine, free);
}

int search_tok_open(sqlite3 *db, search_tok_t **out, pith_err_t *err)
{
	*out = NULL;
	fts5_api *api = fts5_of(db);
	void *ctx = NULL;
	fts5_tokenizer t;
	static const char *const args[] = {SEARCH_TOKENIZER_ARGS};
	if (!api || api->xFindTokenizer(api, SEARCH_TOKENIZER, &ctx, &t) != SQLITE_OK)
		return pith_err_set(err, PITH_EIO, "search index: tokenizer %s not registered",
				    SEARCH_TOKENIZER);
	Fts5Tokenizer *in = NULL;
	if (t.xCreate(ctx, (const char **)args, (int)(sizeof(args) / sizeof(args[0])), &in) !=
	    SQLITE_OK)
		return pith_err_set(err, PITH_EIO, "search index: cannot create its tokenizer");
	*out = (search_tok_t *)in;
	return 0;
}

void search_tok_free(search_tok_t *t)
{
	tok_delete((Fts5Tokenizer *)t);
}

static int count_one(void *arg, int tflags, const char *tok, int n, int start, int end)
{
	(void)tflags, (void)tok, (void)n, (void)start, (void)end;
	++*(int *)arg;
	return SQLITE_OK;
}

/* How many tokens w[0..n) is made of, as a query. */
static int tokens_in(search_tok_t *t, const char *w, size_t n)
{
	int count = 0;
	tok_tokenize((Fts5Tokenizer *)t, &count, FTS5_TOKENIZE_QUERY, w, (int)n, count_one);
	return count;
}

/* ---- the query --------------------------------------------------------------------- */

/* The length of the blank at p (end: the query's end): an ASCII space or
 * tab, or a Unicode space (no-break, ideographic, ...); 0 when none. */
static size_t blank_at(const char *p, const char *end)
{
	if (*p == ' ' || *p == '\t')
		return 1;
	uint32_t cp;
	size_t l = (unsigned char)*p >= 0x80 ? pith_utf8_char(p, (size_t)(end - p), &cp) : 0;
	if (l && (cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
		  cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000))
		return l;
	return 0;
}

/* Refuses what is not text: invalid UTF-8, control characters (a tab is
 * a blank). */
static int text_check(const char *q, size_t n, pith_err_t *err)
{
	if (!pith_utf8_valid(q, n))
		return pith_err_set(err, PITH_EINVAL, "the query is not valid UTF-8");
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t l = pith_utf8_char(q + i, n - i, &cp);
		if ((cp < 0x20 && cp != '\t') || (cp >= 0x7f && cp < 0xa0))
			return pith_err_set(err, PITH_EINVAL, "the query holds a control character "
					    "(U+%04X): type words only", (unsigned)cp);
		i += l;
	}
	return 0;
}

int search_match_build(search_tok_t *tok, const char *q, pith_buf_t *out, pith_err_t *err)
{
	size_t qn = strlen(q);
	if (qn > SEARCH_QUERY_MAX)
		return pith_err_set(err, PITH_ETOOBIG, "the query is longer than %d bytes",
				    SEARCH_QUERY_MAX);
	int rc = text_check(q, qn, err);
	if (rc)
		return rc;
	static const struct {
		const char *prefix, *col;
	} cols[] = {{"cat:", "cats"}, {"category:", "cats"}, {"author:", "authors"},
		    {"title:", "title"}};
	size_t terms = 0;
	const char *p = q, *end = q + qn;
	while (p < end) {
		size_t bl;
		while (p < end && (bl = blank_at(p, end)))
			p += bl;
		const char *w = p;
		while (p < end && !blank_at(p, end))
			p++;
		size_t n = (size_t)(p - w);
		if (!n)
			continue;
		const char *col = NULL;
		for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
			size_t pl = strlen(cols[i].prefix);
			if (n > pl && !strncasecmp(w, cols[i].prefix, pl)) {
				col = cols[i].col;
				w += pl;
				n -= pl;
				break;
			}
		}
		/* punctuation alone ("-", "*", a quote) is no word */
		if (!tokens_in(tok, w, n))
			continue;
		if (++terms > SEARCH_TERMS_MAX)
			return pith_err_set(err, PITH_ETOOBIG, "more than %d words in the query",
					    SEARCH_TERMS_MAX);
		if (out->len)
			pith_buf_puts(out, " AND ");
		if (col)
			pith_buf_printf(out, "%s : ", col);
		/* a quoted string: FTS5 takes nothing in it as syntax */
		pith_buf_putc(out, '"');
		for (size_t i = 0; i < n; i++) {
			if (w[i] == '"')
				pith_buf_putc(out, '"');
			pith_buf_putc(out, (uint8_t)w[i]);
		}
		pith_buf_putc(out, '"');
	}
	if (!terms)
		return pith_err_set(err, PITH_EINVAL, "no word to search for (letters or digits; "
				    "punctuation alone is not searched)");
	pith_buf_putc(out, 0);
	return out->oom ? pith_err_set(err, PITH_ENOMEM, "out of memory") : 0;
}
