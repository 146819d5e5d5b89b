"""A real one-host Grid Engine cell for the tests: sge_qmaster and sge_execd from
Debian 12's gridengine-master / gridengine-exec / gridengine-client (Son of Grid
Engine 8.1.9), without systemd.

Everything lives under one work directory, a private cell that never touches
the packaged /var/lib/gridengine:

- ``SGE_ROOT`` with ``bin``/``utilbin``/``lib`` ``lx-amd64`` links to
  /usr/lib/gridengine and ``util`` to /usr/share/gridengine/util;
- ``SGE_CELL`` ``gluetest`` with ``common/act_qmaster`` (this host),
  ``common/bootstrap`` (admin user sgeadmin, berkeleydb spooling inside the
  cell), ``common/host_aliases`` (this host's name is also ``localhost``: with
  /etc/hosts giving both 127.0.0.1, qmaster otherwise refuses clients with
  "local host name error");
- the spool made by ``spoolinit`` and ``spooldefaults`` run as sgeadmin (the
  global configuration with ``min_uid``/``min_gid`` 0 so root's jobs run,
  execd's spool and the mailer inside/harmless), as Debian's init_cluster does;
- free ports in ``SGE_QMASTER_PORT``/``SGE_EXECD_PORT`` for daemons and
  clients alike (both daemons listen on every address: there is no setting).

The daemons are started with ``SGE_ND=1`` (no daemonising) so they stay our
children and are stopped by PID; the pids they write in their spool
directories are used too, in case one forked anyway.  Jobs are deleted and
waited for first, and any job process still alive is killed by the process
group its shepherd recorded in ``active_jobs``, so nothing outlives the cell.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional

from waiting import wait_until

SGE_LIB = Path("/usr/lib/gridengine")
SGE_SHARE = Path("/usr/share/gridengine")
CLIENTS = ("qstat", "qhost", "qconf", "qsub", "qdel", "qmod")
DAEMONS = ("sge_qmaster", "sge_execd")
ADMIN_USER = "sgeadmin"
CELL = "gluetest"


class SgeHarnessError(RuntimeError):
    pass


def missing_sge_tools() -> list[str]:
    """What this machine lacks to run a cell, each with the Debian package that has it."""
    missing = [f"{t} (Debian package gridengine-client)" for t in CLIENTS if not (SGE_LIB / t).exists()]
    missing += [f"{d} (Debian package gridengine-master / gridengine-exec)" for d in DAEMONS
                if not (SGE_LIB / d).exists()]
    missing += [f"{t} (Debian package gridengine-common)" for t in ("spoolinit", "spooldefaults")
                if not (SGE_LIB / t).exists()]
    try:
        pwd.getpwnam(ADMIN_USER)
    except KeyError:
        missing.append(f"user {ADMIN_USER} (Debian package gridengine-common)")
    if os.geteuid() != 0:
        missing.append("root (the daemons switch to sgeadmin and start jobs as their owners)")
    return missing


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; waits for it when it is our child."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            if not _alive(pid):
                return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


class SgeCell:
    """One qmaster and one execd on this host, with cluster queues:

    - ``short``: ``SHORT_SLOTS`` slots, h_rt 0:30:0, s_cpu 3600 (seconds), h_cpu INFINITY;
    - ``long``: 1 slot, h_rt 48:00:00, s_rt 172000, h_cpu 1:30:00, priority 5;
    - ``closed``: 1 slot, disabled (``qmod -d``) once started.
    """

    SHORT_SLOTS = 2
    SHORT_MAX_WALL_MIN = 30
    SHORT_MAX_CPU_MIN = 60
    LONG_MAX_WALL_MIN = 2866  # s_rt 172000 s (2866.67 min) is below h_rt 48 h: the tighter, rounded down
    LONG_MAX_CPU_MIN = 90

    def __init__(self, workdir: os.PathLike[str]):
        # The spool is owned by sgeadmin, which must reach it: pytest's tmp dirs
        # (/tmp/pytest-of-root, mode 0700) are not reachable, so the cell gets its own path.
        self.workdir = Path(workdir)
        self.root = Path(tempfile.mkdtemp(prefix="glueinfo-sge-"))
        os.chmod(self.root, 0o755)
        self.cell = CELL
        self.host = socket.gethostname()
        self.nproc = os.cpu_count() or 1
        self.qmaster_port = free_port()
        self.execd_port = free_port()
        self.common = self.root / self.cell / "common"
        self.spool = self.root / self.cell / "spool"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    # -- environment -----------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SGE_")}
        env.update(SGE_ROOT=str(self.root), SGE_CELL=self.cell, SGE_QMASTER_PORT=str(self.qmaster_port),
                   SGE_EXECD_PORT=str(self.execd_port), LC_ALL="C", TZ="UTC")
        return env

    def run(self, *argv: str, check: bool = True, timeout: float = 30.0, user: Optional[str] = None,
            stdin: Optional[str] = None) -> str:
        """Run a Grid Engine command of this cell (client or util); its stdout."""
        tool = str(SGE_LIB / argv[0]) if (SGE_LIB / argv[0]).exists() else argv[0]
        kwargs: dict[str, Any] = {}
        if user is not None:
            entry = pwd.getpwnam(user)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        env = dict(self.env, LD_LIBRARY_PATH=str(SGE_LIB))
        proc = subprocess.run([tool, *argv[1:]], capture_output=True, text=True, env=env, timeout=timeout,
                              input=stdin if stdin is not None else "", cwd=self.root, **kwargs)
        if check and proc.returncode != 0:
            raise SgeHarnessError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout

    def qsub(self, *args: str, seconds: int = 300) -> str:
        """Submit a job that sleeps; its job id."""
        out = self.run("qsub", "-terse", "-b", "y", "-o", "/dev/null", "-e", "/dev/null", *args, "/bin/sleep", str(seconds))
        return out.strip().split(".")[0]

    def qconf_add(self, option: str, text: str) -> None:
        """``qconf -A?`` / ``-M?`` from a file of ours (e.g. ``-Aq`` a queue)."""
        path = self.root / f"add-{option.strip('-')}-{time.monotonic_ns()}"
        path.write_text(text)
        os.chmod(path, 0o644)
        self.run("qconf", option, str(path))

    # -- start / stop ------------------------------------------------------------
    def _layout(self) -> None:
        admin = pwd.getpwnam(ADMIN_USER)
        for sub in ("bin", "utilbin", "lib"):
            (self.root / sub).mkdir()
            (self.root / sub / "lx-amd64").symlink_to(SGE_LIB)
        (self.root / "util").symlink_to(SGE_SHARE / "util")
        self.common.mkdir(parents=True)
        (self.spool / "qmaster").mkdir(parents=True)
        (self.spool / "execd").mkdir()
        (self.root / "tmp").mkdir()
        os.chmod(self.root / "tmp", 0o1777)
        (self.common / "act_qmaster").write_text(self.host + "\n")
        (self.common / "host_aliases").write_text(f"{self.host} localhost\n")
        (self.common / "bootstrap").write_text(f"""\
