"""Whether the batch system has a CE's queue: the one rule every LRMS plugin applies to its answers.

A plugin asks about one queue (a Slurm partition, a PBS or LSF queue, a Grid
Engine cluster queue, an HTCondor schedd).  An empty answer is not an empty
queue: a tool that printed nothing, or ``squeue -p lng`` for a partition
Slurm does not have (it prints nothing and exits 0), says nothing about the
queue.  So each plugin tells three cases apart (:func:`settle`):

1. **Some answer names the queue** (scontrol shows the partition, qstat
   lists the queue's instances, bqueues -l prints it, the collector lists the
   schedd, or a job of it is listed): its figures are the batch system's, and
   a queue without jobs has 0 jobs.
2. **Nothing names it, and the batch system's list of its queues does not
   either**: the batch system does not have it (``queue = lng`` for Slurm's
   ``long``).  Its counts and limits are left out, its status is Closed (GLUE
   1.3 GlueCEStateStatus Closed, GLUE 2 ServingState closed: it neither takes
   nor runs jobs, which every broker reads as "do not send"), and the state
   carries the queues that exist.  The registry turns that into one ERROR
   line naming ``[ce:NAME] queue`` and the closest existing name
   (:func:`missing_message`); ``glueinfo ldif`` and ``publish`` exit 1 (the
   LDIF is still printed), ``glueinfo check`` is CRITICAL.
3. **Nothing names it and no list could be read** (every tool printed
   nothing, or failed): its counts are unknown and left out, and the error
   says why.  Never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from glueinfo.core.errors import UpstreamError
from glueinfo.core.model import QueueLimits, QueueState

# GLUE's status of a queue the batch system does not have: it takes no job and runs none.
NOT_SERVING = "Closed"

# What each plugin's queue is called in its batch system's words (the ERROR line's).
QUEUE_WORDS = {"slurm": "partition", "sge": "cluster queue", "htcondor": "schedd"}

# Existing queues named in the ERROR line at most (the line is one line, cut at 300 characters).
LISTED = 12

# The figures that count the queue's jobs, CPUs and slots, or are derived from them.
COUNT_FIELDS = ("total_cpus", "free_cpus", "running_jobs", "waiting_jobs", "total_jobs", "free_job_slots",
                "estimated_response_time_s", "worst_response_time_s", "response_basis")
# The queue's own limits (and QueueState.limits): a queue that does not exist has none.
LIMIT_FIELDS = ("max_wall_clock_time_min", "max_cpu_time_min", "max_wall_clock_time_s", "max_cpu_time_s",
                "max_running_jobs", "max_total_jobs", "max_waiting_jobs", "priority")


def leave_counts_out(state: QueueState) -> None:
    """Make every count of ``state`` unknown: CPUs, jobs, slots, response times, per-VO counts,
    the queue's hosts, nodes and jobs.  Used when no answer named the queue."""
    for name in COUNT_FIELDS:
        setattr(state, name, None)
    state.vo_counts = {}
    state.vo_response_times = {}
    state.hosts = []
    state.nodes = []
    state.jobs = []
    state.waiting_shared = False


def mark_missing(state: QueueState, existing: Iterable[str]) -> None:
    """``state`` is of a queue the batch system does not have; ``existing`` are the ones it has.
    No count or limit is kept, the status is :data:`NOT_SERVING`.  Idempotent."""
    leave_counts_out(state)
    for name in LIMIT_FIELDS:
        setattr(state, name, None)
    state.limits = QueueLimits()
    state.status = NOT_SERVING
    state.queue_missing = True
    state.existing_queues = tuple(sorted(set(existing)))


def settle(state: QueueState, named: bool, listing: Callable[[], Sequence[str]], errors: list[str],
           what: str = "queue") -> None:
    """Apply the module's rule to a plugin's ``state`` once its steps are done.

    ``named``: some answer named ``state.queue``.  Otherwise ``listing()`` is asked for the
    names of the queues the batch system has (an UpstreamError such as LrmsQueryError, or an
    empty list, means it could not tell): the queue among them -> the figures stay as the steps gave them; others
    listed -> :func:`mark_missing`; none -> :func:`leave_counts_out` and a reason in ``errors``
    (first when it dropped a figure some step gave).
    ``what`` names the queue in the batch system's words (``partition``)."""
    if named:
        return
    try:
        names = list(listing())
    except UpstreamError as exc:  # LrmsQueryError: the registry's module imports this one
        errors.append(str(exc))
        names = []
    if state.queue in names:
        return
    if names:
        mark_missing(state, names)
        return
    reason = f"counts left out: no answer names {what} {state.queue!r} or lists the {what}s there are"
    if any(getattr(state, name) is not None for name in COUNT_FIELDS) or state.hosts or state.vo_counts:
        errors.insert(0, reason)  # first (the error is cut at 300 characters): figures a step gave are dropped
    else:
        errors.append(reason)  # the steps' own failures say why nothing is known
    leave_counts_out(state)


def _label(name: str) -> str:
    return name.split(".", 1)[0]


def suggestion(queue: str, existing: Sequence[str]) -> str:
    """The existing name closest to ``queue`` (difflib's ratio of at least 0.6), or ''.  Host
    names (schedds) are compared by their first label: a shared domain makes any two alike."""
    import difflib  # only for a queue that is missing: a command's start-up does not pay for it

    by_label: dict[str, str] = {}
    for name in existing:
        by_label.setdefault(_label(name).lower(), name)
    close = difflib.get_close_matches(_label(queue).lower(), list(by_label), n=1)
    return by_label[close[0]] if close else ""


def missing_message(section: str, queue: str, lrms: str, existing: Sequence[str]) -> str:
    """The one ERROR line of a queue the batch system does not have, e.g. ``[ce:grid] queue 'lng':
    slurm has no such partition; did you mean 'long'? (its partitions: debug, long)``.
    ``section`` is the CE's [ce:NAME] NAME ('' when not known); the suggestion comes before the
    list, which is cut after :data:`LISTED` names."""
    what = QUEUE_WORDS.get(lrms, "queue")
    where = f"[ce:{section}] queue {queue!r}" if section else f"queue {queue!r}"
    closest = suggestion(queue, existing)
    shown = ", ".join(existing[:LISTED]) + (f" and {len(existing) - LISTED} more" if len(existing) > LISTED else "")
    return (f"{where}: {lrms} has no such {what}" + (f"; did you mean {closest!r}?" if closest else "")
            + f" (its {what}s: {shown or 'none'})")


def missing_queues(states: Iterable[QueueState]) -> list[QueueState]:
    """The states of queues their batch system does not have (what makes ``ldif``/``publish`` exit 1)."""
    return [state for state in states if state.queue_missing]
