#!/usr/bin/env python3
"""How fast a new node answers reads during its first catch-up (on demand,
not in the suite; docs/performance.md at 262f3c4, issue 17, session 29).

    tests/bench/catchup_reads.py BUILD N [--data DIR] [--per-sample K] [--config FILE]
                                  [--burst C]

Runs a pithd A on DIR/a-N-2 (the store bench_scale.sh leaves) and a fresh
pithd B dialling it with its HTTP side on, and every 5 s until B is
caught up and out of bulk mode (its end moves the side families,
docs/store.md "Bulk loading"), and once more after, asks B one at a time
for K random records of DIR/events-N-2.jsonl: their state.json, and the
resolve of their arXiv id. Prints per sample B's event count, whether its
side families are in use (its log), and for each kind of request the
answers that found the record (200) and that did not (404), with p50,
p99 and max latency in ms. While B catches up a read goes to the side
families: a record in their memtable is found by sorting a copy of it.
With --burst C, each sample then sends C resolves of random records at
once, each on a connection of its own, and prints how they were answered
(200, 404, 503) and the burst's wall time: more than the render pool
holds, which a node in its first catch-up answers 503 rather than have
its event loop read them (docs/http.md, "Threads: the render pool").
"""
import concurrent.futures
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import free_port  # noqa: E402


def status(pithctl, sock):
    try:
        out = subprocess.run([pithctl, "--json", "--node", sock, "status"], capture_output=True,
                             timeout=30).stdout
        return json.loads(out)
    except (subprocess.TimeoutExpired, ValueError):
        return None


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else 0.0


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.stderr.write(__doc__)
        sys.exit(2)
    build, n = args[0], int(args[1])
    data, k, conf, burst = "/work/scale-data", 100, [], 0
    rest = args[2:]
    while rest:
        if rest[0] == "--data":
            data = rest[1]
        elif rest[0] == "--per-sample":
            k = int(rest[1])
        elif rest[0] == "--burst":
            burst = int(rest[1])
        elif rest[0] == "--config":
            conf = ["--config", os.path.realpath(rest[1])]
        else:
            sys.exit("catchup_reads.py: unknown option %s" % rest[0])
        rest = rest[2:]
    pithd, pithctl = build + "/node/pithd", build + "/node/cli/pithctl"
    a, b, key = "%s/a-%d-2" % (data, n), data + "/reads-b", data + "/key.json"
    if not os.path.isdir(a + "/store"):
        sys.exit("catchup_reads.py: no store %s/store (run bench_scale.sh for %d first)" % (a, n))
    # the records and their arXiv ids, from the record_created events
    recs = []
    pat = re.compile(rb'"event_type":"record_created".*?"source":\{"id":"([^"]+)"'
                     rb'.*?"subject_pith_number":"([^"]+)"')
    with open("%s/events-%d-2.jsonl" % (data, n), "rb") as f:
        for line in f:
            m = pat.search(line)
            if m:
                recs.append((m.group(2).decode(), m.group(1).decode()))
    if not recs:
        sys.exit("catchup_reads.py: no record_created events with a pith number in the data")
    shutil.rmtree(b, ignore_errors=True)
    os.makedirs(b)
    pa, pb, ph = free_port(), free_port(), free_port()
    alog = open(data + "/reads-a.log", "w")
    blog_path = data + "/reads-b.log"
    blog = open(blog_path, "w")
    env = dict(os.environ, PITH_ROCKSDB_LOG="")
    pa_ = subprocess.Popen([pithd, "--data", a, "--listen", "127.0.0.1:%d" % pa, "--network-id",
                            "bench-sync", "--trust-key", key, "--control", a + "/reads.sock"],
                           stdout=alog, stderr=alog, env=env)
    pb_ = None
    try:
        while True:
            s = status(pithctl, a + "/reads.sock")
            if s and s.get("sync", {}).get("set") == "loaded":
                break
            time.sleep(1)
        pb_ = subprocess.Popen(
            [pithd] + conf + ["--data", b, "--listen", "127.0.0.1:%d" % pb, "--http",
                              "127.0.0.1:%d" % ph, "--network-id", "bench-sync", "--trust-key", key,
                              "--peer", "127.0.0.1:%d" % pa, "--control", b + "/reads.sock"],
            stdout=blog, stderr=blog, env=env)
        t0 = time.time()
        print("%6s %9s %4s | %-26s | %-26s | %-26s | %-26s" % (
            "s", "events", "side", "state.json 200: n p50 p99 max", "state.json 404",
            "resolve 200", "resolve 404"))
        after = 0
        while after < 2:
            time.sleep(5)
            if pb_.poll() is not None:
                sys.exit("catchup_reads.py: B exited (see %s)" % blog_path)
            s = status(pithctl, b + "/reads.sock")
            if not s:
                continue
            ev = s["store"]["events"]
            with open(blog_path) as f:
                log = f.read()
            side = "to side families" in log and "in place" not in log
            lat = {("s", 200): [], ("s", 404): [], ("r", 200): [], ("r", 404): []}
            c = http.client.HTTPConnection("127.0.0.1", ph, timeout=60)
            for pn, ax in random.sample(recs, min(k, len(recs))):
                for kind, path in (("s", "/pith/%s/state.json" % pn),
                                   ("r", "/api/pith-number/resolve?arxiv=%s&json=true" % ax)):
                    t = time.perf_counter()
                    c.request("GET", path)
                    r = c.getresponse()
                    r.read()
                    ms = (time.perf_counter() - t) * 1e3
                    lat.setdefault((kind, r.status), []).append(ms)
            c.close()

            def cell(x):
                return "%5d %6.2f %6.2f %6.1f" % (len(x), pct(x, .5), pct(x, .99), max(x or [0]))

            print("%6.0f %9d %4s | %-26s | %-26s | %-26s | %-26s" % (
                time.time() - t0, ev, "yes" if side else "no", cell(lat[("s", 200)]),
                cell(lat[("s", 404)]), cell(lat[("r", 200)]), cell(lat[("r", 404)])), flush=True)
            if burst:
                def one(ax):
                    bc = http.client.HTTPConnection("127.0.0.1", ph, timeout=120)
                    try:
                        bc.request("GET", "/api/pith-number/resolve?arxiv=%s&json=true" % ax)
                        r = bc.getresponse()
                        r.read()
                        return r.status, r.getheader("Retry-After")
                    finally:
                        bc.close()
                t = time.perf_counter()
                with concurrent.futures.ThreadPoolExecutor(burst) as ex:
                    got = list(ex.map(one, [ax for _, ax in random.sample(recs, min(burst, len(recs)))]))
                codes = {}
                for st_, ra in got:
                    codes[st_] = codes.get(st_, 0) + 1
                    if st_ == 503 and ra != "1":
                        sys.exit("catchup_reads.py: a 503 without Retry-After: 1")
                print("       burst of %d resolves in %.0f ms: %s" % (
                    burst, (time.perf_counter() - t) * 1e3,
                    ", ".join("%d x %d" % (n_, c_) for c_, n_ in sorted(codes.items()))), flush=True)
            done = (ev >= n and s["sync"]["state"] == "idle" and not s["sync"]["bulk"]
                    and not s["store"]["compacting"])
            after += done
    finally:
        for p in (pb_, pa_):
            if p:
                p.terminate()
        for p in (pb_, pa_):
            if p:
                p.wait()
        shutil.rmtree(b, ignore_errors=True)


if __name__ == "__main__":
    main()
