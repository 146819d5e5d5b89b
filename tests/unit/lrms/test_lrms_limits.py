"""The per-job limits each batch system states, as a broker reads them (issue 25 item 3).

Each test runs a plugin on recorded outputs (tests/fixtures/<lrms>/, each folder's README says
where they come from) inside a whole site: the config is read, the site assembled, the plugin asked
with the CE's own context (only its command runner and clock replaced) and the GLUE 1.3 and GLUE 2
LDIF made by the publish layer, then parsed back.  The expected figures are read off the recorded
files by hand; the unit arithmetic (GLUE 1.3 minutes, GLUE 2 seconds, MB) is written out.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import pytest
from glue_sites import CLASSES, make_host
from paths import FIXTURES
from slurm_records import now_of
from slurm_records import replay as slurm_replay
from test_lrms_htcondor import NOW as HTCONDOR_NOW
from test_lrms_htcondor import replay as htcondor_replay
from test_lrms_lsf import LSF10
from test_lrms_lsf import replay as lsf_replay
from test_lrms_pbs import NOW as PBS_NOW
from test_lrms_pbs import OPENPBS, TORQUE
from test_lrms_pbs import replay as pbs_replay

from glueinfo.core.config import parse_text
from glueinfo.core.ldif import Entry, parse_ldif
from glueinfo.lrms.plugins.slurm import NodeCpus, parse_partition, partition_limits
from glueinfo.lrms.registry import LrmsContext, queue_state
from glueinfo.publish.documents import Publisher
from glueinfo.site.assemble import assemble_snapshots
from glueinfo.site.publish_settings import publish_settings

Runner = Callable[[Sequence[str], float, Mapping[str, str]], tuple[int, str, str]]

SITE = """\
[site]
id = EXAMPLE
name = Example
[glue]
versions = 1.3, 2.0
[cluster:batch]
hosts = wn*
"""

# What GLUE 1.3 and GLUE 2 say of a job's limits: a broker reads these.
GLUE13 = ("GlueCEPolicyMaxWallClockTime", "GlueCEPolicyMaxCPUTime", "GlueCEPolicyMaxObtainableWallClockTime",
          "GlueCEPolicyMaxObtainableCPUTime", "GlueCEPolicyMaxSlotsPerJob")
GLUE2 = ("GLUE2ComputingShareMaxWallTime", "GLUE2ComputingShareDefaultWallTime", "GLUE2ComputingShareMaxCPUTime",
         "GLUE2ComputingShareDefaultCPUTime", "GLUE2ComputingShareMaxSlotsPerJob", "GLUE2ComputingShareMaxMainMemory",
         "GLUE2ComputingShareGuaranteedMainMemory", "GLUE2ComputingShareMaxVirtualMemory",
         "GLUE2ComputingShareGuaranteedVirtualMemory")


def published(lrms: str, queue: str, run: Runner, now: float, section: str = "") -> tuple[dict[str, str], dict[str, str]]:
    """The limits of the GlueCE and of the GLUE 2 ComputingShare (VO atlas) of one CE whose plugin
    answers from ``run``: {attribute: value} of those in GLUE13 / GLUE2 that are published."""
    config = parse_text(SITE + f"[ce:{queue}]\ncluster = batch\nhost = ce1.example.org\nlrms = {lrms}\nqueue = {queue}\n"
                               f"access = VO:atlas\n{section}")
    asked: list[str] = []

    def ask(name: str, ctx: LrmsContext) -> Any:
        asked.append(name)
        return queue_state(name, dataclasses.replace(ctx, run=run, clock=lambda: now))

    site = assemble_snapshots(config, [make_host(CLASSES[0][0], 0, collected_at=now)], lambda: now,
                              local_fqdn="ce1.example.org", queue_state=ask)
    assert asked == [lrms]
    entries = parse_ldif(Publisher(publish_settings(config), check_health=False).documents(site).ldif.decode())
    ce = one(entries, "GlueCE")
    share = one(entries, "GLUE2ComputingShare")
    return ({name: str(ce.first(name)) for name in GLUE13 if ce.first(name) is not None},
            {name: str(share.first(name)) for name in GLUE2 if share.first(name) is not None})


def one(entries: list[Entry], object_class: str) -> Entry:
    found = [e for e in entries if object_class in e.object_classes]
    assert len(found) == 1, [e.dn for e in found]
    return found[0]


def glue2(**figures: int) -> dict[str, str]:
    return {f"GLUE2ComputingShare{name}": str(value) for name, value in figures.items()}


def glue13(**figures: int) -> dict[str, str]:
    return {f"GlueCEPolicy{name}": str(value) for name, value in figures.items()}


# -- Slurm: tests/fixtures/slurm/22.05-limits, recorded -----------------------------------------

SLURM = "22.05-limits"


def slurm(queue: str, section: str = "", calls: Optional[list[Any]] = None) -> tuple[dict[str, str], dict[str, str]]:
    return published("slurm", queue, slurm_replay(SLURM, calls=calls), now_of(SLURM), section)


def test_slurm_partition_limits_from_scontrol_without_another_command():
    calls: list[Any] = []
    ce, share = slurm("long", calls=calls)
    # MaxTime=2-00:00:00 (2880 min), DefaultTime=01:00:00; MaxNodes=1 x MaxCPUsPerNode=1 (the node has 2 CPUs);
    # MaxMemPerNode=100, DefMemPerCPU=50 (MB)
    assert ce == glue13(MaxWallClockTime=2880, MaxObtainableWallClockTime=2880, MaxSlotsPerJob=1)
    assert share == glue2(MaxWallTime=2 * 86400, DefaultWallTime=3600, MaxSlotsPerJob=1, MaxMainMemory=100,
                          GuaranteedMainMemory=50)
    # the partition's one scontrol answer holds them all: no command beyond the counts' own
    assert sorted(c[0] for c in calls) == ["scontrol", "sinfo", "sinfo", "squeue"]


def test_slurm_per_cpu_memory_and_a_max_nodes_beyond_the_partition():
    ce, share = slurm("percpu")
    # MaxTime=00:20:00, DefaultTime=00:10:00; MaxNodes=4 but one node of 2 CPUs; MaxMemPerCPU=200, DefMemPerNode=80
    assert ce == glue13(MaxWallClockTime=20, MaxObtainableWallClockTime=20, MaxSlotsPerJob=2)
    assert share == glue2(MaxWallTime=1200, DefaultWallTime=600, MaxSlotsPerJob=2, MaxMainMemory=200,
                          GuaranteedMainMemory=80)


def test_slurm_partition_without_limits_publishes_what_slurm_gives_a_job_and_no_memory():
    ce, share = slurm("short")
    # DefaultTime=NONE: a job gets MaxTime (00:30:00); MaxNodes/MaxCPUsPerNode UNLIMITED: the partition's 2 CPUs
    # (TotalCPUs=2); DefMemPerNode/MaxMemPerNode UNLIMITED: left out, not a huge number
    assert ce == glue13(MaxWallClockTime=30, MaxObtainableWallClockTime=30, MaxSlotsPerJob=2)
    assert share == glue2(MaxWallTime=1800, DefaultWallTime=1800, MaxSlotsPerJob=2)


def test_slurm_a_value_in_the_ce_section_wins_over_the_partitions():
    ce, share = slurm("long", "max_slots_per_job = 4\ndefault_wall_clock_time = 30\nmax_main_memory = 64\n"
                              "max_obtainable_wall_clock_time = 2000\n")
    assert ce == glue13(MaxWallClockTime=2880, MaxObtainableWallClockTime=2000, MaxSlotsPerJob=4)
    # GuaranteedMainMemory is not configured: Slurm's DefMemPerCPU stays
    assert share == glue2(MaxWallTime=2 * 86400, DefaultWallTime=30 * 60, MaxSlotsPerJob=4, MaxMainMemory=64,
                          GuaranteedMainMemory=50)


def test_slurm_a_partition_slurm_does_not_have_publishes_no_limit():
    ce, share = slurm("lng")  # `scontrol --all show partition` lists long, percpu, short
    assert ce == {} and share == {}


def test_slurm_max_slots_per_job_counts_the_largest_nodes_each_up_to_max_cpus_per_node():
    line = ("PartitionName=big MaxNodes=2 MaxCPUsPerNode=48 MaxTime=UNLIMITED DefaultTime=NONE State=UP TotalCPUs=144 "
            "Nodes=n[1-4]")
    nodes = [NodeCpus(f"n{i}", f"n{i}", 0, cpus, 0, cpus, "idle") for i, cpus in enumerate((16, 64, 32, 32), 1)]
    # the two largest nodes, n2 (64, counted 48) and n3 or n4 (32): 48 + 32
    assert partition_limits(parse_partition(line, "big"), nodes, None).max_slots_per_job == 80
    # without sinfo's node list: MaxNodes x MaxCPUsPerNode, 2 x 48, under TotalCPUs 144
    assert partition_limits(parse_partition(line, "big"), None, None).max_slots_per_job == 96
    unbounded = line.replace("MaxNodes=2", "MaxNodes=UNLIMITED")
    assert partition_limits(parse_partition(unbounded, "big"), nodes, None).max_slots_per_job == 48 + 32 + 32 + 16
    # no node list, MaxNodes UNLIMITED but MaxCPUsPerNode set: how many CPUs each node gives is not known
    assert partition_limits(parse_partition(unbounded, "big"), None, None).max_slots_per_job is None
    # an unlimited MaxTime leaves the default out too (DefaultTime NONE: the job gets MaxTime)
    assert partition_limits(parse_partition(line, "big"), nodes, None).default_wall_clock_time_s is None


def test_slurm_the_default_time_never_passes_the_qos_max_wall():
    # 23.02 gpu: MaxTime=3-00:00:00, DefaultTime=NONE, QoS gpuqos MaxWall 2-00:00:00 (sacctmgr_qos_gpuqos.txt)
    ce, share = published("slurm", "gpu", slurm_replay("23.02"), now_of("23.02"))
    assert share["GLUE2ComputingShareMaxWallTime"] == share["GLUE2ComputingShareDefaultWallTime"] == str(2 * 86400)
    # MaxNodes and MaxCPUsPerNode UNLIMITED: the three nodes' 32 CPUs each, scontrol's TotalCPUs=96
    assert ce["GlueCEPolicyMaxSlotsPerJob"] == share["GLUE2ComputingShareMaxSlotsPerJob"] == "96"


# -- PBS: tests/fixtures/pbs/*/qstat_Q_mcore.* ---------------------------------------------------

@pytest.mark.parametrize("directory", [OPENPBS, TORQUE], ids=["openpbs", "torque"])
def test_pbs_resources_max_and_default(directory):
    ce, share = published("pbs", "mcore", pbs_replay(directory), PBS_NOW)
    # resources_max walltime 72:00:00, cput 576:00:00, ncpus 8, mem 32gb, vmem 48gb;
    # resources_default walltime 12:00:00, cput 96:00:00, mem 2000mb
    assert ce == glue13(MaxWallClockTime=72 * 60, MaxCPUTime=576 * 60, MaxObtainableWallClockTime=72 * 60,
                        MaxObtainableCPUTime=576 * 60, MaxSlotsPerJob=8)
    assert share == glue2(MaxWallTime=72 * 3600, DefaultWallTime=12 * 3600, MaxCPUTime=576 * 3600,
                          DefaultCPUTime=96 * 3600, MaxSlotsPerJob=8, MaxMainMemory=32 * 1024, GuaranteedMainMemory=2000,
                          MaxVirtualMemory=48 * 1024)


def test_pbs_a_queue_without_those_resources_publishes_only_its_times():
    # workq: resources_max cput 96:00:00 and walltime 48:00:00, resources_default walltime 01:00:00
    ce, share = published("pbs", "workq", pbs_replay(OPENPBS), PBS_NOW)
    assert ce == glue13(MaxWallClockTime=48 * 60, MaxCPUTime=96 * 60, MaxObtainableWallClockTime=48 * 60,
                        MaxObtainableCPUTime=96 * 60)
    assert share == glue2(MaxWallTime=48 * 3600, DefaultWallTime=3600, MaxCPUTime=96 * 3600)


# -- Grid Engine: tests/fixtures/sge/8.1.9-limits, recorded ---------------------------------------

SGE = FIXTURES / "sge" / "8.1.9-limits"


def sge_replay(directory=SGE, calls: Optional[list[Any]] = None) -> Runner:
    """A runner answering Grid Engine's commands from ``directory``."""
    def run(argv, timeout, env):
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        if calls is not None:
            calls.append([tool, *args])
        name = {("qstat", "-help"): "qstat_help.txt", ("qhost", "-xml"): "qhost.xml",
                ("qconf", "-sql"): "qconf_sql.txt"}.get((tool, args[0]))
        if tool == "qstat" and args[:3] == ["-xml", "-f", "-r"]:
            name = "qstat.xml"
        elif tool == "qconf" and args[0] in ("-sq", "-sp"):
            name = f"qconf_{args[0][1:]}_{args[1]}.txt"
        if name is None:
            raise AssertionError(f"unexpected command {argv}")
        if not (directory / name).exists():
            return 1, "", f'No cluster queue or queue instance matches the phrase "{args[1]}"\n'
        return 0, (directory / name).read_text(), ""
    return run


