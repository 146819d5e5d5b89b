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


# -- HTCondor (generated by fixtures/htcondor/make_fixtures.py: 24.0/README) ---------------------------------

def htcondor_gpu_state(with_jobs: bool = True):
    directory = FIXTURES / "htcondor" / "24.0"
    answers = {"condor_version": "condor_version.txt", "condor_status -schedd": "condor_status_schedd_gpu.json",
               "condor_status": "condor_status_slots_gpu.json", "condor_q": "condor_q_gpusched.example.org.json"}
    return queue_state("htcondor", LrmsContext(queue="gpusched.example.org", ce_config={}, hosts=[],
                                               clock=lambda: 1760000000.0, with_jobs=with_jobs,
                                               run=recorded_files(directory, answers)))


def test_htcondor_gpus_of_the_slots_by_device_name():
    state = htcondor_gpu_state()
    assert state.error is None
    assert state.accelerators == (
        # gpu01: p-slot TotalSlotGPUs 4, GPUs 2 left (its d-slot holds 2), 24 CPUs free; gpu02: 1 of 2 held but
        # all 16 CPUs taken: none a new job can get.  A job runs in one slot: 4 at most.
        QueueAccelerators("GPU", "NVIDIA A100-SXM4-40GB", total=4 + 2, used=2 + 1, free=2, max_per_job=4),
        # gpu03: two static slots of one V100, one claimed
        QueueAccelerators("GPU", "Tesla V100-PCIE-32GB", total=2, used=1, free=1, max_per_job=1))


def test_htcondor_jobs_request_gpus():
    jobs = {job.local_id: job.requested_accelerators for job in htcondor_gpu_state().jobs}
    assert jobs == {"gpusched.example.org#401.0": 2, "gpusched.example.org#402.0": 1, "gpusched.example.org#403.0": 1,
                    "gpusched.example.org#404.0": 4, "gpusched.example.org#405.0": None}


def test_htcondor_pool_without_gpus_has_none():
    directory = FIXTURES / "htcondor" / "24.0"
    answers = {"condor_version": "condor_version.txt", "condor_status -schedd": "condor_status_schedd.json",
               "condor_status": "condor_status_slots.json", "condor_q": "condor_q_sched1.example.org.json"}
    state = queue_state("htcondor", LrmsContext(queue="sched1.example.org", ce_config={}, hosts=[],
                                                clock=lambda: 1760000000.0, run=recorded_files(directory, answers)))
    assert state.error is None and state.accelerators == ()
    assert all(job.requested_accelerators is None for job in state.jobs)


# -- Grid Engine (recorded live: fixtures/sge/record_gpu.py) --------------------------------------------------

def sge_gpu_state(variant: str, queue: str, with_jobs: bool = True, **config):
    directory = FIXTURES / "sge" / variant
    answers = {"qstat -help": "qstat_help.txt", "qconf -sc": "qconf_sc.txt", "qstat -xml -f -r -ext": "qstat_full.xml",
               "qstat -xml": "qstat.xml", "qhost": "qhost.xml", "qconf -sq": f"qconf_sq_{queue}.txt",
               "qconf -sp": "qconf_sp_smp.txt"}
    now = float((directory / "now").read_text())
    return queue_state("sge", LrmsContext(queue=queue, ce_config={"sge_gpu_complex": "gpu", **config}, hosts=[],
                                          clock=lambda: now, with_jobs=with_jobs, run=recorded_files(directory, answers)))


def sge_admin_view(variant: str) -> tuple[int, int]:
    """(capacity, in use) of the host's gpu complex as an admin reads them: qconf -se's complex_values and
    what qhost -F says is left."""
    directory = FIXTURES / "sge" / variant
    capacity = int(re.search(r"complex_values\s+gpu=(\d+)", (directory / "qconf_se_host.txt").read_text()).group(1))
    left = float(re.search(r"hc:gpu=([\d.]+)", (directory / "qhost_F.txt").read_text()).group(1))
    return capacity, capacity - int(left)


@pytest.mark.parametrize("variant", ["8.1.9-gpu", "8.1.9-gpu-job"])
@pytest.mark.parametrize("queue", ["gpu", "short", "long"])
@pytest.mark.parametrize("with_jobs", [True, False])
def test_sge_gpu_complex_of_the_queues_host_as_qconf_and_qhost_tell(variant, queue, with_jobs):
    state = sge_gpu_state(variant, queue, with_jobs)
    assert state.error is None
    capacity, in_use = sge_admin_view(variant)
    # per slot (YES): job 1's two slots hold 2, job 2 holds 1; per job (JOB): 1 and 1
    assert (capacity, in_use) == (4, 3 if variant == "8.1.9-gpu" else 2)
    (gpus,) = state.accelerators
    assert (gpus.type, gpus.model, gpus.total, gpus.used) == ("GPU", None, capacity, in_use)
    # every instance on the host is Busy (gpu's two slots taken; the host's 2 processors held by 3 slots)
    assert gpus.free == 0
    assert gpus.max_per_job == 4  # one host: with or without a parallel environment, its four


@pytest.mark.parametrize("variant, per_slot", [("8.1.9-gpu", True), ("8.1.9-gpu-job", False)])
def test_sge_jobs_request_the_complex_times_their_slots_or_once(variant, per_slot):
    requested = {job.local_id: job.requested_accelerators for job in sge_gpu_state(variant, "gpu").jobs}
    # 1: -pe smp 2 -l gpu=1; 3: -l gpu=2 (1 slot); queue gpu lists its jobs and pending ones asking for it
    assert requested["1"] == (2 if per_slot else 1) and requested["3"] == 2
    assert sge_gpu_state(variant, "short").jobs[0].requested_accelerators == 1  # job 2: -l gpu=1
    held = [job for job in sge_gpu_state(variant, "long").jobs if job.local_id == "4"]
    assert held and held[0].requested_accelerators is None


