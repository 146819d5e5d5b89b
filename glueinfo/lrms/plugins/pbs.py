"""LRMS plugin ``pbs``: a CE queue is a PBS queue (OpenPBS / PBS Pro, or Torque).

The two families share the PBS attribute names but print them differently:

============================  =====================================  ===========================
what                          OpenPBS / PBS Pro (``openpbs``)        Torque (``torque``)
============================  =====================================  ===========================
version, family               ``qstat --version``: ``pbs_version =   ``qstat --version``:
                              23.06.06``                             ``Version: 6.1.3``
queue                         ``qstat -Q -f -F json QUEUE``          ``qstat -Q -f QUEUE`` (text)
jobs                          ``qstat -f -t -F json QUEUE``          ``qstat -f -x -t QUEUE`` (XML)
nodes                         ``pbsnodes -a -F json``                ``pbsnodes -x`` (XML)
GLUE LRMSType                 ``pbs``                                ``torque``
============================  =====================================  ===========================

``[ce:NAME] pbs_flavour`` is ``auto`` (decided by the ``qstat --version``
line above), ``openpbs`` or ``torque``; ``pbs_bin_dir`` is where the tools
are.  Commands run with ``TZ=UTC`` (OpenPBS prints job times as local ctime
strings) and without ``PBS_*``/``QSTAT_*`` settings that change their output.

A queue no answer names (``qstat -Q -f QUEUE`` fails, no job of it is
listed) is looked for in ``qstat -Q -f``, every queue the server has: absent
there, it is a queue the server does not have (Closed, no count, one ERROR:
glueinfo.lrms.queues); with no list either, its counts are unknown.

Failures: the flavour cannot be decided -> LrmsQueryError (nothing else can
be read).  Any other step that fails (server down, command missing, malformed
JSON or XML) leaves the fields it feeds None and adds a one-line reason to
``QueueState.error``; the other steps still fill theirs.  A job list that is
partly malformed fails whole: counts from a partly understood queue would be
wrong, not just incomplete.  Torque's XML is read by ``glueinfo.core.xmlsafe``
(no DTD, no entities); a document it refuses is read again after characters
XML 1.0 forbids (control characters in job names) are replaced and a bare
``&`` is escaped: never a recovering parser.  OpenPBS's job list is decoded
by msgspec into only the attributes read, and by json.loads when msgspec
refuses it (:func:`_openpbs_jobs`): the same jobs or error either way.

Mappings (docs/lrms/pbs.md has the tables): queue enabled/started -> GLUE
status (:func:`glue_status_of_queue`); job_state letters -> GLUE/SSS
(``JOB_STATES``); node states -> SSS (:func:`sss_node_state`); FreeCPUs
within an OpenPBS queue's own ncpus limits (:func:`queue_free_cpus`); response
times (:func:`response_times`); GPUs (:func:`queue_gpus`): OpenPBS's
``ngpus`` consumable (``resources_available`` / ``resources_assigned`` of
each vnode, a job's ``Resource_List.ngpus``, the queue's
``resources_max.ngpus``), Torque's ``gpus`` of pbsnodes and ``gpus=`` of a
job's nodes request.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any, Optional, Protocol, TypedDict

import msgspec

from glueinfo.core import xmlsafe
from glueinfo.core.gc_pause import collector_paused
from glueinfo.core.job import JobInfo, private_fields
from glueinfo.core.model import NodeAllocation, QueueAccelerators, QueueLimits, QueueState
from glueinfo.core.text import one_line
from glueinfo.lrms import commands, queues
from glueinfo.lrms.accelerators import NodeAccelerators, queue_accelerators
from glueinfo.lrms.commands import Tools, environment
from glueinfo.lrms.figures import FINISHED_STATES, free_job_slots, glue_minutes, within_limit
from glueinfo.lrms.names import host_matcher, site_host
from glueinfo.lrms.registry import LrmsContext, LrmsPlugin, LrmsQueryError
from glueinfo.lrms.response import drain, from_forecasts, halved
from glueinfo.lrms.vo_map import KINDS, count_by_vo

FLAVOURS = ("openpbs", "torque")

# PBS job_state letter -> (GLUE CE job status, SSS job State).  B (an array
# job whose subjobs have begun) is left out: with ``-t`` its subjobs are listed
# and counted themselves.
JOB_STATES: dict[str, tuple[str, str]] = {
    "T": ("SUBMITTED", "Idle"),  # being moved to a new location
    "Q": ("SCHEDULED", "Idle"),  # queued, eligible to run
    "H": ("WAITING", "Hold"),  # held
    "W": ("WAITING", "Hold"),  # waiting for its requested start time (qsub -a)
    "R": ("RUNNING", "Running"),
    "E": ("RUNNING", "Running"),  # exiting after having run: still holds its CPUs
    "S": ("WAITING", "Suspended"),  # suspended by the server
    "U": ("WAITING", "Suspended"),  # OpenPBS: suspended, workstation busy
    "C": ("DONE", "Completed"),  # Torque: completed (kept for keep_completed seconds)
    "F": ("DONE", "Completed"),  # OpenPBS: finished (history)
    "X": ("DONE", "Completed"),  # OpenPBS: subjob finished
    "M": ("CLEARED", "Completed"),  # OpenPBS: moved to another server
}
ARRAY_PARENT = "B"

# Variables that change what qstat/pbsnodes print (OpenPBS's PBS_QSTAT_* defaults, Torque's QSTAT_*).
_OUTPUT_ENV_PREFIXES = ("PBS_QSTAT", "QSTAT_")


class PbsOutputError(LrmsQueryError):
    """Output that is not in the shape asked for."""


class PbsQueueError(LrmsQueryError):
    """The CE names a queue that cannot serve it (a routing queue): fatal for the query."""


# -- small parsers ---------------------------------------------------------------------

def parse_version(text: str) -> tuple[str, str]:
    """``qstat --version`` -> (flavour, version).

    OpenPBS and PBS Pro print ``pbs_version = 23.06.06``; Torque prints
    ``Version: 6.1.3`` (some releases more lines after it, or ``version:``).
    """
    for line in text.splitlines():
        match = re.fullmatch(r"\s*pbs_version\s*=\s*(\S+)\s*", line)
        if match:
            return "openpbs", match.group(1)
        match = re.fullmatch(r"\s*[Vv]ersion:\s*(\S+)\s*", line)
        if match:
            return "torque", match.group(1)
    raise PbsOutputError(f"qstat --version: unexpected output {one_line(text, 120)!r}")


def parse_duration_s(text: Any) -> Optional[int]:
    """A PBS time: ``[[HH:]MM:]SS[.ms]`` (hours may pass 24) or a bare number of seconds -> seconds.

    ValueError when it is neither.  PBS prints walltime and cput this way in
    both families, e.g. ``72:00:00`` is 3 days.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a PBS duration: {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"not a PBS duration: {text!r}")
        return int(text)
    text = str(text).strip()
    parts = text.split(":")
    if not text or len(parts) > 3 or not all(re.fullmatch(r"\d+(?:\.\d+)?", p) for p in parts):
        raise ValueError(f"not a PBS duration: {text!r}")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + float(part)
    return int(seconds)


_SIZE_UNITS = {"b": 1 / 2**20, "w": 8 / 2**20, "kb": 1 / 1024, "kw": 8 / 1024, "mb": 1, "mw": 8, "gb": 1024, "gw": 8192,
               "tb": 2**20, "tw": 8 * 2**20, "pb": 2**30, "pw": 8 * 2**30}


def parse_size_limit_mb(value: Any) -> Optional[int]:
    """A queue's memory limit (``resources_max.mem = 16gb``) in whole MB, rounded down so no more is
    promised than the queue allows; None when absent or under 1 MB.  ValueError when not a PBS size."""
    if value is None or value == "":
        return None
    text = str(value).strip().lower()
    match = re.fullmatch(r"(\d+)([kmgtp]?[bw]?)", text)
    unit = (match.group(2) or "b") if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"not a PBS size: {text!r}")
    return int(int(match.group(1)) * _SIZE_UNITS[unit]) or None


def parse_size_mb(text: Any) -> Optional[int]:
    """A PBS size (``4gb``, ``512mb``, ``1048576kb``, bytes when bare) -> MB; None for 0."""
    text = str(text).strip().lower()
    match = re.fullmatch(r"(\d+)([kmgtp]?[bw]?)", text)
    if not match:
        raise ValueError(f"not a PBS size: {text!r}")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2) or "b"]
    return int(round(value)) or None


_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


