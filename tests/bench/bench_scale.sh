#!/usr/bin/env bash
# Benchmark (issue 17): the registry's shape (2 events per record: a
# record_created with its receipt, a graph_snapshot) at the registry's
# scale. On demand, not in the suite.
#
# usage: bench_scale.sh BUILD_DIR [--data DIR] [--sizes "N ..."] [--no-import]
#          [--no-sync] [--no-serve] [--no-check] [--duration S] [--connections C]
#          [--cold] [--no-warm]
#
# For each size N (events; default 1000000 4000000 10000000):
#   1. gen_events writes N events, 2 per record, into DIR (default
#      /work/scale-data; never the repository) once: events-N-2.jsonl and
#      key.json are reused by every later run.
#   2. bench_import --no-compact: `pithctl import` of the file into an empty
#      store, against the bare all-cores libsodium rate and the fixed-key
#      verifier's rate measured in the same run; CPU per event, the floor
#      of an event (its signatures at the fixed-key verifier's CPU, its
#      bytes parsed and hashed once and written once to a bare RocksDB with
#      the write-ahead log, each measured bare in the same run: issue 56)
#      and the CPU per event over it, pithctl's peak RSS, disk per event
#      after the import.
#   3. bench_sync: a fresh pithd syncing the N events from one peer (the
#      peer's store is the import of step 2, kept as DIR/a-N-2/store; the
#      bare rate and the sync start once the peer is idle), with both bare
#      rates of the same run and the floor as in step 2; the syncing node's
#      peak RSS and disk, both nodes' threads.
# Then on the largest size's store (the peer's):
#   4. pithd's start: from exec until its HTTP listener answers /healthz,
#      and the reconciliation set's and the page cache's load times from
#      its log (--cold: the kernel's page cache is dropped first, as after
#      a reboot, which needs root; --no-warm: pithd with store_warm_mb = 0,
#      reading the store from the disk as requests come).
#   5. wrk (-t1 -cC -dS, after a 3 s warm-up) on state.json and on resolve of
#      random records (tests/bench/bench_http.lua): requests/s and p99.
#   6. `pithctl records` (streamed to wc) and `pithctl check`: wall time and
#      peak RSS (/usr/bin/time).
# BUILD_DIR's binaries are the ones measured (node/pithd, node/cli/pithctl,
# tests/gen_events, tests/bench/bench_*): a copy of them elsewhere measures
# an older build.
# Each of steps 2, 3 and 4 starts once the machine is quiet (settle:
# sync, then a second with both cores 90% idle; the step before removed
# up to 15 GB of store, which the filesystem trims when it commits).
# Prints one table. Every ratio is against the bare rate measured in the
# same run (the machine is shared: absolute rates move, ratios less).
set -euo pipefail
BUILD=$(cd "$1" && pwd)
shift
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=/work/scale-data SIZES="1000000 4000000 10000000" DUR=10 CONN=32
IMPORT=1 SYNC=1 SERVE=1 CHECK=1 COLD=0 WARM_MB=-1
while [ $# -gt 0 ]; do
	case $1 in
	--data) DATA=$2; shift 2 ;;
	--sizes) SIZES=$2; shift 2 ;;
	--duration) DUR=$2; shift 2 ;;
	--connections) CONN=$2; shift 2 ;;
	--no-import) IMPORT=0; shift ;;
	--no-sync) SYNC=0; shift ;;
	--no-serve) SERVE=0; shift ;;
	--no-check) CHECK=0; shift ;;
	--cold) COLD=1; shift ;;
	--no-warm) WARM_MB=0; shift ;;
	*) echo "unknown option $1" >&2; exit 2 ;;
	esac
done
PITHCTL=$BUILD/node/cli/pithctl PITHD=$BUILD/node/pithd GEN=$BUILD/tests/gen_events
BI=$BUILD/tests/bench/bench_import BS=$BUILD/tests/bench/bench_sync
for x in "$PITHCTL" "$PITHD" "$GEN" "$BI" "$BS"; do
	[ -x "$x" ] || { echo "missing $x" >&2; exit 2; }
