"""The packages a site installs, made as a release makes them (issue 29):

- the sdist and the wheel (`python -m build`) carry what docs/install.md
  promises (etc/, docs/, templates/, providers/, the packaging, LICENSE), the
  wheel's LDIF templates are templates/ as committed, and `twine check` passes;
- debian/: `dpkg-buildpackage -us -uc -b` builds glueinfo_*.deb, lintian finds
  no error, and `apt-get install ./glueinfo_*.deb` on this (root, disposable)
  machine gives /usr/bin/glueinfo that prints the site's LDIF, units that
  `systemd-analyze verify` accepts, the glueinfo user, the conffile, the BDII
  provider that BDII's openldap user can run, the manual page and the bash
  completion; the package is purged afterwards;
- glueinfo.spec: rpmlint finds no error.

Every build works on a copy of the source tree in a temporary directory.  Needs
root and the Debian build tools run-tests.sh installs (debhelper, dh-python,
lintian, rpmlint...); without them each test skips, which CI
(GLUEINFO_FORBID_SKIPS=1) counts as a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from paths import REPO

from glueinfo.core.ldif import parse_ldif

pytestmark = pytest.mark.integration

DEB_TOOLS = ("dpkg-buildpackage", "dh", "dh_python3", "lintian", "argparse-manpage", "apt-get", "systemd-analyze")
# What the README's command table lists (independent of the parser the manual page is made from).
README_COMMANDS = sorted(set(re.findall(r"^\| `glueinfo ([a-z0-9-]+)", (REPO / "README.md").read_text(), re.M)))
# What docs/install.md says the sdist carries, as directories and files of the source tree.
PROMISED = ("LICENSE", "README.md", "CHANGELOG.md", "glueinfo.spec", "setup.py", "etc", "docs", "templates",
            "providers", "ldif", "debian")


def run(argv: list[str], timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """argv run to its end, text output captured; the caller judges the exit status."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)


