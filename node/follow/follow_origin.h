/* Where an upstream's manifest may send the node (issue 53, attacks 7 and
 * 8): only to the upstream's own origin (scheme, host, port) or to one the
 * operator lists (upstream_origin), never from https to http and never to
 * another host or port. Redirects are held to the same rule by loop/'s
 * client (hclient.h). No I/O. */
#ifndef PITH_NODE_FOLLOW_ORIGIN_H
#define PITH_NODE_FOLLOW_ORIGIN_H

#include <stddef.h>

/* Whether u, a URL or a bundle pattern ("{suffix}" and the like in its
 * path), named by the manifest of the upstream at base, is on base's
 * origin or on one of origins[0..n_origins) (not from https to http). A
 * placeholder before the path (in the host or port) is not. */
int follow_origin_ok(const char *base, const char *u, const char *const *origins, size_t n_origins);

#endif
