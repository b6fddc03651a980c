#!/usr/bin/env python3
"""Writes roots.json and proofs.json of the state-root corpus from the
spec (docs/state-root.md) alone: an implementation independent of
proto/stateroot.c, in the standard library. documents.json (Ed25519) is
written by `test_stateroot --write-documents FILE`.

    python3 gen_state_root.py [DIR]     (default: this file's folder)
"""
import base64
import hashlib
import json
import os
import sys

KEY_BITS = 130
B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def key_of(pith):
    """The key: the body's 130 bits as an integer (bit 0 most significant)."""
    body = pith[10:]
    assert len(pith) == 36 and pith.startswith("pith:") and pith[9] == ":" and len(body) == 26
    v = 0
    for c in body:
        v = v * 32 + B32.index(c)
    return v


def bit(k, i):
    return (k >> (KEY_BITS - 1 - i)) & 1


def common(a, b):
    x = a ^ b
    return KEY_BITS if x == 0 else KEY_BITS - x.bit_length()


def leaf_hash(pith, state_hex):
    return hashlib.sha256(b"\x00" + pith.encode("ascii") + bytes.fromhex(state_hex)).digest()


def node_hash(b, left, right):
    return hashlib.sha256(b"\x01" + bytes([b]) + left + right).digest()


EMPTY = hashlib.sha256(b"").digest()


def subtree(leaves):
    """leaves: sorted [(key, pith, state_hex)], at least one."""
    if len(leaves) == 1:
        return leaf_hash(leaves[0][1], leaves[0][2])
    b = common(leaves[0][0], leaves[-1][0])
    m = next(i for i, l in enumerate(leaves) if bit(l[0], b))
    return node_hash(b, subtree(leaves[:m]), subtree(leaves[m:]))


def sort(leaves):
    return sorted((key_of(p), p, s) for p, s in leaves)


def root(leaves):
    s = sort(leaves)
    return subtree(s) if s else EMPTY


def prove(leaves, asked):
    s = sort(leaves)
    k = key_of(asked)
    path = []
    while len(s) > 1:
        b = common(s[0][0], s[-1][0])
        m = next(i for i, l in enumerate(s) if bit(l[0], b))
        lo, hi = s[:m], s[m:]
        if bit(k, b):
            path.append({"bit": b, "sibling": subtree(lo).hex()})
            s = hi
        else:
            path.append({"bit": b, "sibling": subtree(hi).hex()})
            s = lo
    leaf = {"pith_number": s[0][1], "state_sha256": s[0][2]} if s else None
    return {
        "proof_type": "pith_state_root_proof", "proof_version": "1",
        "tree_version": "pith-state-root-v1", "pith_number": asked,
        "present": bool(s) and s[0][1] == asked, "leaf": leaf, "path": path,
        "root_sha256": (subtree(sort(leaves)) if leaves else EMPTY).hex(),
        "record_count": len(leaves),
    }


def pith_of(digest, year="2024"):
    return "pith:" + year + ":" + base64.b32encode(digest).decode()[:26]


def det(label, n):
    """n deterministic 32-byte strings."""
    return [hashlib.sha256(("%s/%d" % (label, i)).encode()).digest() for i in range(n)]


def leaves_of(label, n, year="2024"):
    return [(pith_of(d, year), hashlib.sha256(d).hexdigest()) for d in det(label, n)]


