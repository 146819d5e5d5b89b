"""A host's ``<Node>`` as a template: the text of its lasting facts, made once while they stay the same,
with slots its volatile figures fill at each render; for glueinfo's own Nodes and for Nodes other
software published.  Raises :class:`NodeRenderError` for a snapshot that cannot become a Node."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import fields
from typing import Any, NamedTuple, Optional

from glueinfo.core.errors import PublicationError
from glueinfo.core.model import (
    Accelerator,
    FileSystem,
    HostSnapshot,
    NetworkAdapter,
    PublishedAmount,
    PublishedNode,
    PublishedPart,
    new_job_cpus,
)
from glueinfo.core.units import format_number
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_figures import describe, disk_figures, processor_use
from glueinfo.sss.node_resources import resources_of
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_state import LRMS_EXTRA, scheduler_view
from glueinfo.sss.vocabulary import short_name
from glueinfo.sss.xml_text import escaped_attribute, escaped_text, format_seconds, format_value


class NodeRenderError(PublicationError, ValueError):
    """A snapshot that cannot become a Node (no host name)."""


# -- XML ------------------------------------------------------------------------------
# The markup is written as text and parsed once by libxml2 (through glueinfo.core.xmlsafe):
# an order of magnitude faster than building ~80 lxml elements one by one per host,
# which matters for a site of thousands of hosts re-rendered every refresh.


def _sub(parts: list[str], tag: str, text: Optional[str] = None, **attributes: Optional[str]) -> None:
    attrs = "".join(f' {name}="{escaped_attribute(str(value))}"' for name, value in attributes.items() if value is not None)
    parts.append(f"<{tag}{attrs}>{escaped_text(text)}</{tag}>" if text else f"<{tag}{attrs}/>")


def _consumable(parts: list[str], tag: str, value: Optional[float], **attributes: Optional[str]) -> None:
    if value is None or not math.isfinite(value) or value < 0:
        return
    _sub(parts, tag, format_number(value), **attributes)


def _extension(parts: list[str], name: str, etype: str, text: Optional[str]) -> None:
    if text is not None:
        opening = _EXTENSION_OPENING.get((name, etype)) or f'<Extension name="{escaped_attribute(name)}" type="{escaped_attribute(etype)}">'
        parts.append(f"{opening}{escaped_text(text)}</Extension>" if text else f"{opening[:-1]}/>")  # lxml's form for no text


# Opening tags of glueinfo's own extensions, written once (their names need no escaping).
_EXTENSION_OPENING = {(f.name, f.type): f'<Extension name="{f.name}" type="{f.type}">' for f in sss_node.EXTENSIONS}


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True, allow_nan=False)


_ADAPTER_FIELDS = tuple(field.name for field in fields(NetworkAdapter))
_FILESYSTEM_FIELDS = tuple(field.name for field in fields(FileSystem))


def _record(fact: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """A flat dataclass's dict form (asdict is 10x slower), read field by field: ``vars()`` would
    give each adapter and file system a dict of its own for as long as it lives (Python keeps an
    object's attributes inline until its ``__dict__`` is asked for), ~64 bytes each."""
    return {name: getattr(fact, name) for name in names}


def _section_value(snapshot: HostSnapshot, section: str, attribute: str) -> Any:
    holder = snapshot if section == "snapshot" else getattr(snapshot, section)
    return None if holder is None else getattr(holder, attribute)


def _resource_elements(parts: list[str], key: str, resources: list[dict[str, Any]], metric: Optional[str]) -> None:
    for record in resources:
        amount = record.get(key)
        if isinstance(amount, (int, float)) and not isinstance(amount, bool):
            _consumable(parts, "Resource", float(amount), name=str(record["name"]), type=record.get("type"),
                        units=record.get("units"), metric=metric)


# -- a Node as its lasting text and its volatile figures ---------------------------------------------
# A host's facts are of two kinds: lasting ones (processors, memory size, OS, adapters, file systems,
# the admin's facts) and volatile ones (its State, load, free memory, the consumption figures they
# give, the collection and gather times).  A Node is rendered from a template: the text of its lasting
# facts, made once while they stay the same, with slots that the volatile figures fill at each render.
# A host whose load changed then costs a few formats, not a whole Node; and one code path renders
# both (node_markup fills a fresh template), so a cached Node cannot differ from an uncached one.


class NodeForm(NamedTuple):
    """How a Node is laid out: compact markup, or its lines as they stand in a pretty-printed ``<Data>``
    (lxml's layout: two spaces per level, one element per line, leaves on one line)."""

    open: str
    close: str
    pre: str  # before each child element of the Node
    post: str  # after each child element
    inner: str  # before each element inside Configured/Available/Utilized


COMPACT = NodeForm("<Node>", "</Node>", "", "", "")
PRETTY = NodeForm("  <Node>\n", "  </Node>\n", "    ", "\n", "      ")


def _lines(form: NodeForm, elements: list[str]) -> str:
    if not form.post:
        return "".join(elements)
    pre, post = form.pre, form.post
    return "".join([f"{pre}{element}{post}" for element in elements])


def _block(form: NodeForm, tag: str, elements: list[str]) -> str:
    if not elements:
        return ""
    if not form.post:
        return f"<{tag}>{''.join(elements)}</{tag}>"
    inner = form.inner
    children = "".join([f"{inner}{element}\n" for element in elements])
    return f"{form.pre}<{tag}>\n{children}{form.pre}</{tag}>\n"


# Facts that change from one report to the next: filled in at every render, never part of a template.
_VOLATILE_SECTIONS = frozenset({"load"})
_VOLATILE_FIELDS = frozenset({("memory", "ram_available_mb"), ("memory", "swap_free_mb"),
                              ("memory", "virtual_available_mb"), ("snapshot", "collected_at")})
# snapshot.extra entries rewritten at every gather or LRMS query (the sources' times, the scheduler's view)
VOLATILE_EXTRA = frozenset({"gather", LRMS_EXTRA})


def _is_volatile(field: sss_node.ExtensionField) -> bool:
    return field.section in _VOLATILE_SECTIONS or (field.section, field.attribute) in _VOLATILE_FIELDS


class NodeTemplate:
    """One host's Node: ``pieces`` alternate lasting text (str, or the UTF-8 of it in a
    NodeMarkupCache's pretty templates) and groups of slots (functions of the snapshot, its State,
    this template and the form, giving the volatile text; the slots of a group have no lasting text
    between them), with the lasting figures the slots need.  It begins and ends with lasting text."""

    __slots__ = ("pieces", "disk_size", "disk_available", "resources")

    def __init__(self, pieces: tuple[Any, ...], disk_size: Optional[int], disk_available: Optional[int],
                 resources: list[dict[str, Any]]) -> None:
        self.pieces = pieces
        self.disk_size = disk_size
        self.disk_available = disk_available
        self.resources = resources

    def parts(self, snapshot: HostSnapshot, state: Optional[str], form: NodeForm, encoded: bool = False) -> list[Any]:
        """The Node as its parts in order: the lasting pieces and, between them, what each group of
        slots writes for this snapshot and State (as UTF-8 when ``encoded``); joined, the Node."""
        pieces = self.pieces
        parts = list(pieces)
        for index in range(1, len(pieces), 2):
            group = pieces[index]
            if len(group) == 1:
                text = group[0](snapshot, state, self, form)
            else:
                text = "".join([slot(snapshot, state, self, form) for slot in group])
            parts[index] = text.encode() if encoded else text
        return parts

    def with_pieces(self, pieces: tuple[Any, ...]) -> NodeTemplate:
        """This template with other lasting pieces (the same text in another type, or shared copies)."""
        return NodeTemplate(pieces, self.disk_size, self.disk_available, self.resources)

    def fill(self, snapshot: HostSnapshot, state: Optional[str], form: NodeForm) -> str:
        """The Node's text with this snapshot's volatile figures and State (a template of str pieces)."""
        return "".join(self.parts(snapshot, state, form))


Slot = Callable[[HostSnapshot, Optional[str], NodeTemplate, NodeForm], str]


def _state_slot(snapshot: HostSnapshot, state: Optional[str], template: NodeTemplate, form: NodeForm) -> str:
    return f"{form.pre}<State>{state}</State>{form.post}"


def _amount(elements: list[str], tag: str, value: Optional[float], attributes: str) -> None:
    """_consumable(units="MB", metric="Instantaneous") written at once for a whole number (the
    volatile figures, formatted at every render; ``attributes`` is that constant text)."""
    if type(value) is not int:  # None, or a float from elsewhere: the general way
        _consumable(elements, tag, value, units="MB", metric="Instantaneous")
    elif value >= 0:
        elements.append(f"<{tag}{attributes}>{value}</{tag}>")


_INSTANT_MB = ' units="MB" metric="Instantaneous"'


def _consumption_slot(snapshot: HostSnapshot, state: Optional[str], template: NodeTemplate, form: NodeForm) -> str:
    """The Available and Utilized blocks: what the load and free memory say, and the (lasting) disk figures."""
    cpus = snapshot.cpu.logical_cpus if snapshot.cpu else None
    memory = snapshot.memory
    use = processor_use(snapshot)
    available: list[str] = []
    utilized: list[str] = []
    view = scheduler_view(snapshot)
    total, allocated = (view.get("total_cpus"), view.get("allocated_cpus")) if view is not None else (None, None)
    if type(total) is int and type(allocated) is int and 0 <= allocated <= total:
        # The scheduler's allocation (the load stays in the Load extensions).  Available: what a new
        # job can be given, so none on a node that is not Idle (drained, down, lost, or Busy with CPUs
        # it will not give, such as an exclusive job's), as the CE's FreeCPUs counts (SSSRMAP sums them).
        free = new_job_cpus(state, total, allocated, view.get("free_cpus") if view is not None else None)
        available.append(f'<Processors metric="Instantaneous">{free}</Processors>')
        utilized.append(f'<Processors metric="Instantaneous">{allocated}</Processors>')
    elif use is not None and cpus:
        busy, seconds = use
        busy_capped = min(busy, float(cpus))
        in_use = min(cpus, math.ceil(busy_capped - 1e-9)) if busy_capped > 1e-9 else 0
        wall = format_seconds(seconds)  # digits and a point: nothing to escape
        available.append(f'<Processors metric="Average" wallDuration="{wall}">{cpus - in_use}</Processors>')
        rate = f' consumptionRate="{format_number(round(busy_capped / in_use, 4))}"' if in_use else ""
        utilized.append(f'<Processors metric="Average" wallDuration="{wall}"{rate}>{in_use}</Processors>')
    if memory:
        ram, free_ram, swap, free_swap = memory.ram_mb, memory.ram_available_mb, memory.swap_mb, memory.swap_free_mb
        _amount(available, "Memory", free_ram, _INSTANT_MB)
        _amount(available, "Swap", free_swap, _INSTANT_MB)
        if ram is not None and free_ram is not None:
            _amount(utilized, "Memory", max(0, ram - free_ram), _INSTANT_MB)
        if swap is not None and free_swap is not None:
            _amount(utilized, "Swap", max(0, swap - free_swap), _INSTANT_MB)
    disk_size, disk_available = template.disk_size, template.disk_available
    _amount(available, "Disk", disk_available, _INSTANT_MB)
    if disk_size is not None and disk_available is not None:
        _amount(utilized, "Disk", max(0, disk_size - disk_available), _INSTANT_MB)
    if template.resources:
        _resource_elements(available, "available", template.resources, "Instantaneous")
        _resource_elements(utilized, "utilized", template.resources, "Instantaneous")
    return _block(form, "Available", available) + _block(form, "Utilized", utilized)


def _accelerator_elements(elements: list[str], snapshot: HostSnapshot, resources: list[dict[str, Any]]) -> None:
    """The Configured Resource of each kind of the host's accelerators (vocabulary.accelerator_resources),
    but for one the admin's ``[node] resources`` already names: the admin's word stands."""
    taken = {(record.get("name"), record.get("type")) for record in resources}
    for name, rtype, count in sss_node.accelerator_resources(snapshot.accelerators):
        if (name, rtype) not in taken:
            _consumable(elements, "Resource", count, name=name, type=rtype)


def accelerators_json(accelerators: list[Accelerator]) -> str:
    """The Accelerators Extension's text: the kinds as compact JSON, the model's field names, unknown
    facts (and an empty list of PCI ids) left out."""
    return _json([{name: value for name in _ACCELERATOR_FIELDS
                   if (value := getattr(kind, name)) is not None and value != []} for kind in accelerators])


_ACCELERATOR_FIELDS = tuple(field.name for field in fields(Accelerator))


def _extension_slot(field: sss_node.ExtensionField) -> Slot:
    opening = _EXTENSION_OPENING[(field.name, field.type)]
    section, attribute, kind = field.section, field.attribute, field.kind

    def slot(snapshot: HostSnapshot, state: Optional[str], template: NodeTemplate, form: NodeForm) -> str:
        text = format_value(kind, _section_value(snapshot, section, attribute))
        return "" if text is None else f"{form.pre}{opening}{escaped_text(text)}</Extension>{form.post}"

    return slot


_EXTENSION_SLOTS = {field: _extension_slot(field) for field in sss_node.EXTENSIONS if _is_volatile(field)}


def _extra_slot(name: str) -> Slot:
    def slot(snapshot: HostSnapshot, state: Optional[str], template: NodeTemplate, form: NodeForm) -> str:
        if name not in snapshot.extra:
            return ""
        parts: list[str] = []
        _extension(parts, name, sss_node.TYPE_EXTRA, _extra_json(snapshot.extra[name]))
        return _lines(form, parts)

    return slot


_EXTRA_SLOTS = {name: _extra_slot(name) for name in VOLATILE_EXTRA}  # one each, shared by every template


def _extra_json(facts: Any) -> str:
    try:
        return _json(facts)
    except (TypeError, ValueError):  # a plugin's non-JSON facts: say so rather than drop silently
        return _json({"error": "facts not representable as JSON"})


def node_template(snapshot: HostSnapshot, settings: NodeSettings, form: NodeForm = COMPACT) -> NodeTemplate:
    """The template of one host's ``<Node>``: everything but its volatile figures (see above); of a
    Node other software published, :func:`published_template`.  Raises NodeRenderError for a
    snapshot without a host name."""
    if not snapshot.hostname:
        raise NodeRenderError("snapshot has no host name: cannot give the Node an Id")
    if snapshot.published is not None:
        return published_template(snapshot, snapshot.published, form)
    pieces: list[Any] = []
    text: list[str] = [form.open]

    def lines(elements: list[str]) -> None:
        text.append(_lines(form, elements))

    def slot(function: Slot) -> None:
        lasting = "".join(text)
        text.clear()
        if not lasting and pieces:  # no text since the last slot: one group, one volatile text when filled
            pieces[-1] += (function,)
            return
        pieces.append(lasting)
        pieces.append((function,))

    head: list[str] = []
    _sub(head, "Id", snapshot.hostname)
    _sub(head, "Name", short_name(snapshot.hostname))
    lines(head)
    slot(_state_slot)
    os, cpu, memory, static = snapshot.os, snapshot.cpu, snapshot.memory, snapshot.static
    node: list[str] = []
    if os and os.name:
        _sub(node, "Opsys", os.name)
    if os and os.platform_type:
        _sub(node, "Arch", os.platform_type)
    description = settings.description or describe(snapshot)
    if description:
        _sub(node, "Description", description)
    for feature in (static.features if static else ()):
        if feature:
            _sub(node, "Feature", feature)
    lines(node)

    cpus = cpu.logical_cpus if cpu else None
    disk_size, disk_available = disk_figures(snapshot, settings)
    primary = snapshot.primary_adapter()
    resources = resources_of(snapshot)
    configured: list[str] = []
    if cpus is not None and cpus >= 0:
        _consumable(configured, "Processors", cpus)
    if memory:
        _consumable(configured, "Memory", memory.ram_mb, units="MB")
        _consumable(configured, "Swap", memory.swap_mb, units="MB")
    _consumable(configured, "Disk", disk_size, units="MB")
    if primary and primary.speed_mbps:
        _consumable(configured, "Network", primary.speed_mbps, units="Mbps")
    _resource_elements(configured, "configured", resources, None)
    _accelerator_elements(configured, snapshot, resources)
    text.append(_block(form, "Configured", configured))
    slot(_consumption_slot)

    for field in sss_node.EXTENSIONS:
        volatile = _EXTENSION_SLOTS.get(field)
        if volatile is not None:
            slot(volatile)
            continue
        parts: list[str] = []
        _extension(parts, field.name, field.type, format_value(field.kind, _section_value(snapshot, field.section, field.attribute)))
        lines(parts)
    parts = []
    if static:
        for tag in static.runtime_environment:
            _extension(parts, *sss_node.RUNTIME_ENVIRONMENT, tag or None)
        for key, value in static.extensions.items():
            _extension(parts, key, sss_node.TYPE_SITE, str(value))
    if snapshot.accelerators is not None:
        _extension(parts, *sss_node.ACCELERATORS, accelerators_json(snapshot.accelerators))
    for adapter in snapshot.network or ():
        record = _record(adapter, _ADAPTER_FIELDS)
        _extension(parts, record.pop("name") or "", sss_node.TYPE_NETWORK_ADAPTER, _json(record))
    for fs in snapshot.filesystems or ():
        record = _record(fs, _FILESYSTEM_FIELDS)
        _extension(parts, record.pop("mount_point") or "", sss_node.TYPE_FILESYSTEM, _json(record))
    for name, facts in snapshot.extra.items():
        if name == sss_node.RESOURCES_EXTRA:
            continue
        if name in VOLATILE_EXTRA:
            lines(parts)
            parts = []
            slot(_EXTRA_SLOTS[name])
            continue
        _extension(parts, name, sss_node.TYPE_EXTRA, _extra_json(facts))
    for result in snapshot.collectors:
        line = f"{'ok' if result.success else 'failed'} {float(result.duration_s)!r} {result.source or 'builtin'}"
        error = " ".join((result.error or "").split())
        if error:
            line += f": {error}"
        _extension(parts, result.name, sss_node.TYPE_COLLECTOR, line)
    lines(parts)
    text.append(form.close)
    pieces.append("".join(text))
    return NodeTemplate(tuple(pieces), disk_size, disk_available, resources)


# -- a Node other software published ------------------------------------------------------------
# Written back as it was given (HostSnapshot.published): its parts in their order, each figure with
# its own text and attributes; a fact the host model holds is written from the model (so a fact
# dropped at the model boundary stays out), as given while the model agrees with what was read.
# Nothing glueinfo would derive is added; after the parts, the Extensions of facts the snapshot
# holds beyond them (another source's, the batch system's view), never glueinfo's provenance
# (Source, CollectedAt, HostRoot, the gather times).  Only the State is filled in at each render.

# (category, tag) -> the fact a published amount stands for, and how the reader rounds it.
_HOMED_AMOUNTS: dict[tuple[str, str], tuple[str, str]] = {
    ("Configured", "Processors"): ("cpu", "logical_cpus"), ("Configured", "Memory"): ("memory", "ram_mb"),
    ("Configured", "Swap"): ("memory", "swap_mb"), ("Available", "Memory"): ("memory", "ram_available_mb"),
    ("Available", "Swap"): ("memory", "swap_free_mb"),
}
_HOMED_TEXTS = {"Opsys": "name", "Arch": "platform_type"}
_PROVENANCE_EXTRA = frozenset({"gather"})


def _published_state_slot(snapshot: HostSnapshot, state: Optional[str], template: NodeTemplate, form: NodeForm) -> str:
    if state is None:
        return ""
    return f"{form.pre}<State>{escaped_text(state)}</State>{form.post}" if state else f"{form.pre}<State/>{form.post}"


def _published_amounts(snapshot: HostSnapshot, category: str, amounts: list[PublishedAmount]) -> list[str]:
    elements: list[str] = []
    for amount in amounts:
        homed = _HOMED_AMOUNTS.get((category, amount.tag))
        if homed is not None:
            part = getattr(snapshot, homed[0])
            fact = None if part is None else getattr(part, homed[1])
            if fact is None:
                continue  # unknown now (dropped at the model boundary): left out
            read = int(amount.value) if amount.tag == "Processors" else int(round(amount.value))
            if fact != read:  # the model knows better than the text: glueinfo's form of the fact
                units = None if amount.tag == "Processors" else "MB"
                _consumable(elements, amount.tag, fact, units=units, metric=None if category == "Configured" else "Instantaneous")
                continue
        _sub(elements, amount.tag, amount.text, name=amount.name, type=amount.type, units=amount.units, metric=amount.metric,
             wallDuration=amount.wall_duration, consumptionRate=amount.consumption_rate)
    return elements


def _published_extensions(snapshot: HostSnapshot, parts: list[PublishedPart]) -> list[str]:
    """The Extensions of facts the snapshot holds and the published parts do not carry."""
    carried = {(part.name, part.type) for part in parts if part.tag == "Extension"}
    names = {name for name, _ in carried}
    types = {etype for _, etype in carried}
    elements: list[str] = []
    for field in sss_node.EXTENSIONS:
        if field.section != "snapshot" and (field.name, field.type) not in carried:
            _extension(elements, field.name, field.type, format_value(field.kind, _section_value(snapshot, field.section, field.attribute)))
    static = snapshot.static
    if static:
        if sss_node.RUNTIME_ENVIRONMENT not in carried:
            for tag in static.runtime_environment:
                _extension(elements, *sss_node.RUNTIME_ENVIRONMENT, tag or None)
        for key, value in static.extensions.items():
            if key not in names:
                _extension(elements, key, sss_node.TYPE_SITE, str(value))
    if snapshot.accelerators is not None and sss_node.ACCELERATORS not in carried:
        _extension(elements, *sss_node.ACCELERATORS, accelerators_json(snapshot.accelerators))
    if sss_node.TYPE_NETWORK_ADAPTER not in types:
        for adapter in snapshot.network or ():
            record = _record(adapter, _ADAPTER_FIELDS)
            _extension(elements, record.pop("name") or "", sss_node.TYPE_NETWORK_ADAPTER, _json(record))
    if sss_node.TYPE_FILESYSTEM not in types:
        for fs in snapshot.filesystems or ():
            record = _record(fs, _FILESYSTEM_FIELDS)
            _extension(elements, record.pop("mount_point") or "", sss_node.TYPE_FILESYSTEM, _json(record))
    for name, facts in snapshot.extra.items():
        if name != sss_node.RESOURCES_EXTRA and name not in _PROVENANCE_EXTRA and (name, sss_node.TYPE_EXTRA) not in carried:
            _extension(elements, name, sss_node.TYPE_EXTRA, _extra_json(facts))
    for result in snapshot.collectors:
        if (result.name, sss_node.TYPE_COLLECTOR) not in carried:
            line = f"{'ok' if result.success else 'failed'} {float(result.duration_s)!r} {result.source or 'builtin'}"
            error = " ".join((result.error or "").split())
            _extension(elements, result.name, sss_node.TYPE_COLLECTOR, f"{line}: {error}" if error else line)
    return elements


def published_template(snapshot: HostSnapshot, published: PublishedNode, form: NodeForm = COMPACT) -> NodeTemplate:
    """The template of a Node other software published (see above): its text, and the State slot."""
    parts = published.parts
    if not any(part.tag == "Id" for part in parts):
        parts = [PublishedPart("Id"), *parts]  # a Node has an Id (from a record made elsewhere)
    features = snapshot.static.features if snapshot.static else []
    as_given = features == published.features
    state_at = next((i for i, part in enumerate(parts) if part.tag == "State"), None)
    if state_at is None:  # where glueinfo writes it: after the Id and Name
        state_at = next((i for i, part in enumerate(parts) if part.tag not in ("Id", "Name")), len(parts))
    features_at = next((i for i, part in enumerate(parts) if part.tag == "Feature"), None)
    if features_at is None:
        features_at = next((i for i, part in enumerate(parts) if part.tag in sss_node.CATEGORIES or part.tag == "Extension"),
                           len(parts))
    text: list[str] = [form.open]
    pieces: list[Any] = []
    for index, part in enumerate(parts + [PublishedPart("")]):
        if index == state_at:
            pieces.append("".join(text))
            pieces.append((_published_state_slot,))
            text.clear()
        if index == features_at and not as_given:
            text.append(_lines(form, [f"<Feature>{escaped_text(feature)}</Feature>" for feature in features if feature]))
        tag = part.tag
        elements: list[str] = []
        if tag == "Id":
            _sub(elements, "Id", snapshot.hostname)
        elif tag == "Name":
            _sub(elements, "Name", published.name or "")
        elif tag == "Feature":
            if as_given:
                _sub(elements, "Feature", part.text, aggregation=part.aggregation, delimiter=part.delimiter, count=part.count)
        elif tag in sss_node.CATEGORIES:
            amounts = _published_amounts(snapshot, tag, part.amounts)
            text.append(_block(form, tag, amounts) if amounts else f"{form.pre}<{tag}/>{form.post}")
        elif tag == "Extension":
            _sub(elements, "Extension", part.text, name=part.name, type=part.type)
        elif tag in _HOMED_TEXTS and part.text:
            fact = _section_value(snapshot, "os", _HOMED_TEXTS[tag])
            if fact:
                _sub(elements, tag, str(fact))
        elif tag in ("Opsys", "Arch", "Description"):
            _sub(elements, tag, part.text)
        text.append(_lines(form, elements))
    text.append(_lines(form, _published_extensions(snapshot, parts)))
    text.append(form.close)
    pieces.append("".join(text))
    return NodeTemplate(tuple(pieces), None, None, [])
