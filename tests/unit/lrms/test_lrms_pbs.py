"""The pbs plugin on recorded outputs of OpenPBS 23.06 and Torque 6.1.3, and on faults.

tests/fixtures/pbs/<flavour-version>/README says where each format comes
from.  Expected numbers are read off the fixture files by hand; the
arithmetic is written out where it is not a plain count.
"""

from __future__ import annotations

import logging
import os
import subprocess

import pytest
from paths import FIXTURES

from glueinfo.core.job import PRIVATE_FIELDS
from glueinfo.core.model import HostSnapshot
from glueinfo.lrms.figures import glue_minutes
from glueinfo.lrms.plugins.pbs import (
    exec_host_cpus,
    exec_vnode_cpus,
    node_jobs_cpus,
    parse_duration_s,
    parse_jobs_json,
    parse_limit,
    parse_size_mb,
    parse_time,
    parse_version,
    sss_node_state,
)
from glueinfo.lrms.registry import LrmsContext, LrmsQueryError, queue_state
from glueinfo.lrms.vo_map import VoMap

OPENPBS = FIXTURES / "pbs" / "openpbs-23.06"
TORQUE = FIXTURES / "pbs" / "torque-6.1.3"
NOW = 1732003200.0  # Tue Nov 19 08:00:00 2024 UTC, the recordings' "timestamp"


def replay(directory, overrides=None, calls=None):
    """A runner answering each PBS command from ``directory`` as the real tool would;
    ``overrides`` maps a tool name (or "qstat-Q", "qstat-jobs") to an answer or an exception."""
    overrides = overrides or {}

    def run(argv, timeout, env):
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        if calls is not None:
            calls.append([tool, *args])
        assert env["TZ"] == "UTC" and not any(k.startswith("PBS_QSTAT") for k in env)
        key = tool
        if tool == "qstat" and "-Q" in args:
            key = "qstat-Q"
        elif tool == "qstat" and "-f" in args:
            key = "qstat-jobs"
        if key in overrides:
            answer = overrides[key]
            if isinstance(answer, BaseException):
                raise answer
            return answer
        if args == ["--version"]:
            return 0, (directory / "qstat_version.txt").read_text(), ""
        json_mode = "json" in args
        if key == "qstat-Q" and args == ["-Q", "-f"]:  # every queue, text in both families
            return 0, (directory / "qstat_Q_all.txt").read_text(), ""
        if key == "qstat-Q":
            path = directory / (f"qstat_Q_{args[-1]}.json" if json_mode else f"qstat_Q_{args[-1]}.txt")
            if not path.exists():
                return 170, "", f"qstat: Unknown queue {args[-1]}\n"
            return 0, path.read_text(), ""
        if key == "qstat-jobs":
            path = directory / (f"qstat_jobs_{args[-1]}.json" if json_mode else f"qstat_jobs_{args[-1]}.xml")
            if not path.exists() and not (directory / f"qstat_Q_{args[-1]}.txt").exists() \
                    and not (directory / f"qstat_Q_{args[-1]}.json").exists():
                return 170, "", f"qstat: Unknown queue {args[-1]}\n"
            return 0, path.read_text(), ""
        if tool == "pbsnodes":
            return 0, (directory / ("pbsnodes.json" if json_mode else "pbsnodes.xml")).read_text(), ""
        raise AssertionError(f"unexpected command {argv}")

    return run


def state_of(directory, queue, overrides=None, calls=None, flavour="auto", with_jobs=True, vo_map=VoMap(), hosts=()):
    ctx = LrmsContext(queue=queue, ce_config={"pbs_flavour": flavour, "pbs_bin_dir": "/opt/pbs/bin"}, hosts=list(hosts),
                      clock=lambda: NOW, with_jobs=with_jobs, run=replay(directory, overrides, calls), vo_map=vo_map)
    return queue_state("pbs", ctx)


def by_id(state):
    return {job.local_id: job for job in state.jobs}


# -- OpenPBS 23.06 ------------------------------------------------------------------------

