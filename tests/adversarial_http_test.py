#!/usr/bin/env python3
"""Issue 16, item 10: HTTP and control-socket memory bounded by bytes
(ctest `adversarial_http`, label adversarial).

usage: adversarial_http_test.py --pithd D --pithctl P --gen-events G

1. 300 clients POST /events at once, each a body of 4 lines of 0.93 MB
   (3.7 MB, under the 4 MiB body limit): connections take turns to send
   their bodies, as many at once as fit in max_buffered_bytes (64 MiB) with
   the POSTed events in validation, so RSS stays under baseline + 256 MiB,
   a GET during the flood is answered at once, every POST is answered, and
   the node stays up.
2. A control client sends 200,000 `status` requests and reads nothing:
   once 8 MiB of replies wait, its further requests are not read, so RSS
   stays under baseline + 256 MiB; then it reads, and every request is
   answered in order.
"""
import os
import socket
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pithtest import Node, run_test, wait_for  # noqa: E402
from adversarial_relay_test import Sampler, rss_mib  # noqa: E402


def body(args, root, nodes):
    n = Node(args.pithd, root, "target", extra=["--http", "127.0.0.1:0"]).start()
    nodes.append(n)
    host, port = n.status()["http"].split(":")
    port = int(port)
    url = "http://%s:%d" % (host, port)
    assert urllib.request.urlopen(url + "/healthz", timeout=5).status == 200
    base = rss_mib(n.proc.pid)

    # 1. 300 concurrent POSTs of 3.7 MB
    line = b'{"x":"' + b"a" * 930000 + b'"}\n'
    payload = line * 4
    req = (b"POST /events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(payload))
    sampler = Sampler(n.proc.pid)
    sampler.start()
    answers = []

    def post():
        try:
            s = socket.create_connection((host, port), timeout=60)
            s.sendall(req + payload)
            s.settimeout(60)
            answers.append(s.recv(64)[:12])
            s.close()
        except OSError as e:
            answers.append(repr(e).encode())
    ths = [threading.Thread(target=post, daemon=True) for _ in range(300)]
    t0 = time.time()
    for t in ths:
        t.start()
    time.sleep(1)
    g0 = time.time()
    st = urllib.request.urlopen(url + "/healthz", timeout=10).status
    get_s = time.time() - g0
    for t in ths:
        t.join(120)
    sampler.stop.set()
    assert n.alive(), "the node died"
    assert st == 200, "GET during the flood: %d" % st
    assert len(answers) == 300 and all(a.startswith(b"HTTP/1.1 ") for a in answers), answers[:5]
    assert sampler.peak < base + 256, "RSS %.0f MiB, baseline %.0f" % (sampler.peak, base)
    m = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    squeezed = [l for l in m.splitlines() if l.startswith("pith_http_body_waits_total")]
    codes = {}
    for a in answers:
        codes[a] = codes.get(a, 0) + 1
    print("1. 300 POSTs of 3.7 MB at once, %.1f s: peak RSS %.0f MiB (baseline %.0f), a GET "
          "answered in %.2f s, %s; answers %s"
          % (time.time() - t0, sampler.peak, base, get_s, squeezed, codes))

    # 2. a control client that never reads
    base2 = rss_mib(n.proc.pid)
    sampler = Sampler(n.proc.pid)
    sampler.start()
    c = socket.socket(socket.AF_UNIX)
    c.connect(n.sock)
    c.setblocking(False)
    total, sent = 200000, 0
    data = b"status\n" * 1000
    deadline = time.time() + 20
    while sent < total and time.time() < deadline:
        try:
            k = c.send(data)
            sent += k // 7
            if k < len(data):
                time.sleep(0.01)
        except BlockingIOError:
            time.sleep(0.05)
    time.sleep(2)
    peak = sampler.peak
    c.setblocking(True)
    c.settimeout(30)
    got, buf = 0, b""
    want = sent
    while got < want:
        chunk = c.recv(1 << 20)
        if not chunk:
            break
        got += chunk.count(b"\n")
    sampler.stop.set()
    c.close()
    assert n.alive(), "the node died"
    assert peak < base2 + 256, "RSS %.0f MiB, baseline %.0f" % (peak, base2)
    assert got >= want, "%d of %d answers" % (got, want)
    print("2. a control client sent %d requests without reading: peak RSS %.0f MiB "
          "(baseline %.0f); then read all %d answers" % (sent, peak, base2, got))


def main():
    return run_test("pith-adv-http-", body, tools=("pithd", "pithctl", "gen-events"))


if __name__ == "__main__":
    sys.exit(main())
