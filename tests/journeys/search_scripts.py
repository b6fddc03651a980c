#!/usr/bin/env python3
"""Journey (issue 51): a person searches a mirror in their own language.

A node holds records whose authors are Müller, Ørsted, Dvořák,
Łukasiewicz, Ñúñez and whose titles are in Chinese, Japanese, Russian,
Greek and mixed case (tests/journeys/search_corpus.py). Then, as curl or
a browser's search box would send them:
- /api/search and /search find the right record with accents, without
  them, in upper case, by a CJK word inside a title, by a Cyrillic or
  Greek word;
- hostile queries (a lone quote, '*', NEAR(a b), title:x, a 2 KB query,
  a 10 KB one, invalid UTF-8 and control characters percent-encoded) get
  400 with a body that says why (the search page itself on /search),
  200, or 414 for a request target past the server's limit: never 500;
- the node still searches afterwards.

usage: search_scripts.py --pithd P --pithctl C --gen-events G [--out DIR] [--keep]
"""

import json
import os
import re
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import run_test  # noqa: E402
from search_corpus import PAPERS, get, get_json, load, log, raw_get  # noqa: E402

TITLE = {k: t for k, t, _ in PAPERS}

# (what the person types, the records it must find, by key)
FINDS = [
    ("Müller", ["muller"]),
    ("Muller", ["muller"]),
    ("MÜLLER", ["muller"]),
    ("muller", ["muller"]),
    ("Ørsted", ["orsted"]),
    ("Orsted", ["orsted"]),
    ("ORSTED", ["orsted"]),
    ("Dvořák", ["dvorak"]),
    ("Dvorak", ["dvorak"]),
    ("DVOŘÁK", ["dvorak"]),
    ("Łukasiewicz", ["lukasiewicz"]),
    ("Lukasiewicz", ["lukasiewicz"]),
    ("ŁUKASIEWICZ", ["lukasiewicz"]),
    ("Ñúñez", ["nunez"]),
    ("Nunez", ["nunez"]),
    ("NÚÑEZ análisis", ["nunez"]),
    ("学习", ["zh"]),             # a Chinese word inside the title's run of characters
    ("深度学习", ["zh"]),
    ("研究进展", ["zh"]),
    ("李明", ["zh"]),
    ("学", ["zh", "ja"]),         # one character: both titles hold it
    ("データ", ["ja"]),           # katakana
    ("機械学習", ["ja"]),
    ("山田", ["ja"]),
    ("графов", ["ru"]),
    ("ГРАФОВ", ["ru"]),
    ("Петров", ["ru"]),
    ("её", ["ru"]),
    ("ее", ["ru"]),                # ё typed as е
    ("θεωρία", ["el"]),
    ("ΘΕΩΡΙΑ", ["el"]),
    ("θεωρια", ["el"]),
    ("Παπαδόπουλος", ["el"]),
    ("graphql sqlite", ["mixed"]),
    ("GRAPHQL", ["mixed"]),
    ("case study", ["mixed"]),
    ("zoe", ["mixed"]),
    ("Zoë", ["mixed"]),
    ("author:müller", ["muller"]),
    ("title:学习", ["zh"]),
    ("author:学习", []),
]


def q(text):
    """The query string a browser's form sends for text (UTF-8, percent-encoded)."""
    return urllib.parse.quote_plus(text)


def api(port, text, extra=""):
    return get_json(port, "/api/search?q=" + q(text) + extra)


def found_keys(ids, results):
    back = {v: k for k, v in ids.items()}
    return sorted(back.get(r["pith_number"], "?") for r in results)


def check_finds(port, ids):
    for text, want in FINDS:
        st, d = api(port, text)
        assert st == 200, (text, st, d)
        got = found_keys(ids, d["results"])
        assert got == sorted(want), "%s: found %s, want %s" % (text, got, want)
        assert d["query"] == text, (text, d["query"])
        # the page a browser gets: the same records, each title a link
        st, h, body = get(port, "/search?q=" + q(text))
        page = body.decode()
        assert st == 200 and h["content-type"].startswith("text/html"), (text, st)
        for k in want:
            assert TITLE[k] in page, (text, k)
        if not want:
            assert "No record on this mirror matches." in page, text
    log("%d spellings find their records, in JSON and in the page" % len(FINDS))
    # raw UTF-8 in the target, as curl sends a URL it is given unencoded
    st, b = raw_get(port, "/api/search?q=Müller".encode())
    assert st == 200 and found_keys(ids, json.loads(b)["results"]) == ["muller"], (st, b)


