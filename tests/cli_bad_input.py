#!/usr/bin/env python3
"""Bad input to `pithctl import`: every kind of bad line is rejected with its
reason and its FILE:LINE, the rest of the file is still imported, and nothing
of a rejected item is stored (the audit passes and only good events are in
the store).

usage: cli_bad_input.py PITHCTL GEN_EVENTS DATADIR
"""
import copy
import hashlib
import json
import os
import subprocess
import sys
import tempfile

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

PITHCTL, GEN, DATA = sys.argv[1], sys.argv[2], sys.argv[3]
n = 0


def ok(msg):
    global n
    n += 1
    print(f"ok {n} - {msg}")


def fail(msg):
    global n
    n += 1
    print(f"not ok {n} - {msg}")
    sys.exit(1)


def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pithctl(*args, stdin=None):
    return subprocess.run([PITHCTL, *args], input=stdin, capture_output=True, text=True)


def sign(ev, keyfile):
    """Signs an event dict with a key file's secret, in Python."""
    k = json.load(open(keyfile))
    sk = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(k["secret_seed_hex"]))
    fp = hashlib.sha256(bytes.fromhex(k["public_key_hex"])).hexdigest()[:32]
    ev = dict(ev)
    for f in ("signature", "content_sha256", "event_id"):
        ev.pop(f, None)
    ev["signer"] = {"signer_id": k["key_id"], "signer_type": "operator",
                    "key_id": k["key_id"], "public_key_fingerprint": fp}
    digest = hashlib.sha256(canon(ev).encode()).digest()
    import base64
    ev["signature"] = {"algorithm": "ed25519", "key_id": k["key_id"],
                       "public_key_fingerprint": fp,
                       "signature_b64": base64.b64encode(sk.sign(digest)).decode(),
                       "signed_message": "open_graph_event_sha256_bytes",
                       "signed_at": "2026-11-01T00:00:00.000000Z",
                       "signature_status": "signed_v1"}
    ev["content_sha256"] = digest.hex()
    ev["event_id"] = "sha256:" + digest.hex()
    return ev


