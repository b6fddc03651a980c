#!/usr/bin/env python3
"""Compaction cost per column family, from RocksDB's LOG (on demand, not in
the suite; docs/performance.md at 262f3c4, issue 17).

    tests/bench/rocksdb_log_cf.py [--until TIME] LOG [LOG.old.* ...]

The store must have run with PITH_ROCKSDB_LOG=info, which makes RocksDB
log each job: "[family] [JOB n] Compacting ..." names the family and
"compaction_finished" (EVENT_LOG_v1) gives its CPU and bytes written, and
"table_file_creation" of a flush job the bytes flushed.
Prints, per family: compaction jobs, their CPU seconds, the MB its flushes
wrote, the MB its compactions wrote, and their ratio (the compactions'
write amplification).
--until TIME counts only the jobs that ended by TIME, as pithd's log writes
it (2026-12-06T01:12:51.271Z: the "sync: caught up" line of a catch-up),
so that what ran inside a catch-up's window is told from what its end put
off (docs/performance.md at 262f3c4, issue 17, session 36).
"""
import json
import re
import sys

FAM = re.compile(r"\[([^\]]+)\] \[JOB (\d+)\] (Compacting|Flushing memtable)")
EV = re.compile(r"EVENT_LOG_v1 (\{.*\})")


def stamp(text):
    """A time as its digits (and the dot before its fraction), which sort
    as the times do: RocksDB's 2026/12/06-01:12:51.271234 and pithd's
    2026-12-06T01:12:51.271Z alike."""
    return "".join(c for c in text if c.isdigit() or c == ".")


def main(paths, until=None):
    job_cf = {}
    rows = {}

    def row(cf):
        return rows.setdefault(cf, {"jobs": 0, "cpu": 0, "written": 0, "flushed": 0})

    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                m = FAM.search(line)
                if m:
                    job_cf[(path, int(m.group(2)))] = (m.group(1), m.group(3) == "Compacting")
                    continue
                m = EV.search(line)
                if not m:
                    continue
                try:
                    e = json.loads(m.group(1))
                except ValueError:
                    continue
                cf, compacting = job_cf.get((path, e.get("job")), (None, False))
                if cf is None:
                    continue
                if until is not None and stamp(line.split(" ", 1)[0]) > until:
                    continue
                if e.get("event") == "compaction_finished":
                    r = row(cf)
                    r["jobs"] += 1
                    r["cpu"] += e.get("compaction_time_cpu_micros", 0)
                    r["written"] += e.get("total_output_size", 0)
                elif e.get("event") == "table_file_creation" and not compacting:
                    row(cf)["flushed"] += e.get("file_size", 0)
    tot = {"jobs": 0, "cpu": 0, "written": 0, "flushed": 0}
    print("%-14s %5s %9s %11s %11s %6s" % ("family", "jobs", "CPU s", "flushed MB", "written MB", "W-amp"))
    for cf, r in sorted(rows.items(), key=lambda kv: -kv[1]["cpu"]):
        for k in tot:
            tot[k] += r[k]
        wa = r["written"] / r["flushed"] if r["flushed"] else 0
        print("%-14s %5d %9.1f %11.0f %11.0f %6.2f" % (cf, r["jobs"], r["cpu"] / 1e6, r["flushed"] / 1e6,
                                                        r["written"] / 1e6, wa))
    wa = tot["written"] / tot["flushed"] if tot["flushed"] else 0
    print("%-14s %5d %9.1f %11.0f %11.0f %6.2f" % ("total", tot["jobs"], tot["cpu"] / 1e6, tot["flushed"] / 1e6,
                                                    tot["written"] / 1e6, wa))


if __name__ == "__main__":
    args = sys.argv[1:]
    until = None
    if args[:1] == ["--until"] and len(args) >= 2:
        until = stamp(args[1])
        args = args[2:]
    if not args:
        sys.exit(__doc__.strip())
    main(args, until)
