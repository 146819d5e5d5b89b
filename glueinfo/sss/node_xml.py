"""Render stage: HostSnapshot(s) -> SSS Node XML (``<Node>``, or ``<Data>`` of Nodes).

What each figure means and where it comes from (the README has the table):

- ``Id`` the host's name as collected (FQDN); ``Name`` its first label.
- ``State`` by :func:`node_state`, first rule that applies:
  1. the host matches ``[node] offline_hosts`` (name or shell pattern) -> Offline;
  2. no collection time, or the snapshot is more than ``stale_after`` seconds
     old (or that far in the future: a wrong clock) -> Unknown;
  3. a CE's batch system knows the node (:func:`scheduler_view`) -> its view:
     Busy (no processor free for a new job), Idle, Offline (drained, draining,
     down) or Unknown (lost, or the batch system does not answer);
  4. processor utilisation known -> Busy when busy processors / processors
     >= ``busy_threshold``, else Idle;
  5. configured facts (processors or memory) known but not utilisation -> Configured;
  6. otherwise Unknown.
- Configured: Processors = logical CPUs, Memory = RAM, Swap = swap space,
  Disk = size of the counted filesystems, Network = link speed of the primary adapter.
- Available (metric Instantaneous unless said): Processors = when the batch
  system knows the node, those a new job can be given (its ``free_cpus``,
  else the unallocated ones) on an Idle node and none on a node in any other
  State, as the CE's FreeCPUs counts them (Utilized: the allocated ones);
  else processors not demanded by the busy ones (metric Average over the
  same wallDuration),
  Memory = available RAM, Swap = free swap, Disk = space available to users.
- Utilized: Processors = busy processors rounded up, metric Average, with
  ``wallDuration`` in seconds as the spec's examples write it (60 for the
  1-minute load average, or the measured CPU utilisation interval) and
  ``consumptionRate`` = busy / utilized processors;
  Memory = RAM - available RAM; Swap = swap - free swap; Disk = size - available.
- Resource: the extensible consumables of ``snapshot.extra["node_resources"]``
  (from ``[node] resources`` for the local host).
- Extension: every other fact, see glueinfo.sss.vocabulary.EXTENSIONS.

A figure whose inputs are unknown is left out: nothing is invented.

A Node other software published (``snapshot.published``, read by
glueinfo.sss.node_reader) is written back as it was given, State by
:func:`document_state` (see "a Node other software published" below and
docs/sss-node-reader.md).
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, NamedTuple, Optional

from lxml import etree

from glueinfo.core.errors import GlueinfoError
from glueinfo.core.freshness import is_stale
from glueinfo.core.lastrun import LastRun
from glueinfo.core.model import FileSystem, HostSnapshot, NetworkAdapter, PublishedAmount, PublishedNode, PublishedPart, new_job_cpus
from glueinfo.core.units import format_number
from glueinfo.core.xmlsafe import parse_xml
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.vocabulary import short_name

# Characters XML 1.0 cannot carry at all; replaced so hostile strings never break a document.
_NOT_XML_CHAR = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


XML_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>\n'


class NodeRenderError(GlueinfoError, ValueError):
    """A snapshot that cannot become a Node (no host name)."""


@dataclass(frozen=True)
class NodeSettings:
    """The [node] config section, typed; defaults match glueinfo.core.config.SCHEMA.

    Built from a Config by glueinfo.site.node_settings.node_settings: this renderer never reads the config.
    """

    stale_after_s: float = 300.0
    offline_hosts: tuple[str, ...] = ()
    busy_threshold: float = 0.9
    disk_mounts: tuple[str, ...] = ()
    description: str = ""
    resources: tuple[dict[str, Any], ...] = ()  # parsed [node] resources, for the local host


_RESOURCE = re.compile(r"^([A-Za-z][\w.+-]*)(?::([\w.+-]+))?=(\d+(?:\.\d+)?)$")


def parse_resources(entries: Iterable[str]) -> list[dict[str, Any]]:
    """``["GPU:A100=4", "License=2"]`` -> resource records; ValueError names a bad entry."""
    records = []
    seen = set()
    for entry in entries:
        match = _RESOURCE.match(entry.strip())
        if not match:
            raise ValueError(f"bad entry {entry!r}: expected NAME[:TYPE]=AMOUNT, e.g. GPU:A100=4")
        name, rtype, amount = match.group(1), match.group(2), float(match.group(3))
        if (name, rtype) in seen:
            raise ValueError(f"{entry!r}: resource {name}{':' + rtype if rtype else ''} given twice")
        seen.add((name, rtype))
        records.append({"name": name, "type": rtype, "configured": amount, "available": None, "utilized": None, "units": None})
    return records


def attach_resources(snapshot: HostSnapshot, resources: Sequence[dict[str, Any]]) -> HostSnapshot:
    """Record this host's configured consumables in the snapshot, so they travel with it."""
    if resources:
        snapshot.extra[sss_node.RESOURCES_EXTRA] = {"resources": [dict(r) for r in resources]}
    return snapshot