def test_openpbs_queue_figures():
    calls = []
    state = state_of(OPENPBS, "workq", calls=calls)
    assert state.error is None
    assert (state.lrms_type, state.lrms_version, state.queue) == ("pbs", "23.06.06", "workq")
    assert state.status == "Production"
    # resources_max.walltime 48:00:00 = 2880 min; cput 96:00:00 = 5760 min
    assert (state.max_wall_clock_time_min, state.max_cpu_time_min) == (2880, 5760)
    # max_run "[o:PBS_ALL=6] [u:PBS_GENERIC=4]": the queue's overall limit is 6; max_queued [o:PBS_ALL=500]
    assert (state.max_running_jobs, state.max_total_jobs, state.max_waiting_jobs, state.priority) == (6, 500, None, 50)
    # workq: node01..node04 (gpu01 is bound to queue gpu); 4 x 8 CPUs
    assert state.hosts == ["node01", "node02", "node03", "node04"]
    assert state.total_cpus == 32
    # free only on node02 (8 - 4 assigned); node03 offline and node04 state-unknown,down offer none
    assert state.free_cpus == 4
    # unfinished: 100 R, 101 R, 106 E (running); 102[2] Q, 102[3] Q, 105 Q, 103 H, 104 W; 102[1] X finished; 102[] parent
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (3, 5, 8)
    # min(free 4, max_run 6 - 3 running)
    assert state.free_job_slots == 3
    # estimated.start_time: 102[2], 102[3] 08:10 (600 s), 105 09:00 (3600 s)
    assert state.estimated_response_time_s == (600 + 600 + 3600) // 3 == 1600
    assert state.worst_response_time_s == 3600
    assert ["qstat", "-f", "-t", "-F", "json", "workq"] in calls and ["pbsnodes", "-a", "-F", "json"] in calls


@pytest.mark.parametrize("edit, free", [
    # as recorded: max_run_res.ncpus [o:PBS_ALL=14] is the lower limit; 12 held (resources_assigned.ncpus)
    (lambda text: text, 14 - 12),
    # resources_available.ncpus 16 alone: 16 - 12 = 4 left, node02's 4 free CPUs all usable
    (lambda text: text.replace('"ncpus":"[o:PBS_ALL=14] [u:PBS_GENERIC=8]"', '"ncpus":"[u:PBS_GENERIC=8]"'), 4),
    # resources_available.ncpus 12: the queue's running jobs hold all it may have
    (lambda text: text.replace('"ncpus":16', '"ncpus":12'), 0),
])
def test_openpbs_queue_ncpus_limits_cap_the_free_cpus(edit, free):
    """A queue's resources_available.ncpus is the most CPUs all its running jobs together may use, and
    max_run_res.ncpus's [o:PBS_ALL=N] the most they may be allocated (pbs_queue_attributes(7B)); the nodes bound
    to no queue are shared by every such queue, so their free CPUs can be more than the queue may take.
    qstat_Q_workq_ncpus.json is workq's qstat -Q -f -F json with both set (16 and 14) and its recorded
    resources_assigned.ncpus 12 (node01's 8 + node02's 4).  Before, workq published node02's 4 free CPUs
    (FreeJobSlots min(4, max_run 6 - 3 running) = 3) while the scheduler would start none of its jobs past 14."""
    text = edit((OPENPBS / "qstat_Q_workq_ncpus.json").read_text())
    for with_jobs in (True, False):
        state = state_of(OPENPBS, "workq", overrides={"qstat-Q": (0, text, "")}, with_jobs=with_jobs)
        assert state.error is None and state.status == "Production" and state.running_jobs == 3
        assert state.free_cpus == min(8 - 4, free)
        assert state.free_job_slots == min(state.free_cpus, 6 - 3)
        # the nodes' own view is the scheduler's: node02 still has 4 unassigned CPUs
        assert {n.name: n.allocated_cpus for n in state.nodes if n.state == "Idle"} == {"node02": 4}


def test_openpbs_queue_ncpus_limit_without_an_assigned_count():
    # resources_assigned.ncpus not printed: none held when no job of the queue runs, else unknown
    text = (OPENPBS / "qstat_Q_workq_ncpus.json").read_text().replace('"ncpus":12,', '')
    state = state_of(OPENPBS, "workq", overrides={"qstat-Q": (0, text, "")})
    assert state.running_jobs == 3 and state.free_cpus is None and state.free_job_slots is None
    empty = (OPENPBS / "qstat_jobs_empty.json").read_text()
    state = state_of(OPENPBS, "workq", overrides={"qstat-Q": (0, text, ""), "qstat-jobs": (0, empty, "")})
    assert state.running_jobs == 0 and state.free_cpus == min(8 - 4, 14 - 0) == 4


def test_openpbs_nodes_view():
    state = state_of(OPENPBS, "workq")
    nodes = {n.name: n for n in state.nodes}
    assert [(n.state, n.lrms_state, n.total_cpus, n.allocated_cpus) for n in state.nodes] == [
        ("Busy", "job-busy", 8, 8), ("Idle", "free", 8, 4), ("Offline", "offline", 8, 0),
        ("Unknown", "state-unknown,down", 8, 0)]
    assert nodes["node03"].reason == "disk failure, ticket 4711"
    assert nodes["node02"].reason is None and nodes["node04"].reason is None


