#!/usr/bin/env bash
# Benchmark (issue 5): set reconciliation against sending all ids and
# against rsync, on the same data, in one run.
#
#   tests/bench/bench_recon.sh [BUILD_DIR] [N] [DIFF]
#     BUILD_DIR  a configured and built tree (default: build)
#     N, DIFF    items per side and differences (default 1000000 1000)
#
# 1. bench_recon reconciles two sets of N items differing in DIFF (half
#    missing on each side), prints bytes, messages and CPU per side, and
#    writes each side's events as one file per event (32-byte id + 200
#    bytes, mtime = created_at) into two directories.
# 2. An rsync daemon started here on a free loopback port serves side B's
#    directory; `rsync -a --stats` pushes A to B, then pulls B to A, so both
#    end with the union, as reconciliation plus fetching would. Bytes are
#    rsync's own "Total bytes sent/received" of both runs.
# Needs rsync (scripts/deps.sh installs it) and about 9 GB of free disk
# under ${TMPDIR:-/tmp} for N = 1,000,000 (2 million small files).
set -euo pipefail
BUILD=${1:-build}
N=${2:-1000000}
DIFF=${3:-1000}
BENCH="$BUILD/tests/bench/bench_recon"
[ -x "$BENCH" ] || { echo "bench_recon.sh: $BENCH not built" >&2; exit 2; }
command -v rsync >/dev/null || { echo "bench_recon.sh: rsync not installed" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pith-bench-recon.XXXXXX")
DAEMON_PID=""
cleanup() {
	if [ -n "$DAEMON_PID" ]; then
		kill "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

echo "== reconciliation (bench_recon --n $N --diff $DIFF)"
"$BENCH" --n "$N" --diff "$DIFF" --dirs "$WORK/a" "$WORK/b" | tee "$WORK/recon.out"
RESULT=$(grep '^RESULT' "$WORK/recon.out")
val() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $RESULT"; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$WORK/rsyncd.conf" <<EOF
use chroot = no
pid file = $WORK/rsyncd.pid
log file = $WORK/rsyncd.log
[mod]
	path = $WORK/b
	read only = no
	uid = $(id -u)
	gid = $(id -g)
EOF
rsync --daemon --no-detach --address=127.0.0.1 --port="$PORT" --config="$WORK/rsyncd.conf" &
DAEMON_PID=$!
for _ in $(seq 50); do
	python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2)" 2>/dev/null && break
	sleep 0.1
done

# rsync's stats: "Total bytes sent: 1,234" and "Total bytes received: 5,678".
rsync_bytes() { sed -n "s/^Total bytes $1: \([0-9,]*\).*/\1/p" "$2" | tr -d ,; }
run_rsync() { # label src dst
	local t0 t1
	t0=$(date +%s.%N)
	rsync -a --stats "$2" "$3" >"$WORK/$1.stats"
	t1=$(date +%s.%N)
	local s r
	s=$(rsync_bytes sent "$WORK/$1.stats")
	r=$(rsync_bytes received "$WORK/$1.stats")
	echo "$1 $s $r $(python3 -c "print(f'{$t1 - $t0:.1f}')")"
}
echo "== rsync over loopback (daemon on 127.0.0.1:$PORT)"
read -r _ S1 R1 T1 < <(run_rsync push "$WORK/a/" "rsync://127.0.0.1:$PORT/mod/")
echo "  push A -> B: sent $S1, received $R1 bytes, ${T1}s"
read -r _ S2 R2 T2 < <(run_rsync pull "rsync://127.0.0.1:$PORT/mod/" "$WORK/a/")
echo "  pull B -> A: sent $S2, received $R2 bytes, ${T2}s"
RSYNC=$((S1 + R1 + S2 + R2))
FA=$(find "$WORK/a" -type f | wc -l)
FB=$(find "$WORK/b" -type f | wc -l)
echo "  files after: A $FA, B $FB (expected $((N + DIFF / 2)) each)"

BYTES=$(val bytes)
ALL=$(val all_ids)
python3 - "$BYTES" "$ALL" "$RSYNC" "$(val round_trips)" "$(val messages)" \
	"$(val cpu_initiator_ms)" "$(val cpu_responder_ms)" "$N" "$DIFF" "$(val correct)" <<'EOF'
import sys
b, allids, rs, rt, msgs = (int(x) for x in sys.argv[1:6])
ci, cr = float(sys.argv[6]), float(sys.argv[7])
n, d, ok = int(sys.argv[8]), int(sys.argv[9]), sys.argv[10] == "1"
print(f"== summary: two sets of {n:,} items differing in {d:,}")
print(f"| | bytes | vs reconciliation |")
print(f"|---|---:|---:|")
print(f"| reconciliation ({msgs} messages, {rt} round trips) | {b:,} | 1x |")
print(f"| all ids, 32 bytes each | {allids:,} | {allids / b:.1f}x |")
print(f"| rsync, both directions | {rs:,} | {rs / b:.1f}x |")
print(f"CPU per side: initiator {ci:.1f} ms, responder {cr:.1f} ms")
checks = [
    (f"reconciliation < 2% of all ids ({100 * b / allids:.2f}%)", b < 0.02 * allids),
    (f">= 10x fewer bytes than rsync ({rs / b:.1f}x)", rs >= 10 * b),
    (f"< 100 ms CPU per side ({max(ci, cr):.1f} ms)", max(ci, cr) < 100),
    ("both sides learnt exactly their differences", ok),
]
for text, good in checks:
    print(f"  [{'ok' if good else 'MISSED'}] {text}")
sys.exit(0 if all(g for _, g in checks) else 1)
EOF
