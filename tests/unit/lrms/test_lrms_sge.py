"""The sge plugin on outputs of Son of Grid Engine 8.1.9 (tests/fixtures/sge/8.1.9, see its README).

``qstat*.xml``/``qhost.xml``/``qconf_sq_{short,long,closed}.txt`` were recorded from a live cell
on this machine; ``qstat_states.xml``, ``qhost_states.xml`` and ``qconf_sq_grid.txt`` are written
by hand in the same format to reach states a one-host cell cannot show.  Expected numbers are
read off the files by hand; the arithmetic is written out where it is more than a count.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pytest
from paths import FIXTURES

from glueinfo.lrms.plugins.sge import _may_wait_elsewhere, map_job_state, parse_time_s
from glueinfo.lrms.registry import LrmsContext, queue_state
from glueinfo.lrms.vo_map import VoMap

DIR = FIXTURES / "sge" / "8.1.9"
RECORDED_NOW = float((DIR / "now").read_text())  # 2026-11-23T23:52:57Z
HANDMADE_NOW = 1795478400.0  # 2026-11-24T00:00:00Z
QMASTER_DOWN = (1, "", (DIR / "qmaster_down.stderr").read_text())


def answer(name: str) -> tuple[int, str, str]:
    return 0, (DIR / name).read_text(), ""


def recorded(argv: Sequence[str]) -> Optional[tuple[int, str, str]]:
    tool, args = argv[0].rsplit("/", 1)[-1], list(argv[1:])
    if tool == "qstat" and args == ["-help"]:
        return answer("qstat_help.txt")
    if tool == "qstat" and args == ["-xml", "-f", "-r", "-ext", "-pri", "-u", "*"]:
        return answer("qstat_full.xml")
    if tool == "qstat" and args == ["-xml", "-f", "-r", "-u", "*"]:
        return answer("qstat.xml")
    if tool == "qhost" and args == ["-xml", "-F", "slots"]:
        return answer("qhost.xml")
    if tool == "qconf" and args == ["-sql"]:
        return answer("qconf_sql.txt")
    if tool == "qconf" and args[:1] == ["-sq"] and (DIR / f"qconf_sq_{args[1]}.txt").exists():
        return answer(f"qconf_sq_{args[1]}.txt")
    if tool == "qconf" and args[:1] == ["-sq"]:
        return 1, "", f'No cluster queue or queue instance matches the phrase "{args[1]}"\n'
    return None


def handmade(argv: Sequence[str]) -> Optional[tuple[int, str, str]]:
    tool, args = argv[0].rsplit("/", 1)[-1], list(argv[1:])
    if tool == "qstat" and args[:3] == ["-xml", "-f", "-r"]:
        return answer("qstat_states.xml")
    if tool == "qhost":
        return answer("qhost_states.xml")
    if tool == "qconf" and args == ["-sql"]:
        return answer("qconf_sql_states.txt")
    return recorded(argv)


def runner(base: Any, overrides: Optional[Mapping[str, tuple[int, str, str]]] = None, calls: Optional[list[Any]] = None):
    """A command runner: ``overrides`` keyed by tool (``qstat -help`` is ``help``) beat ``base``."""

    def run(argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> tuple[int, str, str]:
        if calls is not None:
            calls.append((list(argv), dict(env)))
        tool = argv[0].rsplit("/", 1)[-1]
        key = "help" if list(argv[1:]) == ["-help"] else tool
        if overrides and key in overrides:
            return overrides[key]
        result = base(argv)
        if result is None:
            raise AssertionError(f"unexpected command {argv}")
        return result

    return run


def state_of(queue: str, base: Any = recorded, now: float = RECORDED_NOW, with_jobs: bool = True,
             overrides: Optional[Mapping[str, tuple[int, str, str]]] = None, vo_map: VoMap = VoMap(),
             calls: Optional[list[Any]] = None, **config: Any):
    ctx = LrmsContext(queue=queue, ce_config={"sge_root": "/opt/sge", "sge_cell": "site", **config}, hosts=[],
                      clock=lambda: now, with_jobs=with_jobs, run=runner(base, overrides, calls), vo_map=vo_map)
    return queue_state("sge", ctx)


# -- recorded from the live cell -------------------------------------------------------

def test_recorded_short_queue():
    state = state_of("short")
    assert state.error is None
    assert (state.lrms_type, state.lrms_version, state.queue, state.status) == ("sge", "8.1.9", "short", "Production")
    # short@vm: 2 slots, both used (run0 suspended, run1 running); vm has 2 processors
    assert (state.total_cpus, state.free_cpus, state.free_job_slots) == (2, 0, 0)
    # running: 2 (run1); waiting: 1 (run0, suspended) 3 4 6 5 (held) 14, and 11 (short,long) 12 (no -q)
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (1, 8, 9)
    assert state.max_wall_clock_time_min == 30  # h_rt 0:30:0
    assert state.max_cpu_time_min == 60  # s_cpu 3600 seconds
    assert state.hosts == ["vm"]
    # run1 started 23:49:03, now 23:52:57: 1800 - 234 = 1566 s to its limit; waiting: wait0 (h_rt 600)
    # and five jobs at the queue's 1800 s, over 2 slots: (600 + 5 * 1800) / 2 = 4800
    assert state.estimated_response_time_s == state.worst_response_time_s == 1566 + 4800


def test_recorded_long_queue_limits_units_and_array_tasks():
    state = state_of("long")
    assert state.error is None
    # s_rt 172000 s is tighter than h_rt 48:00:00 (172800 s): 172000 // 60 = 2866 minutes, not seconds or hours
    assert state.max_wall_clock_time_min == 2866
    assert state.max_wall_clock_time_s == 172000  # GLUE 2's seconds, exact (not 2866 x 60 = 171960)
    assert state.max_cpu_time_min == 90  # h_cpu 1:30:00
    jobs = {job.local_id: job for job in state.jobs}
    assert set(jobs) == {"10.1", "10.2", "10.3", "10.4", "11", "12", "15"}
    assert (jobs["10.1"].glue_status, jobs["10.1"].nodes, jobs["10.1"].account) == ("RUNNING", ["vm"], "atlas")
    assert jobs["10.3"].sss_state == "Idle" and jobs["10.3"].start_time is None
    assert (state.running_jobs, state.waiting_jobs) == (1, 6)


def test_recorded_disabled_queue_is_queueing_and_its_node_offline():
    state = state_of("closed")
    assert state.error is None
    assert state.status == "Queueing"  # qsub still accepts jobs into a disabled queue: GLUE's Queueing, not Closed
    assert (state.free_job_slots, state.free_cpus, state.total_cpus) == (0, 0, 1)
    assert state.estimated_response_time_s is None and state.worst_response_time_s is None
    (node,) = state.nodes
    assert (node.name, node.state, node.lrms_state, node.reason) == ("vm", "Offline", "d", "disabled")
    assert state.max_wall_clock_time_min is None and state.max_cpu_time_min is None  # INFINITY
    assert {j.local_id for j in state.jobs} == {"9", "12"}  # -q closed, and the job with no -q


def test_recorded_jobs_fields_and_the_sge_escaping_of_less_than():
    jobs = {job.local_id: job for job in state_of("short").jobs}
    assert jobs["6"].name == 'evil<&>"x'  # SGE 8.1.9 writes '<' as "%lt;" in XML text
    assert (jobs["14"].local_owner, jobs["1"].local_owner) == ("nobody", "root")
    assert (jobs["1"].lrms_state, jobs["1"].glue_status, jobs["1"].sss_state) == ("s", "WAITING", "Suspended")
    assert (jobs["5"].lrms_state, jobs["5"].glue_status, jobs["5"].sss_state) == ("hqw", "WAITING", "Hold")
    assert (jobs["2"].glue_status, jobs["2"].nodes, jobs["2"].start_time) == ("RUNNING", ["vm"], 1795477743.0)
    assert jobs["3"].requested_duration_s == 600 and jobs["3"].submit_time == 1795477744.0
    assert jobs["2"].local_group is None  # qstat -xml does not say; qstat -j per job is not run


def test_cheap_path_without_jobs_runs_qstat_without_ext_and_still_counts_vos():
    calls: list[Any] = []
    vo_map = VoMap.from_values(["user:nobody=dteam"])
    state = state_of("short", with_jobs=False, vo_map=vo_map, calls=calls)
    assert state.jobs == []
    assert ["qstat", "-xml", "-f", "-r", "-u", "*"] in [argv for argv, _env in calls]
    assert state.vo_counts["dteam"].waiting == 1 and state.vo_counts["dteam"].total == 1
    assert all(env["SGE_ROOT"] == "/opt/sge" and env["SGE_CELL"] == "site" and env["TZ"] == "UTC" for _a, env in calls)


def test_account_rules_need_projects_so_ext_is_asked_for():
    calls: list[Any] = []
    state = state_of("long", with_jobs=False, vo_map=VoMap.from_values(["account:atlas=atlas"]), calls=calls)
    assert ["qstat", "-xml", "-f", "-r", "-ext", "-pri", "-u", "*"] in [argv for argv, _env in calls]
    assert (state.vo_counts["atlas"].running, state.vo_counts["atlas"].waiting) == (1, 3)  # array 10: task 1 runs


def test_bin_dir_and_the_callers_sge_output_variables(monkeypatch):
    monkeypatch.setenv("SGE_LONG_QNAMES", "80")
    monkeypatch.setenv("SGE_QMASTER_PORT", "6444")
    calls: list[Any] = []
    state_of("short", calls=calls, sge_bin_dir="/opt/sge/bin/lx-amd64")
    assert {argv[0].rsplit("/", 1)[0] for argv, _env in calls} == {"/opt/sge/bin/lx-amd64"}
    assert all("SGE_LONG_QNAMES" not in env and env["SGE_QMASTER_PORT"] == "6444" for _a, env in calls)


# -- hand-made: states a one-host cell cannot show --------------------------------------

def test_handmade_grid_counts_cpus_and_slots():
    state = state_of("grid", base=handmade, now=HANDMADE_NOW)
    assert state.error is None
    assert state.status == "Production"
    # min(slots, num_proc): node1 4, node2 8, node3 8, node4 8 (qhost '-': slots), node5 8, node6 8
    assert state.total_cpus == 44
    # usable: node1 (0 free) and node2 (8 - 3 used - 1 reserved = 4 free slots); node2's 8 processors
    # are all held (4 by grid, 4 by queue "other"), so no free CPU there
    assert (state.free_job_slots, state.free_cpus) == (4, 0)
    # running: 101 (one job on node1+node2), 102.1, 104 (dr), 105; waiting: 103 (s), 110, 111, 112 (hqw),
    # 113 (Eqw), 102.2 102.7 102.9 (tasks 2-7:5,9), 114 (g*@node1), 115 (no -q), 117, 118 (Rq); not 201, 116
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (4, 12, 16)
    # limits: default min(h_rt 3600, s_rt 3000); node2 min(14400, 3000); node3 min(7200, INFINITY): max 7200 s
    assert state.max_wall_clock_time_min == 120
    assert state.max_cpu_time_min is None  # unlimited by default, 10 h only on node5
    # a free slot, jobs waiting: 0 + (3600 + 2*3600 + 3*3000 + 3000 + 3000 + 600 + 600) / 12 usable slots
    assert state.estimated_response_time_s == state.worst_response_time_s == 27000 // 12


def test_handmade_grid_says_its_waiting_jobs_may_wait_in_other_queues_too():
    # 115 requested no queue and 114 a pattern (g*@node1): each waits in every queue it matches,
    # so a sum over the cell's queues counts them more than once (GLUE 2's service totals)
    assert state_of("grid", base=handmade, now=HANDMADE_NOW).waiting_shared is True


@pytest.mark.parametrize("requests, elsewhere", [([], True), (["short"], False), (["short@node1"], False),
                                                 (["short", "long"], True), (["sh*"], True), (["s?ort@node1"], True)])
def test_which_requests_let_a_pending_job_wait_in_another_queue(requests, elsewhere):
    assert _may_wait_elsewhere(requests) is elsewhere


def test_handmade_nodes_map_queue_instance_states():
    nodes = {n.name: n for n in state_of("grid", base=handmade, now=HANDMADE_NOW).nodes}
    expect = {  # name: (SSS state, LRMS state, allocated, total, free for a new job, reason)
        "node1.example.org": ("Busy", None, 4, 4, 0, None),
        # 4 free slots, but its 8 processors are all held (4 by grid, 4 by queue "other"): no CPU
        # for a new job, as FreeCPUs counts (0 above), so Busy and nothing Available in Node XML
        "node2.example.org": ("Busy", None, 4, 8, 0, None),
        "node3.example.org": ("Busy", "a", 0, 8, 0, None),
        "node4.example.org": ("Unknown", "u", 1, 8, 0, "unknown (execd not reporting)"),
        "node5.example.org": ("Offline", "d", 0, 8, 0, "disabled"),
        "node6.example.org": ("Offline", "E", 0, 8, 0, "error"),
    }
    assert {name: (n.state, n.lrms_state, n.allocated_cpus, n.total_cpus, n.free_cpus, n.reason)
            for name, n in nodes.items()} == expect


def test_handmade_jobs_states_parallel_hostile_and_vos():
    vo_map = VoMap.from_values(["user:atlas*=atlas", "user:cms*=cms", "user:lhcb*=lhcb"])
    state = state_of("grid", base=handmade, now=HANDMADE_NOW, vo_map=vo_map)
    jobs = {job.local_id: job for job in state.jobs}
    assert (jobs["101"].requested_processors, jobs["101"].nodes) == (4, ["node1.example.org", "node2.example.org"])
    expect = {"104": ("dr", "RUNNING", "Running"), "113": ("Eqw", "WAITING", "Hold"), "118": ("Rq", "SCHEDULED", "Idle"),
              "103": ("s", "WAITING", "Suspended"), "102.9": ("qw", "SCHEDULED", "Idle")}
    for job_id, row in expect.items():
        assert (jobs[job_id].lrms_state, jobs[job_id].glue_status, jobs[job_id].sss_state) == row, job_id
    hostile = jobs["117"]
    assert hostile.name == "x&y</JB_name><JB_job_number>999" and hostile.local_owner == 'root&"evil"'
    assert "999" not in jobs and "201" not in jobs and "116" not in jobs
    counts = {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()}
    # atlas: 101 104 running, 110 111 waiting; cms: 102.1 running, 103 112 113 102.2 102.7 102.9; lhcb: 114 115
    assert counts == {"atlas": (2, 2, 4), "cms": (1, 6, 7), "lhcb": (0, 2, 2)}


def test_queue_with_every_instance_in_error_is_queueing():
    text = (DIR / "qstat_states.xml").read_text()
    one = text.replace("<name>grid@node1.example.org</name>", "<name>grid@node1.example.org</name>\n      <state>E</state>"
                       ).replace("<name>grid@node2.example.org</name>", "<name>grid@node2.example.org</name>\n      <state>s</state>")
    state = state_of("grid", base=handmade, now=HANDMADE_NOW, overrides={"qstat": (0, one, "")})
    assert state.status == "Queueing"
    assert (state.free_job_slots, state.free_cpus) == (0, 0)
    assert state.estimated_response_time_s is None


# -- faults -------------------------------------------------------------------------------

def test_qmaster_down_is_one_line_and_leaves_everything_unknown(caplog):
    with caplog.at_level(logging.WARNING, logger="glueinfo.lrms"):
        state = state_of("short", overrides={"qstat": QMASTER_DOWN, "qhost": QMASTER_DOWN, "qconf": QMASTER_DOWN})
    assert state.error.startswith("sge: qmaster unreachable: qstat")
    assert "Connection refused" in state.error and "\n" not in state.error
    for name in ("status", "total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
                 "estimated_response_time_s", "max_wall_clock_time_min"):
        assert getattr(state, name) is None, name
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


@pytest.mark.parametrize("garbage, says", [
    ((DIR / "qstat_truncated.xml").read_text(), "not well-formed"),
    ("error: no such file or directory\n", "not well-formed"),
    ((DIR / "qstat_dtd.xml").read_text(), "DTDs"),
    ("<?xml version='1.0'?><qhost/>", "not <job_info>"),
    ((DIR / "qstat.xml").read_text().replace("<slots_total>2</slots_total>", "<slots_total>two</slots_total>"),
     "queue instance 'short@vm': slots_total is 'two'"),
    ((DIR / "qstat.xml").read_text().replace("<state>hqw</state>", "<state>held!</state>"),
     "pending job record 10: unknown job state 'held!'"),
])
def test_garbage_from_qstat_leaves_the_counts_unknown_and_says_why(garbage, says):
    state = state_of("short", overrides={"qstat": (0, garbage, "")})
    assert state.error is not None and says in state.error and "\n" not in state.error
    assert state.running_jobs is None and state.total_cpus is None and state.status is None
    assert state.max_wall_clock_time_min == 30 and state.lrms_version == "8.1.9"  # the other steps still fill theirs


def test_partial_failures_keep_what_was_read():
    state = state_of("short", overrides={"qhost": (0, "<qhost><host>", ""), "help": (0, "Grid Thing v9\n", ""),
                                         "qconf": (1, "", 'No cluster queue or queue instance matches the phrase "short"\n')})
    assert state.running_jobs == 1 and state.total_cpus == 2 and state.status == "Production"
    assert state.free_cpus is None and state.lrms_version is None and state.max_wall_clock_time_min is None
    assert "qhost -xml: not well-formed" in state.error and "qstat -help: unexpected first line" in state.error
    assert "qconf -sq short exited 1: No cluster queue" in state.error


COUNTS = ("total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
          "estimated_response_time_s", "worst_response_time_s")


def test_a_cluster_queue_grid_engine_does_not_have_publishes_no_count(caplog):
    """Issue 25/26: qconf -sq shrt finds nothing and qstat lists no shrt instance.  Before, the
    queue was Closed with TotalCPUs 0 and job 12, which requested no queue (it waits in every
    queue), as its one waiting job.  Now: no count, one ERROR naming qconf -sql's queues."""
    calls: list[Any] = []
    state = state_of("shrt", calls=calls)
    for name in COUNTS:
        assert getattr(state, name) is None, name
    assert state.hosts == [] and state.nodes == [] and state.jobs == [] and state.vo_counts == {}
    assert state.status == "Closed" and state.queue_missing and state.existing_queues == ("closed", "long", "short")
    assert state.error == ("queue 'shrt': sge has no such cluster queue; did you mean 'short'? "
                           "(its cluster queues: closed, long, short)")
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert any(argv[1:] == ["-sql"] for argv, _env in calls)


