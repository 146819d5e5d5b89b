"""The sge plugin against a real Grid Engine cell (sge_qmaster + sge_execd, tests/harness/sge_harness.py).

Jobs that sleep fill queue ``short`` so some run and some wait, one is held, one
waits in the disabled queue ``closed``; the plugin's QueueState and the GlueCE
entries `glueinfo ldif` prints are checked against what ``qstat`` prints in its
plain text form (``qstat -u '*'``, ``qstat -g c``), parsed here on its own,
never through the plugin's XML parsers.

The cell's qmaster listens on a free port, which the plugin's commands get the
way a site with a non-default port would give it: ``lrms_command_prefix = env
SGE_QMASTER_PORT=N`` (the cell itself comes from ``sge_root``/``sge_cell``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sge_harness import SgeCell, missing_sge_tools

from glueinfo.core.ldif import Entry, parse_ldif, value_text
from glueinfo.lrms.registry import LrmsContext, queue_state

pytestmark = pytest.mark.integration

HOSTILE_NAME = 'evil<&>"x'


@pytest.fixture(scope="module")
def cell(tmp_path_factory):
    missing = missing_sge_tools()
    if missing:
        pytest.skip("real Grid Engine needed, missing: " + ", ".join(missing))
    sge = SgeCell(tmp_path_factory.mktemp("sge")).start()
    try:
        yield sge
    finally:
        sge.stop()


@pytest.fixture(scope="module")
def busy(cell):
    """Both slots of short running, three jobs waiting there (one held, one with a hostile name)
    and one waiting in the disabled queue closed."""
    ids: dict[str, Any] = {"running": [cell.qsub("-q", "short", "-N", f"run{i}") for i in range(SgeCell.SHORT_SLOTS)]}
    cell.wait_for(lambda: len([r for r in qstat_rows(cell) if r["state"] == "r"]) == SgeCell.SHORT_SLOTS,
                  what="both slots of short running")
    ids["waiting"] = [cell.qsub("-q", "short", "-l", "h_rt=0:10:0", "-N", "wait0"),
                      cell.qsub("-q", "short", "-N", HOSTILE_NAME)]
    ids["held"] = cell.qsub("-q", "short", "-h", "-N", "held")
    ids["closed"] = cell.qsub("-q", "closed", "-N", "closedjob")
    return ids


def qstat_rows(cell: SgeCell) -> list[dict[str, str]]:
    """``qstat -u '*'`` text: job id, state and queue instance (empty while pending) per job."""
    rows = []
    for line in cell.run("qstat", "-u", "*").splitlines()[2:]:
        parts = line.split()
        if not parts:
            continue
        # job-ID prior name user state date time [queue] slots [ja-task-ID]; names here have no spaces
        queue = parts[7] if len(parts) > 8 and "@" in parts[7] else ""
        rows.append({"id": parts[0], "state": parts[4], "queue": queue})
    return rows


def summary(cell: SgeCell, queue: str) -> dict[str, int]:
    """``qstat -g c`` text: USED, AVAIL and TOTAL slots of one cluster queue."""
    for line in cell.run("qstat", "-g", "c").splitlines():
        parts = line.split()
        if parts and parts[0] == queue:
            return {"used": int(parts[2]), "avail": int(parts[4]), "total": int(parts[5])}
    raise AssertionError(f"no {queue} in qstat -g c")


def ce_config(cell: SgeCell, queue: str) -> dict[str, Any]:
    return cell.ce_config(queue, lrms_command_prefix=f"env SGE_QMASTER_PORT={cell.qmaster_port}")


def state_of(cell: SgeCell, queue: str, with_jobs: bool = True):
    return queue_state("sge", LrmsContext(queue=queue, ce_config=ce_config(cell, queue), hosts=[], timeout_s=20.0,
                                          with_jobs=with_jobs))


def test_short_queue_matches_qstat(cell, busy):
    state = state_of(cell, "short")
    rows = qstat_rows(cell)
    assert state.error is None
    assert state.lrms_version == cell.run("qstat", "-help").splitlines()[0].split()[-1] == "8.1.9"
    assert state.status == "Production"
    slots = summary(cell, "short")
    assert state.total_cpus == min(slots["total"], cell.nproc) and state.free_job_slots == slots["avail"] == 0
    assert state.free_cpus == 0
    running = [r for r in rows if r["state"] == "r" and r["queue"].startswith("short@")]
    mine = set(busy["waiting"]) | {busy["held"]}
    assert state.running_jobs == len(running) == SgeCell.SHORT_SLOTS
    assert state.waiting_jobs == len([r for r in rows if r["id"] in mine]) == 3
    assert state.total_jobs == state.running_jobs + state.waiting_jobs
    assert (state.max_wall_clock_time_min, state.max_cpu_time_min) == (SgeCell.SHORT_MAX_WALL_MIN, SgeCell.SHORT_MAX_CPU_MIN)
    assert state.hosts == [cell.host]
    (node,) = state.nodes
    assert (node.name, node.state, node.total_cpus, node.allocated_cpus) == (cell.host, "Busy", 2, slots["used"])
    # both running jobs have 30 min to go at most, two waiting jobs (600 s + 1800 s) over 2 slots
    assert 1200 <= state.estimated_response_time_s <= state.worst_response_time_s <= 1800 + 1200


def test_jobs_match_qstat_states(cell, busy):
    jobs = {job.local_id: job for job in state_of(cell, "short").jobs}
    states = {r["id"]: r["state"] for r in qstat_rows(cell)}
    assert set(jobs) == set(busy["running"]) | set(busy["waiting"]) | {busy["held"]}
    for job_id, job in jobs.items():
        assert job.lrms_state == states[job_id]
    assert all((jobs[i].glue_status, jobs[i].nodes) == ("RUNNING", [cell.host]) for i in busy["running"])
    assert (jobs[busy["held"]].lrms_state, jobs[busy["held"]].sss_state) == ("hqw", "Hold")
    assert jobs[busy["waiting"][1]].name == HOSTILE_NAME
    assert jobs[busy["waiting"][0]].requested_duration_s == 600


def test_long_limits_and_disabled_queue(cell, busy):
    long_state = state_of(cell, "long", with_jobs=False)
    assert long_state.error is None and long_state.status == "Production"
    assert (long_state.max_wall_clock_time_min, long_state.max_cpu_time_min) == (SgeCell.LONG_MAX_WALL_MIN,
                                                                                 SgeCell.LONG_MAX_CPU_MIN)
    closed = state_of(cell, "closed")
    queue_line = next(line for line in cell.run("qstat", "-f", "-q", "closed").splitlines() if line.startswith("closed@"))
    assert queue_line.split()[-1] == "d"
    # the job below was accepted by qsub into the disabled queue: GLUE's Queueing (accepts, cannot run), not Closed
    assert closed.error is None and closed.status == "Queueing" and closed.free_job_slots == 0
    assert [j.local_id for j in closed.jobs] == [busy["closed"]] and closed.waiting_jobs == 1
    assert [(n.state, n.lrms_state) for n in closed.nodes] == [("Offline", "d")]


def test_unreachable_qmaster_leaves_everything_unknown(cell):
    config = dict(ce_config(cell, "short"), lrms_command_prefix="env SGE_QMASTER_PORT=9")
    state = queue_state("sge", LrmsContext(queue="short", ce_config=config, hosts=[], timeout_s=10.0))
    assert state.error and "qmaster unreachable" in state.error
    assert state.total_jobs is None and state.total_cpus is None and state.status is None


def cluster_queues(cell: SgeCell) -> list[str]:
    """The cluster queues ``qstat -g c`` lists (below its header and rule)."""
    return sorted(line.split()[0] for line in cell.run("qstat", "-g", "c").splitlines()[2:] if line.strip())


def test_a_mistyped_cluster_queue_is_closed_without_counts_and_names_the_real_ones(cell, busy, tmp_path: Path):
    """Issue 25/26: `queue = shrt` for short.  Before, the CE was Closed with TotalCPUs 0 and the jobs
    that requested no queue as its jobs.  Now no count is published, and `glueinfo ldif` exits 1 after
    one ERROR naming the cluster queues `qstat -g c` lists and the one meant, printing the LDIF."""

    queues = cluster_queues(cell)
    assert "shrt" not in queues and "short" in queues
    state = state_of(cell, "shrt", with_jobs=False)
    for name in ("total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots"):
        assert getattr(state, name) is None, name
    assert state.status == "Closed" and state.queue_missing and list(state.existing_queues) == queues
    assert state.error == (f"queue 'shrt': sge has no such cluster queue; did you mean 'short'? "
                           f"(its cluster queues: {', '.join(queues)})")

    config = tmp_path / "glueinfo.conf"
    sections = "".join(f"[ce:{queue}]\nlrms = sge\nsge_root = {cell.root}\nsge_cell = {cell.cell}\n"
                       f"lrms_command_prefix = env SGE_QMASTER_PORT={cell.qmaster_port}\nlrms_timeout = 20\n"
                       for queue in ("short", "shrt"))
    config.write_text(f"[site]\nid = TEST-SITE\n[cluster:main]\n{sections}[run]\nstate_dir = {tmp_path / 'state'}\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "ldif", "--glue", "1.3", "--config", str(config)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert [line for line in proc.stderr.splitlines() if "ERROR" in line] == [f"glueinfo: ERROR: [ce:shrt] {state.error}"]
    ces = {value_text(e.first("GlueCEName")): e for e in parse_ldif(proc.stdout) if "GlueCE" in e.get("objectClass")}
    assert value_text(ces["shrt"].first("GlueCEStateStatus")) == "Closed"
    assert not [name for name in ces["shrt"].attributes if name.endswith(("Jobs", "CPUs", "Slots"))]
    assert int(value_text(ces["short"].first("GlueCEInfoTotalCPUs"))) == min(summary(cell, "short")["total"], cell.nproc)


def test_glueinfo_ldif_publishes_the_short_ce_as_qstat_shows_it(cell, busy, tmp_path: Path):

    config = tmp_path / "glueinfo.conf"
    config.write_text(f"""\
