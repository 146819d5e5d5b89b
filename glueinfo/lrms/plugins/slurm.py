"""LRMS plugin ``slurm``: a CE queue is a Slurm partition.

Commands (each bounded by what is left of the query's deadline):

- ``sinfo --version``                         -> LRMSVersion
- ``scontrol show partition -o NAME``         -> Status, MaxWallClockTime, Priority, QoS name, the
                                                 per-job limits (:func:`partition_limits`)
- ``sinfo --json`` (Slurm >= 21.08) or
  ``sinfo -h -N -p NAME -O NodeList:|,...``  -> TotalCPUs, FreeCPUs, the partition's hosts, its
                                                 GPUs (Gres, GresUsed: :func:`node_accelerators`)
- ``squeue -h -r -t all -p NAME -O ...``      -> jobs, Running/Waiting/TotalJobs, response times (a job's
                                                 tres-per-* only when the jobs are read whole)
- ``sacctmgr -nP show qos NAME ...``          -> MaxRunningJobs, MaxTotalJobs, MaxCPUTime (only when
                                                 the partition has a QoS, i.e. with slurmdbd)
- ``scontrol --all show partition -o``        -> the partitions Slurm has, asked only when no answer
                                                 above named the partition (glueinfo.lrms.queues):
                                                 ``sinfo``/``squeue -p lng`` print nothing for a
                                                 partition Slurm does not have

``--json`` is used for the node side only: its schema changes with every
Slurm release (openapi v0.0.37/38/39 node lists, v0.0.40+ ``sinfo`` groups,
both read here) and for jobs it is ~30 times larger than a fixed format
(about 3.4 kB per job on 22.05), too slow for queues of 10,000 jobs.  Jobs and
partitions use fixed formats, stable since Slurm 18.08 (tres-per-job/-node/-task,
the last added): ``squeue -O`` fields with
no width (never truncated), each ending in a separator built from a random
token drawn per query, so a job name holding ``|`` or a newline can neither
shift a field nor forge a job (see :func:`squeue_format`).

Commands run with ``TZ=UTC`` and ``SLURM_TIME_FORMAT=standard`` (ISO times in
UTC, whatever the admin's environment says) and without the ``SQUEUE_*`` /
``SINFO_*`` variables that change output.  Any step that fails (command
missing, timed out, non-zero exit, output not in the expected shape) leaves
the fields it feeds unknown (None) and adds a one-line reason to
``QueueState.error``; the other steps still fill theirs.

Mappings (also in README.md, "Batch systems"):

- partition State: UP -> Production, DRAIN -> Draining, DOWN -> Queueing (Slurm
  queues but does not start jobs in a DOWN partition, which is GLUE's
  Queueing), INACTIVE -> Closed.
- job state -> (GLUE status, SSS state): see ``JOB_STATES``; a PENDING job
  whose reason is JobHeldUser/JobHeldAdmin is held (WAITING, Hold).
- RunningJobs = jobs in GLUE RUNNING; WaitingJobs = every other unfinished job
  (GLUE: "in a state different than running"); TotalJobs = their sum.
- FreeJobSlots = FreeCPUs (idle CPUs on usable nodes), capped by MaxRunningJobs
  minus RunningJobs when a QoS sets it, 0 when the partition is not Production
  (glueinfo.lrms.figures.free_job_slots).
- Response times (waiting times): see :func:`estimate_waits` and glueinfo.lrms.waiting.
- Accelerators: the ``gpu`` GRES of the partition's nodes (:func:`node_accelerators`, by
  glueinfo.lrms.accelerators' rule); a job's requested GPUs from its TRES (:func:`requested_gpus`).
"""

from __future__ import annotations

import calendar
import datetime
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from glueinfo.core.gc_pause import collector_paused
from glueinfo.core.hostrange import expand_list
from glueinfo.core.job import JobInfo, private_fields
from glueinfo.core.model import NodeAllocation, QueueAccelerators, QueueLimits, QueueState
from glueinfo.core.text import one_line
from glueinfo.lrms import commands, queues
from glueinfo.lrms.accelerators import NodeAccelerators, queue_accelerators
from glueinfo.lrms.commands import Steps, Tools, environment
from glueinfo.lrms.figures import free_job_slots, glue_minutes, within_limit
from glueinfo.lrms.names import host_matcher, site_host
from glueinfo.lrms.registry import LrmsContext, LrmsPlugin, LrmsQueryError
from glueinfo.lrms.response import drain, from_forecasts
from glueinfo.lrms.vo_map import KINDS, VoMap
from glueinfo.lrms.waiting import Observed, WaitRecord, settle

# -- job states ----------------------------------------------------------------------

# Slurm job state -> (GLUE CE job status, SSS job State, finished?)
JOB_STATES: dict[str, tuple[str, str, bool]] = {
    "PENDING": ("SCHEDULED", "Idle", False),
    "REQUEUED": ("SCHEDULED", "Idle", False),
    "REQUEUE_FED": ("SCHEDULED", "Idle", False),
    "REQUEUE_HOLD": ("WAITING", "Hold", False),
    "RESV_DEL_HOLD": ("WAITING", "Hold", False),
    "SPECIAL_EXIT": ("WAITING", "Hold", False),
    "SUSPENDED": ("WAITING", "Suspended", False),
    "STOPPED": ("WAITING", "Suspended", False),
    "CONFIGURING": ("READY", "Running", False),  # resources allocated, nodes booting
    "RUNNING": ("RUNNING", "Running", False),
    "COMPLETING": ("RUNNING", "Running", False),  # still holds its nodes
    "SIGNALING": ("RUNNING", "Running", False),
    "STAGE_OUT": ("RUNNING", "Running", False),
    "RESIZING": ("RUNNING", "Running", False),
    "COMPLETED": ("DONE", "Completed", True),
    "FAILED": ("DONE", "Completed", True),  # the job's program ended by itself, non-zero
    "CANCELLED": ("ABORTED", "Completed", True),
    "TIMEOUT": ("ABORTED", "Completed", True),
    "OUT_OF_MEMORY": ("ABORTED", "Completed", True),
    "NODE_FAIL": ("ABORTED", "Completed", True),
    "BOOT_FAIL": ("ABORTED", "Completed", True),
    "PREEMPTED": ("ABORTED", "Completed", True),
    "DEADLINE": ("ABORTED", "Completed", True),
    "REVOKED": ("ABORTED", "Completed", True),
}
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})

PARTITION_STATUS = {"UP": "Production", "DRAIN": "Draining", "DOWN": "Queueing", "INACTIVE": "Closed"}

# Node states (base or flag) whose CPUs no job can be given: sinfo's "other".
UNUSABLE_NODE_STATES = frozenset({"DOWN", "FUTURE", "UNKNOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING",
                                  "MAINT", "INVALID", "INVALID_REG", "PLANNED_DOWN"})

# squeue -O fields.  Every field ends with a separator holding a random token
# drawn per query (see squeue_format), so no job name can forge a field or a job.
SQUEUE_FIELDS = ("JobArrayID", "State", "Reason", "UserName", "Account", "Partition", "SubmitTime", "StartTime",
                 "EndTime", "TimeLimit", "TimeUsed", "NumCPUs", "tres-alloc", "NumNodes", "NodeList", "QOS",
                 # for the SSS Job object (every one in squeue -O since Slurm 17.11)
                 "Command", "WorkDir", "exit_code", "GroupName", "PriorityLong", "Dependency", "Feature",
                 "AllocNodes", "NumTasks",
                 # the GPUs a job asked for (Slurm >= 18.08), when its tres-alloc does not count them
                 "tres-per-job", "tres-per-node", "tres-per-task", "Name")
# Asked for only when the records are read whole (a job list, [vos] group: rules): the counts never
# read them, and three fields with their separators are ~9% more bytes for squeue to print and us to scan.
SQUEUE_GPU_FIELDS = ("tres-per-job", "tres-per-node", "tres-per-task")
SQUEUE_COUNTS_FIELDS = tuple(name for name in SQUEUE_FIELDS if name not in SQUEUE_GPU_FIELDS)
# sinfo's node lines without --json: -O, as %C and %T of -o, with Gres and GresUsed (which -o has no
# letter for); fields with no width are never cut, each ends with "|" (no node name, state or GRES holds one).
SINFO_TEXT_FIELDS = ("NodeList", "NodeHost", "CPUsState", "StateLong", "Gres", "GresUsed")
SINFO_TEXT_FORMAT = ",".join(f"{name}:|" for name in SINFO_TEXT_FIELDS[:-1]) + f",{SINFO_TEXT_FIELDS[-1]}:"
QOS_FORMAT = "Name,GrpJobs,GrpSubmit,MaxWall,MaxTRESMins"

