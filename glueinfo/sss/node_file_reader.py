"""Reading the same Node XML file again: :class:`NodeFileReader` keeps what a full read of a file
(glueinfo.sss.node_reader) found, and reads a rewrite whose only changes are its volatile figures
without parsing it."""

from __future__ import annotations

import hashlib
import itertools
import re
from typing import Any, Optional, Union

from lxml import etree

from glueinfo.core.model import HostSnapshot, ModelError
from glueinfo.core.model import replaced as replaced_copy
from glueinfo.core.xmlsafe import DEFAULT_MAX_BYTES
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_reader import (
    EXTENSION_MARK,
    FEW_DIGITS,
    FIGURE_MARK,
    MAX_MB,
    MAX_PROCESSORS,
    STATE_MARK,
    NodeElementReader,
    NodeXMLError,
    document_root,
    read_node,
)

# A worker rewrites its Node every minute, and mostly only its volatile figures differ: the load, the
# free memory, the Available/Utilized consumables they give, the collection time.  NodeFileReader
# reads such a rewrite without parsing it: see its docstring for what is assumed and checked.

# The facts the figures give (glueinfo writes no Extension for these: checked below, so a figure read
# again cannot be overridden by an unchanged Extension in the full read).
_FIGURE_FACTS = {("Available", "Memory"): "ram_available_mb", ("Available", "Swap"): "swap_free_mb"}
assert not any((f.section, f.attribute) in {("memory", a) for a in _FIGURE_FACTS.values()} for f in sss_node.EXTENSIONS)

# A volatile element alone on its line as glueinfo writes it: its opening tag (attributes of plain
# words only, an Extension's name and type in that order, a consumable's consumptionRate last: the
# one attribute that changes with the load), a text of plain characters (a number, a time, a State
# word: no markup, no reference, no quote, no space), its closing tag, nothing else.
_TEXT = rb"[0-9A-Za-z.:+-]*"
_LINES = {
    EXTENSION_MARK: re.compile(rb'([ \t]*<(Extension) name="[A-Za-z0-9]+" type="[A-Za-z]+")()>(' + _TEXT + rb")</Extension>"),
    FIGURE_MARK: re.compile(rb'([ \t]*<(Processors|Memory|Swap|Disk)(?: (?!consumptionRate=)[A-Za-z]+="[A-Za-z0-9.+-]*")*)'
                            rb'(?: consumptionRate="(' + _TEXT + rb')")?>(' + _TEXT + rb")</\2>"),
    STATE_MARK: re.compile(rb"([ \t]*<(State))()>(" + _TEXT + rb")</State>"),
}
# What is cut out of such a line for the skeleton: from the end of its opening (group 1 above) to its
# closing tag, the (rate, text) of the groups: a figure's optional plain consumptionRate, then ">"
# and the plain text.  Each stops at a character no plain text has ('"', '<'), so the cut is the
# longest one there and the byte after it is the skeleton's again.
_CUTS = {
    EXTENSION_MARK: re.compile(rb"()>(" + _TEXT + rb")").match,
    FIGURE_MARK: re.compile(rb'(?: consumptionRate="(' + _TEXT + rb')")?>(' + _TEXT + rb")").match,
    STATE_MARK: re.compile(rb"()>(" + _TEXT + rb")").match,
}
_RATED, _AVERAGE = ("Utilized", "Processors"), b' metric="Average"'
_STATE_WORDS = frozenset(state.encode() for state in sss_node.NODE_STATES)
_MAX_LINES = 60000  # libxml2 may count source lines only up to 65535
_UTF8 = frozenset({"UTF-8", "US-ASCII", "ASCII"})
_CHECKED = frozenset({"Available", "Utilized"})  # the categories check_figures holds against Configured
assert _CHECKED | {"Configured"} == set(sss_node.CATEGORIES)

