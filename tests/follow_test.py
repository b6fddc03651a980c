#!/usr/bin/env python3
"""pithd following an HTTPS upstream (issue 14, item 2), on the registry
stand-in (tests/upstream_standin.py) with a CA this test makes.

usage: follow_test.py --pithd D --pithctl P --gen-events G --gen-bundles B

1. Node A follows the stand-in (--upstream, --follow a file of arXiv ids,
   --upstream-refresh 1); node B only peers with A. A fills itself from
   the upstream and B fills from A by gossip: the same records and states.
2. The records' second checks cost only 304s (no bundle sent again).
3. A newer bundle published at the upstream: A stores it within its
   refresh interval and B gets it from A (bundle.json bytes equal the
   published file on both).
4. Read-through on A: the resolve API by DOI, and /pith/{BODY}.json, for
   records A never had answer 200 from the store once fetched (and are
   followed from then on); an unknown DOI is 404, asked of the upstream
   once (the negative cache answers the second).
5. Bad upstream answers, each for a record of its own, with `pithctl
   follow`: a tampered bundle, one signed by an untrusted key, a body over
   the cap, a stalled answer, 5xx, and 429 with Retry-After: each counted
   by its cause in `status`, nothing stored, the node keeps serving; a
   node given another CA fails with "tls".
"""
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pithtest import Node, run_test, wait_for  # noqa: E402
from pull_test import Standin  # noqa: E402
from upstream_standin import write_tree  # noqa: E402

RECORDS = 60
FOLLOWED = 20


