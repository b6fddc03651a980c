#!/usr/bin/env python3
"""Bulk mode during a catch-up (docs/store.md "Bulk loading", docs/pithd.md
`sync_bulk_min`).

Node A holds E events (gen_events, imported with `pithctl import`).

1. A fresh node B with sync_bulk_min 500 dials A: its status shows
   `sync.bulk` true while it catches up, its log says the store went into
   bulk mode and out of it, and after "caught up" `sync.bulk` is false and
   `pith_sync_bulk` 0 in /metrics; B ends with every event. Its search
   index waits while the store is in bulk mode (`search.held` true at some
   poll, never before bulk mode began), then indexes everything.
   Its catch-up commits without the write-ahead log (sync_bulk_unlogged):
   the log says so, and that the store was flushed and back on its log.
2. A fresh node C with the default sync_bulk_min (100,000, above E) dials
   A: its status never shows `sync.bulk` true, its log has no bulk line,
   and it ends with every event.
3. kill -9 in the middle of a catch-up without the log: a fresh node D
   (sync_bulk_min 500) dials A; once it has stored some events in bulk
   mode, A is frozen (SIGSTOP) so the catch-up stands still, a client
   submits X other events to D over the control socket (each answered
   stored), and D is killed. Offline, `pithctl check` finds D's store
   consistent and every one of the X events in it (whatever of the
   catch-up was not flushed is lost). A resumes, D restarts, catches up
   with everything, and its store checks clean after a clean stop.
   Its first catch-up wrote states and claims into side families: B's
   log says they were moved into place, with the same records as A's,
   and D's restart moved the ones its kill left. While A is frozen (D's
   side families in use), 96 reads of a record's state.json at once on
   D, whose one render thread is held 50 ms a read
   (PITH_TEST_RENDER_DELAY_MS), get 503 with Retry-After: 1 for what the
   pool (64 jobs) has no room for, counted in
   pith_http_render_full_total; after the restart's catch-up the same
   burst is answered 200 throughout (the loop reads what the pool cannot
   take).

No timing is asserted: B's status is polled as fast as the control socket
answers, and E is large enough that a catch-up outlasts many polls.

usage: sync_bulk_test.py --pithd P --pithctl C --gen-events G [--events E] [--keep]
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import run_test, Node, wait_for  # noqa: E402

BULK_ON = "sync: store in bulk mode until caught up"
BULK_OFF = "sync: store out of bulk mode"
UNLOGGED = "without the log until then"
RELOGGED = "sync: store flushed and back on its log"
SIDE_DONE = "states, claims and event ids in place:"
SIDE_BEGIN = "states, claims and event ids go to side families"
BURST = 96  # record reads at once: over one render thread's 64
SIDE_OPEN = "moving the states, claims and event ids of an interrupted catch-up into place"


def log(*a):
    print("#", *a, flush=True)


def catch_up(node, events, timeout):
    """Polls node's status until it holds every event and is idle; returns
    the `sync.bulk` values seen, in order, each with the number of polls
    that saw it: [[False, 2], [True, 40], [False, 1]]."""
    seen = []
    deadline = time.time() + timeout
    node.held_seen = set()
    while time.time() < deadline:
        s = node.status()
        bulk = s["sync"]["bulk"]
        if s["search"] and s["search"]["held"]:
            # True: bulk mode was on at this poll or an earlier one
            node.held_seen.add(bulk or any(v for v, _ in seen))
        if seen and seen[-1][0] == bulk:
            seen[-1][1] += 1
        else:
            seen.append([bulk, 1])
        if s["store"]["events"] == events and s["sync"]["state"] == "idle":
            return seen
        time.sleep(0.01)
    raise AssertionError("timed out after %.0f s waiting for %s to catch up (%d of %d events)"
                         % (timeout, node.name, node.status()["store"]["events"], events))


def log_lines(node, prefix):
    with open(node.log_path, errors="replace") as f:
        return [l for l in f.read().splitlines() if prefix in l]


def metric(node, name):
    url = "http://%s/metrics" % node.status()["http"]
    with urllib.request.urlopen(url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError("%s not in %s" % (name, url))


def burst(node, path, n):
    """GETs path on n connections at once; [(status, Retry-After)]."""
    host, port = node.status()["http"].rsplit(":", 1)
    conns = [http.client.HTTPConnection(host, int(port), timeout=60) for _ in range(n)]
    for c in conns:
        c.connect()
    out = [None] * n
    go = threading.Event()

    def one(i):
        go.wait()
        conns[i].request("GET", path)
        r = conns[i].getresponse()
        r.read()
        out[i] = (r.status, r.getheader("Retry-After"))
        conns[i].close()
    ths = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ths:
        t.start()
    go.set()
    for t in ths:
        t.join(120)
    return out


def body(args, root, nodes):
    t0 = time.time()
    key = os.path.join(root, "key.json")
    ev = os.path.join(root, "events.jsonl")
    subprocess.run([args.gen_events, "--records", str(args.events // 2), "--per-record", "2",
                    "--key-out", key, ev], check=True, stdout=subprocess.DEVNULL)
    events = args.events // 2 * 2
    extra = ["--trust-key", key, "--log-level", "info", "--sync-interval-ms", "0"]
    a = Node(args.pithd, root, "a", extra=extra)
    os.makedirs(a.dir)
    r = subprocess.run([args.pithctl, "--store", os.path.join(a.dir, "store"), "--trust-key",
                        key, "import", ev], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    a.start()
    nodes.append(a)
    # the reconciliation set loads in the background after start
    wait_for(lambda: a.status()["sync"]["items"] == events, 60,
             what="A's reconciliation set to load")
    assert not a.status()["sync"]["bulk"]

    # 1. below the threshold: bulk mode while catching up, then not
    b = Node(args.pithd, root, "b",
             extra=extra + ["--sync-bulk-min", "500", "--http", "127.0.0.1:0"])
    b.start(peers=[a.addr])
    nodes.append(b)
    t1 = time.time()
    seen = catch_up(b, events, 120)
    took = time.time() - t1
    # bulk mode ends with its end's thread (the flush back to the log, the
    # compaction triggers): a tick after "caught up"
    wait_for(lambda: not b.status()["sync"]["bulk"], 30, what="B out of bulk mode")
    s = b.status()
    assert True in [v for v, _ in seen], "B's status never showed sync.bulk true: %s" % seen
    assert s["sync"]["bulk"] is False, s["sync"]
    assert s["stats"]["events_invalid"] == 0, s["stats"]
    # without the log, the end (a flush, then the compaction triggers) is
    # on a thread of its own: its lines come a little after "caught up"
    wait_for(lambda: len(log_lines(b, RELOGGED)) == 1 and len(log_lines(b, BULK_OFF)) == 1, 30,
             what="B's store back on its log and out of bulk mode")
    on, off = log_lines(b, BULK_ON), log_lines(b, BULK_OFF)
    assert len(on) == 1 and len(off) == 1, (on, off)
    assert "sync_bulk_min 500" in on[0], on[0]
    assert UNLOGGED in on[0], on[0]
    assert metric(b, "pith_sync_bulk") == 0
    assert metric(b, "pith_store_unlogged") == 0
    # the index sat the bulk catch-up out (held only once bulk mode had
    # begun: a tick after it), then took everything
    assert b.held_seen == {True}, b.held_seen
    # its states and claims went to side families, moved into place at the
    # end (docs/store.md "Bulk loading"): the same records as A's
    side = log_lines(b, SIDE_DONE)
    assert len(side) == 1 and " 0 keys" not in side[0], side
    assert b.records() == a.records(), "B's records differ from A's"
    wait_for(lambda: not b.status()["search"]["held"]
             and b.status()["search"]["behind"] == 0, 60, what="B's search index")
    r = subprocess.run([args.pithctl, "--node", b.sock, "status"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and "search     indexed through change" in r.stdout, r
    log("1. B (sync_bulk_min 500) caught up with %d events in %.1f s; sync.bulk went %s "
        "(polls); log: %r" % (events, took,
                              " -> ".join("%s (%d)" % (str(v).lower(), k) for v, k in seen),
                              on[0].split("sync: ", 1)[1]))

    # 2. the default threshold, above E: never bulk mode
    c = Node(args.pithd, root, "c", extra=extra)
    c.start(peers=[a.addr])
    nodes.append(c)
    t1 = time.time()
    seen = catch_up(c, events, 120)
    assert [v for v, _ in seen] == [False], "C's status showed sync.bulk: %s" % seen
    assert not log_lines(c, BULK_ON) and not log_lines(c, BULK_OFF)
    assert c.status()["stats"]["events_invalid"] == 0
    log("2. C (default sync_bulk_min) caught up with %d events in %.1f s, never in bulk mode"
        % (events, time.time() - t1))

    # 3. kill -9 during a catch-up without the log
    key2 = os.path.join(root, "key2.json")
    xev = os.path.join(root, "extra.jsonl")
    subprocess.run([args.gen_events, "--records", "20", "--per-record", "2", "--seed", "7",
                    "--key-out", key2, xev], check=True, stdout=subprocess.DEVNULL)
    with open(xev, "rb") as f:
        xlines = f.read().splitlines()
    xids = {json.loads(l)["event_id"] for l in xlines}
    a_records = a.records()  # before D starts: A is frozen early in D's catch-up
    # one render thread, each render held back 50 ms (test only): a burst
    # of record reads fills the pool (64 jobs a thread) at once
    d = Node(args.pithd, root, "d",
             extra=extra + ["--trust-key", key2, "--sync-bulk-min", "500",
                            "--http", "127.0.0.1:0", "--http-render-threads", "1"],
             env={"PITH_TEST_RENDER_DELAY_MS": "50"})
    d.start(peers=[a.addr])
    nodes.append(d)
    wait_for(lambda: d.status()["sync"]["bulk"] and d.status()["store"]["events"] >= 500, 60,
             interval=0.005, what="D to store events in bulk mode")
    a.proc.send_signal(signal.SIGSTOP)
    try:
        # reads while the side families are in use: what the pool has no
        # room for is answered 503 + Retry-After, not read on the loop
        assert len(log_lines(d, SIDE_BEGIN)) == 1, log_lines(d, "store ")
        path = "/pith/%s/state.json" % sorted(a_records)[0]
        got = burst(d, path, BURST)
        busy = [g for g in got if g[0] == 503]
        assert busy and all(g[1] == "1" for g in busy), got
        assert all(g[0] in (200, 404, 503) for g in got), got
        assert metric(d, "pith_http_render_full_total") >= len(busy)
        log("3. D's reads in its first catch-up, one render thread held 50 ms a read: %d "
            "at once, %d answered 503 with Retry-After: 1 (the rest %s)"
            % (BURST, len(busy), sorted({g[0] for g in got if g[0] != 503})))
        replies = d.submit(xlines)
        bad = [r for r in replies if not r.get("ok") or r.get("outcome") != "stored"]
        assert not bad, bad[:3]
        before = d.status()["store"]["events"]
        assert d.status()["sync"]["bulk"], "D left bulk mode while A was stopped"
        d.proc.kill()
        d.proc.wait()
        d.proc = None
        d.log.close()
    finally:
        a.proc.send_signal(signal.SIGCONT)
    store = os.path.join(d.dir, "store")
    trust = ["--trust-key", key, "--trust-key", key2]
    r = subprocess.run([args.pithctl, "--store", store] + trust + ["check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([args.pithctl, "--store", store] + trust + ["export"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    kept = [json.loads(l)["event_id"] for l in r.stdout.splitlines()]
    missing = xids - set(kept)
    assert not missing, "%d of the client's %d events lost by the kill" % (len(missing), len(xids))
    log("3. D killed in an unlogged catch-up holding %d events (of %d, and %d a client's): "
        "%d kept (all %d of the client's), check clean"
        % (before, events, len(xids), len(kept), len(xids)))
    d.start()
    wait_for(lambda: d.status()["store"]["events"] == events + len(xids)
             and d.status()["sync"]["state"] == "idle", 120, what="D to catch up again")
    # no side families now: what the pool has no room for is read on the loop
    got = burst(d, path, BURST)
    assert all(g[0] == 200 for g in got), got
    assert d.stop() == 0
    r = subprocess.run([args.pithctl, "--store", store] + trust + ["check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # the side families its kill left were moved by the restart's open
    assert len(log_lines(d, SIDE_OPEN)) == 1, log_lines(d, "store ")
    log("   D restarted and caught up: %d events, check clean" % (events + len(xids)))
    for n in (a, b, c):
        assert n.stop() == 0
    log("sync bulk test passed in %.1f s" % (time.time() - t0))


def add_args(ap):
    ap.add_argument("--events", type=int, default=6000)


def main():
    return run_test("psbulk-", body, add_args=add_args)


if __name__ == "__main__":
    sys.exit(main())
