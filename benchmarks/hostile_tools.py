#!/usr/bin/env python3
"""A batch tool printing 200 MB of garbage (issue 26, finding 2).  Not a test: it prints figures.

    python3 benchmarks/hostile_tools.py                     # every plugin, random and text garbage, the daemon
    python3 benchmarks/hostile_tools.py --lrms slurm --garbage random --no-daemon
    python3 benchmarks/hostile_tools.py --repo /tmp/old     # the same against another checkout (before/after)

One-shot: for each LRMS plugin (slurm, pbs, sge, lsf, htcondor) a fake tool,
put under every command name the plugin runs in the CE's `*_bin_dir`, prints
200 MB (200 blocks of 1,000,000 bytes: random bytes, or printable text lines)
and exits.  `glueinfo ldif` runs as a child with `lrms_timeout = 5` and the
default caps; its wall time and its peak RSS (ru_maxrss from wait4: the
largest of glueinfo and the tools it reaped) are printed with the CE's
warning.

Daemon: `glueinfo run` with one Slurm CE whose tools fail at once (exit 1)
and lrms_interval = 2 s.  Its RSS after a few refreshes is the baseline; the
tools then print 200 MB of garbage for one refresh, and go back to failing.
Printed: the baseline, the peak during the garbage refresh (VmHWM), and the
RSS after that refresh and after the next ones.

Targets: peak RSS <= 400 MB and wall <= lrms_timeout + 2 s for every plugin;
the daemon's RSS back within 10% of its baseline after the refresh.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PLUGINS = {
    "slurm": ("slurm_bin_dir", ("sinfo", "scontrol", "squeue", "sacctmgr"), "short"),
    "pbs": ("pbs_bin_dir", ("qstat", "pbsnodes"), "workq"),
    "sge": ("sge_bin_dir", ("qstat", "qhost", "qconf"), "all.q"),
    "lsf": ("lsf_bin_dir", ("lsid", "bqueues", "bhosts", "bjobs"), "grid"),
    "htcondor": ("condor_bin_dir", ("condor_version", "condor_status", "condor_q"), "sched1.example.org"),
}
TIMEOUT_S = 5.0

# The fake tool: 200 MB of garbage when its mode file says so (or has no mode file), else a quick failure.
TOOL = """import os, sys
mode_file = {mode!r}
mode = open(mode_file).read().strip() if os.path.exists(mode_file) else {default!r}
if mode == "fail":
    sys.stderr.write("batch system down\\n")
    sys.exit(1)
if mode == "random":
    block = os.urandom(1_000_000)
else:
    line = b"garbage|not|a|record|0123456789abcdef|" * 3 + b"\\n"
    block = (line * (1_000_000 // len(line) + 1))[:1_000_000]
out = sys.stdout.buffer
try:
    for _ in range(200):
        out.write(block)
    out.flush()
except BrokenPipeError:
    pass
"""


def fake_tools(directory: Path, lrms: str, default_mode: str) -> Path:
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    script = bin_dir / "fake-tool"
    script.write_text(f"#!{sys.executable}\n" + TOOL.format(mode=str(directory / "mode"), default=default_mode))
    script.chmod(0o755)
    for tool in PLUGINS[lrms][1]:
        (bin_dir / tool).symlink_to(script.name)
    return bin_dir


def config(directory: Path, lrms: str, bin_dir: Path, extra: str = "") -> Path:
    key, _, queue = PLUGINS[lrms]
    path = directory / "glueinfo.conf"
    path.write_text(f"[site]\nid = BENCH-SITE\n[ce:grid]\nlrms = {lrms}\nqueue = {queue}\n{key} = {bin_dir}\n"
                    f"lrms_timeout = {TIMEOUT_S:g}\n[run]\nstate_dir = {directory / 'state'}\n{extra}")
    return path


def one_shot(repo: Path, lrms: str, garbage: str) -> tuple[float, float, str]:
    """(wall s, peak RSS MB, the CE's warning) of one `glueinfo ldif`."""
    with tempfile.TemporaryDirectory(prefix="hostile-tools-") as tmp:
        directory = Path(tmp)
        conf = config(directory, lrms, fake_tools(directory, lrms, garbage))
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "ldif", "--config", str(conf)], cwd=repo,
                                stdout=subprocess.DEVNULL, stderr=open(directory / "stderr", "wb"))
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = 0  # reaped by wait4
        stderr = (directory / "stderr").read_text(errors="replace")
        warning = next((line for line in stderr.splitlines() if "LRMS " in line), "(no LRMS warning)")
        return wall, usage.ru_maxrss / 1024, warning


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M).group(1)) / 1024  # type: ignore[union-attr]


