#!/usr/bin/env python3
"""What the prometheus and node_exporter sources cost the head node.

1. prometheus: 10,000 hosts from one Prometheus server.  A helper process
   serves *recorded-shape API answers*, generated here in the JSON Prometheus
   2.42 writes for each of the source's instant queries
   (glueinfo.gather.sources.prometheus.queries): per host 64 threads on 2
   sockets of 16 cores (counted server-side, so one series each), 4 memory and
   5 load series, 5 filesystems x 4 families, 3 adapters x 5 families, os and
   uname info: ~50 series a host, ~500,000 in all.  Not a real Prometheus
   (backfilling 10,000 targets with promtool takes minutes; the source only
   sees the answers).  Reported: the answers' total size, the median and best
   wall and CPU time of a full ``prometheus.gather`` (queries, JSON, mapping)
   and the peak RSS of the process that gathers (the server's memory is its own).
   Target: at most 2 s and 300 MB.
2. node_exporter: 1,000 simulated exporters (one helper process, one
   listening socket each on 127.0.0.1) serve the filtered page a 64-thread
   worker's node_exporter 1.5 gives for glueinfo's ``collect[]`` (cpu with
   cpu.info, meminfo, loadavg, stat, filesystem, netclass, os, uname, plus the
   Go and process families every page carries).  Reported: its lines and bytes,
   the median and best wall and CPU time of a full ``node_exporter.gather``, and
   where the time goes: the pulls alone, the line filter with the per-CPU lines
   read beside the parser (``split_page``), prometheus_client's parser on the
   rest, and the mapping, each timed on one page x 1,000.  Target: at most 10 s.

A 10-million-step Python loop is timed first: this machine's speed varies
with what else runs on it, and the figures read best against it.

Usage: python3 benchmarks/prometheus_sources.py [--only prometheus|node_exporter] [--hosts N] [--exporters N] [--runs N]
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import statistics
import sys
import time
import urllib.parse
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from glueinfo.core.config import parse_text  # noqa: E402
from glueinfo.gather.registry import SourceContext  # noqa: E402
from glueinfo.gather.sources import node_exporter, prometheus  # noqa: E402
from glueinfo.gather.sources._node_metrics import MEMORY  # noqa: E402

THREADS, SOCKETS, CORES = 64, 2, 32
MOUNTS = [("/dev/sda2", "ext4", "/"), ("/dev/sda1", "ext4", "/boot"), ("/dev/sdb1", "xfs", "/scratch"),
          ("nfs01.example.org:/export/home", "nfs4", "/home"), ("cvmfs2", "fuse", "/cvmfs/atlas.cern.ch")]
READ = {"device", "fstype", "mountpoint", "address", "operstate", "name", "version_id", "version_codename", "version",
        "pretty_name", "nodename", "machine", "release"}
# The queries that filter on the server, and the values they keep (prometheus.queries).
FILTERED = {"node_filesystem_readonly": lambda v: v == 1, "node_filesystem_device_error": lambda v: v == 1,
            "node_network_speed_bytes": lambda v: v > 0, "node_network_up": lambda v: False}  # every adapter has flags
ADAPTERS = [("lo", 65536, 0, 9), ("eno1", 1500, 1.25e9, 4099), ("ib0", 65520, 1.25e10, 4099)]


def python_loop_s() -> float:
    start = time.perf_counter()
    n = 0
    for i in range(10_000_000):
        n += i
    return time.perf_counter() - start


# -- 1. prometheus -----------------------------------------------------------------------------


def answers(hosts: int, now: float) -> dict[str, bytes]:
    """Query -> the JSON body Prometheus would answer for ``hosts`` node_exporter targets."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in prometheus.queries('job="node"')}
    for i in range(hosts):
        instance = f"wn{i:05d}.example.org:9100"
        target = {"instance": instance, "job": "node"}

        def add(family: str, value: float, target: dict[str, str] = target, **labels: str) -> None:
            # `max by (job, instance, <the labels read>)`: no __name__, only those labels come back;
            # the queries' filters (`== 1`, `> 0`, `unless` flags) drop what they drop on a server
            if family in FILTERED and not FILTERED[family](value):
                return
            results[family].append({"metric": {**target, **{k: v for k, v in labels.items() if k in READ}},
                                    "value": [now, repr(value)]})

        results["up"].append({"metric": {"__name__": "up", **target}, "value": [now, "1"]})
        results["seen"].append({"metric": target, "value": [now, repr(now - 3.2)]})
        results["cpus"].append({"metric": target, "value": [now, str(THREADS)]})
        results["cores"].append({"metric": target, "value": [now, str(CORES)]})
        results["sockets"].append({"metric": target, "value": [now, str(SOCKETS)]})
        results["cpu_models"].append({"metric": {**target, "model_name": "AMD EPYC 7543 32-Core Processor",
                                                 "vendor": "AuthenticAMD"}, "value": [now, str(THREADS)]})
        for name, value in zip(MEMORY, (270_000_000_000, 200_000_000_000 + i, 8_589_930_496, 8_000_000_000), strict=True):
            add(name, value)
        for name, value in (("node_load1", 31.5), ("node_load5", 30.2), ("node_load15", 29.9), ("node_procs_running", 33),
                            ("node_boot_time_seconds", 1.7e9)):
            add(name, value)
        for device, fstype, mountpoint in MOUNTS:
            labels = {"device": device, "fstype": fstype, "mountpoint": mountpoint}
            add("node_filesystem_size_bytes", 1.2e12, **labels)
            add("node_filesystem_avail_bytes", 8.1e11 + i, **labels)
            add("node_filesystem_readonly", 0, **labels)
            add("node_filesystem_device_error", 0, **labels)
        for device, mtu, speed, flags in ADAPTERS:
            add("node_network_mtu_bytes", mtu, device=device)
            add("node_network_speed_bytes", speed, device=device)
            add("node_network_up", 1, device=device)
            add("node_network_flags", flags, device=device)
            add("node_network_info", 1, device=device, address=f"0c:42:a1:{i >> 8 & 255:02x}:{i & 255:02x}:01",
                broadcast="ff:ff:ff:ff:ff:ff", duplex="full", ifalias="", operstate="up")
        add("node_os_info", 1, build_id="", id="rocky", id_like="rhel centos fedora", image_id="", image_version="",
            name="Rocky Linux", pretty_name="Rocky Linux 9.3 (Blue Onyx)", variant="", variant_id="",
            version="9.3 (Blue Onyx)", version_codename="", version_id="9.3")
        add("node_uname_info", 1, domainname="(none)", machine="x86_64", nodename=f"wn{i:05d}.example.org",
            release="5.14.0-362.8.1.el9_3.x86_64", sysname="Linux", version="#1 SMP PREEMPT_DYNAMIC Wed Nov 8 17:36:32 UTC 2023")
    wanted = prometheus.queries('job="node"')
    return {wanted[name]: json.dumps({"status": "success", "data": {"resultType": "vector", "result": vector}},
                                     separators=(",", ":")).encode() for name, vector in results.items()}