done
mkdir -p "$DATA"
DATA=$(cd "$DATA" && pwd)
say() { echo "# $(date +%H:%M:%S) $*" >&2; }
SERVER=""
cleanup() { [ -z "$SERVER" ] || kill "$SERVER" 2>/dev/null || true; }
trap cleanup EXIT
# Each measured step starts on a quiet machine: the files of the step
# before written out (and those it removed trimmed: ext4 mounted with
# discard does that at the journal's commit), then a second with both
# cores at least 90% idle (not counting I/O wait), 60 s of waiting at most
settle() {
	sync
	local a b
	for _ in $(seq 60); do
		a=$(awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8, $5 }' /proc/stat)
		sleep 1
		b=$(awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8, $5 }' /proc/stat)
		awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
			t = y[1] - x[1]; exit !(t > 0 && y[2] - x[2] >= 0.9 * t) }' && return 0
	done
	say "not quiet after 60 s (load $(cut -d' ' -f1-3 /proc/loadavg)); measuring anyway"
}
# field VALUE-AFTER-LABEL: the first number after a label in a report
num() { sed -n "s/^$1 *\([0-9.]*\).*/\1/p" "$2" | head -1; }
ROWS=$DATA/rows.txt
: >"$ROWS"
LARGEST=""

for N in $SIZES; do
	EV=$DATA/events-$N-2.jsonl
	if [ ! -s "$EV" ] || [ ! -s "$DATA/key.json" ]; then
		say "generating $N events (2 per record)"
		"$GEN" --records $(((N + 1) / 2)) --per-record 2 --seed 1 --threads "$(nproc)" \
			--key-out "$DATA/key.json" "$EV.tmp" >/dev/null
		mv "$EV.tmp" "$EV"
	fi
	# its line count once (reading 15 GB again at each run would fill the
	# page cache the serving measurement starts from)
	[ -s "$EV.lines" ] && [ "$EV.lines" -nt "$EV" ] || wc -l <"$EV" >"$EV.lines"
	RAW=$(($(stat -c %s "$EV") - $(cat "$EV.lines")))
	LARGEST=$N
	A=$DATA/a-$N-2
	if [ $IMPORT = 1 ]; then
		I=$DATA/imp-$N
		mkdir -p "$I"
		ln -sf "$EV" "$I/events.jsonl"
		ln -sf "$DATA/key.json" "$I/key.json"
		settle
		say "import of $N events (load $(cut -d' ' -f1-3 /proc/loadavg))"
		"$BI" --events "$N" --per-record 2 --dir "$I" --keep --no-compact --pithctl "$PITHCTL" \
			--gen "$GEN" >"$I/report.txt"
		cat "$I/report.txt" >&2
		R=$I/report.txt
		rate=$(sed -n 's/^pithctl import *\([0-9]*\) events.*/\1/p' "$R")
		ratio=$(num "import \/ bare verify" "$R")
		fixed=$(sed -n 's/^import \/ fixed-key verify *\([0-9.]*\),.*/\1/p' "$R")
		cpu=$(sed -n 's/^CPU per event *import \([0-9.]*\) us.*/\1/p' "$R")
		floor=$(num "floor per event" "$R")
		over=$(num "import \/ floor" "$R")
		rss=$(sed -n 's/^peak RSS of pithctl import *\([0-9]*\) MiB.*/\1/p' "$R")
		disk=$(sed -n 's/^disk after import *\([0-9]*\) bytes\/event, \([0-9.]*\) x raw.*/\1 (\2 x)/p' "$R")
		echo "import|$N|$rate|$cpu|$floor|$over|$ratio|$fixed|$rss|$disk" >>"$ROWS"
		# the import is the sync's peer store
		if [ ! -d "$A/store" ]; then
			mkdir -p "$A"
			mv "$I/store" "$A/store"
		fi
		rm -rf "$I/store"
	fi
	if [ $SYNC = 1 ]; then
		settle
		say "fresh-node sync of $N events (load $(cut -d' ' -f1-3 /proc/loadavg))"
		R=$DATA/sync-$N.txt
		"$BS" --events "$N" --per-record 2 --dir "$DATA" --keep --timeout 7200 \
			--pithd "$PITHD" --pithctl "$PITHCTL" --gen "$GEN" >"$R"
		cat "$R" >&2
		rate=$(sed -n 's/^fresh node sync *\([0-9]*\) events.*/\1/p' "$R")
		ratio=$(num "sync \/ bare verify" "$R")
		fixed=$(sed -n 's/^sync \/ fixed-key verify *\([0-9.]*\),.*/\1/p' "$R")
		cpu=$(sed -n 's/^CPU per event *B (syncing) \([0-9.]*\) us.*/\1/p' "$R")
		floor=$(num "floor per event" "$R")
		over=$(num "sync \/ floor" "$R")
		rss=$(sed -n 's/^peak RSS *B (syncing) \([0-9]*\) MiB.*/\1/p' "$R")
		disk=$(sed -n "s/^B's store after it stopped *\([0-9]*\) bytes\/event, \([0-9.]*\) x.*/\1 (\2 x)/p" "$R")
		echo "sync|$N|$rate|$cpu|$floor|$over|$ratio|$fixed|$rss|$disk" >>"$ROWS"
		rm -rf "$DATA/b"
	fi