HOSTSLOTS = FIXTURES / "sge" / "8.1.9-hostslots"


@pytest.mark.parametrize("qhost", ["qhost_F_slots_host.xml", "qhost_F_slots_global.xml"])
def test_the_slots_a_host_or_the_cell_has_left_cap_the_free_slots(qhost):
    """EGI's lcg-info on a live cell whose host's slots were capped (complex_values slots=2, shared by short
    and long): short published FreeJobSlots 1 (qstat -g c's AVAIL, the instance's slots) while qhost -F slots
    said hc:slots=0 and SGE kept short's next job waiting for them.  Now what the host (hc:) or the cell
    (gc:, the pseudo host global) has left of its slots caps the free slots; the same qstat with a qhost
    that states no such cap still gives the instance's free slot."""
    def base(argv):
        tool, args = argv[0].rsplit("/", 1)[-1], list(argv[1:])
        if tool == "qstat" and args[:3] == ["-xml", "-f", "-r"]:
            return 0, (HOSTSLOTS / "qstat.xml").read_text(), ""
        if tool == "qhost":
            assert args == ["-xml", "-F", "slots"]
            return 0, (HOSTSLOTS / qhost).read_text(), ""
        if tool == "qconf" and args == ["-sq", "short"]:
            return 0, (HOSTSLOTS / "qconf_sq_short.txt").read_text(), ""
        return recorded(argv)

    now = float((HOSTSLOTS / "now").read_text())
    avail = int(next(line.split()[4] for line in (HOSTSLOTS / "qstat_g_c.txt").read_text().splitlines()
                     if line.startswith("short ")))
    left = float(re.search(r"dominance='[hg]c'>([\d.]+)<", (HOSTSLOTS / qhost).read_text()).group(1))
    assert (avail, left) == (1, 0.0)
    for with_jobs in (True, False):
        state = state_of("short", base=base, now=now, with_jobs=with_jobs)
        assert state.error is None and state.status == "Production"
        assert (state.running_jobs, state.waiting_jobs) == (1, 3)  # 2; 3, 4 (held), 5 (no -q)
        assert state.free_job_slots == state.free_cpus == min(avail, int(left)) == 0
        (node,) = state.nodes
        assert (node.state, node.free_cpus, node.allocated_cpus, node.total_cpus) == ("Busy", 0, 1, 2)
        # nothing free: the waiting jobs' times are spread, not 0
        assert state.estimated_response_time_s and state.estimated_response_time_s > 0
    uncapped = state_of("short", base=base, now=now, overrides={"qhost": answer("qhost.xml")})
    assert (uncapped.free_job_slots, uncapped.free_cpus) == (avail, 0)  # 1 slot; vm's 2 processors both held