def parse_time(value: Any) -> Optional[float]:
    """A job time: Torque's Unix seconds, or OpenPBS's ctime string printed with TZ=UTC
    (``Mon Nov 20 10:00:00 2023``) -> Unix time.  ValueError otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    if text.isdigit():
        return float(text)
    parts = text.split()
    if len(parts) != 5 or parts[1] not in _MONTHS:
        raise ValueError(f"not a PBS time: {text!r}")
    hms = parts[3].split(":")
    if len(hms) != 3:
        raise ValueError(f"not a PBS time: {text!r}")
    return float(calendar.timegm((int(parts[4]), _MONTHS[parts[1]], int(parts[2]), int(hms[0]), int(hms[1]), int(hms[2]),
                                  0, 0, 0)))


def _int(value: Any) -> Optional[int]:
    if value is None or value == "" or isinstance(value, bool):
        return None
    return int(str(value).strip())


def _true(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "t", "1", "yes", "y")


def parse_limit(value: Any) -> Optional[int]:
    """A queue job limit: old style (``max_running = 10``) or PBS Pro's new style
    (``[o:PBS_ALL=100]``, ``[u:PBS_GENERIC=10] [o:PBS_ALL=200]``): the overall (``o:PBS_ALL``) one,
    None when only per-user/group limits are set."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    match = re.search(r"\[o:PBS_ALL=(\d+)\]", text)
    if match:
        return int(match.group(1))
    if text.startswith("["):
        return None
    raise ValueError(f"not a PBS job limit: {text!r}")


def exec_host_cpus(text: str) -> dict[str, int]:
    """``exec_host`` -> {host: CPUs}, in order.

    OpenPBS: ``n1/0*2+n2/0*2`` (host/index[*count]); Torque: ``n1/0-3+n2/0-3``,
    ``n1/0+n1/1`` or ``n1/0-1,3``.  ValueError when malformed.
    """
    hosts: dict[str, int] = {}
    for chunk in text.strip().split("+"):
        if not chunk:
            continue
        host, slash, cpus = chunk.partition("/")
        if not host or not slash:
            raise ValueError(f"not a PBS exec_host: {text!r}")
        count = 0
        if "*" in cpus:
            index, _, times = cpus.partition("*")
            if not index.isdigit() or not times.isdigit():
                raise ValueError(f"not a PBS exec_host: {text!r}")
            count = int(times)
        else:
            for item in cpus.split(","):
                cpu_count = _cpu_count(item.strip())
                if cpu_count is None:
                    raise ValueError(f"not a PBS exec_host: {text!r}")
                count += cpu_count
        hosts[host] = hosts.get(host, 0) + count
    return hosts


def _cpu_count(item: str) -> Optional[int]:
    """CPU indices ``N`` or ``N-M`` -> how many (M - N + 1); None when not of that form.  String
    methods rather than a regex: ~25,000 items a refresh (isdecimal() is what \\d matches)."""
    if item.endswith("\n"):  # one trailing newline passes, as it did the regex's $
        item = item[:-1]
    if item.isdecimal():
        return 1
    first, dash, last = item.partition("-")
    return int(last) - int(first) + 1 if dash and first.isdecimal() and last.isdecimal() else None


def exec_vnode_cpus(text: str) -> dict[str, int]:
    """OpenPBS ``exec_vnode`` ``(n1:ncpus=2:mem=1gb)+(n2:ncpus=2)`` -> {vnode: CPUs}."""
    hosts: dict[str, int] = {}
    for chunk in text.strip().split("+"):
        chunk = chunk.strip().strip("()")
        if not chunk:
            continue
        # a chunk may span vnodes of one host: (n1[0]:ncpus=1+n1[1]:ncpus=1) is split above already
        name, _, resources = chunk.partition(":")
        ncpus = re.search(r"(?:^|:)ncpus=(\d+)", resources)
        hosts[name] = hosts.get(name, 0) + (int(ncpus.group(1)) if ncpus else 0)
    return hosts


def node_jobs_cpus(value: Any) -> int:
    """CPUs taken by a node's ``jobs`` list: Torque 6 ``0-3/12.srv,4/13.srv``, Torque 2-4
    ``0/12.srv, 1/12.srv``, OpenPBS ``12.srv/0, 12.srv/1`` or a JSON list of those."""
    items = value if isinstance(value, list) else str(value or "").split(",")
    count = 0
    for item in items:
        item = str(item).strip()
        if not item:
            continue
        left, _, right = item.partition("/")
        cpu_count = _cpu_count(left)
        if cpu_count is None:
            cpu_count = _cpu_count(right)
        if cpu_count is None:
            raise ValueError(f"not a PBS node jobs entry: {item!r}")
        count += cpu_count
    return count


# -- queue -----------------------------------------------------------------------------

@dataclass
class PbsQueue:
    name: str
    queue_type: str
    enabled: bool
    started: bool
    max_wall_s: Optional[int]
    default_wall_s: Optional[int]
    max_cput_s: Optional[int]
    max_running: Optional[int]
    max_total: Optional[int]
    priority: Optional[int]
    required_property: Optional[str]  # Torque resources_default.neednodes naming a node property
    has_nodes: bool  # OpenPBS: some nodes are bound to this queue
    # resources_max / resources_default of what one job may have (None: not set)
    default_cput_s: Optional[int] = None
    max_ncpus: Optional[int] = None
    max_mem_mb: Optional[int] = None
    default_mem_mb: Optional[int] = None
    max_vmem_mb: Optional[int] = None
    max_ngpus: Optional[int] = None  # resources_max.ngpus (OpenPBS's GPU consumable)
    # OpenPBS: the CPUs the queue's running jobs may hold together (the lower of resources_available.ncpus and
    # max_run_res.ncpus's overall [o:PBS_ALL=N]; None: neither set) and those they hold (resources_assigned.ncpus;
    # None: not printed)
    ncpus_limit: Optional[int] = None
    ncpus_assigned: Optional[int] = None


def queue_limits(queue: PbsQueue) -> QueueLimits:
    """What one job of the queue may have (docs/lrms/pbs.md has the table): DefaultWallTime and
    DefaultCPUTime from resources_default.walltime/cput (never past the maximum beside them),
    MaxSlotsPerJob from resources_max.ncpus, MaxMainMemory from resources_max.mem,
    GuaranteedMainMemory from resources_default.mem (what a job that asks for none is given, and the
    scheduler sets aside: mem is a consumable resource), MaxVirtualMemory from resources_max.vmem.
    PBS's mem is a whole job's: a one-slot job may have all of it (GLUE 2's figures are per slot)."""
    def capped(default: Optional[int], limit: Optional[int]) -> Optional[int]:
        return default if default is None or limit is None else min(default, limit)

    return QueueLimits(default_wall_clock_time_s=capped(queue.default_wall_s, queue.max_wall_s),
                       default_cpu_time_s=capped(queue.default_cput_s, queue.max_cput_s),
                       max_slots_per_job=queue.max_ncpus, max_main_memory_mb=queue.max_mem_mb,
                       guaranteed_main_memory_mb=capped(queue.default_mem_mb, queue.max_mem_mb),
                       max_virtual_memory_mb=queue.max_vmem_mb)


def glue_status_of_queue(enabled: bool, started: bool) -> str:
    """GLUE status of a PBS queue: enabled (accepts jobs) and started (runs them) -> Production;
    enabled, not started -> Queueing; started, not enabled -> Draining (its jobs still run, no
    new ones come in); neither -> Closed."""
    if enabled:
        return "Production" if started else "Queueing"
    return "Draining" if started else "Closed"


def parse_queue_text(text: str, name: str) -> PbsQueue:
    """``qstat -Q -f QUEUE`` (both families): ``Queue: NAME`` then ``key = value`` lines;
    values wrapped past 80 columns continue on a tab-indented line."""
    attributes: dict[str, str] = {}
    current: Optional[str] = None
    last: Optional[str] = None
    seen = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("Queue:"):
            current = line.split(":", 1)[1].strip()
            seen = seen or current == name
            last = None
            continue
        if current != name:
            continue
        if " = " in line and not line.startswith("\t"):
            key, _, value = line.partition(" = ")
            last = key.strip()
            attributes[last] = value.strip()
        elif last is not None:
            attributes[last] += line.strip()
        else:
            raise PbsOutputError(f"qstat -Q -f {name}: unexpected line {one_line(line, 120)!r}")
    if not seen:
        raise PbsOutputError(f"qstat -Q -f: no queue {name!r} in output")
    return _queue_from(name, lambda key: attributes.get(key))


def queue_names(text: str) -> list[str]:
    """``qstat -Q -f`` (both families, text): the name of every queue the server has."""
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Queue:")]


def parse_queue_json(text: str, name: str) -> PbsQueue:
    """``qstat -Q -f -F json QUEUE``: ``{"Queue": {NAME: {attributes, resources_max: {...}}}}``."""
    data = _load_json(text, "qstat -Q -f -F json")
    queue = (data.get("Queue") or {}).get(name)
    if not isinstance(queue, dict):
        raise PbsOutputError(f"qstat -Q -f -F json: no queue {name!r} in output")

    def get(key: str) -> Any:
        head, dot, tail = key.partition(".")
        if dot:
            group = queue.get(head)
            return group.get(tail) if isinstance(group, dict) else None
        return queue.get(key)

    return _queue_from(name, get)