done

SERVE_LINE=""
if [ $SERVE = 1 ] && [ -n "$LARGEST" ] && [ -d "$DATA/a-$LARGEST-2/store" ]; then
	A=$DATA/a-$LARGEST-2
	EV=$DATA/events-$LARGEST-2.jsonl
	# the request lists: every 20th record of the file, random order
	if [ ! -s "$A/ids.txt" ]; then
		say "request lists from $EV"
		awk 'NR % 40 == 1' "$EV" | python3 -c '
import json, random, sys
ids, ax = [], []
for line in sys.stdin:
    e = json.loads(line)
    if e["event_type"] != "record_created":
        continue
    ids.append(e["subject_pith_number"][-26:])
    ax.append(e["payload"]["canonical_record"]["source"]["id"])
random.seed(1)
random.shuffle(ids)
random.shuffle(ax)
open(sys.argv[1], "w").write("\n".join(ids) + "\n")
open(sys.argv[2], "w").write("\n".join(ax) + "\n")' "$A/ids.txt" "$A/arxiv.txt"
	fi
	chmod 700 "$A"
	PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	rm -f "$A/serve.log"
	echo "store_warm_mb = $WARM_MB" >"$A/bench.conf"
	if [ $COLD = 1 ]; then
		sync
		echo 3 >/proc/sys/vm/drop_caches || { echo "--cold: cannot drop the page cache (root only)" >&2; exit 2; }
	fi
	settle
	say "pithd on the $LARGEST-event store (load $(cut -d' ' -f1-3 /proc/loadavg))"
	T0=$(date +%s.%N)
	"$PITHD" --config "$A/bench.conf" --data "$A" --listen 127.0.0.1:0 --http 127.0.0.1:$PORT --trust-key "$DATA/key.json" \
		--log-level info >"$A/serve.log" 2>&1 &
	SERVER=$!
	START=""
	for _ in $(seq 3000); do
		if curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz"; then
			START=$(echo "$(date +%s.%N) - $T0" | bc)
			break
		fi
		kill -0 $SERVER 2>/dev/null || break
		sleep 0.02
	done
	[ -n "$START" ] || { echo "pithd did not serve (see $A/serve.log)" >&2; exit 1; }
	URL=http://127.0.0.1:$PORT
	# the reconciliation set loads on a thread of its own after the start
	# (docs/pithd.md): the throughput is measured once it is in, so that
	# its 10-million-key walk does not share the 2 cores with wrk
	# and so is the page cache's warm-up (store_warm_mb, docs/pithd.md):
	# a node reads its records, aliases and states once at start; the
	# requests are measured after it, as a node serving for a while is
	for _ in $(seq 6000); do
		grep -q "reconciliation set of" "$A/serve.log" &&
			{ [ "$WARM_MB" = 0 ] || grep -q "page cache:" "$A/serve.log"; } && break
		sleep 0.1
	done
	wrk -t1 -c"$CONN" -d3s -s "$HERE/bench_http.lua" "$URL" -- state "$A/ids.txt" >/dev/null
	ST=$(wrk -t1 -c"$CONN" -d"${DUR}s" --timeout 5s -s "$HERE/bench_http.lua" "$URL" -- state \
		"$A/ids.txt" | grep '^RESULT')
	wrk -t1 -c"$CONN" -d3s -s "$HERE/bench_http.lua" "$URL" -- resolve "$A/arxiv.txt" >/dev/null
	RS=$(wrk -t1 -c"$CONN" -d"${DUR}s" --timeout 5s -s "$HERE/bench_http.lua" "$URL" -- resolve \
		"$A/arxiv.txt" | grep '^RESULT')
	PRSS=$(($(awk '/^VmHWM:/ { print $2 }' /proc/$SERVER/status) / 1024))
	kill $SERVER
	wait $SERVER || true
	SERVER=""
	WARM=$(sed -n 's/.*page cache: read \([0-9]* table files\).*(\([0-9]* MiB\)) in \([0-9]*\) ms.*/\1, \2, in \3 ms/p' \
		"$A/serve.log" | head -1)
	RECON=$(sed -n 's/.*reconciliation set of \([0-9]*\) events loaded in \([0-9]*\) ms.*/\1 events in \2 ms/p' \
		"$A/serve.log" | head -1)
	say "pithctl records and check"
	/usr/bin/time -f "%e %M" -o "$A/records.time" "$PITHCTL" --store "$A/store" records |
		wc -l >"$A/records.count"
	if [ $CHECK = 1 ]; then
		/usr/bin/time -f "%e %M" -o "$A/check.time" "$PITHCTL" --store "$A/store" \
			--trust-key "$DATA/key.json" check \
			>"$A/check.out" 2>&1 || true
	else
		echo "0 0" >"$A/check.time"
		echo "not run (--no-check)" >"$A/check.out"
	fi
	# /usr/bin/time's last line ("Command exited with ..." may precede it)
	tm() { tail -1 "$A/$2.time" | cut -d' ' -f"$1"; }
	f() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"; }
	SERVE_LINE="store of $LARGEST events: pithd serving after $(printf %.2f "$START") s (peak RSS ${PRSS} MiB after the wrk runs); reconciliation set ${RECON:-?}; page cache warmed: ${WARM:-?}