# -- helpers ------------------------------------------------------------------------


def xml_text(value: Any) -> str:
    """Text safe for an XML 1.0 document: characters XML cannot carry become U+FFFD."""
    text = value if isinstance(value, str) else str(value)
    return _NOT_XML_CHAR.sub("\ufffd", text)


def format_time(epoch: float) -> str:
    """ISO 8601 UTC with microseconds (xsd:dateTime), e.g. 2024-05-01T12:00:00.250000Z."""
    moment = datetime.fromtimestamp(epoch, UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}"
    return text + "Z"


def format_seconds(seconds: float) -> str:
    """A wallDuration as the spec's examples write it (``wallDuration="3576"``): seconds, to the
    microsecond, without an exponent: 60 -> 60, 1.5 -> 1.5 (docs/sss-node-reader.md says why not
    the xsd:duration of the spec's type table)."""
    return format_number(round(max(0.0, float(seconds)), 6))


def format_value(kind: str, value: Any) -> Optional[str]:
    if value is None:
        return None
    if kind == "int":
        return str(int(value))
    if kind == "float":
        return repr(float(value)) if math.isfinite(value) else None
    if kind == "bool":
        return "true" if value else "false"
    if kind == "time":
        return format_time(value) if math.isfinite(value) and value > 0 else None
    if kind == "words":
        return " ".join(value) if value else None
    text = str(value)
    return text if text != "" else None


def _section_value(snapshot: HostSnapshot, section: str, attribute: str) -> Any:
    holder = snapshot if section == "snapshot" else getattr(snapshot, section)
    return None if holder is None else getattr(holder, attribute)


# -- derived figures ----------------------------------------------------------------


def processor_use(snapshot: HostSnapshot) -> Optional[tuple[float, float]]:
    """(busy processors, seconds averaged over), or None when unknown.

    The measured CPU utilisation when the snapshot has one, else the 1-minute
    load average (runnable tasks, each wanting a processor).
    """
    cpus = snapshot.cpu.logical_cpus if snapshot.cpu else None
    load = snapshot.load
    if not cpus or cpus <= 0 or load is None:
        return None
    if load.cpu_utilisation_percent is not None and load.utilisation_interval_s:
        if math.isfinite(load.cpu_utilisation_percent) and load.cpu_utilisation_percent >= 0:
            return load.cpu_utilisation_percent / 100.0 * cpus, float(load.utilisation_interval_s)
    if load.load1 is not None and math.isfinite(load.load1) and load.load1 >= 0:
        return float(load.load1), 60.0
    return None


def _matches(hostname: str, patterns: Sequence[str]) -> bool:
    if not patterns:
        return False
    names = {hostname.lower(), short_name(hostname).lower()}
    return any(fnmatch.fnmatchcase(name, pattern.lower()) for pattern in patterns for name in names)


def scheduler_view(snapshot: HostSnapshot) -> Optional[dict[str, Any]]:
    """The batch system's view of this node (``extra["lrms"]``: state, lrms_state, total_cpus,
    allocated_cpus, free_cpus, reason, ce), when a CE's LRMS knows it; None otherwise."""
    view = snapshot.extra.get(LRMS_EXTRA)
    return view if isinstance(view, dict) else None