def sge(queue: str, calls: Optional[list[Any]] = None) -> tuple[dict[str, str], dict[str, str]]:
    return published("sge", queue, sge_replay(calls=calls), float((SGE / "now").read_text()))


def test_sge_queue_limits_and_parallel_environment_slots():
    calls: list[Any] = []
    ce, share = sge("multi", calls)
    # h_rt 24:00:00 (86400 s) and s_rt 86000: the tighter, 86000 s = 1433 min rounded down; h_cpu 48:00:00;
    # h_rss 2G = 2048 MB; h_vmem 4G (4096 MB) and s_vmem 3500M: the tighter, 3500 MB;
    # pe_list smp (999 slots, $pe_slots: the 4 slots of multi@vm) and mpi (3 slots): 4
    assert ce == glue13(MaxWallClockTime=1433, MaxCPUTime=48 * 60, MaxObtainableWallClockTime=1433,
                        MaxObtainableCPUTime=48 * 60, MaxSlotsPerJob=4)
    assert share == glue2(MaxWallTime=86000, DefaultWallTime=86000, MaxCPUTime=48 * 3600, DefaultCPUTime=48 * 3600,
                          MaxSlotsPerJob=4, MaxMainMemory=2048, MaxVirtualMemory=3500)
    # one qconf -sp per parallel environment the queue names
    assert sorted(c[2] for c in calls if c[:2] == ["qconf", "-sp"]) == ["mpi", "smp"]


