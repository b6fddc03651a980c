"""Helpers for the node tests and benchmarks (python3 standard library only).

- a small msgpack encoder/decoder (the subset docs/wire.md uses);
- Ed25519 signing after RFC 8032 section 6 (slow, fine for a handshake);
- wire frames and messages (docs/wire.md);
- a raw peer that speaks the handshake, for hostile-peer tests;
- Node: start/stop a pithd on loopback with its own data directory and
  talk to its control socket.
"""

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

# ---- msgpack ---------------------------------------------------------------


def mp_pack(o):
    if o is None:
        return b"\xc0"
    if o is True:
        return b"\xc3"
    if o is False:
        return b"\xc2"
    if isinstance(o, int):
        if 0 <= o < 128:
            return bytes([o])
        if -32 <= o < 0:
            return struct.pack("b", o)
        if 0 <= o < 256:
            return b"\xcc" + bytes([o])
        if 0 <= o < 65536:
            return b"\xcd" + struct.pack(">H", o)
        if 0 <= o < 2**32:
            return b"\xce" + struct.pack(">I", o)
        if 0 <= o < 2**64:
            return b"\xcf" + struct.pack(">Q", o)
        if -128 <= o:
            return b"\xd0" + struct.pack(">b", o)
        if -32768 <= o:
            return b"\xd1" + struct.pack(">h", o)
        if -(2**31) <= o:
            return b"\xd2" + struct.pack(">i", o)
        return b"\xd3" + struct.pack(">q", o)
    if isinstance(o, (bytes, bytearray)):
        n = len(o)
        if n < 256:
            return b"\xc4" + bytes([n]) + bytes(o)
        if n < 65536:
            return b"\xc5" + struct.pack(">H", n) + bytes(o)
        return b"\xc6" + struct.pack(">I", n) + bytes(o)
    if isinstance(o, str):
        b = o.encode()
        n = len(b)
        if n < 32:
            return bytes([0xA0 | n]) + b
        if n < 256:
            return b"\xd9" + bytes([n]) + b
        if n < 65536:
            return b"\xda" + struct.pack(">H", n) + b
        return b"\xdb" + struct.pack(">I", n) + b
    if isinstance(o, (list, tuple)):
        n = len(o)
        if n < 16:
            h = bytes([0x90 | n])
        elif n < 65536:
            h = b"\xdc" + struct.pack(">H", n)
        else:
            h = b"\xdd" + struct.pack(">I", n)
        return h + b"".join(mp_pack(x) for x in o)
    raise TypeError(type(o))


def mp_unpack(b):
    """Decodes one object filling b exactly; raises ValueError otherwise."""

    def need(pos, n):
        if pos + n > len(b):
            raise ValueError("truncated")

    def one(pos, depth):
        if depth > 8:
            raise ValueError("too deep")
        need(pos, 1)
        t = b[pos]
        pos += 1
        if t <= 0x7F:
            return t, pos
        if t >= 0xE0:
            return t - 256, pos
        if t == 0xC0:
            return None, pos
        if t in (0xC2, 0xC3):
            return t == 0xC3, pos
        if 0xA0 <= t <= 0xBF or t in (0xD9, 0xDA, 0xDB, 0xC4, 0xC5, 0xC6):
            if 0xA0 <= t <= 0xBF:
                n = t & 0x1F
            else:
                w = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}[t]
                need(pos, w)
                n = int.from_bytes(b[pos:pos + w], "big")
                pos += w
            need(pos, n)
            v = b[pos:pos + n]
            return (v.decode() if t < 0xC4 or t >= 0xD9 else bytes(v)), pos + n
        if 0x90 <= t <= 0x9F or t in (0xDC, 0xDD):
            if t <= 0x9F:
                n = t & 0x0F
            else:
                w = 2 if t == 0xDC else 4
                need(pos, w)
                n = int.from_bytes(b[pos:pos + w], "big")
                pos += w
            if n > len(b) - pos:
                raise ValueError("count over remaining bytes")
            out = []
            for _ in range(n):
                v, pos = one(pos, depth + 1)
                out.append(v)
            return out, pos
        ints = {0xCC: (">B", 1), 0xCD: (">H", 2), 0xCE: (">I", 4), 0xCF: (">Q", 8),
                0xD0: (">b", 1), 0xD1: (">h", 2), 0xD2: (">i", 4), 0xD3: (">q", 8)}
        if t in ints:
            f, w = ints[t]
            need(pos, w)
            return struct.unpack(f, b[pos:pos + w])[0], pos + w
        raise ValueError("unsupported type 0x%02x" % t)

    v, pos = one(0, 0)
    if pos != len(b):
        raise ValueError("trailing bytes")
    return v


