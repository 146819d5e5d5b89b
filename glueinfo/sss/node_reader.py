"""Read stage for agents, the spool and snapshot files: SSS Node XML -> HostSnapshot (the inverse
of glueinfo.sss.node_xml).

What a glueinfo ``<Node>`` carries comes back exactly: every fact lives in one
place (glueinfo.sss.vocabulary), floats are written with ``repr`` and times with
microseconds.  Figures the renderer derives (State, Name, Description,
Available/Utilized Processors, Disk, Network, Utilized Memory) are checked
for sanity but not stored: they are recomputed from the facts.  A section of
the snapshot with no fact in the document reads back as None (an all-None
``CpuInfo()`` and ``None`` render the same).

Node XML from other software (Maui, SLURM, a hand-written file) is read
without loss (docs/sss-node-reader.md has the rules and the conformance
table): a Node not in the form glueinfo writes (another order, a Name that
is not the Id's first label, no State or no Source Extension, attributes
glueinfo does not write, an Extension of another type) has the facts the
host model has a place for read into it (Configured Processors, Memory and
Swap, Available Memory and Swap, Opsys, Arch, Features, Resources, known
Extensions; other Extensions in ``static.extensions`` by name) and every
part the spec defines kept as given in ``HostSnapshot.published``, which the
renderer writes back where it came from.  A Node in a namespace (the
SSSRMAP namespace of a Response's Data, or any default namespace) reads as
one in none.  A Feature is the spec's comma-delimited string.  The reference
forms (spec 4.4: the Node's text, or an Id or Name with ``aggregation``
List, Pattern or Range, ``delimiter``, ``count``) become one snapshot per
node named, each with the Node's shared properties, at most MAX_NODES a
document.

Input is untrusted (it comes from the network): it is parsed by
glueinfo.core.xmlsafe and every number is checked; a negative, non-finite or
absurdly large value, or a fact given twice, raises :class:`NodeXMLError`
with one line naming the node, the element and the problem.

A Pattern's names come from glueinfo.sss.node_patterns; a file read again and
again (a spool file) is read by glueinfo.sss.node_file_reader.NodeFileReader.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import sys
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from importlib import resources
from typing import Any, NoReturn, Optional, Union

from lxml import etree

from glueinfo.core.errors import InputError
from glueinfo.core.hostrange import MAX_HOSTS, HostRangeError
from glueinfo.core.hostrange import expand as expand_range
from glueinfo.core.model import (
    Accelerator,
    CollectorResult,
    CpuInfo,
    FileSystem,
    HostSnapshot,
    LoadInfo,
    MemoryInfo,
    ModelError,
    NetworkAdapter,
    OsInfo,
    PublishedAmount,
    PublishedNode,
    PublishedPart,
    StaticFacts,
    from_value,
)
from glueinfo.core.units import UnitError, convert
from glueinfo.core.xmlsafe import DEFAULT_MAX_BYTES, XMLInputError, parse_xml
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_patterns import PatternError, pattern_names

MAX_MB = 2**40  # 1 EB: no host has more memory or disk than that
MAX_PROCESSORS = 2**20
MAX_NETWORK_MBPS = 10**7
MAX_NODES = MAX_HOSTS  # nodes one document may name, its reference forms expanded (glueinfo.core.hostrange's bound)
MAX_ACCELERATOR_KINDS = 1024  # kinds of accelerator one Node may list
MAX_ACCELERATOR_COUNT = 2**16  # devices (or partitions) of one kind on one host
MAX_FEATURES = 10_000  # features one Feature may name (glueinfo.core.validate keeps no longer list)
LATEST_TIME = 32503680000.0  # year 3000: later means a broken clock or a broken peer

# (min, max) for each Extension fact; anything outside is absurd.
_LIMITS: dict[str, tuple[float, float]] = {
    "clock_mhz": (1, 10**6),
    "physical_cores": (1, MAX_PROCESSORS),
    "sockets": (1, 2**16),
    "cache_l1_kb": (0, 2**30), "cache_l1i_kb": (0, 2**30), "cache_l1d_kb": (0, 2**30),
    "cache_l2_kb": (0, 2**30), "cache_l3_kb": (0, 2**30),
    "virtual_mb": (0, MAX_MB), "virtual_available_mb": (0, MAX_MB),
    "load1": (0, 10**7), "load5": (0, 10**7), "load15": (0, 10**7),
    "runnable_tasks": (0, 2**32), "total_tasks": (0, 2**32),
    "cpu_utilisation_percent": (0, 100.0001), "utilisation_interval_s": (0, 86400 * 366),
    "boot_time": (1, LATEST_TIME), "collected_at": (1, LATEST_TIME),
    "si00": (0, 10**9), "sf00": (0, 10**9),
}
_INT_LOW = {name: low for name, (low, _) in _LIMITS.items()}
_INT_HIGH = {name: high for name, (_, high) in _LIMITS.items()}
_JSON_LIMITS = {"size_mb": MAX_MB, "available_mb": MAX_MB, "mtu": 2**20, "speed_mbps": MAX_NETWORK_MBPS}

_PLAIN_NUMBER = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*$")
# wallDuration: seconds, as the spec's examples write it (wallDuration="3576"), or an xsd:duration, as
# its type table says (no sign).  For the bound, a year counts 365 days and a month 30.
_SECONDS = re.compile(r"^\d+(?:\.\d+)?$")
_XSD_DURATION = re.compile(r"^P(?!$)(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")
_DURATION_SECONDS = (365 * 86400, 30 * 86400, 86400, 3600, 60, 1)
MAX_WALL_S = 100 * 365 * 86400  # a century: anything longer is a broken peer
# Digits read at once with int(); longer texts (int() refuses more than 4,300 digits) go through
# float(), which gives the same value or the error.  Every limit here has fewer digits.
FEW_DIGITS = 20
_COLLECTOR = re.compile(r"^(ok|failed) (\S+) (\S+?)(?:: (.*))?$", re.DOTALL)
# What a reader made with ``mark`` records for glueinfo.sss.node_file_reader: the source line of each
# volatile element it reads (its State, one of these Extensions, an Available or Utilized figure), by kind.
EXTENSION_MARK, FIGURE_MARK, STATE_MARK = "extension", "figure", "state"
_VOLATILE_EXTENSIONS = frozenset(f for f in sss_node.EXTENSIONS
                                 if f.section == "load" or (f.section, f.attribute) in {("memory", "virtual_available_mb"),
                                                                                        ("snapshot", "collected_at")})
_VOLATILE_FIGURES = frozenset({"Processors", "Memory", "Swap", "Disk"})


class NodeXMLError(InputError, ValueError):
    """Node XML that cannot be read back; the message is one line naming node and element."""


@lru_cache(maxsize=1)
def node_schema() -> etree.XMLSchema:
    """The SSS Node XSD shipped with glueinfo (glueinfo/data/sss-node.xsd)."""
    text = resources.files("glueinfo.sss").joinpath("xsd/sss-node.xsd").read_bytes()
    return etree.XMLSchema(etree.fromstring(text))


def validate(element: etree._Element) -> Optional[str]:
    """None when ``element`` (a Node or Data) is valid against the XSD, else the first error, one line."""
    schema = node_schema()
    if schema.validate(element):
        return None
    error = schema.error_log.last_error  # type: ignore[attr-defined]  # lxml-stubs: _ErrorLog is declared empty
    return f"line {error.line}: {' '.join(str(error.message).split())}"


class NodeElementReader:
    """Reads one <Node>; ``fail`` raises with the node's Id in the message."""

    def __init__(self, node: Optional[etree._Element], what: str, mark: bool = False):
        self.node = node
        self.what = what
        self.node_id = "?"
        # With ``mark``: the source line of each volatile element read (see NodeFileReader) -> what it is,
        # and every consumable figure read, by (category, tag).
        self.mark = mark
        self.marks: dict[int, tuple[Any, ...]] = {}
        self.marked: dict[int, etree._Element] = {}
        self.figures: dict[tuple[str, str], float] = {}

    def fail(self, where: str, problem: str) -> NoReturn:
        raise NodeXMLError(f"{self.what}: Node {self.node_id!r}: {where}: {problem}")

    # -- values -----------------------------------------------------------------------
    def number(self, where: str, text: Optional[str], low: float, high: float) -> float:
        if text is None or not _PLAIN_NUMBER.match(text):
            self.fail(where, f"{(text or '').strip()[:40]!r} is not a number")
        value = float(text)
        if not math.isfinite(value):
            self.fail(where, f"{text[:40]!r} is not a finite number")
        if value < low:
            self.fail(where, f"{format(value, 'g')} is {'negative' if value < 0 else f'below {low:g}'}")
        if value > high:
            self.fail(where, f"{format(value, 'g')} is absurdly large (over {high:g})")
        return value

    def integer(self, where: str, text: Optional[str], low: float, high: float) -> int:
        value = self.number(where, text, low, high)
        if value != int(value):
            self.fail(where, f"{text!r} is not a whole number")
        return int(value)

    def time(self, where: str, text: str) -> float:
        text = text.strip()
        if _PLAIN_NUMBER.match(text):
            return self.number(where, text, 1, LATEST_TIME)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(where, f"{text[:40]!r} is not an ISO 8601 date and time")
        if moment.tzinfo is None:
            self.fail(where, f"{text!r} has no time zone (write Z for UTC)")
        return self.number(where, repr(moment.timestamp()), 1, LATEST_TIME)

    def typed(self, where: str, kind: str, text: str, attribute: str) -> Any:
        """An Extension's text as its fact's type, checked; raises (fail) naming ``where``."""
        low, high = _LIMITS.get(attribute, (0, 2**53))
        if kind == "int":
            return self.integer(where, text, low, high)
        if kind == "float":
            return self.number(where, text, low, high)
        if kind == "bool":
            word = text.strip().lower()
            if word not in ("true", "false", "1", "0"):
                self.fail(where, f"{text[:40]!r} is not true or false")
            return word in ("true", "1")
        if kind == "time":
            return self.time(where, text)
        if kind == "words":
            return text.split()
        return text

    def known_value(self, field: sss_node.ExtensionField, text: str) -> Any:
        """A known Extension's text as its fact's value, checked (raises naming the Extension)."""
        kind = field.kind
        if kind == "str":  # most of them, and the cheapest: inline
            return text
        if kind == "int" and text.isdigit() and text.isascii() and len(text) <= FEW_DIGITS \
                and _INT_LOW.get(field.attribute, 0) <= int(text) <= _INT_HIGH.get(field.attribute, 2**53):
            return int(text)
        return self.quick_typed(field, text)

    def quick_typed(self, field: sss_node.ExtensionField, text: str) -> Any:
        """:meth:`typed` for a known Extension: the values glueinfo writes (plain digits, plain
        numbers, ISO times within their limits) are taken at once; anything else goes the whole
        way, which gives the same value or the same error."""
        kind = field.kind
        if kind == "str":
            return text
        low, high = _LIMITS.get(field.attribute, (0, 2**53))
        if kind == "int":
            # Digits only: float() then int(), as integer() does, gives the same for these (limits < 2**53).
            if text.isdigit() and text.isascii() and len(text) <= FEW_DIGITS:
                value = int(text)
                if low <= value <= high:
                    return value
        elif kind == "float":
            if _PLAIN_NUMBER.match(text):
                number = float(text)
                if low <= number <= high:  # also false for NaN
                    return number
        elif kind == "time" and text[:1].isdigit() and "T" in text:
            try:
                moment = datetime.fromisoformat(text)
            except ValueError:
                moment = None
            if moment is not None and moment.tzinfo is not None:
                stamp = moment.timestamp()
                if 1 <= stamp <= LATEST_TIME:
                    return stamp
        return self.typed(f"Extension[@name={field.name!r}]", kind, text, field.attribute)

    def amount_mb(self, where: str, text: Optional[str], units: Optional[str], tag: str) -> float:
        """A Memory/Swap/Disk amount in MB, converted from the element's ``units``."""
        value = self.number(where, text, 0, 3.4e38)
        units = units or sss_node.DEFAULT_UNITS.get(tag, "MB")
        try:
            value = convert(value, units, "MB")
        except UnitError as exc:
            self.fail(where, str(exc))
        if value > MAX_MB:
            self.fail(where, f"{format(value, 'g')} MB is absurdly large (over {MAX_MB} MB)")
        return value

    # -- the node -------------------------------------------------------------------
    def read(self, source: Optional[str], limit: int = MAX_NODES) -> list[HostSnapshot]:
        """The snapshots of this Node: one, or one per node its reference form names (at most
        ``limit``, else NodeXMLError), each with the Node's shared properties."""
        if self.node is None:  # a reader made only to check values (NodeFileReader)
            raise NodeXMLError(f"{self.what}: no Node to read")
        children = [c for c in self.node if isinstance(c.tag, str)]
        names, expanded_from = self.identity(children, limit)
        hostname = names[0]
        snap: dict[str, Any] = {"hostname": hostname, "collected_at": 0.0, "source": source or "node-xml"}
        sections: dict[str, dict[str, Any]] = {"cpu": {}, "memory": {}, "load": {}, "os": {}, "static": {}}
        seen: set[Any] = set()
        # Whether this Node is other software's (any part not as glueinfo writes it): then it is
        # kept as published (HostSnapshot.published), the figures glueinfo would derive with it.
        self.foreign = expanded_from is not None

        def once(key: Any, where: str) -> None:
            if key in seen:
                self.fail(where, "given twice")
            seen.add(key)

        # One pass sorts the children; the checks then run in the order they always have
        # (single elements, Configured/Available/Utilized, figures, Extensions).
        categories: list[etree._Element] = []
        extensions: list[etree._Element] = []
        given: dict[str, str] = {}  # Name and State, as given
        last = -1
        for child in children:
            tag = child.tag
            if tag == "Extension":  # most of them; the last of glueinfo's order
                extensions.append(child)
                last = _LAST_RANK
                continue
            rank = _RANK.get(tag)
            if rank is None:
                continue  # not an element of the spec (a later spec's, another namespace's): not read
            if rank < last:  # glueinfo writes them in _RANK's order
                self.foreign = True
            last = rank
            if tag in _SINGLE:
                once(tag, tag)
                text = child.text or ""
                if tag == "State":
                    given[tag] = text
                    if self.mark and isinstance(child.sourceline, int):
                        self.marks[child.sourceline] = (STATE_MARK, None)
                        self.marked[child.sourceline] = child
                elif tag == "Name":
                    given[tag] = text
                    if expanded_from != "Name" and _reference_attributes(child):
                        self.fail("Name", "aggregation, delimiter and count name the nodes of a Node without an Id; this one has one")
                elif not text:  # glueinfo writes none of these empty
                    self.foreign = True
                elif tag == "Opsys":
                    sections["os"]["name"] = text
                elif tag == "Arch":
                    sections["os"]["platform_type"] = text
            elif tag == "Feature":
                features = self.features(child)
                if features:
                    sections["static"].setdefault("features", []).extend(features)
            elif tag in sss_node.CATEGORIES:
                once(tag, tag)
                categories.append(child)
        name = given.get("Name")
        if given.get("State") not in sss_node.NODE_STATES or name is None or (
                # the first label, unless the Id is an address (short_name's test is slow: an exception for most names)
                name != hostname.partition(".")[0] or ":" in hostname or hostname.replace(".", "").isdigit()) \
                and name != sss_node.short_name(hostname):
            self.foreign = True
        figures = self.categories(categories, sections, snap)
        self.check_figures(figures)
        self.signed = False  # glueinfo writes the Source Extension in every Node
        self.extensions(extensions, sections, snap, once)
        if not self.signed:
            self.foreign = True
        if "accelerators" in snap:
            self.accelerators(snap)
        snapshot = self.snapshot(snap, sections)
        if source:
            snapshot.source = source
        if self.foreign:
            features = list(sections["static"].get("features", ()))
            snapshot.published = self.published(children, given.get("Name"), given.get("State"), expanded_from, features)
        if len(names) == 1:
            return [snapshot]
        return [_one_of(snapshot, name, expanded_from) for name in names]

    def identity(self, children: list[etree._Element], limit: int) -> tuple[list[str], Optional[str]]:
        """The names this Node stands for, and what names them when that is not one plain Id: the
        Node's own text (a reference, spec 4.4), an Id or a Name with an aggregation (or count)."""
        node = self.node
        assert node is not None
        text = (node.text or "").strip()
        ids = [c for c in children if c.tag == "Id"]
        if text:
            self.node_id = text[:80]
            if children:
                self.fail("Node", "a reference (the node's id as the Node's text, spec 4.4) holds no elements")
            return self.names("Node", text, node, limit), "Node"
        node_form = _reference_attributes(node)
        if len(ids) == 1:
            hostname = (ids[0].text or "").strip()
            self.node_id = hostname[:80]
            holder, where = ids[0], "Id"
            if _reference_attributes(holder):
                if node_form:
                    self.fail("Node", "the Node and its Id both carry aggregation, delimiter or count: give them once")
            elif node_form:
                holder, where = node, "Node"
            else:
                if not hostname or len(hostname) > 255 or hostname.split() != [hostname]:  # split() cuts at what isspace() calls space
                    self.fail("Id", "must be a host name (1-255 characters, no spaces)")
                return [hostname], None
            return self.names(where, hostname, holder, limit), "Id"
        if not ids:
            names = [c for c in children if c.tag == "Name"]
            if len(names) == 1 and (_reference_attributes(names[0]) or node_form):
                expression = (names[0].text or "").strip()
                self.node_id = expression[:80]
                holder = names[0] if _reference_attributes(names[0]) else node
                return self.names("Name", expression, holder, limit), "Name"
        raise NodeXMLError(f"{self.what}: a Node needs exactly one Id, found {len(ids)}")

    def names(self, where: str, expression: str, holder: etree._Element, limit: int) -> list[str]:
        """The node names ``expression`` stands for by ``holder``'s aggregation, delimiter and count,
        each checked as an Id is; at most ``limit`` of them."""
        names = self.expand(where, expression, holder, limit, "node")
        seen: set[str] = set()
        for name in names:
            if not name or len(name) > 255 or name.split() != [name]:
                self.fail(where, f"{name[:80]!r} is not a host name (1-255 characters, no spaces)")
            if name in seen:
                self.fail(where, f"names {name[:80]!r} twice")
            seen.add(name)
        return names

    def expand(self, where: str, expression: str, holder: etree._Element, limit: int, what: str) -> list[str]:
        """The items of a value written with the spec's aggregation (4.4): List (split at ``delimiter``,
        a comma by default; items stripped, empty ones skipped), Range (``prefix[5-23,77]``, as
        glueinfo.core.hostrange reads it) or Pattern (a finite regular expression: every name it
        matches in full); without one, the value itself.  ``count``, when given, must be how many
        there are.  More than ``limit`` is refused before any is made."""
        aggregation, delimiter, count = (holder.get(name) for name in sss_node.REFERENCE_ATTRIBUTES)
        kind = aggregation
        if kind is not None and kind not in sss_node.AGGREGATIONS:
            self.fail(f"{where}/@aggregation", f"{kind[:40]!r} is not List, Pattern or Range")
        if delimiter is not None and kind != "List":
            self.fail(f"{where}/@delimiter", 'applies to aggregation="List" only')
        many = f"more than the {limit} {what}s a document may name"
        if kind is None:
            items = [expression]
        elif kind == "List":
            if delimiter == "":
                self.fail(f"{where}/@delimiter", "is empty")
            separator = "," if delimiter is None else delimiter
            if expression.count(separator) >= limit:
                self.fail(where, f"the List names {many}")
            items = [item for item in (part.strip() for part in expression.split(separator)) if item]
        elif kind == "Range":
            if ":" in expression:  # hostrange would take it for a port
                self.fail(where, f"Range {expression[:80]!r}: a name has no ':'")
            try:
                items = expand_range(expression)
            except HostRangeError as exc:
                self.fail(where, f"Range {' '.join(str(exc).split())}")
        else:
            try:
                items = pattern_names(expression, limit)
            except PatternError as exc:
                self.fail(where, f"Pattern {expression[:80]!r}: {exc}")
        if len(items) > limit:
            self.fail(where, f"the {kind} names {len(items)} {what}s, {many}")
        if count is not None:
            number = self.integer(f"{where}/@count", count, 1, MAX_NODES)
            if number != len(items):
                self.fail(f"{where}/@count", f"{number}, but {len(items)} {what}{'' if len(items) == 1 else 's'} named")
        return items

    def features(self, element: etree._Element) -> list[str]:
        """A Feature's features: a comma-delimited string (Table 1), or an aggregation's items."""
        text = element.text or ""
        if _reference_attributes(element):
            self.foreign = True
            return [item.strip() for item in self.expand("Feature", text, element, MAX_FEATURES, "feature") if item.strip()]
        stripped = text.strip()
        if "," not in text:
            if not stripped or stripped != text:  # glueinfo writes one feature an element, as it is
                self.foreign = True
            return [stripped] if stripped else []
        self.foreign = True
        return [item for item in (part.strip() for part in text.split(",")) if item]

    def amount(self, category: str, element: etree._Element) -> PublishedAmount:
        """A consumable or Resource as published, with the amount :meth:`categories` read (and checked) from it."""
        tag, get, text = str(element.tag), element.get, element.text
        where = f"{category}/{tag}"
        value = self.number(where, text, 0, 1e15) if tag == "Resource" else self.figure(where, tag, text, get("units"))
        return PublishedAmount(tag, text or "", float(value), get("units"), get("metric"), get("wallDuration"),
                               get("consumptionRate"), get("name"), get("type"))

    def published(self, children: list[etree._Element], name: Optional[str], state: Optional[str],
                  expanded_from: Optional[str], features: list[str]) -> PublishedNode:
        """The Node's parts as given, in order (HostSnapshot.published); Id, Name and State as places."""
        parts: list[PublishedPart] = [PublishedPart("Id")] if expanded_from == "Node" else []
        for child in children:
            tag = child.tag
            if tag not in _RANK:
                continue
            if tag in sss_node.CATEGORIES:
                parts.append(PublishedPart(tag, amounts=[self.amount(tag, element) for element in child if element.tag in _AMOUNT_RANK]))
            elif tag == "Extension":
                parts.append(PublishedPart(tag, child.text or "", name=child.get("name"), type=child.get("type")))
            elif tag == "Feature":
                aggregation, delimiter, count = (child.get(a) for a in sss_node.REFERENCE_ATTRIBUTES)
                parts.append(PublishedPart(tag, child.text or "", aggregation=aggregation, delimiter=delimiter, count=count))
            elif tag in _PLACES:
                if tag == "Name" and expanded_from == "Name":
                    parts.append(PublishedPart("Id"))  # each node's Id: the name it was expanded to
                parts.append(PublishedPart(tag))
            else:
                parts.append(PublishedPart(tag, child.text or ""))
        return PublishedNode(name, state, parts, features)

    def snapshot(self, snap: dict[str, Any], sections: dict[str, dict[str, Any]]) -> HostSnapshot:
        """The HostSnapshot of what was read.  Facts read from elements and typed Extensions have
        their model types already; JSON records (adapters, file systems) are checked as
        HostSnapshot.from_dict checks them.  A record of the wrong shape fails on "Extension"."""
        try:
            network = snap.get("network")
            filesystems = snap.get("filesystems")
            return HostSnapshot(
                hostname=snap["hostname"], collected_at=float(snap["collected_at"]), source=snap["source"],
                host_root=snap.get("host_root"),
                cpu=CpuInfo(**sections["cpu"]) if sections["cpu"] else None,
                memory=MemoryInfo(**sections["memory"]) if sections["memory"] else None,
                load=LoadInfo(**sections["load"]) if sections["load"] else None,
                network=None if network is None else from_value(list[NetworkAdapter], network, "snapshot.network"),
                filesystems=None if filesystems is None else from_value(list[FileSystem], filesystems, "snapshot.filesystems"),
                accelerators=snap.get("accelerators"),
                os=OsInfo(**sections["os"]) if sections["os"] else None,
                static=StaticFacts(**sections["static"]) if sections["static"] else None,
                extra=snap.get("extra", {}),
                collectors=[CollectorResult(**record) for record in snap.get("collectors", ())])
        except (ModelError, TypeError) as exc:
            self.fail("Extension", f"{' '.join(str(exc).split())}")

    def categories(self, categories: list[etree._Element], sections: dict[str, dict[str, Any]],
                   snap: dict[str, Any]) -> dict[tuple[str, str], float]:
        """Read Configured/Available/Utilized; returns every consumable figure (category, tag) -> value."""
        figures: dict[tuple[str, str], float] = {}
        resources: dict[tuple[str, Optional[str]], dict[str, Any]] = {}
        for category in categories:
            group = category.tag
            last = -1
            configured = group == "Configured"
            for element in category:
                tag = element.tag
                rank = _AMOUNT_RANK.get(tag)  # None for a comment (its tag is a function) too
                if rank is None:
                    continue  # a consumable from a later spec: not ours to judge
                get = element.get
                units, metric, wall, rate = get("units"), get("metric"), get("wallDuration"), get("consumptionRate")
                # Whether the amount is as glueinfo writes it (_as_glueinfo_writes, its common cases inline: per host read)
                if rank < last:
                    self.foreign = True
                elif configured:
                    if metric is not None or wall is not None or rate is not None or (
                            units != _CONFIGURED_UNITS[tag] and rank != _RESOURCE):
                        self.foreign = True
                elif not (units == "MB" and metric == "Instantaneous" and wall is None and rate is None and rank < _NETWORK) \
                        and not _as_glueinfo_writes(group, tag, units, metric, wall, rate):
                    self.foreign = True
                last = rank
                where = f"{group}/{tag}"
                if tag == "Resource":
                    self.resource(where, group, element, resources)
                else:
                    if (group, tag) in figures:
                        self.fail(where, "given twice")
                    self.check_attributes(where, wall, rate)
                    figures[(group, tag)] = self.figure(where, tag, element.text, units)
                    if self.mark and group != "Configured" and tag in _VOLATILE_FIGURES and isinstance(element.sourceline, int):
                        self.marks[element.sourceline] = (FIGURE_MARK, (group, tag, units))
                        self.marked[element.sourceline] = element
        self.figures = figures
        if ("Configured", "Processors") in figures:
            if figures[("Configured", "Processors")] < 1:
                self.fail("Configured/Processors", "a node has at least one processor")
            sections["cpu"]["logical_cpus"] = int(figures[("Configured", "Processors")])
        for key, field in ((("Configured", "Memory"), "ram_mb"), (("Available", "Memory"), "ram_available_mb"),
                           (("Configured", "Swap"), "swap_mb"), (("Available", "Swap"), "swap_free_mb")):
            if key in figures:
                sections["memory"][field] = int(round(figures[key]))
        if resources:
            snap.setdefault("extra", {})[sss_node.RESOURCES_EXTRA] = {"resources": list(resources.values())}
        return figures

    def figure(self, where: str, tag: str, text: Optional[str], units: Optional[str]) -> float:
        """A consumable's figure (Processors: a count; Network: Mbps; the others: MB), checked."""
        if tag == "Processors":
            return self.integer(where, text, 0, MAX_PROCESSORS)
        if tag == "Network":
            value = self.number(where, text, 0, 3.4e38)
            try:
                value = convert(value, units or "Mbps", "Mbps")
            except UnitError as exc:
                self.fail(where, str(exc))
            if value > MAX_NETWORK_MBPS:
                self.fail(where, f"{format(value, 'g')} Mbps is absurdly large")
            return value
        return self.amount_mb(where, text, units, tag)

    def attributes(self, where: str, element: etree._Element) -> None:
        self.check_attributes(where, element.get("wallDuration"), element.get("consumptionRate"))

    def check_attributes(self, where: str, wall: Optional[str], rate: Optional[str]) -> None:
        """A consumable's wallDuration and consumptionRate, when given, checked."""
        if rate is not None:
            self.number(f"{where}/@consumptionRate", rate, 0, 10**6)
        if wall is not None:
            self.wall_seconds(f"{where}/@wallDuration", wall)

    def wall_seconds(self, where: str, text: str) -> float:
        """A wallDuration in seconds: seconds as written, or an xsd:duration; checked (at most a century)."""
        if text.isdigit() and text.isascii() and len(text) <= FEW_DIGITS and int(text) <= MAX_WALL_S:  # what glueinfo writes, at once
            return float(text)
        if _SECONDS.match(text):
            return self.number(where, text, 0, MAX_WALL_S)
        match = _XSD_DURATION.match(text)
        if match is None:
            self.fail(where, f"{text[:40]!r} is not a number of seconds or an ISO 8601 duration")
        seconds = sum(float(part) * unit for part, unit in zip(match.groups(), _DURATION_SECONDS, strict=True) if part)
        if seconds > MAX_WALL_S:
            self.fail(where, f"{text[:40]!r} is absurdly long (over {MAX_WALL_S} seconds)")
        return seconds

    def resource(self, where: str, category: str, element: etree._Element,
                 resources: dict[tuple[str, Optional[str]], dict[str, Any]]) -> None:
        name = (element.get("name") or "").strip()
        if not name:
            self.fail(where, "a Resource needs a name attribute")
        rtype = element.get("type")
        where = f"{where}[@name={name!r}]"
        self.attributes(where, element)
        value = self.number(where, element.text, 0, 1e15)
        record = resources.setdefault((name, rtype), {"name": name, "type": rtype, "configured": None, "available": None,
                                                      "utilized": None, "units": element.get("units")})
        key = category.lower()
        if record[key] is not None:
            self.fail(where, "given twice")
        record[key] = value

    def check_figures(self, figures: dict[tuple[str, str], float]) -> None:
        """Available and Utilized cannot exceed Configured (a little slack for rounding)."""
        for tag in ("Processors", "Memory", "Swap", "Disk"):
            total = figures.get(("Configured", tag))
            if total is None:
                continue
            for category in ("Available", "Utilized"):
                part = figures.get((category, tag))
                if part is not None and part > total * 1.0001 + 1:
                    self.fail(f"{category}/{tag}", f"{format(part, 'g')} is more than Configured/{tag} ({format(total, 'g')})")

    def extensions(self, extensions: list[etree._Element], sections: dict[str, dict[str, Any]], snap: dict[str, Any],
                   once: Callable[[Any, str], None]) -> None:
        static_ext: dict[str, str] = {}
        by_key = sss_node.EXTENSIONS_BY_KEY
        for element in extensions:
            name = element.get("name")
            etype = element.get("type")
            text = element.text or ""
            if name is None:
                self.fail("Extension", "an Extension needs a name attribute")
            field = by_key.get((name, etype))
            if field is not None:
                once(("Extension", name), f"Extension[@name={name!r}]")
                if field is _SOURCE:
                    self.signed = True
                value = self.known_value(field, text)
                if self.mark and field in _VOLATILE_EXTENSIONS and isinstance(element.sourceline, int):
                    self.marks[element.sourceline] = (EXTENSION_MARK, field)
                    self.marked[element.sourceline] = element
                if field.section == "snapshot":
                    snap[field.attribute] = value
                else:
                    sections[field.section][field.attribute] = _shared(value)
                continue
            where = f"Extension[@name={name!r}]"
            if (name, etype) == sss_node.RUNTIME_ENVIRONMENT:
                sections["static"].setdefault("runtime_environment", []).append(sys.intern(text))
            elif etype == sss_node.TYPE_NETWORK_ADAPTER:
                record = {key: _shared(value) for key, value in self.json_record(where, text).items()}
                record["name"] = sys.intern(name)
                snap.setdefault("network", []).append(record)
            elif etype == sss_node.TYPE_FILESYSTEM:
                record = {key: _shared(value) for key, value in self.json_record(where, text).items()}
                record["mount_point"] = sys.intern(name)
                snap.setdefault("filesystems", []).append(record)
            elif etype == sss_node.TYPE_EXTRA:
                if name in snap.get("extra", {}):
                    self.fail(where, "given twice")
                value = self.json_value(where, text)
                if not isinstance(value, dict):
                    self.fail(where, "a collector's facts must be a JSON object")
                snap.setdefault("extra", {})[name] = value
            elif (name, etype) == sss_node.ACCELERATORS:
                if "accelerators" in snap:
                    self.fail(where, "given twice")
                kinds = self.json_value(where, text)
                if not isinstance(kinds, list) or not all(isinstance(kind, dict) for kind in kinds):
                    self.fail(where, "expected a JSON list of objects")
                if len(kinds) > MAX_ACCELERATOR_KINDS:
                    self.fail(where, f"{len(kinds)} kinds of accelerator: absurdly many (over {MAX_ACCELERATOR_KINDS})")
                snap["accelerators"] = kinds
            elif etype == sss_node.TYPE_COLLECTOR:
                match = _COLLECTOR.match(text.strip())
                if not match:
                    self.fail(where, f"{text[:60]!r} is not 'ok|failed SECONDS SOURCE[: ERROR]'")
                duration = self.number(where, match.group(2), 0, 10**6)
                snap.setdefault("collectors", []).append({
                    "name": name, "success": match.group(1) == "ok", "duration_s": duration,
                    "source": match.group(3), "error": match.group(4)})
            else:  # the admin's [extensions], or another program's: kept by name
                if etype not in sss_node.GLUEINFO_TYPES:
                    self.foreign = True
                static_ext[name] = text
        if static_ext:
            sections["static"]["extensions"] = static_ext

    def accelerators(self, snap: dict[str, Any]) -> None:
        """The Accelerators Extension as the model's Accelerators (checked as HostSnapshot.from_dict
        checks them: a count is a whole number from 0 to MAX_ACCELERATOR_COUNT), and the Configured
        Resources they make (vocabulary.accelerator_resources) taken out of the host's own
        consumables: they are the accelerators' figures, written again from them."""
        where = f"Extension[@name={sss_node.ACCELERATORS[0]!r}]"
        try:
            kinds: list[Accelerator] = from_value(list[Accelerator], snap["accelerators"], "accelerators")
        except ModelError as exc:
            self.fail(where, " ".join(str(exc).split()))
        for kind in kinds:
            if not 0 <= kind.count <= MAX_ACCELERATOR_COUNT:
                self.fail(where, f"count {kind.count} is {'negative' if kind.count < 0 else 'absurdly large'}")
        snap["accelerators"] = kinds
        block = snap.get("extra", {}).get(sss_node.RESOURCES_EXTRA)
        if not block:
            return
        derived = {(name, rtype): float(count) for name, rtype, count in sss_node.accelerator_resources(kinds)}
        own = [record for record in block["resources"]
               if derived.get((record["name"], record["type"])) != record["configured"]
               or record["available"] is not None or record["utilized"] is not None or record["units"] is not None]
        if own:
            block["resources"] = own
        else:
            del snap["extra"][sss_node.RESOURCES_EXTRA]

    def json_value(self, where: str, text: str) -> Any:
        try:
            if text.startswith("\ufeff"):  # as json.loads refuses it
                raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
            return _JSON.decode(text)
        except _NotANumber as exc:
            self.fail(where, f"{exc.args[0]} is not a number")
        except (ValueError, RecursionError) as exc:
            self.fail(where, f"not valid JSON: {' '.join(str(exc).split())[:80]}")

    def json_record(self, where: str, text: str) -> dict[str, Any]:
        record = self.json_value(where, text)
        if not isinstance(record, dict):
            self.fail(where, "expected a JSON object")
        for key, limit in _JSON_LIMITS.items():
            value = record.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not 0 <= value <= limit:
                self.number(f"{where}.{key}", repr(value), 0, limit)  # fails, naming the value
        return record


