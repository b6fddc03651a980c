#!/usr/bin/env python3
"""Benchmark (issue 18): the HTTP views with and without gzip, in one run.

usage: bench_gzip.py --build DIR [--records N] [--duration S] [--rounds R]

A node (pithd --http) holding the registry's sample bundle and N generated
records (default 2,000, 2 events each); wrk (1 thread, 16 connections)
against /pith/{ID}/bundle.json, /pith/{ID}/state.json and the record page
/pith/{ID}, each with `Accept-Encoding: gzip` and without, alternating in R
rounds (default 3) of S seconds (default 5). Prints requests/s, p99 and
bytes per answer (median over the rounds).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from pithtest import Node, make_events  # noqa: E402

SAMPLE = "AR7B3DEVMOTSBRCCVXUCLYSRRE"


def wrk(url, gz, secs):
    cmd = ["wrk", "-t1", "-c16", "-d%ds" % secs, "--latency"]
    if gz:
        cmd += ["-H", "Accept-Encoding: gzip"]
    out = subprocess.run(cmd + [url], capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    p99 = float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
    tr = re.search(r"Transfer/sec:\s+([\d.]+)(B|KB|MB|GB)", out)
    bps = float(tr.group(1)) * {"B": 1, "KB": 1024, "MB": 1 << 20, "GB": 1 << 30}[tr.group(2)]
    return rps, p99, bps / rps if rps else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    root = tempfile.mkdtemp(prefix="bench-gzip-")
    key, lines = make_events(b + "/tests/gen_events", root, a.records, 2)
    n = Node(b + "/node/pithd", root, "n", extra=["--trust-key", key, "--http", "127.0.0.1:0"])
    n.start()
    try:
        n.submit(lines)
        with open(os.path.join(HERE, "..", "data", "bundle-AR7B3DEV.json"), "rb") as f:
            n.submit([f.read().replace(b"\n", b"")], kind="bundle")
        base = "http://" + n.status()["http"]
        time.sleep(1)
        paths = ["/pith/%s/bundle.json" % SAMPLE, "/pith/%s/state.json" % SAMPLE,
                 "/pith/%s" % SAMPLE]
        res = {}
        for r in range(a.rounds):
            for p in paths:
                for gz in ((False, True) if r % 2 == 0 else (True, False)):
                    res.setdefault((p, gz), []).append(wrk(base + p, gz, a.duration))
        print("| path | gzip | req/s | p99 ms | bytes/answer |")
        print("|---|---|---:|---:|---:|")
        for p in paths:
            for gz in (False, True):
                v = res[(p, gz)]
                print("| `%s` | %s | %.0f | %.2f | %.0f |" % (
                    p.replace(SAMPLE, "{ID}"), "yes" if gz else "no",
                    statistics.median(x[0] for x in v), statistics.median(x[1] for x in v),
                    statistics.median(x[2] for x in v)))
    finally:
        n.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
