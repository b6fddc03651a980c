#!/usr/bin/env python3
"""Journey: the README's first command, as a newcomer runs it (issue 51).

    quickstart.py --source DIR --build DIR [--keep]

Runs `bash scripts/quickstart.sh` from the source tree, as the README says,
on the built tree (PITH_QUICKSTART_BUILD: no packages installed, nothing
built; the rest of the script runs as the README's command does), on free
ports and in a temporary mesh directory. Then asserts what the person sees:

- the script exits 0 and prints one line per node: its events, its records
  and the URL of the sample record's page;
- every node holds the sample record (control socket status: events and
  records as printed; `records` lists it);
- the sample record's page answers 200 with HTML holding the record's title
  on every node;
- the "Stop it with:" line it prints, pasted as it is, stops the mesh, and no pithd it started
  is left running;
- a mesh whose last node cannot get the record (put on another network by
  a wrapper): exit 1 and one line naming the node and what it holds.

Exit 0 on success, 1 on a failure, 77 (skipped) without curl (the script
uses it; scripts/deps.sh installs it).
"""
import argparse
import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import Ctl  # noqa: E402

NODES = 3
SAMPLE = "AR7B3DEVMOTSBRCCVXUCLYSRRE"


def free_run(n):
    """A base port P with P..P+n-1 all free on 127.0.0.1 a moment ago."""
    for _ in range(200):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + n > 65535:
            continue
        ok = True
        for p in range(base, base + n):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return base
    raise RuntimeError("no run of %d free ports found" % n)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok -", what, flush=True)


def pithd_pids_in(d):
    """Pids of running pithd processes whose command line names d."""
    pids = []
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % e, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"pithd" and any(d.encode() in a for a in argv):
            pids.append(int(e))
    return pids


