#!/usr/bin/env python3
"""pithd's worker_nice (issue 6): the store writer runs that many nice steps
below the event loop, the validators and RocksDB's background threads 5
more (node/base/prio.h, PRIO_BELOW_WRITER; issue 17, session 32), capped at 19.

Reads /proc/PID/task/*/stat of a running pithd (with --http, events stored
through the control socket so that every pipeline thread has worked):

1. default: the loop (the main thread) at 0, pith-writer at 10, every
   pith-validate and rocksdb:* thread at 15;
2. --worker-nice 0: every thread at 0; --worker-nice 19: workers at 19;
3. a pithd started at nice 3: the loop stays at 3, the writer goes to 13,
   the validators and RocksDB's threads to 18; started at nice 15, the
   workers stop at 19;
4. out of range (-1, 20): refused at start, one line on stderr, exit 2.

usage: worker_nice_test.py --pithd P --gen-events G [--keep]
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import Node, finish, make_events  # noqa: E402

WORKERS = ("pith-validate", "pith-writer", "rocksdb:")


def log(*a):
    print("#", *a, flush=True)


def threads(pid):
    """{tid: (name, nice)} of a running process."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                s = f.read()
        except OSError:
            continue  # gone meanwhile
        name = s[s.index("(") + 1:s.rindex(")")]
        fields = s[s.rindex(")") + 2:].split()
        out[int(t)] = (name, int(fields[16]))  # field 19 of stat: nice
    return out


def check(node, loop_nice, worker_nice):
    """worker_nice: the writer's value; the others' is 5 more (at most 19),
    or the loop's when the workers are not lowered at all."""
    pid = node.proc.pid
    below = min(worker_nice + 5, 19) if worker_nice != loop_nice else worker_nice
    want = {"pith-writer": worker_nice, "pith-validate": below, "rocksdb:": below}
    th = threads(pid)
    assert th[pid][1] == loop_nice, "loop thread at nice %d, want %d" % (th[pid][1], loop_nice)
    seen = {w: 0 for w in WORKERS}
    for tid, (name, nice) in th.items():
        for w in WORKERS:
            if name.startswith(w):
                seen[w] += 1
                assert nice == want[w], "%s (%d) at nice %d, want %d" % (name, tid, nice,
                                                                         want[w])
    assert seen["pith-validate"] == 2 and seen["pith-writer"] == 1 and seen["rocksdb:"] >= 2, seen
    log("loop at %d, the writer at %d, %d other worker threads at %d"
        % (loop_nice, worker_nice, sum(seen.values()) - 1, below))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithd", required=True)
    ap.add_argument("--gen-events", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if os.nice(0) != 0:
        # the values asserted are relative to a start at nice 0
        print("skip: this test runs at nice %d; it needs nice 0 (run ctest without nice)"
              % os.nice(0))
        return 77
    root = tempfile.mkdtemp(prefix="worker_nice_test.")
    nodes = []
    ok = False
    try:
        key, lines = make_events(args.gen_events, root, 5, 3)
        base = ["--trust-key", key, "--http", "127.0.0.1:0"]

        def run(name, extra, loop_nice, worker_nice):
            n = Node(args.pithd, root, name, extra=base + extra)
            nodes.append(n)
            n.start()
            replies = n.submit(lines)
            assert all(r.get("ok") for r in replies), replies[:3]
            check(n, loop_nice, worker_nice)
            assert n.stop() == 0

        run("default", [], 0, 10)
        run("zero", ["--worker-nice", "0"], 0, 0)
        run("max", ["--worker-nice", "19"], 0, 19)
        for bad in ("-1", "20"):
            r = subprocess.run([args.pithd, "--data", os.path.join(root, "bad"),
                                "--worker-nice", bad], capture_output=True, timeout=30)
            err = r.stderr.decode()
            assert r.returncode == 2 and err.count("\n") == 1 and "worker_nice" in err, \
                (bad, r.returncode, err)
        # last: these raise this test's own nice value, which pithd inherits
        os.nice(3)
        run("niced", [], 3, 13)
        os.nice(12)
        run("capped", [], 15, 19)
        ok = True
        log("ok")
    finally:
        finish(nodes, root, ok, args.keep)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
