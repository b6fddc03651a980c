#!/usr/bin/env python3
"""/metrics names (issue 20): a live pithd's /metrics, with every family
it has (HTTP server, node, follower, static site) holding samples, must

  1. have no two families that collide under OpenMetrics rules: a
     counter's family is its name less `_total`, a histogram's samples add
     `_bucket`, `_sum`, `_count` (and OpenMetrics `_created`), so gauge
     `x` and counter `x_total`, or gauge `x_count` and histogram `x`, are
     one family to an OpenMetrics parser; and no gauge may end in a
     suffix OpenMetrics reserves (but `_info`, an info metric's sample);
  2. pass `promtool check metrics` with nothing printed (Debian package
     `prometheus`; not installed by scripts/deps.sh: the package starts a
     Prometheus server on install). Without promtool, 1 still runs and the
     test then exits 77 (skipped), saying so.

usage: metrics_check.py --pithd PATH [--file METRICS_TXT]
  --file checks a saved /metrics text instead of starting a node.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created", "_info", "_gsum", "_gcount")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def live_metrics(pithd, root):
    """Starts pithd with HTTP and an upstream (the follower's families),
    makes a few requests (so labelled series exist), returns /metrics."""
    port = free_port()
    log = open(os.path.join(root, "pithd.log"), "w")
    p = subprocess.Popen([pithd, "--data", os.path.join(root, "d"), "--listen", "127.0.0.1:0",
                          "--http", "127.0.0.1:%d" % port, "--network-id", "pith-test",
                          "--upstream", "http://127.0.0.1:9",
                          "--site-dir", os.path.join(root, "site"),
                          "--site-base-url", "http://127.0.0.1:%d" % port],
                         stdout=log, stderr=subprocess.STDOUT)
    try:
        base = "http://127.0.0.1:%d" % port
        deadline = time.time() + 15
        while True:
            try:
                get(base + "/healthz")
                break
            except OSError:
                if p.poll() is not None or time.time() > deadline:
                    raise SystemExit("pithd did not answer /healthz (log: %s)" % log.name)
                time.sleep(0.1)
        for path in ("/pith-mirrors.json", "/nope", "/metrics"):
            try:
                get(base + path)
            except OSError:
                pass
        return get(base + "/metrics")
    finally:
        p.terminate()
        p.wait(timeout=30)
        log.close()


def families(text):
    """{name: type} from the # TYPE lines; every sample line's name must
    belong to one (checked)."""
    fams, problems = {}, []
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)$", line)
        if m:
            if m.group(1) in fams:
                problems.append("family %s declared twice" % m.group(1))
            fams[m.group(1)] = m.group(2)
    return fams, problems


def collisions(fams):
    """Problems under OpenMetrics naming: the family name each # TYPE
    stands for, and the sample names it owns, must be unique."""
    problems = []
    owner = {}  # OpenMetrics family name or sample name -> Prometheus family
    for name, typ in fams.items():
        if typ == "counter":
            if not name.endswith("_total"):
                problems.append("counter %s does not end in _total" % name)
            om = name[:-len("_total")] if name.endswith("_total") else name
            samples = [om + "_total", om + "_created"]
        elif typ == "histogram":
            om = name
            samples = [name + s for s in ("_bucket", "_sum", "_count", "_created")]
        elif typ == "gauge" and name.endswith("_info"):
            # an info metric (pith_build_info): a gauge of 1 in 0.0.4, the
            # info family less _info in OpenMetrics (docs/http.md)
            om = name[:-len("_info")]
            samples = [name]
        else:
            om = name
            samples = [name]
            for s in SUFFIXES:
                if name.endswith(s):
                    problems.append("%s %s ends in %s, a suffix OpenMetrics reserves" % (typ, name, s))
        for key in [om] + samples:
            if key in owner and owner[key] != name:
                problems.append("%s %s and %s %s collide under OpenMetrics (both %s)" % (
                    fams[owner[key]], owner[key], typ, name, key))
            owner.setdefault(key, name)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithd")
    ap.add_argument("--file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pith-metrics-") as root:
        if a.file:
            text = open(a.file).read()
        else:
            text = live_metrics(a.pithd, root)
        fams, problems = families(text)
        problems += collisions(fams)
        # the collision check must catch the clash issue 20 found
        assert collisions({"pith_bans": "gauge", "pith_bans_total": "counter"}), "checker broken"
        assert collisions({"x_count": "gauge", "x": "histogram"}), "checker broken"
        problems = list(dict.fromkeys(problems))  # once each, in order
        for p in problems:
            print("metrics: " + p)
        if problems:
            return 1
        print("metrics: %d families, no OpenMetrics collisions" % len(fams))
        promtool = shutil.which("promtool")
        if not promtool:
            print("metrics: SKIPPED promtool check: promtool not installed "
                  "(apt-get install prometheus; not in scripts/deps.sh)")
            return 77
        r = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                           capture_output=True)
        out = (r.stdout + r.stderr).decode()
        if r.returncode or out.strip():
            print("metrics: promtool check metrics (exit %d):\n%s" % (r.returncode, out))
            return 1
        print("metrics: promtool check metrics: nothing to say")
    return 0


if __name__ == "__main__":
    sys.exit(main())
