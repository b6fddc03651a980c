#!/usr/bin/env python3
"""The Debian package, built and installed into this machine (issue 20).

usage: package_test.py --src DIR [--keep DIR]

Copies the source tree (git's tracked and untracked-not-ignored files,
uncommitted changes included) to a temporary directory, builds it with
`dpkg-buildpackage -b` (debian/, docs/packaging.md), and then:

  1. the .deb: its Depends name exactly the packages of the libraries its
     binaries link (objdump NEEDED -> dpkg -S), plus adduser; the version is
     CMake's project version; the conffile is /etc/pithd/pithd.conf;
  2. `dpkg -i`: every file is there, the pithd system user and group
     (system uid, home /var/lib/pithd, no login shell), /var/lib/pithd
     owned by it and 0700, the conffile registered and equal to
     deploy/pithd.conf, nothing enabled or started, the unit's ExecStart and
     --config paths are the package's files; `systemd-analyze verify` and
     `systemd-analyze security --offline=true` (exposure at most 2.0) on the
     installed unit (skipped, saying so, without systemd-analyze);
  3. the installed pithd, as the pithd user, against a temporary config:
     answers /healthz, its control socket answers the installed pithctl,
     `--version` names the commit of the source; SIGTERM stops it (exit 0);
  4. `dpkg -r`: the package's files are gone, the (edited) conffile and
     /var/lib/pithd are kept; `dpkg -P`: both gone, /etc/pithd gone, no
     dpkg or deb-systemd-helper state left; only the pithd user remains
     (Debian practice keeps system users on purge), which the test then
     deletes if it made it.

Exit 77 (skipped) when not root, without dpkg-buildpackage or debhelper,
or when pith-mirror is already installed here (the test will not replace
an operator's installation). About 30-45 s on 2 cores, most of it the build.
"""
import argparse
import grp
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request

PKG = "pith-mirror"
T0 = time.time()


def say(msg):
    print("package [%5.1fs]: %s" % (time.time() - T0, msg), flush=True)


def run(cmd, check=True, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and r.returncode:
        raise SystemExit("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-4000:],
                                                r.stderr[-4000:]))
    return r


def skip(why):
    say("SKIPPED: " + why)
    sys.exit(77)


def installed_status():
    r = run(["dpkg-query", "-W", "-f=${Status}", PKG], check=False)
    return r.stdout.strip() if r.returncode == 0 else ""


