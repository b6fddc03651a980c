#!/usr/bin/env python3
"""`pithctl pull` retries what may mend, and only that (docs/upstream.md,
"Retries").

usage: pull_retry_test.py --pithctl P --data D

A plain-HTTP server in this process answers each URL from a script (a list
of (status, headers) to answer first, then the real thing: the sample
bundle at its registry path, 404 elsewhere) and notes when each request
came. Each case pulls the sample record by its full number into a fresh
store:
1. 503 with Retry-After: 1, 503 without, then the bundle: stored, exit 0,
   two retry lines, the second attempt 1 s after the first (Retry-After),
   the third 0.5 to 1 s after the second (the backoff's second step).
2. 429 (no Retry-After), then the bundle: stored after one retry 0.25 to
   0.5 s later.
3. 404 at both registry paths: not found, exit 1, one line, no retry.
4. 400: failed at once, no retry.
5. A 500 every time with --retries 1: two attempts, then "failed: HTTP 500
   from URL (after 2 attempts)", exit 1.
6. 503 with Retry-After: 120 (over the 60 s pull waits): failed at once,
   saying so.
7. A refused connection with --retries 1: retried once (network-level),
   then failed with curl's message.
8. --retries 0: a 503 fails at once.
"""
import argparse
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

NUMBER = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
BUNDLE_PATH = "/pith/%s/bundle.json" % NUMBER[10:]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, bundle):
        super().__init__(("127.0.0.1", 0), Handler)
        self.bundle = bundle
        self.lock = threading.Lock()
        self.script = {}  # path -> [(status, {header: value}), ...] answered first
        self.log = []     # (path, time) of each request

    def reset(self, script):
        with self.lock:
            self.script = {k: list(v) for k, v in script.items()}
            self.log = []

    def times(self, path):
        with self.lock:
            return [t for p, t in self.log if p == path]


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        srv = self.server
        with srv.lock:
            srv.log.append((self.path, time.monotonic()))
            queue = srv.script.get(self.path)
            answer = queue.pop(0) if queue else None
        if answer:
            status, headers = answer
            body = b'{"error":"scripted"}'
        elif self.path == BUNDLE_PATH:
            status, headers, body = 200, {"Content-Type": "application/json"}, srv.bundle
        else:
            status, headers, body = 404, {}, b"not here"
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--data", required=True)
    args = ap.parse_args()
    with open(os.path.join(args.data, "bundle-AR7B3DEV.json"), "rb") as f:
        srv = Server(f.read())
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    origin = "http://127.0.0.1:%d" % srv.server_address[1]
    bundle_url = origin + BUNDLE_PATH
    tmp = tempfile.mkdtemp(prefix="pith-pull-retry-")
    t_all = time.time()

    def pull(name, script, extra=(), origin=origin, expect_rc=0, max_s=8.0):
        srv.reset(script)
        t0 = time.monotonic()
        r = subprocess.run([args.pithctl, "--store", os.path.join(tmp, name), "pull", "--from",
                            origin, "--json", "--no-progress"] + list(extra) + [NUMBER],
                           capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
        if "Sanitizer" in r.stderr or "runtime error:" in r.stderr:
            fail("%s: sanitizer report:\n%s" % (name, r.stderr[-4000:]))
        if r.returncode != expect_rc:
            fail("%s: exit %d, expected %d\n%s%s" % (name, r.returncode, expect_rc, r.stdout,
                                                    r.stderr))
        if took > max_s:
            fail("%s: took %.1f s, expected under %.1f s" % (name, took, max_s))
        return json.loads(r.stdout), r.stderr.splitlines(), took

    def retry_lines(err):
        return [l for l in err if "; retrying in " in l]

    try:
        # 1. 503 twice (once with Retry-After: 1), then the bundle
        s, err, took = pull("503", {BUNDLE_PATH: [(503, {"Retry-After": "1"}), (503, {})]})
        t = srv.times(BUNDLE_PATH)
        want = [r"^pithctl pull: %s answered 503 with Retry-After: 1; retrying in 1\.0 s "
                r"\(attempt 2 of 5\)$" % re.escape(bundle_url),
                r"^pithctl pull: %s answered 503; retrying in (0\.[5-9]|1\.0) s "
                r"\(attempt 3 of 5\)$" % re.escape(bundle_url)]
        lines = retry_lines(err)
        if (s["stored"] != 1 or s["retries"] != 2 or len(t) != 3 or len(lines) != 2
                or not all(re.match(w, l) for w, l in zip(want, lines))):
            fail("503 twice then 200: %s %s %s" % (s, err, t))
        if not (0.95 <= t[1] - t[0] <= 1.5 and 0.45 <= t[2] - t[1] <= 1.5):
            fail("503 twice then 200: attempts at %s" % [round(x - t[0], 3) for x in t])
        print("503 (Retry-After: 1), 503, 200: stored after 2 retries, %.2f s then %.2f s "
              "apart (%.1f s in all)" % (t[1] - t[0], t[2] - t[1], took))

        # 2. 429, then the bundle
        s, err, took = pull("429", {BUNDLE_PATH: [(429, {})]})
        t = srv.times(BUNDLE_PATH)
        lines = retry_lines(err)
        if (s["stored"] != 1 or s["retries"] != 1 or len(t) != 2 or len(lines) != 1
                or not re.match(r"^pithctl pull: %s answered 429; retrying in 0\.[2-5] s "
                                r"\(attempt 2 of 5\)$" % re.escape(bundle_url), lines[0])
                or not 0.2 <= t[1] - t[0] <= 1.0):
            fail("429 then 200: %s %s %s" % (s, err, t))
        print("429, 200: stored after 1 retry %.2f s later" % (t[1] - t[0]))

        # 3. 404 at both registry paths: not found, no retry
        wk = "/.well-known/pith/%s/bundle.json" % NUMBER[10:]
        s, err, took = pull("404", {BUNDLE_PATH: [(404, {})] * 9}, expect_rc=1, max_s=3)
        if (s["not_found"] != 1 or s["retries"] or len(srv.times(BUNDLE_PATH)) != 1
                or len(srv.times(wk)) != 1 or len(err) != 1
                or err[0] != "pithctl pull: %s: not found: %s answered 404" % (NUMBER, origin + wk)):
            fail("404: %s %s" % (s, err))
        print("404: not found, exit 1, no retry: %s" % err[0])

        # 4. another 4xx: failed at once
        s, err, took = pull("400", {BUNDLE_PATH: [(400, {})] * 9}, expect_rc=1, max_s=3)
        if (s["failed"] != 1 or s["retries"] or len(srv.times(BUNDLE_PATH)) != 1 or len(err) != 1
                or err[0] != "pithctl pull: %s: failed: HTTP 400 from %s" % (NUMBER, bundle_url)):
            fail("400: %s %s" % (s, err))
        print("400: failed at once, no retry")

        # 5. a 500 every time, --retries 1
        s, err, took = pull("500", {BUNDLE_PATH: [(500, {})] * 9}, extra=["--retries", "1"],
                            expect_rc=1, max_s=4)
        if (s["failed"] != 1 or s["retries"] != 1 or len(srv.times(BUNDLE_PATH)) != 2
                or len(retry_lines(err)) != 1 or "(attempt 2 of 2)" not in err[0]
                or err[-1] != "pithctl pull: %s: failed: HTTP 500 from %s (after 2 attempts)"
                % (NUMBER, bundle_url)):
            fail("500 every time: %s %s" % (s, err))
        print("500 every time, --retries 1: %s" % err[-1])

        # 6. a Retry-After over the cap: not waited out
        s, err, took = pull("503-long", {BUNDLE_PATH: [(503, {"Retry-After": "120"})]},
                            expect_rc=1, max_s=3)
        if (s["failed"] != 1 or s["retries"] or len(err) != 1
                or not err[0].endswith("failed: HTTP 503 from %s (Retry-After 120 s is over the "
                                       "60 s pull waits: not retried)" % bundle_url)):
            fail("Retry-After 120: %s %s" % (s, err))
        print("503 with Retry-After: 120: failed at once: %s" % err[0])

        # 7. nobody listening: a network-level failure, retried
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        dead = "http://127.0.0.1:%d" % sock.getsockname()[1]  # bound, not listening
        s, err, took = pull("refused", {}, extra=["--retries", "1"], origin=dead, expect_rc=1,
                            max_s=4)
        sock.close()
        dead_bundle = dead + BUNDLE_PATH
        if (s["failed"] != 1 or s["retries"] != 2  # the manifest's and the bundle's
                or not any(l.startswith("pithctl pull: %s: Couldn't connect" % dead_bundle)
                           and l.endswith("(attempt 2 of 2)") for l in err)
                or not (err[-1].startswith("pithctl pull: %s: failed: %s: Couldn't connect"
                                           % (NUMBER, dead_bundle))
                        and err[-1].endswith("(after 2 attempts)"))):
            fail("refused: %s %s" % (s, err))
        print("connection refused, --retries 1: %s" % err[-1])

        # 8. --retries 0
        s, err, took = pull("no-retries", {BUNDLE_PATH: [(503, {})]}, extra=["--retries", "0"],
                            expect_rc=1, max_s=3)
        if s["failed"] != 1 or s["retries"] or len(srv.times(BUNDLE_PATH)) != 1 or len(err) != 1:
            fail("--retries 0: %s %s" % (s, err))
        print("--retries 0: a 503 fails at once")
        print("pull retry test: OK in %.1f s" % (time.time() - t_all))
        return 0
    finally:
        srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
