#!/usr/bin/env python3
"""HTTP views (issue 6) against the http_serve harness (node/http/http.c over a
store, with node/ingest/ingest.c as the POST /events pipeline): the routes
and what comes in through them, python3 standard library only: http.client
for ordinary requests, raw sockets for the malformed ones.

- every route, its status codes, its headers (ETag, Content-Type, Vary,
  Allow, Location) and HEAD/OPTIONS; ETag/If-None-Match and 304;
- every ID form, malformed IDs (400), unknown records (404), ambiguity;
- path tricks: dot segments raw and encoded, encoded slashes, NUL,
  backslashes, absolute-form targets, fragments (400, never a file);
- the registry page's verify one-liner, unchanged but for the host, and
  the one our own page prints; a fetched bundle.json verified with
  `pithctl verify` and, independently, with cryptography's Ed25519 in
  /usr/bin/python3;
- POST /events: one document, JSON Lines, duplicates, tampered and
  untrusted events with their reasons (400), a mixed batch, too many
  events (413), empty bodies; events stored through POST show up in the
  views; HTML escapes peer-controlled text;
- /api/changes, the feed; /pith-mirrors.json in the registry's manifest
  format with this mirror and its peers; /healthz; /metrics counts what
  happened above (so it stays in this part).

Limits, slow clients and connections: http_conn_test.py; pithd's own
HTTP: http_pithd_test.py; setup and helpers: http_test_util.py.

usage: http_test.py --serve S --pithctl C --gen-events G --data DIR
                    [--pithd P] [--keep]
"""

import hashlib
import html
import json
import os
import re
import shutil
import subprocess

from http_test_util import (
    AR7B, AR7B_BODY, AR7B_STATE, AR7B_CANON, REGISTRY_PK, ONE_LINER, log, case, canon, req,
    get_json, raw, status_of, raw_get, metrics, main)

S = None  # the main server, set by main


