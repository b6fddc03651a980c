#!/usr/bin/env python3
"""Control socket and pithctl against a running node (issue 6).

Three pithd on loopback: A (the one operated), B and C (its peers).

1. status, peers, records, state, event and resolve through
   `pithctl --node SOCKET`, human-readable and --json (which must parse),
   agree with the node's own answers and, once it is stopped, with
   `pithctl --store DIR` on its data directory.
2. connect: A dials B and keeps it (peers --json shows it kept).
3. ban by node id prefix, with a duration and a reason: A's connections
   from 127.0.0.1 close, peers/status show the ban; A is stopped, the ban
   and the kept address are in DATA/peers.json (mode 0600); A restarts
   with both; unban lifts it and A dials B again; a second unban fails.
4. backup while events are being submitted: the copy opens with
   `pithctl --store DIR records` and passes `pithctl --store DIR check`;
   a backup into an existing directory fails.
5. Errors: one line on stderr saying what and where, exit status 1: no
   such socket, a bad duration, an unknown node id, a missing record.
6. Permissions: the socket is mode 0600 and the node refuses to start
   with its socket in a directory others can write to. As root, a process
   that dropped to another uid cannot connect (the mode), and when the
   socket's mode is loosened by hand the node still refuses it (it checks
   the client's uid, SO_PEERCRED).
7. Descriptors: a node started at a soft limit of 256 raises it to 65536
   (or the hard limit), and RocksDB keeps a quarter of that open.

usage: control_test.py --pithd P --pithctl C --gen-events G [--keep]
"""

import glob
import json
import os
import re
import resource
import socket
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import run_test, Node, make_events, wait_for  # noqa: E402

NOBODY = 65534


def log(*a):
    print("#", *a, flush=True)


class Ctl:
    def __init__(self, pithctl, key):
        self.pithctl = pithctl
        self.key = key

    def run(self, *args, node=None, store=None, ok=True):
        cmd = [self.pithctl, "--trust-key", self.key]
        if node:
            cmd += ["--node", node.sock]
        if store:
            cmd += ["--store", store]
        r = subprocess.run(cmd + list(args), capture_output=True, timeout=120)
        if ok and r.returncode != 0:
            raise AssertionError("pithctl %s failed (%d): %s" % (" ".join(args), r.returncode,
                                                                  r.stderr.decode()))
        if not ok:
            err = r.stderr.decode()
            assert r.returncode == 1, "pithctl %s: exit %d, expected 1" % (" ".join(args),
                                                                           r.returncode)
            assert err.count("\n") == 1 and err.startswith("pithctl "), \
                "pithctl %s: want one line on stderr, got %r" % (" ".join(args), err)
        return r

    def json(self, *args, node=None):
        r = self.run(*(list(args) + ["--json"]), node=node)
        return json.loads(r.stdout)

    def fails(self, *args, node=None, store=None, where=None, what=None):
        r = self.run(*args, node=node, store=store, ok=False)
        err = r.stderr.decode()
        for w in (where, what):
            assert w is None or w in err, "pithctl %s: %r does not mention %r" % (
                " ".join(args), err, w)
        return err


def ready_ids(node):
    return {p["node_id"] for p in node.status()["peers"] if p["state"] == "ready"}


