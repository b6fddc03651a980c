#!/usr/bin/env python3
"""Journey: one command replicates an upstream, interrupted and resumed (issue 51).

usage: replicate.py --pithctl P --pithd D --gen-events G --gen-bundles B --out DIR

What a person does, against the project's HTTPS stand-in upstream
(tests/upstream_standin.py serving 300 generated records, their change
feed and /healthz):

1. `pithctl replicate URL --data DIR --ca-file CA --once` on a terminal (a
   pty): the first line names the upstream and its 300 records; the bar
   shows records, percent, bytes, rate and time left. Ctrl-C (SIGINT)
   after 120 bundles: exit 130, a summary saying "interrupted", a line
   saying to run the same command again.
2. The same command, stderr not a terminal, slowed so that it runs over
   5 s, killed with SIGKILL past the first page of the feed: a plain
   progress line every 5 s was printed, the cursor file names the page's
   end.
3. The same command once more: exit 0, "replicated URL into DIR: 300
   records, 600 events (the upstream's counts)"; the stand-in sent exactly
   the bundles the replica lacked (none twice across the runs but the few
   in flight at the kill), and the feed was read from the saved cursor.
   The replica equals the upstream's store: records with state hashes and
   event counts, every event, states in full.
4. The stand-in publishes 20 new records: a `--once` rerun fetches those
   20 bundles and nothing else.
5. Followed (the default, --refresh 1): 10 more published upstream come in
   without a rerun; Ctrl-C then exits 0.
6. The replica as a node: `pithd --data DIR --upstream URL` serves it;
   every record's state.json is byte for byte the upstream store's (served
   by a pithd of its own), and one record published then reaches the node
   through the same cursor file (the feed asked from after=330, one bundle).
7. The mistakes, each one line on stderr and exit 1: an unreachable port,
   the stand-in's certificate without --ca-file, a URL that is no pith
   upstream, an upstream without a change feed.
"""
import argparse
import json
import os
import pty
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from pithtest import Node, free_port, wait_for  # noqa: E402
from upstream_standin import write_feed, write_tree  # noqa: E402

N0, N1, N2, N3 = 300, 20, 10, 1  # at first, published later, while following, to the node


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