def node_state(snapshot: HostSnapshot, now: float, settings: NodeSettings) -> str:
    """Idle / Busy / Offline / Unknown / Configured by the rules in this module's docstring: glueinfo's
    judgement of the host (Haizea, the status page), whatever its Node says (:func:`document_state`)."""
    if _matches(snapshot.hostname, settings.offline_hosts):
        return "Offline"
    if snapshot.published is not None:
        given = _given_state(snapshot, now, settings)
        if given in sss_node.NODE_STATES:
            return given
    if is_stale(snapshot, now, settings.stale_after_s):  # the one staleness rule, shared with glueinfo.gather.gatherer
        return "Unknown"
    view = scheduler_view(snapshot)
    if view is not None and view.get("state") in ("Idle", "Busy", "Offline", "Unknown"):
        return str(view["state"])
    use = processor_use(snapshot)
    if use is not None and snapshot.cpu and snapshot.cpu.logical_cpus:  # processor_use needs the CPU count too
        return "Busy" if use[0] / snapshot.cpu.logical_cpus >= settings.busy_threshold else "Idle"
    if (snapshot.cpu and snapshot.cpu.logical_cpus) or (snapshot.memory and snapshot.memory.ram_mb):
        return "Configured"
    return "Unknown"


def _given_state(snapshot: HostSnapshot, now: float, settings: NodeSettings) -> Optional[str]:
    """The State other software gave its Node, as it stands now: Unknown once the report is older
    than ``stale_after`` (by a known collection time); None when none was given."""
    published = snapshot.published
    if published is None or published.state is None:
        return None
    if snapshot.collected_at > 0 and is_stale(snapshot, now, settings.stale_after_s):
        return "Unknown"
    return published.state


def document_state(snapshot: HostSnapshot, now: float, settings: NodeSettings) -> Optional[str]:
    """The State a host's Node carries (None: no State element).  A Node glueinfo writes:
    :func:`node_state`.  A Node other software published (``snapshot.published``): what its publisher
    meant, not glueinfo's reading of the load: (1) Offline when the host matches ``[node]
    offline_hosts``; (2) Unknown when its collection time is known and older than ``stale_after``;
    (3) its given State, any word; (4) none given: the CE's batch system's view when one knows the
    node; (5) otherwise none (docs/sss-node-reader.md)."""
    if snapshot.published is None:
        return node_state(snapshot, now, settings)
    if _matches(snapshot.hostname, settings.offline_hosts):
        return "Offline"
    given = _given_state(snapshot, now, settings)
    if given is not None:
        return given
    if snapshot.collected_at > 0 and is_stale(snapshot, now, settings.stale_after_s):
        return "Unknown"
    view = scheduler_view(snapshot)
    if view is not None and view.get("state") in ("Idle", "Busy", "Offline", "Unknown"):
        return str(view["state"])
    return None


def counted_filesystems(snapshot: HostSnapshot, settings: NodeSettings) -> list[FileSystem]:
    """Filesystems whose space counts as the node's Disk: local, writable, real, each device once."""
    chosen: list[FileSystem] = []
    devices: set[str] = set()
    for fs in snapshot.filesystems or ():
        if settings.disk_mounts:
            if fs.mount_point not in settings.disk_mounts:
                continue
        elif fs.remote or fs.read_only or fs.fs_type in sss_node.PSEUDO_FILESYSTEMS:
            continue
        if fs.device and fs.device.startswith("/"):
            if fs.device in devices:  # the same device mounted twice (bind mounts)
                continue
            devices.add(fs.device)
        chosen.append(fs)
    return chosen


def disk_figures(snapshot: HostSnapshot, settings: NodeSettings) -> tuple[Optional[int], Optional[int]]:
    """(size, available) in MB over the counted filesystems; None where any one is unknown."""
    chosen = counted_filesystems(snapshot, settings)
    if not chosen:
        return None, None
    sizes = [fs.size_mb for fs in chosen if fs.size_mb is not None]
    available = [fs.available_mb for fs in chosen if fs.available_mb is not None]
    return (sum(sizes) if len(sizes) == len(chosen) else None,
            sum(available) if len(available) == len(chosen) else None)


def describe(snapshot: HostSnapshot) -> Optional[str]:
    """A one-line description from known facts only."""
    parts = []
    os = snapshot.os
    if os and (os.pretty_name or os.name):
        parts.append(os.pretty_name or " ".join(p for p in (os.name, os.release) if p))
    cpu = snapshot.cpu
    if cpu and cpu.model_name:
        parts.append(f"{cpu.sockets} x {cpu.model_name}" if cpu.sockets else cpu.model_name)
    if cpu and cpu.logical_cpus:
        parts.append(f"{cpu.logical_cpus} logical CPUs")
    return "; ".join(parts) or None


