#!/usr/bin/env python3
"""Bulk bundle catch-up (issue 5, docs/sync.md "Bundles", docs/wire.md
WIRE_FEAT_BUNDLE_BULK).

1. Node A holds R records with one registry bundle each (gen_events +
   gen_bundles, imported with `pithctl import`). A fresh node B dials A
   and gets every bundle through the bundle session much faster than the
   old pace of about 70 a second (R / 70 seconds), without a flood strike
   or a point on either side; at the default log level B logs a bounded
   number of lines for it, none per bundle.
2. A scripted peer that asks A for many more bundles than it reads gets a
   flood strike (the serve queue is bounded), and A stays up.

usage: bundle_catchup_test.py --pithd P --pithctl C --gen-events G --gen-bundles B
                              [--records R] [--keep]
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import run_test, Node, RawPeer, msg, wait_for  # noqa: E402

BUNDLE_GET = 13
FEAT_SYNC, FEAT_BUNDLE_SYNC, FEAT_BUNDLE_BULK = 1, 2, 4


def log(*a):
    print("#", *a, flush=True)


def body(args, root, nodes):
    t0 = time.time()
    key = os.path.join(root, "key.json")
    ev = os.path.join(root, "events.jsonl")
    bu = os.path.join(root, "bundles.jsonl")
    subprocess.run([args.gen_events, "--records", str(args.records), "--per-record", "1",
                    "--key-out", key, ev], check=True)
    subprocess.run([args.gen_bundles, ev, bu], check=True, capture_output=True)
    extra = ["--trust-key", key, "--sync-interval-ms", "0"]  # the default log level
    a = Node(args.pithd, root, "a", extra=extra)
    os.makedirs(a.dir)
    r = subprocess.run([args.pithctl, "--store", os.path.join(a.dir, "store"), "--trust-key",
                        key, "import", ev, bu], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    a.start()
    nodes.append(a)
    # the reconciliation sets load in the background after start; wait for them
    wait_for(lambda: a.status()["sync"]["bundle_items"] == args.records, 30,
             what="A's bundle reconciliation set to load")

    # 1. a fresh node, at the bulk pace
    b = Node(args.pithd, root, "b", extra=extra)
    t1 = time.time()
    b.start(peers=[a.addr])
    nodes.append(b)
    old_pace = args.records / 70.0
    wait_for(lambda: b.status()["stats"]["bundles_stored"] == args.records, old_pace,
             interval=0.25, what="B to store %d bundles" % args.records)
    took = time.time() - t1
    sa, sb = a.status(), b.status()
    assert sb["stats"]["bundles_invalid"] == 0, sb["stats"]
    for s in (sa, sb):
        assert [p["score"] for p in s["peers"]] == [0], s["peers"]
    # 1.5x the old pace's time at the very least (a loaded sanitizer
    # build); a release build is 10x or more (docs/performance.md, "Bundles and bundle catch-up")
    assert took < old_pace / 1.5, "%.1f s for %d bundles" % (took, args.records)
    log("1. B stored %d bundles in %.1f s (%.0f/s; the old pace needs %.0f s), "
        "no points on either side" % (args.records, took, args.records / took, old_pace))
    # at the default level a catch-up logs progress, not items (issue 51:
    # 2,000 of 2,013 lines were "stored bundle"): its lines do not grow
    # with the records, a few per session and a progress line per 5 s
    with open(b.log_path, errors="replace") as f:
        lines = f.read().splitlines()
    per_item = [x for x in lines if "stored bundle" in x]
    assert not per_item, "per-item lines at info: %s" % per_item[:3]
    assert len(lines) <= 40 + int(took / 5), "%d lines for a catch-up of %d records:\n%s" % (
        len(lines), args.records, "\n".join(lines[:60]))
    log("   B logged %d lines for it, none per bundle" % len(lines))

    # 2. a peer that asks for far more than it reads
    pith = [x for x in a.records()][:64]
    p = RawPeer(a.port, a.network_id, source_ip="127.0.0.61", features=FEAT_BUNDLE_BULK)
    p.handshake()
    for _ in range(100):
        try:
            p.send(msg(BUNDLE_GET, pith))
        except (BrokenPipeError, ConnectionResetError):
            break  # banned before it was done asking: what this step wants

    def score():
        for x in a.status()["peers"]:
            if x["addr"].startswith("127.0.0.61:"):
                return x["score"]
        return 100 if [x for x in a.status()["bans"] if x["ip"] == "127.0.0.61"] else 0
    wait_for(lambda: score() >= 20, 20, what="a flood strike for 127.0.0.61")
    p.close()
    assert a.alive()
    log("2. 6,400 bundles asked for without reading: flood strike (%d points)" % score())
    for n in (a, b):
        assert n.stop() == 0
    log("bundle catch-up test passed in %.1f s" % (time.time() - t0))


def add_args(ap):
    ap.add_argument("--records", type=int, default=3000)


def main():
    return run_test("pbcatch-", body, tools=("pithd", "pithctl", "gen-events", "gen-bundles"), add_args=add_args)


if __name__ == "__main__":
    sys.exit(main())
