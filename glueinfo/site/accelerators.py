"""What a group of hosts (a SubCluster) offers in accelerators: one rule for every output.

The GLUE 1.3 and GLUE 2 renderers, the GLUE 2.1 classes, the Haizea site and
the monitoring pages all read a SubCluster's accelerators through
:func:`group_accelerators`, so they never disagree on what a SubCluster has.

A host's ``accelerators`` (glueinfo.core.model.HostSnapshot) are None when
nothing read them (no collector, an old agent), ``[]`` when the host is known
to have none.  A group's are:

- None (unknown: nothing is published about accelerators) when it has no
  host, when one of its hosts' accelerators are unknown, or when its hosts do
  not all have the same devices: the same kinds, a kind being a type, vendor,
  model and partition profile, in the same number per host.  SubClusters are
  split by accelerator (glueinfo.site.aggregate), so the members of one agree;
  a group whose members still differ (a ``[subcluster:NAME]`` pin over mixed
  hosts) says nothing rather than one host's devices for all;
- ``()`` when every host is known to have none;
- else one :class:`AcceleratorKind` per kind, with the count per host.  A
  detail (memory, compute capability, clock, driver and runtime versions) is
  given only when every member reports the same one; otherwise it is None.

A kind's ``count`` is what a job can be given on one host: devices, or
partitions when the devices are partitioned (``partition`` names the profile,
e.g. a MIG ``1g.10gb``); the number of physical devices behind partitions is
then not known (``physical`` is None).  Entries with no device (count 0) say
nothing and are skipped.  Never raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional, TypeVar

from glueinfo.core.model import Accelerator, HostSnapshot
from glueinfo.core.records import dataclass

T = TypeVar("T")

# (type, vendor, model, partition): what tells one kind of accelerator from another
KindKey = tuple[str, Optional[str], Optional[str], Optional[str]]


@dataclass(frozen=True)
class AcceleratorKind:
    """One kind of accelerator on every host of a group, ``count`` of them per host."""

    type: str  # GLUE 2.1 AccType_t: GPU, MIC, FPGA (as the collector named it)
    vendor: Optional[str]
    model: Optional[str]
    count: int  # per host: devices, or partitions when ``partition`` is set
    partition: Optional[str] = None
    memory_mb: Optional[int] = None  # per device (per partition when partitioned)
    compute_capability: Optional[str] = None
    clock_speed_mhz: Optional[int] = None
    driver_version: Optional[str] = None
    runtime_version: Optional[str] = None

    @property
    def physical(self) -> Optional[int]:
        """Physical devices per host; None when the count is of partitions."""
        return None if self.partition else self.count

    def label(self) -> str:
        """A short human name: the model, else the vendor and type, else the type."""
        return self.model or " ".join(p for p in (self.vendor, self.type) if p) or "accelerator"


def _key(device: Accelerator) -> KindKey:
    return (device.type, device.vendor, device.model, device.partition)


def host_devices(host: HostSnapshot) -> Optional[dict[KindKey, list[Accelerator]]]:
    """A host's accelerators by kind (entries with no device left out); None when unknown."""
    if host.accelerators is None:
        return None
    kinds: dict[KindKey, list[Accelerator]] = {}
    for device in host.accelerators:
        if isinstance(device.count, int) and device.count > 0 and device.type:
            kinds.setdefault(_key(device), []).append(device)
    return kinds


def host_type_counts(host: HostSnapshot) -> Optional[dict[str, int]]:
    """What a job can be given on this host, per accelerator type (``{"GPU": 4}``); ``{}`` for a
    host known to have none, None when unknown."""
    kinds = host_devices(host)
    if kinds is None:
        return None
    counts: dict[str, int] = {}
    for (kind_type, *_rest), devices in kinds.items():
        counts[kind_type] = counts.get(kind_type, 0) + sum(d.count for d in devices)
    return counts


def _common(values: Iterable[Optional[T]]) -> Optional[T]:
    """The one value all give, else None (one of them unknown, or two different)."""
    seen: list[Optional[T]] = list(dict.fromkeys(values))
    return seen[0] if len(seen) == 1 else None


def group_accelerators(hosts: Sequence[HostSnapshot]) -> Optional[tuple[AcceleratorKind, ...]]:
    """The accelerators every host of the group has (module docstring): None unknown, () none."""
    if not hosts:
        return None
    first = hosts[0].accelerators
    if first is None:
        return None
    if all(host.accelerators == first for host in hosts):
        # the usual group (SubClusters split by accelerator): one host says it all, at a comparison per host
        hosts = hosts[:1]
    per_host: list[dict[KindKey, list[Accelerator]]] = []
    for host in hosts:
        kinds = host_devices(host)
        if kinds is None:
            return None
        per_host.append(kinds)
    layout = {key: sum(d.count for d in devices) for key, devices in per_host[0].items()}
    for kinds in per_host[1:]:
        if {key: sum(d.count for d in devices) for key, devices in kinds.items()} != layout:
            return None
    result = []
    for key in sorted(layout, key=lambda k: tuple(part or "" for part in k)):
        devices = [d for kinds in per_host for d in kinds[key]]
        kind_type, vendor, model, partition = key
        result.append(AcceleratorKind(
            type=kind_type, vendor=vendor, model=model, count=layout[key], partition=partition,
            memory_mb=_common(d.memory_mb for d in devices),
            compute_capability=_common(d.compute_capability for d in devices),
            clock_speed_mhz=_common(d.clock_speed_mhz for d in devices),
            driver_version=_common(d.driver_version for d in devices),
            runtime_version=_common(d.runtime_version for d in devices)))
    return tuple(result)


def types_of(kinds: Iterable[AcceleratorKind]) -> list[str]:
    """The accelerator types among ``kinds``, in order of first appearance."""
    return list(dict.fromkeys(kind.type for kind in kinds))


def runtime_tags(kinds: Optional[Iterable[AcceleratorKind]]) -> list[str]:
    """The run-time environment tags a SubCluster with these accelerators publishes (GLUE 1.3
    GlueHostApplicationSoftwareRunTimeEnvironment, GLUE 2 ApplicationEnvironment AppName): its
    accelerator types (``GPU``), as the tags EGI's sites set by hand; none when unknown or none."""
    return sorted(types_of(kinds or ()))
