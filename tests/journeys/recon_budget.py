#!/usr/bin/env python3
"""Journey: an operator caps what reconciliation sends to all peers
together (issue 53; docs/sync.md, "Limits").

    recon_budget.py --pithd P --pithctl C --gen-events G [--keep]

1. The operator's node runs from a config file with
   `sync_upload_bytes = 65536` (a 64 KiB budget) and `sync_interval_ms =
   5000` (refilled every 5 s), and imports 2,400 events with `pithctl
   import` (one listing of them is 76,800 bytes, more than the budget).
2. Two fresh nodes dial it at once and each asks for everything.
3. Both end up holding all 2,400 events: answers over the budget wait,
   they are not refused, and nobody is banned.
4. `pithctl status` on the operator's node shows what was sent to peers'
   sessions, the budget, and that answers were deferred over it.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import Node, wait_for, run_test  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok -", what, flush=True)


def body(args, root, nodes):
    key = os.path.join(root, "key.json")
    evfile = os.path.join(root, "events.jsonl")
    subprocess.run([args.gen_events, "--records", "600", "--per-record", "4", "--key-out", key,
                    evfile], check=True, capture_output=True)
    conf = os.path.join(root, "pithd.conf")
    with open(conf, "w") as f:
        f.write("# the operator's node: reconciliation answers capped for all peers\n"
                "trust_key = %s\nsync_upload_bytes = 65536\nsync_interval_ms = 5000\n" % key)
    a = Node(args.pithd, root, "operator", extra=["--config", conf]).start()
    nodes.append(a)
    r = subprocess.run([args.pithctl, "--node", a.sock, "import", "--no-progress", evfile],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "pithctl import stores the 2,400 events")
    check(a.status()["store"]["events"] == 2400, "the node holds them")

    # each takes no connections, so that the two cannot catch up from each other
    fresh = [Node(args.pithd, root, name, extra=["--trust-key", key, "--inbound-max", "0"])
             for name in ("b", "c")]
    for n in fresh:
        n.start(peers=[a.addr])
        nodes.append(n)
    check(True, "two fresh nodes dial it")
    for n in fresh:
        wait_for(lambda: n.status()["store"]["events"] == 2400, 90, interval=0.5,
                 what="node %s to hold all 2,400 events" % n.name)
    check(True, "both fresh nodes hold all 2,400 events (answers over the budget waited)")
    st = a.status()
    check(st["stats"]["bans"] == 0 and
          sum(1 for p in st["peers"] if p["state"] == "ready") == 2,
          "nobody is banned; both peers are still connected")

    r = subprocess.run([args.pithctl, "--node", a.sock, "status"], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0, "pithctl status answers")
    line = [l for l in r.stdout.splitlines() if "answers to peers' sessions" in l]
    print("  " + (line[0] if line else r.stdout))
    m = re.match(r"^sync       answers to peers' sessions: (\d+) bytes \(budget 65536 an "
                 r"interval\); deferred (\d+) times over a peer's credit, (\d+) over the budget$",
                 line[0] if line else "")
    check(m is not None, "status shows the bytes sent to peers' sessions and the budget")
    check(int(m.group(1)) >= 2 * 76800, "both listings were sent (%s bytes)" % m.group(1))
    check(int(m.group(3)) >= 1, "and answers were deferred over the budget (%s times)"
          % m.group(3))


def main():
    return run_test("pith-journey-recon-budget-", body)


if __name__ == "__main__":
    sys.exit(main())
