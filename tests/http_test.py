#!/usr/bin/env python3
"""HTTP views (issue 6) against the http_serve harness (node/http/http.c over a
store, with node/ingest/ingest.c as the POST /events pipeline), python3 standard
library only: http.client for ordinary requests, raw sockets for the
malformed ones.

- every route, its status codes, its headers (ETag, Content-Type, Vary,
  Allow, Location) and HEAD/OPTIONS; ETag/If-None-Match and 304;
- every ID form, malformed IDs (400), unknown records (404), ambiguity;
- path tricks: dot segments raw and encoded, encoded slashes, NUL,
  backslashes, absolute-form targets, fragments (400, never a file);
- limits: a long target (414), large headers (431), huge headers (413 from
  evhttp, connection closed), huge and over-long bodies (413);
- slow clients: tricklers and readers that never read while other clients
  are served promptly; idle connections closed after the timeout;
- POST /events: one document, JSON Lines, duplicates, tampered and
  untrusted events with their reasons (400), a mixed batch, too many
  events (413), empty bodies; events stored through POST show up in the
  views; HTML escapes peer-controlled text;
- the registry page's verify one-liner, unchanged but for the host, and
  the one our own page prints; a fetched bundle.json verified with
  `pithctl verify` and, independently, with cryptography's Ed25519 in
  /usr/bin/python3 (skipped with a message if the module is missing);
- /metrics counts what happened; /healthz; /pith-mirrors.json in the
  registry's manifest format with this mirror and its peers;
- with --pithd: pithd's control socket is owner-only (0600).

usage: http_test.py --serve S --pithctl C --gen-events G --data DIR
                    [--pithd P] [--keep]
"""

import argparse
import base64
import hashlib
import html
import http.client
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

AR7B = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
AR7B_BODY = "AR7B3DEVMOTSBRCCVXUCLYSRRE"
AR7B_STATE = "3facdc2aeec0c5e2ff45dd750211a965091b49387ad1b15346dff0bb9a58c999"
AR7B_CANON = "047e1d8c9563a720c442ade825e25189007290160bedcc76b7e523bfd71812d3"
REGISTRY_PK = "b2d552b68890857171a78b36a5dccf368a953413288c353f7c9d9d6f94b709b3"

# The command the issue (and the registry's page) gives, with the host as
# the only thing to replace.
ONE_LINER = ("curl -sH 'Accept: application/ld+json' https://pith.science/pith/"
             "AR7B3DEVMOTSBRCCVXUCLYSRRE | jq -c '.canonical_record' | python3 -c \"import sys,"
             "json,hashlib; print(hashlib.sha256(json.dumps(json.loads(sys.stdin.read()),"
             "sort_keys=True,separators=(',',':'),ensure_ascii=False).encode()).hexdigest())\"")

n_cases = 0
n_failed = 0


def log(*a):
    print("#", *a, flush=True)


def case(name):
    """Decorator: runs the function as one TAP case; an exception or a
    failed assert fails it and the run goes on."""
    def wrap(fn):
        global n_cases, n_failed
        n_cases += 1
        try:
            fn()
            print("ok %d - %s" % (n_cases, name), flush=True)
        except Exception as e:  # noqa: BLE001 - report and continue
            n_failed += 1
            import traceback
            for line in traceback.format_exc().splitlines():
                print("#   " + line)
            print("not ok %d - %s: %s" % (n_cases, name, e), flush=True)
        return fn
    return wrap


def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


# ---- the server -------------------------------------------------------------------


class Server:
    def __init__(self, exe, store, root, extra=()):
        self.port_file = os.path.join(root, "port.%d" % id(self))
        self.log_path = os.path.join(root, "serve.%d.log" % id(self))
        self.log = open(self.log_path, "ab")
        args = [exe, "--store", store, "--port-file", self.port_file] + list(extra)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("http_serve exited %d; see %s" % (self.proc.returncode,
                                                                    self.log_path))
            try:
                with open(self.port_file) as f:
                    self.port = int(f.read())
                break
            except (OSError, ValueError):
                time.sleep(0.05)
        else:
            raise RuntimeError("http_serve did not start")
        self.base = "http://127.0.0.1:%d" % self.port

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.terminate()
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc


