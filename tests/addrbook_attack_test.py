#!/usr/bin/env python3
"""Under attack, the address book, inbound slots and bans (issue 16, items
3, 4 and 5): real pithd nodes on loopback and scripted peers (RawPeer),
each attacker from loopback addresses of its own (127.X.Y.Z: all of 127/8
reaches lo; the node groups 127/8 by /16 like any IPv4, so distinct
127.X/16s are distinct network groups, and 127.0.0.1 is this machine).

  3. poisoning: 17 inbound peers from 17 groups answer the node's PEERS_REQ
     with 64 addresses each, all leading to one listener of the attacker's
     that accepts and hangs up, and come back again and again for 10 s.
     -> the node stays up; at least half of the honest addresses it knew
        (4 honest pithd nodes) are still in its book; an honest newcomer
        that connects afterwards is learnt; the attacker's listener is
        dialled at most 2 times a second.
  4. slots: 31 connections from one address, then 24 from 6 groups x 4
     addresses, answering pings and coming back when closed.
     -> at most inbound_per_ip from the one address; an honest newcomer
        (a scripted peer from a group of its own, and a real pithd) gets
        in during the attack; the real node stays (whether the scripted
        one, with no round trip measured yet, is still there 3 s later is
        reported, not asserted).
  5. bans: 24 offenders against a ban table of 16 (ban_max).
     -> every one of the last 16 is refused; the overflow is logged once
        and counted (bans_evicted).

usage: addrbook_attack_test.py --pithd P [--keep]
"""

import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import (run_test, PING, PONG, PEERS, PEERS_REQ, RawPeer, Node,  # noqa: E402
                      frame, msg, wait_for)
from adversarial_relay_test import Sampler, rss_mib  # noqa: E402

NET = "pith-attack"


def log(*a):
    print("#", *a, flush=True)


def ready_peers(node):
    return [p for p in node.status()["peers"] if p["state"] == "ready"]


def book(node):
    return {a["addr"]: a for a in node.ctl("peers")["addresses"]}


