#!/usr/bin/env python3
"""What gathering many hosts costs the head node.

1. Agents: one helper process simulates 1,000 agents, each a listening
   socket on its own loopback address (127.1.0.1 ... 127.1.3.232, one port)
   serving a different Node document (hosts made from the recorded fixture
   machines, ~5-8 KB each, as `glueinfo serve` renders them).  The head pulls
   them all with glueinfo.gather.gatherer (default pool 64, timeout 5 s), as
   ``[sources] agents = 127.1.[0-3].[1-250]:PORT`` minus the missing ones.
   Reported: median and best wall time of a full gather (pull, parse,
   check, merge) over several runs, and the failures (must be 0).
   Target: under 5 s.
2. Ganglia: a gmetad-style document of 10,000 HOST records, each with the
   33 metrics gmond 3.7 reports by default (with EXTRA_DATA, as gmond writes
   them; ``--no-extra-data`` for the leaner pre-3.1 form), parsed by
   glueinfo.gather.sources.ganglia.parse_ganglia.  Reported: document size,
   median parse time (wall and CPU) and peak RSS of a process that only reads
   the document (written to a file by this one) and parses it, next to its RSS
   once the document is read.  Target: under 1 s.

A 10-million-step Python loop is timed first: this machine's speed varies
with what else runs on it, and the figures read best against it.

Usage: python3 benchmarks/gather.py [--only agents|ganglia] [--agents N] [--runs N] [--ganglia-hosts N]
                                   [--no-extra-data] [--json]
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FIXTURES = REPO / "tests" / "fixtures" / "hosts"
AGENT_TARGET_S = 5.0
GANGLIA_TARGET_S = 1.0


def agent_address(index: int) -> str:
    return f"127.1.{index // 250}.{index % 250 + 1}"


# -- the simulated agents (runs in its own process) --------------------------------------------


def agent_documents(count: int) -> list[bytes]:
    """``count`` different Node documents, rendered from the fixture machines with new names and loads."""
    from glueinfo.core.config import Config
    from glueinfo.host.collect import probe
    from glueinfo.sss.node_xml import render_node

    templates = [probe(Config(), host_root=str(path)) for path in sorted(FIXTURES.iterdir()) if path.is_dir()]
    rng = random.Random(7)
    now = time.time()
    documents = []
    for index in range(count):
        snap = templates[index % len(templates)]
        snap.hostname = f"wn{index:04d}.example.org"
        snap.collected_at = now
        if snap.load:
            snap.load.load1 = round(rng.uniform(0, 2.0) * (snap.cpu.logical_cpus or 1), 2)
        documents.append(render_node(snap, now))
    return documents


def serve_agents(count: int, port: int) -> None:
    documents = agent_documents(count)

    async def main() -> None:
        servers = []
        for index, document in enumerate(documents):
            answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/xml; charset=utf-8\r\n"
                      b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(document)) + document

            async def handle(reader, writer, answer=answer):
                try:
                    await reader.readuntil(b"\r\n\r\n")
                    writer.write(answer)
                    await writer.drain()
                except (ConnectionError, asyncio.IncompleteReadError):
                    pass
                finally:
                    writer.close()

            servers.append(await asyncio.start_server(handle, agent_address(index), port, backlog=64))
        print(f"ready {sum(len(d) for d in documents)}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


# -- the measurements ------------------------------------------------------------------------


def free_port(count: int) -> int:
    import socket

    for _ in range(100):
        with socket.socket() as probe:
            probe.bind((agent_address(0), 0))
            port = probe.getsockname()[1]
        try:
            for index in range(0, count, 97):
                with socket.socket() as other:
                    other.bind((agent_address(index), port))
            return port
        except OSError:
            continue
    raise SystemExit("no common free port")


def bench_agents(count: int, runs: int) -> dict:
    from glueinfo.core.config import parse_text
    from glueinfo.gather.gatherer import Gatherer

    port = free_port(count)
    helper = subprocess.Popen([sys.executable, __file__, "--serve-agents", str(count), "--port", str(port)],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = helper.stdout.readline()
        if not line.startswith("ready"):
            raise SystemExit(f"agent simulator failed to start: {line!r}")
        body_bytes = int(line.split()[1])
        full, rest = divmod(count, 250)
        ranges = [f"127.1.[0-{full - 1}].[1-250]:{port}"] if full else []
        if rest:
            ranges.append(f"127.1.{full}.[1-{rest}]:{port}")
        config = parse_text("[sources]\nenabled = agents\n" f"agents = {' '.join(ranges)}\n", "bench.conf")
        times, cpu, failures, hosts = [], [], 0, 0
        for _ in range(runs):
            gatherer = Gatherer(config)  # a fresh head each run: no memory of the last
            start, start_cpu = time.perf_counter(), time.process_time()
            result = gatherer.gather()
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            failures, hosts = max(failures, len(result.failures)), len(result.hosts)
        return {"agents": count, "hosts_gathered": hosts, "failures": failures, "runs": runs,
                "node_xml_bytes_total": body_bytes,
                "median_s": round(statistics.median(times), 3), "best_s": round(min(times), 3),
                "median_cpu_s": round(statistics.median(cpu), 3), "target_s": AGENT_TARGET_S,
                "met": statistics.median(times) < AGENT_TARGET_S}
    finally:
        helper.terminate()
        helper.wait(10)


GMOND_METRICS = [  # name, type, units, group, value maker
    ("boottime", "uint32", "s", "system", lambda r, i: "1700000000"),
    ("bytes_in", "float", "bytes/sec", "network", lambda r, i: f"{r.uniform(0, 1e6):.2f}"),
    ("bytes_out", "float", "bytes/sec", "network", lambda r, i: f"{r.uniform(0, 1e6):.2f}"),
    ("cpu_aidle", "float", "%", "cpu", lambda r, i: f"{r.uniform(0, 100):.1f}"),
    ("cpu_idle", "float", "%", "cpu", lambda r, i: f"{r.uniform(0, 90):.1f}"),
    ("cpu_nice", "float", "%", "cpu", lambda r, i: "0.0"),
    ("cpu_num", "uint16", "CPUs", "cpu", lambda r, i: str((16, 32, 48, 64)[i % 4])),
    ("cpu_speed", "uint32", "MHz", "cpu", lambda r, i: "2400"),
    ("cpu_steal", "float", "%", "cpu", lambda r, i: "0.0"),
    ("cpu_system", "float", "%", "cpu", lambda r, i: f"{r.uniform(0, 10):.1f}"),
    ("cpu_user", "float", "%", "cpu", lambda r, i: f"{r.uniform(0, 90):.1f}"),
    ("cpu_wio", "float", "%", "cpu", lambda r, i: f"{r.uniform(0, 5):.1f}"),
    ("disk_free", "double", "GB", "disk", lambda r, i: f"{r.uniform(10, 800):.3f}"),
    ("disk_total", "double", "GB", "disk", lambda r, i: "931.512"),
    ("load_fifteen", "float", " ", "load", lambda r, i: f"{r.uniform(0, 40):.2f}"),
    ("load_five", "float", " ", "load", lambda r, i: f"{r.uniform(0, 40):.2f}"),
    ("load_one", "float", " ", "load", lambda r, i: f"{r.uniform(0, 40):.2f}"),
    ("machine_type", "string", "", "system", lambda r, i: "x86_64"),
    ("mem_buffers", "float", "KB", "memory", lambda r, i: f"{r.randint(0, 10**6)}"),
    ("mem_cached", "float", "KB", "memory", lambda r, i: f"{r.randint(0, 10**7)}"),
    ("mem_free", "float", "KB", "memory", lambda r, i: f"{r.randint(10**6, 10**7)}"),
    ("mem_shared", "float", "KB", "memory", lambda r, i: "0"),
    ("mem_total", "float", "KB", "memory", lambda r, i: "131915940"),
    ("os_name", "string", "", "system", lambda r, i: "Linux"),
    ("os_release", "string", "", "system", lambda r, i: "5.14.0-362.el9.x86_64"),
    ("part_max_used", "float", "%", "disk", lambda r, i: f"{r.uniform(0, 100):.1f}"),
    ("pkts_in", "float", "packets/sec", "network", lambda r, i: f"{r.uniform(0, 1e4):.2f}"),
    ("pkts_out", "float", "packets/sec", "network", lambda r, i: f"{r.uniform(0, 1e4):.2f}"),
    ("proc_run", "uint32", " ", "process", lambda r, i: str(r.randint(0, 64))),
    ("proc_total", "uint32", " ", "process", lambda r, i: str(r.randint(300, 2000))),
    ("swap_free", "float", "KB", "memory", lambda r, i: "8388604"),
    ("swap_total", "float", "KB", "memory", lambda r, i: "8388604"),
    ("heartbeat", "uint32", "", "core", lambda r, i: "20"),
]


def ganglia_document(hosts: int, extra_data: bool = True) -> bytes:
    header = (REPO / "tests/fixtures/ganglia/gmond-3.7.2-one-host.xml").read_bytes()
    header = header[: header.index(b"<GANGLIA_XML")]
    rng = random.Random(11)
    now = int(time.time())
    parts = [header.decode("latin-1"), '<GANGLIA_XML VERSION="3.7.2" SOURCE="gmetad">\n',
             f'<GRID NAME="bench" AUTHORITY="http://head/ganglia/" LOCALTIME="{now}">\n']
    for index in range(hosts):
        if index % 500 == 0:
            if index:
                parts.append("</CLUSTER>\n")
            parts.append(f'<CLUSTER NAME="rack{index // 500:02d}" LOCALTIME="{now}" OWNER="unspecified" '
                         'LATLONG="unspecified" URL="unspecified">\n')
        tn = rng.randint(0, 30)
        parts.append(f'<HOST NAME="wn{index:05d}.example.org" IP="10.{index // 65536}.{index // 256 % 256}.{index % 256}" '
                     f'TAGS="" REPORTED="{now - tn}" TN="{tn}" TMAX="20" DMAX="86400" LOCATION="unspecified" '
                     f'GMOND_STARTED="{now - 86400}">\n')
        for name, kind, units, group, value in GMOND_METRICS:
            extra = (f'<EXTRA_DATA>\n<EXTRA_ELEMENT NAME="GROUP" VAL="{group}"/>\n<EXTRA_ELEMENT NAME="DESC" VAL="{name}"/>\n'
                     f'<EXTRA_ELEMENT NAME="TITLE" VAL="{name}"/>\n</EXTRA_DATA>\n') if extra_data else ""
            parts.append(f'<METRIC NAME="{name}" VAL="{value(rng, index)}" TYPE="{kind}" UNITS="{units}" TN="{rng.randint(0, 60)}" '
                         f'TMAX="60" DMAX="0" SLOPE="both" SOURCE="gmond">\n{extra}</METRIC>\n')
        parts.append("</HOST>\n")
    parts.append("</CLUSTER>\n</GRID>\n</GANGLIA_XML>\n")
    return "".join(parts).encode("latin-1")


def bench_ganglia(hosts: int, runs: int, extra_data: bool = True) -> dict:
    """Measured in a fresh process that only reads the document and parses it, so its peak RSS is
    the parse's (building the document here takes several times its size)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ganglia.xml"
        path.write_bytes(ganglia_document(hosts, extra_data))
        child = subprocess.run([sys.executable, __file__, "--measure-ganglia", str(path), "--ganglia-hosts", str(hosts),
                                "--runs", str(runs)], check=True, capture_output=True, text=True)
    result = json.loads(child.stdout)
    result.update(metrics_per_host=len(GMOND_METRICS), extra_data=extra_data, target_s=GANGLIA_TARGET_S,
                  met=result["median_s"] < GANGLIA_TARGET_S)
    return result