class Standin:
    def __init__(self, root, tls_dir, *extra):
        port_file = os.path.join(tls_dir, "port")
        self.proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(HERE),
                                                                   "upstream_standin.py"),
                                      "--root", root, "--tls-dir", tls_dir,
                                      "--port-file", port_file] + list(extra),
                                     stdout=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(port_file) or self.proc.poll() is not None, 20,
                 what="the stand-in to start")
        if self.proc.poll() is not None:
            fail("the stand-in did not start")
        with open(port_file) as f:
            self.origin = "https://127.0.0.1:%d" % int(f.read())
        self.ca = os.path.join(tls_dir, "ca.pem")
        self.ctx = ssl.create_default_context(cafile=self.ca)

    def call(self, path, obj=None):
        data = json.dumps(obj).encode() if obj is not None else None
        with urllib.request.urlopen(urllib.request.Request(self.origin + path, data=data),
                                    context=self.ctx, timeout=10) as r:
            return json.loads(r.read())

    def stats(self, reset=False):
        return self.call("/_stats?paths=1" + ("&reset=1" if reset else ""))

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def pty_run(cmd):
    """Starts cmd with stderr on a terminal (what a person sees), stdout
    piped; returns (process, a function giving what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    got = bytearray()

    def reader():
        while True:
            try:
                d = os.read(master, 4096)
            except OSError:
                break
            if not d:
                break
            got.extend(d)
    t = threading.Thread(target=reader, daemon=True)
    t.start()

    def seen():
        t.join(5)
        return got.decode(errors="replace")
    return p, seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--pithd", required=True)
    ap.add_argument("--gen-events", required=True)
    ap.add_argument("--gen-bundles", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pith-journey-replicate-")
    standins, nodes = [], []
    ok = False
    try:
        body(args, tmp, standins, nodes)
        ok = True
    finally:
        for n in nodes:
            if n.alive():
                n.stop()
        for s in standins:
            s.stop()
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("# work directory kept: %s" % tmp)
    print("ok: replicate journey")
    return 0


def body(args, tmp, standins, nodes):
    ctl = args.pithctl
    key = os.path.join(tmp, "key.json")
    ev, bu = os.path.join(tmp, "events.jsonl"), os.path.join(tmp, "bundles.jsonl")
    subprocess.run([args.gen_events, "--records", str(N0 + N1 + N2 + N3), "--per-record", "2",
                    "--key-out", key, ev], check=True, capture_output=True)
    subprocess.run([args.gen_bundles, ev, bu], check=True, capture_output=True)
    with open(bu, "rb") as f:
        bundles = [l.rstrip(b"\n") for l in f if l.strip()]

    # the upstream's own store (a pithd data directory's): what the replica must equal
    ref = os.path.join(tmp, "upstream", "store")

    def pc(*a, timeout=120):
        return subprocess.run([ctl, "--trust-key", key] + list(a), capture_output=True,
                              text=True, timeout=timeout)

    def ref_import(docs):
        f = os.path.join(tmp, "batch.jsonl")
        with open(f, "wb") as o:
            o.write(b"\n".join(docs) + b"\n")
        r = pc("--store", ref, "import", f)
        if r.returncode:
            fail("import into the upstream's store: %s" % r.stderr)
        return f

    feed = []

    def feed_add(docs):
        """The feed entries of docs, with the upstream store's state hashes."""
        r = pc("--store", ref, "--json", "records")
        recs = {x["pith_number"]: x for x in json.loads(r.stdout)}
        for d in docs:
            b = json.loads(d)
            x = recs[b["pith_number"]]
            feed.append({"pith_number": b["pith_number"], "state_sha256": x["state_sha256"],
                         "bundle_sha256": b["bundle_signature"]["bundle_sha256"],
                         "built_at": b["built_at"], "event_count": x["event_count"]})

    root = os.path.join(tmp, "root")
    write_tree(root, bundles[:N0], feed=True)
    ref_import(bundles[:N0])
    feed_add(bundles[:N0])
    write_feed(root, feed)
    up = Standin(root, os.path.join(tmp, "tls"))
    standins.append(up)
    data = os.path.join(tmp, "replica")  # Node(..., "replica") serves it later
    cmd = [ctl, "--trust-key", key, "replicate", up.origin, "--data", data, "--ca-file", up.ca]
    once = cmd + ["--once"]

    # 1. on a terminal, Ctrl-C after 120 bundles
    up.call("/_control", {"delay": 0.05, "reset_stats": True})
    p, seen = pty_run(once)
    wait_for(lambda: up.stats()["full"] >= 120 or p.poll() is not None, 60,
             what="120 bundles sent")
    p.send_signal(signal.SIGINT)
    out = p.stdout.read().decode()
    rc = p.wait(30)
    term = seen()
    sent1 = up.stats(reset=True)
    with open(os.path.join(args.out, "replicate-terminal.txt"), "w") as f:
        f.write(term)
    if rc != 130:
        fail("Ctrl-C: exit %d, not 130\n%s\n%s" % (rc, out, term))
    first = term.splitlines()[0]
    if first.strip() != "pithctl replicate: %s (%d records) into %s (new)" % (up.origin, N0, data):
        fail("first line: %r" % first)
    frames = re.findall(r"\rreplicate: \[([#.]{20})\] (\d+)/%d records \((\d+)%%\), [0-9.]+ [kMG]?B, "
                        r"(\d+) records/s(, [0-9a-z ]+ left)?" % N0, term.replace("\x1b[K", ""))
    if len(frames) < 2 or not any(f[4] for f in frames) or not any(int(f[3]) > 0 for f in frames):
        fail("the bar a person sees lacks records, rate or time left:\n%r" % term[-1500:])
    if "run the same command again" not in term:
        fail("Ctrl-C: no line saying how to go on:\n%s" % term[-800:])
    if not out.startswith("interrupted replicating %s into %s: " % (up.origin, data)):
        fail("Ctrl-C: summary %r" % out)

    def replica_records():
        r = pc("--store", os.path.join(data, "store"), "records")
        if r.returncode:
            fail("records of the replica: %s" % r.stderr)
        return [l for l in r.stdout.splitlines() if not l.startswith("#")]

    have1 = len(replica_records())
    if have1 < 100 or have1 > sent1["full"]:
        fail("after Ctrl-C the replica holds %d records, %d bundles were sent" % (have1, sent1["full"]))

    # 2. not a terminal, slowed, SIGKILL past the first page (200 records)
    up.call("/_control", {"delay": 0.8})
    # stderr goes to a file read while the run goes on: the progress line is
    # waited for, and timed from the run's own first line (not from Popen, which
    # a loaded machine can start late)
    progress_re = re.compile(
        r"pithctl replicate: \d+/%d records \(\d+%%\), [0-9.]+ [kMG]?B, \d+ records/s" % N0)
    err_path = os.path.join(args.out, "replicate-pipe.err")
    err_file = open(err_path, "wb")
    p = subprocess.Popen(once, stdout=subprocess.PIPE, stderr=err_file)
    err_file.close()
    marks = {}

    def pipe_progress():
        with open(err_path, "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()
        if lines and "first" not in marks:
            marks["first"] = time.time()
        if any(progress_re.match(l) for l in lines) and "progress" not in marks:
            marks["progress"] = time.time()
        return "progress" in marks

    wait_for(lambda: (pipe_progress() and have1 + up.stats()["full"] >= 216)
             or p.poll() is not None, 90, what="the second run past the first page")
    p.kill()
    p.wait()
    with open(err_path, "rb") as f:
        err2 = f.read().decode()
    time.sleep(1.2)  # the answers the killed run was waiting for (0.8 s late) are sent, and counted
    sent2 = up.stats(reset=True)
    lines = [l for l in err2.splitlines() if progress_re.match(l)]
    if not lines:
        fail("no plain progress line on a pipe:\n%s" % err2)
    late = marks.get("progress", time.time()) - marks.get("first", 0)
    if late > 7.5:  # printed every 5 s; the 2.5 s are the poll's and a loaded machine's
        fail("the first plain progress line came %.1f s after the first line, not about 5 s:\n%s"
             % (late, err2))
    if "(continuing: the records it holds are skipped)" not in err2.splitlines()[0]:
        fail("second run's first line: %r" % err2.splitlines()[0])
    with open(os.path.join(data, "upstream-cursors")) as f:
        cursor = f.read().split()
    if cursor != [up.origin, "200"]:
        fail("saved cursor after the kill: %r" % cursor)
    have2 = len(replica_records())

    # 3. the same command again: only what is missing
    up.call("/_control", {"delay": 0})
    r = subprocess.run(once, capture_output=True, text=True, timeout=120)
    sent3 = up.stats(reset=True)
    if r.returncode:
        fail("third run: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    want = "replicated %s into %s: %d records, %d events (the upstream's counts); this run: " % (
        up.origin, data, N0, 2 * N0)
    if not r.stdout.startswith(want) or len(r.stdout.splitlines()) != 1:
        fail("summary: %r, not %r..." % (r.stdout, want))
    if not re.search(r"pithctl replicate: %d/%d records \(100%%\)" % (N0, N0), r.stderr):
        fail("no final progress line:\n%s" % r.stderr)
    if sent3["full"] != N0 - have2:
        fail("third run fetched %d bundles, the replica lacked %d" % (sent3["full"], N0 - have2))
    feeds = sorted(k for k in sent3["by_path"] if k.startswith("/api/changes"))
    if feeds != ["/api/changes?after=200&limit=200", "/api/changes?after=300&limit=200",
                 "/api/changes?limit=1"]:
        fail("third run did not go on from the saved cursor: %r" % feeds)
    total = sent1["full"] + sent2["full"] + sent3["full"]
    if total > N0 + 32:
        fail("%d bundles sent over the three runs for %d records" % (total, N0))

    def same(what):
        for c in (["records"], ["export"]):
            a = pc("--store", os.path.join(data, "store"), *c).stdout
            b = pc("--store", ref, *c).stdout
            if a != b or not a:
                fail("%s: `%s` of the replica differs from the upstream's" % (what, c[0]))
        nums = [json.loads(d)["pith_number"] for d in bundles[:3]]
        for n in nums:
            if pc("--store", os.path.join(data, "store"), "state", n).stdout != \
                    pc("--store", ref, "state", n).stdout:
                fail("%s: state of %s differs" % (what, n))
    same("after the resumed run")

    # 4. the upstream grows: --once fetches exactly the new records
    new = bundles[N0:N0 + N1]
    up.call("/_control", {"publish": [ref_import(new)]})
    feed_add(new)
    write_feed(root, feed)
    r = subprocess.run(once + ["--no-progress"], capture_output=True, text=True, timeout=120)
    sent4 = up.stats(reset=True)
    if r.returncode or sent4["full"] != N1 or r.stderr.count("\n") != 1:
        fail("rerun after %d published: exit %d, %d bundles sent\n%s%s"
             % (N1, r.returncode, sent4["full"], r.stdout, r.stderr))
    if "%d records, %d events (the upstream's counts)" % (N0 + N1, 2 * (N0 + N1)) not in r.stdout:
        fail("rerun summary: %r" % r.stdout)
    same("after the upstream grew")

    # 5. following: what is published later comes in without a rerun
    p = subprocess.Popen(cmd + ["--refresh", "1", "--no-progress"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    errs = []
    threading.Thread(target=lambda: errs.extend(p.stderr), daemon=True).start()
    outs = []
    threading.Thread(target=lambda: outs.extend(p.stdout), daemon=True).start()
    wait_for(lambda: any("following %s" % up.origin in l for l in errs) or p.poll() is not None,
             30, what="the follow line")
    new = bundles[N0 + N1:N0 + N1 + N2]
    up.call("/_control", {"publish": [ref_import(new)]})
    feed_add(new)
    write_feed(root, feed)
    n_all = N0 + N1 + N2
    wait_for(lambda: any("%d records, %d events (the upstream's counts)" % (n_all, 2 * n_all) in l
                         for l in outs) or p.poll() is not None, 30,
             what="the followed records to come in")
    p.send_signal(signal.SIGINT)
    rc = p.wait(30)
    sent5 = up.stats(reset=True)
    if rc != 0 or sent5["full"] != N2:
        fail("follow: exit %d, %d bundles sent\n%s%s" % (rc, sent5["full"], "".join(outs),
                                                         "".join(errs)))
    same("after following")

    # 6. the replica as a node, and the upstream's store as one, over HTTP
    http = ["--http", "127.0.0.1:0", "--trust-key", key]
    mirror = Node(args.pithd, tmp, "replica", extra=http + [
        "--upstream", up.origin, "--upstream-ca-file", up.ca, "--upstream-refresh", "1"]).start()
    origin = Node(args.pithd, tmp, "upstream", extra=http).start()
    nodes += [mirror, origin]

    def get(node, path):
        url = "http://%s%s" % (node.status()["http"], path)
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read()
    numbers = [json.loads(d)["pith_number"] for d in bundles[:n_all]]
    for n in numbers:
        path = "/pith/%s/state.json" % n[10:]
        if get(mirror, path) != get(origin, path):
            fail("state.json of %s differs between the replica and the upstream's store" % n)
    origin.stop()  # the upstream's store is written below, by pithctl
    new = bundles[n_all:]
    up.call("/_control", {"publish": [ref_import(new)]})
    feed_add(new)
    write_feed(root, feed)
    last = json.loads(new[0])["pith_number"]
    wait_for(lambda: last in mirror.records(), 20, what="pithd on the replica to follow on")
    sent6 = up.stats(reset=True)
    asked = sorted(k for k in sent6["by_path"] if k.startswith("/api/changes"))
    if sent6["full"] != N3 or "/api/changes?after=%d&limit=1000" % n_all not in asked:
        fail("pithd on the replica: %d bundles, feed asked %r (not from the saved cursor %d)"
             % (sent6["full"], asked, n_all))

    # 7. the mistakes, one line each
    empty = os.path.join(tmp, "empty-root")
    os.makedirs(os.path.join(empty, "pith"))
    nofeed = os.path.join(tmp, "nofeed-root")
    write_tree(nofeed, bundles[:2])
    s_empty = Standin(empty, os.path.join(tmp, "tls-empty"))
    s_nofeed = Standin(nofeed, os.path.join(tmp, "tls-nofeed"))
    standins += [s_empty, s_nofeed]
    port = free_port()
    for what, url, ca, expect in (
            ("unreachable", "https://127.0.0.1:%d" % port, up.ca, "cannot reach https://127.0.0.1:%d" % port),
            ("TLS", up.origin, None, "TLS failed"),
            ("not pith", s_empty.origin, s_empty.ca, "is not a pith upstream"),
            ("no feed", s_nofeed.origin, s_nofeed.ca, "lists no records")):
        c = [ctl, "replicate", url, "--data", os.path.join(tmp, "mistake"), "--once"]
        if ca:
            c += ["--ca-file", ca]
        r = subprocess.run(c, capture_output=True, text=True, timeout=60)
        if r.returncode != 1 or r.stdout or len(r.stderr.splitlines()) != 1 or \
                not r.stderr.startswith("pithctl replicate: ") or expect not in r.stderr:
            fail("%s: exit %d, stdout %r, stderr %r (wanted one line with %r)"
                 % (what, r.returncode, r.stdout, r.stderr, expect))
        print("# %s: %s" % (what, r.stderr.strip()))


if __name__ == "__main__":
    sys.exit(main())