def _shared(value: Any) -> Any:
    """``value`` with its strings (a list's too) interned: the snapshots of hosts alike then share one
    copy of each (a spool of 10,000 hosts keeps every snapshot), which nothing sees but the memory."""
    if type(value) is str:
        return sys.intern(value)
    if type(value) is list:
        return [sys.intern(item) if type(item) is str else item for item in value]
    return value


class _NotANumber(Exception):
    """NaN or Infinity in a JSON text (the decoder's parse_constant)."""


def _refuse_constant(word: str) -> NoReturn:
    raise _NotANumber(word)


# One decoder for every JSON record (json.loads with options would build a new one per call).
_JSON = json.JSONDecoder(parse_constant=_refuse_constant)
_SINGLE = frozenset({"Name", "Description", "State", "Opsys", "Arch"})
_SOURCE = sss_node.EXTENSIONS_BY_KEY[("Source", "Glueinfo")]
# The Node's children the spec defines, in the order glueinfo writes them, and the amounts of a category.
_RANK = {tag: rank for rank, tag in enumerate(("Id", "Name", "State", "Opsys", "Arch", "Description", "Feature",
                                               "Configured", "Available", "Utilized", "Extension"))}
_AMOUNT_RANK = {tag: rank for rank, tag in enumerate(("Processors", "Memory", "Swap", "Disk", "Network", "Resource"))}
_LAST_RANK = _RANK["Extension"]
_CONFIGURED_UNITS: dict[str, Optional[str]] = {"Processors": None, "Memory": "MB", "Swap": "MB", "Disk": "MB", "Network": "Mbps",
                                              "Resource": None}
