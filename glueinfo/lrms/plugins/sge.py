"""LRMS plugin ``sge``: a CE queue is a Grid Engine cluster queue (Son of Grid Engine 8.1.9,
Debian 12's gridengine; the XML of Sun/Oracle Grid Engine 6.2 and Open Grid Scheduler is the same).

Commands (each bounded by what is left of the query's deadline), run with
``SGE_ROOT``/``SGE_CELL`` from ``[ce:NAME] sge_root``/``sge_cell`` when set,
``sge_bin_dir`` for the tools, ``TZ=UTC LC_ALL=C`` (qstat prints local times)
and without ``SGE_SINGLE_LINE``/``SGE_LONG_QNAMES``/``SGE_NOMAIL`` style
variables that change output (all ``SGE_*`` but the cell's own are dropped):

- ``qstat -help``                          -> LRMSVersion (its first line, ``SGE 8.1.9``)
- ``qstat -xml -f -r -u '*'``              -> every queue instance (slots used/reserved/total,
                                              state letters) and every job (state, owner, slots,
                                              start/submit time, h_rt request, requested queues);
                                              ``-ext -pri`` added when jobs are published or the
                                              [vos] map has ``account:`` rules (JB_project and
                                              JB_department, at about twice the bytes per job)
- ``qhost -xml -F slots``                  -> each host's processors (num_proc), whether its execd
                                              reports (``-`` values: it does not), and what it (``hc:``)
                                              and the cell (``gc:``, on the pseudo host ``global``) have
                                              left of the ``slots`` consumable an admin set in
                                              ``complex_values`` (none printed where none is set); with
                                              ``-F slots,COMPLEX`` when ``[ce:NAME] sge_gpu_complex``
                                              names one, what each host has left of it (GPUs)
- ``qconf -sc``                            -> only with ``sge_gpu_complex``: that complex's shortcut
                                              and whether a job consumes it per slot or per job
- ``qconf -sq QUEUE``                      -> MaxWallClockTime (h_rt/s_rt), MaxCPUTime (h_cpu/s_cpu), the
                                              other per-job limits (:func:`queue_limits`: h_rss/s_rss,
                                              h_vmem/s_vmem, pe_list)
- ``qconf -sp PE``, for each PE the queue's ``pe_list`` names -> its slots and allocation_rule
                                              (MaxSlotsPerJob)
- ``qconf -sql``                           -> the cluster queues there are, asked only when neither
                                              qstat (an instance) nor qconf -sq names the queue: a
                                              queue Grid Engine does not have is Closed with no count
                                              and one ERROR (glueinfo.lrms.queues)

A qmaster that cannot be reached (qstat's ``error: commlib error: ...``) is
fatal: every figure unknown, one line.  Any other step that fails leaves the
fields it feeds unknown and adds a one-line reason to ``QueueState.error``.

Rules (the tables are in docs/lrms/sge.md):

- TotalCPUs = sum over the queue's instances of ``min(slots_total, num_proc)``
  (slots alone when qhost does not know the host); FreeCPUs = sum over the
  instances that can take a job of ``min(free slots, free processors of the
  host)``, where free slots = ``slots_total - slots_used - slots_resv``, at most
  what the host has left of its ``slots`` consumable when it has one (the
  slots of a host its queues share: SGE starts no job past it, whatever the
  instance has free), and the host's free processors = ``num_proc`` minus the
  slots every queue instance on that host has in use or reserved (scheduler
  allocation, never load).
- FreeJobSlots = the free slots of the usable instances (what SGE dispatches
  now), the whole at most what the cell has left of a global ``slots``
  consumable, capped by MaxRunningJobs minus RunningJobs when a limit is known,
  0 unless the queue is Production (glueinfo.lrms.figures.free_job_slots).
- Pending jobs are not tied to a queue instance: one belongs to this queue
  when one of its ``-q`` requests (``hard_req_queue``, a wildcard expression,
  ``queue``, ``queue@host``) matches the cluster queue's name, or when it
  requested no queue at all (it may start in any queue, so it waits in each).
- Array jobs: each task is one job (``local_id`` ``JOB.TASK``); a pending
  range ``2-10:2`` is its five tasks.
- Times are limits in minutes, rounded down but a positive limit at least 1
  (GLUE 1.3's unit; glueinfo.lrms.figures.glue_minutes).
- GPUs (:func:`queue_gpus`), when ``sge_gpu_complex`` names the consumable that counts them: a
  host's are what ``qhost -F`` says it has left (``hc:``, a host consumable) plus what the
  running jobs of every queue hold there (their ``hard_request``: per slot, or once per job when
  the complex is consumable ``JOB``); a job's request is that times its slots (per job: itself).
"""

from __future__ import annotations

import calendar
import fnmatch
import functools
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.gc_pause import collector_paused
from glueinfo.core.job import JobInfo
from glueinfo.core.model import NodeAllocation, QueueAccelerators, QueueLimits, QueueState
from glueinfo.core.text import one_line
from glueinfo.core.xmlsafe import XMLInputError, parse_xml
from glueinfo.lrms import commands, queues
from glueinfo.lrms.accelerators import NodeAccelerators, queue_accelerators
from glueinfo.lrms.commands import Steps, Tools, environment
from glueinfo.lrms.figures import free_job_slots, glue_minutes
from glueinfo.lrms.names import host_matcher, site_host
from glueinfo.lrms.registry import LrmsContext, LrmsPlugin, LrmsQueryError
from glueinfo.lrms.response import drain
from glueinfo.lrms.vo_map import count_by_vo

# qstat -xml of 50,000 jobs with -ext -pri is about 50 MB: well beyond the
# default limit for documents from the network; this one comes from our own command.
MAX_XML_BYTES = 512 * 2**20

# Variables of the caller's that change what the tools print; SGE_ROOT/SGE_CELL and the
# ports are kept (they say which cell to ask) unless the CE's config sets the cell.
_KEEP_SGE_ENV = ("SGE_ROOT", "SGE_CELL", "SGE_QMASTER_PORT", "SGE_EXECD_PORT", "SGE_CLUSTER_NAME")


class SgeOutputError(LrmsQueryError):
    """Output that is not in the shape asked for."""


# -- job states ------------------------------------------------------------------------

