#!/usr/bin/env python3
"""What the ``accelerators`` collector costs (issue 27).

Cases:

1. ``none``: this machine (``host_root = /``), read live: every PCI device's class in
   /sys/bus/pci/devices, no accelerator, so no tool is asked.  Target: at most 20 ms.
2. ``sysfs-8``: tests/fixtures/gpu/hosts/h100x8-driver-only, eight H100 read from sysfs and
   /proc/driver/nvidia (no tool answers).  Target: at most 50 ms.
3. ``pci-ids-8``: the same eight devices without /proc/driver/nvidia, so their names come from a
   whole pci.ids database (about 1.3 MB; only with ``--pci-ids FILE`` or one installed at
   /usr/share/misc/pci.ids or /usr/share/hwdata/pci.ids).  Target: at most 50 ms.

For each: the first call in a fresh interpreter, the collector's own modules imported in it (the
runner and glueinfo.host.linux, which every probe has loaded for its other collectors, are
imported before the clock starts), and the median of ``--runs`` calls after it.  Speed is
measured here, never asserted in tests.

Usage: python3 benchmarks/gpu_collector.py [--runs N] [--pci-ids FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EIGHT = os.path.join(REPO, "tests", "fixtures", "gpu", "hosts", "h100x8-driver-only")
TARGETS_MS = {"none": 20.0, "sysfs-8": 50.0, "pci-ids-8": 50.0}

# Run in a fresh interpreter: the first call (its imports included), then the warm ones.
CHILD = r"""
import json, sys, time
from glueinfo.host.collect import CollectContext  # what every probe imports anyway
import glueinfo.host.linux  # the other collectors read through it
start = time.perf_counter()
from glueinfo.host.collectors.accelerators import collect
ctx = CollectContext(host_root=sys.argv[1])
found = collect(ctx)
first = (time.perf_counter() - start) * 1000
runs = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    collect(ctx)
    runs.append((time.perf_counter() - start) * 1000)
print(json.dumps({"first_ms": first, "runs_ms": runs,
                  "found": None if found is None else [[a.model, a.count, a.source] for a in found]}))
"""


def measure(root: str, runs: int) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", CHILD, root, str(runs)], capture_output=True, text=True, check=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": REPO})
    result: dict[str, object] = json.loads(done.stdout)
    result["median_ms"] = statistics.median(result["runs_ms"])  # type: ignore[arg-type]
    return result


def pci_ids_tree(folder: str, pci_ids: str) -> str:
    root = os.path.join(folder, "pci-ids-8")
    shutil.copytree(EIGHT, root, ignore=shutil.ignore_patterns("proc", "usr"))
    os.makedirs(os.path.join(root, "usr", "share", "misc"))
    shutil.copy(pci_ids, os.path.join(root, "usr", "share", "misc", "pci.ids"))
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--pci-ids", help="a whole pci.ids database for the pci-ids-8 case")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pci_ids = args.pci_ids or next((p for p in ("/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids") if os.path.exists(p)), None)
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        cases = {"none": "/", "sysfs-8": EIGHT}
        if pci_ids:
            cases["pci-ids-8"] = pci_ids_tree(folder, pci_ids)
        for name, root in cases.items():
            results[name] = measure(root, args.runs)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, result in results.items():
        target = TARGETS_MS[name]
        median = float(result["median_ms"])  # type: ignore[arg-type]
        first = float(result["first_ms"])  # type: ignore[arg-type]
        verdict = "ok" if max(median, first) <= target else "OVER"
        print(f"{name:10} first call {first:7.2f} ms (its imports included)  median {median:6.2f} ms  "
              f"target {target:g} ms  {verdict}  found {result['found']}")
    if not pci_ids:
        print("pci-ids-8: skipped (no pci.ids installed; give one with --pci-ids)")


if __name__ == "__main__":
    main()
