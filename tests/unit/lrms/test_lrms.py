"""LRMS plugin registry, queue_state's never-raise contract, and the fork plugin."""

from __future__ import annotations

import logging
import os
import subprocess
import textwrap
import time

import pytest
from paths import REPO

from glueinfo.core.model import CpuInfo, HostSnapshot, LoadInfo, QueueState
from glueinfo.lrms.registry import (
    LrmsContext,
    LrmsPlugin,
    LrmsQueryError,
    all_plugins,
    context_for_ce,
    find_plugin,
    queue_state,
)

UNKNOWN_FIELDS = ("status", "total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
                  "estimated_response_time_s", "worst_response_time_s", "max_wall_clock_time_min")


def host(name: str, cpus, load1) -> HostSnapshot:
    return HostSnapshot(hostname=name, cpu=CpuInfo(logical_cpus=cpus) if cpus is not None else None,
                        load=LoadInfo(load1=load1, load5=load1, load15=load1) if load1 is not None else None)


def ctx(**kw) -> LrmsContext:
    base = {"queue": None, "ce_config": {}, "hosts": [], "clock": lambda: 1000.0, "timeout_s": 2.0}
    base.update(kw)
    return LrmsContext(**base)


def assert_all_unknown(state: QueueState) -> None:
    for name in UNKNOWN_FIELDS:
        assert getattr(state, name) is None, name


# -- registry --------------------------------------------------------------------------

def test_builtin_plugins_are_every_module_of_the_plugins_package():
    builtin = {p.name for p in all_plugins() if p.source == "builtin"}
    modules = {path.stem for path in (REPO / "glueinfo" / "lrms" / "plugins").glob("*.py") if not path.stem.startswith("_")}
    assert builtin == modules and {"fork", "slurm"} <= builtin


def test_unknown_lrms_is_an_error_state_naming_the_known_ones(caplog):
    with caplog.at_level(logging.WARNING, logger="glueinfo.lrms"):
        state = queue_state("moab", ctx(queue="q"))
    assert state.lrms_type == "moab" and state.queue == "q"
    assert "unknown LRMS 'moab'" in state.error and "fork" in state.error and "slurm" in state.error
    assert_all_unknown(state)
    assert len(caplog.records) == 1


def test_a_queue_missing_is_one_error_naming_the_section_and_its_plugin_cannot_leave_a_count(caplog):
    """Issue 25: whatever figures a plugin left in a state saying the queue does not exist, none is
    kept; the ERROR names the [ce:NAME] the site model put in the options, and is the only record."""
    def sloppy(context: LrmsContext) -> QueueState:
        return QueueState(queue=context.queue, total_cpus=0, free_cpus=0, running_jobs=0, total_jobs=0,
                          free_job_slots=0, max_wall_clock_time_min=60, status="Production", error="tool said so",
                          queue_missing=True, existing_queues=("long", "short", "debug"))

    plugin = LrmsPlugin(name="mybatch", query=sloppy)
    state = queue_state("mybatch", ctx(queue="lng", ce_config={"ce_section": "grid"}), plugins=[plugin])
    assert_all_unknown_but_status(state)
    assert state.status == "Closed" and state.existing_queues == ("debug", "long", "short")
    assert state.error == "[ce:grid] queue 'lng': mybatch has no such queue; did you mean 'long'? (its queues: debug, long, short)"
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("ERROR", state.error)]


def assert_all_unknown_but_status(state: QueueState) -> None:
    for name in UNKNOWN_FIELDS:
        if name != "status":
            assert getattr(state, name) is None, name


