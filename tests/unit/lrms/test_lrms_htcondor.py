"""The htcondor plugin on outputs written in HTCondor 24.0's printed formats, and on faults.

tests/fixtures/htcondor/24.0 is hand-written (Debian 12 has no HTCondor) by
tests/fixtures/htcondor/make_fixtures.py from the printers of HTCondor's source
(its README names them).  The expected numbers below were read off the pool
table of that README and the job list of make_fixtures.py by hand.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from paths import FIXTURES

from glueinfo.core.model import HostSnapshot
from glueinfo.lrms.plugins import htcondor
from glueinfo.lrms.plugins.htcondor import (
    JOB_ATTRS,
    SCHEDD_ATTRS,
    SLOT_ATTRS,
    TOKEN_ATTRS,
    group_of,
    in_group,
    literal,
    parse_ads,
    parse_version,
    read_machines,
)
from glueinfo.lrms.registry import LrmsContext, queue_state
from glueinfo.lrms.vo_map import VoMap

D = FIXTURES / "htcondor" / "24.0"
NOW = float((D / "now").read_text())
SCHEDDS = ("ce01.example.org", "sched1.example.org", "sched3@sub.example.org")
VOS = VoMap.from_values(["account:group_atlas.*=atlas"])


def read(name: str) -> str:
    return (D / name).read_text()


def replay(overrides=None, calls=None):
    """A runner answering as the pool of tests/fixtures/htcondor/24.0 would.  ``overrides`` maps a
    tool name, or ``condor_q NAME`` / ``condor_status -schedd`` / ``condor_status slots``, to (code, stdout, stderr), an
    exception to raise, or a function of the arguments."""
    overrides = overrides or {}
    lock = threading.Lock()

    def run(argv, timeout, env):
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        assert env["TZ"] == "UTC" and timeout > 0
        with lock:
            if calls is not None:
                calls.append([tool, *args])
        keys = [tool]
        if tool == "condor_q":
            keys.insert(0, f"condor_q {args[args.index('-name') + 1]}")
        if tool == "condor_status":
            keys.insert(0, "condor_status -schedd" if "-schedd" in args else "condor_status slots")
        for key in keys:
            if key in overrides:
                answer = overrides[key]
                if isinstance(answer, BaseException):
                    raise answer
                return answer(args) if callable(answer) else answer
        if tool == "condor_version":
            return 0, read("condor_version.txt"), ""
        if tool == "condor_status":
            assert "-json" in args and "-attributes" in args
            asked = args[args.index("-attributes") + 1].split(",")
            if "-schedd" in args:
                assert asked == list(SCHEDD_ATTRS)
                return 0, read("condor_status_schedd.json"), ""
            assert asked == list(SLOT_ATTRS)
            return 0, read("condor_status_slots.json"), ""
        if tool == "condor_q":
            assert "-allusers" in args and "-json" in args
            # the token's attributes only for a [vos] map with issuer: or token_group: rules (test_tokens_...)
            assert args[args.index("-attributes") + 1].split(",") in (list(JOB_ATTRS), [*JOB_ATTRS, *TOKEN_ATTRS])
            name = args[args.index("-name") + 1]
            return 0, read(f"condor_q_{name}.json"), ""
        raise AssertionError(f"unexpected command {argv}")

    return run


def state_of(queue="all", by="schedd", overrides=None, calls=None, with_jobs=False, hosts=(), vo_map=VOS, **config):
    ctx = LrmsContext(queue=queue, ce_config={"condor_queue_by": by, **config}, hosts=list(hosts),
                      clock=lambda: NOW, timeout_s=10.0, with_jobs=with_jobs, run=replay(overrides, calls),
                      vo_map=vo_map)
    return queue_state("htcondor", ctx)


def jobs_by_id(state):
    return {job.local_id: job for job in state.jobs}


# -- the pool: CPUs and nodes ------------------------------------------------------------

def test_version_and_cpus_from_slots_not_threads():
    state = state_of()
    assert state.error is None
    # GlueCEInfoLRMSType is GLUE's word, "condor" (EGI's glue-validator), not the plugin's name
    assert state.lrms_type == "condor" and state.lrms_version == "24.0.23"
    # README table: 32+48+32+16+5+16+8; free 4 (wn01) + 48 (wn02) + 1 (wn05 slot5)
    assert state.total_cpus == 157 and state.free_cpus == 53
    for ad in json.loads(read("condor_status_slots.json")):
        assert "DetectedCpus" not in ad and "TotalCpus" not in ad  # not even asked for


def test_nodes_as_the_scheduler_sees_them():
    nodes = {n.name: n for n in state_of().nodes}
    view = {name: (n.state, n.total_cpus, n.allocated_cpus, n.lrms_state) for name, n in nodes.items()}
    assert view == {
        "wn01.example.org": ("Idle", 32, 28, "partly-claimed"),
        "wn02.example.org": ("Idle", 48, 0, "unclaimed"),
        "wn03.example.org": ("Offline", 32, 8, "drained"),
        "wn04.example.org": ("Offline", 16, 0, "drained"),
        "wn05.example.org": ("Idle", 5, 3, "partly-claimed"),
        "wn06.example.org": ("Busy", 16, 16, "busy"),
        "wn07.example.org": ("Offline", 8, 0, "owner"),
    }
    # wn05: 5 static slots, 3 claimed, one Owner (START false), one Unclaimed: 1 CPU for a new job
    assert {name: n.free_cpus for name, n in nodes.items() if n.state == "Idle"} == {
        "wn01.example.org": 4, "wn02.example.org": 48, "wn05.example.org": 1}
    assert nodes["wn03.example.org"].reason == "kernel update (admin)"
    assert "START" in nodes["wn07.example.org"].reason
    assert nodes["wn01.example.org"].reason is None


def test_host_names_follow_the_site():
    hosts = [HostSnapshot(hostname="wn01.example.org"), HostSnapshot(hostname="wn02.example.org")]
    state = state_of(hosts=hosts)
    assert state.hosts[:2] == ["wn01.example.org", "wn02.example.org"] and len(state.hosts) == 7


def test_draining_machine_is_offline_even_before_its_slots_say_drained():
    ads = [{"name": "slot1@a", "machine": "a", "slottype": "Partitionable", "slotid": 1, "cpus": 6,
            "totalslotcpus": 8, "state": "Unclaimed", "draining": True},
           {"name": "slot1_1@a", "machine": "a", "slottype": "Dynamic", "slotid": 1, "cpus": 2, "state": "Claimed",
            "activity": "Retiring", "draining": True}]
    (machine,) = read_machines(ads)
    assert (machine.total, machine.allocated, machine.free_cpus, machine.sss_state) == (8, 2, 0, "Offline")


def test_dynamic_slot_without_its_parent_counts_what_it_holds():
    ads = [{"name": "slot1_1@b", "machine": "b", "slottype": "Dynamic", "slotid": 1, "cpus": 4, "state": "Claimed"}]
    (machine,) = read_machines(ads)
    assert (machine.total, machine.allocated, machine.free_cpus, machine.sss_state) == (4, 4, 0, "Busy")


def test_two_startds_on_one_machine_are_one_node():
    ads = [{"name": "slot1@s1@c", "machine": "c", "slottype": "Partitionable", "slotid": 1, "cpus": 2,
            "totalslotcpus": 4, "state": "Unclaimed"},
           {"name": "slot1_1@s1@c", "machine": "c", "slottype": "Dynamic", "slotid": 1, "cpus": 2, "state": "Claimed"},
           {"name": "slot1@s2@c", "machine": "c", "slottype": "Partitionable", "slotid": 1, "cpus": 4,
            "totalslotcpus": 4, "state": "Unclaimed"}]
    (machine,) = read_machines(ads)
    assert (machine.total, machine.allocated, machine.free_cpus) == (8, 2, 6)


# -- jobs, queues and VOs ------------------------------------------------------------------

def test_all_schedds():
    state = state_of("all")
    assert state.error is None and state.status == "Production"
    # sched1: R 101.0 102.0 103.0, W 101.1 (idle) 101.2 (held); 104.0 completed, 105.0 DAGMan not counted
    # ce01: R 2001 2002 2006 (transferring output) 2007, W 2003 (idle) 2004 (suspended); 2005 removed
    # sched3: W 3001.0 3001.1 3002.0
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (3 + 4, 2 + 2 + 3, 14)
    assert state.max_running_jobs == 10000 + 5 + 10000
    assert state.free_job_slots == 53
    # jobs are idle and HTCondor forecasts no start: the waits (QDate to JobCurrentStartDate) of the jobs
    # started in the hour before now: 101.0 3600 s, 102.0 3200, 103.0 300, 2001 1000, 2002 2000, 2007 1000
    assert (state.estimated_response_time_s, state.worst_response_time_s) == (11100 // 6, 3600)


def test_one_schedd_is_its_own_queue():
    calls: list = []
    state = state_of("ce01.example.org", calls=calls)
    assert state.error is None
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (4, 2, 6)
    assert state.max_running_jobs == 5
    assert state.free_job_slots == 5 - 4  # MaxJobsRunning caps the 53 free CPUs
    assert [c[2] for c in calls if c[0] == "condor_q"] == ["ce01.example.org"]


def test_unknown_schedd_is_a_queue_the_pool_does_not_have(caplog):
    """Issue 25/26: a schedd the collector does not list publishes no number, not even the pool's
    CPUs (157 in the README's table) a queue of it would have had; it is Closed, with one ERROR
    naming the schedds the collector lists and the one meant."""
    state = state_of("sched2.example.org")
    for name in ("running_jobs", "waiting_jobs", "total_jobs", "total_cpus", "free_cpus", "free_job_slots",
                 "max_running_jobs", "estimated_response_time_s"):
        assert getattr(state, name) is None, name
    assert state.status == "Closed" and state.queue_missing and state.existing_queues == SCHEDDS
    assert state.error == ("queue 'sched2.example.org': htcondor has no such schedd; did you mean 'sched1.example.org'? "
                           "(its schedds: ce01.example.org, sched1.example.org, sched3@sub.example.org)")
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    # a name like none of them gets no suggestion, however alike their domains are
    assert "did you mean" not in state_of("nosuch.example.org").error


@pytest.mark.parametrize(("queue", "by"), [("ce01.example.org", "schedd"), ("all", "schedd"),
                                           ("group_atlas", "accounting_group")])
def test_tools_that_print_nothing_publish_no_count(queue, by):
    """Issue 26, finding 4: condor_status and condor_q exit 0 printing nothing (HTCondor prints nothing
    for no ads).  Before, "no schedd named" still came with FreeCPUs and TotalCPUs 0."""
    empty = (0, "", "")
    state = state_of(queue, by=by, overrides={"condor_status slots": empty, "condor_status -schedd": empty,
                                              "condor_version": empty, "condor_q": empty})
    for name in ("total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
                 "estimated_response_time_s"):
        assert getattr(state, name) is None, name
    assert state.status is None and not state.queue_missing and state.hosts == [] and state.nodes == []


def test_accounting_group_queue_holds_its_subgroups_only():
    state = state_of("group_atlas", by="accounting_group", with_jobs=True)
    assert state.error is None
    # group_atlas.prod: 101.0 R 101.1 I 101.2 H 2001 R (2005 removed); group_atlas.analysis: 2006 R, 3001.0/1 I;
    # group_atlastest (3002) is another group
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (3, 4, 7)
    ids = set(jobs_by_id(state))
    assert "sched3@sub.example.org#3002.0" not in ids and "ce01.example.org#2005.0" in ids
    assert {job.queue for job in state.jobs} == {"group_atlas"}
    assert state.max_running_jobs is None and state.free_job_slots == 53
    sub = state_of("group_atlas.prod", by="accounting_group")
    assert (sub.running_jobs, sub.waiting_jobs, sub.total_jobs) == (2, 2, 4)
    lhcb = state_of("group_lhcb", by="accounting_group")  # old-style AccountingGroup = "group_lhcb.lhcbpil" only
    assert (lhcb.running_jobs, lhcb.total_jobs) == (1, 1)


def test_group_helpers():
    assert group_of({"acctgroup": "group_a.b", "accountinggroup": "group_a.b.u"}) == "group_a.b"
    assert group_of({"accountinggroup": "group_a.u"}) == "group_a"
    assert group_of({"accountinggroup": "solo"}) == "solo"
    assert group_of({"owner": "x"}) is None
    assert in_group("group_a.b", "group_a") and in_group("group_a", "group_a")
    assert not in_group("group_ab", "group_a") and not in_group(None, "group_a")


def test_jobs_owner_account_proxy_vo_and_states():
    jobs = jobs_by_id(state_of("all", with_jobs=True))
    assert len(jobs) == 7 + 7 + 3 - 1  # every job but the DAGMan one (scheduler universe)
    j = jobs["sched1.example.org#101.0"]
    assert (j.local_owner, j.account, j.proxy_vo, j.vo) == ("atlpilot", "group_atlas.prod", "atlas", "atlas")
    assert j.global_owner == "/DC=ch/DC=cern/OU=Robots/CN=atlas pilot"
    assert (j.lrms_state, j.glue_status, j.sss_state) == ("Running", "RUNNING", "Running")
    assert j.nodes == ["wn01.example.org"] and j.requested_processors == 8 and j.requested_memory_mb == 16000
    assert j.start_time == NOW - 3600 and j.delivered_wall_s == 3600 and j.submit_time == NOW - 7200
    # lower-case x509userproxyvoname is the same attribute (ClassAd names are case-insensitive)
    assert jobs["sched1.example.org#102.0"].proxy_vo == "cms"
    # RequestMemory an expression: unknown, not guessed
    assert jobs["sched1.example.org#103.0"].requested_memory_mb is None
    held = jobs["sched1.example.org#101.2"]
    assert (held.glue_status, held.sss_state) == ("WAITING", "Hold") and "memory limit" in held.scheduler_specific
    expect = {"sched1.example.org#101.1": ("Idle", "SCHEDULED", "Idle"),
              "sched1.example.org#104.0": ("Completed", "DONE", "Completed"),
              "ce01.example.org#2004.0": ("Suspended", "WAITING", "Suspended"),
              "ce01.example.org#2005.0": ("Removed", "ABORTED", "Completed"),
              "ce01.example.org#2006.0": ("Transferring Output", "RUNNING", "Running")}
    for job_id, states in expect.items():
        job = jobs[job_id]
        assert (job.lrms_state, job.glue_status, job.sss_state) == states, job_id
    assert jobs["sched1.example.org#104.0"].end_time == NOW - 70000
    # 2004 was suspended when it started (JobCurrentStartDate = EnteredCurrentStatus = 1759995000):
    # it has run 0 s, not the 5000 s since (SSS Duration: seconds in the Running state)
    assert jobs["ce01.example.org#2004.0"].delivered_wall_s == 0
    assert jobs["ce01.example.org#2002.0"].account == "group_lhcb"
    assert jobs["sched3@sub.example.org#3001.0"].vo == "atlas"  # no proxy: the [vos] rule on its group
    assert jobs["sched3@sub.example.org#3002.0"].vo is None and jobs["sched1.example.org#103.0"].vo is None


def test_vo_counts():
    counts = state_of("all").vo_counts
    view = {vo: (c.running, c.waiting, c.total) for vo, c in counts.items()}
    # atlas: R 101.0 2001 2006, W 101.1 101.2 3001.0 3001.1; cms: R 102.0 2007, W 2004
    assert view == {"atlas": (3, 4, 7), "cms": (2, 1, 3), "dteam": (0, 1, 1), "lhcb": (1, 0, 1)}
    assert sum(c.total for c in counts.values()) + 2 == 14  # 103.0 (alice) and 3002.0 (carol) are local


def test_proxy_vo_off_uses_the_rules_only():
    counts = state_of("all", vo_map=VoMap.from_values(["account:group_atlas.*=atlas"], proxy_vo=False)).vo_counts
    assert list(counts) == ["atlas"] and counts["atlas"].total == 7


def test_user_rules_map_the_owners():
    counts = state_of("all", vo_map=VoMap.from_values(["user:bob=atlas", "user:al*=biomed"], proxy_vo=False)).vo_counts
    view = {vo: (c.running, c.waiting, c.total) for vo, c in counts.items()}
    # by hand: bob's 3001.0 and 3001.1 idle; alice's 103.0 running, 104.0 completed (not counted) and
    # 105.0 a scheduler-universe job (JobUniverse 7: runs on the schedd, not a job of the pool)
    assert view == {"atlas": (0, 2, 2), "biomed": (1, 0, 1)}


def test_waiting_times_per_vo_from_the_jobs_started_in_the_last_hour():
    """Issue 25 item 5: each VO's share from its own jobs' waits (the example's map and proxies:
    atlas 101.0 and 2001, cms 102.0 and 2007, lhcb 2002), a VO with none the queue's; one schedd
    (ce01: 2001, 2002, 2007) its own.  Waits as in test_all_schedds."""
    state = state_of("all")
    assert state.response_basis == "measured"
    assert state.vo_response_times == {"atlas": ((3600 + 1000) // 2, 3600), "cms": ((3200 + 1000) // 2, 3200),
                                       "lhcb": (2000, 2000)}
    assert state.response_times_of_vo("dteam") == (1850, 3600)  # its one job (2003) is idle: the queue's
    ce01 = state_of("ce01.example.org")
    assert (ce01.estimated_response_time_s, ce01.worst_response_time_s) == (round((1000 + 2000 + 1000) / 3), 2000)


TOKEN_MAP = ["issuer:https://atlas-auth.web.cern.ch=atlas", "token_group:/cms=cms", "token_group:/dteam=dteam",
             "token_group:/lhcb=lhcb"]


def test_tokens_map_jobs_to_vos_by_issuer_and_groups():
    """Issue 25 item 6: the VO from the token HTCondor-CE routed the job with (orig_AuthTokenIssuer,
    orig_AuthTokenGroups: ce01's 2001 ATLAS and 2007 CMS) or a job was submitted with (AuthToken*:
    sched3's 3002); README of the fixtures.  The issuer rule's trailing / is no matter.  lhcb has a
    rule and no token: 0 jobs, counted."""
    calls: list = []
    state = state_of("all", calls=calls, with_jobs=True, vo_map=VoMap.from_values(TOKEN_MAP, proxy_vo=False))
    assert state.error is None
    view = {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()}
    assert view == {"atlas": (1, 0, 1), "cms": (1, 0, 1), "dteam": (0, 1, 1), "lhcb": (0, 0, 0)}
    jobs = jobs_by_id(state)
    assert jobs["ce01.example.org#2001.0"].token_issuer == "https://atlas-auth.web.cern.ch/"
    assert jobs["ce01.example.org#2007.0"].token_groups == ("/cms", "/cms/pilot")
    assert jobs["sched3@sub.example.org#3002.0"].token_groups == ("/dteam",)
    assert jobs["sched1.example.org#101.0"].token_issuer is None and jobs["sched1.example.org#101.0"].vo is None
    asked = {tuple(c[c.index("-attributes") + 1].split(",")) for c in calls if c[0] == "condor_q"}
    assert asked == {(*JOB_ATTRS, *TOKEN_ATTRS)}


def test_the_proxy_vo_still_comes_first_and_no_token_is_asked_without_token_rules():
    calls: list = []
    state = state_of("all", calls=calls, with_jobs=True, vo_map=VoMap.from_values(["token_group:/cms/pilot=cmspilots"]))
    jobs = jobs_by_id(state)
    assert jobs["ce01.example.org#2007.0"].vo == "cms"  # its proxy's VO (x509userproxyvoname), before the token
    assert state.vo_counts["cmspilots"].total == 0
    calls.clear()
    plain = jobs_by_id(state_of("all", calls=calls, with_jobs=True))  # VOS: an account rule only
    assert {tuple(c[c.index("-attributes") + 1].split(",")) for c in calls if c[0] == "condor_q"} == {tuple(JOB_ATTRS)}
    assert plain["ce01.example.org#2007.0"].token_groups == () and plain["ce01.example.org#2001.0"].token_issuer is None


def test_job_states_table():
    assert [row[0] for row in htcondor.iter_states()] == [1, 2, 3, 4, 5, 6, 7]


# -- faults ----------------------------------------------------------------------------------

def test_collector_down():
    down = (1, "", read("collector_down.stderr"))
    state = state_of(overrides={"condor_status": down})
    assert state.lrms_version == "24.0.23"
    assert state.total_cpus is None and state.free_cpus is None and state.nodes == []
    assert state.running_jobs is None and state.total_jobs is None and state.status is None
    assert state.free_job_slots is None
    assert "condor_status" in state.error and "exited 1" in state.error
    assert "Error: communication error CEDAR:6001:Failed to connect to <192.168.10.5:9618>" in state.error


def test_one_schedd_down_all_queue_publishes_no_partial_total():
    down = (1, "", read("schedd_down.stderr"))
    state = state_of("all", overrides={"condor_q sched3@sub.example.org": down}, with_jobs=True)
    assert state.running_jobs is None and state.waiting_jobs is None and state.total_jobs is None
    assert state.vo_counts == {} and state.status is None and state.free_job_slots is None
    assert state.error.startswith("htcondor: job counts left out, they would omit the jobs of schedd "
                                  "sched3@sub.example.org (its collector ad: 0 running, 3 idle, 0 held); "
                                  "condor_q -name sched3@sub.example.org -allusers -json exited 1: "
                                  "-- Failed to fetch ads from: <192.168.10.13:9618> : sub.example.org CEDAR:6001")
    # what is known is still published: the pool and the jobs of the schedds that answered
    assert state.total_cpus == 157 and state.free_cpus == 53
    assert {j.queue for j in state.jobs} == {"sched1.example.org", "ce01.example.org"}


def test_one_schedd_down_does_not_touch_another_schedds_queue():
    down = (1, "", read("schedd_down.stderr"))
    state = state_of("sched1.example.org", overrides={"condor_q sched3@sub.example.org": down})
    assert state.error is None and (state.running_jobs, state.total_jobs) == (3, 5)


def test_one_schedd_down_accounting_group_queue_has_no_counts():
    down = (1, "", read("schedd_down.stderr"))
    state = state_of("group_cms", by="accounting_group", overrides={"condor_q sched3@sub.example.org": down})
    assert state.total_jobs is None and "sched3@sub.example.org" in state.error


def test_schedd_hanging_is_bounded_by_the_deadline():
    def hang(args):
        time.sleep(0.3)
        raise __import__("subprocess").TimeoutExpired("condor_q", 0.2)

    state = state_of("all", overrides={"condor_q ce01.example.org": hang})
    assert "condor_q timed out" in state.error and state.total_jobs is None


def test_empty_schedd_prints_only_its_summary_ad():
    state = state_of("all", overrides={f"condor_q {name}": (0, read("condor_q_empty.json"), "") for name in SCHEDDS})
    assert state.error is None and (state.running_jobs, state.waiting_jobs, state.total_jobs) == (0, 0, 0)
    assert state.estimated_response_time_s == 0 and state.worst_response_time_s == 0  # free CPUs, nothing waits


def test_no_slots_at_all():
    state = state_of(overrides={"condor_status slots": (0, "", "")})
    assert state.error is None and (state.total_cpus, state.free_cpus, state.nodes) == (0, 0, [])


@pytest.mark.parametrize("garbage", [
    "this is not json",
    read("condor_status_slots.json")[:200],  # cut off mid-ad
    '{"Name": "slot1@x"}',  # one object, not a list
    '[{"Name": "slot1@x", "Machine": "x", "Cpus": "many"}]',
    '[{"Machine": "x", "Cpus": 1}]',
    '[{"Name": "slot1@x", "Machine": "x", "SlotType": "Partitionable", "Cpus": 9, "TotalSlotCpus": 8}]',
])
def test_garbage_slot_output(garbage):
    state = state_of(overrides={"condor_status slots": (0, garbage, "")})
    assert state.total_cpus is None and state.free_cpus is None and state.nodes == []
    assert state.error.startswith("htcondor: condor_status")
    assert state.total_jobs == 14  # the schedds are still asked


@pytest.mark.parametrize("garbage", [
    "<html>502 Bad Gateway</html>",
    '[{"ClusterId": 1, "ProcId": 0}]',  # no JobStatus
    '[{"ClusterId": 1, "ProcId": 0, "JobStatus": "\\/Expr(2)\\/"}]',
])
def test_garbage_job_output_fails_that_schedd(garbage):
    state = state_of("all", overrides={"condor_q ce01.example.org": (0, garbage, "")}, with_jobs=True)
    assert state.total_jobs is None and "condor_q -name ce01.example.org" in state.error
    assert "ce01.example.org" not in {j.queue for j in state.jobs}


def test_garbage_version():
    state = state_of(overrides={"condor_version": (0, "hello\n", "")})
    assert state.lrms_version is None and "condor_version: unexpected output" in state.error
    assert state.total_jobs == 14


@pytest.mark.parametrize("tool", ["condor_status", "condor_q", "condor_version"])
def test_command_missing(tool):
    state = state_of(overrides={tool: FileNotFoundError(tool)})
    assert f"{tool}: command not found" in state.error
    assert state.lrms_type == "condor"  # the same word whether the query fails or not


def test_bin_dir_prefix_and_condor_config():
    import shlex

    seen = []

    def run(argv, timeout, env):
        # ssh cm LINE: the line the remote shell runs, "env NAME=value... PROGRAM ARGS"
        assert argv[:2] == ["ssh", "cm"] and len(argv) == 3
        words = shlex.split(argv[2])
        settings = dict(word.split("=", 1) for word in words[1:] if "=" in word and not word.startswith("/"))
        command = words[1 + len(settings):]
        seen.append((command, settings.get("CONDOR_CONFIG"), words[0], settings.get("TZ")))
        return replay()(command, timeout, env)

    ctx = LrmsContext(queue="sched1.example.org", ce_config={"condor_bin_dir": "/opt/condor/bin",
                                                              "condor_config": "/etc/condor/pool.conf",
                                                              "lrms_command_prefix": "ssh cm"},
                      hosts=[], clock=lambda: NOW, run=run)
    state = queue_state("htcondor", ctx)
    assert state.error is None and seen
    assert all(command[0].startswith("/opt/condor/bin/") for command, *_ in seen)
    # CONDOR_CONFIG and TZ cross ssh in the command line: ssh sends no environment
    assert {(config, env, tz) for _, config, env, tz in seen} == {("/etc/condor/pool.conf", "env", "UTC")}


def test_config_errors():
    assert "no queue named" in state_of(queue=None).error
    assert "condor_queue_by" in state_of(by="user").error


def test_parse_helpers():
    assert parse_ads("", "x") == [] and parse_ads("\n", "x") == []
    assert parse_ads(read("condor_q_empty.json"), "q") == []  # the summary ad is not a job
    assert literal("/Expr(MY.Cpus * 2)/") is None and literal("text") == "text" and literal(3) == 3
    assert parse_version("$CondorVersion: 23.0.28 2025-05-01 BuildID: 1 $\n") == "23.0.28"
    with pytest.raises(htcondor.HTCondorOutputError):
        parse_version("condor_version: command not found")
