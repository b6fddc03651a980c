/* What `pithd --version` and `pithctl --version` print: the version, the
 * commit it was built from, the libraries it runs with, and which Ed25519
 * verifier checks trusted keys' signatures (docs/signatures.md). */
#ifndef PITH_NODE_VERSION_H
#define PITH_NODE_VERSION_H

#include <stdio.h>

/* The project version (CMake's project version), e.g. "0.1.0". */
const char *version_project(void);

/* The git commit built (12 hex digits, "-dirty" when the tree had
 * uncommitted changes), or "unknown" outside git. */
const char *version_commit(void);

/* Prints the version report for program prog ("pithd", "pithctl") to f:
 * a first line "PROG VERSION", then "key: value" lines (commit, each
 * library's version, ed25519). The Ed25519 line runs the verifier's
 * self-test and reads PITH_ED25519, as a trust store does. */
void version_print(FILE *f, const char *prog);

#endif
