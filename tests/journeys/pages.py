#!/usr/bin/env python3
"""Journey: pages for people (issue 51). A person opens a mirror in a
browser, on a phone (360 px wide) and on a desktop (1280 px): the home
page, a record page, a search, a mistyped record id, the record list;
then the same on the static site `pithctl export --site` wrote, served
by nginx with deploy/nginx.conf (the tree stores its documents compressed,
in shared directories: a plain directory server cannot serve it). What they must see:

- no page wider than the window (document.documentElement.scrollWidth),
- on every page a header with the mirror's configured name (also in the
  title), a link home and a search box that works,
- an HTML error page for a mistyped id (JSON still for programs),
- on a record page: the citation_* tags, a BibTeX entry (and its .bib, the node's only),
  and no link that does not answer 200 (no bundle link without a bundle).

Chromium is driven over its DevTools pipe (--remote-debugging-pipe: no
port, no extra package), which can evaluate the page's own DOM.
Screenshots go to --out (ctest: JOURNEY_OUT), pages-NAME-WIDTH.png.

usage: pages.py --pithd D --pithctl P --gen-events G --out DIR [--chromium PATH]
Exit 77 (skipped) when Chromium is absent (scripts/deps.sh installs it).
"""
import base64
import html
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
sys.path.insert(0, TESTS)
from pithtest import free_port, run_browser_test, sample_mirror, wait_for  # noqa: E402

SAMPLE = "AR7B3DEVMOTSBRCCVXUCLYSRRE"
TITLE = "The Case for Co-Designing Model Architectures with Hardware"
# a name that must be escaped and is not ASCII
NAME = "Bibliothèque <Q&A> Mirror"
OPERATOR = "Jane Müller"
CONTACT = "mirror@example.org"
TRICKY_TITLE = "Müller's {50%} & \\alpha_1 <b>~^#$</b>"
TRICKY_AUTHORS = "Zoë Ølsen, J. {Doe}, 李 小龙"
TRICKY_BIB_TITLE = ("Müller's \\{50\\%\\} \\& \\textbackslash{}alpha\\_1 "
                    "<b>\\textasciitilde{}\\textasciicircum{}\\#\\$</b>")
TRICKY_BIB_AUTHORS = "Zoë Ølsen and J. \\{Doe\\} and 李 小龙"
BROWSER_ACCEPT = ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,"
                  "image/webp,*/*;q=0.8")
WIDTHS = (360, 1280)


