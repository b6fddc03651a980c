#!/bin/bash
# Where a fresh node's catch-up spends its CPU, as the store grows (on
# demand, not in the suite; docs/performance.md at 262f3c4, issue 17, "Session 11").
#
#   tests/bench/sync_trace.sh BUILD N [--data DIR] [--step EVENTS] [--config FILE]
#
# Runs a pithd A on DIR/a-N-2 (the store bench_scale.sh leaves: an import
# of DIR/events-N-2.jsonl signed by DIR/key.json) and a fresh pithd B
# dialling it, samples each of B's threads' CPU time (/proc) and B's
# event count every 10 s until B is caught up, out of bulk mode (its end
# moves the side families, docs/store.md) and done compacting, and
# prints per STEP events (default 1,000,000) the rate and each thread
# group's CPU per event: the validators, the writer, the merge lanes,
# RocksDB's flushes (rocksdb:high) and compactions (rocksdb:low), the
# search index and the event loop (pithd). --config gives B a pithd.conf
# (pithd.conf(5)) to try a setting. Then, from /proc/.../schedstat, each
# group's share of the wall time on a CPU and waiting for one (the run
# queue), per thread, from the first sample (10 s in) to the first that
# saw every event; and B's commits and states recomputed.
# B's resident memory is sampled too: the peak, and when it was, are
# printed last. B's store is made under DIR and
# removed at the end; the raw samples are kept in DIR/sync-trace-N.txt.
# With PITH_ROCKSDB_LOG=info in the environment, B's RocksDB LOG is kept
# as DIR/sync-trace-N.LOG* and its compactions are summed per column
# family (rocksdb_log_cf.py).
set -eu
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
BUILD=$1 N=$2
shift 2
DATA=/work/scale-data STEP=1000000 BCONF=()
while [ $# -gt 0 ]; do
	case $1 in
	--data) DATA=$2; shift 2 ;;
	--step) STEP=$2; shift 2 ;;
	--config) BCONF=(--config "$(realpath "$2")"); shift 2 ;;
	*) echo "sync_trace.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
PITHD=$BUILD/node/pithd PITHCTL=$BUILD/node/cli/pithctl
A=$DATA/a-$N-2 B=$DATA/trace-b KEY=$DATA/key.json OUT=$DATA/sync-trace-$N.txt
[ -d "$A/store" ] || { echo "sync_trace.sh: no store $A/store (run bench_scale.sh for $N first)" >&2; exit 2; }
pgrep -f "pithd --data $A" >/dev/null && { echo "sync_trace.sh: a pithd already runs on $A" >&2; exit 2; }
rm -rf "$B"
mkdir -p "$B"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PA=$(port) PB=$(port)
APID="" BPID=""
cleanup() {
	kill $BPID $APID 2>/dev/null || true
	wait 2>/dev/null || true
	if [ -n "${PITH_ROCKSDB_LOG:-}" ] && [ -f "$B/store/LOG" ]; then
		rm -f "$DATA/sync-trace-$N.LOG"*
		for f in "$B"/store/LOG*; do cp "$f" "$DATA/sync-trace-$N.${f##*/}"; done
		python3 "$(dirname "$0")/rocksdb_log_cf.py" "$DATA/sync-trace-$N.LOG"*
	fi
	rm -rf "$B"
}
trap cleanup EXIT
PITH_ROCKSDB_LOG= "$PITHD" --data "$A" --listen 127.0.0.1:$PA --network-id bench-sync --trust-key "$KEY" \
	--control "$A/trace.sock" >"$DATA/trace-a.log" 2>&1 &
APID=$!
status() { "$PITHCTL" --json --node "$1" status 2>/dev/null; }
until status "$A/trace.sock" | grep -q '"set":"loaded"'; do sleep 1; done
"$PITHD" "${BCONF[@]}" --data "$B" --listen 127.0.0.1:$PB --network-id bench-sync --trust-key "$KEY" \
	--peer 127.0.0.1:$PA --control "$B/trace.sock" >"$DATA/trace-b.log" 2>&1 &
