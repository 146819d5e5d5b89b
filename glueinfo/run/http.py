"""Publish stage: `glueinfo serve`, an HTTP server answering from memory.

Endpoints (GET and HEAD unless said):

- ``/node.xml``   this host as an SSS Node
- ``/nodes.xml``  every host known here as a ``<Data>`` of Nodes
- ``/ldif``       the current GLUE 1.3 LDIF (503 until one has been built)
- ``/health``     JSON: refresh and collector outcomes, snapshot age, host states, and under
  "monitor" the figures ``glueinfo check`` reads
- ``/metrics``    the same figures in the Prometheus exposition format (glueinfo.run.metrics)
- ``/``           a status page for a person (glueinfo.run.status_page)
- ``POST /SSSRMAP3`` an SSSRMAP Envelope; the answer is one Envelope, or one
  per chunk.  Bodies may be framed with Content-Length, correct chunked
  encoding, or the chunked framing Gold/Maui peers really send
  (``<hexlen>\\r\\n<payload>0\\r\\n``: no CRLF after the data, no final CRLF);
  the answer mirrors the request's framing.

A background thread refreshes the snapshots every ``refresh_interval``
seconds (:class:`NodeStore`); requests only read the last finished refresh,
so a slow collector never delays one.  The rendered documents are kept as
bytes and rendered again only when a host's State changes with the clock
(its snapshot going stale).

Limits: request bodies over ``max_body`` bytes are refused (413) without
being read; a connection silent for ``timeout`` seconds is closed; at most
``max_connections`` connections are served at once, others get 503 at once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Optional

from glueinfo import __version__
from glueinfo.core.model import CollectorResult, HostSnapshot
from glueinfo.core.xmlsafe import parse_xml
from glueinfo.run.history import History
from glueinfo.run.http_server import HttpServer, IPNetwork, Limits, Request, Response, is_loopback, parse_allow, text_response
from glueinfo.run.stats import CeStatus, HealthRow, HostRow, Observed, PublishStatus, Status, SubClusterRow
from glueinfo.site.accelerators import group_accelerators
from glueinfo.sss import vocabulary as sss_node
from glueinfo.sss.node_markup_cache import NodeMarkupCache
from glueinfo.sss.node_settings import NodeSettings
from glueinfo.sss.node_state import document_state, node_state
from glueinfo.sss.node_templates import NodeRenderError
from glueinfo.sss.node_xml import node_element, render_data_chunks, to_bytes
from glueinfo.sss.sssrmap import (
    WIRE_BAD_FRAMING,
    WIRE_BODY_TOO_LARGE,
    ObjectSet,
    QueryService,
    envelope,
    failure_bytes,
)

if TYPE_CHECKING:
    from glueinfo.publish.documents import LdifPieces  # a worker's agent never loads the GLUE renderers

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7170
XML_TYPE = "application/xml; charset=utf-8"
SSSRMAP_TYPE = 'text/xml; charset="utf-8"'
QUERY_PATHS = ("/SSSRMAP3", "/SSSRMAP")

# Query paths whose values are cached right after each refresh (in the refresh
# thread), so that the first query on a large site does not pay for them.
WARM_PATHS = ("Id", "State", "Configured/Processors", "Configured/Memory", "Available/Processors", "Available/Memory")


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT', '[v6]:PORT', 'HOST' or ':PORT' -> (host, port); ValueError names the problem."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError(f"listen address {text!r}: expected [IPv6]:PORT")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:
        raise ValueError(f"listen address {text!r}: write an IPv6 address as [ADDRESS]:PORT")
    else:
        host, port_text = text, ""
    host = host or DEFAULT_HOST
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"listen address {text!r}: port {port_text!r} is not a number from 0 to 65535")
    return host, int(port_text)


def listen_origin(listen: Optional[str] = None) -> str:
    """Where the listen address comes from, for a message: ``--listen`` when the command line gave
    ``listen``, else ``[serve] listen``."""
    return "--listen" if listen else "[serve] listen"


def read_key_file(path: str) -> bytes:
    """The shared HMAC key: the file's content without surrounding whitespace; ValueError if unusable."""
    try:
        with open(path, "rb") as handle:
            key = handle.read(65537).strip()
            mode = os.fstat(handle.fileno()).st_mode
    except OSError as exc:
        raise ValueError(f"[serve] key_file: {path}: cannot read: {exc.strerror or exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("key_file %s can be read by other users (mode %o): anyone who reads it can sign requests",
                    path, stat.S_IMODE(mode))
    if not key:
        raise ValueError(f"[serve] key_file: {path}: empty")
    if len(key) > 65536:
        raise ValueError(f"[serve] key_file: {path}: longer than 64 KB")
    return key


