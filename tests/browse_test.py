#!/usr/bin/env python3
"""The mirror for people (issue 18), against the http_serve harness:

- gzip for JSON and HTML when the client accepts it: the bytes decompress
  to the identity body, the ETag differs ("-gzip"), Vary: Accept-Encoding,
  304 on the right tag only, tiny bodies and refusals (q=0) stay plain;
- /pith-signing-key.json: the registry key block of the manifest;
- the identifier forms people paste (arXiv:…, arxiv.org and doi.org URLs,
  URL-encoded) on every {ID} route and resolve; encoded slashes elsewhere
  still 400; no doubled "identifier:" prefix in errors;
- "/" (what the mirror is, the records changed last, the search box) and
  the record list, newest first, in HTML (/pith/) and JSON (/api/records):
  paging misses and repeats no record while records are added, bad cursors
  and limits are 400, titles from events are escaped.

usage: browse_test.py --serve S --pithctl C --gen-events G --data DIR [--keep]
"""

import argparse
import gzip
import html
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import Tap  # noqa: E402

AR7B = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
AR7B_BODY = "AR7B3DEVMOTSBRCCVXUCLYSRRE"
REGISTRY_PK = "b2d552b68890857171a78b36a5dccf368a953413288c353f7c9d9d6f94b709b3"

def log(*a):
    print("#", *a, flush=True)


T = Tap()
case = T.case