def serve_answers(hosts: int, ready: Any) -> None:
    bodies = answers(hosts, time.time())

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        target = request.split(" ", 2)[1]
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query).get("query", [""])[0]
        body = bodies.get(query, b'{"status":"error","errorType":"bad_data","error":"unknown query"}')
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % len(body) + body)
        await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=1 << 20)
        ready.send((server.sockets[0].getsockname()[1], sum(len(b) for b in bodies.values())))
        await server.serve_forever()

    asyncio.run(main())


def config(text: str) -> Any:
    return parse_text(f"[sources]\n{text}\ntimeout = 30\ngather_timeout = 60\n", "bench.conf")


def bench_prometheus(hosts: int, runs: int) -> dict[str, Any]:
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve_answers, args=(hosts, child), daemon=True)
    server.start()
    port, size = parent.recv()
    try:
        cfg = config(f"enabled = prometheus\nprometheus_url = http://127.0.0.1:{port}\nprometheus_selector = job=\"node\"\n"
                     "prometheus_identity = nodename")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        times, cpu = [], []
        for _ in range(runs):
            ctx = SourceContext(config=cfg, deadline=time.time() + 60)
            start, start_cpu = time.perf_counter(), time.process_time()
            report = prometheus.gather(ctx)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            assert len(report.snapshots) == hosts and not report.failures, report.failures[:3]
            del report
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    finally:
        server.terminate()
        server.join()
    return {"hosts": hosts, "answers_mb": round(size / 2**20, 1), "median_s": round(statistics.median(times), 3),
            "best_s": round(min(times), 3), "cpu_median_s": round(statistics.median(cpu), 3), "cpu_best_s": round(min(cpu), 3),
            "peak_rss_mb": round(peak), "rss_before_mb": round(before)}


# -- 2. node_exporter --------------------------------------------------------------------------


