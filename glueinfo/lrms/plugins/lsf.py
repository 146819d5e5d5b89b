"""LRMS plugin ``lsf``: a CE queue is an IBM Spectrum LSF (Platform LSF) queue.

Commands (each bounded by what is left of the query's deadline):

- ``lsid``                                  -> LRMSVersion, and which formats to ask for
- ``bqueues -l QUEUE``                      -> Status, PRIO, MAX, JL/H and the slots the queue's jobs hold,
                                               RUNLIMIT/CPULIMIT, the queue's HOSTS, the other per-job
                                               limits (:func:`queue_limits`)
- LSF >= 10.1.0.2 (Fix Pack 2, which added ``-json`` to bjobs/bhosts/bqueues and ``-hms`` to bjobs):
  ``bhosts -o "FIELDS" -json [HOSTS]`` and ``bjobs -u all -q QUEUE -o "FIELDS" -json -hms``
- older: ``bhosts -w [HOSTS]`` and ``bjobs -u all -q QUEUE -w``
- ``bqueues -w``                            -> the queues LSF has, asked only when neither ``bqueues -l``
                                               nor a job names the queue: a queue LSF does not have is
                                               Closed with no count and one ERROR (glueinfo.lrms.queues)

The queue is always read from ``bqueues -l``: it prints every limit in one
documented unit (RUNLIMIT and CPULIMIT in minutes, ``720.0 min``) in every
version, where ``bqueues -o`` field names and units moved between fix packs.
Commands run with ``LSF_ENVDIR`` from ``[ce:NAME] lsf_envdir``,
``LSB_NTRIES=1`` (a command otherwise retries for ever while mbatchd is
down), ``LSB_DISPLAY_YEAR=Y`` (years in time stamps), ``TZ=UTC``, and
without the ``LSB_*_FORMAT`` variables that change what they print.

Any step that fails (command missing, timed out, non-zero exit such as
``LSF is down``, output not in the expected shape) leaves the fields it
feeds None and adds a one-line reason to ``QueueState.error``; the other
steps still fill theirs.  A job list is read whole or not at all.

Mappings (docs/lrms/lsf.md has the tables): ``QUEUE_STATUS``,
``JOB_STATES``, :func:`sss_host_state`, :func:`response_times`.  FreeCPUs
(:func:`queue_free_slots`) is within each host's MAX (shared by its queues),
the queue's JL/H on each host and the queue's MAX, all in slots.

GPUs (LSF >= 10.1.0.6, ``GPU_SINCE``): each host's ``ngpus`` and ``ngpus_alloc`` in the same
``bhosts -o ... -json`` (asked again without them when this LSF does not know them), a listed
job's ``gpu_num`` in bjobs -o; :func:`host_gpus`.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.job import JobInfo, private_fields
from glueinfo.core.model import NodeAllocation, QueueAccelerators, QueueLimits, QueueState, new_job_cpus
from glueinfo.core.text import one_line
from glueinfo.lrms import commands, queues
from glueinfo.lrms.accelerators import NodeAccelerators, queue_accelerators
from glueinfo.lrms.commands import Steps, Tools, environment
from glueinfo.lrms.figures import FINISHED_STATES, free_job_slots, glue_minutes, within_limit
from glueinfo.lrms.names import host_matcher, site_host
from glueinfo.lrms.registry import LrmsContext, LrmsPlugin, LrmsQueryError
from glueinfo.lrms.response import drain, halved
from glueinfo.lrms.vo_map import KINDS, VoMap, count_by_vo
from glueinfo.lrms.waiting import RECENT_S, Observed, WaitRecord, settle

JSON_SINCE = (10, 1, 0, 2)

# LSF job STAT -> (GLUE CE job status, SSS job State).
JOB_STATES: dict[str, tuple[str, str]] = {
    "PEND": ("SCHEDULED", "Idle"),
    "WAIT": ("SCHEDULED", "Idle"),  # a chunk job member waiting for its chunk
    "PSUSP": ("WAITING", "Hold"),  # suspended while pending, by its owner or an admin
    "PROV": ("READY", "Running"),  # dispatched, its host being provisioned
    "RUN": ("RUNNING", "Running"),
    "UNKWN": ("RUNNING", "Running"),  # mbatchd lost contact with the host's sbatchd: the job still holds its slots
    "USUSP": ("WAITING", "Suspended"),
    "SSUSP": ("WAITING", "Suspended"),
    "DONE": ("DONE", "Completed"),
    "EXIT": ("ABORTED", "Completed"),  # killed, or ended with a non-zero exit code
    "ZOMBI": ("ABORTED", "Completed"),  # killed while its host was unreachable
}

# bqueues STATUS (Open|Closed):(Active|Inact...) -> GLUE status.
QUEUE_STATUS = {("Open", True): "Production", ("Open", False): "Queueing",
                ("Closed", True): "Draining", ("Closed", False): "Closed"}

BJOBS_FIELDS = ("jobid", "jobindex", "stat", "user", "user_group", "queue", "proj_name", "job_name", "submit_time",
                "start_time", "finish_time", "exec_host", "nreq_slot", "nalloc_slot", "runtimelimit", "run_time",
                "pend_reason")
# Asked for besides BJOBS_FIELDS when the jobs are listed (the counts never read it): the SSS Job
# object's Executable, from the command line.  bjobs -o could also give from_host, cpu_used,
# dependency, exec_cwd and exit_code (bjobs lists no finished job without -a); each costs every
# listed job's refresh a few percent (docs/lrms/lsf.md), so they are not asked for.
BJOBS_LISTED_FIELDS = ("command",)
BHOSTS_FIELDS = ("host_name", "status", "max", "njobs", "run", "ssusp", "ususp", "rsv", "comments")
# GPUs (IBM's GPU enhancements of LSF 10.1 Fix Pack 6): a host's physical GPUs and those allocated to
# jobs, and the GPUs a listed job asked for (bsub -gpu num=N).
GPU_SINCE = (10, 1, 0, 6)
BHOSTS_GPU_FIELDS = ("ngpus", "ngpus_alloc")
BJOBS_GPU_FIELDS = ("gpu_num",)

_OUTPUT_ENV = ("LSB_BJOBS_FORMAT", "LSB_BQUEUES_FORMAT", "LSB_BHOSTS_FORMAT", "LSB_HMS_TIME_FORMAT",
               "LSB_BJOBS_PENDREASON_LEVEL", "LSF_LSLOAD_FORMAT")
_NO_JOBS = ("No unfinished job found", "No job found")


class LsfOutputError(LrmsQueryError):
    """Output that is not in the shape asked for."""


# -- small parsers ---------------------------------------------------------------------

def parse_version(text: str) -> str:
    """``lsid``'s first line, ``IBM Spectrum LSF Standard 10.1.0.13, Apr 15 2022`` (or ``Platform
    LSF 9.1.3.0``) -> ``10.1.0.13``."""
    match = re.search(r"\bLSF\b[^\n,]*?\b(\d+\.\d+(?:\.\d+)*)", text)
    if not match:
        raise LsfOutputError(f"lsid: unexpected output {one_line(text, 120)!r}")
    return match.group(1)


def version_tuple(version: Optional[str]) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")) if version else ()


def uses_json(version: Optional[str]) -> bool:
    """JSON (bjobs/bhosts ``-o ... -json``) from LSF 10.1.0.2 on; plain formats before, and when
    the version is unknown (they work in every version)."""
    return bool(version) and version_tuple(version) >= JSON_SINCE


def parse_limit_minutes(text: str) -> Optional[int]:
    """A bqueues -l limit: ``720.0 min`` (optionally ``of hostA``, the host it is normalised to) ->
    whole minutes as GLUE publishes them (glueinfo.lrms.figures.glue_minutes: rounded down, a
    positive limit at least 1); ``HH:MM`` or ``HH:MM:SS`` are read too.  ValueError otherwise."""
    text = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*min(?:\s+of\s+\S+)?", text)
    seconds = int(float(match.group(1)) * 60) if match else clock_seconds(text)
    return glue_minutes(seconds)


def clock_seconds(text: str) -> int:
    """``hh:mm:ss`` or ``hh:mm`` (hours may pass 24), or bjobs' ``600 second(s)`` -> seconds."""
    text = text.strip()
    match = re.fullmatch(r"(\d+)(?:\.\d+)?\s*second\(s\)", text)
    if match:
        return int(match.group(1))
    parts = text.split("/")[0].split(":")  # "3.0/hostA" (ABS_RUNLIMIT without -hms) is refused below
    if len(parts) in (2, 3) and all(p.isdigit() for p in parts):
        h, m, s = (int(p) for p in (parts + ["0"])[:3])
        return h * 3600 + m * 60 + s
    raise ValueError(f"not an LSF time: {text!r}")