def test_torque_is_the_pbs_plugins_torque_dialect():
    """`lrms = torque` asks the pbs plugin with pbs_flavour = torque; a section that sets another
    flavour contradicts it; a name no plugin has is refused naming them (a config error, exit 2)."""
    from glueinfo.core.errors import ConfigurationError
    from glueinfo.lrms.registry import resolve_lrms

    assert resolve_lrms("torque", {"queue": "batch", "pbs_flavour": "auto"}) == \
        ("pbs", {"queue": "batch", "pbs_flavour": "torque"})
    assert resolve_lrms("slurm", {"queue": "short"}) == ("slurm", {"queue": "short"})
    with pytest.raises(ConfigurationError, match="'torque' is the pbs plugin with pbs_flavour = torque, "
                                                 "but pbs_flavour = openpbs is set"):
        resolve_lrms("torque", {"pbs_flavour": "openpbs"})
    with pytest.raises(ConfigurationError) as refused:
        resolve_lrms("moab", {})
    assert str(refused.value) == ("unknown LRMS 'moab' (known: fork, htcondor, lsf, pbs, sge, slurm; "
                                  "also torque (= pbs))")
    seen = []

    def torque(argv, timeout, env):
        seen.append([os.path.basename(argv[0]), *argv[1:]])
        return 1, "", "qstat: cannot connect to server torque-head (errno=111) Connection refused\n"

    state = queue_state("torque", ctx(queue="batch", run=torque))
    assert seen == [["qstat", "--version"], ["qstat", "-Q", "-f", "batch"], ["pbsnodes", "-x"],  # Torque's forms
                    ["qstat", "-f", "-x", "-t", "batch"], ["qstat", "-Q", "-f"]]
    assert state.lrms_type == "torque" and state.total_jobs is None


def test_entry_point_plugin_is_found_and_run(tmp_path, monkeypatch):
    (tmp_path / "glueinfo_fakelrms.py").write_text(textwrap.dedent("""
        from glueinfo.lrms import LrmsPlugin  # the documented plugin API paths
        from glueinfo.model import QueueState

        def query(ctx):
            return QueueState(lrms_type="fake", queue=ctx.queue, running_jobs=7)

        LRMS = LrmsPlugin(name="fake", query=query)
    """))
    dist = tmp_path / "glueinfo_fakelrms-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: glueinfo-fakelrms\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[glueinfo.lrms]\nfake = glueinfo_fakelrms\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = all_plugins()
    fake = [p for p in plugins if p.name == "fake"]
    assert fake and fake[0].source == "glueinfo-fakelrms"
    state = queue_state("fake", ctx(queue="q"))
    assert state.error is None and state.running_jobs == 7 and state.collected_at == 1000.0


def test_broken_entry_point_does_not_hide_the_builtins(tmp_path, monkeypatch):
    dist = tmp_path / "glueinfo_broken-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: glueinfo-broken\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[glueinfo.lrms]\nbroken = no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    errors = []
    names = [p.name for p in all_plugins(on_error=errors.append)]
    assert "fork" in names and "slurm" in names and "broken" not in names
    assert len(errors) == 1 and "broken" in errors[0] and "glueinfo-broken" in errors[0]


def test_plugin_that_raises_becomes_one_line_error(caplog):
    def query(c):
        raise RuntimeError("boom\nsecond line")

    with caplog.at_level(logging.WARNING, logger="glueinfo.lrms"):
        state = queue_state("x", ctx(queue="q"), plugins=[LrmsPlugin("x", query)])
    assert state.error == "RuntimeError: boom second line"
    assert "\n" not in state.error
    assert_all_unknown(state)
    assert len(caplog.records) == 1


def test_plugin_query_error_message_is_kept_as_is():
    def query(c):
        raise LrmsQueryError("slurm: sinfo: command not found")

    state = queue_state("x", ctx(), plugins=[LrmsPlugin("x", query)])
    assert state.error == "slurm: sinfo: command not found"


def test_hanging_plugin_is_abandoned_after_its_timeout():
    def query(c):
        time.sleep(30)

    state = queue_state("x", ctx(timeout_s=0.2), plugins=[LrmsPlugin("x", query)])
    assert "timed out after 0.2 s" in state.error  # had it been waited for, the query would have returned none
    assert_all_unknown(state)


