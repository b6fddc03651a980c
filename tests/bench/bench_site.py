#!/usr/bin/env python3
"""Benchmark (issue 19): the mirror as a static site.

usage: bench_site.py --build BUILD_DIR [--records N] [--changed K] [--per-record E]
                     [--jobs J] [--duration S] [--connections C] [--no-serve] [--keep]
                     [--cold] [--dir DIR]

1. gen_events N records (E events each, default 2 as the registry's:
   record_created and graph_snapshot) and gen_bundles' bundles, imported;
2. full `pithctl export --site --jobs J` (default: pithctl's, the online
   cores): wall time, records/s, files/s, bytes written and disk bytes,
   and per record: files, directories, disk blocks (st_blocks, what
   `du --block-size=1` counts; 4 KB blocks on ext4) and apparent bytes
   (issue 55: the goal at 1,000,000 records is at most 6 files and 24 KB
   of blocks a record, the full export within 15 minutes);
3. K of the records get a new signed event each (imported), then the
   incremental export: wall time, files written (goal, issue 55: 1,000
   changed records at 1,000,000 in under 5 s);
4. in one run, nginx (deploy/nginx.conf, 1 worker) and the node's HTTP
   (tests/http_serve) over the same records, one after the other, each
   with wrk (tests/bench/bench_http.lua, random state.json): req/s, p99;
   first the tree's state.json files and the store are read once, so that
   both serve from the page cache (--cold: not).
   (--no-serve: not this step, and then neither nginx nor wrk is needed).
Prints one RESULT line per measure, each with the load average
(/proc/loadavg: the machine is shared). Needs nginx and wrk. On demand only.

--dir DIR: work there and keep it; a store already in DIR/store (from an
earlier run with the same --records) is used as it is, the generation and
the import skipped (at 1,000,000 records they take longer than the
export); the site is exported afresh into DIR/site.

  python3 tests/bench/bench_site.py --build build --records 1000000 --no-serve --dir /tmp/s1m
"""
import argparse
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import site_test  # noqa: E402  (nginx set-up shared with the test)


