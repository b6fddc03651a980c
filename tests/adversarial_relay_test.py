#!/usr/bin/env python3
"""Issue 16, items 1 and 2: a peer breaking no rule cannot take the node's
memory nor its fetch table (ctest `adversarial_relay`, label adversarial).

usage: adversarial_relay_test.py --pithd D --pithctl P --gen-events G

1. Validation backlog. A peer announces 400 events of ~0.9 MB each, signed
   by a key the node does not trust (no misbehaviour: another node may
   trust it), and serves each GET at once. The node holds the peer (stops
   reading it) while its answers wait for the validators: RSS stays under
   baseline + 256 MiB, and an honest event announced by an honest peer
   during the flood is stored within 5 s.
2. Pending-fetch starvation. Five peers announce random ids they never
   serve. Each can fill only its share of the fetch table (max_wanted), so
   an honest announcement during the flood is still fetched within 5 s;
   their requests time out and cost them points.
6. Reconciliation amplification. A peer restarts a session whose first
   message says "I have nothing, list everything" (21 bytes) in a loop for
   10 s, reading what comes back. The node sends it one listing of its set
   plus 1 MiB at most, then no more than 4 times the bytes the peer sends.
"""
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pithtest import (run_test, ANNOUNCE, EVENT, GET, RawPeer, msg,  # noqa: E402
                      make_events, target_and_friend, wait_for)

NET = "pith-adv"
RECON = 32


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def event_id(line):
    return bytes.fromhex(json.loads(line)["event_id"].split(":", 1)[1])


