"""The drain model every batch plugin falls back on for response times (one rule, written once).

A job submitted now waits for the first running job to reach its time limit
(nothing when a CPU or slot is free), then for the waiting jobs' CPU time
(CPUs x time limit) to drain through the queue's usable CPUs.  Each plugin
says which jobs run and wait, what a job's limit is (its own, else the
queue's), and how it turns the figures into GLUE's Estimated and Worst
response times (docs/batch-systems.md and docs/lrms/ give each rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Drain:
    """Seconds: ``first``/``last`` the shortest/longest time a running job still has to its limit
    (0 when a CPU is free), ``spread`` the waiting jobs' CPU time over the usable CPUs."""

    first: float
    last: float
    spread: float


def drain(running_left: Iterable[Optional[float]], waiting: Iterable[tuple[int, Optional[float]]], usable: int,
          free: bool) -> Optional[Drain]:
    """The drain figures, or None when they cannot be known: a time limit needed is unknown
    (None in either list), no CPU is usable, or no CPU is free and no running job of the queue
    holds one (the CPUs are busy with other queues' jobs: nothing here to go by).

    ``running_left``: each running job's time to its limit; ``waiting``: (CPUs, time limit) of
    each job a new one would queue behind."""
    if usable <= 0:
        return None
    first = last = 0.0
    if not free:
        remaining = []
        for left in running_left:
            if left is None:
                return None
            remaining.append(max(0.0, float(left)))
        if not remaining:
            return None
        first, last = min(remaining), max(remaining)
    work = 0.0
    for cpus, limit in waiting:
        if limit is None:
            return None
        work += cpus * limit
    return Drain(first, last, work / usable)


def from_forecasts(waits: Sequence[float]) -> Optional[tuple[int, int]]:
    """(Estimated, Worst) from the scheduler's own forecast waits of the queued jobs (a new job
    queues behind them): their mean and the largest; None without any forecast."""
    if not waits:
        return None
    return int(round(sum(waits) / len(waits))), int(round(max(waits)))


def halved(figures: Optional[Drain]) -> tuple[Optional[int], Optional[int]]:
    """(Estimated, Worst) by the plain drain rule: Worst = first + spread, Estimated = Worst / 2
    (jobs end before their limits; the half is a rule, not a measurement)."""
    if figures is None:
        return None, None
    worst = figures.first + figures.spread
    return int(round(worst / 2)), int(round(worst))