BPID=$!
t0=$(date +%s)
: >"$OUT"
while sleep 10; do
	kill -0 "$BPID" 2>/dev/null || { echo "sync_trace.sh: B exited (see $DATA/trace-b.log)" >&2; exit 1; }
	st=$(status "$B/trace.sock" | python3 -c 'import json, sys
d = json.load(sys.stdin)
print(d["store"]["events"], d["sync"]["state"], int(d["store"]["compacting"] or d["sync"]["bulk"]))') || continue
	thr=$(for t in /proc/$BPID/task/*; do
		echo "$(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat") $(cat "$t/schedstat")"
	done 2>/dev/null | awk '{a[$1] += $2; r[$1] += $4 / 1e6; n[$1]++}
		END {for (k in a) printf "%s=%d rq.%s=%d n.%s=%d ", k, a[k], k, r[k], k, n[k]}')
	rss=$(awk '/^VmRSS/ {print $2}' /proc/$BPID/status 2>/dev/null || echo 0)
	echo "$(($(date +%s) - t0)) $st $thr rss_kb=$rss" >>"$OUT"
	set -- $st
	[ "$1" = "$N" ] && [ "$2" = idle ] && [ "$3" = 0 ] && break
done
status "$B/trace.sock" | python3 -c 'import json, sys
i = json.load(sys.stdin)["ingest"]
print("B committed %d batches, recomputed %d states" % (i["batches"], i["states"]))'
python3 - "$OUT" "$STEP" "$(getconf CLK_TCK)" <<'EOF'
import sys
rows = []
for line in open(sys.argv[1]):
    p = line.split()
    d = {k: int(v) for k, v in (x.split("=") for x in p[4:])}
    rq = {k[3:]: d.pop(k) for k in list(d) if k.startswith("rq.")}
    nt = {k[2:]: d.pop(k) for k in list(d) if k.startswith("n.")}
    rows.append((int(p[0]), int(p[1]), d, d.pop("rss_kb", 0), rq, nt))
step, hz = int(sys.argv[2]), int(sys.argv[3])
names = sorted(rows[-1][2])
print("%-11s %5s %7s " % ("events", "s", "ev/s") + " ".join("%13s" % n for n in names) + "  total (us of CPU per event)")
prev, nxt = (0, 0, {}), step
for r in rows:
    if r[1] >= nxt or r is rows[-1]:
        dev, dt = r[1] - prev[1], r[0] - prev[0]
        if dev <= 0:  # caught up, compacting: seconds of CPU, not per event
            s = [(r[2].get(n, 0) - prev[2].get(n, 0)) / hz for n in names]
            print("%-11s %5d %7s " % ("after (s)", dt, "-") + " ".join("%13.1f" % x for x in s)
                  + "  %6.1f" % sum(s))
        else:
            us = [(r[2].get(n, 0) - prev[2].get(n, 0)) * 1e6 / hz / dev for n in names]
            print("%-11s %5d %7.0f " % ("%.1f-%.1fM" % (prev[1] / 1e6, r[1] / 1e6), dt, dev / max(dt, 1))
                  + " ".join("%13.1f" % u for u in us) + "  %6.1f" % sum(us))
        prev, nxt = r, (r[1] // step + 1) * step
# from the first sample to the first that saw every event: each group's
# share of the wall time on a CPU and waiting for one (run queue), per thread
end = next((r for r in rows if r[1] >= rows[-1][1]), rows[-1])
if end is not rows[0]:
    dt = (end[0] - rows[0][0]) * 1.0
    print("catching up, %d-%d s, per thread (%% of wall time): " % (rows[0][0], end[0]) + ", ".join(
        "%s %.0f on CPU %.0f waiting" % (n, (end[2].get(n, 0) - rows[0][2].get(n, 0)) * 100 / hz / dt / max(end[5].get(n, 1), 1),
                                         (end[4].get(n, 0) - rows[0][4].get(n, 0)) / 10 / dt / max(end[5].get(n, 1), 1))
        for n in names))
peak = max(rows, key=lambda r: r[3])
print("peak RSS of B (sampled) %d MiB, at %d s, %d events stored" % (peak[3] // 1024, peak[0], peak[1]))
EOF
