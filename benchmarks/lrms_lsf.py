#!/usr/bin/env python3
"""LSF LRMS refresh benchmark (issue 13).  Not a test: it prints figures.

    python3 benchmarks/lrms_lsf.py [JOBS] [NODES] [REPEAT]   # default 50000 jobs on 2000 hosts, 3 runs

One refresh = glueinfo.lrms.registry.queue_state("lsf", ...) for one queue:
lsid, bqueues -l, bhosts and bjobs, with every parse, count, host view and
estimate.  The outputs are generated here in the form LSF 10.1.0.13 prints
for the options the plugin uses (``bjobs -o FIELDS -json -hms``: every
field asked for, as in tests/fixtures/lsf/10.1.0.13, gpu_num included; ``bhosts -o ...
-json`` with ngpus and ngpus_alloc) and in the plain forms of LSF 9.1.3 (``bjobs -w``, ``bhosts -w``).
Outputs are handed over from memory (parsing and model cost only).  Two
paths: jobs published (``with_jobs``) and the cheap path (counts and
per-VO counts only).  Target: at most 1 s CPU.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from glueinfo.lrms.plugins.lsf import BHOSTS_FIELDS, BJOBS_FIELDS  # noqa: E402
from glueinfo.lrms.registry import LrmsContext, queue_state  # noqa: E402
from glueinfo.lrms.vo_map import VoMap  # noqa: E402

NOW = 1_732_003_200
QUEUE = "grid"
VOS = ("atlas", "cms", "lhcb", "alice", "dteam", "ops")
SLOTS = 32


def stamp(epoch: float) -> str:
    return time.strftime("%b %d %H:%M %Y", time.gmtime(epoch))


def hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def generate(jobs: int, hosts: int, seed: int = 17) -> dict[str, str]:
    rng = random.Random(seed)
    used = [0] * hosts
    records, wide = [], ["JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME"]
    listed = []  # the same jobs with the fields asked for when jobs are listed (lsf.BJOBS_LISTED_FIELDS)
    host = 0
    for i in range(jobs):
        vo = VOS[i % len(VOS)]
        user, slots, limit = f"{vo}{i % 50:03d}", rng.choice((1, 1, 1, 2, 4, 8)), rng.choice((3600, 7200, 86400))
        job_id, name = str(100000 + i), f"{vo}_job_{i}"
        submit = NOW - rng.randrange(600, 86400)
        placed: list[tuple[str, int]] = []
        if i % 2 == 0:
            left = slots
            while left and host < hosts:
                take = min(left, SLOTS - used[host])
                placed.append((f"h{host:04d}", take))
                used[host] += take
                left -= take
                if used[host] == SLOTS:
                    host += 1
        stat = "RUN" if placed else rng.choice(("PEND", "PEND", "PEND", "PSUSP"))
        start = NOW - rng.randrange(60, 3600) if placed else None
        exec_host = ":".join(f"{n}*{h}" if n > 1 else h for h, n in placed)
        records.append({
            "JOBID": job_id, "JOBINDEX": "0", "STAT": stat, "USER": user, "USER_GROUP": vo, "QUEUE": QUEUE,
            "PROJ_NAME": "default", "JOB_NAME": name, "SUBMIT_TIME": stamp(submit),
            "START_TIME": stamp(start) if start else "-", "FINISH_TIME": f"{stamp(start + limit)} L" if start else "-",
            "EXEC_HOST": exec_host, "NREQ_SLOT": str(slots), "NALLOC_SLOT": str(slots if placed else 0),
            "RUNTIMELIMIT": hms(limit), "RUN_TIME": hms(NOW - start if start else 0),
            "PEND_REASON": "" if placed else "Job slot limit reached;"})
        # LSF >= 10.1.0.6 is asked for gpu_num too (issue 27): "-" for a job that asked for no GPU
        listed.append({**records[-1], "COMMAND": f"/home/{user}/jobs/{name}.sh -n {slots}", "GPU_NUM": "-"})
        wide.append(f"{job_id:<7} {user:<7} {stat:<5} {QUEUE:<10} ce01.example.org {exec_host or '':<11} {name:<10} "
                    f"{time.strftime('%b %d %H:%M', time.gmtime(submit))}")
    host_records, host_wide = [], ["HOST_NAME          STATUS          JL/U    MAX  NJOBS    RUN  SSUSP  USUSP    RSV "]
    for h in range(hosts):
        status = "closed_Adm" if h % 97 == 0 else ("closed_Full" if used[h] == SLOTS else "ok")
        host_records.append({"HOST_NAME": f"h{h:04d}", "STATUS": status, "MAX": str(SLOTS), "NJOBS": str(used[h]),
                             "RUN": str(used[h]), "SSUSP": "0", "USUSP": "0", "RSV": "0",
                             "COMMENTS": "maintenance" if h % 97 == 0 else "",
                             "NGPUS": "0", "NGPUS_ALLOC": "0"})  # asked from 10.1.0.6 on (issue 27): no GPU here
        host_wide.append(f"h{h:04d}              {status:<15} -       {SLOTS:>4} {used[h]:>6} {used[h]:>6}      0      0      0")
    queue = ("\nQUEUE: grid\n  -- Grid jobs.\n\nPARAMETERS/STATISTICS\n"
             "PRIO NICE STATUS          MAX JL/U JL/P JL/H NJOBS  PEND   RUN SSUSP USUSP  RSV PJOBS\n"
             f" 40    0  Open:Active       -    -    -    - {jobs:>5}     0     0     0     0    0     0\n\n"
             "DEFAULT LIMITS:\n RUNLIMIT\n 720.0 min\n\n"
             "MAXIMUM LIMITS:\n CPULIMIT                RUNLIMIT\n 5760.0 min              2880.0 min\n\n"
             " TASKLIMIT\n 1     1     8\n\n MEMLIMIT  SWAPLIMIT\n     16 G      32 G\n\nUSERS: all\nHOSTS:  all\n")
    return {
        "lsid10": "IBM Spectrum LSF Standard 10.1.0.13, Apr 15 2022\n",
        "lsid9": "IBM Platform LSF Standard 9.1.3.0, Jul 04 2014\n",
        "bqueues": queue,
        "bjobs_json": json.dumps({"COMMAND": "bjobs", "JOBS": jobs, "RECORDS": records}, indent=2),
        "bjobs_json_listed": json.dumps({"COMMAND": "bjobs", "JOBS": jobs, "RECORDS": listed}, indent=2),
        "bhosts_json": json.dumps({"COMMAND": "bhosts", "HOSTS": hosts, "RECORDS": host_records}, indent=2),
        "bjobs_wide": "\n".join(wide) + "\n", "bhosts_wide": "\n".join(host_wide) + "\n"}


def runner(outputs: dict[str, str], version: str):  # type: ignore[no-untyped-def]
    def run(argv, timeout, env):  # type: ignore[no-untyped-def]
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        if tool == "lsid":
            return 0, outputs[version], ""
        if tool == "bqueues":
            return 0, outputs["bqueues"], ""
        form = "json" if "-json" in args else "wide"
        if tool == "bjobs" and "-json" in args and "command" in args[args.index("-o") + 1].split():
            form = "json_listed"  # the job list's fields
        return 0, outputs[f"{tool}_{form}"], ""

    return run


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    hosts = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    outputs = generate(jobs, hosts)
    assert BJOBS_FIELDS and BHOSTS_FIELDS  # the generator writes exactly these fields
    vo_map = VoMap.from_values([f"group:{vo}={vo}" for vo in VOS])
    for version, label, key in (("lsid10", "LSF 10.1.0.13 JSON", "bjobs_json"), ("lsid9", "LSF 9.1.3 plain", "bjobs_wide")):
        listed = f", {len(outputs['bjobs_json_listed']) // jobs} bytes/job listed" if key == "bjobs_json" else ""
        print(f"{label}: {jobs} jobs ({len(outputs[key]) / 2**20:.1f} MiB of bjobs output, "
              f"{len(outputs[key]) // jobs} bytes/job{listed}), {hosts} hosts")
        for with_jobs in (True, False):
            cpu = []
            for _ in range(repeat):
                ctx = LrmsContext(queue=QUEUE, ce_config={}, hosts=[], clock=lambda: NOW, timeout_s=60,
                                  with_jobs=with_jobs, run=runner(outputs, version), vo_map=vo_map)
                start = time.process_time()
                state = queue_state("lsf", ctx)
                cpu.append(time.process_time() - start)
                assert state.error is None, state.error
                assert state.total_jobs == jobs, state.total_jobs
            print(f"  with_jobs={with_jobs!s:5}  CPU s per refresh: min {min(cpu):.3f}  median {statistics.median(cpu):.3f}"
                  f"  (running {state.running_jobs}, free CPUs {state.free_cpus}, VOs {len(state.vo_counts)})")


if __name__ == "__main__":
    main()
