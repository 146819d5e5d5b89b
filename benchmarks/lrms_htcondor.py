#!/usr/bin/env python3
"""HTCondor LRMS refresh benchmark (issue 13).  Not a test: it prints figures.

    python3 benchmarks/lrms_htcondor.py [JOBS] [MACHINES] [SCHEDDS]   # default 50000 jobs, 2000 machines, 4 schedds

One refresh = glueinfo.lrms.registry.queue_state("htcondor", ...) for the
queue ``all`` and for an accounting group: condor_version, condor_status
(slots), condor_status -schedd, one condor_q -json per schedd, and every
parse, count and per-VO map.  The outputs are generated in HTCondor 24.0's
printed layout by tests/fixtures/htcondor/make_fixtures.py's printers and
handed over from memory (parsing and model cost only; the real tools add the
collector's and schedds' own time).  It also prints the bytes each listing
costs with the projection glueinfo asks for, against a typical full job ad.
Figures are CPU seconds of this process (every thread: the schedds are asked
concurrently), so a busy machine does not inflate them as wall time would.
Target: at most 1 s CPU per refresh.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures", "htcondor"))

import make_fixtures as fx  # noqa: E402

from glueinfo.lrms.plugins.htcondor import JOB_ATTRS  # noqa: E402
from glueinfo.lrms.registry import LrmsContext, queue_state  # noqa: E402
from glueinfo.lrms.vo_map import VoMap  # noqa: E402

NOW = fx.NOW
VOS = ["atlas", "cms", "lhcb", "alice", "dteam"]


def generate(jobs: int, machines: int, schedds: int, seed: int = 13) -> dict[str, str]:
    rng = random.Random(seed)
    slots = []
    claimed = []
    for m in range(machines):
        host = f"wn{m:05d}.example.org"
        total = rng.choice([32, 48, 64, 128])
        used = 0
        children = []
        while used < total and rng.random() < 0.9:
            cpus = min(rng.choice([1, 8, 8, 8]), total - used)
            used += cpus
            children.append(fx.dslot(host, len(children) + 1, cpus))
            claimed.append((children[-1]["Name"], cpus))
        drain = fx.DRAIN if rng.random() < 0.02 else {}
        slots.append(fx.pslot(host, total - used, total, detected=2 * total, **drain))
        slots.extend(children)
    names = [f"sched{i}.example.org" for i in range(schedds)]
    queues: dict[str, list[dict]] = {name: [] for name in names}
    running = iter(claimed)
    for j in range(jobs):
        vo = rng.choice(VOS)
        group = {"AcctGroup": f"group_{vo}.prod", "AcctGroupUser": f"{vo}pil",
                 "AccountingGroup": f"group_{vo}.prod.{vo}pil", "x509UserProxyVOName": vo}
        slot = next(running, None) if rng.random() < 0.5 else None
        if slot:
            ad = fx.job(1000 + j // 10, j % 10, 2, f"{vo}pil", NOW - 7200, start=NOW - rng.randrange(7000),
                        remote=slot[0], cpus=slot[1], **group)
        else:
            ad = fx.job(1000 + j // 10, j % 10, rng.choice([1, 1, 1, 5]), f"{vo}pil", NOW - 3600, **group)
        queues[names[j % schedds]].append(ad)
    outputs = {
        "version": "$CondorVersion: 24.0.23 2026-08-19 BuildID: 812345 PackageID: 24.0.23-1 $\n",
        "slots": fx.status_json(slots, fx.SLOT_ATTRS),
        "schedds": fx.status_json([{"Name": n, "MaxJobsRunning": 10000, "TotalRunningJobs": 0, "TotalIdleJobs": 0,
                                    "TotalHeldJobs": 0} for n in names], fx.SCHEDD_ATTRS),
    }
    for name, ads in queues.items():
        outputs[f"q {name}"] = fx.q_json(ads, JOB_ATTRS)  # what the plugin asks for (no private fields)
        outputs[f"full {name}"] = fx.q_json(ads, None)
    return outputs


def runner(outputs: dict[str, str]):
    def run(argv, timeout, env):
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        if tool == "condor_version":
            return 0, outputs["version"], ""
        if tool == "condor_status":
            return 0, outputs["schedds" if "-schedd" in args else "slots"], ""
        return 0, outputs[f"q {args[args.index('-name') + 1]}"], ""
    return run


def time_refresh(outputs: dict[str, str], queue: str, by: str, with_jobs: bool, rounds: int = 7) -> list[float]:
    vo_map = VoMap.from_values(["account:group_*=local"])
    times = []
    for _ in range(rounds):
        ctx = LrmsContext(queue=queue, ce_config={"condor_queue_by": by}, hosts=[], clock=lambda: NOW,
                          timeout_s=60, with_jobs=with_jobs, run=runner(outputs), vo_map=vo_map)
        started = time.process_time()
        state = queue_state("htcondor", ctx)
        times.append(time.process_time() - started)
        assert state.error is None, state.error
    return times


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 50000
    machines = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    schedds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    outputs = generate(jobs, machines, schedds)
    q_bytes = sum(len(v) for k, v in outputs.items() if k.startswith("q "))
    full_bytes = sum(len(v) for k, v in outputs.items() if k.startswith("full "))
    n_slots = outputs["slots"].count('"Name"')
    print(f"{jobs} jobs on {schedds} schedds, {machines} machines ({n_slots} slot ads)")
    print(f"condor_status slots -json with projection: {len(outputs['slots']) / 1e6:.2f} MB")
    print(f"condor_q -json with projection: {q_bytes / 1e6:.2f} MB ({q_bytes / jobs:.0f} B/job); "
          f"these ads unprojected: {full_bytes / jobs:.0f} B/job (a real job ad has ~150 attributes, 3-5 kB)")
    for label, queue, by, with_jobs in [("all, counts", "all", "schedd", False),
                                        ("all, job list", "all", "schedd", True),
                                        ("group_atlas, counts", "group_atlas", "accounting_group", False)]:
        times = time_refresh(outputs, queue, by, with_jobs)
        print(f"refresh {label:22s} CPU per refresh: median {statistics.median(times):.3f} s  min {min(times):.3f} s")


if __name__ == "__main__":
    main()
