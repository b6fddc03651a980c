#!/usr/bin/env python3
"""Journey: another site's script reads a mirror (issue 51, "HTTP for tools").

With curl's eyes: a record's state.json, a 404 and a 400 asked with an
Origin header all carry Access-Control-Allow-Origin: * and expose ETag and
Last-Modified; a preflight (OPTIONS with Access-Control-Request-*) answers
the methods, headers and max-age, for the documents and for POST /events.

With a browser's: headless Chromium loads a page from a second origin (a
Python http.server on another port) whose script fetch()es the record's
state.json, a 404 of the node, the state again with If-None-Match (a
header that needs a preflight: the answer is a 304 the script sees), and,
as a control, a third origin that sends no CORS headers (the browser must
refuse it); the script writes what it read into the page, read back with
--dump-dom. A screenshot goes to OUT.

usage: cors.py --pithd D --pithctl C --gen-events G [--out DIR] [--chromium PATH] [--keep]
Exits 77 (skipped) without Chromium (Debian package chromium).
"""
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_node import SAMPLE, mirror_node, request, run_test, wait_for  # noqa: E402

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>another site</title></head>
<body><h1>Another site reading a mirror</h1><pre id="out" style="white-space:pre-wrap">waiting</pre>
<script>
const node = %(node)s, plain = %(plain)s, out = {};
async function run() {
  let r = await fetch(node + "/pith/%(sample)s/state.json");
  const etag = r.headers.get("ETag");
  out.record = {status: r.status, etag: etag, last_modified: r.headers.get("Last-Modified"),
                state_sha256: (await r.json()).state_sha256};
  r = await fetch(node + "/pith/NOSUCHRECORDXXXXXXXXXXXXXX/state.json");
  out.missing = {status: r.status, error: (await r.json()).error};
  r = await fetch(node + "/pith/%(sample)s/state.json",
                  {headers: {"If-None-Match": etag}, cache: "no-store"});
  out.revalidated = {status: r.status};
  try {
    r = await fetch(plain + "/data.json");
    out.no_cors = "read " + r.status;
  } catch (e) {
    out.no_cors = "refused: " + e.name;
  }
}
run().catch(e => { out.failed = String(e); }).finally(() => {
  document.getElementById("out").textContent = "RESULT " + JSON.stringify(out, null, 2) + " END";
});
</script></body></html>
"""


def serve(directory):
    """An HTTP server of directory on a free port (another origin), in a thread."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass
    handler = functools.partial(Quiet, directory=directory)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, "http://127.0.0.1:%d" % srv.server_address[1]


def with_curl(base):
    origin = {"Origin": "https://another.example"}
    st, h, b = request(base + "/pith/%s/state.json" % SAMPLE, headers=origin)
    assert st == 200 and h.get("access-control-allow-origin") == "*", (st, h)
    expose = [x.strip().lower() for x in h.get("access-control-expose-headers", "").split(",")]
    assert "etag" in expose and "last-modified" in expose, h
    for path, want in (("/pith/NOSUCHRECORDXXXXXXXXXXXXXX", 404), ("/nope", 404),
                       ("/pith/%21%21", 400), ("/api/pith-number/resolve", 400)):
        st, h, b = request(base + path, headers=origin)
        assert st == want and h.get("access-control-allow-origin") == "*", (path, st, h)
    pre = dict(origin, **{"Access-Control-Request-Method": "GET",
                          "Access-Control-Request-Headers": "if-none-match, if-modified-since"})
    st, h, _ = request(base + "/pith/%s/state.json" % SAMPLE, "OPTIONS", pre)
    assert st == 204 and h.get("access-control-allow-origin") == "*", (st, h)
    methods = h.get("access-control-allow-methods", "")
    allowed = h.get("access-control-allow-headers", "").lower()
    assert "GET" in methods and "HEAD" in methods, h
    assert "if-none-match" in allowed and "if-modified-since" in allowed, h
    assert int(h.get("access-control-max-age", "0")) > 0, h
    pre = dict(origin, **{"Access-Control-Request-Method": "POST",
                          "Access-Control-Request-Headers": "content-type"})
    st, h, _ = request(base + "/events", "OPTIONS", pre)
    assert st == 204 and "POST" in h.get("access-control-allow-methods", "") and \
        "content-type" in h.get("access-control-allow-headers", "").lower(), (st, h)
    print("ok - CORS headers on a record, on 404s and 400s, and on preflights", flush=True)


def with_browser(exe, base, root, out):
    site = os.path.join(root, "site")
    plain_dir = os.path.join(root, "plain")
    os.makedirs(site)
    os.makedirs(plain_dir)
    with open(os.path.join(plain_dir, "data.json"), "w") as f:
        f.write('{"x": 1}')
    plain, plain_url = serve(plain_dir)
    other, other_url = serve(site)
    try:
        with open(os.path.join(site, "index.html"), "w") as f:
            f.write(PAGE % {"node": json.dumps(base), "plain": json.dumps(plain_url),
                            "sample": SAMPLE})
        flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--window-size=1000,700", "--virtual-time-budget=15000"]
        dom = subprocess.run([exe] + flags + ["--dump-dom", other_url + "/index.html"],
                             capture_output=True, text=True, timeout=90).stdout
        subprocess.run([exe] + flags + ["--screenshot=" + os.path.join(out, "cors.png"),
                                        other_url + "/index.html"], capture_output=True,
                       timeout=90)
    finally:
        other.shutdown()
        plain.shutdown()
    m = re.search(r"RESULT (.*?) END", dom, re.S)
    assert m, "the page's script wrote nothing: %s" % dom[-1500:]
    got = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    _, h, b = request(base + "/pith/%s/state.json" % SAMPLE)
    want_sha = json.loads(b)["state_sha256"]
    assert "failed" not in got, got
    assert got["record"]["status"] == 200 and got["record"]["state_sha256"] == want_sha, got
    # the browser asked for gzip: the compressed bytes' own tag
    assert got["record"]["etag"] in (h["etag"], h["etag"][:-1] + '-gzip"'), (got, h)
    assert got["record"]["last_modified"] == h.get("last-modified"), (got, h)
    assert got["missing"] == {"status": 404, "error": "not_found"}, got
    assert got["revalidated"]["status"] == 304, got
    assert got["no_cors"].startswith("refused"), "the browser read a site without CORS: %s" % got
    print("ok - a script on another origin read the record (ETag, Last-Modified), the 404, "
          "a 304 after a preflight; a site without CORS was refused", flush=True)


def body(args, root, nodes):
    exe = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    out = args.out or root
    os.makedirs(out, exist_ok=True)
    n, base, bodies = mirror_node(args, root, nodes, records=5)
    # the record's date is sent from the second after its commit on
    wait_for(lambda: "last-modified" in request(base + "/pith/%s/state.json" % SAMPLE)[1], 10,
             what="state.json to carry Last-Modified")
    with_curl(base)
    if not exe:
        print("SKIPPED: the browser half: chromium is not installed (apt-get install chromium; "
              "scripts/deps.sh)")
        sys.exit(77)
    with_browser(exe, base, root, out)


def add_args(ap):
    ap.add_argument("--out", help="where the screenshot goes")
    ap.add_argument("--chromium")


if __name__ == "__main__":
    sys.exit(run_test("journey_cors.", body, add_args=add_args))