def cpu():
    """CPU seconds (user + system) of the children waited for so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd, **kw):
    """Wall seconds and stdout of cmd; timed.cpu: its CPU seconds (on a
    shared machine, what the run cost whatever the neighbours took)."""
    t0, c0 = time.time(), cpu()
    r = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)
    timed.cpu = cpu() - c0
    return time.time() - t0, r.stdout


def wrk(port, lst, duration, conns):
    out = subprocess.run(["wrk", "-t", "2", "-c", str(conns), "-d", "%ds" % duration, "--latency",
                          "-s", os.path.join(HERE, "bench_http.lua"), "http://127.0.0.1:%d" % port,
                          "--", "state", lst], check=True, capture_output=True, text=True).stdout
    return re.search(r"^RESULT .*$", out, re.M).group(0)


def tree_size(d):
    """Disk bytes (st_blocks x 512 of every file and directory, as
    `du --block-size=1` counts them; a hard link once), apparent bytes
    (st_size, the directories too), files (names), inodes of files, and
    directories: one `find` over the tree (at a million records, 8 million
    files)."""
    blocks = apparent = files = dirs = 0
    inodes = set()
    p = subprocess.Popen(["find", d, "-printf", "%y %b %s %i\\n"], stdout=subprocess.PIPE,
                         text=True)
    for line in p.stdout:
        y, b, sz, ino = line.split()
        if y == "d":
            dirs += 1
        elif y == "f":
            files += 1
            if ino in inodes:
                continue
            inodes.add(ino)
        blocks += int(b) * 512
        apparent += int(sz)
    p.wait()
    return blocks, apparent, files, len(inodes), dirs


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--changed", type=int, default=1000)
    ap.add_argument("--per-record", type=int, default=2,
                    help="events per record (2: record_created + graph_snapshot)")
    ap.add_argument("--jobs", type=int, help="export --jobs (default: pithctl's)")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--no-serve", action="store_true", help="exports only: no nginx, no wrk")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--dir", help="work in DIR and keep it; a store already there is reused")
    ap.add_argument("--cold", action="store_true",
                    help="serve without reading the tree's state.json files and the store first")
    a = ap.parse_args()
    B = os.path.abspath(a.build)
    P = os.path.join(B, "node/cli/pithctl")
    if a.dir:
        root = os.path.abspath(a.dir)
        os.makedirs(root, exist_ok=True)
        a.keep = True
    else:
        root = tempfile.mkdtemp(prefix="bench_site.")
    store, site = os.path.join(root, "store"), os.path.join(root, "site")
    ev, bu, key, op = (os.path.join(root, n) for n in ("ev.jsonl", "bu.jsonl", "k", "op.key"))
    trust = ["--trust-key", key, "--trust-key", op]
    if not os.path.exists(os.path.join(store, "CURRENT")):
        subprocess.run([B + "/tests/gen_events", "--records", str(a.records), "--per-record",
                        str(a.per_record), "--seed", "7", "--key-out", key, ev], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([B + "/tests/gen_bundles", "--seed", "7", ev, bu], check=True,
                       capture_output=True)
        subprocess.run([P, "keygen", "--key-id", "bench-op", op], check=True,
                       stdout=subprocess.DEVNULL)
        t, _ = timed([P, "--store", store] + trust + ["import", "--no-progress", ev, bu])
        print("RESULT import records=%d s=%.1f load=%s" % (a.records, t, load()), flush=True)
        for f in (ev, bu):  # the store has them; at 1M they are 9 GB
            os.unlink(f)
    else:
        print("# the store in %s is used as it is" % store, flush=True)
    shutil.rmtree(site, ignore_errors=True)
    port, sport = site_test.free_port(), site_test.free_port()
    base = "http://127.0.0.1:%d" % port
    jobs = ["--jobs", str(a.jobs)] if a.jobs else []
    t, out = timed([P, "--store", store, "--json", "export", "--site", site, "--base-url", base]
                   + jobs)
    s = json.loads(out)
    du, apparent, files, inodes, dirs = tree_size(site)
    n = max(s["records"], 1)
    print("RESULT full_export records=%d per_record=%d jobs=%s s=%.1f records_per_s=%.0f "
          "files=%d files_per_s=%.0f bytes_written=%d disk_bytes=%d apparent_bytes=%d "
          "dirs=%d files_per_record=%.2f inodes_per_record=%.2f bytes_written_per_record=%.0f "
          "disk_bytes_per_record=%.0f apparent_bytes_per_record=%.0f cpu_s=%.1f load=%s"
          % (s["records"], a.per_record, a.jobs or "default", t, s["records"] / t, s["written"],
             s["written"] / t, s["bytes"], du, apparent, dirs, files / n,
             inodes / n, s["bytes"] / n, du / n, apparent / n, timed.cpu, load()), flush=True)
    recs = [r for r in subprocess.run([P, "--store", store, "records"], capture_output=True,
            text=True, check=True).stdout.split() if r.startswith("pith:")]
    evs = []
    for i, r in enumerate(random.Random(3).sample(recs, a.changed)):
        evs.append(json.dumps({"event_type": "graph_snapshot", "subject_pith_number": r,
                               "target": "graph", "created_at": "2031-01-01T00:00:00Z",
                               "payload": {"graph_snapshot": {"paper": {
                                   "title": "c%d at %d" % (i, time.time())}}}}))
    signed = os.path.join(root, "changed.jsonl")
    with open(signed, "w") as f:
        for e in evs:
            f.write(subprocess.run([P, "sign", "--key", op, "-"], input=e, capture_output=True,
                                   text=True, check=True).stdout.strip() + "\n")
    subprocess.run([P, "--store", store] + trust + ["import", signed], check=True,
                   capture_output=True)
    t, out = timed([P, "--store", store, "--json", "export", "--site", site] + jobs)
    s = json.loads(out)
    print("RESULT incremental_export changed=%d s=%.2f records=%d written=%d unchanged=%d "
          "deleted=%d pages=%d bytes=%d cpu_s=%.2f load=%s"
          % (a.changed, t, s["records"], s["written"], s["unchanged"], s["deleted"], s["pages"],
             s["bytes"], timed.cpu, load()),
          flush=True)
    if a.no_serve:
        if a.keep:
            print("# kept", root)
        else:
            shutil.rmtree(root, ignore_errors=True)
        return
    lst = os.path.join(root, "bodies.txt")
    with open(lst, "w") as f:
        f.write("\n".join(r[-26:] for r in recs) + "\n")
    ngx = site_test.Nginx(shutil.which("nginx") or "/usr/sbin/nginx", root,
                          site_test.nginx_conf(root, os.path.join(HERE, "../../deploy/nginx.conf"),
                                               site, port))
    srv = subprocess.Popen([B + "/tests/http_serve", "--store", store, "--listen",
                            "127.0.0.1:%d" % sport, "--public-url", base, "--no-submit"] + trust,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        site_test.wait_port(port, ngx.proc)
        site_test.wait_port(sport, srv)
        # both servers with their files in the page cache: the tree's
        # state.json files (what wrk asks for) and the store's files, read
        # once; right after the export the tree's first-written files have
        # been pushed out by the later ones, which measured the disk
        # (docs/performance.md at 262f3c4, issue 19)
        if not a.cold:
            t0 = time.time()
            for r in recs:
                b = r[-26:]
                for rel in ("rec/%s/%s.state.json.gz" % (b[:2], b),):
                    try:
                        with open(os.path.join(site, rel), "rb") as f:
                            f.read()
                    except OSError:
                        pass
            for dp, _, fs in os.walk(store):
                for fn in fs:
                    with open(os.path.join(dp, fn), "rb") as f:
                        while f.read(1 << 20):
                            pass
            print("# page cache warmed in %.1f s (--cold: not)" % (time.time() - t0), flush=True)
        print("RESULT nginx " + wrk(port, lst, a.duration, a.connections), flush=True)
        print("RESULT pithd " + wrk(sport, lst, a.duration, a.connections), flush=True)
    finally:
        srv.terminate()
        srv.wait(10)
        ngx.stop()
    if a.keep:
        print("# kept", root)
    else:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
