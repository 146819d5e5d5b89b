#!/usr/bin/env python3
"""How long a probe of this host takes.

1. In-process: median time of ``glueinfo.host.collect.probe(Config())`` (every
   built-in collector, plugin discovery, the isolated runner), after one
   warm-up call.  Target: at most 3 ms.
2. Fresh process: median wall time of ``glueinfo probe`` (the console script
   next to this interpreter, else ``python -m glueinfo.cli``), output to
   /dev/null.  Target: at most 120 ms.  The interpreter's own start-up
   (``python -c pass``) is measured alongside, since it is part of that figure
   and differs between a virtualenv and an interpreter whose site-packages runs
   .pth start-up hooks.
3. Fresh process: a one-host ``glueinfo ldif`` (this host, the fork CE, the
   GLUE 1.3 and GLUE 2 trees checked against the installed schema), beside
   ``glueinfo probe``; the fresh processes of 2 and 3 take turns, one run
   each per round, so that others' work on the machine stretches them alike.  Targets (issue 24): ``glueinfo probe`` at most 3x
   ``python -c pass``; the one-host ``glueinfo ldif`` at most 1.5x
   ``glueinfo probe``: a command imports only what it runs.  ``python -c "import psutil"`` is
   measured beside them: the floor of any probe that reads the host through psutil (the
   collectors' chosen library), and so of the first ratio.

Usage: python3 benchmarks/probe.py [--runs N] [--process-runs N] [--json]
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

IN_PROCESS_TARGET_MS = 3.0
FRESH_PROCESS_TARGET_MS = 120.0


def glueinfo_command() -> list[str]:
    script = shutil.which("glueinfo", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "glueinfo.cli"]


def run_ms(command: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) milliseconds of each run.  CPU time shows what
    the process itself costs when other work on the machine stretches wall time."""
    (walls, cpus), = interleaved_ms([command], runs)
    return walls, cpus


def interleaved_ms(commands: list[list[str]], runs: int) -> list[tuple[list[float], list[float]]]:
    """run_ms of several commands, one run of each in turn ``runs`` times: a change in the
    machine's load (other people's tests) then stretches all of them alike, not only the one
    measured at the time, and the ratios between them hold."""
    # Bytecode caches as an installed glueinfo has them (pip writes them; a
    # PYTHONDONTWRITEBYTECODE in the caller's environment would make every run recompile).
    env = {k: v for k, v in os.environ.items() if k not in ("GLUEINFO_CONFIG", "PYTHONDONTWRITEBYTECODE")}
    results: list[tuple[list[float], list[float]]] = [([], []) for _ in commands]
    for _ in range(runs):
        for command, (walls, cpus) in zip(commands, results, strict=True):
            start = time.perf_counter()
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            _pid, status, usage = os.wait4(child.pid, 0)
            walls.append((time.perf_counter() - start) * 1000)
            child.returncode = os.waitstatus_to_exitcode(status)
            if child.returncode != 0:
                raise SystemExit(f"{' '.join(command)} exited {child.returncode}")
            cpus.append((usage.ru_utime + usage.ru_stime) * 1000)
    return results


