"""The lsf plugin on recorded outputs of IBM Spectrum LSF 10.1.0.13 (JSON) and Platform LSF 9.1.3
(plain formats), and on faults.

tests/fixtures/lsf/README says where each format comes from.  Expected
numbers are read off the fixture files by hand; the arithmetic is written
out where it is not a plain count.
"""

from __future__ import annotations

import logging
import os
import subprocess

import pytest
from paths import FIXTURES

from glueinfo.core.model import HostSnapshot, VoJobCounts
from glueinfo.lrms.plugins.lsf import (
    clock_seconds,
    exec_hosts,
    glue_status,
    parse_limit_minutes,
    parse_stamp,
    parse_version,
    sss_host_state,
    uses_json,
)
from glueinfo.lrms.registry import LrmsContext, LrmsQueryError, queue_state
from glueinfo.lrms.vo_map import VoMap

LSF10 = FIXTURES / "lsf" / "10.1.0.13"
LSF9 = FIXTURES / "lsf" / "9.1.3"
NOW = 1732003200.0  # Tue Nov 19 08:00:00 2024 UTC


def replay(directory, overrides=None, calls=None):
    """A runner answering lsid/bqueues/bhosts/bjobs from ``directory``; ``overrides`` maps a tool
    name to an answer (code, stdout, stderr) or an exception."""
    overrides = overrides or {}

    def run(argv, timeout, env):
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        if calls is not None:
            calls.append([tool, *args])
        assert env["LSB_NTRIES"] == "1" and env["LSB_DISPLAY_YEAR"] == "Y" and env["TZ"] == "UTC"
        assert "LSB_BJOBS_FORMAT" not in env
        if tool in overrides:
            answer = overrides[tool]
            if isinstance(answer, BaseException):
                raise answer
            return answer
        if tool == "lsid":
            return 0, (directory / "lsid.txt").read_text(), ""
        if tool == "bqueues" and args == ["-w"]:
            return 0, (directory / "bqueues_w.txt").read_text(), ""
        if tool == "bqueues":
            path = directory / f"bqueues_l_{args[-1]}.txt"
            if not path.exists():
                return 255, "", f"{args[-1]}: No such queue\n"
            return 0, path.read_text(), ""
        if tool == "bhosts":
            if "-json" in args:
                return 0, (directory / "bhosts_gridhosts.json").read_text(), ""
            return 0, (directory / "bhosts_w.txt").read_text(), ""
        if tool == "bjobs":
            queue = args[args.index("-q") + 1]
            if "-json" in args:
                return 0, (directory / f"bjobs_{queue}.json").read_text(), ""
            path = directory / f"bjobs_w_{queue}.txt"
            if not path.exists():
                return 0, "", "No unfinished job found\n"
            return 0, path.read_text(), ""
        raise AssertionError(f"unexpected command {argv}")

    return run


def state_of(directory, queue, overrides=None, calls=None, with_jobs=True, vo_map=VoMap(), hosts=(), now=NOW):
    ctx = LrmsContext(queue=queue, ce_config={"lsf_envdir": "/etc/lsf", "lsf_bin_dir": "/opt/lsf/bin"},
                      hosts=list(hosts), clock=lambda: now, with_jobs=with_jobs,
                      run=replay(directory, overrides, calls), vo_map=vo_map)
    return queue_state("lsf", ctx)


def by_id(state):
    return {job.local_id: job for job in state.jobs}


# -- LSF 10.1.0.13, JSON ---------------------------------------------------------------------

def test_lsf10_drain_model_when_no_job_started_in_the_last_hour():
    """The same queue seen two hours later (10:00): no job started since 09:00, the drain rule."""
    state = state_of(LSF10, "grid", now=NOW + 7200)
    assert state.response_basis == "model"
    # a slot is free, so first = 0; pending work = 5003[2] 1 x 3600 + 5003[3] 1 x 3600
    # + 5006 2 x RUNLIMIT 2160 min (129600 s) = 266400 slot-s over 48 usable slots (hosta, hostb, hoste)
    assert state.worst_response_time_s == 266400 // 48 == 5550
    assert state.estimated_response_time_s == 2775


