#!/usr/bin/env python3
"""pithd keeping a static site current (issue 19, docs/site.md "Kept by pithd"):

- pithd --site-dir renders the tree on its own thread at start and after
  commits: events submitted through the control socket show up on disk
  (the tree's cursor moves), and every file of the records they changed,
  and the record list pages, hold the bytes the node's own HTTP serves
  for the same URL;
- status has a "site" object (runs, the last run, cursor, last error),
  /metrics the pith_site_* families;
- a tree that cannot be written is an error in status and the log (once),
  and the node keeps serving; once writable, the next commit fixes it;
- pithctl export --site over the node's store writes the same tree, file
  by file (issue 55: one site, whoever writes it);
- SIGTERM stops it cleanly (exit 0: the thread joined).

usage: site_node_test.py --pithd D --pithctl C --gen-events G [--keep]
"""
import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pithtest import Node, make_events, run_test, wait_for  # noqa: E402

DOCS = [("/pith/%s", "text/html", "html"),
        ("/pith/%s.json", None, "json"),
        ("/pith/%s/state.json", None, "state.json"),
        ("/api/pith-number/%s/events.json", None, "events.json"),
        ("/api/pith-number/%s/graph.json", None, "graph.json")]
# (no JSON-LD nor .bib in the tree: pithd's own documents, docs/site.md)


def rec_rel(body, ext):
    """A record's document in the tree (docs/site.md): rec/XY/BODY.EXT."""
    return "rec/%s/%s.%s" % (body[:2], body, ext)


