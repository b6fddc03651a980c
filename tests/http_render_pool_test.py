#!/usr/bin/env python3
"""pithd's render pool (http_render_threads, docs/http.md "Threads"):

- every answer of the record routes (page HTML and JSON-LD, record, state,
  bundle, well-known bundle, events, graph; GET and HEAD, gzip or not,
  conditional 304) with http_render_threads = 2, fetched by 16 threads at
  once while other clients drop their connections before the answer, is
  byte for byte (status, headers but Date and Last-Modified, body) the answer with
  http_render_threads = 0; so are the answers for every form of
  identifier the workers resolve (bare bodies, short numbers of 8, 12 and
  16 characters, arXiv ids and DOIs), by the record routes and by
  /api/pith-number/resolve (JSON and redirect), and the ones they hand
  back to the loop or never get (unknown records: 404; malformed ids and
  queries: 400);
- SIGTERM while requests are in flight stops the node cleanly (exit 0);
- SIGTERM while the pool holds requests (each render held back by
  PITH_TEST_RENDER_DELAY_MS): every request read before the signal gets a
  whole answer, none a bare close: the document, as with no pool, while
  the stop waits for the renders (docs/http.md "Threads"), and past that
  wait's bound a 503 with Connection: close; pithd exits 0;
- a store read error while a worker resolves an identifier (a flipped
  byte in the records' table file) is answered 500 and counted once in
  the store's read errors, as with no pool (it used to be read again, and
  counted again, on the loop).

usage: http_render_pool_test.py --pithd D --pithctl C --gen-events G [--keep]
"""
import http.client
import json
import os
import random
import re
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import Node, import_damaged, make_events, run_test, wait_for  # noqa: E402

ROUTES = ["/pith/%s", "/pith/%s.json", "/pith/%s/state.json", "/pith/%s/bundle.json",
          "/.well-known/pith/%s/bundle.json", "/api/pith-number/%s/events.json",
          "/api/pith-number/%s/graph.json"]


def requests_for(recs):
    """(method, path, headers) for every record: each route, plain and
    gzipped, the page in both forms, some HEADs."""
    out = []
    for i, full in enumerate(recs):
        body = full[-26:]
        ident = full if i % 3 == 0 else body
        for r in ROUTES:
            path = r % ident
            out.append(("GET", path, {}))
            out.append(("GET", path, {"Accept-Encoding": "gzip"}))
            if r == "/pith/%s":
                out.append(("GET", path, {"Accept": "application/ld+json"}))
                out.append(("GET", path, {"Accept": "text/html", "Accept-Encoding": "gzip"}))
            if i % 5 == 0:
                out.append(("HEAD", path, {"Accept-Encoding": "gzip"}))
    out.append(("GET", "/pith/AAAAAAAAAAAAAAAAAAAAAAAAAA/state.json", {}))
    return out


def arxiv_ids(lines):
    """The arXiv ids of the generated records (their record_created events)."""
    out = []
    for line in lines:
        ev = json.loads(line)
        if ev.get("event_type") != "record_created":
            continue
        src = ev["payload"]["canonical_record"]["source"]
        if src.get("kind") == "arxiv":
            out.append(src["id"])
    return sorted(set(out))


UNKNOWN = ["ZZZZZZZZZZZZZZZZZZZZZZZZZZ", "pith:2026:ZZZZZZZZZZZZZZZZZZZZZZZZZZ", "ZZZZZZZZ",
           "pith:ZZZZZZZZZZZZ", "arxiv:9999.99999", "doi:10.48550%2Farxiv.9999.99999"]
MALFORMED = ["not-an-id", "AR7B", "AR7B3DEVMOTSBRCCVXUCLYSRRE1", "pith:2024:AR7B",
             "pith:abcd:AR7B3DEVMOTSBRCCVXUCLYSRRE", "%20", "AR7B3DEV_", "x" * 201]


# resolve by every identifier form, as JSON and as the redirect
RESOLVE = ["/api/pith-number/resolve?id=%s&json=true", "/api/pith-number/resolve?id=%s"]


