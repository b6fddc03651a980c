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
4. in one run, nginx (deploy/nginx.conf) and the node's HTTP
   (tests/http_serve) over the same records, one after the other, each
   with wrk (tests/bench/bench_http.lua, random state.json): req/s, p99;
   first the tree's state.json files and the store are read once, so that
   both serve from the page cache (--cold: not).
   (--no-serve: not this step, and then neither nginx nor wrk is needed).
   nginx runs with --nginx-workers (default auto: one per core, as
   deployed); --rounds R alternates nginx and pithd R times in the one run
   (the machine is shared: each pair is measured side by side) and prints
   each pair's ratio; --render-threads N and --loops N (serving loops,
   pithd's http_loops) are http_serve's.
--state-only (issue 56): no export; the tree nginx serves holds only the
   state.json files, fetched from http_serve (the bytes pithd answers), so
   that 1M records fit the disk (the full tree is some 84 GB there).
   --store DIR --trust-key FILE... uses a store already imported (no
   gen_events, no import).
Prints one RESULT line per measure, each with the load average
(/proc/loadavg: the machine is shared). Needs nginx and wrk. On demand only.

--dir DIR: work there and keep it; a store already in DIR/store (from an
earlier run with the same --records) is used as it is, the generation and
the import skipped (at 1,000,000 records they take longer than the
export); the site is exported afresh into DIR/site.

  python3 tests/bench/bench_site.py --build build --records 1000000 --no-serve --dir /tmp/s1m
"""
import argparse
import gzip
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
import http.client

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


def cpu_s(pid):
    """CPU seconds (user and system) of pid and its children that run
    (nginx's workers), from /proc."""
    pids = [pid] + [int(x) for x in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                                   text=True).stdout.split()]
    t = 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read().rsplit(")", 1)[1].split()
            t += int(st[11]) + int(st[12])
        except OSError:
            pass
    return t / os.sysconf("SC_CLK_TCK")


def wrk_cpu(pid, port, lst, duration, conns):
    """wrk's RESULT line, with the server's CPU per request (µs) added: on a
    shared machine the rate depends on the neighbours, the CPU a request
    costs much less."""
    c0 = cpu_s(pid)
    out = wrk(port, lst, duration, conns)
    c = cpu_s(pid) - c0
    n = int(re.search(r"requests=(\d+)", out).group(1))
    return out + " cpu_us_per_req=%.1f" % (c * 1e6 / max(n, 1))


def wrk(port, lst, duration, conns):
    out = subprocess.run(["wrk", "-t", "2", "-c", str(conns), "-d", "%ds" % duration, "--latency",
                          "-s", os.path.join(HERE, "bench_http.lua"), "http://127.0.0.1:%d" % port,
                          "--", "state", lst], check=True, capture_output=True, text=True).stdout
    return re.search(r"^RESULT .*$", out, re.M).group(0)


def fetch_states(port, lst, n, site, root, threads=2, conns=16, gz=False):
    """The state.json of every body in lst (n lines), as http_serve on port
    answers it, written where the export puts it (site/rec/XY/BODY.state.json):
    wrk fetches them (bench_fetch.lua), each is named by its pith number.
    gz: asked with Accept-Encoding: gzip, the gzipped bytes written as
    BODY.state.json.gz (what the export stores, deploy/nginx.conf's
    gzip_static; bench_cache.py fetches them through the cache, which
    warms it)."""
    pre = os.path.join(root, "fetched")
    hdr = ["-H", "Accept-Encoding: gzip"] if gz else []
    name = lambda b: os.path.join(site, "rec", b[:2], b + ".state.json" + (".gz" if gz else ""))  # noqa: E731
    w = subprocess.Popen(["wrk", "-t", str(threads), "-c", str(conns), "-d", "3600s"] + hdr + ["-s",
                          os.path.join(HERE, "bench_fetch.lua"), "http://127.0.0.1:%d" % port,
                          "--", lst, pre, str(threads)], stdout=subprocess.DEVNULL)
    while not all(os.path.exists("%s.%d.done" % (pre, i)) for i in range(1, threads + 1)):
        if w.poll() is not None:
            raise SystemExit("wrk (bench_fetch.lua) ended before fetching every state.json")
        time.sleep(0.2)
    w.kill()
    w.wait()
    seen = set()
    for i in range(1, threads + 1):
        with open("%s.%d" % (pre, i), "rb") as f:
            while True:
                line = f.readline()
                if not line:
                    break
                body = f.read(int(line))
                b = state_body(gzip.decompress(body) if gz else body)
                if b in seen:
                    continue
                seen.add(b)
                os.makedirs(os.path.dirname(name(b)), exist_ok=True)
                with open(name(b), "wb") as g:
                    g.write(body)
        os.unlink("%s.%d" % (pre, i))
        os.unlink("%s.%d.done" % (pre, i))
    # a thread counts its answers, not which: the few a duplicate of its
    # last line overtook (another connection) are fetched here
    with open(lst) as f:
        rest = [b for b in f.read().split() if b not in seen]
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for b in rest:
        c.request("GET", "/pith/%s/state.json" % b, headers={"Accept-Encoding": "gzip"} if gz else {})
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise SystemExit("state.json of %s: %d" % (b, r.status))
        os.makedirs(os.path.dirname(name(b)), exist_ok=True)
        with open(name(b), "wb") as g:
            g.write(body)
        seen.add(b)
    if len(seen) != n:
        raise SystemExit("fetched %d state.json of %d" % (len(seen), n))
    os.makedirs(os.path.join(site, ".pith-site"), exist_ok=True)
    open(os.path.join(site, ".pith-site", "aliases.map"), "a").close()