def test_openpbs_node_names_become_site_hosts():
    hosts = [HostSnapshot(hostname="node01.example.org"), HostSnapshot(hostname="node02.example.org")]
    state = state_of(OPENPBS, "workq", hosts=hosts)
    assert state.hosts == ["node01.example.org", "node02.example.org", "node03", "node04"]
    assert by_id(state)["100.pbs-head"].nodes == ["node01.example.org", "node02.example.org"]


def test_openpbs_jobs():
    jobs = by_id(state_of(OPENPBS, "workq"))
    assert set(jobs) == {"100.pbs-head", "101.pbs-head", "102[1].pbs-head", "102[2].pbs-head", "102[3].pbs-head",
                         "103.pbs-head", "104.pbs-head", "105.pbs-head", "106.pbs-head"}
    expect = {"100.pbs-head": ("R", "RUNNING", "Running"), "102[1].pbs-head": ("X", "DONE", "Completed"),
              "102[2].pbs-head": ("Q", "SCHEDULED", "Idle"), "103.pbs-head": ("H", "WAITING", "Hold"),
              "104.pbs-head": ("W", "WAITING", "Hold"), "106.pbs-head": ("E", "RUNNING", "Running")}
    for job_id, states in expect.items():
        assert (jobs[job_id].lrms_state, jobs[job_id].glue_status, jobs[job_id].sss_state) == states, job_id
    multi = jobs["100.pbs-head"]
    assert (multi.local_owner, multi.local_group, multi.account, multi.queue) == ("atlas001", "atlas", None, "workq")
    assert multi.nodes == ["node01", "node02"] and multi.delivered_processors == 6 and multi.requested_processors == 6
    assert (multi.requested_nodes, multi.requested_memory_mb, multi.requested_duration_s) == (2, 3072, 7200)
    assert multi.submit_time == NOW - 40 * 60 and multi.start_time == NOW - 30 * 60 and multi.delivered_wall_s == 1800
    assert jobs["101.pbs-head"].account == "cmsprod"
    queued = jobs["102[2].pbs-head"]
    assert queued.start_time == NOW + 600 and queued.start_is_estimate and queued.nodes == []
    assert queued.scheduler_specific == "Not Running: Insufficient amount of resource: ncpus"
    done = jobs["102[1].pbs-head"]
    assert done.end_time == NOW - 15 * 60 and done.start_time == NOW - 19 * 60


def test_openpbs_hostile_job_name_is_kept_as_text():
    job = by_id(state_of(OPENPBS, "workq"))["105.pbs-head"]
    assert job.name == 'x\n999.pbs-head","job_state":"R" <b>&amp;</b> \u00e9\u2603'
    assert job.lrms_state == "Q" and job.local_owner == "dteam001"


def test_openpbs_vo_counts_every_cycle_without_job_list():
    vo_map = VoMap.from_values(["user:atlas*=atlas", "group:cms=cms", "group:lhcb=lhcb"])
    state = state_of(OPENPBS, "workq", with_jobs=False, vo_map=vo_map)
    assert state.jobs == []
    counts = {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()}
    # atlas: 100 R; 102[2] Q, 102[3] Q, 104 W.  cms: 101 R.  lhcb: 103 H.  105 (dteam) and 106 (ops) are local.
    assert counts == {"atlas": (1, 3, 4), "cms": (1, 0, 1), "lhcb": (0, 1, 1)}


def test_openpbs_closed_queue_and_short_limit():
    state = state_of(OPENPBS, "closed", overrides={"qstat-jobs": (0, (OPENPBS / "qstat_jobs_empty.json").read_text(), "")})
    assert state.error is None
    assert state.status == "Closed" and state.free_job_slots == 0
    # walltime 00:30:00 is 30 minutes, not 1800; old-style max_running 20
    assert state.max_wall_clock_time_min == 30 and state.max_running_jobs == 20
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (0, 0, 0)
    assert state.estimated_response_time_s is None


def test_openpbs_routing_queue_is_refused_in_one_line():
    state = state_of(OPENPBS, "route", overrides={"qstat-jobs": (0, (OPENPBS / "qstat_jobs_empty.json").read_text(), "")})
    # a routing queue runs no jobs: the CE is misconfigured, nothing is published for it
    assert state.error == "queue route is a routing queue: it runs no jobs (name an execution queue)"
    assert (state.status, state.total_cpus, state.total_jobs) == (None, None, None)


def test_forced_flavour_still_reads_the_version():
    state = state_of(OPENPBS, "workq", flavour="openpbs")
    assert state.lrms_type == "pbs" and state.lrms_version == "23.06.06" and state.error is None


