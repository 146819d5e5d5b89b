"""Hostile batch tools (issue 26, findings 2 and 3): a Slurm, PBS, Grid Engine, LSF or
HTCondor command that prints without end, that hangs with a child holding its
output, or that exits while a child it forked keeps that output open.

Before: 200 MB of garbage from a tool drove `glueinfo ldif` to 1.9-4.25 GB and
past `lrms_timeout`; a tool that hung was given up at the timeout but its
children ran on under PID 1 (one per query, three for HTCondor); a tool that
exited leaving a child on its stdout stalled the query until the timeout.

Each test puts one fake tool, under every command name the CE's plugin runs,
in the CE's `*_bin_dir`, runs a real `glueinfo ldif` through the CLI, and
reads what an admin reads: the CE's one-line warning on stderr, the LDIF's
figures, and which processes are left on the machine (/proc).
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pytest
from glueinfo_processes import run_glueinfo
from waiting import wait_until

# lrms -> (the [ce:NAME] key of its tools' directory, the commands its plugin runs, the queue)
PLUGINS = {
    "slurm": ("slurm_bin_dir", ("sinfo", "scontrol", "squeue", "sacctmgr"), "short"),
    "pbs": ("pbs_bin_dir", ("qstat", "pbsnodes"), "workq"),
    "sge": ("sge_bin_dir", ("qstat", "qhost", "qconf"), "all.q"),
    "lsf": ("lsf_bin_dir", ("lsid", "bqueues", "bhosts", "bjobs"), "grid"),
    "htcondor": ("condor_bin_dir", ("condor_version", "condor_status", "condor_q"), "sched1.example.org"),
}

# What a batch system's answer would publish for a CE, in GLUE 1.3 and GLUE 2: none may appear
# when the tools gave nothing usable (the config below states no limit or count of its own).
# GLUE2ComputingManagerTotal*CPUs are the hosts' (from their snapshots), not the batch system's.
COUNT = re.compile(r"^(GlueCE(State|Info)\w*(Jobs|CPUs|Slots)|GLUE2Computing\w*(Jobs|Slots))\b", re.M)


def fake_tools(tmp: Path, lrms: str, body: str) -> Path:
    """A directory holding one Python script under every command name the ``lrms`` plugin runs."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    script = bin_dir / "fake-tool"
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    for tool in PLUGINS[lrms][1]:
        (bin_dir / tool).symlink_to(script.name)
    return bin_dir


def ldif(tmp: Path, lrms: str, bin_dir: Path, timeout_s: float):
    key, _, queue = PLUGINS[lrms]
    config = tmp / "glueinfo.conf"
    config.write_text(f"[site]\nid = HOSTILE-SITE\n"
                      f"[ce:grid]\nlrms = {lrms}\nqueue = {queue}\n{key} = {bin_dir}\nlrms_timeout = {timeout_s}\n"
                      f"[run]\nstate_dir = {tmp / 'state'}\n")
    # A hang of glueinfo itself is a failure: run_glueinfo's own timeout turns it into an exception.
    return run_glueinfo("ldif", "--config", str(config), timeout=120)


def ce_warning(stderr: str, lrms: str) -> str:
    """The CE's one-line WARNING (the registry logs one per failed query)."""
    queue = PLUGINS[lrms][2]
    lines = [line for line in stderr.splitlines() if f"WARNING: LRMS {lrms} queue {queue}: " in line]
    assert len(lines) == 1, stderr
    return lines[0]


def unfolded(text: str) -> str:
    """LDIF with its folded lines joined (RFC 2849: a continuation starts with one space)."""
    return text.replace("\n ", "")


