"""The slurm plugin on recorded outputs of several Slurm versions, and on faults.

tests/fixtures/slurm/22.05 was recorded from this machine's real Slurm by
fixtures/slurm/record.py; 20.11, 23.02 and 23.11 are hand-written in those
versions' formats (each directory's README says what differs).  The expected
numbers below were read off the files by hand (the arithmetic is written out
where it is not a plain count).
"""

from __future__ import annotations

import json
import logging
import re
import stat
from pathlib import Path

import pytest
from paths import FIXTURES
from slurm_records import jobs_by_id, replay, slurm_state, without_gpu_fields

from glueinfo.core.queue_state import NodeAllocation
from glueinfo.lrms.plugins import slurm as lrms_slurm
from glueinfo.lrms.plugins.slurm import (
    expand_hostlist,
    parse_duration_s,
    parse_memory_mb,
    parse_squeue,
    parse_timestamp,
    parse_version,
    split_key_values,
    squeue_format,
)
from glueinfo.lrms.registry import LrmsContext, queue_state
from glueinfo.lrms.vo_map import VoMap

FIXTURES = FIXTURES / "slurm"


def utc(text: str) -> float:
    import calendar
    import datetime

    return float(calendar.timegm(datetime.datetime.fromisoformat(text).timetuple()))


# -- Slurm 22.05 (recorded here) -------------------------------------------------------

@pytest.mark.parametrize("slurm_json", ["auto", "no"])
def test_2205_short_partition(slurm_json):
    state = slurm_state("22.05", "short", slurm_json=slurm_json)
    assert state.error is None
    assert state.lrms_type == "slurm" and state.lrms_version == "22.05.8" and state.queue == "short"
    assert state.status == "Production"
    assert (state.total_cpus, state.free_cpus, state.hosts) == (2, 0, ["vm"])
    # unfinished: 6_1 6_2 7 8 9 5 (held) 3 4 (running) 2 (suspended); finished 1, 10 are not counted
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (2, 7, 9)
    assert state.free_job_slots == 0
    assert state.max_wall_clock_time_min == 30 and state.priority == 1
    assert state.max_cpu_time_min is None and state.max_running_jobs is None and state.max_total_jobs is None
    # now 14:32:53; Slurm forecast 6_1, 6_2 14:39:00 (367 s), 7 14:41:00 (487), 8 14:45:00 (727), 9 14:51:00 (1087)
    assert state.estimated_response_time_s == (367 + 367 + 487 + 727 + 1087) // 5 == 607
    assert state.worst_response_time_s == 1087


def test_2205_running_count_matches_the_raw_output():
    raw = (FIXTURES / "22.05" / "squeue_short.txt").read_text()
    state = slurm_state("22.05", "short")
    assert state.running_jobs == raw.count("|~|RUNNING|~|")


def test_2205_jobs_states_and_fields():
    jobs = jobs_by_id(slurm_state("22.05", "short"))
    assert set(jobs) == {"1", "2", "3", "4", "5", "6_1", "6_2", "7", "8", "9", "10"}
    expect = {  # id: (Slurm state, GLUE status, SSS state)
        "1": ("COMPLETED", "DONE", "Completed"), "10": ("CANCELLED", "ABORTED", "Completed"),
        "2": ("SUSPENDED", "WAITING", "Suspended"), "3": ("RUNNING", "RUNNING", "Running"),
        "5": ("PENDING", "WAITING", "Hold"), "6_1": ("PENDING", "SCHEDULED", "Idle"),
    }
    for job_id, (lrms, glue, sss) in expect.items():
        assert (jobs[job_id].lrms_state, jobs[job_id].glue_status, jobs[job_id].sss_state) == (lrms, glue, sss), job_id
    running = jobs["3"]
    assert running.name == "second" and running.local_owner == "root" and running.queue == "short"
    assert running.account is None  # (null)
    assert running.submit_time == utc("2026-11-22T14:32:49") and running.start_time == utc("2026-11-22T14:32:50")
    assert running.start_is_estimate is False and running.end_time is None
    assert running.requested_duration_s == 20 * 60 and running.requested_processors == 1 and running.requested_nodes == 1
    assert running.delivered_processors == 1 and running.delivered_wall_s == 3 and running.nodes == ["vm"]
    waiting = jobs["7"]
    assert waiting.requested_memory_mb == 100 and waiting.start_is_estimate is True
    assert waiting.start_time == utc("2026-11-22T14:41:00") and waiting.nodes == [] and waiting.delivered_wall_s is None
    assert waiting.scheduler_specific == "Priority"
    assert jobs["5"].scheduler_specific == "JobHeldUser" and jobs["5"].start_time is None
    assert jobs["1"].end_time == utc("2026-11-22T14:32:49") and jobs["1"].scheduler_specific is None


def test_2205_hostile_job_names_are_kept_whole_and_forge_nothing():
    jobs = jobs_by_id(slurm_state("22.05", "short"))
    assert jobs["8"].name == 'odd|name "q" <&>'
    assert jobs["9"].name == "evil\n999|RUNNING|None|root"
    assert "999" not in jobs


