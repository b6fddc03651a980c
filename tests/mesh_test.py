#!/usr/bin/env python3
"""Mesh test (issue 4): five pithd nodes in a ring plus one seed, on
ephemeral loopback ports, each with its own data directory.

1. The ring forms (node i dials the seed and node i-1; node 0 is told to
   dial node 4), and peer exchange adds the seed's other nodes: every ring
   node ends with more peers than its configuration gives it.
2. The registry bundle goes in at node 0 and generated events (signed by
   a test key every node trusts) at nodes 1 and 3 at the same time; every
   node reaches the same record set with the same state_sha256 for every
   record.
3. Node 2 is stopped (SIGTERM, exit 0); more events go in at node 4; node
   2 is restarted on the same port and data directory and catches up
   (set reconciliation after the handshake, docs/sync.md: no INV listing
   goes over the wire anywhere in the run).
4. All nodes stop cleanly; offline, `pithctl --store DIR records` agrees
   across every data directory and `pithctl check` finds no problem.

usage: mesh_test.py --pithd P --pithctl C --gen-events G [--events N] [--keep]
"""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import run_test, Node, make_events, wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def log(*a):
    print("#", *a, flush=True)


def ready_peers(node, direction=None):
    st = node.status()
    return [p for p in st["peers"]
            if p["state"] == "ready" and (direction is None or p["direction"] == direction)]


def state_map(node):
    return {k: (v["state_sha256"], v["event_count"], v["has_bundle"])
            for k, v in node.records().items()}


def converged(nodes, want_events):
    """The common state map once every node holds want_events events and
    they all agree, else None."""
    maps = []
    for n in nodes:
        if n.status()["store"]["events"] != want_events:
            return None
        maps.append(state_map(n))
    return maps[0] if all(m == maps[0] for m in maps) else None


def submit_all(node, lines, kind="event"):
    replies = node.submit(lines, kind)
    bad = [r for r in replies if not r.get("ok")]
    if bad:
        raise AssertionError("%s refused %d items, first: %s" % (node.name, len(bad), bad[0]))
    return replies


