#!/usr/bin/env python3
"""Journey: a monitoring system scrapes a mirror (issue 51, "metrics").

A node that holds events and has served requests (pages, a 404, a POST)
is scraped as Prometheus scrapes (Accept: application/openmetrics-text...)
and the answer is parsed by a strict parser of the OpenMetrics 1.0 text
format written here (no PyPI): metric families with TYPE, HELP and UNIT
at most once each and before their samples, families never interleaved
or repeated, sample names matching their family's type (counter _total
and _created; histogram _bucket, _count, _sum, _created; info _info),
label names and escapes, no duplicate labels or samples, numbers, counters
not negative, histogram buckets in increasing canonical `le` order ending
in +Inf, cumulative, _count equal to the +Inf bucket, a UNIT that is the
name's suffix, and `# EOF` last. The parser first shows it refuses what
the issue found (a counter family named with its _total) and other
broken expositions. Then: pith_build_info and the process_* families are
there with sane values, and a plain client still gets the Prometheus
text format 0.0.4 (checked for its own rules).

usage: openmetrics.py --pithd D --pithctl C --gen-events G [--out DIR] [--keep]
"""
import math
import os
import re
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_node import SAMPLE, mirror_node, request, run_test  # noqa: E402

PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|Inf|inf)\Z|NaN\Z")
TYPES = {"counter": ("_total", "_created"), "gauge": ("",),
         "histogram": ("_bucket", "_count", "_sum", "_created"),
         "gaugehistogram": ("_bucket", "_gcount", "_gsum"), "stateset": ("",),
         "info": ("_info",), "summary": ("", "_count", "_sum", "_created"), "unknown": ("",)}


class Bad(Exception):
    pass


def number(s, where):
    if not NUMBER.match(s):
        raise Bad("%s: %r is not a number" % (where, s))
    return float(s)


def canonical(f):
    """The canonical text of a float, as OpenMetrics's reference parsers
    print one (Go's and Python's): +Inf, or the shortest repr."""
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return repr(f)


def labels_of(text, where):
    """{name: value} of a label set's inside; strict escapes."""
    out, i = {}, 0
    while i < len(text):
        m = re.match(r"([^=]*)=\"", text[i:])
        if not m or not LABEL.match(m.group(1)):
            raise Bad("%s: bad label name at %r" % (where, text[i:i + 20]))
        name, i, val = m.group(1), i + m.end(), []
        while True:
            if i >= len(text):
                raise Bad("%s: unterminated label value" % where)
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise Bad("%s: bad escape \\%s" % (where, nxt))
                val.append({"n": "\n"}.get(nxt, nxt))
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise Bad("%s: raw newline in a label value" % where)
            else:
                val.append(c)
                i += 1
        if name in out:
            raise Bad("%s: label %s twice" % (where, name))
        out[name] = "".join(val)
        if i < len(text):
            if text[i] != ",":
                raise Bad("%s: expected ',' at %r" % (where, text[i:i + 20]))
            i += 1
            if i == len(text):
                raise Bad("%s: trailing comma in labels" % where)
    return out


