#!/usr/bin/env python3
"""pithctl for people (issue 18), against a running pithd:

- errors that say what to do: a store a running pithd holds, a data
  directory given for its store, a registry record view given to import;
  an identical bundle re-submitted is "same", not "older";
- `pithctl --node SOCKET import FILE...`: the offline import's summary and
  exit status, through the control socket;
- `pithctl show ID` (--store and --node, text and --json); the header line
  of `records`.

usage: cli_browse_test.py --pithd D --pithctl C --gen-events G --data DIR [--keep]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import Node, Tap  # noqa: E402

AR7B = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"

T = Tap()
case = T.case


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithd", required=True)
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--gen-events", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="cli_browse.")
    print("# work directory", root)
    gen = os.path.join(root, "gen.jsonl")
    key = os.path.join(root, "gen.key")
    subprocess.run([args.gen_events, "--records", "5", "--per-record", "4", "--seed", "3",
                    "--key-out", key, gen], check=True, stdout=subprocess.DEVNULL)
    node = Node(args.pithd, root, "node", extra=["--trust-key", key]).start()
    ok_all = False
    try:
        run_cases(args, root, node, gen, key)
        ok_all = T.failed == 0
    finally:
        node.stop()
        print("1..%d" % T.n)
        if ok_all and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print("# kept", root)
    sys.exit(0 if ok_all else 1)


def run_cases(args, root, node, gen, key):
    def ctl(*a, stdin=None):
        return subprocess.run([args.pithctl, *a], capture_output=True, text=True, input=stdin)

    bundle = os.path.join(args.data, "bundle-AR7B3DEV.json")
    data = node.dir
    store = os.path.join(data, "store")

    @case("a store a running pithd holds: 'use --node DATA/pithd.sock'")
    def _():
        for s in (store, store + "/"):
            r = ctl("--store", s, "import", bundle)
            assert r.returncode == 1, r
            want = "a running pithd holds this store (%s); use --node %s/pithd.sock" % (s, data)
            assert want in r.stderr, r.stderr
            assert "Resource temporarily unavailable" not in r.stderr, r.stderr

    @case("a data directory given for a store: its store/ is meant")
    def _():
        for cmd in (["import", bundle], ["records"], ["state", AR7B]):
            r = ctl("--store", data, *cmd)
            assert r.returncode == 1, (cmd, r)
            assert ("%s is a pithd data directory; its store is %s/store" % (data, data)) in r.stderr, \
                r.stderr
            assert "CURRENT" not in r.stderr, r.stderr

    @case("a registry record view given to import: what it is and what to import instead")
    def _():
        r = ctl("--store", os.path.join(root, "s1"), "import",
                os.path.join(args.data, "record-RCCNG3LI.json"))
        assert r.returncode == 1
        assert "registry record view" in r.stderr and "/bundle.json" in r.stderr, r.stderr
        assert "event_type" not in r.stderr, r.stderr

    @case("an identical bundle re-submitted is 'same', not 'older'")
    def _():
        with open(bundle) as f:
            line = json.dumps(json.load(f), separators=(",", ":")).encode()
        a, b = node.submit([line, line], kind="bundle")
        assert a["ok"] and a["outcome"] in ("newer", "same"), a
        assert b["ok"] and b["outcome"] == "same", b


if __name__ == "__main__":
    main()