def worker_page(threads: int = THREADS) -> bytes:
    """A filtered /metrics page as node_exporter 1.5 writes it for a ``threads``-thread worker."""
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value:g}" for labels, value in samples)

    for name in ("go_gc_duration_seconds", "go_goroutines", "go_info", "go_threads", "process_cpu_seconds_total",
                 "process_max_fds", "process_open_fds", "process_resident_memory_bytes", "process_start_time_seconds",
                 "process_virtual_memory_bytes"):
        family(name, "gauge", "Go runtime and process facts.", [("", 1.0)])
    family("go_memstats", "untyped", "Go memory statistics.", [(f'{{stat="s{i}"}}', i) for i in range(40)])
    family("node_boot_time_seconds", "gauge", "Node boot time, in unixtime.", [("", 1.7e9)])
    family("node_context_switches_total", "counter", "Total number of context switches.", [("", 9.8e10)])
    family("node_cpu_guest_seconds_total", "counter", "Seconds the CPUs spent in guests (VMs) for each mode.",
           [(f'{{cpu="{c}",mode="{m}"}}', 0) for c in range(threads) for m in ("nice", "user")])
    family("node_cpu_info", "gauge", "CPU information from /proc/cpuinfo.",
           [(f'{{cachesize="512 KB",core="{c % CORES}",cpu="{c}",family="25",microcode="0xa0011d1",model="1",'
             f'model_name="AMD EPYC 7543 32-Core Processor",package="{c // CORES % SOCKETS}",stepping="1",'
             f'vendor="AuthenticAMD"}}', 1) for c in range(threads)])
    family("node_cpu_seconds_total", "counter", "Seconds the CPUs spent in each mode.",
           [(f'{{cpu="{c}",mode="{m}"}}', 123456.78) for c in range(threads)
            for m in ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")])
    for name, fs_help in (("avail_bytes", "Filesystem space available to non-root users in bytes."),
                          ("device_error", "Whether an error occurred while getting statistics for the given device."),
                          ("files", "Filesystem total file nodes."), ("files_free", "Filesystem total free file nodes."),
                          ("free_bytes", "Filesystem free space in bytes."), ("readonly", "Filesystem read-only status."),
                          ("size_bytes", "Filesystem size in bytes.")):
        family(f"node_filesystem_{name}", "gauge", fs_help,
               [(f'{{device="{d}",fstype="{t}",mountpoint="{m}"}}', 1.2e12) for d, t, m in MOUNTS])
    family("node_forks_total", "counter", "Total number of forks.", [("", 9123412)])
    family("node_intr_total", "counter", "Total number of interrupts serviced.", [("", 1e10)])
    for name in ("node_load1", "node_load5", "node_load15"):
        family(name, "gauge", "Load average.", [("", 31.5)])
    for name in ("Active", "Active_anon", "Active_file", "AnonHugePages", "AnonPages", "Bounce", "Buffers", "Cached",
                 "CommitLimit", "Committed_AS", "DirectMap1G", "DirectMap2M", "DirectMap4k", "Dirty", "FileHugePages",
                 "HardwareCorrupted", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp", "HugePages_Total",
                 "Hugepagesize", "Inactive", "Inactive_anon", "Inactive_file", "KReclaimable", "KernelStack", "Mapped",
                 "MemAvailable", "MemFree", "MemTotal", "Mlocked", "NFS_Unstable", "PageTables", "Percpu", "SReclaimable",
                 "SUnreclaim", "Shmem", "ShmemHugePages", "ShmemPmdMapped", "Slab", "SwapCached", "SwapFree", "SwapTotal",
                 "Unevictable", "VmallocChunk", "VmallocTotal", "VmallocUsed", "Writeback", "WritebackTmp"):
        family(f"node_memory_{name}_bytes", "gauge", f"Memory information field {name}_bytes.", [("", 2.7e11)])
    for name in ("address_assign_type", "carrier", "carrier_changes_total", "carrier_down_changes_total",
                 "carrier_up_changes_total", "device_id", "dormant", "flags", "iface_id", "iface_link", "iface_link_mode",
                 "mtu_bytes", "name_assign_type", "net_dev_group", "protocol_type", "speed_bytes", "transmit_queue_length",
                 "up"):
        family(f"node_network_{name}", "gauge", f"Network device property: {name}.",
               [(f'{{device="{d}"}}', v) for d, v in (("lo", 9), ("eno1", 4099), ("ib0", 4099))])
    family("node_network_info", "gauge", "Non-numeric data from /sys/class/net/<iface>.",
           [(f'{{address="0c:42:a1:00:00:{i:02x}",broadcast="ff:ff:ff:ff:ff:ff",device="{d}",duplex="full",ifalias="",'
             'operstate="up"}', 1) for i, (d, *_) in enumerate(ADAPTERS)])
    family("node_os_info", "gauge", "A metric with a constant '1' value labeled by build_id, id, ...",
           [('{build_id="",id="rocky",id_like="rhel centos fedora",image_id="",image_version="",name="Rocky Linux",'
             'pretty_name="Rocky Linux 9.3 (Blue Onyx)",variant="",variant_id="",version="9.3 (Blue Onyx)",'
             'version_codename="",version_id="9.3"}', 1)])
    family("node_os_version", "gauge", "Metric containing the major.minor part of the OS version.",
           [('{id="rocky",id_like="rhel centos fedora",name="Rocky Linux"}', 9.3)])
    family("node_procs_blocked", "gauge", "Number of processes blocked waiting for I/O to complete.", [("", 0)])
    family("node_procs_running", "gauge", "Number of processes in runnable state.", [("", 33)])
    family("node_scrape_collector_duration_seconds", "gauge", "node_exporter: Duration of a collector scrape.",
           [(f'{{collector="{c}"}}', 0.001) for c in ("cpu", "filesystem", "loadavg", "meminfo", "netclass", "os", "stat", "uname")])
    family("node_scrape_collector_success", "gauge", "node_exporter: Whether a collector succeeded.",
           [(f'{{collector="{c}"}}', 1) for c in ("cpu", "filesystem", "loadavg", "meminfo", "netclass", "os", "stat", "uname")])
    family("node_uname_info", "gauge", "Labeled system information as provided by the uname system call.",
           [('{domainname="(none)",machine="x86_64",nodename="wn00001.example.org",release="5.14.0-362.8.1.el9_3.x86_64",'
             'sysname="Linux",version="#1 SMP PREEMPT_DYNAMIC Wed Nov 8 17:36:32 UTC 2023"}', 1)])
    family("promhttp_metric_handler_errors_total", "counter", "Total number of internal errors.",
           [('{cause="encoding"}', 0), ('{cause="gathering"}', 0)])
    return ("\n".join(out) + "\n").encode()


def serve_exporters(count: int, ready: Any) -> None:
    page = worker_page()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n" % len(page)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(head + page)
        await writer.drain()
        writer.close()

    async def main() -> None:
        servers = [await asyncio.start_server(handle, "127.0.0.1", 0) for _ in range(count)]
        ready.send([s.sockets[0].getsockname()[1] for s in servers])
        await asyncio.Event().wait()

    asyncio.run(main())


def bench_node_exporter(count: int, runs: int) -> dict[str, Any]:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1]),) * 2)
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve_exporters, args=(count, child), daemon=True)
    server.start()
    ports = parent.recv()
    page = worker_page()
    try:
        targets = ", ".join(f"127.0.0.1:{p}=wn{i:05d}.example.org" for i, p in enumerate(ports))
        cfg = config(f"enabled = node_exporter\nnode_exporters = {targets}\nnode_exporter_identity = target")
        times, cpu = [], []
        for _ in range(runs):
            ctx = SourceContext(config=cfg, deadline=time.time() + 60)
            start, start_cpu = time.perf_counter(), time.process_time()
            report = node_exporter.gather(ctx)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            assert len(report.snapshots) == count and not report.failures, report.failures[:3]
        from glueinfo.gather.pull import PullSettings, listed_targets, pull_all

        settings = PullSettings.from_section(cfg.section("sources"))
        settings.path = node_exporter.METRICS_PATH
        start = time.perf_counter()
        outcomes = pull_all(listed_targets(cfg.section("sources"), node_exporter.TARGET_KEYS), settings, 60)
        pulls = time.perf_counter() - start
        assert all(o.error is None for o in outcomes)
    finally:
        server.terminate()
        server.join()
    from prometheus_client.parser import text_string_to_metric_families

    text = page.decode()
    start = time.perf_counter()
    for _ in range(count):
        kept, read = node_exporter.split_page(text)  # the line filter and the per-CPU lines read beside the parser
    filtering = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(count):
        families = [(s.name, s.labels, s.value) for f in text_string_to_metric_families(kept) for s in f.samples]
    parsing = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(count):
        facts = node_exporter.NodeFacts()
        for name, labels, value in (*families, *read):
            facts.add(name, labels, value)
        facts.snapshot("wn", 0.0)
    mapping = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(max(1, count // 10)):
        list(text_string_to_metric_families(text))
    unfiltered = (time.perf_counter() - start) * 10
    return {"exporters": count, "page_lines": text.count("\n"), "page_kb": round(len(page) / 1024, 1),
            "lines_parsed": kept.count("\n"), "lines_read_beside": len(read),
            "median_s": round(statistics.median(times), 3), "best_s": round(min(times), 3),
            "cpu_median_s": round(statistics.median(cpu), 3), "cpu_best_s": round(min(cpu), 3),
            "pulls_only_s": round(pulls, 3), "line_filter_and_split_s": round(filtering, 3), "parser_s": round(parsing, 3),
            "mapping_s": round(mapping, 3), "parser_whole_page_s": round(unfiltered, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("prometheus", "node_exporter"))
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--exporters", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"python loop of 10M steps: {python_loop_s():.2f} s")
    if args.only in (None, "node_exporter"):
        figures = bench_node_exporter(args.exporters, args.runs)
        print(f"node_exporter: {json.dumps(figures)}")
    if args.only in (None, "prometheus"):
        figures = bench_prometheus(args.hosts, args.runs)
        print(f"prometheus: {json.dumps(figures)}")


if __name__ == "__main__":
    main()
