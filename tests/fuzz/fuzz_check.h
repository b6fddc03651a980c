/* The one assertion of the fuzz harnesses: a broken invariant names its
 * file and line and aborts, which libFuzzer (or the replay driver in the
 * normal suite) reports as a crash with the input that caused it. */
#ifndef PITH_FUZZ_CHECK_H
#define PITH_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                               \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                       \
		}                                                                      \
	} while (0)

#endif
