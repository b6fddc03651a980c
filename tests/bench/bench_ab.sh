#!/usr/bin/env bash
# Two builds against each other in one run (issue 13: "bench_import,
# bench_sync and bench_http within noise of before"): the same benchmarks,
# the same generated data, the two builds' programs alternating, so that
# whatever else the machine does hits both alike.
#
# usage: bench_ab.sh BASE_BUILD NEW_BUILD [--dir DIR] [--rounds R]
#          [--import-events N] [--sync-events N] [--sync-per-record E]
#          [--sync-data DIR] [--no-import] [--no-sync] [--http-rounds R] [--no-http]
#
# Per round (base first in odd rounds, new first in even ones):
#   bench_import (NEW_BUILD's driver) with each build's pithctl and
#     gen_events: 200,000 events of 10 per record, and of 2 per record
#     (the registry's shape);
#   bench_sync (NEW_BUILD's driver) with each build's pithd and pithctl:
#     a fresh node syncs 500,000 events (10 per record; --sync-per-record 2
#     for the registry's shape) from a peer, whose store and events are
#     kept in DIR/sync, or in --sync-data (bench_scale.sh's data directory
#     holds them at its sizes: no import first).
# --no-import, --no-sync: leave that benchmark out.
# Then tests/bench/bench_http.sh --pithd of each build (HTTP_ROUNDS rounds).
# Prints each run's rate and ratio to the bare verify rate measured in the
# same run, then new/base of the medians. Logs stay in DIR.
set -euo pipefail
BASE=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
shift 2
DIR=/tmp/bench_ab
ROUNDS=3
IMPORT_N=200000
SYNC_N=500000
SYNC_PER=10
SYNC_DATA=
IMPORT=1
SYNC=1
HTTP_ROUNDS=2
HTTP=1
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) DIR=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--import-events) IMPORT_N=$2; shift 2 ;;
	--sync-events) SYNC_N=$2; shift 2 ;;
	--sync-per-record) SYNC_PER=$2; shift 2 ;;
	--sync-data) SYNC_DATA=$2; shift 2 ;;
	--no-import) IMPORT=0; shift ;;
	--no-sync) SYNC=0; shift ;;
	--http-rounds) HTTP_ROUNDS=$2; shift 2 ;;
	--no-http) HTTP=0; shift ;;
	*) echo "bench_ab.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"
RES="$DIR/results.txt"
: >"$RES"

field() { # field FILE PATTERN: the first number after PATTERN's label
	grep -m1 "^$2" "$1" | sed -E "s|^$2 *||" | grep -oE '[0-9]+(\.[0-9]+)?' | head -1
}

run_import() { # run_import NAME BUILD PER
	local log="$DIR/import-$1-$3-r$ROUND.log"
	"$NEW/tests/bench/bench_import" --events "$IMPORT_N" --per-record "$3" \
		--dir "$DIR/import-$1-$3" --pithctl "$2/node/cli/pithctl" \
		--gen "$2/tests/gen_events" >"$log" 2>&1
	echo "import$3 $1 $(field "$log" 'pithctl import') $(field "$log" 'import / bare verify')" >>"$RES"
}

run_sync() { # run_sync NAME BUILD
	local log="$DIR/sync-$1-r$ROUND.log"
	"$NEW/tests/bench/bench_sync" --events "$SYNC_N" --per-record "$SYNC_PER" \
		--dir "${SYNC_DATA:-$DIR/sync}" --keep \
		--pithd "$2/node/pithd" --pithctl "$2/node/cli/pithctl" \
		--gen "$2/tests/gen_events" >"$log" 2>&1
	echo "sync$SYNC_PER $1 $(field "$log" 'fresh node sync') $(field "$log" 'sync / bare verify')" >>"$RES"
}

for ROUND in $(seq 1 "$ROUNDS"); do
	if [ $((ROUND % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
	for who in $order; do
		b=$BASE; [ "$who" = new ] && b=$NEW
		if [ "$IMPORT" = 1 ]; then
			run_import "$who" "$b" 10
			run_import "$who" "$b" 2
		fi
		[ "$SYNC" = 1 ] && run_sync "$who" "$b"
		echo "round $ROUND $who done: $(tail -3 "$RES" | tr '\n' ' ')" >&2
	done
done

if [ "$HTTP" = 1 ]; then
	for who in base new; do
		b=$BASE; [ "$who" = new ] && b=$NEW
		bash "$HERE/bench_http.sh" "$b" --dir "$DIR/http" --pithd --rounds "$HTTP_ROUNDS" \
			>"$DIR/http-$who.log" 2>&1
		echo "http $who: see $DIR/http-$who.log" >&2
	done
fi

python3 - "$RES" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, who, rate, ratio = line.split()
    rows.setdefault(kind, {}).setdefault(who, []).append((float(rate), float(ratio)))
print("%-9s %-36s %-36s %s" % ("bench", "base: events/s (ratio to bare)", "new: events/s (ratio to bare)",
                              "new/base (medians: rate, ratio)"))
for kind in sorted(rows):
    b, n = rows[kind].get("base", []), rows[kind].get("new", [])
    fmt = lambda xs: " ".join("%.0f(%.3f)" % x for x in xs)
    mb = statistics.median([x[0] for x in b]); mn = statistics.median([x[0] for x in n])
    rb = statistics.median([x[1] for x in b]); rn = statistics.median([x[1] for x in n])
    print("%-9s %-36s %-36s %.3f, %.3f" % (kind, fmt(b), fmt(n), mn / mb, rn / rb))
EOF
