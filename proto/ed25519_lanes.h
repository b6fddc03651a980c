/* Internal to proto/ed25519.c: eight sums of table entries computed at
 * once with AVX-512 IFMA (52-bit multiply-add), chosen at run time on the
 * CPUs that have it. Not a public interface. */
#ifndef PITH_ED25519_LANES_H
#define PITH_ED25519_LANES_H

#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__SIZEOF_INT128__)
#define PITH_ED_LANES_BUILT 1
#else
#define PITH_ED_LANES_BUILT 0
#endif

/* 1 when this CPU (and its OS) can run pith_ed_lanes_sum, else 0. */
int pith_ed_lanes_available(void);

/* For each lane l of 8: starting from the identity, adds step by step
 * the entry ent[s][l] (fifteen radix-2^51 limbs, each below 2^52: y+x,
 * y-x and 2dxy of an affine point), or its negative when bit l of neg[s]
 * is set, and writes the extended coordinates X, Y, Z, T (five limbs
 * each, below 2^52) to out[l]. Only where pith_ed_lanes_available(). */
void pith_ed_lanes_sum(const uint64_t *const (*ent)[8], const uint8_t *neg, int steps,
		       uint64_t out[8][20]);

#endif
