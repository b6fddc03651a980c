#!/usr/bin/env python3
"""What finding CJK words costs the search index, in bytes (issue 51;
docs/http.md, "Search", "CJK").

Text: the translations in Debian's locale files (/usr/share/locale:
zh_CN, zh_TW, ja, ko msgstr of 10-120 characters holding CJK) and their
English msgids (20-160 ASCII characters), a stand-in for titles. For each,
an FTS5 table as the index has it, three ways:
- u61:     unicode61 alone (a CJK run is one token: its words unfindable);
- perchar: every CJK character a token of its own, as the index's "pith"
           tokenizer makes them (emulated here with spaces around each
           CJK character: the same tokens and positions; Python's sqlite3
           cannot load a C tokenizer). Only the index is comparable: the
           spaces also grow the stored text, which the real tokenizer
           leaves as it is;
- u61tri:  unicode61 plus a contentless trigram table over the same text.
Prints the index bytes (the fts_data blobs) and the file after VACUUM.

usage: search_cjk_size.py [WORKDIR]
"""
import glob
import os
import re
import sqlite3
import struct
import sys
import tempfile

CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def mo_pairs(path):
    """(msgid, msgstr) of a gettext .mo file."""
    d = open(path, "rb").read()
    if len(d) < 28:
        return []
    e = "<" if struct.unpack("<I", d[:4])[0] == 0x950412DE else ">"
    n, oo, to = struct.unpack(e + "3I", d[8:20])
    out = []
    for i in range(n):
        l1, o1 = struct.unpack(e + "2I", d[oo + 8 * i:oo + 8 * i + 8])
        l2, o2 = struct.unpack(e + "2I", d[to + 8 * i:to + 8 * i + 8])
        try:
            out.append((d[o1:o1 + l1].decode(), d[o2:o2 + l2].decode()))
        except UnicodeDecodeError:
            pass
    return out


def corpora():
    cjk, en = set(), set()
    for lang in ("zh_CN", "zh_TW", "ja", "ko"):
        for p in glob.glob("/usr/share/locale/%s/LC_MESSAGES/*.mo" % lang):
            for a, b in mo_pairs(p):
                a = a.split("\x00")[0].replace("\n", " ")
                b = b.split("\x00")[0].replace("\n", " ")
                if 10 <= len(b) <= 120 and CJK.search(b):
                    cjk.add(b)
                if 20 <= len(a) <= 160 and a.isascii():
                    en.add(a)
    return sorted(cjk), sorted(en)


def spaced(t):
    return re.sub("([\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff])", r" \1 ", t)


def build(path, rows, mode):
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.execute("CREATE VIRTUAL TABLE f USING fts5(title, tokenize='unicode61 remove_diacritics 2')")
    if mode == "u61tri":
        db.execute("CREATE VIRTUAL TABLE t USING fts5(title, content='', tokenize='trigram')")
    for r in rows:
        db.execute("INSERT INTO f(title) VALUES(?)", (spaced(r) if mode == "perchar" else r,))
        if mode == "u61tri":
            db.execute("INSERT INTO t(title) VALUES(?)", (r,))
    db.commit()
    idx = db.execute("SELECT sum(length(block)) FROM f_data").fetchone()[0]
    if mode == "u61tri":
        idx += db.execute("SELECT sum(length(block)) FROM t_data").fetchone()[0]
    db.execute("VACUUM")
    db.close()
    return idx, os.path.getsize(path)


def main():
    work = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="search_cjk_size.")
    cjk, en = corpora()
    if not cjk:
        print("no CJK translations under /usr/share/locale", file=sys.stderr)
        return 1
    for name, rows in (("CJK", cjk), ("English", en)):
        print("%s: %d strings, %.1f characters on average, %d bytes of text" % (
            name, len(rows), sum(map(len, rows)) / len(rows), sum(len(r.encode()) for r in rows)))
        for mode in ("u61", "perchar", "u61tri"):
            idx, size = build(os.path.join(work, "%s_%s.db" % (name, mode)), rows, mode)
            print("  %-8s index %9d bytes   file %9d bytes" % (mode, idx, size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
