/* What HTTP(S) upstreams answer (issue 14's groundwork): the registry's
 * mirror manifest (/pith-mirrors.json) with its URL patterns, the two
 * shapes of an answer of the resolve API (/api/pith-number/resolve): a
 * JSON object naming a pith number, or a 30x Location to /pith/{ID}; and a
 * page of a pithd's change feed (/api/changes, docs/upstream.md).
 *
 * Pure, like the rest of proto/: bytes in, fixed-size structs or an error
 * out; limits passed in; no I/O. Nothing here is trusted: a manifest says
 * where bundles may be fetched, and every bundle is verified as gossip is. */
#ifndef PITH_UPSTREAM_H
#define PITH_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "ids.h"

#define PITH_MIRRORS_MAX 32     /* mirrors a manifest may list, at most */
#define PITH_URL_MAX 512        /* bytes in a URL or pattern, NUL aside */
#define PITH_MIRROR_TEXT_MAX 96 /* bytes in a name, type, status, key id */

typedef struct pith_upstream_limits {
	size_t max_bytes;   /* whole body */
	unsigned max_depth; /* JSON nesting */
	size_t max_mirrors; /* at most PITH_MIRRORS_MAX */
	size_t max_changes; /* entries of a change feed page; 0: the caller's array */
} pith_upstream_limits_t;

/* 1 MiB, depth 16, PITH_MIRRORS_MAX mirrors, PITH_CHANGES_MAX changes. */
extern const pith_upstream_limits_t pith_upstream_limits_default;
/* For a change feed page: 4 MiB (10,000 entries are under 3 MB), depth
 * 16, PITH_CHANGES_MAX changes. */
extern const pith_upstream_limits_t pith_changes_limits_default;

typedef struct pith_mirror {
	char name[PITH_MIRROR_TEXT_MAX];
	char mirror_type[PITH_MIRROR_TEXT_MAX]; /* "https", ... as given */
	char status[PITH_MIRROR_TEXT_MAX];      /* "primary", ... or "" */
	char base_url[PITH_URL_MAX];            /* http(s)://host[:port][/path] */
	/* URL patterns, "" when absent; each holds {suffix} (the 26-character
	 * body of a pith number) in its path, and nowhere else */
	char bundle_pattern[PITH_URL_MAX];
	char state_pattern[PITH_URL_MAX];
	char well_known_pattern[PITH_URL_MAX];
	/* the key the mirror names (informational: trust comes from the
	 * operator's --trust-key, never from a manifest) */
	int has_key;
	char key_id[PITH_MIRROR_TEXT_MAX];
	uint8_t public_key[32];
	/* the absolute URL of the mirror's change feed (a pithd's own entry:
	 * "changes_url"), "" when it names none: http(s), no query or
	 * fragment (a follower adds ?after=...&limit=...) */
	char changes_url[PITH_URL_MAX];
} pith_mirror_t;

typedef struct pith_manifest {
	char manifest_version[PITH_MIRROR_TEXT_MAX];
	char merge_version[PITH_MIRROR_TEXT_MAX]; /* "" when absent */
	size_t n_mirrors;
	pith_mirror_t mirrors[PITH_MIRRORS_MAX];
} pith_manifest_t;

/* Parses a /pith-mirrors.json body of len bytes into *out (zeroed first).
 * Requires manifest_type "pith_mirror_manifest", a manifest_version of
 * major version 1 and a "mirrors" array; each mirror needs an http(s)
 * base_url; its patterns are optional and validated when present
 * (pith_pattern_check), as is changes_url (an http(s) URL). Unknown members are ignored. lim NULL means the
 * defaults. Returns 0, PITH_ETOOBIG (body, depth, mirror count or a field
 * over its bound) or PITH_EINVAL, with a message naming the field
 * (mirrors[2].bundle_pattern) or byte offset. */
int pith_manifest_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
			pith_manifest_t *out, pith_err_t *err);

/* Checks a URL pattern: http:// or https://, a host of letters, digits,
 * '.', '-' (an optional :port), no user info, path characters only
 * (no blanks, controls, '\', '#', "..", non-ASCII), and at least one
 * placeholder, all of them {suffix} and all after the host. 0 or
 * PITH_EINVAL/PITH_ETOOBIG with a message naming what is wrong. */
int pith_pattern_check(const char *pattern, pith_err_t *err);

/* Fills pattern's {suffix} placeholders with the 26-character body of
 * pith_number (a full "pith:YYYY:BODY" or the bare body) into out (cap
 * bytes, NUL-terminated). Checks the pattern first (pith_pattern_check),
 * so the URL made is always on the pattern's own origin. 0, PITH_EINVAL
 * (bad pattern or number) or PITH_ETOOBIG (does not fit in cap). */
int pith_pattern_expand(const char *pattern, const char *pith_number, char *out, size_t cap,
			pith_err_t *err);

/* The URL of layout cand of an upstream's bundle of body (26 characters):
 * with a pattern (the manifest's bundle_pattern, non-empty) only layout 0,
 * the pattern expanded; without one the registry's two fixed layouts,
 * base/pith/{suffix}/bundle.json (0) then its .well-known form (1). base
 * has no trailing '/'. 0 with out set; 1 when there is no layout cand;
 * PITH_EINVAL or PITH_ETOOBIG (pith_pattern_expand's) with err. */
