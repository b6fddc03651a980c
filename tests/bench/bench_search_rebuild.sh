#!/usr/bin/env bash
# Benchmark (issue 17, session 13): rebuilding the search index of a store
# from nothing, with two builds alternated. On demand, not in the suite.
#
# usage: bench_search_rebuild.sh STORE_DIR BUILD_A BUILD_B [ROUNDS]
#
# For each round, for each build: drops the page cache (when root may),
# then runs BUILD/node/cli/pithctl --store STORE_DIR search --index TMP
# quantum under /usr/bin/time, into a fresh index file, and prints the
# wall time, user and system CPU and peak RSS. A build of session 13 or
# later takes an empty index in one pass over the states in key order
# (docs/pithd.md, "The search index"); an older one follows the change log.
# The store is opened read-only; nothing in it changes.
set -euo pipefail
STORE=$1 A=$2 B=$3 ROUNDS=${4:-2}
IDX=$(mktemp -d /tmp/bench_search_rebuild.XXXXXX)
trap 'rm -rf "$IDX"' EXIT
for r in $(seq "$ROUNDS"); do
	for b in "$A" "$B"; do
		rm -f "$IDX"/i.sqlite*
		sync
		echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
		/usr/bin/time -f "$b round $r: %e s wall, %U s user, %S s system, %M KB peak RSS" \
			"$b/node/cli/pithctl" --store "$STORE" search --index "$IDX/i.sqlite" quantum \
			2>&1 >/dev/null | grep -v " INFO "
	done
done