[site]
id = TEST-SITE

[cluster:main]

[ce:short]
lrms = sge
queue = short
sge_root = {cell.root}
sge_cell = {cell.cell}
lrms_command_prefix = env SGE_QMASTER_PORT={cell.qmaster_port}
lrms_timeout = 20

[run]
state_dir = {tmp_path / 'state'}
""")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "ldif", "--config", str(config)], capture_output=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    (ce,) = [e for e in parse_ldif(proc.stdout.decode()) if "GlueCE" in e.get("objectClass")]
    rows = qstat_rows(cell)
    slots = summary(cell, "short")

    def number(attribute: str) -> int:
        return int(value_text(ce.first(attribute)))

    assert value_text(ce.first("GlueCEInfoLRMSType")) == "sge"
    assert value_text(ce.first("GlueCEInfoLRMSVersion")) == "8.1.9"
    assert value_text(ce.first("GlueCEStateStatus")) == "Production"
    assert number("GlueCEStateRunningJobs") == len([r for r in rows if r["state"] == "r" and r["queue"].startswith("short@")])
    assert number("GlueCEStateWaitingJobs") == len([r for r in rows if r["id"] in set(busy["waiting"]) | {busy["held"]}])
    assert number("GlueCEInfoTotalCPUs") == min(slots["total"], cell.nproc)
    assert number("GlueCEStateFreeJobSlots") == slots["avail"]
    assert number("GlueCEPolicyMaxWallClockTime") == SgeCell.SHORT_MAX_WALL_MIN
    assert number("GlueCEPolicyMaxCPUTime") == SgeCell.SHORT_MAX_CPU_MIN


PE_TEXT = """\
pe_name            limpe
slots              3
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    $fill_up
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
"""


def sge_mb(text: str) -> int:
    """A memory value as qconf prints it (``2G``, ``1500M``; k/m/g are powers of 1000) in MB."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "k": 10**3, "m": 10**6, "g": 10**9}
    number, unit = (text[:-1], text[-1]) if text[-1] in units else (text, "")
    return int(float(number) * units.get(unit, 1)) // 2**20


