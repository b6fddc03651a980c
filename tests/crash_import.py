#!/usr/bin/env python3
"""Crash safety of `pithctl import`: kill -9 at random moments, restart.

Generates N signed events (default 100,000; all event kinds, many records),
then several times starts `pithctl import --progress-file` and kills it with
SIGKILL at a random moment, each time checking the store as the crash left
it:
  - every line the import had reported as stored ("stored N through F:L",
    written only after the batch holding line L was committed and synced,
    or with --no-wal, flushed) has its event in the store;
  - the store holds nothing that is not in the file;
  - `pithctl check` passes: every event has its subj and time entries and
    every entry its event (no half-written batch), and every cached state,
    record summary and counter equals a fresh recomputation.
Finally the import runs to completion and everything is checked once more.

usage: crash_import.py PITHCTL GEN_EVENTS [--events N] [--kills K] [--seed S]
         [--per-record E] [--events-file FILE --key KEY] [--horizon SECONDS]
         [--no-wal [--write-buffer-mb MB]]

Without --no-wal every import runs with --wal (each commit synced to the
log); with it, without the log, as a large import of files does by default.

At the registry's shape and scale (issue 17; on demand, minutes per kill):
  crash_import.py PITHCTL GEN --events 1000000 --per-record 2 --kills 3 \
      --events-file /work/scale-data/events-1000000-2.jsonl \
      --key /work/scale-data/key.json --horizon 200 [--no-wal --write-buffer-mb 0]
(--events-file and --key reuse events generated before, e.g. by
tests/bench/bench_scale.sh; --horizon is how late the kills fall before an
uninterrupted import has shown how long one takes.)
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("pithctl")
ap.add_argument("gen")
ap.add_argument("--events", type=int, default=100000)
ap.add_argument("--kills", type=int, default=6)
ap.add_argument("--seed", type=int, default=int(time.time()))
ap.add_argument("--per-record", type=int, default=10)
ap.add_argument("--events-file")
ap.add_argument("--key")
ap.add_argument("--horizon", type=float, default=3.0)
ap.add_argument("--no-wal", action="store_true",
                help="import without the write-ahead log (pithctl import --no-wal: durable "
                     "at RocksDB's atomic flushes; the default for large files)")
ap.add_argument("--write-buffer-mb", type=int, default=4,
                help="with --no-wal: the document families' memtables in MiB (the rest a "
                     "quarter), so that flushes fall among the kills; 0 for the store's own")
a = ap.parse_args()
rng = random.Random(a.seed)
n = 0
ID = re.compile(rb'"event_id":"(sha256:[0-9a-f]{64})"')


def ok(msg):
    global n
    n += 1
    print(f"ok {n} - {msg}", flush=True)


def fail(msg):
    global n
    n += 1
    print(f"not ok {n} - {msg} (seed {a.seed})", flush=True)
    sys.exit(1)


def first_id(line):
    # canonical JSON: the top-level event_id is the first (only content_sha256
    # and created_at, both strings, sort before it)
    m = ID.search(line)
    return m.group(1) if m else None


with tempfile.TemporaryDirectory() as t:
    events = a.events_file or os.path.join(t, "events.jsonl")
    key = a.key or os.path.join(t, "key.json")
    store = os.path.join(t, "store")
    progress = os.path.join(t, "progress")
    per = a.per_record
    t0 = time.time()
    if not a.events_file:
        r = subprocess.run([a.gen, "--records", str((a.events + per - 1) // per), "--per-record",
                            str(per), "--seed", str(a.seed % 1000 + 1), "--key-out", key, events])
        if r.returncode:
            fail("gen_events runs")
    offsets = []       # byte offset of each line
    ids = []
    with open(events, "rb") as f:
        pos = 0
        for l in f:
            offsets.append(pos)
            pos += len(l)
            ids.append(first_id(l))
    if len(ids) < a.events or None in ids:
        fail("the generated file has an event id on every line")
    ok(f"{'read' if a.events_file else 'generated'} {len(ids)} events in {time.time() - t0:.1f} s "
       f"(seed {a.seed})")
    base = [a.pithctl, "--store", store, "--trust-key", key]
    wal = ["--no-wal"] if a.no_wal else ["--wal"]
    # without the log, a commit is durable at the next flush: small memtables
    # (4 MiB for documents, 1 for the rest) make flushes every few thousand
    # events, so that kills fall between them
    env = None
    if a.no_wal and a.write_buffer_mb > 0:
        env = dict(os.environ, PITH_STORE_WRITE_BUFFER_MB=str(a.write_buffer_mb))

    def stored_ids():
        # a kill before the new store was renamed into place leaves no
        # store at all (never a half-made one): nothing stored
        if not os.path.exists(os.path.join(store, "CURRENT")):
            return []
        r = subprocess.run(base + ["export"], capture_output=True)
        if r.returncode:
            fail("export after a crash: " + r.stderr.decode())
        return [first_id(l) for l in r.stdout.splitlines()]

    def audit(what):
        if not os.path.exists(os.path.join(store, "CURRENT")):
            return
        r = subprocess.run(base + ["check"], capture_output=True, text=True)
        if r.returncode:
            fail(f"check after {what}:\n{r.stdout[:3000]}{r.stderr}")

    claimed = 0        # lines reported stored, over all runs
    duration = None    # of an uninterrupted import, once known
    kills = 0
    for attempt in range(a.kills * 3):
        if kills == a.kills:
            break
        if os.path.exists(progress):
            os.unlink(progress)
        # restart from the first line (all earlier lines are duplicates
        # then) or, like an operator with --progress-file, after the last
        # line reported stored, fed on stdin
        skip = claimed if claimed < len(ids) and rng.random() < 0.7 else 0
        src = open(events, "rb")
        src.seek(offsets[skip])
        # kill somewhere in the run: early, mid-batch, during the final flush
        horizon = duration if duration else a.horizon
        delay = rng.uniform(0.05, horizon * 1.05)
        started = time.time()
        p = subprocess.Popen(base + ["import", "--no-progress", "--progress-file", progress] + wal + ["-"],
                             stdin=src, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        src.close()
        try:
            p.wait(timeout=delay)
            finished = True
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            finished = False
        err = p.stderr.read().decode()
        p.stderr.close()
        if finished:
            if p.returncode:
                fail(f"an uninterrupted import exits 0: {err}")
            duration = time.time() - started
            # start again from an empty store, so that the next kills
            # fall in a run that stores, not in one of duplicates
            shutil.rmtree(store)
            claimed = 0
            continue
        kills += 1
        last = 0
        if os.path.exists(progress):
            for line in open(progress):
                m = re.match(r"stored \d+ through .*:(\d+)$", line.strip())
                if not m:
                    fail(f"progress line '{line.strip()}'")
                last = skip + int(m.group(1))
        claimed = max(claimed, last)
        have = stored_ids()
        have_set = set(have)
        if len(have) != len(have_set):
            fail("export lists no event twice")
        missing = [i for i in ids[:claimed] if i not in have_set]
        if missing:
            fail(f"after kill {kills} at {delay:.2f} s: {len(missing)} events of lines 1..{claimed}, "
                 f"reported stored, are missing (first {missing[0]})")
        extra = have_set - set(ids)
        if extra:
            fail(f"the store holds {len(extra)} events that are not in the file")
        audit(f"kill {kills}")
        ok(f"kill -9 at {delay:.2f} s (started at line {skip + 1}): {len(have)} events stored, "
           f"all {claimed} lines reported stored are present, audit clean")
        if len(have_set) == len(set(ids)):
            # killed at the very end (the settle): the next run would only
            # meet duplicates, so it starts from an empty store
            shutil.rmtree(store)
            claimed = 0
    if kills < a.kills:
        fail(f"only {kills} of {a.kills} runs could be killed before they finished")

    r = subprocess.run(base + ["import", "--no-progress", "--json"] + wal + [events], capture_output=True,
                       text=True)
    if r.returncode:
        fail("the final import completes: " + r.stderr)
    have = set(stored_ids())
    if have != set(ids):
        fail(f"after the final import the store holds every event ({len(have)} of {len(set(ids))})")
    audit("the final import")
    ok(f"the final import completes: all {len(ids)} events stored, audit clean")
    print(f"1..{n}")
