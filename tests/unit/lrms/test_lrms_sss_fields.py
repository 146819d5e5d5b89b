"""What each LRMS plugin tells the SSS Job object beyond the counts: executable, exit status and how a job
ended, holds, dependencies, priority, submit host, CPU time and limits, processors per node, and the
private fields (arguments, working directory, environment).

Expected values are read off the fixture files by hand (tests/fixtures/<lrms>/...: the READMEs say which
jobs were made for this); the replays below answer each command from those files as the tools would.
"""

from __future__ import annotations

import calendar
import datetime
import os
from typing import Any

import pytest
from paths import FIXTURES
from recorded_commands import recorded_files
from slurm_records import jobs_by_id, slurm_state

from glueinfo.core.job import PRIVATE_FIELDS, environment_items
from glueinfo.lrms.plugins import htcondor, slurm
from glueinfo.lrms.registry import LrmsContext, queue_state

PRIVATE = {"private_fields": PRIVATE_FIELDS}  # what jobs-xml and serve pass when [jobs] names them all


def utc(text: str) -> float:
    return float(calendar.timegm(datetime.datetime.fromisoformat(text).timetuple()))


def by_id(state) -> dict[str, Any]:
    assert state.error is None, state.error
    return {job.local_id: job for job in state.jobs}


files = recorded_files


def state_of(lrms: str, queue: str, run, now: float, **config: Any):
    ctx = LrmsContext(queue=queue, ce_config=config, hosts=[], clock=lambda: now, timeout_s=10.0, with_jobs=True, run=run)
    return queue_state(lrms, ctx)


# -- Slurm ------------------------------------------------------------------------------------

def test_slurm_a_job_cancelled_while_it_waited_never_started():
    job = jobs_by_id(slurm_state("22.05", "short"))["10"]
    # squeue: CANCELLED, StartTime = EndTime = SubmitTime 14:32:51, no NodeList, TimeUsed 0:00
    assert (job.sss_state, job.completion) == ("Completed", "cancelled")
    assert job.start_time is None and job.end_time == utc("2026-11-22T14:32:51")
    assert job.nodes == [] and job.delivered_wall_s is None and job.delivered_processors is None
    assert job.exit_code is None and job.exit_signal is None and job.task_count is None  # NumTasks 4294967294: NO_VAL


def test_slurm_22_05_recorded_fields():
    jobs = jobs_by_id(slurm_state("22.05", "short", **PRIVATE))
    done = jobs["1"]
    assert (done.completion, done.exit_code, done.exit_signal) == ("success", 0, None)  # exit_code 0: wait status 0
    assert done.start_time == utc("2026-11-22T14:32:49")
    assert jobs["5"].holds == ("User",) and jobs["3"].holds == ()  # JobHeldUser
    for job in jobs.values():  # --wrap jobs: Command (null); all submitted by root from localhost in /work/main/tests
        assert job.executable is None and job.arguments is None
        assert (job.local_group, job.submit_host, job.working_directory) == ("root", "localhost", "/work/main/tests")
    assert jobs["3"].priority == 4294901757 and jobs["5"].priority == 0 and jobs["3"].task_count == 1


def test_slurm_20_11_how_finished_jobs_ended():
    jobs = jobs_by_id(slurm_state("20.11", "batch", slurm_json="no"))
    # exit_code is the raw wait status up to 22.05: 0, 15 (SIGTERM), 256 (exit 1)
    assert (jobs["107"].completion, jobs["107"].exit_code, jobs["107"].exit_signal) == ("success", 0, None)
    assert (jobs["108"].completion, jobs["108"].exit_code, jobs["108"].exit_signal) == ("failed", None, 15)
    assert (jobs["111"].completion, jobs["111"].exit_code, jobs["111"].exit_signal) == ("failed", 1, None)
    assert jobs["111"].scheduler_specific == "NonZeroExitCode" and jobs["108"].scheduler_specific is None  # Reason None