def _queue_from(name: str, get: Callable[[str], Any]) -> PbsQueue:
    where = f"queue {name}"
    try:
        queue_type = str(get("queue_type") or "")
        if queue_type.lower().startswith("r"):
            raise PbsQueueError(f"{where} is a routing queue: it runs no jobs (name an execution queue)")
        if get("enabled") is None or get("started") is None:
            raise PbsOutputError(f"{where}: no enabled/started attributes in qstat -Q -f output")
        wall = get("resources_max.walltime")
        default_wall = get("resources_default.walltime")
        cput = get("resources_max.cput")
        default_cput = get("resources_default.cput")
        neednodes = str(get("resources_default.neednodes") or "").strip()
        # neednodes is "N", "N:ppn=M" or a property (optionally after a count): the property binds nodes
        words = [w for w in re.split(r"[:+]", neednodes) if w and not w[0].isdigit() and "=" not in w]
        max_running = get("max_running")
        ncpus_limits = [n for n in (_int(get("resources_available.ncpus")), parse_limit(get("max_run_res.ncpus")))
                        if n is not None]
        return PbsQueue(
            name=name, queue_type=queue_type, enabled=_true(get("enabled")), started=_true(get("started")),
            max_wall_s=parse_duration_s(wall) if wall not in (None, "") else None,
            default_wall_s=parse_duration_s(default_wall) if default_wall not in (None, "") else None,
            max_cput_s=parse_duration_s(cput) if cput not in (None, "") else None,
            max_running=parse_limit(max_running if max_running not in (None, "") else get("max_run")),
            max_total=parse_limit(get("max_queuable") if get("max_queuable") not in (None, "") else get("max_queued")),
            priority=_int(get("Priority")),
            required_property=words[0] if words else None,
            has_nodes=_true(get("hasnodes")),
            default_cput_s=parse_duration_s(default_cput) if default_cput not in (None, "") else None,
            max_ncpus=_int(get("resources_max.ncpus")) or None,
            max_mem_mb=parse_size_limit_mb(get("resources_max.mem")),
            default_mem_mb=parse_size_limit_mb(get("resources_default.mem")),
            max_vmem_mb=parse_size_limit_mb(get("resources_max.vmem")),
            max_ngpus=_int(get("resources_max.ngpus")) or None,
            ncpus_limit=min(ncpus_limits) if ncpus_limits else None,
            ncpus_assigned=_int(get("resources_assigned.ncpus")))
    except ValueError as exc:
        raise PbsOutputError(f"qstat -Q -f {name}: {exc}") from None


# -- nodes -----------------------------------------------------------------------------

@dataclass
class PbsNode:
    name: str
    hostname: str
    state: str  # the LRMS's words, e.g. "job-busy" or "down,offline"
    total: Optional[int]
    allocated: Optional[int]
    queue: Optional[str] = None  # OpenPBS: the queue the node is bound to
    properties: tuple[str, ...] = ()  # Torque
    comment: Optional[str] = None
    gpus: Optional[int] = None  # OpenPBS resources_available.ngpus, Torque gpus; None: none stated
    gpus_used: Optional[int] = None  # OpenPBS resources_assigned.ngpus; None: not told (Torque)


_OFFLINE_STATES = frozenset({"offline", "down", "maintenance", "sleep", "provisioning", "wait-provisioning", "initializing"})
_UNKNOWN_STATES = frozenset({"state-unknown", "unknown", "stale", "unresolvable"})
_FULL_STATES = frozenset({"job-exclusive", "resv-exclusive", "job-busy", "busy", "reserve"})


def sss_node_state(state: str, total: Optional[int], allocated: Optional[int]) -> str:
    """SSS Node State of a PBS node (checked in this order): ``offline`` (an admin's) -> Offline;
    ``state-unknown``/``unknown``/``stale``/``unresolvable`` (the server lost it) -> Unknown;
    ``down``, ``maintenance``, ``sleep``, provisioning -> Offline; ``job-exclusive``,
    ``resv-exclusive``, ``job-busy``, ``busy``, ``reserve`` -> Busy; else Idle when a CPU is
    unallocated, Busy when none is."""
    words = {w.strip().lower() for w in state.split(",")}
    if "offline" in words:
        return "Offline"
    if words & _UNKNOWN_STATES:
        return "Unknown"
    if words & _OFFLINE_STATES:
        return "Offline"
    if words & _FULL_STATES:
        return "Busy"
    if total is None or allocated is None:
        return "Unknown"
    return "Idle" if total > allocated else "Busy"


def parse_nodes_json(text: str) -> list[PbsNode]:
    """``pbsnodes -a -F json``: ``{"nodes": {NAME: {state, resources_available: {ncpus, host},
    resources_assigned: {ncpus}, queue, comment, jobs}}}``."""
    data = _load_json(text, "pbsnodes -a -F json")
    items = data.get("nodes")
    if items is None:
        return []
    if not isinstance(items, dict):
        raise PbsOutputError("pbsnodes -a -F json: 'nodes' is not an object")
    nodes = []
    for name, item in items.items():
        if not isinstance(item, dict):
            raise PbsOutputError(f"pbsnodes -a -F json: node {one_line(name, 120)!r} is not an object")
        available = item.get("resources_available") or {}
        assigned = item.get("resources_assigned") or {}
        try:
            total = _int(available.get("ncpus", item.get("pcpus")))
            allocated = _int(assigned.get("ncpus")) if "ncpus" in assigned else (
                node_jobs_cpus(item["jobs"]) if "jobs" in item else 0)
            gpus = _int(available.get("ngpus"))
            # resources_assigned lists a consumable once a job was given some: none listed and no job is 0
            gpus_used = _int(assigned.get("ngpus")) if "ngpus" in assigned else (None if item.get("jobs") else 0)
        except (ValueError, AttributeError) as exc:
            raise PbsOutputError(f"pbsnodes -a -F json: node {one_line(name, 120)!r}: {exc}") from None
        host = str(available.get("host") or item.get("Mom") or name)
        nodes.append(PbsNode(name=str(name), hostname=host, state=str(item.get("state") or "state-unknown"),
                             total=total, allocated=allocated,
                             queue=str(item["queue"]) if item.get("queue") else None,
                             comment=str(item["comment"]) if item.get("comment") else None,
                             gpus=gpus, gpus_used=gpus_used if gpus else None))
    return nodes


def parse_nodes_xml(text: str) -> list[PbsNode]:
    """Torque ``pbsnodes -x``: ``<Data><Node><name/><state/><np/><properties/><jobs/><note/></Node>...``."""
    if not text.strip():
        return []
    root = _torque_xml(text, "pbsnodes -x")
    nodes = []
    for element in root.iter("Node"):
        fields = {child.tag: (child.text or "") for child in element if isinstance(child.tag, str)}
        name = fields.get("name", "").strip()
        if not name:
            raise PbsOutputError("pbsnodes -x: a node without a name")
        try:
            total = _int(fields.get("np"))
            allocated = node_jobs_cpus(fields.get("jobs", ""))
            gpus = _int(fields.get("gpus"))  # the nodes file's gpus=N; which are in use pbsnodes does not say
        except ValueError as exc:
            raise PbsOutputError(f"pbsnodes -x: node {one_line(name, 120)!r}: {exc}") from None
        properties = tuple(p.strip() for p in fields.get("properties", "").split(",") if p.strip())
        nodes.append(PbsNode(name=name, hostname=name, state=fields.get("state", "").strip() or "unknown",
                             total=total, allocated=allocated, properties=properties,
                             comment=fields.get("note", "").strip() or None, gpus=gpus))
    return nodes


def queue_nodes(nodes: Sequence[PbsNode], queue: Optional[PbsQueue], flavour: str) -> list[PbsNode]:
    """The nodes that serve ``queue``.

    OpenPBS: when some nodes are bound to the queue (the node's ``queue``
    attribute, the queue's ``hasnodes``) those; otherwise every node bound
    to no queue.  Torque: when the queue's ``resources_default.neednodes``
    names a node property, the nodes with it; otherwise every node.  Unknown
    queue (its step failed): every node.
    """
    if queue is None:
        return list(nodes)
    if flavour == "openpbs":
        bound = [n for n in nodes if n.queue == queue.name]
        return bound if (bound or queue.has_nodes) else [n for n in nodes if n.queue is None]
    if queue.required_property:
        return [n for n in nodes if queue.required_property in n.properties]
    return list(nodes)


