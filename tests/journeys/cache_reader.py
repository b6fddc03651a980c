#!/usr/bin/env python3
"""Journey: a reader behind nginx's cache in front of pithd (issue 55;
docs/deploy.md, "A cache in front"). What the reader does is curl:

    curl -sI http://CACHE/pith/BODY        # the second time: X-Cache-Status: HIT
    curl -s --compressed http://CACHE/pith/BODY/state.json
    curl -s -H 'If-None-Match: "…"' ...    # 304
    curl -s -z 'Last-Modified date' ...    # 304

and asserts what they see: pithd's Cache-Control and ETag through the
cache, a HIT the second time, the same bytes as the node's, 304s; after a
record changes, its new state within max-age (3 s here); after the
operator runs deploy/pith-cache-purge, fetched anew; with pithd stopped, the
pages they had still answer.

usage: cache_reader.py --pithd D --pithctl C --gen-events G --conf deploy/nginx-cache.conf
                       --purge deploy/pith-cache-purge [--out DIR] [--keep]
Exits 77 (skipped) without nginx or curl.
"""
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from http_node import mirror_node, run_test  # noqa: E402
from nginx_util import CacheNginx, find_nginx  # noqa: E402

MAX_AGE = 3


def curl(*a):
    """curl's -D headers (lower-case dict), its status and its body."""
    r = subprocess.run(["curl", "-s", "-D", "-", "--max-time", "10"] + list(a),
                       capture_output=True, timeout=30)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    h = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        h[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), h, body


def body(args, root, nodes):
    exe = find_nginx()
    if not exe or not shutil.which("curl"):
        print("SKIPPED: nginx or curl is not installed (apt-get install nginx curl; "
              "scripts/deps.sh)")
        sys.exit(77)
    n, base, bodies = mirror_node(args, root, nodes, hold_back=1,
                                  extra=["--http-max-age", str(MAX_AGE)])
    changed, late = n.held_back
    ngx = CacheNginx(exe, root, args.conf, [base.split("//", 1)[1]],
                     "tests/journeys/cache_reader.py")
    cache = "http://127.0.0.1:%d" % ngx.port
    try:
        page = "%s/pith/%s" % (cache, bodies[0])
        st, h1, _ = curl("-I", page)
        st2, h2, _ = curl("-I", page)
        assert st == st2 == 200 and h1["x-cache-status"] == "MISS" and \
            h2["x-cache-status"] == "HIT", (h1, h2)
        assert h2["cache-control"] == ("public, max-age=%d, stale-while-revalidate=%d, "
                                       "stale-if-error=86400" % (MAX_AGE, MAX_AGE)), h2
        assert h2["cache-tag"] == "pith-" + bodies[0], h2
        print("ok - curl -I twice: MISS, then HIT; pithd's Cache-Control and Cache-Tag through "
              "the cache", flush=True)

        state = "%s/pith/%s/state.json" % (cache, changed)
        _, hc, bc = curl("--compressed", state)
        _, hn, bn = curl("--compressed", "%s/pith/%s/state.json" % (base, changed))
        assert bc == bn and json.loads(bc)["state_sha256"], "the cache's bytes are the node's"
        _, hp, bp = curl(state)  # no Accept-Encoding: nginx unzips its gzip copy
        assert bp == bn and "content-encoding" not in hp, hp
        st, _, b = curl("-H", "If-None-Match: " + hc["etag"], "--compressed", state)
        assert st == 304 and not b, st
        time.sleep(1.1)  # a date once its second has ended (docs/http.md)
        _, hd, _ = curl("%s/pith/%s.json" % (cache, changed))
        st, _, _ = curl("-H", "If-Modified-Since: " + hd["last-modified"],
                        "%s/pith/%s.json" % (cache, changed))
        assert st == 304, st
        print("ok - the node's bytes, gzipped or not; 304 by ETag and by date", flush=True)

        old = json.loads(bc)["state_sha256"]
        t0 = time.time()
        r = n.submit(late)
        assert all(x.get("ok") for x in r), r
        seen = None
        while time.time() - t0 < MAX_AGE + 5:
            if json.loads(curl("--compressed", state)[2])["state_sha256"] != old:
                seen = time.time() - t0
                break
            time.sleep(0.2)
        assert seen is not None and seen <= MAX_AGE + 1.5, seen
        print("ok - the changed record's new state through the cache after %.1f s (max-age %d s)"
              % (seen, MAX_AGE), flush=True)

        st_file = os.path.join(root, "purge.cursor")
        cmd = [sys.executable, args.purge, "--feed", base + "/api/changes", "--cache-dir",
               ngx.cache, "--state", st_file]
        first = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        assert first.startswith("purged ") and "(%d records changed)" % len(bodies) in first, first
        st, h, _ = curl("--compressed", state)
        assert h["x-cache-status"] == "MISS", h  # purged: fetched anew
        _, h, _ = curl("--compressed", state)
        assert h["x-cache-status"] == "HIT", h
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        assert out.startswith("purged 0 files (0 records changed)"), out
        print("ok - pith-cache-purge: %s" % out.strip(), flush=True)

        assert curl("--compressed", page)[0] == 200  # (the purge emptied the cache of it)
        n.stop()
        time.sleep(MAX_AGE + 1)
        st, h, b = curl("--compressed", page)
        assert st == 200 and h["x-cache-status"] == "STALE" and b"<html" in b, (st, h)
        print("ok - pithd stopped: the page still answers from the cache (STALE)", flush=True)
    finally:
        ngx.stop()


def add_args(ap):
    ap.add_argument("--conf", required=True)
    ap.add_argument("--purge", required=True)
    ap.add_argument("--out")


if __name__ == "__main__":
    sys.exit(run_test("journey_cache_reader.", body, add_args=add_args))
