"""Shared by the HTTP view tests against the http_serve harness (issue 6):
http_test.py (the routes, POST /events, the feed, the manifest, /metrics),
http_conn_test.py (limits, slow clients, connections) and
http_pithd_test.py (pithd's own HTTP). Each part defines run_cases and calls
main(run_cases): the same store (200 records imported, 20 held back for
POST, an untrusted key, an operator key) and the same server, then its
cases as TAP. python3 standard library only.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
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


def main(run_cases):
    """Sets up the store and the main server S, runs the part's cases
    (run_cases, called with what they need), stops the servers and prints
    the TAP plan. The part's module sees S as its own global S too."""
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
    run_cases.__globals__["S"] = S
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