# -- XML ------------------------------------------------------------------------------
# The markup is written as text and parsed once by libxml2 (through glueinfo.core.xmlsafe):
# an order of magnitude faster than building ~80 lxml elements one by one per host,
# which matters for a site of thousands of hosts re-rendered every refresh.


def _text(value: str) -> str:
    if not (value.isascii() and value.isprintable()):
        value = xml_text(value)
    if "&" in value:
        value = value.replace("&", "&amp;")
    if "<" in value:
        value = value.replace("<", "&lt;")
    if ">" in value:
        value = value.replace(">", "&gt;")
    if "\r" in value:  # a bare CR would come back as LF
        value = value.replace("\r", "&#13;")
    return value


def _attribute(value: str) -> str:
    value = _text(value)
    if '"' in value:
        value = value.replace('"', "&quot;")
    if "\n" in value or "\t" in value:
        value = value.replace("\n", "&#10;").replace("\t", "&#9;")
    return value


def _sub(parts: list[str], tag: str, text: Optional[str] = None, **attributes: Optional[str]) -> None:
    attrs = "".join(f' {name}="{_attribute(str(value))}"' for name, value in attributes.items() if value is not None)
    parts.append(f"<{tag}{attrs}>{_text(text)}</{tag}>" if text else f"<{tag}{attrs}/>")


def _consumable(parts: list[str], tag: str, value: Optional[float], **attributes: Optional[str]) -> None:
    if value is None or not math.isfinite(value) or value < 0:
        return
    _sub(parts, tag, format_number(value), **attributes)


def _extension(parts: list[str], name: str, etype: str, text: Optional[str]) -> None:
    if text is not None:
        opening = _EXTENSION_OPENING.get((name, etype)) or f'<Extension name="{_attribute(name)}" type="{_attribute(etype)}">'
        parts.append(f"{opening}{_text(text)}</Extension>" if text else f"{opening[:-1]}/>")  # lxml's form for no text


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


def _resources(snapshot: HostSnapshot) -> list[dict[str, Any]]:
    block = snapshot.extra.get(sss_node.RESOURCES_EXTRA)
    records = block.get("resources") if isinstance(block, dict) else None
    return [r for r in records or () if isinstance(r, dict) and r.get("name")]


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


class _Form(NamedTuple):
    """How a Node is laid out: compact markup, or its lines as they stand in a pretty-printed ``<Data>``
    (lxml's layout: two spaces per level, one element per line, leaves on one line)."""

    open: str
    close: str
    pre: str  # before each child element of the Node
    post: str  # after each child element
    inner: str  # before each element inside Configured/Available/Utilized


COMPACT = _Form("<Node>", "</Node>", "", "", "")
PRETTY = _Form("  <Node>\n", "  </Node>\n", "    ", "\n", "      ")


def _lines(form: _Form, elements: list[str]) -> str:
    if not form.post:
        return "".join(elements)
    pre, post = form.pre, form.post
    return "".join([f"{pre}{element}{post}" for element in elements])


def _block(form: _Form, tag: str, elements: list[str]) -> str:
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
LRMS_EXTRA = "lrms"  # the batch system's view of the node (glueinfo.site.assemble attaches it; see scheduler_view)
# snapshot.extra entries rewritten at every gather or LRMS query (the sources' times, the scheduler's view)
VOLATILE_EXTRA = frozenset({"gather", LRMS_EXTRA})


def _is_volatile(field: sss_node.ExtensionField) -> bool:
    return field.section in _VOLATILE_SECTIONS or (field.section, field.attribute) in _VOLATILE_FIELDS


class _Template:
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

    def parts(self, snapshot: HostSnapshot, state: Optional[str], form: _Form, encoded: bool = False) -> list[Any]:
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

    def with_pieces(self, pieces: tuple[Any, ...]) -> _Template:
        """This template with other lasting pieces (the same text in another type, or shared copies)."""
        return _Template(pieces, self.disk_size, self.disk_available, self.resources)

    def fill(self, snapshot: HostSnapshot, state: Optional[str], form: _Form) -> str:
        """The Node's text with this snapshot's volatile figures and State (a template of str pieces)."""
        return "".join(self.parts(snapshot, state, form))


Slot = Callable[[HostSnapshot, Optional[str], _Template, _Form], str]


def _state_slot(snapshot: HostSnapshot, state: Optional[str], template: _Template, form: _Form) -> str:
    return f"{form.pre}<State>{state}</State>{form.post}"


