#!/usr/bin/env python3
"""`pithctl pull` against the registry stand-in over HTTPS (issue 14, item 1).

usage: pull_test.py --pithctl P --gen-events G --gen-bundles B --data D [--records N]

1. N generated records (default 1,008: bundles signed by a test registry key)
   and the real sample bundle are laid out as the registry does; the stand-in
   serves them over HTTPS with a CA this test makes.
2. A pull by arXiv id (1,000 generated records and the sample; 8 more by DOI
   URL, short and full pith number) fills a fresh store whose records, states
   and events equal an import of the same bundles from files.
3. A second pull: every record unchanged through 304s, no bundle sent again.
4. Bundles signed by a key the store does not trust (gen_bundles --sign-seed,
   the stand-in's fault "untrusted" set at run time): rejected with the
   pipeline's reason, nothing stored, exit 1.
5. kill -9 in the middle of a pull of every record (the stand-in slowed down
   at run time), then the pull again: exit 0, what the killed run stored is
   unchanged, the rest stored, the store equals the import's and
   `pithctl check` finds no problem.
6. The stand-in's run-time knobs: 429 with Retry-After, "fail N times then
   succeed", a per-path 503 (that record fails, the other is stored), a
   counter reset.
7. A resolve API that answers with 302 redirects works as well.
8. Failures, each into a fresh store with nothing stored: a tampered bundle
   is rejected, another record's bundle at the URL is rejected (named by
   number or by bare body), a 500 fails with its status, a body over 16 MiB fails, an
   unknown id is not found, another CA's file fails with the TLS error, an upstream
   that stalls mid-body fails after --stall-timeout with a timeout.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import ssl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from upstream_standin import write_tree  # noqa: E402


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

    def open(self, path, data=None):
        ctx = ssl.create_default_context(cafile=self.ca)
        req = urllib.request.Request(self.origin + path, data=data)
        return urllib.request.urlopen(req, context=ctx, timeout=10)

    def stats(self, reset=False):
        with self.open("/_stats" + ("?reset=1" if reset else "")) as r:
            return json.loads(r.read())

    def control(self, **kw):
        """Changes the running stand-in's behaviour (POST /_control)."""
        with self.open("/_control", json.dumps(kw).encode()) as r:
            return json.loads(r.read())

    def get(self, path):
        """(status, Retry-After) of a GET of path."""
        try:
            with self.open(path) as r:
                r.read()
                return r.status, r.headers.get("Retry-After")
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Retry-After")

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def run(args, cmd, timeout=120):
    r = subprocess.run([args.pithctl] + cmd, capture_output=True, text=True, timeout=timeout)
    # under the sanitizers an error report may exit 1, which some cases expect
    if "Sanitizer" in r.stderr or "runtime error:" in r.stderr:
        fail("pithctl %s: sanitizer report:\n%s" % (" ".join(cmd), r.stderr[-4000:]))
    return r


