#!/usr/bin/env python3
"""GET /node.xml from `glueinfo serve` with and without 1,000 slowloris
connections open, next to node_exporter's /metrics, same machine, one run.

Servers and client as in benchmarks/serve.py (whose helpers this reuses):
one keep-alive HTTP/1.1 client, requests one after another.  First rounds
undisturbed (node_exporter and glueinfo alternating), then the same rounds
with an attacker process holding ``--connections`` connections to glueinfo
from ``--addresses`` loopback addresses (127.0.1.1, 127.0.1.2, ... so each
address stays under [serve] max_per_address): a third trickle a request one
byte a second, a third send one more header line a second, a third sit
idle.  Connections the server cuts off (request_deadline, timeout) are opened
again at once, so the count stays up; how many were open is reported.

Targets (issue 12): under attack at least half the undisturbed rate, p99
under 50 ms, and at least 30x node_exporter's /metrics rate.

Usage: python3 benchmarks/slowloris.py [--seconds S] [--rounds N] [--connections N] [--addresses N] [--json]
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve import NODE_EXPORTER, measure, start_glueinfo, start_node_exporter, stop  # noqa: E402

TARGET_RATIO = 30.0
TARGET_P99_MS = 50.0
TARGET_KEPT = 0.5


def raise_file_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


# -- the attacker (a process of its own, so its work is not the measuring client's) ----------------------------


def attack(port: int, connections: int, addresses: int) -> None:
    """Hold ``connections`` slow connections until stdin closes; print the open count each second."""
    sources = [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(addresses)]
    line = b"GET /node.xml HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 1000000
    held: dict[int, tuple[socket.socket, str, int]] = {}  # slot -> (socket, kind, bytes sent)

    def connect(slot: int) -> None:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(sources[slot % len(sources)], 0))
        except OSError:
            return
        sock.setblocking(False)
        held[slot] = (sock, ("trickle", "headers", "idle")[slot % 3], 0)

    for slot in range(connections):
        connect(slot)
    stdin = selectors.DefaultSelector()
    stdin.register(sys.stdin, selectors.EVENT_READ)
    while not stdin.select(1.0):
        for slot in range(connections):
            entry = held.get(slot)
            if entry is None:
                connect(slot)
                continue
            sock, kind, sent = entry
            try:
                if sock.recv(65536) == b"":
                    raise ConnectionError("closed")  # cut off by the server (an answer is read away)
            except BlockingIOError:
                pass
            except OSError:
                sock.close()
                del held[slot]
                connect(slot)
                continue
            if kind == "idle":
                continue
            piece = line[sent:sent + 1] if kind == "trickle" else (
                b"GET /node.xml HTTP/1.1\r\nHost: localhost\r\n" if sent == 0 else b"X-More-%d: x\r\n" % sent)
            try:
                sock.send(piece)
                held[slot] = (sock, kind, sent + 1)
            except OSError:
                pass
        print(len(held), flush=True)


class Attacker:
    def __init__(self, port: int, connections: int, addresses: int):
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--attack", str(port),
                                         "--connections", str(connections), "--addresses", str(addresses)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.counts: list[int] = []

    def wait_open(self, wanted: int, seconds: float = 60.0) -> int:
        deadline = time.monotonic() + seconds
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise SystemExit("the attacker process ended")
            self.counts.append(int(line))
            if self.counts[-1] >= wanted:
                return self.counts[-1]
        raise SystemExit(f"only {self.counts[-1] if self.counts else 0} of {wanted} attacking connections open")

    def stop(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        for line in self.process.stdout:
            self.counts.append(int(line))
        self.process.wait(30)


def summary(totals: list[tuple[int, float, list[float], int]]) -> dict[str, float]:
    count = sum(t[0] for t in totals)
    elapsed = sum(t[1] for t in totals)
    latencies = sorted(x for t in totals for x in t[2])
    return {"requests": count, "requests_per_s": round(count / elapsed, 1), "median_ms": round(statistics.median(latencies), 3),
            "p99_ms": round(latencies[max(0, int(len(latencies) * 0.99) - 1)], 3), "max_ms": round(latencies[-1], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per server per round (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per phase (default 3)")
    parser.add_argument("--connections", type=int, default=1000, help="slowloris connections (default 1000)")
    parser.add_argument("--addresses", type=int, default=125, help="loopback addresses they come from (default 125)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--attack", type=int, metavar="PORT", help=argparse.SUPPRESS)  # the attacker process
    args = parser.parse_args()
    raise_file_limit(args.connections * 2 + 1024)
    if args.attack:
        attack(args.attack, args.connections, args.addresses)
        return 0
    if not os.access(NODE_EXPORTER, os.X_OK):
        raise SystemExit(f"{NODE_EXPORTER} is not installed (Debian package prometheus-node-exporter)")

    phases: dict[str, dict[str, list[tuple[int, float, list[float], int]]]] = {}
    with tempfile.TemporaryDirectory(prefix="glueinfo-slowloris-") as workdir:
        exporter, exporter_port = start_node_exporter(workdir)
        glueinfo, glueinfo_port = start_glueinfo(workdir)
        attacker = None
        try:
            for phase in ("undisturbed", "attacked"):
                if phase == "attacked":
                    attacker = Attacker(glueinfo_port, args.connections, args.addresses)
                    attacker.wait_open(args.connections)
                runs: dict[str, list[tuple[int, float, list[float], int]]] = {"node_exporter": [], "glueinfo": []}
                for _ in range(args.rounds):
                    runs["node_exporter"].append(measure(exporter_port, "/metrics", args.seconds))
                    runs["glueinfo"].append(measure(glueinfo_port, "/node.xml", args.seconds))
                phases[phase] = runs
        finally:
            if attacker is not None:
                attacker.stop()
            stop(glueinfo)
            stop(exporter)

    exporter_figures = summary(phases["undisturbed"]["node_exporter"] + phases["attacked"]["node_exporter"])
    calm, attacked = summary(phases["undisturbed"]["glueinfo"]), summary(phases["attacked"]["glueinfo"])
    held = attacker.counts if attacker is not None else []
    kept = attacked["requests_per_s"] / calm["requests_per_s"]
    ratio = attacked["requests_per_s"] / exporter_figures["requests_per_s"]
    targets = {"kept_rate": (kept, TARGET_KEPT, kept >= TARGET_KEPT),
               "p99_ms": (attacked["p99_ms"], TARGET_P99_MS, attacked["p99_ms"] < TARGET_P99_MS),
               "ratio_to_node_exporter": (ratio, TARGET_RATIO, ratio >= TARGET_RATIO)}
    result = {"node_exporter": exporter_figures, "glueinfo_undisturbed": calm, "glueinfo_attacked": attacked,
              "attacking_connections": {"wanted": args.connections, "addresses": args.addresses,
                                        "open_min": min(held, default=0), "open_max": max(held, default=0)},
              "targets": {name: {"value": round(v, 3), "target": t, "met": met} for name, (v, t, met) in targets.items()},
              "client": "one keep-alive HTTP/1.1 connection, sequential requests", "seconds_per_round": args.seconds,
              "rounds": args.rounds, "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"{'server':<30}{'req/s':>9}{'median ms':>11}{'p99 ms':>9}{'max ms':>9}")
    for name, figures in (("node_exporter /metrics", exporter_figures), ("glueinfo /node.xml undisturbed", calm),
                          ("glueinfo /node.xml attacked", attacked)):
        print(f"{name:<30}{figures['requests_per_s']:>9.1f}{figures['median_ms']:>11.3f}{figures['p99_ms']:>9.3f}"
              f"{figures['max_ms']:>9.3f}")
    print(f"attack: {args.connections} connections from {args.addresses} loopback addresses, "
          f"{min(held, default=0)}-{max(held, default=0)} open while measured")
    for name, (value, target, met) in targets.items():
        print(f"  {name}: {value:.2f} (target {'<' if name == 'p99_ms' else '>='} {target:g}: {'met' if met else 'NOT met'})")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
