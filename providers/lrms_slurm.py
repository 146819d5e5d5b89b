"""LRMS plugin ``slurm``: partitions, nodes and jobs from Slurm's command-line tools.

(Being written: this first version reports the state as unknown.)
"""

from __future__ import annotations

from glueinfo.lrms import LrmsContext, LrmsPlugin, LrmsQueryError
from glueinfo.model import QueueState


def query(ctx: LrmsContext) -> QueueState:
    raise LrmsQueryError("slurm: plugin not implemented yet")


LRMS = LrmsPlugin(name="slurm", query=query, description="Slurm partition via sinfo/squeue/scontrol")