_NETWORK, _RESOURCE = _AMOUNT_RANK["Network"], _AMOUNT_RANK["Resource"]
_PLACES = frozenset({"Id", "Name", "State"})  # published as places: their values are the snapshot's


def _reference_attributes(element: etree._Element) -> bool:
    """Whether ``element`` carries any of aggregation, delimiter or count (spec 4.4)."""
    return bool(element.keys()) and any(element.get(name) is not None for name in sss_node.REFERENCE_ATTRIBUTES)


def _as_glueinfo_writes(category: str, tag: str, units: Optional[str], metric: Optional[str], wall: Optional[str],
                        rate: Optional[str]) -> bool:
    """Whether a consumable ``tag`` carries the spec's attributes exactly as glueinfo writes it in
    ``category`` (glueinfo.sss.node_xml): otherwise its Node is another program's."""
    if category == "Configured":
        if metric is not None or wall is not None or rate is not None:
            return False
        if tag == "Processors":
            return units is None
        return tag == "Resource" or units == ("Mbps" if tag == "Network" else "MB")
    if tag == "Processors":
        if metric == "Instantaneous":
            return units is None and wall is None and rate is None
        return metric == "Average" and units is None and wall is not None and (rate is None or category == "Utilized")
    if tag == "Resource":
        return metric == "Instantaneous" and wall is None and rate is None
    return tag != "Network" and units == "MB" and metric == "Instantaneous" and wall is None and rate is None