# -- Torque 6.1.3 ---------------------------------------------------------------------------

def test_torque_queue_figures():
    calls = []
    state = state_of(TORQUE, "batch", calls=calls)
    assert state.error is None
    assert (state.lrms_type, state.lrms_version) == ("torque", "6.1.3")
    assert state.status == "Production"
    # 72:00:00 = 4320 minutes
    assert (state.max_wall_clock_time_min, state.max_cpu_time_min) == (4320, 4320)
    assert (state.max_running_jobs, state.max_total_jobs, state.priority) == (40, 1000, None)
    # neednodes=batch: wn01..wn04 have the property, wn05 (long,bigmem) does not
    assert state.hosts == ["wn01", "wn02", "wn03", "wn04"]
    assert state.total_cpus == 4 * 8
    # wn02: np 8, jobs 0-3/200 -> 4 free; wn01 full; wn03 down,offline; wn04 down
    assert state.free_cpus == 4
    # 200 R, 201 R; 202[1] Q, 202[2] Q, 203 H, 204 Q; 205 C finished
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (2, 4, 6)
    assert state.free_job_slots == 4
    # no estimates from Torque: drain model.  A CPU is free, so first = 0; queued work =
    # 202[1] 1 CPU x 3600 + 202[2] 1 x 3600 + 204 2 x 1800 = 10800 CPU-s over 16 usable CPUs (wn01, wn02)
    assert state.worst_response_time_s == 10800 // 16 == 675
    assert state.estimated_response_time_s == round(675 / 2) == 338
    assert ["qstat", "-f", "-x", "-t", "batch"] in calls and ["pbsnodes", "-x"] in calls


def test_torque_nodes_view():
    state = state_of(TORQUE, "batch")
    assert [(n.name, n.state, n.lrms_state, n.total_cpus, n.allocated_cpus) for n in state.nodes] == [
        ("wn01", "Busy", "job-exclusive", 8, 8), ("wn02", "Idle", "free", 8, 4), ("wn03", "Offline", "down,offline", 8, 0),
        ("wn04", "Offline", "down", 8, 0)]
    # the BEL character in the note is not XML 1.0: replaced, the note kept
    assert state.nodes[2].reason == "bad DIMM & fan, see RT#99 \ufffd"


def test_torque_jobs_and_hostile_name():
    jobs = by_id(state_of(TORQUE, "batch"))
    multi = jobs["200.torque-head"]
    assert multi.nodes == ["wn01", "wn02"] and multi.delivered_processors == 8 and multi.requested_processors == 8
    assert (multi.local_owner, multi.local_group, multi.start_time, multi.delivered_wall_s) == (
        "atlas001", "atlas", 1731999600.0, 3600)
    assert jobs["201.torque-head"].account == "cmsprod"
    assert (jobs["203.torque-head"].glue_status, jobs["203.torque-head"].requested_processors) == ("WAITING", 2)
    done = jobs["205.torque-head"]
    assert (done.glue_status, done.sss_state, done.end_time, done.nodes) == ("DONE", "Completed", 1732002520.0, ["wn02"])
    evil = jobs["204.torque-head"]
    # a raw '&' and a control character (Torque copies names byte for byte) are read as text, never as markup
    assert evil.name == "evil&name\ufffd </Job_Name><job_state>R</job_state> \u00e9"
    assert evil.lrms_state == "Q" and evil.glue_status == "SCHEDULED"


def test_torque_disabled_started_queue_is_draining_and_wrapped_values_read():
    state = state_of(TORQUE, "long", overrides={"qstat-jobs": (0, "", "")})
    assert state.error is None
    assert state.status == "Draining" and state.free_job_slots == 0
    assert state.max_wall_clock_time_min == 336 * 60
    assert state.hosts == ["wn05"] and (state.total_cpus, state.free_cpus) == (16, 16)
    assert state.total_jobs == 0



# The counts-only refresh reads Torque's job list into columns (pbs.count_jobs_xml), not job records.

def torque_counts(text=None, vo_map=VoMap()):
    overrides = {"qstat-jobs": (0, text, "")} if text is not None else None
    return state_of(TORQUE, "batch", overrides=overrides, with_jobs=False, vo_map=vo_map)