def _amount(elements: list[str], tag: str, value: Optional[float], attributes: str) -> None:
    """_consumable(units="MB", metric="Instantaneous") written at once for a whole number (the
    volatile figures, formatted at every render; ``attributes`` is that constant text)."""
    if type(value) is not int:  # None, or a float from elsewhere: the general way
        _consumable(elements, tag, value, units="MB", metric="Instantaneous")
    elif value >= 0:
        elements.append(f"<{tag}{attributes}>{value}</{tag}>")


_INSTANT_MB = ' units="MB" metric="Instantaneous"'


def _consumption_slot(snapshot: HostSnapshot, state: Optional[str], template: _Template, form: _Form) -> str:
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


def _extension_slot(field: sss_node.ExtensionField) -> Slot:
    opening = _EXTENSION_OPENING[(field.name, field.type)]
    section, attribute, kind = field.section, field.attribute, field.kind

    def slot(snapshot: HostSnapshot, state: Optional[str], template: _Template, form: _Form) -> str:
        text = format_value(kind, _section_value(snapshot, section, attribute))
        return "" if text is None else f"{form.pre}{opening}{_text(text)}</Extension>{form.post}"

    return slot


_EXTENSION_SLOTS = {field: _extension_slot(field) for field in sss_node.EXTENSIONS if _is_volatile(field)}


def _extra_slot(name: str) -> Slot:
    def slot(snapshot: HostSnapshot, state: Optional[str], template: _Template, form: _Form) -> str:
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


def node_template(snapshot: HostSnapshot, settings: NodeSettings, form: _Form = COMPACT) -> _Template:
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
    resources = _resources(snapshot)
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
    return _Template(tuple(pieces), disk_size, disk_available, resources)


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


def _published_state_slot(snapshot: HostSnapshot, state: Optional[str], template: _Template, form: _Form) -> str:
    if state is None:
        return ""
    return f"{form.pre}<State>{_text(state)}</State>{form.post}" if state else f"{form.pre}<State/>{form.post}"


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


def published_template(snapshot: HostSnapshot, published: PublishedNode, form: _Form = COMPACT) -> _Template:
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
            text.append(_lines(form, [f"<Feature>{_text(feature)}</Feature>" for feature in features if feature]))
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
    return _Template(tuple(pieces), None, None, [])


def node_markup(snapshot: HostSnapshot, now: float, settings: NodeSettings = NodeSettings()) -> str:
    """The ``<Node>`` of one host as compact XML text (see the module docstring for every figure)."""
    return node_template(snapshot, settings).fill(snapshot, document_state(snapshot, now, settings), COMPACT)


def node_element(snapshot: HostSnapshot, now: float, settings: NodeSettings = NodeSettings()) -> etree._Element:
    """The ``<Node>`` element of one host."""
    return parse_xml(node_markup(snapshot, now, settings), what=f"Node XML of {snapshot.hostname}")


def _lasting_key(snapshot: HostSnapshot, settings: NodeSettings) -> tuple[Any, ...]:
    """What a Node's template reads.  The fact objects themselves, so the key compares by identity
    first (the gatherer hands a host's unchanged facts over as the same objects) and by value
    otherwise, and keeps them alive."""
    memory = snapshot.memory
    if snapshot.published is not None:  # its template holds every figure but the State
        return (snapshot.hostname, snapshot.published, settings, snapshot.cpu, memory, snapshot.load, snapshot.network,
                snapshot.filesystems, snapshot.os, snapshot.static, tuple(snapshot.extra.items()), tuple(snapshot.collectors))
    extra = tuple((name, None if name in VOLATILE_EXTRA else value) for name, value in snapshot.extra.items())
    return (snapshot.hostname, snapshot.source, snapshot.host_root, settings, snapshot.cpu,
            None if memory is None else (memory.ram_mb, memory.swap_mb, memory.virtual_mb),
            snapshot.network, snapshot.filesystems, snapshot.os, snapshot.static, extra, tuple(snapshot.collectors))


def _volatile_key(snapshot: HostSnapshot, state: Optional[str]) -> tuple[Any, ...]:
    """What a Node's slots read, besides its lasting facts."""
    memory = snapshot.memory
    return (state, snapshot.collected_at, snapshot.load,
            None if memory is None else (memory.ram_available_mb, memory.swap_free_mb, memory.virtual_available_mb),
            tuple(snapshot.extra.get(name) for name in VOLATILE_EXTRA))