def _one_of(snapshot: HostSnapshot, name: str, expanded_from: Optional[str]) -> HostSnapshot:
    """One node of a Node that names several: the shared facts (never changed once read), its own
    name, top level, extra and collector list (what a receiver may set)."""
    published = snapshot.published
    if expanded_from == "Name" and published is not None:
        published = dataclasses.replace(published, name=name)
    return dataclasses.replace(snapshot, hostname=name, extra=dict(snapshot.extra), collectors=list(snapshot.collectors),
                               published=published)


def snapshots_from_node(node: etree._Element, what: str = "Node XML", source: Optional[str] = None,
                        limit: int = MAX_NODES) -> list[HostSnapshot]:
    """One ``<Node>`` element -> its snapshots (one per node a reference form names, at most
    ``limit``); ``source`` overrides the one recorded in it."""
    if isinstance(node.tag, str) and node.tag[:1] == "{":  # in a namespace of its own: read a plain copy
        node = _plain(copy.deepcopy(node))
    if node.tag != "Node":
        raise NodeXMLError(f"{what}: expected a Node element, got {node.tag!r}")
    return NodeElementReader(node, what).read(source, limit)


def _plain(element: etree._Element) -> etree._Element:
    """``element`` with its namespace, and its descendants' in the same one, taken off their tags in
    place (a Node in an SSSRMAP Response's namespace, or a document's default namespace, is an SSS
    Node); elements of other namespaces keep theirs, so they are read as nothing the spec defines."""
    tag = element.tag
    if not (isinstance(tag, str) and tag[:1] == "{"):
        return element
    prefix = tag[:tag.index("}") + 1]
    for descendant in element.iter():
        name = descendant.tag
        if isinstance(name, str) and name.startswith(prefix):
            descendant.tag = name[len(prefix):]
    etree.cleanup_namespaces(element)
    return element


