#!/usr/bin/env python3
"""Where a run leaves a core idle: reads `perf script` output of a
system-wide `perf sched record` and says how much CPU time was idle while
other cores worked, which threads ran then (alone, on a 2-core machine),
and which of the node's threads were asleep meanwhile.

A catch-up that is CPU-bound on every core has no idle time; one whose
single serial thread (the writer) runs while the others have nothing left
to do shows it here (docs/performance.md at 262f3c4, issue 17, session 32).

usage (on demand, root or perf_event_paranoid <= 0):
  perf sched record -a -o sched.data -- sleep 4     # during the catch-up
  perf script -i sched.data > sched.txt
  tests/bench/sched_idle.py sched.txt [--prefix pith]
"""

import argparse
import collections
import re
import sys

SWITCH = re.compile(r"^\s*\S.*?\s+\d+\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch: "
                    r"prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> "
                    r"next_comm=(.*?) next_pid=(\d+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("script", help="perf script output of perf sched record -a")
    ap.add_argument("--prefix", default="pith",
                    help="thread names counted as asleep while a core idles")
    a = ap.parse_args()
    cur, names, state = {}, {0: "idle"}, {}
    ncpu = 0
    first = last = None
    idle = 0.0
    running = collections.Counter()
    asleep = collections.Counter()
    with open(a.script, errors="replace") as f:
        for line in f:
            m = SWITCH.match(line)
            if not m:
                continue
            cpu, t = int(m.group(1)), float(m.group(2))
            ncpu = max(ncpu, cpu + 1)
            if first is None:
                first = t
            if last is not None and len(cur) == ncpu:
                n_idle = sum(1 for v in cur.values() if v == 0)
                if 0 < n_idle < ncpu:
                    d = t - last
                    idle += d * n_idle
                    for v in cur.values():
                        if v:
                            running[names.get(v, "?")] += d
                    for pid, s in state.items():
                        if s != "R" and names.get(pid, "").startswith(a.prefix):
                            asleep[names[pid]] += d
            last = t
            prev, nxt = int(m.group(4)), int(m.group(7))
            names[prev], names[nxt] = m.group(3), m.group(6)
            if prev:
                state[prev] = m.group(5)
            if nxt:
                state[nxt] = "R"
            cur[cpu] = nxt
    if first is None or last == first:
        sys.exit("sched_idle: no sched_switch events in %s" % a.script)
    span = last - first
    print("%d cores, %.3f s: %.3f s of CPU idle while another core worked (%.1f%% of all CPU time)"
          % (ncpu, span, idle, 100 * idle / (span * ncpu)))
    print("running then (seconds):")
    for k, v in running.most_common(8):
        print("  %-24s %.3f" % (k, v))
    print("%s* threads asleep then (thread-seconds):" % a.prefix)
    for k, v in asleep.most_common(8):
        print("  %-24s %.3f" % (k, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
