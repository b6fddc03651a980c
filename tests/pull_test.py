#!/usr/bin/env python3
"""`pithctl pull` against the registry stand-in over HTTPS (issue 14, item 1).

usage: pull_test.py --pithctl P --gen-events G --gen-bundles B --data D [--records N]

1. N generated records (bundles signed by a test registry key) and the real
   sample bundle are laid out as the registry does; the stand-in serves them
   over HTTPS with a CA this test makes.
2. A pull by arXiv id (a few by DOI URL, short and full pith number) fills a
   fresh store whose records and states equal an import of the same bundles
   from files.
3. A second pull: every record unchanged through 304s, no bundle sent again.
4. A resolve API that answers with 302 redirects works as well.
5. Failures, each into a fresh store with nothing stored: a tampered bundle
   is rejected, another record's bundle at the URL is rejected (named by
   number or by bare body), a 500 fails with its status, a body over 16 MiB fails, an
   unknown id is not found, another CA's file fails with the TLS error, an upstream
   that stalls mid-body fails after --stall-timeout with a timeout.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import ssl

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Standin:
    def __init__(self, root, tls_dir, fault=None):
        port_file = os.path.join(tls_dir, "port")
        cmd = [sys.executable, os.path.join(HERE, "upstream_standin.py"), "--root", root,
               "--tls-dir", tls_dir, "--port-file", port_file]
        if fault == "redirect":
            cmd += ["--redirect"]
        elif fault:
            cmd += ["--fault", fault]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        t0 = time.time()
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.time() - t0 > 20:
                fail("stand-in did not start")
            time.sleep(0.05)
        with open(port_file) as f:
            self.origin = "https://127.0.0.1:%d" % int(f.read())
        self.ca = os.path.join(tls_dir, "ca.pem")

    def stats(self):
        ctx = ssl.create_default_context(cafile=self.ca)
        with urllib.request.urlopen(self.origin + "/_stats", context=ctx, timeout=10) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def run(args, cmd, timeout=120):
    r = subprocess.run([args.pithctl] + cmd, capture_output=True, text=True, timeout=timeout)
    # under the sanitizers an error report may exit 1, which some cases expect
    if "Sanitizer" in r.stderr or "runtime error:" in r.stderr:
        fail("pithctl %s: sanitizer report:\n%s" % (" ".join(cmd), r.stderr[-4000:]))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--gen-events", required=True)
    ap.add_argument("--gen-bundles", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--records", type=int, default=200)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="pith-pull-")
    standins = []
    try:
        t0 = time.time()
        key = os.path.join(tmp, "key.json")
        ev = os.path.join(tmp, "events.jsonl")
        bu = os.path.join(tmp, "bundles.jsonl")
        subprocess.run([args.gen_events, "--records", str(args.records), "--per-record", "2",
                        "--key-out", key, ev], check=True, capture_output=True)
        subprocess.run([args.gen_bundles, ev, bu], check=True, capture_output=True)
        sample = os.path.join(args.data, "bundle-AR7B3DEV.json")
        bundles = []
        with open(bu, "rb") as f:
            bundles = [l.rstrip(b"\n") for l in f if l.strip()]
        with open(sample, "rb") as f:
            bundles.append(f.read())
        # the registry's layout
        root = os.path.join(tmp, "root")
        index = {"arxiv": {}, "doi": {}}
        numbers = []
        for data in bundles:
            b = json.loads(data)
            p = b["pith_number"]
            numbers.append(p)
            d = os.path.join(root, "pith", p[10:])
            os.makedirs(d)
            with open(os.path.join(d, "bundle.json"), "wb") as f:
                f.write(data)
            for a in b["source_aliases"]:
                if a["alias_kind"] in ("arxiv", "doi"):
                    index[a["alias_kind"]][a["alias_value"]] = p
        with open(os.path.join(root, "index.json"), "w") as f:
            json.dump(index, f)
        with open(os.path.join(root, "pith-mirrors.json"), "w") as f:
            json.dump({"manifest_type": "pith_mirror_manifest", "manifest_version": "1.0",
                       "mirrors": [{"name": "stand-in", "mirror_type": "https",
                                    "base_url": "@ORIGIN@",
                                    "bundle_pattern": "@ORIGIN@/pith/{suffix}/bundle.json"}]}, f)
        # IDs as users have them
        by_arxiv = {v: k for k, v in index["arxiv"].items()}
        by_doi = {v: k for k, v in index["doi"].items()}
        ids = ["# ids for the pull test", ""]
        for i, p in enumerate(numbers):
            if i < 3:
                ids.append("https://doi.org/" + by_doi[p])
            elif i < 6:
                ids.append("pith:" + p[10:18])
            elif i < 8:
                ids.append(p)
            elif i % 2:
                ids.append("arXiv:" + by_arxiv[p] + "v1   # with a version")
            else:
                ids.append(by_arxiv[p])
        ids_file = os.path.join(tmp, "ids.txt")
        with open(ids_file, "w") as f:
            f.write("\n".join(ids) + "\n")
        n = len(numbers)

        up = Standin(root, os.path.join(tmp, "tls"))
        standins.append(up)
        store = os.path.join(tmp, "pulled")
        base = ["--store", store, "--trust-key", key]
        r = run(args, base + ["pull", "--from", up.origin, "--ca-file", up.ca, "--ids", ids_file,
                              "--json"])
        if r.returncode != 0:
            fail("first pull: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr[-3000:]))
        s = json.loads(r.stdout)
        if s["stored"] != n or s["unchanged"] or s["failed"] or s["rejected"] or s["not_found"]:
            fail("first pull: %s" % r.stdout)
        print("first pull: %d records stored in %.2f s" % (n, s["seconds"]))

        # the same bundles imported from files
        ref = os.path.join(tmp, "imported")
        r = run(args, ["--store", ref, "--trust-key", key, "import", bu, sample])
        if r.returncode != 0:
            fail("import: %s%s" % (r.stdout, r.stderr))
        a = run(args, base + ["records"]).stdout
        b = run(args, ["--store", ref, "--trust-key", key, "records"]).stdout
        if a != b or len(a.splitlines()) != n:
            fail("records differ between pull and import:\n%s\n---\n%s" % (a[:2000], b[:2000]))
        for p in (numbers[0], numbers[-1]):
            sa = run(args, base + ["state", p]).stdout
            sb = run(args, ["--store", ref, "--trust-key", key, "state", p]).stdout
            if sa != sb or not sa:
                fail("state of %s differs" % p)
        print("records and states equal those of an import")

        # again: conditional requests only
        before = up.stats()
        r = run(args, base + ["pull", "--from", up.origin, "--ca-file", up.ca, "--ids", ids_file,
                              "--json"])
        after = up.stats()
        if r.returncode != 0:
            fail("second pull: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr[-3000:]))
        s = json.loads(r.stdout)
        if s["unchanged"] != n or s["stored"] or s["not_modified"] != n:
            fail("second pull: %s" % r.stdout)
        if after["full"] != before["full"]:
            fail("second pull downloaded %d bundles" % (after["full"] - before["full"]))
        if after["not_modified"] - before["not_modified"] != n:
            fail("second pull: %d 304s, expected %d" % (after["not_modified"] - before["not_modified"], n))
        print("second pull: %d unchanged through 304, no bundle sent" % n)

        # failures, each into a fresh store
        def pull_one(name, origin, ca, ids, expect_rc=1, extra=()):
            st = os.path.join(tmp, "st-" + name)
            r = run(args, ["--store", st, "--trust-key", key, "pull", "--from", origin,
                           "--ca-file", ca, "--json"] + list(extra) + ids)
            if r.returncode != expect_rc:
                fail("%s: exit %d, expected %d\n%s%s" % (name, r.returncode, expect_rc, r.stdout,
                                                        r.stderr))
            recs = run(args, ["--store", st, "--trust-key", key, "records"]).stdout
            return json.loads(r.stdout), r.stderr, recs

        s, err, recs = pull_one("unknown", up.origin, up.ca, ["arXiv:9999.99999", numbers[0]])
        if s["not_found"] != 1 or s["stored"] != 1 or "9999.99999: not found" not in err:
            fail("unknown id: %s %s" % (s, err))
        print("unknown id: not found, exit 1")

        faults = {}
        for fault in ("redirect", "tamper", "500", "big", "swap", "stall"):
            faults[fault] = Standin(root, os.path.join(tmp, "tls-" + fault), fault)
            standins.append(faults[fault])
        ids = ["https://doi.org/" + by_doi[numbers[20]], "arXiv:" + by_arxiv[numbers[21]],
               "pith:" + numbers[22][10:22]]
        s, err, recs = pull_one("redirect", faults["redirect"].origin, faults["redirect"].ca, ids, 0)
        if s["stored"] != 3 or len(recs.splitlines()) != 3:
            fail("resolve by 302: %s %s" % (s, err))
        print("resolve answered by 302 redirects: 3 stored")
        s, err, recs = pull_one("tamper", faults["tamper"].origin, faults["tamper"].ca, [numbers[1]])
        if s["rejected"] != 1 or recs.strip() or "rejected (" not in err:
            fail("tampered: %s %s %r" % (s, err, recs))
        print("tampered bundle: rejected (%s), nothing stored" % err.strip().split("rejected (")[1].split(")")[0])
        # another record's bundle at the URL: refused whether the record was
        # named by its full number or by its bare body (no resolve request)
        s, err, recs = pull_one("swap", faults["swap"].origin, faults["swap"].ca,
                                [numbers[3], numbers[4][10:]])
        if s["rejected"] != 2 or recs.strip() or "id_mismatch" not in err:
            fail("swapped: %s %s %r" % (s, err, recs))
        print("another record's bundle at the URL (by number and by bare body): rejected")
        s, err, recs = pull_one("500", faults["500"].origin, faults["500"].ca, [numbers[1]])
        if s["failed"] != 1 or recs.strip() or "HTTP 500 from https://" not in err:
            fail("500: %s %s" % (s, err))
        print("500: failed with its status")
        s, err, recs = pull_one("big", faults["big"].origin, faults["big"].ca, [numbers[1]])
        if s["failed"] != 1 or recs.strip() or "body over" not in err:
            fail("big: %s %s" % (s, err))
        print("oversized body: failed")
        s, err, recs = pull_one("wrongca", up.origin, faults["500"].ca, [numbers[1]])
        if s["failed"] != 1 or recs.strip() or "SSL" not in err:
            fail("wrong CA: %s %s" % (s, err))
        print("wrong CA: failed: %s" % err.strip().splitlines()[-1])
        # headers, then nothing: dropped after --stall-timeout (under 1 KiB/s)
        t1 = time.time()
        s, err, recs = pull_one("stall", faults["stall"].origin, faults["stall"].ca, [numbers[1]],
                                extra=["--stall-timeout", "2"])
        took = time.time() - t1
        if s["failed"] != 1 or recs.strip() or "Timeout" not in err or took > 30:
            fail("stall: %s %s (%.1f s)" % (s, err, took))
        print("stalled upstream: failed after %.1f s: %s" % (took, err.strip().splitlines()[-1]))
        print("pull test: OK in %.1f s" % (time.time() - t0))
        return 0
    finally:
        for s in standins:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