# ---- Ed25519 (RFC 8032, section 6) -------------------------------------------

_P = 2**255 - 19
_Q = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_I = pow(2, (_P - 1) // 4, _P)


def _inv(x):
    return pow(x, _P - 2, _P)


def _xrecover(y):
    xx = (y * y - 1) * _inv(_D * y * y + 1)
    x = pow(xx, (_P + 3) // 8, _P)
    if (x * x - xx) % _P:
        x = x * _I % _P
    if x % 2:
        x = _P - x
    return x


_BY = 4 * _inv(5) % _P
_BX = _xrecover(_BY)
_B = (_BX, _BY, 1, _BX * _BY % _P)


def _add(p, q):
    a = (p[1] - p[0]) * (q[1] - q[0]) % _P
    b = (p[1] + p[0]) * (q[1] + q[0]) % _P
    c = 2 * p[3] * q[3] * _D % _P
    d = 2 * p[2] * q[2] % _P
    e, f, g, h = b - a, d - c, d + c, b + a
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _mul(s, p):
    q = (0, 1, 1, 0)
    while s:
        if s & 1:
            q = _add(q, p)
        p = _add(p, p)
        s >>= 1
    return q


def _compress(p):
    zi = _inv(p[2])
    x, y = p[0] * zi % _P, p[1] * zi % _P
    return int.to_bytes(y | ((x & 1) << 255), 32, "little")


def _expand(seed):
    h = hashlib.sha512(seed).digest()
    a = int.from_bytes(h[:32], "little")
    a &= (1 << 254) - 8
    a |= 1 << 254
    return a, h[32:]


def ed25519_public(seed):
    a, _ = _expand(seed)
    return _compress(_mul(a, _B))


def ed25519_sign(seed, msg):
    a, prefix = _expand(seed)
    pk = _compress(_mul(a, _B))
    r = int.from_bytes(hashlib.sha512(prefix + msg).digest(), "little") % _Q
    rr = _compress(_mul(r, _B))
    h = int.from_bytes(hashlib.sha512(rr + pk + msg).digest(), "little") % _Q
    return rr + int.to_bytes((r + h * a) % _Q, 32, "little")


# ---- wire ----------------------------------------------------------------------

HELLO, AUTH, PING, PONG, BYE, PEERS_REQ, PEERS, ANNOUNCE, GET, EVENT, NOTFOUND = range(1, 12)
BUNDLE_ANNOUNCE, BUNDLE_GET, BUNDLE, INV_REQ, INV = range(12, 17)
AUTH_CONTEXT = b"pith-mirror/wire/1 auth\x00"


def frame(payload):
    return struct.pack(">I", len(payload)) + payload


def msg(*fields):
    return frame(mp_pack(list(fields)))


def auth_message(network_id, signer_pk, signer_nonce, verifier_pk, verifier_nonce):
    nid = network_id.encode()
    return (AUTH_CONTEXT + bytes([len(nid)]) + nid + signer_pk + verifier_pk
            + verifier_nonce + signer_nonce)


class RawPeer:
    """A TCP peer under the test's control. It can complete the handshake
    honestly (so that what it does next is judged as a peer's behaviour)
    or send anything at all."""

    def __init__(self, port, network_id, source_ip="127.0.0.1", seed=None, timeout=10,
                 features=0):
        self.network_id = network_id
        self.features = features  # HELLO feature bits
        self.seed = seed or os.urandom(32)
        self.pk = ed25519_public(self.seed)
        self.nonce = os.urandom(32)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.bind((source_ip, 0))
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self.buf = b""
        self.node_pk = None
        self.node_nonce = None

    def send(self, data):
        self.sock.sendall(data)

    def recv_msg(self, timeout=10):
        """The next message as a list, or None when the node closed."""
        self.sock.settimeout(timeout)
        while True:
            if len(self.buf) >= 4:
                n = struct.unpack(">I", self.buf[:4])[0]
                if len(self.buf) >= 4 + n:
                    payload = self.buf[4:4 + n]
                    self.buf = self.buf[4 + n:]
                    return mp_unpack(payload)
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            self.buf += chunk

    def recv_until(self, mtype, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.recv_msg(max(0.1, deadline - time.time()))
            if m is None:
                return None
            if m[0] == mtype:
                return m
        return None

    def hello(self, listen_port=0, version=1, network_id=None):
        self.send(msg(HELLO, version, self.features, network_id or self.network_id, self.pk,
                      self.nonce, listen_port, "raw-test-peer"))

    def handshake(self, bad_signature=False):
        """HELLO, read the node's HELLO, AUTH. Returns the node's key."""
        self.hello()
        h = self.recv_until(HELLO)
        if h is None:
            raise RuntimeError("node closed during the handshake")
        self.node_pk, self.node_nonce = h[4], h[5]
        m = auth_message(self.network_id, self.pk, self.nonce, self.node_pk, self.node_nonce)
        sig = ed25519_sign(self.seed, m)
        if bad_signature:
            sig = bytes([sig[0] ^ 1]) + sig[1:]
        self.send(msg(AUTH, sig))
        return self.node_pk

    def is_closed(self, timeout=5):
        """True once the node closed the connection (reading and dropping)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                self.sock.settimeout(max(0.05, deadline - time.time()))
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
        return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# ---- nodes ----------------------------------------------------------------------


class Ctl:
    """A control-socket connection: one command line, one JSON reply line."""

    def __init__(self, path, timeout=60):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.f = self.sock.makefile("rb")

    def send(self, line):
        if isinstance(line, str):
            line = line.encode()
        self.sock.sendall(line + b"\n")

    def recv(self):
        line = self.f.readline()
        if not line:
            raise RuntimeError("control socket closed")
        return json.loads(line)

    def call(self, line):
        self.send(line)
        return self.recv()

    def close(self):
        self.f.close()
        self.sock.close()


class Node:
    def __init__(self, pithd, root, name, network_id="pith-test", extra=(), env=None):
        """env: variables added to pithd's environment at every start
        (the test-only PITH_TEST_* hooks)."""
        self.pithd = pithd
        self.env = dict(env or {})
        self.name = name
        self.dir = os.path.join(root, name)
        self.sock = os.path.join(self.dir, "pithd.sock")
        self.network_id = network_id
        self.extra = list(extra)
        self.proc = None
        self.port = None
        self.log_path = os.path.join(root, name + ".log")

    def start(self, peers=None, listen_port=0, wait=15, env=None):
        """Starts pithd; a restart (peers None) keeps the same port and the
        peers of the last start, as a node restarted from its config would.
        env: variables for this start only, besides the node's own."""
        os.makedirs(self.dir, exist_ok=True)
        if peers is None:
            peers = getattr(self, "peers", ())
        self.peers = list(peers)
        port = listen_port or self.port or 0
        args = [self.pithd, "--data", self.dir, "--listen", "127.0.0.1:%d" % port,
                "--network-id", self.network_id] + self.extra
        for p in peers:
            args += ["--peer", p]
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log,
                                     env=dict(os.environ, **self.env, **(env or {})))
        deadline = time.time() + wait
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d; see %s" % (self.name, self.proc.returncode,
                                                                 self.log_path))
            try:
                st = self.status()
                self.port = int(st["listen"].rsplit(":", 1)[1])
                self.node_id = st["node_id"]
                return self
            except (OSError, RuntimeError, ValueError):
                time.sleep(0.05)
        raise RuntimeError("%s did not come up; see %s" % (self.name, self.log_path))

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def ctl(self, line, timeout=60):
        c = Ctl(self.sock, timeout)
        try:
            return c.call(line)
        finally:
            c.close()

    def status(self):
        return self.ctl("status", timeout=10)

    def records(self):
        return {r["pith_number"]: r for r in self.ctl("records")["records"]}

    def submit(self, lines, kind="event"):
        """Submits events (or bundles) pipelined; returns the replies."""
        c = Ctl(self.sock, 300)
        out = []
        try:
            batch = 512
            for i in range(0, len(lines), batch):
                chunk = lines[i:i + batch]
                c.sock.sendall(b"".join(b"%s %s\n" % (kind.encode(), l) for l in chunk))
                for _ in chunk:
                    out.append(c.recv())
        finally:
            c.close()
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if not self.proc:
            return None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        self.log.close()
        return rc

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