def document_root(data: Union[bytes, str, etree._Element], what: str, max_bytes: int) -> etree._Element:
    if isinstance(data, etree._Element):
        if isinstance(data.tag, str) and data.tag[:1] == "{":
            data = copy.deepcopy(data)  # _plain renames in place: not the caller's tree
        return _plain(data)
    try:
        return _plain(parse_xml(data, max_bytes=max_bytes, what=what))
    except XMLInputError as exc:
        raise NodeXMLError(str(exc)) from None


def read_nodes(data: Union[bytes, str, etree._Element], *, what: str = "Node XML", source: Optional[str] = None,
               max_bytes: int = DEFAULT_MAX_BYTES) -> list[HostSnapshot]:
    """A ``<Data>`` of Nodes (or a single ``<Node>``, or an SSSRMAP ``<Response>`` holding a Data) ->
    snapshots, in document order, a Node that names several nodes giving one each (at most
    MAX_NODES in all).  No namespace, or one (the SSSRMAP namespace a Response's Data is in)."""
    root = document_root(data, what, max_bytes)
    if root.tag == "Node":
        return snapshots_from_node(root, what, source)
    if root.tag not in ("Data", "Response"):
        raise NodeXMLError(f"{what}: expected a Node or Data element, got {root.tag!r}")
    container = root if root.tag == "Data" else root.find("Data")
    snapshots: list[HostSnapshot] = []
    seen: set[str] = set()
    for node in (container if container is not None else ()):
        if not isinstance(node.tag, str):
            continue
        for snapshot in snapshots_from_node(node, what, source, MAX_NODES - len(snapshots)):
            if snapshot.hostname in seen:
                raise NodeXMLError(f"{what}: Node {snapshot.hostname!r} appears twice")
            seen.add(snapshot.hostname)
            snapshots.append(snapshot)
    return snapshots


def read_node(data: Union[bytes, str, etree._Element], *, what: str = "Node XML", source: Optional[str] = None,
              max_bytes: int = DEFAULT_MAX_BYTES) -> HostSnapshot:
    """A single host's Node XML (a ``<Node>``, or a ``<Data>`` holding exactly one) -> HostSnapshot."""
    snapshots = read_nodes(data, what=what, source=source, max_bytes=max_bytes)
    if len(snapshots) != 1:
        raise NodeXMLError(f"{what}: expected one Node, found {len(snapshots)}")
    return snapshots[0]