with tempfile.TemporaryDirectory() as t:
    store = os.path.join(t, "store")
    gen_key = os.path.join(t, "gen.json")
    good_file = os.path.join(t, "good.jsonl")
    r = subprocess.run([GEN, "--records", "20", "--per-record", "5", "--key-out", gen_key, good_file])
    if r.returncode:
        fail("gen_events runs")
    good = [json.loads(l) for l in open(good_file)]

    keys = {}
    for name in ("trusted", "untrusted", "rotated"):
        keys[name] = os.path.join(t, name + ".json")
        r = pithctl("keygen", "--key-id", name, keys[name])
        if r.returncode:
            fail(f"pithctl keygen {name}: {r.stderr}")
    # the rotated key: its file says it rotated in 2020, before any signature
    k = json.load(open(keys["rotated"]))
    k["rotates_at"] = "2020-01-01T00:00:00Z"
    json.dump(k, open(keys["rotated"], "w"))

    subject = good[0]["subject_pith_number"]
    base = {"event_type": "mirror_hint", "subject_pith_number": subject,
            "target": "https://m.example/pith/x", "payload": {"region": "eu"},
            "created_at": "2026-10-01T00:00:00Z", "supersedes": [], "prev_event": None,
            "schema_version": "1.0"}
    lines = []      # (text, reason or None)

    def add_good(ev):
        lines.append((canon(ev), None))

    for ev in good[:30]:
        add_good(ev)
    # wrong hash: a payload changed after signing
    bad = copy.deepcopy(good[31])
    bad["payload"]["tampered"] = True
    lines.append((canon(bad), "content_sha256"))
    add_good(good[32])
    # wrong event_id
    bad = copy.deepcopy(good[33])
    bad["event_id"] = bad["event_id"][:-1] + ("0" if bad["event_id"][-1] != "0" else "1")
    lines.append((canon(bad), "event_id"))
    # wrong signature: another event's
    bad = copy.deepcopy(good[34])
    bad["signature"]["signature_b64"] = good[35]["signature"]["signature_b64"]
    lines.append((canon(bad), "signature"))
    lines.append(("", None))  # blank lines are skipped
    lines.append(("this is not JSON at all", "json"))
    lines.append(('{"event_type": "x", "payload": {}}', "shape"))
    # untrusted and rotated keys, signed by pithctl sign
    for name, reason in (("untrusted", "key"), ("rotated", "rotated_key")):
        r = pithctl("sign", "--key", keys[name], stdin=canon(dict(base, target="https://" + name)))
        if r.returncode:
            fail(f"pithctl sign with the {name} key: {r.stderr}")
        lines.append((r.stdout.strip(), reason))
    # a good event signed by a trusted operator key
    r = pithctl("sign", "--key", keys["trusted"], stdin=canon(base))
    trusted_ev = json.loads(r.stdout)
    add_good(trusted_ev)
    # oversized: a valid signature over an event of more than 1 MiB
    big = sign(dict(base, payload={"blob": "x" * (1 << 20)}), keys["trusted"])
    lines.append((canon(big), "too_big"))
    for ev in good[36:99]:
        add_good(ev)
    # truncated last line, no newline: a JSON fault like any other
    # (docs/merge.md, "Names of refusals": only the byte bound is too_big)
    last = canon(good[99])
    lines.append((last[: len(last) // 2], "json"))

    path = os.path.join(t, "mixed.jsonl")
    with open(path, "w") as f:
        f.write("\n".join(text for text, _ in lines))
    want_reasons = {}
    for text, reason in lines:
        if reason:
            want_reasons[reason] = want_reasons.get(reason, 0) + 1
    want_good = [json.loads(text) for text, reason in lines if text and not reason]
    rejected_ids = set()
    for text, reason in lines:
        try:
            rejected_ids.add(json.loads(text)["event_id"]) if reason else None
        except Exception:
            pass

    trust = ["--trust-key", gen_key, "--trust-key", keys["trusted"], "--trust-key", keys["rotated"]]
    r = pithctl("--store", store, *trust, "import", "--json", path)
    if not r.stdout.startswith("{"):
        fail(f"import prints a JSON summary (exit {r.returncode}): {r.stderr[-3000:]}")
    if r.returncode != 1:
        fail(f"import of a file with bad lines exits 1 (got {r.returncode}): {r.stderr}")
    summary = json.loads(r.stdout)
    if summary["stored"] != len(want_good) or summary["rejected"] != sum(want_reasons.values()):
        fail(f"stored {len(want_good)}, rejected {sum(want_reasons.values())}: {summary}")
    ok(f"stores the {len(want_good)} good lines and rejects the {sum(want_reasons.values())} bad ones")
    if summary["reasons"] != want_reasons:
        fail(f"reasons counted {summary['reasons']}, expected {want_reasons}")
    ok("counts each rejection under its reason: " + ", ".join(sorted(want_reasons)))

    err_lines = [l for l in r.stderr.splitlines() if "rejected" in l]
    for lineno, (text, reason) in enumerate(lines, 1):
        if not reason:
            continue
        tag = f"{path}:{lineno}: rejected ({reason})"
        if not any(l.startswith("pithctl import: " + tag) for l in err_lines):
            fail(f"stderr names {tag}; got:\n" + "\n".join(err_lines))
    if len(err_lines) != sum(want_reasons.values()):
        fail("one stderr line per rejected line")
    ok("reports each rejected line on stderr as FILE:LINE with its reason")

    r = pithctl("--store", store, *trust, "export")
    stored_ids = {json.loads(l)["event_id"] for l in r.stdout.splitlines()}
    if stored_ids != {e["event_id"] for e in want_good}:
        fail("the store holds exactly the good events")
    for eid in rejected_ids - {e["event_id"] for e in want_good}:
        if pithctl("--store", store, "event", eid).returncode == 0:
            fail(f"rejected event {eid} is not stored")
    r = pithctl("--store", store, *trust, "check")
    if r.returncode:
        fail("check passes after the import: " + r.stdout + r.stderr)
    ok("nothing of a rejected line is stored; the audit passes")

    r = pithctl("--store", store, *trust, "import", "--json", path)
    s2 = json.loads(r.stdout)
    if s2["stored"] != 0 or s2["duplicate"] != len(want_good) or s2["reasons"] != want_reasons:
        fail(f"a second import: 0 stored, all duplicates, same rejections: {s2}")
    ok("importing the same file again stores nothing new")

    # a bundle with one tampered event: none of it is stored
    b = json.load(open(os.path.join(DATA, "bundle-AR7B3DEV.json")))
    b["events"][1]["payload"]["verdict_id"] = "tampered"
    bad_bundle = os.path.join(t, "bad_bundle.json")
    json.dump(b, open(bad_bundle, "w"), indent=1)   # pretty-printed: one document
    truncated = os.path.join(t, "truncated_bundle.json")
    text = json.dumps(json.load(open(os.path.join(DATA, "bundle-AR7B3DEV.json"))), indent=1)
    open(truncated, "w").write(text[: len(text) // 2])
    r = pithctl("--store", store, *trust, "import", "--json", bad_bundle, truncated)
    s3 = json.loads(r.stdout)
    # the truncated file is not one document as a whole, so its lines are
    # items (docs/merge.md, D-ITEM), each refused: as json, or as shape
    # for a line such as "{}" that is a document by itself
    nlines = sum(1 for l in text[: len(text) // 2].split("\n") if l.strip())
    rest = dict(s3["reasons"])
    if r.returncode != 1 or s3["stored"] != 0 or rest.pop("bundle_hash", 0) != 1 or \
            sum(rest.values()) != nlines or not set(rest) <= {"json", "shape"}:
        fail(f"a tampered bundle and a truncated one are rejected: {s3} {r.stderr}")
    if f"{bad_bundle}:1: rejected (bundle_hash)" not in r.stderr or "events[1]" not in r.stderr:
        fail("the tampered bundle's rejection names the failing check: " + r.stderr)
    for ev in b["events"]:
        if pithctl("--store", store, "event", ev["event_id"]).returncode == 0:
            fail("no event of a rejected bundle is stored, not even its valid one")
    if pithctl("--store", store, "resolve", "arxiv:2401.14489").returncode == 0:
        fail("the rejected bundle's aliases are not stored")
    ok("a bundle with one bad event is rejected whole (bundle_hash: its hash is the first rule it breaks); a truncated one is JSON Lines, each line 'json'")

    r = pithctl("--store", store, *trust, "import", os.path.join(t, "no-such-file"))
    if r.returncode == 0 or "no-such-file" not in r.stderr:
        fail("a missing file fails with its name")
    ok("a missing file is an error naming it")
    print(f"1..{n}")
