#!/usr/bin/env python3
"""Layering check for node/: no cycles between modules (issue 13).

usage: layers_check.py BUILD_DIR [--floors] [--quiet]

Reads the object files CMake built from node/'s sources (every
BUILD_DIR/node/CMakeFiles/*.dir, e.g. pithd.dir, pith_http.dir, and
pith_node.dir or pith_ingest.dir once they exist), lists each object's
defined and undefined global symbols with `nm`, and builds the file-level
call graph: file A -> file B when A uses a symbol that B defines. Files are
grouped into modules by MODULES below; every cycle between modules (a
strongly connected component of more than one module) is printed with the
edges that form it and the symbols behind each edge.

  exit 0  no cycles
  exit 1  at least one cycle (printed)
  exit 2  usage error, or no object files found (build first)

nm is $NM if set (ctest passes CMake's), else the one on PATH.

--floors also prints the modules in topological order, bottom first: floor
0 uses no other node/ module, floor N uses only modules below N. A cycle
counts as one entry, written {a b c}. --quiet leaves out the summary line.

Editing the module table: a module is a name and the node/ source files it
is made of (paths relative to node/). A file listed nowhere is a module of
its own, named after the file without ".c". Files listed that do not exist
(yet) are ignored, so the table can name a restructuring's files ahead of
it. A file compiled into two targets (pithd and a library) counts once.
"""
import glob
import os
import subprocess
import sys

# module -> files (relative to node/). Everything else: one file, one module.
MODULES = {
    "addrbook": ["addrbook.c", "addrbook_file.c", "addrbook_ctl.c", "addrbook_inbound.c"],
    "relay": ["relay.c", "relay_bundle.c", "relay_inv.c"],
    "sync": ["sync.c", "sync_ctl.c"],
    "follower": ["follower.c", "follower_feed.c"],
    "node": ["node.c", "node_ctl.c", "node_http.c", "node_config.c"],
    "ingest": ["ingest.c", "ingest_core.c", "ingest_validate.c"],
    "http": ["http.c", "http_conn.c", "http_resolve.c", "http_post.c", "http_want.c",
             "http_pool.c"],
    "render": ["http_render.c", "http_uri.c", "http_doc.c", "http_views.c", "http_page.c",
               "http_browse.c", "http_search.c", "http_bib.c", "http_accept.c", "http_date.c"],
    "search": ["search.c", "search_query.c", "search_text.c"],
    "metrics": ["metrics.c", "metrics_process.c"],
}

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "node")

# nm -P types that define a symbol (upper case: global). "U" and "w"/"v"
# (weak undefined) are uses.
DEFINED = set("ABCDGRSTVWiu")
UNDEFINED = set("Uwv")


def object_files(build):
    """{source path relative to node/: object path}, one object per source."""
    objs = {}
    for d in sorted(glob.glob(os.path.join(build, "node", "CMakeFiles", "*.dir"))):
        for o in sorted(glob.glob(os.path.join(d, "**", "*.o"), recursive=True)):
            src = os.path.relpath(o, d)[:-2]  # "addrbook.c.o" -> "addrbook.c"
            # an object whose source is gone is left over from an older build
            if src.endswith((".c", ".cc", ".cpp")) and os.path.exists(os.path.join(NODE_DIR, src)):
                # built into two targets, or moved between them: the newest
                if src not in objs or os.path.getmtime(o) > os.path.getmtime(objs[src]):
                    objs[src] = o
    return objs


def symbols(obj):
    """(defined, undefined) global symbol names of one object file."""
    out = subprocess.run([os.environ.get("NM") or "nm", "-P", "-g", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind in UNDEFINED:
            undefined.add(name)
        elif kind in DEFINED:
            defined.add(name)
    return defined, undefined


def module_of(src):
    for mod, files in MODULES.items():
        if src in files:
            return mod
    base = os.path.basename(src)
    return base[:-2] if base.endswith(".c") else base


def sccs(nodes, succ):
    """Tarjan's strongly connected components, iteratively."""
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


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    flags = set(a for a in argv if a.startswith("--"))
    if len(args) != 1 or flags - {"--floors", "--quiet"}:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    build = args[0]
    objs = object_files(build)
    if not objs:
        print("layers_check: no object files under %s/node/CMakeFiles/*.dir (build first)"
              % build, file=sys.stderr)
        return 2

    defs, uses = {}, {}
    owner = {}  # symbol -> source file defining it
    for src, o in objs.items():
        defs[src], uses[src] = symbols(o)
        for s in defs[src]:
            owner.setdefault(s, src)

    # file graph, lifted to modules: (module A, module B) -> {(file a, file b): symbols}
    mods = sorted(set(module_of(s) for s in objs))
    succ = {m: set() for m in mods}
    edges = {}
    for a in objs:
        for s in uses[a]:
            b = owner.get(s)
            if b is None or b == a:
                continue
            ma, mb = module_of(a), module_of(b)
            if ma == mb:
                continue
            succ[ma].add(mb)
            edges.setdefault((ma, mb), {}).setdefault((a, b), set()).add(s)

    comps = sccs(mods, succ)
    cycles = [c for c in comps if len(c) > 1]
    quiet = "--quiet" in flags
    if not quiet:
        print("layers_check: %d files in %d modules, %d module edges, %d cycle(s)"
              % (len(objs), len(mods), len(edges), len(cycles)))
    for i, comp in enumerate(cycles, 1):
        members = set(comp)
        print("cycle %d: %s" % (i, " ".join(comp)))
        for (ma, mb), by_file in sorted(edges.items()):
            if ma not in members or mb not in members:
                continue
            for (a, b), syms in sorted(by_file.items()):
                print("  %s -> %s  (%s -> %s): %s" % (ma, mb, a, b, " ".join(sorted(syms))))

    if "--floors" in flags:
        comp_of = {m: tuple(c) for c in comps for m in c}
        floor = {}
        # Tarjan emits components in reverse topological order: a component
        # comes after every component it depends on.
        for c in comps:
            deps = set(comp_of[d] for m in c for d in succ[m]) - {tuple(c)}
            floor[tuple(c)] = 1 + max((floor[d] for d in deps), default=-1)
        top = max(floor.values(), default=-1)
        for f in range(top + 1):
            names = sorted(("{%s}" % " ".join(c)) if len(c) > 1 else c[0]
                           for c, fl in floor.items() if fl == f)
            print("floor %d: %s" % (f, " ".join(names)))
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
