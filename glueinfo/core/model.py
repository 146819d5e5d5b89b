"""The typed host model: the single interchange between collectors and renderers.

Collectors fill one part each; renderers (LDIF, Node XML, ...) read the whole.
Every field that may be unknown is Optional and stays None when unknown: no
renderer may invent a value for it.  Sizes are MB (2**20 bytes) and clock
speeds MHz, as GLUE publishes them.

A snapshot serialises to and from JSON without loss (``to_json`` /
``from_json``); the reconstruction is driven by the type hints below, so a
field added here is carried automatically.

The annotations are evaluated when the classes are made (no ``from
__future__ import annotations``), so the JSON dumper and reader take each
field's type as it is (``dataclasses.fields``): evaluating annotation strings
with typing.get_type_hints cost about 3 ms of a fresh `glueinfo probe`.
"""

import copy
import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable
from dataclasses import field
from typing import Any, Optional

from glueinfo.core.errors import InputError
from glueinfo.core.records import dataclass

if typing.TYPE_CHECKING:  # at run time they come from __getattr__ below, when first asked for
    from glueinfo.core.queue_state import NodeAllocation as NodeAllocation
    from glueinfo.core.queue_state import QueueAccelerators as QueueAccelerators
    from glueinfo.core.queue_state import QueueLimits as QueueLimits
    from glueinfo.core.queue_state import QueueState as QueueState
    from glueinfo.core.queue_state import VoJobCounts as VoJobCounts

SCHEMA_VERSION = 1

# The batch-system side of the model, defined in glueinfo.core.queue_state and still given here.
_QUEUE_STATE_NAMES = frozenset({"NodeAllocation", "QueueAccelerators", "QueueLimits", "QueueState", "VoJobCounts"})

