#!/usr/bin/env python3
"""Steady-state cost of `glueinfo run` on a spool site.  Not a test: it prints figures.

    python3 benchmarks/incremental.py                          # 1,000 hosts, 5 minutes at a 60 s interval
    python3 benchmarks/incremental.py --hosts 1000,10000       # each size in turn, never in parallel
    python3 benchmarks/incremental.py --hosts 10000 --minutes 10 --interval 60
    python3 benchmarks/incremental.py --cold 100000            # only the cold build (benchmarks/glue.py scale)
    python3 benchmarks/incremental.py --profile                # cProfile of one steady interval's jobs, 1,000 hosts
    python3 benchmarks/incremental.py --profile --clock wall   # the same by wall time (I/O waits counted)
    python3 benchmarks/incremental.py --quick --hosts 1000     # in-process steady intervals: a quick figure while iterating

Targets (the issue): measured over at least 5 minutes at a 60 s interval on a
spool site where every host rewrites its snapshot each interval with a new
load and 1% of the hosts change hardware or OS per hour:
  1,000 hosts    <= 30 CPU-s per hour;
  10,000 hosts   <= 200 CPU-s per hour and <= 300 MB RSS;
  cold build of 100,000 hosts aggregated, rendered and schema-checked in <= 10 s and <= 1 GB.

The site.  A temporary directory holds the spool (one HOST.xml Node document
per worker, as `glueinfo node-xml` renders them, made from
tests/harness/glue_sites.synthetic_site: five hardware classes, so five
SubClusters to begin with), a state directory, the LDIF and Node XML outputs
and a config: `[sources] enabled = spool` (this head node's own collectors
are off, so only the spool's cost is measured; --local adds them, with the
fast job at the same interval, as a head node that is also published would
run), `[run] gather_interval` = --interval, the other [run] intervals at
their defaults (where the daemon has an LRMS job, `lrms_interval`, 60 s, is
counted too: it is part of the steady cost), one fork CE, the GLUE schema
check as installed ([glue] schema_dir), no LDAP server, no HTTP.
`glueinfo run` runs as a child process (its own session; it is sent SIGTERM,
then SIGKILL, by PID at the end, on Ctrl-C or on error, and the directory is
removed).

The workers.  This process plays every agent: once per interval, half-way
between two gathers of the daemon, it rewrites every host's file with a new
load and free memory and a fresh CollectedAt, atomically (a dot-file, then a
rename over HOST.xml).  Its own CPU is not counted.  Hardware and OS changes:
1% of the hosts per hour, spread over the measured cycles (for 5 minutes of
1,000 hosts: 1,000 x 1% x 5/60 = 0.8, so at least one host); they alternate
between an OS upgrade (Debian 12 -> 13, Rocky 9.3 -> 9.4, ...) and 64 GiB
more RAM, so each moves its host to another SubCluster.

The measurement.  Start-up (the first, cold gather: every file read, every
state file written) and one warm-up cycle are left out; then utime + stime
of /proc/PID/stat (every thread of the daemon, plus any children it waited
for) is taken over --minutes worth of gather cycles, from the end of one
cycle to the end of the last, and scaled to CPU-s per hour.  Memory: VmHWM
of /proc/PID/status before the window (start-up peak), reset through
/proc/PID/clear_refs where the kernel allows it, VmHWM at the end (steady
peak) and VmRSS at the end (final).  The machine may be shared: the 1-minute
load average is sampled every second over the window (its mean and maximum
are printed) and CPU time, not wall time, is what is scaled.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from idle import child_env, status_kb  # noqa: E402  (benchmarks/idle.py: the same child environment and /proc reading)

TICKS = os.sysconf("SC_CLK_TCK")
CHANGES_PER_HOUR = 0.01  # share of the hosts changing hardware or OS per hour
# hosts -> (CPU-s per hour, MB of RSS or None); the cold build's: seconds and MB.
TARGETS: dict[int, tuple[float, Optional[float]]] = {1000: (30.0, None), 10000: (200.0, 300.0)}
COLD_TARGET_S, COLD_TARGET_MB = 10.0, 1024.0

# OS upgrades a worker may get: (name, release) -> (name, release, codename).
UPGRADES = {
    ("Debian GNU/Linux", "12"): ("Debian GNU/Linux", "13", "trixie"),
    ("Rocky Linux", "9.3"): ("Rocky Linux", "9.4", "Blue Onyx"),
    ("Ubuntu", "22.04"): ("Ubuntu", "24.04", "noble"),
    ("CentOS Linux", "7"): ("Rocky Linux", "9.4", "Blue Onyx"),
}


# -- /proc --------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(utime + stime of every thread, cutime + cstime of the children waited for), in seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS, (int(fields[13]) + int(fields[14])) / TICKS


def reset_peak_rss(pid: int) -> bool:
    """Start VmHWM again from the current RSS (Linux >= 4.0, same user); False when refused."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def load_average() -> tuple[float, float, float]:
    with open("/proc/loadavg") as handle:
        one, five, fifteen = handle.read().split()[:3]
    return float(one), float(five), float(fifteen)