# Environment variables that change what the Slurm tools print.
_OUTPUT_ENV_PREFIXES = ("SQUEUE_", "SINFO_", "SCONTROL_", "SACCTMGR_")
_OUTPUT_ENV = ("SLURM_TIME_FORMAT", "SLURM_CLUSTERS", "SLURM_CONF_OUT")

_NONE_WORDS = frozenset({"", "N/A", "NONE", "UNKNOWN", "(NULL)", "INVALID", "NOT_SET"})
NULL = "(null)"  # what squeue prints for a text field that is not set


class SlurmOutputError(LrmsQueryError):
    """Output that is not in the shape asked for."""


# -- small parsers -------------------------------------------------------------------

def parse_version(text: str) -> str:
    """``slurm 23.02.7`` / ``slurm-wlm 22.05.8`` -> ``22.05.8``."""
    match = re.search(r"\b(\d+\.\d+(?:\.\d+)?(?:-\S+)?)\s*$", text.strip())
    if not text.strip().lower().startswith("slurm") or not match:
        raise SlurmOutputError(f"sinfo --version: unexpected output {one_line(text, 120)!r}")
    return match.group(1)


def version_tuple(version: Optional[str]) -> tuple[int, ...]:
    if not version:
        return ()
    return tuple(int(part) for part in re.findall(r"\d+", version.split("-")[0])[:3])


def parse_duration_s(text: str) -> Optional[int]:
    """A Slurm time span in seconds; None for UNLIMITED/INFINITE/N/A.

    Slurm prints ``D-HH:MM:SS``, ``H:MM:SS`` or ``M:SS``; a bare number (as in
    slurm.conf and sacctmgr input) is minutes.  Raises ValueError otherwise.
    """
    text = text.strip()
    if text.upper() in ("UNLIMITED", "INFINITE") or text.upper() in _NONE_WORDS:
        return None
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        days = int(day_text)
    parts = [int(p) for p in text.split(":")] if text else []
    if any(p < 0 for p in parts) or days < 0 or not parts or len(parts) > 3:
        raise ValueError(f"not a Slurm time span: {text!r}")
    if len(parts) == 1:
        seconds = parts[0] * 60 if not days else parts[0] * 3600
    elif len(parts) == 2:
        seconds = parts[0] * 60 + parts[1] if not days else parts[0] * 3600 + parts[1] * 60
    else:
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return days * 86400 + seconds


def parse_timestamp(text: str) -> Optional[float]:
    """``2026-11-22T14:25:29`` printed with TZ=UTC -> Unix time; None for N/A, Unknown, None."""
    text = text.strip()
    if text.upper() in _NONE_WORDS:
        return None
    # Slicing is ~10x faster than strptime, which matters for 10,000 jobs.
    if len(text) != 19 or text[4] != "-" or text[7] != "-" or text[10] != "T" or text[13] != ":" or text[16] != ":":
        raise ValueError(f"not a Slurm timestamp: {text!r}")
    return float(calendar.timegm((int(text[0:4]), int(text[5:7]), int(text[8:10]),
                                  int(text[11:13]), int(text[14:16]), int(text[17:19]), 0, 0, 0)))


_MEM_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024, "P": 1024 ** 3}


def parse_memory_mb(text: str) -> Optional[int]:
    """``1000M``, ``4G``, ``512`` (MB) -> MB; None when 0 or absent (no requirement)."""
    text = text.strip().upper()
    if text in _NONE_WORDS:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTP]?)B?", text)
    if not match:
        raise ValueError(f"not a Slurm memory size: {text!r}")
    value = float(match.group(1)) * _MEM_UNITS[match.group(2) or "M"]
    return int(round(value)) or None


def parse_tres(text: str) -> dict[str, str]:
    """``cpu=2,mem=100M,node=1,billing=2`` -> {"cpu": "2", ...}."""
    result = {}
    for item in text.strip().split(","):
        if "=" in item:
            key, value = item.split("=", 1)
            result[key.strip()] = value.strip()
    return result


def _int_or_none(text: str) -> Optional[int]:
    text = text.strip()
    if text.upper() in _NONE_WORDS or text.upper() == "UNLIMITED":
        return None
    return int(text)


def split_key_values(line: str) -> dict[str, str]:
    """``scontrol -o`` output: ``Key=value Key2=value with spaces ...``.

    A value ends where whitespace is followed by the next ``Key=``; values may
    hold ``=`` (``TRES=cpu=2,mem=1000M``) and spaces (``OS=Linux 6.1 #1 SMP``).
    """
    pieces = re.split(r"\s+(?=[A-Za-z][A-Za-z0-9_/:]*=)", line.strip())
    result = {}
    for piece in pieces:
        if "=" not in piece:
            raise SlurmOutputError(f"scontrol: unexpected field {one_line(piece, 120)!r}")
        key, value = piece.split("=", 1)
        result[key] = value.strip()
    return result


def expand_hostlist(expr: str) -> list[str]:
    """Slurm host list -> names: ``n[01-03,7],gpu1`` -> n01 n02 n03 n7 gpu1 (ValueError when malformed)."""
    expr = expr.strip()
    if not expr or expr.upper() in _NONE_WORDS:
        return []
    return expand_list(expr)


# -- partition -----------------------------------------------------------------------

@dataclass
class PartitionInfo:
    name: str
    state: str
    max_time_s: Optional[int]  # None: unlimited
    default_time_s: Optional[int]
    nodes: str
    total_cpus: Optional[int]
    qos: Optional[str]
    priority_tier: Optional[int]
    # What one job may have (None: UNLIMITED or not printed); memory in MB, as scontrol prints it.
    # Slurm keeps one of MaxMemPerNode/MaxMemPerCPU (and of DefMemPerNode/DefMemPerCPU) per partition.
    max_nodes: Optional[int] = None
    max_cpus_per_node: Optional[int] = None
    max_mem_per_node_mb: Optional[int] = None
    max_mem_per_cpu_mb: Optional[int] = None
    def_mem_per_node_mb: Optional[int] = None
    def_mem_per_cpu_mb: Optional[int] = None
    # TRES=...,gres/gpu=12: the partition's GPUs, when Slurm accounts them (AccountingStorageTRES)
    tres_gpus: Optional[int] = None


def _positive(fields: Mapping[str, str], key: str) -> Optional[int]:
    """A limit of ``scontrol show partition``: None when not printed, UNLIMITED or 0 (Slurm's "none")."""
    value = _int_or_none(fields.get(key, "UNLIMITED"))
    return value if value is not None and value > 0 else None


def parse_partition(text: str, name: str) -> PartitionInfo:
    """``scontrol show partition -o NAME`` -> the one partition called ``name``."""
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = split_key_values(line)
        if fields.get("PartitionName") != name:
            continue
        try:
            state = fields["State"].upper()
            return PartitionInfo(
                name=name, state=state,
                max_time_s=parse_duration_s(fields.get("MaxTime", "UNLIMITED")),
                default_time_s=parse_duration_s(fields.get("DefaultTime", "NONE")),
                nodes=fields.get("Nodes", ""),
                total_cpus=_int_or_none(fields.get("TotalCPUs", "N/A")),
                qos=None if fields.get("QoS", "N/A").upper() in _NONE_WORDS else fields["QoS"],
                priority_tier=_int_or_none(fields.get("PriorityTier", "N/A")),
                max_nodes=_positive(fields, "MaxNodes"), max_cpus_per_node=_positive(fields, "MaxCPUsPerNode"),
                max_mem_per_node_mb=_positive(fields, "MaxMemPerNode"), max_mem_per_cpu_mb=_positive(fields, "MaxMemPerCPU"),
                def_mem_per_node_mb=_positive(fields, "DefMemPerNode"), def_mem_per_cpu_mb=_positive(fields, "DefMemPerCPU"),
                tres_gpus=tres_gpus(fields.get("TRES", "")))
        except (KeyError, ValueError) as exc:
            raise SlurmOutputError(f"scontrol show partition {name}: unexpected output ({exc})") from None
    raise SlurmOutputError(f"scontrol show partition: no partition {name!r} in output")


