"""One batch job as the LRMS reports it: the model behind GLUE CE Job counts, SSS Job XML and Haizea workloads.

Kept apart from the host model (glueinfo.core.model, which re-exports it) because the
LRMS plugins, the SSS Job writer and the Haizea workload are its only readers.
Every field that may be unknown is Optional and stays None when unknown.
"""

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class JobInfo:
    """One batch job as the LRMS reports it (GLUE CE Job / SSS Job object)."""

    local_id: str = ""
    name: Optional[str] = None
    local_owner: Optional[str] = None  # local user name
    global_owner: Optional[str] = None  # GSI subject, when the LRMS knows it
    account: Optional[str] = None  # project / account
    queue: Optional[str] = None  # partition / queue
    lrms_state: Optional[str] = None  # the LRMS's own word, e.g. PENDING
    sss_state: Optional[str] = None  # Idle, Hold, Running, Suspended, Completed
    glue_status: Optional[str] = None  # SUBMITTED, WAITING, READY, SCHEDULED, RUNNING, ABORTED, DONE, CLEARED, CHECKPOINTED
    submit_time: Optional[float] = None  # Unix time
    start_time: Optional[float] = None  # actual, or the LRMS's expected start for pending jobs
    start_is_estimate: bool = False
    end_time: Optional[float] = None
    requested_processors: Optional[int] = None
    requested_memory_mb: Optional[int] = None
    requested_duration_s: Optional[int] = None  # time limit
    requested_nodes: Optional[int] = None
    delivered_processors: Optional[int] = None
    delivered_wall_s: Optional[int] = None
    nodes: list[str] = field(default_factory=list)
    scheduler_specific: Optional[str] = None  # e.g. the LRMS's pending reason
    local_group: Optional[str] = None  # the owner's Unix group, when the LRMS says
    proxy_vo: Optional[str] = None  # the VO of the job's proxy, when the LRMS knows it (HTCondor x509userproxyvoname)
    vo: Optional[str] = None  # the VO the site's [vos] map gives it (glueinfo.lrms.vo_map); None: a local job
