#!/usr/bin/env python3
"""Bundle reconciliation between two pithd nodes (issue 5, docs/sync.md,
"Bundles"): a node that was stopped while the registry published a newer
bundle of a record it already holds catches up when it comes back, and
both end with the same bundle and byte-identical states.

The newer bundles are the registry bundle of AR7B3DEV with a later
built_at and another created_at on its aliases (so the state changes:
current.source_aliases lists them), the state recomputed, and signed by
a test registry key that both nodes trust (--trust-key, "role":
"registry"): the bundle passes pith_bundle_verify like a real one.

Steps:
1. A and B (B dials A) hold the same generated events and the registry
   bundle X0; they are identical.
2. B stops; A is given X1 (newer); B restarts and dials A: the bundle
   session after the event session makes A announce X1, B fetches it.
   A never fetches X0 back (it is older than what A holds).
3. A stops; B is given X2 (newer still); A restarts; `pithctl sync` from
   A (the acceptor of that connection, so this time the session starter
   is the other side) catches A up.
4. A fresh node C dials A and ends with the same events, X2 and states
   (its bundle comes through the bundle session, not a request per
   record_created).
5. Old and hostile peers: a scripted peer whose HELLO has the sync
   feature but not the bundle one is banned when it sends RECON_BUNDLES;
   one with both features is answered without penalty; one that sends a
   RECON inside a running bundle session is banned.
6. Every store passes `pithctl check` (bundle index included).
7. Trust differences: a node D that does not trust the test registry key
   is offered X2 by A, fetches it once, refuses it without penalising A,
   and does not fetch it from A again at the next session; a scripted
   peer that sends it X2 is not penalised either and is not asked for it
   a second time; one that sends X0 with a broken signature under the
   registry key D does trust costs 50 points.

usage: bundle_sync_test.py --pithd P --pithctl C --gen-events G --data DIR [--keep]
"""

import base64
import calendar
import hashlib
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import (run_test, Node, RawPeer, ed25519_public, ed25519_sign,  # noqa: E402
                      make_events, msg, wait_for)

AR7B = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
RECON, RECON_BUNDLES = 32, 33
BUNDLE_ANNOUNCE, BUNDLE_GET, BUNDLE = 12, 13, 14
FEAT_SYNC, FEAT_BUNDLE_SYNC = 1, 2


def log(*a):
    print("#", *a, flush=True)


def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class Registry:
    """A test registry key: signs bundles as the registry does (spec 3)."""

    def __init__(self, root):
        self.seed = hashlib.sha256(b"bundle-sync-test registry").digest()
        self.pk = ed25519_public(self.seed)
        self.fp = hashlib.sha256(self.pk).hexdigest()[:32]
        self.key_id = "test-registry-1"
        self.path = os.path.join(root, "registry.pub")
        with open(self.path, "w") as f:
            json.dump({"key_id": self.key_id, "public_key_hex": self.pk.hex(),
                       "role": "registry"}, f)

    def rebuild(self, base, built_at, alias_at):
        """base with built_at and every alias's created_at changed, the
        state recomputed, signed: canonical JSON bytes."""
        b = json.loads(json.dumps(base))
        b["built_at"] = built_at
        for a in b["source_aliases"]:
            a["created_at"] = alias_at
        st = b["state"]
        st["current"]["source_aliases"] = b["source_aliases"]
        del st["state_sha256"]
        st["state_sha256"] = hashlib.sha256(canon(st)).hexdigest()
        body = {k: v for k, v in b.items() if k != "bundle_signature"}
        digest = hashlib.sha256(canon(body)).digest()
        b["bundle_signature"] = {
            "algorithm": "ed25519", "bundle_sha256": digest.hex(), "key_id": self.key_id,
            "public_key_fingerprint": self.fp,
            "signature_b64": base64.b64encode(ed25519_sign(self.seed, digest)).decode(),
            "signature_status": "signed_v1", "signed_at": built_at,
            "signed_message": "bundle_sha256_bytes"}
        return canon(b), st["state_sha256"]