def test_torque_counts_only_refresh():
    vo_map = VoMap.from_values(["group:atlas=atlas", "account:cmsprod=cms", "user:lhcb*=lhcb"])
    state = torque_counts(vo_map=vo_map)
    assert state.error is None and state.jobs == []
    # 200 R, 201 R; 202[1] Q, 202[2] Q, 203 H, 204 Q; 205 C finished, not counted
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (2, 4, 6)
    counts = {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()}
    # atlas (group): 200 R, 202[1] Q, 202[2] Q.  cms (account cmsprod): 201 R.  lhcb (user lhcb001): 203 H.
    assert counts == {"atlas": (1, 2, 3), "cms": (1, 0, 1), "lhcb": (0, 1, 1)}
    # as with the job list: a CPU free, queued work 202[1] 1 x 3600 + 202[2] 1 x 3600 + 204 2 x 1800 (nodes
    # 1:ppn=2) = 10800 CPU-s over 16 usable CPUs -> 675; estimated half of it
    assert (state.worst_response_time_s, state.estimated_response_time_s) == (675, 338)


def test_torque_counts_only_owner_without_euser_and_array_parent():
    text = (TORQUE / "qstat_jobs_batch.xml").read_text()
    text = text.replace("<euser>dteam001</euser>", "<euser></euser>").replace("<job_state>H</job_state>",
                                                                              "<job_state>B</job_state>")
    state = torque_counts(text, VoMap.from_values(["user:dteam*=dteam", "user:lhcb*=lhcb"]))
    assert state.error is None
    # 203 is now an array parent: its subjobs are listed themselves, it is not counted
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (2, 3, 5)
    # 204 has an empty euser: its owner is Job_Owner's user, dteam001@ce02.example.org; lhcb has a rule, no job
    assert {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()} == {"dteam": (0, 1, 1),
                                                                                          "lhcb": (0, 0, 0)}


@pytest.mark.parametrize("old, new, error", [
    ("<job_state>H</job_state>", "<job_state>Z</job_state>", "job '203.torque-head': unknown job_state 'Z'"),
    ("<walltime>00:30:00</walltime>", "<walltime>half an hour</walltime>",
     "job '204.torque-head': not a PBS duration: 'half an hour'"),
    ("<Data><Job>", "<Data><euser>nobody</euser><Job>", "<euser> outside a <Job>"),
    ("<Data><Job>", "<Data><Resource_List/><Job>", "<Resource_List> outside a <Job>"),
    ("<Job_Id>203.torque-head</Job_Id>", "<Job_Id> </Job_Id>", "a job without a Job_Id"),
])
def test_torque_counts_only_fails_the_job_step_as_the_job_list_does(old, new, error):
    text = (TORQUE / "qstat_jobs_batch.xml").read_text()
    assert text.count(old) == 1
    counts, listed = torque_counts(text.replace(old, new)), state_of(
        TORQUE, "batch", overrides={"qstat-jobs": (0, text.replace(old, new), "")})
    assert counts.error == listed.error == f"torque: qstat -f -x: {error}"
    assert counts.total_jobs is None and counts.vo_counts == {} and counts.total_cpus == 32

# Torque's job list is read without a tree when it is plain, as Torque prints it (xmlsafe.plain_elements),
# and from a tree when it is not: both readings must give the same jobs and counts.

@pytest.mark.parametrize("old, new", [
    ("<Data><Job>", "<Data><!-- qstat --><Job>"),                                       # a comment: the tree
    ("<Data><Job>", '<Data><Job note="a > b">'),                                        # an attribute: still plain
    ("<Data><Job>", '<?xml version="1.0" encoding="UTF-8"?>\n<Data><Job>'),             # a declaration: still plain
])
def test_torque_job_list_reads_the_same_plain_or_as_a_tree(old, new):
    text = (TORQUE / "qstat_jobs_batch.xml").read_text()
    dressed = text.replace(old, new, 1)
    for with_jobs in (True, False):
        as_printed = state_of(TORQUE, "batch", with_jobs=with_jobs)
        read = state_of(TORQUE, "batch", overrides={"qstat-jobs": (0, dressed, "")}, with_jobs=with_jobs)
        assert read.error is None and (read.running_jobs, read.waiting_jobs, read.total_jobs) == (2, 4, 6)
        assert read.jobs == as_printed.jobs and read.vo_counts == as_printed.vo_counts
        # the hostile name (a raw "&", a control character) repaired and read as text either way
        if with_jobs:
            assert by_id(read)["204.torque-head"].name == "evil&name\ufffd </Job_Name><job_state>R</job_state> \u00e9"


def _standard_library_reading(monkeypatch):
    """Make msgspec refuse every job list, so the plugin reads it with json.loads as it did before msgspec."""
    import msgspec

    class Refusing:
        def __init__(self, *args, **kwargs):
            pass

        def decode(self, text):
            raise msgspec.DecodeError("refused for the test")

    monkeypatch.setattr(msgspec.json, "Decoder", Refusing)


