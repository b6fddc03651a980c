#!/usr/bin/env bash
# Benchmark (issue 6): wrk against the HTTP views of a store holding
# 100,000 records, on state.json and resolve (random records from a list,
# tests/bench/bench_http.lua), first alone, then while the node ingests
# events through POST /events (tests/bench/bench_http_post.py: paced, then
# as fast as it goes). Reports requests per second and latency percentiles
# as wrk measures them (client side, whole round trip).
#
# usage: bench_http.sh BUILD_DIR [--dir DIR] [--records N] [--per-record E]
#          [--duration S] [--connections C] [--wrk-threads T]
#          [--validators V] [--rate EV_PER_S] [--keep]
#
# DIR (default: a new directory under /tmp) keeps the generated events and
# the store between runs: a second run with the same --dir skips
# generation and import (the store then also holds what earlier runs
# ingested). Needs wrk and python3.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
DIR="" RECORDS=100000 PER=3 DUR=20 CONN=32 WT=1 VALIDATORS=1 RATE=2000 KEEP=0
LOAD_RECORDS=80000
while [ $# -gt 0 ]; do
	case $1 in
	--dir) DIR=$2; shift 2 ;;
	--records) RECORDS=$2; shift 2 ;;
	--per-record) PER=$2; shift 2 ;;
	--duration) DUR=$2; shift 2 ;;
	--connections) CONN=$2; shift 2 ;;
	--wrk-threads) WT=$2; shift 2 ;;
	--validators) VALIDATORS=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
PITHCTL=$BUILD/node/cli/pithctl GEN=$BUILD/tests/gen_events SERVE=$BUILD/tests/http_serve
for x in "$PITHCTL" "$GEN" "$SERVE"; do [ -x "$x" ] || { echo "missing $x" >&2; exit 2; }; done
command -v wrk >/dev/null || { echo "needs wrk" >&2; exit 2; }
MADE=0 SERVER=""
if [ -z "$DIR" ]; then
	DIR=$(mktemp -d /tmp/bench_http.XXXXXX)
	MADE=1
fi
cleanup() {
	[ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true
	[ $MADE = 0 ] || [ $KEEP = 1 ] || rm -rf "$DIR"
}
trap cleanup EXIT
mkdir -p "$DIR"
cd "$DIR"
say() { echo "# $*" >&2; }

if [ ! -s load.jsonl ]; then
	say "generating $((RECORDS + LOAD_RECORDS)) records of $PER events"
	"$GEN" --records $((RECORDS + LOAD_RECORDS)) --per-record "$PER" --seed 1 --threads 2 \
		--key-out key.json all.jsonl >/dev/null
	head -n $((RECORDS * PER)) all.jsonl >base.jsonl
	tail -n +$((RECORDS * PER + 1)) all.jsonl >load.jsonl
	rm -f all.jsonl
fi
if [ ! -d store ]; then
	say "importing $((RECORDS * PER)) events"
	"$PITHCTL" --store store --trust-key key.json import base.jsonl >import.txt
	cat import.txt >&2
	python3 - <<'EOF'
import json
with open("base.jsonl") as f, open("ids.txt", "w") as ids, open("arxiv.txt", "w") as ax:
    for line in f:
        if '"record_created"' not in line:
            continue
        e = json.loads(line)
        if e["event_type"] != "record_created":
            continue
        ids.write(e["subject_pith_number"][-26:] + "\n")
        ax.write(e["payload"]["canonical_record"]["source"]["id"] + "\n")
EOF
fi
say "store: $("$PITHCTL" --store store records | wc -l) records; $(wc -l <ids.txt) in the request list"

rm -f port
"$SERVE" --store store --trust-key key.json --threads "$VALIDATORS" --port-file port \
	>serve.log 2>&1 &
SERVER=$!
for _ in $(seq 100); do [ -s port ] && break; sleep 0.1; done
PORT=$(cat port)
URL=http://127.0.0.1:$PORT
OFFSET=0
[ -f load.offset ] && OFFSET=$(cat load.offset)

run_wrk() { # MODE LIST -> one RESULT line
	wrk -t"$WT" -c"$CONN" -d"${DUR}s" --timeout 5s -s "$HERE/bench_http.lua" "$URL" -- "$1" "$2" |
		grep '^RESULT' | sed "s/mode=[a-z]*/mode=$1/"
}

with_load() { # RATE MODE LIST
	python3 "$HERE/bench_http_post.py" "$PORT" load.jsonl --skip "$OFFSET" --rate "$1" \
		>loader.out 2>&1 &
	local lp=$!
	sleep 2
	local r
	r=$(run_wrk "$2" "$3")
	kill -TERM $lp 2>/dev/null || true
	wait $lp || true
	local l
	l=$(grep '^LOADER' loader.out || echo "LOADER failed: $(tail -1 loader.out)")
	OFFSET=$((OFFSET + $(echo "$l" | sed -n 's/.*posted=\([0-9]*\).*/\1/p')))
	echo $OFFSET >load.offset
	echo "$r ingest_rate=$1 $l"
}

say "warming up"
wrk -t"$WT" -c"$CONN" -d5s -s "$HERE/bench_http.lua" "$URL" -- state ids.txt >/dev/null
wrk -t"$WT" -c"$CONN" -d5s -s "$HERE/bench_http.lua" "$URL" -- resolve arxiv.txt >/dev/null
echo "# wrk -t$WT -c$CONN -d${DUR}s; $RECORDS records; validators $VALIDATORS; $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in state resolve; do
	list=ids.txt
	[ $mode = resolve ] && list=arxiv.txt
	echo "$(run_wrk $mode $list) ingest=none"
	with_load "$RATE" $mode $list
	with_load 0 $mode $list
done
curl -s "$URL/metrics" | grep -E '^pith_(store_events|http_post_events_total)' >&2 || true
kill $SERVER
wait $SERVER || true
SERVER=""