def id_requests(recs, arxiv):
    """Every route with the identifier forms a worker resolves (short
    numbers, bare bodies, arXiv ids, DOIs), unknown ones and malformed ones:
    (request, the status expected, or the request for the same record by
    its full number, whose status it must have)."""
    ids = []
    for full in recs[:12]:
        body = full[-26:]
        ids += [(x, full) for x in (body, "pith:" + body[:8], body[:12], "pith:" + body[:16])]
    for a in arxiv[:8]:
        ids += [(x, None) for x in ("arxiv:" + a, a, "doi:10.48550%2Farxiv." + a)]
    ids += [(x, 404) for x in UNKNOWN] + [(x, 400) for x in MALFORMED]
    out = []
    for j, (ident, want) in enumerate(ids):
        hs = {"Accept-Encoding": "gzip"} if j % 2 else {}
        for r in ROUTES + RESOLVE:
            same = ("GET", r % want, hs) if isinstance(want, str) else want
            out.append((("GET", r % ident, hs), same))
    # queries the loop refuses before any worker sees them
    for q in ("", "?json=true", "?id=&json=true", "?arxiv=1&doi=2", "?id=a&id=b"):
        out.append((("GET", "/api/pith-number/resolve" + q, {}), 400))
    return out


def fetch(conn, req):
    method, path, headers = req
    conn.request(method, path, headers=headers)
    r = conn.getresponse()
    body = r.read()
    # Date, and Last-Modified: a record's date starts at the node's start
    # (docs/http.md), and the two runs compared are two starts
    hs = tuple((k, v) for k, v in r.getheaders() if k.lower() not in ("date", "last-modified"))
    return (r.status, hs, body)


def reference(port, reqs):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    ref = {}
    for q in reqs:
        ref[key(q)] = fetch(conn, q)
    conn.close()
    return ref


def key(q):
    return (q[0], q[1], tuple(sorted(q[2].items())))


def conditional(reqs, ref):
    """The GETs again with If-None-Match: their ETag (a 304 expected)."""
    out = []
    for q in reqs:
        st, hs, _ = ref[key(q)]
        etag = dict(hs).get("ETag")
        if q[0] == "GET" and st == 200 and etag:
            h = dict(q[2])
            h["If-None-Match"] = etag
            out.append(("GET", q[1], h))
    return out