def http_get(base, path, accept=None):
    req = urllib.request.Request(base + path, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


CITED = re.compile(rb"<h3>Cited by</h3>\n.*?<h3>", re.S)


# the resolver and .bib links: a node answers them, the tree has no file
# for them (docs/site.md)
RESOLVER = re.compile(rb'<a href="[^"]*/api/pith-number/resolve\?[^"]*">Resolver JSON</a> |'
                      rb'<a href="[^"]*\.bib">BibTeX</a> |'
                      rb', or <a href="[^"]*\.bib">download it as a \.bib file</a>')


def mask(b):
    """A record page less its "Cited by" section (the node answers it from
    its search index, the tree says "not known": it would go stale, other
    records' events change it) and its resolver and .bib links (docs/site.md)."""
    return RESOLVER.sub(b"", CITED.sub(b"<h3>Cited by</h3>...<h3>", b))


def read(site, rel):
    """What a file of the tree serves: REL.gz decompressed, or REL (each
    document is stored once, docs/site.md)."""
    p = os.path.join(site, rel)
    if os.path.exists(p + ".gz"):
        with open(p + ".gz", "rb") as f:
            return gzip.decompress(f.read())
    with open(p, "rb") as f:
        return f.read()


def tree_files(d):
    """{relative path: bytes} of every file of a tree, its notes too."""
    out = {}
    for dp, _, fs in os.walk(d):
        for f in fs:
            p = os.path.join(dp, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


NODE_NAME = re.compile(rb"pithd [0-9a-f]{16}")


def as_tree(b):
    """A node's page as the tree has it: a node without mirror_name calls
    itself "pithd ID", its tree "pith-mirror", as pithctl export --site does
    (the tree is the same bytes whoever writes it, docs/site.md)."""
    return NODE_NAME.sub(b"pith-mirror", b)


def same_as_node(base, site, bodies):
    """The files of these records and the list pages against the node's
    answers; returns the URLs that differ."""
    bad = []
    for b in bodies:
        for url, accept, rel in DOCS:
            if as_tree(mask(http_get(base, url % b, accept))) != mask(read(site, rec_rel(b, rel))):
                bad.append(url % b)
    page = json.loads(http_get(base, "/api/records"))
    if http_get(base, "/api/records") != read(site, "api/records/index.json"):
        bad.append("/api/records")
    if as_tree(http_get(base, "/pith/")) != read(site, "pith/index.html"):
        bad.append("/pith/")
    nx = page.get("next")
    while nx:
        if as_tree(http_get(base, "/pith/?after=%s&limit=50" % nx)) != read(
                site, "pith/after/%s.html" % nx):
            bad.append("/pith/?after=" + nx)
        body = http_get(base, "/api/records?after=" + nx)
        if body != read(site, "api/records/after/%s.json" % nx):
            bad.append("/api/records?after=" + nx)
        nx = json.loads(body).get("next")
    return bad


def body(args, root, nodes):
    key, lines = make_events(args.gen_events, root, 70, 2)
    by_rec = {}
    for l in lines:
        by_rec.setdefault(json.loads(l)["subject_pith_number"], []).append(l)
    recs = sorted(by_rec)
    site = os.path.join(root, "site")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    base = "http://127.0.0.1:%d" % port
    n = Node(args.pithd, root, "n", extra=["--trust-key", key, "--http", "127.0.0.1:%d" % port,
                                           "--site-dir", site, "--site-base-url", base,
                                           "--site-search-url", base,
                                           "--site-interval-ms", "200"]).start()
    nodes.append(n)

    def site_st():
        return n.status().get("site") or {}

    # the first run at start, over an empty store
    wait_for(lambda: site_st().get("runs", 0) >= 1 and site_st().get("cursor") is not None, 15,
             what="the first site run")
    st = site_st()
    assert st["dir"] == site and st["last_error"] == "", st
    c0 = st["cursor"]

    # 60 records, one event each: the site follows
    first = [by_rec[r][0] for r in recs[:60]]
    assert all(x.get("ok") for x in n.submit(first)), "events refused"
    def current(records):
        st = n.status()
        s = st.get("site") or {}
        return st["store"]["records"] == records and s.get("lag_changes") == 0 and \
            not s["running"] and s["cursor"]

    c1 = wait_for(lambda: current(60), 20, what="the site cursor to move")
    assert c1 == int(open(os.path.join(site, ".pith-site/cursor")).read())
    bodies = [r[-26:] for r in recs[:60]]
    bad = same_as_node(base, site, bodies)
    assert not bad, "differ from the node: %s" % bad[:5]
    print("ok - 60 new records: the tree follows (cursor %d -> %d), its files are the node's "
          "bytes" % (c0, c1), flush=True)

    # the second events of 5 records and 10 new records: those change
    more = [by_rec[r][1] for r in recs[:5]] + [by_rec[r][0] for r in recs[60:]]
    runs = site_st()["runs"]
    assert all(x.get("ok") for x in n.submit(more)), "events refused"
    wait_for(lambda: current(70) and site_st()["cursor"] >= c1 + 15, 20,
             what="the site cursor to move again")
    st = site_st()
    bodies = [r[-26:] for r in recs[:5] + recs[60:]]
    bad = same_as_node(base, site, bodies)
    assert not bad, "differ from the node: %s" % bad[:5]
    assert st["runs"] > runs and st["last_run"]["records"] >= 1, st
    assert st["last_run"]["records"] <= 15, "an incremental run rendered %d records" % \
        st["last_run"]["records"]
    print("ok - 5 changed and 10 new records: their files and the list pages are the node's "
          "bytes (last run: %s)" % json.dumps(st["last_run"]), flush=True)

    # one site, whoever writes it: pithctl export --site over the node's
    # store (read-only beside it) writes the same tree, file by file, the
    # tree's notes too; the manifest's generated_at is when a tree was
    # first exported, so the second tree starts from the first's
    def twin_differ(name):
        """pithctl export --site of the node's store into ROOT/name: the
        files that differ from pithd's tree, and how many pithd's has."""
        twin = os.path.join(root, name)
        os.makedirs(os.path.join(twin, ".pith-site"))
        shutil.copy(os.path.join(site, ".pith-site", "mirrors_at"),
                    os.path.join(twin, ".pith-site"))
        r = subprocess.run([args.pithctl, "--store", os.path.join(n.dir, "store"), "export",
                            "--site", twin, "--base-url", base, "--search-url", base],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        a, b = tree_files(site), tree_files(twin)
        return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)), len(a)

    differ, nfiles = twin_differ("twin")
    assert not differ, "pithd's tree and pithctl's differ: %s" % differ[:5]
    print("ok - pithd's incremental tree and pithctl export --site of the same store: the same "
          "%d files, byte for byte (the page header says %r in both)"
          % (nfiles, "pith-mirror"), flush=True)
    home = read(site, "index.html")
    assert b"pith-mirror" in home and b"pithd " not in home, "the tree's header names the node"

    # /metrics
    m = http_get(base, "/metrics").decode()
    for fam in ("pith_site_runs_total", "pith_site_records_rendered_total",
                "pith_site_files_written_total", "pith_site_cursor", "pith_site_lag_changes",
                "pith_site_last_run_seconds"):
        assert "\n# TYPE %s " % fam in m, "no %s in /metrics" % fam
    print("ok - /metrics has the pith_site_* families", flush=True)

    # a tree that cannot be written (a file where the record's directory
    # goes: fails as root too): an error, the node serves on
    rdir = os.path.join(site, "rec", recs[5][-26:][:2])
    os.rename(rdir, rdir + ".away")
    open(rdir, "w").close()
    try:
        fails = site_st()["failures"]
        assert all(x.get("ok") for x in n.submit([by_rec[recs[5]][1]])), "event refused"
        wait_for(lambda: site_st()["failures"] > fails, 20, what="a failed run")
        err = site_st()["last_error"]
        assert recs[5][-26:] in err, err
        assert http_get(base, "/healthz"), "the node stopped serving"
    finally:
        os.unlink(rdir)
        os.rename(rdir + ".away", rdir)
    assert all(x.get("ok") for x in n.submit([by_rec[recs[6]][1]])), "event refused"
    wait_for(lambda: site_st()["last_error"] == "" and current(70), 20,
             what="the next run to succeed")
    bad = same_as_node(base, site, [recs[5][-26:], recs[6][-26:]])
    assert not bad, "after the failure, differ: %s" % bad[:5]
    logged = open(n.log_path, errors="replace").read().count(err)
    assert logged == 1, "the error was logged %d times" % logged
    print("ok - an unwritable tree: an error in status, logged once, the node serves on; "
          "the next commit's run fixes it (%s)" % err, flush=True)

    # every record of the first list ranges changes: those ranges empty,
    # their pages' files go (HTML and JSON, stored as .gz), and the tree is
    # still the one a full export writes
    c2 = site_st()["cursor"]
    assert all(x.get("ok") for x in n.submit([by_rec[r][1] for r in recs[7:60]])), \
        "events refused"
    wait_for(lambda: current(70) and site_st()["cursor"] >= c2 + 53, 20,
             what="the site cursor to move past the last changes")
    chain, nx = set(), json.loads(http_get(base, "/api/records")).get("next")
    while nx:
        chain.add(nx)
        nx = json.loads(http_get(base, "/api/records?after=" + nx)).get("next")
    for d, ext in (("pith/after", ".html"), ("api/records/after", ".json")):
        files = os.listdir(os.path.join(site, d)) if os.path.isdir(os.path.join(site, d)) else []
        stale = sorted(f for f in files if f.split(".")[0] not in chain)
        assert not stale, "%s: files of emptied list pages left: %s (the pages: %s)" % (
            d, stale, sorted(chain))
    bad = same_as_node(base, site, [r[-26:] for r in recs[7:60]])
    assert not bad, "after the ranges emptied, differ: %s" % bad[:5]
    differ, _ = twin_differ("twin2")
    assert not differ, "pithd's tree and a full export differ: %s" % differ[:5]
    print("ok - list ranges emptied by changes: their pages' files are gone, the tree is a full "
          "export's (%d pages after the first)" % len(chain), flush=True)

    rc = n.stop(signal.SIGTERM)
    assert rc == 0, "pithd exited %s" % rc
    print("ok - SIGTERM: pithd stops cleanly with the site thread (exit 0)", flush=True)


if __name__ == "__main__":
    sys.exit(run_test("site_node.", body))
