"""A small mirror for the HTTP journeys (wget_mirror, cors, openmetrics):
pithd with HTTP on a free port, holding generated records and the
registry's sample bundle, as a person's node would after a sync."""
import os
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, TESTS)
from pithtest import Node, make_events, run_test, wait_for  # noqa: E402,F401

SAMPLE = "AR7B3DEVMOTSBRCCVXUCLYSRRE"


def mirror_node(args, root, nodes, records=40, per_record=2, hold_back=0, extra=()):
    """Starts the node, loads it, returns (node, base URL, bodies of every
    record it holds). hold_back: the last events generated are not
    submitted; node.held_back is (the body of their record, their lines).
    extra: more pithd flags."""
    import json
    key, lines = make_events(args.gen_events, root, records, per_record)
    held = lines[len(lines) - hold_back:] if hold_back else []
    lines = lines[:len(lines) - hold_back]
    n = Node(args.pithd, root, "mirror",
             extra=["--trust-key", key, "--http", "127.0.0.1:0"] + list(extra))
    nodes.append(n.start())
    bad = [x for x in n.submit(lines) if not x.get("ok")]
    assert not bad, "events refused: %s" % bad[:3]
    with open(os.path.join(TESTS, "data", "bundle-AR7B3DEV.json"), "rb") as f:
        r = n.submit([f.read().replace(b"\n", b"")], kind="bundle")
    assert r[0].get("ok"), r
    n.held_back = None
    if held:
        n.held_back = (json.loads(held[-1])["subject_pith_number"][-26:], held)
    base = "http://" + n.status()["http"]
    bodies = sorted(p[-26:] for p in n.records())
    assert SAMPLE in bodies and len(bodies) == records + 1, len(bodies)
    return n, base, bodies


def request(url, method="GET", headers=None, data=None, timeout=10):
    """(status, {lower-case header: value}, body) of one request; errors too."""
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def metric(base, name, labels=""):
    """The sum of a /metrics sample's values over the series whose labels
    hold the given text."""
    _, _, text = request(base + "/metrics")
    total = 0.0
    for line in text.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if labels in line:
                total += float(line.rsplit(" ", 1)[1])
    return total