def test_sge_a_queue_without_a_parallel_environment_gives_a_job_one_slot():
    calls: list[Any] = []
    ce, share = sge("short", calls)
    # h_rt 0:30:0, s_cpu 3600; pe_list NONE; every memory limit INFINITY
    assert ce == glue13(MaxWallClockTime=30, MaxCPUTime=60, MaxObtainableWallClockTime=30, MaxObtainableCPUTime=60,
                        MaxSlotsPerJob=1)
    assert share == glue2(MaxWallTime=1800, DefaultWallTime=1800, MaxCPUTime=3600, DefaultCPUTime=3600, MaxSlotsPerJob=1)
    assert not [c for c in calls if c[:2] == ["qconf", "-sp"]]


def test_sge_host_overrides():
    # 8.1.9/qconf_sq_grid.txt (hand-made): h_rt 1:00:00,[node2=4:00:00],[node3=2:00:00] and s_rt 3000,[node3=INFINITY]:
    # the tighter on each host is 3000 s (the default, node2) and 7200 s (node3); h_cpu INFINITY but node5 10:00:00
    directory = FIXTURES / "sge" / "8.1.9"
    run = sge_replay(directory)

    def grid(argv, timeout, env):
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        if tool == "qstat" and args[:3] == ["-xml", "-f", "-r"]:
            return 0, (directory / "qstat_states.xml").read_text(), ""
        if tool == "qhost":
            return 0, (directory / "qhost_states.xml").read_text(), ""
        return run(argv, timeout, env)

    ce, share = published("sge", "grid", grid, 1795478400.0)
    assert share["GLUE2ComputingShareMaxWallTime"] == "7200" and share["GLUE2ComputingShareDefaultWallTime"] == "3000"
    # a job gets at least 10 hours of CPU (node5), unlimited elsewhere: no maximum, a default
    assert "GLUE2ComputingShareMaxCPUTime" not in share and share["GLUE2ComputingShareDefaultCPUTime"] == "36000"
    assert ce["GlueCEPolicyMaxWallClockTime"] == "120"