def test_2205_drained_partition():
    state = slurm_state("22.05", "long")
    assert state.error is None
    assert state.status == "Draining"
    assert state.max_wall_clock_time_min == 2 * 24 * 60
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (0, 1, 1)
    assert state.free_job_slots == 0  # no new job can be submitted
    assert state.estimated_response_time_s is None and state.worst_response_time_s is None


def test_without_with_jobs_the_counts_are_there_but_no_job_list():
    state = slurm_state("22.05", "short", with_jobs=False)
    assert state.total_jobs == 9 and state.jobs == []


# -- Slurm 20.11 (hand-written: no --json, no forecasts) ---------------------------------

def test_2011_text_format_and_drain_model():
    calls = []
    state = slurm_state("20.11", "batch", calls=calls)
    assert state.error is None
    assert not any("--json" in call for call in calls)  # 20.11 predates --json: never tried
    assert state.lrms_version == "20.11.9" and state.status == "Production" and state.priority == 10
    assert (state.total_cpus, state.free_cpus) == (32, 4)  # n03 drained, n04 down: their 16 CPUs are "other"
    assert state.hosts == ["n01.example.org", "n02.example.org", "n03.example.org", "n04.example.org"]
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (2, 5, 7)
    assert state.free_job_slots == 4 and state.max_wall_clock_time_min == 1440
    # No forecast (N/A): the waits of the jobs that started in the hour before 22:13:20, submit to
    # start: 101 21:00:00 -> 21:13:20 (800 s), 102 21:40 -> 21:43:20 (200), 107 21:29 -> 21:30 (60),
    # 111 21:49 -> 21:50 (60); 108 started at 21:00, before the hour.
    assert (state.estimated_response_time_s, state.worst_response_time_s) == ((800 + 200 + 60 + 60) // 4, 800)
    assert state.response_basis == "measured"
    assert not any(call[0] == "sacct" for call in calls)  # squeue showed them: no accounting asked


def later_2011(hours: float = 2.0, overrides=None, calls=None, vo_map=None):
    """Slurm 20.11's recorded partition read ``hours`` after its clock: squeue shows no job that
    started in the last hour (and no forecast), so the history is asked of sacct."""
    from slurm_records import now_of, replay

    kwargs = {"vo_map": vo_map} if vo_map else {}
    return queue_state("slurm", LrmsContext(queue="batch", ce_config={}, hosts=[], timeout_s=5.0,
                                            clock=lambda: now_of("20.11") + hours * 3600,
                                            run=replay("20.11", overrides, calls), **kwargs))


def test_waits_from_sacct_when_squeue_shows_no_recent_start():
    calls = []
    state = later_2011(calls=calls)
    assert state.error is None
    (sacct,) = [call for call in calls if call[0] == "sacct"]
    assert sacct[sacct.index("-S") + 1] == "2023-11-14T23:13:20" and sacct[sacct.index("-r") + 1] == "batch"
    # tests/fixtures/slurm/20.11/README: 112, 113 and 115 waited 600, 120 and 900 s
    assert (state.estimated_response_time_s, state.worst_response_time_s) == (540, 900)
    assert state.response_basis == "measured"
    vos = later_2011(vo_map=VoMap.from_values(["account:bio=bio", "account:physics=physics"])).vo_response_times
    assert vos == {"bio": (510, 900), "physics": (600, 600)}  # 113 and 115 (bio), 112 (physics)


def test_without_accounting_the_drain_model():
    """Slurm without slurmdbd: sacct says so (recorded from the live harness) and that is no error:
    the drain model on time limits, as before the waits were measured."""
    state = later_2011(overrides={"sacct": (1, "", "Slurm accounting storage is disabled\n")})
    assert state.error is None and state.response_basis == "model"
    # A CPU is free, so no wait for a running job; waiting CPU-seconds
    # 103: 8x3600 + 104_1, 104_2: 2x1800 each + 105: 1x600 = 36600 over 16 usable CPUs = 2287.5 s.
    assert state.worst_response_time_s == 2288
    # Finished jobs ran 900/3600, 1800/1800 and 300/600 of their limits: mean 7/12.
    assert state.estimated_response_time_s == round(2287.5 * 7 / 12) == 1334


def test_a_failing_sacct_is_named_and_the_drain_model_still_published():
    refused = ("sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to "
               "host:db:6819: Connection refused\n")
    state = later_2011(overrides={"sacct": (1, "", refused)})
    assert state.error.startswith("slurm: sacct exited 1: sacct: error: slurm_persist_conn_open_without_init: failed to open")
    assert (state.estimated_response_time_s, state.worst_response_time_s) == (1334, 2288)
    assert state.total_jobs == 7  # the rest of the state is untouched


def test_garbled_sacct_is_an_error_not_a_wait():
    state = later_2011(overrides={"sacct": (0, "112|COMPLETED|2023-11-14T23:20:00|yesterday|600|alice|phys|physics\n", "")})
    assert "sacct: unexpected output" in state.error and "yesterday" in state.error
    assert state.response_basis == "model"


def test_each_vo_queues_behind_its_own_forecasts():
    """Slurm 23.02's gpu partition (now 16:00): erin's 202 (account ml) forecast at 18:00, frank's 203
    (astro) at 20:00; 204 has no forecast, 201 started at 14:00 (before the hour)."""
    vo_map = VoMap.from_values(["account:ml=ml", "account:astro=astro", "user:nobody=dteam"])
    for with_jobs in (False, True):
        state = slurm_state("23.02", "gpu", vo_map=vo_map, with_jobs=with_jobs)
        assert (state.estimated_response_time_s, state.worst_response_time_s) == (10800, 14400)
        assert state.vo_response_times == {"ml": (7200, 7200), "astro": (14400, 14400)}
        assert state.response_times_of_vo("ml") == (7200, 7200)
        assert state.response_times_of_vo("dteam") == (10800, 14400)  # no job of its own: the partition's


def test_2011_jobs():
    jobs = jobs_by_id(slurm_state("20.11", "batch"))
    assert jobs["102"].nodes == ["n01.example.org", "n02.example.org"]
    assert jobs["102"].requested_memory_mb == 16 * 1024 and jobs["102"].requested_nodes == 2
    assert jobs["102"].account == "chem" and jobs["102"].name == "mpi run"
    assert (jobs["105"].glue_status, jobs["105"].sss_state, jobs["105"].scheduler_specific) == ("SCHEDULED", "Idle", "Dependency")
    assert (jobs["106"].glue_status, jobs["106"].sss_state) == ("WAITING", "Hold")
    assert (jobs["108"].glue_status, jobs["108"].sss_state) == ("ABORTED", "Completed")
    assert (jobs["111"].glue_status, jobs["111"].sss_state) == ("DONE", "Completed")
    assert jobs["111"].end_time == utc("2023-11-14T21:55:00") and jobs["111"].delivered_wall_s == 300


def test_json_forced_on_a_slurm_without_it_leaves_nodes_unknown_only():
    state = slurm_state("20.11", "batch", slurm_json="yes")
    assert state.total_cpus is None and state.free_cpus is None and state.hosts == []
    assert "sinfo --json" in state.error and "unrecognized option" in state.error
    assert state.running_jobs == 2 and state.status == "Production"  # the other steps still worked


# -- Slurm 23.02 (hand-written: v0.0.39 JSON, QoS limits) -------------------------------

@pytest.mark.parametrize("slurm_json", ["auto", "no"])
def test_2302_gpu_partition_with_qos(slurm_json):
    calls = []
    state = slurm_state("23.02", "gpu", slurm_json=slurm_json, calls=calls)
    assert state.error is None
    assert any("--json" in call for call in calls) == (slurm_json == "auto")
    assert state.lrms_version == "23.02.7"
    # g1 16 idle of 32, g2 idle but drained (other), g3 32 idle; g4 is not in gpu
    assert (state.total_cpus, state.free_cpus) == (96, 48)
    assert state.hosts == ["g1.cluster", "g2.cluster", "g3.cluster"]
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (1, 3, 3 + 1)
    # QoS gpuqos: GrpJobs 10, GrpSubmit 50, MaxWall 2 days (tighter than MaxTime 3 days), cpu=5760 minutes
    assert (state.max_running_jobs, state.max_total_jobs) == (10, 50)
    assert state.max_wall_clock_time_min == 2880 and state.max_cpu_time_min == 5760
    assert state.free_job_slots == 10 - 1  # fewer than the 48 free CPUs
    # forecasts: 202 at 18:00 (7200 s), 203 at 20:00 (14400 s); 204 has none
    assert (state.estimated_response_time_s, state.worst_response_time_s) == (10800, 14400)
    assert state.priority == 5


def test_qos_failure_leaves_only_the_limits_unknown():
    state = slurm_state("23.02", "gpu", overrides={"sacctmgr": (1, "", "sacctmgr: error: Problem talking to the database")})
    assert "sacctmgr" in state.error and "Problem talking to the database" in state.error
    assert state.max_running_jobs is None and state.max_total_jobs is None and state.max_cpu_time_min is None
    assert state.max_wall_clock_time_min == 3 * 24 * 60  # the partition's own MaxTime
    assert state.total_jobs == 4 and state.total_cpus == 96


# -- Slurm 23.11 (hand-written: v0.0.40 sinfo groups) ------------------------------------

def test_2311_sinfo_groups_and_down_partition():
    state = slurm_state("23.11", "main")
    assert state.error is None
    assert state.lrms_version == "23.11.4"
    assert state.status == "Queueing"  # DOWN: Slurm queues jobs but starts none
    assert (state.total_cpus, state.free_cpus) == (128, 0)  # the debug group's c01 is not counted twice
    assert state.hosts == ["c01", "c02"]
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (2, 1, 3)
    assert state.free_job_slots == 0
    assert state.max_wall_clock_time_min is None  # UNLIMITED: not published
    assert state.estimated_response_time_s is None and state.worst_response_time_s is None
    job = jobs_by_id(state)["301"]
    assert job.requested_duration_s is None and job.end_time is None
    assert job.delivered_wall_s == 86400 + 36 * 60 + 40


def test_2311_text_and_json_agree():
    by_json = slurm_state("23.11", "main", slurm_json="yes")
    by_text = slurm_state("23.11", "main", slurm_json="no")
    assert (by_json.total_cpus, by_json.free_cpus, by_json.hosts) == (by_text.total_cpus, by_text.free_cpus, by_text.hosts)


# -- faults, through the recorded runner -------------------------------------------------

def test_squeue_failure_leaves_job_figures_unknown_and_logs_once(caplog):
    failing = (1, "", "squeue: error: Invalid user for SlurmUser slurm, ignored\nsqueue: fatal: Unable to contact\n")
    with caplog.at_level(logging.WARNING, logger="glueinfo.lrms"):
        state = slurm_state("22.05", "short", overrides={"squeue": failing, "sacctmgr": (1, "", "x")})
    for name in ("running_jobs", "waiting_jobs", "total_jobs", "estimated_response_time_s", "worst_response_time_s"):
        assert getattr(state, name) is None, name
    assert state.jobs == []
    assert state.total_cpus == 2 and state.status == "Production" and state.free_job_slots == 0
    assert state.error.startswith("slurm: squeue -h -r -t exited 1: squeue: error: Invalid user")
    assert "\n" not in state.error
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_garbled_squeue_record_fails_the_whole_job_step():
    good = (FIXTURES / "22.05" / "squeue_short.txt").read_text()
    bad = good.replace("|~|2026-11-22T14:41:00|~|", "|~|yesterday|~|", 1)
    runner = replay("22.05")

    def squeue_answer(argv, timeout, env):
        token = re.search(r"\|([0-9a-f]+)\.$", argv[-1]).group(1)
        return 0, bad.replace("~", token), ""

    context = LrmsContext(queue="short", ce_config={}, hosts=[], timeout_s=5, with_jobs=True,
                          run=lambda argv, t, e: squeue_answer(argv, t, e) if argv[0] == "squeue" else runner(argv, t, e))
    state = queue_state("slurm", context)
    assert state.total_jobs is None and state.running_jobs is None
    # 6_1 is the third record; its EndTime was 14:41:00
    assert "squeue: unexpected output in job record 3 (not a Slurm timestamp: 'yesterday'): '6_1|PENDING|" in state.error


@pytest.mark.parametrize("with_jobs", [True, False])
def test_a_job_submitted_to_several_partitions_says_its_waiting_may_be_counted_elsewhere(with_jobs):
    good = (FIXTURES / "22.05" / "squeue_short.txt").read_text()
    runner = replay("22.05")

    def answer(text):
        def run(argv, timeout, env):
            if argv[0] != "squeue":
                return runner(argv, timeout, env)
            token = re.search(r"\|([0-9a-f]+)\.$", argv[-1]).group(1)
            asked = text if "tres-per-job" in argv[-1] else without_gpu_fields(text)  # the counts-only form
            return 0, asked.replace("~", token), ""
        return run

    def state_of(text):
        return queue_state("slurm", LrmsContext(queue="short", ce_config={}, hosts=[], timeout_s=5, with_jobs=with_jobs,
                                                run=answer(text)))

    assert state_of(good).waiting_shared is False
    # sbatch -p short,long: squeue -p short (and -p long) lists job 7 with both names, waiting in each
    shared = state_of(good.replace("7|~|PENDING|~|Priority|~|root|~|(null)|~|short|~|",
                                   "7|~|PENDING|~|Priority|~|root|~|(null)|~|short,long|~|", 1))
    assert shared.error is None and shared.waiting_shared is True


def test_free_cpus_are_the_idle_cpus_of_nodes_a_job_can_start_on():
    # sinfo counts a not-responding (idle*) or MAINT node's CPUs as idle, not "other"
    sinfo = (FIXTURES / "20.11" / "sinfo_batch.txt").read_text() + (
        "n05|n05.example.org|0/8/0/8|idle*|(null)|(null)\nn06|n06.example.org|0/8/0/8|idle+maint|(null)|(null)\n"
        "n07|n07.example.org|0/8/0/8|idle|(null)|(null)\n")
    recorded = replay("20.11")

    def run(argv, timeout, env):
        return (0, sinfo, "") if argv[0].endswith("sinfo") and "--version" not in argv else recorded(argv, timeout, env)

    state = queue_state("slurm", LrmsContext(queue="batch", ce_config={"slurm_json": "no"}, hosts=[], timeout_s=5, run=run))
    assert state.error is None
    nodes = {n.name: n for n in state.nodes}
    assert (nodes["n05.example.org"].state, nodes["n06.example.org"].state) == ("Unknown", "Offline")
    # n02 (mixed) 4 idle + n07 8: not n05's or n06's 8 each
    assert state.free_cpus == 4 + 8 == sum(n.free_cpus for n in state.nodes if n.state == "Idle")


def test_maxcpuspernode_caps_the_free_cpus_of_an_empty_partition():
    # 22.05-limits, recorded with no job: node vm 0/2/0/2 (2 idle CPUs) in both partitions; long has
    # MaxCPUsPerNode=1, so a job of long can be given 1 of them, one of short both
    long, short = slurm_state("22.05-limits", "long"), slurm_state("22.05-limits", "short")
    assert long.error is None and short.error is None
    assert (long.total_cpus, long.free_cpus, long.free_job_slots) == (2, 1, 1)
    assert (short.total_cpus, short.free_cpus, short.free_job_slots) == (2, 2, 2)


def slurm_job(partition: str, state: str, cpus: int, nodelist: str) -> lrms_slurm.SlurmJob:
    glue_status, sss_state, finished = lrms_slurm.map_state(state, "None")
    return lrms_slurm.SlurmJob("1", state, "None", "alice", None, partition, None, None, None, None, None, cpus, None,
                               None, nodelist, None, "", glue_status, sss_state, finished)


@pytest.mark.parametrize("jobs, free", [
    # MaxCPUsPerNode=4; n01 has 6 idle CPUs, n02 3, n03 8 but not responding (idle*: never free)
    (None, None),  # squeue failed: what the partition's jobs hold under the limit is unknown
    ([], 4 + 3),
    # a 2-CPU job of this partition on n01 leaves it 4 - 2 = 2 of n01's 6 idle CPUs
    ([slurm_job("gpu", "RUNNING", 2, "n01")], 2 + 3),
    # another partition's job holds CPUs sinfo already counts as not idle: the limit is this partition's own
    ([slurm_job("other", "RUNNING", 2, "n01")], 4 + 3),
    # a pending job holds nothing
    ([slurm_job("gpu", "PENDING", 4, "")], 4 + 3),
    # a CONFIGURING job (nodes booting, a prolog running) holds its CPUs as a RUNNING one does: 4 - 4 on n01
    ([slurm_job("gpu", "CONFIGURING", 4, "n01")], 0 + 3),
    # a SUSPENDED job gives its CPUs back (sinfo counts them idle and Slurm starts the next job: seen live)
    ([slurm_job("gpu", "SUSPENDED", 4, "n01")], 4 + 3),
    # 5 CPUs over n[01-02]: at least 1 on one node, so at most 4 (the limit) on the other: charged 4 on each
    ([slurm_job("gpu", "RUNNING", 5, "n[01-02]")], 0 + 0),
    # 3 CPUs over n01,n02: at most 2 on either: n01 4 - 2 = 2, n02 min(3, 4 - 2) = 2
    ([slurm_job("gpu", "RUNNING", 3, "n01,n02")], 2 + 2),
])
def test_free_cpus_are_what_maxcpuspernode_leaves_the_partition_on_each_node(jobs, free):
    nodes = [lrms_slurm.NodeCpus("n01", "n01", 2, 6, 0, 8, "mixed"), lrms_slurm.NodeCpus("n02", "n02", 5, 3, 0, 8, "mixed"),
             lrms_slurm.NodeCpus("n03", "n03", 0, 8, 0, 8, "idle*")]
    allocations = [NodeAllocation("n01", "Idle"), NodeAllocation("n02", "Idle"), NodeAllocation("n03", "Unknown")]
    assert lrms_slurm.partition_free_cpus(nodes, allocations, jobs, "gpu", 4) == free
    # without the limit: every idle CPU of a node a job can start on, the job list or not
    assert lrms_slurm.partition_free_cpus(nodes, allocations, jobs, "gpu", None) == 6 + 3


def test_the_counts_only_reading_keeps_an_allocated_jobs_node_list():
    # 22.05 short, recorded: jobs 3 and 4 RUNNING on vm, 2 SUSPENDED on vm, the rest pending or
    # finished; the counts-only reading (no job list published) keeps NodeList for the allocated ones
    # only, as the full reading prints it
    text, token = (FIXTURES / "22.05" / "squeue_short.txt").read_text(), "0123abcd"
    full = {j.job_id: j for j in parse_squeue(text.replace("|~|", f"|{token}|").replace("|~.", f"|{token}."), token)}
    counts = parse_squeue(without_gpu_fields(text).replace("|~|", f"|{token}|").replace("|~.", f"|{token}."), token,
                          full=False)
    assert {j.job_id: j.nodelist for j in counts if j.nodelist} == {"3": "vm", "4": "vm"}
    assert all(j.nodelist == (full[j.job_id].nodelist if j.sss_state == "Running" else "") for j in counts)


def test_a_grouped_sinfo_json_is_read_again_node_by_node_under_maxcpuspernode():
    # sinfo --json (v0.0.40) groups n[01-04], idle alike: one set of CPU counts, 32 idle, for the four;
    # under MaxCPUsPerNode=4 each node's own idle CPUs matter, and sinfo's text form, read at once, lists them
    group = {"node": {"state": ["IDLE"]}, "nodes": {"nodes": ["n[01-04]"], "hostnames": []}, "partition": {"name": "gpu"},
             "cpus": {"allocated": 0, "idle": 32, "other": 0, "total": 32}, "gres": {"total": "", "used": ""}}
    answers = {"--json": json.dumps({"sinfo": [group]}),
               "-O": "".join(f"n0{i}|n0{i}|0/8/0/8|idle|(null)|(null)\n" for i in range(1, 5))}
    asked: list[str] = []

    def tools(*argv: str) -> str:
        asked.append("--json" if "--json" in argv else "-O")
        return answers[asked[-1]]

    context = LrmsContext(queue="gpu", ce_config={}, hosts=[], timeout_s=5)
    grouped = lrms_slurm.read_nodes(tools, context, "23.11.4")
    assert [(n.name, n.idle) for n in grouped] == [("n01", 32), ("n02", 0), ("n03", 0), ("n04", 0)] and asked == ["--json"]
    asked.clear()
    nodes = lrms_slurm.read_nodes(tools, context, "23.11.4", per_node=True)
    assert [(n.name, n.idle) for n in nodes] == [("n01", 8), ("n02", 8), ("n03", 8), ("n04", 8)] and asked == ["-O"]
    allocations = [NodeAllocation(n.name, "Idle") for n in nodes]
    assert lrms_slurm.partition_free_cpus(nodes, allocations, [], "gpu", 4) == 4 * 4


def test_truncated_squeue_output_is_an_error():
    state = slurm_state("22.05", "short", overrides={"squeue": (0, "1|abc|RUNNING", "")})
    assert "does not end with a complete job record" in state.error and state.total_jobs is None


# Every figure a broker reads as a count of the queue (GLUE 1.3 GlueCEInfoTotalCPUs, GlueCEState*;
# GLUE 2 Share and Manager figures): none is published for a queue no answer names.
COUNTS = ("total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
          "estimated_response_time_s", "worst_response_time_s")


def test_a_partition_slurm_does_not_have_publishes_no_count(caplog):
    """Issue 25/26: `queue = lng` for Slurm's long.  scontrol says "Partition lng not found", sinfo
    and squeue print nothing and exit 0 (the recorded 22.05 answers; the live test checks them):
    no count, not 0; Closed; one ERROR naming the partitions scontrol lists and the one meant."""
    calls = []
    state = slurm_state("22.05", "lng", calls=calls)
    for name in COUNTS:
        assert getattr(state, name) is None, name
    assert state.hosts == [] and state.nodes == [] and state.jobs == [] and state.vo_counts == {}
    assert state.status == "Closed" and state.max_wall_clock_time_min is None
    assert state.queue_missing and state.existing_queues == ("long", "short")  # the two scontrol_partition_*.txt
    assert state.error == "queue 'lng': slurm has no such partition; did you mean 'long'? (its partitions: long, short)"
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("ERROR", state.error)]
    assert ["scontrol", "--all", "show", "partition", "-o"] in calls


