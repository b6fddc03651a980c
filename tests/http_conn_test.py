#!/usr/bin/env python3
"""HTTP views (issue 6), connections, against the http_serve harness:
- limits: a long target (414), large headers (431), huge headers (413 from
  evhttp, connection closed), huge and over-long bodies (413);
- slow clients: tricklers and readers that never read while other clients
  are served promptly; idle connections closed after the timeout; the
  request deadline; max_connections; keep-alive and pipelining;
- a clean shutdown on SIGTERM with requests in flight, and the main
  server still answering after all of it.

Setup and helpers in http_test_util.py.

usage: http_conn_test.py --serve S --pithctl C --gen-events G --data DIR
                         [--pithd P] [--keep]
"""

import os
import re
import socket
import threading
import time

from http_test_util import (
    AR7B_BODY, AR7B_STATE, log, case, Server, req, get_json, raw, status_of, raw_get, metrics,
    main)

S = None  # the main server, set by main


def run_cases(args, root, base, gen_rec, gen_body, held, untrusted, opkey, servers, store, trust):
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

    @case("the server is still up and answering after all of the above")
    def _():
        assert S.alive()
        d, _, _ = get_json("/pith/%s/state.json" % AR7B_BODY)
        assert d["state_sha256"] == AR7B_STATE


if __name__ == "__main__":
    main(run_cases)