def test_sge_a_parallel_environment_that_cannot_be_read_leaves_the_slots_out():
    def run(argv, timeout, env):
        if list(argv[1:]) == ["-sp", "mpi"]:
            return 1, "", "error: no such parallel environment\n"
        return sge_replay()(argv, timeout, env)

    ce, share = published("sge", "multi", run, float((SGE / "now").read_text()))
    assert "GlueCEPolicyMaxSlotsPerJob" not in ce and "GLUE2ComputingShareMaxSlotsPerJob" not in share
    assert share["GLUE2ComputingShareMaxVirtualMemory"] == "3500"


# -- LSF: tests/fixtures/lsf/10.1.0.13 -------------------------------------------------------------

NO_JOBS = (255, "", (LSF10 / "bjobs_none.stderr").read_text())


def test_lsf_bqueues_limits():
    ce, share = published("lsf", "bigmem", lsf_replay(LSF10, overrides={"bjobs": NO_JOBS}), PBS_NOW)
    # MAXIMUM LIMITS: CPULIMIT 5760.0 min, RUNLIMIT 2880.0 min, TASKLIMIT 1 1 8, MEMLIMIT 16 G, SWAPLIMIT 32 G;
    # DEFAULT LIMITS: CPULIMIT 600.0 min, RUNLIMIT 720.0 min (the 8 G MEMLIMIT default is no maximum)
    assert ce == glue13(MaxWallClockTime=2880, MaxCPUTime=5760, MaxObtainableWallClockTime=2880,
                        MaxObtainableCPUTime=5760, MaxSlotsPerJob=8)
    assert share == glue2(MaxWallTime=2880 * 60, DefaultWallTime=720 * 60, MaxCPUTime=5760 * 60,
                          DefaultCPUTime=600 * 60, MaxSlotsPerJob=8, MaxMainMemory=16 * 1024,
                          MaxVirtualMemory=32 * 1024)


