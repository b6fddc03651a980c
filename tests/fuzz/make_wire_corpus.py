#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_wire (tests/fuzz/corpus/wire): one frame
of every message type, a stream of several, and a few broken ones. Run
again after a change to docs/wire.md; the files are committed."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from pithtest import mp_pack, msg, frame  # noqa: E402

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "wire")
os.makedirs(out, exist_ok=True)
ids = bytes(range(32)) + bytes(range(32, 64))
pith = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
ev = b'{"event_type":"x"}'
# a signed root document (docs/state-root.md section 5), the corpus's first
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance",
                       "state-root", "documents.json")) as f:
    import json
    rootdoc = json.load(f)["cases"][0]["text"].encode()
seeds = {
    "hello": msg(1, 1, 0, "pith-main", b"k" * 32, b"n" * 32, 7411, "pithd/0.1"),
    "hello_extra": frame(mp_pack([1, 2, 1, "pith-main", b"k" * 32, b"n" * 32, 0, "", None])),
    "hello_url": msg(1, 1, 1, "pith-main", b"k" * 32, b"n" * 32, 7411, "pithd/0.1",
                     "https://mirror.example.org:8443/pith"),
    "hello_url_later": frame(mp_pack([1, 2, 1, "pith-main", b"k" * 32, b"n" * 32, 0, "",
                                      "http://[::1]:8080", 7])),
    "hello_bad_url": msg(1, 1, 0, "pith-main", b"k" * 32, b"n" * 32, 0, "",
                         "http://user:pw@evil.example/?q#f"),
    "hello_url_not_str": msg(1, 1, 0, "pith-main", b"k" * 32, b"n" * 32, 0, "", b"http://a"),
    "auth": msg(2, b"s" * 64),
    "ping": msg(3, 7),
    "pong": msg(4, 2**64 - 1),
    "bye": msg(5, 3, "banned: malformed frame"),
    "peers_req": msg(6),
    "peers": msg(7, [[bytes([127, 0, 0, 1]), 7411], [bytes(15) + b"\x01", 9]]),
    "announce": msg(8, ids),
    "get": msg(9, ids[:32]),
    "event": msg(10, ids[:32], ev),
    "notfound": msg(11, ids),
    "bundle_announce": msg(12, [[pith, 1717000000000000, ids[:32]]]),
    "bundle_get": msg(13, [pith]),
    "bundle": msg(14, pith, b"{}"),
    # full messages, as the bulk bundle pace sends them (WIRE_FEAT_BUNDLE_BULK)
    "hello_bulk": msg(1, 1, 7, "pith-main", b"k" * 32, b"n" * 32, 7411, "pithd/0.1"),
    "bundle_announce_full": msg(12, [[pith, 1717000000000000 + i, bytes([i]) * 32]
                                     for i in range(64)]),
    "bundle_get_full": msg(13, [pith] * 64),
    "inv_req": msg(15, -(2**63), bytes(32), 4096),
    "inv": msg(16, ids, 1717000000000000, ids[32:], False),
    # a reconciliation message: version 1, key flag, 16-byte key, one FP range
    "recon": msg(32, 1, b"\x01\x01" + b"K" * 16 + b"\x00\x01" + b"F" * 8, 500000),
    "recon_end": msg(32, 2, b"", 0),
    "bad_recon_session0": msg(32, 0, b"\x01\x00", 0),
    # the same over bundles (RECON_BUNDLES)
    "recon_bundles": msg(33, 3, b"\x01\x01" + b"K" * 16 + b"\x00\x01" + b"F" * 8, 100000),
    "recon_bundles_end": msg(33, 4, b"", 0),
    "root": msg(17, rootdoc),
    "bad_root_empty": msg(17, b""),
    "bad_root_big": msg(17, b"{" * 4097),
    "bad_root_str": msg(17, "{}"),
    "stream": msg(3, 1) + msg(8, ids) + msg(4, 1) + msg(6),
    "bad_zero_len": b"\x00\x00\x00\x00",
    "bad_huge_len": b"\xff\xff\xff\xff\x91\x03",
    "bad_count": frame(b"\xdd\xff\xff\xff\xff\x01"),
    "bad_float": frame(b"\x92\x03\xcb" + bytes(8)),
    "bad_partial": msg(8, ids)[:-5],
    "bad_reserved": msg(34),
    "bad_deep": frame(b"\x91\x91\x91\x91\x91\x01"),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(seeds), out))