class _Cached:
    __slots__ = ("lasting", "template", "form", "volatile", "parts")

    def __init__(self, lasting: tuple[Any, ...], template: _Template, form: _Form, volatile: tuple[Any, ...],
                 parts: tuple[Any, ...]) -> None:
        self.lasting, self.template, self.form, self.volatile, self.parts = lasting, template, form, volatile, parts


class NodeMarkupCache:
    """Each host's ``<Node>`` as last rendered, in the form last asked for (compact markup or pretty
    lines), and its template (see above).

    A Node whose facts, volatile figures and State (which the clock moves: stale after
    ``stale_after``) are as last time is reused as it is (``reused``); one whose lasting facts
    are as last time is filled in again from its template (``rendered``, as is a Node made
    anew).  Facts are compared by identity first, then by value; snapshots are never changed
    once gathered.  Only the last render is kept (glueinfo.core.lastrun).  One publisher at a
    time uses a cache.

    A Node is kept as its parts, never as one text: its template's lasting pieces and what the
    slots wrote last time (pretty ones as UTF-8, the form the document is put together in).  Hosts
    written alike share their pieces: the cache holds one copy of each text.
    """

    def __init__(self) -> None:
        self._nodes: LastRun[str, _Cached] = LastRun()
        self.filled = 0  # Nodes of this render made from a template kept from the last one
        self._pieces: dict[Any, Any] = {}  # every lasting piece and group of slots of the kept templates, once
        # Pieces of templates no longer kept stay in that table until it is made again from the Nodes
        # of one render (when it has more than doubled since the last time), so it follows the site.
        self._renewed: Optional[dict[Any, Any]] = None
        self._pieces_renewed = 0

    @property
    def reused(self) -> int:
        return self._nodes.reused

    @property
    def rendered(self) -> int:
        return self._nodes.made

    def start(self) -> None:
        self._nodes.start()
        self.filled = 0
        self._renewed = {} if len(self._pieces) > 2 * self._pieces_renewed + 256 else None

    def finish(self) -> None:
        """The render is done: only its Nodes are kept for the next one."""
        self._nodes.finish()
        if self._renewed is not None:
            self._pieces, self._pieces_renewed, self._renewed = self._renewed, len(self._renewed), None

    def _shared(self, template: _Template, form: _Form) -> _Template:
        """``template`` with its lasting pieces in the type of ``form``'s parts, each piece and group
        of slots the cache's one copy."""
        table = self._pieces
        pieces = list(template.pieces)
        for index, piece in enumerate(pieces):
            if form is PRETTY and isinstance(piece, str):
                piece = piece.encode()
            pieces[index] = table.setdefault(piece, piece)
        return template.with_pieces(tuple(pieces))

    def _parts(self, snapshot: HostSnapshot, now: float, settings: NodeSettings, form: _Form) -> tuple[Any, ...]:
        """The Node in ``form`` as its parts (see the class): compact markup as str, pretty lines as bytes."""
        state = document_state(snapshot, now, settings)
        lasting = _lasting_key(snapshot, settings)
        volatile = _volatile_key(snapshot, state)
        hit = self._nodes.previous(snapshot.hostname)
        if hit is not None and hit.form is form and hit.lasting == lasting:
            if hit.volatile == volatile:
                node = self._nodes.reuse(snapshot.hostname, hit)
            else:  # hit.lasting: the objects the template was made from (equal to these)
                node = self._fill(hit.lasting, hit.template, snapshot, state, form, volatile)
                self.filled += 1
        else:
            node = self._fill(lasting, self._shared(node_template(snapshot, settings, form), form), snapshot, state, form,
                              volatile)
        if self._renewed is not None:
            for piece in node.template.pieces:
                self._renewed[piece] = piece
        return node.parts

    def _fill(self, lasting: tuple[Any, ...], template: _Template, snapshot: HostSnapshot, state: Optional[str],
              form: _Form, volatile: tuple[Any, ...]) -> _Cached:
        parts = tuple(template.parts(snapshot, state, form, encoded=form is PRETTY))
        return self._nodes.keep(snapshot.hostname, _Cached(lasting, template, form, volatile, parts))

    def markup(self, snapshot: HostSnapshot, now: float, settings: NodeSettings) -> str:
        """The host's ``<Node>`` as compact markup.  Raises NodeRenderError (no host name)."""
        return "".join(self._parts(snapshot, now, settings, COMPACT))

    def pretty(self, snapshot: HostSnapshot, now: float, settings: NodeSettings) -> bytes:
        """The host's ``<Node>`` lines exactly as they stand in a pretty-printed ``<Data>`` document
        (one level of indentation, a newline after each), UTF-8.  Raises NodeRenderError (no host name)."""
        return b"".join(self.pretty_parts(snapshot, now, settings))

    def pretty_parts(self, snapshot: HostSnapshot, now: float, settings: NodeSettings) -> tuple[bytes, ...]:
        """:meth:`pretty` as the parts the cache keeps (joined, its bytes), so a document can be put
        together with no copy of each Node.  Raises NodeRenderError (no host name)."""
        return self._parts(snapshot, now, settings, PRETTY)


