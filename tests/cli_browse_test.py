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
import time

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
        for cmd in (["import", bundle], ["records"], ["show", AR7B]):
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

    @case("--node import: events, JSON Lines and a bundle, the offline summary and exit status")
    def _():
        r = ctl("--node", node.sock, "--json", "import", gen, bundle)
        assert r.returncode == 0, r
        d = json.loads(r.stdout)
        assert d["stored"] == 20 and d["duplicate"] == 0 and d["rejected"] == 0, d
        assert d["bundles_newer"] == 1, d
        # again: duplicates, the bundle not newer; exit 0
        r = ctl("--node", node.sock, "--json", "import", gen, bundle)
        d = json.loads(r.stdout)
        assert r.returncode == 0 and d["duplicate"] == 20 and d["bundles_older"] == 1, (r, d)
        # a bad item: reported as FILE:LINE with its reason, the rest stored, exit 1
        bad = os.path.join(root, "bad.jsonl")
        with open(gen, "rb") as f:
            lines = f.read().splitlines()
        tampered = json.loads(lines[0])
        tampered["created_at"] = "2030-01-01T00:00:00Z"
        with open(bad, "wb") as f:
            f.write(b"\n".join([json.dumps(tampered).encode(), b"{not json"] + lines[1:3]) + b"\n")
        r = ctl("--node", node.sock, "import", bad)
        assert r.returncode == 1, r
        # the names of docs/merge.md, as the same file offline gives them
        assert "%s:1: rejected (content_sha256)" % bad in r.stderr, r.stderr
        assert "%s:2: rejected (json)" % bad in r.stderr, r.stderr
        assert "rejected   2" in r.stdout and "duplicate  2" in r.stdout, r.stdout
        # the same file offline gives the same counts
        off = os.path.join(root, "offline")
        r2 = ctl("--store", off, "--trust-key", key, "import", gen)
        r3 = ctl("--store", off, "--trust-key", key, "import", bad)
        assert r3.returncode == 1 and "rejected   2" in r3.stdout and "duplicate  2" in r3.stdout, r3
        # a record view through the node: the same advice
        r = ctl("--node", node.sock, "import", os.path.join(args.data, "record-RCCNG3LI.json"))
        assert r.returncode == 1 and "registry record view" in r.stderr, r.stderr
        # no node there
        r = ctl("--node", os.path.join(root, "none.sock"), "import", gen)
        assert r.returncode == 1 and "is pithd running?" in r.stderr, r.stderr

    @case("show: a record for a person, from the node and from the store, text and --json")
    def _():
        for where in (["--node", node.sock], ["--store", store]):
            r = ctl(*where, "show", "https://arxiv.org/abs/2401.14489v2")
            assert r.returncode == 0, (where, r)
            out = r.stdout
            for want in (AR7B, "The Case for Co-Designing Model Architectures with Hardware",
                         "Stella Biderman", "arxiv:2401.14489 v2", "cs.DC (also cs.AI)",
                         "2024-01-25T19:50:31Z", "doi: 10.48550/arxiv.2401.14489",
                         "3facdc2aeec0c5e2ff45dd750211a965091b49387ad1b15346dff0bb9a58c999",
                         "record_created (1)", "graph_snapshot (1)", "pith.science"):
                assert want in out, (where, want, out)
            assert "bundle     2026-" in out, out
            r = ctl(*where, "--json", "show", "arXiv:2401.14489")
            d = json.loads(r.stdout)
            assert d["pith_number"] == AR7B and d["primary_cat"] == "cs.DC", d
            assert d["bundle_built_at"] and d["event_count"] == 2, d
            assert sorted(e["event_type"] for e in d["events"]) == ["graph_snapshot",
                                                                   "record_created"], d
            assert all(e["signer"] == "pith.science" and e["created_at"] for e in d["events"])
        r = ctl("--node", node.sock, "show", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ")
        assert r.returncode == 1 and "show" in r.stderr, r

    @case("records: a header line, then one line per record")
    def _():
        for where in (["--node", node.sock], ["--store", store]):
            lines = ctl(*where, "records").stdout.splitlines()
            assert lines[0] == "# pith_number events state_sha256", lines[:2]
            assert len(lines) == 7 and all(l.startswith("pith:") for l in lines[1:]), lines
            js = json.loads(ctl(*where, "--json", "records").stdout)  # one array, one a line
            assert len(js) == 6 and all(r["pith_number"] for r in js), js

    @case("search: words of a title and an author, from the node and from the store")
    def _():
        for where in (["--node", node.sock], ["--store", store]):
            deadline = time.time() + 10
            while True:  # the node's index follows its store on a thread
                r = ctl(*where, "search", "co-designing", "biderman")
                if AR7B[-26:][:8] in r.stdout or time.time() > deadline:
                    break
                time.sleep(0.1)
            assert r.returncode == 0, (where, r)
            lines = r.stdout.splitlines()
            title = "The Case for Co-Designing Model Architectures with Hardware"
            assert lines[0] == "pith:%s  %s" % (AR7B[-26:][:8], title), (where, lines)
            assert "Stella Biderman" in lines[1] and "cs.DC" in lines[1], lines
            r = ctl(*where, "--json", "search", "--limit", "1", "co-designing")
            js = json.loads(r.stdout)  # one array, one hit a line
            assert r.stdout.startswith("[\n{") and r.stdout.endswith("}\n]\n"), r.stdout
            assert len(js) == 1 and js[0]["pith_number"] == AR7B, js
            assert set(js[0]) == {"pith_number", "short_pith_number", "title", "authors",
                                  "primary_cat", "categories", "submitted_at", "score"}, js
            r = ctl(*where, "search", "nothing-matches-this")
            assert r.returncode == 0 and r.stdout == "no records matched\n", r
            r = ctl(*where, "--json", "search", "nothing-matches-this")
            assert r.returncode == 0 and json.loads(r.stdout) == [], r
            r = ctl(*where, "search", 'hardware" OR "x')
            assert r.returncode == 0 and r.stdout == "no records matched\n", r
            r = ctl(*where, "search", "x" * 300)
            assert r.returncode == 1 and "longer than 256 bytes" in r.stderr, r
            r = ctl(*where, "search")
            assert r.returncode == 1 and "missing WORDS" in r.stderr, r
        assert os.path.exists(os.path.join(data, "search.sqlite"))

    @case("an identical bundle re-submitted is 'same', not 'older'")
    def _():
        with open(bundle) as f:
            line = json.dumps(json.load(f), separators=(",", ":")).encode()
        a, b = node.submit([line, line], kind="bundle")
        assert a["ok"] and a["outcome"] in ("newer", "same"), a
        assert b["ok"] and b["outcome"] == "same", b


if __name__ == "__main__":
    main()
