#!/usr/bin/env python3
"""Issue 55: an incremental export leaves the alias map alone when the
changed records claim what they claimed, and merges it when they do not.

1. 30 records (gen_events, 2 events each) imported and exported;
2. 5 of them get a new title (a signed graph_snapshot): the export says
   aliases_changed false and the map and the claims list are not rewritten
   (same inode, same mtime), yet the records' files and the list pages are;
3. 10 new records imported: the export says aliases_changed true, the map
   holds their short numbers and arXiv ids, and it is byte for byte the map
   of a full export of the same store into an empty directory;
4. a tree whose facts file is of the layout before the digests
   ("pith-site-facts 2") still exports incrementally: the map merged, the
   same bytes, every record's digest added up from it (the facts those of
   a full export), so that the next retitle leaves the map alone.

usage: site_aliases_incr_test.py --pithctl PITHCTL --gen-events GEN_EVENTS
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import check, events_by_record, make_events, signed_retitles  # noqa: E402

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--gen-events", required=True)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="site_aliases_incr.")
    try:
        run(a, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def run(a, root):
    P = a.pithctl
    op = os.path.join(root, "op.key")
    key, lines = make_events(a.gen_events, root, 40, 2)
    subprocess.run([P, "keygen", "--key-id", "op", op], check=True, stdout=subprocess.DEVNULL)
    recs, by = events_by_record(lines)
    first, later = recs[:30], recs[30:]
    store, site, full = (os.path.join(root, n) for n in ("store", "site", "full"))
    trust = ["--trust-key", key, "--trust-key", op]

    def load(rs, name):
        f = os.path.join(root, name)
        with open(f, "wb") as out:
            for r in rs:
                out.write(b"".join(l + b"\n" for l in by[r]))
        subprocess.run([P, "--store", store] + trust + ["import", "--no-progress", f], check=True,
                       stdout=subprocess.DEVNULL)

    def export(d, base=None):
        cmd = [P, "--store", store, "--json", "export", "--site", d]
        out = subprocess.run(cmd + (["--base-url", base] if base else []), check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)

    def retitle(rs, day):
        """A signed graph_snapshot with a new title for each of rs, imported."""
        f = signed_retitles(P, op, rs, os.path.join(root, "titles.jsonl"),
                            lambda i: "2031-01-%02dT00:00:%02dZ" % (day, i),
                            lambda i: "Retitled %d" % i)
        subprocess.run([P, "--store", store] + trust + ["import", "--no-progress", f],
                       check=True, stdout=subprocess.DEVNULL)

    meta = lambda d, n: os.path.join(d, ".pith-site", n)  # noqa: E731
    stamp = lambda p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns)  # noqa: E731
    load(first, "first.jsonl")
    export(site, "http://mirror.test")
    amap, claims = meta(site, "aliases.map"), meta(site, "claims")
    before = stamp(amap), stamp(claims)
    with open(meta(site, "facts"), "rb") as f:
        check(f.read(18) == b"pith-site-facts 3\n", "the facts file is of layout 3 (with digests)")

    # 2. new titles: the same aliases
    retitle(first[:5], 1)
    st = export(site)
    check(st["records"] == 5 and st["aliases_changed"] is False,
          "5 retitled records: rendered 5, aliases_changed false (%s, %s)"
          % (st["records"], st["aliases_changed"]))
    check((stamp(amap), stamp(claims)) == before,
          "the alias map and the claims list were not rewritten")
    body = first[0][-26:]
    with open(os.path.join(site, "rec", body[:2], body + ".json.gz"), "rb") as g:
        import gzip
        check(b"Retitled 0" in gzip.decompress(g.read()), "the retitled record's view is new")

    # 3. new records: new claims, merged
    load(later, "later.jsonl")
    st = export(site)
    check(st["records"] == 10 and st["aliases_changed"] is True,
          "10 new records: aliases_changed true (%s)" % st["aliases_changed"])
    text = open(amap).read()
    check(all(" %s;" % r[-26:] in text and ('"\\\\%s"' % r[-26:][:8]) in text for r in later),
          "the map names the 10 new records by their short numbers")
    export(full, "http://mirror.test")
    same = open(amap, "rb").read() == open(meta(full, "aliases.map"), "rb").read() and \
        open(claims, "rb").read() == open(meta(full, "claims"), "rb").read()
    check(same, "the incremental map and claims list are those of a full export, byte for byte")
    facts_same = open(meta(site, "facts"), "rb").read() == open(meta(full, "facts"), "rb").read()
    check(facts_same, "and so is the facts file")

    # 4. a facts file of layout 2 (no digests): read, the map merged again
    raw = open(meta(site, "facts"), "rb").read()
    old, off = bytearray(b"pith-site-facts 2\n"), 18
    while off < len(raw):  # body, seq, digest (dropped), then strings
        old += raw[off:off + 34]
        at = off + 42
        n = int.from_bytes(raw[at:at + 4], "little")
        if n == 0xfffffffe:
            at += 4
        else:
            for _ in range(5):
                n = int.from_bytes(raw[at:at + 4], "little")
                at += 4 + (0 if n == 0xffffffff else n)
        old += raw[off + 42:at]
        off = at
    with open(meta(site, "facts"), "wb") as g:
        g.write(old)
    retitle(first[6:7], 2)
    st = export(site)
    export(full)
    with open(meta(site, "facts"), "rb") as g:
        v3 = g.read(18) == b"pith-site-facts 3\n"
    check(st["records"] == 1 and v3 and
          open(amap, "rb").read() == open(meta(full, "aliases.map"), "rb").read(),
          "a layout-2 facts file is read (digests unknown: the map merged), the map the same "
          "bytes, the facts written as layout 3")
    check(open(meta(site, "facts"), "rb").read() == open(meta(full, "facts"), "rb").read(),
          "that merge gave every record its digest: the facts are a full export's")
    stamps = stamp(amap), stamp(claims)
    retitle(first[7:8], 3)
    st = export(site)
    check(st["records"] == 1 and st["aliases_changed"] is False and
          (stamp(amap), stamp(claims)) == stamps,
          "and the next retitle leaves the map alone again")


if __name__ == "__main__":
    sys.exit(main())