@dataclass(frozen=True)
class ServeSettings:
    """[serve], checked: a listen address beyond loopback needs ``key`` or an ``allow`` list
    (``allow_any`` when written ``allow = any``), else ValueError naming the fix."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    refresh_interval_s: float = 60.0
    max_body: int = 1048576
    timeout_s: float = 10.0
    max_connections: int = 4096
    max_per_address: int = 32
    request_deadline_s: float = 30.0
    query_budget_s: float = 2.0
    allow: Optional[tuple[IPNetwork, ...]] = None  # None: every address
    allow_any: bool = False
    key: Optional[bytes] = None

    def __post_init__(self) -> None:
        if self.allow is None and not self.allow_any and self.key is None and not is_loopback(self.host):
            raise ValueError(f"[serve] listen: {self.host}:{self.port} is not loopback and anyone could ask: set [serve] allow "
                             f"to the networks of your clients (e.g. allow = 10.0.0.0/8), or key_file for signed queries, "
                             f"or write allow = any to serve every address")

    @classmethod
    def from_config(cls, config: Any, listen: Optional[str] = None) -> ServeSettings:
        """From the [serve] section; ``listen`` (the command line's) overrides it.  ValueError on bad values,
        naming the key (``[serve] listen: ...``, ``--listen: ...``)."""
        section = config.section("serve")
        try:
            host, port = parse_listen(listen or section["listen"])
        except ValueError as exc:
            raise ValueError(f"{listen_origin(listen)}: {exc}") from None
        key = read_key_file(section["key_file"]) if section["key_file"] else None
        allow_words = [str(w) for w in section["allow"]]
        allow = parse_allow(allow_words)
        return cls(host=host, port=port, refresh_interval_s=float(section["refresh_interval"]),
                   max_body=int(section["max_body"]), timeout_s=float(section["timeout"]),
                   max_connections=int(section["max_connections"]), max_per_address=int(section["max_per_address"]),
                   request_deadline_s=float(section["request_deadline"]), query_budget_s=float(section["query_budget"]),
                   allow=allow, allow_any=allow is None and bool(allow_words), key=key)


# -- the store: snapshots refreshed in the background, documents kept as bytes ------------------


@dataclass
class Refreshed:
    """What one refresh produced: this host, every host (this one included) and notes."""

    local: Optional[HostSnapshot]
    snapshots: list[HostSnapshot]
    problems: list[str] = field(default_factory=list)  # one line each: sources that failed, files unreadable
    ldif: Optional[LdifPieces] = None  # set when the refresher builds LDIF too (the publish's own pieces)
    ldif_error: Optional[str] = None  # the LDIF build failed (why): /health is not ok
    ldif_off: Optional[str] = None  # no LDIF is built, on purpose (why): /ldif says so, /health does not mind
    site: Optional[Any] = None  # the glueinfo.site.assemble.AssembledSite refreshed (for /haizea/site.xml)
    glue2: Optional[list[Any]] = None  # the GLUE 2 entries published with the LDIF (for /glue2.json)
    crr: Optional[bytes] = None  # the site's CRR document (for /crr.json; a few kB, kept as the publish made it)
    # The site's Node XML as the publish made it at ``rendered_at`` (the file output's own pieces, shared),
    # so the store neither renders nor copies it; None: the store renders it.
    nodes_xml: Optional[Sequence[bytes]] = None
    rendered_at: float = 0.0


class NodeObjects:
    """The SSSRMAP Node objects of one view's document, read from it at the first query and kept
    with the view (an lxml tree of 10,000 Nodes is ten times the document: a server nobody
    queries never holds one).  Once a view's objects were queried, the next view's are read in
    the refresh (publish) thread, so a server that is queried keeps answering its clients at
    once.  Thread-safe: concurrent first queries parse once."""

    def __init__(self, document: Sequence[bytes]) -> None:
        self.document = document  # its pieces
        self._lock = threading.Lock()
        self._objects: Optional[ObjectSet] = None

    @property
    def built(self) -> bool:
        """Whether a query has needed them (then the next view's are prepared with the publish)."""
        return self._objects is not None

    def cache_figures(self) -> Optional[tuple[int, int]]:
        """(fields cached, their estimated bytes) of the objects' query cache; None before any query."""
        objects = self._objects
        return (len(objects.cache), objects.cache.bytes) if objects is not None else None

    def get(self) -> ObjectSet:
        with self._lock:
            if self._objects is None:
                whole = b"".join(self.document)  # for this reading only
                root = parse_xml(whole, max_bytes=max(len(whole), 1), what="the site's Node XML", remove_blank_text=True)
                del whole
                objects = ObjectSet("Node", list(root), sss_node.DEFAULT_UNITS)
                objects.warm(WARM_PATHS)
                self._objects = objects
            return self._objects


@dataclass(frozen=True)
class View:
    """The documents served between two State changes; never mutated."""

    rendered_at: float
    valid_until: float  # a host's State may change with the clock from then on
    node_xml: Optional[bytes]
    nodes_xml: Sequence[bytes]  # the document's pieces (the publish's or the markup cache's own), sent as they are
    objects: NodeObjects  # SSSRMAP's Node objects, parsed from nodes_xml when first queried
    states: dict[str, int]


def _state_change_time(snapshots: Sequence[HostSnapshot], now: float, stale_after: float) -> float:
    """When the next host goes stale (or stops being 'from the future'): the view is re-rendered then."""
    moments = []
    for snapshot in snapshots:
        if snapshot.collected_at > 0:
            for moment in (snapshot.collected_at + stale_after, snapshot.collected_at - stale_after):
                if moment > now:
                    moments.append(moment)
    return min(moments, default=float("inf"))


class NodeStore:
    """Holds the latest refresh and the documents rendered from it.

    ``refresh`` is called by the provider's publishes (the ``http`` output,
    glueinfo.run.http_output), never by a request: ``view()`` never waits for
    it, and a refresh that hangs only makes the next ones skip.  Before the
    first refresh has finished there is no view and the server answers 503.
    """

    def __init__(self, refresh: Callable[[], Refreshed], settings: NodeSettings = NodeSettings(),
                 clock: Callable[[], float] = time.time, observed: Optional[Observed] = None,
                 history: Optional[History] = None, role: str = "site"):
        self._refresh = refresh
        self.observed = observed if observed is not None else Observed()
        self.history = history
        self.role = role  # "agent": a worker's serve, whose status page shows its one host
        self._entries: tuple[int, int] = (0, 0)  # (id of the LDIF text, its entries)
        self.settings = settings
        self.clock = clock
        self._data: Optional[Refreshed] = None
        self._view: Optional[View] = None
        self._ldif: Optional[LdifPieces] = None
        self._ldif_error: Optional[str] = "no LDIF built yet"
        self._render_lock = threading.Lock()
        # Held only while (_data, _view) are swapped: a clock re-render (a request's) installs its view only
        # if no refresh or publish replaced the data meanwhile.
        self._swap_lock = threading.Lock()
        self._markup = NodeMarkupCache()
        self._markup_lock = threading.Lock()  # refreshes and clock-driven re-renders may overlap
        self._refresh_lock = threading.Lock()
        self.refreshes = 0
        self.skipped = 0
        self.last_refresh: dict[str, Any] = {}

    # -- refreshing --------------------------------------------------------------------------
    def refresh_once(self, raise_errors: bool = False) -> bool:
        """Run one refresh; on failure keep what is served.  Returns success.

        ``raise_errors``: let the refresher's exception through (the first
        refresh at start-up, where a bad config should stop the command).
        """
        if not self._refresh_lock.acquire(blocking=False):
            self.skipped += 1  # one still running (a hung source): never two at once
            return False
        started = self.clock()
        began = time.perf_counter()
        try:
            data = self._refresh()
            view = self._render(data, data.rendered_at if data.nodes_xml is not None else self.clock())
        except Exception as exc:  # the last good documents stay served
            if raise_errors:
                raise
            log.warning("refresh failed: %s: %s", type(exc).__name__, exc)
            self.last_refresh = {"started_at": started, "duration_s": time.perf_counter() - began, "success": False,
                                 "error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
            return False
        finally:
            self._refresh_lock.release()
        queried = self._view is not None and self._view.objects.built
        with self._swap_lock:
            self._data, self._view = data, view
        if queried:  # a server someone queries: read the new document now, not in their next query
            try:
                view.objects.get()
            except Exception as exc:  # the document was made here; a failure is a bug, the query will say it
                log.warning("SSSRMAP Node objects not prepared: %s: %s", type(exc).__name__, exc)
        if data.ldif is not None:
            self._ldif, self._ldif_error = data.ldif, None
        elif data.ldif_error is not None:
            self._ldif_error = data.ldif_error  # the last good LDIF stays served
        elif data.ldif_off is not None:
            self._ldif_error = data.ldif_off
        self.refreshes += 1
        if data.local is not None:  # serve's collectors run once per refresh: count their failures
            for result in data.local.collectors:
                if not result.success:
                    self.observed.collector_failures[result.name] = self.observed.collector_failures.get(result.name, 0) + 1
        self.last_refresh = {"started_at": started, "duration_s": time.perf_counter() - began, "success": True, "error": None}
        for problem in data.problems:
            log.warning("%s", problem)
        return True

    # -- rendering ---------------------------------------------------------------------------
    def _render(self, data: Refreshed, now: float) -> View:
        """The view of ``data`` at ``now``: the publish's own Node XML when it was made at ``now``
        (the daemon's), else rendered here through this store's markup pieces."""
        settings = self.settings
        snapshots = [snapshot for snapshot in data.snapshots if snapshot.hostname]
        if data.nodes_xml is not None and data.rendered_at == now:
            nodes_xml = data.nodes_xml
        else:
            with self._markup_lock:
                nodes_xml = render_data_chunks(snapshots, now, settings, self._markup)
        node_xml = None
        if data.local is not None:
            try:
                node_xml = to_bytes(node_element(data.local, now, settings))
            except NodeRenderError as exc:
                log.warning("this host: %s", exc)
        states: dict[str, int] = {}
        for snapshot in snapshots:
            state = document_state(snapshot, now, settings) or "Unknown"
            states[state] = states.get(state, 0) + 1
        return View(rendered_at=now, valid_until=_state_change_time(snapshots, now, settings.stale_after_s),
                    node_xml=node_xml, nodes_xml=nodes_xml, states=states, objects=NodeObjects(nodes_xml))

    def update_local(self, local: Optional[HostSnapshot], data: Optional[Refreshed] = None) -> bool:
        """This host's own Node (/node.xml) again, and ``data``'s LDIF and GLUE 2 when given, the
        site's Node documents kept as they are: for a publish in which no host changed (the CE
        figures or the daemon's self-metrics on its own Node did).  Returns False when there is
        nothing rendered yet to keep (refresh instead)."""
        with self._refresh_lock:
            kept, view = self._data, self._view
            if kept is None or view is None:
                return False
            node_xml = None
            if local is not None:
                try:
                    node_xml = to_bytes(node_element(local, view.rendered_at, self.settings))
                except NodeRenderError as exc:
                    log.warning("this host: %s", exc)
            with self._swap_lock:
                self._data = dataclasses.replace(data if data is not None else kept, local=local)
                latest = self._view if self._view is not None else view  # a clock re-render may have landed
                self._view = dataclasses.replace(latest, node_xml=node_xml)
            if data is not None and data.ldif is not None:
                self._ldif, self._ldif_error = data.ldif, None
        return True

    def current_view(self) -> Optional[View]:
        """The current documents when they need no re-rendering (cheap: for the event loop), else None."""
        view = self._view
        return view if view is not None and self.clock() < view.valid_until else None

    def view(self) -> Optional[View]:
        """The current documents, re-rendered first if a host's State has changed with the clock."""
        view = self._view
        if view is None or self.clock() < view.valid_until:
            return view
        if not self._render_lock.acquire(blocking=False):
            return view  # another request is re-rendering: answer with the current documents meanwhile
        try:
            view = self._view
            data = self._data
            if view is not None and data is not None and self.clock() >= view.valid_until:
                rendered = self._render(data, self.clock())
                with self._swap_lock:
                    if self._data is data:  # else a refresh landed meanwhile: its view is newer
                        self._view = rendered
                    view = self._view
        finally:
            self._render_lock.release()
        return view

    def ldif(self) -> tuple[Optional[bytes], Optional[str]]:
        """(the LDIF, made whole for this answer, or None; why not / the last build's error)."""
        pieces = self._ldif
        return (pieces.to_bytes() if pieces is not None else None), self._ldif_error

    def glue2_json(self) -> tuple[Optional[bytes], str]:
        """(the GLUE 2 objects of the last refresh in the OGF JSON rendering, or None and why not)."""
        from glueinfo.glue.glue2.json import glue2_json_document

        data = self._data
        if data is None:
            return None, "starting: no site assembled yet"
        if not data.glue2:
            return None, "no GLUE 2 tree is published ([glue] versions, [site] id, or --no-ldif)"
        return glue2_json_document(data.glue2), ""

    def crr_json(self) -> tuple[Optional[bytes], str]:
        """(the CRR document of the last refresh, as the publish made it, or None and why not)."""
        data = self._data
        if data is None:
            return None, "starting: no site assembled yet"
        if data.crr is None:
            return None, "no CRR document is made ([site] name and id not set, the CE settings refused, or --no-ldif)"
        return data.crr, ""

    def haizea_site(self) -> tuple[Optional[bytes], str]:
        """(the site as a Haizea ``<site>`` now, or None and why not): rendered on request from the
        last refreshed site, its hosts' States as of now (glueinfo.haizea.site.site_document)."""
        from glueinfo.haizea.site import HaizeaError, site_document

        data = self._data
        if data is None or data.site is None:
            return None, "starting: no site assembled yet" if data is None else "this server assembles no site"
        try:
            return site_document(data.site, self.clock(), self.settings), ""
        except HaizeaError as exc:
            return None, str(exc)

    def health(self) -> dict[str, Any]:
        now = self.clock()
        data, view = self._data, self.view()
        local = data.local if data is not None else None
        collectors: list[CollectorResult] = list(local.collectors) if local is not None else []
        age = now - local.collected_at if local is not None and local.collected_at > 0 else None
        state = node_state(local, now, self.settings) if local is not None else None
        reasons = []
        if not self.last_refresh.get("success", False):
            reasons.append(f"the last refresh failed: {self.last_refresh.get('error')}")
        reasons.extend(f"collector {c.name} failed: {c.error}" for c in collectors if not c.success)
        if local is None or age is None:
            reasons.append("this host has no snapshot")
        elif age > self.settings.stale_after_s:
            reasons.append(f"this host's snapshot is {age:.0f} s old, over stale_after ({self.settings.stale_after_s:g} s)")
        if data is not None and data.ldif_error is not None:
            reasons.append(f"the last LDIF build failed: {data.ldif_error}")
        return {
            "status": "starting" if view is None else "degraded" if reasons else "ok",
            "reasons": reasons if view is not None else [],
            "version": __version__,
            "now": datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z"),
            "hostname": local.hostname if local is not None else None,
            "state": state,
            "snapshot_age_s": round(age, 3) if age is not None else None,
            "stale_after_s": self.settings.stale_after_s,
            "refresh": {"count": self.refreshes, "skipped_while_busy": self.skipped, **{k: (round(v, 4) if isinstance(v, float) else v)
                                                     for k, v in self.last_refresh.items()}},
            "collectors": [{"name": c.name, "success": c.success, "duration_s": round(c.duration_s, 4),
                            "error": c.error, "source": c.source} for c in collectors],
            "hosts": {"total": sum(view.states.values()) if view else 0, "states": view.states if view else {}},
            "problems": list(data.problems) if data is not None else [],
            "ldif": {"available": self._ldif is not None, "error": self._ldif_error},
        }


    # -- monitoring -------------------------------------------------------------------------
    def ldif_entries(self) -> Optional[int]:
        """Entries in the LDIF served now, None without one."""
        pieces = self._ldif
        return pieces.entries if pieces is not None else None

    def status(self) -> Status:
        """What monitoring shows now (/metrics, the status page, /health's "monitor"); never raises
        on missing data: what is not known yet is left out."""
        now = self.clock()
        data, view, observed = self._data, self.view(), self.observed
        site = observed.site
        local = data.local if data is not None else None
        notable: list[HostRow] = []
        stale = 0
        ces: list[CeStatus] = []
        subclusters: list[SubClusterRow] = []
        site_name = ""
        if site is not None:
            site_name = site.model.site.name or site.model.site.unique_id
            for host in site.hosts:
                stale += host.stale
                state = node_state(host.snapshot, now, self.settings)
                if host.stale or state == "Unknown":
                    notable.append(HostRow(host.snapshot.hostname, state, host.stale, host.snapshot.collected_at,
                                           tuple(sorted(host.sources))))
            for ce in site.model.ces:
                queue = site.states.get(ce.unique_id)
                record = observed.lrms.get((ce.lrms, ce.queue))
                ces.append(CeStatus(
                    unique_id=ce.unique_id, name=ce.section, cluster=ce.cluster, lrms=ce.lrms, queue=ce.queue,
                    status=queue.status if queue else None, total_cpus=queue.total_cpus if queue else None,
                    free_cpus=queue.free_cpus if queue else None, running_jobs=queue.running_jobs if queue else None,
                    waiting_jobs=queue.waiting_jobs if queue else None, total_jobs=queue.total_jobs if queue else None,
                    collected_at=queue.collected_at if queue else 0.0, error=queue.error if queue else "not asked yet",
                    query_duration_s=record.last_duration_s if record else None, query_runs=record.runs if record else 0,
                    query_failures=record.failures if record else 0, queue_missing=bool(queue and queue.queue_missing),
                    accelerators=queue.accelerators if queue else ()))
            for cluster in site.groups.clusters:
                for group in cluster.subclusters:
                    subclusters.append(SubClusterRow(group.unique_id, group.name, cluster.unique_id,
                                                     tuple(h.hostname for h in group.hosts),
                                                     hardware_rows(group.shared, group.physical_cpus, group.logical_cpus),
                                                     group_accelerators(group.hosts)))
        elif data is not None:
            for snapshot in data.snapshots:
                state = node_state(snapshot, now, self.settings)
                stale += state == "Unknown"
                if state == "Unknown":
                    notable.append(HostRow(snapshot.hostname, state, True, snapshot.collected_at, (snapshot.source,)))
        collectors = tuple(HealthRow(c.name, c.success, c.duration_s, failures=observed.collector_failures.get(c.name, 0),
                                     error=c.error, runs=self.refreshes) for c in (local.collectors if local else ()))
        sources = tuple(HealthRow(name, None if r.runs == 0 else r.last_error is None, r.last_duration_s, r.runs, r.failures,
                                  r.last_error, r.last_success_at, snapshots=r.snapshots, failed_targets=r.failed_targets)
                        for name, r in sorted(observed.sources.items()))
        why = self._ldif_error if self._ldif is None else None
        publish = None
        if self.role != "agent":
            publish = PublishStatus(runs=self.refreshes, ok=why is None, entries=self.ldif_entries(), error=why,
                                    last_at=self.last_refresh.get("started_at"),
                                    last_duration_s=self.last_refresh.get("duration_s"))
        problems = tuple(data.problems) if data is not None else ()
        return Status(
            generated_at=now, version=__version__, role=self.role, site_name=site_name,
            hostname=local.hostname if local is not None else None,
            host_state=node_state(local, now, self.settings) if local is not None else None,
            states=dict(view.states) if view is not None else {}, hosts_total=sum(view.states.values()) if view else 0,
            hosts_stale=stale, hosts_dropped=observed.hosts_dropped,
            claims_refused=observed.claims_refused,
            sssrmap_cache=view.objects.cache_figures() if view is not None else None, ces=tuple(ces), subclusters=tuple(subclusters),
            notable_hosts=tuple(notable), local_host=host_rows(local) if local is not None else (),
            collectors=collectors, sources=sources, publish=publish,
            refresh_ok=bool(self.last_refresh.get("success")) if self.last_refresh else None, problems=problems,
            history=self.history.series() if self.history is not None else {})


_HARDWARE = (("cpu_model", "CPU"), ("cpu_vendor", "vendor"), ("cpu_clock", "clock (MHz)"), ("logical_cpus", "CPUs per host"),
             ("sockets", "sockets"), ("ram", "RAM (MB)"), ("platform", "platform"), ("os_name", "OS"),
             ("os_release", "OS release"))


def hardware_rows(shared: dict[str, Any], physical: Optional[int], logical: Optional[int]) -> tuple[tuple[str, str], ...]:
    """The facts a SubCluster's hosts share, as (label, text); unknown ones left out."""
    rows = [(label, str(shared[key])) for key, label in _HARDWARE if shared.get(key) not in (None, "")]
    if logical is not None:
        rows.append(("CPUs in all", str(logical)))
    if physical is not None:
        rows.append(("sockets in all", str(physical)))
    return tuple(rows)


def host_rows(snapshot: HostSnapshot) -> tuple[tuple[str, str], ...]:
    """One host's main facts as (label, text), for a worker agent's page; unknown ones left out."""
    rows: list[tuple[str, str]] = []
    cpu, memory, load, os_info = snapshot.cpu, snapshot.memory, snapshot.load, snapshot.os
    if cpu is not None:
        for label, value in (("CPU", cpu.model_name), ("CPUs", cpu.logical_cpus), ("sockets", cpu.sockets)):
            if value not in (None, ""):
                rows.append((label, str(value)))
    if memory is not None and memory.ram_mb is not None:
        rows.append(("RAM (MB)", str(memory.ram_mb)))
    if load is not None and load.load1 is not None:
        rows.append(("load (1, 5, 15 min)", " ".join(f"{v:.2f}" for v in (load.load1, load.load5, load.load15) if v is not None)))
    if os_info is not None and os_info.name:
        rows.append(("OS", " ".join(str(v) for v in (os_info.name, os_info.release) if v)))
    return tuple(rows)


# -- HTTP ----------------------------------------------------------------------------------------


class Routes:
    """What each request gets: the documents from the store, SSSRMAP queries from the service.
    The transport (glueinfo.run.http_server) calls it."""

    def __init__(self, store: NodeStore, service: QueryService, settings: ServeSettings,
                 transport_stats: Callable[[], dict[str, int]]):
        self.store, self.service, self.settings = store, service, settings
        self.transport_stats = transport_stats
        self._registry: Any = None

    def registry(self) -> Any:
        """The Prometheus registry of this server (made at the first scrape: prometheus_client is
        imported only by a server that is scraped)."""
        if self._registry is None:
            from glueinfo.run.metrics import make_registry

            self._registry = make_registry(self.store.status)
        return self._registry

    def needs_body(self, request: Request) -> bool:
        return request.method == "POST" and request.path in QUERY_PATHS

    def quick(self, request: Request) -> Optional[Response]:
        """Documents already rendered and the refusals; None for anything that takes work."""
        if request.method not in ("GET", "HEAD", "POST"):
            return text_response(405, f"method {request.method[:20]} not allowed: GET, HEAD, or POST to /SSSRMAP3",
                                 headers=(("Allow", "GET, HEAD, POST"),))
        if request.method == "POST":
            if request.path not in QUERY_PATHS:
                return text_response(404, "POST goes to /SSSRMAP3", close=True)
            if "content-length" not in request.headers and not request.chunked:
                return self._failure(411, WIRE_BAD_FRAMING, "POST needs a Content-Length or chunked Transfer-Encoding")
            return None
        if request.path in ("/node.xml", "/nodes.xml"):
            view = self.store.current_view()
            return self._document(request.path, view) if view is not None else None
        if request.path in ("/health", "/ldif", "/metrics", "/", "/haizea/site.xml", "/glue2.json", "/crr.json"):
            return None
        return text_response(404, f"no such document {request.path[:100]!r}: try /, /node.xml, /nodes.xml, /ldif, /health, "
                                  "/metrics, /glue2.json, /crr.json, /haizea/site.xml, POST /SSSRMAP3")

    def answer(self, request: Request) -> Response:
        if request.method == "POST":
            answers = self.service.handle(request.body)
            if request.chunked:  # the answer mirrors the request's framing
                return Response(200, content_type=SSSRMAP_TYPE, chunks=tuple(answers))
            return Response(200, b"".join(answers), SSSRMAP_TYPE)
        if request.path == "/health":
            report = self.store.health()
            report["http"] = self.transport_stats()
            report["monitor"] = self.store.status().summary()
            return Response(200, json.dumps(report, indent=1).encode() + b"\n", "application/json")
        if request.path == "/metrics":
            from glueinfo.run.metrics import CONTENT_TYPE, exposition

            return Response(200, exposition(self.registry()), CONTENT_TYPE)
        if request.path == "/":
            from glueinfo.run.status_page import CONTENT_TYPE as HTML_TYPE
            from glueinfo.run.status_page import render

            reload_s = int(max(5.0, min(60.0, self.settings.refresh_interval_s)))
            return Response(200, render(self.store.status(), reload_s), HTML_TYPE)
        if request.path == "/glue2.json":
            document, reason = self.store.glue2_json()
            if document is None:
                return text_response(503, f"no GLUE 2 objects to serve: {reason}")
            return Response(200, document, "application/json")
        if request.path == "/crr.json":
            document, reason = self.store.crr_json()
            if document is None:
                return text_response(503, f"no CRR document to serve: {reason}")
            return Response(200, document, "application/json")
        if request.path == "/haizea/site.xml":
            document, reason = self.store.haizea_site()
            if document is None:
                return text_response(503, f"no Haizea site to serve: {reason}")
            return Response(200, document, XML_TYPE)
        if request.path == "/ldif":
            document, why = self.store.ldif()
            if document is None:
                return text_response(503, f"no GLUE LDIF to serve: {why}")
            return Response(200, document)
        return self._document(request.path, self.store.view())

    def refuse_body(self, request: Request, status: int, too_large: bool, message: str) -> Response:
        return self._failure(status, WIRE_BODY_TOO_LARGE if too_large else WIRE_BAD_FRAMING, message)

    def _failure(self, status: int, code: str, message: str) -> Response:
        return Response(status, envelope(failure_bytes(code, message), self.settings.key), SSSRMAP_TYPE, close=True)

    @staticmethod
    def _document(path: str, view: Optional[View]) -> Response:
        if view is None:
            return text_response(503, "starting: no snapshot collected yet", headers=(("Retry-After", "1"),))
        if path == "/nodes.xml":
            return Response(200, content_type=XML_TYPE, parts=view.nodes_xml)
        if view.node_xml is None:
            return text_response(503, "this host has no snapshot (see /health)")
        return Response(200, view.node_xml, XML_TYPE)


class Server:
    """The store, the query service and the HTTP server together.

    Listens at construction (OSError if it cannot); ``start`` serves in the
    background and returns; ``stop`` returns within about two seconds
    whatever the clients or a running query do."""

    def __init__(self, settings: ServeSettings, store: NodeStore, service: Optional[QueryService] = None):
        self.settings = settings
        self.store = store
        self.service = service or make_query_service(settings)
        self.service.register("Node", self._objects)
        limits = Limits(max_body=settings.max_body, timeout_s=settings.timeout_s, request_deadline_s=settings.request_deadline_s,
                        max_connections=settings.max_connections, max_per_address=settings.max_per_address,
                        allow=settings.allow)
        self.httpd = HttpServer(settings.host, settings.port, limits, Routes(store, self.service, settings, self._stats),
                                server_name=f"glueinfo/{__version__}")

    def _objects(self) -> ObjectSet:
        view = self.store.view()
        return view.objects.get() if view is not None else ObjectSet("Node", [], sss_node.DEFAULT_UNITS)

    def _stats(self) -> dict[str, int]:
        return self.httpd.stats()

    @property
    def address(self) -> tuple[str, int]:
        return self.httpd.address

    def start(self) -> None:
        """Serve in a background thread and return (the store is fed by the provider's publishes)."""
        self.httpd.start()

    def stop(self, timeout: float = 2.0) -> None:
        self.httpd.stop(timeout)


def make_query_service(settings: ServeSettings) -> QueryService:
    """The SSSRMAP service with this server's key, body limit and query budget."""
    return QueryService(key=settings.key, max_bytes=settings.max_body, log=lambda message: log.error("%s", message),
                        budget_s=settings.query_budget_s)