def test_slurm_20_11_job_details():
    jobs = jobs_by_id(slurm_state("20.11", "batch", slurm_json="no", **PRIVATE))
    sim = jobs["101"]
    assert (sim.executable, sim.arguments, sim.working_directory) == ("/home/alice/sim/run.sh", "-n 101", "/home/alice/sim")
    assert (sim.local_group, sim.priority, sim.qos, sim.submit_host, sim.task_count) == ("phys", 10234, "normal", "login1", 4)
    assert jobs["108"].arguments == "--steps 1000" and jobs["103"].arguments is None
    assert jobs["102"].features == "ib" and jobs["102"].task_count == 8 and jobs["103"].features == "bigmem"
    assert jobs["105"].dependencies == (("OnSuccess", "102"),)  # afterok:102(unfulfilled)
    assert jobs["106"].holds == ("System",) and jobs["106"].executable is None  # JobHeldAdmin; Command (null)


def test_slurm_23_02_qos_and_the_exit_code_format_of_23():
    jobs = jobs_by_id(slurm_state("23.02", "gpu"))
    assert {job.qos for job in jobs.values()} == {"gpuqos"}
    assert jobs["203"].features == "a100&ib" and jobs["201"].exit_code is None  # running: no exit status yet
    assert slurm.exit_status("3:0") == (3, None) and slurm.exit_status("0:9") == (None, 9)
    assert slurm.exit_status("768") == (3, None) and slurm.exit_status("9") == (None, 9)
    assert slurm.exit_status("") == (None, None) and slurm.exit_status("0") == (0, None)


def test_slurm_private_fields_only_when_asked():
    sim = jobs_by_id(slurm_state("20.11", "batch", slurm_json="no"))["101"]
    assert sim.executable == "/home/alice/sim/run.sh" and (sim.arguments, sim.working_directory) == (None, None)
    asked = jobs_by_id(slurm_state("20.11", "batch", slurm_json="no", private_fields=("arguments",)))["101"]
    assert (asked.arguments, asked.working_directory) == ("-n 101", None)


@pytest.mark.parametrize("text, expected", [
    ("afterok:2(unfulfilled)", (("OnSuccess", "2"),)),
    ("afterany:3_*(unfulfilled),afternotok:5:6+10(failed)", (("OnExit", "3_*"), ("OnFailure", "5"), ("OnFailure", "6"))),
    ("after:7(unfulfilled),afterok:8(unfulfilled)", (("OnSuccess", "8"),)),  # after (start) has no SSS condition
    ("afterok:1(unfulfilled)?afterok:2(unfulfilled)", ()),  # any one of them: not SSS's all-of
    ("singleton(unfulfilled)", ()),
    (None, ()),
])
def test_slurm_dependencies(text, expected):
    assert slurm.dependencies(text) == expected


# -- PBS ----------------------------------------------------------------------------------------

PBS = FIXTURES / "pbs"
PBS_NOW = 1732003200.0


def pbs_state(flavour: str, queue: str, **config: Any):
    directory = PBS / ("openpbs-23.06" if flavour == "openpbs" else "torque-6.1.3")
    if flavour == "openpbs":
        answers = {"qstat --version": "qstat_version.txt", f"qstat -Q -f -F json {queue}": f"qstat_Q_{queue}.json",
                   "pbsnodes": "pbsnodes.json", f"qstat -f -t -F json {queue}": f"qstat_jobs_{queue}.json"}
    else:
        answers = {"qstat --version": "qstat_version.txt", f"qstat -Q -f {queue}": f"qstat_Q_{queue}.txt",
                   "pbsnodes": "pbsnodes.xml", f"qstat -f -x -t {queue}": f"qstat_jobs_{queue}.xml"}
    return by_id(state_of("pbs", queue, files(directory, answers), PBS_NOW, pbs_flavour="auto", **config))


def test_openpbs_how_subjobs_ended():
    jobs = pbs_state("openpbs", "express")
    # substate 92, Exit_status 0 | 93, 3 | 91 without stime | 91, 271 = 256 + SIGTERM
    assert [(jobs[f"300[{i}].pbs-head"].completion, jobs[f"300[{i}].pbs-head"].exit_code,
             jobs[f"300[{i}].pbs-head"].exit_signal) for i in (1, 2, 3, 4)] == [
        ("success", 0, None), ("failed", 3, None), ("cancelled", None, None), ("cancelled", None, 15)]
    # GlueCEJobStatus: the deleted ones ABORTED (as Slurm's CANCELLED and HTCondor's Removed), the rest DONE
    assert [jobs[f"300[{i}].pbs-head"].glue_status for i in (1, 2, 3, 4)] == ["DONE", "DONE", "ABORTED", "ABORTED"]
    assert jobs["300[3].pbs-head"].start_time is None and jobs["300[4].pbs-head"].start_time == utc("2024-11-19T07:20:00")
    assert jobs["300[2].pbs-head"].scheduler_specific == "Job run at Tue Nov 19 at 07:10 on (node01:ncpus=1) and failed"
    assert jobs["300[1].pbs-head"].scheduler_specific is None