def dropper(port, reqs, stop, count):
    """Sends a request and closes before reading the answer, again and again."""
    rnd = random.Random(7)
    while not stop.is_set():
        method, path, headers = rnd.choice(reqs)
        hdr = "".join("%s: %s\r\n" % kv for kv in headers.items())
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(("%s %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (method, path, hdr)).encode())
            if rnd.random() < 0.5:  # a reset rather than a FIN
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
            s.close()
            count[0] += 1
        except OSError:  # the node is stopping (the last case)
            time.sleep(0.01)


def body(args, root, nodes):
    key_file, lines = make_events(args.gen_events, root, 120, 2)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    common = ["--trust-key", key_file, "--http", "127.0.0.1:%d" % port]

    # the reference: rendered on the loop
    n0 = Node(args.pithd, root, "n", extra=common + ["--http-render-threads", "0"]).start()
    nodes.append(n0)
    assert all(x.get("ok") for x in n0.submit(lines)), "events refused"
    wait_for(lambda: n0.status()["store"]["records"] == 120, 20, what="the records")
    recs = sorted(n0.records())
    reqs = requests_for(recs)
    arxiv = arxiv_ids(lines)
    assert len(arxiv) >= 8, "too few arXiv ids: %d" % len(arxiv)
    idreqs = id_requests(recs, arxiv)
    reqs += [q for q, _ in idreqs] + [w for _, w in idreqs if isinstance(w, tuple)]
    ref = reference(port, reqs)
    reqs += conditional(reqs, ref)
    ref = reference(port, reqs)
    assert sum(1 for v in ref.values() if v[0] == 304) > 100, "no conditional answers"
    assert sum(1 for v in ref.values() if v[0] == 200) > 500, "too few documents"
    for q, want in idreqs:
        st = ref[key(q)][0]
        if isinstance(want, tuple):
            want = ref[key(want)][0]
        elif want is None:  # an alias: a record's
            want = 404 if "bundle" in q[1] and st == 404 else 200
            if "resolve" in q[1] and "json" not in q[1]:
                want = 302
        assert st == want, "%s %s: %d, not %d" % (q[0], q[1], st, want)
    rc = n0.stop()
    assert rc == 0, "pithd (render threads 0) exited with %s" % rc
    print("ok - %d reference answers with http_render_threads 0" % len(ref), flush=True)

    # the same node, the pool rendering
    n2 = Node(args.pithd, root, "n", extra=common + ["--http-render-threads", "2"])
    nodes.append(n2)
    n2.start()
    wait_for(lambda: http_up(port), 10, what="the HTTP server")
    bad, done, errors = [], [0], []
    stop_drop = threading.Event()
    dropped = [0]

    def getter(seed):
        rnd = random.Random(seed)
        mine = reqs[:]
        rnd.shuffle(mine)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        try:
            for q in mine:
                got = fetch(conn, q)
                done[0] += 1
                if got != ref[key(q)]:
                    bad.append((q, got[0], ref[key(q)][0]))
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))
        conn.close()

    drops = [threading.Thread(target=dropper, args=(port, reqs, stop_drop, dropped))
             for _ in range(3)]
    for t in drops:
        t.start()
    gets = [threading.Thread(target=getter, args=(i,)) for i in range(16)]
    for t in gets:
        t.start()
    for t in gets:
        t.join()
    stop_drop.set()
    for t in drops:
        t.join()
    assert not errors, "client errors: %s" % errors[:3]
    assert not bad, "%d answers differ, e.g. %s" % (len(bad), bad[:3])
    assert done[0] == 16 * len(reqs)
    print("ok - %d answers by 16 threads with http_render_threads 2 (and %d dropped "
          "requests) are the reference's bytes" % (done[0], dropped[0]), flush=True)
    assert n2.alive(), "pithd died"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.request("GET", "/metrics")
    m = {}
    for line in conn.getresponse().read().decode().splitlines():
        if line.startswith("pith_http_render_"):
            name, val = line.rsplit(" ", 1)
            m[name] = float(val)
    conn.close()
    assert m.get("pith_http_render_threads") == 2, m
    assert m.get("pith_http_render_jobs_total", 0) >= done[0] / 2, m
    assert m.get("pith_http_render_back_total", 0) > 0, m  # the 404s went back to the loop
    assert "pith_http_render_full_total" in m and "pith_http_render_outstanding" in m, m
    print("ok - /metrics counts the pool's jobs (%d), the loop's fallbacks when it was full "
          "(%d) and the requests handed back (%d)" % (m["pith_http_render_jobs_total"],
          m["pith_http_render_full_total"], m["pith_http_render_back_total"]), flush=True)

    # SIGTERM with requests in flight
    stop_all = threading.Event()
    dropped = [0]

    def hammer(seed):
        rnd = random.Random(seed)
        while not stop_all.is_set():
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                for _ in range(50):
                    fetch(conn, rnd.choice(reqs))
                conn.close()
            except Exception:  # noqa: BLE001 (the node is going away)
                time.sleep(0.01)

    load = [threading.Thread(target=hammer, args=(i,)) for i in range(16)]
    load += [threading.Thread(target=dropper, args=(port, reqs, stop_all, dropped))
             for _ in range(2)]
    for t in load:
        t.start()
    time.sleep(1.5)
    rc = n2.stop(timeout=30)
    stop_all.set()
    for t in load:
        t.join()
    assert rc == 0, "pithd exited with %s on SIGTERM under load" % rc
    print("ok - SIGTERM with requests in flight: exit 0", flush=True)

    # SIGTERM while the pool holds requests: 2 threads, each render held
    # back; 24 x 0.2 s ends within the stop's wait (5 s after the 0.5 s
    # linger), 48 x 0.3 s does not
    docs = [q for q in reqs if q[0] == "GET" and not q[2] and ref[key(q)][0] == 200
            and "/state.json" in q[1]]
    stop_with_pending(args, root, nodes, common, port, ref, docs, 24, 200, want_503=False)
    stop_with_pending(args, root, nodes, common, port, ref, docs, 48, 300, want_503=True)
    read_error_counted_once(args, root, nodes)