def http_get(url, timeout=10):
    """(status, body bytes, headers) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def http_base(node):
    return "http://" + node.status()["http"]


def upstream_status(node):
    return node.status()["follow"]["upstreams"][0]


def body(data):
    args = data["args"]
    root = data["root"]
    key = os.path.join(root, "key.json")
    ev = os.path.join(root, "events.jsonl")
    bu = os.path.join(root, "bundles.jsonl")
    subprocess.run([args.gen_events, "--records", str(RECORDS), "--per-record", "2",
                    "--key-out", key, ev], check=True, capture_output=True)
    subprocess.run([args.gen_bundles, ev, bu], check=True, capture_output=True)
    with open(bu, "rb") as f:
        bundles = [l.rstrip(b"\n") for l in f if l.strip()]
    tree = os.path.join(root, "tree")
    numbers, index = write_tree(tree, bundles)
    by_arxiv = {v: k for k, v in index["arxiv"].items()}
    by_doi = {v: k for k, v in index["doi"].items()}
    tls = os.path.join(root, "tls")
    os.makedirs(tls)
    up = Standin(tree, tls)
    data["standins"].append(up)

    ids = os.path.join(root, "ids.txt")
    with open(ids, "w") as f:
        f.write("# followed by arXiv id\n")
        for p in numbers[:FOLLOWED]:
            f.write("arXiv:%s\n" % by_arxiv[p])
    nodes = data["nodes"]
    common = ["--trust-key", key, "--http", "127.0.0.1:0", "--log-level", "info"]
    a = Node(args.pithd, root, "a", extra=common + [
        "--upstream", up.origin, "--upstream-ca-file", up.ca, "--follow", ids,
        "--upstream-refresh", "1", "--upstream-stall-s", "2", "--readthrough-ms", "5000"])
    nodes.append(a)
    a.start()
    b = Node(args.pithd, root, "b", extra=common)
    nodes.append(b)
    b.start(peers=[a.addr])

    # 1. A fills itself from the upstream, B from A
    t0 = time.time()
    want = set(numbers[:FOLLOWED])
    wait_for(lambda: want <= set(a.records()), 30, what="A to pull the followed records")
    ta = time.time() - t0

    def same():
        ra, rb = a.records(), b.records()
        return all(p in rb and rb[p] == ra[p] and ra[p]["has_bundle"] for p in want)
    wait_for(same, 30, what="B to get them, bundles and all, from A")
    tb = time.time() - t0
    print("A pulled %d followed records (by arXiv id) in %.1f s; B had them by gossip at %.1f s,"
          " same states" % (len(want), ta, tb))

    # 2. later checks are conditional: 304s, no bundle sent again
    s0 = up.stats()
    time.sleep(2.5)
    s1 = up.stats()
    if s1["full"] != s0["full"] or s1["not_modified"] - s0["not_modified"] < FOLLOWED:
        raise AssertionError("re-checks were not all 304s: %s -> %s" % (s0, s1))
    print("re-checks in 2.5 s: %d answers 304, no bundle sent again"
          % (s1["not_modified"] - s0["not_modified"]))

    # 3. a newer bundle published: A picks it up within its refresh, B from A
    target = numbers[0]
    newer = os.path.join(root, "newer.jsonl")
    one = os.path.join(root, "one.jsonl")
    with open(ev, "rb") as f:
        lines = f.read().splitlines()
    with open(one, "wb") as f:
        f.write(b"\n".join(l for l in lines if l.strip() and
                           json.loads(l)["subject_pith_number"] == target) + b"\n")
    subprocess.run([args.gen_bundles, "--built-at", "2026-10-01T00:00:00Z", one, newer],
                   check=True, capture_output=True)
    with open(newer, "rb") as f:
        new_bytes = f.read().rstrip(b"\n")
    if json.loads(new_bytes)["pith_number"] != target:
        raise AssertionError("the newer bundle is of another record")
    t0 = time.time()
    up.control(publish=[newer])
    for node in (a, b):
        url = "%s/pith/%s/bundle.json" % (http_base(node), target[10:])
        wait_for(lambda: http_get(url)[1] == new_bytes, 15,
                 what="%s to serve the newer bundle" % node.name)
        print("newer bundle published: %s serves it %.1f s later" % (node.name, time.time() - t0))

    # 4. read-through on A
    base = http_base(a)
    doi_rec = numbers[FOLLOWED + 1]
    st, got, _ = http_get("%s/api/pith-number/resolve?doi=%s&json=true"
                          % (base, urllib.request.quote(by_doi[doi_rec], safe="")))
    if st != 200 or json.loads(got)["pith_number"] != doi_rec:
        raise AssertionError("read-through by DOI: %d %r" % (st, got[:300]))
    body_rec = numbers[FOLLOWED + 2]
    st, got, _ = http_get("%s/pith/%s.json" % (base, body_rec[10:]))
    if st != 200:
        raise AssertionError("read-through by body: %d %r" % (st, got[:300]))
    fl = a.status()["follow"]
    if fl["followed"] < FOLLOWED + 2:
        raise AssertionError("records read through are not followed: %s" % fl)
    r0 = up.stats()["resolve"]
    bad = "10.48550/arxiv.9999.99999"
    for i in range(2):
        st, got, _ = http_get("%s/api/pith-number/resolve?doi=%s&json=true" % (base, bad))
        if st != 404:
            raise AssertionError("unknown DOI (%d): %d %r" % (i, st, got[:300]))
    if up.stats()["resolve"] - r0 != 1:
        raise AssertionError("unknown DOI asked of the upstream %d times, not once"
                             % (up.stats()["resolve"] - r0))
    wait_for(lambda: {doi_rec, body_rec} <= set(b.records()), 15, what="B to get read-through records")
    print("read-through: by DOI and by body answered 200 and followed since; an unknown DOI "
          "404 twice, asked of the upstream once; B has them by gossip")

    # 5. a node that follows only A's change feed, over plain HTTP
    t0 = time.time()
    extra = os.path.join(root, "extra.jsonl")
    subprocess.run([args.gen_events, "--records", str(RECORDS + 10), "--per-record", "3", extra],
                   check=True, capture_output=True)
    have = set(numbers)
    with open(extra, "rb") as f:
        lines = [l for l in f.read().splitlines()
                 if l.strip() and json.loads(l)["subject_pith_number"] not in have]
    for r in a.submit(lines):
        if not r.get("ok"):
            raise AssertionError("event into A: %s" % r)
    d = Node(args.pithd, root, "d", extra=["--trust-key", key, "--upstream", base,
                                           "--upstream-refresh", "1"])
    nodes.append(d)
    d.start()
    wait_for(lambda: d.records() == a.records(), 30, what="D to follow A's feed to the same states")
    fd = d.status()["follow"]["upstreams"][0]["feed"]
    if not fd["bundles_fetched"] or not fd["events_fetched"] or fd["diverged"]:
        raise AssertionError("D's feed: %s" % fd)
    print("D followed only A's change feed over HTTP: %d records, identical states, in %.1f s "
          "(%d changes, %d bundles, %d events fetched)"
          % (len(a.records()), time.time() - t0, fd["changes"], fd["bundles_fetched"],
             fd["events_fetched"]))
    # its cursor survives a restart: only what changed since is read
    d.stop()
    newer2 = os.path.join(root, "newer2.jsonl")
    one2 = os.path.join(root, "one2.jsonl")
    target2 = numbers[1]
    with open(one2, "wb") as f:
        f.write(b"\n".join(l for l in open(ev, "rb").read().splitlines()
                           if l.strip() and json.loads(l)["subject_pith_number"] == target2)
                + b"\n")
    subprocess.run([args.gen_bundles, "--built-at", "2026-10-02T00:00:00Z", one2, newer2],
                   check=True, capture_output=True)
    up.control(publish=[newer2])
    with open(newer2, "rb") as f:
        new2 = f.read().rstrip(b"\n")
    wait_for(lambda: http_get("%s/pith/%s/bundle.json" % (base, target2[10:]))[1] == new2, 15,
             what="A to take the second newer bundle")
    d.start()
    wait_for(lambda: d.records() == a.records(), 30, what="D to catch up after its restart")
    fd2 = d.status()["follow"]["upstreams"][0]["feed"]
    if fd2["changes"] > 5:
        raise AssertionError("D read the feed from the start again after a restart: %s" % fd2)
    print("D restarted: read %d change(s) from its saved cursor, identical states again"
          % fd2["changes"])
    d.stop()

    # 6. bad answers, one record each
    # in this order: what backs the upstream off (stall, 500, 429) last
    cases = [("tamper", "rejected", None), ("untrusted", "rejected", "bundle"),
             ("big", "failed", "too_big"), ("loop", "failed", "redirect"),
             ("moved", "stored", None), ("stall", "failed", "timeout"),
             ("500", "failed", "http_5xx"), ("429", "failed", "http_429")]
    # untrusted: the same records signed by another test key
    ev_u = os.path.join(root, "events-u.jsonl")
    bu_u = os.path.join(root, "bundles-u.jsonl")
    subprocess.run([args.gen_events, "--records", str(RECORDS), "--per-record", "2", ev_u],
                   check=True, capture_output=True)
    subprocess.run([args.gen_bundles, "--sign-seed", "2", ev_u, bu_u], check=True,
                   capture_output=True)
    with open(bu_u, "rb") as f:
        write_tree(os.path.join(tree, "untrusted"), f.read().splitlines(), index=False,
                   manifest=False)
    faults = {}
    recs = {}
    for i, (mode, _, _) in enumerate(cases):
        p = numbers[FOLLOWED + 10 + i]
        recs[mode] = p
        faults[p[10:]] = mode
    up.control(path_faults=faults, retry_after=30, stall=5)
    before = upstream_status(a)
    for mode, _, _ in cases:
        r = subprocess.run([args.pithctl, "--node", a.sock, "follow", recs[mode]],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("follow %s: %s" % (recs[mode], r.stderr))
        if mode == "500":
            time.sleep(0.3)  # 429's Retry-After must come after the 500's backoff

    def settled():
        s = upstream_status(a)
        f = s["failed"]
        return (f.get("timeout", 0) >= 1 and f.get("http_429", 0) >= 1 and
                f.get("redirect", 0) >= 1 and
                f.get("http_5xx", 0) >= 1 and f.get("too_big", 0) >= 1 and
                sum(s["rejected"].values()) - sum(before["rejected"].values()) >= 2) and s
    s = wait_for(settled, 30, what="every fault counted")
    wait_for(lambda: recs["moved"] in a.records(), 15, what="the moved bundle to be stored")
    held = set(a.records())
    for mode, what, _ in cases:
        if (recs[mode] in held) != (what == "stored"):
            raise AssertionError("%s: the record was %sstored" % (mode, "" if what != "stored" else "not "))
    if s["rejected"].get("bundle", 0) < 1:
        raise AssertionError("untrusted and tampered not rejected by the bundle check: %s" % s)
    if not 20 <= s["backing_off_seconds"] <= 30:
        raise AssertionError("429's Retry-After 30 not honoured: %s" % s)
    st, _, _ = http_get(base + "/healthz")
    if st != 200:
        raise AssertionError("A stopped serving: /healthz %d" % st)
    m = http_get(base + "/metrics")[1].decode()
    if 'pith_upstream_failed_total{upstream="%s",cause="http_429"}' % up.origin not in m:
        raise AssertionError("metrics lack the upstream's failures")
    print("faults: tampered and untrusted rejected %s, failed %s, backing off %.0f s "
          "(Retry-After 30), nothing stored (a bundle moved by a 301 stored), /healthz 200"
          % (s["rejected"], s["failed"], s["backing_off_seconds"]))
    up.control(path_faults={}, retry_after=None)

    # another CA: TLS fails, counted
    other = os.path.join(root, "other-ca.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", os.path.join(root, "o.key"),
                    "-out", other, "-days", "1", "-subj", "/CN=other"],
                   check=True, capture_output=True)
    c = Node(args.pithd, root, "c", extra=common + [
        "--upstream", up.origin, "--upstream-ca-file", other, "--follow", ids])
    nodes.append(c)
    c.start()
    s = wait_for(lambda: upstream_status(c)["failed"].get("tls") and upstream_status(c), 20,
                 what="C to fail with tls")
    if c.records():
        raise AssertionError("C stored records through a wrong CA")
    print("another CA: %s" % s["last_error"])

    # every node stops cleanly, with no sanitizer report in its log
    for n in nodes:
        if n.alive():
            rc = n.stop()
            if rc != 0:
                raise AssertionError("%s exited %s on SIGTERM" % (n.name, rc))
        with open(n.log_path, errors="replace") as f:
            text = f.read()
        if "Sanitizer" in text or "runtime error:" in text:
            raise AssertionError("%s: sanitizer report in %s" % (n.name, n.log_path))


def main():
    def add(ap):
        ap.add_argument("--gen-bundles", required=True)
    data = {"standins": []}

    def run(args, root, nodes):
        data.update(args=args, root=root, nodes=nodes)
        try:
            body(data)
        finally:
            for s in data["standins"]:
                s.stop()
    return run_test("pith-follow-", run, tools=("pithd", "pithctl", "gen-events"), add_args=add)


if __name__ == "__main__":
    sys.exit(main())
