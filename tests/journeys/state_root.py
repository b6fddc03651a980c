#!/usr/bin/env python3
"""Journey: an operator checks that mirrors agree (issue 57, the state root).

Three mirrors hold the same 200 records (2 events each); the third also
trusts a second, test-only key and holds one more event of 3 records
signed with it: a different state for exactly those 3. The operator:

- reads `curl /api/root`: a signed root document (its members, its
  ETag), and sees the same root in /pith-mirrors.json;
- runs `pithctl audit A B`: "all 2 mirrors agree", exit 0;
- runs `pithctl audit A B C`: A and B agree, C differs; exactly those 3
  records named, each with both states and the event only C has, each
  confirmed by a proof; exit 1; the requests the descent made are at most
  3 x 2 x log2(N), counted by the audit and by the nodes' own /metrics;
- runs it with --json and reads the same from one JSON document;
- checks a proof by hand (/api/proof/{ID}) and gets a 400 for a bad prefix;
- runs it against a mirror that is down: one line, exit 2.

usage: state_root.py --pithd D --pithctl C --gen-events G [--keep]
"""
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_node import metric, request  # noqa: E402
from http_node import Node, make_events, run_test  # noqa: E402

RECORDS = 200


def audit(args, *urls, extra=()):
    r = subprocess.run([args.pithctl, "audit"] + list(extra) + list(urls),
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def root_requests(bases):
    return sum(metric(b, "pith_http_requests_total", 'route="root"') for b in bases)


def body(args, root, nodes):
    key, lines = make_events(args.gen_events, root, RECORDS, 2)
    # the test-only key: the same first 3 records, one more event each
    extra_dir = os.path.join(root, "other")
    os.makedirs(extra_dir)
    key2 = os.path.join(extra_dir, "testkey2.pub")
    ev2 = os.path.join(extra_dir, "events2.jsonl")
    subprocess.run([args.gen_events, "--records", "3", "--per-record", "2", "--seed", "2",
                    "--key-out", key2, ev2], check=True, stdout=subprocess.DEVNULL)
    odd = [x for x in open(ev2, "rb").read().splitlines()
           if json.loads(x)["event_type"] != "record_created"]
    assert len(odd) == 3, odd
    changed = sorted({json.loads(x)["subject_pith_number"] for x in odd})

    ns = []
    for name, keys in (("a", [key]), ("b", [key]), ("c", [key, key2])):
        extra = ["--http", "127.0.0.1:0"]
        for k in keys:
            extra += ["--trust-key", k]
        n = Node(args.pithd, root, name, extra=extra)
        nodes.append(n.start())
        bad = [x for x in n.submit(lines) if not x.get("ok")]
        assert not bad, bad[:3]
        ns.append(n)
    return ns, changed, odd, key2


def journey(args, root, nodes):
    ns, changed, odd, key2 = body(args, root, nodes)
    a, b, c = ns
    r = c.submit(odd)
    assert all(x.get("ok") for x in r), "the test-only key's events were refused: %s" % r
    bases = ["http://" + n.status()["http"] for n in ns]

    # curl /api/root
    st, hd, raw = request(bases[0] + "/api/root")
    assert st == 200, (st, raw)
    doc = json.loads(raw)
    assert sorted(doc) == ["feed_cursor", "merge_version", "record_count", "root_document_sha256",
                           "root_sha256", "root_type", "root_version", "signature", "signed_at",
                           "signer", "tree_version"], sorted(doc)
    assert doc["root_type"] == "pith_state_root" and doc["record_count"] == RECORDS, doc
    assert doc["tree_version"] == "pith-state-root-v1"
    assert hd.get("etag") == '"%s"' % doc["root_document_sha256"], hd.get("etag")
    assert hd.get("content-type", "").startswith("application/json")
    st, _, raw = request(bases[0] + "/pith-mirrors.json")
    self_entry = [m for m in json.loads(raw)["mirrors"] if m["status"] == "self"][0]
    assert self_entry["state_root"]["root_sha256"] == doc["root_sha256"], self_entry
    assert self_entry["state_root"]["node_key"]["public_key_fingerprint"] == \
        doc["signer"]["public_key_fingerprint"]
    # the odd node's root differs, and counts the same records
    cdoc = json.loads(request(bases[2] + "/api/root")[2])
    assert cdoc["record_count"] == RECORDS and cdoc["root_sha256"] != doc["root_sha256"]

    # two mirrors that agree
    rc, out, err = audit(args, bases[0], bases[1])
    assert rc == 0, (rc, out, err)
    lines = out.splitlines()
    assert lines[-1] == "all 2 mirrors agree", out
    assert lines[0].startswith("A  %s  root %s  %d records  signed " %
                               (bases[0], doc["root_sha256"][:16], RECORDS)), lines[0]
    assert lines[0].endswith("(from its pith-mirrors.json)"), lines[0]

    # three, one of which differs in 3 records
    before = root_requests(bases)
    rc, out, err = audit(args, bases[0], bases[1], bases[2])
    after = root_requests(bases)
    print(out)
    assert rc == 1, (rc, out, err)
    assert err == "", err
    lines = out.splitlines()
    assert lines[3] == "agree: A B" and lines[4] == "differ: C", lines[3:5]
    assert lines[5] == "" and lines[6] == "A and C differ in 3 records:", lines[5:7]
    named = [x.strip() for x in lines if x.startswith("  pith:")]
    assert named == changed, (named, changed)
    odd_ids = sorted(json.loads(x)["event_id"] for x in odd)
    for i, p in enumerate(changed):
        at = lines.index("  " + p)
        a_line, c_line, head, only = lines[at + 1:at + 5]
        assert a_line.startswith("    A state ") and a_line.endswith("  2 events"), a_line
        assert c_line.startswith("    C state ") and c_line.endswith("  3 events"), c_line
        assert a_line[12:28] != c_line[12:28]
        assert head == "    only C has:", head
        assert only.strip() in odd_ids, (only, odd_ids)
    req = [x for x in lines if x.startswith("  requests: ")]
    assert len(req) == 1, lines
    n_range = int(req[0].split()[1])
    bound = 3 * 2 * math.log2(RECORDS)
    assert n_range <= bound, (n_range, bound)
    # the nodes counted the same: the range requests, 6 proofs, 3 /api/root
    assert after - before == n_range + 6 + 3, (after - before, n_range)
    print("# descent: %d range requests for 3 differences in %d records (bound %.1f)" %
          (n_range, RECORDS, bound))

    # the same as JSON
    rc, out, err = audit(args, bases[0], bases[1], bases[2], extra=["--json"])
    assert rc == 1, (rc, err)
    j = json.loads(out)
    assert [m["agrees"] for m in j["mirrors"]] == [True, True, False], j["mirrors"]
    d = j["differences"]
    assert len(d) == 1 and d[0]["mirrors"] == ["A", "C"], d
    assert [x["pith_number"] for x in d[0]["records"]] == changed
    for x in d[0]["records"]:
        assert x["proofs_verified"] is True
        assert x["sides"][0]["lacked_by_other"] == [] and len(x["sides"][1]["lacked_by_other"]) == 1
    assert d[0]["requests"]["range"] <= bound

    # a proof by hand
    st, hd, raw = request(bases[2] + "/api/proof/" + changed[0])
    p = json.loads(raw)
    assert st == 200 and p["proof"]["present"] is True, raw
    assert p["root_document"]["root_sha256"] == p["proof"]["root_sha256"]
    assert "no-store" in hd.get("cache-control", ""), hd
    st, _, raw = request(bases[0] + "/api/root/range?prefix=012")
    assert st == 400 and b"prefix" in raw, (st, raw)

    # a mirror that is down
    c.stop()
    rc, out, err = audit(args, bases[0], bases[2])
    assert rc == 2, (rc, out, err)
    assert len(err.splitlines()) == 1 and err.startswith("pithctl audit: %s/" % bases[2]), err


if __name__ == "__main__":
    sys.exit(run_test("journey_state_root", journey))
