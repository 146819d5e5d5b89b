#!/usr/bin/env python3
"""LRMS refresh benchmark (issue 7).  Not a test: it prints figures.

    python3 benchmarks/lrms.py [JOBS] [NODES]     # default 10000 jobs on 500 nodes

One refresh = glueinfo.lrms.registry.queue_state("slurm", ...) for one partition:
sinfo --version, scontrol show partition, sinfo (JSON or text), squeue, and
every parse, count and estimate.  The outputs are generated here in the exact
formats of Slurm 22.05 (as recorded in tests/fixtures/slurm/22.05) and
answered two ways:

- in-process: the commands' outputs handed over from memory (parsing and
  model cost only);
- subprocess: fake sinfo/scontrol/squeue scripts that print the same files,
  so process start-up and reading 10,000 jobs through a pipe are counted too
  (the real Slurm tools add the controller's own time on top).

Target: one refresh of a 10,000-job queue under 300 ms.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from glueinfo.lrms.registry import LrmsContext, queue_state  # noqa: E402
from glueinfo.sss.job_xml import render_jobs  # noqa: E402

NOW = 1_710_000_000
PARTITION = "batch"


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


def duration(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def job_details(user: str, rng: random.Random, gpus: int = 0) -> list[str]:
    """squeue's Command, WorkDir, exit_code, GroupName, PriorityLong, Dependency, Feature, AllocNodes, NumTasks,
    tres-per-job, tres-per-node, tres-per-task (a job asking for ``gpus`` GPUs per node: --gres=gpu:N)."""
    script = rng.choice(("run.sh", "sim.sh --steps 100", "(null)"))
    dependency = f"afterok:{rng.randint(90000, 99999)}(unfulfilled)" if rng.random() < 0.05 else "(null)"
    return [f"/home/{user}/jobs/{script}" if script != "(null)" else script, f"/home/{user}/jobs", "0",
            f"grp{user[-1]}", str(rng.randint(1, 2**32 - 2)), dependency, rng.choice(("(null)", "ib")),
            rng.choice(("login1", "login2")), str(rng.choice((1, 1, 2, 4))),
            "N/A", f"gres:gpu:{gpus}" if gpus else "N/A", "N/A"]


def generate(jobs: int, nodes: int, seed: int = 7, forecasts: bool = True, gpus: int = 0) -> dict[str, str]:
    """Recorded-style outputs for one partition: half the jobs running, half waiting (half of those
    with a start forecast, none without ``forecasts``: sched/builtin, or a backfill not run yet).
    ``gpus``: each node's GPUs (gpu:a100:N GRES; 0: none, Gres "(null)"), one job in four asking for one."""
    rng = random.Random(seed)
    cpus_per_node = 64
    names = [f"n{i:04d}" for i in range(1, nodes + 1)]
    partition = (f"PartitionName={PARTITION} AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES "
                 f"QoS=N/A DefaultTime=01:00:00 DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=4 "
                 f"MaxTime=2-00:00:00 MinNodes=0 LLN=NO MaxCPUsPerNode=32 Nodes=n[0001-{nodes:04d}] "
                 f"PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE "
                 f"PreemptMode=OFF State=UP TotalCPUs={nodes * cpus_per_node} TotalNodes={nodes} "
                 f"SelectTypeParameters=NONE JobDefaults=(null) DefMemPerCPU=2000 MaxMemPerNode=256000\n")
    allocated = {name: 0 for name in names}
    gpus_used = {name: 0 for name in names}
    records, counted = [], []
    for i in range(jobs):
        job_id = str(100000 + i) if i % 10 else f"{100000 + i}_{i % 7}"
        cpus = rng.choice((1, 1, 2, 4, 8, 16))
        limit = rng.choice((600, 3600, 14400, 86400))
        submit = NOW - rng.randint(60, 86400)
        user = f"user{rng.randint(1, 200):03d}"
        name = rng.choice(("sim", "analysis|step 2", "train model", "a" * 60))
        job_gpus = 1 if gpus and i % 4 == 0 else 0
        if i < jobs // 2:
            node = names[i % nodes]
            allocated[node] = min(cpus_per_node, allocated[node] + cpus)
            gpus_used[node] = min(gpus, gpus_used[node] + job_gpus)
            start = NOW - rng.randint(0, limit - 1)
            fields = [job_id, "RUNNING", "None", user, "acct", PARTITION, iso(submit), iso(start), iso(start + limit),
                      duration(limit), duration(NOW - start), str(cpus), f"cpu={cpus},mem={cpus * 2000}M,node=1,billing={cpus}",
                      "1", node, "normal", *job_details(user, rng, job_gpus), name]
        else:
            forecast = iso(NOW + rng.randint(60, 7 * 86400)) if i % 2 else "N/A"
            forecast = forecast if forecasts else "N/A"
            reason = "Resources" if i % 3 else "Priority"
            fields = [job_id, "PENDING", reason, user, "acct", PARTITION, iso(submit), forecast, "N/A",
                      duration(limit), "0:00", str(cpus), f"cpu={cpus},mem={cpus * 2000}M,node=1,billing={cpus}",
                      "1", "", "normal", *job_details(user, rng, job_gpus), name]
        records.append("|~|".join(fields) + "|~.\n")
        # what squeue prints for the counts only: no tres-per-job/-node/-task (the three before Name)
        counted.append("|~|".join(fields[:-4] + fields[-1:]) + "|~.\n")
    def indexes(used: int) -> str:  # GresUsed's device list: N/A, 0, 0-2
        return "N/A" if not used else "0" if used == 1 else f"0-{used - 1}"

    gres = {n: (f"gpu:a100:{gpus}", f"gpu:a100:{gpus_used[n]}(IDX:{indexes(gpus_used[n])})") if gpus
            else ("(null)", "(null)") for n in names}
    sinfo_text = "".join(f"{n}|{n}|{a}/{cpus_per_node - a}/0/{cpus_per_node}|{'mixed' if a else 'idle'}|"
                         f"{gres[n][0]}|{gres[n][1]}\n" for n, a in allocated.items())
    sinfo_json = json.dumps({
        "meta": {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"release": "22.05.8"}}, "errors": [],
        "nodes": [{"name": n, "hostname": n, "cpus": cpus_per_node, "alloc_cpus": a, "idle_cpus": cpus_per_node - a,
                   "state": "mixed" if a else "idle", "state_flags": [], "partitions": [PARTITION],
                   "gres": gres[n][0] if gpus else "", "gres_used": gres[n][1] if gpus else ""}
                  for n, a in allocated.items()]}, indent=2)
    return {"version": "slurm-wlm 22.05.8\n", "partition": partition, "sinfo_text": sinfo_text,
            "sinfo_json": sinfo_json, "squeue": "".join(records), "squeue_counts": "".join(counted)}


