#!/usr/bin/env python3
"""What the install rules ship, checked from the build tree (issue 20).

usage: install_test.py --case version|man|completion --pithd P --pithctl P --src DIR

  version     `pithd --version` and `pithctl --version`: the project
              version, a commit (the checkout's when built from git), every
              library's version, the Ed25519 verifier (fixed-key, or
              libsodium under PITH_ED25519=libsodium); `pithd --version`
              is not taken for a setting wanting a value.
  man         `man -l` renders man/pithd.8, man/pithd.conf.5, man/pithctl.1
              with no warning (man --warnings, as lintian asks); pithd.conf(5)
              names every key of `pithd --help`, pithctl(1) every command of
              `pithctl --commands`. Needs man-db and groff-base (deps.sh).
  completion  bash sources deploy/bash-completion/pithctl; _pithctl with
              COMP_WORDS offers exactly `pithctl --commands` for an empty
              word, the matching ones for a prefix, the global options,
              a command's own options, directories after --store.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def run(cmd, env=None, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and r.returncode:
        raise SystemExit("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def project_version(src):
    m = re.search(r"project\(pith_mirror VERSION (\S+)", open(os.path.join(src, "CMakeLists.txt")).read())
    return m.group(1)


def case_version(a):
    ver = project_version(a.src)
    git = shutil.which("git")
    commit = None
    if git:
        r = subprocess.run([git, "-C", a.src, "rev-parse", "--short=12", "HEAD"],
                           capture_output=True, text=True)
        commit = r.stdout.strip() if r.returncode == 0 else None
    for prog, path in (("pithd", a.pithd), ("pithctl", a.pithctl)):
        for env_val, want in ((None, "ed25519: fixed-key"),
                              ("libsodium", "ed25519: libsodium (PITH_ED25519=libsodium")):
            env = dict(os.environ)
            env.pop("PITH_ED25519", None)
            if env_val:
                env["PITH_ED25519"] = env_val
            out = run([path, "--version"], env=env).stdout
            lines = out.splitlines()
            assert lines[0] == "%s %s" % (prog, ver), (lines[0], ver)
            fields = dict(l.split(": ", 1) for l in lines[1:])
            for k in ("commit", "libsodium", "rocksdb", "libevent", "libcurl", "libcrypto",
                      "msgpack-c", "ed25519"):
                assert fields.get(k), "%s --version lacks %s:\n%s" % (prog, k, out)
            if commit:
                assert fields["commit"].startswith(commit), (fields["commit"], commit)
            assert re.match(r"\d+\.\d+\.\d+", fields["libsodium"]), out
            assert re.match(r"\d+\.\d+\.\d+", fields["rocksdb"]), out
            assert fields["libcrypto"].startswith("OpenSSL "), out
            assert want in out, (want, out)
        print("version: %s: %s" % (prog, " | ".join(lines)))
    # --version among settings still wins; a setting left without a value
    # still says so
    out = run([a.pithd, "--data", "/nonexistent", "--version"]).stdout
    assert out.startswith("pithd %s\n" % ver), out
    r = run([a.pithd, "--data"], check=False)
    assert r.returncode == 2 and "--data needs a value" in r.stderr, r
    assert "--version" in run([a.pithd, "--help"]).stdout
    assert "--version" in run([a.pithctl, "--help"]).stdout
    return 0


def case_man(a):
    if not shutil.which("man") or not shutil.which("groff"):
        print("man: SKIPPED: man or groff missing (apt-get install man-db groff-base)")
        return 77
    pages = {"pithd.8": "PITHD(8)", "pithd.conf.5": "PITHD.CONF(5)", "pithctl.1": "PITHCTL(1)"}
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
    text = {}
    for page, head in pages.items():
        path = os.path.join(a.src, "man", page)
        r = run(["man", "--warnings", "-E", "UTF-8", "-l", path], env=env, check=False)
        out = re.sub(r".\x08", "", r.stdout)  # overstrike bold/underline
        assert r.returncode == 0, (page, r.returncode, r.stderr)
        assert not r.stderr.strip(), "%s: man --warnings:\n%s" % (page, r.stderr)
        assert out.startswith(head), (page, out[:80])
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
            assert "\n%s\n" % section in out, (page, section)
        text[page] = out
        print("man: %s renders, %d lines, no warnings" % (page, out.count("\n")))
    keys = re.findall(r"^  --(\S+)", run([a.pithd, "--help"]).stdout, re.M)
    missing = [k.replace("-", "_") for k in keys
               if not re.search(r"^       %s\b" % re.escape(k.replace("-", "_")),
                                text["pithd.conf.5"], re.M)]
    assert keys and not missing, "pithd.conf(5) lacks keys of pithd --help: %s" % missing
    cmds = run([a.pithctl, "--commands"]).stdout.split()
    missing = [c for c in cmds if not re.search(r"^       %s\b" % re.escape(c), text["pithctl.1"], re.M)]
    assert cmds and not missing, "pithctl(1) lacks commands: %s" % missing
    assert "--version" in text["pithd.8"] and "--version" in text["pithctl.1"]
    print("man: pithd.conf(5) has all %d keys, pithctl(1) all %d commands" % (len(keys), len(cmds)))
    return 0


def complete(a, words, cword=None, cwd=None):
    """COMPREPLY of _pithctl for COMP_WORDS=words (the last word is the one
    completed unless cword says otherwise), one a line."""
    if cword is None:
        cword = len(words) - 1
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=%d; _pithctl; '
              'printf "%%s\\n" "${COMPREPLY[@]}"; complete -p pithctl' % cword)
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(a.pithctl)) + ":" + os.environ["PATH"])
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash",
                        os.path.join(os.path.abspath(a.src), "deploy", "bash-completion", "pithctl")] + words,
                       capture_output=True, text=True, env=env, cwd=cwd)
    assert r.returncode == 0 and not r.stderr, r
    lines = r.stdout.splitlines()
    assert lines[-1] == "complete -F _pithctl pithctl", lines[-1]
    return [l for l in lines[:-1] if l]


def case_completion(a):
    if not shutil.which("bash"):
        print("completion: SKIPPED: no bash")
        return 77
    cmds = run([a.pithctl, "--commands"]).stdout.split()
    help_cmds = re.findall(r"^  (\S+)  ", run([a.pithctl, "--help"]).stdout, re.M)
    assert cmds == help_cmds, ("--commands and --help disagree", cmds, help_cmds)
    assert len(cmds) >= 20, cmds
    got = complete(a, ["pithctl", ""])
    assert got == cmds, ("empty word", got, cmds)
    got = complete(a, ["pithctl", "st"])
    assert got == [c for c in cmds if c.startswith("st")] and "status" in got, got
    got = complete(a, ["pithctl", "--store", "/tmp", "--json", "rec"])
    assert got == ["records"], got
    got = complete(a, ["pithctl", "--"])
    for o in ("--store", "--node", "--trust-key", "--json", "--help", "--version"):
        assert o in got, (o, got)
    got = complete(a, ["pithctl", "--store", "/tmp", "import", "--"])
    assert "--threads" in got and "--help" in got and len(got) == len(set(got)), got
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "storedir"))
        open(os.path.join(d, "stfile"), "w").close()
        got = complete(a, ["pithctl", "--store", "st"], cwd=d)
        assert got == ["storedir"], got
    # the program as typed, when it is not on PATH
    got = complete(a, [os.path.abspath(a.pithctl), "pi"])
    assert got == ["pith-number"], got
    print("completion: offers the %d commands, prefixes, global and per-command options" % len(cmds))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True, choices=["version", "man", "completion"])
    ap.add_argument("--pithd", required=True)
    ap.add_argument("--pithctl", required=True)
    ap.add_argument("--src", required=True)
    a = ap.parse_args()
    return {"version": case_version, "man": case_man, "completion": case_completion}[a.case](a)


if __name__ == "__main__":
    sys.exit(main())
