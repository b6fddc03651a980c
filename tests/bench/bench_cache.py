#!/usr/bin/env python3
"""Benchmark (issue 55): readers served three ways, in one run -

  pithd      the node's own HTTP (tests/http_serve, the same server as pithd's)
  cache      nginx (deploy/nginx-cache.conf) caching in front of it
  static     nginx (deploy/nginx.conf) serving `pithctl export --site`
             (--state-only: a tree of the state.json.gz files only, the
             gzipped bytes the node answers, fetched through the cache,
             which warms it: a 1M-record store without its export, whose
             full tree takes 34 GB and longer than the run)

each with wrk (tests/bench/bench_http.lua: random records' state.json),
once with `Accept-Encoding: gzip` and once without: req/s, p50, p99, the
cache's hit ratio (1 - the requests that reached the node / wrk's), and
the CPU the node and nginx used (cores: CPU seconds over wall seconds).
The cache is warmed first with every record's state.json, gzipped and
not (not counted); then one scan of the cache by deploy/pith-cache-purge
(a dry run) is timed.

usage: bench_cache.py --build BUILD_DIR [--records N | --store DIR --key FILE...]
                      [--site DIR | --state-only] [--duration S] [--connections C]
                      [--max-age S] [--workers N|auto] [--rounds R] [--no-purge-scan]
                      [--no-static] [--gzip-only] [--keep]

--records N: a new store of N records (2 events each, gen_events), and its
export. --store/--key: an existing store and its trusted keys (--site: its
export, made if absent). --workers: both nginx's worker_processes (default
1; auto: one per core, as deployed). --state-only: gzip clients only.
--gzip-only: gzip clients only, the cache warmed with them only (a 1M
tree of its export: half the warm-up). Prints
one RESULT line per measure. Needs nginx and wrk. On demand only.

  python3 tests/bench/bench_cache.py --build build --store /tmp/s1m/store \
      --key /tmp/s1m/k --key /tmp/s1m/op.key --state-only --workers auto
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import site_test  # noqa: E402  (the static site's nginx set-up)
import bench_site  # noqa: E402  (fetch_states)
from nginx_util import CacheNginx  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pids):
    """User + system CPU seconds of the processes pids."""
    t = 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            t += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return t / TICK


def nginx_pids(pidfile):
    with open(pidfile) as f:
        master = int(f.read())
    out = [master]
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == master:
                        out.append(int(d))
            except OSError:
                pass
    return out


def origin_requests(port):
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
    n = 0
    for line in text.splitlines():
        m = re.match(r'pith_http_requests_total\{route="(\w+)",code="\w+"\} (\S+)', line)
        if m and m.group(1) != "metrics":
            n += float(m.group(2))
    return n


def warm(port, bodies, threads=8, plain=True):
    """Asks every body's state.json once gzipped and once not (plain
    False: gzipped only), on threads keeping their connections."""
    import http.client
    import threading

    def run(part):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for b in part:
            for h in ({"Accept-Encoding": "gzip"}, {}) if plain else ({"Accept-Encoding": "gzip"},):
                c.request("GET", "/pith/%s/state.json" % b, headers=h)
                c.getresponse().read()
        c.close()
    ts = [threading.Thread(target=run, args=(bodies[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def wrk(port, lst, duration, conns, gzip):
    cmd = ["wrk", "-t", "2", "-c", str(conns), "-d", "%ds" % duration, "--latency"]
    if gzip:
        cmd += ["-H", "Accept-Encoding: gzip"]
    cmd += ["-s", os.path.join(HERE, "bench_http.lua"), "http://127.0.0.1:%d" % port, "--",
            "state", lst]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    line = re.search(r"^RESULT (.*)$", out, re.M).group(1)
    return line, dict(kv.split("=", 1) for kv in line.split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--store")
    ap.add_argument("--key", action="append", default=[])
    ap.add_argument("--site")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--no-static", action="store_true", help="no export, no static nginx")
    ap.add_argument("--max-age", type=int, default=600,
                    help="the node's http_max_age: long enough that nothing expires in the run")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--workers", default="1", help="nginx's worker_processes, both")
    ap.add_argument("--rounds", type=int, default=1, help="the three, one after the other, R times")
    ap.add_argument("--no-purge-scan", action="store_true",
                    help="not the purge's timed scan (it reads every cache file)")
    ap.add_argument("--state-only", action="store_true",
                    help="no export: the static tree is the state.json.gz files fetched through "
                         "the cache; gzip clients only")
    ap.add_argument("--gzip-only", action="store_true",
                    help="gzip clients only (the warm-up too)")
    a = ap.parse_args()
    B = os.path.abspath(a.build)
    P = os.path.join(B, "node/cli/pithctl")
    root = tempfile.mkdtemp(prefix="bench_cache.")
    store, keys = a.store, a.key
    if not store:
        keys = [os.path.join(root, "k")]
        store, key = os.path.join(root, "store"), keys[0]
        ev = os.path.join(root, "ev.jsonl")
        subprocess.run([B + "/tests/gen_events", "--records", str(a.records), "--per-record", "2",
                        "--seed", "55", "--key-out", key, ev], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([P, "--store", store, "--trust-key", key, "import", ev], check=True,
                       stdout=subprocess.DEVNULL)
    recs = [r for r in subprocess.run([P, "--store", store, "records"], capture_output=True,
            text=True, check=True).stdout.split() if r.startswith("pith:")]
    lst = os.path.join(root, "bodies.txt")
    with open(lst, "w") as f:
        f.write("\n".join(r[-26:] for r in recs) + "\n")
    print("RESULT store records=%d" % len(recs), flush=True)
    sport, port = site_test.free_port(), site_test.free_port()
    base = "http://127.0.0.1:%d" % port
    site = a.site or os.path.join(root, "site")
    if not a.no_static and not a.state_only and not os.path.isdir(site):
        t0 = time.time()
        subprocess.run([P, "--store", store, "--json", "export", "--site", site, "--base-url", base],
                       check=True, capture_output=True)
        print("RESULT export s=%.1f" % (time.time() - t0), flush=True)
    srv = subprocess.Popen([B + "/tests/http_serve", "--store", store, "--listen",
                            "127.0.0.1:%d" % sport, "--public-url", base, "--no-submit",
                            "--max-age", str(a.max_age)] + [x for k in keys for x in ("--trust-key", k)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    site_test.wait_port(sport, srv)
    cdir = os.path.join(root, "cache-ngx")
    os.makedirs(cdir, exist_ok=True)
    cache = CacheNginx(shutil.which("nginx") or "/usr/sbin/nginx", cdir,
                       os.path.join(HERE, "../../deploy/nginx-cache.conf"), ["127.0.0.1:%d" % sport],
                       "tests/bench/bench_cache.py", a.workers)
    static = None
    try:
        print("# load before: %s" % open("/proc/loadavg").read().strip(), flush=True)
        # the cache warmed with every record's state.json, gzipped and not
        # (not counted): the steady state of a cache that has seen them all
        t0 = time.time()
        if a.state_only:
            shutil.rmtree(site, ignore_errors=True)
            bench_site.fetch_states(cache.port, lst, len(recs), site, root, gz=True)
        else:
            warm(cache.port, [r[-26:] for r in recs], plain=not a.gzip_only)
        print("# cache warmed in %.1f s" % (time.time() - t0), flush=True)
        if not a.no_static:
            sdir = os.path.join(root, "static-ngx")
            os.makedirs(sdir, exist_ok=True)
            static = site_test.Nginx(shutil.which("nginx") or "/usr/sbin/nginx", sdir,
                                     site_test.nginx_conf(sdir, os.path.join(HERE, "../../deploy/nginx.conf"),
                                                          site, port, a.workers))
            # its alias map: 6 keys a record, some 54 s and 1.7 GB to load at
            # 1,000,000 records (docs/site.md, "The alias map at a million records")
            t1 = time.time()
            site_test.wait_port(port, static.proc, timeout=600)
            print("# the static nginx listened after %.1f s" % (time.time() - t1), flush=True)
        targets = [("pithd", sport, None), ("cache", cache.port, os.path.join(cache.d, "nginx.pid"))]
        if static:
            targets.append(("static", port, os.path.join(sdir, "nginx.pid")))
        for rnd, gz in [(i + 1, g) for i in range(a.rounds)
                        for g in ((True,) if a.state_only or a.gzip_only else (True, False))]:
            for name, p, pidfile in targets:
                o0, c0 = origin_requests(sport), cpu_s([srv.pid])
                npids = nginx_pids(pidfile) if pidfile else []
                n0, t0 = cpu_s(npids), time.time()
                line, r = wrk(p, lst, a.duration, a.connections, gz)
                wall = time.time() - t0
                origin = origin_requests(sport) - o0  # /metrics itself is not counted
                hit = 1 - origin / max(int(r["requests"]), 1)
                node, ngx = (cpu_s([srv.pid]) - c0) / wall, (cpu_s(npids) - n0) / wall
                # on a shared machine the rate follows the neighbours; the
                # answers a CPU-second of the servers (node + nginx) less so
                print("RESULT %s round=%d gzip=%d %s hit_ratio=%.4f node_cpu_cores=%.2f "
                      "nginx_cpu_cores=%.2f answers_per_cpu_s=%.0f load=%s"
                      % (name, rnd, gz, line, hit if name == "cache" else float("nan"), node, ngx,
                         int(r["requests"]) / max((node + ngx) * wall, 1e-9),
                         open("/proc/loadavg").read().split()[0]), flush=True)
        if not a.no_purge_scan:
            # the purge's cost: one scan of the cache directory for the tags
            # of the last 100 changes (a dry run: nothing deleted)
            import urllib.request
            cur, last = "", ""
            while True:
                page = json.loads(urllib.request.urlopen(
                    "http://127.0.0.1:%d/api/changes?limit=10000%s" % (
                        sport, "&after=" + cur if cur else ""), timeout=60).read())
                if not page["changes"]:
                    break
                cur = last = page["next"]
            state = os.path.join(root, "purge.cursor")
            with open(state, "w") as f:
                f.write("%d\n" % max(int(last) - 100, 0))
            files = sum(len(fs) for _, _, fs in os.walk(cache.cache))
            t0 = time.time()
            out = subprocess.run([sys.executable, os.path.join(HERE, "../../deploy/pith-cache-purge"),
                                  "--feed", "http://127.0.0.1:%d/api/changes" % sport, "--cache-dir",
                                  cache.cache, "--state", state, "--dry-run"], check=True,
                                 capture_output=True, text=True).stdout.strip()
            print("RESULT purge_scan cache_files=%d s=%.2f files_per_s=%.0f (%s)" % (
                files, time.time() - t0, files / max(time.time() - t0, 1e-6), out), flush=True)
    finally:
        srv.terminate()
        srv.wait(10)
        cache.stop()
        if static:
            static.stop()
    if a.keep:
        print("# kept", root)
    else:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