def loop_seconds() -> float:
    """CPU time of a 10-million-step Python loop: how fast this (shared, throttled) machine is just now."""
    began = time.process_time()
    total = 0
    for step in range(10_000_000):
        total += step
    return time.process_time() - began


def die_with_parent() -> None:
    """In the child before exec: SIGTERM when this benchmark dies, however it dies (prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


# -- the workers --------------------------------------------------------------------------------


class SpoolSite:
    """N synthetic workers writing their Node XML into a spool directory, as agents from cron would."""

    def __init__(self, directory: str, hosts: int, seed: int = 42) -> None:
        from glue_sites import synthetic_site

        from glueinfo.sss.node_settings import NodeSettings

        self.directory = directory
        self.snapshots = synthetic_site(hosts)
        self.rng = random.Random(seed)
        self.settings = NodeSettings()
        self.changed: list[str] = []  # what the hardware/OS changes were, one line each
        self._unchanged = list(range(len(self.snapshots)))
        self.rng.shuffle(self._unchanged)
        self.last_write_cpu_s = 0.0
        self.last_write_wall_s = 0.0

    def _new_load(self, index: int) -> None:
        host = self.snapshots[index]
        threads = host.cpu.logical_cpus or 1
        previous = host.load.load1 or 0.0
        load1 = round(self.rng.uniform(0.0, 1.1 * threads), 2)
        load5 = round((4 * previous + load1) / 5, 2)
        load15 = round((14 * (host.load.load15 or 0.0) + load1) / 15, 2)
        ram = host.memory.ram_mb
        free = self.rng.randint(ram // 8, ram * 7 // 8)
        host.load = dataclasses.replace(host.load, load1=load1, load5=load5, load15=load15,
                                        runnable_tasks=self.rng.randint(1, threads + 1))
        host.memory = dataclasses.replace(host.memory, ram_available_mb=free, virtual_available_mb=free)

    def write_all(self) -> None:
        """Every host writes its file once: new load and free memory, collected now."""
        from glueinfo.sss.node_xml import render_node

        began, cpu = time.monotonic(), time.process_time()
        for index, host in enumerate(self.snapshots):
            self._new_load(index)
            now = time.time()
            host.collected_at = now
            self._write(host.hostname, render_node(host, now, self.settings))
        self.last_write_wall_s = time.monotonic() - began
        self.last_write_cpu_s = time.process_time() - cpu

    def _write(self, hostname: str, data: bytes) -> None:
        final = os.path.join(self.directory, hostname + ".xml")
        temporary = os.path.join(self.directory, f".{hostname}.xml.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, final)

    def change_hardware(self, count: int) -> None:
        """``count`` hosts not changed before get an OS upgrade or more RAM (alternately); seen at their next write."""
        for _ in range(count):
            if not self._unchanged:
                return
            host = self.snapshots[self._unchanged.pop()]
            upgrade = UPGRADES.get((host.os.name, host.os.release))
            if len(self.changed) % 2 == 0 and upgrade is not None:
                name, release, codename = upgrade
                self.changed.append(f"{host.hostname}: OS {host.os.name} {host.os.release} -> {name} {release}")
                host.os = dataclasses.replace(host.os, name=name, release=release, version=codename, pretty_name=f"{name} {release}")
            else:
                ram = host.memory.ram_mb + 65536
                self.changed.append(f"{host.hostname}: RAM {host.memory.ram_mb} -> {ram} MB")
                host.memory = dataclasses.replace(host.memory, ram_mb=ram, virtual_mb=ram)


def changes_due(hosts: int, minutes: float) -> int:
    return max(1, round(hosts * CHANGES_PER_HOUR * minutes / 60))


def change_schedule(changes: int, ticks: int) -> dict[int, int]:
    """Writer tick (1 .. ticks) -> hosts to change at it, spread evenly over the window."""
    schedule: dict[int, int] = {}
    for j in range(changes):
        tick = 1 + min(ticks - 1, int((j + 0.5) * ticks / changes))
        schedule[tick] = schedule.get(tick, 0) + 1
    return schedule


def write_config(workdir: str, spool: str, interval: float, local: bool, serve: bool = False) -> str:
    lines = [
        "[site]",
        "id = EXAMPLE-SPOOL",
        "name = EXAMPLE-SPOOL",
        "[cluster:main]",
        "unique_id = ce01.example.org",
        "[ce:default]",
        "host = ce01.example.org",
        "lrms = fork",
        "access = VO:atlas",
        "[run]",
        f"gather_interval = {interval:g}",
        f"fast_interval = {interval:g}",  # only used with --local
        "slow_interval = 3600",
        f"ldif_file = {workdir}/out/glue.ldif",
        f"node_xml_file = {workdir}/out/nodes.xml",
        f"state_dir = {workdir}/state",
        "[node]",
        f"stale_after = {max(300.0, 3 * interval):g}",
        "[sources]",
        f"enabled = {'local, spool' if local else 'spool'}",
        f"spool_dir = {spool}",
        f"drop_after = {max(3600.0, 10 * interval):g}",
    ]
    if serve:  # the HTTP output too (issue 24: at most 1.2x the RSS without it)
        lines += ["[serve]", "listen = 127.0.0.1:0"]
        lines.insert(lines.index("[run]") + 1, "serve = yes")
    os.makedirs(os.path.join(workdir, "out"), exist_ok=True)
    path = os.path.join(workdir, "glueinfo.conf")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def make_site(workdir: str, hosts: int, interval: float, local: bool, serve: bool = False) -> tuple[SpoolSite, str]:
    spool = os.path.join(workdir, "spool")
    os.makedirs(spool)
    site = SpoolSite(spool, hosts)
    site.write_all()
    return site, write_config(workdir, spool, interval, local, serve)


# -- the daemon's log ---------------------------------------------------------------------------


class LogWatcher:
    """Follows the daemon's log: gather cycles ended, their durations, warnings."""

    CYCLE = re.compile(r"INFO: cycle (\w+): .*?([0-9.]+) s\)?$")  # "..., 1.23 s" or "nothing new ... (0.01 s)"
    GATHERED = re.compile(r"INFO: gathered .* in ([0-9.]+) s;")

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.partial = ""
        self.cycles = 0  # gather cycles ended (each a gather and its publish)
        self.publishes: dict[str, int] = {}  # publishes logged, by reason (gather, lrms, fast...)
        self.running = ""  # the scheduler's "running: ..." line once it has started
        self.publish_s: list[float] = []
        self.gather_s: list[float] = []
        self.warnings: list[str] = []

    def poll(self) -> None:
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            handle.seek(self.offset)
            text = handle.read()
            self.offset = handle.tell()
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            if "INFO: cycle " in line:
                match = self.CYCLE.search(line)
                reason = match.group(1) if match else line.split("INFO: cycle ", 1)[1].split(":", 1)[0]
                self.publishes[reason] = self.publishes.get(reason, 0) + 1
                if reason == "gather":
                    self.cycles += 1
                    if match:
                        self.publish_s.append(float(match.group(2)))
            elif "INFO: gathered " in line:
                match = self.GATHERED.search(line)
                if match:
                    self.gather_s.append(float(match.group(1)))
            elif "INFO: running:" in line:
                self.running = line.split("INFO: running:", 1)[1].strip()
            elif ": WARNING: " in line or ": ERROR: " in line:
                self.warnings.append(line.split(": ", 1)[-1])

    def tail(self) -> str:
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            return handle.read()[-3000:]


