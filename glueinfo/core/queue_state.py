"""The batch-system side of the model: a CE queue's state as its LRMS plugin reports it.

:class:`QueueState` (with :class:`QueueLimits`, :class:`QueueAccelerators`, the per-VO
:class:`VoJobCounts` and the scheduler's :class:`NodeAllocation` of each node) is what an LRMS
plugin returns; unknown stays None, as in the host model.  It lives apart from the snapshot model
(glueinfo.core.model, which still gives these names) so that a command that only probes this host
never makes these classes: a fresh `glueinfo probe` is mostly imports, and making them and the
JobInfo they hold was a twentieth of it.

As in glueinfo.core.model, the annotations are evaluated when the classes are made (no ``from
__future__ import annotations``): the model's JSON reader and dumper take each field's type as it is.
``jobs`` alone is named by a string, so that a queue's state without jobs does not import
glueinfo.core.job.
"""

from dataclasses import field
from typing import TYPE_CHECKING, Optional

from glueinfo.core.records import dataclass

if TYPE_CHECKING:  # QueueState holds jobs; only a batch system's plugin makes them (it imports glueinfo.core.job)
    from glueinfo.core.job import JobInfo


@dataclass
class VoJobCounts:
    """One VO's jobs in a queue (GLUE 1.3 VOView, GLUE 2 ComputingShare)."""

    running: int = 0
    waiting: int = 0
    total: int = 0  # running + waiting + held/suspended, as the queue's TotalJobs counts


@dataclass
class NodeAllocation:
    """One node as the batch system sees it: the scheduler's view, not the load's."""

    name: str = ""  # as the LRMS names it (often the short host name)
    state: Optional[str] = None  # SSS Node State: Idle, Busy, Offline, Unknown (see docs/batch-systems.md)
    lrms_state: Optional[str] = None  # the LRMS's own word(s), e.g. "mixed+drain"
    total_cpus: Optional[int] = None
    allocated_cpus: Optional[int] = None
    # CPUs a new job could be given now, when the batch system holds some neither allocated nor free
    # (LSF's reserved slots, HTCondor's Owner slots); None: total - allocated.  Node XML publishes
    # them as Available only on an Idle node, as the CE's FreeCPUs counts them.
    free_cpus: Optional[int] = None
    reason: Optional[str] = None  # why it is offline, when the LRMS says


@dataclass(frozen=True)
class QueueLimits:
    """What the batch system lets one job of a queue have, beyond QueueState's maximum times and job
    counts; None: not stated, unlimited or not known (left out, never a large number).

    Per slot, as GLUE 2 counts a job's times (docs/batch-systems.md "Limits from the batch system"):
    a memory figure is what one slot of a job may use (max) or is set aside for it when it asks for
    nothing (guaranteed); a batch system's per-node or per-job figure is what a one-slot job gets.
    Times in seconds, memory in MB (2**20 bytes), rounded down so nothing is promised that the
    batch system does not give."""

    default_wall_clock_time_s: Optional[int] = None  # a job that asks for no time limit gets this
    default_cpu_time_s: Optional[int] = None
    max_slots_per_job: Optional[int] = None  # CPUs (slots) one job can be given
    max_main_memory_mb: Optional[int] = None
    guaranteed_main_memory_mb: Optional[int] = None
    max_virtual_memory_mb: Optional[int] = None
    guaranteed_virtual_memory_mb: Optional[int] = None


@dataclass(frozen=True)
class QueueAccelerators:
    """A queue's accelerators of one type and model as its batch system counts them (Slurm GRES
    ``gpu:a100:4``, HTCondor's GPUs, PBS's ngpus ...): GLUE 2.1 ComputingManagerAccelerator /
    ComputingShareAccelerator.  None: the batch system does not say."""

    type: str = "GPU"
    model: Optional[str] = None  # the batch system's name for them (a GRES type, a device name); None: untyped
    total: Optional[int] = None
    used: Optional[int] = None
    free: Optional[int] = None  # what a new job can get now
    max_per_job: Optional[int] = None