def target_and_friend(pithd, root, nodes, network_id, extra, env=None):
    """A node under test and an honest peer of it (started, connected,
    appended to nodes): the shape of the hostile and adversarial tests."""
    target = Node(pithd, root, "target", network_id=network_id, extra=extra, env=env).start()
    friend = Node(pithd, root, "friend", network_id=network_id, extra=extra, env=env).start(
        peers=[target.addr])
    nodes += [target, friend]
    wait_for(lambda: any(p["state"] == "ready" for p in target.status()["peers"]), 10,
             what="the honest peer to connect")
    return target, friend


def check(cond, what):
    """A journey's step: prints "ok - what", or fails with it."""
    if not cond:
        raise AssertionError(what)
    print("ok -", what, flush=True)


def read_text(path):
    """A file's text ("" when it does not exist; bad bytes replaced)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def ctl_status(sock):
    """The control socket's status, or None while nothing answers there."""
    try:
        c = Ctl(sock, 10)
    except OSError:
        return None
    try:
        return c.call("status")
    except OSError:
        return None
    finally:
        c.close()


def free_port():
    """A TCP port on 127.0.0.1 free a moment ago (for a process to listen on)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(pred, timeout, interval=0.1, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


def finish(nodes, root, ok, keep, tail=30):
    """Ends a test run: stops what still runs, shows the end of every node's
    log if the run failed, removes the work directory unless it failed or
    keep is set."""
    for n in nodes:
        if n.alive():
            n.stop()
    if not ok:
        for n in nodes:
            print("# ---- %s (last lines)" % n.log_path)
            try:
                for line in open(n.log_path, errors="replace").read().splitlines()[-tail:]:
                    print("#", line)
            except OSError:
                pass
    if ok and not keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print("# work directory kept: %s" % root, flush=True)


def run_test(prefix, body, tools=("pithd", "pithctl", "gen-events"), add_args=None):
    """The main of a node test: parses --TOOL PATH for each of tools, --keep
    and whatever add_args(parser) adds; makes a work directory; runs
    body(args, root, nodes), which appends each Node it starts to nodes;
    ends with finish(). Returns the exit status (0: body returned)."""
    ap = argparse.ArgumentParser()
    for t in tools:
        ap.add_argument("--" + t, required=True)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    if add_args:
        add_args(ap)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    nodes = []
    ok = False
    try:
        body(args, root, nodes)
        ok = True
    finally:
        finish(nodes, root, ok, args.keep)
    return 0 if ok else 1


def table_file(store, cf):
    """(path, size) of the largest table file of column family cf in a
    store (its name is in the file's properties block: key
    "rocksdb.column.family.name", stored as "name" after the shared prefix
    of the key before it), or None."""
    best = None
    for f in os.listdir(store):
        if not f.endswith(".sst"):
            continue
        p = os.path.join(store, f)
        with open(p, "rb") as fh:
            d = fh.read()
        if b"column.family.id" in d and b"name" + cf.encode() in d and \
                (not best or len(d) > best[1]):
            best = (p, len(d))
    return best


def import_damaged(pithctl, node, key, events, cf, at):
    """Imports the events file into node's store (node not started), then
    flips one byte of cf's largest table file, at fraction at of it.
    Returns (path, size, offset) of the flipped byte."""
    store = os.path.join(node.dir, "store")
    os.makedirs(node.dir)
    r = subprocess.run([pithctl, "--store", store, "--trust-key", key, "import",
                        "--no-progress", events], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    best = table_file(store, cf)
    assert best, "no table file of %s in %s" % (cf, store)
    path, size = best
    off = int(size * at)
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x40]))
    return path, size, off


def run_browser_test(prefix, body):
    """The main of a test that drives headless Chromium: run_test with
    --out DIR (screenshots) and --chromium PATH (default: chromium on the
    PATH); 77 (skipped) when there is none (Debian package `chromium`)."""
    exe = None
    for i, a in enumerate(sys.argv):
        if a == "--chromium" and i + 1 < len(sys.argv):
            exe = sys.argv[i + 1]
    if not (exe or shutil.which("chromium") or shutil.which("chromium-browser")):
        print("SKIP: chromium is not installed (apt-get install -y chromium)")
        return 77

    def add(ap):
        ap.add_argument("--out", required=True)
        ap.add_argument("--chromium")
    return run_test(prefix, body, tools=("pithd", "pithctl", "gen-events"), add_args=add)


def sample_mirror(args, root, nodes, records, extra=()):
    """A node serving HTTP that holds records generated records (2 events
    each) and, last (the most recently changed), the registry's sample
    bundle (tests/data/bundle-AR7B3DEV.json): (node, its base URL)."""
    key, lines = make_events(args.gen_events, root, records, 2)
    n = Node(args.pithd, root, "mirror",
             extra=["--trust-key", key, "--http", "127.0.0.1:0"] + list(extra))
    nodes.append(n.start())
    assert all(x.get("ok") for x in n.submit(lines))
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "data", "bundle-AR7B3DEV.json"), "rb") as f:
        r = n.submit([f.read().replace(b"\n", b"")], kind="bundle")
    assert r[0].get("ok"), r
    return n, "http://" + n.status()["http"]


def make_events(gen_events, root, records, per_record):
    """Signed test events from tests/gen_events: (trusted key file, lines).
    Every node of a test must be given the key file with --trust-key."""
    key = os.path.join(root, "testkey.pub")
    evfile = os.path.join(root, "events.jsonl")
    subprocess.run([gen_events, "--records", str(records), "--per-record", str(per_record),
                    "--key-out", key, evfile], check=True, stdout=subprocess.DEVNULL)
    with open(evfile, "rb") as f:
        return key, [l for l in f.read().splitlines() if l.strip()]


def signed_retitles(pithctl, key, records, path, created, title):
    """A graph_snapshot with a new title for each of records, signed with
    key (`pithctl sign`) and written to path as JSON Lines; created(i) and
    title(i) give the i-th event's created_at and title. Returns path."""
    lines = []
    for i, r in enumerate(records):
        e = {"event_type": "graph_snapshot", "subject_pith_number": r, "target": "graph",
             "created_at": created(i), "payload": {"graph_snapshot": {"paper": {"title": title(i)}}}}
        lines.append(subprocess.run([pithctl, "sign", "--key", key, "-"], input=json.dumps(e),
                                    capture_output=True, text=True, check=True).stdout.strip())
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def events_by_record(lines):
    """make_events' lines grouped by record: (the pith numbers sorted,
    {pith number: its lines})."""
    by = {}
    for line in lines:
        by.setdefault(json.loads(line)["subject_pith_number"], []).append(line)
    return sorted(by), by


class Tap:
    """TAP cases as decorated functions: each runs at once as one case; an
    exception or a failed assert fails it and the run goes on."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def case(self, name):
        def wrap(fn):
            self.n += 1
            try:
                fn()
                print("ok %d - %s" % (self.n, name), flush=True)
            except Exception as e:  # noqa: BLE001 - report and continue
                self.failed += 1
                import traceback
                for line in traceback.format_exc().splitlines():
                    print("#   " + line)
                print("not ok %d - %s: %s" % (self.n, name, e), flush=True)
            return fn
        return wrap