_DATA_OPEN, _DATA_CLOSE = b"<Data>\n", b"</Data>\n"


def pretty_node(markup: str, hostname: str) -> bytes:
    """One Node's lines exactly as lxml pretty-prints them inside a ``<Data>`` (one level of
    indentation, its newline after): serialised inside a one-child ``<Data>`` and cut out.
    The reference NodeMarkupCache.pretty is held to (tests)."""
    wrapped = f"<Data>{markup}</Data>".encode()
    document = etree.tostring(parse_xml(wrapped, max_bytes=len(wrapped), what=f"Node XML of {hostname}"),
                              encoding="UTF-8", pretty_print=True)
    return document[len(_DATA_OPEN):-len(_DATA_CLOSE)]


def render_data_streamed(snapshots: Sequence[HostSnapshot], now: float, settings: NodeSettings,
                         cache: NodeMarkupCache) -> bytes:
    """The bytes of :func:`render_data` (pretty), put together from each Node's own pretty lines,
    so the site's document is never parsed whole: a Node already rendered costs nothing, and no
    tree of the whole site is ever held."""
    return b"".join(render_data_chunks(snapshots, now, settings, cache))  # the document's one copy


def render_data_chunks(snapshots: Sequence[HostSnapshot], now: float, settings: NodeSettings,
                       cache: NodeMarkupCache) -> list[bytes]:
    """:func:`render_data_streamed`'s bytes as the pieces it joins (the cache's own, not copies),
    for a writer that never needs the document whole (``glueinfo run``'s Node XML file: 40 MB at
    10,000 hosts)."""
    cache.start()
    if not snapshots:
        return [to_bytes(etree.Element("Data"))]
    parts = [XML_DECLARATION + _DATA_OPEN]
    for snapshot in snapshots:
        parts.extend(cache.pretty_parts(snapshot, now, settings))
    cache.finish()
    parts.append(_DATA_CLOSE)
    return parts


def data_element(snapshots: Iterable[HostSnapshot], now: float, settings: NodeSettings = NodeSettings(),
                 cache: Optional[NodeMarkupCache] = None) -> etree._Element:
    """``<Data>`` holding one ``<Node>`` per snapshot, in the order given (parsed once, whole).
    ``cache``: the publisher's NodeMarkupCache (the same document, less rendering)."""
    if cache is not None:
        cache.start()
        parts = [cache.markup(snapshot, now, settings) for snapshot in snapshots]
        cache.finish()
    else:
        parts = [node_markup(snapshot, now, settings) for snapshot in snapshots]
    markup = f"<Data>{''.join(parts)}</Data>".encode()
    return parse_xml(markup, max_bytes=len(markup), what="Node XML of the site")  # our own markup: no input cap


def to_bytes(element: etree._Element, pretty: bool = True) -> bytes:
    """UTF-8 with an XML declaration (straight double quotes throughout, lxml's own declaration has single ones)."""
    return XML_DECLARATION + etree.tostring(element, encoding="UTF-8", pretty_print=pretty)


def render_node(snapshot: HostSnapshot, now: float, settings: NodeSettings = NodeSettings(), pretty: bool = True) -> bytes:
    return to_bytes(node_element(snapshot, now, settings), pretty)


def render_data(snapshots: Iterable[HostSnapshot], now: float, settings: NodeSettings = NodeSettings(), pretty: bool = True) -> bytes:
    return to_bytes(data_element(snapshots, now, settings), pretty)
