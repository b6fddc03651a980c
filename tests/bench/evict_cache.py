#!/usr/bin/env python3
"""Drops the page cache's copy of every file under the given directories
(posix_fadvise DONTNEED; clean pages only, without root), so that a run
after it reads them from the disk, as a node long up reads a store it has
not touched lately. On demand, not in the suite (docs/performance.md at 262f3c4,
issue 17, session 31: the serving peer cold and warm).

usage: evict_cache.py DIR...
"""
import os
import sys


def main(dirs):
    if not dirs:
        sys.stderr.write(__doc__)
        return 2
    n = 0
    for top in dirs:
        for d, _, files in os.walk(top):
            for f in files:
                try:
                    fd = os.open(os.path.join(d, f), os.O_RDONLY)
                except OSError:
                    continue
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    n += 1
                finally:
                    os.close(fd)
    print(f"evict_cache: {n} files dropped from the page cache")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
