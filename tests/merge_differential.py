#!/usr/bin/env python3
"""The merge's differential test (issue 54, docs/merge.md "Properties").

For each seed, gen_hostile writes hostile records (many keys, one public
key trusted under two key ids and two roles, one (key, key id) with two
roles and with two rotation times, rotated and untrusted keys, bundles and
events mixed, documents refused by every rule) and the trusted key files.
The same documents are imported into fresh stores under several
configurations: documents in another order, --trust-key files in another
order, split into several files, imported by one run or by several, on one
validating thread or many. Every store must hold the same records with the
same state bytes (`pithctl records --json`: state_sha256 of every record;
`pithctl state`: the bytes of a sample), and every import must count the
same refusals under the same names.

    merge_differential.py --pithctl P --gen G [--records N] [--seeds 1,2,3]

The suite runs 120 records on two seeds (40 under ASan); `--records 1000 --seeds 1,2,3` on
demand (the figures are in docs/merge.md).
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

NAMES = {"json", "too_big", "shape", "content_sha256", "event_id", "key", "rotated_key",
         "signature", "bundle_type", "bundle_built_at", "bundle_record", "bundle_aliases",
         "bundle_hash", "bundle_signature", "bundle_events", "bundle_state"}


# under the sanitizers an error must not pass for an import's exit status 1
ENV = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":exitcode=86")


def run(cmd, ok=(0,)):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    if b"Sanitizer" in r.stderr or b"runtime error:" in r.stderr:
        sys.exit("FAIL: %s: %s" % (" ".join(cmd[:6]), r.stderr.decode(errors="replace")[-3000:]))
    if r.returncode not in ok:
        sys.exit("FAIL: %s exited %d: %s" % (" ".join(cmd[:6]), r.returncode,
                                              r.stderr.decode(errors="replace")[-2000:]))
    return r


def split(lines, parts, rnd):
    """lines cut into parts contiguous pieces at random places"""
    cuts = sorted(rnd.sample(range(1, len(lines)), parts - 1)) if parts > 1 else []
    out, at = [], 0
    for c in cuts + [len(lines)]:
        out.append(lines[at:c])
        at = c
    return out


def import_config(pithctl, root, name, lines, keys, parts, runs, threads, rnd):
    store = os.path.join(root, "store-" + name)
    files = []
    for i, piece in enumerate(split(lines, parts, rnd)):
        path = os.path.join(root, "%s-%d.jsonl" % (name, i))
        with open(path, "wb") as f:
            f.write(b"".join(l + b"\n" for l in piece))
        files.append(path)
    trust = []
    for k in keys:
        trust += ["--trust-key", k]
    reasons, rejected, accepted = {}, 0, 0
    t0 = time.time()
    groups = [files] if runs == 1 else [files[i::runs] for i in range(runs)]
    for group in groups:
        r = run([pithctl, "--store", store] + trust +
                ["import", "--json", "--no-progress", "--no-wal", "--threads", str(threads)] + group, ok=(0, 1))
        s = json.loads(r.stdout)
        rejected += s["rejected"]
        accepted += s["stored"] + s["duplicate"] + s["resigned"]
        for k, v in s["reasons"].items():
            reasons[k] = reasons.get(k, 0) + v
    secs = time.time() - t0
    r = run([pithctl, "--store", store, "records", "--json"])
    states = {}
    for o in json.loads(r.stdout):  # one array (pithctl --json: every list)
        states[o["pith_number"]] = o["state_sha256"]
    return store, states, reasons, rejected, accepted, secs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    failed = 0
    for seed in [int(s) for s in a.seeds.split(",")]:
        root = tempfile.mkdtemp(prefix="merge_diff.")
        run([a.gen, root, str(a.records), str(seed)])
        keys = sorted(os.path.join(root, "keys", k) for k in os.listdir(os.path.join(root, "keys")))
        with open(os.path.join(root, "docs.jsonl"), "rb") as f:
            lines = [l for l in f.read().split(b"\n") if l]
        rnd = random.Random(seed)
        shuffled = lines[:]
        rnd.shuffle(shuffled)
        shuffled2 = lines[:]
        rnd.shuffle(shuffled2)
        keys_shuffled = keys[:]
        rnd.shuffle(keys_shuffled)
        # name, documents, trust files, files, import runs, threads
        configs = [
            ("as-generated", lines, keys, 1, 1, 1),
            ("reversed", lines[::-1], keys[::-1], 3, 1, 2),
            ("shuffled", shuffled, keys_shuffled, 7, 1, 2),
            ("shuffled-runs", shuffled2, keys[1:] + keys[:1], 4, 4, 1),
            ("reversed-runs", lines[::-1], keys_shuffled[::-1], 2, 2, 2),
        ]
        first = None
        for name, docs, trust, parts, runs, threads in configs:
            store, states, reasons, rejected, accepted, secs = import_config(
                a.pithctl, root, name, docs, trust, parts, runs, threads, rnd)
            print("seed %d %-14s %d documents in %d file(s), %d run(s), %d thread(s): %d records, "
                  "%d accepted, %d rejected, %.2f s" % (seed, name, len(docs), parts, runs, threads,
                                                         len(states), accepted, rejected, secs))
            if first is None:
                first = (name, store, states, reasons, rejected)
                missing = NAMES - set(reasons)
                if a.records >= 100 and missing:
                    print("FAIL seed %d: no document refused as %s" % (seed, ", ".join(sorted(missing))))
                    failed += 1
                continue
            fname, fstore, fstates, freasons, frejected = first
            if states != fstates:
                diff = [p for p in set(states) | set(fstates) if states.get(p) != fstates.get(p)]
                print("FAIL seed %d: %s and %s differ in %d record(s), e.g. %s" %
                      (seed, fname, name, len(diff), sorted(diff)[:3]))
                failed += 1
            if reasons != freasons or rejected != frejected:
                print("FAIL seed %d: %s counts %s, %s counts %s" % (seed, fname, freasons, name, reasons))
                failed += 1
            # the bytes of a sample, beyond their hashes
            for p in sorted(fstates)[:: max(1, len(fstates) // 5)]:
                x = run([a.pithctl, "--store", fstore, "state", p]).stdout
                y = run([a.pithctl, "--store", store, "state", p]).stdout
                if x != y:
                    print("FAIL seed %d: %s: state bytes differ between %s and %s" % (seed, p, fname, name))
                    failed += 1
        print("seed %d: refusals %s" % (seed, json.dumps(first[3], sort_keys=True)))
        if a.keep:
            print("kept", root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    if failed:
        sys.exit("merge_differential: %d failure(s)" % failed)
    print("merge_differential: every configuration gave the same states")


if __name__ == "__main__":
    main()
