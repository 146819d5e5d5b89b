"""Real Prometheus and node_exporter for the tests (Debian's ``prometheus`` and
``prometheus-node-exporter``), on loopback, without systemd, stopped by PID.

Each node_exporter listens on its own 127.0.0.x address and reads one recorded
host tree (``--path.procfs/--path.sysfs/--path.rootfs``), with only the
collectors glueinfo maps switched on (``--collector.disable-defaults``), the
cpu collector's ``cpu.info`` included.  One Prometheus scrapes them every
second, each target carrying a ``host`` label with its fixture's name (every
exporter on this machine reports this machine's nodename, so the tests name
hosts by target).  Everything lives in a temporary directory the caller gives;
:meth:`Rig.stop` stops every process this harness started, and is safe to
call twice.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from servers import ServerError, _stop, _tail, _wait_listening

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
PROMETHEUS = "/usr/bin/prometheus"
COLLECTORS = ("cpu", "meminfo", "loadavg", "stat", "filesystem", "netclass", "os", "uname")


def missing_tools() -> list[str]:
    """The binaries the rig needs that are not installed, each with its Debian package."""
    missing = []
    if not shutil.which(NODE_EXPORTER):
        missing.append(f"{NODE_EXPORTER} (Debian package prometheus-node-exporter)")
    if not shutil.which(PROMETHEUS):
        missing.append(f"{PROMETHEUS} (Debian package prometheus)")
    return missing


def _wait_address(address: str, port: int, process: subprocess.Popen, log: Path, timeout: float, what: str) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerError(f"{what} exited with status {process.returncode}:\n{_tail(log)}")
        try:
            with socket.create_connection((address, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise ServerError(f"{what} did not listen on {address}:{port} within {timeout:g} s:\n{_tail(log)}")


@dataclass
class Exporter:
    name: str  # the fixture's name, also the target's host label
    tree: Path
    address: str
    port: int
    process: Optional[subprocess.Popen] = None

    @property
    def target(self) -> str:
        return f"{self.address}:{self.port}"


@dataclass
class Rig:
    workdir: Path
    exporters: dict[str, Exporter] = field(default_factory=dict)
    prometheus: Optional[subprocess.Popen] = None
    prometheus_port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.prometheus_port}"

    def start_exporter(self, name: str, tree: Path, address: str, port: int) -> Exporter:
        log = self.workdir / f"node_exporter-{name}.log"
        args = [NODE_EXPORTER, f"--web.listen-address={address}:{port}", f"--path.procfs={tree}/proc",
                f"--path.sysfs={tree}/sys", f"--path.rootfs={tree}", "--collector.disable-defaults",
                *(f"--collector.{c}" for c in COLLECTORS), "--collector.cpu.info"]
        with open(log, "ab") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        exporter = Exporter(name, tree, address, port, process)
        self.exporters[name] = exporter
        _wait_address(address, port, process, log, 15, f"node_exporter for {name}")
        return exporter

    def start_prometheus(self, port: int, interval_s: float = 1.0) -> None:
        lines = ["global:", f"  scrape_interval: {interval_s:g}s", f"  scrape_timeout: {interval_s:g}s",
                 "scrape_configs:", "  - job_name: node", "    static_configs:"]
        for exporter in self.exporters.values():
            lines += [f"      - targets: ['{exporter.target}']", f"        labels: {{host: '{exporter.name}'}}"]
        config = self.workdir / "prometheus.yml"
        config.write_text("\n".join(lines) + "\n")
        log = self.workdir / "prometheus.log"
        with open(log, "ab") as out:
            self.prometheus = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir)
        self.prometheus_port = port
        _wait_listening(port, self.prometheus, log, 30, "prometheus")

    def query(self, promql: str) -> list[dict]:
        """An instant query's result vector, from the server's own API."""
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.load(answer)["data"]["result"]

    def up(self) -> dict[str, float]:
        """host label -> its target's ``up`` value, as Prometheus reports it now."""
        return {s["metric"].get("host", ""): float(s["value"][1]) for s in self.query('up{job="node"}')}

    def wait_scraped(self, timeout: float = 30.0) -> None:
        """Until every running exporter's target is up and its node series are in."""
        running = {n for n, e in self.exporters.items() if e.process is not None and e.process.poll() is None}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                up = self.up()
                loaded = {s["metric"].get("host", "") for s in self.query('node_uname_info{job="node"}')}
            except OSError:
                up, loaded = {}, set()
            if all(up.get(n) == 1 for n in running) and running <= loaded:
                return
            time.sleep(0.2)
        raise ServerError(f"Prometheus did not scrape every exporter within {timeout:g} s:\n{_tail(self.workdir / 'prometheus.log')}")

    def kill_exporter(self, name: str) -> None:
        """SIGKILL one exporter by its PID: a worker that dies."""
        process = self.exporters[name].process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)

    def stop(self) -> None:
        for exporter in self.exporters.values():
            _stop(exporter.process)
        _stop(self.prometheus)
