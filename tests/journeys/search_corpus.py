"""A small corpus for the search journeys: records whose authors and
titles are in many scripts, loaded into a running node the way an
operator would (python3 standard library only).

The records come from tests/gen_events (a record_created each, with a
receipt by its test registry key); their titles and authors are graph
snapshots written here and signed by an operator key made with
`pithctl keygen`, signed with `pithctl sign`, trusted with --trust-key,
imported with `pithctl --node SOCKET import`.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pithtest import Node, free_port, wait_for  # noqa: E402

# (key, title, authors): key names the record in the journeys' checks
PAPERS = [
    ("muller", "Kernel methods revisited", "Hans Müller, Ada Lovelace"),
    ("orsted", "On the magnetic effect of the electric current", "Hans Christian Ørsted"),
    ("dvorak", "Symphony From the New World", "Antonín Dvořák"),
    ("lukasiewicz", "Many-valued logic and its algebra", "Jan Łukasiewicz"),
    ("nunez", "Redes neuronales para el análisis", "María Ñúñez"),
    ("zh", "深度学习的研究进展", "李明, 王芳"),
    ("ja", "機械学習とデータ解析", "山田太郎"),
    ("ru", "Теория графов и её приложения", "Иван Петров"),
    ("el", "Θεωρία αριθμών", "Νίκος Παπαδόπουλος"),
    ("mixed", "GraphQL meets SQLite: A Case STUDY", "Zoë O'Brien-Smith"),
]


def log(*a):
    print("#", *a, flush=True)


def load(args, root, nodes, name="node"):
    """Starts a node with HTTP on a free port and loads the corpus into it.
    Returns (node, http_port, {key: pith_number}, trust_args)."""
    P = args.pithctl
    gen_key = os.path.join(root, "registry-test.pub")
    gen = os.path.join(root, "records.jsonl")
    subprocess.run([args.gen_events, "--records", str(len(PAPERS)), "--per-record", "1",
                    "--seed", "51", "--key-out", gen_key, gen], check=True,
                   stdout=subprocess.DEVNULL)
    opkey = os.path.join(root, "operator.key")
    subprocess.run([P, "keygen", "--key-id", "journey-operator", opkey], check=True,
                   stdout=subprocess.DEVNULL)
    with open(gen) as f:
        subjects = [json.loads(l)["subject_pith_number"] for l in f if l.strip()]
    assert len(subjects) == len(PAPERS), subjects
    unsigned = "".join(json.dumps({
        "event_type": "graph_snapshot", "subject_pith_number": s, "target": "graph",
        "created_at": "2031-03-01T00:00:00Z",
        "payload": {"graph_snapshot": {"paper": {"title": t, "authors_text": a}}}},
        ensure_ascii=False) + "\n" for s, (_, t, a) in zip(subjects, PAPERS))
    papers = os.path.join(root, "papers.jsonl")
    with open(papers, "wb") as f:
        f.write(subprocess.run([P, "sign", "--key", opkey, "-"], input=unsigned.encode(),
                               capture_output=True, check=True).stdout)
    port = free_port()
    trust = ["--trust-key", gen_key, "--trust-key", opkey]
    node = Node(args.pithd, root, name, extra=["--http", "127.0.0.1:%d" % port] + trust)
    nodes.append(node)
    node.start()
    for f in (gen, papers):
        r = subprocess.run([P, "--node", node.sock, "--json", "import", "--no-progress", f],
                           capture_output=True, text=True)
        assert r.returncode == 0, (f, r.stderr)
        stats = json.loads(r.stdout)
        assert stats["stored"] == len(PAPERS) and stats["rejected"] == 0, (f, stats)
    ids = {k: s for s, (k, _, _) in zip(subjects, PAPERS)}
    # the node's index follows its store on a thread of its own
    wait_for(lambda: get_json(port, "/api/search?q=kernel")[1].get("results"), 15,
             what="the node's search index to take the corpus")
    log("node up, %d records with their papers, HTTP on %d" % (len(PAPERS), port))
    return node, port, ids, trust


def get(port, path, headers=None):
    """(status, headers, body bytes) of GET path (already percent-encoded
    as a client would send it)."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def raw_get(port, target):
    """(status, body) of GET target (bytes, sent as they are: raw UTF-8,
    which urllib would refuse to send)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
        c.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    if b"chunked" in head.lower():
        out = b""
        while body:
            n, _, rest = body.partition(b"\r\n")
            size = int(n, 16)
            if not size:
                break
            out += rest[:size]
            body = rest[size + 2:]
        body = out
    return int(head.split()[1]), body


def get_json(port, path):
    st, _, b = get(port, path)
    try:
        return st, json.loads(b)
    except ValueError:
        return st, {"unparsed": b[:200]}


def wait_until(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)
