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
9. An upstream that answers 503 to everything, 200 IDs, --retries 1: the
   breaker stops the run after 8 requests in a row failed after their
   retry; far fewer requests than 200 x 2, exit 1, one "appears down"
   line, and the IDs never asked counted as not attempted.
10. A 429 with Retry-After: 1 on one bundle while 40 resolves wait their
   turn (each answered 0.5 s late): no request reaches the upstream for
   that second, then the run goes on.
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
        self.always = None  # (status, headers) answered to every request, if set
        self.slow = {}      # path prefix -> seconds an answer waits

    def reset(self, script, always=None, slow=None):
        with self.lock:
            self.script = {k: list(v) for k, v in script.items()}
            self.log = []
            self.always = always
            self.slow = dict(slow or {})

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
            answer = queue.pop(0) if queue else srv.always
            delay = max([d for p, d in srv.slow.items() if self.path.startswith(p)] or [0])
        if delay:
            time.sleep(delay)
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

    def pull(name, script, extra=(), origin=origin, expect_rc=0, max_s=8.0, ids=(NUMBER,),
             always=None, slow=None):
        srv.reset(script, always, slow)
        t0 = time.monotonic()
        r = subprocess.run([args.pithctl, "--store", os.path.join(tmp, name), "pull", "--from",
                            origin, "--json", "--no-progress"] + list(extra) + list(ids),
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

        # 9. a 503 to everything, 200 IDs: the breaker stops the run early
        ids_file = os.path.join(tmp, "ids-200")
        with open(ids_file, "w") as f:
            f.write("".join("2401.%05d\n" % i for i in range(200)))
        s, err, took = pull("down", {}, extra=["--retries", "1", "--ids", ids_file], ids=(),
                            always=(503, {}), expect_rc=1, max_s=20)
        asked = len(srv.log)
        down = [l for l in err if l.startswith("pithctl pull: %s appears down" % origin)]
        counted = sum(s.get(k, 0) for k in ("stored", "unchanged", "not_found", "rejected",
                                            "failed", "not_attempted"))
        if asked > 80:
            fail("503 to everything: %d requests for 200 IDs (no breaker?)" % asked)
        m = re.match(r"^pithctl pull: %s appears down \(8 requests in a row failed after "
                     r"their retries\): stopped after (\d+) of 200 IDs, (\d+) not attempted; "
                     r"what was stored is kept\. Run the same command again later"
                     % re.escape(origin), down[0]) if len(down) == 1 else None
        if (not m or counted != 200 or s.get("not_attempted", 0) < 150
                or int(m.group(2)) != s["not_attempted"]
                or int(m.group(1)) + int(m.group(2)) != 200):
            fail("503 to everything: %s %s" % (s, down or err[-5:]))
        print("503 to everything, 200 IDs, --retries 1: stopped after %d requests in %.1f s, "
              "%d not attempted" % (asked, took, s["not_attempted"]))

        # 10. a Retry-After holds back the whole run, not only its request
        arxiv = ["2402.%05d" % i for i in range(40)]
        s, err, took = pull("pause", {BUNDLE_PATH: [(429, {"Retry-After": "1"})]},
                            ids=[NUMBER] + arxiv, slow={"/api/": 0.5}, expect_rc=1, max_s=20)
        t = srv.times(BUNDLE_PATH)
        with srv.lock:
            others = sorted(tm for p, tm in srv.log if p.startswith("/api/"))
        if s["stored"] != 1 or s["not_found"] != 40 or len(t) != 2 or len(others) != 40:
            fail("429 with Retry-After: 1 among 40: %s %s %s" % (s, t, len(others)))
        # the first 15 resolves went out with the bundle, before its 429 was read; then
        # none until the second is over
        held = [round(x - t[0], 3) for x in others if t[0] + 0.3 < x < t[0] + 0.95]
        if held or t[1] - t[0] < 0.95:
            fail("429 with Retry-After: 1 among 40: requests %s s after the 429, its retry "
                 "%.2f s after" % (held, t[1] - t[0]))
        print("429 with Retry-After: 1 among 40 IDs: no request for %.2f s, then the rest "
              "(%.1f s in all)" % (min(x for x in others + t[1:] if x > t[0] + 0.3) - t[0],
                                   took))
        print("pull retry test: OK in %.1f s" % (time.time() - t_all))
        return 0
    finally:
        srv.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