def test_openpbs_subjobs_that_ran_are_in_the_haizea_workload_with_their_elapsed_time():
    from glueinfo.haizea.workload import NEVER_RAN, lease_requests

    jobs = pbs_state("openpbs", "express")
    requests, left_out = lease_requests([(job, "ce") for job in jobs.values()])
    real = {r.job_id: r.realduration_s for r in requests}
    # stime -> obittime in the recording: 07:10-07:20, 07:10-07:12, 07:20-07:25; 300[3] never started
    assert (real["300[1].pbs-head"], real["300[2].pbs-head"], real["300[4].pbs-head"]) == (600, 120, 300)
    assert left_out == {NEVER_RAN: ["300[3].pbs-head"]}


def test_openpbs_job_details():
    jobs = pbs_state("openpbs", "express", **PRIVATE)
    stress = jobs["301.pbs-head"]
    assert (stress.executable, stress.arguments) == ("/usr/bin/stress", "--cpu 2 --timeout 1 h")  # JSDL elements
    assert (stress.working_directory, stress.priority, stress.submit_host) == ("/home/cms003", 100, "ce01.example.org")
    # resources_used.cput 00:39:40, Resource_List.cput 02:00:00, resources_used.mem 2097152kb
    assert (stress.cpu_duration_s, stress.cpu_time_limit_s, stress.delivered_memory_mb) == (2380, 7200, 2048)
    assert dict(environment_items(stress.environment))["CMS_TOKEN"] == "s3cr3t,with a comma"
    assert (stress.nodes, stress.node_processors) == (["node01"], (2,))
    waiting = jobs["302.pbs-head"]
    assert waiting.holds == ("System",)
    # afterok:301, afterany:300[] (before:303 has no SSS condition); @pbs-head cut
    assert waiting.dependencies == (("OnSuccess", "301.pbs-head"), ("OnExit", "300[].pbs-head"))
    assert (jobs["303.pbs-head"].holds, jobs["303.pbs-head"].priority) == (("User", "Operator"), -50)
    assert jobs["300[5].pbs-head"].holds == () and jobs["300[5].pbs-head"].cpu_duration_s == 598  # 00:09:58


@pytest.mark.parametrize("flavour, job_id", [("openpbs", "301.pbs-head"), ("torque", "400.torque-head")])
def test_pbs_private_fields_only_when_asked(flavour, job_id):
    job = pbs_state(flavour, "express")[job_id]
    assert (job.arguments, job.working_directory, job.environment) == (None, None, None)
    job = pbs_state(flavour, "express", private_fields=("working_directory",))[job_id]
    assert job.working_directory is not None and (job.arguments, job.environment) == (None, None)


def test_openpbs_cpus_on_each_exec_host():
    job = pbs_state("openpbs", "workq")["100.pbs-head"]  # exec_host node01/0*4+node02/0*2
    assert (job.nodes, job.node_processors) == (["node01", "node02"], (4, 2))


def test_torque_job_details():
    jobs = pbs_state("torque", "express", **PRIVATE)
    assert (jobs["400.torque-head"].completion, jobs["400.torque-head"].exit_code) == ("failed", 1)
    assert (jobs["401.torque-head"].completion, jobs["401.torque-head"].exit_signal) == ("failed", 15)  # 271
    assert jobs["401.torque-head"].cpu_time_limit_s == 3600 and jobs["401.torque-head"].cpu_duration_s == 3600
    assert jobs["400.torque-head"].working_directory == "/home/cms004/run"  # init_work_dir
    assert ("CMS_LIST", "a,b") in list(environment_items(jobs["400.torque-head"].environment))  # a\,b
    assert (jobs["402.torque-head"].holds, jobs["402.torque-head"].priority) == (("User", "Operator"), -100)
    assert jobs["403.torque-head"].dependencies == (("OnSuccess", "400.torque-head"), ("OnSuccess", "401.torque-head"))
    mpi = jobs["404.torque-head"]  # wn03/2-3+wn04/0-3
    assert (mpi.nodes, mpi.node_processors, mpi.cpu_duration_s) == (["wn03", "wn04"], (2, 4), 5 * 3600 + 58 * 60)