@pytest.mark.parametrize("name", ["qstat_jobs_workq.json", "qstat_jobs_express.json"])
@pytest.mark.parametrize("full, private", [(True, frozenset()), (True, frozenset(PRIVATE_FIELDS)), (False, frozenset())])
def test_openpbs_job_list_reads_the_same_as_json_loads_gives_it(monkeypatch, name, full, private):
    # msgspec decodes only the attributes the plugin reads: every job must come out exactly as from
    # the standard library's whole reading, private fields and all.
    import json

    text = (OPENPBS / name).read_text()
    with monkeypatch.context() as patch:
        patch.setattr(json, "loads", lambda *a, **k: pytest.fail("the job list fell back to json.loads"))
        fast = parse_jobs_json(text, full, private)
    _standard_library_reading(monkeypatch)
    assert fast == parse_jobs_json(text, full, private) and len(fast) >= 7


def test_every_attribute_the_job_reader_asks_for_is_one_msgspec_decodes():
    # The decoder keeps a fixed list of attribute names; a name the reader asks for and the list lacks
    # would read as absent.  Ask the reader itself, on recorded jobs of every state, with every field.
    import json

    from glueinfo.lrms.plugins import pbs

    asked: dict[str, set[str]] = {}

    class Recording(dict):
        def __init__(self, where, values):
            super().__init__(values)
            self.where = where

        def get(self, key, default=None):
            asked.setdefault(self.where, set()).add(key)
            return super().get(key, default)

    converters = pbs._Converters(frozenset(PRIVATE_FIELDS))
    for name in ("qstat_jobs_workq.json", "qstat_jobs_express.json"):
        for job_id, attributes in json.loads((OPENPBS / name).read_text())["Jobs"].items():
            groups = [Recording(group, attributes.get(group) or {}) for group in ("Resource_List", "resources_used", "estimated")]
            pbs._job_from(job_id, Recording("job", attributes), *groups, converters, True)
    shape = pbs._job_list_type(True, frozenset(PRIVATE_FIELDS)).__annotations__["Jobs"].__args__[0].__args__[1]
    kept = {"job": set(shape.__annotations__), **{g: set(shape.__annotations__[g].__annotations__)
                                                   for g in ("Resource_List", "resources_used", "estimated")}}
    assert asked["job"] >= {"job_state", "Exit_status", "Hold_Types", "depend", "Variable_List", "jobdir"}  # all states read
    for where, names in asked.items():
        assert names <= kept[where], (where, names - kept[where])


@pytest.mark.parametrize("document, expected", [
    # JSON that json.loads reads and msgspec, stricter, refuses: read as before, not failed
    ('{"Jobs":{"1.s":{"job_state":"Q","euser":"ann","Job_Name":"a\\ud800b","session_id":NaN}}}', ("ann", "a\ud800b")),
    ('{"Jobs":{"1.s":{"job_state":"Q","euser":"bob","Job_Name":"\\ud800"}}}', ("bob", "\ud800")),
])
def test_json_msgspec_refuses_is_read_as_json_loads_reads_it(document, expected):
    (job,) = parse_jobs_json(document)
    assert (job.owner, job.info.name) == expected


@pytest.mark.parametrize("document, said", [
    ('{"Jobs": [1, 2]}', "'Jobs' is not an object"),
    ('{"Jobs": {"1.s": {"job_state": "Q"}', "not valid JSON"),
    ('[]', "not a JSON object"),
    ('{"Jobs": {"1.s": {"job_state": "Q", "Variable_List": {"A": "\\q"}}}}', "not valid JSON"),  # in an attribute not read
])
def test_malformed_job_lists_fail_in_one_line_as_before(document, said):
    with pytest.raises(LrmsQueryError) as raised:
        parse_jobs_json(document)
    assert said in str(raised.value) and "\n" not in str(raised.value)


# -- faults -------------------------------------------------------------------------------------

def test_server_down_leaves_figures_unknown_with_one_warning(caplog):
    down = (2, "", (OPENPBS / "server_down_qstat.stderr").read_text())
    nodes_down = (1, "", (OPENPBS / "server_down_pbsnodes.stderr").read_text())
    with caplog.at_level(logging.WARNING, logger="glueinfo.lrms"):
        state = state_of(OPENPBS, "workq", overrides={"qstat-Q": down, "qstat-jobs": down, "pbsnodes": nodes_down})
    assert state.lrms_version == "23.06.06"  # qstat --version needs no server
    assert (state.status, state.total_cpus, state.free_cpus, state.total_jobs, state.free_job_slots) == (None,) * 5
    assert "Connection refused" in state.error and "pbsnodes" in state.error and "\n" not in state.error
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_torque_server_down():
    down = (1, "", (TORQUE / "server_down_qstat.stderr").read_text())
    state = state_of(TORQUE, "batch", overrides={"qstat-jobs": down})
    assert state.total_jobs is None and state.running_jobs is None and state.vo_counts == {}
    assert state.status == "Production" and state.total_cpus == 32  # the rest still read
    assert "Cannot connect to default server host 'torque-head'" in state.error


