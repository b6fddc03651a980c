#!/usr/bin/env python3
"""Layering check for node/: the folders against CMake's own graph (issues 13, 52).

usage: layers_check.py BUILD_DIR [--floors] [--write-doc] [--prefixes] [--quiet]
       layers_check.py --self-test

A folder under node/ is a library: node/F/ holds the sources of one CMake
target, pith_F. The libraries and their link dependencies come from CMake
itself, through its file API (the codemodel-v2 reply under
BUILD_DIR/.cmake/api/v1/reply; tests/CMakeLists.txt asks for it, and when
the reply is missing this script asks for it and reruns `cmake BUILD_DIR`,
which regenerates the build files and builds nothing). A target's
"dependencies" there are the targets it links, directly or through others
(and any add_dependencies(), which this project uses for no library).
Those are CMake's build-order dependencies: round a circle of static
libraries CMake leaves some of the circle's edges out of them, so when a
cycle is reported, calls-up lines about its members may be its echo.
The calls come from the objects built: `nm` ($NM if set, ctest passes
CMake's) lists each object's defined and undefined global symbols. The
includes come from the sources: every #include "..." line in node/**.c/.h.

The check fails (exit 1), one line a violation, when
  calls-up      a file of target T uses a symbol defined in target U of
                another folder, and U is not among T's link dependencies
                (a folder calls into a folder above it, or one beside it
                that it does not declare);
  include-up    a file in folder A includes a header of folder B, and B's
                library is not among the link dependencies of A's targets;
  cycle         folders that call, include or link each other, directly or
                round a circle (one line a circle, with its edges);
  private       a file in folder A includes a header of folder B that is
                private to B: a header is public only when B's README.md
                names it on its "Public header" line; every other header,
                and every *_int.h whatever the README says, is private;
  two-targets   a folder holds the sources of two libraries, a source in
                no target or in two, a target whose sources lie outside
                its folder, or an executable other than the programs
                allowed below;
  readme        a folder without README.md, or whose "May call" line is
                not the folders its library links directly;
  doc           docs/architecture.md's generated block differs from what
                this script computes (--write-doc rewrites it).
The programs: pithd (pithd.c, its only source, beside pith_daemon in
daemon/) and pithctl (cli/: an executable and no library) are the two
executables allowed among node/'s folders.

  exit 0  no violation
  exit 1  at least one violation (printed)
  exit 2  usage error, no CMake reply, or no object files (build first)

--floors prints the folders bottom first: floor 0 links no other node/
folder, floor N links only folders below N (from the CMake graph; a cycle
counts as one entry, written {a b c}). --write-doc rewrites the block of
docs/architecture.md between the markers. --prefixes also lists the
global symbols whose names carry none of their folder's prefixes (its
name, a header's, a type's its headers declare, the file's; a list to
work from, not a failure). --quiet leaves out the summary.
--self-test runs the check on fabricated graphs, one per kind of violation.
"""
import glob
import json
import os
import re
import subprocess
import sys

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DOC = os.path.join("docs", "architecture.md")
BEGIN = "<!-- BEGIN layers_check.py --write-doc: generated from the CMake targets, do not edit -->"
END = "<!-- END layers_check.py --write-doc -->"

# executable -> the folder it may live in (beside that folder's library, if any)
PROGRAMS = {"pithd": "daemon", "pithctl": "cli"}
LIBRARY_TYPES = {"STATIC_LIBRARY", "SHARED_LIBRARY", "MODULE_LIBRARY", "OBJECT_LIBRARY"}

# nm -P types that define a symbol (upper case: global); "U", "w"/"v" are uses.
DEFINED = set("ABCDGRSTVWiu")
UNDEFINED = set("Uwv")


# ---------------------------------------------------------------- reading