def parse_openmetrics(text):
    """Parses an OpenMetrics text exposition strictly. Returns
    {family: {"type", "help", "unit", "samples": [(name, labels, value)]}};
    raises Bad at the first violation."""
    if not text.endswith("# EOF\n") and not text.endswith("# EOF"):
        raise Bad("the exposition does not end with # EOF")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if lines.count("# EOF") != 1 or lines[-1] != "# EOF":
        raise Bad("# EOF is not the last line, once")
    fams, order, cur = {}, [], None
    owner = {}  # sample name -> family
    for no, line in enumerate(lines[:-1], 1):
        where = "line %d" % no
        if line == "":
            raise Bad("%s: empty line" % where)
        if line.startswith("#"):
            m = re.match(r"# (HELP|TYPE|UNIT) (\S+)(?: (.*))?\Z", line, re.S)
            if not m:
                raise Bad("%s: a comment that is not HELP, TYPE or UNIT: %r" % (where, line))
            kind, name, rest = m.group(1), m.group(2), m.group(3) or ""
            if not NAME.match(name):
                raise Bad("%s: bad family name %r" % (where, name))
            if name != cur:
                if name in fams:
                    raise Bad("%s: family %s again after another (interleaved or repeated)"
                              % (where, name))
                fams[name] = {"type": None, "help": None, "unit": None, "samples": [],
                              "points": []}
                order.append(name)
                cur = name
            f = fams[name]
            if f["samples"]:
                raise Bad("%s: %s of %s after its samples" % (where, kind, name))
            key = kind.lower()
            if f[key] is not None:
                raise Bad("%s: %s of %s twice" % (where, kind, name))
            if kind == "TYPE":
                if rest not in TYPES:
                    raise Bad("%s: unknown type %r" % (where, rest))
                for suffix in TYPES[rest]:
                    s = name + suffix
                    if s in owner and owner[s] != name:
                        raise Bad("%s: sample name %s of %s is also %s's" % (where, s, name,
                                                                            owner[s]))
                    owner[s] = name
            elif kind == "HELP":
                if re.search(r'(?<!\\)"|\\[^\\n"]', rest.replace("\\\\", "")):
                    raise Bad("%s: bad escape or raw quote in HELP of %s" % (where, name))
            elif kind == "UNIT":
                if rest and not name.endswith("_" + rest):
                    raise Bad("%s: unit %s is not the suffix of %s" % (where, rest, name))
            f[key] = rest
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: (\S+))?\Z", line, re.S)
        if not m:
            raise Bad("%s: not a sample line: %r" % (where, line))
        sname, ltext, val, ts = m.groups()
        if " # " in line:
            raise Bad("%s: exemplars are not expected here" % where)
        if cur is None or fams[cur]["type"] is None:
            raise Bad("%s: sample %s before any TYPE (strict: every family typed)" % (where, sname))
        f = fams[cur]
        if sname not in [cur + s for s in TYPES[f["type"]]]:
            raise Bad("%s: sample %s does not belong to %s family %s" % (where, sname, f["type"],
                                                                          cur))
        labels = labels_of(ltext or "", where)
        v = number(val, where)
        if ts is not None:
            number(ts, where)
        key = (sname, tuple(sorted(labels.items())))
        if key in {(s[0], tuple(sorted(s[1].items()))) for s in f["samples"]}:
            raise Bad("%s: sample %s%s twice" % (where, sname, labels))
        # one metric point's samples together: a label set (le aside) that
        # ended must not come back
        point = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        if f["points"] and f["points"][-1] != point:
            if point in f["points"]:
                raise Bad("%s: samples of %s%s interleaved with another's" % (where, cur,
                                                                            dict(point)))
        if not f["points"] or f["points"][-1] != point:
            f["points"].append(point)
        if f["type"] == "counter" and (v < 0 or math.isnan(v)):
            raise Bad("%s: counter %s is %s" % (where, sname, val))
        if f["type"] == "info" and v != 1:
            raise Bad("%s: info %s is %s, not 1" % (where, sname, val))
        if f["type"] in ("histogram", "gaugehistogram") and sname.endswith("_bucket"):
            if "le" not in labels:
                raise Bad("%s: bucket without le" % where)
            le = number(labels["le"], where)
            if labels["le"] != canonical(le):
                raise Bad("%s: le=%r is not canonical (%s)" % (where, labels["le"],
                                                              canonical(le)))
        elif "le" in labels and f["type"] == "histogram":
            raise Bad("%s: le on %s" % (where, sname))
        f["samples"].append((sname, labels, v))
    for name in order:
        f = fams[name]
        if f["type"] is None:
            raise Bad("family %s has no TYPE" % name)
        if f["type"] == "counter":
            for p in f["points"]:
                if not any(s[0] == name + "_total" and tuple(sorted(s[1].items())) == p
                           for s in f["samples"]):
                    raise Bad("counter %s%s has no _total" % (name, dict(p)))
        if f["type"] == "histogram":
            for p in f["points"]:
                mine = [s for s in f["samples"]
                        if tuple(sorted((k, x) for k, x in s[1].items() if k != "le")) == p]
                buckets = [(float(s[1]["le"]), s[2]) for s in mine if s[0] == name + "_bucket"]
                if not buckets or not math.isinf(buckets[-1][0]):
                    raise Bad("histogram %s%s does not end in le=+Inf" % (name, dict(p)))
                if any(b[0] >= c[0] for b, c in zip(buckets, buckets[1:])):
                    raise Bad("histogram %s%s: le not increasing" % (name, dict(p)))
                if any(b[1] > c[1] for b, c in zip(buckets, buckets[1:])):
                    raise Bad("histogram %s%s: buckets not cumulative" % (name, dict(p)))
                count = [s[2] for s in mine if s[0] == name + "_count"]
                has_sum = any(s[0] == name + "_sum" for s in mine)
                if has_sum and not count:
                    raise Bad("histogram %s%s: _sum without _count" % (name, dict(p)))
                if count and count[0] != buckets[-1][1]:
                    raise Bad("histogram %s%s: _count %s is not the +Inf bucket %s" % (
                        name, dict(p), count[0], buckets[-1][1]))
    return fams