def as_other_user(path, uid):
    """Connects to the Unix socket at path as uid in a child process and
    asks for status: 'refused' (connect failed), 'closed' (connected, no
    answer) or 'answered'."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        res = b"error"
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(path)
            except OSError:
                res = b"refused"
            else:
                try:
                    s.sendall(b"status\n")
                    res = b"answered" if s.recv(1 << 16) else b"closed"
                except OSError:
                    res = b"closed"
        finally:
            os.write(w, res)
            os._exit(0)
    os.close(w)
    out = os.read(r, 64)
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode()


def body(args, root, nodes):
    key, events = make_events(args.gen_events, root, 40, 5)
    ctl = Ctl(args.pithctl, key)
    extra = ["--trust-key", key, "--outbound-target", "0", "--reconnect-min-ms", "100",
             "--reconnect-max-ms", "500", "--log-level", "info"]
    a = Node(args.pithd, root, "a", extra=extra).start()
    b = Node(args.pithd, root, "b", extra=extra).start()
    c = Node(args.pithd, root, "c", extra=extra).start(peers=[a.addr])
    nodes += [a, b, c]
    first = events[:100]
    replies = a.submit(first)
    assert all(r.get("ok") for r in replies), [r for r in replies if not r.get("ok")][:2]
    ids = [r["event_id"] for r in replies]

    # 1. status and the read-only queries through the socket
    st = ctl.json("status", node=a)
    assert st["node_id"] == a.node_id and st["store"]["events"] == 100, st["store"]
    # what the store takes: 100 events, not flushed yet, are in the log
    assert st["store"]["wal_bytes"] > 100 * 1000 and st["store"]["memtable_bytes"] > 0, st["store"]
    assert "sst_bytes" in st["store"] and "pending_compaction_bytes" in st["store"]
    # the search index follows the change log: 20 records, all indexed soon
    deadline = time.time() + 10
    while st["search"]["behind"] and time.time() < deadline:
        time.sleep(0.1)
        st = ctl.json("status", node=a)
    assert st["search"]["behind"] == 0 and st["search"]["indexed_through"] >= 20, st["search"]
    human = ctl.run("status", node=a).stdout.decode()
    assert a.node_id in human and "100 events" in human, human
    assert "MB of write-ahead log" in human and "0 behind" in human, human
    recs_human = ctl.run("records", node=a).stdout
    recs_json = json.loads(ctl.run("records", "--json", node=a).stdout)  # one array
    assert len(recs_json) == 20 and len(recs_human.splitlines()) == 21, len(recs_json)  # + header
    pith = recs_json[0]["pith_number"]
    state_node = ctl.run("state", pith, node=a).stdout
    event_node = ctl.run("event", ids[0], node=a).stdout
    resolved = ctl.run("resolve", pith.split(":")[2][:12], node=a).stdout.decode().strip()
    assert resolved == pith, resolved
    json.loads(state_node)
    json.loads(event_node)
    log("status, records, state, event, resolve through --node: ok (%d records)"
        % len(recs_json))

    # 2. connect: kept
    out = ctl.run("connect", b.addr, node=a).stdout.decode()
    assert b.addr in out, out
    assert ctl.json("connect", b.addr, node=a)["ok"] is True
    wait_for(lambda: b.node_id in ready_ids(a), 10, what="A to dial B")
    peers = ctl.json("peers", node=a)
    kept = [x for x in peers["addresses"] if x["kept"]]
    assert [x["addr"] for x in kept] == [b.addr], kept
    assert {p["node_id"] for p in peers["peers"] if p["state"] == "ready"} == \
        {b.node_id, c.node_id}, peers["peers"]
    human = ctl.run("peers", node=a).stdout.decode()
    assert b.addr in human and "kept" in human, human
    log("connect: A dials B and keeps it; peers lists B and C")

    # 2b. names are looked up off the loop (node/loop/resolve.c): `connect
    # localhost:PORT` is answered once the name resolved, to B's entry; a
    # name that does not resolve is refused with the resolver's words,
    # and the node answers status meanwhile
    port = b.addr.rsplit(":", 1)[1]
    named = ctl.json("connect", "localhost:" + port, node=a)
    assert named["ok"] is True and named["addr"] == "localhost:" + port, named
    kept = [x["addr"] for x in ctl.json("peers", node=a)["addresses"] if x["kept"]]
    assert kept == [b.addr], kept
    ctl.fails("connect", "no-such-host.invalid:7411", node=a, what="cannot resolve")
    ctl.fails("connect", "localhost", node=a, what="not HOST:PORT")
    log("connect: a name is looked up off the loop; a bad one is refused")

    # 3. ban by node id prefix (all of loopback: B and C go)
    out = ctl.run("ban", b.node_id[:12], "--for", "1h", "--reason", "control test",
                  node=a).stdout.decode()
    assert "banned 127.0.0.1 for 1h" in out and "control test" in out, out
    wait_for(lambda: not ready_ids(a), 10, what="A to close its peers on 127.0.0.1")
    bans = ctl.json("peers", node=a)["bans"]
    assert len(bans) == 1 and bans[0]["ip"] == "127.0.0.1" and \
        3590 <= bans[0]["remaining_s"] <= 3600 and bans[0]["reason"] == "control test", bans
    assert "127.0.0.1 (control test)" in ctl.run("status", node=a).stdout.decode()
    time.sleep(0.5)
    assert not ready_ids(a), "a banned address stays away"
    assert a.stop() == 0
    pf = os.path.join(a.dir, "peers.json")
    mode = stat.S_IMODE(os.stat(pf).st_mode)
    assert mode == 0o600, "peers.json mode %o" % mode
    saved = json.load(open(pf))
    assert [x["ip"] for x in saved["bans"]] == ["127.0.0.1"], saved
    assert [x["addr"] for x in saved["addresses"] if x["kept"]] == [b.addr], saved
    a.start()
    bans = ctl.json("peers", node=a)["bans"]
    assert len(bans) == 1 and bans[0]["ip"] == "127.0.0.1" and bans[0]["remaining_s"] > 3500, bans
    log("ban: closes 127.0.0.1's connections, shows in peers and status, survives a restart")
    assert ctl.json("unban", "127.0.0.1", node=a)["ip"] == "127.0.0.1"
    wait_for(lambda: b.node_id in ready_ids(a), 10, what="A to redial B (kept) after unban")
    ctl.fails("unban", "127.0.0.1", node=a, what="not banned", where=a.sock)
    assert json.load(open(pf))["bans"] == []
    log("unban: lifted, saved, A redials its kept peer B after the restart")

    # 4. backup while events arrive
    more = events[100:]
    th = threading.Thread(target=a.submit, args=(more,))
    th.start()
    bdir = os.path.join(root, "backup-1")
    info = ctl.json("backup", bdir, node=a)
    th.join()
    assert info["dir"] == bdir, info
    n_backup = len(ctl.run("records", store=bdir).stdout.splitlines())
    chk = ctl.run("check", store=bdir).stdout.decode()
    assert chk.startswith("ok:"), chk
    out = ctl.run("backup", os.path.relpath(os.path.join(root, "backup-2")), node=a)
    assert "backup written to %s" % os.path.join(root, "backup-2") in out.stdout.decode()
    assert ctl.run("check", store=os.path.join(root, "backup-2")).stdout.startswith(b"ok:")
    ctl.fails("backup", bdir, node=a, what="exists", where=bdir)
    log("backup: taken while ingesting (%d records, %s), opens, passes check; an existing "
        "directory is refused" % (n_backup, chk.strip()))

    # 5. errors say what and where
    ctl.fails("status", node=Node(args.pithd, root, "none"), what="cannot connect",
              where=os.path.join(root, "none", "pithd.sock"))
    ctl.fails("ban", "127.0.0.1", "--for", "5x", node=a, what="--for")
    ctl.fails("ban", "00000000ffff", node=a, what="no connected peer")
    ctl.fails("state", "pith:2099:AAAAAAAAAAAAAAAAAAAAAAAAAA", node=a, where=a.sock)
    ctl.fails("peers", "extra", node=a, what="no operands")
    log("errors: one line on stderr with what and where, exit status 1")

    # 6. permissions
    mode = stat.S_IMODE(os.lstat(a.sock).st_mode)
    assert mode == 0o600, "control socket mode %o" % mode
    open_dir = os.path.join(root, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    bad = Node(args.pithd, root, "bad", extra=extra + ["--control",
                                                       os.path.join(open_dir, "s.sock")])
    try:
        bad.start(wait=5)
        raise AssertionError("pithd started with its socket in a world-writable directory")
    except RuntimeError:
        pass
    msg = open(bad.log_path).read()
    assert "writable by nobody else" in msg and open_dir in msg, msg[-500:]
    log("socket mode 0600; a socket directory others can write to is refused at start")
    if os.geteuid() == 0:
        # a directory others may pass through but not change, so that
        # only the socket's own mode keeps them out
        os.chmod(root, 0o711)
        sdir = os.path.join(root, "ctl")
        os.mkdir(sdir, 0o711)
        d = Node(args.pithd, root, "d", extra=extra + ["--control",
                                                     os.path.join(sdir, "d.sock")])
        d.sock = os.path.join(sdir, "d.sock")
        nodes.append(d.start())
        got = as_other_user(d.sock, NOBODY)
        assert got == "refused", "uid %d: %s" % (NOBODY, got)
        os.chmod(d.sock, 0o666)
        got = as_other_user(d.sock, NOBODY)
        assert got == "closed", "uid %d with the socket loosened to 0666: %s" % (NOBODY, got)
        assert d.status()["node_id"], "the owner still gets answers"
        log("as uid %d: connect refused (mode 0600); with the mode loosened by hand the "
            "node still drops it (SO_PEERCRED)" % NOBODY)
    else:
        log("not root: the test of another user is skipped (mode and directory checked)")

    # the queries agree with the store once the node is stopped
    assert a.stop() == 0
    store = os.path.join(a.dir, "store")
    assert ctl.run("state", pith, store=store).stdout == state_node
    assert ctl.run("event", ids[0], store=store).stdout == event_node
    log("state and event through the socket are byte-identical to --store")

    # 7. a node started at a soft descriptor limit of 256 raises it to
    # 65536 (or the hard limit), and its store keeps a quarter of that open
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        f = Node(args.pithd, root, "fds").start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    nodes.append(f)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    with open("/proc/%d/limits" % f.proc.pid) as fh:
        got = int(re.search(r"Max open files\s+(\d+)", fh.read()).group(1))
    assert got == want, "soft descriptor limit %d, not %d" % (got, want)
    opts = max(glob.glob(os.path.join(f.dir, "store", "OPTIONS-*")))
    with open(opts) as fh:
        mof = int(re.search(r"max_open_files=(-?\d+)", fh.read()).group(1))
    assert mof == max(64, want // 4), "the store keeps %d files open" % mof
    log("a node started at 256 descriptors raised them to %d; its store keeps %d files open"
        % (got, mof))


def main():
    return run_test("pc-", body, tools=("pithd", "pithctl", "gen-events"))


if __name__ == "__main__":
    sys.exit(main())