def partition_limits(partition: PartitionInfo, nodes: Optional[Sequence[NodeCpus]],
                     max_time_s: Optional[int]) -> QueueLimits:
    """What one job of the partition may have (docs/batch-systems.md has the table).

    - DefaultWallTime: DefaultTime, else MaxTime (slurm.conf: a job that asks for no time gets the
      partition's DefaultTime, and MaxTime when there is none), never past ``max_time_s`` (MaxTime
      or the QoS's MaxWall, the tighter).
    - MaxSlotsPerJob: the CPUs one job can be given: those of the partition's MaxNodes largest nodes
      (every node when MaxNodes is UNLIMITED), each node counted at most MaxCPUsPerNode.  Without
      the node list (sinfo failed): MaxNodes x MaxCPUsPerNode when both are set, TotalCPUs when both
      are UNLIMITED, never more than TotalCPUs; else unknown.
    - MaxMainMemory: MaxMemPerCPU, else MaxMemPerNode; GuaranteedMainMemory: DefMemPerCPU, else
      DefMemPerNode (MB).  Per slot: a per-node figure is what a one-slot job may have.
    Slurm has no per-job CPU time or virtual memory limit on a partition: those stay unknown."""
    default = partition.default_time_s if partition.default_time_s is not None else partition.max_time_s
    if default is not None and max_time_s is not None:
        default = min(default, max_time_s)
    per_node = partition.max_cpus_per_node
    slots: Optional[int]
    if nodes is not None:
        sizes = sorted((n.total if per_node is None else min(n.total, per_node) for n in nodes), reverse=True)
        slots = sum(sizes[:partition.max_nodes] if partition.max_nodes is not None else sizes) or None
    elif partition.max_nodes is not None and per_node is not None:
        slots = partition.max_nodes * per_node
        slots = min(slots, partition.total_cpus) if partition.total_cpus else slots
    else:
        slots = partition.total_cpus if partition.max_nodes is None and per_node is None else None
    return QueueLimits(
        default_wall_clock_time_s=default, max_slots_per_job=slots,
        max_main_memory_mb=partition.max_mem_per_cpu_mb or partition.max_mem_per_node_mb,
        guaranteed_main_memory_mb=partition.def_mem_per_cpu_mb or partition.def_mem_per_node_mb)


def partition_names(text: str) -> list[str]:
    """``scontrol --all show partition -o``: the name of every partition Slurm has, hidden ones too."""
    names = []
    for line in text.splitlines():
        if line.strip():
            name = split_key_values(line).get("PartitionName")
            if not name:
                raise SlurmOutputError(f"scontrol show partition: a line without PartitionName: {one_line(line, 120)!r}")
            names.append(name)
    return names


# -- nodes ---------------------------------------------------------------------------

@dataclass
class NodeCpus:
    name: str
    hostname: str
    allocated: int
    idle: int
    other: int  # on nodes no job can be given (down, drained, ...)
    total: int
    state: str
    gres: str = ""  # the node's GRES as sinfo prints them (gpu:a100:4(S:0-1),mps:400); "" or (null): none
    gres_used: Optional[str] = None  # GresUsed (gpu:a100:2(IDX:0-1)); None: not told
    # The node's GRES are its sinfo group's (sinfo --json v0.0.40+ lists groups of nodes and the
    # first node's Gres for all of them): see node_accelerators.
    gres_of_group: bool = False


def parse_sinfo_text(text: str) -> list[NodeCpus]:
    """``sinfo -h -N -p NAME -O SINFO_TEXT_FORMAT`` (one line per node: NodeList|NodeHost|CPUsState|
    StateLong|Gres|GresUsed, CPUsState alloc/idle/other/total as %C)."""
    nodes: dict[str, NodeCpus] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.strip().split("|")
        try:
            name, hostname, cpus, state, gres, gres_used = parts
            allocated, idle, other, total = (int(v) for v in cpus.split("/"))
        except ValueError:
            raise SlurmOutputError(f"sinfo: unexpected output line {number}: {one_line(line, 120)!r}") from None
        nodes.setdefault(name, NodeCpus(name, hostname or name, allocated, idle, other, total, state, gres, gres_used))
    return list(nodes.values())


def _json_number(value: Any) -> Optional[int]:
    """Slurm JSON numbers: plain (v0.0.38) or {"set": .., "infinite": .., "number": ..} (v0.0.39+)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    raise SlurmOutputError(f"sinfo --json: expected a number, got {one_line(repr(value), 120)}")


def _json_states(node: Mapping[str, Any]) -> list[str]:
    state = node.get("state")
    states = [state] if isinstance(state, str) else list(state or [])
    states += list(node.get("state_flags") or [])
    return [str(s).upper() for s in states]


def parse_sinfo_json(text: str, partition: str) -> list[NodeCpus]:
    """``sinfo --json``: the nodes of ``partition`` with their CPU counts.

    Two shapes exist: a ``nodes`` list (openapi v0.0.37-39: Slurm 21.08-23.02;
    ``state`` a string plus ``state_flags`` up to 22.05, a list from 23.02) and
    a ``sinfo`` list of node groups with ``cpus`` {allocated, idle, other,
    total} (data_parser v0.0.40+: Slurm 23.11 and later).
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SlurmOutputError(f"sinfo --json: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise SlurmOutputError("sinfo --json: not a JSON object")
    errors = [e for e in data.get("errors") or [] if e]
    if errors:
        first = errors[0]
        message = first.get("description") or first.get("error") if isinstance(first, dict) else first
        raise LrmsQueryError(f"sinfo --json reported an error: {one_line(str(message), 120)}")
    if isinstance(data.get("sinfo"), list):
        return _sinfo_groups(data["sinfo"], partition)
    if isinstance(data.get("nodes"), list):
        return _sinfo_nodes(data["nodes"], partition)
    raise SlurmOutputError("sinfo --json: neither a 'nodes' nor a 'sinfo' list in the output")


def _sinfo_nodes(items: list[Any], partition: str) -> list[NodeCpus]:
    nodes = []
    for item in items:
        if not isinstance(item, dict) or "name" not in item:
            raise SlurmOutputError("sinfo --json: a node without a name")
        if partition not in (item.get("partitions") or []):
            continue
        total = _json_number(item.get("cpus"))
        allocated = _json_number(item.get("alloc_cpus")) or 0
        if total is None:
            raise SlurmOutputError(f"sinfo --json: node {item['name']} has no CPU count")
        states = _json_states(item)
        if UNUSABLE_NODE_STATES.intersection(states):
            idle, other = 0, total - allocated
        else:
            idle, other = total - allocated, 0
        nodes.append(NodeCpus(str(item["name"]), str(item.get("hostname") or item["name"]), allocated, max(0, idle),
                              max(0, other), total, "+".join(states).lower(), _json_text(item.get("gres")),
                              _json_text(item.get("gres_used")) if "gres_used" in item else None))
    return nodes


def _json_text(value: Any) -> str:
    """A text of sinfo --json (GRES): a string, or nothing."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SlurmOutputError(f"sinfo --json: expected a text, got {one_line(repr(value), 120)}")
    return value


def _sinfo_groups(groups: list[Any], partition: str) -> list[NodeCpus]:
    nodes: dict[str, NodeCpus] = {}
    for group in groups:
        if not isinstance(group, dict):
            raise SlurmOutputError("sinfo --json: a 'sinfo' entry is not an object")
        if (group.get("partition") or {}).get("name") != partition:
            continue
        names = list((group.get("nodes") or {}).get("nodes") or [])
        hostnames = list((group.get("nodes") or {}).get("hostnames") or [])
        cpus = group.get("cpus") or {}
        counts = [count for count in (_json_number(cpus.get(k)) for k in ("allocated", "idle", "other", "total")) if count is not None]
        if not names or len(counts) != 4:
            raise SlurmOutputError("sinfo --json: a node group without node names or CPU counts")
        state = "+".join(str(s).upper() for s in ((group.get("node") or {}).get("state") or [])).lower()
        gres = group.get("gres") or {}
        if not isinstance(gres, dict):
            raise SlurmOutputError("sinfo --json: a node group's 'gres' is not an object")
        gres_total, gres_used = _json_text(gres.get("total")), (_json_text(gres.get("used")) if "used" in gres else None)
        # A group's CPU counts are its nodes' sums; spread them evenly only when
        # the group is one node, otherwise keep the sums on the first node and
        # zero on the others so totals stay exact.
        expanded = [n for name in names for n in expand_hostlist(name)]
        hosts = [h for host in hostnames for h in expand_hostlist(host)] if hostnames else expanded
        for i, name in enumerate(expanded):
            if name in nodes:
                continue
            allocated, idle, other, total = counts if i == 0 else (0, 0, 0, 0)
            # sinfo groups the nodes of one GresUsed (--json matches on it), not of one Gres: every
            # node of the group uses what the first does, and is taken to have its Gres.
            nodes[name] = NodeCpus(name, hosts[i] if i < len(hosts) else name, allocated, idle, other, total, state,
                                   gres_total, gres_used, len(expanded) > 1)
    return list(nodes.values())


# Slurm node state words (sinfo %T, lower case; JSON flags joined by '+') -> SSS Node State,
# checked in this order; anything else is decided by the CPU counts (idle > 0: Idle, else Busy).
_OFFLINE_WORDS = ("drain", "down", "fail", "maint", "future", "planned", "invalid", "reboot", "power_down", "powered_down",
                  "powering_down", "inval")
_UNKNOWN_WORDS = ("unknown", "not_responding", "no_respond", "unk")


def sss_node_state(state: str, idle: Optional[int]) -> str:
    """The SSS Node State of a Slurm node: Offline when drained, draining, down or in
    maintenance; Unknown when Slurm lost it (``*`` suffix, NOT_RESPONDING, UNKNOWN); else Idle
    when a CPU is free for a new job, Busy when none is (docs/batch-systems.md has the table)."""
    word = state.lower()
    if word.endswith("*") or any(w in word for w in _UNKNOWN_WORDS):
        return "Unknown"
    if any(w in word for w in _OFFLINE_WORDS):
        return "Offline"
    if idle is not None:
        return "Idle" if idle > 0 else "Busy"
    return "Idle" if ("idle" in word or "mix" in word) else "Busy"


def node_allocations(nodes: Sequence[NodeCpus], lookup: dict[str, str]) -> list[NodeAllocation]:
    """The scheduler's view of each node (a grouped ``sinfo --json`` gives one set of counts per
    group of nodes: those nodes' own CPU counts stay unknown)."""
    seen_group_rest = {id(n) for n in nodes if n.total == 0 and n.allocated == 0 and n.idle == 0 and n.other == 0}
    result = []
    for n in nodes:
        counted = id(n) not in seen_group_rest
        result.append(NodeAllocation(name=site_host(n.hostname, lookup), state=sss_node_state(n.state, n.idle if counted else None),
                                     lrms_state=n.state, total_cpus=n.total if counted else None,
                                     allocated_cpus=n.allocated if counted else None,
                                     free_cpus=n.idle if counted else None))  # sinfo's idle: FreeCPUs' own
    return result


# -- accelerators (GRES) -------------------------------------------------------------

_GRES_DETAIL = re.compile(r"\([^()]*\)")  # (S:0-1), (IDX:0,2), (IDX:N/A): what follows a count
_COUNT_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4, "P": 1024 ** 5}
_GRES_COUNT = re.compile(r"(\d+)([KMGTP]?)")
_GRES_TYPE = re.compile(r"[\w.+-]*")