# -- Grid Engine -------------------------------------------------------------------------------

SGE = FIXTURES / "sge" / "8.1.9"


def sge_state(qstat: str, queue: str, now: float):
    answers = {"qstat -help": "qstat_help.txt", "qstat -xml": qstat, "qhost -xml": "qhost.xml",
               "qconf -sq": f"qconf_sq_{queue}.txt"}
    return by_id(state_of("sge", queue, files(SGE, answers), now))


def test_sge_cpu_usage_limits_and_hold_jid():
    jobs = sge_state("qstat_sss.xml", "short", float((SGE / "qstat_sss.now").read_text()))
    # burn: cpu_usage 2.00000 and hard_request h_cpu 1200; quiet: cpu_usage 0.00000
    assert (jobs["1"].cpu_duration_s, jobs["1"].cpu_time_limit_s) == (2, 1200)
    assert (jobs["2"].cpu_duration_s, jobs["2"].cpu_time_limit_s) == (0, None)
    assert jobs["1"].node_processors == (1,) and jobs["1"].nodes == ["vm"]
    assert jobs["3"].dependencies == (("OnExit", "1"),)  # -hold_jid 1
    assert jobs["4"].dependencies == (("OnExit", "1"), ("OnExit", "2"))  # -hold_jid burn,quiet, resolved
    assert jobs["3"].cpu_duration_s is None and jobs["3"].holds == ()  # waiting; hqw says held, not by whom


def test_sge_parallel_job_slots_per_host():
    answers = {"qstat -help": "qstat_help.txt", "qstat -xml": "qstat_states.xml", "qhost -xml": "qhost_states.xml",
               "qconf -sq": "qconf_sq_grid.txt"}
    jobs = by_id(state_of("sge", "grid", files(SGE, answers), 1795478400.0))
    # job 101 is listed under grid@node1 with 3 slots and grid@node2 with 1
    assert (jobs["101"].nodes, jobs["101"].node_processors) == (["node1.example.org", "node2.example.org"], (3, 1))


# -- HTCondor ----------------------------------------------------------------------------------

def test_htcondor_job_details():
    directory = FIXTURES / "htcondor" / "24.0"
    answers = {"condor_version": "condor_version.txt", "condor_status -schedd": "condor_status_schedd.json",
               "condor_status": "condor_status_slots.json",
               **{f"condor_q -name {n} ": f"condor_q_{n}.json"
                  for n in ("sched1.example.org", "ce01.example.org", "sched3@sub.example.org")}}
    jobs = by_id(state_of("htcondor", "all", files(directory, answers), float((directory / "now").read_text())))
    done = jobs["sched1.example.org#104.0"]  # Completed, ExitBySignal false, ExitCode 2
    assert (done.executable, done.completion, done.exit_code, done.exit_signal) == (
        "/home/alice/analysis/run.sh", "failed", 2, None)
    removed = jobs["ce01.example.org#2005.0"]
    assert (removed.completion, removed.scheduler_specific) == ("cancelled", "via condor_rm (by user atlpilot)")
    assert jobs["sched1.example.org#101.2"].holds == ("System",)  # HoldReasonCode 34
    running = jobs["sched1.example.org#101.0"]
    assert (running.executable, running.nodes, running.node_processors) == ("/usr/bin/pilot.sh", ["wn01.example.org"], (8,))


