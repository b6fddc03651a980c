#!/usr/bin/env python3
"""Registry vectors through pithctl: pith numbers, receipts, the bundle,
the record view, and single-byte tampering of every signed field.

usage: vectors_test.py PITHCTL DATA_DIR [--mutations N]
"""
import base64
import json
import os
import random
import subprocess
import sys
import tempfile

PITHCTL, DATA = sys.argv[1], sys.argv[2]
MUTATIONS = int(sys.argv[sys.argv.index("--mutations") + 1]) if "--mutations" in sys.argv else 1500
failures = 0
passed = 0


def check(cond, name):
    global failures, passed
    if cond:
        passed += 1
        print("ok -", name)
    else:
        failures += 1
        print("not ok -", name)


def run(args, data=None):
    return subprocess.run([PITHCTL] + args, input=data, capture_output=True)


# 1. pith numbers of every record that carries its canonical record
records = [json.loads(l) for l in open(os.path.join(DATA, "registry_records.jsonl"))]
with_rec = [r for r in records if r.get("canonical_record")]
lines = "".join(json.dumps(r["canonical_record"]) + "\n" for r in with_rec).encode()
out = run(["pith-number", "--lines", "-"], lines)
got = out.stdout.decode().split("\n")
bad = 0
for r, line in zip(with_rec, got):
    pn, h = line.split(" ")
    if pn != r["pith_number"] or (r.get("canonical_sha256") and h != r["canonical_sha256"]):
        bad += 1
        print("  mismatch", r["pith_number"], line)
check(out.returncode == 0 and bad == 0 and len(with_rec) >= 40,
      "pith-number reproduces all %d published records" % len(with_rec))

# 2. receipts shown on the pages verify (Ed25519 over the canonical hash bytes)
reg_fp = "8d4b5ee74e4693bcd1df2446408b0d54"
receipts = [r for r in records if r.get("receipt_signature_b64")]
ok = 0
for r in receipts:
    ev = {"kind": "pith_receipt", "key_id": "pith-v1-2026-05", "algorithm": "ed25519",
          "signature_b64": r["receipt_signature_b64"], "signed_message": "canonical_sha256_bytes",
          "canonical_sha256": r["canonical_sha256"], "public_key_fingerprint": reg_fp}
    res = run(["verify", "-"], json.dumps(ev).encode())
    ok += res.returncode == 0
check(len(receipts) >= 3 and ok == len(receipts), "all %d published receipts verify" % len(receipts))
# and a receipt with one flipped signature bit does not
r = receipts[0]
sig = bytearray(base64.b64decode(r["receipt_signature_b64"]))
sig[5] ^= 1
doc = {"kind": "pith_receipt", "key_id": "pith-v1-2026-05",
       "signature_b64": base64.b64encode(bytes(sig)).decode(),
       "canonical_sha256": r["canonical_sha256"], "public_key_fingerprint": reg_fp}
res = run(["verify", "-"], json.dumps(doc).encode())
check(res.returncode != 0 and b"receipt" in res.stderr, "a tampered receipt is rejected")

# 3. the registry bundle passes every check, with the published state hash
bundle_path = os.path.join(DATA, "bundle-AR7B3DEV.json")
res = run(["verify", bundle_path])
text = res.stdout.decode()
check(res.returncode == 0 and "FAIL" not in text, "the registry bundle verifies")
check("3facdc2aeec0c5e2ff45dd750211a965091b49387ad1b15346dff0bb9a58c999" in
      [l.split()[2] for l in text.splitlines() if l.split()[1] == "state_sha256"],
      "the recomputed state_sha256 is the published 3facdc2a...")
res = run(["verify", os.path.join(DATA, "record-RCCNG3LI.json")])
check(res.returncode == 0, "the registry record view verifies")

# 4. tampering: change one byte of a signed field -> verify fails, naming a check
bundle = json.load(open(bundle_path))
leaves = []


def walk(v, path):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(x, path + [k])
    elif isinstance(v, list):
        for i, x in enumerate(v):
            walk(x, path + [i])
    elif isinstance(v, str) and v:
        leaves.append(path)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        leaves.append(path)


walk(bundle, [])


def unsigned(path):
    # bundle_signature is outside the bundle hash except for what is
    # checked against the trust store; its status/signed_at/format fields
    # and every event signature block's non-key fields are not signed.
    if path[0] == "bundle_signature":
        return path[1] in ("signature_status", "signed_at")
    if path[0] == "events" and len(path) > 2 and path[2] == "signature":
        return False  # covered by the bundle hash anyway
    return False


def get(o, path):
    for p in path:
        o = o[p]
    return o


def put(o, path, v):
    for p in path[:-1]:
        o = o[p]
    o[path[-1]] = v


rng = random.Random(7)
signed = [p for p in leaves if not unsigned(p)]
# every signed field once, then random byte positions up to MUTATIONS
plan = [(p, None) for p in signed]
while len(plan) < MUTATIONS:
    plan.append((rng.choice(signed), rng.random()))
missed = []
named = 0
tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
tmp.close()
for path, where in plan:
    b = json.loads(json.dumps(bundle))
    v = get(b, path)
    if isinstance(v, str):
        i = int((where or 0) * len(v)) % len(v)
        c = v[i]
        alt = "A" if c != "A" else "B"
        if c.isdigit():
            alt = "1" if c != "1" else "2"
        v2 = v[:i] + alt + v[i + 1:]
    elif isinstance(v, int):
        v2 = v + 1
    else:
        v2 = v * 2 + 1
    put(b, path, v2)
    with open(tmp.name, "w") as f:
        json.dump(b, f)
    res = run(["verify", tmp.name])
    if res.returncode == 0:
        missed.append(path)
    elif b"check failed" in res.stderr:
        named += 1
    else:
        print("  unnamed failure:", path, res.stderr[:200])
os.unlink(tmp.name)
for p in missed[:10]:
    print("  tampering not detected:", p)
check(not missed, "%d single-byte changes to signed fields all fail verification" % len(plan))
check(named == len(plan), "every failure names the failing check")

print("%d passed, %d failed" % (passed, failures))
sys.exit(1 if failures else 0)
