#!/usr/bin/env python3
"""Ingest load for tests/bench/bench_http.sh: POSTs signed events (JSON
Lines) to /events in batches, paced to a target rate, until SIGTERM or the
input runs out; then prints one line

  LOADER posted=N stored=N duplicate=N rejected=N seconds=S rate=R

usage: bench_http_post.py PORT FILE [--skip N] [--rate EV_PER_S (0: as fast as
       it goes)] [--batch N]
"""

import argparse
import http.client
import json
import signal
import sys
import time

stop = False


def on_term(sig, frame):
    global stop
    stop = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("file")
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--batch", type=int, default=200)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    with open(a.file, "rb") as f:
        lines = [l.rstrip(b"\n") for l in f][a.skip:]
    c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=60)
    posted = stored = dup = rejected = 0
    t0 = time.time()
    i = 0
    while not stop and i < len(lines):
        chunk = lines[i:i + a.batch]
        i += len(chunk)
        c.request("POST", "/events", body=b"\n".join(chunk),
                  headers={"Content-Type": "application/x-ndjson"})
        r = c.getresponse()
        body = r.read()
        if r.status == 503:
            time.sleep(0.05)
            i -= len(chunk)
            continue
        d = json.loads(body)
        posted += len(chunk)
        stored += d.get("stored", 0)
        dup += d.get("duplicate", 0)
        rejected += d.get("rejected", 0)
        if a.rate > 0:
            ahead = posted / a.rate - (time.time() - t0)
            if ahead > 0:
                time.sleep(ahead)
    secs = time.time() - t0
    print("LOADER posted=%d stored=%d duplicate=%d rejected=%d seconds=%.1f rate=%.0f" %
          (posted, stored, dup, rejected, secs, stored / secs if secs else 0), flush=True)
    return 0 if rejected == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
