#!/usr/bin/env python3
"""Summarises tests/bench/bench_http.sh's results.txt as a Markdown table:
per route and ingest setting, the median and range over the rounds.

usage: bench_http_table.py RESULTS RATE
"""
import re
import statistics
import sys


def main():
    path, rate = sys.argv[1], sys.argv[2]
    paced = "paced %s/s" % rate
    rows = {}
    for line in open(path):
        kv = dict(re.findall(r"(\w+)=([^ ]+)", line.strip()))
        if "rps" not in kv:
            print("# a run failed: " + line.strip())
            continue
        ing = kv.get("ingest_rate", "none")
        ing = "none" if ing == "none" else ("unpaced" if ing == "0" else paced)
        r = rows.setdefault((kv["mode"], ing), {"rps": [], "p50": [], "p99": [], "ing": [],
                                                "bad": 0})
        r["rps"].append(float(kv["rps"]))
        r["p50"].append(float(kv["p50_ms"]))
        r["p99"].append(float(kv["p99_ms"]))
        r["bad"] += int(kv["errors"]) + int(kv["non2xx"])
        if "stored" in kv:
            r["ing"].append(float(kv["rate"]))

    def f(v, fmt):
        return "%s (%s-%s)" % (fmt % statistics.median(v), fmt % min(v), fmt % max(v))

    print("| route | ingest | req/s | p50 ms | p99 ms | events stored/s | errors |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for mode in ("state", "resolve"):
        for ing in ("none", paced, "unpaced"):
            r = rows.get((mode, ing))
            if not r:
                continue
            print("| %s | %s | %s | %s | %s | %s | %d |" % (
                "state.json" if mode == "state" else "resolve", ing, f(r["rps"], "%.0f"),
                f(r["p50"], "%.2f"), f(r["p99"], "%.2f"),
                f(r["ing"], "%.0f") if r["ing"] else "-", r["bad"]))


if __name__ == "__main__":
    main()
