"""Accelerators from the batch systems (issue 27 item 4): each queue's GPUs (total, used, free, per job)
and each job's requested GPUs, on recorded outputs.

tests/fixtures/slurm/22.05-gpu was recorded from the live Slurm harness with two count-only GPUs
(fixtures/slurm/record.py gpu); the other directories are hand-written in each tool's documented format
(their READMEs say from where).  Expected figures are read off the files by hand, each with its arithmetic,
or off the tool's own human table (sinfo -O Gres,GresUsed) parsed here with a regex of its own.
"""

from __future__ import annotations

import json
import re

import pytest
from paths import FIXTURES
from recorded_commands import recorded_files
from slurm_records import jobs_by_id, slurm_state

from glueinfo.core.model import QueueAccelerators
from glueinfo.lrms.accelerators import NodeAccelerators, queue_accelerators
from glueinfo.lrms.plugins import slurm as lrms_slurm
from glueinfo.lrms.plugins.slurm import gres_gpus, requested_gpus, tres_gpus
from glueinfo.lrms.registry import LrmsContext, queue_state

SLURM = FIXTURES / "slurm"


# -- the one rule -----------------------------------------------------------------------------------

def test_queue_figures_count_every_node_but_free_only_where_a_job_can_start():
    nodes = [NodeAccelerators("a100", 4, 1, can_start=True),   # 3 free
             NodeAccelerators("a100", 4, 0, can_start=False),  # drained or full: none a new job can get
             NodeAccelerators("a100", 8, 8, can_start=True),   # all in use
             NodeAccelerators(None, 2, 0, can_start=True)]     # untyped GRES: a model of their own
    assert queue_accelerators(nodes) == (
        QueueAccelerators("GPU", "a100", total=16, used=9, free=3, max_per_job=16),
        QueueAccelerators("GPU", None, total=2, used=0, free=2, max_per_job=2))


def test_one_job_gets_the_gpus_of_its_largest_allowed_nodes_within_a_stated_cap():
    nodes = [NodeAccelerators("h100", n, 0, True) for n in (2, 8, 4)]
    assert queue_accelerators(nodes, max_nodes=2)[0].max_per_job == 8 + 4
    assert queue_accelerators(nodes, max_nodes=2, max_per_job=6)[0].max_per_job == 6


def test_a_node_that_does_not_tell_its_used_gpus_leaves_used_and_free_unknown_not_0():
    (gpus,) = queue_accelerators([NodeAccelerators("a100", 4, 1, True), NodeAccelerators("a100", 4, None, True)])
    assert (gpus.total, gpus.used, gpus.free) == (8, None, None)


def test_a_queue_without_gpus_has_none():
    assert queue_accelerators([]) == ()
    assert queue_accelerators([NodeAccelerators(None, 0, 0, True)]) == ()


# -- Slurm: GRES as Slurm prints them -------------------------------------------------------------------

@pytest.mark.parametrize("text, gpus", [
    ("gpu:h100:2", {"h100": 2}),                           # node Gres (22.05, recorded)
    ("gpu:a100:4(S:0-1),mps:400", {"a100": 4}),            # socket affinity; MPS is no GPU
    ("gpu:a100:2(S:0),gpu:v100:1(S:1)", {"a100": 2, "v100": 1}),
    ("gpu:h100:1(IDX:0)", {"h100": 1}),                    # GresUsed (recorded)
    ("gpu:a100:2(IDX:0,2),gpu:v100:0(IDX:N/A)", {"a100": 2, "v100": 0}),  # a comma inside IDX
    ("gpu:(null):0(IDX:N/A)", {None: 0}),
    ("gpu:2", {None: 2}), ("gpu:0", {None: 0}),            # untyped (recorded: 22.05 prints gpu:1)
    ("gres:gpu:1", {None: 1}), ("gres:gpu:h100:1", {"h100": 1}),  # tres-per-node 21.08-23.02 (recorded)
    ("gres/gpu:2", {None: 2}), ("gres/gpu:a100:2,gres/shard:1", {"a100": 2}),  # 23.11+
    ("gres:gpu", {None: 1}), ("gpu:a100", {"a100": 1}),   # no count: one, as sbatch reads --gres
    ("(null)", {}), ("N/A", {}), ("", {}), ("mps:100", {}), ("gpu:1K", {None: 1024}),
])
def test_gres_texts(text, gpus):
    assert gres_gpus(text) == gpus


