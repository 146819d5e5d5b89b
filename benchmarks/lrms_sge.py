#!/usr/bin/env python3
"""sge LRMS refresh benchmark (issue 13).  Not a test: it prints figures.

    python3 benchmarks/lrms_sge.py [JOBS] [NODES] [REPEATS]    # default 50000 jobs on 2000 nodes, 5 repeats

One refresh = glueinfo.lrms.registry.queue_state("sge", ...) for one cluster
queue: qstat -help, qstat -xml -f -r [-ext -pri] -u '*', qhost -xml -F slots (no slots
consumable set, as on most cells), qconf -sq, qconf -sp per PE,
and every parse, count and estimate.  The outputs are generated here in the
full form SGE 8.1.9 prints them (as recorded in tests/fixtures/sge/8.1.9):
every element qstat writes for a job with those options, half the jobs
running on 2,000 queue instances, half pending, some array ranges.  They are
handed over from memory, so the figures are glueinfo's own CPU time (parsing
and model), without qstat's.

Two forms: the cheap one (counts and per-VO counts, no job list) and the one
with jobs published (``-ext -pri``, JobInfo for every job).
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

from glueinfo.lrms.registry import LrmsContext, queue_state  # noqa: E402
from glueinfo.lrms.vo_map import VoMap  # noqa: E402

NOW = 1_795_478_400
QUEUE = "grid"
HEAD = ("<?xml version='1.0'?>\n<job_info  xmlns:xsd=\"http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/"
        "resources/schemas/qstat/qstat.xsd\">\n")


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


def job_xml(number: int, running: bool, ext: bool, rng: random.Random, indent: str, tasks: str = "") -> str:
    user = f"{rng.choice(('atlas', 'cms', 'lhcb', 'ops'))}{rng.randrange(100):03d}"
    lines = [f'<job_list state="{"running" if running else "pending"}">', f"  <JB_job_number>{number}</JB_job_number>",
             "  <JAT_prio>0.50500</JAT_prio>"]
    if ext:
        lines += ["  <JAT_ntix>0.50000</JAT_ntix>", "  <JB_nppri>0.50000</JB_nppri>", "  <JB_nurg>0.01000</JB_nurg>",
                  "  <JB_priority>0</JB_priority>"]
    lines += [f"  <JB_name>job{number}</JB_name>", f"  <JB_owner>{user}</JB_owner>"]
    if ext:
        lines += [f"  <JB_project>{user[:-3]}</JB_project>", "  <JB_department>defaultdepartment</JB_department>"]
    if running:
        lines += ["  <state>r</state>", f"  <JAT_start_time>{iso(NOW - rng.randrange(3600))}</JAT_start_time>"]
        if ext:
            lines += ["  <cpu_usage>12.00000</cpu_usage>", "  <mem_usage>3.10000</mem_usage>", "  <io_usage>0.00003</io_usage>"]
    else:
        lines += [f"  <state>{'hqw' if number % 20 == 0 else 'qw'}</state>",
                  f"  <JB_submission_time>{iso(NOW - rng.randrange(7200))}</JB_submission_time>"]
    if ext:
        lines += ["  <tickets>0</tickets>", "  <JB_override_tickets>0</JB_override_tickets>", "  <JB_jobshare>0</JB_jobshare>",
                  "  <otickets>0</otickets>", "  <ftickets>0</ftickets>", "  <stickets>0</stickets>",
                  "  <JAT_share>0.00000</JAT_share>"]
    lines += ["  <slots>1</slots>"]
    if tasks:
        lines += [f"  <tasks>{tasks}</tasks>"]
    lines += [f"  <full_job_name>job{number}</full_job_name>",
              '  <hard_request name="h_rt" resource_contribution="0.000000">7200</hard_request>',
              f"  <hard_req_queue>{QUEUE}</hard_req_queue>", "  <binding>NONE</binding>", "</job_list>"]
    return "".join(f"{indent}{line}\n" for line in lines)


def generate(jobs: int, nodes: int, ext: bool, seed: int = 7) -> dict[str, str]:
    rng = random.Random(seed)
    running = jobs // 2
    per_node = -(-running // nodes)
    parts = [HEAD, "  <queue_info>\n"]
    number = 1
    for n in range(nodes):
        count = min(per_node, running - n * per_node) if n * per_node < running else 0
        parts.append(f"    <Queue-List>\n      <name>{QUEUE}@wn{n:04d}.example.org</name>\n      <qtype>BI</qtype>\n"
                     f"      <slots_used>{count}</slots_used>\n      <slots_resv>0</slots_resv>\n"
                     f"      <slots_total>{per_node + 1}</slots_total>\n      <load_avg>20.10000</load_avg>\n"
                     f"      <arch>lx-amd64</arch>\n")
        if n % 100 == 99:
            parts.append("      <state>d</state>\n")
        for _ in range(count):
            parts.append(job_xml(number, True, ext, rng, "      "))
            number += 1
        parts.append("    </Queue-List>\n")
    parts.append("  </queue_info>\n  <job_info>\n")
    pending = jobs - running
    while pending > 0:
        if pending > 10 and number % 50 == 0:  # an array job's pending range of 10 tasks
            parts.append(job_xml(number, False, ext, rng, "    ", tasks="1-10:1"))
            pending -= 10
        else:
            parts.append(job_xml(number, False, ext, rng, "    "))
            pending -= 1
        number += 1
    parts.append("  </job_info>\n</job_info>\n")
    qhost = ["<?xml version='1.0'?>\n<qhost xmlns:xsd=\"http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/"
             "resources/schemas/qhost/qhost.xsd\">\n <host name='global'>\n"]
    names = ("arch_string", "num_proc", "m_socket", "m_core", "m_thread", "load_avg", "mem_total", "mem_used",
             "swap_total", "swap_used")
    qhost += [f"   <hostvalue name='{k}'>-</hostvalue>\n" for k in names] + [" </host>\n"]
    for n in range(nodes):
        values = ("lx-amd64", str(per_node + 1), "2", str(per_node + 1), str(per_node + 1), "20.10", "251.4G", "80.2G",
                  "8.0G", "0.0")
        qhost.append(f" <host name='wn{n:04d}.example.org'>\n")
        qhost += [f"   <hostvalue name='{k}'>{v}</hostvalue>\n" for k, v in zip(names, values, strict=False)] + [" </host>\n"]
    qhost.append("</qhost>\n")
    # the queue's limits as recorded (h_rt, h_vmem, h_rss, pe_list smp mpi: a qconf -sp for each PE)
    limits = os.path.join(ROOT, "tests", "fixtures", "sge", "8.1.9-limits")
    with open(os.path.join(limits, "qconf_sq_multi.txt")) as handle:
        qconf = handle.read().replace("qname                 multi", f"qname                 {QUEUE}")
    pes = {}
    for pe in ("smp", "mpi"):
        with open(os.path.join(limits, f"qconf_sp_{pe}.txt")) as handle:
            pes[f"pe {pe}"] = handle.read()
    return {"qstat": "".join(parts), "qhost": "".join(qhost), "qconf": qconf, "help": "SGE 8.1.9\nusage: qstat [options]\n",
            **pes}


def runner(outputs: dict[str, str]):
    def run(argv, timeout, env):
        tool = argv[0].rsplit("/", 1)[-1]
        if list(argv[1:2]) == ["-sp"]:
            return 0, outputs[f"pe {argv[2]}"], ""
        return 0, outputs["help" if list(argv[1:]) == ["-help"] else tool], ""

    return run


def refresh(outputs: dict[str, str], with_jobs: bool) -> tuple[float, object]:
    vo_map = VoMap.from_values(["user:atlas*=atlas", "user:cms*=cms", "user:lhcb*=lhcb"])
    ctx = LrmsContext(queue=QUEUE, ce_config={}, hosts=[], clock=lambda: float(NOW), timeout_s=60.0, with_jobs=with_jobs,
                      run=runner(outputs), vo_map=vo_map)
    started = time.process_time()
    state = queue_state("sge", ctx)
    return time.process_time() - started, state


def main() -> None:
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    for with_jobs in (False, True):
        outputs = generate(jobs, nodes, ext=with_jobs)
        times = []
        state = None
        for _ in range(repeats):
            seconds, state = refresh(outputs, with_jobs)
            times.append(seconds)
        assert state is not None and state.error is None, state.error
        form = "with jobs (-ext -pri)" if with_jobs else "counts only"
        print(f"{form:22} {jobs} jobs, {nodes} nodes, qstat XML {len(outputs['qstat']) / 2**20:.1f} MiB: "
              f"CPU per refresh min {min(times):.3f} s, median {statistics.median(times):.3f} s, max {max(times):.3f} s "
              f"(running {state.running_jobs}, waiting {state.waiting_jobs}, "
              f"jobs listed {len(state.jobs)})")


if __name__ == "__main__":
    main()