def in_process_ms(runs: int) -> tuple[list[float], dict[str, float]]:
    from glueinfo.core.config import Config
    from glueinfo.host.collect import probe

    snapshot = probe(Config())  # warm-up: imports, first reads
    times = []
    per_collector: dict[str, list[float]] = {r.name: [] for r in snapshot.collectors}
    for _ in range(runs):
        start = time.perf_counter()
        snapshot = probe(Config())
        times.append((time.perf_counter() - start) * 1000)
        for result in snapshot.collectors:
            per_collector[result.name].append(result.duration_s * 1000)
    failed = [r.name for r in snapshot.collectors if not r.success]
    if failed:
        raise SystemExit(f"probe: collectors failed: {', '.join(failed)}")
    return times, {name: statistics.median(values) for name, values in per_collector.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="in-process probes (default 300)")
    parser.add_argument("--process-runs", type=int, default=30, help="fresh processes (default 30)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    probe_times, collectors = in_process_ms(args.runs)
    command = glueinfo_command()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="glueinfo-probe-bench-") as workdir:
        one_host = os.path.join(workdir, "glueinfo.conf")
        with open(one_host, "w", encoding="utf-8") as handle:
            handle.write(f"[site]\nid = BENCH\n[run]\nstate_dir = {workdir}/state\n")
        # Warm the page cache, and the schema cache as an installed glueinfo has it after its first ldif.
        interleaved_ms([command + ["probe"], command + ["ldif", "--config", one_host]], 2)
        ((process_times, process_cpu), (python_times, python_cpu), (bare_times, _bare_cpu),
         (ldif_times, ldif_cpu), (psutil_times, _psutil_cpu)) = interleaved_ms(
            [command + ["probe"], [sys.executable, "-c", "pass"], [sys.executable, "-I", "-S", "-c", "pass"],
             command + ["ldif", "--config", one_host], [sys.executable, "-c", "import psutil"]], args.process_runs)

    figures = {
        "in_process_median_ms": round(statistics.median(probe_times), 3),
        "in_process_min_ms": round(min(probe_times), 3),
        "in_process_target_ms": IN_PROCESS_TARGET_MS,
        "collector_median_ms": {name: round(ms, 3) for name, ms in collectors.items()},
        "fresh_process_median_ms": round(statistics.median(process_times), 1),
        "fresh_process_min_ms": round(min(process_times), 1),
        "fresh_process_cpu_median_ms": round(statistics.median(process_cpu), 1),
        "fresh_process_target_ms": FRESH_PROCESS_TARGET_MS,
        "python_startup_median_ms": round(statistics.median(python_times), 1),
        "python_startup_cpu_median_ms": round(statistics.median(python_cpu), 1),
        "python_bare_startup_median_ms": round(statistics.median(bare_times), 1),
        "python_import_psutil_median_ms": round(statistics.median(psutil_times), 1),
        "psutil_over_python": round(statistics.median(psutil_times) / statistics.median(python_times), 2),
        "ldif_one_host_median_ms": round(statistics.median(ldif_times), 1),
        "ldif_one_host_cpu_median_ms": round(statistics.median(ldif_cpu), 1),
        "probe_over_python": round(statistics.median(process_times) / statistics.median(python_times), 2),
        "ldif_over_probe": round(statistics.median(ldif_times) / statistics.median(process_times), 2),
        "probe_over_python_cpu": round(statistics.median(process_cpu) / statistics.median(python_cpu), 2),
        "ldif_over_probe_cpu": round(statistics.median(ldif_cpu) / statistics.median(process_cpu), 2),
        "command": " ".join(command + ["probe"]),
        "python": sys.executable,
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    ok = lambda value, target: "ok" if value <= target else "OVER TARGET"  # noqa: E731
    print(f"in-process probe : median {figures['in_process_median_ms']:.3f} ms, min {figures['in_process_min_ms']:.3f} ms "
          f"over {args.runs} runs (target <= {IN_PROCESS_TARGET_MS:g} ms: "
          f"{ok(figures['in_process_median_ms'], IN_PROCESS_TARGET_MS)})")
    print("  per collector  : " + ", ".join(f"{n} {ms:.3f}" for n, ms in figures["collector_median_ms"].items()) + " (ms, median)")
    print(f"fresh process    : median {figures['fresh_process_median_ms']:.1f} ms, min {figures['fresh_process_min_ms']:.1f} ms "
          f"over {args.process_runs} runs of `{figures['command']}` (target <= {FRESH_PROCESS_TARGET_MS:g} ms: "
          f"{ok(figures['fresh_process_median_ms'], FRESH_PROCESS_TARGET_MS)}); CPU time median "
          f"{figures['fresh_process_cpu_median_ms']:.1f} ms")
    print(f"  python start-up: `python -c pass` median {figures['python_startup_median_ms']:.1f} ms "
          f"(CPU {figures['python_startup_cpu_median_ms']:.1f} ms), "
          f"`python -I -S -c pass` {figures['python_bare_startup_median_ms']:.1f} ms")
    print(f"  psutil floor   : `python -c \"import psutil\"` median {figures['python_import_psutil_median_ms']:.1f} ms, "
          f"{figures['psutil_over_python']:.2f}x `python -c pass`: no probe through psutil starts in less")
    print(f"one-host ldif    : median {figures['ldif_one_host_median_ms']:.1f} ms (CPU {figures['ldif_one_host_cpu_median_ms']:.1f} ms)")
    print(f"  ratios         : probe / python -c pass {figures['probe_over_python']:.2f}x (target <= 3x: "
          f"{ok(figures['probe_over_python'], 3.0)}); ldif / probe {figures['ldif_over_probe']:.2f}x (target <= 1.5x: "
          f"{ok(figures['ldif_over_probe'], 1.5)}); in CPU time {figures['probe_over_python_cpu']:.2f}x and "
          f"{figures['ldif_over_probe_cpu']:.2f}x")
    print(f"  load average   : {' '.join(f'{x:.2f}' for x in os.getloadavg())} (others' work stretches wall times)")
    if editable_install():
        print("  NOTE           : glueinfo is an editable install here: its finder (a .pth file) is imported by every "
              "start of this interpreter, `python -c pass` included (about 10 ms), which flatters probe / python -c pass; "
              "the issue's ratio is for a regular install (pip install ., no -e): measure there")
    return 0


def editable_install() -> bool:
    """Whether this interpreter loads an editable install's finder at start (setuptools' __editable__ .pth)."""
    import site

    directories = [*site.getsitepackages(), site.getusersitepackages()]
    return any(name.startswith("__editable__") and name.endswith(".pth")
               for directory in directories if os.path.isdir(directory) for name in os.listdir(directory))


if __name__ == "__main__":
    sys.exit(main())