def test_a_cluster_queue_without_jobs_has_0_jobs():
    """The other side: qstat lists the queue's instance, so no job is 0 jobs."""
    qstat = """<?xml version='1.0'?>
<job_info xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
    <Queue-List>
      <name>spare@vm</name><qtype>BI</qtype><slots_used>0</slots_used><slots_resv>0</slots_resv>
      <slots_total>2</slots_total><arch>lx-amd64</arch>
    </Queue-List>
  </queue_info>
  <job_info>
  </job_info>
</job_info>
"""
    state = state_of("spare", overrides={"qstat": (0, qstat, ""),
                                         "qconf": (1, "", 'No cluster queue or queue instance matches the phrase "x"\n')})
    assert not state.queue_missing and state.status == "Production"
    assert (state.running_jobs, state.waiting_jobs, state.total_jobs) == (0, 0, 0)
    assert (state.total_cpus, state.free_cpus) == (2, 2)  # vm's 2 processors (qhost.xml), nothing held


def test_tools_that_print_nothing_publish_no_count():
    """Issue 26, finding 4: qstat, qhost and qconf exit 0 printing nothing."""
    empty = (0, "", "")
    state = state_of("short", overrides={key: empty for key in ("help", "qstat", "qhost", "qconf")})
    for name in COUNTS:
        assert getattr(state, name) is None, name
    assert state.status is None and not state.queue_missing
    assert "no answer names cluster queue 'short'" in state.error


