/* Helpers shared by the tests that open real stores. */
#ifndef PITH_STORE_TEST_UTIL_H
#define PITH_STORE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

/* A fresh directory under /tmp named after prefix; exits if it cannot. */
static inline char *stu_tmpdir(const char *prefix)
{
	char tmpl[256];
	snprintf(tmpl, sizeof(tmpl), "/tmp/%s.XXXXXX", prefix);
	char *d = strdup(tmpl);
	if (!d || !mkdtemp(d)) {
		perror("mkdtemp");
		exit(1);
	}
	return d;
}

/* Removes d and everything below it, and frees d. */
static inline void stu_rmdir_rf(char *d)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	if (system(cmd))
		fprintf(stderr, "cannot remove %s\n", d);
	free(d);
}

/* Opens (creating) the store in dir with these registry keys; NULL after
 * printing why. */
static inline store_t *stu_open_store(const char *dir, const pith_trust_t *registry)
{
	store_t *st = NULL;
	pith_err_t err = {0};
	store_opts_t o = {.create = 1, .registry = registry};
	if (store_open(dir, &o, &st, &err))
		fprintf(stderr, "store_open %s: %s\n", dir, err.msg);
	return st;
}

/* Appends the whole file at path to out; 0, or -1 if it cannot be read. */
static inline int stu_read_file(const char *path, pith_buf_t *out)
{
	FILE *f = fopen(path, "rb");
	char chunk[65536];
	size_t n;
	if (!f)
		return -1;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		pith_buf_append(out, chunk, n);
	int rc = ferror(f) ? -1 : 0;
	fclose(f);
	return rc;
}

#endif
