"""The assembled site as a Haizea ``<site>`` (haizea-xml-and-lwf.txt, "Site element").

What is written (docs/haizea.md has the whole contract):

- ``<resource-types names="CPU Memory ...">``: CPU and Memory always (Haizea
  requires both), then the consumable resources the described hosts carry
  (``[node] resources``: ``snapshot.extra["node_resources"]``), each named
  ``NAME`` or ``NAME:TYPE`` as configured, and the accelerators the hosts
  were found to have, by type (``GPU``, as many per node as a job can be
  given: devices, or partitions of a partitioned one), sorted.  A type the
  host's ``[node] resources`` already name (``GPU`` or ``GPU:A100``) is the
  admin's figure and is not counted again; a host whose accelerators are
  unknown is written with none (Haizea's default for a type a node does not
  list is zero) and counted in the comment.
- ``<nodes>``: one ``<node-set numnodes="N">`` per distinct capacity.  A
  capacity is CPU = 100 x the host's hardware threads (Haizea counts a whole
  CPU as 100), Memory = RAM in MB, and each resource's configured amount
  (whole units, rounded down; none is written for an amount below one).
  Within a SubCluster, hosts of equal CPU and resources whose RAM falls in one
  ``[glue] ram_granularity_mb`` bucket form one set that promises the lowest
  RAM among them (never capacity a node lacks); sets of equal capacity from
  any SubCluster are then merged.
- Left out, and named in the document's comment: hosts whose Node XML State
  is Offline or Unknown (glueinfo.sss.node_state.node_state: ``[node]
  offline_hosts``, stale snapshots, the batch system's view), since a
  simulation should not plan on them; hosts whose hardware threads or RAM
  are unknown (no capacity is invented); hosts no cluster covers (they are
  in no SubCluster, as in every other output).

The renderer reads only the :class:`AssembledSite` and typed settings, never
the config.  A site with no host left to describe raises :class:`HaizeaError`:
Haizea's ``<nodes>`` must hold at least one ``<node-set>``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Optional, Union

from lxml import etree

from glueinfo.core.errors import PublicationError
from glueinfo.core.model import HostSnapshot
from glueinfo.site.accelerators import host_type_counts
from glueinfo.site.aggregate import ram_bucket
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_state import node_state
from glueinfo.sss.vocabulary import RESOURCES_EXTRA
from glueinfo.sss.xml_text import xml_text

if TYPE_CHECKING:  # a renderer: it is handed the assembled site, and never imports the assembler (or the config)
    from glueinfo.site.assemble import AssembledSite

XML_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>\n'

CPU, MEMORY = "CPU", "Memory"
CPU_PER_THREAD = 100  # Haizea's unit: one whole CPU is 100
LEFT_OUT_STATES = ("Offline", "Unknown")
NAMES_SHOWN = 10  # host names listed per reason in the comment; the rest are counted

# Why a host is left out, in the order the comment gives them.
OFFLINE, UNKNOWN, NO_CAPACITY, CLASHING = "Offline", "Unknown", "capacity unknown", "resource named CPU or Memory"


class HaizeaError(PublicationError, ValueError):
    """A Haizea document that cannot be written (no host left to describe)."""


@dataclass(frozen=True)
class Capacity:
    """One node's capacity in Haizea's units: CPU (100 per hardware thread), Memory (MB; None:
    unknown, written as no Memory at all), and the other resources as (type name, whole amount)
    pairs, sorted by name."""

    cpu: int
    memory_mb: Optional[int]
    resources: tuple[tuple[str, int], ...] = ()

    def sort_key(self) -> tuple[int, int, tuple[tuple[str, int], ...]]:
        return self.cpu, self.memory_mb or 0, self.resources


@dataclass
class NodeSet:
    """``numnodes`` hosts of one capacity."""

    capacity: Capacity
    hosts: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.hosts)


@dataclass
class SiteNodes:
    """The hosts a Haizea ``<site>`` describes, as node sets, and those left out (reason -> host names)."""

    node_sets: list[NodeSet]
    resource_types: tuple[str, ...]
    left_out: dict[str, list[str]]
    at: float
    accelerators_unknown: list[str] = field(default_factory=list)  # described hosts whose accelerators are unknown

    @property
    def host_count(self) -> int:
        return sum(s.count for s in self.node_sets)


def resource_type_name(record: dict[str, Any]) -> str:
    """A configured resource's Haizea type: ``NAME``, or ``NAME:TYPE`` when it has a type."""
    name, rtype = str(record["name"]), record.get("type")
    return f"{name}:{rtype}" if rtype else name


