#!/usr/bin/env python3
"""Server memory under SSSRMAP Gets of many distinct field names (issue 26, finding 6).

Starts a real `glueinfo serve` on loopback serving a site of ``--hosts``
hosts (2,000 by default: the varied snapshots of benchmarks/sssrmap.py,
written as a `[node] site_snapshots` file, fresh for the whole run), then
one client, on one keep-alive connection, asks for ``--names`` distinct
names, one request after another:

    <Get name="Id"/><Get name="Extension[@name='a17']"/>

(``--per-request`` names per request; the names are open Extension names
no host has, so each is a legal query selecting nothing, and each is a new
field for the server's per-field caches).  Reported: the server's RSS
(VmRSS) after a first query built its Node objects ("before"), ten
times along the way, and at the end ("after"), its growth, and the request rate.
Every answer must be a Success, and the answer for a name every host has
(``Extension[@name='CpuModel']``), asked before the loop and again after
it, must be the same bytes: the cache forgot it meanwhile, the answer does
not change.

Target: at most 50 MB of growth for 100,000 distinct names.

Usage: python3 benchmarks/sssrmap_names.py [--hosts N] [--names N] [--per-request N] [--json]
Memory is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TARGET_MB = 50.0
KNOWN = "<Get name=\"Id\"/><Get name=\"Extension[@name='CpuModel']\"/>"


def status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def write_site(workdir: str, hosts: int) -> str:
    """The site's snapshots as a site_snapshots file, collected now (fresh for the whole run)."""
    from sssrmap import snapshots

    now = time.time()
    records = []
    for snapshot in snapshots(hosts):
        snapshot.collected_at = now
        records.append(snapshot.to_dict())
    path = os.path.join(workdir, "site.json")
    with open(path, "w") as handle:
        json.dump(records, handle)
    return path


def start_serve(workdir: str, site: str) -> tuple[subprocess.Popen, int, str]:
    config = os.path.join(workdir, "glueinfo.conf")
    with open(config, "w") as handle:
        handle.write(f"[serve]\nlisten = 127.0.0.1:0\nrefresh_interval = 3600\n[node]\nsite_snapshots = {site}\n"
                     f"stale_after = 86400\n[run]\nstate_dir = {workdir}/state\n")
    log_path = os.path.join(workdir, "serve.log")
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "glueinfo.cli", "serve", "--config", config],
                                   stdout=log, stderr=log, cwd=workdir, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with open(log_path, errors="replace") as handle:
            found = re.search(r"serving http://[0-9.]+:(\d+)/", handle.read())
        if found:
            return process, int(found.group(1)), log_path
        if process.poll() is not None:
            break
        time.sleep(0.1)
    process.kill()
    with open(log_path, errors="replace") as handle:
        raise SystemExit(f"glueinfo serve did not start:\n{handle.read()[-2000:]}")


class Client:
    """One keep-alive connection: a request's answer bytes."""

    def __init__(self, port: int):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def query(self, inner: str) -> bytes:
        body = (f'<Envelope><Body><Request action="Query" actor="bench"><Object>Node</Object>{inner}'
                f'</Request></Body></Envelope>').encode()
        self.connection.request("POST", "/SSSRMAP3", body, {"Content-Type": 'text/xml; charset="utf-8"'})
        answer = self.connection.getresponse().read()
        if b"<Code>000</Code>" not in answer:
            raise SystemExit(f"query failed: {inner[:200]}: {answer[:400]!r}")
        return answer


def measure(hosts: int, names: int, per_request: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="glueinfo-sssrmap-names-") as workdir:
        site = write_site(workdir, hosts)
        process, port, _log = start_serve(workdir, site)
        try:
            client = Client(port)
            first = client.query(KNOWN)  # builds the Node objects: the baseline includes them
            for n in range(50):  # a few names before the baseline, so lazily made interpreter structures are in it
                client.query(f"<Get name=\"Extension[@name='warmup{n}']\"/>")
            before_kb = status_kb(process.pid, "VmRSS")
            samples = []
            every = max(1000, names // 10)
            started = time.perf_counter()
            asked = 0
            while asked < names:
                count = min(per_request, names - asked)
                client.query("<Get name=\"Id\"/>" + "".join(f"<Get name=\"Extension[@name='a{asked + k}']\"/>"
                                                            for k in range(count)))
                asked += count
                if asked % every < count or asked == names:
                    samples.append((asked, round(status_kb(process.pid, "VmRSS") / 1024, 1)))
            elapsed = time.perf_counter() - started
            after_kb = status_kb(process.pid, "VmRSS")
            peak_kb = status_kb(process.pid, "VmHWM")
            again = client.query(KNOWN)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    growth = (after_kb - before_kb) / 1024
    return {"hosts": hosts, "names": names, "per_request": per_request, "requests_per_s": round(names / per_request / elapsed, 1),
            "elapsed_s": round(elapsed, 1), "rss_before_mb": round(before_kb / 1024, 1), "rss_after_mb": round(after_kb / 1024, 1),
            "rss_peak_mb": round(peak_kb / 1024, 1), "growth_mb": round(growth, 1), "samples": samples,
            "known_name_same_answer": first == again, "target_mb": TARGET_MB, "target_met": growth <= TARGET_MB,
            "load_average": os.getloadavg()[0], "cpus": os.cpu_count()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--names", type=int, default=100_000)
    parser.add_argument("--per-request", type=int, default=1, help="distinct names per request (at most 255)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not 1 <= args.per_request <= 255:
        raise SystemExit("--per-request: from 1 to 255 (a Request holds at most 256 elements, one of them Get Id)")
    result = measure(args.hosts, args.names, args.per_request)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{result['names']} distinct Extension names, {result['per_request']} per request, against `glueinfo serve` "
              f"with {result['hosts']} hosts: {result['elapsed_s']} s ({result['requests_per_s']} requests/s)")
        print("RSS (MB) by names asked: " + ", ".join(f"{n}: {mb}" for n, mb in result["samples"]))
        print(f"server RSS {result['rss_before_mb']} MB before, {result['rss_after_mb']} MB after (peak "
              f"{result['rss_peak_mb']} MB): {result['growth_mb']:+.1f} MB (target at most {TARGET_MB:g} MB: "
              f"{'met' if result['target_met'] else 'NOT met'})")
        print(f"a name every host has, asked before and after: {'same answer' if result['known_name_same_answer'] else 'DIFFERENT answers'}"
              f"; load average {result['load_average']:.2f} on {result['cpus']} CPUs")
    return 0 if result["known_name_same_answer"] else 1


if __name__ == "__main__":
    sys.exit(main())