def test_a_gres_count_that_is_no_number_is_an_error_naming_it():
    with pytest.raises(lrms_slurm.SlurmOutputError, match=r"'gpu:a100:x:2' has no GPU count"):
        gres_gpus("gpu:a100:x:2")


def test_tres_lists():
    assert tres_gpus("cpu=16,mem=128000M,node=1,billing=16,gres/gpu=2") == 2
    assert tres_gpus("cpu=16,gres/gpu=3,gres/gpu:a100=3") == 3  # the untyped total, not 6
    assert tres_gpus("cpu=16,gres/gpu:a100=1,gres/gpu:v100=2") == 3
    assert tres_gpus("cpu=1,node=1,billing=1") is None


def test_a_jobs_request_by_each_option():
    # --gpus=2 (tres-per-job), --gres=gpu:1 on 2 nodes (per node), --gpus-per-task=1 with 3 tasks
    assert requested_gpus("cpu=1,node=1", "gres:gpu:2", "N/A", "N/A", 1, 1) == 2
    assert requested_gpus("cpu=2,node=2", "N/A", "gres:gpu:1", "N/A", 2, 2) == 2
    assert requested_gpus("cpu=3,node=1", "N/A", "N/A", "gres/gpu:1", 1, 3) == 3
    # with gres/gpu accounted, tres-alloc says what the job holds
    assert requested_gpus("cpu=64,node=2,gres/gpu=8", "N/A", "gres:gpu:a100:4", "N/A", 2, 8) == 8
    assert requested_gpus("cpu=1,node=1", "N/A", "N/A", "N/A", 1, 1) is None


# -- Slurm 22.05, recorded with two GPUs ------------------------------------------------------------------

def sinfo_table(version: str) -> dict[str, tuple[int, int]]:
    """Per partition (total, used) GPUs from `sinfo -N -O NodeList,Partition,Gres,GresUsed` as recorded: the
    admin's view, read here by its own regex (the counts after the last colon before any bracket)."""
    found = {}
    for line in (SLURM / version / "sinfo_gres_used.txt").read_text().splitlines()[1:]:
        _node, partition, gres, used = line.split()
        count = lambda text: sum(int(n) for n in re.findall(r"gpu:(?:[^:,(]+:)?(\d+)", text))  # noqa: E731
        total, in_use = found.get(partition.rstrip("*"), (0, 0))
        found[partition.rstrip("*")] = (total + count(gres), in_use + count(used))
    return found


@pytest.mark.parametrize("slurm_json", ["auto", "no"])
def test_2205_recorded_gpus_match_sinfos_own_table(slurm_json):
    table = sinfo_table("22.05-gpu")
    assert table == {"short": (2, 1), "long": (2, 1)}  # the node's two GPUs, one held by job 1
    for partition in ("short", "long"):
        state = slurm_state("22.05-gpu", partition, slurm_json=slurm_json)
        assert state.error is None
        (gpus,) = state.accelerators
        assert (gpus.type, gpus.model) == ("GPU", "h100")
        assert (gpus.total, gpus.used) == table[partition]
        # the node is mixed (1 of 2 CPUs idle): a new job can get the other GPU; one job can have both
        assert (gpus.free, gpus.max_per_job) == (1, 2)


