#!/usr/bin/env python3
"""The reconciliation sets load on a thread of their own (issue 17,
docs/sync.md "Integration with the node"): pithd serves at once and
reconciliation begins when the sets are ready.

A holds 800 events and restarts with PITH_TEST_RECON_LOAD_DELAY_MS (test
only: the finished load is held back that long before the node takes it).
While the set is loading:
- /healthz answers and `status` says "set": "loading";
- 200 more events imported through `pithctl --node SOCK import` are stored
  (they reach the set only through the queue replayed after the load);
- a fresh node C dials A: A answers C's session "busy" (an empty RECON),
  with no penalty, and starts one with C itself once loaded.
Then A's set holds all 1000 events, C got them all, and a fresh node D
gets them all through `pithctl sync`. Last, a node stopped while its set
is loading exits cleanly and at once.

usage: sync_load_test.py --pithd P --pithctl C --gen-events G [--keep]
"""

import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import Node, make_events, run_test, wait_for  # noqa: E402

DELAY_MS = 4000


def log(*a):
    print("#", *a, flush=True)


def body(args, root, nodes):
    key, events = make_events(args.gen_events, root, 200, 5)
    old, late = events[:800], events[800:]
    latefile = os.path.join(root, "late.jsonl")
    with open(latefile, "wb") as f:
        f.write(b"\n".join(late) + b"\n")
    common = ["--trust-key", key, "--log-level", "info", "--sync-interval-ms", "0"]

    def node(name, extra=()):
        n = Node(args.pithd, root, name, extra=common + list(extra))
        nodes.append(n)
        return n

    a = node("a", ["--http", "127.0.0.1:0"])
    a.start()
    bad = [r for r in a.submit(old) if not r.get("ok")]
    assert not bad, bad[:1]
    assert a.stop() == 0

    # restart with the load held back
    t0 = time.time()
    a.start(env={"PITH_TEST_RECON_LOAD_DELAY_MS": str(DELAY_MS)})
    st = a.status()
    url = "http://" + st["http"]
    assert urllib.request.urlopen(url + "/healthz", timeout=5).status == 200
    up = time.time() - t0
    st = a.status()
    assert st["sync"]["set"] == "loading", st["sync"]
    assert st["sync"]["enabled"], st["sync"]
    # no filter of stored ids before the set: every offered id asks the store
    assert st["sync"]["filter_bytes"] == 0, st["sync"]
    log("serving /healthz %.2f s after the start, the set still loading" % up)

    # a fresh node dials A while it loads: its session is turned away
    c = node("c")
    c.start()
    assert c.ctl("connect " + a.addr).get("ok")
    # events stored while loading
    r = subprocess.run([args.pithctl, "--node", a.sock, "import", latefile],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    st = a.status()
    assert st["store"]["events"] == 1000, st["store"]
    assert st["sync"]["set"] == "loading", (
        "the load finished before the test could store during it; raise DELAY_MS", st["sync"])
    log("200 events imported while loading")

    def loaded():
        s = a.status()["sync"]
        return s if s["set"] == "loaded" else None
    s = wait_for(loaded, 30, what="A's set to load")
    assert s["items"] == 1000, s
    # the filter of the set's ids, built once it loaded: room for 2^20 ids
    assert s["filter_bytes"] >= (1 << 20) * 10 // 8, s
    with open(a.log_path, errors="replace") as f:
        text = f.read()
    assert "reconciliation set of 800 events loaded in " in text, text[-2000:]

    # C: turned away while loading, no penalty, then served by A's session
    def c_has_all():
        return c.status()["store"]["events"] == 1000 or None
    wait_for(c_has_all, 60, what="C to hold all 1000 events")
    assert not a.status()["bans"] and not c.status()["bans"]
    peers = [p for p in a.status()["peers"] if p["state"] == "ready"]
    assert peers and all(p["score"] == 0 for p in peers), peers
    log("C, which dialled A while it loaded, got all 1000 events once A had loaded")

    # a fresh node after the load
    d = node("d")
    d.start()
    r = subprocess.run([args.pithctl, "--node", d.sock, "--json", "sync", a.addr],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    wait_for(lambda: d.status()["store"]["events"] == 1000 or None, 60,
             what="D to hold all 1000 events")
    wait_for(lambda: d.status()["sync"]["items"] == 1000 or None, 10, what="D's set")
    log("D got all 1000 events through `sync`")
    for n in (c, d):
        assert n.stop() == 0

    # stopped while loading: the loader gives up, the node exits cleanly
    assert a.stop() == 0
    a.start(env={"PITH_TEST_RECON_LOAD_DELAY_MS": "600000"})
    assert a.status()["sync"]["set"] == "loading"
    t1 = time.time()
    assert a.stop(timeout=20) == 0
    log("stopped while loading: exit 0 in %.2f s" % (time.time() - t1))


if __name__ == "__main__":
    sys.exit(run_test("psyncload-", body))
