"""Real LDAP servers for the tests: OpenLDAP slapd with the GLUE schema, and
Debian's BDII (its own slapd plus the packaged /usr/sbin/bdii-update).

Both run on 127.0.0.1 on a free port, from a temporary directory, without
systemd, and are stopped by PID.  Data goes in and comes out through the real
command-line tools (ldapadd -c, ldapsearch -LLL), as an administrator or a
broker would do it; LDIF read back is parsed with glueinfo.core.ldif.parse_ldif.

Slapd: generated slapd.conf including the schema files BDII's slapd includes
(core, cosine, nis, the glue-schema files), mdb databases for o=grid, o=glue
and o=infosys, one bind DN (``cn=manager,o=grid``) that may write all three,
``sizelimit unlimited``.  The base entries o=grid, mds-vo-name=resource,o=grid,
o=glue, GLUE2GroupID=resource,o=glue and o=infosys exist once started.

Bdii: /etc/bdii/bdii-slapd.conf copied with paths in the temporary directory
and a plain-text root password, started as ``slapd -f ... -d 0``;
/etc/bdii/bdii.conf copied with BDII_PORT, a short BDII_BREATHE_TIME and all
directories in the temporary directory.  bdii-update only runs in the
foreground in its one-shot mode (no -d), which prints and does not load
anything, and -d forks into the background; so the harness runs the packaged
script's own functions (parse_options, get_config, main) in a child process,
skipping only create_daemon.  Debian 12's bdii 6.0.0 calls ``ldapadd -h H -p
P``, which OpenLDAP 2.5 removed: a PATH shim (bin/ldapadd etc., first in
bdii-update's PATH only) rewrites that to ``-H ldap://H:P``.  See NOTES.md.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from waiting import wait_until

from glueinfo.core.ldif import Entry, parse_ldif

SCHEMA_DIR = "/etc/ldap/schema"
SLAPD_SCHEMA_FILES = (
    "core.schema", "cosine.schema", "nis.schema",
    "Glue-CORE.schema", "Glue-MDS.schema", "Glue-CE.schema", "Glue-CESEBind.schema", "Glue-SE.schema", "GLUE20.schema",
)
LDAP_TOOLS = ("ldapadd", "ldapmodify", "ldapdelete", "ldapsearch")
BDII_UPDATE = "/usr/sbin/bdii-update"
BDII_SLAPD_CONF = "/etc/bdii/bdii-slapd.conf"
BDII_CONF = "/etc/bdii/bdii.conf"
BDII_DEFAULT_LDIF = ("/var/lib/bdii/gip/ldif/default.ldif", "/usr/share/bdii/default.ldif")
BDII_SCHEMA = "/etc/bdii/BDII.schema"  # UpdateStats, the statistics entry BDII keeps under o=infosys

BASE_LDIF = """\
dn: o=grid
objectClass: organization
o: grid

dn: mds-vo-name=resource,o=grid
objectClass: MDS
mds-vo-name: resource

dn: o=glue
objectClass: organization
o: glue

dn: GLUE2GroupID=resource,o=glue
objectClass: GLUE2Group
GLUE2GroupID: resource

dn: o=infosys
objectClass: organization
o: infosys
"""


class ServerError(RuntimeError):
    """A test server did not start or a tool failed unexpectedly."""


def find_slapd() -> Optional[str]:
    return shutil.which("slapd") or next((p for p in ("/usr/sbin/slapd",) if os.access(p, os.X_OK)), None)


def missing_slapd_tools() -> list[str]:
    """What is missing to run Slapd (empty when everything is there)."""
    missing = [] if find_slapd() else ["slapd (Debian package slapd)"]
    missing += [f"{tool} (Debian package ldap-utils)" for tool in ("ldapadd", "ldapsearch", "ldapdelete") if not shutil.which(tool)]
    if not os.path.isfile(os.path.join(SCHEMA_DIR, "Glue-CORE.schema")):
        missing.append(f"{SCHEMA_DIR}/Glue-CORE.schema (Debian package glue-schema)")
    return missing


def missing_bdii_tools() -> list[str]:
    missing = missing_slapd_tools()
    for path in (BDII_UPDATE, BDII_SLAPD_CONF, BDII_CONF):
        if not os.path.exists(path):
            missing.append(f"{path} (Debian package bdii)")
    return missing


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_listening(port: int, process: subprocess.Popen, log_path: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"{what} exited with status {process.returncode} before listening on port {port}:\n"
                              f"{_tail(log_path)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise ServerError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:g} s:\n{_tail(log_path)}")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop(process: Optional[subprocess.Popen], group: bool = False, timeout: float = 10.0) -> None:
    """Stop a process we started, by its PID (and its own process group when
    it was started in a new session, so its children go too)."""
    if process is None or process.poll() is not None:
        return
    try:
        if group:
            os.killpg(process.pid, signal.SIGTERM)
        else:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        if group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
        process.wait(timeout=timeout)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- tools

@dataclass
class AddResult:
    """What ``ldapadd -c`` did: DNs added, DNs rejected with the server's answer."""

    added: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # DN as ldapadd printed it -> "Message (code): info"
    returncode: int = 0
    output: str = ""

    @property
    def ok(self) -> bool:
        return not self.rejected and self.returncode == 0

    def __str__(self) -> str:
        lines = [f"{len(self.added)} added, {len(self.rejected)} rejected (ldapadd exit {self.returncode})"]
        lines += [f"  {dn}: {why}" for dn, why in self.rejected.items()]
        return "\n".join(lines)