def test_2205_recorded_jobs_requested_gpus_as_scontrol_shows_their_options():
    # scontrol_jobs.txt: 1 TresPerNode=gres:gpu:1 on 1 node, 2 TresPerJob=gres:gpu:2,
    # 3 TresPerTask=gres:gpu:1 with NumTasks=2, 4 none, 5 TresPerNode=gres:gpu:h100:1
    shown = (SLURM / "22.05-gpu" / "scontrol_jobs.txt").read_text()
    assert "TresPerNode=gres:gpu:1 " in shown and "TresPerTask=gres:gpu:1 " in shown
    jobs = jobs_by_id(slurm_state("22.05-gpu", "short"))
    assert {i: j.requested_accelerators for i, j in jobs.items()} == {"1": 1, "2": 2, "3": 2, "4": None}
    (pernode,) = slurm_state("22.05-gpu", "long").jobs
    assert pernode.requested_accelerators == 1


def test_partitions_without_gres_have_no_accelerators():
    for version, partition in (("22.05", "short"), ("20.11", "batch"), ("23.11", "main")):
        state = slurm_state(version, partition)
        assert state.accelerators == (), version
        assert all(j.requested_accelerators is None for j in state.jobs)


# -- Slurm 23.02 (hand-written): a GPU partition of three 4-GPU nodes -------------------------------------

@pytest.mark.parametrize("slurm_json", ["auto", "no"])
def test_2302_gpu_partition(slurm_json):
    state = slurm_state("23.02", "gpu", slurm_json=slurm_json)
    assert state.error is None
    # g1 mixed (2 of 4 used by job 201), g2 drained, g3 idle; g4 is in partition cpu only
    assert state.accelerators == (QueueAccelerators("GPU", "a100", total=3 * 4, used=2, free=(4 - 2) + 4,
                                                    max_per_job=12),)  # MaxNodes=UNLIMITED
    jobs = jobs_by_id(state)
    # tres-alloc gres/gpu=2, 2, 8 (203: 4 per node on 2 nodes); 204 asks for none
    assert {i: j.requested_accelerators for i, j in jobs.items()} == {"201": 2, "202": 2, "203": 8, "204": None}


def groups_json(gres: dict, nodes: list[str]) -> str:
    """`sinfo --json` (data_parser v0.0.40, Slurm 23.11's shape, as in fixtures/slurm/23.11) with one group."""
    group = json.loads((SLURM / "23.11" / "sinfo_main.json").read_text())["sinfo"][0]
    group = dict(group, gres=gres, nodes=dict(group["nodes"], nodes=nodes, hostnames=[]),
                 node={"state": ["MIXED"]}, cpus={"allocated": 8, "idle": 120, "other": 0, "total": 128})
    return json.dumps({"meta": {}, "errors": [], "warnings": [], "sinfo": [group]})


def partition_line(tres: str) -> str:
    return (SLURM / "23.11" / "scontrol_partition_main.txt").read_text().replace(
        "TRES=cpu=128,mem=500G,node=2,billing=128", f"TRES={tres}").replace("State=DOWN", "State=UP")


def test_2311_a_node_group_counts_its_first_nodes_gres_for_each_of_its_nodes():
    # sinfo --json groups nodes of one GresUsed: both have gpu:a100:4, each uses one
    text = groups_json({"total": "gpu:a100:4", "used": "gpu:a100:1(IDX:0)"}, ["c[01-02]"])
    state = slurm_state("23.11", "main", overrides={"sinfo": lambda args: (0, text, "") if "--json" in args else None,
                                                    "scontrol": lambda args: (0, partition_line("cpu=128,gres/gpu=8"), "")
                                                    if args[-1] == "main" else None})
    assert state.error is None
    assert state.accelerators == (QueueAccelerators("GPU", "a100", total=8, used=2, free=6, max_per_job=8),)


def test_2311_a_node_group_whose_gres_the_partition_tres_contradicts_leaves_the_gpus_unknown():
    text = groups_json({"total": "gpu:a100:4", "used": "gpu:a100:0(IDX:N/A)"}, ["c[01-02]"])
    state = slurm_state("23.11", "main", overrides={"sinfo": lambda args: (0, text, "") if "--json" in args else None,
                                                    "scontrol": lambda args: (0, partition_line("cpu=128,gres/gpu=12"), "")
                                                    if args[-1] == "main" else None})
    assert state.accelerators == ()
    assert "the node groups' GRES give 8 GPUs, scontrol's partition TRES 12: its GPUs are unknown" in state.error
    assert state.total_cpus == 128  # the CPUs stand


