#!/usr/bin/env python3
"""State roots between peers (issue 57, docs/state-root.md section 14).

Three meshed pithd (A; B dials A; C dials A and B), the same 100 records
(2 events each), state_root_interval 1, sync_interval_ms 2000:

- after they sync every pair agrees: each node counts 2 agreements
  (pith_state_root_peer_agreements_total) and 0 disagreements, and
  `peers` shows "root":"agrees" for both of its peers;
- behind: a fourth node D, validating slowly (PITH_TEST_VALIDATE_US_PER_KIB),
  still has events to fetch from A: while it is behind A counts nothing
  for it and shows it "unknown"; once caught up they agree;
- trust differs: a node T that also trusts a second key and holds 3 more
  events signed with it, which A refuses: reconciliation is never empty
  both ways, so nothing is ever compared (A counts nothing, T "unknown");
- a merge bug: C is stopped, the stored state of 3 records rewritten in
  its RocksDB (tests/skew_states.c: same events, other states), and C
  restarted: reconciliation finds nothing, and A and B each count exactly
  1 disagreement with C (logged with C's address and both roots), flag C
  "disagrees" and still agree with each other; C counts 2; nobody is
  banned and C stays connected; C builds its tree on the thread a large
  store uses (--state-root-thread-records 0), at both of its starts;
- a peer sending a ROOT that does not verify (another key's document,
  bytes that are no document) is ignored, logged, counted
  (pith_state_root_peer_refused_total 3; a reason quoting the peer's
  bytes is escaped in the log), not banned nor disconnected;
  a peer with WIRE_FEAT_ROOT gets the node's latest document after AUTH,
  one without it gets none.

usage: mesh_root_test.py --pithd P --pithctl C --gen-events G --skew-states S [--keep]
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "journeys"))
from pithtest import RawPeer, Node, make_events, msg, run_test, wait_for  # noqa: E402
from http_node import metric, request  # noqa: E402

RECORDS = 100
ROOT_MSG = 17
FEAT_ROOT = 16
FLAGS = ["--state-root-interval", "1", "--sync-interval-ms", "2000", "--log-level", "info",
         "--http", "127.0.0.1:0"]


def log(*a):
    print("#", *a, flush=True)


def base(n):
    return "http://" + n.status()["http"]


def counts(n):
    b = base(n)
    return (int(metric(b, "pith_state_root_peer_agreements_total")),
            int(metric(b, "pith_state_root_disagreements_total")))


def root_of(n, node_id):
    """Our comparison with the peer whose node id is node_id, from `peers`."""
    for p in n.ctl("peers")["peers"]:
        if p["node_id"] == node_id and p["state"] == "ready":
            return p["root"]
    return None


def mesh(args, root, nodes):
    """A, B, C meshed and synced; returns (key, lines, [a, b, c])."""
    key, lines = make_events(args.gen_events, root, RECORDS, 2)
    a = Node(args.pithd, root, "a", extra=["--trust-key", key] + FLAGS)
    nodes.append(a.start())
    assert all(x.get("ok") for x in a.submit(lines))
    b = Node(args.pithd, root, "b", extra=["--trust-key", key] + FLAGS)
    nodes.append(b.start(peers=[a.addr]))
    # C builds its tree on the thread a large store uses (node.c,
    # root_start), at its first start and after the skew's restart
    c = Node(args.pithd, root, "c", extra=["--trust-key", key, "--state-root-thread-records", "0"]
             + FLAGS)
    nodes.append(c.start(peers=[a.addr, b.addr]))
    ns = [a, b, c]
    wait_for(lambda: all(n.status()["store"]["events"] == len(lines) for n in ns), 60,
             what="the three nodes synced")
    wait_for(lambda: all(counts(n)[0] == 2 for n in ns), 60, what="two agreements on each node")
    return key, lines, ns


def skew(args, c, n=3):
    """Stops c, gives 3 of its records another state (same events), restarts it."""
    c.stop()
    r = subprocess.run([args.skew_states, os.path.join(c.dir, "store"), str(n)],
                       capture_output=True, text=True, check=True)
    changed = r.stdout.split()
    assert len(changed) == n, r.stdout
    c.start()
    text = open(c.log_path, errors="replace").read()
    assert text.count("building the tree of") == 2, "C built its tree on the thread twice"
    return changed


def body(args, root, nodes):
    key, lines, (a, b, c) = mesh(args, root, nodes)
    for n, others in ((a, (b, c)), (b, (a, c)), (c, (a, b))):
        assert counts(n) == (2, 0), (n.name, counts(n))
        for o in others:
            assert root_of(n, o.node_id) == "agrees", (n.name, o.name, n.ctl("peers"))
    log("synced: every pair agrees (2 agreements, 0 disagreements on each node)")

    # (b) a peer that is behind
    d = Node(args.pithd, root, "d", extra=["--trust-key", key, "--validate-threads", "1"] + FLAGS,
             env={"PITH_TEST_VALIDATE_US_PER_KIB": "25000"})
    nodes.append(d.start(peers=[a.addr]))
    behind_since, seen_behind = time.time(), 0.0
    while d.status()["store"]["events"] < len(lines):
        assert counts(a) == (2, 0), counts(a)
        st = root_of(a, d.node_id)
        assert st in (None, "unknown"), st
        seen_behind = time.time() - behind_since
        time.sleep(0.3)
    log("behind: D fetched for %.1f s; A counted nothing for it meanwhile" % seen_behind)
    assert seen_behind >= 3, "D caught up too fast (%.1f s) to show anything" % seen_behind
    wait_for(lambda: counts(a)[0] == 3, 30, what="A agrees with D once it caught up")
    assert root_of(a, d.node_id) == "agrees"
    d.stop()

    # (c) a node whose trust set differs
    odir = os.path.join(root, "other")
    os.makedirs(odir)
    key2, ev2 = os.path.join(odir, "testkey2.pub"), os.path.join(odir, "events2.jsonl")
    subprocess.run([args.gen_events, "--records", "3", "--per-record", "2", "--seed", "2",
                    "--key-out", key2, ev2], check=True, stdout=subprocess.DEVNULL)
    odd = [x for x in open(ev2, "rb").read().splitlines()
           if json.loads(x)["event_type"] != "record_created"]
    t = Node(args.pithd, root, "t", extra=["--trust-key", key, "--trust-key", key2] + FLAGS)
    nodes.append(t.start())
    assert all(x.get("ok") for x in t.submit(lines + odd))
    t.ctl("connect " + a.addr)
    wait_for(lambda: root_of(a, t.node_id) is not None, 20, what="T connected to A")
    time.sleep(7)  # several rounds and confirming sessions
    assert counts(a) == (3, 0), counts(a)
    assert counts(t) == (0, 0), counts(t)
    assert root_of(a, t.node_id) == "unknown" and root_of(t, a.node_id) == "unknown"
    assert json.loads(request(base(t) + "/api/root")[2])["root_sha256"] != \
        json.loads(request(base(a) + "/api/root")[2])["root_sha256"]
    log("trust differs: reconciliation never empty both ways, nothing compared")
    t.stop()

    # (a) a merge bug on C: same events, other states for 3 records
    before = {n.name: counts(n) for n in (a, b)}  # B may have met D through peer exchange
    assert before["a"] == (3, 0) and before["b"][1] == 0, before
    changed = skew(args, c)
    wait_for(lambda: counts(a)[1] == 1 and counts(b)[1] == 1, 60,
             what="A and B count a disagreement with C")
    wait_for(lambda: counts(c)[1] == 2, 30, what="C counts its disagreement with A and B")
    time.sleep(3)  # a round more: still once per pair of roots
    assert counts(a) == (3, 1) and counts(b) == (before["b"][0], 1), (counts(a), counts(b))
    assert counts(c) == (0, 2), counts(c)
    for n, o in ((a, b), (b, a)):
        assert root_of(n, c.node_id) == "disagrees", n.ctl("peers")
        assert root_of(n, o.node_id) == "agrees"
        assert n.ctl("peers")["bans"] == []
        assert metric(base(n), "pith_state_root_peers_disagreeing") == 1
    adoc = json.loads(request(base(a) + "/api/root")[2])
    cdoc = json.loads(request(base(c) + "/api/root")[2])
    assert cdoc["record_count"] == RECORDS and cdoc["root_sha256"] != adoc["root_sha256"]
    c_addrs = [p["addr"] for p in a.ctl("peers")["peers"] if p["node_id"] == c.node_id]
    text = open(a.log_path, errors="replace").read()
    want = "peer %s: state root disagreement: ours %s (%d records, cursor " % (
        c_addrs[0], adoc["root_sha256"][:16], RECORDS)
    line = [x for x in text.splitlines() if want in x]
    assert len(line) == 1, (want, [x for x in text.splitlines() if "disagree" in x])
    assert line[0].endswith("theirs %s (%d records)" % (cdoc["root_sha256"][:16], RECORDS)), line
    log("merge bug on C (%s...): %s" % (changed[0], line[0].split("] ", 1)[-1]))

    # a bad ROOT, and who gets ours
    apk = bytes.fromhex(a.node_id)
    p = RawPeer(a.port, a.network_id, features=FEAT_ROOT)
    p.handshake()
    m = p.recv_until(ROOT_MSG, timeout=10)
    assert m is not None and m[1] == request(base(a) + "/api/root")[2].rstrip(b"\n"), m
    assert p.node_pk == apk
    cbytes = request(base(c) + "/api/root")[2].rstrip(b"\n")
    p.send(msg(ROOT_MSG, cbytes))  # C's document: another key than the one p authenticated
    p.send(msg(ROOT_MSG, b"{not a document"))
    # a signer whose key_id holds a line break: the reason the log gives
    # quotes it, escaped (a peer's bytes never make a log line of their own)
    forged = json.loads(cbytes)
    forged["signer"]["key_id"] = "node-x\nFORGED LOG LINE"
    p.send(msg(ROOT_MSG, json.dumps(forged).encode()))
    wait_for(lambda: metric(base(a), "pith_state_root_peer_refused_total") == 3, 10,
             what="three ROOTs refused")
    assert not p.is_closed(1.0), "the node closed a peer over a bad ROOT"
    assert a.ctl("peers")["bans"] == []
    text = open(a.log_path, errors="replace").read()
    assert text.count("state root document refused (ignored)") == 3, text[-2000:]
    assert not any(x.startswith("FORGED") for x in text.splitlines()), \
        "a peer's key_id made a log line: %s" % [x for x in text.splitlines() if "FORGED" in x]
    assert "node-x\\x0aFORGED LOG LINE" in text, [x for x in text.splitlines() if "FORGED" in x]
    p.close()
    q = RawPeer(a.port, a.network_id, features=0)
    q.handshake()
    deadline = time.time() + 2
    while time.time() < deadline:
        try:
            m = q.recv_msg(max(0.1, deadline - time.time()))
        except OSError:  # timed out: nothing more came
            break
        assert m is None or m[0] != ROOT_MSG, "a ROOT went to a peer without the bit"
        if m is None:
            break
    q.close()
    log("bad ROOTs refused and logged, no ban; ROOT only to peers with the bit")


if __name__ == "__main__":
    sys.exit(run_test("mesh_root_", body,
                      tools=("pithd", "pithctl", "gen-events", "skew-states")))