def run_cases(args, root, base, gen_rec, gen_body, held, untrusted, opkey, servers, store, trust):
    P = args.pithctl

    @case("state.json is the node's merged state, canonical, ETag = state_sha256")
    def _():
        st, h, b = req("GET", "/pith/%s/state.json" % AR7B_BODY)
        assert st == 200, st
        assert h["etag"] == '"%s"' % AR7B_STATE, h.get("etag")
        assert h["content-type"] == "application/json"
        d = json.loads(b)
        assert canon(d) == b, "not canonical"
        assert d["state_sha256"] == AR7B_STATE
        with open(os.path.join(args.data, "bundle-AR7B3DEV.json"), "rb") as f:
            assert canon(json.load(f)["state"]) == b, "differs from the published state"
        # a generated record: the ETag is its own state_sha256
        st, h, b = req("GET", "/pith/%s/state.json" % gen_body)
        assert st == 200 and h["etag"] == '"%s"' % json.loads(b)["state_sha256"]

    @case("every ID form reaches the same record")
    def _():
        forms = [AR7B_BODY, AR7B, "pith:AR7B3DEV", "AR7B3DEV", "pith:AR7B3DEVMOTS",
                 "AR7B3DEVMOTSBRCC", "arxiv:2401.14489", "2401.14489", "arxiv:2401.14489v2",
                 "pith%3A2024%3AAR7B3DEVMOTSBRCCVXUCLYSRRE"]
        for f in forms:
            for path in ("/pith/%s/state.json", "/pith/%s/bundle.json",
                         "/.well-known/pith/%s/bundle.json", "/pith/%s.json",
                         "/api/pith-number/%s/events.json", "/api/pith-number/%s/graph.json"):
                st, _, b = req("GET", path % f)
                assert st == 200, "%s: %d %s" % (path % f, st, b[:200])
            d, _, _ = get_json("/pith/%s.json" % f)
            assert d["pith_number"] == AR7B, (f, d["pith_number"])

    @case("malformed IDs are 400, unknown records 404, both as JSON errors")
    def _():
        for bad in ("not-an-id", "AR7B", "AR7B3DEVMOTSBRCCVXUCLYSRRE1", "pith:2024:AR7B",
                    "pith:abcd:AR7B3DEVMOTSBRCCVXUCLYSRRE", "%20", "AR7B3DEV_"):
            for path in ("/pith/%s", "/pith/%s.json", "/pith/%s/state.json",
                         "/api/pith-number/%s/events.json"):
                st, h, b = req("GET", path % bad)
                assert st == 400, "%s: %d" % (path % bad, st)
                assert json.loads(b)["error"] == "bad_request"
        unknown = "ZZZZZZZZZZZZZZZZZZZZZZZZZZ"
        for path in ("/pith/%s", "/pith/%s.json", "/pith/%s/state.json", "/pith/%s/bundle.json",
                     "/.well-known/pith/%s/bundle.json", "/api/pith-number/%s/events.json",
                     "/api/pith-number/%s/graph.json", "/pith/pith:2023:" + AR7B_BODY + "%s"):
            p = path % unknown if "%s" in path and "2023" not in path else path % ""
            st, h, b = req("GET", p)
            assert st == 404, "%s: %d" % (p, st)
            assert json.loads(b)["error"] == "not_found"
        # a record without a bundle: 404 for bundle.json only
        st, _, b = req("GET", "/pith/%s/bundle.json" % gen_body)
        assert st == 404 and b"bundle" in b

    @case("unknown paths are 404; trailing slashes and extra segments too")
    def _():
        # /pith/{ID}/ is the record page (the form pages link, for wget --mirror)
        st, _, _ = req("GET", "/pith/%s/" % AR7B_BODY)
        assert st == 200, "/pith/ID/: %d" % st
        for p in ("/pith", "/pith/%s/x/" % AR7B_BODY, "/pith/%s/x.json" % AR7B_BODY,
                  "/pith/%s/state.json/x" % AR7B_BODY, "/index.html", "/api/pith-number",
                  "/.well-known/pith/%s" % AR7B_BODY, "/etc/passwd", "/events/x"):
            st, _, _ = req("GET", p)
            assert st == 404, "%s: %d" % (p, st)

    @case("path tricks are refused with 400: dot segments, encoded slashes, NUL, backslashes")
    def _():
        tricks = [b"/pith/../../../../etc/passwd", b"/pith/%2e%2e/%2e%2e/etc/passwd",
                  b"/pith/%2E%2E/state.json", b"/pith/..%2fstate.json", b"/pith/a%2Fb/state.json",
                  b"/pith/AR7B3DEV%00/state.json", b"/pith/AR7B3DEV%5c..%5c/state.json",
                  b"/pith/AR7B3DEV\\..\\x", b"/./pith/AR7B3DEV", b"//pith/AR7B3DEV",
                  b"/pith/AR7B3DEV%", b"/pith/AR7B3DEV%zz", b"/pith/%C0%AE%C0%AE/x",
                  b"/.well-known/pith/../../etc/passwd", b"/pith/AR7B3DEV#frag"]
        for t in tricks:
            st = raw_get(t)
            assert st == 400, "%r: %r" % (t, st)
        # absolute-form and asterisk-form targets
        assert raw_get(b"http://127.0.0.1/pith/AR7B3DEV/state.json") == 400
        assert status_of(raw(b"OPTIONS * HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")) == 400
        # a NUL byte in the raw request line: evhttp or we refuse it
        st = status_of(raw(b"GET /pith/AR7B3DEV\x00/state.json HTTP/1.1\r\nHost: t\r\n\r\n"))
        assert st in (400, None), st
        assert S.alive()

    @case("the page is HTML by default, JSON-LD when asked; Vary: Accept (and Accept-Encoding); ETags differ")
    def _():
        st, h, b = req("GET", "/pith/" + AR7B_BODY)
        assert st == 200 and h["content-type"] == "text/html; charset=utf-8"
        assert h["vary"] == "Accept, Accept-Encoding" and "default-src 'none'" in h["content-security-policy"]
        assert b"<h1>pith:AR7B3DEV</h1>" in b and AR7B_CANON.encode() in b
        st, h2, b2 = req("GET", "/pith/" + AR7B_BODY, {"Accept": "application/ld+json"})
        assert st == 200 and h2["content-type"] == "application/ld+json"
        d = json.loads(b2)
        assert d["@context"] == "https://schema.org" and d["pith_number"] == AR7B
        assert hashlib.sha256(canon(d["canonical_record"])).hexdigest() == AR7B_CANON
        assert h["etag"] != h2["etag"]
        # browsers: text/html first
        st, h3, _ = req("GET", "/pith/" + AR7B_BODY,
                        {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
        assert h3["content-type"].startswith("text/html")
        st, h4, _ = req("GET", "/pith/" + AR7B_BODY,
                        {"Accept": "text/html;q=0.5, application/ld+json"})
        assert h4["content-type"] == "application/ld+json"
        st, h5, _ = req("GET", "/pith/" + AR7B_BODY, {"Accept": "application/json"})
        assert h5["content-type"] == "application/ld+json"

    @case("the registry's verify one-liner, unchanged but for the host, prints the canonical hash")
    def _():
        if not shutil.which("jq") or not shutil.which("curl"):
            raise RuntimeError("needs curl and jq")
        cmd = ONE_LINER.replace("https://pith.science", base)
        assert cmd != ONE_LINER
        out = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == AR7B_CANON, out.stdout
        # the registry page's own line (a different record) with host and ID replaced
        with open(os.path.join(args.data, "page-KTOD5XCX.txt")) as f:
            page = f.read()
        m = re.search(r"(curl -sH .*?\n.*?\n.*?hexdigest\(\)\)\")", page, re.S)
        line = m.group(1).replace("https://pith.science", base).replace(
            "KTOD5XCX7OWLNBEYLHJGTWMQQ7", AR7B_BODY)
        out = subprocess.run(["bash", "-c", "set -o pipefail; " + line], capture_output=True,
                             text=True, timeout=60)
        assert out.stdout.strip() == AR7B_CANON, (line, out.stdout, out.stderr)

    @case("the verify line our own HTML page prints works as printed")
    def _():
        st, _, b = req("GET", "/pith/" + AR7B_BODY)
        m = re.search(r"<pre>(curl .*?)\n# expect: ([0-9a-f]{64})</pre>", b.decode(), re.S)
        assert m, "no verify block"
        cmd, want = html.unescape(m.group(1)), m.group(2)
        assert want == AR7B_CANON
        out = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True,
                             text=True, timeout=60)
        assert out.stdout.strip() == want, (cmd, out.stdout, out.stderr)

    @case("bundle.json is the verified bundle byte for byte; pithctl verify accepts it")
    def _():
        st, h, b = req("GET", "/pith/%s/bundle.json" % AR7B_BODY)
        assert st == 200
        assert h["etag"] == '"%s"' % hashlib.sha256(b).hexdigest()
        with open(os.path.join(args.data, "bundle-AR7B3DEV.json"), "rb") as f:
            assert canon(json.load(f)) == b
        st2, h2, b2 = req("GET", "/.well-known/pith/%s/bundle.json" % AR7B_BODY)
        assert b2 == b and h2["etag"] == h["etag"]
        path = os.path.join(root, "fetched-bundle.json")
        with open(path, "wb") as f:
            f.write(b)
        out = subprocess.run([P, "verify", path], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "bundle_signature" in out.stdout

    @case("the fetched bundle verifies independently with cryptography's Ed25519")
    def _():
        py = "/usr/bin/python3"
        probe = subprocess.run([py, "-c", "import cryptography"], capture_output=True)
        # scripts/deps.sh installs python3-cryptography: missing is a broken setup
        assert probe.returncode == 0, "%s has no cryptography module" % py
        path = os.path.join(root, "fetched-bundle.json")
        script = r'''
import base64, hashlib, json, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
b = json.load(open(sys.argv[1]))
pk = Ed25519PublicKey.from_public_bytes(bytes.fromhex(sys.argv[2]))
sig = b["bundle_signature"]
body = {k: v for k, v in b.items() if k != "bundle_signature"}
digest = hashlib.sha256(canon(body)).digest()
assert digest.hex() == sig["bundle_sha256"], "bundle_sha256"
pk.verify(base64.b64decode(sig["signature_b64"]), digest)
n = 0
for e in b["events"]:
    content = {k: v for k, v in e.items() if k not in ("signature", "content_sha256", "event_id")}
    d = hashlib.sha256(canon(content)).digest()
    assert d.hex() == e["content_sha256"] and e["event_id"] == "sha256:" + d.hex()
    pk.verify(base64.b64decode(e["signature"]["signature_b64"]), d)
    n += 1
rec = b["canonical_record"]
assert hashlib.sha256(canon(rec)).hexdigest() == b["canonical_sha256"]
print("verified bundle and %d events" % n)
'''
        out = subprocess.run([py, "-c", script, path, REGISTRY_PK], capture_output=True,
                             text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        log(out.stdout.strip())

    @case("record view: shaped like the registry's record view, from the local state")
    def _():
        with open(os.path.join(args.data, "record-RCCNG3LI.json")) as f:
            reg = json.load(f)
        d, h, b = get_json("/pith/%s.json" % AR7B_BODY)
        assert canon(d) == b
        for k in ("record_type", "schema_url", "pith_number", "short_pith_number",
                  "schema_version", "canonical_sha256", "source", "attestation_state", "paper",
                  "verification_status", "canonical_record", "receipt", "graph_snapshot",
                  "aliases", "events", "event_summary", "links", "agent_actions", "created_at",
                  "updated_at"):
            assert k in d and k in reg, k
        assert d["canonical_sha256"] == AR7B_CANON
        assert d["short_pith_number"] == "pith:AR7B3DEV"
        assert d["paper"]["title"].startswith("The Case for Co-Designing")
        assert d["aliases"][0] == {"alias_kind": "arxiv", "alias_value": "2401.14489",
                                   "created_at": "2026-07-05T07:39:34Z"}
        assert d["links"]["json"] == base + "/pith/%s.json" % AR7B_BODY
        assert d["agent_actions"]["resolve_alias"] == \
            base + "/api/pith-number/resolve?arxiv=2401.14489&json=true"
        assert d["state_sha256"] == AR7B_STATE
        # a record with no bundle: aliases derived from its canonical record
        g, _, _ = get_json("/pith/%s.json" % gen_body)
        assert g["pith_number"] == gen_rec and g["canonical_record"] is not None
        assert isinstance(g["aliases"], list)

    @case("events.json lists the stored events in order, with pages")
    def _():
        d, _, b = get_json("/api/pith-number/%s/events.json" % gen_body)
        assert canon(d) == b
        assert d["event_count"] == len(d["events"]) >= 2
        keys = [(e["created_at"], e["event_id"]) for e in d["events"]]
        assert keys == sorted(keys)
        p1, _, _ = get_json("/api/pith-number/%s/events.json?limit=3" % gen_body)
        assert len(p1["events"]) == 3 and p1["next_offset"] == 3
        p2, _, _ = get_json("/api/pith-number/%s/events.json?offset=3&limit=1000" % gen_body)
        assert p1["events"] + p2["events"] == d["events"] and p2["next_offset"] is None
        for q in ("limit=-1", "offset=x", "limit=1&limit=2", "offset=99999999999999"):
            st, _, _ = req("GET", "/api/pith-number/%s/events.json?%s" % (gen_body, q))
            assert st == 400, (q, st)

    @case("graph.json carries the newest graph snapshot and the typed links")
    def _():
        d, _, _ = get_json("/api/pith-number/%s/graph.json" % AR7B_BODY)
        assert d["pith_number"] == AR7B and d["state_sha256"] == AR7B_STATE
        assert d["graph_snapshot"]["paper"]["title"].startswith("The Case for")
        assert d["graph_snapshot_event"]["event_id"].startswith("sha256:")
        assert d["citation_signatures"] == []

    @case("resolve: arxiv, versioned arxiv, doi, pith short and full; 302 without json=true")
    def _():
        for q in ("arxiv=2401.14489", "arxiv=2401.14489v2", "arxiv=arxiv:2401.14489",
                  "doi=10.48550/arxiv.2401.14489", "doi=10.48550%2Farxiv.2401.14489",
                  "pith=pith:AR7B3DEV", "pith=AR7B3DEV", "pith=" + AR7B, "id=2401.14489"):
            d, h, _ = get_json("/api/pith-number/resolve?%s&json=true" % q)
            assert d["found"] and d["pith_number"] == AR7B, q
            assert d["url"] == base + "/pith/" + AR7B_BODY
        st, h, b = req("GET", "/api/pith-number/resolve?arxiv=2401.14489")
        assert st == 302 and h["location"] == base + "/pith/" + AR7B_BODY, (st, h)
        st, _, _ = req("GET", "/api/pith-number/resolve?arxiv=2401.99999&json=true")
        assert st == 404
        for q in ("", "json=true", "arxiv=&json=true", "arxiv=1&doi=2&json=true",
                  "arxiv=1&arxiv=2", "arxiv=%3Cscript%3E&json=true", "pith=ZZ&json=true"):
            st, _, b = req("GET", "/api/pith-number/resolve?" + q)
            assert st == 400, (q, st, b)

    @case("ETag and If-None-Match: 304 with no body; weak, listed and * match; others 200")
    def _():
        for path in ("/pith/%s/state.json" % AR7B_BODY, "/pith/%s/bundle.json" % AR7B_BODY,
                     "/pith/%s.json" % AR7B_BODY, "/pith/%s" % AR7B_BODY,
                     "/api/pith-number/%s/events.json" % AR7B_BODY,
                     "/api/pith-number/%s/graph.json" % AR7B_BODY, "/pith-mirrors.json",
                     "/api/pith-number/resolve?arxiv=2401.14489&json=true"):
            st, h, b = req("GET", path)
            etag = h["etag"]
            assert re.fullmatch(r'"[0-9a-f]{64}"', etag), (path, etag)
            st, h2, b2 = req("GET", path, {"If-None-Match": etag})
            assert st == 304 and b2 == b"" and h2["etag"] == etag, (path, st)
            st, _, _ = req("GET", path, {"If-None-Match": "W/" + etag})
            assert st == 304
            st, _, _ = req("GET", path, {"If-None-Match": '"x", %s' % etag})
            assert st == 304
            st, _, _ = req("GET", path, {"If-None-Match": "*"})
            assert st == 304
            st, _, b3 = req("GET", path, {"If-None-Match": '"%s"' % ("0" * 64)})
            assert st == 200 and len(b3) == len(b)
            # HEAD: same headers, no body
            st, h4, b4 = req("HEAD", path)
            assert st == 200 and b4 == b"" and h4["etag"] == etag
            assert int(h4["content-length"]) == len(b)

    @case("methods: 405 with Allow on known routes, OPTIONS 204, 404 first for unknown paths")
    def _():
        for m in ("POST", "PUT", "DELETE", "PATCH"):
            st, h, _ = req(m, "/pith/%s/state.json" % AR7B_BODY, body=b"x")
            assert st == 405 and h["allow"] == "GET, HEAD, OPTIONS", (m, st)
        for m in ("GET", "HEAD", "PUT", "DELETE"):
            st, h, _ = req(m, "/events")
            assert st == 405 and h["allow"] == "POST, OPTIONS", (m, st)
        st, h, _ = req("OPTIONS", "/pith/%s" % AR7B_BODY)
        assert st == 204 and "GET" in h["allow"]
        st, _, _ = req("DELETE", "/nothing")
        assert st == 404
        st = status_of(raw(b"TRACE /pith/AR7B3DEV HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"))
        assert st == 405, st
        st = status_of(raw(b"BREW /pith/AR7B3DEV HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"))
        assert st in (400, 405, 501), st
        # a GET with a body is refused
        st, _, _ = req("GET", "/pith/%s/state.json" % AR7B_BODY, body=b"hello")
        assert st == 400

    @case("POST /events: one event stored (202), then a duplicate; the record appears")
    def _():
        ev = held[0]
        subj = json.loads(ev)["subject_pith_number"]
        st, _, _ = req("GET", "/pith/%s/state.json" % subj[-26:])
        assert st == 404
        st, h, b = req("POST", "/events", {"Content-Type": "application/json"}, ev)
        d = json.loads(b)
        assert st == 202, (st, b)
        assert d["stored"] == 1 and d["rejected"] == 0
        r = d["results"][0]
        assert r["ok"] and r["outcome"] == "stored" and r["line"] == 1
        assert r["event_id"] == json.loads(ev)["event_id"]
        st, _, b = req("POST", "/events", {"Content-Type": "application/json"}, ev)
        d = json.loads(b)
        assert st == 202 and d["duplicate"] == 1 and d["results"][0]["outcome"] == "duplicate"
        st, _, b = req("GET", "/pith/%s/state.json" % subj[-26:])
        assert st == 200 and json.loads(ev)["event_id"] in json.loads(b)["applied_event_ids"]

    @case("POST /events: JSON Lines of many events, all stored; the views show them")
    def _():
        body = b"\n".join(held[1:100]) + b"\n"
        st, _, b = req("POST", "/events", {"Content-Type": "application/x-ndjson"}, body)
        d = json.loads(b)
        assert st == 202 and d["stored"] == 99 and d["accepted"] == 99, (st, b[:300])
        assert [r["line"] for r in d["results"]] == list(range(1, 100))
        subj = json.loads(held[50])["subject_pith_number"]
        ev, _, _ = get_json("/api/pith-number/%s/events.json" % subj[-26:])
        ids = {e["event_id"] for e in ev["events"]}
        assert json.loads(held[50])["event_id"] in ids
        # a pretty-printed single document is one event
        pretty = json.dumps(json.loads(held[100]), indent=2).encode()
        st, _, b = req("POST", "/events", {}, pretty)
        assert st == 202 and json.loads(b)["stored"] == 1, b

    @case("POST /events: tampered, untrusted and malformed events are 400 with the reason")
    def _():
        e = json.loads(held[101])
        bad_hash = dict(e, created_at="2031-01-01T00:00:00Z")
        bad_sig = json.loads(held[102])
        sig = bad_sig["signature"]["signature_b64"]
        bad_sig["signature"]["signature_b64"] = ("A" if sig[0] != "A" else "B") + sig[1:]
        bad_id = dict(json.loads(held[103]), event_id="sha256:" + "0" * 64)
        cases = [
            (canon(bad_hash), "content_hash"),
            (canon(bad_sig), "signature"),
            (canon(bad_id), "event_id"),
            (untrusted[0], "untrusted_key"),
            (b'{"event_type":"x"}', "shape"),
            (b'{"a":1,"a":2}', "json"),
            (b"not json at all", "json"),
            (b'{"unterminated": "', "json"),
        ]
        for body, reason in cases:
            st, _, b = req("POST", "/events", {}, body)
            d = json.loads(b)
            assert st == 400, (reason, st, b)
            r = d["results"][0]
            assert not r["ok"] and r["reason"] == reason, (reason, r)
            assert r["error"], r
        # nothing of those was stored
        for e in (bad_hash, bad_sig, json.loads(untrusted[0])):
            d, _, _ = get_json("/api/pith-number/%s/events.json" %
                               e["subject_pith_number"][-26:])
            assert e["event_id"] not in [x["event_id"] for x in d["events"]]

    @case("POST /events: a mixed batch is 400 and says per line what was stored")
    def _():
        body = b"\n".join([held[110], b"garbage", held[111], untrusted[1]])
        st, _, b = req("POST", "/events", {}, body)
        d = json.loads(b)
        assert st == 400 and d["stored"] == 2 and d["rejected"] == 2, b
        assert [(r["line"], r["ok"]) for r in d["results"]] == \
            [(1, True), (2, False), (3, True), (4, False)]
        assert d["results"][1]["reason"] == "json"
        assert d["results"][3]["reason"] == "untrusted_key"

    @case("POST /events: empty 400, too many events 413, too large 413")
    def _():
        for body in (b"", b"\n\n  \n"):
            st, _, _ = req("POST", "/events", {}, body)
            assert st == 400, st
        st, _, b = req("POST", "/events", {}, b"\n".join(held[:101]))
        assert st == 413 and b"more than 100" in b, (st, b)
        # the server answers 413 as soon as the length is known, and closes:
        # the client sees it before sending the body
        out = raw(b"POST /events HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" %
                  ((1 << 20) + 1))
        assert status_of(out) == 413, out[:200]

    @case("HTML escapes peer-controlled text (titles, authors) from a signed event")
    def _():
        ev = {"event_type": "graph_snapshot", "subject_pith_number": gen_rec,
              "target": "graph", "created_at": "2031-01-01T00:00:00Z",
              "payload": {"graph_snapshot": {"paper": {
                  "title": "<script>alert('t')</script> & \"quotes\"",
                  "authors_text": "Eve <img src=x onerror=alert(1)>, Mallory"}}}}
        signed = subprocess.run([P, "sign", "--key", opkey, "-"], input=json.dumps(ev).encode(),
                                capture_output=True, check=True).stdout.strip()
        st, _, b = req("POST", "/events", {}, signed)
        assert st == 202, b
        st, h, page = req("GET", "/pith/" + gen_body)
        assert st == 200
        assert b"<script>" not in page and b"<img" not in page, page[:2000]
        assert b"&lt;script&gt;alert(&#39;t&#39;)&lt;/script&gt; &amp; &quot;quotes&quot;" in page
        assert b"Eve &lt;img src=x onerror=alert(1)&gt;" in page
        d, _, _ = get_json("/pith/" + gen_body, headers={"Accept": "application/ld+json"})
        assert d["name"].startswith("<script>")  # JSON keeps the text; it is data there
        assert [a["name"] for a in d["author"]] == ["Eve <img src=x onerror=alert(1)>", "Mallory"]

    def feed_all(after=None, limit=None):
        """Every entry of the feed after a cursor, page by page through
        next until a page is empty; (entries, last next, pages)."""
        out, pages, cur = [], 0, after
        while True:
            q = []
            if cur is not None:
                q.append("after=" + cur)
            if limit is not None:
                q.append("limit=%d" % limit)
            d, h, b = get_json("/api/changes" + ("?" + "&".join(q) if q else ""))
            assert canon(d) == b, "not canonical"
            assert set(d) == {"changes", "next"}, set(d)
            assert h["content-type"] == "application/json"
            pages += 1
            if limit is not None:
                assert len(d["changes"]) <= limit
            if not d["changes"]:
                assert cur is None or d["next"] == cur, (cur, d["next"])
                return out, d["next"], pages
            assert d["next"] == d["changes"][-1]["cursor"]
            out += d["changes"]
            cur = d["next"]

    def post_signed(subject, created_at, n):
        ev = {"event_type": "citation_signature", "subject_pith_number": subject,
              "target": "feed-%d" % n, "created_at": created_at, "payload": {"n": n}}
        signed = subprocess.run([P, "sign", "--key", opkey, "-"], input=json.dumps(ev).encode(),
                                capture_output=True, check=True).stdout.strip()
        st, _, b = req("POST", "/events", {}, signed)
        assert st == 202 and json.loads(b)["stored"] == 1, b

    @case("/api/changes: every record once, in commit order, with state.json's ETag and its bundle")
    def _():
        entries, nxt, pages = feed_all(limit=64)
        health, _, _ = get_json("/healthz")
        names = [e["pith_number"] for e in entries]
        assert len(names) == len(set(names)), "a record listed twice"
        assert len(names) == health["store"]["records"], (len(names), health)
        assert pages == -(-len(names) // 64) + 1, pages
        cursors = [int(e["cursor"]) for e in entries]
        assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
        assert nxt == entries[-1]["cursor"]
        for e in entries:
            assert set(e) == {"cursor", "pith_number", "state_sha256", "bundle_sha256",
                              "built_at", "cache_tag"}, e
            assert re.fullmatch(r"[0-9a-f]{64}", e["state_sha256"]), e
        by = {e["pith_number"]: e for e in entries}
        for rec in [AR7B, gen_rec] + names[:5]:
            st, h, _ = req("GET", "/pith/%s/state.json" % rec[-26:])
            assert st == 200 and h["etag"] == '"%s"' % by[rec]["state_sha256"], (rec, h)
        bd, _, _ = get_json("/pith/%s/bundle.json" % AR7B_BODY)
        assert by[AR7B]["bundle_sha256"] == bd["bundle_signature"]["bundle_sha256"]
        assert by[AR7B]["built_at"] == bd["built_at"] == "2026-08-04T06:52:48Z"
        assert by[gen_rec]["bundle_sha256"] is None and by[gen_rec]["built_at"] is None
        # the default page is the whole feed here (fewer than 1000 records)
        d, _, _ = get_json("/api/changes")
        assert d["changes"] == entries and d["next"] == nxt

    @case("/api/changes: a record changed twice is listed once, at its latest change")
    def _():
        before, start, _ = feed_all()
        # a generated record (AR7B keeps the registry's state for later cases)
        other = next(e["pith_number"] for e in before if e["pith_number"] not in (AR7B, gen_rec))
        post_signed(gen_rec, "2031-02-01T00:00:00Z", 1)
        post_signed(other, "2031-02-01T00:00:01Z", 2)
        post_signed(gen_rec, "2031-02-01T00:00:02Z", 3)
        entries, nxt, _ = feed_all(after=start)
        assert [e["pith_number"] for e in entries] == [other, gen_rec], entries
        assert int(entries[0]["cursor"]) > int(start)
        assert nxt == entries[-1]["cursor"]
        st, h, _ = req("GET", "/pith/%s/state.json" % gen_rec[-26:])
        assert h["etag"] == '"%s"' % entries[1]["state_sha256"]
        # from the start too: once, at the end
        whole, _, _ = feed_all()
        assert [e["pith_number"] for e in whole][-2:] == [other, gen_rec]
        assert [e["pith_number"] for e in whole].count(gen_rec) == 1
        # nothing new: empty, and next is the cursor given
        d, _, _ = get_json("/api/changes?after=" + nxt)
        assert d == {"changes": [], "next": nxt}, d
        d, _, _ = get_json("/api/changes?after=18446744073709551615")
        assert d == {"changes": [], "next": "18446744073709551615"}, d

    @case("/api/changes: limit pages, 0 and junk are 400, over the maximum is cut; bad cursors 400")
    def _():
        d, _, _ = get_json("/api/changes?limit=3")
        assert len(d["changes"]) == 3 and d["next"] == d["changes"][-1]["cursor"]
        d2, _, _ = get_json("/api/changes?limit=2&after=" + d["changes"][0]["cursor"])
        assert d2["changes"] == d["changes"][1:3]
        d, _, _ = get_json("/api/changes?limit=100000")
        assert 0 < len(d["changes"]) <= 10000
        for q in ("limit=0", "limit=-1", "limit=abc", "limit=", "after=abc", "after=-1",
                  "after=", "after=1.5", "after=18446744073709551616",
                  "after=99999999999999999999999", "after=1&after=2", "after=%2012"):
            st, h, b = req("GET", "/api/changes?" + q)
            assert st == 400, (q, st, b)
            e = json.loads(b)
            assert e["error"] == "bad_request" and e["message"], (q, e)
            if q.startswith("after"):
                assert "cursor" in e["message"], e
        st, h, _ = req("POST", "/api/changes", {}, b"x")
        assert st == 405, st
        st, h, _ = req("HEAD", "/api/changes")
        assert st == 200, st

    @case("/pith-mirrors.json: the registry's manifest format, this mirror and its peers")
    def _():
        with open(os.path.join(args.data, "pith-mirrors.json")) as f:
            reg = json.load(f)
        d, _, _ = get_json("/pith-mirrors.json")
        assert set(d) == set(reg), set(d) ^ set(reg)
        for k in ("manifest_type", "manifest_version", "merge_version"):
            assert d[k] == reg[k]
        fields = set(reg["mirrors"][0])
        for m in d["mirrors"]:
            # this mirror also says where its change feed is
            want = fields | {"changes_url"} if m["status"] == "self" else fields
            assert set(m) == want, set(m) ^ want
            assert m["public_key"] == reg["mirrors"][0]["public_key"]
        by_url = {m["base_url"]: m for m in d["mirrors"]}
        me = by_url[base]
        assert me["status"] == "self" and me["mirror_type"] == "http"
        assert me["state_pattern"] == base + "/pith/{suffix}/state.json"
        assert me["changes_url"] == base + "/api/changes"
        st, _, _ = req("GET", me["changes_url"].replace(base, "") + "?limit=1")
        assert st == 200
        peer = by_url["https://mirror-one.example.org"]
        assert peer["name"] == "peer-one" and peer["status"] == "peer"
        assert peer["mirror_type"] == "https"
        assert "javascript:alert(1)" not in by_url
        assert not any("@" in u for u in by_url), "credentials listed"
        assert by_url["https://pith.science"]["status"] == "primary"
        # the pattern works here
        st, _, _ = req("GET", me["state_pattern"].replace(base, "").replace("{suffix}", AR7B_BODY))
        assert st == 200

    @case("/healthz and /metrics: counts by route and code, latencies, POST outcomes")
    def _():
        d, h, _ = get_json("/healthz")
        assert d["ok"] and d["store"]["records"] >= 200 and h["cache-control"] == "no-store"
        m0 = metrics()
        k = 'pith_http_requests_total{route="state",code="200"}'
        for _ in range(7):
            req("GET", "/pith/%s/state.json" % AR7B_BODY)
        req("GET", "/pith/ZZZZZZZZ/state.json")
        m1 = metrics()
        assert m1[k] - m0.get(k, 0) == 7, (m0.get(k), m1[k])
        k404 = 'pith_http_requests_total{route="state",code="404"}'
        assert m1[k404] - m0.get(k404, 0) == 1
        assert m1['pith_http_request_duration_seconds_count{route="state"}'] >= 7
        assert 'pith_http_request_duration_seconds_bucket{route="state",le="+Inf"}' in m1
        assert m1['pith_http_post_events_total{outcome="stored"}'] >= 102
        assert m1['pith_http_post_events_rejected_total{reason="signature"}'] >= 1
        assert m1['pith_http_post_events_rejected_total{reason="untrusted_key"}'] >= 2
        assert m1["pith_store_records"] >= 200
        assert m1['pith_http_requests_total{route="other",code="400"}'] >= 10
        st, h, body = req("GET", "/metrics")
        assert h["content-type"].startswith("text/plain; version=0.0.4")
        # every sample line belongs to a family declared before it
        declared = set()
        for line in body.decode().splitlines():
            if line.startswith("# TYPE "):
                declared.add(line.split()[2])
            elif line and not line.startswith("#"):
                name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
                fam = re.sub(r"_(bucket|sum|count)$", "", name)
                assert name in declared or fam in declared, line


if __name__ == "__main__":
    main(run_cases)