def bundle_of(node, source_ip):
    """The node's stored bundle of AR7B, fetched as a peer would."""
    p = RawPeer(node.port, node.network_id, source_ip=source_ip)
    try:
        p.handshake()
        p.send(msg(BUNDLE_GET, [AR7B]))
        m = p.recv_until(BUNDLE, timeout=10)
        assert m is not None, "no BUNDLE from %s" % node.name
        return bytes(m[2])
    finally:
        p.close()


def submit(node, lines, kind="event"):
    bad = [r for r in node.submit(lines, kind=kind) if not r.get("ok")]
    assert not bad, "%s refused %d: %s" % (node.name, len(bad), bad[0])


def states(node):
    return {k: v["state_sha256"] for k, v in node.records().items()}


def wait_same(a, b, want_state, timeout=60):
    def same():
        sa, sb = states(a), states(b)
        if sa != sb or sa.get(AR7B) != want_state:
            return None
        for n in (a, b):
            sy = n.status()["sync"]
            if sy["bundle_items"] != 1:
                return None
        return sa
    return wait_for(same, timeout, what="%s and %s to agree on %s's state %s"
                    % (a.name, b.name, AR7B, want_state[:12]))


def state_bytes(node):
    r = node.ctl("state " + AR7B)
    assert r.get("ok"), r
    return r["json"].encode()