def test_htcondor_private_fields_only_when_asked():
    directory = FIXTURES / "htcondor" / "24.0"
    answers = {"condor_version": "condor_version.txt", "condor_status -schedd": "condor_status_schedd.json",
               "condor_status": "condor_status_slots.json", "condor_q -name sched1.example.org ": "condor_q_sched1.example.org.json"}
    now = float((directory / "now").read_text())
    plain = by_id(state_of("htcondor", "sched1.example.org", files(directory, answers), now))["sched1.example.org#104.0"]
    assert (plain.arguments, plain.working_directory, plain.environment) == (None, None, None)
    jobs = by_id(state_of("htcondor", "sched1.example.org", files(directory, answers), now, **PRIVATE))
    new_syntax, old_syntax = jobs["sched1.example.org#104.0"], jobs["sched1.example.org#103.0"]
    assert (new_syntax.arguments, new_syntax.working_directory) == ("-n 10 'two words'", "/home/alice")
    assert new_syntax.environment == {"HOME": "/home/alice", "DATA": "/data/my run", "QUOTE": "it's"}
    assert (old_syntax.arguments, old_syntax.environment) == ("-v old", {"HOME": "/home/alice", "MODE": "old"})


@pytest.mark.parametrize("extra, expected", [
    ({"JobStatus": 5, "HoldReasonCode": 1}, ("Hold", ("User",), None, None, None)),  # condor_hold
    ({"JobStatus": 4, "ExitBySignal": True, "ExitSignal": 9}, ("Completed", (), "failed", None, 9)),
    ({"JobStatus": 4, "ExitBySignal": False, "ExitCode": 0}, ("Completed", (), "success", 0, None)),
    ({"JobStatus": 4}, ("Completed", (), None, None, None)),  # nothing said: nothing invented
])
def test_htcondor_holds_and_endings(extra, expected):
    ad = {"clusterid": 1, "procid": 0, "jobuniverse": 5, "qdate": 1000, **{k.lower(): v for k, v in extra.items()}}
    job = htcondor.job_from_ad(ad, "s", {}, 2000.0)
    assert (job.sss_state, job.holds, job.completion, job.exit_code, job.exit_signal) == expected


# -- LSF ---------------------------------------------------------------------------------------

def test_lsf_command_line_and_endings():
    directory = FIXTURES / "lsf" / "10.1.0.13"
    answers = {"lsid": "lsid.txt", "bqueues -l express": "bqueues_l_express.txt", "bhosts": "bhosts_gridhosts.json",
               "bjobs -u all -q express": "bjobs_express.json"}
    jobs = by_id(state_of("lsf", "express", files(directory, answers), 1732003200.0, **PRIVATE))
    mpi = jobs["6001"]  # COMMAND "mpirun -np 8 /home/cms002/bin/reco --events 1000", EXEC_HOST 2*hosta:6*hostc
    assert (mpi.executable, mpi.arguments) == ("mpirun", "-np 8 /home/cms002/bin/reco --events 1000")
    assert (mpi.nodes, mpi.node_processors, mpi.working_directory) == (["hosta", "hostc"], (2, 6), "/home/cms002/reco")
    assert jobs["6004"].working_directory is None  # EXEC_CWD "-": it never ran
    assert (jobs["6002"].completion, jobs["6002"].exit_code) == ("success", 0)  # DONE
    assert (jobs["6003"].completion, jobs["6003"].exit_code) == ("failed", None)  # EXIT after it ran
    assert (jobs["6004"].completion, jobs["6004"].start_time) == ("cancelled", None)  # EXIT before it started


def test_lsf_asks_for_the_command_only_with_a_job_list_and_exec_cwd_only_when_asked():
    directory = FIXTURES / "lsf" / "10.1.0.13"
    asked = []

    def run(argv, timeout, env):
        if os.path.basename(argv[0]) == "bjobs":
            asked.append(argv[argv.index("-o") + 1].split())
        return files(directory, {"lsid": "lsid.txt", "bqueues": "bqueues_l_express.txt", "bhosts": "bhosts_gridhosts.json",
                                 "bjobs": "bjobs_express.json"})(argv, timeout, env)

    for with_jobs, config in ((False, PRIVATE), (True, {}), (True, PRIVATE)):
        state = queue_state("lsf", LrmsContext(queue="express", ce_config=config, hosts=[], clock=lambda: 1732003200.0,
                                               with_jobs=with_jobs, run=run))
        assert state.error is None
    # gpu_num too with a job list: LSF 10.1.0.13 is past GPU_SINCE (issue 27)
    assert [fields[17:] for fields in asked] == [[], ["command", "gpu_num"], ["command", "exec_cwd", "gpu_num"]]
    assert state.jobs[0].working_directory == "/home/cms002/reco"