def gres_gpus(text: str) -> dict[Optional[str], int]:
    """The GPUs a Slurm GRES text names, by type (None: untyped), summed per type; {} when none.

    The forms Slurm prints: node Gres ``gpu:a100:4(S:0-1),mps:400`` and GresUsed
    ``gpu:a100:2(IDX:0-1)``, ``gpu:(null):0(IDX:N/A)``, ``gpu:1``; a job's TRES per job, node or
    task ``gpu:2`` (Slurm <= 21.08), ``gres:gpu:a100:2`` (21.08-23.02), ``gres/gpu:2`` (23.11+), and
    ``gres:gpu`` or ``gpu:a100`` with no count (one, as sbatch reads ``--gres``).  Other GRES
    (mps, shard, nic, licences) are not accelerators and are skipped.  SlurmOutputError for a
    count that is not one."""
    text = text.strip()
    if not text or text.upper() in _NONE_WORDS:
        return {}
    found: dict[Optional[str], int] = {}
    for item in _GRES_DETAIL.sub("", text.replace("(null)", "")).split(","):
        name, _, rest = item.strip().partition(":")
        if name == "gres":
            name, _, rest = rest.partition(":")
        elif name.startswith("gres/"):
            name = name[5:]
        if name != "gpu":
            continue
        model, _, count_text = rest.rpartition(":")
        match = _GRES_COUNT.fullmatch(count_text)
        if match is not None and _GRES_TYPE.fullmatch(model):
            count = int(match.group(1)) * _COUNT_UNITS[match.group(2)]
        elif match is None and _GRES_TYPE.fullmatch(rest):
            model, count = rest, 1  # gpu or gpu:a100: one GPU, as sbatch reads --gres=gpu:a100
        else:
            raise SlurmOutputError(f"GRES {one_line(text, 120)!r}: {item.strip()!r} has no GPU count")
        key = model or None
        found[key] = found.get(key, 0) + count
    return found


def tres_gpus(tres: str) -> Optional[int]:
    """The GPUs of a TRES list (``cpu=16,mem=128000M,node=1,gres/gpu=2``: squeue's tres-alloc,
    scontrol's partition TRES), or None when it names none: ``gres/gpu`` is every type's total,
    else the typed ``gres/gpu:TYPE`` counts are summed.  Slurm lists GPUs there only when
    AccountingStorageTRES names them."""
    if "gres/gpu" not in tres:
        return None
    items = parse_tres(tres)
    if "gres/gpu" in items:
        value = items["gres/gpu"]
        return int(value) if value.isdigit() else None
    typed = [v for k, v in items.items() if k.startswith("gres/gpu:")]
    return sum(int(v) for v in typed) if typed and all(v.isdigit() for v in typed) else None


def _gres_total(text: str) -> Optional[int]:
    """The GPUs of a GRES text, every type together; None when it names none."""
    gpus = gres_gpus(text)
    return sum(gpus.values()) if gpus else None


def requested_gpus(alloc_tres: str, per_job: str, per_node: str, per_task: str,
                   node_count: Optional[int], tasks: Optional[int],
                   tres: Callable[[str], Optional[int]] = tres_gpus,
                   gres: Callable[[str], Optional[int]] = _gres_total) -> Optional[int]:
    """The GPUs a job asked for (or holds): its tres-alloc's when Slurm accounts GPUs (what it
    holds, or will hold when it waits), else ``--gpus``/tres-per-job, else tres-per-node (``--gres``,
    ``--gpus-per-node``) times its nodes, else tres-per-task (``--gpus-per-task``) times its tasks;
    None when none of them names a GPU (a job that asked for none).  tres-per-socket is not read:
    squeue does not say how many sockets a job has.  ``tres``/``gres``: the readers of one TRES and
    one GRES text (a parse passes cached ones)."""
    accounted = tres(alloc_tres)
    if accounted is not None:
        return accounted
    for text, times in ((per_job, 1), (per_node, node_count), (per_task, tasks)):
        gpus = gres(text)
        if gpus is not None:
            return gpus * times if times is not None else None
    return None


def node_accelerators(nodes: Sequence[NodeCpus], allocations: Sequence[NodeAllocation],
                      partition: Optional[PartitionInfo]) -> tuple[QueueAccelerators, ...]:
    """The partition's GPUs (glueinfo.lrms.accelerators): each node's ``gpu`` GRES (its Gres) and
    those jobs hold (GresUsed), a new job's free ones on the nodes it can start on, at most the
    GPUs of the partition's MaxNodes largest nodes for one job.

    A node group of ``sinfo --json`` (v0.0.40+) gives its first node's Gres for every node of it:
    when the partition's TRES counts its GPUs (``gres/gpu=N``) and the groups' sum is not that,
    the GPUs are unknown (SlurmOutputError naming both) rather than guessed."""
    readings = []
    gpus_of = _memo(gres_gpus)  # thousands of nodes share a few Gres and GresUsed texts
    for node, allocation in zip(nodes, allocations, strict=True):
        total = gpus_of(node.gres)
        used = gpus_of(node.gres_used) if node.gres_used is not None else None
        for model, count in total.items():
            readings.append(NodeAccelerators(model=model, total=count,
                                             used=None if used is None else used.get(model, 0),
                                             can_start=allocation.state == "Idle"))
    accelerators = queue_accelerators(readings, partition.max_nodes if partition is not None else None)
    known = partition.tres_gpus if partition is not None else None
    if known is not None and any(n.gres_of_group for n in nodes) and sum(a.total or 0 for a in accelerators) != known:
        raise SlurmOutputError(f"sinfo --json: the node groups' GRES give {sum(a.total or 0 for a in accelerators)} "
                               f"GPUs, scontrol's partition TRES {known}: its GPUs are unknown")
    return accelerators


# -- jobs ----------------------------------------------------------------------------

@dataclass(slots=True)
class SlurmJob:
    job_id: str
    state: str
    reason: str
    user: Optional[str]
    account: Optional[str]
    partition: Optional[str]
    submit_time: Optional[float]
    start_time: Optional[float]  # actual when started, Slurm's forecast when pending
    end_time: Optional[float]  # actual when finished, the time-limit end when running
    time_limit_s: Optional[int]
    elapsed_s: Optional[int]
    cpus: Optional[int]
    memory_mb: Optional[int]
    node_count: Optional[int]
    nodelist: str
    qos: Optional[str]
    name: str
    # From JOB_STATES (None for a state this version does not know): set by parse_squeue.
    glue_status: Optional[str] = None
    sss_state: Optional[str] = None
    finished: bool = False
    # Read for a published job list only (parse_squeue full=True).
    command: Optional[str] = None  # the batch script or program, then its arguments, joined by spaces
    work_dir: Optional[str] = None
    exit_code: str = ""  # as squeue prints it: the wait status (<= 22.05) or EXIT:SIGNAL (>= 23.02)
    group: Optional[str] = None
    priority: Optional[int] = None
    dependency: Optional[str] = None  # e.g. afterok:12(unfulfilled),afterany:13_*(unfulfilled)
    features: Optional[str] = None
    submit_host: Optional[str] = None
    tasks: Optional[int] = None
    gpus: Optional[int] = None  # GPUs asked for (requested_gpus); None: none named
    # The counts-only reading keeps SubmitTime as printed: only the waits of jobs started lately read it.
    submit_text: str = ""

    @property
    def running(self) -> bool:
        return self.glue_status == "RUNNING"

    @property
    def eligible_pending(self) -> bool:
        """Queued and not held: what a new job would queue behind."""
        return self.glue_status == "SCHEDULED"