def copy_tree(src, dst):
    """The files git would commit (uncommitted changes included), or the
    whole tree less build directories outside git."""
    r = subprocess.run(["git", "-C", src, "ls-files", "-co", "--exclude-standard", "-z"],
                       capture_output=True) if shutil.which("git") else None
    if r is not None and r.returncode == 0:
        for rel in r.stdout.decode().split("\0"):
            if not rel or not os.path.exists(os.path.join(src, rel)):
                continue
            os.makedirs(os.path.join(dst, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(os.path.join(src, rel), os.path.join(dst, rel))
        c = run(["git", "-C", src, "describe", "--always", "--dirty", "--abbrev=12",
                 "--match", "pith-no-such-tag"], check=False).stdout.strip()
        return c or "unknown"
    shutil.copytree(src, dst, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("build*", ".git", "__pycache__"))
    return "unknown"


def deb_files(deb):
    """{path: (mode string, is_dir)} of the .deb's data."""
    out = {}
    for line in run(["dpkg-deb", "-c", deb]).stdout.splitlines():
        f = line.split()
        path = f[5][1:].rstrip("/") or "/"
        out[path] = (f[0], f[0].startswith("d"))
    return out


def check_depends(deb, root):
    """Depends == adduser + the packages of the NEEDED libraries."""
    fields = run(["dpkg-deb", "-f", deb, "Depends", "Version", "Package"]).stdout
    depends = re.search(r"^Depends: (.*)$", fields, re.M).group(1)
    dep_pkgs = {d.strip().split()[0] for d in depends.split(",")}
    x = os.path.join(root, "x")
    run(["dpkg-deb", "-x", deb, x])
    needed = set()
    for b in ("usr/sbin/pithd", "usr/bin/pithctl"):
        for line in run(["objdump", "-p", os.path.join(x, b)]).stdout.splitlines():
            m = re.match(r"\s+NEEDED\s+(\S+)", line)
            if m:
                needed.add(m.group(1))
    ldcache = run(["ldconfig", "-p"]).stdout
    lib_pkgs = set()
    for so in sorted(needed):
        m = re.search(r"^\s+%s \(libc6,x86-64[^)]*\) => (\S+)$" % re.escape(so), ldcache, re.M) or \
            re.search(r"^\s+%s \([^)]*\) => (\S+)$" % re.escape(so), ldcache, re.M)
        assert m, "%s not in ld.so.cache" % so
        path = os.path.realpath(m.group(1))
        owner = None
        for cand in (m.group(1), path, path.replace("/usr/lib/", "/lib/", 1),
                     m.group(1).replace("/usr/lib/", "/lib/", 1)):
            r = run(["dpkg", "-S", cand], check=False)
            if r.returncode == 0:
                owner = r.stdout.split(":")[0]
                break
        assert owner, "no package owns %s (%s)" % (so, path)
        lib_pkgs.add(owner)
    want = lib_pkgs | {"adduser"}
    assert dep_pkgs == want, "Depends %s != linked %s" % (sorted(dep_pkgs), sorted(want))
    say("Depends: %s" % depends)
    say("  = adduser + the packages of NEEDED %s" % " ".join(sorted(needed)))


def unit_path(files):
    units = [p for p in files if p.endswith("/systemd/system/pithd.service")]
    assert len(units) == 1, units
    return units[0]


def pithd_pids():
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink("/proc/%s/exe" % d) == "/usr/sbin/pithd":
                    pids.append(int(d))
            except OSError:
                pass
    return pids


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_installed(src, files, commit):
    # files
    for path, (mode, is_dir) in files.items():
        assert os.path.isdir(path) if is_dir else os.path.isfile(path), "missing " + path
    for exe in ("/usr/sbin/pithd", "/usr/bin/pithctl"):
        assert os.access(exe, os.X_OK), exe
    for p in ("/usr/share/man/man8/pithd.8.gz", "/usr/share/man/man5/pithd.conf.5.gz",
              "/usr/share/man/man1/pithctl.1.gz", "/usr/share/bash-completion/completions/pithctl",
              "/usr/share/doc/pith-mirror/README.md.gz", "/usr/share/doc/pith-mirror/copyright"):
        assert p in files, "the package lacks " + p
    say("dpkg -i: all %d paths of the package are in place" % len(files))
    # the user, the group, the directories
    u = pwd.getpwnam("pithd")
    g = grp.getgrnam("pithd")
    assert 100 <= u.pw_uid < 1000 and u.pw_gid == g.gr_gid, (u, g)
    assert u.pw_dir == "/var/lib/pithd" and u.pw_shell in ("/usr/sbin/nologin", "/bin/false"), u
    st = os.stat("/var/lib/pithd")
    assert st.st_uid == u.pw_uid and st.st_gid == g.gr_gid and stat.S_IMODE(st.st_mode) == 0o700, st
    assert os.path.isdir("/etc/pithd")
    say("user pithd (uid %d, %s), /var/lib/pithd pithd:pithd 0700" % (u.pw_uid, u.pw_shell))
    # the conffile
    conff = run(["dpkg-query", "-W", "-f=${Conffiles}", PKG]).stdout
    assert re.search(r"^ /etc/pithd/pithd.conf [0-9a-f]{32}$", conff, re.M), conff
    assert open("/etc/pithd/pithd.conf").read() == open(os.path.join(src, "deploy/pithd.conf")).read()
    say("conffile /etc/pithd/pithd.conf registered, equal to deploy/pithd.conf")
    # nothing enabled, nothing started
    for d, _, fs in os.walk("/etc/systemd/system"):
        assert "pithd.service" not in fs, "enabled: " + os.path.join(d, "pithd.service")
    assert not pithd_pids(), "pithd runs after install: %s" % pithd_pids()
    say("not enabled (no pithd.service link under /etc/systemd/system), not running")
    # the unit names the package's paths
    unit = unit_path(files)
    text = open(unit).read()
    m = re.search(r"^ExecStart=(\S+) --config (\S+)$", text, re.M)
    assert m and m.group(1) == "/usr/sbin/pithd" and m.group(2) == "/etc/pithd/pithd.conf", m
    assert m.group(1) in files and m.group(2) in files
    assert not re.search(r"@[A-Z_]+@", text), "unconfigured @VAR@ in the unit"
    say("%s: ExecStart=%s --config %s, both the package's" % (unit, m.group(1), m.group(2)))
    sa = shutil.which("systemd-analyze")
    if not sa:
        say("SKIPPED systemd-analyze verify and security: systemd-analyze is not installed")
    else:
        r = run([sa, "verify", unit], check=False)
        out = (r.stdout + r.stderr).strip()
        assert r.returncode == 0 and "pithd" not in out, "systemd-analyze verify:\n" + out
        say("systemd-analyze verify %s: ok%s" % (unit, (" (about other units: %s)" % out) if out else ""))
        r = run([sa, "security", "--offline=true", unit], check=False)
        m = re.search(r"Overall exposure level for pithd.service: (\d+\.\d+)", r.stdout)
        assert m, "systemd-analyze security:\n" + r.stdout + r.stderr
        assert float(m.group(1)) <= 2.0, "exposure %s > 2.0" % m.group(1)
        say("systemd-analyze security: exposure %s (at most 2.0)" % m.group(1))
    # --version
    v = run(["/usr/sbin/pithd", "--version"]).stdout
    assert v.startswith("pithd ") and ("commit: %s\n" % commit) in v, (commit, v)
    v2 = run(["/usr/bin/pithctl", "--version"]).stdout
    assert v2.startswith("pithctl ") and ("commit: %s\n" % commit) in v2, v2
    say("installed --version: %s, commit %s" % (v.splitlines()[0], commit))


def run_installed(root):
    """The installed pithd as pithd, on a temporary config; /healthz."""
    d = os.path.join(root, "node")
    os.makedirs(d)
    os.chmod(root, 0o755)
    os.chmod(d, 0o755)
    data = os.path.join(d, "data")
    os.mkdir(data, 0o700)
    u = pwd.getpwnam("pithd")
    os.chown(data, u.pw_uid, u.pw_gid)
    port = free_port()
    sock = os.path.join(data, "pithd.sock")
    cfg = os.path.join(d, "pithd.conf")
    with open(cfg, "w") as f:
        f.write("data = %s\nlisten = 127.0.0.1:0\nhttp = 127.0.0.1:%d\ncontrol = %s\n"
                "network_id = pith-test\nlog_level = info\n" % (data, port, sock))
    log = open(os.path.join(d, "pithd.log"), "w")
    # as the user itself (not through runuser, which would stand between
    # the signal and pithd)
    as_pithd = dict(user="pithd", group="pithd", extra_groups=[])
    p = subprocess.Popen(["/usr/sbin/pithd", "--config", cfg], stdout=log,
                         stderr=subprocess.STDOUT, **as_pithd)
    try:
        deadline = time.time() + 20
        body = None
        while body is None:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=2) as r:
                    body = r.read().decode()
            except OSError:
                if p.poll() is not None or time.time() > deadline:
                    log.flush()
                    raise SystemExit("installed pithd did not answer /healthz:\n" +
                                     open(log.name).read())
                time.sleep(0.1)
        assert '"ok":true' in body, body
        say("installed pithd (as pithd) answers /healthz: %s" % body.strip())
        st = run(["/usr/bin/pithctl", "--node", sock, "status"], **as_pithd).stdout
        assert st.strip(), st
        say("installed pithctl --node SOCKET status answers (%d lines)" % len(st.splitlines()))
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
        log.close()
    assert rc == 0, "pithd exit %d:\n%s" % (rc, open(log.name).read())
    say("SIGTERM: pithd exit 0")


def check_removed(files):
    conffile = "/etc/pithd/pithd.conf"
    for path, (mode, is_dir) in files.items():
        if not is_dir and path != conffile:
            assert not os.path.lexists(path), "left after dpkg -r: " + path
    assert os.path.isfile(conffile) and "# edited by package_test" in open(conffile).read()
    assert os.path.isfile("/var/lib/pithd/kept-by-remove"), "dpkg -r deleted /var/lib/pithd"
    s = installed_status()
    assert s == "deinstall ok config-files", s
    say("dpkg -r: files gone; the edited conffile and /var/lib/pithd kept (%s)" % s)


def check_purged(files):
    for path, (mode, is_dir) in files.items():
        if path.startswith(("/usr/share/doc/pith-mirror", "/etc/pithd")) or not is_dir:
            assert not os.path.lexists(path), "left after dpkg -P: " + path
    for p in ("/etc/pithd", "/var/lib/pithd"):
        assert not os.path.lexists(p), "left after purge: " + p
    info = [f for f in os.listdir("/var/lib/dpkg/info") if f.startswith(PKG + ".") or
            f.startswith(PKG + ":")]
    assert not info, info
    assert installed_status() in ("", "unknown ok not-installed"), installed_status()
    for d in ("/var/lib/systemd/deb-systemd-helper-enabled",
              "/var/lib/systemd/deb-systemd-helper-masked"):
        for dd, _, fs in os.walk(d):
            assert not [f for f in fs if f.startswith("pithd.service")], (dd, fs)
    say("dpkg -P: no file, conffile, /etc/pithd, /var/lib/pithd, dpkg or systemd state left")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--keep", help="copy the built .deb files here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        skip("needs root (installs the package into this machine)")
    for tool, pkg in (("dpkg", "dpkg"), ("dpkg-buildpackage", "dpkg-dev"), ("dh", "debhelper"),
                      ("objdump", "binutils")):
        if not shutil.which(tool):
            skip("%s missing (apt-get install %s; scripts/deps.sh)" % (tool, pkg))
    if installed_status():
        skip("%s is installed here (%s): the test would replace it; "
             "`dpkg -P %s` first" % (PKG, installed_status(), PKG))
    user_existed = True
    try:
        pwd.getpwnam("pithd")
    except KeyError:
        user_existed = False
    with tempfile.TemporaryDirectory(prefix="pith-pkg-") as root:
        src = os.path.join(root, "src")
        commit = copy_tree(os.path.abspath(a.src), src)
        env = dict(os.environ, PITH_GIT_COMMIT=commit, DEB_BUILD_OPTIONS="nocheck parallel=2")
        say("dpkg-buildpackage -b in a copy of the tree (commit %s)" % commit)
        r = run(["dpkg-buildpackage", "-b", "-us", "-uc"], cwd=src, env=env, check=False)
        if r.returncode:
            raise SystemExit("dpkg-buildpackage failed:\n" + (r.stdout + r.stderr)[-6000:])
        ver = re.search(r"project\(pith_mirror VERSION (\S+)",
                        open(os.path.join(src, "CMakeLists.txt")).read()).group(1)
        debs = [f for f in os.listdir(root) if f.startswith(PKG + "_") and f.endswith(".deb")]
        assert len(debs) == 1, debs
        deb = os.path.join(root, debs[0])
        assert debs[0].startswith("%s_%s-" % (PKG, ver)), (debs, ver)
        say("built %s" % debs[0])
        if a.keep:
            for f in os.listdir(root):
                if f.endswith(".deb"):
                    shutil.copy(os.path.join(root, f), a.keep)
        check_depends(deb, root)
        assert run(["dpkg-deb", "--ctrl-tarfile", deb], check=False).returncode == 0
        ctl = os.path.join(root, "ctl")
        run(["dpkg-deb", "-e", deb, ctl])
        assert open(os.path.join(ctl, "conffiles")).read().split() == ["/etc/pithd/pithd.conf"]
        files = deb_files(deb)
        files.pop("/", None)
        try:
            run(["dpkg", "-i", deb])
            check_installed(a.src, files, commit)
            run_installed(root)
            with open("/etc/pithd/pithd.conf", "a") as f:
                f.write("# edited by package_test\n")
            open("/var/lib/pithd/kept-by-remove", "w").close()
            run(["dpkg", "-r", PKG])
            check_removed(files)
            run(["dpkg", "-P", PKG])
            check_purged(files)
            pwd.getpwnam("pithd")
            say("the pithd user remains after purge (Debian keeps system users)")
        finally:
            for pid in pithd_pids():
                os.kill(pid, signal.SIGKILL)
            if installed_status():
                run(["dpkg", "-P", PKG], check=False)
            if not user_existed:
                try:
                    pwd.getpwnam("pithd")
                    run(["deluser", "--quiet", "--system", "pithd"], check=False)
                    run(["delgroup", "--quiet", "--system", "pithd"], check=False)
                except KeyError:
                    pass
    say("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
