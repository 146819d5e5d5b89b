#!/usr/bin/env python3
"""PBS LRMS refresh benchmark (issue 13).  Not a test: it prints figures.

    python3 benchmarks/lrms_pbs.py [JOBS] [NODES] [REPEAT]   # default 50000 jobs on 2000 nodes, 3 runs

One refresh = glueinfo.lrms.registry.queue_state("pbs", ...) for one queue:
qstat --version, the queue, pbsnodes and the job list, with every parse,
count, node view and estimate.  The outputs are generated here in the full
form the tools print for the options the plugin uses (every attribute
``qstat -f`` prints for a job, Variable_List included, as in
tests/fixtures/pbs), for both flavours:

- OpenPBS 23.06: ``qstat -f -t -F json``, ``pbsnodes -a -F json``;
- Torque 6.1.3: ``qstat -f -x -t`` XML, ``pbsnodes -x``.

Outputs are handed over from memory (parsing and model cost only; the real
tools add the server's own time).  Two paths: jobs published (``with_jobs``)
and the cheap path (counts and per-VO counts only).  Target: at most 1 s CPU.
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

from glueinfo.lrms.registry import LrmsContext, queue_state  # noqa: E402
from glueinfo.lrms.vo_map import VoMap  # noqa: E402

NOW = 1_732_003_200
QUEUE = "workq"
VOS = ("atlas", "cms", "lhcb", "alice", "dteam", "ops")


def ctime(epoch: float) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(epoch))


def hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def plan(jobs: int, nodes: int, seed: int = 13) -> list[dict[str, object]]:
    """Half the jobs running (packed onto the nodes, 1-8 CPUs, some multi-node), half queued or held."""
    rng = random.Random(seed)
    result = []
    node, used = 0, 0
    for i in range(jobs):
        vo = VOS[i % len(VOS)]
        cpus = rng.choice((1, 1, 1, 2, 4, 8))
        job: dict[str, object] = {"id": f"{1000 + i}.pbs-head", "user": f"{vo}{i % 50:03d}", "group": vo, "cpus": cpus,
                                  "limit": rng.choice((3600, 7200, 86400, 172800)), "name": f"{vo}_job_{i}"}
        if i % 2 == 0 and node < nodes:
            hosts = []
            left = cpus
            while left and node < nodes:
                take = min(left, 32 - used)
                hosts.append((f"cn{node:04d}", used, take))
                used += take
                left -= take
                if used == 32:
                    node, used = node + 1, 0
            job.update(state="R", hosts=hosts, start=NOW - rng.randrange(60, 3600))
        else:
            job.update(state=rng.choice(("Q", "Q", "Q", "H")), hosts=[], start=None)
        result.append(job)
    return result


def variables(user: str) -> dict[str, str]:
    return {"PBS_O_HOME": f"/home/{user}", "PBS_O_LANG": "C.UTF-8", "PBS_O_LOGNAME": user,
            "PBS_O_PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games", "PBS_O_MAIL": f"/var/mail/{user}",
            "PBS_O_SHELL": "/bin/bash", "PBS_O_WORKDIR": f"/home/{user}/work", "PBS_O_SYSTEM": "Linux",
            "PBS_O_QUEUE": QUEUE, "PBS_O_HOST": "ce01.example.org"}


def openpbs_outputs(jobs: list[dict[str, object]], nodes: int) -> dict[str, str]:
    records = {}
    for job in jobs:
        user, hosts = str(job["user"]), list(job["hosts"])  # type: ignore[call-overload]
        record: dict[str, object] = {
            "Job_Name": job["name"], "Job_Owner": f"{user}@ce01.example.org",
            "job_state": job["state"], "queue": QUEUE, "server": "pbs-head", "Checkpoint": "u",
            "ctime": ctime(NOW - 7200), "Error_Path": f"ce01.example.org:/home/{user}/{job['name']}.e",
            "Hold_Types": "u" if job["state"] == "H" else "n", "Join_Path": "n", "Keep_Files": "n", "Mail_Points": "a",
            "mtime": ctime(NOW - 60), "Output_Path": f"ce01.example.org:/home/{user}/{job['name']}.o", "Priority": 0,
            "qtime": ctime(NOW - 7200), "Rerunable": "True",
            "Resource_List": {"mem": f"{2 * int(job['cpus'])}gb", "ncpus": job["cpus"], "nodect": max(1, len(hosts)),  # type: ignore[call-overload]
                              "place": "free", "select": f"1:ncpus={job['cpus']}", "walltime": hms(int(job["limit"]))},  # type: ignore[call-overload]
            "substate": 42 if hosts else 10, "Variable_List": variables(user), "euser": user, "egroup": job["group"],
            "queue_type": "E", "etime": ctime(NOW - 7200), "Submit_arguments": "-l select=1 job.sh",
            "project": "_pbs_project_default", "Submit_Host": "ce01.example.org"}
        if hosts:
            record["exec_host"] = "+".join(f"{h}/{first}*{n}" for h, first, n in hosts)
            record["exec_vnode"] = "+".join(f"({h}:ncpus={n}:mem={2 * n}gb)" for h, _, n in hosts)
            record["stime"] = ctime(int(job["start"]))  # type: ignore[call-overload]
            record["resources_used"] = {"cpupercent": 99, "cput": "00:10:00", "mem": "1048576kb", "ncpus": job["cpus"],
                                        "vmem": "2097152kb", "walltime": hms(NOW - int(job["start"]))}  # type: ignore[call-overload]
            record["session_id"] = 40000
            record["run_count"] = 1
        else:
            record["comment"] = "Not Running: Insufficient amount of resource: ncpus"
        records[str(job["id"])] = record
    assigned: dict[str, int] = {}
    for job in jobs:
        for h, _, n in job["hosts"]:  # type: ignore[attr-defined]
            assigned[h] = assigned.get(h, 0) + n
    node_records = {}
    for i in range(nodes):
        name = f"cn{i:04d}"
        node_records[name] = {
            "Mom": f"{name}.example.org", "Port": 15002, "pbs_version": "23.06.06", "ntype": "PBS",
            "state": "offline" if i % 97 == 0 else ("job-busy" if assigned.get(name, 0) == 32 else "free"), "pcpus": 32,
            "resources_available": {"arch": "linux", "host": name, "mem": "263921664kb", "ncpus": 32, "vnode": name},
            "resources_assigned": {"accelerator_memory": "0kb", "hbmem": "0kb", "mem": "0kb", "naccelerators": 0,
                                   "ncpus": assigned.get(name, 0), "vmem": "0kb"},
            "resv_enable": "True", "sharing": "default_shared", "last_state_change_time": NOW - 3600}
    head = {"timestamp": NOW, "pbs_version": "23.06.06", "pbs_server": "pbs-head"}
    queue = {**head, "Queue": {QUEUE: {"queue_type": "Execution", "total_jobs": len(jobs), "max_run": "[o:PBS_ALL=60000]",
                                       "resources_max": {"walltime": "48:00:00", "cput": "384:00:00", "ncpus": 8,
                                                         "mem": "64gb", "vmem": "96gb"},
                                       "resources_default": {"walltime": "12:00:00", "mem": "2gb"},
                                       "enabled": "True", "started": "True"}}}
    return {"version": "pbs_version = 23.06.06\n", "queue": json.dumps(queue, indent=4),
            "jobs": json.dumps({**head, "Jobs": records}, indent=4), "nodes": json.dumps({**head, "nodes": node_records}, indent=4)}


def torque_outputs(jobs: list[dict[str, object]], nodes: int) -> dict[str, str]:
    parts = ["<Data>"]
    for job in jobs:
        user, hosts = str(job["user"]), list(job["hosts"])  # type: ignore[call-overload]
        used = ""
        if hosts:
            used = (f"<resources_used><cput>00:10:00</cput><energy_used>0</energy_used><mem>1048576kb</mem>"
                    f"<vmem>2097152kb</vmem><walltime>{hms(NOW - int(job['start']))}</walltime></resources_used>")  # type: ignore[call-overload]
        exec_host = "+".join(f"{h}/{first}-{first + n - 1}" for h, first, n in hosts)
        variable_list = ",".join(f"{k}={v}" for k, v in variables(user).items())
        parts.append(
            f"<Job><Job_Id>{job['id']}</Job_Id><Job_Name>{job['name']}</Job_Name><Job_Owner>{user}@ce02.example.org</Job_Owner>"
            f"{used}<job_state>{job['state']}</job_state><queue>{QUEUE}</queue><server>torque-head</server>"
            f"<Checkpoint>u</Checkpoint><ctime>{NOW - 7200}</ctime><Error_Path>ce02.example.org:/home/{user}/x.ER</Error_Path>"
            + (f"<exec_host>{exec_host}</exec_host>" if hosts else "")
            + f"<Hold_Types>n</Hold_Types><Join_Path>n</Join_Path><Keep_Files>n</Keep_Files><Mail_Points>a</Mail_Points>"
            f"<mtime>{NOW - 60}</mtime><Output_Path>ce02.example.org:/home/{user}/x.OU</Output_Path><Priority>0</Priority>"
            f"<qtime>{NOW - 7200}</qtime><Rerunable>True</Rerunable><Resource_List><neednodes>1:ppn={job['cpus']}</neednodes>"
            f"<nodect>1</nodect><nodes>1:ppn={job['cpus']}</nodes><walltime>{hms(int(job['limit']))}</walltime></Resource_List>"  # type: ignore[call-overload]
            f"<Variable_List>{variable_list}</Variable_List><euser>{user}</euser><egroup>{job['group']}</egroup>"
            f"<queue_type>E</queue_type><etime>{NOW - 7200}</etime>"
            + (f"<start_time>{job['start']}</start_time><start_count>1</start_count>" if hosts else "")
            + "<submit_args>job.sh</submit_args><fault_tolerant>False</fault_tolerant><job_radix>0</job_radix>"
            "<submit_host>ce02.example.org</submit_host></Job>")
    parts.append("</Data>\n")
    cpus_of: dict[str, list[str]] = {}
    for job in jobs:
        for h, first, n in job["hosts"]:  # type: ignore[attr-defined]
            cpus_of.setdefault(h, []).append(f"{first}-{first + n - 1}/{job['id']}" if n > 1 else f"{first}/{job['id']}")
    node_parts = ["<Data>"]
    for i in range(nodes):
        name = f"cn{i:04d}"
        taken = cpus_of.get(name, [])
        state = "offline" if i % 97 == 0 else ("job-exclusive" if sum(
            int(x.split("/")[0].split("-")[-1]) - int(x.split("/")[0].split("-")[0]) + 1 for x in taken) == 32 else "free")
        node_parts.append(
            f"<Node><name>{name}</name><state>{state}</state><power_state>Running</power_state><np>32</np>"
            f"<properties>batch</properties><ntype>cluster</ntype>" + (f"<jobs>{','.join(taken)}</jobs>" if taken else "")
            + f"<status>opsys=linux,uname=Linux {name} 5.14.0 #1 SMP x86_64,nsessions=1,nusers=1,idletime=10,"
            f"totmem=263921664kb,availmem=200000000kb,physmem=263921664kb,ncpus=32,loadave=16.00,state=free,"
            f"version=6.1.3,rectime={NOW - 30}</status><mom_service_port>15002</mom_service_port>"
            f"<mom_manager_port>15003</mom_manager_port></Node>")
    node_parts.append("</Data>\n")
    queue = (f"Queue: {QUEUE}\n    queue_type = Execution\n    total_jobs = {len(jobs)}\n    max_running = 60000\n"
             "    resources_max.walltime = 48:00:00\n    resources_max.cput = 384:00:00\n    resources_max.ncpus = 8\n"
             "    resources_max.mem = 64gb\n    resources_max.vmem = 96gb\n    resources_default.walltime = 12:00:00\n"
             "    resources_default.mem = 2gb\n    enabled = True\n    started = True\n\n")
    return {"version": "Version: 6.1.3\n", "queue": queue, "jobs": "".join(parts), "nodes": "".join(node_parts)}


def runner(outputs: dict[str, str]):  # type: ignore[no-untyped-def]
    def run(argv, timeout, env):  # type: ignore[no-untyped-def]
        args = list(argv[1:])
        if args == ["--version"]:
            return 0, outputs["version"], ""
        if os.path.basename(argv[0]) == "pbsnodes":
            return 0, outputs["nodes"], ""
        return 0, outputs["queue" if "-Q" in args else "jobs"], ""

    return run


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    planned = plan(jobs, nodes)
    vo_map = VoMap.from_values([f"group:{vo}={vo}" for vo in VOS])
    for flavour, outputs in (("openpbs", openpbs_outputs(planned, nodes)), ("torque", torque_outputs(planned, nodes))):
        size = len(outputs["jobs"]) / 2**20
        print(f"{flavour}: {jobs} jobs ({size:.1f} MiB of job output, {len(outputs['jobs']) // jobs} bytes/job), "
              f"{nodes} nodes ({len(outputs['nodes']) / 2**20:.1f} MiB)")
        for with_jobs in (True, False):
            cpu = []
            for _ in range(repeat):
                ctx = LrmsContext(queue=QUEUE, ce_config={"pbs_flavour": "auto"}, hosts=[], clock=lambda: NOW,
                                  timeout_s=60, with_jobs=with_jobs, run=runner(outputs), vo_map=vo_map)
                start = time.process_time()
                state = queue_state("pbs", ctx)
                cpu.append(time.process_time() - start)
                assert state.error is None, state.error
                assert state.total_jobs == jobs, state.total_jobs
            print(f"  with_jobs={with_jobs!s:5}  CPU s per refresh: min {min(cpu):.3f}  median {statistics.median(cpu):.3f}"
                  f"  (running {state.running_jobs}, free CPUs {state.free_cpus}, VOs {len(state.vo_counts)})")


if __name__ == "__main__":
    main()
