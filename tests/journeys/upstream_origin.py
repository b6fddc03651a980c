#!/usr/bin/env python3
"""Journey: an operator follows a mirror whose bundles live on a CDN on
another host (issue 53; docs/upstream.md, "Origins").

    upstream_origin.py --pithd P --pithctl C [--keep]

1. A mirror (HTTPS) answers every bundle with a 302 to its CDN, another
   origin. pithd runs from a config file with `upstream = MIRROR`.
2. A reader's `curl` of the sample record gets 503 "try again later" with
   Retry-After; nothing is asked of the CDN. `pithctl status` says why:
   the upstream's last error is "redirect to another origin refused:
   https://CDN/...".
3. The operator adds `upstream_origin = https://CDN` to the config and
   sends SIGHUP: the log says so, the same `curl` now gets 200 with the
   record, and the CDN served the bundle.
4. A mistyped origin (with a path) is refused at start, in one line, exit 2
   (a bad setting); `pithctl pull --upstream-origin` refuses it, exit 1.
"""
import json
import os
import signal
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import check, ctl_status, free_port, read_text as read, run_test, wait_for  # noqa: E402,E501
from hostile53_test import Upstream  # noqa: E402
from upstream_standin import write_tree  # noqa: E402

SAMPLE = "AR7B3DEVMOTSBRCCVXUCLYSRRE"
SAMPLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                           "bundle-AR7B3DEV.json")


def curl(url):
    """(status, headers lower-cased, body) as `curl -si` shows them."""
    r = subprocess.run(["curl", "-si", "--max-time", "20", url], capture_output=True, timeout=30)
    head, _, body = r.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


def body(args, root, nodes):
    with open(SAMPLE_FILE, "rb") as f:
        sample = f.read().strip()
    cdn = Upstream(root, "cdn")
    mirror = Upstream(root, "mirror", ["--redirect-to", cdn.origin])
    try:
        write_tree(cdn.root, [sample])
        write_tree(mirror.root, [sample], index=False)
        ca = os.path.join(root, "ca.pem")
        with open(ca, "w") as f:
            f.write(read(mirror.ca) + read(cdn.ca))
        data = os.path.join(root, "data")
        logf = os.path.join(root, "pithd.log")
        conf = os.path.join(root, "pithd.conf")
        http = free_port()
        base_conf = ("# pithd following a mirror whose bundles are on a CDN\n"
                     "data = %s\nlisten = 127.0.0.1:0\nhttp = 127.0.0.1:%d\n"
                     "network_id = pith-test\nlog_file = %s\nlog_level = info\n"
                     "upstream = %s\nupstream_ca_file = %s\nupstream_refresh = 1\n"
                     % (data, http, logf, mirror.origin, ca))
        with open(conf, "w") as f:
            f.write(base_conf)
        out = open(os.path.join(root, "pithd.stderr"), "wb")
        proc = subprocess.Popen([args.pithd, "--config", conf], stdout=out, stderr=out)
        sock = os.path.join(data, "pithd.sock")

        def status():
            return ctl_status(sock)
        try:
            wait_for(lambda: status() or proc.poll() is not None, 20, what="pithd to start")
            check(proc.poll() is None, "pithd runs from its config file")
            url = "http://127.0.0.1:%d/pith/%s.json" % (http, SAMPLE)
            st, hdrs, b = curl(url)
            check(st == 503 and "try again" in b.decode() and int(hdrs.get("retry-after", 0)) >= 1,
                  "the reader's curl gets 503 'try again later' with Retry-After (%d, %s)"
                  % (st, hdrs.get("retry-after")))
            check(cdn.stats()["requests"] == 0, "nothing was asked of the CDN")
            le = status()["follow"]["upstreams"][0]["last_error"] or ""
            want = "redirect to another origin refused: %s/pith/%s/bundle.json" % (cdn.origin,
                                                                                 SAMPLE)
            check(want in le and "list its origin with upstream_origin" in le,
                  "pithctl status says why, and what to do: %s" % le)
            check(want in read(logf), "and so does the log")

            with open(conf, "w") as f:
                f.write(base_conf + "upstream_origin = %s\n" % cdn.origin)
            proc.send_signal(signal.SIGHUP)
            wait_for(lambda: "reload: upstream: following 1 upstream(s) afresh" in read(logf), 10,
                     what="the reload's upstream line")
            check("reload: upstream_origin changed" in read(logf),
                  "SIGHUP: the log says upstream_origin changed")
            wait_for(lambda: curl(url)[0] == 200, 15, what="the record through the CDN")
            st, hdrs, b = curl(url)
            doc = json.loads(b)
            check(st == 200 and doc.get("pith_number", "").endswith(SAMPLE),
                  "the same curl now gets 200 with the record")
            check(cdn.stats()["full"] >= 1, "the CDN served its bundle")
            proc.send_signal(signal.SIGTERM)
            check(proc.wait(timeout=20) == 0, "SIGTERM stops pithd with exit 0")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

        bad = "https://cdn.example/bundles"
        r = subprocess.run([args.pithd, "--data", os.path.join(root, "d2"), "--upstream-origin",
                            bad], capture_output=True, text=True, timeout=30)
        line = ("pithd: upstream_origin: '%s' is not an origin: http:// or https://, a host and "
                "an optional port, no path (like https://cdn.example)" % bad)
        check(r.returncode == 2 and r.stderr.splitlines() == [line],
              "a mistyped origin is refused at start, one line, exit 2 (a usage error, as "
              "every bad setting): %s" % r.stderr.strip())
        r = subprocess.run([args.pithctl, "--store", os.path.join(root, "s"), "pull", "--from",
                            mirror.origin, "--upstream-origin", bad, SAMPLE],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 1 and r.stderr.startswith("pithctl pull: --upstream-origin %s: not an origin" % bad),
              "pithctl pull refuses it too: %s" % r.stderr.strip())
    finally:
        cdn.stop()
        mirror.stop()


def main():
    return run_test("journey-upstream-origin-", body, tools=("pithd", "pithctl"))


if __name__ == "__main__":
    sys.exit(main())