def queue_gpus(nodes: Sequence[PbsNode], allocations: Sequence[NodeAllocation],
               queue: Optional[PbsQueue]) -> tuple[QueueAccelerators, ...]:
    """The queue's GPUs by glueinfo.lrms.accelerators' rule: each node's ngpus (Torque: gpus) and
    those assigned to jobs (Torque does not say: used and free unknown), one job at most the
    queue's ``resources_max.ngpus``.  PBS names no GPU model: the model is left out."""
    return queue_accelerators(
        (NodeAccelerators(None, node.gpus, node.gpus_used, allocation.state == "Idle")
         for node, allocation in zip(nodes, allocations, strict=True) if node.gpus),
        max_per_job=queue.max_ngpus if queue is not None else None)


def node_allocations(nodes: Sequence[PbsNode], lookup: dict[str, str]) -> list[NodeAllocation]:
    result = []
    for node in nodes:
        state = sss_node_state(node.state, node.total, node.allocated)
        result.append(NodeAllocation(name=site_host(node.hostname, lookup), state=state, lrms_state=node.state,
                                     total_cpus=node.total, allocated_cpus=node.allocated,
                                     reason=node.comment if state == "Offline" else None))
    return result


# -- jobs ------------------------------------------------------------------------------

@dataclass(slots=True)
class PbsJob:
    job_id: str
    state: str
    glue_status: str
    sss_state: str
    owner: Optional[str]
    group: Optional[str]
    account: Optional[str]
    walltime_limit_s: Optional[int]
    walltime_used_s: Optional[int]
    cpus: Optional[int]
    estimated_start: Optional[float]  # OpenPBS: estimated.start_time of a top job
    # A published job list (full=True) only: the job's nodes and CPUs (exec_host), whether it started, and
    # its JobInfo, made at once from the attributes (job_info adds the nodes' site names).
    exec_hosts: dict[str, int] = field(default_factory=dict)
    started: bool = False
    info: Optional[JobInfo] = None

    @property
    def finished(self) -> bool:
        return self.glue_status in FINISHED_STATES

    @property
    def running(self) -> bool:
        return self.glue_status == "RUNNING"


@dataclass
class JobColumns:
    """A job list read for the counts only: per job, in the order listed (array parents left out), what
    the counts, the per-VO counts and the estimates read of it, one list per attribute and no PbsJob
    per job (:func:`count_jobs_xml`; :meth:`of` for a list of PbsJobs)."""

    glue_statuses: list[str]
    owners: list[Optional[str]]
    groups: list[Optional[str]]
    accounts: list[Optional[str]]
    walltime_limits_s: list[Optional[int]]
    walltimes_used_s: list[Optional[int]]
    cpus: list[Optional[int]]
    estimated_starts: list[Optional[float]]

    @classmethod
    def of(cls, jobs: Sequence[PbsJob]) -> JobColumns:
        return cls([j.glue_status for j in jobs], [j.owner for j in jobs], [j.group for j in jobs],
                   [j.account for j in jobs], [j.walltime_limit_s for j in jobs], [j.walltime_used_s for j in jobs],
                   [j.cpus for j in jobs], [j.estimated_start for j in jobs])

    def count(self, state: QueueState) -> None:
        """Running/Waiting/TotalJobs by the rule of :func:`glueinfo.lrms.commands.count_jobs`."""
        by_status = Counter(self.glue_statuses)
        state.total_jobs = len(self.glue_statuses) - sum(by_status[status] for status in FINISHED_STATES)
        state.running_jobs = by_status["RUNNING"]
        state.waiting_jobs = state.total_jobs - state.running_jobs

    def owners_of_active(self) -> list[commands.JobOwners]:
        """(user, group, account, proxy VO, GLUE status) of each job not finished, for commands.vo_counts."""
        return [owners for owners in zip(self.owners, self.groups, self.accounts, repeat(None), self.glue_statuses)
                if owners[4] not in FINISHED_STATES]


class _Memo(dict[Any, Any]):
    """``memo[value]``: ``convert(value)``, cached for one parse (queues repeat the same limits, sizes
    and times thousands of times); empty values (absent attributes) give None.  A hit is one dict
    lookup in C, no Python call: 50,000 jobs read ~9 values each.  An unhashable value (a list where
    a string belongs) raises TypeError: :class:`_Direct` is what names it."""

    def __init__(self, convert: Callable[[Any], Any]) -> None:
        super().__init__({None: None, "": None})
        self.convert = convert

    def __missing__(self, value: Any) -> Any:
        result = self[value] = self.convert(value)
        return result


class _Direct:
    """``direct[value]``: ``convert(value)`` without a cache (None for empty values), for any value:
    the converters of a job whose values a :class:`_Memo` could not look up, so that the error names
    the value as the converter words it."""

    def __init__(self, convert: Callable[[Any], Any]) -> None:
        self.convert = convert

    def __getitem__(self, value: Any) -> Any:
        return None if value is None or value == "" else self.convert(value)


class _Converters:
    """The converters of one parse (memoised unless ``cached`` is False; no state outlives it), and the
    private fields it reads."""

    def __init__(self, private: frozenset[str] = frozenset(), cached: bool = True) -> None:
        wrap: Callable[[Callable[[Any], Any]], Any] = _Memo if cached else _Direct
        self.private = private
        self.duration = wrap(parse_duration_s)
        self.time = wrap(parse_time)
        self.size = wrap(parse_size_mb)
        self.number = wrap(_int)
        self.torque_cpus = wrap(_torque_nodes_cpus)
        self.torque_gpus = wrap(_torque_nodes_gpus)


_EMPTY: dict[str, Any] = {}


class _Attributes(Protocol):
    def get(self, key: str, default: Any = None, /) -> Any: ...


def _job_from(job_id: str, top: _Attributes, resources: _Attributes, used: _Attributes,
              estimated: _Attributes, convert: _Converters, full: bool) -> Optional[PbsJob]:
    """One job from its attributes (``Resource_List``, ``resources_used`` and OpenPBS's ``estimated``
    given apart); None for an array parent.  ValueError/TypeError naming a malformed value."""
    state = str(top.get("job_state"))
    if state == ARRAY_PARENT:
        return None
    try:
        glue_status, sss_state = JOB_STATES[state]
    except (KeyError, TypeError):
        raise ValueError(f"unknown job_state {state!r}") from None
    owner = top.get("euser") or str(top.get("Job_Owner") or "").split("@", 1)[0] or None
    group, account = top.get("egroup") or None, top.get("Account_Name") or None
    cpus = (convert.number[resources.get("ncpus")] or convert.number[resources.get("procs")]
            or convert.torque_cpus[resources.get("nodes")])
    job = PbsJob(job_id, state, glue_status, sss_state, None if owner is None else str(owner),
                 None if group is None else str(group), None if account is None else str(account),
                 convert.duration[resources.get("walltime")], convert.duration[used.get("walltime")], cpus,
                 convert.time[estimated.get("start_time")])
    if full:
        _full(job, top, resources, used, convert)
    return job


def _full(job: PbsJob, top: _Attributes, resources: _Attributes, used: _Attributes, convert: _Converters) -> None:
    """What a published job list adds: the job's JobInfo (``job.info``, all but its nodes' site names)
    and its exec hosts.  Made here at once from the attributes rather than kept on the PbsJob and copied:
    50,000 jobs a refresh."""
    exec_host, exec_vnode = top.get("exec_host"), top.get("exec_vnode")
    exec_hosts = job.exec_hosts = (exec_host_cpus(str(exec_host)) if exec_host else
                                   exec_vnode_cpus(str(exec_vnode)) if exec_vnode else {})
    if job.cpus is None and exec_hosts:
        job.cpus = sum(exec_hosts.values())
    name, queue, comment = top.get("Job_Name"), top.get("queue"), top.get("comment")
    start, finished = convert.time[top.get("stime") or top.get("start_time")], job.glue_status in FINISHED_STATES
    started = job.started = job.sss_state in ("Running", "Suspended") or (finished and start is not None)
    pending = not started and not finished
    estimated = job.estimated_start
    info = job.info = JobInfo(
        local_id=job.job_id, name=None if name is None else str(name), local_owner=job.owner, local_group=job.group,
        account=job.account, queue=str(queue) if queue else None, lrms_state=job.state, sss_state=job.sss_state,
        glue_status=job.glue_status, submit_time=convert.time[top.get("ctime") or top.get("qtime")],
        start_time=start if started else (estimated if pending else None),
        start_is_estimate=pending and estimated is not None,
        end_time=convert.time[top.get("obittime") or top.get("comp_time")] if finished else None,
        requested_processors=job.cpus, requested_memory_mb=convert.size[resources.get("mem")],
        requested_duration_s=job.walltime_limit_s, requested_nodes=convert.number[resources.get("nodect")],
        requested_accelerators=(convert.number[resources.get("ngpus")]
                                or convert.torque_gpus[resources.get("nodes")]),
        delivered_processors=(sum(exec_hosts.values()) or None) if started else None,
        delivered_wall_s=job.walltime_used_s if started else None,
        scheduler_specific=str(comment) if comment and pending else None)
    _details(info, job, top, resources, used, convert, started, finished)