int pith_bundle_url(const char *pattern, const char *base, unsigned cand, const char *body,
		    char *out, size_t cap, pith_err_t *err);

/* The JSON answer of /api/pith-number/resolve?...&json=true, whose format
 * the registry has not published: an object with a string "pith_number",
 * at the top level or one level down under "record", "result", "data" or
 * "resolved". The number must be well formed (pith_number_is_valid).
 * Returns 0 with out filled, PITH_ENOTFOUND if a well-formed object names
 * no pith number, PITH_EINVAL/PITH_ETOOBIG otherwise. lim NULL: defaults
 * (max_mirrors unused). */
int pith_resolve_answer_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
			      char out[static PITH_NUMBER_LEN + 1], pith_err_t *err);

/* The Location header (len bytes) of a 30x answer of the resolve API,
 * asked of base_url: "/pith/{ID}" or an absolute URL with base_url's
 * scheme, host and port (any case of scheme and host; default ports
 * spelled or not), "/pith/{ID}" in its path under base_url's path, query
 * and fragment ignored. ID: a 26-character body or a full pith number
 * (percent escapes decoded). *out gets a PITH_ID_FULL pith_id_t (number
 * set when the year was given). 0 or PITH_EINVAL/PITH_ETOOBIG. */
int pith_resolve_location_parse(const char *location, size_t len, const char *base_url,
				pith_id_t *out, pith_err_t *err);

/* ---- the change feed (GET /api/changes) -------------------------------------
 * {"changes":[{"cursor","pith_number","state_sha256","bundle_sha256",
 * "built_at"}, ...],"next"}: records in the order the upstream committed
 * their changes, each once. docs/upstream.md, "The change feed". */

#define PITH_CHANGES_MAX 10000 /* entries a page may hold, at most (the server's cap) */
#define PITH_CURSOR_MAX 64     /* bytes of a cursor, NUL aside */
#define PITH_BUILT_AT_MAX 40   /* bytes of a built_at text, NUL aside */

typedef struct pith_change {
	char cursor[PITH_CURSOR_MAX + 1];      /* opaque: printable ASCII, no blanks */
	char pith_number[PITH_NUMBER_LEN + 1]; /* well formed */
	uint8_t state_sha[32];                 /* the upstream's state_sha256 */
	int has_bundle;                        /* bundle_sha256 and built_at given: */
	uint8_t bundle_sha[32];
	char built_at[PITH_BUILT_AT_MAX + 1];  /*   as the bundle has it */
	int64_t built_us;                      /*   the same in µs */
} pith_change_t;

/* Parses one page of a change feed, len bytes, into out[0..*n) (at most
 * cap entries, and at most lim->max_changes when that is not 0) and the
 * page's next cursor into next. Each entry needs a cursor (1 to
 * PITH_CURSOR_MAX bytes of printable ASCII without blanks), a well-formed
 * full pith_number and a state_sha256 of 64 lower-case hex digits;
 * bundle_sha256 (64 lower-case hex) and built_at (a timestamp,
 * pith_time_parse, at most PITH_BUILT_AT_MAX bytes) come together or are
 * both null or absent. "next" is required, a cursor as above. Unknown
 * members are ignored. lim NULL: pith_changes_limits_default. Returns 0,
 * PITH_ETOOBIG (body, depth, more entries than allowed, a field over its
 * bound) or PITH_EINVAL, with a message naming the field
 * (changes[3].state_sha256); on failure *n is 0 and next "". */
int pith_changes_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
		       pith_change_t *out, size_t cap, size_t *n,
		       char next[static PITH_CURSOR_MAX + 1], pith_err_t *err);

/* ---- a record's events page (GET /api/pith-number/{ID}/events.json) -------
 * {"events":[EVENT,...],"next_offset":N|null,"pith_number":...,...}: what a
 * pithd serves (docs/http.md), read by a follower of its change feed. */

#define PITH_EVENTS_PAGE_MAX 10000 /* events a page may hold, at most */

/* Hands each event of an events page (len bytes) to fn as its canonical
 * JSON bytes, in order, after checking the page whole: an object whose
 * pith_number is well formed and equals pith (when pith is not NULL), an
 * "events" array of at most max_events (and PITH_EVENTS_PAGE_MAX) objects,
 * and next_offset null or an integer greater than the page's offset (0
 * when absent). Nothing in an event is checked here: the caller verifies
 * each one as gossip does. *next_offset gets the next page's offset, or
 * -1 when there is none. lim NULL: pith_changes_limits_default. fn
 * returning non-zero stops with that code. 0, PITH_ETOOBIG, PITH_EINVAL
 * (err names the field), PITH_ENOMEM, or fn's code. */
typedef int (*pith_event_bytes_fn)(void *arg, const uint8_t *bytes, size_t len);
int pith_events_page_parse(const uint8_t *buf, size_t len, const pith_upstream_limits_t *lim,
			   const char *pith, size_t max_events, pith_event_bytes_fn fn, void *arg,
			   int64_t *next_offset, pith_err_t *err);

#endif
