"""LRMS plugin ``htcondor``: a CE queue is a schedd (or all of them) or an accounting group of an HTCondor pool.

Commands (each bounded by what is left of the query's deadline; docs/lrms/htcondor.md has the why):

- ``condor_version``                                          -> LRMSVersion
- ``condor_status -json -attributes SLOT_ATTRS``              -> TotalCPUs, FreeCPUs, the pool's hosts and nodes,
                                                              MaxSlotsPerJob (the CPUs of the largest slot)
- ``condor_status -schedd -json -attributes SCHEDD_ATTRS``    -> the schedds, MaxJobsRunning
- ``condor_q -name SCHEDD -allusers -json -attributes JOB_ATTRS``, once per schedd in scope, concurrently
                                                              -> jobs, Running/Waiting/TotalJobs, per-VO counts

Each schedd is asked on its own rather than with ``condor_q -global``:
``-global`` exits with the status of the *last* schedd it asked (an earlier
one that did not answer leaves only a line on stderr), skips schedds whose
collector ad says they have no jobs, and prints every schedd's jobs into one
JSON list, so which schedd failed, and whose jobs are missing, cannot be told
from its output.

CPUs are counted the way sites mean them, from the slots HTCondor will hand
out, never from the hardware threads it detected (``DetectedCpus``,
``TotalCpus``): a partitionable slot gives its ``TotalSlotCpus`` (its dynamic
children's ``Cpus`` are inside that figure and are not added again; its own
``Cpus`` is what is still unallocated); a static slot gives its ``Cpus``; a
dynamic slot whose partitionable parent is not in the collector counts its
own ``Cpus`` as allocated.  HTCondor-CE's BDII provider summed ``DetectedCpus``
per machine (hyperthreads, CPUs no slot was given) and counted draining
machines (htcondor-ce issues #376, #380).

A machine is Offline when any of its slots is draining (``Draining``) or
Drained, or when every slot is in the Owner state (START is false); its CPUs
stay in TotalCPUs and none is free.  FreeCPUs = the unallocated CPUs of
partitionable slots plus the Cpus of Unclaimed (and Backfill) static slots, on
machines that are not Offline.

GPUs are counted by the same rules from the slots' ``GPUs`` and
``TotalSlotGPUs`` (HTCondor's custom machine resource, ``use feature : GPUs``),
their model from ``GPUs_DeviceName`` (``CUDADeviceName`` before 9.0); one job
runs in one slot, so it can have at most the largest slot's GPUs
(:func:`pool_gpus`).  A job's ``RequestGPUs`` is its request.

Jobs: JobStatus 1 Idle, 2 Running, 3 Removed, 4 Completed, 5 Held,
6 Transferring Output, 7 Suspended (see ``JOB_STATES``).  Jobs of the
scheduler, grid and local universes (DAGMan, routed copies, helpers) run on
no slot of this pool and are neither counted nor listed.

A queue that names a schedd the collector does not list is a queue this pool
does not have: Closed, no count (not even the pool's CPUs), one ERROR naming
the schedds there are (glueinfo.lrms.queues).  When the collector lists no
schedd at all (an empty answer), every count of the queue is unknown.

A schedd that does not answer while others do: its jobs are missing, so the
job counts of a queue spanning it (``all``, or an accounting group) are left
unknown (None) and ``QueueState.error`` names it; the jobs of the schedds that
answered are still listed, and the node side (from the collector) is still
published.  A queue that names one schedd is not touched by another's failure.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

from glueinfo.core.gc_pause import collector_paused
from glueinfo.core.job import JobInfo, private_fields
from glueinfo.core.model import NodeAllocation, QueueAccelerators, QueueLimits, QueueState
from glueinfo.core.text import one_line
from glueinfo.lrms import commands, queues
from glueinfo.lrms.accelerators import NodeAccelerators, queue_accelerators
from glueinfo.lrms.commands import Tools, environment
from glueinfo.lrms.figures import FINISHED_STATES, free_job_slots
from glueinfo.lrms.names import host_matcher, site_host
from glueinfo.lrms.registry import LrmsContext, LrmsPlugin, LrmsQueryError, glue_lrms_type
from glueinfo.lrms.vo_map import TOKEN_KINDS, count_by_vo
from glueinfo.lrms.waiting import Observed, job_records, settle

# -- what is asked for ---------------------------------------------------------------

SLOT_ATTRS = ("Name", "Machine", "SlotType", "SlotID", "Cpus", "TotalSlotCpus", "State", "Activity", "Draining",
              "DrainReason",
              # GPUs (a slot without them has none of these: condor_status leaves them out)
              "GPUs", "TotalSlotGPUs", "GPUs_DeviceName", "CUDADeviceName")
SCHEDD_ATTRS = ("Name", "MaxJobsRunning", "TotalRunningJobs", "TotalIdleJobs", "TotalHeldJobs")
JOB_ATTRS = ("ClusterId", "ProcId", "JobStatus", "JobUniverse", "Owner", "AcctGroup", "AccountingGroup",
             "x509UserProxyVOName", "x509userproxysubject", "QDate", "JobCurrentStartDate", "EnteredCurrentStatus",
             "CompletionDate", "RequestCpus", "RequestMemory", "RemoteHost", "HoldReason",
             # For the SSS Job object: Cmd is in every ad, the others only in those of jobs that ended, were
             # removed or held.  Attributes every ad has and the counts never read (JobPrio, RemoteUserCpu,
             # Iwd, Arguments, Environment) are not asked for: each would cost every refresh (docs/lrms/htcondor.md).
             "Cmd", "ExitCode", "ExitBySignal", "ExitSignal", "RemoveReason", "HoldReasonCode",
             # only in the ads of jobs that asked for GPUs
             "RequestGPUs")

# The token a job was submitted with (HTCondor's job ClassAd attributes AuthTokenIssuer, AuthTokenGroups:
# its wlcg.groups, comma-separated), asked for only when a [vos] map rule reads them (issuer:, token_group:).
# HTCondor-CE's Job Router renames them orig_AuthToken* in the job it routes to the local pool (since 5.1.5),
# which is what condor_q of the pool's schedds lists; a job submitted to a schedd directly keeps the names.
TOKEN_ATTRS = ("AuthTokenIssuer", "AuthTokenGroups", "orig_AuthTokenIssuer", "orig_AuthTokenGroups")

# Asked for only when [jobs] private_fields names the field (glueinfo.core.job.private_fields): the new
# (V2) syntax first, the old one (Args, Env) for jobs submitted with it.
PRIVATE_ATTRS = {"arguments": ("Arguments", "Args"), "working_directory": ("Iwd",),
                 "environment": ("Environment", "Env")}

QUEUE_BY = ("schedd", "accounting_group")
ALL_SCHEDDS = "all"
# Schedds asked at once; each condor_q is a process waiting on the network.
MAX_PARALLEL = 8

# -- job states ------------------------------------------------------------------------

# JobStatus -> (HTCondor's word, GLUE CE job status, SSS job State, finished?)
JOB_STATES: dict[int, tuple[str, str, str, bool]] = {
    1: ("Idle", "SCHEDULED", "Idle", False),
    2: ("Running", "RUNNING", "Running", False),
    3: ("Removed", "ABORTED", "Completed", True),
    4: ("Completed", "DONE", "Completed", True),
    5: ("Held", "WAITING", "Hold", False),
    6: ("Transferring Output", "RUNNING", "Running", False),  # still holds its slot; HTCondor counts it running
    7: ("Suspended", "WAITING", "Suspended", False),
}
# JobUniverse values whose jobs use no slot of the pool: scheduler (7: DAGMan), grid (9), local (12).
OFF_POOL_UNIVERSES = frozenset({7, 9, 12})

# Slot State words (HTCondor's condor_state.cpp).
_FREE_STATIC_STATES = frozenset({"Unclaimed", "Backfill"})
_ALLOCATED_STATES = frozenset({"Claimed", "Matched", "Preempting"})
_KNOWN_STATES = frozenset({"Owner", "Unclaimed", "Matched", "Claimed", "Preempting", "Shutdown", "Delete", "Backfill",
                           "Drained"})


class HTCondorOutputError(LrmsQueryError):
    """Output that is not in the shape asked for."""


# -- reading -json output --------------------------------------------------------------

def parse_ads(text: str, what: str) -> list[dict[str, Any]]:
    """The ClassAds of a ``-json`` listing, keys lower-cased (ClassAd attribute names are
    case-insensitive: ``x509UserProxyVOName`` and ``x509userproxyvoname`` are one attribute).

    HTCondor prints nothing at all for no ads, else ``[`` the ads ``]``; a value that is
    an expression, not a literal, comes as the string ``"/Expr(...)/"`` (see :func:`literal`).
    condor_q's summary ad (``MyType`` "Summary") is dropped.
    """
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HTCondorOutputError(f"{what}: not JSON ({exc}): {one_line(text, 80)!r}") from None
    if not isinstance(data, list) or not all(isinstance(ad, dict) for ad in data):
        raise HTCondorOutputError(f"{what}: not a JSON list of ClassAds: {one_line(text, 80)!r}")
    # Keys lower-cased through one cache per listing: every ad repeats the same few dozen names.
    lower = _Lowered()
    ads = [dict(zip(map(lower.__getitem__, ad), ad.values(), strict=True)) for ad in data]
    return [ad for ad in ads if ad.get("mytype") != "Summary"]


class _Lowered(dict[str, str]):
    """name -> name.lower(), computed once per name (one listing's cache)."""

    def __missing__(self, key: str) -> str:
        value = self[key] = str(key).lower()
        return value


def literal(value: Any) -> Any:
    """A ClassAd value as JSON gives it, or None for one that is not a literal
    (an unevaluated expression ``"/Expr(...)/"``, ``error``, or undefined)."""
    if isinstance(value, str) and value.startswith("/Expr(") and value.endswith(")/"):
        return None
    return value


def _int(ad: Mapping[str, Any], key: str) -> Optional[int]:
    value = ad.get(key)
    if type(value) is int:  # the common cases first (bool is not int here)
        return value
    if value is None:
        return None
    value = literal(value)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _str(ad: Mapping[str, Any], key: str) -> Optional[str]:
    value = ad.get(key)
    if type(value) is str:  # the common case, first: literal() inlined
        return value if value and not (value.startswith("/Expr(") and value.endswith(")/")) else None
    if value is None:
        return None
    value = literal(value)
    return value if isinstance(value, str) and value else None


def parse_version(text: str) -> str:
    """``$CondorVersion: 24.0.23 2026-08-19 BuildID: ... $`` -> ``24.0.23``."""
    match = re.search(r"\$CondorVersion:\s+(\d+\.\d+\.\d+)\b", text)
    if not match:
        raise HTCondorOutputError(f"condor_version: unexpected output {one_line(text, 120)!r}")
    return match.group(1)


# -- slots and machines ----------------------------------------------------------------

@dataclass
class Machine:
    """One execute machine, summed over its slots (and startds)."""

    name: str
    total: int = 0
    allocated: int = 0
    free: int = 0  # unallocated CPUs a job could get now (before the machine's own state is applied)
    draining: bool = False
    drained: bool = False
    slots: int = 0
    owner_slots: int = 0
    unknown_states: set[str] = field(default_factory=set)
    reason: Optional[str] = None
    largest_slot: int = 0  # CPUs of its largest slot (a partitionable slot's whole size): the most one job gets
    # GPUs, counted as its CPUs are (GPUs / TotalSlotGPUs); the model its slots name (GPUs_DeviceName)
    gpus: int = 0
    gpus_allocated: int = 0
    largest_gpu_slot: int = 0
    gpu_model: Optional[str] = None

    @property
    def offline(self) -> bool:
        return self.draining or self.drained or (self.slots > 0 and self.owner_slots == self.slots)

    @property
    def free_cpus(self) -> int:
        return 0 if self.offline else self.free

    @property
    def lrms_state(self) -> str:
        if self.drained:
            return "drained"
        if self.draining:
            return "draining"
        if self.slots and self.owner_slots == self.slots:
            return "owner"
        return "busy" if self.free == 0 else ("partly-claimed" if self.allocated else "unclaimed")

    @property
    def sss_state(self) -> str:
        if self.offline:
            return "Offline"
        if self.unknown_states and not self.free:
            return "Unknown"
        return "Idle" if self.free > 0 else "Busy"


def _slot_kind(ad: Mapping[str, Any]) -> str:
    kind = _str(ad, "slottype")
    if kind in ("Partitionable", "Dynamic", "Static"):
        return kind
    if literal(ad.get("partitionableslot")) is True:
        return "Partitionable"
    if literal(ad.get("dynamicslot")) is True:
        return "Dynamic"
    return "Static"


def _startd_of(name: str, machine: str) -> str:
    """``slot1_2@wn01`` -> ``wn01``; ``slot1@startd2@wn01`` -> ``startd2@wn01``: the startd a slot belongs to."""
    return name.split("@", 1)[1] if "@" in name else machine


def read_machines(ads: Iterable[Mapping[str, Any]]) -> list[Machine]:
    """The pool's machines from its slot ads (see the module docstring for the counting rules)."""
    slots = list(ads)
    machines: dict[str, Machine] = {}
    parents: set[tuple[str, int]] = set()
    parsed = []
    for number, ad in enumerate(slots, 1):
        name, host = _str(ad, "name"), _str(ad, "machine")
        if not name or not host:
            raise HTCondorOutputError(f"condor_status: slot ad {number} has no Name or Machine")
        kind = _slot_kind(ad)
        cpus, total = _int(ad, "cpus"), _int(ad, "totalslotcpus")
        if cpus is None or cpus < 0 or (total is not None and total < 0):
            raise HTCondorOutputError(f"condor_status: slot {name} has no CPU count")
        state = _str(ad, "state") or "Unknown"
        slot_id = _int(ad, "slotid")
        startd = _startd_of(name, host)
        if kind == "Partitionable" and slot_id is not None:
            parents.add((startd, slot_id))
        parsed.append((name, host, kind, cpus, total, state, slot_id, startd, ad))
    for name, machine_name, kind, cpus, total, state, slot_id, startd, ad in parsed:
        machine = machines.setdefault(machine_name.lower(), Machine(machine_name))
        _count_gpus(machine, ad, kind, state, (startd, slot_id) in parents and slot_id is not None)
        if literal(ad.get("draining")) is True:
            machine.draining = True
            machine.reason = machine.reason or _str(ad, "drainreason") or "draining"
        if state == "Drained":
            machine.drained = True
            machine.reason = machine.reason or _str(ad, "drainreason") or "drained"
        if state not in _KNOWN_STATES:
            machine.unknown_states.add(state)
        if kind == "Dynamic":
            if (startd, slot_id) not in parents or slot_id is None:
                # its partitionable parent is not in the collector (yet): count what it holds
                machine.total += cpus
                machine.allocated += cpus
                machine.largest_slot = max(machine.largest_slot, cpus)
            continue
        machine.slots += 1
        if state == "Owner":
            machine.owner_slots += 1
        machine.largest_slot = max(machine.largest_slot, total if kind == "Partitionable" and total is not None else cpus)
        if kind == "Partitionable":
            size = total if total is not None else cpus
            if cpus > size:
                raise HTCondorOutputError(f"condor_status: partitionable slot {name} has {cpus} free of {size} CPUs")
            machine.total += size
            machine.allocated += size - cpus
            if state not in ("Owner", "Drained"):
                machine.free += cpus
        else:
            machine.total += cpus
            if state in _ALLOCATED_STATES:
                machine.allocated += cpus
            elif state in _FREE_STATIC_STATES:
                machine.free += cpus
    for each in machines.values():
        if not each.reason and each.slots and each.owner_slots == each.slots:
            each.reason = "Owner state: the startd's START expression is false"
    return sorted(machines.values(), key=lambda m: m.name)


def _count_gpus(machine: Machine, ad: Mapping[str, Any], kind: str, state: str, has_parent: bool) -> None:
    """A slot's GPUs on its machine, by the CPUs' rules: a partitionable slot gives TotalSlotGPUs, of
    which GPUs are still unallocated; a static slot its GPUs, allocated when claimed; a dynamic slot
    only when its partitionable parent is not in the collector (its GPUs are inside the parent's)."""
    gpus = _int(ad, "gpus")
    if gpus is None or gpus < 0:
        return
    model = _str(ad, "gpus_devicename") or _str(ad, "cudadevicename")
    if model and machine.gpu_model is None:
        machine.gpu_model = model
    if kind == "Partitionable":
        size = _int(ad, "totalslotgpus")
        size = size if size is not None and size >= gpus else gpus
        machine.gpus += size
        machine.gpus_allocated += size - gpus
        machine.largest_gpu_slot = max(machine.largest_gpu_slot, size)
    elif kind == "Dynamic":
        if not has_parent:
            machine.gpus += gpus
            machine.gpus_allocated += gpus
            machine.largest_gpu_slot = max(machine.largest_gpu_slot, gpus)
    else:
        machine.gpus += gpus
        machine.gpus_allocated += gpus if state in _ALLOCATED_STATES else 0
        machine.largest_gpu_slot = max(machine.largest_gpu_slot, gpus)


def pool_gpus(machines: Sequence[Machine], allocations: Sequence[NodeAllocation]) -> tuple[QueueAccelerators, ...]:
    """The pool's GPUs by glueinfo.lrms.accelerators' rule, per model: a job runs in one slot, so it
    gets at most the GPUs of the largest slot of that model."""
    return queue_accelerators(
        (NodeAccelerators(m.gpu_model, m.gpus, m.gpus_allocated, a.state == "Idle", largest=m.largest_gpu_slot)
         for m, a in zip(machines, allocations, strict=True) if m.gpus), max_nodes=1)


def node_allocations(machines: Sequence[Machine], lookup: dict[str, str]) -> list[NodeAllocation]:
    return [NodeAllocation(name=site_host(m.name, lookup), state=m.sss_state, lrms_state=m.lrms_state,
                           total_cpus=m.total, allocated_cpus=m.allocated, free_cpus=m.free_cpus,
                           reason=m.reason if m.offline else None) for m in machines]


# -- schedds ---------------------------------------------------------------------------

@dataclass
class Schedd:
    name: str
    max_jobs_running: Optional[int]
    running: Optional[int]
    idle: Optional[int]
    held: Optional[int]


def read_schedds(ads: Iterable[Mapping[str, Any]]) -> list[Schedd]:
    schedds = {}
    for number, ad in enumerate(ads, 1):
        name = _str(ad, "name")
        if not name:
            raise HTCondorOutputError(f"condor_status -schedd: schedd ad {number} has no Name")
        schedds[name] = Schedd(name, _int(ad, "maxjobsrunning"), _int(ad, "totalrunningjobs"),
                               _int(ad, "totalidlejobs"), _int(ad, "totalheldjobs"))
    return [schedds[n] for n in sorted(schedds)]


# -- jobs ------------------------------------------------------------------------------

def group_of(ad: Mapping[str, Any]) -> Optional[str]:
    """A job's accounting group: ``AcctGroup`` (submit's accounting_group), else ``AccountingGroup``
    without its last ``.user`` part (the old ``+AccountingGroup = "group.user"``), else None."""
    group = _str(ad, "acctgroup")
    if group:
        return group
    full = _str(ad, "accountinggroup")
    if full and "." in full:
        return full.rsplit(".", 1)[0]
    return full


def in_group(group: Optional[str], prefix: str) -> bool:
    """Whether a job of ``group`` is in the accounting group ``prefix`` (itself or a subgroup: ``group_atlas``
    holds ``group_atlas.prod``, not ``group_atlastest``)."""
    return group is not None and (group == prefix or group.startswith(prefix + "."))


def job_from_ad(ad: Mapping[str, Any], schedd: str, lookup: dict[str, str], now: float,
                private: frozenset[str] = frozenset(), tokens: bool = False) -> Optional[JobInfo]:
    """The model's view of one job ad; None for a job that uses no slot of the pool (its universe).
    ``private``: the private fields (glueinfo.core.job.PRIVATE_FIELDS) to read too; ``tokens``: read
    its token's issuer and groups too (:data:`TOKEN_ATTRS`)."""
    cluster, proc, status = _int(ad, "clusterid"), _int(ad, "procid"), _int(ad, "jobstatus")
    if cluster is None or proc is None or status is None:
        raise HTCondorOutputError(f"condor_q -name {schedd}: a job ad without ClusterId, ProcId or JobStatus: "
                                  f"{one_line(json.dumps(dict(ad)), 80)}")
    if _int(ad, "jobuniverse") in OFF_POOL_UNIVERSES:
        return None
    word, glue, sss, finished = JOB_STATES.get(status, (f"JobStatus {status}", None, None, False))
    started = sss in ("Running", "Suspended")
    start = _int(ad, "jobcurrentstartdate")
    # Time in the Running state (the SSS Duration): a suspended job stopped running when it entered
    # its current status.  Earlier suspensions of a job running again are not subtracted (their
    # total, CumulativeSuspensionTime, is not asked for).
    ran_until = (_int(ad, "enteredcurrentstatus") or now) if sss == "Suspended" else now
    remote = _str(ad, "remotehost")
    nodes = [site_host(remote.rsplit("@", 1)[-1], lookup)] if remote and started else []
    cpus = _int(ad, "requestcpus")
    memory = _int(ad, "requestmemory")
    reason = _str(ad, "holdreason") if sss == "Hold" else None
    info = JobInfo(
        local_id=f"{schedd}#{cluster}.{proc}", local_owner=_str(ad, "owner"),
        global_owner=_str(ad, "x509userproxysubject"), account=group_of(ad), queue=schedd,
        lrms_state=word, sss_state=sss, glue_status=glue,
        submit_time=float(q) if (q := _int(ad, "qdate")) is not None else None,
        start_time=float(start) if start is not None and (started or finished) else None,
        end_time=float(c) if finished and (c := _int(ad, "completiondate") or _int(ad, "enteredcurrentstatus")) else None,
        requested_processors=cpus, requested_memory_mb=memory if memory and memory > 0 else None,
        delivered_processors=cpus if started else None,
        delivered_wall_s=max(0, int(ran_until - start)) if started and start is not None else None,
        nodes=nodes, scheduler_specific=reason, proxy_vo=_str(ad, "x509userproxyvoname"))
    gpus = ad.get("requestgpus")  # in the ads of jobs that asked for GPUs only
    if gpus is not None and (asked := _int(ad, "requestgpus")):
        info.requested_accelerators = asked
    command = ad.get("cmd")  # a literal path in every job ad
    if type(command) is str and command:
        info.executable = command
    if nodes and cpus is not None:
        info.node_processors = (cpus,)
    if tokens:
        info.token_issuer = _str(ad, "authtokenissuer") or _str(ad, "orig_authtokenissuer")
        groups = _str(ad, "authtokengroups") or _str(ad, "orig_authtokengroups")
        if groups:
            info.token_groups = tuple(g for g in (part.strip() for part in groups.split(",")) if g)
    if private:
        if "arguments" in private:
            info.arguments = _str(ad, "arguments") or _str(ad, "args")
        if "working_directory" in private:
            info.working_directory = _str(ad, "iwd")
        if "environment" in private:
            text = _str(ad, "environment")
            info.environment = environment_v2(text) if text else environment_v1(_str(ad, "env"))
    if sss == "Hold":
        code = _int(ad, "holdreasoncode")
        info.holds = () if code is None else ("User",) if code == HOLD_BY_USER else ("System",)
    elif finished:
        _ending(info, ad, status)
    return info


HOLD_BY_USER = 1  # HoldReasonCode 1: condor_hold by a user; every other code is HTCondor's own


def environment_v2(text: str) -> dict[str, str]:
    """A job's ``Environment`` (the new syntax): ``NAME=value`` words separated by spaces, a value with
    spaces in single quotes, a single quote inside them doubled (``B='x y' C='it''s'``)."""
    words: list[str] = []
    word: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "'":
            if quoted and text[i + 1:i + 2] == "'":
                word.append("'")
                i += 1
            else:
                quoted = not quoted
        elif char.isspace() and not quoted:
            if word:
                words.append("".join(word))
                word = []
        else:
            word.append(char)
        i += 1
    if word:
        words.append("".join(word))
    return dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("="))


