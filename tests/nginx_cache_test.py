#!/usr/bin/env python3
"""nginx as a caching reverse proxy in front of two pithd (issue 55):
deploy/nginx-cache.conf, adapted to a temporary prefix (cache directory,
the upstream's servers, the listen line), with real nginx.

  usage: nginx_cache_test.py --pithd D --pithctl C --gen-events G
                             --conf deploy/nginx-cache.conf
                             --purge deploy/pith-cache-purge [--keep]

Two nodes hold the same 40 records (2 events each; the second event of
three of them held back, to change them later), http_max_age 5. Cases:
nginx -t passes without a warning; the caching headers pass through
(Cache-Control, Cache-Tag, the ETag), the gzip and plain variants and
the HTML and JSON-LD ones are kept apart; after one warm-up pass, a second
pass over every URL is answered from the cache (hit ratio, and no request
reached either node); a client's If-None-Match and If-Modified-Since are
answered 304 by nginx; an expired entry is revalidated with pithd, which
answers 304; a changed record is seen through the cache within its
max-age; deploy/pith-cache-purge, reading the change feed, deletes exactly
the changed record's entries (under every URL it was asked by) and the
lists', and no other record's; with one node stopped the other answers,
with both stopped the cache answers what it holds, stale.

Exit 0 on success, 1 on a failure, 77 (skipped) without nginx.
"""
import http.client
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nginx_util import CacheNginx, find_nginx, tagged_files  # noqa: E402
from pithtest import Node, Tap, make_events, run_test, wait_for  # noqa: E402

MAX_AGE = 5


def node_requests(base_ports, route=None, code=None):
    """pith_http_requests_total summed over the nodes (all routes but
    metrics, or one route; one code if given)."""
    total = 0
    for p in base_ports:
        c = http.client.HTTPConnection("127.0.0.1", p, timeout=10)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        for line in text.splitlines():
            m = re.match(r'pith_http_requests_total\{route="(\w+)",code="(\w+)"\} (\S+)', line)
            if not m or m.group(1) == "metrics":
                continue
            if (route is None or m.group(1) == route) and (code is None or m.group(2) == code):
                total += float(m.group(3))
    return total


