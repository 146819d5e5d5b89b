"""The GLUE figures every batch plugin derives by one rule (glueinfo.lrms.figures): FreeJobSlots,
limits in minutes and the finished job states, and what a site admin or a broker sees of them
through each plugin.  Expected values are written by hand."""

from __future__ import annotations

import importlib

import pytest
from paths import FIXTURES
from slurm_records import slurm_state

from glueinfo.core.job import JobInfo
from glueinfo.lrms import figures
from glueinfo.lrms.figures import FINISHED_STATES, free_job_slots, glue_minutes
from glueinfo.lrms.plugins.lsf import parse_limit_minutes
from glueinfo.lrms.vo_map import VoMap, count_by_vo

# -- FreeJobSlots ------------------------------------------------------------------------------


def test_free_job_slots_of_a_production_queue_without_a_limit_are_its_free_cpus():
    assert free_job_slots("Production", 12, None, 3) == 12
    assert free_job_slots("Production", 12, None, None) == 12  # no limit: the running count does not matter
    assert free_job_slots("Production", 0, None, 7) == 0


def test_free_job_slots_are_capped_by_the_running_job_limit():
    assert free_job_slots("Production", 48, 10, 1) == 9
    assert free_job_slots("Production", 8, 64, 4) == 8  # the free CPUs are the tighter bound
    assert free_job_slots("Production", 48, 10, 10) == 0
    assert free_job_slots("Production", 48, 10, 15) == 0  # over the limit (lowered while jobs ran): never negative


@pytest.mark.parametrize("status", ["Queueing", "Draining", "Closed"])
def test_a_queue_that_starts_no_new_job_has_no_free_slot_whatever_else_is_known(status):
    assert free_job_slots(status, 48, 10, 1) == 0
    assert free_job_slots(status, None, None, None) == 0  # the status alone says it


def test_free_job_slots_are_never_invented():
    assert free_job_slots(None, 48, None, 0) is None  # status unknown
    assert free_job_slots("Production", None, None, 0) is None  # free CPUs unknown
    # a limit of 10 and an unknown running count: anything from 0 to 10 could be right
    assert free_job_slots("Production", 48, 10, None) is None


# -- limits in minutes -------------------------------------------------------------------------


def test_glue_minutes_round_down_but_a_positive_limit_is_at_least_one_minute():
    assert glue_minutes(None) is None
    assert glue_minutes(0) == 0
    assert glue_minutes(1) == 1
    assert glue_minutes(45) == 1
    assert glue_minutes(59) == 1
    assert glue_minutes(60) == 1
    assert glue_minutes(119) == 1
    assert glue_minutes(120) == 2
    assert glue_minutes(172000) == 2866  # 2866 min 40 s: the published limit is never longer
    assert glue_minutes(48 * 3600) == 2880


def test_lsf_limits_below_a_minute_publish_one_minute_not_zero():
    assert parse_limit_minutes("0.5 min") == 1
    assert parse_limit_minutes("00:00:30") == 1
    assert parse_limit_minutes("720.0 min") == 720
    assert parse_limit_minutes("12.7 min of hostA") == 12


# -- finished job states -----------------------------------------------------------------------


def test_finished_states_are_the_glue_end_states():
    assert FINISHED_STATES == {"DONE", "CLEARED", "ABORTED"}


def test_per_vo_counts_leave_out_every_finished_state():
    jobs = [JobInfo(local_owner="atlas001", glue_status=status)
            for status in ("RUNNING", "WAITING", "DONE", "CLEARED", "ABORTED")]
    vo_map = VoMap.from_values(["user:atlas*=atlas"])
    vo_map.assign(jobs)
    counts = count_by_vo(jobs)["atlas"]
    assert (counts.running, counts.waiting, counts.total) == (1, 1, 2)


# -- the one rule, called by every batch plugin -----------------------------------------------


@pytest.mark.parametrize("name", ["slurm", "lsf", "pbs", "htcondor", "sge"])
def test_every_batch_plugin_uses_the_one_free_job_slots_rule(name):
    plugin = importlib.import_module(f"glueinfo.lrms.plugins.{name}")
    assert plugin.free_job_slots is figures.free_job_slots


# -- what a broker sees through each plugin ----------------------------------------------------


def test_slurm_free_slots_are_unknown_when_squeue_fails_under_a_qos_running_limit():
    # gpu partition: 48 free CPUs, QoS GrpJobs 10; squeue fails, so how many of the 10 run is unknown.
    # Before the one rule, 48 was published: a broker would have sent jobs to a queue at its limit.
    failing = (1, "", "squeue: error: Unable to contact slurm controller\n")
    state = slurm_state("23.02", "gpu", overrides={"squeue": failing})
    assert (state.free_cpus, state.max_running_jobs, state.running_jobs) == (48, 10, None)
    assert state.free_job_slots is None


def test_slurm_drained_partition_has_no_free_slot_even_when_its_nodes_are_unknown():
    failing = (1, "", "sinfo: error: Unable to contact slurm controller\n")
    state = slurm_state("22.05", "long", overrides={"sinfo": failing})
    assert state.status == "Draining" and state.free_cpus is None
    assert state.free_job_slots == 0  # was unknown: a Draining partition starts no new job whatever its nodes


def _lsf_state(queue, overrides):
    from test_lrms_lsf import LSF10, state_of

    return state_of(LSF10, queue, overrides=overrides)


def test_lsf_free_slots_are_unknown_when_bjobs_fails_under_the_queue_slot_limit():
    # grid: 8 free slots, MAX 64 running; bjobs fails, so the cap is unknown
    state = _lsf_state("grid", {"bjobs": (255, "", "LSF daemon (LIM) not responding ... still trying\n")})
    assert (state.free_cpus, state.max_running_jobs, state.running_jobs) == (8, 64, None)
    assert state.free_job_slots is None


def test_sge_limit_under_a_minute_is_published_as_one_minute():
    from test_lrms_sge import state_of

    text = (FIXTURES / "sge" / "8.1.9" / "qconf_sq_short.txt").read_text()
    text = text.replace("h_rt                  0:30:0", "h_rt                  0:0:45")
    text = text.replace("s_cpu                 3600", "s_cpu                 20")
    state = state_of("short", overrides={"qconf": (0, text, "")})
    assert (state.max_wall_clock_time_s, state.max_cpu_time_s) == (45, 20)
    assert (state.max_wall_clock_time_min, state.max_cpu_time_min) == (1, 1)  # Grid Engine published 0 and 0


def test_sge_free_slots_follow_the_one_rule():
    from test_lrms_sge import state_of

    state = state_of("short")
    # short@vm: 2 slots, both used; Production; Grid Engine has no running-job limit to cap with
    assert (state.status, state.max_running_jobs, state.free_job_slots) == ("Production", None, 0)