def test_a_partition_without_jobs_has_0_jobs_and_a_named_one_is_not_looked_for():
    """The other side of the rule: scontrol names the partition, so squeue's empty answer is 0 jobs."""
    calls = []
    state = slurm_state("22.05", "short", calls=calls, overrides={"squeue": (0, "", "")})
    assert state.error is None and not state.queue_missing
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (0, 0, 0)
    assert (state.total_cpus, state.status) == (2, "Production")  # sinfo_short.txt: vm, 2 CPUs
    assert not any(call[:2] == ["scontrol", "--all"] for call in calls)


def test_a_partition_only_squeue_names_keeps_its_counts():
    """scontrol fails for another reason, but squeue lists the partition's jobs: it exists."""
    state = slurm_state("22.05", "short", overrides={"scontrol": lambda args: None if args[0] == "--all" else
                                                     (1, "", "slurm_load_partitions: Socket timed out\n")})
    assert not state.queue_missing and state.status is None
    assert (state.running_jobs, state.total_jobs) == (2, 9) and state.total_cpus == 2


def test_sinfo_naming_no_node_of_a_partition_with_nodes_is_not_0_cpus():
    """scontrol's Nodes=vm and an empty sinfo answer disagree: the CPUs are unknown, never 0."""
    state = slurm_state("22.05", "short", slurm_json="no",
                        overrides={"sinfo": lambda args: (0, "", "") if "-N" in args else None})
    assert state.total_cpus is None and state.free_cpus is None and state.free_job_slots is None
    assert "sinfo lists no node of partition short (scontrol: Nodes=vm)" in state.error
    assert state.total_jobs == 9  # squeue's answer still counts


