#!/usr/bin/env python3
"""Gossip benchmark (issue 4): a 10-node pithd mesh on loopback.

Events are injected at node 0 through its control socket at a steady rate;
every node writes `UNIX_US EVENT_ID` to a trace file right after each
event's synced commit (`--trace-stored`). From the traces:

  latency of an event = (last time any other node stored it)
                        - (time node 0 stored it)

so it spans announce, GET, the transfer, validation and the durable write
at every hop, and excludes only the injection itself. Bytes: every node's
`bytes_sent` (all peer traffic: frames of every type, handshakes, pings,
catch-up) divided by the number of events and nodes, next to the mean size
of an event's JSON; and EVENT frames alone, as "full copies".

Topology: node i dials i+1 and i+4 (mod 10) and nothing else (outbound
target 0: only configured peers are dialled, no peer exchange on top), so
every node has exactly 4 peers and an event crosses up to 3 hops.

usage: bench_gossip.py --pithd P --gen-events G [--events 3000] [--rate 200]
                       [--nodes 10] [--keep] [-- PITHD FLAGS...]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import Ctl, Node, finish, make_events, wait_for  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def inject(node, lines, rate, errors):
    """Sends lines at `rate` per second on one connection, reading the
    replies on another thread."""
    c = Ctl(node.sock, 300)
    done = []

    def reader():
        for _ in lines:
            r = c.recv()
            if not r.get("ok"):
                errors.append(r)
            done.append(r)

    th = threading.Thread(target=reader)
    th.start()
    t0 = time.time()
    for i, line in enumerate(lines):
        wait = t0 + i / rate - time.time()
        if wait > 0:
            time.sleep(wait)
        c.send(b"event " + line)
    th.join()
    c.close()
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithd", required=True)
    ap.add_argument("--gen-events", required=True)
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=200.0, help="events per second injected")
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("pithd_flags", nargs="*", help="extra flags for every pithd (after --)")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="pg-", dir="/tmp")
    nodes = []
    ok = False
    try:
        per = 6
        key, lines = make_events(args.gen_events, root, (args.events + per - 1) // per, per)
        lines = lines[:args.events]
        ev_size = statistics.mean(len(l) for l in lines)
        n = args.nodes
        for i in range(n):
            trace = os.path.join(root, "trace-%d.txt" % i)
            extra = ["--trust-key", key, "--outbound-target", "0", "--log-level", "warn",
                     "--trace-stored", trace] + args.pithd_flags
            nodes.append(Node(args.pithd, root, "n%d" % i, extra=extra).start())
        for i in range(n):
            for d in (1, 4):
                r = nodes[i].ctl("connect " + nodes[(i + d) % n].addr)
                assert r.get("ok"), r
        wait_for(lambda: all(sum(p["state"] == "ready" for p in x.status()["peers"]) >= 4
                             for x in nodes), 30, what="every node to have 4 peers")
        time.sleep(1)
        before = [x.status()["stats"] for x in nodes]
        print("# %d nodes up, 4 peers each; injecting %d events (mean %.0f bytes) at node 0, "
              "%.0f/s" % (n, len(lines), ev_size, args.rate), flush=True)
        errors = []
        took = inject(nodes[0], lines, args.rate, errors)
        assert not errors, errors[:3]
        wait_for(lambda: all(x.status()["store"]["events"] == len(lines) for x in nodes), 120,
                 what="every node to store every event")
        time.sleep(0.5)
        after = [x.status()["stats"] for x in nodes]
        for x in nodes:
            x.stop()

        stored = []
        for i in range(n):
            t = {}
            for line in open(os.path.join(root, "trace-%d.txt" % i)):
                us, eid = line.split()
                t[eid] = int(us)
            stored.append(t)
        lat_all, lat_each, lat_nb = [], [], []
        nbrs = sorted({d % n for d in (1, 4, -1, -4)} - {0})  # node 0's peers
        for eid, t0 in stored[0].items():
            others = [stored[k][eid] - t0 for k in range(1, n)]
            lat_all.append(max(others) / 1000.0)
            lat_each += [x / 1000.0 for x in others]
            lat_nb.append(max(stored[k][eid] - t0 for k in nbrs) / 1000.0)

        sent = [a["bytes_sent"] - b["bytes_sent"] for a, b in zip(after, before)]
        ev_bytes = [a["bytes_sent_by_type"].get("EVENT", 0) - b["bytes_sent_by_type"].get("EVENT", 0)
                    for a, b in zip(after, before)]
        by_type = {}
        for a, b in zip(after, before):
            for k, v in a["bytes_sent_by_type"].items():
                by_type[k] = by_type.get(k, 0) + v - b["bytes_sent_by_type"].get(k, 0)
        ne = len(lines)
        per_node = [s / ne for s in sent]
        res = {
            "nodes": n, "events": ne, "rate": args.rate, "inject_s": round(took, 2),
            "event_bytes_mean": round(ev_size, 1),
            "latency_all_ms": {"median": round(statistics.median(lat_all), 2),
                               "p90": round(pct(lat_all, 90), 2),
                               "p99": round(pct(lat_all, 99), 2),
                               "max": round(max(lat_all), 2)},
            "latency_each_node_ms": {"median": round(statistics.median(lat_each), 2),
                                     "p99": round(pct(lat_each, 99), 2)},
            # until the last of node 0's own peers stored it: what the lazy
            # announce delay (lazy_announce_ms) must exceed to rarely fire
            "latency_node0_peers_ms": {"median": round(statistics.median(lat_nb), 2),
                                       "p99": round(pct(lat_nb, 99), 2),
                                       "max": round(max(lat_nb), 2)},
            "node0_lazy": {k: after[0].get(k, 0) - before[0].get(k, 0)
                           for k in ("lazy_deferred", "lazy_sent")},
            "bytes_sent_per_event_per_node": {"mean": round(statistics.mean(per_node), 1),
                                              "max": round(max(per_node), 1)},
            "copies_sent_per_node": {"mean": round(statistics.mean(per_node) / ev_size, 3),
                                     "max": round(max(per_node) / ev_size, 3)},
            "event_frames_per_node": {"mean": round(statistics.mean(ev_bytes) / ne / ev_size, 3),
                                      "max": round(max(ev_bytes) / ne / ev_size, 3)},
            "bytes_sent_per_event_by_node": [round(x, 1) for x in per_node],
            "event_frames_by_node": [round(b / ne / ev_size, 2) for b in ev_bytes],
            "events_served_by_node": [a["events_served"] - b["events_served"]
                                      for a, b in zip(after, before)],
            "bytes_by_type_per_event": {k: round(v / ne, 1) for k, v in sorted(by_type.items())},
        }
        print(json.dumps(res, indent=2))
        ok = True
    finally:
        finish(nodes, root, ok, args.keep)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
