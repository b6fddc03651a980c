#!/usr/bin/env python3
"""Old and new reconciliation between two pithd (issue 56, docs/sync.md,
"Version 2"), as a person running mirrors of two versions sees it: a
node forced to speak only RECON message version 1, as
nodes before version 2 did (PITH_TEST_RECON_VERSION=1: it does not set
WIRE_FEAT_RECON_V2 in its HELLO and refuses version 2 messages), and a
node of this version, each missing events the other holds, reconcile
with `pithctl --node SOCKET sync PEER`, the new node starting the session
and then the old one, and end with identical stores; two new nodes then
reconcile in version 2. What a person sees: `pithctl --node SOCKET sync
PEER` prints the session with its "version" line (1 with the old node, 2
between new ones) and `--json` the same as "version"; both nodes' event
counts and record states end equal; nobody was banned.

usage: recon_versions.py --pithd P --pithctl C --gen-events G [--keep]
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import Node, make_events, run_test, wait_for  # noqa: E402

OLD = {"PITH_TEST_RECON_VERSION": "1"}


def log(*a):
    print("#", *a, flush=True)


def sync(args, node, peer, text=False):
    r = subprocess.run([args.pithctl, "--node", node.sock] + ([] if text else ["--json"]) +
                       ["sync", peer], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "pithctl sync: exit %d: %s %s" % (r.returncode, r.stdout, r.stderr)
    assert r.stderr == "", r.stderr
    if text:
        return r.stdout
    res = json.loads(r.stdout)
    assert res["ok"], res
    return res


def states(node):
    return {k: (v["state_sha256"], v["event_count"]) for k, v in node.records().items()}


def identical(a, b, want):
    def same():
        for n in (a, b):
            if n.status()["store"]["events"] != want:
                return None
        sa, sb = states(a), states(b)
        return sa if sa == sb else None
    return wait_for(same, 120, what="%s and %s to hold %d events with equal states"
                    % (a.name, b.name, want))


def fill(node, lines):
    bad = [r for r in node.submit(lines) if not r.get("ok")]
    assert not bad, "%s refused %d events: %s" % (node.name, len(bad), bad[0])


def no_bans(*nodes):
    for n in nodes:
        st = n.status()["stats"]
        assert st["bans"] == 0 and st["malformed"] == 0, (n.name, st)


def body(args, root, nodes):
    key, events = make_events(args.gen_events, root, 400, 2)
    n = len(events)
    ex = ["--trust-key", key, "--sync-interval-ms", "0"]

    def node(name, env=None):
        x = Node(args.pithd, root, name, extra=ex, env=env).start()
        nodes.append(x)
        return x

    new = node("new")
    old = node("old", OLD)
    # each lacks what the other holds: old every 7th, new every 5th
    has = {"new": {i for i in range(n) if i % 5 != 0}, "old": {i for i in range(n) if i % 7 != 0}}
    fill(new, [events[i] for i in sorted(has["new"])])
    fill(old, [events[i] for i in sorted(has["old"])])
    res = sync(args, new, old.addr)
    assert res["role"] == "initiator" and res["version"] == 1, res
    assert res["ids_needed"] == len(has["old"] - has["new"]), res
    assert res["ids_offered"] == len(has["new"] - has["old"]), res
    union = has["new"] | has["old"]
    identical(new, old, len(union))
    log("new started with old: version %d, %d needed, %d offered, %d bytes"
        % (res["version"], res["ids_needed"], res["ids_offered"],
           res["bytes_sent"] + res["bytes_received"]))

    # the old one starts one (with a fresh node of this version)
    new2 = node("new2")
    has["new2"] = {i for i in range(n) if i % 3 != 0}
    fill(new2, [events[i] for i in sorted(has["new2"])])
    res = sync(args, old, new2.addr)
    assert res["role"] == "initiator" and res["version"] == 1, res
    assert res["ids_needed"] == len(has["new2"] - union), res
    assert res["ids_offered"] == len(union - has["new2"]), res
    union |= has["new2"]
    identical(old, new2, len(union))
    log("old started with new: version %d, %d needed, %d offered"
        % (res["version"], res["ids_needed"], res["ids_offered"]))

    # two nodes of this version speak version 2
    new3 = node("new3")
    has["new3"] = {i for i in range(n) if i % 4 != 0}
    fill(new3, [events[i] for i in sorted(has["new3"])])
    res = sync(args, new3, new2.addr)
    assert res["role"] == "initiator" and res["version"] == 2, res
    assert res["ids_needed"] == len(union - has["new3"]), res
    assert res["ids_offered"] == len(has["new3"] - union), res
    identical(new3, new2, len(union | has["new3"]))
    log("new with new: version %d, %d needed, %d bytes, %d round trips"
        % (res["version"], res["ids_needed"], res["bytes_sent"] + res["bytes_received"],
           res["round_trips"]))
    # what the command prints, between two nodes in step now
    out = sync(args, new3, new2.addr, text=True)
    lines = out.splitlines()
    assert lines[0].startswith("sync with 127.0.0.1:") and lines[0].endswith(", initiator"), out
    assert "ids needed   0 (this node lacks them: fetched through GET)" in lines, out
    assert "version      2 (reconciliation messages; 1 with nodes that speak no other)" in lines, out
    out = sync(args, old, new.addr, text=True)
    assert "version      1 (reconciliation messages; 1 with nodes that speak no other)" in \
        out.splitlines(), out
    no_bans(*nodes)


if __name__ == "__main__":
    sys.exit(run_test("precv-", body))
