#!/usr/bin/env python3
"""Idle cost of `glueinfo run` (issue 6).  Not a test: it prints figures.

    python3 benchmarks/idle.py                      # both sites, 30 s interval, 300 s each
    python3 benchmarks/idle.py --duration 60        # shorter runs
    python3 benchmarks/idle.py --site 1 --site 1000 --interval 30 --duration 300

Sites:
  1     this host only ([sources] enabled = local): fast collectors, LRMS
        (fork) and a publish of LDIF + Node XML + state every interval.
  1000  this host plus 1,000 workers in a spool directory (Node XML files of
        tests/harness/glue_sites.synthetic_site, five hardware classes, fresh for the
        whole run): a gather of the spool and a publish every interval.

Each site runs `glueinfo run` as a child process with every interval
(fast, gather) set to --interval, outputs in a temporary directory.  After
it has written its first outputs (start-up cost reported apart), CPU time
(utime + stime of /proc/PID/stat) is taken over --duration seconds and
scaled to CPU seconds per hour; resident memory is sampled every second
(VmRSS) and the peak read at the end (VmHWM).

Targets (1-host site): < 10 CPU-seconds per hour, < 80 MB RSS.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "harness"))
sys.path.insert(0, ROOT)

CPU_TARGET_S_PER_HOUR = 10.0
RSS_TARGET_MB = 80.0
TICKS = os.sysconf("SC_CLK_TCK")


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed glueinfo is byte-compiled
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)


def status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def write_spool(directory: str, hosts: int) -> None:
    from glue_sites import synthetic_site

    from glueinfo.sss.node_settings import NodeSettings
    from glueinfo.sss.node_xml import render_node

    now = time.time()
    settings = NodeSettings(stale_after_s=86400)
    for snapshot in synthetic_site(hosts):
        snapshot.collected_at = now
        with open(os.path.join(directory, snapshot.hostname + ".xml"), "wb") as handle:
            handle.write(render_node(snapshot, now, settings))


def site_config(workdir: str, hosts: int, interval: float) -> str:
    lines = [
        "[run]",
        f"fast_interval = {interval:g}",
        f"gather_interval = {interval:g}",
        "slow_interval = 3600",
        f"ldif_file = {workdir}/out/glue.ldif",
        f"node_xml_file = {workdir}/out/nodes.xml",
        f"state_dir = {workdir}/state",
        "[node]",
        "stale_after = 86400",  # the spool's files stay fresh for the whole measurement
        "[sources]",
        "drop_after = 86400",
    ]
    if hosts > 1:
        spool = os.path.join(workdir, "spool")
        os.makedirs(spool)
        write_spool(spool, hosts - 1 if hosts > 1 else 0)
        lines += ["enabled = local, spool", f"spool_dir = {spool}"]
    path = os.path.join(workdir, "glueinfo.conf")
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    os.makedirs(os.path.join(workdir, "out"))
    return path


def measure(hosts: int, interval: float, duration: float) -> dict:
    workdir = tempfile.mkdtemp(prefix=f"glueinfo-idle-{hosts}-")
    try:
        config = site_config(workdir, hosts, interval)
        log_path = os.path.join(workdir, "run.log")
        with open(log_path, "wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "run", "--config", config],
                                    env=child_env(), stdout=log, stderr=log, cwd=workdir)
        try:
            outputs = [os.path.join(workdir, "out", name) for name in ("glue.ldif", "nodes.xml")]
            while not all(os.path.exists(p) for p in outputs):
                if proc.poll() is not None:
                    raise SystemExit(f"glueinfo run exited {proc.returncode}:\n{open(log_path).read()[-2000:]}")
                if time.monotonic() - started > 300:
                    raise SystemExit("no outputs within 300 s")
                time.sleep(0.2)
            if hosts > 1:  # the first gather (reading every spool file) is start-up too
                while "cycle gather" not in open(log_path).read():
                    time.sleep(0.2)
            startup_s = time.monotonic() - started
            startup_cpu = cpu_seconds(proc.pid)
            rss = []
            begin = time.monotonic()
            while time.monotonic() - begin < duration:
                if proc.poll() is not None:
                    raise SystemExit(f"glueinfo run exited {proc.returncode} during the measurement")
                rss.append(status_kb(proc.pid, "VmRSS") / 1024)
                time.sleep(1.0)
            elapsed = time.monotonic() - begin
            cpu = cpu_seconds(proc.pid) - startup_cpu
            hwm = status_kb(proc.pid, "VmHWM") / 1024
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        cycles = open(log_path).read().count("cycle ")
        return {"hosts": hosts, "interval_s": interval, "window_s": round(elapsed, 1), "startup_s": round(startup_s, 2),
                "startup_cpu_s": round(startup_cpu, 2), "cpu_s": round(cpu, 3), "cpu_s_per_hour": round(cpu / elapsed * 3600, 2),
                "rss_median_mb": round(statistics.median(rss), 1), "rss_max_mb": round(max(rss), 1), "hwm_mb": round(hwm, 1),
                "cycles_logged": cycles, "exit": proc.returncode}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=int, action="append", help="hosts in the site: 1 or more (default: 1 and 1000)")
    parser.add_argument("--interval", type=float, default=30.0, help="fast and gather interval, seconds (default 30)")
    parser.add_argument("--duration", type=float, default=300.0, help="measurement window per site, seconds (default 300)")
    args = parser.parse_args()
    print(f"glueinfo run idle cost: interval {args.interval:g} s, window {args.duration:g} s, {os.cpu_count()} CPUs")
    failed = False
    for hosts in args.site or [1, 1000]:
        result = measure(hosts, args.interval, args.duration)
        print(f"  {hosts:>5} host(s): {result['cpu_s_per_hour']:7.2f} CPU-s/hour ({result['cpu_s']} s in {result['window_s']} s, "
              f"{result['cycles_logged']} cycles logged), RSS median {result['rss_median_mb']} MB, max {result['rss_max_mb']} MB, "
              f"VmHWM {result['hwm_mb']} MB; start-up {result['startup_s']} s / {result['startup_cpu_s']} CPU-s; "
              f"SIGTERM exit {result['exit']}")
        if hosts == 1:
            ok = result["cpu_s_per_hour"] < CPU_TARGET_S_PER_HOUR and result["hwm_mb"] < RSS_TARGET_MB
            failed |= not ok
            print(f"        target < {CPU_TARGET_S_PER_HOUR:g} CPU-s/hour and < {RSS_TARGET_MB:g} MB: {'met' if ok else 'NOT met'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
