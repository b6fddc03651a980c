#!/usr/bin/env python3
"""Issue 16, item 7: timestamps reconciliation cannot carry (ctest
`adversarial_timestamp`, label adversarial).

usage: adversarial_timestamp_test.py --pithd D --pithctl C --gen-events G
                                     --gen-bundles B --legacy-store L [--keep]

Events signed by the trusted test key with created_at in year 9999 and
0000 (outside what reconciliation carries), on 2025-02-29 and at
23:59:60; a bundle built in 9999 and one holding such events. One rule
(docs/merge.md, T-*) decides for every node:

1. Upgrade. Node A's store is made as a build before the rule left it
   (tests/legacy_store.c: everything stored unverified, schema 5).
   `pithctl check` (read-only) fails and names the items; pithd opens it,
   logs each removal and the upgrade to schema 6; the items are gone.
2. Every path refuses them before storage, with the timestamp named:
   `pithctl import` into A's store (A stopped), then with A running the
   control socket's `event` and `bundle`, POST /events, and a raw peer
   announcing the events and serving them.
3. A node B catches up from A by reconciliation (`pithctl sync`): both
   end with the same events and every record's state_sha256 equal, and
   both stores pass `pithctl check`.
"""
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pithtest import (run_test, ANNOUNCE, EVENT, GET, Node, RawPeer, msg,  # noqa: E402
                      wait_for)

NET = "pith-adv-ts"
TIMES = ["9999-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "2025-02-29T12:00:00Z",
         "2026-01-05T23:59:60Z"]
RECORDS, PER = 6, 3  # gen_events writes each record's PER lines together


def lines_of(path):
    with open(path, "rb") as f:
        return [l for l in f.read().splitlines() if l.strip()]


def write(path, lines):
    with open(path, "wb") as f:
        f.write(b"".join(l + b"\n" for l in lines))
    return path


def created(line):
    return json.loads(line)["created_at"]


def event_id(line):
    return json.loads(line)["event_id"]