_ADDING = re.compile(r'^adding new entry "(.*)"$')
_ERROR = re.compile(r"^ldap_add: (.*) \((-?\d+)\)$")


def parse_ldapadd_output(output: str) -> tuple[list[str], dict[str, str]]:
    """Split ``ldapadd -c`` output (stdout and stderr interleaved, unbuffered)
    into (added DNs, {rejected DN: reason})."""
    added: list[str] = []
    rejected: dict[str, str] = {}
    current: Optional[str] = None
    for line in output.splitlines():
        match = _ADDING.match(line)
        if match:
            current = match.group(1)
            added.append(current)
            continue
        match = _ERROR.match(line)
        if match:
            dn = current if current is not None else "(unknown entry)"
            rejected[dn] = f"{match.group(1)} ({match.group(2)})"
            if added and added[-1] == dn:
                added.pop()
            continue
        if line.startswith("\tadditional info: ") or line.startswith("\tmatched DN: "):
            if current in rejected:
                rejected[current] += "; " + line.strip()
        elif line.startswith("ldif_read_file") or line.startswith("ldapadd: ") or "invalid format" in line:
            rejected[current or "(LDIF)"] = line.strip()
    return added, rejected


def run_ldapadd(url: str, bind_dn: str, password: str, ldif_text: str, timeout: float = 600.0) -> AddResult:
    """The real ``ldapadd -c -x`` (continue after errors), output unbuffered so
    each error follows the "adding new entry" line of its DN."""
    command = ["ldapadd", "-c", "-x", "-H", url, "-D", bind_dn, "-w", password]
    if shutil.which("stdbuf"):
        command = ["stdbuf", "-o0", "-e0", *command]
    proc = subprocess.run(command, input=ldif_text.encode("utf-8"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout)
    output = proc.stdout.decode("utf-8", "replace")
    added, rejected = parse_ldapadd_output(output)
    if proc.returncode != 0 and not rejected:
        rejected["(ldapadd)"] = f"exit status {proc.returncode}: {output.strip()[-500:]}"
    return AddResult(added=added, rejected=rejected, returncode=proc.returncode, output=output)


def run_ldapsearch(url: str, base: str, filter: str = "(objectClass=*)", attrs: Sequence[str] = (),
                   scope: str = "sub", timeout: float = 120.0) -> list[Entry]:
    """The real ``ldapsearch -x -LLL``, output parsed with parse_ldif.  A base
    that does not exist gives []; any other failure raises ServerError."""
    command = ["ldapsearch", "-x", "-LLL", "-H", url, "-b", base, "-s", scope, filter, *attrs]
    proc = subprocess.run(command, capture_output=True, timeout=timeout)
    if proc.returncode == 32:  # noSuchObject
        return []
    if proc.returncode != 0:
        raise ServerError(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.decode(errors='replace').strip()}")
    return parse_ldif(proc.stdout.decode("utf-8"))


# ---------------------------------------------------------------- slapd

class Slapd:
    """A private OpenLDAP slapd with the GLUE schema on 127.0.0.1:port."""

    bind_dn = "cn=manager,o=grid"
    password = "secret"
    suffixes = ("o=grid", "o=glue", "o=infosys")

    def __init__(self, workdir: Optional[os.PathLike] = None, schema_dir: str = SCHEMA_DIR,
                 schema_files: Sequence[str] = SLAPD_SCHEMA_FILES, layout: str = "one-writer",
                 extra_schema: Sequence[str] = ()) -> None:
        # layout "bdii": as /etc/bdii/bdii-slapd.conf lays it out, each database written only by its
        # own rootdn (o=grid, o=glue, o=infosys), as bdii-update binds; no identity writes them all.
        self.layout = layout
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="glueinfo-slapd-"))
        self.schema_dir = schema_dir
        self.schema_files = tuple(schema_files)
        # schema files by path, included after the others (glueinfo's GLUE 2.1 accelerator extension)
        self.extra_schema = tuple(str(path) for path in extra_schema)
        self.port = 0
        self.process: Optional[subprocess.Popen] = None
        self.log_path = self.workdir / "slapd.log"
        self.conf_path = self.workdir / "slapd.conf"

    @property
    def url(self) -> str:
        return f"ldap://127.0.0.1:{self.port}"

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process else None

    def _config(self) -> str:
        lines = [f"include {os.path.join(self.schema_dir, name)}" for name in self.schema_files
                 if os.path.exists(os.path.join(self.schema_dir, name))]
        lines += [f"include {path}" for path in self.extra_schema]
        if self.layout == "bdii" and os.path.exists(BDII_SCHEMA):  # as bdii-slapd.conf includes it
            lines.append(f"include {BDII_SCHEMA}")
        lines += [
            "modulepath /usr/lib/ldap",
            "moduleload back_mdb",
            f"pidfile {self.workdir}/slapd.pid",
            f"argsfile {self.workdir}/slapd.args",
            "sizelimit unlimited",
            "timelimit unlimited",
        ]
        if self.layout != "bdii":  # one identity writes every database (it is o=grid's rootdn)
            lines.append(f'access to * by dn.exact="{self.bind_dn}" write by * read')
        for suffix in self.suffixes:
            name = suffix.split("=", 1)[1]
            (self.workdir / "db" / name).mkdir(parents=True, exist_ok=True)
            lines += [
                "",
                "database mdb",
                f'suffix "{suffix}"',
                f"directory {self.workdir}/db/{name}",
                "maxsize 4294967296",  # sparse; the 10 MB default is too small for the 10,000-host tests
                "dbnosync",
                "index objectClass eq,pres",
            ]
            if self.layout == "bdii":
                lines += [f'rootdn "{suffix}"', f"rootpw {self.password}"]
            if suffix == "o=grid":
                if self.layout != "bdii":
                    lines += [f'rootdn "{self.bind_dn}"', f"rootpw {self.password}"]
                lines += [
                          "index GlueCEUniqueID,GlueClusterUniqueID,GlueSubClusterUniqueID,GlueHostUniqueID,GlueChunkKey,"
                          "GlueForeignKey eq"]
        return "\n".join(lines) + "\n"

    def start(self, timeout: float = 20.0) -> Slapd:
        slapd = find_slapd()
        if not slapd:
            raise ServerError("slapd not found (Debian package slapd)")
        self.conf_path.write_text(self._config())
        for attempt in range(3):
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.process = subprocess.Popen([slapd, "-f", str(self.conf_path), "-h", f"{self.url}/", "-d", "0"],
                                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            try:
                _wait_listening(self.port, self.process, self.log_path, timeout, "slapd")
                break
            except ServerError:
                _stop(self.process)
                if attempt == 2:
                    raise
        if self.layout == "bdii":
            for suffix in self.suffixes:
                records = [r for r in BASE_LDIF.split("\n\n") if r.split("\n", 1)[0].lower().endswith(suffix)]
                result = run_ldapadd(self.url, suffix, self.password, "\n\n".join(records) + "\n")
                if not result.ok:
                    self.stop()
                    raise ServerError(f"cannot create the base entries of {suffix}: {result}")
            return self
        result = self.ldapadd(BASE_LDIF)
        if not result.ok:
            self.stop()
            raise ServerError(f"cannot create the base entries: {result}")
        return self

    def stop(self) -> None:
        _stop(self.process)
        self.process = None
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Slapd:
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    def ldapadd(self, ldif_text: str) -> AddResult:
        """Load LDIF with the real ``ldapadd -c``; see AddResult."""
        return run_ldapadd(self.url, self.bind_dn, self.password, ldif_text)

    def ldapsearch(self, base: str = "o=grid", filter: str = "(objectClass=*)", attrs: Sequence[str] = (),
                   scope: str = "sub") -> list[Entry]:
        return run_ldapsearch(self.url, base, filter, attrs, scope)

    def ldapdelete_children(self, base: str) -> None:
        """Delete everything below base (not base itself) with the real ldapdelete -r."""
        children = [e.dn for e in self.ldapsearch(base, "(objectClass=*)", ["1.1"], scope="one")]
        if not children:
            return
        proc = subprocess.run(["ldapdelete", "-c", "-r", "-x", "-H", self.url, "-D", self.bind_dn, "-w", self.password],
                              input="\n".join(children).encode("utf-8") + b"\n", stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=600)
        if proc.returncode != 0:
            raise ServerError(f"ldapdelete -r under {base} failed: {proc.stdout.decode(errors='replace').strip()}")

    def reset(self) -> None:
        """Back to the base entries only."""
        for base in ("mds-vo-name=resource,o=grid", "GLUE2GroupID=resource,o=glue"):
            self.ldapdelete_children(base)
        for base in self.suffixes:
            for entry in self.ldapsearch(base, "(objectClass=*)", ["1.1"], scope="one"):
                if entry.dn.lower() not in ("mds-vo-name=resource,o=grid", "glue2groupid=resource,o=glue"):
                    self.ldapdelete_children(entry.dn)
                    subprocess.run(["ldapdelete", "-x", "-H", self.url, "-D", self.bind_dn, "-w", self.password, entry.dn],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


# ---------------------------------------------------------------- BDII

SHIM = """#!/bin/sh
# Test harness only: bdii 6.0.0 calls `{tool} -h HOST -p PORT`; the -h/-p
# options are gone from OpenLDAP 2.5's tools, which want -H ldap://HOST:PORT.
host= port=
n=$#
while [ "$n" -gt 0 ]; do
  a=$1; shift; n=$((n-1))
  case "$a" in
    -h) host=$1; shift; n=$((n-1));;
    -p) port=$1; shift; n=$((n-1));;
    *) set -- "$@" "$a";;
  esac
done
if [ -n "$host$port" ]; then
  set -- -H "ldap://${{host:-localhost}}:${{port:-389}}" "$@"
fi
exec {real} "$@"
"""

RUNNER = """\
# Runs the packaged bdii-update in the foreground: its own parse_options,
# get_config and main, everything but create_daemon (fork to background).
import runpy, sys
sys.argv = [{script!r}, "-c", {conf!r}, "-d"]
functions = runpy.run_path({script!r}, run_name="bdii_update")
module = functions["main"].__globals__
config = module["get_config"](module["parse_options"]())
with open(config["BDII_PID_FILE"], "w") as pid_file:
    pid_file.write("%d\\n" % __import__("os").getpid())
log = module["get_logger"](config["BDII_LOG_FILE"], config["BDII_LOG_LEVEL"])
module["config"], module["log"] = config, log
module["main"](config, log)
"""


class Bdii:
    """Debian's BDII on 127.0.0.1:port: its slapd and its update loop."""

    def __init__(self, workdir: Optional[os.PathLike] = None, breathe_time: float = 2.0, read_timeout: int = 30,
                 log_level: str = "INFO", slapd_wrapper: Optional[str] = None, mdb_maxsize: Optional[int] = None,
                 update_env: Optional[dict[str, str]] = None) -> None:
        """slapd_wrapper: run BDII's slapd through this program as /etc/default/bdii's SLAPD
        would (e.g. etc/bdii/bdii-slapd-maxsize; BDII_REAL_SLAPD names the real slapd and
        mdb_maxsize, when given, is its BDII_MDB_MAXSIZE).  update_env: more environment
        for bdii-update and so for the providers it runs."""
        self.slapd_wrapper = slapd_wrapper
        self.mdb_maxsize = mdb_maxsize
        self.update_env = dict(update_env or {})
        self._own_dir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="glueinfo-bdii-"))
        self.breathe_time = breathe_time
        self.read_timeout = read_timeout
        self.log_level = log_level
        self.port = 0
        self.slapd_process: Optional[subprocess.Popen] = None
        self.update_process: Optional[subprocess.Popen] = None
        self.var_dir = self.workdir / "var"
        self.ldif_dir = self.workdir / "gip" / "ldif"
        self.provider_dir = self.workdir / "gip" / "provider"
        self.plugin_dir = self.workdir / "gip" / "plugin"
        self.bin_dir = self.workdir / "bin"
        self.run_dir = self.workdir / "run"
        self.slapd_conf = self.workdir / "bdii-slapd.conf"
        self.bdii_conf = self.workdir / "bdii.conf"
        self.slapd_log = self.workdir / "slapd.log"
        self.update_log = self.workdir / "bdii-update.log"
        self.password = "secret"

    @property
    def url(self) -> str:
        return f"ldap://127.0.0.1:{self.port}"

    def _slapd_config(self) -> str:
        text = Path(BDII_SLAPD_CONF).read_text()
        db = self.workdir / "db"
        text = re.sub(r"(?m)^rootpw\s+.*$", f"rootpw          {self.password}", text)
        text = re.sub(r"(?m)^pidfile\s+.*$", f"pidfile         {self.run_dir}/slapd.pid", text)
        text = re.sub(r"(?m)^argsfile\s+.*$", f"argsfile        {self.run_dir}/slapd.args", text)
        text = re.sub(r"(?m)^directory\s+/var/lib/bdii/db/(\w+)\s*$", lambda m: f"directory       {db}/{m.group(1)}", text)
        if "/var/lib/bdii" in text or "/run/bdii" in text:
            raise ServerError(f"{BDII_SLAPD_CONF} has paths this harness does not relocate")
        return text

    def _bdii_config(self) -> str:
        settings = {
            "BDII_LOG_FILE": str(self.update_log),
            "BDII_PID_FILE": str(self.run_dir / "bdii-update.pid"),
            "BDII_LOG_LEVEL": self.log_level,
            "BDII_LDIF_DIR": str(self.ldif_dir),
            "BDII_PROVIDER_DIR": str(self.provider_dir),
            "BDII_PLUGIN_DIR": str(self.plugin_dir),
            "BDII_PORT": str(self.port),
            "BDII_BREATHE_TIME": f"{self.breathe_time:g}",
            "BDII_READ_TIMEOUT": str(self.read_timeout),
            "BDII_VAR_DIR": str(self.var_dir),
            "BDII_RUN_DIR": str(self.run_dir),
            "BDII_HOSTNAME": "127.0.0.1",
            "SLAPD_CONF": str(self.slapd_conf),
        }
        lines = []
        for line in Path(BDII_CONF).read_text().splitlines():
            key = line.split("=", 1)[0].strip()
            if key in settings:
                lines.append(f"{key}={settings.pop(key)}")
            else:
                lines.append(line)
        lines += [f"{key}={value}" for key, value in settings.items()]
        return "\n".join(lines) + "\n"

    def _write_shims(self) -> None:
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        for tool in LDAP_TOOLS:
            real = shutil.which(tool)
            if not real:
                raise ServerError(f"{tool} not found (Debian package ldap-utils)")
            path = self.bin_dir / tool
            path.write_text(SHIM.format(tool=tool, real=real))
            path.chmod(0o755)

    def start(self, timeout: float = 20.0) -> Bdii:
        slapd = find_slapd()
        if not slapd:
            raise ServerError("slapd not found (Debian package slapd)")
        for directory in (self.var_dir / "archive", self.ldif_dir, self.provider_dir, self.plugin_dir, self.run_dir,
                          self.workdir / "db" / "grid", self.workdir / "db" / "glue", self.workdir / "db" / "stats"):
            directory.mkdir(parents=True, exist_ok=True)
        default_ldif = next((p for p in BDII_DEFAULT_LDIF if os.path.exists(p)), None)
        if default_ldif is None:
            raise ServerError("bdii's default.ldif (o=grid, mds-vo-name=resource, o=glue base entries) not found")
        shutil.copy(default_ldif, self.ldif_dir / "default.ldif")
        self._write_shims()
        self.slapd_conf.write_text(self._slapd_config())
        slapd_env = dict(os.environ)
        if self.slapd_wrapper:  # as bdii-slapd-start runs "$SLAPD -f $SLAPD_CONF -h ..." with SLAPD set to it
            slapd_env["BDII_REAL_SLAPD"] = slapd
            if self.mdb_maxsize:
                slapd_env["BDII_MDB_MAXSIZE"] = str(self.mdb_maxsize)
        for attempt in range(3):
            self.port = free_port()
            with open(self.slapd_log, "ab") as log:
                self.slapd_process = subprocess.Popen([self.slapd_wrapper or slapd, "-f", str(self.slapd_conf), "-h",
                                                       f"{self.url}/", "-d", "0"],
                                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=slapd_env)
            try:
                _wait_listening(self.port, self.slapd_process, self.slapd_log, timeout, "BDII's slapd")
                break
            except ServerError:
                _stop(self.slapd_process)
                if attempt == 2:
                    raise
        self.bdii_conf.write_text(self._bdii_config())
        runner = self.workdir / "run-bdii-update.py"
        runner.write_text(RUNNER.format(script=BDII_UPDATE, conf=str(self.bdii_conf)))
        env = dict(os.environ)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
        env.pop("SLAPD_CONF", None)
        env.update(self.update_env)
        with open(self.update_log, "ab") as log:
            self.update_process = subprocess.Popen([sys.executable, str(runner)], env=env, cwd=self.workdir,
                                                   stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        try:
            self.wait_for_update(timeout=timeout + 3 * self.breathe_time)
        except ServerError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        _stop(self.update_process, group=True)
        self.update_process = None
        _stop(self.slapd_process)
        self.slapd_process = None
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Bdii:
        return self.start() if self.slapd_process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- feeding it
    def add_static_ldif(self, name: str, text: str) -> Path:
        """A file in BDII_LDIF_DIR (gip/ldif); '.ldif' is appended when missing."""
        if not name.endswith(".ldif"):
            name += ".ldif"
        return self._write_atomically(self.ldif_dir / name, text, 0o644)

    def add_provider(self, name: str, script_text: str) -> Path:
        """An executable in BDII_PROVIDER_DIR (gip/provider) that prints LDIF."""
        return self._write_atomically(self.provider_dir / name, script_text, 0o755)

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def clear(self, wait: bool = True) -> None:
        """Remove every provider, plugin and static LDIF file added (the
        package's default.ldif stays) and, with wait, let an update cycle
        delete their entries."""
        for directory in (self.provider_dir, self.plugin_dir, self.ldif_dir):
            for path in directory.iterdir():
                if path.name != "default.ldif":
                    path.unlink()
        if wait:
            self.wait_for_update()

    @staticmethod
    def _write_atomically(path: Path, text: str, mode: int) -> Path:
        # The temporary name ends in '~', which bdii-update neither runs nor reads.
        temporary = path.with_name(path.name + ".tmp~")
        temporary.write_text(text)
        temporary.chmod(mode)
        os.replace(temporary, path)
        return path

    # -- watching it
    def _counts(self) -> tuple[int, int]:
        try:
            text = self.update_log.read_text(errors="replace")
        except FileNotFoundError:
            return 0, 0
        started = len(re.findall(r"(?m)\] Starting Update$", text))
        finished = len(re.findall(r"(?m)\] Sleeping for \d+ seconds$", text))
        return started, finished

    def wait_for_update(self, timeout: float = 60.0) -> None:
        """Wait until an update cycle that started after this call has finished,
        so files added before the call are loaded (or rejected) by then.
        Needs BDII_LOG_LEVEL INFO or DEBUG (the default here)."""
        started, _ = self._counts()
        try:
            wait_until(lambda: self._counts()[1] >= started + 1, "a BDII update cycle finished", timeout, step=0.1,
                       detail=lambda: _tail(self.update_log),
                       still_running=lambda: self.update_process is not None and self.update_process.poll() is None)
        except AssertionError as exc:  # a server that will not work, as the harness reports it (start() stops it)
            raise ServerError(str(exc)) from None

    def ldapsearch(self, base: str = "mds-vo-name=resource,o=grid", filter: str = "(objectClass=*)",
                   attrs: Sequence[str] = (), scope: str = "sub") -> list[Entry]:
        return run_ldapsearch(self.url, base, filter, attrs, scope)

    def stats(self) -> dict[str, str]:
        """BDII's own update statistics (o=infosys): NewEntries, FailedAdds, ..."""
        entries = self.ldapsearch("Hostname=127.0.0.1,o=infosys", scope="base")
        return {name: str(values[0]) for name, values in entries[0].attributes.items()} if entries else {}

    def log_text(self) -> str:
        return self.update_log.read_text(errors="replace") if self.update_log.exists() else ""
