#!/usr/bin/env python3
"""The least a listed refresh of an XML batch system can cost (issue 13).  Not a test: it prints figures.

    python3 benchmarks/lrms_xml_floor.py [JOBS] [NODES] [REPEAT]   # default 50000 jobs on 2000 nodes, 5 runs

Torque (``qstat -f -x``) and Grid Engine (``qstat -xml -ext -pri``) print their
job lists as XML; their refreshes with the jobs published stay over issue 13's
target of 1 s CPU.  This script times, on the same generated documents as
benchmarks/lrms_pbs.py and benchmarks/lrms_sge.py, the steps that any reading
which publishes the jobs must take, each alone and none of them glueinfo's own
parsing:

1. libxml2 checks the document is well-formed XML (the locked-down parser, no
   tree): a hostile or truncated document must be refused, not half read;
2. one C-level pass finds the elements read for each job, as (tag, text)
   pairs: the fastest way found to bring them into Python (an lxml tree,
   ``iterparse``, a Python target parser and libxslt were all slower, see
   docs/lrms/pbs.md and docs/lrms/sge.md);
3. a bare loop puts those values into one dict per job, converting nothing;
4. 50,000 JobInfos (what the Job XML publishes) are made from constants, and
   freed (each refresh frees the one before);
5. the [vos] map gives them their VOs and they are counted per VO;
6. the same refresh of a queue with no job (queue, nodes, version).

Their sum is a floor: it converts no job's value (no time, duration or size),
reads no job's nodes and makes no estimate.  The full refresh (benchmarks/lrms_pbs.py, lrms_sge.py) is
printed beside it, measured in the same run, as the machine's speed varies
from hour to hour.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import lrms_pbs  # noqa: E402
import lrms_sge  # noqa: E402

from glueinfo.core import xmlsafe  # noqa: E402
from glueinfo.core.job import JobInfo  # noqa: E402
from glueinfo.lrms import commands  # noqa: E402
from glueinfo.lrms.plugins import pbs, sge  # noqa: E402
from glueinfo.lrms.registry import LrmsContext, queue_state  # noqa: E402
from glueinfo.lrms.vo_map import VoMap, count_by_vo  # noqa: E402


def cpu(step: Callable[[], object], repeat: int) -> float:
    """The least CPU time of ``repeat`` runs of ``step`` (its result freed outside the timing)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        result = step()
        best = min(best, time.process_time() - start)
        del result
    return best


def job_infos(count: int) -> list[JobInfo]:
    return [JobInfo(local_id=f"{i}.head", name="job", local_owner="atlas001", local_group="atlas", queue="q",
                    lrms_state="R", sss_state="Running", glue_status="RUNNING", submit_time=1.0, start_time=2.0,
                    requested_processors=1, requested_memory_mb=2048, requested_duration_s=3600, requested_nodes=1,
                    delivered_processors=1, delivered_wall_s=60, cpu_duration_s=600, submit_host="ce01")
            for i in range(count)]


def vo_counts(vo_map: VoMap, infos: list[JobInfo]) -> object:
    commands.assign_vos(vo_map, infos)
    return count_by_vo(infos)


def records(elements: list[tuple[str, str]], opener: str) -> list[dict[str, str]]:
    """Bare grouping: a new dict at each ``opener`` element, every other value stored in the last one."""
    jobs: list[dict[str, str]] = []
    record: dict[str, str] = {}
    for tag, value in elements:
        if tag == opener:
            record = {}
            jobs.append(record)
        else:
            record[tag] = value
    return jobs


def floor(name: str, text: str, pattern: re.Pattern[str], opener: str, jobs: int, repeat: int,
          refresh: Callable[[], object], empty_refresh: Callable[[], object]) -> None:
    data = text.encode()
    elements = pattern.findall(text)
    pairs = [(found[0], found[-1]) for found in elements] if elements and len(elements[0]) > 2 else elements
    infos = job_infos(jobs)
    vo_map = VoMap.from_values([f"user:{vo}*={vo}" for vo in lrms_pbs.VOS])
    steps = {
        "libxml2 checks the document": cpu(lambda: xmlsafe.check_well_formed(data, max_bytes=2**30), repeat),
        f"one pattern finds {len(elements):,} elements": cpu(lambda: pattern.findall(text), repeat),
        "a bare loop groups them by job": cpu(lambda: records(pairs, opener), repeat),
        f"{jobs:,} JobInfos made and freed": cpu(lambda: len(job_infos(jobs)), repeat),
        "their VOs and per-VO counts": cpu(lambda: vo_counts(vo_map, infos), repeat),
        "the refresh of a queue with no job": cpu(empty_refresh, repeat),
    }
    print(f"{name}: {len(text) / 2**20:.1f} MiB of job list")
    for step, seconds in steps.items():
        print(f"  {step:40} {seconds:.3f} s")
    print(f"  {'floor (their sum)':40} {sum(steps.values()):.3f} s")
    print(f"  {'the full listed refresh':40} {cpu(refresh, repeat):.3f} s")


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 5

    torque = lrms_pbs.torque_outputs(lrms_pbs.plan(jobs, nodes), nodes)
    torque_tags = ("Job", *pbs._TORQUE_GROUPS, *pbs._TORQUE_TOP, *pbs._TORQUE_FULL, *pbs._TORQUE_NESTED)
    torque_pattern = re.compile(f"<({xmlsafe.alternation(torque_tags)}){xmlsafe._ATTRIBUTES_AND_TEXT}")
    pbs_vos = VoMap.from_values([f"group:{vo}={vo}" for vo in lrms_pbs.VOS])

    def torque_refresh(outputs: dict[str, str]) -> Callable[[], object]:
        return lambda: queue_state("pbs", LrmsContext(
            queue=lrms_pbs.QUEUE, ce_config={"pbs_flavour": "auto"}, hosts=[], clock=lambda: lrms_pbs.NOW,
            timeout_s=60, with_jobs=True, run=lrms_pbs.runner(outputs), vo_map=pbs_vos))

    floor("Torque 6.1.3, qstat -f -x", torque["jobs"], torque_pattern, "Job", jobs, repeat, torque_refresh(torque),
          torque_refresh({**torque, "jobs": ""}))

    grid_engine = lrms_sge.generate(jobs, nodes, ext=True)
    # Grid Engine's job fields, with the name attribute of hard_request, and the job_list openers.
    sge_pattern = re.compile(f"<(job_list|{xmlsafe.alternation(sge._JOB_TAGS_FULL)})"
                             r"""(?:\s+name=["']([^"']*)["'])?(?:\s+[^\s=]+\s*=\s*(?:"[^"]*"|'[^']*'))*\s*"""
                             r"""(?:>([^<]*)|/>)""")
    sge_vos = VoMap.from_values(["user:atlas*=atlas", "user:cms*=cms", "user:lhcb*=lhcb"])

    def sge_refresh(outputs: dict[str, str]) -> Callable[[], object]:
        return lambda: queue_state("sge", LrmsContext(
            queue=lrms_sge.QUEUE, ce_config={}, hosts=[], clock=lambda: float(lrms_sge.NOW), timeout_s=60.0,
            with_jobs=True, run=lrms_sge.runner(outputs), vo_map=sge_vos))

    floor("Grid Engine 8.1.9, qstat -xml -f -r -ext -pri", grid_engine["qstat"], sge_pattern, "job_list", jobs,
          repeat, sge_refresh(grid_engine), sge_refresh(lrms_sge.generate(0, nodes, ext=True)))


if __name__ == "__main__":
    main()
