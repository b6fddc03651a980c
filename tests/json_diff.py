#!/usr/bin/env python3
"""Differential test: our canonical JSON against Python's own.

Generates random JSON documents (seeded, reproducible) and compares, byte
for byte, what the C code writes with what the registry's rule gives:

    json.dumps(json.loads(text), sort_keys=True, separators=(',', ':'),
               ensure_ascii=False).encode()

Documents the spec says a mirror must refuse (duplicate keys, lone
surrogates, NaN/Infinity, overflow, invalid UTF-8, raw control characters,
trailing data, too deep, integers over 4300 digits) are generated too; for
those both sides must refuse, and our error message must name the problem.

The bulk goes through tests/canon_batch (one process, length-prefixed
frames); a few hundred documents also go through `pithctl canon` so the CLI
path is covered.

usage: json_diff.py --batch PATH [--pithctl PATH] [--data DIR]
                    [-n COUNT] [--seed SEED] [--cli COUNT] [SEED]
Standard library only.
"""

import argparse
import decimal
import json
import math
import os
import random
import struct
import subprocess
import sys
import time

MAX_DEPTH = 128  # json_limits_default.max_depth
WS = ' \t\n\r'
SHORT_ESC = {'"': '\\"', '\\': '\\\\', '\b': '\\b', '\f': '\\f', '\n': '\\n',
             '\r': '\\r', '\t': '\\t'}


# ---- the reference ----------------------------------------------------