def test_plugin_returning_something_else_is_an_error():
    state = queue_state("x", ctx(), plugins=[LrmsPlugin("x", lambda c: {"running": 3})])
    assert "returned dict, not a QueueState" in state.error


def test_find_plugin_for_builtin_does_not_need_entry_points():
    assert find_plugin("slurm").name == "slurm"


def test_context_for_ce_reads_queue_and_timeout():
    c = context_for_ce({"queue": "long", "lrms_timeout": 3.5}, hosts=[])
    assert c.queue == "long" and c.timeout_s == 3.5 and c.with_jobs is False


# -- fork ------------------------------------------------------------------------------

def test_fork_sums_cpus_and_free_cpus_from_load():
    state = queue_state("fork", ctx(hosts=[host("a", 8, 2.6), host("b", 4, 5.0)]))
    assert state.error is None
    assert state.total_cpus == 12
    # a: 8 - round(2.6)=3 -> 5 free; b: 4 - 5 -> 0 (never negative)
    assert state.free_cpus == 5
    assert state.status == "Production"
    assert state.hosts == ["a", "b"]
    assert state.queue is None
    assert state.waiting_jobs == 0  # fork never queues
    for name in ("running_jobs", "total_jobs", "free_job_slots", "estimated_response_time_s", "worst_response_time_s",
                 "max_wall_clock_time_min", "lrms_version"):  # no pool accounts named: processes are not jobs
        assert getattr(state, name) is None, name


def test_fork_unknown_cpu_count_leaves_totals_unknown():
    state = queue_state("fork", ctx(hosts=[host("a", 8, 0.0), host("b", None, 0.0)]))
    assert state.total_cpus is None and state.free_cpus is None
    assert "b" in state.error


def test_fork_unknown_load_leaves_free_cpus_unknown():
    state = queue_state("fork", ctx(hosts=[host("a", 8, None)]))
    assert state.total_cpus == 8 and state.free_cpus is None
    assert "load" in state.error


def test_fork_without_hosts_is_an_error():
    state = queue_state("fork", ctx(hosts=[]))
    assert "no host snapshots" in state.error
    assert_all_unknown(state)


def test_fork_on_this_host_matches_proc():
    from glueinfo.core.config import Config
    from glueinfo.host.collect import probe

    snapshot = probe(Config())
    state = queue_state("fork", ctx(hosts=[snapshot]))
    with open("/proc/cpuinfo") as handle:
        processors = sum(1 for line in handle if line.startswith("processor"))
    assert state.total_cpus == processors == os.cpu_count()
    with open("/proc/loadavg") as handle:
        load1 = float(handle.read().split()[0])
    # The load may move between the probe and this read; allow one CPU either way.
    assert abs(state.free_cpus - max(0, processors - round(load1))) <= 1


def test_fork_never_queues_and_counts_the_pool_accounts_sessions_as_jobs():
    """Issue 11: fork CEs publish WaitingJobs 0 and, with pool accounts, running jobs and free slots."""
    from glueinfo.lrms.registry import LrmsContext

    hosts = [HostSnapshot(hostname="ce.example.org", collected_at=time.time(), cpu=CpuInfo(logical_cpus=8),
                          load=LoadInfo(load1=1.0))]
    ps = ("root root 1\natlas001 atlas 4101\natlas001 atlas 4101\natlas002 atlas 4200\ncms007 cms 5000\n"
          "localuser users 6000\n")  # 3 grid sessions
    calls = []

    def run(argv, timeout, env):
        calls.append(list(argv))
        return 0, ps, ""

    state = queue_state("fork", LrmsContext(queue=None, ce_config={"pool_accounts": ["atlas*", "cms*"]}, hosts=hosts,
                                            run=run))
    assert calls == [["ps", "-e", "-o", "user:64=,group:64=,sess="]]
    assert (state.waiting_jobs, state.running_jobs, state.total_jobs, state.free_job_slots) == (0, 3, 3, 8 - 3)
    without = queue_state("fork", LrmsContext(queue=None, ce_config={}, hosts=hosts))
    assert without.waiting_jobs == 0 and without.running_jobs is None and without.free_job_slots is None