def _details(info: JobInfo, job: PbsJob, top: _Attributes, resources: _Attributes, used: _Attributes,
             convert: _Converters, started: bool, finished: bool) -> None:
    """What the SSS Job object adds, from the attributes both families print (names differ in case:
    OpenPBS Exit_status / Submit_Host, Torque exit_status / submit_host).  Each is read only for the
    jobs it can concern (an exit status for finished jobs, holds for held ones, use for started
    ones), and the private fields only when asked for (convert.private): 50,000 jobs a refresh."""
    if finished:
        exit_status = top.get("Exit_status")
        status = convert.number[top.get("exit_status") if exit_status is None else exit_status]
        info.completion, code, signal = ending(status, convert.number[top.get("substate")])
        if info.completion == "cancelled":  # deleted (qdel): GLUE's ABORTED, as Slurm's CANCELLED and HTCondor's Removed
            info.glue_status = "ABORTED"
        if started or (code is not None and code < 0):  # a negative code: PBS could not run it
            info.exit_code, info.exit_signal = code, signal
        comment = top.get("comment")
        if comment and info.completion in ("failed", "cancelled"):
            info.scheduler_specific = str(comment)  # OpenPBS: "Job run at ... and exceeded resource walltime"
    elif job.sss_state == "Hold":
        holds = top.get("Hold_Types")
        if holds:
            info.holds = tuple(HOLDS[letter] for letter in str(holds) if letter in HOLDS)
    priority = top.get("Priority")
    if priority is not None:
        info.priority = priority if type(priority) is int else convert.number[priority]
    host = top.get("Submit_Host") or top.get("submit_host")
    if host:
        info.submit_host = str(host)
    if started:
        cput, memory = used.get("cput"), used.get("mem")
        if cput is not None:
            info.cpu_duration_s = convert.duration[cput]
        if memory is not None:
            info.delivered_memory_mb = convert.size[memory]
        if job.exec_hosts:
            info.node_processors = tuple(job.exec_hosts.values())
    cput_limit = resources.get("cput")
    if cput_limit is not None:
        info.cpu_time_limit_s = convert.duration[cput_limit]
    depend = top.get("depend")
    if depend:
        info.dependencies = dependencies(str(depend))
    executable = top.get("executable")
    if executable:
        info.executable = _jsdl_values(str(executable), "Executable")[0] or None
    private = convert.private
    if private:
        arguments = top.get("argument_list") if "arguments" in private else None
        info.arguments = " ".join(_jsdl_values(str(arguments), "Argument")) if arguments else None
        environment = top.get("Variable_List") if "environment" in private else None
        info.environment = environment if isinstance(environment, (dict, str)) else None
        work_dir = top.get("jobdir") or top.get("init_work_dir") if "working_directory" in private else None
        info.working_directory = str(work_dir) if work_dir else None


_JSDL = re.compile(r"<jsdl-hpcpa:(Executable|Argument)>(.*?)</jsdl-hpcpa:\1>", re.S)
_XML_ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": '"', "&apos;": "'"}


def _jsdl_values(text: str, tag: str) -> list[str]:
    """OpenPBS ``executable`` / ``argument_list``, as qstat prints them: JSDL HPC Profile elements
    (``<jsdl-hpcpa:Argument>-n</jsdl-hpcpa:Argument>...``, XML-escaped) -> their values; ``[""]`` when none."""
    values = [re.sub(r"&(?:lt|gt|amp|quot|apos);", lambda m: _XML_ENTITIES[m.group(0)], value)
              for found, value in _JSDL.findall(text) if found == tag]
    return values or [""]


def _torque_nodes_cpus(value: Any) -> Optional[int]:
    """Torque ``Resource_List.nodes`` ``2:ppn=4+1:ppn=2`` -> 10 CPUs; None when not of that form."""
    total = 0
    for chunk in str(value).split("+"):
        parts = chunk.split(":")
        count = int(parts[0]) if parts[0].isdigit() else 1
        ppn = next((int(p[4:]) for p in parts[1:] if p.startswith("ppn=") and p[4:].isdigit()), 1)
        total += count * ppn
    return total or None


def _torque_nodes_gpus(value: Any) -> Optional[int]:
    """Torque ``Resource_List.nodes`` ``2:ppn=4:gpus=1+1:gpus=2`` -> 4 GPUs; None when it asks for none."""
    total = 0
    for chunk in str(value).split("+"):
        parts = chunk.split(":")
        count = int(parts[0]) if parts[0].isdigit() else 1
        total += count * next((int(p[5:]) for p in parts[1:] if p.startswith("gpus=") and p[5:].isdigit()), 0)
    return total or None


def parse_jobs_json(text: str, full: bool = True, private: frozenset[str] = frozenset()) -> list[PbsJob]:
    """``qstat -f -t -F json QUEUE``: ``{"Jobs": {ID: {attributes}}}`` (no ``Jobs`` when the queue is empty).

    Any malformed job fails the whole list.  ``full=False`` reads only what the
    counts, per-VO counts and estimates need; ``private``: the private fields
    (glueinfo.core.job.PRIVATE_FIELDS) to read too.
    """
    items = _openpbs_jobs(text, full, private)
    convert = _Converters(private)
    jobs = []
    for job_id, attributes in items.items():
        try:
            job = _job_from(job_id, attributes, attributes.get("Resource_List") or _EMPTY,
                            attributes.get("resources_used") or _EMPTY, attributes.get("estimated") or _EMPTY,
                            convert, full)
        except (ValueError, TypeError, AttributeError) as exc:
            raise PbsOutputError(f"qstat -f -F json: job {one_line(job_id, 120)!r}: {_why(job_id, attributes, exc, full)}") from None
        if job is not None:
            jobs.append(job)
    return jobs


# OpenPBS job attributes read: the counts' (with the three groups below), a published list's, and
# the private fields' (only when asked for).  A job carries ~40 attributes, Variable_List the largest.
_OPENPBS_COUNTED = ("job_state", "euser", "Job_Owner", "egroup", "Account_Name")
_OPENPBS_FULL = ("Job_Name", "queue", "comment", "exec_host", "exec_vnode", "stime", "start_time", "ctime", "qtime",
                 "obittime", "comp_time", "Exit_status", "exit_status", "substate", "Hold_Types", "Priority",
                 "Submit_Host", "submit_host", "depend", "executable")
_OPENPBS_PRIVATE = {"arguments": ("argument_list",), "environment": ("Variable_List",),
                    "working_directory": ("jobdir", "init_work_dir")}
_OPENPBS_GROUPS = {"Resource_List": ("ncpus", "procs", "nodes", "nodect", "mem", "walltime", "cput", "ngpus"),
                   "resources_used": ("walltime", "cput", "mem"), "estimated": ("start_time",)}


def _job_list_type(full: bool, private: frozenset[str]) -> Any:
    """The shape of ``qstat -f -t -F json`` holding only what :func:`_job_from` reads (values of any
    JSON type, as json.loads gives them), for msgspec, which decodes nothing else."""
    names = (*_OPENPBS_COUNTED, *(_OPENPBS_FULL if full else ()),
             *(name for field_ in sorted(private) if full for name in _OPENPBS_PRIVATE.get(field_, ())))
    groups = {group: _keys(group, {name: Any for name in names_}) for group, names_ in _OPENPBS_GROUPS.items()}
    job = _keys("OpenPbsJob", {**{name: Any for name in names}, **groups})
    return _keys("OpenPbsJobList", {"Jobs": Optional[dict[str, job]]})  # type: ignore[valid-type]


def _keys(name: str, fields: dict[str, Any]) -> Any:
    """A TypedDict made at run time (the keys depend on the fields asked for), all keys optional."""
    make: Any = TypedDict  # called as a function: mypy checks only TypedDicts written out
    return make(name, fields, total=False)


def _openpbs_jobs(text: str, full: bool, private: frozenset[str]) -> dict[str, Any]:
    """The ``Jobs`` object of ``qstat -f -t -F json`` (empty when the queue has none): job id -> its
    attributes as json.loads gives them, but only those :func:`_job_from` reads.

    msgspec decodes the 100 MB of 50,000 jobs into only those, typed (:func:`_job_list_type`), in half
    json.loads' time; it still checks the whole document is JSON.  What it refuses (malformed JSON,
    or JSON it reads more strictly than json.loads: NaN, a lone surrogate escape, ``Jobs`` or a job
    not an object) is read by json.loads as before, so that any document gives the jobs, or the
    one-line PbsOutputError, it gave before."""
    what = "qstat -f -F json"
    try:
        data = msgspec.json.Decoder(_job_list_type(full, private)).decode(text)
    except (msgspec.DecodeError, ValueError):  # empty output too: _load_json names it
        data = _load_json(text, what)
    items = data.get("Jobs") or {}
    if not isinstance(items, dict):
        raise PbsOutputError(f"{what}: 'Jobs' is not an object")
    return items