def test_unknown_partition_when_the_partitions_cannot_be_listed():
    """Nothing names the partition and scontrol cannot list the partitions: every count unknown,
    and no claim that Slurm does not have it."""
    state = slurm_state("22.05", "lng", overrides={"scontrol": (1, "", "slurm_load_partitions: Unable to contact slurm "
                                                                        "controller (connect failure)\n")})
    for name in COUNTS:
        assert getattr(state, name) is None, name
    assert not state.queue_missing and state.status is None
    assert "counts left out: no answer names partition 'lng' or lists the partitions there are" in state.error


def test_no_partition_named():
    state = queue_state("slurm", LrmsContext(queue=None, ce_config={}, hosts=[], run=replay("22.05")))
    assert "no partition named" in state.error and state.lrms_version is None


def test_garbled_version_and_partition():
    state = slurm_state("22.05", "short", overrides={"scontrol": (0, "Welcome to Slurm!\n", "")})
    assert "scontrol: unexpected field" in state.error or "no partition 'short'" in state.error
    assert state.status is None
    state = slurm_state("22.05", "short", overrides={"sinfo": (0, "hello\n", "")})
    assert "sinfo --version: unexpected output" in state.error


# -- faults, through real subprocesses (fake tools in slurm_bin_dir) -----------------------