def check_store(args, node, keys):
    trust = [x for k in keys for x in ("--trust-key", k)]
    r = subprocess.run([args.pithctl, "--store", os.path.join(node.dir, "store")] + trust +
                       ["check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "%s: pithctl check: %s %s" % (node.name, r.stdout, r.stderr)


def hostile(node):
    def bans():
        return {b["ip"]: b["reason"] for b in node.status()["bans"]}
    key = os.urandom(16)
    # sync but not bundle sync: RECON_BUNDLES is a protocol violation
    p = RawPeer(node.port, node.network_id, source_ip="127.0.0.31", features=FEAT_SYNC)
    p.handshake()
    p.send(msg(RECON_BUNDLES, 1, b"\x01\x01" + key, 0))
    wait_for(lambda: "127.0.0.31" in bans(), 10, what="a ban on 127.0.0.31")
    assert "sync feature" in bans()["127.0.0.31"], bans()
    p.close()
    # both features: an "all agreed" first message needs no answer
    p = RawPeer(node.port, node.network_id, source_ip="127.0.0.32",
                features=FEAT_SYNC | FEAT_BUNDLE_SYNC)
    p.handshake()
    p.send(msg(RECON_BUNDLES, 1, b"\x01\x01" + key, 0))
    time.sleep(0.5)
    assert "127.0.0.32" not in bans()
    peer = [x for x in node.status()["peers"] if x["addr"].startswith("127.0.0.32")]
    assert peer and peer[0]["state"] == "ready" and peer[0]["score"] == 0, peer
    p.close()
    # a bundle session answered, then a RECON (events) in it: the wrong kind
    p = RawPeer(node.port, node.network_id, source_ip="127.0.0.33",
                features=FEAT_SYNC | FEAT_BUNDLE_SYNC)
    p.handshake()
    first = b"\x01\x01" + key + b"\x00\x01" + b"F" * 8  # one FP over everything
    p.send(msg(RECON_BUNDLES, 1, first, 0))
    ans = p.recv_until(RECON_BUNDLES, timeout=10)
    assert ans is not None and ans[1] == 1 and len(ans[2]) > 0, ans
    p.send(msg(RECON, 1, first, 0))
    wait_for(lambda: "127.0.0.33" in bans(), 10, what="a ban on 127.0.0.33")
    assert "other kind" in bans()["127.0.0.33"], bans()
    p.close()
    log("5. hostile RECON_BUNDLES: without the feature banned, a RECON inside a bundle "
        "session banned; an honest one taken without penalty")


def built_us(bundle):
    t = json.loads(bundle)["built_at"]
    return calendar.timegm(time.strptime(t, "%Y-%m-%dT%H:%M:%SZ")) * 1000000


def bundle_sha(bundle):
    return bytes.fromhex(json.loads(bundle)["bundle_signature"]["bundle_sha256"])


def recv_or_none(p, mtype, timeout):
    try:
        return p.recv_until(mtype, timeout=timeout)
    except (TimeoutError, OSError):
        return None


def offer(node, source_ip, bundle, send):
    """A scripted peer announces bundle to node; if asked for it, sends
    send (bytes). Returns (peer, asked)."""
    p = RawPeer(node.port, node.network_id, source_ip=source_ip)
    p.handshake()
    p.send(msg(BUNDLE_ANNOUNCE, [[AR7B, built_us(bundle), bundle_sha(bundle)]]))
    asked = recv_or_none(p, BUNDLE_GET, 3)
    if asked is not None:
        p.send(msg(BUNDLE, AR7B, send))
    return p, asked is not None


def peer_score(node, source_ip):
    for x in node.status()["peers"]:
        if x["addr"].startswith(source_ip + ":"):
            return x["score"]
    return None


def trust_difference(args, root, key, a, x0, x2, nodes):
    extra = ["--trust-key", key, "--log-level", "info", "--sync-interval-ms", "0"]
    d = Node(args.pithd, root, "d", extra=extra).start(peers=[a.addr])
    nodes.append(d)

    def stats():
        return d.status()["stats"]

    def sessions_done():
        ps = [x for x in d.status()["sync"]["peers"]]
        return ps if ps and all(x["last_bundles"] for x in ps) else None
    # D learns B and C from A (peer exchange) and runs a session with each
    wait_for(lambda: len(sessions_done() or []) == 3, 60, what="D's bundle sessions")
    wait_for(lambda: d.status()["store"]["events"] == a.status()["store"]["events"], 60,
             what="D to hold A's events")
    wait_for(lambda: stats()["bundles_invalid"] == 3, 10, what="D to refuse X2 once per peer")
    time.sleep(0.5)
    st = stats()
    assert st["bundles_invalid"] == 3 and st["bundles_stored"] == 0, st
    scores = [x["score"] for x in d.status()["peers"]]
    assert scores == [0, 0, 0], d.status()["peers"]
    # the next session offers X2 again; D does not fetch it
    before = [x for x in d.status()["sync"]["peers"] if x["addr"] == a.addr][0]
    before = before["last_bundles"]["session"]
    skipped = st["refused_skipped"]
    r = subprocess.run([args.pithctl, "--node", d.sock, "--json", "sync", a.node_id],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr

    def next_session():
        x = [x for x in d.status()["sync"]["peers"] if x["addr"] == a.addr][0]
        return x["last_bundles"]["session"] > before
    wait_for(next_session, 60, what="D's next bundle session with A")
    time.sleep(1)
    st = stats()
    assert st["bundles_invalid"] == 3 and st["refused_skipped"] > skipped, st
    assert peer_score(d, "127.0.0.1") == 0, d.status()["peers"]
    assert not d.status()["bans"], d.status()["bans"]
    log("7a. D (not trusting the test registry key) refused X2 once from each of its 3 "
        "peers, no penalty; not fetched again at the next session")

    # a scripted peer with the same bundle: asked once (refusals are per
    # peer), not penalised, not asked again
    p, asked = offer(d, "127.0.0.51", x2, x2)
    assert asked, "D did not ask 127.0.0.51 for X2"
    wait_for(lambda: stats()["bundles_invalid"] == 4, 10, what="D to refuse X2 again")
    assert peer_score(d, "127.0.0.51") == 0, d.status()["peers"]
    p.send(msg(BUNDLE_ANNOUNCE, [[AR7B, built_us(x2), bundle_sha(x2)]]))
    assert recv_or_none(p, BUNDLE_GET, 2) is None, "D asked for a refused bundle again"
    p.close()
    # a broken signature under a key D trusts is the sender's fault
    b = json.loads(x0)
    sig = bytearray(base64.b64decode(b["bundle_signature"]["signature_b64"]))
    sig[0] ^= 1
    b["bundle_signature"]["signature_b64"] = base64.b64encode(bytes(sig)).decode()
    p, asked = offer(d, "127.0.0.52", x0, canon(b))
    assert asked, "D did not ask 127.0.0.52 for X0"
    wait_for(lambda: peer_score(d, "127.0.0.52") == 50, 10,
             what="50 points for a bad bundle signature")
    p.close()
    log("7b. a scripted peer sending the untrusted X2: no penalty, asked once; a broken "
        "signature under a trusted key: 50 points")
    return d


def body(args, root, nodes):
    t0 = time.time()
    reg = Registry(root)
    key, events = make_events(args.gen_events, root, 20, 3)
    with open(os.path.join(args.data, "bundle-AR7B3DEV.json"), "rb") as f:
        x0 = f.read().strip()
    base = json.loads(x0)
    x1, s1 = reg.rebuild(base, "2026-09-01T00:00:00Z", "2026-09-01T00:00:00Z")
    x2, s2 = reg.rebuild(base, "2026-10-01T00:00:00Z", "2026-10-01T00:00:00Z")
    s0 = base["state"]["state_sha256"]
    extra = ["--trust-key", key, "--trust-key", reg.path, "--log-level", "info",
             "--sync-interval-ms", "0"]

    # 1. same events and bundle on both
    a = Node(args.pithd, root, "a", extra=extra).start()
    nodes.append(a)
    submit(a, events)
    submit(a, [x0], kind="bundle")
    b = Node(args.pithd, root, "b", extra=extra).start()
    nodes.append(b)
    submit(b, events)
    submit(b, [x0], kind="bundle")
    b.stop()
    b.start(peers=[a.addr])
    wait_same(a, b, s0)
    log("1. identical with the registry bundle (%d records)" % len(states(a)))

    # 2. B misses X1 while stopped, and catches up when it dials again
    assert b.stop() == 0
    older0 = a.status()["stats"].get("bundles_older", 0)
    submit(a, [x1], kind="bundle")
    assert states(a)[AR7B] == s1
    b.start()
    wait_same(a, b, s1)
    assert bundle_of(a, "127.0.0.41") == x1 and bundle_of(b, "127.0.0.42") == x1
    assert state_bytes(a) == state_bytes(b)
    sa, sb = a.status(), b.status()
    # B offered X0 back (its set differed there) and A did not fetch it
    assert sa["stats"].get("bundles_older", 0) == older0, sa["stats"]
    last = sb["sync"]["peers"][0]["last_bundles"]
    assert last and last["ok"] and last["kind"] == "bundles", sb["sync"]["peers"][0]
    out = subprocess.run([args.pithctl, "--node", b.sock, "status"], capture_output=True,
                         text=True, timeout=30).stdout
    assert "bundles: 1 in the set" in out, out
    log("2. B caught up to X1 after a restart (bundle session: %d bytes, %d messages)"
        % (last["bytes_sent"] + last["bytes_received"],
           last["messages_sent"] + last["messages_received"]))

    # 3. A misses X2; `sync` from A, the acceptor, catches it up
    assert a.stop() == 0
    submit(b, [x2], kind="bundle")
    a.start()
    wait_for(lambda: any(p["state"] == "ready" for p in a.status()["peers"]), 30,
             what="B to dial A again")
    r = subprocess.run([args.pithctl, "--node", a.sock, "--json", "sync", b.node_id],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    wait_same(a, b, s2)
    assert bundle_of(a, "127.0.0.43") == x2 and bundle_of(b, "127.0.0.44") == x2
    assert state_bytes(a) == state_bytes(b)
    log("3. A caught up to X2 through a session it started")

    # 4. a fresh node gets events and the newest bundle from A
    c = Node(args.pithd, root, "c", extra=extra).start(peers=[a.addr])
    nodes.append(c)
    wait_same(a, c, s2)
    assert bundle_of(c, "127.0.0.45") == x2 and state_bytes(c) == state_bytes(a)
    assert c.status()["store"]["events"] == a.status()["store"]["events"]
    log("4. a fresh node caught up with the events and X2")

    hostile(a)
    d = trust_difference(args, root, key, a, x0, x2, nodes)
    assert d.stop() == 0
    for n in (a, b, c):
        assert n.stop() == 0
        check_store(args, n, (key, reg.path))
    log("6. all stores pass pithctl check")
    log("bundle sync test passed in %.1f s" % (time.time() - t0))


def main():
    return run_test("pbsync-", body, tools=("pithd", "pithctl", "gen-events", "data"))


if __name__ == "__main__":
    sys.exit(main())