def measure_ganglia(path: str, hosts: int, runs: int) -> dict:
    from glueinfo.gather.sources.ganglia import parse_ganglia

    document = Path(path).read_bytes()
    document_rss = memory_kb("VmRSS")
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        report = parse_ganglia(document, time.time(), max_bytes=len(document) + 1)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        assert len(report.snapshots) == hosts and not report.failures
        del report
    return {"hosts": hosts, "document_mb": round(len(document) / 2**20, 1),
            "runs": runs, "median_s": round(statistics.median(times), 3), "best_s": round(min(times), 3),
            "median_cpu_s": round(statistics.median(cpu), 3), "document_rss_mb": round(document_rss / 1024, 1),
            "peak_rss_mb": round(memory_kb("VmHWM") / 1024, 1)}


def memory_kb(field: str) -> int:
    """VmRSS/VmHWM of this process (getrusage's ru_maxrss would also count the parent's memory that a
    freshly exec'd child inherited through fork)."""
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def calibration() -> float:
    """CPU seconds of a plain 10-million-step Python loop: how fast this machine is right now
    (about 0.4 s on an idle current desktop), to read the other figures against."""
    start, total = time.process_time(), 0
    for step in range(10_000_000):
        total += step
    return round(time.process_time() - start, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["agents", "ganglia"], help="run one of the two measurements")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--ganglia-hosts", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-extra-data", action="store_true",
                        help="Ganglia document without EXTRA_DATA (as gmond before 3.1 wrote it)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve-agents", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--measure-ganglia", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_agents:
        serve_agents(args.serve_agents, args.port)
        return
    if args.measure_ganglia:
        print(json.dumps(measure_ganglia(args.measure_ganglia, args.ganglia_hosts, args.runs)))
        return
    results = {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "calibration_s": calibration()}
    if args.only != "ganglia":
        results["agents"] = bench_agents(args.agents, args.runs)
    if args.only != "agents":
        results["ganglia"] = bench_ganglia(args.ganglia_hosts, args.runs, not args.no_extra_data)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"machine: {results['cpus']} CPUs, load {results['load_average'][0]:.1f}, "
          f"10M-step Python loop {results['calibration_s']} s CPU")
    if "agents" in results:
        a = results["agents"]
        print(f"agents:  {a['hosts_gathered']}/{a['agents']} hosts, {a['failures']} failures, "
              f"{a['node_xml_bytes_total'] / 2**20:.1f} MB of Node XML: full gather median {a['median_s']} s, best {a['best_s']} s, "
              f"{a['median_cpu_s']} s CPU in the head (target < {a['target_s']:g} s: {'met' if a['met'] else 'NOT met'})")
    if "ganglia" in results:
        g = results["ganglia"]
        print(f"ganglia: {g['hosts']} HOSTs x {g['metrics_per_host']} metrics{'' if g['extra_data'] else ' (no EXTRA_DATA)'}, "
              f"{g['document_mb']} MB: parse median {g['median_s']} s, best {g['best_s']} s, {g['median_cpu_s']} s CPU, "
              f"peak RSS {g['peak_rss_mb']} MB ({g['document_rss_mb']} MB with the document read) "
              f"(target < {g['target_s']:g} s: {'met' if g['met'] else 'NOT met'})")


if __name__ == "__main__":
    main()
