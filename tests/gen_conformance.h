/* The conformance corpus generator's parts (gen_conformance.c: the keys,
 * building, checking and writing a case, main; gen_conformance_merge.c:
 * the merge's cases, rule by rule; gen_conformance_before.c: the files of
 * cases before the merge, with the expected bytes). One program; the
 * names are its own. */
#ifndef PITH_GEN_CONFORMANCE_H
#define PITH_GEN_CONFORMANCE_H

#include "bundle.h"
#include "conform.h"
#include "merge.h"
#include "testgen.h"

#define SIGNED_AT "2026-06-01T00:00:00.000000Z"
#define MAXDOCS 64
/* created_at times of the cases */
#define T0 "2026-01-01T00:00:00Z"
#define T1 "2026-01-02T00:00:00Z"
#define T2 "2026-01-03T00:00:00Z"
#define T3 "2026-01-04T00:00:00Z"

/* The last five share public keys with others (docs/merge.md, K-SET and
 * K-ROLE): K_REGASOP is K_REG's key and key id without the registry role,
 * K_DUALOP and K_DUALREG one key under an operator and a registry key id,
 * K_OPROTLATE K_OPROT's key and id with a later rotates_at. */
enum { K_REG, K_OP1, K_OP2, K_STRANGER, K_OLDREG, K_OPROT, K_REGASOP, K_DUALOP, K_DUALREG,
       K_OPROTLATE, K_REG2, NKEYS };

typedef struct gcase {
	char name[128], rule[40], desc[400];
	char pith[PITH_NUMBER_LEN + 1];
	unsigned trust; /* bit mask of keys in T (the built-in key always is) */
	int trust_reversed; /* list them last key first */
	struct {
		const char *type;
		pith_buf_t text;
		const char *expect;
	} doc[MAXDOCS];
	size_t n;
	const char *must[6];
	size_t nmust;
} gcase_t;

/* gen_conformance.c */
extern tg_key_t keys[NKEYS];
extern const char *outdir;
extern int failures;
extern size_t written;
/* the next record number a case takes */
extern unsigned recno;
/* the alias kind and version record_text writes */
extern const char *rec_kind, *rec_version;
extern pith_buf_t last_state; /* the state of the case case_emit wrote last */
pith_trust_t *trust_of(unsigned mask);
void case_init(gcase_t *c, const char *rule, const char *name, const char *desc);
void case_must(gcase_t *c, const char *s);
void add_doc(gcase_t *c, const char *type, const pith_buf_t *text, const char *expect);
void ev_text(pith_buf_t *b, const char *type, const char *subject, const char *target,
	     const char *created, const char *payload, const char *prev, const char *sups);
int ev_sign(const char *text, const tg_key_t *k, const char *edit, const char *edit_json,
	    pith_buf_t *out, char id[PITH_EVENT_ID_LEN + 1]);
void add_ev(gcase_t *c, int key, const char *type, const char *target, const char *created,
	    const char *payload, const char *prev, const char *sups, const char *expect,
	    char *id);
void add_ev_edit(gcase_t *c, int key, const char *type, const char *created,
		 const char *payload, const char *member, const char *json, const char *expect);
void record_text(pith_buf_t *b, unsigned n, const char *submitted_json);
int record_ident(const char *text, char hex[65], char pith[PITH_NUMBER_LEN + 1]);
void receipt_text(pith_buf_t *b, const char *signed_hex, const tg_key_t *k,
		  const char *omit, const char *over, const char *over_json);
void rc_payload(pith_buf_t *b, const char *rec_json, const char *claimed_json,
		const char *receipt_json);
void good_payload(gcase_t *c, unsigned n, pith_buf_t *pl);
void add_record(gcase_t *c, unsigned n, const char *created, char *id);
int make_bundle(gcase_t *c, size_t from, size_t to, const char *built_at, int key,
		const char *edit, const char *edit_json, int resign, pith_buf_t *out);
void add_bundle(gcase_t *c, size_t from, size_t to, const char *built_at, int key,
		const char *edit, const char *edit_json, int resign, const char *expect);
void put_str(pith_buf_t *b, const char *s, size_t n);
void put_bytes(pith_buf_t *b, const char *name, const uint8_t *p, size_t n);
void case_emit(gcase_t *c);

/* gen_conformance_merge.c */
void cases_time(void);
void cases_validation(void);
void cases_invalid(void);
char *quoted(char *buf, size_t cap, const char *id);
void cases_supersede(void);
void cases_equiv_order(void);
void cases_bundles(void);
void case_registry(const char *data_dir);
void cases_mixed(unsigned count);

/* gen_conformance_before.c */
void cases_canon(void);
void cases_ids(const char *data_dir);
void cases_sig_encoding(void);
void cases_keys(void);
void cases_issue54(void);

#endif