_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_STAMP = re.compile(r"(?:[A-Z][a-z]{2}\s+)?([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s+(\d{4}))?(?:\s+[A-Z])?")


def parse_stamp(text: str, now: float) -> Optional[float]:
    """An LSF time stamp printed with TZ=UTC: ``Nov 19 07:20 2024`` (LSB_DISPLAY_YEAR=Y), ``Nov 19
    07:20:05``, ``Tue Nov 19 07:20:05 2024``, an estimate's trailing letter (``E``, ``L``) ignored.
    Without a year, the latest year that puts it no more than a day after ``now``.  ``-`` or empty:
    None.  ValueError otherwise."""
    text = text.strip()
    if text in ("", "-"):
        return None
    match = _STAMP.fullmatch(text)
    if not match or match.group(1) not in _MONTHS:
        raise ValueError(f"not an LSF time stamp: {text!r}")
    month, day, hour, minute = _MONTHS[match.group(1)], int(match.group(2)), int(match.group(3)), int(match.group(4))
    second = int(match.group(5) or 0)
    if match.group(6):
        return float(calendar.timegm((int(match.group(6)), month, day, hour, minute, second, 0, 0, 0)))
    year = time.gmtime(now).tm_year
    stamp = float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))
    return stamp if stamp <= now + 86400 else float(calendar.timegm((year - 1, month, day, hour, minute, second, 0, 0, 0)))


def exec_hosts(text: str) -> dict[str, int]:
    """bjobs EXEC_HOST ``4*hostB:2*hostC`` (also ``hostB:hostB``, or space separated) -> {host: slots}."""
    if text.isalnum():  # the common one-slot job on one host, without the split
        return {text: 1}
    hosts: dict[str, int] = {}
    for item in re.split(r"[:\s]+", text.strip()):
        if not item or item == "-":
            continue
        count, star, host = item.partition("*")
        if not star:
            count, host = "1", item
        if not count.isdigit() or not host:
            raise ValueError(f"not an LSF host list: {text!r}")
        hosts[host] = hosts.get(host, 0) + int(count)
    return hosts


def _count(text: Any) -> Optional[int]:
    """A bqueues/bhosts count: digits, or ``-`` (no limit / not applicable) -> None."""
    text = str(text if text is not None else "").strip()
    if text in ("", "-"):
        return None
    if not text.isdigit():
        raise ValueError(f"not a count: {text!r}")
    return int(text)


# -- queue -----------------------------------------------------------------------------

@dataclass
class LsfQueue:
    name: str
    status: str  # e.g. Open:Active
    priority: Optional[int]
    max_slots: Optional[int]  # MAX: slots the queue's jobs may use
    run_limit_min: Optional[int]
    cpu_limit_min: Optional[int]
    hosts: list[str]  # HOSTS: names and groups ("all" when every host)
    # DEFAULT LIMITS' RUNLIMIT/CPULIMIT; TASKLIMIT's (PROCLIMIT before 10.1) maximum; MEMLIMIT, SWAPLIMIT in MB
    default_run_min: Optional[int] = None
    default_cpu_min: Optional[int] = None
    task_limit: Optional[int] = None
    mem_limit_mb: Optional[int] = None
    swap_limit_mb: Optional[int] = None
    # JL/H (HJOB_LIMIT): the slots the queue's jobs may hold on any one host
    host_slots: Optional[int] = None
    # RUN + SSUSP + USUSP + RSV of the statistics line: the slots LSF counts against MAX (None: a column missing)
    used_slots: Optional[int] = None