class Server:
    def __init__(self, exe, store, root, extra=()):
        self.port_file = os.path.join(root, "port")
        self.log_path = os.path.join(root, "serve.log")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([exe, "--store", store, "--port-file", self.port_file]
                                     + list(extra), stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("http_serve exited; see %s" % self.log_path)
            try:
                with open(self.port_file) as f:
                    self.port = int(f.read())
                return
            except (OSError, ValueError):
                time.sleep(0.05)
        raise RuntimeError("http_serve did not start")

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(30)
        self.log.close()
        return rc


S = None


def req(method, path, headers=None, body=None):
    c = http.client.HTTPConnection("127.0.0.1", S.port, timeout=30)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def get(path, headers=None, status=200):
    st, h, b = req("GET", path, headers)
    assert st == status, "GET %s: %d %s" % (path, st, b[:300])
    return h, b


def main():
    global S
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--gen-events", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="browse_test.")
    log("work directory", root)
    store = os.path.join(root, "store")
    P = args.pithctl
    gen = os.path.join(root, "gen.jsonl")
    key = os.path.join(root, "gen.key")
    subprocess.run([args.gen_events, "--records", "30", "--per-record", "3", "--seed", "7",
                    "--key-out", key, gen], check=True, stdout=subprocess.DEVNULL)
    opkey = os.path.join(root, "op.key")
    subprocess.run([P, "keygen", "--key-id", "browse-test-op", opkey], check=True,
                   stdout=subprocess.DEVNULL)
    trust = ["--trust-key", key, "--trust-key", opkey]
    # 20 records imported, 10 held back to POST while a client pages
    with open(gen, "rb") as f:
        lines = [l.rstrip(b"\n") for l in f if l.strip()]
    first = os.path.join(root, "first.jsonl")
    with open(first, "wb") as f:
        f.write(b"\n".join(lines[:60]) + b"\n")
    subprocess.run([P, "--store", store] + trust + ["import", first,
                   os.path.join(args.data, "bundle-AR7B3DEV.json")], check=True,
                   stdout=subprocess.DEVNULL)
    ctx = {"root": root, "store": store, "trust": trust, "P": P, "opkey": opkey,
           "data": args.data, "held": lines[60:]}
    S = Server(args.serve, store, root, trust + ["--search", os.path.join(root, "search.sqlite"),
                                                 "--name", "First name",
                                                 "--hup-name", "Renamed <mirror>",
                                                 "--hup-operator", "New operator",
                                                 "--hup-contact", "https://example.org/c"])
    ok_all = False
    try:
        run_cases(ctx)
        run_browse_cases(ctx)
        run_search_cases(ctx)
        run_identity_case(ctx)
        ok_all = T.failed == 0
    finally:
        if S.stop() != 0:
            print("not ok - http_serve did not exit cleanly")
            ok_all = False
        print("1..%d" % T.n)
        if not ok_all:
            with open(S.log_path, errors="replace") as f:
                for line in f.readlines()[-30:]:
                    log(line.rstrip())
        if ok_all and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            log("kept", root)
    sys.exit(0 if ok_all else 1)


def run_cases(ctx):
    @case("gzip: the bundle compresses to the same bytes, with its own ETag and Vary")
    def _():
        h, plain = get("/pith/%s/bundle.json" % AR7B_BODY)
        assert "content-encoding" not in h
        assert h["vary"] == "Accept-Encoding", h.get("vary")
        hz, z = get("/pith/%s/bundle.json" % AR7B_BODY, {"Accept-Encoding": "gzip, deflate"})
        assert hz["content-encoding"] == "gzip"
        assert hz["vary"] == "Accept-Encoding"
        assert gzip.decompress(z) == plain
        assert len(z) < len(plain) // 2, (len(z), len(plain))
        assert int(hz["content-length"]) == len(z)
        assert hz["etag"] != h["etag"] and hz["etag"] == h["etag"][:-1] + '-gzip"', hz["etag"]
        # each tag revalidates its own bytes only
        st, _, b = req("GET", "/pith/%s/bundle.json" % AR7B_BODY,
                       {"Accept-Encoding": "gzip", "If-None-Match": hz["etag"]})
        assert st == 304 and not b
        st, _, _ = req("GET", "/pith/%s/bundle.json" % AR7B_BODY,
                       {"Accept-Encoding": "gzip", "If-None-Match": h["etag"]})
        assert st == 200
        st, _, _ = req("GET", "/pith/%s/bundle.json" % AR7B_BODY, {"If-None-Match": hz["etag"]})
        assert st == 200
        # HEAD says the compressed length
        st, hh, b = req("HEAD", "/pith/%s/bundle.json" % AR7B_BODY, {"Accept-Encoding": "gzip"})
        assert st == 200 and not b and int(hh["content-length"]) == len(z)

    @case("gzip: HTML pages and every JSON view; Vary names Accept too on /pith/{ID}")
    def _():
        for path in ("/pith/%s" % AR7B_BODY, "/pith/%s.json" % AR7B_BODY,
                     "/pith/%s/state.json" % AR7B_BODY, "/api/pith-number/%s/events.json" % AR7B_BODY,
                     "/api/pith-number/%s/graph.json" % AR7B_BODY, "/pith-mirrors.json",
                     "/api/changes", "/pith-signing-key.json"):
            h, plain = get(path)
            hz, z = get(path, {"Accept-Encoding": "gzip"})
            assert hz.get("content-encoding") == "gzip", path
            assert gzip.decompress(z) == plain, path
        h, _ = get("/pith/%s" % AR7B_BODY, {"Accept-Encoding": "gzip"})
        assert h["vary"] == "Accept, Accept-Encoding", h["vary"]

    @case("gzip: not for clients that refuse it (q=0, identity), nor tiny bodies, nor /metrics")
    def _():
        path = "/pith/%s/bundle.json" % AR7B_BODY
        for ae in ("gzip;q=0", "identity", "deflate, br", "*;q=0", "gzip;q=0.000, *"):
            h, _ = get(path, {"Accept-Encoding": ae})
            assert "content-encoding" not in h, ae
        for ae in ("*", "GZIP", "x-gzip", "br;q=1, gzip;q=0.5", "gzip;q=1.0"):
            h, _ = get(path, {"Accept-Encoding": ae})
            assert h.get("content-encoding") == "gzip", ae
        st, h, b = req("GET", "/pith/ZZZZZZZZZZZZZZZZZZZZZZZZZZ", {"Accept-Encoding": "gzip"})
        assert st == 404 and "content-encoding" not in h and json.loads(b)["error"] == "not_found"
        h, _ = get("/metrics", {"Accept-Encoding": "gzip"})
        assert "content-encoding" not in h

    @case("/pith-signing-key.json is the registry key block the manifest carries")
    def _():
        h, b = get("/pith-signing-key.json")
        k = json.loads(b)
        assert h["content-type"] == "application/json" and h["etag"]
        assert h["access-control-allow-origin"] == "*"
        assert k["public_key_hex"] == REGISTRY_PK and k["algorithm"] == "ed25519"
        assert k["key_id"] == "pith-v1-2026-05", k["key_id"]
        _, m = get("/pith-mirrors.json")
        assert json.loads(m)["mirrors"][0]["public_key"] == k

    @case("the identifier forms people paste reach the record on every {ID} route")
    def _():
        forms = ["arXiv:2401.14489", "ARXIV:2401.14489v2",
                 "https://arxiv.org/abs/2401.14489v2", "https://arxiv.org/abs/2401.14489",
                 "http://arxiv.org/pdf/2401.14489v2", "https://doi.org/10.48550/arXiv.2401.14489",
                 "doi:10.48550/arxiv.2401.14489", "10.48550/arXiv.2401.14489",
                 "https://pith.science/pith/" + AR7B_BODY]
        for f in forms:
            q = urllib.parse.quote(f, safe="")
            for path in ("/pith/%s", "/pith/%s.json", "/pith/%s/state.json", "/pith/%s/bundle.json",
                         "/.well-known/pith/%s/bundle.json", "/api/pith-number/%s/events.json",
                         "/api/pith-number/%s/graph.json"):
                st, _, b = req("GET", path % q)
                assert st == 200, "%s: %d %s" % (path % q, st, b[:200])
            st, _, b = req("GET", "/api/pith-number/resolve?json=true&id=" + q)
            assert st == 200 and json.loads(b)["pith_number"] == AR7B, (f, st, b[:200])

    @case("encoded slashes outside an identifier, and dot pieces inside one, are still 400")
    def _():
        for p in ("/pith%2Fx", "/api%2Fchanges", "/pith/" + AR7B_BODY + "/state.json%2Fx",
                  "/pith/a%2F..%2Fstate.json", "/pith/..%2F" + AR7B_BODY,
                  "/api/pith-number%2Fresolve"):
            st, _, b = req("GET", p)
            assert st == 400, "%s: %d" % (p, st)

    @case("errors name the identifier once: no doubled 'identifier:' prefix")
    def _():
        st, _, b = req("GET", "/pith/not-an-id")
        assert st == 400
        msg = json.loads(b)["message"]
        assert msg.count("identifier") == 1 and "not-an-id" in msg, msg
        st, _, b = req("GET", "/pith/" + urllib.parse.quote("https://example.org/x", safe=""))
        assert st == 400 and json.loads(b)["message"].count("identifier:") == 1, b


def run_browse_cases(ctx):
    held = ctx["held"]

    @case("/api/records: every record once, newest change first, with its facts")
    def _():
        recs = records_all(1000)
        _, b = get("/healthz")
        assert len(recs) == json.loads(b)["store"]["records"] == 21, len(recs)
        assert len({r["pith_number"] for r in recs}) == len(recs)
        cur = [int(r["cursor"]) for r in recs]
        assert cur == sorted(cur, reverse=True), cur
        ar = [r for r in recs if r["pith_number"] == AR7B][0]
        assert ar["title"] == "The Case for Co-Designing Model Architectures with Hardware", ar
        assert ar["first_author"] == "Aamir Shafi" and ar["primary_cat"] == "cs.DC", ar
        assert ar["submitted_at"] == "2024-01-25T19:50:31Z" and ar["built_at"], ar
        assert ar["short_pith_number"] == "pith:AR7B3DEV", ar
        assert ar["url"].endswith("/pith/" + AR7B_BODY)
        # the default page is 50, more than 200 is cut, bad ones are 400
        d = json.loads(get("/api/records?limit=100000")[1])
        assert d["limit"] == 200
        for bad in ("limit=0", "limit=x", "limit=1&limit=2", "after=0", "after=-1", "after=abc",
                    "after=99999999999999999999"):
            st, _, b = req("GET", "/api/records?" + bad)
            assert st == 400 and json.loads(b)["error"] == "bad_request", (bad, st)

    @case("/api/records: paging misses and repeats no record while records are added")
    def _():
        before = {r["pith_number"] for r in records_all(1000)}
        added = []

        def post(i):
            if i < 3:
                chunk = held[i * 6:(i + 1) * 6]  # two new records a page
                st, _, b = req("POST", "/events", {}, b"\n".join(chunk))
                assert st == 202, b
                added.append(i)
        seen = records_all(4, post)
        names = [r["pith_number"] for r in seen]
        assert len(names) == len(set(names)), "a record repeated"
        assert before <= set(names), before - set(names)
        assert added == [0, 1, 2]
        now = {r["pith_number"] for r in records_all(1000)}
        assert len(now) == len(before) + 6, (len(now), len(before))

    @case("/pith/: the list for people, paged with a next link, escaped, phone-width CSS")
    def _():
        h, b = get("/pith/?limit=5")
        assert h["content-type"] == "text/html; charset=utf-8"
        assert "default-src 'none'" in h["content-security-policy"]
        page = b.decode()
        # the newest range of 5 change log numbers: 1 to 5 records
        assert 1 <= page.count("<tr><td>") <= 5, page
        m = re.search(r'href="[^"]*(/pith/\?after=(\d+)&amp;limit=5)"', page)
        assert m and (int(m.group(2)) - 1) % 5 == 0, page[-800:]
        _, b2 = get(html.unescape(m.group(1)))
        assert 1 <= b2.decode().count("<tr><td>") <= 5
        assert "<script" not in page and 'name="viewport"' in page and "@media" in page
        full = get("/pith/?limit=200")[1].decode()
        assert "The Case for Co-Designing Model Architectures with Hardware" in full

    @case("/: what this mirror is, the records changed last, a search box that resolves")
    def _():
        h, b = get("/")
        page = b.decode()
        assert h["content-type"].startswith("text/html")
        for want in ("records", "events", "Recently changed", 'name="q"', "All records",
                     "/api/records", "/pith-signing-key.json"):
            assert want in page, want
        assert page.count("<tr><td>") == 20
        m = re.search(r'<form action="([^"]+)"', page)
        assert m.group(1).endswith("/search"), m.group(1)
        st, hh, _ = req("GET", urllib.parse.urlparse(m.group(1)).path + "?q=" +
                        urllib.parse.quote("https://arxiv.org/abs/2401.14489v2", safe=""))
        assert st == 302 and hh["location"].endswith("/pith/" + AR7B_BODY), (st, hh)
        _, z = get("/", {"Accept-Encoding": "gzip"})
        assert gzip.decompress(z) == b


def post_event(ctx, subject, etype, target, created_at, payload, supersedes=None):
    """Signs with the operator key and POSTs; the event id."""
    ev = {"event_type": etype, "subject_pith_number": subject, "target": target,
          "created_at": created_at, "payload": payload}
    if supersedes:
        ev["supersedes"] = supersedes
    signed = subprocess.run([ctx["P"], "sign", "--key", ctx["opkey"], "-"],
                            input=json.dumps(ev).encode(), capture_output=True,
                            check=True).stdout.strip()
    st, _, b = req("POST", "/events", {}, signed)
    assert st == 202 and json.loads(b)["stored"] == 1, b
    return json.loads(signed)["event_id"]


SNAPS = {}  # subject -> the operator's last graph snapshot (the next supersedes it)


def post_paper(ctx, subject, title, authors, at="2031-03-01T00:00:00Z"):
    prev = SNAPS.get(subject)
    SNAPS[subject] = post_event(
        ctx, subject, "graph_snapshot", "graph", at,
        {"graph_snapshot": {"paper": {"title": title, "authors_text": authors,
                                      "abstract_excerpt": "An abstract about " + title}}},
        [prev] if prev else None)


def search_json(q, extra="", status=200):
    h, b = get("/api/search?q=" + urllib.parse.quote(q, safe="") + extra, status=status)
    return json.loads(b)


def wait_indexed(q, want, timeout=10):
    """Polls /api/search until the results' numbers are want (a list)."""
    deadline = time.time() + timeout
    while True:
        got = [r["pith_number"] for r in search_json(q)["results"]]
        if got == want or time.time() > deadline:
            return got
        time.sleep(0.1)


def run_search_cases(ctx):
    recs = [r["pith_number"] for r in records_all(200) if r["pith_number"] != AR7B]
    a, b, c, d = recs[:4]
    ctx["search"] = (a, b, c, d)

    @case("search: titles and authors indexed from new graph snapshots, title words first")
    def _():
        post_paper(ctx, a, "Quokka Habitats of Rottnest", "Ada Lovelace, Alan Turing")
        post_paper(ctx, b, "Dense Retrieval for Libraries", "Grace Quokka Hopper")
        post_paper(ctx, c, "Quokka Quokka Population Models", "Emmy Noether")
        got = wait_indexed("quokka", [c, a, b])
        assert got == [c, a, b], got
        d_ = search_json("quokka")
        assert set(d_) == {"query", "record", "results", "limit", "offset", "next_offset",
                           "indexed_through"}, d_
        r0 = d_["results"][0]
        assert r0["title"] == "Quokka Quokka Population Models" and r0["authors"] == "Emmy Noether"
        assert r0["url"].endswith("/pith/" + c[-26:]) and r0["short_pith_number"] == "pith:" + c[-26:][:8]
        assert [x["score"] for x in d_["results"]] == sorted(x["score"] for x in d_["results"])
        # every word must match; an author's name finds the paper
        assert [x["pith_number"] for x in search_json("quokka hopper")["results"]] == [b]
        assert [x["pith_number"] for x in search_json("author:turing")["results"]] == [a]
        assert search_json("title:hopper")["results"] == []

    @case("search: by category, with paging (limit, offset, next_offset)")
    def _():
        cat = search_json("cat:cs.DC", "&limit=5")
        assert len(cat["results"]) == 5 and cat["next_offset"] == 5 and cat["limit"] == 5
        assert all("cs.DC" in r["categories"] for r in cat["results"])
        page2 = search_json("cat:cs.DC", "&limit=5&offset=5")
        first = {r["pith_number"] for r in cat["results"]}
        assert not first & {r["pith_number"] for r in page2["results"]}
        one = search_json("quokka", "&limit=1")
        assert one["next_offset"] == 1 and len(one["results"]) == 1
        last = search_json("quokka", "&limit=1&offset=2")
        assert last["next_offset"] is None and last["results"][0]["pith_number"] == b

    @case("search: FTS5 syntax in a query is only words (no injection), bounds are 400")
    def _():
        for q in ['quokka OR dense', 'quokka NOT dense', '"quokka', 'quo*', 'NEAR(quokka dense)',
                  'title:*', ')(', '^quokka', 'quokka AND', '{title}:quokka', "'; DROP TABLE rec;--",
                  'a"b"c', '+ - * :']:
            st, _, body = req("GET", "/api/search?q=" + urllib.parse.quote(q, safe=""))
            assert st in (200, 400), (q, st, body)
            if st == 200:
                for r in json.loads(body)["results"]:
                    assert r["pith_number"] in (a, b, c), (q, r)
        assert search_json("quokka OR dense")["results"] == []  # "or" is a word here
        assert search_json("quo*")["results"] == []  # no prefix operator
        assert [r["pith_number"] for r in search_json("quokka")["results"]] == [c, a, b]
        search_json("x" * 257, status=400)
        search_json(" ".join(["w%d" % i for i in range(13)]), status=400)
        search_json("+ - *", status=400)
        assert search_json("quokka", "&limit=1000")["limit"] == 100
        for extra in ("&limit=0", "&offset=2000", "&offset=950&limit=100", "&limit=x",
                      "&offset=-1", "&q=again"):
            search_json("quokka", extra, status=400)
        get("/api/search", status=400)

    @case("search: kept current as records change (a new title is found, the old one gone)")
    def _():
        post_paper(ctx, d, "Zyzzyva Beetles", "Carl Linnaeus", at="2031-03-02T00:00:00Z")
        assert wait_indexed("zyzzyva", [d]) == [d]
        post_paper(ctx, d, "Wombat Burrows", "Carl Linnaeus", at="2031-03-03T00:00:00Z")
        assert wait_indexed("zyzzyva", []) == []
        assert [r["pith_number"] for r in search_json("wombat")["results"]] == [d]

    @case("/search: HTML hits escaped; an identifier goes to its record; empty q shows help")
    def _():
        post_paper(ctx, d, "Wombat <script>alert(1)</script> & Co", "Carl Linnaeus",
                   at="2031-03-04T00:00:00Z")
        wait_indexed("wombat alert", [d])
        h, body = get("/search?q=wombat")
        page = body.decode()
        assert h["content-type"] == "text/html; charset=utf-8"
        assert "Wombat &lt;script&gt;alert(1)&lt;/script&gt; &amp; Co" in page, page
        assert "<script" not in page and 'name="q"' in page and 'value="wombat"' in page
        page = get("/search?q=quokka&limit=1")[1].decode()
        assert page.count("<li>") == 1 and 'rel="next"' in page and "offset=1" in page
        assert "Quokka Quokka Population Models" in page
        st, hh, _ = req("GET", "/search?q=" + urllib.parse.quote("arXiv:2401.14489", safe=""))
        assert st == 302 and hh["location"].endswith("/pith/" + AR7B_BODY), (st, hh)
        st, hh, _ = req("GET", "/search?q=" + c[-26:][:10])
        assert st == 302 and hh["location"].endswith("/pith/" + c[-26:]), (st, hh)
        assert search_json(AR7B_BODY)["record"].endswith("/pith/" + AR7B_BODY)
        page = get("/search")[1].decode()
        assert "cat:cs.LG" in page and "<ol" not in page
        assert "No record on this mirror matches" in get("/search?q=nothingmatchesthis")[1].decode()
        assert get("/search?q=" + "x" * 300, status=400)


    @case("record page: status in words, links, LaTeX snippet, embed, completeness, abstract")
    def _():
        h, body = get("/pith/" + AR7B_BODY)
        page = body.decode()
        for want in ("content-addressed", "registry receipt (signed_v1)", "not attested",
                     "not anchored", "not stored", "graph snapshot",
                     'href="https://arxiv.org/abs/2401.14489v2"',
                     'href="https://doi.org/10.48550/arxiv.2401.14489"',
                     "/pith/%s/bundle.json" % AR7B_BODY, "/pith/%s/state.json" % AR7B_BODY,
                     "/api/pith-number/%s/events.json" % AR7B_BODY,
                     "/api/pith-number/%s/graph.json" % AR7B_BODY,
                     "/api/pith-number/resolve?pith=%s&amp;json=true" % AR7B_BODY,
                     "/pith-signing-key.json\">Signing key", "public key</a>",
                     "\\usepackage{pith}\n\\pithnumber{%s}" % AR7B_BODY,
                     "Embed a link", "&lt;a href=&quot;", "[pith:AR7B3DEV](",
                     "Record completeness", "Bitcoin timestamp: open", "Internet Archive: open",
                     "Author claim: open", "Citations: open", "Replications: open",
                     "Portable graph bundle live (built 2026-08-04T06:52:48Z)",
                     "Cited by", "Receipt and verification", "pith-number/v1.0",
                     "Verify this Pith Number yourself", "Canonical record JSON",
                     "Stella Biderman", 'name="viewport"', "@media"):
            assert want in page, (want, page[:3000])
        assert "<script" not in page
        links = re.findall(r'href="([^"]+)"', page)
        base = "http://127.0.0.1:%d" % S.port
        for u in links:
            if u.startswith(base):  # every link of the mirror's own answers
                st, _, _ = req("GET", html.unescape(u[len(base):]))
                assert st == 200, (u, st)

    @case("record page: the abstract, and 'Cited by' kept current from citation events")
    def _():
        a, b, c, d = ctx["search"]
        page = get("/pith/" + a[-26:])[1].decode()
        assert "<h3>Abstract</h3>" in page and "An abstract about Quokka Habitats" in page
        def cited_count(pg):
            m = re.search(r"(\d+) papers? on this mirror", pg)
            assert m or "No record on this mirror cites it yet" in pg, pg
            return int(m.group(1)) if m else 0
        before = cited_count(page)
        post_event(ctx, b, "citation_signature", a, "2031-03-05T00:00:00Z",
                   {"relationship": "cites", "context": "<b>see</b>"})
        post_event(ctx, c, "citation_signature", "https://arxiv.org/abs/2401.14489v2",
                   "2031-03-05T00:00:01Z", {"relationship": "cites"})
        deadline = time.time() + 10
        while "Dense Retrieval for Libraries" not in page and time.time() < deadline:
            time.sleep(0.1)
            page = get("/pith/" + a[-26:])[1].decode()
        cited = page[page.index("<h3>Cited by</h3>"):]
        assert "Dense Retrieval for Libraries" in cited and cited_count(cited) == before + 1, cited
        assert "/pith/" + b[-26:] in cited
        # a pasted-URL target resolves to the record it names
        page = get("/pith/" + AR7B_BODY)[1].decode()
        assert "Quokka Quokka Population Models" in page[page.index("<h3>Cited by</h3>"):]


def records_all(limit, between=None):
    """Pages /api/records to the end; between(i) runs after page i."""
    out, cur, i = [], None, 0
    while True:
        q = "?limit=%d" % limit + ("&after=" + cur if cur else "")
        h, b = get("/api/records" + q)
        d = json.loads(b)
        assert set(d) == {"records", "next", "limit"}, set(d)
        assert len(d["records"]) <= limit
        # a page is one range of limit change log numbers (docs/http.md):
        # its records lie below after and from the range's start on, and
        # next is the cursor of the next older range that holds a record
        curs = [int(r["cursor"]) for r in d["records"]]
        assert curs == sorted(curs, reverse=True), curs
        if curs:
            lo = (curs[0] - 1) // limit * limit + 1
            assert all(c >= lo for c in curs) and (not cur or curs[0] < int(cur)), (cur, curs)
        out += d["records"]
        if between:
            between(i)
        i += 1
        if not d["next"]:
            return out
        assert (int(d["next"]) - 1) % limit == 0, d["next"]
        assert not curs or int(d["next"]) <= curs[-1], (d["next"], curs)
        cur = d["next"]


def run_identity_case(ctx):
    @case("a reload's new mirror name: pages of the render threads and the loop, the manifest")
    def _():
        # the record pages go through the render pool's threads (2), "/" and
        # the manifest through the loop
        paths = ["/pith/" + AR7B_BODY] * 6 + ["/", "/pith/"]
        for p in paths:
            _, _, b = req("GET", p, {"Accept": "text/html"})
            assert b"First name</a>" in b and b"Renamed" not in b, p
        S.proc.send_signal(signal.SIGHUP)
        want = b'<a class="site" href="http://127.0.0.1:%d/">Renamed &lt;mirror&gt;</a>' % S.port
        deadline = time.time() + 10
        while req("GET", "/", {"Accept": "text/html"})[2].find(want) < 0:
            assert time.time() < deadline, "the new name never showed"
            time.sleep(0.05)
        for p in paths:
            _, _, b = req("GET", p, {"Accept": "text/html"})
            assert want in b and b"First name" not in b, p
            assert b'run by New operator' in b and b'href="https://example.org/c"' in b, p
        _, _, b = req("GET", "/pith-mirrors.json")
        me = [m for m in json.loads(b)["mirrors"] if m["status"] == "self"][0]
        assert (me["name"], me["operator"], me["contact"]) == (
            "Renamed <mirror>", "New operator", "https://example.org/c"), me


if __name__ == "__main__":
    main()
