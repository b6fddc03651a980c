#!/usr/bin/env python3
"""A stand-in for the registry's HTTP(S) surface (issue 14), for tests.

usage: upstream_standin.py --root D [--port N] [--port-file F] [--tls-dir T] [--redirect]
                           [--fault MODE] [--fail-times N] [--retry-after S]
                           [--delay S] [--stall S]

Serves D in the registry's layout (write_tree() below makes it):
  /pith-mirrors.json            D/pith-mirrors.json, "@ORIGIN@" replaced by
                                this server's scheme://127.0.0.1:port
  /pith/{suffix}/bundle.json    D/pith/{suffix}/bundle.json, with a strong
  /.well-known/pith/{suffix}/bundle.json   ETag (sha256 of the bytes read for
                                this request: rewrite the file, atomically, and
                                the ETag follows) and 304 on a matching
                                If-None-Match
  /api/pith-number/resolve?arxiv=|doi=|pith=ID[&json=true]
                                from D/index.json ({"arxiv":{id:pith},
                                "doi":{doi:pith}}, re-read when it changes;
                                built from the bundles when there is none;
                                pith= matches a body prefix of a stored
                                bundle): json=true -> {"pith_number":...},
                                else 302 to /pith/{P}; unknown -> 404
  /api/changes?after=C&limit=N  a pithd's change feed (docs/http.md), from
                                D/changes.jsonl (write_feed() below: one change
                                a line, pith_number, state_sha256, bundle_sha256,
                                built_at, event_count; re-read when it changes):
                                the cursor of a line is its number from 1; 404
                                when there is no such file, 400 for a bad cursor
  /healthz                      {"ok":true,"store":{"records","events"}}: the
                                records of D/changes.jsonl (each at its last
                                line) and the sum of their event_count; 404
                                without the file
  /_stats[?paths=1][&reset=1]   the counters: requests (all but /_stats and
                                /_control), full (bundles sent with a body),
                                bundle_bytes, not_modified (304s), resolve,
                                manifest, changes (feed pages), health,
                                not_found, fault (faulty answers);
                                paths=1 adds by_path {request path: count};
                                reset=1 zeroes them after the answer
  /_control                     changes the behaviour of the running server
                                (below); answers the settings as JSON

Faults. MODE is one of
  none       no fault
  500, 503   that status (503 with Retry-After when set)
  429        429, with Retry-After when set
  stall      headers of a 200 with Content-Length 1000, then nothing for S
             seconds (--stall, default 120), then the connection is closed
  tamper     one hex digit of the bundle's canonical_sha256 changed
  big        a body of 17 MiB
  swap       another record's bundle (validly signed) instead of the one asked
  loop       a 302 to the same URL, for ever (bundles only)
  moved      a 301 to the same path with ?moved=1, which serves the bundle
             (bundles only)
  untrusted  D/untrusted/pith/{suffix}/bundle.json instead (the same record
             signed by a key the puller does not trust: gen_bundles
             --sign-seed; 404 when there is no such file)
--fault (and control "fault") applies to every bundle request; a per-path
fault (control "path_faults": {SUBSTRING: MODE}) to any request whose path
and query contain SUBSTRING (a suffix, "resolve", "arxiv=0001.00000"), before
the global one; on a resolve or manifest request only 500, 503, 429, stall
and big apply. --fail-times N: each path gets at most N faulty answers, then
the real one ("fail N times then succeed"; 0 = always fail). --retry-after S:
the Retry-After header of 429 and 503 (seconds; none by default). --delay S:
every registry request waits S seconds before its answer (to slow a pull
down). --redirect: the resolve API answers 302 even with json=true.

/_control: POST a JSON object, or GET with the same keys as a query
(path_fault=SUBSTRING:MODE, repeatable, adds a per-path fault; an empty
one clears them). Keys: fault, path_faults (replaces them all), fail_times,
retry_after (null or "" for none), delay, stall, redirect, reset_stats
(true), reload (true: re-read index.json and the tree now), publish (a list
of files, each a bundle or JSON Lines of bundles: written into D/pith/ with
a temporary file and a rename, their arXiv ids and DOIs added to
D/index.json). Changing fault, path_faults or fail_times restarts the
fail-N-times counts.

--tls-dir T makes a CA and a server certificate for 127.0.0.1
(python3-cryptography), serves HTTPS and writes T/ca.pem. HTTP/1.1 with
keep-alive, one thread per connection. Python standard library otherwise.
"""
import argparse
import datetime
import hashlib
import http.server
import ipaddress
import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.parse