def pithctl(args, key, *cmd, check=True):
    r = subprocess.run([args.pithctl, "--trust-key", key] + list(cmd), capture_output=True,
                       text=True, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError("pithctl %s: exit %d: %s %s" % (cmd, r.returncode, r.stdout,
                                                             r.stderr))
    return r


def state_map(node):
    return {k: (v["state_sha256"], v["event_count"], v["has_bundle"])
            for k, v in node.records().items()}


def body(args, root, nodes):
    t0 = time.time()
    key = os.path.join(root, "testkey.pub")
    gen = lambda out, *more: subprocess.run(  # noqa: E731
        [args.gen_events, "--records", str(RECORDS), "--per-record", str(PER), "--key-out", key]
        + list(more) + [out], check=True, capture_output=True)
    valid_path = os.path.join(root, "valid.jsonl")
    gen(valid_path)
    valid = lines_of(valid_path)
    bad, bad_files = [], {}
    for i, t in enumerate(TIMES):
        p = os.path.join(root, "bad%d.jsonl" % i)
        gen(p, "--created-at", t)
        bad_files[t] = lines_of(p)
        bad += [l for l in bad_files[t] if created(l) == t]
    assert len(bad) == len(TIMES) * RECORDS * (PER - 1), len(bad)
    # bundles: records 0-2 valid; record 3's built in 9999; record 4's
    # holding its events of year 9999 (built_at valid)
    gb = lambda src, out, *more: subprocess.run(  # noqa: E731
        [args.gen_bundles] + list(more) + [src, out], check=True, capture_output=True)
    good_b = os.path.join(root, "good-bundles.jsonl")
    gb(write(os.path.join(root, "r012.jsonl"), valid[:3 * PER]), good_b)
    b_built = os.path.join(root, "bundle-9999.jsonl")
    gb(write(os.path.join(root, "r3.jsonl"), valid[3 * PER:4 * PER]), b_built,
       "--built-at", "9999-01-01T00:00:00Z")
    b_events = os.path.join(root, "bundle-events.jsonl")
    gb(write(os.path.join(root, "r4.jsonl"), bad_files[TIMES[0]][4 * PER:5 * PER]), b_events,
       "--unchecked")
    good_bundles = lines_of(good_b)
    bad_bundles = lines_of(b_built) + lines_of(b_events)
    assert len(good_bundles) == 3 and len(bad_bundles) == 2
    # the events that stay: the valid ones, and the valid ones of the bad
    # bundles (a record_created's receipt is made anew each run: another id)
    keep = set(event_id(l) for l in valid)
    for b in bad_bundles:
        keep |= set(e["event_id"] for e in json.loads(b)["events"] if e["created_at"] not in TIMES)

    # 1. the upgrade: A's store as an older build left it
    a = Node(args.pithd, root, "a", network_id=NET,
             extra=["--trust-key", key, "--log-level", "info", "--sync-interval-ms", "0",
                    "--http", "127.0.0.1:0"])
    store_a = os.path.join(a.dir, "store")
    legacy = write(os.path.join(root, "legacy.jsonl"), valid + bad + good_bundles + bad_bundles)
    subprocess.run([args.legacy_store, "--trust-key", key, store_a, legacy], check=True,
                   capture_output=True)
    r = pithctl(args, key, "--store", store_a, "check", check=False)
    outside = [l for l in (r.stdout + r.stderr).splitlines() if "outside the timestamp rule" in l]
    assert r.returncode != 0 and len(outside) == len(bad) + 2, (r.returncode, len(outside),
                                                               r.stdout[-2000:])
    t1 = time.time()
    a.start()
    nodes.append(a)
    up = time.time() - t1
    with open(a.log_path, errors="replace") as f:
        logged = f.read()
    assert "schema 5, upgrading to 6" in logged, logged[-2000:]
    assert "removing event sha256:" in logged and "is outside the timestamp rule" in logged
    assert "events[1].created_at is outside the timestamp rule" in logged, logged[-3000:]
    assert ("%d events and 2 bundles removed, %d records recomputed"
            % (len(bad), RECORDS)) in logged, logged[-2000:]
    st = a.status()["store"]
    assert st["events"] == len(keep) and st["bundles"] == 3, (st, len(keep))
    for l in bad[:4]:
        assert not a.ctl("get_event " + event_id(l)).get("ok")
    print("1. upgrade: a schema-5 store with %d events and 2 bundles outside the rule: "
          "check fails naming %d items; pithd removed them and started in %.2f s"
          % (len(bad), len(outside), up))
    a.stop()

    # 2. every path refuses them, naming the timestamp
    r = pithctl(args, key, "--store", store_a, "--json", "import",
                write(os.path.join(root, "bad-all.jsonl"), bad + bad_bundles), check=False)
    res = json.loads(r.stdout)
    assert r.returncode != 0 and res["stored"] == 0 and res["rejected"] == len(bad) + 2, res
    assert r.stderr.count("created_at: '") >= len(bad), r.stderr[-2000:]
    a.start()
    for rep in a.submit(bad):
        assert not rep.get("ok") and rep.get("reason") == "shape" and \
            "created_at" in rep.get("error", ""), rep
    for rep in a.submit(bad_bundles, kind="bundle"):
        assert not rep.get("ok") and rep.get("reason") == "bundle", rep
    http = a.status()["http"]
    req = urllib.request.Request("http://%s/events" % http, data=b"\n".join(bad) + b"\n",
                                 method="POST",
                                 headers={"Content-Type": "application/x-ndjson"})
    try:
        resp = urllib.request.urlopen(req, timeout=30)
        posted = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        posted = json.loads(e.read())
    assert posted["stored"] == 0 and posted["rejected"] == len(bad), {
        k: v for k, v in posted.items() if k != "results"}
    assert all(x["reason"] == "shape" and "created_at" in x["error"]
               for x in posted["results"]), posted["results"][:2]
    # a peer that announces them and serves every GET
    ids = {bytes.fromhex(event_id(l).split(":", 1)[1]): l for l in bad}
    p = RawPeer(a.port, NET, "127.0.0.31")
    p.handshake()
    p.send(msg(ANNOUNCE, b"".join(ids)))
    served, closed, deadline = set(), False, time.time() + 15
    try:
        while len(served) < len(ids) and time.time() < deadline:
            m = p.recv_msg(1)
            if m is None:
                closed = True
                break
            if m[0] == GET:
                for i in range(0, len(m[1]), 32):
                    eid = m[1][i:i + 32]
                    if eid in ids:
                        p.send(msg(EVENT, eid, ids[eid]))
                        served.add(eid)
    except OSError:
        closed = True  # invalid events cost the peer: the node may close it
    p.close()
    assert served, "the node asked for none of the announced events"
    time.sleep(0.5)
    for l in bad:
        assert not a.ctl("get_event " + event_id(l)).get("ok"), l
    assert a.status()["store"]["events"] == len(keep)
    print("2. refused by every path: pithctl import %d/%d, control event %d and bundle 2, "
          "POST /events %d, a peer served %d of %d announced (none stored%s)"
          % (res["rejected"], len(bad) + 2, len(bad), posted["rejected"], len(served), len(ids),
             ", then the node closed it" if closed else ""))

    # 3. B catches up from A by reconciliation: identical
    b = Node(args.pithd, root, "b", network_id=NET,
             extra=["--trust-key", key, "--log-level", "info", "--sync-interval-ms", "0"]).start()
    nodes.append(b)
    t2 = time.time()
    r = subprocess.run([args.pithctl, "--node", b.sock, "--json", "sync", a.addr],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)

    def same():
        sa, sb = a.status(), b.status()
        if sb["store"]["events"] != sa["store"]["events"] or \
           sb["store"]["bundles"] != sa["store"]["bundles"]:
            return None
        ma, mb = state_map(a), state_map(b)
        return ma if ma == mb else None
    states = wait_for(same, 30, what="B to hold what A holds, with equal states")
    caught = time.time() - t2
    assert len(states) == RECORDS, states
    again = json.loads(subprocess.run([args.pithctl, "--node", b.sock, "--json", "sync",
                                       a.node_id], capture_output=True, text=True,
                                      timeout=60).stdout)
    assert again["ids_needed"] == 0 and again["ids_offered"] == 0, again
    for n in (a, b):
        n.stop()
        r = pithctl(args, key, "--store", os.path.join(n.dir, "store"), "check", check=False)
        assert r.returncode == 0, (n.name, r.stdout[-2000:], r.stderr[-2000:])
    print("3. B caught up from A in %.2f s: %d records, %d events and 3 bundles on both, every "
          "state_sha256 equal; a second session finds nothing; both stores pass check"
          % (caught, len(states), len(keep)))
    print("adversarial_timestamp passed in %.1f s" % (time.time() - t0))


def main():
    def more(ap):
        ap.add_argument("--gen-bundles", required=True)
        ap.add_argument("--legacy-store", required=True)
    return run_test("pith-adv-ts-", body, add_args=more)


if __name__ == "__main__":
    sys.exit(main())
