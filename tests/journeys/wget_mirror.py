#!/usr/bin/env python3
"""Journey: a person mirrors a node with wget (issue 51, "HTTP for tools").

    wget --mirror --no-parent http://NODE/

must keep every record's page (/pith/{ID}/ saved as pith/{ID}/index.html,
beside its state.json), reached by plain links from / through the paged
record list; running the same command again must fetch nothing anew (every
record document answers 304 to wget's If-Modified-Since, the node's own
counters agree); `curl -z FILE` on a saved page is 304 too; and after one
record changes (an event older than the ones it has, arriving late), the
next run fetches that record's page again and no other.

usage: wget_mirror.py --pithd D --pithctl C --gen-events G [--out DIR] [--keep]
Exits 77 (skipped) without wget or curl (Debian packages wget, curl).
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_node import SAMPLE, metric, mirror_node, request, run_test, wait_for  # noqa: E402


def wget(base, dest, log):
    """One bounded wget --mirror run; returns [(url, status)] from its log."""
    r = subprocess.run(["wget", "--mirror", "--no-parent", "-l", "8", "--quota=64m",
                        "--timeout=10", "--tries=1", "-P", dest, "-o", log, base + "/"],
                       timeout=240)
    # exit 8 is "the server answered an error": nothing should 404 here
    # but robots.txt (wget asks, the node has none) and, while record
    # pages still link a bundle a record lacks, those bundle.json
    text = open(log, errors="replace").read()
    got, url = [], None
    for line in text.splitlines():
        m = re.match(r"--\S+ \S+--\s+(\S+)$", line)
        if m:
            url = m.group(1)
        m = re.search(r"awaiting response\.\.\. (\d{3})", line)
        if m and url:
            got.append((url, int(m.group(1))))
            url = None
    assert r.returncode in (0, 8), "wget exited %d; see %s" % (r.returncode, log)
    bad = [(u, s) for u, s in got if s >= 400 and not u.endswith("/robots.txt")
           and not (s == 404 and u.endswith("/bundle.json") and SAMPLE not in u)]
    assert not bad, "wget met errors: %s" % bad[:5]
    return got


def is_record_doc(url):
    return re.search(r"/(pith/[A-Z2-7]{26}|api/pith-number/[A-Z2-7]{26}|\.well-known/pith/)", url)


def body(args, root, nodes):
    for tool in ("wget", "curl"):
        if not shutil.which(tool):
            print("SKIPPED: %s is not installed (apt-get install %s; scripts/deps.sh)" % (tool, tool))
            sys.exit(77)
    out = args.out or root
    os.makedirs(out, exist_ok=True)
    # 60 records: two pages of the record list (50 a page)
    n, base, bodies = mirror_node(args, root, nodes, records=60, per_record=3, hold_back=1)
    late = n.held_back
    # the documents are dated from the second after their commit on
    wait_for(lambda: "last-modified" in request(base + "/pith/%s/" % SAMPLE, "HEAD")[1], 10,
             what="the record page to carry Last-Modified")
    dest = os.path.join(root, "mirror")
    host = base.split("//", 1)[1]

    got = wget(base, dest, os.path.join(out, "wget-1.log"))
    missing = [b for b in bodies
               if not os.path.isfile(os.path.join(dest, host, "pith", b, "index.html"))]
    assert not missing, "wget --mirror did not keep the pages of %d records, e.g. %s" % (
        len(missing), missing[:3])
    for b in bodies:
        page = open(os.path.join(dest, host, "pith", b, "index.html"), encoding="utf-8").read()
        assert "pith:" + b[:8] in page, "pith/%s/index.html is not its page" % b
        assert os.path.isfile(os.path.join(dest, host, "pith", b, "state.json")), b
    assert os.path.isfile(os.path.join(dest, host, "pith", SAMPLE, "bundle.json"))
    lists = [u for u, _ in got if "/pith/?after=" in u]
    assert lists, "the second page of the record list was not followed"
    print("ok - wget --mirror kept %d record pages (%d requests, %d list pages)" % (
        len(bodies), len(got), len(lists) + 1), flush=True)

    # again: nothing is fetched anew
    pages200 = metric(base, "pith_http_requests_total", 'route="page",code="200"')
    got = wget(base, dest, os.path.join(out, "wget-2.log"))
    again = [u for u, s in got if s == 200 and (is_record_doc(u) or "/pith/" in u
                                                   or "/api/records" in u)]
    assert not again, "the second run fetched again %d documents, e.g. %s" % (len(again), again[:3])
    n304 = sum(1 for _, s in got if s == 304)
    assert n304 >= 2, got
    assert metric(base, "pith_http_requests_total", 'route="page",code="200"') == pages200, \
        "the node answered a record page 200 on the second run"
    page = os.path.join(dest, host, "pith", SAMPLE, "index.html")
    r = subprocess.run(["curl", "-s", "-o", os.devnull, "-w", "%{http_code}", "-z", page,
                        base + "/pith/%s/" % SAMPLE], capture_output=True, text=True, timeout=30)
    assert r.stdout == "304", "curl -z on a saved page: %s" % r.stdout
    print("ok - the second run: %d answers 304, no document fetched again; curl -z: 304" % n304,
          flush=True)

    # a record changes (an event dated before the ones it has): fetched again
    changed = late[0]
    r = n.submit(late[1])
    assert all(x.get("ok") for x in r), r
    time.sleep(2.1)  # its new date is a second that has ended
    got = wget(base, dest, os.path.join(out, "wget-3.log"))
    pages = sorted(set(re.search(r"/pith/([A-Z2-7]{26})/$", u).group(1) for u, s in got
                       if s == 200 and re.search(r"/pith/[A-Z2-7]{26}/$", u)))
    assert pages == [changed], "after %s changed, wget fetched the pages of %s" % (changed, pages)
    print("ok - after one record changed, wget fetched its page again and no other", flush=True)


def add_args(ap):
    ap.add_argument("--out", help="where wget's logs are kept")


if __name__ == "__main__":
    sys.exit(run_test("journey_wget_mirror.", body, add_args=add_args))