def daemon(repo: Path) -> None:
    """Baseline, peak and after-refresh RSS of `glueinfo run` through one 200 MB garbage refresh."""
    with tempfile.TemporaryDirectory(prefix="hostile-daemon-") as tmp:
        directory = Path(tmp)
        mode = directory / "mode"
        mode.write_text("fail")
        conf = config(directory, "slurm", fake_tools(directory, "slurm", "fail"),
                      f"lrms_interval = 2\nfast_interval = 3600\nslow_interval = 3600\ngather_interval = 3600\n"
                      f"ldif_file = {directory / 'glue.ldif'}\nnode_xml_file = {directory / 'nodes.xml'}\n")
        log = directory / "log"
        proc = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "run", "--config", str(conf)], cwd=repo,
                                stdout=subprocess.DEVNULL, stderr=open(log, "wb"))

        def refreshes() -> int:
            return log.read_text(errors="replace").count("WARNING: LRMS slurm queue short")

        def wait_refreshes(count: int, limit_s: float = 120) -> None:
            deadline = time.monotonic() + limit_s
            while refreshes() < count:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"glueinfo run: no refresh {count}: {log.read_text()[-2000:]}")
                time.sleep(0.1)

        try:
            wait_refreshes(6)
            baseline = rss_mb(proc.pid)
            hwm_before = rss_mb(proc.pid, "VmHWM")
            seen = refreshes()
            mode.write_text("random")
            started = time.monotonic()
            wait_refreshes(seen + 1)
            took = time.monotonic() - started
            mode.write_text("fail")
            time.sleep(0.5)
            after = rss_mb(proc.pid)
            peak = rss_mb(proc.pid, "VmHWM")
            wait_refreshes(refreshes() + 3)
            later = rss_mb(proc.pid)
            flood_line = next((line for line in log.read_text(errors="replace").splitlines()
                               if "output passed" in line or "timed out" in line or "not text" in line), "(none)")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        print(f"daemon (slurm, lrms_interval 2 s): baseline {baseline:.0f} MB (peak so far {hwm_before:.0f} MB); "
              f"garbage refresh seen after {took:.1f} s, peak {peak:.0f} MB; after it {after:.0f} MB "
              f"({100 * (after - baseline) / baseline:+.0f}%), three refreshes later {later:.0f} MB "
              f"({100 * (later - baseline) / baseline:+.0f}%)")
        print(f"  {flood_line.strip()[:240]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lrms", action="append", choices=sorted(PLUGINS), help="a plugin (repeatable; default all)")
    parser.add_argument("--garbage", action="append", choices=("random", "text"), help="kind of garbage (default both)")
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose glueinfo runs (default: this one)")
    parser.add_argument("--no-daemon", action="store_true", help="skip the `glueinfo run` measurement")
    args = parser.parse_args()
    repo = args.repo.resolve()
    print(f"glueinfo from {repo}; lrms_timeout = {TIMEOUT_S:g} s; targets: peak RSS <= 400 MB, "
          f"wall <= {TIMEOUT_S + 2:g} s")
    for garbage in args.garbage or ("random", "text"):
        for lrms in args.lrms or sorted(PLUGINS):
            wall, peak, warning = one_shot(repo, lrms, garbage)
            verdict = "ok" if peak <= 400 and wall <= TIMEOUT_S + 2 else "MISSED"
            print(f"{lrms:9} {garbage:6} wall {wall:5.1f} s  peak RSS {peak:6.0f} MB  {verdict}")
            print(f"  {warning.strip()[:240]}")
    if not args.no_daemon:
        daemon(repo)


if __name__ == "__main__":
    main()
