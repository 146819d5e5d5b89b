"""GLUE figures every batch plugin derives by the same rule (each written once, here).

Each plugin reads its own batch system; what it makes of the readings is the
same for all of them: which GLUE job states are finished, how a time limit in
seconds becomes GLUE 1.3's minutes, and how many job slots a new job can
still get (GlueCEStateFreeJobSlots).  docs/batch-systems.md gives the rules
to site admins.
"""

from __future__ import annotations

from typing import Optional, overload

# GLUE 1.3 job states (GlueCEStateStatus of a job) of a job that has ended: not counted in
# Running, Waiting or TotalJobs, nor in any VO's counts.
FINISHED_STATES = frozenset({"DONE", "CLEARED", "ABORTED"})


def glue_minutes(seconds: Optional[int]) -> Optional[int]:
    """A time limit in seconds as GLUE 1.3 publishes it, in whole minutes (MaxWallClockTime,
    MaxCPUTime).

    Rounded down, so the published limit is never longer than the batch system's; but a
    positive limit is at least 1 minute (a limit under a minute is not "no time at all").
    A limit of 0 seconds is 0; None (no limit, or not known) stays None."""
    if seconds is None:
        return None
    if seconds <= 0:
        return 0
    return max(1, seconds // 60)


@overload
def within_limit(free: int, limit: Optional[int], held: int) -> int: ...
@overload
def within_limit(free: Optional[int], limit: Optional[int], held: Optional[int]) -> Optional[int]: ...
def within_limit(free: Optional[int], limit: Optional[int], held: Optional[int]) -> Optional[int]:
    """``free`` at most what ``limit`` leaves after ``held`` (never below 0): the one rule for every
    cap a queue's own limits put on what the batch system has free (a running-job limit, Slurm's
    MaxCPUsPerNode, LSF's MAX and JL/H, OpenPBS's queue ncpus, Grid Engine's slots consumables).
    ``free`` itself when there is no limit (None); None when ``free`` is unknown, or when a limit is
    known and what it holds is not (the cap could be anything from 0 to the limit: nothing is
    invented)."""
    if free is None:
        return None
    if limit is None:
        return free
    if held is None:
        return None
    return min(free, max(0, limit - held))


def free_job_slots(status: Optional[str], free: Optional[int], max_running_jobs: Optional[int],
                   running_jobs: Optional[int]) -> Optional[int]:
    """GLUE 1.3 GlueCEStateFreeJobSlots: the job slots a new job could still get in this queue.

    - ``status`` (the queue's GLUE status) unknown: unknown (None);
    - a queue that is not Production (Queueing, Draining, Closed) starts no new job: 0;
    - otherwise ``free`` (what the batch system would give a job now: free CPUs or slots of
      the queue's usable nodes, as the plugin counts them), capped by ``max_running_jobs -
      running_jobs`` when the queue has a running-job limit (never below 0);
    - None when a figure needed is unknown: ``free``, or ``running_jobs`` under a known limit
      (the cap could be anything from 0 to the limit: nothing is invented).

    ``max_running_jobs`` None means the queue has no known running-job limit: no cap."""
    if status is None:
        return None
    if status != "Production":
        return 0
    return within_limit(None if free is None else max(0, free), max_running_jobs, running_jobs)