def check_parser():
    """The parser refuses what it must (else passing proves nothing)."""
    good = ("# TYPE a counter\n# HELP a A thing\na_total 1\n"
            "# TYPE h_seconds histogram\n# UNIT h_seconds seconds\n"
            "h_seconds_bucket{le=\"0.5\"} 0\nh_seconds_bucket{le=\"1.0\"} 1\n"
            "h_seconds_bucket{le=\"+Inf\"} 1\nh_seconds_sum 0.7\nh_seconds_count 1\n"
            "# TYPE i info\ni_info{v=\"a\\\"b\"} 1\n# EOF\n")
    bad = {
        "the issue's clash: a counter family named with _total":
            "# TYPE x_total counter\nx_total 1\n# EOF\n",
        "no # EOF": "# TYPE a counter\na_total 1\n",
        "a 0.0.4 comment": "# TYPE a counter\n# a comment\na_total 1\n# EOF\n",
        "interleaved families":
            "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# TYPE a gauge\na 2\n# EOF\n",
        "le not canonical": "# TYPE h histogram\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\n"
                            "h_count 0\nh_sum 0\n# EOF\n",
        "no +Inf": "# TYPE h histogram\nh_bucket{le=\"1.0\"} 0\nh_count 0\n# EOF\n",
        "count is not +Inf": "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\n"
                             "h_sum 0\n# EOF\n",
        "a label twice": "# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n# EOF\n",
        "a bad escape": "# TYPE a gauge\na{x=\"\\t\"} 1\n# EOF\n",
        "a unit not the suffix": "# TYPE a_bytes gauge\n# UNIT a_bytes seconds\na_bytes 1\n# EOF\n",
        "a gauge clashing with a counter's sample":
            "# TYPE x counter\nx_total 1\n# TYPE x_total gauge\nx_total 1\n# EOF\n",
        "an untyped sample": "a 1\n# EOF\n",
    }
    parse_openmetrics(good)
    for what, text in bad.items():
        try:
            parse_openmetrics(text)
        except Bad:
            continue
        raise AssertionError("the parser accepted %s" % what)