def queue_ldif(cell: SgeCell, queue: str, directory: Path) -> list[Entry]:
    """The entries `glueinfo ldif` publishes for a site with one CE (VO dteam) on this cell's ``queue``."""
    config = directory / f"{queue}.conf"
    config.write_text(f"[site]\nid = TEST-SITE\n[cluster:main]\n[ce:{queue}]\nlrms = sge\nsge_root = {cell.root}\n"
                      f"sge_cell = {cell.cell}\nlrms_command_prefix = env SGE_QMASTER_PORT={cell.qmaster_port}\n"
                      f"lrms_timeout = 20\naccess = VO:dteam\n[run]\nstate_dir = {directory / 'state'}\n")
    proc = subprocess.run([sys.executable, "-m", "glueinfo.cli", "ldif", "--config", str(config)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return parse_ldif(proc.stdout)


def test_queue_limits_match_qconf(cell, tmp_path: Path):
    """Issue 25 item 3: limits an admin sets with `qconf -mattr queue` are published as `qconf -sq` and
    `qconf -sp` print them: h_rt as GLUE 1.3 minutes and GLUE 2 seconds, h_rss and the tighter of
    h_vmem/s_vmem in MB, a job's slots those of the queue's parallel environment within the queue's."""

    cell.qconf_add("-Ap", PE_TEXT)
    cell.qconf_add("-Aq", cell.queue_text("limits", 2))
    try:
        for attribute, value in (("h_rt", "12:00:00"), ("h_rss", "1G"), ("h_vmem", "2G"), ("s_vmem", "1500M"),
                                 ("pe_list", "limpe")):
            cell.run("qconf", "-mattr", "queue", attribute, value, "limits")
        shown = dict(line.split(None, 1) for line in cell.run("qconf", "-sq", "limits").splitlines() if " " in line)
        pe = dict(line.split(None, 1) for line in cell.run("qconf", "-sp", "limpe").splitlines() if " " in line)
        entries = queue_ldif(cell, "limits", tmp_path)
    finally:
        cell.run("qconf", "-dq", "limits", check=False)
        cell.run("qconf", "-dp", "limpe", check=False)
    (ce,) = [e for e in entries if "GlueCE" in e.get("objectClass")]
    (share,) = [e for e in entries if "GLUE2ComputingShare" in e.get("objectClass")]

    def number(entry, attribute: str) -> int:
        return int(value_text(entry.first(attribute)))

    hours, minutes, seconds = (int(part) for part in shown["h_rt"].split(":"))
    wall_s = hours * 3600 + minutes * 60 + seconds
    assert shown["s_rt"] == "INFINITY" and shown["h_cpu"] == shown["s_cpu"] == "INFINITY"
    assert number(ce, "GlueCEPolicyMaxWallClockTime") == number(ce, "GlueCEPolicyMaxObtainableWallClockTime") == wall_s // 60
    assert number(share, "GLUE2ComputingShareMaxWallTime") == number(share, "GLUE2ComputingShareDefaultWallTime") == wall_s
    assert ce.first("GlueCEPolicyMaxCPUTime") is None and share.first("GLUE2ComputingShareMaxCPUTime") is None
    assert number(share, "GLUE2ComputingShareMaxMainMemory") == sge_mb(shown["h_rss"]) == 1024
    assert number(share, "GLUE2ComputingShareMaxVirtualMemory") == min(sge_mb(shown["h_vmem"]), sge_mb(shown["s_vmem"]))
    # one host: the queue's slots there, within the PE's (3)
    slots = min(int(pe["slots"]), int(shown["slots"]))
    assert number(ce, "GlueCEPolicyMaxSlotsPerJob") == number(share, "GLUE2ComputingShareMaxSlotsPerJob") == slots == 2


def slots_left(cell: SgeCell) -> dict[str, int]:
    """``qhost -F slots`` text: what each host (``hc:``) and the cell (``gc:``, under ``global``) have left of
    the ``slots`` consumable; a host without one is not listed."""
    left: dict[str, int] = {}
    host = ""
    for line in cell.run("qhost", "-F", "slots").splitlines():
        if line and not line[0].isspace() and not line.startswith(("HOSTNAME", "-")):
            host = line.split()[0]
        elif "c:slots=" in line:
            left[host] = int(float(line.split("c:slots=", 1)[1]))
    return left


def test_a_hosts_slots_cap_the_free_slots_of_the_queues_sharing_it(cell, busy, tmp_path: Path):
    """EGI's lcg-info against a live cell whose host's slots were capped (``qconf -mattr exechost complex_values
    slots=N``, how queues share a host's slots): short published FreeJobSlots 1 (GLUE 2 FreeSlots 1) while
    ``qhost -F slots`` said ``hc:slots=0`` and SGE kept short's next job waiting ("cannot run at host ... because
    it offers only hc:slots=0"); ``qstat -g c``'s AVAIL counts the instance's slots only.  A free slot is now one
    the host has left too: a queue with 2 free slots on a host with 1 left publishes 1, and that many of its jobs
    start while the next one waits."""

    cell.qconf_add("-Aq", cell.queue_text("shared", 2))
    used = sum(summary(cell, queue)["used"] for queue in cluster_queues(cell))
    ids: list[str] = []
    try:
        cell.run("qconf", "-mattr", "exechost", "complex_values", f"slots={used + 1}", cell.host)
        cell.wait_for(lambda: slots_left(cell).get(cell.host) == 1, what="qhost -F slots: 1 left on the host")
        avail = summary(cell, "shared")["avail"]
        left = slots_left(cell)[cell.host]
        assert (avail, left) == (2, 1)
        entries = queue_ldif(cell, "shared", tmp_path)
        (ce,) = [e for e in entries if "GlueCE" in e.get("objectClass")]
        (share,) = [e for e in entries if "GLUE2ComputingShare" in e.get("objectClass")]
        free = int(value_text(ce.first("GlueCEStateFreeJobSlots")))
        assert free == int(value_text(share.first("GLUE2ComputingShareFreeSlots"))) == min(avail, left) == 1
        assert int(value_text(ce.first("GlueCEStateFreeCPUs"))) == min(left, max(0, cell.nproc - used))
        # what SGE really gives: as many of the queue's jobs as published start, one more waits for the host's slots
        ids = [cell.qsub("-q", "shared", "-N", f"shared{i}") for i in range(free + 1)]
        cell.wait_for(lambda: len([r for r in qstat_rows(cell) if r["id"] in ids and r["state"] == "r"]) == free,
                      what=f"{free} job(s) of shared running")
        waiting = [r["id"] for r in qstat_rows(cell) if r["id"] in ids and r["state"] == "qw"]
        assert len(waiting) == 1
        cell.wait_for(lambda: "hc:slots" in cell.run("qstat", "-j", waiting[0]), what="the waiting job's reason")
        assert len([r for r in qstat_rows(cell) if r["id"] in ids and r["state"] == "r"]) == free
    finally:
        if ids:
            cell.run("qdel", "-f", *ids, check=False)
            cell.wait_for(lambda: not [r for r in qstat_rows(cell) if r["id"] in ids], what="shared's jobs gone")
        cell.run("qconf", "-dattr", "exechost", "complex_values", "slots", cell.host, check=False)
        cell.run("qconf", "-dq", "shared", check=False)


def test_sss_job_fields_match_qstat_j(cell, busy):
    """A job waiting for another (-hold_jid) and one asking for h_cpu: the plugin's dependency and CPU limit
    against what `qstat -j` prints for them.  Last in the module: its jobs would change the counts above."""
    first = busy["running"][0]
    waiter = cell.qsub("-q", "short", "-N", "waiter", "-hold_jid", first, "-l", "h_cpu=0:10:0")
    shown = cell.run("qstat", "-j", waiter)
    predecessors = [line.split(":", 1)[1].split(",") for line in shown.splitlines()
                    if line.startswith("jid_predecessor_list")]
    (limits,) = [line.split(":", 1)[1] for line in shown.splitlines() if line.startswith("hard resource_list")]
    jobs = {job.local_id: job for job in state_of(cell, "short").jobs}
    job = jobs[waiter]
    assert predecessors and job.dependencies == tuple(("OnExit", number.strip()) for number in predecessors[0])
    assert "h_cpu=600" in limits.replace(" ", "") and job.cpu_time_limit_s == 600
    assert job.sss_state == "Hold"  # hqw: held by the dependency
