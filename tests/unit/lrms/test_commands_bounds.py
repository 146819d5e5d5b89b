"""A batch system's commands run bounded (issue 26, findings 2 and 3): each CE's tools get a
stdout cap (``[ce:NAME] lrms_max_output_bytes``, by default sized for 100,000 jobs of that batch
system) and a process group that is killed whole at the timeout; either failure is the CE's
one-line error naming the tool and the cap or the timeout.

The defaults are checked against the recorded fixtures (bytes per job measured here, on files
the real tools printed) and against docs/batch-systems.md, which admins read.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest
from paths import FIXTURES, REPO
from waiting import wait_until

from glueinfo.lrms import commands
from glueinfo.lrms.registry import LrmsContext, LrmsQueryError

# The [ce:NAME] key of each built-in plugin's tools (glueinfo.core.config SCHEMA); fork's ps has none.
BIN_DIR_KEYS = {"fork": "", "slurm": "slurm_bin_dir", "htcondor": "condor_bin_dir", "pbs": "pbs_bin_dir",
                "sge": "sge_bin_dir", "lsf": "lsf_bin_dir"}


def jobs_in(path: Path) -> int:
    """How many jobs a recorded job listing holds, counted by its own format's record marker."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".json":
        data = json.loads(text)
        if isinstance(data, list):
            return len(data)  # condor_q -json
        if "RECORDS" in data:
            return len(data["RECORDS"])  # bjobs -json
        return len(data.get("Jobs", {}))  # qstat -f -F json
    if "<Job>" in text:
        return text.count("<Job>")  # Torque qstat -x
    if "<job_list" in text:
        return text.count("<job_list")  # Grid Engine qstat -xml
    return len([line for line in text.splitlines() if line.strip()])  # squeue: one line per job


# The job listings each plugin reads, as recorded from the real tools (the largest output at 100,000 jobs).
LISTINGS = {
    "slurm": sorted(FIXTURES.glob("slurm/*/squeue_*.txt")),
    "htcondor": sorted(p for p in FIXTURES.glob("htcondor/*/condor_q_*.json") if "empty" not in p.name),
    "lsf": [p for p in sorted(FIXTURES.glob("lsf/*/bjobs_*.json")) if "truncated" not in p.name],
    "pbs": [p for p in sorted(FIXTURES.glob("pbs/*/qstat_jobs_*")) if not re.search(r"truncated|bad_escape|empty", p.name)],
    "sge": [p for p in sorted(FIXTURES.glob("sge/*/qstat*.xml")) if "truncated" not in p.name and "<job_list" in p.read_text()],
}


@pytest.mark.parametrize("lrms", sorted(LISTINGS))
def test_each_default_cap_holds_100000_jobs_of_the_recorded_size_and_stops_200_mb(lrms):
    per_job = max(path.stat().st_size / jobs_in(path) for path in LISTINGS[lrms] if jobs_in(path))
    cap = commands.max_output({}, BIN_DIR_KEYS[lrms])
    assert cap >= 100_000 * per_job * 1.2, f"{lrms}: {cap} bytes hold {cap / per_job:.0f} jobs of {per_job:.0f} bytes"
    assert cap < 200_000_000  # a tool printing 200 MB of garbage is stopped before all of it is held


def test_the_documented_defaults_are_the_applied_ones():
    text = (REPO / "docs" / "batch-systems.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\w+) \| [^|]+ \| [^|]+ \| (\d+) MiB \|$", text, re.M))
    assert rows and set(rows) == set(BIN_DIR_KEYS), rows
    for lrms, mib in rows.items():
        assert commands.max_output({}, BIN_DIR_KEYS[lrms]) == int(mib) * 1024 * 1024, lrms


def test_the_ce_setting_wins_over_the_default():
    assert commands.max_output({"lrms_max_output_bytes": 5000}, "slurm_bin_dir") == 5000
    assert commands.max_output({"lrms_max_output_bytes": None}, "my_bin_dir") == commands.MAX_OUTPUT_OTHER


def tools(tmp_path: Path, script: str, timeout_s: float = 10.0, **ce_config: object) -> commands.Tools:
    """The Tools a plugin gets for a CE whose bin dir holds ``script`` as ``squeue``."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "squeue").write_text(f"#!/bin/sh\n{script}\n")
    (tmp_path / "bin" / "squeue").chmod(0o755)
    ctx = LrmsContext(queue="q", ce_config={"slurm_bin_dir": str(tmp_path / "bin"), **ce_config}, hosts=[])
    return commands.tools_for(ctx, "slurm_bin_dir", commands.environment(), time.monotonic() + timeout_s)


def test_output_past_the_ces_cap_is_the_ces_one_line_error(tmp_path):
    run = tools(tmp_path, "head -c 2000000 /dev/zero | tr '\\0' x", lrms_max_output_bytes=1024 * 1024)
    with pytest.raises(LrmsQueryError) as caught:
        run("squeue", "-h")
    assert str(caught.value) == "squeue: output passed the 1 MiB cap (lrms_max_output_bytes); nothing published from it"


def test_output_within_the_cap_is_the_tools_text(tmp_path):
    run = tools(tmp_path, "printf '1|R\\303\\251sum\\303\\251|RUNNING\\n'", lrms_max_output_bytes=4096)
    assert run("squeue") == "1|Résumé|RUNNING\n"


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_a_hung_tool_is_a_timeout_and_its_child_is_gone(tmp_path):
    record = tmp_path / "child"
    run = tools(tmp_path, f"sleep 300 & echo $! > {record}; sleep 300", timeout_s=0.5)
    try:
        with pytest.raises(LrmsQueryError) as caught:
            run("squeue")
        assert re.fullmatch(r"squeue timed out after 0\.\d+ s \(lrms_timeout\); its processes were killed", str(caught.value))
        child = int(record.read_text())
        # SIGKILL is delivered asynchronously: the child is gone soon after, not at once
        wait_until(lambda: not alive(child), f"squeue's child {child} ended after the query", 5)
    finally:
        if record.exists():
            try:
                os.kill(int(record.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