class Listener:
    """The attacker's listener: accepts on every loopback address at one
    port and hangs up at once, counting the dials."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.times = []
        self.stop = False
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.times.append(time.time())
            c.close()

    def dials(self, t0, t1):
        return sum(1 for t in self.times if t0 <= t < t1)


def serve(p, stop, on_msg=None):
    """Answers PINGs (and whatever on_msg handles) until closed or stop."""
    while not stop.is_set():
        try:
            m = p.recv_msg(0.5)
        except socket.timeout:
            continue
        except OSError:
            return
        if m is None:
            return
        if m[0] == PING:
            try:
                p.send(msg(PONG, m[1]))
            except OSError:
                return
        elif on_msg:
            on_msg(p, m)


def connect(port, ip):
    """A RawPeer from ip that finished the handshake, or None if the node
    would not have it."""
    try:
        p = RawPeer(port, NET, ip, timeout=5)
        p.handshake()
        return p
    except (OSError, RuntimeError):
        return None


def poisoner(port, ip, lport, stop, stats):
    """Connects, answers PEERS_REQ with 64 addresses of its group leading to
    lport, leaves, and again."""
    x = int(ip.split(".")[1])
    n = 0

    def on_msg(p, m):
        nonlocal n
        if m[0] != PEERS_REQ:
            return
        addrs = []
        for _ in range(64):
            n += 1
            addrs.append([bytes([127, x, (n >> 8) & 255, n & 255 or 1]), lport])
        p.send(msg(PEERS, addrs))
        stats["answers"] += 1
        p.close()

    while not stop.is_set():
        p = connect(port, ip)
        if p is None:
            time.sleep(0.2)
            continue
        serve(p, stop, on_msg)
        p.close()


def holder(port, ip, stop, held):
    """Holds a slot from ip, answering pings, and comes back when closed."""
    while not stop.is_set():
        p = connect(port, ip)
        if p is None:
            time.sleep(0.3)
            continue
        held[ip] = held.get(ip, 0) + 1
        serve(p, stop)
        p.close()


def body(args, root, nodes):
    t_start = time.time()
    extra = ["--network-id", NET, "--inbound-max", "16", "--ban-max", "16",
             "--ban-seconds", "600", "--pex-interval-ms", "1000", "--ping-interval-ms", "2500",
             "--handshake-timeout-ms", "3000", "--reconnect-min-ms", "200",
             "--reconnect-max-ms", "2000", "--log-level", "info"]
    target = Node(args.pithd, root, "target", network_id=NET, extra=extra).start()
    nodes.append(target)
    honest = []
    for i in range(4):
        h = Node(args.pithd, root, "h%d" % i, network_id=NET,
                 extra=["--network-id", NET, "--log-level", "info"]).start(peers=[target.addr])
        nodes.append(h)
        honest.append(h)
    wait_for(lambda: all(h.addr in book(target) for h in honest), 15,
             what="the target to learn the 4 honest nodes")
    wait_for(lambda: len(ready_peers(target)) >= 4, 15, what="4 honest peers ready")
    b = book(target)
    log("target %s; honest nodes %s in its book as %s" % (
        target.addr, ", ".join(h.addr for h in honest),
        ", ".join(b[h.addr]["table"] for h in honest)))

    # the target's memory, from here to the end of the attacks
    base_rss = rss_mib(target.proc.pid)
    sampler = Sampler(target.proc.pid)
    sampler.start()

    # ---- 3. poisoning --------------------------------------------------------
    lst = Listener()
    stop = threading.Event()
    stats = {"answers": 0}
    t0 = time.time()
    th = [threading.Thread(target=poisoner, args=(target.port, "127.%d.0.1" % (66 + i), lst.port,
                                                  stop, stats), daemon=True) for i in range(17)]
    for t in th:
        t.start()
    time.sleep(10)
    stop.set()
    for t in th:
        t.join(5)
    t_attack = time.time() - t0
    time.sleep(max(0, 20 - (time.time() - t0)))
    dials = lst.dials(t0, t0 + 20)
    assert target.alive(), "the target died during the poisoning"
    b = book(target)
    st = target.status()
    poison = [a for a in b if a.endswith(":%d" % lst.port)]
    kept = [h for h in honest if h.addr in b]
    log("poisoning: %d PEERS answers from 17 groups in %.1f s; the book holds %d of the "
        "attacker's addresses (%d new, %d tried in all); %d of 4 honest addresses kept; "
        "the attacker's listener was dialled %d times in 20 s"
        % (stats["answers"], t_attack, len(poison), st["addresses_new"], st["addresses_tried"],
           len(kept), dials))
    assert len(kept) >= 2, "fewer than half the honest addresses survived: %s" % kept
    assert len(poison) <= 17 * 8 * 32
    assert dials <= 45, "the attacker's listener was dialled %d times in 20 s" % dials
    newcomer = Node(args.pithd, root, "newcomer", network_id=NET,
                    extra=["--network-id", NET, "--log-level", "info"]).start(peers=[target.addr])
    nodes.append(newcomer)
    wait_for(lambda: newcomer.addr in book(target), 10,
             what="the target to learn an honest newcomer after the poisoning")
    log("honest newcomer %s learnt (%s table)" % (newcomer.addr,
                                                  book(target)[newcomer.addr]["table"]))
    RESULTS["poison"] = (stats["answers"], len(poison), len(kept), dials)

    # ---- 4. slots --------------------------------------------------------------
    stop = threading.Event()
    held = {}
    one = [threading.Thread(target=holder, args=(target.port, "127.99.0.1", stop, held),
                            daemon=True) for _ in range(31)]
    for t in one:
        t.start()
    time.sleep(3)
    st = target.status()
    from_one = [p for p in st["peers"] if p["addr"].startswith("127.99.0.1:")
                and p["state"] != "closing"]
    log("31 connections from 127.99.0.1: %d held, %d refused (refused_ip)"
        % (len(from_one), st["stats"]["refused_ip"]))
    assert len(from_one) <= 4, from_one
    assert st["stats"]["refused_ip"] >= 27
    many = [threading.Thread(target=holder, args=(target.port, "127.%d.0.%d" % (100 + g, 1 + k),
                                                  stop, held), daemon=True)
            for g in range(6) for k in range(4)]
    for t in many:
        t.start()
    time.sleep(4)
    st = target.status()
    inbound = [p for p in st["peers"] if p["direction"] == "in" and p["state"] != "closing"]
    log("24 more from 6 groups: %d inbound peers, %d evicted so far, %d refused per group"
        % (len(inbound), st["stats"]["inbound_evicted"], st["stats"]["refused_group"]))
    t1 = time.time()
    # a newcomer retries as a node's redial does: on a loaded machine the
    # attack's instant reconnects can win a freed slot's race once
    # (the node sends PEERS_REQ the moment a peer is ready, addrbook_peer_ready)
    nc = None
    for attempt in range(5):
        nc = connect(target.port, "127.200.0.1")
        if nc is not None and nc.recv_until(PEERS_REQ, 5) is not None:
            break
        if nc is not None:
            nc.close()
            nc = None
        time.sleep(1)
    assert nc is not None, \
        "the honest newcomer from 127.200.0.1 was not made ready during the attack (5 tries)"
    nc_stop = threading.Event()
    threading.Thread(target=serve, args=(nc, nc_stop), daemon=True).start()
    late = Node(args.pithd, root, "late", network_id=NET,
                extra=["--network-id", NET, "--log-level", "info"]).start(peers=[target.addr])
    nodes.append(late)
    wait_for(lambda: any(p["node_id"] == late.node_id for p in ready_peers(target)), 10,
             what="a real honest node to get a slot during the attack")
    time.sleep(3)
    ids = {p["node_id"]: p for p in ready_peers(target)}
    stays = ed_hex(nc.pk) in ids
    st = target.status()
    log("during the slot attack: newcomer 127.200.0.1 in at once and %s 3 s later; real node "
        "%s ready; %d inbound evicted, %d refused per IP, %d per group; connections made by "
        "the attack: %d" % ("still connected" if stays else "GONE", late.name,
                            st["stats"]["inbound_evicted"], st["stats"]["refused_ip"],
                            st["stats"]["refused_group"], sum(held.values())))
    # Not asserted: under this attack (28 connections for 16 slots, answering
    # pings at loopback speed, coming back at once) a newcomer with no
    # round trip measured yet and no events brought can lose its slot again
    # (docs/pithd.md, "Budgets and misbehaviour"); the real node stays.
    assert late.node_id in ids, "the real honest node was evicted"
    stop.set()
    nc_stop.set()
    nc.close()
    RESULTS["slots"] = (len(from_one), st["stats"]["refused_ip"], st["stats"]["inbound_evicted"],
                        stays, time.time() - t1)
    for t in one + many:
        t.join(5)

    # ---- 5. ban overflow -------------------------------------------------------
    before = target.status()["stats"]
    offenders = ["127.150.%d.%d" % (i // 8, 1 + i % 8) for i in range(24)]
    for ip in offenders:
        p = RawPeer(target.port, NET, ip)
        p.send(frame(b"\xc1" + os.urandom(63)))
        assert p.is_closed(5), "garbage from %s did not close the connection" % ip
        p.close()
    wait_for(lambda: target.status()["stats"]["bans"] - before["bans"] >= 24, 10,
             what="24 bans")
    st = target.status()
    running = {x["ip"] for x in st["bans"]}
    refused = 0
    for ip in offenders[-16:]:
        p = RawPeer(target.port, NET, ip)
        refused += p.is_closed(3)
        p.close()
    evicted = st["stats"]["bans_evicted"] - before["bans_evicted"]
    with open(target.log_path, errors="replace") as f:
        full_lines = sum(1 for line in f if "ban table full" in line)
    log("24 offenders against ban_max 16: %d bans running, %d dropped (bans_evicted), the last "
        "16 refused: %d of 16; 'ban table full' logged %d time(s)"
        % (len(running), evicted, refused, full_lines))
    assert set(offenders[-16:]) <= running, running
    assert refused == 16
    assert evicted >= 8
    assert full_lines == 1
    RESULTS["bans"] = (len(running), evicted, refused)

    sampler.stop.set()
    assert sampler.peak < base_rss + 256, "RSS %.0f MiB, baseline %.0f" % (sampler.peak, base_rss)
    log("peak RSS during the attacks %.0f MiB (baseline %.0f)" % (sampler.peak, base_rss))
    assert target.alive()
    assert target.stop() == 0
    log("addrbook attack test passed in %.1f s" % (time.time() - t_start))


RESULTS = {}


def ed_hex(pk):
    return pk.hex()


def main():
    return run_test("pa-", body, tools=("pithd",))


if __name__ == "__main__":
    sys.exit(main())
