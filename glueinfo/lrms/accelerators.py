"""A queue's accelerators from its nodes, by one rule for every batch system (QueueState.accelerators).

Each LRMS plugin reads, per node of the queue, how many accelerators of each model the batch
system gives it and how many of them jobs hold (Slurm's Gres/GresUsed, HTCondor's GPUs, PBS's
ngpus, a Grid Engine consumable, LSF's ngpus); what a queue publishes from those readings is the
same for all of them (docs/lrms/accelerators.md):

- total: every accelerator of the queue's nodes, whatever the node's state (as TotalCPUs
  counts every CPU);
- used: those jobs hold now;
- free: what a new job can get now: the unused accelerators of the nodes a new job can start
  on (NodeAllocation state Idle: a node whose CPUs are all taken, or that is offline, gives
  none, as FreeCPUs counts them);
- max_per_job: what one job can be given: the accelerators of the queue's ``max_nodes``
  largest nodes of that model (every node when the queue sets no node limit; on a node, what
  one job can have there when less than all of them: an HTCondor slot's), within a per-job
  cap the batch system states.

A figure a node does not tell (its used count unknown) leaves the queue's figure unknown, never
0.  Pure functions: no command is run here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional

from glueinfo.core.model import QueueAccelerators


@dataclass(frozen=True, slots=True)
class NodeAccelerators:
    """One node's accelerators of one model as its batch system tells them."""

    model: Optional[str]  # the batch system's name for them (a GRES type, a device name); None: untyped
    total: int
    used: Optional[int]  # None: not told
    can_start: bool  # a new job can start on the node now (its NodeAllocation state is Idle)
    type: str = "GPU"
    largest: Optional[int] = None  # the most one job can be given there (HTCondor: one slot's); None: all


def queue_accelerators(nodes: Iterable[NodeAccelerators], max_nodes: Optional[int] = None,
                       max_per_job: Optional[int] = None) -> tuple[QueueAccelerators, ...]:
    """The queue's accelerators per (type, model), in the order the models were first seen.

    ``max_nodes``: the most nodes one job may have (None: no limit); ``max_per_job``: a cap on the
    accelerators of one job the batch system states (None: none).  A model whose nodes all have
    none (total 0) is left out: a queue publishes the accelerators it has."""
    groups: dict[tuple[str, Optional[str]], list[NodeAccelerators]] = {}
    for node in nodes:
        groups.setdefault((node.type, node.model), []).append(node)
    result = []
    for (kind, model), members in groups.items():
        total = sum(n.total for n in members)
        if total <= 0:
            continue
        told = all(n.used is not None for n in members)
        used = sum(n.used or 0 for n in members) if told else None
        free = sum(max(0, n.total - (n.used or 0)) for n in members if n.can_start) if told else None
        sizes = sorted((n.total if n.largest is None else min(n.largest, n.total) for n in members), reverse=True)
        largest = sum(sizes[:max_nodes] if max_nodes is not None else sizes)
        per_job = min(largest, max_per_job) if max_per_job is not None else largest
        result.append(QueueAccelerators(type=kind, model=model, total=total, used=used, free=free,
                                        max_per_job=per_job or None))
    return tuple(result)