def make_tls(d):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    os.makedirs(d, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pith test CA %d" % os.getpid())])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    with open(os.path.join(d, "ca.pem"), "wb") as f:
        f.write(ca.public_bytes(pem))
    with open(os.path.join(d, "server.pem"), "wb") as f:
        f.write(cert.public_bytes(pem))
    with open(os.path.join(d, "server.key"), "wb") as f:
        f.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.pem"), os.path.join(d, "server.key"))
    return ctx


MODES = ("none", "500", "503", "429", "stall", "tamper", "big", "swap", "untrusted", "loop",
         "moved")
# the modes that answer any request, not only a bundle's
GENERIC = ("500", "503", "429", "stall", "big")
COUNTERS = ("requests", "full", "bundle_bytes", "not_modified", "resolve", "manifest",
            "changes", "health", "not_found", "fault")


def index_add(index, bundle):
    """Adds the arXiv ids and DOIs of bundle (a parsed bundle) to index."""
    for a in bundle.get("source_aliases", []):
        if a.get("alias_kind") in ("arxiv", "doi"):
            index.setdefault(a["alias_kind"], {})[a["alias_value"]] = bundle["pith_number"]


def write_atomic(path, data):
    tmp = "%s.tmp.%d.%d" % (path, os.getpid(), threading.get_ident())
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def write_feed(root, changes):
    """Writes root/changes.jsonl, the change feed the stand-in serves: changes
    is a list of dicts (pith_number, state_sha256, bundle_sha256, built_at,
    event_count) in the order the upstream committed them; a record listed
    again later is served at its last line only, as a pithd lists it."""
    write_atomic(os.path.join(root, "changes.jsonl"),
                 b"".join(json.dumps(c, sort_keys=True).encode() + b"\n" for c in changes))


def write_tree(root, bundles, index=True, manifest=True, feed=False):
    """Lays bundles (bytes, one bundle document each) out under root as the
    registry does: root/pith/{suffix}/bundle.json, and unless told not to
    root/index.json (arXiv ids and DOIs from each bundle's source_aliases,
    what the resolve API answers from) and a root/pith-mirrors.json naming
    this server (with feed, its changes_url too, as a pithd's names its
    own). Returns (pith numbers in order, index)."""
    idx = {"arxiv": {}, "doi": {}}
    numbers = []
    for data in bundles:
        b = json.loads(data)
        p = b["pith_number"]
        numbers.append(p)
        d = os.path.join(root, "pith", p[10:])
        os.makedirs(d, exist_ok=True)
        write_atomic(os.path.join(d, "bundle.json"), data)
        index_add(idx, b)
    if index:
        write_atomic(os.path.join(root, "index.json"), json.dumps(idx).encode())
    if manifest:
        mirror = {"name": "stand-in", "mirror_type": "https", "base_url": "@ORIGIN@",
                  "bundle_pattern": "@ORIGIN@/pith/{suffix}/bundle.json"}
        if feed:
            mirror["changes_url"] = "@ORIGIN@/api/changes"
        write_atomic(os.path.join(root, "pith-mirrors.json"), json.dumps(
            {"manifest_type": "pith_mirror_manifest", "manifest_version": "1.0",
             "mirrors": [mirror]}).encode())
    return numbers, idx


class State:
    def __init__(self, root, a):
        self.root = root
        self.lock = threading.Lock()
        self.fault = None if a.fault in (None, "none") else a.fault
        self.path_faults = {}
        self.fail_times = a.fail_times
        self.failed = {}  # path -> faulty answers given (with fail_times)
        self.retry_after = a.retry_after
        self.delay = a.delay
        self.stall = a.stall
        self.redirect = a.redirect
        self.reset_stats()
        self.index = {}
        self.index_mtime = None
        self.bodies = []
        self.bodies_mtime = None
        self.origin = ""
        self.feed = None  # [(cursor, change)], each record at its last line
        self.feed_mtime = None
        self.refresh(force=True)

    def feed_read(self):
        """The change feed of D/changes.jsonl (None without the file), re-read
        when the file changed."""
        p = os.path.join(self.root, "changes.jsonl")
        try:
            m = os.stat(p).st_mtime_ns
        except FileNotFoundError:
            return None
        with self.lock:
            if m == self.feed_mtime:
                return self.feed
        last = {}
        with open(p, "rb") as f:
            for i, line in enumerate(f, 1):
                if line.strip():
                    c = json.loads(line)
                    last[c["pith_number"]] = (i, c)
        feed = sorted(last.values(), key=lambda e: e[0])
        with self.lock:
            self.feed, self.feed_mtime = feed, m
        return feed

    def reset_stats(self):
        self.stats = dict.fromkeys(COUNTERS, 0)
        self.by_path = {}

    def count(self, k, n=1):
        with self.lock:
            self.stats[k] += n

    def refresh(self, force=False):
        """Re-reads index.json and the list of bodies if they changed."""
        ip = os.path.join(self.root, "index.json")
        pdir = os.path.join(self.root, "pith")
        try:
            m = os.stat(pdir).st_mtime_ns
        except FileNotFoundError:
            m = None
        changed = force or m != self.bodies_mtime
        if changed:
            bodies = sorted(os.listdir(pdir)) if m is not None else []
            with self.lock:
                self.bodies, self.bodies_mtime = bodies, m
        try:
            m = os.stat(ip).st_mtime_ns
        except FileNotFoundError:
            m = None
        if not force and m == self.index_mtime and (m is not None or not changed):
            return
        if m is not None:
            with open(ip) as f:
                index = json.load(f)
        else:
            # no index.json: built from the bundles served
            index = {}
            for b in self.bodies:
                try:
                    with open(os.path.join(pdir, b, "bundle.json"), "rb") as f:
                        index_add(index, json.loads(f.read()))
                except (OSError, ValueError):
                    pass
        with self.lock:
            self.index, self.index_mtime = index, m

    def fault_for(self, path, bundle):
        """The fault of this request (None: answer it properly)."""
        with self.lock:
            mode = None
            for sub, m in self.path_faults.items():
                if sub in path:
                    mode = m
                    break
            if mode is None and bundle:
                mode = self.fault
            if mode in (None, "none") or (not bundle and mode not in GENERIC):
                return None
            if self.fail_times:
                n = self.failed.get(path, 0)
                if n >= self.fail_times:
                    return None
                self.failed[path] = n + 1
            self.stats["fault"] += 1
            return mode

    def settings(self):
        return {"fault": self.fault or "none", "path_faults": self.path_faults,
                "fail_times": self.fail_times, "retry_after": self.retry_after,
                "delay": self.delay, "stall": self.stall, "redirect": self.redirect}

    def control(self, c):
        """Applies a control object; raises ValueError on a bad one."""
        def mode(m):
            if m not in MODES:
                raise ValueError("unknown fault mode %r" % (m,))
            return None if m == "none" else m
        unknown = set(c) - {"fault", "path_faults", "fail_times", "retry_after", "delay",
                            "stall", "redirect", "reset_stats", "reload", "publish"}
        if unknown:
            raise ValueError("unknown control keys: %s" % ", ".join(sorted(unknown)))
        publish = c.get("publish") or []
        if isinstance(publish, str):
            publish = [publish]
        docs = []
        for fn in publish:
            with open(fn, "rb") as f:
                docs += [l for l in f.read().splitlines() if l.strip()]
        # checked before anything changes
        fault = mode(c.get("fault", "none"))
        path_faults = {str(k): mode(v) or "none" for k, v in (c.get("path_faults") or {}).items()}
        with self.lock:
            if "fault" in c:
                self.fault = fault
            if "path_faults" in c:
                self.path_faults = path_faults
            if "fail_times" in c:
                self.fail_times = int(c["fail_times"] or 0)
            if {"fault", "path_faults", "fail_times"} & set(c):
                self.failed = {}
            if "retry_after" in c:
                ra = c["retry_after"]
                self.retry_after = None if ra in (None, "") else str(ra)
            if "delay" in c:
                self.delay = float(c["delay"] or 0)
            if "stall" in c:
                self.stall = float(c["stall"])
            if "redirect" in c:
                self.redirect = c["redirect"] in (True, "1", "true")
            if c.get("reset_stats") in (True, "1", "true"):
                self.reset_stats()
        if docs:
            # the bundles, then the index naming them
            write_tree(self.root, docs, index=False, manifest=False)
            self.refresh(force=True)
            with self.lock:
                index = json.loads(json.dumps(self.index))
            for d in docs:
                index_add(index, json.loads(d))
            write_atomic(os.path.join(self.root, "index.json"), json.dumps(index).encode())
        if docs or c.get("reload") in (True, "1", "true"):
            self.refresh(force=True)


def control_from_query(q):
    """The control object of a GET /_control query."""
    c = {}
    for k, vs in q.items():
        if k == "path_fault":
            c["path_faults"] = {}
            for v in vs:
                if v:
                    sub, _, m = v.rpartition(":")
                    c["path_faults"][sub] = m
        elif k == "publish":
            c[k] = vs
        else:
            c[k] = vs[-1]
    return c


BUNDLE = re.compile(r"^/(?:\.well-known/)?pith/([A-Z2-7]{26})/bundle\.json$")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def send(self, code, body=b"", ctype="application/json", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        if code != 304:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if code != 304 and self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, code, obj):
        self.send(code, json.dumps(obj).encode())

    def do_POST(self):
        u = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b"{}"
        if u.path != "/_control":
            return self.send_json(405, {"error": "POST is for /_control only"})
        try:
            c = json.loads(body)
            if not isinstance(c, dict):
                raise ValueError("a JSON object, please")
            return self.control(c)
        except ValueError as e:
            return self.send_json(400, {"error": str(e)})

    def control(self, c):
        st = self.server.state
        try:
            st.control(c)
        except (ValueError, TypeError, OSError) as e:
            return self.send_json(400, {"error": str(e)})
        with st.lock:
            return self.send_json(200, st.settings())

    def do_GET(self):
        st = self.server.state
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        if u.path == "/_stats":
            with st.lock:
                out = dict(st.stats)
                if q.get("paths", [""])[0] in ("1", "true"):
                    out["by_path"] = dict(st.by_path)
                if q.get("reset", [""])[0] in ("1", "true"):
                    st.reset_stats()
            return self.send_json(200, out)
        if u.path == "/_control":
            return self.control(control_from_query(q))
        with st.lock:
            st.stats["requests"] += 1
            st.by_path[self.path] = st.by_path.get(self.path, 0) + 1
            delay = st.delay
        if delay > 0:
            time.sleep(delay)
        m = BUNDLE.match(u.path)
        if u.path == "/pith-mirrors.json":
            p = os.path.join(st.root, "pith-mirrors.json")
            if not os.path.exists(p):
                st.count("not_found")
                return self.send(404, b"{}")
            if self.fault(st.fault_for(self.path, False)):
                return
            st.count("manifest")
            with open(p) as f:
                return self.send(200, f.read().replace("@ORIGIN@", st.origin).encode())
        if u.path == "/api/pith-number/resolve":
            if self.fault(st.fault_for(self.path, False)):
                return
            return self.resolve(st, q)
        if m:
            return self.bundle(st, m.group(1))
        if u.path == "/api/changes":
            if self.fault(st.fault_for(self.path, False)):
                return
            return self.changes(st, q)
        if u.path == "/healthz":
            feed = st.feed_read()
            if feed is None:
                st.count("not_found")
                return self.send(404, b'{"error":"not found"}')
            st.count("health")
            return self.send_json(200, {"ok": True, "store": {
                "records": len(feed), "events": sum(c.get("event_count", 0) for _, c in feed)}})
        st.count("not_found")
        self.send(404, b'{"error":"not found"}')

    def fault(self, mode):
        """Answers mode if it is one that any request can get; True then."""
        st = self.server.state
        if mode in ("500", "503", "429"):
            ra = st.retry_after
            hdr = [("Retry-After", ra)] if ra is not None and mode != "500" else []
            self.send(int(mode), b'{"error":"upstream %s"}' % mode.encode(), headers=hdr)
            return True
        if mode == "stall":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.flush()
            time.sleep(st.stall)
            self.close_connection = True
            return True
        if mode == "big":
            self.send(200, b" " * (17 << 20))
            return True
        return False

    def changes(self, st, q):
        """A page of the change feed, as a pithd's /api/changes answers."""
        feed = st.feed_read()
        if feed is None:
            st.count("not_found")
            return self.send(404, b'{"error":"not found"}')
        after, limit = q.get("after", ["0"]), q.get("limit", ["1000"])
        if len(after) != 1 or not after[0].isdigit() or len(limit) != 1 or \
                not limit[0].isdigit() or int(limit[0]) == 0:
            return self.send_json(400, {"error": "bad_request",
                                        "message": "after: pass back a cursor or next"})
        a, n = int(after[0]), min(int(limit[0]), 10000)
        page = [dict(c, cursor=str(i)) for i, c in feed if i > a][:n]
        for c in page:
            c.pop("event_count", None)
        st.count("changes")
        self.send_json(200, {"changes": page, "next": page[-1]["cursor"] if page else after[0]})

    def resolve(self, st, q):
        st.count("resolve")
        st.refresh()
        pith = None
        if "arxiv" in q:
            a = re.sub(r"v[0-9]+$", "", q["arxiv"][0])
            pith = st.index.get("arxiv", {}).get(a)
        elif "doi" in q:
            pith = st.index.get("doi", {}).get(q["doi"][0].lower())
        elif "pith" in q:
            v = q["pith"][0].upper()
            if v.startswith("PITH:"):
                v = v.split(":")[-1]
            hits = [b for b in st.bodies if b.startswith(v)]
            if len(hits) == 1:
                with open(os.path.join(st.root, "pith", hits[0], "bundle.json"), "rb") as f:
                    pith = json.loads(f.read())["pith_number"]
        if not pith:
            st.count("not_found")
            return self.send(404, b'{"error":"not found"}')
        if q.get("json", [""])[0] == "true" and not st.redirect:
            return self.send(200, json.dumps({"pith_number": pith}).encode())
        self.send(302, b"", headers=[("Location", "/pith/" + pith)])

    def bundle(self, st, body):
        p = os.path.join(st.root, "pith", body, "bundle.json")
        if not os.path.exists(p):
            st.count("not_found")
            return self.send(404, b'{"error":"not found"}')
        fault = st.fault_for(self.path, True)
        if self.fault(fault):
            return
        if fault == "loop":
            # a redirect to itself, for ever
            return self.send(302, b"", headers=[("Location", self.path)])
        if fault == "moved":
            if "moved=1" not in self.path:
                return self.send(301, b"", headers=[("Location", self.path.split("?")[0] +
                                                     "?moved=1")])
            fault = None
        if fault == "swap":
            # another record's bundle, validly signed, at this record's URL
            st.refresh()
            other = sorted(b for b in st.bodies if b != body)[0]
            p = os.path.join(st.root, "pith", other, "bundle.json")
        if fault == "untrusted":
            # the same record signed by a key the puller does not trust
            p = os.path.join(st.root, "untrusted", "pith", body, "bundle.json")
            if not os.path.exists(p):
                st.count("not_found")
                return self.send(404, b'{"error":"no untrusted copy of this bundle"}')
        with open(p, "rb") as f:
            data = f.read()
        if fault == "tamper":
            # one hex digit of the content hash changed, length kept
            i = data.index(b'"canonical_sha256":"') + len(b'"canonical_sha256":"')
            data = data[:i] + (b"1" if data[i:i + 1] != b"1" else b"2") + data[i + 1:]
        etag = '"%s"' % hashlib.sha256(data).hexdigest()
        inm = self.headers.get("If-None-Match")
        if inm and etag in [t.strip() for t in inm.split(",")]:
            st.count("not_modified")
            return self.send(304, headers=[("ETag", etag)])
        with st.lock:
            st.stats["full"] += 1
            st.stats["bundle_bytes"] += len(data)
        self.send(200, data, headers=[("ETag", etag)])


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # clients that refuse our certificate or hang up are part of the tests
        e = sys.exc_info()[1]
        if not isinstance(e, (ssl.SSLError, ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def parser():
    """The stand-in's options (tests/hostile_upstream.py adds its own)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--tls-dir")
    ap.add_argument("--fault", choices=MODES)
    ap.add_argument("--fail-times", type=int, default=0)
    ap.add_argument("--retry-after")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--stall", type=float, default=120.0)
    ap.add_argument("--redirect", action="store_true")
    return ap


def serve(a, handler=None, host="127.0.0.1"):
    """Serves the options a with handler (Handler by default) on host until
    interrupted; the origin is printed and the port written to --port-file."""
    srv = Server((host, a.port), handler or Handler)
    srv.state = State(a.root, a)
    srv.options = a
    scheme = "http"
    if a.tls_dir:
        ctx = make_tls(a.tls_dir)
        # the handshake runs on the handler's thread, not in accept()
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
        scheme = "https"
    port = srv.server_address[1]
    srv.state.origin = "%s://%s:%d" % (scheme, host, port)
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, a.port_file)
    print(srv.state.origin, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


def main():
    serve(parser().parse_args())


if __name__ == "__main__":
    sys.exit(main())
