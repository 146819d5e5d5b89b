"""Waiting times from the batch system's own view: how long a job submitted now waits to start.

GLUE 1.3 publishes them as GlueCEStateEstimatedResponseTime and WorstResponseTime, GLUE 2 as
ComputingShareEstimatedAverageWaitingTime and EstimatedWorstWaitingTime (seconds), per queue
and per VO share.  lcg-info-dynamic-scheduler modelled them from the queue's time limits; here
they come, in this order, from what the batch system itself says or did:

1. **free**: a CPU (slot) is free and no job is queued: (0, 0), the job starts at the next
   scheduling pass.  The plugin says so (``starts_now``).
2. **forecast**: the scheduler's own forecast start of the queued jobs (Slurm's backfill
   StartTime, ``squeue --start``; OpenPBS's ``estimated.start_time``): a job submitted now queues
   behind them, so Estimated = the mean and Worst = the largest of ``max(0, start - now)``.
3. **measured**: the waits, submit to start, of the jobs that started in the last
   :data:`RECENT_S` seconds: Estimated = their mean, Worst = the longest.
4. **model**: the plugin's drain rule on time limits (:mod:`glueinfo.lrms.response`, the
   "response-time rule" of :func:`glueinfo.lrms.commands.node_capacity`): only when the batch
   system neither forecasts nor started a job lately.
5. none of these: unknown, left out (never a placeholder such as 2146660842).

A VO's share takes the queue's basis over its own jobs (its fair share and priority are its
own): its queued jobs' forecasts when the queue's figures are forecasts, its jobs' recent waits
when they are measured; else, or with a free CPU or the model, the queue's figures
(:meth:`glueinfo.core.model.QueueState.response_times_of_vo`).  A VO whose last job started at
once while others now queue behind forecasts would otherwise be told it waits for nothing.

Everything here is a pure function of the records and the clock handed in: no batch system is
asked.  A record is ``(vo, queued, submit, start)`` (:data:`WaitRecord`): ``queued`` for a job
eligible to start (not held), whose ``start`` is the scheduler's forecast or None; otherwise a
job that started (running, suspended, or finished after it ran), whose ``start`` is when it did.
Records with an unknown time are ignored, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Optional

from glueinfo.core.job import JobInfo
from glueinfo.core.model import QueueState
from glueinfo.lrms.response import from_forecasts

# How far back the jobs that started count as "recent" (seconds): an hour of a busy queue holds
# enough starts to average, and is short enough to follow a queue that fills or empties.
RECENT_S = 3600

# The bases of an estimate (QueueState.response_basis), in the order they are tried.
FREE, FORECAST, MEASURED, MODEL = "free", "forecast", "measured", "model"

# (VO or None for a local job, queued?, submit time, start time): see the module docstring.
WaitRecord = tuple[Optional[str], bool, Optional[float], Optional[float]]


@dataclass
class Seen:
    """What the jobs of a queue, or of one VO in it, tell of waiting (seconds)."""

    forecasts: list[float] = field(default_factory=list)  # now to each queued job's forecast start
    waits: list[float] = field(default_factory=list)  # submit to start, of the jobs started lately

    def figures(self, basis: Optional[str] = None) -> Optional[tuple[int, int, str]]:
        """(Estimated, Worst, basis) by steps 2 and 3 of the module docstring, or by ``basis`` alone
        (FORECAST, MEASURED) when given; None without them."""
        if basis in (None, FORECAST):
            forecast = from_forecasts(self.forecasts)
            if forecast is not None:
                return forecast[0], forecast[1], FORECAST
        if basis in (None, MEASURED):
            measured = from_forecasts(self.waits)  # the same mean and largest, over what happened
            if measured is not None:
                return measured[0], measured[1], MEASURED
        return None


class Observed:
    """The waiting a queue's jobs tell, as a whole (``queue``) and per VO (``vos``), at ``now``.

    ``since`` = ``now - window_s``: a job that started before it is not recent.  :meth:`add` may be
    called more than once (a plugin adds the records of a second source, e.g. Slurm's accounting);
    it never raises for any record."""

    def __init__(self, now: float, window_s: float = RECENT_S) -> None:
        self.now = now
        self.since = now - window_s
        self.queue = Seen()
        self.vos: dict[str, Seen] = {}

    def add(self, records: Iterable[WaitRecord]) -> None:
        now, since, queue, vos = self.now, self.since, self.queue, self.vos
        for vo, queued, submit, start in records:
            if start is None:
                continue
            if queued:
                forecast = max(0.0, start - now)
                queue.forecasts.append(forecast)
                if vo is not None:
                    (vos.get(vo) or vos.setdefault(vo, Seen())).forecasts.append(forecast)
            elif submit is not None and since <= start <= now:
                wait = max(0.0, start - submit)
                queue.waits.append(wait)
                if vo is not None:
                    (vos.get(vo) or vos.setdefault(vo, Seen())).waits.append(wait)

    @property
    def told(self) -> bool:
        """Whether the queue's jobs gave a forecast or a recent wait (steps 2 or 3 apply)."""
        return bool(self.queue.forecasts or self.queue.waits)


def settle(state: QueueState, seen: Observed, starts_now: bool,
           model: Callable[[], tuple[Optional[int], Optional[int]]] = lambda: (None, None)) -> None:
    """Set the queue's and its VOs' waiting times in ``state`` by the order of the module
    docstring: ``estimated_response_time_s``, ``worst_response_time_s``, ``response_basis`` and
    ``vo_response_times`` (the VOs whose own jobs gave figures on the queue's basis).  ``model`` is the plugin's drain
    rule, called only when neither forecasts nor recent waits are known; it gives (None, None)
    when it cannot tell.  Never raises."""
    state.vo_response_times = {}
    if starts_now:
        state.estimated_response_time_s = state.worst_response_time_s = 0
        state.response_basis = FREE
        return
    own = seen.queue.figures()
    if own is None:
        estimated, worst = model()
        known = estimated is not None and worst is not None
        state.estimated_response_time_s, state.worst_response_time_s = (estimated, worst) if known else (None, None)
        state.response_basis = MODEL if known else None
        return
    state.estimated_response_time_s, state.worst_response_time_s, state.response_basis = own
    for vo in sorted(seen.vos):
        figures = seen.vos[vo].figures(state.response_basis)
        if figures is not None:
            state.vo_response_times[vo] = (figures[0], figures[1])


def job_records(jobs: Iterable[JobInfo]) -> Iterator[WaitRecord]:
    """The records of a plugin's JobInfos (``vo`` set by the [vos] map): a job in GLUE's SCHEDULED
    state is queued (its ``start_time`` a forecast when ``start_is_estimate``); a job with an actual
    ``start_time`` started then (running, suspended, or finished after it ran)."""
    for job in jobs:
        if job.glue_status == "SCHEDULED":
            yield job.vo, True, None, job.start_time if job.start_is_estimate else None
        elif job.start_time is not None and not job.start_is_estimate:
            yield job.vo, False, job.submit_time, job.start_time