# One cut of a layout: (bytes of skeleton before it, kind, what it is (an ExtensionField, a figure's
# (category, tag, units), None for State), whether a consumptionRate may stand there, the most the
# figure may be (check_figures' bound from Configured, which is skeleton) or None).
_Cut = tuple[int, str, Any, bool, Optional[float]]


class _Known:
    """What NodeFileReader keeps of one file's last full read: the digest of its skeleton (the document
    with the volatile texts and rates cut out), where they are cut (a layout, shared by the hosts
    written alike), and the snapshot (never handed out itself: copies are)."""

    __slots__ = ("digest", "layout", "snapshot", "source")

    def __init__(self, digest: bytes, layout: tuple[_Cut, ...], snapshot: HostSnapshot, source: Optional[str]) -> None:
        self.digest, self.layout, self.snapshot, self.source = digest, layout, snapshot, source


def _is_element(kind: str, payload: Any, element: etree._Element, tag: bytes, rate: Optional[bytes], text: bytes) -> bool:
    """Whether the element libxml2 placed on a line is the one element the line holds (tag, names,
    text and rate the same)."""
    if (element.text or "") != text.decode("ascii") or element.tag != tag.decode("ascii"):
        return False
    if kind == FIGURE_MARK:
        parent = element.getparent()
        return (parent is not None and parent.tag == payload[0] and element.tag == payload[1]
                and element.get("consumptionRate") == (None if rate is None else rate.decode("ascii")))
    if kind == EXTENSION_MARK:
        return (element.get("name"), element.get("type")) == (payload.name, payload.type)
    return True


def _skeleton(layout: tuple[_Cut, ...], data: bytes) -> Optional[tuple[bytes, list[re.Match[bytes]]]]:
    """The SHA-256 digest of ``data`` with the cuts ``layout`` places taken out, and the cuts (matches
    of ``_CUTS``); None when one is not there.  Every skeleton piece but the last has the layout's
    length, so two documents with one digest have the same skeleton, piece by piece."""
    sha = hashlib.sha256()  # SHA-256: with SHA instructions, twice BLAKE2b's speed
    update = sha.update
    view = memoryview(data)
    cuts = []
    at = 0
    for length, kind, _, _, _ in layout:
        end = at + length
        update(view[at:end])
        cut = _CUTS[kind](data, end)  # None at or past the end: every cut starts with ">" or a rate
        if cut is None:
            return None
        cuts.append(cut)
        at = cut.end()
    update(view[at:])
    return sha.digest(), cuts


def _quick_figure(tag: str, units: Optional[str], text: bytes) -> Optional[float]:
    """:meth:`NodeElementReader.figure` of what glueinfo writes (plain digits; MB for amounts) at once, or None
    for anything else (which the full checks then take)."""
    if not text.isdigit() or len(text) > FEW_DIGITS:  # isdigit: ASCII digits only, for bytes
        return None
    if tag == "Processors":
        count = int(text)
        return count if count <= MAX_PROCESSORS else None  # integer()'s int(float(text)), the same below 2**53
    if (units or sss_node.DEFAULT_UNITS.get(tag, "MB")) != "MB":
        return None
    value = float(text)  # what number() gives; converting MB to MB is no change
    return value if value <= MAX_MB else None


