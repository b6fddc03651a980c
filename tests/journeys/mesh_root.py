#!/usr/bin/env python3
"""Journey: an operator sees that a peer's merge disagrees with theirs
(issue 57, state roots between peers; docs/state-root.md section 14).

Three meshed mirrors hold the same 100 records. The operator of A:

- runs `pithctl --node SOCK peers`: the ROOT column says `agrees` for
  both peers; `curl /metrics` shows 2 agreements, 0 disagreements;
- then C's merge goes wrong (simulated: the stored state of 3 of its
  records rewritten, the same events; tests/skew_states.c) and C is
  restarted: within seconds `pithctl peers` says `disagrees` for C and
  still `agrees` for B, `--json` says `"root":"disagrees"`, /metrics
  counts `pith_state_root_disagreements_total 1` and 1 peer disagreeing,
  A's log names C's address and both roots; C is not banned and stays
  connected.

usage: mesh_root.py --pithd D --pithctl C --gen-events G --skew-states S [--keep]
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from http_node import request, run_test, wait_for  # noqa: E402
from mesh_root_test import mesh, skew  # noqa: E402


def peers_text(args, n):
    r = subprocess.run([args.pithctl, "--node", n.sock, "peers"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    return r.stdout.splitlines()


def metrics(n):
    text = request("http://" + n.status()["http"] + "/metrics")[2].decode()
    return {l.split()[0]: float(l.split()[1]) for l in text.splitlines()
            if l.startswith("pith_state_root_") and not l.startswith("#")}


def row(lines, port_of_peer_addr):
    got = [l for l in lines[1:] if l.startswith(port_of_peer_addr + " ")]
    assert len(got) == 1, (port_of_peer_addr, lines)
    return got[0].split()


def journey(args, root, nodes):
    _, _, (a, b, c) = mesh(args, root, nodes)
    addr = {p["node_id"]: p["addr"] for p in a.ctl("peers")["peers"]}
    lines = peers_text(args, a)
    print("\n".join(lines))
    assert lines[0].split() == ["ADDR", "DIR", "STATE", "NODE", "RTT", "AGE", "SCORE",
                                "EVENTS", "IN/OUT", "BYTES", "IN/OUT", "ROOT"], lines[0]
    assert row(lines, addr[b.node_id])[-1] == "agrees"
    assert row(lines, addr[c.node_id])[-1] == "agrees"
    m = metrics(a)
    assert m["pith_state_root_peer_agreements_total"] == 2, m
    assert m["pith_state_root_disagreements_total"] == 0, m

    skew(args, c)
    wait_for(lambda: metrics(a)["pith_state_root_disagreements_total"] == 1, 60,
             what="A's /metrics to count the disagreement")
    addr = {p["node_id"]: p["addr"] for p in a.ctl("peers")["peers"] if p["state"] == "ready"}
    lines = peers_text(args, a)
    print("\n".join(lines))
    crow = row(lines, addr[c.node_id])
    assert crow[-1] == "disagrees" and crow[2] == "ready", crow
    assert crow[3] == c.node_id[:16], crow
    assert row(lines, addr[b.node_id])[-1] == "agrees"
    assert "bans: none" in lines, lines
    r = subprocess.run([args.pithctl, "--node", a.sock, "--json", "peers"], capture_output=True,
                       text=True, timeout=30)
    j = json.loads(r.stdout)
    roots = {p["node_id"]: p["root"] for p in j["peers"] if p["state"] == "ready"}
    assert roots == {b.node_id: "agrees", c.node_id: "disagrees"}, roots
    m = metrics(a)
    assert m["pith_state_root_disagreements_total"] == 1, m
    assert m["pith_state_root_peers_disagreeing"] == 1, m
    assert m["pith_state_root_peer_agreements_total"] == 2, m
    adoc = json.loads(request("http://" + a.status()["http"] + "/api/root")[2])
    cdoc = json.loads(request("http://" + c.status()["http"] + "/api/root")[2])
    logged = [l for l in open(a.log_path, errors="replace").read().splitlines()
              if "state root disagreement" in l]
    assert len(logged) == 1, logged
    assert ("peer %s: state root disagreement: ours %s (100 records, cursor " %
            (addr[c.node_id], adoc["root_sha256"][:16])) in logged[0], logged
    assert logged[0].endswith("theirs %s (100 records)" % cdoc["root_sha256"][:16]), logged
    print("# A's log: " + logged[0])


if __name__ == "__main__":
    sys.exit(run_test("journey_mesh_root", journey,
                      tools=("pithd", "pithctl", "gen-events", "skew-states")))