def test_lsf10_each_vo_from_its_own_recent_waits():
    vo_map = VoMap.from_values(["user:lhcb*=lhcb", "user:ops*=ops", "user:atlas*=atlas"])
    for with_jobs in (False, True):
        state = state_of(LSF10, "grid", with_jobs=with_jobs, vo_map=vo_map)
        # lhcb001's 5003[1] waited 1800 s, ops001's 5007 60 s; atlas's jobs started before 07:00
        assert state.vo_response_times == {"lhcb": (1800, 1800), "ops": (60, 60)}
        assert state.response_times_of_vo("atlas") == (930, 1800)


def test_lsf10_queue_figures():
    calls = []
    state = state_of(LSF10, "grid", calls=calls)
    assert state.error is None
    assert (state.lrms_type, state.lrms_version, state.queue, state.status) == ("lsf", "10.1.0.13", "grid", "Production")
    # MAXIMUM LIMITS: RUNLIMIT 2160.0 min, CPULIMIT 2880.0 min (the DEFAULT LIMITS RUNLIMIT 60 is not a maximum)
    assert (state.max_wall_clock_time_min, state.max_cpu_time_min) == (2160, 2880)
    assert (state.max_running_jobs, state.max_total_jobs, state.priority) == (64, None, 40)
    assert state.hosts == ["hosta", "hostb", "hostc", "hostd", "hoste"]
    assert state.total_cpus == 5 * 16
    # only hostb has room: MAX 16 - NJOBS 6 - RSV 2
    assert state.free_cpus == 8
    # RUN 5001, 5002, 5003[1] and UNKWN 5008 hold slots; 5003[2], 5003[3], 5006 PEND, 5004 SSUSP, 5005 PSUSP; 5007 DONE
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (4, 5, 9)
    assert state.free_job_slots == min(8, 64 - 4) == 8
    # LSF forecasts no start: the waits of the jobs that started in the hour before 08:00, SUBMIT_TIME to
    # START_TIME: 5003[1] 07:00 -> 07:30 (1800 s), 5007 07:40 -> 07:41 (60 s); 5001 started at 06:00
    assert (state.estimated_response_time_s, state.worst_response_time_s) == ((1800 + 60) // 2, 1800)
    assert state.response_basis == "measured"
    # LSF 10.1.0.13 >= GPU_SINCE: the GPU fields too (issue 27)
    assert ["bhosts", "-o", "host_name status max njobs run ssusp ususp rsv comments ngpus ngpus_alloc", "-json",
            "gridhosts"] in calls
    bjobs = next(c for c in calls if c[0] == "bjobs")
    assert bjobs[:5] == ["bjobs", "-u", "all", "-q", "grid"] and bjobs[-2:] == ["-json", "-hms"]


def test_lsf10_hosts_view():
    state = state_of(LSF10, "grid")
    assert [(n.name, n.state, n.lrms_state, n.total_cpus, n.allocated_cpus, n.reason) for n in state.nodes] == [
        ("hosta", "Busy", "ok", 16, 16, None), ("hostb", "Idle", "ok", 16, 6, None),
        ("hostc", "Offline", "closed_Adm", 16, 0, "kernel upgrade, back Friday"),
        ("hostd", "Unknown", "unavail", 16, 0, None), ("hoste", "Busy", "closed_Full", 16, 16, None)]
    # what a new job can get (Node XML's Available on an Idle node): hostb's 2 reserved slots are not free
    assert {n.name: n.free_cpus for n in state.nodes}["hostb"] == 16 - 6 - 2 == state.free_cpus


def test_lsf10_the_queue_slot_limit_counts_slots_not_running_jobs():
    """MAX is a limit on the queue's job *slots* (QJOB_LIMIT), against which running, suspended and reserving
    jobs all count (IBM, "Job slot limits for parallel jobs").  bqueues_l_grid_max.txt is grid's bqueues -l with
    MAX 40 and its statistics line worked out from bjobs_grid.json: RUN 37 (5001 16 + 5002 8 + 5003[1] 1 +
    5008 12), SSUSP 1 (5004), USUSP 0, RSV 2 (hostb's): 40 slots held, none left.  The old rule took MAX less
    the 4 running *jobs*, 36, and published hostb's 8 free slots while LSF dispatched nothing of grid."""
    text = (LSF10 / "bqueues_l_grid_max.txt").read_text()
    for with_jobs in (True, False):
        state = state_of(LSF10, "grid", overrides={"bqueues": (0, text, "")}, with_jobs=with_jobs)
        assert state.error is None and state.status == "Production"
        assert (state.max_running_jobs, state.running_jobs) == (40, 4)
        assert state.free_cpus == state.free_job_slots == min(16 - 6 - 2, 40 - (37 + 1 + 0 + 2)) == 0
        # hostb still has room for another queue's job: its node view is the host's
        assert {n.name: (n.state, n.free_cpus) for n in state.nodes}["hostb"] == ("Idle", 8)
    # bqueues, not bjobs, says what the queue holds: without the job list FreeCPUs keeps the cap, and
    # FreeJobSlots is unknown by the shared rule (a limit and no running count: test_figures.py)
    down = (255, "", (LSF10 / "lsf_down.stderr").read_text())
    state = state_of(LSF10, "grid", overrides={"bqueues": (0, text, ""), "bjobs": down})
    assert (state.running_jobs, state.free_cpus, state.free_job_slots) == (None, 0, None)
    # the recorded grid (MAX 64, RUN 32 SSUSP 1 USUSP 0 RSV 2: 29 left) keeps hostb's 8
    assert state_of(LSF10, "grid").free_job_slots == min(8, 64 - 35) == 8


def test_lsf10_jl_h_caps_what_each_host_gives_the_queue():
    """JL/H (HJOB_LIMIT) is the slots the queue's jobs may hold on any one host, whatever the host's MAX (shared
    by every queue on it) has left.  bqueues_l_grid_jlh.txt is grid's bqueues -l with JL/H 8 (MAX 64, 40 slots
    held): grid's jobs hold 6 slots of hostb (5002 4, 5003[1] 1, 5004 1 suspended), so hostb gives grid
    min(16 - 6 - 2, 8 - 6) = 2, not its 8; hosta and hoste are full, hostc and hostd down."""
    text = (LSF10 / "bqueues_l_grid_jlh.txt").read_text()
    for with_jobs in (True, False):  # the counts-only bjobs reading keeps a started job's hosts for it
        state = state_of(LSF10, "grid", overrides={"bqueues": (0, text, "")}, with_jobs=with_jobs)
        assert state.error is None
        assert state.free_cpus == state.free_job_slots == min(16 - 6 - 2, 8 - (4 + 1 + 1)) == 2
        # the node view stays the host's: hostb still has 16 - 6 - 2 = 8 slots another queue's job can get
        assert {n.name: n.free_cpus for n in state.nodes if n.state == "Idle"} == {"hostb": 8}
        assert state.total_cpus == 5 * 16
    # without the job list what grid holds on hostb is unknown: FreeCPUs (and so FreeJobSlots) left out
    down = (255, "", (LSF10 / "lsf_down.stderr").read_text())
    state = state_of(LSF10, "grid", overrides={"bqueues": (0, text, ""), "bjobs": down})
    assert state.free_cpus is None and state.free_job_slots is None and state.total_cpus == 80


def test_lsf9_jl_h_from_the_plain_job_list():
    """LSF 9.1.3's bjobs -w names each started job's hosts too.  bqueues_l_short_jlh.txt is short's bqueues -l
    with JL/H 3: short's 7101 and 7104 hold 2 slots of wn01 (NJOBS 2 of MAX 8), so wn01 gives it
    min(8 - 2 - 0, 3 - 2) = 1; wn02 is closed_Excl, wn03 unreach."""
    text = (LSF9 / "bqueues_l_short_jlh.txt").read_text()
    state = state_of(LSF9, "short", overrides={"bqueues": (0, text, "")})
    assert state.error is None and state.status == "Draining"
    assert (state.total_cpus, state.free_cpus, state.free_job_slots) == (24, 1, 0)  # Draining: no new job


def test_lsf10_jobs():
    hosts = [HostSnapshot(hostname="hosta.example.org"), HostSnapshot(hostname="hostb.example.org")]
    jobs = by_id(state_of(LSF10, "grid", hosts=hosts))
    assert set(jobs) == {"5001", "5002", "5003[1]", "5003[2]", "5003[3]", "5004", "5005", "5006", "5007", "5008"}
    expect = {"5001": ("RUN", "RUNNING", "Running"), "5003[2]": ("PEND", "SCHEDULED", "Idle"),
              "5004": ("SSUSP", "WAITING", "Suspended"), "5005": ("PSUSP", "WAITING", "Hold"),
              "5007": ("DONE", "DONE", "Completed"), "5008": ("UNKWN", "RUNNING", "Running")}
    for job_id, states in expect.items():
        assert (jobs[job_id].lrms_state, jobs[job_id].glue_status, jobs[job_id].sss_state) == states, job_id
    mpi = jobs["5002"]
    assert mpi.nodes == ["hostb.example.org", "hoste"] and mpi.delivered_processors == 8
    assert (mpi.local_owner, mpi.local_group, mpi.account) == ("cms001", "cms", "default")
    # Nov 18 22:30 2024 UTC is 9.5 h before now; run limit 10:00:00; run time 09:30:00
    assert mpi.start_time == NOW - 9.5 * 3600 and mpi.requested_duration_s == 36000 and mpi.delivered_wall_s == 34200
    first = jobs["5001"]
    assert (first.account, first.requested_processors, first.submit_time) == ("atlasprod", 16, NOW - 7200 - 600)
    pending = jobs["5003[2]"]
    assert pending.start_time is None and pending.nodes == [] and pending.scheduler_specific == "Job slot limit reached;"
    assert jobs["5007"].end_time == NOW - 15 * 60
    assert jobs["5006"].name == 'x", "STAT":"RUN"}\n<&amp;> \u00e9' and jobs["5006"].lrms_state == "PEND"


def test_lsf10_vo_counts_without_job_list():
    vo_map = VoMap.from_values(["group:atlas=atlas", "group:cms=cms", "user:lhcb*=lhcb"])
    state = state_of(LSF10, "grid", with_jobs=False, vo_map=vo_map)
    assert state.jobs == []
    counts = {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()}
    # atlas: 5001 RUN, 5004 SSUSP.  cms: 5002 RUN, 5008 UNKWN.  lhcb: 5003[1] RUN, 5003[2..3] PEND
    assert counts == {"atlas": (1, 1, 2), "cms": (2, 0, 2), "lhcb": (1, 2, 3)}


def test_lsf10_account_rules_map_the_projects():
    vo_map = VoMap.from_values(["account:atlas*=atlas", "account:default=other"])
    for with_jobs in (True, False):
        counts = state_of(LSF10, "grid", with_jobs=with_jobs, vo_map=vo_map).vo_counts
        view = {vo: (c.running, c.waiting, c.total) for vo, c in counts.items()}
        # bjobs_grid.json's PROJ_NAME by hand: atlasprod 5001 RUN, 5004 SSUSP; default 5002 RUN, 5003[1] RUN,
        # 5008 UNKWN (running when its host was lost, as in the test above), 5003[2..3] PEND, 5005 PSUSP,
        # 5006 PEND (5007 DONE: finished)
        assert view == {"atlas": (1, 1, 2), "other": (3, 4, 7)}, with_jobs


def test_lsf10_inactive_queue_with_window_is_queueing():
    none = (255, "", (LSF10 / "bjobs_none.stderr").read_text())
    calls = []
    state = state_of(LSF10, "night", overrides={"bjobs": none}, calls=calls)
    assert state.error is None
    assert state.status == "Queueing" and state.free_job_slots == 0
    assert state.max_wall_clock_time_min == 30 and state.max_cpu_time_min is None and state.max_running_jobs is None
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (0, 0, 0)
    # HOSTS: all -> bhosts asked about every host
    assert ["bhosts", "-o", "host_name status max njobs run ssusp ususp rsv comments ngpus ngpus_alloc", "-json"] in calls


# -- LSF 9.1.3, plain formats ----------------------------------------------------------------

def test_lsf9_plain_formats():
    calls = []
    state = state_of(LSF9, "short", calls=calls)
    assert state.error is None
    assert (state.lrms_version, state.status) == ("9.1.3.0", "Draining")
    # older bqueues -l prints limits side by side: CPULIMIT 100.0 min of wn01, RUNLIMIT 120.0 min
    assert (state.max_wall_clock_time_min, state.max_cpu_time_min, state.max_running_jobs) == (120, 100, None)
    assert ["bhosts", "-w", "wn01", "wn02", "wn03"] in calls
    assert ["bjobs", "-u", "all", "-q", "short", "-w"] in calls
    assert (state.total_cpus, state.free_cpus) == (24, 8 - 2)
    assert [(n.name, n.state) for n in state.nodes] == [("wn01", "Idle"), ("wn02", "Busy"), ("wn03", "Unknown")]
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (3, 1, 4)
    assert state.free_job_slots == 0 and state.estimated_response_time_s is None
    jobs = by_id(state)
    assert set(jobs) == {"7101", "7102[3]", "7103", "7104"}
    assert jobs["7101"].name == "my job with spaces" and jobs["7101"].nodes == ["wn01", "wn02"]
    assert jobs["7103"].name == "lhcb pending" and jobs["7103"].nodes == []
    # no year printed: Nov 18 23:30 is the latest such time not after now
    assert jobs["7103"].submit_time == NOW - 8.5 * 3600
    assert jobs["7101"].local_group is None and jobs["7101"].account is None


def test_lsf9_no_jobs_message():
    state = state_of(LSF9, "short", overrides={"bjobs": (255, "", "No unfinished job found\n")})
    assert state.error is None and state.total_jobs == 0


# -- faults ------------------------------------------------------------------------------------

def test_lsf_down_one_warning_and_nothing_invented(caplog):
    down = (255, "", (LSF10 / "lsf_down.stderr").read_text())
    with caplog.at_level(logging.WARNING, logger="glueinfo.lrms"):
        state = state_of(LSF10, "grid", overrides={"lsid": (255, "", (LSF10 / "lsid_down.stderr").read_text()),
                                                   "bqueues": down, "bhosts": down, "bjobs": down})
    assert (state.lrms_version, state.status, state.total_cpus, state.free_cpus, state.total_jobs) == (None,) * 5
    assert state.vo_counts == {} and state.nodes == []
    assert "LIM is down" in state.error and "LSF is down" in state.error and "\n" not in state.error
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_truncated_json_fails_the_job_step_only():
    state = state_of(LSF10, "grid", overrides={"bjobs": (0, (LSF10 / "bjobs_truncated.json").read_text(), "")})
    assert state.total_jobs is None and "bjobs -json: not valid JSON" in state.error
    assert state.free_cpus == 8 and state.status == "Production" and state.estimated_response_time_s is None


def test_unknown_stat_names_the_job():
    text = (LSF10 / "bjobs_grid.json").read_text().replace('"STAT":"PSUSP"', '"STAT":"WEIRD"')
    state = state_of(LSF10, "grid", overrides={"bjobs": (0, text, "")})
    assert state.total_jobs is None and "job 5005: unknown job STAT 'WEIRD'" in state.error


def test_garbage_bhosts_and_missing_tool():
    state = state_of(LSF9, "short", overrides={"bhosts": (0, "segfault in libfoo\n", "")})
    assert state.total_cpus is None and "bhosts -w: unexpected output 'segfault in libfoo'" in state.error
    assert state.total_jobs == 4
    missing = state_of(LSF9, "short", overrides={"bjobs": FileNotFoundError(2, "x")})
    assert missing.total_jobs is None and "/opt/lsf/bin/bjobs: command not found" in missing.error
    slow = state_of(LSF9, "short", overrides={"bqueues": subprocess.TimeoutExpired("bqueues", 10)})
    assert slow.status is None and "bqueues timed out" in slow.error


COUNTS = ("total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
          "estimated_response_time_s", "worst_response_time_s")


def test_a_queue_lsf_does_not_have_publishes_no_count(caplog):
    """Issue 25/26: bqueues -l and bjobs -q answer "grd: No such queue"; without the queue bhosts is
    asked about every host, whose 80 slots were the queue's TotalCPUs.  No count, Closed, one
    ERROR naming bqueues -w's queues and the one meant."""
    calls = []
    state = state_of(LSF10, "grd", calls=calls, overrides={"bjobs": (255, "", "grd: No such queue\n")})
    for name in COUNTS:
        assert getattr(state, name) is None, name
    assert state.hosts == [] and state.vo_counts == {} and state.max_wall_clock_time_min is None
    assert state.status == "Closed" and state.queue_missing and state.existing_queues == ("bigmem", "express", "grid",
                                                                                          "night")
    assert state.error == ("queue 'grd': lsf has no such queue; did you mean 'grid'? "
                           "(its queues: bigmem, express, grid, night)")
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert ["bqueues", "-w"] in calls
    assert "no queue named" in state_of(LSF10, None).error


def test_tools_that_print_nothing_publish_no_count():
    """Issue 26, finding 4: every LSF tool exits 0 printing nothing: no job count (it was 0), no
    CPUs, and no claim that the queue does not exist."""
    empty = (0, "", "")
    state = state_of(LSF9, "short", overrides={tool: empty for tool in ("lsid", "bqueues", "bhosts", "bjobs")})
    for name in COUNTS:
        assert getattr(state, name) is None, name
    assert state.status is None and not state.queue_missing
    assert "counts left out: no answer names queue 'short' or lists the queues there are" in state.error


# -- parsers -----------------------------------------------------------------------------------

def test_version_and_format_choice():
    assert parse_version("IBM Spectrum LSF Standard 10.1.0.13, Apr 15 2022\n") == "10.1.0.13"
    assert parse_version("IBM Platform LSF Express 9.1.3.0, Jul 04 2014") == "9.1.3.0"
    assert uses_json("10.1.0.2") and uses_json("10.1.0.13") and not uses_json("10.1.0.1")
    assert not uses_json("9.1.3.0") and not uses_json(None)
    with pytest.raises(LrmsQueryError):
        parse_version("lsid: command failed")


def test_limits_in_minutes():
    # bqueues -l prints RUNLIMIT/CPULIMIT in minutes (IBM's bqueues -l reference): 720.0 min is 12 hours
    assert parse_limit_minutes("720.0 min") == 720
    assert parse_limit_minutes("600.0 min of hostA") == 600
    assert parse_limit_minutes("12:00") == 720
    assert clock_seconds("01:30:00") == 5400 and clock_seconds("600 second(s)") == 600
    with pytest.raises(ValueError):
        clock_seconds("3.0/hostA")


def test_stamps_and_hosts():
    assert parse_stamp("Nov 19 08:00 2024", NOW) == NOW
    assert parse_stamp("Tue Nov 19 07:59:30 2024", NOW) == NOW - 30
    assert parse_stamp("Nov 20 08:00 2024 L", NOW) == NOW + 86400
    # no year: Dec 31 23:00 2024 would be after now, so it is 2023 (2024-01-01 00:00 UTC is 1704067200)
    assert parse_stamp("Dec 31 23:00", NOW) == 1704067200 - 3600
    assert parse_stamp("-", NOW) is None
    assert exec_hosts("4*hostB:2*hostC") == {"hostB": 4, "hostC": 2}
    assert exec_hosts("hostB:hostB:hostC") == {"hostB": 2, "hostC": 1}


@pytest.mark.parametrize("status, glue", [("Open:Active", "Production"), ("Open:Inact", "Queueing"),
                                          ("Open:Inact_Win", "Queueing"), ("Closed:Active", "Draining"),
                                          ("Closed:Inact", "Closed"), ("Broken", None)])
def test_queue_status_table(status, glue):
    assert glue_status(status) == glue


@pytest.mark.parametrize("status, max_slots, used, sss", [
    ("ok", 8, 0, "Idle"), ("ok", 8, 8, "Busy"), ("closed_Full", 8, 8, "Busy"), ("closed_Busy", 8, 2, "Busy"),
    ("closed_Excl", 8, 1, "Busy"), ("closed_Adm", 8, 0, "Offline"), ("closed_Lock", 8, 0, "Offline"),
    ("closed_Wind", 8, 0, "Offline"), ("unavail", 8, 0, "Unknown"), ("unreach", 8, 0, "Unknown"),
    ("closed_LIM", 8, 0, "Unknown"), ("ok", None, 0, "Unknown"),
])
def test_host_state_table(status, max_slots, used, sss):
    assert sss_host_state(status, max_slots, used) == sss



def test_lsf9_plain_jobs_tell_no_group_or_project_so_those_rules_count_nothing():
    # bjobs -w: JOBID USER STAT QUEUE ...; a group: or account: rule cannot match, so its VO's counts are
    # unknown (left out), not 0; a user: rule's VO without a job has 0
    vo_map = VoMap.from_values(["group:atlas=atlas", "account:cms*=cms", "user:nobody*=ops"])
    state = state_of(LSF9, "short", with_jobs=False, vo_map=vo_map)
    assert state.total_jobs is not None and state.owner_kinds == ("user",)
    assert state.vo_counts == {"ops": VoJobCounts()}
    assert (state.counts_of_vo("atlas"), state.counts_of_vo("cms"), state.counts_of_vo("ops")) == (None, None, VoJobCounts())
