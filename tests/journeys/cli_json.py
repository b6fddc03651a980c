#!/usr/bin/env python3
"""Journey: every pithctl command with --json prints one JSON document (issue 51).

usage: cli_json.py --pithctl P --pithd D --data TESTS_DATA --conformance DIR --out DIR

What a script (or jq) relies on, for every command `pithctl --commands`
lists, against a small store (the sample record), an empty store, a
running node with a peer and an upstream (the stand-in over plain HTTP):

- success: exit 0, stdout is exactly one JSON document (json.loads);
- an empty result: exit 0 and [] (a list) or an object, never nothing;
- an error: exit non-zero, nothing on stdout, one line on stderr that
  starts "pithctl CMD: " (or "pithctl: " for a file that cannot be read);
- a command that ran and counts what failed (pull, import, check): its
  JSON object on stdout, exit 1.

And the exact bytes of what a person types: `pithctl resolve 2401.14489`
(the number and a newline) and its --json, from the store and the node;
`records --json` of an empty store is "[]"; `search --json` with a hit is
an array, its element a line, from the store and the node. A command with no case here
fails the journey, so a new command gets its row. The table is written to
OUT/cli_json.txt.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from pithtest import Node, wait_for  # noqa: E402
from upstream_standin import write_feed, write_tree  # noqa: E402

SAMPLE = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    for a in ("--pithctl", "--pithd", "--data", "--conformance", "--out"):
        ap.add_argument(a, required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pith-journey-cli-json-")
    procs, nodes = [], []
    ok = False
    try:
        body(args, tmp, procs, nodes)
        ok = True
    finally:
        for n in nodes:
            if n.alive():
                n.stop()
        for p in procs:
            p.kill()
            p.wait()
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("# work directory kept: %s" % tmp)
    print("ok: cli_json journey")
    return 0


def body(args, tmp, procs, nodes):
    P = args.pithctl
    bundle = os.path.join(args.data, "bundle-AR7B3DEV.json")
    S, E = os.path.join(tmp, "store"), os.path.join(tmp, "empty")

    def run(argv, stdin=b""):
        return subprocess.run([P] + argv, input=stdin, capture_output=True, timeout=120)

    for st, f in ((S, bundle), (E, "/dev/null")):
        r = run(["--store", st, "import", f])
        if r.returncode:
            fail("import into %s: %s" % (st, r.stderr))
    with open(bundle, "rb") as f:
        b = json.load(f)
    event_id = b["events"][0]["event_id"]
    record = json.dumps(b["canonical_record"]).encode()
    events = run(["--store", S, "export"]).stdout
    state_sha = json.loads(run(["--store", S, "--json", "records"]).stdout)[0]["state_sha256"]

    # an upstream: the stand-in over plain HTTP, serving the sample and its feed
    root = os.path.join(tmp, "root")
    with open(bundle, "rb") as f:
        write_tree(root, [f.read()], feed=True)
    write_feed(root, [{"pith_number": SAMPLE, "state_sha256": state_sha,
                       "bundle_sha256": b["bundle_signature"]["bundle_sha256"],
                       "built_at": b["built_at"], "event_count": 2}])
    port_file = os.path.join(tmp, "port")
    procs.append(subprocess.Popen([sys.executable, os.path.join(os.path.dirname(HERE),
                                                                "upstream_standin.py"),
                                   "--root", root, "--port-file", port_file],
                                  stdout=subprocess.DEVNULL))
    wait_for(lambda: os.path.exists(port_file), 20, what="the stand-in")
    with open(port_file) as f:
        upstream = "http://127.0.0.1:%d" % int(f.read())

    # a node with the sample, an upstream and a peer
    a = Node(args.pithd, tmp, "a", extra=["--http", "127.0.0.1:0", "--upstream", upstream]).start()
    nodes.append(a)
    bnode = Node(args.pithd, tmp, "b").start(peers=[a.addr])
    nodes.append(bnode)
    wait_for(lambda: any(p["state"] == "ready" for p in a.status()["peers"]), 15,
             what="the peer to connect")
    N = ["--node", a.sock]
    if run(N + ["import", bundle]).returncode:
        fail("import into the node")

    # what a person types, byte for byte
    for where in (["--store", S], N):
        for extra, want in (([], SAMPLE + "\n"),
                            (["--json"], '{"id":"2401.14489","pith_number":"%s"}\n' % SAMPLE)):
            r = run(where + extra + ["resolve", "2401.14489"])
            if r.returncode or r.stdout.decode() != want:
                fail("%s resolve 2401.14489: %r, not %r" % (" ".join(where[:1] + extra), r.stdout, want))
    r = run(["--store", E, "--json", "records"])
    if r.stdout != b"[]\n":
        fail("records --json of an empty store: %r" % r.stdout)
    # a hit: an array, not JSON Lines (the node's index follows its store on a thread)
    for where in (["--store", S], N):
        def hit():
            r = run(where + ["--json", "search", "co-designing"])
            return r if r.returncode == 0 and r.stdout != b"[]\n" else None
        r = wait_for(hit, 15, what="%s search to find the sample" % where[0])
        doc = json.loads(r.stdout)
        if not (r.stdout.startswith(b"[\n{") and r.stdout.endswith(b"}\n]\n")
                and isinstance(doc, list) and [h["pith_number"] for h in doc] == [SAMPLE]):
            fail("%s --json search co-designing: %r, not one array of the sample" %
                 (where[0], r.stdout[:300]))

    gone = "pith:2024:" + "A" * 26
    key = os.path.join(tmp, "key.json")
    cases = [
        # (command, kind, argv, stdin); kind: ok, empty, error, counts
        ("verify", "ok", ["--json", "verify", bundle], b""),
        ("verify", "error", ["--json", "verify", "-"], b"{}"),
        ("canon", "ok", ["--json", "canon", bundle], b""),
        ("canon", "error", ["--json", "canon"], b"{bad"),
        ("pith-number", "ok", ["--json", "pith-number"], record),
        ("pith-number", "empty", ["--json", "pith-number", "--lines"], b""),
        ("pith-number", "error", ["--json", "pith-number"], b"{}"),
        ("keygen", "ok", ["--json", "keygen", key], b""),
        ("keygen", "error", ["--json", "keygen", key], b""),
        ("sign", "ok", ["--json", "sign", "--key", key], events),
        ("sign", "empty", ["--json", "sign", "--key", key], b""),
        ("sign", "error", ["--json", "sign", "--key", os.path.join(tmp, "nokey")], b""),
        ("import", "ok", ["--store", S, "--json", "import", bundle], b""),
        ("import", "ok", N + ["--json", "import", bundle], b""),
        ("import", "counts", ["--store", S, "--json", "import", os.path.join(tmp, "nofile")], b""),
        ("pull", "ok", ["--store", os.path.join(tmp, "pulled"), "--json", "pull", "--from",
                        upstream, SAMPLE], b""),
        ("pull", "counts", ["--store", os.path.join(tmp, "pulled"), "--json", "pull", "--from",
                            upstream, "--retries", "0", gone], b""),
        ("replicate", "ok", ["--json", "replicate", upstream, "--data",
                             os.path.join(tmp, "replica"), "--once"], b""),
        ("replicate", "error", ["--json", "replicate", "ftp://x"], b""),
        ("export", "ok", ["--store", S, "--json", "export"], b""),
        ("export", "empty", ["--store", E, "--json", "export"], b""),
        ("export", "ok", ["--store", S, "export", "--json", "--bundles", os.path.join(tmp, "bu")], b""),
        ("export", "error", ["--store", S, "--json", "export", "--subject", "nothing"], b""),
        ("state", "ok", ["--store", S, "--json", "state", SAMPLE], b""),
        ("state", "ok", N + ["--json", "state", SAMPLE], b""),
        ("state", "error", ["--store", E, "--json", "state", SAMPLE], b""),
        ("event", "ok", ["--store", S, "--json", "event", event_id], b""),
        ("event", "error", N + ["--json", "event", "sha256:" + "0" * 64], b""),
        ("records", "ok", ["--store", S, "--json", "records"], b""),
        ("records", "ok", N + ["records", "--json"], b""),
        ("records", "empty", ["--store", E, "--json", "records"], b""),
        ("records", "error", ["--store", os.path.join(tmp, "nostore"), "--json", "records"], b""),
        ("show", "ok", ["--store", S, "--json", "show", SAMPLE], b""),
        ("show", "ok", N + ["--json", "show", "2401.14489"], b""),
        ("show", "error", ["--store", E, "--json", "show", SAMPLE], b""),
        ("search", "ok", ["--store", S, "--json", "search", "co-designing"], b""),
        ("search", "ok", N + ["search", "--json", "co-designing"], b""),
        ("search", "empty", ["--store", S, "--json", "search", "xyzzyq"], b""),
        ("search", "empty", N + ["--json", "search", "xyzzyq"], b""),
        ("search", "error", ["--json", "search", "x"], b""),
        ("resolve", "ok", ["--store", S, "--json", "resolve", "2401.14489"], b""),
        ("resolve", "ok", N + ["resolve", "--json", "pith:AR7B3DEV"], b""),
        ("resolve", "error", ["--store", E, "--json", "resolve", "2401.14489"], b""),
        ("check", "ok", ["--store", S, "--json", "check"], b""),
        ("check", "ok", ["--store", E, "check", "--json"], b""),
        ("check", "error", N + ["--json", "check"], b""),
        ("sync", "ok", N + ["--json", "sync", bnode.node_id[:16]], b""),
        ("sync", "error", N + ["--json", "sync"], b""),
        ("status", "ok", N + ["--json", "status"], b""),
        ("status", "error", ["--node", os.path.join(tmp, "nosock"), "--json", "status"], b""),
        ("peers", "ok", N + ["--json", "peers"], b""),
        ("connect", "ok", N + ["--json", "connect", "127.0.0.1:1"], b""),
        ("connect", "error", N + ["--json", "connect", "bad"], b""),
        ("ban", "ok", N + ["--json", "ban", "10.1.2.3"], b""),
        ("ban", "error", N + ["--json", "ban", "bad"], b""),
        ("unban", "ok", N + ["--json", "unban", "10.1.2.3"], b""),
        ("unban", "error", N + ["--json", "unban", "10.1.2.3"], b""),
        ("backup", "ok", N + ["--json", "backup", os.path.join(tmp, "backup")], b""),
        ("backup", "error", N + ["--json", "backup", os.path.join(tmp, "backup")], b""),
        ("follow", "ok", N + ["--json", "follow", "2401.14489", SAMPLE], b""),
        ("follow", "error", N + ["--json", "follow", "not an id"], b""),
        ("conformance", "ok", ["--json", "conformance", args.conformance], b""),
        ("audit", "ok", ["--json", "audit", "http://" + a.status()["http"],
                         "http://" + a.status()["http"] + "/"], b""),
        ("audit", "error", ["--json", "audit", "ftp://x", "ftp://y"], b""),
        ("conformance", "counts", ["--json", "conformance", os.path.join(tmp, "nocorpus")], b""),
    ]
    commands = run(["--commands"]).stdout.decode().split()
    missing = sorted(set(commands) - {c[0] for c in cases})
    if missing:
        fail("commands with no --json case here: %s" % ", ".join(missing))
    table = []
    for cmd, kind, argv, stdin in cases:
        r = run(argv, stdin)
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        try:
            doc = json.loads(out)
            parsed = True
        except ValueError:
            doc, parsed = None, False
        row = "%-12s %-7s exit %-3d %-10s %s" % (cmd, kind, r.returncode,
                                                 "json" if parsed else ("empty" if not out else "NOT JSON"),
                                                 " ".join(argv)[:90])
        table.append(row)
        if kind == "error":
            good = r.returncode != 0 and out == "" and len(err.splitlines()) == 1 and \
                err.startswith(("pithctl %s: " % cmd, "pithctl: "))
        elif kind == "counts":
            good = r.returncode == 1 and parsed and isinstance(doc, dict)
        elif kind == "empty":
            good = r.returncode == 0 and parsed and doc in ([], {}) or \
                (r.returncode == 0 and parsed and isinstance(doc, dict))
        else:
            good = r.returncode == 0 and parsed
        if not good:
            fail("%s (%s): exit %d, stdout %r, stderr %r" % (" ".join(argv), kind, r.returncode,
                                                          out[:300], err[:300]))
    with open(os.path.join(args.out, "cli_json.txt"), "w") as f:
        f.write("\n".join(table) + "\n")


if __name__ == "__main__":
    sys.exit(main())