def processes_in_group(pgid: int) -> list[int]:
    """The live processes (zombies are dead) whose process group is ``pgid``, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # ended while we looked
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry))
    return found


def left_in(pgids: set[int], patience_s: float = 5.0) -> dict[int, list[int]]:
    """The groups of ``pgids`` that still have a live process.  SIGKILL is delivered asynchronously,
    so the groups get a few seconds to empty: a liveness bound, not a speed target (the old code
    left them sleeping for 300 s).  AssertionError naming them when some are still alive after that."""

    def left() -> dict[int, list[int]]:
        return {pgid: pids for pgid in pgids if (pids := processes_in_group(pgid))}

    wait_until(lambda: not left(), f"every process of the groups {sorted(pgids)} ended", patience_s, step=0.1,
               detail=lambda: f"still alive (group: pids): {left()}")
    return left()


@pytest.fixture
def records(tmp_path):
    """The file the fake tools write "pid pgid child" to; every process named there is killed at the
    end, so a failing run (the old code) leaves nothing behind either."""
    path = tmp_path / "processes"
    yield path
    if path.exists():
        for line in path.read_text().split("\n"):
            for pid in line.split()[::2]:  # the tool and its child, by id (never the group: it may be ours)
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass


def recorded(path: Path) -> list[tuple[int, int, int]]:
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines() if line.strip()]  # type: ignore[misc]


# A tool that forks a child inheriting its stdout and stderr, writes "pid pgid child-pid", then
# does what {after} says.
FORKING_TOOL = """import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "300"])
with open({record!r}, "a") as handle:
    handle.write(f"{{os.getpid()}} {{os.getpgid(0)}} {{child.pid}}\\n")
{after}
"""


@pytest.mark.parametrize("lrms", sorted(PLUGINS))
def test_a_tool_printing_200_mb_of_garbage_is_stopped_at_its_cap_and_publishes_no_count(tmp_path, lrms):
    """Finding 2: 200 MB of random bytes from every command.  The CE's warning names the command
    and its cap; the CE is published without any job or CPU figure; the rest of the site is."""
    bin_dir = fake_tools(tmp_path, lrms, "import os, sys\nblock = os.urandom(1_000_000)\n"
                                         "for _ in range(200):\n    sys.stdout.buffer.write(block)\n")
    proc = ldif(tmp_path, lrms, bin_dir, timeout_s=20)
    assert "Traceback" not in proc.stderr and "GlueCEUniqueID: " in proc.stdout, proc.stderr  # the site is published
    warning = ce_warning(proc.stderr, lrms)
    tools = "|".join(map(re.escape, PLUGINS[lrms][1]))
    assert re.search(rf"\b({tools}): output passed the \d+ MiB cap \(lrms_max_output_bytes\); nothing published from it",
                     warning), warning
    assert "timed out" not in warning
    published = unfolded(proc.stdout)
    assert "GlueCEUniqueID: " in published and "/jobmanager-" in published  # the CE is there...
    assert COUNT.findall(published) == []  # ...with no figure of the garbage
    assert "GlueHostUniqueID: " in published or "GlueSubClusterUniqueID: " in published  # and the site


def test_a_smaller_cap_set_for_the_ce_is_the_one_applied(tmp_path):
    """[ce:NAME] lrms_max_output_bytes: 2 MB of text from squeue is past a 1 MiB cap."""
    bin_dir = fake_tools(tmp_path, "slurm", "import os, sys\nif os.path.basename(sys.argv[0]) == 'squeue':\n"
                                            "    sys.stdout.writelines('x' * 99 + '\\n' for _ in range(20_000))\n"
                                            "else:\n    print('slurm 23.11.4')\n")
    config_timeout = 20
    key, _, queue = PLUGINS["slurm"]
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[site]\nid = HOSTILE-SITE\n[ce:grid]\nlrms = slurm\nqueue = {queue}\n{key} = {bin_dir}\n"
                      f"lrms_timeout = {config_timeout}\nlrms_max_output_bytes = 1048576\n"
                      f"[run]\nstate_dir = {tmp_path / 'state'}\n")
    proc = run_glueinfo("ldif", "--config", str(config), timeout=120)
    warning = ce_warning(proc.stderr, "slurm")
    assert "squeue: output passed the 1 MiB cap (lrms_max_output_bytes)" in warning, warning
    assert "scontrol: output passed" not in warning and "sinfo: output passed" not in warning  # short answers were read
    assert COUNT.findall(unfolded(proc.stdout)) == []


@pytest.mark.parametrize("lrms", sorted(PLUGINS))
def test_a_tool_that_hangs_with_a_child_leaves_no_process_after_the_timeout(tmp_path, lrms, records):
    """Finding 3: each command forks `sleep 300` on its stdout and hangs.  At lrms_timeout the
    command's whole process group is gone, and the warning names the timeout."""
    bin_dir = fake_tools(tmp_path, lrms, FORKING_TOOL.format(record=str(records), after="time.sleep(300)"))
    proc = ldif(tmp_path, lrms, bin_dir, timeout_s=2)
    assert "Traceback" not in proc.stderr and "GlueCEUniqueID: " in proc.stdout, proc.stderr  # the site is published
    ran = recorded(records)
    assert ran, "no fake tool ran"
    pgids = {pgid for _, pgid, _ in ran}
    assert os.getpgid(0) not in pgids, "a tool ran in glueinfo's (and this test's) process group"
    assert all(pid == pgid for pid, pgid, _ in ran), "a tool did not lead a process group of its own"
    assert left_in(pgids) == {}
    warning = ce_warning(proc.stderr, lrms)
    tools = "|".join(map(re.escape, PLUGINS[lrms][1]))
    assert re.search(rf"\b({tools}) timed out after [0-9.]+ s \(lrms_timeout\); its processes were killed", warning), warning
    assert COUNT.findall(unfolded(proc.stdout)) == []


@pytest.mark.parametrize("lrms", sorted(PLUGINS))
def test_a_tool_that_exits_leaving_a_child_on_its_output_is_read_at_its_exit(tmp_path, lrms, records):
    """A command that fails (exit 3) but leaves a child holding its stdout: the query reports the
    exit, not a timeout (reading until end of file waited for the child, up to lrms_timeout),
    and the child is gone."""
    bin_dir = fake_tools(tmp_path, lrms, FORKING_TOOL.format(
        record=str(records), after="sys.stderr.write('batch system down\\n')\nsys.stderr.flush()\nos._exit(3)"))
    proc = ldif(tmp_path, lrms, bin_dir, timeout_s=20)
    assert "Traceback" not in proc.stderr and "GlueCEUniqueID: " in proc.stdout, proc.stderr  # the site is published
    warning = ce_warning(proc.stderr, lrms)
    assert "timed out" not in warning and "not run" not in warning, warning
    assert re.search(r"exited 3: batch system down", warning), warning
    pgids = {pgid for _, pgid, _ in recorded(records)}
    assert pgids and os.getpgid(0) not in pgids
    assert left_in(pgids) == {}
