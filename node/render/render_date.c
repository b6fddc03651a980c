/* Last-Modified and If-Modified-Since (docs/http.md, "Conditional
 * requests"): HTTP-dates, the date each document is given, and the
 * the date each document is given: the notes a date is taken from.
 *
 * The store keeps no time with its change log, and an event's created_at
 * is no date of the document (an older event arriving late changes the
 * record without moving its newest created_at: a client that compared
 * dates would keep the old bytes). What the server knows instead is when
 * it saw the log reach a number: a table of (sequence number, second),
 * one row per second in which a document needed a date and the log had
 * moved (and once a second while the log moves, so that the documents
 * of records committed while no one asked are dated a second later,
 * not at their first request). A record's documents are dated by the first row at or past the
 * record's latest change: never before that change (the row was written
 * after it was committed), never going backwards (rows only grow), and
 * the same from one request to the next while nothing changes. That
 * table is the server's (node/http/http_dates.c): here are the HTTP-dates
 * and the notes the views make, on any thread (the number and when they
 * read it), which a static site's documents carry too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "render_int.h"

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
				   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void render_date_format(int64_t t, char out[static RENDER_DATE_LEN + 1])
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!gmtime_r(&tt, &tm)) {
		memset(&tm, 0, sizeof(tm));
		tm.tm_mday = 1;
		tm.tm_year = 70;
		tm.tm_wday = 4;
	}
	/* IMF-fixdate (RFC 9110 5.6.7), names fixed: no locale */
	char tmp[64];
	snprintf(tmp, sizeof(tmp), "%.3s, %02u %.3s %04u %02u:%02u:%02u GMT", wdays[tm.tm_wday % 7],
		 (unsigned)tm.tm_mday % 100, months[tm.tm_mon % 12],
		 (unsigned)(tm.tm_year + 1900) % 10000, (unsigned)tm.tm_hour % 100,
		 (unsigned)tm.tm_min % 100, (unsigned)tm.tm_sec % 100);
	memcpy(out, tmp, RENDER_DATE_LEN);
	out[RENDER_DATE_LEN] = 0;
}

/* n digits at *p into *v; advances *p. */
static int digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return -1;
		*v = *v * 10 + (**p - '0');
	}
	return 0;
}

static int lit(const char **p, const char *s)
{
	size_t n = strlen(s);
	if (strncmp(*p, s, n))
		return -1;
	*p += n;
	return 0;
}

static int month_of(const char **p)
{
	for (int i = 0; i < 12; i++)
		if (!strncmp(*p, months[i], 3)) {
			*p += 3;
			return i;
		}
	return -1;
}

static int hms(const char **p, struct tm *tm)
{
	return digits(p, 2, &tm->tm_hour) || lit(p, ":") || digits(p, 2, &tm->tm_min) ||
	       lit(p, ":") || digits(p, 2, &tm->tm_sec) ? -1 : 0;
}

int render_date_parse(const char *s, int64_t *out)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	if (!s)
		return -1;
	const char *p = s;
	int day = 0;
	while (*p >= 'A' && *p <= 'z' && p - s < 10)
		p++;
	if (p - s < 3)
		return -1;
	if (*p == ',' && p - s == 3) {
		/* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
		p++;
		if (lit(&p, " ") || digits(&p, 2, &day) || lit(&p, " ") ||
		    (tm.tm_mon = month_of(&p)) < 0 || lit(&p, " ") || digits(&p, 4, &tm.tm_year) ||
		    lit(&p, " ") || hms(&p, &tm) || lit(&p, " GMT"))
			return -1;
		tm.tm_year -= 1900;
	} else if (*p == ',') {
		/* obsolete RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
		p++;
		if (lit(&p, " ") || digits(&p, 2, &day) || lit(&p, "-") ||
		    (tm.tm_mon = month_of(&p)) < 0 || lit(&p, "-") || digits(&p, 2, &tm.tm_year) ||
		    lit(&p, " ") || hms(&p, &tm) || lit(&p, " GMT"))
			return -1;
		if (tm.tm_year < 70)
			tm.tm_year += 100; /* two digits: the nearest century, as RFC 9110 says */
	} else if (*p == ' ' && p - s == 3) {
		/* obsolete asctime: Sun Nov  6 08:49:37 1994 */
		p++;
		if ((tm.tm_mon = month_of(&p)) < 0 || lit(&p, " "))
			return -1;
		if (*p == ' ')
			p++, day = 0, digits(&p, 1, &day);
		else if (digits(&p, 2, &day))
			return -1;
		if (!day || lit(&p, " ") || hms(&p, &tm) || lit(&p, " ") ||
		    digits(&p, 4, &tm.tm_year))
			return -1;
		tm.tm_year -= 1900;
	} else {
		return -1;
	}
	if (*p || day < 1 || day > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
		return -1;
	tm.tm_mday = day;
	*out = (int64_t)timegm(&tm);
	return 0;
}

/* ---- the notes the views make (any thread) --------------------------------------------- */

void render_date_note_seq(render_ctx_t *c, uint64_t seq)
{
	c->r.lm_seq = seq;
	c->r.lm_read = (int64_t)time(NULL);
}

void render_date_note_record(render_ctx_t *c, const char *pith)
{
	uint64_t seq = 0;
	if (c->route == RENDER_ROUTE_BUNDLE || c->route == RENDER_ROUTE_WELL_KNOWN) {
		/* a bundle is the registry's, dated by its own built_at; a newer
		 * one replaces it only with a later built_at */
		char built[STORE_BUILT_AT_MAX + 1];
		int64_t us;
		if (!store_built_at_get(c->rd->store, pith, built, NULL) && !pith_time_parse(built, &us))
			c->r.lm_fixed = us / 1000000;
		return;
	}
	/* read before the documents are: the date is then never later than
	 * the bytes (a change in between makes the date older, not newer) */
	if (!store_change_seq_get(c->rd->store, pith, &seq, NULL))
		render_date_note_seq(c, seq);
}

/* ---- conditional requests ------------------------------------------------------------ */

/* If-None-Match (RFC 9110 13.1.2): "*" or a list of entity tags, compared
 * weakly (a W/ prefix is ignored). */
static int etag_listed(const char *inm, const char *etag)
{
	size_t elen = strlen(etag);
	const char *p = inm;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (!*p)
			break;
		if (*p == '*')
			return 1;
		if (p[0] == 'W' && p[1] == '/')
			p += 2;
		const char *s = p;
		if (*p == '"') {
			p++;
			while (*p && *p != '"')
				p++;
			if (*p == '"')
				p++;
		} else {
			while (*p && *p != ',')
				p++;
		}
		if ((size_t)(p - s) == elen && !memcmp(s, etag, elen))
			return 1;
		while (*p && *p != ',')
			p++;
	}
	return 0;
}

int render_is_not_modified(const char *etag, int64_t last_modified, const char *if_none_match,
			   const char *if_modified_since)
{
	/* If-None-Match, when sent, decides alone (RFC 9110 13.2.2);
	 * If-Modified-Since only without it */
	int64_t since;
	if (!etag[0])
		return 0;
	if (if_none_match)
		return etag_listed(if_none_match, etag);
	return last_modified && if_modified_since && !render_date_parse(if_modified_since, &since) &&
	       last_modified <= since;
}

int64_t render_date_own(const render_resp_t *r, int64_t now)
{
	/* only a second that has ended (and so never after Date, RFC 9110
	 * 8.8.2.1: a date in the future is not sent) */
	return r->lm_fixed > 0 && r->lm_fixed < now ? r->lm_fixed : 0;
}