def _why(job_id: str, attributes: Any, exc: Exception, full: bool) -> Exception:
    """What was wrong with a job :func:`parse_jobs_json` could not read: a TypeError may come from a
    value the memoised converters could not look up (a list or object where a string belongs), so the
    job is read again with plain converters, whose error names the value; ``exc`` when that one reads."""
    if isinstance(exc, TypeError):
        try:
            _job_from(job_id, attributes, attributes.get("Resource_List") or _EMPTY,
                      attributes.get("resources_used") or _EMPTY, attributes.get("estimated") or _EMPTY,
                      _Converters(cached=False), full)
        except (ValueError, TypeError, AttributeError) as plain:
            return plain
    return exc


# Torque job attributes read (top level, and inside Resource_List / resources_used): lxml filters
# them in C, so the ~40 others each job carries (Variable_List, paths...) cost no Python.
_TORQUE_TOP = ("Job_Id", "job_state", "euser", "egroup", "Job_Owner", "Account_Name")
_TORQUE_FULL = ("Job_Name", "queue", "exec_host", "ctime", "qtime", "start_time", "comp_time", "comment",
                # for the SSS Job object
                "exit_status", "Priority", "Hold_Types", "submit_host", "depend")
_TORQUE_PRIVATE = {"environment": "Variable_List", "working_directory": "init_work_dir"}  # read only when asked
_TORQUE_NESTED = ("walltime", "ncpus", "procs", "nodes", "nodect", "mem", "cput")
_TORQUE_GROUPS = ("Resource_List", "resources_used")


class _OutsideAJob(dict[str, str]):
    """The record a Torque job attribute would go to before the first <Job>: refusing it."""

    def __setitem__(self, key: str, value: str) -> None:
        raise PbsOutputError(f"qstat -f -x: <{key.split('.')[-1]}> outside a <Job>")


_OUTSIDE_A_JOB = _OutsideAJob()


def parse_jobs_xml(text: str, full: bool = True, private: frozenset[str] = frozenset()) -> list[PbsJob]:
    """Torque ``qstat -f -x -t QUEUE``: ``<Data><Job><Job_Id/>...<Resource_List><walltime/>...</Job>``;
    empty output when the queue has no jobs.  Any malformed job fails the whole list.  ``private``:
    the private fields (glueinfo.core.job.PRIVATE_FIELDS) to read too."""
    if not text or text.isspace():  # not strip(): that copies the 65 MB document to look at it
        return []
    private_tags = tuple(tag for name, tag in _TORQUE_PRIVATE.items() if name in private) if full else ()
    tags = ("Job", *_TORQUE_GROUPS, *_TORQUE_TOP, *(_TORQUE_FULL if full else ()), *private_tags, *_TORQUE_NESTED)
    return _jobs_from_elements(_torque_elements(text, tags, "qstat -f -x"), full, private)


_TORQUE_TOP_LEVEL = frozenset((*_TORQUE_TOP, *_TORQUE_FULL, *_TORQUE_PRIVATE.values()))
_TORQUE_NESTED_NAMES = frozenset(_TORQUE_NESTED)


def _jobs_from_elements(elements: list[tuple[str, str]], full: bool, private: frozenset[str]) -> list[PbsJob]:
    """:func:`parse_jobs_xml` of the document's (tag, text) elements (:func:`_torque_elements`)."""
    convert = _Converters(private)
    jobs = []
    records: list[tuple[dict[str, str], dict[str, str], dict[str, str]]] = []
    record: dict[str, str] = _OUTSIDE_A_JOB  # until the first <Job>: refuses what is written to it
    group: Optional[dict[str, str]] = None  # the Resource_List or resources_used being read
    top, nested = _TORQUE_TOP_LEVEL, _TORQUE_NESTED_NAMES
    # Per job its attributes, its Resource_List and its resources_used, as plain dicts (read as
    # OpenPBS's JSON objects are).  Elements come in document order, so a nested name (walltime,
    # mem...) belongs to the group opened last in its job; Torque prints none of those names at the
    # top level.  The job's own attributes, most of what is read, are tested for first.
    for tag, value in elements:
        if tag in top:
            record[tag] = value
        elif tag in nested:
            if group is not None:
                group[tag] = value
        elif tag == "Job":
            record, group = {}, None
            records.append((record, {}, {}))
        elif record is _OUTSIDE_A_JOB:
            raise PbsOutputError(f"qstat -f -x: <{tag}> outside a <Job>")
        else:  # Resource_List or resources_used
            group = records[-1][1 if tag == "Resource_List" else 2]
    for record, resources, used in records:
        job_id = (record.get("Job_Id") or "").strip()
        if not job_id:
            raise PbsOutputError("qstat -f -x: a job without a Job_Id")
        try:
            job = _job_from(job_id, record, resources, used, _EMPTY, convert, full)
        except (ValueError, TypeError) as exc:
            raise PbsOutputError(f"qstat -f -x: job {one_line(job_id, 120)!r}: {exc}") from None
        if job is not None:
            jobs.append(job)
    return jobs


def count_jobs_xml(text: str) -> JobColumns:
    """Torque ``qstat -f -x -t QUEUE`` read for the counts only: what :func:`parse_jobs_xml` with
    ``full=False`` reads, into columns.  A list this reading cannot take whole (an attribute outside
    a <Job>, a job without a Job_Id, an unknown job_state, a malformed value) is read by
    :func:`parse_jobs_xml` instead, so its error, and any list it reads, are the same."""
    if not text or text.isspace():
        return JobColumns.of([])
    elements = _torque_elements(text, ("Job", *_TORQUE_GROUPS, *_TORQUE_TOP, *_TORQUE_COUNTED), "qstat -f -x")
    columns = _torque_columns(elements)
    return columns if columns is not None else JobColumns.of(_jobs_from_elements(elements, False, frozenset()))


# What the counts read of a Torque job inside Resource_List / resources_used.
_TORQUE_COUNTED = ("walltime", "ncpus", "procs", "nodes")
_GLUE_STATUS_OF = {letter: glue for letter, (glue, _) in JOB_STATES.items()}
_KNOWN_STATES = frozenset({*JOB_STATES, ARRAY_PARENT})


def _torque_columns(elements: list[tuple[str, str]]) -> Optional[JobColumns]:
    """:func:`count_jobs_xml` of the document's elements, or None when a job is not as the columns take it.

    Each attribute goes to a column keyed by the job's index, so a job's ~10 values cost one dict
    store each and no per-job dict or PbsJob; the columns are converted with the per-parse caches
    (one C-level lookup a value).  Same reading as :func:`_jobs_from_elements`: the last of a repeated
    element counts, and a nested element counts inside the job's Resource_List / resources_used only.
    A value absent is None here, an empty element "": every use below reads both alike."""
    top: dict[str, dict[int, Optional[str]]] = {tag: {} for tag in _TORQUE_TOP}
    resources: dict[str, dict[int, Optional[str]]] = {tag: {} for tag in _TORQUE_COUNTED}
    used: dict[str, dict[int, Optional[str]]] = {tag: {} for tag in _TORQUE_COUNTED}
    ignored: dict[str, dict[int, Optional[str]]] = {tag: {} for tag in _TORQUE_COUNTED}  # outside both groups
    # tag -> the column its value goes to: the nested names point at the group open in the job, so
    # every value is one lookup and one store, and only <Job> and the groups take a branch.
    columns = {**top, **ignored}
    index = -1
    for tag, value in elements:
        column = columns.get(tag)
        if column is not None:
            column[index] = value
        elif tag == "Job":
            index += 1
            columns.update(ignored)
        elif index < 0:
            return None  # a Resource_List / resources_used outside a <Job>
        else:
            columns.update(resources if tag == "Resource_List" else used)
    count = index + 1
    ids = top["Job_Id"]
    if any(-1 in column for column in top.values()) or len(ids) != count or not all(id_ and id_.strip()
                                                                                   for id_ in ids.values()):
        return None

    def values(column: dict[int, Optional[str]]) -> list[Optional[str]]:
        return list(map(column.get, range(count)))

    letters = values(top["job_state"])
    if not _KNOWN_STATES.issuperset(letters):
        return None
    keep: Optional[list[bool]] = [letter != ARRAY_PARENT for letter in letters] if ARRAY_PARENT in letters else None

    def kept(column: dict[int, Optional[str]]) -> list[Optional[str]]:
        return values(column) if keep is None else list(compress(values(column), keep))

    convert = _Converters()
    try:
        cpus = list(map(convert.number.__getitem__, kept(resources["ncpus"])))
        if not all(cpus):  # procs, then nodes, only for a job without ncpus, as _job_from reads them
            procs, nodes = kept(resources["procs"]), kept(resources["nodes"])
            for i in [i for i, value in enumerate(cpus) if not value]:
                cpus[i] = convert.number[procs[i]] or convert.torque_cpus[nodes[i]]
        limits = list(map(convert.duration.__getitem__, kept(resources["walltime"])))
        walltimes = list(map(convert.duration.__getitem__, kept(used["walltime"])))
    except (ValueError, TypeError):
        return None
    job_owners = kept(top["Job_Owner"])
    owners = [user or str(job_owners[i] or "").split("@", 1)[0] or None for i, user in enumerate(kept(top["euser"]))]
    statuses = [_GLUE_STATUS_OF[letter] for letter in letters if letter != ARRAY_PARENT]  # type: ignore[index]
    return JobColumns(statuses, owners, [group or None for group in kept(top["egroup"])],
                      [account or None for account in kept(top["Account_Name"])], limits, walltimes, cpus,
                      [None] * len(statuses))