def read_error_counted_once(args, root, nodes):
    sub = os.path.join(root, "damaged")
    os.makedirs(sub)
    key_file, lines = make_events(args.gen_events, sub, 1000, 1)
    node = Node(args.pithd, sub, "d", extra=["--trust-key", key_file, "--http", "127.0.0.1:0",
                                             "--http-render-threads", "2"])
    import_damaged(args.pithctl, node, key_file, os.path.join(sub, "events.jsonl"), "records",
                   1 / 3)
    nodes.append(node)
    node.start()
    port = int(node.status()["http"].rsplit(":", 1)[1])

    def read_errors():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/healthz")
        v = json.loads(conn.getresponse().read())["store"]["read_errors"]
        conn.close()
        return v

    bodies = sorted({m for ln in lines for m in re.findall(rb"pith:\d{4}:([A-Z2-7]{26})", ln)})
    counted = []
    for b in bodies:
        before = read_errors()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/pith/%s/state.json" % b.decode())
        resp = conn.getresponse()
        resp.read()
        conn.close()
        if resp.status == 500:
            counted.append(read_errors() - before)
            if len(counted) == 5:
                break
    assert counted, "no identifier's resolution read the damaged block"
    assert counted == [1] * len(counted), "read errors counted per request: %s" % counted
    rc = node.stop()
    assert rc == 0, rc
    print("ok - a store read error while a worker resolves an identifier: 500, counted once "
          "(%d requests)" % len(counted), flush=True)


def metric_value(port, name):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def stop_with_pending(args, root, nodes, common, port, ref, docs, n, delay_ms, want_503):
    """Starts the node with renders delayed by delay_ms, sends n requests
    for documents (one connection each), sends SIGTERM once the pool holds
    them all, and checks every answer."""
    node = Node(args.pithd, root, "n", extra=common + ["--http-render-threads", "2"],
                env={"PITH_TEST_RENDER_DELAY_MS": str(delay_ms)})
    nodes.append(node)
    node.start()
    wait_for(lambda: http_up(port), 10, what="the HTTP server")
    got = [None] * n

    def one(i):
        q = docs[i % len(docs)]
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request(q[0], q[1], headers=q[2])
            r = conn.getresponse()
            got[i] = (q, r.status, r.getheader("Connection"), r.read())
            conn.close()
        except Exception as e:  # noqa: BLE001 (reported below)
            got[i] = (q, None, None, repr(e))

    clients = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in clients:
        t.start()
    wait_for(lambda: metric_value(port, "pith_http_render_outstanding") == n, 10,
             what="%d requests in the pool" % n)
    t0 = time.time()
    rc = node.stop(timeout=60)
    took = time.time() - t0
    for t in clients:
        t.join()
    assert rc == 0, "pithd exited with %s on SIGTERM with requests in the pool" % rc
    cut = [g for g in got if g[1] is None]
    assert not cut, "%d of %d requests got no answer, e.g. %s" % (len(cut), n, cut[:2])
    ok = [g for g in got if g[1] == 200]
    refused = [g for g in got if g[1] == 503]
    assert len(ok) + len(refused) == n, [g[1] for g in got]
    for q, _, conn_hdr, body in ok:
        assert body == ref[key(q)][2], "%s: not the reference's body" % q[1]
        assert conn_hdr == "close", "%s: 200 without Connection: close" % q[1]
    for q, _, conn_hdr, body in refused:
        assert conn_hdr == "close", "%s: 503 without Connection: close" % q[1]
        assert json.loads(body)["message"] == "shutting down", body
    if want_503:
        assert ok and refused, "want 200s and 503s: %d, %d" % (len(ok), len(refused))
        assert took < 0.5 + 5 + 0.5 + 5, "the stop took %.1f s" % took
    else:
        assert not refused, "%d answered 503 within the wait" % len(refused)
    print("ok - SIGTERM with %d requests in the pool (renders %d ms): %d answered with "
          "their document, %d answered 503, none cut; exit 0 after %.1f s"
          % (n, delay_ms, len(ok), len(refused), took), flush=True)


def http_up(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/healthz")
        c.getresponse().read()
        c.close()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(run_test("pith-renderpool-", body))