def cmake_reply(build):
    """The codemodel's targets: [{name, type, folder dir, build dir, sources, deps}]."""
    reply = os.path.join(build, ".cmake", "api", "v1", "reply")
    if not glob.glob(os.path.join(reply, "index-*.json")):
        query = os.path.join(build, ".cmake", "api", "v1", "query")
        os.makedirs(query, exist_ok=True)
        open(os.path.join(query, "codemodel-v2"), "a").close()
        subprocess.run([os.environ.get("CMAKE") or "cmake", build], check=True,
                       stdout=subprocess.DEVNULL)
    indexes = sorted(glob.glob(os.path.join(reply, "index-*.json")))
    if not indexes:
        return None
    with open(indexes[-1]) as f:
        index = json.load(f)
    cm = [o for o in index["objects"] if o["kind"] == "codemodel"]
    if not cm:
        return None
    with open(os.path.join(reply, cm[0]["jsonFile"])) as f:
        model = json.load(f)
    out = []
    for t in model["configurations"][0]["targets"]:
        with open(os.path.join(reply, t["jsonFile"])) as f:
            tj = json.load(f)
        names = {}
        for d in tj.get("dependencies", []):
            names[d["id"]] = d["id"].split("::")[0]
        out.append({"name": tj["name"], "type": tj["type"],
                    "dir": tj["paths"]["source"], "build": tj["paths"]["build"],
                    "sources": [s["path"] for s in tj.get("sources", [])
                                if not s.get("isGenerated")],
                    "deps": set(names.values())})
    return out


