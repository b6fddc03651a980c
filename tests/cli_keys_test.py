#!/usr/bin/env python3
"""keygen, sign and verify through pithctl, and the interface contract:
exit status, one-line errors, --help on every command.

usage: cli_keys_test.py PITHCTL
"""
import json
import os
import stat
import subprocess
import sys
import tempfile

PITHCTL = sys.argv[1]
passed = failed = 0


def check(cond, name):
    global passed, failed
    passed += bool(cond)
    failed += not cond
    print(("ok - " if cond else "not ok - ") + name)


def run(args, data=None):
    return subprocess.run([PITHCTL] + args, input=data, capture_output=True)


tmp = tempfile.mkdtemp()
key = os.path.join(tmp, "op.key")
res = run(["keygen", "--key-id", "op-test", key])
lines = res.stdout.decode().split()
check(res.returncode == 0 and len(lines) == 2 and len(lines[0]) == 64 and len(lines[1]) == 32,
      "keygen prints the public key (64 hex) and the fingerprint (32 hex)")
check(stat.S_IMODE(os.stat(key).st_mode) == 0o600, "the key file is owner-only")
check(run(["keygen", key]).returncode != 0, "keygen refuses to overwrite a key file")
kf = json.load(open(key))
check(kf["public_key_hex"] == lines[0] and kf["fingerprint_sha256_hex"] == lines[1],
      "the key file holds the printed key and fingerprint")

ev = {"event_type": "correction", "subject_pith_number": "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE",
      "target": "record", "payload": {"note": "typo in abstract", "n": 1},
      "created_at": "2026-09-01T12:00:00Z"}
res = run(["sign", "--key", key], json.dumps(ev).encode())
check(res.returncode == 0, "sign signs one JSON document")
signed = json.loads(res.stdout)
check(signed["event_id"] == "sha256:" + signed["content_sha256"] and
      signed["signer"]["public_key_fingerprint"] == lines[1] and
      signed["signature"]["key_id"] == "op-test", "the signed event carries id, signer and signature block")
evfile = os.path.join(tmp, "ev.json")
open(evfile, "w").write(json.dumps(signed))

res = run(["--trust-key", key, "verify", evfile])
check(res.returncode == 0 and b"FAIL" not in res.stdout, "verify passes with --trust-key")
res = run(["verify", evfile])
check(res.returncode != 0 and b"key" in res.stderr and len(res.stderr.strip().split(b"\n")) == 1,
      "verify without the key fails naming the key check, in one line")

# JSON Lines in, JSON Lines out
jl = "\n".join(json.dumps(dict(ev, payload={"n": i})) for i in range(5)) + "\n"
res = run(["sign", "--key", key], jl.encode())
outs = [json.loads(l) for l in res.stdout.decode().splitlines()]
check(res.returncode == 0 and len(outs) == 5 and len({o["event_id"] for o in outs}) == 5,
      "sign signs JSON Lines, one event per line")

# an event whose payload uses a bundle's member names is still an event:
# a file's item is a bundle only by its own top-level members
odd = dict(ev, payload={"bundle_type": "pith_open_graph_bundle", "x": {"bundle_signature": 1}})
res = run(["sign", "--key", key], json.dumps(odd).encode())
oddfile = os.path.join(tmp, "odd.json")
open(oddfile, "wb").write(res.stdout)
store = os.path.join(tmp, "store")
res = run(["--store", store, "--trust-key", key, "import", "--json", oddfile])
stats = json.loads(res.stdout or b"{}")
check(res.returncode == 0 and stats.get("stored") == 1 and stats.get("rejected") == 0,
      "an event with \"bundle_type\" in its payload imports as an event")

for field, value in [("payload", {"note": "changed"}), ("created_at", "2026-09-01T12:00:01Z"),
                     ("content_sha256", "0" * 64), ("target", "graph")]:
    t = dict(signed)
    t[field] = value
    open(evfile, "w").write(json.dumps(t))
    res = run(["--trust-key", key, "verify", evfile])
    check(res.returncode != 0 and b"check failed" in res.stderr, "a changed %s fails verification" % field)
t = json.loads(json.dumps(signed))
sig = t["signature"]["signature_b64"]
t["signature"]["signature_b64"] = ("A" if sig[0] != "A" else "B") + sig[1:]
open(evfile, "w").write(json.dumps(t))
res = run(["--trust-key", key, "verify", evfile])
check(res.returncode != 0 and b"signature" in res.stderr, "a changed signature fails the signature check")

# rotation: a key that rotated before the event was signed
rot = dict(kf)
rot["rotates_at"] = "2020-01-01T00:00:00Z"
rotfile = os.path.join(tmp, "rot.key")
open(rotfile, "w").write(json.dumps(rot))
open(evfile, "w").write(json.dumps(signed))
res = run(["--trust-key", rotfile, "verify", evfile])
check(res.returncode != 0 and b"rotated" in res.stderr, "an event signed after its key rotated fails")

# contract: --help everywhere, errors name what and where
res = run(["--help"])
lines = res.stdout.decode().splitlines()
after = lines[lines.index("commands:") + 1:] if "commands:" in lines else lines
cmds = [l.split()[0] for l in after if l.startswith("  ")]
ok = all(run([c, "--help"]).returncode == 0 and run([c, "--help"]).stdout.startswith(b"usage:")
         for c in cmds)
check(res.returncode == 0 and len(cmds) >= 5 and ok, "--help works on every command (%d)" % len(cmds))
res = run(["verify", os.path.join(tmp, "missing.json")])
check(res.returncode != 0 and b"missing.json" in res.stderr, "a missing file is named in the error")
res = run(["canon"], b'{"a":1,}')
check(res.returncode != 0 and b"byte 7" in res.stderr, "a JSON error names the byte offset")
res = run(["no-such-command"])
check(res.returncode != 0, "an unknown command exits non-zero")

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
