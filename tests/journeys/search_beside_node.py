#!/usr/bin/env python3
"""Journey (issue 51): an operator searches the store with pithctl while
the node runs, and the node's search goes on answering.

- `pithctl --store DATA/store search WORD` beside a running node answers
  from the node's index, read-only (a line on stderr says so), with the
  hits the node's /api/search gives; it writes nothing to the index;
- no hit: "no records matched", and `--json` prints [];
- the node's /api/search still answers 200 with the same hits afterwards,
  and its index still follows new records;
- the index deleted under the running node: the node rebuilds it and
  answers again (503 "being rebuilt" meanwhile, never 500);
- with the node stopped, `pithctl --store` builds and queries the index
  itself;
- an index of the old schema (before the tokenizer for every script) is
  rebuilt by the node at start, with nothing for the operator to do.

usage: search_beside_node.py --pithd P --pithctl C --gen-events G [--keep]
"""

import glob
import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import run_test, wait_for  # noqa: E402
from search_corpus import get_json, load, log  # noqa: E402


def index_files(node):
    """(name, size, mtime_ns) of the index's files."""
    return sorted((os.path.basename(p), os.stat(p).st_size, os.stat(p).st_mtime_ns)
                  for p in glob.glob(os.path.join(node.dir, "search.sqlite*")))


def node_hits(port, word):
    st, d = get_json(port, "/api/search?q=" + urllib.parse.quote(word))
    assert st == 200, (word, st, d)
    return [r["pith_number"] for r in d["results"]]


def body(args, root, nodes):
    node, port, ids, trust = load(args, root, nodes)
    store = os.path.join(node.dir, "store")

    def pithctl(*a):
        return subprocess.run([args.pithctl, "--store", store] + trust + list(a),
                              capture_output=True, text=True)

    before = node_hits(port, "kernel")
    assert before == [ids["muller"]], before
    # the node's indexer may still be writing the rest of the corpus (a
    # loaded machine): the snapshot is taken once its files stand still
    settled = []

    def still():
        a = index_files(node)
        time.sleep(1.0)
        settled[:] = [a]
        return index_files(node) == a
    wait_for(still, 30, what="the node's index to settle")
    files = settled[0]
    r = pithctl("search", "Müller")
    assert r.returncode == 0, r
    assert r.stdout.startswith("pith:%s  Kernel methods revisited\n" % ids["muller"][10:18]), r
    assert "running pithd holds this store" in r.stderr and "read-only" in r.stderr, r.stderr
    r = pithctl("--json", "search", "学习")
    assert r.returncode == 0 and [h["pith_number"] for h in json.loads(r.stdout)] == \
        [ids["zh"]], r
    r = pithctl("search", "nothing-matches-this")
    assert r.returncode == 0 and r.stdout == "no records matched\n", r
    r = pithctl("--json", "search", "nothing-matches-this")
    assert r.returncode == 0 and json.loads(r.stdout) == [], r
    r = pithctl("search", '"')
    assert r.returncode == 1 and "no word to search for" in r.stderr, r
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert index_files(node) == files, "pithctl wrote to the node's index: %s -> %s" % (
        files, index_files(node))
    log("pithctl --store beside the node: the node's hits, read-only")
    for _ in range(5):
        assert node_hits(port, "kernel") == before
    assert node_hits(port, "Łukasiewicz") == [ids["lukasiewicz"]]
    log("the node's /api/search still answers 200 with the same hits")

    # the node's index still follows its store
    opkey = os.path.join(root, "operator.key")
    with open(os.path.join(root, "papers.jsonl")) as f:
        first = [e["event_id"] for e in map(json.loads, f)
                 if e["subject_pith_number"] == ids["orsted"]]
    ev = {"event_type": "graph_snapshot", "subject_pith_number": ids["orsted"],
          "supersedes": first,
          "target": "graph", "created_at": "2031-04-01T00:00:00Z",
          "payload": {"graph_snapshot": {"paper": {
              "title": "Kernel of electromagnetism", "authors_text": "H. C. Ørsted"}}}}
    signed = subprocess.run([args.pithctl, "sign", "--key", opkey, "-"],
                            input=json.dumps(ev).encode(), capture_output=True,
                            check=True).stdout
    evfile = os.path.join(root, "later.jsonl")
    with open(evfile, "wb") as f:
        f.write(signed)
    r = subprocess.run([args.pithctl, "--node", node.sock, "import", "--no-progress", evfile],
                       capture_output=True, text=True)
    assert r.returncode == 0, r
    wait_for(lambda: sorted(node_hits(port, "kernel")) == sorted([ids["muller"], ids["orsted"]]),
             10, what="the node to index the new snapshot")
    log("the node's index follows new records")

    # the index deleted under the running node: rebuilt, never a 500
    for p in glob.glob(os.path.join(node.dir, "search.sqlite*")):
        os.unlink(p)
    seen = set()

    def answers():
        st, d = get_json(port, "/api/search?q=kernel")
        seen.add(st)
        assert st in (200, 503), (st, d)
        return st == 200 and sorted(r["pith_number"] for r in d["results"]) == \
            sorted([ids["muller"], ids["orsted"]])
    wait_for(answers, 15, what="the node to rebuild its deleted index")
    assert os.path.exists(os.path.join(node.dir, "search.sqlite"))
    log("index deleted under the node: rebuilt, answers %s on the way" % sorted(seen))

    # no node: pithctl builds and queries the index itself
    assert node.stop() == 0
    r = pithctl("search", "kernel")
    assert r.returncode == 0, r
    assert "running pithd" not in r.stderr, r.stderr
    assert sorted(l.split()[0] for l in r.stdout.splitlines() if l.startswith("pith:")) == \
        sorted("pith:" + ids[k][10:18] for k in ("muller", "orsted")), r.stdout
    log("with the node stopped, pithctl --store searches by itself")

    # an index an older pithd left (schema 1, unicode61 alone, where a
    # CJK word inside a title is not found): the node rebuilds it at start
    for p in glob.glob(os.path.join(node.dir, "search.sqlite*")):
        os.unlink(p)
    db = sqlite3.connect(os.path.join(node.dir, "search.sqlite"))
    db.executescript(
        "PRAGMA journal_mode=WAL;"
        "CREATE TABLE meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL) WITHOUT ROWID;"
        "INSERT INTO meta VALUES('seq', 1);"
        "CREATE TABLE rec(id INTEGER PRIMARY KEY, pith TEXT NOT NULL UNIQUE);"
        "CREATE VIRTUAL TABLE fts USING fts5(title, authors, cats, primary_cat UNINDEXED,"
        " submitted_at UNINDEXED, tokenize='unicode61 remove_diacritics 2');"
        "PRAGMA user_version=1;")
    db.close()
    node.start()
    wait_for(lambda: node_hits(port, "学习") == [ids["zh"]], 15,
             what="the node to rebuild an index of the old schema")
    with open(node.log_path, errors="replace") as f:
        assert "another schema version; rebuilding it" in f.read()
    log("an index of the old schema: rebuilt by the node at start, nothing asked of anyone")


if __name__ == "__main__":
    sys.exit(run_test("journey_search_beside_node.", body))