if not typing.TYPE_CHECKING:  # for mypy the names above are this module's own

    def __getattr__(name: str) -> Any:
        """``QueueState`` and its parts, imported when first asked for: a probe never needs them
        (glueinfo.core.queue_state says why they live there)."""
        if name in _QUEUE_STATE_NAMES:
            from glueinfo.core import queue_state

            return getattr(queue_state, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class CpuInfo:
    """Processor facts.  Sockets, cores and threads are kept apart.

    GLUE 1.3 reading used by the renderers: PhysicalCPUs = sockets,
    LogicalCPUs = hardware threads, SMPSize = hardware threads per host.
    """

    logical_cpus: Optional[int] = None  # hardware threads the OS schedules on
    physical_cores: Optional[int] = None
    sockets: Optional[int] = None
    vendor: Optional[str] = None  # e.g. GenuineIntel, AuthenticAMD, ARM
    model_name: Optional[str] = None  # as the kernel reports it, may be non-ASCII
    version: Optional[str] = None  # "family 6 model 85 stepping 4" or the ARM equivalent
    clock_mhz: Optional[int] = None  # nominal / maximum, never the momentary frequency
    instruction_set: Optional[str] = None  # e.g. x86_64, aarch64
    features: list[str] = field(default_factory=list)  # notable flags, e.g. avx2, avx512f
    cache_l1_kb: Optional[int] = None  # unified L1, only where the CPU has one
    cache_l1i_kb: Optional[int] = None
    cache_l1d_kb: Optional[int] = None
    cache_l2_kb: Optional[int] = None
    cache_l3_kb: Optional[int] = None


@dataclass
class MemoryInfo:
    """RAM and swap, as the kernel counts them."""

    ram_mb: Optional[int] = None
    ram_available_mb: Optional[int] = None
    swap_mb: Optional[int] = None
    swap_free_mb: Optional[int] = None
    virtual_mb: Optional[int] = None  # RAM + swap
    virtual_available_mb: Optional[int] = None  # available RAM + free swap


@dataclass
class LoadInfo:
    """Load averages and task counts, and CPU utilisation when it was measured."""

    load1: Optional[float] = None
    load5: Optional[float] = None
    load15: Optional[float] = None
    runnable_tasks: Optional[int] = None  # tasks running now (4th field of /proc/loadavg)
    total_tasks: Optional[int] = None
    cpu_utilisation_percent: Optional[float] = None  # over utilisation_interval_s, when asked for
    utilisation_interval_s: Optional[float] = None


@dataclass
class NetworkAdapter:
    """One network adapter (loopback included) and its addresses."""

    name: str = ""
    ipv4: list[str] = field(default_factory=list)
    ipv6: list[str] = field(default_factory=list)
    mtu: Optional[int] = None
    is_up: Optional[bool] = None
    speed_mbps: Optional[int] = None  # None when the driver does not say
    mac: Optional[str] = None
    is_loopback: bool = False
    is_primary: bool = False  # carries the default route; never the loopback


@dataclass
class FileSystem:
    """One mounted file system, local or remote."""

    mount_point: str = ""
    device: str = ""  # block device, or server:/export for remote mounts
    fs_type: str = ""
    read_only: bool = False
    remote: bool = False
    server: Optional[str] = None  # host part of a remote mount, when known
    size_mb: Optional[int] = None
    available_mb: Optional[int] = None


@dataclass
class OsInfo:
    """The operating system and kernel."""

    name: Optional[str] = None  # /etc/os-release NAME, e.g. "Debian GNU/Linux"
    release: Optional[str] = None  # VERSION_ID, e.g. "12"
    version: Optional[str] = None  # VERSION_CODENAME, e.g. "bookworm"
    pretty_name: Optional[str] = None
    kernel_release: Optional[str] = None  # uname -r
    kernel_version: Optional[str] = None  # uname -v
    platform_type: Optional[str] = None  # uname -m, e.g. x86_64
    boot_time: Optional[float] = None  # epoch seconds


@dataclass
class Accelerator:
    """One kind of accelerator on a host (GLUE 2.1 AcceleratorEnvironment): the devices of one
    vendor, model and memory, ``count`` of them, as a job can be given them (a GPU split into MIG or
    other partitions counts its partitions, ``partition`` naming their profile).  Unknown parts None."""

    type: str = "GPU"  # GLUE 2.1 AcceleratorType_t: GPU, FPGA, MIC
    vendor: Optional[str] = None  # "NVIDIA", "AMD", "Intel"
    model: Optional[str] = None  # "NVIDIA H100 80GB HBM3"
    count: int = 0  # devices (or partitions) a job can be given
    memory_mb: Optional[int] = None  # per device (or partition)
    compute_capability: Optional[str] = None  # NVIDIA "9.0"; AMD the gfx target, e.g. "gfx90a"
    clock_speed_mhz: Optional[int] = None  # maximum graphics/compute clock
    driver_version: Optional[str] = None
    runtime_version: Optional[str] = None  # CUDA or ROCm version
    partition: Optional[str] = None  # a MIG (or other) profile, e.g. "1g.10gb", when these are partitions
    pci_ids: list[str] = field(default_factory=list)  # "10de:2330": vendor:device of the devices
    source: Optional[str] = None  # how it was read: nvml, nvidia-smi, amd-smi, rocm-smi, sysfs, a source's name


@dataclass
class StaticFacts:
    """Facts no probe can measure, written by the site admin in the config."""

    si00: Optional[int] = None  # SpecInt2000
    sf00: Optional[int] = None  # SpecFloat2000
    runtime_environment: list[str] = field(default_factory=list)
    features: list[str] = field(default_factory=list)
    inbound_ip: Optional[bool] = None
    outbound_ip: Optional[bool] = None
    extensions: dict[str, str] = field(default_factory=dict)


@dataclass
class CollectorResult:
    """One collector's run, like node_exporter's scrape_collector_* series."""

    name: str = ""
    success: bool = False
    duration_s: float = 0.0
    error: Optional[str] = None
    source: str = "builtin"  # "builtin" or the distribution that provides it


@dataclass
class PublishedAmount:
    """One consumable (Processors, Memory, Disk, Swap, Network) or Resource of a published Node's
    Configured, Available or Utilized, as its publisher wrote it: the text and the spec's attributes
    exactly as given, and the amount read from them (count, MB, Mbps; a Resource as written)."""

    tag: str = ""
    text: str = ""
    value: float = 0.0
    units: Optional[str] = None
    metric: Optional[str] = None
    wall_duration: Optional[str] = None  # seconds, or an xsd:duration, as written
    consumption_rate: Optional[str] = None
    name: Optional[str] = None  # Resource only
    type: Optional[str] = None  # Resource only


@dataclass
class PublishedPart:
    """One child element of a published Node, in document order.  Id, Name and State are places
    only (their values: the hostname, PublishedNode.name and .state); Opsys, Arch, Description,
    Feature and Extension keep their text; Configured, Available and Utilized their amounts."""

    tag: str = ""
    text: str = ""
    name: Optional[str] = None  # Extension
    type: Optional[str] = None  # Extension
    aggregation: Optional[str] = None  # Feature (spec 4.4)
    delimiter: Optional[str] = None  # Feature
    count: Optional[str] = None  # Feature
    amounts: list[PublishedAmount] = field(default_factory=list)  # Configured, Available, Utilized


@dataclass
class PublishedNode:
    """A Node as software other than glueinfo published it, kept so that glueinfo republishes it
    as it was given rather than as glueinfo would derive it (docs/sss-node-reader.md): its parts
    in order, the facts the host model has no place for among them.  None on snapshots of Nodes
    glueinfo wrote and of hosts glueinfo probed."""

    name: Optional[str] = None  # the Name given
    state: Optional[str] = None  # the State given
    parts: list[PublishedPart] = field(default_factory=list)
    features: list[str] = field(default_factory=list)  # the features its Feature parts gave, in order


@dataclass
class HostSnapshot:
    """Everything known about one host at one moment; unknown parts stay None."""

    hostname: str = ""
    collected_at: float = 0.0  # Unix time (UTC seconds) when collection started
    source: str = "local"  # local, agent, spool, ganglia, ...
    host_root: Optional[str] = None  # set when read from a recorded tree, not this machine
    cpu: Optional[CpuInfo] = None
    memory: Optional[MemoryInfo] = None
    load: Optional[LoadInfo] = None
    network: Optional[list[NetworkAdapter]] = None
    filesystems: Optional[list[FileSystem]] = None
    os: Optional[OsInfo] = None
    static: Optional[StaticFacts] = None
    accelerators: Optional[list[Accelerator]] = None  # None: not known; []: known to have none
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)  # third-party collectors
    collectors: list[CollectorResult] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION
    published: Optional[PublishedNode] = None  # a Node from other software, as given (see PublishedNode)

    # -- derived facts, computed here so every renderer agrees ---------------
    def primary_adapter(self) -> Optional[NetworkAdapter]:
        for adapter in self.network or ():
            if adapter.is_primary:
                return adapter
        return None

    def glue_load_figures(self) -> Optional[tuple[int, int, int]]:
        """GLUE ProcessorLoad/SMPLoad: (available CPUs - runnable tasks) x 100.

        Uses the 1/5/15-minute load averages as the average runnable task
        count.  None when the CPU count or a load average is unknown.
        """
        cpus = self.cpu.logical_cpus if self.cpu else None
        load = self.load
        if not cpus or load is None or load.load1 is None or load.load5 is None or load.load15 is None:
            return None
        return (int(round((cpus - load.load1) * 100)), int(round((cpus - load.load5) * 100)), int(round((cpus - load.load15) * 100)))

    # -- JSON ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = _dumper(HostSnapshot)(self)
        return data

    def to_json(self, pretty: bool = False) -> str:
        if pretty:
            return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, sort_keys=False)
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HostSnapshot":
        snapshot: HostSnapshot = _from_value(cls, data)
        return snapshot

    @classmethod
    def from_json(cls, text: str) -> "HostSnapshot":
        return cls.from_dict(json.loads(text))


