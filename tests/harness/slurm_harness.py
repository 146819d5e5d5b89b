"""A real one-node Slurm for the tests: munged, slurmctld and slurmd from
Debian's munge / slurm-wlm packages, without systemd.

Everything lives under one work directory: a generated munge key and socket,
slurm.conf (ClusterName, SlurmctldHost=<short hostname>(127.0.0.1), free
non-default ports, state/spool/pid/log files, SlurmUser=root when run as
root, proctrack/linuxproc, task/none, select/cons_tres, one NodeName for this
host with CPUs=nproc, two partitions with different MaxTime; ``long`` also has
the per-job limits glueinfo publishes: DefaultTime, MaxNodes, MaxCPUsPerNode,
MaxMemPerNode, DefMemPerCPU); the node has count-only GPU GRES, ``gpu:h100:2`` on two
character devices made with mknod (as /dev/null: major 1, minor 3) named in a gres.conf with
AutoDetect=off, when we may make device nodes (root), none otherwise.  munged runs as
user ``munge`` when we are root (it refuses root), as ourselves otherwise.
Every daemon is started in the foreground and stopped by its PID; jobs are
cancelled and waited for first, so no job process outlives the cluster.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

from waiting import wait_until

SLURM_TOOLS = ("slurmctld", "slurmd", "sinfo", "squeue", "scontrol", "sbatch", "scancel")
MUNGE_TOOLS = ("munged",)
SBIN_DIRS = ("/usr/sbin", "/sbin", "/usr/local/sbin")


class SlurmHarnessError(RuntimeError):
    pass


def find_tool(name: str) -> Optional[str]:
    found = shutil.which(name)
    if found:
        return found
    for directory in SBIN_DIRS:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def missing_slurm_tools() -> list[str]:
    missing = [f"{t} (Debian package slurm-wlm / slurm-client)" for t in SLURM_TOOLS if not find_tool(t)]
    missing += [f"{t} (Debian package munge)" for t in MUNGE_TOOLS if not find_tool(t)]
    return missing


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop(process: Optional[subprocess.Popen], timeout: float = 15.0) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)
    except ProcessLookupError:
        pass


def _memory_mb() -> int:
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 1024


class SlurmCluster:
    """One controller + one node on 127.0.0.1; partitions ``short`` (MaxTime 30 min,
    default, no other limit) and ``long`` (MaxTime 2 days, DefaultTime 1 hour, one node of one
    CPU per job, MaxMemPerNode 100 MB and DefMemPerCPU 50 MB: under the node's RealMemory, at
    least 100 MB).  Memory is not a consumable resource here (CR_Core), so the memory limits
    only bound what a job may ask for."""

    SHORT_MAX_MIN = 30
    LONG_MAX_MIN = 2 * 24 * 60
    LONG_DEFAULT_MIN = 60
    LONG_LIMITS = "MaxNodes=1 MaxCPUsPerNode=1 MaxMemPerNode=100 DefMemPerCPU=50"
    GPU_TYPE = "h100"  # the GRES type of the node's GPUs (a name only: nothing reads a device)

    def __init__(self, workdir: os.PathLike, cpus: Optional[int] = None, gpus: Optional[int] = None):
        self.dir = Path(workdir)
        self.node = socket.gethostname().split(".")[0]
        self.cpus = cpus or os.cpu_count() or 1
        # GPUs need device nodes, which only root may make; None: as many as this user can have (2 or 0).
        self.gpus = (2 if os.geteuid() == 0 else 0) if gpus is None else gpus
        self.ctld_port = free_port()
        self.slurmd_port = free_port()
        # munged runs as user munge, which must reach its directory: pytest's tmp
        # dirs (/tmp/pytest-of-root, mode 0700) are not reachable, so it gets its own
        # short path (also under the 108-byte limit of a socket path).
        self.munge_dir = Path(tempfile.mkdtemp(prefix="glueinfo-munge-"))
        self.socket = self.munge_dir / "munge.socket"
        self.conf = self.dir / "slurm.conf"
        self.processes: dict[str, subprocess.Popen] = {}

    # -- environment -----------------------------------------------------------
    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEUE_", "SINFO_", "SBATCH_", "SLURM_"))}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, *argv: str, check: bool = True, timeout: float = 30.0, extra_env: Optional[dict] = None) -> str:
        """Run a Slurm client command against this cluster; its stdout."""
        tool = find_tool(argv[0]) or argv[0]
        env = dict(self.env, **(extra_env or {}))
        proc = subprocess.run([tool, *argv[1:]], capture_output=True, text=True, env=env, timeout=timeout)
        if check and proc.returncode != 0:
            raise SlurmHarnessError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout

    def sbatch(self, *args: str, seconds: int = 120) -> str:
        """Submit a job that sleeps; its job id."""
        out = self.run("sbatch", "--parsable", "-o", "/dev/null", "-e", "/dev/null", *args, "--wrap", f"sleep {seconds}")
        return out.strip().split(";")[0]

    # -- start / stop ------------------------------------------------------------
    def _write_munge_key(self) -> None:
        self.munge_dir.mkdir(parents=True, exist_ok=True)
        key = self.munge_dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        # munged insists: socket directory executable by all, key readable only by its owner.
        os.chmod(self.munge_dir, 0o711)
        if os.geteuid() == 0:
            munge = pwd.getpwnam("munge")
            for path in (self.munge_dir, key):
                os.chown(path, munge.pw_uid, munge.pw_gid)

    def _start_munged(self) -> None:
        self._write_munge_key()
        argv = [find_tool("munged"), "--foreground", f"--socket={self.socket}", f"--key-file={self.munge_dir / 'munge.key'}",
                f"--log-file={self.munge_dir / 'munged.log'}", f"--pid-file={self.munge_dir / 'munged.pid'}",
                f"--seed-file={self.munge_dir / 'munged.seed'}"]
        kwargs = {}
        if os.geteuid() == 0:
            munge = pwd.getpwnam("munge")
            kwargs = {"user": munge.pw_uid, "group": munge.pw_gid, "extra_groups": []}
        log = open(self.munge_dir / "munged.out", "wb")
        self.processes["munged"] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                    **kwargs)
        self._wait(lambda: self.socket.exists(), "munged", self.munge_dir / "munged.out", 10)

    def _make_gpus(self) -> str:
        """The GPU devices and gres.conf; the NodeName line's Gres= ("" without GPUs).

        slurmd refuses a gpu GRES without File= ("count reported lower than configured"), and
        AutoDetect=off keeps it from looking for NVML: each File= is a character device like
        /dev/null, which slurmd only stats (task/none: no device cgroup)."""
        gres_conf = self.dir / "gres.conf"
        if not self.gpus:
            gres_conf.write_text("AutoDetect=off\n")
            return ""
        devices = self.dir / "dev"
        devices.mkdir(exist_ok=True)
        for index in range(self.gpus):
            device = devices / f"nvidia{index}"
            if not device.exists():
                os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        gres_conf.write_text(f"AutoDetect=off\nNodeName={self.node} Name=gpu Type={self.GPU_TYPE} "
                             f"File={devices}/nvidia[0-{self.gpus - 1}]\n")
        return f" Gres=gpu:{self.GPU_TYPE}:{self.gpus}"

    def _write_conf(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.dir / sub).mkdir(exist_ok=True)
        gres = self._make_gpus()
        user = pwd.getpwuid(os.geteuid()).pw_name
        memory = max(100, min(1000, _memory_mb() - 200))
        self.conf.write_text(f"""\
