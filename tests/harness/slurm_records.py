"""Recorded Slurm outputs (tests/fixtures/slurm/VERSION) replayed as the real tools would answer."""

from __future__ import annotations

import os
import re

from paths import FIXTURES

from glueinfo.lrms.registry import LrmsContext, queue_state

SLURM_FIXTURES = FIXTURES / "slurm"


def replay(version: str, overrides=None, calls=None):
    """A command runner answering from tests/fixtures/slurm/VERSION, as the real tools would.

    ``overrides`` maps a tool name to (returncode, stdout, stderr), to an exception to raise, or to
    a function of the arguments giving one of those or None (then the recording answers).  sinfo
    and squeue print nothing and exit 0 for a partition not recorded, as a real Slurm does for a
    partition it does not have (test_slurm_live checks that).
    """
    directory = SLURM_FIXTURES / version
    overrides = overrides or {}

    def read(name: str) -> str:
        return (directory / name).read_text()

    def run(argv, timeout, env):
        tool, args = os.path.basename(argv[0]), list(argv[1:])
        if calls is not None:
            calls.append([tool, *args])
        assert env["TZ"] == "UTC" and env["SLURM_TIME_FORMAT"] == "standard"
        if tool in overrides:
            answer = overrides[tool]
            if callable(answer) and not isinstance(answer, BaseException):
                answer = answer(args)
            if isinstance(answer, BaseException):
                raise answer
            if answer is not None:
                return answer
        if tool == "sinfo" and args == ["--version"]:
            return 0, read("sinfo_version.txt"), ""
        if tool == "scontrol" and args == ["--all", "show", "partition", "-o"]:  # every partition, one line each
            return 0, "".join(path.read_text() for path in sorted(directory.glob("scontrol_partition_*.txt"))), ""
        if tool == "scontrol":
            name = args[-1]
            if not (directory / f"scontrol_partition_{name}.txt").exists():
                return 1, "", f"Partition {name} not found\n"
            return 0, read(f"scontrol_partition_{name}.txt"), ""
        partition = args[args.index("-p") + 1] if "-p" in args else None
        if tool == "sinfo" and "--json" in args:
            if not (directory / f"sinfo_{partition}.json").exists():
                return 1, "", read("sinfo_json_unsupported.txt")
            return 0, read(f"sinfo_{partition}.json"), ""
        if tool in ("sinfo", "squeue") and not (directory / f"{tool}_{partition}.txt").exists():
            return 0, "", ""
        if tool == "sinfo":
            return 0, read(f"sinfo_{partition}.txt"), ""
        if tool == "squeue":
            fields = args[args.index("-O") + 1]
            token = re.search(r"\|([0-9a-f]+)\.$", fields).group(1)
            text = read(f"squeue_{partition}.txt")
            if "tres-per-job" not in fields:  # the counts-only form: squeue prints only the fields asked for
                text = without_gpu_fields(text)
            return 0, text.replace("|~|", f"|{token}|").replace("|~.", f"|{token}."), ""
        if tool == "sacctmgr":
            return 0, read(f"sacctmgr_qos_{args[3]}.txt"), ""
        if tool == "sacct":  # a recorded history, else what Slurm 22.05 says without accounting (the live harness's)
            partition = args[args.index("-r") + 1]
            if (directory / f"sacct_{partition}.txt").exists():
                return 0, read(f"sacct_{partition}.txt"), ""
            return 1, "", "Slurm accounting storage is disabled\n"
        raise AssertionError(f"unexpected command {argv}")

    return run


def without_gpu_fields(text: str) -> str:
    """A recorded squeue text (token "~") without tres-per-job/-node/-task, the three fields before Name,
    as squeue prints it when the plugin asks for the counts only (slurm.SQUEUE_COUNTS_FIELDS)."""
    records = text.split("|~.\n")
    kept = []
    for record in records[:-1]:
        head, name = record.rsplit("|~|", 1)
        kept.append(head.rsplit("|~|", 3)[0] + "|~|" + name)
    return "".join(record + "|~.\n" for record in kept) + records[-1]


def now_of(version: str) -> float:
    return float((SLURM_FIXTURES / version / "now").read_text())


def slurm_state(version: str, queue: str, with_jobs: bool = True, overrides=None, calls=None, vo_map=None, hosts=(),
                **cfg):
    context = LrmsContext(queue=queue, ce_config=cfg, hosts=list(hosts), clock=lambda: now_of(version), timeout_s=5.0,
                          with_jobs=with_jobs, run=replay(version, overrides, calls), **({"vo_map": vo_map} if vo_map else {}))
    return queue_state("slurm", context)


def jobs_by_id(state):
    return {job.local_id: job for job in state.jobs}