S = None  # the main server


def req(method, path, headers=None, body=None, server=None, timeout=30):
    """One request on a fresh connection: (status, headers dict lower-case, body)."""
    srv = server or S
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def get_json(path, status=200, headers=None):
    st, h, b = req("GET", path, headers)
    assert st == status, "GET %s: %d %s" % (path, st, b[:300])
    return json.loads(b), h, b


def raw(data, server=None, timeout=10, read_all=True, tolerate_send=False):
    """Sends bytes on a fresh socket; returns what came back until the
    server closed (or, read_all false, the first chunk). tolerate_send: the
    server may answer and close before it has read everything."""
    srv = server or S
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            if not tolerate_send:
                raise
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                break
        return out
    finally:
        s.close()


def status_of(resp):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", resp)
    return int(m.group(1)) if m else None


def raw_get(target, extra=b""):
    return status_of(raw(b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                         + extra + b"\r\n"))


def metrics():
    st, _, b = req("GET", "/metrics")
    assert st == 200
    out = {}
    for line in b.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, val = line.rsplit(" ", 1)
        out[name] = float(val)
    return out


# ---- data -----------------------------------------------------------------------------


def gen(args, root, name, records, seed, per=10):
    out = os.path.join(root, name + ".jsonl")
    key = os.path.join(root, name + ".key")
    subprocess.run([args.gen_events, "--records", str(records), "--per-record", str(per),
                    "--seed", str(seed), "--key-out", key, out], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out, "rb") as f:
        lines = [l.rstrip(b"\n") for l in f if l.strip()]
    return lines, key