def clean_env() -> dict[str, str]:
    """The environment of an admin's shell: no GLUEINFO_* variables, no virtualenv or pyenv first in PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GLUEINFO_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env["LC_ALL"] = "C.UTF-8"
    return env


def tracked_files() -> list[str]:
    """The source tree's files as a checkout has them (git's list, else every file but build outputs)."""
    if (REPO / ".git").exists():
        listed = run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"])
        if listed.returncode == 0:
            return [name for name in listed.stdout.split("\0") if name and (REPO / name).is_file()]
    skip = {".venv", ".venv-dirac", "build", "dist", ".git", "__pycache__", ".pytest_cache", ".ruff_cache"}
    return [str(path.relative_to(REPO)) for path in REPO.rglob("*")
            if path.is_file() and not skip.intersection(path.relative_to(REPO).parts) and ".egg-info" not in str(path)]


def copy_source(target: Path) -> Path:
    for name in tracked_files():
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, destination)
    return target


def need(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        pytest.skip("packaging tools missing (run-tests.sh installs them as root): " + ", ".join(missing))


# ---- sdist and wheel ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("build", reason="the test extras' `build` (pip install -e '.[test]')")
    base = tmp_path_factory.mktemp("dists")
    source = copy_source(base / "src")
    made = run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(base / "dist"), str(source)])
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    (sdist,) = (base / "dist").glob("glueinfo-*.tar.gz")
    (wheel,) = (base / "dist").glob("glueinfo-*.whl")
    return {"sdist": sdist, "wheel": wheel, "base": base}


def test_the_sdist_carries_every_file_of_what_the_docs_promise(dists):
    with tarfile.open(dists["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    expected = {name for name in tracked_files() if name.split("/", 1)[0] in PROMISED}
    assert {"LICENSE", "providers/glueinfo-provider", "templates/site.ldif", "debian/rules", "glueinfo.spec",
            "etc/systemd/glueinfo.service", "docs/install.md"} <= expected
    assert sorted(expected - names) == []


def test_the_wheel_reads_the_templates_as_committed_and_carries_the_files_to_install(dists):
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = set(wheel.namelist())
        for template in sorted((REPO / "templates").glob("*.ldif")):
            assert wheel.read(f"glueinfo/glue/ldif_templates/{template.name}") == template.read_bytes()
        data = "glueinfo-" + dists["wheel"].name.split("-")[1] + ".data/data/"
        provider = wheel.getinfo(data + "share/glueinfo/providers/glueinfo-provider")
        assert stat.S_IMODE(provider.external_attr >> 16) & 0o111, "the provider must stay executable"
        license_files = [name for name in names if name.endswith(".dist-info/LICENSE")]
        assert license_files and wheel.read(license_files[0]) == (REPO / "LICENSE").read_bytes()
    for name in ("share/glueinfo/etc/glueinfo.conf.example", "share/glueinfo/etc/systemd/glueinfo.service",
                 "share/glueinfo/etc/systemd/glueinfo.sysusers.conf", "share/glueinfo/templates/ce.ldif",
                 "share/doc/glueinfo/install.md", "share/doc/glueinfo/admin-guide.md"):
        assert data + name in names, name
    assert "Apache License" in (REPO / "LICENSE").read_text() and "Version 2.0" in (REPO / "LICENSE").read_text()


def test_glueinfo_installed_from_the_wheel_prints_ldif_from_its_own_templates(dists):
    target = dists["base"] / "site-packages"
    installed = run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                     str(dists["wheel"])])
    assert installed.returncode == 0, installed.stderr
    env = {**clean_env(), "PYTHONPATH": str(target)}
    where = run([sys.executable, "-c", "import glueinfo.glue.templates as t; print(t.__file__); print(t.builtin_templates_dir())"],
                env=env, cwd=str(dists["base"]))
    module, templates = where.stdout.split()
    assert module.startswith(str(target)) and templates == str(target / "glueinfo" / "glue" / "ldif_templates")
    ldif = run([sys.executable, "-m", "glueinfo.cli", "ldif", "--config", "/dev/null"], env=env, cwd=str(dists["base"]))
    assert ldif.returncode == 0, ldif.stderr
    assert any("GlueCE" in entry.get("objectClass") for entry in parse_ldif(ldif.stdout)), ldif.stdout[:2000]


def test_twine_check_passes(dists):
    checked = run([sys.executable, "-m", "twine", "check", "--strict", str(dists["sdist"]), str(dists["wheel"])])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2


# ---- the Debian package ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deb(tmp_path_factory) -> Path:
    if os.geteuid() != 0:
        pytest.skip("building and installing the .deb needs root")
    need(*DEB_TOOLS)
    base = tmp_path_factory.mktemp("deb")
    source = copy_source(base / "glueinfo")
    built = run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=str(source), env={**clean_env(), **{
        k: v for k, v in os.environ.items() if k.startswith("PIP_") or k == "GLUEINFO_WHEELHOUSE"}})
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    (package,) = base.glob("glueinfo_*.deb")
    return package


def test_lintian_finds_no_error(deb):
    (changes,) = deb.parent.glob("glueinfo_*.changes")
    linted = run(["lintian", "--no-tag-display-limit", str(changes)])
    errors = [line for line in linted.stdout.splitlines() if line.startswith("E: ")]
    assert errors == [], linted.stdout
    assert linted.returncode == 0, linted.stdout + linted.stderr


@pytest.fixture(scope="module")
def installed(deb):
    mine = ("/usr/bin/glueinfo", "/etc/glueinfo/glueinfo.conf", "/etc/default/glueinfo")
    if any(os.path.lexists(path) for path in mine):
        pytest.skip("glueinfo is already installed on this machine (one of " + ", ".join(mine) + "): not installing over it")
    env = {**clean_env(), "DEBIAN_FRONTEND": "noninteractive"}
    done = run(["apt-get", "install", "-y", "-q", "--no-install-recommends", str(deb)], env=env, timeout=600,
               stdin=subprocess.DEVNULL)
    try:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        yield deb
    finally:
        purged = run(["apt-get", "purge", "-y", "-q", "glueinfo"], env=env, timeout=300, stdin=subprocess.DEVNULL)
        assert purged.returncode == 0, purged.stderr
        assert not any(os.path.lexists(path) for path in (*mine, "/usr/lib/glueinfo"))


def test_usr_bin_glueinfo_prints_this_host_as_a_site(installed):
    ldif = run(["/usr/bin/glueinfo", "ldif"], env=clean_env(), cwd="/")
    assert ldif.returncode == 0, ldif.stderr
    entries = parse_ldif(ldif.stdout)
    fqdn = run(["hostname", "-f"]).stdout.strip() or run(["hostname"]).stdout.strip()
    ces = [entry for entry in entries if "GlueCE" in entry.get("objectClass")]
    assert [entry.get("GlueCEInfoHostName") for entry in ces] == [[fqdn]], ldif.stdout[:2000]
    # ... from the package's own virtualenv, with the bundled dependencies (pika for the amqp output)
    # and Debian's lxml.
    where = run(["/usr/lib/glueinfo/bin/python", "-c",
                 "import glueinfo, re2, msgspec, prometheus_client, pika, lxml\n"
                 "for m in (glueinfo, re2, msgspec, prometheus_client, pika, lxml): print(m.__file__)"],
                env=clean_env(), cwd="/")
    paths = where.stdout.split()
    assert where.returncode == 0 and len(paths) == 6, where.stderr
    assert all(path.startswith("/usr/lib/glueinfo/lib/python3.11/site-packages/") for path in paths[:5]), paths
    assert paths[5].startswith("/usr/lib/python3/dist-packages/"), paths


def test_units_user_and_conffile_are_in_place(installed):
    units = [Path(f"/lib/systemd/system/{name}") for name in ("glueinfo.service", "glueinfo-agent.service",
                                                               "glueinfo-federate.service")]
    for unit in units:
        exec_start = [line for line in unit.read_text().splitlines() if line.startswith("ExecStart=")]
        assert len(exec_start) == 1 and exec_start[0].startswith("ExecStart=/usr/bin/glueinfo "), exec_start
    verified = run(["systemd-analyze", "verify", *map(str, units)])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    user = run(["getent", "passwd", "glueinfo"]).stdout.strip().split(":")
    assert user[5:] == ["/var/lib/glueinfo", "/usr/sbin/nologin"], user
    assert Path("/usr/lib/sysusers.d/glueinfo.conf").read_bytes() == (REPO / "etc/systemd/glueinfo.sysusers.conf").read_bytes()
    conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "glueinfo"]).stdout.split()
    assert "/etc/glueinfo/glueinfo.conf" in conffiles and "/etc/default/glueinfo" in conffiles
    assert Path("/etc/glueinfo/glueinfo.conf").read_bytes() == (REPO / "etc/glueinfo.conf.example").read_bytes()
    for template in (REPO / "templates").glob("*.ldif"):
        assert (Path("/usr/share/glueinfo/templates") / template.name).read_bytes() == template.read_bytes()


def test_bdii_slapd_is_started_through_the_installed_sizing_wrapper(installed):
    """The README says the package sizes BDII's databases for the site: the drop-in for
    bdii-slapd.service names a wrapper the package installed, which runs (it prints its choice)."""
    drop_in = Path("/lib/systemd/system/bdii-slapd.service.d/glueinfo.conf")
    [slapd] = [line.split("=", 2)[2] for line in drop_in.read_text().splitlines() if line.startswith("Environment=SLAPD=")]
    assert Path(slapd).is_file() and os.access(slapd, os.X_OK), slapd
    assert Path(slapd).read_bytes() == (REPO / "etc/bdii/bdii-slapd-maxsize").read_bytes()
    postinst = run(["dpkg-query", "--control-show", "glueinfo", "postinst"])
    assert "try-restart bdii.service" in postinst.stdout, postinst.stdout + postinst.stderr


def test_bdii_user_runs_the_provider_and_it_reads_glueinfo_config(installed):
    provider = Path("/var/lib/bdii/gip/provider/glueinfo-provider")
    assert os.access(provider, os.X_OK)
    if run(["getent", "passwd", "openldap"]).returncode != 0:
        pytest.skip("BDII's user openldap is missing (Debian package slapd, which run-tests.sh installs)")
    # A directory BDII's user can read; the config names a non-default file, so the output proves the
    # provider read the config through the package's interpreter (the system python3 cannot import glueinfo).
    work = Path(tempfile.mkdtemp(prefix="glueinfo-provider-"))
    try:
        work.chmod(0o755)
        ldif = work / "site.ldif"
        config = work / "glueinfo.conf"
        config.write_text(f"[run]\nldif_file = {ldif}\n")
        made = run(["/usr/bin/glueinfo", "ldif", "--config", str(config)], env=clean_env(), cwd="/")
        assert made.returncode == 0, made.stderr
        ldif.write_text(made.stdout)
        for path in (ldif, config):
            path.chmod(0o644)
        printed = run(["runuser", "-u", "openldap", "--", "env", f"GLUEINFO_CONFIG={config}", str(provider)],
                      env=clean_env(), cwd="/")
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout == made.stdout and printed.stderr == ""
    finally:
        shutil.rmtree(work)


def test_manual_page_and_bash_completion_cover_every_command(installed):
    assert run(["man", "-w", "glueinfo"]).stdout.strip() == "/usr/share/man/man1/glueinfo.1.gz"
    page = run(["man", "glueinfo"], env={**clean_env(), "MANWIDTH": "200", "MANPAGER": "cat"}).stdout
    assert "glueinfo - GLUE and SSS grid information provider" in page
    assert len(README_COMMANDS) >= 10
    for command in README_COMMANDS:
        assert re.search(rf"glueinfo {re.escape(command)}\b", page), command
    script = ("source /usr/share/bash-completion/completions/glueinfo; "
              'COMP_WORDS=(glueinfo "$1" "$2"); COMP_CWORD=$3; COMPREPLY=(); _shtab_glueinfo; printf "%s\\n" "${COMPREPLY[@]}"')
    first = run(["bash", "-c", script, "-", "", "", "1"], env=clean_env()).stdout.split()
    assert sorted(first) == README_COMMANDS
    options = run(["bash", "-c", script, "-", "ldif", "--no-h", "2"], env=clean_env()).stdout.split()
    assert options == ["--no-hosts"]


# ---- the EL9 spec ---------------------------------------------------------------------------------------


def test_rpmlint_finds_no_error_in_the_spec():
    need("rpmlint", "rpm")
    linted = run(["rpmlint", str(REPO / "glueinfo.spec")])
    summary = [line for line in linted.stdout.splitlines() if "specfiles checked" in line]
    assert summary and " 0 errors" in summary[0], linted.stdout + linted.stderr
    assert linted.returncode == 0, linted.stdout
