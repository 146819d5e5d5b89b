#!/usr/bin/env python3
"""GET /node.xml from `glueinfo serve` against GET /metrics from Debian's
prometheus-node-exporter, same machine, one run.

Both servers are started here on free loopback ports (node_exporter with its
default collectors, glueinfo serve with the default config and a refresh
interval longer than the run).  The client is one keep-alive HTTP/1.1
connection per server (http.client; both servers keep the connection open),
requests strictly one after another; the two servers are measured in
alternating rounds so that machine noise hits both.  Reported: requests per
second and median / 95th percentile latency over all rounds.

Target: glueinfo at least 3x node_exporter's request rate.

Usage: python3 benchmarks/serve.py [--seconds S] [--rounds N] [--json]
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
TARGET_RATIO = 3.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(port: int, path: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", path)
            if connection.getresponse().status == 200:
                connection.close()
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"nothing answers on 127.0.0.1:{port}{path}")


def start_node_exporter(workdir: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(os.path.join(workdir, "node_exporter.log"), "wb")
    process = subprocess.Popen([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
    wait_http(port, "/metrics")
    return process, port


def glueinfo_command() -> list[str]:
    script = shutil.which("glueinfo", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "glueinfo.cli"]


def start_glueinfo(workdir: str) -> tuple[subprocess.Popen, int]:
    config = os.path.join(workdir, "glueinfo.conf")
    with open(config, "w") as handle:
        # its own state directory: never the machine's /var/lib/glueinfo/state
        handle.write(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n[run]\nstate_dir = {workdir}/state\n")
    log_path = os.path.join(workdir, "glueinfo.log")
    log = open(log_path, "wb")
    process = subprocess.Popen([*glueinfo_command(), "serve", "--config", config], stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(log_path, errors="replace") as handle:
            match = re.search(r"serving http://127\.0\.0\.1:(\d+)/", handle.read())
        if match:
            port = int(match.group(1))
            wait_http(port, "/node.xml")
            return process, port
        if process.poll() is not None:
            raise SystemExit(f"glueinfo serve exited {process.returncode}; see {log_path}")
        time.sleep(0.05)
    raise SystemExit("glueinfo serve did not start")


def measure(port: int, path: str, seconds: float) -> tuple[int, float, list[float], int]:
    """(requests, elapsed s, latencies ms, bytes of one answer) on one keep-alive connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path)  # warm-up; also the size of one answer
    response = connection.getresponse()
    size = len(response.read())
    if response.getheader("Connection", "").lower() == "close":
        raise SystemExit(f"{path} on port {port} closes the connection: no keep-alive")
    latencies = []
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        before = time.perf_counter()
        if before >= deadline:
            break
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"{path}: HTTP {response.status}")
        latencies.append((time.perf_counter() - before) * 1000)
    elapsed = time.perf_counter() - start
    connection.close()
    return len(latencies), elapsed, latencies, size


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per server per round (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if not os.access(NODE_EXPORTER, os.X_OK):
        raise SystemExit(f"{NODE_EXPORTER} is not installed (Debian package prometheus-node-exporter)")

    with tempfile.TemporaryDirectory(prefix="glueinfo-bench-") as workdir:
        exporter, exporter_port = start_node_exporter(workdir)
        glueinfo, glueinfo_port = start_glueinfo(workdir)
        totals = {"node_exporter": [0, 0.0, [], 0], "glueinfo": [0, 0.0, [], 0]}
        try:
            for _ in range(args.rounds):
                for name, port, path in (("node_exporter", exporter_port, "/metrics"), ("glueinfo", glueinfo_port, "/node.xml")):
                    count, elapsed, latencies, size = measure(port, path, args.seconds)
                    total = totals[name]
                    total[0] += count
                    total[1] += elapsed
                    total[2].extend(latencies)
                    total[3] = size
        finally:
            stop(glueinfo)
            stop(exporter)

    figures = {}
    for name, (count, elapsed, latencies, size) in totals.items():
        latencies.sort()
        figures[name] = {"requests": count, "requests_per_s": round(count / elapsed, 1),
                         "median_ms": round(statistics.median(latencies), 3),
                         "p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 3), "answer_bytes": size}
    ratio = figures["glueinfo"]["requests_per_s"] / figures["node_exporter"]["requests_per_s"]
    result = {"figures": figures, "ratio": round(ratio, 2), "target_ratio": TARGET_RATIO, "target_met": ratio >= TARGET_RATIO,
              "client": "one keep-alive HTTP/1.1 connection per server, sequential requests",
              "seconds_per_round": args.seconds, "rounds": args.rounds, "cpus": os.cpu_count(),
              "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{'server':<15}{'path':<11}{'req/s':>9}{'median ms':>11}{'p95 ms':>9}{'bytes':>9}")
        for name, path in (("node_exporter", "/metrics"), ("glueinfo", "/node.xml")):
            f = figures[name]
            print(f"{name:<15}{path:<11}{f['requests_per_s']:>9.1f}{f['median_ms']:>11.3f}{f['p95_ms']:>9.3f}{f['answer_bytes']:>9}")
        print(f"glueinfo / node_exporter request rate: {ratio:.2f}x (target >= {TARGET_RATIO:g}x: "
              f"{'met' if ratio >= TARGET_RATIO else 'NOT met'}); {result['client']}; "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