def _no_dups(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError('duplicate key')
    return dict(pairs)


def _no_constants(name):
    raise ValueError('constant ' + name)


def reference(doc):
    """Python's canonical bytes for doc, or None if a mirror must refuse it
    (Python's own errors plus what it would silently accept otherwise)."""
    try:
        v = json.loads(doc, object_pairs_hook=_no_dups,
                       parse_constant=_no_constants)
        return json.dumps(v, sort_keys=True, separators=(',', ':'),
                          ensure_ascii=False, allow_nan=False).encode('utf-8')
    except (ValueError, UnicodeError, RecursionError):
        return None


# ---- value model --------------------------------------------------------
# A generated tree holds decoded Python values plus wrappers that carry a
# chosen textual form, so one value can be written many ways.

class Num:
    """A number with its exact text (int or float grammar)."""
    def __init__(self, text):
        self.text = text


class Obj:
    """An object as a list of (key, value) pairs in writing order."""
    def __init__(self, pairs):
        self.pairs = pairs


class Raw:
    """Bytes written as they are (used to plant bad input)."""
    def __init__(self, data):
        self.data = data


class Gen:
    def __init__(self, rng):
        self.r = rng

    # -- whitespace and strings --

    def ws(self):
        r = self.r
        if r.random() < 0.7:
            return ''
        return ''.join(r.choice(WS) for _ in range(r.randint(1, 3)))

    def hex4(self, cp):
        return ''.join(self.r.choice((c.lower(), c.upper())) for c in '%04x' % cp)

    def char(self):
        """One random character, drawn from every interesting region."""
        r = self.r
        k = r.random()
        if k < 0.35:
            return chr(r.randint(0x20, 0x7e))
        if k < 0.45:
            return chr(r.randint(0, 0x1f))
        if k < 0.48:
            return r.choice('"\\/\x7f')
        if k < 0.53:
            return chr(r.choice((0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfeff, 0xfffe,
                                 0xffff, 0x10000, 0x10ffff, 0x2028, 0x2029, 0xa0, 0x85)))
        if k < 0.65:
            return chr(r.randint(0x80, 0x7ff))
        if k < 0.82:
            while True:
                cp = r.randint(0x800, 0xffff)
                if not 0xd800 <= cp <= 0xdfff:
                    return chr(cp)
        # astral: every plane 1..16
        return chr(r.randint(0x10000, 0x10ffff))

    def string(self, maxlen=12):
        r = self.r
        n = r.choice((0, 1, 2, r.randint(0, maxlen), r.randint(0, maxlen)))
        return ''.join(self.char() for _ in range(n))

    def emit_string(self, s):
        """s as a JSON string literal, each character raw or escaped at random."""
        r = self.r
        out = ['"']
        for ch in s:
            cp = ord(ch)
            if ch in SHORT_ESC and (cp < 0x20 or ch in '"\\') and r.random() < 0.6:
                out.append(SHORT_ESC[ch])
            elif cp < 0x20 or ch in '"\\':
                out.append('\\u' + self.hex4(cp))
            elif ch == '/' and r.random() < 0.5:
                out.append('\\/')
            elif r.random() < 0.3:
                if cp >= 0x10000:
                    v = cp - 0x10000
                    out.append('\\u' + self.hex4(0xd800 + (v >> 10)) +
                               '\\u' + self.hex4(0xdc00 + (v & 0x3ff)))
                else:
                    out.append('\\u' + self.hex4(cp))
            else:
                out.append(ch)
        out.append('"')
        return ''.join(out)

    # -- numbers --

    def big_int(self):
        r = self.r
        k = r.random()
        if k < 0.1:
            return Num(r.choice(('0', '-0')))
        if k < 0.5:
            n = r.randint(-10**6, 10**6)
        elif k < 0.7:
            n = r.randint(-2**64, 2**64)
        elif k < 0.98:
            digits = r.randint(20, 600)
            n = r.randint(10**(digits - 1), 10**digits - 1) * r.choice((1, -1))
        else:
            n = r.randint(10**4299, 10**4300 - 1) * r.choice((1, -1))  # the limit
        return Num(str(n))

    def double(self):
        """A finite double from a mix of distributions."""
        r = self.r
        k = r.random()
        if k < 0.25:  # random bit pattern
            while True:
                x = struct.unpack('<d', struct.pack('<Q', r.getrandbits(64)))[0]
                if math.isfinite(x):
                    return x
        if k < 0.35:  # powers of two, subnormals included
            return math.ldexp(1.0, r.randint(-1074, 1023)) * r.choice((1, -1))
        if k < 0.45:  # subnormal bit patterns
            return struct.unpack('<d', struct.pack('<Q', r.getrandbits(52)))[0]
        if k < 0.60:  # around the repr fixed/exponent boundaries
            x = r.choice((1e16, 1e-4, 1e15, 1e17, 1e-5, 1e-3, 2**53, 1e22, 1e23))
            for _ in range(r.randint(0, 4)):
                x = math.nextafter(x, r.choice((math.inf, -math.inf)))
            return x * r.choice((1, -1))
        if k < 0.80:  # short decimals
            return round(r.uniform(-1e6, 1e6), r.randint(0, 8))
        if k < 0.90:  # any decade
            return r.random() * 10.0 ** r.randint(-330, 308)
        return r.choice((0.0, -0.0, 5e-324, 2.2250738585072014e-308,
                         2.225073858507201e-308, 1.7976931348623157e308, 0.1, 0.5,
                         1.0, 100.0, 9007199254740993.0, 1e-7))

    def float_text(self, x):
        """A JSON text for x (or a value near it) in one of many forms."""
        r = self.r
        k = r.random()
        if k < 0.3:
            t = repr(x)
        elif k < 0.4:
            t = repr(x).upper()
        elif k < 0.55:
            t = '%.*e' % (r.randint(0, 25), x)
            if r.random() < 0.5:
                t = t.replace('e', 'E')
        elif k < 0.65:
            # exponent with an explicit sign or not, and leading zeros
            m, e = ('%.*e' % (r.randint(0, 17), x)).split('e')
            e = int(e)
            sign = '-' if e < 0 else r.choice(('+', ''))
            t = '%s%s%s%0*d' % (m, r.choice('eE'), sign, r.randint(1, 5), abs(e))
        elif k < 0.72 and x != 0 and 1e-40 < abs(x) < 1e40:
            t = '%.*f' % (r.randint(1, 60), x)
        elif k < 0.80:
            t = str(decimal.Decimal(x))  # the exact binary value
        elif k < 0.88 and x != 0:
            # exactly half way to the next double: ties-to-even in strtod
            with decimal.localcontext() as c:
                c.prec = 1200
                y = math.nextafter(x, math.inf)
                if not math.isfinite(y):
                    y = math.nextafter(x, -math.inf)
                t = str((decimal.Decimal(x) + decimal.Decimal(y)) / 2)
        elif k < 0.94:
            # all digits in front, exponent moved to match
            m, e = ('%.17e' % x).split('e')
            neg = m.startswith('-')
            digits = m.lstrip('-').replace('.', '').rstrip('0') or '0'
            t = '%s%se%d' % ('-' if neg else '', digits, int(e) - (len(digits) - 1))
            if digits.startswith('0') and len(digits) > 1:
                t = repr(x)
        else:
            t = repr(x)
        if not math.isfinite(float(t)):
            t = repr(x)  # rounding to fewer digits went past the largest double
        # Decimal writes e.g. '1E+2' or '100': keep it a float, as JSON allows
        if not any(c in t for c in '.eE'):
            t += r.choice(('.0', 'e0', 'E+00', '.000'))
        return Num(t)

    def number(self):
        if self.r.random() < 0.4:
            return self.big_int()
        return self.float_text(self.double())

    # -- trees --

    def value(self, depth, budget):
        r = self.r
        if depth < MAX_DEPTH - 2 and r.random() < 0.02:
            return self.chain(depth, budget)
        k = r.random()
        if depth >= MAX_DEPTH - 2 or budget[0] <= 0:
            k = r.random() * 0.6
        budget[0] -= 1
        if k < 0.08:
            return r.choice((None, True, False))
        if k < 0.35:
            return self.number()
        if k < 0.6:
            return self.string()
        if k < 0.8:
            return [self.value(depth + 1, budget) for _ in range(self.count())]
        keys, seen = [], set()
        for _ in range(self.count()):
            key = self.string(8)
            if key not in seen:
                seen.add(key)
                keys.append(key)
        return Obj([(key, self.value(depth + 1, budget)) for key in keys])

    def count(self):
        r = self.r
        return r.choice((0, 1, 2, 3, r.randint(0, 8)))

    def chain(self, depth, budget):
        """A deep single path of arrays and objects (up to ~100 levels)."""
        r = self.r
        n = r.randint(1, min(100, MAX_DEPTH - 2 - depth))
        inner = self.value(depth + n, [3])
        for _ in range(n):
            inner = [inner] if r.random() < 0.5 else Obj([(self.string(3), inner)])
        return inner

    def emit(self, v, out):
        """Append the text of v (str pieces, or bytes for Raw) to out."""
        if v is None:
            out.append('null')
        elif v is True:
            out.append('true')
        elif v is False:
            out.append('false')
        elif isinstance(v, Num):
            out.append(v.text)
        elif isinstance(v, str):
            out.append(self.emit_string(v))
        elif isinstance(v, Raw):
            out.append(v.data)
        elif isinstance(v, list):
            out.append('[' + self.ws())
            for i, item in enumerate(v):
                if i:
                    out.append(self.ws() + ',' + self.ws())
                self.emit(item, out)
            out.append(self.ws() + ']')
        elif isinstance(v, Obj):
            out.append('{' + self.ws())
            for i, (key, item) in enumerate(v.pairs):
                if i:
                    out.append(self.ws() + ',' + self.ws())
                out.append(self.emit_string(key) + self.ws() + ':' + self.ws())
                self.emit(item, out)
            out.append(self.ws() + '}')
        else:
            raise TypeError(type(v))

    def text(self, v):
        out = [self.ws()]
        self.emit(v, out)
        out.append(self.ws())
        return b''.join(p if isinstance(p, bytes) else p.encode('utf-8', 'surrogatepass')
                        for p in out)

    def doc(self):
        r = self.r
        budget = [r.choice((5, 20, 60, 150, 400))]
        if r.random() < 0.15:
            v = self.value(0, budget)  # any root, scalars included
        elif r.random() < 0.5:
            v = [self.value(1, budget) for _ in range(r.randint(0, 12))]
        else:
            v = Obj([(k, self.value(1, budget))
                     for k in {self.string(8): 0 for _ in range(r.randint(0, 12))}])
        t = self.text(v)
        if self.r.random() < 0.01:
            t = b'\xef\xbb\xbf' + t  # json.loads on bytes skips a BOM, and so do we
        return t

    # -- documents that must be refused --

    def containers(self, v, acc):
        if isinstance(v, list):
            acc.append(v)
            for x in v:
                self.containers(x, acc)
        elif isinstance(v, Obj):
            acc.append(v)
            for _, x in v.pairs:
                self.containers(x, acc)
        return acc

    def plant(self, bad):
        """A random container tree with bad (a value) placed somewhere in it."""
        r = self.r
        root = [self.value(1, [r.choice((3, 10, 30))]) for _ in range(r.randint(0, 3))]
        spots = self.containers(root, [])
        spot = r.choice(spots)
        if isinstance(spot, list):
            spot.insert(r.randint(0, len(spot)), bad)
        else:
            key = self.string(4) + '\x00planted'
            spot.pairs.insert(r.randint(0, len(spot.pairs)), (key, bad))
        return root

    def bad_doc(self):
        """(text, category, message fragment, Python refuses too)."""
        r = self.r
        cat = r.choice(('dup', 'surrogate', 'surrogate_raw', 'constant', 'overflow',
                        'utf8', 'control', 'trailing', 'deep', 'bigint'))
        s = lambda: self.emit_string(self.string(4))[1:-1].encode('utf-8')
        if cat == 'dup':
            root = self.plant(Obj([]))
            objs = [c for c in self.containers(root, []) if isinstance(c, Obj)]
            o = r.choice(objs)
            if not o.pairs:
                o.pairs.append((self.string(5), self.number()))
            key = r.choice(o.pairs)[0]
            o.pairs.insert(r.randint(0, len(o.pairs)), (key, self.value(5, [3])))
            return self.text(root), cat, 'duplicate key', True
        if cat == 'surrogate':
            hi, lo = r.randint(0xd800, 0xdbff), r.randint(0xdc00, 0xdfff)
            bad = r.choice((
                '\\u' + self.hex4(hi),
                '\\u' + self.hex4(lo),
                '\\u' + self.hex4(hi) + '\\u' + self.hex4(r.randint(0, 0xd7ff)),
                '\\u' + self.hex4(hi) + '\\u' + self.hex4(hi),
                '\\u' + self.hex4(hi) + 'x\\u' + self.hex4(lo),
                '\\u' + self.hex4(lo) + '\\u' + self.hex4(hi),
            )).encode()
            return self.text(self.plant(Raw(b'"' + s() + bad + s() + b'"'))), cat, \
                'surrogate', True
        if cat == 'surrogate_raw':  # a surrogate encoded as UTF-8 (ED A0..BF xx)
            cp = r.randint(0xd800, 0xdfff)
            bad = chr(cp).encode('utf-8', 'surrogatepass')
            return self.text(self.plant(Raw(b'"' + s() + bad + s() + b'"'))), cat, \
                'invalid UTF-8', True
        if cat == 'constant':
            bad = r.choice(('NaN', 'Infinity', '-Infinity')).encode()
            return self.text(self.plant(Raw(bad))), cat, 'not allowed', True
        if cat == 'overflow':
            bad = r.choice(('1e400', '-1e400', '1.8e308', '-1E+309', '2e308',
                            '179769313486231580793728971405303415079934132710037826936173778'
                            '980444968292764750946649017977587207096330286416692887910946555'
                            '547851940402630657488671505820681908902000708383676273854845817'
                            '711531764475730270069855571366959622842914819860834936475292719'
                            '074168444365510704342711559699508093042880177904174497792.0',
                            '1' + '0' * 400 + '.5', '0.' + '0' * 10 + '1e320'))
            return self.text(self.plant(Raw(bad.encode()))), cat, 'overflows', True
        if cat == 'utf8':
            bad = r.choice((b'\xc0\xaf', b'\xc1\xbf', b'\xe0\x80\xaf', b'\xe0\x9f\xbf',
                            b'\xf0\x80\x80\xaf', b'\xf0\x8f\xbf\xbf', b'\xf4\x90\x80\x80',
                            b'\xf5\x80\x80\x80', b'\xf8\x88\x80\x80\x80', b'\xfe', b'\xff',
                            b'\x80', b'\xbf', b'\xc3', b'\xe2\x82', b'\xf0\x9f\x98',
                            b'\xc3\xa9\x80', b'\xe2\x82x'))
            return self.text(self.plant(Raw(b'"' + s() + bad + s() + b'"'))), cat, \
                'invalid UTF-8', True
        if cat == 'control':
            bad = bytes([r.randint(0, 0x1f)])
            return self.text(self.plant(Raw(b'"' + s() + bad + s() + b'"'))), cat, \
                'control character', True
        if cat == 'trailing':
            t = self.doc().rstrip(b' \t\r\n')
            if t.endswith(b'\xef\xbb\xbf'):
                t = t[:-3] + b'0'
            tail = r.choice((b'x', b' 1', b']', b'}', b',', b' {}', b'""', b'\x00',
                             b'\xef\xbb\xbf', b' null', b'/', b'\x0c'))
            # a bare number root followed by digits would just be a longer number
            if tail == b' 1' or not t[-1:] or t[-1:] in b'0123456789':
                tail = b' x'
            return t + tail, cat, 'trailing data', True
        if cat == 'deep':
            n = MAX_DEPTH + r.randint(1, 40)
            inner = self.value(MAX_DEPTH, [2])
            for _ in range(n):
                inner = [inner] if r.random() < 0.5 else Obj([(self.string(2), inner)])
            # Python (recursion limit 1000) accepts this; the spec's bound refuses it
            return self.text(inner), cat, 'nesting too deep', False
        # bigint
        digits = r.randint(4301, 4400)
        bad = (r.choice(('', '-')) + str(r.randint(1, 9)) +
               ''.join(r.choice('0123456789') for _ in range(digits - 1))).encode()
        return self.text(self.plant(Raw(bad))), cat, 'too many digits', True


# ---- fixed documents -----------------------------------------------------

def systematic_docs():
    """Whole-range checks that random sampling would only brush."""
    docs = []
    # every power of two, as repr and in a 40-digit exponent form
    p2 = [math.ldexp(1.0, e) for e in range(-1074, 1024)]
    for i in range(0, len(p2), 150):
        chunk = p2[i:i + 150]
        docs.append(('[' + ','.join(repr(x) for x in chunk) + ']').encode())
        docs.append(('[' + ','.join('%.40e' % -x for x in chunk) + ']').encode())
    # a few ulps either side of the repr boundaries and the decades between
    near = []
    for base in [10.0 ** e for e in range(-30, 31)] + [2.0 ** 53, 2.0 ** 63]:
        lo = hi = base
        for _ in range(6):
            lo, hi = math.nextafter(lo, 0), math.nextafter(hi, math.inf)
            near += [lo, hi]
    for i in range(0, len(near), 200):
        docs.append(json.dumps(near[i:i + 200]).encode())
    # every C0 control, DEL and the short escapes, escaped both ways
    docs.append(('"' + ''.join('\\u%04x' % c for c in range(0x20)) + '\\u007f"').encode())
    docs.append(('"' + ''.join('\\u%04X' % c for c in range(0x20)) + '\\u007F"').encode())
    docs.append(b'"\\"\\\\\\/\\b\\f\\n\\r\\t/\x7f\xe2\x80\xa8\xe2\x80\xa9"')
    # keys that sort differently by UTF-16 unit and by code point
    docs.append('{"\uffff":1,"\U0001f600":2,"\ue000":3,"\U00010000":4,"a":5,"":6}'.encode())
    return docs


def data_docs(data_dir):
    docs = []
    if not data_dir or not os.path.isdir(data_dir):
        return docs
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name)
        if not os.path.isfile(path):
            continue  # e.g. data/ed25519/: vectors, not documents of ours
        with open(path, 'rb') as f:
            raw = f.read()
        if name.endswith('.jsonl'):
            docs += [line for line in raw.split(b'\n') if line.strip()]
        elif name.endswith('.json'):
            docs.append(raw)
    return docs