def test_missing_command_and_no_queue():
    def missing(argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> tuple[int, str, str]:
        raise FileNotFoundError(argv[0])

    ctx = LrmsContext(queue="short", ce_config={"sge_bin_dir": "/nowhere"}, hosts=[], run=missing)
    state = queue_state("sge", ctx)
    assert "/nowhere/qstat: command not found" in state.error and state.total_jobs is None
    assert queue_state("sge", LrmsContext(queue=None, ce_config={}, hosts=[], run=missing)).error == \
        "sge: no cluster queue named for this CE (set its queue)"


def test_slow_qstat_leaves_the_job_figures_unknown_and_keeps_the_rest(caplog):
    import logging
    import subprocess

    def slow_job_list(argv: Sequence[str], timeout: float, env: Mapping[str, str]) -> tuple[int, str, str]:
        if argv[0].endswith("qstat") and "-xml" in argv:
            raise subprocess.TimeoutExpired(list(argv), timeout)
        return runner(recorded)(argv, timeout, env)

    ctx = LrmsContext(queue="short", ce_config={"sge_root": "/opt/sge", "sge_cell": "site"}, hosts=[],
                      clock=lambda: RECORDED_NOW, run=slow_job_list)
    with caplog.at_level(logging.WARNING, logger="glueinfo.lrms"):
        state = queue_state("sge", ctx)
    assert "qstat timed out" in state.error and "\n" not in state.error
    assert (state.total_jobs, state.running_jobs, state.free_cpus) == (None, None, None)
    assert state.lrms_version is not None and state.max_wall_clock_time_min is not None  # qstat -help, qconf -sq
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_bad_limit_is_named():
    bad = (DIR / "qconf_sq_short.txt").read_text().replace("0:30:0", "30 minutes").replace("00:30:00", "30 minutes")
    state = state_of("short", overrides={"qconf": (0, bad, "")})
    assert "qconf -sq short: not a Grid Engine time: '30 minutes'" in state.error
    assert state.max_wall_clock_time_min is None and state.running_jobs == 1


# -- units and mappings ------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [("INFINITY", None), ("172000", 172000), ("48:00:00", 172800),
                                           ("1:30:00", 5400), ("0:30:0", 1800), ("::30", 30), ("2:05", 125)])