class Chromium:
    """One headless Chromium, one tab, spoken to over the DevTools pipe
    (fd 3: commands in, fd 4: answers out, NUL-separated JSON)."""

    def __init__(self, exe, profile):
        to_r, self._w = os.pipe()
        self._r, from_w = os.pipe()

        def fds():
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.closerange(5, 1024)
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--remote-debugging-pipe", "--user-data-dir=" + profile,
             "about:blank"],
            close_fds=False, preexec_fn=fds, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.events = []
        tid = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=tid, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)

    def _read(self, timeout=60):
        deadline = time.time() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.time()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise AssertionError("Chromium did not answer within %d s" % timeout)
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise AssertionError("Chromium closed its DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, session=False, **params):
        self._id += 1
        m = {"id": self._id, "method": method, "params": params}
        if session:
            m["sessionId"] = self.session
        os.write(self._w, json.dumps(m).encode() + b"\0")
        while True:
            o = self._read()
            if o.get("id") == self._id:
                if "error" in o:
                    raise AssertionError("Chromium: %s: %s" % (method, o["error"]))
                return o.get("result", {})
            self.events.append(o)

    def wait_event(self, method, timeout=30):
        deadline = time.time() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    del self.events[:i + 1]
                    return e
            self.events.clear()
            if time.time() > deadline:
                raise AssertionError("no %s within %d s" % (method, timeout))
            self.events.append(self._read(timeout))

    def open(self, url, width):
        """Loads url in a window width px wide (a phone below 600 px)."""
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=800,
                  deviceScaleFactor=1, mobile=width < 600)
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")

    def js(self, expr):
        r = self.call("Runtime.evaluate", session=True, expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise AssertionError("script failed: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def screenshot(self, path, width):
        h = min(int(self.js("document.documentElement.scrollHeight")), 6000)
        r = self.call("Page.captureScreenshot", session=True, format="png",
                      captureBeyondViewport=True,
                      clip={"x": 0, "y": 0, "width": width, "height": h, "scale": 1})
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def close(self):
        self.proc.kill()
        self.proc.wait()
        os.close(self._w)
        os.close(self._r)


# what a person sees of a page, measured in the page itself
LOOK = """(() => {
  const hd = document.querySelector('header');
  const site = hd && hd.querySelector('a.site');
  const q = hd && hd.querySelector('form[role=search] input[name=q]');
  const wide = [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
    .slice(0, 5).map(e => e.tagName + ' ' + (e.textContent || '').slice(0, 60));
  return {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    contentType: document.contentType,
    title: document.title,
    siteName: site ? site.textContent : null,
    siteHref: site ? site.href : null,
    searchAction: q ? q.form.action : null,
    viewport: !!document.querySelector('meta[name=viewport]'),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    citation: [...document.querySelectorAll('meta[name^=citation_]')]
      .map(m => [m.name, m.content]),
    text: document.body.innerText,
    wide: wide,
  };
})()"""


def plain_full(base, body):
    """The full pith number of a stored record's body."""
    return json.loads(fetch(base + "/pith/%s.json" % body)[2])["pith_number"]


def fetch(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def check_page(br, out, label, url, width, must=(), search_base=None):
    """Opens url at width, takes its screenshot, asserts what every page
    must show; returns what LOOK measured."""
    br.open(url, width)
    br.screenshot(os.path.join(out, "pages-%s-%d.png" % (label, width)), width)
    v = br.js(LOOK)
    where = "%s (%s) at %d px" % (label, url, width)
    assert v["contentType"] == "text/html", "%s: a browser got %s, not a page" % (
        where, v["contentType"])
    assert v["viewport"], "%s: no viewport meta tag" % where
    assert v["scrollWidth"] <= v["innerWidth"], (
        "%s: the page is %d px wide in a %d px window (scrolls sideways); too wide: %s"
        % (where, v["scrollWidth"], v["innerWidth"], v["wide"]))
    assert v["siteName"] == NAME, "%s: the header shows %r, not the mirror's name %r" % (
        where, v["siteName"], NAME)
    assert NAME in v["title"], "%s: the title %r does not name the mirror" % (where, v["title"])
    assert OPERATOR in v["text"] and CONTACT in v["text"], (
        "%s: the header does not say who runs the mirror" % where)
    assert v["searchAction"], "%s: no search box in the header" % where
    if search_base:
        assert v["searchAction"] == search_base + "/search", (
            "%s: the search box submits to %s, not %s/search" % (
                where, v["searchAction"], search_base))
    missing = [m for m in must if m not in v["text"]]
    assert not missing, "%s: a person does not see %s" % (where, missing)
    return v


def check_links(v, base, what):
    """Every link of a page to its own site answers 200."""
    bad = []
    for h in sorted(set(x.split("#")[0] for x in v["links"] if x.startswith(base))):
        st, _, _ = fetch(h, BROWSER_ACCEPT)
        if st != 200:
            bad.append((h, st))
    assert not bad, "%s: links that do not work: %s" % (what, bad)
    return len(set(v["links"]))


def serve_site(root, site, port):
    """nginx with deploy/nginx.conf over the tree (what a person puts a
    static site behind: the tree stores each document once, compressed,
    in rec/XY/, and the config maps the registry's URLs onto it), on a free
    port; returns (server, base URL), or (None, why) without nginx."""
    from site_test import Nginx, nginx_conf, wait_port
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not exe:
        return None, "nginx is not installed (apt-get install -y nginx-light)"
    d = os.path.join(root, "nginx")
    os.makedirs(d, exist_ok=True)
    ngx = Nginx(exe, d, nginx_conf(d, os.path.join(TESTS, "..", "deploy", "nginx.conf"), site,
                                   port))
    wait_port(port, ngx.proc)
    return ngx, "http://127.0.0.1:%d" % port


def body(args, root, nodes):
    exe = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    os.makedirs(args.out, exist_ok=True)
    # a name pages would show must be text: a control character is refused
    # in one line that names the setting
    r = subprocess.run([args.pithd, "--data", os.path.join(root, "bad"),
                        "--mirror-name", "evil\x1b[31m"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0 and "mirror_name" in r.stderr and len(
        r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    opkey = os.path.join(root, "op.key")
    subprocess.run([args.pithctl, "keygen", "--key-id", "pages-op", opkey], check=True,
                   capture_output=True)
    n, base = sample_mirror(args, root, nodes, 12, [
        "--trust-key", opkey, "--mirror-name", NAME, "--mirror-operator", OPERATOR,
        "--mirror-contact", CONTACT])
    wait_for(lambda: TITLE.encode() in fetch(base + "/search?q=biderman")[2], 15,
             what="the search index to take the sample record")
    # a generated record: one without a registry bundle
    recs = fetch(base + "/api/records?limit=200")[2]
    plain = [x["pith_number"][-26:] for x in json.loads(recs)["records"]
             if x["pith_number"][-26:] != SAMPLE and not x["built_at"]]
    assert plain, "no record without a bundle among the generated ones"

    # a paper whose title and authors TeX and HTML both give a meaning to
    ev = {"event_type": "graph_snapshot", "subject_pith_number": plain_full(base, plain[1]),
          "target": "graph", "created_at": "2031-01-01T00:00:00Z",
          "payload": {"graph_snapshot": {"paper": {"title": TRICKY_TITLE,
                                                     "authors_text": TRICKY_AUTHORS}}}}
    signed = subprocess.run([args.pithctl, "sign", "--key", opkey, "-"],
                            input=json.dumps(ev).encode(), capture_output=True,
                            check=True).stdout.strip()
    assert n.submit([signed])[0].get("ok")
    tricky = fetch(base + "/pith/%s.bib" % plain[1])[2].decode()
    assert "  title         = {%s}," % TRICKY_BIB_TITLE in tricky, tricky
    assert "  author        = {%s}," % TRICKY_BIB_AUTHORS in tricky, tricky

    # programs keep their JSON errors; a browser gets a page
    mistyped = "/pith/" + SAMPLE[:8] + "XXXX"
    for accept, want_html in [(BROWSER_ACCEPT, True), (None, False), ("*/*", False),
                         ("application/json", False), ("text/html", True),
                         ("application/json, text/html;q=0.9", False),
                         ("text/html;q=0.5, */*;q=0.1", True)]:
        st, ct, b = fetch(base + mistyped, accept)
        assert st == 404, (accept, st)
        assert ct.startswith("text/html" if want_html else "application/json"), (
            "a mistyped id with Accept %r: %s" % (accept, ct))
        if not want_html:
            assert json.loads(b)["error"] in ("not_found", "bad_request")
    # a malformed id (400) and an unknown path are pages for a browser too
    for path, code in [("/pith/AR7B", 400), ("/no/such/page", 404)]:
        st, ct, b = fetch(base + path, BROWSER_ACCEPT)
        assert st == code and ct.startswith("text/html") and html.escape(NAME).encode() in b, (
            path, st, ct)
    # the mirror says who it is in its manifest
    m = json.loads(fetch(base + "/pith-mirrors.json")[2])
    self_entry = [e for e in m["mirrors"] if e["status"] == "self"][0]
    assert (self_entry["name"], self_entry.get("operator"), self_entry.get("contact")) == (
        NAME, OPERATOR, CONTACT), self_entry
    assert {"bundle_pattern", "state_pattern", "well_known_pattern", "public_key",
            "mirror_type", "base_url"} <= set(self_entry), self_entry
    # BibTeX
    st, ct, bib = fetch(base + "/pith/%s.bib" % SAMPLE)
    bib = bib.decode()
    assert st == 200 and ct == "application/x-bibtex; charset=utf-8", (st, ct)
    assert bib.startswith("@misc{pith:AR7B3DEV,") and " and Stella Biderman" in bib, bib
    assert "eprint        = {2401.14489}" in bib and bib.count("{") == bib.count("}"), bib
    assert fetch(base + "/pith/ZZZZZZZZZZZZZZZZZZZZZZZZZZ.bib")[0] == 404

    br = Chromium(exe, tempfile.mkdtemp(dir=root, prefix="chromium-"))
    try:
        seen = []
        for w in WIDTHS:
            check_page(br, args.out, "home", base + "/", w, [TITLE], base)
            v = check_page(br, args.out, "record", base + "/pith/" + SAMPLE, w,
                           [TITLE, "Stella Biderman", "BibTeX", "@misc{pith:AR7B3DEV"], base)
            cit = [tuple(x) for x in v["citation"]]
            names = [k for k, _ in cit]
            assert ("citation_title", TITLE) in cit, cit
            assert names.count("citation_author") >= 2, cit
            assert {"citation_publication_date", "citation_arxiv_id", "citation_doi"} <= set(
                names), cit
            assert ("citation_arxiv_id", "2401.14489") in cit, cit
            if w == WIDTHS[0]:
                seen.append(check_links(v, base, "the sample record's page"))
            v = check_page(br, args.out, "record-nobundle", base + "/pith/" + plain[0], w,
                           ["BibTeX"], base)
            assert not any(x.endswith("/bundle.json") for x in v["links"]), (
                "a bundle link on a record without a bundle: %s" % v["links"])
            if w == WIDTHS[0]:
                seen.append(check_links(v, base, "a record page without a bundle"))
            # what an event says is shown as text, never as markup
            v = check_page(br, args.out, "record-tricky", base + "/pith/" + plain[1], w,
                           [TRICKY_TITLE, "Zoë Ølsen"], base)
            assert ("citation_title", TRICKY_TITLE) in [tuple(x) for x in v["citation"]], v
            assert TRICKY_TITLE in v["title"], v["title"]
            assert br.js("document.querySelectorAll('main b').length") == 0, (
                "a title's markup became markup")
            check_page(br, args.out, "search", base + "/search?q=biderman", w, [TITLE], base)
            v = check_page(br, args.out, "error", base + mistyped, w, ["404"], base)
            assert v["siteHref"] == base + "/", "the error page's header does not lead home"
            check_page(br, args.out, "records", base + "/pith/", w, [TITLE], base)

        # the static site of the same store, served by nginx
        # (deploy/nginx.conf), its search box pointing at the live node
        site = os.path.join(root, "site")
        sport = free_port()
        subprocess.run([args.pithctl, "--store", os.path.join(n.dir, "store"), "export",
                        "--site", site, "--base-url", "http://127.0.0.1:%d" % sport, "--name",
                        NAME, "--operator", OPERATOR, "--contact", CONTACT,
                        "--search-url", base, "--jobs", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        srv, sbase = serve_site(root, site, sport)
        if not srv:
            print("SKIPPED: the static site: " + sbase)
            raise SystemExit(77)
        try:
            for w in WIDTHS:
                check_page(br, args.out, "site-home", sbase + "/", w, [TITLE], base)
                v = check_page(br, args.out, "site-record", sbase + "/pith/%s/" % SAMPLE, w,
                               [TITLE, "@misc{pith:AR7B3DEV"], base)
                if w == WIDTHS[0]:
                    seen.append(check_links(v, sbase, "the static site's record page"))
                    assert not any("/resolve" in x or x.endswith(".bib") for x in v["links"]), (
                        "the static page links the resolver or a .bib, which the tree has not")
                check_page(br, args.out, "site-records", sbase + "/pith/", w, [TITLE], base)
                # what deploy/nginx.conf shows for a URL the tree lacks
                check_page(br, args.out, "site-error", sbase + mistyped, w, ["404"], base)
            st, _, b = fetch(base + "/search?q=biderman")
            assert st == 200 and TITLE.encode() in b, "the static site's search box goes nowhere"
            # the BibTeX entry is in the page (above); the .bib is the node's
            # own document, not in the tree (docs/site.md, "Six files a record")
            assert fetch(sbase + "/pith/%s.bib" % SAMPLE)[0] == 404, (
                "the static site serves a .bib, which the tree does not carry")
        finally:
            srv.stop()
    finally:
        br.close()
    shots = sorted(f for f in os.listdir(args.out) if f.startswith("pages-"))
    small = [s for s in shots if os.path.getsize(os.path.join(args.out, s)) < 5000]
    assert not small, "empty screenshots: %s" % small
    print("pages at %s px: home, record (with and without a bundle, one with TeX and HTML "
          "in its title), search, error, list on "
          "the node and home, record, list on its static site; no sideways scrolling, the "
          "header with %r and a search box on each, every record page link answers 200 "
          "(%s links); screenshots in %s (%d)"
          % (" and ".join(map(str, WIDTHS)), NAME, "/".join(map(str, seen)), args.out,
             len(shots)))


def main():
    return run_browser_test("pith-pages-", body)


if __name__ == "__main__":
    sys.exit(main())
