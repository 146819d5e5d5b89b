"""Accelerators in the GLUE 2 tree: the GLUE 2.0 forms every BDII takes, and the GLUE 2.1 classes.

GLUE 2.0 (EGI's GLUE20.schema) has no accelerator class, so the facts go where
GLUE 2.0 leaves room for them (docs/glue2-mapping.md, "Accelerators"):

- ``GLUE2EntityOtherInfo`` pairs named by the accelerator type (``GPU``) and
  the GLUE 2.1 attribute they stand for: on an ExecutionEnvironment ``GPU=2``
  (per instance, what a job can be given), ``GPUVendor=``, ``GPUModel=`` (one
  per kind), and, with one kind of that type, ``GPUMemory=`` (MB),
  ``GPUComputeCapability=``, ``GPUPartition=``; on a ComputingShare
  ``GPUFreeSlots=``, ``GPUUsedSlots=``, ``GPUMaxSlotsPerJob=``; on a
  ComputingManager ``GPUTotalNumbers=``, ``GPUTotalSlots=``, ``GPUUsedSlots=``;
- an ApplicationEnvironment ``AppName: GPU`` (render.py, from
  glueinfo.site.accelerators.runtime_tags), as GLUE 1.3's run-time
  environment tag ``GPU`` becomes in GLUE 2.

The GLUE 2.1 classes of OGF's draft (AcceleratorEnvironment below its
ExecutionEnvironment, ComputingManagerAccelerator below its ComputingManager,
ComputingShareAccelerator below its ComputingShare) are always made: the JSON
rendering carries them, and the LDAP tree too when ``[glue]
accelerator_schema = yes`` says the site's slapd loads :data:`EXTENSION_SCHEMA`
(glueinfo.glue.glue2.publish keeps them out of LDAP otherwise).

Nothing is invented: a SubCluster whose accelerators are unknown
(glueinfo.site.accelerators.group_accelerators is None) publishes nothing about
them, one known to have none publishes no AcceleratorEnvironment and no pair;
a figure some part of which is unknown is left out; an entity with no figure
is not written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional, Protocol

from glueinfo.core.ldif import Entry, make_dn
from glueinfo.core.model import QueueAccelerators, QueueState
from glueinfo.core.records import dataclass
from glueinfo.glue.glue2.ids import ARC_CE, Ids
from glueinfo.site.accelerators import AcceleratorKind, group_accelerators, types_of
from glueinfo.site.aggregate import ClusterGroup
from glueinfo.site.aggregate import sum_known as _sum  # None as soon as one part is unknown

# glueinfo's LDAP rendering of the three GLUE 2.1 classes (its own experimental OID arc: the file says why).
EXTENSION_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "GLUE21-accelerators.schema")
ENVIRONMENT, MANAGER, SHARE = "GLUE2AcceleratorEnvironment", "GLUE2ComputingManagerAccelerator", "GLUE2ComputingShareAccelerator"
GLUE21_CLASSES = (ENVIRONMENT, MANAGER, SHARE)
OTHER_INFO = "GLUE2EntityOtherInfo"


class Tree(Protocol):
    """What the renderer's entry list offers (glueinfo.glue.glue2.render._Tree)."""

    def add(self, dn: str, classes: Sequence[str], pairs: Iterable[tuple[str, Any]],
            other_info: Sequence[str] = ()) -> Entry: ...


def is_glue21(entry: Entry) -> bool:
    """Is this an entry of a GLUE 2.1 accelerator class (one GLUE20.schema alone refuses)?"""
    return any(name in GLUE21_CLASSES for name in entry.object_classes)


