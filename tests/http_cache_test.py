#!/usr/bin/env python3
"""The caching headers of every route (issue 55; docs/http.md, "Caching"),
against the http_serve harness over the shared store of http_test_util:
Cache-Control per route and status (a record's documents max-age with
stale-while-revalidate and stale-if-error; the lists shorter; the change
feed no-cache; per node or per request no-store; 400 and 404 briefly,
other errors not at all), the cache tag of a record's documents and the
lists, the same on a 304 (by ETag and by date) and on the gzip variant,
the change feed's cache_tag, the immutable documents (an event by its id,
a bundle by its hash), and a server with --max-age 0 (no-cache).

usage: http_cache_test.py --serve S --pithctl C --gen-events G --data DIR
"""
import gzip
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import http_test_util as u  # noqa: E402
from http_test_util import AR7B_BODY, case, req  # noqa: E402

MAX_AGE = 60
REC = "public, max-age=60, stale-while-revalidate=60, stale-if-error=86400"
LIST = "public, max-age=10, stale-while-revalidate=10, stale-if-error=86400"
KEY = "public, max-age=3600, stale-while-revalidate=86400, stale-if-error=604800"
ERR = "public, max-age=5"
IMM = "public, max-age=31536000, immutable"


def run_cases(args, root, base, gen_rec, gen_body, held, untrusted, opkey, servers, store, trust):
    time.sleep(1.1)  # documents are dated once the second of their date has ended
    B = gen_body
    A = AR7B_BODY
    tag = lambda b: "pith-" + b  # noqa: E731
    record_docs = [
        ("/pith/%s" % B, B), ("/pith/%s/" % B, B), ("/pith/%s.json" % B, B),
        ("/pith/%s.bib" % B, B), ("/pith/%s/state.json" % B, B),
        ("/api/pith-number/%s/events.json" % B, B), ("/api/pith-number/%s/graph.json" % B, B),
        ("/pith/%s/bundle.json" % A, A), ("/.well-known/pith/%s/bundle.json" % A, A),
        ("/pith/pith:%s" % B[:8], B), ("/pith/%s" % gen_rec.replace(":", "%3A"), B),
    ]

    @case("a record's documents: %s, its Cache-Tag and Surrogate-Key, ETag and "
          "Last-Modified" % REC)
    def _():
        for path, b in record_docs:
            st, h, _ = req("GET", path)
            assert st == 200, (path, st)
            assert h.get("cache-control") == REC, (path, h.get("cache-control"))
            assert h.get("cache-tag") == tag(b) and h.get("surrogate-key") == tag(b), (path, h)
            assert h.get("etag") and h.get("last-modified"), (path, h)
            assert "Cache-Tag" in h["access-control-expose-headers"], h

    @case("304 by ETag and by date: the same Cache-Control, Cache-Tag and ETag as the 200")
    def _():
        for path, b in record_docs:
            _, h, _ = req("GET", path)
            for cond in ({"If-None-Match": h["etag"]}, {"If-Modified-Since": h["last-modified"]}):
                st, h2, body = req("GET", path, cond)
                assert st == 304 and not body, (path, cond, st)
                assert h2.get("cache-control") == REC and h2.get("cache-tag") == tag(b), (path, h2)
                assert h2.get("etag") == h["etag"], (path, h2)

    @case("gzip: its own tag, Vary: Accept-Encoding, the same Cache-Control and Cache-Tag; 304 by it")
    def _():
        for path, b in record_docs:
            st, h, _ = req("GET", path)
            st, hz, bz = req("GET", path, {"Accept-Encoding": "gzip"})
            if hz.get("content-encoding") != "gzip":
                continue  # under 256 bytes: plain for everyone
            assert hz["etag"] == h["etag"][:-1] + '-gzip"', (path, hz["etag"], h["etag"])
            assert "Accept-Encoding" in hz["vary"] and "Accept-Encoding" in h["vary"], path
            assert hz["cache-control"] == REC and hz["cache-tag"] == tag(b), path
            st, h2, _ = req("GET", path, {"Accept-Encoding": "gzip", "If-None-Match": hz["etag"]})
            assert st == 304 and h2["etag"] == hz["etag"], (path, st)
        _, h, _ = req("GET", "/pith/%s" % B)
        assert h["vary"] == "Accept, Accept-Encoding", h  # negotiated: HTML or JSON-LD

    @case("the lists and the home page: %s, tag pith-lists; search and resolve the "
          "same max-age, resolve tagged with its record" % LIST)
    def _():
        for path in ("/", "/pith/", "/api/records", "/api/records?limit=5"):
            st, h, _ = req("GET", path)
            assert st == 200 and h["cache-control"] == LIST and h["cache-tag"] == "pith-lists", \
                (path, h)
        for path in ("/api/pith-number/resolve?pith=%s&json=1" % B,
                     "/api/pith-number/resolve?pith=%s" % B):
            st, h, _ = req("GET", path)
            assert st in (200, 302) and h["cache-control"] == LIST and h["cache-tag"] == tag(B), \
                (path, st, h)

    @case("the manifest: as a record's documents; the signing key: %s" % KEY)
    def _():
        st, h, _ = req("GET", "/pith-mirrors.json")
        assert st == 200 and h["cache-control"] == REC and "cache-tag" not in h, h
        st, h, _ = req("GET", "/pith-signing-key.json")
        assert st == 200 and h["cache-control"] == KEY, h

    @case("the change feed: no-cache, no ETag; each entry's cache_tag is its record's Cache-Tag")
    def _():
        d, h, _ = u.get_json("/api/changes?limit=10000")
        assert h["cache-control"] == "no-cache" and "etag" not in h, h
        assert d["changes"], d
        for ch in d["changes"]:
            assert ch["cache_tag"] == "pith-" + ch["pith_number"][-26:], ch
        mine = [ch for ch in d["changes"] if ch["pith_number"] == gen_rec]
        _, h, _ = req("GET", "/pith/%s/state.json" % B)
        assert mine and mine[0]["cache_tag"] == h["cache-tag"], (mine, h)

    @case("per node or per request: /metrics, /healthz, POST /events, a preflight: no-store")
    def _():
        for path in ("/metrics", "/healthz"):
            st, h, _ = req("GET", path)
            assert st == 200 and h["cache-control"] == "no-store" and "cache-tag" not in h, (path, h)
        st, h, _ = req("POST", "/events", body=held[0])
        assert st == 202 and h["cache-control"] == "no-store", (st, h)
        st, h, _ = req("OPTIONS", "/pith/%s.json" % B,
                       {"Origin": "https://x.example", "Access-Control-Request-Method": "GET"})
        assert st == 204 and h["cache-control"] == "no-store", (st, h)

    @case("errors: an unknown or malformed identifier %s (Vary: Accept, no tag); a protocol "
          "error, 405, 414, 503: no-store" % ERR)
    def _():
        for path in ("/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA.json", "/pith/nonsense!/state.json",
                     "/api/pith-number/resolve?arxiv=9999.99999&json=1"):
            st, h, _ = req("GET", path)
            assert st in (400, 404) and h["cache-control"] == ERR, (path, st, h)
            assert h["vary"] == "Accept" and "cache-tag" not in h and "etag" not in h, (path, h)
        st, h, _ = req("GET", "/no/such/route")
        assert st == 404 and h["cache-control"] == "no-store", (st, h)
        st, h, _ = req("DELETE", "/pith/%s.json" % B)
        assert st == 405 and h["cache-control"] == "no-store", (st, h)
        st, h, _ = req("GET", "/pith/" + "A" * 5000)
        assert st == 414 and h["cache-control"] == "no-store", (st, h)
        st, h, _ = req("GET", "/search?q=anything")  # no index on this server: 503
        assert st == 503 and h["cache-control"] == "no-store", (st, h)
        resp = u.raw(b"GET /pith/a%00b HTTP/1.1\r\nHost: t\r\n\r\n")
        assert u.status_of(resp) == 400 and b"Cache-Control: no-store" in resp, resp[:300]

    @case("immutable: /api/event/{EVENT_ID} and /api/bundle/{BUNDLE_SHA256}: the stored "
          "bytes, %s, no tag; 304 by ETag (and by date for the bundle); gzip; HEAD; "
          "400 for a malformed hash, 404 for an unknown one" % IMM)
    def _():
        evs, _, _ = u.get_json("/api/pith-number/%s/events.json" % B)
        bd = req("GET", "/pith/%s/bundle.json" % A)[2]
        sha = json.loads(bd)["bundle_signature"]["bundle_sha256"]
        docs = [("/api/event/%s" % e["event_id"], None) for e in evs["events"]]
        docs += [("/api/event/%s" % evs["events"][0]["event_id"][7:], None),
                 ("/api/bundle/%s" % sha, bd), ("/api/bundle/sha256:%s" % sha, bd)]
        for path, want in docs:
            st, h, body = req("GET", path)
            assert st == 200 and h["cache-control"] == IMM, (path, st, h)
            assert h["content-type"] == "application/json" and "cache-tag" not in h, (path, h)
            if want is None:  # an event: the bytes events.json lists, by id
                assert json.loads(body)["event_id"] == "sha256:" + path.rsplit("/", 1)[1][-64:]
                assert body.decode() in req("GET", "/api/pith-number/%s/events.json" % B)[2].decode()
            else:
                assert body == want and h.get("last-modified"), (path, h)
                st, h2, _ = req("GET", path, {"If-Modified-Since": h["last-modified"]})
                assert st == 304 and h2["cache-control"] == IMM, (path, st)
            st, h2, b2 = req("GET", path, {"If-None-Match": h["etag"]})
            assert st == 304 and not b2 and h2["cache-control"] == IMM and h2["etag"] == h["etag"]
            st, hz, bz = req("GET", path, {"Accept-Encoding": "gzip"})
            assert hz.get("content-encoding") == "gzip" and gzip.decompress(bz) == body, path
            assert hz["etag"] == h["etag"][:-1] + '-gzip"' and hz["cache-control"] == IMM, path
            assert "Accept-Encoding" in hz["vary"], hz
            st, hh, bh = req("HEAD", path)
            assert st == 200 and not bh and hh["cache-control"] == IMM, (path, st)
        for path in ("/api/event/" + "0" * 64, "/api/bundle/" + "0" * 64):
            st, h, _ = req("GET", path)
            assert st == 404 and h["cache-control"] == ERR, (path, st, h)
        for path in ("/api/event/xyz", "/api/bundle/" + "A" * 64, "/api/event/sha256:" + "0" * 63,
                     "/api/bundle/" + "0" * 65):
            st, h, body = req("GET", path)
            assert st == 400 and h["cache-control"] == ERR, (path, st, h)
            assert b"64 lower-case hex" in body, body
        st, h, _ = req("GET", "/api/event/")
        assert st == 404 and h["cache-control"] == "no-store", (st, h)

    @case("a record that changes: its state.json's ETag and Last-Modified move (a later date, "
          "If-Modified-Since of the old one 200), the same on every read while it does not, "
          "and another record's stay as they were")
    def _():
        import email.utils

        def changed_rec():
            d, _, _ = u.get_json("/api/changes?limit=10000")
            return d["changes"][-1]["pith_number"]

        def heads(path):
            st, h, body = req("GET", path)
            assert st == 200 and h.get("etag") and h.get("last-modified"), (path, st, h)
            return h["etag"], h["last-modified"], body

        other = "/pith/%s/state.json" % B
        o1 = heads(other)
        mine = held[10:20]  # the held back records' second, ten events
        st, _, _ = req("POST", "/events", body=b"\n".join(mine[:5]))
        assert st == 202, st
        deadline = time.time() + 10
        while changed_rec()[-26:] == B or req("GET", "/pith/%s/state.json" % changed_rec()[-26:])[0] != 200:
            assert time.time() < deadline, "the posted events were not committed"
            time.sleep(0.1)
        rec = changed_rec()
        path = "/pith/%s/state.json" % rec[-26:]
        time.sleep(1.1)  # documents are dated once the second of their date has ended
        e1, lm1, b1 = heads(path)
        assert heads(path) == (e1, lm1, b1) and heads(other) == o1
        time.sleep(1.1)
        st, _, _ = req("POST", "/events", body=b"\n".join(mine[5:]))
        assert st == 202, st
        deadline = time.time() + 10
        while req("GET", path)[1].get("etag") == e1:  # no date within the change's second
            assert time.time() < deadline, "the record's state.json did not change"
            time.sleep(0.1)
        time.sleep(1.1)
        e2, lm2, b2 = heads(path)
        assert b2 != b1 and e2 != e1, (e1, e2)
        assert email.utils.parsedate_to_datetime(lm2) > email.utils.parsedate_to_datetime(lm1), \
            (lm1, lm2)
        assert heads(path) == (e2, lm2, b2) and heads(other) == o1, (heads(other), o1)
        st, _, body = req("GET", path, {"If-Modified-Since": lm1})
        assert st == 200 and body == b2, st
        st, _, _ = req("GET", path, {"If-Modified-Since": lm2})
        assert st == 304, st

    @case("--max-age 0: every document no-cache, errors not cached at all")
    def _():
        assert servers[0].stop() == 0  # the store's lock: one server at a time
        s0 = u.Server(args.serve, store, root, trust + ["--max-age", "0"])
        servers.append(s0)
        for path, _ in record_docs[:3] + [("/", None), ("/api/changes", None)]:
            st, h, _ = req("GET", path, server=s0)
            assert st == 200 and h["cache-control"] == "no-cache", (path, h)
        st, h, _ = req("GET", "/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA.json", server=s0)
        assert st == 404 and h["cache-control"] == "no-store", h
        e = json.loads(req("GET", "/api/pith-number/%s/events.json" % B, server=s0)[2])["events"][0]
        st, h, _ = req("GET", "/api/event/" + e["event_id"], server=s0)
        assert st == 200 and h["cache-control"] == IMM, h  # the bytes never change, whatever M


if __name__ == "__main__":
    u.main(run_cases)