def map_job_state(letters: str) -> tuple[str, str, bool]:
    """Grid Engine job state letters (qstat's ``state`` column) -> (GLUE status, SSS state, finished?).

    Letters (qstat(1)): d deletion, E error, h hold, r running, R restarted,
    s/S/T suspended (by user or qmod / by a subordinate queue / by a suspend
    threshold), t transferring, w waiting, q queued, z zombie.  The first rule
    that applies wins:

    z -> DONE/Completed; E (Eqw: the job failed to start and waits for
    ``qmod -cj``) -> WAITING/Hold; d with r or t (deleted, still holding its
    slots) -> RUNNING/Running; d otherwise -> ABORTED/Completed; s, S or T ->
    WAITING/Suspended; r -> RUNNING/Running; t -> READY/Running (slots given,
    starting); h -> WAITING/Hold; q or w -> SCHEDULED/Idle.
    Raises ValueError for anything else.
    """
    if not letters or not _STATE_LETTERS.fullmatch(letters):
        raise ValueError(f"unknown job state {letters!r}")
    if "z" in letters:
        return "DONE", "Completed", True
    if "E" in letters:
        return "WAITING", "Hold", False
    if "d" in letters:
        return ("RUNNING", "Running", False) if ("r" in letters or "t" in letters) else ("ABORTED", "Completed", True)
    if "s" in letters or "S" in letters or "T" in letters:
        return "WAITING", "Suspended", False
    if "r" in letters:
        return "RUNNING", "Running", False
    if "t" in letters:
        return "READY", "Running", False
    if "h" in letters:
        return "WAITING", "Hold", False
    if "q" in letters or "w" in letters:
        return "SCHEDULED", "Idle", False
    raise ValueError(f"unknown job state {letters!r}")


_STATE_LETTERS = re.compile(r"[dEhrRsStTwqz]+")

# Queue instance state letters (qstat(1)): a load alarm, A suspend alarm, C suspended by calendar,
# D disabled by calendar, c configuration ambiguous, d disabled, s suspended, S subordinate,
# u unknown, E error, o orphaned.
_QUEUE_LETTERS = re.compile(r"[aACDcdsSuEo]*")
OFFLINE_LETTERS = frozenset("dDsSCEo")  # drained or down by the admin, a calendar or an error
BUSY_LETTERS = frozenset("aA")  # over a load threshold: the scheduler gives it nothing for now
DISABLED_LETTERS = frozenset("dD")


def node_state(letters: str, reporting: bool, allocated: int, total: int) -> str:
    """SSS Node State of one queue instance: Unknown (u, or its execd does not report to qhost),
    Offline (d D s S C E o), Busy (a A alarms, or every slot used or reserved), else Idle."""
    if "u" in letters or not reporting:
        return "Unknown"
    if OFFLINE_LETTERS.intersection(letters):
        return "Offline"
    if BUSY_LETTERS.intersection(letters) or allocated >= total:
        return "Busy"
    return "Idle"


# -- small parsers ---------------------------------------------------------------------

def parse_version(text: str) -> str:
    """First line of ``qstat -help``: ``SGE 8.1.9``, ``GE 6.2u5``, ``OGS/GE 2011.11p1``,
    ``UGE 8.6.7`` -> the version word."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    match = re.fullmatch(r"(?:SGE|GE|OGS/GE|UGE|AGE|Univa Grid Engine|Altair Grid Engine)\s+(\d[\w.\-]*)", first)
    if not match:
        raise SgeOutputError(f"qstat -help: unexpected first line {one_line(first, 120)!r}")
    return match.group(1)


def parse_time_s(text: str) -> Optional[int]:
    """A Grid Engine time value (sge_types(1) ``time_specifier``) in seconds; None for INFINITY.

    ``[[hours:]minutes:]seconds`` (hours may pass 24: ``48:00:00``; empty fields
    are 0: ``::30``) or plain seconds (``172000``); ValueError otherwise.
    """
    text = text.strip()
    if text.upper() == "INFINITY":
        return None
    parts = text.split(":")
    if len(parts) > 3 or not text or not all(p == "" or p.isdigit() for p in parts) or not any(parts):
        raise ValueError(f"not a Grid Engine time: {text!r}")
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part or 0)
    return seconds


def parse_queue_config(text: str) -> dict[str, str]:
    """``qconf -sq QUEUE``: ``key value`` lines, values continued on the next line after a backslash."""
    return _parse_config(text, "qconf -sq", "qname")


def parse_pe_config(text: str) -> dict[str, str]:
    """``qconf -sp PE``: a parallel environment's ``key value`` lines (pe_name, slots, allocation_rule ...)."""
    return _parse_config(text, "qconf -sp", "pe_name")


def _parse_config(text: str, command: str, name_key: str) -> dict[str, str]:
    config: dict[str, str] = {}
    key = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if key and raw[:1].isspace():  # continuation of the previous value
            config[key] += " " + line.strip().rstrip("\\").strip()
            continue
        parts = line.split(None, 1)
        key = parts[0]
        if not re.fullmatch(r"[a-z_]+", key):
            raise SgeOutputError(f"{command}: unexpected line {one_line(line, 120)!r}")
        config[key] = (parts[1] if len(parts) > 1 else "").rstrip("\\").strip()
    if name_key not in config:
        raise SgeOutputError(f"{command}: no {name_key} in output {one_line(text, 120)!r}")
    return config


def host_values(value: str) -> dict[str, str]:
    """A queue attribute with host overrides, ``1:00:00,[node1=2:00:00],[@big=INFINITY]`` ->
    {"": "1:00:00", "node1": "2:00:00", "@big": "INFINITY"} (``""``: the default)."""
    values: dict[str, str] = {}
    for item in re.findall(r"\[[^\]]*\]|[^,\[\]]+", value):
        item = item.strip()
        host = ""
        if item.startswith("["):
            host, equals, item = item[1:-1].partition("=")
            if not equals:
                raise ValueError(f"host override {item!r} is not [HOST=VALUE]")
        if item.strip():
            values[host.strip()] = item.strip()
    return values


def queue_limit_s(config: Mapping[str, str], hard: str, soft: str) -> tuple[Optional[int], Optional[int]]:
    """(the default, the largest) time a job of this queue may get, in seconds: on each host
    (the default and every host override) the tighter of the hard and soft limit; None when
    unlimited (INFINITY both) or, for the largest, unlimited on some host.  ValueError when malformed."""
    per_host = host_limits(config, hard, soft, parse_time_s)
    return per_host[0], _largest(per_host)


def host_limits(config: Mapping[str, str], hard: str, soft: str,
                parse: Callable[[str], Optional[int]]) -> list[Optional[int]]:
    """A limit on each host, the default first, then every host override: the tighter of the hard
    and soft values (``parse`` reads one; None: INFINITY).  ValueError when malformed."""
    hards = {h: parse(v) for h, v in host_values(config.get(hard, "INFINITY")).items()}
    softs = {h: parse(v) for h, v in host_values(config.get(soft, "INFINITY")).items()}
    per_host = []
    for host in dict.fromkeys(["", *hards, *softs]):
        known = [v for v in (hards.get(host, hards.get("")), softs.get(host, softs.get(""))) if v is not None]
        per_host.append(min(known) if known else None)
    return per_host


def _largest(per_host: Sequence[Optional[int]]) -> Optional[int]:
    """The most a job gets on any host; None when some host has no limit."""
    return None if any(v is None for v in per_host) else max(v for v in per_host if v is not None)


def _smallest(per_host: Sequence[Optional[int]]) -> Optional[int]:
    """What a job gets at least wherever it runs; None when no host has a limit."""
    return min((v for v in per_host if v is not None), default=None)


