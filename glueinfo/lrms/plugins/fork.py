"""LRMS plugin ``fork``: a CE whose jobs are plain processes on its host(s).

There is no batch system to ask, so the state is derived from the host
snapshots behind the CE, and only what they show is published:

- TotalCPUs = sum of the hosts' logical CPUs (hardware threads);
- FreeCPUs  = sum over hosts of max(0, logical CPUs - round(1-minute load)):
  a CPU counts as free when the load average says nothing runs on it;
- Status    = Production: a fork job manager accepts jobs and starts them at once;
- WaitingJobs = 0: a fork job manager never queues;
- with ``[ce:NAME] pool_accounts`` (the accounts grid jobs run as): RunningJobs =
  TotalJobs = the sessions of those accounts' processes on this host (``ps``: a
  job's processes share its session), FreeJobSlots = TotalCPUs - RunningJobs,
  never below 0, and the per-VO counts by the ``[vos]`` map (``user:`` and
  ``group:`` rules: the session's account and its first process's group);
  without it they stay unknown: other processes are not jobs, and counting
  them would be inventing.  ``ps`` output with a line that is not
  ``USER GROUP SESSION`` (or no line at all) leaves them unknown too, with
  a one-line error: a count from output half understood would be wrong;
- no queue; response times and limits unknown.

A host whose CPU count (or load) is unknown makes the total (or the free
count) unknown rather than an undercount.
"""

from __future__ import annotations

import fnmatch
import time

from glueinfo.core.model import QueueState
from glueinfo.core.text import one_line
from glueinfo.lrms.registry import LrmsContext, LrmsPlugin, LrmsQueryError


def free_cpus_of(logical_cpus: int, load1: float) -> int:
    """CPUs the 1-minute load average leaves idle on one host."""
    return max(0, logical_cpus - int(round(load1)))


def query(ctx: LrmsContext) -> QueueState:
    state = cpu_state(ctx)
    count_jobs(ctx, state)
    return state


def cpu_state(ctx: LrmsContext) -> QueueState:
    if not ctx.hosts:
        raise LrmsQueryError("fork: no host snapshots behind this CE")
    state = QueueState(lrms_type="fork", queue=None, status="Production", collected_at=ctx.clock(),
                       hosts=[host.hostname for host in ctx.hosts])
    cpus = [h.cpu.logical_cpus if h.cpu and h.cpu.logical_cpus else None for h in ctx.hosts]
    loads = [h.load.load1 if h.load is not None else None for h in ctx.hosts]
    unknown_cpus = [h.hostname for h, n in zip(ctx.hosts, cpus, strict=True) if n is None]
    unknown_load = [h.hostname for h, load1 in zip(ctx.hosts, loads, strict=True) if load1 is None]
    known_cpus = [n for n in cpus if n is not None]
    if unknown_cpus:
        state.error = f"fork: CPU count unknown for {', '.join(unknown_cpus)}"
        return state
    state.total_cpus = sum(known_cpus)
    if unknown_load:
        state.error = f"fork: load average unknown for {', '.join(unknown_load)}"
        return state
    state.free_cpus = sum(free_cpus_of(n, load1) for n, load1 in zip(known_cpus, loads, strict=True) if load1 is not None)
    return state


def count_jobs(ctx: LrmsContext, state: QueueState) -> None:
    """Waiting 0; running, total, free slots and per-VO counts from the pool accounts' sessions
    (module docstring).  A ``ps`` that fails or prints what :func:`pool_sessions` cannot read leaves
    them unknown and adds its reason to ``state.error``."""
    state.waiting_jobs = 0
    patterns = [str(p) for p in ctx.ce_config.get("pool_accounts") or ()]
    if not patterns:
        return
    from glueinfo.lrms import commands  # the bounded runner: only when there are jobs to count

    tools = commands.tools_for(ctx, "", commands.environment(), time.monotonic() + ctx.timeout_s)
    try:
        sessions = pool_sessions(tools("ps", "-e", "-o", "user:64=,group:64=,sess="), patterns)
    except LrmsQueryError as exc:
        state.error = "; ".join(filter(None, [state.error, f"fork: {exc}"]))
        return
    state.running_jobs = state.total_jobs = len(sessions)
    if state.total_cpus is not None:
        state.free_job_slots = max(0, state.total_cpus - len(sessions))
    state.vo_counts = commands.vo_counts(ctx.vo_map, [(user, group, None, None, "RUNNING")
                                                      for (user, _), group in sessions.items()])


def pool_sessions(text: str, patterns: list[str]) -> dict[tuple[str, str], str]:
    """``ps -e -o user:64=,group:64=,sess=`` -> {(user, session): group of its first process} for
    the users matching ``patterns``.  LrmsQueryError naming the first line that is not
    ``USER GROUP SESSION``, or when there is no line (``ps`` lists at least itself)."""
    sessions: dict[tuple[str, str], str] = {}
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise LrmsQueryError("ps: empty output")
    for line in lines:
        parts = line.split()
        if len(parts) != 3 or not parts[2].isdigit():
            raise LrmsQueryError(f"ps: unexpected line {one_line(line, 120)!r}")
        user, group, session = parts
        if any(fnmatch.fnmatchcase(user, p) for p in patterns):
            sessions.setdefault((user, session), group)
    return sessions


LRMS = LrmsPlugin(name="fork", query=query, owner_kinds=("user", "group"),  # the pool account and its group
                  description="processes on the CE host(s); state from host CPU count and load")