def new_job_cpus(state: Optional[str], total: int, allocated: int, free: Optional[int]) -> int:
    """CPUs a new job can be given on a node its batch system knows: none unless the node is Idle;
    on an Idle one its ``free_cpus`` when the batch system says (within the unallocated ones), else
    the unallocated ones.  The one rule behind a CE's FreeCPUs (glueinfo.lrms.commands.node_capacity)
    and Node XML's Available/Processors, so an SSSRMAP sum of the one gives the other."""
    if state != "Idle":
        return 0
    unallocated = max(0, total - allocated)
    return free if type(free) is int and 0 <= free <= unallocated else unallocated


class ModelError(InputError, ValueError):
    """Data that does not fit the model (a JSON snapshot from elsewhere, say)."""


class _Mismatch(Exception):
    """A value of the wrong shape; carries the path back up to the caller."""

    def __init__(self, message: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message, self.path = message, path

    def within(self, step: str) -> "_Mismatch":
        return _Mismatch(self.message, (step, *self.path))


T = typing.TypeVar("T")


def replaced(obj: T, **changes: Any) -> T:
    """``dataclasses.replace`` for the model's classes, without running ``__init__`` again: a copy of
    the instance's fields with ``changes`` set (the spool re-reads 10,000 files a cycle, each making
    three such copies; this is a third of replace's cost).  Only for field names; no checks."""
    state = getattr(obj, "__dict__", None)
    if state is None:  # a class with slots
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    copied = object.__new__(obj.__class__)
    copied.__dict__.update(state)
    copied.__dict__.update(changes)
    return copied


def _from_value(tp: Any, value: Any, where: str = "snapshot") -> Any:
    """Rebuild a value of type ``tp`` from its JSON form, checking as it goes."""
    try:
        return _converter(tp)(value)
    except _Mismatch as exc:
        path = "".join(step if step.startswith("[") else f".{step}" for step in exc.path)
        raise ModelError(f"{where}{path}: {exc.message}") from None


def from_value(tp: Any, value: Any, where: str) -> Any:
    """A value of type ``tp`` (a model dataclass, or a list or dict of them) rebuilt from its JSON
    form and checked as ``HostSnapshot.from_dict`` checks a snapshot's; raises ModelError naming
    ``where`` and the path below it (``where[0].mtu: expected an integer, got 'big'``)."""
    return _from_value(tp, value, where)


def _hint(field: dataclasses.Field[Any]) -> Any:
    """A dataclass field's type hint, as the converters take it (any object: a type, a union, a generic alias)."""
    return field.type


def _kind(value: Any) -> str:
    return type(value).__name__


@functools.cache
def _converter(tp: Any) -> Callable[[Any], Any]:
    """A function that checks and rebuilds values of type ``tp``, built once per
    type from its hints: walking the hints for every value cost a 10,000-host
    restart or publish seconds."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = _converter(next(a for a in typing.get_args(tp) if a is not type(None)))
        return lambda value: None if value is None else inner(value)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        fields = {f.name: _converter(_hint(f)) for f in dataclasses.fields(tp)}

        def build(value: Any) -> Any:
            if type(value) is not dict:
                raise _Mismatch(f"expected an object, got {_kind(value)}")
            kwargs = {}
            for name, sub in value.items():
                convert = fields.get(name)
                if convert is None:
                    continue  # written by a newer glueinfo: ignore what we do not know
                try:
                    kwargs[name] = convert(sub)
                except _Mismatch as exc:
                    raise exc.within(name) from None
            return tp(**kwargs)

        return build
    if origin is list:
        item = _converter(typing.get_args(tp)[0])

        def build_list(value: Any) -> list[Any]:
            if type(value) is not list:
                raise _Mismatch(f"expected a list, got {_kind(value)}")
            result = []
            for index, sub in enumerate(value):
                try:
                    result.append(item(sub))
                except _Mismatch as exc:
                    raise exc.within(f"[{index}]") from None
            return result

        return build_list
    if origin is dict:
        item = _converter(typing.get_args(tp)[1])

        def build_dict(value: Any) -> dict[str, Any]:
            if type(value) is not dict:
                raise _Mismatch(f"expected an object, got {_kind(value)}")
            result = {}
            for key, sub in value.items():
                try:
                    result[str(key)] = item(sub)
                except _Mismatch as exc:
                    raise exc.within(str(key)) from None
            return result

        return build_dict
    if tp is float:
        def number(value: Any) -> float:
            if type(value) is float:
                return value
            if type(value) is int:
                return float(value)
            raise _Mismatch(f"expected a number, got {value!r}")
        return number
    if tp in (int, bool, str):
        expected = {int: "an integer", bool: "true/false", str: "a string"}[tp]

        def exact(value: Any) -> Any:
            if type(value) is not tp:  # bool is not taken for int, nor int for bool
                raise _Mismatch(f"expected {expected}, got {value!r}")
            return value
        return exact
    return lambda value: value  # Any


@functools.cache
def _dumper(tp: Any) -> Callable[[Any], Any]:
    """The JSON form of values of type ``tp``, built once per type
    (dataclasses.asdict deep-copies every leaf and cost 0.5 ms per host)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = _dumper(next(a for a in typing.get_args(tp) if a is not type(None)))
        return lambda value: None if value is None else inner(value)
    if dataclasses.is_dataclass(tp):
        fields = tuple((f.name, _dumper(_hint(f))) for f in dataclasses.fields(tp))
        return lambda value: {name: dump(getattr(value, name)) for name, dump in fields}
    if origin is list:
        item = _dumper(typing.get_args(tp)[0])
        return lambda value: [item(v) for v in value]
    if origin is dict:
        item = _dumper(typing.get_args(tp)[1])
        return lambda value: {k: item(v) for k, v in value.items()}
    if tp is Any:
        return copy.deepcopy  # a third-party collector's facts: not ours to share
    return lambda value: value  # int, float, str, bool: immutable