def _slug(text: str) -> str:
    """An ID part: letters, digits, dot, dash; anything else one underscore."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_") or "_"


def _local(entity_id: str) -> str:
    return entity_id.rsplit(":", 1)[-1]


def environment_id(ids: Ids, ee_id: str, kind: AcceleratorKind) -> str:
    """An AcceleratorEnvironment's ID: its ExecutionEnvironment's and its kind (type, model, partition)."""
    part = _slug("_".join(p for p in (kind.type, kind.model or kind.vendor, kind.partition) if p))
    if ids.kind is ARC_CE:
        return f"urn:ogf:AcceleratorEnvironment:{ids.host}:{_local(ee_id)}:{part}"
    return f"{ee_id}_{part}"


def _accelerator_id(ids: Ids, kind: str, parent_id: str, acc_type: str) -> str:
    """The ID of a Computing``kind``Accelerator (kind: Manager or Share) of one type below ``parent_id``."""
    if ids.kind is ARC_CE:
        return f"urn:ogf:Computing{kind}Accelerator:{ids.host}:{_local(parent_id)}:{_slug(acc_type)}"
    return f"{parent_id}_{_slug(acc_type)}"


def manager_accelerator_id(ids: Ids, manager_id: str, acc_type: str) -> str:
    return _accelerator_id(ids, "Manager", manager_id, acc_type)


def share_accelerator_id(ids: Ids, share_id: str, acc_type: str) -> str:
    return _accelerator_id(ids, "Share", share_id, acc_type)


def _add_accelerator(tree: Tree, parent: Entry, kind: str, acc_id: str, parent_id: str, acc_type: str,
                     figures: Sequence[tuple[str, Optional[int]]]) -> None:
    """Below a ComputingManager or ComputingShare (``kind``: Manager or Share) its figures of one
    accelerator type: as ``<type><name>=<value>`` OtherInfo pairs (read without the 2.1 schema) and
    as one Computing<kind>Accelerator entry; unknown figures left out of both."""
    parent.add(OTHER_INFO, [f"{acc_type}{name}={value}" for name, value in figures if value is not None])
    prefix = f"GLUE2Computing{kind}Accelerator"
    tree.add(make_dn(f"{prefix}ID", acc_id, parent.dn), ("GLUE2Entity", prefix), [
        (f"{prefix}ID", acc_id), ("GLUE2EntityName", f"{acc_type} of {parent_id}"), (f"{prefix}Type", acc_type),
        *((f"{prefix}{name}", value) for name, value in figures),
        (f"{prefix}Computing{kind}ForeignKey", parent_id)])


def _max(values: Iterable[Optional[int]]) -> Optional[int]:
    known = list(values)
    if not known or None in known:
        return None
    return max(v for v in known if v is not None)


# -- ExecutionEnvironment -----------------------------------------------------------------------

def environment_other_info(kinds: Optional[Sequence[AcceleratorKind]]) -> list[str]:
    """The GLUE 2.0 OtherInfo pairs of an ExecutionEnvironment with these accelerators per instance."""
    pairs: list[str] = []
    for acc_type in types_of(kinds or ()):
        of_type = [k for k in kinds or () if k.type == acc_type]
        pairs.append(f"{acc_type}={sum(k.count for k in of_type)}")
        pairs += [f"{acc_type}Vendor={v}" for v in dict.fromkeys(k.vendor for k in of_type if k.vendor)]
        pairs += [f"{acc_type}Model={m}" for m in dict.fromkeys(k.model for k in of_type if k.model)]
        if len(of_type) == 1:  # one kind: its details are the type's; with several, the classes of 2.1 tell them apart
            (kind,) = of_type
            for name, value in (("Memory", kind.memory_mb), ("ComputeCapability", kind.compute_capability),
                                ("Partition", kind.partition)):
                if value is not None:
                    pairs.append(f"{acc_type}{name}={value}")
    return pairs


def add_environment(tree: Tree, ids: Ids, environment: Entry, ee_id: str,
                    kinds: Optional[Sequence[AcceleratorKind]]) -> None:
    """The ExecutionEnvironment's accelerator pairs, and one AcceleratorEnvironment per kind below it."""
    environment.add(OTHER_INFO, environment_other_info(kinds))
    for kind in kinds or ():
        acc_id = environment_id(ids, ee_id, kind)
        partitioned = kind.partition is not None
        # Of a partitioned device the host tells the partitions, not the physical device: its
        # physical count and memory are not known (the partitions' are said in OtherInfo).
        other = [f"LogicalAccelerators={kind.count}", f"Partition={kind.partition}"] if partitioned else []
        if partitioned and kind.memory_mb is not None:
            other.append(f"PartitionMemory={kind.memory_mb}")
        other += [f"{name}={value}" for name, value in (("DriverVersion", kind.driver_version),
                                                          ("RuntimeVersion", kind.runtime_version)) if value]
        tree.add(make_dn("GLUE2AcceleratorEnvironmentID", acc_id, environment.dn), ("GLUE2Entity", ENVIRONMENT), [
            ("GLUE2AcceleratorEnvironmentID", acc_id), ("GLUE2EntityName", kind.label()),
            ("GLUE2AcceleratorEnvironmentType", kind.type), ("GLUE2AcceleratorEnvironmentNumbers", kind.physical),
            ("GLUE2AcceleratorEnvironmentVendor", kind.vendor), ("GLUE2AcceleratorEnvironmentModel", kind.model),
            ("GLUE2AcceleratorEnvironmentClockSpeed", kind.clock_speed_mhz),
            ("GLUE2AcceleratorEnvironmentMemory", None if partitioned else kind.memory_mb),
            ("GLUE2AcceleratorEnvironmentComputeCapability", kind.compute_capability),
            ("GLUE2AcceleratorEnvironmentExecutionEnvironmentForeignKey", ee_id)], other_info=other)


# -- ComputingManager ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ManagerFigures:
    """One accelerator type of a ComputingManager: physical devices (from the hosts), slots in
    total and in use (from the batch system); None: unknown."""

    type: str
    total_numbers: Optional[int] = None
    total_slots: Optional[int] = None
    used_slots: Optional[int] = None