def map_state(state: str, reason: str) -> tuple[Optional[str], Optional[str], bool]:
    """(GLUE status, SSS state, finished?) of a Slurm job state; held PENDING jobs are (WAITING, Hold)."""
    if state == "PENDING" and reason in HELD_REASONS:
        return "WAITING", "Hold", False
    return JOB_STATES.get(state, (None, None, False))


def _opt(text: str) -> Optional[str]:
    text = text.strip()
    return None if text.upper() in _NONE_WORDS else text


# Slurm's NO_VAL and INFINITE for 32-bit counts: printed as numbers by squeue (NumTasks of a job cancelled
# while pending is 4294967294).
_NO_COUNT = 0xFFFFFFFE


def _count_or_none(text: str) -> Optional[int]:
    number = _int_or_none(text)
    return None if number is None or number < 0 or number >= _NO_COUNT else number


def field_separator(token: str) -> str:
    return f"|{token}|"


def record_end(token: str) -> str:
    return f"|{token}."


def squeue_format(token: str, full: bool = True) -> str:
    """The ``squeue -O`` argument: each field's suffix is a separator made of ``token``.

    Job names (and some pending reasons) are free text that may hold ``|`` and
    newlines; a user who names a job ``x\n999|RUNNING|...`` must not be able
    to add a job or shift a field.  A random token per query cannot be guessed
    in advance, and a field with no width is never truncated.  ``full=False``: without
    SQUEUE_GPU_FIELDS, for the counts-only reading.
    """
    sep = field_separator(token)
    fields = SQUEUE_FIELDS if full else SQUEUE_COUNTS_FIELDS  # full: what parse_squeue reads with full=True
    return ",".join(f"{name}:{sep}" for name in fields[:-1]) + f",{fields[-1]}:{record_end(token)}"


