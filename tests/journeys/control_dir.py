#!/usr/bin/env python3
"""Journey: pithd without systemd, its control socket in a directory that
does not exist yet (issue 51: /run/pithd is made by systemd's
RuntimeDirectory=, and without it pithd failed).

    control_dir.py --pithd P --pithctl C [--keep]

1. --control RUN/pithd/pithd.sock, RUN existing and RUN/pithd not: pithd
   makes RUN/pithd (owner-only, 0700), serves on the socket, and
   `pithctl --node` answers status.
2. A directory it may not make (its parent not writable by this user; or
   the parent missing too, which it does not build whole): pithd exits 1
   with one line naming the directory and the flag to use (--control PATH).
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import Node, run_test  # noqa: E402


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok -", what, flush=True)


def refused(args, root, name, control, prefix=()):
    """Runs pithd with control; returns (exit status, its stderr lines)."""
    r = subprocess.run(list(prefix) + [args.pithd, "--data", os.path.join(root, name), "--listen",
                        "127.0.0.1:0", "--network-id", "pith-test", "--control", control],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, [x for x in r.stderr.splitlines() if "ERROR" in x]


def body(args, root, nodes):
    run = os.path.join(root, "run")
    os.mkdir(run, 0o755)
    sock = os.path.join(run, "pithd", "pithd.sock")
    n = Node(args.pithd, root, "a", extra=["--control", sock])
    n.sock = sock
    n.start()
    nodes.append(n)
    st = os.stat(os.path.dirname(sock))
    check(st.st_mode & 0o7777 == 0o700 and st.st_uid == os.geteuid(),
          "pithd made the missing directory %s, owner-only" % os.path.dirname(sock))
    r = subprocess.run([args.pithctl, "--node", sock, "status"], capture_output=True, text=True,
                       timeout=30)
    check(r.returncode == 0, "pithctl --node answers status on the socket in it")
    with open(n.log_path, errors="replace") as f:
        check("created the socket's directory" in f.read(), "its log says it made the directory")
    check(n.stop() == 0, "it stops cleanly")

    # the parent is missing too: not built whole
    rc, errs = refused(args, root, "b", os.path.join(root, "nowhere", "pithd", "pithd.sock"))
    check(rc == 1 and len(errs) == 1 and "--control PATH" in errs[0]
          and os.path.join(root, "nowhere", "pithd") in errs[0],
          "a directory under a missing one: exit 1, one line naming it and --control PATH")
    check(not os.path.exists(os.path.join(root, "nowhere")), "and nothing is made")
    # a parent this user may not write (root may: then it is made)
    # as root (a CI container), pithd runs as nobody for this: root may
    # write any directory
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if not setpriv:
            print("# root without setpriv: a parent it may not write cannot be shown (skipped)")
            return
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        os.chmod(root, 0o711)
        os.mkdir(os.path.join(root, "c"), 0o700)
        os.chown(os.path.join(root, "c"), 65534, 65534)
    locked = os.path.join(root, "locked")
    os.mkdir(locked, 0o555)
    rc, errs = refused(args, root, "c", os.path.join(locked, "pithd", "pithd.sock"), prefix)
    os.chmod(locked, 0o700)
    check(rc == 1 and len(errs) == 1 and "--control PATH" in errs[0]
          and "Permission denied" in errs[0],
          "a parent it may not write: exit 1, one line saying why and --control PATH")


def main():
    return run_test("journey-ctldir-", body, tools=("pithd", "pithctl"))


if __name__ == "__main__":
    sys.exit(main())