def _fork_state(ps_answer, vo_map=None, **config):
    from glueinfo.lrms.registry import LrmsContext
    from glueinfo.lrms.vo_map import VoMap

    hosts = [HostSnapshot(hostname="ce.example.org", collected_at=time.time(), cpu=CpuInfo(logical_cpus=8),
                          load=LoadInfo(load1=1.0))]

    def run(argv, timeout, env):
        if isinstance(ps_answer, BaseException):
            raise ps_answer
        return ps_answer

    return queue_state("fork", LrmsContext(queue=None, ce_config={"pool_accounts": ["atlas*", "cms*"], **config},
                                           hosts=hosts, run=run, vo_map=vo_map or VoMap()))


def test_fork_counts_the_pool_sessions_per_vo():
    from glueinfo.lrms.vo_map import VoMap

    ps = ("atlas001 atlas 4101\natlas001 atlas 4101\natlas002 atlas 4200\ncms007 cms 5000\ncms008 prod 5100\n"
          "dteam01 dteam 7000\n")  # dteam01 is no pool account: not a job
    state = _fork_state((0, ps, ""), VoMap.from_values(["group:atlas=atlas", "user:cms00[7]=cms"]))
    counts = {vo: (c.running, c.waiting, c.total) for vo, c in state.vo_counts.items()}
    # by hand: atlas001 (one session, two processes) and atlas002 by their group; cms007 by its name;
    # cms008 matches no rule: local, counted in the 4 running jobs only
    assert counts == {"atlas": (2, 0, 2), "cms": (1, 0, 1)} and state.running_jobs == 4 and state.error is None


@pytest.mark.parametrize("answer, said", [
    ((0, "atlas001 atlas 4101\nthis is not ps\n", ""), "ps: unexpected line 'this is not ps'"),
    ((0, "atlas001 atlas 4101\natlas002 atlas 42x\n", ""), "ps: unexpected line 'atlas002 atlas 42x'"),
    ((0, "\n", ""), "ps: empty output"),
    ((1, "", "ps: error: unknown user-defined format specifier\n"), "unknown user-defined format specifier"),
    (FileNotFoundError(2, "No such file"), "ps: command not found"),
    (subprocess.TimeoutExpired("ps", 10), "ps timed out"),
])
def test_fork_ps_failing_or_garbled_leaves_the_job_counts_unknown_in_one_line(answer, said, caplog):
    with caplog.at_level(logging.WARNING, logger="glueinfo.lrms"):
        state = _fork_state(answer)
    assert (state.running_jobs, state.total_jobs, state.free_job_slots, state.vo_counts) == (None, None, None, {})
    assert said in state.error and "\n" not in state.error
    assert (state.total_cpus, state.free_cpus, state.status, state.waiting_jobs) == (8, 7, "Production", 0)  # the rest
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_fork_counts_this_machines_real_sessions_against_ps():
    import subprocess

    from glueinfo.lrms.registry import LrmsContext

    hosts = [HostSnapshot(hostname="ce.example.org", collected_at=time.time(), cpu=CpuInfo(logical_cpus=100000),
                          load=LoadInfo(load1=0.0))]
    state = queue_state("fork", LrmsContext(queue=None, ce_config={"pool_accounts": ["root"]}, hosts=hosts))
    rows = subprocess.run(["ps", "-e", "-o", "user=,sess="], capture_output=True, text=True, check=True).stdout.split("\n")
    sessions = {tuple(r.split()) for r in rows if r.split()[:1] == ["root"]}
    assert abs(state.running_jobs - len(sessions)) <= 2  # processes come and go between the two listings