def _by_type(accelerators: Iterable[QueueAccelerators]) -> dict[str, dict[Optional[str], QueueAccelerators]]:
    out: dict[str, dict[Optional[str], QueueAccelerators]] = {}
    for item in accelerators:
        out.setdefault(item.type, {}).setdefault(item.model, item)
    return out


def manager_figures(clusters: Sequence[ClusterGroup], complete: bool,
                    states_by_cluster: Mapping[str, Sequence[Optional[QueueState]]]) -> list[ManagerFigures]:
    """Per accelerator type, a manager's figures over ``clusters`` (``complete``: every cluster its
    CEs name was found).  Physical devices: every host's, known only when every SubCluster's
    accelerators are known and none is partitioned.  Slots: per cluster and model the largest
    figure of its queues that report that model (queues of one cluster share its devices, as its
    CPUs), summed over models and clusters; unknown as soon as one is."""
    kinds_of = [(len(sc.hosts), group_accelerators(sc.hosts)) for c in clusters for sc in c.subclusters]
    hosts_known = complete and bool(kinds_of) and all(kinds is not None for _, kinds in kinds_of) \
        and all(c.subclusters and all(sc.hosts for sc in c.subclusters) for c in clusters)
    types = list(dict.fromkeys(k.type for _, kinds in kinds_of for k in kinds or ()))
    lrms: dict[str, list[list[QueueAccelerators]]] = {}  # type -> per cluster and model, what its queues said
    for cluster_states in states_by_cluster.values():
        said: dict[tuple[str, Optional[str]], list[QueueAccelerators]] = {}
        for state in cluster_states:
            for acc_type, models in _by_type(state.accelerators if state is not None else ()).items():
                for model, item in models.items():
                    said.setdefault((acc_type, model), []).append(item)
        for (acc_type, _model), items in said.items():
            lrms.setdefault(acc_type, []).append(items)
            if acc_type not in types:
                types.append(acc_type)
    figures = []
    for acc_type in types:
        physical: Optional[int] = None
        if hosts_known:
            per_host = [(hosts, [k.physical for k in kinds or () if k.type == acc_type]) for hosts, kinds in kinds_of]
            physical = None if any(None in counts for _, counts in per_host) else \
                sum(hosts * sum(c for c in counts if c is not None) for hosts, counts in per_host)
        groups = lrms.get(acc_type, [])
        total = _sum(_max(i.total for i in items) for items in groups) if groups else None
        used = _sum(_max(i.used for i in items) for items in groups) if groups else None
        figure = ManagerFigures(acc_type, physical, total, used)
        if any(v is not None for v in (figure.total_numbers, figure.total_slots, figure.used_slots)):
            figures.append(figure)
    return figures


def add_manager(tree: Tree, ids: Ids, manager: Entry, manager_id: str, figures: Sequence[ManagerFigures]) -> None:
    """The manager's accelerator pairs and one ComputingManagerAccelerator per type below it."""
    for figure in figures:
        _add_accelerator(tree, manager, "Manager", manager_accelerator_id(ids, manager_id, figure.type), manager_id,
                         figure.type, (("TotalNumbers", figure.total_numbers), ("TotalSlots", figure.total_slots),
                                       ("UsedSlots", figure.used_slots)))


# -- ComputingShare -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ShareFigures:
    """One accelerator type of a share's queue; None: unknown."""

    type: str
    free_slots: Optional[int] = None
    used_slots: Optional[int] = None
    max_slots_per_job: Optional[int] = None


def share_figures(state: Optional[QueueState], only_share: bool) -> list[ShareFigures]:
    """Per accelerator type, what the queue's batch system said: free (what a new job of any of
    the queue's shares can get now, as FreeSlots) and the most one job can get, summed or the
    largest over models; used only when the share is the queue's only one (the batch system counts
    the queue's, not a VO's)."""
    figures = []
    for acc_type, models in _by_type(state.accelerators if state is not None else ()).items():
        items = list(models.values())
        figure = ShareFigures(acc_type, _sum(i.free for i in items), _sum(i.used for i in items) if only_share else None,
                              _max(i.max_per_job for i in items))
        if any(v is not None for v in (figure.free_slots, figure.used_slots, figure.max_slots_per_job)):
            figures.append(figure)
    return figures


def add_share(tree: Tree, ids: Ids, share: Entry, share_id: str, figures: Sequence[ShareFigures]) -> None:
    """The share's accelerator pairs and one ComputingShareAccelerator per type below it."""
    for figure in figures:
        _add_accelerator(tree, share, "Share", share_accelerator_id(ids, share_id, figure.type), share_id, figure.type,
                         (("FreeSlots", figure.free_slots), ("UsedSlots", figure.used_slots),
                          ("MaxSlotsPerJob", figure.max_slots_per_job)))
