"""Render stage: HostSnapshot(s) -> SSS Node XML (``<Node>``, or ``<Data>`` of Nodes).

What each figure means and where it comes from (the README has the table):

- ``Id`` the host's name as collected (FQDN); ``Name`` its first label.
- ``State`` by glueinfo.sss.node_state.node_state (the rules are there).
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
glueinfo.sss.node_state.document_state (see "a Node other software published"
in glueinfo.sss.node_templates and docs/sss-node-reader.md).

The Node of each host is made from its template (glueinfo.sss.node_templates),
kept between publishes by glueinfo.sss.node_markup_cache; this module puts the
Nodes together into documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional

from lxml import etree

from glueinfo.core.model import HostSnapshot
from glueinfo.core.xmlsafe import parse_xml
from glueinfo.sss.node_markup_cache import NodeMarkupCache
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_state import document_state
from glueinfo.sss.node_templates import COMPACT, node_template

XML_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>\n'


def node_markup(snapshot: HostSnapshot, now: float, settings: NodeSettings = NodeSettings()) -> str:
    """The ``<Node>`` of one host as compact XML text (see the module docstring for every figure)."""
    return node_template(snapshot, settings).fill(snapshot, document_state(snapshot, now, settings), COMPACT)


def node_element(snapshot: HostSnapshot, now: float, settings: NodeSettings = NodeSettings()) -> etree._Element:
    """The ``<Node>`` element of one host."""
    return parse_xml(node_markup(snapshot, now, settings), what=f"Node XML of {snapshot.hostname}")


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
