#!/usr/bin/env python3
"""Journey: an operator serves HTTP on every core (issue 56, `http_loops`).

1. pithd runs from a config file with `http_loops = -1` (one serving loop
   per online core) and a mirror name. Its log says how many serving loops
   share the port; `ps -L` shows their threads (pith-http0, ...).
2. Readers on 16 connections at once fetch every record's state.json
   three times each: every answer is 200, and each record's bytes, ETag
   and Last-Modified are the same on every connection (one date table,
   whichever loop answers).
3. What the serving loops hand to the node's loop answers as before:
   `curl` of /healthz and /pith-mirrors.json (HEAD with the length GET
   sends), /metrics counting the readers' requests and the open
   connections, and POST /events of a held-back event with curl: 202,
   and its record's new state.json is then served.
4. The operator renames the mirror in the config and sends SIGHUP: the
   record page on eight fresh connections shows the new name.
5. SIGTERM: pithd exits 0.

usage: http_loops.py --pithd D --pithctl C --gen-events G [--keep]
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_node import mirror_node, request, run_test, wait_for  # noqa: E402


def fetch_all(host, port, paths, conns=16):
    """GETs every path on conns keep-alive connections at once: {path:
    [(status, etag, last-modified, body)]}."""
    got = {p: [] for p in paths}
    lock = threading.Lock()
    errors = []

    def worker(k):
        try:
            c = http.client.HTTPConnection(host, port, timeout=20)
            for p in paths[k::conns]:
                c.request("GET", p)
                r = c.getresponse()
                b = r.read()
                with lock:
                    got[p].append((r.status, r.getheader("ETag"), r.getheader("Last-Modified"), b))
            c.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
    return got


def curl(*a):
    r = subprocess.run(["curl", "-sS"] + list(a), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, (a, r.stderr)
    return r.stdout


def body(args, root, nodes):
    conf = os.path.join(root, "pithd.conf")
    with open(conf, "w") as f:
        f.write("http_loops = -1\nmirror_name = Loops Mirror\n")
    n, base, bodies = mirror_node(args, root, nodes, records=60, hold_back=1,
                                  extra=["--config", conf])
    hostport = base[len("http://"):]
    host, port = hostport.rsplit(":", 1)
    cores = os.cpu_count()

    # 1. the log and the threads
    with open(n.log_path) as f:
        log = f.read()
    assert "http: %d serving loops on %s" % (cores, hostport) in log, log[-2000:]
    threads = subprocess.run(["ps", "-L", "-o", "comm=", "-p", str(n.proc.pid)],
                             capture_output=True, text=True).stdout.split()
    loops = sorted(t for t in threads if re.fullmatch(r"pith-http\d+", t))
    assert loops == ["pith-http%d" % k for k in range(cores)], threads
    print("ok - the log says %d serving loops share %s; ps shows %s" % (cores, hostport,
          " ".join(loops)), flush=True)

    # 2. many readers at once, the same answers everywhere
    wait_for(lambda: "last-modified" in request(base + "/pith/%s/state.json" % bodies[0])[1], 10,
             what="state.json to carry Last-Modified")
    paths = ["/pith/%s/state.json" % b for b in bodies] * 3
    got = fetch_all(host, int(port), paths)
    for p, answers in got.items():
        assert len(answers) == 3 and all(a[0] == 200 for a in answers), (p, [a[0] for a in answers])
        assert len({(a[1], a[2], a[3]) for a in answers}) == 1, (p, [a[1:3] for a in answers])
        assert answers[0][2], (p, "no Last-Modified")
    print("ok - %d state.json on 16 connections at once: all 200, each record the same bytes, "
          "ETag and Last-Modified on every connection" % len(paths), flush=True)

    # 3. what the node's loop answers, through the serving loops
    assert curl("-o", "/dev/null", "-w", "%{http_code}", base + "/healthz") == "200"
    mirrors = curl(base + "/pith-mirrors.json")
    assert json.loads(mirrors)["mirrors"] is not None
    head = curl("-I", base + "/pith-mirrors.json")
    m = re.search(r"(?im)^content-length: (\d+)", head)
    assert m and int(m.group(1)) == len(mirrors.encode()), head
    metrics = curl(base + "/metrics")
    served = sum(float(l.rsplit(" ", 1)[1]) for l in metrics.splitlines()
                 if l.startswith('pith_http_requests_total{route="state",code="200"}'))
    assert served >= len(paths), (served, len(paths))
    assert re.search(r"(?m)^pith_http_connections_open \d+", metrics), metrics[:500]
    held_body, held = n.held_back
    _, before, _ = request(base + "/pith/%s/state.json" % held_body)
    ev = os.path.join(root, "held.jsonl")
    with open(ev, "wb") as f:
        f.write(b"\n".join(held) + b"\n")
    out = curl("-X", "POST", "-H", "Content-Type: application/x-ndjson", "--data-binary", "@" + ev,
               "-w", "\n%{http_code}", base + "/events")
    text, code = out.rsplit("\n", 1)
    assert code == "202", out  # accepted: stored, durable (docs/http.md)
    def moved():
        st, h, _ = request(base + "/pith/%s/state.json" % held_body)
        return st == 200 and h.get("etag") != before.get("etag")
    wait_for(moved, 10, what="the record's state.json to carry the posted event")
    print("ok - /healthz, /pith-mirrors.json (HEAD's length = GET's), /metrics (%d state.json "
          "counted), and POST /events of a held-back event with curl: 202, then the record's new state served" % served,
          flush=True)

    # 4. a new name, on every loop
    with open(conf, "w") as f:
        f.write("http_loops = -1\nmirror_name = Renamed Mirror\n")
    n.proc.send_signal(signal.SIGHUP)

    def renamed():
        pages = [request(base + "/pith/%s" % bodies[k % len(bodies)],
                         headers={"Accept": "text/html"})[2] for k in range(8)]
        return all(b"Renamed Mirror" in p and b"Loops Mirror" not in p for p in pages)
    wait_for(renamed, 10, what="every connection's record page to carry the new name")
    print("ok - after SIGHUP the record page carries the new name on 8 fresh connections",
          flush=True)

    # 5. a clean stop
    t0 = time.time()
    rc = n.stop()
    assert rc == 0, rc
    print("ok - SIGTERM: pithd exited 0 in %.1f s" % (time.time() - t0), flush=True)


if __name__ == "__main__":
    sys.exit(run_test("journey_http_loops.", body))
