#!/usr/bin/env python3
"""A replica that fills itself, on one machine (issue 14; docs/upstream.md).

usage: deploy/replica_demo.py [--build build] [--records 200] [--dir replica-demo]

Starts, until Ctrl-C:
- a registry stand-in over HTTPS on loopback (tests/upstream_standin.py, with
  a CA made for it): the registry's sample bundle and N generated records
  signed by a test registry key, its resolve API, ETags;
- node A, `pithd --upstream https://127.0.0.1:PORT --follow ids.txt`
  (half the records by arXiv id), HTTP on 127.0.0.1:8421;
- node B, peering with A only, HTTP on 127.0.0.1:8422: it fills by gossip;
- node C, following only A's change feed over plain HTTP (no peers), HTTP on
  127.0.0.1:8423.
It prints what to try (read-through by DOI, status, the feed).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from pithtest import Node, wait_for  # noqa: E402
from pull_test import Standin  # noqa: E402
from upstream_standin import write_tree  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--dir", default="replica-demo")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    pithd, pithctl = b + "/node/pithd", b + "/node/cli/pithctl"
    root = os.path.abspath(a.dir)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    key, ev, bu = root + "/key.json", root + "/events.jsonl", root + "/bundles.jsonl"
    subprocess.run([b + "/tests/gen_events", "--records", str(a.records), "--per-record", "2",
                    "--key-out", key, ev], check=True, capture_output=True)
    subprocess.run([b + "/tests/gen_bundles", ev, bu], check=True, capture_output=True)
    with open(bu, "rb") as f:
        bundles = [l.rstrip(b"\n") for l in f if l.strip()]
    with open(os.path.join(HERE, "..", "tests", "data", "bundle-AR7B3DEV.json"), "rb") as f:
        bundles.append(f.read())
    numbers, index = write_tree(root + "/tree", bundles)
    by_arxiv = {v: k for k, v in index["arxiv"].items()}
    by_doi = {v: k for k, v in index["doi"].items()}
    os.makedirs(root + "/tls")
    up = Standin(root + "/tree", root + "/tls")
    ids = root + "/ids.txt"
    with open(ids, "w") as f:
        f.write("# one id a line, any form: arXiv id, DOI, pith number, their URLs\n")
        for p in numbers[: len(numbers) // 2]:
            f.write("arXiv:%s\n" % by_arxiv[p])
    nodes = []
    try:
        na = Node(pithd, root, "a", extra=["--trust-key", key, "--http", "127.0.0.1:8421",
                                            "--upstream", up.origin, "--upstream-ca-file", up.ca,
                                            "--follow", ids, "--upstream-refresh", "60"])
        nodes.append(na.start())
        nb = Node(pithd, root, "b", extra=["--trust-key", key, "--http", "127.0.0.1:8422"])
        nodes.append(nb.start(peers=[na.addr]))
        nc = Node(pithd, root, "c", extra=["--trust-key", key, "--http", "127.0.0.1:8423",
                                            "--upstream", "http://127.0.0.1:8421",
                                            "--upstream-refresh", "2"])
        nodes.append(nc.start())
        half = len(numbers) // 2
        wait_for(lambda: len(na.records()) >= half and len(nb.records()) >= half, 60,
                 what="the replica to fill")
        print("stand-in (the registry) at %s; node A follows %d records from it; "
              "B has %d by gossip; C follows A's feed (%d so far)"
              % (up.origin, half, len(nb.records()), len(nc.records())))
        other = numbers[-2]
        print("""
Try:
  curl -s 'http://127.0.0.1:8421/api/pith-number/resolve?doi=%s&json=true'   # read-through: A lacks it
  curl -s http://127.0.0.1:8422/pith/%s/state.json | %s canon | sha256sum    # then B has it too
  %s --node %s status | python3 -m json.tool | sed -n '/"follow"/,/"peers"/p'
  %s --node %s follow arXiv:%s
  curl -s 'http://127.0.0.1:8421/api/changes?limit=3'
Ctrl-C stops everything (data in %s).""" % (by_doi[other], other[10:], pithctl, pithctl, na.sock,
                                            pithctl, na.sock, by_arxiv[numbers[-3]], root))
        signal.sigwait([signal.SIGINT, signal.SIGTERM])
    except KeyboardInterrupt:
        pass
    finally:
        for n in nodes:
            n.stop()
        up.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
