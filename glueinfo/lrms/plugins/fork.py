"""LRMS plugin ``fork``: a CE whose jobs are plain processes on its host(s).

There is no batch system to ask, so the state is derived from the host
snapshots behind the CE, and only what they show is published:

- TotalCPUs = sum of the hosts' logical CPUs (hardware threads);
- FreeCPUs  = sum over hosts of max(0, logical CPUs - round(1-minute load)):
  a CPU counts as free when the load average says nothing runs on it;
- Status    = Production: a fork job manager accepts jobs and starts them at once;
- no queue, and running/waiting jobs, response times and limits unknown
  (None): processes are not jobs, and counting them would be inventing.

A host whose CPU count (or load) is unknown makes the total (or the free
count) unknown rather than an undercount.
"""

from __future__ import annotations

from glueinfo.core.model import QueueState
from glueinfo.lrms.registry import LrmsContext, LrmsPlugin, LrmsQueryError


def free_cpus_of(logical_cpus: int, load1: float) -> int:
    """CPUs the 1-minute load average leaves idle on one host."""
    return max(0, logical_cpus - int(round(load1)))


def query(ctx: LrmsContext) -> QueueState:
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


LRMS = LrmsPlugin(name="fork", query=query, description="processes on the CE host(s); state from host CPU count and load")