# -- one site size ------------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    hosts: int
    setup_s: float
    startup_s: float
    startup_cpu_s: float
    warmup_cpu_s: float
    window_s: float
    cycles: int
    cycles_wanted: int
    cpu_s: float
    children_cpu_s: float
    startup_hwm_mb: float
    steady_hwm_mb: Optional[float]
    final_rss_mb: float
    load_mean: float
    load_max: float
    load_end: tuple[float, float, float]
    publish_s: float
    gather_s: float
    writer_cpu_s: float
    writer_wall_s: float
    changes: list[str]
    warnings: list[str]
    jobs: str
    publishes: dict[str, int]
    ldif_mb: float
    nodes_xml_mb: float
    subclusters: int
    entries: int

    @property
    def cpu_per_hour(self) -> float:
        return (self.cpu_s + self.children_cpu_s) / self.window_s * 3600 if self.window_s > 0 else float("nan")

    @property
    def peak_mb(self) -> float:
        return max(self.startup_hwm_mb, self.steady_hwm_mb or 0.0)


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen, watcher: LogWatcher, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        watcher.poll()
        if condition():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"glueinfo run exited {proc.returncode} while waiting for {what}:\n{watcher.tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} within {timeout_s:g} s:\n{watcher.tail()}")
        time.sleep(0.1)