# Hold_Types letters -> SSS Hold words (n: no hold).
HOLDS = {"u": "User", "o": "Operator", "s": "System", "p": "Password"}
# PBS dependency types the SSS Dependency conditions can say (before*, after (start) and on:COUNT cannot).
_DEPENDENCY_CONDITIONS = {"afterok": "OnSuccess", "afternotok": "OnFailure", "afterany": "OnExit"}
_DELETED, _FAILED = 91, 93  # OpenPBS substates of a finished job (92: finished, exit status 0)


def dependencies(text: Optional[str]) -> tuple[tuple[str, str], ...]:
    """``depend`` (``afterok:12.srv@srv:13.srv,afterany:14.srv``) -> (SSS condition, job id) pairs;
    an id's ``@server`` suffix is cut, as qstat lists jobs without it."""
    if not text:
        return ()
    found = []
    for item in text.split(","):
        kind, _, ids = item.strip().partition(":")
        condition = _DEPENDENCY_CONDITIONS.get(kind)
        if condition:
            found += [(condition, other.split("@", 1)[0]) for other in ids.split(":") if other]
    return tuple(found)


def ending(status: Optional[int], substate: Optional[int]) -> tuple[Optional[str], Optional[int], Optional[int]]:
    """(completion, exit code, signal) of a finished job from its exit status and (OpenPBS) substate.
    Exit status: 0-255 the job's own, 256 + N killed by signal N, negative PBS's code for a job it
    could not run.  OpenPBS's substate tells a deleted job (91) from one that ended by itself;
    Torque's does not, so a job it killed (its walltime, or qdel) is "failed" there."""
    code, signal = (None, status - 256) if status is not None and status > 256 else (status, None)
    if substate == _DELETED:
        return "cancelled", code, signal
    if status is None:
        return None, None, None
    return ("success" if status == 0 and substate != _FAILED else "failed"), code, signal


def job_info(job: PbsJob, node_name: Callable[[str], str]) -> JobInfo:
    """The model's view of one PBS job (GLUE CE Job / SSS Job): the JobInfo its full parse made,
    with its nodes named as the site names them.  ValueError for a job parsed without full=True."""
    info = job.info
    if info is None:
        raise ValueError(f"job {job.job_id}: parsed for the counts only, it has no JobInfo")
    if job.started:
        info.nodes = [node_name(h) for h in job.exec_hosts]
    return info


# -- shared helpers ----------------------------------------------------------------------

def _load_json(text: str, what: str) -> dict[str, Any]:
    if not text or text.isspace():  # not strip(): that copies the document to look at it
        raise PbsOutputError(f"{what}: empty output")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PbsOutputError(f"{what}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PbsOutputError(f"{what}: not a JSON object")
    return data


# Characters XML 1.0 forbids (Torque copies job names and notes byte for byte), and an ampersand
# that starts no character or predefined entity reference (Torque releases that forgot to escape it).
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_BARE_AMPERSAND = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[0-9A-Fa-f]+);)")


_FORBIDDEN_BYTES = bytes(b for b in range(32) if b not in (9, 10, 13))


def _torque_xml(text: str, what: str) -> Any:
    """The parsed tree of Torque's XML ``text``, repaired (:func:`_repaired`) when libxml2 refuses it."""
    data = text.encode("utf-8")
    # Parsed as it is first: what the repair changes (a forbidden character, a bare "&") is not
    # well-formed, so a document libxml2 reads needs none, and the common case makes no copy of
    # 50 MB to look for them.  A document with a "!" takes the repair first as before: in a CDATA
    # section ("<![CDATA[") a bare "&" is well-formed, and the repair would read it as "&amp;".
    if b"!" not in data:
        try:
            return _parse_torque(data, what)
        except PbsOutputError:
            pass  # read again after the repair; its error is the one reported
    return _parse_torque(_repaired(text).encode("utf-8"), what)


def _repaired(text: str) -> str:
    """Torque's XML with the characters XML forbids replaced by U+FFFD and a bare "&" escaped."""
    data = text.encode("utf-8")
    # The check on bytes is ~10x faster than a regex over the text; the rewrite runs only when needed.
    if len(data.translate(None, _FORBIDDEN_BYTES)) != len(data) or b"\xef\xbf\xbe" in data or b"\xef\xbf\xbf" in data:
        text = _XML_FORBIDDEN.sub("\ufffd", text)
    return _BARE_AMPERSAND.sub("&amp;", text) if "&" in text else text


def _torque_elements(text: str, tags: tuple[str, ...], what: str) -> list[tuple[str, str]]:
    """(tag, text) of the elements named ``tags`` in Torque's XML, in document order.

    Read without a tree (xmlsafe.plain_elements: libxml2 checks the document, a pattern finds the
    elements) when the document is plain, as Torque prints it: 50,000 jobs make a tree of ~4 million
    nodes of which ~10 a job are read.  A document libxml2 refuses is read again after the repair
    (:func:`_repaired`), whose error is the one reported; one that is not plain (a comment, CDATA, a
    namespace...) is read from the tree, with the same result.  PbsOutputError (one line) when neither
    reads."""
    limit = len(text) * 4 + 1  # no size limit: the plugin's own command output, however long the queue
    try:
        elements = xmlsafe.plain_elements(text, tags, what=what, max_bytes=limit)
    except xmlsafe.XMLInputError:
        try:
            elements = xmlsafe.plain_elements(_repaired(text), tags, what=what, max_bytes=limit)
        except xmlsafe.XMLInputError as exc:
            raise PbsOutputError(str(exc)) from None
    if elements is None:
        elements = [(element.tag, element.text or "") for element in _torque_xml(text, what).iter(*tags)]
    return elements


def _parse_torque(data: bytes, what: str) -> Any:
    try:
        return xmlsafe.parse_xml(data, what=what, max_bytes=max(xmlsafe.DEFAULT_MAX_BYTES, len(data) + 1))
    except xmlsafe.XMLInputError as exc:
        raise PbsOutputError(str(exc)) from None


# -- estimates ---------------------------------------------------------------------------

def response_times(jobs: Sequence[PbsJob], free_cpus: Optional[int], usable_cpus: Optional[int],
                   queue: Optional[PbsQueue], now: float) -> tuple[Optional[int], Optional[int]]:
    """(EstimatedResponseTime, WorstResponseTime) in seconds for a job submitted now.

    1. A CPU free and no job queued (Q): (0, 0).
    2. Else, when the OpenPBS scheduler estimated start times for queued jobs
       (``estimated.start_time``, set for top jobs when backfilling): the new
       job queues behind them: Estimated = the mean, Worst = the largest wait
       (start - now, at least 0).
    3. Else a drain model on walltime limits: the new job waits for the first
       running job to reach its limit (0 when a CPU is free), then for the
       queued jobs' CPU time (CPUs x walltime limit) to drain through the
       queue's usable CPUs: Worst = first + sum / usable; Estimated = Worst / 2
       (jobs end before their limits; half is the rule, not a measurement).
       A job without a walltime limit takes the queue's default, else its
       maximum; with neither the estimate is unknown (None).
    """
    return columns_response_times(JobColumns.of(jobs), free_cpus, usable_cpus, queue, now)