def body(args, root, nodes):
    t0 = time.time()
    key, events = make_events(args.gen_events, root, args.records, args.per_record)
    bundle = open(os.path.join(args.data, "bundle-AR7B3DEV.json"), "rb").read().strip()
    # records are grouped: split by record so that later parts hold
    # events of records the earlier parts created, and of new ones
    per = args.per_record
    cut1 = (args.records * 4 // 10) * per
    cut2 = (args.records * 8 // 10) * per
    part_a = events[:cut1]
    part_b = events[cut1:cut2]
    part_c = events[cut2:]
    log("generated %d events for %d records (%d + %d now, %d later)"
        % (len(events), args.records, len(part_a), len(part_b), len(part_c)))

    # announce_fanout 1: the deferred-announce path must converge too
    extra = ["--trust-key", key, "--outbound-target", "3", "--pex-interval-ms", "500",
             "--announce-fanout", "1", "--lazy-announce-ms", "20",
             "--reconnect-min-ms", "200", "--reconnect-max-ms", "2000",
             "--ping-interval-ms", "2000", "--log-level", "info"]
    seed = Node(args.pithd, root, "seed", extra=extra).start()
    nodes.append(seed)
    ring = []
    for i in range(5):
        peers = [seed.addr] + ([ring[-1].addr] if ring else [])
        ring.append(Node(args.pithd, root, "n%d" % i, extra=extra).start(peers=peers))
        nodes.append(ring[-1])
    r = ring[0].ctl("connect " + ring[4].addr)
    assert r.get("ok"), r
    log("seed and ring up: %s" % ", ".join("%s=%d" % (n.name, n.port) for n in nodes))

    # 1. the ring, then peer exchange beyond it
    for i, n in enumerate(ring):
        wait_for(lambda n=n: len(ready_peers(n)) >= 3, 20, what="%s to have 3 peers" % n.name)
    # configured: the seed, the previous ring node (out) and the next (in);
    # a fourth peer was found through peer exchange
    wait_for(lambda: all(len(ready_peers(n)) >= 4 for n in ring), 30,
             what="peer exchange to give every ring node a fourth peer")
    for n in ring:
        st = n.status()
        log("%s: %d peers (%d out), %d known addresses" % (
            n.name, len(ready_peers(n)), len(ready_peers(n, "out")), st["addresses"]))

    # 2. bundle at n0, two halves of the events at n1 and n3 at once
    t1 = time.time()
    submit_all(ring[0], [bundle], kind="bundle")
    th = [threading.Thread(target=submit_all, args=(ring[1], part_a)),
          threading.Thread(target=submit_all, args=(ring[3], part_b))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    want = 2 + len(part_a) + len(part_b)
    common = wait_for(lambda: converged(nodes, want), 60,
                      what="all 6 nodes to hold %d events with equal states" % want)
    log("all 6 nodes converged on %d records / %d events in %.1f s"
        % (len(common), want, time.time() - t1))
    rec = common.get("pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE")
    assert rec and rec[2], "the registry record and its bundle are everywhere"
    # the registry's own published state (spec section 5)
    assert rec[0].startswith("3facdc2a"), rec[0]
    log("registry record state_sha256 %s (the published one)" % rec[0])

    # 3. stop n2, add events at n4, restart n2: it catches up
    rc = ring[2].stop()
    assert rc == 0, "n2 exited with %s on SIGTERM" % rc
    others = [n for n in nodes if n is not ring[2]]
    t2 = time.time()
    submit_all(ring[4], part_c)
    want2 = want + len(part_c)
    common2 = wait_for(lambda: converged(others, want2), 60,
                       what="the 5 running nodes to hold %d events" % want2)
    log("5 running nodes converged on %d events in %.1f s while n2 was down"
        % (want2, time.time() - t2))
    t3 = time.time()
    ring[2].start()  # same port, data directory and configured peers
    wait_for(lambda: converged(nodes, want2), 60, what="n2 to catch up")
    log("n2 caught up %d events in %.1f s after restart" % (len(part_c), time.time() - t3))
    assert state_map(ring[2]) == common2
    for n in nodes:
        st = n.status()["stats"]
        assert "INV_REQ" not in st["msgs_sent"] and "INV" not in st["msgs_sent"], st
    st = ring[2].status()["sync"]
    assert st["sessions_done"] >= 1 and st["ids_needed"] >= len(part_c), st
    log("n2 learnt %d missing ids in %d reconciliation sessions; no INV anywhere"
        % (st["ids_needed"], st["sessions_done"]))

    # 4. clean shutdown and an offline cross-check of every store
    for n in nodes:
        rc = n.stop()
        assert rc == 0, "%s exited with %s" % (n.name, rc)
    outs = set()
    for n in nodes:
        r = subprocess.run([args.pithctl, "--store", os.path.join(n.dir, "store"), "records"],
                           capture_output=True)
        assert r.returncode == 0, "pithctl records on %s: %s" % (n.name, r.stderr.decode())
        outs.add(r.stdout)
    assert len(outs) == 1, "pithctl records differs between data directories"
    chk = subprocess.run([args.pithctl, "--trust-key", key, "--store",
                          os.path.join(ring[2].dir, "store"), "check"],
                         capture_output=True, text=True)
    assert chk.returncode == 0, "pithctl check on n2: %s %s" % (chk.stdout, chk.stderr)
    log("offline: pithctl records identical in all 6 stores; check on n2: ok")
    log("mesh test passed in %.1f s" % (time.time() - t0))


def add_args(ap):
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--records", type=int, default=300)
    ap.add_argument("--per-record", type=int, default=10)


def main():
    return run_test("pm-", body, tools=("pithd", "pithctl", "gen-events"), add_args=add_args)


if __name__ == "__main__":
    sys.exit(main())