def main():
    global S
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", required=True)
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--gen-events", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--pithd")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="http_test.")
    log("work directory", root)
    store = os.path.join(root, "store")
    P = args.pithctl

    # 200 records of 10 events (seed 1) imported; 20 more records of the
    # same key held back for POST; an untrusted key's events; an operator
    # key of our own for hand-made events.
    lines, key1 = gen(args, root, "gen", 220, 1)
    imported, held = lines[:2000], lines[2000:]
    with open(os.path.join(root, "imported.jsonl"), "wb") as f:
        f.write(b"\n".join(imported) + b"\n")
    untrusted, _ = gen(args, root, "untrusted", 2, 99)
    opkey = os.path.join(root, "op.key")
    subprocess.run([P, "keygen", "--key-id", "http-test-op", opkey], check=True,
                   stdout=subprocess.DEVNULL)
    trust = ["--trust-key", key1, "--trust-key", opkey]
    subprocess.run([P, "--store", store] + trust + ["import", os.path.join(root, "imported.jsonl"),
                   os.path.join(args.data, "bundle-AR7B3DEV.json")], check=True,
                   stdout=subprocess.DEVNULL)
    recs = subprocess.run([P, "--store", store, "records"], check=True, capture_output=True,
                          text=True).stdout.split()
    records = [r for r in recs if r.startswith("pith:")]
    log("store: %d records" % len(records))

    S = Server(args.serve, store, root, trust + [
        "--timeout", "3", "--request-timeout", "5", "--max-post-events", "100",
        "--max-body", str(1 << 20),
        "--mirror", "peer-one=https://mirror-one.example.org/",
        "--mirror", "bad=javascript:alert(1)",
        "--mirror", "creds=http://user:pw@evil.example"])
    base = S.base
    gen_rec = records[0] if records[0] != AR7B else records[1]
    gen_body = gen_rec[-26:]
    servers = [S]
    ok_all = False
    try:
        run_cases(args, root, base, gen_rec, gen_body, held, untrusted, opkey, servers, store,
                  trust)
        ok_all = n_failed == 0
    finally:
        for s in servers:
            if s.alive():
                rc = s.stop()
                if rc != 0:
                    print("not ok - http_serve exited %d on SIGTERM" % rc)
                    ok_all = False
        print("1..%d" % n_cases)
        if not ok_all:
            for s in servers:
                log("--- %s" % s.log_path)
                with open(s.log_path, errors="replace") as f:
                    for line in f.readlines()[-30:]:
                        log(line.rstrip())
        if ok_all and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            log("kept", root)
    sys.exit(0 if ok_all else 1)


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

    @case("limits: long targets 414, large headers 431, huge headers 413 and closed")
    def _():
        st = raw_get(b"/pith/" + b"A" * 5000)
        assert st == 414, st
        assert raw_get(b"/pith/AR7B3DEV", b"X-Pad: " + b"a" * 12000 + b"\r\n") == 431
        many = b"".join(b"X-H%d: v\r\n" % i for i in range(1500))
        assert raw_get(b"/pith/AR7B3DEV", many) == 431
        # past evhttp's hard cap it answers 413 itself and closes without
        # reading the rest
        t0 = time.time()
        out = raw(b"GET /pith/AR7B3DEV HTTP/1.1\r\nHost: t\r\nX-Pad: " + b"a" * 300000 +
                  b"\r\n\r\n")
        assert status_of(out) in (400, 413, 431, None), out[:100]
        assert time.time() - t0 < 5
        st, _, _ = req("GET", "/healthz")
        assert st == 200

    @case("limits: bodies over max_body 413 (announced or chunked), before they are read")
    def _():
        s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
        s.sendall(b"POST /events HTTP/1.1\r\nHost: t\r\nContent-Length: 50000000\r\n\r\n" +
                  b"{" * 1000)
        out = b""
        try:
            while b"\r\n\r\n" not in out:
                c = s.recv(4096)
                if not c:
                    break
                out += c
        except (ConnectionResetError, socket.timeout):
            pass
        s.close()
        assert status_of(out) == 413, out[:200]
        big = b"x" * (1 << 20)
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(big), big) for _ in range(2)) + b"0\r\n\r\n"
        out = raw(b"POST /events HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
                  chunks)
        assert status_of(out) in (413, None), out[:200]
        assert req("GET", "/healthz")[0] == 200

    @case("slow clients: tricklers and non-readers do not delay other clients")
    def _():
        stop = threading.Event()
        socks = []

        def trickle(s):
            msg = b"GET /pith/%s/state.json HTTP/1.1\r\nHost: t\r\n" % AR7B_BODY.encode()
            try:
                for ch in msg:
                    if stop.is_set():
                        return
                    s.send(bytes([ch]))
                    time.sleep(0.1)
            except OSError:
                pass

        threads = []
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
            socks.append(s)
            t = threading.Thread(target=trickle, args=(s,), daemon=True)
            t.start()
            threads.append(t)
        # readers that never read: pipelined requests for a large body
        for _ in range(10):
            s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            socks.append(s)
            one = b"GET /api/pith-number/%s/events.json HTTP/1.1\r\nHost: t\r\n\r\n" % \
                gen_body.encode()
            try:
                s.setblocking(False)
                s.send(one * 300)
            except (BlockingIOError, OSError):
                pass
        worst = 0
        try:
            for i in range(200):
                t0 = time.time()
                st, _, _ = req("GET", "/pith/%s/state.json" % AR7B_BODY, timeout=5)
                worst = max(worst, time.time() - t0)
                assert st == 200
        finally:
            stop.set()
            for s in socks:
                s.close()
        log("slowest of 200 requests beside 50 slow clients: %.1f ms" % (worst * 1000))
        assert worst < 1.0, worst

    @case("idle and stalled connections are closed after the timeout (3 s here)")
    def _():
        idle = socket.create_connection(("127.0.0.1", S.port), timeout=15)
        stalled = socket.create_connection(("127.0.0.1", S.port), timeout=15)
        stalled.sendall(b"GET /pith/AR7B3DEV HTTP/1.1\r\nHost:")
        t0 = time.time()
        assert idle.recv(100) == b""
        r = stalled.recv(100)
        took = time.time() - t0
        idle.close()
        stalled.close()
        assert r == b"" or status_of(r) in (400, 408), r
        assert 2 <= took < 10, took

    @case("a trickler within the inactivity timeout is cut at the request deadline (5 s)")
    def _():
        s = socket.create_connection(("127.0.0.1", S.port), timeout=20)
        msg = b"GET /pith/AR7B3DEV HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 100

        def trickle():
            try:
                for ch in msg:
                    s.send(bytes([ch]))
                    time.sleep(0.5)
            except OSError:
                pass

        t0 = time.time()
        th = threading.Thread(target=trickle, daemon=True)
        th.start()
        r = s.recv(100)
        took = time.time() - t0
        s.close()
        assert r == b"", r
        assert 4.5 <= took < 8, took
        m = metrics()
        assert m["pith_http_connections_cut_total"] >= 1

    @case("at max_connections the server stops accepting until one closes")
    def _():
        s3 = Server(args.serve, os.path.join(root, "store3"), root, ["--max-connections", "8"])
        servers.append(s3)
        idle = [socket.create_connection(("127.0.0.1", s3.port), timeout=5) for _ in range(8)]
        time.sleep(0.3)
        late = socket.create_connection(("127.0.0.1", s3.port), timeout=5)  # kernel backlog
        late.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        late.settimeout(1.0)
        try:
            got = late.recv(100)
        except socket.timeout:
            got = None
        assert got is None, got
        idle.pop().close()
        late.settimeout(5)
        t0 = time.time()
        got = late.recv(100)
        assert status_of(got) == 200, got
        log("served %.0f ms after a slot freed" % ((time.time() - t0) * 1000))
        late.close()
        for c in idle:
            c.close()
        time.sleep(0.5)
        st, _, b = req("GET", "/metrics", server=s3)
        txt = b.decode()
        assert "\npith_http_connections_open 1\n" in txt, re.findall(r"pith_http_conn.*", txt)
        assert re.search(r"\npith_http_accept_paused_total [1-9]", txt)
        assert s3.stop() == 0

    @case("keep-alive: several requests on one connection, pipelined too")
    def _():
        one = b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
        s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
        s.sendall(one * 5 + b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
        s.close()
        assert out.count(b"HTTP/1.1 200") == 6, out[:500]
        # an unknown or malformed identifier keeps the connection; a
        # malformed target closes it after the reply
        s = socket.create_connection(("127.0.0.1", S.port), timeout=10)
        s.sendall(b"GET /pith/not-an-id HTTP/1.1\r\nHost: t\r\n\r\n"
                  b"GET /pith/ZZZZZZZZ HTTP/1.1\r\nHost: t\r\n\r\n"
                  b"GET /pith/%2e%2e HTTP/1.1\r\nHost: t\r\n\r\n"
                  b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        out = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
        s.close()
        codes = [int(x) for x in re.findall(rb"HTTP/1\.1 (\d{3})", out)]
        assert codes == [400, 404, 400], codes

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
                              "built_at"}, e
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

    @case("the server shuts down cleanly on SIGTERM with requests in flight")
    def _():
        s2 = Server(args.serve, os.path.join(root, "store2"), root, [])
        servers.append(s2)
        conns = [socket.create_connection(("127.0.0.1", s2.port), timeout=5) for _ in range(5)]
        for c in conns:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
        assert s2.stop() == 0
        for c in conns:
            c.close()

    if args.pithd:
        @case("pithd's control socket is owner-only (0600), its data directory 0700")
        def _():
            d = os.path.join(root, "pithd")
            logf = open(os.path.join(root, "pithd.log"), "ab")
            p = subprocess.Popen([args.pithd, "--data", d, "--listen", "127.0.0.1:0",
                                  "--network-id", "http-test"], stdout=logf, stderr=logf)
            try:
                sock = os.path.join(d, "pithd.sock")
                deadline = time.time() + 20
                while not os.path.exists(sock) and time.time() < deadline:
                    time.sleep(0.05)
                m = os.stat(sock).st_mode
                assert stat.S_ISSOCK(m) and (m & 0o777) == 0o600, oct(m)
                assert os.stat(sock).st_uid == os.getuid()
                assert (os.stat(d).st_mode & 0o777) == 0o700, oct(os.stat(d).st_mode)
            finally:
                p.terminate()
                p.wait(30)
                logf.close()

    if args.pithd:
        @case("pithd --http: POSTed events are stored, served and gossiped to a peer; /metrics")
        def _():
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from pithtest import Node, wait_for
            a = Node(args.pithd, root, "node-a", extra=["--http", "127.0.0.1:0"] + trust)
            b = Node(args.pithd, root, "node-b", extra=trust)
            try:
                a.start()
                b.start(peers=[a.addr])
                port = int(a.status()["http"].rsplit(":", 1)[1])
                srv = type("Srv", (), {"port": port})()
                wait_for(lambda: any(p["state"] == "ready" for p in a.status()["peers"]), 15,
                         what="the peers' handshake")
                body = b"\n".join(held[150:180])
                st, _, r = req("POST", "/events", {}, body, server=srv)
                d = json.loads(r)
                assert st == 202 and d["stored"] == 30, (st, r[:300])
                with open(os.path.join(args.data, "bundle-AR7B3DEV.json"), "rb") as f:
                    bundle = json.load(f)
                evs = b"\n".join(canon(e) for e in bundle["events"])
                st, _, r = req("POST", "/events", {}, evs, server=srv)
                assert st == 202, r
                wait_for(lambda: b.status()["store"]["events"] == 32, 30,
                         what="node B to have the 32 events node A took over HTTP")
                subj = json.loads(held[150])["subject_pith_number"]
                st, h, r = req("GET", "/pith/%s/state.json" % subj[-26:], server=srv)
                assert st == 200 and b.records()[subj]["state_sha256"] == \
                    json.loads(r)["state_sha256"]
                cmd = ONE_LINER.replace("https://pith.science", "http://127.0.0.1:%d" % port)
                out = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd],
                                     capture_output=True, text=True, timeout=60)
                assert out.stdout.strip() == AR7B_CANON, out.stdout + out.stderr
                st, _, mb = req("GET", "/metrics", server=srv)
                m = mb.decode()
                assert re.search(r'\npith_events_total\{outcome="stored"\} 32\n', m), m[:3000]
                assert re.search(r'\npith_peers\{direction="in",state="ready"\} 1\n', m)
                assert re.search(r'\npith_http_requests_total\{route="post_events",code="202"\} 2',
                                 m)
                assert "pith_sync_peers{" in m and "pith_bans_active " in m
                # 32 events, unflushed: in the log and the memtables
                wal = re.search(r'\npith_store_bytes\{part="wal"\} (\d+)\n', m)
                assert wal and int(wal.group(1)) > 32 * 1000, m[:3000]
                assert re.search(r'\npith_store_bytes\{part="memtable"\} [1-9]', m)
                assert "\npith_store_pending_compaction_bytes " in m
                assert a.stop() == 0 and b.stop() == 0
            finally:
                for n in (a, b):
                    if n.alive():
                        n.stop()

    if args.pithd:
        @case("pithd: nodes announce http_public_url in HELLO and list each other in "
              "/pith-mirrors.json; a bad URL from a peer is dropped, not punished")
        def _():
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from pithtest import Node, RawPeer, msg, wait_for, HELLO
            ports = []
            for _ in range(2):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", 0))
                    ports.append(probe.getsockname()[1])
            url_a = "http://127.0.0.1:%d" % ports[0]
            url_b = "http://127.0.0.1:%d" % ports[1]
            a = Node(args.pithd, root, "mirror-a", extra=trust + [
                "--http", "127.0.0.1:%d" % ports[0], "--http-public-url", url_a + "/"])
            b = Node(args.pithd, root, "mirror-b", extra=trust + [
                "--http", "127.0.0.1:%d" % ports[1], "--http-public-url", url_b])
            # serves HTTP but declares no public URL: announces none
            c = Node(args.pithd, root, "mirror-c", extra=trust + ["--http", "127.0.0.1:0"])
            rp = None
            try:
                a.start()
                b.start(peers=[a.addr])
                c.start(peers=[a.addr])
                srv_a = type("Srv", (), {"port": ports[0]})()
                srv_b = type("Srv", (), {"port": ports[1]})()

                def manifest(srv):
                    st, _, body = req("GET", "/pith-mirrors.json", server=srv)
                    assert st == 200, st
                    return json.loads(body)

                def peers_of(srv):
                    return {m["base_url"]: m for m in manifest(srv)["mirrors"]
                            if m["status"] == "peer"}

                wait_for(lambda: url_b in peers_of(srv_a) and url_a in peers_of(srv_b), 20,
                         what="A and B to list each other")
                wait_for(lambda: len(a.status()["peers"]) == 2, 20, what="C's handshake")
                d = manifest(srv_a)
                me = [m for m in d["mirrors"] if m["status"] == "self"]
                assert len(me) == 1 and me[0]["base_url"] == url_a, me
                assert list(peers_of(srv_a)) == [url_b], d["mirrors"]  # not C, not A itself
                pb = peers_of(srv_a)[url_b]
                assert pb["name"] == "pithd " + b.node_id[:16], pb
                assert pb["mirror_type"] == "http"
                assert pb["state_pattern"] == url_b + "/pith/{suffix}/state.json"
                assert peers_of(srv_b)[url_a]["name"] == "pithd " + a.node_id[:16]
                port_c = int(c.status()["http"].rsplit(":", 1)[1])
                pc = peers_of(type("Srv", (), {"port": port_c})())
                assert list(pc) == [url_a], pc
                # a raw peer whose HELLO carries a malformed URL: dropped, the
                # connection stays, nothing is listed, no misbehaviour points
                generated = manifest(srv_a)["generated_at"]
                rp = RawPeer(a.port, a.network_id)
                rp.hello = lambda: rp.send(msg(HELLO, 1, 0, rp.network_id, rp.pk, rp.nonce, 0,
                                               "raw-test-peer", "http://user:pw@evil.example/"))
                rp.handshake()
                wait_for(lambda: any(p["agent"] == "raw-test-peer" and p["state"] == "ready"
                                     for p in a.status()["peers"]), 15, what="the raw peer")
                assert not rp.is_closed(timeout=1)
                raw_p = [p for p in a.status()["peers"] if p["agent"] == "raw-test-peer"][0]
                assert raw_p["score"] == 0 and raw_p["http_url"] == "", raw_p
                by_id = {p["node_id"]: p for p in a.status()["peers"]}
                assert by_id[b.node_id]["http_url"] == url_b, by_id[b.node_id]
                assert by_id[c.node_id]["http_url"] == "", by_id[c.node_id]
                assert list(peers_of(srv_a)) == [url_b]
                assert manifest(srv_a)["generated_at"] == generated  # the list did not change
                # B leaves: A keeps listing it (recently seen)
                assert b.stop() == 0
                wait_for(lambda: len(a.status()["peers"]) == 2, 15, what="A to see B go")
                assert list(peers_of(srv_a)) == [url_b]
                # B comes back without a public URL: its new HELLO replaces the old claim
                b.extra = trust + ["--http", "127.0.0.1:%d" % ports[1]]
                b.start()
                wait_for(lambda: not peers_of(srv_a), 20, what="A to drop B's old URL")
                with open(a.log_path, errors="replace") as f:
                    assert "http_url is not a plain http(s) URL" in f.read()
            finally:
                if rp:
                    rp.close()
                for n in (a, b, c):
                    if n.alive():
                        n.stop()

    @case("the server is still up and answering after all of the above")
    def _():
        assert S.alive()
        d, _, _ = get_json("/pith/%s/state.json" % AR7B_BODY)
        assert d["state_sha256"] == AR7B_STATE


if __name__ == "__main__":
    main()