def test_lsf_proclimit_and_a_default_run_limit():
    ce, share = published("lsf", "grid", lsf_replay(LSF10), PBS_NOW)
    # PROCLIMIT 1 1 16; DEFAULT LIMITS RUNLIMIT 60.0 min; MAXIMUM LIMITS CPULIMIT 2880.0 min of hosta, RUNLIMIT 2160.0 min
    assert ce["GlueCEPolicyMaxSlotsPerJob"] == share["GLUE2ComputingShareMaxSlotsPerJob"] == "16"
    assert share["GLUE2ComputingShareDefaultWallTime"] == "3600" and share["GLUE2ComputingShareMaxWallTime"] == "129600"
    assert "GLUE2ComputingShareMaxMainMemory" not in share


# -- HTCondor: tests/fixtures/htcondor/24.0 ---------------------------------------------------------

def test_htcondor_the_largest_slot_bounds_a_jobs_cpus():
    ce, share = published("htcondor", "all", htcondor_replay(), HTCONDOR_NOW, "condor_queue_by = schedd\n")
    # README's pool table: the largest slot is wn02's partitionable slot of 48 CPUs (wn01's detects 64 threads, 32 given)
    assert ce == glue13(MaxSlotsPerJob=48)
    assert share == glue2(MaxSlotsPerJob=48)


def test_htcondor_a_schedd_the_pool_does_not_have_publishes_no_limit():
    # The collector answers with the pool's slots, but lists no schedd "sched2": a queue this pool does not have
    ce, share = published("htcondor", "sched2.example.org", htcondor_replay(), HTCONDOR_NOW, "condor_queue_by = schedd\n")
    assert ce == {} and share == {}