def state_body(body):
    """The 26-character body of the pith number a state.json names."""
    return re.search(rb'"pith_number":"pith:[0-9]{4}:([A-Z2-7]{26})"', body).group(1).decode()


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
    ap.add_argument("--incremental-only", action="store_true",
                    help="with --dir: no full export, the tree DIR/site kept; only K changes "
                         "and the incremental export")
    ap.add_argument("--cold", action="store_true",
                    help="serve without reading the tree's state.json files and the store first")
    ap.add_argument("--state-only", action="store_true",
                    help="no export: nginx serves the state.json files fetched from pithd")
    ap.add_argument("--store", help="a store already imported (with --trust-key)")
    ap.add_argument("--trust-key", action="append", default=[])
    ap.add_argument("--nginx-workers", default="auto")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--render-threads", type=int)
    ap.add_argument("--cache-mb", type=int, help="http_serve's store block cache")
    ap.add_argument("--loops", type=int, help="http_serve's serving loops (pithd's http_loops)")
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
    port, sport = site_test.free_port(), site_test.free_port()
    base = "http://127.0.0.1:%d" % port
    if a.store:
        a.state_only = True  # no signing key of the bench's own for the changes
        store = os.path.abspath(a.store)
        trust = [x for k in a.trust_key for x in ("--trust-key", os.path.abspath(k))]
    elif not os.path.exists(os.path.join(store, "CURRENT")):
        subprocess.run([B + "/tests/gen_events", "--records", str(a.records), "--per-record",
                        str(a.per_record), "--seed", "7", "--key-out", key, ev], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([B + "/tests/gen_bundles", "--seed", "7", ev, bu], check=True,
                       capture_output=True)
        subprocess.run([P, "keygen", "--key-id", "bench-op", op], check=True,
                       stdout=subprocess.DEVNULL)
        trust = ["--trust-key", key, "--trust-key", op]
        t, _ = timed([P, "--store", store] + trust + ["import", "--no-progress", ev, bu])
        print("RESULT import records=%d s=%.1f load=%s" % (a.records, t, load()), flush=True)
        for f in (ev, bu):  # the store has them; at 1M they are 9 GB
            os.unlink(f)
    else:
        trust = ["--trust-key", key, "--trust-key", op]
        print("# the store in %s is used as it is" % store, flush=True)
    if a.incremental_only and not (a.dir and os.path.isdir(site)):
        raise SystemExit("bench_site.py: --incremental-only needs --dir DIR with DIR/site from an earlier run")
    if not a.incremental_only:
        shutil.rmtree(site, ignore_errors=True)
    recs = [r for r in subprocess.run([P, "--store", store, "records"], capture_output=True,
            text=True, check=True).stdout.split() if r.startswith("pith:")]
    if not a.state_only:
        export(a, P, store, site, base, trust, recs, root)
    if a.no_serve:
        if a.keep:
            print("# kept", root)
        else:
            shutil.rmtree(root, ignore_errors=True)
        return
    lst = os.path.join(root, "bodies.txt")
    bodies = [r[-26:] for r in recs]
    with open(lst, "w") as f:
        f.write("\n".join(bodies) + "\n")
    rt = ["--render-threads", str(a.render_threads)] if a.render_threads is not None else []
    rt += ["--cache-mb", str(a.cache_mb)] if a.cache_mb else []
    rt += ["--loops", str(a.loops)] if a.loops is not None else []
    srv = subprocess.Popen([B + "/tests/http_serve", "--store", store, "--listen",
                            "127.0.0.1:%d" % sport, "--public-url", base, "--no-submit"] + trust + rt,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ngx = None
    try:
        site_test.wait_port(sport, srv)
        if a.state_only:
            t0 = time.time()
            fetch_states(sport, lst, len(bodies), site, root)
            print("# state.json of %d records fetched from http_serve in %.1f s"
                  % (len(bodies), time.time() - t0), flush=True)
        ngx = site_test.Nginx(shutil.which("nginx") or "/usr/sbin/nginx", root,
                              site_test.nginx_conf(root, os.path.join(HERE, "../../deploy/nginx.conf"),
                                                   site, port, a.nginx_workers))
        site_test.wait_port(port, ngx.proc)
        # both servers with their files in the page cache: the tree's
        # state.json files (what wrk asks for) and the store's files, read
        # once; right after the export the tree's first-written files have
        # been pushed out by the later ones, which measured the disk
        # (docs/performance.md at 262f3c4, issue 19)
        if not a.cold:
            t0 = time.time()
            for r in bodies:
                for rel in ("rec/%s/%s.state.json" % (r[:2], r), "rec/%s/%s.state.json.gz" % (r[:2], r)):
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
        # a short warm-up of each, then the rounds, alternating
        wrk(port, lst, 2, a.connections)
        wrk(sport, lst, 2, a.connections)
        for i in range(a.rounds):
            la = load()
            n = wrk_cpu(ngx.proc.pid, port, lst, a.duration, a.connections)
            p = wrk_cpu(srv.pid, sport, lst, a.duration, a.connections)
            print("RESULT nginx round=%d workers=%s load=%s %s" % (i + 1, a.nginx_workers, la, n),
                  flush=True)
            print("RESULT pithd round=%d loops=%s %s" % (i + 1, a.loops or 0, p), flush=True)
            rps = [float(re.search(r"rps=(\d+)", x).group(1)) for x in (n, p)]
            p99 = [float(re.search(r"p99_ms=([0-9.]+)", x).group(1)) for x in (n, p)]
            cpu = [float(re.search(r"cpu_us_per_req=([0-9.]+)", x).group(1)) for x in (n, p)]
            print("RESULT ratio round=%d records=%d rps_pithd_over_nginx=%.3f "
                  "p99_pithd_over_nginx=%.3f cpu_per_req_pithd_over_nginx=%.2f"
                  % (i + 1, len(bodies), rps[1] / rps[0], p99[1] / p99[0],
                     cpu[1] / max(cpu[0], 1e-9)), flush=True)
    finally:
        srv.terminate()
        srv.wait(10)
        if ngx:
            ngx.stop()
    if a.keep:
        print("# kept", root)
    else:
        shutil.rmtree(root, ignore_errors=True)


def export(a, P, store, site, base, trust, recs, root):
    """Steps 2 and 3: the full export, then K records changed and the
    incremental export."""
    op = os.path.join(root, "op.key")
    jobs = ["--jobs", str(a.jobs)] if a.jobs else []
    if a.incremental_only:
        return changes(a, P, store, site, trust, recs, root, jobs)
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
    changes(a, P, store, site, trust, recs, root, jobs)


def changes(a, P, store, site, trust, recs, root, jobs):
    """Step 3: K records get a new graph_snapshot (a new title: their list
    facts change, their aliases do not), imported; the incremental export."""
    op = os.path.join(root, "op.key")
    evs = []
    # another sample each --incremental-only rerun on one tree
    rnd = random.Random(int(time.time()) if a.incremental_only else 3)
    for i, r in enumerate(rnd.sample(recs, a.changed)):
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


if __name__ == "__main__":
    main()