@pytest.mark.parametrize("name, what", [
    ("qstat_jobs_truncated.json", "not valid JSON"),
    ("qstat_jobs_bad_escape.json", "not valid JSON"),
])
def test_malformed_json_fails_the_job_step_only(name, what):
    state = state_of(OPENPBS, "workq", overrides={"qstat-jobs": (0, (OPENPBS / name).read_text(), "")})
    assert state.total_jobs is None and state.jobs == [] and what in state.error
    assert state.free_cpus == 4 and state.estimated_response_time_s is None


@pytest.mark.parametrize("name, what", [
    ("qstat_jobs_truncated.xml", "not well-formed XML"),
    ("qstat_jobs_lt_in_name.xml", "not well-formed XML"),
])
def test_malformed_xml_fails_the_job_step_only(name, what):
    state = state_of(TORQUE, "batch", overrides={"qstat-jobs": (0, (TORQUE / name).read_text(), "")})
    assert state.total_jobs is None and what in state.error and "\n" not in state.error
    assert state.total_cpus == 32


def test_torque_xml_with_an_entity_declaration_is_refused():
    evil = '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x "y">]><Data><Job><Job_Id>1.t</Job_Id><job_state>R</job_state></Job></Data>'
    state = state_of(TORQUE, "batch", overrides={"qstat-jobs": (0, evil, "")})
    assert state.total_jobs is None and "DTDs and entity declarations are not accepted" in state.error


def test_unknown_job_state_names_the_job():
    text = (OPENPBS / "qstat_jobs_workq.json").read_text().replace('"job_state":"W"', '"job_state":"Z"')
    state = state_of(OPENPBS, "workq", overrides={"qstat-jobs": (0, text, "")})
    assert state.total_jobs is None and "job '104.pbs-head': unknown job_state 'Z'" in state.error


def test_a_list_where_a_time_belongs_names_the_job_and_the_value():
    text = (OPENPBS / "qstat_jobs_workq.json").read_text().replace('"walltime":"10:00:00"', '"walltime":["10:00:00"]')
    state = state_of(OPENPBS, "workq", overrides={"qstat-jobs": (0, text, "")})
    assert state.total_jobs is None
    assert "job '101.pbs-head': not a PBS duration: \"['10:00:00']\"" in state.error

def test_missing_command_and_timeout():
    state = state_of(OPENPBS, "workq", overrides={"pbsnodes": FileNotFoundError(2, "No such file")})
    assert state.total_cpus is None and state.hosts == [] and "/opt/pbs/bin/pbsnodes: command not found" in state.error
    assert state.total_jobs == 8
    slow = state_of(OPENPBS, "workq", overrides={"qstat-jobs": subprocess.TimeoutExpired("qstat", 10)})
    assert slow.total_jobs is None and "qstat timed out" in slow.error


def test_auto_flavour_undecidable_is_fatal_in_one_line():
    state = state_of(OPENPBS, "workq", overrides={"qstat": (0, "qstat: illegal option -- -\nusage: ...\n", "")})
    assert state.status is None and state.total_jobs is None
    assert state.error == "qstat --version: unexpected output 'qstat: illegal option -- - usage: ...'"


COUNTS = ("total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
          "estimated_response_time_s", "worst_response_time_s")


@pytest.mark.parametrize(("directory", "queue", "meant", "existing"), [
    (OPENPBS, "wrkq", "workq", ("closed", "express", "mcore", "route", "workq")),
    (TORQUE, "lng", "long", ("batch", "express", "long", "mcore")),
])
def test_a_queue_the_server_does_not_have_publishes_no_count(caplog, directory, queue, meant, existing):
    """Issue 25/26: qstat answers "Unknown queue"; without the queue every node was counted as its
    (queue_nodes).  No count, Closed, one ERROR naming qstat -Q -f's queues and the one meant."""
    calls = []
    state = state_of(directory, queue, calls=calls)
    for name in COUNTS:
        assert getattr(state, name) is None, name
    assert state.hosts == [] and state.nodes == [] and state.vo_counts == {} and state.max_wall_clock_time_min is None
    assert state.status == "Closed" and state.queue_missing and state.existing_queues == existing
    assert state.error == (f"queue {queue!r}: pbs has no such queue; "
                           f"did you mean {meant!r}? (its queues: {', '.join(existing)})")
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert ["qstat", "-Q", "-f"] in calls