def _memo(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    """``convert`` with a cache for one parse: queues repeat the same limits,
    sizes, states and forecast minutes thousands of times."""
    cache: dict[str, Any] = {}

    def cached(text: str) -> Any:
        try:
            return cache[text]
        except KeyError:
            value = cache[text] = convert(text)
            return value

    return cached


_EPOCH = datetime.datetime(1970, 1, 1)


def fast_timestamp(text: str) -> Optional[float]:
    """parse_timestamp, about 3x faster on the common well-formed case (C's fromisoformat
    after the strict shape check; fromisoformat alone would also take other ISO forms)."""
    if len(text) != 19 or text[10] != "T" or text[4] != "-" or text[7] != "-" or text[13] != ":" or text[16] != ":":
        return parse_timestamp(text)  # N/A, Unknown, ... or a ValueError naming the text
    return (datetime.datetime.fromisoformat(text) - _EPOCH).total_seconds()


def _memory_of_tres(tres: str) -> Optional[int]:
    memory = parse_tres(tres).get("mem")
    return parse_memory_mb(memory) if memory else None


GpusOf = Callable[[str, str, str, str, Optional[int], Optional[int]], Optional[int]]


def _gpu_reader() -> GpusOf:
    """requested_gpus for one parse: nothing read for a job that names no GPU (most of them), and each
    TRES and GRES text read once (a queue repeats a handful).  A request this reading does not
    understand is unknown (None); the job's other fields stand."""
    tres, gres = _memo(tres_gpus), _memo(_gres_total)

    def gpus_of(alloc_tres: str, per_job: str, per_node: str, per_task: str, node_count: Optional[int],
                tasks: Optional[int]) -> Optional[int]:
        if "gpu" not in alloc_tres and "gpu" not in per_job and "gpu" not in per_node and "gpu" not in per_task:
            return None
        try:
            return requested_gpus(alloc_tres, per_job, per_node, per_task, node_count, tasks, tres, gres)
        except SlurmOutputError:
            return None

    return gpus_of


def parse_squeue(text: str, token: str, full: bool = True) -> list[SlurmJob]:
    """``squeue -h -r -t all -O squeue_format(token, full)`` -> jobs.  Any malformed record fails the whole
    parse: counts from a partly understood queue would be wrong, not just incomplete.

    ``full=False`` reads only what the counts, per-VO counts and estimates need
    (state, reason, user, account, start, time limit, time used, CPUs, and an allocated
    job's node list) and leaves the rest None: half the cost when no job list is published.
    """
    jobs = []
    n_fields = len(SQUEUE_FIELDS if full else SQUEUE_COUNTS_FIELDS)
    sep, end = field_separator(token), record_end(token) + "\n"
    records = text.split(end)
    if records[-1].strip():
        raise SlurmOutputError(f"squeue: output does not end with a complete job record: "
                               f"{one_line(records[-1].replace(sep, '|'), 120)!r}")
    timestamp, duration, number, memory, opt, count = (fast_timestamp, _memo(parse_duration_s), _memo(_int_or_none),
                                                       _memo(_memory_of_tres), _memo(_opt), _memo(_count_or_none))
    mapping = _memo(lambda key: map_state(*key.split("|", 1)))
    gpus_of = _gpu_reader()
    valid_state = _memo(lambda state: bool(re.fullmatch(r"[A-Z_]+", state)))
    separators = n_fields - 1
    for number_of_record, record in enumerate(records[:-1], 1):
        try:
            if record.count(sep) != separators:
                raise SlurmOutputError(f"squeue: unexpected output in job record {number_of_record}: "
                                       f"{one_line(record.replace(sep, '|'), 120)!r}")
            if not full:  # the counts read the first twelve fields: the others are not even split apart
                job_id, state, reason, user, account, partition, submit, start, _, limit, used, cpus, rest = record.split(sep, 12)
                job_id, state, reason = job_id.strip(), state.strip().upper(), reason.strip()
                if not job_id or not valid_state(state):
                    raise ValueError("no job id or state")
                glue_status, sss_state, finished = mapping(f"{state}|{reason}")
                # An allocated job's nodes: the CPUs it holds there count against MaxCPUsPerNode (partition_free_cpus).
                where = ""
                if sss_state == "Running":  # found in place: splitting would copy the long fields after it
                    start_at = rest.find(sep, rest.find(sep) + len(sep)) + len(sep)
                    where = rest[start_at:rest.find(sep, start_at)].strip()
                jobs.append(SlurmJob(
                    job_id, state, reason, opt(user), opt(account), opt(partition), None, timestamp(start), None, duration(limit),
                    duration(used), number(cpus), None, None, where, None, "", glue_status, sss_state, finished,
                    submit_text=submit))
                continue
            (job_id, state, reason, user, account, partition, submit, start, end_text, limit, used, cpus, tres,
             node_count, nodelist, qos, command, work_dir, exit_code, group, priority, dependency, features,
             submit_host, tasks, per_job, per_node, per_task, name) = record.split(sep)
            job_id, state, reason = job_id.strip(), state.strip().upper(), reason.strip()
            if not job_id or not valid_state(state):
                raise ValueError("no job id or state")
            glue_status, sss_state, finished = mapping(f"{state}|{reason}")
            nodes_asked = number(node_count)
            task_count = int(tasks) if tasks.isdigit() and len(tasks) < 10 else count(tasks)
            jobs.append(SlurmJob(
                job_id, state, reason, opt(user), opt(account), opt(partition), timestamp(submit), timestamp(start),
                timestamp(end_text), duration(limit), duration(used), number(cpus), memory(tres), nodes_asked,
                nodelist.strip(), opt(qos), name, glue_status, sss_state, finished,
                # Free text squeue prints as stored ("(null)": not set) and numbers, checked inline: a
                # call per field and job would be a fifth of the parse.
                command if command and command != NULL else None, work_dir if work_dir and work_dir != NULL else None,
                exit_code, group if group and group != NULL else None,
                int(priority) if priority.isdigit() else _int_or_none(priority),
                dependency if dependency and dependency != NULL else None,
                features if features and features != NULL else None,
                submit_host if submit_host and submit_host != NULL else None, task_count,
                # most jobs ask for no GRES at all: no call for them (50,000 jobs a refresh)
                gpus_of(tres, per_job, per_node, per_task, nodes_asked, task_count)
                if per_node != "N/A" or per_job != "N/A" or per_task != "N/A" or "gres/gpu" in tres else None))
        except ValueError as exc:
            raise SlurmOutputError(f"squeue: unexpected output in job record {number_of_record} ({exc}): "
                                   f"{one_line(record.replace(sep, '|'), 120)!r}") from None
    return jobs


def node_names(hostname_of: Mapping[str, str]) -> Callable[[str], list[str]]:
    """Slurm node list -> host names (via sinfo's NodeHostName), cached for one refresh:
    thousands of jobs share a handful of node lists.  A list that does not expand gives []."""

    def expand(nodelist: str) -> list[str]:
        if "[" not in nodelist and "," not in nodelist:
            return [hostname_of.get(nodelist, nodelist)] if nodelist and nodelist.upper() not in _NONE_WORDS else []
        try:
            return [hostname_of.get(n, n) for n in expand_hostlist(nodelist)]
        except ValueError:
            return []

    return _memo(expand)


# How a finished job ended, by its Slurm state: someone (or the scheduler, for another job) stopped it,
# or it or its resources failed; COMPLETED is the one success.
COMPLETIONS = {"COMPLETED": "success", "CANCELLED": "cancelled", "PREEMPTED": "cancelled", "REVOKED": "cancelled",
               "FAILED": "failed", "TIMEOUT": "failed", "OUT_OF_MEMORY": "failed", "NODE_FAIL": "failed",
               "BOOT_FAIL": "failed", "DEADLINE": "failed"}
HOLDS = {"JobHeldUser": ("User",), "JobHeldAdmin": ("System",)}
# Slurm dependency types the SSS Dependency conditions can say (after, aftercorr, afterburstbuffer and
# singleton have no SSS word and are left out).
_DEPENDENCY_CONDITIONS = {"afterok": "OnSuccess", "afternotok": "OnFailure", "afterany": "OnExit"}
_DEPENDENCY = re.compile(r"([a-z]+)((?::[^,?:()]+)*)(?:\([^)]*\))?")


def exit_status(text: str) -> tuple[Optional[int], Optional[int]]:
    """squeue's exit_code -> (exit code, signal), one of them None: ``3:0`` / ``0:9`` (Slurm >= 23.02)
    or the wait status ``768`` / ``9`` (<= 22.05); (None, None) when empty or not a number."""
    code, colon, signal = text.partition(":")
    try:
        if colon:
            number, signal_number = int(code), int(signal)
        else:
            status = int(text)
            number, signal_number = status >> 8 & 0xFF, status & 0x7F
    except ValueError:
        return None, None
    return (None, signal_number) if signal_number else (number, None)


def dependencies(text: Optional[str]) -> tuple[tuple[str, str], ...]:
    """squeue's Dependency -> (SSS condition, job id) pairs.  Dependencies joined by ``?`` (any one
    of them) are left out whole: the SSS Dependency elements of a job all have to hold."""
    if not text or "?" in text:
        return ()
    found = []
    for item in text.split(","):
        match = _DEPENDENCY.fullmatch(item.strip())
        condition = _DEPENDENCY_CONDITIONS.get(match.group(1)) if match else None
        if match and condition:
            found += [(condition, other.split("+", 1)[0]) for other in match.group(2).split(":") if other]
    return tuple(found)


def job_info(job: SlurmJob, hostname_of: Mapping[str, str],
             nodes_of: Optional[Callable[[str], list[str]]] = None, private: frozenset[str] = frozenset()) -> JobInfo:
    """The model's view of one Slurm job (GLUE CE Job / SSS Job); ``private``: the private fields
    (glueinfo.core.job.PRIVATE_FIELDS) to fill too.

    A finished job started when Slurm gave it nodes: a job cancelled while it
    waited has none, and its StartTime (which Slurm sets to the time it was
    cancelled) is not kept.
    """
    glue_status, sss_state, finished = job.glue_status, job.sss_state, job.finished
    if finished:
        started = job.start_time is not None and job.nodelist.upper() not in _NONE_WORDS
    else:
        started = sss_state in ("Running", "Suspended") and job.start_time is not None
    pending = not started and not finished
    reason = job.reason if job.reason and job.reason.upper() not in _NONE_WORDS else None
    nodes = list((nodes_of or node_names(hostname_of))(job.nodelist)) if started else []
    info = JobInfo(
        local_id=job.job_id, name=job.name or None, local_owner=job.user, account=job.account, queue=job.partition,
        lrms_state=job.state, sss_state=sss_state, glue_status=glue_status,
        submit_time=job.submit_time,
        start_time=job.start_time if (started or pending) else None,
        start_is_estimate=pending and job.start_time is not None,
        end_time=job.end_time if finished else None,
        requested_processors=job.cpus, requested_memory_mb=job.memory_mb, requested_duration_s=job.time_limit_s,
        requested_nodes=job.node_count,
        delivered_processors=job.cpus if started else None,
        delivered_wall_s=job.elapsed_s if started else None,
        nodes=nodes,
        scheduler_specific=reason if pending else None,
    )
    # The SSS fields are set apart, each only when known: a keyword is matched by name against the
    # model's ~40 fields, which costs 10,000s of jobs more than setting the few that are known.
    if job.group is not None:
        info.local_group = job.group
    if job.qos is not None:
        info.qos = job.qos
    if job.priority is not None:
        info.priority = job.priority
    if job.submit_host is not None:
        info.submit_host = job.submit_host
    if job.features is not None:
        info.features = job.features
    if job.tasks is not None:
        info.task_count = job.tasks
    if job.gpus is not None:
        info.requested_accelerators = job.gpus
    if job.command:  # the batch script (or program), then its arguments, joined by spaces
        executable, _, arguments = job.command.partition(" ")
        info.executable = executable
        if arguments and "arguments" in private:
            info.arguments = arguments
    if job.work_dir is not None and "working_directory" in private:
        info.working_directory = job.work_dir
    if pending and reason in HOLDS:
        info.holds = HOLDS[reason]
    if job.dependency:
        info.dependencies = dependencies(job.dependency)
    if finished:
        info.completion = COMPLETIONS.get(job.state)
        if started:
            info.exit_code, info.exit_signal = exit_status(job.exit_code)
        if info.completion == "failed":
            info.scheduler_specific = reason  # NonZeroExitCode, JobLaunchFailure, TimeLimit...
    return info


# -- QoS limits (slurmdbd only) ------------------------------------------------------

@dataclass
class QosLimits:
    max_running_jobs: Optional[int] = None  # GrpJobs
    max_total_jobs: Optional[int] = None  # GrpSubmit
    max_wall_s: Optional[int] = None  # MaxWall
    max_cpu_min: Optional[int] = None  # MaxTRESMins cpu=


def parse_qos(text: str, name: str) -> QosLimits:
    """``sacctmgr -nP show qos NAME format=Name,GrpJobs,GrpSubmit,MaxWall,MaxTRESMins``."""
    for line in text.splitlines():
        parts = line.strip().split("|")
        if not line.strip() or parts[0] != name:
            continue
        if len(parts) != 5:
            raise SlurmOutputError(f"sacctmgr show qos: unexpected output {one_line(line, 120)!r}")
        try:
            cpu_min = parse_tres(parts[4]).get("cpu")
            return QosLimits(max_running_jobs=_int_or_none(parts[1]) if parts[1] else None,
                             max_total_jobs=_int_or_none(parts[2]) if parts[2] else None,
                             max_wall_s=parse_duration_s(parts[3]) if parts[3] else None,
                             max_cpu_min=int(cpu_min) if cpu_min else None)
        except ValueError as exc:
            raise SlurmOutputError(f"sacctmgr show qos: unexpected output ({exc})") from None
    raise SlurmOutputError(f"sacctmgr show qos: no QoS {name!r} in output")


# -- estimates -----------------------------------------------------------------------

def response_times(jobs: Sequence[SlurmJob], free_cpus: Optional[int], usable_cpus: Optional[int],
                   partition_max_time_s: Optional[int], now: float) -> tuple[Optional[int], Optional[int]]:
    """(EstimatedResponseTime, WorstResponseTime) in seconds for a job submitted now, by Slurm's
    forecasts and time limits alone.  The query publishes it through :func:`estimate_waits`, which
    puts the waits Slurm measured (jobs started lately) before step 3's drain model.

    1. Free CPUs and no job waiting for resources/priority: (0, 0), the job
       starts at the next scheduling pass.
    2. Else, when Slurm forecast start times for waiting jobs (the backfill
       scheduler plans every job to run to its time limit): the new job joins
       that queue, so Estimated = the mean and Worst = the largest forecast
       wait (start - now, at least 0) of the waiting jobs.
    3. Else a drain model on time limits: the new job waits for the first
       running job to reach its limit (0 if a CPU is free), then for the CPU
       time of the waiting jobs (CPUs x time limit) to drain through the
       partition's usable CPUs:  Worst = first + sum(cpus x limit) / usable.
       Estimated = Worst x u, where u is the mean fraction of their time limit
       the recently finished jobs still listed by squeue actually ran (1 if
       none are listed).  A job without a time limit uses the partition's
       MaxTime; if that is unlimited too, the estimate is unknown (None).
    """
    waiting = [j for j in jobs if j.eligible_pending]
    if free_cpus and not waiting:
        return 0, 0
    forecast = from_forecasts([max(0.0, j.start_time - now) for j in waiting if j.start_time is not None])
    if forecast is not None:
        return forecast
    if not usable_cpus:
        return None, None

    def limit(job: SlurmJob) -> Optional[int]:
        return job.time_limit_s if job.time_limit_s is not None else partition_max_time_s

    figures = drain([None if (lim := limit(j)) is None else lim - (j.elapsed_s or 0) for j in jobs if j.running],
                    [(j.cpus or 1, limit(j)) for j in waiting], usable_cpus, bool(free_cpus))
    if figures is None:
        return None, None
    worst = figures.first + figures.spread
    ratios = [min(1.0, (j.elapsed_s or 0) / limit_s) for j in jobs
              if j.finished and (limit_s := limit(j)) and j.elapsed_s is not None]
    used = sum(ratios) / len(ratios) if ratios else 1.0
    return int(round(worst * used)), int(round(worst))


# Slurm's accounting, asked for the waits of the jobs that started lately when squeue (which forgets
# a finished job MinJobAge after it ended, 300 s by default) shows none and forecasts none.
SACCT_FIELDS = ("JobIDRaw", "State", "Submit", "Start", "ElapsedRaw", "User", "Group", "Account")
# What sacct says on a Slurm without accounting (AccountingStorageType=accounting_storage/none): no
# history to read, not a failure.
_NO_ACCOUNTING = "accounting storage is disabled"
# The VO of a job by its (user, group, account): see vo_finder.
VoOf = Callable[[Optional[str], Optional[str], Optional[str]], Optional[str]]


def _started_lately(job: SlurmJob, since: float) -> bool:
    """Whether the job started at or after ``since``: it runs or is suspended, or it ended having
    run (TimeUsed above 0: a job cancelled while it waited has a StartTime too, its cancel time)."""
    start = job.start_time
    return (start is not None and start >= since
            and (job.sss_state in ("Running", "Suspended") or (job.finished and bool(job.elapsed_s))))


def forecast_records(jobs: Iterable[SlurmJob], vo_of: VoOf) -> Iterable[WaitRecord]:
    """The records glueinfo.lrms.waiting reads of squeue's queued jobs that are not held: each with
    the StartTime Slurm forecast for it (the backfill scheduler's plan; none before it planned it)."""
    for job in jobs:
        if job.glue_status == "SCHEDULED" and job.start_time is not None:
            yield vo_of(job.user, job.group, job.account), True, None, job.start_time


def started_records(jobs: Iterable[SlurmJob], vo_of: VoOf, since: float) -> Iterable[WaitRecord]:
    """The records of squeue's jobs that started at or after ``since``: SubmitTime and StartTime.  A
    job's SubmitTime is read only here, and only for those (see SlurmJob.submit_text)."""
    for job in jobs:
        if _started_lately(job, since):
            submit = job.submit_time if job.submit_time is not None else fast_timestamp(job.submit_text)
            yield vo_of(job.user, job.group, job.account), False, submit, job.start_time


def sacct_args(partition: str, since: float) -> tuple[str, ...]:
    """``sacct`` for the partition's jobs since ``since`` (allocations only, every user, no header,
    ``|``-separated: no field asked for can hold a ``|``)."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(since))  # sacct reads it in TZ=UTC
    return ("-a", "-X", "-n", "-P", "-r", partition, "-S", start, "-E", "now", "-o", ",".join(SACCT_FIELDS))


def sacct_records(text: str, vo_of: VoOf, since: float) -> list[WaitRecord]:
    """The jobs of ``sacct -P -o SACCT_FIELDS`` that started at or after ``since`` (a Start, and
    ElapsedRaw above 0), as waiting records.  SlurmOutputError for a line not in that shape."""
    records: list[WaitRecord] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != len(SACCT_FIELDS):
            raise SlurmOutputError(f"sacct: unexpected output {one_line(line, 120)!r}")
        _job, _state, submit_text, start_text, elapsed, user, group, account = fields
        try:
            submit, start = parse_timestamp(submit_text), parse_timestamp(start_text)
        except ValueError as exc:
            raise SlurmOutputError(f"sacct: unexpected output ({exc}): {one_line(line, 120)!r}") from None
        if start is not None and start >= since and elapsed.strip().isdigit() and int(elapsed) > 0:
            records.append((vo_of(_opt(user), _opt(group), _opt(account)), False, submit, start))
    return records


def accounting_records(tools: Tools, partition: str, since: float, vo_of: VoOf) -> Optional[list[WaitRecord]]:
    """The partition's jobs that sacct saw start at or after ``since`` (:func:`sacct_records`), or
    None when this Slurm keeps no accounting; LrmsQueryError when sacct fails otherwise (slurmdbd
    down, timed out) or prints what it should not."""
    code, out, err = tools.call("sacct", *sacct_args(partition, since), ok_codes=range(256))
    if code == 0:
        return sacct_records(out, vo_of, since)
    if _NO_ACCOUNTING in err.lower():
        return None
    message = next((line for line in err.splitlines() if line.strip()), "") or "no message"
    raise LrmsQueryError(f"sacct exited {code}: {one_line(message, 120)}")


def estimate_waits(state: QueueState, jobs: Sequence[SlurmJob], usable: Optional[int], max_time_s: Optional[int],
                   now: float, vo_map: VoMap, history: Callable[[float, VoOf], Optional[list[WaitRecord]]]) -> None:
    """The partition's and its VOs' waiting times (glueinfo.lrms.waiting): a free CPU with no job
    queued, else Slurm's forecasts, else the waits of the jobs squeue saw start in the last hour (or,
    when it shows none, those of ``history(since, vo_of)``: sacct's, None without accounting), else
    :func:`response_times`' drain rule."""
    starts_now = bool(state.free_cpus) and not any(j.glue_status == "SCHEDULED" for j in jobs)
    seen = Observed(now)
    if not starts_now:  # each source read only when the ones before it told nothing
        vo_of = vo_finder(vo_map)
        seen.add(forecast_records(jobs, vo_of))
        if not seen.told:
            seen.add(started_records(jobs, vo_of, seen.since))
        if not seen.told:
            seen.add(history(seen.since, vo_of) or ())
    settle(state, seen, starts_now, lambda: response_times(jobs, state.free_cpus, usable, max_time_s, now))


def vo_finder(vo_map: VoMap) -> VoOf:
    """The VO of a job by its (user, group, account), the map applied once per distinct owners."""
    if not vo_map.rules:
        return lambda user, group, account: None  # Slurm knows no proxy VO: without rules every job is local
    found: dict[tuple[Optional[str], Optional[str], Optional[str]], Optional[str]] = {}

    def vo_of(user: Optional[str], group: Optional[str], account: Optional[str]) -> Optional[str]:
        key = (user, group, account)
        try:
            return found[key]
        except KeyError:
            vo = found[key] = vo_map.vo_of(user=user, group=group, account=account)
            return vo

    return vo_of


# -- running the commands ------------------------------------------------------------


def tools_for(ctx: LrmsContext, deadline: float) -> Tools:
    """glueinfo.lrms.commands.Tools for Slurm: ``slurm_bin_dir``, ``SLURM_CONF``, times in UTC, and no
    SQUEUE_*/SINFO_* variable of the caller's that would change the output formats parsed here."""
    env = environment(_OUTPUT_ENV_PREFIXES, _OUTPUT_ENV, SLURM_TIME_FORMAT="standard",
                      SLURM_CONF=str(ctx.ce_config.get("slurm_conf") or ""))
    return commands.tools_for(ctx, "slurm_bin_dir", env, deadline)


# -- the query -----------------------------------------------------------------------

JSON_SINCE = (21, 8)


def _reads_all_fields(ctx: LrmsContext) -> bool:
    """squeue's records are read whole for a published job list, and for ``[vos] group:`` rules: the
    counts-only reading stops before GroupName."""
    return ctx.with_jobs or ctx.vo_map.matches_by("group")


def query(ctx: LrmsContext) -> QueueState:
    deadline = time.monotonic() + ctx.timeout_s
    tools = tools_for(ctx, deadline)
    now = ctx.clock()
    state = QueueState(lrms_type="slurm", queue=ctx.queue, collected_at=now)
    step = Steps()
    errors = step.errors

    if not ctx.queue:
        raise LrmsQueryError("slurm: no partition named for this CE (set its queue)")
    queue = ctx.queue
    state.lrms_version = step(lambda: parse_version(tools("sinfo", "--version")))
    partition: Optional[PartitionInfo] = step(lambda: parse_partition(
        tools("scontrol", "show", "partition", "-o", queue), queue))
    nodes: Optional[list[NodeCpus]] = step(lambda: read_nodes(
        tools, ctx, state.lrms_version, per_node=partition is not None and partition.max_cpus_per_node is not None))
    token = secrets.token_hex(8)
    jobs: Optional[list[SlurmJob]] = step(lambda: _paused(parse_squeue, tools(
        "squeue", "-h", "-r", "-t", "all", "-p", queue, "-O", squeue_format(token, _reads_all_fields(ctx))), token,
        _reads_all_fields(ctx)))
    qos = None
    if partition is not None and partition.qos:
        qos_name = partition.qos
        qos = step(lambda: parse_qos(tools("sacctmgr", "-nP", "show", "qos", qos_name, f"format={QOS_FORMAT}"), qos_name))

    if partition is not None and nodes == [] and partition.nodes.upper() not in _NONE_WORDS:
        # scontrol names the partition's nodes and sinfo lists none of them: sinfo's answer is not about it
        errors.append(f"sinfo lists no node of partition {queue} (scontrol: Nodes={partition.nodes}): its CPUs are unknown")
        nodes = None
    usable = None
    if partition is not None:
        state.status = PARTITION_STATUS.get(partition.state)
        if state.status is None:
            errors.append(f"partition {partition.name}: unknown state {partition.state!r}")
        max_time = partition.max_time_s
        if qos and qos.max_wall_s is not None:
            max_time = qos.max_wall_s if max_time is None else min(max_time, qos.max_wall_s)
        state.max_wall_clock_time_s = max_time
        state.max_wall_clock_time_min = glue_minutes(max_time)
        state.priority = partition.priority_tier
        state.limits = partition_limits(partition, nodes, max_time)
    if qos is not None:
        state.max_running_jobs = qos.max_running_jobs
        state.max_total_jobs = qos.max_total_jobs
        state.max_cpu_time_min = qos.max_cpu_min
    if nodes is not None:
        state.total_cpus = sum(n.total for n in nodes)
        usable = sum(n.total - n.other for n in nodes)
        state.hosts = [n.hostname for n in nodes]
        state.nodes = node_allocations(nodes, host_matcher(h.hostname for h in ctx.hosts))
        state.free_cpus = partition_free_cpus(nodes, state.nodes, jobs, queue,
                                              partition.max_cpus_per_node if partition is not None else None)
        found_nodes, allocations = nodes, state.nodes
        state.accelerators = step(lambda: node_accelerators(found_nodes, allocations, partition)) or ()
    if jobs is not None:
        active = commands.count_jobs(state, jobs)
        # A job submitted to several partitions waits in each ("short,long"): squeue -p lists it in both.
        state.waiting_shared = any(not j.running and "," in (j.partition or "") for j in active)
        if ctx.vo_map.rules:  # Slurm knows no proxy VO: without rules every job is local
            state.vo_counts = commands.vo_counts(ctx.vo_map, [(j.user, j.group, j.account, None, j.glue_status)
                                                              for j in active])
        if ctx.with_jobs:
            hostname_of = {n.name: n.hostname for n in nodes or ()}
            nodes_of = node_names(hostname_of)
            private = private_fields(ctx.ce_config)
            with collector_paused():  # 10,000s of JobInfos: see glueinfo.core.gc_pause
                state.jobs = [job_info(j, hostname_of, nodes_of, private) for j in jobs]
            ctx.vo_map.assign(state.jobs)
    state.free_job_slots = free_job_slots(state.status, state.free_cpus, state.max_running_jobs, state.running_jobs)
    if jobs is not None and nodes is not None and state.status == "Production":
        estimate_waits(state, jobs, usable, partition.max_time_s if partition else None, now, ctx.vo_map,
                       lambda since, vo_of: step(lambda: accounting_records(tools, queue, since, vo_of)))
    # An empty sinfo or squeue answer is also what Slurm prints for a partition it does not have:
    # only scontrol's partition, a node or a job names it (glueinfo.lrms.queues).
    queues.settle(state, partition is not None or bool(nodes) or bool(jobs),
                  lambda: partition_names(tools("scontrol", "--all", "show", "partition", "-o")), errors, "partition")
    state.error = step.error("slurm")  # each reason once: sinfo runs twice
    return state


def partition_free_cpus(nodes: Sequence[NodeCpus], allocations: Sequence[NodeAllocation],
                        jobs: Optional[Sequence[SlurmJob]], queue: str, max_cpus_per_node: Optional[int]) -> Optional[int]:
    """FreeCPUs: the idle CPUs of the nodes a job of this partition can start on now.

    Only nodes whose view is Idle count: sinfo counts a not-responding (idle*) or MAINT node's
    CPUs as idle, and the node view makes those Unknown / Offline (commands.node_capacity).  With
    MaxCPUsPerNode, the partition's jobs may hold at most that many CPUs of a node, whatever else
    is idle there (slurm.conf: how sites keep cores for another partition, a GPU one say): each
    node then counts at most the limit less the CPUs this partition's allocated jobs hold on it
    (SSS Running: CONFIGURING while nodes boot or a prolog runs, RUNNING, COMPLETING, ...; a
    SUSPENDED job gives its CPUs back: sinfo counts them idle and the next job starts, seen live).
    A job on one node holds all its CPUs there; one on several nodes is charged on each the most it
    can hold there (its CPUs less one for each other node, at most the limit), so no CPU the
    partition cannot use is ever called free.  The nodes must be sinfo's own, one by one (under the
    limit read_nodes asks sinfo's text form, never a grouped ``sinfo --json``).  Under the limit without the job
    list (squeue failed), what the partition's jobs hold is not known: None (unknown), as the other
    plugins leave a capped figure they cannot work out."""
    usable = [n for n, a in zip(nodes, allocations, strict=True) if a.state == "Idle"]
    if max_cpus_per_node is None:
        return sum(n.idle for n in usable)
    if jobs is None:
        return None
    held: dict[str, int] = {}
    names_of = node_names({})  # Slurm's node names, as sinfo's NodeList gives them
    for job in jobs:
        if job.sss_state != "Running" or job.partition != queue or not job.cpus:
            continue
        names = names_of(job.nodelist)
        if not names:
            continue
        charge = min(max_cpus_per_node, job.cpus - (len(names) - 1))
        for name in names:
            held[name] = held.get(name, 0) + max(charge, 1)
    return sum(within_limit(n.idle, max_cpus_per_node, held.get(n.name, 0)) for n in usable)


def _paused(parse: Callable[[str, str, bool], list[SlurmJob]], text: str, token: str, full: bool) -> list[SlurmJob]:
    """``parse(text, token, full)`` with the cyclic collector held off: a queue's records are many
    objects and no cycles (glueinfo.core.gc_pause)."""
    with collector_paused():
        return parse(text, token, full)


def read_nodes(tools: Tools, ctx: LrmsContext, version: Optional[str], per_node: bool = False) -> list[NodeCpus]:
    """The partition's nodes: ``sinfo --json`` where this Slurm has it, else the fixed text format.
    ``per_node``: each node's own CPU counts are needed (MaxCPUsPerNode: partition_free_cpus), and
    ``sinfo --json`` of 23.11 and later groups alike nodes under their summed counts: the text
    format, which lists every node with its GRES, is read at once (``slurm_json`` notwithstanding)."""
    mode = str(ctx.ce_config.get("slurm_json") or "auto")
    queue = ctx.queue
    if not queue:
        raise LrmsQueryError("slurm: no partition named for this CE (set its queue)")
    use_json = not per_node and (mode == "yes" or (mode == "auto" and version_tuple(version) >= JSON_SINCE))
    if use_json:
        try:
            return parse_sinfo_json(tools("sinfo", "--json", "-p", queue), queue)
        except LrmsQueryError:
            if mode == "yes":
                raise
            # auto: a Slurm built without its openapi/serializer plugins has no --json; the text format always works.
    return parse_sinfo_text(tools("sinfo", "-h", "-N", "-p", queue, "-O", SINFO_TEXT_FORMAT))


def iter_states() -> Iterable[tuple[str, str, str]]:
    """(Slurm state, GLUE status, SSS state) rows, for the README table and tests."""
    for slurm_state, (glue, sss, _finished) in JOB_STATES.items():
        yield slurm_state, glue, sss


LRMS = LrmsPlugin(name="slurm", query=query, owner_kinds=KINDS, description="Slurm partition via sinfo/squeue/scontrol")
