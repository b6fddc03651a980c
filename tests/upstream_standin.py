#!/usr/bin/env python3
"""A stand-in for the registry's HTTP(S) surface (issue 14), for tests.

usage: upstream_standin.py --root D [--port N] [--port-file F] [--tls-dir T] [--redirect]
                           [--fault 500|stall|tamper|big|swap]

Serves D in the registry's layout:
  /pith-mirrors.json            D/pith-mirrors.json, "@ORIGIN@" replaced by
                                this server's scheme://127.0.0.1:port
  /pith/{suffix}/bundle.json    D/pith/{suffix}/bundle.json, with a strong
  /.well-known/pith/{suffix}/bundle.json   ETag (sha256 of the bytes) and
                                304 on a matching If-None-Match
  /api/pith-number/resolve?arxiv=|doi=|pith=ID[&json=true]
                                from D/index.json ({"arxiv":{id:pith},
                                "doi":{doi:pith}}; pith= matches a body
                                prefix of a stored bundle): json=true ->
                                {"pith_number":...}, else 302 to /pith/{P};
                                unknown -> 404
  /_stats                       {"full":N,"not_modified":N,"resolve":N,...}

--redirect: the resolve API answers 302 even with json=true.
--fault applies to bundle requests: 500 answers 500; stall sends headers and
then nothing; tamper flips a byte of the bundle's content; big sends a body
of 17 MiB; swap sends another record's bundle (validly signed) instead of
the one asked for. --tls-dir T makes a CA and a server certificate for 127.0.0.1
(python3-cryptography), serves HTTPS and writes T/ca.pem. Python standard
library otherwise.
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


class State:
    def __init__(self, root, fault):
        self.root = root
        self.fault = fault
        self.lock = threading.Lock()
        self.stats = {"full": 0, "not_modified": 0, "resolve": 0, "manifest": 0, "not_found": 0,
                      "fault": 0}
        try:
            with open(os.path.join(root, "index.json")) as f:
                self.index = json.load(f)
        except FileNotFoundError:
            self.index = {}
        pdir = os.path.join(root, "pith")
        self.bodies = sorted(os.listdir(pdir)) if os.path.isdir(pdir) else []
        self.origin = ""

    def count(self, k):
        with self.lock:
            self.stats[k] += 1


BUNDLE = re.compile(r"^/(?:\.well-known/)?pith/([A-Z2-7]{26})/bundle\.json$")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

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

    def do_GET(self):
        st = self.server.state
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/_stats":
            with st.lock:
                return self.send(200, json.dumps(st.stats).encode())
        if u.path == "/pith-mirrors.json":
            p = os.path.join(st.root, "pith-mirrors.json")
            if not os.path.exists(p):
                return self.send(404, b"{}")
            st.count("manifest")
            with open(p) as f:
                return self.send(200, f.read().replace("@ORIGIN@", st.origin).encode())
        if u.path == "/api/pith-number/resolve":
            return self.resolve(st, urllib.parse.parse_qs(u.query))
        m = BUNDLE.match(u.path)
        if m:
            return self.bundle(st, m.group(1))
        st.count("not_found")
        self.send(404, b'{"error":"not found"}')

    def resolve(self, st, q):
        st.count("resolve")
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
            return self.send(404, b'{"error":"not found"}')
        if q.get("json", [""])[0] == "true" and not self.server.redirect:
            return self.send(200, json.dumps({"pith_number": pith}).encode())
        self.send(302, b"", headers=[("Location", "/pith/" + pith)])

    def bundle(self, st, body):
        p = os.path.join(st.root, "pith", body, "bundle.json")
        if not os.path.exists(p):
            st.count("not_found")
            return self.send(404, b'{"error":"not found"}')
        if st.fault == "500":
            st.count("fault")
            return self.send(500, b'{"error":"upstream broke"}')
        if st.fault == "stall":
            st.count("fault")
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.flush()
            time.sleep(120)
            return
        if st.fault == "big":
            st.count("fault")
            return self.send(200, b" " * (17 << 20))
        if st.fault == "swap":
            # another record's bundle, validly signed, at this record's URL
            st.count("fault")
            other = sorted(b for b in st.bodies if b != body)[0]
            p = os.path.join(st.root, "pith", other, "bundle.json")
        with open(p, "rb") as f:
            data = f.read()
        if st.fault == "tamper":
            st.count("fault")
            # one hex digit of the content hash changed, length kept
            i = data.index(b'"canonical_sha256":"') + len(b'"canonical_sha256":"')
            data = data[:i] + (b"1" if data[i:i + 1] != b"1" else b"2") + data[i + 1:]
        etag = '"%s"' % hashlib.sha256(data).hexdigest()
        inm = self.headers.get("If-None-Match")
        if inm and etag in [t.strip() for t in inm.split(",")]:
            st.count("not_modified")
            return self.send(304, headers=[("ETag", etag)])
        st.count("full")
        self.send(200, data, headers=[("ETag", etag)])


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # clients that refuse our certificate or hang up are part of the tests
        e = sys.exc_info()[1]
        if not isinstance(e, (ssl.SSLError, ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--tls-dir")
    ap.add_argument("--fault", choices=["500", "stall", "tamper", "big", "swap"])
    ap.add_argument("--redirect", action="store_true")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", a.port), Handler)
    srv.redirect = a.redirect
    srv.state = State(a.root, a.fault)
    scheme = "http"
    if a.tls_dir:
        ctx = make_tls(a.tls_dir)
        # the handshake runs on the handler's thread, not in accept()
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
        scheme = "https"
    port = srv.server_address[1]
    srv.state.origin = "%s://127.0.0.1:%d" % (scheme, port)
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


if __name__ == "__main__":
    sys.exit(main())