def stop(proc: Optional[subprocess.Popen]) -> None:
    """SIGTERM the daemon by its PID, SIGKILL it if it has not gone after 15 s."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def measure(hosts: int, minutes: float, interval: float, local: bool, verbose: bool, serve: bool = False) -> Result:
    workdir = tempfile.mkdtemp(prefix=f"glueinfo-incremental-{hosts}-")
    proc: Optional[subprocess.Popen] = None
    try:
        began = time.monotonic()
        site, config = make_site(workdir, hosts, interval, local, serve)
        setup_s = time.monotonic() - began
        log_path = os.path.join(workdir, "run.log")
        with open(log_path, "wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "run", "--config", config],
                                    env=child_env(), stdout=log, stderr=log, cwd=workdir, stdin=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=die_with_parent)
        watcher = LogWatcher(log_path)
        if verbose:
            print(f"    {hosts} hosts: spool written in {setup_s:.1f} s; glueinfo run is PID {proc.pid}, in {workdir}", flush=True)

        # Start-up: the scheduler starts with a gather due at once; that cold gather reads every file.
        wait_for(lambda: bool(watcher.running), proc, watcher, "scheduler start", 120 + hosts / 100)
        phase = time.monotonic()  # gathers are due at phase + k * interval
        wait_for(lambda: watcher.cycles >= 1, proc, watcher, "first cycle", 300 + hosts / 20)
        startup_s = time.monotonic() - started
        startup_cpu = sum(cpu_seconds(proc.pid))

        def next_tick(after: float) -> float:  # half-way between two gathers
            k = max(0, int((after - phase) / interval - 0.5) + 1)
            return phase + (k + 0.5) * interval

        loads: list[float] = []
        sampling = [False, 0.0]  # sampling the load average?, when last

        def sleep_until(moment: float) -> None:
            while True:
                watcher.poll()
                if proc.poll() is not None:
                    raise RuntimeError(f"glueinfo run exited {proc.returncode}:\n{watcher.tail()}")
                now = time.monotonic()
                if sampling[0] and now - sampling[1] >= 1.0:
                    loads.append(load_average()[0])
                    sampling[1] = now
                left = moment - now
                if left <= 0:
                    return
                time.sleep(min(0.2, left))

        # Warm-up: one rewrite of every file and the gather that reads it.
        sleep_until(next_tick(time.monotonic()))
        site.write_all()
        after_write = watcher.cycles
        wait_for(lambda: watcher.cycles > after_write, proc, watcher, "warm-up cycle", 3 * interval + 60)
        warmup_cpu = sum(cpu_seconds(proc.pid)) - startup_cpu
        writer_cpu, writer_wall = [site.last_write_cpu_s], [site.last_write_wall_s]

        # The window: `cycles_wanted` whole cycles, each preceded by a rewrite of every file.
        cycles_wanted = max(1, round(minutes * 60 / interval))
        schedule = change_schedule(changes_due(hosts, minutes), cycles_wanted)
        startup_hwm = status_kb(proc.pid, "VmHWM") / 1024
        reset = reset_peak_rss(proc.pid)
        first_cycle, first_publish = watcher.cycles, len(watcher.publish_s)
        first_gather, first_warning = len(watcher.gather_s), len(watcher.warnings)
        first_publishes = dict(watcher.publishes)
        window_start = time.monotonic()
        cpu_start, children_start = cpu_seconds(proc.pid)
        sampling[0] = True
        give_up = window_start + (cycles_wanted + 2) * interval
        for tick in range(1, cycles_wanted + 1):
            sleep_until(next_tick(time.monotonic()))
            site.change_hardware(schedule.get(tick, 0))
            site.write_all()
            writer_cpu.append(site.last_write_cpu_s)
            writer_wall.append(site.last_write_wall_s)
        while watcher.cycles < first_cycle + cycles_wanted and time.monotonic() < give_up:
            sleep_until(time.monotonic() + 0.2)
        cpu_end, children_end = cpu_seconds(proc.pid)
        window_s = time.monotonic() - window_start
        steady_hwm = status_kb(proc.pid, "VmHWM") / 1024 if reset else None
        final_rss = status_kb(proc.pid, "VmRSS") / 1024
        load_end = load_average()
        watcher.poll()

        stop(proc)
        out = os.path.join(workdir, "out")
        with open(os.path.join(out, "glue.ldif"), encoding="utf-8") as handle:
            ldif = handle.read()
        return Result(
            hosts=hosts, setup_s=setup_s, startup_s=startup_s, startup_cpu_s=startup_cpu, warmup_cpu_s=warmup_cpu,
            window_s=window_s, cycles=watcher.cycles - first_cycle, cycles_wanted=cycles_wanted,
            cpu_s=cpu_end - cpu_start, children_cpu_s=children_end - children_start,
            startup_hwm_mb=startup_hwm, steady_hwm_mb=steady_hwm, final_rss_mb=final_rss,
            load_mean=statistics.fmean(loads) if loads else load_end[0], load_max=max(loads, default=load_end[0]),
            load_end=load_end,
            publish_s=statistics.median(watcher.publish_s[first_publish:] or [float("nan")]),
            gather_s=statistics.median(watcher.gather_s[first_gather:] or [float("nan")]),
            writer_cpu_s=statistics.median(writer_cpu), writer_wall_s=statistics.median(writer_wall),
            changes=site.changed, warnings=watcher.warnings[first_warning:], jobs=watcher.running,
            publishes={k: n - first_publishes.get(k, 0) for k, n in watcher.publishes.items() if n > first_publishes.get(k, 0)},
            ldif_mb=len(ldif.encode("utf-8")) / 1e6, nodes_xml_mb=os.path.getsize(os.path.join(out, "nodes.xml")) / 1e6,
            subclusters=ldif.count("\ndn: GlueSubClusterUniqueID="), entries=ldif.count("\ndn: ") + ldif.startswith("dn: "))
    finally:
        stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


HEADER = (f"  {'hosts':>6} {'window':>8} {'cycles':>6} {'CPU-s/h':>8} {'target':>10}  {'peak RSS start-up/steady':>24} "
          f"{'final RSS':>9}  {'load 1-min mean/max':>19}  {'gather+publish':>14}  verdict")


def report(r: Result) -> None:
    target_cpu, target_mb = TARGETS.get(r.hosts, (None, None))
    verdict = "-"
    if target_cpu is not None:
        ok = r.cpu_per_hour <= target_cpu and (target_mb is None or r.peak_mb <= target_mb)
        verdict = "met" if ok else "NOT met"
        if r.cycles < r.cycles_wanted:
            verdict += f" (only {r.cycles} of {r.cycles_wanted} cycles)"
    steady = f"{r.steady_hwm_mb:.0f}" if r.steady_hwm_mb is not None else "?"
    target = f"{target_cpu:g}" if target_cpu is not None else "-"
    if target_mb is not None:
        target += f"/{target_mb:g}MB"
    print(f"  {r.hosts:>6} {r.window_s:>7.0f}s {r.cycles:>6} {r.cpu_per_hour:>8.1f} {target:>10}  "
          f"{f'{r.startup_hwm_mb:.0f} / {steady} MB':>24} {f'{r.final_rss_mb:.0f} MB':>9}  "
          f"{f'{r.load_mean:.2f} / {r.load_max:.2f}':>19}  {f'{r.gather_s:.2f}+{r.publish_s:.2f} s':>14}  {verdict}", flush=True)
    print(f"         {r.cpu_s:.2f} CPU-s in {r.window_s:.0f} s ({r.children_cpu_s:.2f} s of it in children); "
          f"per gather cycle (and what else ran meanwhile) {(r.cpu_s + r.children_cpu_s) / max(1, r.cycles):.2f} CPU-s;\n"
          f"         start-up {r.startup_s:.1f} s / "
          f"{r.startup_cpu_s:.1f} CPU-s (interpreter, cold gather, first publish); warm-up cycle {r.warmup_cpu_s:.2f} CPU-s; "
          f"spool set up in {r.setup_s:.1f} s")
    print(f"         output: {r.entries} entries, {r.subclusters} SubClusters, LDIF {r.ldif_mb:.1f} MB, Node XML {r.nodes_xml_mb:.1f} MB; "
          f"load average at the end {r.load_end[0]:.2f} {r.load_end[1]:.2f} {r.load_end[2]:.2f}; writer (not counted): "
          f"{r.writer_cpu_s:.2f} CPU-s / {r.writer_wall_s:.2f} s per rewrite of every file")
    print(f"         daemon jobs: {r.jobs}; publishes in the window: "
          f"{', '.join(f'{n} after {reason}' for reason, n in sorted(r.publishes.items()))}")
    print(f"         hardware/OS changes ({len(r.changes)}): {'; '.join(r.changes[:4])}{' ...' if len(r.changes) > 4 else ''}")
    if r.warnings:
        print(f"         {len(r.warnings)} warnings from glueinfo run in the window, first: {r.warnings[0][:200]}")


# -- profile of one interval -----------------------------------------------------------------------

# (label, regular expression the file's path must match, function): the pipeline's stages, by cumulative time
STAGES = (
    ("Gatherer.gather (all of the gather)", r"gather/gatherer\.py$", "gather"),
    ("  spool source (own thread)", r"sources/spool\.py$", "gather"),
    ("    read files (read_capped)", r"core/files\.py$", "read_capped"),
    ("    parse Node XML (read_node)", r"sss/node_reader\.py$", "read_node"),
    ("  check_snapshot", r"gather/(gatherer|check)\.py$", "check_snapshot"),
    ("  merge", r"gather/(gatherer|merge)\.py$", "merge"),
    ("LRMS query (refresh_lrms)", r"site/assemble\.py$", "refresh_lrms"),
    ("Provider.publish (every publish)", r"run/provider\.py$", "publish"),
    ("  site_hosts (freshness, local merge)", r"run/provider\.py$", "site_hosts"),
    ("  assemble (hosts, aggregation, ids)", r"site/assemble\.py$", "assemble"),
    ("  build_site (aggregate+render+check)", r"(glue/build|site/assemble|gather/gatherer)\.py$", "build_site"),
    ("  render_site (render+check)", r"glue/build\.py$", "render_site"),
    ("    aggregate", r"site/aggregate\.py$", "aggregate"),
    ("    render (iter_glue13, incl. check)", r"glue/render13\.py$", "iter_glue13"),
    ("    schema check (TreeChecker)", r"glue/(build|schema/check)\.py$", "__call__"),
    ("  LDIF text (SiteBuild.ldif)", r"glue/build\.py$", "ldif"),
    ("  Node XML (NodeStore.refresh_once)", r"run/http\.py$", "refresh_once"),
    ("    Node elements (data_element)", r"sss/node_xml\.py$", "data_element"),
    ("  output files (OutputFiles.publish)", r"run/outputs\.py$", "publish"),
    ("  entries compared (_count_changes)", r"run/provider\.py$", "_count_changes"),
    ("  state saved (_save_state)", r"run/provider\.py$", "_save_state"),
    ("  state saved (save_state)", r"site/assemble\.py$", "save_state"),
    ("    HostSnapshot.to_dict", r"core/model\.py$", "to_dict"),
    ("    json.dumps", r"json/__init__\.py$", "dumps"),
    ("write_atomic (outputs + state files)", r"core/atomicwrite\.py$", "write_atomic"),
)


def find_gatherer(provider: Any) -> Any:
    """The provider's long-lived Gatherer (on the provider, or on its site assembler)."""
    for holder in (provider, getattr(provider, "assembler", None)):
        gatherer = getattr(holder, "gatherer", None)
        if gatherer is not None:
            return gatherer
    raise RuntimeError("cannot find the Gatherer of glueinfo.run.provider.Provider: update find_gatherer()")


