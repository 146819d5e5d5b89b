#!/usr/bin/env python3
"""What the progress line costs `glueinfo ldif` (issue 29 item 6).  Not a test: it prints figures.

    python3 benchmarks/progress_line.py                  # 20,000 synthetic hosts, 4 runs each way
    python3 benchmarks/progress_line.py --hosts 5000 --runs 6

`glueinfo ldif --snapshots` of a synthetic site (tests/harness/glue_sites.py),
stdout to a file, run alternately with stderr on a pseudo-terminal (the
progress line drawn every half second) and in a pipe (no progress at all, as
under BDII).  Printed: each run's wall time, both medians, and the stages the
terminal saw.  Target: no difference beyond the machine's noise.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "harness"))


def on_terminal(argv: list[str], out: Path) -> tuple[float, bytes]:
    master, slave = pty.openpty()
    began = time.perf_counter()
    with open(out, "wb") as handle:
        process = subprocess.Popen(argv, stdout=handle, stderr=slave, stdin=subprocess.DEVNULL, cwd=REPO)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    process.wait()
    os.close(master)
    return time.perf_counter() - began, seen


def in_pipe(argv: list[str], out: Path) -> float:
    began = time.perf_counter()
    with open(out, "wb") as handle:
        subprocess.run(argv, stdout=handle, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=REPO, check=False)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=4)
    args = parser.parse_args()
    from glue_sites import synthetic_site

    with tempfile.TemporaryDirectory(prefix="glueinfo-progress-") as work:
        tmp = Path(work)
        (tmp / "hosts.json").write_text(json.dumps([h.to_dict() for h in synthetic_site(args.hosts)]))
        (tmp / "glueinfo.conf").write_text("[site]\nid = EX-SITE\n[glue]\nversions = 1.3, 2.0\n"
                                           "[ce:long]\nhost = ce01.example.org\naccess = VO:atlas\n[run]\nstate_dir =\n")
        argv = [sys.executable, "-m", "glueinfo.cli", "ldif", "--config", str(tmp / "glueinfo.conf"),
                "--snapshots", str(tmp / "hosts.json")]
        terminal, pipe, stages = [], [], set()
        for _ in range(args.runs):
            seconds, seen = on_terminal(argv, tmp / "out.ldif")
            terminal.append(seconds)
            stages.update(m.decode() for m in re.findall(rb"glueinfo: ldif: ([^.\r]+)\.\.\.", seen))
            pipe.append(in_pipe(argv, tmp / "out.ldif"))
    print(f"glueinfo ldif, {args.hosts:,} hosts, {args.runs} runs each")
    print(f"  stderr a terminal: {', '.join(f'{s:.2f}' for s in terminal)} s (median {statistics.median(terminal):.2f})")
    print(f"  stderr a pipe:     {', '.join(f'{s:.2f}' for s in pipe)} s (median {statistics.median(pipe):.2f})")
    print(f"  stages shown on the terminal: {', '.join(sorted(stages)) or 'none'}")


if __name__ == "__main__":
    main()
