#!/usr/bin/env python3
"""Each mechanism once (issue 52): where node/, proto/ and store/ may start
threads, replace files and wake event loops.

usage: mechanisms_check.py SOURCE_DIR

Greps the C sources under node/, proto/ and store/ (comments and string
literals left out) for the primitives of each mechanism below and fails
when one appears in a file its allowlist does not name. Each allowlisted
file carries the reason it may hold the primitive; a file that no longer
holds it is reported too (stale entries hide a regression later).

  exit 0  every primitive in its owning files
  exit 1  a primitive outside them, or a stale entry (printed)
  exit 2  usage error

A new use: call the owner (store_file.h, wake.h, ...), or, if the new file
truly owns a thread of its own, add it below with its reason.
"""
import os
import re
import sys

DIRS = ("node", "proto", "store")

# mechanism -> (regex, {file: reason})
MECHANISMS = {
    "atomic file replace": (
        r"\brename(at2?)?\s*\(",
        {
            "store/store_file.c": "the one atomic file replace (temp file, fsync, rename, "
            "fsync of the directory), store_file.h; store/ is the lowest floor that does I/O "
            "and store itself needs it",
        },
    ),
    "fsync outside the file replace": (
        r"\bf(data)?sync\s*\(",
        {
            "store/store_file.c": "the file replace syncs the file and its directory",
            "node/daemon/node.c": "DATA/node.key is created once (O_EXCL), never replaced",
            "node/cli/cmd_keygen.c": "the key file is created once (O_EXCL), never replaced",
            "node/follow/follower.c": "DATA/upstream-follow is appended to, a line a follow",
        },
    ),
    "waking a loop from another thread": (
        r"\b(eventfd|pipe2?|evuser_trigger|event_base_once|evthread_make_base_notifiable)\s*\(",
        {
            "node/loop/wake.c": "the one wake (loop_wake_t, wake.h): an eventfd under a "
            "persistent event, for any base",
        },
    ),
    "activating an event by hand": (
        r"\bevent_active\s*\(",
        {
            # each of these runs on the loop's own thread: a deferred call,
            # not a wake from another thread (those go through wake.h)
            "node/net/peer.c": "on the loop: the reaper and a peer's next read turn, "
            "deferred so that other peers run",
            "node/loop/hclient.c": "on the loop: a transfer queued or cancelled starts the "
            "next one from the loop, never inside the caller",
            "node/follow/follower.c": "on the loop: a waiter's record is started from the "
            "loop, never inside follower_wait",
            "node/cli/cmd_pull_get.c": "on the loop: the upstream taken for down ends the "
            "retries waiting on their timers now",
        },
    ),
    "starting a thread": (
        r"\bpthread_create\s*\(",
        {
            "store/pool.c": "the one worker pool's threads (store_pool_t, store_pool.h): the "
            "merge lanes, check's workers, the validators, the render pool, the site's writers; "
            "store/ is the lowest floor that runs threads",
            "node/ingest/ingest_core.c": "the pipeline's in-order writer, the store's one "
            "writer: a thread of one fixed role (its validators come from store_pool.h)",
            "node/search/search.c": "the search index's feeder: one thread, one role",
            "node/site/site_feed.c": "the static site's feeder: one thread, one role",
            "node/mesh/sync_load.c": "the reconciliation set's loader: one thread, one role",
            "node/mesh/sync_progress.c": "the relog at a catch-up's end: one thread, one role",
            "node/daemon/node.c": "the store warmer and the state root's build at start: "
            "one thread each, one role",
            "node/daemon/node_ctl.c": "a backup's checkpoint: one thread, one role",
            "node/loop/resolve.c": "a thread per name being resolved (getaddrinfo blocks)",
        },
    ),
}

COMMENT_OR_STRING = re.compile(
    r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def code_of(text):
    """text with comments and literals blanked (newlines kept, for line numbers)."""
    return COMMENT_OR_STRING.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def sources(root):
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    full = os.path.join(dirpath, f)
                    yield os.path.relpath(full, root), full


def main(argv):
    if len(argv) != 2 or not os.path.isdir(os.path.join(argv[1], "node")):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = argv[1]
    code = {rel: code_of(open(full, encoding="utf-8", errors="replace").read())
            for rel, full in sources(root)}
    bad = 0
    for name, (pattern, allowed) in MECHANISMS.items():
        rx = re.compile(pattern)
        seen = set()
        for rel, text in sorted(code.items()):
            for m in rx.finditer(text):
                seen.add(rel)
                if rel not in allowed:
                    line = text.count("\n", 0, m.start()) + 1
                    print("%s:%d: %s: %s outside its owners (%s)" %
                          (rel, line, name, m.group(0).rstrip("( "), ", ".join(sorted(allowed))))
                    bad = 1
        for rel in sorted(set(allowed) - seen):
            print("%s: %s: allowlisted but holds none: drop it from %s" %
                  (rel, name, os.path.basename(__file__)))
            bad = 1
    if not bad:
        print("mechanisms: %d mechanisms, each in its owning files" % len(MECHANISMS))
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))
