#!/usr/bin/env python3
"""Runs the conformance corpus against any implementation (README.md here).

    python3 tests/conformance/run.py --impl "COMMAND" [DIR]

For every case file DIR/**/*.json (default: this directory), in name order,
runs `COMMAND FILE` and reads one JSON object from its standard output:
the implementation's answers, in the case's own member names:

- a merge case ("kind": "merge"): {"documents": [{"expect": RULE or
  "accepted", "expect_reason": NAME or "accepted"}, ... one per document],
  "expect_state": the canonical JSON of the state, as a string,
  "expect_state_sha256": its hash};
- a list file (any other kind): {"cases": [{"name": ..., "expect": the
  answer}, ... one per case, in order]}.

The answers are compared with the file's: a document's rule and refusal
name, the state byte for byte (R-COMPARE), a list case's answer as
canonical JSON. Prints one line per failing case and a summary; exits 0
only when every case passes. pith-mirror's own answers come from
`pithctl conformance --answer FILE` (the default COMMAND when --pithctl is
given). Python 3 standard library only.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys


def canon(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def case_files(root):
    for d, subdirs, files in os.walk(root):
        subdirs.sort()
        for f in sorted(files):
            if f.endswith(".json"):
                yield os.path.join(d, f)


def check_file(path, impl):
    """(cases, failures) of one file, printing each failure"""
    with open(path, encoding="utf-8") as f:
        case = json.load(f)
    r = subprocess.run(impl + [path], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ans = json.loads(r.stdout)
    except ValueError:
        print("FAIL %s: the implementation printed no JSON (exit %d): %s" %
              (path, r.returncode, r.stderr.decode(errors="replace").strip()[:300]))
        return (1 if case.get("kind") == "merge" else len(case.get("cases", []))), 1
    if case.get("kind") == "merge":
        name = case.get("name", path)
        want_docs, got_docs = case["documents"], ans.get("documents", [])
        for i, doc in enumerate(want_docs):
            got = got_docs[i] if i < len(got_docs) else {}
            for member in ("expect", "expect_reason"):
                if got.get(member) != doc[member]:
                    print("FAIL %s: %s: documents[%d].%s is %s, expected %s" %
                          (path, name, i, member, got.get(member), doc[member]))
                    return 1, 1
        if ans.get("expect_state") != case["expect_state"]:
            print("FAIL %s: %s: the state's bytes differ (expected state_sha256 %s, got %s)" %
                  (path, name, case["expect_state_sha256"], ans.get("expect_state_sha256")))
            return 1, 1
        return 1, 0
    failures = 0
    got = {c.get("name"): c for c in ans.get("cases", [])}
    for i, c in enumerate(case["cases"]):
        mine = ans["cases"][i] if i < len(ans.get("cases", [])) else got.get(c["name"], {})
        if "expect" not in mine or canon(mine["expect"]) != canon(c["expect"]):
            print("FAIL %s: %s: got %s, expected %s" %
                  (path, c["name"], canon(mine.get("expect"))[:200], canon(c["expect"])[:200]))
            failures += 1
    return len(case["cases"]), failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", help="the command answering one case file, run as COMMAND FILE")
    ap.add_argument("--pithctl", help="shorthand for --impl 'PITHCTL conformance --answer'")
    ap.add_argument("dir", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    a = ap.parse_args()
    if a.pithctl:
        impl = [a.pithctl, "conformance", "--answer"]
    elif a.impl:
        impl = shlex.split(a.impl)
    else:
        sys.exit("run.py: give --impl COMMAND (or --pithctl PATH)")
    files = cases = failures = 0
    for path in case_files(a.dir):
        n, f = check_file(path, impl)
        files += 1
        cases += n
        failures += f
    print("conformance: %d case(s) in %d file(s): %d passed, %d failed" %
          (cases, files, cases - failures, failures))
    sys.exit(1 if failures or cases == 0 else 0)


if __name__ == "__main__":
    main()
