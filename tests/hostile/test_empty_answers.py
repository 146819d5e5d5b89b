"""Batch tools that answer nothing (issue 26, finding 4: "empty is not zero").

Before: a Slurm, PBS, LSF or HTCondor command that exited 0 printing nothing
gave an error line ("no partition 'short' in output", "no schedd named ...")
and still published Running/Waiting/TotalJobs, FreeCPUs and TotalCPUs of 0:
an empty answer read as an empty queue.  A broker then saw an idle, empty
queue of zero CPUs where nothing was known.

Each test puts one fake tool that exits 0 and prints nothing under every
command name the CE's plugin runs, in the CE's ``*_bin_dir``, runs a real
``glueinfo ldif`` through the CLI, and reads what a broker and an admin read:
no count of the queue in the GLUE 1.3 or GLUE 2 tree, the CE still published,
its warning on stderr, and exit 0 (an empty answer does not say the queue is
missing, only that nothing is known: that is not the mistyped-queue error).
OpenPBS's empty answers (not JSON) and Grid Engine's (not XML) were already
refused whole; they are here so that every plugin stays held to the rule.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from glueinfo_processes import run_glueinfo

# case -> (lrms, the [ce:NAME] key of its tools' directory, the commands its plugin runs, the queue, extra keys)
CASES = {
    "slurm": ("slurm", "slurm_bin_dir", ("sinfo", "scontrol", "squeue", "sacctmgr"), "short", ""),
    "pbs-torque": ("pbs", "pbs_bin_dir", ("qstat", "pbsnodes"), "batch", "pbs_flavour = torque\n"),
    "pbs-openpbs": ("pbs", "pbs_bin_dir", ("qstat", "pbsnodes"), "workq", "pbs_flavour = openpbs\n"),
    "sge": ("sge", "sge_bin_dir", ("qstat", "qhost", "qconf"), "all.q", ""),
    "lsf": ("lsf", "lsf_bin_dir", ("lsid", "bqueues", "bhosts", "bjobs"), "grid", ""),
    "htcondor": ("htcondor", "condor_bin_dir", ("condor_version", "condor_status", "condor_q"), "sched1.example.org", ""),
}

# Every figure a broker reads as a count of the queue, GLUE 1.3 (CE and VOView) and GLUE 2 (Service,
# Share, Manager slots).  GLUE2ComputingManagerTotal*CPUs are the hosts' own (their snapshots).
COUNT = re.compile(r"^(?:GlueCE(?:State|Info)\w*(?:Jobs|CPUs|Slots)|GLUE2Computing\w*(?:Jobs|Slots))\b.*$", re.M)


@pytest.mark.parametrize("case", sorted(CASES))
def test_tools_that_print_nothing_publish_no_count(tmp_path: Path, case: str) -> None:
    lrms, key, tools, queue, extra = CASES[case]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / tool).chmod(0o755)
    config = tmp_path / "glueinfo.conf"
    config.write_text(f"[site]\nid = HOSTILE-SITE\n"
                      f"[ce:grid]\nlrms = {lrms}\nqueue = {queue}\n{key} = {bin_dir}\naccess = VO:dteam\n{extra}"
                      f"[run]\nstate_dir = {tmp_path / 'state'}\n")
    proc = run_glueinfo("ldif", "--config", str(config), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"GlueCEName: {queue}" in proc.stdout  # the CE is published, only its counts are not
    assert COUNT.findall(proc.stdout) == [], COUNT.findall(proc.stdout)
    assert not re.search(r"^(GlueCEStateStatus|GLUE2ComputingShareServingState): [Cc]losed", proc.stdout, re.M)
    assert re.search(rf"WARNING: LRMS {lrms} queue {re.escape(queue)}: ", proc.stderr), proc.stderr
    assert "ERROR" not in proc.stderr  # nothing says the queue does not exist: nothing is known