def fake_tools(directory: Path, body: str, tools=("sinfo", "squeue", "scontrol", "sacctmgr")) -> None:
    for tool in tools:
        path = directory / tool
        path.write_text("#!/bin/sh\n" + body + "\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)


def live_state(bin_dir: Path, timeout_s: float = 5.0, **cfg):
    context = LrmsContext(queue="short", ce_config={"slurm_bin_dir": str(bin_dir), **cfg}, hosts=[], timeout_s=timeout_s)
    return queue_state("slurm", context)


def assert_nothing_known(state):
    for name in ("status", "total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
                 "estimated_response_time_s", "worst_response_time_s", "max_wall_clock_time_min", "lrms_version"):
        assert getattr(state, name) is None, name
    assert state.hosts == [] and state.jobs == []


def test_tools_that_print_nothing_publish_no_count(tmp_path):
    """Issue 26, finding 4: every tool exits 0 with no output.  That names no partition: nothing is
    counted (it was 0 jobs and 0 CPUs), and nothing says the partition does not exist either."""
    fake_tools(tmp_path, "exit 0")
    state = live_state(tmp_path)
    assert_nothing_known(state)
    assert not state.queue_missing and state.nodes == [] and state.vo_counts == {}
    assert "counts left out: no answer names partition 'short' or lists the partitions there are" in state.error


def test_commands_missing(tmp_path):
    state = live_state(tmp_path)
    assert_nothing_known(state)
    assert f"{tmp_path}/sinfo: command not found" in state.error
    assert f"{tmp_path}/squeue: command not found" in state.error


def test_commands_slow_are_cut_at_the_deadline(tmp_path):
    fake_tools(tmp_path, "exec sleep 30")
    state = live_state(tmp_path, timeout_s=0.5)
    assert_nothing_known(state)
    assert "timed out" in state.error  # cut at its deadline, not waited for
    assert "sinfo timed out after" in state.error


def test_commands_failing(tmp_path):
    fake_tools(tmp_path, 'echo "slurm_load_partitions: Unable to contact slurm controller (connect failure)" >&2; exit 1')
    state = live_state(tmp_path)
    assert_nothing_known(state)
    assert "exited 1: slurm_load_partitions: Unable to contact slurm controller (connect failure)" in state.error


def test_commands_printing_nonsense(tmp_path):
    fake_tools(tmp_path, 'printf "\\377\\376 nonsense | with | pipes\\n"')
    state = live_state(tmp_path)
    assert_nothing_known(state)
    assert "sinfo --version: unexpected output" in state.error
    assert "squeue: output does not end with a complete job record" in state.error


def test_command_prefix_is_put_in_front(tmp_path):
    log = tmp_path / "argv"
    wrapper = tmp_path / "wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit 1\n')
    wrapper.chmod(0o755)
    live_state(tmp_path / "nothing", lrms_command_prefix=[str(wrapper), "--via"])
    first = log.read_text().splitlines()[0]
    assert first == f"--via {tmp_path}/nothing/sinfo --version"


# -- small parsers ---------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [
    ("5:00", 300), ("1:00:00", 3600), ("2-00:00:00", 172800), ("1-02:03:04", 93784), ("30", 1800),
    ("00:30:00", 1800), ("UNLIMITED", None), ("INFINITE", None), ("N/A", None), ("NONE", None),
])
def test_parse_duration(text, seconds):
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["soon", "1:2:3:4", "-5", "1-x"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration_s(text)


def test_parse_timestamp_is_utc():
    assert parse_timestamp("1970-01-02T00:00:01") == 86401.0
    assert parse_timestamp("N/A") is None and parse_timestamp("Unknown") is None and parse_timestamp("None") is None
    with pytest.raises(ValueError):
        parse_timestamp("11/22-14:25:29")


@pytest.mark.parametrize("text, mb", [("1000M", 1000), ("4G", 4096), ("512", 512), ("0", None), ("2T", 2 * 1024 * 1024),
                                      ("1536K", 2)])
def test_parse_memory(text, mb):
    assert parse_memory_mb(text) == mb


@pytest.mark.parametrize("text, version", [("slurm 20.11.9\n", "20.11.9"), ("slurm-wlm 22.05.8\n", "22.05.8"),
                                           ("slurm 23.11.4-1\n", "23.11.4-1")])
def test_parse_version(text, version):
    assert parse_version(text) == version


def test_split_key_values_keeps_spaces_and_equals_in_values():
    fields = split_key_values("NodeName=vm OS=Linux 6.1.0 #1 SMP PREEMPT_DYNAMIC  RealMemory=1000 TRES=cpu=2,mem=1000M")
    assert fields == {"NodeName": "vm", "OS": "Linux 6.1.0 #1 SMP PREEMPT_DYNAMIC", "RealMemory": "1000",
                      "TRES": "cpu=2,mem=1000M"}


def test_expand_hostlist():
    assert expand_hostlist("n[01-03,7],gpu1") == ["n01", "n02", "n03", "n7", "gpu1"]
    assert expand_hostlist("") == [] and expand_hostlist("(null)") == []


def test_squeue_format_ends_every_field_with_the_token():
    fmt = squeue_format("abc123")
    fields = fmt.split(",")
    assert len(fields) == len(lrms_slurm.SQUEUE_FIELDS)
    assert all(f.endswith("|abc123|") for f in fields[:-1]) and fields[-1] == "Name:|abc123."


def test_parse_squeue_rejects_a_record_with_too_few_fields():
    with pytest.raises(lrms_slurm.SlurmOutputError, match="job record 1"):
        parse_squeue("1|t|RUNNING|t.\n", "t")


def test_every_mapped_state_has_valid_glue_and_sss_words():
    glue = {"SUBMITTED", "WAITING", "READY", "SCHEDULED", "RUNNING", "ABORTED", "DONE", "CLEARED", "CHECKPOINTED"}
    sss = {"Idle", "Hold", "Running", "Suspended", "Completed"}
    for slurm_state_name, glue_status, sss_state in lrms_slurm.iter_states():
        assert glue_status in glue and sss_state in sss, slurm_state_name


def test_auto_falls_back_to_the_text_format_when_sinfo_json_fails():
    # A Slurm built without its openapi/serializer plugins answers --json with an error.
    runner = replay("22.05")
    calls = []

    def run(argv, timeout, env):
        calls.append(list(argv))
        if "--json" in argv:
            return 1, "", "sinfo: error: cannot load serializer plugin for mime type application/json\n"
        return runner(argv, timeout, env)

    context = LrmsContext(queue="short", ce_config={"slurm_json": "auto"}, hosts=[], timeout_s=5, run=run)
    state = queue_state("slurm", context)
    assert state.error is None
    assert (state.total_cpus, state.free_cpus, state.hosts) == (2, 0, ["vm"])
    assert [c for c in calls if c[0] == "sinfo" and "-O" in c]  # the text format was asked for


# -- per-VO counts and the scheduler's view of nodes (issue 13) ----------------------------------

def test_2011_jobs_counted_per_vo_by_the_site_map():
    from glueinfo.lrms.vo_map import VoMap

    vo_map = VoMap.from_values(["account:physics=atlas", "user:bob=cms", "account:bio=lhcb"])
    for with_jobs in (True, False):  # counted every cycle, whether jobs are published or not
        state = slurm_state("20.11", "batch", with_jobs=with_jobs, vo_map=vo_map, slurm_json="no")
        counts = {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()}
        # squeue_batch.txt, by hand: alice/physics RUNNING + PENDING (+ COMPLETED, finished); bob/chem RUNNING +
        # PENDING (+ TIMEOUT, finished); carol/bio 104_1 and 104_2 PENDING (+ 111 FAILED); dave: no rule, local.
        assert counts == {"atlas": (1, 1, 2), "cms": (1, 1, 2), "lhcb": (0, 2, 2)}
    assert slurm_state("20.11", "batch", slurm_json="no").vo_counts == {}  # no [vos] map: every job local


def test_2011_group_rules_count_in_the_cheap_refresh_too():
    from glueinfo.lrms.vo_map import VoMap

    vo_map = VoMap.from_values(["group:phys=atlas", "group:st*=ops"])
    for with_jobs in (True, False):
        state = slurm_state("20.11", "batch", with_jobs=with_jobs, vo_map=vo_map, slurm_json="no")
        counts = {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()}
        # squeue_batch.txt's GroupName, by hand: phys 101 RUNNING, 103 PENDING (107 COMPLETED: finished);
        # staff 106 PENDING; chem and bio match no rule
        assert counts == {"atlas": (1, 1, 2), "ops": (0, 1, 1)}, with_jobs


def test_2011_nodes_as_the_scheduler_sees_them():
    from glueinfo.core.model import HostSnapshot

    state = slurm_state("20.11", "batch", slurm_json="no", hosts=[HostSnapshot(hostname="N02.example.org")])
    # sinfo_batch.txt: n01 8/0/0/8 allocated; n02 4/4/0/8 mixed; n03 drained; n04 down* (not responding)
    assert [(n.name, n.state, n.allocated_cpus, n.total_cpus, n.lrms_state) for n in state.nodes] == [
        ("n01.example.org", "Busy", 8, 8, "allocated"), ("N02.example.org", "Idle", 4, 8, "mixed"),
        ("n03.example.org", "Offline", 0, 8, "drained"), ("n04.example.org", "Unknown", 0, 8, "down*")]


def test_2311_grouped_json_nodes_keep_their_state_but_not_invented_counts():
    state = slurm_state("23.11", "main")
    states = {n.name: (n.state, n.allocated_cpus) for n in state.nodes}
    assert states["c01"] == ("Busy", 64)