def profile(hosts: int, interval: float, top: int, clock: str = "cpu") -> None:
    """cProfile of one steady interval's jobs (gather, LRMS query, each with its publish) of the daemon's Provider, in this process.

    ``clock``: "cpu" (each thread's CPU time: what the daemon is charged for,
    but a system call per profiler event makes the cycle about four times
    slower and inflates the functions called most) or "wall" (the
    profiler's cheap default; counts waiting too: fsync, the disk).  The
    spool source runs in its own thread (as in the daemon) and is profiled
    there; its functions are added to the main thread's.  Shares are of the
    whole cycle: run_job, plus the spool thread under the CPU clock (under
    the wall clock the main thread's Gatherer.gather already waits for it).
    """
    import cProfile
    import logging
    import pstats

    from glueinfo.core.config import load
    from glueinfo.run.gc_policy import CollectorPolicy
    from glueinfo.run.malloc_policy import use_one_arena
    from glueinfo.run.provider import Provider

    logging.basicConfig(level=logging.WARNING, format="glueinfo: %(levelname)s: %(message)s")
    workdir = tempfile.mkdtemp(prefix=f"glueinfo-incremental-profile-{hosts}-")
    try:
        site, config_path = make_site(workdir, hosts, interval, local=False)
        use_one_arena(os.environ)  # as `glueinfo run` does
        provider = Provider(load(config_path), collector_policy=CollectorPolicy(time.time))  # as `glueinfo run` makes it
        thread_profiles: list[cProfile.Profile] = []

        def make_profiler() -> cProfile.Profile:
            return cProfile.Profile(time.thread_time) if clock == "cpu" else cProfile.Profile()
        profiling = [False]

        def profiled(gather: Callable[[Any], Any]) -> Callable[[Any], Any]:
            def run(ctx: Any) -> Any:
                if not profiling[0]:
                    return gather(ctx)
                profiler = make_profiler()
                thread_profiles.append(profiler)
                return profiler.runcall(gather, ctx)
            return run

        gatherer = find_gatherer(provider)
        gatherer.sources = [dataclasses.replace(s, gather=profiled(s.gather)) for s in gatherer.sources]
        # One interval's jobs, as the daemon runs them (local collectors off): the gather and, where
        # the provider has one, the LRMS query; each is followed by a publish.
        jobs = [name for name in ("gather", "lrms") if hasattr(provider, f"job_{name}")]

        def interval_jobs() -> None:
            for name in jobs:
                provider.run_job(name)

        provider.restore()  # as `glueinfo run` starts: takes the state directory
        cpu = time.process_time()
        interval_jobs()
        print(f"profile of glueinfo run's jobs of one interval ({' + '.join(jobs)}), {hosts} hosts from a spool ({workdir}):")
        print(f"  cold interval (every file read, every state file written): {time.process_time() - cpu:.2f} CPU-s")
        for _ in range(2):  # steady intervals, unprofiled
            site.write_all()
            cpu, wall = time.process_time(), time.perf_counter()
            interval_jobs()
            print(f"  steady interval, unprofiled: {time.process_time() - cpu:.2f} CPU-s, {time.perf_counter() - wall:.2f} s")
        site.change_hardware(1)
        site.write_all()
        profiler = make_profiler()
        profiling[0] = True
        cpu, wall = time.process_time(), time.perf_counter()
        profiler.runcall(interval_jobs)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        profiling[0] = False
        if hasattr(provider, "close"):
            provider.close()
        stats = pstats.Stats(profiler)
        for extra in thread_profiles:
            stats.add(extra)
        def cumulative(pattern: str, name: str) -> Optional[float]:
            found = [ct for (path, _, func), (_, _, _, ct, _) in stats.stats.items()  # type: ignore[attr-defined]
                     if func == name and re.search(pattern, path.replace(os.sep, "/"))]
            return max(found) if found else None

        total = cumulative(r"run/provider\.py$", "run_job") or float("nan")
        if clock == "cpu":
            total += cumulative(r"sources/spool\.py$", "gather") or 0.0
        print(f"  profiled steady interval: {cpu:.2f} CPU-s ({wall:.2f} s) with the profiler's overhead ({clock} clock); "
              f"change seen in it: {site.changed[-1]}; load average {load_average()[0]:.2f}")
        unit = "thread-CPU-s" if clock == "cpu" else "s"
        print(f"  by stage (cumulative {unit} under the profiler, share of the interval's work; indented: part of the line above):")
        for label, pattern, name in STAGES:
            seconds = cumulative(pattern, name)
            if seconds is not None:
                print(f"    {label:<46} {seconds:7.3f} {unit:<12} {100 * seconds / total:5.1f}%")
        stats.sort_stats("cumulative")
        print(f"  top {top} functions by cumulative time:")
        stats.print_stats(top)
        stats.sort_stats("tottime")
        print(f"  top {top} functions by own time:")
        stats.print_stats(top)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def quick(hosts: int, interval: float, intervals: int) -> None:
    """In this process, no daemon: ``intervals`` steady intervals' jobs (gather + lrms, each with its
    publish) of the daemon's Provider after one cold and one warm-up interval; prints each one's
    CPU-s (this process's, the spool thread included), the median scaled to CPU-s per hour at
    ``interval``, and RSS.  A figure to iterate with, not the issue's measurement."""
    import logging

    from glueinfo.core.config import load
    from glueinfo.run.gc_policy import CollectorPolicy
    from glueinfo.run.malloc_policy import use_one_arena
    from glueinfo.run.provider import Provider

    logging.basicConfig(level=logging.WARNING, format="glueinfo: %(levelname)s: %(message)s")
    workdir = tempfile.mkdtemp(prefix=f"glueinfo-incremental-quick-{hosts}-")
    try:
        site, config_path = make_site(workdir, hosts, interval, local=False)
        use_one_arena(os.environ)  # as `glueinfo run` does
        provider = Provider(load(config_path), collector_policy=CollectorPolicy(time.time))  # as `glueinfo run` makes it
        jobs = [name for name in ("gather", "lrms") if hasattr(provider, f"job_{name}")]
        provider.restore()
        costs: list[float] = []
        schedule = change_schedule(changes_due(hosts, intervals * interval / 60), intervals)
        for index in range(intervals + 2):
            if index:
                site.change_hardware(schedule.get(index - 1, 0) if index > 1 else 0)
                site.write_all()
            cpu = time.process_time()
            for name in jobs:
                provider.run_job(name)
            if index > 1:  # the cold interval and the warm-up are left out
                costs.append(time.process_time() - cpu)
        provider.close()
        per_interval = statistics.median(costs)
        rss, peak = status_kb(os.getpid(), "VmRSS") / 1024, status_kb(os.getpid(), "VmHWM") / 1024
        print(f"quick: {hosts} hosts, {intervals} steady intervals in-process: CPU-s per interval "
              f"{' '.join(f'{c:.3f}' for c in costs)}; median {per_interval:.3f} -> {per_interval * 3600 / interval:.1f} CPU-s/h "
              f"at {interval:g} s; RSS {rss:.0f} MB, peak {peak:.0f} MB; "
              f"writer {site.last_write_cpu_s:.2f} CPU-s per rewrite (not counted)", flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- main ---------------------------------------------------------------------------------------


def cold(hosts: int) -> int:
    """The cold build: benchmarks/glue.py's scale benchmark (aggregate + render + schema check in a fresh process)."""
    import glue

    print(f"cold build of {hosts} hosts (benchmarks/glue.py scale {hosts}: fresh process; snapshots built untimed):", flush=True)
    (result,) = glue.bench_scale([hosts])
    ok = result["aggregate_render_check_s"] <= COLD_TARGET_S and result["peak_rss_mb"] <= COLD_TARGET_MB
    print(f"  aggregate+render+check: {result['aggregate_render_check_s']} s wall, {result['cpu_aggregate_render_check_s']} CPU-s; "
          f"peak RSS {result['peak_rss_mb']} MB; load average {result['load_average']}; "
          f"target <= {COLD_TARGET_S:g} s and <= {COLD_TARGET_MB:g} MB: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--hosts", action="append", metavar="N[,N...]", help="site size(s), repeatable or a comma list (default 1000)")
    parser.add_argument("--minutes", type=float, default=5.0, help="measured window per size, in minutes (default 5)")
    parser.add_argument("--interval", type=float, default=60.0, help="gather interval and workers' rewrite period, s (default 60)")
    parser.add_argument("--local", action="store_true", help="also run this head node's collectors ([sources] enabled = local, spool)")
    parser.add_argument("--serve", action="store_true", help="also answer HTTP ([run] serve = yes): the http output's memory")
    parser.add_argument("--cold", type=int, metavar="N", help="only the cold build of N hosts (aggregate + render + schema check)")
    parser.add_argument("--profile", action="store_true", help="only profile one steady interval's jobs, in-process (first --hosts size)")
    parser.add_argument("--quick", type=int, nargs="?", const=5, metavar="INTERVALS",
                        help="only run INTERVALS (default 5) steady intervals in-process and print their CPU-s (each --hosts size)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="--profile's clock: each thread's CPU time (default; slow) or wall time (counts I/O waits)")
    parser.add_argument("--top", type=int, default=15, help="functions listed by --profile (default 15)")
    parser.add_argument("-v", "--verbose", action="store_true", help="say where each run is")
    args = parser.parse_args()
    sizes = [int(n) for item in (args.hosts or ["1000"]) for n in item.split(",") if n.strip()]
    if args.minutes < 5 or args.interval != 60:
        print(f"note: the issue's figures are for >= 5 minutes at a 60 s interval; this is {args.minutes:g} min at {args.interval:g} s",
              file=sys.stderr)

    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # SIGTERM too: the finally clauses stop the daemon and remove the directory

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)  # even when started with SIGINT ignored (a background job)
    try:
        if args.cold:
            return cold(args.cold)
        if args.profile:
            profile(sizes[0], args.interval, args.top, args.clock)
            return 0
        if args.quick:
            for hosts in sizes:
                quick(hosts, args.interval, args.quick)
            return 0
        print(f"glueinfo run on a spool site: {args.minutes:g} min window at a {args.interval:g} s interval, every host rewritten "
              f"each interval, {CHANGES_PER_HOUR:.0%} of hosts changing hardware/OS per hour; "
              f"{'local collectors on' if args.local else 'local collectors off'}; {'HTTP on' if args.serve else 'no HTTP'}; "
              f"{os.cpu_count()} CPUs; "
              f"load average now {' '.join(f'{x:.2f}' for x in load_average())}; a 10-million-step Python loop takes "
              f"{loop_seconds():.2f} CPU-s (the writer's CPU per rewrite, below, is the yardstick during each run)", flush=True)
        print(HEADER, flush=True)
        failed = False
        for hosts in sizes:
            result = measure(hosts, args.minutes, args.interval, args.local, args.verbose, args.serve)
            report(result)
            target_cpu, target_mb = TARGETS.get(hosts, (None, None))
            if target_cpu is not None and (result.cpu_per_hour > target_cpu or (target_mb is not None and result.peak_mb > target_mb)):
                failed = True
        return 1 if failed else 0
    except KeyboardInterrupt:
        print("interrupted: daemon stopped, temporary directory removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