def environment_v1(text: Optional[str]) -> Optional[dict[str, str]]:
    """A job's ``Env`` (the old syntax): ``NAME=value`` items separated by semicolons."""
    if not text:
        return None
    return dict(item.split("=", 1) for item in text.split(";") if "=" in item and not item.startswith("="))


def _ending(info: JobInfo, ad: Mapping[str, Any], status: int) -> None:
    """How a finished job ended: Removed (3) -> cancelled (RemoveReason as the reason); Completed (4)
    -> killed by a signal (ExitBySignal, ExitSignal): failed; else ExitCode 0 success, other failed."""
    if status == 3:
        info.completion = "cancelled"
        info.scheduler_specific = _str(ad, "removereason")
        return
    if literal(ad.get("exitbysignal")) is True:
        info.completion, info.exit_signal = "failed", _int(ad, "exitsignal")
    elif (code := _int(ad, "exitcode")) is not None:
        info.completion, info.exit_code = ("success" if code == 0 else "failed"), code


# -- running the commands ----------------------------------------------------------------

def tools_for(ctx: LrmsContext, deadline: float) -> Tools:
    """glueinfo.lrms.commands.Tools for HTCondor: ``condor_bin_dir``, ``CONDOR_CONFIG`` from ``condor_config``.
    The caller's ``_CONDOR_*`` settings are kept: they configure the pool (COLLECTOR_HOST...), and
    ``-json`` output has no knob they could turn."""
    env = environment(CONDOR_CONFIG=str(ctx.ce_config.get("condor_config") or ""))
    return commands.tools_for(ctx, "condor_bin_dir", env, deadline)