def same_as_import(args, key, store, ref, numbers, what):
    """store holds what the import into ref holds: records (with each
    state's hash), every event, and a few states in full."""
    for cmd in (["records"], ["export"]):
        a = run(args, ["--store", store, "--trust-key", key] + cmd).stdout
        b = run(args, ["--store", ref, "--trust-key", key] + cmd).stdout
        if a != b or not a:
            fail("%s: `%s` differs from the import's:\n%s\n---\n%s"
                 % (what, cmd[0], a[:2000], b[:2000]))
    for p in (numbers[0], numbers[len(numbers) // 2], numbers[-1]):
        sa = run(args, ["--store", store, "--trust-key", key, "state", p]).stdout
        sb = run(args, ["--store", ref, "--trust-key", key, "state", p]).stdout
        if sa != sb or not sa:
            fail("%s: state of %s differs from the import's" % (what, p))


def check_untrusted(args, tmp, key, root, up, numbers, by_arxiv, pull_one):
    """Bundles signed by a key the store does not trust: the same records,
    made by gen_bundles --sign-seed, served with the stand-in's fault
    "untrusted" switched on at run time."""
    ev = os.path.join(tmp, "events-untrusted.jsonl")
    bu = os.path.join(tmp, "bundles-untrusted.jsonl")
    subprocess.run([args.gen_events, "--records", "3", "--per-record", "2", ev], check=True,
                   capture_output=True)
    subprocess.run([args.gen_bundles, "--sign-seed", "2", ev, bu], check=True,
                   capture_output=True)
    with open(bu, "rb") as f:
        got, _ = write_tree(os.path.join(root, "untrusted"), f.read().splitlines(),
                            index=False, manifest=False)
    if got != numbers[:3]:
        fail("untrusted bundles are of other records: %s" % got)
    up.control(fault="untrusted")
    try:
        s, err, recs = pull_one("untrusted", up.origin, up.ca,
                                [numbers[0], "arXiv:" + by_arxiv[numbers[1]]])
    finally:
        up.control(fault="none")
    if (s["rejected"] != 2 or s["stored"] or s["reasons"] != {"bundle": 2} or recs.strip()
            or err.count("rejected (bundle)") != 2
            or err.count("bundle check bundle_signature failed") != 2):
        fail("untrusted: %s %s %r" % (s, err, recs))
    print("bundles signed by an untrusted key: rejected (bundle): %s, nothing stored"
          % err.strip().splitlines()[0].rsplit(": ", 1)[-1])


def check_kill9(args, tmp, key, up, numbers, ref):
    """kill -9 in the middle of a pull, then the same pull again."""
    t0 = time.time()
    n = len(numbers)
    ids = os.path.join(tmp, "ids-numbers.txt")
    with open(ids, "w") as f:
        f.write("\n".join(numbers) + "\n")
    st = os.path.join(tmp, "st-killed")
    base = ["--store", st, "--trust-key", key]
    pull = [args.pithctl] + base + ["pull", "--from", up.origin, "--ca-file", up.ca,
                                    "--ids", ids]
    # 16 transfers in flight, 30 ms each: about 500 bundles a second
    up.control(delay=0.03)
    sent0 = up.stats()["full"]
    p = subprocess.Popen(pull, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while up.stats()["full"] - sent0 < n // 3:
            if p.poll() is not None:
                fail("kill -9: the pull ended (exit %d) before it was killed" % p.returncode)
            if time.time() > deadline:
                fail("kill -9: the pull did not get a third of the bundles in 60 s")
            time.sleep(0.02)
        time.sleep(0.5)  # a few group commits more
        p.send_signal(signal.SIGKILL)
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        up.control(delay=0)
    if p.returncode != -signal.SIGKILL:
        fail("kill -9: the pull ended with %d before the kill" % p.returncode)
    kept = len([l for l in run(args, base + ["records"]).stdout.splitlines()
                if l.startswith("pith:")])
    if not 0 < kept < n:
        fail("kill -9: %d of %d records stored when killed; expected some, not all" % (kept, n))
    r = run(args, base + ["pull", "--from", up.origin, "--ca-file", up.ca, "--ids", ids,
                          "--json"])
    if r.returncode != 0:
        fail("pull after kill -9: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr[-3000:]))
    s = json.loads(r.stdout)
    # the killed run wrote no ETag file: everything is downloaded again,
    # and what it stored is found unchanged
    if s["unchanged"] != kept or s["stored"] != n - kept or s["not_modified"]:
        fail("pull after kill -9 (%d kept): %s" % (kept, r.stdout))
    same_as_import(args, key, st, ref, numbers, "pull after kill -9")
    r = run(args, base + ["check"])
    if r.returncode != 0:
        fail("check after kill -9 and pull: exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
    print("kill -9 after %d of %d records stored, pulled again: %d stored, %d unchanged, "
          "equal to the import, check: %s (%.1f s)"
          % (kept, n, s["stored"], s["unchanged"], r.stdout.strip(), time.time() - t0))


def check_knobs(up, numbers, pull_one):
    """The stand-in's run-time knobs that the daemon's tests will use."""
    path = "/pith/%s/bundle.json" % numbers[5][10:]
    up.control(fault="429", retry_after=7, fail_times=2)
    got = [up.get(path) for _ in range(3)]
    if got != [(429, "7"), (429, "7"), (200, None)]:
        fail("429 twice, then the bundle: %s" % got)
    up.control(fault="none", fail_times=0, retry_after=2,
               path_faults={numbers[6][10:]: "503"})
    try:
        if up.get(path) != (200, None) or up.get("/pith/%s/bundle.json" % numbers[6][10:]) != (503, "2"):
            fail("per-path 503")
        # retries are pull_retry_test.py's: here the failure as it ends
        s, err, recs = pull_one("pathfault", up.origin, up.ca, [numbers[6], numbers[7]],
                                extra=["--retries", "0"])
    finally:
        up.control(path_faults={}, retry_after=None)
    if (s["failed"] != 1 or s["stored"] != 1 or recs.split()[:1] != [numbers[7]]
            or "HTTP 503 from https://" not in err):
        fail("per-path 503: %s %s %r" % (s, err, recs))
    # bundles reach the pipeline in groups (one store batch each): a tampered
    # one among valid ones is rejected alone, the others stored
    up.control(path_faults={numbers[9][10:]: "tamper"})
    try:
        s, err, recs = pull_one("grouped", up.origin, up.ca, numbers[8:12])
    finally:
        up.control(path_faults={})
    if (s["rejected"] != 1 or s["stored"] != 3 or sorted(l.split()[0] for l in recs.splitlines()) != sorted(
            numbers[8:9] + numbers[10:12]) or numbers[9] + ": rejected (" not in err):
        fail("a tampered bundle among valid ones: %s %s %r" % (s, err, recs))
    up.stats(reset=True)
    if up.stats()["requests"]:
        fail("stats not reset")
    print("stand-in knobs: 429 with Retry-After twice then 200; a per-path 503 fails one "
          "record of two; a tampered bundle among 4 pulled together is rejected alone; "
          "counters reset")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--gen-events", required=True)
    ap.add_argument("--gen-bundles", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--records", type=int, default=1008)
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
        numbers, index = write_tree(root, bundles)
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
        print("first pull: %d records stored in %.2f s (%d by arXiv id, 8 by DOI URL, short "
              "and full number)" % (n, s["seconds"], n - 8))

        # the same bundles imported from files
        ref = os.path.join(tmp, "imported")
        r = run(args, ["--store", ref, "--trust-key", key, "import", bu, sample])
        if r.returncode != 0:
            fail("import: %s%s" % (r.stdout, r.stderr))
        a = run(args, base + ["records"]).stdout
        b = run(args, ["--store", ref, "--trust-key", key, "records"]).stdout
        if a != b or len(a.splitlines()) != n + 1:  # the header line
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
            recs = "".join(l for l in run(args, ["--store", st, "--trust-key", key, "records"])
                           .stdout.splitlines(keepends=True) if not l.startswith("#"))
            return json.loads(r.stdout), r.stderr, recs

        check_untrusted(args, tmp, key, root, up, numbers, by_arxiv, pull_one)
        check_kill9(args, tmp, key, up, numbers, ref)
        check_knobs(up, numbers, pull_one)

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
        s, err, recs = pull_one("500", faults["500"].origin, faults["500"].ca, [numbers[1]],
                                extra=["--retries", "0"])
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
                                extra=["--stall-timeout", "2", "--retries", "0"])
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
