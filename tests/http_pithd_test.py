#!/usr/bin/env python3
"""HTTP views (issue 6), pithd's side (needs --pithd; no cases without it):
its control socket is owner-only (0600); pithd --http stores, serves and
gossips POSTed events; nodes announce http_public_url in HELLO and list
each other in /pith-mirrors.json.

Setup and helpers in http_test_util.py.

usage: http_pithd_test.py --serve S --pithctl C --gen-events G --data DIR
                          --pithd P [--keep]
"""

import json
import os
import re
import socket
import stat
import subprocess
import sys
import time

from http_test_util import AR7B_CANON, ONE_LINER, case, canon, req, main


def run_cases(args, root, base, gen_rec, gen_body, held, untrusted, opkey, servers, store, trust):
    if args.pithd:
        @case("pithd's control socket is owner-only (0600), its data directory 0700")
        def _():
            d = os.path.join(root, "pithd")
            logf = open(os.path.join(root, "pithd.log"), "ab")
            p = subprocess.Popen([args.pithd, "--data", d, "--listen", "127.0.0.1:0",
                                  "--network-id", "http-test"], stdout=logf, stderr=logf)
            try:
                sock = os.path.join(d, "pithd.sock")
                deadline = time.time() + 20
                while not os.path.exists(sock) and time.time() < deadline:
                    time.sleep(0.05)
                m = os.stat(sock).st_mode
                assert stat.S_ISSOCK(m) and (m & 0o777) == 0o600, oct(m)
                assert os.stat(sock).st_uid == os.getuid()
                assert (os.stat(d).st_mode & 0o777) == 0o700, oct(os.stat(d).st_mode)
            finally:
                p.terminate()
                p.wait(30)
                logf.close()

    if args.pithd:
        @case("pithd --http: POSTed events are stored, served and gossiped to a peer; /metrics")
        def _():
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from pithtest import Node, wait_for
            a = Node(args.pithd, root, "node-a", extra=["--http", "127.0.0.1:0"] + trust)
            b = Node(args.pithd, root, "node-b", extra=trust)
            try:
                a.start()
                b.start(peers=[a.addr])
                port = int(a.status()["http"].rsplit(":", 1)[1])
                srv = type("Srv", (), {"port": port})()
                wait_for(lambda: any(p["state"] == "ready" for p in a.status()["peers"]), 15,
                         what="the peers' handshake")
                body = b"\n".join(held[150:180])
                st, _, r = req("POST", "/events", {}, body, server=srv)
                d = json.loads(r)
                assert st == 202 and d["stored"] == 30, (st, r[:300])
                with open(os.path.join(args.data, "bundle-AR7B3DEV.json"), "rb") as f:
                    bundle = json.load(f)
                evs = b"\n".join(canon(e) for e in bundle["events"])
                st, _, r = req("POST", "/events", {}, evs, server=srv)
                assert st == 202, r
                wait_for(lambda: b.status()["store"]["events"] == 32, 30,
                         what="node B to have the 32 events node A took over HTTP")
                subj = json.loads(held[150])["subject_pith_number"]
                st, h, r = req("GET", "/pith/%s/state.json" % subj[-26:], server=srv)
                assert st == 200 and b.records()[subj]["state_sha256"] == \
                    json.loads(r)["state_sha256"]
                cmd = ONE_LINER.replace("https://pith.science", "http://127.0.0.1:%d" % port)
                out = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd],
                                     capture_output=True, text=True, timeout=60)
                assert out.stdout.strip() == AR7B_CANON, out.stdout + out.stderr
                st, _, mb = req("GET", "/metrics", server=srv)
                m = mb.decode()
                assert re.search(r'\npith_events_total\{outcome="stored"\} 32\n', m), m[:3000]
                assert re.search(r'\npith_peers\{direction="in",state="ready"\} 1\n', m)
                assert re.search(r'\npith_http_requests_total\{route="post_events",code="202"\} 2',
                                 m)
                assert "pith_sync_peers{" in m and "pith_bans_active " in m
                # 32 events, unflushed: in the log and the memtables
                wal = re.search(r'\npith_store_bytes\{part="wal"\} (\d+)\n', m)
                assert wal and int(wal.group(1)) > 32 * 1000, m[:3000]
                assert re.search(r'\npith_store_bytes\{part="memtable"\} [1-9]', m)
                assert "\npith_store_pending_compaction_bytes " in m
                assert a.stop() == 0 and b.stop() == 0
            finally:
                for n in (a, b):
                    if n.alive():
                        n.stop()

    if args.pithd:
        @case("pithd: nodes announce http_public_url in HELLO and list each other in "
              "/pith-mirrors.json; a bad URL from a peer is dropped, not punished")
        def _():
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from pithtest import Node, RawPeer, msg, wait_for, HELLO
            ports = []
            for _ in range(2):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", 0))
                    ports.append(probe.getsockname()[1])
            url_a = "http://127.0.0.1:%d" % ports[0]
            url_b = "http://127.0.0.1:%d" % ports[1]
            a = Node(args.pithd, root, "mirror-a", extra=trust + [
                "--http", "127.0.0.1:%d" % ports[0], "--http-public-url", url_a + "/"])
            b = Node(args.pithd, root, "mirror-b", extra=trust + [
                "--http", "127.0.0.1:%d" % ports[1], "--http-public-url", url_b])
            # serves HTTP but declares no public URL: announces none
            c = Node(args.pithd, root, "mirror-c", extra=trust + ["--http", "127.0.0.1:0"])
            rp = None
            try:
                a.start()
                b.start(peers=[a.addr])
                c.start(peers=[a.addr])
                srv_a = type("Srv", (), {"port": ports[0]})()
                srv_b = type("Srv", (), {"port": ports[1]})()

                def manifest(srv):
                    st, _, body = req("GET", "/pith-mirrors.json", server=srv)
                    assert st == 200, st
                    return json.loads(body)

                def peers_of(srv):
                    return {m["base_url"]: m for m in manifest(srv)["mirrors"]
                            if m["status"] == "peer"}

                wait_for(lambda: url_b in peers_of(srv_a) and url_a in peers_of(srv_b), 20,
                         what="A and B to list each other")
                wait_for(lambda: len(a.status()["peers"]) == 2, 20, what="C's handshake")
                d = manifest(srv_a)
                me = [m for m in d["mirrors"] if m["status"] == "self"]
                assert len(me) == 1 and me[0]["base_url"] == url_a, me
                assert list(peers_of(srv_a)) == [url_b], d["mirrors"]  # not C, not A itself
                pb = peers_of(srv_a)[url_b]
                assert pb["name"] == "pithd " + b.node_id[:16], pb
                assert pb["mirror_type"] == "http"
                assert pb["state_pattern"] == url_b + "/pith/{suffix}/state.json"
                assert peers_of(srv_b)[url_a]["name"] == "pithd " + a.node_id[:16]
                port_c = int(c.status()["http"].rsplit(":", 1)[1])
                pc = peers_of(type("Srv", (), {"port": port_c})())
                assert list(pc) == [url_a], pc
                # a raw peer whose HELLO carries a malformed URL: dropped, the
                # connection stays, nothing is listed, no misbehaviour points
                generated = manifest(srv_a)["generated_at"]
                rp = RawPeer(a.port, a.network_id)
                rp.hello = lambda: rp.send(msg(HELLO, 1, 0, rp.network_id, rp.pk, rp.nonce, 0,
                                               "raw-test-peer", "http://user:pw@evil.example/"))
                rp.handshake()
                wait_for(lambda: any(p["agent"] == "raw-test-peer" and p["state"] == "ready"
                                     for p in a.status()["peers"]), 15, what="the raw peer")
                assert not rp.is_closed(timeout=1)
                raw_p = [p for p in a.status()["peers"] if p["agent"] == "raw-test-peer"][0]
                assert raw_p["score"] == 0 and raw_p["http_url"] == "", raw_p
                by_id = {p["node_id"]: p for p in a.status()["peers"]}
                assert by_id[b.node_id]["http_url"] == url_b, by_id[b.node_id]
                assert by_id[c.node_id]["http_url"] == "", by_id[c.node_id]
                assert list(peers_of(srv_a)) == [url_b]
                assert manifest(srv_a)["generated_at"] == generated  # the list did not change
                # B leaves: A keeps listing it (recently seen)
                assert b.stop() == 0
                wait_for(lambda: len(a.status()["peers"]) == 2, 15, what="A to see B go")
                assert list(peers_of(srv_a)) == [url_b]
                # B comes back without a public URL: its new HELLO replaces the old claim
                b.extra = trust + ["--http", "127.0.0.1:%d" % ports[1]]
                b.start()
                wait_for(lambda: not peers_of(srv_a), 20, what="A to drop B's old URL")
                with open(a.log_path, errors="replace") as f:
                    assert "http_url is not a plain http(s) URL" in f.read()
            finally:
                if rp:
                    rp.close()
                for n in (a, b, c):
                    if n.alive():
                        n.stop()

    if args.pithd:
        @case("pithd's HTTP limits are its config's and flags': http_max_header_bytes, "
              "http_max_post_events (docs/http.md, Limits)")
        def _():
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from pithtest import Node
            conf = os.path.join(root, "limits.conf")
            with open(conf, "w") as f:
                f.write("http_max_header_bytes = 1024\nhttp_max_post_events = 3\n")
            a = Node(args.pithd, root, "node-limits", extra=[
                "--config", conf, "--http", "127.0.0.1:0", "--http-costly-per-addr", "1"] + trust)
            try:
                a.start()
                srv = type("Srv", (), {"port": int(a.status()["http"].rsplit(":", 1)[1])})()
                st, _, r = req("GET", "/healthz", {"X-Pad": "x" * 1100}, server=srv)
                assert st == 431, (st, r[:200])
                st, _, r = req("GET", "/healthz", {"X-Pad": "x" * 700}, server=srv)
                assert st == 200, (st, r[:200])
                st, _, r = req("POST", "/events", {}, b"\n".join(held[150:154]), server=srv)
                assert st == 413, (st, r[:200])
                assert a.stop() == 0
            finally:
                if a.alive():
                    a.stop()


if __name__ == "__main__":
    main(run_cases)
