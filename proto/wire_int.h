/* The wire protocol's message table, shared by wire.c (decoding, the
 * reader) and wire_encode.c (encoding) only. */
#ifndef PITH_WIRE_INT_H
#define PITH_WIRE_INT_H

#include <stdint.h>

#include "wire.h"

/* Array length of each defined message, by type (wire.c). */
extern const uint8_t wire_type_fields[];

/* Types this version decodes: 1..16, RECON and RECON_BUNDLES. */
static inline int wire_type_is_defined(uint64_t t)
{
	return (t >= WIRE_HELLO && t <= WIRE_TYPE_LAST_DEFINED) || t == WIRE_RECON ||
	       t == WIRE_RECON_BUNDLES;
}

#endif
