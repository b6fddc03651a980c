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
#          [--validators V] [--rate EV_PER_S] [--pithd] [--nice-workers N]
#          [--rounds R] [--cache-mb N] [--keep]
#
# --cache-mb N sets the store's block cache (pithd: store_cache_mb; default
# 64 MiB).
#
# Each of the six runs (state.json and resolve; no ingest, ingest paced at
# EV_PER_S, ingest as fast as it goes) takes S seconds (default 10); the
# runs are interleaved in R rounds (default 3) so that a noisy neighbour
# hits every configuration alike, and the table (bench_http_table.py) gives
# the median and the range over the rounds.
#
# --nice-workers N sets the server's own worker_nice: validators, the
# store writer and RocksDB's background threads run N nice steps below the
# event loop (HTTP, and in pithd the peers too). Without it each server
# keeps its default: pithd 10 (its worker_nice setting), http_serve 0.
# --nice-workers 0 with --pithd measures pithd without the setting.
#
# The server is tests/http_serve (node/http/http.c + node/ingest/ingest.c over the
# store), or with --pithd the daemon itself (pithd --data DIR --http ...,
# no peers), POST /events going through its ingest pipeline.
#
# DIR (default: a new directory under /tmp, removed at the end) keeps the
# generated events and the imported store (store.base) between invocations;
# every invocation serves a fresh copy of store.base, so each one starts from
# the same RECORDS records. Needs wrk and python3.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
DIR="" RECORDS=100000 PER=3 DUR=10 ROUNDS=3 CONN=32 WT=1 VALIDATORS=1 RATE=2000 KEEP=0 PITHD=0 NICE="" CACHE=64
while [ $# -gt 0 ]; do
	case $1 in
	--dir) DIR=$2; shift 2 ;;
	--records) RECORDS=$2; shift 2 ;;
	--per-record) PER=$2; shift 2 ;;
	--duration) DUR=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--connections) CONN=$2; shift 2 ;;
	--wrk-threads) WT=$2; shift 2 ;;
	--validators) VALIDATORS=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--pithd) PITHD=1; shift ;;
	--nice-workers) NICE=$2; shift 2 ;;
	--cache-mb) CACHE=$2; shift 2 ;;
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

# base.jsonl: the RECORDS records the store starts with; load.jsonl: the
# records after them (the generator is deterministic per record number),
# enough events for every ingest run of this invocation.
NEED=$((ROUNDS * 4 * (DUR + 4) * 2500))
MORE=$(((NEED + PER - 1) / PER))
if [ ! -s load.jsonl ] || [ "$(wc -l <load.jsonl)" -lt $NEED ]; then
	say "generating $((RECORDS + MORE)) records of $PER events"
	"$GEN" --records $((RECORDS + MORE)) --per-record "$PER" --seed 1 --threads 2 \
		--key-out key.json all.jsonl >/dev/null
	head -n $((RECORDS * PER)) all.jsonl >base.jsonl
	tail -n +$((RECORDS * PER + 1)) all.jsonl >load.jsonl
	rm -rf all.jsonl store.base
fi
# store.base: the imported store, copied afresh for every invocation so that
# each one starts from the same RECORDS records whatever earlier ones ingested
if [ ! -d store.base ]; then
	say "importing $((RECORDS * PER)) events"
	"$PITHCTL" --store store.base --trust-key key.json import base.jsonl >import.txt
	cat import.txt >&2
	python3 - <<'XEOF'
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
XEOF
fi
rm -rf store
cp -a store.base store
echo 0 >load.offset
say "store: $("$PITHCTL" --store store records | wc -l) records; $(wc -l <ids.txt) in the request list"

rm -f port
if [ $PITHD = 1 ]; then
	# the data directory is DIR: its store/ is the one imported above
	chmod 700 .
	"$BUILD/node/pithd" --data "$DIR" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
		--trust-key key.json --validate-threads "$VALIDATORS" --store-cache-mb "$CACHE" \
		--log-level warn ${NICE:+--worker-nice "$NICE"} \
		>serve.log 2>&1 &
	SERVER=$!
	for _ in $(seq 200); do
		python3 -c 'import json,socket,sys
s = socket.socket(socket.AF_UNIX); s.connect("pithd.sock"); s.sendall(b"status\n")
print(json.loads(s.makefile().readline())["http"].rsplit(":", 1)[1])' >port 2>/dev/null && break
		sleep 0.1
	done
else
	"$SERVE" --store store --trust-key key.json --threads "$VALIDATORS" --cache-mb "$CACHE" \
		--port-file port ${NICE:+--worker-nice "$NICE"} \
		>serve.log 2>&1 &
	SERVER=$!
	for _ in $(seq 100); do [ -s port ] && break; sleep 0.1; done
fi
PORT=$(cat port)
SERVER_NAME=http_serve
[ $PITHD = 1 ] && SERVER_NAME=pithd
if [ $PITHD = 1 ]; then
	SERVER_NAME="$SERVER_NAME, worker_nice ${NICE:-10 (default)}"
else
	SERVER_NAME="$SERVER_NAME, worker_nice ${NICE:-0}"
fi
URL=http://127.0.0.1:$PORT

run_wrk() { # MODE LIST -> one RESULT line
	wrk -t"$WT" -c"$CONN" -d"${DUR}s" --timeout 5s -s "$HERE/bench_http.lua" "$URL" -- "$1" "$2" |
		grep '^RESULT' | sed "s/mode=[a-z]*/mode=$1/"
}

with_load() { # RATE MODE LIST (runs in a subshell: the offset lives in load.offset)
	OFFSET=$(cat load.offset)
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
echo "# $SERVER_NAME; wrk -t$WT -c$CONN -d${DUR}s x $ROUNDS rounds; $RECORDS records; cache ${CACHE} MiB; validators $VALIDATORS; $(nproc) cores; load before $(cut -d' ' -f1-3 /proc/loadavg)"
: >results.txt
for round in $(seq "$ROUNDS"); do
	for mode in state resolve; do
		list=ids.txt
		[ $mode = resolve ] && list=arxiv.txt
		echo "round=$round $(run_wrk $mode $list) ingest_rate=none" >>results.txt
		echo "round=$round $(with_load "$RATE" $mode $list)" >>results.txt
		echo "round=$round $(with_load 0 $mode $list)" >>results.txt
	done
	say "round $round done; load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "# load after $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$HERE/bench_http_table.py" results.txt "$RATE"
curl -s "$URL/metrics" | grep -E '^pith_(store_events|http_post_events_total)' >&2 || true
kill $SERVER
wait $SERVER || true
SERVER=""
