#!/usr/bin/env python3
"""Journey (issue 55): the operator of a static mirror keeps it current.
They export the tree, serve it with deploy/nginx.conf, and after new
events run `pithctl export --site DIR` again, reading its one line to
know whether nginx must be reloaded (docs/site.md, "Keeping it current").
What they must see:

- the first export: `aliases_changed true`; an arXiv alias URL redirects;
- three records retitled: `aliases_changed false ... records 3 ...`, and
  without any reload nginx serves the new titles (the alias map, which
  only a reload reads, was not touched: same modification time);
- five new records: `aliases_changed true ... records 5 ...`; the new
  record's arXiv URL is a 404 until `nginx -s reload`, a 302 after.

usage: site_update.py --pithctl P --gen-events G
Exit 77 (skipped) when nginx is absent (scripts/deps.sh installs it).
"""
import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, TESTS)
from pithtest import check, events_by_record, make_events, signed_retitles  # noqa: E402
from site_test import Client, Nginx, free_port, nginx_conf, wait_port  # noqa: E402

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--gen-events", required=True)
    a = ap.parse_args()
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not exe:
        print("skipped: nginx is not installed (apt-get install -y nginx-light)")
        return 77
    root = tempfile.mkdtemp(prefix="journey_site_update.")
    ngx = None
    try:
        ngx = run(a, exe, root)
    finally:
        if ngx:
            ngx.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


def run(a, exe, root):
    P = a.pithctl
    op = os.path.join(root, "op.key")
    key, lines = make_events(a.gen_events, root, 20, 2)
    subprocess.run([P, "keygen", "--key-id", "operator", op], check=True, stdout=subprocess.DEVNULL)
    recs, by = events_by_record(lines)
    store, site = os.path.join(root, "store"), os.path.join(root, "site")
    trust = ["--trust-key", key, "--trust-key", op]

    def pithctl(*args, stdin=None):
        return subprocess.run([P, "--store", store] + trust + list(args), input=stdin,
                              capture_output=True, text=True, check=True).stdout

    def load(rs):
        f = os.path.join(root, "load.jsonl")
        with open(f, "wb") as out:
            for r in rs:
                out.write(b"".join(l + b"\n" for l in by[r]))
        pithctl("import", "--no-progress", f)

    port = free_port()
    load(recs[:15])
    out = pithctl("export", "--site", site, "--base-url", "http://127.0.0.1:%d" % port)
    check(out.startswith("aliases_changed true ") and " records 15 " in out,
          "the first export: %s" % out.strip())
    d = os.path.join(root, "nginx")
    os.makedirs(d)
    ngx = Nginx(exe, d, nginx_conf(d, os.path.join(TESTS, "..", "deploy", "nginx.conf"), site, port))
    wait_port(port, ngx.proc)
    c = Client(port)
    amap = os.path.join(site, ".pith-site", "aliases.map")

    def arxiv_of(body):
        for line in open(amap):
            m = re.match(r'"\\\\(\d{4}\.\d{5})" ([A-Z2-7]{26});$', line.strip())
            if m and m.group(2) == body:
                return m.group(1)

    first = recs[0][-26:]
    aid = arxiv_of(first)
    st, h, _ = c.get("/pith/arxiv:%s" % aid)
    check(st == 302 and h.get("location") == "/pith/" + first,
          "/pith/arxiv:%s redirects to its record: %d %s" % (aid, st, h.get("location")))

    # three records retitled
    f = signed_retitles(P, op, recs[:3], os.path.join(root, "titles.jsonl"),
                        lambda i: "2031-02-01T00:00:%02dZ" % i, lambda i: "Now titled %d" % i)
    pithctl("import", "--no-progress", f)
    mtime = os.stat(amap).st_mtime_ns
    out = pithctl("export", "--site", site)
    check(out.startswith("aliases_changed false ") and " records 3 " in out,
          "three records retitled: %s" % out.strip())
    check(os.stat(amap).st_mtime_ns == mtime, "the alias map was not rewritten")
    st, _, b = c.get("/pith/%s.json" % first, {"Accept-Encoding": "gzip"})
    check(st == 200 and b"Now titled 0" in gzip.decompress(b),
          "without a reload nginx serves the new title (%d)" % st)

    # five new records
    load(recs[15:])
    out = pithctl("export", "--site", site)
    check(out.startswith("aliases_changed true ") and " records 5 " in out,
          "five new records: %s" % out.strip())
    new = recs[15][-26:]
    nid = arxiv_of(new)
    st, _, _ = c.get("/pith/arxiv:%s" % nid)
    check(st == 404, "before the reload the new record's arXiv URL is a 404 (%d)" % st)
    ngx.reload()
    c = Client(port)
    st, h, _ = c.get("/pith/arxiv:%s" % nid)
    check(st == 302 and h.get("location") == "/pith/" + new,
          "after nginx -s reload it redirects: %d %s" % (st, h.get("location")))
    return ngx


if __name__ == "__main__":
    sys.exit(main())