class NodeFileReader:
    """:func:`read_node` for documents read again and again under one name (a spool file): the
    same snapshot, the same errors, less work when only volatile figures changed.

    After a full read of a lone ``<Node>`` that passes every check, the reader keeps (per ``name``)
    a digest of the document's skeleton: the document with the texts of its volatile elements (State,
    the load Extensions, VirtualMemoryAvailable, CollectedAt, and Available/Utilized Processors,
    Memory, Swap and Disk), and a Utilized Processors' consumptionRate, cut out, and where those cuts
    are.  The next document under that name is read without parsing when all of this holds, and
    fully (exactly :func:`read_node`, its checks and errors) otherwise:

    - it is bytes, at most ``max_bytes``, for the same ``source``; the last one was UTF-8 (or
      ASCII), with no CR and fewer than 60,000 lines;
    - a volatile element of the last one was cut only where libxml2 reported the element's start on
      a line that holds that element alone as glueinfo writes it (``_LINES``: plain-word attributes,
      a text of letters, digits and ``.:+-``) with the very text and attributes the parse gave: a
      start tag cannot contain ``<`` and such a text cannot contain markup, so that line is that
      element, start to end, and nothing else (not a comment, not CDATA); the cut runs from the end
      of its opening (up to a consumptionRate or the ``>``) to its closing tag;
    - in the new document each skeleton piece has the length it had, each cut is again a plain text
      (and, on a Utilized Processors with metric Average, perhaps a plain rate: glueinfo writes one
      only while processors are in use), and the skeleton's SHA-256 digest is the one kept (a
      different skeleton passes only through a collision, which no one knows how to make).

    Then the new document is the last one with other plain texts (and rates) in those elements:
    well-formed, no DTD, no entity, and a full read would find the same elements.  The new texts
    are checked by the code the full read uses (the Extension's value, the figure with its units,
    consumptionRate, Available and Utilized against Configured; State's word is not read), and any
    complaint sends the document to the full read, which gives :func:`read_node`'s one-line
    error.  The snapshot is the last one's with the changed facts replaced; its other parts (CPU,
    OS, adapters, file systems, static facts) are the same objects, which downstream never changes.

    ``quick`` counts the documents read this way, ``full`` the others.  Not thread-safe: one
    reader per source, used by its one gathering thread.
    """

    def __init__(self) -> None:
        self._known: dict[str, _Known] = {}
        self._layouts: dict[tuple[_Cut, ...], tuple[_Cut, ...]] = {}
        self._checks = NodeElementReader(None, "Node XML")  # its complaints only send a document to the full read
        self.quick = 0
        self.full = 0

    def forget(self, name: str) -> None:
        """Drop what is kept of ``name`` (a file gone, or bad)."""
        self._known.pop(name, None)

    def names(self) -> list[str]:
        """The names something is kept of."""
        return list(self._known)

    def read(self, name: str, data: Union[bytes, str], *, what: str = "Node XML", source: Optional[str] = None,
             max_bytes: int = DEFAULT_MAX_BYTES) -> HostSnapshot:
        """The snapshot of ``data`` (:func:`read_node`'s, or its NodeXMLError); a new object each call."""
        known = self._known.get(name)
        if known is not None and isinstance(data, bytes) and len(data) <= max_bytes and known.source == source:
            snapshot = self._again(known, data)
            if snapshot is not None:
                self.quick += 1
                return _handed(snapshot)
        self._known.pop(name, None)
        self.full += 1
        root = document_root(data, what, max_bytes)
        if root.tag != "Node" or not isinstance(data, bytes):
            return read_node(root, what=what, source=source, max_bytes=max_bytes)  # a <Data>, or text: not kept
        reader = NodeElementReader(root, what, mark=True)
        snapshots = reader.read(source)  # what read_node does with a lone <Node>
        if len(snapshots) != 1:
            raise NodeXMLError(f"{what}: expected one Node, found {len(snapshots)}")
        snapshot = snapshots[0]
        if snapshot.published is None:  # another program's Node is read whole every time: its figures are kept as given
            self._remember(name, data, root, reader, snapshot, source)
        return _handed(snapshot)

    def _remember(self, name: str, data: bytes, root: etree._Element, reader: NodeElementReader, snapshot: HostSnapshot,
                  source: Optional[str]) -> None:
        encoding = (root.getroottree().docinfo.encoding or "").upper()
        if encoding not in _UTF8 or b"\r" in data or not reader.marks:
            return
        lines = data.split(b"\n")
        if len(lines) >= _MAX_LINES:
            return
        starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
        cuts: list[tuple[int, int]] = []
        layout: list[_Cut] = []
        at = 0
        for number, (kind, payload) in sorted(reader.marks.items()):
            if not 1 <= number <= len(lines):
                return
            match = _LINES[kind].fullmatch(lines[number - 1])
            if match is None or not _is_element(kind, payload, reader.marked[number], match.group(2), match.group(3), match.group(4)):
                continue  # not alone on its line as expected: kept in the skeleton, so any change reads fully
            rated = kind == FIGURE_MARK and payload[:2] == _RATED and _AVERAGE in match.group(1)
            if kind == FIGURE_MARK and match.group(3) is not None and not rated:
                return  # a rate where glueinfo writes none: the Node is another program's, read fully each time
            bound = None
            if kind == FIGURE_MARK and payload[0] in _CHECKED:
                total = reader.figures.get(("Configured", payload[1]))
                bound = None if total is None else total * 1.0001 + 1  # check_figures' test
            start = starts[number - 1] + match.end(1)
            layout.append((start - at, kind, payload, rated, bound))
            at = starts[number - 1] + match.end(4)
            cuts.append((start, at))
        if not layout:
            return
        shape = tuple(layout)
        shape = self._layouts.setdefault(shape, shape)  # hosts written alike share one
        if len(self._layouts) > 2 * len(self._known) + 64:
            self._layouts = {k.layout: k.layout for k in self._known.values()}
        made = _skeleton(shape, data)
        if made is None or [cut.span() for cut in made[1]] != cuts:  # each cut is the text matched above: a safeguard
            return
        self._known[name] = _Known(made[0], shape, snapshot, source)

    def _again(self, known: _Known, data: bytes) -> Optional[HostSnapshot]:
        """The snapshot of ``data`` read as a rewrite of the last document (see the class), or None."""
        made = _skeleton(known.layout, data)
        if made is None or made[0] != known.digest:
            return None
        checks = self._checks
        changes: dict[str, dict[str, Any]] = {"snapshot": {}, "load": {}, "memory": {}}
        try:
            for (_, kind, payload, rated, bound), cut in zip(known.layout, made[1], strict=True):
                rate, text = cut.groups()
                if kind == EXTENSION_MARK:
                    changes[payload.section][payload.attribute] = checks.known_value(payload, text.decode("ascii"))
                elif kind == FIGURE_MARK:
                    category, tag, units = payload
                    if rate is not None:
                        if not rated:  # where glueinfo writes none: the Node is another program's, which the full read keeps
                            return None
                        checks.number("consumptionRate", rate.decode("ascii"), 0, 10**6)
                    value = _quick_figure(tag, units, text)
                    if value is None:
                        value = checks.figure(tag, tag, text.decode("ascii"), units)
                    if bound is not None and value > bound:
                        return None  # the full read says what is wrong
                    fact = _FIGURE_FACTS.get((category, tag))
                    if fact is not None:
                        changes["memory"][fact] = int(round(value))
                elif text not in _STATE_WORDS:  # another word makes the Node another program's: the full read keeps it
                    return None
        except NodeXMLError:
            return None  # the full read says what is wrong
        previous = known.snapshot
        replaced: dict[str, Any] = {}
        try:
            for section in ("load", "memory"):
                part, values = getattr(previous, section), changes[section]
                if values and part is not None and any(getattr(part, k) != v or type(getattr(part, k)) is not type(v)
                                                       for k, v in values.items()):
                    replaced[section] = replaced_copy(part, **values)
            for attribute, value in changes["snapshot"].items():
                value = float(value) if attribute == "collected_at" else value
                if getattr(previous, attribute) != value:
                    replaced[attribute] = value
        except (ModelError, TypeError):
            return None
        if replaced:
            known.snapshot = previous = replaced_copy(previous, **replaced)
        return previous


def _handed(snapshot: HostSnapshot) -> HostSnapshot:
    """A copy of a kept snapshot to hand out: its own top level, extra and collector list (what a
    receiver may set), the same fact objects."""
    return replaced_copy(snapshot, extra=dict(snapshot.extra), collectors=list(snapshot.collectors))
