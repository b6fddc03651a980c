#!/usr/bin/env python3
"""Journey (issue 54): an operator trusts one key twice, once as an
operator key and once as a registry key, and lists the key files in two
orders on two machines; both stores show the same states. Then an import
with bad lines names each refusal as docs/merge.md does, and a key file
with an impossible rotates_at stops pithctl with one line naming it.

usage: trust_order.py PITHCTL OUTDIR
"""
import json
import os
import subprocess
import sys
import tempfile

PITHCTL, OUT = sys.argv[1], sys.argv[2]
SUBJECT = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
failed = 0


def check(cond, what):
    global failed
    print(("ok - " if cond else "not ok - ") + what)
    failed += not cond


def ctl(*args, data=None):
    return subprocess.run([PITHCTL] + list(args), input=data, capture_output=True)


tmp = tempfile.mkdtemp(prefix="trust_order.", dir=OUT)
alice, bob = os.path.join(tmp, "alice.key"), os.path.join(tmp, "bob.key")
for path, kid in ((alice, "alice"), (bob, "bob")):
    r = ctl("keygen", "--key-id", kid, path)
    assert r.returncode == 0, r.stderr
# bob's public key trusted twice: as the operator "bob" and as the registry
# key "bob-registry" (a test mesh's registry)
kb = json.load(open(bob))
pub = {k: kb[k] for k in ("public_key_hex",)}
bob_op = os.path.join(tmp, "bob-operator.json")
bob_reg = os.path.join(tmp, "bob-registry.json")
json.dump(dict(pub, key_id="bob"), open(bob_op, "w"))
json.dump(dict(pub, key_id="bob-registry", role="registry"), open(bob_reg, "w"))
alice_pub = os.path.join(tmp, "alice-public.json")
json.dump({"key_id": "alice", "public_key_hex": json.load(open(alice))["public_key_hex"]},
          open(alice_pub, "w"))

# alice writes a correction; bob, signing as the operator "bob", supersedes it
a = json.loads(ctl("sign", "--key", alice, data=json.dumps({
    "event_type": "correction", "subject_pith_number": SUBJECT, "target": "record",
    "payload": {"note": "typo"}, "created_at": "2026-09-01T12:00:00Z"}).encode()).stdout)
b = json.loads(ctl("sign", "--key", bob, data=json.dumps({
    "event_type": "correction", "subject_pith_number": SUBJECT, "target": "record",
    "payload": {"note": "no typo"}, "created_at": "2026-09-02T12:00:00Z",
    "supersedes": [a["event_id"]]}).encode()).stdout)
events = os.path.join(tmp, "events.jsonl")
open(events, "w").write(json.dumps(a) + "\n" + json.dumps(b) + "\n")

states, listings = [], []
for name, order in (("one", [alice_pub, bob_op, bob_reg]), ("two", [bob_reg, bob_op, alice_pub])):
    store = os.path.join(tmp, "store-" + name)
    trust = sum((["--trust-key", k] for k in order), [])
    r = ctl("--store", store, *trust, "import", "--no-progress", events)
    check(r.returncode == 0, "machine %s imports both events (--trust-key in its order)" % name)
    states.append(ctl("--store", store, "state", SUBJECT).stdout)
    listings.append(ctl("--store", store, "records").stdout)
st = json.loads(states[0])
check(states[0] == states[1] and listings[0] == listings[1],
      "both machines show the same state bytes and the same records listing")
check(st.get("superseded_event_ids") == [a["event_id"]],
      "on both, bob's event supersedes alice's: his key is a registry key, whichever file came first")

# bad lines: each counted under docs/merge.md's name
bad = os.path.join(tmp, "bad.jsonl")
tampered = dict(a, target="elsewhere")
cut = json.dumps(b)[:40]
open(bad, "w").write(json.dumps(tampered) + "\n" + cut + "\n")
r = ctl("--store", os.path.join(tmp, "store-one"), "--trust-key", alice_pub, "import",
        "--json", "--no-progress", bad)
s = json.loads(r.stdout)
check(r.returncode == 1 and s["reasons"] == {"content_sha256": 1, "json": 1},
      "import --json names the refusals content_sha256 and json (a cut line): %s" % s["reasons"])
check("%s:1: rejected (content_sha256)" % bad in r.stderr.decode(),
      "stderr says FILE:LINE and the reason")

# a key file whose rotates_at is no date: refused at start, in one line
wrong = os.path.join(tmp, "bob-rotating.json")
json.dump(dict(pub, key_id="bob", rotates_at="2026-02-30T00:00:00Z"), open(wrong, "w"))
r = ctl("--store", os.path.join(tmp, "store-one"), "--trust-key", wrong, "import", "--no-progress", events)
err = r.stderr.decode().strip()
check(r.returncode != 0 and len(err.splitlines()) == 1 and wrong in err and "rotates_at" in err,
      "a key file with rotates_at 2026-02-30 stops pithctl with one line naming it: " + err)
sys.exit(1 if failed else 0)
