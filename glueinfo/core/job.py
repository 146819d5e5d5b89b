"""One batch job as the LRMS reports it: the model behind GLUE CE Job counts, SSS Job XML and Haizea workloads.

Kept apart from the host model (glueinfo.core.model, which re-exports it) because the
LRMS plugins, the SSS Job writer and the Haizea workload are its only readers.
Every field that may be unknown is Optional and stays None when unknown; the
sequences default to an empty tuple (no per-job allocation: plugins make 50,000
of these per refresh).

Some fields can hold what a site may not want to show to anyone who asks
(``arguments``, ``working_directory``, ``environment``: secrets, private
paths).  They are read and published only when the admin names them in
``[jobs] private_fields``: the command or daemon that lists jobs for SSS Job
XML hands that choice to the LRMS plugins in each CE's options
(:data:`PRIVATE_FIELDS_OPTION`, see :func:`private_fields`), so nothing is
paid for them otherwise, and to the renderer, which writes no other.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import field
from typing import Optional, Union

from glueinfo.core.records import dataclass

# How a finished job ended (JobInfo.completion): it succeeded, it failed (by itself, or its
# resources did: time or memory limit, node failure), or someone stopped it (deleted, preempted).
COMPLETIONS = ("success", "failed", "cancelled")

# The JobInfo fields that can hold secrets or private paths, by the names [jobs] private_fields takes.
PRIVATE_FIELDS = ("arguments", "environment", "working_directory")
# The key of a CE's options (LrmsContext.ce_config) under which the job-listing commands pass the
# private fields wanted; the [ce:NAME] sections have no such key, so it is never set from a file.
PRIVATE_FIELDS_OPTION = "private_fields"

# Dependency conditions, the SSS Job spec's words (Dependency condition="..."): run after the
# other job succeeded, failed, or ended whichever way.
DEPENDENCY_CONDITIONS = ("OnSuccess", "OnFailure", "OnExit")


@dataclass(slots=True)  # slots: each unknown field's default costs a slot write, not a dict entry (~2x cheaper)
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
    start_time: Optional[float] = None  # actual, or the LRMS's expected start for pending jobs; None: never started
    start_is_estimate: bool = False
    end_time: Optional[float] = None  # finished jobs: when the LRMS says it ended
    requested_processors: Optional[int] = None
    requested_memory_mb: Optional[int] = None
    requested_duration_s: Optional[int] = None  # time limit
    requested_nodes: Optional[int] = None
    requested_accelerators: Optional[int] = None  # GPUs (or other accelerators) the job asked for
    delivered_processors: Optional[int] = None
    delivered_wall_s: Optional[int] = None
    nodes: list[str] = field(default_factory=list)
    scheduler_specific: Optional[str] = None  # the LRMS's reason: why it waits, or why it ended
    local_group: Optional[str] = None  # the owner's Unix group, when the LRMS says
    proxy_vo: Optional[str] = None  # the VO of the job's proxy, when the LRMS knows it (HTCondor x509userproxyvoname)
    vo: Optional[str] = None  # the VO the site's [vos] map gives it (glueinfo.lrms.vo_map); None: a local job
    token_issuer: Optional[str] = None  # the issuer of the token it came with (HTCondor-CE's AuthTokenIssuer)
    token_groups: tuple[str, ...] = ()  # that token's groups (AuthTokenGroups), e.g. ("/cms", "/cms/pilot")
    # -- what the SSS Job object adds (docs/sss.md, "Job XML"); None / () when the LRMS does not say --
    executable: Optional[str] = None  # the program or script the job runs
    arguments: Optional[str] = None  # private: its arguments, one string as the LRMS prints them
    working_directory: Optional[str] = None  # private: the directory it starts in
    # private: the variables it is given: a mapping, or the text form of PBS's Variable_List and
    # qsub -v (NAME=value,NAME=value, a comma in a value written \,), split only when published
    environment: Optional[Union[Mapping[str, str], str]] = None
    completion: Optional[str] = None  # finished jobs: one of COMPLETIONS
    exit_code: Optional[int] = None  # finished jobs that exited: their exit status (0-255)
    exit_signal: Optional[int] = None  # finished jobs killed by a signal: its number
    cpu_duration_s: Optional[int] = None  # CPU seconds used so far (or in all)
    cpu_time_limit_s: Optional[int] = None  # the CPU time limit asked for
    delivered_memory_mb: Optional[int] = None  # memory in use (or used), as the LRMS measures it
    qos: Optional[str] = None  # quality of service
    priority: Optional[int] = None  # the LRMS's priority of the job, in its own scale
    holds: tuple[str, ...] = ()  # who holds it: "User", "System", "Operator", ...
    submit_host: Optional[str] = None  # the host it was submitted from
    features: Optional[str] = None  # the node features asked for, in the LRMS's notation
    dependencies: tuple[tuple[str, str], ...] = ()  # (one of DEPENDENCY_CONDITIONS, the other job's id)
    task_count: Optional[int] = None  # tasks (processes) the job asked for
    node_processors: tuple[int, ...] = ()  # started jobs: processors held on each of ``nodes``, in order


def environment_items(environment: Union[Mapping[str, str], str, None]) -> Iterator[tuple[str, str]]:
    """(name, value) of each variable of ``JobInfo.environment``, in order.

    The text form splits at commas not escaped by a backslash (``\\,`` is a
    comma in a value), and each item at its first ``=``; an item without
    ``=`` or without a name is skipped (it names no variable).
    """
    if environment is None:
        return
    if not isinstance(environment, str):
        yield from ((str(k), str(v)) for k, v in environment.items())
        return
    for item in _UNESCAPED_COMMA.split(environment):
        name, equals, value = item.replace("\\,", ",").partition("=")
        if equals and name:
            yield name, value


_UNESCAPED_COMMA = re.compile(r"(?<!\\),")


def private_fields(ce_options: Mapping[str, object]) -> frozenset[str]:
    """The private fields a plugin is asked to read, from its CE's options (none unless the options
    carry :data:`PRIVATE_FIELDS_OPTION`)."""
    wanted = ce_options.get(PRIVATE_FIELDS_OPTION)
    return frozenset(str(name) for name in wanted) if isinstance(wanted, (list, tuple, set, frozenset)) else frozenset()