def run_tool(tools: Tools, tool: str, *args: str) -> str:
    """stdout of a run that exited 0; otherwise LrmsQueryError quoting the first two lines of stderr:
    HTCondor's tools say what failed on the first (``Error: communication error``, ``-- Failed to fetch
    ads from: <addr> : host``) and why on the second (``CEDAR:6001:Failed to connect to <addr>``)."""
    code, out, err = tools.call(tool, *args, ok_codes=range(256))
    if code != 0:
        lines = [line.strip() for line in err.splitlines() if line.strip()][:2]
        # a sinful string's ?addrs=...&alias=...&sock=... is long and says nothing more here
        message = re.sub(r"<([^<>?]+)\?[^<>]*>", r"<\1>", " ".join(lines)) or one_line(out, 120) or "no message"
        shown = " ".join(a for a in args if a != "-attributes" and "," not in a)
        raise LrmsQueryError(f"{tool}{' ' + shown if shown else ''} exited {code}: {one_line(message, 200)}")
    return out


@dataclass
class ScheddAnswer:
    schedd: str
    ads: Optional[list[dict[str, Any]]] = None
    error: Optional[str] = None
    text: Optional[str] = None  # condor_q's output, not yet read (see read_answer)


def ask_schedd(tools: Tools, name: str, attributes: Sequence[str] = JOB_ATTRS) -> ScheddAnswer:
    """condor_q's output for schedd ``name`` (``text``), or the one-line ``error`` of a run that failed."""
    try:
        out = run_tool(tools, "condor_q", "-name", name, "-allusers", "-json", "-attributes", ",".join(attributes))
        return ScheddAnswer(name, text=out)
    except LrmsQueryError as exc:
        return ScheddAnswer(name, error=str(exc))


