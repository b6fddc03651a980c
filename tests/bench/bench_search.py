#!/usr/bin/env python3
"""p50/p99 of GET paths against a running http_serve (one client, sequential).

usage: bench_search.py PORT N PATH...  (issue 18, docs/performance.md, "Search index")
"""
import http.client, json, sys, time, urllib.parse
port = int(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
c = http.client.HTTPConnection("127.0.0.1", port)
def t(path):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); c.request("GET", path); r = c.getresponse(); b = r.read()
        ts.append(time.perf_counter() - t0)
        assert r.status == 200, (path, r.status, b[:200])
    ts.sort()
    return ts[len(ts) // 2] * 1e3, ts[int(len(ts) * 0.99)] * 1e3, b
for q in sys.argv[3:]:
    p50, p99, b = t(q)
    extra = ""
    if q.startswith("/api/search"):
        extra = " hits=%d" % len(json.loads(b)["results"])
    print("%-60s p50 %.2f ms  p99 %.2f ms%s" % (q, p50, p99, extra))
