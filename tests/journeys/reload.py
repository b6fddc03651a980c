#!/usr/bin/env python3
"""Journey: an operator trusts a new key and rotates the log, with SIGHUP
(issue 51; docs/operations.md).

    reload.py --pithd P --pithctl C [--keep]

1. pithd runs from a config file (log_file, log_level = info, HTTP on).
2. An event signed by a key made with `pithctl keygen` is refused
   (untrusted key).
3. The operator adds `trust_key` for it, `log_level = debug` and a
   `peer` (another node) to the config, moves the log file away (as logrotate does) and sends SIGHUP.
4. The node is still serving (/healthz 200, control status), a new log
   file holds the reload's lines (the key now trusted, the level
   changed, the peer added), the peer is dialled, the event is now
   accepted, and debug lines now appear.
5. A config that does not parse, then SIGHUP: the node says so and keeps
   running with what it had.
6. An upstream (another mirror, holding the sample record) and a follow
   list naming the record, the peer left out, then SIGHUP: the node
   fetches the record from there and no longer keeps the peer.
   SIGTERM stops it with exit 0.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import Ctl, Node, check, free_port, read_text as read, wait_for, run_test  # noqa: E402


SAMPLE = "AR7B3DEVMOTSBRCCVXUCLYSRRE"
SAMPLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                           "bundle-AR7B3DEV.json")


def body(args, root, nodes):
    data = os.path.join(root, "data")
    logf = os.path.join(root, "pithd.log")
    conf = os.path.join(root, "pithd.conf")
    key = os.path.join(root, "op.key")
    http = free_port()
    base_conf = ("# pithd for the reload journey\n"
                 "data = %s\nlisten = 127.0.0.1:0\nhttp = 127.0.0.1:%d\n"
                 "network_id = pith-test\nlog_file = %s\n" % (data, http, logf))
    with open(conf, "w") as f:
        f.write(base_conf + "log_level = info\n")

    def ctl(*a, stdin=None):
        return subprocess.run([args.pithctl] + list(a), input=stdin, capture_output=True,
                              text=True, timeout=60)

    r = ctl("keygen", "--key-id", "op-reload", key)
    check(r.returncode == 0, "pithctl keygen makes the operator's key")
    ev = {"event_type": "correction", "subject_pith_number": "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE",
          "target": "record", "payload": {"note": "reload journey"},
          "created_at": "2026-09-01T12:00:00Z"}
    r = ctl("sign", "--key", key, stdin=json.dumps(ev))
    check(r.returncode == 0, "pithctl sign signs an event with it")
    evfile = os.path.join(root, "event.json")
    with open(evfile, "w") as f:
        f.write(r.stdout)

    out = open(os.path.join(root, "pithd.stderr"), "wb")
    proc = subprocess.Popen([args.pithd, "--config", conf], stdout=out, stderr=out)
    sock = os.path.join(data, "pithd.sock")

    def status():
        c = Ctl(sock, 10)
        try:
            return c.call("status")
        finally:
            c.close()

    def up():
        try:
            return status()
        except OSError:
            return None
    try:
        wait_for(lambda: up() or proc.poll() is not None, 20, what="pithd to start")
        check(proc.poll() is None, "pithd runs from its config file")
        check("pithd started" in read(logf), "it logs to log_file")

        def healthz():
            with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % http, timeout=5) as resp:
                return resp.status
        sock_arg = ["--node", sock]
        r = ctl(*sock_arg, "import", "--no-progress", evfile)
        check(r.returncode != 0 and "is not trusted" in (r.stdout + r.stderr),
              "the event signed by the new key is refused (untrusted key)")
        events0 = status()["store"]["events"]

        # the operator's change, logrotate's move, the reload
        friend = Node(args.pithd, root, "friend").start()
        nodes.append(friend)
        with open(conf, "w") as f:
            f.write(base_conf + "log_level = debug\ntrust_key = %s\npeer = %s\n"
                    % (key, friend.addr))
        os.rename(logf, logf + ".1")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload: 3 changes applied" in read(logf), 10,
                 what="the reload's lines in a new log file")
        new = read(logf)
        check(proc.poll() is None, "pithd still runs after SIGHUP")
        check(os.path.exists(logf + ".1") and "SIGHUP" not in read(logf + ".1"),
              "the moved log file is left alone; the reload writes to a new one")
        check("SIGHUP: log file reopened, config %s read again: 3 settings changed" % conf in new,
              "the new log file says the config was read again")
        check("reload: log_level info -> debug" in new, "it says the log level changed")
        check("reload: trust_key: now trusting key op-reload" in new, "it says the key is trusted")
        check("reload: peer %s: added, dialling it" % friend.addr in new, "it says the peer is added")
        wait_for(lambda: any(p["state"] == "ready" and p["addr"] == friend.addr
                             for p in status()["peers"]), 15, what="the new peer to be ready")
        check(True, "the new peer is dialled and ready")
        check(healthz() == 200, "/healthz answers 200")
        check(status()["store"]["events"] == events0, "the control socket answers status")
        r = ctl(*sock_arg, "import", "--no-progress", evfile)
        check(r.returncode == 0, "the event is now accepted")
        check(status()["store"]["events"] == events0 + 1, "the store holds it")
        wait_for(lambda: " DEBUG " in read(logf), 10, what="a debug line")
        check(True, "debug lines appear: the level took effect")

        # a config that does not parse keeps the running one
        with open(conf, "a") as f:
            f.write("log_level = loud\n")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "the running config is kept" in read(logf), 10,
                 what="the refused reload's line")
        line = [x for x in read(logf).splitlines() if "the running config is kept" in x][-1]
        check(" ERROR " in line and "log_level" in line and "loud" in line,
              "a config that does not parse is refused in one line naming the value")
        check(proc.poll() is None and healthz() == 200, "and the node keeps serving")

        # an upstream added by a reload: another mirror holding the sample
        up = Node(args.pithd, root, "upstream", network_id="pith-elsewhere",
                  extra=["--http", "127.0.0.1:%d" % free_port()]).start()
        nodes.append(up)
        r = ctl("--node", up.sock, "import", "--no-progress", SAMPLE_FILE)
        check(r.returncode == 0, "another mirror holds the sample record")
        follow = os.path.join(root, "follow.txt")
        with open(follow, "w") as f:
            f.write("# followed from the upstream\n%s\n" % SAMPLE)
        up_url = "http://%s" % up.status()["http"]
        with open(conf, "w") as f:
            f.write(base_conf + "log_level = debug\ntrust_key = %s\nupstream = %s\nfollow = %s\n"
                    % (key, up_url, follow))
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload: upstream: following 1 upstream(s) afresh" in read(logf), 10,
                 what="the reload's upstream line")
        wait_for(lambda: status()["store"]["records"] >= 1, 30,
                 what="the node to fetch the followed record from the new upstream")
        check(status()["follow"]["upstreams"][0]["url"].rstrip("/") == up_url,
              "a new upstream and follow list take effect at the reload: the record is fetched")
        check("reload: peer %s: removed, no longer kept" % friend.addr in read(logf),
              "the peer left out of the config is no longer kept")
        # the mirror's name and operator, renamed by a reload: every page
        # and the manifest show them at once
        with open(conf, "w") as f:
            f.write(base_conf + "log_level = debug\ntrust_key = %s\nupstream = %s\nfollow = %s\n"
                    "mirror_name = Miroir de Zoë\nmirror_operator = The reload journey\n"
                    % (key, up_url, follow))
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload: 2 changes applied" in read(logf), 10,
                 what="the reload's mirror_name line")
        check("reload: mirror_name changed" in read(logf), "it says the mirror's name changed")
        req = urllib.request.Request("http://127.0.0.1:%d/" % http, headers={"Accept": "text/html"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            home = resp.read().decode()
        check("<title>Miroir de Zo\u00eb</title>" in home and "The reload journey" in home,
              "the home page's title and header name the renamed mirror")
        with urllib.request.urlopen("http://127.0.0.1:%d/pith-mirrors.json" % http, timeout=5) as resp:
            names = [m.get("name") for m in json.load(resp)["mirrors"]]
        check("Miroir de Zo\u00eb" in names, "/pith-mirrors.json names it too")
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
        check(rc == 0, "SIGTERM stops it as before (exit 0)")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
        if sys.exc_info()[0]:
            for p in (logf + ".1", logf, os.path.join(root, "pithd.stderr")):
                print("# ---- %s" % p)
                for x in read(p).splitlines()[-30:]:
                    print("#", x)


def main():
    return run_test("journey-reload-", body, tools=("pithd", "pithctl"))


if __name__ == "__main__":
    sys.exit(main())
