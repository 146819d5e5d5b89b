#!/usr/bin/env python3
"""SSSRMAP query latency over 10,000 Nodes.

Builds 10,000 varied host snapshots (deterministic), renders them as Node
elements once (what `glueinfo serve` does after each refresh, reported as
"build"), then answers, in process, the whole SSSRMAP exchange: request bytes
parsed, Where evaluated, Gets projected, Response and Envelope serialized:

    <Get name="Id"/><Get name="Configured/Processors"/><Get name="Available/Memory"/>
    <Where name="Configured/Memory" op="GE">64GB</Where>

"cold" is the first query on a fresh object set with empty per-path caches;
"warm" is the median of the following queries.  The HTTP store keeps the
Node XML document, not a tree (issue 24: an lxml tree of 10,000 Nodes is
ten times the document): the first query after each publish reads the
document into objects and warms the common paths' caches ("first query
after a publish").
Also reported: the same with an HMAC-signed request and response, a
GroupBy aggregate, and two Match queries (a CPU model alternation, few
distinct texts; a host-name pattern, every text distinct).  Match runs on
RE2 since issue 12: the last table times RE2 against Python's re on typical
patterns over the same 10,000 texts, per search (re backtracks on hostile
patterns; RE2 never does, at a constant cost per search).  Run it against
an older checkout with PYTHONPATH to compare the engine.  Target: warm
median under 50 ms.

Usage: python3 benchmarks/sssrmap.py [--nodes N] [--runs N] [--json]
Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import random
import re
import statistics
import sys
import time

TARGET_MS = 50.0


def snapshots(count: int):
    from glueinfo.core.model import CpuInfo, FileSystem, HostSnapshot, LoadInfo, MemoryInfo, NetworkAdapter, OsInfo, StaticFacts

    rng = random.Random(10_000)
    now = time.time()
    result = []
    for i in range(count):
        cpus = rng.choice([4, 8, 16, 32, 64, 128])
        ram = rng.choice([8192, 16384, 32768, 65536, 131072, 262144, 524288])
        result.append(HostSnapshot(
            hostname=f"wn{i:05d}.example.org", collected_at=now - rng.uniform(0, 60), source="agents",
            cpu=CpuInfo(logical_cpus=cpus, physical_cores=cpus // 2, sockets=2, vendor="GenuineIntel",
                        model_name=rng.choice(["Intel(R) Xeon(R) Gold 6248", "AMD EPYC 7742"]), clock_mhz=2500,
                        instruction_set="x86_64", cache_l2_kb=1024, cache_l3_kb=32768),
            memory=MemoryInfo(ram_mb=ram, ram_available_mb=int(ram * rng.random()), swap_mb=8192, swap_free_mb=4096,
                              virtual_mb=ram + 8192, virtual_available_mb=ram // 2),
            load=LoadInfo(load1=rng.uniform(0, cpus), load5=1.0, load15=1.0, runnable_tasks=3, total_tasks=300),
            network=[NetworkAdapter(name="eth0", ipv4=[f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"], mtu=9000, is_up=True,
                                    speed_mbps=25000, is_primary=True)],
            filesystems=[FileSystem("/", "/dev/sda1", "ext4", size_mb=102400, available_mb=rng.randint(0, 102400))],
            os=OsInfo(name="Rocky Linux", release="9.3", pretty_name="Rocky Linux 9.3", kernel_release="5.14.0",
                      platform_type="x86_64", boot_time=now - 86400),
            static=StaticFacts(features=rng.sample(["IB", "GPU", "BigMem", "SSD"], rng.randint(0, 2))),
        ))
    return result


def request(inner: str, key: bytes | None = None) -> bytes:
    body = f'<Body><Request action="Query" actor="bench"><Object>Node</Object>{inner}</Request></Body>'.encode()
    if key is None:
        return b"<Envelope>" + body + b"</Envelope>"
    digest = hashlib.sha1(body).digest()
    return (b"<Envelope>" + body + b"<Signature><DigestValue>" + base64.b64encode(digest) + b"</DigestValue><SignatureValue>" +
            base64.b64encode(hmac.new(key, digest, hashlib.sha1).digest()) +
            b'</SignatureValue><SecurityToken type="Symmetric" name="bench"/></Signature></Envelope>')


QUERY = ('<Get name="Id"/><Get name="Configured/Processors"/><Get name="Available/Memory"/>'
         '<Where name="Configured/Memory" op="GE">64GB</Where>')
GROUP = '<Get name="Feature" op="GroupBy"/><Get name="Id" op="Count"/><Get name="Configured/Memory" op="Sum" units="TB"/>'
MATCH_MODEL = '<Get name="Id"/><Where name="Extension[@name=\'CpuModel\']" op="Match">EPYC</Where>'
MATCH_ID = '<Get name="Id"/><Where name="Id" op="Match">^wn0[0-4][0-9]{2}7\\.</Where>'
# (pattern, which texts): typical Match patterns, as users write them
PATTERNS = (("EPYC|Platinum", "model"), (r"^wn0[0-4][0-9]{2}7\.", "id"), (r"(?i)example\.ORG$", "id"), (r"\d{3}", "model"))


def searches(hosts, runs: int) -> dict[str, dict[str, float]]:
    """Microseconds per search, RE2 (the engine's options) against re, on each typical pattern's texts."""
    import re2

    options = re2.Options()
    options.log_errors, options.never_capture, options.max_mem = False, True, 1 << 20
    texts = {"model": [h.cpu.model_name for h in hosts], "id": [h.hostname for h in hosts]}
    result = {}
    for pattern, which in PATTERNS:
        row = {}
        for name, compiled in (("re", re.compile(pattern)), ("re2", re2.compile(pattern, options))):
            chosen = texts[which]
            best = float("inf")
            for _ in range(max(3, runs // 5)):
                start = time.perf_counter()
                found = sum(1 for text in chosen if compiled.search(text) is not None)
                best = min(best, time.perf_counter() - start)
            row[f"{name}_us"] = round(best / len(chosen) * 1e6, 3)
            row[f"{name}_found"] = found
        result[f"{pattern} ({which})"] = row
    return result


def timed(function, runs: int) -> tuple[float, list[float], bytes]:
    start = time.perf_counter()
    answer = function()
    cold = (time.perf_counter() - start) * 1000
    warm = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        warm.append((time.perf_counter() - start) * 1000)
    return cold, warm, answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from glueinfo.sss import vocabulary as sss_node
    from glueinfo.sss.node_xml import data_element
    from glueinfo.sss.sssrmap import ObjectSet, QueryService

    hosts = snapshots(args.nodes)
    key = b"benchmark-key"
    start = time.perf_counter()
    nodes = list(data_element(hosts, time.time()))
    build_ms = (time.perf_counter() - start) * 1000

    from glueinfo.run.http import WARM_PATHS, NodeObjects
    from glueinfo.sss.node_xml import to_bytes

    # The HTTP store holds the document, not a tree: the first query after a publish parses it
    # (NodeObjects) and warms the common paths; that query pays for both.
    document = to_bytes(data_element(hosts, time.time()))
    lazy = NodeObjects([document])
    first_service = QueryService()
    first_service.register("Node", lazy.get)
    start = time.perf_counter()
    first_service.handle(request(QUERY))
    first_after_publish_ms = (time.perf_counter() - start) * 1000
    del lazy, first_service

    objects = ObjectSet("Node", nodes, sss_node.DEFAULT_UNITS)
    start = time.perf_counter()
    objects.warm(WARM_PATHS)
    warm_up_ms = (time.perf_counter() - start) * 1000
    service = QueryService()
    service.register("Node", lambda: objects)
    start = time.perf_counter()
    service.handle(request(QUERY))
    after_warm_up_ms = (time.perf_counter() - start) * 1000

    figures = {}
    for name, inner, signing in (("where+3 gets", QUERY, None), ("where+3 gets, signed", QUERY, key), ("groupby+count+sum", GROUP, None),
                                 ("match cpu model", MATCH_MODEL, None), ("match host name", MATCH_ID, None)):
        objects = ObjectSet("Node", nodes, sss_node.DEFAULT_UNITS)  # fresh caches, as after a refresh
        service = QueryService(key=signing)
        service.register("Node", lambda objects=objects: objects)
        raw = request(inner, signing)
        cold, warm, answers = timed(lambda service=service, raw=raw: service.handle(raw), args.runs)
        if b"<Code>000</Code>" not in answers[0]:
            raise SystemExit(f"{name}: query failed: {answers[0][:300]!r}")
        count = int(answers[0].split(b"<Count>", 1)[1].split(b"</Count>", 1)[0])
        figures[name] = {"cold_ms": round(cold, 2), "warm_median_ms": round(statistics.median(warm), 2),
                         "warm_max_ms": round(max(warm), 2), "objects_returned": count, "answer_bytes": len(answers[0])}

    main_figure = figures["where+3 gets"]["warm_median_ms"]
    per_search = searches(hosts, args.runs)
    result = {"nodes": args.nodes, "build_ms": round(build_ms, 1), "serve_warm_up_ms": round(warm_up_ms, 1),
              "first_query_after_warm_up_ms": round(after_warm_up_ms, 2),
              "first_query_after_publish_ms": round(first_after_publish_ms, 1), "figures": figures, "searches": per_search,
              "target_ms": TARGET_MS,
              "target_met": main_figure < TARGET_MS, "load_average": os.getloadavg()[0], "cpus": os.cpu_count()}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{args.nodes} Nodes rendered as elements in {build_ms:.0f} ms (once per refresh)")
        print(f"{'query':<24}{'cold ms':>9}{'warm median':>13}{'warm max':>10}{'returned':>10}{'bytes':>10}")
        for name, f in figures.items():
            print(f"{name:<24}{f['cold_ms']:>9.2f}{f['warm_median_ms']:>13.2f}{f['warm_max_ms']:>10.2f}"
                  f"{f['objects_returned']:>10}{f['answer_bytes']:>10}")
        print(f"{'pattern (texts)':<32}{'re us':>9}{'RE2 us':>9}{'found':>7}   (per search, best of several passes)")
        for pattern, row in per_search.items():
            print(f"{pattern:<32}{row['re_us']:>9.3f}{row['re2_us']:>9.3f}{row['re2_found']:>7}")
        print(f"the first query after a publish reads the {len(document) / 2**20:.1f} MB document into objects and warms "
              f"{', '.join(WARM_PATHS)}: {first_after_publish_ms:.0f} ms (warming alone {warm_up_ms:.0f} ms; a query "
              f"after it {after_warm_up_ms:.1f} ms)")
        print(f"Where Configured/Memory + 3 Gets, warm median {main_figure:.2f} ms (target < {TARGET_MS:g} ms: "
              f"{'met' if result['target_met'] else 'NOT met'}); load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