ClusterName=gluetest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
SlurmUser={user}
SlurmdUser={user}
StateSaveLocation={self.dir / 'state'}
SlurmdSpoolDir={self.dir / 'spool'}
SlurmctldPidFile={self.dir / 'slurmctld.pid'}
SlurmdPidFile={self.dir / 'slurmd.pid'}
SlurmctldLogFile={self.dir / 'log' / 'slurmctld.log'}
SlurmdLogFile={self.dir / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MailProg=/bin/true
GresTypes=gpu
ReturnToService=2
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={memory}{gres} State=UNKNOWN
PartitionName=short Nodes={self.node} MaxTime={self.SHORT_MAX_MIN} Default=YES State=UP
PartitionName=long Nodes={self.node} MaxTime={self.LONG_MAX_MIN} DefaultTime={self.LONG_DEFAULT_MIN} {self.LONG_LIMITS} State=UP
""")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.dir / f"{name}.out", "wb")
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                env=self.env)

    def _wait(self, ready, name: str, log: Path, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            process = self.processes.get(name)
            if process is not None and process.poll() is not None:
                raise SlurmHarnessError(f"{name} exited {process.returncode}:\n{_tail(log)}")
            try:
                if ready():
                    return
            except (OSError, SlurmHarnessError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.1)
        raise SlurmHarnessError(f"{name} not ready within {timeout:g} s:\n{_tail(log)}")

    def start(self) -> SlurmCluster:
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_munged()
            self._write_conf()
            self._spawn("slurmctld", [find_tool("slurmctld"), "-D", "-i", "-f", str(self.conf)])
            self._wait(lambda: socket.create_connection(("127.0.0.1", self.ctld_port), timeout=0.5).close() is None,
                       "slurmctld", self.dir / "slurmctld.out", 30)
            self._spawn("slurmd", [find_tool("slurmd"), "-D", "-N", self.node, "-f", str(self.conf)])
            self._wait(lambda: re.match(r"idle", self.run("sinfo", "-h", "-N", "-p", "short", "-o", "%T", timeout=5).strip()),
                       "slurmd", self.dir / "slurmd.out", 60)
        except BaseException:
            self.stop()
            raise
        return self

    def cancel_all(self, timeout: float = 30.0) -> None:
        """Cancel every job and wait until none holds the node any more."""
        if "slurmctld" not in self.processes or self.processes["slurmctld"].poll() is not None:
            return
        self.run("scancel", "--full", "-u", pwd.getpwuid(os.geteuid()).pw_name, check=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = self.run("squeue", "-h", "-t", "PD,R,CG,S,CF,ST,SI,SO", "-o", "%i", check=False, timeout=10).split()
            if not left:
                return
            time.sleep(0.2)

    def stop(self) -> None:
        try:
            self.cancel_all()
        except Exception:
            pass
        for name in ("slurmd", "slurmctld", "munged"):
            _stop(self.processes.get(name))
        shutil.rmtree(self.munge_dir, ignore_errors=True)

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers for tests ---------------------------------------------------------
    def wait_for(self, predicate, timeout: float = 30.0, what: str = "condition") -> None:
        """Until ``predicate()`` is true; AssertionError naming ``what`` after ``timeout`` seconds."""
        wait_until(predicate, what, timeout, step=0.2)

    def ce_config(self, queue: str, **extra) -> dict:
        """A [ce:*] mapping pointing glueinfo's slurm plugin at this cluster."""
        return {"lrms": "slurm", "queue": queue, "slurm_conf": str(self.conf), "lrms_timeout": 20.0, **extra}