def body_with(prefix_body, last):
    return "pith:2024:" + prefix_body + last


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    st = hashlib.sha256(b"state").hexdigest()
    st2 = hashlib.sha256(b"state 2").hexdigest()
    sample = "pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE"
    base = "AR7B3DEVMOTSBRCCVXUCLYSRR"  # 25 characters
    roots = [
        ("empty", "no leaves: SHA-256 of the empty string", []),
        ("one-leaf", "one leaf: the root is its leaf hash", [(sample, st)]),
        ("two-leaves-last-bit", "two keys that differ only in bit 129 (the last body character's lowest bit)",
         [(body_with(base, "E"), st), (body_with(base, "F"), st2)]),
        ("two-leaves-first-bit", "two keys that differ in bit 0", [("pith:2024:A" + "A" * 25, st), ("pith:2024:7" + "A" * 25, st)]),
        ("base32-order", "digits sort before letters in ASCII but after them in value ('2' is 26)",
         [("pith:2024:2" + "A" * 25, st), ("pith:2024:Z" + "A" * 25, st), ("pith:2024:A" + "A" * 25, st)]),
        ("year-in-leaf", "the same leaves but one year differs: the leaf hash covers the whole pith number",
         [(sample.replace("2024", "2023"), st), (body_with(base, "F"), st2)]),
        ("given-out-of-order", "leaves listed in no order: implementations sort by key",
         list(reversed(leaves_of("order", 9)))),
        ("hundred", "100 leaves", leaves_of("hundred", 100)),
        ("many", "300 leaves", leaves_of("many", 300)),
    ]
    rcases = [{"name": n, "rule": "SR-TREE", "description": d,
               "leaves": [{"pith_number": p, "state_sha256": s} for p, s in l],
               "expect": {"record_count": len(l), "root_sha256": root(l).hex()}} for n, d, l in roots]
    # refused: the same key twice, a malformed pith number
    rcases.append({"name": "repeated-key", "rule": "SR-TREE", "description": "one key twice: refused (null)",
                   "leaves": [{"pith_number": sample, "state_sha256": st}, {"pith_number": sample, "state_sha256": st2}],
                   "expect": None})
    rcases.append({"name": "not-a-pith-number", "rule": "SR-KEY", "description": "a short pith number: refused (null)",
                   "leaves": [{"pith_number": "pith:AR7B3DEV", "state_sha256": st}], "expect": None})
    with open(os.path.join(out, "roots.json"), "w") as f:
        json.dump({"kind": "state_root",
                   "description": "leaves in, root out (docs/state-root.md, sections 2 and 3); null: refused",
                   "cases": rcases}, f, indent=1, sort_keys=True)
        f.write("\n")

    tree = leaves_of("proofs", 20)
    r = root(tree).hex()
    present = tree[7][0]
    absent = leaves_of("absent", 1)[0][0]
    pcases = []

    def case(name, desc, proof, expect, rt=r):
        if expect == "present":
            expect = {"present": True, "state_sha256": proof["leaf"]["state_sha256"]}
        elif expect == "absent":
            expect = {"present": False}
        else:
            expect = None
        pcases.append({"name": name, "rule": "SR-PROOF", "description": desc, "root_sha256": rt, "proof": proof,
                       "expect": expect})

    good = prove(tree, present)
    case("present", "a record in the tree", good, "present")
    case("absent", "a record not in the tree: the leaf its bits lead to, and that leaf's path",
         prove(tree, absent), "absent")
    case("empty-tree", "the empty tree: no leaf, no path", prove([], absent), "absent", EMPTY.hex())
    case("single-leaf-absent", "a tree of one leaf, asked for another",
         prove(tree[:1], absent), "absent", root(tree[:1]).hex())
    t = json.loads(json.dumps(good))
    t["path"][1]["sibling"] = ("1" if t["path"][1]["sibling"][0] != "1" else "2") + t["path"][1]["sibling"][1:]
    case("sibling-changed", "one sibling hash changed", t, "invalid")
    t = json.loads(json.dumps(good))
    t["path"] = t["path"][:-1]
    case("path-truncated", "the last step left out", t, "invalid")
    t = json.loads(json.dumps(good))
    t["leaf"]["state_sha256"] = st
    case("state-changed", "the leaf's state_sha256 replaced", t, "invalid")
    t = json.loads(json.dumps(good))
    t["leaf"] = {"pith_number": tree[3][0], "state_sha256": tree[3][1]}
    case("leaf-swapped", "another record's leaf on this path", t, "invalid")
    t = json.loads(json.dumps(good))
    t["path"][0], t["path"][1] = t["path"][1], t["path"][0]
    case("steps-out-of-order", "two steps swapped: bits must increase", t, "invalid")
    t = prove(tree, tree[3][0])
    t["pith_number"] = present
    t["present"] = False
    case("present-claimed-absent", "another record's proof offered as the absence of a present one", t, "invalid")
    case("wrong-root", "a good proof against another root", good, "invalid", root(tree[1:]).hex())
    with open(os.path.join(out, "proofs.json"), "w") as f:
        json.dump({"kind": "state_root_proof",
                   "description": "proofs against a trusted root (docs/state-root.md, section 6); null: does not verify",
                   "cases": pcases}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