def memory_runner(outputs: dict[str, str]):
    def run(argv, timeout, env):
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        if tool == "sinfo" and args == ["--version"]:
            return 0, outputs["version"], ""
        if tool == "scontrol":
            return 0, outputs["partition"], ""
        if tool == "sinfo":
            return 0, outputs["sinfo_json" if "--json" in args else "sinfo_text"], ""
        token = re.search(r"\|([0-9a-f]+)\.$", args[-1]).group(1)
        return 0, outputs["squeue" if "tres-per-job" in args[-1] else "squeue_counts"].replace("~", token), ""
    return run


def write_fake_tools(outputs: dict[str, str], directory: str) -> None:
    for key, text in outputs.items():
        with open(os.path.join(directory, key + ".out"), "w") as handle:
            handle.write(text)
    scripts = {
        "sinfo": f"""case "$*" in --version) exec cat {directory}/version.out;; *--json*) exec cat {directory}/sinfo_json.out;;
                     *) exec cat {directory}/sinfo_text.out;; esac""",
        "scontrol": f"exec cat {directory}/partition.out",
        # the -O argument is last; its record end is |TOKEN.
        "squeue": f"""for last; do :; done; token=${{last##*|}}; token=${{token%.}}
                      case "$last" in *tres-per-job*) out=squeue;; *) out=squeue_counts;; esac
                      exec sed -e "s/~/$token/g" {directory}/$out.out""",
    }
    for name, body in scripts.items():
        path = os.path.join(directory, name)
        with open(path, "w") as handle:
            handle.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, 0o755)


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: unlike wall time, not
    inflated when other work shares the machine's cores."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(ctx: LrmsContext, runs: int) -> tuple[float, float, float, object]:
    """(median wall ms, min wall ms, median CPU ms, last state)."""
    walls, cpus = [], []
    state = None
    for _ in range(runs):
        started, cpu_started = time.perf_counter(), cpu_seconds()
        state = queue_state("slurm", ctx)
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_seconds() - cpu_started)
        assert state.error is None, state.error
    return statistics.median(walls) * 1000, min(walls) * 1000, statistics.median(cpus) * 1000, state


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    outputs = generate(jobs, nodes)
    print(f"slurm refresh, partition of {jobs} jobs on {nodes} nodes "
          f"(squeue output {len(outputs['squeue']) / 1e6:.2f} MB, sinfo --json {len(outputs['sinfo_json']) / 1e3:.0f} kB)")
    print(f"  load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs (wall times grow with it; CPU times do not)")
    runs = 11
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for label, cfg, with_jobs in (("in-process, counts only, sinfo --json", {}, False),
                                  ("in-process, counts only, sinfo text  ", {"slurm_json": "no"}, False),
                                  ("in-process, with the job list       ", {}, True)):
        ctx = LrmsContext(queue=PARTITION, ce_config=cfg, hosts=[], clock=lambda: float(NOW), timeout_s=30,
                          with_jobs=with_jobs, run=memory_runner(outputs))
        median, best, cpu, state = timed(ctx, runs)
        print(f"  {label}  wall median {median:6.1f} ms  min {best:6.1f} ms   CPU median {cpu:6.1f} ms")
    print(f"  state: running {state.running_jobs}, waiting {state.waiting_jobs}, total CPUs {state.total_cpus}, "
          f"free {state.free_cpus}, ERT {state.estimated_response_time_s} s, WRT {state.worst_response_time_s} s")
    # Accelerators (issue 27): every node with 4 GPUs (gpu GRES), a job in four asking for one.
    with_gpus = generate(jobs, nodes, gpus=4)
    for label, cfg, with_jobs in (("in-process, counts only, 4 GPUs a node ", {}, False),
                                  ("in-process, job list, 4 GPUs a node   ", {}, True)):
        ctx = LrmsContext(queue=PARTITION, ce_config=cfg, hosts=[], clock=lambda: float(NOW), timeout_s=30,
                          with_jobs=with_jobs, run=memory_runner(with_gpus))
        median, best, cpu, gpu_state = timed(ctx, runs)
        print(f"  {label}  wall median {median:6.1f} ms  min {best:6.1f} ms   CPU median {cpu:6.1f} ms")
    print(f"  GPUs: {gpu_state.accelerators}")
    # The waiting times' other paths (issue 25): no forecast (the waits of the jobs started in the
    # last hour are read, SubmitTime parsed for those), and per-VO figures from a [vos] map.
    from glueinfo.lrms.vo_map import VoMap
    unplanned = generate(jobs, nodes, forecasts=False)
    vo_map = VoMap.from_values(["user:user0[0-6]*=atlas", "user:user1[0-3]*=cms", "user:user1[4-9]*=lhcb"])
    for label, answers, extra in (("in-process, counts only, no forecast   ", unplanned, {}),
                                  ("in-process, counts only, [vos] map     ", outputs, {"vo_map": vo_map}),
                                  ("in-process, no forecast, [vos] map     ", unplanned, {"vo_map": vo_map})):
        ctx = LrmsContext(queue=PARTITION, ce_config={}, hosts=[], clock=lambda: float(NOW), timeout_s=30,
                          run=memory_runner(answers), **extra)
        median, best, cpu, other = timed(ctx, runs)
        print(f"  {label}  wall median {median:6.1f} ms  min {best:6.1f} ms   CPU median {cpu:6.1f} ms"
              f"   ERT/WRT {other.estimated_response_time_s}/{other.worst_response_time_s} s")
    with tempfile.TemporaryDirectory() as directory:
        write_fake_tools(outputs, directory)
        for label, with_jobs in (("subprocess, counts only              ", False),
                                 ("subprocess, with the job list        ", True)):
            ctx = LrmsContext(queue=PARTITION, ce_config={"slurm_bin_dir": directory}, hosts=[], clock=lambda: float(NOW),
                              timeout_s=30, with_jobs=with_jobs)
            median, best, cpu, _ = timed(ctx, runs)
            print(f"  {label}  wall median {median:6.1f} ms  min {best:6.1f} ms   CPU median {cpu:6.1f} ms")
    started = time.perf_counter()
    xml = render_jobs(state.jobs)
    print(f"  Job XML of {len(state.jobs)} jobs: {(time.perf_counter() - started) * 1000:.0f} ms, {len(xml) / 1e6:.1f} MB")
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"  peak RSS {rss_after / 1024:.0f} MB (grew {(rss_after - rss_before) / 1024:.0f} MB during the runs)")
    print("  target: one refresh of a 10,000-job queue < 300 ms")


if __name__ == "__main__":
    main()