_MEMORY_UNITS = {"": 1, "k": 1000, "K": 1024, "m": 1000**2, "M": 1024**2, "g": 1000**3, "G": 1024**3}


def parse_memory_mb(text: str) -> Optional[int]:
    """A Grid Engine memory value (sge_types(1) ``memory_specifier``: bytes, or a number followed by
    k/m/g, powers of 1000, or K/M/G, powers of 1024) in MB (2**20 bytes), rounded down but a positive
    limit at least 1 MB (as glueinfo.lrms.figures.glue_minutes does times); None for INFINITY.
    ValueError otherwise."""
    text = text.strip()
    if text.upper() == "INFINITY":
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG]?)", text)
    if not match:
        raise ValueError(f"not a Grid Engine memory value: {text!r}")
    size = float(match.group(1)) * _MEMORY_UNITS[match.group(2)]
    return max(1, int(size // 2**20)) if size > 0 else 0


def queue_pes(config: Mapping[str, str]) -> list[str]:
    """The parallel environments a queue's ``pe_list`` names, on any host (``make,[@big=mpi smp]``)."""
    names = [name for value in host_values(config.get("pe_list", "NONE")).values() for name in re.split(r"[\s,]+", value)]
    return list(dict.fromkeys(name for name in names if name and name.upper() != "NONE"))


def _pe_slots(pe: Mapping[str, str], instances: Optional[Sequence[QueueInstance]]) -> int:
    """The most slots one job of a parallel environment can have in the queue: the PE's slots, at
    most the queue instances' (one host's for ``$pe_slots``, N of each host's for a fixed rule N)."""
    slots = int(pe.get("slots", "0"))
    rule = pe.get("allocation_rule", "$fill_up").strip()
    if not instances:
        return slots
    totals = [i.total for i in instances]
    if rule == "$pe_slots":
        return min(slots, max(totals))
    if rule.isdigit():
        return min(slots, sum(min(total, int(rule)) for total in totals))
    return min(slots, sum(totals))


def queue_limits(config: Mapping[str, str], pes: Mapping[str, Optional[Mapping[str, str]]],
                 instances: Optional[Sequence[QueueInstance]]) -> QueueLimits:
    """What one job of the cluster queue may have (docs/lrms/sge.md has the table); ValueError when a
    value is malformed.

    - DefaultWallTime, DefaultCPUTime: a job that requests no time gets the queue's limit (the tighter
      of h_rt and s_rt, of h_cpu and s_cpu): on every host at least the smallest of them.
    - MaxMainMemory from h_rss/s_rss, MaxVirtualMemory from h_vmem/s_vmem (the tighter of the two):
      the largest on any host, unknown when some host has none.  Grid Engine applies them to each
      slot of a job (a parallel job's limit is multiplied by its slots on the host): per slot.
    - MaxSlotsPerJob: 1 without a parallel environment (a job gets one slot); else, over the PEs of
      ``pe_list`` (``pes``: each one's ``qconf -sp``, None when it could not be read), the largest of
      a PE's slots, at most the queue's slots (``instances``: its queue instances; those of one host
      for ``$pe_slots``, N per host for a fixed allocation_rule N).  Unknown when a PE is."""
    names = queue_pes(config)
    found = [pes.get(name) for name in names]
    max_slots: Optional[int] = None
    if not names:
        max_slots = 1
    elif all(pe is not None for pe in found):
        max_slots = max(_pe_slots(pe, instances) for pe in found if pe is not None) or None
    return QueueLimits(
        default_wall_clock_time_s=_smallest(host_limits(config, "h_rt", "s_rt", parse_time_s)),
        default_cpu_time_s=_smallest(host_limits(config, "h_cpu", "s_cpu", parse_time_s)),
        max_slots_per_job=max_slots or None,
        max_main_memory_mb=_largest(host_limits(config, "h_rss", "s_rss", parse_memory_mb)),
        max_virtual_memory_mb=_largest(host_limits(config, "h_vmem", "s_vmem", parse_memory_mb)))


def _timestamp(text: Optional[str]) -> Optional[float]:
    """``2026-11-23T23:49:03`` (printed with TZ=UTC) -> Unix time."""
    if not text:
        return None
    text = text.strip()
    if len(text) < 19 or text[4] != "-" or text[7] != "-" or text[10] != "T" or text[13] != ":" or text[16] != ":":
        raise ValueError(f"not a qstat time: {text!r}")
    return float(calendar.timegm((int(text[0:4]), int(text[5:7]), int(text[8:10]),
                                  int(text[11:13]), int(text[14:16]), int(text[17:19]), 0, 0, 0)))


def expand_tasks(text: str, limit: int = 1_000_000) -> list[str]:
    """An array job's ``tasks``: ``7``, ``2-10:2``, ``1,3,5-6:1`` -> task ids (ValueError when malformed)."""
    tasks: list[str] = []
    for item in text.strip().split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", item.strip())
        if not match:
            raise ValueError(f"not a task range: {text!r}")
        first = int(match.group(1))
        last = int(match.group(2) or first)
        step = int(match.group(3) or 1)
        if last < first or step < 1 or (last - first) // step + len(tasks) >= limit:
            raise ValueError(f"not a task range: {text!r}")
        tasks.extend(str(t) for t in range(first, last + 1, step))
    return tasks


def _undo_lt(text: str) -> str:
    # SGE 8.1.9 writes '<' in XML text as "%lt;" (its escaping table has a typo); qstat's plain
    # output shows '<'.  A name really holding "%lt;" is shown with '<' too: the lesser evil.
    return text.replace("%lt;", "<") if "%lt;" in text else text


# -- qstat -xml -f -r -----------------------------------------------------------------

@dataclass
class QueueInstance:
    cluster_queue: str
    host: str
    used: int
    reserved: int
    total: int
    states: str


@dataclass(slots=True)
class SgeJob:
    number: str
    task: Optional[str]
    state: str
    glue_status: str
    sss_state: str
    finished: bool
    slots: int
    owner: Optional[str] = None
    name: Optional[str] = None
    project: Optional[str] = None
    department: Optional[str] = None
    start_time: Optional[float] = None  # running: when it started
    submit_time: Optional[float] = None  # pending: when it was submitted
    h_rt_s: Optional[int] = None  # the job's own hard_request h_rt
    requested_queues: list[str] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)  # queue@host it runs in (running jobs)
    priority: Optional[float] = None
    # For the SSS Job object (full=True only).
    cpu_s: Optional[int] = None  # -ext cpu_usage: CPU seconds so far (running jobs whose usage is reported)
    h_cpu_s: Optional[int] = None  # its hard_request h_cpu
    predecessors: tuple[str, ...] = ()  # the jobs it waits for (-hold_jid), resolved to job numbers
    instance_slots: Optional[list[int]] = None  # a parallel job's slots on each of ``instances``
    gpus: Optional[int] = None  # its hard_request of the GPU complex (per slot or per job: GpuComplex)

    @property
    def local_id(self) -> str:
        return f"{self.number}.{self.task}" if self.task else self.number

    @property
    def running(self) -> bool:
        return self.glue_status == "RUNNING"

    @property
    def eligible_pending(self) -> bool:
        return self.glue_status == "SCHEDULED"


@dataclass
class QstatReport:
    instances: list[QueueInstance]
    jobs: list[SgeJob]


def _int(element: Optional[Any], what: str) -> int:
    if element is None or element.text is None or not element.text.strip().isdigit():
        raise ValueError(f"{what} is {None if element is None else element.text!r}, not a count")
    return int(element.text)


def _split_instance(name: str) -> tuple[str, str]:
    queue, at, host = name.partition("@")
    if not at or not queue or not host:
        raise ValueError(f"queue instance name {name!r} is not QUEUE@HOST")
    return queue, host


# The job_list children read: the counts need these; a published job list (full) also the rest.
_JOB_TAGS_COUNTS = ("JB_job_number", "state", "slots", "JB_owner", "JAT_start_time", "JB_submission_time", "tasks",
                    "hard_req_queue", "hard_request")
_JOB_TAGS_FULL = (*_JOB_TAGS_COUNTS, "JB_name", "full_job_name", "JB_project", "JB_department", "JAT_prio",
                  "cpu_usage", "predecessor_jobs")
_CONTAINERS = ("queue_info", "job_info", "Queue-List", "job_list")


def _job(values: Mapping[str, str], queues: list[str], h_rt: Optional[int], instance: Optional[str], full: bool,
         read: _Readers) -> list[SgeJob]:
    jobs = _job_tasks(values, queues, h_rt, instance, full, read)
    gpus = values.get("gpus")
    if gpus is not None:
        count = read.count(gpus)
        for job in jobs:
            job.gpus = count
    return jobs


def _job_tasks(values: Mapping[str, str], queues: list[str], h_rt: Optional[int], instance: Optional[str],
               full: bool, read: _Readers) -> list[SgeJob]:
    """One ``job_list`` element's values (its children's texts by tag, the last of a tag winning; its
    ``hard_req_queue`` texts; its ``h_rt`` request) -> its jobs (one per array task).
    ValueError naming the first malformed value."""
    number = values.get("JB_job_number", "").strip()
    state = values.get("state", "").strip()
    if not number.isdigit():
        raise ValueError(f"job number {number!r}")
    glue_status, sss_state, finished = read.state(state)
    slots = int(values.get("slots", "1").strip() or "1")
    tasks_text = values.get("tasks", "").strip()
    tasks: Sequence[Optional[str]] = expand_tasks(tasks_text) if tasks_text else (None,)
    start = read.timestamp(values.get("JAT_start_time") or "")
    submit = read.timestamp(values.get("JB_submission_time") or "")
    # The owner is cheap and [vos] user: rules need it every cycle.
    owner = values.get("JB_owner", "").strip() or None
    instances = [instance] if instance else []
    if full:
        name = values.get("full_job_name", values.get("JB_name"))
        project = values.get("JB_project", "").strip() or None
        department = values.get("JB_department", "").strip() or None
        prio_text = values.get("JAT_prio", "").strip()
        prio = float(prio_text) if prio_text else None
        cpu_text = values.get("cpu_usage")
        cpu_s = int(float(cpu_text) + 0.5) if cpu_text else None
        h_cpu = read.time_s(values["h_cpu"]) if "h_cpu" in values else None
        predecessors = tuple(values["predecessor_jobs"].split(",")) if "predecessor_jobs" in values else ()
        return [SgeJob(number, task, state, glue_status, sss_state, finished, slots, owner,
                       _undo_lt(name) if name is not None else None, project, department, start, submit, h_rt,
                       queues, instances if len(tasks) == 1 else list(instances), prio, cpu_s, h_cpu, predecessors)
                for task in tasks]
    return [SgeJob(number, task, state, glue_status, sss_state, finished, slots, owner, None, None, None, start, submit,
                   h_rt, queues, instances if len(tasks) == 1 else list(instances)) for task in tasks]


def _memo(function: Callable[[str], Any]) -> Callable[[str], Any]:
    cache: dict[str, Any] = {}

    def lookup(key: str) -> Any:
        try:
            return cache[key]
        except KeyError:
            cache[key] = value = function(key)
            return value

    return lookup


@dataclass(frozen=True)
class _Readers:
    """Thousands of jobs share a few states, limits and (per second) times: each text is read once
    per parse (the caches live as long as one parse, never across refreshes)."""

    state: Callable[[str], Any] = field(default_factory=lambda: _memo(map_job_state))
    time_s: Callable[[str], Any] = field(default_factory=lambda: _memo(parse_time_s))
    timestamp: Callable[[str], Any] = field(default_factory=lambda: _memo(_timestamp))
    count: Callable[[str], Any] = field(default_factory=lambda: _memo(_request_count))


def _request_count(text: str) -> int:
    """A consumable's request as qstat -r prints it (``1``, ``2.000000``) -> a whole count; ValueError else."""
    value = float(text.strip())
    if not value >= 0 or value != int(value):
        raise ValueError(f"GPU request {text.strip()!r} is not a whole count")
    return int(value)


def _instance(queue: Any) -> tuple[QueueInstance, str]:
    """A ``Queue-List`` element -> its instance and name; SgeOutputError naming it when malformed."""
    name = queue.findtext("name") or ""
    try:
        cluster_queue, host = _split_instance(name)
        states = (queue.findtext("state") or "").strip()
        if not _QUEUE_LETTERS.fullmatch(states):
            raise ValueError(f"state {states!r}")
        return QueueInstance(cluster_queue, host, _int(queue.find("slots_used"), "slots_used"),
                             _int(queue.find("slots_resv"), "slots_resv"),
                             _int(queue.find("slots_total"), "slots_total"), states), name
    except (ValueError, TypeError) as exc:
        raise SgeOutputError(f"qstat -xml: queue instance {one_line(name, 60)!r}: {exc}") from None


class _QstatJobs:
    """The jobs of one ``qstat -xml`` parse, added one ``job_list`` at a time in document order."""

    def __init__(self, full: bool) -> None:
        self.full = full
        self.read = _Readers()
        self.jobs: list[SgeJob] = []
        self.running: dict[str, SgeJob] = {}

    def add(self, values: Mapping[str, str], queues: list[str], h_rt: Optional[int], instance: Optional[str],
            where: str) -> None:
        """The jobs of one job_list (``instance``: the queue instance it runs in; None: pending);
        SgeOutputError prefixed with ``where`` when malformed."""
        try:
            made = _job(values, queues, h_rt, instance, self.full, self.read)
        except (ValueError, TypeError) as exc:
            raise SgeOutputError(f"{where}: {exc}") from None
        if instance is None:
            self.jobs.extend(made)
            return
        for job in made:
            key = job.local_id
            seen = self.running.get(key)
            if seen is None:
                self.running[key] = job
                self.jobs.append(job)
            else:  # a parallel job's share on another instance
                if seen.instance_slots is None:
                    seen.instance_slots = [seen.slots]
                seen.instance_slots.append(job.slots)
                seen.slots += job.slots
                seen.instances.append(instance)

    def h_rt(self, text: str, where: str) -> Optional[int]:
        try:
            return self.read.time_s(text)  # type: ignore[no-any-return]
        except (ValueError, TypeError) as exc:
            raise SgeOutputError(f"{where}: {exc}") from None


def parse_qstat(text: str, full: bool = True, gpu_names: frozenset[str] = frozenset()) -> QstatReport:
    """``qstat -xml -f -r -u '*'`` (with or without ``-ext -pri``) -> queue instances and jobs.

    Read: ``job_info/queue_info/Queue-List`` (each a queue instance, with its
    running ``job_list`` children) and ``job_info/job_info/job_list`` (pending
    jobs); a job's fields are its direct children.  Elements anywhere else are
    ignored.  Any malformed instance or job fails the whole parse, naming it
    (the first in document order): counts from a partly understood queue
    would be wrong, not just incomplete.  A parallel job listed under several
    instances is one job with their slots summed.  ``full=False`` reads only
    what the counts, per-VO counts and estimates need (no names, projects,
    departments or priorities).  ``gpu_names``: the GPU complex's name and shortcut, whose
    ``hard_request`` each job's ``gpus`` is.
    """
    try:
        root = parse_xml(text, max_bytes=MAX_XML_BYTES, what="qstat -xml")
    except XMLInputError as exc:
        raise SgeOutputError(str(exc)) from None
    if root.tag != "job_info":
        raise SgeOutputError(f"qstat -xml: root element <{one_line(str(root.tag), 40)}>, not <job_info>")
    instances: list[QueueInstance] = []
    found = _QstatJobs(full)
    fields = frozenset(_JOB_TAGS_FULL if full else _JOB_TAGS_COUNTS)
    section: Any = None  # the job_info/queue_info or job_info/job_info being read
    section_tag = ""
    queue: Any = None  # the Queue-List being read
    queue_name = queue_where = ""
    pending = 0
    job: Any = None  # the job_list being read, and what is known of it
    instance: Optional[str] = None
    where = ""
    values: dict[str, str] = {}
    queues: list[str] = []
    h_rt: Optional[int] = None
    # One pass in document order over only the elements read, filtered by libxml2 (50,000 jobs carry
    # ~1.5 million elements; a job's other children never reach Python).  Where each belongs is told
    # by its parent: getparent() of a child of an element held here returns that element's own Python
    # object, so the identity tests cost no new object.
    for element in root.iter(*_CONTAINERS, *fields):
        tag = element.tag
        if tag in fields:
            if element.getparent() is job:  # never true while job is None: only the root has no parent
                if tag == "hard_req_queue":
                    queues.append((element.text or "").strip())
                elif tag == "hard_request":
                    name = element.get("name")
                    if name == "h_rt":
                        h_rt = found.h_rt(element.text or "", where)
                    elif name == "h_cpu":
                        values["h_cpu"] = element.text or ""
                    elif name in gpu_names:
                        values["gpus"] = element.text or ""
                elif tag == "predecessor_jobs":  # one element per job waited for
                    text = (element.text or "").strip()
                    values[tag] = f"{values[tag]},{text}" if tag in values else text
                else:
                    values[tag] = element.text or ""
            continue
        parent = element.getparent()
        if tag == "job_list":
            if queue is not None and parent is queue:
                where_next, instance_next = queue_where, queue_name
            elif section_tag == "job_info" and parent is section:
                pending += 1
                where_next, instance_next = f"qstat -xml: pending job record {pending}", None
            else:
                continue
        elif tag == "Queue-List":
            if section_tag != "queue_info" or parent is not section:
                continue
        elif parent is not root:  # queue_info or job_info, not a section
            continue
        if job is not None:
            found.add(values, queues, h_rt, instance, where)
            job = None
        if tag == "job_list":
            job, instance, where = element, instance_next, where_next
            values, queues, h_rt = {}, [], None
        elif tag == "Queue-List":
            one, queue_name = _instance(element)
            instances.append(one)
            queue, queue_where = element, f"qstat -xml: queue instance {one_line(queue_name, 60)!r}"
        else:
            section, section_tag, queue, pending = element, tag, None, 0
    if job is not None:
        found.add(values, queues, h_rt, instance, where)
    return QstatReport(instances, found.jobs)


# -- qhost -xml -----------------------------------------------------------------------

@dataclass
class HostInfo:
    name: str
    num_proc: Optional[int]  # None: '-', the execd does not report
    reporting: bool
    # qhost -F: what is left of each host consumable (resourcevalue dominance "hc"; "gc" on the pseudo
    # host "global": the cell's), by complex name
    consumables: dict[str, float] = field(default_factory=dict)


# The pseudo host qhost lists the cell's (global) consumables under; no execution host has this name.
GLOBAL_HOST = "global"


def parse_qhost(text: str) -> dict[str, HostInfo]:
    """``qhost -xml`` (with or without ``-F``) -> host name -> processors and what is left of its
    consumables.  The pseudo host ``global`` is kept only when ``-F`` gave it a global consumable
    (``gc``): under :data:`GLOBAL_HOST`, with no processors and not reporting; no queue instance is
    on it.  SgeOutputError for a document that is not qhost's or a value that is not a number."""
    try:
        root = parse_xml(text, max_bytes=MAX_XML_BYTES, what="qhost -xml")
    except XMLInputError as exc:
        raise SgeOutputError(str(exc)) from None
    if root.tag != "qhost":
        raise SgeOutputError(f"qhost -xml: root element <{one_line(str(root.tag), 40)}>, not <qhost>")
    hosts = {}
    for host in root.iterchildren("host"):
        name = (host.get("name") or "").strip()
        if not name:
            raise SgeOutputError("qhost -xml: a host without a name")
        values = {v.get("name"): (v.text or "").strip() for v in host.iterchildren("hostvalue")}
        num_proc = values.get("num_proc", "-")
        if num_proc != "-" and not num_proc.isdigit():
            raise SgeOutputError(f"qhost -xml: host {one_line(name, 60)!r}: num_proc {one_line(num_proc, 30)!r}")
        reporting = values.get("load_avg", "-") != "-"
        consumables = {}
        for resource in host.iterchildren("resourcevalue"):  # only with -F
            if resource.get("dominance") == ("gc" if name == GLOBAL_HOST else "hc"):
                try:
                    consumables[str(resource.get("name"))] = float((resource.text or "").strip())
                except ValueError:
                    raise SgeOutputError(f"qhost -xml: host {one_line(name, 60)!r}: {resource.get('name')} "
                                         f"{one_line(resource.text or '', 30)!r} is not a number") from None
        if name == GLOBAL_HOST:
            if consumables:
                hosts[name] = HostInfo(name, None, False, consumables)
            continue
        hosts[name] = HostInfo(name, int(num_proc) if num_proc.isdigit() else None, reporting, consumables)
    return hosts


# -- GPUs: a consumable complex -------------------------------------------------------

@dataclass(frozen=True)
class GpuComplex:
    """The consumable complex that counts GPUs (``[ce:NAME] sge_gpu_complex``), as qconf -sc defines it."""

    name: str
    shortcut: str
    per_job: bool  # consumable JOB: a job consumes its request once, not per slot

    @property
    def names(self) -> frozenset[str]:
        return frozenset((self.name, self.shortcut))


def parse_complex(text: str, name: str) -> GpuComplex:
    """``qconf -sc`` (``#name shortcut type relop requestable consumable default urgency`` lines) ->
    the complex ``name`` (or whose shortcut it is).  SgeOutputError when it is not there, or is not a
    consumable (YES: per slot; JOB: per job; UGE's HOST: per host, not read)."""
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if name not in fields[:2]:
            continue
        if len(fields) < 6:
            raise SgeOutputError(f"qconf -sc: unexpected line {one_line(line, 120)!r}")
        consumable = fields[5].upper()
        if consumable not in ("YES", "JOB"):
            raise SgeOutputError(f"sge_gpu_complex {name!r} is not a consumable per slot or job (qconf -sc: consumable "
                                 f"{fields[5]}): its GPUs are unknown")
        return GpuComplex(fields[0], fields[1], consumable == "JOB")
    raise SgeOutputError(f"sge_gpu_complex {name!r}: qconf -sc has no such complex: its GPUs are unknown")


def queue_gpus(report: QstatReport, nodes: Sequence[NodeAllocation], mine: Sequence[QueueInstance],
               hosts: Mapping[str, HostInfo], gpus: GpuComplex, max_nodes: Optional[int]) -> tuple[QueueAccelerators, ...]:
    """The queue's GPUs by glueinfo.lrms.accelerators' rule: each of its hosts has what ``qhost -F``
    says is left of the complex plus what the running jobs of every queue hold there; a host qhost
    gives none of it has no GPU.  ``nodes``: the NodeAllocations of ``mine``, in the same order."""
    held: dict[str, int] = {}
    for job in report.jobs:
        if not job.running or not job.gpus:
            continue
        shares = job.instance_slots or [job.slots]
        for name, slots in zip(job.instances, shares, strict=False):
            where = name.split("@", 1)[1]
            held[where] = held.get(where, 0) + (job.gpus if gpus.per_job else job.gpus * slots)
            if gpus.per_job:
                break  # consumed once, on the job's first (master) host
    readings = []
    for instance, node in zip(mine, nodes, strict=True):
        host = hosts.get(instance.host)
        left = host.consumables.get(gpus.name) if host is not None else None
        if left is None:
            continue
        used = held.get(instance.host, 0)
        readings.append(NodeAccelerators(None, int(round(left)) + used, used, node.state == "Idle"))
    return queue_accelerators(readings, max_nodes)


def requested_gpus(job: SgeJob, gpus: Optional[GpuComplex]) -> Optional[int]:
    """A job's requested GPUs: its request of the complex times its slots (per job: once)."""
    if gpus is None or not job.gpus:
        return None
    return job.gpus if gpus.per_job else job.gpus * job.slots


# -- the queue's view -----------------------------------------------------------------

def requests_queue(job: SgeJob, queue: str) -> bool:
    """A pending job waits for ``queue`` when one of its ``-q`` requests matches the cluster queue
    (``short``, ``sh*``, ``short@host``, ``*@@group``), or when it requested none."""
    if not job.requested_queues:
        return True
    return any(fnmatch.fnmatchcase(queue, request.split("@", 1)[0] or "*") for request in job.requested_queues)


def in_queue(job: SgeJob, queue: str) -> bool:
    if job.instances:
        return any(name.split("@", 1)[0] == queue for name in job.instances)
    return requests_queue(job, queue)


def response_times(jobs: Sequence[SgeJob], free_slots: int, usable_slots: int, queue_wall_s: Optional[int],
                   now: float) -> tuple[Optional[int], Optional[int]]:
    """(EstimatedResponseTime, WorstResponseTime) in seconds for a job submitted to the queue now.

    Grid Engine forecasts no start times (without advance reservation), so a drain
    model on time limits (the job's ``-l h_rt``, else the queue's wall limit):

    - a free usable slot and no job waiting (qw, not held): 0 and 0;
    - else ``W`` = sum over the waiting jobs of slots x limit, spread over the usable
      slots; Estimated = first + W / slots and Worst = last + W / slots, where
      first/last are the shortest/longest time a running job of the queue still
      has to its limit (0 with a free slot).
    Unknown (None) when a limit needed is unknown or there is no usable slot.
    """
    waiting = [j for j in jobs if j.eligible_pending]
    if free_slots > 0 and not waiting:
        return 0, 0
    if usable_slots <= 0:
        return None, None

    def limit(job: SgeJob) -> Optional[int]:
        return job.h_rt_s if job.h_rt_s is not None else queue_wall_s

    figures = drain([None if (lim := limit(j)) is None or j.start_time is None else j.start_time + lim - now
                     for j in jobs if j.running],
                    [(j.slots, limit(j)) for j in waiting], usable_slots, free_slots > 0)
    if figures is None:
        return None, None
    return int(round(figures.first + figures.spread)), int(round(figures.last + figures.spread))


def _jobs_of_queue(jobs: Iterable[SgeJob], queue: str) -> tuple[list[SgeJob], bool]:
    """The unfinished jobs of cluster queue ``queue`` (:func:`in_queue`), in order, and whether one
    of its pending jobs may wait in another queue too (:func:`_may_wait_elsewhere`); pending jobs'
    requests are matched once per distinct list of requests."""
    requested: dict[tuple[str, ...], bool] = {}
    shared = False
    mine = []
    for job in jobs:
        if job.finished:
            continue
        if job.instances:
            if not any(name.split("@", 1)[0] == queue for name in job.instances):
                continue
        else:
            key = tuple(job.requested_queues)
            wanted = requested.get(key)
            if wanted is None:
                wanted = requested[key] = requests_queue(job, queue)
                shared = shared or (wanted and _may_wait_elsewhere(key))
            if not wanted:
                continue
        mine.append(job)
    return mine, shared


def _may_wait_elsewhere(requests: Sequence[str]) -> bool:
    """Can a pending job with these ``-q`` requests wait in another cluster queue too: none (it waits
    in each), several, or a pattern."""
    return len(requests) != 1 or any(c in requests[0].split("@", 1)[0] for c in "*?[")


def _account(job: SgeJob) -> Optional[str]:
    """JB_project, else JB_department unless it is SGE's ``defaultdepartment``."""
    return job.project or (job.department if job.department and job.department != "defaultdepartment" else None)


def job_info(job: SgeJob, queue: str, lookup: dict[str, str], gpus: Optional[GpuComplex] = None) -> JobInfo:
    """The model's view of one Grid Engine job (GLUE CE Job / SSS Job); ``gpus``: the GPU complex, when read."""
    started = bool(job.instances)
    hosts = [site_host(name.split("@", 1)[1], lookup) for name in job.instances] if started else []
    account = _account(job)
    info = JobInfo(
        local_id=job.local_id, name=job.name, local_owner=job.owner, account=account, queue=queue,
        lrms_state=job.state, sss_state=job.sss_state, glue_status=job.glue_status,
        submit_time=job.submit_time, start_time=job.start_time if started else None,
        requested_processors=job.slots, requested_duration_s=job.h_rt_s,
        delivered_processors=job.slots if started else None,
        nodes=list(dict.fromkeys(hosts)),
        scheduler_specific=None,
    )
    if job.h_cpu_s is not None:  # set apart: see the other plugins' job_info
        info.cpu_time_limit_s = job.h_cpu_s
    if job.gpus:
        info.requested_accelerators = requested_gpus(job, gpus)
    if started:
        info.cpu_duration_s = job.cpu_s
        if job.instance_slots is None:
            info.node_processors = (job.slots,)
        else:  # a parallel job: its slots on each host (two queues' instances on one host are added up)
            per_host: dict[str, int] = {}
            for host, slots in zip(hosts, job.instance_slots, strict=True):
                per_host[host] = per_host.get(host, 0) + slots
            info.node_processors = tuple(per_host.values())
    if job.predecessors:  # -hold_jid: it starts once they have ended, however they ended
        info.dependencies = tuple(("OnExit", number) for number in job.predecessors)
    return info


# -- running the commands ------------------------------------------------------------

def tools_for(ctx: LrmsContext, deadline: float) -> Tools:
    """Tools for Grid Engine: ``sge_bin_dir``; ``SGE_ROOT``/``SGE_CELL`` from the CE's config (else
    the caller's); times in UTC; none of the caller's other ``SGE_*`` output settings."""
    drop = sorted(k for k in os.environ if k.startswith("SGE_") and k not in _KEEP_SGE_ENV)
    env = environment((), drop, SGE_ROOT=str(ctx.ce_config.get("sge_root") or ""),
                      SGE_CELL=str(ctx.ce_config.get("sge_cell") or ""))
    return commands.tools_for(ctx, "sge_bin_dir", env, deadline)


def _needs_accounts(ctx: LrmsContext) -> bool:
    return ctx.with_jobs or ctx.vo_map.matches_by("account")


def query(ctx: LrmsContext) -> QueueState:
    """The state of cluster queue ``ctx.queue``; see the module docstring.  LrmsQueryError (all
    unknown) when no queue is named or the qmaster cannot be reached; other failures partial."""
    # The collector is held off for the whole query, not just the parse: released at the end of a
    # parse, it would walk the 50,000 jobs' records at the next allocations, and a counts-only
    # refresh frees them all before it returns (see glueinfo.core.gc_pause).
    with collector_paused():
        return _query(ctx)


def _query(ctx: LrmsContext) -> QueueState:
    """:func:`query`, with the collector held off."""
    deadline = time.monotonic() + ctx.timeout_s
    tools = tools_for(ctx, deadline)
    now = ctx.clock()
    state = QueueState(lrms_type="sge", queue=ctx.queue, collected_at=now)
    step = Steps()
    errors = step.errors

    if not ctx.queue:
        raise LrmsQueryError("sge: no cluster queue named for this CE (set its queue)")
    queue = ctx.queue
    state.lrms_version = step(lambda: parse_version(tools("qstat", "-help")))
    gpu_name = str(ctx.ce_config.get("sge_gpu_complex") or "").strip()
    gpus: Optional[GpuComplex] = step(lambda: parse_complex(tools("qconf", "-sc"), gpu_name)) if gpu_name else None
    full = _needs_accounts(ctx)
    args = ["-xml", "-f", "-r", *(("-ext", "-pri") if full else ()), "-u", "*"]
    try:
        text = tools("qstat", *args)
        with collector_paused():  # 50,000 jobs' records: see glueinfo.core.gc_pause
            report = parse_qstat(text, full=full, gpu_names=gpus.names if gpus is not None else frozenset())
        del text
    except SgeOutputError as exc:
        errors.append(str(exc))
        report = None
    except LrmsQueryError as exc:
        if "commlib error" in str(exc) or "unable to contact qmaster" in str(exc):
            raise LrmsQueryError(f"sge: qmaster unreachable: {exc}") from None
        errors.append(str(exc))
        report = None
    hosts: Optional[dict[str, HostInfo]] = step(lambda: parse_qhost(tools(
        "qhost", "-xml", "-F", ",".join(("slots", gpus.name) if gpus is not None else ("slots",)))))
    config: Optional[dict[str, str]] = step(lambda: parse_queue_config(tools("qconf", "-sq", queue)))

    default_wall_s: Optional[int] = None
    if config is not None:
        try:
            default_wall_s, wall_s = queue_limit_s(config, "h_rt", "s_rt")
            cpu_s = queue_limit_s(config, "h_cpu", "s_cpu")[1]
            state.max_wall_clock_time_s, state.max_cpu_time_s = wall_s, cpu_s
            state.max_wall_clock_time_min = glue_minutes(wall_s)
            state.max_cpu_time_min = glue_minutes(cpu_s)
        except ValueError as exc:
            errors.append(f"qconf -sq {queue}: {exc}")

    if report is not None:
        with collector_paused():
            _fill_jobs(state, ctx, report, hosts, default_wall_s, now, errors, gpus)
        if gpus is not None and hosts is not None:
            mine = [i for i in report.instances if i.cluster_queue == queue]
            # a job of a queue without a parallel environment runs on one host
            one_host = config is not None and not queue_pes(config)
            state.accelerators = queue_gpus(report, state.nodes, mine, hosts, gpus, 1 if one_host else None)
    if config is not None:
        pes = {name: step(functools.partial(_read_pe, tools, name)) for name in queue_pes(config)}
        try:
            state.limits = queue_limits(config, pes, [i for i in report.instances if i.cluster_queue == queue]
                                        if report is not None else None)
        except ValueError as exc:
            errors.append(f"qconf -sq {queue} / -sp: {exc}")
    # A job that requested no queue waits in every queue: only the queue's instances or its
    # configuration name it (glueinfo.lrms.queues), and qconf -sql lists the cluster queues there are.
    named = any(i.cluster_queue == queue for i in report.instances) if report is not None else False
    queues.settle(state, named or (config is not None and config.get("qname") == queue),
                  lambda: [line.strip() for line in tools("qconf", "-sql").splitlines() if line.strip()], errors,
                  "cluster queue")
    state.error = step.error("sge")
    return state


def _read_pe(tools: Tools, name: str) -> dict[str, str]:
    return parse_pe_config(tools("qconf", "-sp", name))


def _fill_jobs(state: QueueState, ctx: LrmsContext, report: QstatReport, hosts: Optional[dict[str, HostInfo]],
               default_wall_s: Optional[int], now: float, errors: list[str], gpus: Optional[GpuComplex] = None) -> None:
    """The queue's nodes, status, job counts, per-VO counts, jobs and response times from qstat's report."""
    queue = state.queue or ""
    mine = [i for i in report.instances if i.cluster_queue == queue]
    free_slots = _fill_nodes_and_status(state, ctx, report, mine, hosts, errors)
    jobs, state.waiting_shared = _jobs_of_queue(report.jobs, queue)
    state.running_jobs = sum(1 for j in jobs if j.running)
    state.total_jobs = len(jobs)
    state.waiting_jobs = state.total_jobs - state.running_jobs
    if ctx.with_jobs:
        lookup = host_matcher([h.hostname for h in ctx.hosts])
        infos = [job_info(j, queue, lookup, gpus) for j in jobs]
        commands.assign_vos(ctx.vo_map, infos)
        state.vo_counts = count_by_vo(infos)
        state.jobs = infos
    else:  # the counts-only refresh: no JobInfo per job, the same counts
        state.vo_counts = commands.vo_counts(ctx.vo_map, [(j.owner, None, _account(j), None, j.glue_status)
                                                          for j in jobs])
    state.free_job_slots = free_job_slots(state.status, free_slots, state.max_running_jobs, state.running_jobs)
    if state.status == "Production":
        usable = sum(i.total for i in mine if _usable(i, hosts))
        state.estimated_response_time_s, state.worst_response_time_s = response_times(
            jobs, free_slots, usable, default_wall_s, now)


def _usable(instance: QueueInstance, hosts: Optional[Mapping[str, HostInfo]]) -> bool:
    """Can the scheduler give this instance a job now (no u/d/s/E/alarm state, execd reporting)?"""
    host = hosts.get(instance.host) if hosts else None
    return not (OFFLINE_LETTERS | BUSY_LETTERS | {"u"}).intersection(instance.states) and \
        (host is None or host.reporting)


def _fill_nodes_and_status(state: QueueState, ctx: LrmsContext, report: QstatReport, mine: list[QueueInstance],
                           hosts: Optional[Mapping[str, HostInfo]], errors: list[str]) -> int:
    """The queue's nodes, TotalCPUs, FreeCPUs and status; returns the free slots of its usable
    instances (what SGE would dispatch now: FreeJobSlots' figure, and the response times').

    An instance's free slots are at most what its host has left of the ``slots`` consumable (qhost
    ``hc:slots``), and the queue's at most what the cell has left (``gc:slots``), when an admin set
    one: the queues sharing a host's slots draw on the same count, and SGE dispatches no job past it.
    Without qhost, neither cap is known and the instances' free slots stand (FreeCPUs is unknown)."""
    lookup = host_matcher([h.hostname for h in ctx.hosts])
    # Slots every queue holds on each host: other queues' jobs use the same processors.
    held: dict[str, int] = {}
    for instance in report.instances:
        held[instance.host] = held.get(instance.host, 0) + instance.used + instance.reserved
    total_cpus = free_cpus = free_slots = 0
    nodes = []
    for instance in mine:
        host = hosts.get(instance.host) if hosts else None
        num_proc = host.num_proc if host else None
        reporting = host.reporting if host else True  # a host qhost does not list: its queue state says
        allocated = instance.used + instance.reserved
        slots_free = max(0, instance.total - allocated)
        host_left = host.consumables.get("slots") if host else None
        if host_left is not None:  # the host's slots, shared by its queues: what is left of them
            slots_free = min(slots_free, max(0, int(host_left)))
        total_cpus += min(instance.total, num_proc) if num_proc is not None else instance.total
        free_here = 0
        if _usable(instance, hosts):
            free_slots += slots_free
            free_here = min(slots_free, max(0, num_proc - held[instance.host])) if num_proc is not None else slots_free
            free_cpus += free_here
        sss = node_state(instance.states, reporting, allocated, instance.total)
        if sss == "Idle" and not free_here:  # free slots, but every processor of the host held by its queues' jobs
            sss = "Busy"
        nodes.append(NodeAllocation(
            name=site_host(instance.host, lookup), state=sss, lrms_state=instance.states or None,
            total_cpus=instance.total, allocated_cpus=allocated, free_cpus=free_here,
            reason=_reason(instance.states) if sss in ("Offline", "Unknown") else None))
    cell = hosts.get(GLOBAL_HOST) if hosts else None
    cell_left = cell.consumables.get("slots") if cell else None
    if cell_left is not None:  # the cell's slots, shared by every queue
        free_slots = min(free_slots, max(0, int(cell_left)))
        free_cpus = min(free_cpus, max(0, int(cell_left)))
    state.nodes = nodes
    state.hosts = list(dict.fromkeys(n.name for n in nodes))
    state.total_cpus = total_cpus
    state.free_cpus = free_cpus if hosts is not None or not mine else None
    if hosts is None and mine:
        errors.append("free CPUs unknown without qhost")
    state.status = queue_status(mine, hosts)
    return free_slots


_REASONS = {"d": "disabled", "D": "disabled by calendar", "s": "suspended", "S": "suspended (subordinate)",
            "C": "suspended by calendar", "E": "error", "o": "orphaned", "u": "unknown (execd not reporting)"}


def _reason(letters: str) -> Optional[str]:
    words = [_REASONS[c] for c in letters if c in _REASONS]
    return ", ".join(words) if words else "execd not reporting"


def queue_status(instances: Sequence[QueueInstance], hosts: Optional[Mapping[str, HostInfo]]) -> str:
    """GLUE status of a cluster queue from its instances.

    Production: at least one instance can be given a job (states empty or only
    c, execd reporting); Closed: the queue has no instance (``qsub`` refuses
    it); Queueing otherwise: jobs are accepted and wait, which is GLUE's
    Queueing, whether the instances are disabled (``qmod -d``, or by a
    calendar: d/D; SGE still accepts ``qsub`` into them), suspended, in
    error, unknown or over a load threshold.  Grid Engine has no per-queue
    draining.
    """
    if any(_usable(i, hosts) for i in instances):
        return "Production"
    if not instances:
        return "Closed"
    return "Queueing"


def iter_states() -> Iterable[tuple[str, str, str]]:
    """(Grid Engine state, GLUE status, SSS state) rows, for the docs table and tests."""
    for letters in ("qw", "hqw", "Eqw", "t", "r", "Rr", "hr", "s", "S", "T", "dr", "dt", "dqw", "z"):
        glue, sss, _finished = map_job_state(letters)
        yield letters, glue, sss


LRMS = LrmsPlugin(name="sge", query=query, owner_kinds=("user", "account"),  # qstat -xml has no group
                  description="Grid Engine cluster queue via qstat/qhost/qconf -xml")