def alert_text(page):
    m = re.search(r'<p role="alert">(.*?)</p>', page, re.S)
    return re.sub(r"<[^>]+>", "", m.group(1)) if m else None


# (the raw query string after q=, what the refusal must say; None: 200)
HOSTILE = [
    (q('"'), "no word to search for"),
    (q('*'), "no word to search for"),
    (q('" * - ( ) :'), "no word to search for"),
    (q("NEAR(a b)"), None),
    (q("title:x"), None),
    (q('kernel" OR "x'), None),
    (q("müller AND NOT kernel"), None),
    (q("x" * 2048), "longer than 256 bytes"),
    (q(" ".join("w%d" % i for i in range(13))), "more than 12 words"),
    ("%C3", "not valid UTF-8"),
    ("M%FCller", "not valid UTF-8"),             # Latin-1, not UTF-8
    ("%C0%AF", "not valid UTF-8"),               # an overlong '/'
    ("%ED%A0%80", "not valid UTF-8"),            # a UTF-16 surrogate
    ("a%00b", "an encoded NUL"),
    ("a%0D%0ASet-Cookie:%20x", "a control character"),
    ("a%C2%85b", "a control character"),         # C1 NEL
    ("", "no word to search for"),
]


def check_hostile(port, ids, out):
    for raw, why in HOSTILE:
        st, d = get_json(port, "/api/search?q=" + raw)
        if why is None:
            assert st == 200 and isinstance(d.get("results"), list), (raw, st, d)
            continue
        assert st == 400, (raw[:40], st, d)
        assert d["error"] == "bad_request" and why in d["message"], (raw[:40], d)
        st, h, body = get(port, "/search?q=" + raw, {"Accept": "text/html"})
        if not raw:  # the page with an empty box: how to search
            assert st == 200 and b"Words of a title" in body, (st, body[:300])
            continue
        page = body.decode()
        said = alert_text(page)
        assert st == 400 and h["content-type"].startswith("text/html"), (raw[:40], st, h)
        assert said and why in said, (raw[:40], said)
        assert 'role="search"' in page, "the page keeps the search box: " + raw[:40]
        assert "no-store" in h.get("cache-control", ""), h
    # what the person typed comes back in the box, escaped
    st, _, body = get(port, "/search?q=" + q('<"*">'))
    page = body.decode()
    assert st == 400 and '<"' not in page and 'value="&lt;&quot;*&quot;&gt;"' in page, page
    with open(os.path.join(out, "search_refused.html"), "wb") as f:
        f.write(body)
    log("%d hostile queries: 400 saying why (JSON and the page) or 200" % len(HOSTILE))
    # 10 KB: past the server's request-target limit (4096 bytes), refused
    # before any view as 414 with a JSON body saying so
    for path in ("/api/search?q=", "/search?q="):
        st, _, body = get(port, path + "x" * 10240)
        assert st == 414 and b"request target over 4096 bytes" in body, (path, st, body[:200])
    # a query value that is not text stays refused on the other routes
    st, d = get_json(port, "/api/records?after=%0A")
    assert st == 400 and "control character" in d["message"], (st, d)


def body(args, root, nodes):
    out = args.out or root
    os.makedirs(out, exist_ok=True)
    node, port, ids, _ = load(args, root, nodes)
    check_finds(port, ids)
    check_hostile(port, ids, out)
    st, d = api(port, "Łukasiewicz")
    assert st == 200 and found_keys(ids, d["results"]) == ["lukasiewicz"], (st, d)
    # and pithctl answers the same from the node
    r = subprocess.run([args.pithctl, "--node", node.sock, "--json", "search", "ørsted"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)[0]["pith_number"] == ids["orsted"], r
    assert node.alive(), "the node still runs"
    log("the node still searches after it all")


def add_args(ap):
    ap.add_argument("--out", help="where the refused page is written")


if __name__ == "__main__":
    sys.exit(run_test("journey_search_scripts.", body, add_args=add_args))