def symbols(obj):
    """(defined, undefined) global symbol names of one object file."""
    out = subprocess.run([os.environ.get("NM") or "nm", "-P", "-g", obj], check=True,
                         capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        if parts[1] in UNDEFINED:
            undefined.add(parts[0])
        elif parts[1] in DEFINED:
            defined.add(parts[0])
    return defined, undefined


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def load(build, src=SRC):
    """The model the checks read, from a build directory and the sources.

    targets: {name: {"type", "folder", "sources": [paths relative to node/], "deps"}}
      for the targets CMake defines in node/'s folders (deps: every target
      linked, directly or not, node/'s or not);
    objects: {source relative to node/: (target, defined symbols, used symbols)};
    files:   {path relative to node/: [the names it #includes "..."]};
    readmes: {folder: README.md's text} for the folders that have one.
    """
    reply = cmake_reply(build)
    if reply is None:
        return None
    targets = {}
    for t in reply:
        parts = t["dir"].replace("\\", "/").split("/")
        if len(parts) < 2 or parts[0] != "node":
            continue
        srcs = [os.path.relpath(os.path.join(src, p), os.path.join(src, "node"))
                for p in t["sources"] if p.endswith(".c")]
        targets[t["name"]] = {"type": t["type"], "folder": parts[1], "sources": srcs,
                              "deps": t["deps"], "build": t["build"]}
    objects = {}
    for name, t in targets.items():
        d = os.path.join(build, t["build"], "CMakeFiles", name + ".dir")
        for o in sorted(glob.glob(os.path.join(d, "**", "*.o"), recursive=True)):
            rel = os.path.relpath(o, d)[:-2]  # "addrbook.c.o" -> "addrbook.c"
            path = os.path.normpath(os.path.join(t["folder"], rel))
            if path in t["sources"]:  # an object of a source gone is left over
                objects[path] = (name,) + symbols(o)
    files = {}
    node = os.path.join(src, "node")
    for path in glob.glob(os.path.join(node, "**", "*.[ch]"), recursive=True):
        with open(path, errors="replace") as f:
            files[os.path.relpath(path, node)] = INCLUDE.findall(f.read())
    readmes = {}
    for path in glob.glob(os.path.join(node, "*", "README.md")):
        with open(path) as f:
            readmes[os.path.basename(os.path.dirname(path))] = f.read()
    folders = sorted(os.path.basename(os.path.dirname(p))
                     for p in glob.glob(os.path.join(node, "*", "CMakeLists.txt")))
    return {"targets": targets, "objects": objects, "files": files, "readmes": readmes,
            "folders": folders}


# ---------------------------------------------------------------- graph

def sccs(nodes, succ):
    """Tarjan's strongly connected components, iteratively; a component
    comes after every component it depends on."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def readme_line(text, key):
    """The value of a README's "Key: value" line (the first), or None; the
    line may be a list item and the key bold: "- **Owns:** ..."."""
    m = re.search(r"^(?:[-*] )?\**%s:\**[ \t]*(.*)$" % re.escape(key), text or "", re.M | re.I)
    return m.group(1).strip() if m else None


def unparenthesized(line):
    """line without its (asides): what a README line names, not what it says of it."""
    return re.sub(r"\([^()]*\)", "", line or "")


def public_headers(model, folder):
    """The headers README.md names on its "Public header(s)" line (no *_int.h)."""
    text = model["readmes"].get(folder)
    line = readme_line(text, "Public headers") or readme_line(text, "Public header") or ""
    return set(h for h in re.findall(r"[A-Za-z0-9_]+\.h", unparenthesized(line))
               if not h.endswith("_int.h"))


def link_graph(model):
    """folder -> the folders of node/ its targets link (directly or not)."""
    tg = model["targets"]
    succ = {f: set() for f in model["folders"]}
    for t in tg.values():
        succ.setdefault(t["folder"], set())
        for d in t["deps"]:
            if d in tg and tg[d]["folder"] != t["folder"]:
                succ[t["folder"]].add(tg[d]["folder"])
    return succ


def direct(succ):
    """The transitive reduction of a closed, acyclic graph: the folders each
    one links that it does not already reach through another."""
    out = {}
    for f, ds in succ.items():
        out[f] = set(d for d in ds if not any(d in succ.get(e, ()) for e in ds if e != d))
    return out


def floors(model):
    """[(floor, [component, ...])] bottom first; a component is a tuple of folders."""
    succ = link_graph(model)
    comps = sccs(sorted(succ), succ)
    comp_of = {f: tuple(c) for c in comps for f in c}
    floor = {}
    for c in comps:
        deps = set(comp_of[d] for f in c for d in succ[f]) - {tuple(c)}
        floor[tuple(c)] = 1 + max((floor[d] for d in deps), default=-1)
    top = max(floor.values(), default=-1)
    return [(n, sorted(c for c, fl in floor.items() if fl == n)) for n in range(top + 1)]


# ---------------------------------------------------------------- checks

def check(model):
    """The violations, one string each."""
    tg = model["targets"]
    out = []

    # two-targets: a folder holds one library's sources
    owner_of_src = {}
    libs = {}
    for name, t in sorted(tg.items()):
        if t["type"] in LIBRARY_TYPES:
            libs.setdefault(t["folder"], []).append(name)
        elif t["type"] == "EXECUTABLE" and PROGRAMS.get(name) != t["folder"]:
            out.append("two-targets: node/%s/ defines the executable %s, not one of the programs "
                       "allowed (%s)" % (t["folder"], name,
                                         ", ".join("%s in %s/" % p for p in sorted(PROGRAMS.items()))))
        for s in t["sources"]:
            if s.split(os.sep)[0] != t["folder"]:
                out.append("two-targets: %s (node/%s/) builds node/%s, a source outside its folder"
                           % (name, t["folder"], s))
            if s in owner_of_src:
                out.append("two-targets: node/%s is a source of both %s and %s"
                           % (s, owner_of_src[s], name))
            owner_of_src.setdefault(s, name)
    for folder, names in sorted(libs.items()):
        if len(names) > 1:
            out.append("two-targets: node/%s/ holds the sources of %d libraries: %s"
                       % (folder, len(names), " ".join(names)))
    for path in sorted(model["files"]):
        if path.endswith(".c") and path not in owner_of_src:
            out.append("two-targets: node/%s is a source of no target of its folder" % path)

    # calls-up: a use of a symbol defined in a target not linked
    owner = {}  # symbol -> source defining it
    for src, (t, defs, _) in sorted(model["objects"].items()):
        for s in defs:
            owner.setdefault(s, src)
    calls = {}  # (folder a, folder b) -> {(file a, file b): symbols}
    bad = {}
    for a, (ta, _, uses) in sorted(model["objects"].items()):
        for s in uses:
            b = owner.get(s)
            if b is None or b == a:
                continue
            tb = model["objects"][b][0]
            fa, fb = tg[ta]["folder"], tg[tb]["folder"]
            if fa != fb:
                calls.setdefault((fa, fb), {}).setdefault((a, b), set()).add(s)
            if ta != tb and tb not in tg[ta]["deps"]:
                bad.setdefault((a, b, ta, tb), set()).add(s)
    for (a, b, ta, tb), syms in sorted(bad.items()):
        out.append("calls-up: node/%s uses %s, defined in node/%s (%s), which %s does not link"
                   % (a, " ".join(sorted(syms)), b, tb, ta))

    # includes: private headers, and headers of folders not linked
    by_name = {}
    for path in model["files"]:
        if path.endswith(".h"):
            by_name.setdefault(os.path.basename(path), []).append(path)
    linked = link_graph(model)
    includes = {}  # (folder a, folder b) -> [(file a, header b)]
    for path, incs in sorted(model["files"].items()):
        fa = path.split(os.sep)[0]
        for inc in incs:
            here = os.path.normpath(os.path.join(os.path.dirname(path), inc))
            if here in model["files"]:
                target = here
            elif os.path.normpath(inc) in model["files"]:
                target = os.path.normpath(inc)
            elif len(by_name.get(os.path.basename(inc), [])) == 1:
                target = by_name[os.path.basename(inc)][0]
            else:
                continue  # proto/, store/, the system, or generated
            fb = target.split(os.sep)[0]
            if fb == fa or os.sep not in target:
                continue
            includes.setdefault((fa, fb), []).append((path, target))
            if os.path.basename(target) not in public_headers(model, fb):
                out.append("private: node/%s includes node/%s, private to %s/"
                           % (path, target, fb))
            elif fb not in linked.get(fa, ()):
                out.append("include-up: node/%s includes node/%s, but no target of %s/ links %s/'s"
                           " library" % (path, target, fa, fb))

    # cycles: folders that call, include or link each other
    succ = {f: set(ds) for f, ds in linked.items()}
    for (fa, fb) in list(calls) + list(includes):
        succ.setdefault(fa, set()).add(fb)
        succ.setdefault(fb, set())
    for comp in sccs(sorted(succ), succ):
        if len(comp) < 2:
            continue
        edges = []
        for fa in comp:
            for fb in sorted(succ[fa] & set(comp)):
                how = []
                if fb in linked.get(fa, ()):
                    how.append("links")
                by_file = calls.get((fa, fb), {})
                if by_file:
                    (a, b), syms = sorted(by_file.items())[0]
                    how.append("calls: %s -> %s %s%s" % (a, b, sorted(syms)[0],
                                                         " ..." if len(by_file) > 1 or len(syms) > 1
                                                         else ""))
                incs = includes.get((fa, fb), [])
                if incs:
                    how.append("includes: %s -> %s%s" % (incs[0][0], incs[0][1],
                                                         " ..." if len(incs) > 1 else ""))
                edges.append("%s -> %s (%s)" % (fa, fb, "; ".join(how)))
        out.append("cycle: %s: %s" % (" ".join(comp), ", ".join(edges)))

    # readme: one per folder, its "May call" line the folders linked directly
    lower = direct(linked)
    for folder in model["folders"]:
        text = model["readmes"].get(folder)
        if text is None:
            out.append("readme: node/%s/ has no README.md" % folder)
            continue
        line = readme_line(text, "May call")
        if line is None:
            out.append("readme: node/%s/README.md has no \"May call:\" line" % folder)
            continue
        said = set(w for w in re.findall(r"[a-z]+", unparenthesized(line)) if w in model["folders"])
        if said != lower.get(folder, set()):
            out.append("readme: node/%s/README.md says it may call %s; CMake links %s"
                       % (folder, " ".join(sorted(said)) or "nothing",
                          " ".join(sorted(lower.get(folder, ()))) or "nothing"))
    return out


def unprefixed(model, src=SRC):
    """[(file, symbol)]: global symbols defined in node/ whose name starts with
    none of its folder's prefixes (docs/STYLE.md, "Names"): the folder's
    name, a header's name in the folder, a type (NAME_t) its headers
    declare, or the file's own name. Reported by --prefixes, not a failure."""
    prefixes = {}
    for path in model["files"]:
        folder = path.split(os.sep)[0]
        p = prefixes.setdefault(folder, {folder})
        if path.endswith(".h"):
            p.add(os.path.basename(path)[:-2])
            try:
                with open(os.path.join(src, "node", path), errors="replace") as f:
                    p.update(re.findall(r"\b([a-z][a-z0-9_]*)_t\b", f.read()))
            except OSError:
                pass
    out = []
    for path, (_, defs, _) in sorted(model["objects"].items()):
        folder = path.split(os.sep)[0]
        own = prefixes.get(folder, set()) | {os.path.basename(path)[:-2]}
        for sym in sorted(defs):
            if sym != "main" and not any(sym == q or sym.startswith(q + "_") for q in own):
                out.append((path, sym))
    return out


# ---------------------------------------------------------------- the doc

def doc_block(model):
    """docs/architecture.md's generated part: the floors, drawn and tabled."""
    tg = model["targets"]
    lower = direct(link_graph(model))
    fl = floors(model)
    lib_of = {}
    below = {}  # folder -> the libraries outside node/ it links (proto, store)
    for name, t in sorted(tg.items()):
        if t["type"] in LIBRARY_TYPES:
            lib_of.setdefault(t["folder"], []).append("`%s`" % name)
        elif t["type"] == "EXECUTABLE":
            lib_of.setdefault(t["folder"], []).append("`%s` (program)" % name)
        below.setdefault(t["folder"], set()).update(
            d[len("pith_"):] for d in t["deps"] if d.startswith("pith_") and d not in tg)
    lines = [BEGIN, "", "```"]
    for n, comps in reversed(fl):
        for k, folder in enumerate(f for c in comps for f in c):
            lines.append("%-9s %-8s -> %s" % ("floor %d" % n if k == 0 else "", folder,
                                               " ".join(sorted(lower.get(folder, ()))) or "(no folder)"))
    lines.append("%-9s %s" % ("below", "proto/  store/  (no libevent)"))
    lines += ["```", "",
              "| floor | folder | library | owns | may call (directly; and all they call) | threads |",
              "|---|---|---|---|---|---|"]
    for n, comps in fl:
        for c in comps:
            for folder in c:
                text = model["readmes"].get(folder, "")
                lines.append("| %d | [node/%s/](../node/%s/README.md) | %s | %s | %s | %s |" % (
                    n, folder, folder, ", ".join(lib_of.get(folder, [])) or "-",
                    readme_line(text, "Owns") or "?",
                    "; ".join(x for x in (", ".join(sorted(lower.get(folder, ()))),
                                          ", ".join("`%s/`" % b for b in sorted(below.get(folder, ()))))
                              if x) or "-",
                    readme_line(text, "Threads") or "?"))
    lines += ["", END]
    return "\n".join(lines) + "\n"


def doc_check(model, src, write):
    path = os.path.join(src, DOC)
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return ["doc: %s is missing" % DOC]
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        return ["doc: %s has no generated block (markers %s ... %s)" % (DOC, BEGIN, END)]
    new = text[:i] + doc_block(model) + text[j + len(END) + 1:]
    if new == text:
        return []
    if write:
        with open(path, "w") as f:
            f.write(new)
        print("layers_check: rewrote %s" % DOC)
        return []
    return ["doc: %s's floors differ from the CMake graph (run tests/layers_check.py BUILD_DIR "
            "--write-doc)" % DOC]


# ---------------------------------------------------------------- self-test

def fabricated():
    """A small correct model: base <- net <- mesh, and the program folder cli."""
    def t(folder, typ, sources, deps):
        return {"type": typ, "folder": folder, "sources": sources, "deps": set(deps), "build": ""}
    readme = "Owns: x\nPublic header: %s.h\nMay call: %s\nThreads: none\n"
    return {
        "folders": ["base", "cli", "mesh", "net"],
        "targets": {"pith_base": t("base", "STATIC_LIBRARY", ["base/log.c"], []),
                    "pith_net": t("net", "STATIC_LIBRARY", ["net/net.c"], ["pith_base"]),
                    "pith_mesh": t("mesh", "STATIC_LIBRARY", ["mesh/mesh.c"],
                                   ["pith_net", "pith_base"]),
                    "pithctl": t("cli", "EXECUTABLE", ["cli/pithctl.c"], ["pith_base"])},
        "objects": {"base/log.c": ("pith_base", {"log_msg"}, set()),
                    "net/net.c": ("pith_net", {"net_send"}, {"log_msg"}),
                    "mesh/mesh.c": ("pith_mesh", {"mesh_run"}, {"net_send", "log_msg"}),
                    "cli/pithctl.c": ("pithctl", {"main"}, {"log_msg"})},
        "files": {"base/log.c": ["log.h"], "base/base.h": [], "base/log_int.h": [],
                  "net/net.c": ["net.h", "base.h"], "net/net.h": [],
                  "mesh/mesh.c": ["net.h", "mesh.h"], "mesh/mesh.h": [],
                  "cli/pithctl.c": ["base.h"]},
        "readmes": {"base": readme % ("base", "proto"), "net": readme % ("net", "base"),
                    "mesh": readme % ("mesh", "net"), "cli": readme % ("cli", "base")},
    }


def self_test():
    cases = []

    def case(name, want, change):
        m = fabricated()
        change(m)
        got = check(m)
        ok = (not got) if want is None else any(g.startswith(want) for g in got)
        cases.append((name, ok, got))

    case("a correct graph passes", None, lambda m: None)

    def calls_up(m):  # net calls mesh, which it does not link
        m["objects"]["net/net.c"][2].add("mesh_run")
    case("a call into a folder above is caught", "calls-up", calls_up)
    case("the call up is also a circle", "cycle", calls_up)

    def link_cycle(m):  # base links net, net links base
        m["targets"]["pith_base"]["deps"].add("pith_net")
    case("two folders that link each other are a cycle", "cycle", link_cycle)

    def private(m):
        m["files"]["mesh/mesh.c"].append("log_int.h")
    case("a private header of another folder is caught", "private", private)

    def unlisted(m):
        m["files"]["base/addr.h"] = []
        m["files"]["net/net.c"].append("addr.h")
    case("a header the README does not name is private", "private", unlisted)

    def include_up(m):
        m["files"]["base/log.c"].append("net.h")
    case("including a header of a folder not linked is caught", "include-up", include_up)
    case("an include against the links is also a circle", "cycle", include_up)

    def two_libs(m):
        m["targets"]["pith_net2"] = {"type": "STATIC_LIBRARY", "folder": "net",
                                     "sources": ["net/net2.c"], "deps": set(), "build": ""}
        m["files"]["net/net2.c"] = []
    case("a folder with two libraries is caught", "two-targets", two_libs)

    def stray(m):
        m["files"]["net/stray.c"] = []
    case("a source in no target is caught", "two-targets", stray)

    def elsewhere(m):
        m["targets"]["pith_mesh"]["sources"].append("net/net.c")
    case("a target building another folder's source is caught", "two-targets", elsewhere)

    def program(m):
        m["targets"]["tool"] = {"type": "EXECUTABLE", "folder": "net", "sources": [],
                                "deps": set(), "build": ""}
    case("an executable that is not one of the programs is caught", "two-targets", program)

    def readme(m):
        m["readmes"]["mesh"] = m["readmes"]["mesh"].replace("May call: net", "May call: base")
    case("a README whose May call line is wrong is caught", "readme", readme)

    failed = 0
    for name, ok, got in cases:
        print("%s %s" % ("ok  " if ok else "FAIL", name))
        if not ok:
            failed += 1
            for g in got:
                print("     got: " + g)
    fl = floors(fabricated())
    want = [(0, [("base",)]), (1, [("cli",), ("net",)]), (2, [("mesh",)])]
    print("%s floors of the fabricated graph" % ("ok  " if fl == want else "FAIL"))
    failed += fl != want
    return 1 if failed else 0


# ---------------------------------------------------------------- main

def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    flags = set(a for a in argv if a.startswith("--"))
    if flags == {"--self-test"} and not args:
        return self_test()
    if len(args) != 1 or flags - {"--floors", "--quiet", "--write-doc", "--prefixes"}:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    model = load(args[0])
    if model is None:
        print("layers_check: no CMake file API reply under %s/.cmake/api/v1/reply" % args[0],
              file=sys.stderr)
        return 2
    if not model["objects"]:
        print("layers_check: no object files of node/'s targets under %s (build first)"
              % args[0], file=sys.stderr)
        return 2
    bad = check(model) + doc_check(model, SRC, "--write-doc" in flags)
    for line in bad:
        print(line)
    if "--quiet" not in flags:
        print("layers_check: %d folders, %d targets, %d objects, %d violation(s)"
              % (len(model["folders"]), len(model["targets"]), len(model["objects"]), len(bad)))
    if "--prefixes" in flags:
        for path, sym in unprefixed(model):
            print("prefix: node/%s defines %s, which starts with none of its folder's prefixes"
                  % (path, sym))
    if "--floors" in flags:
        for n, comps in floors(model):
            print("floor %d: %s" % (n, " ".join("{%s}" % " ".join(c) if len(c) > 1 else c[0]
                                                  for c in comps)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