def failure_run(src, root, build, script, env):
    """A mesh whose last node cannot get the record (it is on another
    network): the quickstart stops with exit 1 and a line saying which
    node and what it holds."""
    fake = os.path.join(root, "fake-build")
    os.makedirs(os.path.join(fake, "node", "cli"))
    os.symlink(os.path.join(build, "node", "cli", "pithctl"),
               os.path.join(fake, "node", "cli", "pithctl"))
    port = free_run(NODES)
    with open(os.path.join(fake, "node", "pithd"), "w") as f:
        f.write('#!/bin/sh\ncase "$*" in *127.0.0.1:%d*) exec %s "$@" --network-id elsewhere;; esac\n'
                'exec %s "$@"\n' % (port + NODES - 1, os.path.join(build, "node", "pithd"),
                                     os.path.join(build, "node", "pithd")))
    os.chmod(os.path.join(fake, "node", "pithd"), 0o755)
    mesh = os.path.join(root, "mesh-failing")
    env = dict(env, PITH_QUICKSTART_BUILD=fake, PITH_QUICKSTART_DIR=mesh,
               PITH_QUICKSTART_PORT=str(port), PITH_QUICKSTART_HTTP=str(free_run(NODES)),
               PITH_QUICKSTART_WAIT="3")
    try:
        r = subprocess.run(script, cwd=src, env=env, capture_output=True, text=True, timeout=120)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        print("#   failing run: exit %d: %s" % (r.returncode, last))
        check(r.returncode == 1 and last.startswith("quickstart.sh: node-%d does not hold the "
                                                    "sample record" % (NODES - 1))
              and "it holds 0 events" in last and "holds the sample record on every" not in r.stdout,
              "a node that never gets the record: exit 1, one line naming it and what it holds")
    finally:
        subprocess.run(script + ["stop"], cwd=src, env=env, capture_output=True, timeout=120)
    check(not pithd_pids_in(mesh), "and `stop` ends that mesh too")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not shutil.which("curl"):
        print("skip: no curl (scripts/deps.sh installs it)")
        return 77
    src = os.path.abspath(args.source)
    with open(os.path.join(src, "tests/data/bundle-AR7B3DEV.json")) as f:
        # the title the merged state shows: the newest graph snapshot's
        title = json.load(f)["state"]["current"]["graph_snapshots"][0]["payload"][
            "graph_snapshot"]["paper"]["title"]
    root = tempfile.mkdtemp(prefix="journey-quickstart-", dir="/tmp")
    mesh = os.path.join(root, "mesh")
    port, http = free_run(NODES), free_run(NODES)
    env = dict(os.environ, PITH_QUICKSTART_BUILD=os.path.abspath(args.build),
               PITH_QUICKSTART_DIR=mesh, PITH_QUICKSTART_PORT=str(port),
               PITH_QUICKSTART_HTTP=str(http), XDG_STATE_HOME=os.path.join(root, "state"))
    script = ["bash", "scripts/quickstart.sh"]
    ok = False
    try:
        t0 = time.time()
        r = subprocess.run(script, cwd=src, env=env, capture_output=True, text=True, timeout=180)
        print("# quickstart.sh (%.1f s, exit %d):" % (time.time() - t0, r.returncode))
        for line in (r.stdout + r.stderr).splitlines():
            print("#   " + line)
        check(r.returncode == 0, "the quickstart exits 0")
        with open(os.path.join(root, "quickstart.out"), "w") as f:
            f.write(r.stdout)
        printed = {}
        for m in re.finditer(r"^\s*node-(\d+)\s+(\d+) events, (\d+) records?\s+(\S+)$",
                             r.stdout, re.M):
            printed[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4))
        check(sorted(printed) == list(range(NODES)),
              "it prints a line per node (events, records, the page's URL)")
        check("holds the sample record on every node" in r.stdout, "it says every node holds it")
        for i in range(NODES):
            events, records, url = printed[i]
            check(url == "http://127.0.0.1:%d/pith/%s" % (http + i, SAMPLE),
                  "node-%d's line names its page of the sample record" % i)
            c = Ctl(os.path.join(mesh, "node-%d" % i, "pithd.sock"), 10)
            try:
                st = c.call("status")["store"]
                recs = [x["pith_number"] for x in c.call("records")["records"]]
            finally:
                c.close()
            check(events > 0 and records > 0 and st["events"] == events
                  and st["records"] == records,
                  "node-%d holds what its line says: %d events, %d records" % (i, events, records))
            check(any(p.endswith(SAMPLE) for p in recs), "node-%d lists the sample record" % i)
            req = urllib.request.Request(url, headers={"Accept": "text/html"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                body = resp.read().decode("utf-8", "replace")
                check(resp.status == 200 and resp.headers.get_content_type() == "text/html",
                      "node-%d: the page answers 200 in HTML" % i)
            check(html.escape(title) in body, "node-%d: the page shows the title %r" % (i, title))
        pidfiles = [os.path.join(mesh, "node-%d" % i, "pithd.pid") for i in range(NODES)]
        pids = [int(open(p).read()) for p in pidfiles]
        # the line it printed, run as a person pastes it: without the
        # variables the mesh was started with (its directory among them)
        m = re.search(r"^Stop it with: (.+)$", r.stdout, re.M)
        check(m is not None, "it says how to stop the mesh")
        bare = {k: v for k, v in env.items() if not k.startswith("PITH_QUICKSTART_")}
        r = subprocess.run(["bash", "-c", m.group(1)], cwd=src, env=bare, capture_output=True,
                           text=True, timeout=120)
        for line in (r.stdout + r.stderr).splitlines():
            print("#   stop: " + line)
        check(r.returncode == 0, "`quickstart.sh stop` exits 0")
        gone = []
        for p in pids:
            try:
                os.kill(p, 0)
            except ProcessLookupError:
                gone.append(p)
        check(len(gone) == NODES and not pithd_pids_in(mesh), "no node of the mesh is left running")
        failure_run(src, root, os.path.abspath(args.build), script, env)
        ok = True
    finally:
        for p in pithd_pids_in(root):  # a failed run: leave nothing behind
            os.kill(p, 9)
        if ok and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("# work directory kept: %s" % root)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print("FAIL -", e, flush=True)
        sys.exit(1)
