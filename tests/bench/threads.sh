#!/usr/bin/env bash
# Where a process's time went, thread by thread: time on a CPU, time
# runnable but waiting for a core (the run queue), and the rest of its
# life (asleep: waiting for work, a lock or the disk). On demand, for
# profiling (docs/performance.md at 262f3c4, "Where a 1M import's time went").
#
# usage: threads.sh [--interval S] -- COMMAND [ARG...]
#        threads.sh [--interval S] --pid PID
#
# Samples /proc/PID/task/TID/schedstat (on-CPU ns, run-queue ns) and the
# thread's name every S seconds (default 0.2) until the process exits,
# keeping each thread's last sample, so threads that end early count too
# (their last S seconds may be missed). Prints one line per thread name
# (threads of one name summed, with their count), then the total. The
# sleep column is each thread's sampled lifetime minus CPU and run queue.
# Needs a kernel with schedstats (/proc/PID/task/TID/schedstat present).
set -euo pipefail
INTERVAL=0.2 PID=
while [ $# -gt 0 ]; do
	case $1 in
	--interval) INTERVAL=$2; shift 2 ;;
	--pid) PID=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "threads.sh: unknown option $1 (usage: threads.sh [--interval S] -- COMMAND ...)" >&2; exit 2 ;;
	esac
done
if [ -z "$PID" ]; then
	[ $# -gt 0 ] || { echo "threads.sh: no command given (usage: threads.sh -- COMMAND ...)" >&2; exit 2; }
	"$@" &
	PID=$!
fi
[ -d "/proc/$PID" ] || { echo "threads.sh: no process $PID" >&2; exit 2; }
SAMPLES=$(mktemp)
trap 'rm -f "$SAMPLES"' EXIT
start=$(date +%s.%N)
while [ -d "/proc/$PID/task" ]; do
	now=$(date +%s.%N)
	for t in /proc/"$PID"/task/*; do
		{ read -r cpu rq _ < "$t/schedstat" && read -r comm < "$t/comm"; } 2>/dev/null || continue
		printf '%s %s %s %s %s\n' "${t##*/}" "$now" "$cpu" "$rq" "$comm"
	done >> "$SAMPLES"
	sleep "$INTERVAL"
done
status=0
if [ $# -gt 0 ]; then wait "$PID" || status=$?; fi
end=$(date +%s.%N)
awk -v start="$start" -v end="$end" '
{
	tid = $1
	if (!(tid in first)) first[tid] = $2
	last[tid] = $2; cpu[tid] = $3; rq[tid] = $4
	name = $5; for (i = 6; i <= NF; i++) name = name " " $i
	comm[tid] = name
}
END {
	for (t in comm) {
		n = comm[t]
		life = last[t] - first[t]
		c = cpu[t] / 1e9; r = rq[t] / 1e9
		s = life - c - r; if (s < 0) s = 0
		C[n] += c; R[n] += r; S[n] += s; K[n]++
		tc += c; tr += r
	}
	printf "%-18s %7s %9s %9s %9s\n", "thread", "count", "cpu_s", "runq_s", "sleep_s"
	for (n in C)
		printf "%-18s %7d %9.2f %9.2f %9.2f\n", n, K[n], C[n], R[n], S[n] | "sort -k3,3nr"
	close("sort -k3,3nr")
	printf "%-18s %7s %9.2f %9.2f   wall %.2f s\n", "total", "", tc, tr, end - start
}' "$SAMPLES"
exit "$status"