def test_time_values(text, seconds):
    assert parse_time_s(text) == seconds


@pytest.mark.parametrize("text", ["", "1:2:3:4", "1h", "-5", "1.5"])
def test_bad_time_values(text):
    with pytest.raises(ValueError):
        parse_time_s(text)


@pytest.mark.parametrize("letters, glue, sss", [
    ("qw", "SCHEDULED", "Idle"), ("hqw", "WAITING", "Hold"), ("Eqw", "WAITING", "Hold"), ("t", "READY", "Running"),
    ("r", "RUNNING", "Running"), ("Rr", "RUNNING", "Running"), ("hr", "RUNNING", "Running"),
    ("s", "WAITING", "Suspended"), ("S", "WAITING", "Suspended"), ("T", "WAITING", "Suspended"),
    ("dr", "RUNNING", "Running"), ("dqw", "ABORTED", "Completed"), ("z", "DONE", "Completed"),
])
def test_job_state_letters(letters, glue, sss):
    assert map_job_state(letters)[:2] == (glue, sss)


# -- the one-pass reader: what it reads and what it leaves -------------------------------------

def test_elements_out_of_place_are_ignored_as_before():
    # qstat -xml's layout is job_info/queue_info/Queue-List/job_list and job_info/job_info/job_list,
    # a job's fields its direct children; the reader takes nothing from anywhere else.
    text = (DIR / "qstat_states.xml").read_text()
    text = text.replace("<JB_name>mpi</JB_name>", "<JB_name>mpi</JB_name><x><state>z</state><slots>9</slots></x>"
                        "<job_list><JB_job_number>900</JB_job_number><state>r</state></job_list>", 1)
    text = text.replace("<queue_info>", "<queue_info><x><job_list><JB_job_number>901</JB_job_number>"
                        "<state>r</state></job_list></x>", 1)
    text = text.replace("</job_info>\n</job_info>", "<Queue-List><name>grid@node9</name></Queue-List></job_info>"
                        "<x><job_info><job_list><JB_job_number>902</JB_job_number><state>qw</state></job_list>"
                        "</job_info></x>\n</job_info>")
    assert "<JB_job_number>902" in text
    plain = state_of("grid", base=handmade, now=HANDMADE_NOW)
    odd = state_of("grid", base=handmade, now=HANDMADE_NOW, overrides={"qstat": (0, text, "")})
    assert odd.error is None and repr(odd) == repr(plain)


def test_counts_only_vo_counts_equal_those_of_the_job_list():
    vo_map = VoMap.from_values(["user:atlas*=atlas", "user:cms*=cms", "user:root=dteam"])
    for queue, base, now in (("grid", handmade, HANDMADE_NOW), ("short", recorded, RECORDED_NOW), ("long", recorded, RECORDED_NOW)):
        cheap = state_of(queue, base=base, now=now, with_jobs=False, vo_map=vo_map)
        full = state_of(queue, base=base, now=now, with_jobs=True, vo_map=vo_map)
        assert cheap.vo_counts and cheap.vo_counts == full.vo_counts, queue


def test_the_collector_is_left_as_it_was_found():
    import gc

    assert gc.isenabled()
    state_of("short", overrides={"qstat": (0, (DIR / "qstat_truncated.xml").read_text(), "")})
    state_of("short")
    assert gc.isenabled()
    gc.disable()
    try:
        state_of("short")
        assert not gc.isenabled()
    finally:
        gc.enable()