def read_answer(answer: ScheddAnswer) -> None:
    """Decode an answer's ``text`` into its ``ads`` (or its ``error``), in place.  Done in the query's
    thread, one schedd after another, with the collector paused (the schedds are still asked at once:
    decoding holds the GIL, so threads would not make it faster)."""
    if answer.text is None:
        return
    text, answer.text = answer.text, None
    try:
        answer.ads = parse_ads(text, f"condor_q -name {answer.schedd}")
    except LrmsQueryError as exc:
        answer.error = str(exc)


def _run_all(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` concurrently (at most MAX_PARALLEL); their results in order."""
    if len(calls) == 1:
        return [calls[0]()]
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(calls)), thread_name_prefix="htcondor") as pool:
        futures: list[Future[Any]] = [pool.submit(call) for call in calls]
        return [f.result() for f in futures]


# -- the query ---------------------------------------------------------------------------

def query(ctx: LrmsContext) -> QueueState:
    deadline = time.monotonic() + ctx.timeout_s
    tools = tools_for(ctx, deadline)
    now = ctx.clock()
    queue_by = str(ctx.ce_config.get("condor_queue_by") or "schedd")
    if queue_by not in QUEUE_BY:
        raise LrmsQueryError(f"htcondor: condor_queue_by {queue_by!r} is not one of {', '.join(QUEUE_BY)}")
    if not ctx.queue:
        raise LrmsQueryError("htcondor: no queue named for this CE (a schedd's Name, 'all', or an accounting group)")
    queue = ctx.queue
    # GLUE's word for the batch system (EGI's validator expects it), as a failed query's state says too.
    state = QueueState(lrms_type=glue_lrms_type("htcondor"), queue=queue, collected_at=now)
    errors: list[str] = []

    def step(what: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            try:
                return what()
            except LrmsQueryError as exc:
                errors.append(str(exc))
                return None
        return run

    version, slot_ads, schedd_ads = _run_all([
        step(lambda: parse_version(run_tool(tools, "condor_version"))),
        step(lambda: parse_ads(run_tool(tools, "condor_status", "-json", "-attributes", ",".join(SLOT_ATTRS)), "condor_status")),
        step(lambda: parse_ads(run_tool(tools, "condor_status", "-schedd", "-json", "-attributes", ",".join(SCHEDD_ATTRS)),
                               "condor_status -schedd")),
    ])
    state.lrms_version = version
    lookup = host_matcher(h.hostname for h in ctx.hosts)

    machines: Optional[list[Machine]] = step(lambda: read_machines(slot_ads))() if slot_ads is not None else None
    if machines is not None:
        state.total_cpus = sum(m.total for m in machines)
        state.free_cpus = sum(m.free_cpus for m in machines)
        state.hosts = [site_host(m.name, lookup) for m in machines]
        state.nodes = node_allocations(machines, lookup)
        # A job runs in one slot: the largest slot is the most CPUs one job can be given (docs/lrms/htcondor.md).
        state.limits = QueueLimits(max_slots_per_job=max((m.largest_slot for m in machines), default=0) or None)
        state.accelerators = pool_gpus(machines, state.nodes)

    schedds: Optional[list[Schedd]] = step(lambda: read_schedds(schedd_ads))() if schedd_ads is not None else None
    in_scope: list[Schedd] = []
    if schedds is not None:
        if queue_by == "schedd" and queue != ALL_SCHEDDS:
            in_scope = [s for s in schedds if s.name == queue]
        else:
            in_scope = list(schedds)
            if not in_scope:
                errors.append("the collector lists no schedd")

    private = private_fields(ctx.ce_config) if ctx.with_jobs else frozenset()
    tokens = ctx.vo_map.matches_by("issuer") or ctx.vo_map.matches_by("token_group")
    attributes = (*JOB_ATTRS, *(TOKEN_ATTRS if tokens else ()),
                  *(a for field in sorted(private) for a in PRIVATE_ATTRS.get(field, ())))
    answers: list[ScheddAnswer] = (_run_all([functools.partial(ask_schedd, tools, s.name, attributes) for s in in_scope])
                                   if in_scope else [])
    jobs: list[JobInfo] = []
    with collector_paused():  # 50,000 decoded ads and their JobInfos: see glueinfo.core.gc_pause
        for answer in answers:
            read_answer(answer)
        failed: dict[str, str] = {a.schedd: a.error for a in answers if a.error is not None}
        for answer in answers:
            if answer.ads is None:
                continue
            try:
                mine = [job for ad in answer.ads
                        if (job := job_from_ad(ad, answer.schedd, lookup, now, private, tokens)) is not None]
            except LrmsQueryError as exc:
                failed[answer.schedd] = str(exc)
                continue
            answer.ads = None  # freed as soon as read
            jobs.extend(job for job in mine if queue_by == "schedd" or in_group(job.account, queue))
        if queue_by == "accounting_group":
            for job in jobs:
                job.queue = queue
        commands.assign_vos(ctx.vo_map, jobs)

    complete = bool(answers) and not failed
    if failed:
        # First in the error, which is cut at 300 characters: whose jobs are missing.
        by_name = {s.name: s for s in in_scope}
        missing = []
        for name in failed:
            s = by_name.get(name)
            seen = f" (its collector ad: {s.running} running, {s.idle} idle, {s.held} held)" if s and s.running is not None else ""
            missing.append(f"{name}{seen}")
        errors.insert(0, "job counts left out, they would omit the jobs of schedd " + ", ".join(missing))
        errors.extend(failed.values())
    if complete:
        active = [j for j in jobs if j.glue_status not in FINISHED_STATES]
        state.running_jobs = sum(1 for j in active if j.glue_status == "RUNNING")
        state.total_jobs = len(active)
        state.waiting_jobs = state.total_jobs - state.running_jobs
        state.vo_counts = count_by_vo(jobs)
        state.status = "Production"
        if queue_by == "schedd":
            limits = [s.max_jobs_running for s in in_scope]
            if all(limit is not None for limit in limits):
                state.max_running_jobs = sum(limit for limit in limits if limit is not None)
    if ctx.with_jobs:
        state.jobs = jobs
    state.free_job_slots = free_job_slots(state.status, state.free_cpus, state.max_running_jobs, state.running_jobs)
    if state.status == "Production":
        # HTCondor forecasts no start: a free CPU with no idle job, else the waits (QDate to
        # JobCurrentStartDate) of the jobs started in the last hour (glueinfo.lrms.waiting).
        starts_now = bool(state.free_cpus) and not any(j.glue_status == "SCHEDULED" for j in jobs)
        observed = Observed(now)
        if not starts_now:
            observed.add(job_records(jobs))
        settle(state, observed, starts_now)
    # The pool's CPUs are the queue's only while the collector lists the schedds it names: a schedd
    # it does not list is a queue this pool does not have (glueinfo.lrms.queues); 'all' and an
    # accounting group exist in any pool with a schedd, so nothing listed leaves them unknown.
    one_schedd = queue_by == "schedd" and queue != ALL_SCHEDDS
    queues.settle(state, bool(in_scope),
                  lambda: [s.name for s in schedds or ()] if one_schedd else (), errors, "schedd")
    if errors:
        state.error = "htcondor: " + "; ".join(dict.fromkeys(errors))
    return state


def iter_states() -> Iterable[tuple[int, str, str, str]]:
    """(JobStatus, HTCondor's word, GLUE status, SSS state) rows, for the docs table and tests."""
    for status, (word, glue, sss, _finished) in JOB_STATES.items():
        yield status, word, glue, sss


LRMS = LrmsPlugin(name="htcondor", query=query, owner_kinds=("user", "account", *TOKEN_KINDS),
                  description="HTCondor pool via condor_status/condor_q: a schedd, all schedds, or an accounting group")
