#!/usr/bin/env python3
"""Shutdown test (issue 4): nothing a node acknowledged is lost.

Events are streamed into a node's control socket without waiting; each
"stored" answer is sent only after the synced write that holds the event.
The node runs with a 1 MiB log bound (`store_wal_mb`), so RocksDB has
flushed some column families early to drop old logs and not others when,
two thirds of the way, the node is stopped: once with SIGTERM (it must
exit 0) and once with SIGKILL (a crash). Every event acknowledged before the stop must then
be in the store (`pithctl --store DIR export` lists it), and the store
must pass `pithctl check`.

usage: shutdown_test.py --pithd P --pithctl C --gen-events G [--keep]
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import run_test, Ctl, Node, make_events  # noqa: E402


def log(*a):
    print("#", *a, flush=True)


def stream_and_stop(node, lines, sig, after):
    """Sends every line; stops the node with sig once `after` answers came.
    Returns the ids acknowledged as stored."""
    c = Ctl(node.sock, 60)
    acked = []
    stopped = threading.Event()

    def sender():
        try:
            for line in lines:
                c.send(b"event " + line)
        except OSError:
            pass  # the node went away

    th = threading.Thread(target=sender, daemon=True)
    th.start()
    while True:
        try:
            r = c.recv()
        except (OSError, RuntimeError, ValueError):
            break
        if r.get("ok") and r["outcome"] in ("stored", "duplicate"):
            acked.append(r["event_id"])
        if len(acked) == after and not stopped.is_set():
            stopped.set()
            node.proc.send_signal(sig)
    rc = node.proc.wait(60)
    node.proc = None
    node.log.close()
    c.close()
    return acked, rc


def check_store(args, node, key, acked):
    store = os.path.join(node.dir, "store")
    r = subprocess.run([args.pithctl, "--store", store, "export"], capture_output=True)
    assert r.returncode == 0, "pithctl export: %s" % r.stderr.decode()
    held = {json.loads(l)["event_id"] for l in r.stdout.splitlines() if l.strip()}
    missing = [e for e in acked if e not in held]
    assert not missing, "%d of %d acknowledged events are missing, e.g. %s" % (
        len(missing), len(acked), missing[0])
    chk = subprocess.run([args.pithctl, "--trust-key", key, "--store", store, "check"],
                         capture_output=True, text=True)
    assert chk.returncode == 0, "pithctl check: %s %s" % (chk.stdout, chk.stderr)


def body(args, root, nodes):
    key, lines = make_events(args.gen_events, root, 3000, 5)
    half = len(lines) // 2
    # a small log bound: the crash comes after RocksDB flushed some column
    # families to drop old logs and not others (docs/store.md, Durability)
    node = Node(args.pithd, root, "n", extra=["--trust-key", key, "--store-wal-mb", "1"])
    nodes.append(node)
    for sig, part in ((signal.SIGTERM, lines[:half]), (signal.SIGKILL, lines[half:])):
        node.start()
        t = time.time()
        acked, rc = stream_and_stop(node, part, sig, len(part) * 2 // 3)
        name = "SIGTERM" if sig == signal.SIGTERM else "SIGKILL"
        if sig == signal.SIGTERM:
            assert rc == 0, "pithd exited %s on SIGTERM" % rc
        log("%s after %d of %d events were acknowledged (%.2f s); exit %s"
            % (name, len(acked), len(part), time.time() - t, rc))
        assert len(acked) >= len(part) * 2 // 3
        check_store(args, node, key, acked)
        log("all %d acknowledged events are in the store; check passes" % len(acked))
    # the node starts again on what it kept
    node.start()
    st = node.status()
    log("restarted: %d events in %d records" % (st["store"]["events"], st["store"]["records"]))
    assert node.stop() == 0
    log("shutdown test passed")


def main():
    return run_test("ps-", body, tools=("pithd", "pithctl", "gen-events"))


if __name__ == "__main__":
    sys.exit(main())
