#!/usr/bin/env python3
"""Benchmark (issue 57): `pithctl audit` of two pithd mirrors of N records
(2 events each) that differ in D records (the second also trusts a
test-only key and holds one more event of D records signed with it).

Both stores are filled with `pithctl import` before the nodes start; the
time measured is the audit's wall time end to end (keys, roots, the
descent over /api/root/range, a proof from each side and a state.json
from each side per difference), over HTTP on loopback.

usage: bench_audit.py --pithd D --pithctl C --gen-events G [--n N] [--diff D] [--keep]
The last line is machine-readable (RESULT key=value ...).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from pithtest import Node  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    for t in ("pithd", "pithctl", "gen-events"):
        ap.add_argument("--" + t, required=True)
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--diff", type=int, default=1000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench_audit", dir="/tmp")
    nodes = []
    try:
        key, ev = os.path.join(root, "k1.pub"), os.path.join(root, "e1.jsonl")
        key2, ev2 = os.path.join(root, "k2.pub"), os.path.join(root, "e2.jsonl")
        t0 = time.time()
        subprocess.run([a.gen_events, "--records", str(a.n), "--per-record", "2", "--key-out", key,
                        ev], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([a.gen_events, "--records", str(a.diff), "--per-record", "2", "--seed", "2",
                        "--key-out", key2, ev2], check=True, stdout=subprocess.DEVNULL)
        odd = os.path.join(root, "odd.jsonl")
        with open(ev2) as f, open(odd, "w") as o:
            for line in f:
                if json.loads(line)["event_type"] != "record_created":
                    o.write(line)
        print("# events generated in %.0f s" % (time.time() - t0), flush=True)
        for name, keys, files in (("a", [key], [ev]), ("b", [key, key2], [ev, odd])):
            store = os.path.join(root, name, "store")
            os.makedirs(os.path.join(root, name))
            cmd = [a.pithctl, "--store", store]
            for k in keys:
                cmd += ["--trust-key", k]
            t0 = time.time()
            for f in files:
                subprocess.run(cmd + ["import", "--no-progress", f], check=True,
                               stdout=subprocess.DEVNULL)
            print("# %s imported in %.0f s" % (name, time.time() - t0), flush=True)
            extra = ["--http", "127.0.0.1:0"]
            for k in keys:
                extra += ["--trust-key", k]
            n = Node(a.pithd, root, name, extra=extra)
            nodes.append(n.start(wait=600))
        bases = ["http://" + n.status()["http"] for n in nodes]
        load = open("/proc/loadavg").read().split()[0]
        t0 = time.time()
        r = subprocess.run([a.pithctl, "audit", "--json"] + bases, capture_output=True, text=True)
        wall = time.time() - t0
        load2 = open("/proc/loadavg").read().split()[0]
        assert r.returncode == 1, (r.returncode, r.stderr)
        j = json.loads(r.stdout)
        d = j["differences"][0]
        found = len(d["records"])
        assert found == a.diff, (found, a.diff)
        assert all(x["proofs_verified"] for x in d["records"])
        q = d["requests"]
        print("audit of two %d-record mirrors differing in %d records: %.1f s wall; "
              "%d range requests (%.1f a difference), %d proof, %d state; load %s -> %s" %
              (a.n, a.diff, wall, q["range"], q["range"] / a.diff, q["proof"], q["state"], load, load2))
        print("RESULT n=%d diff=%d wall_s=%.2f range=%d proof=%d state=%d found=%d" %
              (a.n, a.diff, wall, q["range"], q["proof"], q["state"], found))
    finally:
        for n in nodes:
            if n.alive():
                n.stop()
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