@dataclass
class QueueState:
    """A CE queue's state as its LRMS plugin reports it; None means unknown."""

    lrms_type: str = ""
    lrms_version: Optional[str] = None
    queue: Optional[str] = None
    status: Optional[str] = None  # GLUE: Queueing, Production, Closed, Draining
    total_cpus: Optional[int] = None
    free_cpus: Optional[int] = None
    running_jobs: Optional[int] = None
    waiting_jobs: Optional[int] = None
    total_jobs: Optional[int] = None
    free_job_slots: Optional[int] = None
    # The job owners this answer told ([vos] rule kinds: user, group, account) when fewer than its
    # plugin's owner_kinds (LSF's plain bjobs has no group or project); None: all of those.
    owner_kinds: Optional[tuple[str, ...]] = None
    # A waiting job counted here may be counted by another queue of the same batch system too (a Grid
    # Engine job that requested no queue, or several; a Slurm job submitted to several partitions):
    # a sum of queues' waiting jobs would overcount.
    waiting_shared: bool = False
    # Seconds a job submitted now waits to start (GLUE 1.3 Estimated/WorstResponseTime, GLUE 2
    # EstimatedAverage/WorstWaitingTime), and how they were made (glueinfo.lrms.waiting: free,
    # forecast, measured or model); per VO, (estimated, worst) of the VOs whose own jobs told.
    estimated_response_time_s: Optional[int] = None
    worst_response_time_s: Optional[int] = None
    response_basis: Optional[str] = None
    vo_response_times: dict[str, tuple[int, int]] = field(default_factory=dict)
    max_wall_clock_time_min: Optional[int] = None
    max_cpu_time_min: Optional[int] = None
    # The same limits in seconds when the batch system gives seconds (Grid Engine's s_rt 172000 is
    # 172000 s, 2866 min rounded down): GLUE 2 publishes seconds, GLUE 1.3 the minutes above.
    max_wall_clock_time_s: Optional[int] = None
    max_cpu_time_s: Optional[int] = None
    max_running_jobs: Optional[int] = None
    max_total_jobs: Optional[int] = None
    max_waiting_jobs: Optional[int] = None
    priority: Optional[int] = None
    accelerators: tuple[QueueAccelerators, ...] = ()  # empty: none known (not: known to have none)
    limits: QueueLimits = QueueLimits()  # the other limits a job has here (frozen: one shared default)
    hosts: list[str] = field(default_factory=list)  # nodes that serve the queue
    jobs: "list[JobInfo]" = field(default_factory=list)  # named, not imported: a fork CE or counts alone make none
    vo_counts: dict[str, VoJobCounts] = field(default_factory=dict)  # VO -> its jobs; mapped jobs only
    nodes: list[NodeAllocation] = field(default_factory=list)  # the scheduler's view of the queue's nodes
    collected_at: float = 0.0
    error: Optional[str] = None  # why the state is (partly) unknown
    # The batch system answered and has no queue called ``queue`` (a mistyped [ce:NAME] queue); then
    # ``existing_queues`` are the ones it has, no count is known and the status is Closed
    # (glueinfo.lrms.queues).
    queue_missing: bool = False
    existing_queues: tuple[str, ...] = ()

    def response_times_of_vo(self, vo: str) -> tuple[Optional[int], Optional[int]]:
        """(Estimated, Worst) waiting seconds of the VO's share: from its own jobs when they told
        (``vo_response_times``), else the queue's (a job of any VO queues there); None: unknown."""
        return self.vo_response_times.get(vo) or (self.estimated_response_time_s, self.worst_response_time_s)

    def counts_of_vo(self, vo: str) -> Optional[VoJobCounts]:
        """The VO's jobs in this queue (GLUE 1.3 VOView, GLUE 2 ComputingShare), or None when unknown:
        the queue's jobs were not counted, or nothing could have given a job that VO (no ``[vos]``
        rule the batch system can match names it, and no job of it was seen), where a 0 would be a
        guess.  glueinfo.lrms.registry lists every VO the map can give, with 0 jobs, so a VO missing
        here is one nothing counts."""
        return self.vo_counts.get(vo) if self.total_jobs is not None else None