def check_prometheus_004(text):
    """The 0.0.4 text format's own rules: TYPE before samples, names the
    sample (a counter's ends in _total), no # EOF."""
    assert "# EOF" not in text, "0.0.4 with an OpenMetrics end"
    types = {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$", line)
        if m:
            assert m.group(1) not in types, "TYPE %s twice" % m.group(1)
            types[m.group(1)] = m.group(2)
            continue
        if line.startswith("#") or not line:
            continue
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in types or types.get(base) == "histogram", "untyped sample %s" % name
        number(line.rsplit(" ", 1)[1], name)
    for name, typ in types.items():
        if typ == "counter":
            assert name.endswith("_total"), "0.0.4 counter %s without _total" % name
    return types


def body(args, root, nodes):
    check_parser()
    print("ok - the parser refuses the broken expositions it must", flush=True)
    n, base, bodies = mirror_node(args, root, nodes, records=20)
    for path in ("/", "/pith/", "/pith/%s/" % SAMPLE, "/pith/%s/state.json" % SAMPLE,
                 "/nope", "/search?q=dense", "/pith-mirrors.json"):
        request(base + path)
    request(base + "/events", "POST", {"Content-Type": "application/json"}, b"[]")
    st, h, b = request(base + "/metrics", headers={"Accept": PROMETHEUS_ACCEPT})
    text = b.decode("utf-8")
    out = args.out or root
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "metrics.openmetrics.txt"), "w") as f:
        f.write(text)
    assert st == 200 and h["content-type"].startswith("application/openmetrics-text; version=1.0.0"), \
        (st, h.get("content-type"))
    try:
        fams = parse_openmetrics(text)
    except Bad as e:
        raise AssertionError("an OpenMetrics parser refuses /metrics: %s (saved in %s)" % (
            e, os.path.join(out, "metrics.openmetrics.txt")))
    print("ok - /metrics as OpenMetrics: %d families, the strict parser accepts it" % len(fams),
          flush=True)

    def one(fam, sname=None):
        s = [x for x in fams[fam]["samples"] if x[0] == (sname or fam)]
        assert s, "no sample %s" % (sname or fam)
        return s
    assert fams["pith_http_response_body_bytes"]["type"] == "counter"
    assert fams["pith_http_response_body_bytes"]["unit"] == "bytes"
    assert one("pith_http_response_body_bytes", "pith_http_response_body_bytes_total")[0][2] > 0
    assert fams["pith_http_request_duration_seconds"]["type"] == "histogram"
    served = [x for x in fams["pith_http_requests"]["samples"] if x[1].get("code") == "404"]
    assert served and served[0][2] >= 1, "the 404 is not counted"
    assert one("pith_store_events")[0][2] > 0, "the node holds events"
    info = one("pith_build", "pith_build_info")[0]
    assert fams["pith_build"]["type"] == "info" and info[1].get("version") and \
        info[1].get("commit"), info
    for fam, typ in (("process_cpu_seconds", "counter"), ("process_resident_memory_bytes", "gauge"),
                     ("process_virtual_memory_bytes", "gauge"), ("process_open_fds", "gauge"),
                     ("process_max_fds", "gauge"), ("process_start_time_seconds", "gauge")):
        assert fam in fams and fams[fam]["type"] == typ, (fam, fams.get(fam, {}).get("type"))
    rss = one("process_resident_memory_bytes")[0][2]
    vms = one("process_virtual_memory_bytes")[0][2]
    fds = one("process_open_fds")[0][2]
    maxfds = one("process_max_fds")[0][2]
    start = one("process_start_time_seconds")[0][2]
    cpu = one("process_cpu_seconds", "process_cpu_seconds_total")[0][2]
    assert 1 << 20 < rss <= vms, (rss, vms)
    assert 3 <= fds < maxfds, (fds, maxfds)
    assert abs(start - (time.time() - one("pith_uptime_seconds")[0][2])) < 5, start
    assert cpu >= 0
    print("ok - pith_build_info %s; process_*: rss %.0f MiB, %d fds of %d, started %.0f s ago" % (
        info[1], rss / 2**20, fds, maxfds, time.time() - start), flush=True)

    # a plain client: Prometheus text 0.0.4
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        ct, plain = r.headers["Content-Type"], r.read().decode()
    assert ct.startswith("text/plain; version=0.0.4"), ct
    types = check_prometheus_004(plain)
    assert types.get("pith_http_response_body_bytes_total") == "counter"
    assert types.get("pith_build_info") == "gauge"
    print("ok - a plain client gets Prometheus text 0.0.4 (%d families)" % len(types), flush=True)


def add_args(ap):
    ap.add_argument("--out", help="where the scraped text is kept")


if __name__ == "__main__":
    sys.exit(run_test("journey_openmetrics.", body, add_args=add_args))