@pytest.mark.parametrize("flavour", ["openpbs", "torque"])
def test_tools_that_print_nothing_publish_no_count(flavour):
    """Issue 26, finding 4: qstat and pbsnodes exit 0 printing nothing: nothing counted, nothing
    claimed about the queue's existence."""
    empty = (0, "", "")
    state = state_of(OPENPBS, "workq", flavour=flavour,
                     overrides={key: empty for key in ("qstat", "qstat-Q", "qstat-jobs", "pbsnodes")})
    for name in COUNTS:
        assert getattr(state, name) is None, name
    assert state.status is None and not state.queue_missing and state.hosts == []


def test_bad_flavour_and_missing_queue():
    assert "pbs_flavour 'pbspro' is not" in state_of(OPENPBS, "workq", flavour="pbspro").error
    assert "no queue named" in state_of(OPENPBS, None).error


# -- parsers --------------------------------------------------------------------------------------

def test_version_lines():
    assert parse_version("pbs_version = 19.1.3\n") == ("openpbs", "19.1.3")
    assert parse_version("Version: 4.2.10\nCommit: 1a2b3c\n") == ("torque", "4.2.10")
    assert parse_version("version: 2.5.13\n") == ("torque", "2.5.13")
    with pytest.raises(LrmsQueryError, match="unexpected output"):
        parse_version("garbage")


def test_durations_and_minutes():
    assert parse_duration_s("72:00:00") == 259200
    assert parse_duration_s("00:30:00") == 1800
    assert parse_duration_s("45:00") == 2700
    assert parse_duration_s("90") == 90
    assert parse_duration_s(3600) == 3600
    assert glue_minutes(parse_duration_s("00:30:00")) == 30 and glue_minutes(59) == 1 and glue_minutes(None) is None
    with pytest.raises(ValueError, match="not a PBS duration"):
        parse_duration_s("1-00:00:00")


def test_sizes_times_limits():
    assert (parse_size_mb("4gb"), parse_size_mb("1048576kb"), parse_size_mb("512mb"), parse_size_mb("1mw")) == (4096, 1024, 512, 8)
    assert parse_time("Tue Nov 19 08:00:00 2024") == NOW and parse_time("1732003200") == NOW and parse_time("") is None
    with pytest.raises(ValueError):
        parse_time("2024-11-19T08:00:00")
    assert (parse_limit("[o:PBS_ALL=100]"), parse_limit("[u:PBS_GENERIC=10]"), parse_limit("12")) == (100, None, 12)


def test_exec_host_forms():
    assert exec_host_cpus("node1/0*2+node2/0*2") == {"node1": 2, "node2": 2}  # OpenPBS
    assert exec_host_cpus("wn01/0-3+wn02/0-3") == {"wn01": 4, "wn02": 4}  # Torque 6
    assert exec_host_cpus("wn01/0+wn01/1+wn02/0") == {"wn01": 2, "wn02": 1}  # Torque 2-4
    assert exec_host_cpus("wn01/0-1,3") == {"wn01": 3}
    assert exec_vnode_cpus("(n1:ncpus=2:mem=1gb)+(n2:ncpus=3)") == {"n1": 2, "n2": 3}
    with pytest.raises(ValueError):
        exec_host_cpus("wn01")


def test_node_jobs_forms():
    assert node_jobs_cpus("0-3/12.srv,4/13.srv") == 5  # Torque 6
    assert node_jobs_cpus("0/12.srv, 1/12.srv, 2/13.srv") == 3  # Torque 2-4
    assert node_jobs_cpus(["12.srv/0", "12.srv/1"]) == 2  # OpenPBS JSON
    assert node_jobs_cpus("") == 0


@pytest.mark.parametrize("words, total, allocated, sss", [
    ("free", 8, 0, "Idle"), ("free", 8, 8, "Busy"), ("job-busy", 8, 8, "Busy"), ("job-exclusive", 8, 2, "Busy"),
    ("offline", 8, 0, "Offline"), ("down,offline", 8, 0, "Offline"), ("job-busy,offline", 8, 8, "Offline"),
    ("down", 8, 0, "Offline"), ("state-unknown,down", 8, 0, "Unknown"), ("stale", 8, 0, "Unknown"),
    ("maintenance", 8, 0, "Offline"), ("resv-exclusive", 8, 0, "Busy"), ("free", None, None, "Unknown"),
])
def test_node_state_table(words, total, allocated, sss):
    assert sss_node_state(words, total, allocated) == sss