def test_a_node_gres_slurm_prints_otherwise_is_one_error_and_the_cpus_stand():
    text = (SLURM / "23.02" / "sinfo_gpu.txt").read_text().replace("gpu:a100:4|gpu:a100:2", "gpu:a100:four|gpu:a100:2")
    state = slurm_state("23.02", "gpu", slurm_json="no",
                        overrides={"sinfo": lambda args: (0, text, "") if "-O" in args else None})
    assert state.accelerators == ()
    assert "'gpu:a100:four' has no GPU count" in state.error
    assert state.total_cpus == 96


# -- PBS (hand-written: fixtures/pbs/README) -----------------------------------------------------------------

def pbs_state(flavour_dir: str, answers: dict, with_jobs: bool = True):
    return queue_state("pbs", LrmsContext(queue="gpu", ce_config={}, hosts=[], clock=lambda: 1732003200.0,
                                          with_jobs=with_jobs, run=recorded_files(FIXTURES / "pbs" / flavour_dir, answers)))


OPENPBS_GPU = {"qstat --version": "qstat_version.txt", "qstat -Q": "qstat_Q_gpu.json", "pbsnodes": "pbsnodes_gpu.json",
               "qstat -f": "qstat_jobs_gpu.json"}


@pytest.mark.parametrize("with_jobs", [True, False])
def test_openpbs_ngpus_of_the_queues_vnodes(with_jobs):
    state = pbs_state("openpbs-23.06", OPENPBS_GPU, with_jobs)
    assert state.error is None
    # g01 free: ngpus 4, 2 assigned; g02 job-busy (32 of 32 CPUs): 4, 1 assigned; g03 offline: 4, no job;
    # n01 is bound to no queue (and has no ngpus).  One job: resources_max.ngpus 8 of the 12.
    assert state.accelerators == (QueueAccelerators("GPU", None, total=4 + 4 + 4, used=2 + 1 + 0, free=4 - 2,
                                                    max_per_job=8),)


def test_openpbs_jobs_resource_list_ngpus():
    jobs = {job.local_id: job.requested_accelerators for job in pbs_state("openpbs-23.06", OPENPBS_GPU).jobs}
    # Resource_List.ngpus: the job's sum over its select chunks (502: 2 chunks of ngpus=4); 503 asks for none
    assert jobs == {"500.pbs-head": 2, "501.pbs-head": 1, "502.pbs-head": 8, "503.pbs-head": None}


def test_openpbs_queues_without_gpus_have_none():
    answers = dict(OPENPBS_GPU, **{"qstat -Q": "qstat_Q_workq.json", "pbsnodes": "pbsnodes.json",
                                   "qstat -f": "qstat_jobs_workq.json"})
    state = queue_state("pbs", LrmsContext(queue="workq", ce_config={}, hosts=[], clock=lambda: 1732003200.0,
                                           run=recorded_files(FIXTURES / "pbs" / "openpbs-23.06", answers)))
    assert state.error is None and state.accelerators == ()  # gpu01's two GPUs serve queue gpu, not workq


def test_torque_gpus_of_pbsnodes_without_a_used_count():
    answers = {"qstat --version": "qstat_version.txt", "qstat -Q": "qstat_Q_gpu.txt", "pbsnodes": "pbsnodes_gpu.xml",
               "qstat -f": "qstat_jobs_gpu.xml"}
    state = pbs_state("torque-6.1.3", answers)
    assert state.error is None
    # neednodes=gpu: gn01 and gn02, gpus=2 each; pbsnodes does not say which are in use: used and free unknown
    assert state.accelerators == (QueueAccelerators("GPU", None, total=4, used=None, free=None, max_per_job=4),)
    # nodes=1:ppn=4:gpus=2 -> 2; nodes=2:ppn=2:gpus=1 -> 2 x 1
    assert {job.local_id: job.requested_accelerators for job in state.jobs} == {"300.torque-head": 2,
                                                                               "301.torque-head": 2}