class Sampler(threading.Thread):
    """The node's peak RSS while running."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
            except OSError:
                return
            time.sleep(0.05)


def honest_latency(friend, target, line):
    """Submits line to friend; seconds until target stores it."""
    eid = json.loads(line)["event_id"]
    t0 = time.time()
    r = friend.submit([line])
    assert r[0].get("ok"), r
    wait_for(lambda: target.ctl("get_event " + eid).get("ok"), 10, interval=0.05,
             what="the honest event to reach the target")
    return time.time() - t0


def body(args, root, nodes):
    key, honest = make_events(args.gen_events, root, 20, 3)
    big = os.path.join(root, "big.jsonl")
    subprocess.run([args.gen_events, "--records", "200", "--per-record", "3", "--seed", "99",
                    "--pad", "900000", big], check=True, capture_output=True)
    with open(big, "rb") as f:
        flood = [l for l in f.read().splitlines() if l.strip() and len(l) > 800000][:400]
    # a per-peer validation budget of about two flood events, and
    # validators slowed to ~0.35 s per flood event (400 us per KiB, test
    # only), so that the hold of case 1 does not depend on this sender
    # outrunning the validators (on a loaded machine it may not: CI saw
    # none, twice, the second time with the budget already cut to 2 MiB);
    # honest events of ~1.5 KB lose under a millisecond. Requests time out
    # after 4 s, so case 2's never-served ids still do within it
    extra = ["--trust-key", key, "--network-id", NET, "--fetch-timeout-ms", "4000",
             "--peer-validate-bytes", str(2 << 20), "--log-level", "info"]
    target, friend = target_and_friend(args.pithd, root, nodes, NET, extra,
                                       env={"PITH_TEST_VALIDATE_US_PER_KIB": "400"})
    honest_latency(friend, target, honest[0])
    base = rss_mib(target.proc.pid)

    # 1. large answers signed by an untrusted key, served as fast as asked
    ids = {event_id(l): l for l in flood}
    p = RawPeer(target.port, NET, "127.0.0.21")
    p.handshake()
    sampler = Sampler(target.proc.pid)
    sampler.start()
    stop = threading.Event()
    served = [0]

    def serve():
        try:
            p.send(msg(ANNOUNCE, b"".join(ids)))
            while not stop.is_set():
                m = p.recv_msg(1)
                if m is None:
                    continue
                if m[0] == GET:
                    for i in range(0, len(m[1]), 32):
                        eid = m[1][i:i + 32]
                        p.send(msg(EVENT, eid, ids[eid]))
                        served[0] += 1
        except OSError:
            pass
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    time.sleep(3)
    lat = honest_latency(friend, target, honest[1])
    time.sleep(3)
    st = target.status()["stats"]
    stop.set()
    sampler.stop.set()
    th.join(5)
    peak = sampler.peak
    assert target.alive(), "the target died"
    assert lat < 5, "honest event took %.1f s during the flood" % lat
    assert peak < base + 256, "RSS %.0f MiB, baseline %.0f MiB" % (peak, base)
    assert st["validate_holds"] >= 1, st
    print("1. %d events of ~0.9 MB (untrusted key) served in 6 s: peak RSS %.0f MiB "
          "(baseline %.0f), peer held %d times, honest event stored in %.2f s"
          % (served[0], peak, base, st["validate_holds"], lat))
    p.close()

    # 2. five peers announcing ids they never serve
    cfg = target.status()
    floods = []
    for k in range(5):
        q = RawPeer(target.port, NET, "127.0.0.%d" % (30 + k))
        q.handshake()
        floods.append(q)
    stop2 = threading.Event()

    def announce(q):
        try:
            while not stop2.is_set():
                q.send(msg(ANNOUNCE, os.urandom(32 * 4096)))
                time.sleep(0.05)
        except OSError:
            pass
    ths = [threading.Thread(target=announce, args=(q,), daemon=True) for q in floods]
    base2 = rss_mib(target.proc.pid)
    sampler2 = Sampler(target.proc.pid)
    sampler2.start()
    for t in ths:
        t.start()
    time.sleep(3)
    pending = target.status()
    lat2 = honest_latency(friend, target, honest[2])
    time.sleep(5)
    st2 = target.status()
    stop2.set()
    sampler2.stop.set()
    for t in ths:
        t.join(5)
    assert target.alive(), "the target died"
    assert lat2 < 5, "honest event took %.1f s during the announce flood" % lat2
    assert sampler2.peak < base2 + 256, "RSS %.0f MiB, baseline %.0f" % (sampler2.peak, base2)
    print("2. five peers announcing ids they never serve: honest event stored in %.2f s; "
          "peak RSS %.0f MiB (baseline %.0f); dropped %d announcements, %d requests timed "
          "out, %d bans"
          % (lat2, sampler2.peak, base2, st2["stats"]["pending_dropped"],
             st2["stats"]["fetch_timeouts"], st2["stats"]["bans"]))
    del cfg, pending

    # 6. "list everything", again and again
    more = os.path.join(root, "more.jsonl")
    subprocess.run([args.gen_events, "--records", "600", "--per-record", "4", "--key-out",
                    os.path.join(root, "k2.json"), more], check=True, capture_output=True)
    with open(more, "rb") as f:
        lines = [l for l in f.read().splitlines() if l.strip()]
    for r in target.submit(lines):
        assert r.get("ok"), r
    items = target.status()["store"]["events"]
    q = RawPeer(target.port, NET, "127.0.0.40", features=1)
    q.handshake()
    got = [0]
    stop3 = threading.Event()

    def drain():
        while not stop3.is_set():
            try:
                m = q.recv_msg(0.5)
            except OSError:
                return
            if m is not None and m[0] == RECON:
                got[0] += len(m[2])
    rd = threading.Thread(target=drain, daemon=True)
    rd.start()
    base6 = rss_mib(target.proc.pid)
    sampler6 = Sampler(target.proc.pid)
    sampler6.start()
    lat6 = []
    threading.Timer(4, lambda: lat6.append(honest_latency(friend, target, honest[3]))).start()
    sent, session, t0 = 0, 1, time.time()
    first = b"\x01\x01" + os.urandom(16) + b"\x00\x02\x00"  # +inf: LIST of nothing
    try:
        while time.time() - t0 < 10:
            q.send(msg(RECON, session, first, 0))
            sent += len(first)
            session += 2
            time.sleep(0.002)
    except OSError:
        pass
    time.sleep(1)
    stop3.set()
    sampler6.stop.set()
    rd.join(5)
    assert lat6 and lat6[0] < 5, "honest event during the RECON loop: %s" % lat6
    assert sampler6.peak < base6 + 256, "RSS %.0f MiB, baseline %.0f" % (sampler6.peak, base6)
    listing = 32 * items + (1 << 20)
    assert target.alive(), "the target died"
    assert got[0] <= listing + 4 * sent + 300000, (got[0], listing, sent)
    sy = target.status()["sync"]
    print("6. %d sessions of \"list everything\" (%d bytes sent) in 10 s: the node answered "
          "%d bytes (one listing of %d items is %d; allowed %d + 4 x %d), %d answers held; "
          "peak RSS %.0f MiB (baseline %.0f); an honest event stored in %.2f s"
          % (session // 2, sent, got[0], items, 32 * items, listing, sent, sy["credit_holds"],
             sampler6.peak, base6, lat6[0]))


def main():
    return run_test("pith-adv-relay-", body)


if __name__ == "__main__":
    sys.exit(main())