# ---- running -------------------------------------------------------------

def run_batch(batch, docs):
    frames = b''.join(struct.pack('>I', len(d)) + d for d in docs)
    p = subprocess.run([batch], input=frames, capture_output=True, timeout=600)
    if p.returncode != 0:
        sys.exit('json_diff: %s exited %d: %s' % (batch, p.returncode,
                                                 p.stderr.decode(errors='replace')))
    out, pos, res = p.stdout, 0, []
    for _ in docs:
        status, n = out[pos], struct.unpack('>I', out[pos + 1:pos + 5])[0]
        res.append((status == 0, out[pos + 5:pos + 5 + n]))
        pos += 5 + n
    if pos != len(out):
        sys.exit('json_diff: %d stray bytes from canon_batch' % (len(out) - pos))
    return res


def run_cli(pithctl, doc):
    p = subprocess.run([pithctl, 'canon'], input=doc, capture_output=True, timeout=60)
    if p.returncode == 0:
        return True, p.stdout
    if p.stdout:
        return True, b'(exit %d with output) ' % p.returncode + p.stdout
    return False, p.stderr


def show(b, limit=300):
    r = repr(b)
    return r if len(r) <= limit else r[:limit] + '...(%d bytes)' % len(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--batch', required=True, help='path of tests/canon_batch')
    ap.add_argument('--pithctl', help='path of pithctl (CLI path check)')
    ap.add_argument('--data', help='directory of registry vectors to include')
    ap.add_argument('-n', type=int, default=5000, help='random documents')
    ap.add_argument('--cli', type=int, default=300, help='documents through pithctl')
    ap.add_argument('--seed', type=int, default=20260501)
    ap.add_argument('seed_arg', nargs='?', type=int, help='same as --seed')
    a = ap.parse_args()
    seed = a.seed if a.seed_arg is None else a.seed_arg
    t0 = time.time()
    rng = random.Random(seed)
    gen = Gen(rng)

    # (doc, expected bytes or None, category, message fragment)
    cases = []
    for d in systematic_docs() + data_docs(a.data):
        cases.append((d, reference(d), 'fixed', None))
    bad_ref_diffs = []
    n_bad = 0
    for i in range(a.n):
        if rng.random() < 0.12:
            d, cat, frag, py_refuses = gen.bad_doc()
            n_bad += 1
            ref = reference(d)
            if ref is not None and py_refuses:
                bad_ref_diffs.append((d, cat, ref))
            cases.append((d, None, cat, frag))
        else:
            d = gen.doc()
            cases.append((d, reference(d), 'random', None))

    results = run_batch(a.batch, [c[0] for c in cases])
    diffs = []
    for (doc, want, cat, frag), (ok, got) in zip(cases, results):
        if want is None and ok:
            diffs.append((doc, cat, 'must be refused', got))
        elif want is not None and not ok:
            diffs.append((doc, cat, want, b'refused: ' + got))
        elif want is not None and got != want:
            diffs.append((doc, cat, want, got))
        elif want is None and frag and frag.encode() not in got:
            diffs.append((doc, cat, 'a message with %r' % frag, got))
    for d, cat, ref in bad_ref_diffs:
        diffs.append((d, cat, 'Python to refuse it too (generator bug?)', ref))

    n_cli = 0
    if a.pithctl:
        # the first fixed documents, then an even spread of the rest
        picks = list(range(min(20, len(cases))))
        step = max(1, len(cases) // max(1, a.cli - len(picks)))
        picks += list(range(len(picks), len(cases), step))[:max(0, a.cli - len(picks))]
        for i in picks:
            doc, want, cat, frag = cases[i]
            ok, got = run_cli(a.pithctl, doc)
            n_cli += 1
            if want is None and ok:
                diffs.append((doc, 'cli ' + cat, 'must be refused', got))
            elif want is not None and (not ok or got != want):
                diffs.append((doc, 'cli ' + cat, want, got if ok else b'refused: ' + got))
            elif want is None and frag and frag.encode() not in got:
                diffs.append((doc, 'cli ' + cat, 'a message with %r' % frag, got))

    for doc, cat, want, got in diffs[:5]:
        print('--- difference (%s)' % cat)
        print('  input:    ' + show(doc))
        print('  expected: ' + (want if isinstance(want, str) else show(want)))
        print('  got:      ' + show(got))
    total = len(cases)
    print('json_diff: %d documents (%d random, %d must-refuse, %d fixed; %d via pithctl), '
          '%d differences, seed %d, %.1f s'
          % (total, a.n - n_bad, n_bad, total - a.n, n_cli, len(diffs), seed,
             time.time() - t0))
    return 1 if diffs else 0


if __name__ == '__main__':
    sys.exit(main())
