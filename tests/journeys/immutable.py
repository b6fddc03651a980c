#!/usr/bin/env python3
"""Journey: a reader (or a cache) keeps what a hash names for good (issue 55).

With curl, as a person would: the record's events.json lists its events;
each one's id gives /api/event/{EVENT_ID}, whose headers say
`Cache-Control: public, max-age=31536000, immutable`; the body is the
event as listed, and `curl -z` / If-None-Match get a 304. The record's
bundle, whose hash the change feed names (`bundle_sha256`), is at
/api/bundle/{BUNDLE_SHA256} with the same header and the same bytes as
/pith/{ID}/bundle.json; an id no event has is a 404 kept briefly.

usage: immutable.py --pithd D --pithctl C --gen-events G [--keep]
Exits 77 (skipped) without curl.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_node import SAMPLE, mirror_node, run_test  # noqa: E402

IMM = "public, max-age=31536000, immutable"


def curl(*args):
    """curl -s ARGS: (status, {lower-case header: value}, body)."""
    r = subprocess.run(["curl", "-s", "-D", "-", "--max-time", "10"] + list(args),
                       capture_output=True, check=True)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    h = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return int(lines[0].split()[1]), h, body


def body(args, root, nodes):
    if not shutil.which("curl"):
        print("SKIPPED: curl is not installed (apt-get install curl)")
        sys.exit(77)
    n, base, bodies = mirror_node(args, root, nodes, records=3)
    rec = next(b for b in bodies if b != SAMPLE)
    st, _, b = curl(base + "/api/pith-number/%s/events.json" % rec)
    assert st == 200, st
    events = json.loads(b)["events"]
    assert len(events) == 2, events
    for ev in events:
        url = base + "/api/event/" + ev["event_id"]
        st, h, b = curl(url)
        assert st == 200 and h["cache-control"] == IMM, (url, st, h)
        assert json.loads(b) == ev, (b[:200], ev)
        st, h2, b2 = curl("-H", "If-None-Match: " + h["etag"], url)
        assert st == 304 and not b2 and h2["cache-control"] == IMM, (st, h2)
        st, hz, _ = curl("--compressed", url)
        assert st == 200 and hz.get("content-encoding") == "gzip", hz
        st, hh, _ = curl("-I", url)
        assert st == 200 and hh["cache-control"] == IMM, hh
    print("ok - each event of events.json at /api/event/{EVENT_ID}: %s, a 304 by its ETag, "
          "gzip, HEAD" % IMM, flush=True)
    st, _, b = curl(base + "/api/changes")
    sha = next(c["bundle_sha256"] for c in json.loads(b)["changes"] if c["pith_number"].endswith(SAMPLE))
    url = base + "/api/bundle/" + sha
    st, h, b = curl(url)
    assert st == 200 and h["cache-control"] == IMM and h.get("last-modified"), (st, h)
    assert b == curl(base + "/pith/%s/bundle.json" % SAMPLE)[2]
    st, _, b2 = curl("-H", "If-Modified-Since: " + h["last-modified"], url)
    assert st == 304 and not b2, st
    print("ok - the bundle the change feed names, at /api/bundle/{BUNDLE_SHA256}: %s, the bytes "
          "of bundle.json, a 304 by date" % IMM, flush=True)
    st, h, b = curl(base + "/api/event/sha256:" + "0" * 64)
    assert st == 404 and h["cache-control"] == "public, max-age=5", (st, h)
    assert json.loads(b)["error"] == "not_found", b
    st, h, b = curl(base + "/api/bundle/not-a-hash")
    assert st == 400 and b"64 lower-case hex" in b, (st, b)
    print("ok - an unknown id: 404 for 5 s; a malformed one: 400", flush=True)


if __name__ == "__main__":
    sys.exit(run_test("journey_immutable.", body))