def test_an_ssh_prefix_sends_the_plugins_variables_and_the_arguments_as_given(tmp_path, monkeypatch):
    """Through ``lrms_command_prefix = ssh HEAD`` the remote shell gets one line and none of our
    environment: the head node's own TZ would make every time its local time, read as UTC."""
    from glueinfo.lrms import commands
    from glueinfo.lrms.registry import LrmsContext

    # ssh as it behaves: drops the host word, joins the rest into one line for the remote shell,
    # which starts from the remote account's environment (here a TZ of its own), not ours
    (tmp_path / "ssh").write_text('#!/bin/sh\nshift\nexec env -i TZ=Europe/Zurich PATH="$PATH" /bin/sh -c "$*"\n')
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "show").write_text(
        '#!/bin/sh\necho "TZ=$TZ LC_ALL=$LC_ALL SLURM_CONF=$SLURM_CONF"\nfor a in "$@"; do echo "[$a]"; done\n')
    for path in (tmp_path / "ssh", tmp_path / "bin" / "show"):
        path.chmod(0o755)
    monkeypatch.chdir(tmp_path)  # a "*" the remote shell expanded would list these files
    monkeypatch.setenv("TZ", "America/New_York")
    ctx = LrmsContext(queue="q", ce_config={"lrms_command_prefix": f"{tmp_path / 'ssh'} head",
                                            "x_bin_dir": str(tmp_path / "bin")}, hosts=[])
    env = commands.environment(SLURM_CONF="/etc/slurm/other.conf")
    tools = commands.tools_for(ctx, "x_bin_dir", env, time.monotonic() + 10)
    lines = tools("show", "-O", "JobID:|t0k|,State:|t0k.", "-u", "*", "it's here").splitlines()
    assert lines == ["TZ=UTC LC_ALL=C SLURM_CONF=/etc/slurm/other.conf",
                     "[-O]", "[JobID:|t0k|,State:|t0k.]", "[-u]", "[*]", "[it's here]"]


def test_a_local_prefix_passes_the_arguments_and_the_environment_unchanged(tmp_path):
    from glueinfo.lrms import commands
    from glueinfo.lrms.registry import LrmsContext

    (tmp_path / "show").write_text('#!/bin/sh\necho "TZ=$TZ"\nfor a in "$@"; do echo "[$a]"; done\n')
    (tmp_path / "show").chmod(0o755)
    ctx = LrmsContext(queue="q", ce_config={"lrms_command_prefix": "env X=1", "x_bin_dir": str(tmp_path)}, hosts=[])
    tools = commands.tools_for(ctx, "x_bin_dir", commands.environment(), time.monotonic() + 10)
    assert tools("show", "a|b", "*").splitlines() == ["TZ=UTC", "[a|b]", "[*]"]


def test_site_jobs_lists_a_job_of_one_batch_system_once_and_equal_ids_of_two_apart():
    from types import SimpleNamespace

    from glueinfo.core.job import JobInfo
    from glueinfo.lrms.registry import site_jobs

    def ce(name, lrms, cluster, **options):
        return SimpleNamespace(unique_id=f"ce01:2119/jobmanager-{lrms}-{name}", lrms=lrms, queue=name, cluster=cluster,
                               options=options, lrms_timeout=5.0)

    ces = [ce("grid", "lsf", "a", lsf_envdir="/etc/lsf/clusterA"), ce("grid", "lsf", "b", lsf_envdir="/etc/lsf/clusterB"),
           ce("short", "slurm", "c", slurm_conf="/etc/slurm/slurm.conf"),
           ce("long", "slurm", "c", slurm_conf="/etc/slurm/slurm.conf")]

    def ask(lrms, ctx):  # every queue lists jobs 1 and 2 (two clusters number their jobs alike)
        return QueueState(lrms_type=lrms, total_jobs=2, jobs=[JobInfo(local_id="1"), JobInfo(local_id="2")])

    jobs, failed = site_jobs(ces, ask=ask)
    # LSF clusters A and B: four jobs; the Slurm partitions of one Slurm: its two jobs once
    assert [(job.local_id, cluster) for job, cluster in jobs] == [("1", "a"), ("2", "a"), ("1", "b"), ("2", "b"),
                                                                 ("1", "c"), ("2", "c")]
    assert failed == []
