"""Real `glueinfo` processes for black-box tests: `serve` started on loopback
with a config the test writes, its port read from its log, stopped by PID;
and one-shot CLI runs with their exit code and output.

Used by the unit tests of `serve` and by the hostile-input suite
(tests/hostile/), which must behave the same against any version of the
code: only the CLI and HTTP are touched, never glueinfo's modules.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from paths import REPO


class Served:
    """A running `glueinfo serve` (or `run` with serve = yes) and its log."""

    def __init__(self, process: subprocess.Popen, port: int, log: Path, host: str = "127.0.0.1"):
        self.process, self.port, self.log, self.host = process, port, log, host

    def connect(self, timeout: float = 10.0, source: Optional[str] = None) -> socket.socket:
        """A new connection; `source` binds the client side to another loopback address (127.0.0.x)."""
        return socket.create_connection((self.host, self.port), timeout=timeout,
                                        source_address=(source, 0) if source else None)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def start_glueinfo(config: Path, log: Path, command: Sequence[str] = ("serve",), timeout: float = 60.0,
                   env: Optional[dict[str, str]] = None) -> Served:
    """Start `glueinfo COMMAND --config CONFIG` and wait for its 'serving http://HOST:PORT/' line."""
    with open(log, "wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", *command, "--config", str(config)],
                                   stdout=handle, stderr=handle, cwd=REPO, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = re.search(r"serving http://([0-9.]+):(\d+)/", log.read_text(errors="replace"))
        if match:
            return Served(process, int(match.group(2)), log, match.group(1))
        if process.poll() is not None:
            raise AssertionError(f"glueinfo {' '.join(command)} exited {process.returncode}: {log.read_text()}")
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"glueinfo {' '.join(command)} did not start: {log.read_text()}")


def stop_glueinfo(served: Served, timeout: float = 10.0) -> Optional[int]:
    """SIGTERM, then SIGKILL after `timeout`; the exit code (negative: killed by that signal)."""
    served.process.send_signal(signal.SIGTERM)
    try:
        served.process.wait(timeout)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait()
    return served.process.returncode


def run_glueinfo(*args: str, timeout: float = 120.0, env: Optional[dict[str, str]] = None,
                 cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """One CLI run: `glueinfo ARGS...`, text output captured, never raising on a non-zero exit."""
    return subprocess.run([sys.executable, "-m", "glueinfo.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or REPO, env={**os.environ, **(env or {})})
