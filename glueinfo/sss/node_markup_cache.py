"""Each host's ``<Node>`` kept between renders (:class:`NodeMarkupCache`): reused while its facts and
State are the same, filled again from its kept template while only its volatile figures changed."""

from __future__ import annotations

from typing import Any, Optional

from glueinfo.core.lastrun import LastRun
from glueinfo.core.model import HostSnapshot
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_state import document_state
from glueinfo.sss.node_templates import COMPACT, PRETTY, VOLATILE_EXTRA, NodeForm, NodeTemplate, node_template


def _lasting_key(snapshot: HostSnapshot, settings: NodeSettings) -> tuple[Any, ...]:
    """What a Node's template reads.  The fact objects themselves, so the key compares by identity
    first (the gatherer hands a host's unchanged facts over as the same objects) and by value
    otherwise, and keeps them alive."""
    memory = snapshot.memory
    if snapshot.published is not None:  # its template holds every figure but the State
        return (snapshot.hostname, snapshot.published, settings, snapshot.cpu, memory, snapshot.load, snapshot.network,
                snapshot.filesystems, snapshot.os, snapshot.static, snapshot.accelerators, tuple(snapshot.extra.items()),
                tuple(snapshot.collectors))
    extra = tuple((name, None if name in VOLATILE_EXTRA else value) for name, value in snapshot.extra.items())
    return (snapshot.hostname, snapshot.source, snapshot.host_root, settings, snapshot.cpu,
            None if memory is None else (memory.ram_mb, memory.swap_mb, memory.virtual_mb),
            snapshot.network, snapshot.filesystems, snapshot.os, snapshot.static, snapshot.accelerators, extra,
            tuple(snapshot.collectors))


def _volatile_key(snapshot: HostSnapshot, state: Optional[str]) -> tuple[Any, ...]:
    """What a Node's slots read, besides its lasting facts."""
    memory = snapshot.memory
    return (state, snapshot.collected_at, snapshot.load,
            None if memory is None else (memory.ram_available_mb, memory.swap_free_mb, memory.virtual_available_mb),
            tuple(snapshot.extra.get(name) for name in VOLATILE_EXTRA))


class _Cached:
    __slots__ = ("lasting", "template", "form", "volatile", "parts")

    def __init__(self, lasting: tuple[Any, ...], template: NodeTemplate, form: NodeForm, volatile: tuple[Any, ...],
                 parts: tuple[Any, ...]) -> None:
        self.lasting, self.template, self.form, self.volatile, self.parts = lasting, template, form, volatile, parts


class NodeMarkupCache:
    """Each host's ``<Node>`` as last rendered, in the form last asked for (compact markup or pretty
    lines), and its template (glueinfo.sss.node_templates).

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

    def _shared(self, template: NodeTemplate, form: NodeForm) -> NodeTemplate:
        """``template`` with its lasting pieces in the type of ``form``'s parts, each piece and group
        of slots the cache's one copy."""
        table = self._pieces
        pieces = list(template.pieces)
        for index, piece in enumerate(pieces):
            if form is PRETTY and isinstance(piece, str):
                piece = piece.encode()
            pieces[index] = table.setdefault(piece, piece)
        return template.with_pieces(tuple(pieces))

    def _parts(self, snapshot: HostSnapshot, now: float, settings: NodeSettings, form: NodeForm) -> tuple[Any, ...]:
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

    def _fill(self, lasting: tuple[Any, ...], template: NodeTemplate, snapshot: HostSnapshot, state: Optional[str],
              form: NodeForm, volatile: tuple[Any, ...]) -> _Cached:
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