state.json: $(f rps "$ST") req/s, p99 $(f p99_ms "$ST") ms ($(f errors "$ST") errors, $(f non2xx "$ST") non-2xx)
resolve:    $(f rps "$RS") req/s, p99 $(f p99_ms "$RS") ms ($(f errors "$RS") errors, $(f non2xx "$RS") non-2xx)
pithctl records: $(cat "$A/records.count") lines in $(tm 1 records) s, peak RSS $(($(tm 2 records) / 1024)) MiB
pithctl check:   $(tm 1 check) s, peak RSS $(($(tm 2 check) / 1024)) MiB; $(tail -1 "$A/check.out")"
fi

echo
echo "# bench_scale.sh, 2 events per record; $(nproc) cores; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| run | events | events/s | CPU per event (us) | floor per event (us) | CPU / floor | / bare libsodium | / bare fixed-key | peak RSS (MiB) | disk per event, bytes (x raw) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
while IFS='|' read -r what n rate cpu floor over ratio fixed rss disk; do
	echo "| $what | $n | $rate | $cpu | $floor | $over | $ratio | $fixed | $rss | $disk |"
done <"$ROWS"
# the flat curve: the rate at the largest size over the rate at the smallest
for what in import sync; do
	awk -F'|' -v w=$what '$1 == w { if (!lo || $2 < lo) { lo = $2; small = $3 }
				      if ($2 > hi) { hi = $2; large = $3 } }
		END { if (lo && hi != lo) printf "%s: rate at the largest size / at the smallest %.3f (target >= 0.85)\n", w, large / small }' "$ROWS"
	# issue 56: CPU per event flat (within 10%) from the smallest size to the largest
	awk -F'|' -v w=$what '$1 == w { if (!lo || $2 < lo) { lo = $2; small = $4 }
				      if ($2 > hi) { hi = $2; large = $4 } }
		END { if (lo && hi != lo && small > 0) printf "%s: CPU per event at the largest size / at the smallest %.3f (goal <= 1.10)\n", w, large / small }' "$ROWS"
done
[ -z "$SERVE_LINE" ] || echo "$SERVE_LINE"