def host_resources(snapshot: HostSnapshot) -> Optional[tuple[tuple[str, int], ...]]:
    """The host's consumable resources as (type name, whole configured amount), amounts under one
    left out; None when one is named CPU or Memory (it would be read as Haizea's own CPU or Memory)."""
    block = snapshot.extra.get(RESOURCES_EXTRA)
    records = block.get("resources") if isinstance(block, dict) else None
    amounts: dict[str, int] = {}
    for record in records or ():
        if not isinstance(record, dict) or not record.get("name"):
            continue
        configured = record.get("configured")
        if isinstance(configured, bool) or not isinstance(configured, (int, float)) or not math.isfinite(configured):
            continue
        name = resource_type_name(record)
        if name in (CPU, MEMORY):
            return None
        whole = int(math.floor(configured))  # never promise a fraction the node lacks as a whole unit
        if whole >= 1:
            amounts[name] = amounts.get(name, 0) + whole
    return tuple(sorted(amounts.items()))


def with_accelerators(snapshot: HostSnapshot, resources: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """The host's resources with its accelerators by type (``("GPU", 4)``), unless its ``[node]
    resources`` already name that type (``GPU`` or ``GPU:...``): the admin's figure is the one kept."""
    counts = host_type_counts(snapshot) or {}
    named = {name.split(":", 1)[0] for name, _ in resources}
    found = [(acc_type, count) for acc_type, count in counts.items()
             if count > 0 and acc_type not in named and acc_type not in (CPU, MEMORY)]
    return tuple(sorted((*resources, *found))) if found else resources


def site_nodes(site: AssembledSite, now: float, settings: NodeSettings) -> SiteNodes:
    """The node sets of the site at ``now`` by the rules of the module docstring (never raises)."""
    # The published hosts carry the batch system's view; aggregation may have been given the bare snapshots.
    published = {h.snapshot.hostname: h.snapshot for h in site.hosts}
    granularity = site.model.glue.ram_granularity_mb
    left_out: dict[str, list[str]] = {}
    accelerators_unknown: list[str] = []  # said in the comment only when some host has accelerators
    some_accelerators = False
    merged: dict[Capacity, NodeSet] = {}
    for cluster in site.groups.clusters:
        for subcluster in cluster.subclusters:
            # (CPU, RAM bucket, resources) -> the members, each with its own RAM
            within: dict[tuple[int, Optional[int], tuple[tuple[str, int], ...]], list[tuple[int, str]]] = {}
            for member in subcluster.hosts:
                snapshot = published.get(member.hostname, member)
                described = _threads_and_ram(snapshot, now, settings)
                resources = host_resources(snapshot)
                if isinstance(described, str) or resources is None:
                    reason = described if isinstance(described, str) else CLASHING  # its state first
                    left_out.setdefault(reason, []).append(snapshot.hostname)
                    continue
                threads, ram = described
                counted = with_accelerators(snapshot, resources)
                some_accelerators = some_accelerators or counted != resources
                resources = counted
                if snapshot.accelerators is None:
                    accelerators_unknown.append(snapshot.hostname)
                key = (threads * CPU_PER_THREAD, ram_bucket(ram, granularity), resources)
                within.setdefault(key, []).append((ram, snapshot.hostname))
            for (cpu, _, resources), members in within.items():
                capacity = Capacity(cpu=cpu, memory_mb=min(ram for ram, _ in members), resources=resources)
                merged.setdefault(capacity, NodeSet(capacity)).hosts.extend(name for _, name in members)
    for node_set in merged.values():
        node_set.hosts.sort()
    types = sorted({name for capacity in merged for name, _ in capacity.resources})
    return SiteNodes(node_sets=[merged[c] for c in sorted(merged, key=Capacity.sort_key)], resource_types=(CPU, MEMORY, *types),
                     left_out={reason: sorted(names) for reason, names in sorted(left_out.items(), key=_reason_order)},
                     at=now, accelerators_unknown=sorted(accelerators_unknown) if some_accelerators else [])


def _reason_order(item: tuple[str, list[str]]) -> int:
    order = (OFFLINE, UNKNOWN, NO_CAPACITY, CLASHING)
    return order.index(item[0]) if item[0] in order else len(order)


def _threads_and_ram(snapshot: HostSnapshot, now: float, settings: NodeSettings) -> Union[tuple[int, int], str]:
    """(hardware threads, RAM MB) of a host a simulation may plan on, else why it is left out."""
    state = node_state(snapshot, now, settings)
    if state in LEFT_OUT_STATES:
        return state
    threads = snapshot.cpu.logical_cpus if snapshot.cpu else None
    ram = snapshot.memory.ram_mb if snapshot.memory else None
    if not threads or threads <= 0 or not ram or ram <= 0:
        return NO_CAPACITY
    return threads, ram


# -- XML ------------------------------------------------------------------------------------------

def comment_text(text: str) -> str:
    """Text safe inside an XML comment: no ``--``, no trailing ``-``, only characters XML carries."""
    text = xml_text(text)
    while "--" in text:
        text = text.replace("--", "- -")
    return f" {text} " if not text.endswith("-") else f" {text}  "


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


def format_moment(epoch: float) -> str:
    """``YYYY-MM-DD HH:MM:SS`` UTC, the form Haizea's own timestamps take."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def site_comment(nodes: SiteNodes) -> str:
    """What the ``<site>`` describes and which hosts it leaves out, and why."""
    text = (f"glueinfo: the site at {format_moment(nodes.at)} UTC, {nodes.host_count} host(s) in "
            f"{len(nodes.node_sets)} node set(s); CPU is 100 per hardware thread, Memory is MB "
            f"(the least of a set's members).")
    if nodes.left_out:
        parts = [f"{reason}: {len(names)} ({_names(names)})" for reason, names in nodes.left_out.items()]
        text += (" Left out, so a simulation does not plan on them: " + "; ".join(parts) + ".")
    else:
        text += " No host left out."
    if nodes.accelerators_unknown:
        text += (f" Accelerators unknown on {len(nodes.accelerators_unknown)} host(s) ({_names(nodes.accelerators_unknown)}),"
                 f" written with none.")
    return comment_text(text)


def nodes_element(node_sets: Iterable[tuple[int, Capacity]]) -> etree._Element:
    """``<nodes>`` of (numnodes, capacity) pairs; a capacity's Memory is left out when unknown."""
    nodes = etree.Element("nodes")
    for count, capacity in node_sets:
        node_set = etree.SubElement(nodes, "node-set", numnodes=str(count))
        etree.SubElement(node_set, "res", type=CPU, amount=str(capacity.cpu))
        if capacity.memory_mb is not None:
            etree.SubElement(node_set, "res", type=MEMORY, amount=str(capacity.memory_mb))
        for name, amount in capacity.resources:
            etree.SubElement(node_set, "res", type=xml_text(name), amount=str(amount))
    return nodes


def site_element(nodes: SiteNodes) -> etree._Element:
    """``<site>`` with its comment, ``<resource-types>`` and ``<nodes>``.  Raises HaizeaError when
    no host is left to describe."""
    if not nodes.node_sets:
        reasons = "; ".join(f"{reason}: {len(names)}" for reason, names in nodes.left_out.items()) or "no host"
        raise HaizeaError(f"no host of the site can be described for Haizea ({reasons})")
    site = etree.Element("site")
    site.append(etree.Comment(site_comment(nodes)))
    etree.SubElement(site, "resource-types", names=" ".join(xml_text(n) for n in nodes.resource_types))
    site.append(nodes_element((s.count, s.capacity) for s in nodes.node_sets))
    return site


def to_bytes(element: etree._Element) -> bytes:
    """UTF-8, pretty printed, with an XML declaration in straight double quotes."""
    return XML_DECLARATION + etree.tostring(element, encoding="UTF-8", pretty_print=True)


def site_document(assembled: AssembledSite, now: float, settings: NodeSettings) -> bytes:
    """The Haizea ``<site>`` document of the assembled site at ``now`` (what ``glueinfo haizea``
    prints and ``GET /haizea/site.xml`` serves).  Raises HaizeaError when no host is left to
    describe (every host Offline, Unknown or of unknown capacity)."""
    return to_bytes(site_element(site_nodes(assembled, now, settings)))
