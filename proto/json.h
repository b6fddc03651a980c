/* Strict JSON parser, a small DOM, and the registry's canonical writer.
 *
 * The parser accepts exactly the documents Python's json.loads accepts,
 * minus the ones a mirror must refuse (spec section 1): duplicate keys,
 * invalid UTF-8, lone surrogates, NaN/Infinity and numbers that overflow,
 * trailing garbage, nesting deeper than a bound, documents over a size
 * limit. Errors carry the byte offset.
 *
 * The canonical writer produces the bytes of
 *   json.dumps(v, sort_keys=True, separators=(',',':'), ensure_ascii=False)
 * encoded as UTF-8.
 *
 * Files: json.c parses and builds the DOM; json_canon.c is the canonical
 * writer (json_canon_write*, json_write_string, json_float_repr); both are
 * declared here, so callers include json.h alone.
 *
 * Memory: every value lives in its json_doc_t's arena and is freed with it.
 * Values are read-only views once built; a value of one doc may be linked
 * into another doc's tree as long as the first outlives the second. */
#ifndef PITH_JSON_H
#define PITH_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"

typedef enum json_type {
	JSON_NULL = 0,
	JSON_FALSE,
	JSON_TRUE,
	JSON_INT,    /* arbitrary precision: kept as normalised decimal text */
	JSON_FLOAT,  /* IEEE double */
	JSON_STRING, /* UTF-8 bytes, escapes decoded */
	JSON_ARRAY,
	JSON_OBJECT,
} json_type_t;

typedef struct json_value json_value_t;

typedef struct json_member {
	const char *key; /* UTF-8, NUL-terminated, key_len bytes */
	size_t key_len;
	json_value_t *value;
	size_t offset; /* byte offset of the key in the parsed input */
} json_member_t;

struct json_value {
	json_type_t type;
	uint32_t sorted; /* objects: members are in canonical key order */
	size_t len;      /* STRING/INT: bytes; ARRAY/OBJECT: element count */
	size_t cap;      /* ARRAY/OBJECT built by hand: allocated slots */
	union {
		const char *str; /* STRING, INT (NUL-terminated) */
		double num;      /* FLOAT */
		json_value_t **items;
		json_member_t *members;
	} u;
};

typedef struct json_doc json_doc_t;

typedef struct json_limits {
	size_t max_bytes;      /* whole document */
	unsigned max_depth;    /* arrays + objects nested */
	size_t max_int_digits; /* Python refuses more than 4300 */
} json_limits_t;

#define JSON_MAX_DEPTH_DEFAULT 128
#define JSON_MAX_BYTES_DEFAULT (64u << 20)
#define JSON_MAX_INT_DIGITS 4300

/* Defaults: 64 MiB, depth 128, 4300 integer digits. */
extern const json_limits_t json_limits_default;

/* Parse len bytes of buf. The input is copied; buf may be freed after.
 * On success *out owns the tree (json_doc_root). On failure returns a
 * negative code and fills err with message and byte offset. lim may be NULL. */
int json_parse(json_doc_t **out, const uint8_t *buf, size_t len,
	       const json_limits_t *lim, pith_err_t *err);

json_value_t *json_doc_root(const json_doc_t *doc);
void json_doc_free_(json_doc_t *doc);
#define json_doc_free(d) do { json_doc_free_(d); (d) = NULL; } while (0)
/* The same, zeroing the arena first: for documents that held a secret. */
void json_doc_free_wiped_(json_doc_t *doc);
#define json_doc_free_wiped(d) do { json_doc_free_wiped_(d); (d) = NULL; } while (0)

/* Builder: an empty doc whose arena hands out new values. Returns NULL on OOM. */
json_doc_t *json_doc_new(void);
void json_doc_set_root(json_doc_t *doc, json_value_t *root);
json_value_t *json_new_null(json_doc_t *doc);
json_value_t *json_new_bool(json_doc_t *doc, int b);
json_value_t *json_new_int(json_doc_t *doc, int64_t v);
json_value_t *json_new_float(json_doc_t *doc, double v);
/* Copies s (len bytes, must be valid UTF-8 - not checked). */
json_value_t *json_new_stringn(json_doc_t *doc, const char *s, size_t len);
json_value_t *json_new_string(json_doc_t *doc, const char *s);
json_value_t *json_new_array(json_doc_t *doc);
json_value_t *json_new_object(json_doc_t *doc);
/* Append v to array a. Returns 0 or PITH_ENOMEM. */
int json_array_push(json_doc_t *doc, json_value_t *a, json_value_t *v);
/* Set key (copied) to v in object o, replacing an existing member. */
int json_object_set(json_doc_t *doc, json_value_t *o, const char *key,
		    json_value_t *v);
/* Deep copy of v into doc's arena. */
json_value_t *json_clone(json_doc_t *doc, const json_value_t *v);

/* Member lookup by key (NUL-terminated); NULL if absent or o not an object. */
const json_value_t *json_get(const json_value_t *o, const char *key);
/* Typed lookups: NULL unless the member exists with that type. */
const char *json_get_str(const json_value_t *o, const char *key);
const json_value_t *json_get_type(const json_value_t *o, const char *key,
				  json_type_t type);
static inline int json_is(const json_value_t *v, json_type_t t)
{
	return v && v->type == t;
}
/* Structural equality (object member order ignored). */
int json_equal(const json_value_t *a, const json_value_t *b);

/* ---- the canonical writer (json_canon.c) ---- */

/* Append the canonical bytes of v to out. Keys listed in skip (nskip of
 * them) are left out of v's own top-level members only. Returns 0 or
 * PITH_ENOMEM/PITH_EINVAL (a non-finite float). */
int json_canon_write(const json_value_t *v, pith_buf_t *out);
int json_canon_write_skip(const json_value_t *v, const char *const *skip,
			  size_t nskip, pith_buf_t *out);
/* Both at once, for an object v: its canonical bytes appended to out, and
 * to part those of json_canon_write_skip(v, skip, nskip), assembled from
 * the first (every value is written once). PITH_EINVAL if v is not an
 * object. */
int json_canon_write_both(const json_value_t *v, const char *const *skip, size_t nskip,
			  pith_buf_t *out, pith_buf_t *part);
/* The canonical bytes of object v, and in *at the offset in out where a
 * member named key (not among v's) would start: the opening quote of the
 * first member sorting after it, or the closing brace if none does. */
int json_canon_write_at(const json_value_t *v, const char *key, pith_buf_t *out, size_t *at);

/* Python repr() of a finite double: the shortest round-tripping digits.
 * Writes a NUL-terminated string into out (at least 32 bytes). Returns its
 * length. */
size_t json_float_repr(double x, char out[32]);

/* Write s as a JSON string literal the canonical way (quotes included). */
int json_write_string(pith_buf_t *out, const char *s, size_t len);

/* Length of the valid UTF-8 sequence at p[0..n) (n >= 1): 1 to 4, or 0
 * when the bytes there are not one (overlong forms, UTF-16 surrogates,
 * past U+10FFFF, cut short). The one UTF-8 check of the tree: the parser
 * uses it, and so do the HTML escaper and the config's text settings. */
size_t json_utf8_len(const uint8_t *p, size_t n);

#endif