def body(args, root, nodes):
    exe = find_nginx()
    if not exe:
        print("1..0 # SKIP nginx is not installed (apt-get install -y nginx; scripts/deps.sh)")
        sys.exit(77)
    key, lines = make_events(args.gen_events, root, 40, 2)
    # records in generation order, 2 lines each; the 2nd event of the
    # first three is held back: the records a test changes
    held = {i: lines[2 * i + 1] for i in range(3)}
    load = [l for j, l in enumerate(lines) if not (j % 2 == 1 and j // 2 in held)]
    bodies = []
    for i in range(40):
        m = re.search(rb'"subject_pith_number":"(pith:\d{4}:[A-Z2-7]{26})"', lines[2 * i])
        bodies.append(m.group(1).decode()[-26:])
    ns = []
    for name in ("a", "b"):
        # behind one cache, both nodes go by its URL and one name: the same
        # bytes from either
        n = Node(args.pithd, root, name, extra=["--trust-key", key, "--http", "127.0.0.1:0",
                                                "--http-max-age", str(MAX_AGE),
                                                "--http-public-url", "http://mirror.example",
                                                "--mirror-name", "one mirror"])
        nodes.append(n.start())
        bad = [x for x in n.submit(load) if not x.get("ok")]
        assert not bad, bad[:3]
        n.http = n.status()["http"]
        ns.append(n)
    ports = [int(n.http.rsplit(":", 1)[1]) for n in ns]
    ngx = CacheNginx(exe, root, args.conf, [n.http for n in ns], "tests/nginx_cache_test.py")
    t = Tap()
    try:
        cases(t, args, root, ns, ports, ngx, bodies, held)
    finally:
        ngx.stop()
    print("1..%d" % t.n)
    assert t.failed == 0, "%d of %d cases failed" % (t.failed, t.n)


def change(ns, line):
    for n in ns:
        r = n.submit([line])
        assert r[0].get("ok"), r


def cases(t, args, root, ns, ports, ngx, bodies, held):
    @t.case("deploy/nginx-cache.conf passes nginx -t without a warning")
    def _():
        assert not ngx.warnings, ngx.warnings

    X, Y, W = bodies[0], bodies[1], bodies[2]  # changed later
    Z = bodies[3]                              # never changed
    gz = {"Accept-Encoding": "gzip"}

    @t.case("through the cache: pithd's Cache-Control, Cache-Tag and ETag; a second GET is a HIT")
    def _():
        st, h, b = ngx.get("/pith/%s/state.json" % Z, gz)
        _, nh, _ = ngx.get("/pith/%s/state.json" % Z, gz, port=ports[0])
        assert st == 200 and h.get("x-cache-status") == "MISS", (st, h)
        assert h["cache-control"] == ("public, max-age=%d, stale-while-revalidate=%d, "
                                      "stale-if-error=86400" % (MAX_AGE, MAX_AGE)), h
        assert h["cache-tag"] == "pith-" + Z and h["etag"] == nh["etag"], (h, nh)
        assert h.get("content-encoding") == "gzip", h
        st, h2, _ = ngx.get("/pith/%s/state.json" % Z, gz)
        assert st == 200 and h2["x-cache-status"] == "HIT", h2

    @t.case("gzip and plain clients, HTML and JSON-LD clients: each gets its own bytes")
    def _():
        u = "/pith/%s" % Z
        for hdrs in ({}, gz, {"Accept": "application/ld+json"},
                     {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}):
            ngx.get(u, hdrs)  # warm
        for hdrs in ({}, gz, {"Accept": "application/ld+json"},
                     {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}):
            st, h, b = ngx.get(u, hdrs)
            _, nh, nb = ngx.get(u, hdrs, port=ports[0])
            assert st == 200 and h["x-cache-status"] == "HIT", (hdrs, h)
            assert b == nb and h.get("content-encoding") == nh.get("content-encoding"), (
                hdrs, len(b), len(nb), h.get("content-encoding"), nh.get("content-encoding"), h)
            assert h["content-type"] == nh["content-type"], (hdrs, h, nh)
            if "Accept-Encoding" not in hdrs and nh.get("etag"):
                # unzipped from the gzip copy: not under the gzip bytes' strong tag
                assert h.get("etag", "").startswith("W/") or h.get("etag") == nh["etag"], (h, nh)

    urls = []
    for bd in bodies[3:33]:
        urls += ["/pith/%s" % bd, "/pith/%s.json" % bd, "/pith/%s/state.json" % bd,
                 "/pith/%s.bib" % bd, "/api/pith-number/%s/events.json" % bd,
                 "/api/pith-number/%s/graph.json" % bd, "/pith/pith:%s" % bd[:8]]
    urls += ["/", "/pith/", "/api/records", "/pith-mirrors.json", "/pith-signing-key.json"]

    @t.case("after one warm-up pass over %d URLs, the next pass is answered from the cache" % len(urls))
    def _():
        for u in urls:
            ngx.get(u, gz)
        before = node_requests(ports)
        t0 = time.time()
        hits = sum(ngx.get(u, gz)[1].get("x-cache-status") == "HIT" for u in urls)
        took = time.time() - t0
        reached = node_requests(ports) - before
        print("# hit ratio after warm-up %d/%d = %.3f (pass %.2f s); requests reaching the "
              "nodes %d" % (hits, len(urls), hits / len(urls), took, reached))
        if took < MAX_AGE - 1:  # a pass longer than max-age revalidates, rightly
            assert hits == len(urls) and reached == 0, (hits, reached)
        else:
            assert hits >= 0.9 * len(urls), (hits, took)

    @t.case("a client's If-None-Match and If-Modified-Since: 304 from nginx, pithd not asked")
    def _():
        u = "/pith/%s/" % bodies[6]
        # pithd dates a document only once the second of its date has
        # ended (docs/http.md, "Last-Modified"): the first answer after a
        # quiet spell may have no date, so the nodes are asked first
        for p in ports:
            print("# node's first answer: Last-Modified %s" % ngx.get(u, gz, port=p)[1].get(
                "last-modified"))
        time.sleep(1.1)
        _, h, _ = ngx.get(u, gz)
        assert h["x-cache-status"] == "MISS" and "last-modified" in h, h
        before = node_requests(ports)
        st1, h1, b1 = ngx.get(u, dict(gz, **{"If-None-Match": h["etag"]}))
        st2, h2, b2 = ngx.get(u, dict(gz, **{"If-Modified-Since": h["last-modified"]}))
        assert st1 == 304 and not b1 and st2 == 304 and not b2, (st1, st2)
        assert node_requests(ports) - before == 0

    @t.case("an expired entry is revalidated: nginx asks pithd, pithd answers 304")
    def _():
        u = "/pith/%s/state.json" % bodies[4]
        _, h, b = ngx.get(u, gz)
        time.sleep(MAX_AGE + 1)
        before = node_requests(ports, "state", "304")
        st, h2, b2 = ngx.get(u, gz)
        assert st == 200 and b2 == b and h2["etag"] == h["etag"], (st, h2)
        assert h2["x-cache-status"] in ("REVALIDATED", "STALE", "UPDATING"), h2
        wait_for(lambda: node_requests(ports, "state", "304") > before, 10,
                 what="a 304 from a node to nginx's revalidation")
        st, h3, _ = ngx.get(u, gz)
        assert h3["x-cache-status"] == "HIT", h3

    @t.case("a changed record is seen through the cache within its max-age (%d s)" % MAX_AGE)
    def _():
        u = "/pith/%s/state.json" % X
        _, h, _ = ngx.get(u, gz)
        _, h, _ = ngx.get(u, gz)
        assert h["x-cache-status"] == "HIT", h
        t0 = time.time()
        change(ns, held[0])
        new = ngx.get(u, gz, port=ports[0])[1]["etag"]
        assert new != h["etag"]
        seen = None
        while time.time() - t0 < MAX_AGE + 5:
            if ngx.get(u, gz)[1]["etag"] == new:
                seen = time.time() - t0
                break
            time.sleep(0.2)
        print("# the change seen through the cache after %.2f s (max-age %d s)" % (
            seen or -1, MAX_AGE))
        # nginx counts freshness in whole seconds (up to 1 s more), and the
        # first request after it is answered stale while the entry updates
        assert seen is not None and seen <= MAX_AGE + 1.5, seen

    @t.case("deploy/pith-cache-purge empties exactly the changed record's entries (and the lists')")
    def _():
        state = os.path.join(root, "purge.cursor")
        feed = "http://%s/api/changes" % ns[0].http
        cmd = [sys.executable, args.purge, "--feed", feed, "--cache-dir", ngx.cache,
               "--state", state]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0 and r.stdout.startswith("purged "), (r.returncode, r.stderr)
        r = subprocess.run(cmd, capture_output=True, text=True)  # nothing new: nothing purged
        assert r.stdout.startswith("purged 0 files (0 records changed)"), r.stdout
        docs = lambda bd: ["/pith/%s" % bd, "/pith/%s/" % bd, "/pith/%s.json" % bd,
                           "/pith/%s/state.json" % bd, "/pith/pith:%s" % bd[:8],
                           "/pith/%s.bib" % bd, "/api/pith-number/%s/events.json" % bd,
                           "/api/pith-number/%s/graph.json" % bd,
                           "/api/pith-number/resolve?pith=%s&json=1" % bd]
        for bd in (Y, Z):
            for u in docs(bd):
                assert ngx.get(u, gz)[0] == 200, u
            ngx.get("/pith/%s" % bd, {"Accept": "application/ld+json"})
        for u in ("/", "/pith/", "/api/records"):
            ngx.get(u, gz)
        y0, z0 = tagged_files(ngx.cache, "pith-" + Y), tagged_files(ngx.cache, "pith-" + Z)
        lists0 = tagged_files(ngx.cache, "pith-lists")
        assert len(y0) >= 8 and len(z0) == len(y0) and lists0, (len(y0), len(z0), len(lists0))
        change(ns, held[1])
        r = subprocess.run(cmd, capture_output=True, text=True)
        print("# " + r.stdout.strip())
        assert r.returncode == 0, r.stderr
        y1, z1 = tagged_files(ngx.cache, "pith-" + Y), tagged_files(ngx.cache, "pith-" + Z)
        assert not y1 and sorted(z1) == sorted(z0), (y1, len(z1), len(z0))
        assert not tagged_files(ngx.cache, "pith-lists")
        assert r.stdout.startswith("purged %d files (1 records changed)" % (len(y0) + len(lists0))), \
            (r.stdout, len(y0), len(lists0))
        new = ngx.get("/pith/%s/state.json" % Y, gz, port=ports[0])[1]["etag"]
        st, h, _ = ngx.get("/pith/%s/state.json" % Y, gz)
        assert st == 200 and h["x-cache-status"] == "MISS" and h["etag"] == new, h
        st, h, _ = ngx.get("/pith/%s/state.json" % Z, gz)
        assert h["x-cache-status"] != "MISS", h

    @t.case("a node stopped: the other answers; both stopped: the cache answers, stale")
    def _():
        cached = "/pith/%s.json" % bodies[5]
        assert ngx.get(cached, gz)[0] == 200
        ns[0].stop()
        for bd in bodies[33:38]:  # never asked before: from the node still up
            st, h, _ = ngx.get("/pith/%s.bib" % bd, gz)
            assert st == 200 and h["x-cache-status"] == "MISS", (st, h)
        ns[1].stop()
        time.sleep(MAX_AGE + 1)
        st, h, b = ngx.get(cached, gz)
        assert st == 200 and h["x-cache-status"] == "STALE" and b, (st, h)
        st, _, _ = ngx.get("/pith/%s.bib" % bodies[38], gz)
        assert st in (502, 504), st


def add_args(ap):
    ap.add_argument("--conf", required=True)
    ap.add_argument("--purge", required=True)


if __name__ == "__main__":
    sys.exit(run_test("nginx_cache.", body, add_args=add_args))