_SIZE_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def parse_size_mb(text: str) -> Optional[int]:
    """A bqueues -l memory limit, ``5000 K``, ``2 G`` or ``4096 MB`` (a bare number is KB, LSF's
    default LSF_UNIT_FOR_LIMITS) -> whole MB, rounded down but a positive limit at least 1 MB.
    ValueError otherwise."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGTP]?)B?", text.strip())
    if not match:
        raise ValueError(f"not an LSF memory limit: {text!r}")
    size = float(match.group(1)) * _SIZE_MB[match.group(2) or "K"]
    return max(1, int(size)) if size > 0 else 0


def queue_limits(queue: LsfQueue) -> QueueLimits:
    """What one job of the queue may have (docs/lrms/lsf.md has the table): DefaultWallTime and
    DefaultCPUTime from the RUNLIMIT and CPULIMIT under DEFAULT LIMITS (never past the maximum),
    MaxSlotsPerJob from TASKLIMIT's (PROCLIMIT's) maximum, MaxMainMemory from MEMLIMIT (each of a
    job's processes, or the whole job with LSB_JOB_MEMLIMIT: what a one-slot job may use),
    MaxVirtualMemory from SWAPLIMIT (the job's whole virtual memory)."""
    def seconds(minutes: Optional[int], limit: Optional[int]) -> Optional[int]:
        if minutes is None:
            return None
        return minutes * 60 if limit is None else min(minutes, limit) * 60

    return QueueLimits(default_wall_clock_time_s=seconds(queue.default_run_min, queue.run_limit_min),
                       default_cpu_time_s=seconds(queue.default_cpu_min, queue.cpu_limit_min),
                       max_slots_per_job=queue.task_limit, max_main_memory_mb=queue.mem_limit_mb,
                       max_virtual_memory_mb=queue.swap_limit_mb)


def glue_status(status: str) -> Optional[str]:
    """``Open:Active`` -> Production, ``Open:Inact`` -> Queueing, ``Closed:Active`` -> Draining,
    ``Closed:Inact`` -> Closed (also the long ``Inactive`` and window forms ``Inact_Win``)."""
    head, _, tail = status.strip().partition(":")
    if head not in ("Open", "Closed") or not tail:
        return None
    return QUEUE_STATUS[(head, not tail.startswith("Inact"))]


def parse_bqueues_long(text: str, name: str) -> LsfQueue:
    """``bqueues -l QUEUE``.

    After ``QUEUE: NAME`` comes a header line (``PRIO NICE STATUS MAX JL/U ...``)
    and its values; then limits, each a header word ending in ``LIMIT`` with
    the value on the next line (several side by side in older versions:
    ``CPULIMIT  RUNLIMIT`` over ``600.0 min of hostA  720.0 min``); RUNLIMIT and CPULIMIT
    under ``DEFAULT LIMITS:`` are defaults, not maxima, kept apart, other defaults skipped.
    ``TASKLIMIT`` (``PROCLIMIT`` before 10.1) stands alone over ``[minimum [default]] maximum``.
    ``HOSTS:`` lists hosts and host groups (``group/``).  From the statistics line: MAX (the
    queue's slot limit), JL/H (its slot limit on any one host: HJOB_LIMIT) and the slots its jobs
    hold (RUN + SSUSP + USUSP + RSV, what LSF counts against MAX); ``-`` is no limit.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == f"QUEUE: {name}"), None)
    if start is None:
        raise LsfOutputError(f"bqueues -l: no queue {name!r} in output")
    body = []
    for line in lines[start + 1:]:
        if line.startswith("QUEUE: "):
            break
        body.append(line)
    fields: dict[str, str] = {}
    limits: dict[str, Optional[int]] = {}
    defaults: dict[str, Optional[int]] = {}
    hosts: list[str] = []
    in_defaults = False
    i = 0
    try:
        while i < len(body):
            line = body[i].strip()
            words = line.split()
            if words[:2] == ["PRIO", "NICE"] or (words and words[0] == "PRIO" and "STATUS" in words):
                values = body[i + 1].split() if i + 1 < len(body) else []
                if len(values) < len(words):
                    raise LsfOutputError(f"bqueues -l {name}: statistics line does not match its header")
                fields = dict(zip(words, values, strict=False))
                i += 2
                continue
            if line.startswith("DEFAULT LIMITS"):
                in_defaults = True
            elif line.startswith("MAXIMUM LIMITS"):
                in_defaults = False
            elif words in (["TASKLIMIT"], ["PROCLIMIT"]) and i + 1 < len(body):
                # [minimum [default]] maximum: the last number is the most tasks a job may have
                counts = body[i + 1].split()
                if counts and not in_defaults:
                    limits["TASKLIMIT"] = _count(counts[-1])
                i += 2
                continue
            elif words and all(w.endswith("LIMIT") for w in words) and i + 1 < len(body):
                values = re.findall(r"\d+(?:\.\d+)?\s*min(?:\s+of\s+\S+)?|\d+(?:\.\d+)?\s*[KMGTP]?B?|\d+", body[i + 1])
                for word, value in zip(words, values, strict=False):
                    if word in ("RUNLIMIT", "CPULIMIT"):
                        (defaults if in_defaults else limits)[word] = parse_limit_minutes(value)
                    elif word in ("MEMLIMIT", "SWAPLIMIT") and not in_defaults:
                        limits[word] = parse_size_mb(value)
                i += 2
                continue
            elif line.startswith("HOSTS:"):
                hosts = line.split(":", 1)[1].split()
            i += 1
        if "STATUS" not in fields:
            raise LsfOutputError(f"bqueues -l {name}: no PRIO/STATUS statistics")
        held = [_count(fields.get(column)) for column in ("RUN", "SSUSP", "USUSP", "RSV")]
        return LsfQueue(name=name, status=fields["STATUS"], priority=_count(fields.get("PRIO")),
                        host_slots=_count(fields.get("JL/H")),
                        used_slots=None if None in held else sum(n or 0 for n in held),
                        max_slots=_count(fields.get("MAX")), run_limit_min=limits.get("RUNLIMIT"),
                        cpu_limit_min=limits.get("CPULIMIT"), hosts=hosts or ["all"],
                        default_run_min=defaults.get("RUNLIMIT"), default_cpu_min=defaults.get("CPULIMIT"),
                        task_limit=limits.get("TASKLIMIT"), mem_limit_mb=limits.get("MEMLIMIT"),
                        swap_limit_mb=limits.get("SWAPLIMIT"))
    except ValueError as exc:
        raise LsfOutputError(f"bqueues -l {name}: {exc}") from None


def queue_names(text: str) -> list[str]:
    """``bqueues -w``: the name of every queue (the first word of each line below the
    ``QUEUE_NAME`` header)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    if lines[0][0] != "QUEUE_NAME":
        raise LsfOutputError(f"bqueues -w: unexpected output {one_line(' '.join(lines[0]), 120)!r}")
    return [words[0] for words in lines[1:]]


def bhosts_arguments(queue: Optional[LsfQueue]) -> list[str]:
    """Which hosts to ask bhosts about: the queue's HOSTS (bhosts takes host and host group names;
    ``group/`` loses its slash, ``host+2`` its preference), or every host for ``all``/``none``
    known, or when the list excludes hosts (``~host``, ``others``)."""
    if queue is None:
        return []
    names = []
    for word in queue.hosts:
        if word in ("all", "allremote", "others", "none") or word.startswith("~") or "@" in word:
            return []
        names.append(word.rstrip("/").split("+", 1)[0])
    return names


# -- hosts -----------------------------------------------------------------------------

@dataclass
class LsfHost:
    name: str
    status: str
    max_slots: Optional[int]
    njobs: int
    running: int
    reserved: int
    comment: Optional[str] = None
    gpus: Optional[int] = None  # NGPUS: physical GPUs (None: not asked, or none); NGPUS_ALLOC those jobs hold
    gpus_used: Optional[int] = None


_UNKNOWN_HOST = ("unavail", "unreach", "closed_LIM")
_OFFLINE_HOST = ("closed_Adm", "closed_Lock", "closed_Wind", "closed_EGO", "closed_RC", "closed_Cu_Wind", "closed_Inact")
_BUSY_HOST = ("closed_Full", "closed_Busy", "closed_Excl", "closed_cu_excl")


def sss_host_state(status: str, max_slots: Optional[int], used: Optional[int]) -> str:
    """SSS Node State of an LSF host: ``unavail``, ``unreach``, ``closed_LIM`` (LSF lost it) ->
    Unknown; ``closed_Adm``, ``closed_Lock``, ``closed_Wind``, ``closed_EGO``, ``closed_RC``,
    ``closed_Inact`` (closed by an admin or a window) -> Offline; ``closed_Full``, ``closed_Busy``,
    ``closed_Excl`` -> Busy; ``ok`` -> Idle when a slot is free, Busy when none is; anything
    else Unknown."""
    if status in _UNKNOWN_HOST:
        return "Unknown"
    if status in _OFFLINE_HOST:
        return "Offline"
    if status in _BUSY_HOST:
        return "Busy"
    if status == "ok":
        if max_slots is None or used is None:
            return "Unknown"
        return "Idle" if used < max_slots else "Busy"
    return "Unknown"


def parse_bhosts_json(text: str) -> list[LsfHost]:
    """``bhosts -o "host_name status max njobs run ssusp ususp rsv comments" -json``."""
    hosts = []
    for record in _records(text, "bhosts"):
        try:
            hosts.append(LsfHost(name=str(record["HOST_NAME"]), status=str(record.get("STATUS") or ""),
                                 max_slots=_count(record.get("MAX")), njobs=_count(record.get("NJOBS")) or 0,
                                 running=_count(record.get("RUN")) or 0, reserved=_count(record.get("RSV")) or 0,
                                 comment=str(record.get("COMMENTS") or "").strip() or None,
                                 gpus=_count(record.get("NGPUS")), gpus_used=_count(record.get("NGPUS_ALLOC"))))
        except (KeyError, ValueError) as exc:
            raise LsfOutputError(f"bhosts -json: unexpected record {one_line(json.dumps(record), 120)}: {exc}") from None
    return hosts


def parse_bhosts_wide(text: str) -> list[LsfHost]:
    """``bhosts -w``: ``HOST_NAME STATUS JL/U MAX NJOBS RUN SSUSP USUSP RSV`` columns."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[0].split()[:2] != ["HOST_NAME", "STATUS"]:
        raise LsfOutputError(f"bhosts -w: unexpected output {one_line(text, 120)!r}")
    header = lines[0].split()
    hosts = []
    for line in lines[1:]:
        values = line.split()
        if len(values) != len(header):
            raise LsfOutputError(f"bhosts -w: unexpected line {one_line(line, 120)!r}")
        row = dict(zip(header, values, strict=True))
        try:
            hosts.append(LsfHost(name=row["HOST_NAME"], status=row["STATUS"], max_slots=_count(row.get("MAX")),
                                 njobs=_count(row.get("NJOBS")) or 0, running=_count(row.get("RUN")) or 0,
                                 reserved=_count(row.get("RSV")) or 0))
        except ValueError as exc:
            raise LsfOutputError(f"bhosts -w: line {one_line(line, 120)!r}: {exc}") from None
    return hosts


def host_gpus(hosts: Sequence[LsfHost], allocations: Sequence[NodeAllocation]) -> tuple[QueueAccelerators, ...]:
    """The queue's GPUs by glueinfo.lrms.accelerators' rule from each host's NGPUS and NGPUS_ALLOC; LSF
    names no model here (lshosts -gpu does, a command more per refresh: not asked)."""
    return queue_accelerators(
        (NodeAccelerators(None, host.gpus, host.gpus_used, allocation.state == "Idle")
         for host, allocation in zip(hosts, allocations, strict=True) if host.gpus), max_nodes=None)


def _gpu_number(value: Any) -> Optional[int]:
    """bjobs GPU_NUM: the GPUs a job asked for (``2``), ``-`` or nothing when none; a form not read here
    (a range, say) is unknown, not a failed job list."""
    text = str(value if value is not None else "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def node_allocations(hosts: Sequence[LsfHost], lookup: dict[str, str]) -> list[NodeAllocation]:
    result = []
    for host in hosts:
        state = sss_host_state(host.status, host.max_slots, host.njobs + host.reserved)
        result.append(NodeAllocation(name=site_host(host.name, lookup), state=state, lrms_state=host.status,
                                     total_cpus=host.max_slots, allocated_cpus=host.njobs,
                                     free_cpus=None if host.max_slots is None else
                                     max(0, host.max_slots - host.njobs - host.reserved),
                                     reason=(host.comment or host.status) if state == "Offline" else None))
    return result


# -- jobs ------------------------------------------------------------------------------

@dataclass(slots=True)
class LsfJob:
    job_id: str
    state: str
    glue_status: str
    sss_state: str
    user: Optional[str]
    group: Optional[str]
    project: Optional[str]
    queue: Optional[str]
    name: Optional[str]
    slots: Optional[int]  # requested slots
    run_limit_s: Optional[int]
    run_time_s: Optional[int]
    submit_time: Optional[float] = None
    start_time: Optional[float] = None
    end_time: Optional[float] = None
    hosts: dict[str, int] = field(default_factory=dict)
    pend_reason: Optional[str] = None
    command: Optional[str] = None  # for the SSS Job object (JSON, full=True only)
    work_dir: Optional[str] = None  # exec_cwd, when the working directory is asked for
    gpus: Optional[int] = None  # gpu_num, when asked for (JSON, full=True, LSF >= GPU_SINCE)

    @property
    def finished(self) -> bool:
        return self.glue_status in FINISHED_STATES

    @property
    def running(self) -> bool:
        return self.glue_status == "RUNNING"


def _state(stat: str) -> tuple[str, str]:
    try:
        return JOB_STATES[stat]
    except KeyError:
        raise ValueError(f"unknown job STAT {stat!r}") from None


def _opt(value: Any) -> Optional[str]:
    text = str(value if value is not None else "").strip()
    return None if text in ("", "-") else text


def _records(text: str, what: str) -> list[dict[str, Any]]:
    """The RECORDS of an LSF ``-json`` answer; a record holding only ``ERROR`` is LSF's way of
    saying nothing matched (bjobs: "No unfinished job found") and is skipped."""
    if not text.strip():
        raise LsfOutputError(f"{what} -json: empty output")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LsfOutputError(f"{what} -json: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("RECORDS"), list):
        raise LsfOutputError(f"{what} -json: no RECORDS list")
    records = []
    for record in data["RECORDS"]:
        if not isinstance(record, dict):
            raise LsfOutputError(f"{what} -json: a record is not an object")
        if set(record) == {"ERROR"}:
            continue
        records.append(record)
    return records


def parse_bjobs_json(text: str, now: float, full: bool = True, hosts: bool = False) -> list[LsfJob]:
    """``bjobs -u all -q QUEUE -o "<BJOBS_FIELDS>" -json -hms``.  ``full=False`` leaves out the
    hosts, names and times only a published job list needs (the submit and start times of a job
    started in the last RECENT_S seconds are kept: its wait); ``hosts`` keeps a started job's hosts
    then too (EXEC_HOST: the slots it holds on each, what the queue's JL/H counts)."""
    jobs = []
    recent = now - RECENT_S
    stamps: dict[str, Optional[float]] = {}
    clocks: dict[str, int] = {}
    counts: dict[Any, Optional[int]] = {}
    texts = _Texts()

    def count(value: Any) -> Optional[int]:
        try:
            return counts[value]
        except KeyError:
            result = counts[value] = _count(value)
            return result

    def stamp(value: Any) -> Optional[float]:
        key = str(value or "")
        if key not in stamps:
            stamps[key] = parse_stamp(key, now)
        return stamps[key]

    def seconds(value: Any) -> Optional[int]:
        key = str(value or "").strip()
        if key in ("", "-"):
            return None
        if key not in clocks:
            clocks[key] = clock_seconds(key)
        return clocks[key]

    for record in _records(text, "bjobs"):
        try:
            job_id = str(record["JOBID"]).strip()
            index = str(record.get("JOBINDEX") or "0").strip()
            if not job_id.isdigit():
                raise ValueError(f"bad JOBID {job_id!r}")
            local_id = job_id if index in ("", "0", "-") else f"{job_id}[{index}]"
            stat = str(record.get("STAT") or "")
            glue, sss = _state(stat)
            slots = count(record.get("NREQ_SLOT")) or count(record.get("NALLOC_SLOT"))
            job = LsfJob(local_id, stat, glue, sss, texts[record.get("USER")], texts[record.get("USER_GROUP")],
                         texts[record.get("PROJ_NAME")], texts[record.get("QUEUE")], None, slots,
                         seconds(record.get("RUNTIMELIMIT")), seconds(record.get("RUN_TIME")))
            if full:
                job.name = str(record.get("JOB_NAME") or "") or None
                job.submit_time = stamp(record.get("SUBMIT_TIME"))
                job.start_time = stamp(record.get("START_TIME"))
                job.end_time = stamp(record.get("FINISH_TIME"))
                job.hosts = exec_hosts(str(record.get("EXEC_HOST") or ""))
                job.pend_reason = texts[record.get("PEND_REASON")]
                job.gpus = _gpu_number(record.get("GPU_NUM"))
                command, work_dir = record.get("COMMAND"), record.get("EXEC_CWD")
                if command:
                    job.command = str(command)
                if work_dir:  # asked for only as a private field
                    job.work_dir = _opt(work_dir)
            else:
                if hosts and sss in ("Running", "Suspended"):  # where it holds slots (queue_free_slots)
                    job.hosts = exec_hosts(str(record.get("EXEC_HOST") or ""))
                if (started := record.get("START_TIME")) and started != "-":
                    # the counts read the times of a job that started lately only: its wait (glueinfo.lrms.waiting)
                    start = stamp(started)
                    if start is not None and start >= recent:
                        job.start_time, job.submit_time = start, stamp(record.get("SUBMIT_TIME"))
        except (KeyError, ValueError, TypeError) as exc:  # TypeError: a list or object where text belongs
            raise LsfOutputError(f"bjobs -json: job {one_line(str(record.get('JOBID')), 120)}: {exc}") from None
        jobs.append(job)
    return jobs


class _Texts(dict[Any, Optional[str]]):
    """:func:`_opt` of each value, worked out once per parse: users, groups, projects, queues and pending
    reasons repeat thousands of times, and a dict lookup costs a fifth of a call."""

    def __missing__(self, value: Any) -> Optional[str]:
        result = self[value] = _opt(value)
        return result


def parse_bjobs_wide(text: str, now: float) -> list[LsfJob]:
    """``bjobs -u all -q QUEUE -w``: ``JOBID USER STAT QUEUE FROM_HOST EXEC_HOST JOB_NAME SUBMIT_TIME``.

    EXEC_HOST is empty for jobs that never started (PEND, PSUSP, WAIT) and a
    single word otherwise; JOB_NAME may hold spaces; SUBMIT_TIME is the last
    three words (four with a year).  A job on several hosts may list further
    hosts on lines of their own, indented.  Array elements are named
    ``name[index]``: the id is ``JOBID[index]``.  Plain bjobs prints no
    group, project, slots or limits: those stay unknown.
    """
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.split()[:3] == ["JOBID", "USER", "STAT"]), None)
    if header is None:
        if any(message in text for message in _NO_JOBS) or not text.strip():
            return []
        raise LsfOutputError(f"bjobs -w: unexpected output {one_line(text, 120)!r}")
    jobs: list[LsfJob] = []
    for line in lines[header + 1:]:
        if not line.strip():
            continue
        words = line.split()
        if line[0].isspace():  # a further execution host of the job above
            if not jobs or len(words) != 1:
                raise LsfOutputError(f"bjobs -w: unexpected line {one_line(line, 120)!r}")
            try:
                for host, slots in exec_hosts(words[0]).items():
                    jobs[-1].hosts[host] = jobs[-1].hosts.get(host, 0) + slots
            except ValueError as exc:
                raise LsfOutputError(f"bjobs -w: {exc}") from None
            continue
        try:
            if len(words) < 8 or not words[0].isdigit():
                raise ValueError("too few columns")
            job_id, user, stat, queue = words[:4]
            glue, sss = _state(stat)
            stamp_words = 4 if re.fullmatch(r"\d{4}", words[-1]) else 3
            submit = parse_stamp(" ".join(words[-stamp_words:]), now)
            middle = words[5:-stamp_words]
            started = stat not in ("PEND", "PSUSP", "WAIT")
            host_word = middle[0] if started and len(middle) > 1 else None
            name = " ".join(middle[1:] if host_word else middle)
            match = re.search(r"\[(\d+)\]$", name)
            job = LsfJob(f"{job_id}[{match.group(1)}]" if match else job_id, stat, glue, sss, user, None, None,
                         queue, name or None, None, None, None, submit_time=submit,
                         hosts=exec_hosts(host_word) if host_word else {})
        except ValueError as exc:
            raise LsfOutputError(f"bjobs -w: unexpected line {one_line(line, 120)!r} ({exc})") from None
        jobs.append(job)
    return jobs


def job_info(job: LsfJob, node_name: Callable[[str], str], private: frozenset[str] = frozenset()) -> JobInfo:
    """The model's view of one LSF job (GLUE CE Job / SSS Job); ``private``: the private fields
    (glueinfo.core.job.PRIVATE_FIELDS) to fill too."""
    started = job.sss_state in ("Running", "Suspended") or (job.finished and job.start_time is not None)
    pending = not started and not job.finished
    info = JobInfo(
        local_id=job.job_id, name=job.name, local_owner=job.user, local_group=job.group, account=job.project,
        queue=job.queue, lrms_state=job.state, sss_state=job.sss_state, glue_status=job.glue_status,
        submit_time=job.submit_time, start_time=job.start_time if started else None,
        end_time=job.end_time if job.finished else None,
        requested_processors=job.slots, requested_duration_s=job.run_limit_s,
        delivered_processors=(sum(job.hosts.values()) or None) if started else None,
        delivered_wall_s=job.run_time_s if started else None,
        nodes=[node_name(h) for h in job.hosts] if started else [],
        scheduler_specific=job.pend_reason if pending else None)
    if started and job.hosts:
        info.node_processors = tuple(job.hosts.values())
    if job.gpus is not None:
        info.requested_accelerators = job.gpus
    if job.command:  # the command line: the program, then its arguments
        executable, _, arguments = job.command.strip().partition(" ")
        info.executable = executable or None
        if "arguments" in private:
            info.arguments = arguments.strip() or None
    if job.work_dir and "working_directory" in private:
        info.working_directory = job.work_dir
    if job.finished:
        # DONE: ended with exit code 0; EXIT: a non-zero exit code or killed (bkill), before it started
        # only by bkill; ZOMBI: killed while its host was unreachable.
        if job.state == "DONE":
            info.completion, info.exit_code = "success", 0
        else:
            info.completion = "failed" if job.state == "EXIT" and started else "cancelled"
    return info


# -- estimates ---------------------------------------------------------------------------

def started_records(jobs: Iterable[LsfJob], vo_map: VoMap, since: float) -> Iterable[WaitRecord]:
    """The records glueinfo.lrms.waiting reads (LSF forecasts no start): each job that started at or
    after ``since``, with its SUBMIT_TIME and START_TIME (``bjobs -json``; plain ``bjobs -w`` prints
    no start, so none), its VO by the [vos] map on its user, user group and project."""
    vos: dict[tuple[Optional[str], Optional[str], Optional[str]], Optional[str]] = {}  # the map once per owners
    for job in jobs:
        if job.start_time is not None and job.start_time >= since and job.submit_time is not None:
            owners = (job.user, job.group, job.project)
            vo = vos[owners] if owners in vos else vos.setdefault(
                owners, vo_map.vo_of(user=owners[0], group=owners[1], account=owners[2]))
            yield vo, False, job.submit_time, job.start_time


def response_times(jobs: Sequence[LsfJob], free_slots: Optional[int], usable_slots: Optional[int],
                   queue_run_limit_s: Optional[int]) -> tuple[Optional[int], Optional[int]]:
    """(EstimatedResponseTime, WorstResponseTime) in seconds for a job submitted now.

    1. A slot free and no job pending (PEND): 0 and 0.
    2. Else a drain model on run limits: the new job waits for the first
       running job to reach its limit (0 when a slot is free), then for the
       pending jobs' slot time (slots x run limit) to drain through the
       queue's usable slots: Worst = first + sum / usable; Estimated =
       Worst / 2 (jobs end before their limits; the half is a rule, not a
       measurement).  A job without a run limit takes the queue's RUNLIMIT;
       with neither the estimates are unknown (None); a job whose slots are
       unknown (plain bjobs) counts one.
    """
    pending = [j for j in jobs if j.glue_status == "SCHEDULED"]
    if free_slots and not pending:
        return 0, 0
    if not usable_slots:
        return None, None

    def limit(job: LsfJob) -> Optional[int]:
        return job.run_limit_s if job.run_limit_s is not None else queue_run_limit_s

    return halved(drain([None if (lim := limit(j)) is None else lim - (j.run_time_s or 0) for j in jobs if j.running],
                        [(j.slots or 1, limit(j)) for j in pending], usable_slots, bool(free_slots)))


# -- the query ---------------------------------------------------------------------------

def tools_for(ctx: LrmsContext, deadline: float) -> Tools:
    """Tools for LSF: ``lsf_bin_dir``, ``LSF_ENVDIR``, one try per command, years in time stamps."""
    env = environment((), _OUTPUT_ENV, LSF_ENVDIR=str(ctx.ce_config.get("lsf_envdir") or ""), LSB_NTRIES="1",
                      LSB_DISPLAY_YEAR="Y")
    return commands.tools_for(ctx, "lsf_bin_dir", env, deadline)


def read_jobs(tools: Tools, queue: str, json_mode: bool, now: float, full: bool,
              private: frozenset[str] = frozenset(), gpus: bool = False, hosts: bool = False) -> list[LsfJob]:
    """The queue's unfinished jobs (bjobs -u all lists no finished ones unless asked); ``private``: the
    private fields to read too (the working directory: exec_cwd); ``gpus``: each listed job's gpu_num
    too (asked again without it when this LSF does not know the field); ``hosts``: a started job's
    hosts even when the jobs are not listed (the queue has a JL/H: :func:`queue_free_slots`)."""
    if json_mode and full and gpus:
        try:
            return _read_json_jobs(tools, queue, now, (*_listed_fields(private), *BJOBS_GPU_FIELDS), full)
        except LrmsQueryError as exc:
            if not _unknown_field(str(exc), BJOBS_GPU_FIELDS):
                raise
    if json_mode:
        fields = _listed_fields(private) if full else BJOBS_FIELDS
        return _read_json_jobs(tools, queue, now, fields, full, hosts)
    code, out, err = tools.call("bjobs", "-u", "all", "-q", queue, "-w", ok_codes=(0, 255))
    if code != 0 and not any(message in err for message in _NO_JOBS):
        raise LrmsQueryError(f"bjobs -u all -q exited {code}: {one_line(err or out, 120)}")
    return parse_bjobs_wide(out, now)


def _listed_fields(private: frozenset[str]) -> tuple[str, ...]:
    """bjobs -o's fields for a published job list (exec_cwd only when the working directory is asked for)."""
    fields = (*BJOBS_FIELDS, *BJOBS_LISTED_FIELDS)
    return (*fields, "exec_cwd") if "working_directory" in private else fields


def _read_json_jobs(tools: Tools, queue: str, now: float, fields: Sequence[str], full: bool,
                    hosts: bool = False) -> list[LsfJob]:
    code, out, err = tools.call("bjobs", "-u", "all", "-q", queue, "-o", " ".join(fields), "-json", "-hms",
                                ok_codes=(0, 255))
    if not out.strip() and any(message in err for message in _NO_JOBS):
        return []
    if code != 0:
        raise LrmsQueryError(f"bjobs -u all -q exited {code}: {one_line(err or out, 120)}")
    return parse_bjobs_json(out, now, full=full, hosts=hosts)


def _unknown_field(message: str, fields: Sequence[str]) -> bool:
    """Does a failed bjobs/bhosts -o say it does not know one of ``fields`` (an LSF older than
    GPU_SINCE, or built without them)?  Its wording is not documented: any mention of one of them."""
    return any(name in message.lower() for name in fields)


def queue_free_slots(hosts: Sequence[LsfHost], allocations: Sequence[NodeAllocation],
                     jobs: Optional[Sequence[LsfJob]], queue: LsfQueue) -> Optional[int]:
    """FreeCPUs: the slots a new job of this queue can get now, within every slot limit LSF holds it to.

    A host counts only when its view is Idle (``ok`` with a slot free: closed_Full, closed_Busy,
    closed_Excl and the other closed_* states dispatch nothing), for its MAX - NJOBS - RSV: a host's
    MAX (MXJ) is shared by every queue on it, and NJOBS counts all their jobs.  With a JL/H
    (HJOB_LIMIT: the slots this queue's jobs may hold on any one host), a host gives at most that
    limit less the slots this queue's running and suspended jobs hold there (their EXEC_HOST); the
    host's node view stays the host's own (another queue may still use its slots: queue limits are
    the CE's figures, as Slurm's MaxCPUsPerNode and OpenPBS's queue ncpus are).  Without the job
    list (bjobs failed) what the queue holds on each host is unknown, and so is FreeCPUs (None:
    anything from 0 to the limit per host, nothing is invented).  Slots a host reserves (RSV) for
    this queue's pending jobs are not told apart from other queues' and are not charged against
    JL/H.  The whole is at most MAX less RUN + SSUSP + USUSP + RSV of the queue's statistics line,
    when both are known: running, suspended and reserving jobs all count against a queue's slot
    limit (IBM, "Job slot limits for parallel jobs"), and one job may hold many slots, so MAX less
    the running *jobs* would call slots free that LSF will not give."""
    per_host = queue.host_slots
    held: dict[str, int] = {}
    if per_host is not None:
        if jobs is None:
            return None
        for job in jobs:
            if job.sss_state in ("Running", "Suspended"):
                for host, slots in job.hosts.items():
                    held[host] = held.get(host, 0) + slots
    free = 0
    for lsf_host, allocation in zip(hosts, allocations, strict=True):
        here = new_job_cpus(allocation.state, allocation.total_cpus or 0, allocation.allocated_cpus or 0,
                            allocation.free_cpus)
        if per_host is not None:
            here = within_limit(here, per_host, held.get(lsf_host.name, 0))
        free += here
    if queue.used_slots is None:  # bqueues told no slot counts: MAX caps FreeJobSlots alone (by running jobs)
        return free
    return within_limit(free, queue.max_slots, queue.used_slots)


def read_hosts(tools: Tools, host_args: Sequence[str], gpus: bool) -> list[LsfHost]:
    """``bhosts -o BHOSTS_FIELDS -json`` for the queue's hosts, with the GPU fields when ``gpus`` (asked
    again without them when this LSF does not know them: the hosts' slots are read either way)."""
    if gpus:
        try:
            return parse_bhosts_json(tools("bhosts", "-o", " ".join((*BHOSTS_FIELDS, *BHOSTS_GPU_FIELDS)), "-json",
                                           *host_args))
        except LrmsQueryError as exc:
            if not _unknown_field(str(exc), BHOSTS_GPU_FIELDS):
                raise
    return parse_bhosts_json(tools("bhosts", "-o", " ".join(BHOSTS_FIELDS), "-json", *host_args))


def query(ctx: LrmsContext) -> QueueState:
    """The state of the LSF queue ``ctx.queue`` (see the module docstring for commands and failures)."""
    deadline = time.monotonic() + ctx.timeout_s
    tools = tools_for(ctx, deadline)
    now = ctx.clock()
    if not ctx.queue:
        raise LrmsQueryError("lsf: no queue named for this CE (set its queue)")
    queue_name = ctx.queue
    state = QueueState(lrms_type="lsf", queue=queue_name, collected_at=now)
    step = Steps()
    errors = step.errors

    state.lrms_version = step(lambda: parse_version(tools("lsid")))
    json_mode = uses_json(state.lrms_version)
    gpus = json_mode and version_tuple(state.lrms_version) >= GPU_SINCE
    queue: Optional[LsfQueue] = step(lambda: parse_bqueues_long(tools("bqueues", "-l", queue_name), queue_name))
    host_args = bhosts_arguments(queue)
    if json_mode:
        hosts: Optional[list[LsfHost]] = step(lambda: read_hosts(tools, host_args, gpus))
    else:
        hosts = step(lambda: parse_bhosts_wide(tools("bhosts", "-w", *host_args)))
    per_host = queue is not None and queue.host_slots is not None
    jobs: Optional[list[LsfJob]] = step(lambda: read_jobs(tools, queue_name, json_mode, now, ctx.with_jobs,
                                                          private_fields(ctx.ce_config), gpus, per_host))

    if queue is not None:
        state.status = glue_status(queue.status)
        if state.status is None:
            errors.append(f"queue {queue_name}: unknown STATUS {queue.status!r}")
        state.priority = queue.priority
        state.max_running_jobs = queue.max_slots
        state.max_wall_clock_time_min = queue.run_limit_min
        state.max_cpu_time_min = queue.cpu_limit_min
        state.limits = queue_limits(queue)
    lookup = host_matcher(h.hostname for h in ctx.hosts)
    usable = None
    if hosts is not None:
        allocations = node_allocations(hosts, lookup)
        state.nodes = allocations
        state.hosts = [a.name for a in allocations]
        usable = commands.node_capacity(state, allocations)
        if usable is None:
            errors.append("bhosts: a host without a slot limit (MAX '-'): TotalCPUs and FreeCPUs unknown")
        elif queue is not None:
            state.free_cpus = queue_free_slots(hosts, allocations, jobs, queue)
        state.accelerators = host_gpus(hosts, allocations)
    if jobs is not None:
        active = commands.count_jobs(state, jobs)

        def node_name(host: str) -> str:
            return site_host(host, lookup)

        if ctx.with_jobs:
            private = private_fields(ctx.ce_config)
            infos = [job_info(j, node_name, private) for j in jobs]
        else:
            infos = [JobInfo(local_id=j.job_id, local_owner=j.user, local_group=j.group, account=j.project,
                             glue_status=j.glue_status) for j in active]
        ctx.vo_map.assign(infos)
        state.vo_counts = count_by_vo(infos)
        if not json_mode:  # bjobs -w shows no user group or project: only user: rules can match
            state.owner_kinds = ("user",)
        if ctx.with_jobs:
            state.jobs = infos
    # MAX is in slots: when bqueues says how many the queue's jobs hold, FreeCPUs is already within it
    # (queue_free_slots); otherwise, and when bjobs failed (the shared rule: a limit with no running
    # count leaves FreeJobSlots unknown), the shared rule caps FreeJobSlots by MAX less the running jobs.
    slot_capped = (queue is not None and queue.max_slots is not None and queue.used_slots is not None
                   and jobs is not None)
    state.free_job_slots = free_job_slots(state.status, state.free_cpus,
                                          None if slot_capped else state.max_running_jobs, state.running_jobs)
    if jobs is not None and state.free_cpus is not None and state.status == "Production":
        limit = queue.run_limit_min * 60 if queue is not None and queue.run_limit_min is not None else None
        # A free slot with nothing pending, else the waits of the jobs started in the last hour, else
        # response_times' drain rule (glueinfo.lrms.waiting).
        starts_now = bool(state.free_cpus) and not any(j.glue_status == "SCHEDULED" for j in jobs)
        seen = Observed(now)
        if not starts_now:
            seen.add(started_records(jobs, ctx.vo_map, seen.since))
        settle(state, seen, starts_now, lambda: response_times(jobs, state.free_cpus, usable, limit))
    # Without the queue, bhosts is asked about every host: never kept for a queue no answer named
    # (bqueues -l prints it, or a job of it is listed; glueinfo.lrms.queues).
    queues.settle(state, queue is not None or bool(jobs), lambda: queue_names(tools("bqueues", "-w")), errors, "queue")
    state.error = step.error("lsf")
    return state


def iter_states() -> Iterable[tuple[str, str, str]]:
    """(LSF STAT, GLUE status, SSS state) rows, for the docs table and tests."""
    for stat, (glue, sss) in JOB_STATES.items():
        yield stat, glue, sss


LRMS = LrmsPlugin(name="lsf", query=query, owner_kinds=KINDS,
                  description="IBM Spectrum LSF queue via bqueues/bhosts/bjobs (JSON from 10.1.0.2)")