def test_sge_without_the_key_reads_no_gpu_and_asks_no_more():
    calls = []
    directory = FIXTURES / "sge" / "8.1.9-gpu"
    answers = {"qstat -help": "qstat_help.txt", "qstat -xml": "qstat.xml", "qhost": "qhost.xml",
               "qconf -sq": "qconf_sq_gpu.txt", "qconf -sp": "qconf_sp_smp.txt"}
    recorded = recorded_files(directory, answers)

    def run(argv, timeout, env):
        calls.append(" ".join(argv[1:]))
        return recorded(argv, timeout, env)

    state = queue_state("sge", LrmsContext(queue="gpu", ce_config={}, hosts=[], clock=lambda: 1.8e9, run=run))
    assert state.accelerators == () and "-sc" not in calls and "-xml -F slots" in calls  # qhost: no GPU complex asked


def test_sge_a_complex_qconf_does_not_have_is_one_error_naming_it():
    state = sge_gpu_state("8.1.9-gpu", "gpu", sge_gpu_complex="gpus")
    assert state.accelerators == ()
    assert "sge_gpu_complex 'gpus': qconf -sc has no such complex: its GPUs are unknown" in state.error
    assert state.total_cpus == 2 and state.running_jobs == 1  # the rest stands


# -- LSF (hand-written: fixtures/lsf/README) -----------------------------------------------------------------

LSF_GPU = {"lsid": "lsid.txt", "bqueues -l": "bqueues_l_gpu.txt", "bhosts": "bhosts_gpuhosts.json",
           "bjobs": "bjobs_gpu.json"}


def lsf_gpu_state(run=None, with_jobs: bool = True):
    return queue_state("lsf", LrmsContext(queue="gpu", ce_config={}, hosts=[], clock=lambda: 1732003200.0,
                                          with_jobs=with_jobs,
                                          run=run or recorded_files(FIXTURES / "lsf" / "10.1.0.13", LSF_GPU)))


@pytest.mark.parametrize("with_jobs", [True, False])
def test_lsf_ngpus_and_ngpus_alloc_of_the_queues_hosts(with_jobs):
    state = lsf_gpu_state(with_jobs=with_jobs)
    assert state.error is None
    # gpua ok, 8 of 32 slots: 4 GPUs, 3 allocated; gpub closed_Full: 4, 1; gpuc closed_Adm: 4, 0; gpud none
    assert state.accelerators == (QueueAccelerators("GPU", None, total=12, used=4, free=4 - 3, max_per_job=12),)


def test_lsf_jobs_gpu_num():
    jobs = {job.local_id: job.requested_accelerators for job in lsf_gpu_state().jobs}
    assert jobs == {"7001": 2, "7002": 1, "7003": 1, "7004": 4, "7005": None}  # 7005: GPU_NUM "-"


def test_lsf_that_does_not_know_the_gpu_fields_is_asked_again_without_them():
    recorded = recorded_files(FIXTURES / "lsf" / "10.1.0.13", LSF_GPU)
    calls = []

    def run(argv, timeout, env):
        calls.append(list(argv[1:]))
        fields = " ".join(argv)
        # an LSF without them; the message names the field (its exact words are not documented)
        if "ngpus" in fields or "gpu_num" in fields:
            return 255, "", f"{'ngpus' if 'ngpus' in fields else 'gpu_num'}: Illegal field name\n"
        code, out, err = recorded(argv, timeout, env)
        # and prints no field it was not asked for
        return code, re.sub(r',\s*"(NGPUS|NGPUS_ALLOC|GPU_NUM)":"[^"]*"', "", out), err

    state = lsf_gpu_state(run)
    assert state.error is None and state.accelerators == ()
    assert state.total_cpus == 32 * 4 and len(state.jobs) == 5  # the slots and the jobs are read all the same
    assert sum(1 for c in calls if "-o" in c) == 4  # bhosts and bjobs twice each


def test_lsf_before_the_gpu_fields_asks_for_none():
    calls = []
    directory = FIXTURES / "lsf" / "9.1.3"
    recorded = recorded_files(directory, {"lsid": "lsid.txt", "bqueues -l": "bqueues_l_short.txt",
                                          "bhosts": "bhosts_w.txt", "bjobs": "bjobs_w_short.txt"})

    def run(argv, timeout, env):
        calls.append(" ".join(argv[1:]))
        return recorded(argv, timeout, env)

    state = queue_state("lsf", LrmsContext(queue="short", ce_config={}, hosts=[], clock=lambda: 1732003200.0,
                                           with_jobs=True, run=run))
    assert state.accelerators == () and not [c for c in calls if "gpu" in c]


def test_slurm_asks_for_the_gpu_request_fields_only_when_it_reads_the_jobs_whole():
    """The counts never read a job's tres-per-job/-node/-task: a counts-only refresh does not ask squeue for
    them (three more fields and their separators for each of 50,000 jobs)."""
    for with_jobs in (False, True):
        calls = []
        slurm_state("22.05-gpu", "short", with_jobs=with_jobs, calls=calls)
        (squeue,) = [c for c in calls if c[0] == "squeue"]
        asked = squeue[squeue.index("-O") + 1]
        assert ("tres-per-job" in asked and "tres-per-node" in asked and "tres-per-task" in asked) is with_jobs