# Version: 8.1.9
admin_user              {ADMIN_USER}
default_domain          none
ignore_fqdn             false
spooling_method         berkeleydb
spooling_lib            libspoolb
spooling_params         {self.spool / 'spooldb'}
binary_path             /usr/sbin
qmaster_spool_dir       {self.spool / 'qmaster'}
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
""")
        defaults = (SGE_SHARE / "default-configuration").read_text()
        overrides = {"execd_spool_dir": str(self.spool / "execd"), "mailer": "/bin/true", "min_uid": "0",
                     "min_gid": "0", "load_report_time": "00:00:05", "max_unheard": "00:01:00"}
        lines = []
        for line in defaults.splitlines():
            key = line.split(None, 1)[0] if line.strip() and not line.startswith("#") else ""
            lines.append(f"{key:<22} {overrides[key]}" if key in overrides else line)
        (self.root / "configuration").write_text("\n".join(lines) + "\n")
        for path in [self.root / self.cell, self.common, self.spool, self.spool / "qmaster", self.spool / "execd",
                     *self.common.iterdir(), self.root / "configuration"]:
            os.chown(path, admin.pw_uid, admin.pw_gid)
        spooldb = self.spool / "spooldb"
        spooldb.mkdir()
        os.chown(spooldb, admin.pw_uid, admin.pw_gid)
        # As Debian's init_cluster does, as the admin user.
        self.run("spoolinit", "berkeleydb", "libspoolb", str(spooldb), "init", user=ADMIN_USER)
        self.run("spooldefaults", "configuration", str(self.root / "configuration"), user=ADMIN_USER)
        self.run("spooldefaults", "complexes", str(SGE_SHARE / "util" / "resources" / "centry"), user=ADMIN_USER)
        self.run("spooldefaults", "usersets", str(SGE_SHARE / "util" / "resources" / "usersets"), user=ADMIN_USER)
        self.run("spooldefaults", "managers", ADMIN_USER, "root", user=ADMIN_USER)

    def _spawn(self, name: str) -> None:
        log = open(self.workdir / f"{name}.out", "wb")
        env = dict(self.env, SGE_ND="1")  # stay in the foreground: our child, stopped by its PID
        self.processes[name] = subprocess.Popen([str(SGE_LIB / name)], stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, env=env, cwd=self.root)
        log.close()

    def _wait(self, ready: Callable[[], Any], name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            process = self.processes.get(name)
            if process is not None and process.poll() is not None:
                raise SgeHarnessError(f"{name} exited {process.returncode}:\n{_tail(self.workdir / f'{name}.out')}"
                                      f"\n{_tail(self.spool / 'qmaster' / 'messages')}")
            try:
                if ready():
                    return
            except (OSError, SgeHarnessError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.2)
        raise SgeHarnessError(f"{name} not ready within {timeout:g} s:\n{_tail(self.workdir / f'{name}.out')}\n"
                              f"{_tail(self.spool / 'qmaster' / 'messages')}")

    def _configure(self) -> None:
        self.run("qconf", "-ah", self.host, check=False)  # already one as the qmaster host, on some versions
        self.run("qconf", "-as", self.host, check=False)
        sconf = self.run("qconf", "-ssconf")
        sconf = "\n".join("schedule_interval                 0:0:1" if line.startswith("schedule_interval") else line
                          for line in sconf.splitlines())
        self.qconf_add("-Msconf", sconf + "\n")

    def queue_text(self, name: str, slots: int, **limits: str) -> str:
        values = {"qname": name, "hostlist": self.host, "seq_no": "0", "load_thresholds": "NONE",
                  "suspend_thresholds": "NONE", "nsuspend": "1", "suspend_interval": "00:05:00", "priority": "0",
                  "min_cpu_interval": "00:05:00", "processors": "UNDEFINED", "qtype": "BATCH INTERACTIVE",
                  "ckpt_list": "NONE", "pe_list": "NONE", "rerun": "FALSE", "slots": str(slots),
                  "tmpdir": str(self.root / "tmp"), "shell": "/bin/sh", "prolog": "NONE", "epilog": "NONE",
                  "shell_start_mode": "posix_compliant", "starter_method": "NONE", "suspend_method": "NONE",
                  "resume_method": "NONE", "terminate_method": "NONE", "notify": "00:00:60", "owner_list": "NONE",
                  "user_lists": "NONE", "xuser_lists": "NONE", "subordinate_list": "NONE", "complex_values": "NONE",
                  "projects": "NONE", "xprojects": "NONE", "calendar": "NONE", "initial_state": "default",
                  "s_rt": "INFINITY", "h_rt": "INFINITY", "s_cpu": "INFINITY", "h_cpu": "INFINITY",
                  "s_fsize": "INFINITY", "h_fsize": "INFINITY", "s_data": "INFINITY", "h_data": "INFINITY",
                  "s_stack": "INFINITY", "h_stack": "INFINITY", "s_core": "INFINITY", "h_core": "INFINITY",
                  "s_rss": "INFINITY", "h_rss": "INFINITY", "s_vmem": "INFINITY", "h_vmem": "INFINITY"}
        values.update(limits)
        return "".join(f"{key:<19}{value}\n" for key, value in values.items())

    def start(self) -> SgeCell:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._layout()
            self._spawn("sge_qmaster")
            self._wait(lambda: self.run("qconf", "-sh", timeout=5), "sge_qmaster", 30)
            self._configure()
            self._spawn("sge_execd")
            self.qconf_add("-Aq", self.queue_text("short", self.SHORT_SLOTS, h_rt="0:30:0", s_cpu="3600"))
            self.qconf_add("-Aq", self.queue_text("long", 1, h_rt="48:00:00", s_rt="172000", h_cpu="1:30:00",
                                                  priority="5"))
            self.qconf_add("-Aq", self.queue_text("closed", 1))
            self.run("qmod", "-d", "closed")
            self._wait(self._execd_reports, "sge_execd", 30)
        except BaseException:
            self.stop()
            raise
        return self

    def _execd_reports(self) -> bool:
        """True once qhost shows this host's load: its execd reports, the queue instances lose ``u``."""
        for line in self.run("qhost", timeout=5).splitlines():
            parts = line.split()
            if len(parts) > 6 and parts[0] == self.host:
                return parts[6] != "-"
        return False

    def delete_all(self, timeout: float = 30.0) -> None:
        """Delete every job and wait until qstat lists none."""
        if self.processes.get("sge_qmaster") is None or self.processes["sge_qmaster"].poll() is not None:
            return
        self.run("qdel", "-f", "-u", "*", check=False, timeout=10)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.run("qstat", "-u", "*", check=False, timeout=10).strip():
                return
            time.sleep(0.2)

    def _spool_pids(self) -> list[int]:
        pids = []
        # execd names its spool directory after the host's name in host_aliases terms ("localhost" here).
        for path in (self.spool / "qmaster" / "qmaster.pid", *self.spool.glob("execd/*/execd.pid")):
            try:
                pids.append(int(path.read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                pass
        return pids

    def _kill_job_groups(self) -> None:
        """Job processes the shepherds left: their process groups, from each job's active_jobs dir."""
        for jobdir in self.spool.glob("execd/*/active_jobs/*"):
            try:
                group = int((jobdir / "job_pid").read_text().split()[0])
                os.killpg(group, signal.SIGKILL)
            except (OSError, ValueError, IndexError):
                pass

    def stop(self) -> None:
        try:
            self.delete_all()
        except Exception:
            pass
        pids = self._spool_pids()
        for name in ("sge_execd", "sge_qmaster"):
            process = self.processes.get(name)
            if process is not None and process.poll() is None:
                _kill_pid(process.pid)
        for pid in pids:
            if _alive(pid) and not any(p.pid == pid for p in self.processes.values()):
                _kill_pid(pid)
        self._kill_job_groups()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SgeCell:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers for tests ---------------------------------------------------------
    def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> None:
        """Until ``predicate()`` is true; AssertionError naming ``what`` after ``timeout`` seconds."""
        wait_until(predicate, what, timeout, step=0.2)

    def ce_config(self, queue: str, **extra: Any) -> dict[str, Any]:
        """A [ce:*] mapping pointing glueinfo's sge plugin at this cell (SGE_QMASTER_PORT goes in the
        environment: the cell's act_qmaster names the host, the port is ours)."""
        return {"lrms": "sge", "queue": queue, "sge_root": str(self.root), "sge_cell": self.cell,
                "lrms_timeout": 20.0, **extra}

    def client_env(self) -> Mapping[str, str]:
        return self.env
