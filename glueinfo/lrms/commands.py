"""Running a batch system's commands for one CE: the one way every LRMS plugin does it.

:class:`Tools` calls ``[*prefix, bin_dir/TOOL, *args]`` (``[ce:NAME]
lrms_command_prefix``, e.g. ``ssh slurm-head``; the plugin's ``*_bin_dir``)
with the plugin's environment, within what is left of the query's deadline,
and returns stdout.  Each command runs bounded (``glueinfo.core.bounded_run``):
in a process group of its own that is killed whole when it ends, times out or
prints more than ``[ce:NAME] lrms_max_output_bytes`` (default per batch system:
:data:`MAX_OUTPUT_DEFAULTS`), so no child of a tool outlives the query and no
tool's output outgrows its cap.  Through an ``ssh`` prefix, which hands the remote shell
one command line and none of this process's environment, the command goes as
one shell-quoted ``env NAME=value... TOOL ARGS`` with the variables the plugin
set (``TZ=UTC`` above all: the head node's local time would be read as UTC),
and the arguments reach the tool as they were given (a ``|`` in squeue's
format is no pipe there).  Every failure is an :class:`LrmsQueryError` whose one
line names the tool and what went wrong (not found, permission, timed out,
output past its cap or not text, non-zero exit with the first line of stderr), which the registry publishes
as the CE's error while the rest of the site goes on.  ``run`` is replaced by
tests and benchmarks with recorded outputs.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.bounded_run import MIB, CommandTimedOut, NotText, OutputTooLarge, decode_text, run_bounded, size_text
from glueinfo.core.job import JobInfo
from glueinfo.core.model import NodeAllocation, QueueState, VoJobCounts, new_job_cpus
from glueinfo.core.text import one_line
from glueinfo.lrms.registry import LrmsContext, LrmsQueryError
from glueinfo.lrms.vo_map import VoMap, count_by_vo

# (user, group, account, proxy VO, GLUE status): what the [vos] map and the per-VO counts read of a job.
JobOwners = tuple[Optional[str], Optional[str], Optional[str], Optional[str], Optional[str]]
# The same, then the job's token: (..., GLUE status, token issuer, token groups), for [vos] issuer: and
# token_group: rules (a plugin that reads tokens, as HTCondor does from HTCondor-CE's jobs).
TokenJobOwners = tuple[Optional[str], Optional[str], Optional[str], Optional[str], Optional[str], Optional[str],
                       tuple[str, ...]]

Runner = Callable[[Sequence[str], float, Mapping[str, str]], tuple[int, str, str]]


# The default of [ce:NAME] lrms_max_output_bytes: the bytes one command of a batch system may print
# on stdout, sized for a queue of 100,000 jobs.  Keyed by the [ce:NAME] key of the plugin's tools'
# directory (what tools_for is given; "" is fork's ps).  Each figure is the largest record its
# plugin reads (bytes per job, per node or per process, measured on tests/fixtures/<lrms>/ and on
# the benchmarks' generated outputs) times 100,000, with room to spare, and stays under 200 MB so
# that a tool printing garbage is stopped before a refresh holds more than about 200 MB of it.
# docs/batch-systems.md tables them with the estimates.
MAX_OUTPUT_DEFAULTS: Mapping[str, int] = {
    "": 32 * MIB,                 # ps -e -o user,group,sess: ~140 B per process
    "slurm_bin_dir": 64 * MIB,    # squeue -O: ~280-310 B per job
    "condor_bin_dir": 96 * MIB,   # condor_q -json: ~460-560 B per job (three commands run at once)
    "lsf_bin_dir": 128 * MIB,     # bjobs -json: ~500-580 B per job
    "sge_bin_dir": 176 * MIB,     # qstat -xml -f -r -ext: ~1.0-1.3 kB per job
    "pbs_bin_dir": 176 * MIB,     # qstat -f -F json / -x: ~1.2-1.4 kB per job (2.1 kB with long Variable_Lists)
}
# A third-party plugin's commands.
MAX_OUTPUT_OTHER = 64 * MIB


def max_output(ce_config: Mapping[str, Any], bin_dir_key: str) -> int:
    """The stdout cap of this CE's commands: ``[ce:NAME] lrms_max_output_bytes``, else the batch
    system's default (:data:`MAX_OUTPUT_DEFAULTS`, by the key of its tools' directory)."""
    value = ce_config.get("lrms_max_output_bytes")
    return int(value) if value else MAX_OUTPUT_DEFAULTS.get(bin_dir_key, MAX_OUTPUT_OTHER)


def subprocess_runner(argv: Sequence[str], timeout_s: float, env: Mapping[str, str],
                      max_output: int = MAX_OUTPUT_OTHER) -> tuple[int, str, str]:
    """Run one command bounded (glueinfo.core.bounded_run.run_bounded: its own process group, killed
    whole at its end, ``timeout_s``, ``max_output`` bytes of stdout) and give (exit code, stdout,
    stderr) as text.  Raises what run_bounded and decode_text raise, which Tools.call reports."""
    done = run_bounded(argv, timeout_s, max_output, env)
    out = decode_text(done.stdout, str(argv[0]))
    done.stdout.clear()  # the bytes go as soon as they are text: one copy of the output at a time
    return done.returncode, out, done.stderr.decode("utf-8", "replace")


@dataclass
class Tools:
    """How to call one batch system's commands for one CE: directory, prefix, environment, deadline."""

    bin_dir: str = ""
    prefix: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # the whole environment the commands get
    settings: Mapping[str, str] = field(default_factory=dict)  # what the plugin set in it: sent through ssh
    deadline: float = 0.0  # time.monotonic() value
    run: Runner = subprocess_runner
    ok_codes: Sequence[int] = (0,)

    def __call__(self, tool: str, *args: str) -> str:
        return self.call(tool, *args)[1]

    def call(self, tool: str, *args: str, ok_codes: Sequence[int] = ()) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of a run whose exit code is one of ``ok_codes`` (default: this
        Tools' ok_codes); LrmsQueryError otherwise."""
        program = os.path.join(self.bin_dir, tool) if self.bin_dir else tool
        if self.prefix and os.path.basename(self.prefix[0]) == "ssh":
            # ssh joins its words into one line for the remote shell and sends no environment
            remote = ["env", *(f"{name}={value}" for name, value in self.settings.items()), program, *args]
            argv = [*self.prefix, shlex.join(remote)]
        else:
            argv = [*self.prefix, program, *args]
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise LrmsQueryError(f"{tool}: not run, the query's time was used up")
        try:
            code, out, err = self.run(argv, left, self.env)
        except FileNotFoundError:
            raise LrmsQueryError(f"{argv[0]}: command not found") from None
        except PermissionError:
            raise LrmsQueryError(f"{argv[0]}: permission denied") from None
        except (subprocess.TimeoutExpired, CommandTimedOut):
            raise LrmsQueryError(f"{tool} timed out after {left:.3g} s (lrms_timeout); its processes were killed") from None
        except OutputTooLarge as exc:
            raise LrmsQueryError(f"{tool}: output passed the {size_text(exc.limit)} cap (lrms_max_output_bytes); "
                                 "nothing published from it") from None
        except NotText:
            raise LrmsQueryError(f"{tool}: output is not text (not UTF-8); nothing published from it") from None
        except OSError as exc:
            raise LrmsQueryError(f"{argv[0]}: cannot run: {exc.strerror or exc}") from None
        if code not in (ok_codes or self.ok_codes):
            message = next((line for line in err.splitlines() if line.strip()), "") or one_line(out, 120)
            raise LrmsQueryError(f"{tool} {' '.join(args[:3])} exited {code}: {one_line(message, 120)}")
        return code, out, err


def command_prefix(ce_config: Mapping[str, Any]) -> tuple[str, ...]:
    prefix = ce_config.get("lrms_command_prefix") or ()
    return tuple(prefix.split()) if isinstance(prefix, str) else tuple(prefix)


def tools_for(ctx: LrmsContext, bin_dir_key: str, env: Environment, deadline: float) -> Tools:
    """Tools for this CE: ``[ce:NAME] <bin_dir_key>``, ``lrms_command_prefix`` and
    ``lrms_max_output_bytes`` (default by ``bin_dir_key``: :func:`max_output`), the plugin's
    environment, and the context's runner (tests) or the bounded subprocess runner."""
    run = ctx.run or functools.partial(subprocess_runner, max_output=max_output(ctx.ce_config, bin_dir_key))
    return Tools(bin_dir=str(ctx.ce_config.get(bin_dir_key) or ""), prefix=command_prefix(ctx.ce_config), env=dict(env),
                 settings=env.settings, deadline=deadline, run=run)


class Environment(dict[str, str]):
    """A command environment, and (``settings``) the variables the plugin set in it, which an ssh
    prefix sends on (:class:`Tools`)."""

    def __init__(self, base: Mapping[str, str], settings: Mapping[str, str]) -> None:
        super().__init__(base)
        self.update(settings)
        self.settings = dict(settings)


def environment(drop_prefixes: Sequence[str] = (), drop: Sequence[str] = (), **values: str) -> Environment:
    """This process's environment without variables that change a tool's output format, with
    ``TZ=UTC``, ``LC_ALL=C`` and ``values`` set (empty values are left out): what a plugin hands its
    commands."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(tuple(drop_prefixes)) and k not in drop}
    return Environment(base, {"TZ": "UTC", "LC_ALL": "C", **{k: v for k, v in values.items() if v}})


def vo_counts(vo_map: VoMap, jobs: Iterable[JobOwners | TokenJobOwners]) -> dict[str, VoJobCounts]:
    """Per-VO counts of jobs given as (user, group, account, proxy VO, GLUE status) tuples, or those
    followed by the token's (issuer, groups): exactly what ``vo_map.assign`` then ``count_by_vo``
    give for JobInfos with those fields, without making a JobInfo per job (the counts-only refresh
    of 50,000 jobs).  Never raises for any tuple."""
    counts: dict[str, VoJobCounts] = {}
    # Thousands of jobs share a few owners and states: apply the map and the counting rules once per
    # distinct tuple (through the same functions as per job) and scale by how often it occurs.
    for owners, times in Counter(jobs).items():
        user, group, account, proxy_vo, status = owners[:5]
        issuer, groups = (owners[5], owners[6]) if len(owners) == 7 else (None, ())
        one = JobInfo(local_owner=user, local_group=group, account=account, proxy_vo=proxy_vo, glue_status=status,
                      token_issuer=issuer, token_groups=groups)
        vo_map.assign([one])
        for vo, seen in count_by_vo([one]).items():
            entry = counts.setdefault(vo, VoJobCounts())
            entry.running += seen.running * times
            entry.waiting += seen.waiting * times
            entry.total += seen.total * times
    return dict(sorted(counts.items()))


def assign_vos(vo_map: VoMap, jobs: Iterable[JobInfo]) -> None:
    """``vo_map.assign(jobs)`` with the map applied once per distinct (user, group, account, proxy VO,
    token issuer, token groups) rather than once per job (its rules are pure functions of those)."""
    seen: dict[tuple[Optional[str], Optional[str], Optional[str], Optional[str], Optional[str], tuple[str, ...]],
               Optional[str]] = {}
    for job in jobs:
        key = (job.local_owner, job.local_group, job.account, job.proxy_vo, job.token_issuer, job.token_groups)
        try:
            job.vo = seen[key]
        except KeyError:
            job.vo = seen[key] = vo_map.vo_of(user=key[0], group=key[1], account=key[2], proxy_vo=key[3],
                                              token_issuer=key[4], token_groups=key[5])





class Steps:
    """The steps of one query that may fail alone.  ``steps(lambda: ...)`` runs one and gives its
    value, or None when it raised LrmsQueryError (its figures stay unknown, its message is kept);
    ``steps.note(text)`` keeps another reason; ``steps.error(prefix)`` is the state's one-line
    error (each reason once, in order), or None when every step went well."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, what: Callable[[], Any]) -> Any:
        try:
            return what()
        except LrmsQueryError as exc:
            self.errors.append(str(exc))
            return None

    def note(self, reason: str) -> None:
        self.errors.append(reason)

    def error(self, prefix: str) -> Optional[str]:
        return f"{prefix}: " + "; ".join(dict.fromkeys(self.errors)) if self.errors else None


def node_capacity(state: QueueState, allocations: Sequence[NodeAllocation]) -> Optional[int]:
    """TotalCPUs and FreeCPUs from the scheduler's view of each node, by one rule for every batch
    system that lists its nodes so: TotalCPUs counts every node, FreeCPUs what a new job can get on
    the Idle nodes only (``free_cpus``, else the unallocated CPUs: what Node XML publishes as
    Available; a Busy node has none to give, an Offline or Unknown one runs nothing).  Returns the
    usable CPUs (those of Idle and Busy nodes: what the response-time rule spreads the waiting work
    over); None, leaving both figures unknown, when a node's CPU count is."""
    totals = [a.total_cpus for a in allocations]
    if None in totals:
        return None
    state.total_cpus = sum(total or 0 for total in totals)
    in_use = [a for a in allocations if a.state in ("Idle", "Busy")]
    state.free_cpus = sum(new_job_cpus(a.state, a.total_cpus or 0, a.allocated_cpus or 0, a.free_cpus) for a in in_use)
    return sum(a.total_cpus or 0 for a in in_use)


def count_jobs(state: QueueState, jobs: Sequence[Any]) -> list[Any]:
    """Running/Waiting/TotalJobs from the batch system's job records (each with ``finished`` and
    ``running``): finished jobs are not counted, and every other job that does not run waits (held
    and suspended ones too, as TotalJobs counts them).  Returns the records counted."""
    active = [j for j in jobs if not j.finished]
    state.running_jobs = sum(1 for j in active if j.running)
    state.total_jobs = len(active)
    state.waiting_jobs = state.total_jobs - state.running_jobs
    return active
