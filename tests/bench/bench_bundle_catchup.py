#!/usr/bin/env python3
"""Bundle catch-up of a fresh node (issue 5, docs/performance.md, "Bundles and bundle catch-up").

Node A holds R records of E events each and one registry bundle per record
(gen_events + gen_bundles, imported offline with `pithctl import`); a
fresh node B dials A. Prints how long B takes to hold all of A's events
and all of its bundles, and the bundle rate.

usage: bench_bundle_catchup.py --bin BUILD_DIR [--bin-a BUILD_DIR] [--records 20000]
                               [--per-record 2] [--timeout 1800] [--keep]

--bin-a runs A from another build (an older version: the mixed pace).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import Node, finish  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="build directory")
    ap.add_argument("--bin-a", help="build directory of A (default: --bin)")
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--per-record", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    pithd = os.path.join(args.bin, "node", "pithd")
    pithctl = os.path.join(args.bin, "node", "cli", "pithctl")
    root = tempfile.mkdtemp(prefix="pbcatch-", dir="/tmp")
    nodes, ok = [], False
    try:
        key = os.path.join(root, "key.json")
        ev = os.path.join(root, "events.jsonl")
        bu = os.path.join(root, "bundles.jsonl")
        subprocess.run([os.path.join(args.bin, "tests", "gen_events"), "--records",
                        str(args.records), "--per-record", str(args.per_record), "--key-out",
                        key, ev], check=True)
        subprocess.run([os.path.join(args.bin, "tests", "gen_bundles"), ev, bu], check=True)
        extra = ["--trust-key", key, "--log-level", "info", "--sync-interval-ms", "0"]
        a_bin = args.bin_a or args.bin
        a = Node(os.path.join(a_bin, "node", "pithd"), root, "a", extra=extra)
        os.makedirs(a.dir)
        subprocess.run([pithctl, "--store", os.path.join(a.dir, "store"), "--trust-key", key,
                        "import", ev, bu], check=True, capture_output=True)
        a.start()
        nodes.append(a)
        want_ev = a.status()["store"]["events"]
        want_b = args.records
        b = Node(pithd, root, "b", extra=extra)
        t0 = time.time()
        b.start(peers=[a.addr])
        nodes.append(b)
        t_ev = t_b = None
        last = 0
        while time.time() - t0 < args.timeout:
            st = b.status()
            evs, bs = st["store"]["events"], st["stats"]["bundles_stored"]
            now = time.time() - t0
            if t_ev is None and evs >= want_ev:
                t_ev = now
            if t_b is None and bs >= want_b:
                t_b = now
            if now - last >= 10:
                print("# %6.1f s: %d/%d events, %d/%d bundles" % (now, evs, want_ev, bs, want_b),
                      flush=True)
                last = now
            if t_ev is not None and t_b is not None:
                break
            time.sleep(0.25)
        sa = a.status()
        print("records %d, events %d, bundles %d" % (args.records, want_ev, want_b))
        print("events caught up in %s s" % ("%.1f" % t_ev if t_ev else "(not)"))
        print("bundles caught up in %s s (%s bundles/s)"
              % ("%.1f" % t_b if t_b else "(not)",
                 "%.0f" % (want_b / t_b) if t_b else "-"))
        sb = b.status()
        print("A: %d BUNDLE_ANNOUNCE, %d BUNDLE sent; B's score at A %s, A's at B %s"
              % (sa["stats"]["msgs_sent"].get("BUNDLE_ANNOUNCE", 0),
                 sa["stats"]["msgs_sent"].get("BUNDLE", 0),
                 [p["score"] for p in sa["peers"]], [p["score"] for p in sb["peers"]]))
        ok = t_ev is not None and t_b is not None
    finally:
        finish(nodes, root, ok, args.keep, tail=10)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