def columns_response_times(jobs: JobColumns, free_cpus: Optional[int], usable_cpus: Optional[int],
                           queue: Optional[PbsQueue], now: float) -> tuple[Optional[int], Optional[int]]:
    """:func:`response_times` of a job list read into columns."""
    statuses = jobs.glue_statuses
    queued = [i for i, status in enumerate(statuses) if status == "SCHEDULED"]
    if free_cpus and not queued:
        return 0, 0
    starts = jobs.estimated_starts
    forecast = from_forecasts([max(0.0, start - now) for i in queued if (start := starts[i]) is not None])
    if forecast is not None:
        return forecast
    if not usable_cpus:
        return None, None
    fallback = queue.default_wall_s or queue.max_wall_s if queue else None
    limits = [fallback if limit is None else limit for limit in jobs.walltime_limits_s]
    used, cpus = jobs.walltimes_used_s, jobs.cpus
    return halved(drain([None if (limit := limits[i]) is None else limit - (used[i] or 0)
                         for i, status in enumerate(statuses) if status == "RUNNING"],
                        [(cpus[i] or 1, limits[i]) for i in queued], usable_cpus, bool(free_cpus)))


# -- the query ---------------------------------------------------------------------------

def tools_for(ctx: LrmsContext, deadline: float) -> Tools:
    """Tools for PBS: ``pbs_bin_dir``, times in UTC, and no variable that changes qstat's formats."""
    return commands.tools_for(ctx, "pbs_bin_dir", environment(_OUTPUT_ENV_PREFIXES), deadline)


def query(ctx: LrmsContext) -> QueueState:
    """The state of the PBS queue ``ctx.queue`` (see the module docstring for commands and failures)."""
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
    if not ctx.queue:
        raise LrmsQueryError("pbs: no queue named for this CE (set its queue)")
    queue_name = ctx.queue
    configured = str(ctx.ce_config.get("pbs_flavour") or "auto").lower()
    if configured not in ("auto", *FLAVOURS):
        raise LrmsQueryError(f"pbs: pbs_flavour {configured!r} is not auto, openpbs or torque")
    errors: list[str] = []
    counted: Optional[JobColumns] = None  # the job list read for the counts only (not with_jobs)
    private = private_fields(ctx.ce_config) if ctx.with_jobs else frozenset()

    def step(what: Callable[[], Any]) -> Any:
        try:
            return what()
        except PbsQueueError:
            raise
        except LrmsQueryError as exc:
            errors.append(str(exc))
            return None

    version: Optional[str]
    if configured == "auto":
        flavour, version = parse_version(tools("qstat", "--version"))  # fatal: nothing else can be read
    else:
        flavour = configured
        found: Optional[tuple[str, str]] = step(lambda: parse_version(tools("qstat", "--version")))
        version = found[1] if found else None
    state = QueueState(lrms_type="pbs" if flavour == "openpbs" else "torque", lrms_version=version, queue=queue_name,
                       collected_at=now)
    if flavour == "openpbs":
        queue: Optional[PbsQueue] = step(lambda: parse_queue_json(tools("qstat", "-Q", "-f", "-F", "json", queue_name),
                                                                  queue_name))
        all_nodes: Optional[list[PbsNode]] = step(lambda: parse_nodes_json(tools("pbsnodes", "-a", "-F", "json")))
        jobs: Optional[list[PbsJob]] = step(lambda: _paused(parse_jobs_json, tools("qstat", "-f", "-t", "-F", "json",
                                                                                   queue_name), ctx.with_jobs, private))
    else:
        queue = step(lambda: parse_queue_text(tools("qstat", "-Q", "-f", queue_name), queue_name))
        all_nodes = step(lambda: parse_nodes_xml(tools("pbsnodes", "-x")))
        if ctx.with_jobs:
            jobs = step(lambda: _paused(parse_jobs_xml, tools("qstat", "-f", "-x", "-t", queue_name), True, private))
        else:  # the counts only: columns, no PbsJob per job
            jobs, counted = None, step(lambda: count_jobs_xml(tools("qstat", "-f", "-x", "-t", queue_name)))
    if jobs is not None and not ctx.with_jobs:  # OpenPBS's counts: its job records into columns
        counted, jobs = JobColumns.of(jobs), None
    # qstat -Q -f names the queue, or a job of it is listed: an empty job list alone says nothing of it
    named = queue is not None or bool(jobs) or bool(counted is not None and counted.glue_statuses)

    if queue is not None:
        state.status = glue_status_of_queue(queue.enabled, queue.started)
        state.max_wall_clock_time_s, state.max_cpu_time_s = queue.max_wall_s, queue.max_cput_s
        state.max_wall_clock_time_min = glue_minutes(queue.max_wall_s)
        state.max_cpu_time_min = glue_minutes(queue.max_cput_s)
        state.max_running_jobs = queue.max_running
        state.max_total_jobs = queue.max_total
        state.priority = queue.priority
        state.limits = queue_limits(queue)
    usable = None
    lookup = host_matcher(h.hostname for h in ctx.hosts)
    short_of: dict[str, str] = {}
    if all_nodes is not None:
        nodes = queue_nodes(all_nodes, queue, flavour)
        allocations = node_allocations(nodes, lookup)
        state.nodes = allocations
        state.hosts = [a.name for a in allocations]
        short_of = {n.name: a.name for n, a in zip(nodes, allocations, strict=True)}
        usable = commands.node_capacity(state, allocations)
        if usable is None:
            errors.append("pbsnodes: a node without a CPU count (ncpus/np): TotalCPUs and FreeCPUs unknown")
        state.accelerators = queue_gpus(nodes, allocations, queue)
    if jobs is not None:
        commands.count_jobs(state, jobs)

        def node_name(host: str) -> str:
            return short_of.get(host) or site_host(host, lookup)

        with collector_paused():  # 50,000 JobInfos: see glueinfo.core.gc_pause
            infos = [job_info(j, node_name) for j in jobs]
            commands.assign_vos(ctx.vo_map, infos)
            state.vo_counts = count_by_vo(infos)
            state.jobs = infos
    elif counted is not None:  # the cheap path: the per-VO counts without a JobInfo per job
        counted.count(state)
        state.vo_counts = commands.vo_counts(ctx.vo_map, counted.owners_of_active())
    if flavour == "openpbs" and queue is not None and state.free_cpus is not None:
        state.free_cpus = queue_free_cpus(state.free_cpus, queue, state.running_jobs)
    state.free_job_slots = free_job_slots(state.status, state.free_cpus, state.max_running_jobs, state.running_jobs)
    if state.free_cpus is not None and state.status == "Production":
        if jobs is not None:
            state.estimated_response_time_s, state.worst_response_time_s = response_times(
                jobs, state.free_cpus, usable, queue, now)
        elif counted is not None:
            state.estimated_response_time_s, state.worst_response_time_s = columns_response_times(
                counted, state.free_cpus, usable, queue, now)
    # Without the queue every node would count as its (queue_nodes): never kept for a queue nothing named.
    queues.settle(state, named, lambda: queue_names(tools("qstat", "-Q", "-f")), errors, "queue")
    if errors:
        state.error = f"{state.lrms_type}: " + "; ".join(dict.fromkeys(errors))
    return state


def queue_free_cpus(free_cpus: int, queue: PbsQueue, running_jobs: Optional[int]) -> Optional[int]:
    """OpenPBS FreeCPUs: the free CPUs of the queue's nodes (``free_cpus``), at most what the queue
    itself still lets its jobs hold.  A queue's ``resources_available.ncpus`` is the most CPUs all
    its running jobs together may use, and ``max_run_res.ncpus``'s overall limit (``[o:PBS_ALL=N]``)
    the most they may be allocated (pbs_queue_attributes(7B)); ``resources_assigned.ncpus`` is what
    its running and exiting jobs hold.  Nodes are shared by the queues bound to none, so their free
    CPUs can be more than the queue may take: the scheduler starts none of its jobs past the limit.
    The queue's per-user, per-group and soft limits are not applied (they depend on whose job it is).
    A limit with no ``resources_assigned.ncpus`` printed: 0 held when no job of the queue runs,
    else unknown (None), as is FreeCPUs then."""
    held = queue.ncpus_assigned
    if held is None and running_jobs == 0:
        held = 0
    return within_limit(free_cpus, queue.ncpus_limit, held)


def _paused(parse: Callable[[str, bool, frozenset[str]], list[PbsJob]], text: str, full: bool,
            private: frozenset[str]) -> list[PbsJob]:
    """``parse(text, full, private)`` with the collector paused: the job list of 50,000 jobs makes hundreds
    of thousands of objects, none in a cycle (see glueinfo.core.gc_pause)."""
    with collector_paused():
        return parse(text, full, private)


def iter_states() -> Iterable[tuple[str, str, str]]:
    """(PBS job_state, GLUE status, SSS state) rows, for the docs table and tests."""
    for letter, (glue, sss) in JOB_STATES.items():
        yield letter, glue, sss


LRMS = LrmsPlugin(name="pbs", query=query, owner_kinds=KINDS,
                  description="OpenPBS / PBS Pro (JSON) or Torque (XML) queue via qstat/pbsnodes")
