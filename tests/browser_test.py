#!/usr/bin/env python3
"""The mirror in a real browser (issue 18): headless Chromium loads `/`, the
record list, a record page and a search on a node holding the registry's
sample bundle and generated records, and the test asserts what a person
sees there. One screenshot per page is written to OUT (ctest: the build's
tests/browser-shots/).

usage: browser_test.py --pithd D --pithctl P --gen-events G --out DIR
       [--chromium PATH]

Exit 77 (skipped) when Chromium is not installed (Debian package
`chromium`; scripts/deps.sh installs it).
"""
import html
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from html.parser import HTMLParser

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from pithtest import run_browser_test, sample_mirror, wait_for  # noqa: E402

SAMPLE = "AR7B3DEVMOTSBRCCVXUCLYSRRE"


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


def text_of(dom):
    """What a person reads: the DOM Chromium built, without tags."""
    t = re.sub(r"<(style|script)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    t = re.sub(r"<[^>]+>", "\n", t)
    return "\n".join(l.strip() for l in html.unescape(t).splitlines() if l.strip())


def chromium(exe, url, shot, width=1000, height=1400):
    """The DOM after load, and a screenshot of the page."""
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=%d,%d" % (width, height)]
    dom = subprocess.run([exe] + flags + ["--dump-dom", url], capture_output=True, text=True,
                         timeout=60).stdout
    subprocess.run([exe] + flags + ["--screenshot=" + shot, url], capture_output=True,
                   timeout=60)
    return dom


def body(args, root, nodes):
    exe = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    os.makedirs(args.out, exist_ok=True)
    # the registry's sample last: the most recently changed record
    n, base = sample_mirror(args, root, nodes, 30)

    def get(path):
        try:
            with urllib.request.urlopen(base + path, timeout=10) as resp:
                return resp.status, resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, ""
    # the search index follows the store on its own thread
    wait_for(lambda: "Co-Designing" in get("/search?q=biderman")[1], 15,
             what="the search index to take the sample record")
    shots = []

    def page(name, path, must):
        dom = chromium(exe, base + path, os.path.join(args.out, name + ".png"))
        seen = text_of(dom)
        missing = [m for m in must if m not in seen]
        assert not missing, "%s (%s): a person does not see %s\n%s" % (
            name, path, missing, seen[:2000])
        shots.append(name + ".png")
        return dom, seen

    # the home page: what this mirror is, recent records, a search box
    dom, seen = page("home", "/", ["The Case for Co-Designing Model Architectures with Hardware"])
    assert "<form" in dom and 'name="q"' in dom, "no search box on /"
    # the record list
    page("records", "/pith/", ["The Case for Co-Designing Model Architectures with Hardware"])
    # the record page: title, authors, the citation snippet, links
    dom, seen = page("record", "/pith/" + SAMPLE, [
        "The Case for Co-Designing Model Architectures with Hardware",
        "Stella Biderman", "Quentin Anthony",
        "\\pithnumber{%s}" % SAMPLE,
        "pith:2024:%s" % SAMPLE, "arxiv:2401.14489",
        "Record completeness", "Cited by", "Abstract"])
    links = Links()
    links.feed(dom)
    local = [h for h in links.hrefs if h.startswith(base)]
    assert len(local) >= 8, "the record page links too little of this mirror: %s" % local
    bad = []
    for h in sorted(set(local)):
        st, _ = get(h[len(base):])
        if st != 200:
            bad.append((h, st))
    assert not bad, "links on the record page that do not work: %s" % bad
    external = [h for h in links.hrefs if "arxiv.org/abs/2401.14489" in h or "doi.org/" in h]
    assert len(external) >= 2, "no arXiv or DOI link: %s" % links.hrefs
    # a search by an author's name finds the record, with its title
    dom, seen = page("search", "/search?q=biderman", [
        "The Case for Co-Designing Model Architectures with Hardware"])
    # a phone-sized window renders the record too
    chromium(exe, base + "/pith/" + SAMPLE, os.path.join(args.out, "record-phone.png"),
             width=390, height=1600)
    shots.append("record-phone.png")
    for s in shots:
        p = os.path.join(args.out, s)
        assert os.path.getsize(p) > 5000, "screenshot %s is empty" % p
    print("Chromium saw /, /pith/, the record page (%d working links to this mirror, arXiv "
          "and DOI links) and a search; screenshots in %s: %s"
          % (len(set(local)), args.out, ", ".join(shots)))


def main():
    return run_browser_test("pith-browser-", body)


if __name__ == "__main__":
    sys.exit(main())
