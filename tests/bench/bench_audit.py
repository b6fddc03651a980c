#!/usr/bin/env python3
"""Benchmark (issue 57): `pithctl audit` of two pithd mirrors of N records
(2 events each) that differ in D records (the second also trusts a
test-only key and holds one more event of D records signed with it).

One store is filled with `pithctl import`; the second node's store is a
copy of it (`cp -a`, no pithd running), and only the D differing events
are imported into the copy, so N records are generated and imported once.
The time measured is the audit's wall time end to end (keys, roots, the
descent over /api/root/range, a proof from each side and a state.json
from each side per difference), over HTTP on loopback. Each pithd's
state-root metrics (tree bytes, records, start-up build seconds) and RSS
are printed beside it.

usage: bench_audit.py --pithd D --pithctl C --gen-events G [--n N] [--diff D]
                      [--dir DIR] [--keep]
--dir: work there (made if absent; the N-record events file and key there
are reused if present, so a second run skips the generation); without
--keep, the stores are deleted after the run.
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
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from pithtest import Node  # noqa: E402

ROOT_METRICS = ("pith_state_root_records", "pith_state_root_tree_bytes",
                "pith_state_root_build_seconds")


def gen(gen_events, records, seed, key, out):
    """Generates RECORDS records of 2 events into OUT, unless OUT and KEY
    already exist (a file is written under a temporary name, then moved)."""
    if os.path.exists(out) and os.path.exists(key):
        return False
    subprocess.run([gen_events, "--records", str(records), "--per-record", "2", "--seed", str(seed),
                    "--key-out", key, out + ".part"], check=True, stdout=subprocess.DEVNULL)
    os.replace(out + ".part", out)
    return True


def import_events(pithctl, store, keys, path):
    cmd = [pithctl, "--store", store]
    for k in keys:
        cmd += ["--trust-key", k]
    subprocess.run(cmd + ["import", "--no-progress", path], check=True, stdout=subprocess.DEVNULL)


def root_metrics(base, pid):
    """The state root's gauges from BASE/metrics, and pithd's RSS in bytes."""
    text = urllib.request.urlopen(base + "/metrics", timeout=30).read().decode()
    m = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ROOT_METRICS:
            m[parts[0]] = float(parts[1])
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                m["rss_bytes"] = int(line.split()[1]) * 1024
    return m


def main():
    ap = argparse.ArgumentParser()
    for t in ("pithd", "pithctl", "gen-events"):
        ap.add_argument("--" + t, required=True)
    ap.add_argument("--n", type=int, default=100000)
    ap.add_argument("--diff", type=int, default=1000)
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if a.dir:
        os.makedirs(a.dir, exist_ok=True)
        root = a.dir
    else:
        root = tempfile.mkdtemp(prefix="bench_audit", dir="/tmp")
    nodes = []
    try:
        key, ev = os.path.join(root, "k1.pub"), os.path.join(root, "e1.jsonl")
        key2, ev2 = os.path.join(root, "k2.pub"), os.path.join(root, "e2.jsonl")
        t0 = time.time()
        made = gen(a.gen_events, a.n, 1, key, ev)
        gen(a.gen_events, a.diff, 2, key2, ev2)
        odd = os.path.join(root, "odd.jsonl")
        with open(ev2) as f, open(odd, "w") as o:
            for line in f:
                if json.loads(line)["event_type"] != "record_created":
                    o.write(line)
        print("# events %s in %.0f s" % ("generated" if made else "reused", time.time() - t0),
              flush=True)
        stores = {x: os.path.join(root, x, "store") for x in ("a", "b")}
        for x in ("a", "b"):
            shutil.rmtree(os.path.join(root, x), ignore_errors=True)
            os.makedirs(os.path.join(root, x))
        t0 = time.time()
        import_events(a.pithctl, stores["a"], [key], ev)
        print("# a: %d records imported in %.0f s" % (a.n, time.time() - t0), flush=True)
        t0 = time.time()
        subprocess.run(["cp", "-a", stores["a"], stores["b"]], check=True)
        import_events(a.pithctl, stores["b"], [key, key2], odd)
        print("# b: copied and %d events imported in %.0f s" % (a.diff, time.time() - t0),
              flush=True)
        for name, keys in (("a", [key]), ("b", [key, key2])):
            extra = ["--http", "127.0.0.1:0"]
            for k in keys:
                extra += ["--trust-key", k]
            t0 = time.time()
            n = Node(a.pithd, root, name, extra=extra)
            nodes.append(n.start(wait=1200))
            print("# %s: pithd up in %.1f s" % (name, time.time() - t0), flush=True)
        bases = ["http://" + n.status()["http"] for n in nodes]
        # The tree is built at start; wait until each root covers the N records.
        want = {"a": a.n, "b": a.n}
        mets = {}
        deadline = time.time() + 1200
        for n, base in zip(nodes, bases):
            while True:
                m = root_metrics(base, n.proc.pid)
                if m.get("pith_state_root_records", 0) >= want[n.name] or time.time() > deadline:
                    break
                time.sleep(0.5)
            mets[n.name] = m
            print("# %s: state root over %d records, tree %d bytes (%.1f a record), "
                  "built in %.2f s; pithd RSS %.0f MB" %
                  (n.name, m.get("pith_state_root_records", 0), m.get("pith_state_root_tree_bytes", 0),
                   m.get("pith_state_root_tree_bytes", 0) / max(1, m.get("pith_state_root_records", 1)),
                   m.get("pith_state_root_build_seconds", -1), m.get("rss_bytes", 0) / 1e6),
                  flush=True)
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
        ma = mets["a"]
        print("RESULT n=%d diff=%d wall_s=%.2f range=%d proof=%d state=%d found=%d "
              "tree_bytes=%d tree_records=%d build_s=%.2f rss_mb=%.0f" %
              (a.n, a.diff, wall, q["range"], q["proof"], q["state"], found,
               ma.get("pith_state_root_tree_bytes", 0), ma.get("pith_state_root_records", 0),
               ma.get("pith_state_root_build_seconds", -1), ma.get("rss_bytes", 0) / 1e6))
    finally:
        for n in nodes:
            if n.alive():
                n.stop()
        if not a.keep:
            for x in ("a", "b"):
                shutil.rmtree(os.path.join(root, x), ignore_errors=True)
            if not a.dir:
                shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
