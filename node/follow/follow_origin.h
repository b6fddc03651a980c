/* Where an upstream's manifest may send the node (issue 53, attacks 7 and
 * 8): only to the upstream's own origin (scheme, host, port), so never
 * from https to http and never to another host or port. Redirects are
 * held to the same rule by loop/'s client (hclient.h). No I/O. */
#ifndef PITH_NODE_FOLLOW_ORIGIN_H
#define PITH_NODE_FOLLOW_ORIGIN_H

/* Whether u, a URL or a bundle pattern ("{suffix}" and the like in its
 * path), named by the manifest of the upstream at base, is on base's
 * origin. A placeholder before the path (in the host or port) is not. */
int follow_origin_ok(const char *base, const char *u);

#endif
